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

Compiled for GPUs not at hand (1-8 of one host, `target_cells`): python -m
experiments.run --study=scaling_targets  (needs .[targets]; ~11 min here for 75 cells).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments import analysis, predictions
from experiments.labels import device_label, model_label
from experiments.studies._common import (
    Curve,
    batch_size,
    curve,
    draw_curve,
    fmt_images,
    fmt_pct,
    fmt_step,
    image,
    in_study,
    legend_below,
    log_axes,
    measured_on,
    no_accelerator,
    on_accelerator,
    only_ok,
    overrides,
    plain_log_y,
    precision_of,
    pyplot,
    save,
    section,
)
from experiments.studies.base import TINY_MLP, Context, Record, Study, Summary, TargetCell
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

# Compiled, not run: the data-parallel step on the GPUs of one host (jaxcnn.targets:
# 2 and 4 x T4, 2-8 x V100 / A100 / H100) and on one of each, at a fixed batch per GPU
# (weak scaling), for `python -m experiments.run --study=scaling_targets`. The seeds'
# models: the measured study's two (mnist_cnn, mlp n=1024, 128 per device, so the
# compiled curves sit beside the measured ones), seed 002's widest mlp and LeNet-5,
# and seed 000's cats-vs-dogs CNN at its batch of 16.
TARGET_SCALING_MODELS: tuple[tuple[str, tuple[tuple[str, int], ...], int], ...] = (
    ("mnist_cnn", (), SCALING_PER_DEVICE_BATCH),
    ("mlp", (("width", 1024),), SCALING_PER_DEVICE_BATCH),
    ("mlp", (("width", 4096),), SCALING_PER_DEVICE_BATCH),
    ("lenet5_keras", (), SCALING_PER_DEVICE_BATCH),
    ("catsdogs_cnn", (), 16),
)
TARGET_SCALING_CHIPS = ("T4", "V100 SXM2", "A100", "H100 SXM")


def target_cells(smoke: bool = False) -> list[TargetCell]:
    """The compiled weak-scaling cells: every model of TARGET_SCALING_MODELS on every
    one-host GPU target of TARGET_SCALING_CHIPS (one GPU included: the curve's base),
    f32, the batch fixed per GPU (a cell's search starts and ends at it: one compile
    where it fits). Smoke: mnist_cnn on one and two T4s."""
    from jaxcnn import targets as targets_lib

    chosen = [
        t
        for t in targets_lib.TARGETS.values()
        if t.platform == "gpu" and t.chip in TARGET_SCALING_CHIPS
    ]
    models = TARGET_SCALING_MODELS
    if smoke:
        chosen = [t for t in chosen if t.chip == "T4" and t.chips <= 2]
        models = models[:1]
    return [
        TargetCell(
            model,
            t.name,
            "f32",
            "sharded" if t.devices > 1 else "single",
            per_gpu * t.devices,
            t.devices,
            per_gpu * t.devices,
            overrides,
        )
        for model, overrides, per_gpu in models
        for t in sorted(chosen, key=lambda t: (TARGET_SCALING_CHIPS.index(t.chip), t.chips))
    ]


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
    for (mode, model, strategy, chip), by_count in sorted(groups.items()):
        throughput = {n: r["images_per_s"] for n, r in by_count.items()}
        efficiency = analysis.scaling_efficiency(throughput)
        for n, r in sorted(by_count.items()):
            row = [mode, model, strategy, chip, n, batch_size(r), fmt_step(r), fmt_images(r)]
            rows.append([*row, fmt_pct(efficiency.get(n))])
    panels = scaling_curves(records)
    path = save(scaling_figure(panels), out / "study_scaling.png")
    headers = ["scaling", "model", "strategy", "device", "N", "global batch", "s/step"]
    table = markdown_table([*headers, "images/s", "efficiency"], rows)
    intro = (
        "Throughput over N devices (seed 001's recipe: replicate, split the batch, "
        "average gradients). Weak scaling keeps the per-device batch: efficiency = "
        "images/s at N / (N x images/s on one). Strong scaling keeps the global batch: "
        "efficiency = speedup at N / N, the same ratio of throughputs."
    )
    predicted = predicted_scaling(records, measured)
    multi_gpu = any(
        target_field(r, "platform") == "gpu" and (target_field(r, "chips") or 1) > 1
        for r in compiled(records)
    )
    plot = f"{image('scaling', path)}\n\n{scaling_caption(panels, multi_gpu)}"
    return section("Study: scaling", intro, table, predicted, plot), [path]


