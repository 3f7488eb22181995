"""The one pricing of compiled programs: their kernels (jaxcnn.perf.hlo) at a chip's rates,
and the fitted constants that say how far below those rates real kernels run.

    programs = Programs.of([ks], [rates.pricing(device)])   # arrays at efficiency 1
    step_time(ks, rates.pricing(device), Constants.of(family))["seconds"]   # one program
    seconds(programs, constants)                        # many at once: the fit's loss

Kernels run one after another (one stream): each execution costs the larger of its
compute and memory times, plus its fixed cost, plus its interconnect time. Both a
prediction and the fit price through `kernel_seconds`: a new pricing constant is one
field of `Constants` and one line there.

Rates (jaxcnn.perf.rates): what the chip can do, per dot/conv input type, memory,
interconnect and host link: the chip table's where it knows the chip, else what a run
measured on it (a CPU's matmul ceiling and bandwidth).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jaxcnn.perf.hlo import HALF_FLOATS, Kernel
from jaxcnn.perf.rates import DTYPES, Rates

# The kinds a CPU runs as calls into a library (Eigen, oneDNN, YNNPACK): each call sets up
# its blocking and threads, a fixed cost far above a generated loop's or a copy's.
LIBRARY_KINDS = ("gemm", "conv")
# A kernel whose bytes per execution fit in one core's L2 cache is not bound by DRAM's
# bandwidth: what it reads was mostly just written by the kernel before it. This
# machine's CPU (AMD EPYC, /sys/devices/system/cpu/cpu0/cache/index2) has 512 KiB of L2
# per core; a platform that prices such kernels apart (Constants.cache_memory_efficiency)
# uses this threshold.
CACHE_BYTES = 512 * 1024

# --- Constants -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Constants:
    """How far below a chip's rates real kernels run, and what each launch costs: one
    platform's fitted constants (jaxcnn/perf/constants.json's families). The optional
    ones are None where the platform's kernels show no such difference (then the general
    constant prices those kernels): most are a CPU's only."""

    # The fraction of the priced rate real gemm/conv kernels reach (a GPU's tensor
    # cores, a TPU's matrix units), and of the priced bandwidth real kernels reach: below
    # 1 against a datasheet; against a rate a run measured (a CPU's one-matmul ceiling),
    # the step's kernels may pass it.
    compute_efficiency: float
    memory_efficiency: float
    kernel_overhead_s: float  # fixed cost per launched kernel (launch and dispatch)
    # The fraction of peak an `elemental_conv` reaches (XLA:CPU's loop convolutions).
    elemental_conv_efficiency: float | None = None
    # The fraction of their own peak dots and convolutions on vector units reach (a GPU's
    # fp32 pipes beside its tensor cores: `unit`).
    vector_efficiency: float | None = None
    # XLA:CPU runs a copy as a memcpy, a fusion as a generated loop, a GEMM or convolution
    # as a library call: a copy's, a library call's and a convolution call's fixed costs.
    copy_overhead_s: float | None = None
    library_overhead_s: float | None = None
    conv_overhead_s: float | None = None
    # The fraction of the bandwidth a kernel of at most CACHE_BYTES per execution reaches
    # (it runs from cache: may pass 1).
    cache_memory_efficiency: float | None = None
    # The fraction of the bandwidth a library call's operands and results move at,
    # whatever their size (a GEMM packs its operands into blocks and reads them again).
    library_memory_efficiency: float | None = None
    # The fraction of the bandwidth a fusion of a 16-bit float type (HALF_FLOATS) reaches,
    # whatever its size (where the platform converts each element).
    half_float_memory_efficiency: float | None = None
    # A published run's whole-run cost per step around its kernels (another framework's
    # loop: its input pipeline, evaluation): added to published observations only.
    published_loop_step_s: float | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is None:
                continue
            if field.name.endswith("_s") and not value >= 0:
                raise ValueError(f"Constants.{field.name} must be >= 0, not {value}")
            if not field.name.endswith("_s") and not value > 0:
                raise ValueError(f"Constants.{field.name} must be above 0, not {value}")

    @classmethod
    def of(cls, family: Mapping[str, Any]) -> Constants:
        """A platform's constants from its entry in the constants file (other keys, its
        error band and observations, ignored)."""
        values = {name: family.get(name) for name in PARAMETERS}
        return cls(**{k: None if v is None else float(v) for k, v in values.items()})


