"""A checkpoint save that the machine fails, for real: a file-size limit (RLIMIT_FSIZE,
`ulimit -f`) in the process that saves. Its one line names the limit and the fix, not
the disk's free space, and fits a record's message whole."""

import json
import subprocess
import sys

import pytest

from experiments import records

LIMIT = 256 * 1024  # an mlp of width 512's checkpoint holds a 1.6 MB kernel: past it
RUN = ["--model", "mlp", "--set", "width=512", "--epochs", "1", "--set", "steps=2"]
RUN += ["--set", "timing_steps=2", "--batch-size", "16", "--set", "progress=false"]


def _run(out, limited: bool) -> subprocess.CompletedProcess:
    """experiments.cli.run in a process of its own, limited to files of LIMIT bytes by the
    shell's `ulimit -f` (in KiB) where `limited`."""
    limit = f"ulimit -f {LIMIT // 1024} && " if limited else ""
    command = [sys.executable, "-m", "experiments.run", "--out", str(out), *RUN]
    return subprocess.run(
        ["bash", "-c", limit + 'exec "$@"', "bash", *command],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_a_file_size_limit_during_a_checkpoint_save_is_named_with_its_fix(tmp_path):
    out = tmp_path / "out"
    run = _run(out, limited=True)
    assert run.returncode == 1, run.stderr
    (record,) = [json.loads(line) for line in (out / records.RECORDS_FILE).read_text().splitlines()]
    (folder,) = (out / "checkpoints").iterdir()
    assert record["status"] == "error"
    assert record["message"] == (
        f"CheckpointSaveError: could not save checkpoint 2 in {folder}: a file would pass this "
        f"process's file-size limit (ulimit -f: {LIMIT:,} bytes): raise it (ulimit -f unlimited)"
    )
    assert "Traceback" not in run.stderr
    # The positive control: without the limit, the same command saves and is ok.
    again = _run(out, limited=False)
    assert again.returncode == 0, again.stderr
    assert [r.status for r in records.load(out / records.RECORDS_FILE)] == ["error", "ok"]
    assert list(folder.glob("*orbax-checkpoint-tmp*")) == []  # the half-written save gone
