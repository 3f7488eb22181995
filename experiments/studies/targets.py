"""Would it fit, and how fast, on a chip I do not have? (seeds 000 and 002)

Every zoo model x every target of jaxcnn/targets.py up to 8 chips (one GPU each:
several GPUs of one host are the scaling_targets study's), and the bigger
TPU slices for the ImageNet models (global batch scaling with the chips), in f32 and
bf16: the largest batch whose train step fits the chip's memory, from 16 per device
up to the first batch that does not fit, aiming where memory extrapolated from the
last two fits reaches the chip's, then closing in between the last fit and the first
miss to a sixteenth (compile_only.batch_search), each batch one compile-only record.
GPUs first, then one TPU chip, one TPU host, bigger slices (each compile
costs more); within each, the seeds' models first.

Command: python -m experiments.run --study=targets   (needs .[targets])
Smoke: mnist_cnn on tpu-v5e-1 and gpu-t4, f32, batch 16 to 32.
Expected: hours on this 2-core CPU (resnet50/vgg16 TPU compiles take minutes each).

Its page: what the real TPU and GPU compilers say of chips not at hand, in three kinds of
figure never in one column, each heading saying which: *compiled* (memory, and whether it
fits), *predicted* (the per-kernel model: docs/predictions.md), *measured* (at hand).

"""

from __future__ import annotations

from experiments.studies.base import Study, TargetCell
from experiments.studies.page import (
    BY_CHIP,
    Page,
    Section,
    extra_contains,
    one_chip,
    per_chip,
    rows,
)

IMAGENET_MODELS = ("resnet18", "resnet50", "vgg16")
# The seeds' own models first (000's catsdogs_cnn, 001/003's mnist_cnn, 002/004's
# lenet5_keras and mlp); the rest by size.
TARGETS_FIRST = ("catsdogs_cnn", "mnist_cnn", "lenet5_keras", "mlp")
# The search goes up until the first batch that does not fit; the cap only bounds what a
# search may cost (2**26 / 16: at most 22 doublings from the start), far above where any
# model's memory meets a chip's: at 2**26 images per device the MNIST input batch alone
# (784 bytes an image) needs 49 GiB.
PER_DEVICE_START, PER_DEVICE_CAP = 16, 2**26


def cells(smoke: bool = False) -> list[TargetCell]:
    """The cells to compile, sized as the module docstring says."""
    from jaxcnn import models
    from jaxcnn import targets as targets_lib

    if smoke:
        chosen = [targets_lib.get("gpu-t4"), targets_lib.get("tpu-v5e-1")]
        return [TargetCell("mnist_cnn", t.name, "f32", "single", 16, 1, 32) for t in chosen]

    def tier(t: targets_lib.Target) -> int:  # GPUs, one TPU chip, one TPU host, slices
        return 0 if t.platform == "gpu" else 1 if t.devices == 1 else 2 if t.devices <= 8 else 3

    # Several GPUs of one host hold one GPU's step each: their memory is the one GPU's,
    # and their steps are the scaling_targets study's (experiments/studies/scaling.py).
    # A target using part of a chip (tpu-v2-1: one core) is a published loop's, as are
    # the published networks: compiled for those references, not for this study.
    table = [
        t
        for t in targets_lib.TARGETS.values()
        if (t.platform == "tpu" or t.chips == 1) and t.whole_chips
    ]
    own = set(models.names()) - set(models.published_networks())
    first = [m for m in TARGETS_FIRST if m in own]
    rest = sorted(own - set(first), key=lambda m: sum(models.param_counts(m)))
    names = first + rest
    cells = []
    for level in range(4):
        for model in names:
            if level == 3 and model not in IMAGENET_MODELS:
                continue
            for target in (t for t in table if tier(t) == level):
                for precision in ("f32", "bf16"):
                    n = target.devices
                    strategy = "single" if n == 1 else "sharded"
                    start, cap = PER_DEVICE_START * n, PER_DEVICE_CAP * n
                    cells.append(TargetCell(model, target.name, precision, strategy, start, n, cap))
    return cells


STUDY = Study(
    "targets",
    cells=cells,
    question="Would it fit, and how fast, on a chip not at hand? (seeds 000, 002)",
    page=Page("Chips not at hand: largest batch, TPU against GPU, cost, fraction of peak, "
              "FLOP/s per watt", [
        Section("Largest batch that fits, f32, one chip (compiled; >= where the search is open)",
                lambda t: one_chip(rows(t, quantity="largest_batch", precision="f32")),
                pivot=BY_CHIP),
        Section("TPU or GPU: the faster chip at equal batch (predicted loop step, and device "
                "step)", extra_contains("faster chip per chip", quantity="speedup"),
                "model batch precision device value how"),
        Section("Cost of an epoch at batch 128, f32 (predicted)",
                lambda t: per_chip(t, "usd_per_epoch", models=None), pivot=BY_CHIP),
        Section("Fraction of the datasheet peak at batch 128, f32 (predicted)",
                lambda t: per_chip(t, "mfu", models=None), pivot=BY_CHIP),
        Section("FLOP/s per watt of the board's TDP at batch 128, f32 (predicted; GPUs only: no "
                "TPU's TDP is published)", lambda t: per_chip(t, "flops_per_watt", models=None),
                pivot=BY_CHIP),
    ]),
)  # fmt: skip
