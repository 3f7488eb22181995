"""The studies' report sections, on records written here with known numbers: two fake
machines (a CPU laptop and a GPU box), every study, and the README's generated block."""

import math

import matplotlib.image
import pytest
from conftest import complete_record, report_text

from experiments import analysis, records, report, studies

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GIB = 2**30
CPU = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1, "host": "laptop"}
GPU = {
    "platform": "gpu",
    "kind": "NVIDIA H100 80GB HBM3",
    "count": 1,
    "process_count": 1,
    "host": "gpubox",
}


def _record(run_id, device, study, model="mnist_cnn", batch=128, status="ok", median=0.1, **kw):
    """A schema-1 record as the studies runner writes it; `kw` sets workload fields
    (dataset, precision, kind, scaling, ...) or, with a `_` prefix, record fields."""
    extra = {k[1:]: kw.pop(k) for k in list(kw) if k.startswith("_")}
    workload = {
        "model": model,
        "model_overrides": kw.pop("overrides", {}),
        "dataset": "mnist",
        "batch_size": batch,
        "epochs": 2,
        "strategy": "single",
        "precision": "f32",
        "study": study,
        "kind": "train",
        **kw,
    }
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": status,
        "message": None if status == "ok" else f"{status} happened",
        "workload": workload,
        "device": device,
        "env": {"jax": "0.10.2", "host": device["host"], "utc_time": "2025-01-01T00:00:00"},
    }
    if status == "ok":
        synthetic = workload["dataset"] == "synthetic" or workload["epochs"] == 0
        record.update(
            params={"trainable": 100_000, "non_trainable": 0},
            compile_time_s={"train": 1.0, "eval": 0.5},
            step_time_s={"median": median, "p10": median * 0.9, "p90": median * 1.2, "n": 20},
            images_per_s=batch / median,
            memory={"total_bytes": 1000, "peak_bytes_in_use": None},
            history=[]
            if workload["epochs"] == 0
            else [
                {"epoch": 1, "train_loss": 0.5, "train_accuracy": 0.9, "train_time_s": 10.0}
                | {"test_loss": 0.3, "test_accuracy": 0.95},
                {"epoch": 2, "train_loss": 0.2, "train_accuracy": 0.97, "train_time_s": 12.0}
                | {"test_loss": 0.1, "test_accuracy": 0.975},
            ],
            test_accuracy=None if synthetic else 0.975,
            test_loss=None if synthetic else 0.1,
        )
    record.update(extra)
    return complete_record(record)


def _params(width):
    """Trainable parameters of the 784-n-n-10 MLP."""
    return 784 * width + width + width * width + width + width * 10 + 10


WIDTHS = (32, 128, 512, 2048)
CPU_MS = (1.0, 2.0, 4.0, 8.0)
GPU_MS = (3.0, 3.0, 3.0, 3.0)


