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

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments import analysis, predictions
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

if TYPE_CHECKING:  # references imports jaxcnn (JAX): only when a cost is priced
    from experiments.references import ChipPrice, Price


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
    """Seed 001/003: the same model, dataset and batch on every device; seed 002: what
    an epoch costs on each priced chip, and which chip wins."""
    rs = sorted(in_study(records, "devices"), key=workload_key)
    costs = costs_section(records)
    if not rs:
        return (section("Study: devices", costs), []) if costs else ("", [])
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
        return section("Study: devices", table, speedups, costs), []
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
    parts = (intro, table, speedups, image("devices", path), costs)
    return section("Study: devices", *parts), [path]


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
    if verdict := verdict_sentence(records):
        parts.append(f"TPU vs GPU per chip and per dollar (seed 002): {verdict}")
    return "\n\n".join(parts), []


# --- What an epoch costs, predicted, and the TPU-vs-GPU verdict (seed 002) -----------

COST_MODELS = ("mnist_cnn", "lenet5_keras", "mlp", "catsdogs_cnn")  # the seeds' models
# One batch on every target, the seeds' own: the devices study's (seeds 001 and 003),
# seed 000's T4 run, and the Keras MNIST examples seed 002's MLP follows. An epoch is
# then the same training everywhere, on one chip or spread over a slice's chips.
COST_BATCH = 128
COST_PRECISION = "f32"
COST_COMMAND = "python -m experiments.run --target={target} --model={model} --batch-size=128"


def train_images(model: str) -> int:
    """One epoch's training images for a seed model on its seed's dataset: seed 000's
    cats-vs-dogs set for its CNN, MNIST's training set (60,000) for the others."""
    if model == analysis.SEED_000_MODEL:
        return analysis.SEED_000_TRAIN_IMAGES
    from jaxcnn import data

    return int(data.train_size("mnist") or 0)


def epoch_cost_usd(steps: int, step_s: float, usd_per_hour: float) -> float:
    """What `steps` steps of `step_s` seconds each cost at `usd_per_hour`."""
    return steps * step_s * usd_per_hour / 3600


@dataclass(frozen=True)
class EpochCost:
    """One seed model's epoch on one target, predicted (never run), and its price."""

    model: str
    target: str
    platform: str
    chips: int
    steps: int  # jaxcnn.data.steps_per_epoch of the model's training set at COST_BATCH
    step_s: float  # predicted: the device's kernels and the host's side of one step
    block: dict[str, Any]  # the prediction the step comes from (its band, what it left out)
    price: ChipPrice | None  # the chip's price, its host included; None: no public price

    @property
    def epoch_s(self) -> float:
        return self.steps * self.step_s

    @property
    def images_per_s_per_chip(self) -> float:
        return COST_BATCH / self.step_s / self.chips

    @property
    def usd_per_hour(self) -> float | None:
        """The target's hourly price: all its chips at the chip's price, host included."""
        return None if self.price is None else self.price.usd_per_chip_hour * self.chips

    @property
    def usd(self) -> float | None:
        hourly = self.usd_per_hour
        return None if hourly is None else epoch_cost_usd(self.steps, self.step_s, hourly)


def epoch_costs(records: list[Record], prices: Sequence[Price] | None = None) -> list[EpochCost]:
    """Every seed model's epoch on every target its step was compiled for at COST_BATCH
    in f32, fits and has a per-kernel prediction, priced where `prices`
    (experiments/cloud_prices.json by default) has the target's chip."""
    from experiments import references
    from jaxcnn import data

    by_chip = references.chip_prices(prices)
    found = []
    for r in compiled(records):
        w = r["workload"]
        if w["model"] not in COST_MODELS or w.get("model_overrides"):
            continue
        if w["batch_size"] != COST_BATCH or w["precision"] != COST_PRECISION:
            continue
        block = prediction(r)
        step = block.get("step_time_s")
        if not fits_chip(r) or block.get("method") != predictions.METHOD or not step:
            continue
        found.append(
            EpochCost(
                model=w["model"],
                target=target_name(r),
                platform=target_field(r, "platform") or r["device"]["platform"],
                chips=target_field(r, "chips") or 1,
                steps=data.steps_per_epoch(train_images(w["model"]), COST_BATCH),
                step_s=step,
                block=block,
                price=by_chip.get(target_field(r, "chip")),
            )
        )
    return sorted(found, key=lambda c: (COST_MODELS.index(c.model), c.platform, c.target))


