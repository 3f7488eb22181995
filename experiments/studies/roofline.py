"""How far is a measured step from its predicted (roofline) time?

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

from __future__ import annotations

import dataclasses
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments.labels import device_label, model_label
from experiments.studies import bench
from experiments.studies.base import Context, Record, Study
from experiments.studies.targets import compiled, not_compiled, target_field
from experiments.tables import format_table, seconds, si
from experiments.workload import Workload


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    from jaxcnn import formulation

    chosen = formulation.for_platform(ctx.platform).name
    precisions = ("f32",) if ctx.cpu else ("f32", "bf16")
    group = lambda w: w.oom_group and w.oom_group.replace("bench:", "roofline:", 1)  # noqa: E731
    return [
        dataclasses.replace(w, study="roofline", oom_group=group(w))
        for w in bench.workloads(ctx)
        if w.precision in precisions
        and formulation.resolve(w.formulation, ctx.platform).name == chosen
    ]


def _ratio(record: Record, predicted: dict[str, Any] | None) -> float | None:
    step = (predicted or {}).get("step_time_s")
    if not step or record["status"] != "ok":
        return None
    return record["step_time_s"]["median"] / step


def _rates(predicted: dict[str, Any]) -> str:
    peak, rate = predicted.get("peak_tflops_used"), predicted.get("bandwidth_bytes_per_s")
    parts = []
    if peak:
        parts.append(
            f"{si(peak * 1e12, 'FLOP/s')} {predicted.get('peak_precision') or ''} "
            f"{predicted.get('peak_source')}".replace("  ", " ")
        )
    if rate:
        parts.append(f"{si(rate, 'B/s')} {predicted.get('bandwidth_source')}")
    return ", ".join(parts) or "-"


def _chip_key(record: Record) -> tuple:
    w = record["workload"]
    overrides = tuple(sorted((w.get("model_overrides") or {}).items()))
    return w["model"], overrides, w["batch_size"], w.get("precision", "f32")


def _compile_pairs(records: list[Record]) -> dict[tuple, Record]:
    """(chip, chips, workload) -> the compile-only record that predicts it."""
    pairs = {}
    for r in compiled(records):
        if r["status"] == "ok" and (r.get("prediction") or {}).get("step_time_s"):
            pairs[(target_field(r, "chip"), target_field(r, "chips"), *_chip_key(r))] = r
    return pairs


def _measured_chip(record: Record) -> tuple:
    return ((record.get("mfu") or {}).get("chip"), record["device"]["count"], *_chip_key(record))


def _ratio_spread(values: list[float]) -> str:
    if not values:
        return ""
    return (
        f"median {statistics.median(values):.3g}, range {min(values):.3g}-{max(values):.3g} "
        f"over {len(values)} record(s)"
    )


def predicted_measured(records: list[Record]) -> list[Record]:
    """The latest ok measured record per device and cell that carries a prediction."""
    chosen: dict[tuple, Record] = {}
    for r in sorted(not_compiled(records), key=lambda r: str(r["env"].get("utc_time") or "")):
        if r["status"] == "ok" and (r.get("prediction") or {}).get("step_time_s"):
            w = r["workload"]
            key = (device_label(r), w.get("study"), model_label(r), *_chip_key(r), w["strategy"])
            chosen[key] = r
    return list(chosen.values())


def predicted_vs_measured(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Per device: every measured step beside its predicted time, and their ratio."""
    title = "## Predicted vs measured step time"
    rs = predicted_measured(records)
    if not rs:
        return (
            f"{title}\n\nNo measured record carries a prediction yet "
            "(`python -m experiments.run --study=roofline` writes them).",
            [],
        )
    pairs = _compile_pairs(records)
    by_device: dict[str, list[Record]] = defaultdict(list)
    for r in rs:
        by_device[device_label(r)].append(r)
    intro = (
        "Every measured record with a prediction: the step time measured on the device "
        "(median of the record's timed steps, p10-p90) beside the step time predicted "
        "for it by a roofline of the same compiled step, computed in the same run "
        "(`predicted`: from that run's measured matmul ceiling for the step's dtype and "
        "its measured memory bandwidth; `predicted, datasheet`: from the vendor's figures, "
        "where the chip has them; `predicted, target compile`: the compile-only record of "
        "the same workload for the same chip and chip count). `measured / predicted` is "
        "the method's error: at least 1 where the roofline is a true lower bound; the "
        "bound names the side (compute or memory) that sets the prediction."
    )
    parts = [title, intro]
    for device in sorted(by_device):
        group = sorted(
            by_device[device],
            key=lambda r: (
                str(r["workload"].get("study")),
                model_label(r),
                r["workload"]["batch_size"],
                r["workload"].get("precision", "f32"),
            ),
        )
        vendor = any(r.get("prediction_vendor") for r in group)
        paired = {id(r): pairs.get(_measured_chip(r)) for r in group}
        target = any(paired.values())
        rows, ratios = [], []
        for r in group:
            predicted = r["prediction"]
            ratio = _ratio(r, predicted)
            ratios.append(ratio)
            step = r["step_time_s"]
            row = [
                r["workload"].get("study") or "-",
                model_label(r),
                r["workload"]["batch_size"],
                r["workload"].get("precision", "f32"),
                f"{seconds(step['median'])} [{seconds(step['p10'])}-{seconds(step['p90'])}]",
                seconds(predicted["step_time_s"]),
                f"{ratio:.2f}",
                predicted.get("bound") or "-",
                _rates(predicted),
            ]
            if vendor:
                other = r.get("prediction_vendor")
                other_ratio = _ratio(r, other)
                row += [
                    seconds((other or {}).get("step_time_s")),
                    "-" if other_ratio is None else f"{other_ratio:.2f}",
                ]
            if target:
                pair = paired[id(r)]
                pair_prediction = (pair or {}).get("prediction")
                pair_ratio = _ratio(r, pair_prediction)
                row += [
                    seconds((pair_prediction or {}).get("step_time_s")),
                    "-" if pair_ratio is None else f"{pair_ratio:.2f}",
                ]
            rows.append(row)
        headers = [
            "study",
            "model",
            "batch",
            "precision",
            "measured s/step [p10-p90]",
            "predicted s/step",
            "measured / predicted",
            "bound (predicted)",
            "predicted from",
        ]
        if vendor:
            headers += ["predicted s/step, datasheet", "measured / predicted, datasheet"]
        if target:
            headers += ["predicted s/step, target compile", "measured / predicted, target compile"]
        summary = f"measured / predicted: {_ratio_spread([x for x in ratios if x is not None])}."
        parts += [f"### {device}", format_table(headers, rows, markdown=True), summary]
    return "\n\n".join(parts), []


STUDY = Study("roofline", workloads=workloads, sections=(predicted_vs_measured,))
