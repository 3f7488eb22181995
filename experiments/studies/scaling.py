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

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from experiments import analysis, predictions
from experiments.labels import device_label, model_label
from experiments.studies._common import (
    batch_size,
    fmt_images,
    fmt_pct,
    fmt_step,
    image,
    in_study,
    log_axes,
    measured_on,
    no_accelerator,
    on_accelerator,
    only_ok,
    overrides,
    precision_of,
    pyplot,
    save,
    section,
)
from experiments.studies.base import TINY_MLP, Context, Record, Study, Summary
from experiments.studies.targets import (
    compiled,
    fits_chip,
    memory_cell,
    predicted_images,
    prediction,
    prediction_method,
    target_field,
    target_name,
)
from experiments.tables import markdown_table, seconds
from experiments.workload import Workload


def device_counts(available: int) -> list[int]:
    """1, 2, 4, ... up to `available`, and `available` itself if not a power of two."""
    counts = [2**i for i in range(available.bit_length()) if 2**i <= available]
    return counts + ([available] if counts[-1] != available else [])


SCALING_PER_DEVICE_BATCH = 128


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    per_device, chosen = SCALING_PER_DEVICE_BATCH, ("mnist_cnn", "mlp")
    counts = device_counts(ctx.num_devices)
    timing = 20
    if ctx.smoke:
        per_device, chosen, timing = 8, ("mlp",), 3
        counts = sorted({1, ctx.num_devices})
    overrides = {"mnist_cnn": {}, "mlp": TINY_MLP if ctx.smoke else {"width": 1024}}
    strong_batch = per_device * max(counts)
    return [
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
        for model in chosen
        for strategy in ("pmap", "sharded")
        for mode in ("weak", "strong")
        for n in counts
    ]


def chip_label(record: Record) -> str:
    """A device without its count: the scaling study's curves run over the count."""
    d = record["device"]
    return d["platform"] if d["kind"] == d["platform"] else f"{d['platform']} {d['kind']}"


def scaling_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 001: data parallelism over 1..N devices, weak and strong."""
    measured = only_ok(in_study(records, "scaling"))
    groups: dict[tuple, dict[int, Record]] = defaultdict(dict)
    for r in measured:
        w = r["workload"]
        key = (w.get("scaling") or "-", model_label(r), w["strategy"], chip_label(r))
        groups[key][r["device"]["count"]] = r
    if not groups:
        return "", []
    rows = []
    modes = sorted({key[0] for key in groups})
    fig, axes = pyplot().subplots(1, len(modes), figsize=(5.5 * len(modes), 4.5), squeeze=False)
    for (mode, model, strategy, chip), by_count in sorted(groups.items()):
        throughput = {n: r["images_per_s"] for n, r in by_count.items()}
        efficiency = analysis.scaling_efficiency(throughput)
        for n, r in sorted(by_count.items()):
            row = [mode, model, strategy, chip, n, batch_size(r), fmt_step(r), fmt_images(r)]
            rows.append([*row, fmt_pct(efficiency.get(n))])
        ax = axes[0][modes.index(mode)]
        counts = sorted(throughput)
        label = f"{model} {strategy} on {chip}"
        line = ax.plot(counts, [throughput[n] for n in counts], marker="o", label=label)[0]
        if 1 in throughput:  # perfect scaling from the one-device point
            ideal = [n * throughput[1] for n in counts]
            ax.plot(counts, ideal, linestyle="--", color=line.get_color(), linewidth=1)
    for mode, ax in zip(modes, axes[0], strict=True):
        counts = [n for key, by in groups.items() if key[0] == mode for n in by]
        log_axes(ax, "devices", "images / s", f"{mode} scaling (dashed: N x one device)", counts)
    path = save(fig, out / "study_scaling.png")
    headers = ["scaling", "model", "strategy", "device", "N", "global batch", "s/step"]
    table = markdown_table([*headers, "images/s", "efficiency"], rows)
    intro = (
        "Throughput over N devices (seed 001's recipe: replicate, split the batch, "
        "average gradients). Weak scaling keeps the per-device batch: efficiency = "
        "images/s at N / (N x images/s on one). Strong scaling keeps the global batch: "
        "efficiency = speedup at N / N, the same ratio of throughputs."
    )
    predicted = predicted_scaling(records, measured)
    return section("Study: scaling", intro, table, predicted, image("scaling", path)), [path]


PREDICTED_HEADERS = [
    "scaling",
    "model",
    "chip",
    "target",
    "chips",
    "global batch",
    "memory per chip (compiled)",
    "s/step (predicted)",
    "images/s (predicted)",
    "efficiency (predicted)",
]


def predicted_scaling(records: list[Record], measured: list[Record]) -> str:
    """The scaling study's workloads (each model, precision, and weak per-chip or
    strong global batch that `measured` ran) on the compiled targets, grouped by chip
    over chip counts: memory per chip (compiled), step time and images/s (predicted)
    and the predicted efficiency against one chip of the same kind; collectives are in
    the compiled step, counted as the target's compiler counts them. "" without
    compile-only records of those workloads."""
    wanted = set()
    for r in measured:
        w = r["workload"]
        mode = w.get("scaling") or "weak"
        size = w["batch_size"] // r["device"]["count"] if mode == "weak" else w["batch_size"]
        wanted.add((mode, w["model"], overrides(r), w.get("precision", "f32"), size))
    groups: dict[tuple, dict[int, Record]] = defaultdict(dict)
    for r in compiled(records):
        w = r["workload"]
        chips = target_field(r, "chips") or 1
        for mode, size in (("weak", w["batch_size"] // chips), ("strong", w["batch_size"])):
            key = (mode, w["model"], overrides(r), w.get("precision", "f32"), size)
            if key in wanted and (mode == "strong" or w["batch_size"] % chips == 0):
                groups[(*key, target_field(r, "chip"))][chips] = r
    if not groups:
        return ""
    rows = []
    for (mode, model, changed, precision, _size, chip), by_chips in sorted(
        groups.items(), key=lambda item: tuple(map(str, item[0]))
    ):
        images = {
            n: prediction(r)["images_per_s"]
            for n, r in by_chips.items()
            if fits_chip(r) and prediction(r).get("images_per_s")
        }
        # An efficiency divides two predictions; a roofline's bounds bound no ratio.
        methods = {prediction_method(r) for n, r in by_chips.items() if n in images}
        efficiency = analysis.scaling_efficiency(images) if methods == {"per-kernel"} else {}
        name = model + "".join(f" {k}={v}" for k, v in changed)
        for n, r in sorted(by_chips.items()):
            step = prediction(r).get("step_time_s")
            rows.append(
                [
                    mode,
                    f"{name} {precision}",
                    chip or "-",
                    target_name(r),
                    n,
                    batch_size(r),
                    memory_cell(r),
                    _predicted_step(r, step),
                    predicted_images(r),
                    fmt_pct(efficiency.get(n)),
                ]
            )
    return (
        "The same workloads compiled for devices not at hand (sharded over each target's "
        "chips, not run): memory per chip as compiled, step time and images/s as the "
        "per-kernel model predicts them (`>=` / `<=`: a record made before records "
        "carried kernels, its roofline a bound), efficiency as above against one chip of "
        "the same kind, where both are predictions:"
        "\n\n" + markdown_table(PREDICTED_HEADERS, rows)
    )


def _predicted_step(record: Record, step: float | None) -> str:
    """A predicted s/step; `>= t` where it is a roofline's bound."""
    if not fits_chip(record) or not step:
        return "-"
    return seconds(step) if prediction_method(record) == "per-kernel" else f">= {seconds(step)}"


