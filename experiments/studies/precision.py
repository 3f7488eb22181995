"""Same accuracy in fp32 and bf16?

TPUs run bf16 natively (and f32 matmuls as bf16 passes by default); recent NVIDIA
GPUs run f32 matmuls as TF32 by default. `mnist_cnn` on MNIST, batch 128, in f32
and in bf16 compute (params stay f32), and on a GPU also f32 with matmul precision
"highest" (TF32 off): step time and per-epoch accuracy.

Command: python -m experiments.run --study=precision --device=gpu --data-dir=DIR
Sizes: 5 epochs on accelerators; CPU: 1 epoch. Smoke: `mlp` n=8 on digits, 3 steps
(the bf16 path, not the CNN, is what a smoke run checks; the CNNs compile slowly on
a CPU).
Expected: CPU ~5 min; smoke ~5 s; GPU/TPU ~1 min (a guess).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from experiments.labels import device_label, model_label
from experiments.studies._common import (
    accuracy,
    epoch_ticks,
    fmt_images,
    fmt_status,
    fmt_step,
    fmt_test_acc,
    image,
    in_study,
    legend_below,
    median_step,
    no_accelerator,
    on_accelerator,
    only_ok,
    pyplot,
    run_label,
    save,
    section,
    workload_key,
    workload_label,
)
from experiments.studies.base import SMOKE_TRAIN, TINY_MLP, Context, Record, Study, dataset_for
from experiments.tables import columns_table
from experiments.workload import Workload


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    common = {
        "model": "mnist_cnn",
        "dataset": dataset_for(ctx),
        "batch_size": 128,
        "epochs": 1 if ctx.cpu else 5,
        "timing_steps": 20,
    }
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
    variants = [("f32", "default"), ("bf16", "default")]
    if ctx.platform == "gpu":
        variants.append(("f32", "highest"))
    return [
        Workload(**common, precision=p, matmul_precision=m, study="precision", num_devices=1)
        for p, m in variants
    ]


def _variant(record: Record) -> str:
    w = record["workload"]
    matmul = w.get("matmul_precision")
    return w.get("precision", "f32") + (f", matmul {matmul}" if matmul else "")


COLUMNS = {
    "device": device_label,
    "workload": workload_label,
    "precision": _variant,
    "s/step [p10-p90]": fmt_step,
    "images/s": fmt_images,
    "test acc": fmt_test_acc,
    "test loss": lambda r: (
        f"{r['test_loss']:.4f}" if accuracy(r) is not None and r.get("test_loss") else "-"
    ),
    "status": fmt_status,
}


def precision_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Same accuracy in f32 and bf16 (and with TF32 on and off)?"""
    rs = sorted(
        in_study(records, "precision"),
        key=lambda r: (device_label(r), workload_key(r), _variant(r)),
    )
    if not rs:
        return "", []
    table = columns_table(rs, COLUMNS)
    ok = only_ok(rs)
    if not ok:
        return section("Study: precision", table), []
    path = save(precision_figure(ok), out / "study_precision.png")
    intro = (
        "Compute dtype f32 vs bf16 (parameters and optimizer state stay f32), and f32 "
        "matmuls at JAX's default precision vs highest where recorded."
    )
    caption = "Left: ms/step, median, whiskers p10-p90. Right: " + (
        "test accuracy per epoch."
        if _per_epoch(ok)
        else "test error after the run's one epoch, from 0; whiskers: the 95% binomial "
        "interval of an error rate measured on that many test images (a difference "
        "inside it is within sampling noise)."
    )
    plot = f"{image('precision', path)}\n\n{caption}"
    return section("Study: precision", intro, table, plot), [path]


def _name(record: Record) -> str:
    return f"{device_label(record)}: {model_label(record)} {_variant(record)}"


def _per_epoch(records: list[Record]) -> bool:
    """Whether a run recorded more than one epoch: then accuracy is drawn per epoch."""
    return any(len(r.get("history") or []) > 1 for r in records if accuracy(r) is not None)


