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
from experiments.labels import device_label, machine
from experiments.studies import bench
from experiments.studies._common import (
    accuracy,
    batch_size,
    cpu_figure,
    cpu_pairs,
    fmt_acc,
    fmt_images,
    fmt_status,
    fmt_step,
    fmt_test_acc,
    image,
    in_study,
    is_cpu,
    measured_on,
    median_step,
    no_accelerator,
    not_measured,
    on_accelerator,
    only_ok,
    precision_of,
    pyplot,
    run_label,
    runs_table,
    same_program_on_cpu,
    same_step,
    save,
    section,
    when,
    workload_key,
    workload_label,
)
from experiments.studies.base import SMOKE_TRAIN, Context, Record, Study, Summary, dataset_for
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
    "per step, like for like",
    "per step, over the CPU at its best",
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
            f"fastest CPU figure for it. {bench.RATIOS_NOTE}\n\n"
            + markdown_table(SPEEDUP_HEADERS, [_speedup_row(records, *p) for p in pairs])
        )
    cpu = [r for r in ok if is_cpu(r)]  # and the like-for-like figures the answer uses
    same = [f for r in cpu if (f := same_program_on_cpu(records, r)) is not None]
    runs = runs_table(records, [*cpu, *same])
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
    parts = (intro, table, speedups, runs, image("devices", path), costs)
    return section("Study: devices", *parts), [path]


def _answer_rows(records: list[Record], rs: list[Record]) -> list[list[str]]:
    """Per devices-study record: its workload, device, formulation and loop, the one
    CPU figure of that workload (`cpu_figure`, dated) or its own figure off the CPU, and
    its test accuracy after the epochs it trained."""
    rows = []
    for r in rs:
        figure = cpu_figure(records, r) if is_cpu(r) else r
        formulation = (r.get("formulation") or {}).get("name", "xla")
        acc = accuracy(r)
        epochs = r["workload"].get("epochs") or 0
        rows.append(
            [
                workload_label(r),
                device_label(r),
                f"{formulation}, {r.get('loop') or 'step'} loop",
                f"{fmt_step(figure)} ({when(figure)[:10]})",
                fmt_images(figure),
                f"{fmt_acc(acc)} after {epochs} epochs" if acc is not None else "-",
            ]
        )
    return rows


ANSWER_HEADERS = [
    "workload",
    "device (measured)",
    "formulation, loop",
    "s/step [p10-p90] (one figure, its date)",
    "images/s",
    "test acc",
]


def versus_cpu(records: list[Record], measured: Record, target: str) -> dict | None:
    """The one-chip target `target`'s prediction for `measured`'s step (model, batch,
    precision) beside the CPU: {"images": predicted images/s, "like": its ratio to the
    CPU figure of the same program (`same_program_on_cpu`), "best": its ratio to the CPU
    at its best on that CPU model, "cpu": the like-for-like CPU record, "block": the
    prediction, "record": the compile record}; None without a compile that fits."""
    cpu = same_program_on_cpu(records, measured) or cpu_figure(records, measured)
    fastest, _ = bench.fastest_cpu_step(records, cpu)
    batch = measured["workload"]["batch_size"]
    for r in compiled(records):
        if target_name(r) != target or same_step(r) != same_step(measured):
            continue
        if not fits_chip(r) or target_field(r, "chips") != 1:
            continue
        block = prediction(r)
        images = block.get("images_per_s")
        if images:
            return {
                "images": images,
                "like": images * median_step(cpu) / batch,
                "best": images * fastest / batch,
                "cpu": cpu,
                "block": block,
                "record": r,
            }
    return None


def _one_chip_targets(records: list[Record], measured: Record) -> list[str]:
    return sorted(
        {
            target_name(r)
            for r in compiled(records)
            if same_step(r) == same_step(measured) and target_field(r, "chips") == 1
        }
    )


def _predicted_for(records: list[Record], measured: Record) -> list[str]:
    """The same step (model, batch, precision) compiled for one-chip targets: each
    target's predicted images/s and its two ratios to the CPU (bench.RATIOS_NOTE), then
    the two CPU figures they divide by."""
    found = []
    for target in _one_chip_targets(records, measured):
        v = versus_cpu(records, measured, target)
        if v is None:
            continue
        bound = "" if prediction_method(v["record"]) == "per-kernel" else ", at most: a bound"
        found.append(
            f"{target} {v['images']:,.0f} ({v['like']:,.0f}x like for like, "
            f"{v['best']:,.0f}x the CPU at its best{bound})"
        )
    if not found:
        return []
    return [*found, _cpu_words(records, measured)]


def _cpu_words(records: list[Record], measured: Record) -> str:
    """The two CPU figures a prediction's ratios divide by, with their run and date."""
    cpu = same_program_on_cpu(records, measured) or cpu_figure(records, measured)
    fastest, by = bench.fastest_cpu_step(records, cpu)
    return (
        f"on {machine(cpu)}: like for like {seconds(median_step(cpu))}/step "
        f"({run_label(cpu)}, {when(cpu)[:10]}), at its best {seconds(fastest)}/step ({by})"
    )


def _measured_speedups(records: list[Record], cpu: Record, measured: Record) -> str:
    """ "Nx like for like, Mx over the CPU at its best (what reached it)"."""
    like, over_fastest = bench.speedups(records, cpu, measured)
    ratio, _, by = over_fastest.partition(" ")
    return f"{like} like for like, {ratio} over the CPU at its best {by}".rstrip()


