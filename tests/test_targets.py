"""Devices not at hand: the real TPU and GPU compilers, on this CPU-only machine.

Compile tests need the [targets] extra (libtpu, the CUDA plugin, ptxas) and skip, saying
so, where it is not installed; the table, the CLI's usage errors and the missing-compiler
exit run everywhere. Models are tiny (compiles take seconds here, not minutes); the
seed-000 pair compiles the seed's own catsdogs_cnn (slow, still in CI).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import missing_extra, needs_extra, typed
from xla_cache import XLA_CACHE_VARS

from experiments import records
from experiments.cli.run import main
from experiments.harness import compile_only
from experiments.harness.isolated import ChildDied, ChildFailed, InChild
from experiments.records import select
from experiments.records.workload import Workload
from jaxcnn import aot, models, targets
from jaxcnn.errors import UsageError
from jaxcnn.perf import chips

ROOT = Path(__file__).resolve().parents[1]
HAVE_TARGETS = missing_extra("targets") is None
needs_targets = needs_extra("targets")
TINY_MLP = {"width": 8}


def compile_workload(target: str, model: str = "mlp", batch: int = 16, **kw) -> Workload:
    overrides = kw.pop("model_overrides", TINY_MLP if model == "mlp" else {})
    strategy = "sharded" if targets.get(target).devices > 1 else "single"
    return Workload(
        model=model,
        model_overrides=overrides,
        dataset="synthetic",
        batch_size=batch,
        epochs=0,
        strategy=kw.pop("strategy", strategy),
        kind="compile",
        target=target,
        **kw,
    )


# --- The table: runs everywhere ---------------------------------------------------------


@pytest.mark.parametrize("target", list(targets.TARGETS.values()), ids=lambda t: t.name)
def test_every_target_has_its_chip_figures(target):
    described = targets.describe(target)
    assert chips.chip_name(target.kind) == target.chip
    assert described["memory_per_chip_bytes"] > 0
    assert described["bandwidth_bytes_per_s"] > 0
    assert described["peak_tflops"]
    if target.platform == "gpu":  # what the compiler is told is what fits compares with
        assert targets.spec_memory_bytes(target.spec) == described["memory_per_chip_bytes"]


def test_unknown_target_exits_2_naming_the_known_ones(tmp_path, capsys):
    code = main(["--target=tpu-v9-8", "--model=mnist_cnn", f"--out={tmp_path}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert "unknown target 'tpu-v9-8': did you mean tpu-v" in err  # one of the -8 slices
    assert "choose one of tpu-v2-8, " in err
    assert all(name in err for name in targets.TARGETS)
    assert len(err.splitlines()) == 1 and not list(tmp_path.iterdir())


def test_target_with_device_is_a_usage_error(tmp_path, capsys):
    code = main(["--target=gpu-t4", "--device=cpu", "--model=mlp", f"--out={tmp_path}"])
    assert code == 2
    assert "give one" in capsys.readouterr().err


# A sitecustomize that makes the compilers' packages absent, as on a machine without the
# extra: importing or finding them raises ModuleNotFoundError, exactly what Python does
# for a package that is not installed, whatever this venv holds.
_HIDE = """
import sys
HIDDEN = {hidden!r}

