"""The per-kernel prediction: a chip's rates, the fitted constants, and the fit itself.

The kernel reader (jaxcnn.perf.hlo) has its own tests; here kernels are written by hand
so every expected time is computed in the test from the constants it sets.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import immutable, needs_extra, typed

from experiments import records
from experiments.cli import fit as fit_cli
from experiments.cli import repredict as repredict_cli
from experiments.predict import observations as fit_predictions
from experiments.predict import shown as predictions
from jaxcnn.perf import chips, hlo, predict, price
from jaxcnn.perf import fit as fit_lib
from jaxcnn.perf import host as host_lib
from jaxcnn.perf import rates as rates_lib
from jaxcnn.perf import runtime as runtime_lib
from jaxcnn.perf.hlo import Kernel


def _predicted(*args, **kwargs) -> dict | None:
    """predict.predict's Prediction as the record block it writes."""
    found = predict.predict(*args, **kwargs)
    return None if found is None else found.as_record()


def _band(median: float, worst: float, n: int) -> dict:
    return {"median": median, "worst": worst, "observations": n}


A100 = SimpleNamespace(
    platform="gpu", device_kind="NVIDIA A100-SXM4-40GB", compute_capability="8.0"
)
T4 = SimpleNamespace(platform="gpu", device_kind="Tesla T4", compute_capability="7.5")
V3 = SimpleNamespace(platform="tpu", device_kind="TPU v3", compute_capability=None)

TABLE = {
    "version": "test",
    "families": {
        "gpu": {
            "compute_efficiency": 0.5,
            "memory_efficiency": 0.8,
            "kernel_overhead_s": 4e-6,
            "error": {
                "split": "chip",
                "chips": ["A100"],
                "splits": {
                    "chip": {"regimes": {"large": _band(0.2, 0.5, 5), "small": None}},
                    "program": {"regimes": {"large": _band(0.1, 0.3, 6), "small": None}},
                },
            },
        }
    },
}


DEVICE = predict.DEVICE_STEP  # what the bands above were measured on (none says)


def _gemm(flops: float, nbytes: float, count: int = 1, dtype: str = "f32") -> Kernel:
    return Kernel("gemm", "gemm", flops, nbytes, dtype, count)


def _log_steps(obs: list, constants: dict) -> np.ndarray:
    """Each observation's log step time as the per-kernel model prices it with `constants`."""
    return np.log(
        [
            price.step_time(list(o.kernels), o.rates, price.Constants.of(constants))["seconds"]
            for o in obs
        ]
    )


def _assert_recovered_where_identifiable(obs: list, truth: dict, fitted: dict) -> None:
    """What a fit to observations the truth made exactly can promise, on any CPU.

    The truth's loss is zero, so the fit must reproduce the observations; L-BFGS-B stops
    at its gradient tolerance, not at zero, so a small residual remains. Each constant is
    identifiable where the model's log step times, differentiated by the log constants at
    the truth, have full rank; how far a constant can then be from the truth is that
    residual through the pseudo-inverse of that Jacobian (to first order). A constant the
    observations resolve to 2% must be within 2%; one they resolve worse must be within
    its resolution (the linear bound, with room for the model's curvature)."""
    names = list(truth)
    residual = _log_steps(obs, {p: fitted[p] for p in names}) - np.log([o.measured_s for o in obs])
    assert np.abs(residual).max() < 0.01  # the optimum reproduces the steps
    at_truth = _log_steps(obs, truth)
    columns = []
    for name in names:
        nudged = {**truth, name: truth[name] * math.exp(1e-6)}
        columns.append((_log_steps(obs, nudged) - at_truth) / 1e-6)
    jacobian = np.array(columns).T
    assert np.linalg.matrix_rank(jacobian) == len(names)  # every constant identifiable
    spread = np.linalg.norm(residual) * np.linalg.norm(np.linalg.pinv(jacobian), axis=1)
    for name, resolution in zip(names, spread, strict=True):
        off = abs(math.log(fitted[name] / truth[name]))
        assert off <= max(0.02, 1.5 * resolution), (name, off, resolution)


def test_vendor_rates_price_f32_at_the_precision_its_matmuls_run_in():
    # A100: f32 matmuls run as TF32 (156 TFLOP/s); T4 has no TF32: fp32 (8.1).
    assert rates_lib.of_device(A100).peak_flops_per_s["f32"] == pytest.approx(156e12)
    assert rates_lib.of_device(A100).peak_flops_per_s["bf16"] == pytest.approx(312e12)
    assert rates_lib.of_device(T4).peak_flops_per_s["f32"] == pytest.approx(8.1e12)
    assert rates_lib.of_device(A100).bytes_per_s == pytest.approx(1555e9)


def test_a_chip_of_two_devices_gives_each_half_its_rates():
    one, half = rates_lib.of_device(V3), rates_lib.of_device(V3, devices_per_chip=2)
    assert half.peak_flops_per_s["f32"] == pytest.approx(one.peak_flops_per_s["f32"] / 2)
    assert half.bytes_per_s == pytest.approx(one.bytes_per_s / 2)


def test_measured_rates_come_from_the_run_and_say_so():
    rates = rates_lib.measured(
        {"float32": {"tflops": 0.2}, "bfloat16": {"tflops": None}}, {"bytes_per_s": 1e10}
    )
    assert rates.peak_flops_per_s == {"f32": pytest.approx(2e11)}
    assert (rates.bytes_per_s, rates.source) == (1e10, "measured")
    assert rates.interconnect_bytes_per_s is None and rates.host_link_bytes_per_s is None


def test_each_kernel_is_the_larger_of_its_compute_and_memory_times_plus_its_launch():
    rates = rates_lib.of_device(A100)
    compute_bound = _gemm(flops=156e12 * 1e-3, nbytes=1e6)  # 1 ms at peak, 2 ms at 0.5
    memory_bound = _gemm(flops=0, nbytes=1555e9 * 1e-3, count=3)  # 1 ms at bw, 1.25 at 0.8
    block = _predicted([compute_bound, memory_bound], rates, "gpu", 64, table=TABLE)
    expected = (2e-3 + 4e-6) + 3 * (1.25e-3 + 4e-6)
    assert block["step_time_s"] == pytest.approx(expected)
    assert block["images_per_s"] == pytest.approx(64 / expected)
    assert block["kernels"] == 4
    assert block["method"] == "per-kernel" and block["constants_version"] == "test"
    # 2.4 GFLOP per image: a large program. A100 is not named: the band of a chip the
    # fit held out (leave one chip out).
    assert block["regime"] == "large"
    assert block["error_band"] == {**_band(0.2, 0.5, 5), "split": "chip", "quantity": DEVICE}


def test_a_prediction_is_shown_with_the_band_of_the_split_that_matches_its_claim():
    big = [_gemm(flops=2e9 * 64, nbytes=1e6)]  # 2 GFLOP per image at batch 64: large
    rates = rates_lib.of_device(A100)
    seen = _predicted(big, rates, "gpu", 64, chip="A100", table=TABLE)
    unseen = _predicted(big, rates, "gpu", 64, chip="T4", table=TABLE)
    assert seen["error_band"] == {**_band(0.1, 0.3, 6), "split": "program", "quantity": DEVICE}
    assert unseen["error_band"] == {**_band(0.2, 0.5, 5), "split": "chip", "quantity": DEVICE}
    # fewer held out than MIN_BAND_ROWS make no band: unvalidated (the control above, at it)
    thin = _band(0.2, 0.5, predict.MIN_BAND_ROWS - 1)
    error = TABLE["families"]["gpu"]["error"]
    splits = {**error["splits"], "chip": {"regimes": {"large": thin}}}
    gpu = {**TABLE["families"]["gpu"], "error": {**error, "splits": splits}}
    few = {**TABLE, "families": {"gpu": gpu}}
    assert _predicted(big, rates, "gpu", 64, chip="T4", table=few)["error_band"] is None
    # A small program (the control: the same chips) has no band: no small program was
    # measured, so it is unvalidated rather than shown with the large programs' band.
    small = [_gemm(flops=1e6 * 64, nbytes=1e6)]
    block = _predicted(small, rates, "gpu", 64, chip="A100", table=TABLE)
    assert block["regime"] == "small" and block["error_band"] is None
    assert "unvalidated" in predictions.label(block)
    # the regime is per image on one device: the same kernels over 8 devices' batch
    spread = _predicted(big, rates, "gpu", 8 * 64, devices=8, chip="A100", table=TABLE)
    assert spread["regime"] == "large"


def test_a_prediction_label_says_which_way_its_band_errs_where_it_was_counted():
    band = {**_band(0.2, 0.5, 9), "split": "chip", "quantity": DEVICE}
    block = {"method": "per-kernel", "constants_version": "v", "error_band": band}
    said = predictions.label({**block, "error_band": {**band, "faster": 4}})
    assert said.endswith("median 20%, worst 50%, prediction faster in 4 of 9")
    assert "faster" not in predictions.label(block)  # the control: not counted, not said


def test_a_step_is_never_faster_than_its_launches():
    # Tiny kernels: nothing but the fixed cost of launching each.
    tiny = [_gemm(flops=10, nbytes=10, count=58)]
    block = _predicted(tiny, rates_lib.of_device(A100), "gpu", 128, table=TABLE)
    assert block["step_time_s"] >= 58 * 4e-6


def test_bf16_kernels_run_at_the_bf16_peak_and_a_chip_without_one_at_f32s():
    flops = 1e12
    a100 = _predicted(
        [_gemm(flops, 0, dtype="bf16")], rates_lib.of_device(A100), "gpu", 1, table=TABLE
    )
    t4 = _predicted([_gemm(flops, 0, dtype="bf16")], rates_lib.of_device(T4), "gpu", 1, table=TABLE)
    assert a100["compute_s"] == pytest.approx(flops / (312e12 * 0.5))
    assert t4["compute_s"] == pytest.approx(flops / (8.1e12 * 0.5))  # no bf16 units on a T4


def test_no_prediction_for_a_platform_without_constants_or_a_chip_without_rates():
    k = [_gemm(1e9, 1e6)]
    assert _predicted(k, rates_lib.of_device(A100), "tpu", 1, table=TABLE) is None
    unknown = SimpleNamespace(platform="gpu", device_kind="NVIDIA L40S", compute_capability=None)
    assert _predicted(k, rates_lib.of_device(unknown), "gpu", 1, table=TABLE) is None


def test_the_committed_constants_have_every_platform_and_a_version():
    table = predict.constants()
    assert set(table["families"]) >= {"cpu", "gpu", "tpu"}
    for platform, family in table["families"].items():
        # Against a datasheet's rates at most 1; against a CPU's measured ceiling, which
        # the step's larger GEMMs pass, up to fit_lib.MEASURED_RATE_BOUNDS.
        most = 1 if platform != "cpu" else fit_lib.MEASURED_RATE_BOUNDS["compute_efficiency"][1]
        assert 0 < family["compute_efficiency"] <= most
        assert 0 < family["memory_efficiency"] <= 1
        assert family["kernel_overhead_s"] >= 0
    assert table["version"]


# --- The report's reading of a record ---------------------------------------------------


def test_a_record_without_kernels_shows_its_roofline_as_a_bound():
    record = typed(
        ran(
            "t4",
            device={"platform": "gpu", "kind": "Tesla T4"},
            prediction={"step_time_s": 1e-5, "method": "roofline"},
        )
    )
    block = predictions.of(record)
    assert block["method"] == "roofline bound"
    assert predictions.label(block) == "predicted: roofline bound (not a prediction, no error band)"


def test_a_record_with_kernels_is_priced_by_the_current_constants():
    record = typed(
        ran(
            "a100",
            device={"platform": "gpu", "kind": "NVIDIA A100-SXM4-40GB"},
            kernels=[[2, "gemm", 156e12 * 1e-3, 0, "f32", 0]],
            prediction={"step_time_s": 1.0, "method": "per-kernel", "constants_version": "old"},
        )
    )
    block = predictions.of(record, table=TABLE)
    assert block["constants_version"] == "test"
    assert block["step_time_s"] == pytest.approx(2 * (2e-3 + 4e-6))


