"""python -m experiments.fit_predictions RECORDS... [--write]: fit the per-kernel model's
constants (jaxcnn/prediction_constants.json) and say how far its predictions can be
trusted.

One procedure, for every platform alike:

1. Observations. Each pairs the kernels of one compiled step (a record's `kernels`, read
   from the optimized program by jaxcnn.kernels) with a step time measured on a real
   chip:
   - every measured record carrying kernels (this CPU's runs; a notebook's or a lent
     GPU's runs, merged in), priced at the vendor's rates where the chip table knows
     the chip, else at what was measured on it: the best matmul ceiling any run on its
     machine measured, and the run's own memory bandwidth;
   - every published reference (experiments/published_references.json) that a
     compile-only record matches (the same chip, model, precision and batch per chip),
     priced at the vendor's rates; the published images/s per chip gives the step time.
   References whose caveats make them no measure of the step alone (an input pipeline
   that dominates, another framework's model) are `held_out`: predicted and reported,
   never fitted.
2. Constants. Per platform (cpu, gpu, tpu) three numbers: the fraction of peak FLOP/s
   real dot and convolution kernels reach, the fraction of memory bandwidth kernels
   reach, and a fixed cost per launched kernel; and where the platform's compiler
   writes convolutions as plain loops (XLA:CPU, for layouts its library does not
   take), a fourth: the fraction of peak those reach. A CPU, whose observations are its
   own steps, also prices apart what XLA:CPU's trace shows running at other rates: a
   fixed cost per kind of kernel, cache-resident kernels' bandwidth, library calls'
   bytes and 16-bit float fusions' bytes. They minimize the sum of squared
   log(predicted / measured) over the platform's fitted observations (so 2x too slow
   and 2x too fast weigh alike). Where a platform has no fitted observation, or too
   few to pin a constant, it is held (`fixed_constants`) with its reason. A platform
   with fitted published observations may have a fifth: the per-step cost of the loop
   around a published run's step (LOOP), added to those observations only, and kept
   only where the platform's leave-one-out median error is smaller with it.
3. Error. Each fitted observation is predicted again by constants fitted without it
   (leave-one-out): the median and worst |predicted / measured - 1| of those are the
   platform's error band, stored beside its constants and shown with every prediction.

Without --write it prints the fit and changes nothing; with it, the constants file is
rewritten (atomically) under a new version. A platform with fewer observations than its
fit needs keeps its committed constants (one line says so): --write never resets a
platform fitted before to the priors, and writes nothing where no platform was fitted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from experiments import predictions, records, references
from experiments.cli_options import OneLineParser
from jaxcnn import kernels as kernels_lib
from jaxcnn import prediction, targets
from jaxcnn.errors import DataError

PARAMETERS = (
    "compute_efficiency",
    "memory_efficiency",
    "kernel_overhead_s",
    "elemental_conv_efficiency",
    prediction.VECTOR_EFFICIENCY,
    "copy_overhead_s",
    "library_overhead_s",
    "conv_overhead_s",
    "cache_memory_efficiency",
    "library_memory_efficiency",
    "half_float_memory_efficiency",
    "published_loop_step_s",
)
BOUNDS = {
    "compute_efficiency": (0.01, 1.0),
    "memory_efficiency": (0.01, 1.0),
    "kernel_overhead_s": (1e-8, 1e-3),
    "elemental_conv_efficiency": (1e-3, 1.0),
    prediction.VECTOR_EFFICIENCY: (0.01, 1.0),
    "copy_overhead_s": (1e-8, 1e-3),
    "library_overhead_s": (1e-8, 1e-3),
    "conv_overhead_s": (1e-8, 1e-3),
    # Relative to the measured DRAM bandwidth: a cache is never slower than DRAM, and
    # 50x leaves room for L2's rate on this CPU.
    "cache_memory_efficiency": (1.0, 50.0),
    "library_memory_efficiency": (0.01, 1.0),
    "half_float_memory_efficiency": (0.01, 1.0),
    "published_loop_step_s": (1e-6, 0.2),
}
# A published figure is a whole training run's images over its wall time: each of its
# steps also paid for what that framework's loop did around it (its input pipeline,
# dispatch across hosts, evaluation and compilation spread over the steps). That cost is
# fitted, per platform, as one time per step added to the predicted step of every
# published observation; it is kept only where it makes the platform's leave-one-out
# error smaller (LOOP). It is another framework's loop, never jaxcnn's: no device step
# and no loop step of jaxcnn's is charged it (jaxcnn's loop is measured: jaxcnn.host_loop).
# The TPU's is fitted on the Flax and Haiku ImageNet examples' whole runs
# (published_references.json), whose wall times include their tf.data pipeline (JPEG
# decoding and augmentation on the TPU host's CPUs), per-epoch evaluation, checkpoints
# and compilation: the input pipeline of another framework's example, at small batches
# per chip most of its step.
LOOP = "published_loop_step_s"
# A platform priced at rates its own runs measured (a CPU: one f32 matmul's ceiling, not a
# datasheet peak) may see its kernels pass that rate: the step's larger GEMMs run faster
# than the one matmul did. Its compute efficiency, relative to that ceiling, may pass 1.
MEASURED_RATE_BOUNDS = {"compute_efficiency": (0.01, 2.0)}
# Only XLA:CPU writes convolutions as loops (jaxcnn.kernels' `elemental_conv`): a
# platform none of whose observations runs one has no such constant (None: its
# convolutions are priced at compute_efficiency). Likewise a platform with no fitted
# published observation has no loop cost.
ONLY_WHERE_SEEN = {"elemental_conv_efficiency": "elemental_conv"}
# A GPU's fp32 pipes and its tensor cores are different units (jaxcnn.prediction.UNITS):
# where a platform's observations run dots or convolutions on both, each unit gets its
# own fraction of its own peak (compute_efficiency: the matrix units'), fitted per
# platform; a platform none of whose observations computes on vector units has none.
# XLA:CPU runs a step's kernels as three kinds of work with their own fixed costs: a copy
# (a memcpy), a generated loop (a fusion), a library call (a GEMM or convolution through
# Eigen, oneDNN or YNNPACK; jaxcnn.kernels.LIBRARY_KINDS). One constant for all of them
# prices the MLP's hundreds of tiny copies like its GEMMs. Only the CPU's observations
# are its own measured steps of small models, which can tell the three apart; elsewhere
# they are None (every kernel pays kernel_overhead_s).
PER_KIND_OVERHEADS = ("copy_overhead_s", "library_overhead_s", "conv_overhead_s")
PER_KIND_PLATFORMS = ("cpu",)
# Their lower ends: what XLA:CPU's own trace (jax.profiler, one event per thunk) measured
# a tiny copy and a tiny generated loop take on this machine (benchmarks/cpu_kernel_kinds.py:
# the 10th percentile of each kind: about 0.3 us, and 0.4-0.8 us): the steps alone cannot
# tell a copy's or a loop's cost from nothing, and a fit left free puts both at 10 ns.
# A CPU kernel whose bytes per execution fit in a core's L2 (kernels_lib.CACHE_BYTES) runs
# from cache, not at DRAM's rate: a second memory efficiency, CPU only (its observations
# are small models, hundreds of kernels of a few KB); elsewhere None.
CACHE_PLATFORMS = ("cpu",)
CACHE = "cache_memory_efficiency"
# XLA:CPU's own trace of a step (benchmarks/cpu_kernel_kinds.py) times each kernel: its
# generated loops move their bytes at about half the measured bandwidth, its library
# calls' bytes at a tenth of that (a GEMM packs its operands into blocks and reads them
# again), and its loops over a 16-bit float type at an eighth of the f32 loops' rate
# (each element converted on its own). One memory efficiency for all three made the fit
# trade one for another: a CPU's library calls and its 16-bit float fusions each get
# their own, fitted only where its observations have such kernels; elsewhere None.
OWN_RATE_KINDS = ("library_memory_efficiency", "half_float_memory_efficiency")
PER_KIND_BOUNDS = {"kernel_overhead_s": (3e-7, 1e-3), "copy_overhead_s": (1e-7, 1e-3)}
# The published per-kernel cost the accelerators' fixed cost is held at: what a small
# kernel costs launched one after another, its own run included (experiments/
# published_overheads.json).
LAUNCH_SOURCE = "https://cuda.juliagpu.org/dev/usage/graphs/"


def fixed_constants(
    loaded: Sequence[dict[str, Any]] = (),
) -> dict[str, dict[str, tuple[float, str]]]:
    """Per platform, the constants not fitted: (value, why). The published references are
    ResNet-50-sized programs whose kernels take milliseconds, so they cannot pin a fixed
    cost per kernel of microseconds (a fit trades it for the published runs' loop cost):
    - on a GPU it is the published cost of a CUDA launch;
    - a platform with no published figure whose compiler estimates its own programs'
      time (libtpu: `compiler_estimate_s` in the compile records among `loaded`) is held
      at the fixed cost per op that compiler's estimates imply (`compiler_op_cost`): a
      TPU does not launch its ops one by one from a host, so no CUDA figure applies;
    - the CPU's is fitted to this machine's measured steps, which are small models."""
    launch = next((o for o in references.load_overheads() if o.source_url == LAUNCH_SOURCE), None)
    if launch is None:
        raise DataError(
            f"{references.OVERHEADS_PATH.name} has no row from {LAUNCH_SOURCE}: the fit takes "
            "a GPU's per-kernel cost from it"
        )
    published = f"published: {launch.what} ({launch.source_url})"
    held = {"gpu": {"kernel_overhead_s": (launch.seconds, published)}}
    for platform, (seconds, programs) in compiler_op_cost(loaded).items():
        held.setdefault(platform, {})["kernel_overhead_s"] = (
            seconds,
            f"the compiler's own cost model: the median, over {programs} small programs "
            "compiled for it, of (its estimate of the program's time - the program's "
            "kernels at their full peak and bandwidth) / its ops; no published figure",
        )
    return held


def compiler_op_cost(loaded: Sequence[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    """Per platform whose compiler estimates a compiled program's time (a compile record's
    `compiler_estimate_s`, from the compiler's cost analysis), the fixed cost per op that
    estimate implies for the small programs (jaxcnn.prediction.regime) compiled for it:
    the median of (estimate - the kernels at full peak and bandwidth, no fixed cost) /
    kernels, never below 0; and over how many programs. That compiler also counts what
    the kernel model does not (a TPU pads small arrays to its tiles), which lands here."""
    unit = {"compute_efficiency": 1, "memory_efficiency": 1, "kernel_overhead_s": 0}
    implied: dict[str, list[float]] = {}
    for r in loaded:
        estimate = (r.get("prediction_bound") or {}).get("compiler_estimate_s")
        if not (r.get("compiled_not_run") and r.get("kernels") and estimate):
            continue
        ks = kernels_lib.from_summary(r["kernels"])
        steps = (r.get("kernels_source") or {}).get("steps", 1)
        per_device = r["workload"]["batch_size"] // max(1, r["device"].get("count") or 1)
        costs = prediction.costs(predictions.rates_of(r), unit)
        if costs is None or prediction.regime(ks, per_device * steps) != "small":
            continue
        timed = kernels_lib.step_time(ks, costs)
        extra = (estimate * steps - timed["seconds"]) / max(1, timed["kernels"])
        implied.setdefault(r["device"]["platform"], []).append(max(0.0, extra))
    return {p: (statistics.median(xs), len(xs)) for p, xs in sorted(implied.items())}


# Where a platform has no observation at all: a starting point, said to be one.
TOO_FEW = "assumed: too few observations to fit"
PRIOR = {
    "compute_efficiency": 0.5,
    "memory_efficiency": 0.7,
    "kernel_overhead_s": 5e-6,
    "elemental_conv_efficiency": None,
    prediction.VECTOR_EFFICIENCY: None,
    "copy_overhead_s": None,
    "library_overhead_s": None,
    "conv_overhead_s": None,
    "cache_memory_efficiency": None,
    "library_memory_efficiency": None,
    "half_float_memory_efficiency": None,
    "published_loop_step_s": None,
}


@dataclasses.dataclass(frozen=True)
class Observation:
    label: str  # what it is, in a table
    platform: str  # cpu | gpu | tpu
    kernels: tuple[kernels_lib.Kernel, ...]
    rates: dict[str, Any]
    batch_per_device: int
    measured_s: float  # one run of the kernels' program (one step, or a loop of several)
    source: str  # "record <run_id>" | "reference <id>"
    held_out: str | None = None  # why it is predicted but not fitted
    published: bool = False  # a published run's rate: its loop's cost per step included
    # What the error splits group by: the chip it ran on, and the compiled program it
    # times (observations of one program are twins: a split holds them out together).
    # Empty: the observation is its own group.
    chip: str = ""
    program: str = ""
    steps: int = 1  # steps one run of the kernels' program takes
    # The host's side of one run of the program (jaxcnn.prediction.host_side x steps):
    # known, not fitted, and part of the step every split's error is measured on.
    host_s: float = 0.0

    @property
    def regime(self) -> str:
        return prediction.regime(list(self.kernels), self.batch_per_device * self.steps)


# --- Observations ----------------------------------------------------------------------


def measured_observations(
    loaded: Sequence[dict[str, Any]], host: dict[str, Any] | None = None
) -> list[Observation]:
    """The measured records (status ok, a step time) that carry their step's kernels; a
    CPU's priced at the best matmul ceiling its machine's runs among `loaded` measured
    (predictions.with_machine_ceilings), each with its host side (predictions.host_of,
    the dispatch `host` gives where the record measured none)."""
    found = []
    for r in predictions.with_machine_ceilings(loaded):
        if r.get("compiled_not_run") or r.get("status") != "ok" or not r.get("kernels"):
            continue
        step = (r.get("step_time_s") or {}).get("median")
        if not step:
            continue
        platform = r["device"]["platform"]
        rates = predictions.rates_of(r)
        w = r["workload"]
        steps = (r.get("kernels_source") or {}).get("steps", 1)
        label = _workload_label(r)
        side = predictions.host_of(r, {"host": host or {}})
        found.append(
            Observation(
                label=label,
                platform=platform,
                kernels=tuple(kernels_lib.from_summary(r["kernels"])),
                rates=rates,
                batch_per_device=w["batch_size"] // max(1, r["device"].get("count") or 1),
                measured_s=step * steps,
                source=f"record {r['run_id']}",
                chip=predictions.chip_of(r),
                program=label,
                steps=steps,
                host_s=(side or {}).get("host_s", 0.0) * steps,
            )
        )
    return found


def _workload_label(r: dict[str, Any]) -> str:
    w = r["workload"]
    width = (w.get("model_overrides") or {}).get("width")
    model = w["model"] + (f" n={width}" if width else "")
    formulation = (r.get("formulation") or {}).get("name") or w.get("formulation")
    return (
        f"{r['device'].get('kind') or r['device']['platform']}: {model}, batch "
        f"{w['batch_size']}, {w['precision']}, {formulation}, {r.get('loop') or w['loop']} loop"
    )


def reference_observations(
    refs: Sequence[references.Reference],
    loaded: Sequence[dict[str, Any]],
    host: dict[str, Any] | None = None,
) -> tuple[list[Observation], list[tuple[references.Reference, str]]]:
    """(observations of the references a compile record matches, [(reference, why it has
    none)]), each with the host side of jaxcnn's step on its chip (`host`'s dispatch)."""
    found, missing = [], []
    for ref in refs:
        why = predictions.unpredictable(ref)
        if why is not None:
            missing.append((ref, why))
            continue
        r = predictions.match_reference(ref, loaded)
        if r is None:
            missing.append(
                (ref, "no compile record with kernels: " + predictions.compile_command(ref))
            )
            continue
        target = targets.get(r["target"]["name"])
        device = predictions.device_of(r)
        per_device = ref.batch_per_chip // target.devices_per_chip
        seconds_per_step = ref.batch_per_chip / ref.images_per_s_per_chip
        found.append(
            Observation(
                label=f"{ref.chip}: {ref.model}, batch {ref.batch_per_chip}/chip, "
                f"{ref.precision} ({ref.framework})",
                platform=target.platform,
                kernels=tuple(kernels_lib.from_summary(r["kernels"])),
                rates=prediction.vendor_rates(device, target.devices_per_chip),
                batch_per_device=per_device,
                measured_s=seconds_per_step,
                source=f"reference {ref.id}",
                held_out=ref.held_out,
                published=True,
                chip=ref.chip,
                program=f"record {r['run_id']}",
                host_s=(predictions.host_of(r, {"host": host or {}}) or {}).get("host_s", 0.0),
            )
        )
    return found, missing


# --- The model, vectorized over each observation's kernels -----------------------------


@dataclasses.dataclass(frozen=True)
class _Terms:
    """One observation's kernels as arrays at efficiency 1: seconds of arithmetic and of
    memory traffic per kernel, launches, and the collectives' seconds."""

    compute: np.ndarray
    memory: np.ndarray
    counts: np.ndarray
    collective_s: float
    elemental: np.ndarray  # which kernels are elemental convolutions
    published: bool
    host_s: float
    vector: np.ndarray  # which kernels compute on vector units (a GPU's fp32 pipes)
    copies: np.ndarray  # which kernels are copies
    library: np.ndarray  # which kernels are library calls (kernels_lib.LIBRARY_KINDS)
    convs: np.ndarray  # which kernels are library convolutions
    cached: np.ndarray  # which kernels' bytes per execution fit in cache
    half: np.ndarray  # which kernels are fusions of a 16-bit float type


