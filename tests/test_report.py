"""The report on records written here: two fake machines (a CPU laptop and an H100
box), a batch sweep ending in OOM, an error, and a model whose XLA count disagrees."""

import re
import subprocess
from pathlib import Path

import matplotlib.image
import pytest
from conftest import complete_record, report_text

from experiments import records, report

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CPU = {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1, "host": "laptop"}
H100 = {
    "platform": "gpu",
    "kind": "NVIDIA H100 80GB HBM3",
    "count": 1,
    "process_count": 1,
    "host": "gpubox",
}


def _record(run_id, device, model, batch, status="ok", median=0.1, width=None, **extra):
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": status,
        "message": extra.pop("message", None),
        "workload": {
            "model": model,
            "model_overrides": {"width": width} if width else {},
            "dataset": "digits",
            "batch_size": batch,
            "strategy": "single",
            "precision": "f32",
        },
        "device": device,
        "env": {"jax": "0.10.2", "utc_time": f"2025-01-01T00:00:{len(run_id):02d}+00:00"},
    }
    if status == "ok":
        per_step = extra.pop("per_step", 3_000_000 * batch)
        achieved = per_step / median / 1e12
        record.update(
            params={"trainable": extra.pop("params", 100_000), "non_trainable": 0},
            compile_time_s={"train": 1.0, "eval": 0.5},
            step_time_s={"median": median, "p10": median * 0.9, "p90": median * 1.2, "n": 20},
            eval_step_time_s={"median": median / 3, "p10": median / 4, "p90": median / 2, "n": 20},
            images_per_s=batch / median,
            flops={
                "per_step": per_step,
                "per_image": per_step / batch,
                "forward_per_image": per_step / batch / 3,
                "xla_per_device": per_step * extra.get("ratio", 1.02),
                "xla_per_step": per_step * extra.get("ratio", 1.02),
                "xla_vs_jaxpr": extra.pop("ratio", 1.02),
            },
            achieved_tflops=achieved,
            mfu={
                "chip": "H100 SXM" if device is H100 else None,
                "vendor_precision": "tf32" if device is H100 else "fp32",
                "vendor_peak_tflops": 495.0 if device is H100 else None,
                "vs_vendor": achieved / 495.0 if device is H100 else None,
                "measured_dtype": "float32",
                "measured_ceiling_tflops": 400.0 if device is H100 else 0.15,
                "vs_measured": achieved / (400.0 if device is H100 else 0.15),
            },
            memory={"argument_bytes": 1000, "temp_bytes": 10, "peak_bytes_in_use": None},
            matmul_ceiling={"float32": {"tflops": 400.0 if device is H100 else 0.15}},
            history=[
                {"epoch": 1, "train_loss": 1.5, "train_accuracy": 0.6, "test_accuracy": 0.7},
                {"epoch": 2, "train_loss": 0.5, "train_accuracy": 0.8, "test_accuracy": 0.875},
            ],
            test_accuracy=0.875,
        )
    record.update(extra)
    return complete_record(record)


@pytest.fixture
def results(tmp_path):
    """Records from two machines, in two files, as if copied from each."""
    cpu_file, gpu_file = tmp_path / "laptop" / "records.jsonl", tmp_path / "gpu" / "records.jsonl"
    for r in (
        _record("c1", CPU, "mlp", 128, median=0.2291, width=4096, params=20_037_642),
        _record("c2", CPU, "mlp", 128, median=0.0042, width=64, params=55_050),
        _record("c3", CPU, "lenet5", 128, median=0.0311, ratio=1.31, params=61_706),
    ):
        records.append(cpu_file, r)
    for r in (
        _record("g1", H100, "mlp", 128, median=0.00123, width=4096, params=20_037_642),
        _record("g2", H100, "mlp", 128, median=0.00101, width=64, params=55_050),
        _record("g3", H100, "mlp", 256, median=0.00151, width=4096, params=20_037_642),
        _record(
            "g4",
            H100,
            "mlp",
            512,
            status="oom",
            width=4096,
            message="XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory allocating 9 GB",
        ),
        _record("g5", H100, "lenet5", 128, status="error", message="ValueError: bad conv"),
    ):
        records.append(gpu_file, r)
    return tmp_path


