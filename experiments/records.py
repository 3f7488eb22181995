"""Records: one JSON line per workload, whatever happened to it.

Schema (version 1). Required in every record:
    schema_version, run_id, status (ok|oom|nan|error|skipped), message,
    workload {model, model_overrides, dataset, batch_size, epochs, steps, optimizer,
              learning_rate, seed, strategy, precision},
    device {platform, kind, count, process_count, host},
    env {jax, jaxlib, flax, optax, python, git_commit, host, utc_time}
Present when status is ok (null or absent otherwise):
    params {trainable, non_trainable}
    compile_time_s {train, eval}           lower + compile, apart from step time
    step_time_s {median, p10, p90, n}      per step, warm-up excluded, after block_until_ready
    images_per_s                           batch_size / step_time_s.median
    history [{epoch, steps, train_loss, train_accuracy, train_time_s,
              test_loss, test_accuracy, eval_time_s}]
    test_accuracy, test_loss               the last epoch's, null for synthetic data
    train_time_s                           all epochs' training, compile excluded
Room for later fields (flops, mfu, memory): unknown keys are kept, never rejected.

Appends are one os.write of a whole line under an exclusive lock, so a crash or a
second writer never leaves half a line; a half line found on load is skipped with
a warning and the rest still loads.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STATUSES = ("ok", "oom", "nan", "error", "skipped")
RECORDS_FILE = "records.jsonl"
_REQUIRED = {
    "schema_version": int,
    "run_id": str,
    "status": str,
    "workload": dict,
    "device": dict,
    "env": dict,
}
_REQUIRED_WORKLOAD = ("model", "dataset", "batch_size", "strategy")
_REQUIRED_DEVICE = ("platform", "kind", "count", "process_count")
_REQUIRED_OK = ("params", "compile_time_s", "step_time_s", "images_per_s")


class RecordError(ValueError):
    """A record that does not follow the schema."""


def validate(record: dict[str, Any]) -> dict[str, Any]:
    """Return `record` if it follows the schema; raise RecordError naming what is wrong."""
    for key, kind in _REQUIRED.items():
        if not isinstance(record.get(key), kind):
            raise RecordError(f"field {key!r} missing or not {kind.__name__}")
    if record["schema_version"] != SCHEMA_VERSION:
        raise RecordError(f"schema_version {record['schema_version']} is not {SCHEMA_VERSION}")
    if record["status"] not in STATUSES:
        raise RecordError(f"status {record['status']!r} is not one of {STATUSES}")
    for section, keys in (("workload", _REQUIRED_WORKLOAD), ("device", _REQUIRED_DEVICE)):
        missing = [k for k in keys if k not in record[section]]
        if missing:
            raise RecordError(f"{section} lacks {', '.join(missing)}")
    if record["status"] == "ok":
        missing = [k for k in _REQUIRED_OK if record.get(k) is None]
        if missing:
            raise RecordError(f"ok record lacks {', '.join(missing)}")
        step = record["step_time_s"]
        if not all(k in step for k in ("median", "p10", "p90", "n")):
            raise RecordError("step_time_s needs median, p10, p90 and n")
    return record


def _json_safe(value: Any) -> Any:
    """NaN and inf become null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def append(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Validate and append one record as one line, whole or not at all."""
    line = (json.dumps(_json_safe(validate(record)), sort_keys=True) + "\n").encode()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a writer died mid-line: keep its fragment off our line
        written = os.write(fd, line)
        if written != len(line):
            raise OSError(f"short write to {path}: {written} of {len(line)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def _files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    found: list[Path] = []
    for path in map(Path, paths):
        found.extend(sorted(path.rglob("*.jsonl")) if path.is_dir() else [path])
    return found


def load(*paths: str | os.PathLike) -> list[dict[str, Any]]:
    """Every valid record in these files or folders (searched for *.jsonl), de-duplicated
    by run_id, in file order. Bad lines are skipped with a warning naming file and line."""
    records: dict[str, dict[str, Any]] = {}
    for file in _files(paths):
        with open(file, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = validate(json.loads(line))
                except (json.JSONDecodeError, RecordError) as e:
                    warnings.warn(f"{file}:{number}: skipped a bad record ({e})", stacklevel=2)
                    continue
                records.setdefault(record["run_id"], record)
    return list(records.values())
