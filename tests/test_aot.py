"""jaxcnn.compile_for: a model defined here, in no registry, compiled for a TPU and a GPU
not at hand, and every mistake in what is asked refused in one line before the compiler
is touched.

Compiles need the [targets] extra (libtpu, the CUDA plugin) and skip where it is not
installed; the usage errors run everywhere.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import flax.linen as nn
import jax
import jax.numpy as jnp
import pandas as pd
import pytest
from conftest import missing_extra, needs_extra

import jaxcnn
from jaxcnn import aot, flops, parallel, targets, train
from jaxcnn.errors import UsageError
from jaxcnn.perf import host as host_lib

HAVE_TARGETS = missing_extra("targets") is None
needs_targets = needs_extra("targets")
SHAPE = (16, 16, 3)


class TinyCNN(nn.Module):
    """A user's own CNN: one convolution, a pool, a dense layer."""

    @nn.compact
    def __call__(self, x, train: bool = False, axis_name=None):
        x = nn.relu(nn.Conv(8, (3, 3))(x))
        x = nn.max_pool(x, (2, 2), strides=(2, 2))
        return nn.Dense(10)(x.reshape((x.shape[0], -1)))


class WideMLP(nn.Module):
    """Two billion parameters: with Adam's two moments, more than a TPU v5e's 16 GiB."""

    @nn.compact
    def __call__(self, x, train: bool = False, axis_name=None):
        return nn.Dense(10)(nn.Dense(2**21)(x.reshape((x.shape[0], -1))))


def _state(model: nn.Module | None = None):
    return aot.abstract_state(model or TinyCNN(), jaxcnn.make_optimizer("adam"), SHAPE)


def _compile(target: str, batch: int, model: nn.Module | None = None) -> aot.CompiledStep:
    lines: list[str] = []
    result = jaxcnn.compile_for(
        target, _state(model), aot.abstract_batch(batch, SHAPE), progress=lines.append
    )
    assert lines[0] == f"compiling the train step for {target}..."
    if result.compiled:
        assert lines[1].startswith(f"compiled the train step for {target} in ")
    return result


