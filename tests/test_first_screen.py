"""REPORT.md's first screen: one row per seed question in its first 60 lines, each
labelled measured, compiled or predicted (with its band, or unvalidated), a row without
records naming its command; and the one CPU figure per workload every ratio divides by."""

from conftest import complete_record, report_text
from test_report import CPU, _record
from test_report_targets import GIB, _compiled, _priced_by_one_memory_kernel

from experiments import report
from experiments.studies import REGISTRY, devices
from experiments.studies._common import cpu_figure

T4 = {
    "name": "gpu-t4",
    "platform": "gpu",
    "chip": "T4",
    "chips": 1,
    "topology": None,
    "memory_per_chip_bytes": 16 * GIB,
    "bandwidth_bytes_per_s": 320e9,
    "peak_tflops": {"fp32": 8.1},
}
# The seeds' questions the first screen answers, by the seeds that ask them.
SEED_QUESTIONS = {
    "000": ("run out of GPU memory", "MX150 and T4 than the CPU", "same accuracy"),
    "001, 003": ("faster is a GPU than the CPU for the MNIST CNN",),
    "001": ("seed's K80",),
    "001, 004": ("data parallelism scale",),
    "002": ("trainable parameters does a GPU beat the CPU", "TPU or GPU"),
    "003, 004": ("peak FLOP/s",),
    "004": ("`jax.vmap`",),
}


def _cpu_run(run_id, median, utc, study="devices", loop="step", formulation="xla"):
    """mnist_cnn, batch 128, f32 on this CPU, timed at `utc`."""
    r = _record(run_id, CPU, "mnist_cnn", 128, median=median)
    r["workload"].update(study=study, dataset="mnist", epochs=5 if study == "devices" else 0)
    r["env"]["utc_time"] = utc
    r["loop"] = loop
    r["formulation"] = {"name": formulation, "conv": formulation, "pool": formulation}
    return complete_record(r)


def _rows(text: str) -> list[list[str]]:
    """The first screen's table rows, as cells."""
    lines = text.splitlines()
    start = lines.index("## The seeds' questions, answered") + 4  # title, blank, header, rule
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def _row(text: str, question: str) -> list[str]:
    (row,) = [r for r in _rows(text) if question in r[1]]
    return row


def test_every_seed_question_has_one_row_in_the_first_60_lines(tmp_path):
    path, _ = report.write_report([_cpu_run("a", 0.085, "2026-01-01T00:00:00+00:00")], tmp_path)
    text = path.read_text()
    first = "\n".join(text.splitlines()[:60])
    rows = _rows(first)
    expected = [(seeds, q) for seeds, qs in SEED_QUESTIONS.items() for q in qs]
    assert len(rows) == len(expected)
    for seeds, question in expected:
        assert [r[0] for r in rows if question in r[1]] == [seeds], question
    # Nothing but the title and one line on the records stands before the table.
    lines = text.splitlines()
    assert lines.index("## The seeds' questions, answered") == 4
    assert lines[0].startswith("# ") and "record(s)" in lines[2]
    # Each row links its details page.
    assert all(r[4].startswith("[") and "](report/" in r[4] for r in rows)
    # The rule and the prediction's bands follow the table, said once.
    rule = "One figure per quantity:"
    assert text.count(rule) == 1 and text.index(rule) > text.index(rows[-1][1])


def test_a_row_without_records_names_the_command_that_measures_it(tmp_path):
    trained = _cpu_run("a", 0.085, "2026-01-01T00:00:00+00:00", study="accuracy")
    trained.update(test_accuracy=0.9883)  # after the 2 epochs of its history
    text = report.write_report([trained], tmp_path)[0].read_text()
    ensemble = _row(text, "`jax.vmap`")
    assert "`python -m experiments.run --study=ensemble" in ensemble[2]
    assert ensemble[3] == "-"
    # The control: the accuracy question has a record here, and answers with it.
    accuracy = _row(text, "same accuracy")
    assert "--study=accuracy" in accuracy[2]  # an accelerator run is still to be made
    assert "0.9883 on cpu after 2 epochs" in accuracy[2]
    assert accuracy[3].startswith("measured on cpu")


