"""How far can a predicted step time be trusted?

Every accelerator figure the study gives without a real run is a prediction of the
per-kernel model (docs/predictions.md). This study measures its error two ways: against
published training measurements of the same programs (the report's first table), and
against the steps this study times on the devices at hand, each record carrying its own
per-kernel prediction and the whole-program roofline bound (the second).

The bench's cells (its models and batches) in the configurations the bench finds
fastest: the platform's formulation, in both loops, f32 (and bf16 on accelerators,
where it is the fast precision; on a CPU bf16 runs at half the f32 rate). A kernel's
`prediction` is at the chip's datasheet rates, or on a CPU at this run's measured matmul
ceiling and bandwidth (the report prices a CPU step at its machine's best ceiling). Its
own study, so the bench's records stay as they were measured. On a GPU this one command
gives the measured column (docs/predictions.md).

Command: python -m experiments.run --study=roofline --device=cpu --data-dir=DIR
Sizes: the bench's. Smoke: the bench's smoke cells.
Expected: CPU ~7 min on a quiet machine (the bench's step times: mlp at batch 512
is a third of it); smoke ~10 s; GPU/TPU ~10 min, most of it compiling the large
models (a guess).
"""

from __future__ import annotations

import dataclasses

from experiments.records.workload import Workload
from experiments.studies import bench
from experiments.studies.base import Context, Study


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    from jaxcnn import formulation

    chosen = formulation.for_platform(ctx.platform).name
    precisions = ("f32",) if ctx.cpu else ("f32", "bf16")
    group = lambda w: w.oom_group and w.oom_group.replace("bench:", "roofline:", 1)  # noqa: E731
    return [
        dataclasses.replace(w, study="roofline", oom_group=group(w))
        for w in bench.workloads(ctx)
        if w.precision in precisions
        and formulation.resolve(w.formulation, ctx.platform).name == chosen
    ]


STUDY = Study(
    "roofline",
    workloads=workloads,
    question="How far can a predicted step time be trusted?",
)