@needs_targets
@pytest.mark.parametrize("target", ["tpu-v5e-1", "gpu-t4"])
def test_a_users_own_cnn_compiles_for_a_tpu_and_a_gpu(target):
    small, large = _compile(target, 32), _compile(target, 256)
    for r in (small, large):
        assert r.compiled and r.fits is True and r.message is None
        assert (r.target, r.placement, r.devices) == (target, "single", 1)
        assert r.usable_bytes == targets.describe(targets.get(target))["usable_bytes_per_device"]
        m = r.memory
        assert (
            m.total_bytes
            == (m.argument_bytes + m.output_bytes + m.temp_bytes + m.generated_code_bytes)
            - m.alias_bytes
        )
        assert 0 < m.total_bytes <= r.usable_bytes
        # The FLOPs are jaxcnn's own count of the same step on the same shapes.
        batch = aot.abstract_batch(r.batch_size, SHAPE)
        assert r.flops == flops.count(train.train_step, _state(), batch).total
        # The prediction is the per-kernel model's, of the kernels returned with it.
        assert r.prediction.device_step_s == r.prediction.as_record()["step_time_s"]
        p = r.prediction.as_record()
        assert p["method"] == "per-kernel" and p["step_time_s"] > 0
        assert p["kernels"] == sum(k.count for k in r.kernels)
        # A small CNN: its band is the small programs' (never the ResNet-50 one), measured
        # held out on the device steps a GPU ran (the committed H200 records); no TPU
        # ever ran a small program, so there it is unvalidated.
        band = p["error_band"]
        assert p["regime"] == "small"
        if target.startswith("tpu"):
            assert band is None
        else:
            assert band["split"] == "chip" and band["observations"] > 10, band
            # which way it errs: as the report's band of the same split says (figures.csv)
            shown = pd.read_csv(Path(__file__).parents[1] / "results" / "figures.csv")
            shown = shown[(shown.quantity == "band") & (shown.platform == "gpu")
                          & (shown.model == "small programs")
                          & (shown.extra == "leave one chip out")]  # fmt: skip
            assert (band["faster"], band["observations"]) == (
                shown.band_faster.item(),
                shown.n.item(),
            )
        # The step is its kernels; the loop step adds the host's side of jaxcnn's step
        # loop (its parts modelled from the loops measured here) and the runtime's.
        assert p["step_time_s"] == p["device_step_s"] <= p["loop_step_s"]
        assert p["loop_parts_basis"] == "modelled"
        assert all(p["loop_parts"][part] is not None for part in host_lib.PARTS)
        # What the docs name, the prediction's own attributes, as its record block has them
        prediction = r.prediction
        assert prediction.loop_left_out == p["loop_left_out"]
        assert prediction.loop_bound == p["loop_bound"] in ("host", "device")
        assert prediction.epoch_s == p["epoch_s"] and prediction.loop_step_s == p["loop_step_s"]
        copy = p["loop_parts"][host_lib.TRANSFER]
        if target.startswith("gpu"):  # the batch over the T4's PCIe Gen3 x16
            nbytes = r.batch_size * (math.prod(SHAPE) + 4 + 4)
            assert copy == pytest.approx(nbytes / (16 * 8e9 * 128 / 130 / 8))
            assert p["loop_step_s"] >= p["device_step_s"] + copy
            assert p["loop_launches"]["kernels"] == p["kernels"]
            # Its host parts are the GPU client's own loops (the committed H200 records):
            # the dispatch and launches are in them, nothing is added or left out.
            assert p["loop_parts_platform"] == "gpu" and p["loop_left_out"] == []
        else:  # the batch over a TPU's PCIe (the scaling book's figure for TPUs); no
            # TPU launch or copy latency is published: left out, and said
            nbytes = r.batch_size * (math.prod(SHAPE) + 4 + 4)
            assert copy == pytest.approx(nbytes / 1.6e10)
            assert host_lib.TRANSFER not in p["loop_left_out"]
            assert any(m.startswith("copy_latency: ") for m in p["loop_left_out"])
            assert p["loop_launches"] == {"programs": 1}
            assert p["loop_parts"]["kernel_launches"] is None
        assert list(r.compile_seconds) == ["train"] and set(r.executables) == {"train"}
    assert small.batch_size == 32 and large.batch_size == 256
    assert large.flops == 8 * small.flops
    assert large.memory.total_bytes > small.memory.total_bytes  # activations grow
    assert large.prediction.device_step_s > small.prediction.device_step_s
    if target.startswith("tpu"):
        assert small.xla_flops_per_device > 0
    else:
        assert small.xla_flops_per_device is None  # XLA:GPU gives no cost analysis


@needs_targets
def test_the_fit_flips_where_the_step_outgrows_a_small_gpus_usable_memory():
    # An MX150 has 2 GiB, of which JAX may use 75%: XLA:GPU compiles the step however
    # large it is, and the fit is that rule's.
    fits, too_big = _compile("gpu-mx150", 64), _compile("gpu-mx150", 65536)
    assert fits.compiled and fits.fits is True
    assert too_big.compiled and too_big.fits is False
    assert fits.memory.total_bytes <= fits.usable_bytes < too_big.memory.total_bytes
    assert fits.usable_bytes == int(0.75 * 2 * 2**30)
    assert too_big.message.startswith("needs ") and "JAX can use 1.50 GiB" in too_big.message


@needs_targets
def test_a_step_too_big_for_the_tpu_is_the_compilers_refusal_not_an_exception():
    r = _compile("tpu-v5e-1", 8, WideMLP())
    assert r.compiled is False and r.fits is False
    assert r.message.startswith("RESOURCE_EXHAUSTED") and r.memory is None
    assert r.error is not None and r.prediction is None and r.kernels == ()
    assert r.flops > 0  # counted before the compile


