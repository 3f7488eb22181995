"""What a compile-only command prints for a record: the words of
experiments.cli.targets.describe, on records as the compilers make them."""

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_extra, typed

from experiments.cli import targets as run_targets
from experiments.cli.run import main
from jaxcnn import targets

# A record of the targets study as libtpu made it (mnist_cnn, batch 16, f32, tpu-v5e-1).
TPU_F32 = {
    "compile_time_s": {"epoch": None, "eval": None, "train": 44.69},
    "compiled_not_run": True,
    "cost": {"bytes_accessed": 94670848.0, "flops": 259077904.0, "optimal_seconds": 1.28e-4},
    "env": {"utc_time": "2026-11-22T13:30:36+00:00"},
    "fits": True,
    "flops": {"per_step": 274661376},
    "memory": {
        "alias_bytes": 2946048,
        "argument_bytes": 3004416,
        "generated_code_bytes": 1715712,
        "output_bytes": 2948096,
        "temp_bytes": 0,
        "total_bytes": 4722176,
    },
    "message": None,
    "params": {"non_trainable": 0, "trainable": 1},
    "prediction": {
        "bandwidth_bytes_per_s": 819e9,
        "bound": "memory",
        "images_per_s": 138416.4,
        "memory_s": 1.156e-4,
        "peak_precision": "bf16",
        "peak_tflops_used": 197.0,
        "step_time_s": 1.156e-4,
    },
    "run_id": "9742dd1b1b684cdaba4b1612a95d418c",
    "status": "ok",
    "target": {
        "chip": "TPU v5e",
        "chips": 1,
        "devices": 1,
        "gpu_spec": None,
        "memory_per_device_bytes": 16000000000,
        "name": "tpu-v5e-1",
        "topology": "v5e:1x1",
        "usable_bytes_per_device": 16000000000,
        "usable_fraction": 1.0,
    },
    "workload": {
        "batch_size": 16,
        "kind": "compile",
        "model": "mnist_cnn",
        "precision": "f32",
        "strategy": "single",
        "target": "tpu-v5e-1",
    },
    "device": {"platform": "tpu", "kind": "TPU v5 lite", "count": 1, "process_count": 1},
    "schema_version": 2,
}


def _with(**changes):
    """TPU_F32 with `changes` (section__key=value), as the reader returns it."""
    record = copy.deepcopy(TPU_F32)
    for path, value in changes.items():
        section, key = path.split("__")
        record[section][key] = value
    return typed(record)


def test_an_f32_prediction_from_a_bf16_peak_says_why():
    said = run_targets.describe(_with())
    assert "f32 matmuls run as bf16 at JAX's default precision)" in said
    bf16 = run_targets.describe(_with(workload__precision="bf16"))
    assert "roofline bound" in bf16 and "f32 matmuls" not in bf16  # the positive control


def test_a_compiler_that_gives_no_bytes_says_so_in_words():
    said = run_targets.describe(_with(cost__bytes_accessed=None))
    assert "259 MFLOP, bytes accessed not given by this compiler" in said
    assert "- accessed" not in said
    assert "94.7 MB accessed" in run_targets.describe(_with())  # control: given, said


def test_a_record_taken_from_the_file_says_nothing_was_compiled_now():
    fresh, recorded = run_targets.describe(_with()), run_targets.describe(_with(), recorded=True)
    assert "compiler time here: train 44.7 s" in fresh and "compiled nothing now" not in fresh
    assert "compiler time here" not in recorded
    assert "recorded 2026-11-22T13:30:36+00:00, compiled nothing now: --force compiles" in recorded


