"""The report's sections for devices not at hand and for predictions, on records written
here in the compile-record contract's format with known numbers: exact table rows,
compiled and predicted figures never in one column, seed 000's answer generated."""

import itertools

import pytest
from conftest import complete_record, report_text
from test_report import CPU, H100, PNG_SIGNATURE, _record

from experiments import records, report
from experiments.studies.batch import batch_answer
from experiments.studies.crossover import crossover_study
from experiments.studies.overview import devices_table, results_table
from experiments.studies.roofline import predicted_vs_measured
from experiments.studies.scaling import scaling_study
from experiments.studies.targets import (
    PER_DEVICE_CAP,
    largest_cell,
    largest_fitting,
    model_pages,
    seed_000_headline,
    targets_section,
)

GIB = 2**30
_ids = itertools.count()

MX150 = {
    "name": "gpu-mx150",
    "platform": "gpu",
    "chip": "MX150",
    "chips": 1,
    "topology": None,
    "memory_per_chip_bytes": 2 * GIB,
    "bandwidth_bytes_per_s": 48e9,
    "peak_tflops": {"fp32": 1.1},
}
V5E_8 = {
    "name": "tpu-v5e-8",
    "platform": "tpu",
    "chip": "TPU v5e",
    "chips": 8,
    "topology": "v5e:2x4",
    "memory_per_chip_bytes": 16 * GIB,
    "bandwidth_bytes_per_s": 819e9,
    "peak_tflops": {"bf16": 197.0},
}
H100_TARGET = {
    "name": "gpu-h100",
    "platform": "gpu",
    "chip": "H100 SXM",
    "chips": 1,
    "topology": None,
    "memory_per_chip_bytes": 80 * GIB,
    "bandwidth_bytes_per_s": 3.35e12,
    "peak_tflops": {"tf32": 495.0},
}


def _prediction(step, batch, source="vendor", bound="compute"):
    return {
        "step_time_s": step,
        "compute_s": step,
        "memory_s": step / 2,
        "bound": bound,
        "images_per_s": batch / step,
        "peak_tflops_used": 1.1,
        "peak_source": source,
        "peak_precision": "fp32",
        "bandwidth_bytes_per_s": 48e9,
        "bandwidth_source": source,
        "flops_source": "jaxpr",
        "compiler_estimate_s": None,
        "method": "roofline",
    }


def _compiled(target, model, batch, status, total_gib, step=None, precision="f32", **extra):
    """A compile-only record as the targets runner writes it."""
    total = None if total_gib is None else int(total_gib * GIB)
    record = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": f"compile{next(_ids)}",
        "config_key": f"key{next(_ids)}",
        "status": status,
        "message": extra.pop("message", None),
        "compiled_not_run": True,
        "workload": {
            "model": model,
            "model_overrides": {},
            "dataset": "synthetic",
            "batch_size": batch,
            "strategy": "sharded" if target["chips"] > 1 else "single",
            "precision": precision,
            "kind": "compile",
            "target": target["name"],
            "study": "targets",
        },
        "target": target,
        "device": {
            "platform": target["platform"],
            "kind": target["chip"],
            "count": target["chips"],
            "process_count": 1,
            "host": "vm",
        },
        "env": {"jax": "0.10.2", "utc_time": "2026-11-22T13:00:00+00:00", "host": "vm"},
        "memory": {"total_bytes": total},
        "fits": None if total is None else total <= target["memory_per_chip_bytes"],
        "prediction": None if step is None else _prediction(step, batch),
    }
    record.update(extra)
    return complete_record(record)


def _targets_records():
    return [
        _compiled(MX150, "catsdogs_cnn", 16, "ok", 1.5, step=0.16),
        _compiled(MX150, "catsdogs_cnn", 24, "ok", 1.875, step=0.24),
        _compiled(MX150, "catsdogs_cnn", 28, "oom", 2.125, step=0.28),
        _compiled(MX150, "catsdogs_cnn", 32, "oom", 2.5, step=0.32),
        _compiled(V5E_8, "catsdogs_cnn", 128, "ok", 4.0, step=0.004),
        _compiled(
            V5E_8,
            "catsdogs_cnn",
            1024,
            "error",
            None,
            message="XlaRuntimeError: INTERNAL: the compiler gave up",
        ),
    ]


