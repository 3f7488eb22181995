"""The seeds' fifteen questions, each answered from the table of figures: one number or
verdict, how it is known, its band, and the figure ids it rests on. No record is read here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from experiments.report.figures import (
    ACROSS_SITTINGS,
    BEST_OVER_BEST,
    BEST_OVER_CPU,
    EPOCH_FROM_LOOP,
    HELD_OUT_LOOP,
    JAX_VERSUS,
    LOOP_OVER_CPU,
    LOOP_OVER_XLA,
    MOSTLY_KERNELS,
    ON_DEMAND,
    OVER_ITS_RUNS,
    P10_P90,
    RUN_TO_RUN,
    SCALING_IDEAL,
    SITTING_TO_SITTING,
    UNDECIDED_FIT,
    framework_factors,
    host_unpriced,
    is_small,
    prediction_faster,
)
from experiments.report.fmt import (
    batches_text,
    each_text,
    fmt,
    shown_value,
    span_text,
    value_text,
)
from experiments.studies.bench import GEMMS
from experiments.studies.crossover import (
    SWEPT,
    chip_name,
    crossover,
    crossover_verdict,
    measured_crossover,
    sitting_crossovers,
    undecided_range,
)
from experiments.studies.devices import each_at_its_best, loop_over_loop
from experiments.studies.page import (
    DEVICE_OVER_STEP_LOOP,
    LOOP,
    SEED_MODELS,
    USABLE,
    reference_cpu,
    rows,
    sitting_spread,
)
from experiments.studies.scaling import EFFICIENCY_BAND, SCALES_AT, gpu_verdicts
from jaxcnn.choices import MODEL_STRATEGIES, platform_formulation
from jaxcnn.perf.chips import USABLE_FRACTION

SEED_MODEL, MNIST_MODEL = SEED_MODELS[:2]
Row = dict[str, Any] | None


@dataclass
class Answer:
    number: int
    seeds: str
    question: str
    answer: str
    known: str  # M, C, P, published, or several ("M / P")
    band: str
    page: str
    ids: list[str] = field(default_factory=list)


@dataclass
class Said:
    """What a question's function found: its words, the rows they quote, and the band
    when it is not the first predicted row's."""

    text: str
    rows: list[Row] = field(default_factory=list)
    band: str | None = None
    caveat: str = ""  # after the band, even where it is said as an earlier row's


def one(table: pd.DataFrame, **where: Any) -> Row:
    """The one row matching `where`, or None (none, or a filter too loose to pick one)."""
    found = rows(table, **where)
    return found.iloc[0].to_dict() if len(found) == 1 else None


def least(found: pd.DataFrame, by: str = "value") -> Row:
    """The row of `found` with the smallest `by`, or None where `found` is empty."""
    return found.loc[found[by].idxmin()].to_dict() if len(found) else None


def most(found: pd.DataFrame, by: str = "value") -> Row:
    """The row of `found` with the largest `by`, or None where `found` is empty."""
    return found.loc[found[by].idxmax()].to_dict() if len(found) else None


def none_on(cpu: str | None, what: str) -> str:
    """An answer the reference CPU has no record for: said, never another CPU's quoted."""
    return f"no {what} on {cpu or 'a named CPU'} yet"


def band_words(r: Row) -> str:
    """A prediction's band as the pages show it, or "unvalidated"."""
    if r is None or r["kind"] != "predicted":
        return "-"
    if pd.isna(r.get("band_median")):
        why = str(r.get("band_quantity") or "")
        return why if why.startswith(("unvalidated (", "none:")) else "unvalidated"
    faster = r.get("band_faster")
    way = () if pd.isna(faster) else (prediction_faster(int(faster), int(r["band_n"])),)
    split, chips = str(r["band_split"]), r.get("band_chips")
    if isinstance(chips, str) and chips:  # the chips it was measured on
        split = split.replace(LEFT_OUT_ONE_CHIP, f"{LEFT_OUT_ONE_CHIP} of {chips}", 1)
        split = split.replace(PUBLISHED_LOOPS, f"{PUBLISHED_LOOPS} on {chips}", 1)
    return band_text(r["band_median"], r["band_worst"], r["band_n"], *way, split)


LEFT_OUT_ONE_CHIP = "leave one chip out"
HOST_UNPRICED = " (host time partly unmodelled)"  # a predicted step with host parts left out
HOST_MODELLED = " (host time modelled"  # a predicted step with every host part in it
PUBLISHED_LOOPS = "published JAX loops"


def band_short(r: Row) -> str:
    """A prediction's band by its median and worst alone ("1.36x off, worst 6.1x"), or
    "unvalidated": beside a figure whose full band another row says."""
    if not banded(r):
        return "unvalidated"
    return f"{value_text(r['band_median'], 'x')} off, worst {value_text(r['band_worst'], 'x')}"


def band_or_unvalidated(r: Row) -> str:
    """band_words of a prediction, "unvalidated" where `r` is none."""
    said = band_words(r)
    return "unvalidated" if said == "-" else said


def banded(r: Row) -> bool:
    """Whether prediction `r` carries a band (not unvalidated, not a non-prediction)."""
    return not band_words(r).startswith(("-", "unvalidated"))


def band_text(median: float, worst: float, n: int, *more: str) -> str:
    """A band as every page and the first screen spell it: its median factor, then its
    worst and over how many (the legend says a band's value is its median), then `more`:
    which way it errs, what was held out."""
    more_said = "".join(f", {m}" for m in more)
    return f"{value_text(median, 'x')} off (worst {value_text(worst, 'x')}, n={int(n)}{more_said})"


def band_row_text(band: Row, *more: str) -> str:
    """A band row of the table (its median the value, its worst `hi`) as band_text says it."""
    return band_text(band["value"], band["hi"], band["n"], *more)


DERIVED = "epoch-from-step"  # an epoch as a step times its steps: derived, never timed


def kinds(rs: list[Row]) -> str:
    """The answer's "known" column, one letter per kind of its figures."""
    short = {"measured": "M", "derived": "D", "compiled": "C", "predicted": "P",
             "published": "published"}  # fmt: skip
    return " / ".join(dict.fromkeys(short[r["kind"]] for r in rs if r)) or "-"


def f32_single(
    t: pd.DataFrame, quantity: str, kind: str, model: str, batch: int, **where: Any
) -> pd.DataFrame:
    """The `kind` rows of `quantity` of `model` at `batch` in f32 on one chip (its program
    not split over several), and `where` (rows' filter)."""
    return rows(t, quantity=quantity, kind=kind, model=model, batch=batch, precision="f32",
                placement="single", **where)  # fmt: skip


def trained_epoch(
    t: pd.DataFrame, device: str | None, model: str, batch: int, epochs: int = 0, **where: Any
) -> Row:
    """The fastest epoch of the runs on `device` that trained `epochs` epochs where one
    did, else the most (every seed's runs pooled: figures.RULES["pooled-trained"]), or
    None."""
    found = f32_single(t, "epoch_s", "measured", model, batch, device=device,
                       selection="pooled-trained", **where)  # fmt: skip
    ran = epochs if epochs in set(found.epochs) else found.epochs.max()  # NaN: none ran
    return least(found[found.epochs == ran])


def derived_epoch(t: pd.DataFrame, device: str | None, model: str, batch: int) -> Row:
    """The epoch derived from `device`'s fastest measured step of jaxcnn's, or None."""
    return least(f32_single(t, "epoch_s", "derived", model, batch, device=device,
                            selection=DERIVED, framework="jax"))  # fmt: skip


def epoch_words(r: Row, formulation: bool = True) -> str:
    """A measured epoch and how it is known: measured over N epochs, or derived (from
    jaxcnn's loop: its formulation said where `formulation`)."""
    if r["selection"] == DERIVED and str(r["extra"]).endswith(LOOP):
        if not formulation:  # "from its loop step" says it is derived
            return f"{fmt(r)} from its loop step"
        return f"{fmt(r)} derived from its loop step ({r['formulation']} formulation)"
    if r["selection"] == DERIVED:
        return f"{fmt(r)} derived from its step ({r['formulation']} formulation, {r['loop']} loop)"
    return f"{fmt(r)} measured, {r['extra']} ({r['formulation']} formulation)"


def predicted(t: pd.DataFrame, quantity: str, device: str, model: str, batch: int) -> Row:
    return one(f32_single(t, quantity, "predicted", model, batch, device=device))


def accelerator_step(t: pd.DataFrame, device: str, model: str, batch: int) -> Row:
    """The loop step where predicted, else the device step (its quantity says which)."""
    return predicted(t, "loop_step_s", device, model, batch) or predicted(
        t, "device_step_s", device, model, batch
    )


def cpu_step(t: pd.DataFrame, cpu: str | None, model: str, batch: int) -> Row:
    """The like-for-like CPU step (the xla step loop) on real data where it ran on it."""
    found = f32_single(t, "step_s", "measured", model, batch, device=cpu, formulation="xla",
                       loop="step", framework="jax", extra="-")  # fmt: skip
    real = found[found.dataset != "synthetic"]
    return one(real if len(real) else found)


def published(t: pd.DataFrame, ref: str) -> Row:
    return one(t, kind="published", extra=ref)


# The seed's own memory runs: (target, batch, whether it fitted), catsdogs_cnn in f32.
SEED_MEMORY_RUNS = (("gpu-mx150", 16, True), ("gpu-mx150", 32, False), ("gpu-t4", 128, True))


def of_limit(memory: Row, usable: Row) -> str:
    """ "1.42 of 1.5 GiB": a compiled memory against the limit it is held to, the unit
    said once where both share it."""
    used, limit = fmt(memory), usable and fmt(usable)
    if not limit:
        return used
    number, unit = used.rsplit(" ", 1)
    return f"{number} of {limit}" if limit.endswith(f" {unit}") else f"{used} of {limit}"


def q_oom(t: pd.DataFrame, cpu: str | None) -> Said:
    """Each seed memory run's verdict against the limit it is held to. The band: the
    compiled memory here against a chip's own compiler's as the program ran; a verdict
    whose margin to its limit is smaller than that check's worst is inside it: undecided."""
    checks = rows(t, quantity="memory_factor", selection="compiled-vs-ran")
    worst = most(checks)
    words, picked, agree, undecided = [], [], 0, 0
    for device, batch, seed_fits in SEED_MEMORY_RUNS:
        at = {"device": device, "model": SEED_MODEL, "batch": batch, "precision": "f32"}
        verdict = one(t, quantity="fits", placement="single", **at)
        memory = one(t, quantity="memory_bytes", placement="single", **at)
        usable = one(t, quantity="memory_bytes", device=device, extra=USABLE)
        if verdict is not None:
            picked += [verdict, memory, usable]
            inside = str(verdict["flag"]).startswith(UNDECIDED_FIT)  # figures.undecided_fits
            undecided += inside  # an undecided verdict agrees with nothing
            agree += not inside and bool(verdict["value"]) == seed_fits
            said = "undecided" if inside else "fits" if verdict["value"] else "OOM"
            words.append(f"{device[4:].upper()} b{batch} {said} ({of_limit(memory, usable)})")
    if not words:
        return Said("not compiled yet: python -m experiments.run --study=targets")
    # what every verdict is of, said first: the program as compiled, never run
    head = f"Compiled memory: {agree} of {len(words)} as the seed saw: "
    if undecided:
        head = f"Compiled memory: {agree} as the seed saw, {undecided} undecided: "
    share = f"{USABLE_FRACTION['gpu']:.0%}"
    band = f"the compiler's own memory analysis against JAX's default {share} of the chip's"
    if worst:  # that analysis, compiled here, against a chip's own compiler's as it ran
        chips = "/".join(sorted(set(rows(t, id=list(checks.numerator)).device)))
        own = checks[checks.model == SEED_MODEL]
        seed = most(own)
        of_seed = f", {SEED_MODEL} {fmt(seed)}" if seed else ""
        # which way it errs: a program compiled here smaller than on the chip leans to "fits"
        value = t.set_index("id").value
        smaller = int(
            (value[checks.denominator].to_numpy() < value[checks.numerator].to_numpy()).sum()
        )
        band += (f"; the {chips}'s own compile only: {fmt(worst)} off at worst (n={len(checks)}, "
                 f"ours the smaller in {smaller} of {len(checks)}){of_seed}")  # fmt: skip
        picked += [worst, seed]
    # what the allocator held as the program ran, over that analysis: what a verdict leaves
    # out (autotuning's scratch, buffers in flight), measured on a chip that ran it
    held = rows(t, quantity="memory_factor", kind="measured", model=SEED_MODEL)
    if len(held):
        lo, hi = span(held)
        # at the very batches the verdicts are of, where the chip ran them
        batches = sorted({b for _, b, _ in SEED_MEMORY_RUNS})
        at = [r for b in batches if (r := one(held, batch=b)) is not None]
        each = ", ".join(f"b{int(r['batch'])} {fmt(r)}" for r in at or [hi])
        band += (f"; its allocator's peak as it ran on the {hi['device']}: {fmt(lo)}-{fmt(hi)} "
                 f"that ({each}), not what the verdicts hold to the limit")  # fmt: skip
        picked += [lo, hi, *at]
    return Said(head + "; ".join(words), picked, band)


def seed_cpu_loop(t: pd.DataFrame, cpu: str | None) -> tuple[pd.DataFrame, Row]:
    """Each chip's predicted loop step of the seed's CNN at b16 over the CPU's jaxcnn's
    loop (loop-vs-loop): what a user running the same fit on each sees; and that CPU loop
    step, their numerator, which row 2 divides by (None where there is none)."""
    loops = rows(t, quantity="speedup", selection="loop-vs-loop", model=SEED_MODEL, batch=16)
    loops = loops[loops.extra.str.startswith(f"{LOOP} vs {cpu}'s on ")]
    return loops, one(t, id=loops.numerator.iloc[0]) if len(loops) else None


# a step predicted slower than a published one that holds more work than it
MISS = "a miss"
# the seed's published steps per chip (experiments/predict/published_references.json)
SEED_MX150_STEP, SEED_T4_STEP = "seed000-mx150-catsdogs", "seed000-t4-catsdogs"
SLOWER_THAN_MORE = f", though the seed's holds more: {MISS}"


