"""A compiled step's predicted time: its kernels (jaxcnn.perf.hlo) priced (jaxcnn.perf.price)
at one chip's rates with its platform's fitted constants, and the loop around them
(jaxcnn.perf.host).

    ks = hlo.kernels(compiled.as_text())
    p = predict.predict(ks, rates.pricing(device), "gpu", batch_size=256)
    p.device_step_s, p.loop_step_s, p.as_record()

Three kinds of number meet here, each from one place:

- what the program does, kernel by kernel (FLOPs, bytes, launches): the target's own
  compiler, read by jaxcnn.perf.hlo;
- what the chip can do (peak FLOP/s per precision, memory and interconnect bandwidth):
  the chip table in jaxcnn.perf.chips read by jaxcnn.perf.rates, or what a run measured
  on the chip itself;
- how far real kernels stay below those rates, and what each launch costs: the
  platform's constants in `constants.json`, fitted by one procedure (jaxcnn.perf.fit,
  run by `python -m experiments.cli.fit`) on published measurements and this
  project's own measured records, with the fit's out-of-sample error beside them.

The result is a prediction, never a measurement: it says its method, the constants'
version and their error band (None: unvalidated), and whatever shows it labels it
predicted. The whole-program roofline (jaxcnn.perf.roofline) stays what it is, the roofline
bound: a lower bound only under its assumptions, not a prediction.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxcnn.perf import host as host_lib
from jaxcnn.perf import price
from jaxcnn.perf import runtime as runtime_lib
from jaxcnn.perf.chips import chip_name
from jaxcnn.perf.hlo import Kernel
from jaxcnn.perf.rates import Rates

CONSTANTS_FILE = Path(__file__).with_name("constants.json")
METHOD = "per-kernel"
BOUND_METHOD = "roofline bound"


class ConstantsError(ValueError):
    """A constants file that cannot be trusted: the message names the file and the key
    (jaxcnn.aot raises it as a DataError; perf imports nothing else of jaxcnn)."""


PLATFORMS = ("cpu", "gpu", "tpu")
# The constants every platform has (price.Constants' fields without a default).
REQUIRED = tuple(
    f.name for f in dataclasses.fields(price.Constants) if f.default is dataclasses.MISSING
)
RESTORE = (
    "restore it (git checkout jaxcnn/perf/constants.json) or fit it again "
    "(python -m experiments.cli.fit results/ --write)"
)


@functools.cache
def constants(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The fitted constants file, checked: {"version", "families": {platform: {...}},
    "host"}. A file that cannot be read, is not JSON, or holds a constant that is
    missing, not a number, NaN or out of its range is a ConstantsError naming the file and
    the key, before anything is priced with it (never a prediction recorded null)."""
    file = Path(path or CONSTANTS_FILE)
    try:
        table = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConstantsError(
            f"{file}: cannot read the prediction constants ({e}); {RESTORE}"
        ) from None
    problem = constants_problem(table)
    if problem is not None:
        raise ConstantsError(f"{file}: {problem}; {RESTORE}")
    return table


def constants_problem(table: Any) -> str | None:
    """What is wrong with a constants table (the first thing found), or None."""
    if not isinstance(table, dict):
        return "not a JSON object"
    if not isinstance(table.get("version"), str) or not table["version"]:
        return "version is missing or not a string"
    families = table.get("families")
    if not isinstance(families, dict) or not families:
        return "families is missing or not an object"
    for platform, family in families.items():
        if platform not in PLATFORMS:
            return f"families.{platform}: not a platform ({', '.join(PLATFORMS)})"
        if not isinstance(family, dict):
            return f"families.{platform} is not an object"
        for name in price.PARAMETERS:
            value = family.get(name)
            if value is None:
                if name in REQUIRED:
                    return f"families.{platform}.{name} is missing"
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return f"families.{platform}.{name} is {value!r}, not a number"
            if not math.isfinite(value):
                return f"families.{platform}.{name} is {value}, not a finite number"
        try:
            price.Constants.of(family)
        except ValueError as e:
            return f"families.{platform}: {e}"
    if not isinstance(table.get("host", {}), dict):
        return "host is not an object"
    return None


