"""How do batch size and memory interact?

Seed 000: the cats-vs-dogs CNN (21,463,713 params, 256x256x3) at batch 16 vs 128,
out of memory at 32 on a 2 GB MX150. `catsdogs_cnn` on synthetic 256x256x3 images
(no cats-vs-dogs data here) at batch 8, 16, ..., 512, timing only: images/s and
XLA's compiled memory per batch; the first OOM is recorded and the larger batches
get `skipped` records (one oom group). The report turns the memory figures into
which batches fit on reference devices.

Command: python -m experiments.run --study=batch --device=gpu
Sizes: full on accelerators. CPU: batch 8..64 and 3 timed steps (a step is ~31
GFLOP per image, ~0.45 s per image here, ~29 s at batch 64; XLA's compiled memory
is ~2.3 GB at batch 16 and grows with the batch, so 512 would need more host memory
than this machine shares: a CPU has no OOM to record, the Linux OOM killer would
end the run instead). Smoke: catsdogs shrunk to 4 channels, 8 dense units, 96x96
inputs, batch 2 and 4.
Expected: CPU ~6 min; smoke ~5 s; GPU < 2 min (a guess).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments import analysis, predictions
from experiments.labels import device_label, model_label
from experiments.studies._common import (
    batch_size,
    cpu_figure,
    field,
    fmt_images,
    fmt_status,
    fmt_step,
    image,
    in_study,
    is_cpu,
    log_axes,
    measured_on,
    not_measured,
    precision_of,
    pyplot,
    run_series,
    save,
    section,
    throughput_curve,
)
from experiments.studies.base import SMOKE_CATSDOGS, Context, Record, Study, Summary
from experiments.studies.targets import (
    SEED_000_TARGETS,
    compiled,
    fits_chip,
    prediction,
    prediction_method,
    rests_on_the_rule,
    target_name,
    usable_memory_rule,
)
from experiments.tables import binary_bytes as gib
from experiments.tables import markdown_table, seconds
from experiments.workload import Workload

BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512)
BATCH_SIZES_CPU = (8, 16, 32, 64)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    sizes, overrides, timing = BATCH_SIZES, {}, 20
    if ctx.cpu:
        sizes, timing = BATCH_SIZES_CPU, 3
    if ctx.smoke:
        sizes, overrides, timing = (2, 4), SMOKE_CATSDOGS, 3
    return [
        Workload(
            model="catsdogs_cnn",
            model_overrides=overrides,
            dataset="synthetic",
            batch_size=b,
            epochs=0,
            timing_steps=timing,
            study="batch",
            num_devices=1,
            oom_group="batch:catsdogs_cnn",
        )
        for b in sizes
    ]


def _batch_groups(records: list[Record]) -> dict[tuple, list[Record]]:
    """The batch study's records by plotted line: one model, dataset, precision and
    device, and what else one line's points must share (`run_series`: host, placement,
    formulation, loop), so no line joins two unrelated runs."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in in_study(records, "batch"):
        w = r["workload"]
        key = (model_label(r), w.get("dataset"), w.get("precision"), device_label(r))
        groups[(*key, tuple(map(str, run_series(r))))].append(r)
    return {k: sorted(v, key=batch_size) for k, v in groups.items()}


def _memory(record: Record) -> int | None:
    return field(record, "memory", "total_bytes") if record["status"] == "ok" else None


def _seed_000_reference(target: str, batch: int) -> Any:
    """Seed 000's own measurement of its model on that target's chip at that batch, as
    the published references hold it (experiments/published_references.json), or None."""
    from experiments import references
    from jaxcnn import targets

    chip = targets.TARGETS[target].chip
    for ref in references.load():
        if ref.source_url == "seed 000" and ref.chip == chip and ref.batch_per_chip == batch:
            return ref
    return None


def _seed_000_step(target: str, batch: int) -> float | None:
    """Seed 000's own s/step of its model on that target's chip at that batch, or None."""
    ref = _seed_000_reference(target, batch)
    if ref is None:
        return None
    if ref.step_time_s:
        return ref.step_time_s
    return batch / ref.images_per_s_per_chip if ref.images_per_s_per_chip else None


SEED_HEADERS = [
    "seed 000 device",
    "batch",
    "seed saw",
    "compiled for (the target's own compiler)",
    "memory per chip (compiled)",
    "predicts",
    "agrees",
    "seed's s/step",
    "s/step (predicted)",
]


