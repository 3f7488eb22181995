"""A rerun skips a workload already recorded on this machine, and only there: on a CPU
the cell is the machine (another computer with the same host name measured another
CPU); on an accelerator it is the chip (a notebook resuming on a fresh VM)."""

import json
import os
import socket
import subprocess
import sys

import pytest

from experiments import records
from experiments.cli.run import main
from jaxcnn import devices

TINY = ["--model", "mlp", "--set", "width=8", "--epochs", "1", "--set", "steps=2"]
TINY += ["--set", "timing_steps=2", "--batch-size", "16", "--set", "progress=false"]
TINY += ["--set", "checkpoints=false"]


def _rewrite_machine(path, machine):
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for record in lines:
        record["device"]["machine"] = machine
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))


@pytest.mark.slow
def test_a_record_from_this_machine_is_skipped_one_from_another_of_its_name_is_not(
    tmp_path, capsys
):
    argv = ["--out", str(tmp_path), *TINY]
    assert main(argv) == 0
    path = tmp_path / records.RECORDS_FILE
    (made,) = records.load(path)
    assert made.device.machine == devices.machine_id()
    assert made.device.host == socket.gethostname()
    capsys.readouterr()
    assert main(argv) == 0  # this machine's record: skipped
    assert "already recorded (ok): skipped" in capsys.readouterr().err
    assert len(records.load(path)) == 1
    _rewrite_machine(path, "another-machine")  # same host name, same key
    assert main(argv) == 0
    assert "already recorded" not in capsys.readouterr().err
    assert len(records.load(path)) == 2  # measured again, here


@pytest.mark.slow
def test_a_cpu_record_without_a_machine_never_counts_as_made_here(tmp_path, capsys):
    argv = ["--out", str(tmp_path), *TINY]
    assert main(argv) == 0
    path = tmp_path / records.RECORDS_FILE
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["device"]["machine"] = None  # as records made before machines were named
    path.write_text(json.dumps(lines[0]) + "\n")
    assert len(records.load(path)) == 1  # a valid record: not skipped for its form
    capsys.readouterr()
    assert main(argv) == 0
    assert "already recorded" not in capsys.readouterr().err
    assert len(records.load(path)) == 2  # measured again, here


def test_the_machine_id_is_stable_and_names_the_host_too(monkeypatch):
    assert devices.machine_id() == devices.machine_id()
    here = devices.machine_id()
    monkeypatch.setattr(socket, "gethostname", lambda: "another-host")
    assert devices.machine_id() != here


@pytest.mark.slow
@pytest.mark.parametrize("checkpoints", [True, False], ids=["checkpoints", "no-checkpoints"])
def test_a_workload_another_run_records_meanwhile_is_recorded_once(
    tmp_path, monkeypatch, capsys, checkpoints
):
    """Two runs of one workload into one --out: this one reads the records, then a real
    second run (another process) measures and records the workload before this one
    reaches it. Under the workload's lock this run reads the records again and skips it."""
    from experiments.harness import sweep

    argv = ["--out", str(tmp_path), *TINY]
    if checkpoints:
        argv = argv[: argv.index("checkpoints=false") - 1]
    other = [sys.executable, "-m", "experiments.run", *argv]
    real_stop_agreed, ran = sweep.stop_agreed, []

    def other_run_first():  # between this run's first read and the workload's lock
        if not ran:
            done = subprocess.run(other, capture_output=True, text=True, timeout=300)
            ran.append(done)
            assert done.returncode == 0, done.stderr
        return real_stop_agreed()

    monkeypatch.setattr(sweep, "stop_agreed", other_run_first)
    assert main(argv) == 0
    assert len(ran) == 1
    (record,) = records.load(tmp_path / records.RECORDS_FILE)
    assert record.status == "ok"
    assert "recorded meanwhile by another run (ok): skipped" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_under_other_conditions_is_its_own_cell_not_a_skip(tmp_path, capsys):
    """JAX_ENABLE_X64=1 measures another thing (other dtypes, another accuracy): its
    record is not taken for the plain run's, nor the plain run's for it."""
    argv = ["--out", str(tmp_path), *TINY]
    x64 = subprocess.run(
        [sys.executable, "-m", "experiments.run", *argv],
        env={**os.environ, "JAX_ENABLE_X64": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert x64.returncode == 0, x64.stderr[-2000:]
    capsys.readouterr()
    assert main(argv) == 0
    assert "already recorded" not in capsys.readouterr().err  # the x64 record is another cell
    path = tmp_path / records.RECORDS_FILE
    made = records.load(path)
    assert [r.conditions for r in made] == [{"x64": True}, None]
    assert len({r.config_key for r in made}) == 2
    assert main(argv) == 0  # positive control: the plain run's own record is skipped
    assert "already recorded (ok): skipped" in capsys.readouterr().err
    assert len(records.load(path)) == 2


def test_conditions_name_only_what_differs_from_the_defaults(monkeypatch):
    from experiments.harness import prepare
    from experiments.records.workload import Workload
    from jaxcnn import host_memory

    step = Workload(model="mlp")
    monkeypatch.setattr(host_memory, "_current", {"policy": "retain", "asked": "auto"})
    assert prepare.conditions(step, "cpu", {}) == {}  # the defaults: the key as before
    neutral = "--xla_dump_to=/tmp/d --xla_force_host_platform_device_count=8"
    assert prepare.conditions(step, "cpu", {"XLA_FLAGS": neutral}) == {}
    flags = f"{neutral} --xla_cpu_use_thunk_runtime=false --xla_cpu_enable_fast_math=true"
    assert prepare.conditions(step, "cpu", {"XLA_FLAGS": flags}) == {
        "xla_flags": ["--xla_cpu_enable_fast_math=true", "--xla_cpu_use_thunk_runtime=false"]
    }
    memory = {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}
    assert prepare.conditions(step, "gpu", memory) == {"jax_memory": memory}
    monkeypatch.setattr(host_memory, "_current", {"policy": "system", "asked": "system"})
    assert prepare.conditions(step, "cpu", {}) == {"host_memory": "system"}
    assert prepare.conditions(step, "gpu", {}) == {}  # auto picks system there too
    device_loop = Workload(model="mlp", loop="device")
    assert prepare.conditions(device_loop, "cpu", {}) == {}
    compile_only = Workload(model="mlp", kind="compile", target="tpu-v5e-1")
    assert prepare.conditions(compile_only, "tpu", {}) == {}
