"""Model parallelism (`model`, `data_model`) computes what one device computes, on 8 fake
CPU devices, for every registry model the split rule can split.

Tolerance: that of tests/test_parallel.py, float32 atol = rtol = 1e-5 on params, batch
stats, optimizer state and loss after 3 Adam steps. Splitting kernels on their output
features leaves the forward pass's sums whole, but the backward pass sums each layer's
input gradient over those features (per-device partial sums, then an all-reduce), and
data_model also splits the batch's sums as sharded does: float32 additions run in
another order, so the results agree to rounding, not bit for bit. Measured differences
are at most ~6e-6 (lenet5's first Dense kernel under data_model; sharded and pmap alone
give it ~5e-6), most models' ~1e-6; a dropped gradient all-reduce is off by ~6e-3 (the
positive control below)."""

from __future__ import annotations

import functools
import math

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from test_parallel import _assert_trees_close, _initial, _train

from jaxcnn import choices, data, models, parallel, train
from jaxcnn.errors import UsageError
from jaxcnn.loop import FitOptions, fit

ATOL = RTOL = 1e-5
STEPS = 3
GLOBAL_BATCH = 16  # 4 data rows of the default 4 x 2 mesh: 4 examples each

# The overrides a model is trained with here (none unless named).
OVERRIDES = {
    "mlp": {"width": 32, "dropout": 0.0},
    "mnist_cnn": {"input_size": 14},  # its real layers on a smaller image: faster
    # resnet_tiny keeps its own 32x32 images: at 16x16 its last stage sees 2x2 maps, whose
    # BatchNorm statistics leave it ill-conditioned (sharded too differs by 1e-3).
}
# Registry models not tried, each with why. Any other model, a new one included, is
# tried with its defaults: a new kind of layer is never silently untried.
LEFT_OUT = {
    "catsdogs_cnn": "256x256 images, and ill-conditioned shrunk (tests/test_parallel.py)",
    # Published loops' networks of layers tried above: 3x3 convs, average pools, Dense.
    "flax_mnist_cnn": "mnist_cnn's and lenet5_keras's kinds of layer, tried there",
    "flax_cifar_cnn": "mnist_cnn's and lenet5_keras's kinds of layer, tried there",
    "toy_mlp": "two Dense layers, mlp's kind, tried there",
    "jia_mlp": "two Dense layers, mlp's kind, tried there",
    "raypod_mlp": "three Dense layers, mlp's kind, tried there",
    "resnet18": "ImageNet-sized: minutes per compile on 2 cores",
    "resnet50": "ImageNet-sized: minutes per compile on 2 cores",
    "vgg16": "ImageNet-sized: minutes per compile on 2 cores",
    **dict.fromkeys(
        ("uva_resnet", "uva_preactresnet", "uva_googlenet", "uva_densenet", "cifar_resnet56"),
        "a published one-GPU loop's network, there for its reference's compile; 21 to 57 "
        "convolutions with BatchNorm, its kinds of layer resnet_tiny's (and concatenations)",
    ),
}
# uva_autoencoder is tried for its transposed convs (no other model has them).
CASES = {n: OVERRIDES.get(n, {}) for n in models.names() if n not in LEFT_OUT}

# What the rule cannot split: resnet_tiny's widest kernels have 16 output features,
# 2 per device over 8, under the minimum of 4 (over data_model's 2 model devices: 8).
UNSPLITTABLE = {("resnet_tiny", "model"): (8, "8, 10, 16")}


def _new_state(name: str):
    """(fresh initial state on the host, input shape) of `name` with its CASES overrides;
    fresh each time, since every placement's step donates the state it is given."""
    host, shape = _initial(name, tuple(sorted(CASES[name].items())), 1e-3)
    return jax.tree.map(np.array, host), shape


def _batches(shape, steps: int = STEPS, batch_size: int = GLOBAL_BATCH):
    images, labels = data.synthetic(steps * batch_size, shape, 10, seed=1)
    return list(data.batches(images, labels, batch_size))