def _terms(obs: Observation) -> _Terms:
    unit = prediction.costs(
        obs.rates, {"compute_efficiency": 1, "memory_efficiency": 1, "kernel_overhead_s": 0}
    )
    if unit is None:
        raise ValueError(f"{obs.label}: its chip has no f32 peak or no bandwidth")
    compute, memory, counts, collective, elemental, vector = [], [], [], 0.0, [], []
    on_vector = prediction.vector_dtypes(obs.rates)
    for k in obs.kernels:
        elemental.append(k.kind == "elemental_conv")
        vector.append(bool(k.flops) and (k.dtype or "f32") in on_vector)
        peak = unit.peak_flops_per_s.get(k.dtype or "f32", unit.peak_flops_per_s["f32"])
        compute.append(k.flops / peak)
        memory.append(k.bytes / unit.bytes_per_s)
        counts.append(k.count)
        if k.collective_bytes and unit.interconnect_bytes_per_s:
            collective += k.count * k.collective_bytes / unit.interconnect_bytes_per_s
    return _Terms(
        np.array(compute),
        np.array(memory),
        np.array(counts, float),
        collective,
        np.array(elemental, bool),
        obs.published,
        obs.host_s,
        np.array(vector, bool),
        np.array([k.kind == "copy" for k in obs.kernels], bool),
        np.array([k.kind in kernels_lib.LIBRARY_KINDS for k in obs.kernels], bool),
        np.array([k.kind == "conv" for k in obs.kernels], bool),
        np.array([k.bytes <= kernels_lib.CACHE_BYTES for k in obs.kernels], bool),
        np.array([_half_fusion(k) for k in obs.kernels], bool),
    )