class _Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN or name in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Absent())
"""


def _run_hidden(tmp_path: Path, hidden: list[str], *args: str) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(textwrap.dedent(_HIDE.format(hidden=hidden)))
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
    out = tmp_path / "out"
    return subprocess.run(
        [sys.executable, "-m", "experiments.run", *args, f"--out={out}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "hidden", "what"),
    [
        ("tpu-v5e-1", ["libtpu"], "needs libtpu"),
        ("gpu-t4", ["jax_plugins.xla_cuda12", "jax_cuda12_plugin"], "needs the CUDA plugin"),
    ],
)
def test_missing_compiler_is_one_line_naming_the_install(tmp_path, target, hidden, what):
    run = _run_hidden(tmp_path, hidden, f"--target={target}", "--model=mlp", "--set", "width=8")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert lines[-1] == (
        f"error: compiling for {target} {what}, not installed: {targets.INSTALL}"
    ), run.stderr
    assert not (tmp_path / "out").exists()  # before any work or write


@needs_targets
def test_compilers_present_where_the_extra_is(tmp_path):
    # The positive control of the test above: unhidden, the same check passes.
    for name in ("tpu-v5e-1", "gpu-t4"):
        targets.require_compiler(targets.get(name))


def test_pmap_cannot_compile_for_a_target():
    with pytest.raises(UsageError, match="pmap compiles only for devices at hand.*sharded"):
        compile_only.check(compile_workload("gpu-t4", strategy="pmap"))


# --- Real compilers (the [targets] extra) -----------------------------------------------


def _valid(record: dict) -> dict:
    records.validate(record)
    assert record["compiled_not_run"] is True
    assert record["workload"]["kind"] == "compile"
    return record


def _read_back(record: records.CompileRecord) -> records.CompileRecord:
    """A record recorded_runner hands back: a compile record, as the reader returns it."""
    assert isinstance(record, records.CompileRecord) and record.compiled_not_run is True
    return record


@needs_targets
def test_step_eval_and_epoch_compile_for_one_tpu_chip():
    r = _valid(compile_only.run_target(compile_workload("tpu-v5e-1")))
    assert r["status"] == "ok" and r["fits"] is True, r["message"]
    assert r["device"]["platform"] == "tpu" and r["device"]["kind"] == "TPU v5 lite"
    assert r["device"]["count"] == 1
    assert all(r["compile_time_s"][p] > 0 for p in ("train", "eval", "epoch"))
    assert r["memory"]["total_bytes"] > 0 and r["epoch_memory"]["total_bytes"] > 0
    assert r["cost"]["flops"] > 0 and r["cost"]["bytes_accessed"] > 0
    p = r["prediction_bound"]  # the whole-program roofline, the bound beside it
    assert p["flops_source"] == "xla" and p["peak_precision"] == "bf16"
    assert p["step_time_s"] == max(p["compute_s"], p["memory_s"])
    assert p["images_per_s"] == 16 / p["step_time_s"]
    assert p["method"] == "roofline bound"
    # The prediction: the compiled step's own kernels, never faster than the bound
    kernel = r["prediction"]
    assert kernel["method"] == "per-kernel" and kernel["kernels"] == sum(k[0] for k in r["kernels"])
    assert kernel["step_time_s"] >= p["step_time_s"]
    assert r["env"]["libtpu"]


@needs_targets
def test_eight_tpu_chips_under_sharded_split_the_batch():
    one = compile_only.run_target(compile_workload("tpu-v5e-1", batch=64), ("train",))
    eight = _valid(compile_only.run_target(compile_workload("tpu-v5e-8", batch=64)))
    assert eight["status"] == "ok", eight["message"]
    assert eight["device"]["count"] == 8 and eight["workload"]["strategy"] == "sharded"
    assert all(eight["compile_time_s"][p] > 0 for p in ("train", "eval", "epoch"))
    # Each chip computes its eighth of the batch: fewer FLOPs per device than one chip
    # doing all of it (the compiler counts one device's share).
    assert eight["cost"]["flops"] < one["cost"]["flops"]
    # The jaxpr count is global and the same program: equal for both.
    assert eight["flops"]["per_step"] == one["flops"]["per_step"]


@needs_targets
def test_step_eval_and_epoch_compile_for_a_gpu_with_convolutions():
    r = _valid(compile_only.run_target(compile_workload("gpu-t4", model="mnist_cnn")))
    assert r["status"] == "ok", r["message"]
    assert r["device"]["platform"] == "gpu" and r["device"]["kind"] == "Tesla T4"
    assert all(r["compile_time_s"][p] > 0 for p in ("train", "eval", "epoch"))
    assert r["cost"]["flops_source"] == "jaxpr"  # XLA:GPU gives no cost analysis:
    assert r["cost"]["bytes_accessed"] is None and r["flops"]["xla_per_device"] is None
    p = r["prediction_bound"]  # so the bound's FLOPs are the jaxpr's and its bytes unknown
    assert p["flops_source"] == "jaxpr" and p["bytes_source"] is None
    assert p["memory_s"] is None and p["bound"] == "compute" and p["peak_precision"] == "fp32"
    assert p["compute_s"] == pytest.approx(r["flops"]["per_step"] / 8.1e12)
    # ... while the per-kernel prediction reads the bytes of every kernel
    assert r["prediction"]["memory_s"] > 0 and r["prediction"]["overhead_s"] > 0


@needs_targets
def test_memory_grows_with_the_batch():
    totals = [
        compile_only.run_target(compile_workload("gpu-t4", batch=b), ("train",))["memory"][
            "total_bytes"
        ]
        for b in (16, 256)
    ]
    assert totals[0] < totals[1]


@needs_targets
@pytest.mark.slow
def test_seed_000_batch_16_fits_the_mx150_and_32_does_not():
    def run(batch: int) -> dict:
        w = compile_workload("gpu-mx150", model="catsdogs_cnn", batch=batch)
        return _valid(compile_only.run_target(w, ("train",)))

    fits, too_big = run(16), run(32)
    assert fits["status"] == "ok" and fits["fits"] is True
    assert too_big["status"] == "oom" and too_big["fits"] is False
    assert too_big["message"].startswith("needs ")
    usable = too_big["target"]["usable_bytes_per_device"]
    assert fits["memory"]["total_bytes"] <= usable < too_big["memory"]["total_bytes"]


def _compiled(w: Workload, status: str, **fields) -> records.CompileRecord:
    """A compile record of `w` as the reader returns it: `status` and `fields`; an ok
    one's target and memory say nothing unless `fields` give them."""
    device = {"platform": "gpu", "kind": "Tesla T4", "count": 1, "process_count": 1}
    record = {"schema_version": records.SCHEMA_VERSION, "run_id": f"b{w.batch_size}"}
    record.update(status=status, workload=w.describe(), device=device, env={})
    record.update(compiled_not_run=True, target={"chips": 1, "devices": 1}, memory={})
    if status == "ok":
        record.update(params={"trainable": 1, "non_trainable": 0}, compile_time_s={"train": 1.0})
    return typed({**record, **fields})


def _fake_compiler(limit: int, with_memory: bool = True, refused_from: int | None = None):
    """A compiler whose step needs 1 MB + 100 kB per image, on a chip that fits `limit`;
    it refuses (an `error`, as for an index past 2**31 elements) every batch from
    `refused_from` on."""
    tried: list[int] = []

    def run(w: Workload) -> records.CompileRecord:
        tried.append(w.batch_size)
        if refused_from is not None and w.batch_size >= refused_from:
            message = "INVALID_ARGUMENT: index overflow"
            return _compiled(w, "error", message=message, failed_by="compiler")
        need = 10**6 + 10**5 * w.batch_size
        usable = 10**6 + 10**5 * limit
        status = "ok" if need <= usable else "oom"
        if not with_memory:
            return _compiled(w, status)
        return _compiled(w, status, memory={"total_bytes": need}, target=_chip_of_its_own(usable))

    return run, tried


def _chip_of_its_own(usable: int) -> dict:
    """A compile record's target that the chip table does not know: its verdicts are held
    to the limit it carries (a known chip's, to the table's as it stands)."""
    return {"name": "fake-chip", "chips": 1, "devices": 1, "usable_bytes_per_device": usable}


def _search(run, start=16, step=1, cap=4096):
    return compile_only.batch_search(
        lambda b: compile_workload("gpu-t4", batch=b), run, start=start, step=step, cap=cap
    )


def _ends(found: list[records.CompileRecord]) -> tuple[int, int]:
    """(the largest batch that fit, the smallest above it that did not)."""
    fit = max(r.workload.batch_size for r in found if r.status == "ok")
    over = [r.workload.batch_size for r in found if r.status == "oom"]
    return fit, min(b for b in over if b > fit)


def test_batch_search_aims_where_memory_reaches_the_chip():
    run, tried = _fake_compiler(100)
    found = _search(run)
    # 16 and 32 fit; the line through them reaches the chip at 100, which fits; a
    # sixteenth more does not: the largest batch in four compiles.
    assert tried == [16, 32, 100, 106] and len(found) == 4
    assert _ends(found) == (100, 106)


def test_batch_search_doubles_and_bisects_without_memory_figures():
    run, tried = _fake_compiler(100, with_memory=False)
    found = _search(run)
    assert tried[:3] == [16, 32, 64]  # doubling while it fits
    fit, miss = _ends(found)
    assert fit <= 100 < miss and miss - fit <= compile_only.tolerance(fit, 1)


