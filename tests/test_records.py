import dataclasses
import fcntl
import json
import math
import os
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import jax
import pytest
from conftest import complete_record, rekeyed, typed

from experiments import records
from experiments.cli import report as report_cli
from experiments.cli import schema as schema_cli
from experiments.records.workload import Workload
from jaxcnn.checkpoint import CheckpointSaveError
from jaxcnn.loop import NonFiniteLoss


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
    return complete_record(record)


def test_append_then_load_round_trips(tmp_path):
    path = tmp_path / "r" / "records.jsonl"
    records.append(path, _record("a"))
    records.append(path, _record("b", status="oom", message="RESOURCE_EXHAUSTED"))
    loaded = records.load(path)
    assert [r.run_id for r in loaded] == ["a", "b"]
    assert loaded[1].message == "RESOURCE_EXHAUSTED"


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
    assert [r.run_id for r in loaded] == ["a", "b"]


def test_load_merges_files_and_drops_duplicate_run_ids(tmp_path):
    records.append(tmp_path / "m1" / "records.jsonl", _record("a"))
    records.append(tmp_path / "m2" / "records.jsonl", _record("a"))
    records.append(tmp_path / "m2" / "records.jsonl", _record("c"))
    with pytest.warns(UserWarning, match=r"m2/records.jsonl: skipped 1 record\(s\) whose run_id"):
        assert [r.run_id for r in records.load(tmp_path)] == ["a", "c"]


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
    records.append(path, _measured())
    loaded = records.load(path)[0]
    assert loaded.flops.per_step == 1000


def test_a_field_no_model_declares_is_read_but_never_written(tmp_path):
    path = tmp_path / "records.jsonl"
    newer = _measured(future_field={"kept": True}, flops__future_part=3)
    with pytest.raises(records.RecordError, match=r"^has future_field, not a field of this schema"):
        records.append(path, _measured(future_field={"kept": True}))
    with pytest.raises(records.RecordError, match=r"^flops has future_part, not a field"):
        records.append(path, _measured(flops__future_part=3))
    assert not path.exists()
    path.write_text(json.dumps(newer) + "\n")  # as a newer jaxcnn of this schema wrote it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (loaded,) = records.load(path)
    assert loaded.future_field == {"kept": True}
    assert loaded.flops.future_part == 3


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
        ({"memory": [1, 2]}, "memory is an array, not an object"),
        ({"compiler_options": "region analysis"}, "compiler_options is a string, not an object"),
    ],
)
def test_mistyped_measurements_are_refused(change, message):
    with pytest.raises(records.RecordError, match=message):
        records.validate(_measured(**change))


