"""The host's side of a step in jaxcnn's loops, and the loop step around a device step:
what the host adds around the kernels (the step loop's host parts as jaxcnn.host_loop
measured them, the batch over the chip's link, a call's round trip), each from a
measurement or a published link rate, never fitted. Pure arithmetic on what a record
holds: the timing itself is jaxcnn.host_loop's, which names its parts here (PARTS).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

# The host parts of a step of `loop.fit` (loop="step"), as jaxcnn.host_loop times them
# (its docstring says what each holds), and the syncs' wait for the device, apart.
PARTS = ("batch", "put", "dispatch", "metrics", "progress", "sync")
WAIT = "wait"
# loop.fit's default: its losses are fetched and checked every CHECK_EVERY steps.
CHECK_EVERY = 50
# The parts whose work grows with the batch's bytes (modelled as a line in them).
BATCH_PARTS = ("batch", "put")
# The copy of a batch over the chip's host link, priced (not measured here): a CPU has
# none, its device memory is the host's.
TRANSFER = "transfer"


def section(table: Mapping[str, Any], platform: str = "cpu") -> tuple[str, Mapping[str, Any]]:
    """(the platform whose runtime ran them, the host's measured side of a step) to price
    a step on `platform` with: the constants file's `host.accelerators[platform]` where
    this project's runs measured jaxcnn's loop on that platform's own client (a GPU's:
    its dispatch, kernel launches and copies are in what was timed), else `host` itself,
    measured on the CPU client (`table`: jaxcnn.perf.predict.constants())."""
    host = table.get("host") or {}
    own = (host.get("accelerators") or {}).get(platform)
    return (platform, own) if own else ("cpu", host)


def measured_dispatch(
    placement: str, table: Mapping[str, Any], platform: str = "cpu"
) -> float | None:
    """The host's round trip of one step placed `placement` (single, pmap, sharded) as
    this project's runs measured it for `platform` (`section`: the median of the
    records' `dispatch_s`), or None where no run measured that placement.

    A step placed over devices does at least the host work of one device's call, so a
    placement measured faster than `single` (medians of other runs, on a loaded
    machine) takes single's: else a step spread over N devices would be predicted to
    dispatch faster than one device's, and N devices more than N times as fast."""
    measured = section(table, platform)[1].get("dispatch_s") or {}
    own, single = measured.get(placement), measured.get("single")
    return own if own is None or single is None else max(own, single)


def modelled_parts(
    samples: Sequence[tuple[Any, ...]],
    batch_bytes: int,
    dispatches: int = 1,
    convs: int | None = None,
) -> dict[str, float | None]:
    """The step loop's host parts per step for a batch of `batch_bytes` handed over in
    `dispatches` jitted calls per step, modelled from `samples` ((batch bytes, per-step
    parts[, convolution kernels per step of the program]) of loops measured here,
    `per_step`): the parts that move the batch (BATCH_PARTS: the gather, the put) as a
    least-squares line in its bytes through each size's median, never below 0 (the
    samples' median where they have one size only, or where the line falls with the
    bytes: a copy is never cheaper for more bytes, so such a line is noise); the dispatch
    of a program of `convs` convolution kernels per step as a line in them through each
    count's median (`dispatch_line`; a count outside those measured held to the nearest),
    else the samples' median per call, times `dispatches`; the other parts' medians.
    None for a part no sample measured."""
    out: dict[str, float | None] = {}
    for part in PARTS:
        points = [(b, parts[part]) for b, parts, *_ in samples if parts.get(part) is not None]
        if not points:
            out[part] = None
            continue
        if part in BATCH_PARTS and len({b for b, _ in points}) > 1:
            # one point per batch size (its samples' median): many loops of one size (a
            # width sweep) weigh as one, what a line in the bytes can learn from
            if _slope(per_size := _medians(points)) > 0:
                out[part] = max(0.0, _line(per_size, batch_bytes))
                continue
        middle = statistics.median(seconds for _, seconds in points)
        out[part] = middle * dispatches if part == "dispatch" else middle
    line = dispatch_line(samples)
    if line is not None and convs is not None:
        # the step's own call launches its convolutions, any other call none; held to
        # the counts measured (a line through 0 and 5 says nothing of 60)
        held = min(max(convs, line[0][0]), line[-1][0])
        first, other = (max(0.0, _line(line, c)) for c in (held, line[0][0]))
        out["dispatch"] = first + other * (dispatches - 1)
    return out