def _half_fusion(k: kernels_lib.Kernel) -> bool:
    return k.kind == "fusion" and k.dtype in kernels_lib.HALF_FLOATS


@dataclasses.dataclass(frozen=True)
class _Stack:
    """Many observations' kernels in one set of arrays (each kernel's observation in
    `owner`), so one evaluation of the model prices them all at once."""

    compute: np.ndarray
    memory: np.ndarray
    counts: np.ndarray
    owner: np.ndarray
    collective_s: np.ndarray  # per observation
    elemental: np.ndarray
    published: np.ndarray  # per observation: 1 where a published run's loop is included
    host_s: np.ndarray  # per observation: its host side, known
    vector: np.ndarray  # per kernel: computes on vector units
    copies: np.ndarray
    library: np.ndarray
    convs: np.ndarray
    cached: np.ndarray
    half: np.ndarray

    @classmethod
    def of(cls, terms: Sequence[_Terms]) -> _Stack:
        owner = np.concatenate([np.full(len(t.counts), i) for i, t in enumerate(terms)])
        return cls(
            np.concatenate([t.compute for t in terms]),
            np.concatenate([t.memory for t in terms]),
            np.concatenate([t.counts for t in terms]),
            owner.astype(int),
            np.array([t.collective_s for t in terms]),
            np.concatenate([t.elemental for t in terms]),
            np.array([float(t.published) for t in terms]),
            np.array([t.host_s for t in terms]),
            np.concatenate([t.vector for t in terms]),
            np.concatenate([t.copies for t in terms]),
            np.concatenate([t.library for t in terms]),
            np.concatenate([t.convs for t in terms]),
            np.concatenate([t.cached for t in terms]),
            np.concatenate([t.half for t in terms]),
        )

    def seconds(
        self,
        ce: float,
        me: float,
        overhead: float,
        ece: float | None,
        vce: float | None,
        copy: float | None,
        library: float | None,
        conv: float | None,
        cache: float | None,
        library_memory: float | None,
        half_memory: float | None,
        loop: float | None,
    ) -> np.ndarray:
        efficiency = np.where(self.vector, ce if vce is None else vce, ce)
        efficiency = np.where(self.elemental, efficiency if ece is None else ece, efficiency)
        fixed = np.where(self.copies, overhead if copy is None else copy, overhead)
        fixed = np.where(self.library, overhead if library is None else library, fixed)
        if conv is not None:
            fixed = np.where(self.convs, conv, fixed)
        memory = np.where(self.cached, me if cache is None else cache, me)
        if library_memory is not None:  # kernels_lib.KernelCosts.memory_efficiency_of
            memory = np.where(self.library, library_memory, memory)
        if half_memory is not None:
            memory = np.where(self.half, half_memory, memory)
        per = (np.maximum(self.compute / efficiency, self.memory / memory) + fixed) * self.counts
        steps = np.bincount(self.owner, per, len(self.collective_s)) + self.collective_s
        return steps + self.host_s + (loop or 0.0) * self.published


