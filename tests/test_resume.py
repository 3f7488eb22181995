"""Checkpoints and resume: a run killed anywhere ends with the parameters, bit for bit,
and the per-epoch metrics of the run that was never interrupted."""

import asyncio
import contextlib
import errno
import functools
import gc
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from experiments import records
from experiments.cli.run import main
from jaxcnn import choices, data, loop, models, parallel, train
from jaxcnn.checkpoint import (
    QUIET_S,
    TMP_MARKER,
    Checkpoints,
    CheckpointSaveError,
    CheckpointWarning,
    _remove_failed_save,
    _remove_unfinished_saves,
    params_digest,
)
from jaxcnn.errors import UsageError
from jaxcnn.loop import FitOptions, NonFiniteLoss, fit

# 1,438 digits / batch 64 = 22 steps per epoch; saving every 5 steps is slow enough
# (one synchronous Orbax save each) to kill the run while it trains, and quick.
RUN = [
    "--model", "mlp", "--set", "width=16", "--dataset", "digits", "--batch-size", "64",
    "--epochs", "4", "--set", "timing_steps=2", "--set", "progress=false",
]  # fmt: skip
EPOCHS, STEPS_PER_EPOCH = 4, 22
EVERY_5 = ["--set", "checkpoint_every=5"]


def _without_times(history):
    return [{k: v for k, v in e.items() if not k.endswith("time_s")} for e in history]


def _epochs(record: records.TrainRecord) -> list[dict]:
    """A loaded record's history as the dicts fit returns, each with the keys its line held."""
    return [e.model_dump(mode="json", exclude_unset=True) for e in record.history]


def _step_dirs(root: Path) -> list[Path]:
    return [p for p in root.glob("*/*") if p.is_dir() and p.name.isdigit()]


@functools.cache
def _digits():
    return data.load("digits", "train"), data.load("digits", "test")


@pytest.fixture
def digits():
    return _digits()


@functools.cache
def _host_state(learning_rate=1e-3, width=16):
    """One initial state on the host, reused: each fit places a fresh copy of it (the
    step donates what it is given), and one optimizer object keeps the jit cache warm."""
    tx = train.make_optimizer("adam", learning_rate)
    model = models.get("mlp", width=width)
    return jax.device_get(train.create_train_state(model, tx, models.input_shape("mlp")))


def _state(learning_rate=1e-3, width=16):
    return _host_state(learning_rate, width)


def _placement(strategy):
    count = 1 if strategy == "single" else 2
    return parallel.place(strategy, jax.devices()[:count])


def _fit(digits, strategy="single", directory=None, width=16, **kwargs):
    """(params digest, history, checkpoint step restored from) of a 2-epoch run of mlp
    `width`: 11 steps an epoch, saved at steps 5, 10, 11 (epoch end), 15, 20 and 22."""
    placement = _placement(strategy)
    with Checkpoints(directory, keep=3) if directory else contextlib.nullcontext() as ckpt:
        options = FitOptions(
            epochs=2,
            batch_size=128,
            seed=0,
            placement=placement,
            checkpoints=ckpt,
            checkpoint_every=5,
            **kwargs,
        )
        state, history = fit(_state(width=width), *digits, options)
        restored = ckpt.restored_step if ckpt else None
    return params_digest(placement.get_state(state).params), _without_times(history), restored


@functools.cache
def _whole(strategy):
    """The uninterrupted run, without checkpoints."""
    return _fit(_digits(), strategy)


@pytest.mark.slow
def test_a_run_killed_with_sigkill_resumes_to_bit_identical_params(tmp_path):
    killed = tmp_path / "killed"
    run = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", "--out", str(killed), *RUN, *EVERY_5],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while not _step_dirs(killed / "checkpoints") and run.poll() is None:
            time.sleep(0.02)
        os.kill(run.pid, signal.SIGKILL)
    finally:
        run.wait(timeout=60)
    assert run.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert not (killed / "records.jsonl").exists()

    assert main(["--out", str(killed), *RUN, *EVERY_5]) == 0  # the same command resumes
    assert main(["--out", str(tmp_path / "whole"), *RUN, "--set", "checkpoints=false"]) == 0
    (resumed,) = records.load(killed / "records.jsonl")
    (whole,) = records.load(tmp_path / "whole" / "records.jsonl")
    assert 5 <= resumed.resumed_from_step < EPOCHS * STEPS_PER_EPOCH
    assert "resumed_from_step" not in whole
    assert resumed.config_key == whole.config_key
    assert resumed.params_digest == whole.params_digest
    assert _without_times(_epochs(resumed)) == _without_times(_epochs(whole))
    assert len(resumed.history) == EPOCHS