# Valid JSON, the schema's fields all there, one of a wrong type: each a field a reader
# uses (the report's tables, the rerun's skip), which would end it in a TypeError.
MISTYPED = [
    ({"device": {"count": "2"}}, "device.count is a string, not an integer"),
    ({"device": {"process_count": None}}, "device.process_count is null, not an integer"),
    ({"config_key": ["a", "b"]}, "config_key is an array, not a string"),
    ({"history": "none"}, "history is a string, not an array"),
    ({"history": [{"epoch": 1, "train_loss": "0.5"}]}, "history[0].train_loss is a string"),
    ({"workload": {"batch_size": "64"}}, "workload.batch_size is a string, not an integer"),
    ({"workload": {"model_overrides": [1]}}, "workload.model_overrides is an array"),
    ({"workload": {"study": 3}}, "workload.study is a number, not a string or null"),
    ({"env": {"utc_time": 5}}, "env.utc_time is a number, not a string or null"),
    ({"step_time_s": {"median": "fast"}}, "step_time_s.median is a string, not a number"),
    ({"params": {"trainable": 1.5}}, "params.trainable is a number, not an integer"),
    ({"test_accuracy": "high"}, "test_accuracy is a string, not a number or null"),
    ({"images_per_s": True}, "images_per_s is true or false, not a number or null"),
    (
        {"workload": {"kind": "compile"}, "target": {"usable_bytes_per_device": "16G"}},
        "target.usable_bytes_per_device is",
    ),
    (
        {"workload": {"kind": "ensemble"}, "ensemble": {"seeds": [0, "1"]}},
        "ensemble.seeds[1] is a string, not an integer",
    ),
    # Of the right type, but what a reader divides, formats or sorts by cannot be.
    ({"step_time_s": {"median": None}}, "step_time_s.median is null, not a positive number"),
    ({"step_time_s": {"median": 0, "p10": 0}}, "step_time_s.median is a number, not a positive"),
    ({"step_time_s": {"p90": -0.5}}, "step_time_s.p90 is -0.5, a negative number"),
    ({"step_time_s": {"p10": 0.2}}, "step_time_s has p10, median, p90 [0.2, 0.1, 0.12], not"),
    ({"test_accuracy": math.nan}, "test_accuracy is nan, not a finite number"),
    ({"images_per_s": math.inf}, "images_per_s is inf, not a finite number"),
    ({"flops": {"per_step": 10**400}}, "flops.per_step is 1000000000000000000000000000000000"),
    ({"images_per_s": 2**70}, "images_per_s is 1180591620717411303424, not a finite number"),
    ({"kernels": [[1, "fusion", 2, 3, None]]}, "kernels[0] has 5 items, not 6 to 7"),
    ({"kernels": [[[1], "fusion", 2, 3, None, 0]]}, "kernels[0][0] is an array, not an integer"),
    ({"kernels": [None]}, "kernels[0] is null, not an array"),
    ({"kernels_source": {"steps": None}}, "kernels_source.steps is null, not an integer"),
    ({"env": {"cpu": {"extensions": ["AVX2", True]}}}, "env.cpu.extensions[1] is true or"),
    ({"env": {"host_memory": {"policy": ["a"]}}}, "env.host_memory.policy is an array"),
    (
        {"workload": {"kind": "paired"}, "paired": {"rounds": [{"jax": {"images_per_s": 0}}]}},
        "paired.rounds[0].jax.images_per_s",
    ),
    (
        {"workload": {"kind": "compile"}, "target": {"chips": None}},
        "target.chips is null, not an integer",
    ),
    (
        {"workload": {"kind": "compile"}, "target": {"devices": 0}},
        "target.devices is a number, not a positive number",
    ),
]


# One committed ok record of each kind (tests/test_records_fuzz.py's fixtures).
FIXTURES = Path(__file__).resolve().parent / "data" / "records_fuzz.jsonl"


def _valid(kind: str) -> dict:
    """A valid ok record of `kind`: a train record made here, another kind's committed."""
    if kind == "train":
        return _record(history=[{"epoch": 1, "steps": 2, "train_loss": 0.5}])
    fixtures = map(json.loads, FIXTURES.read_bytes().splitlines())
    return next(r for r in fixtures if r["workload"]["kind"] == kind and r["status"] == "ok")


def _mistyped(change: dict) -> dict:
    """A valid record of the kind `change` names (its workload's, else train) with
    `change` merged in (a section's keys into that section): a kind's own fields are
    checked only in a record of that kind."""
    record = _valid(change.get("workload", {}).get("kind", "train"))
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(record.get(key), dict):
            record[key] = {**record[key], **value}
        else:
            record[key] = value
    return record


@pytest.mark.parametrize(("change", "message"), MISTYPED)
def test_a_mistyped_field_a_reader_uses_is_refused_naming_it(change, message):
    kind = change.get("workload", {}).get("kind", "train")
    records.validate(_valid(kind))  # a positive control: the record without the change
    with pytest.raises(records.RecordError, match=re.escape(message)):
        records.validate(_mistyped(change))