@needs_targets
def test_a_users_own_step_function_compiles_sharded_over_eight_chips():
    def sgd_step(state, batch, axis_name=None):
        def loss(params):
            logits = state.apply_fn({"params": params}, batch["x"])
            return jnp.mean((logits - batch["y"]) ** 2)

        grads = jax.grad(loss)(state.params)
        params = jax.tree.map(lambda p, g: p - 0.1 * g, state.params, grads)
        return state.replace(params=params), {}

    batch = {
        "x": jax.ShapeDtypeStruct((64, *SHAPE), jnp.float32),
        "y": jax.ShapeDtypeStruct((64, 10), jnp.float32),
    }
    r = jaxcnn.compile_for("tpu-v5e-8", _state(), batch, placement="sharded", step=sgd_step)
    assert r.compiled and r.fits is True and r.devices == 8
    assert r.flops == flops.count(sgd_step, _state(), batch).total
    # The compiler counts one chip's share: an eighth of the batch's work, and more
    # than nothing (the gradient's all-reduce adds a little).
    assert 0 < r.xla_flops_per_device < r.flops / 4


@needs_targets
@pytest.mark.parametrize("target", ["tpu-v5e-8", "gpu-t4x4"])
def test_a_model_too_big_for_one_chip_fits_its_chips_with_its_kernel_split(target):
    """WideMLP's state (Adam: 3 x 6.5 GB) on every chip does not fit a 16 GB one; under
    `model` each chip holds an Nth of its wide kernel (the rule leaves the 10-class one
    and the biases whole), and the compiler says it fits, for the same step."""
    state, batch = _state(WideMLP()), aot.abstract_batch(64, SHAPE)
    replicated = jaxcnn.compile_for(target, state, batch, placement="sharded")
    split = jaxcnn.compile_for(target, state, batch, placement="model")
    assert replicated.fits is False
    assert split.compiled and split.fits is True and split.placement == "model"
    devices = targets.abstract_devices(targets.get(target))
    shardings, _, _ = parallel.input_shardings("model", devices, state)
    placed = jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), state, shardings
    )
    n, hidden = len(devices), 2**21
    report = parallel.split_report(placed)
    assert (report.split, report.replicated) == (1, 3)
    assert report.split_bytes == 768 * hidden // n * 4
    assert report.replicated_bytes == (hidden + hidden * 10 + 10) * 4
    # The donated state is what the compiled step aliases: exactly the report's share on
    # the GPU; on the TPU more, its layout padding the 10 classes' minor axis.
    if target.startswith("gpu"):
        assert split.memory.alias_bytes == report.state_bytes
    else:
        assert split.memory.alias_bytes > report.state_bytes
    assert split.memory.total_bytes <= split.usable_bytes


@needs_targets
@pytest.mark.slow
def test_the_readmes_own_model_snippet_runs_as_written(capsys):
    text = (Path(__file__).parent.parent / "README.md").read_text()
    start = text.index("Your own model on a chip you do not have")
    snippet = re.search(r"```python\n(.*?)```", text[start:], re.S).group(1)
    namespace: dict = {}
    exec(snippet, namespace)
    printed = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert [line.split()[:2] for line in printed] == [["tpu-v5e-1", "True"], ["gpu-t4", "True"]]
    r = namespace["r"]
    assert r.target == "gpu-t4" and r.batch_size == 256
    assert r.prediction.method == "per-kernel"


# --- What is wrong with what was asked: one line, before the compiler -------------------


@pytest.fixture
def no_compiler(monkeypatch):
    """The compiler's devices refused: a usage error must come before them (and found
    whether or not the compilers are installed here)."""

    def refused(target):
        raise AssertionError("the compiler was reached")

    monkeypatch.setattr(targets, "abstract_devices", refused)
    monkeypatch.setattr(targets, "require_compiler", lambda target: None)


BATCH = aot.abstract_batch(16, SHAPE)


