"""Timing, memory, MFU and failure classification (experiments/measure.py). No timed
assertions: structure, counts and ordering only."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import measure, records
from experiments.workload import Workload, load_splits, run_workload
from jaxcnn import flops, models, train


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


def test_time_steps_threads_the_state_and_time_eval_keeps_it():
    step = jax.jit(lambda s, b: (s + b, {"loss": jnp.sum(s)}), donate_argnums=0)
    _ordered(measure.time_steps(step, jnp.zeros(4), jnp.ones(4), steps=3, warmup=1), 3)
    state = jnp.zeros(4)
    _ordered(measure.time_eval(jax.jit(lambda s, b: s @ b), state, jnp.ones(4), steps=2), 2)
    assert not state.is_deleted()


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 9 GB"), "oom"),
        (RuntimeError("RESOURCE_EXHAUSTED: Out of memory"), "oom"),
        (RuntimeError("CUDA_ERROR_OUT_OF_MEMORY: out of memory"), "oom"),
        (MemoryError(), "oom"),
        (FloatingPointError("invalid value (nan) encountered in jit(train_step)"), "nan"),
        (RuntimeError("INTERNAL: ptxas exited with non-zero error code"), "error"),
        # TensorStore's words for a full disk under an Orbax save: not an OOM
        (
            ValueError(
                'RESOURCE_EXHAUSTED: Error writing "step/0" in OCDBT database at local'
                ' file "/x/": Failed to write 1476955 bytes to file 17: No space left on'
                " device [os_error_code='28']"
            ),
            "error",
        ),
        (ValueError("conv shapes do not match"), "error"),
    ],
)
def test_failures_are_classified(error, status):
    assert measure.classify_failure(error) == status


def test_memory_reads_the_compiled_analysis():
    x = jnp.ones((16, 16))
    compiled = jax.jit(lambda a: a @ a).lower(x).compile()
    memory = measure.memory(compiled, jax.devices()[0])
    assert memory["argument_bytes"] == 16 * 16 * 4
    assert memory["output_bytes"] == 16 * 16 * 4
    assert memory["total_bytes"] >= memory["argument_bytes"] + memory["output_bytes"]
    assert memory["peak_bytes_in_use"] is None  # the CPU keeps no allocator statistics


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
    assert fields["flops"]["per_step"] == flops.count_flops(train.train_step, state, batch)
    assert fields["flops"]["forward_per_image"] == 2 * (784 * 16 + 16 * 16 + 16 * 10)
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
    record = run_workload(workload, jax.devices()[:1], load_splits(workload), ceiling=ceiling)
    assert record["status"] == "ok", record["message"]
    records.validate(record)
    assert record["flops"]["per_step"] > 0
    assert record["flops"]["xla_vs_jaxpr"] is not None
    assert record["achieved_tflops"] > 0
    assert record["mfu"]["measured_ceiling_tflops"] == ceiling["float32"]["tflops"]
    assert record["mfu"]["vs_measured"] is not None
    assert record["memory"]["temp_bytes"] is not None
    _ordered(record["eval_step_time_s"], 3)
    assert record["matmul_ceiling"] == ceiling
