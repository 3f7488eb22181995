"""The studies: one function per question the seeds ask (the five documents, 000-004,
the project grew from).

    python -m experiments.run --study=NAME [--device=auto|cpu|gpu|tpu] [--data-dir=DIR]
    python -m experiments.run --study=all   # every study below, one after another
    python -m experiments.run --study=NAME --smoke --device=cpu   # seconds, for tests

A study is `(Context) -> list[Workload]`: what to run given the devices at hand. Sizes
are the issue's ("full") on accelerators; where the full size would take hours on a
CPU, the study picks a smaller one and its docstring says which. `--smoke` shrinks any
study to seconds on a CPU (digits instead of MNIST, tiny models, a few steps, 3 timed
steps): it checks that the study runs and writes valid records, nothing more.

Platform-dependent sizes live here and only here: the models and the train step never
look at the platform. Every workload carries `study=NAME`, which the report keys its
sections on. Real MNIST/Fashion-MNIST come from --data-dir (a folder of IDX files, or
a folder with `mnist/` and `fashion_mnist/` in it, such as DATASETS in the README) or
TFDS; a study that needs them without either stops with exit code 2 before any work.

Expected run times are for the whole study; "CPU" means this 2-core machine, the
accelerator figures are guesses until measured, and marked so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from experiments.workload import Workload


@dataclasses.dataclass(frozen=True)
class Context:
    """What a study may depend on: the platform, how many devices, --smoke."""

    platform: str = "cpu"  # cpu | gpu | tpu
    num_devices: int = 1
    smoke: bool = False

    @property
    def cpu(self) -> bool:
        return self.platform == "cpu"


Study = Callable[[Context], list[Workload]]

# --smoke: every study in seconds on a CPU.
SMOKE_TIMING = {"timing_steps": 3}
SMOKE_TRAIN = {"dataset": "digits", "batch_size": 32, "epochs": 1, "steps": 3, **SMOKE_TIMING}
# catsdogs_cnn with its layer structure kept (5 blocks, pools 2,2,2,3,3, BatchNorm,
# dropout) but 4 channels, 8 dense units and 96x96 inputs: compiles and steps in a second.
SMOKE_CATSDOGS = {
    "widths": ((4,), (4,), (4,), (4,), (4,)),
    "dense_width": 8,
    "input_size": 96,
}
TINY_MLP = {"width": 8}


def _mnist(ctx: Context, name: str = "mnist") -> str:
    return "digits" if ctx.smoke else name


def devices(ctx: Context) -> list[Workload]:
    """How much faster is the accelerator than the CPU for the MNIST CNN?

    Seed 001: 0.35-1.05 s/batch on a CPU vs 0.018 s/batch on a K80; seed 003: 5 epochs
    on a CPU vs a T4. `mnist_cnn` and `lenet5_keras` on MNIST, batch 128, 5 epochs, on
    one device: s/step, s/epoch, test accuracy; the report divides each accelerator's
    step time by the CPU record's.

    Command: python -m experiments.run --study=devices --device=gpu --data-dir=DIR
    Sizes: full everywhere (the CPU runs it in minutes).
    Expected: CPU ~5 min (mnist_cnn ~45 s/epoch, lenet5_keras ~7 s/epoch);
    smoke ~5 s; GPU/TPU ~1 min (a guess).
    """
    common = {"dataset": _mnist(ctx), "batch_size": 128, "epochs": 5, "timing_steps": 20}
    if ctx.smoke:
        common = SMOKE_TRAIN
    return [
        Workload(model=m, study="devices", num_devices=1, **common)
        for m in ("mnist_cnn", "lenet5_keras")
    ]


CROSSOVER_WIDTHS = tuple(2**i for i in range(5, 14))  # 32 .. 8192


def crossover(ctx: Context) -> list[Workload]:
    """When does the accelerator beat the CPU?

    Seed 002: a dense net on MNIST, time vs trainable parameters; the GPU is slower
    for small nets. `mlp` 784-n-n-10 (dropout 0.2) for n = 32, 64, ..., 8192 (n=4096
    is 20,037,642 params), batch 128, timing only (compile + 20 timed steps, no
    training) on synthetic 28x28 data: step time vs params per device. The report finds
    the crossover from two devices' records.

    Command: python -m experiments.run --study=crossover --device=gpu
    Sizes: full everywhere. Smoke: n = 8, 32, batch 16.
    Expected: CPU ~40 s (n=8192 is ~74M params, 0.45 s/step); smoke ~3 s;
    GPU/TPU < 1 min (a guess).
    """
    widths, batch, timing = CROSSOVER_WIDTHS, 128, 20
    if ctx.smoke:
        widths, batch, timing = (8, 32), 16, 3
    return [
        Workload(
            model="mlp",
            model_overrides={"width": n},
            dataset="synthetic",
            batch_size=batch,
            epochs=0,
            timing_steps=timing,
            study="crossover",
            num_devices=1,
        )
        for n in widths
    ]


BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512)
BATCH_SIZES_CPU = (8, 16, 32, 64)


def batch(ctx: Context) -> list[Workload]:
    """How do batch size and memory interact?

    Seed 000: the cats-vs-dogs CNN (21,463,713 params, 256x256x3) at batch 16 vs 128,
    out of memory at 32 on a 2 GB MX150. `catsdogs_cnn` on synthetic 256x256x3 images
    (no cats-vs-dogs data here) at batch 8, 16, ..., 512, timing only: images/s and
    XLA's compiled memory per batch; the first OOM is recorded and the larger batches
    get `skipped` records (one oom group). The report turns the memory figures into
    which batches fit on reference devices.

    Command: python -m experiments.run --study=batch --device=gpu
    Sizes: full on accelerators. CPU: batch 8..64 and 3 timed steps (a step is ~31
    GFLOP per image, ~0.45 s per image here, ~29 s at batch 64; XLA's compiled memory
    is ~2.3 GB at batch 16 and grows with the batch, so 512 would need more host memory
    than this machine shares: a CPU has no OOM to record, the Linux OOM killer would
    end the run instead). Smoke: catsdogs shrunk to 4 channels, 8 dense units, 96x96
    inputs, batch 2 and 4.
    Expected: CPU ~6 min; smoke ~5 s; GPU < 2 min (a guess).
    """
    sizes, overrides, timing = BATCH_SIZES, {}, 20
    if ctx.cpu:
        sizes, timing = BATCH_SIZES_CPU, 3
    if ctx.smoke:
        sizes, overrides, timing = (2, 4), SMOKE_CATSDOGS, 3
    return [
        Workload(
            model="catsdogs_cnn",
            model_overrides=overrides,
            dataset="synthetic",
            batch_size=b,
            epochs=0,
            timing_steps=timing,
            study="batch",
            num_devices=1,
            oom_group="batch:catsdogs_cnn",
        )
        for b in sizes
    ]


def device_counts(available: int) -> list[int]:
    """1, 2, 4, ... up to `available`, and `available` itself if not a power of two."""
    counts = [2**i for i in range(available.bit_length()) if 2**i <= available]
    return counts + ([available] if counts[-1] != available else [])


SCALING_PER_DEVICE_BATCH = 128


def scaling(ctx: Context) -> list[Workload]:
    """Does data parallelism scale?

    Seed 001's multi-GPU recipe: replicate the model, split the batch, average the
    gradients, update. `mnist_cnn` and `mlp` (n=1024) under `pmap` and `sharded` on
    1, 2, 4, ... devices (all there are), timing only on synthetic data: weak scaling
    (128 per device, global batch 128 x N) and strong scaling (global batch 128 x the
    largest N, split over N): throughput and efficiency vs 1 device.

    Command: python -m experiments.run --study=scaling --device=tpu  (a v5e-8 has 8)
    Sizes: full everywhere; a CPU has one device, so N=1 only (fake CPU devices share
    the same cores and would measure nothing). Smoke: `mlp` n=8 only, N = 1 and all
    (8 fake devices in tests), 8 per device.
    Expected: CPU ~1 min; smoke ~10 s with 8 fake devices; TPU v5e-8 ~2 min (a guess).
    """
    per_device, chosen = SCALING_PER_DEVICE_BATCH, ("mnist_cnn", "mlp")
    counts = device_counts(ctx.num_devices)
    timing = 20
    if ctx.smoke:
        per_device, chosen, timing = 8, ("mlp",), 3
        counts = sorted({1, ctx.num_devices})
    overrides = {"mnist_cnn": {}, "mlp": TINY_MLP if ctx.smoke else {"width": 1024}}
    strong_batch = per_device * max(counts)
    workloads = []
    for model in chosen:
        for strategy in ("pmap", "sharded"):
            for mode in ("weak", "strong"):
                for n in counts:
                    workloads.append(
                        Workload(
                            model=model,
                            model_overrides=overrides[model],
                            dataset="synthetic",
                            batch_size=per_device * n if mode == "weak" else strong_batch,
                            epochs=0,
                            timing_steps=timing,
                            strategy=strategy,
                            study="scaling",
                            num_devices=n,
                            scaling=mode,
                        )
                    )
    return workloads


MATMUL_SIZES = (256, 512, 1024, 2048, 4096, 8192)
MATMUL_SIZES_CPU = (256, 512, 1024, 2048, 4096)


def matmul(ctx: Context) -> list[Workload]:
    """How close does the device get to its peak?

    Seed 004: a matmul kernel 5x faster on a K20X than on a 6-core i7. Square matmuls
    n = 256, 512, ..., 8192 in f32 and bf16, one jitted call timed 20 times: TFLOP/s
    vs n, against the vendor's peak for the precision they run in. On a GPU f32 is
    also run with matmul precision "highest" (true fp32 instead of TF32).

    Command: python -m experiments.run --study=matmul --device=gpu
    Sizes: full on accelerators. CPU: n up to 4096 (n=8192 is 1.1 TFLOP a call, ~5 s
    here, 2 min per dtype for 22 calls). Smoke: n = 16, 32.
    Expected: CPU ~40 s (n=2048 takes ~85 ms in f32, ~105 ms in bf16); smoke ~2 s;
    GPU/TPU < 1 min (a guess).
    """
    sizes, timing = (MATMUL_SIZES_CPU if ctx.cpu else MATMUL_SIZES), 20
    if ctx.smoke:
        sizes, timing = (16, 32), 3
    variants = [("f32", "default"), ("bf16", "default")]
    if ctx.platform == "gpu":
        variants.append(("f32", "highest"))
    return [
        Workload(
            model="matmul",
            dataset="none",
            batch_size=n,
            epochs=0,
            precision=precision,
            matmul_precision=matmul_precision,
            timing_steps=timing,
            study="matmul",
            kind="matmul",
            num_devices=1,
        )
        for precision, matmul_precision in variants
        for n in sizes
    ]


ENSEMBLE_SIZES = (1, 4, 16)


def ensemble(ctx: Context) -> list[Workload]:
    """Training parallelism: ensembles and hyperparameter searches.

    Seed 004: many independent runs at once. K = 1, 4, 16 `lenet5_keras` models on
    MNIST, each with its own seed (seed+i) and learning rate (log-spaced lr/10..3 lr),
    batch 128: trained together in one step (jax.vmap of the one train step over
    stacked states, on one device) vs K runs one after another with the plain step.
    Records images/s of all K models and each model's test accuracy.

    Command: python -m experiments.run --study=ensemble --device=gpu --data-dir=DIR
    Sizes: 3 epochs on accelerators; CPU: 1 epoch (K=16 sequential alone is ~2 min
    an epoch here). Smoke: `mlp` n=8 on digits, K = 1, 2, 3 steps.
    Expected: CPU ~8 min; smoke ~10 s; GPU/TPU ~2 min (a guess).
    """
    common = {
        "model": "lenet5_keras",
        "dataset": _mnist(ctx),
        "batch_size": 128,
        "epochs": 1 if ctx.cpu else 3,
        "timing_steps": 20,
    }
    sizes = ENSEMBLE_SIZES
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
        sizes = (1, 2)
    return [
        Workload(
            **common,
            study="ensemble",
            kind="ensemble",
            ensemble_size=k,
            ensemble_mode=mode,
            num_devices=1,
        )
        for k in sizes
        for mode in ("vmap", "sequential")
    ]


def precision(ctx: Context) -> list[Workload]:
    """Same accuracy in fp32 and bf16?

    TPUs run bf16 natively (and f32 matmuls as bf16 passes by default); recent NVIDIA
    GPUs run f32 matmuls as TF32 by default. `mnist_cnn` on MNIST, batch 128, in f32
    and in bf16 compute (params stay f32), and on a GPU also f32 with matmul precision
    "highest" (TF32 off): step time and per-epoch accuracy.

    Command: python -m experiments.run --study=precision --device=gpu --data-dir=DIR
    Sizes: 5 epochs on accelerators; CPU: 1 epoch. Smoke: `mlp` n=8 on digits, 3 steps
    (the bf16 path, not the CNN, is what a smoke run checks; the CNNs compile slowly on
    a CPU).
    Expected: CPU ~5 min; smoke ~5 s; GPU/TPU ~1 min (a guess).
    """
    common = {
        "model": "mnist_cnn",
        "dataset": _mnist(ctx),
        "batch_size": 128,
        "epochs": 1 if ctx.cpu else 5,
        "timing_steps": 20,
    }
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
    variants = [("f32", "default"), ("bf16", "default")]
    if ctx.platform == "gpu":
        variants.append(("f32", "highest"))
    return [
        Workload(**common, precision=p, matmul_precision=m, study="precision", num_devices=1)
        for p, m in variants
    ]


def accuracy(ctx: Context) -> list[Workload]:
    """Same model, same accuracy on every device?

    Seed 000 (Fig. 14): accuracy and loss per epoch. `mnist_cnn` on MNIST and on
    Fashion-MNIST, batch 128: per-epoch train/test loss and accuracy; the report
    overlays the devices' curves.

    Command: python -m experiments.run --study=accuracy --device=gpu --data-dir=DIR
    Sizes: 10 epochs on accelerators; CPU: 5 epochs. Smoke: `mlp` n=8 on digits only
    (it stands in for both datasets, so one workload), 2 epochs (44 steps each) at
    batch 32.
    Expected: CPU ~8 min; smoke ~5 s; GPU/TPU ~2 min (a guess).
    """
    if ctx.smoke:
        return [
            Workload(
                model="mlp",
                model_overrides=TINY_MLP,
                dataset="digits",
                batch_size=32,
                epochs=2,
                timing_steps=3,
                study="accuracy",
                num_devices=1,
            )
        ]
    epochs = 5 if ctx.cpu else 10
    return [
        Workload(
            model="mnist_cnn",
            dataset=name,
            batch_size=128,
            epochs=epochs,
            timing_steps=20,
            study="accuracy",
            num_devices=1,
        )
        for name in ("mnist", "fashion_mnist")
    ]


BENCH_MODELS = (("lenet5_keras", {}), ("mnist_cnn", {}), ("mlp", {"width": 4096}))
BENCH_BATCHES = (32, 128, 512)
# An accelerator's best batch for these models lies far above a CPU's.
BENCH_BATCHES_ACCELERATOR = (*BENCH_BATCHES, 2048, 8192)
BENCH_TIMING_STEPS = 20
# Accelerators also time every other model of the zoo at its own input size (synthetic
# images), per-step dispatch in f32 and bf16, up to the first batch that does not fit.
BENCH_MODELS_ACCELERATOR = ("catsdogs_cnn", "resnet18", "resnet50", "vgg16")
BENCH_BATCHES_LARGE_MODELS = (32, 128, 512)


def bench(ctx: Context) -> list[Workload]:
    """How fast is the train step, and which choice makes it so? (issue 8)

    `lenet5_keras`, `mnist_cnn` and `mlp` n=4096 at batch 32, 128 and 512 (and 2048
    and 8192 on accelerators, where the best batch is larger), timing only
    (compile, then 7 timed blocks of 20 steps; images/s is their median, the record's
    `throughput`) on MNIST (real images: the device loop reads a new batch each step).
    Per model and batch: XLA's own convolutions and the platform's formulation (on a
    CPU these differ: jaxcnn.formulation), each with per-step dispatch (`loop=step`)
    and whole epochs as one compiled loop (`loop=device`); then bf16 compute with the
    platform's formulation in both loops. The report sets the CPU figures beside the
    PyTorch peer's (benchmarks/peers.py) and the issue's peer table. Both loops run in
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
    """
    from jaxcnn import formulation

    platform_choice = formulation.for_platform(ctx.platform).name
    formulations = ("xla",) if platform_choice == "xla" else ("xla", platform_choice)
    cells = [(f, loop, "f32") for f in formulations for loop in ("step", "device")]
    cells += [(platform_choice, loop, "bf16") for loop in ("step", "device")]
    chosen_models = BENCH_MODELS
    batches = BENCH_BATCHES if ctx.cpu else BENCH_BATCHES_ACCELERATOR
    common = {"timing_steps": BENCH_TIMING_STEPS}
    if ctx.smoke:
        chosen_models, batches, common = (("mlp", TINY_MLP),), (32,), SMOKE_TIMING
    small = [
        Workload(
            model=model,
            model_overrides=overrides,
            dataset=_mnist(ctx),
            batch_size=size,
            epochs=0,
            precision=precision,
            study="bench",
            num_devices=1,
            loop=loop,
            formulation=chosen,
            **common,
        )
        for model, overrides in chosen_models
        for size in batches
        for chosen, loop, precision in cells
    ]
    if ctx.cpu or ctx.smoke:
        return small
    large = [
        Workload(
            model=model,
            dataset="synthetic",
            batch_size=size,
            epochs=0,
            precision=precision,
            study="bench",
            num_devices=1,
            oom_group=f"bench:{model}:{precision}",
            **common,
        )
        for model in BENCH_MODELS_ACCELERATOR
        for precision in ("f32", "bf16")
        for size in BENCH_BATCHES_LARGE_MODELS
    ]
    return small + large


def roofline(ctx: Context) -> list[Workload]:
    """How far is a measured step from its predicted (roofline) time? (issue 21)

    The bench's cells (its models and batches) in the configurations the bench finds
    fastest: the platform's formulation, in both loops, f32 (and bf16 on accelerators,
    where it is the fast precision; on a CPU bf16 runs at half the f32 rate). Every
    record carries its measured step time and, from the same run, the compiled step's
    roofline prediction (`prediction`: this run's measured matmul ceiling and memory
    bandwidth; on a chip with datasheet figures also `prediction_vendor`); the report
    divides one by the other per cell. Its own study, so the bench's records stay as
    they were measured.

    Command: python -m experiments.run --study=roofline --device=cpu --data-dir=DIR
    Sizes: the bench's. Smoke: the bench's smoke cells.
    Expected: CPU ~7 min on a quiet machine (the bench's step times: mlp at batch 512
    is a third of it); smoke ~10 s; GPU/TPU ~10 min, most of it compiling the large
    models (a guess).
    """
    from jaxcnn import formulation

    chosen = formulation.for_platform(ctx.platform).name
    precisions = ("f32",) if ctx.cpu else ("f32", "bf16")
    group = lambda w: w.oom_group and w.oom_group.replace("bench:", "roofline:", 1)  # noqa: E731
    return [
        dataclasses.replace(w, study="roofline", oom_group=group(w))
        for w in bench(ctx)
        if w.precision in precisions
        and formulation.resolve(w.formulation, ctx.platform).name == chosen
    ]


# The speedrun recipe per platform kind: accelerators run bf16 at large batches;
# a CPU runs f32 (bf16 is slower there: PERFORMANCE.md entry 8) at a batch it runs fast.
# Peak learning rates per batch: from CPU runs (PERFORMANCE.md entry 17).
SPEEDRUN_CPU = {"precision": "f32", "batches": {128: 1e-2}, "budgets": (1, 2), "seeds": 3}
SPEEDRUN_ACCELERATOR = {
    "precision": "bf16",
    "batches": {512: 2e-2, 1024: 3e-2, 2048: 4e-2},
    "budgets": (2, 3, 4, 5),
    "seeds": 3,
}


def speedrun(ctx: Context) -> list[Workload]:
    """How fast does a device train mnist_cnn to 99% test accuracy? (issue 8)

    The recipe: the training set resident on the device and each epoch one compiled
    loop (`loop=device`), Adam on a one-cycle schedule that spans the run and peaks at
    the batch's learning rate (`schedule=onecycle`), the platform's formulation, bf16
    compute (params f32) on accelerators, f32 on a CPU. Each epoch budget is its own
    run (the schedule spans the budget), over several seeds: the report pools a
    budget's seeds (mean final test accuracy on the real test split, median training
    time with compile and evaluation excluded) and names the fastest budget whose mean
    reaches 99%. The learning rates were chosen on this repository's CPU runs
    (PERFORMANCE.md entry 17), accuracy being a property of the recipe, not the chip.

    Command: python -m experiments.run --study=speedrun --device=gpu --data-dir=DIR
    Sizes: accelerators: batch 512, 1024 and 2048, 2-5 epochs, 3 seeds; CPU: batch
    128, 1-2 epochs, 3 seeds. Smoke: `mlp` n=8 on digits, 3 steps, 2 seeds.
    Expected: CPU ~5 min; smoke ~10 s; GPU/TPU ~5 min, mostly compiling (a guess).
    """
    recipe = SPEEDRUN_CPU if ctx.cpu else SPEEDRUN_ACCELERATOR
    common = {"model": "mnist_cnn", "dataset": _mnist(ctx), "timing_steps": 10}
    batches, budgets, seeds = recipe["batches"], recipe["budgets"], recipe["seeds"]
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
        budgets, seeds = (common.pop("epochs"),), 2
        batches = {common.pop("batch_size"): 1e-2}
    return [
        Workload(
            **common,
            batch_size=batch,
            learning_rate=rate,
            epochs=budget,
            seed=seed,
            precision=recipe["precision"],
            schedule="onecycle",
            loop="device",
            study="speedrun",
            num_devices=1,
        )
        for batch, rate in batches.items()
        for budget in budgets
        for seed in range(seeds)
    ]


STUDIES: dict[str, Study] = {
    "devices": devices,
    "crossover": crossover,
    "batch": batch,
    "scaling": scaling,
    "matmul": matmul,
    "ensemble": ensemble,
    "precision": precision,
    "accuracy": accuracy,
    "bench": bench,
    "speedrun": speedrun,
    "roofline": roofline,
}


def workloads(names: list[str], ctx: Context) -> list[Workload]:
    """Every workload of the named studies, in order."""
    return [w for name in names for w in STUDIES[name](ctx)]


# --- Compiled, not run: devices not at hand ---------------------------------------------


@dataclasses.dataclass(frozen=True)
class TargetCell:
    """One model x target x precision of the targets study: its batches are searched
    (experiments/compile_only.batch_search), so it is not a fixed list of workloads."""

    model: str
    target: str
    precision: str
    strategy: str
    start: int  # the first global batch tried
    step: int  # batches are multiples of this (the target's devices)
    cap: int  # the largest global batch tried


IMAGENET_MODELS = ("resnet18", "resnet50", "vgg16")
# The seeds' own models first (000's catsdogs_cnn, 001/003's mnist_cnn, 002/004's
# lenet5_keras and mlp); the rest by size.
TARGETS_FIRST = ("catsdogs_cnn", "mnist_cnn", "lenet5_keras", "mlp")
PER_DEVICE_START, PER_DEVICE_CAP = 16, 8192


def targets(smoke: bool = False) -> list[TargetCell]:
    """Would it fit, and how fast, on a chip I do not have? (seeds 000 and 002)

    Every zoo model x every target of jaxcnn/targets.py up to 8 chips, and the bigger
    TPU slices for the ImageNet models (global batch scaling with the chips), in f32 and
    bf16: the largest batch whose train step fits the chip's memory, doubling from 16
    per device, then aiming where memory extrapolated from the last two reaches the
    chip's, then bisecting (compile_only.batch_search), each batch one compile-only
    record. GPUs first, then one TPU chip, one TPU host, bigger slices (each compile
    costs more); within each, the seeds' models first.

    Command: python -m experiments.run --study=targets   (needs .[targets])
    Smoke: mnist_cnn on tpu-v5e-1 and gpu-t4, f32, batch 16 to 32.
    Expected: hours on this 2-core CPU (resnet50/vgg16 TPU compiles take minutes each).
    """
    from jaxcnn import models
    from jaxcnn import targets as targets_lib

    if smoke:
        chosen = [targets_lib.get("gpu-t4"), targets_lib.get("tpu-v5e-1")]
        return [TargetCell("mnist_cnn", t.name, "f32", "single", 16, 1, 32) for t in chosen]

    def tier(t: targets_lib.Target) -> int:  # GPUs, one TPU chip, one TPU host, slices
        return 0 if t.platform == "gpu" else 1 if t.devices == 1 else 2 if t.devices <= 8 else 3

    table = list(targets_lib.TARGETS.values())
    first = [m for m in TARGETS_FIRST if m in models.names()]
    rest = sorted(set(models.names()) - set(first), key=lambda m: sum(models.param_counts(m)))
    names = first + rest
    cells = []
    for level in range(4):
        for model in names:
            if level == 3 and model not in IMAGENET_MODELS:
                continue
            for target in (t for t in table if tier(t) == level):
                for precision in ("f32", "bf16"):
                    n = target.devices
                    strategy = "single" if n == 1 else "sharded"
                    start, cap = PER_DEVICE_START * n, PER_DEVICE_CAP * n
                    cells.append(TargetCell(model, target.name, precision, strategy, start, n, cap))
    return cells


COMPILE_STUDIES = {"targets": targets}
