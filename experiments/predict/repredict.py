"""Giving records made before records carried their step's kernels those kernels, by
compiling the step again here (what, and the rules: `python -m experiments.cli.repredict
--help`): the compile of one record, the rewrite of a file in place, and the stop a
signal asks for between compiles."""

from __future__ import annotations

import dataclasses
import errno
import importlib.metadata
import os
import signal
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from experiments import records
from experiments.records import CompileRecord, Record, TrainRecord
from experiments.records.migrate import rewrite_lines
from experiments.records.workload import Workload

# How often a long repredict writes what it has compiled (a TPU target's records take
# hours): a run stopped by anything the process cannot catch loses at most this much.
SAVE_EVERY_S = 600.0


def needs_kernels(
    record: Record,
    again: str | None = None,
    target: str | None = None,
    measured_only: bool = False,
) -> str | None:
    """Why `record` is not recompiled here, or None when it is. With `again` (a kernel
    kind), a record with kernels of that kind is compiled again: what to do when
    jaxcnn.perf.hlo changes how it reads that kind of kernel. That is every measured
    record (its kernels read when it ran, or given by this command) and the compile-only
    records this command gave kernels; a compile-only record's own kernels, read when a
    target compiled it, are left (a target's compile takes minutes: `--target` first).
    With `target`, only compile-only records of that target are; with `measured_only`,
    only measured records (their programs compile here in seconds)."""
    compile_only = isinstance(record, CompileRecord)
    if isinstance(record, TrainRecord | CompileRecord) and record.kernels:
        source = record.kernels_source
        ours = (source is not None and source.recompiled) or not compile_only
        redo = again is not None and ours and any(row[1] == again for row in record.kernels)
        if not redo:
            return "has kernels"
    if compile_only:
        if measured_only:
            return "compile-only (--measured-only)"
        return _compile_only_reason(record, target)
    if target is not None:
        return "not a compile-only record of the target"
    if record.status != "ok" or record.workload.kind != "train":
        return "not an ok train record"
    if record.device.platform != "cpu":
        return "not a CPU record"
    if not record.prediction:
        return "made before records carried a prediction"
    if record.workload.strategy == "pmap":
        return "pmap compiles only with arrays at hand"
    if not _same_versions(record, ("jax", "jaxlib")) or not record.env.jax:
        return "made by another jax or jaxlib"
    return None


def _compile_only_reason(record: CompileRecord, target: str | None) -> str | None:
    from experiments.records.select import device_of, superseded

    if target is not None and device_of(record) != target:
        return "not a compile-only record of the target"
    if record.status not in ("ok", "oom") or not (record.memory and record.memory.total_bytes):
        return "compile-only, and the compiler gave no program"
    if superseded(record):
        return "compile-only, for a target's former device count"
    if not _same_versions(record, ("jax", "jaxlib", "libtpu", "jax_cuda12_plugin")):
        return "made by another jax, jaxlib or target compiler"
    return None


def _same_versions(record: TrainRecord | CompileRecord, packages: Sequence[str]) -> bool:
    """Whether each of `packages` (fields of the record's env) the record names is the
    version installed here."""
    for package in packages:
        wanted = getattr(record.env, package)
        if wanted is None:
            continue
        try:
            if importlib.metadata.version(package.replace("_", "-")) != wanted:
                return False
        except importlib.metadata.PackageNotFoundError:
            return False
    return True


def step_kernels(record: TrainRecord | CompileRecord) -> tuple[list[list], int]:
    """The program the record timed (its train step, or with the device loop its
    whole-epoch program), compiled here for its CPU devices, or a compile-only record's
    train step for its target's abstract devices: (its kernel summary, the steps one run
    of it takes)."""
    import jax

    from experiments.harness.compile_only import check, step_program
    from experiments.harness.measure import step_kernels as read_kernels
    from jaxcnn import targets

    workload = Workload(**record.workload.model_dump(exclude_unset=True))
    ran_with = record.formulation.name if record.formulation else None
    if ran_with:
        workload = dataclasses.replace(workload, formulation=ran_with)
    if isinstance(record, CompileRecord):
        target = check(workload)
        devices, where = list(targets.abstract_devices(target)), target.name
    else:
        devices = jax.devices("cpu")[: record.device.count]
        where = f"this CPU ({len(devices)} device(s))"
    program, steps = step_program(workload, devices, where)
    return read_kernels(program), steps


def _records(
    raw_lines: list[bytes], bad: list[tuple[int, str]] | None = None
) -> Iterator[tuple[dict[str, Any] | None, Record | None]]:
    """Each line's record, as its line holds it (what a rewrite changes) and as its
    kind's model (what is read), or None, None for a line that is none (left as it is;
    its number and why appended to `bad`, blank lines and older schemas aside: the
    reader, records.load, says the same of them)."""
    for line in records.read_lines(raw_lines):
        if bad is not None and line.why:
            bad.append((line.number, line.why))
        yield line.record, line.model


