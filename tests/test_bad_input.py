"""Every bad input through the CLI: one line on stderr, exit code 2, no traceback, and
nothing written half (no records file, no checkpoint). Bad --coordinator addresses are
tested with the multi-host placements."""

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import write_idx

from experiments import records
from experiments.cli import plan as cli_plan
from experiments.cli.run import main, parse_args
from experiments.harness import sweep
from experiments.records.workload import Workload
from jaxcnn import targets

TINY = ["--epochs", "1", "--set", "steps=2", "--set", "timing_steps=2", "--batch-size", "16"]
TINY += ["--set", "progress=false"]
MLP = ["--model", "mlp", "--set", "width=8"]


def _tree(folder: Path) -> list[tuple[str, bool, int]] | None:
    """Everything under `folder` (None if it does not exist): what a run wrote."""
    if not folder.exists():
        return None
    found = [folder, *folder.rglob("*")]
    return sorted((str(p.relative_to(folder)), p.is_dir(), p.stat().st_size) for p in found)


def _assert_one_line_exit_2(argv, capsys, message, out: Path) -> None:
    before = _tree(out)
    try:
        code = main(argv)
    except SystemExit as exit_info:  # argparse rejects flags before main's body runs
        code = exit_info.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert message in err, err
    assert "Traceback" not in err
    assert _tree(out) == before  # nothing written: no records file, no empty folders


def test_a_usage_error_leaves_a_new_out_folder_unmade(tmp_path, capsys):
    out = tmp_path / "new" / "out"
    argv = ["--out", str(out), *TINY, *MLP, "--batch-size", "2000"]
    _assert_one_line_exit_2(argv, capsys, "larger than the 1,438 training images", out)
    assert list(tmp_path.iterdir()) == []
    assert main(["--out", str(out), *TINY, *MLP]) == 0  # control: a run makes them
    assert (out / records.RECORDS_FILE).exists() and (out / "checkpoints").is_dir()


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--device", "quantum"], "unknown device 'quantum'"),
        (["--device", "tpu"], "present: cpu"),
        (["--model", "lenet6"], "unknown model 'lenet6'"),
        (["--dataset", "cifar"], "unknown dataset 'cifar'"),
        (["--study", "everything"], "unknown study 'everything': choose one of default"),
        (["--set", "precision=f8"], "unknown precision 'f8'"),
        (["--timing-steps", "5"], "--timing-steps is now --set timing_steps=VALUE"),
        (["--set", "optimizer=lbfgs", *MLP], "unknown optimizer 'lbfgs'"),
        (["--data-dir", "/nonexistent", "--dataset", "mnist", *MLP], "does not exist"),
        (["--summary"], "--summary needs --model"),
        (
            ["--set", "checkpoints=false", "--set", "checkpoint_every=5"],
            "cannot go with --set checkpoints=false",
        ),
        (["--set", "formulation=winograd", *MLP], "unknown formulation 'winograd'"),
        (["--set", "loop=async", *MLP], "unknown loop 'async': choose one of step, device"),
        (["--set", "host_memory=huge", *MLP], "unknown host memory policy 'huge'"),
        (
            ["--study", "bench", "--set", "loop=device"],
            "--set loop, --set timing_steps cannot go with",
        ),
        (["--set", "schedule=cosine", *MLP], "unknown schedule 'cosine': choose one of constant"),
        (["--set", f"timing_steps={10**14}", *MLP], f"{10**14} is above 10,000 (each is timed"),
        (["--epochs", "100000", *MLP], "100000 is above 10,000"),
        (["--batch-size", str(2**27), *MLP], "134217728 is above 67,108,864"),
        (["--set", f"steps={10**9}", *MLP], "1000000000 is above 100,000,000"),
        (["--num-devices", "100000", *MLP], "100000 is above 8,192"),
        (["--set", "timing-steps=5", *MLP], "unknown setting 'timing-steps': did you mean"),
        (["--set", "timing_steps", *MLP], "'timing_steps' is not NAME=VALUE"),
        (["--set", "checkpoints=no", *MLP], "'no' is not true or false"),
        (["--model", "mnistcnn"], "unknown model 'mnistcnn': did you mean mnist_cnn? choose"),
        (["--study", "matmull"], "unknown study 'matmull': did you mean matmul? choose"),
        (["--dataset", "fashion-mnist"], "did you mean fashion_mnist? choose one of digits"),
        (["--target", "tpu-v5e-9", *MLP], "unknown target 'tpu-v5e-9': did you mean tpu-v5e-"),
        (
            ["--model", "mlp", "--study", "matmul"],
            "--model=mlp and --study=matmul cannot go together",
        ),
        (
            ["--num-devices", "9"],
            "only 8 cpu device(s) are present; for 9 CPU devices set JAX_NUM_CPU_DEVICES=9",
        ),
    ],
)
def test_a_bad_name_or_device_is_one_line(tmp_path, capsys, argv, message):
    _assert_one_line_exit_2(["--out", str(tmp_path), *TINY, *argv], capsys, message, tmp_path)


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--batch-size", "0"], "0 is not a positive integer"),
        (["--batch-size", "x"], "'x' is not an integer"),
        (["--epochs", "-1"], "-1 is not an integer >= 0"),
        (["--set", "steps=1.5"], "'1.5' is not an integer"),
        (["--num-devices", "0"], "0 is not a positive integer"),
        (["--set", "checkpoint_every=0"], "0 is not a positive integer"),
        (["--set", "learning_rate=-0.1"], "-0.1 is not positive"),
        (["--set", "learning_rate=fast"], "'fast' is not a number"),
        (["--set", "learning_rate=inf"], "'inf' is not a finite number"),
        (["--set", "learning_rate=nan"], "'nan' is not a finite number"),
        (["--set", "seed=-1"], "-1 is not an integer >= 0"),
        (["--set", f"seed={2**40}"], f"{2**40} is not in 0..2147483647"),
        (["--batch-size", "2000", *MLP], "batch 2000 is larger than the 1,438 training images"),
        (["--batch-size", str(10**12)], "is above 67,108,864"),
        (["--batch-size", "1439", *MLP], "choose --batch-size 1438 or less"),
        (["--dataset", "synthetic", "--batch-size", "4096", *MLP], "the 2,048 training images"),
        (["--data-dir", "/nonexistent", *MLP], "--data-dir is read for mnist and fashion_mnist"),
        pytest.param(
            [
                "--dataset",
                "synthetic",
                "--epochs",
                "0",
                "--batch-size",
                str(2**20),
                "--model",
                "catsdogs_cnn",
            ],
            "of memory this machine has available now",
            id="synthetic-batch-of-2**20-catsdogs",
        ),
    ],
)
def test_a_bad_number_is_one_line(tmp_path, capsys, argv, message):
    _assert_one_line_exit_2(["--out", str(tmp_path), *TINY, *argv], capsys, message, tmp_path)