def study_records():
    rs = []
    # devices: mnist_cnn on both machines; the CPU 20x slower per step, 10 s vs 10/12 s epochs
    rs.append(_record("d-cpu", CPU, "devices", median=0.2))
    rs.append(_record("d-gpu", GPU, "devices", median=0.01))
    # crossover: timing-only MLP widths on synthetic data
    for width, c, g in zip(WIDTHS, CPU_MS, GPU_MS, strict=True):
        for device, ms in ((CPU, c), (GPU, g)):
            r = _record(
                f"x-{device['platform']}-{width}",
                device,
                "crossover",
                model="mlp",
                overrides={"width": width},
                dataset="synthetic",
                epochs=0,
                median=ms / 1e3,
            )
            r["params"]["trainable"] = _params(width)
            rs.append(r)
    # batch: catsdogs on the GPU at 16 (1.5 GiB), 32 (3 GiB), 64 (13 GiB), 128 OOM
    for batch, total in ((16, 1.5 * GIB), (32, 3 * GIB), (64, 13 * GIB)):
        r = _record(
            f"b-{batch}", GPU, "batch", model="catsdogs_cnn", batch=batch, dataset="synthetic"
        )
        r["memory"] = {"total_bytes": int(total), "peak_bytes_in_use": int(total * 1.1)}
        rs.append(r)
    rs.append(
        _record(
            "b-128",
            GPU,
            "batch",
            model="catsdogs_cnn",
            batch=128,
            status="oom",
            dataset="synthetic",
        )
    )
    # scaling: 1, 2, 4 CPU devices, weak (efficiency 1, 0.9, 0.75) and strong
    for mode, throughputs in (("weak", (100, 180, 300)), ("strong", (100, 150, 200))):
        for n, images in zip((1, 2, 4), throughputs, strict=True):
            batch = 32 * n if mode == "weak" else 128
            device = {**CPU, "count": n}
            rs.append(
                _record(
                    f"s-{mode}-{n}",
                    device,
                    "scaling",
                    batch=batch,
                    strategy="sharded",
                    scaling=mode,
                    median=batch / images,
                )
            )
    # matmul: f32 on the GPU against its tf32 peak, and on the CPU without one
    for device, tflops in ((GPU, (100.0, 400.0)), (CPU, (0.1, 0.2))):
        for n, t in zip((1024, 4096), tflops, strict=True):
            r = _record(
                f"m-{device['platform']}-{n}",
                device,
                "matmul",
                model="matmul",
                batch=n,
                dataset="none",
                kind="matmul",
                median=2 * n**3 / (t * 1e12),
                _images_per_s=None,
                _history=[],
                _test_accuracy=None,
            )
            r["matmul"] = {"n": n, "dtype": "float32", "flops": 2 * n**3, "tflops": t}
            r["params"] = {"trainable": 0, "non_trainable": 0}
            if device is GPU:
                r["mfu"] = {"vendor_peak_tflops": 495.0, "vendor_precision": "tf32"}
            rs.append(r)
    # ensemble: K = 1, 4 vmap vs sequential on the CPU, per-model accuracies
    for k in (1, 4):
        for mode, median in (("vmap", 0.05 * k**0.5), ("sequential", 0.05 * k)):
            r = _record(
                f"e-{k}-{mode}",
                CPU,
                "ensemble",
                batch=64,
                kind="ensemble",
                ensemble_size=k,
                ensemble_mode=mode,
                median=median,
                _images_per_s=k * 64 / median,
            )
            r["ensemble"] = {
                "k": k,
                "mode": mode,
                "seeds": list(range(k)),
                "learning_rates": [1e-3] * k,
                "test_accuracy": [0.97, 0.98, 0.96, 0.99][:k],
            }
            rs.append(r)
    # precision: f32 and bf16, and f32 with highest matmul precision, on the GPU
    for variant, kw, median in (
        ("f32", {}, 0.01),
        ("bf16", {"precision": "bf16"}, 0.006),
        ("hi", {"matmul_precision": "highest"}, 0.02),
    ):
        rs.append(_record(f"p-{variant}", GPU, "precision", median=median, **kw))
    # accuracy: mnist on both machines, fashion_mnist on the CPU, and a synthetic run
    rs.append(_record("a-cpu", CPU, "accuracy"))
    r = _record("a-gpu", GPU, "accuracy")
    r["test_accuracy"], r["history"][-1]["test_accuracy"] = 0.97, 0.97
    rs.append(r)
    rs.append(_record("a-fashion", CPU, "accuracy", dataset="fashion_mnist"))
    rs.append(_record("a-synthetic", CPU, "accuracy", dataset="synthetic"))
    return rs


# --- Pure computations on known numbers ------------------------------------------------


def test_crossover_interpolates_in_log_log():
    params = (1e3, 1e4, 1e5, 1e6)
    cpu = list(zip(params, (1e-3, 2e-3, 4e-3, 8e-3), strict=True))
    gpu = list(zip(params, (3e-3,) * 4, strict=True))
    # CPU time doubles per decade: it reaches 3 ms at 10^(4 + log2 1.5) parameters.
    expected = 10 ** (4 + math.log2(1.5))
    assert analysis.crossover_point(cpu, gpu) == pytest.approx(expected, rel=1e-9)
    assert analysis.faster_at_ends(cpu, gpu) == ("A", "B")
    # A crossing exactly at a measured size is that size.
    assert analysis.crossover_point(cpu, [(p, 4e-3) for p in params]) == pytest.approx(1e5)