def _lines(text, start):
    return [line for line in text.splitlines() if line.startswith(start)]


def test_without_records_each_section_says_so_in_one_line(tmp_path):
    measured = [_record("c1", CPU, "mlp", 128)]
    assert targets_section(measured, tmp_path) == (
        "## Devices not at hand (compiled, not run)\n\nNo compile-only records yet "
        "(`python -m experiments.run --study=targets` writes them).",
        [],
    )
    assert predicted_vs_measured(measured, tmp_path) == (
        "## Predicted vs measured step time\n\nNo measured record carries a prediction yet "
        "(`python -m experiments.run --study=roofline` writes them).",
        [],
    )
    assert seed_000_headline(measured) == ""


def test_targets_tables_keep_compiled_and_predicted_apart(tmp_path):
    details, paths = targets_section(_targets_records(), tmp_path)
    assert "[catsdogs_cnn](targets-catsdogs_cnn.md)" in details
    text = model_pages(_targets_records())["targets-catsdogs_cnn"]
    # Batch per chip, doubling only (24 and 28 are the bisection's); TPUs first.
    header = "| target | precision | chips | 16 | 32 | 128 |"
    assert _lines(text, "| target | precision | chips | 16") == [header, header]
    assert _lines(text, "| tpu-v5e-8") == [
        "| tpu-v5e-8 | f32 | 8 | 4 GiB | - | error |",  # memory (compiled)
        "| tpu-v5e-8 | f32 | 8 | <= 32,000 | - | - |",  # images/s (a roofline: a ceiling)
        # largest, global: unknown above 128, where the compiler refused 1024
        "| tpu-v5e-8 | f32 | 8 | 16 GiB | - | >= 128 (refused: the compiler refused 1024) "
        "| 4 GiB | - | - | <= 32,000 |",
    ]
    assert _lines(text, "| gpu-mx150") == [
        "| gpu-mx150 | f32 | 1 | 1.5 GiB | 2.5 GiB (over) | - |",
        "| gpu-mx150 | f32 | 1 | <= 100 | - | - |",  # an oom has no predicted images/s
        "| gpu-mx150 | f32 | 1 | 2 GiB | - | 24 | 1.88 GiB | 28 | 2.12 GiB | <= 100 |",
    ]
    assert "Memory per chip (compiled), by batch per chip:" in text
    assert "Images/s over all chips (predicted: per-kernel; `<= N`: a roofline" in text
    assert "- tpu-v5e-8: XlaRuntimeError: INTERNAL: the compiler gave up" in details
    (path,) = paths  # the model's own memory plot, on its page
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    assert f"](../{path.name})" in text


def test_each_refusal_is_said_once_without_this_machines_paths(tmp_path):
    ptxas = (
        "JaxRuntimeError: UNIMPLEMENTED: /work/main/.venv/lib/python3.11/site-packages/"
        "nvidia/cuda_nvcc/bin/ptxas ptxas too old."
    )
    refused = [
        _compiled(MX150, model, 16, "error", None, message=ptxas, precision=precision)
        for model in ("mlp", "lenet5")
        for precision in ("f32", "bf16")
    ]
    text, _ = targets_section(refused, tmp_path)
    (line,) = _lines(text, "- gpu-mx150")
    assert line == (
        "- gpu-mx150: JaxRuntimeError: UNIMPLEMENTED: ptxas ptxas too old. "
        "(lenet5 batch 16 (bf16 and f32), mlp batch 16 (bf16 and f32))"
    )
    assert ".venv" not in text


