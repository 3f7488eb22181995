"""Kind `train`: the placed train step compiled, timed, then trained with `fit`
(`epochs == 0`: timing only, no training, no history).

With checkpoints, the step timing is kept beside them (experiments.harness.kept.TIMING) before
training starts: a run stopped midway and resumed on the same host takes those times, measured
on the same compiled step, instead of timing it again before it trains the rest. The
kept timing belongs to its program as a checkpoint belongs to its state's layout: it
names the digest of the compiled steps it timed, and one of another program (a model
whose code changed under the same config key) is set aside into `corrupt/`, beside the
checkpoints set aside for the same reason, and the step timed again.
"""

from __future__ import annotations

import hashlib
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from experiments.harness import kept, measure
from experiments.harness.prepare import Split, build_module, training_steps
from experiments.harness.runners.interface import Outcome, RunContext, outcome
from experiments.records.workload import Workload
from jaxcnn import data, epochs, models, train
from jaxcnn.checkpoint import Checkpoints, params_digest
from jaxcnn.loop import FitOptions, fit
from jaxcnn.parallel import Placement, check_batch_size, place

# (placed, state, batch) -> (train step time, eval step time, images/s or None,
# compile seconds of any further program it compiled, and where the program it timed is
# not the train step, that program's kernels (measure.step_kernels) and steps per run):
# all JSON, so a resume can take it as kept (kept_timing)
Timer = Callable[
    [Placement, Any, Any], tuple[dict, dict, dict | None, dict[str, float], tuple | None]
]


def shapes(tree: Any) -> Any:
    """`tree` as shapes and dtypes: what FLOPs are counted on (taken before timing
    consumes the arrays)."""
    return jax.eval_shape(lambda t: t, tree)


def step_timer(workload: Workload, *, keep_state: bool) -> Timer:
    """The step loop's timer: (train step time, eval step time, images/s of blocks of
    steps; the last only for kind train). With `keep_state` the train steps run on a
    copy (training follows); else on the state itself, evaluated first, so a
    timing-only run holds one copy of the state, as training would (the batch study's
    memory)."""

    def timer(placed: Placement, state: Any, batch: Any) -> tuple:
        steps = workload.timing_steps
        images = workload.batch_size if workload.kind == "train" else None
        # every process times the same steps: a SIGTERM to one stops all (agreed)
        eval_time = measure.time_eval(placed.eval_step, state, batch, steps=steps, agreed=True)
        timed = measure.copy_tree(state) if keep_state else state
        step_time, throughput = measure.time_step_loop(
            placed.train_step, timed, batch, steps=steps, images_per_step=images, agreed=True
        )
        return step_time, eval_time, throughput, {}, None

    return timer


def epoch_timer(workload: Workload, dataset: Any, *, keep_state: bool) -> Timer:
    """The device loop's timer: the compiled epoch loop itself, `timing_steps` steps (at
    most one epoch) per call; its compile seconds come back as "epoch"."""

    def timer(placed: Placement, state: Any, batch: Any) -> tuple:
        num_examples = len(dataset["label"])
        key = jax.random.key(workload.seed)
        order = epochs.device_epoch_order(key, num_examples, workload.batch_size)
        order = order[: workload.timing_steps]  # a timing block: the first steps of an epoch
        epoch, seconds = measure.compile_epoch(placed, state, dataset, order)
        eval_time = measure.time_eval(
            placed.eval_step, state, batch, steps=workload.timing_steps, agreed=True
        )
        timed = measure.copy_tree(state) if keep_state else state
        step_time, throughput = measure.time_epoch_loop(
            epoch, timed, dataset, order, images_per_step=workload.batch_size, agreed=True
        )
        timed = (measure.step_kernels(epoch), len(order))
        return step_time, eval_time, throughput, {"epoch": seconds}, timed

    return timer


