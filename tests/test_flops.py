import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import Analysed
from jax.sharding import PartitionSpec as P

from jaxcnn import flops, models, train

NHWC = ("NHWC", "HWIO", "NHWC")


def _conv(x, w, strides=(1, 1), padding="VALID", groups=1):
    return jax.lax.conv_general_dilated(
        x, w, strides, padding, dimension_numbers=NHWC, feature_group_count=groups
    )


def test_matmul_is_exactly_2mnk():
    m, k, n = 3, 5, 7
    assert flops.count_flops(jnp.matmul, jnp.ones((m, k)), jnp.ones((k, n))) == 2 * m * n * k


def test_batched_dot_general_counts_the_batch():
    b, m, k, n = 4, 3, 5, 7
    count = flops.count(jnp.matmul, jnp.ones((b, m, k)), jnp.ones((b, k, n)))
    assert count.total == 2 * b * m * n * k
    assert count.by_primitive == {"dot_general": 2 * b * m * n * k}


def test_valid_conv_is_2_n_ho_wo_cout_kh_kw_cin():
    n, h, w, cin, cout, kh, kw = 2, 9, 8, 3, 5, 3, 2
    x, k = jnp.ones((n, h, w, cin)), jnp.ones((kh, kw, cin, cout))
    ho, wo = h - kh + 1, w - kw + 1
    assert flops.count_flops(_conv, x, k) == 2 * n * ho * wo * cout * kh * kw * cin


def test_strided_conv_counts_only_the_outputs_it_makes():
    x, k = jnp.ones((1, 9, 9, 2)), jnp.ones((3, 3, 2, 4))
    ho = wo = (9 - 3) // 2 + 1
    assert flops.count_flops(lambda a, b: _conv(a, b, (2, 2)), x, k) == 2 * ho * wo * 4 * 9 * 2