def test_report_holds_the_records_numbers(results, tmp_path):
    loaded = records.load(results)
    assert len(loaded) == 8
    path, _ = report.write_report(loaded, tmp_path / "out")
    text = report_text(path)
    # Step times, throughput, FLOPs, MFU and accuracy, as the records have them.
    for expected in (
        "229 ms [206 ms-275 ms]",  # c1 median/p10/p90
        "1.23 ms",  # g1
        f"{128 / 0.2291:,.0f}",  # images/s of c1
        f"{128 / 0.00123:,.0f}",
        "384 M",  # 3e6 x 128 FLOPs/step
        f"{100 * (3e6 * 128 / 0.00123 / 1e12) / 495:.3g}%",  # MFU vs vendor of g1
        "0.8750",
        "NVIDIA H100 80GB HBM3",
        "495 TFLOP/s tf32",
        "oom: XlaRuntimeError: RESOURCE_EXHAUSTED",
        "error: ValueError: bad conv",
        "1.31 (differs >10%)",
        f"{0.2291 / 0.00123:.1f}x",  # speedup of mlp 4096 on the H100 over the CPU
        "2 machine(s)",
    ):
        assert expected in text, expected
    check = text.split("## FLOPs check")[1].split("##")[0]
    assert "lenet5" in check and "mlp" not in check


def _peer(run_id, device, framework, mode, median):
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": "ok",
        "workload": {
            "kind": "peer",
            "framework": framework,
            "mode": mode,
            "study": "bench",
            "model": "mlp",
            "model_overrides": {"width": 4096},
            "dataset": "synthetic",
            "batch_size": 128,
            "strategy": "single",
            "precision": "f32",
        },
        "device": device,
        "env": {"utc_time": "2025-01-02T00:00:00+00:00"},
        "step_time_s": {"median": median, "p10": median, "p90": median, "n": 7},
    }
    return complete_record(record)


def _speedup_row(loaded, tmp_path):
    text = report_text(report.write_report(loaded, tmp_path)[0])
    section = text.split("## Speedup over CPU")[1].split("\n## ")[0]
    return next(line for line in section.splitlines() if "4096" in line and "b128" in line)


def test_speedups_are_also_over_the_fastest_cpu_figure_of_any_framework(results, tmp_path):
    loaded = records.load(results)
    # Without peers, JAX's own CPU record is the fastest CPU figure: both ratios agree.
    alone = _speedup_row(loaded, tmp_path / "alone")
    assert alone.count(f"{0.2291 / 0.00123:.1f}x") == 2 and "(jax xla step f32)" in alone
    peers = [
        _peer("p1", CPU, "keras", "graph", 0.15),
        _peer("p2", CPU, "torch", "eager", 0.30),  # slower than JAX: not the baseline
        _peer("p3", {**CPU, "host": "elsewhere"}, "torch", "compile", 0.01),  # not this CPU
    ]
    row = _speedup_row(loaded + peers, tmp_path / "peers")
    assert f"| {0.2291 / 0.00123:.1f}x |" in row  # over the CPU record of the workload
    assert f"| {0.15 / 0.00123:.1f}x (keras graph) |" in row  # over the fastest CPU


def test_report_plots_are_valid_pngs(results, tmp_path):
    path, pngs = report.write_report(records.load(results), tmp_path / "out")
    names = {p.name for p in pngs}
    assert names == {
        "step_time_vs_params.png",
        "speedup_over_cpu.png",
        "images_per_s_vs_batch.png",
        "mfu_per_device.png",
        "curves_per_epoch.png",
    }
    text = report_text(path)
    for png in pngs:
        assert png.read_bytes()[:8] == PNG_SIGNATURE
        height, width, _ = matplotlib.image.imread(png).shape
        assert height > 100 and width > 100
        assert f"{png.name})" in text  # linked: from REPORT.md, or ../ from a details page