def scaling_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """How many devices were measured, and the predicted figures' place."""
    rs = only_ok(in_study(records, "scaling"))
    if not rs:
        return "", []
    counts = sorted({r["device"]["count"] for r in rs})
    devices = ", ".join(sorted({device_label(r) for r in rs}))
    text = (
        f"Measured on {devices}: {', '.join(map(str, counts))} device(s), so "
        + (
            "nothing to scale over here."
            if counts == [1]
            else f"efficiency up to {max(counts)} devices on the details page."
        )
        + " The same steps compiled for multi-chip TPU slices (memory per chip, compiled; "
        "images/s, predicted) are on the details page."
    )
    note = "" if any(on_accelerator(r) for r in rs) else no_accelerator("scaling")
    return "\n\n".join(p for p in (text, note) if p), []


def _weak_series(records: list[Record]) -> dict[tuple, dict[int, Record]]:
    """Compiled steps by (model, overrides, precision, chip, batch per chip) over chip
    counts: weak scaling as the targets compile it, where one chip and more were both
    compiled and predicted by the per-kernel model."""
    series: dict[tuple, dict[int, Record]] = defaultdict(dict)
    for r in compiled(records):
        chips = target_field(r, "chips") or 1
        if not fits_chip(r) or prediction_method(r) != "per-kernel" or batch_size(r) % chips:
            continue
        key = (model_label(r), overrides(r), precision_of(r), target_field(r, "chip"))
        series[(*key, batch_size(r) // chips)][chips] = r
    return {k: v for k, v in series.items() if 1 in v and len(v) > 1}


def scaling_summary(records: list[Record]) -> list[Summary]:
    """Seeds 001/004: does data parallelism scale: measured where several devices ran,
    else the weak scaling the compiled slices predict (the series over the most chips)."""
    question = "Does data parallelism scale over devices (TPU slices, several GPUs)?"
    rs = only_ok(in_study(records, "scaling"))
    counts = sorted({r["device"]["count"] for r in rs})
    parts, sources = [], []
    if rs and max(counts) > 1:
        parts.append(f"measured over {', '.join(map(str, counts))} devices: details page")
        sources.append(measured_on(rs))
    series = _weak_series(records)
    if series:
        key, by_chips = max(series.items(), key=lambda kv: (max(kv[1]), str(kv[0])))
        model, _, precision, chip, per_chip = key
        images = {n: prediction(r)["images_per_s"] for n, r in by_chips.items()}
        efficiency = analysis.scaling_efficiency(images)
        each = ", ".join(f"{efficiency[n]:.0%} at {n} chips" for n in sorted(images) if n > 1)
        parts.append(
            f"predicted: {model} {precision} at {per_chip} images per chip on {chip} slices "
            f"reach {each} of linear scaling from one chip (weak scaling)"
        )
        largest = by_chips[max(by_chips)]
        sources.append(
            f"{target_name(largest)} "
            + predictions.band_label(prediction(largest), largest["device"]["platform"])
        )
    gpus = any(
        (target_field(r, "chips") or 1) > 1 and r["device"]["platform"] == "gpu"
        for r in compiled(records)
    )
    if not gpus:
        parts.append("no multi-GPU target compiled")
    if not rs or max(counts) == 1:
        parts.append(
            f"measured here: {max(counts) if rs else 0} device(s), nothing to scale over "
            "(`python -m experiments.run --study=scaling --device=gpu` on a host with several)"
        )
        if rs:
            sources.append(measured_on(rs))
    return [Summary("001, 004", question, "; ".join(parts), "; ".join(sources), "scaling.md")]


STUDY = Study(
    "scaling",
    workloads=workloads,
    sections=(scaling_study,),
    question="Does data parallelism (pmap, sharded) scale over devices? (seed 001)",
    answer=scaling_answer,
    summary=scaling_summary,
)
