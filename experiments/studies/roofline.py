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
from experiments.studies._common import (
    batch_size,
    field,
    fmt_step,
    latest_by,
    median_step,
    precision_of,
    same_step,
    study_of,
)
from experiments.studies.base import Context, Record, Study
from experiments.studies.targets import (
    compiled,
    not_compiled,
    prediction,
    prediction_method,
    target_field,
)
from experiments.tables import markdown_table, seconds, si
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
    return median_step(record) / step


def _versus(record: Record, predicted: dict[str, Any] | None) -> list[str]:
    """[predicted s/step, measured / predicted] for one prediction of `record`."""
    ratio = _ratio(record, predicted)
    step = seconds((predicted or {}).get("step_time_s"))
    return [step, "-" if ratio is None else f"{ratio:.2f}"]


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


def _has_prediction(record: Record) -> bool:
    return record["status"] == "ok" and bool(prediction(record).get("step_time_s"))


def predicted_measured(records: list[Record]) -> list[Record]:
    """The latest ok measured record per device and cell that carries a prediction."""
    return latest_by(
        [r for r in not_compiled(records) if _has_prediction(r)],
        lambda r: (
            device_label(r),
            study_of(r),
            model_label(r),
            *same_step(r),
            r["workload"]["strategy"],
        ),
    )


INTRO = (
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
HEADERS = [
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
    # (chip, chips, workload) -> the prediction of its compile-only record
    compiled_predictions = {
        (target_field(r, "chip"), target_field(r, "chips"), *same_step(r)): prediction(r)
        for r in compiled(records)
        if _has_prediction(r)
    }
    by_device: dict[str, list[Record]] = defaultdict(list)
    for r in rs:
        by_device[device_label(r)].append(r)
    parts = [title, INTRO]
    for device in sorted(by_device):
        group = sorted(
            by_device[device],
            key=lambda r: (str(study_of(r)), model_label(r), batch_size(r), precision_of(r)),
        )
        # Where a record of the device has one: the prediction from the chip's datasheet,
        # and the compile-only record's for the same chip, chip count and workload.
        others = {
            "datasheet": [r.get("prediction_vendor") for r in group],
            "target compile": [
                compiled_predictions.get(
                    (field(r, "mfu", "chip"), r["device"]["count"], *same_step(r))
                )
                for r in group
            ],
        }
        others = {name: found for name, found in others.items() if any(found)}
        rows = []
        for i, r in enumerate(group):
            predicted = prediction(r)
            row = [study_of(r) or "-", model_label(r), batch_size(r), precision_of(r), fmt_step(r)]
            row += [*_versus(r, predicted), predicted.get("bound") or "-", _rates(predicted)]
            rows.append(row + [cell for found in others.values() for cell in _versus(r, found[i])])
        columns = ("predicted s/step", "measured / predicted")
        headers = HEADERS + [f"{column}, {name}" for name in others for column in columns]
        ratios = [x for r in group if (x := _ratio(r, prediction(r))) is not None]
        spread = ""
        if ratios:
            spread = (
                f"median {statistics.median(ratios):.3g}, range {min(ratios):.3g}-"
                f"{max(ratios):.3g} over {len(ratios)} record(s)"
            )
        parts += [
            f"### {device}",
            markdown_table(headers, rows),
            f"measured / predicted: {spread}.",
        ]
    return "\n\n".join(parts), []


def roofline_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Per device and prediction method: measured over predicted step time."""
    ratios: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in predicted_measured(records):
        if (x := _ratio(r, prediction(r))) is not None:
            ratios[(device_label(r), prediction_method(r))].append(x)
    if not ratios:
        return "", []
    rows = [
        [device, method, len(xs), f"{statistics.median(xs):.3g}", f"{min(xs):.3g}-{max(xs):.3g}"]
        for (device, method), xs in sorted(ratios.items())
    ]
    headers = ["device (measured)", "predicted by", "records", "median", "range"]
    text = "Measured step time over the step time predicted for it in the same run:"
    return f"{text}\n\n{markdown_table(headers, rows)}", []


STUDY = Study(
    "roofline",
    workloads=workloads,
    sections=(predicted_vs_measured,),
    question="How far is each measured step from its predicted time?",
    answer=roofline_answer,
)
