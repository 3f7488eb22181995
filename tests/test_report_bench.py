"""The bench section: JAX configurations and peers side by side from records with known
numbers, the ratio to the fastest peer and the f32 matmul bound computed from them, and
PERFORMANCE.md's generated block rewritten in place."""

import pytest
from conftest import complete_record, report_text

from experiments import records, report, studies

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


@pytest.fixture
def bench():
    return [
        _bench("a", 1000.0, formulation="xla", loop="step"),
        _bench("b", 4500.0),
        _bench("c", 9000.0, precision="bf16"),  # bf16 is not the f32 goal's figure
        _bench("d", 3000.0, framework="torch", mode="eager"),
        _bench("e", 2000.0, framework="keras", mode="graph"),
        _bench("f", 0.0, framework="keras", mode="xla", status="error"),
    ]


def test_bench_table_sets_configurations_beside_peers_and_the_bound(bench):
    table = studies.bench.bench_table(bench)
    header, _, row = table.splitlines()
    for column in ("jax cpu device f32", "jax xla step f32", "torch eager", "keras graph"):
        assert column in header
    assert "4,500 [4,050-4,950]" in row and "3,000 [2,700-3,300]" in row
    assert "| error |" in row  # the failed peer shows as what it is
    assert "| cpu device f32 | torch eager | 1.50 (goal met) |" in row
    *_, bound, need = [c.strip() for c in row.strip(" |").split("|")]
    assert bound == "100,000"  # 0.2 TFLOP/s / 2 MFLOP per image
    # the goal's share of the bound
    assert float(need) == pytest.approx(studies.bench.GOAL * 3000 / 100_000, abs=0.005)


def test_below_the_goal_there_is_no_claim(bench):
    bench[1] = _bench("b", 2900.0)
    row = studies.bench.bench_table(bench).splitlines()[2]
    assert "| 0.97 |" in row and "goal met" not in row


def test_performance_notes_block_is_rewritten_in_place(bench, tmp_path, capsys):
    notes = tmp_path / "PERFORMANCE.md"
    notes.write_text("# notes\nbefore\n<!-- bench:start -->\nold\n<!-- bench:end -->\nafter\n")
    folder = tmp_path / "results"
    folder.mkdir()
    for record in bench:
        records.append(folder / records.RECORDS_FILE, record)
    assert report.main([str(folder), "--performance", str(notes)]) == 0
    text = notes.read_text()
    assert text.startswith("# notes\nbefore\n<!-- bench:start -->\n") and "old" not in text
    assert text.endswith("<!-- bench:end -->\nafter\n")
    assert "torch eager" in text and "at commit(s) abcdef1" in text
    assert "![bench](results/study_bench.png)" in text
    assert (folder / "study_bench.png").read_bytes().startswith(b"\x89PNG")
    assert "## Study: bench" in report_text(folder / "REPORT.md")


def test_performance_file_without_markers_is_exit_2(bench, tmp_path, capsys):
    notes = tmp_path / "PERFORMANCE.md"
    notes.write_text("no markers\n")
    records.append(tmp_path / records.RECORDS_FILE, bench[0])
    assert report.main([str(tmp_path), "--performance", str(notes)]) == 2
    assert "has no generated block" in capsys.readouterr().err
    assert notes.read_text() == "no markers\n"


def _under(record, policy, utc_time, faults=None):
    record["env"] = {**record["env"], "utc_time": utc_time}
    if policy is not None:
        record["env"]["host_memory"] = {"policy": policy, "applied": policy == "retain"}
    if faults is not None:
        record["throughput"]["minor_faults_per_step"] = faults
    return record


def test_the_host_memory_table_sets_each_policys_latest_side_by_side():
    rows = [
        _under(_bench("s0", 900.0, loop="step"), None, "2026-01-01T00:00:00"),  # no policy: out
        _under(_bench("s1", 1000.0, loop="step"), "system", "2026-01-01T00:00:00", faults=9e4),
        _under(_bench("s2", 1500.0, loop="step"), "system", "2026-01-02T00:00:00", faults=7e4),
        _under(_bench("r1", 3000.0, loop="step"), "retain", "2026-01-03T00:00:00", faults=2.0),
        _under(_bench("p0", 800.0, framework="torch", mode="eager"), None, "2026-01-01"),
        _under(_bench("p1", 1200.0, framework="torch", mode="eager"), "retain", "2026-01-03"),
        _under(_bench("x1", 4500.0), "retain", "2026-01-03T00:00:00"),  # no system twin
        _under(_bench("b1", 1.0, loop="step", precision="bf16"), "system", "2026-01-01"),
        _under(_bench("b2", 9.0, loop="step", precision="bf16"), "retain", "2026-01-03"),
    ]
    table = studies.bench.host_memory_table(rows)
    header, _, row = table.splitlines()
    assert header.split("|")[4:] == [" jax cpu step f32 ", ""]  # no bf16, no unpaired peer
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells == [
        "laptop, CPU model not recorded",
        "mnist_cnn",
        "128",
        "2.00 (70,000 / 2)",
    ]  # 3000 / 1500
    assert studies.bench.host_memory_table(rows[:3]) == ""  # no retain record: no table


