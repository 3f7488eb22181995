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


def test_f32_at_matmul_precision_highest_is_its_own_precision_in_tables_and_the_fit():
    import json

    from experiments.records.workload import F32_HIGHEST, Workload, precision_of

    assert precision_of(Workload(precision="f32", matmul_precision="highest")) == F32_HIGHEST
    # the controls: the default f32, and bf16 (whose matmuls "highest" does not make f32)
    assert precision_of(Workload(precision="f32")) == "f32"
    assert precision_of(Workload(precision="bf16", matmul_precision="highest")) == "bf16"
    # the committed fit checks the H100's f32 loop and its f32-highest loop apart: one
    # check per program, and the two are two programs
    constants = Path(__file__).parents[1] / "jaxcnn" / "perf" / "constants.json"
    loops = json.loads(constants.read_text())["loop_error"]["gpu"]["loops"]
    h100 = {c["program"] for c in loops if c["host"].startswith("NVIDIA H100")}
    assert {
        "mnist_cnn, batch 128, mnist, f32, loop step",
        "mnist_cnn, batch 128, mnist, f32-highest, loop step",
    } <= h100
