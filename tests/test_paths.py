"""Paths stay inside their root: a checkpoint key folder that is a symlink is refused
(never followed into another run's folder), locks sit beside the real folder, a records
file or checkpoints folder linked out of --out is refused, and a path option that names
no usable folder (empty, not UTF-8, a control character, a symlink to nowhere) is one
line and exit 2 before any work. Real symlinks, real runs."""

import os
from pathlib import Path

import jax
import pytest

from experiments import records
from experiments.cli import plan as cli_plan
from experiments.cli.run import main, parse_args
from jaxcnn import devices
from jaxcnn.checkpoint import Checkpoints, exclusive
from jaxcnn.errors import UsageError

RUN = ["--model", "mlp", "--set", "width=8", "--epochs", "1", "--set", "steps=2"]
RUN += ["--set", "timing_steps=2", "--batch-size", "16", "--set", "progress=false"]


def _key_folder(out: Path) -> Path:
    """Where `experiments.cli.run --out OUT *RUN` checkpoints its one workload (a key's
    folder as made, not resolved)."""
    options = parse_args(["--out", str(out), *RUN])
    (workload,) = cli_plan.workloads(options, "cpu", 1)
    key = records.config_key(workload.describe(), devices.describe(jax.devices()[:1]))
    return cli_plan.checkpoint_root(options) / key


def _tree(folder: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(folder)), p.lstat().st_size) for p in folder.rglob("*"))


@pytest.mark.parametrize("where", ["another run's key folder", "a folder outside the root"])
def test_a_key_folder_that_is_a_symlink_is_refused_in_one_line_and_never_followed(
    tmp_path, capfd, where
):
    out = tmp_path / "out"
    folder = _key_folder(out)
    other = folder.parent / "0123456789abcdef" if where.startswith("another") else tmp_path / "else"
    (other / "2").mkdir(parents=True)  # a checkpoint step of another run, and its timing
    (other / "timing.json").write_text('{"theirs": true}')
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.symlink_to(other)
    before = _tree(tmp_path)
    for _ in range(2):  # the first run, and its rerun
        assert main(["--out", str(out), *RUN]) == 2
        err = capfd.readouterr().err
        assert err.strip().splitlines()[-1] == (
            f"error: checkpoint folder {folder} is a symlink (to {other}), not a folder of "
            f"its own in {folder.parent}: remove the link"
        )
        assert "compiling" not in err and "Traceback" not in err  # before any work
    assert _tree(tmp_path) == before  # nothing moved into corrupt/, nothing written
    folder.unlink()  # the positive control: the link gone, the same command runs
    assert main(["--out", str(out), *RUN]) == 0
    assert folder.is_dir() and not folder.is_symlink()
    assert (other / "timing.json").read_text() == '{"theirs": true}'


def test_a_folder_reached_by_a_symlink_is_locked_beside_the_real_folder(tmp_path):
    real = tmp_path / "real" / "key"
    real.mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    with exclusive(link):
        assert (tmp_path / "real" / "key.lock").read_text() == f"{os.getpid()}\n"
        assert not (tmp_path / "link.lock").exists()
    assert not (tmp_path / "real" / "key.lock").exists()


def test_a_key_folder_is_its_real_path_inside_the_real_root(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "root").symlink_to(tmp_path / "real")  # the root itself may be a link
    key = "0123456789abcdef"
    assert records.key_folder(tmp_path / "root", key) == tmp_path / "real" / key
    (tmp_path / "real" / key).symlink_to(tmp_path)
    with pytest.raises(ValueError, match=f"{key} is a symlink"):
        records.key_folder(tmp_path / "root", key)


def _refused_before_any_work(out: str, said: str, capfd) -> None:
    assert main(["--out", out, *RUN]) == 2
    err = capfd.readouterr().err.strip()
    assert err.splitlines() == [said], err


def test_an_out_whose_name_is_not_utf8_is_one_line_before_any_work(tmp_path, capfd):
    out = os.fsdecode(bytes(tmp_path) + b"/bad\xff")
    said = (
        f"error: --out {os.fsencode(out)!r} is not UTF-8, and TensorStore, which writes "
        "checkpoints, takes UTF-8 paths only: give a folder whose name is UTF-8 (see --help)"
    )
    _refused_before_any_work(out, said, capfd)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_out_is_one_line_before_any_work(tmp_path, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)  # an empty --out would have written here
    _refused_before_any_work("", "error: --out is empty: give a folder (see --help)", capfd)
    assert list(tmp_path.iterdir()) == []


def test_an_out_through_a_symlink_to_nowhere_is_one_line_before_any_work(tmp_path, capfd):
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    for given, named in (("dangling", ""), ("dangling/sub", f" ({tmp_path / 'dangling'})")):
        out = str(tmp_path / given)
        said = (
            f"error: cannot write to --out {out}: a symlink to {tmp_path / 'gone'}, which "
            f"does not exist{named}"
        )
        _refused_before_any_work(out, said, capfd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]
    (tmp_path / "gone").mkdir()  # the positive control: the link leads somewhere now
    assert main(["--out", str(tmp_path / "dangling"), *RUN]) == 0
    assert (tmp_path / "gone" / records.RECORDS_FILE).exists()


def test_a_library_checkpoint_folder_that_is_not_utf8_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="is not UTF-8, and TensorStore"):
        Checkpoints(os.fsdecode(bytes(tmp_path) + b"/bad\xff"))
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(UsageError, match="a symlink to .*gone, which does not exist"):
        Checkpoints(tmp_path / "dangling" / "run")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling"]


@pytest.mark.parametrize("name", [records.RECORDS_FILE, cli_plan.CHECKPOINTS_FOLDER])
def test_a_records_file_or_checkpoints_folder_linked_out_of_out_is_refused_before_any_work(
    tmp_path, capfd, name
):
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    target = elsewhere / name
    if name == records.RECORDS_FILE:
        target.write_text("")
        fix = f"give --out={elsewhere} to write there"
    else:
        target.mkdir()
        fix = f"give --set checkpoint_dir={target} to keep checkpoints there"
    (out / name).symlink_to(target)
    said = (
        f"error: {out / name} is a symlink to {target}, outside --out {out}: {fix}, or "
        "remove the link (see --help)"
    )
    _refused_before_any_work(str(out), said, capfd)
    assert [p for p, _ in _tree(elsewhere)] == [name]  # nothing written through the link
    assert target.read_text() == "" if target.is_file() else not any(target.iterdir())
    # The positive control: a link that stays inside --out is --out's own.
    (out / name).unlink()
    target.rename(out / f"real-{name}")
    (out / name).symlink_to(out / f"real-{name}")
    assert main(["--out", str(out), *RUN]) == 0
    if name == records.RECORDS_FILE:
        assert len((out / f"real-{name}").read_text().splitlines()) == 1


@pytest.mark.parametrize("option", ["--out", "--data-dir"])
def test_a_path_with_a_control_character_is_one_line_before_any_work(tmp_path, capfd, option):
    given = str(tmp_path / "a\nb")
    args = [option, given, *RUN] if option == "--out" else ["--out", str(tmp_path / "o"), *RUN]
    if option == "--data-dir":
        args += ["--dataset", "mnist", option, given]
    assert main(args) == 2
    err = capfd.readouterr().err.strip()
    assert err.splitlines() == [
        f"error: {option} {given!r} has a control character ('\\n') in its name: give a "
        "folder whose name has none (see --help)"
    ]
    assert list(tmp_path.iterdir()) == []