# Where each op came from (file, line, function), which XLA writes into its program text:
# not the program, and different for each call site that compiles the same one.
_SOURCE_TABLES = re.compile(r"^(FileNames|FunctionNames|FileLocations|StackFrames)\n(.+\n)*", re.M)
_OP_METADATA = re.compile(r", metadata=\{[^{}]*\}")


def program_digest(placed: Placement) -> str:
    """sha256 of the compiled train and eval steps' optimized HLO, where each op came
    from left out: the program a kept timing measured (another model, shape,
    formulation or compiler gives another)."""
    text = placed.train_step.as_text() + placed.eval_step.as_text()
    text = _OP_METADATA.sub("", _SOURCE_TABLES.sub("", text))
    return hashlib.sha256(text.encode()).hexdigest()


def kept_timing(timer: Timer, checkpoint_dir: str | Path | None) -> Timer:
    """`timer`, whose result is kept in `checkpoint_dir` (kept.TIMING) and taken from
    there by a later run of the same program on the same host (a resume: the folder is
    the workload's, and --force deletes it) instead of timing again."""
    if checkpoint_dir is None:
        return timer
    folder = Path(checkpoint_dir)
    host = socket.gethostname()

    def timed_once(placed: Placement, state: Any, batch: Any) -> tuple:
        identity = {"host": host, "program": program_digest(placed)}
        found = kept.TIMING.read(folder, identity)
        if found is not None:
            measure.phase("taking the step timing kept from before the stop, not timing again")
            return tuple(found)
        timing = timer(placed, state, batch)
        kept.TIMING.write(folder, identity, timing)
        return timing

    return timed_once


def compile_and_measure(
    workload: Workload,
    placement: Placement,
    abstract: Any,
    state: Any,
    train_split: Split,
    devices: list[jax.Device],
    timer: Timer,
    ceiling: dict[str, dict[str, Any]] | None,
    **flop_fns: Any,
) -> tuple[Placement, Any, dict[str, Any]]:
    """Compile the placed steps on the first batch of `train_split`, time them with
    `timer`, and derive FLOPs, MFU and memory: (placed, the compiled train step, the
    record's compile_time_s, step_time_s, eval_step_time_s, matmul_ceiling, flops,
    achieved_tflops, mfu, memory and, where timed, throughput). `abstract` is the
    state's shapes before placement (pmap adds a replica axis); `flop_fns` replace the
    steps FLOPs are counted on (measure.step_fields)."""
    first = next(data.batches(*train_split, workload.batch_size, seed=workload.seed))
    batch = placement.put_batch(first)
    placed, compiled = measure.compile_placement(placement, state, batch)
    dispatch = measure.time_dispatch(workload.strategy, devices, abstract, batch)
    host = measure.time_host_loop(
        placed,
        measure.copy_tree(state),
        train_split,
        batch_size=workload.batch_size,
        seed=workload.seed,
        steps=workload.timing_steps,
    )
    step_time, eval_time, throughput, more, timed = timer(placed, state, batch)
    train_step = compiled.pop("compiled")["train"]
    measured = measure.step_fields(
        abstract,
        first,
        train_step,
        devices,
        step_time,
        dtype=workload.compute_dtype,
        ceiling=ceiling,
        **flop_fns,
    )
    if throughput is not None:
        measured["throughput"] = throughput
    measured.update(
        compile_time_s={**compiled, **more},
        step_time_s=step_time,
        eval_step_time_s=eval_time,
        dispatch_s=dispatch,
        host_loop=host,
        matmul_ceiling=ceiling,
    )
    # The kernels of the program the step times came from: the predictions' input.
    kernels, steps = timed or (measure.step_kernels(train_step), 1)
    measured["kernels"] = kernels
    measured["kernels_source"] = {
        "program": "train_step" if timed is None else "epoch",
        "steps": steps,
    }
    return placed, train_step, measured


