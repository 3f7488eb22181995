"""How fast does a device train mnist_cnn to 99% test accuracy?

The recipe: the training set resident on the device and each epoch one compiled
loop (`loop=device`), Adam on a one-cycle schedule that spans the run and peaks at
the batch's learning rate (`schedule=onecycle`), the platform's formulation, bf16
compute (params f32) on accelerators, f32 on a CPU. Each epoch budget is its own
run (the schedule spans the budget), over several seeds: the report pools a
budget's seeds (mean final test accuracy on the real test split, median training
time with compile and evaluation excluded) and names the fastest budget whose mean
reaches 99%. The learning rates were chosen on this repository's CPU runs
(docs/performance-log.md, "The speedrun recipe"), accuracy being a property of the
recipe, not the chip.

Command: python -m experiments.run --study=speedrun --device=gpu --data-dir=DIR
Sizes: accelerators: batch 512, 1024 and 2048, 2-5 epochs, 3 seeds; CPU: batch
128, 1-2 epochs, 3 seeds. Smoke: `mlp` n=8 on digits, 3 steps, 2 seeds.
Expected: CPU ~5 min; smoke ~10 s; GPU/TPU ~5 min, mostly compiling (a guess).

Each workload is one (precision, batch, epoch budget, learning rate, schedule, seed);
the schedule spans the budget, so the figure is the run's final test accuracy and its
training time (`train_time_s`: compile and evaluation excluded). Seeds are pooled per
configuration; every number shown is read from the records.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments.labels import device_label, model_label, workload_kind
from experiments.studies._common import latest_by, pyplot, save, when
from experiments.studies.base import SMOKE_TRAIN, TINY_MLP, Context, Record, Study, dataset_for
from experiments.tables import columns_table, seconds
from experiments.workload import Workload

# The speedrun recipe per platform kind: accelerators run bf16 at large batches;
# a CPU runs f32 (XLA:CPU runs bf16 no faster than f32 and pays the conversions:
# docs/performance-log.md, "bf16 compute") at a batch it runs fast. Peak learning rates
# per batch: from CPU runs (docs/performance-log.md, "The speedrun recipe").
SPEEDRUN_CPU = {"precision": "f32", "batches": {128: 1e-2}, "budgets": (1, 2), "seeds": 3}
SPEEDRUN_ACCELERATOR = {
    "precision": "bf16",
    "batches": {512: 2e-2, 1024: 3e-2, 2048: 4e-2},
    "budgets": (2, 3, 4, 5),
    "seeds": 3,
}


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    recipe = SPEEDRUN_CPU if ctx.cpu else SPEEDRUN_ACCELERATOR
    common = {"model": "mnist_cnn", "dataset": dataset_for(ctx), "timing_steps": 10}
    batches, budgets, seeds = recipe["batches"], recipe["budgets"], recipe["seeds"]
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
        budgets, seeds = (common.pop("epochs"),), 2
        batches = {common.pop("batch_size"): 1e-2}
    return [
        Workload(
            **common,
            batch_size=batch,
            learning_rate=rate,
            epochs=budget,
            seed=seed,
            precision=recipe["precision"],
            schedule="onecycle",
            loop="device",
            study="speedrun",
            num_devices=1,
        )
        for batch, rate in batches.items()
        for budget in budgets
        for seed in range(seeds)
    ]


Summary = dict[str, Any]
TARGET = 0.99  # the test accuracy a configuration must reach, as a mean over seeds
GOAL_SECONDS = 0.5  # the H100 goal: 99% in under this much training time on one H100
MIN_SEEDS = 2  # one lucky seed is not a configuration that reaches the target
PLOT = "study_speedrun.png"
# Workload defaults (experiments/workload.py) for records that leave a field out.
DEFAULT_LR = 1e-3
DEFAULT_SCHEDULE = "constant"


def _in_study(record: Record) -> bool:
    w = record["workload"]
    return (
        w.get("study") == "speedrun"
        and workload_kind(record) == "train"
        and (w.get("epochs") or 0) > 0
        and w.get("dataset") != "synthetic"
    )


def _usable(record: Record) -> bool:
    return record["status"] == "ok" and record.get("test_accuracy") is not None


def _workload_id(record: Record) -> str:
    """The workload less its seed, on its device: what a failed seed shares with the
    ok seeds of its configuration."""
    w = {k: v for k, v in record["workload"].items() if k != "seed"}
    return device_label(record) + json.dumps(w, sort_keys=True, default=str)


def _configuration_of(record: Record, labels: dict[str, str]) -> dict[str, Any]:
    """What a summary pools its seeds over: the workload but its seed, on its device."""
    w = record["workload"]
    # A failed record carries no formulation or loop, so model_label would name it
    # differently from its configuration's ok seeds: it borrows their label.
    model = labels.get(_workload_id(record)) or model_label(record)
    return {
        "device": device_label(record),
        "model": model,
        "dataset": w["dataset"],
        "precision": w.get("precision", "f32"),
        "batch_size": w["batch_size"],
        "learning_rate": float(w.get("learning_rate", DEFAULT_LR)),
        "schedule": w.get("schedule") or DEFAULT_SCHEDULE,
        "epochs": w["epochs"],
    }


def _train_time(record: Record) -> float:
    if record.get("train_time_s") is not None:
        return float(record["train_time_s"])
    return float(sum(e.get("train_time_s") or 0.0 for e in record["history"]))


def _images_per_s(record: Record) -> float | None:
    steps = [e.get("steps") for e in record.get("history") or []]
    time = _train_time(record)
    if not steps or None in steps or time <= 0:
        return None
    return sum(steps) * record["workload"]["batch_size"] / time


def _compile(record: Record) -> float | None:
    history = record.get("history") or [{}]
    return history[0].get("compile_time_s")


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _is_one_h100(record: Record) -> bool:
    return "H100" in record["device"]["kind"] and record["device"]["count"] == 1


def _summary(configuration: dict[str, Any], ok: list[Record], failed: list[Record]) -> Summary:
    accuracies = [float(r["test_accuracy"]) for r in ok]
    times = [_train_time(r) for r in ok]
    return {
        **configuration,
        "seeds": len(ok),
        "failed": len(failed),
        "accuracies": accuracies,
        "accuracy_mean": statistics.fmean(accuracies) if ok else None,
        "reached": sum(a >= TARGET for a in accuracies),
        "times": times,
        "time_median": _median(times),
        "compile_median": _median([_compile(r) for r in ok]),
        "images_per_s_median": _median([_images_per_s(r) for r in ok]),
        "h100": any(_is_one_h100(r) for r in [*ok, *failed]),
    }


def speedrun_groups(records: list[Record]) -> list[Summary]:
    """One summary per configuration (device, model, dataset, precision, batch, lr,
    schedule, epochs), seeds pooled, sorted by device then median training time;
    [] when no speedrun record is usable."""
    # The latest record per config_key (workload + device), so a rerun replaces a run
    # rather than adding a seed, and an OOM that later ran ok no longer counts as failed.
    ours = latest_by(
        [r for r in records if _in_study(r)], lambda r: r.get("config_key") or r["run_id"]
    )
    ok = [r for r in ours if _usable(r)]
    if not ok:
        return []
    labels = {_workload_id(r): model_label(r) for r in ok}
    grouped: dict[tuple, list[Record]] = defaultdict(list)
    failed: dict[tuple, list[Record]] = defaultdict(list)
    for r in ours:
        key = tuple(_configuration_of(r, labels).items())
        if _usable(r):
            grouped[key].append(r)
        elif r["status"] != "ok":
            failed[key].append(r)
    keys = {*grouped, *failed}
    summaries = [_summary(dict(k), grouped.get(k, []), failed.get(k, [])) for k in keys]
    inf = float("inf")
    return sorted(
        summaries,
        key=lambda s: (s["device"], s["time_median"] if s["seeds"] else inf, str(s["model"])),
    )


def _run_of(rs: list[Record]) -> str:
    """When a set of runs ran: its first record's UTC time, to the minute."""
    first = min((when(r) for r in rs), default="")
    return first[:16].replace("T", " ") + " UTC" if first else "an unrecorded date"


