"""A workload (model x dataset x optimizer x batch x precision x strategy) and the one
function that runs it on some devices and returns its record, whatever happens.

Three kinds of workload share one record schema:

- `train`: the placed train step, timed, then trained with `fit` (`epochs == 0`:
  timing only, no training, no history).
- `matmul`: one jitted square matmul of side `batch_size` in `precision`, timed: the
  device's arithmetic ceiling next to the vendor's figure.
- `ensemble`: `ensemble_size` models (different seeds and learning rates) trained
  together, `jax.vmap` of the one train step over stacked states (`vmap`), or one
  after another with the plain step (`sequential`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments import measure, records
from jaxcnn import data, epochs, host_memory, models, train
from jaxcnn import devices as devices_lib
from jaxcnn import formulation as formulation_lib
from jaxcnn.checkpoint import Checkpoints, params_digest
from jaxcnn.errors import JaxcnnError, UsageError
from jaxcnn.loop import LOOPS, NonFiniteLoss, fit
from jaxcnn.loop import evaluate as evaluate_split
from jaxcnn.parallel import Placement, check_batch_size, compiler_options, place

PRECISIONS = {"f32": jnp.float32, "bf16": jnp.bfloat16}
KINDS = ("train", "matmul", "ensemble")
SCALINGS = (None, "weak", "strong")
ENSEMBLE_MODES = ("vmap", "sequential")
MATMUL_PRECISIONS = ("default", "highest")
Split = tuple[np.ndarray, np.ndarray]


@dataclasses.dataclass(frozen=True)
class Workload:
    model: str = "mnist_cnn"
    model_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    dataset: str = "digits"
    batch_size: int = 128
    epochs: int = 1
    steps: int | None = None  # cap on training steps in all; None = full epochs
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    seed: int = 0
    strategy: str = "single"
    precision: str = "f32"  # compute dtype; params and optimizer state stay f32
    timing_steps: int = 20
    # Added by the studies (schema 1 records left them out at their defaults;
    # experiments/migrate_records.py writes them in).
    study: str | None = None  # the study that made it; None for a single --model run
    kind: str = "train"  # train | matmul | ensemble
    num_devices: int | None = None  # the first N devices the sweep has; None = all
    scaling: str | None = None  # weak (per-device batch fixed) | strong (global fixed)
    ensemble_size: int = 1
    ensemble_mode: str | None = None  # vmap | sequential (kind "ensemble")
    matmul_precision: str = "default"  # "highest": true f32 matmuls (no TF32/bf16 passes)
    # The sweep skips the rest of a group after one of its workloads runs out of
    # memory (batch sizes in increasing order); not part of what is measured.
    oom_group: str | None = None
    # step: one compiled step per batch, dispatched from the host; device: the training
    # set on the device and each epoch one compiled loop (jaxcnn.epochs).
    loop: str = "step"
    # How convolutions and pools are computed (jaxcnn.formulation): auto = the
    # platform's default; the record names the one used, the config key what was asked.
    formulation: str = "auto"
    # The learning rate over the run (jaxcnn.train.learning_rate_schedule): constant,
    # or onecycle, which peaks at learning_rate and spans the run's training steps.
    schedule: str = "constant"
    # kind "compile": the targets table's name (jaxcnn/targets.py) it is compiled for,
    # not run (experiments/compile_only.py).
    target: str | None = None

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def module_overrides(self) -> dict[str, Any]:
        if self.precision not in PRECISIONS:
            raise UsageError(
                f"unknown precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}"
            )
        overrides = dict(self.model_overrides)
        if self.precision != "f32":
            overrides["dtype"] = PRECISIONS[self.precision]
        return overrides


def check(workload: Workload, devices: list[jax.Device]) -> None:
    """Raise UsageError for anything wrong in what was asked, before any work: unknown
    names, a batch that does not split over the workload's devices, too few devices."""
    if workload.kind not in KINDS:
        raise UsageError(f"unknown workload kind {workload.kind!r}: choose one of {KINDS}")
    if workload.matmul_precision not in MATMUL_PRECISIONS:
        raise UsageError(
            f"unknown matmul precision {workload.matmul_precision!r}: "
            f"choose one of {', '.join(MATMUL_PRECISIONS)}"
        )
    if workload.scaling not in SCALINGS:
        raise UsageError(f"unknown scaling {workload.scaling!r}: weak, strong or None")
    if workload.epochs < 0 or workload.timing_steps < 1 or workload.batch_size < 1:
        raise UsageError("epochs must be >= 0, timing_steps and batch_size >= 1")
    used = devices_for(workload, devices)
    formulation_lib.resolve(workload.formulation, used[0].platform)
    if workload.loop not in LOOPS:
        raise UsageError(f"unknown loop {workload.loop!r}: choose one of {', '.join(LOOPS)}")
    if workload.loop == "device" and workload.kind != "train":
        raise UsageError("loop device runs train workloads only (not matmul or ensemble)")
    if workload.kind == "matmul":
        workload.module_overrides()  # checks the precision
        return
    models.get(workload.model, **workload.module_overrides())
    train.make_optimizer(
        workload.optimizer, workload.learning_rate, schedule=workload.schedule, total_steps=1
    )
    if workload.kind == "ensemble" and workload.schedule != "constant":
        raise UsageError("an ensemble trains at a constant learning rate (schedule constant)")
    if workload.kind == "ensemble":
        if workload.ensemble_mode not in ENSEMBLE_MODES:
            raise UsageError(
                f"ensemble mode {workload.ensemble_mode!r}: choose one of {ENSEMBLE_MODES}"
            )
        if workload.ensemble_size < 1 or workload.strategy != "single":
            raise UsageError("an ensemble needs ensemble_size >= 1 and strategy single")
    check_batch_size(workload.batch_size, len(used))
    place(workload.strategy, used)  # an unknown strategy, a process without a device