def seed_check(t: pd.DataFrame, ref: str | None) -> Row:
    """Our step predicted against the seed's Keras epochs per step of its chip (`ref`, its
    published figure), which read JPEG files and validate besides: that chip's one check."""
    return ref and one(t, quantity="error_factor", extra=f"{ref} vs published")


def is_miss(check: Row) -> bool:
    """Ours predicted slower than the seed's step, which holds more than ours: a miss."""
    return check is not None and "slower" in str(check["note"])


def q_seed_step(t: pd.DataFrame, cpu: str | None) -> Said:
    mx = accelerator_step(t, "gpu-mx150", SEED_MODEL, 16)
    t4 = accelerator_step(t, "gpu-t4", SEED_MODEL, 128)
    pm, pt = published(t, SEED_MX150_STEP), published(t, SEED_T4_STEP)
    # each chip over the CPU at the CPU's one batch (no CPU step at 128: 40 s a step):
    # jaxcnn's loop on both sides, what a user running the fit on each sees (as row 5)
    t4_b16 = accelerator_step(t, "gpu-t4", SEED_MODEL, 16)
    loops, loop = seed_cpu_loop(t, cpu)
    over = [a and one(loops, denominator=a["id"]) for a in (mx, t4_b16)]
    c = loop or cpu_step(t, cpu, SEED_MODEL, 16)
    # the seed's step holds its input pipeline and validation: over the same CPU loop, a
    # speedup no larger than the MX150's own (said in the band)
    bound = pm and c and one(t, denominator=pm["id"], numerator=c["id"])
    # the step predicted against the seeds' Keras epochs per step, which read JPEG files
    # and validate besides (no part of the model): the chips' one check, beside the band
    refs = (("MX150", pm and pm["extra"]), ("T4", pt and pt["extra"]))
    checks = [(chip, seed_check(t, ref)) for chip, ref in refs]
    missed = is_miss(checks[0][1])
    # the seed's own chip over its own CPU, where it published both: beside ours, or in
    # the band where ours misses the seed's
    own = rows(t, quantity="speedup", selection="seed-own", model=SEED_MODEL, batch=16)
    owns = own.to_dict("records")
    own_mx = next((r for r in owns if r["device"] == "MX150"), None)
    seed_mx = f", {fmt(own_mx)} its CPU" if own_mx and over[0] and not missed else ""
    # ours over the CPU beside our step; the seed's beside its step, which ours misses
    # where slower (the seed's holds more)
    ours_x = f" ({fmt(over[0])})" if over[0] else ""
    theirs = f", slower than seed's {fmt(pm)}: {MISS}" if missed else f" (seed {fmt(pm)}{seed_mx})"
    # the T4's ratio beside the b16 step it divides, the seed's batch beside its own
    at16 = f"{fmt(t4_b16)} ({fmt(over[1])}), " if over[1] else ""
    chips = [(mx, f"MX150 {fmt(mx)}{ours_x}{theirs}" if mx else ""),
             (t4, f"T4 {at16}b128 {fmt(t4)} (seed {fmt(pt)})" if t4 else "")]  # fmt: skip
    chips = [(r, said) for r, said in chips if said]
    # the chips' steps said predicted, once, where they stand after the CPU's measured one
    if chips and all(r["kind"] == "predicted" for r, _ in chips):
        chips[0] = (chips[0][0], f"predicted: {chips[0][1]}")
    # the model and batch first, every figure after is of them; jaxcnn's loop in the
    # formulation it picks on a CPU (loop-vs-loop), else like for like
    like = c and f"{SEED_MODEL} b16: CPU {fmt(c)} ({c['formulation']} formulation)"
    said = c and (f"{SEED_MODEL} b16, {LOOP}: CPU {fmt(c)}" if c["extra"] == LOOP else like)
    parts = [said or none_on(cpu, "CPU b16 step"), *(said for _, said in chips)]
    # a step predicted slower than the seed's, which holds more, is at least that slow
    said_checks = ", ".join(
        f"{chip} {fmt(e)} ({e['note']}{SLOWER_THAN_MORE * ('slower' in e['note'])})"
        for chip, e in checks
        if e
    )
    caveat = (f"; against the seed's epochs per step (JPEG reads, validation: unmodelled): "
              f"{said_checks} off") if said_checks else ""  # fmt: skip
    if bound and over[0]:  # the seed's MX150 step over the same CPU loop: a floor
        caveat += f"; the seed's MX150 step {shown_value(bound)} the CPU's loop"
    for r in [r for r in owns if not seed_mx or r is not own_mx]:
        caveat += f"; the seed's {r['device']} {fmt(r)} its own CPU"
    picked = [mx, t4, t4_b16 if over[1] else None, c, pm, pt, *over, bound,
              *(e for _, e in checks), *owns]  # fmt: skip
    return Said("; ".join(p for p in parts if p), picked, caveat=caveat)


def q_seed_epoch(t: pd.DataFrame, cpu: str | None) -> Said:
    mx = predicted(t, "epoch_s", "gpu-mx150", SEED_MODEL, 16)
    t4 = predicted(t, "epoch_s", "gpu-t4", SEED_MODEL, 128)
    # the CPU's epoch from the very loop step row 2 sets the chips against
    _, loop = seed_cpu_loop(t, cpu)
    from_loop = loop and one(t, quantity="epoch_s", kind="derived", numerator=loop["id"])
    c = trained_epoch(t, cpu, SEED_MODEL, 16) or from_loop or derived_epoch(t, cpu, SEED_MODEL, 16)
    s_cpu = published(t, "seed000-cpu-catsdogs-epoch")
    s_mx = published(t, "seed000-mx150-catsdogs-epoch")
    s_t4 = published(t, "seed000-t4-catsdogs-epoch")
    # the model named first (the question's "it"); jaxcnn's loop on a CPU runs its
    # default formulation, which the legend says
    words = c and epoch_words(c, formulation=False)
    cpu_said = f"{SEED_MODEL}: CPU b{int(c['batch'])} {words}" if c else none_on(cpu, "CPU epoch")
    # the seed's figure inside the CPU's own parenthesis where its words end in one
    opened = f"{cpu_said[:-1]}; " if cpu_said.endswith(")") else f"{cpu_said} ("
    parts = [f"{opened}seed ETA {fmt(s_cpu)})"]
    # the MX150's epoch from a step that misses the seed's (row 2's check): said so
    mx_check = seed_check(t, SEED_MX150_STEP)
    miss = f": {MISS}" if is_miss(mx_check) else ""
    chips = [
        f"{name} {fmt(mine) if mine else 'none'} (seed {fmt(s)}{m})"
        for name, mine, s, m in (("MX150 b16", mx, s_mx, miss), ("T4 b128", t4, s_t4, ""))
    ]
    if all(r is not None and r["kind"] == "predicted" for r in (mx, t4)):  # said once
        chips[0] = f"predicted: {chips[0]}"
    parts += chips
    said, check = epoch_check(t)  # the chips' epochs are made from loop steps, as row 12's
    if miss:  # why: the step it is made from, against the seed's (row 2's check)
        how = f"{mx_check['note']}{SLOWER_THAN_MORE}"
        said += f"; the MX150's step against the seed's: {fmt(mx_check)} off ({how})"
    seen = [c, mx, t4, s_cpu, s_mx, s_t4, check, mx_check if miss else None]
    return Said("; ".join(parts), seen, None, said)


def epoch_gaps(curves: pd.DataFrame, by: str) -> pd.Series:
    """How far apart the curves (told apart by the column `by`) lie at each epoch, in
    points, indexed by the epoch; empty with fewer than two curves."""
    if curves[by].nunique() < 2:
        return pd.Series(dtype=float)
    return curves.groupby("epoch").value.agg(lambda v: v.max() - v.min()) * 100


def longer_seeds(curves: pd.DataFrame, n: int) -> tuple[pd.DataFrame, str]:
    """One accelerator's seeds from runs of at least `n` epochs, their first `n` (the
    schedule is constant, so a longer run's first epochs are a shorter run's), and whose
    they are; none where no device ran several seeds."""
    found = curves[(curves.epochs >= n) & (curves.epoch <= n) & (curves.platform != "cpu")]
    for (device, _), g in found.groupby(["device", "epochs"]):
        if g.seed.nunique() > 1:
            return g, device
    return found.iloc[:0], ""


def points(gaps: pd.Series, unit: str = " points") -> str:
    return span_text(value_text(gaps.min(), ""), value_text(gaps.max(), "")) + unit


def beyond_epochs(model: str, gaps: tuple[pd.Series, pd.Series]) -> list[str]:
    """The epochs whose devices' gap is not inside the seeds' spread, each with both."""
    devices, seeds = gaps
    return [f"{model} epoch {int(e)} ({value_text(devices[e], '')} vs {value_text(seeds[e], '')})"
            for e in devices.index if not devices[e] < seeds[e]]  # fmt: skip


ACCURACY_DIGITS = 4  # a test accuracy is a count over at most 10,000 images: 1e-4 apart at least


def q_accuracy(t: pd.DataFrame, cpu: str | None) -> Said:
    """Whether the devices' curves come apart further than one device's seeds do: per
    seed model, epoch by epoch, the gap between devices (seed 0's runs of the most epochs
    more than one device trained, on the commonest data set and batch) against the spread
    of the CPU's seeds of the same workload at that epoch, else of an accelerator's seeds
    from runs at least as long (longer_seeds). A model no device ran with several seeds is
    said by its widest gap, unjudged."""
    every = rows(t, quantity="test_accuracy", kind="measured", precision="f32",
                 selection="newest-trained", model=SEED_MODELS)  # fmt: skip
    every = every[(every.platform != "cpu") | (every.device == cpu)]
    acc = every[every.epoch.isna() & (every.seed == 0)]  # seed 0's final accuracies
    if not len(acc):
        return Said(none_on(cpu, "trained run"))
    # the most epochs that more than one device trained: devices are compared at one length
    shared = acc.groupby("epochs").device.nunique()
    most = shared[shared > 1].index.max() if (shared > 1).any() else acc.epochs.max()
    acc = acc[acc.epochs == most]
    acc = acc[(acc.dataset == acc.dataset.mode().iloc[0]) & (acc.batch == acc.batch.mode().iloc[0])]
    r0, picked, judged, unjudged, sizes, beyond = acc.iloc[0], [], [], [], [], []
    noise, sized = None, ""
    like = every[(every.dataset == r0["dataset"]) & (every.batch == r0["batch"])]
    for model in [m for m in SEED_MODELS if m in set(acc.model)]:
        curves = like[(like.model == model) & like.epoch.notna()]
        runs = curves[(curves.epochs == most) & (curves.seed == 0)]
        devices = epoch_gaps(runs, "device")
        if devices.empty:
            continue
        mine = curves[(curves.device == cpu) & (curves.epochs == most)]
        seeds, whose = epoch_gaps(mine, "seed"), "CPU"
        if seeds.empty:  # no CPU seeds: another device's, from runs at least as long
            mine, whose = longer_seeds(curves, most)
            seeds = epoch_gaps(mine, "seed")
        picked += runs.to_dict("records")
        if seeds.empty:  # no seed spread to judge its gap by
            gap = value_text(devices.max(), "")
            unjudged.append(f"{model} unseeded, devices {gap} points apart: undecided")
            continue
        picked += mine.to_dict("records")
        # strictly narrower, at the accuracies' own resolution (a 10,000-image test set's
        # 0.01 points): a tie is not inside, and float noise makes no tie
        gaps = devices.round(ACCURACY_DIGITS), seeds.reindex(devices.index).round(ACCURACY_DIGITS)
        inside = int((gaps[0] < gaps[1]).sum())
        by = "" if whose == "CPU" else f" by {whose}'s seeds"
        if not judged:  # the first model's gaps sized in the answer: how far is apart
            n = mine.seed.nunique()
            sized = (f"{model}'s devices {points(devices, '')} test-accuracy points apart"
                     f" per epoch, its {n} {whose} seeds {points(seeds, '')}: within")  # fmt: skip
        judged.append((model, inside, len(devices), by))
        sizes.append(f"{model} {points(devices, '')} vs {points(seeds)}{by}")
        beyond += beyond_epochs(model, gaps)
    if not judged and not unjudged:  # one device: what it reached, per model
        picked += acc.to_dict("records")
        text = "; ".join(
            f"{m} " + ", ".join(f"{r['platform'].upper()} {fmt(r)}"
                                for r in acc[acc.model == m].to_dict("records"))
            for m in [m for m in SEED_MODELS if m in set(acc.model)]
        )  # fmt: skip
    else:
        # a verdict per model judged by its own seeds: at most epochs the devices' gap no
        # wider than the seeds' (a gap's width, not where either lies); the models of one
        # verdict said together, the first with how far apart its devices and seeds lie
        verdicts: dict[str, list[str]] = {}
        for i, (m, k, of, whose_seeds) in enumerate(judged):
            found = verdicts.setdefault("seed noise" if 2 * k > of else "beyond seed noise", [])
            epochs = "" if found and i else " epochs"
            found.append(f"{sized if i == 0 else m} {k} of {of}{epochs}{whose_seeds}")
        said = [f"{v}: {', '.join(ms)}" for v, ms in verdicts.items()]
        # the question's yes or no first, where every model judged gives the same one
        lead = {"seed noise": "Yes, ", "beyond seed noise": "No, "}
        one_verdict = len(verdicts) == 1 and not unjudged
        text = (lead[next(iter(verdicts))] if one_verdict else "") + "; ".join(said + unjudged)
        if judged:  # each model's sizes, the epochs not inside (a tie is not)
            noise = f"per epoch, devices' gap vs seeds' spread: {', '.join(sizes)}"
            noise += f"; not inside: {', '.join(beyond)}" if beyond else ""
            noise += "; a tie counts as beyond"
    forms = ", ".join(
        f"{p.upper()} {'/'.join(sorted(set(g.formulation)))}" for p, g in acc.groupby("platform")
    )
    # the devices compared, the CPU by its platform (the header names it); one device's
    # answer names it in each figure already
    ran = acc.sort_values(["platform", "device"]).drop_duplicates("device")
    named = "/".join("CPU" if r["platform"] == "cpu" else r["device"] for _, r in ran.iterrows())
    devices = f"{named}, " if judged or unjudged else ""
    if judged:  # its epochs said by the counts; the formulations in the band
        noise = f"{noise}; {forms} formulation"
        return Said(f"{text} ({devices}{r0['dataset']} b{int(r0['batch'])})", picked, noise)
    text += f" ({devices}{r0['dataset']} b{int(r0['batch'])}, {r0['extra']}; {forms} formulation"
    missing = [p.upper() for p in ("cpu", "gpu", "tpu") if p not in set(acc.platform)]
    alone = not judged and not unjudged and missing  # one device: say which ran none
    return Said(text + (f"; no {'/'.join(missing)})" if alone else ")"), picked, noise)