def test_crossover_none_when_one_side_wins_everywhere():
    params = (1e3, 1e4, 1e5)
    slow = [(p, 1.0) for p in params]
    fast = [(p, 0.5) for p in params]
    assert analysis.crossover_point(fast, slow) is None
    assert analysis.faster_at_ends(fast, slow) == ("A", "A")
    assert analysis.crossover_point(slow, fast) is None
    assert analysis.faster_at_ends(slow, fast) == ("B", "B")
    assert analysis.crossover_point(slow, [(7.0, 1.0)]) is None  # no common size
    assert analysis.faster_at_ends(slow, [(7.0, 1.0)]) is None


def test_crossover_is_the_last_one_and_uses_common_sizes_only():
    a = [(1e2, 1.0), (1e3, 1.0), (1e4, 1.0), (1e5, 1.0), (5e5, 1.0)]
    # B: slower, faster, slower again (noise), then faster for good.
    b = [(1e2, 2.0), (1e3, 0.5), (1e4, 2.0), (1e5, 0.5), (2e5, 9.0)]
    # Between 1e4 and 1e5, log(B/A) goes from log 2 to -log 2: halfway in log space.
    assert analysis.crossover_point(a, b) == pytest.approx(10**4.5)


def test_scaling_efficiency_and_spread():
    assert analysis.scaling_efficiency({1: 100.0, 2: 180.0, 4: 300.0}) == {
        1: 1.0,
        2: 0.9,
        4: 0.75,
    }
    assert analysis.scaling_efficiency({2: 180.0}) == {}
    assert analysis.mean_spread([0.9, None, 1.0]) == pytest.approx((0.95, 0.05, 0.9, 1.0))
    assert analysis.mean_spread([None]) is None


def test_readme_block_keeps_the_rest_byte_identical():
    head = "# Title\r\n\r\nintro ü\r\n<!-- results:start -->"
    tail = "<!-- results:end -->\r\n\r\nmore\r\n"
    text = head + "\r\nold table\r\n" + tail
    new = analysis.replace_block(text, "| a |\n|---|\n")
    assert new == head + "\r\n| a |\r\n|---|\r\n" + tail
    assert analysis.replace_block(new, "| a |\n|---|\n") == new  # idempotent
    for broken in ("no markers", "<!-- results:end --> <!-- results:start -->"):
        with pytest.raises(analysis.MissingMarkers):
            analysis.replace_block(broken, "x")


# --- Sections ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    path, pngs = report.write_report(study_records(), out)
    return report_text(path), pngs


def _section(text, title):
    return text.split(f"## {title}")[1].split("\n## ")[0]


def test_every_study_has_a_table_and_a_valid_png(rendered):
    text, pngs = rendered
    names = {p.name for p in pngs}
    for study in (
        "devices",
        "crossover",
        "batch",
        "scaling",
        "matmul",
        "ensemble",
        "precision",
        "accuracy",
    ):
        assert f"study_{study}.png" in names
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        height, width, _ = matplotlib.image.imread(png).shape
        assert height > 100 and width > 100
        assert f"{png.name})" in text  # linked: from REPORT.md, or ../ from a details page
    # Study records stay out of the generic plots, which are for records without a study.
    assert "step_time_vs_params.png" not in names and "curves_per_epoch.png" not in names


def test_devices_section(rendered):
    section = _section(rendered[0], "Study: devices")
    assert "200 ms [180 ms-240 ms]" in section and "10 ms [9 ms-12 ms]" in section
    assert "11 s" in section  # median of the 10 s and 12 s epochs
    # One CPU figure per workload: the accuracy study ran the same workload (mnist_cnn,
    # batch 128, f32, xla, step loop) at 0.1 s/step, later in the records than the devices
    # study's 0.2 s (both dated alike), so both ratios divide by 0.1 s; per epoch: the
    # devices run's own history.
    assert "| 10.0x | 10.0x (jax xla step f32) | 1.0x |" in section
    assert "20.0x" not in section
    assert "0.9750" in section