def test_largest_fitting_batch_and_the_first_miss():
    by_batch = {r["workload"]["batch_size"]: r for r in _targets_records()[:4]}
    best, over = largest_fitting(by_batch)
    assert (best["workload"]["batch_size"], over["workload"]["batch_size"]) == (24, 28)
    assert largest_cell(by_batch, best, over) == "24"
    assert largest_fitting({32: by_batch[32]}) == (None, by_batch[32])
    assert largest_cell({32: by_batch[32]}, None, by_batch[32]) == "none"
    refused = _targets_records()[5]  # the only record of its cell: the compiler refused
    assert largest_cell({1024: refused}, None, None) == "unknown (the compiler refused 1024)"


def test_a_search_not_run_to_its_end_gives_no_largest_batch_only_a_lower_bound():
    # Nothing above 24 compiled: 24 fits, whether 28 would is unknown.
    by_batch = {r["workload"]["batch_size"]: r for r in _targets_records()[:2]}
    best, over = largest_fitting(by_batch)
    assert over is None
    assert largest_cell(by_batch, best, over) == (
        ">= 24 (stopped: stopped before its next compile; `python -m experiments.run "
        "--study=targets --target=gpu-mx150 --model=catsdogs_cnn` finishes it)"
    )
    at_cap = _compiled(MX150, "catsdogs_cnn", PER_DEVICE_CAP, "ok", 1.0, step=1.0)
    assert largest_cell({PER_DEVICE_CAP: at_cap}, at_cap, None) == (
        f">= {PER_DEVICE_CAP} (cap: reached the study's cap of {PER_DEVICE_CAP:,} per device)"
    )


def _measured(run_id, device, batch, median, prediction, vendor=None, **workload):
    record = _record(run_id, device, "mnist_cnn", batch, median=median)
    record["workload"].update(study="roofline", **workload)
    record.update(prediction=prediction, prediction_vendor=vendor)
    return record


def test_predicted_vs_measured_per_device_with_the_ratio(tmp_path, monkeypatch):
    from jaxcnn import prediction as prediction_lib

    table = {
        "version": "t1",
        "families": {
            "gpu": {
                "compute_efficiency": 0.5,
                "memory_efficiency": 1.0,
                "kernel_overhead_s": 0.0,
                "error": {"median": 0.1, "worst": 0.2},
            }
        },
    }
    monkeypatch.setattr(prediction_lib, "constants", lambda path=None: table)
    old = _prediction(0.02, 128, source="measured", bound="memory")  # made before kernels
    # An H100 record with kernels: one f32 conv that takes 400 us at 495 TFLOP/s x 0.5.
    with_kernels = _measured("g1", H100, 128, 0.001, None)
    with_kernels.update(
        kernels=[[1, "conv", 400e-6 * 495e12 * 0.5, 0, "f32", 0]],
        kernels_source={"program": "train_step", "steps": 1},
        prediction_bound=_prediction(0.00025, 128) | {"method": "roofline bound"},
    )
    rs = [
        _measured("c1", CPU, 128, 0.05, old),
        with_kernels,
        _measured("c2", CPU, 32, 0.01, None),  # no prediction: not shown
    ]
    text, paths = predicted_vs_measured(rs, tmp_path)
    assert paths == []
    assert "### cpu" in text and "### gpu NVIDIA H100 80GB HBM3" in text
    assert _lines(text, "| roofline") == [
        # the old record: its roofline, shown as the bound it is, in both columns
        "| roofline | mnist_cnn | 128 | f32 | xla, step | 50 ms [45 ms-60 ms] | 20 ms | 0.40 "
        "| roofline bound | 20 ms | 0.40 |",
        # with kernels: priced by the current constants, the bound beside it; the step is
        # its kernels and its host side, the batch's copy over the H100's PCIe Gen5 x16
        # (128 x 792 bytes at 63 GB/s: 1.6 us)
        "| roofline | mnist_cnn | 128 | f32 | xla, step | 1 ms [900 us-1.2 ms] | 402 us | 0.40 "
        "| per-kernel | 250 us | 0.25 |",
    ]
    assert "The per-kernel model over the 1 steps in the table above" in text
    assert "median error 60%, worst 60%." in text
    assert "No record of this device carries kernels yet: roofline bounds only." in text
    # the roofline bound beaten by no step here: no sentence claims one was
    assert "beat it" not in text


