"""REPORT.md as the answers page: every study's question in the seeds' order, each
linking its details page, a title that claims nothing the records are not, and the
same bytes from the same records."""

from conftest import complete_record

from experiments import records, report
from experiments.studies import ANSWER_ORDER, REGISTRY

CPU = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1, "host": "laptop"}


def _record(run_id, **extra):
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": "ok",
        "message": None,
        "workload": {
            "model": "mnist_cnn",
            "model_overrides": {},
            "dataset": "mnist",
            "batch_size": 128,
            "strategy": "single",
            "precision": "f32",
            "study": "devices",
        },
        "device": CPU,
        "env": {"jax": "0.10.2", "utc_time": "2026-01-01T00:00:00+00:00"},
        "step_time_s": {"median": 0.085, "p10": 0.08, "p90": 0.12, "n": 20},
        "images_per_s": 1505.0,
        "test_accuracy": 0.9883,
    }
    record.update(extra)
    return complete_record(record)


def test_answers_page_asks_every_question_in_order_and_links_its_details(tmp_path):
    path, _ = report.write_report([_record("a")], tmp_path)
    text = path.read_text()
    questions = [REGISTRY[name].question for name in ANSWER_ORDER]
    assert all(questions) and len(set(questions)) == len(questions)
    positions = [text.index(f"## {q}\n") for q in questions]
    assert positions == sorted(positions)
    for name in ANSWER_ORDER:
        assert f"[report/{name}.md](report/{name}.md)" in text
        assert (tmp_path / "report" / f"{name}.md").is_file()
    assert "| mnist_cnn, mnist, batch 128 | cpu | 85 ms [80 ms-120 ms] | 1,505 |" in text


def test_title_claims_no_measurement_for_compile_only_records(tmp_path):
    compiled = _record("c", compiled_not_run=True)
    compiled["workload"].update(kind="compile", study="targets")
    text = report.write_report([_record("a"), compiled], tmp_path)[0].read_text()
    first = text.splitlines()[0]
    assert "measured" not in first
    assert "1 measured on devices at hand (cpu), 1 compiled for devices not at hand" in text


def test_old_cpu_records_are_grouped_as_model_not_recorded(tmp_path):
    text = report.write_report([_record("a")], tmp_path)[0].read_text()
    assert "What this machine is: `laptop`: CPU (model not recorded)." in text
    named = _record(
        "b",
        env={"utc_time": "x", "cpu": {"model": "AMD EPYC 9B14", "extensions": ["AVX2", "AVX-512"]}},
    )
    text = report.write_report([named], tmp_path / "n")[0].read_text()
    assert "`laptop`: AMD EPYC 9B14 (AVX2, AVX-512)." in text


def test_the_same_records_give_the_same_pages_byte_for_byte(tmp_path):
    rs = [_record("a"), _record("b", device={**CPU, "host": "other"})]
    first, second = tmp_path / "one", tmp_path / "two"
    report.write_report(rs, first)
    report.write_report(rs, second)
    pages = sorted(p.relative_to(first) for p in first.rglob("*.md"))
    assert len(pages) > 10
    for page in pages:
        assert (first / page).read_bytes() == (second / page).read_bytes(), page