def _seed_000_rows(records: list[Record]) -> list[list[str]]:
    """Seed 000's observations beside what the seed device's own compiler says (a
    compile-only record of the seed's model for that GPU): at the seed's batch, or
    else the nearest larger batch that fits. Memory compiled by XLA:CPU never judges
    a GPU: it differs from XLA:GPU's for the same step."""
    by_target: dict[str, dict[int, Record]] = defaultdict(dict)
    for r in compiled(records):
        w = r["workload"]
        if w["model"] == analysis.SEED_000_MODEL and not w.get("model_overrides"):
            if precision_of(r) == "f32" and r["status"] in ("ok", "oom"):
                by_target[target_name(r)][batch_size(r)] = r
    rows = []
    for reference, batch, ran in analysis.SEED_000_OBSERVED:
        target = SEED_000_TARGETS[reference]
        found = by_target.get(target, {})
        r, note = found.get(batch), ""
        if r is None:  # a larger batch that fits says this one fits too (on a GPU)
            larger = sorted(b for b, x in found.items() if b > batch and fits_chip(x))
            r = found[larger[0]] if larger else None
            note = f" (batch {batch_size(r)}: {batch} not compiled)" if r else ""
        seed_step = _seed_000_step(target, batch)
        row = [reference, batch, "trained" if ran else "out of memory"]
        if r is None:
            rows.append([*row, f"{target}: not compiled", "-", "-", "-", seconds(seed_step), "-"])
            continue
        step = prediction(r).get("step_time_s") if fits_chip(r) and not note else None
        rows.append(
            [
                *row,
                target + note,
                gib(r["memory"]["total_bytes"]),
                "fits" if fits_chip(r) else "does not fit",
                "yes" if fits_chip(r) == ran else "no",
                seconds(seed_step),
                f"{seconds(step)} ({prediction_method(r)})" if step else "-",
            ]
        )
    return rows


def batch_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 000's observations against the seed GPUs' own compilers, and what the
    devices at hand measured."""
    rows = _seed_000_rows(records)
    measured = [r for rs in _batch_groups(records).values() for r in rs if r["status"] == "ok"]
    parts = []
    if measured:
        fastest = max(measured, key=lambda r: r["images_per_s"])
        parts.append(
            f"Measured on {device_label(fastest)}: {model_label(fastest)} trains at "
            f"{fmt_images(fastest)} images/s at best (batch {batch_size(fastest)}), "
            f"batches {', '.join(str(batch_size(r)) for r in sorted(measured, key=batch_size))}; "
            "whether a batch fits a GPU is the GPU's compiler's answer, below, never "
            "XLA:CPU's memory."
        )
    parts.append(
        "Seed 000 trained `catsdogs_cnn` at batch 16 and ran out of memory at 32 on a 2 GB "
        "MX150, and trained it at 128 on a T4. The train step compiled for those GPUs by "
        "XLA:GPU (never run; the xla formulation's step, as the step loop runs it); "
        f"{usable_memory_rule()}:"
    )
    parts.append(markdown_table(SEED_HEADERS, rows))
    if turning := rests_on_the_rule(records, state_rule=False):
        parts.append(turning)
    return "\n\n".join(parts), []


def batch_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 000: throughput and compiled memory per batch size, OOM recorded."""
    groups = _batch_groups(records)
    if not groups:
        return "", []
    rows = []
    for (model, _, precision, device, _series), rs in sorted(groups.items()):
        for r in rs:
            peak = gib(field(r, "memory", "peak_bytes_in_use"))
            row = [device, f"{model} {precision}", batch_size(r), fmt_status(r), fmt_images(r)]
            rows.append([*row, fmt_step(r), gib(_memory(r)), peak])
    headers = ["device", "model", "batch", "status", "images/s", "s/step", "compiled memory"]
    table = markdown_table([*headers, "allocator peak"], rows)
    fig, (speed_ax, memory_ax) = pyplot().subplots(1, 2, figsize=(11, 4.5))
    for (model, _, precision, device, _series), rs in sorted(groups.items()):
        line = throughput_curve(speed_ax, rs, f"{model} {precision} on {device}")
        sized = [(batch_size(r), _memory(r) / analysis.GIB) for r in rs if _memory(r)]
        if sized:
            memory_ax.plot(*zip(*sized, strict=True), marker="o", color=line.get_color())
    batches = [batch_size(r) for rs in groups.values() for r in rs]
    title = "Throughput (x = out of memory)"
    log_axes(speed_ax, "batch size", "images / s", title, batches)
    title = "Compiled memory of the step on the device that ran it"
    log_axes(memory_ax, "batch size", "GiB", title, batches, legend=None)
    path = save(fig, out / "study_batch.png")
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
        + " Compiled memory is the device's own compiler's (XLA:CPU here needs more than "
        "XLA:GPU for the same step): whether a batch fits a GPU or TPU is that chip's "
        "compiler's answer, on the [targets](targets.md) pages."
    )
    parts = (intro, table, image("batch", path))
    return section("Study: batch size and memory", *parts), [path]


