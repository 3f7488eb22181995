"""A generated file (REPORT.md, a plot, the README's and PERFORMANCE.md's blocks) is
whole at every moment: written to a temporary file beside it and renamed over it, so a
kill or a full disk during the rewrite leaves the old file, said in one line. Faults are
real: a SIGKILL of the report between writing and renaming, a full tmpfs."""

import os
import signal
import subprocess
import sys

import pytest
from conftest import complete_record, fill_disk

from experiments import records
from experiments.cli import report as report_cli
from experiments.report import readme as analysis

START, END = analysis.README_START, analysis.README_END
# The user's text after the generated block, more than a page of it; the whole file just
# short of three pages (tmpfs blocks), so on a full disk the new one, longer, cannot be
# written even into the room the old one takes.
_HEAD = f"# Project\n\n{START}\nstale\n{END}\n\n"
USER_TEXT = "The user's own text.\n" * 400
README = _HEAD + "x" * (3 * 4096 - 8 - len(_HEAD) - len(USER_TEXT)) + "\n" + USER_TEXT


def _results(folder):
    """A records file the report reads: one ok record of the default study."""
    record = complete_record(
        {
            "schema_version": records.SCHEMA_VERSION,
            "run_id": "a",
            "status": "ok",
            "message": None,
            "workload": {
                "model": "mlp",
                "dataset": "digits",
                "batch_size": 8,
                "strategy": "single",
            },
            "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1},
            "env": {"jax": "0.10.2", "host": "laptop", "utc_time": "2025-01-01T00:00:00"},
            "params": {"trainable": 100, "non_trainable": 0},
            "compile_time_s": {"train": 1.0, "eval": 0.5},
            "step_time_s": {"median": 0.1, "p10": 0.09, "p90": 0.12, "n": 5},
            "images_per_s": 80.0,
            "history": [],
        }
    )
    path = folder / "records.jsonl"
    records.append(path, record)
    return path


