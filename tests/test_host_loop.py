"""jaxcnn's own step loop timed by its own code (jaxcnn.host_loop): each part lands
where its time was spent, dispatch returns before a step ends, nothing is timed when no
recording is on."""

import functools
import time

import jax
import pytest

from jaxcnn import data, host_loop, models, parallel, train
from jaxcnn.errors import UsageError
from jaxcnn.loop import FitOptions, fit
from jaxcnn.perf import host as host_lib

STEPS = 4
BATCH = 16


@functools.cache
def _host_state():
    tx = train.make_optimizer("adam", 1e-3)
    model = models.get("mlp", width=8)
    return jax.device_get(train.create_train_state(model, tx, models.input_shape("mlp")))


def _fit(**keywords) -> tuple[host_loop.Recorder, list]:
    images, labels = data.load("digits", "train")
    with host_loop.recording() as recorder:
        options = FitOptions(batch_size=BATCH, max_steps=STEPS, **keywords)
        _, history = fit(_host_state(), (images, labels), options=options)
    return recorder, history


def _slow_batches(monkeypatch, seconds: float) -> None:
    """data.batches, as the loop calls it, each batch `seconds` late."""
    real = data.batches

    def late(*args, **keywords):
        for batch in real(*args, **keywords):
            time.sleep(seconds)
            yield batch

    monkeypatch.setattr(data, "batches", late)


def test_every_step_has_each_host_part_and_the_loop_syncs_at_its_end():
    recorder, history = _fit()
    samples = recorder.samples
    assert recorder.steps == history[0]["steps"] == STEPS
    assert all(len(samples[part]) == STEPS for part in host_lib.PARTS)
    assert len(samples[host_lib.WAIT]) == 1  # 4 steps: no check in between, the epoch's end


def test_a_slow_batch_shows_in_the_batch_part_not_in_dispatch(monkeypatch):
    _slow_batches(monkeypatch, 0.2)
    samples = _fit()[0].samples
    assert min(samples["batch"]) >= 0.2
    assert max(samples["dispatch"]) < 0.2 and max(samples["put"]) < 0.2


def test_a_slow_dispatch_shows_in_the_dispatch_part_not_in_the_batch():
    single = parallel.place("single", jax.devices()[:1])

    def late_step(state, batch):
        time.sleep(0.2)  # on the host, before the call: a dispatch that takes long
        return single.train_step(state, batch)

    placement = parallel.Placement(**{**single.__dict__, "train_step": late_step})
    samples = _fit(placement=placement)[0].samples
    assert min(samples["dispatch"]) >= 0.2
    assert max(samples["batch"]) < 0.2 and max(samples["put"]) < 0.2


def _long_step(matmuls: int):
    """The train step followed, on the device, by `matmuls` 512x512 matmuls its loss
    depends on: a step made long where the host cannot see it."""

    def step(state, batch, axis_name=None):
        state, metrics = train.train_step(state, batch, axis_name)
        square = jax.numpy.full((512, 512), 1e-3) + metrics["loss"] * 1e-9
        square = jax.lax.fori_loop(0, matmuls, lambda _, x: jax.numpy.tanh(x @ x), square)
        return state, {**metrics, "loss": metrics["loss"] + square[0, 0] * 0}

    return step


def test_dispatch_returns_before_a_long_step_ends_and_the_sync_waits_for_it():
    placement = parallel.place("single", jax.devices()[:1], step=_long_step(100))
    images, labels = data.load("digits", "train")
    fit(
        _host_state(),
        (images, labels),
        options=FitOptions(batch_size=BATCH, max_steps=1, placement=placement),
    )
    samples = _fit(placement=placement)[0].samples  # compiled above: no compile here
    # The one sync waited for the steps still queued: the device's time, after every
    # call had come back (the host ran ahead of the device).
    [waited] = samples[host_lib.WAIT]
    assert max(samples["dispatch"]) < waited / 10


def test_nothing_is_recorded_without_a_recording_and_one_cannot_nest():
    assert host_loop.recorder() is None
    images, labels = data.load("digits", "train")
    two_steps = FitOptions(batch_size=BATCH, max_steps=2)
    fit(_host_state(), (images, labels), options=two_steps)  # no recording on
    with host_loop.recording() as recorder:
        assert host_loop.recorder() is recorder
        with pytest.raises(UsageError, match="already on"):
            with host_loop.recording():
                pass
        fit(_host_state(), (images, labels), options=two_steps)
    assert host_loop.recorder() is None and recorder.steps == 2  # the control: recorded


def test_the_harness_times_the_loop_in_windows_and_keeps_each(monkeypatch):
    from experiments.harness import measure

    calls = []
    real = data.batches

    def counted(*args, **keywords):  # each window's fit asks for its epoch's batches once
        calls.append(1)
        # the third window's batches late: its own time per step, and only its, is longer
        late = len(calls) == 1 + 3  # the warm-up's fit, then windows 1, 2, 3
        for batch in real(*args, **keywords):
            time.sleep(0.05 if late else 0)
            yield batch

    monkeypatch.setattr(data, "batches", counted)
    placement = parallel.place("single", jax.devices()[:1])
    timed = measure.time_host_loop(
        placement, _host_state(), data.load("digits", "train"), batch_size=BATCH, seed=0,
        steps=STEPS,
    )  # fmt: skip
    windows = timed["window_step_s"]
    assert len(windows) == measure.HOST_LOOP_WINDOWS and timed["steps"] == STEPS * len(windows)
    assert timed["syncs"] == len(windows)  # each window's fit ends in its one sync
    slowest = max(range(len(windows)), key=windows.__getitem__)
    assert slowest == 2 and windows[2] >= 0.05  # the late window, and no other, is slow
    assert timed["loop_step_s"] == sorted(windows)[len(windows) // 2] < 0.05