@pytest.mark.slow
def test_a_run_killed_with_sigkill_during_a_save_resumes(tmp_path):
    """Killed while Orbax writes a step (its temporary folder, with the state item in
    it, is on disk): the same command resumes and ends bit-identical."""
    killed = tmp_path / "killed"
    every_1 = ["--set", "checkpoint_every=1"]
    left = []
    for _ in range(5):  # the kill can land just after the rename that ends a save
        run = subprocess.Popen(
            [sys.executable, "-m", "experiments.run", "--out", str(killed), *RUN, *every_1],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while run.poll() is None:
                try:
                    saving = list((killed / "checkpoints").glob("*/*.orbax-checkpoint-tmp/state*"))
                except FileNotFoundError:  # Orbax renamed the folder while glob listed it
                    continue
                if saving and _step_dirs(killed / "checkpoints"):
                    os.kill(run.pid, signal.SIGKILL)
                    break
        finally:
            run.wait(timeout=60)
        assert run.returncode == -signal.SIGKILL, "the run ended before it could be killed"
        left = list((killed / "checkpoints").glob("*/*.orbax-checkpoint-tmp"))
        if left:
            break
    assert left, "no kill landed inside a save"

    assert main(["--out", str(killed), *RUN, *every_1]) == 0
    assert main(["--out", str(tmp_path / "whole"), *RUN, "--set", "checkpoints=false"]) == 0
    (resumed,) = records.load(killed / "records.jsonl")
    (whole,) = records.load(tmp_path / "whole" / "records.jsonl")
    assert resumed.status == "ok" and resumed.resumed_from_step >= 1
    assert resumed.params_digest == whole.params_digest
    assert not list((killed / "checkpoints").glob("*/*.orbax-checkpoint-tmp"))


# experiments.cli.run with Orbax's temporary paths instrumented: the save of checkpoint
# STEP calls create() on the step's folder, then on its two items (meta, state), then
# finalize() on the items and on the step's folder (6 calls; the items' bytes are
# written between the creates and the finalizes). The process ends with os._exit, as
# a kill would, before or after call N.
_KILLED_INSIDE_A_SAVE = """
import os, sys
from orbax.checkpoint._src.path import atomicity
step, nth, when, *argv = sys.argv[1:]
calls = 0
def wrap(cls, name):
    original = getattr(cls, name)
    async def wrapped(self, *args, **kwargs):
        global calls
        ours = f"/{step}.orbax-checkpoint-tmp" in str(self.get())
        calls += ours
        number = calls if ours else 0  # the items' calls overlap: count each at its start
        if number == int(nth) and when == "before":
            os._exit(9)
        result = await original(self, *args, **kwargs)
        if number == int(nth) and when == "after":
            os._exit(9)
        return result
    setattr(cls, name, wrapped)
for cls in (atomicity.AtomicRenameTemporaryPath, atomicity.CommitFileTemporaryPath):
    for name in ("create", "finalize"):
        wrap(cls, name)
from experiments.cli.run import main
sys.exit(main(argv))
"""
ONE_EPOCH = [*RUN[: RUN.index("--epochs")], "--epochs", "1", *RUN[RUN.index("--epochs") + 2 :]]


@functools.cache
def _whole_digest() -> str:
    """The digest of ONE_EPOCH run without checkpoints."""
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        assert main(["--out", out, *ONE_EPOCH, "--set", "checkpoints=false"]) == 0
        (record,) = records.load(Path(out) / records.RECORDS_FILE)
    return record.params_digest


@pytest.mark.slow
@pytest.mark.parametrize(
    "when,nth,left",
    [
        ("before", 1, None),  # nothing of step 10 on disk yet
        ("after", 1, "10.orbax-checkpoint-tmp"),  # the step's folder, empty
        ("after", 3, "10.orbax-checkpoint-tmp/state.orbax-checkpoint-tmp"),  # items' folders
        ("before", 4, "10.orbax-checkpoint-tmp/state.orbax-checkpoint-tmp"),  # items written
        ("before", 5, "10.orbax-checkpoint-tmp/meta"),  # one item final, not the other
        ("before", 6, "10.orbax-checkpoint-tmp/state"),  # both final, the step not yet
        ("after", 6, "10"),  # the step final: the resume starts from it
    ],
)
def test_a_run_killed_at_each_phase_of_a_save_resumes_bit_identically(tmp_path, when, nth, left):
    """Killed at a chosen point of the save of checkpoint 10 (of 5, 10, 15, 20, 22): the
    same command resumes from checkpoint 5 (10 once final), with the digest of a run
    never interrupted, and no temporary folder is left."""
    command = ["--out", str(tmp_path), *ONE_EPOCH, *EVERY_5]
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_INSIDE_A_SAVE, "10", str(nth), when, *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == 9, killed.stderr[-2000:]  # os._exit(9): killed, as asked
    (workload,) = [p for p in (tmp_path / "checkpoints").iterdir() if p.is_dir()]
    if left is not None:
        assert (workload / left).exists(), sorted(p.name for p in workload.iterdir())
    assert main(command) == 0
    (resumed,) = records.load(tmp_path / records.RECORDS_FILE)
    assert resumed.status == "ok", resumed.message
    assert resumed.resumed_from_step == (10 if left == "10" else 5)
    assert resumed.params_digest == _whole_digest()
    assert not list(workload.glob(f"*{TMP_MARKER}*"))


@pytest.mark.slow
def test_a_save_left_unfinished_is_removed_before_the_same_step_is_saved(digits, tmp_path):
    """What a kill during the save of step 10 leaves; resumed at 5, step 10 is saved again."""
    _fit(digits, "single", tmp_path, max_steps=10)
    shutil.rmtree(tmp_path / "10")
    unfinished = tmp_path / "10.orbax-checkpoint-tmp" / "state.orbax-checkpoint-tmp"
    shutil.copytree(tmp_path / "5" / "state", unfinished)
    (unfinished / "_sharding").unlink()  # cut short mid-write
    with Checkpoints(tmp_path):
        assert not unfinished.parent.exists()  # gone before any save can meet it
    resumed = _fit(digits, "single", tmp_path)
    assert resumed == (*_whole("single")[:2], 5)


@pytest.mark.slow
@pytest.mark.every_jax
def test_sigterm_saves_at_the_next_step_and_the_rerun_resumes_bit_identically(tmp_path):
    stopped = tmp_path / "stopped"
    run = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", "--out", str(stopped), *RUN, *EVERY_5],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not _step_dirs(stopped / "checkpoints") and run.poll() is None:
            time.sleep(0.02)
        run.send_signal(signal.SIGTERM)
        _, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    last = stderr.strip().splitlines()[-1]
    assert run.returncode == 143, stderr[-2000:]
    found = re.fullmatch(
        r"terminated \(SIGTERM\): stopped after (\d+) steps; checkpoint (\d+) holds them; "
        r"records written so far are kept; the same command resumes",
        last,
    )
    assert found and found[1] == found[2], last
    assert not (stopped / "records.jsonl").exists()  # no record claims anything

    # resumed in a process of its own, as the stopped one: in this one JAX has started,
    # so the host allocator is glibc's, another condition (records.config_key)
    resume = [sys.executable, "-m", "experiments.run", "--out", str(stopped), *RUN, *EVERY_5]
    assert subprocess.run(resume, capture_output=True, timeout=300).returncode == 0
    assert main(["--out", str(tmp_path / "whole"), *RUN, "--set", "checkpoints=false"]) == 0
    (resumed,) = records.load(stopped / "records.jsonl")
    (whole,) = records.load(tmp_path / "whole" / "records.jsonl")
    assert resumed.status == "ok"
    assert resumed.resumed_from_step == int(found[1])  # the step it stopped at
    assert resumed.params_digest == whole.params_digest


@pytest.mark.slow
@pytest.mark.parametrize("sent", [signal.SIGHUP, signal.SIGINT])
def test_sighup_and_sigint_stop_a_real_run_as_sigterm_does(tmp_path, sent):
    """A closed terminal (SIGHUP) or Ctrl-C (SIGINT) mid-training: the checkpoint at the
    next step, one line naming the signal, exit 128 + its number, nothing recorded."""
    run = subprocess.Popen(
        [sys.executable, "-m", "experiments.run", "--out", str(tmp_path), *RUN, *EVERY_5],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        while not _step_dirs(tmp_path / "checkpoints") and run.poll() is None:
            time.sleep(0.02)
        run.send_signal(sent)
        _, stderr = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 128 + sent, stderr[-2000:]
    found = re.fullmatch(
        rf"terminated \({sent.name}\): stopped after (\d+) steps; checkpoint (\d+) holds them; "
        r"records written so far are kept; the same command resumes",
        stderr.strip().splitlines()[-1],
    )
    assert found and found[1] == found[2], stderr[-2000:]
    assert "Traceback" not in stderr
    assert max(int(p.name) for p in _step_dirs(tmp_path / "checkpoints")) == int(found[1])
    assert not (tmp_path / "records.jsonl").exists()


def test_stop_requested_saves_at_the_step_boundary(digits, tmp_path):
    """The library side: fit saves where it stands and raises Stopped, once asked."""
    loop.request_stop()
    try:
        with Checkpoints(tmp_path) as ckpt, pytest.raises(loop.Stopped) as stopped:
            options = FitOptions(batch_size=128, max_steps=7, checkpoints=ckpt, checkpoint_every=5)
            fit(_state(), *digits, options)
    finally:
        loop.clear_stop()
    assert (stopped.value.step, stopped.value.saved) == (0, None)  # nothing trained yet
    _fit(digits, "single", tmp_path, max_steps=7)  # saves at 5 and 7 (end of max_steps)
    loop.request_stop()
    try:
        with pytest.raises(loop.Stopped) as stopped:
            _fit(digits, "single", tmp_path)
    finally:
        loop.clear_stop()
    assert (stopped.value.step, stopped.value.saved) == (7, 7)  # resumed, then stopped
    assert _fit(digits, "single", tmp_path) == (*_whole("single")[:2], 7)


@pytest.mark.slow
def test_a_second_identical_run_skips_the_workload_the_first_one_holds(tmp_path):
    command = [sys.executable, "-m", "experiments.run", "--out", str(tmp_path), *RUN, *EVERY_5]
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while not _step_dirs(tmp_path / "checkpoints") and first.poll() is None:
            time.sleep(0.02)
        assert first.poll() is None, "the first run ended before the second started"
        first.send_signal(signal.SIGSTOP)  # frozen mid-training, holding its workload
        try:
            second = subprocess.run(command, capture_output=True, text=True, timeout=300)
        finally:
            first.send_signal(signal.SIGCONT)
        _, first_err = first.communicate(timeout=300)
    finally:
        first.kill()
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-2000:]
    (skipped,) = [line for line in second.stderr.splitlines() if "skipped" in line]
    assert re.fullmatch(
        rf"    skipped: {tmp_path}/checkpoints/\w+ is in use by process {first.pid}; "
        "rerun after it ends",
        skipped,
    ), skipped
    assert "CheckpointWarning" not in first_err and "Traceback" not in first_err
    (record,) = records.load(tmp_path / "records.jsonl")  # the first run's, alone
    assert record.status == "ok" and record.resumed_from_step is None
    # the lock died with its process: a third run finds the record, not a lock
    assert main(["--out", str(tmp_path), *RUN, *EVERY_5]) == 0
    assert len(records.load(tmp_path / "records.jsonl")) == 1


def _checkpoint_folder(out: Path, command: list[str]) -> Path:
    """Where `experiments.cli.run --out OUT *command` checkpoints its one workload."""
    from experiments.cli import plan as cli_plan
    from experiments.cli.run import parse_args
    from jaxcnn import devices

    options = parse_args(["--out", str(out), *command])
    (workload,) = cli_plan.workloads(options, "cpu", 1)
    key = records.config_key(workload.describe(), devices.describe(jax.devices()[:1]))
    return cli_plan.checkpoint_root(options) / key


@pytest.mark.slow
def test_a_checkpoint_folder_that_is_a_file_is_a_usage_error_before_any_work(tmp_path, capfd):
    folder = _checkpoint_folder(tmp_path, RUN)
    folder.parent.mkdir(parents=True)
    folder.write_text("not a folder")
    for _ in range(2):  # the first run, and its rerun
        assert main(["--out", str(tmp_path), *RUN]) == 2
        err = capfd.readouterr().err
        assert err.strip().splitlines()[-1] == (
            f"error: checkpoint folder {folder} is a file, not a folder: move or delete it, "
            "or choose another checkpoint folder"
        )
        assert "compiling" not in err and "Traceback" not in err  # before any work
    assert not (tmp_path / "records.jsonl").exists()
    assert folder.read_text() == "not a folder"
    folder.unlink()  # the positive control: the same command, the folder gone, runs
    assert main(["--out", str(tmp_path), *RUN]) == 0
    assert folder.is_dir()


def test_checkpoints_in_a_folder_that_is_a_file_are_refused_before_any_save(tmp_path):
    (tmp_path / "file").write_text("")
    for inside in ("file", "file/run"):
        with pytest.raises(UsageError, match=rf"folder {tmp_path}/file is a file, not a folder"):
            Checkpoints(tmp_path / inside)


@pytest.mark.slow
def test_same_seed_same_device_same_digest(tmp_path):
    short = ["--model", "mlp", "--set", "width=16", "--batch-size", "128", "--epochs", "1"]
    short += ["--set", "timing_steps=2", "--set", "progress=false", "--set", "checkpoints=false"]
    assert main(["--out", str(tmp_path / "a"), *short]) == 0
    assert main(["--out", str(tmp_path / "b"), *short]) == 0
    (a,), (b,) = (records.load(tmp_path / name) for name in "ab")
    assert len(a.params_digest) == 64 and a.run_id != b.run_id
    assert a.params_digest == b.params_digest
    assert not (tmp_path / "a" / "checkpoints").exists()


@pytest.mark.slow
@pytest.mark.parametrize("strategy", choices.STRATEGIES)
def test_resume_restores_onto_every_placement(digits, tmp_path, strategy):
    whole = _whole(strategy)
    # stopped at step 10 (mid-epoch, as a kill would), then the same run again
    stopped = _fit(digits, strategy, tmp_path, max_steps=10)
    assert stopped[2] is None and len(stopped[1]) == 1
    resumed = _fit(digits, strategy, tmp_path)
    assert resumed[2] == 10
    assert resumed == (whole[0], whole[1], 10)


def test_a_checkpoint_written_by_pmap_restores_onto_single(digits, tmp_path):
    _fit(digits, "pmap", tmp_path, max_steps=10)
    placement = _placement("single")
    with Checkpoints(tmp_path) as ckpt:
        restored = ckpt.restore(like=_state())
    assert restored.step == 10 and restored.position == (0, 10)
    state = placement.put_state(restored.state)
    assert int(state.step) == 10
    assert all(isinstance(x, jax.Array) for x in jax.tree.leaves(state))


def _delete_data_files(step_dir: Path) -> None:
    for file in (step_dir / "state").rglob("d/*"):
        file.unlink()


def _truncate_meta(step_dir: Path) -> None:
    meta = step_dir / "meta" / "metadata"
    meta.write_bytes(meta.read_bytes()[:10])


@pytest.mark.parametrize("corrupt", [_delete_data_files, _truncate_meta])
def test_a_corrupt_checkpoint_is_reported_and_the_previous_one_used(digits, tmp_path, corrupt):
    _fit(digits, "single", tmp_path)
    assert Checkpoints(tmp_path).steps() == [15, 20, 22]  # kept: the last 3
    shutil.rmtree(tmp_path / "22")  # killed before the last save ...
    corrupt(tmp_path / "20")  # ... and the one before it is damaged
    with pytest.warns(CheckpointWarning, match=r"20 could not be restored.*using step 15"):
        resumed = _fit(digits, "single", tmp_path)
    assert resumed == (*_whole("single")[:2], 15)
    assert [p.name.split("-")[0] for p in (tmp_path / "corrupt").iterdir()] == ["20"]


def _flip_a_bit(step_dir: Path) -> None:
    """One bit in the middle of the largest array file (float data Orbax stored as is)."""
    files = sorted((step_dir / "state").rglob("d/*"), key=lambda f: f.stat().st_size)
    data = bytearray(files[-1].read_bytes())
    data[len(data) // 2] ^= 0x10
    files[-1].write_bytes(bytes(data))


def test_a_silently_damaged_checkpoint_is_caught_by_its_digest(digits, tmp_path):
    _fit(digits, "single", tmp_path, max_steps=10)
    _flip_a_bit(tmp_path / "10")
    # the flipped file still decodes: only the digest tells the state is not the saved one
    warned = r"10 could not be restored \(DigestMismatch: its content has digest .*using step 5"
    with pytest.warns(CheckpointWarning, match=warned):
        resumed = _fit(digits, "single", tmp_path)
    assert resumed == (*_whole("single")[:2], 5)
    assert [p.name.split("-")[0] for p in (tmp_path / "corrupt").iterdir()] == ["10"]


@pytest.mark.slow
@pytest.mark.parametrize("max_steps", [None, 10], ids=["final", "mid-run"])
def test_a_checkpoint_of_other_shapes_is_set_aside_in_one_warning(digits, tmp_path, max_steps):
    """mlp width 512's real checkpoints, found by a width-16 run (a model whose code
    changed under the same folder): neither resumed as its own nor a crash."""
    _fit(digits, "single", tmp_path, width=512, max_steps=max_steps)
    steps = Checkpoints(tmp_path).steps()
    assert steps == ([15, 20, 22] if max_steps is None else [5, 10])
    with pytest.warns(CheckpointWarning) as warned:
        resumed = _fit(digits, "single", tmp_path)
    (warning,) = [w for w in warned if w.category is CheckpointWarning]
    listed = ", ".join(map(str, reversed(steps)))
    assert str(warning.message) == (
        f"checkpoints {tmp_path}/{listed} could not be restored (LayoutMismatch: another "
        "model: ['params']['Dense_0']['bias'] is float32[512] in the checkpoint, "
        "float32[16] here); no older checkpoint, starting over"
    )
    assert resumed == (*_whole("single")[:2], None)  # the width-16 run's own result
    assert sorted(int(p.name.split("-")[0]) for p in (tmp_path / "corrupt").iterdir()) == steps


def _change_a_digit(step_dir: Path, field: bytes) -> None:
    """One byte of the meta's JSON, changed so that it still parses: the first digit
    after `field`."""
    meta = step_dir / "meta" / "metadata"
    text = bytearray(meta.read_bytes())
    at = text.index(field) + len(field)
    while not chr(text[at]).isdigit():
        at += 1
    text[at] = ord("7") if text[at] != ord("7") else ord("3")
    meta.write_bytes(bytes(text))


@pytest.mark.parametrize(
    "field", [b'"test_accuracy": 0.', b'"index": ', b'"content_digest": "'], ids=str
)
def test_a_changed_byte_in_the_meta_is_caught_by_the_digest(digits, tmp_path, field):
    _fit(digits, "single", tmp_path, max_steps=11)  # saved at 5, 10, 11 (an epoch's end)
    _change_a_digit(tmp_path / "11", field)
    warned = r"checkpoint .*/11 could not be restored \(DigestMismatch: .*; using step 10"
    with pytest.warns(CheckpointWarning, match=warned):
        resumed = _fit(digits, "single", tmp_path)
    assert resumed == (*_whole("single")[:2], 10)


def test_a_checkpoint_without_its_digest_is_not_trusted(digits, tmp_path):
    _fit(digits, "single", tmp_path, max_steps=10)
    meta = tmp_path / "10" / "meta" / "metadata"
    meta.write_bytes(meta.read_bytes().replace(b'"content_digest"', b'"content_digesT"'))
    with pytest.warns(CheckpointWarning, match=r"/10 could not be restored.*no digest"):
        resumed = _fit(digits, "single", tmp_path)
    assert resumed == (*_whole("single")[:2], 5)


def test_no_checkpoint_restorable_starts_over_with_a_warning(digits, tmp_path):
    _fit(digits, "single", tmp_path, max_steps=5)
    _delete_data_files(tmp_path / "5")
    with pytest.warns(CheckpointWarning, match="starting over"):
        resumed = _fit(digits, "single", tmp_path)
    assert resumed == (*_whole("single")[:2], None)


def test_a_checkpoint_of_another_run_is_refused(digits, tmp_path):
    _fit(digits, "single", tmp_path, max_steps=5)
    with Checkpoints(tmp_path) as ckpt, pytest.raises(ValueError, match="another run"):
        fit(_state(), *digits, FitOptions(batch_size=64, checkpoints=ckpt))


@pytest.mark.slow
@pytest.mark.parametrize("check_every", [1, 50])
def test_training_stops_at_the_first_non_finite_loss(digits, check_every):
    with pytest.raises(NonFiniteLoss) as stopped:
        fit(_state(1e30), *digits, FitOptions(epochs=2, batch_size=128, check_every=check_every))
    assert stopped.value.step == 2  # the same step however rarely the host looks
    assert "at step 2" in str(stopped.value) and stopped.value.history == []


def test_params_digest_sees_every_bit_dtype_and_shape():
    params = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros(2, np.int32)}
    same = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.zeros(2, np.int32)}
    assert params_digest(params) == params_digest(same)
    flipped = {**params, "a": params["a"].copy()}
    flipped["a"].view(np.uint32)[0, 0] ^= 1  # one bit of one float
    assert params_digest(flipped) != params_digest(params)
    assert params_digest({**params, "a": params["a"].reshape(3, 2)}) != params_digest(params)
    assert params_digest({**params, "b": np.zeros(2, np.float32)}) != params_digest(params)


