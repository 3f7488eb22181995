"""A published JAX loop's step, predicted from the loop's own shape (its `loop` in
published_references.json), not from jaxcnn's: the compiled program's device step (the
per-kernel model), and around it the host work of that loop:

- its input pipeline's wait for each batch, as replayed on a CPU here with no model
  (records of kind input, benchmarks/published_inputs.py): a loader in the loop's own
  thread adds its whole time a batch; one of worker processes adds only what its workers
  take beyond the loop's other host work (they run on other cores meanwhile), its time
  scaled from the workers replayed to the workers published where this machine had fewer
  cores than the published loader workers;
- a loop that slices host arrays itself: jaxcnn's gather at its batch's bytes, or
  nothing where its slices are views (`views`: its put copies them);
- its jitted calls' dispatch, and its batch's put and copy over the chip's link, as
  jaxcnn's loops measured them (jaxcnn.host_loop.modelled_parts at its bytes and calls),
  with the runtime's host side where those were measured on another platform's client;
  each device's share of the batch over its chip's link, as jaxcnn's own step's;
- its waits for the device as often as it makes them (`syncs_every`).

jaxcnn's own bookkeeping per step (its metrics, progress, checks every 50 steps) is not
charged: the published loops do none of it. A part with no figure (a pipeline never
replayed) is named in `loop_left_out`, never counted free.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.records import CompileRecord, InputRecord, Record, recorded_at_or_oldest

# jaxcnn's loop parts the published loops do not have: charged 0 (not "unknown").
NOT_IN_THESE_LOOPS = ("metrics", "progress", "sync")
REPLAY_COMMAND = (
    "python -m benchmarks.published_inputs --pipelines {} --out results/references-inputs"
)


def replayed(pipeline: str, loaded: Sequence[Record]) -> InputRecord | None:
    """The newest ok record of `pipeline`'s replay among `loaded`, or None."""
    found = [
        r
        for r in loaded
        if isinstance(r, InputRecord) and r.status == "ok" and r.workload.pipeline == pipeline
    ]
    return max(found, key=recorded_at_or_oldest, default=None)


def batch_seconds(replay: InputRecord) -> float:
    """The replay's time a batch at the published loader's workers: as replayed, or
    scaled by workers replayed over workers published where fewer ran here."""
    timed = replay.input
    seconds = timed.batch_s.median
    if timed.workers_published > timed.workers:
        seconds *= timed.workers / timed.workers_published
    return seconds


def loop_step(
    record: CompileRecord,
    block: dict[str, Any],
    shape: Any,
    loaded: Sequence[Record],
    table: dict[str, Any],
    *,
    own_bytes: int | None,
    link_bytes_per_s: float | None,
    convs: int | None = None,
) -> dict[str, Any]:
    """The loop step of published loop `shape` (a references.LoopShape) around `record`'s
    compiled step as priced in `block` (experiments.predict.shown.of), its batch over the
    chip's host link of `link_bytes_per_s` (None: no published figure); a pipeline never
    replayed is given jaxcnn's batch bytes (`own_bytes`); its dispatch is modelled at
    the program's `convs` convolution kernels a step (None: not known).
    jaxcnn.perf.host.loop_step's fields, and `input`: what its input part is."""
    from jaxcnn import host_loop
    from jaxcnn.perf import host as host_lib
    from jaxcnn.perf import runtime as runtime_lib

    platform = record.device.platform
    replay = replayed(shape.input, loaded) if shape.input else None
    nbytes = replay.input.batch_bytes if replay else shape.batch_bytes or own_bytes or 0
    modelled = host_loop.modelled_parts(nbytes, shape.calls_per_step, table, platform, convs=convs)
    runtime = {p: s for p, s in (block.get("loop_parts") or {}).items() if p in runtime_lib.PARTS}
    if runtime.get(runtime_lib.DISPATCH) is not None:
        runtime[runtime_lib.DISPATCH] *= shape.calls_per_step
    parts: dict[str, float | None] = {
        "put": modelled["put"],
        "dispatch": modelled["dispatch"],
        **dict.fromkeys(NOT_IN_THESE_LOOPS, 0.0),
        **runtime,
    }
    own = sum(seconds or 0.0 for seconds in parts.values())
    if shape.input is None and shape.views:
        parts["batch"], words = 0.0, "host arrays sliced as views, gathered by nothing"
    elif shape.input is None:
        parts["batch"], words = modelled["batch"], "host arrays sliced as jaxcnn's loop does"
    elif replay is None:
        parts["batch"] = None
        words = f"input {shape.input} not replayed: {REPLAY_COMMAND.format(shape.input)}"
    else:
        timed, per_batch = replay.input, batch_seconds(replay)
        if timed.workers_published == 0:
            parts["batch"] = per_batch
        else:
            parts["batch"] = max(0.0, per_batch - own)
        scaled = f", scaled from {timed.workers}" if timed.workers_published > timed.workers else ""
        cpu = replay.env.cpu.model if replay.env.cpu else "a CPU"
        words = (
            f"input {shape.input} replayed on {cpu}: {per_batch * 1e3:.3g} ms a batch at "
            f"{timed.workers_published} workers{scaled}"
        )
    share = nbytes / record.device.count  # each device's over its chip's link
    transfer = (
        0.0 if platform == "cpu" else (share / link_bytes_per_s if link_bytes_per_s else None)
    )
    loop = host_lib.loop_step(
        block["device_step_s"], parts, transfer, platform=platform, check_every=shape.syncs_every
    )
    named = [m for m in block.get("loop_left_out") or [] if m.split(":")[0] in runtime_lib.PARTS]
    loop["loop_left_out"] = [p for p in loop["loop_left_out"] if p not in runtime_lib.PARTS] + named
    calls = f"{shape.calls_per_step} call{'s' if shape.calls_per_step > 1 else ''} a step"
    return {**loop, "input": f"from its shape: {calls}, {words}"}
