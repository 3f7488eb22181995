"""Several GPUs of one host as compile-only targets: their devices, the gradient
all-reduce in their compiled step, the link it is priced over, and predicted weak
scaling that never passes ideal."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
from conftest import needs_extra

from experiments import records
from experiments.harness import compile_only
from experiments.predict import shown as predictions
from experiments.records.workload import Workload
from experiments.studies import COMPILE_STUDIES
from jaxcnn import models, targets
from jaxcnn.perf import chips
from jaxcnn.perf import hlo as kernels
from jaxcnn.perf import host as host_lib

ROOT = Path(__file__).resolve().parents[1]
needs_cuda_plugin = needs_extra("targets")  # the CUDA plugin compiles for the GPUs
MULTI_GPU = [t for t in targets.TARGETS.values() if t.platform == "gpu" and t.chips > 1]


def test_the_seed_recipes_gpu_hosts_are_targets():
    names = {t.name for t in MULTI_GPU}
    # Kaggle's free 2 x T4, and seed 001's 8 x V100 / A100 / H100 with 2 and 4 between
    assert {"gpu-t4x2", "gpu-v100x8", "gpu-a100x8", "gpu-h100x8"} <= names
    for t in MULTI_GPU:
        one = [o for o in targets.TARGETS.values() if o.chip == t.chip and o.chips == 1]
        assert len(one) == 1 and one[0].spec == t.spec  # the same chip, and a base to scale from
        assert t.devices == t.chips


def test_a_runtimes_gpus_pair_with_the_target_of_as_many():
    assert targets.matching("Tesla T4", 2).name == "gpu-t4x2"  # Kaggle's two T4s
    assert targets.matching("Tesla T4", 1).name == "gpu-t4"
    assert targets.matching("NVIDIA A100-SXM4-40GB", 8).name == "gpu-a100x8"
    assert targets.matching("NVIDIA A100-SXM4-40GB", 3).name == "gpu-a100"  # none of 3


@pytest.mark.parametrize(
    ("kind", "link"),
    [
        ("Tesla T4", 16 * 8e9 * 128 / 130 / 8),  # no NVLink: PCIe Gen3 x16, one way
        ("Tesla V100-SXM2-16GB", 150e9),  # NVLink 2.0, 300 GB/s both ways
        ("NVIDIA A100-SXM4-40GB", 300e9),  # NVLink 3.0, 600 GB/s both ways
        ("NVIDIA H100 80GB HBM3", 450e9),  # NVLink 4.0, 900 GB/s both ways
    ],
)
def test_the_multi_gpu_chips_price_collectives_over_their_link(kind, link):
    assert chips.fact(kind, "interconnect") == pytest.approx(link)


def test_a100_80gb_and_h100_pcie_are_chips_of_their_own():
    assert chips.chip_name("NVIDIA A100-SXM4-80GB") == "A100 80GB"
    assert chips.chip_name("NVIDIA A100-SXM4-40GB") == "A100"
    assert chips.chip_name("NVIDIA H100 PCIe") == "H100 PCIe"
    assert chips.fact("NVIDIA A100-SXM4-80GB", "bandwidth") == 2039e9
    assert chips.fact("NVIDIA H100 PCIe", "bandwidth") == 2000e9
    for name in ("gpu-a100-80gb", "gpu-h100-pcie"):
        target = targets.get(name)
        assert chips.chip_name(target.kind) == target.chip


def test_a_placement_over_devices_dispatches_no_faster_than_one_device():
    table = {"host": {"dispatch_s": {"single": 150e-6, "sharded": 90e-6, "pmap": 200e-6}}}
    assert host_lib.measured_dispatch("sharded", table) == 150e-6
    assert host_lib.measured_dispatch("pmap", table) == 200e-6  # its own, slower
    assert host_lib.measured_dispatch("single", table) == 150e-6
    assert host_lib.measured_dispatch("sharded", {"host": {"dispatch_s": {}}}) is None


def test_the_scaling_targets_study_compiles_one_batch_per_gpu_on_every_count():
    cells = COMPILE_STUDIES["scaling_targets"](False)
    by_series = defaultdict(set)
    for c in cells:
        t = targets.get(c.target)
        assert c.start == c.cap and c.start % t.devices == 0  # one batch: no search
        by_series[(c.model, c.overrides, t.chip, c.start // t.devices)].add(t.chips)
    assert {frozenset(chips) for chips in by_series.values()} == {
        frozenset({1, 2, 4}),
        frozenset({1, 2, 4, 8}),
    }
    assert {(c.model, c.overrides) for c in cells} >= {
        ("mnist_cnn", ()),
        ("mlp", (("width", 1024),)),
        ("lenet5_keras", ()),
        ("catsdogs_cnn", ()),
    }


def _param_bytes(model: str, **overrides) -> int:
    trainable, _ = models.param_counts(model, **overrides)
    return 4 * trainable  # f32 gradients


@needs_cuda_plugin
def test_two_t4s_compile_the_step_with_its_gradient_all_reduce():
    workload = Workload(
        model="mlp",
        model_overrides={"width": 8},
        dataset="synthetic",
        batch_size=16,
        epochs=0,
        strategy="sharded",
        kind="compile",
        target="gpu-t4x2",
    )
    r = records.typed(compile_only.run_target(workload, ("train",)))
    assert r.status == "ok", r.message
    assert r.device.count == 2 and r.device.kind == "Tesla T4"
    found = [k for k in kernels.from_summary(r.kernels) if k.kind == "collective"]
    moved = sum(k.collective_bytes * k.count for k in found)
    # a ring all-reduce over n = 2 moves 2(n-1)/n = 1 x its operand: the gradients, and
    # the few scalars of the step's metrics
    grads = _param_bytes("mlp", width=8)
    assert grads <= moved <= grads + 64
    p = predictions.of(r)
    assert p["collective_s"] == pytest.approx(moved / chips.fact("Tesla T4", "interconnect"))


@needs_cuda_plugin
def test_the_scaling_targets_smoke_compiles_one_and_two_t4s_once_each(tmp_path, capsys):
    from experiments.cli.run import main

    assert main(["--study=scaling_targets", "--smoke", f"--out={tmp_path}"]) == 0
    out = capsys.readouterr().out
    made = records.load(tmp_path / records.RECORDS_FILE)
    assert sorted((r.target.name, r.workload.batch_size) for r in made) == [
        ("gpu-t4", 128),
        ("gpu-t4x2", 256),
    ]
    assert {r.workload.study for r in made} == {"scaling_targets"}
    assert "largest batch" not in out  # one batch per cell: nothing searched
    assert "collectives (over the chip's link at 15.8 GB/s)" in out  # the two T4s' PCIe


# --- Weak scaling never passes ideal ---------------------------------------------------


def above_ideal(series: dict[tuple, dict[int, float]]) -> list[str]:
    """The series (images/s by chip count) whose N chips are predicted to do more than N
    times one chip's images/s."""
    return [
        f"{key} at {n} chips: {images / (n * by_chips[1]):.4f} of ideal"
        for key, by_chips in series.items()
        for n, images in by_chips.items()
        if images > n * by_chips[1] * (1 + 1e-9)
    ]