def test_batch_search_halves_when_the_start_does_not_fit_and_stops_at_the_cap():
    run, tried = _fake_compiler(5)
    _search(run)
    assert tried[:3] == [16, 8, 4] and 5 in tried and 6 not in tried[:3]
    run, tried = _fake_compiler(10**6)
    _search(run, cap=4096)
    assert tried[-1] == 4096 and max(tried) == 4096


def test_the_studys_search_closes_far_above_the_old_cap():
    # A chip that fits 50,000 images of a step whose memory is linear in the batch: the
    # targets study's search goes past 8,192 (its old cap, which left such searches
    # open) to a fit and a miss a tolerance apart, and the report's cell is a number.
    from experiments.studies import targets as study

    run, tried = _fake_compiler(50_000)
    found = _search(run, start=study.PER_DEVICE_START, cap=study.PER_DEVICE_CAP)
    fit, miss = _ends(found)
    assert fit == 50_000 and miss - fit == compile_only.tolerance(fit, 1) == 3125
    assert tried == [16, 32, 50_000, 53_125]
    best, over = select.largest_fit(found)  # what the report's row reads: a closed search
    assert (best.workload.batch_size, over.workload.batch_size) == (50_000, 53_125)


@pytest.mark.parametrize("curve", [1.0, 3.0], ids=["superlinear", "steeper"])
def test_batch_search_closes_where_memory_is_not_a_line(curve):
    # Memory superlinear in the batch: the line from small batches overshoots, and the
    # search closes in from a miss far above the chip's limit, within its tolerance.
    limit = 40_000
    tried = []

    def run(w: Workload) -> records.CompileRecord:
        tried.append(b := w.batch_size)
        need, usable = (int(10**6 + 10**4 * n + curve * n * n) for n in (b, limit))
        status = "ok" if need <= usable else "oom"
        return _compiled(w, status, memory={"total_bytes": need}, target=_chip_of_its_own(usable))

    found = _search(run, cap=2**26)
    fit, miss = _ends(found)
    assert fit <= limit < miss and miss - fit <= compile_only.tolerance(fit, 1)
    assert len(tried) == len(set(tried))  # no batch compiled twice


def test_a_batch_the_compiler_refuses_ends_the_search_open_and_says_so():
    # Refused from 100,000 on (an index past 2**31 elements, say) on a chip that would
    # fit 10**6: the search closes in on the refusal as on a miss; the largest fit is a
    # floor (no compile above it found it too big), the refused batch just above it.
    run, _ = _fake_compiler(10**6, refused_from=100_000)
    found = _search(run, cap=2**26)
    best, over = select.largest_fit(found)
    fit = best.workload.batch_size
    refused = min(r.workload.batch_size for r in found if r.status == "error")
    assert over is None and fit < 100_000 <= refused
    assert refused - fit <= compile_only.tolerance(fit, 1)


def test_a_refusal_at_the_start_or_a_machine_fault_stops_the_search():
    run, tried = _fake_compiler(100, refused_from=16)
    _search(run)
    assert tried == [16]  # refused before any fit: not halved through

    def faulty(w: Workload) -> records.CompileRecord:
        tried.append(w.batch_size)
        if w.batch_size <= 32:
            return _compiled(w, "ok")
        return _compiled(w, "error", message="[Errno 28] No space left on device")

    tried.clear()
    _search(faulty)
    assert tried == [16, 32, 64]  # the machine failed 64: nothing to close in on


# --- TPU chips as they run: one device per v4 and v5p chip --------------------------------

# JAX devices per chip on a real Cloud TPU VM: v2 and v3 show each of a chip's two cores
# as a device; v4 and v5p run megacore (one device drives both TensorCores); v5e and
# v6e have one TensorCore.
DEVICES_PER_CHIP_AS_THEY_RUN = {
    "TPU v2": 2,
    "TPU v3": 2,
    "TPU v4": 1,
    "TPU v5p": 1,
    "TPU v5e": 1,
    "TPU v6e": 1,
}
TPUS = [t for t in targets.TARGETS.values() if t.platform == "tpu"]


@needs_targets
@pytest.mark.parametrize("target", TPUS, ids=lambda t: t.name)
def test_tpu_targets_have_the_devices_the_chips_run_as(target):
    per_chip = DEVICES_PER_CHIP_AS_THEY_RUN[target.chip]
    found = targets.abstract_devices(target)
    assert target.devices_per_chip == per_chip
    assert len(found) == target.devices
    assert target.devices == target.chips * per_chip or target.name == "tpu-v2-1"
    assert len({tuple(d.coords) for d in found}) == target.chips
    if target.chip in ("TPU v4", "TPU v5p"):  # one device drives the chip's two cores
        assert {d.num_cores for d in found} == {2}
        assert target.chip_config == "megacore"  # asked for, not libtpu's default
    if per_chip == 2:  # a device per core
        assert {d.num_cores for d in found} == {1}
    described = targets.describe(target)
    assert described["memory_per_device_bytes"] * per_chip == described["memory_per_chip_bytes"]


@needs_targets
def test_tpu_v2_1_is_one_core_of_a_v2_chip_and_compiles_a_one_device_step():
    target = targets.get("tpu-v2-1")
    (core,) = targets.abstract_devices(target)
    assert (core.device_kind, core.core_on_chip, core.num_cores) == ("TPU v2", 0, 1)
    assert not target.whole_chips and targets.get("tpu-v2-8").whole_chips
    described = targets.describe(target)
    assert (described["chips"], described["devices"]) == (1, 1)
    assert described["memory_per_device_bytes"] * 2 == described["memory_per_chip_bytes"]
    assert aot.check("tpu-v2-1", "single", 128) is target  # one device: placed alone
    with pytest.raises(UsageError, match="tpu-v2-8 has 8 devices: place the step 'sharded'"):
        aot.check("tpu-v2-8", "single", 128)  # the control: a whole v2-8 slice
    r = _valid(compile_only.run_target(compile_workload("tpu-v2-1", "toy_mlp", batch=128)))
    assert r["status"] == "ok", r["message"]
    assert r["device"]["count"] == 1 and r["target"]["name"] == "tpu-v2-1"


@needs_targets
def test_a_target_whose_device_count_is_not_the_compilers_is_refused():
    # tpu-v4-8 as it was: megacore devices, counted as two per chip
    wrong = dataclasses.replace(targets.get("tpu-v4-8"), devices_per_chip=2)
    with pytest.raises(RuntimeError, match=r"gives 4 devices, the target table says 4 chips x 2"):
        targets.abstract_devices(wrong)


