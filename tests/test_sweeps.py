"""Sweeps lose nothing and record nothing twice: a diverging workload is a `nan`
record and the next one still runs; a rerun skips what is recorded; a study killed
midway and rerun ends with one record per workload; concurrent writers never tear a
line of the records file."""

import json
import signal
import subprocess
import sys
import time
import warnings

import pytest

from experiments import records
from experiments.cli import plan as cli_plan
from experiments.cli.run import main
from experiments.harness import died

# A study of three small MLPs, registered the way a study module registers one: the
# default study's CNNs would spend these tests' time compiling.
TINY_STUDY = (("mlp", {"width": 8}), ("mlp", {"width": 16}), ("mlp", {"width": 32}))
TINY = ["--study", "tiny", "--epochs", "1", "--set", "timing_steps=2", "--batch-size", "16"]
TINY += ["--set", "progress=false"]
# Adam's first step moves every weight by about the learning rate: at 1e30 the next
# forward pass overflows, so every workload's loss is NaN at step 2.
DIVERGING = [*TINY, "--set", "steps=8", "--set", "learning_rate=1e30"]
_MAIN_WITH_TINY = (
    "import sys; from experiments.cli import plan as cli_plan, run; "
    f"cli_plan.STUDIES['tiny'] = {TINY_STUDY!r}; sys.exit(run.main(sys.argv[1:]))"
)


@pytest.fixture(autouse=True)
def tiny_study(monkeypatch):
    monkeypatch.setitem(cli_plan.STUDIES, "tiny", TINY_STUDY)


def _lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_diverging_workloads_are_recorded_and_the_sweep_goes_on(tmp_path, capsys):
    assert main(["--out", str(tmp_path), *DIVERGING]) == 0  # nan is a finding, exit 0
    first = _lines(tmp_path / "records.jsonl")
    assert [r["workload"]["model_overrides"]["width"] for r in first] == [8, 16, 32]
    for record in first:
        assert record["status"] == "nan" and record["nan_step"] == 2
        assert "loss is nan at step 2" in record["message"]
    assert len({r["config_key"] for r in first}) == 3

    capsys.readouterr()
    assert main(["--out", str(tmp_path), *DIVERGING]) == 0  # rerun: all three recorded
    assert _lines(tmp_path / "records.jsonl") == first
    captured = capsys.readouterr()
    assert captured.err.count("already recorded") == 3
    assert "3 workload(s) already recorded were skipped" in captured.out

    assert main(["--out", str(tmp_path), *DIVERGING, "--force"]) == 0
    again = _lines(tmp_path / "records.jsonl")
    assert len(again) == 6
    assert [r["config_key"] for r in again[3:]] == [r["config_key"] for r in first]
    assert [r["status"] for r in again[3:]] == ["nan"] * 3
    assert all(r.get("resumed_from_step") is None for r in again[3:])  # from scratch


