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

from pathlib import Path

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
    height = 0.8 + max(3.5, 0.45 * len(ok))
    fig, (step_ax, acc_ax) = pyplot().subplots(1, 2, figsize=(11, height))
    names = [f"{device_label(r)}\n{model_label(r)} {_variant(r)}" for r in ok]
    step_ax.barh(names, [median_step(r) for r in ok])
    step_ax.set(xlabel="s / step (median)")  # bars: a linear axis, lengths compare
    step_ax.tick_params(axis="y", labelsize="x-small")
    step_ax.invert_yaxis()
    for r, name in zip(ok, names, strict=True):
        history = r.get("history") or []
        if accuracy(r) is not None and history:
            epochs = [e["epoch"] for e in history]
            acc_ax.plot(epochs, [e.get("test_accuracy") for e in history], marker="o", label=name)
    epoch_ticks(acc_ax)
    acc_ax.set(xlabel="epoch", ylabel="test accuracy")
    if acc_ax.lines:
        acc_ax.legend(fontsize="x-small")
    path = save(fig, out / "study_precision.png")
    intro = (
        "Compute dtype f32 vs bf16 (parameters and optimizer state stay f32), and f32 "
        "matmuls at JAX's default precision vs highest where recorded."
    )
    return section("Study: precision", intro, table, image("precision", path)), [path]


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