def test_a_predicted_row_says_predicted_with_its_band_or_unvalidated(tmp_path, monkeypatch):
    from experiments import predictions
    from jaxcnn import prediction as prediction_lib

    cpu = _cpu_run("a", 0.08, "2026-01-01T00:00:00+00:00")
    target = _compiled(T4, "mnist_cnn", 128, "ok", 1.0, step=2e-3)
    _priced_by_one_memory_kernel(monkeypatch, "gpu", [(target, 2e-3)])
    row = _row(report.first_screen([cpu, target]), "faster is a GPU")
    assert "gpu-t4 predicted at 64,000 images/s" in row[2]
    assert row[3].startswith("gpu-t4 predicted, unvalidated (no small program measured on GPUs)")
    assert "gpu-t4 measured" not in row[3] and "measured on gpu" not in row[3]
    # With a band for the small programs on GPUs, the row carries it.
    family = dict(prediction_lib.constants()["families"]["gpu"])
    small = {"median": 0.1, "worst": 0.25, "observations": 3}
    family["error"] = {
        "split": "chip",
        "chips": [],
        "splits": {"chip": {"regimes": {"small": small}}},
    }
    table = {"version": "t1", "families": {"gpu": family}}
    monkeypatch.setattr(prediction_lib, "constants", lambda path=None: table)
    monkeypatch.setattr(predictions, "constants_table", lambda: table)
    row = _row(report.first_screen([cpu, target]), "faster is a GPU")
    assert row[3].startswith(
        "gpu-t4 predicted (per-kernel model; leave one chip out: error median 10%, worst 25% "
        "over 3)"
    )


def test_one_cpu_figure_per_workload_is_its_most_recent_run_and_ratios_divide_by_it(
    tmp_path, monkeypatch
):
    runs = [
        _cpu_run("old", 0.02, "2026-01-01T00:00:00+00:00"),
        _cpu_run("mid", 0.04, "2026-01-02T00:00:00+00:00", study="bench"),
        _cpu_run("new", 0.08, "2026-01-03T00:00:00+00:00", study="accuracy"),
    ]
    # The rule picks the most recent run: not the fastest (0.02), not the median (0.04).
    for r in runs:
        assert cpu_figure(runs, r)["step_time_s"]["median"] == 0.08
    # Another loop is another workload: its own figure, and the CPU at its best.
    device_loop = _cpu_run("dev", 0.016, "2026-01-01T12:00:00+00:00", "bench", loop="device")
    assert cpu_figure([*runs, device_loop], device_loop) is device_loop
    target = _compiled(T4, "mnist_cnn", 128, "ok", 1.0, step=2e-3)
    _priced_by_one_memory_kernel(monkeypatch, "gpu", [(target, 2e-3)])
    records = [*runs, device_loop, target]
    # 64,000 images/s predicted: over 0.08 s/step like for like, 0.016 at the CPU's best.
    v = devices.versus_cpu(records, runs[0], "gpu-t4")
    assert (round(v["like"], 6), round(v["best"], 6)) == (40.0, 8.0)
    answer, _ = devices.devices_answer(records, tmp_path)
    assert "gpu-t4 64,000 (40x like for like, 8x the CPU at its best)" in answer
    # The devices run's row shows the rule's figure and its date, not its own 20 ms.
    assert "| 80 ms [72 ms-96 ms] (2026-01-03) |" in answer
    # The details page lists every run of the workload with its date, the shown one marked.
    path, _ = report.write_report(records, tmp_path)
    pages = report_text(path)
    for utc, step in (("2026-01-01 00:00", "20 ms"), ("2026-01-02 00:00", "40 ms")):
        assert f"| {utc} |" in pages and f"| {step} [" in pages
    shown = (
        "| timed steps only, step loop, xla | 2026-01-03 00:00 | accuracy | 80 ms [72 ms-96 ms] |"
    )
    assert f"{shown} shown (most recent) |" in pages


def test_every_study_that_answers_a_seed_question_has_a_summary():
    with_summary = {name for name, study in REGISTRY.items() if study.summary}
    assert with_summary == {
        "batch",
        "accuracy",
        "devices",
        "scaling",
        "crossover",
        "matmul",
        "ensemble",
        "targets",
    }
