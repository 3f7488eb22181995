"""REPORT.md as the answers page: every study's question in the seeds' order, each
linking its details page, a title that claims nothing the records are not, and the
same bytes from the same records."""

from conftest import complete_record

from experiments import host_cpu, labels, records, report
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
        "params": {"trainable": 100, "non_trainable": 0},
        "compile_time_s": {"train": 1.0, "eval": 0.5},
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
    row = "| mnist_cnn, mnist, batch 128 | cpu | xla, step loop | 85 ms [80 ms-120 ms] (2026-01-01)"
    assert f"{row} | 1,505 | 0.9883 after " in text


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
    # Both on one host: the older records are said apart, not listed as a CPU.
    text = report.write_report([_record("a"), named], tmp_path / "both")[0].read_text()
    assert "`laptop`: AMD EPYC 9B14 (AVX2, AVX-512) (and older records that name no CPU)." in text


def test_the_same_records_give_the_same_pages_byte_for_byte(tmp_path):
    rs = [_record("a"), _record("b", device={**CPU, "host": "other"})]
    first, second = tmp_path / "one", tmp_path / "two"
    report.write_report(rs, first)
    report.write_report(rs, second)
    pages = sorted(p.relative_to(first) for p in first.rglob("*.md"))
    assert len(pages) > 10
    for page in pages:
        assert (first / page).read_bytes() == (second / page).read_bytes(), page


def _smoke(run_id):
    record = _record(run_id, env={"utc_time": "2026-01-02T00:00:00+00:00", "smoke": True})
    record["workload"].update(dataset="digits", batch_size=32)
    record["test_accuracy"] = 0.1504
    return record


def test_smoke_records_are_left_out_unless_asked_for(tmp_path):
    folder = tmp_path / "runs"
    for r in (_record("real"), _smoke("smoke")):
        records.append(folder / "records.jsonl", r)
    assert report.main([str(folder), "--out", str(tmp_path / "a")]) == 0
    text = (tmp_path / "a" / "REPORT.md").read_text()
    assert "0.9883" in text and "0.1504" not in text  # positive control beside the absence
    assert report.main([str(folder), "--out", str(tmp_path / "b"), "--include-smoke"]) == 0
    assert "0.1504" in (tmp_path / "b" / "REPORT.md").read_text()


def test_a_report_of_smoke_records_only_says_so_in_its_first_line(tmp_path):
    path, _ = report.write_report(report.without_smoke([_smoke("s")]), tmp_path)
    first = path.read_text().splitlines()[0]
    assert first == "# jaxcnn: smoke records only, which answer none of the questions"


def test_smoke_runs_mark_their_records_and_keep_their_config_key(monkeypatch):
    workload = {"model": "mnist_cnn", "batch_size": 32}
    plain = records.new_record(workload, CPU, records.environment())
    monkeypatch.setenv(records.SMOKE_ENV, "1")
    smoke = records.new_record(workload, CPU, records.environment())
    assert smoke["env"]["smoke"] is True and "smoke" not in plain["env"]
    assert smoke["config_key"] == plain["config_key"]


def test_records_name_the_cpu_and_its_vector_extensions():
    cpuinfo = (
        "processor\t: 0\nmodel name\t: AMD EPYC 9B14\n"
        "flags\t\t: fpu sse2 avx avx2 avx512f avx512bw\n\nprocessor\t: 1\n"
    )
    assert host_cpu.describe(cpuinfo) == {
        "model": "AMD EPYC 9B14",
        "extensions": ["AVX2", "AVX-512"],
    }
    amx = cpuinfo.replace("avx512bw", "avx512bw amx_tile")
    assert host_cpu.describe(amx)["extensions"] == ["AVX2", "AVX-512", "AMX"]
    # This machine's own record names a CPU model.
    assert records.environment()["cpu"]["model"]


