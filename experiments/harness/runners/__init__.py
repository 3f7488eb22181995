"""One runner per workload kind, behind one interface:

    record = RUNNERS[workload.kind](workload, RunContext(devices, splits, ...))

or `run_workload(workload, context)`, which also sets the matmul precision around it.
Every runner returns the workload's record whatever happens while it runs;
`interface.recorded` is the one place an outcome (ok, a NaN loss, out of memory, any
other failure) becomes that record. Mistakes in what was asked (JaxcnnError) propagate.

- `train` (runners/train.py): the placed train step compiled, timed, then trained.
- `matmul` (runners/matmul.py): one square matmul timed, the device's ceiling.
- `ensemble` (runners/ensemble.py): K models trained vmapped together or one by one.
- `compile` (experiments/harness/compile_only.py): compiled for a target not at hand, not run.
"""

from __future__ import annotations

import contextlib

import jax

from experiments.harness import compile_only
from experiments.harness.runners.ensemble import run_ensemble
from experiments.harness.runners.interface import RecordDraft, RunContext, Runner, recorded
from experiments.harness.runners.matmul import run_matmul
from experiments.harness.runners.train import run_train
from experiments.records.workload import Workload

__all__ = ["RUNNERS", "RecordDraft", "RunContext", "Runner", "recorded", "run_workload"]


def _run_compile(workload: Workload, context: RunContext) -> RecordDraft:
    # Its devices are the target's, abstract: the context's devices are not used.
    return compile_only.run_target(workload)


RUNNERS: dict[str, Runner] = {
    "train": run_train,
    "matmul": run_matmul,
    "ensemble": run_ensemble,
    "compile": _run_compile,
}


def _matmul_precision(workload: Workload) -> contextlib.AbstractContextManager:
    # Set around compile and run, outside model and step code: the same program, only
    # the precision XLA lowers f32 dots to differs (GPU: TF32 on/off).
    if workload.matmul_precision == "default":
        return contextlib.nullcontext()
    return jax.default_matmul_precision(workload.matmul_precision)


def run_workload(workload: Workload, context: RunContext) -> RecordDraft:
    """Compile, time and (epochs > 0) train `workload` with its kind's runner, in
    `context` (its devices already the ones it runs on; RunContext says what else), and
    the record says how it went. A loss that turns NaN/inf stops training and makes a
    `nan` record naming the step; any other failure while running an `error` (or `oom`)
    record with a one-line message, so a sweep goes on."""
    with _matmul_precision(workload):
        return RUNNERS[workload.kind](workload, context)