@functools.cache
def _single_run(name: str):
    state, shape = _new_state(name)
    return _train(parallel.place("single", jax.devices()), state, _batches(shape))


def test_every_registry_model_not_left_out_is_tried():
    # a model named nowhere here (uva_autoencoder, lenet5) is tried with its defaults
    assert CASES["uva_autoencoder"] == CASES["lenet5"] == {}
    assert CASES["mlp"] == OVERRIDES["mlp"] and "resnet50" not in CASES
    assert sorted([*CASES, *LEFT_OUT]) == models.names()
    assert set(OVERRIDES) <= set(CASES)  # no override of a model left out or gone


# The compile-heavy ones (30 s to 90 s each on 2 busy cores) run with the slow tests.
FAST = ("mlp", "mnist_cnn")


@pytest.mark.parametrize("strategy", choices.MODEL_STRATEGIES)
@pytest.mark.parametrize(
    "name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in CASES]
)
def test_model_strategies_match_single_device(name, strategy):
    assert jax.device_count() == 8
    state, shape = _new_state(name)
    placement = parallel.place(strategy, jax.devices())
    if (name, strategy) in UNSPLITTABLE:
        devices, widths = UNSPLITTABLE[name, strategy]
        with pytest.raises(UsageError) as raised:
            placement.put_state(state)
        assert str(raised.value) == (
            f"the split rule splits none of this model's parameters over {devices} model "
            f"devices: no kernel's output features ({widths}) divide into {devices} slices "
            "of at least 4; use strategy sharded, or fewer devices on the model axis"
        )
        return
    assert parallel.split_report(placement.put_state(state)).split > 0  # really split
    expected, expected_losses = _single_run(name)
    actual, losses = _train(placement, state, _batches(shape))
    assert int(actual.step) == STEPS
    np.testing.assert_allclose(losses, expected_losses, rtol=RTOL, atol=ATOL)
    _assert_trees_close(actual.params, expected.params)
    _assert_trees_close(actual.batch_stats, expected.batch_stats)
    _assert_trees_close(actual.opt_state, expected.opt_state)


def test_a_model_the_rule_cannot_split_is_a_usage_error_before_any_transfer():
    # resnet_tiny, one stage of 4 filters: kernels of 4 and 10 output features, neither of which
    # gives 8 devices 4 each (the matrix above has the full-width one, with the slow tests).
    module = models.get("resnet_tiny", stage_sizes=(1,), num_filters=4)
    state = jax.eval_shape(
        lambda: train.create_train_state(module, train.make_optimizer(), (16, 16, 3))
    )
    with pytest.raises(UsageError) as raised:
        parallel.place("model", jax.devices()).put_state(state)  # shapes: nothing to put
    assert str(raised.value) == (
        "the split rule splits none of this model's parameters over 8 model devices: no "
        "kernel's output features (4, 10) divide into 8 slices of at least 4; use "
        "strategy sharded, or fewer devices on the model axis"
    )


def _trained_by_shard_map(axis_name: str | None):
    """mlp trained 3 steps as data_model places it (parameters split on "model" by the
    rule, batch split on "data"), the step run per data row by shard_map and told the
    row's axis name, or not: then no gradient is averaged over the rows, while the
    out_specs still say the state is the same on every row."""
    state, shape = _new_state("mlp")
    mesh = parallel._model_mesh("data_model", jax.devices(), None)
    step = jax.jit(
        jax.shard_map(
            functools.partial(train.train_step, axis_name=axis_name),
            mesh=mesh,
            in_specs=(P(), P(parallel.DATA_AXIS)),
            out_specs=(P(), P()),
            axis_names={parallel.DATA_AXIS},
            check_vma=False,
        ),
        donate_argnums=0,
    )
    state = jax.tree.map(parallel._put, state, parallel.state_shardings(state, mesh))
    for batch in _batches(shape):
        state, _ = step(state, jax.device_put(batch, NamedSharding(mesh, P(parallel.DATA_AXIS))))
    return jax.device_get(state.params)


