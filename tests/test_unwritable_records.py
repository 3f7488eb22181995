"""A computed result is never lost to a records file that cannot take it: the file is
checked before any work, an append that fails leaves no partial line, and a record that
could not be appended after the work is kept in the temp folder, said in one line, with
exit code 1. Faults are real where they can be: a folder at the file's path, an
immutable file (chattr +i), a full tmpfs; a patched os.write stands in where not."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import complete_record, needs_extra
from conftest import fill_disk as _fill

from experiments import records
from experiments.cli.run import main
from experiments.harness import sweep
from experiments.harness.isolated import InChild

TINY = ["--model", "mlp", "--set", "width=8", "--epochs", "1", "--set", "steps=2"]
TINY += ["--set", "timing_steps=2", "--batch-size", "16", "--set", "progress=false"]
TINY += ["--set", "checkpoints=false"]


def _record(run_id: str = "a") -> dict:
    return complete_record(
        {
            "schema_version": records.SCHEMA_VERSION,
            "run_id": run_id,
            "status": "skipped",
            "message": "padding " * 600,  # 4.8 KB: more than a page, so more than any remainder
            "workload": {
                "model": "mlp",
                "dataset": "digits",
                "batch_size": 8,
                "strategy": "single",
            },
            "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1},
            "env": {"jax": "0"},
        }
    )


def _immutable(path: Path) -> None:
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here (not root, or the filesystem lacks it)")


@pytest.fixture
def unfreeze():
    frozen: list[Path] = []
    yield frozen
    for path in frozen:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def _kept(err: str) -> Path:
    """The file the one-line error says the record was kept in."""
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: could not append to "), err
    kept = Path(last.split("the record is kept in ")[1].split(" (cat ")[0])
    assert kept.exists()
    return kept


# --- records.append on its own: no partial line, whatever the write does -------------


@pytest.mark.parametrize("fault", ["short", "enospc"])
def test_a_failed_append_leaves_the_file_as_it_was(tmp_path, monkeypatch, fault):
    path = tmp_path / "records.jsonl"
    records.append(path, _record("before"))
    before = path.read_bytes()
    real_write = os.write

    def failing_write(fd, data):
        if fault == "enospc":
            real_write(fd, data[:100])  # what a disk that fills mid-write does
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data[: len(data) // 2])

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(OSError) as raised:
        records.append(path, _record("lost"))
    monkeypatch.undo()
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == before  # cut back: no partial line
    records.append(path, _record("after"))  # and the next append is a line of its own
    assert [r.run_id for r in records.load(path)] == ["before", "after"]


def test_append_or_keep_keeps_the_record_and_says_where(tmp_path, monkeypatch):
    path = tmp_path / "records.jsonl"
    real_write = os.write

    def failing_write(fd, data):
        if os.readlink(f"/proc/self/fd/{fd}") == str(path):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", failing_write)
    with pytest.raises(records.NotRecorded) as raised:
        records.append_or_keep(path, _record("kept"))
    message = str(raised.value)
    assert f"could not append to {path} (No space left on device)" in message
    kept = Path(message.split("the record is kept in ")[1].split(" (cat ")[0])
    assert [r.run_id for r in records.load(kept)] == ["kept"]
    assert "\n" not in message
    kept.unlink()


def test_of_a_batch_what_was_not_appended_is_kept_together(tmp_path, monkeypatch):
    path = tmp_path / "records.jsonl"
    real_append = records.append

    def append_one_then_fail(target, record):
        if Path(target) == path and path.exists():
            raise OSError(errno.ENOSPC, "No space left on device")
        real_append(target, record)

    monkeypatch.setattr(records.store, "append", append_one_then_fail)
    batch = [_record("side-a"), _record("side-b"), _record("pair")]
    with pytest.raises(records.NotRecorded) as raised:
        records.append_or_keep(path, *batch)
    message = str(raised.value)
    assert "the 2 records not appended are kept in " in message
    kept = Path(message.split("kept in ")[1].split(" (cat ")[0])
    assert [r.run_id for r in records.load(path)] == ["side-a"]
    assert [r.run_id for r in records.load(kept)] == ["side-b", "pair"]
    kept.unlink()


def test_a_real_full_disk_leaves_no_partial_line(small_disk):
    path = small_disk / "records.jsonl"
    records.append(path, _record("before"))
    before = path.read_bytes()
    _fill(small_disk)
    with pytest.raises(OSError) as raised:
        records.append(path, _record("lost"))
    assert raised.value.errno == errno.ENOSPC
    assert path.read_bytes() == before


# --- the command: checked before any work -------------------------------------------


def _exit_2_before_work(argv, capsys, message) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "devices:" not in err  # no workload started


def test_a_folder_at_the_records_path_is_a_usage_error(tmp_path, capsys):
    (tmp_path / records.RECORDS_FILE).mkdir()
    argv = ["--out", str(tmp_path), *TINY]
    _exit_2_before_work(argv, capsys, "a folder, not a records file")
    assert sorted(p.name for p in tmp_path.iterdir()) == [records.RECORDS_FILE]


def test_an_immutable_records_file_is_a_usage_error(tmp_path, capsys, unfreeze):
    path = tmp_path / records.RECORDS_FILE
    path.write_bytes(b"")
    _immutable(path)
    unfreeze.append(path)
    _exit_2_before_work(["--out", str(tmp_path), *TINY], capsys, "Operation not permitted")


def test_a_full_disk_is_a_usage_error_before_any_work(small_disk, capsys):
    _fill(small_disk)
    out = small_disk / "out"
    _exit_2_before_work(["--out", str(out), *TINY], capsys, "no space left on its disk")
    assert not out.exists()


def _special_file(path: Path, kind: str) -> str:
    """Make `path` a FIFO (opening it blocks until a writer comes) or a link to
    /dev/zero (reading it never ends); what the refusal calls it."""
    if kind == "fifo":
        os.mkfifo(path)
        return "a FIFO, not a records file"
    path.symlink_to("/dev/zero")
    return "a character device, not a records file"


def _refused(command: list[str], message: str) -> None:
    """`command` exits 2 with `message` as its one line, well before the timeout a hang
    would reach."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=240)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_records_path_that_is_no_regular_file_is_refused_by_the_run(tmp_path, kind):
    path = tmp_path / records.RECORDS_FILE
    message = _special_file(path, kind)
    _refused([sys.executable, "-m", "experiments.run", "--out", str(tmp_path), *TINY], message)
    assert [p.name for p in tmp_path.iterdir()] == [records.RECORDS_FILE]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_records_path_that_is_no_regular_file_is_refused_by_the_report(tmp_path, kind):
    given = tmp_path / "given.jsonl"
    message = _special_file(given, kind)
    report = [sys.executable, "-m", "experiments.report", "--out", str(tmp_path / "report")]
    _refused([*report, str(given)], message)
    found = tmp_path / "folder"
    found.mkdir()
    records.append(found / "good.jsonl", _record())
    _special_file(found / "other.jsonl", kind)  # found in a folder: refused alike
    _refused([*report, str(found)], message)
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_special_file_is_refused_before_it_is_opened(tmp_path, kind):
    message = _special_file(tmp_path / "records.jsonl", kind)
    with pytest.raises(OSError, match=message):
        records.records_files([tmp_path])
    records.append(tmp_path / "a.jsonl", _record())  # a positive control: a file loads
    (tmp_path / "records.jsonl").unlink()
    assert [r.run_id for r in records.load(tmp_path)] == ["a"]


