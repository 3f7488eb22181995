"""Placements: where one train step runs, without copying its body.

    placement = place("single", devices)
    state = placement.put_state(state)
    state, metrics = placement.train_step(state, placement.put_batch(batch))

A `Placement` is the compiled step plus the functions that move state and batches to
where its strategy wants them and bring them back.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import jax

from jaxcnn import train
from jaxcnn.errors import UsageError

STRATEGIES = ("single",)


@dataclasses.dataclass(frozen=True)
class Placement:
    strategy: str
    devices: tuple[jax.Device, ...]
    train_step: Callable[..., Any]  # (state, batch) -> (state, metrics); donates state
    eval_step: Callable[..., Any]  # (state, batch) -> metrics
    put_state: Callable[[train.TrainState], train.TrainState]
    put_batch: Callable[[dict[str, Any]], dict[str, Any]]
    get_state: Callable[[train.TrainState], train.TrainState]  # -> one logical copy
    get_metrics: Callable[[dict[str, Any]], dict[str, Any]]  # -> scalars

    @property
    def num_devices(self) -> int:
        return len(self.devices)


def check_batch_size(batch_size: int, num_devices: int) -> None:
    """A global batch must split evenly over devices; the error names sizes that do."""
    if batch_size % num_devices:
        lower = batch_size - batch_size % num_devices
        options = [s for s in (lower, lower + num_devices) if s > 0]
        raise UsageError(
            f"batch size {batch_size} does not divide over {num_devices} devices: use a "
            f"multiple of {num_devices} (e.g. {' or '.join(map(str, options))})"
        )


def _single(devices: Sequence[jax.Device], step, evaluate) -> Placement:
    device = devices[0]
    put = lambda tree: jax.device_put(tree, device)  # noqa: E731
    return Placement(
        strategy="single",
        devices=(device,),
        train_step=jax.jit(step, donate_argnums=0),
        eval_step=jax.jit(evaluate),
        put_state=put,
        put_batch=put,
        get_state=lambda state: state,
        get_metrics=lambda metrics: metrics,
    )


def place(
    strategy: str,
    devices: Sequence[jax.Device],
    step: Callable[..., Any] = train.train_step,
    evaluate: Callable[..., Any] = train.eval_step,
) -> Placement:
    """Place `step` and `evaluate` (functions of (state, batch, axis_name)) on `devices`."""
    builders = {"single": _single}
    if strategy not in builders:
        raise UsageError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    return builders[strategy](list(devices), step, evaluate)
