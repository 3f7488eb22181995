"""jaxcnn/perf/constants.json is read as a checked file: a constant missing, not a number,
NaN or out of range, or a file that is not JSON, is one line naming the file and the key,
before anything is compiled, priced or written (never a prediction recorded null)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from jaxcnn.perf import predict

REPO = Path(__file__).resolve().parent.parent


def _with(tmp_path: Path, change) -> Path:
    table = json.loads(predict.CONSTANTS_FILE.read_text())
    change(table)
    path = tmp_path / "constants.json"
    path.write_text(json.dumps(table))
    return path


def _set(platform: str, name: str, value):
    return lambda t: t["families"][platform].__setitem__(name, value)


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_set("gpu", "compute_efficiency", math.nan), "families.gpu.compute_efficiency is nan"),
        (_set("tpu", "kernel_overhead_s", -1e-6), "families.tpu: Constants.kernel_overhead_s"),
        (lambda t: t["families"]["cpu"].pop("memory_efficiency"), "memory_efficiency is missing"),
        (_set("gpu", "memory_efficiency", "fast"), "gpu.memory_efficiency is 'fast', not a number"),
        (lambda t: t.pop("version"), "version is missing"),
        (lambda t: t["families"].__setitem__("quantum", {}), "families.quantum: not a platform"),
    ],
)
def test_a_bad_constant_is_refused_naming_the_file_and_the_key(tmp_path, change, said):
    path = _with(tmp_path, change)
    with pytest.raises(predict.ConstantsError) as refused:
        predict.constants(path)
    message = str(refused.value)
    assert str(path) in message and said in message and "\n" not in message
    assert "python -m experiments.cli.fit" in message  # the fix, named


def test_a_truncated_file_is_refused_and_the_committed_one_is_read(tmp_path):
    path = tmp_path / "constants.json"
    path.write_text(predict.CONSTANTS_FILE.read_text()[:100])
    with pytest.raises(predict.ConstantsError, match="cannot read the prediction constants"):
        predict.constants(path)
    assert predict.constants()["families"]  # the positive control: the committed file


@pytest.mark.slow
def test_the_report_stops_on_a_bad_constants_file_before_writing_anything(tmp_path):
    """The package's constants file swapped for a broken copy in a process of its own:
    the report says one line and writes no report."""
    bad = _with(tmp_path, _set("gpu", "compute_efficiency", math.nan))
    probe = (
        "import sys; from pathlib import Path; from jaxcnn.perf import predict; "
        f"predict.CONSTANTS_FILE = Path({str(bad)!r}); "
        "from experiments.cli import report; sys.exit(report.main(sys.argv[1:]))"
    )
    out = tmp_path / "out"
    said = subprocess.run(
        [sys.executable, "-c", probe, str(REPO / "results"), "--out", str(out)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert said.returncode == 2, said.stderr
    assert "families.gpu.compute_efficiency is nan" in said.stderr
    assert len(said.stderr.strip().splitlines()) == 1, said.stderr
    assert not (out / "REPORT.md").exists()


def test_a_run_stops_on_a_bad_constants_file_before_any_work(tmp_path, monkeypatch, capsys):
    from experiments.cli import run

    bad = _with(tmp_path, _set("gpu", "compute_efficiency", math.nan))
    read = predict.constants.__wrapped__  # the reader itself, uncached
    monkeypatch.setattr(predict, "constants", lambda path=None: read(bad))
    out = tmp_path / "out"
    code = run.main(["--target=gpu-t4", "--model=mnist_cnn", f"--out={out}"])
    err = capsys.readouterr().err
    assert code == 2 and "families.gpu.compute_efficiency is nan" in err, err
    assert not (out / "records.jsonl").exists()
