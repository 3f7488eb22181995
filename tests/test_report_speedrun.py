"""The speedrun study's report section, on records written here with known numbers:
seeds pooled per configuration, reruns replaced, failures counted, the verdict per
device and the H100 goal."""

import itertools

from conftest import complete_record
from test_report import CPU, H100, PNG_SIGNATURE

from experiments import report
from experiments.studies.speedrun import GOAL_SECONDS, fastest_to_target, speedrun_study

CPU_MODEL = "mnist_cnn [cpu formulation, device loop]"
_keys = itertools.count()


def _record(device, seed, acc, time, status="ok", utc="2026-11-21T19:00:00+00:00", **kw):
    """A speedrun train record as the CLI writes it: `kw` sets workload fields, or,
    with a `_` prefix, record fields (`_config_key` to write a rerun)."""
    extra = {k[1:]: kw.pop(k) for k in list(kw) if k.startswith("_")}
    workload = {
        "batch_size": 128,
        "dataset": "mnist",
        "epochs": 2,
        "formulation": "auto",
        "kind": "train",
        "learning_rate": 0.01,
        "loop": "device",
        "model": "mnist_cnn",
        "model_overrides": {},
        "precision": "f32",
        "schedule": "onecycle",
        "seed": seed,
        "strategy": "single",
        "study": "speedrun",
        **kw,
    }
    record = {
        "schema_version": 1,
        "run_id": f"run{next(_keys)}",
        "config_key": f"key{next(_keys)}",
        "status": status,
        "message": None if status == "ok" else f"{status} happened",
        "device": device,
        "env": {"utc_time": utc, "host": device["host"]},
        "workload": workload,
    }
    if status == "ok":
        epochs = workload["epochs"]
        record.update(
            loop="device",
            formulation={"name": "cpu"} if device is CPU else {"name": "xla"},
            # Two epochs of 100 steps each, the time split evenly between them.
            history=[
                {"epoch": e + 1, "steps": 100, "train_time_s": time / epochs}
                | ({"compile_time_s": 2.0} if e == 0 else {})
                for e in range(epochs)
            ],
            test_accuracy=acc,
            train_time_s=time,
        )
    record.update(extra)
    return complete_record(record)


def _cpu_budgets():
    """1 epoch: fast, mean 0.985, one seed of three at 99%; 2 epochs: slower, mean
    0.991, two seeds of three at 99%; 3 epochs: 0.995 but only one seed."""
    one = [
        _record(CPU, s, a, t, epochs=1) for s, a, t in [(0, 0.98, 5), (1, 0.985, 6), (2, 0.99, 7)]
    ]
    two = [_record(CPU, s, a, t) for s, a, t in [(0, 0.988, 12), (1, 0.99, 10), (2, 0.995, 11)]]
    return one + two + [_record(CPU, 0, 0.995, 8, epochs=3)]


def _rows(text):
    return [line for line in text.splitlines() if line.startswith("| cpu |")]


def test_no_speedrun_records_give_no_section(tmp_path):
    others = [
        _record(CPU, 0, 0.995, 10, study="accuracy"),
        _record(CPU, 0, 0.995, 10, dataset="synthetic"),
        _record(CPU, 0, 0.995, 10, kind="matmul"),
        _record(CPU, 0, 0.995, 10, epochs=0),
        _record(CPU, 0, None, 10),
        _record(CPU, 0, None, None, status="oom"),
    ]
    assert speedrun_study([], tmp_path) == ("", [])
    assert speedrun_study(others, tmp_path) == ("", [])
    assert not list(tmp_path.iterdir())


def test_verdict_picks_the_fastest_budget_that_reaches_the_target_over_seeds():
    won = fastest_to_target(_cpu_budgets())
    assert list(won) == ["cpu"]
    assert won["cpu"]["epochs"] == 2  # 3 epochs is faster and at 0.995, but one seed
    assert won["cpu"]["seeds"] == 3
    assert won["cpu"]["time_median"] == 11
    assert abs(won["cpu"]["accuracy_mean"] - 0.991) < 1e-12
    assert fastest_to_target(_cpu_budgets(), target=0.98)["cpu"]["epochs"] == 1