@needs_targets
@pytest.mark.slow
def test_a_v4_chip_compiles_as_one_device_doing_a_v3_chips_work():
    # The same mnist_cnn train step at 128 images per chip on 4 chips of each. Per chip:
    # the compiler's figure per device times the devices per chip.
    def per_chip(name: str) -> tuple[float, float]:
        workload = compile_workload(name, "mnist_cnn", batch=4 * 128)
        r = _valid(compile_only.run_target(workload, ("train",)))
        assert r["status"] == "ok", r["message"]
        per = targets.get(name).devices_per_chip
        assert r["device"]["count"] == 4 * per
        return r["cost"]["flops"] * per, r["cost"]["bytes_accessed"] * per

    v3_flops, v3_bytes = per_chip("tpu-v3-8")
    v4_flops, v4_bytes = per_chip("tpu-v4-8")
    assert v4_flops == pytest.approx(v3_flops, rel=0.01)  # the same work per chip
    # A v4 chip is one device reading the parameters and updating the optimizer state
    # once where v3's two cores each do: it moves fewer bytes than a v3 chip (0.57x here
    # with libtpu 0.0.42.1). Compiled as two one-core devices, as v3 is, it moved more
    # (1.15x here; ResNet-50 at 32 images per chip, 1.8x).
    assert v4_bytes < v3_bytes


# --- A compiler that kills its process -------------------------------------------------


@pytest.mark.slow
def test_a_child_that_dies_says_its_signal_and_the_next_call_gets_a_new_child():
    with InChild("compile_crash:pid_or_crash") as pid_or_crash:
        first = pid_or_crash(False)
        assert first != os.getpid() and pid_or_crash(False) == first  # one child, kept
        with pytest.raises(ChildDied) as died:
            pid_or_crash(True)
        assert died.value.signal == "SIGSEGV" and "died (signal SIGSEGV)" in str(died.value)
        assert pid_or_crash(False) not in (first, os.getpid())  # a new child
    with InChild("operator:truediv") as divide, pytest.raises(ZeroDivisionError):
        divide(1, 0)  # an exception is the call's, not a death
    with InChild("compile_crash:no_such_function") as broken, pytest.raises(RuntimeError) as e:
        broken()  # a child that cannot start is a broken setup, not a death to record
    assert "ended before it was ready" in str(e.value)


MACHINE_FAULT = "; no finding about the compiler, a rerun compiles it again"


def test_a_child_crash_is_one_line_its_stack_dumps_kept_with_the_death(capfd):
    with InChild("compile_crash:pid_or_crash") as pid_or_crash:
        assert pid_or_crash(False) != os.getpid()  # the positive control: a live child
        capfd.readouterr()
        with pytest.raises(ChildDied) as died:
            pid_or_crash(True)
        log = Path(pid_or_crash.log)
    err = capfd.readouterr().err
    assert "Fatal Python error" not in err and "Stack" not in err, err  # none printed
    assert "Fatal Python error: Segmentation fault" in "\n".join(died.value.dump)
    assert any("pid_or_crash" in line for line in died.value.dump)  # the Python stack
    assert str(died.value).count("\n") == 0
    assert not log.exists()  # the log goes with its InChild


def test_a_child_that_does_not_start_is_ended_at_its_deadline_saying_so_meanwhile(capfd):
    stuck = InChild("child_stuck:anything", start_timeout_s=3, progress_every_s=1)
    with stuck, pytest.raises(ChildFailed) as failed:
        stuck()
    assert str(failed.value) == (
        "the child process for child_stuck:anything did not start within 3 s (stuck: out "
        "of threads or memory?)"
    )
    waiting = [line for line in capfd.readouterr().err.splitlines() if "waiting" in line]
    assert waiting[0] == (
        "    waiting for the child process for child_stuck:anything to start (1 s of at most 3)..."
    )
    assert stuck._process is None  # ended, not left behind
    with InChild("os:getpid", start_timeout_s=120, progress_every_s=30) as getpid:
        assert getpid() != os.getpid()  # the positive control: a child that starts


@pytest.mark.slow
@needs_targets
def test_the_compilers_own_refusal_is_a_finding_and_the_same_compiler_is_not_asked_again(
    tmp_path,
):
    from compile_crash import REFUSED_BATCH

    path = tmp_path / "records.jsonl"
    refused_cell, fine = (compile_workload("gpu-t4", batch=b) for b in (REFUSED_BATCH, 16))
    with InChild("compile_crash:run_target") as in_child:
        run = compile_only.recorded_runner(path, in_child)
        refused = _read_back(run(refused_cell))
        assert run(fine).status == "ok"
    assert refused.status == "error" and refused.failed_by == "compiler"
    assert refused.message.startswith("JaxRuntimeError: NOT_FOUND: No FFI handler")
    assert "jaxcnn_test_no_such_kernel" in refused.message
    assert [r.status for r in records.load(path)] == ["error", "ok"]

    def must_not_compile(workload, programs):
        raise AssertionError(f"compiled {workload.batch_size} again")

    rerun = compile_only.recorded_runner(path, must_not_compile)
    assert rerun(refused_cell).run_id == refused.run_id  # the same compiler: kept
    asked = []
    line = refused.model_dump(exclude_unset=True)  # what a compile child hands back
    again = lambda w, programs: asked.append(w.batch_size) or line  # noqa: E731
    compile_only.recorded_runner(path, again, force=True)(refused_cell)
    older = {**line, "env": {**line["env"], "jaxlib": "0.0.1"}, "run_id": "older"}
    records.append(tmp_path / "older.jsonl", older)
    compile_only.recorded_runner(tmp_path / "older.jsonl", again)(refused_cell)
    assert asked == [REFUSED_BATCH, REFUSED_BATCH]  # forced; another compiler's refusal


