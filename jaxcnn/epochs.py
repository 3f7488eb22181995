"""Whole epochs on the device: the dataset resident in device memory, shuffled there,
and an epoch run as ONE compiled loop (`lax.scan`) of the one train step.

    order = device_epoch_order(key, num_examples, batch_size)  # (steps, batch) indices
    epoch = jax.jit(train_epoch, donate_argnums=0)
    state, metrics = epoch(state, dataset, order)  # metrics: a row per step

Per-step dispatch (`loop.fit`) pays a host round trip per step, which small models on
fast chips notice; the compiled epoch pays one per epoch. An epoch is a fresh random
order cut into full batches, the remainder dropped, as in the host loop
(`data.batches`): both loops take the same number of steps per epoch. The order is
its own small program, run on the device before the epoch: a sort of the whole index
range costs as much as several steps of a small model on a CPU, once per epoch, not
once per compiled loop of a timing block.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxcnn import train
from jaxcnn.data import steps_per_epoch

Dataset = dict[str, jax.Array]  # {"image": (N, H, W, C), "label": (N,)}


@functools.partial(jax.jit, static_argnames=("num_examples", "batch_size", "shuffle"))
def device_epoch_order(
    key: jax.Array, num_examples: int, batch_size: int, shuffle: bool = True
) -> jax.Array:
    """(steps, batch_size) example indices: a permutation (or, without `shuffle`, the
    stored order) cut into full batches, drawn on the device from `key`; not the order
    the host loop's `data.host_epoch_order` draws from a seed."""
    steps = steps_per_epoch(num_examples, batch_size)
    order = jax.random.permutation(key, num_examples) if shuffle else jnp.arange(num_examples)
    return order[: steps * batch_size].reshape(steps, batch_size)


def train_epoch(
    state: train.TrainState,
    dataset: Dataset,
    order: jax.Array,
    *,
    step: Callable[..., Any] = train.train_step,
    batch_sharding: Any = None,
) -> tuple[train.TrainState, dict[str, jax.Array]]:
    """`step` over the batches `order` (steps, batch) picks from `dataset`, as one
    `lax.scan`: (state, metrics stacked per step). `batch_sharding` (sharded jit) splits
    each gathered batch over the devices; the dataset itself stays replicated."""

    def body(state: train.TrainState, index: jax.Array):
        batch = {"image": dataset["image"][index], "label": dataset["label"][index]}
        if batch_sharding is not None:
            batch = lax.with_sharding_constraint(batch, batch_sharding)
        return step(state, batch)

    return lax.scan(body, state, order)