def _fit(
    stack: _Stack,
    measured: np.ndarray,
    fixed: dict[str, float | None],
    weights: np.ndarray | None = None,
    start: dict[str, float] | None = None,
    limits: dict[str, tuple[float, float]] | None = None,
) -> dict[str, float]:
    """The constants minimizing the squared log error over the stacked observations
    (`weights` 0 leaves one out), the `fixed` ones held; from `start`, else from the
    best point of a coarse grid over the bounds (the loss is not convex: a max per
    kernel)."""
    from scipy.optimize import minimize

    free = [p for p in PARAMETERS if p not in fixed]
    logs = np.log(measured)
    weights = np.ones_like(logs) if weights is None else weights

    def constants(x: Sequence[float]) -> dict[str, float]:
        values = dict(fixed)
        values.update({p: float(math.exp(v)) for p, v in zip(free, x, strict=True)})
        return values

    def loss(x: Sequence[float]) -> float:
        c = constants(x)
        predicted = stack.seconds(*(c[p] for p in PARAMETERS))
        return float(np.sum(weights * (np.log(predicted) - logs) ** 2))

    if not free:
        return dict(fixed)
    if start is None:
        searched = [p for p in free if p not in _GRID_TIED and p not in _GRID_START]
        grid = []
        for point in itertools.product(*(_GRID[p] for p in searched)):
            at = dict(zip(searched, point, strict=True))
            grid.append([at[p] if p in at else _tied_start(p, at, fixed) for p in free])
        x0 = np.log(min(grid, key=lambda g: loss(np.log(g))))
    else:
        x0 = np.log([start[p] for p in free])
    bounds = [tuple(math.log(b) for b in (limits or BOUNDS)[p]) for p in free]
    return constants(minimize(loss, x0, method="L-BFGS-B", bounds=bounds).x)


