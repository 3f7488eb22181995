"""Same model, same accuracy on every device?

Seed 000 (Fig. 14): accuracy and loss per epoch. `mnist_cnn` on MNIST and on
Fashion-MNIST, batch 128: per-epoch train/test loss and accuracy; the report
overlays the devices' curves.

Command: python -m experiments.run --study=accuracy --device=gpu --data-dir=DIR
Sizes: 10 epochs on accelerators; CPU: 5 epochs. Smoke: `mlp` n=8 on digits only
(it stands in for both datasets, so one workload), 2 epochs (44 steps each) at
batch 32.
Expected: CPU ~8 min; smoke ~5 s; GPU/TPU ~2 min (a guess).
"""

from __future__ import annotations

from experiments.records.workload import Workload
from experiments.studies.base import TINY_MLP, Context, Study
from experiments.studies.page import Page, Section, where


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    runs = [("mnist_cnn", {}, name) for name in ("mnist", "fashion_mnist")]
    common = {"batch_size": 128, "epochs": 5 if ctx.cpu else 10, "timing_steps": 20}
    if ctx.smoke:  # digits stands in for both datasets: one workload
        runs = [("mlp", TINY_MLP, "digits")]
        common = {"batch_size": 32, "epochs": 2, "timing_steps": 3}
    return [
        Workload(
            model=model,
            model_overrides=overrides,
            dataset=dataset,
            study="accuracy",
            num_devices=1,
            **common,
        )
        for model, overrides, dataset in runs
    ]


STUDY = Study(
    "accuracy",
    workloads=workloads,
    question="Same model, same per-epoch accuracy on every device? (seed 000)",
    page=Page("Accuracy per device", [
        Section("Final test accuracy",
                where(lambda t: (t.quantity == "test_accuracy")
                      & ~t.extra.astype(str).str.startswith("epoch ")),
                "model batch precision device value how"),
    ]),
)  # fmt: skip
