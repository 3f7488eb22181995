"""The default study: what `python -m experiments.run` runs with no --model or --study.

Three of the seeds' models (`mnist_cnn`, `lenet5_keras`, `mlp` n=512) with the
command's own settings (--dataset, --epochs, --batch-size, ...; by default the
embedded `digits` data), one workload each: the quickstart, offline.
Its report sections plot the train records outside the named studies (these, single
--model runs, and records older than the studies): step time vs parameters, speedup
over the CPU, throughput vs batch, MFU, and accuracy and loss per epoch.

Command: python -m experiments.run [--device=auto|cpu|gpu|tpu] [--out=DIR]
Expected: well under three minutes on a 2-core CPU; --smoke: seconds.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from experiments.labels import device_label, model_label
from experiments.studies import bench
from experiments.studies._common import (
    _batch_size,
    _cell,
    _get,
    _image,
    _ok,
    _save,
    generic,
    latest,
    pyplot,
)
from experiments.studies.base import Record, Study
from experiments.tables import format_table, seconds

# (model, overrides): each runs with the command's flags (--epochs, --batch-size, ...).
DEFAULT_STUDY = (
    ("mnist_cnn", {}),
    ("lenet5_keras", {}),
    ("mlp", {"width": 512}),
)


def speedup_over_cpu(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    plt = pyplot()
    ok = latest(_ok(generic(records)))
    cpu = {_cell(r): r for r in ok if r["device"]["platform"] == "cpu"}
    rows, bars = [], []
    for r in ok:
        base = cpu.get(_cell(r))
        if base is None or r["device"]["platform"] == "cpu":
            continue
        speedup = base["step_time_s"]["median"] / r["step_time_s"]["median"]
        label = f"{model_label(r)} b{r['workload']['batch_size']}"
        rows.append(
            [
                label,
                device_label(r),
                seconds(base["step_time_s"]["median"]),
                seconds(r["step_time_s"]["median"]),
                *bench.speedups(records, base, r),
            ]
        )
        bars.append((label, device_label(r), speedup))
    if not bars:
        return "", []
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(bars)))
    names = [f"{m}\n{d}" for m, d, _ in bars]
    ax.barh(names, [s for _, _, s in bars])
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set(xscale="log", xlabel="speedup over CPU (CPU s/step / device s/step)")
    ax.invert_yaxis()
    path = _save(fig, out / "speedup_over_cpu.png")
    headers = ["workload", "device", "CPU s/step", "device s/step", "speedup", "over fastest CPU"]
    table = format_table(headers, rows, markdown=True)
    note = "*speedup*: over the CPU record of the same workload (the plot's)."
    text = f"{note} {bench.FASTEST_CPU_NOTE}\n\n{table}"
    return f"## Speedup over CPU\n\n{text}\n\n{_image('speedup', path)}", [path]


def step_time_vs_params(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    plt = pyplot()
    series: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for r in latest(_ok(generic(records))):
        trainable = _get(r, "params", "trainable")
        if trainable:
            # One curve per device and batch: the seed's plot holds the batch fixed.
            series[f"{device_label(r)}, batch {_batch_size(r)}"].append(
                (trainable, r["step_time_s"])
            )
    if not series:
        return "", []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in sorted(series.items()):
        points.sort(key=lambda p: p[0])
        x = [p for p, _ in points]
        y = [s["median"] for _, s in points]
        low = [s["median"] - s["p10"] for _, s in points]
        high = [s["p90"] - s["median"] for _, s in points]
        ax.errorbar(x, y, yerr=[low, high], marker="o", capsize=3, label=label)
    ax.set(xscale="log", yscale="log", xlabel="trainable parameters", ylabel="s / step")
    ax.set_title("Step time vs model size (median, p10-p90)")
    ax.legend(fontsize="small")
    path = _save(fig, out / "step_time_vs_params.png")
    return "## Step time vs trainable parameters\n\n" + _image("step time", path), [path]


def throughput_vs_batch(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    plt = pyplot()
    groups: dict[str, list[Record]] = defaultdict(list)
    for r in latest(generic(records)):
        if r["status"] in ("ok", "oom"):
            groups[f"{model_label(r)} on {device_label(r)}"].append(r)
    # A curve needs two batch sizes, or an OOM to show.
    groups = {
        k: v
        for k, v in groups.items()
        if len({r["workload"]["batch_size"] for r in v}) > 1 or any(r["status"] == "oom" for r in v)
    }
    if not groups:
        return "", []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    oom_marked = False
    for label, rs in sorted(groups.items()):
        ok = sorted((r for r in rs if r["status"] == "ok"), key=_batch_size)
        line = ax.plot(
            [r["workload"]["batch_size"] for r in ok],
            [r["images_per_s"] for r in ok],
            marker="o",
            label=label,
        )[0]
        ooms = [r["workload"]["batch_size"] for r in rs if r["status"] == "oom"]
        if ooms:  # an OOM has no throughput: mark it on the axis floor
            y = min((r["images_per_s"] for r in ok), default=1.0)
            ax.scatter(ooms, [y] * len(ooms), marker="x", s=80, color=line.get_color(), zorder=3)
            for b in ooms:
                ax.annotate("OOM", (b, y), textcoords="offset points", xytext=(0, 6), ha="center")
            oom_marked = True
    ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="images / s")
    ax.set_title("Throughput vs batch size" + (" (x = out of memory)" if oom_marked else ""))
    ax.legend(fontsize="small")
    path = _save(fig, out / "images_per_s_vs_batch.png")
    return "## Throughput vs batch size\n\n" + _image("throughput", path), [path]


def mfu_per_device(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    plt = pyplot()
    bars = [
        (f"{model_label(r)} b{r['workload']['batch_size']}\n{device_label(r)}", r["mfu"])
        for r in latest(_ok(generic(records)))
        if r.get("mfu")
        and (r["mfu"].get("vs_vendor") is not None or r["mfu"].get("vs_measured") is not None)
    ]
    if not bars:
        return "", []
    fig, ax = plt.subplots(figsize=(7, 0.8 + 0.5 * len(bars)))
    ys = range(len(bars))
    height = 0.4
    vendor = [100 * (m.get("vs_vendor") or 0) for _, m in bars]
    measured = [100 * (m.get("vs_measured") or 0) for _, m in bars]
    ax.barh([y - height / 2 for y in ys], vendor, height, label="vs vendor peak")
    ax.barh([y + height / 2 for y in ys], measured, height, label="vs measured matmul")
    ax.set_yticks(list(ys), [label for label, _ in bars], fontsize="small")
    ax.set(xlabel="MFU (%)")
    ax.invert_yaxis()
    ax.legend(fontsize="small")
    path = _save(fig, out / "mfu_per_device.png")
    return "## Model FLOP utilisation\n\n" + _image("MFU", path), [path]


def curves_per_epoch(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    from matplotlib.ticker import MaxNLocator

    plt = pyplot()
    curves = [
        (f"{model_label(r)} on {device_label(r)}", r["history"])
        for r in latest(_ok(generic(records)))
        if r.get("history") and r["workload"].get("dataset") != "synthetic"
    ]
    if not curves:
        return "", []
    fig, (acc_ax, loss_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for label, history in curves:
        epochs = [e["epoch"] for e in history]
        accuracy = [e.get("test_accuracy", e.get("train_accuracy")) for e in history]
        color = acc_ax.plot(epochs, accuracy, marker="o", label=label)[0].get_color()
        train_loss = [e.get("train_loss") for e in history]
        loss_ax.plot(epochs, train_loss, marker="o", color=color, label=label)
        if any(e.get("test_loss") is not None for e in history):
            test_loss = [e.get("test_loss") for e in history]
            loss_ax.plot(epochs, test_loss, marker=".", linestyle="--", color=color)
    for ax in (acc_ax, loss_ax):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    acc_ax.set(xlabel="epoch", ylabel="test accuracy (train where no test split)")
    loss_ax.set(xlabel="epoch", ylabel="loss (train solid, test dashed)")
    acc_ax.legend(fontsize="x-small")
    path = _save(fig, out / "curves_per_epoch.png")
    return "## Accuracy and loss per epoch\n\n" + _image("curves", path), [path]


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