STEP = {"median": 0.01, "p10": 0.01, "p90": 0.01, "n": 20}


def ran(run_id: str, device: dict | None = None, workload: dict | None = None, **more) -> dict:
    """A train record that ran ok, a step of 0.01 s (as its line holds it: conftest's
    typed completes it and makes it the reader's), on a CPU VM unless `device` says."""
    workload = {"batch_size": 8, **(workload or {})}
    return {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": "ok",
        "device": {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1,
                   "host": "vm", **(device or {})},
        "env": {"host": "vm"},
        "workload": workload,
        "params": {"trainable": 10, "non_trainable": 0},
        "step_time_s": STEP,
        "compile_time_s": {"train": 1.0, "eval": 0.5},
        "images_per_s": workload["batch_size"] / STEP["median"],
        **more,
    }  # fmt: skip


def compile_record(run_id: str = "compiled", target: dict | None = None, **more) -> dict:
    """A compile-only record that compiled and fits (as its line holds it: conftest's
    typed completes it), for one A100 unless `target` (and `device`) say otherwise."""
    target = {"name": "gpu-a100", "platform": "gpu", "chip": "A100", "chips": 1, "devices": 1,
              **(target or {})}  # fmt: skip
    workload = {"kind": "compile", "target": target["name"], "dataset": "synthetic",
                "epochs": 0, **more.pop("workload", {})}  # fmt: skip
    device = {"platform": target["platform"], "kind": "NVIDIA A100-SXM4-40GB",
              "count": target["devices"], "process_count": 1, **more.pop("device", {})}  # fmt: skip
    return {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": run_id,
        "status": "ok",
        "compiled_not_run": True,
        "device": device,
        "env": {"utc_time": "2026-11-24T00:00:00+00:00"},
        "workload": workload,
        "target": target,
        "params": {"trainable": 10, "non_trainable": 0},
        "compile_time_s": {"train": 1.0},
        "memory": {"total_bytes": 2**20},
        **more,
    }


def _cpu_record(run_id: str, f32_tflops: float, cpu_model: str, **more):
    return typed(
        ran(
            run_id,
            env={"host": "vm", "cpu": {"model": cpu_model, "extensions": ["AVX2"]}},
            matmul_ceiling={"float32": {"tflops": f32_tflops, "size": 1024}},
            bandwidth={"bytes_per_s": 40e9},
            **more,
        )
    )


def test_a_measured_cpu_step_is_priced_at_the_best_ceiling_its_machine_measured():
    disturbed = _cpu_record("disturbed", 0.1, "EPYC")
    calm = _cpu_record("calm", 0.2, "EPYC")
    elsewhere = _cpu_record("elsewhere", 0.1, "Xeon")  # the control: another CPU
    compiled = typed(compile_record())  # compiled, never run: priced at its target's
    ceilings = predictions.machine_ceilings([disturbed, calm, elsewhere, compiled])
    assert predictions.rates_of(disturbed, ceilings).peak_flops_per_s["f32"] == 0.2e12
    assert predictions.rates_of(calm, ceilings).peak_flops_per_s["f32"] == 0.2e12
    assert predictions.rates_of(elsewhere, ceilings).peak_flops_per_s["f32"] == 0.1e12
    assert predictions.rates_of(compiled, ceilings) == predictions.rates_of(compiled)
    assert predictions.rates_of(disturbed, ceilings).bytes_per_s == 40e9  # its own
    # the record keeps what it measured; without the machine's records, its own is used
    assert disturbed.matmul_ceiling["float32"].tflops == 0.1
    assert predictions.rates_of(disturbed).peak_flops_per_s["f32"] == 0.1e12


# --- The fit --------------------------------------------------------------------------

# Hand-built GEMMs (FLOPs, bytes, launches) spanning compute-bound, memory-bound and
# launch-bound steps: five pin a fit's three constants with room to hold each out;
# MORE_CELLS for fits with more constants free.
CELLS = ((1e12, 1e6, 1), (1e9, 1e9, 1), (1e6, 1e4, 50), (5e11, 5e8, 3), (1e8, 1e3, 400))
MORE_CELLS = ((2e12, 1e7, 1), (1e7, 3e9, 2))


def _observation(flops: float, nbytes: float, count: int, truth: dict, i: int):
    rates = rates_lib.of_device(A100)
    k = (_gemm(flops, nbytes, count),)
    costs = price.Constants.of(truth)
    seconds = price.step_time(list(k), rates, costs)["seconds"]
    return fit_lib.Observation(f"cell {i}", "gpu", k, rates, 1, seconds, f"test {i}")


def test_the_fit_recovers_the_constants_that_made_its_observations():
    truth = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    cells = [*CELLS, *MORE_CELLS]
    obs = [_observation(f, b, n, truth, i) for i, (f, b, n) in enumerate(cells)]
    fitted = fit_lib.fit_platform("gpu", obs)
    for name, value in truth.items():
        assert fitted[name] == pytest.approx(value, rel=0.02)
    assert fitted["error"]["median"] < 0.02 and fitted["error"]["observations"] == len(cells)
    assert fitted["error"]["quantity"] == predict.DEVICE_STEP  # what it was measured on


def test_convolutions_written_as_loops_get_their_own_fitted_fraction_of_peak():
    truth = {
        "compute_efficiency": 0.4,
        "memory_efficiency": 0.7,
        "kernel_overhead_s": 5e-6,
        "elemental_conv_efficiency": 0.02,
    }
    rates = rates_lib.of_device(A100)
    # A CPU's GEMMs are library calls with their own fixed cost and bytes' rate: two more
    # constants to fit.
    cells = [*CELLS, *MORE_CELLS, (3e8, 2e8, 5)]
    obs = []
    for i, (f, b, n) in enumerate(cells):
        ks = (_gemm(f, b, n), Kernel("loops", "elemental_conv", f / 10, b, "f32", 1))
        seconds = price.step_time(list(ks), rates, price.Constants.of(truth))["seconds"]
        obs.append(fit_lib.Observation(f"c{i}", "cpu", ks, rates, 1, seconds, "t"))
    fitted = fit_lib.fit_platform("cpu", obs)
    for name, value in truth.items():
        assert fitted[name] == pytest.approx(value, rel=0.02)
    # Without such kernels the constant is not made up: the platform has none.
    plain = [_observation(f, b, n, truth, i) for i, (f, b, n) in enumerate(cells)]
    assert fit_lib.fit_platform("gpu", plain)["elemental_conv_efficiency"] is None


