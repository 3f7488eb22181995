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

from experiments import analysis
from experiments.labels import device_label, model_label
from experiments.studies._common import (
    batch_size,
    capacity_lines,
    field,
    fmt_images,
    fmt_status,
    fmt_step,
    image,
    in_study,
    log_axes,
    pyplot,
    save,
    section,
    throughput_curve,
)
from experiments.studies.base import SMOKE_CATSDOGS, Context, Record, Study
from experiments.studies.targets import fits_chip, seed_000_compiled
from experiments.tables import binary_bytes as gib
from experiments.tables import markdown_table
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
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in in_study(records, "batch"):
        w = r["workload"]
        groups[(model_label(r), w.get("dataset"), w.get("precision"), device_label(r))].append(r)
    return {k: sorted(v, key=batch_size) for k, v in groups.items()}


def _memory(record: Record) -> int | None:
    return field(record, "memory", "total_bytes") if record["status"] == "ok" else None


def _fits(fits: bool) -> str:
    return "fits" if fits else "does not fit"


def _seed_000_rows(groups: dict[tuple, list[Record]], records: list[Record]) -> list[list[str]]:
    """Seed 000's observations next to what compiled memory predicts for them: the seed
    device's own compiler where a compile-only record for it exists, else each device's
    here (XLA:CPU needs more memory than XLA:GPU for the same step)."""
    rows = []
    answered = set()
    for reference, target, batch, ran, r in seed_000_compiled(records):
        answered.add((reference, batch))
        rows.append(
            [
                reference,
                batch,
                "trained" if ran else "out of memory",
                f"{model_label(r)} f32 compiled for {target}, not run",
                gib(r["memory"]["total_bytes"]),
                _fits(fits_chip(r)),
                "yes" if fits_chip(r) == ran else "no",
            ]
        )
    for (model, _, precision, device), rs in sorted(groups.items()):
        if rs[0]["workload"]["model"] != analysis.SEED_000_MODEL:
            continue  # the seed's batch sizes say nothing about another network
        by_batch = {batch_size(r): r for r in rs}
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
                predicted, agrees = _fits(fits), ("yes" if fits == ran else "no")
            rows.append(
                [
                    reference,
                    batch,
                    "trained" if ran else "out of memory",
                    f"{model} {precision} on {device}",
                    gib(total),
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
            peak = gib(field(r, "memory", "peak_bytes_in_use"))
            row = [device, f"{model} {precision}", batch_size(r), fmt_status(r), fmt_images(r)]
            rows.append([*row, fmt_step(r), gib(total), peak, *marks])
    headers = ["device", "model", "batch", "status", "images/s", "s/step", "compiled memory"]
    table = markdown_table([*headers, "allocator peak", *references], rows)
    seed_rows = _seed_000_rows(groups, records)
    seed = ""
    if seed_rows:
        headers = ["seed 000 device", "batch", "seed saw", "our record", "compiled memory"]
        seed = "What seed 000 saw, and what our compiled memory predicts for it:\n\n" + (
            markdown_table([*headers, "predicts", "agrees"], seed_rows)
        )
    fig, (speed_ax, memory_ax) = pyplot().subplots(1, 2, figsize=(11, 4.5))
    for (model, _, precision, device), rs in sorted(groups.items()):
        line = throughput_curve(speed_ax, rs, f"{model} {precision} on {device}")
        sized = [(batch_size(r), _memory(r) / analysis.GIB) for r in rs if _memory(r)]
        if sized:
            memory_ax.plot(*zip(*sized, strict=True), marker="o", color=line.get_color())
    by_capacity: dict[float, list[str]] = defaultdict(list)
    for name, capacity in analysis.REFERENCE_MEMORY_BYTES.items():
        by_capacity[capacity / analysis.GIB].append(name)
    capacity_lines(memory_ax, {c: ", ".join(n) for c, n in by_capacity.items()}, fontsize=7)
    batches = [batch_size(r) for rs in groups.values() for r in rs]
    title = "Throughput (x = out of memory)"
    log_axes(speed_ax, "batch size", "images / s", title, batches)
    title = "XLA compiled memory per device vs reference capacities"
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
        + " Fits-on compares compiled memory with each reference device's memory "
        "capacity (datasheet figures); compiled memory is a lower bound of what a "
        "framework needs, so 'no' is firm and 'yes' is optimistic."
    )
    parts = (intro, table, seed, image("batch", path))
    return section("Study: batch size and memory", *parts), [path]


STUDY = Study("batch", workloads=workloads, sections=(batch_study,))
