"""python -m experiments.cli.repredict RECORDS_FILE [--again KIND] [--target NAME]
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

import os
import signal
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from experiments import records
from experiments.cli.options import OneLineParser
from experiments.predict.repredict import (
    COULD_NOT_COMPILE,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    STOP_SIGNALS,
    Terminated,
    check_room,
    received_signals,
    repredict_file,
    stop_on_signal,
)
from experiments.records.tables import one_line_warning
from jaxcnn.perf.hlo import KINDS


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.cli.repredict", description=__doc__)
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
    received_signals.clear()
    previous = {number: signal.signal(number, stop_on_signal) for number in STOP_SIGNALS}
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