def superseded_sets(records: list[Record]) -> list[dict[str, Any]]:
    """The earlier sets of the same runs that a rerun replaced, which the table leaves
    out (it pools each workload's latest record): per configuration and set (the n-th
    latest record of each of its workloads), its seeds pooled as `speedrun_groups`
    pools them, when it ran, and when the set that replaced it ran. Oldest first."""
    ours = sorted((r for r in records if _in_study(r)), key=when)
    runs: dict[str, list[Record]] = defaultdict(list)
    for r in ours:
        runs[r.get("config_key") or r["run_id"]].append(r)
    labels = {_workload_id(r): model_label(r) for r in ours if _usable(r)}
    sets: dict[tuple[tuple, int], list[Record]] = defaultdict(list)
    for rs in runs.values():
        for age, r in enumerate(reversed(rs)):  # 0: the latest, the one the table shows
            sets[(tuple(_configuration_of(r, labels).items()), age)].append(r)
    out = []
    for (key, age), rs in sets.items():
        if age == 0:
            continue
        ok = [r for r in rs if _usable(r)]
        failed = [r for r in rs if r["status"] != "ok"]
        summary = _summary(dict(key), ok, failed)
        summary.update(run_of=_run_of(rs), superseded_by=_run_of(sets[(key, age - 1)]))
        out.append(summary)
    return sorted(out, key=lambda s: (s["device"], str(s["model"]), s["epochs"], s["run_of"]))


