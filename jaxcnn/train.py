"""The train state and the one train step every placement runs.

`train_step(state, batch, axis_name=None) -> (state, metrics)` is pure: no I/O, no
platform checks. `axis_name` is the only thing that changes between placements: None
on one device or under sharded jit (XLA inserts the collectives), the pmap axis name
under pmap, where gradients, BatchNorm statistics and metrics are averaged across
replicas explicitly. That averaging point is the whole of data parallelism.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from jaxcnn.choices import OPTIMIZERS, SCHEDULES
from jaxcnn.errors import (
    UsageError,
    check_choice,
    check_positive,
    check_seed,
    check_type,
    first_line,
)

Batch = dict[str, jax.Array]
Metrics = dict[str, jax.Array]


class TrainState(struct.PyTreeNode):
    """Everything a step reads and writes. `rng` is raw key data, so Orbax can save it."""

    step: jax.Array
    params: Any
    batch_stats: Any
    opt_state: Any
    rng: jax.Array
    apply_fn: Callable = struct.field(pytree_node=False)
    tx: optax.GradientTransformation = struct.field(pytree_node=False)


def learning_rate_schedule(
    learning_rate: float, schedule: str = "constant", total_steps: int | None = None
) -> float | optax.Schedule:
    """`constant`: `learning_rate` every step. `onecycle` (Smith's one-cycle, triangular):
    linear from learning_rate / 10 to learning_rate over the first quarter of
    `total_steps`, then linear to 0 at the last step; it needs the run's length."""
    check_positive("learning_rate", learning_rate, "1e-3")
    check_choice("schedule", schedule, SCHEDULES)
    if schedule == "constant":
        return learning_rate
    whole = isinstance(total_steps, numbers.Integral) and not isinstance(total_steps, bool)
    if not whole or total_steps < 1:
        raise UsageError(f"schedule onecycle needs the run's total steps >= 1, got {total_steps}")
    warmup = max(1, total_steps // 4)
    return optax.join_schedules(
        [
            optax.linear_schedule(learning_rate / 10, learning_rate, warmup),
            optax.linear_schedule(learning_rate, 0.0, max(1, total_steps - warmup)),
        ],
        [warmup],
    )


def make_optimizer(
    name: str = "adam",
    learning_rate: float = 1e-3,
    *,
    schedule: str = "constant",
    total_steps: int | None = None,
) -> optax.GradientTransformation:
    """`adam` (Keras defaults) or `sgd` (momentum 0.9), at `learning_rate` or on a
    `schedule` that peaks there (`learning_rate_schedule`). What it cannot take is a
    UsageError naming the fix."""
    check_choice("optimizer", name, OPTIMIZERS)
    rate = learning_rate_schedule(learning_rate, schedule, total_steps)
    return optax.adam(rate) if name == "adam" else optax.sgd(rate, momentum=0.9)


def input_shape_of(input_shape: Any) -> tuple[int, ...]:
    """`input_shape` as a tuple, or UsageError if it is not one example's shape."""
    dims = tuple(input_shape) if isinstance(input_shape, (tuple, list)) else None
    if not dims or not all(
        isinstance(d, numbers.Integral) and not isinstance(d, bool) and d > 0 for d in dims
    ):
        raise UsageError(
            f"input_shape must be one example's shape in positive whole numbers, without "
            f"the batch axis, e.g. (28, 28, 1), got {input_shape!r}"
        )
    return tuple(int(d) for d in dims)


# The keywords jaxcnn's steps call a model with: model(x, train=..., axis_name=...).
CALLED_WITH = ("train", "axis_name")


def check_module(model: Any) -> None:
    """UsageError unless `model` is a Flax module that jaxcnn's steps can call as
    `model(x, train=..., axis_name=...)`: a module whose __call__ lacks a keyword would
    fail only inside the first step, with a TypeError from deep in the trace."""
    if not isinstance(model, nn.Module):
        raise UsageError(
            f"the model is a {type(model).__name__}, not a flax.linen.Module: give a module, "
            "e.g. jaxcnn.models.get('mnist_cnn')"
        )
    parameters = inspect.signature(model.__call__).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    names = {p.name for p in parameters if p.kind is not inspect.Parameter.POSITIONAL_ONLY}
    missing = [name for name in CALLED_WITH if name not in names]
    if missing:
        raise UsageError(
            f"{type(model).__name__}.__call__ takes no {' or '.join(missing)}: jaxcnn's steps "
            "call model(x, train=..., axis_name=...); add `train: bool = False, axis_name: "
            "str | None = None` to its __call__ (axis_name is for BatchNorm across devices; "
            "a model without BatchNorm can ignore both)"
        )


def create_train_state(
    model: nn.Module,
    tx: optax.GradientTransformation,
    input_shape: tuple[int, ...],
    seed: int = 0,
) -> TrainState:
    """Initialise `model` on one example of `input_shape` (no batch axis; images are
    (height, width, channels)). A shape the model's layers cannot take is a UsageError,
    found by tracing its initialisation, before anything is computed; so is a model,
    optimizer or seed it cannot take."""
    check_module(model)
    fix = "give one from jaxcnn.make_optimizer('adam') or optax"
    check_type("tx", tx, optax.GradientTransformation, "an optax GradientTransformation", fix)
    shape = input_shape_of(input_shape)
    check_seed("seed", seed)
    init_key, dropout_key, step_key = jax.random.split(jax.random.key(seed), 3)
    init = jax.jit(
        lambda: model.init(
            {"params": init_key, "dropout": dropout_key}, jnp.zeros((1, *shape)), train=False
        )
    )
    try:
        init.trace()
    except Exception as error:  # flax and lax name the layer: kept, in one line
        hint = f" (e.g. {(*shape, 1)} for one channel)" if len(shape) == 2 else ""
        raise UsageError(
            f"the model does not take inputs of shape {shape} ({first_line(error)}): "
            f"input_shape is one example's shape without the batch axis, images as "
            f"(height, width, channels){hint}"
        ) from None
    variables = init()  # traced above: the shape is known to fit
    params = variables["params"]
    return TrainState(
        step=jnp.zeros((), jnp.int32),
        params=params,
        batch_stats=variables.get("batch_stats", {}),
        opt_state=tx.init(params),
        rng=jax.random.key_data(step_key),
        apply_fn=model.apply,
        tx=tx,
    )


def check_batch(batch: Any, step: str = "train_step", axis_name: str | None = None) -> None:
    """UsageError unless `batch` is the dict a step takes (a Python check: under jit it
    runs once, when the step is traced)."""
    if isinstance(batch, Mapping) and "image" in batch and "label" in batch:
        shape = np.shape(batch["label"])
        if len(shape) == 1:
            return
        fix = (
            "under pmap give the step placement.put_batch(batch), which splits it over the devices"
            if axis_name is not None
            else "one label per image"
        )
        raise UsageError(f"{step} takes labels of shape (B,), got shape {shape}: {fix}")
    got = f"a dict of {sorted(batch)}" if isinstance(batch, Mapping) else type(batch).__name__
    raise UsageError(
        f"{step} takes a batch dict {{'image': (B, H, W, C), 'label': (B,)}}, got {got}: "
        "make batches from data.load's (images, labels) with "
        "jaxcnn.data.batches(images, labels, batch_size)"
    )


def model_outputs(state: TrainState, name: str, images: Any) -> int:
    """The number of outputs (classes) of `state`'s model on one image of `images`, or
    UsageError if its layers do not take images of that shape (traced, not run)."""
    copies = 1 if jnp.ndim(state.step) == 1 else 0  # pmap's copies: a leading replica axis
    variables = {"params": state.params}
    if state.batch_stats:
        variables["batch_stats"] = state.batch_stats
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(np.shape(x)[copies:], x.dtype), variables
    )
    example = jax.ShapeDtypeStruct((1, *images.shape[1:]), images.dtype)
    try:
        logits = jax.eval_shape(lambda v, x: state.apply_fn(v, x, train=False), abstract, example)
    except Exception as error:  # flax and lax name the layer: kept, in one line
        shape = "x".join(map(str, images.shape[1:]))
        raise UsageError(
            f"the model does not take {name} images of shape {shape} ({first_line(error)}): "
            "give images of the shape its state was created for (create_train_state's "
            "input_shape)"
        ) from None
    return int(logits.shape[-1])


def _scaled(images: jax.Array) -> jax.Array:
    """uint8 pixels -> float32 in [0, 1]; float inputs pass through."""
    if jnp.issubdtype(images.dtype, jnp.integer):
        return images.astype(jnp.float32) / 255.0
    return images.astype(jnp.float32)


def _per_example(logits: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(loss, correct) per example: softmax CE for many logits, sigmoid BCE for one."""
    logits = logits.astype(jnp.float32)
    if logits.shape[-1] == 1:
        logit = logits[:, 0]
        target = (labels > 0).astype(jnp.float32)
        return optax.sigmoid_binary_cross_entropy(logit, target), (logit > 0) == (target > 0)
    losses = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    return losses, jnp.argmax(logits, -1) == labels


def _summed(losses, correct, mask, axis_name: str | None) -> Metrics:
    """Mask-weighted sums over the (global) batch, then means: exact for padded batches."""
    sums = {
        "loss": jnp.sum(losses * mask),
        "correct": jnp.sum(correct.astype(jnp.float32) * mask),
        "count": jnp.sum(mask),
    }
    if axis_name is not None:
        sums = jax.lax.psum(sums, axis_name)
    count = jnp.maximum(sums["count"], 1.0)
    return {
        "loss": sums["loss"] / count,
        "accuracy": sums["correct"] / count,
        "count": sums["count"],
    }


def _variables(state: TrainState, params: Any) -> dict[str, Any]:
    if state.batch_stats:
        return {"params": params, "batch_stats": state.batch_stats}
    return {"params": params}


def train_step(state: TrainState, batch: Batch, axis_name: str | None = None):
    """One optimizer step on `batch`: (new state, metrics). `batch` is a dict {"image":
    (B, H, W, C), "label": (B,)[, "mask": (B,)]}, what `jaxcnn.data.batches` yields from
    the (images, labels) pair `jaxcnn.data.load` returns; anything else, or images the
    model does not take, is a UsageError raised while the step is traced."""
    check_batch(batch, "train_step", axis_name)
    images, labels = _scaled(batch["image"]), batch["label"]
    mask = batch.get("mask", jnp.ones(labels.shape, jnp.float32))
    rng = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
    if axis_name is not None:  # each replica draws its own dropout masks
        rng = jax.random.fold_in(rng, jax.lax.axis_index(axis_name))

    def loss_fn(params):
        logits, updates = state.apply_fn(
            _variables(state, params),
            images,
            train=True,
            axis_name=axis_name,
            rngs={"dropout": rng},
            mutable=["batch_stats"],
        )
        losses, correct = _per_example(logits, labels)
        local_loss = jnp.sum(losses * mask) / jnp.maximum(jnp.sum(mask), 1.0)
        return local_loss, (losses, correct, updates)

    try:
        (_, (losses, correct, updates)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            state.params
        )
    except Exception:  # while tracing: say so if the images are what the model cannot take
        model_outputs(state, "batch", batch["image"])
        raise
    if axis_name is not None:
        grads = jax.lax.pmean(grads, axis_name)
    opt_updates, opt_state = state.tx.update(grads, state.opt_state, state.params)
    new_state = state.replace(
        step=state.step + 1,
        params=optax.apply_updates(state.params, opt_updates),
        batch_stats=updates.get("batch_stats", state.batch_stats),
        opt_state=opt_state,
    )
    return new_state, _summed(losses, correct, mask, axis_name)


def eval_step(state: TrainState, batch: Batch, axis_name: str | None = None) -> Metrics:
    """Loss and accuracy on `batch` in inference mode (running BatchNorm stats, no dropout)."""
    check_batch(batch, "eval_step", axis_name)
    try:
        logits = state.apply_fn(
            _variables(state, state.params),
            _scaled(batch["image"]),
            train=False,
            axis_name=axis_name,
        )
    except Exception:  # while tracing: say so if the images are what the model cannot take
        model_outputs(state, "batch", batch["image"])
        raise
    labels = batch["label"]
    mask = batch.get("mask", jnp.ones(labels.shape, jnp.float32))
    losses, correct = _per_example(logits, labels)
    return _summed(losses, correct, mask, axis_name)


def mean_metrics(metrics: Iterable[Metrics]) -> dict[str, float]:
    """Count-weighted means of per-batch metrics, fetched from the device once."""
    fetched = jax.device_get(list(metrics))
    total = sum(float(m["count"]) for m in fetched)
    if total == 0:
        return {"loss": float("nan"), "accuracy": float("nan"), "count": 0}
    return {
        "loss": sum(float(m["loss"]) * float(m["count"]) for m in fetched) / total,
        "accuracy": sum(float(m["accuracy"]) * float(m["count"]) for m in fetched) / total,
        "count": int(total),
    }
