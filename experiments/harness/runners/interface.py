"""What every runner is given, and the one place an outcome becomes a record."""

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

# A record being made: a plain dict until records.append validates it (the reader,
# records.load, returns the kind's model).
RecordDraft = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class RunContext:
    """Where and with what a workload runs. `devices` are the ones it runs on (already
    `prepare.devices_for`); `splits` is None for a kind that reads no data. `ceiling`
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


Runner = Callable[[Workload, RunContext], RecordDraft]


def recorded(record: RecordDraft, measure: Callable[[RecordDraft], dict[str, Any]]) -> RecordDraft:
    """`record` with the outcome of `measure(record)`, whatever it is: its fields and
    status ok; a loss that turned NaN/inf, status nan naming the step; any other failure
    while running, oom or error with a one-line message, so a sweep goes on. Mistakes in
    what was asked (JaxcnnError) propagate. `measure` may also write into the record as
    it goes (what is true even if it fails later)."""
    try:
        fields = measure(record)
    except JaxcnnError:
        raise
    except NonFiniteLoss as stopped:  # a diverging run is a finding: record where
        record.update(
            status="nan", message=str(stopped), nan_step=stopped.step, history=stopped.history
        )
        return record
    except Exception as error:
        return records.failed(record, error)
    record.update({"status": "ok", **fields})
    return record