def test_mistyped_records_are_kept_skipped_and_warned_about_once_with_their_lines(tmp_path):
    path = tmp_path / "records.jsonl"
    records.append(path, _record("good"))
    lines = [
        json.dumps(_mistyped(change) | {"run_id": f"bad{i}"})
        for i, (change, _) in enumerate(MISTYPED)
    ]
    with open(path, "a") as handle:
        handle.write("\n".join(lines) + "\n")
    before = path.read_bytes()
    with pytest.warns(UserWarning) as caught:
        assert [r.run_id for r in records.load(path)] == ["good"]
    assert len(caught) == 1
    said = str(caught[0].message)
    assert f"{path}: skipped {len(MISTYPED)} bad records (lines 2, 3, 4," in said
    assert "line 2: device.count is a string, not an integer" in said
    assert path.read_bytes() == before


# Every committed line through pydantic and jsonschema (tens of seconds): the data do not
# change with the JAX version, so only the default end of CI runs it.
@pytest.mark.slow
def test_every_committed_record_loads_and_follows_the_published_schema():
    jsonschema = pytest.importorskip("jsonschema")
    path = records.SCHEMA_FILE.parent.parent / "results" / records.RECORDS_FILE
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not one line skipped
        loaded = records.load(path)
    assert len(loaded) >= 1958
    validator = jsonschema.Draft202012Validator(json.loads(records.SCHEMA_FILE.read_text()))
    assert all(
        validator.is_valid(record.model_dump(mode="json", exclude_unset=True)) for record in loaded
    )
    for change, _ in MISTYPED[:4]:  # a positive control: what load refuses, it refuses
        assert not validator.is_valid(_mistyped(change))


def test_the_published_schema_and_field_tables_are_current():
    page = records.FIELDS_PAGE.read_text()
    assert page == schema_cli.fields_page(page), (
        "docs/records.md's field tables are stale: python -m experiments.cli.schema rewrites them"
    )
    written_by = json.loads(records.SCHEMA_FILE.read_text()).get("$comment")
    if written_by != records.schema_generator():
        pytest.skip(f"docs/records.schema.json was {written_by}, not {records.schema_generator()}")
    assert records.SCHEMA_FILE.read_text() == records.schema_text(), (
        "docs/records.schema.json is stale: python -m experiments.cli.schema rewrites it"
    )


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
    assert [r.run_id for r in loaded] == ["a", "b"]
    assert len(caught) == 1
    message = str(caught[0].message)
    assert "records.jsonl:2: skipped a bad record" in message and "\n" not in message
    assert path.read_bytes() == before  # the bad line is kept for a person to look at


def test_many_bad_lines_in_a_file_are_one_warning(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"".join(BAD_LINES[:4]))
    records.append(path, _record("a"))
    with pytest.warns(UserWarning) as caught:
        assert [r.run_id for r in records.load(path)] == ["a"]
    assert len(caught) == 1
    expected = "skipped 4 bad records (lines 1, 2, 3, 4; line 1: an array, not an object)"
    assert expected in str(caught[0].message)


# --- construction: one rule for keys, outcomes and the environment ---------------------

CPU = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1, "host": "laptop"}


def test_the_config_key_of_a_fixed_cell_never_changes():
    """Checkpoint folders and rerun skips are found by this key: a change here strands
    every user's checkpoints, and needs a migration (experiments/records/migrate.py)."""
    workload = Workload(model="mlp", model_overrides={"width": 16}, dataset="mnist")
    device = {**CPU, "machine": "abc"}  # the machine is not part of the cell
    assert records.config_key(workload.describe(), device) == "d7c091b3949542a0"
    assert records.config_key(workload.describe(), CPU) == "d7c091b3949542a0"