@pytest.fixture
def full_disk(tmp_path):
    """A real 64 KiB tmpfs (root only): room enough to pass the free-space check made
    before any work (records.MIN_FREE_BYTES), and about half of what one checkpoint of
    the mlp takes (16 to 18 files of a page or more, one of about 55 KiB), so the disk
    fills during the run. At 128 KiB the checkpoint fitted on some runs: the number of
    files and the size of the data file vary from run to run."""
    mount = tmp_path / "small"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()[:100]}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.slow
def test_a_full_disk_is_an_error_naming_the_folder_and_retried(tmp_path, full_disk):
    argv = ["--out", str(tmp_path / "out"), "--set", f"checkpoint_dir={full_disk}", *RUN]
    argv[argv.index("--epochs") + 1] = "1"
    assert main(argv) == 1
    assert not list(full_disk.rglob(f"*{TMP_MARKER}*"))  # the failed save cleaned up
    # The error is not final: the rerun tries again. It runs as a user runs it, where
    # Orbax's writer threads and TensorStore's callbacks print to the real stderr.
    rerun = subprocess.run(
        [sys.executable, "-m", "experiments.run", *argv], capture_output=True, text=True
    )
    assert rerun.returncode == 1
    (said,) = [line for line in rerun.stderr.splitlines() if "CheckpointSaveError" in line]
    assert "status: error: CheckpointSaveError: could not save checkpoint" in said
    assert "Traceback" not in rerun.stderr and "ERROR:absl" not in rerun.stderr
    first, second = records.load(tmp_path / "out" / "records.jsonl")
    for record in (first, second):
        assert record.status == "error"
        assert record.message.startswith("CheckpointSaveError: could not save checkpoint ")
        assert f" in {full_disk}/" in record.message and "KiB free)" in record.message
        # The cause in the writer's own words: TensorStore's, or the OS's where the disk
        # fills on a write Orbax makes itself (which one depends on where it fills).
        assert re.search(r"RESOURCE_EXHAUSTED|No space left on device", record.message)