def test_kernels_may_pass_a_measured_ceiling_but_never_a_datasheet_peak():
    truth = {"compute_efficiency": 1.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    # One cell more than the CPU's free constants (its cache's and its library calls' rates
    # among them).
    cells = list(CELLS)
    cells += [(2e12, 1e7, 1), (3e10, 2e5, 7)]
    vendor = [_observation(f, b, n, truth, i) for i, (f, b, n) in enumerate(cells)]
    measured = [
        dataclasses.replace(o, rates=dataclasses.replace(o.rates, source="measured"))
        for o in vendor
    ]
    assert fit_lib.fit_platform("cpu", measured)["compute_efficiency"] == pytest.approx(
        1.4, rel=0.02
    )
    assert fit_lib.fit_platform("gpu", vendor)["compute_efficiency"] <= 1.0


def test_held_out_observations_are_predicted_but_not_fitted():
    truth = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    cells = list(CELLS)
    obs = [_observation(f, b, n, truth, i) for i, (f, b, n) in enumerate(cells)]
    wild = fit_lib.Observation(
        "wild",
        "gpu",
        obs[0].kernels,
        obs[0].rates,
        1,
        obs[0].measured_s * 10,
        "test wild",
        held_out="a caveat",
    )
    fitted = fit_lib.fit_platform("gpu", [*obs, wild])
    assert fitted["compute_efficiency"] == pytest.approx(0.4, rel=0.02)  # untouched by it
    row = next(r for r in fitted["observations"] if r["label"] == "wild")
    assert row["held_out"] == "a caveat" and row["predicted_s"] == pytest.approx(
        obs[0].measured_s, rel=0.02
    )


def _published(truth: dict, loop_s: float) -> list:
    """Published observations of one GEMM at several batches (a batch scales its work),
    each step plus `loop_s` of its run's loop."""
    rates = rates_lib.of_device(A100)
    costs = price.Constants.of(truth)
    obs = []
    for i, batch in enumerate((16, 32, 64, 128, 256, 512, 1024)):
        k = (_gemm(2e10 * batch, 4e7 * batch * (1 + i % 3), 40),)
        seconds = price.step_time(list(k), rates, costs)["seconds"] + loop_s
        obs.append(
            fit_lib.Observation(
                f"ref {i}", "gpu", k, rates, batch, seconds, f"reference {i}", published=True
            )
        )
    return obs


def test_a_published_runs_loop_cost_is_fitted_and_kept_where_the_figures_show_one():
    truth = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    fixed = {"kernel_overhead_s": (5e-6, "held")}
    fitted = fit_lib.fit_platform("gpu", _published(truth, 0.03), fixed)
    assert fitted["loop_choice"]["kept"] is True
    assert fitted["published_loop_step_s"] == pytest.approx(0.03, rel=0.02)
    assert fitted["compute_efficiency"] == pytest.approx(0.4, rel=0.02)
    assert fitted["error"]["median"] < 0.02
    row = fitted["observations"][0]
    assert row["predicted_s"] == pytest.approx(row["measured_s"], rel=0.02)  # loop included
    # The control: figures with no such cost do not keep one.
    plain = fit_lib.fit_platform("gpu", _published(truth, 0.0), fixed)
    assert plain["loop_choice"]["kept"] is False and plain["published_loop_step_s"] is None
    assert plain["compute_efficiency"] == pytest.approx(0.4, rel=0.02)


def test_measured_steps_are_never_given_a_published_runs_loop_cost():
    truth = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    measured = [dataclasses.replace(o, published=False) for o in _published(truth, 0.03)]
    fitted = fit_lib.fit_platform("gpu", measured)
    assert fitted["published_loop_step_s"] is None and fitted["loop_choice"] is None


def test_a_platform_with_too_few_observations_says_its_constants_are_assumed():
    fitted = fit_lib.fit_platform("tpu", [])
    assert fitted["basis"].startswith("assumed") and fitted["error"] is None
    assert not math.isnan(fitted["compute_efficiency"])


@pytest.mark.slow
def test_the_fit_is_reproducible_from_the_committed_references_and_records():
    # The committed constants are what the procedure gives on the committed inputs.
    from pathlib import Path

    from experiments import records
    from experiments.predict import references

    results = Path(__file__).parent.parent / "results"
    again = fit_predictions.fit(records.load(results), references.load())
    committed = json.loads(predict.CONSTANTS_FILE.read_text())
    for platform, family in committed["families"].items():
        for name in fit_lib.PARAMETERS:
            if family[name] is None:  # a constant the platform has none of
                assert again["families"][platform][name] is None
            else:
                assert again["families"][platform][name] == pytest.approx(family[name], rel=1e-3)
    assert committed["families"]["cpu"]["elemental_conv_efficiency"] is not None
    assert committed["families"]["gpu"]["elemental_conv_efficiency"] is None


# --- The defects of the whole-program roofline, on real compiled programs ---------------

DATA = Path(__file__).resolve().parent / "data"


def _program(name: str) -> list[Kernel]:
    import gzip

    return hlo.kernels(gzip.decompress((DATA / f"{name}.hlo.gz").read_bytes()).decode())


def test_a_gpu_prediction_prices_memory_traffic_and_launches_not_flops_alone():
    # The roofline of a deviceless XLA:GPU compile had no bytes (no cost analysis) and
    # priced mnist_cnn's step at its FLOPs over the T4's peak alone.
    ks = _program("gpu-t4_mnist_train")
    block = _predicted(ks, rates_lib.of_device(T4), "gpu", 128, table=TABLE)
    flops = sum(k.flops * k.count for k in ks)
    flops_only = flops / 8.1e12
    assert block["memory_s"] > 0 and block["overhead_s"] == pytest.approx(58 * 4e-6)
    assert block["kernels"] == 58
    assert block["step_time_s"] > 2 * flops_only


def test_a_small_models_step_is_priced_by_its_launches():
    # mnist_cnn on a T4: 58 kernels; the roofline said 9 M images/s on an A100 (1.8 us a
    # step), less than the launches of its kernels take.
    ks = _program("gpu-t4_mnist_train")
    block = _predicted(ks, rates_lib.of_device(A100), "gpu", 128, table=TABLE)
    assert block["step_time_s"] >= 58 * TABLE["families"]["gpu"]["kernel_overhead_s"]
    assert block["images_per_s"] < 128 / (58 * 4e-6)


@pytest.mark.slow
@needs_extra("targets")
def test_a_small_step_grows_less_than_its_batch_as_real_gpu_steps_do(tmp_path):
    # Seed 002's question needs this: at small batches a GPU step is launches and
    # memory traffic, so 8x the batch costs far less than 8x the time; the roofline
    # (FLOPs over peak) grew exactly with the batch.
    from experiments.harness import compile_only
    from experiments.records.workload import Workload
    from jaxcnn import targets

    devices = list(targets.abstract_devices(targets.get("gpu-t4")))
    times = {}
    for batch in (16, 128):
        workload = Workload(model="mnist_cnn", batch_size=batch, kind="compile", target="gpu-t4")
        program, _ = compile_only.step_program(workload, devices)
        ks = hlo.kernels(program.as_text())
        block = _predicted(ks, rates_lib.of_device(T4), "gpu", batch, table=TABLE)
        times[batch] = block["step_time_s"]
    assert 1 < times[128] / times[16] < 0.75 * 8


# --- Published references, matched to compile records ---------------------------------


def _reference(**fields):
    from experiments.predict.references import Reference

    row = dict(
        id="ref-a100",
        chip="A100",
        chips=1,
        model="resnet50",
        model_notes="the same network",
        image_size=224,
        precision="tf32",
        batch_per_chip=256,
        images_per_s_per_chip=1000.0,
        step_time_s=None,
        framework="test",
        source_url="https://example.org",
        quote="a row",
        notes="",
        held_out=None,
    )
    row.update(fields)
    return Reference(**row)


# One kernel whose compute at the A100's TF32 peak x 0.5 takes `seconds`.
def _resnet50_kernels(seconds: float = 0.2) -> list:
    return [[1, "conv", seconds * 156e12 * 0.5, 0, "f32", 0]]


def _compile_record(batch: int, precision: str = "f32", seconds: float = 0.2):
    return typed(
        compile_record(
            f"resnet50 {batch} {precision}",
            kernels=_resnet50_kernels(seconds),
            kernels_source={"program": "train_step", "steps": 1},
            workload={"model": "resnet50", "precision": precision, "batch_size": batch},
        )
    )


def test_a_reference_is_predicted_from_the_compile_record_of_its_program(monkeypatch):
    monkeypatch.setattr(predict, "constants", lambda path=None: TABLE)
    records = [_compile_record(128), _compile_record(256), _compile_record(256, "bf16")]
    [row] = predictions.versus_published(records, [_reference()])
    assert row["record"] is records[1]  # same chip, model, precision, batch per chip
    host = predictions.host_of(records[1], TABLE)["host_s"]
    assert host > 0  # the batch's copy over the A100's PCIe Gen4 x16
    expected = 256 / (0.2 + 4e-6 + host)
    assert row["predicted"] == pytest.approx(expected)
    assert row["ratio"] == pytest.approx(expected / 1000.0)


def test_a_published_figure_is_predicted_with_the_loop_cost_its_platform_kept(monkeypatch):
    gpu = {**TABLE["families"]["gpu"], "published_loop_step_s": 0.05}
    monkeypatch.setattr(predict, "constants", lambda path=None: {**TABLE, "families": {"gpu": gpu}})
    [row] = predictions.versus_published([_compile_record(256)], [_reference()])
    step = 0.2 + 4e-6 + predictions.host_of(_compile_record(256), TABLE)["host_s"]
    assert row["predicted"] == pytest.approx(256 / (step + 0.05))
    assert row["predicted_step"] == pytest.approx(256 / step)  # the step alone
    assert row["ratio"] == pytest.approx(row["predicted"] / 1000.0)
    # A record's own prediction never includes it, in its device step or its loop step.
    block = predictions.of(_compile_record(256))
    assert block["step_time_s"] == block["device_step_s"] == pytest.approx(0.2 + 4e-6)
    assert block["loop_step_s"] < block["device_step_s"] + 0.05


def test_a_reference_without_a_program_says_why_and_how_to_compile_it():
    amp_on_v100 = _reference(id="v100-amp", chip="V100 SXM2", precision="amp")
    missing = _reference(batch_per_chip=512)
    rows = predictions.versus_published([_compile_record(256)], [amp_on_v100, missing])
    assert "bf16, which a V100 SXM2 lacks" in rows[0]["why"]
    assert "--compile-missing" in rows[1]["why"] and rows[1]["predicted"] is None


def test_the_reference_workload_is_the_chips_smallest_target_at_its_batch_per_chip():
    v3 = predictions.reference_workload(
        _reference(chip="TPU v3", precision="bf16", batch_per_chip=64)
    )
    assert (v3.target, v3.batch_size, v3.strategy, v3.precision) == (
        "tpu-v3-8",
        256,
        "sharded",
        "bf16",
    )
    assert v3.study == "references" and v3.kind == "compile"


HOST_LOOP = {
    "steps": 20,
    "steps_per_epoch": 468,  # MNIST at batch 128: epochs of a training run
    "check_every": 50,
    "syncs": 1,
    "parts": {
        "batch": {"median": 50e-6, "mean": 60e-6, "n": 20},
        "put": {"median": 100e-6, "mean": 120e-6, "n": 20},
        "dispatch": {"median": 80e-6, "mean": 3e-3, "n": 20},  # some calls waited
        "metrics": {"median": 2e-6, "mean": 2e-6, "n": 20},
        "progress": {"median": 1e-6, "mean": 1e-6, "n": 20},
        "sync": {"median": 1e-6, "mean": 1e-6 + 2e-3 / 20, "n": 20},
        "wait": {"median": 0.5, "mean": 0.5, "n": 1},
    },
}


def _host(**more) -> dict:
    args = dict(
        measured=HOST_LOOP, dispatch_s=40e-6, batch_bytes=1_000_000, host_link_bytes_per_s=10e9
    )
    return host_lib.host_side(**{**args, **more})


def test_the_host_parts_per_step_are_the_medians_and_a_sync_spread_over_its_steps():
    parts = host_lib.per_step(HOST_LOOP)
    assert parts["dispatch"] == pytest.approx(80e-6)  # not the mean: the waits are the device's
    assert parts["sync"] == pytest.approx(1e-6 + 2e-3 / 50)  # one fetch per 50 steps
    # An epoch shorter than 50 steps syncs at its end: once per epoch.
    assert host_lib.per_step(HOST_LOOP, 10)["sync"] == pytest.approx(1e-6 + 2e-3 / 10)
    assert host_lib.per_step({"parts": {}}) == dict.fromkeys(host_lib.PARTS)


def test_the_step_loop_copies_its_batch_every_step_and_a_cpu_copies_nothing():
    assert _host()["transfer_s"] == pytest.approx(1e-4)  # 1 MB over 10 GB/s
    assert _host(batch_bytes=2_000_000)["transfer_s"] == pytest.approx(2e-4)  # twice
    assert _host(host_link_bytes_per_s=None, platform="cpu")["transfer_s"] == 0.0
    # What a step called alone adds (the fit's known part): the round trip and the copy;
    # in the device loop, one round trip per call of 100 steps and no copy.
    assert _host()["host_s"] == pytest.approx(140e-6)
    assert _host(loop="device", steps=100)["host_s"] == pytest.approx(40e-6 / 100)


def test_a_host_part_without_a_figure_is_left_out_and_named():
    rates = rates_lib.of_device(A100)
    kernels = [_gemm(flops=0, nbytes=1555e9 * 1e-3)]  # 1.25 ms at 0.8 of the bandwidth
    unknown = _host(measured=None, host_link_bytes_per_s=None)
    block = _predicted(kernels, rates, "gpu", 64, host=unknown, table=TABLE)
    # The runtime's host side: no GPU client dispatch is published, and a program whose
    # kernels' order is not known cannot be told into CUDA graphs.
    runtime_missing = [
        "runtime_dispatch: no published GPU client dispatch measured alone",
        "kernel_launches, graph_launches: the kernels' order is not known",
    ]
    assert block["loop_left_out"] == [*host_lib.PARTS, host_lib.TRANSFER, *runtime_missing]
    # The host's one known part, the batch's one copy's latency, hides under the kernels
    # but for the one step in 50 that syncs.
    latency = block["loop_parts"]["copy_latency"]
    assert latency == runtime_lib.used("gpu", "copy_latency").seconds
    assert block["loop_step_s"] == pytest.approx(block["device_step_s"] + latency / 50)
    # The control: parts measured on the CPU's client, a published link and the launches
    # known leave out only what no source publishes.
    counts = {"kernels": 1, "outside_graphs": 1, "graphs": 0, "graph_nodes": 0}
    on_cpu = _host(measured=None, modelled=host_lib.per_step(HOST_LOOP), modelled_on="cpu")
    known = _predicted(kernels, rates, "gpu", 64, host=on_cpu, launches=counts, table=TABLE)
    assert known["loop_left_out"] == runtime_missing[:1]
    assert known["loop_step_s"] > known["device_step_s"]
    # Parts timed on the GPU's own client hold its runtime's: nothing is added or missing.
    own = _predicted(kernels, rates, "gpu", 64, host=_host(), launches=counts, table=TABLE)
    assert own["loop_left_out"] == [] and own["loop_parts_platform"] == "gpu"


@pytest.mark.parametrize("platform", ["gpu", "tpu", "cpu"])
@pytest.mark.parametrize("device_step", [1e-6, 2.3e-4, 1e-3, 0.5])
def test_the_loop_step_is_never_below_the_device_step(platform, device_step):
    parts = host_lib.per_step(HOST_LOOP)
    for transfer in (None, 0.0, 1e-4):
        loop = host_lib.loop_step(device_step, parts, transfer, platform=platform)
        assert loop["loop_step_s"] >= device_step


def test_the_host_overlaps_an_accelerator_and_adds_to_a_cpus_kernels():
    parts = dict.fromkeys(host_lib.PARTS, 0.0)
    parts["batch"] = 1e-3  # the host's work: 1 ms a step
    # Device-bound: the host's work hides under the kernels but for one step in 50.
    slow = host_lib.loop_step(4e-3, parts, 0.0, platform="gpu")
    assert slow["loop_step_s"] == pytest.approx(4e-3 + 1e-3 / 50)
    assert (slow["loop_bound"], slow["loop_overlap"]) == ("device", "overlapped")
    # Host-bound: the kernels hide under the host's work.
    fast = host_lib.loop_step(1e-4, parts, 0.0, platform="tpu")
    assert fast["loop_step_s"] == pytest.approx(1e-3 + 1e-4 / 50)
    assert fast["loop_bound"] == "host"
    # The batch's copy is the device's side: before its kernels, not under the host's.
    copied = host_lib.loop_step(4e-3, parts, 1e-3, platform="gpu")
    assert copied["loop_step_s"] == pytest.approx(5e-3 + 1e-3 / 50)
    # A CPU runs the host's work and the kernels on the same cores: they add up.
    cpu = host_lib.loop_step(4e-3, parts, None, platform="cpu")
    assert cpu["loop_step_s"] == pytest.approx(5e-3) and cpu["loop_overlap"] == "serialised"
    assert cpu["loop_parts"][host_lib.TRANSFER] == 0.0 and cpu["loop_left_out"] == []


def test_an_epoch_is_its_loop_steps_and_the_device_loop_pays_one_call_per_epoch():
    rates = rates_lib.of_device(A100)
    kernels = [_gemm(flops=0, nbytes=1555e9 * 1e-3)]
    block = _predicted(kernels, rates, "gpu", 64, host=_host(steps_per_epoch=100), table=TABLE)
    assert block["epoch_s"] == pytest.approx(100 * block["loop_step_s"])
    assert block["epoch_steps"] == 100
    assert any("evaluation" in x for x in block["epoch_left_out"])
    assert block["device_loop_step_s"] == pytest.approx(block["device_step_s"] + 40e-6 / 100)
    # Where the dataset's size is unknown, neither is made up.
    unknown = _predicted(kernels, rates, "gpu", 64, host=_host(), table=TABLE)
    assert unknown["epoch_s"] is None and unknown["device_loop_step_s"] is None


def test_a_prediction_without_a_host_is_its_device_step_alone():
    rates = rates_lib.of_device(A100)
    kernels = [_gemm(flops=0, nbytes=1555e9 * 1e-3)]
    alone = _predicted(kernels, rates, "gpu", 64, table=TABLE)
    whole = _predicted(kernels, rates, "gpu", 64, host=_host(), table=TABLE)
    assert alone["step_time_s"] == alone["device_step_s"] == whole["device_step_s"]
    assert whole["step_time_s"] == whole["device_step_s"]  # step_time_s: the device step
    assert "loop_step_s" not in alone


def test_the_loop_figures_the_docs_name_are_the_predictions_attributes():
    rates = rates_lib.of_device(A100)
    kernels = [_gemm(flops=0, nbytes=1555e9 * 1e-3)]
    host = _host(steps_per_epoch=100)
    looped = predict.predict(kernels, rates, "gpu", 64, host=host, table=TABLE)
    block = looped.as_record()
    start = list(block).index("loop_step_s")  # the fields in the block's own order
    assert list(block)[start : start + len(predict.LOOP_FIELDS)] == list(predict.LOOP_FIELDS)
    for name in predict.LOOP_FIELDS:
        assert getattr(looped, name) == block[name], name
    assert looped.epoch_s == pytest.approx(100 * looped.loop_step_s)
    assert looped.loop_bound in ("host", "device") and isinstance(looped.loop_left_out, list)
    # Without a host side, each is None and the record block has none of them.
    alone = predict.predict(kernels, rates, "gpu", 64, table=TABLE)
    assert all(getattr(alone, name) is None for name in predict.LOOP_FIELDS)
    assert not set(predict.LOOP_FIELDS) & set(alone.as_record())


def _measured(run_id: str, model: str, batch: int, when: str, **more) -> dict:
    """A CPU train record of `model` at `batch` made at `when`, its call's round trip and
    its loop's host parts timed (as its line holds it: conftest's typed makes it the
    reader's)."""
    return ran(
        run_id,
        workload={"model": model, "batch_size": batch, "strategy": "single"},
        env={"utc_time": when},
        dispatch_s={"median": 1e-4},
        host_loop={**HOST_LOOP, "steps": int(when[-1])},
        **more,
    )


def _read(*lines: dict) -> list:
    """Records as the reader hands them on (conftest's typed)."""
    return [typed(line) for line in lines]


def test_an_ensembles_call_and_loop_are_not_taken_as_one_models():
    # A committed ensemble run (K models' steps at once, recorded under the model and
    # batch of one) beside an older run of that one model, both CPU, both timed
    results = Path(__file__).resolve().parent.parent / "results" / records.RECORDS_FILE
    lines = [json.loads(x) for x in results.read_text().splitlines()]
    line = next(r for r in lines if r["workload"]["kind"] == "ensemble" and r.get("host_loop"))
    ensemble = typed(line)
    model, batch = ensemble.workload.model, ensemble.workload.batch_size
    alone = _measured("alone", model, batch, "2000-01-01T00:00:01")
    host = fit_predictions.host_constants([*_read(alone), ensemble])
    assert host["loop"][f"{model}, batch {batch}"]["record"] == "alone"
    assert host["records"] == {"single": 1}
    # nor is its loop a check of the loop step predicted for one model
    assert not fit_predictions._timed_a_training_loop(ensemble)
    # the control: by its time and its loop, the ensemble's would have been the newest kept
    assert records.recorded_at(ensemble) > records.recorded_at(typed(alone))
    assert host_lib.like_training(ensemble.host_loop.model_dump(exclude_unset=True))
    assert ensemble.dispatch_s.median


def test_the_constants_keep_the_newest_host_loop_measured_here_per_model_and_batch():
    loaded = _read(
        _measured("new", "mlp", 32, "2026-11-25T00:00:02"),
        _measured("old", "mlp", 32, "2026-11-25T00:00:01"),
        _measured("other", "mlp", 128, "2026-11-25T00:00:03"),
        # newer, of the same program, but compiled, never run: no loop, no round trip
        compile_record(
            workload={"model": "mlp", "batch_size": 32}, env={"utc_time": "2026-11-25T00:00:09"}
        ),
    )
    host = fit_predictions.host_constants(loaded)
    assert host["loop"]["mlp, batch 32"]["record"] == "new"
    # A newer loop whose epochs are one batch (a sync every step) is not the training loop.
    one_batch = _measured("one batch", "mlp", 32, "2026-11-25T00:00:05")
    one_batch["host_loop"]["steps_per_epoch"] = 1
    kept = fit_predictions.host_constants([*loaded, *_read(one_batch)])["loop"]
    assert kept["mlp, batch 32"]["record"] == "new"
    assert host["loop"]["mlp, batch 128"]["record"] == "other"
    assert len(host["loop"]) == 2 and host["records"] == {"single": 3}
    # Another network under the same name (the MLP at another width) is its own entry.
    wide = _measured("wide", "mlp", 32, "2026-11-25T00:00:04")
    wide["workload"]["model_overrides"] = {"width": 4096}
    assert len(fit_predictions.host_constants([*loaded, *_read(wide)])["loop"]) == 3


def test_a_compile_record_takes_the_host_loop_modelled_from_those_measured_here():
    from experiments.predict import shown as predictions_lib
    from jaxcnn import host_loop

    small = {**HOST_LOOP, "parts": {**HOST_LOOP["parts"], "put": {"median": 50e-6, "n": 20}}}
    loops = {"mlp, batch 32": small, "mlp, batch 128": HOST_LOOP}
    table = {**TABLE, "host": {"loop": loops}}
    found = predictions_lib.host_of(_compile_record(256), table)
    assert found["parts_basis"] == "modelled"
    # The put grows on the line through its two measured batches (50 us at 32 rows of
    # MNIST, 100 us at 128); the dispatch and the rest are their medians.
    at = {rows: host_loop.batch_bytes("mlp", {}, rows) for rows in (32, 128)}
    resnet = host_loop.batch_bytes("resnet50", {}, 256)
    slope = 50e-6 / (at[128] - at[32])
    assert found["parts"]["put"] == pytest.approx(100e-6 + slope * (resnet - at[128]))
    assert found["parts"]["dispatch"] == pytest.approx(80e-6)
    assert found["parts"] == host_loop.modelled_parts(resnet, 1, table)
    # Nothing measured here: no figure, and the loop step names each part.
    bare = predictions_lib.host_of(_compile_record(128), {**TABLE, "host": {}})
    assert set(bare["parts"].values()) == {None}
    # A record that measured its own host's loop is priced with it, not the model's.
    batch = {"median": 1.0, "mean": 1.0, "n": 20}
    own = {**HOST_LOOP, "parts": {**HOST_LOOP["parts"], "batch": batch}}
    a100 = {"platform": "gpu", "kind": "NVIDIA A100-SXM4-40GB"}
    run = ran(
        "own loop",
        a100,
        {"model": "resnet50", "batch_size": 256, "dataset": "synthetic"},
        host_loop=own,
    )
    mine = predictions_lib.host_of(typed(run), table)
    assert mine["parts"]["batch"] == 1.0
    assert predictions_lib.host_of(typed({**run, "host_loop": None}), table) == found  # control


def _on_gpu(record: dict, dispatch_s: float) -> dict:
    """`record` as run on an H200: its loop's dispatch timed at `dispatch_s`."""
    dispatch = {"median": dispatch_s, "mean": dispatch_s, "n": 20}
    parts = {**record["host_loop"]["parts"], "dispatch": dispatch}
    return {
        **record,
        "device": {**record["device"], "platform": "gpu", "kind": "NVIDIA H200"},
        "dispatch_s": {"median": 5e-4},
        "host_loop": {**record["host_loop"], "parts": parts},
    }


def test_loops_timed_on_a_gpus_client_are_kept_apart_from_the_cpus():
    cpu = _measured("cpu", "mlp", 32, "2026-11-25T00:00:01")
    gpu = _on_gpu(_measured("gpu", "mlp", 128, "2026-11-25T00:00:02"), 900e-6)
    host = fit_predictions.host_constants(_read(cpu, gpu))
    assert list(host["loop"]) == ["mlp, batch 32"] and host["dispatch_s"] == {"single": 1e-4}
    on_gpu = host["accelerators"]["gpu"]
    assert list(on_gpu["loop"]) == ["mlp, batch 128"] and on_gpu["dispatch_s"] == {"single": 5e-4}
    assert "NVIDIA H200" in on_gpu["basis"]
    # A GPU step is priced with the GPU's loops; a TPU, with none of its own, the CPU's.
    assert host_lib.section({"host": host}, "gpu") == ("gpu", on_gpu)
    assert host_lib.section({"host": host}, "tpu") == ("cpu", host)
    assert host_lib.measured_dispatch("single", {"host": host}, "gpu") == 5e-4
    assert host_lib.measured_dispatch("single", {"host": host}, "tpu") == 1e-4
    # Without a GPU loop there is no accelerators section at all.
    assert "accelerators" not in fit_predictions.host_constants(_read(cpu))


def test_host_parts_timed_on_the_steps_own_client_are_not_charged_the_runtime_again():
    from jaxcnn import host_loop

    gpu = _on_gpu(_measured("gpu", "mlp", 128, "2026-11-25T00:00:02"), 900e-6)
    table = {**TABLE, "host": fit_predictions.host_constants(_read(gpu))}
    nbytes = host_loop.batch_bytes("mlp", {}, 128)
    runtime = {"parts": {runtime_lib.LAUNCHES: 1e-3}, "missing": ["x"], "launches": None}
    for on, charged in (("gpu", 0.0), ("cpu", 1e-3)):  # positive control: the CPU's loops
        host = host_lib.host_side(
            measured=None, dispatch_s=None, batch_bytes=nbytes, host_link_bytes_per_s=None,
            modelled=host_loop.modelled_parts(nbytes, 1, table, "gpu"), modelled_on=on,
        )  # fmt: skip
        loop = host_lib.loops(1e-6, host, "gpu", runtime)
        assert loop["loop_parts"].get(runtime_lib.LAUNCHES, 0.0) == charged
        assert loop["loop_parts_platform"] == on
        assert ("x" in loop["loop_left_out"]) == (on == "cpu")
    assert host_loop.modelled_parts(nbytes, 1, table, "gpu")["dispatch"] == 900e-6
    # Its own model and batch left out, nothing of it is left to model the loop from.
    left = host_loop.modelled_parts(nbytes, 1, table, "gpu", leave_out="mlp, batch 128")
    assert set(left.values()) == {None}


def test_a_loop_timed_on_a_gpu_is_predicted_without_anything_it_measured():
    from experiments.predict import shown as predictions_lib

    kernels = [[1, "conv", 1e9, 1e6, "f32", 0]]
    runs = [
        _on_gpu(_measured(f"r{b}", "mlp", b, f"2026-11-25T00:00:0{i}", kernels=kernels), d)
        for i, (b, d) in enumerate(((32, 1e-3), (128, 2e-3), (512, 3e-3)), start=1)
    ]
    family = {**TABLE["families"]["gpu"], "observations": [
        {"source": f"record {r['run_id']}", "held_out_predicted_s": {"chip": 4e-3},
         "regime": "small"} for r in runs
    ]}  # fmt: skip
    host = fit_predictions.host_constants(_read(*runs))
    table = {**TABLE, "families": {"gpu": family}, "host": host}
    run = typed(runs[1])
    held = predictions_lib.held_out_loop(run, table)
    assert held["parts_platform"] == "gpu"
    # Its own loop measured ten times slower changes nothing of its prediction...
    slow = typed(_on_gpu(runs[1], 20e-3))
    assert predictions_lib.held_out_loop(slow, table) == held
    # ...while the others' loops do (positive control): the dispatch is their median.
    faster = _read(runs[0], runs[1], _on_gpu(runs[2], 1e-3))
    again = {**table, "host": fit_predictions.host_constants(faster)}
    assert predictions_lib.held_out_loop(run, again)["loop_step_s"] < held["loop_step_s"]
    # A CPU record, a loop of one-batch epochs, or no held-out step: no prediction.
    on_cpu = {**runs[1], "device": {**runs[1]["device"], "platform": "cpu", "kind": "cpu"}}
    assert predictions_lib.held_out_loop(typed(on_cpu), table) is None
    short = {**runs[1], "host_loop": {**runs[1]["host_loop"], "steps_per_epoch": 1}}
    assert predictions_lib.held_out_loop(typed(short), table) is None
    bare = {**table, "families": {"gpu": {**family, "observations": []}}}
    assert predictions_lib.held_out_loop(run, bare) is None


def test_the_fit_checks_each_programs_loop_held_out_and_bands_them_by_regime():
    kernels = [[1, "conv", 1e9, 1e6, "f32", 0]]
    runs = [
        _on_gpu(_measured(f"r{b}", "mlp", b, f"2026-11-25T00:00:0{i}", kernels=kernels), d)
        for i, (b, d) in enumerate(((32, 1e-3), (128, 2e-3), (512, 3e-3)), start=1)
    ]
    for r, measured in zip(runs, (2e-3, 3e-3, 9e-3), strict=True):
        r["workload"]["precision"], r["loop"] = "f32", "step"
        r["host_loop"]["loop_step_s"] = measured
    family = {**TABLE["families"]["gpu"], "observations": [
        {"source": f"record {r['run_id']}", "held_out_predicted_s": {"chip": 4e-3},
         "regime": "small"} for r in runs
    ]}  # fmt: skip
    table = {
        **TABLE,
        "families": {"gpu": family},
        "host": fit_predictions.host_constants(_read(*runs)),
    }
    # An older run of the same program on the same host is not checked a second time.
    older = {**runs[1], "run_id": "older", "env": {"utc_time": "2026-11-24T00:00:00"}}
    checked = fit_predictions.loop_error(_read(older, *runs), [], table)["gpu"]
    assert sorted(c["record"] for c in checked["loops"]) == ["r128", "r32", "r512"]
    for c in checked["loops"]:
        run = next(r for r in runs if r["run_id"] == c["record"])
        assert c["predicted_s"] == predictions.held_out_loop(typed(run), table)["loop_step_s"]
        assert c["measured_s"] == run["host_loop"]["loop_step_s"]
    band = checked["regimes"]["small"]
    factors = [max(c["predicted_s"] / c["measured_s"], c["measured_s"] / c["predicted_s"])
               for c in checked["loops"]]  # fmt: skip
    assert band["observations"] == 3 and band["worst"] == max(factors)
    assert band["faster"] == sum(c["predicted_s"] < c["measured_s"] for c in checked["loops"])
    assert band["hosts"] == ["NVIDIA H200"]
    # No published JAX loop among the references: none checked, no band.
    assert checked["published"] == [] and checked["published_band"] == {}


@pytest.mark.parametrize("rows", [4, 5])
def test_a_loop_step_is_banded_by_five_published_jax_loops_or_unvalidated(rows):
    checked = {"median": 1.4, "worst": 2.0, "observations": rows, "faster": 1, "hosts": ["A100"]}
    table = {**TABLE, "loop_error": {"gpu": {"published_band": {"small": checked}}}}
    band = predict.loop_band(table, "gpu", "small")
    if rows < predict.MIN_BAND_ROWS:
        assert band is None
    else:
        assert band == {**checked, "split": "published_jax_loops", "quantity": "loop_step"}
    assert predict.loop_band(table, "gpu", "large") is None  # another regime: unvalidated
    assert predict.loop_band(table, "tpu", "small") is None
    # A predicted step carries it beside its loop step, and none without a host side.
    ks = [_gemm(1e9, 1e6)]
    host = host_lib.host_side(
        measured=None, dispatch_s=1e-4, batch_bytes=1000, host_link_bytes_per_s=None,
        modelled={"dispatch": 1e-4}, modelled_on="gpu",
    )  # fmt: skip
    looped = predict.predict(ks, rates_lib.of_device(A100), "gpu", 32, host=host, table=table)
    assert looped.loop_band == band and looped.as_record()["loop_band"] == band
    alone = predict.predict(ks, rates_lib.of_device(A100), "gpu", 32, table=table)
    assert alone.loop_band is None and "loop_band" not in alone.as_record()


def test_a_gpus_host_link_is_its_pcie_generation_and_lanes_a_tpus_the_books():
    assert rates_lib.of_device(T4).host_link_bytes_per_s == pytest.approx(15.75e9, 1e-3)
    assert rates_lib.of_device(A100).host_link_bytes_per_s == pytest.approx(31.5e9, 1e-3)
    # TPUs: the scaling book's one figure, twice it on a v6e
    assert rates_lib.of_device(V3).host_link_bytes_per_s == 1.6e10
    v6e = SimpleNamespace(platform="tpu", device_kind="TPU v6 lite", compute_capability=None)
    assert rates_lib.of_device(v6e).host_link_bytes_per_s == 3.2e10
    cpu = SimpleNamespace(platform="cpu", device_kind="cpu", compute_capability=None)
    assert rates_lib.of_device(cpu).host_link_bytes_per_s is None  # its memory is the host's


def test_a_held_constant_is_a_published_figure_and_is_not_fitted():
    from experiments.predict import references

    held = fit_predictions.fixed_constants()
    published = {o.seconds for o in references.load_overheads()}
    assert held["gpu"]["kernel_overhead_s"][0] in published
    truth = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    cells = list(CELLS)
    obs = [_observation(f, b, n, truth, i) for i, (f, b, n) in enumerate(cells)]
    fitted = fit_lib.fit_platform("gpu", obs, {"kernel_overhead_s": (1e-6, "held")})
    assert fitted["kernel_overhead_s"] == 1e-6
    assert fitted["fixed"] == {"kernel_overhead_s": {"value": 1e-6, "why": "held"}}


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["/no/such/records"], "no such file or folder: /no/such/records"),
        (["{tmp}", "--compile-missing", "/proc/nowhere"], "cannot write to --compile-missing"),
        (["{fifo}"], "cannot read records from"),
    ],
)
def test_the_fit_command_says_a_bad_input_in_one_line_before_any_work(tmp_path, capsys, argv, says):
    import os

    fifo = tmp_path / "records.jsonl"
    os.mkfifo(fifo)  # would block a load forever: the positive control that it is checked
    argv = [a.format(tmp=tmp_path / "empty", fifo=fifo) for a in argv]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stopped:
        fit_cli.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]


