"""The default study: what `python -m experiments.run` runs with no --model or --study.

Three of the seeds' models (`mnist_cnn`, `lenet5_keras`, `mlp` n=512) with the
command's own settings (--dataset, --epochs, --batch-size, ...; by default the
embedded `digits` data), one workload each: the quickstart, offline.
Its report sections plot the train records outside the named studies (these, and
single --model runs): step time vs parameters, speedup over the CPU, throughput vs
batch, MFU, and accuracy and loss per epoch.

Command: python -m experiments.run [--device=auto|cpu|gpu|tpu] [--out=DIR]
Expected: well under three minutes on a 2-core CPU; --smoke: seconds.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from experiments.labels import device_label, model_label
from experiments.studies import bench
from experiments.studies._common import (
    batch_size,
    cpu_figure,
    cpu_pairs,
    epoch_ticks,
    field,
    generic,
    image,
    latest,
    legend_below,
    log_axes,
    median_step,
    only_ok,
    plain_log_y,
    precision_of,
    pyplot,
    run_series,
    save,
    study_of,
    throughput_curve,
    when,
    workload_label,
)
from experiments.studies.base import Record, Study
from experiments.tables import markdown_table, seconds

# (model, overrides): each runs with the command's flags (--epochs, --batch-size, ...).
DEFAULT_STUDY = (
    ("mnist_cnn", {}),
    ("lenet5_keras", {}),
    ("mlp", {"width": 512}),
)


def speedup_over_cpu(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    pairs = cpu_pairs(latest(only_ok(generic(records))))
    if not pairs:
        return "", []
    rows = [
        [
            f"{model_label(r)} b{batch_size(r)}",
            device_label(r),
            seconds(median_step(cpu_figure(records, base))),
            seconds(median_step(r)),
            *bench.speedups(records, base, r),
        ]
        for base, r in pairs
    ]
    fig, ax = pyplot().subplots(figsize=(7, 0.5 + 0.45 * len(pairs)))
    ax.barh([f"{w}\n{d}" for w, d, *_ in rows], [median_step(b) / median_step(r) for b, r in pairs])
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set(xlabel="speedup over CPU (CPU s/step / device s/step)")  # bars: linear
    ax.invert_yaxis()
    path = save(fig, out / "speedup_over_cpu.png")
    headers = ["workload", "device", "CPU s/step", "device s/step", "like for like"]
    text = f"{bench.RATIOS_NOTE}\n\n{markdown_table([*headers, 'over the CPU at its best'], rows)}"
    return f"## Speedup over CPU\n\n{text}\n\n{image('speedup', path)}", [path]


def step_time_vs_params(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    series: dict[str, list[tuple[int, dict, str]]] = defaultdict(list)
    for r in latest(only_ok(generic(records))):
        trainable = field(r, "params", "trainable")
        if trainable:
            # One series per device and batch (the seed's plot holds the batch fixed);
            # its points are different models, so they are marked and named, not joined.
            series[f"{device_label(r)}, batch {batch_size(r)}"].append(
                (trainable, r["step_time_s"], model_label(r))
            )
    if not series:
        return "", []
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for label, points in sorted(series.items()):
        points.sort(key=lambda p: (p[0], p[2]))
        y = [s["median"] for _, s, _ in points]
        low = [s["median"] - s["p10"] for _, s, _ in points]
        high = [s["p90"] - s["median"] for _, s, _ in points]
        x = [p for p, _, _ in points]
        ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, linestyle="none", label=label)
        for px, py, (_, _, model) in zip(x, y, points, strict=True):
            ax.annotate(model, (px, py), textcoords="offset points", xytext=(4, 4), fontsize=7)
    title = "Step time vs model size (median, p10-p90)"
    log_axes(ax, "trainable parameters", "s / step", title, legend="small")
    path = save(fig, out / "step_time_vs_params.png")
    return "## Step time vs trainable parameters\n\n" + image("step time", path), [path]


def throughput_series(records: list[Record]) -> dict[str, list[Record]]:
    """{label: records} of the throughput plot, one line each: the ok and OOM records
    outside the named studies, grouped by `run_series` (points of unrelated runs are
    never joined: each such run is a line of one point)."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in latest(generic(records)):
        if r["status"] in ("ok", "oom"):
            groups[run_series(r)].append(r)
    series = {}
    for key, rs in sorted(groups.items(), key=lambda item: tuple(map(str, item[0]))):
        first = rs[0]
        who = f"{model_label(first)} on {device_label(first)}, {precision_of(first)}"
        if key[0][0] == "run":
            label = f"{who}, a run of its own ({when(first)[:19].replace('T', ' ')})"
            series[label if label not in series else f"{label}, {first['run_id']}"] = rs
        else:
            series[f"{who}, {study_of(first)} study"] = rs
    return dict(sorted(series.items()))


