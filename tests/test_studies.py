"""Every study runs under --smoke on the CPU (scaling on the 8 fake devices) and writes
records that validate, with the kinds and counts each study promises; a batch sweep
stops at its first real out-of-memory failure; bad study requests are one-line exit 2
errors before any work."""

import subprocess
import sys
import warnings
from collections import Counter, defaultdict
from pathlib import Path

import jax
import pytest

from experiments import records, studies
from experiments.cli import plan as cli_plan
from experiments.cli.run import main
from experiments.harness import sweep
from experiments.harness.prepare import dataset_dir
from experiments.records.workload import Workload

SMOKE = ["--smoke", "--device", "cpu", "--set", "progress=false", "--set", "checkpoints=false"]


def _load(out: Path) -> list[records.Record]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an invalid record would be skipped with a warning
        return records.load(out / records.RECORDS_FILE)


def _by_study(loaded: list[records.Record]) -> dict[str, list[records.Record]]:
    found = defaultdict(list)
    for record in loaded:
        found[record.workload.study].append(record)
    return found


def _check_devices(found: list[records.Record]) -> None:
    assert [r.workload.model for r in found] == ["mnist_cnn", "lenet5_keras"]
    for r in found:
        assert r.device.count == 1 and len(r.history) == 1
        assert 0.0 <= r.test_accuracy <= 1.0


def _check_crossover(found: list[records.Record]) -> None:
    params = [r.params.trainable for r in found]
    assert params == sorted(params) and len(params) == 2
    for r in found:  # timing only
        assert r.workload.epochs == 0 and r.history == []
        assert r.test_accuracy is None and r.train_time_s == 0


def _check_batch(found: list[records.Record]) -> None:
    assert [r.workload.batch_size for r in found] == [2, 4]
    for r in found:
        assert r.workload.oom_group and r.memory.total_bytes > 0


def _check_scaling(found: list[records.Record]) -> None:
    cells = Counter((r.workload.strategy, r.workload.scaling, r.device.count) for r in found)
    assert cells == {
        **{(s, m, n): 1 for s in ("pmap", "sharded") for m in ("weak", "strong") for n in (1, 8)},
        ("model", "strong", 8): 1,
        ("data_model", "strong", 8): 1,
    }
    assert {r.status for r in found} == {"ok"}
    for r in found:
        w = r.workload
        per_device = w.batch_size / w.num_devices
        assert per_device == 8 if w.scaling == "weak" else w.batch_size == 64
        assert w.num_devices == r.device.count


def _check_matmul(found: list[records.Record]) -> None:
    assert Counter((r.workload.precision, r.matmul.n) for r in found) == {
        ("f32", 16): 1,
        ("f32", 32): 1,
        ("bf16", 16): 1,
        ("bf16", 32): 1,
    }
    for r in found:
        n = r.matmul.n
        assert r.workload.kind == "matmul" and r.images_per_s is None
        assert r.matmul.flops == 2 * n**3 == r.flops.per_step
        assert r.matmul.tflops == pytest.approx(2 * n**3 / r.step_time_s.median / 1e12)
        assert (r.params.trainable, r.params.non_trainable) == (0, 0)


def _check_ensemble(found: list[records.Record]) -> None:
    by = {(r.ensemble.k, r.ensemble.mode): r for r in found}
    assert sorted(by) == [(1, "sequential"), (1, "vmap"), (2, "sequential"), (2, "vmap")]
    for (k, _), r in by.items():
        e = r.ensemble
        assert len(e.seeds) == len(set(e.seeds)) == k == len(e.test_accuracy)
        assert len(set(e.learning_rates)) == k
        expected = k * r.workload.batch_size / r.step_time_s.median
        assert r.images_per_s == pytest.approx(expected)
    for k in (1, 2):
        # vmap over stacked states trains the same K models as K separate runs
        vmapped, sequential = by[(k, "vmap")].ensemble, by[(k, "sequential")].ensemble
        assert vmapped.test_accuracy == pytest.approx(sequential.test_accuracy, abs=1e-4)
        assert vmapped.test_loss == pytest.approx(sequential.test_loss, rel=1e-3)
    two = by[(2, "vmap")]
    assert two.flops.per_step == 2 * by[(1, "vmap")].flops.per_step


def _check_precision(found: list[records.Record]) -> None:
    assert [r.workload.precision for r in found] == ["f32", "bf16"]
    assert {r.mfu.measured_dtype for r in found} == {"float32", "bfloat16"}


def _check_accuracy(found: list[records.Record]) -> None:
    (record,) = found
    assert [e.epoch for e in record.history] == [1, 2]
    assert all(0.0 <= e.test_accuracy <= 1.0 for e in record.history)