def test_the_repredict_command_refuses_what_is_not_a_records_file(tmp_path, capsys):

    with pytest.raises(SystemExit) as stopped:
        repredict_cli.main([str(tmp_path)])
    assert stopped.value.code == 2
    assert "is not a records file" in capsys.readouterr().err


def test_the_fit_is_written_even_when_its_summary_cannot_be_printed(tmp_path, monkeypatch):
    # `fit_predictions results/ --write | head -1` closes stdout before the summary ends.
    import io

    class ClosedPipe(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    constants = tmp_path / "constants.json"
    monkeypatch.setattr(predict, "CONSTANTS_FILE", constants)
    truth = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    cells = list(CELLS)
    obs = [_observation(f, b, n, truth, i) for i, (f, b, n) in enumerate(cells)]
    gpu = fit_lib.fit_platform("gpu", obs, {"kernel_overhead_s": (5e-6, "held")})
    monkeypatch.setattr(
        fit_predictions,
        "fit",
        lambda loaded, refs: {"version": "v", "families": {"gpu": gpu}, "unmatched_references": []},
    )
    monkeypatch.setattr(sys, "stdout", ClosedPipe())
    (tmp_path / "records").mkdir()
    with pytest.raises(BrokenPipeError):
        fit_cli.main([str(tmp_path / "records"), "--write"])
    assert json.loads(constants.read_text())["families"]["gpu"] == gpu


def _split_errors(stack, fitted, *rest):
    steps, untested = fit_lib.held_out_steps(stack, fitted, *rest)
    return fit_lib.errors_of(steps, fitted), untested


# Chip A's five rows and chip B's two, B's matmul units reaching a quarter of A's.
TWO_CHIPS_SEEN = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}