def run_train(workload: Workload, context: RunContext) -> Outcome:
    devices = context.devices
    check_batch_size(workload.batch_size, len(devices))
    module = build_module(workload, devices)
    shape = models.input_shape(workload.model, **workload.model_overrides)
    trainable, non_trainable = models.param_counts(workload.model, **workload.model_overrides)
    train_split, test_split = context.splits
    tx = train.make_optimizer(
        workload.optimizer,
        workload.learning_rate,
        schedule=workload.schedule,
        total_steps=max(1, training_steps(workload, len(train_split[1]))),
    )
    placement = place(workload.strategy, devices)
    training = workload.epochs > 0

    def measured_and_trained(learned: dict[str, Any]) -> dict[str, Any]:
        measure.phase("initialising the parameters and optimizer state")
        fresh = train.create_train_state(module, tx, shape, workload.seed)
        abstract = shapes(fresh)  # FLOPs are counted on shapes, before any placement
        state = placement.put_state(fresh)
        timer = step_timer(workload, keep_state=training)
        fit_split = train_split
        if workload.loop == "device":
            dataset = placement.put_dataset({"image": train_split[0], "label": train_split[1]})
            timer = epoch_timer(workload, dataset, keep_state=training)
            fit_split = (dataset["image"], dataset["label"])  # fit does not transfer it again
        if training:
            timer = kept_timing(timer, context.checkpoint_dir)
        placed, train_step, fields = compile_and_measure(
            workload, placement, abstract, state, train_split, devices, timer, context.ceiling
        )
        # The compiled train step's predictions (the step a device loop repeats), in the
        # record that also times it: each pair measures a prediction's error. The
        # per-kernel model is the prediction; the whole-program roofline its lower bound.
        cost = measure.step_cost(train_step, fields["flops"]["per_step"] / len(devices))
        bounds = measure.bounds(
            measure.predictions(
                cost,
                workload.batch_size,
                devices[0],
                workload.compute_dtype,
                context.ceiling,
                context.bandwidth,
            )
        )
        predicted = measure.kernel_prediction(
            fields["kernels"],
            workload.batch_size,
            devices[0],
            context.ceiling,
            context.bandwidth,
            steps=fields["kernels_source"]["steps"],
        )
        history: list[dict[str, Any]] = []
        if training:
            state, history = _fit(workload, context, learned, state, placed, fit_split, test_split)
        last = history[-1] if history else {}
        return dict(
            params={"trainable": trainable, "non_trainable": non_trainable},
            images_per_s=workload.batch_size / fields["step_time_s"]["median"],
            **fields,
            cost=cost,
            bandwidth=context.bandwidth,
            prediction=predicted,
            **bounds,
            history=history,
            test_accuracy=last.get("test_accuracy"),
            test_loss=last.get("test_loss"),
            train_time_s=sum(e["train_time_s"] for e in history),
        )

    return outcome(measured_and_trained)


def _fit(
    workload: Workload,
    context: RunContext,
    learned: dict[str, Any],
    state: Any,
    placed: Placement,
    train_split: Any,
    test_split: Any,
) -> tuple[Any, list[dict[str, Any]]]:
    """`fit`, resumed from and saving to the context's checkpoints; `learned` gets the
    step it resumed from (even if training then fails) and the trained params' digest."""
    checkpoints = None
    if context.checkpoint_dir:
        checkpoints = Checkpoints(context.checkpoint_dir, keep=context.keep_checkpoints)
    try:
        options = FitOptions(
            epochs=workload.epochs,
            batch_size=workload.batch_size,
            seed=workload.seed,
            max_steps=workload.steps,
            placement=placed,
            progress=context.progress,
            checkpoints=checkpoints,
            checkpoint_every=context.checkpoint_every,
            loop=workload.loop,
        )
        state, history = fit(state, train_split, test_split, options)
    finally:
        if checkpoints is not None:
            checkpoints.close()
            learned["resumed_from_step"] = checkpoints.restored_step
    learned["params_digest"] = params_digest(placed.get_state(state).params)
    return state, history
