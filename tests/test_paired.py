"""benchmarks/paired.py: two real sides (both JAX here: the peers' frameworks are not
installed in CI) take turns block by block, never computing at once; the driver's paired
record agrees with each side's own record; a side that fails is an error record, and
the pair to measure is the bench table's own."""

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import complete_record, typed

from benchmarks import paired, turns
from experiments import records, studies
from experiments.records.stats import summarize
from experiments.report import figures
from experiments.studies import bench_cells

CONFIGS = (
    paired.Config("jax", "cpu", "step", "system", "digits"),
    paired.Config("peer", "cpu", "device", "system", "digits", jax_peer=True),  # JAX as the peer
)


CPU = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1, "host": "laptop"}


def _bench(run_id, rate, *, batch=128, framework=None, mode=None, formulation="cpu",
           loop="device", precision="f32", status="ok"):  # fmt: skip
    workload = {
        "model": "mnist_cnn",
        "model_overrides": {},
        "dataset": "mnist",
        "batch_size": batch,
        "epochs": 0,
        "strategy": "single",
        "precision": precision,
        "study": "bench",
        "kind": "peer" if framework else "train",
    }
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": status,
        "message": None if status == "ok" else "boom",
        "workload": workload,
        "device": CPU,
        "env": {"host": "laptop", "utc_time": "2026-01-01T00:00:00", "git_commit": "abcdef123"},
    }
    if framework:
        workload.update(framework=framework, mode=mode)
    else:
        record.update(loop=loop, formulation={"name": formulation, "conv": "-", "pool": "-"})
    if status == "ok":
        step = batch / rate
        record.update(
            params={"trainable": 1, "non_trainable": 0},
            compile_time_s={"train": 1.0, "eval": None},
            step_time_s={"median": step, "p10": step, "p90": step, "n": 7},
            images_per_s=rate,
            throughput={"median": rate, "p10": rate * 0.9, "p90": rate * 1.1, "n": 7, "steps": 20},
            flops={"per_step": 2_000_000 * batch, "per_image": 2_000_000.0},
            matmul_ceiling={"float32": {"tflops": 0.2}},
        )
    return records.validate(complete_record(record))


def _under(record, policy, utc_time, faults=None):
    record["env"] = {**record["env"], "utc_time": utc_time}
    if policy is not None:
        record["env"]["host_memory"] = {"policy": policy, "applied": policy == "retain"}
    if faults is not None:
        record["throughput"]["minor_faults_per_step"] = faults
    return record


def _jax_side(config, out, *extra):
    return [
        sys.executable, "-m", "benchmarks.turns", "experiments.run", "--device=cpu",
        "--model=mlp", "--set", "width=8", "--batch-size=16", "--epochs=0",
        "--set", f"loop={config.second}", "--dataset=digits", "--set", "timing_steps=3",
        "--set", "host_memory=system", "--set", "checkpoints=false", "--force",
        "--set", "progress=false", f"--out={out}", *extra,
    ]  # fmt: skip


@pytest.mark.slow
def test_two_sides_alternate_blocks_and_the_record_agrees_with_theirs(tmp_path):
    out = tmp_path / "results"
    record = paired.measure_pair("mlp", 16, CONFIGS, _jax_side, out, tmp_path)
    assert record["status"] == "ok", record["message"]
    rounds = record["paired"]["rounds"]
    assert len(rounds) == paired.ROUNDS
    assert [r["first"] for r in rounds] == ["jax", "peer"] * 3 + ["jax"]
    # One process computing at a time: on the host's one monotonic clock, every block
    # starts after the one before it ended, in the order the driver gave the turns.
    order = {"jax": ("jax", "peer"), "peer": ("peer", "jax")}
    blocks = [one[side] for one in rounds for side in order[one["first"]]]
    for before, after in itertools.pairwise(blocks):
        assert before["start"] < before["end"] <= after["start"]
    ratios = [one["jax"]["images_per_s"] / one["peer"]["images_per_s"] for one in rounds]
    assert record["paired"]["ratio"] == summarize(ratios)

    saved = records.load(out)
    assert [r.run_id for r in saved][-1] == record["run_id"]  # the driver's own dict
    for name in ("jax", "peer"):
        (own,) = [r for r in saved if (r.env.turns or {}).get("side") == name]
        assert own.env.turns == {"pair": record["run_id"], "side": name}
        assert own.loop == {"jax": "step", "peer": "device"}[name]
        assert own.workload.epochs == 0 and own.history == []  # timed, not trained
        assert record["paired"][name]["run_id"] == own.run_id
        # the side's own figure is the median of the very blocks the driver saw
        rates = [one[name]["images_per_s"] for one in rounds]
        assert own.throughput.median == pytest.approx(summarize(rates)["median"])
        assert own.throughput.n == paired.ROUNDS
    table = figures.build(saved, refs=[])
    pair = table[table.selection == "paired"]
    # each side with its host memory policy: one configuration on both sides under two
    # policies must not print as one label
    side = "jax cpu {} f32 (system host memory)"
    assert list(pair.extra) == [f"{side.format('step')} / {side.format('device')} in turns"]
    assert pair.value.iloc[0] == pytest.approx(record["paired"]["ratio"]["median"])