def _two_chips() -> list[fit_lib.Observation]:
    rates = rates_lib.of_device(A100)
    other = {**TWO_CHIPS_SEEN, "compute_efficiency": 0.1}  # chip B's matmul units reach far less
    cells = list(CELLS)
    obs = []
    for chip, truth, chosen in (("A", TWO_CHIPS_SEEN, cells), ("B", other, cells[:1] + cells[3:4])):
        for i, (f, b, n) in enumerate(chosen):
            k = (_gemm(f, b, n),)
            seconds = price.step_time(list(k), rates, price.Constants.of(truth))["seconds"]
            obs.append(
                fit_lib.Observation(f"{chip}{i}", "gpu", k, rates, 1, seconds, "t", chip=chip)
            )
    return obs


def test_a_chip_held_out_is_predicted_by_constants_that_never_saw_its_rows():
    rates = rates_lib.of_device(A100)
    seen = TWO_CHIPS_SEEN
    obs = _two_chips()
    fixed = {
        "elemental_conv_efficiency": None,
        fit_lib.LOOP: None,
        **dict.fromkeys(fit_lib.PER_KIND_OVERHEADS),  # a GPU's: one fixed cost
        fit_lib.CACHE: None,  # and one memory efficiency
        **dict.fromkeys(fit_lib.OWN_RATE_KINDS),
    }
    stack = fit_lib.programs(obs)
    limits = dict(fit_lib.BOUNDS)
    by_chip, untested = _split_errors(stack, obs, fixed, limits, "chip")
    assert untested == ["A"]  # without A, B's two rows cannot pin three constants
    assert {obs[i].chip for i, _ in by_chip} == {"B"}
    for i, error in by_chip:
        if obs[i].chip == "B":  # priced as chip A's data say: 4x too fast where compute-bound
            k = list(obs[i].kernels)
            as_a = price.step_time(k, rates, price.Constants.of(seen))["seconds"]
            assert error == pytest.approx(abs(as_a / obs[i].measured_s - 1), rel=0.02)
            assert error > 0.5
    # The control: held out one at a time, each B row is priced by a fit that saw the other.
    by_program, _ = _split_errors(stack, obs, fixed, limits, "program")
    b_rows = [i for i, o in enumerate(obs) if o.chip == "B"]
    chip_errors, program_errors = dict(by_chip), dict(by_program)
    assert sum(program_errors[i] for i in b_rows) < sum(chip_errors[i] for i in b_rows)