def _check_bench(found: list[records.Record]) -> None:
    cells = {(r.formulation.name, r.loop, r.workload.precision): r for r in found}
    # on a CPU both formulations, each in both loops, then bf16 with the CPU's
    assert set(cells) == {
        ("xla", "step", "f32"),
        ("xla", "device", "f32"),
        ("cpu", "step", "f32"),
        ("cpu", "device", "f32"),
        ("cpu", "step", "bf16"),
        ("cpu", "device", "bf16"),
    }
    for record in found:
        assert record.throughput.n >= 5 and record.throughput.steps == 3
        assert record.flops.per_step > 0
    device = cells[("cpu", "device", "f32")]
    assert device.compile_time_s.epoch > 0
    assert device.step_time_s.steps == 3  # one compiled loop of 3 steps per block
    assert cells[("cpu", "step", "f32")].step_time_s.n == 3  # each step alone


def _check_speedrun(found: list[records.Record]) -> None:
    assert sorted(r.workload.seed for r in found) == [0, 1]
    for r in found:
        w = r.workload
        assert (r.loop, w.schedule, w.epochs, w.steps) == ("device", "onecycle", 1, 3)
        (epoch,) = r.history
        assert epoch.steps == 3 and epoch.compile_time_s > 0
        assert r.train_time_s == epoch.train_time_s
    assert found[0].params_digest != found[1].params_digest  # two seeds, two runs


def _check_roofline(found: list[records.Record]) -> None:
    assert sorted((r.formulation.name, r.loop) for r in found) == [
        ("cpu", "device"),
        ("cpu", "step"),
    ]
    for r in found:  # measured and predicted from the same run, the CPU's own figures
        bound = r.prediction_bound
        assert (bound.peak_source, bound.bandwidth_source) == ("measured",) * 2
        assert bound.bandwidth_bytes_per_s == r.bandwidth.bytes_per_s
        assert bound.peak_tflops_used == r.matmul_ceiling["float32"].tflops
        assert bound.step_time_s > 0 and r.prediction_vendor_bound is None
        # the per-kernel prediction of the program each loop timed, at the same rates
        predicted = r.prediction
        assert predicted.method == "per-kernel" and predicted.rates_source == "measured"
        program = "epoch" if r.loop == "device" else "train_step"
        assert r.kernels_source.program == program
        assert predicted.step_time_s >= bound.step_time_s


CHECKS = {
    "devices": _check_devices,
    "crossover": _check_crossover,
    "batch": _check_batch,
    "scaling": _check_scaling,
    "matmul": _check_matmul,
    "ensemble": _check_ensemble,
    "precision": _check_precision,
    "accuracy": _check_accuracy,
    "bench": _check_bench,
    "speedrun": _check_speedrun,
    "roofline": _check_roofline,
}


# The matmul study is quick; the others compile several steps each (seconds apiece on a
# shared 2-core CPU), so they are marked slow. Each runs in its own process-free main().
FAST = ("matmul",)


@pytest.mark.parametrize(
    "name", [n if n in FAST else pytest.param(n, marks=pytest.mark.slow) for n in CHECKS]
)
def test_every_study_runs_under_smoke_and_writes_valid_records(name, tmp_path, capsys):
    assert main(["--study", name, "--out", str(tmp_path), *SMOKE]) == 0
    loaded = _load(tmp_path)
    assert all(r.status == "ok" for r in loaded), [r.message for r in loaded]
    assert set(_by_study(loaded)) == {name}
    CHECKS[name](loaded)
    assert len({r.config_key for r in loaded}) == len(loaded)
    assert "record(s) appended" in capsys.readouterr().out

    assert main(["--study", name, "--out", str(tmp_path), *SMOKE]) == 0  # all recorded
    assert len(_load(tmp_path)) == len(loaded)
    assert f"{len(loaded)} workload(s) already recorded" in capsys.readouterr().out


def test_all_means_every_study_but_the_default():
    assert set(CHECKS) == set(studies.STUDIES)
    assert cli_plan.study_names("all") == list(studies.STUDIES)
    assert "default" in cli_plan.STUDIES and "default" not in cli_plan.study_names("all")


