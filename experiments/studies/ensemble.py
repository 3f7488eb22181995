"""Training parallelism: ensembles and hyperparameter searches.

Seed 004: many independent runs at once. K = 1, 4, 16 `lenet5_keras` models on
MNIST, each with its own seed (seed+i) and learning rate (log-spaced lr/10..3 lr),
batch 128: trained together in one step (jax.vmap of the one train step over
stacked states, on one device) vs K runs one after another with the plain step.
Records images/s of all K models and each model's test accuracy.

Command: python -m experiments.run --study=ensemble --device=gpu --data-dir=DIR
Sizes: 3 epochs on accelerators; CPU: 1 epoch (K=16 sequential alone is ~2 min
an epoch here). Smoke: `mlp` n=8 on digits, K = 1, 2, 3 steps.
Expected: CPU ~8 min; smoke ~10 s; GPU/TPU ~2 min (a guess).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from experiments import analysis
from experiments.labels import device_label, model_label
from experiments.studies._common import (
    epochs_run,
    field,
    fmt_images,
    fmt_status,
    fmt_step,
    image,
    in_study,
    log_axes,
    measured_on,
    median_step,
    no_accelerator,
    not_measured,
    on_accelerator,
    on_accelerator_command,
    only_ok,
    pyplot,
    save,
    section,
)
from experiments.studies.base import (
    SMOKE_TRAIN,
    TINY_MLP,
    Context,
    Record,
    Study,
    Summary,
    dataset_for,
)
from experiments.tables import markdown_table
from experiments.workload import Workload

ENSEMBLE_SIZES = (1, 4, 16)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    common = {
        "model": "lenet5_keras",
        "dataset": dataset_for(ctx),
        "batch_size": 128,
        "epochs": 1 if ctx.cpu else 3,
        "timing_steps": 20,
    }
    sizes = ENSEMBLE_SIZES
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
        sizes = (1, 2)
    return [
        Workload(
            **common,
            study="ensemble",
            kind="ensemble",
            ensemble_size=k,
            ensemble_mode=mode,
            num_devices=1,
        )
        for k in sizes
        for mode in ("vmap", "sequential")
    ]


def _ensemble(record: Record) -> tuple[int, str]:
    e = record.get("ensemble") or {}
    w = record["workload"]
    return e.get("k") or w.get("ensemble_size") or 1, e.get("mode") or w.get("ensemble_mode") or "-"


def ensemble_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 004: K models in one vmapped step vs K steps one after another."""
    rs = in_study(records, "ensemble", kind="ensemble")
    if not rs:
        return "", []
    ok = only_ok(rs)
    by_key = {(device_label(r), model_label(r), *_ensemble(r)): r for r in ok}
    rows = []
    for r in sorted(rs, key=lambda r: (device_label(r), model_label(r), _ensemble(r))):
        k, mode = _ensemble(r)
        sequential = by_key.get((device_label(r), model_label(r), k, "sequential"))
        speedup = "-"
        if mode == "vmap" and sequential and r["status"] == "ok":
            speedup = f"{median_step(sequential) / median_step(r):.2f}x"
        synthetic = r["workload"].get("dataset") == "synthetic"  # no accuracy to show
        per_model = [] if synthetic else field(r, "ensemble", "test_accuracy") or []
        mean = spread = "-"
        if (summary := analysis.mean_spread(per_model)) is not None:
            epochs = epochs_run(r)
            mean = f"{summary[0]:.4f} ± {summary[1]:.4f}" + (
                f" after {epochs} epoch{'s' if epochs != 1 else ''}" if epochs else ""
            )
            spread = f"{summary[2]:.4f}-{summary[3]:.4f}"
        row = [device_label(r), model_label(r), k, mode, fmt_step(r), fmt_images(r), speedup]
        rows.append([*row, mean, spread, fmt_status(r)])
    headers = ["device", "model", "K", "mode", "s/step (all K)", "images/s", "vmap speedup"]
    headers += ["test acc mean ± sd", "test acc min-max", "status"]
    table = markdown_table(headers, rows)
    if not ok:
        return section("Study: ensembles", table), []
    curves: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for (device, model, k, mode), r in by_key.items():
        curves[f"{model} {mode} on {device}"].append((k, r["images_per_s"]))
    fig, ax = pyplot().subplots(figsize=(7, 4.5))
    for label, points in sorted(curves.items()):
        ax.plot(*zip(*sorted(points), strict=True), marker="o", label=label)
    title = "Ensembles: one vmapped step vs K sequential steps"
    log_axes(ax, "models trained at once (K)", "images / s", title, [k for _, _, k, _ in by_key])
    path = save(fig, out / "study_ensemble.png")
    intro = (
        "K models with different seeds and learning rates (seed 004). images/s counts the "
        "images all K models process; the vmap speedup is sequential s/step over vmap "
        "s/step at the same K."
    )
    return section("Study: ensembles", intro, table, image("ensemble", path)), [path]


def ensemble_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The vmap speedup over K sequential steps at each K, measured."""
    ok = only_ok(in_study(records, "ensemble", kind="ensemble"))
    by_key = {(device_label(r), model_label(r), *_ensemble(r)): r for r in ok}
    lines = [
        f"K={k}: {median_step(seq) / median_step(r):.2f}x"
        for (device, model, k, mode), r in sorted(by_key.items())
        if mode == "vmap" and (seq := by_key.get((device, model, k, "sequential")))
    ]
    if not lines:
        return "", []
    devices = ", ".join(sorted({d for d, *_ in by_key}))
    models = ", ".join(sorted({m for _, m, *_ in by_key}))
    text = (
        f"{models}, K models in one vmapped step over K steps one after another "
        f"(sequential s/step over vmap s/step), measured on {devices}: {'; '.join(lines)}."
    )
    note = "" if any(on_accelerator(r) for r in ok) else no_accelerator("ensemble")
    return "\n\n".join(p for p in (text, note) if p), []


def ensemble_summary(records: list[Record]) -> list[Summary]:
    """Seed 004: K models in one vmapped step against K steps one after another."""
    question = "Is training K models at once with `jax.vmap` faster than one after another?"
    ok = only_ok(in_study(records, "ensemble", kind="ensemble"))
    by_key = {(device_label(r), model_label(r), *_ensemble(r)): r for r in ok}
    ratios = [
        (device, model, k, median_step(seq) / median_step(r))
        for (device, model, k, mode), r in sorted(by_key.items())
        if mode == "vmap" and (seq := by_key.get((device, model, k, "sequential")))
    ]
    if not ratios:
        return [Summary("004", question, not_measured("ensemble"), "-", "ensemble.md")]
    device, model, k, ratio = max(ratios, key=lambda x: x[2])
    each = ", ".join(f"K={k_}: {x:.2f}x" for d, m, k_, x in ratios if (d, m) == (device, model))
    verdict = "faster" if ratio > 1 else "slower"
    answer = (
        f"{model}: at K={k} the vmapped step is {verdict} ({ratio:.2f}x the speed of K steps "
        f"one after another; {each})"
    )
    if not any(on_accelerator(r) for r in ok):
        answer += f"; {on_accelerator_command('ensemble')}"
    return [Summary("004", question, answer, measured_on(ok), "ensemble.md")]


STUDY = Study(
    "ensemble",
    workloads=workloads,
    sections=(ensemble_study,),
    question="K models trained at once with `jax.vmap` vs one after another (seed 004)",
    answer=ensemble_answer,
    summary=ensemble_summary,
)