@pytest.mark.slow
def test_a_side_that_stops_before_its_turns_is_an_error_record(tmp_path):
    out = tmp_path / "results"

    def command(config, folder):
        return _jax_side(config, folder, *(["--dataset=nope"] if config.side == "jax" else []))

    record = paired.measure_pair("mlp", 16, CONFIGS, command, out, tmp_path)
    assert record["status"] == "error"
    assert record["message"].startswith("jax side stopped: exit code 2: ")
    assert "nope" in record["message"]
    assert (tmp_path / "mlp-16-jax-1.log").exists()  # the positive control
    assert not (tmp_path / "mlp-16-peer-1.log").exists()  # the peer side never started
    assert [r.model_dump(mode="json", exclude_unset=True) for r in records.load(out)] == [record]
    assert record["status"] == "error"
    table = figures.build([typed(record)], refs=[])
    assert not table.records.str.contains(record["run_id"], na=False).any()  # no figure


def test_a_pair_its_out_cannot_take_is_kept_and_said(tmp_path):
    out = tmp_path / "results"
    (out / records.RECORDS_FILE).mkdir(parents=True)  # made after the driver checked it
    stops = lambda config, folder: [sys.executable, "-c", "raise SystemExit(3)"]  # noqa: E731
    with pytest.raises(records.NotRecorded) as raised:
        paired.measure_pair("mlp", 16, CONFIGS, stops, out, tmp_path)
    kept = raised.value.args[0].split("the record is kept in ")[1].split(" (cat ")[0]
    (record,) = records.load(kept)
    assert record.workload.kind == "paired" and record.status == "error"
    assert record.message.startswith("jax side stopped: exit code 3")
    Path(kept).unlink()


# This machine as the bench names a CPU figure: by its CPU, then (records made before
# the CPU was recorded, as these tests') by its host.
HERE = bench_cells.machines_here("laptop")


def test_the_default_pair_is_the_bench_tables_own():
    bench = [  # as the driver loads them
        typed(_under(_bench("j1", 4000.0, loop="step"), "retain", "2026-01-03")),
        typed(_under(_bench("j2", 4500.0, loop="device"), "system", "2026-01-03")),
        typed(
            _under(_bench("j3", 9000.0, loop="device", precision="bf16"), "retain", "2026-01-03")
        ),
        typed(
            _under(_bench("p1", 2000.0, framework="keras", mode="graph"), "system", "2026-01-03")
        ),
        typed(
            _under(_bench("p2", 2500.0, framework="torch", mode="eager"), "retain", "2026-01-03")
        ),
    ]
    bench = [typed(r) for r in bench]  # as the driver loads them
    jax, peer = paired.choose(bench, "mnist_cnn", 128, "best", "fastest", HERE)
    assert jax == paired.Config("jax", "cpu", "device", "system", "mnist")  # f32 only
    assert peer == paired.Config("peer", "torch", "eager", "retain")
    named = paired.choose(bench, "mnist_cnn", 128, "xla:step:retain", "keras:xla:system", ["x"])
    assert [c.configuration for c in named] == ["jax xla step f32", "keras xla"]
    with pytest.raises(paired.UsageError, match="run the bench first"):
        paired.choose(bench, "mnist_cnn", 512, "best", "fastest", HERE)
    with pytest.raises(paired.UsageError, match="FIRST:SECOND:POLICY, e.g. keras:graph:system"):
        paired.choose(bench, "mnist_cnn", 128, "best", "keras-graph", HERE)
    loops = paired.choose(bench, "mlp", 32, "cpu:device:retain", "jax:cpu:step:retain", ["x"])
    assert loops[1] == paired.Config("peer", "cpu", "step", "retain", "mnist", jax_peer=True)
    assert [c.configuration for c in loops] == ["jax cpu device f32", "jax cpu step f32"]
    with pytest.raises(paired.UsageError, match="jax:FORMULATION:LOOP:POLICY"):
        paired.choose(bench, "mnist_cnn", 128, "best", "jax:cpu:step", HERE)


def test_the_default_pair_takes_each_configuration_from_its_newest_sitting():
    older = _under(_bench("j0", 9000.0, loop="step"), "retain", "2026-01-01")
    older["env"]["git_commit"] = "0123456"  # another sitting: another VM's speed, maybe
    bench = [
        typed(older),
        typed(_under(_bench("j1", 4000.0, loop="step"), "retain", "2026-01-03")),
        typed(_under(_bench("j2", 4500.0, loop="device"), "retain", "2026-01-03")),
        typed(_under(_bench("p1", 2000.0, framework="keras", mode="graph"), None, "2026-01-03")),
    ]
    jax, _ = paired.choose(bench, "mnist_cnn", 128, "best", "fastest", HERE)
    # the step loop's 9000 images/s is its older sitting's; in its newest it is the slower
    assert jax == paired.Config("jax", "cpu", "device", "retain", "mnist")


