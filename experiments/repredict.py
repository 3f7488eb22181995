"""python -m experiments.repredict RECORDS_FILE [--again KIND] [--target NAME]
[--measured-only]: give the records made before records carried their step's kernels
those kernels, by compiling the step again here, so the per-kernel model predicts them
too (and, with --again, read again the kernels of a kind jaxcnn.perf.hlo now reads
differently):

- measured CPU records that carry a roofline prediction: the per-kernel model's error on
  this CPU is then measured on the same records the roofline's was;
- compile-only records (a target not at hand) that compiled: the targets tables then
  show a per-kernel prediction where they showed a roofline's ceiling (`--target` takes
  one target at a time: a TPU compile takes minutes).

What is compiled is the record's own workload (its model, batch, precision, strategy and
device count, and the formulation it ran with, not the one `auto` would pick today),
placed on this machine's CPU devices, or on the target's abstract devices, against
abstract inputs, with the jax, jaxlib and target compiler (libtpu, the CUDA plugin) the
record names: a record made by another version is left alone (its program may differ),
and so is one whose step cannot be compiled here (pmap needs real arrays).
Each rewritten record gains `kernels` (jaxcnn.perf.hlo.summarize of the program it timed:
the train step, or with the device loop the whole-epoch program) and `kernels_source`
{"program", "steps" one run of it takes, "recompiled": when, "jax": version}; its measured
values and its
own roofline `prediction` are not touched. The file is rewritten atomically under the
lock appends take, every ten minutes and at the end (a stopped run keeps what it had
compiled; a rerun skips a record with kernels). Before any compile, the file is checked
to be rewritable (not immutable, its folder writable, room on its disk for a copy): one
line and exit 2 if not. A record whose step cannot be compiled here (a model this
jaxcnn does not have) is one line, and the records after it are compiled all the same;
the exit code is then 1. A copy that a killed rewrite left beside the file is removed by
the next rewrite.
"""

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
from experiments.cli_options import OneLineParser
from experiments.migrate_records import rewrite_lines
from experiments.tables import one_line_warning
from experiments.workload import Workload
from jaxcnn.perf.hlo import KINDS

# How often a long repredict writes what it has compiled (a TPU target's records take
# hours): a run stopped by anything the process cannot catch loses at most this much.
SAVE_EVERY_S = 600.0


