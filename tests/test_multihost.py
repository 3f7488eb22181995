"""Many hosts on one CPU: 2 processes x 2 CPU devices joined by jax.distributed (gloo
collectives on 127.0.0.1) train like 1 process with 4 devices; the CLI runs there with
either loop; a bad coordinator is a one-line usage error, not a hang or a C++ abort."""

from __future__ import annotations

import os
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
from experiments.run import main
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


def _run_processes(commands: list[list[str]], devices_each: int = 2) -> list[str]:
    """Start every command at once with its own fake CPU devices; kill all of them if
    any outlives the timeout. Returns their outputs; each must exit 0."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices_each)}
    procs = [
        subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for cmd in commands
    ]
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
@pytest.mark.parametrize("loop", ["step", "device"])
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
    assert record["status"] == "ok", record.get("message")
    assert record["device"]["count"] == 4 and record["device"]["process_count"] == 2
    assert record["loop"] == loop  # pmap's compiled epoch spans both processes too


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
