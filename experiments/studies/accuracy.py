"""Same model, same accuracy on every device?

Seed 000 (Fig. 14): accuracy and loss per epoch. `mnist_cnn` on MNIST and on
Fashion-MNIST, batch 128: per-epoch train/test loss and accuracy; the report
overlays the devices' curves.

Command: python -m experiments.run --study=accuracy --device=gpu --data-dir=DIR
Sizes: 10 epochs on accelerators; CPU: 5 epochs. Smoke: `mlp` n=8 on digits only
(it stands in for both datasets, so one workload), 2 epochs (44 steps each) at
batch 32.
Expected: CPU ~8 min; smoke ~5 s; GPU/TPU ~2 min (a guess).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from experiments.labels import device_label, model_label
from experiments.studies._common import (
    accuracy,
    epoch_ticks,
    fmt_acc,
    image,
    in_study,
    measured_on,
    no_accelerator,
    not_measured,
    on_accelerator,
    on_accelerator_command,
    only_ok,
    pyplot,
    run_label,
    save,
    section,
)
from experiments.studies.base import TINY_MLP, Context, Record, Study, Summary
from experiments.tables import markdown_table
from experiments.workload import Workload


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    runs = [("mnist_cnn", {}, name) for name in ("mnist", "fashion_mnist")]
    common = {"batch_size": 128, "epochs": 5 if ctx.cpu else 10, "timing_steps": 20}
    if ctx.smoke:  # digits stands in for both datasets: one workload
        runs = [("mlp", TINY_MLP, "digits")]
        common = {"batch_size": 32, "epochs": 2, "timing_steps": 3}
    return [
        Workload(
            model=model,
            model_overrides=overrides,
            dataset=dataset,
            study="accuracy",
            num_devices=1,
            **common,
        )
        for model, overrides, dataset in runs
    ]


def accuracy_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 000 Fig. 14: per-epoch loss and accuracy, devices overlaid, per dataset."""
    by_dataset: dict[str, list[Record]] = defaultdict(list)
    for r in only_ok(in_study(records, "accuracy")):
        if r.get("history") and accuracy(r) is not None:
            by_dataset[r["workload"]["dataset"]].append(r)
    if not by_dataset:
        return "", []
    rows, notes = [], []
    datasets = sorted(by_dataset)
    fig, axes = pyplot().subplots(len(datasets), 2, figsize=(11, 4 * len(datasets)), squeeze=False)
    for (acc_ax, loss_ax), dataset in zip(axes, datasets, strict=True):
        rs = sorted(by_dataset[dataset], key=lambda r: (model_label(r), device_label(r)))
        for r in rs:
            history = r["history"]
            last = history[-1]
            rows.append(
                [dataset, model_label(r), device_label(r), len(history)]
                + [fmt_acc(last.get(k)) for k in ("train_accuracy", "test_accuracy", "test_loss")]
            )
            epochs = [e["epoch"] for e in history]
            label = f"{model_label(r)} on {device_label(r)}"
            color = acc_ax.plot(
                epochs, [e.get("train_accuracy") for e in history], marker="o", label=label
            )[0].get_color()
            acc_ax.plot(epochs, [e.get("test_accuracy") for e in history], "--", color=color)
            loss_ax.plot(epochs, [e.get("train_loss") for e in history], marker="o", color=color)
            loss_ax.plot(epochs, [e.get("test_loss") for e in history], "--", color=color)
        finals = [r["test_accuracy"] for r in rs]
        if len(finals) > 1:
            notes.append(
                f"{dataset}: final test accuracy spans {min(finals):.4f}-{max(finals):.4f} "
                f"over {len(finals)} records (a spread of {max(finals) - min(finals):.4f})."
            )
        epoch_ticks(acc_ax, loss_ax)
        acc_ax.set(xlabel="epoch", ylabel="accuracy (train solid, test dashed)", title=dataset)
        loss_ax.set(xlabel="epoch", ylabel="loss (train solid, test dashed)", title=dataset)
        acc_ax.legend(fontsize="x-small")
    path = save(fig, out / "study_accuracy.png")
    headers = ["dataset", "model", "device", "epochs", "train acc", "test acc", "test loss"]
    table = markdown_table(headers, rows)
    intro = "Per-epoch loss and accuracy of the same model on every device (seed 000 Fig. 14)."
    return section("Study: accuracy", intro, table, "\n".join(notes), image("acc", path)), [path]


def accuracy_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The final test accuracy per dataset, model and device, measured."""
    rs = [r for r in only_ok(in_study(records, "accuracy")) if accuracy(r) is not None]
    if not rs:
        return "", []
    rows = [
        [
            r["workload"]["dataset"],
            model_label(r),
            device_label(r),
            len(r.get("history") or []),
            run_label(r).partition(", ")[2],
            fmt_acc(accuracy(r)),
        ]
        for r in sorted(rs, key=lambda r: (r["workload"]["dataset"], model_label(r)))
    ]
    text = "Final test accuracy after the epochs shown, measured on each device:"
    headers = ["dataset", "model", "device (measured)", "epochs", "loop, formulation"]
    table = markdown_table([*headers, "test acc"], rows)
    note = "" if any(on_accelerator(r) for r in rs) else no_accelerator("accuracy")
    return "\n\n".join(p for p in (text, table, note) if p), []


def _epochs(record: Record) -> int:
    """The epochs a record trained: its history's, else its workload's."""
    return len(record.get("history") or []) or record["workload"].get("epochs") or 0


def accuracy_summary(records: list[Record]) -> list[Summary]:
    """Seed 000: the same model's accuracy on every device, after the epochs it ran."""
    question = "Does the same model reach the same accuracy on every device?"
    rs = [r for r in only_ok(in_study(records, "accuracy")) if accuracy(r) is not None]
    if not rs:
        return [Summary("000", question, not_measured("accuracy"), "-", "accuracy.md")]
    by_run: dict[tuple, list[Record]] = defaultdict(list)
    for r in rs:
        by_run[(r["workload"]["dataset"], model_label(r))].append(r)
    said = []
    for (dataset, model), runs in sorted(by_run.items()):
        each = ", ".join(
            f"{fmt_acc(accuracy(r))} on {device_label(r)} after {_epochs(r)} epochs"
            for r in sorted(runs, key=device_label)
        )
        said.append(f"{model} on {dataset}: {each}")
    answer = "; ".join(said)
    if not any(on_accelerator(r) for r in rs):
        answer += f"; {on_accelerator_command('accuracy')}"
    return [Summary("000", question, answer, measured_on(rs), "accuracy.md")]


STUDY = Study(
    "accuracy",
    workloads=workloads,
    sections=(accuracy_study,),
    question="Same model, same per-epoch accuracy on every device? (seed 000)",
    answer=accuracy_answer,
    summary=accuracy_summary,
)
