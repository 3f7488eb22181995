"""experiments/records/migrate.py: records of schema 1 in, schema 2 out, once; what was
measured is not touched, bad lines and records already migrated stay byte for byte,
and checkpoint folders follow their records' new keys."""

import contextlib
import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import warnings

import pytest

from experiments import records
from experiments.cli import migrate as migrate_cli
from experiments.records import migrate as migrate_records
from experiments.records.workload import Workload

CPU = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1, "host": "laptop"}
BASE = {  # the workload fields of the first records, before the studies added theirs
    "model": "mlp",
    "model_overrides": {"width": 16},
    "dataset": "mnist",
    "batch_size": 64,
    "epochs": 1,
    "steps": None,
    "optimizer": "adam",
    "learning_rate": 0.001,
    "seed": 0,
    "strategy": "single",
    "precision": "f32",
    "timing_steps": 20,
}
MEASURED = {
    "params": {"trainable": 12_730, "non_trainable": 0},
    "compile_time_s": {"train": 0.61, "eval": 0.23},
    "step_time_s": {"median": 0.00123, "p10": 0.0011, "p90": 0.0015, "n": 20},
    "images_per_s": 52_032.52,
    "history": [{"epoch": 1, "train_loss": 0.31, "test_accuracy": 0.9512}],
    "test_accuracy": 0.9512,
    "test_loss": 0.17,
    "train_time_s": 3.25,
}
OLD_ENV = {"jax": "0.4.1", "jaxlib": "0.4.1", "flax": "0.8", "optax": "0.1", "python": "3.11"}
OLD_ENV |= {"git_commit": "abc", "host": "laptop", "utc_time": "2025-01-01T00:00:00+00:00"}


def _old_key(run_id):
    """A schema 1 record's key: 16 hex digits, as records.config_key made them then."""
    return hashlib.sha256(f"old-{run_id}".encode()).hexdigest()[:16]


def _v1(run_id, workload, **fields):
    return {
        "schema_version": 1,
        "run_id": run_id,
        "config_key": _old_key(run_id),
        "status": "ok",
        "message": None,
        "workload": workload,
        "device": dict(CPU),
        "env": dict(OLD_ENV),
        **MEASURED,
        **fields,
    }


def _current_v2(run_id):
    """A record as a run writes it today (schema 2)."""
    workload = Workload(model="mlp", model_overrides={"width": 16}).describe()
    device = {**CPU, "machine": "m"}
    env = {**OLD_ENV, "host_memory": {"policy": "system"}}
    record = records.new_record(workload, device, env, loop="step", compiler_options={})
    record.update(run_id=run_id, status="ok", formulation={"name": "cpu"}, **MEASURED)
    return records.validate(record)


