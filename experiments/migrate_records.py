"""python -m experiments.migrate_records PATH... [--checkpoint-dir DIR]: rewrite records
files (or every *.jsonl under a folder) of schema version 1 as version 2, once.

Schema 1 left out the workload fields the studies added later when they were at their
defaults, and readers filled them in; schema 2 writes every field. Each record of
version 1 gains them explicitly, as they were when it was made:
    workload: kind train, study null, num_devices null, scaling null, ensemble_size 1,
        ensemble_mode null, matmul_precision default, oom_group null, loop step,
        formulation xla (before formulations existed every convolution was XLA's),
        schedule constant, target null (the kinds experiments.workload.Workload makes;
        a peer or paired workload gains kind and study only);
    loop step and formulation {xla, xla, xla} beside it, as run;
    compiler_options, device.machine, env.host_memory and any of env.jax, jaxlib, flax
        and optax that are absent: null (not recorded then; nothing is guessed).
Its schema_version becomes 2 and its config_key is computed again by the one rule
(records.config_key: the whole workload and the device's identity). Measured values are
not touched. Records already of version 2 and bad lines (torn, not JSON, not a record)
are kept byte for byte. The file is rewritten atomically (a temporary file beside it,
then a rename) under the lock that appends take, and only if something changed: running
it twice changes nothing.

Checkpoints are kept in folders named by config key (OUT/checkpoints/<key>). A folder
whose old key a migrated record names is renamed to the new key (in DIR, by default the
`checkpoints` folder beside the records file), so those runs still resume. A folder of a
run that was stopped before it wrote any record cannot be matched to its new key: that
run starts over from its first step when it is run again (the count is printed). A
record's key is text from a file: one that is not 16 hex digits (`../../x`, an absolute
path) names no folder, and nothing is moved for it (`records.key_folder`).

A path that is no regular file (a FIFO, a device), or a records file that cannot be
rewritten (immutable, a read-only folder), is one line and exit 2 before any file is
changed.
"""

from __future__ import annotations

import copy
import fcntl
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import records
from experiments.cli_options import OneLineParser

# The workload fields the studies added after the first records, as schema 1 left them
# out: at these values (experiments.workload.Workload's defaults, but for formulation:
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
    return records.encode(migrated).rstrip(b"\n") + ending


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
    known = {line.record.get("config_key") for line in lines if line.record}
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m experiments.migrate_records",
        description="Rewrite records files of schema 1 as schema 2 (once; safe to rerun).",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="records files or folders")
    parser.add_argument(
        "--checkpoint-dir",
        help="the run's checkpoint root (default: the checkpoints folder beside each file)",
    )
    args = parser.parse_args(argv)
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(f"no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:  # each file is rewritten in place: a FIFO, a device or a read-only one refused
        files = records.records_files(args.paths)
        for path in files:
            records.check_writable(path)
    except OSError as e:
        print(f"cannot migrate {e.filename}: {e.strerror or e}", file=sys.stderr)
        return 2
    for path in files:
        try:
            print(migrate_file(path, args.checkpoint_dir))
        except OSError as e:
            print(f"could not migrate {e.filename or path}: {e.strerror or e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
