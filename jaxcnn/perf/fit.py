"""The fit of the pricing's constants (jaxcnn.perf.price.Constants) to observed steps, and
how far its predictions can be trusted. `python -m experiments.cli.fit` turns
records and published references into Observations and writes the result into
jaxcnn/perf/constants.json.

One procedure, for every platform alike:

1. Observations: each pairs the kernels of one compiled step with a step time measured
   on a real chip (a measured record, or a published figure a compile-only record of
   the same program matches), with the rates it is priced at and its host side (known,
   not fitted). Those whose caveats make them no measure of the step alone are
   `held_out`: predicted and reported, never fitted.
2. Constants: per platform, those minimizing the sum of squared log(predicted /
   measured) over its fitted observations (2x too slow and 2x too fast weigh alike),
   priced by the one pricing function (jaxcnn.perf.price.seconds). A constant no
   observation can tell is held (None, or a value with its reason); a platform with too
   few observations keeps the priors (TOO_FEW). Where a platform has fitted published
   observations, the per-step cost of the loop around a published run (LOOP) is fitted
   too, and kept only where the leave-one-out median error is smaller with it.
3. Error: each fitted observation predicted by constants fitted without it
   (leave-one-out), and by the splits a prediction's claim needs (leave one chip out,
   leave one program out), over all and per regime: the error bands stored beside the
   constants and shown with every prediction.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import statistics
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from jaxcnn.perf import hlo, predict, price
from jaxcnn.perf.rates import Rates

PARAMETERS = price.PARAMETERS
VECTOR = "vector_efficiency"  # the vector units' own efficiency (jaxcnn.perf.rates.UNITS)
BOUNDS = {
    "compute_efficiency": (0.01, 1.0),
    "memory_efficiency": (0.01, 1.0),
    "kernel_overhead_s": (1e-8, 1e-3),
    "elemental_conv_efficiency": (1e-3, 1.0),
    VECTOR: (0.01, 1.0),
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
# A GPU's fp32 pipes and its tensor cores are different units (jaxcnn.perf.rates.UNITS):
# where a platform's observations run dots or convolutions on both, each unit gets its
# own fraction of its own peak (compute_efficiency: the matrix units'), fitted per
# platform; a platform none of whose observations computes on vector units has none.
# XLA:CPU runs a step's kernels as three kinds of work with their own fixed costs: a copy
# (a memcpy), a generated loop (a fusion), a library call (a GEMM or convolution through
# Eigen, oneDNN or YNNPACK; jaxcnn.perf.price.LIBRARY_KINDS). One constant for all of them
# prices the MLP's hundreds of tiny copies like its GEMMs. Only the CPU's observations
# are its own measured steps of small models, which can tell the three apart; elsewhere
# they are None (every kernel pays kernel_overhead_s).
PER_KIND_OVERHEADS = ("copy_overhead_s", "library_overhead_s", "conv_overhead_s")
# Their lower ends: what XLA:CPU's own trace (jax.profiler, one event per thunk) measured
# a tiny copy and a tiny generated loop take on this machine (benchmarks/cpu_kernel_kinds.py:
# the 10th percentile of each kind: about 0.3 us, and 0.4-0.8 us): the steps alone cannot
# tell a copy's or a loop's cost from nothing, and a fit left free puts both at 10 ns.
# A CPU kernel whose bytes per execution fit in a core's L2 (price.CACHE_BYTES) runs
# from cache, not at DRAM's rate: a second memory efficiency, CPU only (its observations
# are small models, hundreds of kernels of a few KB); elsewhere None.
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
CPU_ONLY = (*PER_KIND_OVERHEADS, CACHE, *OWN_RATE_KINDS)
# Each optional constant is fitted only where the platform's fitted observations have
# kernels it prices (the price.Programs mask named; only XLA:CPU writes convolutions as
# loops, `elemental`), and a CPU_ONLY one only on a CPU; elsewhere None: those kernels
# are priced by the general constant.
WHERE_SEEN = {
    "elemental_conv_efficiency": "elemental",
    VECTOR: "vector",
    "copy_overhead_s": "copies",
    "library_overhead_s": "library",
    "conv_overhead_s": "convs",
    CACHE: "cached",
    "library_memory_efficiency": "library",
    "half_float_memory_efficiency": "half",
}


def compiler_op_cost(
    programs: Sequence[tuple[str, Sequence[hlo.Kernel], Rates, float, int, int]],
) -> dict[str, tuple[float, int]]:
    """Per platform whose compiler estimates a compiled program's time, the fixed cost per
    op that estimate implies for the small programs (predict.regime) compiled for it:
    the median of (estimate - the kernels at full peak and bandwidth, no fixed cost) /
    kernels, never below 0; and over how many programs. `programs`: (platform, kernels,
    rates, the compiler's estimate of one step, steps one run takes, batch per device).
    That compiler also counts what the kernel model does not (a TPU pads small arrays to
    its tiles), which lands here."""
    unit = price.Constants(compute_efficiency=1, memory_efficiency=1, kernel_overhead_s=0)
    implied: dict[str, list[float]] = {}
    for platform, ks, rates, estimate, steps, per_device in programs:
        if not rates.can_price or predict.regime(ks, per_device * steps) != "small":
            continue
        timed = price.step_time(ks, rates, unit)
        extra = (estimate * steps - timed["seconds"]) / max(1, timed["kernels"])
        implied.setdefault(platform, []).append(max(0.0, extra))
    return {p: (statistics.median(xs), len(xs)) for p, xs in sorted(implied.items())}


# Where a platform has no observation at all: a starting point, said to be one.
TOO_FEW = "assumed: too few observations to fit"
PRIOR = {
    **dict.fromkeys(PARAMETERS),  # an optional constant: None, not used
    "compute_efficiency": 0.5,
    "memory_efficiency": 0.7,
    "kernel_overhead_s": 5e-6,
}


@dataclasses.dataclass(frozen=True)
class Observation:
    label: str  # what it is, in a table
    platform: str  # cpu | gpu | tpu
    kernels: tuple[hlo.Kernel, ...]
    rates: Rates
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
    # The host's side of one run of the program (jaxcnn.perf.host.host_side x steps):
    # known, not fitted, and part of the step every split's error is measured on.
    host_s: float = 0.0

    @property
    def regime(self) -> str:
        return predict.regime(list(self.kernels), self.batch_per_device * self.steps)


def programs(observations: Sequence[Observation]) -> price.Programs:
    """The observations' kernels as one set of arrays, each with its host side and
    whether a published run's loop is in its step."""
    return price.Programs.of(
        [o.kernels for o in observations],
        [o.rates for o in observations],
        [o.host_s for o in observations],
        [o.published for o in observations],
    )


def _fit(
    stack: price.Programs,
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
        predicted = price.seconds(stack, price.Constants(**c))
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
    VECTOR: (0.03, 0.1, 0.2, 0.4, 0.7, 1.0),
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
    stack: price.Programs,
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
        predicted = price.seconds(stack, price.Constants(**c))[i]
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
    stack: price.Programs,
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
    vector = stack.vector if VECTOR not in fixed else stack.vector & False
    on_unit = [
        np.bincount(stack.owner, kernels, len(fitted)) > 0
        for kernels in (vector, (stack.flops > 0) & ~vector)
    ]
    steps, untested = {}, []
    for group in groups:
        weights = np.array([0.0 if _group(o, split) == group else 1.0 for o in fitted])
        unseen_unit = any(on[weights == 0].any() and not on[weights > 0].any() for on in on_unit)
        if weights.sum() <= free or unseen_unit:
            untested.append(group)
            continue
        c = _fit(stack, measured, fixed, weights, limits=limits)
        step = price.seconds(stack, price.Constants(**{**c, LOOP: None}))
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


# Where a fitted observation's row keeps its step as each split predicted it, by
# constants fitted without its group: {split: seconds or None}.
HELD_OUT_STEPS = "held_out_predicted_s"
SPLIT_NAMES = ("chip", "program")


def _split_block(
    stack: price.Programs,
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
            "regimes": dict.fromkeys(predict.REGIMES),
            HELD_OUT_STEPS: steps,
        }
    return {
        **overall,
        HELD_OUT_STEPS: steps,
        "untested_groups": untested,
        "regimes": {
            name: _band([e for e in errors if fitted[e[0]].regime == name], fitted)
            for name in predict.REGIMES
        },
    }


def error_block(
    stack: price.Programs,
    fitted: Sequence[Observation],
    fixed: dict[str, float | None],
    limits: dict[str, tuple[float, float]],
    platform: str,
) -> dict[str, Any] | None:
    """The platform's error bands: `held_out_steps` by each split, over all its fitted
    observations and per regime (None for a regime it has none of: no prediction of that
    regime is shown with a band). A prediction for a chip in `chips` is shown with the
    program split's band, any other with the chip split's (jaxcnn.perf.predict.error_band).
    The top-level median, worst and observations are the platform's headline split's
    (SPLITS)."""
    splits = {split: _split_block(stack, fitted, fixed, limits, split) for split in SPLIT_NAMES}
    headline = SPLITS.get(platform, "program")
    if not splits[headline].get("observations"):
        return None
    return {
        **{k: splits[headline][k] for k in ("median", "worst", "worst_label", "observations")},
        "split": headline,
        # The quantity every band here was measured on: the predicted device step (plus
        # a step called alone's known round trip and copy), never jaxcnn's loop step.
        "quantity": predict.DEVICE_STEP,
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
    stack: price.Programs,
    fitted: Sequence[Observation],
    fixed: dict[str, float | None],
    limits: dict[str, tuple[float, float]],
    platform: str,
) -> dict[str, Any]:
    """Whether the vector units' own efficiency (jaxcnn.perf.rates.UNITS) earns its place:
    the platform's headline split (SPLITS) measured with it and with one efficiency for
    every unit, the published runs' loop left out of both. Kept only where it tests every
    group the shared efficiency tests (a chip whose units no other chip has cannot be
    predicted by it) and its median error is smaller: as few constants as the data
    supports."""
    split = SPLITS.get(platform, "program")
    base = {**fixed, LOOP: None}
    outcome = {}
    for name, held in (("with", base), ("without", {**base, VECTOR: None})):
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
    if fitted and all(o.rates.source == "measured" for o in fitted):
        limits.update(MEASURED_RATE_BOUNDS)
    if platform == "cpu":
        limits.update(PER_KIND_BOUNDS)
    seen = programs(fitted)
    for name, mask in WHERE_SEEN.items():  # nothing to fit it to: not made up
        if (name in CPU_ONLY and platform != "cpu") or not getattr(seen, mask).any():
            fixed.setdefault(name, None)
    if not any(o.published for o in fitted) or len(fitted) <= len(PARAMETERS) - len(fixed):
        fixed.setdefault(LOOP, None)
    loop_choice = unit_choice = None
    if len(fitted) <= len(PARAMETERS) - len(fixed):
        constants = {**PRIOR, **fixed}
        basis = TOO_FEW
        loo: list[float] = []
        stack = None
    else:
        stack = programs(fitted)
        measured = np.array([o.measured_s for o in fitted])
        if VECTOR not in fixed:
            unit_choice = choose_units(stack, fitted, fixed, limits, platform)
            if not unit_choice["kept"]:
                fixed[VECTOR] = None
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
    every = programs(observations)
    predicted = price.seconds(every, price.Constants(**constants)) if observations else []
    rows = [
        {
            "label": o.label,
            "source": o.source,
            "measured_s": o.measured_s,
            "predicted_s": float(seconds),
            "regime": o.regime,
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


def version_of(families: dict[str, dict[str, Any]]) -> str:
    """Today's date and a digest of every platform's constants."""
    digest = hashlib.sha256(
        json.dumps(
            {p: {k: f[k] for k in PARAMETERS} for p, f in families.items()}, sort_keys=True
        ).encode()
    ).hexdigest()[:8]
    return f"{datetime.now(timezone.utc).isoformat()[:10]}.{digest}"


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
    return {**result, "families": families, "version": version_of(families)}, said