def formulation_for(workload: Workload, platform: str) -> formulation_lib.Formulation:
    """The formulation `workload` runs with on `platform`."""
    return formulation_lib.resolve(workload.formulation, platform)


def build_module(workload: Workload, devices: list[jax.Device]) -> Any:
    """The workload's Flax module, convolutions formulated for the devices' platform."""
    chosen = formulation_for(workload, devices[0].platform)
    return models.get(workload.model, **workload.module_overrides(), formulation=chosen)


def devices_for(workload: Workload, devices: list[jax.Device]) -> list[jax.Device]:
    """The devices `workload` runs on: the first `num_devices` of `devices`, else all."""
    if workload.num_devices is None:
        return list(devices)
    if not 1 <= workload.num_devices <= len(devices):
        raise UsageError(
            f"workload wants {workload.num_devices} device(s) but {len(devices)} are present"
        )
    return list(devices[: workload.num_devices])


def dataset_dir(data_dir: str | None, dataset: str) -> str | None:
    """`data_dir` itself, or its `dataset` subfolder when it has one: one --data-dir
    (a folder holding mnist/ and fashion_mnist/) serves a study that reads MNIST and
    Fashion-MNIST."""
    if data_dir is not None and (Path(data_dir) / dataset).is_dir():
        return str(Path(data_dir) / dataset)
    return data_dir


def split_key(workload: Workload) -> tuple[Any, ...]:
    """Workloads with equal keys read the same arrays."""
    shape = models.input_shape(workload.model, **workload.model_overrides)
    count = _synthetic_count(workload) if _timing_only_synthetic(workload) else None
    return workload.dataset, shape, count, workload.seed if workload.dataset == "synthetic" else 0


def _timing_only_synthetic(workload: Workload) -> bool:
    # Timing reads one batch: random images beyond it would only cost memory.
    return workload.dataset == "synthetic" and workload.epochs == 0


