"""The CPU formulation (patches + matmul convolutions, sliced pools) computes what XLA's
own convolutions and pools compute: outputs and gradients equal within f32 rounding,
for every layer shape the models use, and every model's train step; the platform picks
it in one place, and records name it."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from jaxcnn import formulation, models, train
from jaxcnn.errors import UsageError

XLA, CPU = formulation.FORMULATIONS["xla"], formulation.FORMULATIONS["cpu"]
NHWC = ("NHWC", "HWIO", "NHWC")


def conv_both(x, kernel, strides, padding, other=formulation.patches_conv):
    """(output, (dx, dkernel)) of XLA's convolution and of `other`, for one loss."""
    dn = lax.conv_dimension_numbers(x.shape, kernel.shape, NHWC)

    def run(conv):
        def loss(x, kernel):
            out = conv(x, kernel, strides, padding, dimension_numbers=dn)
            return jnp.sum(jnp.sin(out)), out

        (_, out), grads = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(x, kernel)
        return out, grads

    return run(lax.conv_general_dilated), run(other)


@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "padding"),
    [
        ((2, 28, 28, 1), (3, 3, 1, 32), (1, 1), "VALID"),  # mnist_cnn C1: one input channel
        ((2, 13, 13, 32), (3, 3, 32, 64), (1, 1), "VALID"),
        ((2, 12, 12, 8), (3, 3, 8, 16), (1, 1), "SAME"),  # VGG / cats-vs-dogs
        ((2, 32, 32, 1), (5, 5, 1, 6), (1, 1), "VALID"),  # LeNet-5
        ((2, 15, 15, 1), (3, 3, 1, 4), (2, 2), "SAME"),  # one channel, strided, padded
        ((2, 17, 17, 3), (7, 7, 3, 8), (2, 2), "SAME"),  # ResNet stem: odd size, stride 2
        ((2, 9, 9, 8), (1, 1, 8, 16), (2, 2), "SAME"),  # ResNet projection shortcut
        ((2, 10, 10, 4), (3, 3, 4, 4), (1, 1), ((2, 0), (1, 1))),  # explicit, uneven pads
    ],
)
def test_patches_conv_equals_xla_conv_with_gradients(shape, kernel, strides, padding):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(shape), jnp.float32)
    w = jnp.asarray(rng.standard_normal(kernel) * 0.1, jnp.float32)
    (out_a, grads_a), (out_b, grads_b) = conv_both(x, w, strides, padding)
    assert out_a.shape == out_b.shape
    np.testing.assert_allclose(out_b, out_a, rtol=1e-5, atol=1e-5)
    for a, b in zip(grads_a, grads_b, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_patches_conv_hands_what_it_does_not_handle_to_xla():
    x = jnp.ones((1, 8, 8, 4))
    w = jnp.ones((3, 3, 2, 4))  # two feature groups
    dn = lax.conv_dimension_numbers(x.shape, w.shape, NHWC)
    got = formulation.patches_conv(
        x, w, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=2
    )
    want = lax.conv_general_dilated(
        x, w, (1, 1), "SAME", dimension_numbers=dn, feature_group_count=2
    )
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("kind", "window", "stride", "padding", "size"),
    [
        ("max", 2, 2, "VALID", 26),
        ("max", 2, 2, "VALID", 11),  # odd: the last row and column are dropped
        ("avg", 2, 2, "VALID", 28),
        ("max", 3, 3, "VALID", 16),  # cats-vs-dogs' pool of 3
        ("max", 3, 2, "SAME", 15),  # ResNet's overlapping stem pool
        ("avg", 3, 2, "SAME", 9),
    ],
)
def test_sliced_pool_equals_flax_pool_with_gradients(kind, window, stride, padding, size):
    x = jnp.asarray(np.random.default_rng(1).standard_normal((2, size, size, 3)), jnp.float32)

    def run(chosen):
        def loss(x):
            return jnp.sum(jnp.sin(formulation.pool(x, kind, window, stride, padding, chosen)))

        return formulation.pool(x, kind, window, stride, padding, chosen), jax.grad(loss)(x)

    (out_a, grad_a), (out_b, grad_b) = run(XLA), run(CPU)
    np.testing.assert_allclose(out_b, out_a, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(grad_b, grad_a, rtol=1e-5, atol=1e-6)


def test_tiled_max_pool_gives_a_tied_window_s_gradient_to_its_first_maximum():
    # Ties are common after ReLU (whole windows of zeros): like XLA's select-and-scatter,
    # the gradient goes to one element, the first in row-major order, not split.
    x = jnp.asarray([[1.0, 3.0, 0.0, 0.0], [3.0, 2.0, 0.0, 0.0]]).reshape(1, 2, 4, 1)
    for chosen in (XLA, CPU):
        grad = jax.grad(lambda x, c=chosen: jnp.sum(formulation.pool(x, "max", 2, 2, "VALID", c)))(
            x
        )
        np.testing.assert_array_equal(grad[0, :, :, 0], [[0, 1, 1, 0], [0, 0, 0, 0]])


# Every layer shape is checked above; these add what only a whole model has: layers
# chained, BatchNorm (resnet), dropout and pools of 3 (catsdogs). VGG-16 and LeNet-5
# reuse the 3x3/SAME and 5x5/VALID layers above and would only add compile time.
MODELS = [
    ("mnist_cnn", {}),
    ("lenet5_keras", {}),
    ("resnet_tiny", {}),
    ("catsdogs_cnn", {"widths": ((4,),) * 5, "dense_width": 8, "input_size": 96}),
]


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        pytest.param(
            *m, marks=[pytest.mark.slow] if m[0] in ("resnet_tiny", "catsdogs_cnn") else []
        )
        for m in MODELS
    ],
)
def test_every_model_s_loss_and_gradients_match_across_formulations(name, overrides):
    shape = models.input_shape(name, **overrides)
    plain = models.get(name, formulation="xla", **overrides)
    fast = models.get(name, formulation="cpu", **overrides)
    state = train.create_train_state(plain, train.make_optimizer(), shape)
    x = jnp.asarray(np.random.default_rng(2).integers(0, 256, (4, *shape)), jnp.uint8)
    x = x.astype(jnp.float32) / 255.0
    labels = jnp.arange(4) % 2
    variables = {"batch_stats": state.batch_stats} if state.batch_stats else {}

    def loss(params, module):
        logits, _ = module.apply(
            {"params": params, **variables},
            x,
            train=True,
            mutable=["batch_stats"],
            rngs={"dropout": jax.random.key(0)},  # the same dropout masks for both
        )
        logits = logits.astype(jnp.float32)
        if logits.shape[-1] == 1:
            return jnp.mean((logits[:, 0] - labels) ** 2)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(4), labels])

    value_a, grads_a = jax.value_and_grad(loss)(state.params, plain)
    value_b, grads_b = jax.value_and_grad(loss)(state.params, fast)
    np.testing.assert_allclose(value_b, value_a, rtol=1e-5)
    for a, b in zip(jax.tree.leaves(grads_a), jax.tree.leaves(grads_b), strict=True):
        scale = float(jnp.max(jnp.abs(a))) or 1.0
        np.testing.assert_allclose(b / scale, a / scale, atol=1e-4)


