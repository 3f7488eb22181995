"""Published training measurements, published per-kernel fixed costs, and published cloud
prices, as data.

`published_references.json` holds one row per published training measurement (a vendor's
table row, a framework example's README, a seed's log line) that predictions are checked
against; `published_overheads.json` holds published launch and dispatch costs per kernel;
`cloud_prices.json` one on-demand list price per chip (and the host VM a chip priced
alone needs), what an epoch's predicted cost is priced at. Every row names its source
and quotes the line its number came from; numbers derived from a published figure (a
total over N chips, a wall time over many steps) say how in `notes`. `load()`,
`load_overheads()` and `load_prices()` validate every row and say the first problem in
one line that names the row. How rows are chosen and added: docs/references.md.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import re
import stat
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from jaxcnn import models
from jaxcnn.errors import DataError
from jaxcnn.perf import chips

REFERENCES_PATH = Path(__file__).with_name("published_references.json")
OVERHEADS_PATH = Path(__file__).with_name("published_overheads.json")
PRICES_PATH = Path(__file__).with_name("cloud_prices.json")

PRECISIONS = ("fp32", "tf32", "amp", "bf16")  # as published; amp is fp16 mixed precision
PLATFORMS = ("gpu", "tpu", "cpu")
# Chips a published run used that jaxcnn.devices' table does not hold (it has no CPUs).
CHIPS_NOT_IN_TABLE = frozenset({"x86 CPU"})
# A row giving both a step time and a throughput must agree with its batch this closely:
# published figures are rounded (Keras prints "2s/step"), a typo is not.
_CONSISTENCY = 0.02
# A scaling row's per-chip figure is the quoted total over its chips, so its product with
# the chips gives the quoted total back, but for a float's last digits.
_SCALING_ROUNDING = 1e-9

# Beyond any published count or rate, and where a float's arithmetic would overflow.
_LIMIT = 2**63
_ID = re.compile(r"[a-z0-9][a-z0-9-]*")
_URL = re.compile(r"https?://\S+")
_SOURCE = re.compile(rf"{_URL.pattern}|seed \d{{3}}")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# What a price row's date is: the date its source states, or the day it was read there.
DATE_KINDS = ("stated", "retrieved")


@dataclass(frozen=True)
class LoopShape:
    """How a published JAX loop runs a step, as its source shows it: what the loop step
    predicted for it charges (experiments.predict.published_loops)."""

    calls_per_step: int  # the jitted calls each step makes
    syncs_every: int  # the steps between two waits for the device inside the timed span
    # The loop's input pipeline as benchmarks/published_inputs.py replays it (a pipeline's
    # name: its time a batch is a record of kind input), or None where the loop slices
    # host arrays itself, as jaxcnn's loop does (then `batch_bytes` says how many bytes).
    input: str | None = None
    batch_bytes: int | None = None
    # Where it slices host arrays: True where its slices are contiguous (NumPy views,
    # nothing gathered: its put copies them), False where it gathers rows as jaxcnn does.
    views: bool = False


@dataclass(frozen=True)
class Reference:
    """One published training measurement of one model on one kind of chip."""

    id: str
    chip: str  # a name in jaxcnn.devices' chip table, or one of CHIPS_NOT_IN_TABLE
    chips: int  # how many chips the published run used
    model: str  # the jaxcnn model it corresponds to
    model_notes: str  # how the published network differs from jaxcnn's
    image_size: int
    precision: str  # one of PRECISIONS
    batch_per_chip: int | None  # None where the source does not say
    images_per_s_per_chip: float | None
    step_time_s: float | None  # only where the source gives a step time
    framework: str
    source_url: str  # an http(s) URL, or "seed NNN"
    quote: str  # the sentence or table row the number was taken from, verbatim
    notes: str  # caveats: input pipeline, XLA, what the number includes
    # Why the fit must not use it (predicted and shown, never fitted), or None: a
    # measure of more than the step (an input pipeline, a whole run's wall time).
    held_out: str | None
    # The model's fields the published network sets apart from jaxcnn's defaults, where
    # it is the same network at another size (the MLP's width), e.g. {"width": 1024}.
    model_overrides: dict[str, int] | None = None
    # A scaling row's (chips > 1): images/s of one chip of the same system, table and
    # batch per chip, quoted beside the N-chip line, so that the published data-parallel
    # efficiency is images_per_s_per_chip / one_chip_images_per_s. Absent elsewhere.
    one_chip_images_per_s: float | None = None
    # The JAX devices the run's program used where fewer than its chips hold, else None
    # (all): 1 for a program jitted without a mesh on a TPU v2 (one TensorCore, half the
    # chip). It is predicted from a target of that many devices (chips.TARGETS).
    devices: int | None = None
    # A published JAX loop's shape, where it is rebuilt (experiments.predict.published_loops).
    loop: LoopShape | None = None
    # The source's range of step times where it gives one ([fastest, slowest]), its
    # fastest end in step_time_s; else None.
    step_time_s_range: list[float] | None = None

    @property
    def scaling_efficiency(self) -> float | None:
        """The published weak-scaling efficiency (1 is ideal), on a scaling row."""
        if self.one_chip_images_per_s is None or self.images_per_s_per_chip is None:
            return None
        return self.images_per_s_per_chip / self.one_chip_images_per_s


@dataclass(frozen=True)
class Overhead:
    """One published fixed cost per launched kernel (or per dispatched op)."""

    platform: str  # one of PLATFORMS
    what: str  # what was measured, on what
    seconds: float
    source_url: str
    quote: str
    notes: str


@dataclass(frozen=True)
class Price:
    """One published on-demand list price of renting `chips` chips of one kind for an hour,
    or (`chip` None) of the host VM a chip priced alone is attached to."""

    id: str
    chip: str | None  # a name in jaxcnn.devices' chip table; None: a host VM's row
    chips: int  # how many chips the quoted price covers (a TPU slice, a multi-GPU VM)
    usd_per_hour: float  # the quoted figure, for all `chips` together
    # A chip priced alone (a GPU attached to a VM billed apart): the id of the host VM's
    # row, whose price is paid on top; None where the price includes its host already.
    host: str | None
    offering: str  # what is rented: the VM or accelerator type
    provider: str
    region: str
    date: str  # YYYY-MM-DD
    date_kind: str  # one of DATE_KINDS
    source_url: str
    quote: str  # the row the figure was read from, verbatim
    notes: str


@dataclass(frozen=True)
class ChipPrice:
    """What one chip costs an hour: its price row and, for a chip priced alone, the row of
    the host VM it needs, one per `price.chips` chips."""

    price: Price
    host: Price | None

    @property
    def usd_per_chip_hour(self) -> float:
        host = self.host.usd_per_hour if self.host else 0.0
        return (self.price.usd_per_hour + host) / self.price.chips


Row = TypeVar("Row", Reference, Overhead, Price)


def load(path: Path | None = None) -> list[Reference]:
    """Every published measurement in `path` (REFERENCES_PATH), validated; DataError
    names the first bad row. Read once per content: the report's sections each ask."""
    return list(_load(*_version(path or REFERENCES_PATH)))