def test_a_compilers_own_estimate_gives_the_fixed_cost_per_op_it_implies():
    # Two small programs compiled for a TPU: 10 ops each, the compiler's estimate 1 us
    # per op above the kernels at the chip's full rates (memory-bound: 1 MB each).
    rates = rates_lib.of_device(V3)
    full = 10 * 1e6 / rates.bytes_per_s
    compiled = compile_record(
        kernels=[[10, "fusion", 0, 1e6, "f32", 0]],
        kernels_source={"program": "train_step", "steps": 1},
        device={"kind": "TPU v3"},
        target={"name": "tpu-v3-1", "platform": "tpu", "chip": "TPU v3"},
        workload={"model": "mlp", "batch_size": 128},
        prediction_bound={"compiler_estimate_s": full + 10e-6},
    )
    record = typed(compiled)
    none = typed({**compiled, "prediction_bound": {}})  # the control: no estimate, no figure
    cost = fit_predictions.compiler_op_cost([record, record, none])
    assert cost["tpu"][0] == pytest.approx(1e-6) and cost["tpu"][1] == 2
    assert fit_predictions.compiler_op_cost([none]) == {}
    held = fit_predictions.fixed_constants([record])
    assert held["tpu"]["kernel_overhead_s"][0] == pytest.approx(1e-6)
    assert "compiler's own cost model" in held["tpu"]["kernel_overhead_s"][1]


def _measured_cpu_records(folder, count: int):
    """The first `count` measured CPU records carrying kernels in results/, as a
    records folder: real observations for the CPU's fit, none for a GPU's or TPU's."""
    kept = []
    results = Path(__file__).resolve().parent.parent / "results" / "records.jsonl"
    for line in results.read_text().splitlines():
        r = json.loads(line)
        measured = r["status"] == "ok" and r.get("kernels") and not r.get("compiled_not_run")
        if measured and r["device"]["platform"] == "cpu" and len(kept) < count:
            kept.append(line + "\n")
    folder.mkdir()
    (folder / "records.jsonl").write_text("".join(kept))
    return str(folder)


def test_write_never_resets_a_platform_with_too_few_observations_to_its_priors(
    tmp_path, monkeypatch, capsys
):
    committed = json.loads(predict.CONSTANTS_FILE.read_text())
    constants = tmp_path / "constants.json"
    constants.write_bytes(predict.CONSTANTS_FILE.read_bytes())
    monkeypatch.setattr(predict, "CONSTANTS_FILE", constants)
    before = constants.read_bytes()
    (tmp_path / "empty").mkdir()
    for folder in (str(tmp_path / "empty"), _measured_cpu_records(tmp_path / "two", 2)):
        assert fit_cli.main([folder, "--write"]) == 1  # no platform can be fitted
        assert constants.read_bytes() == before
        err = capsys.readouterr().err
        assert err == f"no platform has the observations for a fit: {constants} left as it was\n"
    # Ten CPU records fit the CPU's constants; the GPU and TPU have none: kept.
    assert fit_cli.main([_measured_cpu_records(tmp_path / "ten", 10), "--write"]) == 0
    written = json.loads(constants.read_text())
    for platform in ("gpu", "tpu"):
        assert written["families"][platform] == committed["families"][platform]
        assert written["families"][platform]["basis"] == "fitted"
    assert written["families"]["cpu"]["basis"] == "fitted"
    assert written["families"]["cpu"]["error"]["observations"] == 10
    out = capsys.readouterr().out.splitlines()
    for platform in ("gpu", "tpu"):
        assert (
            f"{platform}: 0 observation(s) to fit, fewer than its constants need: its "
            f"committed constants kept ({committed['version']})"
        ) in out


def test_write_onto_an_immutable_constants_file_is_one_line_before_any_fit(
    tmp_path, monkeypatch, capsys
):
    constants = tmp_path / "constants.json"
    constants.write_bytes(predict.CONSTANTS_FILE.read_bytes())
    monkeypatch.setattr(predict, "CONSTANTS_FILE", constants)
    before = constants.read_bytes()
    ten = _measured_cpu_records(tmp_path / "ten", 10)
    monkeypatch.setattr(fit_predictions, "fit", _must_not_fit)
    with immutable(constants), pytest.raises(SystemExit) as exited:
        fit_cli.main([ten, "--write"])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        f"error: --write cannot replace {constants}: Operation not permitted; make it and "
        "its folder writable (chattr -i, chmod u+w), or leave out --write (see --help)"
    ]
    assert constants.read_bytes() == before


def _must_not_fit(*_):
    raise AssertionError("fitted before the constants file was checked")


def test_a_constants_file_made_immutable_during_the_fit_keeps_the_fit(
    tmp_path, monkeypatch, capsys
):
    """The file checked writable, then made immutable (chattr +i) before the write: the
    fit is written beside, in the temporary folder, in one line saying where."""
    constants = tmp_path / "constants.json"
    constants.write_bytes(predict.CONSTANTS_FILE.read_bytes())
    monkeypatch.setattr(predict, "CONSTANTS_FILE", constants)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    before = constants.read_bytes()
    ten = _measured_cpu_records(tmp_path / "ten", 10)
    fitted = fit_predictions.fit

    def fit_then_lock(*args):
        result = fitted(*args)
        stack.enter_context(immutable(constants))
        return result

    monkeypatch.setattr(fit_predictions, "fit", fit_then_lock)
    with contextlib.ExitStack() as stack:
        assert fit_cli.main([ten, "--write"]) == 1
        assert constants.read_bytes() == before
    (kept,) = tmp_path.glob("constants-*.json")
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        f"error: could not replace {constants} (Operation not permitted): left as it was; "
        f"the fit is kept in {kept}: copy it there once the file is writable"
    ]
    assert json.loads(kept.read_text())["families"]["cpu"]["error"]["observations"] == 10


# --- One efficiency per kind of arithmetic unit ------------------------------------------

V100 = SimpleNamespace(platform="gpu", device_kind="Tesla V100-SXM2-16GB", compute_capability="7.0")
P100 = SimpleNamespace(platform="gpu", device_kind="Tesla P100-PCIE-16GB", compute_capability="6.0")
UNITS = {
    "compute_efficiency": 0.5,
    "memory_efficiency": 0.8,
    "kernel_overhead_s": 0.0,
    "vector_efficiency": 0.8,
}


def _compute_s(device: SimpleNamespace, dtype: str, family: dict) -> float:
    rates = rates_lib.of_device(device)
    return price.step_time([_gemm(1e12, 1.0, dtype=dtype)], rates, price.Constants.of(family))[
        "seconds"
    ]


def test_a_gpus_fp32_pipes_and_tensor_cores_each_reach_their_own_fraction_of_peak():
    # fp32 on a V100 runs on its fp32 pipes (15.7 TFLOP/s), at their own fraction.
    assert _compute_s(V100, "f32", UNITS) == pytest.approx(1e12 / (15.7e12 * 0.8), rel=1e-12)
    # f32 on an A100 runs as TF32 on tensor cores (156), bf16 on them too (312).
    assert _compute_s(A100, "f32", UNITS) == pytest.approx(1e12 / (156e12 * 0.5), rel=1e-12)
    assert _compute_s(A100, "bf16", UNITS) == pytest.approx(1e12 / (312e12 * 0.5), rel=1e-12)
    # A V100 has no bf16 units: bf16 runs at f32's peak, on f32's pipes.
    assert _compute_s(V100, "bf16", UNITS) == pytest.approx(1e12 / (15.7e12 * 0.8), rel=1e-12)
    # fp16: a V100's tensor cores (125, 8x its fp32); a P100's packed half on its fp32
    # pipes (18.7, 2x).
    assert _compute_s(V100, "f16", UNITS) == pytest.approx(1e12 / (125e12 * 0.5), rel=1e-12)
    assert _compute_s(P100, "f16", UNITS) == pytest.approx(1e12 / (18.7e12 * 0.8), rel=1e-12)
    # A family without a vector efficiency prices every unit at compute_efficiency.
    shared = {k: v for k, v in UNITS.items() if k != "vector_efficiency"}
    assert _compute_s(V100, "f32", shared) == pytest.approx(1e12 / (15.7e12 * 0.5), rel=1e-12)


def test_the_unit_of_each_precision():
    assert rates_lib.unit("gpu", "fp32", "Tesla V100-SXM2-16GB") == "vector"
    assert rates_lib.unit("gpu", "tf32", "NVIDIA L4") == "matrix"  # tf32 only 2x fp32 there
    assert rates_lib.unit("gpu", "fp16", "Tesla T4") == "matrix"
    assert rates_lib.unit("gpu", "fp16", "Tesla P100-PCIE-16GB") == "vector"
    assert rates_lib.unit("tpu", "bf16", "TPU v3") == "matrix"
    assert rates_lib.of_device(T4).units == {"f32": "vector", "f16": "matrix"}
    # Rates a CPU run measured say nothing of units: every kernel at compute_efficiency.
    assert rates_lib.measured({}, {}).vector_dtypes == frozenset()


def _unit_observations(chips: dict, cells=None) -> list:
    """Observations of hand-built gemms on each chip in `chips` ({name: (device,
    truth)}), timed by the per-unit model with that chip's own constants."""
    cells = cells or CELLS
    obs = []
    for chip, (device, truth) in chips.items():
        rates = rates_lib.of_device(device)
        for i, (f, b, n) in enumerate(cells):
            k = (_gemm(f, b, n),)
            seconds = price.step_time(list(k), rates, price.Constants.of(truth))["seconds"]
            obs.append(
                fit_lib.Observation(
                    f"{chip}{i}", "gpu", k, rates, 1, seconds, "t", chip=chip, program=f"{chip}{i}"
                )
            )
    return obs


TRUTH = {
    "compute_efficiency": 0.3,
    "memory_efficiency": 0.7,
    "kernel_overhead_s": 5e-6,
    "vector_efficiency": 0.8,
}


H100 = SimpleNamespace(
    platform="gpu", device_kind="NVIDIA H100 80GB HBM3", compute_capability="9.0"
)


def test_the_fit_gives_vector_units_their_own_efficiency_where_two_chips_have_them():
    chips = {"A": (A100, TRUTH), "H": (H100, TRUTH), "V": (V100, TRUTH), "T": (T4, TRUTH)}
    fitted = fit_lib.fit_platform("gpu", _unit_observations(chips))
    choice = fitted["unit_choice"]
    assert choice["kept"] is True and choice["with"]["untested_groups"] == []
    assert choice["with"]["median"] < 0.01 < choice["without"]["median"]
    for name, value in TRUTH.items():
        assert fitted[name] == pytest.approx(value, rel=0.02)
    # With one chip of each kind of unit, a held-out chip has no other to take its
    # units' efficiency from: neither can be tested with it, and the fit keeps one
    # efficiency for every unit, which both can.
    fitted = fit_lib.fit_platform("gpu", _unit_observations({"A": chips["A"], "V": chips["V"]}))
    assert fitted["unit_choice"]["kept"] is False
    assert fitted["unit_choice"]["with"]["untested_groups"] == ["A", "V"]
    assert fitted["unit_choice"]["without"]["untested_groups"] == []
    assert fitted["vector_efficiency"] is None


def test_each_fitted_row_keeps_its_step_as_each_split_predicted_it_held_out():
    rates = rates_lib.of_device(A100)
    seen = TWO_CHIPS_SEEN
    obs = _two_chips()
    rows = fit_lib.fit_platform("gpu", obs)["observations"]
    for row, o in zip(rows, obs, strict=True):
        held = row[fit_lib.HELD_OUT_STEPS]
        if o.chip == "A":  # B's two rows cannot pin three constants: A is not held out
            assert held["chip"] is None
        else:  # priced as chip A's rows say, by a fit that never saw B's
            as_a = price.step_time(list(o.kernels), rates, price.Constants.of(seen))["seconds"]
            assert held["chip"] == pytest.approx(as_a, rel=0.02)
            assert held["chip"] != pytest.approx(row["predicted_s"], rel=0.1)  # not in-sample
        assert held["program"] is not None  # every program has others left to fit


