"""The errors jaxcnn raises for things a user can fix, said once.

The CLI turns each into one line on stderr and exit code 2; library users catch them
by class. Anything else escaping the library is a bug. Where a library underneath logs
the same failure first (absl's log, with tracebacks), `absl_logs_held` keeps that from
reaching the user ahead of jaxcnn's own line.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import re
from collections.abc import Iterator, Sequence


class JaxcnnError(Exception):
    """Base class: a problem with what was asked, not with jaxcnn itself."""


class UsageError(JaxcnnError, ValueError):
    """An unknown name, an impossible size, a device that is not there."""


class DataError(JaxcnnError):
    """A dataset that cannot be found, read or trusted."""


def unknown_name(what: str, name: str, known: Sequence[str]) -> str:
    """The one line for a name not among `known`, with the closest known one if any (the
    command line's twin, experiments.cli.options.unknown_name, stays free of JAX)."""
    close = difflib.get_close_matches(name.replace("-", "_"), known, n=1) or (
        difflib.get_close_matches(name, known, n=1)
    )
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown {what} {name!r}: {hint}choose one of {', '.join(known)}"


def first_line(error: BaseException, limit: int = 200) -> str:
    """`error` as `Type: its first line`, without flax's link to its docs: what a
    UsageError quotes of the failure underneath it."""
    first = (str(error).strip().splitlines() or [""])[0]
    first = re.sub(r"\s*\(https?://[^)]*\)", "", first)
    return f"{type(error).__name__}: {first[:limit]}"


@contextlib.contextmanager
def absl_logs_held(level: int = logging.WARNING) -> Iterator[None]:
    """Hold back what absl logs at `level` or above while the block runs: dropped if the
    block raises (the caller says that failure itself, in one line), logged as they came
    if it does not. TFDS and Orbax log to absl, Orbax's writer threads included."""
    from absl import logging as absl_logging  # so "absl" is absl's logger, made by absl

    logger = absl_logging.get_absl_logger()
    held: list[logging.LogRecord] = []

    def hold(record: logging.LogRecord) -> bool:
        if record.levelno >= level:
            held.append(record)
            return False
        return True

    logger.addFilter(hold)
    try:
        yield
    finally:
        logger.removeFilter(hold)
    for record in held:  # reached only when the block raised nothing
        logger.handle(record)
