"""The library's `fit` given what it cannot train on: one UsageError line naming the
fix, raised before any step runs."""

import dataclasses
import functools

import jax
import numpy as np
import pytest

from jaxcnn import data, models, parallel, train
from jaxcnn.errors import UsageError
from jaxcnn.loop import fit


@functools.cache
def _host_state():
    tx = train.make_optimizer("adam", 1e-3)
    model = models.get("mlp", width=8)
    return jax.device_get(train.create_train_state(model, tx, models.input_shape("mlp")))


@functools.cache
def _digits():
    return data.load("digits", "train"), data.load("digits", "test")


def _with_label(labels: np.ndarray, index: int, value: int) -> np.ndarray:
    labels = labels.copy()
    labels[index] = value
    return labels


class Stepless(Exception):
    """What a train step raises here: none may run before the input is checked."""


def _no_step(*_):
    raise Stepless("a train step ran")


def _case(name):
    """(train_data, test_data, fit's keywords) of case `name`, from real digits."""
    (images, labels), test = _digits()
    train_data, keywords = (images, labels), {}
    if name == "label -1":
        train_data = (images, _with_label(labels, 7, -1))
    elif name == "label 10":
        train_data = (images, _with_label(labels, 7, 10))
    elif name == "test label -1":
        test = (test[0], _with_label(test[1], 3, -1))
    elif name == "fewer labels":
        train_data = (images, labels[:-5])
    elif name == "float labels":
        train_data = (images, labels.astype(np.float32))
    elif name == "8x8 images":
        train_data = (images[:, 2:26:3, 2:26:3], labels)  # the digits' own 8x8 grid
    elif name == "empty test split":
        test = (test[0][:0], test[1][:0])
    else:
        keywords = {"batch_size=0": {"batch_size": 0}, "epochs=-1": {"epochs": -1}}[name]
    return train_data, test, keywords


@pytest.mark.parametrize(
    "name,message",
    [
        ("label -1", "train_data label -1 at index 7 is outside 0..9, the model's 10 classes: "),
        ("label 10", "train_data label 10 at index 7 is outside 0..9"),
        ("test label -1", "test_data label -1 at index 3 is outside 0..9"),
        ("fewer labels", "train_data has 1438 images but 1433 labels: give one label per image"),
        ("float labels", "train_data labels are float32, not class indices: give integer"),
        ("8x8 images", "the model does not take train_data images of shape 8x8x1 ("),
        ("empty test split", "test_data has no images: give at least one"),
        ("batch_size=0", "batch_size must be a whole number of at least 1, got 0"),
        ("epochs=-1", "epochs must be a whole number of at least 0, got -1"),
    ],
)
def test_fit_refuses_what_it_cannot_train_on_before_any_step(name, message):
    train_data, test_data, keywords = _case(name)
    placement = parallel.place("single", jax.devices()[:1])
    placement = dataclasses.replace(placement, train_step=_no_step)
    with pytest.raises(UsageError) as refused:
        fit(_host_state(), train_data, test_data, placement=placement, **keywords)
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_fit_trains_on_what_it_is_given_when_it_is_right():
    """The positive control: the same real data, unchanged, trains."""
    train_data, test_data, _ = _case("batch_size=0")
    state, history = fit(_host_state(), train_data, test_data, batch_size=128, max_steps=2)
    assert int(state.step) == 2 and 0 <= history[0]["test_accuracy"] <= 1