def repredict_file(
    path: str | Path,
    again: str | None = None,
    target: str | None = None,
    save_every_s: float = SAVE_EVERY_S,
    measured_only: bool = False,
) -> dict[str, int]:
    """Add kernels to every record of `path` that needs them (`needs_kernels`): counts
    by outcome. The compiles (minutes each, hours for a TPU target's records) run
    without the file's lock; what they found is written under it, quickly, every
    `save_every_s` seconds and when the compiles end, whether they finished or were
    stopped (Ctrl-C, a crash): a run cut short loses at most the compiles of the last
    interval, and a rerun goes on with the records still without kernels."""
    counts: dict[str, int] = {}
    by_key: dict[str, tuple[list[list], int]] = {}  # one compile per configuration
    found: dict[str, tuple[list[list], int]] = {}  # run_id -> its program's kernels
    saved_at = time.monotonic()
    bad: list[tuple[int, str]] = []
    try:
        for _, record in _records(Path(path).read_bytes().splitlines(keepends=True), bad):
            why = (
                "not a record"
                if record is None
                else needs_kernels(record, again, target, measured_only)
            )
            if why is not None:
                counts[why] = counts.get(why, 0) + 1
                continue
            key = record.config_key + str(record.formulation.name if record.formulation else None)
            if key not in by_key:
                by_key[key] = _compiled(record)
                _stop_if_asked()  # a signal whose exception a compile's callback swallowed
            if by_key[key] is None:
                counts[COULD_NOT_COMPILE] = counts.get(COULD_NOT_COMPILE, 0) + 1
                continue
            found[record.run_id] = by_key[key]
            if time.monotonic() - saved_at >= save_every_s:
                _save(Path(path), found, again, target, counts)
                found, saved_at = {}, time.monotonic()
    finally:
        _save(Path(path), found, again, target, counts)
        if bad:  # a record it cannot trust gets no kernels: said, with its line
            warnings.warn(records.bad_lines(Path(path), bad), stacklevel=2)
    counts.pop("not a record", None)
    return counts


# The count of records whose step could not be compiled here (an unknown model, a
# workload this jaxcnn refuses): each said in one line, the others compiled all the same.
COULD_NOT_COMPILE = "could not compile"
# Records another run (a second repredict on the same file) gave kernels while this one
# compiled them: left as that run wrote them.
GIVEN_MEANWHILE = "given kernels by another run meanwhile"


def _compiled(record: TrainRecord | CompileRecord) -> tuple[list[list], int] | None:
    """`step_kernels(record)`, or None (said in one line) if this jaxcnn cannot compile
    its step: one such record does not stop the records after it."""
    try:
        kernels = step_kernels(record)
    except Exception as e:  # whatever the compile raised, it is this record's alone
        print(f"skipped {_label(record)}: {records.one_line(e)}", file=sys.stderr, flush=True)
        return None
    print(f"compiled {_label(record)}", file=sys.stderr, flush=True)
    return kernels


def _save(
    path: Path,
    found: dict[str, tuple[list[list], int]],
    again: str | None,
    target: str | None,
    counts: dict[str, int],
) -> None:
    """Rewrite `path` under its lock with the kernels `found` (run_id -> kernels, steps),
    counting each record given them in counts["recompiled"]."""
    if not found:
        return

    def rewrite(raw: bytes, number: int) -> bytes:
        # read as its model; written back as the line held it, plus its kernels
        line, record = next(_records([raw]))
        if line is None or record is None or record.run_id not in found:
            return raw  # a bad line stays as it is, byte for byte
        if needs_kernels(record, again, target) is not None:
            counts[GIVEN_MEANWHILE] = counts.get(GIVEN_MEANWHILE, 0) + 1
            return raw
        line["kernels"], steps = found[record.run_id]
        line["kernels_source"] = {
            "program": "epoch" if record.loop == "device" else "train_step",
            "steps": steps,
            "recompiled": records.utc_now(),
            "jax": importlib.metadata.version("jax"),
        }
        counts["recompiled"] = counts.get("recompiled", 0) + 1
        ending = b"\n" if raw.endswith(b"\n") else b""
        return records.encode(line).rstrip(b"\n") + ending

    rewrite_lines(path, rewrite)


def _label(record: TrainRecord | CompileRecord) -> str:
    w = record.workload
    return f"{w.model} batch {w.batch_size} {w.precision} ({record.config_key})"


def check_room(path: Path) -> None:
    """OSError (ENOSPC) unless the disk `path` lies on has room for its rewrite: a copy
    of it beside it (`records.write_whole`), and a margin."""
    size = path.stat().st_size
    disk = os.statvfs(path.parent)
    free = disk.f_bavail * disk.f_frsize
    if free < size + records.MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"{free} bytes free on its disk; its rewrite needs {size}")


# What shells report for a job a signal ended (experiments.cli.run's codes alike).
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class Terminated(BaseException):
    """A SIGTERM (a scheduler, `kill`, a notebook's stop) stopped the compiles: a stop,
    like KeyboardInterrupt, not an error, so no `except Exception` (a record that cannot
    be compiled) takes it for one."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
received_signals: list[int] = []  # the stop signals this command's run has received


def _stopping(signum: int) -> BaseException:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def stop_on_signal(signum: int, frame: Any) -> None:
    received_signals.append(signum)
    raise _stopping(signum)  # unwinds through repredict_file, which writes what it compiled


def _stop_if_asked() -> None:
    """Raise the stop a signal asked for where its own exception was lost: raised inside
    a callback the compiler runs (which prints it as ignored and goes on), it never
    reached repredict_file."""
    if received_signals:
        raise _stopping(received_signals[0])