def _synthetic_count(workload: Workload) -> int:
    # The step loop times one batch again and again; the epoch loop reads a new batch
    # at every step, so it gets as many as it times.
    steps = workload.timing_steps if workload.loop == "device" else 1
    return workload.batch_size * steps


def train_examples(workload: Workload, data_dir: str | None = None) -> int | None:
    """How many training images `workload` reads, known without reading them (an IDX
    file's header); None where that cannot be known cheaply (the loader then says why)."""
    if _timing_only_synthetic(workload):
        return _synthetic_count(workload)
    return data.train_size(workload.dataset, dataset_dir(data_dir, workload.dataset))


def load_splits(workload: Workload, data_dir: str | None = None) -> tuple[Split, Split | None]:
    """(train, test) arrays fitted to the model's input; test is None for synthetic data,
    whose accuracy would mean nothing."""
    shape = models.input_shape(workload.model, **workload.model_overrides)
    classes = models.spec(workload.model).num_outputs
    kwargs = {"shape": shape, "num_classes": max(classes, 2), "seed": workload.seed}
    if _timing_only_synthetic(workload):
        kwargs["num_examples"] = _synthetic_count(workload)
    data_dir = dataset_dir(data_dir, workload.dataset)
    train_split = data.load(workload.dataset, "train", data_dir, **kwargs)
    test_split = None
    if workload.dataset != "synthetic":
        test_split = data.load(workload.dataset, "test", data_dir, **kwargs)
    fitted = lambda s: (data.fit_to_shape(s[0], shape), s[1])  # noqa: E731
    return fitted(train_split), None if test_split is None else fitted(test_split)


def record_for(workload: Workload, devices: list[jax.Device]) -> dict[str, Any]:
    """The skeleton record (records.new_record) of `workload` on `devices`: the devices
    described, and the formulation and compiler options it runs with there."""
    device = devices_lib.describe(devices)
    return records.new_record(
        workload.describe(),
        device,
        records.environment(
            host_memory=host_memory.current(), cpu_threads=devices_lib.cpu_threads()
        ),
        loop=workload.loop,
        formulation=formulation_for(workload, device["platform"]).describe(),
        compiler_options=compiler_options(workload.strategy, device["platform"]),
    )


def _matmul_precision(workload: Workload) -> contextlib.AbstractContextManager:
    # Set around compile and run, outside model and step code: the same program, only
    # the precision XLA lowers f32 dots to differs (GPU: TF32 on/off).
    if workload.matmul_precision == "default":
        return contextlib.nullcontext()
    return jax.default_matmul_precision(workload.matmul_precision)