def test_each_cell_is_its_configurations_faster_policy_marked_when_not_the_default():
    rows = [
        _under(_bench("r", 4000.0, loop="step"), "retain", "2026-01-03T00:00:00"),
        _under(_bench("s", 3000.0, loop="step"), "system", "2026-01-04T00:00:00"),  # later
        _under(_bench("pr", 2000.0, framework="keras", mode="graph"), "retain", "2026-01-03"),
        _under(_bench("ps", 2500.0, framework="keras", mode="graph"), "system", "2026-01-04"),
    ]
    older = _under(_bench("o", 9000.0, loop="step"), None, "2026-01-01T00:00:00")  # unnamed
    row = studies.bench.bench_table([older, *rows]).splitlines()[2]
    cells = [c.strip() for c in row.split("|")[1:-1]]
    assert cells[3:5] == ["4,000 [3,600-4,400]", "2,500 [2,250-2,750] (system)"]
    assert cells[5:8] == ["cpu step f32", "keras graph (system)", "1.60 (goal met)"]


def test_each_models_best_batch_is_its_fastest_jax_figure_over_batches_and_precisions(
    bench, tmp_path
):
    found = [
        *bench,
        _bench("g", 12000.0, batch=512),
        _bench("h", 30000.0, batch=512, framework="torch", mode="eager"),  # peers never
        _bench("i", 11000.0, batch=2048, precision="bf16"),
    ]
    (line,) = studies.bench.best_batches(found)
    assert line == (
        "laptop, CPU model not recorded mnist_cnn: 12,000 [10,800-13,200] images/s at batch 512 "
        "(jax cpu device f32)"
    )
    assert line in studies.bench.bench_study(found, tmp_path)[0]
    assert studies.bench.best_batches([]) == []


def _on(record: dict, model: str | None, extensions: list[str]) -> dict:
    record["env"]["cpu"] = {"model": model, "extensions": extensions}
    return record


def test_one_host_with_two_cpus_is_two_verdicts_each_naming_its_cpu():
    # The same host name, two CPUs: on AVX-512 the peer is fast enough to win.
    zen4 = [
        _on(_bench("a", 4500.0), "AMD EPYC 9B14", ["avx2", "avx512f"]),
        _on(
            _bench("b", 7400.0, framework="keras", mode="graph"),
            "AMD EPYC 9B14",
            ["avx2", "avx512f"],
        ),
    ]
    avx2 = [
        _on(_bench("c", 4000.0), "Intel Xeon", ["avx2"]),
        _on(_bench("d", 2300.0, framework="keras", mode="graph"), "Intel Xeon", ["avx2"]),
    ]
    table = studies.bench.bench_table(zen4 + avx2)
    assert len(table.splitlines()) == 4  # two rows: one per CPU, never one merged cell
    assert "| AMD EPYC 9B14 (avx2, avx512f) |" in table and "| Intel Xeon (avx2) |" in table
    lines = studies.bench.verdicts(zen4 + avx2).splitlines()[2:]
    assert lines == [
        "- AMD EPYC 9B14 (avx2, avx512f): the goal is met in 0 of 1 cells (0 of them measured "
        "in turns); short of it: mnist_cnn at 128 (0.61).",
        "- Intel Xeon (avx2): the goal is met in 1 of 1 cells (0 of them measured in turns).",
    ]
    # Records made before the CPU was recorded keep their own group, so named.
    assert studies.bench.verdicts([]) == ""
    old = [_bench("e", 4500.0), _bench("f", 3000.0, framework="torch", mode="eager")]
    assert "- laptop, CPU model not recorded: the goal is met in 1 of 1" in studies.bench.verdicts(
        old
    )