def test_formulation_never_changes_the_parameters():
    for name in ("mnist_cnn", "lenet5_keras", "resnet_tiny"):
        counts = {f: models.param_counts(name, formulation=f) for f in ("xla", "cpu")}
        assert counts["xla"] == counts["cpu"]


def test_the_platform_chooses_in_one_place():
    assert formulation.for_platform("cpu") is CPU
    for platform in ("gpu", "tpu", "cuda", "rocm", "METAL"):
        assert formulation.for_platform(platform) is XLA
    assert formulation.resolve("auto", "tpu") is XLA
    assert formulation.resolve(None, "cpu") is CPU
    assert formulation.resolve("xla", "cpu") is XLA
    # A registry model leaves the choice to where its program is made: traced here (the
    # tests' default backend is cpu), AUTO is the CPU's; compiled for a target, its own.
    assert models.get("mnist_cnn").formulation == formulation.AUTO
    assert formulation.resolve(formulation.AUTO) is CPU
    assert formulation.for_target(formulation.AUTO, "gpu") is XLA
    assert formulation.for_target(CPU, "gpu") is CPU  # a named choice stays
    assert models.get("mnist_cnn", formulation="xla").formulation is XLA


def test_unknown_formulation_is_a_usage_error_naming_the_choices():
    with pytest.raises(UsageError, match="unknown formulation 'fast'.*auto, xla, cpu"):
        models.get("mnist_cnn", formulation="fast")