def run_workload(
    workload: Workload,
    devices: list[jax.Device],
    splits: tuple[Split, Split | None] | None,
    *,
    progress: bool = False,
    checkpoint_dir: str | None = None,
    checkpoint_every: int | None = None,
    keep_checkpoints: int = 2,
    ceiling: dict[str, dict[str, Any]] | None = None,
    bandwidth: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compile, time and (epochs > 0) train `workload` on `devices` (already the ones it
    runs on); the record says how it went. `splits` is None for a matmul. `ceiling` and
    `bandwidth` (measured once per run) enter its MFU and its predicted step time.

    Mistakes in what was asked (JaxcnnError) propagate; any failure while running
    becomes an `error` (or `oom`) record with a one-line message, so a sweep goes on. A
    loss that turns NaN/inf stops training and makes a `nan` record naming the step.
    With `checkpoint_dir` (kind train), training resumes from the newest checkpoint
    there and saves every `checkpoint_every` steps and at each epoch end.
    """
    with _matmul_precision(workload):
        if workload.kind == "matmul":
            return _run_matmul(workload, devices[:1], ceiling)
        if workload.kind == "ensemble":
            return _run_ensemble(workload, devices[:1], splits, progress, ceiling)
        return _run_train(
            workload,
            devices,
            splits,
            progress=progress,
            checkpoint_dir=checkpoint_dir,
            checkpoint_every=checkpoint_every,
            keep_checkpoints=keep_checkpoints,
            ceiling=ceiling,
            bandwidth=bandwidth,
        )


def _time_placed(
    placed: Placement, state: Any, batch: Any, workload: Workload, *, keep_state: bool
) -> tuple[dict, dict, dict | None]:
    """(train step time, eval step time, images/s of blocks of steps; the last only for
    kind train). With `keep_state` the train steps run on a copy (training follows);
    else on the state itself, evaluated first, so a timing-only run holds one copy of
    the state, as training would (the batch study's memory)."""
    steps = workload.timing_steps
    images = workload.batch_size if workload.kind == "train" else None
    eval_time = measure.time_eval(placed.eval_step, state, batch, steps=steps)
    timed = measure.copy_tree(state) if keep_state else state
    step_time, throughput = measure.time_step_loop(
        placed.train_step, timed, batch, steps=steps, images_per_step=images
    )
    return step_time, eval_time, throughput


def _compile_and_measure(
    placement: Placement,
    abstract: Any,
    state: Any,
    first: dict[str, Any],
    workload: Workload,
    devices: list[jax.Device],
    *,
    dtype: str,
    ceiling: dict[str, dict[str, Any]] | None,
    keep_state: bool,
    dataset: Any = None,
    **flop_fns: Any,
) -> tuple[Placement, dict, dict, dict, dict[str, Any]]:
    """Compile the placed steps on the first batch, time them, and derive FLOPs, MFU and
    memory: (placed, compile times, step time, eval step time, measured fields).
    `abstract` is the state's shapes before placement (pmap adds a replica axis)."""
    batch = placement.put_batch(first)
    placed, compiled = measure.compile_placement(placement, state, batch)
    if dataset is not None:  # loop device: time the compiled epoch loop itself
        step_time, eval_time, throughput, seconds = _time_epoch(
            placed, state, batch, dataset, workload, keep_state=keep_state
        )
        compiled["epoch"] = seconds
    else:
        step_time, eval_time, throughput = _time_placed(
            placed, state, batch, workload, keep_state=keep_state
        )
    measured = measure.step_fields(
        abstract,
        first,
        compiled["compiled"]["train"],
        devices,
        step_time,
        dtype=dtype,
        ceiling=ceiling,
        **flop_fns,
    )
    if throughput is not None:
        measured["throughput"] = throughput
    return placed, compiled, step_time, eval_time, measured


def _time_epoch(
    placed: Placement, state: Any, batch: Any, dataset: Any, workload: Workload, *, keep_state
) -> tuple[dict, dict, dict, float]:
    """(step time, eval step time, images/s, compile seconds) of the whole-epoch loop:
    `timing_steps` steps (at most one epoch) per compiled call."""
    num_examples = len(dataset["label"])
    order = epochs.epoch_order(jax.random.key(workload.seed), num_examples, workload.batch_size)
    order = order[: workload.timing_steps]  # a timing block: the first steps of an epoch
    epoch, seconds = measure.compile_epoch(placed, state, dataset, order)
    eval_time = measure.time_eval(placed.eval_step, state, batch, steps=workload.timing_steps)
    timed = measure.copy_tree(state) if keep_state else state
    step_time, throughput = measure.time_epoch_loop(
        epoch, timed, dataset, order, images_per_step=workload.batch_size
    )
    return step_time, eval_time, throughput, seconds


def training_steps(workload: Workload, num_examples: int) -> int:
    """The optimizer steps `fit` will take: full epochs, capped by `steps`."""
    total = workload.epochs * data.steps_per_epoch(num_examples, workload.batch_size)
    return total if workload.steps is None else min(workload.steps, total)


def _run_train(
    workload: Workload,
    devices: list[jax.Device],
    splits: tuple[Split, Split | None],
    *,
    progress: bool,
    checkpoint_dir: str | None,
    checkpoint_every: int | None,
    keep_checkpoints: int,
    ceiling: dict[str, dict[str, Any]] | None,
    bandwidth: dict[str, Any] | None,
) -> dict[str, Any]:
    record = record_for(workload, devices)
    check_batch_size(workload.batch_size, len(devices))
    module = build_module(workload, devices)
    shape = models.input_shape(workload.model, **workload.model_overrides)
    trainable, non_trainable = models.param_counts(workload.model, **workload.model_overrides)
    train_split, test_split = splits
    tx = train.make_optimizer(
        workload.optimizer,
        workload.learning_rate,
        schedule=workload.schedule,
        total_steps=max(1, training_steps(workload, len(train_split[1]))),
    )
    placement = place(workload.strategy, devices)
    training = workload.epochs > 0
    history: list[dict[str, Any]] = []
    try:
        measure.phase("initialising the parameters and optimizer state")
        fresh = train.create_train_state(module, tx, shape, workload.seed)
        abstract = _shapes(fresh)  # FLOPs are counted on shapes, before any placement
        state = placement.put_state(fresh)
        first = next(data.batches(*train_split, workload.batch_size, seed=workload.seed))
        dataset = None
        if workload.loop == "device":
            dataset = placement.put_dataset({"image": train_split[0], "label": train_split[1]})
        dtype = jnp.dtype(PRECISIONS[workload.precision]).name
        placed, compiled, step_time, eval_time, measured = _compile_and_measure(
            placement,
            abstract,
            state,
            first,
            workload,
            devices,
            dtype=dtype,
            ceiling=ceiling,
            keep_state=training,
            dataset=dataset,
        )
        # The roofline of the compiled train step (the step a device loop repeats), in
        # the record that also times it: the pair measures the prediction's error.
        cost = measure.step_cost(
            compiled["compiled"]["train"], measured["flops"]["per_step"] / len(devices)
        )
        measured.update(
            cost=cost,
            bandwidth=bandwidth,
            **measure.predictions(cost, workload.batch_size, devices[0], dtype, ceiling, bandwidth),
        )
        if dataset is not None:  # already on the device: fit does not transfer it again
            train_split = (dataset["image"], dataset["label"])
        if training:
            checkpoints = (
                Checkpoints(checkpoint_dir, keep=keep_checkpoints) if checkpoint_dir else None
            )
            try:
                state, history = fit(
                    state,
                    train_split,
                    test_split,
                    epochs=workload.epochs,
                    batch_size=workload.batch_size,
                    seed=workload.seed,
                    max_steps=workload.steps,
                    placement=placed,
                    progress=progress,
                    checkpoints=checkpoints,
                    checkpoint_every=checkpoint_every,
                    loop=workload.loop,
                )
            finally:
                if checkpoints is not None:
                    checkpoints.close()
                    record["resumed_from_step"] = checkpoints.restored_step
            record["params_digest"] = params_digest(placed.get_state(state).params)
    except JaxcnnError:
        raise
    except NonFiniteLoss as stopped:  # a diverging run is a finding: record where
        record.update(
            status="nan", message=str(stopped), nan_step=stopped.step, history=stopped.history
        )
        return record
    except Exception as error:
        return records.failed(record, error)
    last = history[-1] if history else {}
    record.update(
        status="ok",
        params={"trainable": trainable, "non_trainable": non_trainable},
        compile_time_s={
            "train": compiled["train"],
            "eval": compiled["eval"],
            **({"epoch": compiled["epoch"]} if "epoch" in compiled else {}),
        },
        step_time_s=step_time,
        eval_step_time_s=eval_time,
        images_per_s=workload.batch_size / step_time["median"],
        matmul_ceiling=ceiling,
        **measured,
        history=history,
        test_accuracy=last.get("test_accuracy"),
        test_loss=last.get("test_loss"),
        train_time_s=sum(e["train_time_s"] for e in history),
    )
    return record


# --- matmul ----------------------------------------------------------------------------


def _run_matmul(
    workload: Workload, devices: list[jax.Device], ceiling: dict[str, dict[str, Any]] | None
) -> dict[str, Any]:
    """One jitted (n, n) @ (n, n) in the workload's dtype on one device: 2 n^3 FLOPs."""
    record = record_for(workload, devices)
    n, device = workload.batch_size, devices[0]
    dtype = jnp.dtype(PRECISIONS[workload.precision])
    try:
        # Host-made inputs: random numbers made on the device would cost a compile each.
        rng = np.random.default_rng(workload.seed)
        a, b = (
            jax.device_put(rng.standard_normal((n, n), np.float32).astype(dtype), device)
            for _ in range(2)
        )
        started = time.perf_counter()
        compiled = jax.jit(jnp.matmul).lower(a, b).compile()
        compile_s = time.perf_counter() - started
        step_time = measure.time_calls(lambda: compiled(a, b), steps=workload.timing_steps)
        achieved, mfu = measure.utilization(2 * n**3, step_time["median"], devices, dtype.name)
        memory = measure.memory(compiled, device)
    except JaxcnnError:
        raise
    except Exception as error:  # an n that does not fit is an `oom` record
        return records.failed(record, error)
    record.update(
        status="ok",
        matmul={"n": n, "dtype": dtype.name, "flops": 2 * n**3, "tflops": achieved},
        params={"trainable": 0, "non_trainable": 0},
        compile_time_s={"train": compile_s, "eval": None},
        step_time_s=step_time,
        images_per_s=None,
        flops={"per_step": 2 * n**3},
        achieved_tflops=achieved,
        mfu={**mfu, "measured_dtype": None, "measured_ceiling_tflops": None, "vs_measured": None},
        memory=memory,
        matmul_ceiling=ceiling,
    )
    return record


# --- ensembles -------------------------------------------------------------------------


def ensemble_learning_rates(learning_rate: float, k: int) -> list[float]:
    """K learning rates spaced evenly in log from lr/10 to 3 lr (a small search around
    the default; 3e-3 is still stable for Adam on these nets); K=1 is lr itself."""
    if k == 1:
        return [float(learning_rate)]
    return [float(r) for r in np.geomspace(learning_rate / 10, learning_rate * 3, k)]


def ensemble_train_step(state: train.TrainState, batch: Any, axis_name: str | None = None):
    """`train.train_step` for K stacked states on one shared batch: jax.vmap of the one
    step (never a copy of its body); metrics come back with a leading K axis."""
    step = functools.partial(train.train_step, axis_name=axis_name)
    return jax.vmap(step, in_axes=(0, None))(state, batch)


def ensemble_eval_step(state: train.TrainState, batch: Any, axis_name: str | None = None):
    """`train.eval_step` for K stacked states: per-model metrics with a leading K axis."""
    return jax.vmap(functools.partial(train.eval_step, axis_name=axis_name), in_axes=(0, None))(
        state, batch
    )


def _mean_over_models(metrics: dict[str, Any]) -> dict[str, Any]:
    # fit() checks and logs one loss per step: the ensemble's mean (a NaN in any model
    # makes it NaN, so a diverging member still stops the run and is recorded).
    return jax.tree.map(lambda x: jnp.mean(x, axis=0), metrics)


def _ensemble_members(
    workload: Workload, devices: list[jax.Device]
) -> tuple[train.TrainState, list[int], list[float]]:
    """K fresh states, stacked on a leading axis: seeds seed..seed+K-1, each with its
    own learning rate.

    The learning rate lives in the optimizer state (optax.inject_hyperparams), so all
    K share one optimizer (a static field) and can be stacked and vmapped together.
    The states are made by one vmap of `create_train_state` (one compile, not K)."""
    k = workload.ensemble_size
    seeds = [workload.seed + i for i in range(k)]
    rates = ensemble_learning_rates(workload.learning_rate, k)
    module = build_module(workload, devices)
    shape = models.input_shape(workload.model, **workload.model_overrides)
    inject = optax.inject_hyperparams(functools.partial(train.make_optimizer, workload.optimizer))
    tx = inject(learning_rate=workload.learning_rate)
    make = lambda seed: train.create_train_state(module, tx, shape, seed)  # noqa: E731
    stacked = jax.vmap(make)(jnp.asarray(seeds))
    hyperparams = {**stacked.opt_state.hyperparams, "learning_rate": jnp.asarray(rates)}
    opt_state = stacked.opt_state._replace(hyperparams=hyperparams)
    return stacked.replace(opt_state=opt_state), seeds, rates


def _unstacked(stacked: train.TrainState, k: int) -> list[train.TrainState]:
    return [jax.tree.map(lambda x, i=i: x[i], stacked) for i in range(k)]


def _shapes(tree: Any) -> Any:
    """`tree` as shapes and dtypes: what FLOPs are counted on (taken before timing
    consumes the arrays)."""
    return jax.eval_shape(lambda t: t, tree)


def _per_model_eval(
    placed: Placement, state: train.TrainState, split: Split, batch_size: int
) -> list[dict[str, float]]:
    """Each stacked model's test loss and accuracy over a whole split (padded, masked)."""
    sums = None
    for batch in data.batches(*split, batch_size, drop_remainder=False):
        m = jax.device_get(placed.eval_step(state, placed.put_batch(batch)))
        part = np.stack([m["loss"] * m["count"], m["accuracy"] * m["count"], m["count"]])
        sums = part if sums is None else sums + part
    loss, correct, count = sums
    return [
        {"loss": float(loss[i] / count[i]), "accuracy": float(correct[i] / count[i])}
        for i in range(len(count))
    ]


def _merged(histories: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """K runs' per-epoch histories as one: losses and accuracies averaged over the
    models, times summed (the runs went one after another)."""
    merged = []
    for entries in zip(*histories, strict=True):
        entry = {}
        for key in entries[0]:
            values = [e[key] for e in entries]
            summed = key.endswith("time_s") or key == "steps"
            entry[key] = sum(values) if summed else float(np.mean(values))
        entry["epoch"] = entries[0]["epoch"]
        merged.append(entry)
    return merged


def _sequential_calls(step: Callable, states: list[Any], batch: Any) -> Callable[[], Any]:
    """One timed call = every model's step, one after another, each waited for: K
    separate runs, summed (states are consumed: pass copies)."""

    def call() -> Any:
        for i, state in enumerate(states):
            states[i], metrics = step(state, batch)
            jax.block_until_ready(metrics)
        return states[-1]

    return call


def _scaled_fields(
    measured: dict[str, Any],
    k: int,
    step_time: dict[str, Any],
    devices: list[jax.Device],
    dtype: str,
    ceiling: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """One model's step fields as K models' (sequential: K steps per measured step)."""
    flops = dict(measured["flops"])
    for key in ("per_step", "per_step_in_bounds", "xla_per_device", "xla_per_step"):
        if flops.get(key) is not None:
            flops[key] = flops[key] * k
    flops["by_primitive"] = {p: v * k for p, v in (flops.get("by_primitive") or {}).items()}
    achieved, mfu = measure.utilization(
        flops["per_step"], step_time["median"], devices, dtype, ceiling
    )
    return {**measured, "flops": flops, "achieved_tflops": achieved, "mfu": mfu}


def _run_ensemble(
    workload: Workload,
    devices: list[jax.Device],
    splits: tuple[Split, Split | None],
    progress: bool,
    ceiling: dict[str, dict[str, Any]] | None,
) -> dict[str, Any]:
    """K models on one device: vmap'd together in one step, or one after another."""
    record = record_for(workload, devices)
    k, vmapped = workload.ensemble_size, workload.ensemble_mode == "vmap"
    trainable, non_trainable = models.param_counts(workload.model, **workload.model_overrides)
    train_split, test_split = splits
    dtype = jnp.dtype(PRECISIONS[workload.precision]).name
    fit_args = {
        "epochs": workload.epochs,
        "batch_size": workload.batch_size,
        "seed": workload.seed,
        "max_steps": workload.steps,
        "progress": progress,
    }
    try:
        stacked, seeds, rates = _ensemble_members(workload, devices)
        first = next(data.batches(*train_split, workload.batch_size, seed=workload.seed))
        if vmapped:
            placement = place("single", devices, ensemble_train_step, ensemble_eval_step)
            placement = dataclasses.replace(placement, get_metrics=_mean_over_models)
            state = placement.put_state(stacked)
            abstract = _shapes(state)
            placed, compiled, step_time, eval_time, measured = _compile_and_measure(
                placement,
                abstract,
                state,
                first,
                workload,
                devices,
                dtype=dtype,
                ceiling=ceiling,
                keep_state=workload.epochs > 0,
                train_fn=ensemble_train_step,
                eval_fn=ensemble_eval_step,
            )
            history: list[dict[str, Any]] = []
            tested: list[dict[str, float]] = []
            if workload.epochs > 0:
                state, history = fit(state, train_split, None, placement=placed, **fit_args)
                if test_split is not None:
                    tested = _per_model_eval(placed, state, test_split, workload.batch_size)
        else:
            # The plain single-device step, compiled once: the learning rate is state,
            # so one executable serves all K runs.
            placement = place("single", devices)
            states = [placement.put_state(m) for m in _unstacked(stacked, k)]
            del stacked
            batch = placement.put_batch(first)
            placed, compiled = measure.compile_placement(placement, states[0], batch)
            copies = [measure.copy_tree(s) for s in states]
            step_time = measure.time_calls(
                _sequential_calls(placed.train_step, copies, batch), steps=workload.timing_steps
            )
            del copies
            eval_time = measure.time_eval(
                placed.eval_step, states[0], batch, steps=workload.timing_steps
            )
            single = measure.step_fields(
                _shapes(states[0]),
                first,
                compiled["compiled"]["train"],
                devices,
                step_time,
                dtype=dtype,
                ceiling=ceiling,
            )
            measured = _scaled_fields(single, k, step_time, devices, dtype, ceiling)
            histories, tested = [], []
            if workload.epochs > 0:
                for member in states:
                    trained, member_history = fit(
                        member, train_split, None, placement=placed, **fit_args
                    )
                    histories.append(member_history)
                    if test_split is not None:
                        tested.append(
                            evaluate_split(trained, test_split, workload.batch_size, placed)
                        )
            history = _merged(histories) if histories else []
    except JaxcnnError:
        raise
    except NonFiniteLoss as stopped:
        record.update(
            status="nan", message=str(stopped), nan_step=stopped.step, history=stopped.history
        )
        return record
    except Exception as error:
        return records.failed(record, error)
    accuracies = [t["accuracy"] for t in tested] if tested else [None] * k
    record.update(
        status="ok",
        ensemble={
            "k": k,
            "mode": workload.ensemble_mode,
            "seeds": seeds,
            "learning_rates": rates,
            "test_accuracy": accuracies,
            "test_loss": [t["loss"] for t in tested] if tested else [None] * k,
        },
        params={"trainable": trainable, "non_trainable": non_trainable},
        compile_time_s={"train": compiled["train"], "eval": compiled["eval"]},
        step_time_s=step_time,
        eval_step_time_s=eval_time,
        images_per_s=k * workload.batch_size / step_time["median"],
        matmul_ceiling=ceiling,
        **measured,
        history=history,
        test_accuracy=float(np.mean(accuracies)) if tested else None,
        test_loss=float(np.mean([t["loss"] for t in tested])) if tested else None,
        train_time_s=sum(e["train_time_s"] for e in history),
    )
    return record
