import itertools
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcnn
from jaxcnn import data, models, train

# One model per family, shrunk by its own overrides so a real step takes milliseconds.
FAMILIES = [
    ("lenet5", {}),
    ("lenet5_keras", {}),
    ("mnist_cnn", {}),
    ("mlp", {"width": 32}),
    (
        "catsdogs_cnn",
        {"widths": ((4,), (4,), (4,), (4,), (4,)), "dense_width": 8, "input_size": 96},
    ),
    ("vgg_tiny", {}),
    ("resnet_tiny", {}),
]


def _state_and_batch(name, overrides, batch_size=4, seed=0):
    shape = models.input_shape(name, **overrides)
    module_overrides = {k: v for k, v in overrides.items() if k != "input_size"}
    module = models.get(name, **module_overrides)
    state = train.create_train_state(module, train.make_optimizer("adam", 1e-2), shape, seed)
    classes = models.spec(name).num_outputs
    images, labels = data.synthetic(batch_size, shape, max(classes, 2), seed=seed)
    return state, {"image": jnp.asarray(images), "label": jnp.asarray(labels)}


# The families whose steps take longest to compile here (BatchNorm, many layers): slow.
HEAVY = ("catsdogs_cnn", "vgg_tiny", "resnet_tiny")


@pytest.mark.parametrize(
    "name,overrides",
    [
        pytest.param(*f, id=f[0], marks=[pytest.mark.slow] if f[0] in HEAVY else [])
        for f in FAMILIES
    ],
)
def test_two_real_steps_change_every_param_and_keep_loss_finite(name, overrides):
    # Two steps: ResNet zero-initialises each block's last BatchNorm scale, so on the
    # first step no gradient reaches the layers before it (as in the Flax example).
    state, batch = _state_and_batch(name, overrides)
    step = jax.jit(train.train_step)
    new_state, metrics = step(*step(state, batch)[:1], batch)
    assert np.isfinite(float(metrics["loss"])) and float(metrics["count"]) == 4
    assert 0.0 <= float(metrics["accuracy"]) <= 1.0
    assert int(new_state.step) == 2
    changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state.params, new_state.params)
    unchanged = [
        jax.tree_util.keystr(p) for p, c in jax.tree_util.tree_leaves_with_path(changed) if not c
    ]
    assert not unchanged, f"params not updated: {unchanged}"


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,overrides", [f for f in FAMILIES if f[0] in ("catsdogs_cnn", "resnet_tiny")]
)
def test_batchnorm_stats_update_in_train_and_not_in_eval(name, overrides):
    state, batch = _state_and_batch(name, overrides)
    assert jax.tree_util.tree_leaves(state.batch_stats)
    trained, _ = jax.jit(train.train_step)(state, batch)
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state.batch_stats, trained.batch_stats)
    assert all(jax.tree_util.tree_leaves(moved))
    evaluate = jax.jit(train.eval_step)  # returns metrics only: no state to update
    first, second = evaluate(trained, batch), evaluate(trained, batch)
    assert float(first["loss"]) == float(second["loss"])  # deterministic: running stats


def test_dropout_is_active_in_train_and_off_in_eval():
    module = models.get("mlp", width=64, dropout=0.5)
    state = train.create_train_state(module, train.make_optimizer(), (28, 28, 1))
    x = jnp.ones((2, 28, 28, 1))
    variables = {"params": state.params}
    eval_a = module.apply(variables, x, train=False)
    eval_b = module.apply(variables, x, train=False)
    train_a = module.apply(variables, x, train=True, rngs={"dropout": jax.random.key(1)})
    train_b = module.apply(variables, x, train=True, rngs={"dropout": jax.random.key(2)})
    np.testing.assert_array_equal(eval_a, eval_b)
    assert not np.allclose(train_a, train_b)


def test_dropout_masks_differ_from_step_to_step():
    state, batch = _state_and_batch("mlp", {"width": 32})
    step = jax.jit(train.train_step)
    _, m1 = step(state, batch)
    again, _ = step(state, batch)
    _, m2 = step(again.replace(params=state.params, opt_state=state.opt_state), batch)
    assert float(m1["loss"]) != float(m2["loss"])  # same params, step 0 vs 1: new masks


def test_masked_examples_do_not_count():
    state, batch = _state_and_batch("mnist_cnn", {}, batch_size=4)
    evaluate = jax.jit(train.eval_step)
    full = evaluate(state, {k: v[:2] for k, v in batch.items()})
    masked = evaluate(state, {**batch, "mask": jnp.array([1.0, 1.0, 0.0, 0.0])})
    assert float(masked["count"]) == 2
    np.testing.assert_allclose(float(masked["loss"]), float(full["loss"]), rtol=1e-6)


