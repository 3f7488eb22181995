"""benchmarks/paired.py: two real sides (both JAX here: the peers' frameworks are not
installed in CI) take turns block by block, never computing at once; the driver's paired
record agrees with each side's own record; a side that fails is an error record, and
the pair to measure is the bench table's own."""

import itertools
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import complete_record
from test_report_bench import _bench, _under

from benchmarks import paired, turns
from experiments import records, studies
from experiments.stats import summarize
from experiments.studies import bench_cells
from experiments.studies import bench_paired as report_paired

CONFIGS = (
    paired.Config("jax", "cpu", "step", "system", "digits"),
    paired.Config("peer", "cpu", "device", "system", "digits", jax_peer=True),  # JAX as the peer
)


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
    assert [r["run_id"] for r in saved][-1] == record["run_id"]
    for name in ("jax", "peer"):
        (own,) = [r for r in saved if (r["env"].get("turns") or {}).get("side") == name]
        assert own["env"]["turns"] == {"pair": record["run_id"], "side": name}
        assert own["loop"] == {"jax": "step", "peer": "device"}[name]
        assert own["workload"]["epochs"] == 0 and own["history"] == []  # timed, not trained
        assert record["paired"][name]["run_id"] == own["run_id"]
        # the side's own figure is the median of the very blocks the driver saw
        rates = [one[name]["images_per_s"] for one in rounds]
        assert own["throughput"]["median"] == pytest.approx(summarize(rates)["median"])
        assert own["throughput"]["n"] == paired.ROUNDS
    assert report_paired.paired_table(saved) == ""  # JAX against JAX: not a peer's row
    row = report_paired.paired_table(saved, jax_versus_jax=True).splitlines()[2]
    assert "| jax cpu step f32 (system) | jax cpu device f32 (system) |" in row


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
    assert records.load(out) == [record]
    row = report_paired.paired_table([record], jax_versus_jax=True).splitlines()[2]
    assert "| jax cpu step f32 (system) | jax cpu device f32 (system) | error |" in row


def test_a_pair_its_out_cannot_take_is_kept_and_said(tmp_path):
    out = tmp_path / "results"
    (out / records.RECORDS_FILE).mkdir(parents=True)  # made after the driver checked it
    stops = lambda config, folder: [sys.executable, "-c", "raise SystemExit(3)"]  # noqa: E731
    with pytest.raises(records.NotRecorded) as raised:
        paired.measure_pair("mlp", 16, CONFIGS, stops, out, tmp_path)
    kept = raised.value.args[0].split("the record is kept in ")[1].split(" (cat ")[0]
    (record,) = records.load(kept)
    assert record["workload"]["kind"] == "paired" and record["status"] == "error"
    assert record["message"].startswith("jax side stopped: exit code 3")
    Path(kept).unlink()


# This machine as the bench names a CPU figure: by its CPU, then (records made before
# the CPU was recorded, as these tests') by its host.
HERE = bench_cells.machines_here("laptop")


def test_the_default_pair_is_the_bench_tables_own():
    bench = [
        _under(_bench("j1", 4000.0, loop="step"), "retain", "2026-01-03"),
        _under(_bench("j2", 4500.0, loop="device"), "system", "2026-01-03"),
        _under(_bench("j3", 9000.0, loop="device", precision="bf16"), "retain", "2026-01-03"),
        _under(_bench("p1", 2000.0, framework="keras", mode="graph"), "system", "2026-01-03"),
        _under(_bench("p2", 2500.0, framework="torch", mode="eager"), "retain", "2026-01-03"),
    ]
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
        "env": {}, "paired": {"rounds": [], "jax": {}, "peer": {}},
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


