"""How convolutions and pools are computed: the one place where the platform chooses.

The models always ask for the same thing (a 2-D convolution, a max or average pool);
a `Formulation` says which program computes it. Both give the same numbers (within
f32 rounding; the tests check forward and gradients against each other):

- `xla` (every accelerator): `lax.conv_general_dilated` and `lax.reduce_window`, the
  ops XLA maps onto cuDNN / the TPU's MXU. The fast path there.
- `cpu` (XLA:CPU): a convolution as shifted slices of the padded input concatenated
  into patches (a one-channel input's stacked as rows) and ONE 2-D matmul with the
  (kh*kw*cin, cout) kernel; a pool as a reshape (window == stride) or strided
  slices, then max/mean. Why: XLA:CPU runs the gradients of `conv_general_dilated`
  and `reduce_window` (weight-gradient convs, select-and-scatter) far slower than
  matmuls and slices, and slower still inside a compiled loop (jax-ml/jax#12868).
  Matmuls go to the CPU's tuned GEMM; the slices' gradients are pads and adds.
  PERFORMANCE.md has the measurements, docs/performance-log.md what was tried.

- `onednn` (XLA:CPU, optional: `pip install -e ".[onednn]"`): convolutions computed by
  oneDNN's kernels (the library behind TensorFlow's CPU convolutions) through XLA's
  FFI (jaxcnn.onednn), forward and both gradients; pools as `cpu`'s. f32 only: other
  dtypes get XLA's convolution.

Nothing here looks at the platform except `for_platform`, and the model and step
code never do: `models.get` passes the choice in, and every record names it. A model
built with `auto` (models.get's default) holds AUTO, the platform's choice made where
its program is made: the default backend's when it is traced for the devices at hand,
the target's when jaxcnn.aot.compile_for compiles it for a target (`for_target`), so a
registry model compiled for a GPU is the program a GPU runs.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from jaxcnn import choices
from jaxcnn.conv_shapes import plain_2d_conv
from jaxcnn.errors import UsageError

CONVS = ("xla", "patches", "onednn")
POOLS = ("xla", "slices")


@dataclasses.dataclass(frozen=True)
class Formulation:
    """Which program computes a convolution (`conv`) and a pool (`pool`)."""

    name: str = "xla"
    conv: str = "xla"  # xla | patches | onednn
    pool: str = "xla"  # xla | slices

    def describe(self) -> dict[str, str]:
        return dataclasses.asdict(self)


# Each named formulation (jaxcnn.choices, where the names and their programs are listed).
FORMULATIONS = {
    name: Formulation(name, conv, pool)
    for name, (conv, pool) in choices.FORMULATION_PROGRAMS.items()
}
# The platform's choice, made when the program is made (`resolve`).
AUTO = Formulation("auto", "auto", "auto")


def for_platform(platform: str) -> Formulation:
    """The fastest formulation measured on `platform` (cpu | gpu | tpu | ...)."""
    return FORMULATIONS[choices.platform_formulation(platform)]


def resolve(name: str | Formulation | None, platform: str | None = None) -> Formulation:
    """`auto`/None/AUTO: the platform's default (the default backend's if `platform` is
    None)."""
    if name == AUTO:
        name = "auto"
    if isinstance(name, Formulation):
        return name
    if name in (None, "auto"):
        return for_platform(platform or jax.default_backend())
    if name not in FORMULATIONS:
        raise UsageError(
            f"unknown formulation {name!r}: choose one of {', '.join(choices.FORMULATIONS)}"
        )
    chosen = FORMULATIONS[name]
    if chosen.conv == "onednn":
        from jaxcnn import onednn  # optional, and built on first use: ask for it now

        onednn.ensure()
    return chosen


# --- convolution ------------------------------------------------------------------------


def patches_conv(
    lhs: jax.Array,
    rhs: jax.Array,
    window_strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
    lhs_dilation: Sequence[int] | None = None,
    rhs_dilation: Sequence[int] | None = None,
    dimension_numbers: Any = None,
    feature_group_count: int = 1,
    batch_group_count: int = 1,
    precision: Any = None,
    preferred_element_type: Any = None,
) -> jax.Array:
    """`lax.conv_general_dilated` (same signature) as patches @ kernel for 2-D NHWC/HWIO
    convolutions without dilation or groups; anything else goes to lax unchanged."""
    simple = plain_2d_conv(
        lhs, rhs, lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
        batch_group_count,
    )  # fmt: skip
    if not simple:
        return lax.conv_general_dilated(
            lhs,
            rhs,
            window_strides,
            padding,
            lhs_dilation,
            rhs_dilation,
            dimension_numbers,
            feature_group_count,
            batch_group_count,
            precision,
            preferred_element_type,
        )
    kh, kw, cin, cout = rhs.shape
    sh, sw = window_strides
    if isinstance(padding, str):
        padding = lax.padtype_to_pads(lhs.shape[1:3], (kh, kw), (sh, sw), padding)
    (top, bottom), (left, right) = padding
    x = lax.pad(
        lhs, jnp.zeros((), lhs.dtype), ((0, 0, 0), (top, bottom, 0), (left, right, 0), (0, 0, 0))
    )
    batch, height, width, _ = x.shape
    out_h, out_w = (height - kh) // sh + 1, (width - kw) // sw + 1
    # Tap (i, j) of every output pixel is a strided slice; concatenated in (i, j, c)
    # order they match the kernel reshaped to (kh*kw*cin, cout).
    taps = [
        lax.slice(
            x,
            (0, i, j, 0),
            (batch, i + (out_h - 1) * sh + 1, j + (out_w - 1) * sw + 1, cin),
            (1, sh, sw, 1),
        )
        for i in range(kh)
        for j in range(kw)
    ]
    pixels, depth = batch * out_h * out_w, kh * kw * cin
    if cin == 1:
        # One channel (a grayscale input layer): each tap is a contiguous block, so
        # stack them as rows, (taps, pixels), not as 1-wide columns the concatenate
        # would write one value at a time; the weight gradient becomes a plain
        # (taps, pixels) @ (pixels, cout) GEMM instead of a transposed one.
        patches = jnp.stack(taps).reshape(depth, pixels)
        contract = (0,)
    else:
        patches = taps[0] if len(taps) == 1 else jnp.concatenate(taps, axis=-1)
        patches = patches.reshape(pixels, depth)  # 2-D: the GEMMs and their gradients
        contract = (1,)
    out = lax.dot_general(
        patches,
        rhs.reshape(depth, cout),
        ((contract, (0,)), ((), ())),
        precision=precision,
        preferred_element_type=preferred_element_type,
    )
    return out.reshape(batch, out_h, out_w, cout)


def for_model(name: str | Formulation | None) -> Formulation:
    """What `models.get` builds a model with: AUTO for `auto`/None (the choice left to
    where the program is made), else the named formulation."""
    return AUTO if name in (None, "auto", AUTO) else resolve(name)


def for_target(formulation: Formulation, platform: str) -> Formulation:
    """The formulation a model holding `formulation` is compiled with for a target of
    `platform`: AUTO becomes that platform's; a named one stays."""
    return resolve(formulation, platform) if formulation == AUTO else formulation