def weak_series(loaded: list[records.Record]) -> dict[tuple, dict[int, float]]:
    """Compile-only records that fit, predicted per kernel, by (model, overrides,
    precision, chip, batch per chip) over chip counts, where one chip and more are there."""
    series: dict[tuple, dict[int, float]] = defaultdict(dict)
    for r in loaded:
        if not (isinstance(r, records.CompileRecord) and r.status == "ok" and r.kernels):
            continue
        w, chips = r.workload, r.target.chips
        if w.batch_size % chips:
            continue
        p = predictions.of(r)
        if not p or not p.get("images_per_s"):
            continue
        overrides = tuple(sorted((w.model_overrides or {}).items()))
        key = (w.model, overrides, w.precision, r.target.chip, w.batch_size // chips)
        series[key][chips] = p["images_per_s"]
    return {k: v for k, v in series.items() if 1 in v and len(v) > 1}


def test_the_check_finds_a_series_above_ideal():  # the positive control
    assert above_ideal({("m",): {1: 100.0, 2: 199.0, 4: 401.0}}) == [
        "('m',) at 4 chips: 1.0025 of ideal"
    ]


def test_no_committed_compiled_series_is_predicted_above_ideal():
    loaded = records.load(ROOT / "results" / records.RECORDS_FILE)
    series = weak_series(loaded)
    gpus = {k[3] for k, v in series.items() if max(v) > 1} & {t.chip for t in MULTI_GPU}
    assert gpus == {t.chip for t in MULTI_GPU}  # every multi-GPU chip has a curve to check
    assert above_ideal(series) == []
