"""Timing that an ML-systems engineer can trust.

Compile time is lower + compile, measured apart. Step time is per step, the clock
read only after `block_until_ready`, warm-up steps excluded, reported as median with
p10/p90 and n. Timing runs on a copy of the state so training is not disturbed.

A SIGTERM (jaxcnn.loop.request_stop) stops timing at the next call, warm-up included,
as it stops training at the next step: StoppedWhileTiming, the clock read outside.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from experiments import records
from experiments.records.stats import minor_page_faults, summarize
from jaxcnn import aot, data, host_loop, loop, train
from jaxcnn import devices as devices_lib
from jaxcnn import flops as flops_lib
from jaxcnn.parallel import Placement
from jaxcnn.perf import chips, hlo, predict, roofline
from jaxcnn.perf import host as host_lib
from jaxcnn.perf import rates as rates_lib


def phase(what: str) -> None:
    """One line on stderr as a long silent stretch (compiling, timing) begins, under the
    sweep's line naming the workload."""
    progress(f"{what}...")


def progress(line: str) -> None:
    """One progress line on stderr, under the line naming the workload (what
    jaxcnn.aot's `progress` callback is given here)."""
    print(f"    {line}", file=sys.stderr, flush=True)


def compile_placement(placement: Placement, state: Any, batch: Any) -> tuple[Placement, dict]:
    """AOT-compile the placement's steps for these shapes: (placement using the
    compiled executables, {"train": seconds, "eval": seconds, "compiled": {...}})."""
    phase("compiling the train and eval steps")
    seconds: dict[str, float] = {}
    compiled: dict[str, Any] = {}
    for name, fn in (("train", placement.train_step), ("eval", placement.eval_step)):
        compiled[name], seconds[name] = timed_compile(fn, state, batch)
    placed = dataclasses.replace(
        placement, train_step=compiled["train"], eval_step=compiled["eval"]
    )
    return placed, {**seconds, "compiled": compiled}


def timed_compile(fn: Any, *args: Any) -> tuple[Any, float]:
    """(`fn` lowered for `args` and compiled, the seconds that took)."""
    started = time.perf_counter()
    compiled = fn.lower(*args).compile()
    return compiled, time.perf_counter() - started


def copy_tree(tree: Any) -> Any:
    """A real copy with the same placement: the timed steps donate it."""
    return jax.tree.map(lambda x: jax.device_put(x, x.sharding, may_alias=False), tree)


class StoppedWhileTiming(loop.Stopped):
    """Timing stopped because `loop.request_stop` asked it to (a SIGTERM): nothing of
    the workload is recorded, its checkpoints are as they were, a rerun times it again."""

    def __init__(self, done: int, planned: int, asked_by: list[int]) -> None:
        BaseException.__init__(
            self,
            f"stopped while timing a step, after {done:,} of {planned:,} calls "
            "(this workload is not recorded)",
        )
        self.step, self.saved, self.asked_by = 0, None, asked_by
        self.done, self.planned = done, planned


def _stop_if_asked(done: int, planned: int, agreed: bool) -> None:
    """Raise StoppedWhileTiming if a stop was asked for (`loop.stop_agreed`): `done` of
    `planned` calls made. `agreed`: every process makes these calls, and the host has
    synced, so with many processes they agree here (one collective); else one process
    alone stops, and many never do here (one that stopped alone would leave the others
    waiting in a step's collective)."""
    asked = loop.stop_agreed(agreed)
    if asked:
        raise StoppedWhileTiming(done, planned, asked)


def _seconds(
    call: Callable[[], Any], *, repeats: int, warmup: int, agreed: bool = False
) -> list[float]:
    """Seconds of each of `repeats` calls, the clock read after the call's results are
    ready; `warmup` calls first, untimed (compile caches, allocator, autotuning). A stop
    asked for is honoured before each call, outside the clock (`_stop_if_asked`)."""
    planned = warmup + repeats
    for done in range(warmup):
        _stop_if_asked(done, planned, agreed)
        jax.block_until_ready(call())
    samples = []
    for done in range(warmup, planned):
        _stop_if_asked(done, planned, agreed)
        started = time.perf_counter()
        jax.block_until_ready(call())
        samples.append(time.perf_counter() - started)
    return samples