@pytest.mark.slow
@pytest.mark.parametrize("killed_for_memory", [False, True])
def test_a_study_killed_midway_records_the_death_and_a_rerun_finishes_it(
    tmp_path, monkeypatch, killed_for_memory
):
    path = tmp_path / "records.jsonl"
    # No checkpoints: nothing to resume from, so the death is the workload's record
    # (a run that resumes from a checkpoint records none: tests/test_resume.py).
    argv = ["--out", str(tmp_path), *TINY, "--set", "steps=400", "--set", "checkpoints=false"]
    study = subprocess.Popen(
        [sys.executable, "-c", _MAIN_WITH_TINY, *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def second_running() -> bool:  # one record written, the next workload's marker there
        if not (path.exists() and path.read_text().count("\n") == 1):
            return False
        first = _lines(path)[0]["config_key"]
        return any(json.loads(m.read_text() or "{}").get("key") != first for m in markers())

    def markers() -> list:
        return list(tmp_path.rglob("*.running.json"))

    try:  # killed while its second workload runs
        while study.poll() is None and not second_running():
            time.sleep(0.02)
        study.send_signal(signal.SIGKILL)
    finally:
        study.wait(timeout=60)
    assert study.returncode == -signal.SIGKILL, "the study ended before it could be killed"
    assert len(_lines(path)) == 1
    running = markers()
    assert len(running) == 1
    # The kernel's count of processes it killed for memory, as the rerun reads it: risen
    # since the marker was written (an OOM kill), or not (a kill -9).
    before = json.loads(running[0].read_text())["oom_kills"] or 0
    vmstat = tmp_path / "vmstat"
    vmstat.write_text(f"pgfault 7\noom_kill {before + int(killed_for_memory)}\n")
    monkeypatch.setattr(died, "VMSTAT", vmstat)

    assert main(argv) == 0
    loaded = _lines(path)
    widths = [r["workload"]["model_overrides"]["width"] for r in loaded]
    death = loaded[1]
    assert "the process running it" in death["message"] and widths[1] == 16
    if killed_for_memory:  # final, as an oom is: not run again
        assert widths == [8, 16, 32] and [r["status"] for r in loaded] == ["ok", "oom", "ok"]
        assert "out-of-memory killer killed 1 process(es)" in death["message"]
    else:  # the cause unknown: recorded, and run again
        assert widths == [8, 16, 16, 32]
        assert [r["status"] for r in loaded] == ["ok", "error", "ok", "ok"]
        assert "died without a record" in death["message"]
    assert not markers()  # nothing left to tell


_WRITER = """
import sys
from experiments import records
for i in range(int(sys.argv[3])):
    records.append(sys.argv[1], {
        "schema_version": records.SCHEMA_VERSION, "run_id": f"{sys.argv[2]}-{i}",
        "status": "error", "message": "x" * 20000,  # lines far beyond one page
        "workload": {"model": "m", "dataset": "d", "batch_size": 1, "strategy": "single",
                     "kind": "paired", "study": None},  # the kind that needs fewest fields
        "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1,
                   "host": "h"},
        "env": {"python": "3", "git_commit": None, "host": "h", "utc_time": "2026-11-25"},
    })
"""


def test_concurrent_writers_never_interleave_partial_lines(tmp_path):
    path = tmp_path / "records.jsonl"
    writers = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, "150"])
        for name in ("a", "b")
    ]
    for writer in writers:
        assert writer.wait(timeout=120) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a torn line would warn
        loaded = records.load(path)
    assert len(path.read_text().splitlines()) == 300
    assert {r.run_id for r in loaded} == {f"{n}-{i}" for n in "ab" for i in range(150)}


def test_the_progress_title_tells_a_study_s_cells_apart():
    from experiments import studies
    from experiments.harness.sweep import _title
    from experiments.records.workload import Workload

    cells = studies.bench.workloads(studies.Context(platform="cpu"))
    titles = [_title(w) for w in cells]
    assert len(set(titles)) == len(titles)
    assert _title(Workload(model="mnist_cnn", epochs=0)) == (
        "mnist_cnn on digits, batch 128, timing only"
    )
    assert _title(Workload(model="mnist_cnn", epochs=0, formulation="cpu", loop="device")) == (
        "mnist_cnn on digits, batch 128, cpu formulation, device loop, timing only"
    )


def test_the_progress_title_counts_the_devices_and_names_models_as_the_table_does():
    from experiments.harness.sweep import _title
    from experiments.records.workload import Workload

    pmap = Workload(model="mnist_cnn", epochs=0, strategy="pmap")  # num_devices None: all
    assert _title(pmap, 8) == "mnist_cnn on digits, batch 128, pmap x8, timing only"
    mlp = Workload(model="mlp", model_overrides={"width": 512}, epochs=1)
    assert _title(mlp) == "mlp on digits, batch 128, 1 epoch(s)"
    wide = Workload(model="mlp", model_overrides={"width": 8}, epochs=1)
    assert _title(wide) == "mlp width=8 on digits, batch 128, 1 epoch(s)"
    matmul = Workload(model="matmul", kind="matmul", batch_size=4096, epochs=0)
    assert _title(matmul) == "matmul 4096x4096 f32"


def test_a_resumed_workload_takes_the_ceiling_its_stopped_run_measured(tmp_path, monkeypatch):
    """The first run stops inside its workload; the rerun resumes that workload and
    takes the ceiling the first measured instead of measuring again."""
    import jax

    from experiments.harness import sweep
    from experiments.records.workload import Workload
    from jaxcnn import loop

    measured, contexts = [], []

    def ceiling(device):
        measured.append(device)
        return {"float32": {"tflops": 1.5 + len(measured)}}

    monkeypatch.setattr(sweep, "matmul_ceiling", ceiling)
    monkeypatch.setattr(sweep, "memory_bandwidth", lambda device: {"bytes_per_s": 7e9})

    def stopped(workload, context):
        contexts.append(context)
        raise loop.Stopped(3, 3)

    w = Workload(model="mlp", model_overrides={"width": 8}, dataset="synthetic", epochs=1)
    run = dict(checkpoint_root=tmp_path / "checkpoints")
    monkeypatch.setattr(sweep, "run_workload", stopped)
    with pytest.raises(loop.Stopped):
        sweep.run_sweep([w], jax.devices()[:1], sweep.SweepOptions(tmp_path, **run))
    with pytest.raises(loop.Stopped):  # resumed, and stopped again
        sweep.run_sweep([w], jax.devices()[:1], sweep.SweepOptions(tmp_path, **run))
    assert len(measured) == 1  # the rerun measured nothing
    assert contexts[1].ceiling == contexts[0].ceiling == {"float32": {"tflops": 2.5}}
    assert contexts[1].bandwidth == {"bytes_per_s": 7e9}
    with pytest.raises(loop.Stopped):  # positive control: --force starts over, measuring
        sweep.run_sweep([w], jax.devices()[:1], sweep.SweepOptions(tmp_path, force=True, **run))
    assert len(measured) == 2 and contexts[2].ceiling == {"float32": {"tflops": 3.5}}


