"""jaxcnn.compat at whatever JAX and Orbax this environment has (CI runs it at both ends
of the supported range), and the rule that it is the only place that asks."""

from __future__ import annotations

import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

from jaxcnn import compat

REPO = Path(__file__).resolve().parents[1]


def test_shard_map_runs_the_body_per_shard_with_its_collectives():
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))

    def body(x):  # each shard: its rows, plus the sum over all shards
        return x + jax.lax.psum(jnp.sum(x), "data")

    mapped = compat.shard_map(body, mesh=mesh, in_specs=P("data"), out_specs=P("data"))
    x = jnp.arange(8.0)
    np.testing.assert_array_equal(jax.jit(mapped)(x), np.arange(8.0) + 28.0)


def test_checkpoint_manager_options_keep_the_latest_n_and_pass_the_rest(tmp_path):
    import orbax.checkpoint as ocp

    options = compat.checkpoint_manager_options(2, enable_async_checkpointing=False)
    assert options.enable_async_checkpointing is False
    with ocp.CheckpointManager(tmp_path, options=options) as manager:
        for step in range(4):
            manager.save(step, args=ocp.args.JsonSave({"step": step}), force=True)
        manager.wait_until_finished()
        assert list(manager.all_steps()) == [2, 3]


# What only compat.py may do: ask which JAX or Orbax this is.
VERSION_CHECKS = re.compile(
    r"hasattr\((jax|ocp|orbax)\b|jax\.__version__\s*[<>=!]|from jax\.experimental\.shard_map"
)


def test_no_version_checks_outside_compat():
    sources = [*REPO.glob("jaxcnn/**/*.py"), *REPO.glob("experiments/**/*.py")]
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sources
        if path.name != "compat.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if VERSION_CHECKS.search(line)
    ]
    assert found == []
    # positive control: the pattern does find compat.py's own checks
    assert VERSION_CHECKS.search((REPO / "jaxcnn" / "compat.py").read_text())
