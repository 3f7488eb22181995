"""python -m experiments.report RESULTS... [--out DIR] [--readme README.md]: records ->
REPORT.md + PNG plots, and the README's generated headline table.

Every number in the report and every point in a plot is read from a record; nothing
is typed by hand. The report is a list of sections, each a function
`(records, out_dir) -> (markdown, [png paths])`; a study adds its section to SECTIONS.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import warnings
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers, CI or TPU VMs
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator, NullFormatter, ScalarFormatter

from experiments import analysis
from experiments import records as records_lib
from experiments.labels import device_label, model_label, workload_kind
from experiments.report_bench import PLOT as BENCH_PLOT
from experiments.report_bench import bench_block, bench_study
from experiments.report_speedrun import speedrun_headline, speedrun_study
from experiments.report_targets import (
    not_compiled,
    predicted_crossover,
    predicted_scaling,
    predicted_vs_measured,
    seed_000_compiled,
    seed_000_headline,
    targets_section,
)
from experiments.tables import binary_bytes, format_table, one_line_warning, seconds, si

Record = dict[str, Any]
Section = Callable[[list[Record], Path], tuple[str, list[Path]]]
REPORT_FILE = "REPORT.md"
FLOPS_MISMATCH = 0.10  # flag |XLA / jaxpr - 1| above this


# --- Labels and values read from records ----------------------------------------------


def _cell(record: Record) -> tuple:
    """What a record measures, without the device: records with equal cells compare.
    The study fields are None in records older than the studies, so those still pair."""
    w = record["workload"]
    return (
        model_label(record),
        w.get("dataset"),
        w["batch_size"],
        w.get("precision", "f32"),
        w["strategy"],
        w.get("study"),
        workload_kind(record),
        w.get("scaling"),
        w.get("ensemble_size") or 1,  # older records have none: one model
        w.get("ensemble_mode"),
        w.get("matmul_precision") or "default",
        record.get("loop") or "step",  # older records: per-step dispatch, XLA's convs
        (record.get("formulation") or {}).get("name", "xla"),
        w.get("framework"),  # peer records: another framework's figure
        w.get("mode"),
    )


def _sort_key(record: Record) -> tuple:
    """The cell, orderable although fields may be None in some records and set in others."""
    return tuple((value is not None, value) for value in _cell(record))


def _study_of(record: Record) -> str | None:
    return record["workload"].get("study")


def generic(records: list[Record]) -> list[Record]:
    """Train records outside the named studies (single --model runs, older records):
    what the generic plots show; each study's records get that study's section."""
    return [r for r in records if _study_of(r) in (None, "default") and workload_kind(r) == "train"]


def accuracy(record: Record) -> float | None:
    """The record's test accuracy; never one for synthetic data, where it means nothing."""
    if record["workload"].get("dataset") == "synthetic":
        return None
    return record.get("test_accuracy")


def _ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r["status"] == "ok"]


def latest(records: list[Record]) -> list[Record]:
    """One record per (device, cell): the most recent, so reruns do not double points."""
    chosen: dict[tuple, Record] = {}
    for r in sorted(records, key=lambda r: str(r["env"].get("utc_time") or "")):
        chosen[(device_label(r), _cell(r))] = r
    return list(chosen.values())


def _batch_size(record: Record) -> int:
    return record["workload"]["batch_size"]


def _get(record: Record, *path: str) -> Any:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.3g}%"


def _step(record: Record) -> str:
    step = record.get("step_time_s")
    if not step:
        return "-"
    return f"{seconds(step['median'])} [{seconds(step['p10'])}-{seconds(step['p90'])}]"


def flops_flag(record: Record) -> str:
    """XLA / jaxpr FLOPs, flagged when they differ by more than FLOPS_MISMATCH."""
    ratio = _get(record, "flops", "xla_vs_jaxpr")
    if ratio is None:
        return "-" if _get(record, "flops", "per_step") is None else "no XLA count"
    flag = " (differs >10%)" if abs(ratio - 1) > FLOPS_MISMATCH else ""
    return f"{ratio:.2f}{flag}"


def _status(record: Record) -> str:
    if record["status"] == "ok":
        return "ok"
    message = (record.get("message") or "").replace("|", "/")
    return f"{record['status']}: {message[:80]}"


# --- Sections ---------------------------------------------------------------------------


