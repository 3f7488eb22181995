"""Does data parallelism scale? And model parallelism?

Seed 001's multi-GPU recipe: replicate the model, split the batch, average the
gradients, update. `mnist_cnn` and `mlp` (n=1024) under `pmap` and `sharded` on
1, 2, 4, ... devices (all there are), timing only on synthetic data: weak scaling
(128 per device, global batch 128 x N) and strong scaling (global batch 128 x the
largest N, split over N): throughput and efficiency vs 1 device. Beside them, seed
004's model parallelism: the same step with its weights split over the devices
(`model`; `data_model` on a 2-D mesh from 4 devices), at the strong scaling's global
batch, where the split rule finds weights to split.

Command: python -m experiments.run --study=scaling --device=tpu  (a v5e-8 has 8)
Sizes: full everywhere; a CPU has one device, so N=1 only (fake CPU devices share
the same cores and would measure nothing). Smoke: `mlp` n=8 only, N = 1 and all
(8 fake devices in tests), 8 per device.
Expected: CPU ~1 min; smoke ~10 s with 8 fake devices; TPU v5e-8 ~2 min (a guess).

Compiled for GPUs not at hand (1-8 of one host, `target_cells`): python -m
experiments.run --study=scaling_targets  (needs .[targets]; ~11 min here for 75 cells,
~20 s each for the weights split).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from experiments.records.workload import Workload
from experiments.studies.base import TINY_MLP, Context, Study, TargetCell
from experiments.studies.page import BAND_EITHER_WAY, Page, Section, rows, select

if TYPE_CHECKING:  # the annotations only: importing a study imports no pandas
    import pandas as pd


def device_counts(available: int) -> list[int]:
    """1, 2, 4, ... up to `available`, and `available` itself if not a power of two."""
    counts = [2**i for i in range(available.bit_length()) if 2**i <= available]
    return counts + ([available] if counts[-1] != available else [])


SCALING_PER_DEVICE_BATCH = 128
# The model-parallel placements and the fewest devices each splits over (data_model: a
# 2-D mesh of at least 2 x 2).
MODEL_SPLITS = {"model": 2, "data_model": 4}

# Compiled, not run: the data-parallel step on the GPUs of one host (jaxcnn.targets:
# 2 and 4 x T4, 2-8 x V100 / A100 / H100) and on one of each, at a fixed batch per GPU
# (weak scaling), for `python -m experiments.run --study=scaling_targets`. The seeds'
# models: the measured study's two (mnist_cnn, mlp n=1024, 128 per device, so the
# compiled curves sit beside the measured ones), seed 002's widest mlp and LeNet-5,
# and seed 000's cats-vs-dogs CNN at its batch of 16.
TARGET_SCALING_MODELS: tuple[tuple[str, tuple[tuple[str, int], ...], int], ...] = (
    ("mnist_cnn", (), SCALING_PER_DEVICE_BATCH),
    ("mlp", (("width", 1024),), SCALING_PER_DEVICE_BATCH),
    ("mlp", (("width", 4096),), SCALING_PER_DEVICE_BATCH),
    ("lenet5_keras", (), SCALING_PER_DEVICE_BATCH),
    ("catsdogs_cnn", (), 16),
)
TARGET_SCALING_CHIPS = ("T4", "V100 SXM2", "A100", "H100 SXM")
# Model parallelism compiled for the same GPUs: seed 000's CNN (the largest seed model)
# with its weights split over 2-8 GPUs (`model`), at the same batch per GPU as its
# data-parallel cells, so both placements' efficiencies are of one per-GPU batch.
TARGET_SPLIT_MODELS = ("catsdogs_cnn",)


def target_cells(smoke: bool = False) -> list[TargetCell]:
    """The compiled weak-scaling cells: TARGET_SCALING_MODELS on TARGET_SCALING_CHIPS' one-host
    targets (one GPU: the curve's base), f32, the batch fixed per GPU (one compile where it
    fits); then TARGET_SPLIT_MODELS split over 2-8 GPUs. Smoke: mnist_cnn on one and two T4s."""
    from jaxcnn import targets as targets_lib

    chosen = [
        t
        for t in targets_lib.TARGETS.values()
        if t.platform == "gpu" and t.chip in TARGET_SCALING_CHIPS
    ]
    models = TARGET_SCALING_MODELS
    if smoke:
        chosen = [t for t in chosen if t.chip == "T4" and t.chips <= 2]
        models = models[:1]
    chosen = sorted(chosen, key=lambda t: (TARGET_SCALING_CHIPS.index(t.chip), t.chips))
    split = [m for m in models if m[0] in TARGET_SPLIT_MODELS and not smoke]

    def cell(model: str, overrides: tuple, per_gpu: int, t: Any, strategy: str) -> TargetCell:
        batch = per_gpu * t.devices
        return TargetCell(model, t.name, "f32", strategy, batch, t.devices, batch, overrides)

    return [
        cell(model, overrides, per_gpu, t, "sharded" if t.devices > 1 else "single")
        for model, overrides, per_gpu in models
        for t in chosen
    ] + [
        cell(model, overrides, per_gpu, t, "model")
        for model, overrides, per_gpu in split
        for t in chosen
        if t.devices >= MODEL_SPLITS["model"]
    ]


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    per_device, chosen = SCALING_PER_DEVICE_BATCH, ("mnist_cnn", "mlp")
    counts = device_counts(ctx.num_devices)
    timing = 20
    if ctx.smoke:
        per_device, chosen, timing = 8, ("mlp",), 3
        counts = sorted({1, ctx.num_devices})
    overrides = {"mnist_cnn": {}, "mlp": TINY_MLP if ctx.smoke else {"width": 1024}}
    strong_batch = per_device * max(counts)
    # The smoke's MLP is too narrow for the split rule over 8 devices: 32 features split.
    split_overrides = {**overrides, "mlp": {"width": 32}} if ctx.smoke else overrides
    runs = [
        (model, overrides[model], strategy, mode, n)
        for model in chosen
        for strategy in ("pmap", "sharded")
        for mode in ("weak", "strong")
        for n in counts
    ] + [
        (model, split_overrides[model], strategy, "strong", n)
        for model in chosen
        for strategy in MODEL_SPLITS
        for n in counts
        if n >= MODEL_SPLITS[strategy]
    ]
    return [
        Workload(
            model=model,
            model_overrides=model_overrides,
            dataset="synthetic",
            batch_size=per_device * n if mode == "weak" else strong_batch,
            epochs=0,
            timing_steps=timing,
            strategy=strategy,
            study="scaling",
            num_devices=n,
            scaling=mode,
        )
        for model, model_overrides, strategy, mode, n in runs
    ]


SCALES_AT = 0.8
SCALES_RULE = (
    "a model scales over GPUs where its lowest weak-scaling efficiency (f32, the per-GPU "
    "batch held) over 2-8 GPUs is at least 80% of ideal; a predicted one only where it "
    "stays so divided by its band's worst (no where it stays below multiplied by it), "
    "unvalidated where no band of published 1-vs-N-GPU pairs covers the model"
)
EFFICIENCY_BAND = "scaling efficiency against published"


def gpu_verdicts(t: pd.DataFrame, split: bool = False) -> list[dict[str, Any]]:
    """SCALES_RULE per model, most efficient first: its lowest efficiency's `row`, `verdict`
    (yes, no, undecided, unvalidated) and `at_worst` (at its band's worst, where banded); of
    the data-parallel placements, or with `split` of those that split the weights too."""
    s = rows(t, quantity="scaling_efficiency", precision="f32", selection="equal-batch",
             platform="gpu")  # fmt: skip
    s = s[s.placement.isin(MODEL_SPLITS) == split]
    out = []
    for model, m in s.groupby("model"):
        r = m.loc[m.value.idxmin()].to_dict()
        at_worst, verdict = None, "unvalidated"
        if r["kind"] == "measured":
            verdict = "yes" if r["value"] >= SCALES_AT else "no"
        elif r["spread"] == BAND_EITHER_WAY:  # banded: its lo and hi are the band's reach
            at_worst = r["lo"]
            verdict = ("yes" if at_worst >= SCALES_AT else
                       "no" if r["hi"] < SCALES_AT else "undecided")  # fmt: skip
        out.append({"model": model, "row": r, "verdict": verdict, "at_worst": at_worst})
    return sorted(out, key=lambda v: -v["row"]["value"])


def verdict_words(t: pd.DataFrame) -> str:
    """The page's verdict: each model's, by SCALES_RULE."""
    said = [f"{v['model']} {v['verdict']}" for v in gpu_verdicts(t)]
    split = [f"{v['model']} {v['verdict']}" for v in gpu_verdicts(t, split=True)]
    said += [f"weights split: {'; '.join(split)}"] if split else []
    return f"{'; '.join(said)} (the rule: {SCALES_RULE})" if said else ""


STUDY = Study(
    "scaling",
    workloads=workloads,
    question=(
        "Does data parallelism (pmap, sharded) scale over devices, and what does model "
        "parallelism (model, data_model) do? (seeds 001, 004)"
    ),
    page=Page("Data parallelism: predicted weak scaling", [
        Section("Efficiency against the fewest devices of the same chip compiled at that "
                "per-device batch (batch: all its devices' together; named under how it ran; "
                "100% is ideal)",
                select(quantity="scaling_efficiency"),
                "model batch precision device value how flag", verdict=verdict_words),
    ]),
)  # fmt: skip