@pytest.mark.slow
@needs_extra("targets")
def test_a_rerun_of_a_target_compile_says_it_answered_from_the_records(tmp_path, capfd):
    # capfd: the compiles run in a child process, which writes its progress to the fd.
    argv = ["--target=gpu-t4", "--model=mlp", "--set", "width=8", "--batch-size=16"]
    argv += [f"--out={tmp_path}"]
    assert main(argv) == 0
    first = capfd.readouterr()
    assert main(argv) == 0
    again = capfd.readouterr()
    assert "compiler time here" in first.out and "compiled nothing now" not in first.out
    assert "compiled nothing now" in again.out and "compiler time here" not in again.out
    # Each compile says what it compiles for which target as it starts, and its time.
    for program in ("train step", "eval step", "whole-epoch program"):
        assert f"compiling the {program} for gpu-t4...\n" in first.err
        assert re.search(f"compiled the {program} for gpu-t4 in [0-9.]+ s\n", first.err)
    assert "compiling" not in again.err  # nothing compiled the second time


BARE_TPU_TOPOLOGY = (
    "from jax.experimental import topologies; "
    "topologies.get_topology_desc('v5e:1x1', 'tpu', chips_per_host_bounds=[1, 1, 1])"
)
LIBTPU_WARNING = "could not determine TPU accelerator type"


@pytest.mark.slow
@needs_extra("targets")
def test_a_tpu_target_compile_prints_nothing_of_libtpus_to_stderr(tmp_path):
    if targets._accelerators_here():
        pytest.skip("a machine with an accelerator: libtpu's settings are left alone")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TPU_")}
    bare = subprocess.run(
        [sys.executable, "-c", BARE_TPU_TOPOLOGY], capture_output=True, text=True, env=env
    )
    assert LIBTPU_WARNING in bare.stderr  # control: libtpu on its own says it
    argv = ["--target=tpu-v5e-1", "--model=mlp", "--set", "width=8", "--batch-size=16"]
    run = subprocess.run(
        [sys.executable, "-m", "experiments.run", *argv, f"--out={tmp_path}"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parent.parent,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "compiles: yes" in run.stdout
    assert LIBTPU_WARNING not in run.stderr, run.stderr


def test_a_study_tells_each_record_once_and_names_each_cells_largest_batch(capsys):
    """The batch search starts from the batch the first pass compiled, which the records
    hand it again: told once. Each cell ends with its largest batch that fits."""
    from experiments.studies import TargetCell

    cells = [
        TargetCell("mnist_cnn", "tpu-v5e-1", "f32", "single", start=16, step=1, cap=4096),
        TargetCell("lenet5", "tpu-v5e-1", "f32", "single", start=16, step=1, cap=4096),
    ]
    limit = {"mnist_cnn": 40, "lenet5": 10}
    recorded: dict = {}
    tell = run_targets._teller(before=set())

    def runner(workload):  # recorded_runner's contract: a cell compiled once, then read back
        key = (workload.model, workload.batch_size)
        if key not in recorded:
            ok = workload.batch_size <= limit[workload.model]
            record = copy.deepcopy(TPU_F32)
            record.update(status="ok" if ok else "oom", run_id=f"{key}", fits=ok)
            record["workload"].update(model=workload.model, batch_size=workload.batch_size)
            # memory growing with the batch, to the chip table's limit at `limit`: a kept
            # record is judged by the table (select.fits), as it was when compiled
            usable = targets.describe(targets.get("tpu-v5e-1"))["usable_bytes_per_device"]
            need = workload.batch_size * (usable // limit[workload.model])
            record["memory"] = {**(record.get("memory") or {}), "total_bytes": need}
            recorded[key] = typed(record)
        tell(recorded[key])
        return recorded[key]

    done = run_targets._compile_study(cells, runner)
    out = capsys.readouterr().out
    blocks = [line for line in out.splitlines() if line.startswith("tpu-v5e-1 (")]
    assert len(blocks) == len(recorded) < len(done)  # the first batches were handed twice
    largest = [line for line in out.splitlines() if line.startswith("largest batch")]
    assert largest == [
        "largest batch that fits, mnist_cnn on tpu-v5e-1, f32: 40",
        "largest batch that fits, lenet5 on tpu-v5e-1, f32: 10",
    ]