def test_sections_without_data_are_left_out(tmp_path):
    only_error = [_record("e", CPU, "mlp", 8, status="error", message="boom")]
    path, pngs = report.write_report(only_error, tmp_path)
    assert pngs == []
    assert "error: boom" in report_text(path)


def test_cli_writes_into_out(results, tmp_path, capsys):
    out = tmp_path / "report"
    assert report.main([str(results / "laptop"), str(results / "gpu"), "--out", str(out)]) == 0
    assert (out / report.REPORT_FILE).exists()
    assert "8 records, 5 plots" in capsys.readouterr().out
    assert report.main([str(tmp_path / "absent")]) == 2


@pytest.mark.parametrize("bad", [b"[1, 2, 3]\n", b"null\n", b"\xff not utf-8\n"])
def test_cli_skips_a_line_that_is_not_a_record_object(results, tmp_path, capsys, bad):
    path = results / "laptop" / records.RECORDS_FILE
    path.write_bytes(bad + path.read_bytes())
    assert report.main([str(path), "--out", str(tmp_path / "report")]) == 0
    captured = capsys.readouterr()
    assert len(captured.err.splitlines()) == 1, captured.err  # the warning, one line
    assert captured.err.startswith("warning: ")
    assert "records.jsonl:1: skipped a bad record" in captured.err
    assert "3 records" in captured.out


@pytest.fixture
def immutable(tmp_path):
    """A folder nothing can be created in, root included (root ignores permissions)."""
    folder = tmp_path / "immutable"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here (not root, or the filesystem lacks it)")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_cli_out_that_cannot_be_written_is_one_line(results, tmp_path, capsys, immutable):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cases = (
        (blocker, "a file, not a folder"),
        (blocker / "sub", "a file, not a folder"),
        (immutable, "Operation not permitted"),
        (immutable / "sub", "Operation not permitted"),
    )
    for out, why in cases:
        assert report.main([str(results / "laptop"), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("error: cannot write to --out")
        assert why in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "gpu", "immutable", "laptop"]
    assert list(immutable.iterdir()) == []
    assert report.main([str(results / "laptop"), "--out", str(tmp_path / "ok")]) == 0  # control


REPO = Path(__file__).resolve().parent.parent
MARKUP = "evil|<script>alert(1)</script>\n# injected"


def _unescaped_pipes(line: str) -> int:
    return len(re.findall(r"(?<!\\)\|", line))


def test_record_strings_cannot_break_a_table_add_a_heading_or_pass_html(tmp_path):
    import json
    import random

    committed = [
        json.loads(line)
        for line in (REPO / "results" / records.RECORDS_FILE).read_text().splitlines()
    ]
    chosen = [r for r in committed if not r["env"].get("turns")]
    chosen = random.Random(0).sample(chosen, 60)  # train, compile, peer, paired, ...
    chosen += [r for r in committed if r["status"] == "error"][:3]
    for r in chosen:  # every string a report shows of a record: model, host, message
        r["workload"]["model"] = MARKUP
        r["device"]["host"] = r["env"]["host"] = r["device"]["kind"] = MARKUP
        r["message"] = MARKUP if r["message"] else None
        if r.get("target"):
            r["target"]["name"] = MARKUP
        if r["env"].get("cpu"):
            r["env"]["cpu"]["model"] = MARKUP
    path = tmp_path / records.RECORDS_FILE
    path.write_text("".join(json.dumps(r) + "\n" for r in chosen))
    assert report.main([str(path), "--out", str(tmp_path)]) == 0
    pages = [tmp_path / report.REPORT_FILE, *sorted((tmp_path / "report").glob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    assert "&lt;script>" in text  # the records are shown, escaped
    assert "<script>" not in text and "\n# injected" not in text
    for page in pages:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if line.startswith("|") and lines[number - 1].startswith("|"):
                header = next(i for i in range(number, -1, -1) if not lines[i - 1].startswith("|"))
                assert _unescaped_pipes(line) == _unescaped_pipes(lines[header]), (page, line)