def test_error_bars(records: list[Record]) -> list[tuple[str, float, float | None]]:
    """[(name, test error, half-width of its 95% binomial interval or None)] of the runs
    with a test accuracy: error = 1 - accuracy over the dataset's test images, the
    interval +-1.96 sqrt(p (1 - p) / n) (normal approximation)."""
    from jaxcnn.data import test_size

    bars = []
    for r in records:
        acc = accuracy(r)
        if acc is None:
            continue
        n = test_size(r["workload"].get("dataset") or "")
        error = 1.0 - acc
        half = 1.96 * math.sqrt(error * (1 - error) / n) if n else None
        bars.append((_name(r), error, half))
    return bars


def precision_figure(records: list[Record]) -> Any:
    """Step time as bars from 0 (p10-p90 whiskers); accuracy per epoch where a run has
    several, else the test error as bars from 0 with its binomial interval."""
    height = 1.5 + 0.5 * len(records)
    fig, (step_ax, acc_ax) = pyplot().subplots(1, 2, figsize=(11, max(3.5, height)))
    names = [_name(r) for r in records]
    steps = [median_step(r) for r in records]
    whiskers = [
        [m - r["step_time_s"]["p10"] for m, r in zip(steps, records, strict=True)],
        [r["step_time_s"]["p90"] - m for m, r in zip(steps, records, strict=True)],
    ]
    step_ax.barh(names, [1e3 * s for s in steps], xerr=[[1e3 * w for w in ws] for ws in whiskers])
    step_ax.set(xlabel="ms / step (median; whiskers p10-p90)")  # bars: a linear axis from 0
    step_ax.tick_params(axis="y", labelsize="small")
    step_ax.set_title("speed", fontsize="medium")
    step_ax.invert_yaxis()
    if _per_epoch(records):
        for r, name in zip(records, names, strict=True):
            history = r.get("history") or []
            if accuracy(r) is not None and history:
                epochs = [e["epoch"] for e in history]
                accs = [e.get("test_accuracy") for e in history]
                acc_ax.plot(epochs, accs, marker="o", label=name)
        epoch_ticks(acc_ax)
        acc_ax.set(xlabel="epoch", ylabel="test accuracy", title="test accuracy per epoch")
        legend_below(acc_ax, columns=1)
    else:
        bars = test_error_bars(records)
        errors = [100 * e for _, e, _ in bars]
        spread = [100 * (h or 0) for _, _, h in bars]
        acc_ax.sharey(step_ax)  # the same names, the same rows
        acc_ax.barh([n for n, _, _ in bars], errors, xerr=spread, color="tab:orange")
        for name, value, half in zip([n for n, _, _ in bars], errors, spread, strict=True):
            acc_ax.annotate(
                f"{value:.2f}% +- {half:.2f}",
                (value + half, name),
                xytext=(4, 0),
                textcoords="offset points",
                va="center",
                fontsize="small",
            )
        right = max((e + h for e, h in zip(errors, spread, strict=True)), default=1.0)
        acc_ax.set_xlim(0, 1.4 * right)
        acc_ax.set(xlabel="test error, % (1 - accuracy; whiskers: 95% binomial interval)")
        acc_ax.tick_params(axis="y", labelleft=False)
        acc_ax.set_title("test error after the run's one epoch", fontsize="medium")
    return fig


def precision_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Speed and accuracy per precision, measured."""
    rs = sorted(
        only_ok(in_study(records, "precision")), key=lambda r: (device_label(r), _variant(r))
    )
    if not rs:
        return "", []
    columns = {k: COLUMNS[k] for k in ("device", "workload", "precision", "images/s", "test acc")}
    columns = {**columns, "ran": run_label}
    note = "" if any(on_accelerator(r) for r in rs) else no_accelerator("precision")
    return "\n\n".join(p for p in (columns_table(rs, columns), note) if p), []


STUDY = Study(
    "precision",
    workloads=workloads,
    sections=(precision_study,),
    question="Same accuracy, and what speed, in f32 and bf16?",
    answer=precision_answer,
)