def test_binary_model_uses_sigmoid_cross_entropy():
    logits = jnp.array([[0.0], [2.0]])
    losses, correct = train._per_example(logits, jnp.array([1, 0]))
    np.testing.assert_allclose(losses, [np.log(2.0), np.log1p(np.exp(2.0))], rtol=1e-6)
    assert correct.tolist() == [False, False]


def test_train_step_compiles_once_across_steps():
    traces = []

    def counted(state, batch):
        traces.append(1)
        return train.train_step(state, batch)

    state, batch = _state_and_batch("mlp", {"width": 8})  # any model: the smallest
    step = jax.jit(counted, donate_argnums=0)
    for _ in range(4):
        state, _ = step(state, batch)
    assert len(traces) == 1


def test_unknown_optimizer():
    with pytest.raises(jaxcnn.UsageError, match="unknown optimizer 'rmsprop'"):
        train.make_optimizer("rmsprop")


def test_onecycle_rises_over_the_first_quarter_then_falls_to_zero_at_the_last_step():
    schedule = train.learning_rate_schedule(1e-2, "onecycle", total_steps=100)
    rates = [float(schedule(step)) for step in range(101)]
    assert rates[0] == pytest.approx(1e-3)
    assert max(rates) == pytest.approx(1e-2) and rates.index(max(rates)) == 25
    assert all(a < b for a, b in itertools.pairwise(rates[:26]))
    assert all(a > b for a, b in itertools.pairwise(rates[25:]))
    assert rates[99] == pytest.approx(1e-2 / 75) and rates[100] == 0.0
    assert train.learning_rate_schedule(1e-2, "constant", 100) == 1e-2


def test_a_one_step_onecycle_run_still_has_a_schedule():
    schedule = train.learning_rate_schedule(1e-2, "onecycle", total_steps=1)
    assert [float(schedule(s)) for s in (0, 1)] == pytest.approx([1e-3, 1e-2])


@pytest.mark.parametrize(
    "schedule,total,message",
    [
        ("cosine", 10, "unknown schedule 'cosine': choose one of constant, onecycle"),
        ("onecycle", None, "onecycle needs the run's total steps >= 1, got None"),
        ("onecycle", 0, "onecycle needs the run's total steps >= 1, got 0"),
    ],
)
def test_a_bad_schedule_is_a_usage_error(schedule, total, message):
    with pytest.raises(jaxcnn.UsageError, match=re.escape(message)):
        train.make_optimizer("adam", 1e-3, schedule=schedule, total_steps=total)


def test_the_optimizer_follows_its_schedule():
    """The first SGD update (no momentum yet) is the gradient times the schedule's rate
    at step 0, a tenth of the peak."""
    tx = train.make_optimizer("sgd", 1.0, schedule="onecycle", total_steps=4)
    params = {"w": jnp.zeros(())}
    state = tx.init(params)
    updates, state = tx.update({"w": jnp.ones(())}, state, params)
    assert float(updates["w"]) == pytest.approx(-0.1)


@pytest.mark.slow
def test_fit_on_digits_reaches_90_percent():
    module = models.get("mnist_cnn")
    state = train.create_train_state(module, train.make_optimizer("adam", 1e-3), (28, 28, 1))
    state, history = jaxcnn.fit(
        state,
        data.load("digits", "train"),
        data.load("digits", "test"),
        jaxcnn.FitOptions(epochs=3, batch_size=32, seed=0),
    )
    assert [e["epoch"] for e in history] == [1, 2, 3]
    assert history[-1]["steps"] == 1438 // 32
    assert history[-1]["test_accuracy"] >= 0.90
    assert history[-1]["train_loss"] < history[0]["train_loss"]


def readme_python(heading: str) -> str:
    """The first ```python block after `heading` in the README."""
    text = (Path(__file__).parent.parent / "README.md").read_text()
    block = re.search(r"```python\n(.*?)```", text[text.index(heading) :], re.S)
    assert block, f"no python block after {heading!r}"
    return block.group(1)


@pytest.mark.slow
def test_the_readmes_library_snippet_runs_as_written_step_by_step_too():
    namespace: dict = {}
    exec(readme_python("## As a library"), namespace)
    state, metrics = namespace["state"], namespace["metrics"]  # the step-by-step loop ran
    steps_per_epoch = data.steps_per_epoch(len(data.load("digits", "train")[1]), 32)
    assert int(state.step) == 4 * steps_per_epoch  # 3 epochs of fit, then one by steps
    assert np.isfinite(float(metrics["loss"]))
