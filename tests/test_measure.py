"""Timing, memory, MFU and failure classification (experiments/harness/measure.py). No timed
assertions: structure, counts and ordering only."""

import dataclasses
import re
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import Analysed

from experiments import records
from experiments.harness import measure
from experiments.harness.prepare import load_splits
from experiments.harness.runners.interface import RunContext
from experiments.harness.sweep import run_workload
from experiments.records.workload import BOUNDS, Workload
from jaxcnn import loop, models, train
from jaxcnn.perf import predict


def _ordered(summary, n):
    assert set(summary) == {"median", "p10", "p90", "n"}
    assert summary["n"] == n
    assert 0 <= summary["p10"] <= summary["median"] <= summary["p90"]


def test_summarize_orders_percentiles():
    summary = measure.summarize([0.3, 0.1, 0.2, 0.5, 0.4])
    _ordered(summary, 5)
    assert summary["median"] == 0.3


def test_time_calls_excludes_warmup_and_times_each_call():
    calls = []

    def call():
        calls.append(1)
        return jnp.ones(3) * len(calls)

    _ordered(measure.time_calls(call, steps=4, warmup=3), 4)
    assert len(calls) == 7


def test_time_blocks_hands_its_timed_blocks_to_the_pace_hook(monkeypatch):
    calls = []

    def run_block():
        calls.append(1)
        return jnp.ones(3)

    seconds = measure.time_blocks(run_block, steps=4, images_per_step=8, repeats=3)[0]
    assert len(calls) == 1 + 3 and seconds["n"] == 3  # unset: warm-up, then back to back
    asked = []

    def pace(block, repeats, images):  # what benchmarks/turns.py installs in a paired side
        asked.append((repeats, images, [block() for _ in range(repeats)]))
        return [2.0] * repeats

    monkeypatch.setattr(measure, "pace", pace)
    calls.clear()
    per_step, images_per_s = measure.time_blocks(run_block, steps=4, images_per_step=8, repeats=3)
    ((repeats, images, timed),) = asked
    assert (repeats, images) == (3, 32) and len(calls) == 1 + 3  # its blocks were run_block's
    assert all(s > 0 for s in timed)  # each call of `block` timed one block
    assert per_step["median"] == 0.5 and images_per_s["median"] == 16.0  # pace's seconds count


def test_time_step_loop_threads_the_state_and_time_eval_keeps_it():
    step = jax.jit(lambda s, b: (s + b, {"loss": jnp.sum(s)}), donate_argnums=0)
    per_step, _ = measure.time_step_loop(step, jnp.zeros(4), jnp.ones(4), steps=3, warmup=1)
    _ordered(per_step, 3)
    state = jnp.zeros(4)
    _ordered(measure.time_eval(jax.jit(lambda s, b: s @ b), state, jnp.ones(4), steps=2), 2)
    assert not state.is_deleted()


@pytest.mark.parametrize("strategy", ["single", "sharded", "pmap"])
def test_dispatch_is_timed_on_a_step_that_does_nothing_and_leaves_the_real_state(strategy):
    import jaxcnn

    devices = jax.devices()[: 1 if strategy == "single" else 2]
    model = models.get("mlp", width=8)
    state = jaxcnn.create_train_state(model, train.make_optimizer("adam"), (4, 4, 1))
    placement = jaxcnn.place(strategy, devices)
    placed = placement.put_state(state)
    host = {
        "image": np.zeros((4, 4, 4, 1), np.uint8),
        "label": np.zeros(4, np.int32),
        "mask": np.ones(4, np.float32),
    }
    batch = placement.put_batch(host)
    timed = measure.time_dispatch(strategy, devices, jax.eval_shape(lambda: state), batch)
    _ordered(timed, measure.DISPATCH_CALLS)
    # Neither the state nor the batch it was given is consumed: the timed calls ran on a
    # stand-in of the state's leaves.
    assert not any(x.is_deleted() for x in jax.tree.leaves(placed))
    assert not any(x.is_deleted() for x in jax.tree.leaves(batch))
    placement.train_step(placed, batch)  # the positive control: the real step donates
    assert all(x.is_deleted() for x in jax.tree.leaves(placed.params))


def test_memory_reads_the_compiled_analysis():
    x = jnp.ones((16, 16))
    compiled = jax.jit(lambda a: a @ a).lower(x).compile()
    memory = measure.memory(compiled, jax.devices()[0])
    assert memory["argument_bytes"] == 16 * 16 * 4
    assert memory["output_bytes"] == 16 * 16 * 4
    assert memory["total_bytes"] >= memory["argument_bytes"] + memory["output_bytes"]
    assert memory["peak_bytes_in_use"] is None  # the CPU keeps no allocator statistics


