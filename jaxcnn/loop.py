"""`fit`: epochs of a placed train step, evaluation after each, a per-epoch history.

The host syncs once per epoch (metrics are fetched at the end), plus once per loss
check and per checkpoint, so the step loop dispatches ahead of the device. With a
`Checkpoints`, a run killed anywhere resumes from the data position it had saved and
trains exactly the batches the uninterrupted run would have: same parameters, bit for
bit, on a deterministic backend.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import threading
import time
from collections.abc import Iterator
from typing import Any

import jax
import numpy as np
from tqdm.auto import tqdm

from jaxcnn import data, distributed, host_loop, train
from jaxcnn.checkpoint import Checkpoints, Position
from jaxcnn.choices import LOOPS
from jaxcnn.epochs import device_epoch_order
from jaxcnn.errors import (
    UsageError,
    check_choice,
    check_count,
    check_seed,
    check_type,
    described,
)
from jaxcnn.parallel import Placement, place
from jaxcnn.perf.host import CHECK_EVERY

Arrays = tuple[np.ndarray, np.ndarray]


@dataclasses.dataclass(frozen=True)
class FitOptions:
    """How `fit` trains: everything but the state and the data.

    `epochs` over the training split, or `max_steps` steps in all if fewer, in batches
    of `batch_size` (global, over the placement's devices) shuffled from `seed`.
    `loop`: "step" dispatches one compiled step per batch from the host; "device" runs
    each epoch as one compiled loop on the device (jaxcnn.epochs). `placement` places
    the steps (jaxcnn.place; None: `single` on the first device). `checkpoints` resumes
    from and saves to a jaxcnn.checkpoint.Checkpoints, every `checkpoint_every` steps
    and at each epoch end. Losses are checked every `check_every` steps. `progress`
    shows a progress bar.
    """

    epochs: int = 1
    batch_size: int = 128
    seed: int = 0
    max_steps: int | None = None
    loop: str = "step"
    placement: Placement | None = None
    checkpoints: Checkpoints | None = None
    checkpoint_every: int | None = None
    check_every: int = CHECK_EVERY
    progress: bool = False

    def __post_init__(self) -> None:
        """UsageError, in one line naming the fix, for a field out of its range."""
        check_count("epochs", self.epochs, 0)
        check_count("batch_size", self.batch_size, 1)
        check_seed("seed", self.seed)
        if self.max_steps is not None:
            check_count("max_steps", self.max_steps, 0)
        check_choice("loop", self.loop, LOOPS)
        _check_placement(self.placement)
        if self.checkpoints is not None:
            fix = "give jaxcnn.checkpoint.Checkpoints(directory), or None"
            check_type("checkpoints", self.checkpoints, Checkpoints, "a Checkpoints", fix)
        if self.checkpoint_every is not None:
            check_count("checkpoint_every", self.checkpoint_every, 1)
        check_count("check_every", self.check_every, 1)
        check_type("progress", self.progress, bool, "a bool", "give True or False")


def _check_placement(placement: Any) -> None:
    if placement is not None:
        fix = "give jaxcnn.place(strategy, devices), or None for the first device"
        check_type("placement", placement, Placement, "a jaxcnn Placement", fix)


def default_placement() -> Placement:
    """Where `fit` and `evaluate` run without a placement: jit on the first device."""
    return place("single", jax.devices()[:1])


def evaluate(
    state: train.TrainState,
    dataset: Arrays,
    batch_size: int = FitOptions.batch_size,
    placement: Placement | None = None,
) -> dict[str, float]:
    """Loss and accuracy over a whole split, in batches of `batch_size` placed by
    `placement` (fit's defaults); the last batch is padded and masked. What it cannot
    take is a UsageError naming the fix, before any step."""
    check_count("batch_size", batch_size, 1)
    _check_placement(placement)
    _check_data(state, {"dataset": dataset})
    placement = placement or default_placement()
    images, labels = dataset
    # Eval steps do not depend on each other, so a runtime may run two at once (the CPU
    # one does). Across processes their collectives could then pair up in different
    # orders and deadlock: with many processes, finish each step before the next.
    in_order = jax.process_count() > 1
    metrics = []
    for batch in data.batches(images, labels, batch_size, drop_remainder=False):
        step_metrics = placement.get_metrics(placement.eval_step(state, placement.put_batch(batch)))
        metrics.append(jax.block_until_ready(step_metrics) if in_order else step_metrics)
    return train.mean_metrics(metrics)


_stop = threading.Event()


def request_stop() -> None:
    """Ask `fit` to stop at its next step boundary (epoch boundary with loop="device"),
    save a checkpoint there if it has `checkpoints`, and raise `Stopped`. Only sets a
    flag, so a signal handler may call it (a SIGTERM before a preemption)."""
    _stop.set()


def clear_stop() -> None:
    _stop.clear()


def stop_requested() -> bool:
    """Whether `request_stop` was called in this process (nothing is agreed with others:
    for work that each process does alone, such as compiling for a target)."""
    return _stop.is_set()


def stop_agreed(synced: bool = True) -> list[int]:
    """The processes that asked to stop here (empty: go on), the same on every process.

    One process stops at any step boundary after `request_stop`. With many processes
    (jax.distributed) a SIGTERM reaches only the one it was sent to, and one that stops
    alone leaves the others waiting in a collective: so they agree, by a collective,
    at the boundaries where the host has synced anyway (`synced`: a loss check, a
    checkpoint, an epoch's start), and all stop when any was asked. Every process must
    call this at the same boundaries.
    """
    if jax.process_count() == 1:
        return [0] if stop_requested() else []
    return distributed.processes_with(stop_requested()) if synced else []


class Stopped(BaseException):
    """Training stopped because `request_stop` asked it to.

    A BaseException, like KeyboardInterrupt: it is not a failure of the workload, so
    handlers that turn exceptions into records let it through. `step` is the number of
    steps trained; `saved` the checkpoint step that holds them (None: nothing saved).
    """

    def __init__(self, step: int, saved: int | None, asked_by: list[int] | None = None):
        where = f"checkpoint {saved} holds them" if saved is not None else "no checkpoint"
        by = ""
        if asked_by and jax.process_count() > 1:  # the others stopped with it, unasked
            by = f" as process {', '.join(map(str, asked_by))} of {jax.process_count()} asked"
        super().__init__(f"stopped after {step} steps{by}; {where}")
        self.step, self.saved, self.asked_by = step, saved, asked_by


class NonFiniteLoss(FloatingPointError):
    """Training stopped at the first step whose loss was NaN or infinite.

    `step` counts the steps `fit` trained (1-based); `history` holds the epochs that
    finished before it. Not a JaxcnnError: the run was asked for correctly, and a
    diverging run is a finding to record, not a usage mistake.
    """

    def __init__(self, step: int, epoch: int, loss: float, history: list[dict[str, Any]]):
        super().__init__(f"loss is {loss} at step {step} (epoch {epoch}); training stopped")
        self.step, self.epoch, self.loss, self.history = step, epoch, loss, history


def _fetch_checked(metrics: list[Any], checked: int, first_step: int, epoch: int, history):
    """Fetch metrics[checked:] to the host in one transfer, in place, and raise
    NonFiniteLoss at the first non-finite loss. `first_step` is metrics[0]'s step."""
    fetched = jax.device_get(metrics[checked:])
    for offset, step_metrics in enumerate(fetched):
        loss = float(step_metrics["loss"])
        if not math.isfinite(loss):
            raise NonFiniteLoss(first_step + checked + offset, epoch + 1, loss, history)
    metrics[checked:] = fetched
    return len(metrics)


_STATE_FIX = "make one with jaxcnn.create_train_state(model, jaxcnn.make_optimizer(), input_shape)"


def _check_data(state: Any, splits: dict[str, Any]) -> None:
    """UsageError, in one line naming the fix, unless `state` is a TrainState of a
    module the steps can call and each of `splits` (by its argument's name) is an
    (images, labels) pair the model takes (data.check_split; images of a shape the
    model's layers do not fit are found by tracing it once, without running it)."""
    check_type("the state", state, train.TrainState, "a jaxcnn TrainState", _STATE_FIX)
    model = getattr(state.apply_fn, "__self__", None)  # a module's bound apply
    if model is not None:
        train.check_module(model)
    outputs: dict[tuple, int] = {}  # per image shape: tracing a big model takes a while
    for name, split in splits.items():
        if not (isinstance(split, (tuple, list)) and len(split) == 2):
            got = described(split)
            if isinstance(split, (tuple, list)):
                got = f"{got} of {len(split)}"
            raise UsageError(
                f"{name} is {got}, not an (images, labels) pair: give one as "
                "jaxcnn.data.load returns it, e.g. jaxcnn.data.load('digits', 'train')"
            )
        images, labels = split
        data.check_arrays(name, images, labels)
        shape = (tuple(images.shape[1:]), images.dtype)
        if shape not in outputs:
            outputs[shape] = train.model_outputs(state, name, images)
        data.check_split(name, images, labels, outputs[shape])


def _fingerprint(num_examples: int, batch_size: int, seed: int) -> dict[str, int]:
    """What must match for a checkpoint's data position to mean the same batches."""
    return {"num_examples": num_examples, "batch_size": batch_size, "seed": seed}


@dataclasses.dataclass(frozen=True)
class _Run:
    """One call of `fit` as its epochs share it: its options, the placement they resolve
    to, steps per epoch and in all, the checkpoints' fingerprint, where it starts (a
    resumed checkpoint's position, the metrics of the epoch that cuts, steps done) and
    the history, which the epochs' ends append to."""

    options: FitOptions
    placement: Placement
    per_epoch: int
    total: int
    fingerprint: dict[str, Any]
    start: Position
    partial: list[Any]
    done: int
    history: list[dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class _Epoch:
    """An epoch one of the loops trained, as `_end_epoch` ends it: its metrics, the state
    and steps done after it, and where a resume goes on from (`position`; `partial`: the
    metrics of the epoch it cuts, where max_steps ended it early)."""

    index: int  # 0-based
    metrics: list[Any]
    started: float  # time.perf_counter() at its start (after a resume: at the resume)
    state: train.TrainState
    done: int
    position: Position
    partial: list[Any]
    checkpointed: bool  # its end is saved, where there are checkpoints
    compile_s: float | None = None


def fit(
    state: train.TrainState,
    train_data: Arrays,
    test_data: Arrays | None = None,
    options: FitOptions = FitOptions(),
) -> tuple[train.TrainState, list[dict[str, Any]]]:
    """Train for `options.epochs` (or `options.max_steps` in all); returns the placed
    state and history.

    `loop="step"` dispatches one compiled step per batch from the host (batches
    shuffled on the host); `loop="device"` puts the whole training set on the device
    and runs each epoch as one compiled loop (`jaxcnn.epochs`, shuffled on the device,
    so in another order), checking losses and saving checkpoints at epoch ends only;
    arrays already placed by `placement.put_dataset` are used where they are.

    A state, data or options it cannot take is a UsageError naming the fix, before any
    step (FitOptions checks its fields when it is made).

    History has one entry per epoch: steps, train loss/accuracy (mean over the epoch's
    steps), train time, and test loss/accuracy/eval time when `test_data` is given.

    With `checkpoints`, training first resumes from the newest checkpoint there, if
    any, at exactly the batch it had reached, and saves every `checkpoint_every` steps
    and at each epoch end. Losses are checked every `check_every` steps, at each
    checkpoint and at each epoch end (one transfer each, not one sync per step); the
    first non-finite one raises NonFiniteLoss naming its step. After a resume an
    epoch's `train_time_s` covers only the part trained after it. After
    `request_stop()` (a SIGTERM handler), the next step boundary saves and raises
    `Stopped`; with many processes, the next one where the loop syncs (`stop_agreed`),
    on every process at once.
    """
    fix = "give jaxcnn.FitOptions(epochs=..., batch_size=..., ...)"
    check_type("options", options, FitOptions, "a jaxcnn FitOptions", fix)
    splits = {"train_data": train_data}
    if test_data is not None:
        splits["test_data"] = test_data
    _check_data(state, splits)
    placement = options.placement or default_placement()
    batch_size, checkpoints = options.batch_size, options.checkpoints
    examples = len(train_data[1])
    per_epoch = data.steps_per_epoch(examples, batch_size)
    if per_epoch == 0:
        raise UsageError(f"batch size {batch_size} is larger than the {examples} training examples")
    total = options.epochs * per_epoch
    total = total if options.max_steps is None else min(options.max_steps, total)
    fingerprint = _fingerprint(examples, batch_size, options.seed)
    if options.loop == "device":  # another batch order: never resume the other loop's checkpoint
        fingerprint["loop"] = "device"
    state = placement.put_state(state)
    history: list[dict[str, Any]] = []
    position, partial, done = Position(0, 0), [], 0
    if checkpoints is not None:
        restored = checkpoints.restore(like=placement.get_state(state))
        if restored is not None:
            if restored.extra.get("fingerprint") != fingerprint:
                raise UsageError(
                    f"the checkpoint in {checkpoints.directory} is from another run "
                    f"({restored.extra.get('fingerprint')}, this one is {fingerprint}): "
                    "use another checkpoint directory or delete it"
                )
            state = placement.put_state(restored.state)
            position, history = restored.position, restored.history
            partial, done = restored.extra["partial"], restored.extra["done"]
            cut_short = history and history[-1]["epoch"] == position.epoch + 1
            if cut_short and done < total:  # max_steps had ended this epoch early: finish it
                history = history[:-1]
    run = _Run(options, placement, per_epoch, total, fingerprint, position, partial, done, history)
    epochs = _device_epochs if options.loop == "device" else _host_epochs
    bar = tqdm(total=total, initial=done, disable=not options.progress, unit="step", leave=False)
    with bar:
        for ended in epochs(state, train_data, run, bar):
            state = ended.state
            _end_epoch(ended, test_data, run, bar)
    return state, history


def _host_epochs(
    state: train.TrainState, train_data: Arrays, run: _Run, bar: Any
) -> Iterator[_Epoch]:
    """`fit`'s epochs with loop="step": one compiled step per batch, dispatched from the
    host; each epoch yielded when trained, and ended (`_end_epoch`) before the next."""
    options, placement = run.options, run.placement
    checkpoints, done = options.checkpoints, run.done
    images, labels = train_data
    saved = done if checkpoints is not None and done else None  # the step on disk
    # Each part of a step marked where host_loop is recording (else one check per part).
    mark = host_loop.recorder()
    for epoch in range(run.start.epoch, options.epochs):
        if done >= run.total:
            break
        skip = run.start.index if epoch == run.start.epoch else 0
        metrics: list[Any] = list(run.partial) if epoch == run.start.epoch else []
        checked, first_step = len(metrics), done - len(metrics) + 1
        started = time.perf_counter()
        if mark:
            mark.start()
        stream = data.batches(images, labels, options.batch_size, seed=options.seed, epoch=epoch)
        synced = True  # an epoch starts after a sync: the last one's end, or a resume
        for index, batch in enumerate(itertools.islice(stream, skip, None), skip + 1):
            if done >= run.total:
                break
            if mark:
                mark("batch")
            asked = stop_agreed(synced)
            if asked:  # a step boundary: index - 1 batches of this epoch done
                checked = _fetch_checked(metrics, checked, first_step, epoch, run.history)
                if checkpoints is not None and saved != done and done > 0:
                    _save(run, state, done, Position(epoch, index - 1), metrics)
                    saved = done
                raise Stopped(done, saved, asked)
            placed = placement.put_batch(batch)
            if mark:
                mark("put")
            state, step_metrics = placement.train_step(state, placed)
            if mark:
                mark("dispatch")
            metrics.append(placement.get_metrics(step_metrics))
            done += 1
            if mark:
                mark("metrics")
            bar.update()
            if mark:
                mark("progress")
            # the epoch end saves anyway, after evaluation, with the epoch's history
            mid_save = (
                checkpoints is not None
                and options.checkpoint_every is not None
                and done % options.checkpoint_every == 0
                and index < run.per_epoch
                and done < run.total
            )
            if mid_save or done % options.check_every == 0:
                if mark:  # the wait for the device timed apart from the sync
                    mark.wait(metrics[checked:])
                checked = _fetch_checked(metrics, checked, first_step, epoch, run.history)
            if mid_save:
                _save(run, state, done, Position(epoch, index), metrics)
                saved = done
            synced = mid_save or done % options.check_every == 0
            if mark:
                mark("sync")
        if mark:
            mark.wait(state)
        jax.block_until_ready(state)
        _fetch_checked(metrics, checked, first_step, epoch, run.history)
        if mark:
            mark("sync")
        whole = len(metrics) == run.per_epoch  # metrics hold the whole epoch, resumed or not
        yield _Epoch(
            epoch,
            metrics,
            started,
            state,
            done,
            # max_steps stopped mid-epoch: a longer resumed run finishes it
            position=Position(epoch + 1, 0) if whole else Position(epoch, len(metrics)),
            partial=[] if whole else metrics,
            checkpointed=True,
        )
        saved = done if checkpoints is not None else saved


def _device_epochs(
    state: train.TrainState, train_data: Arrays, run: _Run, bar: Any
) -> Iterator[_Epoch]:
    """`fit`'s epochs with loop="device": one compiled call per epoch (a shorter last one
    when `max_steps` ends mid-epoch), one host sync per epoch; each epoch yielded when
    trained, and ended (`_end_epoch`) before the next."""
    options, placement, done = run.options, run.placement, run.done
    batch_size = options.batch_size
    images, labels = train_data
    dataset = placement.put_dataset({"image": images, "label": labels})
    base = jax.random.key(options.seed)
    # Compiled apart, so train_time_s is training only; the shuffle is part of training
    # (the step loop's shuffles on the host inside its clock too).
    started = time.perf_counter()
    shuffle = device_epoch_order.lower(base, len(labels), batch_size).compile()
    shuffle_s = time.perf_counter() - started
    shuffled = jax.eval_shape(lambda key: device_epoch_order(key, len(labels), batch_size), base)
    compiled: dict[int, Any] = {}
    for epoch in range(run.start.epoch, options.epochs):
        if done >= run.total:
            break
        asked = stop_agreed()  # an epoch boundary: the epoch end was saved, if whole
        if asked:
            raise Stopped(done, done if options.checkpoints is not None and done else None, asked)
        steps = min(run.per_epoch, run.total - done)
        key = jax.random.fold_in(base, epoch)
        compile_s = None
        if steps not in compiled:
            started = time.perf_counter()
            order = jax.ShapeDtypeStruct((steps, batch_size), shuffled.dtype)
            compiled[steps] = placement.train_epoch.lower(state, dataset, order).compile()
            compile_s = time.perf_counter() - started + shuffle_s
            shuffle_s = 0.0
        started = time.perf_counter()
        order = shuffle(key)
        if steps < run.per_epoch:  # max_steps ends this epoch early
            order = order[:steps]
        state, stacked = compiled[steps](state, dataset, order)
        fetched = jax.device_get(placement.get_metrics(stacked))  # the epoch's one sync
        metrics = [{k: v[i] for k, v in fetched.items()} for i in range(steps)]
        _fetch_checked(metrics, 0, done + 1, epoch, run.history)
        done += steps
        bar.update(steps)
        yield _Epoch(
            epoch,
            metrics,
            started,
            state,
            done,
            position=Position(epoch + 1, 0),
            partial=[],
            # an epoch max_steps cut short is not saved: a device epoch has no resume point
            checkpointed=steps == run.per_epoch,
            compile_s=compile_s,
        )


def _save(
    run: _Run, state: train.TrainState, done: int, position: Position, partial: list[Any]
) -> None:
    """A checkpoint of the placed `state` (saved unplaced) after `done` steps, at
    `position`, with the history so far; `partial` holds the metrics of the steps of the
    epoch it cuts, where a resume's mean starts."""
    unplaced = run.placement.get_state(state)
    partial = [{k: float(v) for k, v in m.items()} for m in partial]
    extra = {"done": done, "partial": partial, "fingerprint": run.fingerprint}
    run.options.checkpoints.save(done, unplaced, position, run.history, extra)


def _end_epoch(ended: _Epoch, test_data: Arrays | None, run: _Run, bar: Any) -> None:
    """An epoch's end, the same in both loops: its history entry (the train metrics and
    time since it started, then the test split evaluated), the checkpoint at its
    position with that history (where there are checkpoints and the loop saves it), the
    progress bar's postfix."""
    trained = train.mean_metrics(ended.metrics)
    entry: dict[str, Any] = {
        "epoch": ended.index + 1,
        "steps": len(ended.metrics),
        "train_loss": trained["loss"],
        "train_accuracy": trained["accuracy"],
        "train_time_s": time.perf_counter() - ended.started,
    }
    if ended.compile_s is not None:
        entry["compile_time_s"] = ended.compile_s
    if test_data is not None:
        evaluated = time.perf_counter()
        tested = evaluate(ended.state, test_data, run.options.batch_size, run.placement)
        entry.update(
            test_loss=tested["loss"],
            test_accuracy=tested["accuracy"],
            eval_time_s=time.perf_counter() - evaluated,
        )
    run.history.append(entry)
    if ended.checkpointed and run.options.checkpoints is not None:
        _save(run, ended.state, ended.done, ended.position, ended.partial)
    bar.set_postfix(
        epoch=ended.index + 1,
        loss=f"{entry['train_loss']:.4f}",
        acc=f"{entry.get('test_accuracy', entry['train_accuracy']):.4f}",
    )