SUPERSEDED_COLUMNS = {
    "configuration": lambda s: s["configuration"],
    "run of": lambda s: s["run_of"],
    "seeds": lambda s: s["seeds"],
    "test accuracy": lambda s: _accuracy(s),
    "training time": lambda s: _time(s),
    "superseded by the run of": lambda s: s["superseded_by"],
}


def superseded_table(records: list[Record]) -> str:
    """The earlier sets, listed with their dates; "" where no run was repeated."""
    rows = [
        {**s, "configuration": f"{s['device']}: {_configuration(s)}"}
        for s in superseded_sets(records)
    ]
    if not rows:
        return ""
    return (
        "Earlier sets of the same runs, each superseded by a later run of the same "
        "workloads (the table above pools each workload's latest run; these are left out "
        "of it and of the verdict):\n\n" + columns_table(rows, SUPERSEDED_COLUMNS)
    )


def fastest_to_target(records: list[Record], target: float = TARGET) -> dict[str, Summary]:
    """Device label -> the configuration with the lowest median training time among
    those whose mean test accuracy reaches `target` over at least MIN_SEEDS seeds."""
    best: dict[str, Summary] = {}
    for s in speedrun_groups(records):
        if s["seeds"] < MIN_SEEDS or s["accuracy_mean"] < target:
            continue
        held = best.get(s["device"])
        if held is None or s["time_median"] < held["time_median"]:
            best[s["device"]] = s
    return best


def _accuracy(s: Summary) -> str:
    if not s["seeds"]:
        return "-"
    low, high = min(s["accuracies"]), max(s["accuracies"])
    return f"{s['accuracy_mean']:.4f} [{low:.4f}-{high:.4f}]"


def _time(s: Summary) -> str:
    if not s["seeds"]:
        return "-"
    spread = f"{seconds(min(s['times']))}-{seconds(max(s['times']))}"
    return f"{seconds(s['time_median'])} [{spread}]"


def _images_median(s: Summary) -> str:
    rate = s["images_per_s_median"]
    return "-" if rate is None else f"{rate:,.0f}"


TABLE_COLUMNS = {
    "device": lambda s: s["device"],
    "model": lambda s: s["model"],
    "dataset": lambda s: s["dataset"],
    "precision": lambda s: s["precision"],
    "batch": lambda s: s["batch_size"],
    "lr": lambda s: f"{s['learning_rate']:g}",
    "schedule": lambda s: s["schedule"],
    "epochs": lambda s: s["epochs"],
    "seeds": lambda s: s["seeds"],
    "test accuracy": _accuracy,
    f">= {TARGET:.0%}": lambda s: f"{s['reached']}/{s['seeds']}",
    "training time": _time,
    "compile": lambda s: seconds(s["compile_median"]),
    "training images/s": _images_median,
    "failed": lambda s: s["failed"],
}


def _configuration(s: Summary) -> str:
    """`mnist_cnn [...] on mnist, f32, batch 128, 2 epochs, onecycle to lr 0.01`."""
    epochs = f"{s['epochs']} epoch{'s' if s['epochs'] != 1 else ''}"
    lr = f"{s['learning_rate']:g}"
    # onecycle peaks at the learning rate; a constant schedule holds it.
    schedule = f"onecycle to lr {lr}" if s["schedule"] == "onecycle" else f"{s['schedule']} lr {lr}"
    what = f"{s['model']} on {s['dataset']}, {s['precision']}, batch {s['batch_size']}"
    return f"{what}, {epochs}, {schedule}"


def _reached(s: Summary) -> str:
    return (
        f"{s['device']}: {TARGET:.0%} reached in {seconds(s['time_median'])} of training, "
        f"the median over {s['seeds']} seeds whose mean final test accuracy, {_accuracy(s)}, "
        f"is at or above {TARGET:.0%} (the rule: a configuration reaches it by its seeds' mean, "
        f"over at least {MIN_SEEDS} seeds; {s['reached']} of {s['seeds']} seeds reached it on "
        f"their own; {_configuration(s)})"
    )


def _not_reached(device: str, summaries: list[Summary]) -> str:
    ran = [s for s in summaries if s["device"] == device and s["seeds"]]
    best = max(ran, key=lambda s: s["accuracy_mean"])
    return (
        f"{device}: no configuration reached a mean test accuracy of {TARGET:.0%} over "
        f"at least {MIN_SEEDS} seeds (best mean {_accuracy(best)} over {best['seeds']} "
        f"seed(s), median {seconds(best['time_median'])} of training; {_configuration(best)})"
    )


def verdicts(summaries: list[Summary], winners: dict[str, Summary]) -> list[str]:
    devices = sorted({s["device"] for s in summaries if s["seeds"]})
    return [_reached(winners[d]) if d in winners else _not_reached(d, summaries) for d in devices]