def overview(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    by_status: dict[str, int] = defaultdict(int)
    for r in records:
        by_status[r["status"]] += 1
    hosts = sorted({str(r["device"].get("host") or r["env"].get("host")) for r in records})
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
    lines = [
        f"{len(records)} record(s) from {len(hosts)} machine(s) ({', '.join(hosts)}): {statuses}.",
        "",
        "Step times are medians over steps timed one by one after `block_until_ready`, "
        "warm-up and compile excluded, with [p10-p90]. FLOPs are counted from the jaxpr "
        "(dot_general and conv, 2 per multiply-accumulate); XLA/jaxpr is XLA's own count "
        "over it. MFU is achieved TFLOP/s over the vendor peak for the precision the "
        "matmuls run in, and over a matmul measured on the same device in the same run.",
    ]
    return "\n".join(lines), []


def devices_table(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    rows, seen = [], set()
    for r in latest(not_compiled(records)):  # devices at hand, not compile targets
        key = (device_label(r), r["device"].get("host"))
        if key in seen:
            continue
        seen.add(key)
        ceiling = r.get("matmul_ceiling") or {}
        measured = ", ".join(
            f"{dtype} {si((m.get('tflops') or 0) * 1e12, 'FLOP/s')}"
            for dtype, m in sorted(ceiling.items())
            if m.get("tflops")
        )
        vendor = _get(r, "mfu", "vendor_peak_tflops")
        rows.append(
            [
                device_label(r),
                r["device"].get("host") or "-",
                _get(r, "mfu", "chip") or "-",
                f"{vendor:g} TFLOP/s {_get(r, 'mfu', 'vendor_precision')}" if vendor else "-",
                measured or "-",
                r["env"].get("jax", "-"),
            ]
        )
    headers = ["device", "host", "chip", "vendor peak / chip", "measured matmul", "jax"]
    return "## Devices\n\n" + format_table(headers, rows, markdown=True), []


RESULT_HEADERS = [
    "device",
    "model",
    "batch",
    "precision",
    "step time [p10-p90]",
    "images/s",
    "FLOPs/step",
    "XLA/jaxpr",
    "TFLOP/s",
    "MFU vendor",
    "MFU measured",
    "test acc",
    "status",
]


def result_row(r: Record) -> list[Any]:
    images = r.get("images_per_s")
    test_accuracy = accuracy(r)
    achieved = r.get("achieved_tflops")
    return [
        device_label(r),
        model_label(r),
        r["workload"]["batch_size"],
        r["workload"].get("precision", "f32"),
        _step(r),
        f"{images:,.0f}" if images else "-",
        si(_get(r, "flops", "per_step")),
        flops_flag(r),
        f"{achieved:.4g}" if achieved is not None else "-",
        _pct(_get(r, "mfu", "vs_vendor")),
        _pct(_get(r, "mfu", "vs_measured")),
        f"{test_accuracy:.4f}" if test_accuracy is not None else "-",
        _status(r),
    ]


def results_table(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    ordered = sorted(
        not_compiled(records), key=lambda r: (model_label(r), device_label(r), _sort_key(r))
    )
    table = format_table(RESULT_HEADERS, [result_row(r) for r in ordered], markdown=True)
    return "## Results\n\n" + table, []


def flops_check(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Where XLA and the jaxpr disagree by more than FLOPS_MISMATCH, both counts side by
    side with the jaxpr count that skips padding and dilation taps."""
    flagged = [r for r in latest(_ok(not_compiled(records))) if "differs" in flops_flag(r)]
    if not flagged:
        return "", []
    rows = [
        [
            model_label(r),
            device_label(r),
            r["workload"]["batch_size"],
            si(_get(r, "flops", "per_step")),
            si(_get(r, "flops", "per_step_in_bounds")),
            si(_get(r, "flops", "xla_per_step")),
            flops_flag(r),
        ]
        for r in sorted(flagged, key=lambda r: (model_label(r), device_label(r)))
    ]
    headers = ["model", "device", "batch", "jaxpr", "jaxpr in-bounds", "XLA", "XLA/jaxpr"]
    text = (
        f"## FLOPs check\n\nXLA's count differs from the jaxpr's by more than "
        f"{FLOPS_MISMATCH:.0%} for these. The jaxpr count includes every conv tap, zero "
        "padding and the holes of the backward pass's dilated convs too; XLA counts only "
        "taps on real input, plus elementwise ops.\n\n"
    )
    return text + format_table(headers, rows, markdown=True), []


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _image(title: str, path: Path) -> str:
    return f"![{title}]({path.name})"


def step_time_vs_params(records: list[Record], out: Path) -> tuple[str, list[Path]]:
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


def speedup_over_cpu(records: list[Record], out: Path) -> tuple[str, list[Path]]:
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
                f"{speedup:.1f}x",
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
    headers = ["workload", "device", "CPU s/step", "device s/step", "speedup"]
    table = format_table(headers, rows, markdown=True)
    return f"## Speedup over CPU\n\n{table}\n\n{_image('speedup', path)}", [path]


def throughput_vs_batch(records: list[Record], out: Path) -> tuple[str, list[Path]]:
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


# --- Study sections: one per workload.study, each a table and a plot ---------------------


def _study(records: list[Record], name: str, kind: str = "train") -> list[Record]:
    """The latest record per cell of study `name` and workload kind `kind`."""
    return [r for r in latest(records) if _study_of(r) == name and workload_kind(r) == kind]


def chip_label(record: Record) -> str:
    """A device without its count: the scaling study's curves run over the count."""
    d = record["device"]
    return d["platform"] if d["kind"] == d["platform"] else f"{d['platform']} {d['kind']}"


def _is_cpu(record: Record) -> bool:
    return record["device"]["platform"] == "cpu"


def _median_step(record: Record) -> float:
    return record["step_time_s"]["median"]


def _epoch_seconds(record: Record) -> float | None:
    """Median training seconds per epoch from the history (compile excluded)."""
    times = [e["train_time_s"] for e in record.get("history") or [] if e.get("train_time_s")]
    return statistics.median(times) if times else None


def _acc(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _images(record: Record) -> str:
    images = record.get("images_per_s")
    return f"{images:,.0f}" if images else "-"


_gib = binary_bytes


def _workload_label(record: Record) -> str:
    w = record["workload"]
    return f"{model_label(record)}, {w.get('dataset')}, batch {w['batch_size']}"


def _count_ticks(ax: Any, values: Any) -> None:
    """Ticks at the measured counts (batch sizes, devices, K, n) on a log x axis, written
    as plain integers: a few points per decade get no useful ticks of their own."""
    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _workload_key(record: Record) -> tuple:
    """Orders workloads by model, dataset, then batch as a number (64 before 128)."""
    w = record["workload"]
    return model_label(record), str(w.get("dataset")), w["batch_size"], device_label(record)


def _section(title: str, *parts: str) -> str:
    return "\n\n".join([f"## {title}", *[p for p in parts if p]])


def devices_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 001/003: the same model, dataset and batch on every device."""
    rs = sorted(_study(records, "devices"), key=_workload_key)
    if not rs:
        return "", []
    rows = [
        [
            _workload_label(r),
            device_label(r),
            _step(r),
            seconds(_epoch_seconds(r)) if r["status"] == "ok" else "-",
            _images(r),
            _acc(accuracy(r)),
            _status(r),
        ]
        for r in rs
    ]
    headers = ["workload", "device", "s/step [p10-p90]", "s/epoch", "images/s", "test acc"]
    table = format_table([*headers, "status"], rows, markdown=True)
    ok = _ok(rs)
    cpu = {_cell(r): r for r in ok if _is_cpu(r)}
    speedup_rows = []
    for r in ok:
        base = cpu.get(_cell(r))
        if base is None or _is_cpu(r):
            continue
        epoch, base_epoch = _epoch_seconds(r), _epoch_seconds(base)
        speedup_rows.append(
            [
                _workload_label(r),
                device_label(r),
                f"{_median_step(base) / _median_step(r):.1f}x",
                f"{base_epoch / epoch:.1f}x" if epoch and base_epoch else "-",
            ]
        )
    speedups = ""
    if speedup_rows:
        headers = ["workload", "device", "speedup per step", "speedup per epoch"]
        speedups = "Speedup over the CPU record of the same workload:\n\n" + format_table(
            headers, speedup_rows, markdown=True
        )
    if not ok:
        return _section("Study: devices", table, speedups), []
    fig, ax = plt.subplots(figsize=(7, 0.8 + 0.45 * len(ok)))
    names = [f"{_workload_label(r)}\n{device_label(r)}" for r in ok]
    medians = [_median_step(r) for r in ok]
    low = [_median_step(r) - r["step_time_s"]["p10"] for r in ok]
    high = [r["step_time_s"]["p90"] - _median_step(r) for r in ok]
    ax.barh(names, medians, xerr=[low, high], capsize=3)
    ax.set(xscale="log", xlabel="s / step (median, p10-p90)")
    ax.tick_params(axis="y", labelsize="small")
    ax.invert_yaxis()
    path = _save(fig, out / "study_devices.png")
    intro = "Same model, dataset and batch on every device (seeds 001 and 003)."
    return _section("Study: devices", intro, table, speedups, _image("devices", path)), [path]


def _crossover_series(records: list[Record]) -> dict[tuple, dict[str, list[Record]]]:
    """{(model, dataset, batch, precision): {device: records over widths}}."""
    series: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in _ok(_study(records, "crossover")):
        if _get(r, "params", "trainable"):
            w = r["workload"]
            key = (w["model"], w.get("dataset"), w["batch_size"], w.get("precision", "f32"))
            series[key][device_label(r)].append(r)
    return series


def _points(rs: list[Record]) -> list[analysis.Point]:
    return sorted((r["params"]["trainable"], _median_step(r)) for r in rs)


def crossover_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 002: step time vs trainable parameters, and where the accelerator wins."""
    series = _crossover_series(records)
    if not series:
        return "", []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    parts = []
    for (model, dataset, batch, precision), by_device in sorted(series.items()):
        name = f"{model}, {dataset}, batch {batch}, {precision}"
        for device, rs in sorted(by_device.items()):
            points = _points(rs)
            ax.plot(*zip(*points, strict=True), marker="o", label=f"{device}: {name}")
        devices = sorted(by_device)
        params = sorted({p for rs in by_device.values() for p, _ in _points(rs)})
        steps = {d: dict(_points(rs)) for d, rs in by_device.items()}
        rows = [[f"{p:,}", *[seconds(steps[d].get(p)) for d in devices]] for p in params]
        parts.append(f"{name}:\n\n" + format_table(["params", *devices], rows, markdown=True))
        cpus = [d for d in devices if by_device[d][0]["device"]["platform"] == "cpu"]
        verdicts = []
        for a in cpus:
            for b in (d for d in devices if d not in cpus):
                point = analysis.crossover_point(_points(by_device[a]), _points(by_device[b]))
                ends = analysis.faster_at_ends(_points(by_device[a]), _points(by_device[b]))
                side = {"A": a, "B": b, "tie": "neither"}
                at_ends = "-" if ends is None else f"{side[ends[0]]} / {side[ends[1]]}"
                verdicts.append([a, b, "none" if point is None else f"{point:,.0f}", at_ends])
                if point is not None:
                    ax.axvline(point, color="gray", linestyle=":", linewidth=1)
        if verdicts:
            headers = ["A", "B", "B faster above (params)", "faster at smallest / largest"]
            parts.append(format_table(headers, verdicts, markdown=True))
        parts.append(predicted_crossover(records, batch, precision, by_device))
    ax.set(xscale="log", yscale="log", xlabel="trainable parameters", ylabel="s / step (median)")
    ax.set_title("Step time vs trainable parameters (dotted: crossover)")
    ax.legend(fontsize="x-small")
    path = _save(fig, out / "study_crossover.png")
    intro = (
        "Step time vs trainable parameters per device (seed 002). The crossover is where "
        "the accelerator's step time drops below the CPU's for good: log-log linear "
        "interpolation between the two bracketing widths both devices measured."
    )
    return _section("Study: crossover", intro, *parts, _image("crossover", path)), [path]


def _batch_groups(records: list[Record]) -> dict[tuple, list[Record]]:
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in _study(records, "batch"):
        w = r["workload"]
        groups[(model_label(r), w.get("dataset"), w.get("precision"), device_label(r))].append(r)
    return {k: sorted(v, key=_batch_size) for k, v in groups.items()}


def _memory(record: Record) -> int | None:
    return _get(record, "memory", "total_bytes") if record["status"] == "ok" else None


def _seed_000_rows(groups: dict[tuple, list[Record]], records: list[Record]) -> list[list[str]]:
    """Seed 000's observations next to what compiled memory predicts for them: the seed
    device's own compiler where a compile-only record for it exists, else each device's
    here (XLA:CPU needs more memory than XLA:GPU for the same step)."""
    rows = []
    answered = set()
    for a in seed_000_compiled(records):
        answered.add((a["reference"], a["batch"]))
        r = a["record"]
        rows.append(
            [
                a["reference"],
                a["batch"],
                "trained" if a["ran"] else "out of memory",
                f"{model_label(r)} f32 compiled for {a['target']}, not run",
                _gib(r["memory"]["total_bytes"]),
                "fits" if a["fits"] else "does not fit",
                "yes" if a["agrees"] else "no",
            ]
        )
    for (model, _, precision, device), rs in sorted(groups.items()):
        if rs[0]["workload"]["model"] != analysis.SEED_000_MODEL:
            continue  # the seed's batch sizes say nothing about another network
        by_batch = {_batch_size(r): r for r in rs}
        for reference, batch, ran in analysis.SEED_000_OBSERVED:
            if (reference, batch) in answered:
                continue
            r = by_batch.get(batch)
            total = None if r is None else _memory(r)
            if total is None:
                predicted = "not measured" if r is None else f"{r['status']} here"
                agrees = "-"
            else:
                fits = analysis.fits_on(total)[reference]
                predicted, agrees = (
                    ("fits" if fits else "does not fit"),
                    ("yes" if fits == ran else "no"),
                )
            rows.append(
                [
                    reference,
                    batch,
                    "trained" if ran else "out of memory",
                    f"{model} {precision} on {device}",
                    _gib(total),
                    predicted,
                    agrees,
                ]
            )
    return rows


def batch_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 000: throughput and compiled memory per batch size, OOM recorded."""
    groups = _batch_groups(records)
    if not groups:
        return "", []
    references = list(analysis.REFERENCE_MEMORY_BYTES)
    rows = []
    for (model, _, precision, device), rs in sorted(groups.items()):
        for r in rs:
            total = _memory(r)
            fits = analysis.fits_on(total) if total is not None else {}
            marks = [("yes" if fits[n] else "no") if fits else "-" for n in references]
            rows.append(
                [
                    device,
                    f"{model} {precision}",
                    _batch_size(r),
                    _status(r),
                    _images(r),
                    _step(r),
                    _gib(total),
                    _gib(_get(r, "memory", "peak_bytes_in_use")),
                    *marks,
                ]
            )
    headers = ["device", "model", "batch", "status", "images/s", "s/step", "compiled memory"]
    table = format_table([*headers, "allocator peak", *references], rows, markdown=True)
    seed_rows = _seed_000_rows(groups, records)
    seed = ""
    if seed_rows:
        headers = ["seed 000 device", "batch", "seed saw", "our record", "compiled memory"]
        seed = "What seed 000 saw, and what our compiled memory predicts for it:\n\n" + (
            format_table([*headers, "predicts", "agrees"], seed_rows, markdown=True)
        )
    fig, (speed_ax, memory_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    for label, rs in sorted(groups.items()):
        name = f"{label[0]} {label[2]} on {label[3]}"
        ok = [r for r in rs if r["status"] == "ok"]
        line = speed_ax.plot(
            [_batch_size(r) for r in ok], [r["images_per_s"] for r in ok], marker="o", label=name
        )[0]
        ooms = [_batch_size(r) for r in rs if r["status"] == "oom"]
        if ooms:  # no throughput for an OOM: an x on the floor of the curve
            floor = min((r["images_per_s"] for r in ok), default=1.0)
            speed_ax.scatter(ooms, [floor] * len(ooms), marker="x", s=80, color=line.get_color())
        sized = [(_batch_size(r), _memory(r) / analysis.GIB) for r in ok if _memory(r)]
        if sized:
            memory_ax.plot(*zip(*sized, strict=True), marker="o", color=line.get_color())
    by_capacity: dict[int, list[str]] = defaultdict(list)
    for name, capacity in analysis.REFERENCE_MEMORY_BYTES.items():
        by_capacity[capacity].append(name)
    for capacity, names in by_capacity.items():  # one line per capacity, all its names
        gib = capacity / analysis.GIB
        memory_ax.axhline(gib, color="gray", linestyle=":", linewidth=1)
        memory_ax.annotate(
            ", ".join(names), (0.01, gib), xycoords=("axes fraction", "data"), fontsize=7
        )
    batches = [_batch_size(r) for rs in groups.values() for r in rs]
    speed_ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="images / s")
    speed_ax.set_title("Throughput (x = out of memory)")
    speed_ax.legend(fontsize="x-small")
    memory_ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="GiB")
    for ax in (speed_ax, memory_ax):
        _count_ticks(ax, batches)
    memory_ax.set_title("XLA compiled memory per device vs reference capacities")
    path = _save(fig, out / "study_batch.png")
    synthetic = {rs[0]["workload"]["model"] for key, rs in groups.items() if key[1] == "synthetic"}
    if analysis.SEED_000_MODEL in synthetic:
        data_note = (
            ", on synthetic images of the seed's shape: the cats-vs-dogs images are not "
            "available here, and speed and memory do not depend on pixel values."
        )
    else:
        data_note = ", on synthetic data." if synthetic else "."
    intro = (
        "Images/s and XLA's compiled memory of one train step per batch size (seed 000)"
        + data_note
        + " Fits-on compares compiled memory with each reference device's memory "
        "capacity (datasheet figures); compiled memory is a lower bound of what a "
        "framework needs, so 'no' is firm and 'yes' is optimistic."
    )
    return _section(
        "Study: batch size and memory",
        intro,
        table,
        seed,
        _image("batch", path),
    ), [path]


def scaling_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 001: data parallelism over 1..N devices, weak and strong."""
    groups: dict[tuple, dict[int, Record]] = defaultdict(dict)
    for r in _ok(_study(records, "scaling")):
        w = r["workload"]
        key = (w.get("scaling") or "-", model_label(r), w["strategy"], chip_label(r))
        groups[key][r["device"]["count"]] = r
    if not groups:
        return "", []
    rows = []
    modes = sorted({key[0] for key in groups})
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.5), squeeze=False)
    for (mode, model, strategy, chip), by_count in sorted(groups.items()):
        throughput = {n: r["images_per_s"] for n, r in by_count.items()}
        efficiency = analysis.scaling_efficiency(throughput)
        for n, r in sorted(by_count.items()):
            rows.append(
                [
                    mode,
                    model,
                    strategy,
                    chip,
                    n,
                    _batch_size(r),
                    _step(r),
                    _images(r),
                    _pct(efficiency.get(n)),
                ]
            )
        ax = axes[0][modes.index(mode)]
        counts = sorted(throughput)
        line = ax.plot(
            counts,
            [throughput[n] for n in counts],
            marker="o",
            label=f"{model} {strategy} on {chip}",
        )[0]
        if 1 in throughput:  # perfect scaling from the one-device point
            ideal = [n * throughput[1] for n in counts]
            ax.plot(counts, ideal, linestyle="--", color=line.get_color(), linewidth=1)
    for mode, row in zip(modes, axes[0], strict=True):
        row.set(xscale="log", yscale="log", xlabel="devices", ylabel="images / s")
        _count_ticks(row, [n for key, by in groups.items() if key[0] == mode for n in by])
        row.set_title(f"{mode} scaling (dashed: N x one device)")
        row.legend(fontsize="x-small")
    path = _save(fig, out / "study_scaling.png")
    headers = ["scaling", "model", "strategy", "device", "N", "global batch", "s/step"]
    table = format_table([*headers, "images/s", "efficiency"], rows, markdown=True)
    intro = (
        "Throughput over N devices (seed 001's recipe: replicate, split the batch, "
        "average gradients). Weak scaling keeps the per-device batch: efficiency = "
        "images/s at N / (N x images/s on one). Strong scaling keeps the global batch: "
        "efficiency = speedup at N / N, the same ratio of throughputs."
    )
    predicted = predicted_scaling(records, _ok(_study(records, "scaling")))
    return _section("Study: scaling", intro, table, predicted, _image("scaling", path)), [path]


def _matmul_n(record: Record) -> int:
    return _get(record, "matmul", "n") or _batch_size(record)


def matmul_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 004: square matmul TFLOP/s vs size and dtype, against the vendor peak."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in _ok(_study(records, "matmul", kind="matmul")):
        if _get(r, "matmul", "tflops") is not None:
            dtype = _get(r, "matmul", "dtype") or r["workload"].get("precision")
            key = (device_label(r), dtype, r["workload"].get("matmul_precision") or "default")
            groups[key].append(r)
    if not groups:
        return "", []
    rows = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for (device, dtype, precision), rs in sorted(groups.items()):
        rs.sort(key=_matmul_n)
        label = f"{device} {dtype}" + ("" if precision == "default" else f" ({precision})")
        line = ax.plot(
            [_matmul_n(r) for r in rs], [r["matmul"]["tflops"] for r in rs], marker="o", label=label
        )[0]
        peak = _get(rs[0], "mfu", "vendor_peak_tflops")
        if peak:
            vendor = _get(rs[0], "mfu", "vendor_precision")
            ax.axhline(peak, color=line.get_color(), linestyle="--", linewidth=1)
            ax.annotate(f"{vendor} peak", (0, peak), xycoords=("axes fraction", "data"), fontsize=7)
        for r in rs:
            rows.append(
                [
                    device,
                    dtype,
                    precision,
                    _matmul_n(r),
                    _step(r),
                    f"{r['matmul']['tflops']:.4g}",
                    f"{peak:g} {_get(r, 'mfu', 'vendor_precision')}" if peak else "-",
                    _pct(r["matmul"]["tflops"] / peak) if peak else "-",
                ]
            )
    ax.set(xscale="log", yscale="log", xlabel="n (n x n @ n x n)", ylabel="TFLOP/s")
    _count_ticks(ax, [_matmul_n(r) for rs in groups.values() for r in rs])
    ax.set_title("Matmul throughput (dashed: vendor peak where known)")
    ax.legend(fontsize="x-small")
    path = _save(fig, out / "study_matmul.png")
    headers = ["device", "dtype", "matmul precision", "n", "s/matmul", "TFLOP/s"]
    table = format_table([*headers, "vendor peak", "of peak"], rows, markdown=True)
    intro = "Square matmuls, 2 n^3 FLOPs each, per dtype and device (seed 004)."
    return _section("Study: matmul", intro, table, _image("matmul", path)), [path]


def _ensemble(record: Record) -> tuple[int, str]:
    e = record.get("ensemble") or {}
    w = record["workload"]
    return e.get("k") or w.get("ensemble_size") or 1, e.get("mode") or w.get("ensemble_mode") or "-"


def ensemble_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 004: K models in one vmapped step vs K steps one after another."""
    rs = _study(records, "ensemble", kind="ensemble")
    if not rs:
        return "", []
    ok = _ok(rs)
    by_key = {(device_label(r), model_label(r), *_ensemble(r)): r for r in ok}
    rows = []
    for r in sorted(rs, key=lambda r: (device_label(r), model_label(r), _ensemble(r))):
        k, mode = _ensemble(r)
        sequential = by_key.get((device_label(r), model_label(r), k, "sequential"))
        speedup = "-"
        if mode == "vmap" and sequential and r["status"] == "ok":
            speedup = f"{_median_step(sequential) / _median_step(r):.2f}x"
        synthetic = r["workload"].get("dataset") == "synthetic"  # no accuracy to show
        per_model = [] if synthetic else _get(r, "ensemble", "test_accuracy") or []
        summary = analysis.mean_spread(per_model)
        rows.append(
            [
                device_label(r),
                model_label(r),
                k,
                mode,
                _step(r),
                _images(r),
                speedup,
                "-" if summary is None else f"{summary[0]:.4f} ± {summary[1]:.4f}",
                "-" if summary is None else f"{summary[2]:.4f}-{summary[3]:.4f}",
                _status(r),
            ]
        )
    headers = ["device", "model", "K", "mode", "s/step (all K)", "images/s", "vmap speedup"]
    table = format_table(
        [*headers, "test acc mean ± sd", "test acc min-max", "status"], rows, markdown=True
    )
    if not ok:
        return _section("Study: ensembles", table), []
    curves: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for (device, model, k, mode), r in by_key.items():
        curves[f"{model} {mode} on {device}"].append((k, r["images_per_s"]))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in sorted(curves.items()):
        ax.plot(*zip(*sorted(points), strict=True), marker="o", label=label)
    ax.set(xscale="log", yscale="log", xlabel="models trained at once (K)", ylabel="images / s")
    _count_ticks(ax, [k for _, _, k, _ in by_key])
    ax.set_title("Ensembles: one vmapped step vs K sequential steps")
    ax.legend(fontsize="x-small")
    path = _save(fig, out / "study_ensemble.png")
    intro = (
        "K models with different seeds and learning rates (seed 004). images/s counts the "
        "images all K models process; the vmap speedup is sequential s/step over vmap "
        "s/step at the same K."
    )
    return _section("Study: ensembles", intro, table, _image("ensemble", path)), [path]


def _variant(record: Record) -> str:
    w = record["workload"]
    matmul = w.get("matmul_precision")
    return w.get("precision", "f32") + (f", matmul {matmul}" if matmul else "")


def precision_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Same accuracy in f32 and bf16 (and with TF32 on and off)?"""
    rs = sorted(
        _study(records, "precision"),
        key=lambda r: (device_label(r), _workload_key(r), _variant(r)),
    )
    if not rs:
        return "", []
    rows = [
        [
            device_label(r),
            _workload_label(r),
            _variant(r),
            _step(r),
            _images(r),
            _acc(accuracy(r)),
            f"{r['test_loss']:.4f}" if accuracy(r) is not None and r.get("test_loss") else "-",
            _status(r),
        ]
        for r in rs
    ]
    headers = ["device", "workload", "precision", "s/step [p10-p90]", "images/s", "test acc"]
    table = format_table([*headers, "test loss", "status"], rows, markdown=True)
    ok = _ok(rs)
    if not ok:
        return _section("Study: precision", table), []
    fig, (step_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 0.8 + max(3.5, 0.45 * len(ok))))
    names = [f"{device_label(r)}\n{model_label(r)} {_variant(r)}" for r in ok]
    step_ax.barh(names, [_median_step(r) for r in ok])
    step_ax.set(xscale="log", xlabel="s / step (median)")
    step_ax.tick_params(axis="y", labelsize="x-small")
    step_ax.invert_yaxis()
    for r, name in zip(ok, names, strict=True):
        history = r.get("history") or []
        if accuracy(r) is not None and history:
            epochs = [e["epoch"] for e in history]
            acc_ax.plot(epochs, [e.get("test_accuracy") for e in history], marker="o", label=name)
    acc_ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    acc_ax.set(xlabel="epoch", ylabel="test accuracy")
    if acc_ax.lines:
        acc_ax.legend(fontsize="x-small")
    path = _save(fig, out / "study_precision.png")
    intro = (
        "Compute dtype f32 vs bf16 (parameters and optimizer state stay f32), and f32 "
        "matmuls at JAX's default precision vs highest where recorded."
    )
    return _section("Study: precision", intro, table, _image("precision", path)), [path]


def accuracy_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 000 Fig. 14: per-epoch loss and accuracy, devices overlaid, per dataset."""
    by_dataset: dict[str, list[Record]] = defaultdict(list)
    for r in _ok(_study(records, "accuracy")):
        if r.get("history") and accuracy(r) is not None:
            by_dataset[r["workload"]["dataset"]].append(r)
    if not by_dataset:
        return "", []
    rows, notes = [], []
    datasets = sorted(by_dataset)
    fig, axes = plt.subplots(len(datasets), 2, figsize=(11, 4 * len(datasets)), squeeze=False)
    for (acc_ax, loss_ax), dataset in zip(axes, datasets, strict=True):
        rs = sorted(by_dataset[dataset], key=lambda r: (model_label(r), device_label(r)))
        for r in rs:
            history = r["history"]
            last = history[-1]
            label = f"{model_label(r)} on {device_label(r)}"
            rows.append(
                [
                    dataset,
                    model_label(r),
                    device_label(r),
                    len(history),
                    _acc(last.get("train_accuracy")),
                    _acc(last.get("test_accuracy")),
                    _acc(last.get("test_loss")),
                ]
            )
            epochs = [e["epoch"] for e in history]
            color = acc_ax.plot(
                epochs, [e.get("train_accuracy") for e in history], marker="o", label=label
            )[0].get_color()
            acc_ax.plot(epochs, [e.get("test_accuracy") for e in history], "--", color=color)
            loss_ax.plot(epochs, [e.get("train_loss") for e in history], marker="o", color=color)
            loss_ax.plot(epochs, [e.get("test_loss") for e in history], "--", color=color)
        finals = [r["test_accuracy"] for r in rs]
        if len(finals) > 1:
            notes.append(
                f"{dataset}: final test accuracy spans {min(finals):.4f}-{max(finals):.4f} "
                f"over {len(finals)} records (a spread of {max(finals) - min(finals):.4f})."
            )
        for ax in (acc_ax, loss_ax):
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel("epoch")
        acc_ax.set(ylabel="accuracy (train solid, test dashed)", title=dataset)
        loss_ax.set(ylabel="loss (train solid, test dashed)", title=dataset)
        acc_ax.legend(fontsize="x-small")
    path = _save(fig, out / "study_accuracy.png")
    headers = ["dataset", "model", "device", "epochs", "train acc", "test acc", "test loss"]
    table = format_table(headers, rows, markdown=True)
    intro = "Per-epoch loss and accuracy of the same model on every device (seed 000 Fig. 14)."
    return _section("Study: accuracy", intro, table, "\n".join(notes), _image("acc", path)), [path]


STUDY_SECTIONS: list[Section] = [
    devices_study,
    crossover_study,
    batch_study,
    scaling_study,
    matmul_study,
    ensemble_study,
    precision_study,
    accuracy_study,
    bench_study,
    speedrun_study,
]


# --- README headline ------------------------------------------------------------------


def headline_records(records: list[Record]) -> list[Record]:
    """The README's rows: the devices study where there is one (the seeds' headline
    question), else every train record outside the studies, else every train record."""
    train = [r for r in latest(_ok(records)) if workload_kind(r) == "train"]
    for chosen in ([r for r in train if _study_of(r) == "devices"], generic(train), train):
        if chosen:
            return sorted(chosen, key=_workload_key)
    return []


def headline(records: list[Record], report_link: str) -> str:
    """The README's generated block: a compact table and where its numbers come from."""
    rows = [
        [
            device_label(r),
            model_label(r),
            r["workload"].get("dataset"),
            _batch_size(r),
            _step(r),
            _images(r),
            _acc(accuracy(r)),
        ]
        for r in headline_records(records)
    ]
    headers = ["device", "model", "dataset", "batch", "s/step [p10-p90]", "images/s", "test acc"]
    hosts = sorted({str(r["device"].get("host") or r["env"].get("host")) for r in records})
    jax_versions = sorted({str(r["env"]["jax"]) for r in records if r["env"].get("jax")})
    provenance = (
        f"{len(records)} record(s) from {len(hosts)} machine(s) ({', '.join(hosts)}), "
        f"jax {', '.join(jax_versions)}; generated by `python -m experiments.report`; "
        f"full report: [{report_link}]({report_link})."
    )
    speedrun = speedrun_headline(records)
    speedrun = f"\n\n{speedrun}" if speedrun else ""
    seed = seed_000_headline(records)
    speedrun += f"\n\n{seed}" if seed else ""
    return format_table(headers, rows, markdown=True) + speedrun + "\n\n" + provenance


def update_readme(readme: Path, records: list[Record], report: Path) -> None:
    """Rewrite the README's generated block in place; the rest stays byte-identical."""
    text = readme.read_bytes().decode("utf-8")
    link = Path(os.path.relpath(report, readme.resolve().parent)).as_posix()
    readme.write_bytes(analysis.replace_block(text, headline(records, link)).encode("utf-8"))


SECTIONS: list[Section] = [
    overview,
    devices_table,
    *STUDY_SECTIONS,
    targets_section,
    predicted_vs_measured,
    results_table,
    flops_check,
    speedup_over_cpu,
    step_time_vs_params,
    throughput_vs_batch,
    mfu_per_device,
    curves_per_epoch,
]


def write_report(
    records: list[Record], out: str | os.PathLike, sections: Sequence[Section] = tuple(SECTIONS)
) -> tuple[Path, list[Path]]:
    """Write REPORT.md and the sections' PNGs into `out`; (report path, png paths)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    parts, pngs = ["# jaxcnn: measured results"], []
    for section in sections:
        markdown, paths = section(records, out)
        if markdown:
            parts.append(markdown)
        pngs.extend(paths)
    report = out / REPORT_FILE
    report.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return report, pngs


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():
        warnings.showwarning = one_line_warning  # a skipped bad record: one line
        return _main(argv)


def _writable_folder(out: Path) -> str | None:
    """Why REPORT.md and the plots could not be written into `out`, or None."""
    try:
        records_lib.check_writable_folder(out)
    except OSError as e:
        return f"cannot write to --out {out}: {e.strerror or e}"
    return None


def _main(argv: list[str] | None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__)
    p.add_argument("paths", nargs="+", help="records.jsonl files or folders of them")
    p.add_argument("--out", help="folder for REPORT.md and PNGs (default: the first folder)")
    p.add_argument(
        "--readme",
        help=f"also rewrite the headline table between {analysis.README_START} and "
        f"{analysis.README_END} in this file (the rest is left byte-identical)",
    )
    p.add_argument(
        "--performance",
        help=f"also rewrite the bench table between {BENCH_START} and {BENCH_END} in this "
        "file (PERFORMANCE.md)",
    )
    args = p.parse_args(argv)
    missing = [path for path in args.paths if not Path(path).exists()]
    for given in (args.readme, args.performance):
        if given and not Path(given).is_file():
            missing.append(given)
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.readme and not _has_markers(Path(args.readme)):
        print(
            f"error: {args.readme} has no generated block: add a line {analysis.README_START} "
            f"and, below it, a line {analysis.README_END} where the results table goes",
            file=sys.stderr,
        )
        return 2
    if args.performance and not _has_markers(Path(args.performance), BENCH_START, BENCH_END):
        print(
            f"error: {args.performance} has no generated block: add a line {BENCH_START} "
            f"and, below it, a line {BENCH_END} where the bench table goes",
            file=sys.stderr,
        )
        return 2
    first = Path(args.paths[0])
    out = Path(args.out) if args.out else (first if first.is_dir() else first.parent)
    unwritable = _writable_folder(out)
    if unwritable:
        print(f"error: {unwritable}", file=sys.stderr)
        return 2
    records = [r for r in records_lib.load(*args.paths) if not records_lib.took_turns(r)]
    if not records:
        print(f"error: no records found in {', '.join(args.paths)}", file=sys.stderr)
        return 2
    report, pngs = write_report(records, out)
    print(f"{report} ({len(records)} records, {len(pngs)} plots)")
    if args.readme:
        update_readme(Path(args.readme), records, report)
        print(f"{args.readme}: headline table rewritten")
    if args.performance:
        update_performance(Path(args.performance), records, out)
        print(f"{args.performance}: bench table rewritten")
    return 0


BENCH_START, BENCH_END = "<!-- bench:start -->", "<!-- bench:end -->"


def update_performance(notes: Path, records: list[Record], out: Path) -> None:
    """Rewrite the notes' generated bench block in place; the rest stays byte-identical."""
    text = notes.read_bytes().decode("utf-8")
    plot = out / BENCH_PLOT
    image = (
        Path(os.path.relpath(plot, notes.resolve().parent)).as_posix() if plot.exists() else None
    )
    block = bench_block(records, image)
    notes.write_bytes(analysis.replace_block(text, block, BENCH_START, BENCH_END).encode("utf-8"))


def _has_markers(
    readme: Path, start: str = analysis.README_START, end: str = analysis.README_END
) -> bool:
    try:
        analysis.replace_block(readme.read_bytes().decode("utf-8"), "", start, end)
    except analysis.MissingMarkers:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
