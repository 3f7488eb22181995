"""When does the accelerator beat the CPU?

Seed 002: a dense net on MNIST, time vs trainable parameters; the GPU is slower
for small nets. `mlp` 784-n-n-10 (dropout 0.2) for n = 32, 64, ..., 8192 (n=4096
is 20,037,642 params), batch 128, timing only (compile + 20 timed steps, no
training) on synthetic 28x28 data: step time vs params per device. The report finds
the crossover from two devices' records.

Command: python -m experiments.run --study=crossover --device=gpu
Sizes: full everywhere. Smoke: n = 8, 32, batch 16.
Expected: CPU ~40 s (n=8192 is ~74M params, 0.45 s/step); smoke ~3 s;
GPU/TPU < 1 min (a guess).
"""

from __future__ import annotations

from experiments.records.workload import Workload
from experiments.studies.base import Context, Study

CROSSOVER_WIDTHS = tuple(2**i for i in range(5, 14))  # 32 .. 8192


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    widths, batch, timing = CROSSOVER_WIDTHS, 128, 20
    if ctx.smoke:
        widths, batch, timing = (8, 32), 16, 3
    return [
        Workload(
            model="mlp",
            model_overrides={"width": n},
            dataset="synthetic",
            batch_size=batch,
            epochs=0,
            timing_steps=timing,
            study="crossover",
            num_devices=1,
        )
        for n in widths
    ]


STUDY = Study(
    "crossover",
    workloads=workloads,
    question="When does the accelerator beat the CPU, by trainable parameters? (seed 002)",
)