def scaling_curves(records: list[Record]) -> dict[str, list[Curve]]:
    """{model: curves}: what the scaling plot draws, weak scaling (the batch per chip
    held). Per chip, the images/s the per-kernel model predicts over the chip counts
    its targets were compiled for (f32, at the batch per chip compiled for the most
    counts; a chip compiled for one count only draws no curve), and per strategy the
    images/s this study measured over the devices at hand."""
    found: dict[tuple[str, str, int], dict[int, Record]] = defaultdict(dict)
    for r in compiled(records):
        chips = target_field(r, "chips") or 1
        per_kernel = prediction_method(r) == "per-kernel"
        if fits_chip(r) and per_kernel and prediction(r).get("images_per_s"):
            if precision_of(r) == "f32" and batch_size(r) % chips == 0:
                key = (model_label(r), str(target_field(r, "chip")), batch_size(r) // chips)
                found[key][chips] = r
    best: dict[tuple[str, str], tuple[int, dict[int, Record]]] = {}
    for (model, chip, per_chip), by_chips in sorted(found.items()):
        if len(by_chips) > len(best.get((model, chip), (0, {}))[1]):
            best[(model, chip)] = (per_chip, by_chips)  # ties: the smaller batch per chip
    panels: dict[str, list[Curve]] = defaultdict(list)
    for (model, chip), (per_chip, by_chips) in sorted(best.items()):
        if len(by_chips) > 1:
            panels[model].append(_predicted_curve(f"{chip}, {per_chip}/chip", by_chips))
    for model, measured in _measured_weak(records).items():
        if model in panels or any(len(c.points) > 1 for c in measured):
            panels[model] = measured + panels[model]
        else:  # a point per strategy on one device: one panel for all such models
            panels[MEASURED_HERE] += [
                dataclasses.replace(c, label=f"{model}: {c.label}") for c in measured
            ]
    return dict(panels)


MEASURED_HERE = "measured here, no multi-chip prediction"


DEVICE_SIDE = "device side only"


def _predicted_curve(label: str, by_chips: dict[int, Record]) -> Curve:
    """Predicted images/s over chip counts; where the points' host sides leave out
    different parts (a placement whose dispatch no run measured has none), each point's
    device side alone, so that no point gains by what its prediction lacks."""
    blocks = {n: prediction(r) for n, r in by_chips.items()}
    left_out = {tuple(b.get("host_left_out") or ()) for b in blocks.values()}
    if len(left_out) == 1 or not all(b.get("device_s") for b in blocks.values()):
        return curve(label, [(n, b["images_per_s"]) for n, b in blocks.items()], predicted=True)
    points = [(n, batch_size(by_chips[n]) / b["device_s"]) for n, b in blocks.items()]
    return curve(f"{label} ({DEVICE_SIDE})", points, predicted=True)


def _measured_weak(records: list[Record]) -> dict[str, list[Curve]]:
    """{model: curves}: images/s this study measured over device counts, weak scaling,
    per strategy and device."""
    groups: dict[tuple, dict[int, float]] = defaultdict(dict)
    for r in only_ok(in_study(records, "scaling")):
        if (r["workload"].get("scaling") or "weak") == "weak":
            n = r["device"]["count"]
            per_device = batch_size(r) // n
            key = (model_label(r), chip_label(r), r["workload"]["strategy"], per_device)
            groups[key][n] = r["images_per_s"]
    curves: dict[str, list[Curve]] = defaultdict(list)
    for (model, chip, strategy, per_device), by_count in sorted(groups.items()):
        label = f"{chip} {strategy}, {per_device}/device, measured"
        curves[model].append(curve(label, by_count.items()))
    return curves


def ideal(c: Curve) -> Curve:
    """Perfect scaling from a curve's fewest devices: N/N0 x its images/s there."""
    n0, y0 = c.points[0]
    return curve(f"{c.label}: ideal", [(n, y0 * n / n0) for n in c.xs], c.predicted)


def scaling_figure(panels: dict[str, list[Curve]]) -> Any:
    """One panel per model, images/s over chips, log-log: predicted dashed, measured
    solid, each curve's ideal scaling dotted in its colour."""
    names = sorted(panels, key=lambda m: (m != MEASURED_HERE, m))
    cols = min(3, max(len(names), 1))
    rows_n = max(1, -(-len(names) // cols))
    fig, axes = pyplot().subplots(rows_n, cols, figsize=(4.4 * cols, 3.6 * rows_n), squeeze=False)
    for ax, model in zip(axes.flat, names, strict=False):
        counts = []
        for c in panels[model]:
            line = draw_curve(ax, c)
            counts += c.xs
            if len(c.points) > 1:
                i = ideal(c)
                ax.plot(i.xs, i.ys, linestyle=":", color=line.get_color(), linewidth=1)
        log_axes(ax, "chips (devices)", "images / s", model, counts, legend=None)
        plain_log_y(ax)
        if any(len(c.points) > 1 for c in panels[model]):
            ax.legend(fontsize="x-small", loc="upper left")  # rising curves leave it empty
        else:  # points at one count sit mid-panel: the legend goes under the axes
            legend_below(ax, columns=1, fontsize="x-small")
    for ax in list(axes.flat)[len(names) :]:
        ax.set_visible(False)
    if not names:
        axes[0][0].set_title("no measured or predicted scaling")
    fig.suptitle(
        "Weak scaling, f32: images/s over chips (dashed: predicted; solid or a dot: "
        "measured; dotted: ideal, N x the fewest chips' images/s)",
        fontsize="medium",
    )
    return fig


def scaling_caption(panels: dict[str, list[Curve]], multi_gpu: bool) -> str:
    """The plot's line: what is drawn, each curve's efficiency at its most chips, and
    whether any multi-GPU target was compiled (`multi_gpu`)."""
    said = []
    for model, curves in sorted(panels.items()):
        for c in curves:
            if len(c.points) > 1:
                (n0, y0), (n1, y1) = c.points[0], c.points[-1]
                kind = "predicted" if c.predicted else "measured"
                share = y1 / (y0 * n1 / n0)
                said.append(
                    f"{model} on {c.label.split(',')[0]}: {share:.0%} of ideal at "
                    f"{n1:g} chips against {n0:g} ({kind})"
                )
    one = "; ".join(said) if said else "no curve of two chip counts or more"
    return (
        "Weak scaling (the batch per chip held), f32; predicted: the per-kernel model of "
        "the step compiled for each slice (collectives as its compiler emitted them), "
        "never run"
        + ("" if multi_gpu else "; no multi-GPU target compiled yet, so no GPU curve")
        + (
            f"; {DEVICE_SIDE}: the kernels' time alone, where one chip count's prediction "
            "has a host side the other's lacks (no run measured the sharded placement's "
            "dispatch)"
            if any(DEVICE_SIDE in c.label for cs in panels.values() for c in cs)
            else ""
        )
        + f". {one}."
    )


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