def test_every_workload_field_is_in_the_schema_and_the_key():
    """The schema lists every field of Workload, and changing any one of them makes
    another cell (a field left out of the key would merge two measurements)."""
    names = [f.name for f in dataclasses.fields(Workload)]
    assert tuple(names) == records.WORKLOAD_FIELDS
    base = Workload()
    changed = {
        "model": "mlp",
        "model_overrides": {"width": 8},
        "dataset": "mnist",
        "batch_size": 64,
        "epochs": 2,
        "steps": 10,
        "optimizer": "sgd",
        "learning_rate": 0.1,
        "seed": 1,
        "strategy": "sharded",
        "precision": "bf16",
        "timing_steps": 5,
        "study": "devices",
        "kind": "matmul",
        "num_devices": 2,
        "scaling": "weak",
        "ensemble_size": 4,
        "ensemble_mode": "vmap",
        "matmul_precision": "highest",
        "oom_group": "batch",
        "loop": "device",
        "formulation": "cpu",
        "schedule": "onecycle",
        "target": "v5e-8",
    }
    assert set(changed) == set(names)
    key = records.config_key(base.describe(), CPU)
    assert records.config_key(Workload().describe(), dict(CPU)) == key  # equal cells
    for name, value in changed.items():
        other = dataclasses.replace(base, **{name: value})
        assert records.config_key(other.describe(), CPU) != key, name


def test_a_cpu_key_names_the_host_and_an_accelerator_key_the_chip():
    workload = Workload().describe()
    assert records.config_key(workload, CPU) != records.config_key(workload, {**CPU, "host": "b"})
    gpu = {"platform": "gpu", "kind": "NVIDIA H100 80GB HBM3", "count": 1, "process_count": 1}
    assert records.config_key(workload, {**gpu, "host": "a"}) == records.config_key(
        workload, {**gpu, "host": "b"}
    )
    assert records.config_key(workload, {**gpu, "host": "a"}) != records.config_key(
        workload, {**gpu, "count": 2, "host": "a"}
    )


def test_a_new_record_is_an_error_until_its_outcome_and_carries_its_key():
    workload = Workload().describe()
    env = records.environment(host_memory=None)
    record = records.new_record(workload, CPU, env, loop="step")
    assert record["status"] == "error" and record["message"] is None
    assert record["schema_version"] == records.SCHEMA_VERSION
    assert record["config_key"] == records.config_key(workload, CPU)
    assert record["loop"] == "step"
    assert env["jax"] == jax.__version__ and env["host_memory"] is None
    assert records.new_record(workload, CPU, env)["run_id"] != record["run_id"]


def test_the_environment_is_read_without_importing_jax():
    code = (
        "import sys; from experiments import records; env = records.environment(); "
        "assert 'jax' not in sys.modules, 'jax imported'; print(env['jax'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == jax.__version__


def test_the_library_imports_neither_the_records_nor_their_schema_library():
    """pydantic is the records' (experiments), not the library's: `import jaxcnn` takes
    none of its import time."""
    probe = (
        "import sys, importlib; importlib.import_module(sys.argv[1]); "
        "print(*[m for m in ('experiments.records', 'pydantic') if m in sys.modules])"
    )

    def loaded(module: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", probe, module], capture_output=True, text=True, check=True
        )
        return done.stdout.split()

    assert loaded("jaxcnn") == []
    assert loaded("experiments.records") == ["experiments.records", "pydantic"]  # the probe sees


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 9 GB"), "oom"),
        (RuntimeError("RESOURCE_EXHAUSTED: Out of memory"), "oom"),
        (RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory"), "oom"),
        (MemoryError(), "oom"),
        (FloatingPointError("invalid value (nan) encountered in jit(train_step)"), "nan"),
        (RuntimeError("INTERNAL: ptxas exited with non-zero error code"), "error"),
        # TensorStore's words for a full disk under an Orbax save: not an OOM
        (
            ValueError(
                'RESOURCE_EXHAUSTED: Error writing "step/0" in OCDBT database at local'
                ' file "/x/": Failed to write 1476955 bytes to file 17: No space left on'
                " device [os_error_code='28']"
            ),
            "error",
        ),
        (ValueError("conv shapes do not match"), "error"),
        # a kernel's on-chip limit, not the device's memory: a smaller batch would not help
        (RuntimeError("RESOURCE_EXHAUSTED: requires 300 KB of shared memory, 228 KB"), "error"),
        (CheckpointSaveError("could not save checkpoint 5 (RESOURCE_EXHAUSTED)"), "error"),
        (NonFiniteLoss(3, 1, float("nan"), []), "nan"),
    ],
)
def test_failures_are_classified(error, status):
    assert records.classify_failure(error) == status


