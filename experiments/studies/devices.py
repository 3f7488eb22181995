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

if TYPE_CHECKING:  # references imports jaxcnn (JAX): only when a cost is priced
    pass


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    common = {"dataset": dataset_for(ctx), "batch_size": 128, "epochs": 5, "timing_steps": 20}
    if ctx.smoke:
        common = SMOKE_TRAIN
    return [
        Workload(model=m, study="devices", num_devices=1, **common)
        for m in ("mnist_cnn", "lenet5_keras")
    ]


STUDY = Study(
    "devices",
    workloads=workloads,
    question="How much faster is the accelerator than the CPU for the MNIST CNN? (seeds 001, 003)",
)