class _LateWriter(threading.Thread):
    """Stands for what a failed save leaves running after another item's failure is
    raised: it makes its folder under the step's temporary one `delay` seconds later."""

    def __init__(self, folder: Path, started: threading.Event, delay: float):
        super().__init__(daemon=True)
        self.folder, self.started, self.delay = folder, started, delay

    def run(self) -> None:
        self.started.set()
        time.sleep(self.delay)
        (self.folder / "state.orbax-checkpoint-tmp" / "d").mkdir(parents=True)


class _OrbaxWriter(_LateWriter):
    """An Orbax commit thread: the failed save joins it."""

    __module__ = "orbax.checkpoint._src.futures.future"


@pytest.mark.parametrize(
    "writer, delay, save_took, remove",
    [
        (_OrbaxWriter, 0.3, 0.0, "failed save"),  # joined
        (_LateWriter, 0.3, 0.0, "failed save"),  # not joinable (as TensorStore's): outwaited
        (_LateWriter, 0.3, 0.0, "unfinished saves alone"),
        # A busy machine: the save took 4 s, and a writer it left comes 2 s after
        # the first removal, past QUIET_S; the wait grows with the save.
        (_LateWriter, 2.0, 4.0, "failed save"),
        (_LateWriter, 2.0, 0.0, "failed save"),  # its positive control: a quick save's wait
    ],
)
def test_a_failed_save_is_removed_after_the_writers_it_left_running(
    tmp_path, writer, delay, save_took, remove
):
    step = tmp_path / f"22{TMP_MARKER}"
    step.mkdir()
    before = set(threading.enumerate())
    started = threading.Event()
    late = writer(step, started, delay)
    late.start()
    started.wait()
    if remove == "failed save":
        _remove_failed_save(tmp_path, before, save_took)
        late.join()
        outwaited = writer is _OrbaxWriter or delay < QUIET_S or save_took > delay
        left = sorted(tmp_path.rglob(f"*{TMP_MARKER}*"))
        assert left == ([] if outwaited else [step, step / "state.orbax-checkpoint-tmp"])
    else:  # the positive control: removing once leaves what the writer makes after
        _remove_unfinished_saves(tmp_path)
        late.join()
        assert (step / "state.orbax-checkpoint-tmp" / "d").is_dir()


