"""The one place where jaxcnn meets APIs that differ between the releases it supports.

The supported range is in pyproject.toml; CI runs the whole suite at both ends of it
(.ci/run: the lower bound with .ci/constraints-oldest.txt, and the newest JAX on
Python 3.12). Convention for everything version-dependent (Orbax's checkpoint API;
the compile-only topologies API, `jax.experimental.topologies`, for TPU/GPU targets;
whatever a new release moves):

- it gets one small function here, and the rest of the code calls that function;
  nowhere else tests `hasattr(jax, ...)`/`hasattr(ocp, ...)`, imports an experimental
  module for an API that has a public home, or compares `__version__` strings;
- each function picks by feature (is the new name there?), never by version string,
  so a release that moves an API back or forward needs no edit;
- each is tested (tests/test_compat.py), every branch, and CI runs those tests at
  both ends.

Needing no shim in the supported range (JAX 0.9.2 and newer): `jax.shard_map` (public
since 0.7), `jax.pmap` (implemented on shard_map since 0.8) and `jax.ffi`.
"""

from __future__ import annotations

from typing import Any


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