# The coarse grid a fit starts from, per constant, within BOUNDS.
_GRID = {
    "compute_efficiency": (0.03, 0.1, 0.2, 0.4, 0.7, 1.0),
    "memory_efficiency": (0.03, 0.1, 0.2, 0.4, 0.7, 1.0),
    "kernel_overhead_s": (1e-7, 1e-6, 3e-6, 1e-5, 3e-5, 1e-4),
    "elemental_conv_efficiency": (0.003, 0.01, 0.03, 0.1, 0.3, 1.0),
    prediction.VECTOR_EFFICIENCY: (0.03, 0.1, 0.2, 0.4, 0.7, 1.0),
    "published_loop_step_s": (1e-4, 1e-3, 1e-2, 5e-2),
}
# Constants the grid does not search: each starts where the one named is (a kind's fixed
# cost starts at the common one, from which the descent separates it); a grid over them
# too would multiply its points by 36.
_GRID_TIED = {
    **dict.fromkeys(PER_KIND_OVERHEADS, "kernel_overhead_s"),
    **dict.fromkeys(OWN_RATE_KINDS, "memory_efficiency"),
}
# The cache's efficiency starts at one point of its range (above DRAM's), from which the
# descent moves it; a grid over it too would triple the grid.
_GRID_START = {CACHE: 4.0}


def _tied_start(name: str, at: dict[str, float], fixed: dict[str, float | None]) -> float:
    """Where a constant the grid does not search starts: at its tied constant's grid
    point, or held value, or prior."""
    if name in _GRID_START:
        return _GRID_START[name]
    tie = _GRID_TIED[name]
    return at.get(tie) or fixed.get(tie) or PRIOR[tie]


def _fit_and_leave_one_out(
    stack: _Stack,
    measured: np.ndarray,
    fixed: dict[str, float | None],
    limits: dict[str, tuple[float, float]],
) -> tuple[dict[str, float], list[float]]:
    """The constants fitted to every observation, and each observation's error when
    predicted by constants fitted without it."""
    constants = _fit(stack, measured, fixed, limits=limits)
    loo = []
    for i in range(len(measured)):
        weights = np.ones(len(measured))
        weights[i] = 0.0
        c = _fit(stack, measured, fixed, weights, start=constants, limits=limits)
        predicted = stack.seconds(*(c[p] for p in PARAMETERS))[i]
        loo.append(_error(predicted, measured[i]))
    return constants, loo


def _error(predicted: float, measured: float) -> float:
    return abs(predicted / measured - 1)


# The claim a platform's error band backs, and the split that tests it. A GPU or TPU
# prediction is for a chip the data may not hold: each chip's observations are predicted
# by constants fitted without any of them. This CPU's predictions are for programs not
# measured on it: each program's observations (its twins: the same program measured
# again) are predicted by constants fitted without them.
SPLITS = {"cpu": "program", "gpu": "chip", "tpu": "chip"}


def _group(obs: Observation, split: str) -> str:
    return (obs.chip if split == "chip" else obs.program) or obs.label


def errors_of(steps: dict[int, float], fitted: Sequence[Observation]) -> list[tuple[int, float]]:
    """`held_out_steps`'s steps as [(index in fitted, |predicted / measured - 1|)]."""
    return [(i, _error(step, fitted[i].measured_s)) for i, step in steps.items()]


def held_out_steps(
    stack: _Stack,
    fitted: Sequence[Observation],
    fixed: dict[str, float | None],
    limits: dict[str, tuple[float, float]],
    split: str,
) -> tuple[dict[int, float], list[str]]:
    """Out-of-sample steps as shown (a published run's loop cost left out, as the
    report's predicted steps leave it out): for each group of `split`, its observations
    predicted by constants fitted afresh (from the coarse grid, not from the fit that saw
    them) without the group. ({index in fitted: predicted step}, the groups that could
    not be tested: too few observations left to fit, or the group computes on a unit with
    its own efficiency that no other group computes on, so nothing left tells that
    efficiency.)"""
    measured = np.array([o.measured_s for o in fitted])
    groups = list(dict.fromkeys(_group(o, split) for o in fitted))
    free = len(PARAMETERS) - len(fixed)
    # Per unit with its own efficiency, which observations compute on it: only the other
    # groups' kernels on a unit can tell its efficiency (none left: not testable).
    vector = stack.vector if prediction.VECTOR_EFFICIENCY not in fixed else stack.vector & False
    on_unit = [
        np.bincount(stack.owner, kernels, len(fitted)) > 0
        for kernels in (vector, (stack.compute > 0) & ~vector)
    ]
    steps, untested = {}, []
    for group in groups:
        weights = np.array([0.0 if _group(o, split) == group else 1.0 for o in fitted])
        unseen_unit = any(on[weights == 0].any() and not on[weights > 0].any() for on in on_unit)
        if weights.sum() <= free or unseen_unit:
            untested.append(group)
            continue
        c = _fit(stack, measured, fixed, weights, limits=limits)
        step = stack.seconds(*(c[p] for p in PARAMETERS[:-1]), None)
        steps.update({int(i): float(step[i]) for i in np.flatnonzero(weights == 0)})
    return steps, untested


def _band(errors: Sequence[tuple[int, float]], fitted: Sequence[Observation]) -> dict | None:
    """{"median", "worst", "worst_label", "observations"} of `errors`, or None."""
    if not errors:
        return None
    worst_index, worst = max(errors, key=lambda e: e[1])
    return {
        "median": statistics.median(e for _, e in errors),
        "worst": worst,
        "worst_label": fitted[worst_index].label,
        "observations": len(errors),
    }


HELD_OUT_STEPS = predictions.HELD_OUT_STEPS


def _split_block(
    stack: _Stack,
    fitted: Sequence[Observation],
    fixed: dict[str, float | None],
    limits: dict[str, tuple[float, float]],
    split: str,
) -> dict[str, Any]:
    """One split's errors: over every fitted observation, per regime, and the groups it
    could not hold out; under HELD_OUT_STEPS, each held-out observation's predicted step
    by index in `fitted` (fit_platform moves them to the observations' rows)."""
    steps, untested = held_out_steps(stack, fitted, fixed, limits, split)
    errors = errors_of(steps, fitted)
    overall = _band(errors, fitted)
    if overall is None:
        return {
            "untested_groups": untested,
            "regimes": dict.fromkeys(prediction.REGIMES),
            HELD_OUT_STEPS: steps,
        }
    return {
        **overall,
        HELD_OUT_STEPS: steps,
        "untested_groups": untested,
        "regimes": {
            name: _band([e for e in errors if fitted[e[0]].regime == name], fitted)
            for name in prediction.REGIMES
        },
    }