def time_calls(
    call: Callable[[], Any], *, steps: int = 20, warmup: int = 2, agreed: bool = False
) -> dict:
    """Seconds per `call()`, each timed alone, `warmup` calls first. `agreed`: every
    process makes the same calls (a step across them; see `_stop_if_asked`)."""
    return summarize(_seconds(call, repeats=steps, warmup=warmup, agreed=agreed))


THROUGHPUT_REPEATS = 7  # timed blocks per throughput figure: the median of 7

# How `time_blocks` runs its timed blocks: `pace(block, repeats, images)` -> the seconds
# of each of `repeats` calls of `block()`, which times one block of `images` images.
# None: back to back. A side of a paired run (benchmarks/turns.py) sets it, so that
# each block waits for its turn with another process.
pace: Callable[[Callable[[], float], int, int], list[float]] | None = None


def time_blocks(
    run_block: Callable[[], Any],
    *,
    steps: int,
    images_per_step: int,
    repeats: int = THROUGHPUT_REPEATS,
    warmup: int = 1,
    agreed: bool = False,
) -> tuple[dict, dict]:
    """(seconds per step, images/s), each over `repeats` timed calls of `run_block()`,
    which runs `steps` steps back to back (dispatched ahead, or one compiled loop); the
    clock is read once per block, after its results are ready. Warm-up blocks first.
    Images/s also carries the host's minor page faults per step over all the blocks.
    `pace`, where set, runs the timed blocks (each waiting for its turn). `agreed` as
    `time_calls`: a stop is honoured between blocks."""
    _seconds(run_block, repeats=warmup, warmup=0, agreed=agreed)
    faults = minor_page_faults()

    def one_block() -> float:
        return _seconds(run_block, repeats=1, warmup=0, agreed=agreed)[0]

    if pace is None:
        seconds = [one_block() for _ in range(repeats)]
    else:
        seconds = pace(one_block, repeats, steps * images_per_step)
    per_step = np.asarray(seconds) / steps
    faults_per_step = (minor_page_faults() - faults) / (repeats * steps)
    return (
        {**summarize(per_step), "steps": steps},
        {
            **summarize(images_per_step / per_step),
            "steps": steps,
            "minor_faults_per_step": round(faults_per_step, 1),
        },
    )


def _threaded(fn: Callable[..., Any], state: Any, *args: Any) -> Callable[[], Any]:
    """A call of `fn(state, *args) -> (state, metrics)` that passes on the state each
    call returns to the next (the state passed in is consumed, donated)."""
    carry = [state]

    def call() -> Any:
        carry[0], metrics = fn(carry[0], *args)
        return carry[0], metrics

    return call


DISPATCH_CALLS = 50


def _no_work(state: Any, batch: Any, axis_name: str | None = None) -> tuple[Any, dict]:
    """A step that does nothing: the state back as it came (donated, so aliased, not
    copied), a loss of 0."""
    del batch, axis_name
    return state, {"loss": jnp.zeros((), jnp.float32)}


