"""The one reader of a chip's rates: what one device of it can do per second (peak
FLOP/s per matmul input type, in the precision its matmuls run in; memory bandwidth;
interconnect; host link), as the chip table (jaxcnn.perf.chips) gives them, or as a run
measured them on a device the table does not know (a CPU).

    r = rates.of_device(jax.devices()[0])             # the vendor's, or nothing known
    r = rates.of_target(chips.TARGETS["tpu-v2-8"])    # one core's share of a v2 chip
    r.peak_flops_per_s["f32"], r.bytes_per_s, r.host_link_bytes_per_s
    r.matmul("float32")                               # ("tf32", 156.0) on an A100

Everything that prices a step or reports a chip's peaks, bandwidth or links reads them
here. Reading JAX's default matmul precision (`matmul_precision`) is the one place this
module touches JAX, and only when asked about a device, which JAX made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jaxcnn.perf import chips

# The element types a kernel's dot or convolution reads (jaxcnn.perf.hlo's names) -> the
# dtype names chips.matmul_precision takes.
DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
# The precisions the chip table gives peaks for, in the order records list them.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
# The arithmetic units a dot or convolution can run on, each with its own peak and its
# own fraction of it that real kernels reach: "matrix" (a GPU's tensor cores, a TPU's
# matrix units) and "vector" (a GPU's fp32 pipes). A chip's fraction of one says nothing
# of the other's: cuDNN's fp32 convolutions on a V100 keep its fp32 pipes busy, while the
# same step's TF32 convolutions on an A100 reach a small part of its tensor cores' peak.
UNITS = ("matrix", "vector")


@dataclasses.dataclass(frozen=True)
class Rates:
    """One device's rates. `peak_flops_per_s`, `precision` and `units` are keyed by a
    matmul's input type (DTYPES' short names): its peak in the precision it runs in, that
    precision, the unit it runs on; a type without a peak is left out (priced at f32's).
    `peak_tflops` is the vendor's dense peak per precision (PRECISIONS), one device's
    share, as records state it. A rate None is one no figure is published for."""

    peak_flops_per_s: Mapping[str, float]
    bytes_per_s: float | None
    interconnect_bytes_per_s: float | None = None  # not divided among a chip's devices
    host_link_bytes_per_s: float | None = None
    precision: Mapping[str, str] = dataclasses.field(default_factory=dict)
    units: Mapping[str, str] = dataclasses.field(default_factory=dict)
    peak_tflops: Mapping[str, float] = dataclasses.field(default_factory=dict)
    source: str = "vendor"  # or "measured": what a run measured on its own device

    def matmul(self, dtype: str) -> tuple[str | None, float | None]:
        """(the precision a matmul of `dtype` inputs (float32, bfloat16, float16) runs
        in, the vendor's peak TFLOP/s of one device in it), each None where unknown."""
        short = next((s for s, name in DTYPES.items() if name == dtype), None)
        precision = self.precision.get(short) if short else None
        return precision, self.peak_tflops.get(precision) if precision else None

    @property
    def can_price(self) -> bool:
        """Whether these rates price any program: an f32 peak and a bandwidth."""
        return "f32" in self.peak_flops_per_s and bool(self.bytes_per_s)

    @property
    def vector_dtypes(self) -> frozenset[str]:
        """The input types priced on vector units (`unit`); a type the chip has no peak of
        its own for runs as f32 does, on f32's units. Empty for rates that say nothing of
        units (a CPU's measured ones)."""
        units = dict(self.units)
        if "f32" in units:
            for short in DTYPES:
                units.setdefault(short, units["f32"])
        return frozenset(short for short, kind in units.items() if kind == "vector")


def of_chip(
    platform: str,
    device_kind: str,
    devices_per_chip: int = 1,
    *,
    matmul_setting: str = "default",
    compute_capability: str | None = None,
) -> Rates:
    """One device's share of the chip `device_kind` (JAX's name, or the table's own) of
    `platform`, as the chip table gives it, at JAX's default matmul precision
    `matmul_setting`. A chip the table does not know has no peaks and no rates (a CPU)."""
    kind = device_kind
    peaks, precisions, units = {}, {}, {}
    for short, name in DTYPES.items():
        precision = chips.matmul_precision(platform, kind, name, matmul_setting, compute_capability)
        if precision is None:
            continue
        precisions[short] = precision
        peak = chips.peak_tflops(kind, precision)
        if peak:
            peaks[short] = peak * 1e12 / devices_per_chip
            units[short] = unit(platform, precision, kind)
    tflops = {p: chips.peak_tflops(kind, p) for p in PRECISIONS}
    bandwidth = chips.fact(kind, "bandwidth")
    return Rates(
        peak_flops_per_s=peaks,
        bytes_per_s=None if bandwidth is None else bandwidth / devices_per_chip,
        interconnect_bytes_per_s=chips.fact(kind, "interconnect"),
        host_link_bytes_per_s=chips.fact(kind, "host_link"),
        precision=precisions,
        units=units,
        peak_tflops={p: t / devices_per_chip for p, t in tflops.items() if t is not None},
    )


def of_device(device: Any, devices_per_chip: int = 1) -> Rates:
    """`of_chip` for a JAX device (or anything with its `platform` and `device_kind`,
    and `compute_capability` where it has one), at JAX's default matmul precision now."""
    return of_chip(
        device.platform,
        device.device_kind,
        devices_per_chip,
        matmul_setting=_matmul_setting(),
        compute_capability=getattr(device, "compute_capability", None),
    )


def of_target(target: chips.Target) -> Rates:
    """`of_chip` for one device of `target` (chips.TARGETS), at JAX's default matmul
    precision now."""
    return of_chip(
        target.platform, target.kind, target.devices_per_chip, matmul_setting=_matmul_setting()
    )


def measured(ceiling: Mapping[str, Any] | None, bandwidth: Mapping[str, Any] | None) -> Rates:
    """The rates a run measured on its own device (a record's `matmul_ceiling` and
    `bandwidth`): the peaks its matmuls reached per dtype and its memory bandwidth."""
    peaks = {}
    for short, name in DTYPES.items():
        tflops = ((ceiling or {}).get(name) or {}).get("tflops")
        if tflops:
            peaks[short] = tflops * 1e12
    return Rates(
        peak_flops_per_s=peaks, bytes_per_s=(bandwidth or {}).get("bytes_per_s"), source="measured"
    )


def pricing(
    device: Any,
    devices_per_chip: int = 1,
    ceiling: Mapping[str, Any] | None = None,
    bandwidth: Mapping[str, Any] | None = None,
) -> Rates:
    """The rates a step on `device` is priced at: the vendor's where the chip table knows
    the chip (what a compile-only record of it uses), else what a run measured on it (a
    CPU's matmul ceiling and bandwidth)."""
    found = of_device(device, devices_per_chip)
    if found.peak_flops_per_s and found.bytes_per_s:
        return found
    return measured(ceiling, bandwidth)


def matmul_precision(device: Any, dtype: Any = "float32") -> str | None:
    """The arithmetic a matmul of `dtype` inputs runs in on `device` at JAX's default
    matmul precision now (chips.matmul_precision): what an MFU must be measured against."""
    import jax.numpy as jnp  # a dtype's canonical name (bfloat16 is not numpy's own)

    return chips.matmul_precision(
        device.platform,
        device.device_kind,
        str(jnp.dtype(dtype)),
        _matmul_setting(),
        getattr(device, "compute_capability", None),
    )


def _matmul_setting() -> str:
    """JAX's default matmul precision in this context (jax.default_matmul_precision)."""
    import jax  # asked about a device: JAX made it, so JAX is loaded

    return str(jax.config.jax_default_matmul_precision or "default")


def unit(platform: str, precision: str, device_kind: str) -> str:
    """The unit a matmul of `precision` (chips.matmul_precision's name) runs on on a chip
    of `platform`: a TPU's are all matrix units; on a GPU fp32 runs on the fp32 pipes,
    TF32 and bf16 only exist on tensor cores, and fp16 runs on tensor cores where the
    chip has them: tensor cores give fp16 at least 4x the fp32 peak (Volta and Turing 8x,
    Ada 4x), Pascal's packed fp16 on its fp32 pipes 2x."""
    if platform != "gpu":
        return "matrix"
    if precision == "fp32":
        return "vector"
    if precision == "fp16":
        fp16 = chips.peak_tflops(device_kind, "fp16") or 0.0
        fp32 = chips.peak_tflops(device_kind, "fp32") or 0.0
        return "matrix" if fp16 >= 4 * fp32 else "vector"
    return "matrix"