def small_band(t: pd.DataFrame, step: Row) -> tuple[str | None, Row]:
    """The band column of a small program's predicted `step` on a GPU: its own band
    and which way it errs (else "unvalidated", the published JAX loops' beside, then
    other frameworks' published loops', which `implied` widens a speedup by: the row
    returned, else None). Other frameworks' loops are another loop than jaxcnn's: beside
    a band of its own they are on the devices page, not here."""
    own = band_or_unvalidated(step)
    small = {"quantity": "band", "device": "gpu", "model": "small programs"}
    jax = one(t, extra=JAX_VERSUS, **small)
    if jax is not None:  # jaxcnn's kind of loop on other hosts: the band's own check
        # beside a band that is not theirs (none, or the kernels' where they are most of
        # the step) the published loops' band is said whole; else only which way it errs
        apart = own.startswith("unvalidated") or MOSTLY_KERNELS in own
        own += f"; {jax_loops(jax)}" if apart else f", {way_of(jax)}"
    b = one(t, extra="against published", **small)  # other frameworks' published loops
    if b is None or not own.startswith("unvalidated"):
        return own, None
    faster, n = framework_errors(t, "gpu")
    said = f"{own}; other frameworks' loops {fmt(b)} off (worst {value_text(b['hi'], 'x')})"
    return f"{said}, ours faster on {faster} of {n}", b


def way_of(band: Row) -> str:
    """Which way a band row's predictions err: "prediction faster in k of n"."""
    return prediction_faster(int(band["band_faster"]), int(band["n"]))


def jax_loops(band: Row, where: str = "") -> str:
    """The published JAX loops' band row, said beside a loop step it does not validate,
    with the chips they ran on (`where`, else its own `band_chips`)."""
    chips = band.get("band_chips")
    where = where or (f"on {chips} " if isinstance(chips, str) and chips else "")
    return f"{PUBLISHED_LOOPS} {where}{band_row_text(band, way_of(band))}"


def framework_errors(t: pd.DataFrame, platform: str) -> tuple[int, int]:
    """How many of the rows of other frameworks' small-program band on `platform` were
    predicted faster, and of how many."""
    e = framework_factors(t)
    e = e[(e.platform == platform) & is_small(e)]
    return int((e.note == "predicted faster").sum()), len(e)


def implied(speedup: Row, band: Row, t: pd.DataFrame) -> str:
    """The range a wide band implies for a predicted speedup: off by the band's median
    the way most predictions err (a prediction that runs fast overstates the speedup)."""
    if not (speedup and band) or band["value"] < WIDE_BAND:
        return ""
    faster, n = framework_errors(t, band["platform"])  # the rows `band` is made of
    v, f = speedup["value"], band["value"]
    lo, hi = sorted((v / f if 2 * faster > n else v * f, v))
    return f" (band: {value_text(lo, 'x')} to {value_text(hi, 'x')})"


WIDE_BAND = 2.0  # a band past this factor changes an answer's verdict: its range is said


# each chip's fastest step of the program (its kernels: a measured chip's own fastest
# loop, a predicted one's device step) over the CPU's fastest: devices' each_at_its_best
AT_BEST = "kernels at best"


def q_gpu_vs_cpu(t: pd.DataFrame, cpu: str | None) -> Said:
    p = accelerator_step(t, "gpu-t4", MNIST_MODEL, 128)
    found = loop_over_loop(t, MNIST_MODEL)
    if found.empty:
        return Said(none_on(cpu, f"{LOOP} of {MNIST_MODEL} at b128"), [p])
    base = one(t, id=found.numerator.iloc[0])
    head = (f"{LOOP} on both ({MNIST_MODEL} b128, {base['dataset']}): CPU {fmt(base)} "
            f"({base['formulation']} formulation)")  # fmt: skip
    parts, seen, at_best = [], [base], []  # at_best: each chip's kernels over the CPU's best
    measured = found[(found.kind == "measured") & (found.platform == "gpu")]
    if len(measured):
        # each GPU's, in the chips' order: two chips are never a range
        every = measured.sort_values("device").to_dict("records")
        steps = [one(t, id=r["denominator"]) for r in every]
        ratio = each_text([fmt(r) for r in every])
        gpus = "/".join(r["device"] for r in every)
        best = each_at_its_best(t, kind="measured", model=MNIST_MODEL, dataset=base["dataset"])
        best = best.sort_values("device")
        if list(best.device) == [r["device"] for r in every]:  # each side's fastest program
            at_best.append(f"{gpus} {each_text([fmt(r) for r in best.to_dict('records')])}")
            seen += best.to_dict("records")
        parts.append(f"{gpus} {each_text([fmt(r) for r in steps])}, {ratio}")
        seen += [*steps, *every]
    t4 = one(found, kind="predicted", device="gpu-t4")
    if p is None or t4 is None:
        parts.append("T4 not predicted yet")
        return Said(f"{head}; " + "; ".join(parts), [*seen, p])
    band, b = small_band(t, p)
    best = one(each_at_its_best(t, kind="predicted", model=MNIST_MODEL), device="gpu-t4")
    at_best += [f"T4 predicted {fmt(best)}"] if best else []
    parts.append(f"T4 predicted {fmt(p)}, {fmt(t4)}{implied(t4, b, t)}")
    # the same program's loop step predicted for a chip that ran it, held out: the
    # nearest check of the T4's, beside the band of other programs
    same = rows(t, quantity="error_factor", model=MNIST_MODEL, batch=128, precision="f32",
                dataset=base["dataset"], extra=HELD_OUT_LOOP).sort_values("device")  # fmt: skip
    caveat = ""
    # the answer's ratios divide its one CPU figure; those over the CPU's fastest program,
    # each side at its best, here with that CPU figure named
    fastest = [r for r in [*seen, best] if r and str(r["extra"]).endswith(" at its best")]
    cpu_best = fastest and one(t, id=fastest[0]["numerator"])
    if at_best and cpu_best:
        how = f"{fmt(cpu_best)}, {cpu_best['formulation']} {cpu_best['loop']} loop"
        caveat += f"; {AT_BEST}, over the CPU's fastest ({how}): {', '.join(at_best)}"
        seen.append(cpu_best)
    if len(same):
        said = "/".join(fmt(r) for r in same.to_dict("records"))
        caveat += f"; this program held out on {'/'.join(same.device)}: {said} off{one_way(same)}"
    # another framework's published loops of this model on the T4 itself: our model of
    # them, which way it misses (their overhead or our error), as row 6's K80
    theirs = other_framework_checks(t, "T4", MNIST_MODEL)
    if len(theirs):
        caveat += f"; {frameworks_loops(theirs)}"
        seen += theirs.to_dict("records")
    # the measured ratios' CPU side ran in one sitting of its VM; another moves it so far
    moves = one(sitting_spread(t, base["device"]))
    if moves and len(measured):
        up_to = value_text(moves["hi"], "x")
        caveat += f"; a sitting moves the CPU's loop, so these ratios, up to {up_to}"
        seen.append(moves)
    worst = t4.get("band_worst")
    if worst and worst == worst and worst >= WIDE_BAND:  # what the band's worst leaves of it
        lo, hi = (value_text(t4["value"] * f, "x") for f in (1 / worst, worst))
        caveat += f"; at the band's worst: {span_text(lo, hi)} the CPU"
    picked = [*seen, p, t4, best, b, *same.to_dict("records")]
    return Said(f"{head}; " + "; ".join(parts), picked, band, caveat)


def other_framework_checks(t: pd.DataFrame, chip: str, model: str) -> pd.DataFrame:
    """Our predictions of another framework's published loops of `model` on `chip`, as
    error factors, by batch."""
    checks = rows(t, quantity="error_factor", device=chip, model=model)
    checks = checks[checks.extra.str.endswith(" vs published")]
    framework = checks.numerator.map(t.set_index("id").framework).astype(str)
    checks = checks.assign(whose=framework)  # the published loop's framework, for the words
    return checks[~framework.str.lower().str.startswith("jax")].sort_values("batch")


def frameworks_loops(checks: pd.DataFrame) -> str:
    """ "PyTorch's T4 mnist_cnn loops b64/b256: 1.78x/7.01x off, predicted faster (their
    overhead or our error)": `other_framework_checks` said, each framework by its name's
    first word."""
    names = checks.whose.str.split().str[0]
    who = "/".join(dict.fromkeys(names))
    first = checks.iloc[0]
    batches = "/".join(f"b{int(b)}" for b in checks.batch)
    factors = "/".join(fmt(r) for r in checks.to_dict("records"))
    return (f"{who}'s {first.device} {first.model} loops {batches}: {factors} off"
            f"{one_way(checks)} (their overhead or our error)")  # fmt: skip


def one_way(checks: pd.DataFrame) -> str:
    """ ", predicted faster" (or slower) where every error factor of `checks` errs that way
    (its note's first words), else nothing."""
    ways = set(checks.note.astype(str).str.split(":").str[0])
    return f", {ways.pop()}" if len(ways) == 1 else ""


def q_k80(t: pd.DataFrame, cpu: str | None) -> Said:
    """The seed's K80 figure beside Keras's published K80 step of this network and our
    model of that loop (which way it misses, and that the miss is the framework's overhead
    or the model's error, undecided); then jaxcnn's own predicted loop step and its speed
    over the CPU's."""
    p = accelerator_step(t, "gpu-k80", MNIST_MODEL, 128)
    seed, keras = published(t, "seed001-k80-mnist-cnn"), published(t, "keras-tf14-k80-mnist-cnn")
    factor = one(t, quantity="error_factor", extra="keras-tf14-k80-mnist-cnn vs published")
    ours = one(t, quantity="step_s", kind="predicted", extra="keras-tf14-k80-mnist-cnn")
    # no step predicted: no band to give it (a folder without compiles says nothing of one)
    band, b = small_band(t, p) if p else (None, None)
    over = one(loop_over_loop(t, MNIST_MODEL), device="gpu-k80", kind="predicted")
    jaxcnn = f"jaxcnn's loop predicted {fmt(p)}" if p else "jaxcnn's loop not predicted"
    jaxcnn += f", {fmt(over)} the CPU's speed" if p and over else ""
    best = one(each_at_its_best(t, kind="predicted", model=MNIST_MODEL), device="gpu-k80")
    at_best = f"; {AT_BEST}, predicted: {fmt(best)}" if p and over and best else ""
    if seed is None or keras is None or not (factor and ours):
        return Said(jaxcnn, [p, b], band, at_best)
    way = "too fast" if factor["note"] == "predicted faster" else "too slow"
    # the seed's own K80 against its own CPU, both of one unstated batch and network
    own_cpu = published(t, "seed001-cpu-mnist-cnn")
    seed_cpu = f", batch unstated: K80 {fmt(seed)}"
    seed_cpu += f", CPU {ends_of(own_cpu)}" if own_cpu is not None else ""
    # jaxcnn's loop first (the question's), then Keras's published loop and our model of
    # it, whose miss is Keras's overhead or the model's error, then the seed's own figure
    text = (
        f"{jaxcnn}; Keras's K80 loop {fmt(keras)}, predicted {fmt(ours)} "
        f"({fmt(factor)} {way}); seed's {fmt(seed)}/batch"
    )
    # every check on a K80 of a small program, the way each errs: the band's context
    checks = rows(t, quantity="error_factor", device=str(factor["device"]))
    checks = checks[is_small(checks) & checks.extra.str.endswith(" vs published")]
    checks = checks.sort_values("value")
    said = ", ".join(f"{c['model']} {fmt(c)}" for c in checks.to_dict("records"))
    # the seed's figure gives no batch nor network: no step of ours is set against it
    caveat = f"; the seed's batch and network unstated{at_best}; Keras's loop: {owner(keras)}'s"
    caveat += f"; on a K80 Keras's small-program loops {said} off{one_way(checks)}" if said else ""
    caveat += " (Keras's overhead or our error)" if said else ""
    reach = k80_reach(over, checks) if over and said else None
    factors = span_text(fmt(checks.iloc[0].to_dict()), fmt(checks.iloc[-1].to_dict()))
    if reach:  # off as Keras's K80 loops are, beside the band
        caveat += f"; off as those ({factors} {way}), {reach[0]} the CPU's speed"
    # undecided where the speedup's own band at its worst, either way, reaches across 1x;
    # else where Keras's K80 loops' misses would carry it across
    w = over and over.get("band_worst")
    ends = (over["value"] / w, over["value"] * w) if w and w == w else None
    crosses = bool(ends and ends[0] < 1 < ends[1])
    cpu_loop = None
    if crosses or (reach and reach[1]):
        # the prediction beside the CPU it is over, then the one K80 loop of this network
        # published (Keras's, against that same CPU), then the seed's; why undecided in
        # the band: the speedup's own band at its worst, else Keras's loops' misses
        cpu_loop = one(t, id=over["numerator"])
        against = f" (CPU {fmt(cpu_loop)})" if cpu_loop else ""
        text = (f"Undecided ({MNIST_MODEL} b128): K80 in jaxcnn's loop predicted"
                f" {fmt(over)} the CPU's speed{against}; Keras's K80 loop {fmt(keras)};"
                f" seed{seed_cpu}")  # fmt: skip
        if crosses:
            said_ends = span_text(value_text(ends[0], "x"), value_text(ends[1], "x"))
            caveat += f"; undecided: at its band's worst ({value_text(w, 'x')}) {said_ends}"
    if text.startswith("Undecided"):  # each loop's steps in the band
        caveat += (f"; jaxcnn's loop predicted {fmt(p)}; Keras's {MNIST_MODEL} loop"
                   f" {fmt(keras)}, predicted {fmt(ours)}")  # fmt: skip
    seen = [seed, keras, ours, p, over, best, b, own_cpu, cpu_loop, *checks.to_dict("records")]
    return Said(text, [r for r in seen if r is not None], band, caveat)