@needs_targets
def test_a_compile_child_that_crashes_is_a_machine_fault_asked_again_and_compiled_on_rerun(
    tmp_path,
):
    """A SIGSEGV of the compile child (libtpu's own crash on one resnet18 cell) is a
    death, not the compiler's word on the program: asked once more in a new child, then
    recorded as a machine fault, and compiled again by the next run."""
    from compile_crash import CRASHING_BATCH

    path = tmp_path / "records.jsonl"
    crashing, fine = (compile_workload("gpu-t4", batch=b) for b in (CRASHING_BATCH, 16))
    with InChild("compile_crash:run_target") as in_child:
        run = compile_only.recorded_runner(path, in_child)
        crashed = _read_back(run(crashing))
        assert run(fine).status == "ok"  # the study goes on, in a new child
    assert crashed.status == "error" and crashed.failed_by == "machine"
    assert crashed.message == (
        "machine fault: compiling it twice, the process doing it died (signal SIGSEGV)"
        + MACHINE_FAULT
    )
    asked = []
    line = crashed.model_dump(exclude_unset=True)  # what a compile child hands back
    again = lambda w, programs: asked.append(w.batch_size) or line  # noqa: E731
    compile_only.recorded_runner(path, again)(crashing)
    assert asked == [CRASHING_BATCH]  # the rerun compiles it again


@needs_targets
def test_a_compile_child_that_cannot_start_is_a_machine_fault_and_compiled_on_rerun(tmp_path):
    path = tmp_path / "records.jsonl"
    cell = compile_workload("gpu-t4", batch=16)
    with InChild("compile_crash:no_such_function") as broken:
        record = _read_back(compile_only.recorded_runner(path, broken)(cell))
    assert record.status == "error" and record.failed_by == "machine"
    assert record.message == (
        "machine fault: compiling it twice, the child process for "
        "compile_crash:no_such_function ended before it was ready (its error is in the "
        "record's traceback_tail)" + MACHINE_FAULT
    )
    with InChild("compile_crash:run_target") as in_child:  # the positive control
        assert compile_only.recorded_runner(path, in_child)(cell).status == "ok"
    assert [r.status for r in records.load(path)] == ["error", "ok"]


@pytest.mark.slow
@needs_targets
@pytest.mark.parametrize("kills", [1, 2])
def test_a_compile_killed_from_outside_is_asked_again_and_never_called_a_crash(
    tmp_path, monkeypatch, kills
):
    from compile_crash import KILLS_FILE

    path, left = tmp_path / "records.jsonl", tmp_path / "kills"
    left.write_text(str(kills))
    monkeypatch.setenv(KILLS_FILE, str(left))  # the compile children die of a real SIGKILL
    cell = compile_workload("gpu-t4", batch=16)
    with InChild("compile_crash:run_target") as in_child:
        record = _read_back(compile_only.recorded_runner(path, in_child)(cell))
    assert left.read_text() == "0"  # killed as many times as asked
    if kills == 1:  # killed once, compiled in a new child: as if never killed
        assert record.status == "ok"
        assert [r.status for r in records.load(path)] == ["ok"]
        return
    assert record.status == "error" and record.failed_by == "machine"
    assert record.message.startswith(
        "machine fault: compiling it twice, the process doing it died (signal SIGKILL: the "
        "kernel's out-of-memory killer, or a kill -9)"
    )
    with InChild("compile_crash:run_target") as in_child:  # no finding: the rerun compiles
        rerun = compile_only.recorded_runner(path, in_child)(cell)
    assert rerun.status == "ok"
    assert [r.status for r in records.load(path)] == ["error", "ok"]


@needs_targets
def test_records_of_earlier_releases_are_compiled_again_whatever_their_message(tmp_path):
    """Records of earlier releases said "the compiler crashed" of a SIGKILL, a SIGSEGV
    and a SIGABRT (a compile short of host memory) alike, and carry no `failed_by`: none
    is taken as the compiler's verdict. A positive control: a refusal that says
    `failed_by: compiler` is kept."""
    path = tmp_path / "records.jsonl"
    said = {
        40: "the compiler crashed: the process doing it died (signal SIGKILL: ...)",
        48: "the compiler crashed: the process doing it died (signal SIGABRT)",
        56: "JaxRuntimeError: UNIMPLEMENTED: ptxas too old",
    }
    for batch, message in said.items():
        record = compile_only.crashed(compile_workload("gpu-t4", batch=batch), ChildDied(-9))
        del record["failed_by"]
        records.append(path, {**record, "message": message})
    kept = compile_only.crashed(compile_workload("gpu-t4", batch=16), ChildDied(-11))
    records.append(path, {**kept, "failed_by": "compiler", "message": said[56]})
    asked = []

    def again(workload, programs):
        asked.append(workload.batch_size)
        return compile_only.crashed(workload, ChildDied(-11))

    run = compile_only.recorded_runner(path, again)
    for batch in (*said, 16):
        run(compile_workload("gpu-t4", batch=batch))
    assert asked == [40, 48, 56]