def goal_line(summaries: list[Summary], winners: dict[str, Summary]) -> str:
    """The H100 goal, and whether each single-H100 device's verdict meets it."""
    goal = f"The H100 goal: {TARGET:.0%} in under {GOAL_SECONDS:g} s of training time on one H100"
    h100 = sorted({s["device"] for s in summaries if s["h100"]})
    if not h100:
        return f"{goal}: no H100 records exist yet."
    parts = []
    for device in h100:
        won = winners.get(device)
        if won is None:
            parts.append(f"not met on {device} (no configuration reached {TARGET:.0%})")
        else:
            met = "met" if won["time_median"] < GOAL_SECONDS else "not met"
            parts.append(f"{met} on {device} ({seconds(won['time_median'])})")
    return f"{goal}: {'; '.join(parts)}."


def speedrun_headline(records: list[Record]) -> str:
    """The README's lines on the study: each device's verdict and the H100 goal; "" when
    there are no speedrun records."""
    summaries = speedrun_groups(records)
    if not summaries:
        return ""
    items = _verdict_items(records, summaries)
    return f"Time to {TARGET:.0%} test accuracy (`--study=speedrun`):\n\n{items}"


def _verdict_items(records: list[Record], summaries: list[Summary]) -> str:
    winners = fastest_to_target(records)
    lines = [*verdicts(summaries, winners), goal_line(summaries, winners)]
    return "\n".join(f"- {line}" for line in lines)


def _speedrun_plot(summaries: list[Summary], path: Path) -> Path:
    from matplotlib.ticker import FuncFormatter

    fig, ax = pyplot().subplots(figsize=(8, 5))
    devices = sorted({s["device"] for s in summaries if s["seeds"]})
    colors = {d: f"C{i}" for i, d in enumerate(devices)}
    for s in summaries:
        if not s["seeds"]:
            continue
        color = colors[s["device"]]
        ax.plot(s["times"], s["accuracies"], "o", ms=3, alpha=0.4, color=color)
        ax.plot(s["time_median"], s["accuracy_mean"], "o", ms=8, color=color)
        ax.annotate(
            f"{s['epochs']} ep, b{s['batch_size']}, {s['precision']}",
            (s["time_median"], s["accuracy_mean"]),
            textcoords="offset points",
            xytext=(5, 4),
            fontsize="xx-small",
        )
    for device, color in colors.items():
        ax.plot([], [], "o", color=color, label=device)  # one legend entry per device
    ax.axhline(TARGET, ls="--", color="grey", lw=1, label=f"{TARGET:.0%} target")
    ax.axvline(GOAL_SECONDS, ls=":", color="black", lw=1, label=f"H100 goal ({GOAL_SECONDS} s)")
    ax.set(
        xscale="log",
        xlabel="training time (s, compile and evaluation excluded)",
        ylabel="final test accuracy",
        title="Speedrun: time to train to the target (small: seeds; large: median, mean)",
    )
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 0.5, not 10^-1
    ax.legend(fontsize="x-small")
    return save(fig, path, bbox_inches="tight")


INTRO = (
    f"How fast each device trains a model to {TARGET:.0%} test accuracy. Each row is one "
    "configuration (precision, batch, epoch budget, learning rate, schedule spanning "
    "the budget), its seeds pooled, each seed's latest run (earlier sets of the same "
    "runs are listed after the verdict, with their dates): test accuracy is the final "
    "test accuracy on the real test split, mean [min-max] over seeds; training time is "
    "the fit's epochs' train time, median [min-max] over seeds, compile and evaluation "
    "excluded (the epoch's compile time is its own column). `failed`: runs of the "
    "configuration that ended out of memory, in NaN or in an error. A device's verdict "
    "is its fastest configuration by median training time whose mean reaches "
    f"{TARGET:.0%} over at least {MIN_SEEDS} seeds."
)


def speedrun_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The training time each device needs to reach 99% test accuracy."""
    summaries = speedrun_groups(records)
    if not summaries:
        return "", []
    path = _speedrun_plot(summaries, out / PLOT)
    parts = [
        "## Study: speedrun",
        INTRO,
        columns_table(summaries, TABLE_COLUMNS),
        _verdict_items(records, summaries),
        superseded_table(records),
        f"![speedrun]({path.name})",
    ]
    return "\n\n".join(p for p in parts if p), [path]


def speedrun_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Each device's verdict and the H100 goal."""
    summaries = speedrun_groups(records)
    return (_verdict_items(records, summaries) if summaries else ""), []


STUDY = Study(
    "speedrun",
    workloads=workloads,
    sections=(speedrun_study,),
    headline=speedrun_headline,
    question="How fast does the device train `mnist_cnn` to 99% test accuracy on real MNIST?",
    answer=speedrun_answer,
)
