"""The oneDNN convolution (jaxcnn.onednn) computes what XLA's own convolution computes:
outputs and both gradients equal within f32 rounding, for the padding, stride and
channel cases the models use, and tells how to install oneDNN when it is missing.

oneDNN is optional (`pip install -e ".[onednn]"`): without it, or without a C++
compiler to build the FFI library, only the tests of its absence run."""

import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import needs_extra
from jax import lax
from test_bad_input import TINY, _assert_one_line_exit_2
from test_formulation import conv_both

from jaxcnn import flops, formulation, models, onednn, train
from jaxcnn.errors import UsageError

NHWC = ("NHWC", "HWIO", "NHWC")


needs_onednn = needs_extra("onednn")


@pytest.fixture
def without_onednn(tmp_path, monkeypatch):
    """A venv without the package, no system copy, $DNNLROOT naming an empty folder."""
    empty = tmp_path / "no-onednn"
    empty.mkdir()
    monkeypatch.setenv("DNNLROOT", str(empty))
    monkeypatch.setattr(sys, "prefix", str(empty))
    monkeypatch.setattr(sys, "base_prefix", str(empty))
    monkeypatch.setattr(onednn, "_SYSTEM_PREFIXES", ())
    onednn._library.cache_clear()  # an earlier test may have built and loaded it
    yield
    onednn._library.cache_clear()  # the next caller loads the real library again


def test_available_says_whether_the_kernels_can_be_built(without_onednn):
    assert not onednn.available()


@needs_onednn
def test_available_where_they_can(monkeypatch):  # the positive control of the one above
    assert onednn.available()
    monkeypatch.setenv("CXX", "no-such-compiler")
    assert not onednn.available()


def test_missing_onednn_is_a_usage_error_naming_the_install(without_onednn):
    with pytest.raises(UsageError, match="pip install onednn-devel-cpu-gomp"):
        onednn.conv(jnp.ones((1, 8, 8, 1)), jnp.ones((3, 3, 1, 2)))


def test_the_onednn_formulation_without_onednn_is_one_line_exit_2_before_any_work(
    without_onednn, tmp_path, capsys
):
    out = tmp_path / "out"
    argv = ["--out", str(out), *TINY, "--model", "mnist_cnn", "--set", "formulation=onednn"]
    _assert_one_line_exit_2(argv, capsys, "pip install onednn-devel-cpu-gomp", out)


@pytest.fixture
def layout(request):
    """oneDNN's layout mode for the test (each mode builds its own primitives), then the
    default again."""
    onednn.set_layout(request.param)
    yield request.param
    onednn.set_layout("mixed")  # the default


@needs_onednn
@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "padding"),
    [
        ((1, 28, 28, 1), (5, 5, 1, 6), (1, 1), "SAME"),  # one input channel
        ((1, 28, 28, 1), (5, 5, 1, 6), (1, 1), "VALID"),
        ((2, 28, 28, 1), (3, 3, 1, 32), (1, 1), "VALID"),  # mnist_cnn's first layer
        ((2, 13, 13, 32), (3, 3, 32, 64), (1, 1), "VALID"),  # and its second
        ((3, 14, 14, 6), (3, 3, 6, 16), (2, 2), "SAME"),  # strided, padded
        ((3, 14, 14, 6), (3, 3, 6, 16), (2, 2), "VALID"),  # strided, last column unused
        ((2, 15, 15, 1), (3, 3, 1, 4), (2, 2), "SAME"),  # one channel, odd size, strided
        ((2, 17, 17, 3), (7, 7, 3, 8), (2, 2), "SAME"),  # ResNet stem: odd size, stride 2
        ((2, 9, 9, 8), (1, 1, 8, 16), (2, 2), "SAME"),  # a 1x1 projection shortcut
        ((2, 10, 10, 4), (3, 3, 4, 4), (1, 1), ((2, 0), (1, 1))),  # explicit, uneven pads
    ],
)
@pytest.mark.parametrize("layout", ["plain", "any", "mixed", "auto"], indirect=True)
def test_onednn_conv_equals_xla_conv_with_gradients(shape, kernel, strides, padding, layout):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    w = jnp.asarray(rng.standard_normal(kernel) * 0.1, jnp.float32)
    (out_a, grads_a), (out_b, grads_b) = conv_both(
        x, w, strides, padding, onednn.conv_general_dilated
    )
    assert out_a.shape == out_b.shape
    np.testing.assert_allclose(out_b, out_a, rtol=1e-4, atol=1e-5)
    for a, b in zip(grads_a, grads_b, strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)
    built = onednn.describe().splitlines()
    assert {line.split()[0] for line in built if f" {layout} impl=" in line} == {
        "fwd", "bwd_data", "bwd_weights"
    }  # fmt: skip


