"""A workload whose process died while running it leaves no record of its own: the
kernel's out-of-memory killer (a batch too large for the host), a kill -9, a crash of
native code, a power loss. Before a workload runs, a marker is written beside its lock
(`<lock folder>.running.json`); once its record is appended, the marker goes. A marker
found by a later run, its lock free, is a death: it becomes the workload's record, so
the study goes on past it and the death is said, never lost (unless a saved checkpoint
carries the workload on: its resumed record says from which step).

    marker = died.marker_for(folder)
    death = died.found(marker)       # None, or the record fields of the death
    died.started(marker, key)         # before the workload runs
    died.ended(marker)                # after its record is appended

A death is `oom` where the kernel's count of processes it killed for memory
(`/proc/vmstat`'s oom_kill) rose while the workload ran, on the same boot: the final
status a rerun keeps and a batch sweep stops its group at. Else it is an `error` (the
cause unknown), which a rerun retries.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from experiments.records import utc_now

VMSTAT = Path("/proc/vmstat")
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def marker_for(folder: Path) -> Path:
    """Where the marker of the workload locked at `folder` goes: beside its lock."""
    return folder.parent / f"{folder.name}.running.json"


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot, or
    None where the kernel does not say (not Linux, or older than 4.13)."""
    try:
        for line in VMSTAT.read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        pass
    return None


def _boot_id() -> str | None:
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return None


def started(marker: Path, key: str) -> None:
    """Say that the workload of config key `key` is running in this process."""
    state = {
        "key": key,
        "pid": os.getpid(),
        "started": utc_now(),
        "boot_id": _boot_id(),
        "oom_kills": oom_kills(),
    }
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(state) + "\n")


def ended(marker: Path) -> None:
    """Say that the workload's record is written: nothing of it is left to tell."""
    marker.unlink(missing_ok=True)


def resumable(checkpoint_dir: Path | None) -> bool:
    """Whether a death left a saved step to resume from (Orbax names each saved step's
    folder by its number): then the resumed run's record, with `resumed_from_step`, is
    the workload's, and the death needs none of its own."""
    if checkpoint_dir is None or not checkpoint_dir.is_dir():
        return False
    return any(p.is_dir() and p.name.isdigit() for p in checkpoint_dir.iterdir())


def found(marker: Path) -> dict[str, Any] | None:
    """The status and message of the death `marker` tells of (a run that started the
    workload and never wrote its record), or None where there is none. Called with the
    workload's lock held, so its writer is gone."""
    try:
        state = json.loads(marker.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):  # torn by the death itself: a death all the same
        state = {}
    when = state.get("started", "an earlier run")
    before, now = state.get("oom_kills"), oom_kills()
    same_boot = state.get("boot_id") is not None and state.get("boot_id") == _boot_id()
    if same_boot and before is not None and now is not None and now > before:
        return {
            "status": "oom",
            "message": (
                f"the process running it (pid {state.get('pid')}, started {when}) was killed: "
                f"the kernel's out-of-memory killer killed {now - before} process(es) since "
                "it started (/proc/vmstat oom_kill), and it wrote no record"
            ),
        }
    return {
        "status": "error",
        "message": (
            f"the process running it (pid {state.get('pid')}, started {when}) died without "
            "a record (a kill, a crash of native code, or the machine stopping; the kernel "
            "killed nothing for memory meanwhile, or cannot say): retried"
        ),
    }
