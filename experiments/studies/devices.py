"""How much faster is the accelerator than the CPU for the MNIST CNN?

Seed 001: 0.35-1.05 s/batch on a CPU vs 0.018 s/batch on a K80; seed 003: 5 epochs
on a CPU vs a T4. `mnist_cnn` and `lenet5_keras` on MNIST, batch 128, 5 epochs, on
one device: s/step, s/epoch, test accuracy; the report divides each accelerator's
step time by the CPU record's.

Command: python -m experiments.run --study=devices --device=gpu --data-dir=DIR
Sizes: full everywhere (the CPU runs it in minutes).
Expected: CPU ~5 min (mnist_cnn ~45 s/epoch, lenet5_keras ~7 s/epoch);
smoke ~5 s; GPU/TPU ~1 min (a guess).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from experiments import predictions
from experiments.labels import device_label
from experiments.studies import bench
from experiments.studies._common import (
    cpu_pairs,
    fmt_images,
    fmt_status,
    fmt_step,
    fmt_test_acc,
    image,
    in_study,
    median_step,
    no_accelerator,
    only_ok,
    pyplot,
    same_step,
    save,
    section,
    workload_key,
    workload_label,
)
from experiments.studies.base import SMOKE_TRAIN, Context, Record, Study, dataset_for
from experiments.studies.targets import (
    compiled,
    fits_chip,
    prediction,
    prediction_method,
    target_field,
    target_name,
)
from experiments.tables import columns_table, markdown_table, seconds
from experiments.workload import Workload


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    common = {"dataset": dataset_for(ctx), "batch_size": 128, "epochs": 5, "timing_steps": 20}
    if ctx.smoke:
        common = SMOKE_TRAIN
    return [
        Workload(model=m, study="devices", num_devices=1, **common)
        for m in ("mnist_cnn", "lenet5_keras")
    ]


def _epoch_seconds(record: Record) -> float | None:
    """Median training seconds per epoch from the history (compile excluded)."""
    times = [e["train_time_s"] for e in record.get("history") or [] if e.get("train_time_s")]
    return statistics.median(times) if times else None


COLUMNS = {
    "workload": workload_label,
    "device": device_label,
    "s/step [p10-p90]": fmt_step,
    "s/epoch": lambda r: seconds(_epoch_seconds(r)) if r["status"] == "ok" else "-",
    "images/s": fmt_images,
    "test acc": fmt_test_acc,
    "status": fmt_status,
}
SPEEDUP_HEADERS = [
    "workload",
    "device",
    "speedup per step",
    "per step, over fastest CPU",
    "speedup per epoch",
]


def _speedup_row(records: list[Record], base: Record, r: Record) -> list[str]:
    epoch, base_epoch = _epoch_seconds(r), _epoch_seconds(base)
    per_epoch = f"{base_epoch / epoch:.1f}x" if epoch and base_epoch else "-"
    return [workload_label(r), device_label(r), *bench.speedups(records, base, r), per_epoch]


def devices_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 001/003: the same model, dataset and batch on every device."""
    rs = sorted(in_study(records, "devices"), key=workload_key)
    if not rs:
        return "", []
    table = columns_table(rs, COLUMNS)
    ok = only_ok(rs)
    speedups = ""
    if pairs := cpu_pairs(ok):
        speedups = (
            "Speedup over the CPU record of the same workload, and per step over the "
            f"fastest CPU figure for it. {bench.FASTEST_CPU_NOTE}\n\n"
            + markdown_table(SPEEDUP_HEADERS, [_speedup_row(records, *p) for p in pairs])
        )
    if not ok:
        return section("Study: devices", table, speedups), []
    fig, ax = pyplot().subplots(figsize=(7, 0.8 + 0.45 * len(ok)))
    names = [f"{workload_label(r)}\n{device_label(r)}" for r in ok]
    medians = [median_step(r) for r in ok]
    low = [median_step(r) - r["step_time_s"]["p10"] for r in ok]
    high = [r["step_time_s"]["p90"] - median_step(r) for r in ok]
    ax.barh(names, medians, xerr=[low, high], capsize=3)
    ax.set(xlabel="s / step (median, p10-p90)")  # bars: a linear axis, lengths compare
    ax.tick_params(axis="y", labelsize="small")
    ax.invert_yaxis()
    path = save(fig, out / "study_devices.png")
    intro = "Same model, dataset and batch on every device (seeds 001 and 003)."
    return section("Study: devices", intro, table, speedups, image("devices", path)), [path]


