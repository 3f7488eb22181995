"""Many hosts on one CPU: 2 processes x 2 CPU devices joined by jax.distributed (gloo
collectives on 127.0.0.1) train like 1 process with 4 devices; the CLI runs there with
either loop; a bad coordinator is a one-line usage error, not a hang or a C++ abort."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jax
import multihost_worker
import numpy as np
import pytest

from experiments import records
from experiments.cli.run import main
from jaxcnn import distributed
from jaxcnn.errors import UsageError

WORKER = Path(multihost_worker.__file__)
TIMEOUT_S = 240  # generous for 2 loaded cores; a hang fails here instead of forever
# Same reasoning as tests/test_parallel.py: the placements reorder float32 sums.
ATOL = RTOL = 1e-5


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(commands: list[list[str]], devices_each: int = 2) -> list[subprocess.Popen]:
    """Start every command at once, each with its own fake CPU devices."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices_each)}
    return [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for cmd in commands
    ]


def _outputs(procs: list[subprocess.Popen]) -> list[str]:
    """Their outputs once all have ended; all are killed if any outlives the timeout."""
    deadline = time.monotonic() + TIMEOUT_S
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            outputs.append(out)
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        pytest.fail(f"processes still running after {TIMEOUT_S} s: killed")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outputs


def _run_processes(commands: list[list[str]], devices_each: int = 2) -> list[str]:
    """Run every command at once (`_start`); returns their outputs; each must exit 0."""
    procs = _start(commands, devices_each)
    outputs = _outputs(procs)
    for i, (proc, out) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, f"process {i} exited {proc.returncode}:\n{out[-3000:]}"
    return outputs


@pytest.mark.slow
def test_two_processes_train_like_one_process_with_four_devices(tmp_path):
    coordinator = f"127.0.0.1:{_free_port()}"
    strategies = ("sharded", "pmap")
    outputs = _run_processes(
        [
            [sys.executable, str(WORKER), str(tmp_path), ",".join(strategies), coordinator, "2", i]
            for i in ("0", "1")
        ]
    )
    assert all("of 2, 2 of 4 devices" in out for out in outputs)
    # The reference: one process, 4 devices (this test process has 8), same batches.
    reference = multihost_worker.train("sharded", jax.devices()[:4])
    for strategy in strategies:
        got = dict(np.load(tmp_path / f"{strategy}.npz"))
        assert sorted(got) == sorted(reference)
        assert any(k.startswith("batch_stats") for k in got)  # BatchNorm synced too
        for key, expected in reference.items():
            np.testing.assert_allclose(
                got[key], expected, rtol=RTOL, atol=ATOL, err_msg=f"{strategy} {key}"
            )


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["step", pytest.param("device", marks=pytest.mark.every_jax)])
def test_cli_on_two_processes_writes_one_record_from_process_0(tmp_path, loop):
    coordinator = f"127.0.0.1:{_free_port()}"
    args = [
        *("--model", "mlp", "--set", "width=8", "--strategy", "pmap", "--batch-size", "16"),
        *("--set", f"loop={loop}", "--epochs", "1", "--set", "steps=2"),
        *("--set", "timing_steps=2", "--set", "progress=false", "--out", str(tmp_path)),
        *("--set", f"coordinator={coordinator}", "--set", "num_processes=2"),
    ]
    command = [sys.executable, "-m", "experiments.run", *args]
    outputs = _run_processes([[*command, "--set", f"process_id={i}"] for i in ("0", "1")])
    assert "1 record(s) appended" in outputs[0]
    assert "record(s) appended" not in outputs[1]  # process 1 prints no table, writes nothing
    (record,) = records.load(tmp_path / records.RECORDS_FILE)
    assert record.status == "ok", record.message
    assert record.device.count == 4 and record.device.process_count == 2
    assert record.loop == loop  # pmap's compiled epoch spans both processes too