def test_seed_000_answered_from_the_mx150_compiles(tmp_path):
    rs = _targets_records()
    assert seed_000_headline(rs) == (
        "Seed 000's `catsdogs_cnn` (f32), compiled for the seed's GPUs by XLA:GPU and not "
        "run: batch 16 needs 1.5 GiB on `gpu-mx150`, which fits in its 2 GiB (the seed: "
        "trained; agrees); batch 32 needs 2.5 GiB on `gpu-mx150`, which does not fit in "
        "its 2 GiB (the seed: ran out of memory; agrees)."
    )
    measured = [_record("c1", CPU, "mlp", 128, width=64)]
    assert seed_000_headline(rs) in report.headline(measured + rs, "REPORT.md")


def test_seed_000_names_the_memory_jax_can_use_where_it_is_less_than_the_chip_has():
    rs = _targets_records()
    for r in rs:
        if r["target"]["name"] == "gpu-mx150":
            r["target"] = {**r["target"], "usable_bytes_per_device": int(1.5 * 2**30)}
    assert "does not fit in the 1.5 GiB JAX can use of its 2 GiB (the seed: ran out" in (
        seed_000_headline(rs)
    )


def test_seed_000_is_judged_by_the_seed_gpus_own_compiler_only(tmp_path):
    # XLA:CPU says batch 16 needs 2.5 GiB (over the MX150's 2): memory another compiler
    # gave never judges the MX150; its own compiler's records answer in its place.
    cpu = _record("b16", CPU, "catsdogs_cnn", 16, median=0.5)
    cpu["workload"].update(study="batch", dataset="synthetic")
    cpu["memory"]["total_bytes"] = int(2.5 * GIB)
    text, _ = batch_answer([cpu], tmp_path)
    (alone,) = _lines(text, "| MX150 2 GB | 16")
    # the seed's own s/step, from its published reference row
    assert alone == (
        "| MX150 2 GB | 16 | trained | gpu-mx150: not compiled | - | - | - | 532 ms | - |"
    )
    text, _ = batch_answer([cpu, *_targets_records()], tmp_path)
    assert _lines(text, "| MX150 2 GB") == [
        "| MX150 2 GB | 16 | trained | gpu-mx150 | 1.5 GiB | fits | yes | 532 ms "
        "| 160 ms (roofline bound) |",
        "| MX150 2 GB | 32 | out of memory | gpu-mx150 | 2.5 GiB | does not fit | yes | - | - |",
    ]


def test_seed_000_t4_row_shows_the_t4_compile_beside_the_seeds_step_time(tmp_path):
    # No compile at the seed's batch 128, but a larger batch fits the T4: 128 fits too.
    t4 = {**MX150, "name": "gpu-t4", "chip": "T4", "memory_per_chip_bytes": 16 * GIB}
    rs = [
        _compiled(t4, "catsdogs_cnn", b, "ok", m, step=s)
        for b, m, s in ((32, 2.5, 1), (165, 9.5, 2))
    ]
    text, _ = batch_answer(rs, tmp_path)
    (row,) = _lines(text, "| T4 16 GB")
    assert row == (
        "| T4 16 GB | 128 | trained | gpu-t4 (batch 165: 128 not compiled) | 9.5 GiB | fits "
        "| yes | 2.41 s | - |"
    )


def test_compiled_records_stay_out_of_the_measured_tables(tmp_path):
    rs = [_record("c1", CPU, "mlp", 128, width=64), *_targets_records()]
    results, _ = results_table(rs, tmp_path)
    devices, _ = devices_table(rs, tmp_path)
    for text in (results, devices):
        assert "TPU v5e" not in text and "MX150" not in text
    assert len([line for line in results.splitlines() if "| cpu |" in line]) == 1
    path, _ = report.write_report(rs, tmp_path / "out")
    assert "## Devices not at hand (compiled, not run)\n\nEach cell" in report_text(path)