@pytest.mark.parametrize(
    ("target", "state", "batch", "kw", "said"),
    [
        ("tpu-v5e-9", None, BATCH, {}, "unknown target 'tpu-v5e-9': did you mean tpu-v5e-"),
        ("gpu-t4", TinyCNN(), BATCH, {}, "the state is a TinyCNN, not a jaxcnn TrainState:"),
        ("gpu-t4", "a str leaf", BATCH, {}, "state.params['Dense_0']['bias'] is a str, not"),
        ("gpu-t4", None, (BATCH["image"],), {}, "the batch is a tuple, not a dict"),
        ("gpu-t4", None, {"images": BATCH["image"]}, {}, "the batch has keys 'images': train"),
        (
            "gpu-t4",
            None,
            {**BATCH, "label": jax.ShapeDtypeStruct((8,), jnp.int32)},
            {},
            "leading sizes ['16', '8']",
        ),
        ("tpu-v5e-8", None, aot.abstract_batch(12, SHAPE), {"placement": "sharded"}, "12 does"),
        ("tpu-v5e-8", None, BATCH, {}, "tpu-v5e-8 has 8 devices: place the step 'sharded'"),
        ("gpu-t4", None, BATCH, {"placement": "pmap"}, "pmap compiles only for devices at"),
        ("gpu-t4", None, BATCH, {"placement": "shard"}, "unknown placement 'shard'"),
        # data_model on 8 chips splits the batch over its data axis of 4
        (
            "tpu-v5e-8",
            None,
            aot.abstract_batch(10, SHAPE),
            {"placement": "data_model"},
            "batch size 10 does not divide over 4 devices",
        ),
        ("gpu-t4", None, BATCH, {"placement": "model"}, "over 2 devices or more, got 1"),
        ("tpu-v5e-8", None, BATCH, {"placement": "model"}, "output features (8, 10) divide"),
        ("gpu-t4", None, aot.abstract_batch(16, (32, 32, 3)), {}, "does not take batch images"),
        (123, None, BATCH, {}, "target must be a name (a str), got 123: choose one of tpu-v2-8,"),
        (None, None, BATCH, {}, "target must be a name (a str), got None: choose one of"),
        ("gpu-t4", None, BATCH, {"placement": 1}, "placement must be a name (a str), got 1"),
        (
            "gpu-t4",
            None,
            BATCH,
            {"programs": "train"},
            "programs must be a list or tuple of names, e.g. ('train', 'eval'), got 'train'",
        ),
        ("gpu-t4", None, BATCH, {"programs": ["train", "test"]}, "unknown program 'test': "),
        ("gpu-t4", None, BATCH, {"programs": ["eval"]}, "programs ['eval']: give 'train', and"),
        ("gpu-t4", None, BATCH, {"step": "sgd"}, "step is a str, not a function: give one taking"),
        ("gpu-t4", None, BATCH, {"progress": 1}, "progress is an int, not a function: give one"),
    ],
)
def test_a_mistake_is_one_usage_error_before_the_compiler(
    no_compiler, target, state, batch, kw, said
):
    if state is None:
        state = _state()
    elif state == "a str leaf":  # a leaf that has no shape
        state = _state()
        params = {**state.params, "Dense_0": {**state.params["Dense_0"], "bias": "zeros"}}
        state = state.replace(params=params)
    with pytest.raises(UsageError) as raised:
        jaxcnn.compile_for(target, state, batch, **kw)
    assert said in str(raised.value)
    assert "\n" not in str(raised.value)


def test_the_usage_checks_pass_a_good_request_on_to_the_compiler(no_compiler):
    # The positive control of the test above: the same call, nothing wrong, gets as far
    # as the compiler's devices.
    with pytest.raises(AssertionError, match="the compiler was reached"):
        jaxcnn.compile_for("gpu-t4", _state(), BATCH)
    with pytest.raises(AssertionError, match="the compiler was reached"):  # every option
        jaxcnn.compile_for(
            "gpu-t4",
            _state(),
            BATCH,
            programs=("train", "eval"),
            progress=print,
            step=train.train_step,
        )


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (
            lambda: aot.abstract_batch(-1, SHAPE),
            "batch_size must be a whole number of at least 1, got -1",
        ),
        (
            lambda: aot.abstract_batch(0, SHAPE),
            "batch_size must be a whole number of at least 1, got 0",
        ),
        (
            lambda: aot.abstract_batch(2.5, SHAPE),
            "batch_size must be a whole number of at least 1, got 2.5",
        ),
        (
            lambda: aot.abstract_batch(16, 784),
            "input_shape must be one example's shape in positive",
        ),
        (
            lambda: aot.abstract_batch(16, (28, 0, 1)),
            "without the batch axis, e.g. (28, 28, 1), got (28, 0",
        ),
        (
            lambda: aot.abstract_state(TinyCNN(), jaxcnn.make_optimizer(), 784),
            "input_shape must be",
        ),
        (lambda: aot.abstract_state(TinyCNN(), None, SHAPE), "tx is None, not an optax Gradient"),
        (lambda: aot.abstract_state(TinyCNN(), jaxcnn.make_optimizer(), SHAPE, -1), "seed must be"),
    ],
)
def test_the_shapes_refuse_what_they_cannot_be(call, said):
    with pytest.raises(UsageError) as refused:
        call()
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_the_shapes_are_made_of_good_sizes():
    """The positive control of the test above."""
    batch = aot.abstract_batch(1, [28, 28, 1])
    assert batch["image"].shape == (1, 28, 28, 1) and batch["label"].shape == (1,)
    state = aot.abstract_state(TinyCNN(), jaxcnn.make_optimizer(), [16, 16, 3], seed=2**63 - 1)
    assert state.params["Dense_0"]["kernel"].shape == (8 * 8 * 8, 10)