def _cli(out: Path, *extra: str) -> list[list[str]]:
    """The same experiments.cli.run command for process 0 and process 1 of a fresh coordinator:
    2 x 2 fake devices, pmap, 1 epoch of 22 steps of digits."""
    args = [
        *("--model", "mlp", "--set", "width=16", "--dataset", "digits", "--batch-size", "64"),
        *("--strategy", "pmap", "--epochs", "1", "--set", "timing_steps=2"),
        *("--set", "progress=false", "--out", str(out)),
        *("--set", f"coordinator=127.0.0.1:{_free_port()}", "--set", "num_processes=2", *extra),
    ]
    run = [sys.executable, "-m", "experiments.run", *args]
    return [[*run, "--set", f"process_id={i}"] for i in "01"]


@pytest.mark.slow
def test_sigterm_to_one_process_stops_all_at_one_step_and_the_rerun_resumes(tmp_path):
    """A SIGTERM reaches one process of a jax.distributed run (process 1 here, so process
    0, which writes, learns it from the other): both save one checkpoint at the same
    step boundary and exit 143 in one line; the same commands resume bit-identically."""
    stopped, every_5 = tmp_path / "stopped", ("--set", "checkpoint_every=5")
    procs = _start(_cli(stopped, *every_5))
    try:
        steps = stopped / "checkpoints"
        while not [p for p in steps.glob("*/*") if p.name.isdigit()] and procs[1].poll() is None:
            time.sleep(0.02)
        procs[1].send_signal(signal.SIGTERM)
    finally:
        outputs = _outputs(procs)
    ends = [out.strip().splitlines()[-1] for out in outputs]
    assert [p.returncode for p in procs] == [143, 143], "\n".join(o[-2000:] for o in outputs)
    pattern = (
        r"terminated \(SIGTERM\): stopped after (\d+) steps as process 1 of 2 asked; "
        r"checkpoint (\d+) holds them; records written so far are kept; the same command resumes"
    )
    found = [re.fullmatch(pattern, end) for end in ends]
    assert all(found), ends
    assert found[0].groups() == found[1].groups() and found[0][1] == found[0][2], ends
    assert not (stopped / records.RECORDS_FILE).exists()  # no record claims anything

    _run_processes(_cli(stopped, *every_5))  # the same commands resume
    _run_processes(_cli(tmp_path / "whole", "--set", "checkpoints=false"))
    (resumed,) = records.load(stopped / records.RECORDS_FILE)
    (whole,) = records.load(tmp_path / "whole" / records.RECORDS_FILE)
    assert resumed.status == "ok", resumed.message
    assert resumed.resumed_from_step == int(found[0][1])  # the step both stopped at
    assert resumed.params_digest == whole.params_digest


def test_unreachable_coordinator_exits_2_in_one_line(tmp_path, capsys):
    argv = ["--out", str(tmp_path), "--set", "coordinator=127.0.0.1:1"]
    argv += ["--set", "num_processes=2", "--set", "process_id=1", "--set", "coordinator_timeout=1"]
    assert main(argv) == 2  # checked before JAX is called: this process's JAX is untouched
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "coordinator 127.0.0.1:1 not reachable within 1 s" in err
    assert not (tmp_path / records.RECORDS_FILE).exists()


TWO = ["--set", "num_processes=2"]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--set", "coordinator=nonsense"], "needs num_processes and process_id"),
        ([*TWO, "--set", "process_id=0"], "need coordinator=HOST:PORT"),
        (["--set", "coordinator=nohostport", *TWO, "--set", "process_id=1"], "must be HOST:PORT"),
        (
            ["--set", "coordinator=127.0.0.1:5", *TWO, "--set", "process_id=2"],
            "process_id must be in 0..1",
        ),
    ],
)
def test_bad_multihost_flags_exit_2_in_one_line(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_one_process_needs_no_initialisation():
    assert distributed.initialize() is False
    with pytest.raises(UsageError, match="timeout must be positive"):
        distributed.initialize("127.0.0.1:1234", 2, 1, timeout_s=0)


def test_parse_address():
    assert distributed.parse_address("10.0.0.1:1234") == ("10.0.0.1", 1234)
    assert distributed.parse_address("[::1]:8476") == ("::1", 8476)
    for bad in ("10.0.0.1", ":1234", "host:0", "host:http"):
        with pytest.raises(UsageError):
            distributed.parse_address(bad)
