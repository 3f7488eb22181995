"""A workload (model x dataset x optimizer x batch x precision x strategy) and the one
function that runs it on some devices and returns its record, whatever happens."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import traceback
import uuid
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from experiments import measure, records
from jaxcnn import data, models, train
from jaxcnn import devices as devices_lib
from jaxcnn.checkpoint import Checkpoints, params_digest
from jaxcnn.errors import JaxcnnError, UsageError
from jaxcnn.loop import NonFiniteLoss, fit
from jaxcnn.parallel import check_batch_size, place

PRECISIONS = {"f32": jnp.float32, "bf16": jnp.bfloat16}
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


def load_splits(workload: Workload, data_dir: str | None = None) -> tuple[Split, Split | None]:
    """(train, test) arrays fitted to the model's input; test is None for synthetic data,
    whose accuracy would mean nothing."""
    shape = models.input_shape(workload.model, **workload.model_overrides)
    classes = models.spec(workload.model).num_outputs
    kwargs = {"shape": shape, "num_classes": max(classes, 2), "seed": workload.seed}
    train_split = data.load(workload.dataset, "train", data_dir, **kwargs)
    test_split = None
    if workload.dataset != "synthetic":
        test_split = data.load(workload.dataset, "test", data_dir, **kwargs)
    fitted = lambda s: (data.fit_to_shape(s[0], shape), s[1])  # noqa: E731
    return fitted(train_split), None if test_split is None else fitted(test_split)


def config_key(workload: Workload, device: dict[str, Any]) -> str:
    """A stable hash of what a record measures: the workload and the device platform,
    kind and count (not the host or the time). Equal keys mean "the same cell"; a
    rerun skips cells already recorded, and checkpoints live under this name."""
    what = {
        "workload": workload.describe(),
        "device": {k: device[k] for k in ("platform", "kind", "count", "process_count")},
    }
    text = json.dumps(what, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def new_record(workload: Workload, devices: list[jax.Device]) -> dict[str, Any]:
    device = devices_lib.describe(devices)
    return {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": uuid.uuid4().hex,
        "config_key": config_key(workload, device),
        "status": "error",
        "message": None,
        "workload": workload.describe(),
        "device": device,
        "env": measure.environment(),
    }


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]


def run_workload(
    workload: Workload,
    devices: list[jax.Device],
    splits: tuple[Split, Split | None],
    *,
    progress: bool = False,
    checkpoint_dir: str | None = None,
    checkpoint_every: int | None = None,
    keep_checkpoints: int = 2,
    ceiling: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Compile, time and train `workload` on `devices`; the record says how it went.

    Mistakes in what was asked (JaxcnnError) propagate; any failure while running
    becomes an `error` record with a one-line message, so a sweep goes on. A loss that
    turns NaN/inf stops training and makes a `nan` record naming the step. With
    `checkpoint_dir`, training resumes from the newest checkpoint there and saves
    every `checkpoint_every` steps and at each epoch end.
    """
    record = new_record(workload, devices)
    check_batch_size(workload.batch_size, len(devices))
    module = models.get(workload.model, **workload.module_overrides())
    shape = models.input_shape(workload.model, **workload.model_overrides)
    trainable, non_trainable = models.param_counts(workload.model, **workload.model_overrides)
    tx = train.make_optimizer(workload.optimizer, workload.learning_rate)
    train_split, test_split = splits
    placement = place(workload.strategy, devices)
    try:
        state = placement.put_state(train.create_train_state(module, tx, shape, workload.seed))
        first = next(data.batches(*train_split, workload.batch_size, seed=workload.seed))
        batch = placement.put_batch(first)
        placed, compiled = measure.compile_placement(placement, state, batch)
        step_time = measure.time_steps(
            placed.train_step, measure.copy_tree(state), batch, steps=workload.timing_steps
        )
        eval_time = measure.time_eval(placed.eval_step, state, batch, steps=workload.timing_steps)
        new_state = lambda: train.create_train_state(module, tx, shape, workload.seed)  # noqa: E731
        abstract = jax.eval_shape(new_state)  # FLOPs are counted on shapes
        measured = measure.step_fields(
            abstract,
            first,
            compiled["compiled"]["train"],
            devices,
            step_time,
            dtype=jnp.dtype(PRECISIONS[workload.precision]).name,
            ceiling=ceiling,
        )
        checkpoints = Checkpoints(checkpoint_dir, keep=keep_checkpoints) if checkpoint_dir else None
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
    except Exception as error:  # a failing workload is data, not the end of a sweep
        record["status"] = measure.classify_failure(error)  # oom is a finding; else error
        record["message"] = _one_line(error)
        record["traceback_tail"] = traceback.format_exc().splitlines()[-3:]
        return record
    last = history[-1] if history else {}
    record.update(
        status="ok",
        params={"trainable": trainable, "non_trainable": non_trainable},
        compile_time_s={"train": compiled["train"], "eval": compiled["eval"]},
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
