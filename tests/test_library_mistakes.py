"""The library's own calls given what they cannot take: one UsageError line naming the
fix, raised before the step runs (`fit`'s inputs are in test_fit_input.py)."""

import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxcnn import data, models, parallel, train
from jaxcnn.errors import UsageError
from jaxcnn.loop import FitOptions, evaluate, fit

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


# --- Each public function given a wrong type or value: one UsageError naming the fix ----


def _refused(call, said: str) -> None:
    """`call()` raises one UsageError line that holds `said`."""
    with pytest.raises(UsageError) as refused:
        call()
    assert said in str(refused.value), str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    "keywords,said",
    [
        ({"seed": 2**70}, "seed must be a whole number in 0..2**63-1, got 1180591620717411303424"),
        ({"seed": 1.5}, "seed must be a whole number in 0..2**63-1, got 1.5"),
        ({"seed": -1}, "seed must be a whole number in 0..2**63-1, got -1"),
        ({"seed": True}, "seed must be a whole number in 0..2**63-1, got True"),
        ({"tx": None}, "tx is None, not an optax GradientTransformation: give one from"),
        ({"model": "mlp"}, "the model is a str, not a flax.linen.Module: give a module"),
        ({"input_shape": 784}, "input_shape must be one example's shape in positive whole"),
        ({}, None),  # the positive control
    ],
)
def test_create_train_state_refuses_what_it_cannot_take(keywords, said):
    given = {
        "model": models.get("mlp", width=8),
        "tx": train.make_optimizer(),
        "input_shape": (28, 28, 1),
        **keywords,
    }
    if said is not None:
        _refused(lambda: train.create_train_state(**given), said)
        return
    for seed in (0, 2**63 - 1, np.int64(7), jnp.int32(7)):  # the ends, and arrays' integers
        assert int(train.create_train_state(**given, seed=seed).step) == 0
    # Seeds traced under vmap (K models at once, as the ensemble study makes them).
    stacked = jax.vmap(lambda seed: train.create_train_state(**given, seed=seed))(jnp.arange(2))
    assert stacked.step.shape == (2,)


@pytest.mark.parametrize(
    "args,keywords,said",
    [
        ((3,), {}, "optimizer must be a name (a str), got 3: choose one of adam, sgd"),
        (("rmsprop",), {}, "unknown optimizer 'rmsprop': choose one of adam, sgd"),
        (
            ("adam", float("nan")),
            {},
            "learning_rate must be a finite number above 0, e.g. 1e-3, got nan",
        ),
        (("adam", -1), {}, "learning_rate must be a finite number above 0, e.g. 1e-3, got -1"),
        (("sgd", 0), {}, "learning_rate must be a finite number above 0, e.g. 1e-3, got 0"),
        (("adam", float("inf")), {}, "must be a finite number above 0, e.g. 1e-3, got inf"),
        (("adam", "1e-3"), {}, "must be a finite number above 0, e.g. 1e-3, got '1e-3'"),
        (("adam", jnp.float32(-1)), {}, "must be a finite number above 0, e.g. 1e-3, got -1.0"),
        (("adam",), {"schedule": 1}, "schedule must be a name (a str), got 1: choose one of"),
        (("adam",), {"schedule": "onecycle", "total_steps": 2.5}, "total steps >= 1, got 2.5"),
        (("sgd", 0.1), {"schedule": "onecycle", "total_steps": 10}, None),  # the control
    ],
)
def test_make_optimizer_refuses_what_it_cannot_take(args, keywords, said):
    if said is not None:
        _refused(lambda: train.make_optimizer(*args, **keywords), said)
        return
    tx = train.make_optimizer(*args, **keywords)
    params = {"w": jnp.zeros(())}
    updates, _ = tx.update({"w": jnp.ones(())}, tx.init(params), params)
    assert float(updates["w"]) == pytest.approx(-0.01)  # the first step: a tenth of the peak
    # A rate as an array, traced too: optax.inject_hyperparams under vmap, as the
    # ensemble study gives K models their own rates.
    inject = optax.inject_hyperparams(functools.partial(train.make_optimizer, "adam"))
    states = jax.vmap(lambda rate: inject(learning_rate=rate).init(params))(jnp.ones(2))
    assert states.hyperparams["learning_rate"].shape == (2,)


def _digits():
    return data.load("digits", "train")