@needs_onednn
def test_onednn_conv_under_jit_and_with_the_library_s_own_signature():
    rng = np.random.default_rng(1)
    x = jnp.asarray(rng.standard_normal((4, 12, 12, 3)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((3, 3, 3, 5)), jnp.float32)
    got = jax.jit(lambda x, w: onednn.conv(x, w, (1, 1), "SAME"))(x, w)
    want = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@needs_onednn
def test_onednn_conv_under_vmap_equals_xla_s_with_gradients():
    # An ensemble vmaps the train step over its members' parameters.
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal((3, 2, 10, 10, 4)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((3, 3, 3, 4, 5)) * 0.1, jnp.float32)

    def loss(conv):
        return lambda x, w: jnp.sum(jnp.tanh(conv(x, w)))

    def xla(x, w):
        return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=NHWC)

    def ours(x, w):
        return onednn.conv(x, w, (1, 1), "SAME")

    want = jax.vmap(jax.value_and_grad(loss(xla), argnums=(0, 1)))(x, w)
    got = jax.vmap(jax.value_and_grad(loss(ours), argnums=(0, 1)))(x, w)
    for a, b in zip(jax.tree.leaves(want), jax.tree.leaves(got), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


@needs_onednn
def test_onednn_conv_hands_what_it_does_not_handle_to_xla():
    x = jnp.ones((1, 8, 8, 4))
    w = jnp.ones((3, 3, 2, 4))  # two feature groups
    dn = lax.conv_dimension_numbers(x.shape, w.shape, NHWC)
    got = onednn.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=2
    )
    want = lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=2
    )
    np.testing.assert_array_equal(got, want)


def test_an_unknown_onednn_layout_is_a_usage_error():
    with pytest.raises(UsageError, match="'blocked' is not a oneDNN layout: choose from plain"):
        onednn.set_layout("blocked")


@pytest.fixture
def bad_layout_env(monkeypatch):
    """$JAXCNN_ONEDNN_LAYOUT naming no layout, read afresh; the default loaded again after."""
    monkeypatch.setenv("JAXCNN_ONEDNN_LAYOUT", "blocked")
    onednn._library.cache_clear()
    yield
    monkeypatch.delenv("JAXCNN_ONEDNN_LAYOUT")
    onednn._library.cache_clear()


@needs_onednn
def test_an_unknown_layout_in_the_environment_is_a_usage_error(bad_layout_env):
    with pytest.raises(UsageError, match="JAXCNN_ONEDNN_LAYOUT='blocked'.*plain, any"):
        onednn.ensure()


@needs_onednn
def test_an_unknown_layout_in_the_environment_is_one_line_exit_2_before_any_work(
    bad_layout_env, tmp_path, capsys
):
    out = tmp_path / "out"
    argv = ["--out", str(out), *TINY, "--model", "mnist_cnn", "--set", "formulation=onednn"]
    _assert_one_line_exit_2(argv, capsys, "JAXCNN_ONEDNN_LAYOUT='blocked'", out)


def test_onednn_conv_rejects_what_it_cannot_compute():
    # Checked before anything is built: these need no oneDNN.
    with pytest.raises(UsageError, match="f32 only"):
        onednn.conv(jnp.ones((1, 8, 8, 1), jnp.bfloat16), jnp.ones((3, 3, 1, 2), jnp.bfloat16))
    with pytest.raises(UsageError, match="NHWC"):
        onednn.conv(jnp.ones((1, 8, 8, 3)), jnp.ones((3, 3, 1, 2)))


@needs_onednn
@pytest.mark.parametrize("name", ["mnist_cnn", "lenet5_keras"])
def test_a_model_with_onednn_convs_has_xla_s_loss_and_gradients(name):
    # The `onednn` formulation, as --set formulation=onednn resolves it.
    chosen = formulation.resolve("onednn")
    assert chosen.describe() == {"name": "onednn", "conv": "onednn", "pool": "slices"}
    shape = models.input_shape(name)
    plain = models.get(name, formulation="xla")
    fast = models.get(name, formulation=chosen)
    state = train.create_train_state(plain, train.make_optimizer(), shape)
    x = jnp.asarray(np.random.default_rng(2).random((4, *shape)), jnp.float32)
    labels = jnp.arange(4) % 2

    def loss(params, module):
        logits = module.apply({"params": params}, x, train=True)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(4), labels])

    value_a, grads_a = jax.value_and_grad(loss)(state.params, plain)
    value_b, grads_b = jax.jit(jax.value_and_grad(lambda p: loss(p, fast)))(state.params)
    np.testing.assert_allclose(value_b, value_a, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b), strict=True):
        scale = float(jnp.max(jnp.abs(a))) or 1.0
        np.testing.assert_allclose(b / scale, a / scale, atol=1e-4)


@needs_onednn
def test_the_flop_count_sees_the_onednn_kernels():
    # Each of the three kernels does the forward convolution's multiply-accumulates.
    x, w = jnp.ones((2, 13, 13, 32)), jnp.ones((3, 3, 32, 64))
    forward = 2 * (2 * 11 * 11 * 64) * (3 * 3 * 32)

    def loss(x, w):
        return jnp.sum(onednn.conv(x, w, (1, 1), "VALID"))

    assert flops.count(loss, x, w).total == forward
    assert flops.count(jax.grad(loss, argnums=(0, 1)), x, w).total == 3 * forward
    # a whole model's forward pass: the same count as with XLA's convolutions
    shape = models.input_shape("mnist_cnn")
    images = jnp.ones((4, *shape))
    counts = []
    for name in ("xla", "onednn"):
        model = models.get("mnist_cnn", formulation=name)
        params = model.init(jax.random.key(0), images)
        counts.append(flops.count(model.apply, params, images).total)
    assert counts[0] == counts[1] > 0
