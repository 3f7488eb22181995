"""A record is checked as a measurement, not value by value: its step no faster than
its own device could run the step's FLOPs, its epochs and its images a second the time
its step time says, its counts and rates positive, its names names, its closed sets
closed, and a record a newer jaxcnn wrote told apart from a bad one (and never measured
again beside). Each fault is a real committed record changed, beside it unchanged."""

import copy
import json
import warnings
from pathlib import Path

import pytest
from conftest import typed
from test_rerun_skips import TINY

from experiments import records
from experiments.cli import fit as fit_cli
from experiments.cli.run import main as run_main
from experiments.predict import observations
from jaxcnn.perf import hlo

RESULTS = Path(__file__).resolve().parent.parent / "results" / records.RECORDS_FILE


def _committed(test) -> dict:
    """The first committed record `test` holds for."""
    for raw in RESULTS.read_bytes().splitlines():
        record = json.loads(raw)
        if test(record):
            return record
    raise AssertionError("no committed record of that kind")


def _ok_cpu_train(record: dict) -> bool:
    return (
        record["status"] == "ok"
        and record["workload"]["kind"] == "train"
        and record["device"]["platform"] == "cpu"
    )


@pytest.fixture
def trained() -> dict:
    """An ok CPU train record with its matmul ceiling and an epoch of history."""
    return _committed(lambda r: _ok_cpu_train(r) and r.get("history") and r.get("matmul_ceiling"))


@pytest.fixture
def priced() -> dict:
    """An ok CPU train record with its bandwidth and its kernels: one the fit prices."""
    return _committed(lambda r: _ok_cpu_train(r) and r.get("bandwidth") and r.get("kernels"))


def _refusal(record: dict) -> str:
    with pytest.raises(records.RecordError) as refused:
        records.validate(record)
    return str(refused.value)


def _faster(record: dict, factor: float) -> dict:
    """`record` with its step (and so its images a second) `factor` times faster."""
    record = copy.deepcopy(record)
    for key in ("median", "p10", "p90"):
        record["step_time_s"][key] /= factor
    record["images_per_s"] *= factor
    return record


def test_a_step_faster_than_its_own_matmul_ceiling_allows_is_refused(trained):
    assert records.validate(copy.deepcopy(trained))  # positive control: as committed
    said = _refusal(_faster(trained, 2766))
    assert "FLOP/s per device, above the" in said, said
    assert f"{records.schema.CEILING_MARGIN} x the matmul ceiling it measured" in said, said


def test_without_a_ceiling_an_accelerator_step_is_held_to_its_chips_peak(trained):
    record = copy.deepcopy(trained)
    del record["matmul_ceiling"]
    record["history"] = []  # its epochs took a CPU's time
    record["device"] = {**record["device"], "platform": "gpu", "kind": "Tesla T4"}
    record = _faster(record, 1.0)
    record["config_key"] = records.config_key(record["workload"], record["device"])
    flops = record["flops"]["per_step_in_bounds"]
    for key in ("median", "p10", "p90"):  # 100 TFLOP/s: below twice a T4's 65
        record["step_time_s"][key] = flops / 100e12
    record["images_per_s"] = record["workload"]["batch_size"] / record["step_time_s"]["median"]
    assert records.validate(copy.deepcopy(record))  # positive control
    said = _refusal(_faster(record, 10))
    assert f"{records.schema.PEAK_MARGIN} x its chip's peak (65 TFLOP/s)" in said, said


def test_a_step_time_its_epochs_do_not_bear_out_is_refused(trained):
    record = copy.deepcopy(trained)
    batch = record["workload"]["batch_size"]
    for key in ("median", "p10", "p90"):
        record["step_time_s"][key] = 1e300
    record["images_per_s"] = batch / 1e300
    assert "history[0].train_time_s" in _refusal(record)
    assert "not within 100x faster or 10x slower" in _refusal(record)
    longer = copy.deepcopy(trained)  # an epoch 20 times its steps, and the fixed work
    epoch = longer["history"][0]
    steps_time = epoch["steps"] * longer["step_time_s"]["median"]
    epoch["train_time_s"] = 20 * steps_time + records.schema.EPOCH_FIXED_S
    assert "history[0].train_time_s" in _refusal(longer)
    assert records.validate(_faster(trained, 1 / 2))  # within the margin: accepted
    assert records.validate(_faster(trained, 2))
    # an epoch 10.6 times faster than its steps each timed alone to its end (a tiny model
    # on a busy machine: the epoch dispatches ahead) is a measurement, kept
    quick = copy.deepcopy(trained)
    quick["history"][0]["train_time_s"] = steps_time / 10.6
    assert records.validate(quick)
    quick["history"][0]["train_time_s"] = steps_time / 200  # the control: beyond 100x
    assert "history[0].train_time_s" in _refusal(quick)