SEED_000_COMMAND = "python -m experiments.run --study=targets --target={} --model=catsdogs_cnn"


def _compiled_seed_rows(records: list[Record]) -> list[list[str]]:
    return [row for row in _seed_000_rows(records) if not row[3].endswith("not compiled")]


def _oom_summary(records: list[Record]) -> Summary:
    """Seed 000's OOM: what the seed GPUs' own compilers say of its batches."""
    question = "Where does the cats-vs-dogs CNN run out of GPU memory?"
    rows = _compiled_seed_rows(records)
    if not rows:
        command = SEED_000_COMMAND.format(SEED_000_TARGETS["MX150 2 GB"])
        return Summary("000", question, f"no compile yet: `{command}`", "-", "batch.md")
    said = "; ".join(f"{row[0]} batch {row[1]}: {row[5]} ({row[4]})" for row in rows)
    agree = sum(row[6] == "yes" for row in rows)
    answer = f"{said}: {agree} of {len(rows)} as seed 000 saw"
    targets = ", ".join(sorted({row[3].split(" ")[0] for row in rows}))
    source = f"compiled for {targets} by XLA:GPU (its memory analysis of the step, never run)"
    return Summary("000", question, answer, source, "batch.md")


def _speed_summary(records: list[Record]) -> Summary:
    """Seed 000's GPUs against this CPU for its model: each GPU's predicted images/s at
    the seed's batch over the CPU at its best (its fastest batch, each batch's one
    figure), with the seed's own figures and why they differ."""
    question = "How much faster are the MX150 and T4 than the CPU for that CNN?"
    cpu = [cpu_figure(records, r) for r in in_study(records, "batch") if r["status"] == "ok"]
    cpu = [r for r in cpu if is_cpu(r) and not r["workload"].get("model_overrides")]
    if not cpu:
        return Summary("000", question, not_measured("batch", "cpu"), "-", "batch.md")
    best = max(cpu, key=lambda r: r["images_per_s"])
    parts, blocks, seed = [], [], []
    for reference, batch, ran in analysis.SEED_000_OBSERVED:
        target = SEED_000_TARGETS[reference]
        r = _seed_000_compile(records, target, batch) if ran else None
        step = prediction(r).get("step_time_s") if r is not None and fits_chip(r) else None
        if not step:
            continue
        images = batch / step
        parts.append(
            f"{target} {images:,.0f} images/s at batch {batch} "
            f"({images / best['images_per_s']:,.0f}x)"
        )
        blocks.append((target, prediction(r), r["device"]["platform"]))
        ref = _seed_000_reference(target, batch)
        own = _seed_000_step(target, batch)
        if own and ref is not None:
            than = "faster" if own < step else "slower"
            seed.append(
                f"{seconds(own)}/step on the {ref.chip}, {than} than the {seconds(step)} predicted"
            )
            held = ref.held_out
    if not parts:
        command = SEED_000_COMMAND.format(SEED_000_TARGETS["T4 16 GB"])
        return Summary("000", question, f"no compile yet: `{command}`", "-", "batch.md")
    answer = (
        f"Predicted {', '.join(parts)} over this CPU at its best "
        f"({fmt_images(best)} images/s at batch {batch_size(best)})"
    )
    if seed:
        answer += (
            f"; seed 000's own figures ({'; '.join(seed)}): {held} ([roofline](report/roofline.md))"
        )
    source = "; ".join(f"{t} {predictions.band_label(b, platform)}" for t, b, platform in blocks)
    return Summary("000", question, answer, f"{source}; CPU {measured_on([best])}", "batch.md")


def _seed_000_compile(records: list[Record], target: str, batch: int) -> Record | None:
    """The compile-only record of seed 000's model, f32, for `target` at `batch`."""
    for r in compiled(records):
        w = r["workload"]
        if target_name(r) == target and batch_size(r) == batch and precision_of(r) == "f32":
            if w["model"] == analysis.SEED_000_MODEL and not w.get("model_overrides"):
                return r
    return None


def batch_summary(records: list[Record]) -> list[Summary]:
    """Seed 000's two questions of its cats-vs-dogs CNN: where it runs out of memory,
    and how much faster its GPUs are than the CPU."""
    return [_oom_summary(records), _speed_summary(records)]


STUDY = Study(
    "batch",
    workloads=workloads,
    sections=(batch_study,),
    question="How do batch size and memory interact; where is the OOM? (seed 000)",
    answer=batch_answer,
    summary=batch_summary,
)
