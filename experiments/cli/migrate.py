"""python -m experiments.cli.migrate PATH... [--checkpoint-dir DIR]: rewrite records
files (or every *.jsonl under a folder) of schema version 1 as version 2, once.

Schema 1 left out the workload fields the studies added later when they were at their
defaults, and readers filled them in; schema 2 writes every field. Each record of
version 1 gains them explicitly, as they were when it was made:
    workload: kind train, study null, num_devices null, scaling null, ensemble_size 1,
        ensemble_mode null, matmul_precision default, oom_group null, loop step,
        formulation xla (before formulations existed every convolution was XLA's),
        schedule constant, target null (the kinds experiments.records.workload.Workload makes;
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

import sys
from collections.abc import Sequence
from pathlib import Path

from experiments import records
from experiments.cli.options import OneLineParser
from experiments.records.migrate import (
    migrate_file,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m experiments.cli.migrate",
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