def test_more_training_steps_than_the_step_counter_holds_is_one_line(tmp_path, capsys):
    argv = ["--out", str(tmp_path), *MLP, "--batch-size", "16", "--set", "schedule=onecycle"]
    message = "--epochs: 100000000000 is above 10,000"  # the bound comes first now
    _assert_one_line_exit_2([*argv, "--epochs", str(10**11)], capsys, message, tmp_path)
    # the control: as many epochs, capped by --set steps, are run (compiled, here)
    assert sweep.check_sizes(Workload(model="mlp", epochs=10**11, steps=2), 1438) is None


def test_a_batch_larger_than_an_idx_training_set_names_its_size(idx_dir, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["--out", str(out), *TINY, *MLP, "--dataset", "mnist", "--data-dir", str(idx_dir)]
    _assert_one_line_exit_2([*argv, "--batch-size", "65"], capsys, "the 64 training images", out)
    fits = [*argv, "--batch-size", "64", "--set", "checkpoints=false"]
    assert main(fits) == 0  # control: it fits


def test_an_out_folder_whose_name_is_too_long_is_one_line(tmp_path, capsys):
    out = tmp_path / ("x" * 300)  # over the 255 bytes a file name may have
    argv = ["--out", str(out), *TINY, *MLP]
    message = f"cannot write to --out {out}: File name too long"
    _assert_one_line_exit_2(argv, capsys, message, tmp_path)  # nothing made in its parent


def test_a_batch_that_does_not_divide_over_the_devices(tmp_path, capsys):
    argv = ["--out", str(tmp_path), *TINY, *MLP, "--strategy", "pmap", "--num-devices", "8"]
    argv += ["--batch-size", "12"]
    _assert_one_line_exit_2(argv, capsys, "does not divide over 8 devices", tmp_path)


def test_a_folder_that_cannot_hold_files_is_named_as_given(tmp_path, capsys):
    # /proc takes no new files, and says so when one is made there
    argv = ["--out", "/proc/jaxcnn-out", *TINY, *MLP]
    _assert_one_line_exit_2(argv, capsys, "cannot write to --out /proc/jaxcnn-out: ", tmp_path)
    assert main(["--out", str(tmp_path / "out"), *TINY, *MLP]) == 0  # control: a folder that can


def test_every_usage_error_begins_the_same_way(tmp_path, capsys):
    parsed = ["--out", str(tmp_path), "--model", "lenet6"]  # refused by the parser
    found = ["--out", str(tmp_path), *MLP, "--device", "tpu"]  # refused once JAX has looked
    for argv in (parsed, found):
        assert main(argv) == 2
        assert capsys.readouterr().err.startswith("error: "), argv


def test_an_unwritable_out_or_checkpoint_dir(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    argv = ["--out", str(blocker / "results"), *TINY, *MLP]
    _assert_one_line_exit_2(argv, capsys, "cannot write to --out", tmp_path)
    argv = ["--out", str(tmp_path), "--set", f"checkpoint_dir={blocker / 'ckpt'}", *TINY, *MLP]
    _assert_one_line_exit_2(argv, capsys, "cannot write to --set checkpoint_dir", tmp_path)


@pytest.mark.parametrize(
    "data,given",
    [(["--dataset", "mnist"], "--dataset"), (["--data-dir", "."], "--data-dir")],
)
def test_a_compile_only_run_does_not_ignore_the_data_it_is_given(tmp_path, capsys, data, given):
    target = ["--target", "tpu-v5e-1", "--model", "mlp", "--out", str(tmp_path)]
    message = f"{given} cannot go with a compile-only run: it compiles for the model's input"
    _assert_one_line_exit_2([*target, *data], capsys, message, tmp_path)
    assert parse_args(target).target == "tpu-v5e-1"  # the control: no data given, no error


def _bad_gzip(folder: Path) -> None:
    (folder / "train-images-idx3-ubyte.gz").write_bytes(b"this is not gzip at all")


def _truncated_gzip(folder: Path) -> None:
    path = folder / "train-labels-idx1-ubyte.gz"
    path.write_bytes(path.read_bytes()[:30])


def _bad_magic(folder: Path) -> None:
    write_idx(folder / "t10k-images-idx3-ubyte.gz", [[[0] * 28] * 28] * 32, magic=2052)


def _wrong_count(folder: Path) -> None:
    write_idx(folder / "train-labels-idx1-ubyte.gz", [1] * 64, count=65)


def _label_count_mismatch(folder: Path) -> None:
    write_idx(folder / "train-labels-idx1-ubyte.gz", [1] * 63)


def _label_out_of_range(folder: Path) -> None:
    labels = [1] * 32
    labels[5] = 200  # one damaged byte would train on an eleventh class: nan, or worse
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", labels)


def _missing_file(folder: Path) -> None:
    (folder / "t10k-labels-idx1-ubyte.gz").unlink()


def _empty_test_split(folder: Path) -> None:
    """Well-formed IDX files holding no image: a test accuracy would be nan."""
    write_idx(folder / "t10k-images-idx3-ubyte.gz", np.zeros((0, 28, 28), np.uint8))
    write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.zeros(0, np.uint8))


@pytest.mark.parametrize(
    "damage,message",
    [
        (_bad_gzip, "not a readable gzip file"),
        (_truncated_gzip, "not a readable gzip file"),
        (_bad_magic, "bad IDX magic 0x00000804"),
        (_wrong_count, "header says 65 = 65 bytes of data, its gzip trailer says 64"),
        (_label_count_mismatch, "64 images but 63 labels"),
        (_missing_file, "no t10k-labels-idx1-ubyte.gz"),
        (_empty_test_split, "the test split has no images"),
        (
            _label_out_of_range,
            "t10k-labels-idx1-ubyte.gz: label 200 at index 5 is outside 0..9",
        ),
    ],
)
def test_a_damaged_data_dir_is_one_line(idx_dir, tmp_path, capsys, damage, message):
    damage(idx_dir)
    out = tmp_path / "out"
    argv = ["--out", str(out), *TINY, *MLP, "--dataset", "mnist", "--data-dir", str(idx_dir)]
    _assert_one_line_exit_2(argv, capsys, message, out)


def test_a_records_file_with_a_corrupt_line_warns_and_the_rest_loads(tmp_path, capsys):
    assert main(["--out", str(tmp_path), *TINY, *MLP, "--set", "checkpoints=false"]) == 0
    path = tmp_path / records.RECORDS_FILE
    good = path.read_text()
    path.write_text('{"run_id": "torn\n' + good)  # a bad first line, then the good one
    capsys.readouterr()
    assert main(["--out", str(tmp_path), *TINY, *MLP, "--set", "checkpoints=false"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "records.jsonl:1: skipped a bad record" in warnings[0]
    assert "already recorded (ok): skipped" in err  # the good line loaded: not rerun
    assert path.read_text() == '{"run_id": "torn\n' + good  # and nothing was appended


@pytest.mark.parametrize("bad", [b"[1, 2, 3]\n", b"null\n", b"\xff\xfe\n"])
def test_a_line_that_is_not_a_record_object_is_skipped_by_the_run(tmp_path, capsys, bad):
    assert main(["--out", str(tmp_path), *TINY, *MLP, "--set", "checkpoints=false"]) == 0
    path = tmp_path / records.RECORDS_FILE
    damaged = bad + path.read_bytes()
    path.write_bytes(damaged)
    capsys.readouterr()
    assert main(["--out", str(tmp_path), *TINY, *MLP, "--set", "checkpoints=false"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "records.jsonl:1: skipped a bad record" in warnings[0]
    assert "already recorded (ok): skipped" in err
    assert path.read_bytes() == damaged  # kept as it was, nothing appended


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv,message",
    [
        (["--device", "tpu"], "present: cpu"),
        (["--batch-size", "0"], "0 is not a positive integer"),
        (["--dataset", "mnist", "--data-dir", "DATA"], "not a readable gzip file"),
    ],
)
def test_no_traceback_reaches_a_user_of_the_command(idx_dir, tmp_path, argv, message):
    (idx_dir / "train-images-idx3-ubyte.gz").write_bytes(gzip.compress(b"x")[:5])
    argv = [str(idx_dir) if a == "DATA" else a for a in argv]
    run = subprocess.run(
        [sys.executable, "-m", "experiments.run", "--out", str(tmp_path / "out"), *MLP, *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and message in run.stderr
    assert not (tmp_path / "out" / records.RECORDS_FILE).exists()


# --- JAX's own settings in the environment --------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(targets._accelerators_here(), reason="a TPU or GPU here starts for them")
@pytest.mark.parametrize(
    "environ,argv,message",
    [
        ({"JAX_PLATFORMS": "tpu"}, [], "JAX_PLATFORMS=tpu in the environment, but JAX could"),
        ({"JAX_PLATFORMS": "bogus"}, [], "JAX_PLATFORMS=bogus in the environment, but JAX"),
        ({"JAX_PLATFORMS": "tpu"}, ["--device=cpu"], "JAX_PLATFORMS=tpu in the environment"),
        ({"JAX_NUM_CPU_DEVICES": "abc"}, [], "JAX_NUM_CPU_DEVICES=abc in the environment is"),
        # JAX itself dies of a segmentation fault, silently, at this count
        ({"JAX_NUM_CPU_DEVICES": "100000"}, [], "JAX_NUM_CPU_DEVICES=100000 asks for more"),
        (
            {"XLA_FLAGS": "--xla_force_host_platform_device_count=100000"},
            [],
            "XLA_FLAGS=--xla_force_host_platform_device_count=100000 asks for more than 4096",
        ),
        ({"JAX_PLATFORMS": "tpu"}, ["--target=tpu-v5e-1", "--batch-size=8"], "JAX_PLATFORMS=tpu"),
    ],
)
def test_a_jax_setting_in_the_environment_is_named_in_one_line(tmp_path, environ, argv, message):
    out = tmp_path / "out"
    run = subprocess.run(
        [sys.executable, "-m", "experiments.run", "--out", str(out), *MLP, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **environ},
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and message in run.stderr, run.stderr
    assert not out.exists()


@pytest.mark.slow
def test_a_native_fatal_error_while_jax_starts_its_named_platforms_is_one_line(tmp_path):
    """A bad XLA_FLAGS is a fatal error in native code, which ends the process while
    JAX starts, with what it wrote held back (JAX_PLATFORMS set): the witness says it."""
    out = tmp_path / "out"
    environ = {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_jaxcnn_no_such_flag=1"}
    run = subprocess.run(
        [sys.executable, "-m", "experiments.run", "--out", str(out), *MLP, *TINY],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **environ},
    )
    assert run.returncode != 0
    assert run.stderr.strip() == (
        "error: JAX_PLATFORMS=cpu in the environment, but JAX died starting it: Unknown flag "
        "in XLA_FLAGS: --xla_jaxcnn_no_such_flag=1"
    )
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    "ends,said",
    [
        ("os._exit(3)", "error: JAX_PLATFORMS=cpu in the environment, but JAX died starting it: b"),
        ("os.kill(os.getpid(), signal.SIGKILL)", "error: JAX_PLATFORMS=cpu in the environment, "),
        ("pass", "a\nb"),  # a positive control: the start went on, what it wrote is given back
    ],
)
def test_what_native_code_writes_while_jax_starts_is_one_line_if_the_process_dies(ends, said):
    code = (
        "import os, signal\nfrom jaxcnn import devices\n"
        "with devices._start_log_held('cpu'):\n"
        f"    os.write(2, b'a\\nb\\n')\n    {ends}\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.stderr.strip().startswith(said), run.stderr
    assert len(run.stderr.strip().splitlines()) == (2 if ends == "pass" else 1)


@pytest.mark.parametrize("count", ["abc", "0", "2.5"])
def test_jax_num_cpu_devices_that_jax_cannot_take_is_an_option_error(count):
    with pytest.raises(cli_plan.OptionError, match=f"JAX_NUM_CPU_DEVICES={count} in the"):
        cli_plan.check_environment({"JAX_NUM_CPU_DEVICES": count})
    for fine in ({"JAX_NUM_CPU_DEVICES": "8"}, {}):  # positive controls
        cli_plan.check_environment(fine)


def test_a_cpu_device_count_above_the_bound_is_refused_before_jax_starts():
    bound = cli_plan.MAX_CPU_DEVICES
    for name, environ in [
        ("JAX_NUM_CPU_DEVICES", {"JAX_NUM_CPU_DEVICES": str(bound + 1)}),
        ("XLA_FLAGS", {"XLA_FLAGS": f"--xla_force_host_platform_device_count={bound + 1}"}),
    ]:
        with pytest.raises(cli_plan.OptionError, match=f"{name}=.* more than {bound} CPU"):
            cli_plan.check_environment(environ)
    cli_plan.check_environment({"JAX_NUM_CPU_DEVICES": str(bound)})  # the bound itself is fine
    cli_plan.check_environment({"XLA_FLAGS": f"--xla_force_host_platform_device_count={bound}"})


@pytest.mark.parametrize(
    "change,said",
    [
        (
            {"timing_steps": 10**14},
            "timing_steps 100000000000000 is not a whole number in 1..10,000",
        ),
        ({"epochs": -1}, "epochs -1 is not a whole number in 0..10,000"),
        ({"batch_size": 0}, "batch_size 0 is not"),
        ({"ensemble_size": True}, "ensemble_size True is not"),
    ],
)
def test_a_workload_out_of_its_bounds_is_a_usage_error_before_any_work(change, said):
    import jax

    from experiments.harness import prepare
    from jaxcnn.errors import UsageError

    prepare.check(Workload(model="mlp"), jax.devices()[:1])  # positive control
    with pytest.raises(UsageError, match=re.escape(said)):
        prepare.check(Workload(model="mlp", **change), jax.devices()[:1])


def test_available_memory_is_the_kernels_memavailable(tmp_path):
    from experiments.harness import sweep

    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n")
    assert sweep.available_memory(meminfo) == 2048 * 1024
    meminfo.write_text("MemTotal:       24000000 kB\n")  # an old kernel: physical memory
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert sweep.available_memory(meminfo) == physical
    assert sweep.available_memory(tmp_path / "absent") == physical


def test_images_beyond_the_memory_available_now_are_refused(monkeypatch):
    from experiments.harness import sweep
    from experiments.records.workload import Workload
    from jaxcnn.errors import UsageError

    workload = Workload(model="mlp", dataset="mnist", batch_size=128, epochs=1)
    monkeypatch.setattr(sweep, "available_memory", lambda: 60_000 * 784)
    sweep.check_sizes(workload, 60_000)  # positive control: exactly fits
    monkeypatch.setattr(sweep, "available_memory", lambda: 1000 * 784)
    with pytest.raises(UsageError, match="available now: free memory, or run where more"):
        sweep.check_sizes(workload, 60_000)
    synthetic = Workload(model="mlp", dataset="synthetic", batch_size=4096, epochs=0)
    with pytest.raises(UsageError, match="available now: choose --batch-size 1000 or less"):
        sweep.check_sizes(synthetic, 4096)


def test_a_matmul_side_beyond_any_memory_is_an_oom_to_find_not_a_usage_error():
    import jax

    from experiments.harness import prepare
    from experiments.records.workload import MAX_MATMUL_SIDE
    from jaxcnn.errors import UsageError

    def matmul(n: int) -> Workload:
        return Workload(model="matmul", dataset="none", kind="matmul", batch_size=n, epochs=0)

    prepare.check(matmul(2**23), jax.devices()[:1])  # the batch study's real oom
    with pytest.raises(UsageError, match="batch_size 16777217 is not a whole number"):
        prepare.check(matmul(MAX_MATMUL_SIDE + 1), jax.devices()[:1])