def test_smoke_sizes_are_small_and_full_sizes_are_the_issues():
    cpu, gpu, smoke = (
        studies.Context("cpu", 1),
        studies.Context("gpu", 4),
        studies.Context("cpu", 8, smoke=True),
    )
    for name, study in studies.STUDIES.items():
        for w in study(smoke):
            assert w.study == name and w.dataset in ("digits", "synthetic", "none")
            assert w.timing_steps == 3 and w.epochs <= 2
    assert [w.model_overrides["width"] for w in studies.crossover.workloads(cpu)] == [
        32 * 2**i for i in range(9)
    ]
    assert [w.batch_size for w in studies.batch.workloads(gpu)] == [8, 16, 32, 64, 128, 256, 512]
    matmul_sizes = [w.batch_size for w in studies.matmul.workloads(gpu)]
    assert matmul_sizes[:6] == [256, 512, 1024, 2048, 4096, 8192]
    assert max(w.batch_size for w in studies.matmul.workloads(cpu)) == 4096
    assert {w.matmul_precision for w in studies.precision.workloads(gpu)} == {"default", "highest"}
    assert {w.matmul_precision for w in studies.precision.workloads(cpu)} == {"default"}
    assert {w.ensemble_size for w in studies.ensemble.workloads(cpu)} == {1, 4, 16}
    # a CPU runs its own formulation and XLA's; a GPU's own is XLA's
    assert {w.formulation for w in studies.ensemble.workloads(cpu)} == {"auto", "xla"}
    assert {w.formulation for w in studies.ensemble.workloads(gpu)} == {"auto"}
    assert sorted({w.num_devices for w in studies.scaling.workloads(gpu)}) == [1, 2, 4]
    assert studies.scaling.device_counts(6) == [1, 2, 4, 6]
    assert {w.dataset for w in studies.accuracy.workloads(cpu)} == {"mnist", "fashion_mnist"}
    for context, precision in ((cpu, "f32"), (gpu, "bf16")):
        found = studies.speedrun.workloads(context)
        assert {(w.model, w.dataset, w.precision) for w in found} == {
            ("mnist_cnn", "mnist", precision)
        }
        assert {(w.loop, w.schedule, w.num_devices) for w in found} == {("device", "onecycle", 1)}
        # every budget of every batch over the same seeds
        seeds = Counter((w.batch_size, w.epochs) for w in found)
        assert len(set(seeds.values())) == 1 and min(seeds.values()) >= 3
    assert {w.batch_size for w in studies.speedrun.workloads(gpu)} == {512, 1024, 2048}
    cpu_bench, gpu_bench = studies.bench.workloads(cpu), studies.bench.workloads(gpu)
    assert {w.model for w in cpu_bench} == {"lenet5_keras", "mnist_cnn", "mlp"}
    assert max(w.batch_size for w in cpu_bench) == 512
    assert {w.model for w in gpu_bench} == {m for m, _ in studies.bench.BENCH_MODELS} | set(
        studies.bench.BENCH_MODELS_ACCELERATOR
    )
    # the zoo's large models: each (model, precision) one OOM group, batches ascending
    groups = defaultdict(list)
    for w in gpu_bench:
        if w.oom_group:
            assert w.dataset == "synthetic" and w.loop == "step"
            groups[w.oom_group].append(w.batch_size)
    assert len(groups) == 2 * len(studies.bench.BENCH_MODELS_ACCELERATOR)
    assert all(sizes == sorted(sizes) for sizes in groups.values())


@pytest.mark.parametrize("installed", [False, True])
def test_the_cpu_bench_times_onednn_for_the_convolutional_models_where_it_can_run(
    installed, monkeypatch
):
    from jaxcnn import onednn

    monkeypatch.setattr(onednn, "available", lambda: installed)
    found = Counter(
        (w.model, w.formulation, w.loop, w.precision)
        for w in studies.bench.workloads(studies.Context(platform="cpu"))
    )
    batches = len(studies.bench.BENCH_BATCHES)
    base = {(f, loop, "f32") for f in ("xla", "cpu") for loop in ("step", "device")}
    base |= {("cpu", loop, "bf16") for loop in ("step", "device")}
    with_onednn = base | {("onednn", loop, "f32") for loop in ("step", "device")}
    for model in ("lenet5_keras", "mnist_cnn", "mlp"):
        cells = {key[1:] for key in found if key[0] == model}
        assert cells == (with_onednn if installed and model != "mlp" else base)
    assert set(found.values()) == {batches}  # each cell at every batch, once
    # never on an accelerator, nor in the smoke run
    for context in (studies.Context(platform="gpu"), studies.Context(platform="cpu", smoke=True)):
        assert all(w.formulation != "onednn" for w in studies.bench.workloads(context))


def test_an_accelerators_bench_times_its_convolutions_as_gemms_beside_its_librarys():
    found = Counter(
        (w.model, w.formulation, w.loop, w.precision)
        for w in studies.bench.workloads(studies.Context(platform="gpu"))
        if not w.oom_group
    )
    batches = len(studies.bench.BENCH_BATCHES_ACCELERATOR)
    base = {("xla", loop, "f32") for loop in ("step", "device")}
    base |= {("xla", loop, "bf16") for loop in ("step", "device")}
    gemms = base | {("cpu", loop, "f32") for loop in ("step", "device")}
    for model in ("lenet5_keras", "mnist_cnn", "mlp"):
        cells = {key[1:] for key in found if key[0] == model}
        assert cells == (base if model == "mlp" else gemms), model
    assert set(found.values()) == {batches}
    # the control: a CPU's bench has no such extra cell (its cpu formulation is its own)
    cpu = studies.bench.workloads(studies.Context(platform="cpu"))
    assert sum(w.formulation == "cpu" and w.precision == "f32" for w in cpu) == (
        3 * 2 * len(studies.bench.BENCH_BATCHES)
    )


