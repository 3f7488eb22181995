"""How fast does a device train mnist_cnn to 99% test accuracy?

The recipe: the training set resident on the device and each epoch one compiled
loop (`loop=device`), Adam on a one-cycle schedule that spans the run and peaks at
the batch's learning rate (`schedule=onecycle`), the platform's formulation, bf16
compute (params f32) on accelerators, f32 on a CPU. Each epoch budget is its own
run (the schedule spans the budget), over several seeds: the report pools a
budget's seeds (mean final test accuracy on the real test split, median training
time with compile and evaluation excluded) and names the fastest budget whose mean
reaches 99%. The learning rates were chosen on this repository's CPU runs
(docs/performance-log.md, "The speedrun recipe"), accuracy being a property of the
recipe, not the chip.

Command: python -m experiments.run --study=speedrun --device=gpu --data-dir=DIR
Sizes: accelerators: batch 512, 1024 and 2048, 2-5 epochs, 3 seeds; CPU: batch
128, 1-2 epochs, 3 seeds. Smoke: `mlp` n=8 on digits, 3 steps, 2 seeds.
Expected: CPU ~5 min; smoke ~10 s; GPU/TPU ~5 min, mostly compiling (a guess).
"""

from __future__ import annotations

from experiments.records.workload import Workload
from experiments.studies.base import SMOKE_TRAIN, TINY_MLP, Context, Study, dataset_for
from experiments.studies.page import Page, Section, select

# The speedrun recipe per platform kind: accelerators run bf16 at large batches;
# a CPU runs f32 (XLA:CPU runs bf16 no faster than f32 and pays the conversions:
# docs/performance-log.md, "bf16 compute") at a batch it runs fast. Peak learning rates
# per batch: from CPU runs (docs/performance-log.md, "The speedrun recipe").
SPEEDRUN_CPU = {"precision": "f32", "batches": {128: 1e-2}, "budgets": (1, 2), "seeds": 3}
SPEEDRUN_ACCELERATOR = {
    "precision": "bf16",
    "batches": {512: 2e-2, 1024: 3e-2, 2048: 4e-2},
    "budgets": (2, 3, 4, 5),
    "seeds": 3,
}


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    recipe = SPEEDRUN_CPU if ctx.cpu else SPEEDRUN_ACCELERATOR
    common = {"model": "mnist_cnn", "dataset": dataset_for(ctx), "timing_steps": 10}
    batches, budgets, seeds = recipe["batches"], recipe["budgets"], recipe["seeds"]
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
        budgets, seeds = (common.pop("epochs"),), 2
        batches = {common.pop("batch_size"): 1e-2}
    return [
        Workload(
            **common,
            batch_size=batch,
            learning_rate=rate,
            epochs=budget,
            seed=seed,
            precision=recipe["precision"],
            schedule="onecycle",
            loop="device",
            study="speedrun",
            num_devices=1,
        )
        for batch, rate in batches.items()
        for budget in budgets
        for seed in range(seeds)
    ]


STUDY = Study(
    "speedrun",
    workloads=workloads,
    question="How fast does the device train `mnist_cnn` to 99% test accuracy on real MNIST?",
    page=Page("The MNIST speedrun (mnist_cnn): training time per recipe, and whether its "
              "seeds reached 99% test accuracy", [
        Section("Median training time over seeds (time_to_target_s where every seed reached "
                "99%, else train_time_s, flagged), and the seeds' accuracy",
                select(selection="seeds"),
                "model batch precision device quantity value spread how flag"),
    ]),
)  # fmt: skip