def _version(path: Path) -> tuple[Path, int, int]:
    """`path` with what tells its content apart (modification time, size); (path, -1, -1)
    where it cannot be read (then `_rows` says why)."""
    try:
        info = path.stat()
    except OSError:
        return path, -1, -1
    return path, info.st_mtime_ns, info.st_size


@functools.cache
def _load(path: Path, mtime_ns: int, size: int) -> tuple[Reference, ...]:
    rows = [_parsed(Reference, raw, i, path.name) for i, raw in enumerate(_rows(path))]
    for row in rows:
        _check_reference(row, path.name)
    _check_unique([row.id for row in rows], path.name)
    return tuple(rows)


def load_overheads(path: Path | None = None) -> list[Overhead]:
    """Every published per-kernel fixed cost in `path` (OVERHEADS_PATH), validated."""
    path = path or OVERHEADS_PATH
    rows = [_parsed(Overhead, raw, i, path.name) for i, raw in enumerate(_rows(path))]
    for i, row in enumerate(rows):
        where = f"{path.name}: row {i} ({row.platform}, {row.what[:40]!r})"
        if row.platform not in PLATFORMS:
            raise DataError(f"{where}: platform must be one of {', '.join(PLATFORMS)}")
        if not _URL.fullmatch(row.source_url):
            raise DataError(f"{where}: source_url must be an http(s) URL")
    return rows


def load_prices(path: Path | None = None) -> list[Price]:
    """Every cloud price in `path` (PRICES_PATH), validated: one price per chip, and every
    host a chip names a host VM's row; DataError names the first bad row. Read once per
    content, like `load`."""
    return list(_load_prices(*_version(path or PRICES_PATH)))


def chip_prices(prices: Sequence[Price] | None = None) -> dict[str, ChipPrice]:
    """{chip: what it costs an hour, its host included} from `prices` (load_prices())."""
    prices = load_prices() if prices is None else prices
    by_id = {p.id: p for p in prices}
    return {
        p.chip: ChipPrice(p, by_id.get(p.host) if p.host else None)
        for p in prices
        if p.chip is not None
    }


