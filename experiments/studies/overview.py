"""The report's sections that belong to no one study: the overview, the devices at hand,
every record's row, the FLOPs check, and the README's headline table (the devices study
where there is one, else the records outside the named studies).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments.labels import device_label, model_label, workload_kind
from experiments.studies._common import (
    _acc,
    _batch_size,
    _get,
    _images,
    _ok,
    _pct,
    _sort_key,
    _status,
    _step,
    _study_of,
    _workload_key,
    accuracy,
    generic,
    latest,
)
from experiments.studies.base import Record, Section
from experiments.studies.targets import not_compiled
from experiments.tables import format_table, si

FLOPS_MISMATCH = 0.10  # flag |XLA / jaxpr - 1| above this


def flops_flag(record: Record) -> str:
    """XLA / jaxpr FLOPs, flagged when they differ by more than FLOPS_MISMATCH."""
    ratio = _get(record, "flops", "xla_vs_jaxpr")
    if ratio is None:
        return "-" if _get(record, "flops", "per_step") is None else "no XLA count"
    flag = " (differs >10%)" if abs(ratio - 1) > FLOPS_MISMATCH else ""
    return f"{ratio:.2f}{flag}"


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


def headline_records(records: list[Record]) -> list[Record]:
    """The README's rows: the devices study where there is one (the seeds' headline
    question), else every train record outside the studies, else every train record."""
    train = [r for r in latest(_ok(records)) if workload_kind(r) == "train"]
    for chosen in ([r for r in train if _study_of(r) == "devices"], generic(train), train):
        if chosen:
            return sorted(chosen, key=_workload_key)
    return []


def headline_table(records: list[Record]) -> str:
    """The README's results table: one row per headline record."""
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
    return format_table(headers, rows, markdown=True)


# The cross-study sections before the studies' own, and the tables over every record
# after them.
LEADING: tuple[Section, ...] = (overview, devices_table)
TRAILING: tuple[Section, ...] = (results_table, flops_check)
