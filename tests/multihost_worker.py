"""One process of a many-host run on CPU, driven by tests/test_multihost.py.

    python tests/multihost_worker.py OUT_DIR STRATEGY[,STRATEGY...] COORDINATOR N PROCESS_ID

Trains `STEPS` steps of a small BatchNorm model on the same global batches with each
strategy, through the library's own placement and step, and has process 0 save the
final params, batch stats and losses to OUT_DIR/STRATEGY.npz. The test imports
`train` to make the one-process reference. The device count per process comes from
JAX_NUM_CPU_DEVICES, set by the caller.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

STEPS = 3
GLOBAL_BATCH = 8
# A BatchNorm model, so batch statistics synced across processes are checked too.
MODEL, OVERRIDES = "resnet_tiny", {"stage_sizes": (1,), "num_filters": 4}
INPUT_SHAPE = (16, 16, 3)


@functools.cache
def _initial_state():
    """Initialised once per process, kept on the host: each step donates its state."""
    import jax

    from jaxcnn import models
    from jaxcnn import train as train_lib

    module = models.get(MODEL, **OVERRIDES)
    return jax.device_get(
        train_lib.create_train_state(module, train_lib.make_optimizer(), INPUT_SHAPE)
    )


def train(strategy: str, devices: Sequence) -> dict:
    """{"losses", "params[...]", "batch_stats[...]"} as numpy after `STEPS` steps."""
    import jax
    import numpy as np

    from jaxcnn import data, parallel

    placement = parallel.place(strategy, devices)
    state = placement.put_state(jax.tree.map(np.array, _initial_state()))
    images, labels = data.synthetic(GLOBAL_BATCH * STEPS, INPUT_SHAPE, 10, seed=1)
    losses = []
    for batch in data.batches(images, labels, GLOBAL_BATCH, seed=0):
        state, metrics = placement.train_step(state, placement.put_batch(batch))
        losses.append(float(placement.get_metrics(metrics)["loss"]))
    final = placement.get_state(state)
    leaves = {
        f"{field}{jax.tree_util.keystr(path)}": np.asarray(leaf)
        for field in ("params", "batch_stats")
        for path, leaf in jax.tree_util.tree_leaves_with_path(getattr(final, field))
    }
    return {"losses": np.array(losses), **leaves}


def main(argv: list[str]) -> int:
    out, strategies, coordinator, num_processes, process_id = argv
    from jaxcnn import distributed

    # before any other JAX call
    distributed.initialize(coordinator, int(num_processes), int(process_id), timeout_s=60)

    import jax
    import numpy as np

    for strategy in strategies.split(","):
        result = train(strategy, jax.devices())
        if jax.process_index() == 0:
            np.savez(Path(out) / f"{strategy}.npz", **result)
        print(
            f"{strategy}: process {jax.process_index()} of {jax.process_count()}, "
            f"{len(jax.local_devices())} of {jax.device_count()} devices, "
            f"losses {result['losses'].tolist()}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