PARAMETERS = tuple(f.name for f in dataclasses.fields(Constants))


# --- Programs as arrays ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Programs:
    """The kernels of one or many programs as arrays at efficiency 1, each kernel's
    program in `owner`: what the constants are applied to, so one evaluation prices them
    all at once."""

    flops: np.ndarray  # per execution
    peak: np.ndarray  # FLOP/s of the kernel's input type on its chip
    bytes: np.ndarray  # per execution
    bytes_per_s: np.ndarray  # its chip's memory bandwidth
    collective_s: np.ndarray  # per execution, over its chip's interconnect
    counts: np.ndarray
    owner: np.ndarray
    elemental: np.ndarray  # masks: an elemental convolution
    vector: np.ndarray  # computes on vector units
    copies: np.ndarray
    library: np.ndarray  # a library call (LIBRARY_KINDS)
    convs: np.ndarray  # a library convolution
    cached: np.ndarray  # bytes per execution fit in cache (CACHE_BYTES)
    half: np.ndarray  # a fusion of a 16-bit float type
    host_s: np.ndarray  # per program: its host side, known
    published: np.ndarray  # per program: 1 where a published run's loop is included
    # Per tuple of mask names, each kernel's masks as one small integer (bit i: the i-th
    # mask): `_layered`'s, made once per set of programs (the fit prices the same set some
    # 300,000 times).
    _codes: dict[tuple[str, ...], np.ndarray] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    @property
    def size(self) -> int:
        return len(self.host_s)

    def codes(self, masks: tuple[str, ...]) -> np.ndarray:
        """Each kernel's `masks` (names of this object's mask fields) as one integer."""
        if masks not in self._codes:
            bits = [getattr(self, name).astype(np.int64) << i for i, name in enumerate(masks)]
            self._codes[masks] = sum(bits, np.zeros(len(self.flops), np.int64))
        return self._codes[masks]

    @classmethod
    def of(
        cls,
        programs: Sequence[Sequence[Kernel]],
        rates: Sequence[Rates],
        host_s: Sequence[float] | None = None,
        published: Sequence[bool] | None = None,
    ) -> Programs:
        """Each program's kernels at its own rates (`Rates.can_price` must hold for each). A
        dot or convolution in a type the rates have no peak for is priced at f32's
        where it is bf16 or f16 (no faster units for it); any other is a ValueError."""
        rows: list[tuple] = []
        for i, (ks, r) in enumerate(zip(programs, rates, strict=True)):
            if not r.can_price:
                raise ValueError("rates without an f32 peak or a bandwidth price nothing")
            peaks = dict(r.peak_flops_per_s)
            for short in DTYPES:
                peaks.setdefault(short, peaks["f32"])
            bandwidth = float(r.bytes_per_s)
            # Where no interconnect figure is published (a CPU's devices share its
            # memory; a TPU v2), a collective moves its bytes at the memory's rate.
            link = r.interconnect_bytes_per_s or bandwidth
            on_vector = r.vector_dtypes
            for k in ks:
                peak = 1.0
                if k.flops:
                    if k.dtype not in peaks:
                        raise ValueError(
                            f"kernel {k.name} computes in {k.dtype}: its rates give no peak "
                            f"for it (they have {sorted(peaks)})"
                        )
                    peak = peaks[k.dtype]
                rows.append(
                    (
                        k.flops,
                        peak,
                        k.bytes,
                        bandwidth,
                        k.collective_bytes / link if k.collective_bytes else 0.0,
                        k.count,
                        i,
                        k.kind == "elemental_conv",
                        bool(k.flops) and (k.dtype or "f32") in on_vector,
                        k.kind == "copy",
                        k.kind in LIBRARY_KINDS,
                        k.kind == "conv",
                        k.bytes <= CACHE_BYTES,
                        k.kind == "fusion" and k.dtype in HALF_FLOATS,
                    )
                )
        columns = list(zip(*rows, strict=True)) if rows else [()] * 14
        types = (float,) * 6 + (int,) + (bool,) * 7
        n = len(programs)
        return cls(
            *(np.array(c, t) for c, t in zip(columns, types, strict=True)),
            host_s=np.array(host_s if host_s is not None else [0.0] * n, float),
            published=np.array(published if published is not None else [False] * n, float),
        )


