"""A rerun skips a workload already recorded on this machine, and only there: on a CPU
the cell is the machine (another computer with the same host name measured another
CPU); on an accelerator it is the chip (a notebook resuming on a fresh VM)."""

import json
import socket
import subprocess
import sys

import pytest

from experiments import records
from experiments.run import main
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
    assert made["device"]["machine"] == devices.machine_id()
    assert made["device"]["host"] == socket.gethostname()
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
    from experiments import sweep

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
    assert record["status"] == "ok"
    assert "recorded meanwhile by another run (ok): skipped" in capsys.readouterr().err
