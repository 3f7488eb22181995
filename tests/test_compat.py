"""jaxcnn.compat at whatever JAX and Orbax this environment has (CI runs it at both ends
of the supported range), and the rule that it is the only place that asks."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from jaxcnn import compat

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("orbax_api", ["this", "older"])
def test_checkpoint_manager_options_keep_the_latest_n_and_pass_the_rest(
    tmp_path, monkeypatch, orbax_api
):
    import orbax.checkpoint as ocp

    if orbax_api == "older":  # as Orbax before preservation policies: max_to_keep
        monkeypatch.delattr(ocp, "checkpoint_managers", raising=False)
    options = compat.checkpoint_manager_options(2, enable_async_checkpointing=False)
    if orbax_api == "older":
        assert options.max_to_keep == 2
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
