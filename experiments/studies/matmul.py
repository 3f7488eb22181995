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

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from experiments import predictions
from experiments.labels import device_label
from experiments.studies._common import (
    batch_size,
    field,
    fmt_pct,
    fmt_step,
    image,
    in_study,
    log_axes,
    measured_on,
    no_accelerator,
    not_measured,
    on_accelerator,
    only_ok,
    precision_of,
    pyplot,
    save,
    section,
)
from experiments.studies.base import Context, Record, Study, Summary
from experiments.studies.targets import (
    compiled,
    fits_chip,
    prediction,
    prediction_method,
    target_field,
    target_name,
)
from experiments.tables import markdown_table, si
from experiments.workload import Workload

MATMUL_SIZES = (256, 512, 1024, 2048, 4096, 8192)
MATMUL_SIZES_CPU = (256, 512, 1024, 2048, 4096)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
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


def _matmul_n(record: Record) -> int:
    return field(record, "matmul", "n") or batch_size(record)


def matmul_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 004: square matmul TFLOP/s vs size and dtype, against the vendor peak."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in only_ok(in_study(records, "matmul", kind="matmul")):
        if field(r, "matmul", "tflops") is not None:
            dtype = field(r, "matmul", "dtype") or r["workload"].get("precision")
            key = (device_label(r), dtype, r["workload"].get("matmul_precision") or "default")
            groups[key].append(r)
    if not groups:
        return "", []
    rows = []
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for (device, dtype, precision), rs in sorted(groups.items()):
        rs.sort(key=_matmul_n)
        label = f"{device} {dtype}" + ("" if precision == "default" else f" ({precision})")
        tflops = [r["matmul"]["tflops"] for r in rs]
        line = ax.plot([_matmul_n(r) for r in rs], tflops, marker="o", label=label)[0]
        peak = field(rs[0], "mfu", "vendor_peak_tflops")
        if peak:
            vendor = field(rs[0], "mfu", "vendor_precision")
            ax.axhline(peak, color=line.get_color(), linestyle="--", linewidth=1)
            ax.annotate(f"{vendor} peak", (0, peak), xycoords=("axes fraction", "data"), fontsize=7)
        for r, rate in zip(rs, tflops, strict=True):
            vendor_peak = f"{peak:g} {field(r, 'mfu', 'vendor_precision')}" if peak else "-"
            row = [device, dtype, precision, _matmul_n(r), fmt_step(r), _rate(rate)]
            rows.append([*row, vendor_peak, fmt_pct(rate / peak) if peak else "-"])
    ticks = [_matmul_n(r) for rs in groups.values() for r in rs]
    title = "Matmul throughput (dashed: vendor peak where known)"
    log_axes(ax, "n (n x n @ n x n)", "TFLOP/s", title, ticks)
    path = save(fig, out / "study_matmul.png")
    headers = ["device", "dtype", "matmul precision", "n", "s/matmul", "rate"]
    table = markdown_table([*headers, "vendor peak", "of peak"], rows)
    intro = "Square matmuls, 2 n^3 FLOPs each, per dtype and device (seed 004)."
    return section("Study: matmul", intro, table, image("matmul", path)), [path]


