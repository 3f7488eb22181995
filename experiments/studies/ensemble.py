"""Training parallelism: ensembles and hyperparameter searches.

Seed 004: many independent runs at once. K = 1, 4, 16 `lenet5_keras` models on
MNIST, each with its own seed (seed+i) and learning rate (log-spaced lr/10..3 lr),
batch 128: trained together in one step (jax.vmap of the one train step over
stacked states, on one device) vs K runs one after another with the plain step.
Records images/s of all K models, their trained epochs and each model's test accuracy;
the answer compares the epochs (what a user waits for), the timed steps beside. Where the platform's
formulation is not XLA's own (a CPU: jaxcnn.formulation), both are run (vmap's
worth differs between them).

Command: python -m experiments.run --study=ensemble --device=gpu --data-dir=DIR
Sizes: 3 epochs everywhere: an epoch's figure is the median of three, as one epoch
a side left the CPU's verdicts to one run's chance. Smoke: `mlp` n=8 on digits, K = 1,
2, 3 steps.
Expected: CPU ~10 min per formulation; smoke ~10 s; one H100 ~2.5 min (measured once); a
TPU unmeasured.
"""

from __future__ import annotations

from experiments.records.workload import Workload
from experiments.studies.base import (
    SMOKE_TRAIN,
    TINY_MLP,
    Context,
    Study,
    dataset_for,
)
from experiments.studies.page import Page, Section, of_ensembles, where

ENSEMBLE_SIZES = (1, 4, 16)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    from jaxcnn import formulation

    common = {
        "model": "lenet5_keras",
        "dataset": dataset_for(ctx),
        "batch_size": 128,
        "epochs": 3,
        "timing_steps": 20,
    }
    sizes, formulations = ENSEMBLE_SIZES, ["auto"]
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
        sizes = (1, 2)
    elif formulation.for_platform(ctx.platform).name != "xla":
        formulations.append("xla")  # the platform's own ("auto"), and XLA's own convolutions
    return [
        Workload(
            **common,
            study="ensemble",
            kind="ensemble",
            ensemble_size=k,
            ensemble_mode=mode,
            formulation=chosen,
            num_devices=1,
        )
        for chosen in formulations
        for k in sizes
        for mode in ("vmap", "sequential")
    ]


STUDY = Study(
    "ensemble",
    workloads=workloads,
    question="K models trained at once with `jax.vmap` vs one after another (seed 004)",
    page=Page("K models at once with vmap", [
        Section("vmap's speed over K models one after another: their trained epochs "
                "(\", epochs\") and their timed steps (20 calls each)",
                where(lambda t: (t.quantity == "speedup") & (t.ensemble_mode == "vmap")),
                "model batch device value how flag"),
        Section("The epochs: all K models' training (one after another: summed)",
                where(lambda t: (t.quantity == "epoch_s") & of_ensembles(t)),
                "model batch device value spread how"),
        Section("The steps", where(lambda t: (t.quantity == "step_s") & of_ensembles(t)),
                "model batch device value spread how"),
    ]),
)  # fmt: skip
