"""The one-time rewrite of records of schema version 1 as version 2, and of the checkpoint
folders their keys name (what, and the rules: `python -m experiments.cli.migrate --help`)."""

from __future__ import annotations

import copy
import fcntl
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import records

# The workload fields the studies added after the first records, as schema 1 left them
# out: at these values (experiments.records.workload.Workload's defaults, but for formulation:
# before it existed, XLA's convolutions ran).
ADDED_WORKLOAD_FIELDS = {
    "study": None,
    "kind": "train",
    "num_devices": None,
    "scaling": None,
    "ensemble_size": 1,
    "ensemble_mode": None,
    "matmul_precision": "default",
    "oom_group": None,
    "loop": "step",
    "formulation": "xla",
    "schedule": "constant",
    "target": None,
}
XLA_FORMULATION = {"name": "xla", "conv": "xla", "pool": "xla"}
UNRECORDED_ENV = ("jax", "jaxlib", "flax", "optax", "host_memory")


def migrate_record(record: dict[str, Any]) -> dict[str, Any]:
    """A record of schema 1 as schema 2 (a new dict; `record` is left as it is); a
    record already of schema 2 is returned as it is. Raises records.RecordError when
    the result is not a valid record (the line is then kept unchanged)."""
    if record.get("schema_version") == records.SCHEMA_VERSION:
        return record
    if record.get("schema_version") != 1:
        raise records.RecordError(f"schema_version {record.get('schema_version')!r} is not 1")
    new = copy.deepcopy(record)
    workload = new["workload"]
    kind = workload.setdefault("kind", "train")
    workload.setdefault("study", None)
    new.setdefault("message", None)
    if kind in records.WORKLOAD_KINDS:
        asked_formulation = "formulation" in workload
        for name, value in ADDED_WORKLOAD_FIELDS.items():
            workload.setdefault(name, value)
        new.setdefault("loop", workload["loop"])
        if not asked_formulation:  # made before formulations: XLA's ran
            new.setdefault("formulation", XLA_FORMULATION)
        new.setdefault("compiler_options", None)
        new["device"].setdefault("machine", None)
        for name in UNRECORDED_ENV:
            new["env"].setdefault(name, None)
    elif kind == "peer":
        new["env"].setdefault("host_memory", None)
    new["schema_version"] = records.SCHEMA_VERSION
    if kind != "paired":
        new["config_key"] = records.config_key(workload, new["device"])
    return records.validate(new)


@dataclass
class Migrated:
    """What `migrate_file` did to one file."""

    path: Path
    migrated: int = 0
    already: int = 0
    kept_bad: list[int] = field(default_factory=list)  # line numbers left as they were
    renamed: dict[str, str] = field(default_factory=dict)  # checkpoint folder: old -> new
    not_keys: set[str] = field(default_factory=set)  # old keys that name no folder

    def summary(self, orphans: int) -> str:
        text = (
            f"{self.path}: {self.migrated} record(s) migrated to schema "
            f"{records.SCHEMA_VERSION}, {self.already} already"
        )
        if self.kept_bad:
            lines = records.line_numbers(self.kept_bad)
            text += f", {len(self.kept_bad)} line(s) kept as they were (lines {lines})"
        text += f"; {len(self.renamed)} checkpoint folder(s) renamed to their new keys"
        if self.not_keys:
            text += (
                f"; {len(self.not_keys)} old key(s) not of 16 hex digits name no "
                "checkpoint folder: nothing moved for them"
            )
        if orphans:
            text += (
                f"; {orphans} checkpoint folder(s) of runs with no record keep their old "
                "names: such a run starts over when run again"
            )
        return text


def _migrated_line(raw: bytes, done: Migrated, number: int) -> bytes:
    """One line of a records file, migrated, or as it was (a bad line, a v2 record)."""
    if not raw.strip():
        return raw
    try:
        record = records.parse_line(raw)
        migrated = migrate_record(record)
    except (ValueError, TypeError, AttributeError, KeyError):
        done.kept_bad.append(number)
        return raw
    if migrated is record:
        done.already += 1
        return raw
    done.migrated += 1
    old_key, new_key = record.get("config_key"), migrated.get("config_key")
    if isinstance(old_key, str) and new_key and old_key != new_key:
        if records.is_config_key(old_key):
            done.renamed.setdefault(old_key, new_key)
        else:  # a path from a record's text ("../../x") could climb out of the folder
            done.not_keys.add(old_key)
    ending = b"\n" if raw.endswith(b"\n") else b""
    return records.encode(migrated, made_now=False).rstrip(b"\n") + ending


def migrate_file(path: str | os.PathLike, checkpoint_dir: str | os.PathLike | None = None) -> str:
    """Migrate one records file in place (atomically, only if something changed) and
    rename its records' checkpoint folders in `checkpoint_dir` (default: `checkpoints`
    beside the file); the one line that says what was done."""
    path = Path(path)
    done = Migrated(path)
    rewrite_lines(path, lambda raw, number: _migrated_line(raw, done, number))
    checkpoints = Path(checkpoint_dir) if checkpoint_dir else path.parent / "checkpoints"
    renamed = {}
    for old_key, new_key in done.renamed.items():
        try:
            source = records.key_folder(checkpoints, old_key)
            target = records.key_folder(checkpoints, new_key)
        except ValueError:  # a symlink where a key's folder goes: nothing followed, or moved
            continue
        if source.is_dir() and not target.exists():
            source.rename(target)
            renamed[old_key] = new_key
    done.renamed = renamed
    with open(path, "rb") as handle:
        lines = list(records.read_lines(handle))
    known = {line.model.config_key for line in lines if line.model}
    orphans = 0
    if checkpoints.is_dir():
        orphans = sum(1 for d in checkpoints.iterdir() if d.is_dir() and d.name not in known)
    return done.summary(orphans)


def rewrite_lines(path: Path, rewrite: Callable[[bytes, int], bytes]) -> bool:
    """Rewrite each line of the records file `path` (`rewrite(raw line, its number)`),
    under the lock appends take, atomically and only if a line changed: whether one did."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # appends wait; they reopen the renamed file
        records.remove_leftovers(path)  # a killed rewrite's copy, tens of MB
        with os.fdopen(os.dup(fd), "rb") as handle:
            old = handle.readlines()
        new = [rewrite(raw, n) for n, raw in enumerate(old, 1)]
        if new != old:
            records.write_whole(path, b"".join(new))
    finally:
        os.close(fd)
    return new != old
