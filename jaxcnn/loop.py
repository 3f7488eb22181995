"""`fit`: epochs of a placed train step, evaluation after each, a per-epoch history.

The host syncs once per epoch (metrics are fetched at the end), so the step loop
dispatches ahead of the device.
"""

from __future__ import annotations

import time
from typing import Any

import jax
import numpy as np
from tqdm.auto import tqdm

from jaxcnn import data, train
from jaxcnn.errors import UsageError
from jaxcnn.parallel import Placement, place

Arrays = tuple[np.ndarray, np.ndarray]


def evaluate(
    state: train.TrainState, dataset: Arrays, batch_size: int, placement: Placement
) -> dict[str, float]:
    """Loss and accuracy over a whole split; the last batch is padded and masked."""
    images, labels = dataset
    metrics = [
        placement.get_metrics(placement.eval_step(state, placement.put_batch(batch)))
        for batch in data.batches(images, labels, batch_size, drop_remainder=False)
    ]
    return train.mean_metrics(metrics)


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
) -> tuple[train.TrainState, list[dict[str, Any]]]:
    """Train for `epochs` (or `max_steps` in all); returns the placed state and history.

    History has one entry per epoch: steps, train loss/accuracy (mean over the epoch's
    steps), train time, and test loss/accuracy/eval time when `test_data` is given.
    """
    placement = placement or place("single", jax.devices()[:1])
    images, labels = train_data
    per_epoch = data.steps_per_epoch(len(labels), batch_size)
    if per_epoch == 0:
        raise UsageError(
            f"batch size {batch_size} is larger than the {len(labels)} training examples"
        )
    total = epochs * per_epoch if max_steps is None else min(max_steps, epochs * per_epoch)
    state = placement.put_state(state)
    history: list[dict[str, Any]] = []
    done = 0
    with tqdm(total=total, disable=not progress, unit="step", leave=False) as bar:
        for epoch in range(epochs):
            if done >= total:
                break
            started = time.perf_counter()
            metrics = []
            for batch in data.batches(images, labels, batch_size, seed=seed, epoch=epoch):
                if done >= total:
                    break
                state, step_metrics = placement.train_step(state, placement.put_batch(batch))
                metrics.append(placement.get_metrics(step_metrics))
                done += 1
                bar.update()
            jax.block_until_ready(state)
            trained = train.mean_metrics(metrics)
            entry: dict[str, Any] = {
                "epoch": epoch + 1,
                "steps": len(metrics),
                "train_loss": trained["loss"],
                "train_accuracy": trained["accuracy"],
                "train_time_s": time.perf_counter() - started,
            }
            if test_data is not None:
                started = time.perf_counter()
                tested = evaluate(state, test_data, batch_size, placement)
                entry.update(
                    test_loss=tested["loss"],
                    test_accuracy=tested["accuracy"],
                    eval_time_s=time.perf_counter() - started,
                )
            history.append(entry)
            bar.set_postfix(
                epoch=epoch + 1,
                loss=f"{entry['train_loss']:.4f}",
                acc=f"{entry.get('test_accuracy', entry['train_accuracy']):.4f}",
            )
    return state, history