def error_block(
    stack: _Stack,
    fitted: Sequence[Observation],
    fixed: dict[str, float | None],
    limits: dict[str, tuple[float, float]],
    platform: str,
) -> dict[str, Any] | None:
    """The platform's error bands: `held_out_steps` by each split, over all its fitted
    observations and per regime (None for a regime it has none of: no prediction of that
    regime is shown with a band). A prediction for a chip in `chips` is shown with the
    program split's band, any other with the chip split's (jaxcnn.prediction.error_band).
    The top-level median, worst and observations are the platform's headline split's
    (SPLITS)."""
    splits = {
        split: _split_block(stack, fitted, fixed, limits, split)
        for split in predictions.SPLIT_WORDS
    }
    headline = SPLITS.get(platform, "program")
    if not splits[headline].get("observations"):
        return None
    return {
        **{k: splits[headline][k] for k in ("median", "worst", "worst_label", "observations")},
        "split": headline,
        # The quantity every band here was measured on: the predicted device step (plus
        # a step called alone's known round trip and copy), never jaxcnn's loop step.
        "quantity": prediction.DEVICE_STEP,
        "basis": "each held-out group's observations predicted by constants refitted from "
        "scratch without it: |predicted step / measured - 1|, the predicted step the "
        "device step (its kernels, plus the round trip and batch copy of a step called "
        "alone, known, not fitted), a published run's own loop cost left out, as the "
        "device step is shown; measured against steps timed alone here and published "
        "whole-run figures, whose own loop is in them",
        "chips": sorted({o.chip for o in fitted if o.chip}),
        "splits": splits,
    }


def choose_units(
    stack: _Stack,
    fitted: Sequence[Observation],
    fixed: dict[str, float | None],
    limits: dict[str, tuple[float, float]],
    platform: str,
) -> dict[str, Any]:
    """Whether the vector units' own efficiency (jaxcnn.prediction.UNITS) earns its place:
    the platform's headline split (SPLITS) measured with it and with one efficiency for
    every unit, the published runs' loop left out of both. Kept only where it tests every
    group the shared efficiency tests (a chip whose units no other chip has cannot be
    predicted by it) and its median error is smaller: as few constants as the data
    supports."""
    split = SPLITS.get(platform, "program")
    base = {**fixed, LOOP: None}
    outcome = {}
    for name, held in (("with", base), ("without", {**base, prediction.VECTOR_EFFICIENCY: None})):
        steps, untested = held_out_steps(stack, fitted, held, limits, split)
        errors = errors_of(steps, fitted)
        outcome[name] = {
            "median": statistics.median(e for _, e in errors) if errors else None,
            "observations": len(errors),
            "untested_groups": untested,
        }
    with_, without = outcome["with"], outcome["without"]
    kept = bool(
        with_["median"] is not None
        and without["median"] is not None
        and set(with_["untested_groups"]) <= set(without["untested_groups"])
        and with_["median"] < without["median"]
    )
    return {"kept": kept, "split": split, **outcome}


def fit_platform(
    platform: str,
    observations: Sequence[Observation],
    held: dict[str, tuple[float, str]] | None = None,
) -> dict[str, Any]:
    """One platform's constants (those in `held` held at their value), its fitted and
    held-out observations, and the error band: leave-one-out over the fitted ones. The
    published runs' loop cost (LOOP) is fitted where published observations are, and
    kept only where its leave-one-out median error is smaller than without it."""
    held = held or {}
    fitted = [o for o in observations if o.held_out is None]
    fixed: dict[str, float | None] = {name: value for name, (value, _) in held.items()}
    limits = dict(BOUNDS)
    if fitted and all(o.rates.get("source") == "measured" for o in fitted):
        limits.update(MEASURED_RATE_BOUNDS)
    for name, kind in ONLY_WHERE_SEEN.items():
        if not any(k.kind == kind for o in fitted for k in o.kernels):
            fixed.setdefault(name, None)
    if not any(_terms(o).vector.any() for o in fitted):
        fixed.setdefault(prediction.VECTOR_EFFICIENCY, None)
    if platform not in PER_KIND_PLATFORMS:
        for name in PER_KIND_OVERHEADS:
            fixed.setdefault(name, None)
    else:
        limits.update(PER_KIND_BOUNDS)
        kinds = {k.kind for o in fitted for k in o.kernels}
        if "copy" not in kinds:  # nothing to fit it to: not made up
            fixed.setdefault("copy_overhead_s", None)
        if not kinds & set(kernels_lib.LIBRARY_KINDS):
            fixed.setdefault("library_overhead_s", None)
        if "conv" not in kinds:
            fixed.setdefault("conv_overhead_s", None)
    seen = {
        "library_memory_efficiency": lambda k: k.kind in kernels_lib.LIBRARY_KINDS,
        "half_float_memory_efficiency": _half_fusion,
    }
    for name, has in seen.items():
        if platform not in PER_KIND_PLATFORMS or not any(has(k) for o in fitted for k in o.kernels):
            fixed.setdefault(name, None)
    if platform not in CACHE_PLATFORMS or not any(
        k.bytes <= kernels_lib.CACHE_BYTES for o in fitted for k in o.kernels
    ):
        fixed.setdefault(CACHE, None)
    if not any(o.published for o in fitted) or len(fitted) <= len(PARAMETERS) - len(fixed):
        fixed.setdefault(LOOP, None)
    loop_choice = unit_choice = None
    if len(fitted) <= len(PARAMETERS) - len(fixed):
        constants = {**PRIOR, **fixed}
        basis = TOO_FEW
        loo: list[float] = []
        stack = None
    else:
        stack = _Stack.of([_terms(o) for o in fitted])
        measured = np.array([o.measured_s for o in fitted])
        if prediction.VECTOR_EFFICIENCY not in fixed:
            unit_choice = choose_units(stack, fitted, fixed, limits, platform)
            if not unit_choice["kept"]:
                fixed[prediction.VECTOR_EFFICIENCY] = None
        constants, loo = _fit_and_leave_one_out(stack, measured, fixed, limits)
        basis = "fitted"
        if LOOP not in fixed:
            fixed_without = {**fixed, LOOP: None}
            without, loo_without = _fit_and_leave_one_out(stack, measured, fixed_without, limits)
            kept = bool(statistics.median(loo) < statistics.median(loo_without))
            loop_choice = {
                "kept": kept,
                "fitted_s": constants[LOOP],
                "leave_one_out_median_with": statistics.median(loo),
                "leave_one_out_median_without": statistics.median(loo_without),
            }
            if not kept:
                constants, loo, fixed = without, loo_without, fixed_without
    error = error_block(stack, fitted, fixed, limits, platform) if loo else None
    # Each fitted observation's step predicted by the constants each split fitted without
    # its group (None: its group could not be held out), beside the in-sample one.
    held_out = {
        split: block.pop(HELD_OUT_STEPS, {})
        for split, block in ((error or {}).get("splits") or {}).items()
    }
    index = {id(o): i for i, o in enumerate(fitted)}
    every = _Stack.of([_terms(o) for o in observations]) if observations else None
    predicted = every.seconds(*(constants[p] for p in PARAMETERS)) if every else []
    rows = [
        {
            "label": o.label,
            "source": o.source,
            "measured_s": o.measured_s,
            "predicted_s": float(seconds),
            "held_out": o.held_out,
            **(
                {HELD_OUT_STEPS: {s: steps.get(index[id(o)]) for s, steps in held_out.items()}}
                if id(o) in index and held_out
                else {}
            ),
        }
        for o, seconds in zip(observations, predicted, strict=True)
    ]
    return {
        **{p: constants[p] for p in PARAMETERS},
        "basis": basis,
        # The range each fitted constant was searched in: one at an end of it is where
        # the data would take it further.
        "bounds": {p: list(limits[p]) for p in PARAMETERS if p not in fixed and loo},
        "fixed": {n: {"value": v, "why": why} for n, (v, why) in held.items()},
        # Whether the published runs' loop cost was fitted, and the errors that decided
        # (None: the platform has no fitted published observation).
        "loop_choice": loop_choice,
        # Whether its vector units got their own efficiency, and the errors that decided
        # (None: no fitted observation computes on both kinds of unit).
        "unit_choice": unit_choice,
        "error": error,
        "observations": rows,
    }