@dataclass(frozen=True)
class Winners:
    """Per seed model: the target predicted fastest per chip (most images/s per chip),
    and the one predicted cheapest per epoch among the priced (None: none priced)."""

    model: str
    fastest: EpochCost
    cheapest: EpochCost | None


def per_dollar_winners(
    records: list[Record], prices: Sequence[Price] | None = None
) -> dict[str, Winners]:
    """{seed model: its Winners} over `epoch_costs`, for the models compiled at all."""
    by_model: dict[str, list[EpochCost]] = defaultdict(list)
    for c in epoch_costs(records, prices):
        by_model[c.model].append(c)
    return {
        model: Winners(
            model,
            fastest=max(rows, key=lambda c: c.images_per_s_per_chip),
            cheapest=min((c for c in rows if c.usd is not None), key=_usd, default=None),
        )
        for model, rows in by_model.items()
    }


def _usd(cost: EpochCost) -> float:
    return cost.usd if cost.usd is not None else math.inf


def band_note(block: dict[str, Any]) -> str:
    """A prediction's error band in a few words, or "unvalidated" where the fit has no
    observation of its regime (jaxcnn.prediction.error_band): never a borrowed band."""
    band = block.get("error_band")
    if not band:
        return "unvalidated"
    split = predictions.SPLIT_WORDS.get(band.get("split"), "out of sample")
    return f"error median {band['median']:.0%}, worst {band['worst']:.0%} ({split})"


def fmt_usd(usd: float | None) -> str:
    """Dollars to three significant figures ($0.0000936, $1.23), "-" for none."""
    if usd is None:
        return "-"
    if usd <= 0:
        return "$0"
    return f"${usd:,.{max(2, 2 - math.floor(math.log10(usd)))}f}"


def fmt_price(usd: float) -> str:
    """A price in dollars and cents ($8.00, $0.54), or to four significant figures where
    cents do not say it ($3.673, $0.7068)."""
    return f"${usd:,.2f}" if round(usd, 2) == usd else f"${usd:,.4g}"


def _winner_words(cost: EpochCost, figure: str) -> str:
    partial = "; host side partly left out" if cost.block.get("host_left_out") else ""
    return f"{cost.target} ({cost.platform.upper()}, {figure}; {band_note(cost.block)}{partial})"


def verdict_sentence(records: list[Record], prices: Sequence[Price] | None = None) -> str:
    """One sentence: per seed model, the target predicted fastest per chip and the one
    predicted cheapest per epoch, each with its band; "" where nothing is compiled at
    COST_BATCH."""
    winners = per_dollar_winners(records, prices)
    if not winners:
        return ""
    parts = []
    for model in COST_MODELS:
        if (w := winners.get(model)) is None:
            continue
        fast = _winner_words(w.fastest, f"{w.fastest.images_per_s_per_chip:,.0f} images/s per chip")
        cheap = (
            "no priced target"
            if w.cheapest is None
            else _winner_words(w.cheapest, f"{fmt_usd(w.cheapest.usd)} per epoch")
        )
        parts.append(f"{model} fastest per chip on {fast}, cheapest on {cheap}")
    return (
        f"predicted by the per-kernel model at batch {COST_BATCH}, {COST_PRECISION}, never "
        f"run: {'; '.join(parts)} (on-demand list prices, per chip-hour: docs/references.md)."
    )


COST_HEADERS = [
    "target",
    "chips",
    "steps per epoch",
    "s/step (predicted)",
    "s/epoch (predicted)",
    "images/s per chip (predicted)",
    "price per hour (its chips)",
    "cost per epoch (predicted)",
    "error band",
]


def _cost_row(cost: EpochCost, marks: dict[tuple[str, ...], str]) -> list[str]:
    left_out = tuple(cost.block.get("host_left_out") or ())
    hourly = cost.usd_per_hour
    if cost.price is None or hourly is None:
        price = "no public price found"
    else:
        ids = [f"`{p.id}`" for p in (cost.price.price, cost.price.host) if p is not None]
        price = f"{fmt_price(hourly)} ({' + '.join(ids)})"
    return [
        cost.target,
        str(cost.chips),
        f"{cost.steps:,}",
        seconds(cost.step_s) + marks.get(left_out, ""),
        seconds(cost.epoch_s),
        f"{cost.images_per_s_per_chip:,.0f}",
        price,
        fmt_usd(cost.usd),
        band_note(cost.block),
    ]