def matmul_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The fastest square matmul per device and dtype, measured, against the peak."""
    best: dict[tuple[str, str], Record] = {}
    for r in only_ok(in_study(records, "matmul", kind="matmul")):
        if field(r, "matmul", "tflops") is not None:
            key = (device_label(r), field(r, "matmul", "dtype") or precision_of(r))
            if key not in best or r["matmul"]["tflops"] > best[key]["matmul"]["tflops"]:
                best[key] = r
    if not best:
        return "", []
    rows = [
        [device, dtype, _matmul_n(r), _rate(r["matmul"]["tflops"]), fmt_pct(_of_peak(r))]
        for (device, dtype), r in sorted(best.items())
    ]
    table = "One square matmul timed alone (no train step, no epochs):\n\n" + markdown_table(
        ["device (measured)", "dtype", "n", "rate", "of vendor peak"], rows
    )
    note = "" if any(on_accelerator(r) for r in best.values()) else no_accelerator("matmul")
    return "\n\n".join(p for p in (table, note) if p), []


def _rate(tflops: float) -> str:
    return si(tflops * 1e12, "FLOP/s")


def _of_peak(record: Record) -> float | None:
    peak = field(record, "mfu", "vendor_peak_tflops")
    return record["matmul"]["tflops"] / peak if peak else None


def _predicted_of_peak(record: Record) -> tuple[float, str] | None:
    """A compiled one-chip step's predicted FLOP rate over its chip's peak, and the
    precision of that peak (the one f32 matmuls run in at JAX's default precision); None
    without a per-kernel prediction."""
    from jaxcnn import devices as devices_lib

    block = prediction(record)
    flops = field(record, "flops", "per_step")
    step = block.get("step_time_s")
    if prediction_method(record) != "per-kernel" or not (flops and step):
        return None
    # The precision an f32 matmul runs in at JAX's default: TF32 where the chip has it,
    # else f32, else bf16 passes (a TPU); the peak from the one vendor table.
    kind = str(record["device"]["kind"])
    for name in ("tf32", "fp32", "bf16"):
        if peak := devices_lib.vendor_peak_tflops(kind, name):
            fraction = flops / step / (peak * 1e12)
            return (fraction, name) if math.isfinite(fraction) else None
    return None


def matmul_summary(records: list[Record]) -> list[Summary]:
    """Seeds 003/004: how close a device gets to its peak: the matmul measured here,
    and the train steps compiled for each accelerator, predicted (the best fraction of
    peak per platform over the one-chip f32 steps that fit)."""
    question = "How close does a CPU, GPU or TPU get to its peak FLOP/s?"
    rates = [
        r
        for r in only_ok(in_study(records, "matmul", kind="matmul"))
        if field(r, "matmul", "tflops") is not None
    ]
    parts, sources = [], []
    f32 = [r for r in rates if (field(r, "matmul", "dtype") or precision_of(r)) == "float32"]
    if f32:
        best = max(f32, key=lambda r: r["matmul"]["tflops"])
        peak = _of_peak(best)
        of_peak = f", {fmt_pct(peak)} of its vendor peak" if peak else " (no vendor peak known)"
        parts.append(
            f"{device_label(best)}: f32 matmul at {_rate(best['matmul']['tflops'])} "
            f"(n={_matmul_n(best)}){of_peak}"
        )
        sources.append(measured_on([best]))
    else:
        parts.append(not_measured("matmul", "cpu"))
    best_by_platform: dict[str, tuple[float, str, Record]] = {}
    for r in compiled(records):
        if precision_of(r) != "f32" or not fits_chip(r) or target_field(r, "chips") != 1:
            continue
        found = _predicted_of_peak(r)
        platform = r["device"]["platform"]
        if found and found[0] > best_by_platform.get(platform, (0.0, "", r))[0]:
            best_by_platform[platform] = (*found, r)
    for platform, (fraction, peak_name, r) in sorted(best_by_platform.items()):
        parts.append(
            f"{target_name(r)} at best {fraction:.0%} of its {peak_name} peak in a train step "
            f"({r['workload']['model']}, batch {batch_size(r)}, f32)"
        )
        sources.append(f"{target_name(r)} {predictions.band_label(prediction(r), platform)}")
    if not best_by_platform:
        parts.append("no compiled accelerator step: `python -m experiments.run --study=targets`")
    return [Summary("003, 004", question, "; ".join(parts), "; ".join(sources) or "-", "matmul.md")]


STUDY = Study(
    "matmul",
    workloads=workloads,
    sections=(matmul_study,),
    question="How close does the device get to its peak FLOP/s? (seed 004)",
    answer=matmul_answer,
    summary=matmul_summary,
)
