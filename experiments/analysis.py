"""Pure computations the report makes on numbers read from records: where one device
overtakes another, which batch sizes fit in which memory, scaling efficiency, and the
README block rewrite. No plotting, no files: each function is tested on known numbers.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence

Point = tuple[float, float]  # (trainable parameters, seconds per step)

GIB = 2**30

# What seed 000 (cats-vs-dogs CNN, 256x256x3, Keras on TensorFlow) observed, as the
# seed reports it: batch 16 trained on a 2 GB MX150 (Fig. 9), batch 32 failed there
# with "Resource exhausted: OOM when allocating tensor with shape[32,128,64,64]"
# (Fig. 11), batch 128 trained on a 16 GB T4. Claims to test, not measurements.
SEED_000_MODEL = "catsdogs_cnn"  # the seed's network, with its 21,463,713 parameters
# Seed 000's training set: "1250/1250" steps of batch 16 per epoch in its MX150 log
# (experiments/published_references.json, row seed000-mx150-catsdogs): 20,000 images.
SEED_000_TRAIN_IMAGES = 20_000
SEED_000_OBSERVED: tuple[tuple[str, int, bool], ...] = (
    ("MX150 2 GB", 16, True),
    ("MX150 2 GB", 32, False),
    ("T4 16 GB", 128, True),
)


def _common(points_a: Sequence[Point], points_b: Sequence[Point]) -> list[tuple[float, ...]]:
    """(params, seconds on A, seconds on B) at the sizes both sides have a figure for."""
    b = dict(points_b)
    return sorted((p, t, b[p]) for p, t in points_a if p in b and t > 0 and b[p] > 0)


def crossover_point(points_a: Sequence[Point], points_b: Sequence[Point]) -> float | None:
    """Trainable parameters at which device B's step time drops below device A's.

    Points are (params, s/step) at the sizes both sides have (measured or predicted).
    Step time is compared in log-log space and interpolated linearly there between the
    two bracketing sizes:
    with d = log(t_B / t_A), the crossing is where d goes from >= 0 to < 0. The last
    such crossing is returned, so that B is faster at every measured size above it
    (noise near the crossing can make d change sign more than once). None when B is
    never slower-then-faster: it is faster everywhere, slower everywhere, or the two
    measured no common sizes (see `faster_at_ends`).
    """
    common = _common(points_a, points_b)
    logs = [(math.log(p), math.log(tb / ta)) for p, ta, tb in common]
    crossing = None
    for (x0, d0), (x1, d1) in itertools.pairwise(logs):
        if d0 >= 0 > d1:
            x = x0 + d0 * (x1 - x0) / (d0 - d1)  # where the line through d0, d1 is 0
            crossing = math.exp(x)
    return crossing


def faster_at_ends(points_a: Sequence[Point], points_b: Sequence[Point]) -> tuple[str, str] | None:
    """Which device ("A", "B" or "tie") is faster at the smallest and at the largest
    size both measured; None when they have no size in common."""
    common = _common(points_a, points_b)
    if not common:
        return None

    def faster(ta: float, tb: float) -> str:
        return "tie" if ta == tb else ("A" if ta < tb else "B")

    return faster(*common[0][1:]), faster(*common[-1][1:])


def scaling_efficiency(throughput: dict[int, float]) -> dict[int, float]:
    """{devices N: throughput_N / (N x throughput_1)} from images/s per device count.

    Weak scaling (per-device batch fixed): the fraction of N perfect copies of one
    device. Strong scaling (global batch fixed): speedup_N / N with speedup_N = t_1 / t_N
    = throughput_N / throughput_1, so the same formula. Empty without an N = 1 point.
    """
    base = throughput.get(1)
    if not base:
        return {}
    return {n: value / (n * base) for n, value in sorted(throughput.items())}


def mean_spread(values: Sequence[float | None]) -> tuple[float, float, float, float] | None:
    """(mean, standard deviation, min, max) of the values that are not None."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    spread = statistics.pstdev(present) if len(present) > 1 else 0.0
    return statistics.fmean(present), spread, min(present), max(present)


README_START = "<!-- results:start -->"
README_END = "<!-- results:end -->"


class MissingMarkers(ValueError):
    """The README lacks the start/end markers of the generated block."""


def replace_block(text: str, block: str, start: str = README_START, end: str = README_END) -> str:
    """`text` with what lies between `start` and `end` replaced by `block` on its own
    lines; everything outside the markers, the markers included, is kept as it is."""
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise MissingMarkers(f"needs one {start} line followed by one {end} line")
    head = text[: text.index(start) + len(start)]
    tail = text[text.index(end) :]
    newline = "\r\n" if "\r\n" in text else "\n"
    body = newline.join(block.strip("\n").splitlines())
    return f"{head}{newline}{body}{newline}{tail}"