def test_a_failure_becomes_its_record_in_one_line():
    record = {"status": "error", "message": None}
    try:
        raise RuntimeError("\n  RESOURCE_EXHAUSTED: Out of memory allocating 9 GB  \nmore")
    except RuntimeError as error:
        records.failed(record, error)
    assert record["status"] == "oom"
    assert record["message"] == "RuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 9 GB"
    assert "RESOURCE_EXHAUSTED" in record["traceback_tail"][-1]


# --- schema 1 is migrated, not read --------------------------------------------------


def test_a_record_of_schema_1_is_skipped_with_one_line_naming_the_migration(tmp_path):
    path = tmp_path / "records.jsonl"
    records.append(path, _record("new"))
    old = {**_record("old"), "schema_version": 1}
    lines = path.read_text() + json.dumps(old) + "\n" + json.dumps({**old, "run_id": "o2"}) + "\n"
    path.write_text(lines)
    with pytest.warns(UserWarning) as warned:
        loaded = records.load(path)
    assert [r.run_id for r in loaded] == ["new"]
    (warning,) = warned
    assert str(warning.message) == (
        f"{path}: skipped 2 record(s) of an earlier schema version; "
        f"python -m experiments.cli.migrate {path} rewrites them (nothing is deleted)"
    )
    assert path.read_text() == lines  # nothing deleted


def test_a_record_without_a_field_schema_2_requires_is_refused():
    record = _record()
    del record["workload"]["loop"]
    with pytest.raises(records.RecordError, match="workload lacks loop"):
        records.validate(record)
    record = _record()
    del record["device"]["machine"]
    with pytest.raises(records.RecordError, match="device lacks machine"):
        records.validate(record)
    records.validate(_record())  # the positive control


@pytest.mark.parametrize(
    ("kind", "section", "key", "said"),
    [
        ("train", None, "images_per_s", "ok train record lacks images_per_s"),
        ("matmul", "matmul", "n", "matmul lacks n"),
        ("ensemble", "ensemble", "seeds", "ensemble lacks seeds"),
        ("peer", None, "throughput", "ok peer record lacks throughput"),
        ("paired", "paired", "ratio", "paired lacks ratio"),
        ("compile", None, "target", "ok compile record lacks target"),
    ],
)
def test_an_ok_record_without_what_its_kind_requires_is_refused(kind, section, key, said):
    record = _valid(kind)
    records.validate(record)  # the positive control
    del (record[section] if section else record)[key]
    assert _refusal(record) == said
    record["status"], record["message"] = "error", "it failed"
    records.validate(record)  # what only an ok record requires


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("no workload", "record lacks workload"),
        ("no kind", "workload lacks kind"),
        (
            "bogus",
            "workload.kind 'bogus' is not one of 'train', 'matmul', 'ensemble', 'peer', "
            "'paired', 'compile' or 'input'",
        ),
    ],
)
def test_a_record_of_no_kind_is_refused_naming_its_workload(kind, said):
    record = _record()
    if kind == "no workload":
        del record["workload"]
    elif kind == "no kind":
        del record["workload"]["kind"]
    else:
        record["workload"]["kind"] = kind
    assert _refusal(record) == said


def test_a_field_of_another_kind_is_kept_unchecked():
    record = _record(target={"chips": None})  # a compile record's field in a train record
    assert records.validate(record)["target"] == {"chips": None}
    compiled = _valid("compile")
    compiled["target"]["chips"] = None  # the positive control: in its own kind, checked
    assert _refusal(compiled) == "target.chips is null, not an integer"


# --- what a rerun skips -------------------------------------------------------------


