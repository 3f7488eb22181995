"""python -m experiments.report RESULTS... [--out DIR]: records -> REPORT.md + PNG plots.

Every number in the report and every point in a plot is read from a record; nothing
is typed by hand. The report is a list of sections, each a function
`(records, out_dir) -> (markdown, [png paths])`; a study adds its section to SECTIONS.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers, CI or TPU VMs
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from experiments import records as records_lib
from experiments.tables import format_table, seconds, si

Record = dict[str, Any]
Section = Callable[[list[Record], Path], tuple[str, list[Path]]]
REPORT_FILE = "REPORT.md"
FLOPS_MISMATCH = 0.10  # flag |XLA / jaxpr - 1| above this


# --- Labels and values read from records ----------------------------------------------


def device_label(record: Record) -> str:
    """A device as the report names it: cpu, gpu NVIDIA H100 80GB HBM3, tpu TPU v5 lite x8."""
    d = record["device"]
    kind = "" if d["kind"] == d["platform"] else f" {d['kind']}"
    count = f" x{d['count']}" if d["count"] > 1 else ""
    return f"{d['platform']}{kind}{count}"


def model_label(record: Record) -> str:
    w = record["workload"]
    overrides = w.get("model_overrides") or {}
    return w["model"] + "".join(f" {k}={v}" for k, v in sorted(overrides.items()))


def _cell(record: Record) -> tuple:
    """What a record measures, without the device: records with equal cells compare."""
    w = record["workload"]
    return (
        model_label(record),
        w.get("dataset"),
        w["batch_size"],
        w.get("precision", "f32"),
        w["strategy"],
    )


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
    for r in latest(records):
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
    accuracy = r.get("test_accuracy")
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
        f"{accuracy:.4f}" if accuracy is not None else "-",
        _status(r),
    ]


def results_table(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    ordered = sorted(records, key=lambda r: (model_label(r), device_label(r), _cell(r)))
    table = format_table(RESULT_HEADERS, [result_row(r) for r in ordered], markdown=True)
    return "## Results\n\n" + table, []


def flops_check(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Where XLA and the jaxpr disagree by more than FLOPS_MISMATCH, both counts side by
    side with the jaxpr count that skips padding and dilation taps."""
    flagged = [r for r in latest(_ok(records)) if "differs" in flops_flag(r)]
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
    for r in latest(_ok(records)):
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
    ok = latest(_ok(records))
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
    for r in latest(records):
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
        for r in latest(_ok(records))
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
        for r in latest(_ok(records))
        if r.get("history")
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


SECTIONS: list[Section] = [
    overview,
    devices_table,
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
    p = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__)
    p.add_argument("paths", nargs="+", help="records.jsonl files or folders of them")
    p.add_argument("--out", help="folder for REPORT.md and PNGs (default: the first folder)")
    args = p.parse_args(argv)
    missing = [path for path in args.paths if not Path(path).exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    records = records_lib.load(*args.paths)
    if not records:
        print(f"error: no records found in {', '.join(args.paths)}", file=sys.stderr)
        return 2
    first = Path(args.paths[0])
    out = Path(args.out) if args.out else (first if first.is_dir() else first.parent)
    report, pngs = write_report(records, out)
    print(f"{report} ({len(records)} records, {len(pngs)} plots)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