def _priced_by_one_memory_kernel(monkeypatch, platform: str, steps: list) -> None:
    """Give each compile record of `steps` [(record, seconds)] one memory-bound kernel
    that, with the step's host side, takes those seconds at its chip's bandwidth, under
    constants that price memory at the full bandwidth and launches at nothing."""
    from experiments import predictions
    from jaxcnn import prediction as prediction_lib

    family = {"compute_efficiency": 1.0, "memory_efficiency": 1.0, "kernel_overhead_s": 0.0}
    table = {"version": "t1", "families": {platform: family}}
    monkeypatch.setattr(prediction_lib, "constants", lambda path=None: table)
    for record, seconds in steps:
        bandwidth = predictions.rates_of(record)["bytes_per_s"]
        device = seconds - predictions.host_of(record, table)["host_s"]
        record["kernels"] = [[1, "fusion", 0, device * bandwidth, None, 0]]
        record["kernels_source"] = {"program": "train_step", "steps": 1}


def test_crossover_gains_the_targets_predicted_step_times(tmp_path, monkeypatch):
    from experiments.studies.crossover import crossover_answer

    params = {64: 55_050, 256: 269_322, 1024: 1_863_690}
    rs, targets = [], []
    for width, cpu_ms in ((64, 1.0), (256, 4.0), (1024, 16.0)):
        r = _record(f"x{width}", CPU, "mlp", 128, median=cpu_ms / 1e3, width=width)
        r["workload"].update(study="crossover", dataset="synthetic")
        r["params"]["trainable"] = params[width]
        rs.append(r)
        compiled = _compiled(H100_TARGET, "mlp", 128, "ok", 0.5, step=2e-3)
        compiled["workload"]["model_overrides"] = {"width": width}
        targets.append(compiled)
    # Roofline bounds alone (records made before kernels): shown, and no crossover read.
    text, _ = crossover_study(rs + targets, tmp_path)
    assert _lines(text, "| params | gpu-h100") == [
        "| params | gpu-h100 (predicted: roofline bound) |"
    ]
    assert _lines(text, "| 55,050 | 2 ms") == ["| 55,050 | 2 ms |"]
    assert _lines(text, "| cpu | gpu-h100") == []
    answer, _ = crossover_answer(rs + targets, tmp_path)
    assert "a roofline bound only, from which no crossover is read" in answer
    # With their kernels (one memory-bound kernel of 2 ms at the chip's bandwidth), the
    # per-kernel predictions give the crossover.
    _priced_by_one_memory_kernel(monkeypatch, "gpu", [(r, 2e-3) for r in targets])
    text, _ = crossover_study(rs + targets, tmp_path)
    assert _lines(text, "| params | gpu-h100") == ["| params | gpu-h100 (predicted: per-kernel) |"]
    # The CPU is 2x faster at 64 and 2x slower at 256: the log-log midpoint.
    crossing = (params[64] * params[256]) ** 0.5
    assert _lines(text, "| cpu | gpu-h100") == [
        f"| cpu | gpu-h100 | {crossing:,.0f} | cpu (measured) / gpu-h100 (predicted) |"
    ]
    answer, _ = crossover_answer(rs + targets, tmp_path)
    assert f"predicted faster than cpu above {crossing:,.0f} params" in answer