def test_write_whole_replaces_keeping_permissions_and_following_a_link(tmp_path):
    target = tmp_path / "notes.md"
    target.write_bytes(b"old")
    target.chmod(0o640)
    link = tmp_path / "link.md"
    link.symlink_to(target)
    records.write_whole(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.md", "notes.md"]


def test_a_fault_in_the_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "REPORT.md"
    target.write_bytes(b"the old report")

    def fails(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", fails)
    with pytest.raises(OSError, match="Input/output error") as raised:
        records.write_whole(target, b"the new report")
    assert raised.value.filename == str(target)  # the file meant, not the temporary
    assert target.read_bytes() == b"the old report"
    assert [p.name for p in tmp_path.iterdir()] == ["REPORT.md"]


# The report, killed (SIGKILL) as it renames its new README over the old one: the
# latest moment a kill could leave the README anything but the old or the new.
KILLED_AT_THE_RENAME = """
import os, signal, sys
from experiments.cli import report as report_cli
rename = os.replace
def killed(source, target):
    if str(target).endswith("README.md"):
        os.kill(os.getpid(), signal.SIGKILL)
    rename(source, target)
os.replace = killed
sys.exit(report_cli.main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_a_kill_during_the_readme_rewrite_leaves_it_whole(tmp_path):
    results = _results(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(README)
    argv = [str(results), "--out", str(tmp_path / "report"), "--readme", str(readme)]
    done = subprocess.run(
        [sys.executable, "-c", KILLED_AT_THE_RENAME, *argv], capture_output=True, timeout=240
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert readme.read_text() == README
    assert report_cli.main(argv) == 0  # and the same command then rewrites it
    text = readme.read_text()
    assert "stale" not in text and text.endswith(USER_TEXT)


def test_a_full_disk_during_the_readme_rewrite_leaves_it_whole(small_disk, tmp_path, capsys):
    results = _results(tmp_path)
    readme = small_disk / "README.md"
    readme.write_text(README)
    fill_disk(small_disk)
    argv = [str(results), "--out", str(tmp_path / "report"), "--readme", str(readme)]
    assert report_cli.main(argv) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert f"could not write {readme} (No space left on device)" in err
    assert readme.read_text() == README
    assert sorted(p.name for p in small_disk.iterdir()) == ["README.md", "filler", "filler-tail"]
    (small_disk / "filler").unlink()  # a positive control: with room, it is rewritten
    assert report_cli.main(argv) == 0
    assert "stale" not in readme.read_text()


def _second_record(results):
    """Another cell in `results`: the next report differs from the last in every file
    this test compares."""
    (loaded,) = records.load(results)
    written = loaded.model_dump(mode="json", exclude_unset=True)
    record = {**written, "run_id": "b", "images_per_s": 160.0}
    record["workload"] = {**record["workload"], "batch_size": 16}
    record["config_key"] = records.config_key(record["workload"], record["device"])
    records.append(results, record)


def _snapshot(folder):
    """Every file under `folder` (hidden ones too) by its path, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _fails_for(monkeypatch, name, call="fsync"):
    """os.fsync (or os.replace) failing, as a full disk does, for the file `name` only."""
    opened = {}
    real_open, real = os.open, getattr(os, call)

    def tracked_open(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        opened[fd] = str(path)
        return fd

    def failing(first, *args, **kwargs):
        target = str(args[0]) if call == "replace" else opened.get(first, "")
        if os.path.basename(target).lstrip(".").startswith(name):
            raise OSError(28, "No space left on device")
        return real(first, *args, **kwargs)

    monkeypatch.setattr(os, "open", tracked_open)
    monkeypatch.setattr(os, call, failing)


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("figures.csv", "fsync"),  # while the new report is written
        ("REPORT.md", "fsync"),
        ("REPORT.md", "replace"),  # while it is renamed in: the pages are in already
        ("README.md", "replace"),
    ],
)
def test_a_fault_anywhere_leaves_the_whole_old_report_and_says_so(
    tmp_path, monkeypatch, capsys, name, call
):
    results = _results(tmp_path)
    out = tmp_path / "out"
    readme = tmp_path / "README.md"
    readme.write_text(README)
    argv = [str(results), "--out", str(out), "--readme", str(readme)]
    assert report_cli.main(argv) == 0
    old, old_readme = _snapshot(out), readme.read_text()
    _second_record(results)
    _fails_for(monkeypatch, name, call)
    assert report_cli.main(argv) == 1
    monkeypatch.undo()
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"error: could not write {tmp_path / name if name == 'README.md' else out / name} "
        "(No space left on device); the report is as it was"
    )
    assert _snapshot(out) == old  # every page, figures.csv and REPORT.md: no temporary
    assert readme.read_text() == old_readme
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "out", "records.jsonl"]
    # the positive control: without the fault every compared file is the new report's
    assert report_cli.main(argv) == 0
    new = _snapshot(out)
    assert sorted(new) == sorted(old)
    changed = {path for path in new if new[path] != old[path]}
    assert {"figures.csv", "REPORT.md", "report/bench.md"} <= changed, changed


@pytest.fixture
def roomy_disk(tmp_path):
    """A 1 MiB tmpfs: room for a report, and a disk that really fills. Needs root."""
    folder = tmp_path / "disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()[:100]}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_full_disk_leaves_the_whole_old_report(roomy_disk, tmp_path, capsys):
    results = _results(tmp_path)
    argv = [str(results), "--out", str(roomy_disk)]
    assert report_cli.main(argv) == 0
    old = _snapshot(roomy_disk)
    _second_record(results)
    disk = os.statvfs(roomy_disk)  # room for the check up front, not for the new report
    room = disk.f_bavail * disk.f_frsize - records.MIN_FREE_BYTES - 8192
    (roomy_disk / "filler").write_bytes(b"x" * room)
    assert report_cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "(No space left on device); the report is as it was" in err, err
    assert {k: v for k, v in _snapshot(roomy_disk).items() if "filler" not in k} == old
    (roomy_disk / "filler").unlink()
    assert report_cli.main(argv) == 0  # the positive control: with room, the new one
    assert _snapshot(roomy_disk)["figures.csv"] != old["figures.csv"]