def test_a_memory_analysis_prints_each_part_in_gib():
    m = aot.Memory(2**30, 2**29, 2**29, 3 * 2**30, 2**20, 4 * 2**30 + 2**20)
    assert str(m) == (
        "4 GiB per device = arguments 1 GiB + outputs 0.5 GiB + temporaries 3 GiB + "
        "generated code 0.000977 GiB - aliased 0.5 GiB"
    )
    unknown = aot.Memory(None, 2**30, None, None, None, None)
    assert str(unknown) == (
        "unknown per device = arguments unknown + outputs 1 GiB + temporaries unknown + "
        "generated code unknown - aliased unknown"
    )


def _registry_step(target: str, batch: int, **overrides) -> aot.CompiledStep:
    """mnist_cnn as a library caller builds it (models.get), compiled for `target` with
    the optimizer a compile-only workload's defaults make."""
    from experiments.records.workload import Workload
    from jaxcnn import models

    w = Workload(model="mnist_cnn", dataset="synthetic", batch_size=batch, epochs=0)
    tx = train.make_optimizer(w.optimizer, w.learning_rate, schedule=w.schedule, total_steps=1)
    shape = models.input_shape("mnist_cnn")
    state = aot.abstract_state(models.get("mnist_cnn", **overrides), tx, shape, w.seed)
    return jaxcnn.compile_for(target, state, aot.abstract_batch(batch, shape))


@needs_targets
@pytest.mark.parametrize("target", ["gpu-t4", "tpu-v5e-1"])
def test_compile_for_and_the_cli_predict_the_same_loop_step(target):
    from experiments import records
    from experiments.harness import compile_only
    from experiments.predict import shown
    from experiments.records.workload import Workload

    workload = Workload(
        model="mnist_cnn", dataset="synthetic", batch_size=128, epochs=0, kind="compile",
        target=target,
    )  # fmt: skip
    cli = shown.of(records.typed(compile_only.run_target(workload, ("train",))))
    lib = _registry_step(target, 128).prediction.as_record()
    for key in ("device_step_s", "kernels", "loop_step_s", "loop_parts", "loop_left_out"):
        assert cli[key] == lib[key], key  # to the last bit
    assert cli["loop_launches"] == lib["loop_launches"]
    assert cli["formulation"] == lib["formulation"] == "xla"


@needs_targets
def test_a_registry_model_compiled_for_a_gpu_is_the_gpus_program():
    # Built on this CPU, where AUTO traces as the `cpu` formulation, compiled for a T4
    # it is XLA's convolutions, the program a GPU runs.
    auto = _registry_step("gpu-t4", 128).prediction
    xla = _registry_step("gpu-t4", 128, formulation="xla").prediction
    cpu = _registry_step("gpu-t4", 128, formulation="cpu").prediction  # a named choice stays
    assert (auto.formulation, xla.formulation, cpu.formulation) == ("xla", "xla", "cpu")
    assert auto.kernels == xla.kernels and auto.device_step_s == xla.device_step_s
    assert cpu.kernels != xla.kernels