def test_crossover_section(rendered):
    section = _section(rendered[0], "Study: crossover")
    # The CPU's step takes 2 ms at width 128 and 4 ms at 512, the GPU's 3 ms at both:
    # log(t_gpu / t_cpu) goes from log 1.5 to log 0.75, so in log-log space the
    # crossing lies log2(1.5) of the way from 128's parameter count to 512's.
    assert (CPU_MS[1:3], GPU_MS[1:3], WIDTHS[1:3]) == ((2.0, 4.0), (3.0, 3.0), (128, 512))
    expected = _params(128) * (_params(512) / _params(128)) ** math.log2(1.5)
    assert _params(128) < expected < _params(512)
    assert f"{expected:,.0f}" in section
    assert "cpu / gpu NVIDIA H100 80GB HBM3" in section  # CPU faster small, GPU large
    assert f"{_params(2048):,}" in section
    ratio = f"{CPU_MS[3] / GPU_MS[3]:.1f}x"  # at 2048, over the CPU and its fastest figure
    assert f"| {ratio} | {ratio} (jax xla step f32) |" in section
    # A side may be predicted: the intro calls neither side measured unless it was.
    assert "both devices measured" not in section
    assert "both sides have a figure for (each side labelled: *measured*" in section


def test_batch_section_judges_no_chip_by_memory_another_compiler_gave(rendered):
    section = _section(rendered[0], "Study: batch size and memory")
    rows = {line.split(" | ")[2]: line for line in section.splitlines() if "catsdogs" in line}
    # Memory compiled for the device that ran it, and no fits-on verdict for other chips.
    assert rows["16"].endswith("| 1.5 GiB | 1.65 GiB |")
    assert rows["64"].endswith("| 13 GiB | 14.3 GiB |")
    assert "oom: oom happened" in rows["128"]
    assert "| yes |" not in section and "| no |" not in section
    # Without a compile for the seed's GPUs, the seed's rows say so rather than judge.
    answer = _section(rendered[0], "How do batch size and memory interact")
    assert "| MX150 2 GB | 16 | trained | gpu-mx150: not compiled |" in answer
    assert "| T4 16 GB | 128 | trained | gpu-t4: not compiled |" in answer
    assert "| fits |" not in answer and "| does not fit |" not in answer
    assert "cats-vs-dogs images are not available" in section
    assert "0.97" not in section  # synthetic data: no accuracy anywhere


def test_scaling_section(rendered):
    section = _section(rendered[0], "Study: scaling")
    weak = [line for line in section.splitlines() if line.startswith("| weak")]
    assert [line.split(" | ")[-1] for line in weak] == ["100% |", "90% |", "75% |"]
    strong = [line for line in section.splitlines() if line.startswith("| strong")]
    assert [line.split(" | ")[-1] for line in strong] == ["100% |", "75% |", "50% |"]


def test_matmul_section(rendered):
    section = _section(rendered[0], "Study: matmul")
    assert "| 400 TFLOP/s | 495 tf32 | 80.8% |" in section
    assert "| 200 GFLOP/s | - | - |" in section


def test_ensemble_section(rendered):
    section = _section(rendered[0], "Study: ensembles")
    row = next(line for line in section.splitlines() if "| 4 | vmap |" in line)
    assert "2.00x" in row  # sequential 0.2 s vs vmap 0.1 s
    assert "0.9750 ± 0.0112" in row and "0.9600-0.9900" in row
    assert f"{4 * 64 / 0.1:,.0f}" in row


def test_precision_and_accuracy_sections(rendered):
    precision = _section(rendered[0], "Study: precision")
    # every record names its matmul precision (schema 2), as the committed report shows
    assert "| bf16, matmul default | 6 ms [5.4 ms-7.2 ms] |" in precision
    assert "| f32, matmul highest | 20 ms" in precision
    accuracy = _section(rendered[0], "Study: accuracy")
    assert "fashion_mnist" in accuracy
    assert "mnist: final test accuracy spans 0.9700-0.9750" in accuracy
    assert "synthetic" not in accuracy


def test_sections_render_nothing_without_their_records(tmp_path):
    others = [_record("old", CPU, None)]  # an older record: no study
    # The sections of the studies measured here; the targets and roofline sections
    # say in words that their records are missing, and the default study's plot
    # records of no study, such as `others`.
    measured = [name for name in studies.STUDIES if name != "roofline"]
    for section in [s for name in measured for s in studies.REGISTRY[name].sections]:
        assert section([], tmp_path) == ("", [])
        assert section(others, tmp_path) == ("", [])
    assert list(tmp_path.iterdir()) == []