def fit(loaded: Sequence[dict[str, Any]], refs: Sequence[references.Reference]) -> dict[str, Any]:
    """The constants file's content: every platform's fit, and the references no compile
    record matches yet (with the command that would make one)."""
    host = host_constants(loaded)
    measured = measured_observations(loaded, host)
    matched, missing = reference_observations(refs, loaded, host)
    by_platform: dict[str, list[Observation]] = {"cpu": [], "gpu": [], "tpu": []}
    for o in measured + matched:
        by_platform.setdefault(o.platform, []).append(o)
    fixed = fixed_constants(loaded)
    families = {p: fit_platform(p, obs, fixed.get(p)) for p, obs in sorted(by_platform.items())}
    return {
        "version": _version(families),
        "procedure": "experiments/fit_predictions.py",
        "families": families,
        "host": host,
        "unmatched_references": [{"id": r.id, "why": why} for r, why in missing],
    }


def _version(families: dict[str, dict[str, Any]]) -> str:
    """Today's date and a digest of every platform's constants."""
    digest = hashlib.sha256(
        json.dumps(
            {p: {k: f[k] for k in PARAMETERS} for p, f in families.items()}, sort_keys=True
        ).encode()
    ).hexdigest()[:8]
    return f"{records.utc_now()[:10]}.{digest}"


