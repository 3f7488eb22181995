import subprocess
import sys
from pathlib import Path

import pytest

from experiments import records
from experiments import run as run_module
from experiments.run import main

TINY = [
    "--epochs",
    "1",
    "--steps",
    "3",
    "--timing-steps",
    "3",
    "--batch-size",
    "16",
    "--no-progress",
]


def test_default_study_writes_one_valid_record_per_model(tmp_path, capsys):
    assert main(["--out", str(tmp_path), *TINY]) == 0
    loaded = records.load(tmp_path / "records.jsonl")
    assert [r["workload"]["model"] for r in loaded] == ["mnist_cnn", "lenet5_keras", "mlp"]
    for record in loaded:
        assert record["status"] == "ok"
        assert record["workload"]["dataset"] == "digits"
        assert record["device"] == {**record["device"], "platform": "cpu", "count": 1}
        assert record["step_time_s"]["n"] == 3
        assert record["history"][0]["steps"] == 3
        assert 0.0 <= record["test_accuracy"] <= 1.0
    table = capsys.readouterr().out
    assert "images/s" in table and "lenet5_keras" in table


def test_by_default_records_go_to_the_users_own_ignored_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["--model", "mlp", "--width", "8", "--no-checkpoints", *TINY]
    assert main(argv) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]  # not results/
    assert len(records.load(tmp_path / "runs" / records.RECORDS_FILE)) == 1
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "--no-index", f"{records.DEFAULT_OUT}/records.jsonl"],
        cwd=Path(__file__).parent.parent,
    )
    if ignored.returncode == 128:
        pytest.skip("not a git checkout")
    assert ignored.returncode == 0  # a user's runs never show up as changes to commit


def test_one_workload_with_model_overrides(tmp_path):
    assert main(["--out", str(tmp_path), "--model", "mlp", "--width", "16", *TINY]) == 0
    (record,) = records.load(tmp_path)
    assert record["workload"]["model_overrides"] == {"width": 16}
    assert record["params"] == {"trainable": 784 * 16 + 16 + 16 * 16 + 16 + 170, "non_trainable": 0}


def test_summary_prints_the_layer_table(capsys):
    assert main(["--model", "lenet5_keras", "--summary"]) == 0
    assert "Total params: 81,194" in capsys.readouterr().out


# Bad input (flags, devices, data, --out) is tested in test_bad_input.py.


@pytest.mark.parametrize(
    "argv,loops",
    [
        ([], {"step"}),
        (["--model", "mlp", "--loop", "device"], {"device"}),
        (["--study", "speedrun"], {"device"}),
        (["--study", "bench", "--smoke"], {"step", "device"}),
        (["--study", "all"], {"step", "device"}),
    ],
)
def test_the_loops_a_command_will_run_are_known_before_jax_starts(argv, loops):
    # what the host memory policy is chosen from (jaxcnn/host_memory.py)
    assert run_module._loops(run_module.build_parser().parse_args(argv)) == loops


@pytest.mark.slow
@pytest.mark.parametrize("loop,policy", [("step", "retain"), ("device", "system")])
def test_module_entry_point_runs_as_a_user_would(tmp_path, loop, policy):
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments.run",
            "--out",
            str(tmp_path),
            "--model",
            "mlp",
            "--width",
            "8",
            "--loop",
            loop,
            *TINY,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "1 record(s) appended" in run.stdout
    (record,) = records.load(tmp_path)
    assert record["status"] == "ok"
    assert record["workload"]["loop"] == loop
    # a fresh process on the CPU: the host allocator was set before JAX started, to
    # `retain` for per-step dispatch and left to glibc for the compiled epoch
    assert record["env"]["host_memory"]["policy"] == policy
    assert record["env"]["host_memory"]["applied"] is (policy == "retain")