def test_the_paired_table_pools_the_latest_sessions_passes_and_names_an_earlier_commit():
    old_side = {"jax": "jax cpu step f32", "commit": "0123456789abcdef"}  # another best then
    now = {"commit": "fedcba9876543210"}
    rows = [
        _paired("older", "s0", 1, [2.0] * 7, "2025-12-01T00:00:00"),
        _paired("old", "s1", 1, [3.0] * 7, "2026-01-01T00:00:00", **old_side),
        _paired("same", "s1b", 1, [4.0] * 7, "2026-01-01T12:00:00", **now),  # same code
        _paired("a", "s2", 1, [0.5, 0.6, 0.7], "2026-01-02T00:00:00", **now),
        _paired("b", "s2", 2, [0.9, 1.0, 1.1], "2026-01-02T00:10:00", **now),
        _paired("c", "s2", 3, [], "2026-01-02T00:20:00", status="error", **now),
    ]
    table = report_paired.paired_table(rows)
    assert len(table.splitlines()) == 3  # one row per cell, whichever sides were paired
    cells = [c.strip() for c in table.splitlines()[2].split("|")[1:-1]]
    assert cells[3:5] == ["jax cpu device f32 (retain)", "keras graph (system)"]
    assert cells[5] == "80 [55-105]"  # the six rounds of s2, not the 3.0s of s1
    assert cells[6] == "100 [100-100]"
    assert cells[7] == "0.80 [0.55-1.05]"
    assert cells[8:] == ["0.60, 1.00 (1 failed)", "6", "fedcba9", "3.00 (0123456)"]


@pytest.mark.parametrize(
    "ratios,verdict",
    [([1.1, 1.2, 1.3, 1.2], " (faster)"), ([0.8, 0.9, 0.85], " (slower)"), ([0.9, 1.2], "")],
)
def test_jax_against_jax_has_its_own_table_and_verdict(ratios, verdict):
    step = "jax cpu step f32"
    rows = [_paired("a", "s", 1, ratios, "2026-01-02T00:00:00", peer=step)]
    assert report_paired.paired_table(rows) == ""
    table = report_paired.paired_table(rows, jax_versus_jax=True)
    header, _, row = table.splitlines()
    assert "first / second, per round" in header and "goal" not in table
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[3:5] == ["jax cpu device f32 (retain)", f"{step} (system)"]
    assert cells[7].endswith("]" + verdict)


def test_jax_pairs_at_a_glance_one_row_per_cell_one_column_per_pair():
    step, device = "jax cpu step f32", "jax cpu device f32"
    rows = [
        _paired("a", "s1", 1, [1.1, 1.2, 1.3], "2026-01-02T00:00:00", peer=step),
        _paired("b", "s2", 1, [0.7, 0.8, 0.9], "2026-01-03T00:00:00", peer=device),
        _paired("c", "s3", 1, [], "2026-01-04T00:00:00", status="error", peer=step),
        _paired("d", "s4", 1, [3.0], "2026-01-05T00:00:00"),  # a peer framework: not here
    ]
    header, _, row = report_paired.jax_pairs_matrix(rows).splitlines()
    columns = [c.strip() for c in header.split("|")[1:-1]]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert columns == [
        "machine", "model", "batch", "device (retain) / device (system)",
        "device (retain) / step (system)",
    ]  # fmt: skip
    assert cells == [
        "laptop, CPU model not recorded",
        "mnist_cnn",
        "128",
        "0.80 [0.72-0.88] (slower)",
        "error",
    ]
    assert report_paired.jax_pairs_matrix(rows[3:]) == ""


def test_the_bench_table_takes_its_verdict_from_the_pairing_where_there_is_one():
    # Unpaired, days apart, JAX looks 1.6x the peer; in turns it was 0.8x.
    rows = [_bench("j", 4800.0), _bench("p", 3000.0, framework="keras", mode="graph")]
    assert "| 1.60 (goal met) |" in studies.bench.bench_table(rows)
    rows.append(_paired("a", "s", 1, [0.7, 0.8, 0.9], "2026-01-02T00:00:00"))
    table = studies.bench.bench_table(rows)
    assert "| 1.60 (paired 0.80) |" in table and "goal met" not in table
    rows.append(_paired("b", "t", 1, [1.5, 1.6, 1.7], "2026-01-03T00:00:00"))
    assert "| 1.60 (paired 1.60 goal met) |" in studies.bench.bench_table(rows)


