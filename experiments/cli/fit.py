"""python -m experiments.cli.fit RECORDS... [--write]: fit the per-kernel model's
constants (jaxcnn/perf/constants.json) and say how far its predictions can be trusted.

The procedure is jaxcnn.perf.fit's; this command gives it its observations: every
measured record carrying kernels, priced at the chip table's rates where it knows the
chip, else at what its machine's runs measured; and every published reference
(experiments/predict/published_references.json) a compile-only record of the same program
matches, priced at the chip table's rates. It holds the constants no observation pins
(`fixed_constants`) with their reason, and stores the host's measured side of a step
(`host_constants`) beside them.

Without --write it prints the fit and changes nothing; with it, the constants file is
rewritten (atomically) under a new version. A platform with fewer observations than its
fit needs keeps its committed constants (one line says so): --write never resets a
platform fitted before to the priors, and writes nothing where no platform was fitted.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from experiments import records
from experiments.cli.options import OneLineParser
from experiments.predict import observations, references
from experiments.predict import shown as predictions
from experiments.records import Record
from experiments.records.tables import one_line_warning
from jaxcnn.errors import DataError
from jaxcnn.perf import predict
from jaxcnn.perf.fit import (
    TOO_FEW,
    keep_committed,
)


def compile_missing(loaded: Sequence[Record], path: Path) -> int:
    """Compile, one after another in a child process each, the program of every
    reference no compile record matches yet, appending each record to `path` (the
    compile-only runner's rules: a crash is an `error` record, a rerun skips what is
    recorded); how many were compiled."""
    from experiments.cli import targets as run_targets
    from experiments.harness import compile_only
    from experiments.harness.isolated import InChild

    wanted = []
    scaling_bases = [
        predictions.one_chip_of(r) for r in references.load() if predictions.compiled_chips(r)
    ]
    for ref in [*references.load(), *scaling_bases]:
        workload = predictions.reference_workload(ref)
        if workload is None or predictions.unpredictable(ref) is not None:
            continue
        if predictions.match_reference(ref, loaded) is None and workload not in wanted:
            wanted.append(workload)
    path.parent.mkdir(parents=True, exist_ok=True)
    with InChild(run_targets.COMPILER) as in_child:
        run = compile_only.recorded_runner(
            path, in_child, on_record=lambda r: print(run_targets.describe(r), flush=True)
        )
        for i, workload in enumerate(wanted, 1):
            print(
                f"[{i}/{len(wanted)}] {workload.model} on {workload.target}, batch "
                f"{workload.batch_size}, {workload.precision}",
                file=sys.stderr,
                flush=True,
            )
            run(workload)
    return len(wanted)


def main(argv: Sequence[str] | None = None) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = one_line_warning  # a skipped record: one line
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    parser = OneLineParser(prog="python -m experiments.cli.fit", description=__doc__)
    parser.add_path("paths", nargs="+", metavar="RECORDS", help="records files or folders")
    parser.add_argument(
        "--write", action="store_true", help=f"rewrite {predict.CONSTANTS_FILE.name}"
    )
    parser.add_path(
        "--compile-missing",
        what="folder",
        metavar="DIR",
        help="first compile the programs of the references no compile record matches "
        "(each a compile-only record appended to DIR/records.jsonl; minutes each)",
    )
    args = parser.parse_args(argv)
    missing = [path for path in args.paths if not Path(path).exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    if args.write:  # before any fit or compile: an immutable file, a read-only folder
        try:
            records.check_writable(predict.CONSTANTS_FILE)
        except OSError as e:
            parser.error(
                f"--write cannot replace {predict.CONSTANTS_FILE}: {e.strerror or e}; make "
                "it and its folder writable (chattr -i, chmod u+w), or leave out --write"
            )
    try:  # a FIFO would block the load forever
        records.records_files(args.paths)
    except OSError as e:
        parser.error(f"cannot read records from {e.filename}: {e.strerror}")
    out = Path(args.compile_missing or ".") / records.RECORDS_FILE
    try:  # checked before compiling for minutes, not after
        if args.compile_missing:
            records.check_writable(out)
    except OSError as e:
        parser.error(f"cannot write to --compile-missing {args.compile_missing}: {e.strerror}")
    try:  # read once, before any compile: a bad row is its one line, not a traceback
        refs = references.load()
        observations.fixed_constants(())
    except DataError as e:
        parser.error(str(e))
    loaded = records.load(*args.paths)
    if args.compile_missing:
        if compile_missing(loaded, out):
            loaded = records.load(*args.paths, out)
    result = observations.fit(loaded, refs)
    if not args.write:
        print(observations.summary(result))
        return 0
    if not any(f["basis"] != TOO_FEW for f in result["families"].values()):
        print(
            f"no platform has the observations for a fit: {predict.CONSTANTS_FILE} left as it was",
            file=sys.stderr,
        )
        return 1
    try:
        committed = predict.constants()
    except (OSError, ValueError):  # none yet, or unreadable: nothing to keep
        committed = {}
    result, kept = keep_committed(result, committed)
    # Before printing: a closed stdout (`| head`) must not lose the fit.
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    try:
        records.write_whole(predict.CONSTANTS_FILE, text.encode())
    except OSError as e:  # since the check: the fit is kept, not lost
        fd, kept_at = tempfile.mkstemp(prefix="constants-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        print(
            f"error: could not replace {predict.CONSTANTS_FILE} ({e.strerror or e}): left as "
            f"it was; the fit is kept in {kept_at}: copy it there once the file is writable",
            file=sys.stderr,
        )
        return 1
    print(observations.summary(result))
    for line in kept:
        print(line)
    print(f"wrote {predict.CONSTANTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
