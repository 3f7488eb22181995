"""A Workload is plain data: the studies and the command line build workloads before
JAX starts (and without paying its import), so experiments.records.workload imports no JAX."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports_jax(module: str) -> bool:
    code = (
        f"import sys, {module}; "
        "from experiments.records.workload import Workload; "
        "Workload(precision='bf16').describe(); "
        "print('jax' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    return done.stdout.strip() == "True"


@pytest.mark.parametrize(
    "module, expected",
    [
        ("experiments.records.workload", False),
        ("experiments.harness.prepare", True),  # the positive control: the JAX side of a workload
    ],
)
def test_workload_imports_no_jax(module, expected):
    assert _imports_jax(module) is expected


def test_module_overrides_name_the_compute_dtype():
    from experiments.records.workload import Workload

    assert Workload(precision="bf16", model_overrides={"width": 8}).module_overrides() == {
        "width": 8,
        "dtype": "bfloat16",
    }
    assert Workload().module_overrides() == {}
    assert Workload(precision="bf16").compute_dtype == "bfloat16"