def test_a_jax_peer_runs_experiments_run_and_needs_no_peers_venv(tmp_path):
    argv = ["--jax=cpu:device:retain", "--peer=jax:cpu:step:system", "--data-dir=d"]
    args = paired.parse([*argv, "--peer-python", "/nowhere/python", "--out", str(tmp_path)])
    peer = paired.parse_config("peer", args.peer)
    command = paired.side_command(args, peer, "mlp", 32, str(tmp_path))
    assert command[:4] == [args.jax_python, "-m", "benchmarks.turns", "experiments.run"]
    assert {"loop=step", "host_memory=system", "width=4096", "--data-dir=d"} <= set(command)


def test_side_records_stay_out_of_the_bench_table():
    side = _under(_bench("t", 9000.0, framework="torch", mode="eager"), "retain", "2026-01-03")
    side["env"]["turns"] = {"pair": "p", "side": "peer"}
    alone = _under(_bench("a", 3000.0, framework="torch", mode="eager"), "retain", "2026-01-02")
    side, alone = typed(side), typed(alone)
    assert studies.bench.bench_records([side, alone]) == [alone]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--models", "resnet"], "unknown model resnet"),
        (["--batch-sizes", "a"], "is not a list of integers"),
        (["--peer-python", "/nowhere/python"], "set up the peers' venv"),
        (["--passes", "0"], "--passes 0: must be >= 1"),
        (["--batch-sizes", "32,0"], "each batch size must be >= 1"),
        (["--out", "/dev/null/results"], "cannot write to --out /dev/null"),
    ],
)
def test_a_bad_command_line_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    assert paired.main(["--out", str(tmp_path), "--peer-python", sys.executable, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / records.RECORDS_FILE).exists()


def test_turns_are_off_unless_a_driver_set_them(monkeypatch):
    monkeypatch.delenv(turns.ENV_VAR, raising=False)
    assert turns.from_env() is None
    assert turns.timed_blocks(lambda: 0.5, 3, 10) == [0.5, 0.5, 0.5]
    monkeypatch.setenv(turns.ENV_VAR, "{not json")
    with pytest.raises(ValueError, match="is not what benchmarks/paired.py sets"):
        turns.from_env()


def test_a_paired_record_without_its_ratio_is_rejected():
    record = {
        "schema_version": records.SCHEMA_VERSION, "run_id": "x", "status": "ok",
        "workload": {"kind": "paired", "model": "m", "dataset": "d", "batch_size": 1,
                     "strategy": "single"},
        "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1},
        "env": {}, "paired": {"rounds": [], "jax": {"configuration": "jax"},
                              "peer": {"configuration": "keras graph"}},
        "message": None,
    }  # fmt: skip
    with pytest.raises(records.RecordError, match="paired lacks ratio"):
        records.validate(complete_record(record))


def _paired(run_id, session, number, ratios, utc_time, status="ok", peer="keras graph", **extra):
    record = {
        "schema_version": records.SCHEMA_VERSION, "run_id": run_id, "status": status,
        "message": None if status == "ok" else "peer side stopped: exit code 1",
        "workload": {"kind": "paired", "study": "bench", "model": "mnist_cnn",
                     "model_overrides": {}, "dataset": "mnist", "batch_size": 128,
                     "strategy": "single"},
        "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1,
                   "host": "laptop"},
        "env": {"host": "laptop", "utc_time": utc_time, "git_commit": extra.get("commit")},
        "session": {"id": session, "pass": number, "passes": 3},
    }  # fmt: skip
    sides = {
        "jax": {"configuration": extra.get("jax", "jax cpu device f32"), "host_memory": "retain"},
        "peer": {"configuration": peer, "host_memory": "system"},
    }
    record["paired"] = sides  # an error record carries what was asked
    if status == "ok":
        rounds = [
            {"first": "jax", "jax": {"images_per_s": 100.0 * r}, "peer": {"images_per_s": 100.0}}
            for r in ratios
        ]
        record["paired"] = {"rounds": rounds, "ratio": summarize(ratios), **sides}
    return records.validate(complete_record(record))


@pytest.mark.parametrize(
    "ratios,verdict",
    [([1.1, 1.2, 1.3, 1.2], " (faster)"), ([0.8, 0.9, 0.85], " (slower)"), ([0.9, 1.2], "")],
)
def _benchmarks_after(code: str) -> list[str]:
    """The benchmarks modules a fresh interpreter holds after running `code`."""
    probe = (
        f"import sys\n{code}\nprint(*sorted(m for m in sys.modules if m.startswith('benchmarks')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.mark.slow
def test_the_core_imports_no_benchmarks_module():
    core = "import jaxcnn, experiments.harness.measure, experiments.records, experiments.report"
    core += ", experiments.cli.run, experiments.studies, experiments.studies.bench"
    assert _benchmarks_after(core) == []
    asked = "import benchmarks.turns"  # the positive control: the probe sees one
    assert _benchmarks_after(asked) == ["benchmarks", "benchmarks.turns"]
