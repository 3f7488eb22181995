"""What every runner is given, and the one place what happened becomes its outcome."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from experiments import records
from experiments.harness.prepare import Split
from experiments.records.workload import Workload
from jaxcnn.errors import JaxcnnError
from jaxcnn.loop import NonFiniteLoss

# What a runner found: a status (ok, nan, oom, error) and the record fields that say
# it, which the sweep puts into the workload's record.
Outcome = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class RunContext:
    """Where and with what a workload runs. `devices` are the ones it runs on (already
    the sweep's `runs_on`); `splits` is None for a kind that reads no data. `ceiling`
    and `bandwidth` (measured once per run) enter its MFU and its predicted step time.
    With `checkpoint_dir` (kind train), training resumes from the newest checkpoint
    there and saves every `checkpoint_every` steps and at each epoch end."""

    devices: list[jax.Device]
    splits: tuple[Split, Split | None] | None = None
    progress: bool = False
    checkpoint_dir: str | Path | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int = 2
    ceiling: dict[str, dict[str, Any]] | None = None
    bandwidth: dict[str, Any] | None = None


Runner = Callable[[Workload, RunContext], Outcome]


def outcome(measure: Callable[[dict[str, Any]], dict[str, Any]]) -> Outcome:
    """The outcome of `measure(learned)`, whatever it is: its fields and status ok; a
    loss that turned NaN/inf, status nan naming the step; any other failure while
    running, oom or error with a one-line message, so a sweep goes on. Mistakes in what
    was asked (JaxcnnError) propagate. `measure` may write into `learned` as it goes what
    stays true even if it fails later (the step it resumed from), and every outcome
    carries it."""
    learned: dict[str, Any] = {}
    try:
        fields = measure(learned)
    except JaxcnnError:
        raise
    except NonFiniteLoss as stopped:  # a diverging run is a finding: record where
        return {
            **learned,
            "status": "nan",
            "message": str(stopped),
            "nan_step": stopped.step,
            "history": stopped.history,
        }
    except Exception as error:
        return {**learned, **records.failed({}, error)}
    return {**learned, "status": "ok", **fields}