def ends_of(r: Row) -> str:
    """A figure said as its range where it has one ("350 ms-1.05 s"), else as is."""
    if pd.isna(r.get("lo")) or pd.isna(r.get("hi")):
        return fmt(r)
    return span_text(value_text(r["lo"], r["unit"]), value_text(r["hi"], r["unit"]))


def owner(r: Row) -> str:
    """A published row's source named by whose it is (a GitHub file's URL: its owner; the
    repository's name may mislead, as keras-cntk-benchmark's TensorFlow logs), else as is."""
    source = str(r["source"])
    parts = source.split("github.com/", 1)
    return parts[1].split("/")[0] if len(parts) == 2 else source


def k80_reach(over: Row, checks: pd.DataFrame) -> tuple[str, bool] | None:
    """Where the K80's own checks put a predicted speedup over the CPU: off as each of them
    is, the way they err (a prediction too fast overstates the speedup), as a range
    ("0.462x-0.667x"), and whether that reaches across 1x (undecided). None where the
    checks err both ways."""
    way = one_way(checks)
    if not way:
        return None
    ends = [over["value"] / f if "faster" in way else over["value"] * f for f in checks.value]
    lo, hi = min(ends), max(ends)
    crosses = lo < 1 < over["value"] or hi > 1 > over["value"]
    return f"{value_text(lo, 'x')}-{value_text(hi, 'x')}", crosses


def q_host(t: pd.DataFrame, cpu: str | None) -> Said:
    host = rows(t, quantity="host_s", kind="measured", model=MNIST_MODEL, batch=128,
                dataset="mnist", precision="f32")  # fmt: skip
    host = host[(host.device == cpu) | (host.platform == "gpu")]
    # each platform's own formulation: what jaxcnn's loop runs there by default
    host = host[host.formulation == host.platform.map(platform_formulation)]
    total = one(host, device=cpu, extra="loop total")
    if total is None:
        return Said(none_on(cpu, "timing of jaxcnn's host loop"))
    # the step loop's: the device loop keeps the host off the step's path
    cpu_said = f"{LOOP}'s host time per step ({MNIST_MODEL} b128): CPU {fmt(total)}"
    on_gpu = host[host.platform == "gpu"].sort_values("device")
    totals = on_gpu[on_gpu.extra == "loop total"]

    def said(part: str) -> str:  # each GPU's, in the chips' order
        return each_text([fmt(r) for r in on_gpu[on_gpu.extra == part].to_dict("records")])

    # the parts are on the page: the first screen's words go to the GPU's total and the
    # batch's copy (put), which the question names; the step's dispatch in the band
    shown = host[host.extra.isin(["loop total", "put", "dispatch"])].to_dict("records")
    if not len(totals):
        return Said(f"{cpu_said}; no GPU timed in it yet", shown)
    gpus = "/".join(totals.device)
    # the rule first: a GPU's loop step is no shorter than its host's time per step, so
    # a CPU step under the least host time of any GPU run (any program: a pool's fastest
    # run, else its one run's value) wins
    g = rows(t, quantity="host_s", kind="measured", platform="gpu", extra="loop total")
    runs = g.lo.where(g.spread == "min-max over runs", g.value)
    row = g.loc[runs.idxmin()].to_dict()
    floor_s = value_text(float(runs.min()), "s")
    answer = (f"The CPU wins while its step is under the GPU's host time: >={floor_s} in"
              f" every GPU run timed; {MNIST_MODEL} b128: {gpus}"
              f" {said('loop total')} (put {said('put')})")  # fmt: skip
    # a floor, not the crossover: a step above it may still lose (row 9 measures where)
    of = f"{row['model']} b{row['batch']:.0f} {row['precision']}, {row['device']}"
    floor = f"floor: the least host time of any GPU run ({of}), not row 9's crossover"
    # the floor's yardstick: how far each GPU's host time per step moved between its runs
    spans = [
        f"{r['device']} {ends_of(r)} ({int(r['n'])} runs)"
        for r in totals[totals.spread == "min-max over runs"].to_dict("records")
    ]
    band = f"{cpu_said}; {gpus} dispatch {said('dispatch')}; "
    band += f"run to run: {', '.join(spans)}; {floor}" if spans else floor
    return Said(answer, [*shown, row], band)


def model_split(t: pd.DataFrame) -> tuple[str, list[Row]]:
    """Model parallelism (the weights split too) in one clause: by SCALES_RULE per model
    over 2-8 GPUs, as the data-parallel half; where no GPU split is compiled, the largest
    batch's efficiency on another platform, named (its memory against the data-parallel
    compile's is on the scaling page), else the largest split's memory per device, else
    that none is compiled."""
    verdicts = gpu_verdicts(t, split=True)
    if verdicts:  # as the data-parallel half's, each one's chip in the band
        return "; ".join(by_verdict(verdicts)), [v["row"] for v in verdicts]
    efficiency = rows(t, quantity="scaling_efficiency", placement=list(MODEL_STRATEGIES),
                      selection="equal-batch")  # fmt: skip
    memory = rows(t, quantity="memory_bytes", kind="compiled", placement=list(MODEL_STRATEGIES))
    for found, unit in ((efficiency, ""), (memory, "/device")):
        if len(found):
            r = most(found, "batch")
            # a GPU question answered from other chips says so
            others = "/".join(sorted(p.upper() for p in set(found.platform)))
            only = "" if "gpu" in set(found.platform) else f"{others} only, "
            return f"{only}{r['model']} {r['device']} {fmt(r)}{unit}", [r]
    return "none compiled yet", []


def by_verdict(verdicts: list[dict[str, Any]]) -> list[str]:
    """gpu_verdicts' `verdicts` said a clause per verdict ("yes: resnet50 98.5%"), each
    model by its lowest efficiency, one model's widths of one value once ("mlp
    width=4096/width=1024 39.1%");
    the unvalidated ones by what they predict, under SCALES_RULE's threshold ("unvalidated,
    leaning yes: catsdogs_cnn/mnist_cnn 86.7%-90.9%, leaning no: mlp 39.1%")."""
    said = []
    for verdict in ("yes", "no", "undecided", "unvalidated"):
        each = [v for v in verdicts if v["verdict"] == verdict]
        if verdict != "unvalidated":
            lowest = models_said(each, value=lambda v: fmt(v["row"]))
            said += [f"{verdict}: {lowest}"] if each else []
            continue
        leans = [(lean, [v for v in each if (v["row"]["value"] >= SCALES_AT) == (lean == "yes")])
                 for lean in ("yes", "no")]  # fmt: skip
        # the line a lean is on, said with the yes ("leaning yes (>=80%)")
        line = {"yes": f" (>={SCALES_AT:.0%})", "no": ""}
        leaning = ", ".join(f"leaning {lean}{line[lean]}: {models_said(vs, merge=True)}"
                            for lean, vs in leans if vs)  # fmt: skip
        said += [f"{verdict}, {leaning}"] if each else []
    return said


def lowest_said(v: dict[str, Any], chip: bool = False) -> str:
    """A gpu_verdicts verdict's lowest efficiency, with its band's worst where it has one
    (and, with `chip`, the chip it is on): "98.5% (gpu-v100x8, 84.3% at worst)"."""
    worst = v["at_worst"] and f"{fmt({**v['row'], 'value': v['at_worst']})} at worst"
    said = ", ".join(filter(None, [chip and v["row"]["device"], worst]))
    return f"{fmt(v['row'])} ({said})" if said else fmt(v["row"])


def models_said(
    verdicts: list[dict[str, Any]],
    merge: bool = False,
    value: Callable[[dict[str, Any]], str] = lowest_said,
) -> str:
    """Each model of `verdicts` with its `value` (its lowest efficiency), one model's
    widths of one value once; with `merge`, models of one width each as one range
    ("a/b 86.7%-90.9%")."""
    said_of: dict[tuple[str, str], list[str]] = {}
    for v in verdicts:
        name, _, variant = v["model"].partition(" ")
        said_of.setdefault((name, value(v)), []).append(variant)
    names = [name for name, _ in said_of]
    one_each = len(set(names)) == len(names) and all(vs == [""] for vs in said_of.values())
    if merge and len(said_of) > 1 and one_each:  # several models, each of one program
        values = [v["row"] for v in verdicts]
        lo, hi = min(values, key=lambda r: r["value"]), max(values, key=lambda r: r["value"])
        return f"{'/'.join(names)} {fmt(lo)}-{fmt(hi)}"
    return ", ".join(
        " ".join(filter(None, [name, "/".join(filter(None, variants)), value]))
        for (name, value), variants in said_of.items()
    )


