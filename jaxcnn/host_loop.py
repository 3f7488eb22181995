"""jaxcnn's own step loop on the host: what each step of `loop.fit` (loop="step") costs
the host whatever the accelerator is, measured by the loop's own code, and the loop
step it makes on a chip (`loop_step`).

    with host_loop.recording() as recorder:
        jaxcnn.fit(state, train_data, options=jaxcnn.FitOptions(max_steps=100))
    recorder.samples["batch"]  # seconds, one per step

`loop.fit` marks the end of each part of a step when a recording is on (one check of
a variable per part when none is, nothing timed):

- batch: `data.batches` building the next batch (the epoch's shuffle on its first
  batch, the gather of images and labels, the mask);
- put: `placement.put_batch`, the batch handed to the device (`jax.device_put`), and
  the loop's stop check (a flag read);
- dispatch: the jitted step called; it returns once the step is queued, before its
  kernels end (JAX dispatches asynchronously until something reads a value);
- metrics: the step's metrics kept (`placement.get_metrics`, still on the device);
- progress: the progress bar's update;
- sync: the loop's own checks, and every `check_every` steps (and at an epoch's end)
  the metrics fetched to the host and their losses checked (`jax.device_get`), the
  host's side of it only; a checkpoint saved mid-epoch, where one falls due;
- wait (apart, WAIT): at those syncs, the host waiting for the device to finish the
  steps queued so far; the device's time, not the host's, so no host part.

The parts before the dispatch of step k+1 run while the device runs step k: they
overlap the device and block nothing. Only the syncs block.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator, Mapping
from typing import Any

import jax

from jaxcnn.errors import UsageError

PARTS = ("batch", "put", "dispatch", "metrics", "progress", "sync")
WAIT = "wait"
# loop.fit's default: its losses are fetched and checked every CHECK_EVERY steps.
CHECK_EVERY = 50
# The copy of a batch over the chip's host link, priced (not measured here): a CPU has
# none, its device memory is the host's.
TRANSFER = "transfer"


class Recorder:
    """The host's seconds of each part of each step `loop.fit` ran while it recorded:
    `samples[part]`, one per step for PARTS (an epoch's closing sync counted in its
    last step's), one per sync for WAIT."""

    def __init__(self) -> None:
        self._steps: list[dict[str, float]] = []
        self._waits: list[float] = []
        self._last = time.perf_counter()

    def start(self) -> None:
        """The clock starts again: what the loop does between epochs (an epoch's
        evaluation, a checkpoint) belongs to no part."""
        self._last = time.perf_counter()

    def __call__(self, part: str) -> None:
        """`part` of the current step ended now: the seconds since the last mark are
        its. PARTS[0] begins a step."""
        now = time.perf_counter()
        if part == PARTS[0]:
            self._steps.append(dict.fromkeys(PARTS, 0.0))
        if self._steps:
            self._steps[-1][part] += now - self._last
        self._last = now

    def wait(self, tree: Any) -> None:
        """The host waits for `tree` (what a sync is about to fetch) to be ready: the
        time the device still needed, kept as WAIT and out of the part running, so that
        the fetch that follows is the host's alone (it would have waited as long)."""
        began = time.perf_counter()
        jax.block_until_ready(tree)
        waited = time.perf_counter() - began
        self._waits.append(waited)
        self._last += waited

    @property
    def samples(self) -> dict[str, list[float]]:
        return {
            **{part: [step[part] for step in self._steps] for part in PARTS},
            WAIT: list(self._waits),
        }

    @property
    def steps(self) -> int:
        return len(self._steps)


_recording: contextvars.ContextVar[Recorder | None] = contextvars.ContextVar(
    "jaxcnn_host_loop", default=None
)


def recorder() -> Recorder | None:
    """The recording on in this context, if any (what `loop.fit` marks)."""
    return _recording.get()


@contextlib.contextmanager
def recording() -> Iterator[Recorder]:
    """Record the host parts of every step `loop.fit` runs inside the block."""
    if _recording.get() is not None:
        raise UsageError("a host-loop recording is already on: end it before starting another")
    recorder_ = Recorder()
    token = _recording.set(recorder_)
    try:
        yield recorder_
    finally:
        _recording.reset(token)


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
    the host's parts per step `host_parts` (PARTS, seconds; None: no figure) and the
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
    parts[TRANSFER] = 0.0 if platform == "cpu" else transfer_s
    left_out = [part for part, seconds in parts.items() if seconds is None]
    host = sum(parts[part] or 0.0 for part in PARTS)
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
