import json
import math

import pytest

from experiments import records


def _record(run_id="a", status="ok", **extra):
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": status,
        "message": None,
        "workload": {"model": "mlp", "dataset": "digits", "batch_size": 8, "strategy": "single"},
        "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1},
        "env": {"jax": "0"},
    }
    if status == "ok":
        record.update(
            params={"trainable": 1, "non_trainable": 0},
            compile_time_s={"train": 1.0, "eval": 0.5},
            step_time_s={"median": 0.1, "p10": 0.09, "p90": 0.12, "n": 20},
            images_per_s=80.0,
        )
    record.update(extra)
    return record


def test_append_then_load_round_trips(tmp_path):
    path = tmp_path / "r" / "records.jsonl"
    records.append(path, _record("a"))
    records.append(path, _record("b", status="oom", message="RESOURCE_EXHAUSTED"))
    loaded = records.load(path)
    assert [r["run_id"] for r in loaded] == ["a", "b"]
    assert loaded[1]["message"] == "RESOURCE_EXHAUSTED"


def test_nan_is_written_as_null(tmp_path):
    path = tmp_path / "records.jsonl"
    records.append(path, _record(test_loss=math.nan))
    assert json.loads(path.read_text())["test_loss"] is None


def test_invalid_records_are_refused_before_writing(tmp_path):
    path = tmp_path / "records.jsonl"
    with pytest.raises(records.RecordError, match="status"):
        records.append(path, _record(status="fine"))
    bad = _record()
    del bad["step_time_s"]
    with pytest.raises(records.RecordError, match="step_time_s"):
        records.append(path, bad)
    assert not path.exists()


def test_half_line_is_skipped_with_a_warning_and_the_rest_loads(tmp_path):
    path = tmp_path / "records.jsonl"
    records.append(path, _record("a"))
    with open(path, "a") as handle:
        handle.write('{"schema_version": 1, "run_id": "tor')  # a writer killed mid-line
    records.append(path, _record("b"))  # lands on a line of its own, not after the fragment
    with pytest.warns(UserWarning, match=r"records.jsonl:2: skipped a bad record"):
        loaded = records.load(tmp_path)
    assert [r["run_id"] for r in loaded] == ["a", "b"]


def test_load_merges_files_and_drops_duplicate_run_ids(tmp_path):
    records.append(tmp_path / "m1" / "records.jsonl", _record("a"))
    records.append(tmp_path / "m2" / "records.jsonl", _record("a"))
    records.append(tmp_path / "m2" / "records.jsonl", _record("c"))
    assert [r["run_id"] for r in records.load(tmp_path)] == ["a", "c"]