# --- the command: the records file fails after the work -----------------------------


def _break_after_the_work(monkeypatch, breaks) -> None:
    """Run the workload for real, then break the records file before its append."""
    real = sweep.run_workload

    def run_then_break(*args, **kwargs):
        record = real(*args, **kwargs)
        breaks()
        return record

    monkeypatch.setattr(sweep, "run_workload", run_then_break)


def _assert_kept_and_exit_1(argv, capsys) -> records.Record:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    kept = _kept(err)
    (record,) = records.load(kept)
    kept.unlink()
    assert record.status == "ok" and record.step_time_s.median > 0
    return record


@pytest.mark.slow
def test_a_disk_full_after_the_work_keeps_the_record(small_disk, monkeypatch, capsys):
    path = small_disk / records.RECORDS_FILE
    records.append(path, _record("before"))  # a page partly used: the write falls short
    before = path.read_bytes()
    _break_after_the_work(monkeypatch, lambda: _fill(small_disk))
    _assert_kept_and_exit_1(["--out", str(small_disk), *TINY], capsys)
    assert path.read_bytes() == before  # no partial line


@pytest.mark.slow
def test_a_folder_made_at_the_path_after_the_work_keeps_the_record(tmp_path, monkeypatch, capsys):
    path = tmp_path / records.RECORDS_FILE
    _break_after_the_work(monkeypatch, path.mkdir)
    _assert_kept_and_exit_1(["--out", str(tmp_path), *TINY], capsys)


@pytest.mark.slow
def test_an_immutable_file_after_the_work_keeps_the_record(tmp_path, monkeypatch, capsys, unfreeze):
    path = tmp_path / records.RECORDS_FILE
    path.write_bytes(b"")

    def freeze():
        _immutable(path)
        unfreeze.append(path)

    _break_after_the_work(monkeypatch, freeze)
    _assert_kept_and_exit_1(["--out", str(tmp_path), *TINY], capsys)
    assert path.read_bytes() == b""


@pytest.mark.slow
def test_with_nowhere_to_keep_it_the_record_is_the_line_on_stderr(tmp_path, monkeypatch, capsys):
    path = tmp_path / records.RECORDS_FILE
    monkeypatch.setattr(records.store.tempfile, "mkstemp", _no_temp)
    _break_after_the_work(monkeypatch, path.mkdir)
    assert main(["--out", str(tmp_path), *TINY]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].endswith("the record is the JSON line above")
    assert json.loads(lines[-2])["status"] == "ok"


def _no_temp(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


# --- the compile-only half (--target): the same promises --------------------------

COMPILE = ["--target=tpu-v5e-1", "--model=mlp", "--set", "width=8", "--batch-size=8"]


def test_an_unwritable_out_is_a_usage_error_before_anything_compiles(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    out = blocker / "results"
    _exit_2_before_work(["--out", str(out), *COMPILE], capsys, "cannot write to --out")
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


@pytest.mark.slow
@needs_extra("targets")
def test_a_compiled_record_its_file_cannot_take_is_kept(tmp_path, monkeypatch, capsys):
    path = tmp_path / records.RECORDS_FILE
    real = InChild.__call__

    def compile_then_break(self, *args, **kwargs):
        record = real(self, *args, **kwargs)
        path.mkdir()
        return record

    monkeypatch.setattr(InChild, "__call__", compile_then_break)
    assert main(["--out", str(tmp_path), *COMPILE]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    kept = _kept(err)
    (record,) = records.load(kept)
    kept.unlink()
    assert record.status == "ok" and record.target.name == "tpu-v5e-1"
