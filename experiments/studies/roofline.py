"""How far can a predicted step time be trusted?

Every accelerator figure the study gives without a real run is a prediction of the
per-kernel model (docs/predictions.md). This study measures its error two ways: against
published training measurements of the same programs (the report's first table), and
against the steps this study times on the devices at hand, each record carrying its own
per-kernel prediction and the whole-program roofline bound (the second).

The bench's cells (its models and batches) in the configurations the bench finds
fastest: the platform's formulation, in both loops, f32 (and bf16 on accelerators,
where it is the fast precision; on a CPU bf16 runs at half the f32 rate). Every
record carries its measured step time and, from the same run, the kernels of the program
it timed with their per-kernel `prediction` (at the chip's datasheet rates, or on a CPU
this run's measured matmul ceiling and bandwidth; the report prices a CPU step at the
best ceiling its machine measured) and the roofline `prediction_bound`;
the report divides one by the other per cell. Its own study, so the bench's records stay
as they were measured. On a GPU this one command gives the measured column
(docs/predictions.md).

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

from experiments import predictions
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
    not_compiled,
    prediction,
    prediction_method,
)
from experiments.tables import markdown_table, seconds
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
    """predicted / measured step time (|ratio - 1| is the prediction's error)."""
    step = (predicted or {}).get("step_time_s")
    if not step or record["status"] != "ok":
        return None
    return step / median_step(record)


def _versus(record: Record, predicted: dict[str, Any] | None) -> list[str]:
    """[predicted s/step, predicted / measured] for one prediction of `record`."""
    ratio = _ratio(record, predicted)
    step = seconds((predicted or {}).get("step_time_s"))
    return [step, "-" if ratio is None else f"{ratio:.2f}"]


def _has_prediction(record: Record) -> bool:
    return record["status"] == "ok" and bool(prediction(record).get("step_time_s"))


def predicted_measured(records: list[Record]) -> list[Record]:
    """The latest ok measured train record per device and cell that carries a prediction."""
    return latest_by(
        [
            r
            for r in not_compiled(records)
            if r["workload"].get("kind", "train") == "train" and _has_prediction(r)
        ],
        lambda r: (
            device_label(r),
            study_of(r),
            model_label(r),
            *same_step(r),
            r["workload"]["strategy"],
        ),
    )


INTRO = (
    "Every measured step that carries a prediction, beside it: the step time measured on "
    "the device (median of the record's timed steps, p10-p90), the per-kernel model's "
    "prediction of the same compiled program (docs/predictions.md; a record made before "
    "records carried kernels has only the roofline, labelled *roofline bound*; a CPU "
    "step is priced at the best matmul ceiling any run on its machine measured, since a "
    "ceiling measured at a busy moment is low), and, beside them, "
    f"{predictions.BOUND_WORDS}. "
    "`predicted / measured` is each one's error: below 1 it predicted too fast; "
    "`bound / measured` above 1 is a measured step that beat the bound."
)
HEADERS = [
    "study",
    "model",
    "batch",
    "precision",
    "formulation, loop",
    "measured s/step [p10-p90]",
    "predicted s/step",
    "predicted / measured",
    "predicted by",
    "roofline bound s/step",
    "bound / measured",
]


def _bound(record: Record) -> dict[str, Any] | None:
    """The record's whole-program roofline: its own field, or on a record made before
    records carried kernels, the prediction it was written with."""
    if record.get("prediction_bound"):
        return record["prediction_bound"]
    written = record.get("prediction") or {}
    return written if written.get("method", "roofline") == "roofline" and written else None


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
    by_device: dict[str, list[Record]] = defaultdict(list)
    for r in rs:
        by_device[device_label(r)].append(r)
    parts = [title, INTRO]
    fitted = predictions.fitted_records()
    for device in sorted(by_device):
        group = sorted(
            by_device[device],
            key=lambda r: (str(study_of(r)), model_label(r), batch_size(r), precision_of(r)),
        )
        rows = []
        for r in group:
            predicted = prediction(r)
            how = f"{field(r, 'formulation', 'name') or '-'}, {r.get('loop') or '-'}"
            cell = [study_of(r) or "-", model_label(r), batch_size(r), precision_of(r), how]
            measured = [fmt_step(r), *_versus(r, predicted), prediction_method(r)]
            rows.append([*cell, *measured, *_versus(r, _bound(r))])
        summary = predictions.error_summary(
            [
                x
                for r in group
                if prediction_method(r) == "per-kernel"
                and (x := _ratio(r, prediction(r))) is not None
            ]
        )
        kernel_rows = [r for r in group if prediction_method(r) == "per-kernel"]
        seen = sum(r.get("run_id") in fitted for r in kernel_rows)
        spread = (
            f"The per-kernel model over the {summary['n']} steps in the table above "
            f"predicted by it (the latest record of each cell, measured on {device}; "
            f"{seen} of them among the steps the constants were fitted to, so this is not "
            f"the error band): median error {summary['median']:.0%}, worst "
            f"{summary['worst']:.0%}."
            if summary
            else f"No record of this device carries kernels yet: {predictions.BOUND_METHOD}s only."
        )
        bounds = [x for r in group if (x := _ratio(r, _bound(r))) is not None]
        if beaten := sum(x > 1 for x in bounds):
            spread += (
                f" The {predictions.BOUND_METHOD}: {beaten} of these {len(bounds)} measured "
                f"steps beat it (`bound / measured` up to {max(bounds):.2f}), where its "
                "assumptions do not hold."
            )
        parts += [f"### {device}", markdown_table(HEADERS, rows), spread]
    return "\n\n".join(parts), []


PUBLISHED_INTRO = (
    "Every published training measurement in `experiments/published_references.json` "
    "(docs/references.md) beside the per-kernel model's prediction for the same chip, "
    "model, precision and batch per chip, from a compile-only record of that program. "
    "*Fitted* rows set the constants (their error band is leave-one-out, in the line "
    "above the table); *held out* rows measure more than the step and are shown, never "
    "fitted. A published figure is a whole run's images over its wall time, so each of "
    "its steps also paid for the loop around it (input pipeline, dispatch, evaluation): "
    "where the platform's fit kept a cost per step for that (the constants table below), "
    "the predicted figure compared with the published one includes it, and the step "
    "alone is shown beside it."
)


def _program_precision(record: Record | None) -> str:
    """The precision of the program a reference is predicted from, and what its matmuls
    run as on the chip where that differs ("f32 (matmuls as tf32)"): a published fp16
    figure is predicted from a bf16 program, never from fp16."""
    if record is None:
        return "-"
    from jaxcnn import devices as devices_lib

    precision = record["workload"]["precision"]
    name = {"f32": "float32", "bf16": "bfloat16"}.get(precision, precision)
    runs = devices_lib.matmul_precision(predictions.device_of(record), name)
    same = runs is None or runs == {"f32": "fp32"}.get(precision, precision)
    return precision if same else f"{precision} (matmuls as {runs})"


def versus_published(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Per published reference: predicted and published images/s per chip."""
    from experiments import references

    rows = []
    for row in predictions.versus_published(records, references.load()):
        ref = row["reference"]
        published = ref.images_per_s_per_chip
        rows.append(
            [
                f"[{ref.id}]({ref.source_url})" if ref.source_url.startswith("http") else ref.id,
                ref.chip,
                ref.model,
                ref.precision,
                _program_precision(row["record"]),
                ref.batch_per_chip or "-",
                "-" if published is None else f"{published:,.1f}",
                "-" if row["predicted"] is None else f"{row['predicted']:,.1f}",
                "-" if row["predicted"] is None else f"{row['predicted_step']:,.1f}",
                "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
                "-"
                if row["predicted"] is None
                else f"held out: {ref.held_out}"
                if ref.held_out
                else "fitted",
                row.get("why") or "",
            ]
        )
    headers = [
        "reference",
        "chip",
        "model",
        "precision (published)",
        "precision (predicted program)",
        "batch per chip",
        "published images/s per chip",
        "predicted images/s per chip",
        "predicted, the step alone",
        "predicted / published",
        "use",
        "not predicted because",
    ]
    title = "## Predictions vs published measurements"
    line = predictions.error_line()
    return "\n\n".join([title, PUBLISHED_INTRO, line, markdown_table(headers, rows)]), []


CONSTANT_HEADERS = [
    "platform",
    "compute efficiency",
    "memory efficiency",
    "cost per kernel",
    "loop-written convolutions",
    "published runs' loop",
    "basis",
    "fitted on",
    "leave one chip out: median, worst (large / small programs)",
    "leave one program out: median, worst (large / small programs)",
]


def _split_cell(error: dict[str, Any], split: str, noun: str) -> str:
    """One split's error per regime, "median, worst (n `noun`)" each, "-" for none
    observed."""
    regimes = (((error.get("splits") or {}).get(split)) or {}).get("regimes") or {}
    cells = []
    for name in ("large", "small"):
        band = regimes.get(name)
        cells.append(
            f"{band['median']:.0%}, {band['worst']:.0%} ({band['observations']} {noun})"
            if band
            else "-"
        )
    untested = (((error.get("splits") or {}).get(split)) or {}).get("untested_groups") or []
    held = f"; not testable (too few left to refit): {', '.join(untested)}" if untested else ""
    return " / ".join(cells) + held


def _fraction(family: dict[str, Any], name: str) -> str:
    """A fitted fraction, marked where it sits at an end of the range it was fitted in."""
    value = family[name]
    ends = (family.get("bounds") or {}).get(name) or ()
    at_end = any(abs(value / end - 1) < 1e-3 for end in ends)
    return f"{value:.3f}" + (" (at its bound)" if at_end else "")


def _memory(family: dict[str, Any]) -> str:
    """A family's memory efficiency, with the ones of the kernels it prices apart where it
    has them (a CPU: a kernel of at most kernels.CACHE_BYTES per execution runs from
    cache; a library call's bytes and a 16-bit float fusion's move at their own rates)."""
    from jaxcnn import kernels  # JAX: only when a report is written, never to list studies

    limit = kernels.CACHE_BYTES // 1024
    apart = [
        f"{label}: {_fraction(family, name)}"
        for name, label in (
            ("cache_memory_efficiency", f"at most {limit} KiB"),
            ("library_memory_efficiency", "library calls"),
            ("half_float_memory_efficiency", "16-bit float fusions"),
        )
        if family.get(name) is not None
    ]
    text = _fraction(family, "memory_efficiency")
    return f"{text} ({'; '.join(apart)})" if apart else text


def _fixed_costs(family: dict[str, Any]) -> str:
    """A family's fixed cost per kernel, with its per-kind ones where it has them (a CPU:
    a copy's, a library call's and a library convolution's apart from a generated loop's)."""
    kinds = [
        f"{label} {seconds(family[name])}"
        for name, label in (
            ("copy_overhead_s", "copy"),
            ("library_overhead_s", "library call"),
            ("conv_overhead_s", "library convolution"),
        )
        if family.get(name) is not None
    ]
    text = seconds(family["kernel_overhead_s"])
    return f"{text} ({', '.join(kinds)})" if kinds else text


def constants_section(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The model's constants as the committed file has them (fitted by
    experiments/fit_predictions.py), each platform's basis and error band."""
    table = predictions.constants_table()
    rows = []
    for platform, f in sorted(table["families"].items()):
        error = f.get("error") or {}
        held = ", ".join(f"{name}: {why['why']}" for name, why in (f.get("fixed") or {}).items())
        loops = f.get("elemental_conv_efficiency")
        units = predictions.unit_words(f)
        rows.append(
            [
                platform,
                _fraction(f, "compute_efficiency"),
                _memory(f),
                _fixed_costs(f),
                "-" if loops is None else f"{loops:.3f}",
                predictions.loop_words(f) or "-",
                f["basis"]
                + (f" (held: {held})" if held else "")
                + (f"; vector units' own efficiency: {units}" if units else ""),
                len(f.get("observations") or ()),
                _split_cell(error, "chip", predictions.observed_as(f)),
                _split_cell(error, "program", predictions.observed_as(f)),
            ]
        )
    text = (
        f"The per-kernel model's constants (`jaxcnn/prediction_constants.json`, version "
        f"{table['version']}; `python -m experiments.fit_predictions results/ --write` "
        "fits them): the fraction of the peak FLOP/s its dot and convolution kernels "
        "reach, the fraction of memory bandwidth its kernels reach (on the CPU, with the "
        "fractions a kernel small enough to run from one core's L2 reaches, a library "
        "call's bytes and a 16-bit float fusion's bytes move at, in brackets), a "
        "fixed cost per launched kernel (on the CPU, a generated loop's, with a copy's, a "
        "library call's and a library convolution's beside it in brackets), and on the CPU "
        "the fraction of peak reached by "
        "the convolutions XLA:CPU writes as plain loops (`-`: the platform runs none), "
        "and where the platform has published references, the per-step cost of the loop around a "
        "published run's step, added to those predictions alone and kept only where it "
        "lowers the leave-one-out error. A fraction is of "
        "the datasheet's rate on an accelerator, and on a CPU of what was measured there "
        "(the best f32 matmul ceiling any run on that machine measured, the run's own "
        "memory bandwidth), which the step's larger GEMMs may pass: above 1 there. "
        "`(at its bound)`: the fit pressed against "
        "the end of the range it searched (1 against a datasheet): the data would take "
        "it further. The errors are out of sample, on the step as this report shows it "
        "(the kernels and the host's side, without a published run's loop): *leave one "
        "chip out* predicts each chip's observations with constants refitted from "
        "scratch without any of them (the band of a chip the data does not hold), *leave "
        "one program out* each program's (the band of a chip it holds), each for large "
        "programs (1 GFLOP or more per image, ResNet-50) and small ones (the seeds' "
        "models) apart: `-`, none observed, and a prediction of that kind is shown "
        "unvalidated."
    )
    return "\n\n".join(
        ["## The model's constants", text, markdown_table(CONSTANT_HEADERS, rows)]
    ), []


HELD_OUT_HEADERS = [
    "platform",
    "model",
    "split",
    "steps",
    "predicted / measured, held out: median [range]",
    "median within 1.3x",
]


def _model_of(label: str) -> str:
    """The model (with an MLP's width) an observation's label names ("<chip>: <model>,
    batch ...": experiments/fit_predictions.py writes both kinds so)."""
    return label.split(": ", 1)[-1].split(",")[0].split(" (")[0]


def held_out_section(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Each model's fitted steps as its platform's headline split predicted them, by
    constants fitted without the step's group: per model, and the MLP per width."""
    table = predictions.constants_table()
    rows = []
    for platform, f in sorted(table["families"].items()):
        split = (f.get("error") or {}).get("split")
        groups: dict[tuple[str, int], list[float]] = defaultdict(list)
        for row in f.get("observations") or ():
            step = (row.get(predictions.HELD_OUT_STEPS) or {}).get(split)
            if step is None:
                continue
            model, _, width = _model_of(row["label"]).partition(" n=")
            groups[(model, -1)].append(step / row["measured_s"])
            if width:
                groups[(model, int(width))].append(step / row["measured_s"])
        for (model, width), ratios in sorted(groups.items()):
            middle = statistics.median(ratios)
            rows.append(
                [
                    platform,
                    model if width < 0 else f"{model}, width {width}",
                    predictions.SPLIT_WORDS.get(split, split),
                    len(ratios),
                    f"{middle:.2f} [{min(ratios):.2f}-{max(ratios):.2f}]",
                    "yes" if 1 / 1.3 <= middle <= 1.3 else "no",
                ]
            )
    text = (
        "Each fitted step predicted by constants fitted from scratch without its group (its "
        "platform's headline split: a CPU's program, an accelerator's chip), over the "
        "step measured or published: per model, and the MLP per width (every width the "
        "crossover study runs), over every batch, precision, formulation and loop measured. "
        "A step whose group could not be held out (too few others left to fit) is not here."
    )
    return "\n\n".join(["## Held out, per model", text, markdown_table(HELD_OUT_HEADERS, rows)]), []


def roofline_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The per-kernel model's error: on published references and on measured steps."""
    from experiments import references

    lines = [predictions.error_line()]
    published = [
        row for row in predictions.versus_published(records, references.load()) if row["ratio"]
    ]
    for use, rows in (
        (
            "the constants were fitted to (in-sample: how well the fit matches them, not "
            "the error band above)",
            [r for r in published if not r["reference"].held_out],
        ),
        (
            "held out of the fit (they time more than the step)",
            [r for r in published if r["reference"].held_out],
        ),
    ):
        summary = predictions.error_summary([r["ratio"] for r in rows])
        if summary:
            worst = max(rows, key=lambda r: abs(r["ratio"] - 1))["reference"]
            lines.append(
                f"Over the {summary['n']} {predictions.PUBLISHED_NOUN} {use}: predicted / "
                f"published median error {summary['median']:.0%}, worst "
                f"{summary['worst']:.0%} ({worst.id}, {worst.chip} {worst.model})."
            )
    for platform, family in sorted(predictions.constants_table()["families"].items()):
        if (family.get("loop_choice") or {}).get("kept"):
            lines.append(
                f"On {platform.upper()}s, a published figure is compared with the predicted "
                "step plus the per-step cost of the loop around a published run's step, "
                f"{predictions.loop_words(family)}; the predicted steps of this report "
                "leave it out (docs/predictions.md)."
            )
    # One figure per claim: how far a prediction can be trusted is the out-of-sample
    # error, above; steps the constants were fitted to add no second figure here (the
    # details page gives theirs, its population named).
    fitted = predictions.fitted_records()
    unseen: dict[str, list[float]] = defaultdict(list)
    for row in predictions.measured_vs_predicted(records):
        if row["record"].get("run_id") not in fitted:
            unseen[device_label(row["record"])].append(row["ratio"])
    for device, ratios in sorted(unseen.items()):
        summary = predictions.error_summary(ratios)
        lines.append(
            f"Over the {summary['n']} {predictions.MEASURED_NOUN} on {device} that carry "
            "their kernels and that the constants were not fitted to (out of sample): "
            f"predicted / measured median error {summary['median']:.0%}, worst "
            f"{summary['worst']:.0%}."
        )
    return "\n\n".join(lines), []


def roofline_headline(records: list[Record]) -> str:
    """The README's line: the error a predicted step for a chip not at hand is shown
    with, per platform and regime, by the split that claim needs (leave one chip out)."""
    table = predictions.constants_table()
    parts = []
    for platform in ("gpu", "tpu"):
        error = (table["families"].get(platform) or {}).get("error")
        if not error:
            continue
        chip = (error.get("splits") or {}).get("chip") or {}
        large = (chip.get("regimes") or {}).get("large")
        untested = chip.get("untested_groups") or []
        if large:
            part = (
                f"{platform.upper()}s median {large['median']:.0%}, worst "
                f"{large['worst']:.0%} over {large['observations']} published ResNet-50 rows"
            )
        else:
            part = f"{platform.upper()}s: no chip could be held out"
        if untested:
            part += f" ({', '.join(untested)} not testable: too few rows left to refit)"
        parts.append(part)
    if not parts:
        return "Predictions (per-kernel model): no published reference is compiled yet."
    cpu = (table["families"].get("cpu") or {}).get("error") or {}
    program = (((cpu.get("splits") or {}).get("program") or {}).get("regimes") or {}).get("small")
    on_cpu = (
        f"; this CPU's steps, leave one program out: median {program['median']:.0%} over "
        f"{program['observations']}"
        if program
        else ""
    )
    return (
        "Predictions (per-kernel model, for chips not at hand), their error on the step "
        "as shown, each chip's rows predicted by constants refitted without it (leave one "
        f"chip out): {'; '.join(parts)}. Small models (the seeds'): no published "
        "measurement of such a step on a GPU or TPU, so their predictions are shown "
        f"unvalidated{on_cpu}. Every reference: "
        "[results/report/roofline.md](results/report/roofline.md)"
    )


STUDY = Study(
    "roofline",
    workloads=workloads,
    sections=(constants_section, held_out_section, versus_published, predicted_vs_measured),
    question="How far can a predicted step time be trusted?",
    answer=roofline_answer,
    headline=roofline_headline,
)
