"""Real records changed one field at a time: whatever the reader (records.validate, which
records.load applies to every line) lets through, the report's sections and the fit's
observations read without an exception; what it refuses, it refuses naming the field."""

import contextlib
import copy
import json
import random
from pathlib import Path

import pytest

from experiments import records
from experiments.predict import observations as fit_predictions
from experiments.predict import references
from experiments.predict import shown as predictions
from experiments.report import figures, views

RESULTS = Path(__file__).resolve().parent.parent / "results" / records.RECORDS_FILE
# What a field is changed to: null, the wrong type, out of range, not finite, markup.
VALUES = [
    None, -1, 0, -1e-3, float("nan"), float("inf"), 10**400, 1e308, 2**62, True,
    "x|<b>\n# h", [], {}, [1], ["a"],
]  # fmt: skip
MUTATIONS = 640  # of which about a sixth pass the reader


def _sample(rng: random.Random) -> list[dict]:
    """Up to two records of each kind, status and study among the committed records."""
    groups: dict[tuple, list[dict]] = {}
    for raw in RESULTS.read_bytes().splitlines():
        r = json.loads(raw)
        groups.setdefault((r["workload"]["kind"], r["status"], r["workload"].get("study")), [])
        groups[(r["workload"]["kind"], r["status"], r["workload"].get("study"))].append(r)
    chosen = [rng.sample(group, min(2, len(group))) for _, group in sorted(groups.items(), key=str)]
    return [r for pair in chosen for r in pair]


def _leaves(value, path=()):
    """(path, value) of every field: each object's keys, an array's first and last item."""
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from _leaves(inner, (*path, key))
    elif isinstance(value, list) and value:
        yield path, value
        for index in {0, len(value) - 1}:
            yield from _leaves(value[index], (*path, index))
    else:
        yield path, value


def _changed(record: dict, path: tuple, value) -> bytes:
    """`record` with the field at `path` set to `value`, as a line of a records file."""
    record = copy.deepcopy(record)
    inner = record
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    if path[0] in ("workload", "device", "conditions") and "config_key" in record:
        # a record consistent with itself, so the change is judged on its meaning, not
        # refused for its key alone (that refusal is tests/test_records.py's)
        with contextlib.suppress(KeyError, TypeError, AttributeError):
            conditions = record.get("conditions")
            record["config_key"] = records.config_key(
                record["workload"], record["device"], conditions
            )
    return json.dumps(record).encode()


def _read_all(loaded: list, out: Path) -> None:
    """What the report and the fit read of `loaded`: the table of figures and every page
    of it (the plots draw from the same table), and the fit's observations."""
    table = figures.build(loaded)
    views.first_screen(table)
    views.bench_block(table, None)
    for name in views.PAGE_SECTIONS:  # the answers ran in first_screen: not again here
        views.page(name, table, {}, [])
    fit_predictions.measured_observations(loaded)
    for record in loaded:
        predictions.of(record)
        records.recorded_at(record)
        records.machine_id(record)


@pytest.fixture
def quick_report(monkeypatch):
    """The published references read once, not per report."""
    loaded = references.load()
    monkeypatch.setattr(references, "load", lambda *a: loaded)


@pytest.mark.slow
def test_no_record_the_reader_lets_through_crashes_the_report_or_the_fit(tmp_path, quick_report):
    rng = random.Random(42)
    sample = _sample(rng)
    cases = [
        (i, path, value)
        for i, record in enumerate(sample)
        for path, _ in _leaves(record)
        if path not in (("schema_version",), ("run_id",))
        for value in VALUES
    ]
    passed, refused, crashed = 0, 0, []
    for i, path, value in rng.sample(cases, MUTATIONS):
        line = _changed(sample[i], path, value)
        try:
            mutated = records.typed(records.parse_line(line))  # as the reader hands it on
        except records.RecordError as e:
            refused += 1
            assert str(e), (path, value)
            continue
        passed += 1
        study = mutated.workload.study
        others = [
            records.typed(r)
            for j, r in enumerate(sample)
            if j != i and r["workload"].get("study") == study  # a line's JSON, not yet read
        ]
        try:
            _read_all([mutated, *others], tmp_path)
        except Exception as e:  # any exception is the failure looked for
            crashed.append((".".join(map(str, path)), repr(value)[:20], repr(e)[:120]))
    assert crashed == []
    assert passed >= 100 and refused >= 100  # both halves exercised