def _predicted_speedup(records: list[Record], cpu: Record, measured: Record) -> str:
    """ ", predicted Nx (predicted / measured step - 1: E%)" for an accelerator's measured
    record that carries its step's kernels: the model's figure beside the measured one,
    and its error on this very step; "" where it has no per-kernel prediction."""
    block = prediction(measured)
    step = block.get("step_time_s")
    if prediction_method(measured) != "per-kernel" or not step:
        return ""
    error = step / median_step(measured) - 1
    like = median_step(cpu_figure(records, cpu)) / step
    return (
        f", predicted {like:.1f}x (the predicted step {error:+.0%} off "
        f"the measured one; {predictions.label(block)})"
    )


def devices_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Each device's measured step beside the CPU's, and where no accelerator ran, what
    the targets' compiles predict for the same step."""
    rs = sorted(only_ok(in_study(records, "devices")), key=workload_key)
    if not rs:
        return "", []
    parts = [markdown_table(ANSWER_HEADERS, _answer_rows(records, rs)), bench.RATIOS_NOTE]
    pairs = cpu_pairs(rs)
    if pairs:
        parts.insert(
            0,
            "Speedup per step over the CPU, measured on one machine, and what the "
            "per-kernel model predicted for the accelerator's step: "
            + "; ".join(
                f"{workload_label(r)} on {device_label(r)}: measured "
                + _measured_speedups(records, base, r)
                + _predicted_speedup(records, base, r)
                for base, r in pairs
            )
            + ".",
        )
    else:
        steps = {same_step(r): r for r in rs}  # a formulation is the CPU's: one step
        predicted = [
            f"{r['workload']['model']}, batch {batch_size(r)}, {precision_of(r)}: "
            + ", ".join(found[:-1])
            + f" ({found[-1]})"
            for r in steps.values()
            if (found := _predicted_for(records, r))
        ]
        lines = (
            [
                "Predicted images/s for the same step (the per-kernel model of the step "
                "compiled for each chip, never run: its kernels plus the host's side of "
                "each step, dispatch as measured here and the batch's copy over the "
                "chip's host link; a figure from a record made before "
                "records carried kernels is a roofline bound, said so), and its two "
                "ratios to the CPU:",
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


SEED_GPU = "gpu-t4"  # seed 003's GPU (a Colab T4), and the one the question names
SEED_001_GPU = "gpu-k80"  # seed 001's GPU


def _seed_model_run(records: list[Record]) -> Record | None:
    """The devices study's CPU run of `mnist_cnn` (its step is what the question asks
    about; the CPU figures it is compared with are the rule's, `versus_cpu`)."""
    rs = [r for r in only_ok(in_study(records, "devices")) if is_cpu(r)]
    return max((r for r in rs if r["workload"]["model"] == "mnist_cnn"), key=when, default=None)


def _versus_words(records: list[Record], run: Record, target: str) -> tuple[str, str]:
    """(the answer, its source) for `target` against the CPU on `run`'s step: measured
    where the target ran, else its prediction with its band."""
    from jaxcnn import targets

    chip = targets.TARGETS[target].chip
    ran = [
        r
        for r in only_ok(records)
        if on_accelerator(r) and chip in str(r["device"]["kind"]) and same_step(r) == same_step(run)
    ]
    step = f"{run['workload']['model']}, batch {batch_size(run)}, {precision_of(run)}"
    if ran:  # measured on the chip itself: its figure, not the model's
        r = max(ran, key=when)
        like, best = bench.speedups(records, run, r)
        answer = (
            f"{step}: {device_label(r)} measured at {seconds(median_step(r))}/step, "
            f"{best} over the CPU at its best, {like} like for like"
        )
        return answer, f"{measured_on([r])}; CPU {measured_on([cpu_figure(records, run)])}"
    v = versus_cpu(records, run, target)
    if v is None:
        command = (
            f"python -m experiments.run --study=targets --target={target} --model="
            f"{run['workload']['model']}"
        )
        return f"no compile for {target} yet: `{command}` predicts it", "-"
    answer = (
        f"{step}: {target} predicted at {v['images']:,.0f} images/s, {v['best']:,.0f}x the "
        f"CPU at its best, {v['like']:,.0f}x like for like ({_cpu_words(records, run)})"
    )
    platform = v["record"]["device"]["platform"]
    return answer, (
        f"{target} {predictions.band_label(v['block'], platform)}; CPU {measured_on([v['cpu']])}"
    )


def devices_summary(records: list[Record]) -> list[Summary]:
    """Seeds 001/003: how much faster a GPU is than the CPU for the MNIST CNN (the T4),
    and seed 001's own GPU, the K80."""
    questions = (
        ("001, 003", "How much faster is a GPU than the CPU for the MNIST CNN?", SEED_GPU),
        ("001", "And on the seed's K80?", SEED_001_GPU),
    )
    run = _seed_model_run(records)
    rows = []
    for seeds, question, target in questions:
        if run is None:
            answer, source = not_measured("devices", "cpu"), "-"
        else:
            answer, source = _versus_words(records, run, target)
        rows.append(Summary(seeds, question, answer, source, "devices.md"))
    return rows


STUDY = Study(
    "devices",
    workloads=workloads,
    sections=(devices_study,),
    question="How much faster is the accelerator than the CPU for the MNIST CNN? (seeds 001, 003)",
    answer=devices_answer,
    summary=devices_summary,
)