def test_table_rows_and_verdict_line(tmp_path):
    text, paths = speedrun_study(_cpu_budgets(), tmp_path)
    assert text.startswith("## Study: speedrun\n")
    rows = _rows(text)
    # Sorted by median training time: 1 epoch (6 s), 3 epochs (8 s), 2 epochs (11 s).
    assert [row.split(" | ")[7] for row in rows] == ["1", "3", "2"]
    one, three, two = rows
    assert f"| {CPU_MODEL} | mnist | f32 | 128 | 0.01 | onecycle | 1 | 3 |" in one
    assert "| 0.9850 [0.9800-0.9900] | 1/3 | 6 s [5 s-7 s] | 2 s | 2,133 | 0 |" in one
    assert "| 0.9910 [0.9880-0.9950] | 2/3 | 11 s [10 s-12 s] | 2 s | 2,327 | 0 |" in two
    assert "| 3 | 1 | 0.9950 [0.9950-0.9950] | 1/1 | 8 s [8 s-8 s] |" in three
    assert (
        "- cpu: 99% reached in 11 s of training, the median over 3 seeds whose mean final "
        "test accuracy, 0.9910 [0.9880-0.9950], is at or above 99% (the rule: a "
        "configuration reaches it by its seeds' mean, over at least 2 seeds; 2 of 3 seeds "
        f"reached it on their own; {CPU_MODEL} on mnist, f32, batch 128, 2 epochs, onecycle "
        "to lr 0.01)"
    ) in text
    assert "no H100 records exist yet" in text
    assert paths == [tmp_path / "study_speedrun.png"]
    assert paths[0].read_bytes().startswith(PNG_SIGNATURE)
    assert "![speedrun](study_speedrun.png)" in text


def test_reruns_keep_the_latest_and_failures_are_counted(tmp_path):
    early = _record(CPU, 0, 0.95, 30, utc="2026-11-20T10:00:00+00:00", _config_key="same")
    late = _record(CPU, 0, 0.992, 10, utc="2026-11-21T10:00:00+00:00", _config_key="same")
    seed1 = _record(CPU, 1, 0.994, 12)
    oom = _record(CPU, 2, None, None, status="oom")
    oom_rerun_ok = [
        _record(
            CPU, 3, None, None, status="oom", utc="2026-11-20T00:00:00+00:00", _config_key="k3"
        ),
        _record(CPU, 3, 0.99, 14, utc="2026-11-22T00:00:00+00:00", _config_key="k3"),
    ]
    records = [late, early, seed1, oom, *oom_rerun_ok]  # the file's order is not time's
    text, _ = speedrun_study(records, tmp_path)
    (row,) = _rows(text)
    assert "| 3 | 0.9920 [0.9900-0.9940] | 3/3 | 12 s [10 s-14 s] |" in row
    assert row.endswith("| 1 |")  # the oom, under the ok seeds' model label
    # The runs the rerun replaced are listed with their dates, not dropped in silence.
    (earlier,) = [line for line in text.splitlines() if line.startswith("| cpu: ")]
    assert earlier.endswith(
        "| 2026-11-20 00:00 UTC | 1 | 0.9500 [0.9500-0.9500] | 30 s [30 s-30 s] "
        "| 2026-11-21 10:00 UTC |"
    )
    won = fastest_to_target(records)["cpu"]
    assert won["failed"] == 1 and won["seeds"] == 3 and won["time_median"] == 12


def test_a_device_without_a_configuration_at_the_target(tmp_path):
    records = [_record(H100, s, a, t) for s, a, t in [(0, 0.989, 0.3), (1, 0.9896, 0.4)]]
    records.append(_record(H100, 0, 0.999, 0.2, epochs=4))  # one seed: not a verdict
    text, _ = speedrun_study(records, tmp_path)
    assert fastest_to_target(records) == {}
    assert (
        "- gpu NVIDIA H100 80GB HBM3: no configuration reached a mean test accuracy of 99% "
        "over at least 2 seeds (best mean 0.9990 [0.9990-0.9990] over 1 seed(s)"
    ) in text
    assert "on one H100: not met on gpu NVIDIA H100 80GB HBM3 (no configuration reached" in text


def test_h100_goal_met_and_not_met(tmp_path):
    fast = [
        _record(H100, s, a, t) for s, a, t in [(0, 0.991, 0.35), (1, 0.992, 0.4), (2, 0.993, 0.45)]
    ]
    text, _ = speedrun_study(fast + _cpu_budgets(), tmp_path)
    assert fastest_to_target(fast)["gpu NVIDIA H100 80GB HBM3"]["time_median"] == 0.4
    assert (
        f"The H100 goal: 99% in under {GOAL_SECONDS:g} s of training time on one H100: "
        "met on gpu NVIDIA H100 80GB HBM3 (400 ms)."
    ) in text
    assert "- cpu: 99% reached in 11 s" in text  # the CPU keeps its own verdict
    slow = [_record(H100, s, 0.992, 0.6 + s / 10) for s in range(3)]
    text, _ = speedrun_study(slow, tmp_path)
    assert "on one H100: not met on gpu NVIDIA H100 80GB HBM3 (700 ms)." in text


def test_the_readme_headline_carries_each_devices_verdict():
    text = report.headline(_cpu_budgets(), "results/REPORT.md")
    assert "Time to 99% test accuracy (`--study=speedrun`):" in text
    assert "- cpu: 99% reached in 11 s of training, the median over 3 seeds whose mean" in text
    assert "(the rule: a configuration reaches it by its seeds' mean" in text
    assert "no H100 records exist yet" in text
    assert "speedrun" not in report.headline([_record(CPU, 0, 0.99, 1, study="accuracy")], "r")
