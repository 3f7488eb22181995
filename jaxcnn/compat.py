"""The one place where jaxcnn meets APIs that differ between the JAX releases it supports.

The supported range is in pyproject.toml; CI runs the suite at both ends of it
(.ci/run: the oldest JAX with .ci/constraints-oldest.txt, the newest on Python 3.12).
Convention for everything version-dependent (shard_map, pmap, jax.ffi, the compile-only
topologies API for TPU/GPU targets, Orbax's checkpoint API, ...):

- it gets one small function here, and the rest of the code calls that function;
  nowhere else tests `hasattr(jax, ...)`, imports `jax.experimental` for an API that
  has a public home in newer releases, or compares `jax.__version__`;
- each function picks by feature (is the new name there?), never by version string,
  so a release that moves an API back or forward needs no edit;
- each is tested (tests/test_compat.py), and CI runs those tests at both ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax


def shard_map(f: Callable[..., Any], **kwargs: Any) -> Callable[..., Any]:
    """`jax.shard_map` (public since JAX 0.7); on older JAX, its experimental original,
    which takes the same `mesh`, `in_specs` and `out_specs` keywords."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, **kwargs)
    from jax.experimental.shard_map import shard_map as experimental_shard_map

    return experimental_shard_map(f, **kwargs)


def checkpoint_manager_options(keep: int, **kwargs: Any) -> Any:
    """Orbax `CheckpointManagerOptions` that keep the latest `keep` checkpoints, plus
    `kwargs`: a `LatestN` preservation policy where Orbax has one (its current API),
    else `max_to_keep`, its older spelling of the same rule."""
    import orbax.checkpoint as ocp  # here, not at the top: `import jaxcnn` stays quick

    managers = getattr(ocp, "checkpoint_managers", None)
    if hasattr(managers, "LatestN"):
        kwargs["preservation_policy"] = managers.LatestN(keep)
    else:
        kwargs["max_to_keep"] = keep
    return ocp.CheckpointManagerOptions(**kwargs)