@pytest.fixture
def old_file(tmp_path):
    """A records file as the study left it: records of three eras of schema 1, a peer's,
    a paired run's, one already of schema 2, a torn line and a line that is not JSON."""
    study_era = {**BASE, "study": "devices", "kind": "train", "num_devices": None}
    study_era |= {"scaling": None, "ensemble_size": 1, "ensemble_mode": None}
    study_era |= {"matmul_precision": "default", "oom_group": None}
    formulation_era = {**study_era, "loop": "device", "formulation": "auto"}
    peer = {**BASE, "kind": "peer", "study": "bench", "framework": "torch", "mode": "eager"}
    peer_fields = {"throughput": {"median": 1.0, "p10": 1.0, "p90": 1.0, "n": 7, "steps": 20}}
    lines = [
        json.dumps(_v1("first", dict(BASE))),
        json.dumps(_v1("study", study_era)),
        json.dumps(_v1("formulation", formulation_era, loop="device", formulation={"name": "cpu"})),
        '{"schema_version": 1, "run_id": "tor',
        json.dumps(_v1("peer", peer, **peer_fields)),
        json.dumps(
            {
                "schema_version": 1,
                "run_id": "paired",
                "status": "error",
                "message": "peer side stopped",
                "workload": {"model": "mlp", "dataset": "synthetic", "batch_size": 64}
                | {"strategy": "single", "kind": "paired", "study": "bench"},
                "device": dict(CPU),
                "env": {k: OLD_ENV[k] for k in ("python", "git_commit", "host", "utc_time")},
            }
        ),
        json.dumps(_current_v2("already"), sort_keys=True),
        "not json at all",
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _by_id(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the two bad lines, kept on purpose
        return {r.run_id: r for r in records.load(path)}


def test_old_records_gain_explicit_fields_and_keep_what_was_measured(old_file, capsys):
    before = {}
    for line in old_file.read_text().splitlines():
        with contextlib.suppress(ValueError):
            before[json.loads(line)["run_id"]] = json.loads(line)
    assert migrate_cli.main([str(old_file)]) == 0
    assert capsys.readouterr().out == (
        f"{old_file}: 5 record(s) migrated to schema 2, 1 already, 2 line(s) kept as they "
        "were (lines 4, 8); 0 checkpoint folder(s) renamed to their new keys\n"
    )
    with warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        loaded = records.load(old_file)
    # each as its line now holds it
    after = {r.run_id: r.model_dump(mode="json", exclude_unset=True) for r in loaded}
    (warning,) = warned  # the bad lines only: no record is of an older schema now
    assert str(warning.message).startswith(f"{old_file}: skipped 2 bad records (lines 4, 8;")
    assert sorted(after) == sorted(before)
    for run_id, old in before.items():
        new = after[run_id]
        assert new["schema_version"] == 2
        for key in (*MEASURED, "status", "message", "run_id"):  # measured values unchanged
            assert new.get(key) == old.get(key), (run_id, key)
        for section in ("workload", "device", "env"):  # fields are added, none changed
            assert {k: new[section][k] for k in old[section]} == old[section]
    first = after["first"]
    assert {k: first["workload"][k] for k in migrate_records.ADDED_WORKLOAD_FIELDS} == {
        **migrate_records.ADDED_WORKLOAD_FIELDS,
        "kind": "train",
    }
    assert first["loop"] == "step" and first["formulation"]["name"] == "xla"
    assert first["compiler_options"] is None and first["device"]["machine"] is None
    assert first["env"]["host_memory"] is None
    assert after["formulation"]["formulation"] == {"name": "cpu"}  # what it recorded
    assert after["formulation"]["loop"] == "device"
    assert after["peer"]["env"]["host_memory"] is None
    assert "loop" not in after["peer"]["workload"]  # not a JAX workload: kind, study only
    assert "config_key" not in after["paired"]


def test_a_migrated_key_is_the_key_a_rerun_computes(old_file):
    """So a rerun skips what the old records measured: the one rule, for the workload
    those records ran (formulation xla: before formulations existed)."""
    migrate_cli.main([str(old_file)])
    after = _by_id(old_file)
    first = Workload(model="mlp", model_overrides={"width": 16}, dataset="mnist", batch_size=64)
    expected = dataclasses.replace(first, formulation="xla").describe()
    assert after["first"].config_key == records.config_key(expected, CPU)
    study = dataclasses.replace(first, study="devices").describe()
    assert after["study"].config_key != records.config_key(study, CPU)  # auto: not xla
    study["formulation"] = "xla"
    assert after["study"].config_key == records.config_key(study, CPU)
    assert after["already"].config_key == _current_v2("x")["config_key"]


def test_a_second_run_changes_nothing_and_v2_lines_stay_byte_for_byte(old_file, capsys):
    original = old_file.read_bytes().splitlines(keepends=True)
    migrate_cli.main([str(old_file)])
    once = old_file.read_bytes()
    for number in (4, 7, 8):  # the torn line, the schema 2 record, the line not JSON
        assert once.splitlines(keepends=True)[number - 1] == original[number - 1]
    capsys.readouterr()
    assert migrate_cli.main([str(old_file.parent)]) == 0  # a folder: its *.jsonl
    assert old_file.read_bytes() == once
    assert "0 record(s) migrated to schema 2, 6 already" in capsys.readouterr().out


def test_checkpoint_folders_follow_their_records_to_the_new_key(old_file, capsys):
    checkpoints = old_file.parent / "checkpoints"
    (checkpoints / _old_key("first") / "5").mkdir(parents=True)
    (checkpoints / "a-run-that-never-wrote-a-record").mkdir()
    migrate_cli.main([str(old_file)])
    out = capsys.readouterr().out
    new_key = _by_id(old_file)["first"].config_key
    assert sorted(p.name for p in checkpoints.iterdir()) == sorted(
        [new_key, "a-run-that-never-wrote-a-record"]
    )
    assert (checkpoints / new_key / "5").is_dir()
    assert "1 checkpoint folder(s) renamed to their new keys" in out
    assert "1 checkpoint folder(s) of runs with no record keep their old names" in out


def test_a_missing_file_is_one_line_and_exit_2(tmp_path, capsys):
    assert migrate_cli.main([str(tmp_path / "nope.jsonl")]) == 2
    assert capsys.readouterr().err == f"no such file or folder: {tmp_path / 'nope.jsonl'}\n"


def test_the_fields_filled_in_are_the_workload_defaults_but_the_formulation():
    """What schema 1 left out meant the default of its day: Workload's defaults, but
    for the formulation (before it existed, XLA's convolutions ran; auto means the
    platform's own today)."""
    defaults = {f.name: f.default for f in dataclasses.fields(Workload)}
    added = migrate_records.ADDED_WORKLOAD_FIELDS
    assert {k: defaults[k] for k in added} == {**added, "formulation": "auto"}
    assert set(defaults) == set(BASE) | set(added)  # a new field needs its migration


def test_a_key_that_climbs_out_of_the_checkpoints_moves_nothing(old_file, capsys):
    """A record's config key is text from a file (records are merged from other
    machines): one of `../../victim` or an absolute path names no checkpoint folder,
    and the folder it points at stays where it is."""
    victim = old_file.parent / "victim"
    (victim / "keep").mkdir(parents=True)
    absolute = old_file.parent / "absolute"
    absolute.mkdir()
    checkpoints = old_file.parent / "out" / "checkpoints"
    checkpoints.mkdir(parents=True)
    lines = old_file.read_text().splitlines(keepends=True)
    climbing = _v1("climbing", dict(BASE)) | {"config_key": "../../victim"}
    rooted = _v1("rooted", dict(BASE)) | {"config_key": str(absolute)}
    lines += [json.dumps(climbing) + "\n", json.dumps(rooted) + "\n"]
    old_file.write_text("".join(lines))
    assert migrate_cli.main([str(old_file), "--checkpoint-dir", str(checkpoints)]) == 0
    out = capsys.readouterr().out
    assert "7 record(s) migrated" in out
    assert "2 old key(s) not of 16 hex digits name no checkpoint folder" in out
    assert (victim / "keep").is_dir() and absolute.is_dir()
    assert list(checkpoints.iterdir()) == []
    migrated = _by_id(old_file)  # the records themselves are migrated all the same
    assert records.is_config_key(migrated["climbing"].config_key)


@pytest.mark.parametrize("key", ["../../victim", "/etc", "0123456789abcde/", "", None, 7])
def test_a_path_is_made_only_from_a_config_key(tmp_path, key):
    with pytest.raises(ValueError, match="is not a config key"):
        records.key_folder(tmp_path, key)
    assert records.key_folder(tmp_path, "0123456789abcdef") == tmp_path / "0123456789abcdef"


def _one_line(argv, code, message):
    done = subprocess.run(
        [sys.executable, "-m", "experiments.cli.migrate", *argv],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == code, done.stderr
    assert len(done.stderr.strip().splitlines()) == (1 if message else 0), done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.slow
def test_a_fifo_a_device_or_a_read_only_file_is_one_line(old_file, tmp_path):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    _one_line([str(fifo)], 2, "a FIFO, not a records file")  # never opened: no hang
    _one_line(["/dev/zero"], 2, "a character device, not a records file")
    before = old_file.read_bytes()
    if subprocess.run(["chattr", "+i", str(old_file)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here (not root, or the filesystem lacks it)")
    try:
        _one_line([str(old_file)], 2, f"cannot migrate {old_file}: Operation not permitted")
    finally:
        subprocess.run(["chattr", "-i", str(old_file)], check=True)
    assert old_file.read_bytes() == before
    fifo.unlink()
    _one_line([str(old_file)], 0, "")  # a positive control: the same file, writable