@functools.cache
def _load_prices(path: Path, mtime_ns: int, size: int) -> tuple[Price, ...]:
    rows = [_parsed(Price, raw, i, path.name) for i, raw in enumerate(_rows(path))]
    for row in rows:
        _check_price(row, path.name)
    _check_unique([row.id for row in rows], path.name)
    hosts = {row.id for row in rows if row.chip is None}
    seen: dict[str, str] = {}
    for row in rows:
        where = f"{path.name}: row {row.id!r}"
        if row.chip is None and row.host is not None:
            raise DataError(f"{where}: a host VM's row (no chip) names no host")
        if row.host is not None and row.host not in hosts:
            raise DataError(f"{where}: host {row.host!r} is not the id of a host VM's row here")
        if row.chip is None:
            continue
        if row.chip in seen:
            raise DataError(
                f"{where} prices chip {row.chip!r} again (row {seen[row.chip]!r} does): one "
                "price per chip, so every cost has one rate"
            )
        seen[row.chip] = row.id
    return tuple(rows)


def _check_price(row: Price, file: str) -> None:
    where = f"{file}: row {row.id!r}"
    if not _ID.fullmatch(row.id):
        raise DataError(f"{where}: id must be a slug of a-z, 0-9 and '-'")
    if row.chip is not None and chips.chip_name(row.chip) != row.chip:
        raise DataError(f"{where}: chip {row.chip!r} is not a name in jaxcnn.devices' chip table")
    if not _URL.fullmatch(row.source_url):
        raise DataError(f"{where}: source_url must be an http(s) URL")
    if row.date_kind not in DATE_KINDS:
        raise DataError(f"{where}: date_kind must be one of {', '.join(DATE_KINDS)}")
    try:
        datetime.date.fromisoformat(row.date)
    except ValueError:
        raise DataError(f"{where}: date must be a YYYY-MM-DD date, not {row.date!r}") from None
    if not any(float(n) == row.usd_per_hour for n in _NUMBER.findall(row.quote)):
        raise DataError(
            f"{where}: usd_per_hour {row.usd_per_hour!r} is not a figure of its quote; give "
            "the quoted price (a per-chip price is usd_per_hour / chips)"
        )


# The largest reference file read: the committed ones are tens of KB; a file far larger
# (or a FIFO, a device that never ends) is no list of published rows.
MAX_REFERENCE_BYTES = 16 * 2**20


def _rows(path: Path) -> list[Any]:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise DataError(f"{path} is not a regular file: give a JSON file of rows")
        if info.st_size > MAX_REFERENCE_BYTES:
            raise DataError(
                f"{path} holds {info.st_size:,} bytes, above the {MAX_REFERENCE_BYTES:,} a "
                "reference file may hold: it is not a list of published rows"
            )
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror or err}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(data, list):
        raise DataError(f"{path} must hold a JSON list of rows, not a {type(data).__name__}")
    return data


def _name(raw: Any, index: int) -> str:
    if isinstance(raw, dict) and isinstance(raw.get("id"), str) and raw["id"]:
        return f"row {raw['id']!r}"
    return f"row {index}"


def _parsed(cls: type[Row], raw: Any, index: int, file: str) -> Row:
    """`raw` as a `cls`, with every field present, known and of its declared type, every
    string non-empty and every number positive."""
    where = f"{file}: {_name(raw, index)}"
    if not isinstance(raw, dict):
        raise DataError(f"{where}: each row must be a JSON object")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise DataError(f"{where}: unknown field(s) {', '.join(unknown)}; fields: {names}")
    optional = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    missing = [name for name in names if name not in raw and name not in optional]
    if missing:
        raise DataError(f"{where}: missing field(s) {', '.join(missing)}")
    values = {
        name: _value(raw[name], hints[name], f"{where}: {name}") for name in names if name in raw
    }
    return cls(**values)