def time_dispatch(
    strategy: str, devices: Sequence[jax.Device], abstract_state: Any, batch: Any
) -> dict:
    """Seconds per call of a jitted step that does no work, placed as the real one
    (`strategy` over `devices`), on a state of the real one's leaves (each a scalar: a
    donated state is aliased, never copied, so its sizes cost nothing) and the real
    placed `batch`: the host's round trip of one step (dispatch, argument handling, the
    wait for its results) without the step's kernels. The host side of a predicted
    step (jaxcnn.perf.host.host_side) is this figure."""
    from jaxcnn.choices import MODEL_STRATEGIES
    from jaxcnn.parallel import place

    phase(f"measuring the host's side of a step: {DISPATCH_CALLS} calls of one doing nothing")
    empty = place(strategy, devices, step=_no_work)
    # A model placement splits the state by its shapes: scalars would split nothing (and
    # be refused), so its proxy has the real shapes, one state's memory more for a moment.
    shape = (lambda x: x.shape) if strategy in MODEL_STRATEGIES else (lambda x: ())
    proxy = jax.tree.map(lambda x: np.zeros(shape(x), x.dtype), abstract_state)
    call = _threaded(empty.train_step, empty.put_state(proxy), batch)
    return time_calls(call, steps=DISPATCH_CALLS, warmup=3, agreed=True)


HOST_LOOP_WARMUP = 2  # steps of the loop run first, unrecorded: a first call's own costs
# Windows of the loop timed one after another: the loop step is their median, their
# spread its min-max (one window's time is one number: its steps end in one sync).
HOST_LOOP_WINDOWS = 5


