"""FLOPs counted from the jaxpr, the same on every backend; XLA's count beside it.

Only the ops that dominate a CNN's work are counted: `dot_general` and
`conv_general_dilated`, at 2 FLOPs per multiply-accumulate. Elementwise ops,
reductions, pooling and optimizer updates are not (XLA's `cost_analysis` counts
those too, which is one reason the two numbers differ).

What is counted is what the program says, densely:

- dot_general: 2 x batch x contracting x lhs-free x rhs-free elements.
- conv_general_dilated: 2 x (every output element) x (kernel window) x (kernel input
  features). Padding taps and the zeros an lhs dilation inserts (the transposed convs
  of the backward pass) are counted as performed, since the jaxpr asks for them; XLA
  may count only in-bounds taps, so the two differ for SAME padding and backward convs.
  `FlopCount.in_bounds` is the same count without those zero taps: the useful work.
  The two differ most where a kernel is large next to its output (LeNet-5's C5 maps
  5x5 to 1x1, so its input gradient is a 5x5 conv over a 1x1 map padded by 4).
- jaxcnn.onednn's kernels (`ffi_call`s the jaxpr cannot look into): forward, input
  gradient and weight gradient each as the forward convolution's count, in bounds too.

Nested jaxprs are walked: jit/pjit, custom_jvp/custom_vjp, remat, scan (body x
length), while (body and condition once, the trip count being unknown: flagged),
cond (the costliest branch), pmap and shard_map (body x devices in the map, so the
count is global, as for a jit over a sharded array).
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import jax

from jaxcnn.onednn import TARGET_PREFIX
from jaxcnn.perf.hlo import in_bounds_taps

DOT = "dot_general"
CONV = "conv_general_dilated"
FFI = "ffi_call"


@dataclasses.dataclass(frozen=True)
class FlopCount:
    """A jaxpr's FLOPs: the total, per primitive, and whether a loop's trip count was
    unknown (a while body counted once)."""

    total: int
    by_primitive: dict[str, int]
    unknown_trip_count: bool = False
    in_bounds: int | None = None  # convs counting only taps on real input; None = total

    def __post_init__(self) -> None:
        if self.in_bounds is None:
            object.__setattr__(self, "in_bounds", self.total)


def dot_general_flops(
    lhs_shape: Sequence[int], rhs_shape: Sequence[int], dimension_numbers: Any
) -> int:
    """2 x product of batch, contracting, lhs-free and rhs-free dimensions."""
    (_, rhs_contract), (_, rhs_batch) = dimension_numbers
    rhs_shared = math.prod(rhs_shape[d] for d in (*rhs_contract, *rhs_batch))
    # Every lhs element meets every rhs-free column once.
    return 2 * math.prod(lhs_shape) * (math.prod(rhs_shape) // max(rhs_shared, 1))


def conv_flops(rhs_shape: Sequence[int], out_shape: Sequence[int], rhs_spec: Sequence[int]) -> int:
    """2 x output elements x kernel window x kernel input features.

    `rhs_spec` is (out-feature dim, in-feature dim, *spatial dims) of the kernel, as in
    `ConvDimensionNumbers.rhs_spec`. The output shape already carries strides, padding,
    dilations and batch groups; the kernel's in-feature size is already Cin / groups.
    """
    window = math.prod(rhs_shape[d] for d in rhs_spec[2:])
    return 2 * math.prod(out_shape) * window * rhs_shape[rhs_spec[1]]


def conv_flops_in_bounds(
    lhs_shape: Sequence[int], rhs_shape: Sequence[int], out_shape: Sequence[int], params: dict
) -> int:
    """Like `conv_flops`, counting only the taps that meet real input: the work left
    once zero padding and lhs-dilation holes are skipped (spatial dims are separable)."""
    dims = params["dimension_numbers"]
    lhs_spatial, rhs_spatial, out_spatial = dims.lhs_spec[2:], dims.rhs_spec[2:], dims.out_spec[2:]
    taps = 1
    for i in range(len(lhs_spatial)):
        taps *= in_bounds_taps(
            lhs_shape[lhs_spatial[i]],
            rhs_shape[rhs_spatial[i]],
            out_shape[out_spatial[i]],
            params["window_strides"][i],
            params["padding"][i][0],
            (params.get("lhs_dilation") or (1,) * len(lhs_spatial))[i],
            (params.get("rhs_dilation") or (1,) * len(lhs_spatial))[i],
        )
    non_spatial = out_shape[dims.out_spec[0]] * out_shape[dims.out_spec[1]]
    return 2 * non_spatial * taps * rhs_shape[dims.rhs_spec[1]]


def _shape(var: Any) -> tuple[int, ...]:
    return tuple(var.aval.shape)


def _eqn_flops(eqn: Any) -> tuple[int, int]:
    """(dense, in-bounds) FLOPs of one equation; (0, 0) for what is not counted."""
    name = eqn.primitive.name
    if name == DOT:
        lhs, rhs = eqn.invars[:2]
        flops = dot_general_flops(_shape(lhs), _shape(rhs), eqn.params["dimension_numbers"])
        return flops, flops
    if name == CONV:
        lhs, rhs, out = _shape(eqn.invars[0]), _shape(eqn.invars[1]), _shape(eqn.outvars[0])
        dense = conv_flops(rhs, out, eqn.params["dimension_numbers"].rhs_spec)
        return dense, conv_flops_in_bounds(lhs, rhs, out, eqn.params)
    if name == FFI and str(eqn.params.get("target_name", "")).startswith(TARGET_PREFIX):
        flops = _onednn_conv_flops(eqn)
        return flops, flops
    return 0, 0


def _onednn_conv_flops(eqn: Any) -> int:
    """One of jaxcnn.onednn's three kernels: each computes the forward convolution's
    multiply-accumulates, 2 x N*OH*OW*O x KH*KW*C (padding taps included)."""
    kind = str(eqn.params["target_name"])[len(TARGET_PREFIX) :]
    a, b, out = _shape(eqn.invars[0]), _shape(eqn.invars[1]), _shape(eqn.outvars[0])
    # fwd (x, w) -> y; bwd_data (dy, w) -> dx; bwd_weights (x, dy) -> dw
    y, kernel = {"fwd": (out, b), "bwd_data": (a, b), "bwd_weights": (b, out)}[kind]
    return conv_flops(kernel, y, (3, 2, 0, 1))  # HWIO


def _open(jaxpr: Any) -> Any:
    """A Jaxpr from a Jaxpr or ClosedJaxpr (duck-typed: the classes moved across JAX
    versions)."""
    return jaxpr if hasattr(jaxpr, "eqns") else jaxpr.jaxpr


def _is_jaxpr(value: Any) -> bool:
    return hasattr(value, "eqns") or (hasattr(value, "jaxpr") and hasattr(value, "consts"))


def _sub_jaxprs(params: dict[str, Any]) -> list[Any]:
    found = []
    for value in params.values():
        if _is_jaxpr(value):
            found.append(value)
        elif isinstance(value, (tuple, list)):
            found.extend(v for v in value if _is_jaxpr(v))
    return found


def _mapped_devices(eqn: Any) -> int:
    """How many devices run a pmap/shard_map body: its count times this is global."""
    params = eqn.params
    if "axis_size" in params:  # xla_pmap (older JAX)
        return int(params["axis_size"])
    mesh = params.get("mesh")
    if mesh is None:
        return 1
    sizes = dict(mesh.shape)
    for key in ("newly_manual_axes", "manual_axes", "axis_names"):
        names = params.get(key)
        if names:
            return math.prod(sizes[n] for n in names if n in sizes)
    return math.prod(sizes.values())


def _combine(counts: Iterable[FlopCount], times: int = 1) -> FlopCount:
    by: Counter[str] = Counter()
    unknown, in_bounds = False, 0
    for count in counts:
        by.update({k: v * times for k, v in count.by_primitive.items()})
        unknown = unknown or count.unknown_trip_count
        in_bounds += count.in_bounds * times
    return FlopCount(sum(by.values()), dict(by), unknown, in_bounds)


def _nested(eqn: Any) -> FlopCount:
    name, params = eqn.primitive.name, eqn.params
    if name == "scan":
        return _combine([jaxpr_flops(params["jaxpr"])], times=int(params["length"]))
    if name == "while":
        inner = _combine([jaxpr_flops(params["cond_jaxpr"]), jaxpr_flops(params["body_jaxpr"])])
        return dataclasses.replace(inner, unknown_trip_count=True)
    if name == "cond":  # one branch runs; count the costliest
        return max((jaxpr_flops(b) for b in params["branches"]), key=lambda c: c.total)
    subs = [jaxpr_flops(j) for j in _sub_jaxprs(params)]
    if name in ("xla_pmap", "shard_map"):
        return _combine(subs, times=_mapped_devices(eqn))
    return _combine(subs)


def jaxpr_flops(jaxpr: Any) -> FlopCount:
    """FLOPs of a (closed) jaxpr, walking into every nested jaxpr."""
    by: Counter[str] = Counter()
    in_bounds = 0
    parts = []
    for eqn in _open(jaxpr).eqns:
        dense, useful = _eqn_flops(eqn)
        if dense:
            by[eqn.primitive.name] += dense
            in_bounds += useful
        elif _sub_jaxprs(eqn.params):
            parts.append(_nested(eqn))
    return _combine([FlopCount(sum(by.values()), dict(by), False, in_bounds), *parts])


def count(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> FlopCount:
    """Trace `fn(*args, **kwargs)` (arrays or ShapeDtypeStructs) and count its FLOPs."""
    return jaxpr_flops(jax.make_jaxpr(fn)(*args, **kwargs))


def count_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> int:
    """Total FLOPs of `fn(*args, **kwargs)` from its jaxpr."""
    return count(fn, *args, **kwargs).total


def cost_analysis(compiled: Any) -> dict[str, Any] | None:
    """`compiled.cost_analysis()` as one dict, or None where XLA gives none (XLA:GPU).

    Current JAX returns a dict, older JAX a list with one dict per program; some
    backends raise or return None or an empty result."""
    try:
        analysis = compiled.cost_analysis()
    except Exception:  # some backends raise instead of returning nothing
        return None
    if isinstance(analysis, (list, tuple)):
        analysis = analysis[0] if analysis else None
    return analysis if isinstance(analysis, dict) and analysis else None


def xla_flops(compiled: Any) -> float | None:
    """`compiled.cost_analysis()["flops"]`, or None where XLA gives none.

    Current JAX returns a dict, older JAX a list with one dict per program; some
    backends return None, an empty result or -1. For a program over many devices the
    number is per device (per SPMD partition or pmap replica), not global.
    """
    analysis = cost_analysis(compiled)
    flops = None if analysis is None else analysis.get("flops")
    if flops is None or not math.isfinite(float(flops)) or float(flops) < 0:
        return None
    return float(flops)
