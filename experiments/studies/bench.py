"""How fast is the train step, and which choice makes it so?

`lenet5_keras`, `mnist_cnn` and `mlp` n=4096 at batch 32, 128 and 512 (and 2048
and 8192 on accelerators, where the best batch is larger), timing only
(compile, then 7 timed blocks of 20 steps; images/s is their median, the record's
`throughput`) on MNIST (real images: the device loop reads a new batch each step).
Per model and batch: XLA's own convolutions and the platform's formulation (on a
CPU these differ: jaxcnn.formulation), each with per-step dispatch (`loop=step`)
and whole epochs as one compiled loop (`loop=device`); then bf16 compute with the
platform's formulation in both loops; on a CPU where oneDNN is installed (the
`[onednn]` extra, and a g++), also the `onednn` formulation in f32, both loops, for
the two convolutional models; on an accelerator, for the same two, the `cpu`
formulation (convolutions as GEMMs, no cuDNN) in f32, both loops: seed 004's question
of what the kernel library is worth, asked of cuDNN. The report sets the CPU figures beside the
PyTorch and Keras peers' (benchmarks/peers.py). Both loops run in
one process, so on a CPU `--set host_memory=auto` gives both `retain` (the step loop's
choice, jaxcnn/host_memory.py); `--set host_memory=system` measures the other policy.

On accelerators also `catsdogs_cnn`, `resnet18`, `resnet50` and `vgg16` on synthetic
images at batch 32, 128 and 512, per-step dispatch in f32 and bf16; a batch that
runs out of memory ends its model and precision's sweep (the rest `skipped`). The
report names each model's fastest figure and its batch.

Command: python -m experiments.run --study=bench --device=cpu --data-dir=DIR
Sizes: full everywhere. Smoke: `mlp` n=8 only, digits, batch 32, 3 steps per block
(the formulations' convolutions are checked by tests/test_formulation.py).
Expected: CPU ~30 min (XLA's convolutions in a compiled loop are the slow cells);
smoke ~20 s; GPU/TPU ~15 min, most of it compiling the large models (a guess).

Its page sets the step per model, batch and configuration beside the peer frameworks'
(benchmarks/peers.py) on the same machine, and the runs paired in turns
(`report/figures.paired_rows`).
"""

from __future__ import annotations

from collections import defaultdict

from experiments.records import Record, labels, recorded_at_or_oldest, took_turns
from experiments.records.select import sitting
from experiments.records.tables import markdown_text
from experiments.records.workload import Workload
from experiments.studies import bench_cells
from experiments.studies.base import SMOKE_TIMING, TINY_MLP, Context, Study, dataset_for
from experiments.studies.page import (
    DEVICE_OVER_STEP_LOOP,
    Page,
    Section,
    extra_contains,
    select,
)
from jaxcnn.choices import LOOPS

BENCH_MODELS = (("lenet5_keras", {}), ("mnist_cnn", {}), ("mlp", {"width": 4096}))
BENCH_BATCHES = (32, 128, 512)
# An accelerator's best batch for these models lies far above a CPU's.
BENCH_BATCHES_ACCELERATOR = (*BENCH_BATCHES, 2048, 8192)
BENCH_TIMING_STEPS = 20
# oneDNN's convolutions (on a CPU where they can be built) for the convolutional models;
# mlp has no convolution, so its `onednn` program is its `cpu` one. On an accelerator,
# the same models' convolutions as GEMMs over patches (the `cpu` formulation) beside
# XLA's own, which call the chip's kernel library (cuDNN on a GPU): that library's worth.
ONEDNN_MODELS = ("lenet5_keras", "mnist_cnn")
GEMMS = "cpu"
# Accelerators also time every other model of the zoo at its own input size (synthetic
# images), per-step dispatch in f32 and bf16, up to the first batch that does not fit.
BENCH_MODELS_ACCELERATOR = ("catsdogs_cnn", "resnet18", "resnet50", "vgg16")
BENCH_BATCHES_LARGE_MODELS = (32, 128, 512)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    from jaxcnn import formulation, onednn

    platform_choice = formulation.for_platform(ctx.platform).name
    formulations = ("xla",) if platform_choice == "xla" else ("xla", platform_choice)
    cells = [(f, loop, "f32") for f in formulations for loop in LOOPS]
    cells += [(platform_choice, loop, "bf16") for loop in LOOPS]
    with_onednn = ctx.cpu and not ctx.smoke and onednn.available()
    extra = [("onednn", loop, "f32") for loop in LOOPS] if with_onednn else []
    if not ctx.cpu and not ctx.smoke:  # the chip's library (cuDNN) against plain GEMMs
        extra = [(GEMMS, loop, "f32") for loop in LOOPS]
    chosen_models = BENCH_MODELS
    batches = BENCH_BATCHES if ctx.cpu else BENCH_BATCHES_ACCELERATOR
    timing = {"timing_steps": BENCH_TIMING_STEPS}
    if ctx.smoke:
        chosen_models, batches, timing = (("mlp", TINY_MLP),), (32,), SMOKE_TIMING
    common = {"epochs": 0, "study": "bench", "num_devices": 1, **timing}
    small = [
        Workload(
            model=model,
            model_overrides=overrides,
            dataset=dataset_for(ctx),
            batch_size=size,
            precision=precision,
            loop=loop,
            formulation=chosen,
            **common,
        )
        for model, overrides in chosen_models
        for size in batches
        for chosen, loop, precision in cells + (extra if model in ONEDNN_MODELS else [])
    ]
    if ctx.cpu or ctx.smoke:
        return small
    large = [
        Workload(
            model=model,
            dataset="synthetic",
            batch_size=size,
            precision=precision,
            oom_group=f"bench:{model}:{precision}",
            **common,
        )
        for model in BENCH_MODELS_ACCELERATOR
        for precision in ("f32", "bf16")
        for size in BENCH_BATCHES_LARGE_MODELS
    ]
    return small + large