def test_scaling_gains_per_chip_memory_and_predicted_steps_over_chip_counts(tmp_path, monkeypatch):

    measured = _record("s1", CPU, "mlp", 128, median=0.05, width=1024)
    measured["workload"].update(study="scaling", scaling="weak", dataset="synthetic")
    v5e_1 = {**V5E_8, "name": "tpu-v5e-1", "chips": 1, "topology": "v5e:1x1"}
    rs = [
        measured,
        _compiled(v5e_1, "mlp", 128, "ok", 0.25, step=1e-3),
        _compiled(V5E_8, "mlp", 1024, "ok", 0.3, step=1.25e-3),
        _compiled(V5E_8, "mlp", 512, "ok", 0.2, step=1e-3),  # 64 per chip: not the study's
    ]
    for r in rs[1:]:
        r["workload"]["model_overrides"] = {"width": 1024}
    # Records made before records carried kernels: their rooflines are bounds, and no
    # efficiency is taken from two bounds.
    text, _ = scaling_study(rs, tmp_path)
    assert _lines(text, "| weak | mlp width=1024 f32 | TPU v5e") == [
        "| weak | mlp width=1024 f32 | TPU v5e | tpu-v5e-1 | 1 | 128 | 256 MiB | >= 1 ms "
        "| <= 128,000 | - |",
        "| weak | mlp width=1024 f32 | TPU v5e | tpu-v5e-8 | 8 | 1024 | 307 MiB | >= 1.25 ms "
        "| <= 819,200 | - |",
    ]
    # With their kernels (one memory-bound kernel per device: 1 ms, and 1.25 ms on 8
    # chips at the chip's 819 GB/s), per-kernel predictions and their efficiency.
    _priced_by_one_memory_kernel(monkeypatch, "tpu", [(rs[1], 1e-3), (rs[2], 1.25e-3)])
    text, _ = scaling_study(rs, tmp_path)
    assert _lines(text, "| weak | mlp width=1024 f32 | TPU v5e") == [
        "| weak | mlp width=1024 f32 | TPU v5e | tpu-v5e-1 | 1 | 128 | 256 MiB | 1 ms "
        "| 128,000 | 100% |",
        # 8 chips: 819,200 images/s predicted, 80% of 8 x one chip's 128,000
        "| weak | mlp width=1024 f32 | TPU v5e | tpu-v5e-8 | 8 | 1024 | 307 MiB | 1.25 ms "
        "| 819,200 | 80% |",
    ]


def test_a_compile_of_a_targets_old_topology_is_left_out_and_said(tmp_path):
    # tpu-v4-8 was two devices per chip (8) before it compiled as 4 megacore devices.
    v4 = {**V5E_8, "name": "tpu-v4-8", "chip": "TPU v4", "chips": 4}
    old = _compiled({**v4, "devices": 8}, "mnist_cnn", 128, "ok", 1.0, step=0.01)
    new = _compiled({**v4, "devices": 4}, "mnist_cnn", 256, "ok", 1.0, step=0.01)
    from experiments.studies.targets import compiled, superseded_line

    assert compiled([old, new]) == [new]  # the positive control: the new one stays
    assert superseded_line([old, new]).startswith("Left out: 1 compile record(s) of tpu-v4-8")
    assert superseded_line([new]) == ""


def test_the_constants_section_shows_each_platforms_constants_as_fitted(tmp_path, monkeypatch):
    from experiments import predictions
    from experiments.studies.roofline import constants_section

    band = {"median": 0.2, "worst": 1.2, "observations": 157}
    error = {
        "splits": {
            "chip": {"regimes": {"large": None, "small": None}, "untested_groups": ["vm"]},
            "program": {"regimes": {"large": None, "small": band}},
        }
    }
    table = {
        "version": "v9",
        "families": {
            "cpu": {
                "compute_efficiency": 1.0,
                "memory_efficiency": 0.35,
                "kernel_overhead_s": 1.65e-5,
                "elemental_conv_efficiency": 0.014,
                "basis": "fitted",
                "bounds": {"compute_efficiency": [0.01, 1.0], "memory_efficiency": [0.01, 1.0]},
                "fixed": {},
                "error": error,
            },
            "tpu": {
                "compute_efficiency": 0.5,
                "memory_efficiency": 0.7,
                "kernel_overhead_s": 5e-6,
                "elemental_conv_efficiency": None,
                "basis": "assumed: too few observations to fit",
                "fixed": {},
                "error": None,
            },
            "gpu": {
                "compute_efficiency": 0.8,
                "memory_efficiency": 0.6,
                "kernel_overhead_s": 3e-6,
                "elemental_conv_efficiency": None,
                "published_loop_step_s": 0.026,
                "loop_choice": {
                    "kept": True,
                    "fitted_s": 0.026,
                    "leave_one_out_median_with": 0.11,
                    "leave_one_out_median_without": 0.18,
                },
                "basis": "fitted",
                "fixed": {},
                "error": error,
            },
        },
    }
    monkeypatch.setattr(predictions, "constants_table", lambda: table)
    text, _ = constants_section([], tmp_path)
    assert "version v9" in text
    assert _lines(text, "| cpu") == [
        "| cpu | 1.000 (at its bound) | 0.350 | 16.5 us | 0.014 | - | fitted | 0 "
        "| - / -; not testable (too few left to refit): vm | - / 20%, 120% (157 observations) |"
    ]
    assert _lines(text, "| tpu") == [
        "| tpu | 0.500 | 0.700 | 5 us | - | - | assumed: too few observations to fit | 0 "
        "| - / - | - / - |"
    ]
    assert _lines(text, "| gpu")[0].startswith(
        "| gpu | 0.800 | 0.600 | 3 us | - | 26.0 ms per step (leave-one-out "
        "median error 11% with it, 18% without) | fitted |"
    )


