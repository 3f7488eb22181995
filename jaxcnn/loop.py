"""`fit`: epochs of a placed train step, evaluation after each, a per-epoch history.

The host syncs once per epoch (metrics are fetched at the end), plus once per loss
check and per checkpoint, so the step loop dispatches ahead of the device. With a
`Checkpoints`, a run killed anywhere resumes from the data position it had saved and
trains exactly the batches the uninterrupted run would have: same parameters, bit for
bit, on a deterministic backend.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from typing import Any

import jax
import numpy as np
from tqdm.auto import tqdm

from jaxcnn import data, distributed, host_loop, train
from jaxcnn.checkpoint import Checkpoints, Position
from jaxcnn.epochs import device_epoch_order
from jaxcnn.errors import UsageError
from jaxcnn.parallel import Placement, place
from jaxcnn.perf.host import CHECK_EVERY

Arrays = tuple[np.ndarray, np.ndarray]
LOOPS = ("step", "device")  # per-step dispatch from the host | whole epochs on device


def evaluate(
    state: train.TrainState, dataset: Arrays, batch_size: int, placement: Placement
) -> dict[str, float]:
    """Loss and accuracy over a whole split; the last batch is padded and masked."""
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


def _check_inputs(
    state: train.TrainState,
    train_data: Arrays,
    test_data: Arrays | None,
    epochs: int,
    batch_size: int,
    max_steps: int | None,
) -> None:
    """UsageError, in one line naming the fix, for what `fit` cannot train on: counts
    out of range, and data the model does not take (data.check_split; images of a shape
    the model's layers do not fit, found by tracing it once, without running it)."""
    counts = (("batch_size", batch_size, 1), ("epochs", epochs, 0), ("max_steps", max_steps, 0))
    for name, value, least in counts:
        if name == "max_steps" and value is None:
            continue
        data.check_count(name, value, least)
    model = getattr(state.apply_fn, "__self__", None)  # a module's bound apply
    if model is not None:
        train.check_module(model)
    outputs: dict[tuple, int] = {}  # per image shape: tracing a big model takes a while
    for name, split in (("train_data", train_data), ("test_data", test_data)):
        if split is None:
            continue
        images, labels = split
        data.check_arrays(name, images, labels)
        shape = (tuple(images.shape[1:]), images.dtype)
        if shape not in outputs:
            outputs[shape] = train.model_outputs(state, name, images)
        data.check_split(name, images, labels, outputs[shape])


def _fingerprint(num_examples: int, batch_size: int, seed: int) -> dict[str, int]:
    """What must match for a checkpoint's data position to mean the same batches."""
    return {"num_examples": num_examples, "batch_size": batch_size, "seed": seed}


def fit(
    state: train.TrainState,
    train_data: Arrays,
    test_data: Arrays | None = None,
    *,
    epochs: int = 1,
    batch_size: int = 128,
    seed: int = 0,
    max_steps: int | None = None,
    placement: Placement | None = None,
    progress: bool = False,
    checkpoints: Checkpoints | None = None,
    checkpoint_every: int | None = None,
    check_every: int = CHECK_EVERY,
    loop: str = "step",
) -> tuple[train.TrainState, list[dict[str, Any]]]:
    """Train for `epochs` (or `max_steps` in all); returns the placed state and history.

    `loop="step"` dispatches one compiled step per batch from the host (batches
    shuffled on the host); `loop="device"` puts the whole training set on the device
    and runs each epoch as one compiled loop (`jaxcnn.epochs`, shuffled on the device,
    so in another order), checking losses and saving checkpoints at epoch ends only;
    arrays already placed by `placement.put_dataset` are used where they are.

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
    placement = placement or place("single", jax.devices()[:1])
    if loop not in LOOPS:
        raise UsageError(f"unknown loop {loop!r}: choose one of {', '.join(LOOPS)}")
    _check_inputs(state, train_data, test_data, epochs, batch_size, max_steps)
    images, labels = train_data
    per_epoch = data.steps_per_epoch(len(labels), batch_size)
    if per_epoch == 0:
        raise UsageError(
            f"batch size {batch_size} is larger than the {len(labels)} training examples"
        )
    for name, value in (("checkpoint_every", checkpoint_every), ("check_every", check_every)):
        if value is not None and value < 1:
            raise UsageError(f"{name} must be a positive integer, got {value}")
    total = epochs * per_epoch if max_steps is None else min(max_steps, epochs * per_epoch)
    fingerprint = _fingerprint(len(labels), batch_size, seed)
    if loop == "device":  # another batch order: never resume the other loop's checkpoint
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

    if loop == "device":
        return _fit_on_device(
            state,
            train_data,
            test_data,
            epochs_total=epochs,
            batch_size=batch_size,
            seed=seed,
            total=total,
            done=done,
            first_epoch=position.epoch,
            history=history,
            placement=placement,
            progress=progress,
            checkpoints=checkpoints,
            fingerprint=fingerprint,
        )

    saved = done if checkpoints is not None and done else None  # the step on disk

    def save(epoch_position: Position, epoch_metrics: list[Any]) -> None:
        nonlocal saved
        state_now = placement.get_state(state)
        _save(checkpoints, done, state_now, epoch_position, history, epoch_metrics, fingerprint)
        saved = done

    # Each part of a step marked where host_loop is recording (else one check per part).
    mark = host_loop.recorder()
    with tqdm(total=total, initial=done, disable=not progress, unit="step", leave=False) as bar:
        for epoch in range(position.epoch, epochs):
            if done >= total:
                break
            skip = position.index if epoch == position.epoch else 0
            metrics: list[Any] = list(partial) if epoch == position.epoch else []
            checked, first_step = len(metrics), done - len(metrics) + 1
            started = time.perf_counter()
            if mark:
                mark.start()
            stream = data.batches(images, labels, batch_size, seed=seed, epoch=epoch)
            synced = True  # an epoch starts after a sync: the last one's end, or a resume
            for index, batch in enumerate(itertools.islice(stream, skip, None), skip + 1):
                if done >= total:
                    break
                if mark:
                    mark("batch")
                asked = stop_agreed(synced)
                if asked:  # a step boundary: index - 1 batches of this epoch done
                    checked = _fetch_checked(metrics, checked, first_step, epoch, history)
                    if checkpoints is not None and saved != done and done > 0:
                        save(Position(epoch, index - 1), metrics)
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
                    and checkpoint_every is not None
                    and done % checkpoint_every == 0
                    and index < per_epoch
                    and done < total
                )
                if mid_save or done % check_every == 0:
                    if mark:  # the wait for the device timed apart from the sync
                        mark.wait(metrics[checked:])
                    checked = _fetch_checked(metrics, checked, first_step, epoch, history)
                if mid_save:
                    save(Position(epoch, index), metrics)
                synced = mid_save or done % check_every == 0
                if mark:
                    mark("sync")
            if mark:
                mark.wait(state)
            jax.block_until_ready(state)
            _fetch_checked(metrics, checked, first_step, epoch, history)
            if mark:
                mark("sync")
            whole = len(metrics) == per_epoch  # metrics hold the whole epoch, resumed or not
            _end_epoch(
                epoch,
                metrics,
                started,
                state,
                history,
                bar,
                test_data=test_data,
                batch_size=batch_size,
                placement=placement,
                checkpoints=checkpoints,
                done=done,
                fingerprint=fingerprint,
                # max_steps stopped mid-epoch: a longer resumed run finishes it
                position=Position(epoch + 1, 0) if whole else Position(epoch, len(metrics)),
                partial=[] if whole else metrics,
            )
            saved = done if checkpoints is not None else saved
    return state, history


def _save(
    checkpoints: Checkpoints,
    done: int,
    state: train.TrainState,
    position: Position,
    history: list[dict[str, Any]],
    partial: list[Any],
    fingerprint: dict[str, Any],
) -> None:
    """A checkpoint of the (unplaced) `state` after `done` steps, at `position`; `partial`
    holds the metrics of the steps of the epoch it cuts, where a resume's mean starts."""
    partial = [{k: float(v) for k, v in m.items()} for m in partial]
    extra = {"done": done, "partial": partial, "fingerprint": fingerprint}
    checkpoints.save(done, state, position, history, extra)


def _end_epoch(
    epoch: int,
    metrics: list[Any],
    started: float,
    state: train.TrainState,
    history: list[dict[str, Any]],
    bar: Any,
    *,
    test_data: Arrays | None,
    batch_size: int,
    placement: Placement,
    checkpoints: Checkpoints | None,
    done: int,
    fingerprint: dict[str, Any],
    position: Position,
    partial: list[Any],
    compile_s: float | None = None,
) -> None:
    """An epoch's end, the same in both loops: its history entry (the train metrics and
    time since `started`, then the test split evaluated), the checkpoint at `position`
    with that history (where `checkpoints`), the progress bar's postfix."""
    trained = train.mean_metrics(metrics)
    entry: dict[str, Any] = {
        "epoch": epoch + 1,
        "steps": len(metrics),
        "train_loss": trained["loss"],
        "train_accuracy": trained["accuracy"],
        "train_time_s": time.perf_counter() - started,
    }
    if compile_s is not None:
        entry["compile_time_s"] = compile_s
    if test_data is not None:
        evaluated = time.perf_counter()
        tested = evaluate(state, test_data, batch_size, placement)
        entry.update(
            test_loss=tested["loss"],
            test_accuracy=tested["accuracy"],
            eval_time_s=time.perf_counter() - evaluated,
        )
    history.append(entry)
    if checkpoints is not None:
        unplaced = placement.get_state(state)
        _save(checkpoints, done, unplaced, position, history, partial, fingerprint)
    bar.set_postfix(
        epoch=epoch + 1,
        loss=f"{entry['train_loss']:.4f}",
        acc=f"{entry.get('test_accuracy', entry['train_accuracy']):.4f}",
    )


def _fit_on_device(
    state: train.TrainState,
    train_data: Arrays,
    test_data: Arrays | None,
    *,
    epochs_total: int,
    batch_size: int,
    seed: int,
    total: int,
    done: int,
    first_epoch: int,
    history: list[dict[str, Any]],
    placement: Placement,
    progress: bool,
    checkpoints: Checkpoints | None,
    fingerprint: dict[str, Any],
) -> tuple[train.TrainState, list[dict[str, Any]]]:
    """`fit` with loop="device": one compiled call per epoch (a shorter last one when
    `max_steps` ends mid-epoch), one host sync per epoch."""
    images, labels = train_data
    dataset = placement.put_dataset({"image": images, "label": labels})
    per_epoch = data.steps_per_epoch(len(labels), batch_size)
    base = jax.random.key(seed)
    # Compiled apart, so train_time_s is training only; the shuffle is part of training
    # (the step loop's shuffles on the host inside its clock too).
    started = time.perf_counter()
    shuffle = device_epoch_order.lower(base, len(labels), batch_size).compile()
    shuffle_s = time.perf_counter() - started
    shuffled = jax.eval_shape(lambda key: device_epoch_order(key, len(labels), batch_size), base)
    compiled: dict[int, Any] = {}
    with tqdm(total=total, initial=done, disable=not progress, unit="step", leave=False) as bar:
        for epoch in range(first_epoch, epochs_total):
            if done >= total:
                break
            asked = stop_agreed()  # an epoch boundary: the epoch end was saved, if whole
            if asked:
                raise Stopped(done, done if checkpoints is not None and done else None, asked)
            steps = min(per_epoch, total - done)
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
            if steps < per_epoch:  # max_steps ends this epoch early
                order = order[:steps]
            state, stacked = compiled[steps](state, dataset, order)
            fetched = jax.device_get(placement.get_metrics(stacked))  # the epoch's one sync
            metrics = [{k: v[i] for k, v in fetched.items()} for i in range(steps)]
            _fetch_checked(metrics, 0, done + 1, epoch, history)
            done += steps
            bar.update(steps)
            _end_epoch(
                epoch,
                metrics,
                started,
                state,
                history,
                bar,
                test_data=test_data,
                batch_size=batch_size,
                placement=placement,
                # an epoch max_steps cut short is not saved: a device epoch has no resume point
                checkpoints=checkpoints if steps == per_epoch else None,
                done=done,
                fingerprint=fingerprint,
                position=Position(epoch + 1, 0),
                partial=[],
                compile_s=compile_s,
            )
    return state, history