def test_a_chip_held_out_is_priced_by_the_other_chips_units_alone():
    slow = {**TRUTH, "vector_efficiency": 0.2}  # B's fp32 pipes reach far less than C's
    chips = {"A": (A100, TRUTH), "H": (H100, TRUTH), "B": (V100, slow), "C": (T4, TRUTH)}
    obs = _unit_observations(chips)
    fixed = {
        "elemental_conv_efficiency": None,
        fit_lib.LOOP: None,
        **dict.fromkeys(fit_lib.OWN_RATE_KINDS),  # a GPU's: none
    }
    stack = fit_lib.programs(obs)
    limits = dict(fit_lib.BOUNDS)
    by_chip, untested = _split_errors(stack, obs, fixed, limits, "chip")
    assert untested == [] and len(by_chip) == len(obs)
    errors = dict(by_chip)
    # Held out, B is priced as C's vector units (and A's and H's the rest) say, C as B's:
    # constants that never saw the held-out chip's rows, so 4x off where compute-bound.
    for chip, priced_as in (("B", TRUTH), ("C", slow)):
        rows = [i for i, o in enumerate(obs) if o.chip == chip]
        for i in rows:
            k = list(obs[i].kernels)
            as_others = price.step_time(k, obs[i].rates, price.Constants.of(priced_as))["seconds"]
            assert errors[i] == pytest.approx(abs(as_others / obs[i].measured_s - 1), abs=0.02)
        assert max(errors[i] for i in rows) > 0.5
    # The one matrix chip left without another: untested, never priced from nothing.
    alone = [o for o in obs if o.chip != "H"]
    stack = fit_lib.programs(alone)
    by_chip, untested = _split_errors(stack, alone, fixed, limits, "chip")
    assert untested == ["A"] and {alone[i].chip for i, _ in by_chip} == {"B", "C"}


def _cpu_costs(**overheads: float) -> dict:
    return {"compute_efficiency": 1.0, "memory_efficiency": 1.0, **overheads}


def test_a_cpu_prices_a_copy_a_generated_loop_and_a_library_call_each_at_its_own_fixed_cost():
    rates = rates_lib.Rates({"f32": 1e11}, 1e10, source="measured")
    family = _cpu_costs(kernel_overhead_s=1e-6, copy_overhead_s=2e-7, library_overhead_s=8e-6)
    ks = [
        Kernel("copy", "copy", 0, 1e3, None, 100),  # 0.1 us of memory each
        Kernel("fusion", "fusion", 0, 2e4, None, 10),  # 2 us
        Kernel("transpose", "other", 0, 0, None, 3),
        _gemm(flops=1e6, nbytes=1e3, count=4),  # 10 us of compute
        Kernel("conv", "conv", 2e6, 1e3, "f32", 1),  # 20 us
    ]
    timed = price.step_time(ks, rates, price.Constants.of(family))
    overhead = 100 * 2e-7 + 10 * 1e-6 + 3 * 1e-6 + 4 * 8e-6 + 1 * 8e-6
    assert timed["overhead_s"] == pytest.approx(overhead)
    work = 100 * 1e-7 + 10 * 2e-6 + 4 * 1e-5 + 2e-5
    assert timed["seconds"] == pytest.approx(work + overhead)
    # A family without per-kind costs (a GPU's, a TPU's): every kernel pays the one.
    plain = price.step_time(ks, rates, price.Constants.of(_cpu_costs(kernel_overhead_s=1e-6)))
    assert plain["overhead_s"] == pytest.approx(118 * 1e-6)


@pytest.mark.slow
def test_the_cpu_fit_recovers_each_kinds_fixed_cost_and_other_platforms_keep_one():
    truth = {
        "compute_efficiency": 0.8,
        "memory_efficiency": 0.4,
        "kernel_overhead_s": 1.5e-6,
        "copy_overhead_s": 3e-7,
        "library_overhead_s": 2e-5,
        "cache_memory_efficiency": 3.0,  # the fusions of at most CACHE_BYTES
    }
    rates = rates_lib.Rates({"f32": 2e11}, 2e10, source="measured")
    cells = [  # (gemms, their flops, fusions, their bytes, copies)
        (8, 1e6, 100, 1e4, 200),
        (8, 1e9, 40, 1e8, 20),
        (2, 1e7, 300, 1e3, 10),
        (20, 1e5, 10, 1e5, 400),
        (5, 5e8, 60, 1e6, 100),
        (1, 1e10, 5, 1e9, 5),
        (12, 1e6, 150, 1e5, 50),
        (3, 1e8, 80, 1e7, 300),
        (6, 3e7, 200, 5e4, 80),
        (15, 2e9, 20, 2e6, 150),
    ]
    obs = []
    for i, (g, f, n, b, c) in enumerate(cells):
        ks = (
            _gemm(f, f / 100, g),
            Kernel("loop", "fusion", 0, b, None, n),
            Kernel("copy", "copy", 0, 64, None, c),
        )
        seconds = price.step_time(list(ks), rates, price.Constants.of(truth))["seconds"]
        obs.append(fit_lib.Observation(f"c{i}", "cpu", ks, rates, 1, seconds, "t"))
    fitted = fit_lib.fit_platform("cpu", obs)
    _assert_recovered_where_identifiable(obs, truth, fitted)
    assert fitted["error"]["median"] < 0.02
    # The same observations on a GPU: one fixed cost per kernel, none per kind.
    gpu = fit_lib.fit_platform("gpu", [dataclasses.replace(o, platform="gpu") for o in obs])
    assert gpu["copy_overhead_s"] is None and gpu["library_overhead_s"] is None


def test_a_family_prices_cache_resident_kernels_at_its_cache_efficiency():
    rates = rates_lib.Rates({"f32": 1e11}, 1e10, source="measured")
    family = {**_cpu_costs(kernel_overhead_s=0.0), "memory_efficiency": 0.5}
    ks = [Kernel("small", "fusion", 0, 3e4, None, 10), Kernel("big", "fusion", 0, 4e6, None, 1)]
    cached = price.Constants.of({**family, "cache_memory_efficiency": 6.0})
    assert price.step_time(ks, rates, cached)["seconds"] == pytest.approx(
        10 * 3e4 / 6e10 + 4e6 / 5e9
    )
    plain = price.Constants.of({**family, "cache_memory_efficiency": None})
    assert price.step_time(ks, rates, plain)["seconds"] == pytest.approx((3e5 + 4e6) / 5e9)


@pytest.mark.slow
def test_the_cpu_fit_recovers_a_cache_efficiency_and_a_gpu_fit_has_none():
    truth = {
        "compute_efficiency": 0.8,
        "memory_efficiency": 0.3,
        "kernel_overhead_s": 1e-6,
        "copy_overhead_s": 2e-7,
        "library_overhead_s": 1e-5,
        "cache_memory_efficiency": 5.0,
    }
    rates = rates_lib.Rates({"f32": 2e11}, 2e10, source="measured")
    cells = [  # (gemms, their flops, small fusions, their bytes, large fusions' bytes)
        (8, 1e6, 100, 2e5, 1e7),
        (8, 1e9, 40, 4e5, 1e8),
        (2, 1e7, 300, 1e5, 2e6),
        (20, 1e5, 10, 3e5, 5e6),
        (5, 5e8, 60, 5e5, 1e6),
        (1, 1e10, 5, 2e5, 1e9),
        (12, 1e6, 150, 4e5, 3e7),
        (3, 1e8, 80, 1e5, 4e6),
    ]
    obs = []
    for i, (g, f, n, small, large) in enumerate(cells):
        ks = (
            _gemm(f, 2e6, g),  # above the cache's size: at DRAM's rate
            Kernel("small", "fusion", 0, small, None, n),
            Kernel("large", "fusion", 0, large, None, 3),
            Kernel("copy", "copy", 0, 64, None, 50),
        )
        seconds = price.step_time(list(ks), rates, price.Constants.of(truth))["seconds"]
        obs.append(fit_lib.Observation(f"c{i}", "cpu", ks, rates, 1, seconds, "t"))
    # The GEMMs' bytes at DRAM's rate, as the truth has them (held: not this test's).
    held = {"library_memory_efficiency": (None, "the GEMMs' bytes at memory_efficiency")}
    fitted = fit_lib.fit_platform("cpu", obs, held)
    _assert_recovered_where_identifiable(obs, truth, fitted)
    assert fitted["conv_overhead_s"] is None  # no library convolution ran
    gpu = fit_lib.fit_platform("gpu", [dataclasses.replace(o, platform="gpu") for o in obs])
    assert gpu["cache_memory_efficiency"] is None and gpu["conv_overhead_s"] is None


@pytest.mark.slow
def test_the_cpu_fit_recovers_library_and_16_bit_float_rates_and_a_gpu_fit_has_neither():
    truth = {
        "compute_efficiency": 0.8,
        "memory_efficiency": 0.9,
        "kernel_overhead_s": 1e-6,
        "library_overhead_s": 1e-5,
        "library_memory_efficiency": 0.15,  # the GEMMs' bytes
        "half_float_memory_efficiency": 0.2,  # the bf16 fusions'
    }
    rates = rates_lib.Rates({"f32": 2e11}, 2e10, source="measured")
    cells = [  # (gemms, their flops, their bytes, f32 fusions' bytes, bf16 fusions' bytes)
        (8, 1e6, 1e7, 1e7, 0),
        (8, 1e9, 4e6, 1e8, 1e6),
        (2, 1e7, 2e7, 2e6, 3e7),
        (20, 1e5, 3e6, 5e6, 0),
        (5, 5e8, 5e7, 1e6, 2e6),
        (1, 1e10, 1e8, 1e9, 5e7),
        (12, 1e6, 4e6, 3e7, 0),
        (3, 1e8, 1e6, 4e6, 1e7),
    ]

    def observations(with_half: bool) -> list[fit_lib.Observation]:
        obs = []
        for i, (g, f, b, plain, half) in enumerate(cells):
            ks = [_gemm(f, b, g), Kernel("loop", "fusion", 0, plain, None, 3)]
            if half and with_half:
                ks.append(Kernel("half", "fusion", 0, half, "bf16", 2))
            seconds = price.step_time(ks, rates, price.Constants.of(truth))["seconds"]
            obs.append(fit_lib.Observation(f"c{i}", "cpu", tuple(ks), rates, 1, seconds, "t"))
        return obs

    obs = observations(with_half=True)
    # The fixed costs held at the truth's (other tests fit them): this one is the rates'.
    held = {
        fit_lib.CACHE: (None, "no kernel's bytes fit in cache"),
        "kernel_overhead_s": (1e-6, "the truth's"),
        "library_overhead_s": (1e-5, "the truth's"),
    }
    fitted = fit_lib.fit_platform("cpu", obs, held)
    for name, value in truth.items():
        assert fitted[name] == pytest.approx(value, rel=0.02), name
    # Without a bf16 fusion among the observations, nothing tells its rate: none, while
    # the rest is fitted as before.
    f32_only = fit_lib.fit_platform("cpu", observations(with_half=False), held)
    assert f32_only["half_float_memory_efficiency"] is None
    assert f32_only["library_memory_efficiency"] == pytest.approx(0.15, rel=0.02)
    gpu = fit_lib.fit_platform("gpu", [dataclasses.replace(o, platform="gpu") for o in obs])
    assert gpu["library_memory_efficiency"] is None
    assert gpu["half_float_memory_efficiency"] is None


def test_a_kinds_fixed_cost_is_not_made_up_where_no_kernel_of_that_kind_ran():
    truth = {"compute_efficiency": 0.4, "memory_efficiency": 0.7, "kernel_overhead_s": 5e-6}
    cells = list(CELLS)
    # One more than the CPU's free constants (its cache's and its library calls' rates too).
    cells += [(2e12, 1e7, 1), (3e10, 2e5, 7)]
    obs = [
        dataclasses.replace(_observation(f, b, n, truth, i), platform="cpu")
        for i, (f, b, n) in enumerate(cells)
    ]
    fitted = fit_lib.fit_platform("cpu", obs)
    assert fitted["copy_overhead_s"] is None  # no copy ran
    assert fitted["library_overhead_s"] == pytest.approx(5e-6, rel=0.02)


