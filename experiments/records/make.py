"""Making a record: its config key, skeleton, environment, and what a failure becomes."""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import socket
import subprocess
import traceback
import uuid
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from experiments.records import host_cpu
from experiments.records.schema import SCHEMA_VERSION, config_key, is_config_key


def key_folder(root: str | os.PathLike, key: object) -> Path:
    """The real folder under `root` (resolved) named by the config key `key` (a
    workload's checkpoints). The one way a path is made from a key, which may come from
    a record's text (records merged from other machines are an intended input):
    ValueError unless `key` is a config key, so no `..`, separator or absolute path in
    it can climb out of `root`, and unless the folder is a child of `root`, not a
    symlink: jaxcnn never makes one there, and one to another run's folder would have
    this run set that run's checkpoints aside and write its own there."""
    if not is_config_key(key):
        raise ValueError(f"{key!r} is not a config key (16 hex digits)")
    base = Path(root).resolve()
    folder = base / key
    if folder.parent != base:
        raise ValueError(f"{key!r} names no folder inside {root}")
    if folder.is_symlink():
        raise ValueError(
            f"checkpoint folder {folder} is a symlink (to {os.readlink(folder)}), not a folder "
            f"of its own in {base}: remove the link"
        )
    return folder


def new_record(
    workload: dict[str, Any],
    device: dict[str, Any],
    env: dict[str, Any],
    conditions: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The skeleton of a record before its workload runs: status `error` until an
    outcome replaces it (so a run that dies midway still says so), keyed by
    `config_key`. `workload` is the described workload (Workload.describe()), `device`
    the devices' description (jaxcnn.devices.describe), `env` from `environment`,
    `conditions` those that differ from the defaults (kept in the record, whose key
    covers them); `fields` are the kind's own (loop, formulation, compiler_options)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": uuid.uuid4().hex,
        "config_key": config_key(workload, device, conditions),
        "status": "error",
        "message": None,
        "workload": workload,
        "device": device,
        "env": env,
        **({"conditions": conditions} if conditions else {}),
        **fields,
    }


JAX_PACKAGES = ("jax", "jaxlib", "flax", "optax")
# Set by `--smoke` for the run and its subprocesses: their records say `env.smoke`, so
# a report leaves them out (the workload, and so the config key, is unchanged).
SMOKE_ENV = "JAXCNN_SMOKE"


def environment(packages: Sequence[str] = JAX_PACKAGES, **fields: Any) -> dict[str, Any]:
    """The `env` field of a record made now: Python, the installed `packages`' versions
    (read from their metadata: nothing is imported), the commit, host and time, and
    `fields`."""
    return {
        "python": platform.python_version(),
        **{name: _version(name) for name in packages},
        **git_tree(),
        "host": socket.gethostname(),
        "utc_time": utc_now(),
        "cpu": host_cpu.describe(),
        **({"smoke": True} if os.environ.get(SMOKE_ENV) else {}),
        **fields,
    }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def utc_now() -> str:
    """This moment as a record's `env.utc_time`."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


HERE = Path(__file__).resolve().parent


def git_tree(where: Path = HERE) -> dict[str, Any]:
    """The commit of the checkout `where` is in (`git_commit`, None outside git) and,
    where git can tell, whether its tracked files differ from it (`git_dirty`) and, if
    they do, a digest of how (`git_diff`): a local edit, or a copy of a newer tree beside
    an older .git, runs code the commit alone does not name, and two such trees differ."""
    commit = _git(where, "rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": None}
    # the records a run appends are no part of the code it ran: a second process of one
    # run (a paired side, a study's next workload) must not find its tree changed by them
    code = (":(top)", ":(top,exclude,glob)**/records.jsonl")
    changes = _git(where, "status", "--porcelain", "--untracked-files=no", "--", *code)
    diff = _git(where, "diff", "HEAD", "--binary", "--", *code) if changes else None
    return {
        "git_commit": commit or None,
        **({} if changes is None else {"git_dirty": bool(changes)}),
        **({"git_diff": hashlib.sha256(diff.encode()).hexdigest()[:16]} if diff else {}),
    }


def _git(where: Path, *args: str) -> str | None:
    """git's output for `args` in `where` (stripped), None where git fails."""
    try:
        out = subprocess.run(
            ["git", *args],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=where,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def one_line(error: BaseException) -> str:
    """An exception as a record's `message`: its type and first non-blank line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


_OOM_MARKERS = ("resource_exhausted", "out of memory", "oom when allocating")


def classify_failure(error: BaseException) -> str:
    """The status a failure gives its record: `oom` (XLA's RESOURCE_EXHAUSTED, an
    allocator's "out of memory"), `nan` (a non-finite loss caught by a check), else
    `error` (compile errors included). A checkpoint that could not be saved is an
    `error` (retried on rerun) even though a full disk says RESOURCE_EXHAUSTED too, and
    so is a kernel that wants more on-chip shared memory than the chip has (not the
    device's memory: a smaller batch would not help)."""
    # jaxcnn.checkpoint.CheckpointSaveError, by name: importing it would import JAX.
    saving = any(c.__name__ == "CheckpointSaveError" for c in type(error).__mro__)
    text = f"{type(error).__name__}: {error}".lower()
    if saving or "no space left on device" in text or "shared memory" in text:
        return "error"
    if isinstance(error, MemoryError) or any(m in text for m in _OOM_MARKERS):
        return "oom"
    name = type(error).__name__.lower()
    if isinstance(error, FloatingPointError) or "nan" in name or "nonfinite" in name:
        return "nan"
    return "error"


# What an operating system says when the machine, not the program, failed a step: a
# folder missing, full or read-only (a compiler's temporary files: ptxas writes its
# input and output under TMPDIR), a file that cannot be opened, no file handles left.
_MACHINE_FAULTS = (
    "no space left on device",
    "disk quota exceeded",
    "read-only file system",
    "no such file or directory",
    "permission denied",
    "too many open files",
    "could not open",
    "unable to open",
    "cannot open",
    "failed to create temp",
    "[errno ",
)


def machine_fault(message: str) -> bool:
    """Whether a failure's message (`one_line`) names a fault of the machine (a missing
    temporary folder, a full disk; _MACHINE_FAULTS), not a verdict on the program: a
    rerun does it again instead of keeping it as a finding."""
    text = message.lower()
    return any(marker in text for marker in _MACHINE_FAULTS)


def failed(record: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """`record` updated with how `error` ended its workload: status by
    `classify_failure`, a one-line message and the traceback's last three lines. A
    failing workload is data, not the end of a sweep."""
    record["status"] = classify_failure(error)
    record["message"] = one_line(error)
    record["traceback_tail"] = traceback.format_exception(error)[-3:]
    return record


# --- What a rerun skips ---------------------------------------------------------------