@needs_targets
@pytest.mark.slow
def test_a_program_asking_for_the_cpu_backend_only_starts_quietly_with_the_extra_installed():
    # What experiments.cli.run and its compile child ask for; a library import asks nothing
    # (tests/test_import_side_effects.py).
    if targets._accelerators_here():
        pytest.skip("this machine has an accelerator: auto would rightly pick it")
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS",)}
    script = (
        "import jax; from jaxcnn import targets; print(targets.cpu_backend_only(), jax.devices())"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0 and run.stdout.startswith("True [CpuDevice")
    assert run.stderr == ""


# The README's compile_for example, run as a library user runs it: a plain Python
# process, JAX_PLATFORMS not set, nothing of JAX's configured by the caller; with
# `start`, JAX's backends started before it.
_README_EXAMPLE = """
import re, sys
from pathlib import Path
if sys.argv[1:] == ["start"]:
    import jax
    jax.devices()
text = Path("README.md").read_text()
start = text.index("Your own model on a chip you do not have")
exec(re.search(r"```python\\n(.*?)```", text[start:], re.S).group(1))
"""


def _run_readme_example(*args: str) -> subprocess.CompletedProcess:
    # a user's environment: no JAX_PLATFORMS, and not the suite's compilation cache (JAX
    # warns that it cannot read back a program compiled for a topology alone)
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", *XLA_CACHE_VARS)}
    return subprocess.run(
        [sys.executable, "-c", _README_EXAMPLE, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@needs_targets
@pytest.mark.slow
def test_the_readmes_compile_for_example_runs_where_jax_platforms_is_not_set():
    if targets._accelerators_here():
        pytest.skip("this machine has an accelerator: JAX is rightly left to start it")
    run = _run_readme_example()
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.splitlines()
    printed = [line.split() for line in lines if not line.startswith(" ")]
    bands = [line.split(":", 1)[1].split("| loop step:") for line in lines if line.startswith(" ")]
    # The positive control: both targets compiled, fit, and were predicted.
    assert [words[:2] for words in printed] == [["tpu-v5e-1", "True"], ["gpu-t4", "True"]]
    for (target, _, total, device_step_s, loop_step_s), (band, loop) in zip(
        printed, bands, strict=True
    ):
        assert int(total) > 0 and 0 < float(device_step_s) <= float(loop_step_s)
        # A small model's device-step band: a GPU's was measured on the small programs an
        # H100 and an H200 ran (the committed records), held out by chip, the two named; no
        # TPU ran one: unvalidated.
        # Its loop step's: the published JAX loops of small programs on GPUs, or where the
        # kernels are most of the step (the example's T4, at batch 256) and their band is
        # the wider, the device step's, said so; on a TPU the published JAX loops' there
        # (five, held out), its device step unvalidated.
        if target.startswith("tpu"):
            assert band.strip() == "None"
            assert "'split': 'published_jax_loops'" in loop and "'observations': 5" in loop, loop
        else:
            assert band.strip().startswith("{") and "'split': 'chip'" in band, band
            assert "'chips': ['H100 SXM', 'H200']" in band, band
            mostly = 2 * float(device_step_s) > float(loop_step_s)
            assert mostly  # the example's program: the T4's kernels are most of its step
            assert "'mostly_kernels': True" in loop and "'split': 'chip'" in loop, loop
    # The CUDA plugin loaded as a compiler, without looking for cuDNN and a GPU:
    # nothing of its traceback, nor of a TPU backend failing to start.
    assert run.stderr == ""


@needs_targets
@pytest.mark.slow
def test_a_gpu_target_after_jax_started_without_the_cuda_plugin_is_one_line_saying_so():
    if targets._accelerators_here():
        pytest.skip("this machine has an accelerator: the CUDA plugin loads as JAX starts")
    run = _run_readme_example("start")
    assert run.returncode == 1
    *_, last = run.stderr.strip().splitlines()
    assert last == (
        "jaxcnn.errors.UsageError: the CUDA plugin is not loaded in this process, so nothing "
        "can compile for gpu-t4: JAX started its backends before this compile, and the plugin "
        "did not load then (it looks for the cuDNN a GPU run needs); compile for GPU targets "
        "before the first JAX computation, or start Python with JAX_PLATFORMS=cpu"
    )
    # The control: the TPU target, compiled first in the same process, was not affected.
    assert run.stdout.split()[:2] == ["tpu-v5e-1", "True"]


def test_a_runtime_finds_the_target_that_is_its_chips():
    assert targets.matching("TPU v5 lite", 8).name == "tpu-v5e-8"  # Kaggle's v5e-8
    assert targets.matching("TPU v5 lite", 1).name == "tpu-v5e-1"  # Colab's v5e-1
    assert targets.matching("TPU v3", 8).name == "tpu-v3-8"  # Kaggle's v3-8: 8 cores
    assert targets.matching("TPU v4", 4).name == "tpu-v4-8"  # a v4-8 VM: 4 megacore chips
    assert targets.matching("Tesla T4", 2).name == "gpu-t4x2"  # Kaggle's two T4s
    assert targets.matching("cpu", 1) is None


def test_geforce_cards_are_their_own_chips_and_a_1080_ti_is_not_a_1080():
    assert targets.matching("NVIDIA GeForce RTX 3090", 1).name == "gpu-rtx3090"
    assert targets.matching("NVIDIA GeForce GTX 1080", 1).name == "gpu-gtx1080"
    assert chips.chip_name("NVIDIA GeForce GTX 1080 Ti") is None  # another chip (GP102)
    # GeForce Ampere: f32 matmuls run as tf32, at the card's fp32 rate (its tensor cores'
    # tf32 equals its CUDA cores' fp32); Pascal has no tf32
    assert chips.matmul_precision("gpu", "NVIDIA GeForce RTX 3090", "float32") == "tf32"
    assert chips.peak_tflops("NVIDIA GeForce RTX 3090", "tf32") == 35.6
    assert chips.matmul_precision("gpu", "NVIDIA GeForce GTX 1080", "float32") == "fp32"


def test_target_here_on_a_cpu_is_a_usage_error(tmp_path, capsys):
    code = main(["--target=here", "--model=mlp", f"--out={tmp_path}"])
    assert code == 2
    assert "no target is this machine's 8 x cpu" in capsys.readouterr().err


@needs_targets
# Each spec once: several GPUs of one host are their one GPU's spec (tests/test_multi_gpu.py)
@pytest.mark.parametrize(
    "name", [t.name for t in targets.TARGETS.values() if t.platform == "gpu" and t.chips == 1]
)
def test_every_gpu_spec_compiles_the_step(name):
    toolkit = targets.get(name).toolkit
    if toolkit is not None and not toolkit.installed():
        pytest.skip(f"{name} compiles with {toolkit.requirement}, not installed: {toolkit.install}")
    r = _valid(compile_only.run_target(compile_workload(name), ("train",)))
    # a spec missing a field XLA:GPU needs refuses every kernel (e.g. shared memory)
    assert r["status"] == "ok", r["message"]
    assert r["device"]["kind"] == targets.get(name).kind


# --- The K80: CUDA 11.8's ptxas, for that target only -----------------------------------

KEPLER = chips.KEPLER_TOOLKIT
_kepler_missing = pytest.mark.skipif(
    not KEPLER.installed(),
    reason=f"gpu-k80 compiles with {KEPLER.requirement}, not installed: {KEPLER.install}",
)


def needs_kepler(test):
    # pytest gives the first skipif that holds: without [targets], that install line
    return _kepler_missing(needs_targets(test))


def test_only_the_k80_compiles_with_a_cuda_toolkit_of_its_own():
    own = {t.name: targets.compiler_options(t) for t in targets.TARGETS.values()}
    assert {name for name, options in own.items() if options} == {"gpu-k80"}
    assert own["gpu-k80"] == {"xla_gpu_cuda_data_dir": str(KEPLER.cuda_dir)}
    assert KEPLER.requirement == "nvidia-cuda-nvcc-cu11==11.8.89"  # the last with sm_37
    assert targets.describe(targets.get("gpu-k80"))["cuda_toolkit"] == KEPLER.requirement
    assert targets.describe(targets.get("gpu-t4"))["cuda_toolkit"] is None


@needs_targets
def test_a_missing_toolkit_exits_2_naming_its_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "env"))  # where it is looked for
    code = main(["--target=gpu-k80", "--model=mlp", "--set", "width=8", f"--out={tmp_path}/o"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    root = tmp_path / "env" / "jaxcnn-toolkits" / "nvidia-cuda-nvcc-cu11-11.8.89"
    assert err == (
        "error: compiling for gpu-k80 needs the ptxas of nvidia-cuda-nvcc-cu11==11.8.89 (the "
        "CUDA plugin's has no K80), not installed: pip install --no-deps "
        f"--target={root} nvidia-cuda-nvcc-cu11==11.8.89"
    )
    assert not (tmp_path / "o").exists()  # before any work or write


@needs_kepler
def test_the_k80_compiles_with_its_toolkit_and_not_without():
    r = _valid(compile_only.run_target(compile_workload("gpu-k80"), ("train",)))
    assert r["status"] == "ok", r["message"]
    assert r["device"]["kind"] == "Tesla K80" and r["kernels"]
    assert r["target"]["cuda_toolkit"] == KEPLER.requirement
    assert r["compiler_options"] == {"xla_gpu_cuda_data_dir": str(KEPLER.cuda_dir)}
    # The positive control: the same target with the CUDA plugin's own ptxas (CUDA 12)
    plugin_only = dataclasses.replace(targets.get("gpu-k80"), toolkit=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(targets.TARGETS, "gpu-k80", plugin_only)
        r = _valid(compile_only.run_target(compile_workload("gpu-k80"), ("train",)))
    assert r["status"] == "error" and "ptxas too old" in r["message"], r["message"]
    assert r["target"]["cuda_toolkit"] is None and r["compiler_options"] == {}


@needs_kepler
@pytest.mark.parametrize("toolkit", [None, KEPLER.requirement])
def test_a_k80_refusal_by_another_toolkit_is_compiled_again(tmp_path, toolkit):
    # A K80 error recorded before the target had its toolkit (the plugin's ptxas refused
    # sm_37) is no finding about the compiler it has now; one by the same toolkit is kept.
    workload = compile_workload("gpu-k80")
    _, _, old = compile_only._new_record(workload)
    old.update(status="error", failed_by="compiler", message="ptxas too old")
    old["target"]["cuda_toolkit"] = toolkit
    path = tmp_path / records.RECORDS_FILE
    records.append(path, old)
    asked = []

    def compile_cell(w, programs):
        asked.append(w)
        _, _, new = compile_only._new_record(w)
        return {**new, "message": "compiled again"}

    record = compile_only.recorded_runner(path, compile_cell)(workload)
    assert len(asked) == (1 if toolkit is None else 0)
    assert record.message == ("compiled again" if toolkit is None else "ptxas too old")


def test_first_batches_go_breadth_first_over_chips_and_precisions():
    from experiments.cli.targets import _breadth_first
    from experiments.studies.targets import cells as targets_cells

    cells = targets_cells()
    first = _breadth_first(cells)
    assert sorted(first, key=cells.index) == cells  # the same cells, reordered
    precisions = [c.precision for c in first]
    assert precisions == sorted(precisions, key=lambda p: p != "f32")  # every f32 first
    f32 = [c.target for c in first if c.precision == "f32"]
    last = {name: i for i, name in enumerate(f32)}
    # every chip's smallest target for every model before any chip's second target
    smallest = ("tpu-v2-8", "tpu-v3-8", "tpu-v4-8", "tpu-v5e-1", "tpu-v5p-8", "tpu-v6e-1")
    seconds = ("tpu-v5e-8", "tpu-v6e-8", "tpu-v4-32", "tpu-v5e-16", "tpu-v6e-64")
    assert max(last[n] for n in smallest) < min(f32.index(n) for n in seconds)
    # The published loops' networks and part-of-a-chip targets are the references', not
    # the study's; the registry holds them (the control).
    published = set(models.published_networks())
    assert published and published < set(models.names())
    assert not published & {c.model for c in cells} and "tpu-v2-1" in targets.TARGETS
    assert "tpu-v2-1" not in {c.target for c in cells}


@needs_targets
@pytest.mark.slow
def test_sigterm_stops_the_targets_study_between_compiles_and_a_rerun_finishes_it(tmp_path):
    import json
    import signal
    import time

    out = tmp_path / "out"
    command = [sys.executable, "-m", "experiments.run", "--study=targets", "--smoke"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.Popen(
        [*command, f"--out={out}"], cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True
    )
    path = out / "records.jsonl"
    deadline = time.monotonic() + 240
    while not (path.exists() and path.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)  # the first compile's record: the study is between or in compiles
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=240)
    assert run.returncode == 143, err
    assert "terminated (SIGTERM): stopped between compiles, after" in err.strip().splitlines()[-1]
    recorded = [json.loads(line) for line in path.read_text().splitlines()]
    assert 1 <= len(recorded) < 4  # stopped before the smoke study's 4 compiles
    rerun = subprocess.run(
        [*command, f"--out={out}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert rerun.returncode == 0, rerun.stderr
    keys = [json.loads(line)["config_key"] for line in path.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 4  # the rest compiled, nothing twice


@pytest.mark.slow
@needs_targets
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGABRT"])
def test_a_compile_child_killed_twice_is_a_machine_fault_and_compiled_again(
    tmp_path, monkeypatch, signal_name
):
    """A real SIGTERM sent to the compile child (not to the study), or the child's own
    abort (os.abort, as a std::bad_alloc ends): asked again in a new child, and if it
    dies again, recorded as the machine fault it is and compiled again on rerun."""
    from compile_crash import KILL_SIGNAL, KILLS_FILE

    path, left = tmp_path / "records.jsonl", tmp_path / "kills"
    left.write_text("2")
    monkeypatch.setenv(KILLS_FILE, str(left))
    monkeypatch.setenv(KILL_SIGNAL, signal_name)
    cell = compile_workload("gpu-t4", batch=16)
    with InChild("compile_crash:run_target") as in_child:
        record = _read_back(compile_only.recorded_runner(path, in_child)(cell))
    assert left.read_text() == "0"
    assert record.status == "error" and record.failed_by == "machine"
    assert record.message.startswith(
        f"machine fault: compiling it twice, the process doing it died (signal {signal_name}"
    )
    assert record.message.endswith(MACHINE_FAULT)
    with InChild("compile_crash:run_target") as in_child:
        assert compile_only.recorded_runner(path, in_child)(cell).status == "ok"
    assert [r.status for r in records.load(path)] == ["error", "ok"]


@needs_targets
def test_a_compile_short_of_host_memory_is_a_machine_fault_never_a_finding(tmp_path, monkeypatch):
    """The compile child given 20 MiB of address space beyond what it holds: XLA's
    allocations fail for real (a std::bad_alloc, raised as MemoryError, or a thread it
    cannot start, which aborts). Either way the record is a machine fault, never `oom`
    (the target's memory was never asked about), and the rerun with memory compiles."""
    from compile_crash import ADDRESS_SPACE_LEFT_MB

    path = tmp_path / "records.jsonl"
    monkeypatch.setenv(ADDRESS_SPACE_LEFT_MB, "20")
    cell = compile_workload("gpu-t4", batch=16)
    with InChild("compile_crash:run_target") as in_child:
        record = _read_back(compile_only.recorded_runner(path, in_child)(cell))
    assert record.status == "error" and record.failed_by == "machine"
    assert record.fits is None
    assert record.message.startswith(
        ("machine fault: MemoryError", "machine fault: compiling it twice, the process")
    )
    monkeypatch.delenv(ADDRESS_SPACE_LEFT_MB)
    with InChild("compile_crash:run_target") as in_child:
        assert compile_only.recorded_runner(path, in_child)(cell).status == "ok"
    assert [r.status for r in records.load(path)] == ["error", "ok"]


@pytest.mark.slow
@needs_targets
def test_a_compile_failed_by_a_missing_tmpdir_is_no_finding_and_compiled_again(
    tmp_path, monkeypatch
):
    from compile_crash import WRITES_TEMPORARY

    path, missing = tmp_path / "records.jsonl", tmp_path / "no-such-tmp"
    monkeypatch.setenv(WRITES_TEMPORARY, "1")
    monkeypatch.setenv("TMPDIR", str(missing))  # the compile child's temporary folder
    cell = compile_workload("gpu-t4", batch=16)
    with InChild("compile_crash:run_target") as in_child:
        record = _read_back(compile_only.recorded_runner(path, in_child)(cell))
    assert record.status == "error" and record.failed_by == "machine"
    # whichever meets the missing folder first: the child's own temporary file, or ptxas
    # writing its output there ("Could not open output file")
    assert record.message.startswith(
        (
            "machine fault: FileNotFoundError: [Errno 2] No such file or directory",
            "machine fault: JaxRuntimeError: INTERNAL",
        )
    )
    assert "No such file or directory" in record.message or (
        "Could not open output" in record.message
    )
    assert record.message.endswith(MACHINE_FAULT)
    missing.mkdir()  # the machine mended: the rerun compiles, and it compiles
    with InChild("compile_crash:run_target") as in_child:
        assert compile_only.recorded_runner(path, in_child)(cell).status == "ok"
    assert [r.status for r in records.load(path)] == ["error", "ok"]


# Run as a child: JAX started on the CPU, then the address space capped 200 MiB above
# what the process holds, then the CLI compiles for a TPU: libtpu (700 MB) cannot map.
_CAPPED_RUN = """
import resource, sys
import jax
import jaxcnn, jaxcnn.loop, jaxcnn.targets, jaxcnn.perf.predict, experiments.cli.plan  # held
from experiments.cli.run import main
jax.devices()
with open("/proc/self/status") as status:
    held = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
if sys.argv[1] == "capped":
    resource.setrlimit(resource.RLIMIT_AS, (held + 200 * 2**20, resource.RLIM_INFINITY))
sys.exit(main(sys.argv[2:]))
"""


@needs_targets
@pytest.mark.slow
def test_too_little_memory_to_load_libtpu_is_one_line_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    command = ["--target=tpu-v5e-1", "--model=mlp", "--set", "width=8", "--batch-size=8"]
    capped = subprocess.run(
        [sys.executable, "-c", _CAPPED_RUN, "capped", *command, f"--out={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert capped.returncode == 2, capped.stderr
    (line,) = capped.stderr.strip().splitlines()
    assert line.startswith("error: libtpu could not be loaded to compile for tpu-v5e-1 (")
    assert "(ulimit -v): give it more memory (ulimit -v unlimited, or free memory)" in line
    assert not out.exists()
    free = subprocess.run(  # the positive control: the same, uncapped, compiles
        [sys.executable, "-c", _CAPPED_RUN, "free", *command, f"--out={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert free.returncode == 0, free.stderr
    assert [r.status for r in records.load(out / records.RECORDS_FILE)] == ["ok"]


@pytest.mark.parametrize(
    ("record", "kept"),
    [
        ({"status": "error", "failed_by": "compiler", "message": "NOT_FOUND: ..."}, True),
        ({"status": "error", "failed_by": "machine", "message": "NOT_FOUND: ..."}, False),
        ({"status": "error", "message": "JaxRuntimeError: UNIMPLEMENTED: ptxas too old"}, False),
        ({"status": "error", "failed_by": None, "message": None}, False),
        ({"status": "ok", "failed_by": "compiler", "message": None}, False),
    ],
)
def test_only_an_explicit_refusal_of_the_compiler_is_kept_as_its_verdict(record, kept):
    made = _compiled(compile_workload("gpu-t4"), **record)
    assert compile_only.kept_refusal(made) is kept


def test_a_kept_compile_is_judged_by_the_chip_table_as_it_stands():
    # a T4 compile judged against an older, larger limit it carries (the datasheet's 16 GiB
    # x 0.75): by the table's T4 (what CUDA reports with ECC on) it does not fit, and a
    # batch search that meets it goes on below it
    now = targets.describe(targets.get("gpu-t4"))["usable_bytes_per_device"]
    assert now == int(chips.fact("Tesla T4", "memory_bytes") * 0.75) < 12 * chips.GiB
    w = compile_workload("gpu-t4", model="catsdogs_cnn", batch=240)
    between = {"total_bytes": now + 2**20}
    old = {"chips": 1, "devices": 1, "usable_bytes_per_device": 12 * chips.GiB}
    kept = _compiled(w, "ok", memory=between, fits=True, target=old)
    assert select.usable_bytes(kept) == now and not select.fits(kept)
    # the control: the same record of a chip the table does not know keeps its own limit
    own = _compiled(w, "ok", memory=between, fits=True, target=_chip_of_its_own(12 * chips.GiB))
    assert select.usable_bytes(own) == 12 * chips.GiB and select.fits(own)