def test_the_committed_cpu_constants_price_each_kind_apart_within_the_traced_lower_ends():
    cpu = predict.family_constants("cpu")
    for name, (low, high) in fit_lib.PER_KIND_BOUNDS.items():
        assert low * (1 - 1e-9) <= cpu[name] <= high
    assert cpu["library_overhead_s"] > cpu["kernel_overhead_s"] > cpu["copy_overhead_s"]
    assert predict.family_constants("gpu").get("copy_overhead_s") is None


def test_a_prediction_and_the_fits_loss_price_a_program_with_the_same_function():
    # Every kind of kernel a constant prices apart, on a chip with vector units.
    ks = (
        _gemm(3e9, 4e6, 2),
        Kernel("conv", "conv", 5e8, 7e5, "bf16", 3),
        Kernel("loops", "elemental_conv", 1e7, 1e5, "f32", 1),
        Kernel("copy", "copy", 0, 3e3, None, 5),
        Kernel("half", "fusion", 0, 2e6, "bf16", 1),
        Kernel("all-reduce", "collective", 0, 8e5, None, 1, 6e5),
    )
    family = {
        **TABLE["families"]["gpu"],
        "vector_efficiency": 0.3,
        "elemental_conv_efficiency": 0.02,
        "copy_overhead_s": 1e-6,
        "library_overhead_s": 7e-6,
        "conv_overhead_s": 9e-6,
        "cache_memory_efficiency": 3.0,
        "library_memory_efficiency": 0.2,
        "half_float_memory_efficiency": 0.1,
        "published_loop_step_s": 0.01,
    }
    c = price.Constants.of(family)
    rates = rates_lib.of_device(T4)
    alone = price.step_time(ks, rates, c)["seconds"]
    mine = fit_lib.Observation("run", "gpu", ks, rates, 32, 1.0, "record r", host_s=2e-4)
    theirs = dataclasses.replace(mine, source="reference p", published=True)
    stacked = price.seconds(fit_lib.programs([mine, theirs]), c)
    # The fit prices each observation as a prediction does, to the last bit, plus what it
    # knows of the step: the host side, and a published run's own loop.
    assert stacked[0] == alone + 2e-4
    assert stacked[1] == alone + 2e-4 + 0.01
    # Control: the same program at other constants is priced otherwise.
    other = price.Constants.of({**family, "conv_overhead_s": 9e-5})
    assert price.step_time(ks, rates, other)["seconds"] > alone


def test_a_runs_own_prediction_carries_the_band_of_the_split_its_chip_needs():
    from experiments.harness import measure

    summary = [[40, "fusion", 1e6, 1e6, "f32", 0]]
    known = predict.constants()["families"]["gpu"]["error"]["chips"]
    for kind in ("NVIDIA H100 80GB HBM3", "Tesla T4"):
        device = SimpleNamespace(platform="gpu", device_kind=kind)
        block = measure.kernel_prediction(summary, 128, device)
        chip = chips.chip_name(kind)
        want = "program" if chip in known else "chip"
        assert block["error_band"]["split"] == want, (kind, known)
    # both splits are exercised by the committed constants: a chip the fit observed, one not
    assert "H100 SXM" in known and "T4" not in known


def test_the_batchs_host_parts_are_a_line_through_each_sizes_median_that_never_falls():
    from jaxcnn.perf import host as host_lib

    parts = dict.fromkeys(host_lib.PARTS, 1e-6)
    # five loops of one size (a width sweep) and one loop each of two more sizes
    sweep = [(100, {**parts, "put": s}) for s in (3e-4, 1e-4, 2e-4, 2e-4, 2e-4)]
    grows = [*sweep, (10, {**parts, "put": 1e-4}), (1000, {**parts, "put": 4e-4})]
    # through each size's median (10: 1e-4, 100: 2e-4, 1000: 4e-4), not every sample
    at = host_lib.modelled_parts(grows, 500)["put"]
    medians = [(10, 1e-4), (100, 2e-4), (1000, 4e-4)]
    assert at == pytest.approx(host_lib._line(medians, 500))
    assert host_lib.modelled_parts(grows, 2000)["put"] > at  # more bytes, a longer put
    # a line that falls with the bytes is noise: the samples' median, whatever the bytes
    falls = [*sweep, (10, {**parts, "put": 5e-4}), (1000, {**parts, "put": 1e-4})]
    flat = {host_lib.modelled_parts(falls, b)["put"] for b in (10, 500, 5000)}
    assert flat == {2e-4}


def test_the_dispatch_is_a_line_in_the_programs_convolutions_where_the_loops_rise_with_them():
    from jaxcnn.perf import host as host_lib

    parts = dict.fromkeys(host_lib.PARTS, 1e-6)

    def loops(*pairs):  # (convolution kernels a step, dispatch) of measured loops
        return [(100, {**parts, "dispatch": d}, c) for c, d in pairs]

    # two MLPs (none) and three CNNs (5 each): a line through each count's median
    rises = loops((0, 3e-4), (0, 4e-4), (5, 8e-4), (5, 9e-4), (5, 1e-3))
    assert host_lib.dispatch_line(rises) == [(0, 3.5e-4), (5, 9e-4)]
    at = host_lib.modelled_parts(rises, 100, convs=2)["dispatch"]
    assert at == pytest.approx(3.5e-4 + 2 * (9e-4 - 3.5e-4) / 5)
    # a count beyond those measured is held to the nearest, never extrapolated
    assert host_lib.modelled_parts(rises, 100, convs=60)["dispatch"] == pytest.approx(9e-4)
    # a second call a step launches no convolution: the line at none
    two = host_lib.modelled_parts(rises, 100, dispatches=2, convs=5)["dispatch"]
    assert two == pytest.approx(9e-4 + 3.5e-4)
    # the controls: the program's count unknown, a line that falls (a CPU's loops), or
    # one count only, and the dispatch is the median per call as before
    median = 8e-4
    assert host_lib.modelled_parts(rises, 100)["dispatch"] == pytest.approx(median)
    falls = loops((0, 9e-4), (0, 1e-3), (5, 3e-4), (5, 8e-4), (5, 4e-4))
    assert host_lib.dispatch_line(falls) is None
    assert host_lib.modelled_parts(falls, 100, convs=5)["dispatch"] == pytest.approx(median)
    one = loops((5, 3e-4), (5, 8e-4))
    assert host_lib.modelled_parts(one, 100, convs=0)["dispatch"] == pytest.approx(5.5e-4)
    # loops measured without their kernels count for the median, not the line
    assert host_lib.dispatch_line([(100, {**parts, "dispatch": 1e-3}), *one]) is None


def test_a_compiled_programs_convolutions_reach_its_modelled_dispatch():
    from jaxcnn import host_loop
    from jaxcnn.perf import host as host_lib
    from jaxcnn.perf import predict

    table = predict.constants()
    _, gpu = host_lib.section(table, "gpu")
    # the committed GPU loops: the CNNs' programs launch convolutions, the MLPs' none
    counts = {key: m.get("convs_per_step") for key, m in gpu["loop"].items()}
    assert counts["mnist_cnn, batch 128"] > 0 and counts["mlp width=4096, batch 128"] == 0
    nbytes = host_loop.batch_bytes("mnist_cnn", {}, 128)
    cnn = host_loop.modelled_parts(nbytes, 1, table, "gpu", convs=counts["mnist_cnn, batch 128"])
    mlp = host_loop.modelled_parts(nbytes, 1, table, "gpu", convs=0)
    assert cnn["dispatch"] > mlp["dispatch"]
    # the CPU's loops do not rise with them: the same dispatch either way (the control)
    on_cpu = [
        host_loop.modelled_parts(nbytes, 1, table, "cpu", convs=c)["dispatch"] for c in (0, 5)
    ]
    assert on_cpu[0] == on_cpu[1] == host_loop.modelled_parts(nbytes, 1, table, "cpu")["dispatch"]


def test_a_loop_step_mostly_kernels_takes_the_wider_device_step_band():
    rule = predict.kernels_band_instead
    # kernels most of the step, their band the wider: theirs
    assert rule(device_step=2.1e-3, loop_step=2.14e-3, loop_worst=3.41, device_worst=6.1)
    # the controls: host-bound, or a narrower kernels' band, or no band for the kernels
    assert not rule(device_step=0.2e-3, loop_step=1.4e-3, loop_worst=3.41, device_worst=6.1)
    assert not rule(device_step=2.1e-3, loop_step=2.14e-3, loop_worst=3.41, device_worst=2.0)
    assert not rule(device_step=2.1e-3, loop_step=2.14e-3, loop_worst=3.41, device_worst=None)
    # an unvalidated loop step (no published loops' band) takes the kernels' where it can
    assert rule(device_step=2.1e-3, loop_step=2.14e-3, loop_worst=None, device_worst=6.1)


def test_the_target_command_says_which_band_a_loop_step_carries():
    from experiments.cli import targets as targets_cli

    kernels = {"median": 1.36, "worst": 6.1, "observations": 197, "split": "chip",
               "quantity": "device_step", "mostly_kernels": True}  # fmt: skip
    said = targets_cli.loop_band_words(kernels)
    assert "the device step's, leave one chip out" in said and "worst 6.1x" in said
    loops = {"median": 1.4, "worst": 3.41, "observations": 9, "faster": 4, "hosts": ["T4"]}
    assert "published JAX loops held out" in targets_cli.loop_band_words(loops)


@pytest.mark.parametrize("dispatch_s", [1e-7, 1e-2])
def test_predict_gives_a_loop_step_mostly_kernels_their_band_as_factors(dispatch_s):
    # held-out factors 5, 1.1, 2, 1.5, 3: three predicted faster, two slower
    observed = [(1.0, 0.2), (1.0, 1.1), (2.0, 1.0), (1.0, 1.5), (3.0, 1.0)]
    family = {**TABLE["families"]["gpu"], "observations": [
        {"measured_s": a, "held_out_predicted_s": {"chip": p}, "regime": "small"}
        for a, p in observed]}  # fmt: skip
    family["error"] = {**family["error"], "splits": {
        "chip": {"regimes": {"small": _band(0.5, 0.8, 5)}}}}  # fmt: skip
    published = {"median": 1.4, "worst": 3.0, "observations": 5, "faster": 1, "hosts": ["T4"]}
    table = {**TABLE, "families": {"gpu": family},
             "loop_error": {"gpu": {"published_band": {"small": published}}}}  # fmt: skip
    host = host_lib.host_side(
        measured=None, dispatch_s=dispatch_s, batch_bytes=1000, host_link_bytes_per_s=None,
        modelled={"dispatch": dispatch_s}, modelled_on="gpu",
    )  # fmt: skip
    p = predict.predict([_gemm(1e9, 1e6)], rates_lib.of_device(A100), "gpu", 32, host=host,
                        table=table)  # fmt: skip
    assert p.regime == "small" and p.band["worst"] == 0.8  # error_band's: |p/a - 1|
    assert (2 * p.device_step_s > p.loop_step_s) == (dispatch_s < 1e-3)  # both cases met
    if 2 * p.device_step_s > p.loop_step_s:  # kernels most of it: their band, as factors
        # three held-out steps predicted faster (0.2 s for 1 s, 1 s for 2 s and 3 s)
        assert p.loop_band == {"median": 2.0, "worst": 5.0, "observations": 5, "faster": 3,
                               "split": "chip", "quantity": predict.DEVICE_STEP,
                               "mostly_kernels": True}  # fmt: skip
    else:  # the control: a host-bound step keeps the published loops' band
        assert p.loop_band["worst"] == 3.0 and "mostly_kernels" not in p.loop_band