def test_only_final_records_made_here_are_skipped(tmp_path):
    path = tmp_path / "records.jsonl"
    here = {**CPU, "machine": "this"}
    keys = {}
    for seed, (run_id, status, device) in enumerate(
        [
            ("a", "ok", here),
            ("b", "error", here),  # retried
            ("c", "skipped", here),
            ("d", "oom", {**CPU, "machine": "other"}),  # another computer's CPU
            ("e", "nan", {**CPU, "machine": None}),  # machine not recorded
        ]
    ):
        message = None if status == "ok" else status
        record = _record(run_id, status, device=device, message=message)
        record = rekeyed({**record, "workload": {**record["workload"], "seed": seed}})
        keys[record["config_key"]] = run_id
        records.append(path, record)
    found, skips = records.recorded(path, "this")
    assert [keys[k] for k in found] == ["a"] and [keys[k] for k in skips] == ["c"]
    found, _ = records.recorded(path)  # every machine's (compile-only targets)
    assert sorted(keys[k] for k in found) == ["a", "d", "e"]
    assert records.recorded(tmp_path / "absent.jsonl") == ({}, set())


def test_an_accelerator_record_counts_from_any_machine_with_the_chip():
    def made_on(platform, kind):
        device = {"platform": platform, "kind": kind, "count": 1, "process_count": 1}
        return typed(_record(device={**device, "machine": "last-session-vm"}))

    tpu, cpu = made_on("tpu", "TPU v5 lite"), made_on("cpu", "cpu")
    assert records.made_here(tpu, "this-vm")
    assert not records.made_here(cpu, "this-vm")
    assert records.made_here(cpu, "last-session-vm")


def test_an_append_waiting_on_a_replaced_file_goes_to_the_new_one(tmp_path):
    """The migration renames a new file over the records file under the append lock:
    an append that waited for the lock must not write into the file renamed away."""
    path = tmp_path / "records.jsonl"
    records.append(path, _record("first"))
    held = os.open(path, os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)
    writer = threading.Thread(target=records.append, args=(path, _record("waited")))
    writer.start()
    writer.join(0.2)
    assert writer.is_alive()  # blocked on the lock
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(path.read_bytes())
    os.replace(replacement, path)
    os.close(held)  # releases the lock
    writer.join()
    assert [r.run_id for r in records.load(path)] == ["first", "waited"]