@pytest.mark.slow
def test_a_failed_saves_unretrieved_futures_are_not_logged_but_others_are(tmp_path, caplog):
    """What asyncio logs when it collects a future whose exception nobody retrieved:
    dropped for a write into an Orbax temporary folder (a failed save, already an
    error), logged for anything else."""

    def disk_full_raised_in(filename: str) -> OSError:
        code = compile("raise OSError(errno.ENOSPC, 'No space left on device')", filename, "exec")
        try:
            exec(code, {"errno": errno})
        except OSError as error:
            return error
        raise AssertionError("not raised")

    def collected_unretrieved(error: BaseException) -> None:
        loop = asyncio.new_event_loop()
        future = loop.create_future()
        future.set_exception(error)
        loop.close()
        del future
        gc.collect()

    Checkpoints(tmp_path).close()
    # An earlier test's unretrieved futures (a real full disk's, in the same worker) are
    # collected first, so that only this test's are logged or dropped below.
    gc.collect()
    caplog.clear()
    failed_write = f'RESOURCE_EXHAUSTED: Error writing "a/0" in {tmp_path}/5{TMP_MARKER}/'
    collected_unretrieved(ValueError(failed_write))
    orbax = os.path.join("site-packages", "orbax", "checkpoint", "_src", "path", "async_path.py")
    collected_unretrieved(disk_full_raised_in(orbax))  # a full disk under a failed save
    collected_unretrieved(ValueError("an error of the user's own"))
    collected_unretrieved(disk_full_raised_in("users_own_writer.py"))  # not Orbax's: logged
    logged = [r for r in caplog.records if r.name == "asyncio"]
    assert [str(r.exc_info[1]) for r in logged] == [
        "an error of the user's own",
        "[Errno 28] No space left on device",
    ]
    assert all("never retrieved" in r.getMessage() for r in logged)