def test_the_batch_sweep_stops_at_the_first_real_out_of_memory(tmp_path, capsys):
    # A 2^20-square f32 matrix (the largest batch a workload may ask) is 4 TiB:
    # allocating it fails for real (far beyond this machine's memory), and the sweep
    # classifies the failure as `oom` like a GPU's RESOURCE_EXHAUSTED. The larger sizes
    # of its group are then not tried.
    def matmul(n: int, group: str | None = "g") -> Workload:
        return Workload(
            model="matmul", dataset="none", kind="matmul", batch_size=n, timing_steps=2,
            epochs=0, study="batch", num_devices=1, oom_group=group,
        )  # fmt: skip

    workloads = [matmul(16), matmul(2**20), matmul(32), matmul(64), matmul(8, group=None)]
    devices = jax.devices()[:1]
    done, already = sweep.run_sweep(workloads, devices, sweep.SweepOptions(tmp_path))
    assert [r.status for r in done] == ["ok", "oom", "skipped", "skipped", "ok"]
    assert already == 0
    assert "Unable to allocate" in done[1].message
    assert "batch 1048576 ran out of memory" in done[2].message
    assert [r.status for r in _load(tmp_path)] == [r.status for r in done]

    # A rerun keeps the oom, so the group is still stopped; nothing is written twice.
    again, already = sweep.run_sweep(workloads, devices, sweep.SweepOptions(tmp_path))
    assert [r.status for r in again] == ["ok", "oom", "skipped", "skipped", "ok"]
    assert already == 5 and len(_load(tmp_path)) == 5


def test_an_unknown_study_lists_the_choices(tmp_path, capsys):
    assert main(["--study", "nonsense", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    for name in ("default", *studies.STUDIES, "all"):
        assert name in err
    assert not (tmp_path / records.RECORDS_FILE).exists()


def test_a_study_sets_its_own_sizes(tmp_path, capsys):
    assert main(["--study", "devices", "--epochs", "2", "--out", str(tmp_path)]) == 2
    assert "--epochs cannot go with --study=devices" in capsys.readouterr().err
    assert main(["--study", "all", "--set", "precision=bf16", "--out", str(tmp_path)]) == 2
    assert "--set precision cannot go with --study=all" in capsys.readouterr().err
    argv = ["--study", "speedrun", "--set", "schedule=onecycle", "--set", "learning_rate=0.1"]
    assert main([*argv, "--set", "seed=3", "--out", str(tmp_path)]) == 2
    assert (
        "--set schedule, --set learning_rate, --set seed cannot go with --study=speedrun"
        in capsys.readouterr().err
    )
    assert not (tmp_path / records.RECORDS_FILE).exists()


def test_missing_data_is_an_error_before_any_work(tmp_path, capsys):
    empty = tmp_path / "no-data"
    empty.mkdir()
    out = tmp_path / "out"
    argv = ["--study", "accuracy", "--device", "cpu", "--data-dir", str(empty), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "train-images-idx3-ubyte" in err and "Traceback" not in err
    assert not (out / records.RECORDS_FILE).exists()


def test_one_data_dir_serves_every_dataset_of_a_study(tmp_path):
    (tmp_path / "fashion_mnist").mkdir()
    assert dataset_dir(str(tmp_path), "fashion_mnist") == str(tmp_path / "fashion_mnist")
    assert dataset_dir(str(tmp_path), "mnist") == str(tmp_path)  # the IDX files themselves
    assert dataset_dir(None, "mnist") is None


HEAVY = ("jax", "matplotlib.pyplot", "pandas")


def _heavy_after(code: str) -> list[str]:
    """Which of HEAVY a fresh interpreter holds after running `code`."""
    probe = f"import sys\n{code}\nprint(*[m for m in {HEAVY!r} if m in sys.modules])"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_listing_the_studies_starts_no_jax_matplotlib_or_pandas():
    # The probe sees what it looks for (the positive controls).
    assert _heavy_after("import jax, matplotlib.pyplot, pandas") == list(HEAVY)
    plot = "from experiments.report import plots\nplots.pyplot()"
    assert _heavy_after(plot) == ["matplotlib.pyplot", "pandas"]
    # The studies, their report pages and the report's walker import none of them.
    listed = "import experiments.studies as s, experiments.report\nassert 'devices' in s.STUDIES"
    assert _heavy_after(listed) == []