def test_the_constants_section_says_whether_vector_units_got_their_own_efficiency(
    tmp_path, monkeypatch
):
    from experiments import predictions
    from experiments.studies.roofline import constants_section

    side = {"median": 0.41, "observations": 7, "untested_groups": ["V100 SXM2"]}
    gpu = {
        "compute_efficiency": 0.8,
        "memory_efficiency": 0.6,
        "kernel_overhead_s": 3e-6,
        "vector_efficiency": None,
        "unit_choice": {
            "kept": False,
            "split": "chip",
            "with": side,
            "without": {"median": 0.2, "observations": 13, "untested_groups": []},
        },
        "basis": "fitted",
        "fixed": {},
        "error": None,
    }
    table = {"version": "v9", "families": {"gpu": gpu}}
    monkeypatch.setattr(predictions, "constants_table", lambda: table)
    text, _ = constants_section([], tmp_path)
    assert (
        "| fitted; vector units' own efficiency: not kept, one efficiency for every unit "
        "(leave one chip out median 41% over 7, V100 SXM2 untested with it, median 20% over "
        "13 without) |"
    ) in _lines(text, "| gpu")[0]
    kept = {**gpu, "vector_efficiency": 0.7, "unit_choice": {**gpu["unit_choice"], "kept": True}}
    table["families"]["gpu"] = kept
    text, _ = constants_section([], tmp_path)
    assert "vector units' own efficiency: 0.700 of their peak (leave one chip out" in text


@pytest.mark.parametrize("kept", [True, False])
def test_the_answer_says_where_published_figures_include_their_runs_loop(
    tmp_path, monkeypatch, kept
):
    from experiments import predictions
    from experiments.studies.roofline import roofline_answer

    choice = {
        "kept": kept,
        "fitted_s": 0.026,
        "leave_one_out_median_with": 0.11,
        "leave_one_out_median_without": 0.18,
    }
    table = {"version": "v9", "families": {"tpu": {"error": None, "loop_choice": choice}}}
    monkeypatch.setattr(predictions, "constants_table", lambda: table)
    text, _ = roofline_answer([], tmp_path)
    line = "On TPUs, a published figure is compared with the predicted step plus"
    assert (line in text) is kept
    if kept:
        assert "26.0 ms per step (leave-one-out median error 11% with it, 18% without)" in text