def test_a_failed_save_is_an_error_naming_the_folder(digits, tmp_path):
    """Always runs (no mount needed): the folder is replaced by a file after opening."""
    directory = tmp_path / "ckpt"
    with Checkpoints(directory) as ckpt:
        shutil.rmtree(directory)
        directory.write_text("not a folder")
        with pytest.raises(CheckpointSaveError) as failed:
            fit(_state(), *digits, FitOptions(batch_size=128, max_steps=5, checkpoints=ckpt))
    message = str(failed.value)
    assert (
        message.startswith(f"could not save checkpoint 5 in {directory} (") and " free)" in message
    )
    assert records.classify_failure(failed.value) == "error"


@pytest.mark.slow
def test_a_resumed_run_takes_the_step_timing_of_the_stopped_one(tmp_path, monkeypatch):
    from experiments.harness import measure

    timed = []
    real_time_step_loop = measure.time_step_loop

    def counted(*args, **kwargs):
        timed.append(1)
        return real_time_step_loop(*args, **kwargs)

    monkeypatch.setattr(measure, "time_step_loop", counted)
    real_save = Checkpoints.save

    def save_then_stop(self, *args, **kwargs):  # as a SIGTERM right after the first save
        real_save(self, *args, **kwargs)
        loop.request_stop()

    monkeypatch.setattr(Checkpoints, "save", save_then_stop)
    argv = ["--out", str(tmp_path), *RUN, *EVERY_5, "--epochs", "1"]
    assert main(argv) == 143 and len(timed) == 1
    monkeypatch.setattr(Checkpoints, "save", real_save)
    assert main(argv) == 0
    assert len(timed) == 1  # the resumed run timed nothing
    (record,) = records.load(tmp_path / "records.jsonl")
    assert record.status == "ok" and record.resumed_from_step == 5
    assert record.step_time_s.median > 0
    assert main([*argv, "--force"]) == 0 and len(timed) == 2  # control: from scratch, timed