def keep_committed(
    result: dict[str, Any], committed: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """`result` with each platform that had too few observations to fit (TOO_FEW) given
    its `committed` constants instead of the priors, where it has some; and one line for
    each platform kept so. What --write writes: a folder of few records never resets a
    platform fitted before."""
    families = dict(result["families"])
    said = []
    for platform, family in result["families"].items():
        before = (committed.get("families") or {}).get(platform)
        if family["basis"] != TOO_FEW or not isinstance(before, dict):
            continue
        families[platform] = before
        count = sum(1 for o in family["observations"] if o["held_out"] is None)
        said.append(
            f"{platform}: {count} observation(s) to fit, fewer than its constants need: "
            f"its committed constants kept ({committed.get('version')})"
        )
    return {**result, "families": families, "version": _version(families)}, said


def host_constants(loaded: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The host's side of a step as this project's runs measured it, given to every step
    predicted for a chip not at hand, said to be measured here, on this JAX's CPU
    runtime: per placement, one call's round trip (records' `dispatch_s`: a call of the
    placed step doing no work), the median of the records' medians and how many; per
    model and global batch (prediction.host_loop_key), jaxcnn's step loop on the host
    (`loop`: the newest measured record's `host_loop`, its run id beside it)."""
    found: dict[str, list[float]] = {}
    loops: dict[str, dict[str, Any]] = {}
    for r in sorted(loaded, key=lambda r: r["env"]["utc_time"]):
        if r.get("compiled_not_run"):
            continue
        median = (r.get("dispatch_s") or {}).get("median")
        if median:
            found.setdefault(r["workload"].get("strategy") or "single", []).append(median)
        if r.get("host_loop") and r["device"]["platform"] == "cpu" and r.get("status") == "ok":
            loops[prediction.host_loop_key(r["workload"])] = {
                **r["host_loop"],
                "record": r["run_id"],
            }
    return {
        "dispatch_s": {s: statistics.median(xs) for s, xs in sorted(found.items())},
        "records": {s: len(xs) for s, xs in sorted(found.items())},
        "loop": dict(sorted(loops.items())),
        "basis": "measured here: records' dispatch_s (a call of the placed step doing no "
        "work, on the step's arguments), the median per placement, and the newest "
        "record's host_loop (jaxcnn's step loop, its host parts timed by its own code) "
        "per model and batch, on the JAX and CPU that ran them; a GPU's or TPU's "
        "runtime may add its own",
    }


# --- The command -------------------------------------------------------------------------


def summary(result: dict[str, Any]) -> str:
    lines = [f"constants version {result['version']}"]
    for platform, f in result["families"].items():
        band = "; ".join(
            predictions.band_words(f["error"], split, predictions.observed_as(f))
            for split in predictions.SPLIT_WORDS
        )
        elemental = f.get("elemental_conv_efficiency")
        loops = "" if elemental is None else f", convolutions as loops {elemental:.3f} of peak"
        loop = predictions.loop_words(f)
        loops += f", published runs' loop {loop}" if loop else ""
        units = predictions.unit_words(f)
        loops += f", vector units' own efficiency {units}" if units else ""
        kinds = [
            f"{name.removesuffix('_overhead_s')} {f[name] * 1e6:.2f} us"
            for name in PER_KIND_OVERHEADS
            if f.get(name) is not None
        ]
        loops += f" (per kind: {', '.join(kinds)})" if kinds else ""
        cache = f.get(CACHE)
        if cache is not None:
            loops += (
                f", kernels of at most {kernels_lib.CACHE_BYTES // 1024} KiB at {cache:.2f} x "
                "the measured bandwidth"
            )
        for name, label in zip(
            OWN_RATE_KINDS, ("library calls", "16-bit float fusions"), strict=True
        ):
            if f.get(name) is not None:
                loops += f", {label}' bytes at {f[name]:.3f} of it"
        lines.append(
            f"{platform}: compute efficiency {f['compute_efficiency']:.3f}, memory efficiency "
            f"{f['memory_efficiency']:.3f}, {f['kernel_overhead_s'] * 1e6:.2f} us per kernel"
            f"{loops} ({f['basis']}); {band}"
        )
    for m in result["unmatched_references"]:
        lines.append(f"unmatched reference {m['id']}: {m['why']}")
    return "\n".join(lines)


def compile_missing(loaded: Sequence[dict[str, Any]], path: Path) -> int:
    """Compile, one after another in a child process each, the program of every
    reference no compile record matches yet, appending each record to `path` (the
    compile-only runner's rules: a crash is an `error` record, a rerun skips what is
    recorded); how many were compiled."""
    from experiments import compile_only, run_targets
    from experiments.isolated import InChild

    wanted = []
    for ref in references.load():
        workload = predictions.reference_workload(ref)
        if workload is None or predictions.unpredictable(ref) is not None:
            continue
        if predictions.match_reference(ref, loaded) is None and workload not in wanted:
            wanted.append(workload)
    path.parent.mkdir(parents=True, exist_ok=True)
    with InChild(run_targets.COMPILER) as in_child:
        run = compile_only.recorded_runner(
            path, in_child, on_record=lambda r: print(run_targets.describe(r), flush=True)
        )
        for i, workload in enumerate(wanted, 1):
            print(
                f"[{i}/{len(wanted)}] {workload.model} on {workload.target}, batch "
                f"{workload.batch_size}, {workload.precision}",
                file=sys.stderr,
                flush=True,
            )
            run(workload)
    return len(wanted)


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.fit_predictions", description=__doc__)
    parser.add_argument("paths", nargs="+", metavar="RECORDS", help="records files or folders")
    parser.add_argument(
        "--write", action="store_true", help=f"rewrite {prediction.CONSTANTS_FILE.name}"
    )
    parser.add_argument(
        "--compile-missing",
        metavar="DIR",
        help="first compile the programs of the references no compile record matches "
        "(each a compile-only record appended to DIR/records.jsonl; minutes each)",
    )
    args = parser.parse_args(argv)
    missing = [path for path in args.paths if not Path(path).exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    if args.write:  # before any fit or compile: an immutable file, a read-only folder
        try:
            records.check_writable(prediction.CONSTANTS_FILE)
        except OSError as e:
            parser.error(
                f"--write cannot replace {prediction.CONSTANTS_FILE}: {e.strerror or e}; make "
                "it and its folder writable (chattr -i, chmod u+w), or leave out --write"
            )
    try:  # a FIFO would block the load forever
        records.records_files(args.paths)
    except OSError as e:
        parser.error(f"cannot read records from {e.filename}: {e.strerror}")
    out = Path(args.compile_missing or ".") / records.RECORDS_FILE
    try:  # checked before compiling for minutes, not after
        if args.compile_missing:
            records.check_writable(out)
    except OSError as e:
        parser.error(f"cannot write to --compile-missing {args.compile_missing}: {e.strerror}")
    try:  # read once, before any compile: a bad row is its one line, not a traceback
        refs = references.load()
        fixed_constants(())
    except DataError as e:
        parser.error(str(e))
    loaded = records.load(*args.paths)
    if args.compile_missing:
        if compile_missing(loaded, out):
            loaded = records.load(*args.paths, out)
    result = fit(loaded, refs)
    if not args.write:
        print(summary(result))
        return 0
    if not any(f["basis"] != TOO_FEW for f in result["families"].values()):
        print(
            f"no platform has the observations for a fit: {prediction.CONSTANTS_FILE} "
            "left as it was",
            file=sys.stderr,
        )
        return 1
    try:
        committed = prediction.constants()
    except (OSError, ValueError):  # none yet, or unreadable: nothing to keep
        committed = {}
    result, kept = keep_committed(result, committed)
    # Before printing: a closed stdout (`| head`) must not lose the fit.
    text = json.dumps(result, indent=1, sort_keys=True) + "\n"
    try:
        records.write_whole(prediction.CONSTANTS_FILE, text.encode())
    except OSError as e:  # since the check: the fit is kept, not lost
        fd, kept_at = tempfile.mkstemp(prefix="prediction_constants-", suffix=".json")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        print(
            f"error: could not replace {prediction.CONSTANTS_FILE} ({e.strerror or e}): left as "
            f"it was; the fit is kept in {kept_at}: copy it there once the file is writable",
            file=sys.stderr,
        )
        return 1
    print(summary(result))
    for line in kept:
        print(line)
    print(f"wrote {prediction.CONSTANTS_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