# --- README headline --------------------------------------------------------------------


def test_cli_rewrites_only_the_readme_block(tmp_path, capsys):
    results = tmp_path / "results"
    for r in study_records():  # every kind validates as the runner writes it
        records.append(results / "records.jsonl", r)
    before, after = (
        "# Project\n\nSet up.\n\n<!-- results:start -->",
        "<!-- results:end -->\n\nEnd\n",
    )
    readme = tmp_path / "README.md"
    readme.write_bytes(f"{before}\nstale\n{after}".encode())
    assert report.main([str(results), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith(before + "\n") and text.endswith("\n" + after)
    block = text[len(before) : -len(after)]
    assert "stale" not in block
    # The devices study is the headline: its two records and nothing else.
    assert block.count("| mnist_cnn |") == 2 and "200 ms" in block and "0.9750" in block
    assert "2 machine(s) (gpubox, laptop), jax 0.10.2" in block
    assert "generated by `python -m experiments.report`" in block
    assert "[results/REPORT.md](results/REPORT.md)" in block
    first = readme.read_bytes()
    assert report.main([str(results), "--readme", str(readme)]) == 0
    assert readme.read_bytes() == first  # reruns change nothing

    bare = tmp_path / "BARE.md"
    bare.write_text("# no markers\n")
    assert report.main([str(results), "--readme", str(bare)]) == 2
    assert "<!-- results:start -->" in capsys.readouterr().err
    assert bare.read_text() == "# no markers\n"


def test_report_keys_cells_by_nested_overrides_read_from_json(tmp_path):
    """A model override that is nested (the batch study's smoke catsdogs `widths`)
    comes back from JSON as lists; the report keys cells by their overrides, and
    still renders both records."""
    results = tmp_path / "records.jsonl"
    nested = {"widths": ((4,), (4,)), "dense_width": 8}
    prediction = {"step_time_s": 0.001, "bound": "memory", "method": "roofline"}
    for i, batch in enumerate((2, 4)):
        record = _record(f"b{i}", CPU, "batch", "catsdogs_cnn", batch, overrides=nested)
        records.append(results, record | {"prediction": prediction})
    loaded = records.load(results)
    assert loaded[0]["workload"]["model_overrides"]["widths"] == [[4], [4]]
    path, _ = report.write_report(loaded, tmp_path)
    assert report_text(path).count("catsdogs_cnn dense_width=8 widths=[[4], [4]]") >= 2


def test_the_held_out_table_groups_each_platforms_steps_by_model_and_the_mlp_by_width(
    monkeypatch, tmp_path
):
    from experiments import predictions
    from experiments.studies import roofline

    def row(label: str, measured: float, held: float | None) -> dict:
        return {"label": label, "measured_s": measured, "held_out_predicted_s": {"program": held}}

    family = {
        "error": {"split": "program"},
        "observations": [
            row("cpu: mlp n=32, batch 128, f32, cpu, step loop", 1.0, 1.2),
            row("cpu: mlp n=32, batch 512, f32, cpu, step loop", 2.0, 2.2),
            row("cpu: mlp n=1024, batch 128, f32, cpu, step loop", 1.0, 1.5),
            row("cpu: mnist_cnn, batch 128, f32, cpu, step loop", 1.0, 0.9),
            row("cpu: mnist_cnn, batch 32, f32, cpu, step loop", 1.0, None),  # not held out
        ],
    }
    monkeypatch.setattr(predictions, "constants_table", lambda: {"families": {"cpu": family}})
    text, _ = roofline.held_out_section([], tmp_path)
    lines = [line for line in text.splitlines() if line.startswith("| cpu")]
    assert lines == [
        "| cpu | mlp | leave one program out | 3 | 1.20 [1.10-1.50] | yes |",
        "| cpu | mlp, width 32 | leave one program out | 2 | 1.15 [1.10-1.20] | yes |",
        "| cpu | mlp, width 1024 | leave one program out | 1 | 1.50 [1.50-1.50] | no |",
        "| cpu | mnist_cnn | leave one program out | 1 | 0.90 [0.90-0.90] | yes |",
    ]
