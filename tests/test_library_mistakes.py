"""The library's own calls given what they cannot take: one UsageError line naming the
fix, raised before the step runs (`fit`'s inputs are in test_fit_input.py)."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcnn import data, models, parallel, train
from jaxcnn.errors import UsageError

TUPLE = (
    "train_step takes a batch dict {'image': (B, H, W, C), 'label': (B,)}, got tuple: make "
    "batches from data.load's (images, labels) with "
    "jaxcnn.data.batches(images, labels, batch_size)"
)
DONATED = (
    "this state was given to an earlier train step, which reused its memory (the step "
    "donates its state): use the state each step returns, "
    "state, metrics = placement.train_step(state, batch)"
)


@functools.cache
def _host_state():
    """mnist_cnn's state on the host: each test places its own copy (steps donate it)."""
    model = models.get("mnist_cnn")
    return jax.device_get(train.create_train_state(model, train.make_optimizer(), (28, 28, 1)))


def _state():
    return jax.tree.map(np.copy, _host_state())


def _batch(size=16, image=(28, 28, 1)):
    return {"image": np.zeros((size, *image), np.uint8), "label": np.zeros(size, np.int32)}


def _exact(message: str) -> str:
    """A `match` for `message` alone: pytest matches notes too, and JAX adds one (that it
    hid its frames) to what is raised while it traces."""
    return "^" + re.escape(message) + "($|\n-{20}\nFor simplicity, JAX)"


def test_create_train_state_without_the_channel_axis_names_the_shape_to_give():
    with pytest.raises(UsageError) as caught:
        train.create_train_state(models.get("mnist_cnn"), train.make_optimizer(), (28, 28))
    # What lax said is kept in the middle; the words around it are jaxcnn's.
    assert re.fullmatch(
        re.escape("the model does not take inputs of shape (28, 28) (")
        + r"TypeError: [^\n]+"
        + re.escape(
            "): input_shape is one example's shape without the batch axis, images as "
            "(height, width, channels) (e.g. (28, 28, 1) for one channel)"
        ),
        str(caught.value),
    )


def test_create_train_state_with_a_number_for_a_shape():
    with pytest.raises(
        UsageError,
        match=_exact(
            "input_shape must be one example's shape in positive whole numbers, without the "
            "batch axis, e.g. (28, 28, 1), got 784"
        ),
    ):
        train.create_train_state(models.get("mlp", width=8), train.make_optimizer(), 784)


@pytest.mark.parametrize("strategy", ["single", "sharded", "unplaced"])
def test_train_step_on_images_of_another_shape_says_what_fit_says(strategy):
    expected = _exact(
        "the model does not take batch images of shape 20x20x1 (ScopeParamShapeError: For "
        'parameter "kernel" in "/Dense_0", the given initializer is expected to generate '
        "shape (576, 128), but the existing parameter it received has shape (1600, 128).): "
        "give images of the shape its state was created for (create_train_state's "
        "input_shape)"
    )
    with pytest.raises(UsageError, match=expected):
        if strategy == "unplaced":
            jax.jit(train.train_step)(_state(), _batch(image=(20, 20, 1)))
        else:
            placement = parallel.place(strategy, jax.devices()[:2])
            placement.train_step(placement.put_state(_state()), _batch(image=(20, 20, 1)))


@pytest.mark.parametrize("strategy", ["single", "pmap", "sharded"])
def test_data_load_tuple_given_to_the_step(strategy):
    images, labels = data.load("digits", "train")
    placement = parallel.place(strategy, jax.devices()[:2])
    pair = (images[:16], labels[:16])
    if strategy == "pmap":  # put_batch splits any tree: the step is what refuses it
        pair = placement.put_batch(pair)
    with pytest.raises(UsageError, match=_exact(TUPLE)):
        placement.train_step(placement.put_state(_state()), pair)


def test_pmap_step_given_a_state_without_put_state():
    placement = parallel.place("pmap", jax.devices()[:2])
    with pytest.raises(
        UsageError,
        match=_exact(
            "under pmap the step takes one copy of the state per device (2): place it first, "
            "state = placement.put_state(state)"
        ),
    ):
        placement.train_step(_state(), placement.put_batch(_batch()))


def test_pmap_step_given_a_batch_without_put_batch():
    placement = parallel.place("pmap", jax.devices()[:2])
    with pytest.raises(
        UsageError,
        match=_exact(
            "under pmap a batch is split over the 2 devices: give the step "
            "placement.put_batch(batch), not the host batch"
        ),
    ):
        placement.train_step(placement.put_state(_state()), _batch())


def test_pmap_step_given_a_host_batch_of_one_row_per_device():
    # Its leading axis is what pmap maps over, so pmap takes it: the traced step refuses.
    placement = parallel.place("pmap", jax.devices()[:2])
    with pytest.raises(
        UsageError,
        match=_exact(
            "train_step takes labels of shape (B,), got shape (): under pmap give the step "
            "placement.put_batch(batch), which splits it over the devices"
        ),
    ):
        placement.train_step(placement.put_state(_state()), _batch(size=2))


@pytest.mark.parametrize("strategy", ["single", "pmap", "sharded"])
def test_a_donated_state_given_again(strategy):
    placement = parallel.place(strategy, jax.devices()[:2])
    before = placement.put_state(_state())
    batch = placement.put_batch(_batch())
    after, _ = placement.train_step(before, batch)
    assert int(jnp.ravel(after.step)[0]) == 1  # positive control: the step ran on it
    assert before.step.is_deleted()
    with pytest.raises(UsageError, match=_exact(DONATED)):
        placement.train_step(before, batch)
    with pytest.raises(UsageError, match=_exact(DONATED)):
        placement.put_state(before)


def test_the_placed_step_says_it_donates_and_still_lowers():
    placement = parallel.place("single", jax.devices()[:1])
    assert "donates `state`" in placement.train_step.__doc__
    state = placement.put_state(_state())
    hlo = placement.train_step.lower(state, _batch()).as_text()
    assert "tf.aliasing_output" in hlo  # the donation itself, in the lowered program
