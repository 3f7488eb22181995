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
import math
import numbers
import re
from collections.abc import Iterator, Sequence
from typing import Any


class JaxcnnError(Exception):
    """Base class: a problem with what was asked, not with jaxcnn itself."""


class UsageError(JaxcnnError, ValueError):
    """An unknown name, an impossible size, a device that is not there."""


class DataError(JaxcnnError):
    """A dataset that cannot be found, read or trusted."""


def unknown_name(what: str, name: Any, known: Sequence[str]) -> str:
    """The one line for a name not among `known`, with the closest known one if any (the
    command line's twin, experiments.cli.options.unknown_name, stays free of JAX)."""
    if not isinstance(name, str):
        return f"{what} must be a name (a str), got {name!r}: choose one of {', '.join(known)}"
    close = difflib.get_close_matches(name.replace("-", "_"), known, n=1) or (
        difflib.get_close_matches(name, known, n=1)
    )
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown {what} {name!r}: {hint}choose one of {', '.join(known)}"


# --- Checks of what a public function was given: each raises one UsageError line -------


def check_choice(what: str, value: Any, known: Sequence[str]) -> None:
    """UsageError unless `value` is one of the names `known` (`what` names the kind)."""
    if not (isinstance(value, str) and value in known):
        raise UsageError(unknown_name(what, value, known))


def check_names(name: str, values: Any, what: str, known: Sequence[str], example: str) -> None:
    """UsageError unless `values` (the argument `name`) is a list or tuple of `what`s
    named in `known` (or a set of them): one str is refused, since it would be read
    letter by letter; `example` shows what to give."""
    if not isinstance(values, (list, tuple, set, frozenset)):
        raise UsageError(f"{name} must be a list or tuple of names, e.g. {example}, got {values!r}")
    for value in values:
        check_choice(what, value, known)


def _whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_count(name: str, value: Any, least: int) -> None:
    """UsageError unless `value` is a whole number (not a bool) of at least `least`."""
    if not _whole(value) or value < least:
        raise UsageError(f"{name} must be a whole number of at least {least}, got {value!r}")


# What both JAX's keys (jax.random.key, a C long) and numpy's generators (no negatives) take.
SEEDS = range(2**63)


def _array_scalar(value: Any, kinds: str) -> bool:
    """Whether `value` is one number of an array type (numpy's or JAX's, traced or not)
    whose dtype kind is among `kinds` ("i", "u", "f")."""
    dtype = getattr(value, "dtype", None)
    return getattr(value, "ndim", None) == 0 and getattr(dtype, "kind", "") in tuple(kinds)


def check_seed(name: str, value: Any) -> None:
    """UsageError unless `value` is a whole number in SEEDS, or one integer of an array's
    type (a traced seed, under jax.vmap: its range is the array type's own)."""
    if _array_scalar(value, "iu"):
        return
    if not _whole(value) or value not in SEEDS:
        raise UsageError(f"{name} must be a whole number in 0..2**63-1, got {value!r}")


def check_positive(name: str, value: Any, example: str) -> None:
    """UsageError unless `value` is a finite real number above 0 (not a bool, not a str),
    or one such number of an array type; a traced one (optax.inject_hyperparams under
    jax.vmap) has no value to check until it runs, and passes."""
    if _array_scalar(value, "fiu"):
        try:
            value = float(value)
        except TypeError:  # traced: JAX's ConcretizationTypeError
            return
    real = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (real and math.isfinite(value) and value > 0):
        raise UsageError(f"{name} must be a finite number above 0, e.g. {example}, got {value!r}")


def described(value: Any) -> str:
    """What `value` is, in a message: `None`, or `a T` (`an int`) by its type's name."""
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def check_type(name: str, value: Any, kind: type | tuple[type, ...], what: str, fix: str) -> None:
    """UsageError unless `value` is a `kind`: `{name} is a T, not {what}: {fix}`."""
    if not isinstance(value, kind):
        raise UsageError(f"{name} is {described(value)}, not {what}: {fix}")


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