def test_images_a_second_not_the_step_time_are_refused(trained):
    record = copy.deepcopy(trained)
    record["images_per_s"] *= 20  # a step ten times off, no rounding
    assert "images_per_s" in _refusal(record)


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (("images_per_s",), 0, "images_per_s is a number, not a positive number"),
        (("step_time_s", "n"), 0, "step_time_s has a median of n 0 samples"),
        (("run_id",), "", "run_id is '', not a name"),
        (("run_id",), "a/b", "run_id is 'a/b', not a name"),
        (("device", "platform"), "quantum", "device.platform 'quantum' is not one of"),
        (("workload", "dataset"), "../../etc", "workload.dataset is '../../etc', not a name"),
        (("workload", "model"), "mlp\n", "workload.model is 'mlp\\n', not a name"),
        (("bandwidth", "bytes_per_s"), None, "bandwidth.bytes_per_s is null"),
        (("bandwidth", "bytes_per_s"), 0, "bandwidth.bytes_per_s is a number, not a positive"),
        (("kernels", 0, 1), "x", "kernels[0][1] 'x' is not one of 'gemm'"),
        (("matmul_ceiling", "float32", "tflops"), 0, "matmul_ceiling.float32.tflops"),
    ],
)
def test_an_ok_record_with_no_measurement_in_it_is_refused_naming_the_field(
    priced, path, value, said
):
    record = copy.deepcopy(priced)
    assert records.validate(copy.deepcopy(record))  # positive control
    inner = record
    for key in path[:-1]:
        inner = inner[key]
    inner[path[-1]] = value
    record["config_key"] = records.config_key(record["workload"], record["device"])
    assert said in _refusal(record)


def test_the_kernel_kinds_are_the_programs_own():
    assert records.schema.KERNEL_KINDS == hlo.KINDS


def test_the_fit_skips_a_record_it_cannot_price_in_one_line(priced, tmp_path, capsys):
    good = typed(copy.deepcopy(priced))
    assert len(observations.measured_observations([good])) == 1  # positive control
    # a paired run's side: its blocks waited on another process's, no step timed alone
    side = copy.deepcopy(priced)
    side["env"]["turns"] = {"pair": "p", "side": "jax"}
    assert observations.measured_observations([typed(side)]) == []
    count, _, *rest = good.kernels[0]
    # past the reader: a record made in memory
    in_memory = good.model_copy(update={"kernels": [(count, "x", *rest)]})
    with pytest.warns(UserWarning, match=rf"record {priced['run_id']}: left out of the fit"):
        assert observations.measured_observations([in_memory]) == []
    unpriced = copy.deepcopy(priced)
    unpriced["kernels"][0][1] = "x"
    # From a file, the reader refuses it first, in one line, and the fit runs.
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / records.RECORDS_FILE).write_text(json.dumps(unpriced) + "\n")
    assert fit_cli.main([str(folder)]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "kernels[0][1] 'x'" in err, err


def test_a_newer_record_is_skipped_as_newer_not_bad(trained, tmp_path):
    path = tmp_path / records.RECORDS_FILE
    newer = {**copy.deepcopy(trained), "schema_version": records.SCHEMA_VERSION + 1}
    path.write_text(json.dumps(trained) + "\n" + json.dumps(newer) + "\n")
    with pytest.warns(UserWarning) as warned:
        (loaded,) = records.load(path)
    assert loaded.model_dump(mode="json", exclude_unset=True) == trained
    (message,) = [str(w.message) for w in warned]
    assert "skipped 1 record(s) written by a newer jaxcnn: upgrade jaxcnn" in message
    assert "(lines 2)" in message and "bad" not in message


@pytest.mark.slow
def test_a_run_beside_a_newer_record_refuses_instead_of_measuring_again(tmp_path, capsys):
    argv = ["--out", str(tmp_path), *TINY]
    assert run_main(argv) == 0
    path = tmp_path / records.RECORDS_FILE
    capsys.readouterr()
    assert run_main(argv) == 0  # positive control: its own version's record is skipped
    assert "already recorded (ok): skipped" in capsys.readouterr().err
    (line,) = path.read_text().splitlines()
    record = json.loads(line)
    record["schema_version"] = records.SCHEMA_VERSION + 1
    path.write_text(json.dumps(record) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the load's own line about it
        assert run_main(argv) == 2
    err = capsys.readouterr().err
    assert "1 record(s) written by a newer jaxcnn (lines 1): upgrade jaxcnn" in err, err
    assert path.read_text().count("\n") == 1  # nothing measured beside it