# --- The pricing ---------------------------------------------------------------------

PARTS = ("compute", "memory", "overhead", "collective")


def _layered(p: Programs, general: float, *layers: tuple[str, float | None]) -> np.ndarray:
    """Per kernel of `p`, `general`, replaced in turn by each layer's value where the
    kernel is under its mask (a field of `p`, by name; a layer whose value is None is the
    platform's having no such constant): looked up in a table of each combination of
    masks a kernel can be under."""
    table = np.full(1 << len(layers), general, float)
    for i, (_, value) in enumerate(layers):
        if value is not None:
            table[[code for code in range(len(table)) if code >> i & 1]] = value
    return table[p.codes(tuple(mask for mask, _ in layers))]


def kernel_seconds(p: Programs, c: Constants) -> dict[str, np.ndarray]:
    """One execution of each kernel, by part (PARTS): its FLOPs at its unit's efficiency,
    its bytes at the efficiency of its kind and size, its kind's fixed cost, its bytes
    over the interconnect. The one place a constant is applied."""
    # Each kind's own constant, where the platform has one, over the general one; a later
    # layer wins over an earlier one where a kernel is of both kinds.
    efficiency = _layered(
        p,
        c.compute_efficiency,
        ("vector", c.vector_efficiency),
        ("elemental", c.elemental_conv_efficiency),
    )
    memory = _layered(
        p,
        c.memory_efficiency,
        ("cached", c.cache_memory_efficiency),
        ("library", c.library_memory_efficiency),
        ("half", c.half_float_memory_efficiency),
    )
    overhead = _layered(
        p,
        c.kernel_overhead_s,
        ("library", c.library_overhead_s),
        ("convs", c.conv_overhead_s),
        ("copies", c.copy_overhead_s),
    )
    return {
        "compute": p.flops / (p.peak * efficiency),
        "memory": p.bytes / (p.bytes_per_s * memory),
        "overhead": overhead,
        "collective": p.collective_s,
    }


def _per_program(p: Programs, values: np.ndarray) -> np.ndarray:
    # bincount adds in kernel order, as a step's kernels run: the same sum a loop makes.
    return np.bincount(p.owner, values, p.size)


def seconds(p: Programs, c: Constants, parts: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Each program's predicted seconds: its kernels one after another, each the larger
    of its compute and memory times plus its fixed cost and interconnect time; plus the
    program's host side, and a published run's loop cost where it is one."""
    one = parts or kernel_seconds(p, c)
    per = p.counts * (
        np.maximum(one["compute"], one["memory"]) + one["overhead"] + one["collective"]
    )
    return _per_program(p, per) + p.host_s + (c.published_loop_step_s or 0.0) * p.published


def step_time(ks: Sequence[Kernel], rates: Rates, c: Constants) -> dict[str, Any]:
    """One run of the program `ks` at `rates`: `seconds`, and `compute_s`, `memory_s`,
    `overhead_s` and `collective_s`, each part summed over every kernel (so `seconds` is
    at most their sum); `kernels` launched; `bound_by` counts the kernels (times their
    counts) whose largest part is each."""
    p = Programs.of([ks], [rates])
    one = kernel_seconds(p, c)
    order = ("compute", "memory", "collective", "overhead")  # a tie goes to the first
    largest = (
        np.argmax(np.stack([one[part] for part in order]), axis=0)
        if len(p.counts)
        else np.zeros(0, int)
    )
    return {
        "seconds": float(seconds(p, c, one)[0]),
        **{f"{part}_s": float(_per_program(p, p.counts * one[part])[0]) for part in PARTS},
        "kernels": int(p.counts.sum()),
        "bound_by": {part: int(p.counts[largest == order.index(part)].sum()) for part in PARTS},
    }