def time_host_loop(
    placement: Placement,
    state: Any,
    train_data: tuple[np.ndarray, np.ndarray],
    *,
    batch_size: int,
    seed: int,
    steps: int,
) -> dict[str, Any]:
    """The record's `host_loop`: HOST_LOOP_WINDOWS windows of `steps` steps of jaxcnn's
    own step loop (`loop.fit`, loop="step", the placement's compiled steps, the real
    training split), after HOST_LOOP_WARMUP unrecorded ones, with each step's host parts
    recorded (jaxcnn.host_loop): per part a summary over the steps (stats.summarize plus
    `mean`: a step's share of what only some steps pay, the epoch's shuffle, a sync),
    WAIT over the syncs; `syncs` how many there were; `window_step_s` each window's time
    per step (its parts and waits over its steps: the loop's clock, measured) and
    `loop_step_s` their median. Consumes `state`."""
    per_epoch = data.steps_per_epoch(len(train_data[1]), batch_size)

    def run(state: Any, count: int) -> Any:
        options = loop.FitOptions(
            epochs=-(-count // max(1, per_epoch)),
            batch_size=batch_size,
            seed=seed,
            max_steps=count,
            placement=placement,
        )
        return loop.fit(state, train_data, options=options)[0]

    windows = HOST_LOOP_WINDOWS
    phase(f"timing jaxcnn's step loop on the host: {windows} windows of {steps} steps of fit")
    timed, samples, window_step_s = 0, {}, []
    try:  # fit honours a stop at its next step: here, a stop while timing
        state = run(state, HOST_LOOP_WARMUP)
        for _ in range(windows):
            with host_loop.recording() as recorder:
                state = run(state, steps)
            spent = sum(sum(xs) for xs in recorder.samples.values())
            if recorder.steps:
                window_step_s.append(spent / recorder.steps)
            for part, xs in recorder.samples.items():
                samples.setdefault(part, []).extend(xs)
            timed += recorder.steps
    except loop.Stopped as stopped:
        raise StoppedWhileTiming(timed, steps * windows, stopped.asked_by or []) from None
    parts = {
        part: {**summarize(xs), "mean": float(np.mean(xs))} for part, xs in samples.items() if xs
    }
    return {
        "loop": "step",
        "steps": timed,
        "steps_per_epoch": per_epoch,
        "check_every": host_lib.CHECK_EVERY,
        "syncs": len(samples.get(host_lib.WAIT, [])),
        "parts": parts,
        "window_step_s": window_step_s,
        "loop_step_s": float(np.median(window_step_s)) if window_step_s else None,
    }


def time_step_loop(
    step: Any,
    state: Any,
    batch: Any,
    *,
    steps: int = 20,
    warmup: int = 2,
    images_per_step: int | None = None,
    agreed: bool = False,
) -> tuple[dict, dict | None]:
    """(seconds per step, each call timed alone; with `images_per_step`, images/s of
    blocks of `steps` calls dispatched back to back, as `time_blocks`). One chain of
    donated states throughout: one copy of the state in memory, as in training. A stop
    asked for is honoured at the next step, within a block too (`agreed`: as
    `time_calls`, between calls and blocks; within a block one process alone stops)."""
    blocks = f", then {THROUGHPUT_REPEATS} blocks of {steps}" if images_per_step else ""
    phase(f"timing the step: {steps} calls one by one{blocks}")
    call = _threaded(step, state, batch)

    def block() -> Any:
        for done in range(steps):
            _stop_if_asked(done, steps, agreed=False)  # a flag read: the steps in flight
            out = call()
        return out

    per_call = time_calls(call, steps=steps, warmup=warmup, agreed=agreed)
    if images_per_step is None:
        return per_call, None
    throughput = time_blocks(block, steps=steps, images_per_step=images_per_step, agreed=agreed)
    return per_call, throughput[1]


def time_epoch_loop(
    epoch: Any,
    state: Any,
    dataset: Any,
    order: jax.Array,
    *,
    images_per_step: int,
    agreed: bool = False,
) -> tuple[dict, dict]:
    """(seconds per step, images/s) of a compiled `epoch(state, dataset, order)` that
    runs order.shape[0] steps in one call: `time_blocks` of it (stopped between calls).
    Consumes the state."""
    phase(f"timing the epoch loop: {THROUGHPUT_REPEATS} calls of {order.shape[0]} steps")
    block = _threaded(epoch, state, dataset, order)
    steps = int(order.shape[0])
    return time_blocks(block, steps=steps, images_per_step=images_per_step, agreed=agreed)


def compile_epoch(
    placement: Placement, state: Any, dataset: Any, order: jax.Array
) -> tuple[Any, float]:
    """(the placement's whole-epoch loop compiled for these shapes, seconds taken)."""
    phase("compiling the whole-epoch loop")
    return timed_compile(placement.train_epoch, state, dataset, order)


def time_matmul(
    device: jax.Device, dtype: str, n: int, *, steps: int, warmup: int = 2, seed: int = 0
) -> tuple[Any, float, dict]:
    """One jitted (n, n) @ (n, n) in `dtype` on `device`: (the compiled matmul, its
    compile seconds, seconds per call, each call timed alone after `warmup`)."""
    # Host-made inputs: random numbers made on the device would cost a compile per shape.
    rng = np.random.default_rng(seed)
    a, b = (
        jax.device_put(rng.standard_normal((n, n), np.float32).astype(jnp.dtype(dtype)), device)
        for _ in range(2)
    )
    compiled, compile_s = timed_compile(jax.jit(jnp.matmul), a, b)
    return compiled, compile_s, time_calls(lambda: compiled(a, b), steps=steps, warmup=warmup)


def time_eval(
    step: Any, state: Any, batch: Any, *, steps: int = 20, warmup: int = 2, agreed: bool = False
) -> dict:
    """Seconds per call of `step(state, batch) -> metrics` (the state is not consumed)."""
    phase(f"timing the eval step: {steps} calls one by one")
    return time_calls(lambda: step(state, batch), steps=steps, warmup=warmup, agreed=agreed)


# --- The device's matmul ceiling ------------------------------------------------------


def measure_matmul_peak(
    device: jax.Device,
    dtypes: Sequence[str] = ("float32", "bfloat16"),
    sizes: Sequence[int] | None = None,
    *,
    reps: int = 5,
    passes: int = 2,
) -> dict[str, dict[str, Any]]:
    """The best TFLOP/s of square matmuls on `device`, per input dtype, at JAX's default
    precision (the precision the train step's matmuls also run in).

    Per size: compile excluded, one warm-up, `reps` calls each timed alone after
    `block_until_ready`, the median kept; the best size wins. Every dtype's sizes are
    timed `passes` times over, the best pass kept per size: a ceiling is what the device
    can do, and the first matmuls of a process can run at half of it (a CPU's thread
    pool and clocks still waking: f32 measured below bf16 once), which every prediction
    and MFU of the run would inherit. Sizes default to the platform's
    (devices.matmul_sizes); a size that fails (out of memory) is skipped.
    """
    sizes = tuple(sizes or devices_lib.matmul_sizes(device.platform))
    result: dict[str, dict[str, Any]] = {}
    timed_by: dict[tuple[str, int], float | None] = {}
    for _ in range(passes):
        for dtype in dtypes:
            for n in sizes:
                if (dtype, n) in timed_by and timed_by[(dtype, n)] is None:
                    continue  # out of memory once: so again
                try:
                    step_time = time_matmul(device, dtype, n, steps=reps, warmup=1)[2]
                    rate = 2 * n**3 / step_time["median"] / 1e12
                except Exception as error:  # an OOM at the largest size is not the end
                    if records.classify_failure(error) != "oom":
                        raise
                    rate = None
                before = timed_by.get((dtype, n))
                timed_by[(dtype, n)] = rate if before is None else max(before, rate or 0)
    for dtype in dtypes:
        by_size: dict[str, float | None] = {str(n): timed_by[(dtype, n)] for n in sizes}
        timed = {n: t for n, t in by_size.items() if t is not None}
        best = max(timed, key=timed.__getitem__) if timed else None
        result[dtype] = {
            "tflops": timed[best] if best else None,
            "size": int(best) if best else None,
            "by_size": by_size,
            "reps": reps,
            "passes": passes,
            "precision": rates_lib.matmul_precision(device, dtype),
        }
    return result


# --- The device's memory bandwidth ---------------------------------------------------

# Bytes per array of the bandwidth measurement: far beyond any last-level cache of the
# chips in devices.py (a 32 MiB L3 here, 50 MiB L2 on H100, 128 MiB CMEM on TPU v4) and
# small enough for a 2 GB GPU; one call takes ~20 ms on a 2-core CPU.
BANDWIDTH_BYTES = 2**28


def measure_bandwidth(
    device: jax.Device, size_bytes: int = BANDWIDTH_BYTES, *, reps: int = 10
) -> dict[str, Any]:
    """The device's memory bandwidth in bytes/s: `x + 1` over a float32 array of
    `size_bytes`, in place (the input donated, as the train step donates its state), so
    each call reads and writes `size_bytes` and allocates nothing. An out-of-place copy
    would time the allocator too: on a CPU, fresh pages cost more than the copy.

    Compile excluded, two warm-up calls, `reps` calls each timed alone after
    `block_until_ready`: {bytes_per_s (median), p10, p90, n, size_bytes}.
    """
    n = size_bytes // 4
    with jax.default_device(device):
        x = jnp.zeros((n,), jnp.float32)
    add_one = jax.jit(lambda a: a + 1.0, donate_argnums=0).lower(x).compile()
    carry = [x]

    def call() -> Any:
        carry[0] = add_one(carry[0])
        return carry[0]

    per_call = np.asarray(_seconds(call, repeats=reps, warmup=2))
    rates = summarize(2 * n * 4 / per_call)
    del carry[0]
    return {"bytes_per_s": rates.pop("median"), **rates, "size_bytes": n * 4}


# --- A predicted step time: the roofline of the compiled step ---------------------------


def step_cost(compiled: Any, jaxpr_flops_per_chip: float | None = None) -> dict[str, Any]:
    """The record's `cost`: the compiler's cost analysis of one compiled step, per chip:
    {flops, bytes_accessed, optimal_seconds, flops_source}. Where XLA gives no FLOPs
    (XLA:GPU gives no analysis at all), `jaxpr_flops_per_chip` stands in and
    `flops_source` says "jaxpr"; a count XLA could not make (-1) is null."""
    analysis = flops_lib.cost_analysis(compiled) or {}

    def count(key: str) -> float | None:
        value = analysis.get(key)
        if value is None or not np.isfinite(float(value)) or float(value) < 0:
            return None
        return float(value)

    flops, source = count("flops"), "xla"
    if flops is None and jaxpr_flops_per_chip is not None:
        flops, source = float(jaxpr_flops_per_chip), "jaxpr"
    optimal = analysis.get("optimal_seconds")  # TPU only; negative for large programs
    return {
        "flops": flops,
        "bytes_accessed": count("bytes accessed"),
        "optimal_seconds": None if optimal is None else float(optimal),
        "flops_source": source if flops is not None else None,
    }


def prediction(
    cost: dict[str, Any],
    batch_size: int,
    *,
    peak_tflops: float | None,
    peak_source: str | None,
    peak_precision: str | None,
    bandwidth_bytes_per_s: float | None,
    bandwidth_source: str | None,
) -> dict[str, Any] | None:
    """The record's `prediction` of one step from its per-chip `cost` (`step_cost`) and
    one chip's peak TFLOP/s and bandwidth: the roofline (jaxcnn.perf.roofline.predict), the
    images/s it implies for the global `batch_size`, and where each rate came from
    (source "vendor" or "measured"; precision: what the matmuls run in). The compiler's
    own estimate (TPU's optimal_seconds) rides beside it where positive. None when
    neither side can be computed."""
    peak = None if peak_tflops is None else peak_tflops * 1e12
    roof = roofline.predict(
        cost.get("flops"), cost.get("bytes_accessed"), peak, bandwidth_bytes_per_s
    )
    if roof is None:
        return None
    optimal = cost.get("optimal_seconds")
    return {
        "step_time_s": roof["seconds"],
        "compute_s": roof["compute_s"],
        "memory_s": roof["memory_s"],
        "bound": roof["bound"],
        "images_per_s": batch_size / roof["seconds"] if roof["seconds"] > 0 else None,
        "peak_tflops_used": peak_tflops if roof["compute_s"] is not None else None,
        "peak_source": peak_source if roof["compute_s"] is not None else None,
        "peak_precision": peak_precision,
        "bandwidth_bytes_per_s": bandwidth_bytes_per_s if roof["memory_s"] is not None else None,
        "bandwidth_source": bandwidth_source if roof["memory_s"] is not None else None,
        "flops_source": cost.get("flops_source"),
        "bytes_source": "xla" if roof["memory_s"] is not None else None,
        "compiler_estimate_s": optimal if optimal is not None and optimal > 0 else None,
        "method": "roofline",
    }


def predictions(
    cost: dict[str, Any],
    batch_size: int,
    device: jax.Device,
    dtype: str,
    ceiling: dict[str, dict[str, Any]] | None = None,
    bandwidth: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A measured record's {"prediction", "prediction_vendor"} for a step of `dtype` on
    `device`'s chip. `prediction` uses what this run measured (the matmul ceiling for
    `dtype`, the memory bandwidth) and the vendor's figure where it measured nothing;
    `prediction_vendor` uses the vendor's figures alone (null for a chip the table does
    not know, a CPU): what a compile-only run predicts for the same chip."""
    vendor_rates = rates_lib.of_device(device)
    precision, vendor_peak = vendor_rates.matmul(dtype)
    vendor_bandwidth = vendor_rates.bytes_per_s
    measured_peak = ((ceiling or {}).get(dtype) or {}).get("tflops")
    measured_bandwidth = (bandwidth or {}).get("bytes_per_s")

    def chosen(measured: float | None, vendor: float | None) -> tuple[float | None, str | None]:
        if measured:
            return measured, "measured"
        return (vendor, "vendor") if vendor else (None, None)

    def roof(peak: tuple, rate: tuple) -> dict[str, Any] | None:
        return prediction(
            cost,
            batch_size,
            peak_tflops=peak[0],
            peak_source=peak[1],
            peak_precision=precision,
            bandwidth_bytes_per_s=rate[0],
            bandwidth_source=rate[1],
        )

    vendor = (vendor_peak, "vendor"), (vendor_bandwidth, "vendor")
    return {
        "prediction": roof(
            chosen(measured_peak, vendor_peak), chosen(measured_bandwidth, vendor_bandwidth)
        ),
        "prediction_vendor": roof(*vendor) if vendor_peak or vendor_bandwidth else None,
    }


def bounds(predicted: dict[str, Any]) -> dict[str, Any]:
    """The roofline blocks of `predictions`, named for what they are beside the per-kernel
    prediction: `prediction_bound` and `prediction_vendor_bound`, method "roofline bound"."""
    return {
        f"{name}_bound": None if block is None else {**block, "method": predict.BOUND_METHOD}
        for name, block in predicted.items()
    }


def step_kernels(compiled: Any) -> list[list]:
    """The record's `kernels`: the compiled step's kernels (jaxcnn.aot.kernels),
    summarized."""
    return hlo.summarize(aot.kernels(compiled))


def kernel_prediction(
    summary: list[list],
    batch_size: int,
    device: jax.Device,
    ceiling: dict[str, dict[str, Any]] | None = None,
    bandwidth: dict[str, Any] | None = None,
    devices_per_chip: int = 1,
    steps: int = 1,
) -> dict[str, Any] | None:
    """The record's per-kernel `prediction` of one step of the program `summary` (of
    `steps` steps) on `device`: at the vendor's rates where the chip table knows the chip (what a
    compile-only record of the same chip predicts), else at the rates this run measured
    (a CPU's matmul ceiling and memory bandwidth)."""
    rates = rates_lib.pricing(device, devices_per_chip, ceiling, bandwidth)
    # the chip as the fit names it, so the band is the split its claim needs (leave one
    # program out where the fit has observed the chip; a CPU is its machine, never named)
    chip = chips.chip_name(device.device_kind) if device.platform != "cpu" else None
    try:
        found = predict.predict(
            hlo.from_summary(summary), rates, device.platform, batch_size, steps=steps, chip=chip
        )
    except ValueError as error:  # a kernel the model cannot price: no prediction, and
        # the measurement it would sit beside is kept all the same
        print(f"no prediction: {error}", file=sys.stderr)
        return None
    return None if found is None else found.as_record()


# --- FLOP/s, MFU, memory, failures: record fields ------------------------------------


def flops_field(
    per_step: int, forward_per_step: int, batch_size: int, xla_per_device: float | None, count: int
) -> dict[str, Any]:
    """The record's `flops`: jaxpr counts (global, all devices) and XLA's beside them.

    XLA's cost analysis of a program over many devices counts one device's share, so it
    is scaled by the device count to compare with the (global) jaxpr count.
    """
    xla = None if xla_per_device is None else xla_per_device * count
    return {
        "per_step": per_step,
        "per_image": per_step / batch_size,
        "forward_per_image": forward_per_step / batch_size,
        "xla_per_device": xla_per_device,
        "xla_per_step": xla,
        "xla_vs_jaxpr": xla / per_step if xla is not None and per_step else None,
    }


def utilization(
    flops_per_step: int,
    step_seconds: float,
    devices: Sequence[jax.Device],
    dtype: str,
    ceiling: dict[str, dict[str, Any]] | None = None,
) -> tuple[float, dict[str, Any]]:
    """(achieved TFLOP/s, the record's `mfu`): achieved over the peak of all devices,
    against the vendor's figure for the precision the matmuls actually run in and
    against the matmul ceiling measured on this device in this run."""
    achieved = flops_per_step / step_seconds / 1e12
    device, count = devices[0], len(devices)
    precision, vendor = rates_lib.of_device(device).matmul(dtype)
    measured = ((ceiling or {}).get(dtype) or {}).get("tflops")
    return achieved, {
        "chip": chips.chip_name(device.device_kind),
        "vendor_precision": precision,
        "vendor_peak_tflops": vendor,
        "vs_vendor": achieved / (vendor * count) if vendor else None,
        "measured_dtype": dtype,
        "measured_ceiling_tflops": measured,
        "vs_measured": achieved / (measured * count) if measured else None,
    }


def memory(compiled: Any, device: jax.Device | None = None) -> dict[str, int | None]:
    """The record's `memory`: XLA's compiled memory analysis (per device, jaxcnn.aot.memory)
    and, for a `device` the program runs on, the allocator's peak since the process
    started and its limit (None where the runtime keeps none, as on CPU). Without a
    device (compiled, not run) there are no runtime figures and no keys for them."""
    fields: dict[str, int | None] = dataclasses.asdict(aot.memory(compiled))
    if device is None:
        return fields
    device_stats = allocator(device)
    fields["peak_bytes_in_use"] = device_stats.get("peak_bytes_in_use")
    fields["bytes_limit"] = device_stats.get("bytes_limit")
    return fields


def allocator(device: jax.Device) -> dict[str, int | None]:
    """The device allocator's figures now (bytes_in_use, peak_bytes_in_use, bytes_limit);
    empty where the runtime keeps none (a CPU raises or returns None)."""
    try:
        found = device.memory_stats() or {}
    except Exception:
        return {}
    keys = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit")
    return {k: _int_or_none(found.get(k)) for k in keys}


def with_allocator_before(
    measured: Callable[[Any], dict[str, Any]], device: jax.Device
) -> Callable[[Any], dict[str, Any]]:
    """`measured`, whose `memory` also says what the allocator held and its peak when the
    workload began: the process's peak counts the probes and earlier workloads, and only
    a workload that raises it shows its own peak (over what it found in use)."""

    def wrapped(given: Any) -> dict[str, Any]:
        before = allocator(device)
        fields = measured(given)
        if fields.get("memory") and before.get("peak_bytes_in_use") is not None:
            fields["memory"] = {
                **fields["memory"],
                "bytes_in_use_before": before["bytes_in_use"],
                "peak_bytes_in_use_before": before["peak_bytes_in_use"],
            }
        return fields

    return wrapped


def _int_or_none(value: Any) -> int | None:
    return None if value is None or int(value) < 0 else int(value)


def step_fields(
    abstract_state: Any,
    host_batch: dict[str, Any],
    compiled_train: Any,
    devices: Sequence[jax.Device],
    step_time: dict[str, Any],
    *,
    dtype: str = "float32",
    ceiling: dict[str, dict[str, Any]] | None = None,
    train_fn: Callable[..., Any] = train.train_step,
    eval_fn: Callable[..., Any] = train.eval_step,
) -> dict[str, Any]:
    """The record's `flops`, `achieved_tflops`, `mfu` and `memory` for one workload.

    FLOPs are counted on the unplaced step (`train.train_step` and `train.eval_step`
    on the global batch, state as shapes), so every strategy counts the same work.
    `train_fn`/`eval_fn` replace them where a workload runs a wrapped step (an
    ensemble's jax.vmap of it over stacked states).
    """
    batch_size = len(host_batch["label"])
    train_count = flops_lib.count(train_fn, abstract_state, host_batch)
    forward = flops_lib.count(eval_fn, abstract_state, host_batch).total
    flops = flops_field(
        train_count.total, forward, batch_size, flops_lib.xla_flops(compiled_train), len(devices)
    )
    flops.update(
        per_step_in_bounds=train_count.in_bounds,
        by_primitive=train_count.by_primitive,
        unknown_trip_count=train_count.unknown_trip_count,
    )
    achieved, mfu = utilization(train_count.total, step_time["median"], devices, dtype, ceiling)
    return {
        "flops": flops,
        "achieved_tflops": achieved,
        "mfu": mfu,
        "memory": memory(compiled_train, devices[0]),
    }