def test_a_dropped_gradient_all_reduce_fails_the_equality_check():
    """The positive control: the same split with the all-reduce of the gradients over the
    data axis dropped differs from one device far beyond the tolerance; with it kept, the
    same construction passes, so it is the missing all-reduce the check catches."""
    expected = _single_run("mlp")[0].params
    _assert_trees_close(_trained_by_shard_map(parallel.DATA_AXIS), expected)
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        _assert_trees_close(_trained_by_shard_map(None), expected)


def _shard_shapes(x: jax.Array) -> set[tuple[int, ...]]:
    return {tuple(shard.data.shape) for shard in x.addressable_shards}


@pytest.mark.parametrize("strategy,mesh_shape,model_devices", [
    ("model", None, 8), ("data_model", None, 2), ("data_model", (2, 4), 4),
])  # fmt: skip
def test_a_split_kernel_holds_its_share_of_output_features_on_every_device(
    strategy, mesh_shape, model_devices
):
    placement = parallel.place(strategy, jax.devices(), mesh_shape=mesh_shape)
    state, shape = _new_state("mlp")
    placed = placement.put_state(state)
    placed, _ = placement.train_step(placed, placement.put_batch(_batches(shape, steps=1)[0]))
    adam = placed.opt_state[0]
    hidden = 32 // model_devices
    for tree in (placed.params, adam.mu, adam.nu):  # the optimizer state as its parameter
        assert _shard_shapes(tree["Dense_0"]["kernel"]) == {(784, hidden)}
        assert _shard_shapes(tree["Dense_1"]["kernel"]) == {(32, hidden)}
        assert _shard_shapes(tree["Dense_0"]["bias"]) == {(32,)}  # a bias stays whole
        # 10 classes: 5 per device over 2 model devices, none over 4 or 8
        last = (32, 10 // model_devices) if model_devices == 2 else (32, 10)
        assert _shard_shapes(tree["Dense_2"]["kernel"]) == {last}
    assert _shard_shapes(adam.count) == {()} and _shard_shapes(placed.step) == {()}

    report = parallel.split_report(placed)
    split = [(784, 32), (32, 32)] + ([(32, 10)] if model_devices == 2 else [])
    whole = [(32,), (32,), (10,)] + ([] if model_devices == 2 else [(32, 10)])
    per_device = (sum(map(math.prod, split)) // model_devices + sum(map(math.prod, whole))) * 4
    assert report == parallel.Split(
        split=len(split),
        replicated=len(whole),
        split_bytes=sum(map(math.prod, split)) * 4 // model_devices,
        replicated_bytes=sum(map(math.prod, whole)) * 4,
        # parameters, Adam's mu and nu; the step, Adam's count (int32), the rng (2 x uint32)
        state_bytes=3 * per_device + 4 + 4 + 8,
    )


def test_a_state_on_one_device_or_replicated_reports_nothing_split():
    state, _ = _new_state("mlp")
    params = sum(x.size for x in jax.tree.leaves(state.params)) * 4
    for strategy, count in (("single", 1), ("sharded", 8), ("pmap", 8)):
        placed = parallel.place(strategy, jax.devices()[:count]).put_state(state)
        report = parallel.split_report(placed)
        assert (report.split, report.replicated) == (0, 6), strategy
        assert report.split_bytes == 0 and report.replicated_bytes == params, strategy
        assert report.state_bytes == 3 * params + 16, strategy


@pytest.mark.parametrize("strategy", choices.MODEL_STRATEGIES)
@pytest.mark.parametrize("loop", ["step", "device"])
def test_fit_with_padded_evaluation_matches_single_device(strategy, loop):
    """The whole loop: eval steps on a padded, masked last batch, and the whole-epoch
    program (the step in a scan) under the model strategies."""
    images, labels = data.load("digits", "train")
    splits = (images[:96], labels[:96]), (images[:50], labels[:50])  # 50: padded to 64
    histories, params = {}, {}
    for name in ("single", strategy):
        placement = parallel.place(name, jax.devices())
        state, _ = _new_state("mlp")
        options = FitOptions(batch_size=GLOBAL_BATCH, placement=placement, loop=loop)
        state, (histories[name],) = fit(state, *splits, options)
        params[name] = jax.device_get(placement.get_state(state).params)
    _assert_trees_close(params[strategy], params["single"])
    for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy"):
        expected = pytest.approx(histories["single"][key], rel=RTOL, abs=ATOL)
        assert histories[strategy][key] == expected, key
    assert histories[strategy]["steps"] == 6


def test_the_mesh_is_the_most_balanced_factorisation_with_the_smaller_model_axis():
    shapes = {n: parallel.mesh_shape(n) for n in (4, 6, 8, 9, 12, 16, 32)}
    assert shapes == {4: (2, 2), 6: (3, 2), 8: (4, 2), 9: (3, 3), 12: (4, 3), 16: (4, 4),
                      32: (8, 4)}  # fmt: skip
    placement = parallel.place("data_model", jax.devices(), mesh_shape=(2, 4))
    state, _ = _new_state("mlp")
    kernel = placement.put_state(state).params["Dense_0"]["kernel"]
    assert dict(kernel.sharding.mesh.shape) == {"data": 2, "model": 4}


@pytest.mark.parametrize("call,message", [
    (lambda d: parallel.place("data_model", d[:7]),
     "strategy data_model splits 7 device(s) into data x model axes of 2 or more, and 7 "
     "has no such factors: use strategy model, or give mesh_shape=(1, 7)"),
    (lambda d: parallel.place("data_model", d, mesh_shape=(3, 2)),
     "mesh_shape (3, 2) does not fit 8 devices: give (data, model) with data x model = 8 "
     "and model >= 2, e.g. (4, 2)"),
    (lambda d: parallel.place("data_model", d, mesh_shape=(8, 1)),
     "mesh_shape (8, 1) does not fit 8 devices: give (data, model) with data x model = 8 "
     "and model >= 2, e.g. (4, 2)"),
    (lambda d: parallel.place("model", d[:1]),
     "strategy model splits parameters over 2 devices or more, got 1"),
    (lambda d: parallel.place("model", d, mesh_shape=(4, 2)),
     "mesh_shape is data_model's (data, model) mesh: strategy model puts every device on "
     "the model axis"),
    (lambda d: parallel.place("sharded", d, mesh_shape=(4, 2)),
     "mesh_shape is data_model's (data, model) mesh: strategy sharded takes none"),
    (lambda d: parallel.place("ring", d),
     "unknown strategy 'ring': choose one of single, pmap, sharded, model, data_model"),
])  # fmt: skip
def test_placement_mistakes_are_one_line_usage_errors(call, message):
    with pytest.raises(UsageError) as raised:
        call(jax.devices())
    assert str(raised.value) == message


def test_data_model_splits_the_batch_over_its_data_axis_only():
    placement = parallel.place("data_model", jax.devices())  # 4 x 2
    rows = {"image": np.zeros((30, 28, 28, 1), np.uint8), "label": np.zeros(30, np.int32)}
    with pytest.raises(UsageError, match=r"batch size 30 does not divide over 4 devices"):
        placement.put_batch(rows)
    placed = placement.put_batch({k: v[:28] for k, v in rows.items()})
    assert _shard_shapes(placed["image"]) == {(7, 28, 28, 1)}
    # model: every device takes the whole batch, of any size
    whole = parallel.place("model", jax.devices()).put_batch(rows)
    assert _shard_shapes(whole["image"]) == {(30, 28, 28, 1)}