class _Allocator:
    """A device whose allocator holds `in_use` bytes and remembers its peak, as a GPU's
    runtime reports them."""

    def __init__(self, in_use: int, peak: int):
        self.in_use, self.peak = in_use, peak

    def hold(self, more: int) -> None:
        self.in_use += more
        self.peak = max(self.peak, self.in_use)

    def memory_stats(self) -> dict[str, int]:
        return {"bytes_in_use": self.in_use, "peak_bytes_in_use": self.peak,
                "bytes_limit": 10_000}  # fmt: skip


def test_a_workloads_memory_says_what_the_allocator_held_when_it_began():
    device = _Allocator(in_use=300, peak=5000)  # the probes ran before: their peak stands

    def workload(record):
        device.hold(2000)  # its state and step, then freed
        found = {"memory": {"total_bytes": 1500, **measure.allocator(device)}}
        device.hold(-2000)
        return found

    fields = measure.with_allocator_before(workload, device)({})
    assert fields["memory"] == {
        "total_bytes": 1500,
        "bytes_in_use": 2300,
        "peak_bytes_in_use": 5000,
        "bytes_limit": 10_000,
        "bytes_in_use_before": 300,
        "peak_bytes_in_use_before": 5000,
    }
    # the control: a CPU keeps no allocator figures, and its record says none
    cpu = measure.with_allocator_before(lambda r: {"memory": {"total_bytes": 1}}, jax.devices()[0])
    assert cpu({}) == {"memory": {"total_bytes": 1}}


def test_memory_is_none_where_there_is_no_analysis():
    memory = measure.memory(object(), None)
    assert set(memory.values()) == {None}


def test_matmul_peak_takes_the_best_size_per_dtype():
    ceiling = measure.measure_matmul_peak(jax.devices()[0], sizes=(16, 32), reps=2)
    assert set(ceiling) == {"float32", "bfloat16"}
    for measured in ceiling.values():
        assert set(measured["by_size"]) == {"16", "32"}
        assert measured["tflops"] == max(measured["by_size"].values()) > 0
        assert measured["by_size"][str(measured["size"])] == measured["tflops"]
    assert ceiling["float32"]["precision"] == "fp32"


def test_a_matmul_ceiling_keeps_each_sizes_best_pass_not_a_disturbed_first(monkeypatch):
    # The first pass of a process at half speed (as a CPU measured f32 at 101 GFLOP/s,
    # below its bf16, then 210 later): the ceiling is the second pass's.
    calls = []

    def timed(device, dtype, n, steps, warmup):
        calls.append((dtype, n))
        slow = len(calls) <= 4  # the first pass: two dtypes x two sizes
        return None, None, {"median": (2.0 if slow else 1.0) * n**3 * 2 / 1e12}

    monkeypatch.setattr(measure, "time_matmul", timed)
    ceiling = measure.measure_matmul_peak(jax.devices()[0], sizes=(16, 32), reps=2)
    assert len(calls) == 8  # two passes over both dtypes and sizes
    for measured in ceiling.values():
        assert measured["by_size"] == {"16": 1.0, "32": 1.0} and measured["tflops"] == 1.0
        assert measured["passes"] == 2
    calls.clear()  # the positive control: one disturbed pass alone keeps half the ceiling
    one = measure.measure_matmul_peak(jax.devices()[0], sizes=(16,), reps=2, passes=1)
    assert one["float32"]["tflops"] == 0.5


def test_flops_field_scales_xla_per_device_to_global():
    field = measure.flops_field(1000, 400, 10, 300.0, count=4)
    assert field["per_image"] == 100
    assert field["forward_per_image"] == 40
    assert field["xla_per_step"] == 1200.0
    assert field["xla_vs_jaxpr"] == pytest.approx(1.2)
    assert measure.flops_field(1000, 400, 10, None, 1)["xla_vs_jaxpr"] is None


@dataclasses.dataclass
class _H100:
    """Stands in for a jax.Device this CPU does not have."""

    platform: str = "gpu"
    device_kind: str = "NVIDIA H100 80GB HBM3"
    compute_capability: str = "9.0"


def test_utilization_against_vendor_and_measured_peaks():
    ceiling = {"float32": {"tflops": 400.0}}
    achieved, mfu = measure.utilization(99e12, 1.0, [_H100(), _H100()], "float32", ceiling)
    assert achieved == pytest.approx(99.0)
    assert mfu["vendor_precision"] == "tf32"
    assert mfu["vendor_peak_tflops"] == 495.0
    assert mfu["vs_vendor"] == pytest.approx(99 / (2 * 495))  # peak of both devices
    assert mfu["vs_measured"] == pytest.approx(99 / (2 * 400))
    _, cpu = measure.utilization(1e9, 0.1, jax.devices()[:1], "float32", {})
    assert cpu["vendor_peak_tflops"] is None and cpu["vs_vendor"] is None
    assert cpu["vs_measured"] is None


