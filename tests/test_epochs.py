"""Whole epochs on the device: one compiled `lax.scan` of the one train step over a
dataset resident on the device, shuffled there. It trains what the per-step loop trains
(same parameters for the same batches), under sharded jit and pmap as on one device
(pmap's BatchNorm statistics averaged over the replicas as in its step loop), sees every
example once per epoch, stops on a NaN naming the step, and resumes from its
checkpoints bit for bit."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcnn import data, epochs, models, parallel, train
from jaxcnn.checkpoint import Checkpoints, params_digest
from jaxcnn.loop import FitOptions, NonFiniteLoss, fit


@functools.cache
def _dataset(n: int = 200) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "image": rng.integers(0, 256, (n, 28, 28, 1), dtype=np.uint8),
        "label": rng.integers(0, 10, n).astype(np.int32),
    }


def _state(name: str = "mnist_cnn", **overrides) -> train.TrainState:
    module = models.get(name, **overrides)
    return train.create_train_state(module, train.make_optimizer(), models.input_shape(name))


def _close(a, b, atol=1e-5):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol)


def test_an_epoch_order_is_a_permutation_cut_into_full_batches():
    order = np.asarray(epochs.device_epoch_order(jax.random.key(0), 103, 10))
    assert order.shape == (10, 10)  # 103 // 10 full batches, the remainder dropped
    assert len(set(order.ravel())) == 100 and order.max() < 103
    again = np.asarray(epochs.device_epoch_order(jax.random.key(1), 103, 10))
    assert not np.array_equal(order, again)  # each epoch its own order
    plain = np.asarray(epochs.device_epoch_order(jax.random.key(0), 103, 10, shuffle=False))
    np.testing.assert_array_equal(plain.ravel(), np.arange(100))


def test_the_compiled_epoch_trains_what_the_step_loop_trains():
    placement = parallel.place("single", jax.devices()[:1])
    dataset = placement.put_dataset(_dataset())
    order = epochs.device_epoch_order(jax.random.key(3), 200, 32)
    state = _state()
    by_epoch, metrics = placement.train_epoch(jax.tree.map(jnp.copy, state), dataset, order)
    by_step, step = state, jax.jit(train.train_step)
    for index in np.asarray(order):
        by_step, last = step(
            by_step, {"image": dataset["image"][index], "label": dataset["label"][index]}
        )
    _close(by_epoch.params, by_step.params)
    assert metrics["loss"].shape == (6,)
    np.testing.assert_allclose(metrics["loss"][-1], last["loss"], rtol=1e-5)
    assert int(by_epoch.step) == 6


def test_sharded_and_pmap_epochs_on_eight_devices_equal_one_device():
    order = epochs.device_epoch_order(jax.random.key(4), 200, 64)
    results, losses = [], []
    for strategy, count in (("single", 1), ("sharded", 8), ("pmap", 8)):
        placement = parallel.place(strategy, jax.devices()[:count])
        # No dropout: pmap's replicas draw their own masks (as in its step loop)
        state = placement.put_state(_state("mlp", width=32, dropout=0.0))
        state, metrics = placement.train_epoch(state, placement.put_dataset(_dataset()), order)
        results.append(jax.device_get(placement.get_state(state).params))
        losses.append(np.asarray(placement.get_metrics(metrics)["loss"]))
        assert int(jnp.ravel(state.step)[0]) == 3
    _close(results[0], results[1])
    _close(results[0], results[2])
    assert losses[0].shape == losses[1].shape == losses[2].shape == (3,)
    np.testing.assert_allclose(losses[2], losses[0], rtol=1e-5)


def test_pmap_epoch_averages_batchnorm_statistics_as_its_step_loop_does():
    """The replicas' BatchNorm statistics are averaged over the global batch inside the
    compiled epoch too (the step's axis name reaches it): same state as pmap's step loop."""
    order = epochs.device_epoch_order(jax.random.key(5), 64, 16)
    placement = parallel.place("pmap", jax.devices()[:4])
    rng = np.random.default_rng(1)
    dataset = {
        "image": rng.integers(0, 256, (64, 16, 16, 3), dtype=np.uint8),
        "label": rng.integers(0, 10, 64).astype(np.int32),
    }
    module = models.get("resnet_tiny", stage_sizes=(1,), num_filters=4)
    fresh = train.create_train_state(module, train.make_optimizer(), (16, 16, 3))
    by_epoch, _ = placement.train_epoch(
        placement.put_state(fresh), placement.put_dataset(dataset), order
    )
    by_step = placement.put_state(fresh)
    for index in np.asarray(order):
        batch = placement.put_batch({k: v[index] for k, v in dataset.items()})
        by_step, _ = placement.train_step(by_step, batch)
    epoch_state, step_state = placement.get_state(by_epoch), placement.get_state(by_step)
    assert jax.tree.leaves(epoch_state.batch_stats)
    _close(epoch_state.batch_stats, step_state.batch_stats)
    _close(epoch_state.params, step_state.params)


def test_fit_on_device_takes_the_step_loop_s_steps_and_reports_compile_apart():
    images, labels = _dataset()["image"], _dataset()["label"]
    options = FitOptions(epochs=2, batch_size=32, loop="device")
    _, history = fit(_state("mlp", width=8), (images, labels), (images[:50], labels[:50]), options)
    assert [e["steps"] for e in history] == [6, 6] == [data.steps_per_epoch(200, 32)] * 2
    assert history[0]["compile_time_s"] > 0 and "compile_time_s" not in history[1]
    assert all(0 <= e["test_accuracy"] <= 1 for e in history)
    capped_options = FitOptions(epochs=2, batch_size=32, loop="device", max_steps=8)
    _, capped = fit(_state("mlp", width=8), (images, labels), options=capped_options)
    assert [e["steps"] for e in capped] == [6, 2]


@pytest.mark.parametrize("strategy,count", [("single", 1), ("sharded", 8), ("pmap", 4)])
def test_a_placed_dataset_is_used_where_it_is_and_trains_as_host_arrays(strategy, count):
    placement = parallel.place(strategy, jax.devices()[:count])
    placed = placement.put_dataset(_dataset())
    again = placement.put_dataset(placed)  # what fit does with it: no second transfer

    def buffers(x):
        return [shard.data.unsafe_buffer_pointer() for shard in x.addressable_shards]

    assert all(buffers(again[k]) == buffers(placed[k]) for k in placed)
    host = _dataset()["image"], _dataset()["label"]
    options = FitOptions(epochs=1, batch_size=32, loop="device", placement=placement)
    from_host, _ = fit(_state("mlp", width=8), host, options=options)
    from_device, _ = fit(_state("mlp", width=8), (placed["image"], placed["label"]), None, options)
    _close(placement.get_state(from_host).params, placement.get_state(from_device).params, 0)


def test_a_nan_stops_the_device_loop_naming_the_step():
    images = np.full((64, 28, 28, 1), np.nan, np.float32)
    with pytest.raises(NonFiniteLoss, match="at step 1 \\(epoch 1\\)"):
        options = FitOptions(batch_size=32, loop="device")
        fit(_state("mlp", width=8), (images, np.zeros(64, np.int32)), options=options)


def test_device_loop_resumes_from_its_epoch_checkpoint_bit_for_bit(tmp_path):
    images, labels = _dataset()["image"], _dataset()["label"]
    options = FitOptions(epochs=3, batch_size=32, seed=7, loop="device")
    whole, _ = fit(_state("mlp", width=8), (images, labels), options=options)
    with Checkpoints(tmp_path) as saved:  # "killed" after two epochs
        killed = dataclasses.replace(options, epochs=2, checkpoints=saved)
        fit(_state("mlp", width=8), (images, labels), options=killed)
    with Checkpoints(tmp_path) as saved:
        resumed, history = fit(
            _state("mlp", width=8),
            (images, labels),
            options=dataclasses.replace(options, checkpoints=saved),
        )
        assert saved.restored_step == 12
    assert [e["epoch"] for e in history] == [1, 2, 3]
    assert params_digest(resumed.params) == params_digest(whole.params)