def test_the_matrix_names_the_commits_its_sessions_measured():
    step, device = "jax cpu step f32", "jax cpu device f32"
    rows = [
        _paired("a", "s1", 1, [1.1], "2026-01-02T00:00:00", peer=step, commit="aaaaaaa111"),
        _paired("b", "s2", 1, [0.9], "2026-01-03T00:00:00", peer=device, commit="bbbbbbb222"),
        _paired("c", "s3", 1, [1.0], "2026-01-04T00:00:00", peer=step, commit="ccccccc333"),
    ]  # s3 replaces s1: the same pair measured again
    part = report_paired.paired_part(rows, detail=False)
    assert "measured commits bbbbbbb (1 pair), ccccccc (1 pair)." in part
    assert "aaaaaaa" not in part and "results/REPORT.md" in part


@pytest.mark.slow
def test_the_bench_verdict_is_the_same_from_any_folder_with_the_installed_packages(tmp_path):
    """Run from outside the repository, as `pip install -e .` installs it: jaxcnn and
    experiments importable, benchmarks/ not. The pairing still decides the verdict."""
    rows = [
        _bench("j", 4800.0),
        _bench("p", 3000.0, framework="keras", mode="graph"),
        _paired("a", "s", 1, [0.7, 0.8, 0.9], "2026-01-02T00:00:00"),
    ]
    path = tmp_path / "records.jsonl"
    for row in rows:
        records.append(path, row)
    installed = tmp_path / "installed"  # the packages pyproject.toml installs, and no more
    installed.mkdir()
    root = Path(__file__).resolve().parent.parent
    for package in ("jaxcnn", "experiments"):
        (installed / package).symlink_to(root / package)
    probe = (
        "import sys\nfrom experiments import records\nfrom experiments.studies import bench\n"
        f"rows = records.load({str(path)!r})\n"
        "print(bench.bench_table(rows)); print(bench.verdicts(rows))\n"
        "print('benchmarks imported:', 'benchmarks' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "| 1.60 (paired 0.80) |" in done.stdout
    assert "the goal is met in 0 of 1 cells (1 of them measured in turns)" in done.stdout
    assert "benchmarks imported: False" in done.stdout


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
    core = "import jaxcnn, experiments.measure, experiments.records, experiments.report"
    core += ", experiments.run, experiments.studies, experiments.studies.bench"
    assert _benchmarks_after(core) == []
    asked = "import benchmarks.turns"  # the positive control: the probe sees one
    assert _benchmarks_after(asked) == ["benchmarks", "benchmarks.turns"]


def test_the_verdict_per_cpu_reads_the_latest_pairing_and_its_spread():
    # The bench cell mnist_cnn at 128 on laptop: unpaired 1.50 (goal met)...
    bench = [_bench("j", 4500.0), _bench("p", 3000.0, framework="keras", mode="graph")]
    verdict = studies.bench.verdicts
    assert "met in 1 of 1 cells (0 of them measured in turns)." in verdict(bench)
    # ...in turns below the goal: the pairing is the verdict.
    short = _paired("a", "s1", 1, [0.8, 0.9, 0.95], "2026-01-02T00:00:00")
    assert "met in 0 of 1 cells (1 of them measured in turns); short of it: mnist_cnn at " in (
        verdict([*bench, short])
    )
    # A later session met the goal by its median, a tenth of its rounds below 1: said so.
    close = _paired("b", "s2", 1, [0.8, 1.05, 1.1, 1.2, 1.3], "2026-01-03T00:00:00")
    text = verdict([*bench, short, close])
    assert "met in 1 of 1 cells" in text and "a tenth of its rounds or more below 1: " in text
    firm = _paired("c", "s3", 1, [1.1, 1.2, 1.3], "2026-01-04T00:00:00")
    assert verdict([*bench, short, close, firm]).endswith(
        "met in 1 of 1 cells (1 of them measured in turns)."
    )