def _count_timings(monkeypatch) -> list:
    """Each call that times the step loop, appended to the list returned."""
    from experiments.harness import measure

    timed = []
    real_time_step_loop = measure.time_step_loop

    def counted(*args, **kwargs):
        timed.append(1)
        return real_time_step_loop(*args, **kwargs)

    monkeypatch.setattr(measure, "time_step_loop", counted)
    return timed


def _stopped_after_the_first_save(monkeypatch, argv) -> Path:
    """Run `argv` as a SIGTERM right after its first checkpoint leaves it (exit 143):
    the workload's checkpoint folder, holding that checkpoint and the kept timing."""
    real_save = Checkpoints.save

    def save_then_stop(self, *args, **kwargs):
        real_save(self, *args, **kwargs)
        loop.request_stop()

    monkeypatch.setattr(Checkpoints, "save", save_then_stop)
    out = Path(argv[argv.index("--out") + 1])
    folders = lambda: {p for p in (out / "checkpoints").glob("*") if p.is_dir()}  # noqa: E731
    before = folders() if (out / "checkpoints").is_dir() else set()
    assert main(argv) == 143
    monkeypatch.setattr(Checkpoints, "save", real_save)
    (folder,) = folders() - before
    assert (folder / "timing.json").is_file()
    return folder


