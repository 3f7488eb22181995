"""experiments.predict.repredict: older measured CPU records get the kernels of the program they
timed, compiled again here; nothing measured changes, and only what can be compiled the
same way is touched."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import jax
import pytest
from conftest import needs_extra, rekeyed

from experiments import records
from experiments.cli import repredict as repredict_cli
from experiments.harness import measure
from experiments.harness.prepare import load_splits
from experiments.harness.runners.interface import RunContext
from experiments.harness.sweep import run_workload
from experiments.predict import repredict
from experiments.records.workload import Workload


def _measured(loop: str = "step") -> dict:
    """A real measured record of a tiny mlp, as a run writes it today."""
    workload = Workload(
        model="mlp",
        model_overrides={"width": 8},
        batch_size=8,
        epochs=0,
        timing_steps=2,
        loop=loop,
    )
    device = jax.devices()[0]
    context = RunContext(
        jax.devices()[:1],
        load_splits(workload),
        ceiling=measure.measure_matmul_peak(device, sizes=(16,), reps=1),
        bandwidth=measure.measure_bandwidth(device, 2**20, reps=2),
    )
    record = run_workload(workload, context)
    assert record["status"] == "ok", record["message"]
    return record


def _as_before_kernels(record: dict) -> dict:
    """The record as it was written before records carried kernels: its roofline was
    its prediction."""
    old = copy.deepcopy(record)
    old["prediction"] = {**old.pop("prediction_bound"), "method": "roofline"}
    for key in ("kernels", "kernels_source", "prediction_vendor_bound"):
        old.pop(key, None)
    return old


@pytest.mark.slow
def test_an_old_record_gets_the_kernels_of_its_own_program_and_nothing_else_changes(
    tmp_path, capsys
):
    today = _measured()
    old = _as_before_kernels(today)
    never_predicted = {**copy.deepcopy(old), "run_id": "other"}
    never_predicted.pop("prediction")  # older still: the positive control of the rule
    path = tmp_path / "records.jsonl"
    records.append(path, old)
    records.append(path, never_predicted)
    capsys.readouterr()
    counts = repredict.repredict_file(path)
    assert counts == {"recompiled": 1, "made before records carried a prediction": 1}
    said = capsys.readouterr().err  # the compile says what it compiles before it starts
    assert "compiling the train step for this CPU (1 device(s))...\n" in said
    assert "compiled the train step for this CPU (1 device(s)) in " in said
    again, untouched = records.load(path)
    # The same program compiled again: the kernels the run itself read.
    assert again.kernels == records.typed(today).kernels
    assert again.kernels_source.program == "train_step"
    assert again.kernels_source.steps == 1 and again.kernels_source.recompiled
    # Measured values and the roofline it was written with are as they were.
    before = records.typed(old)
    for key in ("step_time_s", "matmul_ceiling", "bandwidth", "prediction", "flops"):
        assert getattr(again, key) == getattr(before, key)
    assert untouched.kernels is None
    assert repredict.repredict_file(path) == {  # a second pass changes nothing
        "has kernels": 1,
        "made before records carried a prediction": 1,
    }


@pytest.mark.slow
def test_a_device_loop_record_gets_the_kernels_of_its_epoch_loop(tmp_path):
    today = _measured(loop="device")
    path = tmp_path / "records.jsonl"
    records.append(path, _as_before_kernels(today))
    repredict.repredict_file(path)
    (again,) = records.load(path)
    assert again.kernels_source.program == "epoch"
    launched = sum(row[0] for row in again.kernels) / again.kernels_source.steps
    step = sum(row[0] for row in today["kernels"]) / today["kernels_source"]["steps"]
    # The same loop body per step, whatever the steps each program was compiled for.
    assert abs(launched - step) <= 2


@pytest.mark.slow
def test_a_record_made_by_another_jax_is_left_alone(tmp_path):
    old = _as_before_kernels(_measured())
    old["env"]["jaxlib"] = "0.0.1"
    path = tmp_path / "records.jsonl"
    records.append(path, old)
    before = path.read_bytes()
    assert repredict.repredict_file(path) == {"made by another jax or jaxlib": 1}
    assert path.read_bytes() == before


@pytest.mark.slow
def test_again_compiles_the_records_whose_kernels_of_a_kind_it_gave(tmp_path):
    old = _as_before_kernels(_measured())
    path = tmp_path / "records.jsonl"
    records.append(path, old)
    repredict.repredict_file(path)
    kinds = {row[1] for row in json.loads(path.read_text())["kernels"]}
    assert "gemm" in kinds
    assert repredict.repredict_file(path, again="collective") == {"has kernels": 1}  # control
    assert repredict.repredict_file(path, again="gemm") == {"recompiled": 1}


@pytest.mark.slow
def test_again_reads_a_measured_records_own_kernels_again(tmp_path, monkeypatch):
    # Kernels read when the run timed its step: the same program compiled again here is
    # read by today's jaxcnn.perf.hlo (a reader fixed since the run).
    today = _measured()
    assert today["kernels"] and not today.get("kernels_source", {}).get("recompiled")
    path = tmp_path / "records.jsonl"
    records.append(path, today)
    assert repredict.repredict_file(path, again="collective") == {"has kernels": 1}  # control
    monkeypatch.setattr(repredict, "step_kernels", lambda record: (KERNELS, 1))
    assert repredict.repredict_file(path, again="gemm") == {"recompiled": 1}
    (again,) = records.load(path)
    assert again.kernels == READ and again.kernels_source.recompiled
    assert again.step_time_s == records.typed(today).step_time_s  # nothing measured changes
    # --measured-only leaves a compile-only record this command gave kernels (a target's
    # compile takes minutes), and still compiles the measured one.
    line = json.loads(path.read_text())
    target_record = {k: v for k, v in line.items() if k in records.CompileRecord.model_fields}
    target_record.update(
        run_id="compiled",
        compiled_not_run=True,
        workload={**line["workload"], "kind": "compile", "target": "gpu-t4"},
        target={"name": "gpu-t4", "chips": 1, "devices": 1},
        memory=line["memory"] or {"total_bytes": 2**20},
    )
    records.append(path, rekeyed(target_record))
    counts = repredict.repredict_file(path, again="gemm", measured_only=True)
    assert counts == {"recompiled": 1, "compile-only (--measured-only)": 1}


@pytest.mark.slow
@needs_extra("targets")
def test_a_compile_only_record_gets_its_targets_kernels_and_only_its_target_is_compiled(tmp_path):
    from experiments.harness.compile_only import run_target

    workload = Workload(model="mnist_cnn", batch_size=16, kind="compile", target="gpu-t4")
    today = run_target(workload, programs=("train",))
    assert today["status"] == "ok", today["message"]
    old = copy.deepcopy(today)
    for key in ("kernels", "kernels_source", "prediction"):
        old.pop(key)
    other = {
        **copy.deepcopy(old),
        "run_id": "v5e",
        "target": {**old["target"], "name": "tpu-v5e-1"},
    }
    refused = {**copy.deepcopy(old), "run_id": "refused", "status": "error", "memory": {}}
    path = tmp_path / "records.jsonl"
    for record in (old, other, refused):
        records.append(path, record)
    counts = repredict.repredict_file(path, target="gpu-t4")
    assert counts == {
        "recompiled": 1,
        "not a compile-only record of the target": 1,
        "compile-only, and the compiler gave no program": 1,
    }
    again, *_ = records.load(path)
    assert again.kernels == records.typed(today).kernels  # the same compiler, the same program
    assert again.kernels_source.program == "train_step" and again.kernels_source.jax
    before = records.typed(old)
    for key in ("memory", "fits", "flops", "cost"):  # what the first compile said stays
        assert getattr(again, key) == getattr(before, key)


@pytest.mark.slow
def test_the_file_is_not_locked_while_it_compiles_and_an_append_meanwhile_is_kept(
    tmp_path, monkeypatch
):
    import fcntl
    import os

    old = _as_before_kernels(_measured())
    path = tmp_path / "records.jsonl"
    records.append(path, old)
    appended = {**copy.deepcopy(old), "run_id": "appended meanwhile"}

    def compile_while_a_run_appends(record):
        fd = os.open(path, os.O_RDWR)
        try:  # what an append takes: it must be free while compiling
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        records.append(path, appended)
        return [[1, "gemm", 2.0, 8.0, "f32", 0]], 1

    monkeypatch.setattr(repredict, "step_kernels", compile_while_a_run_appends)
    assert repredict.repredict_file(path) == {"recompiled": 1}
    first, second = records.load(path)
    assert first.kernels == [(1, "gemm", 2.0, 8.0, "f32", 0, "")]
    assert second.run_id == "appended meanwhile" and second.kernels is None


def test_an_unknown_target_is_one_line_and_exit_2_before_any_compile(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    path.write_text("")
    with pytest.raises(SystemExit) as stopped:
        repredict_cli.main([str(path), "--target=tpu-v9"])
    assert stopped.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "unknown target 'tpu-v9'" in line and "gpu-t4" in line
    assert path.read_text() == ""


def _two_old_records(tmp_path) -> tuple:
    """A records file of two old records of different configurations (two compiles)."""
    old = _as_before_kernels(_measured())
    other = {**copy.deepcopy(old), "run_id": "other"}
    other["workload"]["seed"] = 1  # another configuration: its own key
    other = rekeyed(other)
    path = tmp_path / "records.jsonl"
    records.append(path, old)
    records.append(path, other)
    return path, old["run_id"]


KERNELS = [[1, "gemm", 2.0, 8.0, "f32", 0]]
READ = [(*row, "") for row in KERNELS]  # as the reader reads them: each row's note ""


@pytest.mark.slow
def test_a_run_stopped_mid_way_keeps_what_it_had_compiled_and_a_rerun_goes_on(
    tmp_path, monkeypatch
):
    path, first_id = _two_old_records(tmp_path)
    compiled = []

    def second_compile_interrupted(record):
        if compiled:
            raise KeyboardInterrupt  # Ctrl-C during the second compile
        compiled.append(record.run_id)
        return KERNELS, 1

    monkeypatch.setattr(repredict, "step_kernels", second_compile_interrupted)
    with pytest.raises(KeyboardInterrupt):
        repredict.repredict_file(path)
    kept = {r.run_id: r.kernels for r in records.load(path)}
    assert kept == {first_id: READ, "other": None}
    monkeypatch.setattr(repredict, "step_kernels", lambda record: (KERNELS, 1))
    assert repredict.repredict_file(path) == {"has kernels": 1, "recompiled": 1}
    assert all(r.kernels == READ for r in records.load(path))


@pytest.mark.slow
def test_two_runs_at_once_each_say_what_happened_to_every_record(tmp_path, monkeypatch, capsys):
    path, _ = _two_old_records(tmp_path)
    real_main = repredict_cli.main

    def compile_while_another_run_finishes(record):
        # The second run starts, compiles and writes everything while the first compiles.
        monkeypatch.setattr(repredict, "step_kernels", lambda r: (KERNELS, 1))
        assert real_main([str(path)]) == 0
        return KERNELS, 1

    monkeypatch.setattr(repredict, "step_kernels", compile_while_another_run_finishes)
    assert repredict_cli.main([str(path)]) == 0
    inner, outer = capsys.readouterr().out.splitlines()
    assert inner == "2 recompiled"
    assert outer == "2 given kernels by another run meanwhile"
    assert all(r.kernels == READ for r in records.load(path))


@pytest.mark.slow
def test_a_long_run_writes_what_it_compiled_as_it_goes(tmp_path, monkeypatch):
    path, first_id = _two_old_records(tmp_path)
    on_disk_at_second_compile = {}

    def compile_and_look(record):
        if record.run_id == "other":  # the first compile's kernels are on disk by now
            on_disk_at_second_compile.update({r.run_id: r.kernels for r in records.load(path)})
        return KERNELS, 1

    monkeypatch.setattr(repredict, "step_kernels", compile_and_look)
    assert repredict.repredict_file(path, save_every_s=0) == {"recompiled": 2}
    assert on_disk_at_second_compile == {first_id: READ, "other": None}
    # the control: with the default interval nothing is written before the end
    path, first_id = _two_old_records(tmp_path / "control")
    on_disk_at_second_compile.clear()
    assert repredict.repredict_file(path) == {"recompiled": 2}
    assert on_disk_at_second_compile == {first_id: None, "other": None}


def test_a_sigterm_mid_compile_keeps_what_was_compiled_and_exits_143(tmp_path, monkeypatch, capsys):
    import os
    import signal

    path, first_id = _two_old_records(tmp_path)
    compiled = []

    def terminated_during_the_second(record):
        if compiled:
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal, as a scheduler sends
        compiled.append(record.run_id)
        return KERNELS, 1

    monkeypatch.setattr(repredict, "step_kernels", terminated_during_the_second)
    before = signal.getsignal(signal.SIGTERM)
    assert repredict_cli.main([str(path)]) == repredict.EXIT_TERMINATED
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is put back
    assert "run the same command again" in capsys.readouterr().err
    kept = {r.run_id: r.kernels for r in records.load(path)}
    assert kept == {first_id: READ, "other": None}


def test_a_record_it_cannot_compile_is_one_line_and_the_records_after_it_get_kernels(
    tmp_path, capsys
):
    old = _as_before_kernels(_measured())
    unknown = {**copy.deepcopy(old), "run_id": "unknown"}
    unknown["workload"]["model"] = "no_such_model"  # merged from a newer jaxcnn, say
    unknown = rekeyed(unknown)
    path = tmp_path / "records.jsonl"
    records.append(path, unknown)
    records.append(path, old)
    assert repredict_cli.main([str(path)]) == 1  # really compiled: the record after it too
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 1 and "no_such_model" in skipped[0], err
    assert "Traceback" not in err
    kept = {r.run_id: bool(r.kernels) for r in records.load(path)}
    assert kept == {"unknown": False, old["run_id"]: True}


def test_a_records_file_it_cannot_rewrite_is_one_line_and_exit_2_before_any_compile(
    tmp_path, monkeypatch, capsys
):
    path, _ = _two_old_records(tmp_path)
    compiled = []
    monkeypatch.setattr(repredict, "step_kernels", lambda r: compiled.append(r) or (KERNELS, 1))
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here (not root, or the filesystem lacks it)")
    try:
        with pytest.raises(SystemExit) as stop:
            repredict_cli.main([str(path)])
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert stop.value.code == 2 and compiled == []
    assert f"cannot rewrite {path}: Operation not permitted" in capsys.readouterr().err
    assert repredict_cli.main([str(path)]) == 0 and len(compiled) == 2  # the control


def test_a_disk_without_room_for_the_rewrite_is_one_line_before_any_compile(
    tmp_path, small_disk, monkeypatch, capsys
):
    path, _ = _two_old_records(tmp_path)
    on_small = small_disk / records.RECORDS_FILE
    on_small.write_bytes(path.read_bytes())
    filler = small_disk / "filler"
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler.write_bytes(b"x" * (free - on_small.stat().st_size))  # a copy no longer fits
    monkeypatch.setattr(repredict, "step_kernels", lambda r: pytest.fail("compiled"))
    with pytest.raises(SystemExit) as stop:
        repredict_cli.main([str(on_small)])
    assert stop.value.code == 2
    assert f"cannot rewrite {on_small}: " in capsys.readouterr().err


def test_a_rewrite_killed_midway_leaves_a_copy_the_next_one_removes(tmp_path, monkeypatch):
    path, _ = _two_old_records(tmp_path)
    left = tmp_path / f".{path.name}.0123abcd.tmp"  # what a SIGKILL in write_whole leaves
    left.write_bytes(path.read_bytes())
    unrelated = tmp_path / f".{path.name}.notours.tmp"
    unrelated.write_bytes(b"")
    monkeypatch.setattr(repredict, "step_kernels", lambda record: (KERNELS, 1))
    assert repredict_cli.main([str(path)]) == 0
    assert not left.exists() and unrelated.exists()


@pytest.mark.slow
def test_a_real_sigterm_mid_compile_exits_143_with_what_was_compiled_written(tmp_path):
    import signal
    import sys

    old = _as_before_kernels(_measured())
    model = tmp_path / "model.jsonl"
    for width in (8, 16, 32, 64, 128, 256):  # six configurations: six compiles
        record = copy.deepcopy(old) | {"run_id": f"w{width}"}
        record["workload"]["model_overrides"] = {"width": width}
        records.append(model, rekeyed(record))
    env = {**os.environ, "PYTHONPATH": str(Path(repredict.__file__).parent.parent)}
    for attempt in range(3):  # the crash at exit came in most tries, not all
        path = tmp_path / f"try{attempt}.jsonl"
        path.write_bytes(model.read_bytes())
        command = [sys.executable, "-m", "experiments.cli.repredict", str(path)]
        child = subprocess.Popen(command, stderr=subprocess.PIPE, env=env, text=True)
        said = [child.stderr.readline()]
        while sum(line.startswith("compiled") for line in said) < 2 and said[-1]:
            said.append(child.stderr.readline())  # w8's kernels are kept by now
        child.send_signal(signal.SIGTERM if attempt % 2 == 0 else signal.SIGINT)
        said.append(child.stderr.read())
        child.wait(timeout=300)
        expected = repredict.EXIT_TERMINATED if attempt % 2 == 0 else repredict.EXIT_INTERRUPTED
        assert child.returncode == expected, "".join(said)
        kept = [r.run_id for r in records.load(path) if r.kernels]
        assert "w8" in kept and len(kept) < 6, "".join(said)


def test_records_whose_key_is_not_their_workloads_get_no_kernels_and_one_warning(
    tmp_path, capsys, monkeypatch
):
    """Ten widths under one copied config_key: one compile would give one program's
    kernels to all ten. Each is refused, named by its line in one warning, and left as
    it is; nothing is compiled."""
    old = _as_before_kernels(_measured())
    path = tmp_path / "records.jsonl"
    lines = []
    for width in range(10, 20):
        record = copy.deepcopy(old) | {"run_id": f"w{width}"}
        record["workload"]["model_overrides"] = {"width": width}  # the key stays width 8's
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines))
    compiled = []
    monkeypatch.setattr(repredict, "_compiled", lambda record: compiled.append(record))
    assert repredict_cli.main([str(path)]) == 0
    err = capsys.readouterr().err
    (warning,) = [line for line in err.splitlines() if line.startswith("warning:")]
    assert (
        "skipped 10 bad records (lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10; line 1: config_key" in warning
    )
    assert compiled == [] and path.read_text() == "".join(lines)
