"""Every field of real records mutated through the reader (records.read_lines, what
records.load reads each line with): refused with a reason that names the field, or
accepted and then read by the predictions and the report's table of figures without
an exception. The records are one of each kind and status, copied from
results/records.jsonl into tests/data/records_fuzz.jsonl."""

import contextlib
import copy
import itertools
import json
import math
from pathlib import Path
from typing import Any

import pytest

from experiments import records
from experiments.predict import references
from experiments.predict import shown as predictions
from experiments.report import figures

FIXTURES = Path(__file__).resolve().parent / "data" / "records_fuzz.jsonl"
REMOVED = object()  # the field taken out of its object (or its array)


def _fixtures() -> list[bytes]:
    return FIXTURES.read_bytes().splitlines()


def _leaves(value: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, value) of every field: each object's keys (an empty object is a field
    itself), an array's first and last items."""
    if isinstance(value, dict) and value:
        return [leaf for key, inner in value.items() for leaf in _leaves(inner, (*path, key))]
    if isinstance(value, list) and value:
        return [leaf for i in sorted({0, len(value) - 1}) for leaf in _leaves(value[i], (*path, i))]
    return [(path, value)]


def _mutations(value: Any) -> dict[str, Any]:
    return {
        "wrong type": 1 if isinstance(value, str) else "x",
        "null": None,
        "negative": -1,
        "NaN": math.nan,
        "huge": 10**400,
        "empty string": "",
        "removed": REMOVED,
    }


def _changed(record: dict, path: tuple, value: Any) -> bytes:
    """`record` with the field at `path` set to `value` (or removed), as a line."""
    record = copy.deepcopy(record)
    inner = record
    for key in path[:-1]:
        inner = inner[key]
    if value is REMOVED:
        del inner[path[-1]]
    else:
        inner[path[-1]] = value
    if path[0] in ("workload", "device", "conditions") and "config_key" in record:
        # consistent with itself, so the change is judged on its meaning, not refused
        # for its key alone (that refusal is tests/test_records.py's)
        with contextlib.suppress(KeyError):  # a removed identity field: no key to make
            conditions = record.get("conditions")
            record["config_key"] = records.config_key(
                record["workload"], record["device"], conditions
            )
    return json.dumps(record).encode()


def _read(raw: bytes) -> records.Line:
    (line,) = records.read_lines([raw])
    return line


def _field(path: tuple) -> str:
    """The name a refusal of the field at `path` must say: its key, or its array's."""
    return next(str(p) for p in reversed(path) if not isinstance(p, int))


@pytest.fixture(scope="module")
def refs() -> list:
    return references.load()


def _read_all(loaded: list, refs: list) -> None:
    """What the predictions and the report read of `loaded`."""
    for record in loaded:
        predictions.of(record)
    figures.build(loaded, refs)


def test_every_fixture_is_accepted_and_read_whole(refs):
    """The positive control: unmutated, every fixture is a record the report reads."""
    loaded = [_read(raw).model for raw in _fixtures()]  # as the reader hands them on
    assert None not in loaded
    kinds = {(r.workload.kind, r.status) for r in loaded}
    assert len(kinds) == len(loaded) == 10  # one of each kind and status committed
    assert len(figures.build(loaded, refs)) > 0
    for record in loaded:
        predictions.of(record)


@pytest.mark.slow
def test_every_field_mutated_is_refused_naming_it_or_read_without_an_exception(refs):
    unnamed, accepted = [], []
    for raw in _fixtures():
        fixture = json.loads(raw)
        mine = []
        for path, value in _leaves(fixture):
            for name, mutated in _mutations(value).items():
                line = _read(_changed(fixture, path, mutated))
                where = f"{'.'.join(map(str, path))} {name}"
                if line.model is not None:
                    mine.append((where, line.model))
                elif not line.why or _field(path) not in line.why:
                    unnamed.append((where, line.why))
        accepted.append(mine)
    assert unnamed == []
    refused = sum(7 * len(_leaves(json.loads(raw))) for raw in _fixtures()) - sum(
        map(len, accepted)
    )
    assert sum(map(len, accepted)) >= 1000 and refused >= 1000  # both halves exercised
    # One record of each fixture at a time: different kinds and statuses, so none hides
    # another (the report shows the newest record of a cell); a batch that raises is
    # read again record by record to name the field.
    crashed = []
    for batch in itertools.zip_longest(*accepted):
        batch = [case for case in batch if case is not None]
        try:
            _read_all([record for _, record in batch], refs)
        except Exception:  # any exception is the failure looked for
            for where, record in batch:
                try:
                    _read_all([record], refs)
                except Exception as e:
                    crashed.append((where, repr(e)[:120]))
    assert crashed == [], "\n".join(map(str, crashed))