def _value(value: Any, hint: Any, where: str) -> Any:
    allowed = typing.get_args(hint) or (hint,)
    if value is None:
        if type(None) in allowed:
            return None
        raise DataError(f"{where} must not be null")
    if bool in allowed:
        if not isinstance(value, bool):
            raise DataError(f"{where} must be true or false, not {value!r:.40}")
        return value
    if str in allowed:
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"{where} must be a non-empty string")
        return value
    shape = next((a for a in allowed if dataclasses.is_dataclass(a)), None)
    if shape is not None:
        return _parsed(shape, value, 0, where)
    if any(typing.get_origin(a) is dict for a in allowed):
        if (
            not isinstance(value, dict)
            or not value
            or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value.values()
            )
        ):
            example = '{"width": 1024}'
            raise DataError(f"{where} must be an object of positive whole numbers: {example}")
        return dict(value)
    listed = next((a for a in allowed if typing.get_origin(a) is list), None)
    if listed is not None:  # each item of the list's own type
        if not isinstance(value, list) or not value:
            raise DataError(f"{where} must be a non-empty list, not {value!r:.40}")
        (item,) = typing.get_args(listed)
        return [_value(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    kind = "whole number" if int in allowed else "number"
    # JSON true is an int to Python, and no count or rate
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"{where} must be a positive {kind}, not {value!r}")
    if int in allowed and not isinstance(value, int):
        raise DataError(f"{where} must be a whole number, not {value!r}")
    if not -_LIMIT < value < _LIMIT or value <= 0:  # not NaN, inf, nor 400 digits
        raise DataError(f"{where} must be a positive {kind}, not {value!r:.40}")
    return float(value) if float in allowed else value


def _check_reference(row: Reference, file: str) -> None:
    where = f"{file}: row {row.id!r}"
    if not _ID.fullmatch(row.id):
        raise DataError(f"{where}: id must be a slug of a-z, 0-9 and '-'")
    if chips.chip_name(row.chip) != row.chip and row.chip not in CHIPS_NOT_IN_TABLE:
        raise DataError(
            f"{where}: chip {row.chip!r} is neither a name in jaxcnn.devices' chip table nor "
            f"in references.CHIPS_NOT_IN_TABLE"
        )
    if row.model not in models.names():
        raise DataError(f"{where}: model {row.model!r} is not a jaxcnn model: {models.names()}")
    if row.precision not in PRECISIONS:
        raise DataError(f"{where}: precision must be one of {', '.join(PRECISIONS)}")
    if not _SOURCE.fullmatch(row.source_url):
        raise DataError(f"{where}: source_url must be an http(s) URL or 'seed NNN'")
    if row.images_per_s_per_chip is None and row.step_time_s is None:
        raise DataError(f"{where}: give images_per_s_per_chip, step_time_s, or both")
    if None not in (row.batch_per_chip, row.images_per_s_per_chip, row.step_time_s):
        implied = row.images_per_s_per_chip * row.step_time_s / row.batch_per_chip
        if abs(implied - 1) > _CONSISTENCY:
            raise DataError(
                f"{where}: images_per_s_per_chip x step_time_s is {implied:.2f} x "
                f"batch_per_chip; the three must agree"
            )
    if row.step_time_s_range is not None:
        lo_hi = row.step_time_s_range
        if len(lo_hi) != 2 or lo_hi[0] != row.step_time_s or not lo_hi[0] <= lo_hi[1]:
            raise DataError(
                f"{where}: step_time_s_range is [fastest, slowest], its fastest step_time_s"
            )
    if row.one_chip_images_per_s is not None:
        _check_scaling(row, where)
    if row.loop is not None and (row.loop.input is None) == (row.loop.batch_bytes is None):
        raise DataError(
            f"{where}: a loop names its input pipeline (input) or the bytes it slices from host "
            "arrays (batch_bytes), one of the two"
        )
    if row.loop is not None and row.loop.views and row.loop.input is not None:
        raise DataError(
            f"{where}: views says how a loop slices host arrays itself: give it with "
            "batch_bytes, not with an input pipeline"
        )
    if row.devices is not None and chips.part_of_chips(row.chip, row.chips, row.devices) is None:
        raise DataError(
            f"{where}: no target in jaxcnn.perf.chips.TARGETS runs a program on {row.devices} "
            f"device(s) of {row.chips} {row.chip} chip(s): add one there, or leave devices "
            "out for a run on all of its chips' devices"
        )


def _check_scaling(row: Reference, where: str) -> None:
    """A scaling row: N chips at a known batch, held out (its efficiency is what it
    tests, never fitted), and both throughputs figures of its quote (the N-chip one as
    the quoted total, images_per_s_per_chip x chips, to the quote's rounding)."""
    if row.chips < 2 or row.batch_per_chip is None or row.images_per_s_per_chip is None:
        raise DataError(
            f"{where}: a row with one_chip_images_per_s is a scaling row: give chips of 2 or "
            "more, batch_per_chip and images_per_s_per_chip"
        )
    if row.held_out is None:
        raise DataError(
            f"{where}: a scaling row is held out of every fit (its efficiency is predicted "
            "out of sample): say why in held_out"
        )
    quoted = [float(n) for n in _NUMBER.findall(row.quote)]
    if row.one_chip_images_per_s not in quoted:
        raise DataError(
            f"{where}: one_chip_images_per_s {row.one_chip_images_per_s!r} is not a figure of "
            "its quote; quote the one-chip line beside the N-chip one"
        )
    total = row.images_per_s_per_chip * row.chips
    if not any(abs(q - total) <= _SCALING_ROUNDING * q for q in quoted):
        raise DataError(
            f"{where}: images_per_s_per_chip x chips is {total:g}, no figure of its quote; "
            "give the quoted N-chip total over chips"
        )


def _check_unique(ids: list[str], file: str) -> None:
    seen: set[str] = set()
    for rid in ids:
        if rid in seen:
            raise DataError(f"{file}: row {rid!r} appears twice; ids must be unique")
        seen.add(rid)
