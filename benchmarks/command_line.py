"""What the two benchmark commands (peers.py and paired.py) take alike from a command
line: the bench's models, usage errors (one line, exit code 2, as every command's
`experiments.cli.options.OneLineParser`), comma-separated lists, and `--out`, checked
writable before any work as experiments.run checks it. The standard library and
experiments.records only: the peers' venv has no JAX.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from experiments import records

MODELS = ("lenet5_keras", "mnist_cnn", "mlp")  # the bench study's (studies/bench.py)
MLP_WIDTH = 4096  # the bench's mlp


class UsageError(ValueError):
    """A bad command line (or a pair that cannot be chosen): one line, exit code 2."""


def names(text: str, allowed: Sequence[str], what: str) -> list[str]:
    """A comma-separated list of `allowed` names, each once, in the order given."""
    chosen = list(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in chosen if n not in allowed]
    if unknown or not chosen:
        bad = ", ".join(unknown) or repr(text)
        raise UsageError(f"unknown {what} {bad}; one of {', '.join(allowed)}")
    return chosen


def batch_sizes(text: str) -> list[int]:
    """--batch-sizes: a comma-separated list of positive integers."""
    try:
        sizes = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        raise UsageError(f"--batch-sizes {text!r} is not a list of integers") from None
    if not sizes or min(sizes) < 1:
        raise UsageError(f"--batch-sizes {text!r}: each batch size must be >= 1")
    return sizes


def add_common(parser: argparse.ArgumentParser) -> None:
    """--models, --batch-sizes and --out, as both commands take them."""
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated (default all)")
    parser.add_argument("--batch-sizes", default="32,128,512", help="comma-separated")
    parser.add_argument(
        "--out",
        default=records.DEFAULT_OUT,
        help=f"folder for records.jsonl (default {records.DEFAULT_OUT}/, git-ignored; "
        "--out=results adds to the records this repository commits)",
    )


def records_path(out: str) -> Path:
    """OUT/records.jsonl, a UsageError if a record could not be appended there
    (records.check_writable: nothing is created)."""
    path = Path(out) / records.RECORDS_FILE
    try:
        records.check_writable(path)
    except OSError as e:
        raise UsageError(f"cannot write to --out {e.filename or path}: {e.strerror or e}") from None
    return path
