"""The library's `fit` given what it cannot train on: one UsageError line naming the
fix, raised before any step runs."""

import dataclasses
import functools
import re

import flax.linen as nn
import jax
import numpy as np
import pytest

from jaxcnn import data, models, parallel, train
from jaxcnn.errors import UsageError
from jaxcnn.loop import FitOptions, fit


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
    elif name == "labels as a list":
        train_data = (images, labels.tolist())
    elif name == "images as a list":
        train_data = (images.tolist(), labels)
    elif name == "float64 images in 0..255":
        train_data = (images.astype(np.float64), labels)
    elif name == "float32 test images in 0..255 on the device":
        test = (jax.device_put(test[0].astype(np.float32)), test[1])
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
        ("labels as a list", "train_data labels are a list, not an array: give np.asarray("),
        ("images as a list", "train_data images are a list, not an array: give np.asarray("),
        (
            "float64 images in 0..255",
            "train_data images are float64 pixels in 0..255, not scaled to [0, 1]: give them "
            "as uint8 (images.astype(np.uint8)), which jaxcnn scales itself, or scale them "
            "(images / 255)",
        ),
        (
            "float32 test images in 0..255 on the device",
            "test_data images are float32 pixels in 0..255, not scaled to [0, 1]",
        ),
        ("epochs=-1", "epochs must be a whole number of at least 0, got -1"),
    ],
)
def test_fit_refuses_what_it_cannot_train_on_before_any_step(name, message):
    train_data, test_data, keywords = _case(name)
    placement = parallel.place("single", jax.devices()[:1])
    placement = dataclasses.replace(placement, train_step=_no_step)
    with pytest.raises(UsageError) as refused:
        fit(_host_state(), train_data, test_data, FitOptions(placement=placement, **keywords))
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_fit_trains_on_what_it_is_given_when_it_is_right():
    """The positive control: the same real data, unchanged, trains."""
    train_data, test_data, _ = _case("batch_size=0")
    options = FitOptions(batch_size=128, max_steps=2)
    state, history = fit(_host_state(), train_data, test_data, options)
    assert int(state.step) == 2 and 0 <= history[0]["test_accuracy"] <= 1


@pytest.mark.parametrize("scaled", ["/ 255", "standardized"])
def test_fit_takes_float_images_scaled_any_way(scaled):
    """The positive control of the unscaled-pixel refusal: float images scaled to [0, 1],
    or standardized (above 1 in places, but not whole numbers), train."""
    (images, labels), _ = _digits()
    pixels = images.astype(np.float32)
    floats = pixels / 255 if scaled == "/ 255" else (pixels - pixels.mean()) / pixels.std()
    assert floats.max() > (0 if scaled == "/ 255" else 1)
    state, _ = fit(_host_state(), (floats, labels), options=FitOptions(max_steps=1))
    assert int(state.step) == 1


class _WithoutAxisName(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        return nn.Dense(10)(x.reshape(x.shape[0], -1))


class _WithoutEither(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(x.reshape(x.shape[0], -1))


class _WithKeywords(nn.Module):
    @nn.compact
    def __call__(self, x, **keywords):
        return nn.Dense(10)(x.reshape(x.shape[0], -1))


@pytest.mark.parametrize(
    "module,missing",
    [
        (_WithoutAxisName, "axis_name"),
        (_WithoutEither, "train or axis_name"),
        (_WithKeywords, None),
    ],
)
def test_a_module_that_the_steps_cannot_call_is_refused_by_name(module, missing):
    tx = train.make_optimizer("adam", 1e-3)
    if missing is None:  # the positive control: **keywords takes train and axis_name
        state = train.create_train_state(module(), tx, (28, 28, 1))
        (images, labels), _ = _digits()
        assert int(fit(state, (images, labels), options=FitOptions(max_steps=1))[0].step) == 1
        return
    with pytest.raises(UsageError) as refused:
        train.create_train_state(module(), tx, (28, 28, 1))
    assert str(refused.value).startswith(
        f"{module.__name__}.__call__ takes no {missing}: jaxcnn's steps call "
        "model(x, train=..., axis_name=...); add `train: bool = False, axis_name: "
    )


def test_a_state_made_by_hand_around_such_a_module_is_refused_by_fit_before_any_step():
    good = _host_state()
    state = good.replace(apply_fn=_WithoutAxisName().apply)
    placement = dataclasses.replace(
        parallel.place("single", jax.devices()[:1]), train_step=_no_step
    )
    with pytest.raises(UsageError, match="^_WithoutAxisName.__call__ takes no axis_name"):
        fit(state, _digits()[0], options=FitOptions(placement=placement))


@pytest.mark.parametrize(
    "args,message",
    [
        ("labels as a list", "data.batches labels are a list, not an array: give np.asarray("),
        ("batch_size 0", "batch_size must be a whole number of at least 1, got 0"),
        ("batch_size 2.0", "batch_size must be a whole number of at least 1, got 2.0"),
        ("fewer labels", "data.batches has 1438 images but 1437 labels: give one label per"),
    ],
)
def test_data_batches_refuses_what_it_cannot_batch(args, message):
    (images, labels), _ = _digits()
    given = {
        "labels as a list": (images, labels.tolist(), 16),
        "batch_size 0": (images, labels, 0),
        "batch_size 2.0": (images, labels, 2.0),
        "fewer labels": (images, labels[:-1], 16),
    }[args]
    with pytest.raises(UsageError, match=re.escape(message)):
        next(data.batches(*given))
    assert next(data.batches(images, labels, 16))["image"].shape[0] == 16  # control
