"""Timing that an ML-systems engineer can trust.

Compile time is lower + compile, measured apart. Step time is per step, the clock
read only after `block_until_ready`, warm-up steps excluded, reported as median with
p10/p90 and n. Timing runs on a copy of the state so training is not disturbed.
"""

from __future__ import annotations

import dataclasses
import platform
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import jax
import numpy as np

from jaxcnn.parallel import Placement


def compile_placement(placement: Placement, state: Any, batch: Any) -> tuple[Placement, dict]:
    """AOT-compile the placement's steps for these shapes: (placement using the
    compiled executables, {"train": seconds, "eval": seconds, "compiled": {...}})."""
    seconds: dict[str, float] = {}
    compiled: dict[str, Any] = {}
    for name, fn in (("train", placement.train_step), ("eval", placement.eval_step)):
        started = time.perf_counter()
        compiled[name] = fn.lower(state, batch).compile()
        seconds[name] = time.perf_counter() - started
    placed = dataclasses.replace(
        placement, train_step=compiled["train"], eval_step=compiled["eval"]
    )
    return placed, {**seconds, "compiled": compiled}


def copy_tree(tree: Any) -> Any:
    """A real copy with the same placement: the timed steps donate it."""
    return jax.tree.map(lambda x: jax.device_put(x, x.sharding, may_alias=False), tree)


def summarize(samples: list[float] | np.ndarray) -> dict[str, float | int]:
    values = np.asarray(samples, dtype=np.float64)
    return {
        "median": float(np.median(values)),
        "p10": float(np.percentile(values, 10)),
        "p90": float(np.percentile(values, 90)),
        "n": int(values.size),
    }


def time_steps(step: Any, state: Any, batch: Any, *, steps: int = 20, warmup: int = 2) -> dict:
    """Seconds per call of `step(state, batch) -> (state, metrics)`, each call timed
    alone; the state passed in is consumed (donated)."""
    for _ in range(warmup):
        state, metrics = step(state, batch)
    jax.block_until_ready((state, metrics) if warmup else state)
    samples = []
    for _ in range(steps):
        started = time.perf_counter()
        state, metrics = step(state, batch)
        jax.block_until_ready((state, metrics))
        samples.append(time.perf_counter() - started)
    return summarize(samples)


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def environment() -> dict[str, Any]:
    """Versions, commit, host and time: the `env` field of every record."""
    import flax
    import jaxlib
    import optax

    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "python": platform.python_version(),
        "git_commit": _git_commit(),
        "host": socket.gethostname(),
        "utc_time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