@pytest.mark.parametrize(
    "damage,said",
    [
        (b"\xff\xfe not UTF-8", "is not a kept matmul ceiling ('utf-8' codec can't decode"),
        (b'{"host": "h", "device": {}, "content": {"ceiling": "fast"}}', "not of its shape"),
        (None, "was kept for another host"),  # whole, but another machine's
    ],
)
def test_a_damaged_kept_ceiling_is_named_set_aside_and_measured_again(
    tmp_path, monkeypatch, capsys, damage, said
):
    import json

    import jax

    from experiments.harness import kept, sweep
    from experiments.records.workload import Workload
    from jaxcnn import loop

    measured, contexts = [], []
    monkeypatch.setattr(
        sweep, "matmul_ceiling", lambda d: measured.append(d) or {"float32": {"tflops": 2.0}}
    )
    monkeypatch.setattr(sweep, "memory_bandwidth", lambda device: None)

    def stopped(workload, context):
        contexts.append(context)
        raise loop.Stopped(3, 3)

    monkeypatch.setattr(sweep, "run_workload", stopped)
    w = Workload(model="mlp", model_overrides={"width": 8}, dataset="synthetic", epochs=1)
    run = dict(checkpoint_root=tmp_path / "checkpoints")
    with pytest.raises(loop.Stopped):
        sweep.run_sweep([w], jax.devices()[:1], sweep.SweepOptions(tmp_path, **run))
    (path,) = (tmp_path / "checkpoints").glob(f"*/{kept.CEILING.name}")
    if damage is None:
        whole = json.loads(path.read_text())
        damage = json.dumps({**whole, "host": "another-vm"}).encode()
    path.write_bytes(damage)
    capsys.readouterr()
    with pytest.raises(loop.Stopped):  # the workload runs: the file is no failure of it
        sweep.run_sweep([w], jax.devices()[:1], sweep.SweepOptions(tmp_path, **run))
    (line,) = [line for line in capsys.readouterr().err.splitlines() if str(path) in line]
    assert said in line and "set aside as" in line, line
    assert line.endswith("measuring the matmul ceiling and memory bandwidth again")
    (aside,) = (path.parent / kept.CORRUPT_DIR).iterdir()
    assert aside.read_bytes() == damage  # moved, not deleted
    assert len(measured) == 2 and contexts[1].ceiling == {"float32": {"tflops": 2.0}}
    assert json.loads(path.read_text())["content"]["ceiling"] == {"float32": {"tflops": 2.0}}


@pytest.mark.parametrize(
    ("now", "same_boot", "status"),
    [(5, True, "oom"), (4, True, "error"), (5, False, "error"), (None, True, "error")],
)
def test_a_death_is_oom_only_where_the_kernel_killed_for_memory_on_the_same_boot(
    tmp_path, monkeypatch, now, same_boot, status
):
    monkeypatch.setattr(died, "VMSTAT", tmp_path / "vmstat")
    monkeypatch.setattr(died, "BOOT_ID", tmp_path / "boot_id")
    died.VMSTAT.write_text("oom_kill 4\n")
    died.BOOT_ID.write_text("boot-a\n")
    marker = died.marker_for(tmp_path / ".locks" / "key")
    assert died.found(marker) is None  # nothing started: no death
    died.started(marker, "key")
    died.VMSTAT.write_text("" if now is None else f"oom_kill {now}\n")
    died.BOOT_ID.write_text("boot-a\n" if same_boot else "boot-b\n")
    assert died.found(marker)["status"] == status
    marker.write_text('{"key": "ke')  # torn by the death itself: a death all the same
    assert died.found(marker)["status"] == "error"
    died.ended(marker)
    assert died.found(marker) is None