def throughput_vs_batch(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    series = throughput_series(records)
    batches = {batch_size(r) for rs in series.values() for r in rs}
    oom = any(r["status"] == "oom" for rs in series.values() for r in rs)
    if len(batches) < 2 and not oom:  # nothing over batch to show
        return "", []
    fig, ax = pyplot().subplots(figsize=(8, 5.5))
    for label, rs in series.items():
        throughput_curve(ax, rs, label, note_ooms=True)
    title = "Throughput vs batch size" + (" (x = out of memory)" if oom else "")
    log_axes(ax, "batch size", "images / s", title, sorted(batches), legend=None)
    plain_log_y(ax)
    legend_below(ax, columns=1)
    path = save(fig, out / "images_per_s_vs_batch.png")
    caption = (
        "Lines join the batches of one study's sweep only (same host, precision, "
        "formulation and loop); a single --model run is a point of its own."
    )
    return f"## Throughput vs batch size\n\n{image('throughput', path)}\n\n{caption}", [path]


def mfu_per_device(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    bars = [
        (f"{model_label(r)} b{batch_size(r)}\n{device_label(r)}", r["mfu"])
        for r in latest(only_ok(generic(records)))
        if r.get("mfu")
        and (r["mfu"].get("vs_vendor") is not None or r["mfu"].get("vs_measured") is not None)
    ]
    if not bars:
        return "", []
    fig, ax = pyplot().subplots(figsize=(7, 0.8 + 0.5 * len(bars)))
    ys, height = range(len(bars)), 0.4
    parts = [
        (shift, key, label)
        for shift, key, label in (
            (-1, "vs_vendor", "vendor peak"),
            (1, "vs_measured", "measured matmul"),
        )
        if any(m.get(key) is not None for _, m in bars)  # a legend entry only for bars drawn
    ]
    if len(parts) == 1:
        parts = [(0, parts[0][1], parts[0][2])]
    for shift, key, label in parts:
        share = [100 * (m.get(key) or 0) for _, m in bars]
        ax.barh([y + shift * height / 2 for y in ys], share, height, label=f"vs {label}")
    ax.set_yticks(list(ys), [label for label, _ in bars], fontsize="small")
    ax.set(xlabel="MFU (%)")
    ax.invert_yaxis()
    ax.legend(fontsize="small")
    path = save(fig, out / "mfu_per_device.png")
    return "## Model FLOP utilisation\n\n" + image("MFU", path), [path]


def curves_per_epoch(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    curves = [
        (f"{workload_label(r)} on {device_label(r)}", r["history"])
        for r in latest(only_ok(generic(records)))
        if r.get("history") and r["workload"].get("dataset") != "synthetic"
    ]
    if not curves:
        return "", []
    fig, (acc_ax, loss_ax) = pyplot().subplots(1, 2, figsize=(10, 4))
    for label, history in curves:
        epochs = [e["epoch"] for e in history]
        accuracy = [e.get("test_accuracy", e.get("train_accuracy")) for e in history]
        color = acc_ax.plot(epochs, accuracy, marker="o", label=label)[0].get_color()
        train_loss = [e.get("train_loss") for e in history]
        loss_ax.plot(epochs, train_loss, marker="o", color=color, label=label)
        if any(e.get("test_loss") is not None for e in history):
            test_loss = [e.get("test_loss") for e in history]
            loss_ax.plot(epochs, test_loss, marker=".", linestyle="--", color=color)
    epoch_ticks(acc_ax, loss_ax)
    acc_ax.set(xlabel="epoch", ylabel="test accuracy (train where no test split)")
    loss_ax.set(xlabel="epoch", ylabel="loss (train solid, test dashed)")
    acc_ax.legend(fontsize="x-small")
    path = save(fig, out / "curves_per_epoch.png")
    return "## Accuracy and loss per epoch\n\n" + image("curves", path), [path]


STUDY = Study(
    "default",
    sections=(
        speedup_over_cpu,
        step_time_vs_params,
        throughput_vs_batch,
        mfu_per_device,
        curves_per_epoch,
    ),
)