def family_constants(platform: str, table: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One platform's constants (cpu, gpu or tpu); a KeyError names a platform the file
    has none for."""
    families = (table or constants())["families"]
    if platform not in families:
        raise KeyError(f"no prediction constants for platform {platform!r}")
    return families[platform]


# The loop step's fields of a Prediction, in the order its record block has them
# (jaxcnn.perf.host.loops: the loop step, the epoch and the device loop's step).
LOOP_FIELDS = (
    "loop_step_s",
    "loop_parts",
    "loop_left_out",
    "loop_overlap",
    "loop_bound",
    "loop_parts_basis",
    "loop_parts_platform",
    "loop_launches",
    "loop_band",
    "epoch_s",
    "epoch_steps",
    "epoch_left_out",
    "device_loop_step_s",
)


@dataclasses.dataclass(frozen=True)
class Prediction:
    """One step on one device, predicted. Two predictions, labelled: the device step (the
    chip's kernels and collectives) and, where the host side is known, the loop step
    (what jaxcnn's step loop makes of it on that chip with that host: LOOP_FIELDS, from
    jaxcnn.perf.host.loops, with the epoch and the device loop's step; all None where
    no host side is known)."""

    method: str
    constants_version: str
    device_step_s: float
    images_per_s: float | None
    parts: dict[str, float]  # compute_s, memory_s, overhead_s, collective_s per step
    kernels: float  # launched per step
    rates_source: str | None  # "vendor" or "measured"
    regime: str  # one of REGIMES
    band: dict[str, Any] | None  # error_band's; None: unvalidated
    loop_step_s: float | None = None
    loop_parts: dict[str, float | None] | None = None  # seconds per host part
    loop_left_out: list[str] | None = None  # the host parts without a figure, counted 0
    loop_overlap: str | None = None  # "overlapped" | "serialised"
    loop_bound: str | None = None  # "host" | "device"
    loop_parts_basis: str | None = None  # "measured" | "modelled": how the host parts were had
    loop_parts_platform: str | None = None  # whose client ran the loop they were timed in
    loop_launches: dict[str, Any] | None = None  # the runtime's launches (jaxcnn.perf.runtime)
    loop_band: dict[str, Any] | None = None  # loop_band's; None: the loop step unvalidated
    epoch_s: float | None = None
    epoch_steps: int | None = None
    epoch_left_out: list[str] | None = None
    device_loop_step_s: float | None = None
    formulation: str | None = None  # the program's (jaxcnn.formulation), where known

    def as_record(self) -> dict[str, Any]:
        """A record's `prediction` block (docs/records.md)."""
        looped = self.loop_step_s is not None
        return {
            "method": self.method,
            "constants_version": self.constants_version,
            "device_step_s": self.device_step_s,
            "step_time_s": self.device_step_s,
            "images_per_s": self.images_per_s,
            **self.parts,
            **({name: getattr(self, name) for name in LOOP_FIELDS} if looped else {}),
            "kernels": self.kernels,
            "formulation": self.formulation,
            "rates_source": self.rates_source,
            "regime": self.regime,
            "error_band": self.band,
        }


def predict(
    ks: Sequence[Kernel],
    rates: Rates,
    platform: str,
    batch_size: int,
    *,
    steps: int = 1,
    devices: int = 1,
    chip: str | None = None,
    host: Mapping[str, Any] | None = None,
    launches: Mapping[str, int] | None = None,
    copies: int = 1,
    formulation: str | None = None,
    table: Mapping[str, Any] | None = None,
) -> Prediction | None:
    """One step on one device: `ks` are the kernels of a program of `steps` steps (a
    train step, or a whole-epoch loop) priced at `rates` with `platform`'s fitted
    constants, the sums divided by `steps`. None where the rates cannot price a kernel or
    the platform has no constants. `batch_size` is the step's global batch, `devices`
    the devices it is split over (the kernels are one device's), `chip` what it runs on
    (the chip table's name; a CPU's machine), `host` the host side
    (jaxcnn.perf.host.host_side; None: no loop step), with the runtime's host side
    (jaxcnn.perf.runtime.host_side) of a program launched as `launches`
    (jaxcnn.perf.runtime.launches of `ks` in program order; None: not known) and
    `copies` host-to-device copies per step; `formulation` names the program's. Its band
    (`error_band`) is the one measured on programs of the same regime by the split its
    claim needs."""
    table = table or constants()
    try:
        family = family_constants(platform, table)
    except KeyError:
        return None
    if not rates.can_price or not ks:
        return None
    timed = price.step_time(ks, rates, price.Constants.of(family))
    device_step = timed["seconds"] / steps
    kind = regime(ks, batch_size // max(1, devices) * steps)
    looped = (
        host_lib.loops(
            device_step, host, platform, runtime_lib.host_side(platform, launches, copies)
        )
        if host is not None
        else {}
    )
    band, pairs = _band_and_pairs(family, kind, chip)
    loop = loop_band(table, platform, kind) if looped else None
    # both bands as factors max(p/a, a/p) (error_band's are |p/a - 1|): comparable
    factors, faster = held_out_errors(pairs)
    worsts = ((loop or {}).get("worst"), max(factors, default=None))
    if looped and kernels_band_instead(device_step, looped.get("loop_step_s"), *worsts):
        loop = {"median": statistics.median(factors), "worst": max(factors),
                "observations": len(factors), "faster": faster,
                "split": band["split"], "quantity": DEVICE_STEP,
                "mostly_kernels": True}  # fmt: skip
    return Prediction(
        method=METHOD,
        constants_version=str(table["version"]),
        device_step_s=device_step,
        images_per_s=batch_size / device_step if device_step > 0 else None,
        parts={f"{part}_s": timed[f"{part}_s"] / steps for part in price.PARTS},
        kernels=timed["kernels"] / steps,
        rates_source=rates.source,
        regime=kind,
        band=band,
        **looped,
        loop_band=loop,
        formulation=formulation,
    )


# A program's regime, by the arithmetic of its train step per image: "large" programs
# (ResNet-50 at 224 pixels does ~12 GFLOP per image) spend their step in a few long
# kernels, "small" ones (the seeds' MNIST models do ~1-40 MFLOP per image) in launches
# and copies. The published measurements behind the accelerators' error bands are all
# large, so a band measured on one regime is never shown beside the other.
LARGE_FLOPS_PER_IMAGE = 1e9
REGIMES = ("large", "small")


def regime(ks: Sequence[Kernel], images: int) -> str:
    """ "large" or "small": the FLOPs of one run of the program `ks` per image it trains
    (`images`: the batch per device times the steps one run takes), against
    LARGE_FLOPS_PER_IMAGE."""
    flops = sum(k.flops * k.count for k in ks)
    return "large" if flops / max(1, images) >= LARGE_FLOPS_PER_IMAGE else "small"


# What an error band was measured on: the device step (a step's kernels against steps
# measured alone, or against published figures), or jaxcnn's loop step. A band is only
# shown beside the quantity it names. Constants fitted before bands named it measured
# theirs on the device step.
DEVICE_STEP, LOOP_STEP = "device_step", "loop_step"


def loop_band(table: Mapping[str, Any], platform: str, regime_name: str) -> dict[str, Any] | None:
    """The error band of a loop step of `regime_name` on `platform`: the fit's check of
    it against published JAX loops of programs of that regime, each run on its own host
    and held out of every fit
    ({"median", "worst", "observations", "faster": how many the prediction was the
    faster of, "hosts": the chips they ran on, "split", "quantity": LOOP_STEP}). None,
    unvalidated, with fewer than MIN_BAND_ROWS such loops (the constants' `loop_error`
    still lists them, and the loops of jaxcnn's own measured there)."""
    found = (table.get("loop_error") or {}).get(platform) or {}
    band = (found.get("published_band") or {}).get(regime_name)
    if not band or band["observations"] < MIN_BAND_ROWS:
        return None
    return {**band, "split": LOOP_SPLIT, "quantity": LOOP_STEP}


def held_out_pairs(
    family: Mapping[str, Any], split: str, regime_name: str
) -> list[tuple[float, float]]:
    """(predicted, measured) of the family's device-step observations of `regime_name`,
    each predicted by the fit that left its `split` (chip or program) out."""
    return [(o["held_out_predicted_s"][split], o["measured_s"]) for o in _held_out(
        family, split, regime_name)]  # fmt: skip


def held_out_chips(family: Mapping[str, Any], split: str, regime_name: str) -> list[str]:
    """The chips (the chip table's names) held_out_pairs' observations ran on, each once;
    none where any is not a chip of the table (a CPU's)."""
    names = {chip_name(str(o.get("label")).split(":")[0])
             for o in _held_out(family, split, regime_name)}  # fmt: skip
    return [] if None in names else sorted(names)


def _held_out(family: Mapping[str, Any], split: str, regime_name: str) -> list[dict[str, Any]]:
    """The family's observations of `regime_name` that a fit leaving their `split` out
    predicted, and that were measured."""
    out = []
    for o in family.get("observations") or []:
        predicted, measured = (o.get("held_out_predicted_s") or {}).get(split), o.get("measured_s")
        large = "resnet50" in str(o.get("label"))
        if predicted and measured and (o.get("regime") or REGIMES[not large]) == regime_name:
            out.append(o)
    return out


def held_out_errors(pairs: Sequence[tuple[float, float]]) -> tuple[list[float], int]:
    """The factors max(predicted/measured, measured/predicted) of (predicted, measured)
    `pairs`, and how many of them the prediction was the faster of (which way it errs)."""
    return [max(p / m, m / p) for p, m in pairs], sum(p < m for p, m in pairs)


def held_out_factors(family: Mapping[str, Any], split: str, regime_name: str) -> list[float]:
    """held_out_pairs' factors: the band the report shows, as factors."""
    return held_out_errors(held_out_pairs(family, split, regime_name))[0]


def kernels_band_instead(
    device_step: float | None,
    loop_step: float | None,
    loop_worst: float | None,
    device_worst: float | None,
) -> bool:
    """Whether a loop step takes its device step's band (`error_band`) rather than the
    published JAX loops' (`loop_band`): where its kernels are most of it (more than half)
    and their band is the wider. A loop step that is mostly kernels errs as they do, and
    the published loops checked mostly host-bound steps. The band then names the device
    step as what it was measured on, and `mostly_kernels` says why."""
    if not (device_step and loop_step and device_worst):
        return False
    return 2 * device_step > loop_step and device_worst > (loop_worst or 0.0)


# A loop step's band: published JAX loops, each on its own host, its program held out.
LOOP_SPLIT = "published_jax_loops"
# Fewer held-out observations than this make no band, of a device step or of a loop
# step (published loops): the prediction is then unvalidated, its checks listed apart.
MIN_BAND_ROWS = 5


def error_band(
    family: Mapping[str, Any], regime_name: str, chip: str | None = None
) -> dict[str, Any] | None:
    """The error band a prediction of `regime_name` on `chip` is shown with: measured by
    the split that matches its claim, leave one program out on a chip the fit has
    observations of, leave one chip out on any other; over the family's observations of
    that regime ({"median", "worst", "observations", "split", "quantity": DEVICE_STEP or
    LOOP_STEP}, and "faster": how many of them the prediction was the faster of, where the
    family's observations give each held-out prediction; by chip, "chips": the chips it was
    measured on). None where that split has fewer than MIN_BAND_ROWS observations of that
    regime: the prediction is then unvalidated."""
    return _band_and_pairs(family, regime_name, chip)[0]


def _band_and_pairs(
    family: Mapping[str, Any], regime_name: str, chip: str | None
) -> tuple[dict[str, Any] | None, list[tuple[float, float]]]:
    """error_band's band, and the held-out pairs (held_out_pairs) of its split that it
    counts the direction over, found once for a caller that needs both; (None, [])
    where there is no band."""
    error = family.get("error") or {}
    split = "program" if chip is not None and chip in (error.get("chips") or ()) else "chip"
    band = (((error.get("splits") or {}).get(split) or {}).get("regimes") or {}).get(regime_name)
    if not band or band["observations"] < MIN_BAND_ROWS:
        return None, []
    pairs = held_out_pairs(family, split, regime_name)
    counted = len(pairs) == band["observations"]  # else the direction is not known
    # the chips a band by chip was measured on: a chip outside them is an extrapolation
    chips = held_out_chips(family, split, regime_name) if split == "chip" else []
    return {
        "median": band["median"],
        "worst": band["worst"],
        "observations": band["observations"],
        "split": split,
        "quantity": error.get("quantity", DEVICE_STEP),
        **({"faster": held_out_errors(pairs)[1]} if counted else {}),
        **({"chips": chips} if chips else {}),
    }, pairs