def conv_function(formulation: Formulation):
    """What `flax.linen.Conv(conv_general_dilated=...)` should call."""
    formulation = resolve(formulation)
    if formulation.conv == "patches":
        return patches_conv
    if formulation.conv == "onednn":
        # Imported here: oneDNN is optional, and its library is built on first use.
        from jaxcnn import onednn

        return onednn.conv_general_dilated
    return lax.conv_general_dilated


# --- pooling ----------------------------------------------------------------------------


def _flax_pool(x: jax.Array, kind: str, window: int, stride: int, padding: str) -> jax.Array:
    import flax.linen as nn

    pool = {"max": nn.max_pool, "avg": nn.avg_pool}[kind]
    return pool(x, (window, window), (stride, stride), padding)


def _tiles(x: jax.Array, window: int) -> jax.Array:
    """(B, H, W, C) -> (B, H/w, w, W/w, w, C), rows and columns past the last whole
    window dropped (VALID)."""
    batch, height, width, channels = x.shape
    out_h, out_w = height // window, width // window
    return x[:, : out_h * window, : out_w * window].reshape(
        batch, out_h, window, out_w, window, channels
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _tiled_max(x: jax.Array, window: int) -> jax.Array:
    return _tiles(x, window).max(axis=(2, 4))


def _tiled_max_fwd(x: jax.Array, window: int):
    y = _tiled_max(x, window)
    return y, (x, y)


def _tiled_max_bwd(window: int, residuals, g: jax.Array):
    """The gradient goes to the first maximum of each window in row-major order, as
    XLA's select-and-scatter gives it. Written out because autodiff of a reduce-max
    spreads it over ties with a count and a division: several passes over the input
    on XLA:CPU where this is one."""
    x, y = residuals
    tiles = _tiles(x, window)
    taken = jnp.zeros(y.shape, bool)
    rows = []
    for i in range(window):
        cols = []
        for j in range(window):
            first = (tiles[:, :, i, :, j] == y) & ~taken
            taken = taken | first
            cols.append(jnp.where(first, g, jnp.zeros((), g.dtype)))
        rows.append(jnp.stack(cols, axis=3))  # (B, h, w, window, C)
    grad = jnp.stack(rows, axis=2)  # (B, h, window, w, window, C)
    batch, height, width, channels = x.shape
    grad = grad.reshape(batch, y.shape[1] * window, y.shape[2] * window, channels)
    pads = ((0, 0), (0, height - grad.shape[1]), (0, width - grad.shape[2]), (0, 0))
    return (jnp.pad(grad, pads),)


_tiled_max.defvjp(_tiled_max_fwd, _tiled_max_bwd)


def sliced_pool(x: jax.Array, kind: str, window: int, stride: int, padding: str) -> jax.Array:
    """Max or average pool (NHWC, square window) from a reshape when the windows tile
    the input (window == stride, VALID), else from strided slices. Average pools divide
    by the window size, padding included, as flax's `avg_pool` does."""
    height, width = x.shape[1:3]
    if padding == "VALID" and window == stride:
        if kind == "max":
            return _tiled_max(x, window)
        return _tiles(x, window).mean(axis=(2, 4))
    pads = lax.padtype_to_pads((height, width), (window, window), (stride, stride), padding)
    fill = -jnp.inf if kind == "max" else 0
    x = jnp.pad(x, ((0, 0), *pads, (0, 0)), constant_values=jnp.asarray(fill, x.dtype))
    out_h = (x.shape[1] - window) // stride + 1
    out_w = (x.shape[2] - window) // stride + 1
    taps = [
        x[:, i : i + (out_h - 1) * stride + 1 : stride, j : j + (out_w - 1) * stride + 1 : stride]
        for i in range(window)
        for j in range(window)
    ]
    if kind == "max":
        out = taps[0]
        for tap in taps[1:]:
            out = jnp.maximum(out, tap)
        return out
    return sum(taps[1:], taps[0]) / (window * window)


def pool(
    x: jax.Array, kind: str, window: int, stride: int, padding: str, formulation: Formulation
) -> jax.Array:
    """A max/avg pool computed the way `formulation` says."""
    formulation = resolve(formulation)
    if formulation.pool == "slices":
        return sliced_pool(x, kind, window, stride, padding)
    return _flax_pool(x, kind, window, stride, padding)