def test_an_override_that_restates_the_default_names_the_same_model():
    import dataclasses

    from jaxcnn import models

    for model, defaults in labels.DEFAULTS.items():
        fields = {f.name: f.default for f in dataclasses.fields(type(models.get(model)))}
        assert {k: fields[k] for k in defaults} == defaults
    plain = _record("p")
    plain["workload"].update(model="mlp")
    restated = _record("r")
    restated["workload"].update(model="mlp", model_overrides={"width": 512})
    wider = _record("w")
    wider["workload"].update(model="mlp", model_overrides={"width": 4096})
    assert labels.model_label(restated) == labels.model_label(plain) == "mlp"
    assert labels.model_label(wider) == "mlp width=4096"


def _captured(monkeypatch, module):
    """The figures a section saves, kept open to look at."""
    figures = []

    def keep(fig, path, **_):
        figures.append(fig)
        fig.savefig(path)
        return path

    monkeypatch.setattr(module, "save", keep)
    return figures


def _generic(run_id, model, params, batch=128, mfu=None):
    r = _record(run_id, mfu=mfu or {"vs_vendor": None, "vs_measured": 0.1})
    r["workload"].update(model=model, study=None, batch_size=batch)
    r["params"] = {"trainable": params, "non_trainable": 0}
    return r


def test_plots_draw_what_their_legends_and_axes_say(monkeypatch, tmp_path):
    from experiments.studies import default, devices

    figures = _captured(monkeypatch, default)
    rs = [_generic("a", "mnist_cnn", 225_034), _generic("b", "lenet5_keras", 82_000)]
    default.step_time_vs_params(rs, tmp_path)
    (ax,) = figures[-1].axes
    # Two models: two marked, named points, not one line joining them.
    assert sorted(t.get_text() for t in ax.texts) == ["lenet5_keras", "mnist_cnn"]
    assert all(line.get_linestyle() == "None" for line in ax.lines if len(line.get_xdata()) > 1)
    default.mfu_per_device(rs, tmp_path)
    (ax,) = figures[-1].axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["vs measured matmul"]
    figures = _captured(monkeypatch, devices)
    devices.devices_study([_record("d")], tmp_path)
    assert figures[-1].axes[0].get_xscale() == "linear"  # bars: lengths compare


def test_readme_rows_name_formulation_and_loop_where_they_would_look_alike():
    xla = _record("x")
    cpu = _record("c", formulation={"name": "cpu"}, loop="step")
    block = report.headline([xla, cpu], "results/REPORT.md")
    rows = [line for line in block.splitlines() if line.startswith("| cpu |")]
    assert len(rows) == 2
    assert "| mnist_cnn | xla formulation, step loop |" in rows[0] + rows[1]
    assert "| mnist_cnn | cpu formulation, step loop |" in rows[0] + rows[1]
    assert "What this machine is: `laptop`: CPU (model not recorded)." in block


def test_the_report_counts_the_smoke_records_it_left_out_and_says_how_to_include_them(
    tmp_path, capsys
):
    folder = tmp_path / "runs"
    real = _record("real")
    real["workload"]["study"] = "batch"
    for r in (real, _smoke("s1"), _smoke("s2")):
        records.append(folder / "records.jsonl", r)
    assert report.main([str(folder), "--out", str(tmp_path / "a")]) == 0
    printed = capsys.readouterr().out
    assert "(1 records, " in printed
    assert printed.endswith(" plots; 2 --smoke record(s) left out: --include-smoke reports them)\n")
    text = (tmp_path / "a" / "REPORT.md").read_text()
    devices = text.split(f"## {REGISTRY['devices'].question}")[1].split("\n## ")[0]
    assert devices.strip().startswith(
        "No records yet: `python -m experiments.run --study=devices` writes them. "
        "(2 --smoke record(s) left out: --include-smoke reports them.)"
    )
    # Positive control: with them included, nothing is said to be left out.
    assert report.main([str(folder), "--out", str(tmp_path / "b"), "--include-smoke"]) == 0
    assert "(3 records, " in capsys.readouterr().out
    assert "left out" not in (tmp_path / "b" / "REPORT.md").read_text()