def test_step_fields_count_the_train_step():
    module = models.get("mlp", width=16)
    tx = train.make_optimizer("sgd")
    state = train.create_train_state(module, tx, (28, 28, 1))
    batch = {"image": np.zeros((8, 28, 28, 1), np.uint8), "label": np.zeros(8, np.int32)}
    compiled = jax.jit(train.train_step).lower(state, batch).compile()
    step_time = {"median": 0.01, "p10": 0.01, "p90": 0.01, "n": 1}
    fields = measure.step_fields(state, batch, compiled, jax.devices()[:1], step_time)
    forward = 2 * (784 * 16 + 16 * 16 + 16 * 10)  # the three GEMMs, per image
    assert fields["flops"]["forward_per_image"] == forward
    # 8 images: the forward GEMMs, the weight gradients (as many), and the input
    # gradients of the two upper layers (the first layer's input is the image).
    assert fields["flops"]["per_step"] == 8 * (2 * forward + 2 * (16 * 16 + 16 * 10))
    assert fields["achieved_tflops"] == pytest.approx(fields["flops"]["per_step"] / 0.01 / 1e12)
    assert fields["memory"]["argument_bytes"] > 0


@pytest.mark.slow
def test_an_ok_record_carries_every_measurement():
    workload = Workload(
        model="mlp",
        model_overrides={"width": 16},
        batch_size=8,
        epochs=1,
        steps=2,
        timing_steps=3,
    )
    ceiling = measure.measure_matmul_peak(jax.devices()[0], sizes=(16,), reps=1)
    bandwidth = measure.measure_bandwidth(jax.devices()[0], 2**20, reps=2)
    context = RunContext(
        jax.devices()[:1], load_splits(workload), ceiling=ceiling, bandwidth=bandwidth
    )
    record = run_workload(workload, context)
    assert record["status"] == "ok", record["message"]
    records.validate(record)
    assert record["flops"]["per_step"] > 0
    assert record["flops"]["xla_vs_jaxpr"] is not None
    assert record["achieved_tflops"] > 0
    assert record["mfu"]["measured_ceiling_tflops"] == ceiling["float32"]["tflops"]
    assert record["mfu"]["vs_measured"] is not None
    assert record["memory"]["temp_bytes"] is not None
    _ordered(record["eval_step_time_s"], 3)
    _ordered(record["dispatch_s"], measure.DISPATCH_CALLS)  # the host's side of a step
    assert record["matmul_ceiling"] == ceiling
    assert record["bandwidth"] == bandwidth
    # The compiled step's roofline, from this run's measured figures (a CPU has no
    # vendor figures): the lower bound the record's own step time is compared with.
    cost = record["cost"]
    assert cost["flops"] == record["flops"]["xla_per_device"]
    assert cost["bytes_accessed"] > 0 and cost["flops_source"] == "xla"
    bound = record["prediction_bound"]
    compute_s = cost["flops"] / (ceiling["float32"]["tflops"] * 1e12)
    memory_s = cost["bytes_accessed"] / bandwidth["bytes_per_s"]
    assert bound["compute_s"] == pytest.approx(compute_s)
    assert bound["memory_s"] == pytest.approx(memory_s)
    assert bound["step_time_s"] == max(compute_s, memory_s)
    assert bound["images_per_s"] == pytest.approx(8 / bound["step_time_s"])
    assert (bound["peak_source"], bound["bandwidth_source"]) == ("measured", "measured")
    assert bound["peak_precision"] == "fp32" and bound["method"] == "roofline bound"
    assert record["prediction_vendor_bound"] is None
    # The prediction: the kernels of the step it timed, priced at this run's rates by the
    # committed constants; never faster than its launches, and never below the bound.
    assert record["kernels_source"] == {"program": "train_step", "steps": 1}
    launched = sum(row[0] for row in record["kernels"])
    predicted = record["prediction"]
    assert predicted["method"] == "per-kernel" and predicted["rates_source"] == "measured"
    assert predicted["kernels"] == launched
    cpu = predict.family_constants("cpu")
    assert predicted["step_time_s"] >= launched * cpu["kernel_overhead_s"]
    assert predicted["images_per_s"] == pytest.approx(8 / predicted["step_time_s"])