def needs_kernels(
    record: dict[str, Any],
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
    ours = (record.get("kernels_source") or {}).get("recompiled") or not record.get(
        "compiled_not_run"
    )
    redo = (
        again is not None and ours and any(row[1] == again for row in record.get("kernels") or [])
    )
    if record.get("kernels") and not redo:
        return "has kernels"
    if record.get("compiled_not_run"):
        if measured_only:
            return "compile-only (--measured-only)"
        return _compile_only_reason(record, target)
    if target is not None:
        return "not a compile-only record of the target"
    if record.get("status") != "ok" or record["workload"].get("kind") != "train":
        return "not an ok train record"
    if record["device"]["platform"] != "cpu":
        return "not a CPU record"
    if not record.get("prediction"):
        return "made before records carried a prediction"
    if record["workload"].get("strategy") == "pmap":
        return "pmap compiles only with arrays at hand"
    if not _same_versions(record, ("jax", "jaxlib")) or not record["env"].get("jax"):
        return "made by another jax or jaxlib"
    return None


def _compile_only_reason(record: dict[str, Any], target: str | None) -> str | None:
    from experiments.report.figures import device_of, superseded

    if target is not None and device_of(record) != target:
        return "not a compile-only record of the target"
    if record.get("status") not in ("ok", "oom") or not (record.get("memory") or {}).get(
        "total_bytes"
    ):
        return "compile-only, and the compiler gave no program"
    if superseded(record):
        return "compile-only, for a target's former device count"
    if not _same_versions(record, ("jax", "jaxlib", "libtpu", "jax_cuda12_plugin")):
        return "made by another jax, jaxlib or target compiler"
    return None


def _same_versions(record: dict[str, Any], packages: Sequence[str]) -> bool:
    """Whether each of `packages` the record names is the version installed here."""
    for package in packages:
        wanted = record["env"].get(package)
        if wanted is None:
            continue
        try:
            if importlib.metadata.version(package.replace("_", "-")) != wanted:
                return False
        except importlib.metadata.PackageNotFoundError:
            return False
    return True


def step_kernels(record: dict[str, Any]) -> tuple[list[list], int]:
    """The program the record timed (its train step, or with the device loop its
    whole-epoch program), compiled here for its CPU devices, or a compile-only record's
    train step for its target's abstract devices: (its kernel summary, the steps one run
    of it takes)."""
    import jax

    from experiments.compile_only import check, step_program
    from experiments.measure import step_kernels as read_kernels
    from jaxcnn import targets

    workload = Workload(**record["workload"])
    ran_with = (record.get("formulation") or {}).get("name")
    if ran_with:
        workload = dataclasses.replace(workload, formulation=ran_with)
    if record.get("compiled_not_run"):
        target = check(workload)
        devices, where = list(targets.abstract_devices(target)), target.name
    else:
        devices = jax.devices("cpu")[: record["device"].get("count") or 1]
        where = f"this CPU ({len(devices)} device(s))"
    program, steps = step_program(workload, devices, where)
    return read_kernels(program), steps


def _records(
    raw_lines: list[bytes], bad: list[tuple[int, str]] | None = None
) -> Iterator[tuple[bytes, dict[str, Any] | None]]:
    """Each line with its record, None for a line that is none (left as it is; its
    number and why appended to `bad`, blank lines and older schemas aside: the reader,
    records.load, says the same of them)."""
    for line in records.read_lines(raw_lines):
        if bad is not None and line.why:
            bad.append((line.number, line.why))
        yield line.raw, line.record


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
            key = record["config_key"] + str((record.get("formulation") or {}).get("name"))
            if key not in by_key:
                by_key[key] = _compiled(record)
                _stop_if_asked()  # a signal whose exception a compile's callback swallowed
            if by_key[key] is None:
                counts[COULD_NOT_COMPILE] = counts.get(COULD_NOT_COMPILE, 0) + 1
                continue
            found[record["run_id"]] = by_key[key]
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


def _compiled(record: dict[str, Any]) -> tuple[list[list], int] | None:
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
        record = next(_records([raw]))[1]
        if record is None or record.get("run_id") not in found:
            return raw  # a bad line stays as it is, byte for byte
        if needs_kernels(record, again, target) is not None:
            counts[GIVEN_MEANWHILE] = counts.get(GIVEN_MEANWHILE, 0) + 1
            return raw
        record["kernels"], steps = found[record["run_id"]]
        record["kernels_source"] = {
            "program": "epoch" if record.get("loop") == "device" else "train_step",
            "steps": steps,
            "recompiled": records.utc_now(),
            "jax": importlib.metadata.version("jax"),
        }
        counts["recompiled"] = counts.get("recompiled", 0) + 1
        ending = b"\n" if raw.endswith(b"\n") else b""
        return records.encode(record).rstrip(b"\n") + ending

    rewrite_lines(path, rewrite)


def _label(record: dict[str, Any]) -> str:
    w = record["workload"]
    return f"{w['model']} batch {w['batch_size']} {w['precision']} ({record['config_key']})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.repredict", description=__doc__)
    parser.add_argument("path", metavar="RECORDS_FILE")
    parser.add_argument(
        "--again",
        metavar="KIND",
        choices=KINDS,
        help="also compile again the records this command gave kernels of this kind "
        "(after jaxcnn.perf.hlo changed how it reads them)",
    )
    parser.add_argument(
        "--target",
        metavar="NAME",
        help="compile the compile-only records of this target (jaxcnn/targets.py), and only those",
    )
    parser.add_argument(
        "--measured-only",
        action="store_true",
        help="only the records measured on this machine (their CPU programs compile in "
        "seconds); compile-only records are left, whatever --again asks",
    )
    args = parser.parse_args(argv)
    if not Path(args.path).is_file():
        parser.error(f"{args.path} is not a records file")
    if args.target is not None:
        from jaxcnn import targets

        if args.target not in targets.TARGETS:
            parser.error(f"unknown target {args.target!r}: one of {', '.join(targets.TARGETS)}")
    try:  # before the compiles (hours for a target), not after them
        records.check_writable(args.path)
        check_room(Path(args.path))
    except OSError as e:
        parser.error(f"cannot rewrite {args.path}: {e.strerror or e}")
    _received.clear()
    previous = {number: signal.signal(number, _stop) for number in STOP_SIGNALS}
    try:
        with warnings.catch_warnings():
            warnings.showwarning = one_line_warning  # a line it cannot trust: one line
            counts = repredict_file(
                args.path, args.again, args.target, measured_only=args.measured_only
            )
    except (KeyboardInterrupt, Terminated) as stop:
        print(
            f"stopped ({'SIGTERM' if isinstance(stop, Terminated) else 'Ctrl-C'}): what was "
            "compiled is written; run the same command again to go on",
            file=sys.stderr,
        )
        return EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    print(
        ", ".join(f"{n} {why}" for why, n in sorted(counts.items())) or f"no records in {args.path}"
    )
    return 1 if counts.get(COULD_NOT_COMPILE) else 0


def check_room(path: Path) -> None:
    """OSError (ENOSPC) unless the disk `path` lies on has room for its rewrite: a copy
    of it beside it (`records.write_whole`), and a margin."""
    size = path.stat().st_size
    disk = os.statvfs(path.parent)
    free = disk.f_bavail * disk.f_frsize
    if free < size + records.MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"{free} bytes free on its disk; its rewrite needs {size}")


# What shells report for a job a signal ended (experiments.run's codes alike).
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


class Terminated(BaseException):
    """A SIGTERM (a scheduler, `kill`, a notebook's stop) stopped the compiles: a stop,
    like KeyboardInterrupt, not an error, so no `except Exception` (a record that cannot
    be compiled) takes it for one."""


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
_received: list[int] = []  # the stop signals this command's run has received


def _stopping(signum: int) -> BaseException:
    return Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _stop(signum: int, frame: Any) -> None:
    _received.append(signum)
    raise _stopping(signum)  # unwinds through repredict_file, which writes what it compiled


def _stop_if_asked() -> None:
    """Raise the stop a signal asked for where its own exception was lost: raised inside
    a callback the compiler runs (which prints it as ignored and goes on), it never
    reached repredict_file."""
    if _received:
        raise _stopping(_received[0])


def exit_now(code: int) -> None:
    """Exit with `code` once what was compiled is written (`main` returns only then),
    without the interpreter's teardown where a signal stopped a compile: JAX's exit
    handlers then run beside the compile the signal cut short, and the process could
    crash there (exit 139) after a correct write."""
    if code not in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
