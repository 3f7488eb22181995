"""Same model, same accuracy on every device?

Seed 000 (Fig. 14): accuracy and loss per epoch. `mnist_cnn` on MNIST and on
Fashion-MNIST, batch 128: per-epoch train/test loss and accuracy; the report
overlays the devices' curves. On MNIST three seeds of `mnist_cnn` and of
`lenet5_keras` (the devices study trains its seed 0): how far one device's seeds land
apart is what a gap between devices is judged against, model by model (a device
changes the order of a reduction's sums, as a seed changes the draws).

Command: python -m experiments.run --study=accuracy --device=gpu --data-dir=DIR
Sizes: 10 epochs on accelerators; CPU: 5 epochs; seeds 0-2 of both on MNIST, seed 0
of `mnist_cnn` on Fashion-MNIST. Smoke: `mlp` n=8 on digits only
(it stands in for both datasets, so one workload), 2 epochs (44 steps each) at
batch 32.
Expected: CPU ~20 min (`lenet5_keras` ~1 min a seed); smoke ~5 s; one H100 ~2 min (measured
once); a TPU unmeasured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from experiments.records.workload import Workload
from experiments.studies.base import TINY_MLP, Context, Study
from experiments.studies.page import Page, Section, where

if TYPE_CHECKING:  # the annotations only: importing a study imports no pandas
    import pandas as pd


SEEDS = (0, 1, 2)  # on MNIST: the seed spread the devices' gap is judged against
SEEDED = ("mnist_cnn", "lenet5_keras")  # the seed models row 4 compares across devices


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    runs = [(model, {}, "mnist", seed) for model in SEEDED for seed in SEEDS]
    runs.append(("mnist_cnn", {}, "fashion_mnist", 0))
    common = {"batch_size": 128, "epochs": 5 if ctx.cpu else 10, "timing_steps": 20}
    if ctx.smoke:  # digits stands in for both datasets: one workload
        runs = [("mlp", TINY_MLP, "digits", 0)]
        common = {"batch_size": 32, "epochs": 2, "timing_steps": 3}
    common |= {"study": "accuracy", "num_devices": 1}
    return [
        Workload(model=model, model_overrides=overrides, dataset=dataset, seed=seed, **common)
        for model, overrides, dataset, seed in runs
    ]


def per_epoch(t: pd.DataFrame) -> pd.DataFrame:
    """Every run's test accuracy at each epoch, a row per run and epoch: the curves row 4
    compares, in numbers."""
    c = t[(t.quantity == "test_accuracy") & t.epoch.notna()]
    c = c.sort_values(["model", "dataset", "batch", "epochs", "seed", "epoch"])
    return c.assign(run=c.model + ", " + c.dataset + ", b" + c.batch.astype(int).astype(str)
                    + ", " + c.precision + ", " + c.formulation.astype(str)
                    + ", " + c.extra)  # fmt: skip


STUDY = Study(
    "accuracy",
    workloads=workloads,
    question="Same model, same per-epoch accuracy on every device? (seed 000)",
    page=Page("Accuracy per device", [
        Section("Final test accuracy",
                where(lambda t: (t.quantity == "test_accuracy") & t.epoch.isna()),
                "model batch precision device value how"),
        Section("Test accuracy at every epoch, per device (its formulation: the table above)",
                per_epoch, pivot=("run", "device")),
    ]),
)  # fmt: skip