def test_bandwidth_is_bytes_read_and_written_per_second():
    measured = measure.measure_bandwidth(jax.devices()[0], 2**20 + 3, reps=3)
    assert measured["size_bytes"] == 2**20  # whole float32 elements
    assert measured["n"] == 3
    assert 0 < measured["p10"] <= measured["bytes_per_s"] <= measured["p90"]


def test_step_cost_reads_the_compiled_analysis():
    a, b = jnp.ones((8, 16)), jnp.ones((16, 4))
    compiled = jax.jit(jnp.dot).lower(a, b).compile()
    # 2 x 8 x 16 x 4 FLOPs; bytes: both inputs read, the output written, f32.
    assert measure.step_cost(compiled, 7.0) == {
        "flops": 1024.0,
        "bytes_accessed": (8 * 16 + 16 * 4 + 8 * 4) * 4.0,
        "optimal_seconds": None,
        "flops_source": "xla",
    }


@pytest.mark.parametrize(
    "analysis", [None, [], {}, {"flops": -1.0}, NotImplementedError("no cost analysis")]
)
def test_step_cost_falls_back_to_the_jaxpr_count(analysis):
    cost = measure.step_cost(Analysed(analysis), 5000.0)
    assert (cost["flops"], cost["flops_source"], cost["bytes_accessed"]) == (5000.0, "jaxpr", None)
    assert measure.step_cost(Analysed(analysis))["flops_source"] is None


def test_step_cost_keeps_the_tpu_estimate_and_drops_uncounted_bytes():
    analysis = [{"flops": 10.0, "bytes accessed": -1.0, "optimal_seconds": -2.5}]
    assert measure.step_cost(Analysed(analysis)) == {
        "flops": 10.0,
        "bytes_accessed": None,
        "optimal_seconds": -2.5,
        "flops_source": "xla",
    }


_COST = {"flops": 2e9, "bytes_accessed": 1e9, "optimal_seconds": None, "flops_source": "xla"}


def _predict(cost=_COST, **rates):
    given = {
        "peak_tflops": 1.0,
        "peak_source": "measured",
        "peak_precision": "fp32",
        "bandwidth_bytes_per_s": 1e11,
        "bandwidth_source": "measured",
        **rates,
    }
    return measure.prediction(cost, 128, **given)


def test_prediction_is_the_roofline_of_the_cost():
    assert _predict() == {
        "step_time_s": 1e-2,  # 1e9 bytes at 1e11 B/s: memory bound (compute: 2e-3 s)
        "compute_s": 2e-3,
        "memory_s": 1e-2,
        "bound": "memory",
        "images_per_s": 12800.0,
        "peak_tflops_used": 1.0,
        "peak_source": "measured",
        "peak_precision": "fp32",
        "bandwidth_bytes_per_s": 1e11,
        "bandwidth_source": "measured",
        "flops_source": "xla",
        "bytes_source": "xla",
        "compiler_estimate_s": None,
        "method": "roofline",
    }
    faster_memory = _predict(bandwidth_bytes_per_s=1e13)
    assert (faster_memory["bound"], faster_memory["step_time_s"]) == ("compute", 2e-3)


def test_prediction_without_a_side_names_no_source_for_it():
    compute_only = _predict(bandwidth_bytes_per_s=None, bandwidth_source=None)
    assert compute_only["step_time_s"] == 2e-3
    assert (compute_only["memory_s"], compute_only["bandwidth_source"]) == (None, None)
    assert compute_only["bytes_source"] is None
    no_bytes = _predict({**_COST, "bytes_accessed": None})
    assert no_bytes["bandwidth_bytes_per_s"] is None and no_bytes["bound"] == "compute"
    assert _predict(peak_tflops=None, bandwidth_bytes_per_s=None) is None


@pytest.mark.parametrize(("optimal", "kept"), [(3e-3, 3e-3), (-4.0, None), (0.0, None)])
def test_prediction_keeps_only_a_positive_compiler_estimate(optimal, kept):
    assert _predict({**_COST, "optimal_seconds": optimal})["compiler_estimate_s"] == kept


@dataclasses.dataclass
class _Chip:
    platform: str = "gpu"
    device_kind: str = "NVIDIA A100-SXM4-40GB"
    compute_capability: str = "8.0"