def dispatch_line(samples: Sequence[tuple[Any, ...]]) -> list[tuple[int, float]] | None:
    """The points (convolution kernels per step, the median dispatch of the loops of that
    count) the dispatch is a line through, where `samples` (as `modelled_parts`'s) hold
    at least two counts and the line rises with them; else None. A GPU's runtime calls
    each convolution's library (cuDNN) from the host thread inside the jitted call, so a
    program of more convolutions is dispatched longer; a line that falls or stays flat is
    noise (a CPU runs its kernels on its own cores, not launched by the call)."""
    points = [
        (rest[0], parts["dispatch"])
        for _, parts, *rest in samples
        if rest and rest[0] is not None and parts.get("dispatch") is not None
    ]
    if len({c for c, _ in points}) < 2:
        return None
    counted = _medians(points)
    return counted if _slope(counted) > 0 else None


def convs_per_step(ks: Sequence[Any], steps: int = 1) -> int:
    """The convolution kernels one step of the program `ks` (jaxcnn.perf.hlo's kernels,
    a run of `steps` steps) launches."""
    return round(sum(k.count for k in ks if k.kind == "conv") / max(1, steps))


def _medians(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """One point per x of `points`: the median of its ys, in x's order."""
    xs = sorted({x for x, _ in points})
    return [(x, statistics.median(y for at, y in points if at == x)) for x in xs]


def _slope(points: Sequence[tuple[int, float]]) -> float:
    """The least-squares slope through `points` (seconds per byte)."""
    mean_x = statistics.fmean(b for b, _ in points)
    mean_y = statistics.fmean(s for _, s in points)
    spread = sum((b - mean_x) ** 2 for b, _ in points)
    return sum((b - mean_x) * (s - mean_y) for b, s in points) / spread


def _line(points: Sequence[tuple[int, float]], x: float) -> float:
    """The least-squares line through `points` at `x`."""
    mean_x = statistics.fmean(b for b, _ in points)
    mean_y = statistics.fmean(s for _, s in points)
    return mean_y + _slope(points) * (x - mean_x)


def parse_host_loop_key(key: str) -> tuple[str, dict[str, str], int]:
    """(model, overrides as written, global batch) of a `host_loop_key`."""
    named, batch = key.rsplit(", batch ", 1)
    model, *pairs = named.split(" ")
    return model, dict(pair.split("=", 1) for pair in pairs), int(batch)


def host_loop_key(workload: Mapping[str, Any]) -> str:
    """Where the constants file keeps a workload's measured host loop: its model, the
    overrides that make it another network (a width, an image size), its global batch
    (what the host's parts depend on: the arrays gathered, the state's leaves)."""
    overrides = workload.get("model_overrides") or {}
    named = "".join(f" {k}={v}" for k, v in sorted(overrides.items()))
    return f"{workload['model']}{named}, batch {workload['batch_size']}"


def host_side(
    *,
    measured: Mapping[str, Any] | None,
    dispatch_s: float | None,
    batch_bytes: int,
    host_link_bytes_per_s: float | None,
    platform: str = "gpu",
    steps_per_epoch: int | None = None,
    loop: str = "step",
    steps: int = 1,
    modelled: Mapping[str, float | None] | None = None,
    modelled_on: str = "cpu",
) -> dict[str, Any]:
    """What the host adds around a step's kernels in jaxcnn's loops (`predict`'s `host`):

    - parts: the step loop's host parts per step (`per_step` of
      `measured`, a record's `host_loop`: measured with the loop's own code on the host
      that runs it; else `modelled`, `modelled_parts` of the loops measured here), each
      None where it has no figure; `parts_basis` says which ("measured", "modelled");
    - transfer_s: the batch's bytes over the chip's link to its host, once per step of
      the step loop (the device loop's dataset crosses once, before training); 0 on a
      CPU, whose device memory is the host's; None where no link figure is published;
    - call_s: one call's round trip (`dispatch_s`: a call of the placed step doing no
      work, measured here), which the device loop pays once per epoch;
    - steps_per_epoch: the epoch's steps where the dataset's size is known;
    - host_s: what a step timed alone (a record's `step_time_s`) adds to its kernels:
      in the step loop (`loop`) the call's round trip and the batch's copy, in the
      device loop the call's round trip shared by the `steps` steps of one call (each
      0 where it has no figure); the fit adds it, known, to its observations."""
    transfer = None
    if platform == "cpu":
        transfer = 0.0
    elif host_link_bytes_per_s:
        transfer = batch_bytes / host_link_bytes_per_s
    if measured:
        parts, basis, ran_on = per_step(measured, steps_per_epoch), "measured", platform
    elif modelled is not None:
        parts, basis = {part: modelled.get(part) for part in PARTS}, "modelled"
        ran_on = modelled_on
    else:
        parts, basis, ran_on = dict.fromkeys(PARTS), None, None
    return {
        "parts": parts,
        "parts_basis": basis,
        "parts_platform": ran_on,
        "transfer_s": transfer,
        "call_s": dispatch_s,
        "steps_per_epoch": steps_per_epoch,
        "host_s": (dispatch_s or 0.0) / max(1, steps)
        + ((transfer or 0.0) if loop == "step" else 0.0),
    }


def loops(
    device_step_s: float,
    host: Mapping[str, Any],
    platform: str,
    runtime: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The loop step, the epoch and the device loop's step around a device step of
    `device_step_s` with the host side `host` (`host_side`):

    - loop_step_s (`loop_step`: the step loop's host parts and the
      batch's copy, overlapped or serialised as the loop runs them), loop_parts,
      loop_left_out, loop_overlap, loop_bound; with the runtime's host side `runtime`
      (jaxcnn.perf.runtime.host_side: its parts counted with the host's, its missing
      parts named in `loop_left_out`, its launches in `loop_launches`);
    - epoch_s: an epoch's loop steps, where its steps are known; its evaluation is not
      priced (no eval-step kernels are read) and is named in `epoch_left_out`;
    - device_loop_step_s: a step of the device loop (a whole epoch as one lax.scan):
      the device step plus its share of the epoch's one call (the call's round trip),
      no copy; None where the epoch's steps or the call are unknown.

    Host parts timed on `platform`'s own client (`host`'s `parts_platform`) already hold
    what its runtime costs the host, so `runtime` is not added to them a second time."""
    launches = (runtime or {}).get("launches")  # said either way: what the program launches
    runtime = {} if host.get("parts_platform") == platform else (runtime or {})
    loop = loop_step(
        device_step_s,
        {**host["parts"], **(runtime.get("parts") or {})},
        host["transfer_s"],
        platform=platform,
    )
    loop["loop_left_out"] = [
        part for part in loop["loop_left_out"] if part in PARTS or part == TRANSFER
    ] + list(runtime.get("missing") or [])
    loop["loop_parts_basis"] = host.get("parts_basis")
    loop["loop_parts_platform"] = host.get("parts_platform")
    loop["loop_launches"] = launches
    per_epoch = host.get("steps_per_epoch")
    call = host.get("call_s")
    return {
        **loop,
        "epoch_s": per_epoch * loop["loop_step_s"] if per_epoch else None,
        "epoch_steps": per_epoch,
        "epoch_left_out": ["evaluation (no eval-step kernels priced)"]
        + ([] if per_epoch else ["the epoch's steps (the dataset's size is not known)"]),
        "device_loop_step_s": (
            device_step_s + call / per_epoch if per_epoch and call is not None else None
        ),
    }


def like_training(measured: Mapping[str, Any]) -> bool:
    """Whether a record's `host_loop` ran the loop a training run makes: epochs of at
    least `check_every` steps. A split of a batch or a few (a timing-only study's
    synthetic data) ends an epoch, and syncs, every step or few: then the dispatch and
    the sync hold the device's work (on this project's CPU, a dispatch many times the
    same model's over MNIST-sized epochs), which no prediction may charge to the host."""
    every = measured.get("check_every") or CHECK_EVERY
    return (measured.get("steps_per_epoch") or 0) >= every


def per_step(
    measured: Mapping[str, Any], steps_per_epoch: int | None = None
) -> dict[str, float | None]:
    """Seconds per step of each host part from a record's `host_loop` (`measured`), for
    a loop of `steps_per_epoch` steps an epoch (None: not known): each part's median
    (the host's own work: a dispatch that waits because the runtime's queue of steps in
    flight is full waits for the device, which the median leaves out); the sync's: its
    every-step checks (its median) plus the fetch, the rest of its total over the syncs,
    spread over the steps between two syncs (`check_every`, or an epoch if shorter).
    None for a part not measured."""
    parts = measured.get("parts") or {}
    found: dict[str, float | None] = {
        part: float(parts[part]["median"]) if (parts.get(part) or {}).get("n") else None
        for part in PARTS
    }
    sync, syncs = parts.get("sync") or {}, measured.get("syncs")
    if sync.get("n") and syncs:
        every = measured.get("check_every") or CHECK_EVERY
        every = min(every, steps_per_epoch) if steps_per_epoch else every
        fetches = float(sync["mean"]) * sync["n"] - float(sync["median"]) * sync["n"]
        found["sync"] = float(sync["median"]) + max(0.0, fetches) / syncs / every
    else:
        found["sync"] = None
    return found


def loop_step(
    device_step_s: float,
    host_parts: Mapping[str, float | None],
    transfer_s: float | None,
    *,
    platform: str,
    check_every: int = CHECK_EVERY,
) -> dict[str, Any]:
    """The step `loop.fit` (loop="step") makes of a device step of `device_step_s`, with
    the host's parts per step `host_parts` (PARTS, and the runtime's host parts,
    jaxcnn.perf.runtime.PARTS; seconds; None: no figure) and the
    batch's copy over the chip's host link `transfer_s` (None: no figure):

    - on an accelerator, the host's parts of step k+1 overlap the device's step k (the
      loop dispatches ahead and reads nothing back until a sync), so a step takes the
      longer of the host's work and the device's, the device's being its kernels plus
      its batch's copy (serialised before them: the kernels wait for their batch; a
      copy engine moving the next batch during this step is not counted); and at each
      sync, one step in `check_every`, the one that waits pays the shorter side again
      (the host waits for the device to drain, then the device for the host's next
      step);
    - on a CPU, the host's work and the kernels share the cores (XLA:CPU's kernels use
      every core): they add up.

    {"loop_step_s", "loop_parts": {part: seconds or None}, "loop_left_out": [parts
    without a figure, counted 0], "loop_overlap": "overlapped" | "serialised",
    "loop_bound": "host" | "device"}. Never less than `device_step_s`.
    """
    parts: dict[str, float | None] = {part: host_parts.get(part) for part in PARTS}
    runtime = [part for part in host_parts if part not in PARTS]
    parts.update((part, host_parts[part]) for part in runtime)
    parts[TRANSFER] = 0.0 if platform == "cpu" else transfer_s
    left_out = [part for part, seconds in parts.items() if seconds is None]
    host = sum(parts[part] or 0.0 for part in (*PARTS, *runtime))
    device = device_step_s + (parts[TRANSFER] or 0.0)
    if platform == "cpu":
        step, overlap = host + device, "serialised"
    else:
        step = max(host, device) + min(host, device) / max(1, check_every)
        overlap = "overlapped"
    return {
        "loop_step_s": step,
        "loop_parts": parts,
        "loop_left_out": left_out,
        "loop_overlap": overlap,
        "loop_bound": "host" if host > device else "device",
    }