@pytest.mark.slow
def test_the_timing_kept_for_another_program_is_set_aside_with_its_checkpoints(
    tmp_path, monkeypatch, capfd
):
    """A model whose code changed under the same config key: mlp width 512's real
    checkpoints and kept timing, found in a width-16 run's folder. Both are set aside;
    the record's step time is the width-16 step's own, timed again."""
    timed = _count_timings(monkeypatch)
    assert RUN[2:4] == ["--set", "width=16"]
    run = RUN[:2] + RUN[4:]
    argv = ["--out", str(tmp_path), *run, *EVERY_5, "--epochs", "1"]
    wide = _stopped_after_the_first_save(monkeypatch, [*argv, "--set", "width=512"])
    narrow = _stopped_after_the_first_save(monkeypatch, [*argv, "--set", "width=16"])
    assert len(timed) == 2
    shutil.rmtree(narrow)
    wide.rename(narrow)
    capfd.readouterr()
    assert main([*argv, "--set", "width=16"]) == 0
    err = capfd.readouterr().err
    assert "could not be restored (LayoutMismatch: another model" in err
    assert len(timed) == 3  # timed again, not taken from width 512's file
    assert f"{narrow / 'timing.json'} was kept for another program: set aside" in err
    (aside,) = (narrow / "corrupt").glob("timing-*.json")
    assert json.loads(aside.read_text())["timing"][0]["n"] == 2
    (record,) = records.load(tmp_path / "records.jsonl")
    assert record.status == "ok" and record.resumed_from_step is None
    kept = json.loads((narrow / "timing.json").read_text())
    timing = record.step_time_s.model_dump(exclude_unset=True)
    assert timing == kept["timing"][0]  # the width-16 step's own timing


@pytest.mark.slow
@pytest.mark.parametrize("content", ['{"host": "%s", "timing": [1, 2]}', "[]", "not json"])
def test_a_kept_timing_of_the_wrong_shape_is_timed_again_in_one_line(
    tmp_path, monkeypatch, capfd, content
):
    timed = _count_timings(monkeypatch)
    argv = ["--out", str(tmp_path), *RUN, *EVERY_5, "--epochs", "1"]
    folder = _stopped_after_the_first_save(monkeypatch, argv)
    kept = folder / "timing.json"
    kept.write_text(content.replace("%s", socket.gethostname()))
    capfd.readouterr()
    assert main(argv) == 0
    err = capfd.readouterr().err
    assert len(timed) == 2
    (line,) = [line for line in err.splitlines() if str(kept) in line]
    assert "is not a kept timing" in line and line.endswith("timing the step again")
    (record,) = records.load(tmp_path / "records.jsonl")
    assert record.status == "ok" and record.resumed_from_step == 5
    timing = record.step_time_s.model_dump(exclude_unset=True)
    assert json.loads(kept.read_text())["timing"][0] == timing  # rewritten


def test_a_released_checkpoint_folder_leaves_no_lock_and_a_held_one_is_refused(tmp_path):
    from jaxcnn.checkpoint import CheckpointInUse, _is_at, exclusive

    folder = tmp_path / "checkpoints" / "key"
    lock = tmp_path / "checkpoints" / "key.lock"
    with exclusive(folder):
        assert lock.read_text() == f"{os.getpid()}\n"
        with pytest.raises(CheckpointInUse, match=f"is in use by process {os.getpid()}$"):
            with exclusive(folder):  # flock is per open file: refused within one process too
                pass
        assert lock.exists()  # the refused attempt left the holder's lock alone
    assert not lock.exists()
    with exclusive(folder):  # free again
        pass
    # A process that opened the lock file just before its holder removed it must not
    # take that file: it no longer is the lock.
    lock.write_text("")
    with open(lock, "a+") as stale:
        lock.unlink()
        lock.write_text("")
        assert not _is_at(stale, lock)
    with open(lock, "a+") as current:
        assert _is_at(current, lock)