def test_predictions_prefer_measured_figures_and_keep_the_vendors_apart(monkeypatch):
    a100 = measure.chips.find("NVIDIA A100-SXM4-40GB")._replace(bandwidth=1.5e12)
    monkeypatch.setattr(measure.chips, "find", lambda kind: a100)
    ceiling = {"float32": {"tflops": 100.0}}
    both = measure.predictions(_COST, 128, _Chip(), "float32", ceiling, None)
    measured, vendor = both["prediction"], both["prediction_vendor"]
    # f32 matmuls run as TF32 on an A100: the vendor's TF32 peak, 156 TFLOP/s.
    assert (measured["peak_tflops_used"], measured["peak_source"]) == (100.0, "measured")
    assert (measured["bandwidth_bytes_per_s"], measured["bandwidth_source"]) == (1.5e12, "vendor")
    assert (vendor["peak_tflops_used"], vendor["peak_source"]) == (156.0, "vendor")
    assert vendor["step_time_s"] == pytest.approx(max(2e9 / 156e12, 1e9 / 1.5e12))
    assert measured["peak_precision"] == vendor["peak_precision"] == "tf32"


def test_a_cpu_is_predicted_from_measured_figures_only():
    cpu = jax.devices("cpu")[0]
    bandwidth = {"bytes_per_s": 1e10}
    both = measure.predictions(_COST, 128, cpu, "float32", {"float32": {"tflops": 0.1}}, bandwidth)
    assert both["prediction_vendor"] is None
    assert both["prediction"]["step_time_s"] == pytest.approx(max(2e9 / 1e11, 1e9 / 1e10))
    assert measure.predictions(_COST, 128, cpu, "float32") == {
        "prediction": None,
        "prediction_vendor": None,
    }


def _counted_step(stop_at: int | None):
    """A train step that counts its calls and, at call `stop_at`, asks to stop (what the
    SIGTERM handler of experiments.cli.run does)."""
    calls = []

    def step(state, batch):
        calls.append(1)
        if len(calls) == stop_at:
            loop.request_stop()
        return state + batch, {"loss": jnp.sum(state)}

    return step, calls


@pytest.mark.parametrize("stop_at", [None, 1, 4, 7, 20])
def test_timing_stops_at_the_next_step_once_asked(stop_at):
    """3 steps timed: 2 warm-up and 3 calls one by one, then 1 + 7 blocks of 3 steps
    (29 calls); asked at call `stop_at` (one by one, in a warm-up block, in a timed
    block), no call after it is made. None: the control, every call made."""
    step, calls = _counted_step(stop_at)
    try:
        if stop_at is None:
            measure.time_step_loop(step, jnp.zeros(2), jnp.ones(2), steps=3, images_per_step=1)
        else:
            with pytest.raises(measure.StoppedWhileTiming, match="stopped while timing a step"):
                measure.time_step_loop(step, jnp.zeros(2), jnp.ones(2), steps=3, images_per_step=1)
    finally:
        loop.clear_stop()
    assert len(calls) == (stop_at or 29)


def test_eval_timing_stops_before_its_first_call_once_asked():
    calls = []
    loop.request_stop()
    try:
        with pytest.raises(measure.StoppedWhileTiming, match=r"after 0 of 7 calls"):
            measure.time_eval(lambda s, b: calls.append(1) or s, jnp.zeros(2), None, steps=5)
    finally:
        loop.clear_stop()
    assert calls == []


@pytest.mark.slow
def test_a_sigterm_while_timing_stops_the_run_before_its_timing_is_done(tmp_path):
    """A real SIGTERM to a real run timing the most steps a run may time: exit 143 at
    the next call, the calls it made counted in its last line, nothing recorded."""
    most = BOUNDS["timing_steps"][1]
    command = [
        sys.executable, "-m", "experiments.run", "--out", str(tmp_path), "--model",
        "mnist_cnn", "--batch-size", "64", "--epochs", "1",
        "--set", f"timing_steps={most}", "--set", "progress=false",
    ]  # fmt: skip
    run = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        said = []
        for line in run.stderr:  # until it says it is timing (its first timing: the loop's)
            said.append(line)
            if "timing " in line:
                run.send_signal(signal.SIGTERM)
                break
        said.append(run.communicate(timeout=300)[1])  # a guard against a hang, not a clock
    finally:
        run.kill()
    stderr = "".join(said)
    assert run.returncode == 143, stderr[-2000:]
    found = re.fullmatch(
        r"terminated \(SIGTERM\): stopped while timing a step, after ([\d,]+) of ([\d,]+) "
        r"calls \(this workload is not recorded\); records written so far are kept; "
        "the same command resumes",
        stderr.strip().splitlines()[-1],
    )
    assert found, stderr[-2000:]
    done, planned = (int(n.replace(",", "")) for n in found.groups())
    assert planned >= most and done < planned
    assert "Traceback" not in stderr
    assert not (tmp_path / "records.jsonl").exists()