def test_grouped_conv_divides_the_input_features():
    n, h, cin, cout, groups = 2, 8, 4, 6, 2
    x, k = jnp.ones((n, h, h, cin)), jnp.ones((3, 3, cin // groups, cout))
    got = flops.count_flops(lambda a, b: _conv(a, b, groups=groups), x, k)
    assert got == 2 * n * 6 * 6 * cout * 9 * (cin // groups)


def test_conv_backward_counts_the_padded_input_gradient_densely():
    # Rule for a stride-1 VALID conv: the kernel gradient is a conv as costly as the
    # forward; the input gradient is a "full" conv of the output gradient padded by
    # K-1, counted over every input position (H x W, not Ho x Wo): zero taps included.
    n, h, cin, cout, kk = 2, 6, 3, 4, 3
    x, k = jnp.ones((n, h, h, cin)), jnp.ones((kk, kk, cin, cout))
    ho = h - kk + 1
    forward = 2 * n * ho * ho * cout * kk * kk * cin
    input_grad = 2 * n * h * h * cin * kk * kk * cout
    both = jax.grad(lambda a, b: jnp.sum(_conv(a, b)), argnums=(0, 1))
    count = flops.count(both, x, k)
    assert count.total == forward + forward + input_grad
    # Without the zero taps, the input gradient does exactly the forward's multiplies.
    assert count.in_bounds == 3 * forward


def test_same_conv_in_bounds_skips_the_padding_taps():
    # 4x4 input, 3x3 kernel, SAME: per dimension the 4 outputs see 2, 3, 3, 2 real taps.
    x, k = jnp.ones((1, 4, 4, 2)), jnp.ones((3, 3, 2, 5))
    count = flops.count(lambda a, b: _conv(a, b, padding="SAME"), x, k)
    assert count.total == 2 * 4 * 4 * 5 * 9 * 2
    assert count.in_bounds == 2 * 5 * (2 + 3 + 3 + 2) ** 2 * 2


def test_strided_transposed_conv_in_bounds_skips_the_dilation_holes():
    # The input gradient of a stride-2 conv: lhs dilation 2 puts holes between inputs.
    x, k = jnp.ones((1, 7, 7, 1)), jnp.ones((3, 3, 1, 1))
    grad = jax.grad(lambda a: jnp.sum(_conv(a, k, (2, 2))))
    count = flops.count(grad, x)
    forward = 2 * 3 * 3 * 9  # 3x3 outputs, 9 taps each
    # The forward conv runs too; the input gradient's real taps equal the forward's.
    assert count.in_bounds == 2 * forward < count.total


def test_scan_body_is_multiplied_by_its_length():
    def f(x):
        return jax.lax.scan(lambda c, _: (c @ c, None), x, None, length=5)[0]

    assert flops.count_flops(f, jnp.ones((4, 4))) == 5 * 2 * 4 * 4 * 4


def test_while_body_is_counted_once_and_flagged():
    def f(x, n):
        return jax.lax.fori_loop(0, n, lambda i, c: c @ c, x)  # traced bound: a while

    count = flops.count(f, jnp.ones((4, 4)), 3)
    assert count.total == 2 * 4 * 4 * 4
    assert count.unknown_trip_count


def test_cond_counts_the_costliest_branch():
    def f(x):
        return jax.lax.cond(x.sum() > 0, lambda y: (y @ y) @ y, lambda y: y @ y, x)

    count = flops.count(f, jnp.ones((4, 4)))
    assert count.total == 2 * 2 * 4 * 4 * 4
    assert not count.unknown_trip_count


def test_nested_jit_and_custom_vjp_are_walked():
    @jax.custom_vjp
    def g(x):
        return x @ x

    g.defvjp(lambda x: (x @ x, x), lambda x, t: (t @ x,))
    assert flops.count_flops(jax.jit(lambda x: jax.jit(g)(x)), jnp.ones((4, 4))) == 128
    assert flops.count_flops(jax.checkpoint(lambda x: x @ x), jnp.ones((4, 4))) == 128


def test_pmap_and_shard_map_count_the_global_work():
    devices = jax.devices()[:2]
    a, b = jnp.ones((2, 3, 5)), jnp.ones((5, 7))
    pmapped = jax.pmap(lambda x, y: x @ y, in_axes=(0, None), devices=devices)
    assert flops.count_flops(pmapped, a, b) == 2 * 2 * 3 * 5 * 7
    mesh = jax.sharding.Mesh(np.array(devices), ("data",))
    mapped = jax.shard_map(
        lambda x, y: x @ y, mesh=mesh, in_specs=(P("data"), P()), out_specs=P("data")
    )
    assert flops.count_flops(mapped, jnp.ones((6, 5)), b) == 2 * 6 * 5 * 7


def _batch(n, shape):
    return {
        "image": jnp.zeros((n, *shape), jnp.uint8),
        "label": jnp.zeros((n,), jnp.int32),
    }


def _forward(name, n, **overrides):
    module = models.get(name, **overrides)
    shape = models.input_shape(name, **overrides)
    variables = jax.eval_shape(
        lambda: module.init(jax.random.key(0), jnp.zeros((1, *shape)), train=False)
    )
    return flops.count_flops(
        lambda v, x: module.apply(v, x, train=False), variables, jnp.zeros((n, *shape))
    )


def test_lenet5_forward_matches_a_hand_count():
    per_image = (
        2 * 28 * 28 * 6 * (5 * 5 * 1)  # C1: 32x32x1 -> 28x28x6, 5x5 VALID
        + 2 * 10 * 10 * 16 * (5 * 5 * 6)  # C3: 14x14x6 -> 10x10x16
        + 2 * 1 * 1 * 120 * (5 * 5 * 16)  # C5: 5x5x16 -> 1x1x120
        + 2 * 120 * 84  # F6
        + 2 * 84 * 10  # output
    )  # pools and tanh are not counted
    assert per_image == 833_040
    assert _forward("lenet5", 3) == 3 * per_image


def test_mlp_train_step_is_three_forwards_less_the_first_input_gradient():
    # The rule, exact for a dense net: each Dense layer costs F_l forward, F_l for its
    # weight gradient (x^T @ dy) and F_l for its input gradient (dy @ W^T), except the
    # first layer, whose input (the images) needs no gradient. So
    #     train = 3 x forward - F_1,   F_1 = 2 x batch x 784 x width.
    # Dropout, softmax cross-entropy and Adam are elementwise: not counted.
    n, width = 4, 16
    module = models.get("mlp", width=width)
    state = train.create_train_state(module, train.make_optimizer("adam"), (28, 28, 1))
    forward = _forward("mlp", n, width=width)
    assert forward == 2 * n * (784 * width + width * width + width * 10)
    step = flops.count_flops(train.train_step, state, _batch(n, (28, 28, 1)))
    assert step == 3 * forward - 2 * n * 784 * width
    # Between 2x and 3x: near 3x when width >> 784 (n=4096: 2.84x), near 2x when narrow.
    assert 2 * forward < step < 3 * forward


def test_xla_flops_reads_cost_analysis():
    m, k, n = 8, 16, 4
    compiled = jax.jit(jnp.matmul).lower(jnp.ones((m, k)), jnp.ones((k, n))).compile()
    got = flops.xla_flops(compiled)
    assert got is None or got == pytest.approx(2 * m * n * k, rel=0.01)


@pytest.mark.parametrize(
    ("analysis", "expected"),
    [
        ({"flops": 10.0}, 10.0),
        ([{"flops": 12.0}], 12.0),  # older JAX: one dict per program
        ({"flops": -1.0}, None),
        ({}, None),
        (None, None),
        ([], None),
        (NotImplementedError("no cost analysis"), None),
    ],
)
def test_xla_flops_is_none_where_xla_gives_nothing(analysis, expected):
    assert flops.xla_flops(Analysed(analysis)) == expected
