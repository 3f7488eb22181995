"""How much faster is the accelerator than the CPU for the MNIST CNN?

Seed 001: 0.35-1.05 s/batch on a CPU vs 0.018 s/batch on a K80; seed 003: 5 epochs
on a CPU vs a T4. `mnist_cnn` and `lenet5_keras` on MNIST, batch 128, 5 epochs, on
one device: s/step, s/epoch, test accuracy; the report divides each accelerator's
step time by the CPU record's.

Command: python -m experiments.run --study=devices --device=gpu --data-dir=DIR
Sizes: full everywhere (the CPU runs it in minutes).
Expected: CPU ~5 min (mnist_cnn ~45 s/epoch, lenet5_keras ~7 s/epoch);
smoke ~5 s; GPU/TPU ~1 min (a guess).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from experiments.records.workload import Workload
from experiments.studies.base import SMOKE_TRAIN, Context, Study, dataset_for
from experiments.studies.page import (
    AT_ITS_BEST,
    BY_CHIP,
    LOOP,
    OURS_FOR_PUBLISHED,
    SEED_MODELS,
    Page,
    Section,
    of_ensembles,
    on_seed_data,
    one_chip,
    per_chip,
    reference_cpu,
    rows,
    select,
    where,
)

if TYPE_CHECKING:  # the annotations only: importing a study imports no pandas
    import pandas as pd


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    common = {"dataset": dataset_for(ctx), "batch_size": 128, "epochs": 5, "timing_steps": 20}
    if ctx.smoke:
        common = SMOKE_TRAIN
    return [
        Workload(model=m, study="devices", num_devices=1, **common)
        for m in ("mnist_cnn", "lenet5_keras")
    ]


def loop_over_loop(t: pd.DataFrame, model: str | None = None) -> pd.DataFrame:
    """Each chip's seed-model jaxcnn's loop at b128, f32 (or predicted loop step) over the
    reference CPU's, on the data the measured chips ran on (mnist where none did)."""
    found = rows(t, quantity="speedup", selection="loop-vs-loop", batch=128, precision="f32",
                 model=model or SEED_MODELS)  # fmt: skip
    found = one_chip(found[found.extra.str.startswith(f"{LOOP} vs {reference_cpu(t)}'s on ")])
    keep = found.index[:0]
    for _, same in found.groupby("model"):
        measured = same[same.kind == "measured"]
        dataset = measured.dataset.mode().iloc[0] if len(measured) else "mnist"
        keep = keep.append(same.index[same.extra.str.endswith(f"'s on {dataset}")])
    return found.loc[keep]


def at_its_best(t: pd.DataFrame) -> pd.DataFrame:
    return _over_the_cpu(t, "cpu-best", " at its best")


def each_at_its_best(t: pd.DataFrame, **where: object) -> pd.DataFrame:
    """Each chip's fastest seed-model step at b128, f32 (a predicted chip's kernels alone)
    over the reference CPU's fastest."""
    best = _over_the_cpu(t, "cpu-best", " at its best", AT_ITS_BEST, "device_step_s")
    return rows(best, **where)


def _over_the_cpu(
    t: pd.DataFrame, selection: str, suffix: str, own: str = LOOP, quantity: str | None = None
) -> pd.DataFrame:
    """Each chip's seed-model step at b128, f32 (`own`, or predicted: `quantity`, by default
    the loop step where predicted) over the reference CPU's: the same program
    (like-for-like) or its fastest (cpu-best)."""
    found = rows(t, quantity="speedup", selection=selection, batch=128)
    cpu = reference_cpu(t)
    loop = "loop_step_s" if found.extra.str.startswith("loop_step_s").any() else "device_step_s"
    extra = [f"{quantity or loop} vs {cpu}{suffix}", f"{own} vs {cpu}{suffix}"]
    return one_chip(rows(on_seed_data(found), extra=extra, model=SEED_MODELS, precision="f32"))


STUDY = Study(
    "devices",
    workloads=workloads,
    question="How much faster is the accelerator than the CPU for the MNIST CNN? (seeds 001, 003)",
    page=Page("The seeds' models per device: steps, epochs, speedups", [
        Section("One train step at batch 128, f32, predicted: the chip's kernels (device step)",
                lambda t: per_chip(t, "device_step_s"), pivot=BY_CHIP),
        Section("The same step as jaxcnn's loop sees it on that chip with its host (loop step)",
                lambda t: per_chip(t, "loop_step_s"), pivot=BY_CHIP),
        Section("Measured: jaxcnn's loop over the CPU's jaxcnn's loop, each device in the "
                "formulation jaxcnn picks there by default (what a user running the same fit "
                "sees: what the answers divide by)",
                lambda t: loop_over_loop(t).query("kind == 'measured'"),
                "model batch dataset device value how"),
        Section("The same loops measured in each other sitting of a chip (another lease or "
                "version of the code), the newest's above: how far a sitting moves them",
                select(quantity="step_s", selection="earlier-sitting", model=SEED_MODELS,
                       batch=128),
                "model batch dataset device value spread how"),
        Section("Predicted: the chip's loop step over the same CPU's jaxcnn's loop",
                lambda t: loop_over_loop(t).query("kind == 'predicted'"), pivot=BY_CHIP),
        Section("The chip's loop over the CPU at its best (its fastest program, timed alone "
                "without jaxcnn's loop): a chip by its name measured (jaxcnn's loop), a "
                "gpu-/tpu- target predicted (its loop step)", at_its_best, pivot=BY_CHIP),
        Section("Each at its best (the answers' \"kernels at best\"): "
                "a chip by its name measured (its own fastest step), a "
                "gpu-/tpu- target predicted (its kernels alone), over the CPU's fastest program",
                each_at_its_best, pivot=BY_CHIP),
        Section("Over the same CPU running the same program as the chip (xla formulation, "
                "step loop: like for like, not the answers' baseline)",
                lambda t: _over_the_cpu(t, "like-for-like", ""), pivot=BY_CHIP),
        Section("Every epoch measured on a GPU at batch 128 (each pool of runs, its epochs' "
                "min-max), beside the epoch its loop step implies: runs of one chip and "
                "sitting differ by as much as their epochs do",
                lambda t: t[(t.quantity == "epoch_s") & (t.platform == "gpu")
                            & t.model.isin(SEED_MODELS) & (t.batch == 128)
                            & ((t.kind == "measured") | t.extra.str.endswith(f"of {LOOP}"))
                            & ~of_ensembles(t)  # K models': the ensemble page's
                            ].sort_values(["model", "dataset", "precision", "device", "kind"]),
                "model dataset precision device kind value spread how"),
        Section("Each device's own steps at batch 128 (measured; the seed-models plot's "
                "CPU lines and GPU points)",
                where(lambda t: (t.quantity == "step_s") & (t.kind == "measured")
                      & t.model.isin(SEED_MODELS) & (t.devices == 1) & (t.batch == 128)
                      & (t.selection != "earlier-sitting") & ~of_ensembles(t)),
                "model dataset precision device quantity value spread how"),
        Section("Published figures of these models and our prediction of each",
                where(lambda t: t.model.isin(SEED_MODELS)
                      & ((t.kind == "published") | (t.quantity == "error_factor")
                         | t.note.astype(str).str.startswith(OURS_FOR_PUBLISHED))),
                "model batch device kind quantity value how note"),
    ]),
)  # fmt: skip