def configuration(record: Record) -> str:
    """`jax cpu device f32`, `torch compile`: what produced a bench figure."""
    w = record.workload
    if w.kind == "peer":
        return markdown_text(f"{w.framework} {w.mode}")
    name = (record.formulation and record.formulation.name) or "xla"
    return f"jax {name} {record.loop or 'step'} {w.precision}"


_model, _machine = bench_cells.model_name, labels.machine


def _rate(record: Record) -> float:
    return record.throughput.median


def host_memory_policy(record: Record) -> str:
    """The host allocator policy a record ran under (records before it existed: system)."""
    policy = record.env.host_memory
    return (policy and policy.policy) or "system"


def _own(records: list[Record]) -> list[Record]:
    """The bench study's records but the paired driver's: its pairs, and the blocks
    taken in turns behind them (benchmarks/paired.py), are the paired table's."""
    return [
        r
        for r in records
        if r.workload.study == "bench" and r.workload.kind != "paired" and not took_turns(r)
    ]


def bench_records(records: list[Record]) -> list[Record]:
    """The latest record, ok or not, per machine, model, batch, configuration and policy."""

    def key(r: Record) -> tuple:
        platform, policy = r.device.platform, host_memory_policy(r)
        return platform, _machine(r), _model(r), r.workload.batch_size, configuration(r), policy

    # the bench's own records are train and peer records, which both may time throughput
    ours = [r for r in _own(records) if r.throughput is not None or r.status != "ok"]
    chosen = {key(r): r for r in sorted(ours, key=recorded_at_or_oldest)}  # the newest a key
    # Records from before the policy was recorded are glibc's defaults on another day:
    # a configuration measured since under a named policy leaves them out.
    named = {key[:-1] for key, r in chosen.items() if r.env.host_memory}
    return [r for key, r in chosen.items() if r.env.host_memory or key[:-1] not in named]


def _groups(records: list[Record]) -> dict[tuple, dict[str, list[Record]]]:
    """(platform, machine, model, batch) -> configuration -> its records, `retain` first."""
    grouped: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(bench_records(records), key=lambda r: host_memory_policy(r) != "retain"):
        key = (r.device.platform, _machine(r), _model(r), r.workload.batch_size)
        grouped[key][configuration(r)].append(r)
    return dict(sorted(grouped.items()))


def _shown(cells: dict[str, list[Record]], config: str) -> Record | None:
    """A configuration's figure: its faster host memory policy's record (ok first)."""
    records = cells.get(config) or []
    ok = [r for r in records if r.status == "ok"]
    return max(ok, key=_rate) if ok else (records[0] if records else None)


def _best(cells: dict[str, list[Record]], peer: bool, precision: str = "f32") -> Record | None:
    """The fastest ok figure on one side (JAX at `precision`, or the peers)."""
    shown = [
        _shown(cells, name)
        for name in cells
        if name.startswith("jax") != peer and (peer or name.endswith(precision))
    ]
    return max([r for r in shown if r and r.status == "ok"], key=_rate, default=None)


def fastest_pair(
    records: list[Record], model: str, batch: int, machine: str
) -> tuple[Record | None, Record | None]:
    """(the best JAX f32 record, the fastest peer's) of the CPU bench cell of `model` (`mlp
    4096`) at `batch` on `machine`: what benchmarks/paired.py re-measures in turns."""
    cells = _groups(records).get(("cpu", machine, model, batch))
    if cells is None:
        return None, None
    # each configuration in its newest sitting, as the table shows it: the fastest of all
    # its sittings may be a faster VM's, another figure than the table divides
    newest = {}
    for config, rs in cells.items():
        last = sitting(max(rs, key=recorded_at_or_oldest))
        newest[config] = [r for r in rs if sitting(r) == last]
    return _best(newest, False), _best(newest, True)


STUDY = Study(
    "bench",
    workloads=workloads,
    question="How fast is the train step, and how does it compare with PyTorch and Keras?",
    page=Page("The CPU step against PyTorch and Keras, and the kernel libraries", [
        Section("Step time per framework and formulation (measured, the step timed alone: "
                "no host loop around it, unlike jaxcnn's loop; each in its sitting, when the "
                "newest record's run began: one CPU label's VMs differ between sittings)",
                select(quantity="step_s", kind="measured", platform="cpu", extra="-"),
                "model batch precision device dataset value spread sitting how"),
        Section("Paired runs: the first configuration's speed over the second's, in turns",
                select(quantity="speedup", framework="paired"),
                "model batch precision device dataset value spread sitting how"),
        Section("Each formulation over the xla formulation",
                extra_contains("vs xla formulation", quantity="speedup"),
                "model batch precision device value how flag"),
        Section("oneDNN over the default (cpu) formulation: in jaxcnn's loop (what a fit "
                "sees, host work included), and each at its best (either loop)",
                extra_contains("vs cpu formulation", quantity="speedup"),
                "model batch precision device value how flag"),
        Section("The device loop over the step loop, per formulation (below 1: the device "
                "loop is the slower)",
                extra_contains(DEVICE_OVER_STEP_LOOP, quantity="speedup", platform="cpu"),
                "model batch precision device value how flag"),
        Section("The seed's kernel-library claim",
                select(kind="published", quantity="speedup", selection="published"),
                "model batch device value note"),
    ]),
)  # fmt: skip
