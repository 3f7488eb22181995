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


def _measured(**changes):
    fields = {
        "flops": {
            "per_step": 1000,
            "per_image": 125.0,
            "forward_per_image": 50.0,
            "xla_per_device": None,
            "xla_per_step": None,
            "xla_vs_jaxpr": None,
            "by_primitive": {"dot_general": 1000},
            "unknown_trip_count": False,
        },
        "achieved_tflops": 1e-8,
        "mfu": {"vendor_precision": "fp32", "vendor_peak_tflops": None, "vs_measured": 0.4},
        "memory": {"argument_bytes": 64, "peak_bytes_in_use": None},
        "eval_step_time_s": {"median": 0.01, "p10": 0.01, "p90": 0.02, "n": 20},
        "matmul_ceiling": {"float32": {"tflops": 0.15, "size": 1024}},
    }
    for dotted, value in changes.items():
        field, _, key = dotted.partition("__")
        if key:
            fields[field][key] = value
        else:
            fields[field] = value
    return _record(**fields)


def test_measurement_fields_validate_and_round_trip(tmp_path):
    path = tmp_path / "records.jsonl"
    records.append(path, _measured(future_field={"kept": True}))
    loaded = records.load(path)[0]
    assert loaded["flops"]["per_step"] == 1000
    assert loaded["future_field"] == {"kept": True}  # unknown keys are kept


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"flops__per_step": "1000"}, "flops.per_step"),
        ({"flops__per_step": True}, "flops.per_step"),
        ({"memory__temp_bytes": 1.5}, "memory.temp_bytes"),
        ({"mfu__vs_vendor": "high"}, "mfu.vs_vendor"),
        ({"achieved_tflops": "fast"}, "achieved_tflops"),
        ({"eval_step_time_s__n": 2.5}, "eval_step_time_s.n"),
        ({"matmul_ceiling": {"float32": 1.0}}, "matmul_ceiling"),
        ({"bandwidth": {"bytes_per_s": "fast"}}, "bandwidth.bytes_per_s"),
        ({"prediction": {"step_time_s": "soon"}}, "prediction.step_time_s"),
        ({"prediction_vendor": {"bound": 1}}, "prediction_vendor.bound"),
        ({"cost": {"flops_source": 3}}, "cost.flops_source"),
        ({"memory": [1, 2]}, "memory is not an object"),
        ({"compiler_options": "region analysis"}, "compiler_options is not an object"),
    ],
)
def test_mistyped_measurements_are_refused(change, message):
    with pytest.raises(records.RecordError, match=message):
        records.validate(_measured(**change))


BAD_LINES = [
    b"[1, 2, 3]\n",  # valid JSON, not an object
    b"null\n",
    b'"a string"\n',
    b"\xff\xfe not utf-8\n",
    b'{"run_id": "x", "status": "ok", "step_time_s": 5}\n',  # an object, not the schema
    b'{"schema_version": 1, "run_id": "tor',  # torn, last in the file
]


@pytest.mark.parametrize("bad", BAD_LINES)
def test_any_bad_line_is_kept_skipped_and_warned_about_once(tmp_path, bad):
    path = tmp_path / "records.jsonl"
    records.append(path, _record("a"))
    with open(path, "ab") as handle:
        handle.write(bad)
    records.append(path, _record("b"))
    before = path.read_bytes()
    with pytest.warns(UserWarning) as caught:
        loaded = records.load(path)
    assert [r["run_id"] for r in loaded] == ["a", "b"]
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "records.jsonl:2: skipped a bad record" in message and "\n" not in message
    assert path.read_bytes() == before  # the bad line is kept for a person to look at


def test_many_bad_lines_in_a_file_are_one_warning(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"".join(BAD_LINES[:4]))
    records.append(path, _record("a"))
    with pytest.warns(UserWarning) as caught:
        assert [r["run_id"] for r in records.load(path)] == ["a"]
    assert len(caught) == 1
    expected = "skipped 4 bad records (lines 1, 2, 3, 4; line 1: an array, not an object)"
    assert expected in str(caught[0].message)