def _price_line(price: Price) -> str:
    if price.chip is None:
        covers = "a host VM, paid on top of the chips priced alone that name it"
    else:
        host = f"plus host VM `{price.host}`" if price.host else "its host VM included"
        covers = f"for {price.chips} chip(s), {host}"
    when = "stated by the source" if price.date_kind == "stated" else "retrieved"
    return (
        f"- `{price.id}`: {price.provider} {price.offering}, {price.region}: "
        f"{fmt_price(price.usd_per_hour)} per hour {covers}; {when} {price.date}; "
        f"[source]({price.source_url}), quoted: `{price.quote}`"
    )


def _uncompiled(costs: list[EpochCost], prices: Sequence[Price]) -> list[str]:
    """Per seed model, the priced chips' smallest targets with no cost row: the command
    that compiles each."""
    from jaxcnn import targets as targets_lib

    priced = {p.chip for p in prices if p.chip is not None}
    smallest: dict[str, str] = {}
    for t in sorted(targets_lib.TARGETS.values(), key=lambda t: -t.chips):
        if t.chip in priced:
            smallest[t.chip] = t.name
    done = {(c.model, c.target) for c in costs}
    return [
        f"{model} on {', '.join(names)}"
        for model in COST_MODELS
        if (names := [n for n in sorted(smallest.values()) if (model, n) not in done])
    ]


def costs_section(records: list[Record], prices: Sequence[Price] | None = None) -> str:
    """The details page's costs: per seed model, each target's predicted epoch and its
    cost at the chip's price, the verdict, and every price with its source."""
    if prices is None:
        from experiments import references

        prices = references.load_prices()
    costs = epoch_costs(records, prices)
    if not costs:
        return ""
    reasons = sorted({tuple(c.block.get("host_left_out") or ()) for c in costs} - {()})
    marks = {r: f" ({chr(ord('a') + i)})" for i, r in enumerate(reasons)}
    parts = [
        "### What one epoch costs, predicted (seed 002: TPU vs GPU, per chip and per dollar)",
        f"One epoch of each seed model on its seed's dataset (MNIST's 60,000 training images; "
        f"seed 000's {analysis.SEED_000_TRAIN_IMAGES:,} for `{analysis.SEED_000_MODEL}`) at "
        f"batch {COST_BATCH}, {COST_PRECISION}, on every target whose compile of that step "
        "fits: steps per epoch x the predicted step (the per-kernel model of the compiled "
        "step, the host's side of each step included; nothing here ran), at the chip's "
        "on-demand list price per chip-hour, its host VM included (a GPU priced alone pays "
        "for the VM it attaches to as well), times the target's chips. A many-chip target "
        "splits the batch over its chips and is paid for all of them.",
    ]
    for model in COST_MODELS:
        rows = [c for c in costs if c.model == model]
        if rows:
            table = markdown_table(COST_HEADERS, [_cost_row(c, marks) for c in rows])
            parts += [f"`{model}`:", table]
    if verdict := verdict_sentence(records, prices):
        parts.append(f"Verdict, {verdict}")
    parts += [
        f"{marks[r].strip()}: the prediction leaves out part of the host's side: {'; '.join(r)}."
        for r in reasons
    ]
    if missing := _uncompiled(costs, prices):
        parts.append(
            f"Not compiled at batch {COST_BATCH} yet, so no cost: {'; '.join(missing)} "
            f"(`{COST_COMMAND.format(target='TARGET', model='MODEL')}`)."
        )
    unpriced = sorted({c.target for c in costs if c.price is None})
    if unpriced:
        parts.append(f"No public price found for {', '.join(unpriced)}.")
    parts.append(
        "Prices (on-demand, USD; docs/references.md lists them with their quoted rows):\n\n"
        + "\n".join(_price_line(p) for p in prices)
    )
    return "\n\n".join(parts)


STUDY = Study(
    "devices",
    workloads=workloads,
    sections=(devices_study,),
    question="How much faster is the accelerator than the CPU for the MNIST CNN? (seeds 001, 003)",
    answer=devices_answer,
)
