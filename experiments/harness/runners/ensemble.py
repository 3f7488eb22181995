"""Kind `ensemble`: `ensemble_size` models (different seeds and learning rates) on one
device, trained together as `jax.vmap` of the one train step over stacked states
(`vmap`), or one after another with the plain step (`sequential`)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from experiments.harness import measure
from experiments.harness.prepare import build_module
from experiments.harness.runners.interface import Outcome, RunContext, outcome
from experiments.harness.runners.train import Timer, compile_and_measure, shapes, step_timer
from experiments.records.workload import Workload
from jaxcnn import models, train
from jaxcnn.loop import FitOptions, evaluate, fit
from jaxcnn.parallel import place


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
    step = functools.partial(train.eval_step, axis_name=axis_name)
    return jax.vmap(step, in_axes=(0, None))(state, batch)


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


def _sequential_timer(states: list[Any], steps: int) -> Timer:
    """K models' steps one after another per timed call (on copies: the steps consume
    them), each waited for: K separate runs, summed; then one model's eval step."""

    def timer(placed: Any, state: Any, batch: Any) -> tuple:
        copies = [measure.copy_tree(s) for s in states]

        def call() -> Any:
            for i, copy in enumerate(copies):
                copies[i], metrics = placed.train_step(copy, batch)
                jax.block_until_ready(metrics)
            return copies[-1]

        step_time = measure.time_calls(call, steps=steps)
        copies.clear()  # free them before the eval step is timed
        eval_time = measure.time_eval(placed.eval_step, state, batch, steps=steps)
        return step_time, eval_time, None, {}, None

    return timer


def _scaled_fields(
    measured: dict[str, Any],
    k: int,
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
        flops["per_step"], measured["step_time_s"]["median"], devices, dtype, ceiling
    )
    kernels = [[row[0] * k, *row[1:]] for row in measured["kernels"]]  # each launched K times
    return {**measured, "flops": flops, "achieved_tflops": achieved, "mfu": mfu, "kernels": kernels}


def run_ensemble(workload: Workload, context: RunContext) -> Outcome:
    """K models on one device: vmap'd together in one step, or one after another."""
    devices = context.devices
    k, vmapped = workload.ensemble_size, workload.ensemble_mode == "vmap"
    trainable, non_trainable = models.param_counts(workload.model, **workload.model_overrides)
    train_split, test_split = context.splits
    ceiling = context.ceiling
    training = workload.epochs > 0
    fit_args = {
        "epochs": workload.epochs,
        "batch_size": workload.batch_size,
        "seed": workload.seed,
        "max_steps": workload.steps,
        "progress": context.progress,
    }

    def measured_and_trained(learned: dict[str, Any]) -> dict[str, Any]:
        stacked, seeds, rates = _ensemble_members(workload, devices)
        if vmapped:
            placement = place("single", devices, ensemble_train_step, ensemble_eval_step)
            placement = dataclasses.replace(placement, get_metrics=_mean_over_models)
            states = [placement.put_state(stacked)]
            timer = step_timer(workload, keep_state=training)
            flop_fns = {"train_fn": ensemble_train_step, "eval_fn": ensemble_eval_step}
        else:
            # The plain single-device step, compiled once: the learning rate is state,
            # so one executable serves all K runs.
            placement = place("single", devices)
            states = [placement.put_state(m) for m in _unstacked(stacked, k)]
            timer = _sequential_timer(states, workload.timing_steps)
            flop_fns = {}
        del stacked
        placed, _, fields = compile_and_measure(
            workload,
            placement,
            shapes(states[0]),
            states[0],
            train_split,
            devices,
            timer,
            ceiling,
            **flop_fns,
        )
        if not vmapped:  # K steps per measured step
            fields = _scaled_fields(fields, k, devices, workload.compute_dtype, ceiling)
        history: list[dict[str, Any]] = []
        tested: list[dict[str, float]] = []  # each model's test loss and accuracy
        if training and vmapped:
            state, history = fit(
                states[0], train_split, None, FitOptions(placement=placed, **fit_args)
            )
            if test_split is not None:  # each model alone, as the sequential ones
                one = place("single", devices)
                tested = [
                    evaluate(member, test_split, workload.batch_size, one)
                    for member in _unstacked(state, k)
                ]
        elif training:
            histories = []
            for member in states:
                trained, member_history = fit(
                    member, train_split, None, FitOptions(placement=placed, **fit_args)
                )
                histories.append(member_history)
                if test_split is not None:
                    tested.append(evaluate(trained, test_split, workload.batch_size, placed))
            history = _merged(histories)
        accuracies = [t["accuracy"] for t in tested] if tested else [None] * k
        losses = [t["loss"] for t in tested] if tested else [None] * k
        return dict(
            ensemble={
                "k": k,
                "mode": workload.ensemble_mode,
                "seeds": seeds,
                "learning_rates": rates,
                "test_accuracy": accuracies,
                "test_loss": losses,
            },
            params={"trainable": trainable, "non_trainable": non_trainable},
            images_per_s=k * workload.batch_size / fields["step_time_s"]["median"],
            **fields,
            history=history,
            test_accuracy=float(np.mean(accuracies)) if tested else None,
            test_loss=float(np.mean(losses)) if tested else None,
            train_time_s=sum(e["train_time_s"] for e in history),
        )

    return outcome(measured_and_trained)
