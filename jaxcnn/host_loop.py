"""jaxcnn's own step loop on the host: what each step of `loop.fit` (loop="step") costs
the host whatever the accelerator is, measured by the loop's own code (the loop step
it makes on a chip is jaxcnn.perf.host's arithmetic, `loop_step`).

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
- wait (apart, jaxcnn.perf.host.WAIT): at those syncs, the host waiting for the device to finish the
  steps queued so far; the device's time, not the host's, so no host part.

The parts before the dispatch of step k+1 run while the device runs step k: they
overlap the device and block nothing. Only the syncs block.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Iterator, Mapping
from typing import Any

import jax

from jaxcnn.errors import UsageError
from jaxcnn.perf import host as host_lib
from jaxcnn.perf.host import PARTS, WAIT


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


# --- The loop's host parts for a batch not measured -------------------------------------


def batch_bytes(model: str, overrides: Mapping[str, Any], batch_size: int) -> int:
    """The bytes of a global batch of registry model `model` as jaxcnn.data.batches
    yields it: uint8 images, int32 labels, the float32 mask."""
    from jaxcnn import models

    return batch_size * (math.prod(models.input_shape(model, **overrides)) + 4 + 4)


def modelled_parts(
    nbytes: int,
    dispatches: int = 1,
    table: Mapping[str, Any] | None = None,
    platform: str = "cpu",
    leave_out: str | None = None,
    convs: int | None = None,
) -> dict[str, float | None]:
    """The host parts per step (PARTS) jaxcnn's step loop is predicted to take on
    `platform` for a batch of `nbytes` handed over in `dispatches` jitted calls per step,
    of a program of `convs` convolution kernels per step (None: not known): a model
    (jaxcnn.perf.host.modelled_parts) of the training loops this project measured
    (the constants file's host loops, those `like_training`, on the platform's own
    client where it has any, else on the CPU's: jaxcnn.perf.host.section), each at the
    bytes of its own batch and the convolutions of its own program. `leave_out`: a
    host-loop key (host_loop_key) not to use, to predict a measured loop out of sample."""
    from jaxcnn.perf import predict

    _, host = host_lib.section(table or predict.constants(), platform)
    samples = []
    for key, measured in sorted((host.get("loop") or {}).items()):
        if key == leave_out or not host_lib.like_training(measured):
            continue
        model, written, size = host_lib.parse_host_loop_key(key)
        overrides = {name: _value(text) for name, text in written.items()}
        samples.append(
            (
                batch_bytes(model, overrides, size),
                host_lib.per_step(measured),
                measured.get("convs_per_step"),
            )
        )
    return host_lib.modelled_parts(samples, nbytes, dispatches, convs)


def _value(text: str) -> Any:
    """An override's value as `host_loop_key` wrote it."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