def q_scaling(t: pd.DataFrame, cpu: str | None) -> Said:
    """Weak scaling (the per-chip batch held) of every model over 2-8 GPUs, by SCALES_RULE:
    the models it decides first, each with its lowest efficiency, then the rest with
    theirs; the band the efficiency itself has (published 1-vs-N pairs, held out); any row
    above ideal, whatever its platform; then model parallelism."""
    verdicts = gpu_verdicts(t)
    split, split_rows = model_split(t)
    if not verdicts:
        return Said(f"Data: no multi-GPU compile yet. Model: {split}", split_rows)
    # the seeds' models first, whatever their verdict: the question is theirs; a model
    # beyond them (one a published pair bands) after, never standing in for them
    seeds = [v for v in verdicts if v["model"].split(" ")[0] in SEED_MODELS]
    beyond = [v for v in verdicts if v not in seeds]
    said = ["; ".join(by_verdict(seeds))] if seeds else []
    said += by_verdict(beyond)
    most = max(int(v["row"]["devices"]) for v in verdicts)
    # the batch each GPU holds: a row's batch is its devices' together
    per_gpu = sorted({int(v["row"]["batch"] // v["row"]["devices"]) for v in verdicts})
    held = "-".join(str(b) for b in dict.fromkeys([per_gpu[0], per_gpu[-1]]))
    # what every figure here is, said first: a predicted efficiency (of ideal, per-GPU
    # batch held), from compiled programs
    head = f"Data, weak scaling, predicted efficiency (2-{most} GPUs' lowest, per-GPU b{held})"
    text = f"{head}: {'; '.join(said)}"
    s = rows(t, quantity="scaling_efficiency", precision="f32", selection="equal-batch",
             platform="gpu")  # fmt: skip
    above = s[s.flag.astype(str).str.startswith("above ideal")]
    # a GPU prediction above ideal is a flaw: said beside the band, not hidden (another
    # platform's is on the scaling page, not under a GPU question)
    flaws = "".join(f"; {r['model']} {r['device']} {fmt(r)}: above ideal, a flaw"
                    for r in above.to_dict("records"))  # fmt: skip
    band = one(t, quantity="band", extra=EFFICIENCY_BAND, platform="gpu")
    ideal = one(t, quantity="band", extra=SCALING_IDEAL, platform="gpu")
    rule = f"yes: {SCALES_AT:.0%} of ideal or more at the band's worst, per-GPU batch held"
    said_band = f"{rule}{flaws}"
    if band is not None:  # the efficiency's own band: published 1-vs-N-GPU pairs, held out
        of = sorted(set(rows(t, quantity="scaling_efficiency", kind="published").model))
        # beside it, what taking every pair at 100% gives: what the model adds to that
        worst = ideal and value_text(ideal["hi"], "x")
        at_ideal = ideal and f"; every pair taken at 100% instead: {fmt(ideal)} off, worst {worst}"
        said_band = (f"{'/'.join(of)}'s: {band_row_text(band)}"
                     f", {band['note']}{at_ideal or ''}; unvalidated for the rest;"
                     f" {rule}{flaws}")  # fmt: skip
    # each model's lowest, as the answer names it, and its chip and count (the answer
    # may give a range for several)
    lowest = models_said([*seeds, *beyond], value=lambda v: lowest_said(v, chip=True))
    split_said = ", ".join(f"{r['model']} {fmt(r)} ({r['device']})" for r in split_rows)
    split_said = f"; model-parallel: {split_said}" if split_said else ""
    said_band = f"lowest: {lowest}{split_said}; {said_band}"
    chosen = [*[v["row"] for v in verdicts], *above.to_dict("records"), *split_rows, band, ideal]
    return Said(f"{text}. Model: {split}", chosen, said_band)


def run_count(records: Any) -> int:
    """The runs a figure's `records` column names (space-separated run ids)."""
    return len(str(records).split())


def runs_per_width(g: pd.DataFrame) -> str:
    """How many runs each width's step pools: "one run", "3 runs", "2-3 runs"."""
    runs = sorted(set(g.records.map(run_count)))
    span = f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
    return "one run" if runs == [1] else f"{span} runs"


def smallest_margin(
    t: pd.DataFrame, c: pd.DataFrame, g: pd.DataFrame, start: int, by: str = "value"
) -> Row:
    """The measured GPU's smallest speedup over the CPU's loop among the widths from
    `start` params on (the crossover), or None: how near the verdict's widths come to a
    tie; `by="lo"`: in the GPU's slowest run (the speedup over its runs, where it pooled
    several)."""
    both = c.merge(g, on="model", suffixes=("_cpu", "_gpu"))
    tail = both[both.params_cpu >= start]
    found = rows(t, quantity="speedup", numerator=list(tail.id_cpu), denominator=list(tail.id_gpu))
    return least(found[found.spread == OVER_ITS_RUNS] if by == "lo" else found, by)


def sitting_margins(
    t: pd.DataFrame, mc: pd.DataFrame, mg: pd.DataFrame, earlier: list[dict], start: int
) -> list[tuple[float, str, list[Row]]]:
    """The GPU's smallest margin over the CPU's loop from `start` params on in each
    sitting, and in the newest's slowest run: (the factor, where, the rows it quotes). An
    earlier sitting's is the speedup of the CPU's loop step over that sitting's pooled one
    (figures.loop_vs_loop's), said by when the sitting began."""
    m = smallest_margin(t, mc, mg, start)
    if m is None:
        return []
    margins = [(m["value"], "the newest", [m])]
    cpu = list(mc[mc.params >= start].id)
    for e in earlier:
        found = rows(t, quantity="speedup", numerator=cpu, denominator=list(e["rows"].id))
        if len(found):
            r = least(found)
            margins.append((float(r["value"]), e["when"].split(" UTC")[0], [r]))
    slow = smallest_margin(t, mc, mg, start, by="lo")
    if slow is not None:
        margins.append((slow["lo"], "the newest's slowest run", [slow]))
    return margins


def sittings_said(
    t: pd.DataFrame, mc: pd.DataFrame, mg: pd.DataFrame, rs: list[Row], earlier: list[dict]
) -> tuple[str, str, list[Row]]:
    """A measured GPU's crossover read in every sitting of it (`rs`: the newest's verdict
    rows; `earlier`: sitting_crossovers' of the same GPU): the params from which it was
    faster in all, and from which by more than the most a sitting has moved a loop step
    (its worst: a verdict no sitting's move could flip), as the answer's words (None where
    a sitting's widest width lost); the caveat (the smallest margin from there in any
    sitting against how far a sitting moves a loop step; the newest's alone, against how
    far one run moves it, where no earlier sitting ran; each sitting's crossover;
    "undecided" where any leaves the verdict open; the CPU's runs per width), and the rows
    they quote."""
    newest = int(rs[0]["params"])
    crossings = [newest, *(e["params"] for e in earlier)]
    held = None if None in crossings else max(crossings)
    chosen = [r for e in earlier for r in e["rows"].to_dict("records")]
    if held is not None and held != newest:  # the newest sitting's rows at that width
        for side in (mc, mg):
            chosen += side[side.params == held].to_dict("records")
    caveat, inside, beyond = "", False, ""
    m = smallest_margin(t, mc, mg, held or newest)
    if m and earlier and held is not None:  # the smallest margin in any sitting, and where
        value, when, quoted = min(sitting_margins(t, mc, mg, earlier, held), key=lambda x: x[0])
        chosen += quoted
        caveat += (
            f"; smallest margin from {held:,} on, any sitting: {value_text(value, 'x')} ({when}"
        )
        moves = one(sitting_spread(t, m["device"]))
        inside = value <= 1
        if moves is not None:
            chosen.append(moves)
            noise, said, cpu_moves = sitting_noise(t, moves, mc)
            chosen += cpu_moves
            inside |= value < noise
            caveat += f"; {said}"
            widths = sorted(int(p) for p in set(mc.params) if p >= held)
            past = next((p for p in widths
                         if min(v for v, _, _ in sitting_margins(t, mc, mg, earlier, p))
                         > noise), None)  # fmt: skip
            beyond = (
                ", never beyond sitting noise" if past is None
                else f", beyond sitting noise from {past:,}"
            )  # fmt: skip
        caveat += ")" + (": undecided" if inside else "")
    elif m:  # how near a tie the newest sitting comes from there on
        chosen.append(m)
        caveat += f"; margin from {held or newest:,} params on: {fmt(m)} at least"
        # in the GPU's slowest run of each width, where it ran several: a run's own
        # verdict; else how far one run's loop step moves on the chip
        slow = smallest_margin(t, mc, mg, held or newest, by="lo")
        if slow is not None:
            chosen.append(slow)
            inside |= slow["lo"] <= 1
            caveat += f", {value_text(slow['lo'], 'x')} in its slowest run"
        extra = SITTING_TO_SITTING if slow is not None else RUN_TO_RUN
        moves = one(t, quantity="run_spread", device=m["device"], extra=extra)
        if moves is not None:
            chosen.append(moves)
            inside |= m["value"] < moves["value"]
            words = "a sitting" if extra == SITTING_TO_SITTING else "one run"
            caveat += f" ({words} moves {fmt(moves)}, median)"
        caveat += ": undecided" if inside else ""
    if earlier:  # each sitting's own crossover, fewest params first
        each = ", ".join(f"{p:,}" if p else "none" for p in sorted(crossings, key=lambda p: p or 0))
        caveat += f"; each sitting's crossover: {each}"
        if held is None:  # a sitting whose widest width lost: no width holds in all
            caveat += ": undecided"
        elif len(set(crossings)) > 1:
            caveat += f": undecided below {held:,}"
    # each side's runs per width (the CPU's own spread no yardstick here measures)
    cpu, gpu = runs_per_width(mc), runs_per_width(mg)
    caveat += (
        f"; {cpu} per width, both sides" if cpu == gpu else f"; per width: CPU {cpu}, GPU {gpu}"
    )
    if held is None or not earlier:
        return "", caveat, chosen
    return f"faster from {held:,} params every sitting{beyond}", caveat, chosen


def sitting_noise(t: pd.DataFrame, moves: Row, mc: pd.DataFrame) -> tuple[float, str, list[Row]]:
    """The most a sitting could move a GPU-over-CPU ratio: the GPU's loop step's worst
    move between sittings (`moves`) times the CPU's (`mc`'s device), where the CPU was
    timed in several sittings too; with its words and the CPU's row. Between any sittings,
    not only those of one code (one-code-sittings): few boots ran one commit, and a move
    between sittings of two commits may be their VMs', not the code's."""
    cpu = one(sitting_spread(t, mc.device.iloc[0]))
    gpu = f"{fmt(moves)} median, {value_text(moves['hi'], 'x')} worst"
    if cpu is None:
        return float(moves["hi"]), f"a sitting moves {gpu}", []
    noise = float(moves["hi"]) * float(cpu["hi"])
    said = (f"a sitting moves the GPU's loop {gpu}, the CPU's {value_text(cpu['hi'], 'x')} "
            f"worst: {value_text(noise, 'x')} both")  # fmt: skip
    return noise, said, [cpu]


def wider_band(g: pd.DataFrame, shown: Row) -> str:
    """Where a sweep's predictions (`g`, by params) change band past the `shown` one's:
    "; from 5,824,522 params: 1.36x off (worst 6.1x, n=197, …, leave one chip out; …)";
    else ""."""
    said = band_words(shown)
    other = g[[band_words(r) != said for r in g.to_dict("records")]]
    if other.empty or other.band_median.isna().all():
        return ""
    r = other.iloc[0].to_dict()
    return f"; from {int(r['params']):,} params: {band_words(r)}"  # its split said as pages do


def q_crossover(t: pd.DataFrame, cpu: str | None) -> Said:
    c, g = crossover(t, cpu)
    text, chosen = crossover_verdict(c, g)
    if not text:
        return Said(none_on(cpu, "MLP width sweep") if not len(c) else "no T4 MLP prediction yet")
    sweeps = measured_crossover(t, cpu)
    sittings = sitting_crossovers(t, sweeps)
    if sweeps:  # a measured GPU's answer first, the T4's predicted crossover beside it
        said, caveat = [], ""
        for mc, mg in sweeps:
            # how many runs each width's GPU step pools (the known column says measured;
            # the widths' count stays on the page)
            how = f"{runs_per_width(mg)} per width, {LOOP} both sides"
            words, rs = crossover_verdict(mc, mg, how)
            chosen += rs
            if rs:
                earlier = [e for e in sittings if e["device"] == mg.device.iloc[0]]
                held, more, quoted = sittings_said(t, mc, mg, rs, earlier)
                name = chip_name(mg.device.iloc[0])
                words = f"{name} {held} ({LOOP} both sides)" if held else words
                caveat += f"; {name}'s: {more.removeprefix('; ')}"  # its own, then the T4's
                chosen += quoted
            best = rows(t, quantity="speedup", selection="cpu-best", denominator=list(mg.id))
            best = best[best.numerator.isin(rows(t, device=cpu).id)].sort_values("params")
            if len(best):  # the same verdict against the CPU's fastest step timed alone
                slower = best[best.value <= 1]
                tail = best[best.params > slower.params.max()] if len(slower) else best
                chosen += tail.head(1).to_dict("records") + slower.tail(1).to_dict("records")
                faster = f"faster from {int(tail.params.iloc[0]):,}" if len(tail) else ""
                caveat += f"; against the CPU's best step, {faster or 'slower at every width'}"
            said.append(words)
        # "params" said once, by the measured chip's verdict before it
        start = text.split(" (")[0].removeprefix("T4 ").replace(" params on", "")
        # the T4's prediction over the CPU's measured step: the CPU moves between sittings
        # as much as the measured chips' verdicts are held to, so the band is widened by it
        u = undecided_range(t, c, g)
        t4, open_ = f"T4 predicted {start}", ""
        if u["below"]:
            t4 += f", outside its band from {u['below']:,}"
        elif u["every"] is not None:  # the verdict; what it leaves open in the band
            t4 = f"T4 undecided at {'every' if u['every'] else 'its widest'} width"
            open_ = f"; predicted {start}"
        inside = ""  # said beside the T4's band, before the measured chip's caveats
        if u["moves"] and (u["below"] or u["every"] is not None):
            inside = f"; inside its band times the CPU's sittings ({value_text(u['noise'], 'x')})"
            chosen.append(u["moves"])
        # the seeds' CNNs against the same chip: more work per parameter, a GPU wins far
        # below the MLPs' crossover (the smallest it beats, measured, loop against loop)
        text = "MLP b128: " + "; ".join([*said, t4, *cnns_sooner(t, sweeps[-1][1], chosen)])
        # the band is the T4's (its prediction's), said so beside the measured GPU's verdict
        step = next((r for r in chosen if r and r["kind"] == "predicted"), None)
        band = step and f"T4's: {band_words(step)}{wider_band(g, step)}{inside}{open_}"
        return Said(text, chosen, band, caveat)
    formulation = c.formulation.iloc[0]
    quantity = g.quantity.iloc[0].removesuffix("_s").replace("_", " ")
    text += f" (MLP b128: the CPU's {formulation} formulation, the T4's predicted {quantity})"
    return Said(text, chosen)


def cnns_sooner(t: pd.DataFrame, sweep: pd.DataFrame, chosen: list) -> list[str]:
    """ "CNNs sooner: lenet5_keras (81,194) 2.59x": the smallest seed CNN the swept
    chip (`sweep`'s) is measured faster than the CPU on, in jaxcnn's loop at b128, its row
    added to `chosen`; none where it beats none."""
    found = loop_over_loop(t)
    found = found[(found.kind == "measured") & (found.device == sweep.device.iloc[0])
                  & ~found.model.str.startswith(SWEPT) & (found.value > 1)]  # fmt: skip
    if not len(found):
        return []
    r = found.sort_values("params").iloc[0].to_dict()
    chosen.append(r)
    return [f"CNNs sooner: {r['model']} ({int(r['params']):,}) {fmt(r)}"]


UNDECIDED_WHICH = "Undecided: "  # row 10's head where no ratio is decided


def q_tpu_vs_gpu(t: pd.DataFrame, cpu: str | None) -> Said:
    """Each seed model's faster chip by loop step, what a user sees, grouped by the chip
    each ratio is over; the device steps' comparisons, both sides predicted, in the band
    (and beside a ratio where they pick the other chip)."""
    s = rows(t, quantity="speedup", selection="equal-batch", batch=128, precision="f32",
             placement="single", model=SEED_MODELS)  # fmt: skip
    s = s[s.extra.str.startswith("faster chip per chip")]
    loop = s[s.extra.str.contains("loop_step_s")]
    if not len(loop):
        return Said("not compiled for both yet")
    sides = t[t.id.isin([*loop.numerator, *loop.denominator])].set_index("id")
    seen = list(loop.to_dict("records"))
    # the faster chip named per ratio, unless it is every ratio's (then said once, below,
    # each ratio grouped by the chip it is over)
    one_chip_faster = len({r["device"] for r in seen}) == 1
    kernels = device_step_ratios(s, seen)
    # where the device steps, both predicted, pick the other chip: said beside the ratio
    turned = {
        d["model"]: d
        for d in kernels[1:]
        if d["device"] not in {r["device"] for r in seen if r["model"] == d["model"]}
    }

    def ratio_said(r: Row) -> str:
        d = turned.get(r["model"])
        against = f" (kernels: {d['device']} {fmt(d)} faster)" if d is not None else ""
        return f"{r['model']} {shown_value(r)}{against}"

    if one_chip_faster:
        by_over: dict[str, list[str]] = {}
        for r in seen:
            by_over.setdefault(over_whom(r), []).append(ratio_said(r))
        parts = [f"{who}: {', '.join(each)}" for who, each in by_over.items()]
    else:
        parts = [f"{r['model']} {r['device']} {shown_value(r)} over {over_whom(r)}" for r in seen]
    # each side's chips and how each is known; a host side with no figure said first,
    # since every ratio of it leans so
    seen += sides[sides.kind == "measured"].reset_index().to_dict("records")  # its "M"
    each_side = [  # (its chips, how they are known, its host unpriced in words)
        ("/".join(sorted(set(side.device))), "/".join(sorted(set(side.kind))),
         HOST_UNPRICED if host_unpriced(side.note).any() else "")
        for _, side in sides.groupby(sides.platform, sort=False)
    ]  # fmt: skip
    each_side.sort(key=lambda side: not side[0].startswith("tpu"))
    sides_said = " vs ".join(f"{chips} {known}{unpriced}" for chips, known, unpriced in each_side)
    if one_chip_faster:  # the faster chip's side, then each ratio by the GPU it is over
        fast = next(side for side in each_side if side[0].startswith(seen[0]["device"]))
        sides_said = f"{fast[0]} {fast[1]}{fast[2]} faster than measured"
    # "faster than measured H200: ...; than H100 SXM: ..." where one chip is every faster
    text = (
        f"loop step, {sides_said} " + "; than ".join(parts)
        if one_chip_faster
        else (f"loop step, {sides_said}: " + "; ".join(parts))
    )
    # the TPU side's band, where its loop steps carry the published JAX loops' (enough
    # of them held out), else unvalidated with those loops beside; the device steps,
    # both predicted, like for like after it: how much of a loop ratio is the chips' (a
    # TPU loop step prices less of its host than a measured GPU's holds)
    jax = one(t, quantity="band", device="tpu", model="small programs", extra=JAX_VERSUS)
    loops = ""
    if jax is not None:  # the loops it rests on ran on one TPU chip, named
        chip = jax.get("chip")  # NaN where figures.csv leaves it empty
        on = chip if isinstance(chip, str) and chip != "-" else "TPUs"
        loops = jax_loops(jax, f"on {on} ")
    tpu = sides[sides.platform == "tpu"].to_dict("records")
    by_loops = [r["model"] for r in tpu if r.get("band_quantity") == "loop_step_s"]
    heads = [f"{loops} ({'/'.join(by_loops)})" if len(by_loops) < len(tpu) else loops
             ] if loops and by_loops else []  # fmt: skip
    rest = [r for r in tpu if r["model"] not in by_loops]
    heads += [f"{r['model']}'s: {band_words(r)}" for r in rest if banded(r)]
    bare = [r["model"] for r in rest if not banded(r)]
    heads += [f"{'/'.join(bare)}: unvalidated"] if heads and bare else []
    band = "; ".join(heads) or "unvalidated"
    if kernels:
        band += f"; {kernels[0]}"
        seen += kernels[1:]
    if jax is None:
        return Said(text, seen, band)
    band += "" if by_loops else f"; {loops}"
    # a ratio smaller than the worst error of the band its TPU side carries (its own
    # where banded apart from the loops, else the loops') could go either way; an
    # unvalidated side (jaxcnn.perf.predict: too few checks for a band) decides nothing
    worst = {r["model"]: r["band_worst"] for r in rest if banded(r)}
    ratios_ = loop.to_dict("records")
    judged = [r for r in ratios_ if r["model"] not in bare]
    inside = [r["model"] for r in judged if r["value"] < worst.get(r["model"], jax["hi"])]
    every = len(inside) + len(bare) == len(loop)
    by_own = [m for m in inside if m in worst]
    by_theirs = [m for m in inside if m not in worst]
    if by_theirs:
        which = "every ratio" if len(by_theirs) == len(loop) else ", ".join(by_theirs)
        band += f"; {which} inside the published TPU loops' worst: undecided"
    band += "".join(f"; {m} inside its own band's worst: undecided" for m in by_own)
    band += "".join(f"; {m} unvalidated: undecided" for m in bare)
    if every and one_chip_faster:  # the verdict, the ratios' span and why; each in the band
        ratios = loop.sort_values("value")
        ceiling = "at most " if (ratios.bound == "ceiling").all() else ""
        span = span_text(fmt(ratios.iloc[0].to_dict()), fmt(ratios.iloc[-1].to_dict()))
        overs = "/".join(dict.fromkeys(over_whom(r) for r in loop.to_dict("records")))
        chip, known, unpriced = fast
        # an unvalidated side named only where the loops' worst would not have left it
        # undecided too (the band names each)
        value = {r["model"]: r["value"] for r in ratios_}
        few = "".join(f" ({m}: unvalidated)" for m in bare if value[m] >= jax["hi"])
        # the kernels, both predicted: the faster chip's span, then where they pick the
        # other chip, by chip
        by_chip: dict[str, list[Row]] = {}
        for d in kernels[1:]:
            by_chip.setdefault(str(d["device"]), []).append(d)
        said_k = []
        for chip_, ds in sorted(by_chip.items(), key=lambda kv: kv[0] != chip):
            if chip_ == chip:
                lo, hi = min(ds, key=lambda d: d["value"]), max(ds, key=lambda d: d["value"])
                against = "/".join(dict.fromkeys(over_whom(d) for d in ds))
                said_k.append(f"{chip_} {span_text(fmt(lo), fmt(hi))} faster than {against}")
            else:
                models_ = "/".join(str(d["model"]) for d in ds)
                said_k.append(f"({models_}: {chip_} {each_text([fmt(d) for d in ds])})")
        # like for like first (the kernels, both predicted), then the loop step a user
        # sees, whose TPU side leaves host time out
        kernels_said = f"kernels {' '.join(said_k)}; " if said_k else ""
        # a target's name says predicted, a chip's measured (the legend); any other kind
        # said; "at most" and the legend say the floor (the host time unmodelled, in the band)
        how = "" if known == "predicted" else f" {known}"
        # the loops' error and, where every one erred so, its way: a TPU loop step
        # predicted too fast, so a ceiling lower still
        error = f"{value_text(jax['hi'], 'x')} worst error"
        if jax.get("band_faster") == jax["n"]:
            error = f"error (too fast: median {fmt(jax)}, worst {value_text(jax['hi'], 'x')})"
        text = (f"{UNDECIDED_WHICH}{kernels_said}{chip}'s loop step{how} {ceiling}{span} faster"
                f" than {overs}, inside TPU loops' {error}{few}")  # fmt: skip
        band += f"; {chip}'s: a floor{unpriced}" if unpriced else ""
        band = f"per model, over {'; over '.join(parts)}; {band}"
    elif every:  # no ratio decided: the answer says so first, and what it leaves open
        text = f"{UNDECIDED_WHICH}{text}"
    return Said(text, [*seen, jax], band)


def over_whom(ratio: Row) -> str:
    """The chip a "faster chip per chip" ratio is over (its extra's last words)."""
    return str(ratio["extra"]).split(" over ")[-1]


def device_step_ratios(s: pd.DataFrame, loop: list[Row]) -> list:
    """The same chips' device steps, both predicted, grouped by which chip is faster
    there: how much of a loop ratio is the chips' and how much the hosts'. Returns [their
    words, *their rows], or [] where none is found."""
    found = []
    for r in loop:
        d = s[(s.model == r["model"]) & s.extra.str.contains("device_step_s")]
        found += d.to_dict("records") if len(d) == 1 else []
    if not found:
        return []
    by: dict[str, list[str]] = {}
    for d in found:  # "tpu-v6e-1 over gpu-h100": the faster chip first
        by.setdefault(f"{d['device']} over {over_whom(d)}", []).append(f"{d['model']} {fmt(d)}")
    said = "; ".join(f"{who}: {', '.join(each)}" for who, each in by.items())
    return [f"device steps, both predicted, {said}", *found]


def price_basis(r: Row) -> str:
    """What a cost row's price is (" (Google Cloud on-demand)"), from its note's first
    part; nothing where the note does not say."""
    note = str(r["note"])
    if ON_DEMAND not in note:
        return ""
    return f" ({note.split(ON_DEMAND)[0].rsplit(', ', 1)[-1]}{ON_DEMAND.rstrip(', ')})"


def q_cost(t: pd.DataFrame, cpu: str | None) -> Said:
    """The cheapest predicted epoch of the MNIST CNN and, where its loops' worst error
    reaches them, every dearer chip that could be the cheapest instead (undecided among
    them), each's margin in the band; else the runner-up beside it. Then FLOP/s per TDP
    watt, where a TDP is published."""
    c = rows(t, quantity="usd_per_epoch", batch=128, precision="f32", model=MNIST_MODEL)
    if not len(c):
        return Said("no predicted epoch on a priced target yet")
    ordered = c.sort_values("value")
    r = ordered.iloc[0].to_dict()
    unpriced = host_unpriced(ordered.note)
    # a floor's mark says what the words would ("host time partly unmodelled")
    why = HOST_UNPRICED if unpriced.iloc[0] and r.get("bound") != "floor" else ""
    # what is undecided, where it is, is which is cheapest: said in its head
    head = f"Cheapest {MNIST_MODEL} b128 epoch{price_basis(r)}"  # a target: predicted
    # a price is a published figure: the cheapest's cost errs as its loop step does
    own = band_or_unvalidated(r)
    # each dearer chip's margin over it, against the loops' worst error (the cheapest's
    # side and the runner-up's): a chip inside it may be the cheapest instead
    others = ordered.iloc[1:].to_dict("records")
    ratios = rows(t, quantity="cost_ratio", denominator=r["id"]).set_index("numerator")
    margins = [(o, ratios.loc[o["id"]].to_dict()) for o in others if o["id"] in ratios.index]
    worst = rows(t, quantity="band", extra=JAX_VERSUS, model="small programs")
    worst = worst[worst.device.isin({r["platform"], *(o["platform"] for o in others[:1])})]
    hi = worst.hi.max() if len(worst) else None
    inside = [(o, m) for o, m in margins if hi is not None and m["value"] < hi]
    priced = ordered[~unpriced]  # the cheapest whose every host part is priced
    r_priced = [priced.iloc[0].to_dict()] if unpriced.iloc[0] and len(priced) else []
    priced_ids = {x["id"] for x in r_priced}

    def dearer(o: Row, m: Row) -> str:
        both = r.get("bound") == o.get("bound") == "floor"  # bounded neither way: said
        host = f"{HOST_MODELLED}: {fmt(o)})" if r_priced and o["id"] == r_priced[0]["id"] else ""
        return f"{o['device']} {shown_value(m)} dearer{' (floor over floor)' if both else host}"

    if inside:
        chip = worst.loc[worst.hi.idxmax()].chip  # the loops it rests on, by their chip
        on = f" on {chip}" if chip not in (None, "-") and chip == chip else ""
        each = ", ".join(dearer(o, m) for o, m in inside)
        within = f"within {hi:.3g}x (the published JAX loops' worst error{on}): undecided"
        band = f"{own}; {each}, {within}"
        # the host-priced rival by its cost, the rest by name: all inside the error
        rivals = [
            (f"{o['device']} {fmt(o)} ({shown_value(m)} dearer)" if o["id"] in priced_ids
             else o["device"])
            for o, m in sorted(inside, key=lambda om: om[0]["id"] not in priced_ids)
        ]  # fmt: skip
        rivals_said = ", ".join(rivals[:1] + ["/".join(rivals[1:])] * (len(rivals) > 1))
        # a floor's ">=" says what the words would (the legend: host time left out)
        floor = r.get("bound") == "floor"
        unpriced_said = HOST_UNPRICED if unpriced.iloc[0] and not floor else ""
        whose = str(worst.loc[worst.hi.idxmax()].device).upper()  # the loops' platform
        text = (f"{head} undecided: {r['device']} {shown_value(r)}{unpriced_said};"
                f" {rivals_said} within {whose} loops' {hi:.3g}x worst error")  # fmt: skip
        said_priced = any(o["id"] in priced_ids for o, _ in inside)
    else:
        text, band, said_priced = f"{head}: {r['device']} {shown_value(r)}{why}", own, False
        if margins:  # the runner-up, its margin in the band
            (o, m), floors = margins[0], ""
            if r.get("bound") == o.get("bound") == "floor":
                floors = f" (floors: {HOST_UNPRICED[2:]}"
            text += f", next {o['device']} {shown_value(o)}{floors}"
            band = f"{own}; {dearer(o, m)}"
    if r_priced and not said_priced:
        text += f"; {HOST_MODELLED[2:]}: {r_priced[0]['device']} {fmt(r_priced[0])}"
    if r_priced:  # its own band, short: the full one is another row's (its loop step's)
        band += f"; {r_priced[0]['device']}'s: {band_short(r_priced[0])}"
    chosen = [r, *(o for o, _ in inside or margins[:1]), *(m for _, m in inside or margins[:1])]
    w = rows(t, quantity="flops_per_watt", batch=128, precision="f32", model=MNIST_MODEL)
    if not len(w):
        return Said(f"{text}; FLOP/s per watt: no chip with a published TDP predicted",
                    [*chosen, *r_priced], band)  # fmt: skip
    best = most(w)
    # how many chips the best is of, per kind ("4 GPUs")
    kinds_ = "/".join(f"{g.device.nunique()} {p.upper()}s" for p, g in w.groupby("platform"))
    rate = f"{value_text(best['value'], 'FLOP/s')}/W"
    said = f"{text}; best per TDP watt ({kinds_}): {best['device']} {rate}"
    per_watt = f"per watt ({band_short(best)}): of {'/'.join(sorted(set(w.device)))}"
    # the seed's per-watt claim is TPU against GPU: why no TPU is in it, said here
    platforms = set(rows(t, quantity="usd_per_epoch").platform) - set(w.platform)
    if platforms:
        per_watt += f", no {'/'.join(sorted(p.upper() for p in platforms))} TDP published"
    return Said(said, [*chosen, best, *r_priced], f"{band}; {per_watt}")


QUESTION_EPOCHS = 5  # row 12's: seed 003's five epochs


def runs_of(r: dict[str, Any]) -> str:
    """How many runs a pooled figure rests on: "3 runs" (its `n` counts epochs)."""
    n = run_count(r["records"])
    return f"{n} run{'s' if n != 1 else ''}"


def runs_each(ran: list[Row]) -> str:
    """Measured epochs per device with their runs: "H100 SXM/H200 604/607 ms (1 run each)"
    where every device ran as many, else each with its own."""
    counts = {runs_of(r) for r in ran}
    if len(counts) == 1:
        devices = "/".join(r["device"] for r in ran)
        return f"{devices} {each_text([fmt(r) for r in ran])} ({counts.pop()} each)"
    return ", ".join(f"{r['device']} {fmt(r)} ({runs_of(r)})" for r in ran)


def epoch_check(t: pd.DataFrame) -> tuple[str, Row]:
    """A predicted epoch is made from a loop step: how far such an epoch is from the
    epochs a measured GPU trained, its two clocks (the step loop's and fit's), as a
    band's clause ("" where none), and its row."""
    check = one(t, quantity="band", extra=EPOCH_FROM_LOOP, platform="gpu")
    if not check:
        return "", None
    said = band_row_text(check, check["note"])
    return f"; epochs from loop steps vs trained, same GPU and sitting: {said}", check


def q_five_epochs(t: pd.DataFrame, cpu: str | None) -> Said:
    """An epoch of the MNIST CNN on the CPU and each GPU, trained or else derived, and the
    T4's predicted."""
    c = trained_epoch(t, cpu, MNIST_MODEL, 128, QUESTION_EPOCHS, dataset="mnist")
    c = c or derived_epoch(t, cpu, MNIST_MODEL, 128)
    gpus = f32_single(t, "epoch_s", "measured", MNIST_MODEL, 128, platform="gpu",
                      selection="pooled-trained", dataset="mnist")  # fmt: skip
    ran = [
        trained_epoch(gpus, d, MNIST_MODEL, 128, QUESTION_EPOCHS) for d in sorted(set(gpus.device))
    ]
    g = predicted(t, "epoch_s", "gpu-t4", MNIST_MODEL, 128)
    t4 = f"T4 {fmt(g)} (predicted from its loop step)" if g else "no T4 prediction yet"
    # the T4's epoch over the CPU's made alike (from its loop step, as the T4's is): row
    # 5's ratio, the answer; over the CPU's very epoch quoted here, which holds what a
    # loop step leaves out, beside it
    over = one(t, quantity="speedup", denominator=g["id"], numerator=c["id"]) if g and c else None
    alike = rows(t, quantity="speedup", denominator=g["id"]) if g else t.iloc[:0]
    alike = alike[alike.extra.str.endswith("both from loop steps")]
    if over and c and len(alike := alike[alike.extra.str.contains(f"'s on {c['dataset']},")]) == 1:
        alike = alike.iloc[0].to_dict()
        base = one(t, id=alike["numerator"])
        # one CPU epoch in the answer, the measured one, and the T4's over it; the one
        # made alike (from its loop step, as the T4's is: row 5's ratio) in the band
        t4 = f"T4 predicted {fmt(g)}, {fmt(over)} the CPU's speed"
        # the CPU's two epochs may come from two sittings of its VM: said where they do
        step = one(t, id=base["numerator"])
        apart = " (another sitting)" if step and step.get("sitting") != c.get("sitting") else ""
        caveat = (f"; over the CPU's epoch from its loop step{apart}, {fmt(base)}: {fmt(alike)}"
                  " (both from loop steps)")  # fmt: skip
    else:
        alike, base, caveat = None, None, ""
        t4 += f", {fmt(over)} faster" if over else ""
    extras = {r["extra"] for r in [c, *ran] if r and r["selection"] != DERIVED}
    if len(extras) == 1 and c and (n := extras.pop()).endswith(" epochs"):
        # one kind of run said once: "5-epoch runs' median epoch: CPU 15.8 s; H100 731 ms"
        head = f"{MNIST_MODEL} b128, {n.removesuffix(' epochs')}-epoch runs' median epoch: "
        parts = [f"CPU {fmt(c)} ({c['formulation']} formulation, {runs_of(c)})"]
        parts += [runs_each(ran)] if ran else []
    else:
        head = "an epoch: "
        parts = [f"CPU {epoch_words(c)}" if c else none_on(cpu, "mnist_cnn epoch")]
        parts += [f"{r['device']} {fmt(r)} measured, {r['extra']}" for r in ran]
    said, check = epoch_check(t)
    caveat += said
    return Said(head + "; ".join([*parts, t4]), [c, *ran, g, over, alike, base, check], None,
                caveat)  # fmt: skip


LOOP_SAID = "device"  # the loop row 13 quotes: the chip's rate with no host in the step


def q_flops(t: pd.DataFrame, cpu: str | None) -> Said:
    """The MNIST CNN per chip: b128 f32 on one chip with the host out of the step (whole
    epochs in the device loop where the chip ran them, else the step loop; a prediction's
    device step), each platform's own formulation, on MNIST where the model ran on it. A
    measured chip's FLOP/s over its own measured matmul rate (the one ceiling a CPU has
    too), with each accelerator's largest seed model beside it where that is another
    model's; a predicted chip's over its datasheet's peak, the peak named."""
    seeds = {"batch": 128, "precision": "f32", "devices": 1, "model": SEED_MODELS,
             "loop": ["device", "step"], "extra": "-"}  # fmt: skip
    flops = rows(t, quantity="flops_per_s", kind="measured", **seeds)
    flops = flops[(flops.platform != "cpu") | (flops.device == cpu)]
    own = rows(t, quantity="matmul_fraction", **seeds)
    sheet = rows(t, quantity="mfu", kind="predicted", **seeds)
    rates = rows(t, quantity="flops_per_s", kind="predicted", id=list(sheet.numerator.dropna()))
    parts, picked, caveat = [], [], ""
    for platform in ("cpu", "gpu", "tpu"):  # measured where a chip ran them, else predicted
        m = flops[flops.platform == platform]
        m = m if len(m) else sheet[sheet.platform == platform]
        m = m[m.formulation == platform_formulation(platform)]
        # per model and chip: its device loop before its step loop, MNIST before the rest
        first = ((m.loop != "device") * 2 + (m.dataset != "mnist")).argsort(kind="stable")
        m = m.iloc[first].drop_duplicates(["model", "device"]).sort_values("device", kind="stable")
        mnist = m[m.model == MNIST_MODEL].to_dict("records")
        if not mnist:
            continue
        picked += m.to_dict("records")  # every seed model per chip, on the page
        named = "CPU" if platform == "cpu" else "/".join(r["device"] for r in mnist)
        if mnist[0]["kind"] != "measured":
            peaks = {str(n).removeprefix("of its datasheet's ").removesuffix(" peak")
                     for n in m.note}  # fmt: skip
            fractions = "/".join(fmt(r) for r in mnist)
            reached = [one(rates, id=r["numerator"]) for r in mnist]
            picked += [r for r in reached if r]
            rates_said = f"{each_text([fmt(r) for r in reached])}, " if all(reached) else ""
            peak = "/".join(sorted(peaks))
            parts.append(f"predicted {named} {rates_said}{fractions} of {peak} peak")
            continue
        fracs = own[own.numerator.isin(m.id)]
        picked += fracs.to_dict("records") + rows(t, id=list(fracs.denominator)).to_dict("records")
        of_own = [one(fracs, numerator=r["id"]) for r in mnist]
        how = f" ({mnist[0]['formulation']} formulation)" if platform == "cpu" else ""
        said = f"{named} {each_text([fmt(r) for r in mnist])}{how}"
        measured_said = "/".join(fmt(r) for r in of_own) if all(of_own) else ""
        # one ceiling for every measured chip, its own measured matmul rate (a CPU's only
        # one; f32 matmuls at JAX's default precision, the legend says: TF32 on an H100);
        # a GPU's datasheet peak in the band, as a predicted chip's is its only one
        of_peak = datasheet_fractions(t, mnist, picked) if platform != "cpu" else ""
        if measured_said:
            said += f", {measured_said} of measured matmul"
            if of_peak:
                caveat += f"; {named}: {of_peak}"
        elif of_peak:
            said += f", {of_peak}"
        if platform == "cpu":  # the CPU at its best too: row 5's baseline
            caveat = cpu_at_its_best(flops, own, mnist[0], picked)
        tops = fracs.loc[fracs.groupby("device", sort=False).value.idxmax()]
        if platform != "cpu" and len(tops) == len(mnist) and set(tops.model) != {MNIST_MODEL}:
            # each chip's highest, a maximum said as one beside the answer's typical step
            models = set(tops.model)  # named once where every chip's is one model's
            each = "/".join(f"{'' if len(models) == 1 else r['model'] + ' '}{fmt(r)}"
                            for r in tops.to_dict("records"))  # fmt: skip
            loops = "".join(f" {x}-loop" for x in sorted(set(tops.loop) - {LOOP_SAID}))
            named_once = f" {models.pop()}" if len(models) == 1 else ""
            chips = "/".join(tops.device)
            caveat += (f"; seed models' highest of measured matmul at b128,{named_once}{loops}: "
                       f"{chips} {each}")  # fmt: skip
        parts.append(said)
    if not parts:
        return Said(none_on(cpu, "FLOP/s measured"), picked)
    # measured in the device loop, predicted as the device step: the host out of both
    head = f"{MNIST_MODEL} b128 f32, host excluded: "
    # a predicted rate unvalidated as a device step: the same platform's published JAX
    # loops beside it, the nearest evidence of which way its predictions err
    guessed = [r for r in picked if r and r["kind"] == "predicted" and r["quantity"] == "mfu"]
    band = None
    if guessed and not any(banded(r) for r in guessed):
        platforms = sorted({r["platform"] for r in guessed})
        near = [one(t, quantity="band", device=p, model="small programs", extra=JAX_VERSUS)
                for p in platforms]  # fmt: skip
        near = [b for b in near if b is not None]
        picked += near
        loops = "; ".join(f"{jax_loops(b)} (loop steps, not this device step)" for b in near)
        band = f"unvalidated (device step){'; ' + loops if loops else ''}"
    return Said(head + "; ".join(parts), picked, band, caveat)


def datasheet_fractions(t: pd.DataFrame, shown: list[Row], picked: list) -> str:
    """ "1.67%/1.64% of TF32 peak": each `shown` FLOP/s row's fraction of its chip's
    datasheet peak, the rows added to `picked`; "" where a chip has none."""
    sheet = [one(t, quantity="mfu", kind="measured", numerator=r["id"]) for r in shown]
    if not all(sheet):
        return ""
    picked += sheet
    peaks = sorted({str(r["note"]).removeprefix("of its datasheet's ").removesuffix(" peak")
                    for r in sheet})  # fmt: skip
    return f"{'/'.join(map(fmt, sheet))} of {'/'.join(peaks).upper()} peak"


def cpu_at_its_best(flops: pd.DataFrame, own: pd.DataFrame, shown: Row, picked: list) -> str:
    """ "; the CPU at its best, onednn: 243 GFLOP/s, 49.6%": the CPU's fastest formulation
    of the `shown` step where that is another, its rows added to `picked`; else nothing."""
    same = flops[(flops.platform == "cpu") & (flops.model == shown["model"])
                 & (flops.loop == shown["loop"]) & (flops.dataset == shown["dataset"])]  # fmt: skip
    if not len(same):
        return ""
    best = most(same)
    if best["id"] == shown["id"]:
        return ""
    frac = one(own, numerator=best["id"])
    picked += [best, frac]
    of = f", {fmt(frac)}" if frac else ""
    return f"; the CPU at its best, {best['formulation']}: {fmt(best)}{of}"


def q_vmap(t: pd.DataFrame, cpu: str | None) -> Said:
    """vmap's speed over K models one after another per K on the reference CPU, per
    formulation, and on each accelerator that ran it; one the reference CPU has not run,
    from another CPU, named. Two clocks read it: the trained epochs (what a user waits
    for; the figures said, where the runs trained) and the timed steps (the band's). Per
    clock, K=1 batches nothing, so its distance from 1x is how far noise reaches on that
    device; a K is faster or slower only where every clock that read it says so."""
    s = rows(t, quantity="speedup", kind="measured", selection="equal-batch")
    s = s[s.ensemble_mode == "vmap"]
    here = s[(s.platform == "cpu") & (s.device == cpu)]
    if not len(here):
        return Said(none_on(cpu, "ensemble run"))
    other_cpu = (s.platform == "cpu") & (s.device != cpu)
    s = s[~other_cpu | ~s.formulation.isin(set(here.formulation))]
    read = s.numerator.map(t.set_index("id").quantity)  # the clock: its sides' quantity
    clock = read.map({"epoch_s": "epochs", "step_s": "steps"})
    s = s.assign(k=s.ensemble_size.astype(int), ref=s.device != cpu, clock=clock)
    # who ran it: a CPU by its formulation, "CPU (xla)", another CPU by its name too; an
    # accelerator by its name (its formulation is always xla)
    on_cpu = (" (" + s.formulation.astype(str) + ")").where(s.platform == "cpu", "")
    s = s.assign(who=s.device.where(s.ref, "CPU") + on_cpu,
                 k_said=[f"K={r['k']} {fmt(r)}" for r in s.to_dict("records")])  # fmt: skip
    s = s.sort_values(["ref", "device", "formulation", "k"])
    # each device and formulation said by its epochs where it trained, else its steps
    trained = set(zip(*s[s.clock == "epochs"][["device", "formulation"]].values.T, strict=True))
    said_by = ["epochs" if (d, f) in trained else "steps"
               for d, f in zip(s.device, s.formulation, strict=True)]  # fmt: skip
    shown, beside = s[s.clock == said_by], s[s.clock != said_by]
    noise = {key: max(max(v, 1 / v) for v in g.value)
             for key, g in s[s.k == 1].groupby(["device", "clock"])}  # fmt: skip

    def verdict(r: Row) -> str:
        n = noise.get((r["device"], r["clock"]), 1.0)
        return "faster" if r["value"] > n else "slower" if r["value"] < 1 / n else "within noise"

    def judged(r: Row) -> str:
        if r.get("flag") == ACROSS_SITTINGS:  # another VM's speed is in it: no verdict
            return "unjudged"
        same = beside[(beside.device == r["device"]) & (beside.formulation == r["formulation"])
                      & (beside.k == r["k"])].to_dict("records")  # fmt: skip
        said = {verdict(x) for x in [r, *same]}
        return said.pop() if len(said) == 1 else "within noise"  # the clocks disagree

    many = shown[shown.k > 1]
    many = many.assign(verdict=[judged(r) for r in many.to_dict("records")])
    said = "; ".join(
        f"{v} " + ", ".join(f"{who} {', '.join(g.k_said)}"
                            for who, g in many[many.verdict == v].groupby("who", sort=False))
        for v in ("faster", "within noise", "slower", "unjudged") if (many.verdict == v).any()
    )  # fmt: skip
    faster, unjudged = (many.verdict == "faster").sum(), (many.verdict == "unjudged").sum()
    head = "No" if not faster else "Yes" if faster == len(many) - unjudged else "Partly"
    where = "" if (s.platform != "cpu").any() else "; no GPU or TPU run yet"
    of = "trained epochs" if (shown.clock == "epochs").all() else "epochs where trained"
    model = (
        f"{s.iloc[0].model} b{int(s.iloc[0].batch)}" if s.batch.nunique() == 1 else s.iloc[0].model
    )
    text = f"{head}: {said} ({model}, {of}; formulations parenthesised{where})"
    band = vmap_band(shown, beside, cpu, noise, bool(unjudged))
    return Said(
        text, s.drop(columns=["k", "ref", "clock", "who", "k_said"]).to_dict("records"), band
    )


def vmap_band(
    shown: pd.DataFrame,
    beside: pd.DataFrame,
    cpu: str | None,
    noise: dict[tuple[str, str], float],
    unjudged: bool,
) -> str:
    """Row 14's band: each device's `noise` (per device and clock: its K=1's furthest
    factor from 1x either way) by the clock said (the other's beside, in parentheses),
    the rule, then the other clock's K>1 figures per device."""
    reads = []
    for device, g in sorted(shown[shown.k == 1].groupby("device"), key=lambda dg: dg[0] != cpu):
        other = beside[(beside.device == device) & (beside.k == 1)]
        also = f" ({value_text(noise[device, other.clock.iloc[0]], 'x')})" if len(other) else ""
        on = " on the CPU" if device == cpu else f" on the {device}"
        reads.append(f"{value_text(noise[device, g.clock.iloc[0]], 'x')}{also}{on}")
    band = "-"
    if reads:
        which, clocks = (" by epochs (by timed steps)", "both") if len(beside) else ("", "it")
        band = f"noise (K=1's distance from 1x){which}: {', '.join(reads)}; faster or slower"
        band += f" only beyond {clocks}"
    many = beside[beside.k > 1].groupby(["device", "formulation"], sort=False)
    each = [f"{g.who.iloc[0]} {', '.join(g.k_said)}" for _, g in many]
    if each:
        clock = "timed steps" if (beside.clock == "steps").all() else "the other clock"
        band += f"; {clock}: " + "; ".join(each)
    if unjudged:  # a ratio across sittings holds two VMs' speeds as well
        band += "; unjudged: sides from two sittings"
    return band


def q_library(t: pd.DataFrame, cpu: str | None) -> Said:
    """oneDNN's step over the xla formulation's on the reference CPU, per loop; in the
    device loop also how much the xla formulation's own steps slow down there, which
    that range holds besides oneDNN's worth. Then cuDNN's on the GPUs (`cudnn_worth`);
    seed 004's own cuDNN figure in the band, with why it is not the same question."""
    mine = {"quantity": "speedup", "kind": "measured", "device": cpu, "precision": "f32"}
    s = rows(t, formulation="onednn", extra="vs xla formulation", **mine)
    seed = published(t, "seed004-cudnn-speedup")
    caveat, cudnn_rows = cudnn_worth(t)
    seeds = f"seed 004's cuDNN {fmt(seed)}: newer cuDNN and GPU over older" if seed else None
    if not len(s):
        return Said(f"{none_on(cpu, 'oneDNN run')}; {caveat}", [seed, *cudnn_rows], seeds)
    xla = rows(t, formulation="xla", extra=DEVICE_OVER_STEP_LOOP, **mine)
    cell = ["model", "batch", "dataset"]
    parts, seen, said = [], [], ""
    for loop in ("step", "device"):
        g = s[s.loop == loop]
        if not len(g):
            continue
        lo, hi = span(g)
        way, where = direction(lo, hi), ""
        # the xla steps' own device-loop speedups on the same cells
        inside = xla[xla.set_index(cell).index.isin(g.set_index(cell).index)]
        if loop == "device" and len(inside):
            a, b = span(inside)
            seen += [a, b]
            if b["value"] < 1:  # as the slowdown it is: "2.39x-9.9x", not "0.101x-0.419x"
                slows = span_text(value_text(1 / b["value"], "x"), value_text(1 / a["value"], "x"))
                where = f", where xla itself slows {slows}"
            else:
                where = f", where xla's own steps change {fmt(a)}-{fmt(b)}"
        by = "" if way == said else f"{way} by "  # a direction both loops share, said once
        parts.append(f"{by}{fmt(lo)}-{fmt(hi)} ({loop} loop{where})")
        seen, said = [*seen, lo, hi], way
    per_loop = ", ".join(parts)
    band = f"{per_loop}; {seeds}" if seeds else per_loop
    seen += [seed, *cudnn_rows]
    best = rows(t, formulation="onednn", extra=BEST_OVER_BEST, **mine)
    if not len(best):
        return Said(f"oneDNN vs xla formulation, same CPU: {per_loop}; {caveat}", seen, seeds)
    # each at its best, whatever loop: over jaxcnn's own default on a CPU first (what the
    # library adds to the best without it), then over xla's (its worth without xla's slow
    # path; each loop's range in the band holds that slow path too)
    over_cpu = rows(t, formulation="onednn", extra=BEST_OVER_CPU, **mine)
    first = beyond_noise(t, over_cpu, "the default (cpu) formulation", seen)
    # a direction both share, said once
    said = [first, beyond_noise(t, best, "xla's", seen, said_way=first)]
    models = ", ".join(sorted(set(best.model)))
    # how far to trust each end: the cells whose ratio could be 1x within its two steps'
    # own spreads (p10-p90 of each side's timed steps)
    unsure = reaching_one(t, pd.concat([over_cpu, best]))
    if unsure:
        band = f"{band}; could be 1x within both steps' p10-p90: {unsure}"
    text = f"oneDNN, same CPU ({models}), at their best: {'; '.join(filter(None, said))}"
    # what a user's fit sees first: oneDNN over xla's convolutions (the seed's question)
    # and over jaxcnn's default, each in jaxcnn's loop, host work included; each at its
    # best (a kernels' worth) in the band
    in_loop = [(name, rows(t, formulation="onednn", extra=extra, **mine))
               for name, extra in (("xla's", LOOP_OVER_XLA),
                                   ("the default (cpu)", LOOP_OVER_CPU))]  # fmt: skip
    in_loop = [(name, g) for name, g in in_loop if len(g)]
    if not in_loop:
        return Said(f"{text}; {caveat}", seen, band)
    band = f"{text.removeprefix('oneDNN, ')}; {band}"
    text = f"oneDNN in {LOOP}, one CPU: {worth_in_loop(in_loop, seen)}"
    every = pd.concat([g for _, g in in_loop])
    apart = every[every.flag.astype(str).str.startswith(ACROSS_SITTINGS)]
    if len(apart):  # its two sides from two sittings of a CPU label whose VMs differ
        cells = ", ".join(dict.fromkeys(f"{r['model']} b{int(r['batch'])}"
                                        for r in apart.to_dict("records")))  # fmt: skip
        band += f"; in {LOOP}, {cells}: its sides from two sittings"
    return Said(f"{text}; {caveat}", seen, band)


def worth_in_loop(groups: list[tuple[str, pd.DataFrame]], seen: list) -> str:
    """ "over xla's 2.1x-3.4x faster, over the default (cpu) 1.1x-1.7x; slower at
    lenet5_keras b32 (1.69x, 2.57x)": per baseline, the range of the cells where oneDNN
    is faster (its way said once), then the cells where it is slower, each by how much
    over each baseline in that order, each of one sitting; the rows added to `seen`."""
    said, slow, way = [], {}, ""
    for name, g in groups:
        # a ratio whose sides ran in two sittings of one CPU label (VMs that differ) is
        # the band's, flagged, not the answer's
        g = g[~g.flag.astype(str).str.startswith(ACROSS_SITTINGS)]
        fast = g[g.value >= 1]
        if len(fast):
            lo, hi = span(fast)
            seen += [lo, hi]
            said.append(f"over {name} {span_text(fmt(lo), fmt(hi))}{'' if way else ' faster'}")
            way = "faster"
        for r in g[g.value < 1].to_dict("records"):
            seen.append(r)
            cell = f"{r['model']} b{int(r['batch'])}"
            slow.setdefault(cell, []).append((name, value_text(1 / r["value"], "x")))

    def slower(cell: str, xs: list[tuple[str, str]]) -> str:
        whom = "both" if len(xs) == len(groups) > 1 else "/".join(n for n, _ in xs)
        return f"slower than {whom} at {cell} ({', '.join(x for _, x in xs)})"

    slowest = "; ".join(slower(cell, xs) for cell, xs in slow.items())
    return "; ".join(filter(None, [", ".join(said), slowest]))


def beyond_noise(
    t: pd.DataFrame, ratios: pd.DataFrame, over: str, seen: list, said_way: str = ""
) -> str:
    """ "over xla's 1.38x-2.11x faster (b128-b512), within noise at b32": the range of
    `ratios` whose two steps' spreads keep them off 1x (`ratio_spread`), and the cells
    whose could be 1x, by batch (by model and batch where a batch is in both); their rows
    added to `seen`; its direction left out where `said_way` (the clause before) said
    it. "" where there are none."""
    if not len(ratios):
        return ""
    near = [could_be_one(t, x) is not None for x in ratios.to_dict("records")]
    unsure, sure = ratios[near], ratios[[not n for n in near]]
    both = set(sure.batch) & set(unsure.batch)

    def cells(g: pd.DataFrame) -> str:
        if not both:
            return batches_text(g.batch)
        return ", ".join(f"{r['model']} b{int(r['batch'])}" for r in g.to_dict("records"))

    said = f"over {over}"
    if len(sure):
        lo, hi = span(sure)
        seen += [lo, hi]
        where = f" ({cells(sure)})" if len(unsure) else ""
        way = direction(lo, hi)
        way = "" if f" {way}" in said_way else f" {way}"
        said += f" {fmt(lo)}-{fmt(hi)}{way}{where}"
    if len(unsure):
        seen += unsure.to_dict("records")
        said += f"{',' if len(sure) else ''} within noise at {cells(unsure)}"
    return said


def ratio_spread(t: pd.DataFrame, r: Row) -> tuple[float, float] | None:
    """The range a measured ratio `r` spans within its two sides' own p10-p90 (its
    numerator's low over its denominator's high, and its high over the other's low); None
    where a side has none."""
    a, b = one(t, id=r["numerator"]), one(t, id=r["denominator"])
    if not (a and b and a["spread"] == b["spread"] == P10_P90):
        return None
    return a["lo"] / b["hi"], a["hi"] / b["lo"]


def could_be_one(t: pd.DataFrame, r: Row) -> tuple[float, float] | None:
    """`ratio_spread` of `r` where it holds 1x (the ratio could be none), else None."""
    found = ratio_spread(t, r)
    return found if found and found[0] <= 1 <= found[1] else None


def reaching_one(t: pd.DataFrame, ratios: pd.DataFrame) -> str:
    """ "lenet5_keras b32 0.943x-1.14x over cpu, ...": each ratio of `ratios` whose range
    within its sides' spreads (`ratio_spread`) holds 1x, by its cell and what it is over;
    "" where none does."""
    said = []
    for r in ratios.to_dict("records"):
        if found := could_be_one(t, r):
            over = "cpu" if r["extra"] == BEST_OVER_CPU else "xla"
            lo, hi = (value_text(v, "x") for v in found)
            said.append(f"{r['model']} b{int(r['batch'])} {span_text(lo, hi)} over {over}")
    return ", ".join(said)


def cudnn_worth(t: pd.DataFrame) -> tuple[str, list[Row]]:
    """cuDNN's worth on each GPU that ran the bench's GEMM cells: XLA's convolutions (it
    calls cuDNN for them) over the same convolutions as GEMMs over patches (the `cpu`
    formulation), the inverse of that formulation's speedup over xla's, both loops;
    else that none has run."""
    g = rows(t, quantity="speedup", kind="measured", platform="gpu", formulation=GEMMS,
             precision="f32", extra="vs xla formulation")  # fmt: skip
    if not len(g):
        return "cuDNN unmeasured (no GPU bench)", []
    lo, hi = span(g)
    worth = span_text(value_text(1 / hi["value"], "x"), value_text(1 / lo["value"], "x"))
    gpus = "/".join(sorted(set(g.device)))
    return f"cuDNN's convolutions over GEMMs, same GPU ({gpus}): {worth}", [lo, hi]


def direction(lo: Row, hi: Row) -> str:
    """Which way a range of speedups (its smallest and largest rows) goes."""
    return "faster" if lo["value"] >= 1 else "slower" if hi["value"] < 1 else "either way"


def span(rows_: pd.DataFrame) -> tuple[Row, Row]:
    """The rows of the smallest and the largest value."""
    return least(rows_), most(rows_)


@dataclass(frozen=True)
class Question:
    number: int
    seeds: str
    text: str
    page: str
    answer: Callable[[pd.DataFrame, str | None], Said]


QUESTIONS = [
    Question(1, "000", "Does the cats-vs-dogs CNN fit an MX150 at batch 16, run out at 32, "
             "fit a T4 at 128?", "batch", q_oom),
    Question(2, "000", "Its step time on the MX150 and T4 against the CPU, beside the "
             "seed's own?", "devices", q_seed_step),
    Question(3, "000", "One epoch on each device?", "devices", q_seed_epoch),
    Question(4, "000", "The same accuracy and curves on every device?", "accuracy", q_accuracy),
    Question(5, "001, 003", "How much faster is a GPU than the CPU for the MNIST CNN?",
             "devices", q_gpu_vs_cpu),
    Question(6, "001", "And on the seed's K80?", "devices", q_k80),
    Question(7, "001", "When does a GPU not pay (host copy, small work)?", "crossover", q_host),
    Question(8, "001, 004", "Does data parallelism over several GPUs scale? Model "
             "parallelism?", "scaling", q_scaling),
    Question(9, "002", "Above how many parameters does a GPU beat the CPU?", "crossover",
             q_crossover),
    Question(10, "002", "TPU or GPU, per chip at equal batch (128)?", "targets", q_tpu_vs_gpu),
    Question(11, "002", "Cost per epoch (and FLOP/s per watt)?", "targets", q_cost),
    Question(12, "003", "5 epochs of the MNIST CNN: CPU against a T4?", "devices",
             q_five_epochs),
    Question(13, "004", "What FLOP/s do CPU, GPU and TPU reach, against peak?", "matmul",
             q_flops),
    Question(14, "004", "Training K models at once with vmap: faster?", "ensemble", q_vmap),
    Question(15, "004", "What is the kernel library worth (xla vs oneDNN on CPU; cuDNN)?",
             "bench", q_library),
]  # fmt: skip


def _same_band(said: str, band: str) -> bool:
    """Whether `band` is `said`: a band by its median, worst and n, a longer
    "unvalidated (...)" word for word."""
    if band[:1].isdigit():
        return said.split(" (")[0] == band.split(" (")[0]
    return len(band.split()) > 2 and said == band


def as_row(earlier: Answer, band: str) -> str:
    """A band an earlier row said in full, pointed at with its first clause again (its
    median, worst, count, direction and what it was measured on: "as row 5's: 1.36x off
    (worst 6.1x, n=197, ..., leave one chip out of H100 SXM/H200)"): the reader needs no
    other row to weigh it."""
    head = re.match(r"\S+ off \([^;)]*", band)
    return f"as row {earlier.number}'s" + (f": {head[0]})" if head else "")


def answers(table: pd.DataFrame) -> list[Answer]:
    """The fifteen answers, in the seeds' order."""
    cpu = reference_cpu(table)
    out: list[Answer] = []
    for q in QUESTIONS:
        said = q.answer(table, cpu)
        words = [band_words(r) for r in said.rows if r and r["kind"] == "predicted"]
        band = said.band if said.band is not None else next(iter(words), "-")
        earlier = next((a for a in out if _same_band(a.band, band)), None)
        band = as_row(earlier, band) if earlier else band  # said once on the screen
        # a caveat beside no band stands alone, not after a "-"
        band = said.caveat.removeprefix("; ") if band == "-" and said.caveat else band + said.caveat
        known, ids = kinds(said.rows), [r["id"] for r in said.rows if r]
        out.append(Answer(q.number, q.seeds, q.text, said.text, known, band, q.page, ids))
    return out