def test_the_report_skips_a_mistyped_record_in_one_line_instead_of_a_traceback(tmp_path, capsys):

    path = tmp_path / "records.jsonl"
    records.append(path, _record("good"))
    with open(path, "a") as handle:  # a count that is a string: `count > 1` in the labels
        handle.write(json.dumps(_mistyped({"device": {"count": "2"}}) | {"run_id": "bad"}) + "\n")
    assert report_cli.main([str(path)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:2: skipped a bad record (device.count" in err, err


# --- Identity and meaning ---------------------------------------------------------------


def _refusal(record: dict) -> str:
    with pytest.raises(records.RecordError) as refused:
        records.validate(record)
    return str(refused.value)


def test_a_config_key_that_is_not_the_hash_of_its_workload_is_refused():
    record = _record()
    assert records.validate(record) is record  # positive control: its own key passes
    wider = {**record, "workload": {**record["workload"], "model_overrides": {"width": 64}}}
    assert "is not the hash of its workload" in _refusal(wider)
    assert records.validate(rekeyed(wider))["config_key"] != record["config_key"]


def test_conditions_change_the_key_and_none_keep_the_old_one():
    workload, device = _record()["workload"], _record()["device"]
    plain = records.config_key(workload, device)
    assert records.config_key(workload, device, {}) == plain  # old records keep their keys
    x64 = records.config_key(workload, device, {"x64": True})
    policy = records.config_key(workload, device, {"host_memory": "system"})
    assert len({plain, x64, policy}) == 3
    record = records.new_record(workload, device, {"jax": "0"}, {"x64": True})
    assert record["conditions"] == {"x64": True} and record["config_key"] == x64


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("test_accuracy", 1e300, "not an accuracy in [0, 1]"),
        ("history", [{"epoch": 1, "train_accuracy": 1.5}], "history[0].train_accuracy"),
        ("workload.batch_size", 0, "workload.batch_size is 0, not a whole number >= 1"),
        ("workload.timing_steps", 0, "workload.timing_steps"),
        ("device.count", 0, "device.count"),
        ("eval_step_time_s", {"median": 0, "p10": 0, "p90": 0, "n": 3}, "eval_step_time_s"),
        ("env.utc_time", "unknown", "not an ISO 8601 time"),
        ("env.utc_time", "20 Nov 2026", "not an ISO 8601 time"),
    ],
)
def test_a_typed_but_absurd_value_is_refused_naming_the_field(field, value, said):
    record = _record()
    assert records.validate(record)  # positive control
    section, _, key = field.rpartition(".")
    (record[section] if section else record)[key] = value
    assert said in _refusal(rekeyed(record))


def test_a_step_faster_than_any_chip_could_run_its_flops_is_refused_with_the_bound():
    record = _record(flops={"per_step": 14_000_000})  # the smallest committed step's FLOPs
    assert records.validate(record)  # 0.1 s: 1.4e8 FLOP/s
    record["step_time_s"] = {"median": 1e-9, "p10": 1e-9, "p90": 1e-9, "n": 20}
    said = _refusal(record)
    assert "1.4e+16 FLOP/s per device, above the 1e+15" in said, said


def test_recorded_at_is_an_aware_utc_time_and_none_for_the_future_or_missing():
    now = records.parse_time("2026-11-25T12:00:00+00:00")

    def at(text):
        return records.recorded_at(typed(_record(env={"utc_time": text})), now=now)

    assert at("2026-11-25T13:30:00+02:00") == records.parse_time("2026-11-25T11:30:00+00:00")
    assert at("2026-11-25T13:30:00+02:00").tzinfo is not None
    assert at("2099-01-01T00:00:00+00:00") is None  # a wrong clock is never the newest
    assert at("2026-11-25T12:05:00+00:00") is not None  # within the clocks' skew
    assert at(None) is None and records.recorded_at(typed(_record())) is None
    with pytest.raises(records.RecordError, match="env.utc_time"):  # the schema's refusal now
        typed(_record(env={"utc_time": "unknown"}))
    assert at("2026-11-25T11:00:00") == records.parse_time("2026-11-25T11:00:00Z")  # UTC
    # sorted by time, not text: "+02:00" at 13:30 is before "Z" 12:00's "2026-11-25T12"
    texts = ["2026-11-25T11:45:00+00:00", "2026-11-25T13:30:00+02:00"]
    assert max(texts, key=lambda t: at(t)) == texts[0] and max(texts) == texts[1]


def test_machine_id_tells_two_vms_of_one_name_apart():
    def made_on(machine, cpu):
        record = _record()
        record["device"] = {**record["device"], "machine": machine}
        record["env"] = {**record["env"], "host": "vm", "cpu": {"model": cpu}}
        return typed(record)

    assert records.machine_id(made_on("3abda07c2c59983c", "AMD EPYC")) == "3abda07c2c59983c"
    old_amd, old_intel = made_on(None, "AMD EPYC"), made_on(None, "Intel Xeon")
    assert records.machine_id(old_amd) != records.machine_id(old_intel)
    assert records.machine_id(old_amd) == "host:vm|AMD EPYC"


def test_a_future_record_loads_with_one_warning_naming_its_line(tmp_path):
    path = tmp_path / "records.jsonl"
    records.append(path, _record("now", env={"jax": "0", "utc_time": records.utc_now()}))
    records.append(path, _record("later", env={"jax": "0", "utc_time": "2099-01-01T00:00:00Z"}))
    with pytest.warns(
        UserWarning, match=r"1 record\(s\) dated after this machine's clock \(lines 2\)"
    ):
        loaded = records.load(path)
    assert [r.run_id for r in loaded] == ["now", "later"]


def test_a_repeated_run_id_keeps_the_first_and_names_the_line(tmp_path):
    path = tmp_path / "records.jsonl"
    for run_id, accuracy in [("a", 0.5), ("b", 0.6), ("a", 0.9)]:
        records.append(path, _record(run_id, test_accuracy=accuracy))
    with pytest.warns(UserWarning, match=r"skipped 1 record\(s\) whose run_id .*\(lines 3\)"):
        loaded = records.load(path)
    assert [(r.run_id, r.test_accuracy) for r in loaded] == [("a", 0.5), ("b", 0.6)]


def test_a_records_file_with_a_byte_order_mark_is_read_and_not_measured_again(tmp_path):
    path = tmp_path / "records.jsonl"
    record = _record("a")
    path.write_bytes(b"\xef\xbb\xbf" + records.encode(record))  # as a Windows editor saves it
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no bad line
        assert [r.run_id for r in records.load(path)] == ["a"]
    found, _ = records.recorded(path)
    assert list(found) == [record["config_key"]]  # a rerun skips it: nothing appended


def test_a_record_says_whether_its_tree_differed_from_its_commit(tmp_path):
    from experiments.records.make import git_tree

    repo, plain = tmp_path / "repo", tmp_path / "plain"
    repo.mkdir(), plain.mkdir()

    def git(*args):
        subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)

    git("init", "-q")
    (repo / "step.py").write_text("a = 1\n")
    (repo / "results").mkdir()
    (repo / "results" / "records.jsonl").write_text("{}\n")
    git("add", "step.py", "results/records.jsonl")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    clean = git_tree(repo)
    assert len(clean["git_commit"]) == 40 and clean["git_dirty"] is False
    # records a run appends are no change to the code: its next process finds it clean
    (repo / "results" / "records.jsonl").write_text("{}\n{}\n")
    assert git_tree(repo / "results") == clean
    (repo / "other.py").write_text("untracked: not the code that ran\n")
    assert git_tree(repo)["git_dirty"] is False
    (repo / "step.py").write_text("a = 2\n")  # the code that runs is no longer the commit's
    edited = git_tree(repo)
    assert {k: edited[k] for k in ("git_commit", "git_dirty")} == {
        "git_commit": clean["git_commit"], "git_dirty": True}  # fmt: skip
    assert re.fullmatch("[0-9a-f]{16}", edited["git_diff"]) and "git_diff" not in clean
    (repo / "step.py").write_text("a = 3\n")  # another tree on the same commit
    assert git_tree(repo)["git_diff"] != edited["git_diff"]
    (repo / "step.py").write_text("a = 2\n")  # the same edit again: the same tree
    assert git_tree(repo)["git_diff"] == edited["git_diff"]
    # outside git: no commit, and nothing said about changes
    assert git_tree(plain) == {"git_commit": None}