ANSWER_COLUMNS = {
    "workload": workload_label,
    "device (measured)": device_label,
    "s/step [p10-p90]": fmt_step,
    "images/s": fmt_images,
    "test acc": fmt_test_acc,
}


def _predicted_for(records: list[Record], measured: Record) -> list[str]:
    """The same step (model, batch, precision) compiled for one-chip targets: each
    target's predicted images/s, its ratio to the measured figure, and its ratio to the
    fastest CPU figure for the same step on that machine (bench.fastest_cpu_step)."""
    fastest, by = bench.fastest_cpu_step(records, measured)
    best_images = measured["workload"]["batch_size"] / fastest
    found = []
    for r in compiled(records):
        if same_step(r) == same_step(measured) and fits_chip(r) and target_field(r, "chips") == 1:
            images = prediction(r).get("images_per_s")
            if images and measured.get("images_per_s"):
                ratio = images / measured["images_per_s"]
                bound = "" if prediction_method(r) == "per-kernel" else ", at most: a bound"
                found.append(
                    f"{target_name(r)} {images:,.0f} ({ratio:,.0f}x this run, "
                    f"{images / best_images:,.0f}x the fastest CPU figure{bound})"
                )
    fastest_words = f"the fastest CPU figure for the step: {seconds(fastest)}/step, {by}"
    return [*sorted(found), fastest_words] if found else []


def _measured_speedups(records: list[Record], cpu: Record, measured: Record) -> str:
    """ "Nx over this CPU run, Mx over the fastest CPU figure (what reached it)"."""
    over_run, over_fastest = bench.speedups(records, cpu, measured)
    ratio, _, by = over_fastest.partition(" ")
    return f"{over_run} over this CPU run, {ratio} over the fastest CPU figure {by}".rstrip()


def _predicted_speedup(cpu: Record, measured: Record) -> str:
    """ ", predicted Nx (predicted / measured step - 1: E%)" for an accelerator's measured
    record that carries its step's kernels: the model's figure beside the measured one,
    and its error on this very step; "" where it has no per-kernel prediction."""
    block = prediction(measured)
    step = block.get("step_time_s")
    if prediction_method(measured) != "per-kernel" or not step:
        return ""
    error = step / median_step(measured) - 1
    return (
        f", predicted {median_step(cpu) / step:.1f}x (the predicted step {error:+.0%} off "
        f"the measured one; {predictions.label(block)})"
    )


def devices_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Each device's measured step beside the CPU's, and where no accelerator ran, what
    the targets' compiles predict for the same step."""
    rs = sorted(only_ok(in_study(records, "devices")), key=workload_key)
    if not rs:
        return "", []
    parts = [columns_table(rs, ANSWER_COLUMNS)]
    pairs = cpu_pairs(rs)
    if pairs:
        parts.insert(
            0,
            "Speedup per step over the CPU, measured on one machine (over the CPU run of "
            "the same workload, and over the fastest figure any configuration or framework "
            "reached for the same step on that CPU), and what the per-kernel model "
            "predicted for the accelerator's step: "
            + "; ".join(
                f"{workload_label(r)} on {device_label(r)}: measured "
                + _measured_speedups(records, base, r)
                + _predicted_speedup(base, r)
                for base, r in pairs
            )
            + ".",
        )
    else:
        predicted = [
            f"{workload_label(r)}: " + ", ".join(found[:-1]) + f" ({found[-1]})"
            for r in rs
            if (found := _predicted_for(records, r))
        ]
        lines = (
            [
                "Predicted images/s for the same step (the per-kernel model of the step "
                "compiled for each chip, never run: its kernels plus the host's side of "
                "each step, dispatch as measured here and the batch's copy over the "
                "chip's host link; a figure from a record made before "
                "records carried kernels is a roofline bound, said so), its ratio to this "
                "CPU run's measured figure, and to the fastest figure any configuration or "
                "framework reached for the same step on this CPU (the fair ratio where "
                "this run is not the CPU at its best):",
                "\n".join(f"- {p}" for p in predicted),
            ]
            if predicted
            else []
        )
        parts += [*lines, no_accelerator("devices")]
    return "\n\n".join(parts), []


STUDY = Study(
    "devices",
    workloads=workloads,
    sections=(devices_study,),
    question="How much faster is the accelerator than the CPU for the MNIST CNN? (seeds 001, 003)",
    answer=devices_answer,
)