def test_a_measured_step_is_called_in_sample_only_where_the_constants_were_fitted_to_it(
    tmp_path, monkeypatch
):
    from experiments import predictions
    from experiments.studies.roofline import roofline_answer
    from jaxcnn import prediction as prediction_lib

    family = {"compute_efficiency": 0.5, "memory_efficiency": 1.0, "kernel_overhead_s": 0.0}
    fitted = {"source": "record g1", "held_out": None}
    table = {"version": "t1", "families": {"gpu": {**family, "observations": [fitted]}}}
    monkeypatch.setattr(prediction_lib, "constants", lambda path=None: table)
    monkeypatch.setattr(predictions, "constants_table", lambda: table)
    rs = []
    for run_id in ("g1", "g2"):  # g1 fitted the constants, g2 (a user's new run) did not
        r = _measured(run_id, H100, 128, 0.001, None)
        r.update(
            kernels=[[1, "conv", 400e-6 * 495e12 * 0.5, 0, "f32", 0]],
            kernels_source={"program": "train_step", "steps": 1},
        )
        rs.append(r)
    text, _ = roofline_answer(rs, tmp_path)
    # One figure per claim: the answer gives the out-of-sample step alone, its population
    # named in its sentence; the step the constants were fitted to adds no second figure.
    assert "Over the 1 steps measured here on gpu NVIDIA H100 80GB HBM3 that carry" in text
    assert "that the constants were not fitted to (out of sample)" in text
    assert "in-sample" not in text
    text, _ = roofline_answer(rs[:1], tmp_path)
    assert "Over the" not in text  # the control: only fitted steps, no such line


def test_the_devices_answer_divides_by_the_same_program_and_by_the_cpu_at_its_best(
    tmp_path, monkeypatch
):
    from experiments.studies.devices import devices_answer

    slow = _record("d1", CPU, "mnist_cnn", 128, median=0.08)
    slow["workload"].update(study="devices", dataset="mnist")
    fast = _record("b1", CPU, "mnist_cnn", 128, median=0.02)  # the bench's best loop
    fast["workload"].update(study="bench", dataset="synthetic", loop="device")
    fast["loop"] = "device"
    target = _compiled(H100_TARGET, "mnist_cnn", 128, "ok", 1.0, step=2e-3)
    _priced_by_one_memory_kernel(monkeypatch, "gpu", [(target, 2e-3)])
    answer, _ = devices_answer([slow, fast, target], tmp_path)
    # 64,000 images/s predicted: 40x the same program's 1,600, 10x the CPU's best 6,400
    assert "gpu-h100 64,000 (40x like for like, 10x the CPU at its best)" in answer
    assert "at its best 20 ms/step (jax xla device f32)" in answer
    # The control: with no faster CPU figure, both ratios are the same program's.
    answer, _ = devices_answer([slow, target], tmp_path)
    assert "gpu-h100 64,000 (40x like for like, 40x the CPU at its best)" in answer


def test_a_measured_accelerator_speedup_is_shown_beside_the_models_prediction_of_it(
    tmp_path, monkeypatch
):
    from experiments.studies.devices import devices_answer
    from jaxcnn import prediction as prediction_lib

    family = {"compute_efficiency": 0.5, "memory_efficiency": 1.0, "kernel_overhead_s": 0.0}
    table = {"version": "t1", "families": {"gpu": family}}
    monkeypatch.setattr(prediction_lib, "constants", lambda path=None: table)
    cpu = _record("c1", CPU, "mnist_cnn", 128, median=0.05)
    gpu = _record("g1", H100, "mnist_cnn", 128, median=0.001)  # one machine's GPU: 50x
    for r in (cpu, gpu):
        r["workload"].update(study="devices", dataset="mnist")
    answer, _ = devices_answer([cpu, gpu], tmp_path)
    assert "on gpu NVIDIA H100 80GB HBM3: measured 50.0x like for like, 50.0x over" in answer
    assert "predicted" not in answer.split("predicted for the accelerator's step:")[1]
    # With its kernels: one conv taking 1.25 ms at the H100's TF32 peak x 0.5, the batch's
    # copy beside it; the model's speedup and its error on this very step.
    gpu.update(
        kernels=[[1, "conv", 1.25e-3 * 495e12 * 0.5, 0, "f32", 0]],
        kernels_source={"program": "train_step", "steps": 1},
    )
    answer, _ = devices_answer([cpu, gpu], tmp_path)
    # 1.25 ms and the copy (1.6 us): 39.9x, 25% slower than measured
    assert ", predicted 39.9x (the predicted step +25% off the measured one; predicted: " in answer