def test_a_record_states_the_cores_its_process_could_use(monkeypatch, tmp_path):
    from experiments.records import host_cpu, make

    # a VM's share of its CPU, as the process sees it (its affinity), not the host's count
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert make.environment()["cpu"]["cores"] == 3
    assert host_cpu.describe("model name\t: X\nflags\t: avx2\n") == {
        "model": "X",
        "extensions": ["AVX2"],
        "cores": 3,
    }
    # the schema holds it, and refuses what is not a count
    good = _record(env={"jax": "0", "cpu": {"model": "X", "cores": 3}})
    bad = _record(env={"jax": "0", "cpu": {"model": "X", "cores": "two"}})
    records.append(tmp_path / "records.jsonl", good)
    with pytest.raises(records.RecordError, match="cores"):
        records.append(tmp_path / "records.jsonl", bad)
    (back,) = records.load(tmp_path / "records.jsonl")
    assert back.env.cpu.cores == 3


def test_the_schema_command_writes_nothing_for_help_or_a_bad_option(monkeypatch, capsys):
    written = []
    monkeypatch.setattr(records, "write_whole", lambda path, data: written.append(path))
    with pytest.raises(SystemExit) as shown:
        schema_cli.main(["--help"])
    assert (
        shown.value.code == 0
        and "usage: python -m experiments.cli.schema" in capsys.readouterr().out
    )
    with pytest.raises(SystemExit) as refused:
        schema_cli.main(["--check"])
    assert refused.value.code == 2 and written == []
    # the control: with no option it writes its three files
    assert schema_cli.main([]) == 0 and len(written) == 3