@pytest.mark.parametrize(
    "case,said",
    [
        ("state None", "the state is None, not a jaxcnn TrainState: make one with "),
        ("state a module", "the state is a MnistCNN, not a jaxcnn TrainState"),
        ("train_data None", "train_data is None, not an (images, labels) pair: give one as"),
        ("train_data a tuple of 1", "train_data is a tuple of 1, not an (images, labels) pair"),
        ("test_data a dict", "test_data is a dict, not an (images, labels) pair"),
        ("options a dict", "options is a dict, not a jaxcnn FitOptions: give jaxcnn.FitOptions("),
        ("good", None),  # the positive control
    ],
)
def test_fit_refuses_a_state_data_or_options_it_cannot_take(case, said):
    state, train_data, test_data, options = _state(), _digits(), None, FitOptions(max_steps=1)
    if case == "state None":
        state = None
    elif case == "state a module":
        state = models.get("mnist_cnn")
    elif case == "train_data None":
        train_data = None
    elif case == "train_data a tuple of 1":
        train_data = train_data[:1]
    elif case == "test_data a dict":
        test_data = {"image": train_data[0], "label": train_data[1]}
    elif case == "options a dict":
        options = {"max_steps": 1}
    if said is not None:
        _refused(lambda: fit(state, train_data, test_data, options), said)
        return
    assert int(fit(state, train_data, test_data, options)[0].step) == 1


@pytest.mark.parametrize(
    "case,said",
    [
        ("state None", "the state is None, not a jaxcnn TrainState: make one with"),
        ("dataset None", "dataset is None, not an (images, labels) pair: give one as"),
        ("batch_size 0", "batch_size must be a whole number of at least 1, got 0"),
        ("placement a str", "placement is a str, not a jaxcnn Placement: give jaxcnn.place("),
        ("labels as a list", "dataset labels are a list, not an array: give np.asarray("),
        ("good", None),  # the positive control: fit's defaults, no placement given
    ],
)
def test_evaluate_refuses_what_it_cannot_take(case, said):
    state, (images, labels) = _state(), data.load("digits", "test")
    args = [state, (images, labels)]
    if case == "state None":
        args[0] = None
    elif case == "dataset None":
        args[1] = None
    elif case == "batch_size 0":
        args.append(0)
    elif case == "placement a str":
        args += [16, "single"]
    elif case == "labels as a list":
        args[1] = (images, labels.tolist())
    if said is not None:
        _refused(lambda: evaluate(*args), said)
        return
    tested = evaluate(*args)
    assert tested["count"] == len(labels) and 0 <= tested["accuracy"] <= 1


@pytest.mark.parametrize(
    "field,value,said",
    [
        ("epochs", -1, "epochs must be a whole number of at least 0, got -1"),
        ("epochs", 1.0, "epochs must be a whole number of at least 0, got 1.0"),
        ("batch_size", 0, "batch_size must be a whole number of at least 1, got 0"),
        ("batch_size", "32", "batch_size must be a whole number of at least 1, got '32'"),
        ("seed", 2**64, "seed must be a whole number in 0..2**63-1, got 18446744073709551616"),
        ("max_steps", -2, "max_steps must be a whole number of at least 0, got -2"),
        ("loop", "async", "unknown loop 'async': choose one of step, device"),
        ("loop", None, "loop must be a name (a str), got None: choose one of step, device"),
        ("placement", "single", "placement is a str, not a jaxcnn Placement: give jaxcnn.place("),
        ("checkpoints", "ckpt/", "checkpoints is a str, not a Checkpoints: give jaxcnn.checkp"),
        ("checkpoint_every", 0, "checkpoint_every must be a whole number of at least 1, got 0"),
        ("check_every", 0, "check_every must be a whole number of at least 1, got 0"),
        ("progress", "yes", "progress is a str, not a bool: give True or False"),
    ],
)
def test_fit_options_refuse_a_field_out_of_range_when_made(field, value, said):
    _refused(lambda: FitOptions(**{field: value}), said)


def test_fit_options_take_every_field_in_range():
    """The positive control of the test above: each field at a good value, and the
    defaults, make options."""
    placement = parallel.place("single", jax.devices()[:1])
    made = FitOptions(2, 64, 2**63 - 1, 0, "device", placement, None, 1, 1, True)
    assert (made.epochs, made.loop, made.placement) == (2, "device", placement)
    assert FitOptions() == FitOptions(epochs=1, batch_size=128, loop="step")
