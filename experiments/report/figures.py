"""Records -> one table of figures: every number the report, the README block and the
plots show is a row here, picked once by a named selection rule.

One row per figure (`COLUMNS`): what it is (`quantity`, `unit`), how it is known (`kind`:
measured on a device at hand, compiled by a target's own compiler, predicted by the
per-kernel model, or published by someone else), the workload and device it belongs to,
the rule that picked it (`selection`, one of `RULES`), the records it comes from, and for a
prediction its error band, measured out of sample on the same quantity, or "unvalidated".
A ratio is a row too, naming the ids of both sides. `KEY` is what makes a figure one
figure: no two rows share it (tests/test_report.py), so a quantity has one value on every
page.

Pure functions of the records, the published references and the constants file; JAX is
imported only where a compiled program is priced (jaxcnn.perf.predict).
"""

from __future__ import annotations

import functools
import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from experiments.predict import shown as predictions
from experiments.predict.shown import prediction_faster
from experiments.records import (
    CompileRecord,
    EnsembleRecord,
    InputRecord,
    Record,
    TrainRecord,
    labels,
    recorded_at_or_oldest,
)
from experiments.records.schema import Summary
from experiments.records.select import (
    device_of,
    fits,
    is_compiled,
    kind_of,
    largest_fit,
    one_sitting,
    sitting,
    superseded,
    usable_bytes,
)
from experiments.records.stats import summarize
from experiments.records.workload import ENSEMBLE_MODES, F32_HIGHEST, precision_of
from experiments.report.fmt import value_text
from experiments.studies.page import (
    ALLOCATOR_PEAK,
    AT_ITS_BEST,
    BAND_EITHER_WAY,
    DEVICE_OVER_STEP_LOOP,
    LOOP,
    ON_THE_CHIP,
    OURS_FOR_PUBLISHED,
    OURS_LOOP_STEP,
    SEED_DATASETS,
    SITTING_TO_SITTING,
    USABLE,
    WORKLOAD_PEAK,
    of_ensembles,
    rows,
)
from experiments.studies.scaling import EFFICIENCY_BAND
from jaxcnn import host_memory
from jaxcnn.choices import platform_formulation
from jaxcnn.perf.chips import USABLE_FRACTION
from jaxcnn.perf.host import PARTS as HOST_PARTS  # jaxcnn.host_loop's parts of a step

# Each column of the table and what it holds; figures.schema.json (beside figures.csv) and
# the column dictionary in docs/usage.md are generated from these, `TYPES` and `allowed`.
MEANINGS = {
    "id": "the figure's key: KEY's columns joined by a vertical bar; unique",
    "quantity": "what the figure is (its unit in `unit`)",
    "kind": "how it is known: measured on a device at hand, derived by arithmetic from a "
    "measured figure (an epoch as its measured step times its steps), compiled by a "
    "target's own compiler, predicted by the per-kernel model, or published by someone else",
    "value": "the figure, in `unit`",
    "unit": "the unit of `value`, `lo` and `hi`",
    "lo": "the low end of its spread, in `unit` (`spread` says which)",
    "hi": "the high end of its spread, in `unit` (for a band: the worst factor)",
    "spread": "what `lo` and `hi` are",
    "n": "how many observations the figure summarises (steps, epochs, windows, seeds or "
    "runs: `spread` says which)",
    "model": "the model (with its overrides, e.g. `mlp width=64`), `matmul`, or for a band "
    "the programs it covers",
    "params": "trainable parameters of the model",
    "dataset": "the data it trained on (`-`: none, not stated, or not applicable)",
    "batch": "the global batch, in images (empty: a figure over batches)",
    "precision": "the precision the step computes in (`amp`: a published source's; `tf32`: "
    "a published source's, or a matmul rate measured as TF32 passes; `f32-highest`: f32 with "
    "JAX's matmul precision `highest`, no TF32 or bf16 passes)",
    "formulation": "how convolutions and pools are computed (jaxcnn.formulation); "
    "`-`: another framework's step, or not applicable (a band, a peak)",
    "loop": "`step`: one dispatch a step from the host; `device`: whole epochs on the device; "
    "`-`: another framework's, or not applicable",
    "placement": "how the step is placed on its devices (`data-parallel`: a published source's)",
    "framework": "who ran the step: `jax`, a peer (`torch eager`, ...), `paired`, a seed, "
    "`jaxcnn` (our prediction of a published step) or a published source's framework",
    "extra": "what else sets the figure apart: epochs, K models, a host-loop part, a ratio's "
    "baseline, a published id (`-`: nothing)",
    "ensemble_size": "K, the models an ensemble's step trains (a ratio's: the K it is of); "
    "empty: one model",
    "ensemble_mode": "how an ensemble's K models train: `vmap` (one vmapped step of all K) or "
    "`sequential` (K steps one after another; a ratio of the two: `vmap`); `-`: one model",
    "epochs": "the whole epochs its runs trained (a trained run's accuracy, its curve's points, "
    "an epoch's time); empty: not a figure of trained epochs",
    "epoch": "the epoch a curve's point is of (1 to `epochs`); empty: not a point of a curve",
    "seed": "the seed of the one run it is of (a trained run's accuracy and curve); empty: of "
    "several seeds' runs, or none",
    "platform": "the platform of the device",
    "device": "a CPU's model and vector extensions, a target, a published chip, or a platform",
    "chip": "the chip `device` is or holds, one name per chip across measured, published "
    "and predicted rows (a target's chip: `gpu-h100` is `H100 SXM`); a CPU's model; a "
    "platform's band of published loops that all ran on one chip: that chip; `-` for another "
    "platform's band or a published figure of several chips",
    "devices": "how many devices the step ran on",
    "selection": "the rule that picked it (figures.RULES, printed on every page)",
    "records": "the run_ids of the records it comes from, space-separated",
    "sitting": "a measured figure's sitting (one machine, boot and code): when the sitting "
    "of its newest run began; a measured ratio's, its two sides' (`a / b` where they "
    "differ); two sittings of one CPU label can differ by up to 2x",
    "software": "the framework and version of a measured figure's newest run (`jax 0.10.2`, "
    "a peer's `torch 2.13.0+cpu`); a measured ratio's, its two sides' (`a / b` where they "
    "differ): two chips' figures may come from two releases",
    "band_median": "a prediction's held-out factor max(predicted/actual, actual/predicted): "
    "the median",
    "band_worst": "the same factor: the worst",
    "band_n": "how many held-out observations the band has",
    "band_faster": "which way it errs: of its band's held-out observations (`band_n`; a band's "
    "own row: `n`), how many the prediction was the faster of (a scaling band's: the more "
    "efficient of; empty: not counted)",
    "band_split": "what each held-out fit left out",
    "band_chips": "the chips a band was measured on, `/`-separated (a prediction's: its "
    "band's; a band's own row: its own): those left out one at a time (`leave one chip out "
    "...`), or the published loops' (`published JAX loops ...`); empty for any other split "
    "or where they are not all chips of the chip table",
    "band_quantity": "the quantity the band was measured on, or why a prediction has none "
    "(`unvalidated ...`)",
    "bound": "a figure that is a bound, not a point: `floor` (the true value is at least "
    "this: a predicted step with host parts left out, counted 0, and an epoch or price made "
    "from it; a largest batch whose search no failure closed), `ceiling` (at most this: a "
    "ratio over a floor); empty: a point",
    "flag": "why the figure cannot be taken as it stands (an open search, a scaling above "
    "ideal, seeds short of a target, a fit verdict or a largest batch inside the compile "
    "check's error)",
    "source": "where a published figure, a price or the constants come from",
    "note": "what else a reader must know (a host part left out, which side an error favours)",
    "numerator": "the id of the figure this one is made from: a ratio's top (a speedup is "
    "numerator / denominator), an error factor's measured figure, or the step an epoch or a "
    "price is derived from",
    "denominator": "a ratio's figure: the id of the figure below",
}
COLUMNS = list(MEANINGS)
Row = dict[str, Any]  # one figure: a value for each of COLUMNS (row() makes it)
# Text columns whose "none, not stated or not applicable" is spelled `-`.
NOT_APPLICABLE = ("dataset", "formulation", "loop", "ensemble_mode")
NUMBERS, INTEGERS = ("value", "lo", "hi", "band_median", "band_worst"), (
    "n", "params", "batch", "devices", "band_n", "band_faster", "ensemble_size", "epochs",
    "epoch", "seed"
)  # fmt: skip
REQUIRED = ("id", "quantity", "kind", "value", "unit", "model", "extra", "platform", "device",
            "devices", "selection")  # fmt: skip
OVER_ITS_RUNS = "min-max over the accelerator's runs"  # a ratio in its slowest and fastest run
# A batch search's bounds: the largest batch that fits (lo, the value) and the smallest
# found not to (hi).
FIT_TO_FAIL = "largest that fits, smallest that does not"
P10_P90 = "p10-p90"  # a timed figure's: the 10th and 90th percentiles of its steps
PUBLISHED_RANGE = "the source's range, its fastest the value"
SPREADS = (
    P10_P90,
    "min-max over epochs",
    "min-max over seeds",
    "min-max over windows",
    "min-max over runs",
    "min-max over records",
    OVER_ITS_RUNS,
    "median, worst",
    FIT_TO_FAIL,
    BAND_EITHER_WAY,
    PUBLISHED_RANGE,
)
SPLITS = ("chip", "program")  # what a held-out fit leaves out
# What makes a figure one figure: a (quantity, workload, device) key carries one value.
KEY = (
    "quantity kind model dataset batch precision formulation loop placement framework extra "
    "device devices"
).split()
PROGRAM = KEY[2:9]  # what a step computes and on what data, whoever ran it and wherever
# What else says what a figure is of (its platform, size, ensemble, epochs, seed), besides
# KEY's columns: a figure made from another carries them too.
BESIDE_KEY = ("platform", "params", "ensemble_size", "ensemble_mode", "epochs", "epoch", "seed")
KINDS = ("measured", "derived", "compiled", "predicted", "published")
BAND_COLUMNS = ("band_median", "band_worst", "band_n", "band_faster", "band_split",
                "band_chips", "band_quantity")  # fmt: skip
# One spelling per precision: a published source's name for one of ours becomes ours.
SPELLING = {"fp32": "f32", "float32": "f32", "bfloat16": "bf16", "fp16": "f16"}
PUBLISHED_PRECISIONS = ("tf32", "amp")  # a published source's (tf32: also a TF32 matmul rate)


def allowed() -> dict[str, list[Any]]:
    """The values each column with a closed set of them may hold, from the code that
    writes them."""
    from jaxcnn import choices
    from jaxcnn.perf import price

    return {
        "quantity": sorted(UNITS),
        "kind": list(KINDS),
        "unit": sorted(set(UNITS.values())),
        "precision": [*price.DTYPES, F32_HIGHEST, *PUBLISHED_PRECISIONS],
        "formulation": [*choices.FORMULATION_PROGRAMS, "-"],
        "loop": [*choices.LOOPS, "-"],
        "ensemble_mode": [*ENSEMBLE_MODES, "-"],
        "placement": [*choices.STRATEGIES, *choices.MODEL_STRATEGIES, "data-parallel"],
        "platform": ["cpu", "gpu", "tpu"],
        "spread": list(SPREADS),
        "bound": list(BOUNDS),
        "selection": list(RULES),
        "band_split": [
            *(f"leave one {s} out{more}" for s in SPLITS for more in ("", KERNELS_TOO)),
            LOOP_BAND_SPLIT,
            SCALING_SPLIT,
        ],
    }


def table_schema() -> dict[str, Any]:
    """figures.csv's columns as a Frictionless table schema: name, type, meaning, and
    the constraints (required, allowed values) a row must meet."""
    values = allowed()
    fields = []
    for name, meaning in MEANINGS.items():
        kind = "number" if name in NUMBERS else "integer" if name in INTEGERS else "string"
        constraints: dict[str, Any] = {"required": name in REQUIRED}
        if name in values:
            constraints["enum"] = values[name]
        fields.append(
            {"name": name, "type": kind, "description": meaning, "constraints": constraints}
        )
    fields[COLUMNS.index("unit")]["unitOfQuantity"] = UNITS  # the one unit of each quantity
    # a figure made from others names them by id: every such id is a row of the table
    refers = [{"fields": c, "reference": {"resource": "", "fields": "id"}}
              for c in ("numerator", "denominator")]  # fmt: skip
    return {"fields": fields, "primaryKey": ["id"], "foreignKeys": refers, "missingValues": [""]}


def column_dictionary() -> str:
    """The table schema as a markdown table: column, type, meaning, allowed values."""
    lines = ["| column | type | meaning | allowed values |", "|---|---|---|---|"]
    for f in table_schema()["fields"]:
        enum = f["constraints"].get("enum")
        values = ", ".join(f"`{v}`" for v in enum) if enum else "-"
        lines.append(f"| `{f['name']}` | {f['type']} | {f['description']} | {values} |")
    units = ", ".join(f"`{q}` {u}" for q, u in UNITS.items())
    return "\n".join(lines) + f"\n\nThe unit of each quantity: {units}."


# Every selection rule a row may name, stated once: the pages print these words.
RULES = {
    "newest": "the newest ok record of exactly this workload on exactly this device "
    "(records that name no CPU model stand in only where no record of the same host "
    "names one)",
    "pooled": "every ok record of exactly this workload on exactly this device from the "
    "newest one's sitting (its git commit, machine id, boot and tree), each a "
    "run: the median of the runs' figures, with their range (min-max over runs); a single "
    "run's own spread; a compile time the slowest run's (a later compile of one program in "
    "a process can reuse the first's autotuning, so a single run's may be such a one; "
    "records that name no CPU model stand in only where no record of the same host names "
    "one)",
    "newest-trained": "the newest ok record of this workload on this device that trained "
    "whole epochs (its accuracy; its epoch times are `pooled-trained`, its step times "
    "`pooled`)",
    "pooled-trained": "every ok record of this workload on this device that trained as "
    "many whole epochs, whatever its seed, from the newest one's code and machine id, "
    "each a run: the median of the runs' median "
    "epochs, with their range (min-max over runs); a single run's min-max over its epochs",
    "newest-compile": "the newest compile of exactly this workload for this target, by "
    "the target's own compiler (a target whose device count has changed since is "
    "another program, left out)",
    "batch-search": "the largest batch that compiled within the memory JAX can use of the "
    "chip, with the smallest found above it that does not (a sixteenth apart at most); open "
    "(flagged) where no larger batch was found not to fit. A TPU's compiled memory does not "
    "grow steadily with the batch: there it is the largest fit the search found",
    "per-kernel": "the per-kernel model's prediction of the newest compile of this "
    "workload for this target, with the current constants",
    "machine-best": "the highest matmul rate any run on this machine measured (a busy "
    "moment only lowers it)",
    "cpu-best": "the fastest step timed alone (the host's loop left out, as a predicted "
    "device step leaves it) that any configuration, formulation, loop or framework "
    "reached for this step (model, batch, precision) on this machine (on a measured "
    "side's own data set where it ran on it): the baseline of every accelerator's speedup "
    "of that step",
    "like-for-like": "the same program on both sides: the xla formulation in the step "
    "loop on one device",
    "loop-vs-loop": "jaxcnn's loop on both sides, each device in the formulation jaxcnn "
    "picks there by default "
    "(the accelerator's measured, or its predicted loop step): what a user running the "
    "same fit on each sees",
    "equal-batch": "both chips at the same global batch and precision",
    "seeds": "every seed of this configuration; the target counts as reached only where "
    "every seed reached it",
    "published": "as published, with its source and quoted row",
    "seed-own": "a seed's own published figures divided: its accelerator's epoch against "
    "its own CPU's, of the same model and batch",
    "epoch-from-step": "an epoch of the model's training set as the step times its "
    "steps (evaluation apart), where no epoch was timed",
    "as-recorded": "as a CPU's records state it: the processors a run could use (a peer "
    "run's os.cpu_count, a newer run's affinity), the most common value with its min-max "
    "over the records that state it; a CPU label names a model and its extensions, not how "
    "many cores a VM of it has; logical processors (a VM's vCPUs), not physical cores",
    "over-k1": "a K-model vmap speedup over the same device's and formulation's K=1 "
    "speedup: K=1 batches nothing, so what it reads is the two paths' own difference (their "
    "programs, or the clock's noise), divided out here",
    "epoch-vs-trained": "an epoch made from a measured loop step (`epoch-from-step`) against "
    "the epochs the same step trained on the same device (`pooled-trained`): the factor "
    "max(a/b, b/a), its note saying which is the longer; as a band, their median and worst: "
    "how far an epoch from a loop step is from the epoch a user times",
    "seed-step-bound": "a seed's published accelerator step (its epoch over its steps: "
    "its input pipeline and validation included, so no faster than its train step) against "
    "the CPU's jaxcnn's loop of the same model and batch: a lower bound of that chip's "
    "speedup",
    "paired": "the newest pairing of both configurations on this machine, run in "
    "alternating turns (benchmarks/paired.py); the median of the per-round ratios",
    "run-to-run": "per chip, over its loop steps pooled from several runs (`pooled`): each "
    "pool's hi/lo, the factor one run's loop step moves by; their median and worst",
    "earlier-sitting": "of a workload whose loop step was timed in several "
    "sittings, each sitting but the newest (named by when it began): its runs pooled as "
    "`pooled` pools the newest's; a speedup: the CPU's loop over that sitting's",
    "sitting-to-sitting": "per chip, over the workloads whose loop step was timed in several "
    "sittings (machine id, git commit, boot and tree: how its files differed from the "
    "commit, else its prediction's fitted constants; another lease or another version of "
    "the code): "
    "each workload's hi/lo of its sittings' pooled loop steps, the factor a sitting moves "
    "it by; their median and worst",
    "one-code-sittings": "`sitting-to-sitting` over only the sittings of one code (one git "
    "commit and tree, on other boots): how far another boot moved a loop step with the code "
    "held. Few boots ran one commit, and sittings of two commits can be two VMs as well, "
    "so the answers' yardstick stays `sitting-to-sitting`",
    "compiled-vs-ran": "a program compiled here for a target against the same program "
    "(model, batch, precision) as the target's chip compiled it when it ran: the factor "
    "max(a/b, b/a) of their memory",
    "held-out": "each group of observations predicted by constants refitted from scratch "
    "without it; the factor max(predicted/actual, actual/predicted)",
    "before-first-run": "the prediction the first run of a program on a chip was written "
    "with as it ran, by constants fitted before any run of that program on that chip, "
    "against its measured step (`pooled`); the factor max(predicted/actual, actual/predicted)",
    "baseline": "no model: what a prediction that knows nothing of the program reaches on "
    "the very checks a band is measured on (a loop step: the median measured loop step of "
    "the platform's other programs; a scaling efficiency: ideal, 100%); a band shows its "
    "model's worth only where it is tighter than this",
    "in-sample": "predicted by constants fitted with this very step among their data: how "
    "closely the fit reproduces what it was fitted on, never an error band; the factor "
    "max(predicted/actual, actual/predicted)",
}
UNITS = {
    "step_s": "s",
    "device_step_s": "s",
    "device_step_as_run_s": "s",  # a record's own prediction, made as it ran
    "loop_step_s": "s",
    "epoch_s": "s",
    "compile_s": "s",
    "test_accuracy": "fraction",
    "flops_per_s": "FLOP/s",
    "peak_flops_per_s": "FLOP/s",
    "mfu": "fraction",
    "matmul_fraction": "fraction",
    "flops_per_watt": "FLOP/s per W",
    "memory_bytes": "bytes",
    "fits": "bool",
    "largest_batch": "images",
    "usd_per_epoch": "USD",
    "cost_ratio": "x",  # an epoch's price over the cheapest target's of the same program
    "speedup": "x",
    "error_factor": "x",
    "band": "x",
    "scaling_efficiency": "fraction",
    "time_to_target_s": "s",  # a recipe's training time where every seed reached the target
    "train_time_s": "s",  # a recipe's training time where a seed fell short of it
    "images_per_s": "images/s",
    "host_s": "s",
    "run_spread": "x",
    "memory_factor": "x",
    "cores": "cores",
}


# --- reading records -----------------------------------------------------------------


def _names_no_cpu(record: Record) -> bool:
    return record.device.platform == "cpu" and not (record.env.cpu and record.env.cpu.model)


def workload_of(record: Record) -> dict[str, Any]:
    """A record's workload as the table keys it. Only a peer's workload has a framework
    and a mode, and only a Workload's kinds say how they formulated and looped: on the
    others their absence is jax, xla and the step loop."""
    w = record.workload
    peer = getattr(w, "framework", None)
    framework = peer or "jax"
    if getattr(w, "mode", None):
        framework += f" {w.mode}"
    ran = getattr(record, "formulation", None)
    formulation = (ran and ran.name) or w.formulation or "xla"
    loop = getattr(record, "loop", None) or w.loop or "step"
    k, mode = _ensemble(record)
    return {
        "model": labels.model_with_overrides(w),
        "dataset": w.dataset or "-",
        "batch": w.batch_size,
        "precision": precision_of(w),
        "formulation": "-" if peer else formulation,
        "loop": "-" if peer else loop,
        "placement": w.strategy or "single",
        "framework": framework,
        "platform": record.device.platform,
        "devices": record.device.count,
        "device": device_of(record),
        "ensemble_size": k,
        "ensemble_mode": mode,
    }


def _ensemble(r: Record) -> tuple[int | None, str | None]:
    """(K, mode) of an ensemble's record, as it ran (else as asked); (None, None) else."""
    if kind_of(r) != "ensemble":
        return None, None
    e, w = r.ensemble, r.workload
    # an ensemble's workload.ensemble_size is at least one
    return (e and e.k) or w.ensemble_size, (e and e.mode) or w.ensemble_mode


def _key(workload: dict[str, Any], extra: str = "-") -> tuple:
    return (*(workload[k] for k in KEY[2:-3]), extra, workload["device"], workload["devices"])


def select_newest(
    records: Sequence[Record],
    extra: Callable[[Record], str] = lambda r: "-",
    of: Callable[[Record], dict[str, Any]] = workload_of,
) -> list[Record]:
    """RULES["newest"] over `records`: one per workload (`of`'s, with `extra`) and device."""
    return [runs[-1] for runs in select_runs(records, extra, of)]


def select_runs(
    records: Sequence[Record],
    extra: Callable[[Record], str] = lambda r: "-",
    of: Callable[[Record], dict[str, Any]] = workload_of,
    every_sitting: bool = False,
) -> list[list[Record]]:
    """RULES["pooled"] over `records`: the runs of each workload (`of`'s, with `extra`) on
    each device made in the newest one's sitting (one_sitting; `every_sitting`: in any),
    oldest first (by recorded_at; ties: the earlier in the file)."""
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in sorted(records, key=recorded_at_or_oldest):  # stable: ties keep file order
        groups[_key(of(r), extra(r))].append(r)

    def on_host(k: tuple, r: Record) -> tuple:
        return k[:-2], r.device.host or r.env.host

    named = {on_host(k, r) for k, rs in groups.items() for r in rs if not _names_no_cpu(r)}
    # a group naming no CPU whose host named its CPU in another: not a second machine
    return [
        rs if every_sitting else one_sitting(rs)
        for k, rs in groups.items()
        if not (all(_names_no_cpu(r) for r in rs) and any(on_host(k, r) in named for r in rs))
    ]


# --- rows ----------------------------------------------------------------------------


def row(
    quantity: str,
    kind: str,
    value: float | None,
    workload: dict[str, Any],
    selection: str,
    records: Iterable[Record] = (),
    **rest: Any,
) -> Row:
    """One figure. `workload`: workload_of's fields (or the same keys for a published
    figure); `rest`: any other COLUMNS."""
    assert kind in KINDS and selection in RULES, (kind, selection)
    out = {c: None for c in COLUMNS}
    out.update({k: workload.get(k) for k in (*KEY[2:], *BESIDE_KEY) if k in workload})
    for k in NOT_APPLICABLE:  # one spelling of "none" in the table
        out[k] = "-" if out[k] in (None, "none") else out[k]
    out.update(
        quantity=quantity,
        kind=kind,
        value=number(value),
        unit=UNITS[quantity],
        selection=selection,
        records=" ".join(r.run_id for r in records) or None,
        extra=rest.pop("extra", workload.get("extra") or "-"),
        **rest,
    )
    # a readable id, unique per KEY
    out["id"] = "|".join("-" if out[k] is None else str(out[k]) for k in KEY)
    return out


def number(value: Any) -> float | None:
    """`value` as a finite float, or None (a record's number past a float's range, or
    not finite, is no figure)."""
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return f if math.isfinite(f) else None


def _params(record: Record) -> int | None:
    """The trainable parameters of a record of a kind that has them (not paired)."""
    return (record.params and record.params.trainable) or None


def _with_params(record: Record, **more: Any) -> dict[str, Any]:
    """workload_of(record) with its model's trainable parameters, and `more` columns."""
    return {**workload_of(record), "params": _params(record), **more}


def _spread(s: Summary | None) -> dict[str, Any]:
    lo, hi, n = (None, None, None) if s is None else (s.p10, s.p90, s.n)
    return {"lo": lo, "hi": hi, "spread": P10_P90, "n": n}


def _ok(records: Sequence[Record]) -> list[Record]:
    return [r for r in records if r.status == "ok"]


def _timed(r: Record) -> bool:
    """An ok run that timed its step (step_time_s.median is Positive where present)."""
    return (
        r.status == "ok"
        and not is_compiled(r)
        and kind_of(r) in ("train", "peer", "ensemble")
        and bool(r.step_time_s and r.step_time_s.median)
    )


def _ensemble_extra(r: Record) -> str:
    k, mode = _ensemble(r)
    return "-" if k is None else f"K={k} {mode}"


def _maker(
    kind: str, workload: dict[str, Any], selection: str, records: Iterable[Record] = ()
) -> Callable[..., Row]:
    """row() with these columns fixed: called with the quantity, the value and the rest."""
    return lambda quantity, value, **rest: row(
        quantity, kind, value, workload, selection, records, **rest
    )


def datasheet_peak(r: Record, w: dict[str, Any]) -> Row:
    """The datasheet's peak FLOP/s of `r`'s chip in the precision its matmuls ran in (the
    record's MFU says which, and the peak): a published figure (jaxcnn/perf/chips.py)."""
    vendor = r.mfu.vendor_precision
    at = {"device": w["device"], "platform": w["platform"], "devices": 1, "model": "-",
          "dataset": "-", "precision": SPELLING.get(vendor, vendor)}  # fmt: skip
    return row("peak_flops_per_s", "published", r.mfu.vendor_peak_tflops * 1e12, at, "published",
               [r], source=DATASHEETS, note="its datasheet's peak")  # fmt: skip


DATASHEETS = "the vendor's datasheet (jaxcnn/perf/chips.py)"


def _min_max(values: Sequence[float], over: str) -> dict[str, Any]:
    spread = f"min-max over {over}"
    return {"lo": min(values), "hi": max(values), "spread": spread, "n": len(values)}


def _pooled(values: Sequence[float], one_run: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """RULES["pooled"]: one figure of several runs, each run's `values` entry its own: the
    median with the min-max over runs; of a single run, its value with its own spread."""
    if len(values) == 1:
        return values[0], one_run
    return statistics.median(values), _min_max(values, "runs")


def measured_rows(records: Sequence[Record]) -> list[Row]:
    """Step times, FLOP/s and compile times of every run of each workload on each device,
    pooled; accuracies of the newest run that trained whole epochs, and the epoch times
    of every run that trained as many, pooled."""
    out = []
    peaks: dict[str, Row] = {}  # each chip's datasheet peak an MFU is of, once
    model_flops = _model_flops(records)
    for runs in select_runs([r for r in records if _timed(r)], _ensemble_extra):
        r = runs[-1]  # the newest says what the workload is
        w = _with_params(r, extra=_ensemble_extra(r))
        as_pooled = _maker("measured", w, "pooled", runs)
        step, spread = _pooled([x.step_time_s.median for x in runs], _spread(r.step_time_s))
        out.append(as_pooled("step_s", step, **spread))
        # a peer records no FLOPs and no MFU; an ensemble's FLOPs are all its models'
        own = number(r.flops.per_step) if kind_of(r) == "train" and r.flops else None
        flops = own and model_flops.get(_flops_key(w), own)
        mfu = r.mfu if isinstance(r, TrainRecord) else None
        if flops:
            tf32 = _ran_as_tf32(w["precision"], mfu and mfu.vendor_precision)
            note = TF32_MATMULS if tf32 else None
            out.append(as_pooled("flops_per_s", flops / step, note=note))
        if r.device.platform != "cpu" and mfu and number(mfu.vs_vendor):
            note = f"of its datasheet's {mfu.vendor_precision} peak"
            # the newest run's fraction of its peak (by its own count), at the pooled step
            # and the model's count: the FLOP/s row over the datasheet's peak row
            at = mfu.vs_vendor * r.step_time_s.median / step * (flops / own if own else 1.0)
            peak = datasheet_peak(r, w)
            ids = {"numerator": out[-1]["id"], "denominator": peak["id"]} if flops else {}
            out.append(as_pooled("mfu", at, note=note, **ids))
            peaks[peak["id"]] = peak
        # a compile timed with JAX's persistent cache on may have been a read of it
        compiled = [
            x for x in runs
            if x.compile_time_s and x.compile_time_s.train
            and not getattr(x.env, "compilation_cache", None)  # a peer's env has none
        ]  # fmt: skip
        out += memory_rows(r, w)
        if compiled:  # the slowest: a cold compile (RULES["pooled"])
            seconds = [x.compile_time_s.train for x in compiled]
            spread = _min_max(seconds, "runs") if len(seconds) > 1 else {}
            out.append(row("compile_s", "measured", max(seconds), w, "pooled", compiled, **spread))
    trained = [
        r
        for r in records
        if _timed(r)
        and kind_of(r) == "train"
        and _epochs(r)
        and r.workload.study != "speedrun"  # its seeds pool: speedrun_rows
    ]
    for r in select_newest(trained, lambda r: f"{_epochs(r)} epochs{_seed_words(r)}"):
        n, seed = _epochs(r), _seed_words(r)
        w = _with_params(r, extra=f"{n} epochs{seed}", epochs=n, seed=r.workload.seed or 0)
        as_trained = _maker("measured", w, "newest-trained", [r])
        if r.test_accuracy is not None:
            out.append(as_trained("test_accuracy", r.test_accuracy))
        for e in r.history or []:
            if e.test_accuracy is not None and n >= MIN_CURVE_EPOCHS:
                at = f"epoch {e.epoch} of {n}{seed}"
                out.append(as_trained("test_accuracy", e.test_accuracy, extra=at, epoch=e.epoch))
    # an epoch's time is the seed's to no degree: every seed's run of as many epochs pools
    with_times = [r for r in trained if _epoch_times(r)]
    for runs in select_runs(with_times, lambda r: f"{_epochs(r)} epochs"):
        n = _epochs(runs[-1])
        out.append(_pooled_epoch(runs, f"{n} epochs", n, "training only, evaluation apart"))
    out += ensemble_epochs(records)
    out += peaks.values()
    return out


def _pooled_epoch(runs: list[Record], extra: str, epochs: int, note: str) -> Row:
    """RULES["pooled-trained"]: the median of the runs' median epochs; a single run's own."""
    r = runs[-1]
    w = _with_params(r, extra=extra, epochs=epochs)
    medians = [statistics.median(_epoch_times(x)) for x in runs]
    epoch, spread = _pooled(medians, _min_max(_epoch_times(r), "epochs"))
    return row("epoch_s", "measured", epoch, w, "pooled-trained", runs, note=note, **spread)


def ensemble_epochs(records: Sequence[Record]) -> list[Row]:
    """K models' epoch as a user training them waits for it: one vmapped epoch, or the
    K runs' epochs one after another, summed (the runner's merged history); of the
    newest sitting's runs (as for its steps) that trained as many epochs as the newest
    run, pooled."""
    trained = [r for r in _ok(records) if kind_of(r) == "ensemble" and _epoch_times(r)]
    out = []
    for runs in select_runs(trained, _ensemble_extra):
        r = runs[-1]
        n = len(r.history)
        note = f"all {r.workload.ensemble_size} models' training, evaluation apart"
        as_many = [x for x in runs if len(x.history) == n]
        out.append(_pooled_epoch(as_many, f"{_ensemble_extra(r)}, {n} epochs", n, note))
    return out


def memory_rows(r: Record, w: dict[str, Any]) -> list[Row]:
    """An accelerator run's memory, where a chip's memory bounds its batch: its own
    compiler's analysis of the program it ran (a compiled figure, what a target compiled
    here predicts), the allocator's peak (measured, but the process's: a study's earlier
    workloads and probes in it count too) and, where the workload raised that peak, its
    own (the peak over what it found in use; that alone where nothing was in use before it,
    the two then one number). The newest run's: a program's compiled
    memory is the same from run to run."""
    memory = r.memory if r.device.platform != "cpu" and w["extra"] == "-" else None
    found = [(ON_THE_CHIP, "compiled", memory and memory.total_bytes),
             (ALLOCATOR_PEAK, "measured", memory and memory.peak_bytes_in_use)]  # fmt: skip
    peak, earlier = memory and memory.peak_bytes_in_use, memory and memory.peak_bytes_in_use_before
    if peak and earlier is not None and peak > earlier:  # the peak is this workload's own
        found.append((WORKLOAD_PEAK, "measured", peak - memory.bytes_in_use_before))
        if not memory.bytes_in_use_before:  # the same number twice: the narrower name only
            found.pop(1)
    out = [row("memory_bytes", kind, number(value), w, "newest", [r], extra=extra)
           for extra, kind, value in found if number(value)]  # fmt: skip
    by = {x["extra"]: x for x in out}
    own, compiled = by.get(WORKLOAD_PEAK), by.get(ON_THE_CHIP)
    if own and compiled:  # how far what it held as it ran passes what its program needs
        out.append(row("memory_factor", "measured", own["value"] / compiled["value"], w,
                       "newest", [r], extra=RAN_OVER_COMPILED, numerator=own["id"],
                       denominator=compiled["id"], note=RAN_OVER_COMPILED_NOTE))  # fmt: skip
    return out


RAN_OVER_COMPILED = "the allocator's own peak in the workload over its compiled memory"
RAN_OVER_COMPILED_NOTE = (
    "what else the workload held at its peak (e.g. autotuning's scratch, its other "
    "programs, batches in flight) is not measured apart"
)


def _flops_key(w: dict[str, Any]) -> tuple:
    """What a model's FLOPs per step are a count of, from workload_of's fields."""
    return w["model"], w["batch"], w["placement"], w["devices"]


def _model_flops(records: Sequence[Record]) -> dict[tuple, float]:
    """A model's FLOPs per step, one count whatever the formulation computes it with: the
    xla formulation's jaxpr count (every conv tap, as a model's FLOPs are counted), by
    model, batch and placement. The cpu formulation's own count skips the padding's taps
    (11% fewer for mnist_cnn) and a library's calls hide theirs from the jaxpr."""
    counted = [
        (workload_of(r), number(r.flops.per_step))
        for r in sorted(_ok(records), key=recorded_at_or_oldest)
        if kind_of(r) == "train" and r.flops and number(r.flops.per_step)
    ]
    return {_flops_key(w): flops for w, flops in counted if w["formulation"] == "xla"}


def _epoch_times(r: TrainRecord) -> list[float]:
    return [e.train_time_s for e in r.history or [] if e.train_time_s]


MIN_CURVE_EPOCHS = 3  # a run's per-epoch accuracies are a curve from three epochs on


def _seed_words(r: TrainRecord) -> str:
    """A trained run's seed where it is not the default: ", seed 2"; seed 0 says nothing."""
    return f", seed {r.workload.seed}" if r.workload.seed else ""


# An f32 rate whose matmuls ran as TF32 (JAX's default matmul precision on a tensor-core
# GPU, as the record says): the note every page prints it with, the precision kept f32.
TF32_MATMULS = "f32 (TF32 matmuls)"


def _ran_as_tf32(precision: str, matmul_precision: str | None) -> bool:
    return precision == "f32" and matmul_precision == "tf32"


def _host_loop_workload(r: Record) -> dict[str, Any]:
    """A record's workload as its host loop ran it: the loop it timed (fit's step loop),
    whatever loop the workload itself trained in."""
    return _with_params(r, loop=r.host_loop.loop or "step")


def _loop_timed(records: Sequence[Record]) -> list[Record]:
    """The runs that timed jaxcnn's step loop as it runs by default: under the host memory
    policy that loop gets by default (jaxcnn.host_memory.resolve; a record that names no
    policy counts). A process that trained in the device loop kept glibc's defaults, and
    on a CPU its step loop then faults its buffers in afresh each step, a loop no user of
    the step loop runs. An ensemble's loop is K models' steps at once: not one model's."""
    return [
        r
        for r in records
        if getattr(r, "host_loop", None)
        and _timed(r)
        and not isinstance(r, EnsembleRecord)
        and (
            r.env.host_memory is None
            or r.env.host_memory.policy == host_memory.resolve("auto", r.device.platform)
        )
    ]


def host_rows(records: Sequence[Record]) -> list[Row]:
    """jaxcnn's own step loop on the host, per part and in all, pooled over the runs that
    timed it (`_loop_timed`)."""
    out = []
    for runs in select_runs(_loop_timed(records), of=_host_loop_workload):
        r = runs[-1]
        w = _host_loop_workload(r)
        for part in HOST_PARTS:
            ran = [(x, getattr(x.host_loop.parts, part)) for x in runs if x.host_loop.parts]
            ran = [(x, p) for x, p in ran if p and number(p.median) is not None]
            if ran:
                value, spread = _pooled([number(p.median) for _, p in ran], _spread(ran[-1][1]))
                out.append(row("host_s", "measured", value, w, "pooled", [x for x, _ in ran],
                               extra=part, **spread))  # fmt: skip
        # each run's own total (its parts' medians added), pooled: how far it moves run to
        # run is the spread a threshold drawn from it has
        totals = [(x, _loop_total(x)) for x in runs]
        totals = [(x, v) for x, v in totals if v is not None]
        if totals:
            note = "the medians of " + ", ".join(HOST_PARTS) + " added, per run"
            value, spread = _pooled([v for _, v in totals], {})
            out.append(row("host_s", "measured", value, w, "pooled", [x for x, _ in totals],
                           extra="loop total", note=note, **spread))  # fmt: skip
        ran = [x for x in runs if number(x.host_loop.loop_step_s)]
        if ran:
            windows = [number(s) for s in ran[-1].host_loop.window_step_s or []]
            own = _min_max(windows, "windows") if len(windows) > 1 else {}
            step, spread = _pooled([number(x.host_loop.loop_step_s) for x in ran], own)
            out.append(row("step_s", "measured", step, w, "pooled", ran, extra=LOOP, **spread))
    return out


def _loop_total(r: Record) -> float | None:
    """One run's host time per step: its parts' medians added; None where one is missing."""
    parts = r.host_loop.parts
    found = [getattr(parts, part, None) if parts else None for part in HOST_PARTS]
    medians = [number(p.median) if p else None for p in found]
    return None if None in medians else sum(medians)


RUN_TO_RUN = "loop step, run to run"


def core_rows(records: Sequence[Record]) -> list[Row]:
    """Per CPU label, how many processors its runs could use (RULES["as-recorded"])."""
    cpus = [r for r in records if r.device.platform == "cpu" and not _names_no_cpu(r)]
    total = Counter(device_of(r) for r in cpus)
    stated: dict[str, list[int]] = defaultdict(list)
    for r in cpus:
        if n := r.env.cpu.cores or getattr(r.env, "cpu_count", None):
            stated[device_of(r)].append(n)
    out = []
    for device, ns in sorted(stated.items()):
        common = Counter(ns).most_common(1)[0][0]
        w = {"device": device, "platform": "cpu", "devices": 1, "model": "-", "dataset": "-"}
        note = f"stated by {len(ns)} of its {total[device]} records (older ones did not record it)"
        out.append(row("cores", "measured", common, w, "as-recorded", lo=min(ns), hi=max(ns),
                       spread="min-max over records", n=len(ns), note=note))  # fmt: skip
    return out


def run_spread_rows(host: Sequence[Row]) -> list[Row]:
    """Per accelerator chip, how far one run's loop step moves from another's: over its
    loop steps pooled from several runs (host_rows), each pool's hi/lo; the median and
    worst. The yardstick of a verdict resting on one run of each side."""
    pools: dict[tuple[str, str], list[tuple[float, list[str]]]] = defaultdict(list)
    for h in host:
        several = h["spread"] == "min-max over runs" and h["extra"] == LOOP
        if several and h["platform"] != "cpu" and h["lo"]:
            pools[(h["platform"], h["device"])].append((h["hi"] / h["lo"], h["records"].split()))
    return _loop_spread_rows(pools, "run-to-run", RUN_TO_RUN)


def _loop_spread_rows(pools: dict, selection: str, extra: str) -> list[Row]:
    """Per (platform, chip), its pools' (hi/lo, run ids): the median and worst, every id."""
    out = []
    for (platform, device), pool in sorted(pools.items()):
        found = _median_worst([factor for factor, _ in pool])
        out.append(band_row(platform, "loop steps", found, selection, device=device,
                            quantity="run_spread", kind="derived", extra=extra))  # fmt: skip
        out[-1]["records"] = " ".join(run for _, runs in pool for run in runs)
    return out


ONE_CODE_SITTINGS = "loop step, sitting to sitting, one code"


def earlier_sitting(began: datetime, r: Record) -> str:
    """The `extra` of a loop step pooled in a sitting before the newest: when it began,
    and how its loop was timed (the method has changed between sittings)."""
    windows = len(r.host_loop.window_step_s or []) or 1
    how = f"{r.host_loop.steps} steps in {windows} window{'s' if windows > 1 else ''}"
    return f"{LOOP}, another sitting ({began:%Y-%m-%d %H:%M} UTC, {how})"


def sitting_spread_rows(records: Sequence[Record]) -> list[Row]:
    """Per chip, the CPU's too, how far a loop step moves from one sitting (another lease,
    another commit: `sitting`) to another: of each workload timed in several, the hi/lo of
    its sittings' pooled loop steps; their median and worst. The yardstick of a verdict
    whose sides may next be measured in another sitting; run_spread_rows' is one sitting's.
    A CPU label names a VM type, not a machine: its sittings' VMs may differ.
    Each earlier sitting's pooled loop step is a row of its own (`earlier_sitting`), so a
    verdict can be read again in each."""
    pools: dict[tuple[str, str], list] = defaultdict(list)  # as _loop_spread_rows reads them
    one_code: dict[tuple[str, str], list] = defaultdict(list)  # ONE_CODE_SITTINGS'
    out = []
    timed = _loop_timed(records)
    began: dict[tuple, datetime] = {}  # each sitting's first record: its name
    for r in sorted(timed, key=recorded_at_or_oldest):
        began.setdefault(sitting(r), recorded_at_or_oldest(r))
    for runs in select_runs(timed, of=_host_loop_workload, every_sitting=True):
        by_sitting: dict[tuple, list[Record]] = defaultdict(list)
        ran = [r for r in runs if number(r.host_loop.loop_step_s)]
        for r in ran:
            by_sitting[sitting(r)].append(r)
        if len(by_sitting) > 1:
            pooled = {k: statistics.median(number(x.host_loop.loop_step_s) for x in v)
                      for k, v in by_sitting.items()}  # fmt: skip
            chip = (runs[-1].device.platform, device_of(runs[-1]))
            steps = list(pooled.values())
            pools[chip].append((max(steps) / min(steps), [r.run_id for r in ran]))
            for held in _sittings_of_one_code(by_sitting):
                steps = [pooled[k] for k in held]
                ids = [r.run_id for k in held for r in by_sitting[k]]
                one_code[chip].append((max(steps) / min(steps), ids))
            w = _host_loop_workload(ran[-1])
            for held, earlier in by_sitting.items():
                if held == sitting(ran[-1]):
                    continue
                step, spread = _pooled([number(x.host_loop.loop_step_s) for x in earlier], {})
                extra = earlier_sitting(began[held], earlier[-1])
                out.append(row("step_s", "measured", step, w, "earlier-sitting", earlier,
                               extra=extra, **spread))  # fmt: skip
    return [
        *out,
        *_loop_spread_rows(pools, "sitting-to-sitting", SITTING_TO_SITTING),
        *_loop_spread_rows(one_code, "one-code-sittings", ONE_CODE_SITTINGS),
    ]


def _sittings_of_one_code(by_sitting: dict[tuple, list[Record]]) -> list[list[tuple]]:
    """Of one workload's sittings (`sitting`), those that ran one code (git commit and
    tree, both known) where several did: per such code, its sittings."""
    codes: dict[tuple, list[tuple]] = defaultdict(list)
    for held in by_sitting:
        _, commit, _, tree = held
        if commit and tree:
            codes[(commit, tree)].append(held)
    return [held for held in codes.values() if len(held) > 1]


def _epochs(r: TrainRecord) -> int:
    return len([e for e in r.history or [] if e.test_accuracy is not None])


def matmul_rows(records: Sequence[Record], loaded: Sequence[Record]) -> list[Row]:
    """The matmul study's rate per size and dtype; per machine the best matmul rate any
    run measured (`machine-best`)."""
    out = []
    mm = [r for r in _ok(records) if kind_of(r) == "matmul" and not is_compiled(r)]
    for r in select_newest(mm, lambda r: f"n={_matmul_side(r)}"):
        w = {**workload_of(r), "extra": f"n={_matmul_side(r)}"}
        mfu = getattr(r, "mfu", None)
        if _ran_as_tf32(w["precision"], mfu and mfu.vendor_precision):  # TF32 passes: tf32
            w["precision"] = "tf32"
        tflops = number(r.achieved_tflops)
        if tflops:
            out.append(row("flops_per_s", "measured", tflops * 1e12, w, "newest", [r]))
    # a peer or a pairing measures no ceiling: none of its machine's
    rates = [
        (r, dtype, entry.tflops)
        for r in loaded
        if not is_compiled(r) and r.status == "ok"
        for dtype, entry in (getattr(r, "matmul_ceiling", None) or {}).items()
    ]
    # The matmul study's own rates count too where their dtype ran as itself: float32 on
    # an accelerator may have run as TF32 or bf16 passes, which its record does not say.
    rates += [
        (r, r.matmul.dtype, r.achieved_tflops)
        for r in mm
        if r.matmul.dtype != "float32" or r.device.platform == "cpu"
    ]
    best: dict[tuple, tuple[float, Record]] = {}
    for r, dtype, rate in rates:
        tflops, k = number(rate), (device_of(r), r.device.platform, dtype)
        if tflops and tflops > best.get(k, (0.0, None))[0] and not _names_no_cpu(r):
            best[k] = (tflops, r)
    for (device, platform, dtype), (tflops, r) in sorted(best.items()):
        w = {"device": device, "platform": platform, "devices": 1, "model": "matmul",
             "precision": SPELLING.get(dtype, dtype)}  # fmt: skip
        ceiling = (r.matmul_ceiling or {}).get(dtype)
        ran = ceiling.precision if ceiling and r.workload.kind != "matmul" else w["precision"]
        if _ran_as_tf32(w["precision"], ran):  # a rate of TF32 passes: its own precision
            w["precision"] = "tf32"
        out.append(row("peak_flops_per_s", "measured", tflops * 1e12, w, "machine-best", [r]))
    return out


def _matmul_side(r: Record) -> int:
    return (r.matmul and r.matmul.n) or r.workload.batch_size


def _pair(r: Record) -> str:
    """The two sides, each with its host memory policy where recorded: pairs of one
    configuration on both sides differ by that alone."""
    jax, peer = (
        f"{s.configuration} ({s.host_memory} host memory)" if s.host_memory else s.configuration
        for s in (r.paired.jax, r.paired.peer)
    )
    return f"{jax}{PAIRED_SEPARATOR}{peer} in turns"


PAIRED_SEPARATOR = " / "  # a paired row's `extra`: "<first side> / <second side> in turns"


def paired_sides(extra: str) -> tuple[str, str]:
    """The two configurations a paired row's `extra` (_pair's) names, without their host
    memory policies: ("jax cpu device f32", "keras graph")."""
    first, second = extra.removesuffix(" in turns").split(PAIRED_SEPARATOR)
    return first.split(" (")[0], second.split(" (")[0]


TARGET_ACCURACY = 0.99  # the speedrun's target: 99% test accuracy on MNIST


def speedrun_rows(records: Sequence[Record]) -> list[Row]:
    """Per speedrun configuration (its workload less the seed) and device: the median
    training time over its seeds, a time to the target only where every seed reached it
    (else a training time, flagged with how many fell short); and the seeds' final
    accuracies."""
    runs = [
        r
        for r in _ok(records)
        if isinstance(r, TrainRecord)
        and r.workload.study == "speedrun"
        and r.test_accuracy is not None
        and (r.workload.epochs or 0) > 0
    ]
    newest = select_newest(runs, lambda r: f"seed {r.workload.seed}, {_recipe(r)}")
    groups: dict[tuple, list[Record]] = defaultdict(list)
    for r in newest:
        groups[_key(workload_of(r), _recipe(r))].append(r)
    out = []
    for rs in groups.values():
        w = _with_params(rs[0], extra=_recipe(rs[0]))
        seeds = _maker("measured", w, "seeds", rs)
        times = [number(r.train_time_s) or 0.0 for r in rs]
        acc = [r.test_accuracy for r in rs]
        below = sum(a < TARGET_ACCURACY for a in acc)
        flag = f"{below} of {len(rs)} seeds below 99%" if below else None
        quantity = "train_time_s" if below else "time_to_target_s"
        out.append(seeds(quantity, statistics.median(times), flag=flag, **_min_max(times, "seeds")))
        out.append(seeds("test_accuracy", statistics.median(acc), **_min_max(acc, "seeds")))
    return out


def _recipe(r: Record) -> str:
    w = r.workload
    return f"speedrun {w.epochs} epochs, lr {w.learning_rate} {w.schedule}"


def paired_rows(records: Sequence[Record]) -> list[Row]:
    """Paired bench runs (benchmarks/paired.py): the first side's speed over the
    second's, every round of the newest driver session's passes of each pair of
    configurations on each machine pooled (each pass's processes met the VM at another
    time: one pass alone is one such meeting)."""
    pairs = [r for r in _ok(records) if kind_of(r) == "paired" and r.paired and r.paired.ratio]
    out = []
    for runs in select_runs(pairs, _pair, every_sitting=True):
        newest = runs[-1].session and runs[-1].session.id
        passes = [r for r in runs if r.session and r.session.id == newest] or runs[-1:]
        ratios = [x.jax.images_per_s / x.peer.images_per_s
                  for r in passes for x in r.paired.rounds or []]  # fmt: skip
        pooled = Summary.model_validate(summarize(ratios)) if ratios else passes[-1].paired.ratio
        w = {**workload_of(passes[-1]), "framework": "paired", "formulation": "-", "loop": "-"}
        w["extra"] = _pair(passes[-1])
        spread = _spread(pooled)
        out.append(row("speedup", "measured", pooled.median, w, "paired", passes, **spread))
    return out


# --- compiled and predicted ------------------------------------------------------------


def compiled_records(records: Sequence[Record]) -> list[Record]:
    """RULES["newest-compile"]: the newest compile per workload and target."""
    rs = [r for r in records if is_compiled(r) and r.status in ("ok", "oom") and not superseded(r)]
    return select_newest(rs)


def compiled_rows(compiled: Sequence[Record], records: Sequence[Record]) -> list[Row]:
    """Per newest compile (`compiled`: compiled_records(records)): its memory per device
    and whether it fits; per target, the memory a program may use (the fit verdicts'
    limit), and per model and precision, the largest batch that fits."""
    out = []
    searches: dict[tuple, list[Record]] = defaultdict(list)
    usable: dict[str, Record] = {}
    for r in compiled:
        w = _with_params(r)
        total = r.memory.total_bytes if r.memory else None
        if total is not None:
            out.append(row("memory_bytes", "compiled", total, w, "newest-compile", [r]))
        out.append(row("fits", "compiled", float(fits(r)), w, "newest-compile", [r]))
        searches[(w["model"], w["precision"], w["placement"], w["device"], w["devices"])].append(r)
        usable[w["device"]] = r
    for device, r in sorted(usable.items()):  # what every verdict on the target is held to
        if limit := usable_bytes(r):
            w = {"device": device, "model": "-", "dataset": "-",
                 "platform": r.device.platform, "devices": r.device.count}  # fmt: skip
            # no compiler's figure: the chip's memory (what CUDA reports where published,
            # else its datasheet's) times the share JAX's allocator takes of it by default
            # (jaxcnn.perf.chips.USABLE_FRACTION), both published
            share = USABLE_FRACTION.get(r.device.platform)
            note = f"its memory x {share}, JAX's default share" if share else None
            out.append(row("memory_bytes", "published", limit, w,
                           "newest-compile", [r], extra=USABLE, note=note))  # fmt: skip
    errors = [r for r in records if isinstance(r, CompileRecord) and r.failed_by == "compiler"]
    for rs in searches.values():
        out.extend(largest_batch(rs, errors))
    return out


OPEN_SEARCH = "open"  # a batch search's flag where no larger batch failed: its result a floor


def largest_batch(rs: list[Record], errors: list[Record]) -> list[Row]:
    best, smallest = largest_fit(rs)
    if best is None:
        return []
    b = best.workload.batch_size
    w = _with_params(best, batch=None, dataset="-")
    found = functools.partial(row, "largest_batch", "compiled", b, w, "batch-search")
    if smallest is not None:
        above = smallest.workload.batch_size
        return [found([best, smallest], lo=b, hi=above, spread=FIT_TO_FAIL,
                      note=f"{above} does not fit")]  # fmt: skip
    refused = any(
        device_of(e) == w["device"]
        and labels.model_with_overrides(e.workload) == w["model"]
        and e.workload.batch_size > b
        for e in errors
    )
    why = "the compiler refused a larger batch" if refused else "no larger batch compiled"
    return [found([best], flag=f"{OPEN_SEARCH}: {why}")]


class HeldOutBand(NamedTuple):
    """A held-out band of the device step: its factors' median and worst over n, how
    many of them the prediction was the faster of, the chips left out one at a time."""

    median: float
    worst: float
    n: int
    faster: int
    chips: str | None


def _bands(table: dict[str, Any]) -> dict[tuple, HeldOutBand]:
    """{(platform, split, regime): its HeldOutBand} of the held-out factors of the
    constants file's observations (device steps)."""
    from jaxcnn.perf.predict import REGIMES, held_out_chips, held_out_errors, held_out_pairs

    out = {}
    for platform, family in (table.get("families") or {}).items():
        for split in SPLITS:
            for regime in REGIMES:
                if pairs := held_out_pairs(family, split, regime):
                    factors, faster = held_out_errors(pairs)
                    chips = split == "chip" and held_out_chips(family, split, regime)
                    out[(platform, split, regime)] = HeldOutBand(
                        *_median_worst(factors), faster, "/".join(chips or ()) or None
                    )
    return out


def _median_worst(factors: Sequence[float]) -> tuple[float, float, int]:
    return statistics.median(factors), max(factors), len(factors)


def band_row(
    platform: str,
    programs: str,
    factors: tuple[float, float, int],
    selection: str = "held-out",
    records: Iterable[Record] = (),
    device: str | None = None,
    quantity: str = "band",
    kind: str = "predicted",  # a band: the error of jaxcnn's predictions, whatever checked
    **rest: Any,
) -> Row:
    """A band of `programs` on `platform` (or on its chip `device`): `factors`, the median
    and worst factor max(p/a, a/p) and over how many (or another median-and-worst
    `quantity`); `rest`: row()'s."""
    median, worst, n = factors
    w = {"platform": platform, "device": device or platform, "devices": 1, "model": programs}
    spread = {"lo": 1.0, "hi": worst, "spread": "median, worst", "n": n}
    return row(quantity, kind, median, w, selection, records, **spread, **rest)


def band_rows(bands: dict[tuple, HeldOutBand]) -> list[Row]:
    """Each held-out band as a row: per platform, split and regime."""
    out = []
    for (platform, split, regime), b in sorted(bands.items()):
        way = prediction_faster(b.faster, b.n)
        on = f" on {b.chips}" if b.chips else ""
        note = f"device step; {b.n} observations{on}; {way}"
        words = {"extra": f"leave one {split} out", "band_faster": b.faster,
                 "band_chips": b.chips, "note": note}  # fmt: skip
        out.append(band_row(platform, f"{regime} programs", b[:3], **words))
    return out


# The prediction's names for what a band was measured on, as the table's quantities.
BAND_QUANTITIES = {"device_step": "device_step_s", "loop_step": "loop_step_s"}


def band_of(
    block: dict[str, Any], platform: str, quantity: str, bands: dict[tuple, HeldOutBand]
) -> dict[str, Any]:
    """A prediction's band columns where its band was measured on `quantity`; else the
    reason it has none."""
    band = block.get("error_band") or {}
    measured_on = BAND_QUANTITIES.get(band.get("quantity"), band.get("quantity"))
    if not band or measured_on != quantity:
        words = str(measured_on).removesuffix("_s").replace("_", " ")
        why = "unvalidated" if not band else f"unvalidated ({words} banded only)"
        return {"band_quantity": why}
    found = bands.get((platform, band.get("split"), block.get("regime")))
    if not found:
        return {"band_quantity": "unvalidated"}
    return _band_columns(*found[:4], f"leave one {band.get('split')} out", quantity, found.chips)


def _band_columns(
    median: float, worst: float, n: int, faster: int | None, split: str, quantity: str,
    chips: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    values = (median, worst, n, faster, split, chips, quantity)
    return dict(zip(BAND_COLUMNS, values, strict=True))


def predicted_rows(compiled: Sequence[Record], bands: dict[tuple, HeldOutBand]) -> list[Row]:
    """Per newest compile (`compiled`: compiled_records') that fits and carries its
    kernels: the predicted device step and loop step, each with its own band, and the MFU
    and FLOP/s per watt they imply."""
    out = []
    for r in compiled:
        if not fits(r) or not r.kernels:
            continue
        # a compile carrying kernels is priced afresh: the block is
        # jaxcnn.perf.predict's own record of it, a plain dict
        block = predictions.of(r) or {}
        if block.get("method") != predictions.METHOD:
            continue
        w = _with_params(r)
        predicted = _maker("predicted", w, "per-kernel", [r])
        source = f"constants {block.get('constants_version')}"
        device_step = block.get("device_step_s") or block.get("step_time_s")
        if device_step:
            band = band_of(block, w["platform"], "device_step_s", bands)
            out.append(predicted("device_step_s", device_step, source=source, **band))
        if loop_step := block.get("loop_step_s"):
            # its own band (the published loops', or its kernels' where they are most of
            # it), in either regime, as jaxcnn.perf.predict chose it
            band = loop_band_of(block, w["platform"], bands) or (
                {"band_quantity": "unvalidated"} if block.get("regime") == "small"
                else band_of(block, w["platform"], "loop_step_s", bands)
            )  # fmt: skip
            left_out = block.get("loop_left_out")
            note = LEFT_OUT + ", ".join(left_out) if left_out else None
            out.append(predicted("loop_step_s", loop_step, note=note, source=source, **band))
        flops = number(r.flops.per_step) if r.flops else None
        per_device = flops / max(1, w["devices"]) if flops else None
        peak, precision = _vendor_peak(r)
        if per_device and device_step:  # the device step's: no host in it
            rate = predicted("flops_per_s", per_device / device_step, source=source,
                             note="the device step's")  # fmt: skip
            out.append(rate)
            if peak:
                note = f"of its datasheet's {precision} peak"
                out.append(predicted("mfu", rate["value"] / peak, note=note, source=source,
                                     numerator=rate["id"]))  # fmt: skip
        if per_device and device_step and (watts := _watts_per_device(r)):
            note = (
                "the device step's FLOP/s over the board's TDP (its datasheet's), "
                "not the power it draws"
            )
            per_watt = per_device / device_step / watts
            out.append(predicted("flops_per_watt", per_watt, note=note, source=source))
    return out


# The error factor of jaxcnn's loop measured on an accelerator against its prediction
# held out (experiments.predict.shown.held_out_loop), and the band of those factors.
HELD_OUT_LOOP = "loop step vs measured on its chip, held out"
HELD_OUT_LOOP_SPLIT = "program (host) and chip (device) held out"
# The band_split of a loop step's band (jaxcnn.perf.predict.loop_band): published JAX
# loops, each on its own host, held out of every fit.
LOOP_BAND_SPLIT = "published JAX loops, held out"


# A predicted loop step's note naming its host parts with no figure (counted 0): the
# loop step, and an epoch or a price made from it, is a floor. Their notes carry it on.
LEFT_OUT = "left out: "


def host_unpriced(notes: pd.Series) -> pd.Series:
    """Which of these figures' `notes` say a host part of theirs has no figure."""
    return notes.astype(str).str.contains(LEFT_OUT, regex=False)


BOUNDS = ("floor", "ceiling")
RATIOS = ("speedup", "cost_ratio")  # numerator / denominator


def with_bounds(table: pd.DataFrame) -> pd.DataFrame:
    """`bound`: a predicted figure whose host parts are partly unpriced is a floor, as a
    speedup over a seed's published step is (RULES["seed-step-bound"]); a ratio over a
    floor (and not of one) a ceiling, of a floor (and not over one) a floor, of one floor
    over another neither (either way)."""
    ratio = table.quantity.isin(RATIOS)
    table.loc[(table.kind == "predicted") & ~ratio & host_unpriced(table.note), "bound"] = "floor"
    table.loc[table.selection == "seed-step-bound", "bound"] = "floor"  # RULES' own words
    # a batch search no failure closed: the largest that fits is at least that
    table.loc[table.flag.astype(str).str.startswith(OPEN_SEARCH), "bound"] = "floor"
    floors = set(table.id[table.bound == "floor"])
    top, below = table.numerator.isin(floors), table.denominator.isin(floors)
    table.loc[ratio & top & ~below, "bound"] = "floor"
    table.loc[ratio & below & ~top, "bound"] = "ceiling"
    return table


MOSTLY_KERNELS = "the device step's band: its kernels are most of this step"
KERNELS_TOO = f"; {MOSTLY_KERNELS}"


def loop_band_of(
    block: dict[str, Any], platform: str, bands: dict[tuple, HeldOutBand]
) -> dict[str, Any] | None:
    """The band columns of a predicted loop step: the fit's check of it against published
    JAX loops (the block's `loop_band`, jaxcnn.perf.predict.loop_band), or the device
    step's where jaxcnn.perf.predict.kernels_band_instead chose it (its chips from
    `bands`, _bands'); or None."""
    band = block.get("loop_band")
    if not band:
        return None
    found = (band["median"], band["worst"], band["observations"], band.get("faster"))
    if band.get("mostly_kernels"):  # jaxcnn.perf.predict.kernels_band_instead's choice
        split = f"leave one {band['split']} out{KERNELS_TOO}"
        held_out = bands.get((platform, band["split"], block.get("regime")))
        return _band_columns(*found, split, "device_step_s", held_out and held_out.chips)
    return _band_columns(*found, LOOP_BAND_SPLIT, "loop_step_s", hosts_named(band))


def hosts_named(band: dict[str, Any]) -> str | None:
    """A loop band's `hosts` (the chips its loops ran on) by the chip table's names,
    `/`-separated; None where it has none or one is no chip of the table."""
    from jaxcnn.perf.chips import chip_name

    names = [chip_name(h) for h in band.get("hosts") or ()]
    return "/".join(names) if names and None not in names else None


def held_out_loop_rows(
    records: Sequence[Record], constants: dict[str, Any], host: Sequence[Row]
) -> list[Row]:
    """jaxcnn's step loop measured on an accelerator against its prediction held out, as
    the fit checked it (the constants' `loop_error`): the factor, with the prediction in
    its note (no answer quotes it as a row), keyed as the loop ran (host_rows, `host`),
    the newest check of each (a check pools every run of its program); per platform and
    regime, the band of those factors and of the published JAX loops the fit checked."""
    out = []
    by_id = {r.run_id: r for r in records}
    shown = {h["id"]: h["records"] for h in host}  # the loop steps the table holds
    checked = constants.get("loop_error") or {}
    for platform, found in sorted(checked.items()):
        ran = [(by_id[c["record"]], c) for c in found["loops"] if c["record"] in by_id]
        newest = {id(r) for r in select_newest([r for r, _ in ran], of=_host_loop_workload)}
        for r, c in [(r, c) for r, c in ran if id(r) in newest]:
            w = _host_loop_workload(r)
            a, p = c["measured_s"], c["predicted_s"]
            measured = row("step_s", "measured", a, {**w, "extra": LOOP}, "pooled", [r])["id"]
            way = "predicted faster" if p < a else "predicted slower"
            note = f"{way}: {p * 1e3:.3g} ms held out ({HELD_OUT_LOOP_SPLIT})"
            runs = c.get("records") or [c["record"]]
            if set((shown.get(measured) or "").split()) != set(runs):  # not the table's:
                measured, note = None, f"{note}; measured {a * 1e3:.3g} ms"  # said here
            pooled = [by_id[i] for i in runs if i in by_id]
            out.append(row("error_factor", "predicted", max(p / a, a / p), w, "held-out", pooled,
                           extra=HELD_OUT_LOOP, numerator=measured, note=note))  # fmt: skip
        out += constant_baseline(platform, found["loops"])
        bands = (
            (found.get("published_band") or {}, JAX_VERSUS, "published JAX loops"),
            (found["regimes"], f"loop step, {HELD_OUT_LOOP_SPLIT}", LOOP),
        )
        for by_regime, extra, whose in bands:
            for name, b in sorted(by_regime.items()):
                n = b["observations"]
                note = f"{whose} on {', '.join(b['hosts'])}; {prediction_faster(b['faster'], n)}"
                factors = (b["median"], b["worst"], n)
                # the chip its observations ran on, where they ran on one
                one_chip = {"chip": b["hosts"][0]} if len(b.get("hosts") or ()) == 1 else {}
                out.append(band_row(platform, f"{name} programs", factors, extra=extra, note=note,
                                    band_faster=b["faster"], band_chips=hosts_named(b),
                                    **one_chip))  # fmt: skip
    return out


LOOP_CONSTANT = "loop step, a constant: the median of the other programs' measured loop steps"


def constant_baseline(platform: str, loops: Sequence[dict[str, Any]]) -> list[Row]:
    """Per regime, the band the held-out loop steps' own checks (`loops`: the constants'
    `loop_error`) give a prediction with no model of the program: each measured loop step
    predicted as the median measured loop step of the platform's other programs. Where
    the host's fixed parts make most of every step, this is near the model's band."""
    out = []
    for regime in sorted({c["regime"] for c in loops}):
        same = [c for c in loops if c["regime"] == regime]
        factors, faster = [], 0
        for c in same:
            others = [o["measured_s"] for o in same if o["program"] != c["program"]]
            if others:
                guess, a = statistics.median(others), c["measured_s"]
                factors.append(max(guess / a, a / guess))
                faster += guess < a
        if factors:
            note = f"jaxcnn's loop; {len(factors)} measured loop steps, each against the others'"
            out.append(band_row(platform, f"{regime} programs", _median_worst(factors),
                                "baseline", kind="derived", extra=LOOP_CONSTANT, note=note,
                                band_faster=faster))  # fmt: skip
    return out


BEFORE_FIRST_RUN = "device step, predicted before the program first ran on the chip"
AS_IT_RAN = "none: itself a check, against the measured step `numerator` names"
AS_RUN = "device_step_as_run_s"  # apart from device_step_s: no answer or page prices with it


def before_first_run_rows(
    records: Sequence[Record], measured: Sequence[Row] | None = None
) -> list[Row]:
    """Per accelerator chip and regime, how far the device step a program's first run on
    the chip was written with lies from the step measured: out of sample by construction
    (no run of that program on that chip was in the constants that predicted it). Each
    program once (model, batch, precision and formulation: its data set and loop do not
    change the program), against its measured step as the table gives it (its runs
    pooled, RULES["pooled"]), the whole-epoch loop's where it ran one (no host in its
    step: MEASURED_AGAINST's rule); a small program that ran only the step loop is left
    out, counted in the note. `measured`: measured_rows(records), where already made."""
    from jaxcnn.perf.predict import held_out_errors

    # each run's pooled step (value, id), as measured_rows pooled it
    pooled = {
        run: (m["value"], m["id"])
        for m in (measured_rows(records) if measured is None else measured)
        if m["quantity"] == "step_s"
        for run in m["records"].split()
    }
    by_chip: dict[str, dict[tuple, list[TrainRecord]]] = defaultdict(lambda: defaultdict(list))
    # only a run of one model timed on a device at hand (a train record) measured its step
    for r in sorted(_ok(records), key=recorded_at_or_oldest):
        if not isinstance(r, TrainRecord) or isinstance(r, EnsembleRecord) or is_compiled(r):
            continue
        p, step = r.prediction, r.step_time_s
        if r.device.platform != "cpu" and p and p.device_step_s and step and step.median:
            w = workload_of(r)
            program = (w["model"], w["batch"], w["precision"], w["formulation"])
            by_chip[w["device"]][program].append(r)
    out = []
    for chip, runs in sorted(by_chip.items()):
        by_regime: dict[str, list[tuple[TrainRecord, float]]] = defaultdict(list)
        alone: dict[str, int] = defaultdict(int)
        for ran in runs.values():
            r, regime = ran[0], ran[0].prediction.regime  # made before any run of it here
            # against the whole-epoch loop's step, on the first run's data, the newest
            dataset = r.workload.dataset
            against = max(
                reversed(ran), key=lambda x: (x.loop == "device", x.workload.dataset == dataset)
            )
            # a small program's step timed alone is mostly the host's dispatch, which no
            # device step predicts: only its whole-epoch loop checks it
            if against.loop != "device" and regime == "small":
                alone[regime] += 1
                continue
            step, step_id = pooled[against.run_id]
            by_regime[regime].append((r, step))
            # the prediction itself, a figure beside the step measured (`numerator`)
            w = {**workload_of(against), "params": _params(r)}
            note = f"{regime} program; measured {step * 1e3:.3g} ms"
            out.append(row(AS_RUN, "predicted", r.prediction.device_step_s, w, "before-first-run",
                           [r], extra=BEFORE_FIRST_RUN, band_quantity=AS_IT_RAN,
                           numerator=step_id, note=note))  # fmt: skip
        for regime, checked in sorted(by_regime.items()):
            group = [r for r, _ in checked]
            pairs = [(r.prediction.device_step_s, step) for r, step in checked]
            factors, faster = held_out_errors(pairs)
            carried_by = [r.prediction.error_band for r in group]
            carried = {
                json.dumps(b and b.model_dump(exclude_unset=True), sort_keys=True)
                for b in carried_by
            }
            bands = [json.loads(b) for b in sorted(carried)]
            said = "; ".join(
                f"median {b['median']:.0%}, worst {b['worst']:.0%} off (n={b['observations']}, "
                f"leave one {b['split']} out)"
                if b
                else "unvalidated"
                for b in bands
            )
            beyond = sum(  # in the band's own terms: |predicted / actual - 1|
                bool(b) and abs(p / a - 1) > b.worst
                for b, (p, a) in zip(carried_by, pairs, strict=True)
            )
            versions = sorted({r.prediction.constants_version for r in group})
            by = versions[0] if len(versions) == 1 else f"{versions[0]} to {versions[-1]}"
            left = (f"; {alone[regime]} more timed only alone, in the step loop, left out "
                    "(their step is mostly the host's)" if alone[regime] else "")  # fmt: skip
            note = (f"worst {max(factors):.3g}x; constants {by}; "
                    f"{prediction_faster(faster, len(group))}{left}; the band they carried: {said}"
                    + (f"; beyond its worst (|p/a - 1|): {beyond} of {len(group)}"
                       if any(bands) else ""))  # fmt: skip
            out.append(band_row(group[0].device.platform, f"{regime} programs",
                                _median_worst(factors), "before-first-run", group, chip,
                                extra=BEFORE_FIRST_RUN, note=note, band_faster=faster))  # fmt: skip
    return out


def _per_device(record: CompileRecord, per_chip: float | None) -> float | None:
    """One device's share of a figure of its target's chip (a v2/v3 TPU chip is two)."""
    # a target's chips and devices are PositiveCounts
    chips, devices = (record.target.chips, record.target.devices) if record.target else (1, 1)
    return number(per_chip * chips / devices) if per_chip else None


def _watts_per_device(record: CompileRecord) -> float | None:
    """One device's share of its chip's thermal design power (jaxcnn.perf.chips), where
    the vendor publishes one (NVIDIA's datasheets do; Google gives no TPU's)."""
    from jaxcnn.perf import chips

    return _per_device(record, chips.fact(record.device.kind, "tdp_watts"))


def _vendor_peak(record: CompileRecord) -> tuple[float | None, str | None]:
    """The datasheet peak FLOP/s of one device of the record's target in the precision
    its matmuls run in (jaxcnn.perf.rates.matmul_precision), and that precision: never
    the chip's fastest, which would hold an f32 step against a GPU's fp16 tensor cores."""
    from jaxcnn.perf import rates

    peaks = (record.target and record.target.peak_tflops) or {}
    dtype = rates.DTYPES.get(record.workload.precision)
    precision = dtype and rates.matmul_precision(predictions.device_of(record), dtype)
    tflops = number(peaks.get(precision)) if precision else None
    return _per_device(record, tflops * 1e12 if tflops else None), precision


# --- published -------------------------------------------------------------------------


def _published_workload(ref: Any, model: str, placement: str) -> dict[str, Any]:
    """A published reference's step as the table keys it: its batch the global one, as
    every row's (its source's per chip times its chips)."""
    return {
        "model": model,
        "dataset": "-",
        "batch": ref.batch_per_chip * ref.chips if ref.batch_per_chip else None,
        "precision": SPELLING.get(ref.precision, ref.precision),
        "formulation": "-",
        "loop": "-",
        "placement": placement,
        "framework": ref.framework,
        "platform": "tpu" if ref.chip.startswith("TPU") else "cpu" if "CPU" in ref.chip else "gpu",
        "device": ref.chip,
        "devices": ref.chips,
        "extra": ref.id,
    }


# What a published JAX loop whose shape is not rebuilt is predicted by.
JAXCNN_LOOP = "as jaxcnn's own loop (this loop's shape is not rebuilt)"


def published_rows(refs: Sequence[Any], records: Sequence[Record]) -> list[Row]:
    """Each published measurement as a step time (where its batch is known), its
    prediction from the compile of the same step, and their factor."""
    out = []
    loaded = [r for r in records if is_compiled(r) or isinstance(r, InputRecord)]
    for v in predictions.versus_published(loaded, refs):
        ref = v["reference"]
        placement = "single" if ref.chips == 1 else "data-parallel"
        w = _published_workload(ref, labels.model_with_overrides(ref), placement)
        rate = ref.batch_per_chip and ref.images_per_s_per_chip
        step = ref.step_time_s or (ref.batch_per_chip / ref.images_per_s_per_chip if rate else None)
        if step is None:
            continue
        held = f"held out of every fit: {ref.held_out}" if ref.held_out else None
        ends = ref.step_time_s_range  # the source's own range, where it gives one
        spread = {"lo": ends[0], "hi": ends[1], "spread": PUBLISHED_RANGE} if ends else {}
        pub = row("step_s", "published", step, w, "published", source=ref.source_url,
                  note=ref.quote, flag=held, **spread)  # fmt: skip
        out.append(pub)
        if v.get("predicted"):
            shape = v.get("block", {}).get("input", JAXCNN_LOOP)
            note = (
                f"{OURS_LOOP_STEP} {shape}"
                if v.get("compared") == "loop_step_s"
                else f"{OURS_FOR_PUBLISHED}: device step plus the platform's fitted "
                "published-loop cost"
            )
            pred = row("step_s", "predicted", ref.batch_per_chip / v["predicted"],
                       {**w, "framework": "jaxcnn"}, "per-kernel", [v["record"]],
                       note=note)  # fmt: skip
            out.append(pred)
            out.append(ratio("error_factor", pred, pub, "held-out", extra=f"{ref.id} vs published"))
    return out


# The published efficiencies' comparison rows say this in `extra`, so that no band of
# published steps counts them (published_bands) and the efficiency band finds them.
SCALING_VERSUS = "scaling efficiency vs published"
OPTIMISTIC, PESSIMISTIC = "predicted more efficient", "predicted less efficient"


def scaling_published(refs: Sequence[Any], records: Sequence[Record]) -> list[Row]:
    """Each published 1-vs-N-chip pair: its efficiency as published, the efficiency
    predicted from the N-chip program's step against the one-chip program's, and their
    factor. Held out of every fit: the one-chip sides are fitted as steps, never as an
    efficiency, so the efficiency is out of sample."""
    out = []
    loaded = [r for r in records if is_compiled(r)]
    for ref in refs:
        if ref.scaling_efficiency is None:
            continue
        w = _published_workload(ref, ref.model, "data-parallel")
        held = f"held out of every fit: {ref.held_out}" if ref.held_out else None
        pub = row("scaling_efficiency", "published", ref.scaling_efficiency, w, "published",
                  source=ref.source_url, note=ref.quote, flag=held)  # fmt: skip
        out.append(pub)
        many, one = predictions.versus_published(loaded, [ref, predictions.one_chip_of(ref)])
        if not (many.get("predicted") and one.get("predicted")):
            continue
        note = f"the {ref.chips}-chip program's step against the one-chip program's"
        pred = row("scaling_efficiency", "predicted", many["predicted"] / one["predicted"],
                   {**w, "framework": "jaxcnn"}, "per-kernel", [many["record"], one["record"]],
                   note=note)  # fmt: skip
        out.append(pred)
        direction = OPTIMISTIC if pred["value"] > pub["value"] else PESSIMISTIC
        extra = f"{ref.id} {SCALING_VERSUS}"
        out.append(ratio("error_factor", pred, pub, "held-out", extra=extra, note=direction))
    return out


SCALING_BAND = EFFICIENCY_BAND  # the scaling page's band, named once there
SCALING_IDEAL = "scaling efficiency, ideal (100%) for every pair"
SCALING_SPLIT = "against published 1-vs-N pairs"  # nothing fitted: the pairs are outside


def scaling_band(table: pd.DataFrame) -> list[Row]:
    """The predicted data-parallel efficiency against the published, per platform."""
    out = []
    e = table[(table.quantity == "error_factor") & table.extra.str.endswith(SCALING_VERSUS)]
    for platform, g in e.groupby("platform"):
        optimistic = int((g.note == OPTIMISTIC).sum())
        note = f"{OPTIMISTIC} in {optimistic} of {len(g)} published 1-vs-N-chip pairs"
        out.append(band_row(platform, "large programs", _median_worst(g.value),
                            extra=SCALING_BAND, note=note, band_faster=optimistic))  # fmt: skip
        # the same pairs with every efficiency taken as ideal: what the model adds to that
        published = g.numerator.map(table.set_index("id").value)
        ideal = _median_worst([max(1 / a, a) for a in published])
        note = f"every one of the {len(g)} published 1-vs-N-chip pairs taken at 100%"
        out.append(band_row(platform, "large programs", ideal, "baseline", kind="derived",
                            extra=SCALING_IDEAL, note=note))  # fmt: skip
    return out


# --- ratios ----------------------------------------------------------------------------

CPU_FORMULATION = platform_formulation("cpu")  # jaxcnn's default on a CPU, the one a user runs


def workload_of_row(r: pd.Series | Row) -> dict[str, Any]:
    """A row's workload and device (KEY past quantity and kind, and BESIDE_KEY): what a
    figure made from it is keyed by."""
    return {k: r[k] for k in (*KEY[2:], *BESIDE_KEY)}


def ratio(quantity: str, a: Row, b: Row, selection: str, **rest: Any) -> Row:
    """A row comparing figure `a` with the baseline `b`, keyed by a's workload and device
    (`extra` names the baseline), naming both ids: a speedup is b / a (how many times
    less time `a` takes), an error factor max(a/b, b/a) with `note` saying which side is
    the faster."""
    value = b["value"] / a["value"]
    if quantity == "error_factor":
        rest.setdefault("note", "predicted faster" if value > 1 else "predicted slower")
        value = max(value, 1 / value)
    kind = "predicted" if "predicted" in (a["kind"], b["kind"]) else a["kind"]
    workload = workload_of_row(a)
    rest.setdefault("extra", f"vs {b['device']}")
    guessed = [r for r in (a, b) if r["kind"] == "predicted"]
    if quantity == "speedup" and len(guessed) == 1:  # its one predicted side's error is its own
        band = {c: guessed[0].get(c) for c in BAND_COLUMNS}
        rest.update({c: v for c, v in band.items() if v is not None and v == v})
    return row(
        quantity, kind, value, workload, selection, numerator=b["id"], denominator=a["id"], **rest
    )


COMPILED_VS_RAN = "memory compiled here vs on the chip as it ran"


def memory_checks(table: pd.DataFrame) -> list[Row]:
    """Each target's compiled memory (compiled here, not run) against the same program's
    as the target's chip compiled it when it ran (memory_rows): how far the memory every
    fit verdict rests on is from what the chip's own compiler found."""
    key = list(PROGRAM)
    compiled = rows(table, quantity="memory_bytes", kind="compiled", devices=1, extra="-")
    compiled = compiled.assign(chip=compiled.device.map(chip_named))
    ran = rows(table, quantity="memory_bytes", kind="compiled", extra=ON_THE_CHIP)
    both = compiled.merge(ran, left_on=[*key, "chip"], right_on=[*key, "device"],
                          suffixes=("", "_ran"))  # fmt: skip
    out = []
    for r in both.to_dict("records"):
        here, there = r["value"], r["value_ran"]
        gap = int(here - there)
        more = f"{abs(gap):,} bytes {'more' if gap > 0 else 'fewer'}" if gap else "the same bytes"
        note = f"compiled here: {more}"
        out.append(row("memory_factor", "compiled", max(here / there, there / here),
                       workload_of_row(r), "compiled-vs-ran", extra=COMPILED_VS_RAN, note=note,
                       numerator=r["id_ran"], denominator=r["id"]))  # fmt: skip
        out[-1]["records"] = f"{r['records']} {r['records_ran']}"  # both sides' runs
    return out


def speedup(a: pd.Series | Row, b: pd.Series | Row, selection: str, extra: str, **rest: Any) -> Row:
    """ratio()'s speedup of the row `a` over its baseline `b` (table rows or their dicts)."""
    a, b = (r.to_dict() if isinstance(r, pd.Series) else r for r in (a, b))
    return ratio("speedup", a, b, selection, extra=extra, **rest)


def cpu_speedups(table: pd.DataFrame) -> list[Row]:
    """Each predicted one-device accelerator step against the same step on each CPU:
    like for like and against the CPU at its best; then the measured loops'."""
    out = []
    m = rows(table, quantity="step_s", kind="measured")
    cpu = _by_step(cpu_steps(m))
    predicted = rows(table, quantity=["device_step_s", "loop_step_s"], kind="predicted", devices=1)
    for _, p in predicted.iterrows():
        for device, on_cpu in cpu(p).groupby("device"):
            like = rows(on_cpu, formulation="xla", loop="step", framework="jax")
            base = f"{p.quantity} vs {device}"
            if len(like) == 1:
                out.append(speedup(p, like.iloc[0], "like-for-like", base))
            out.append(speedup(p, fastest(on_cpu), "cpu-best", f"{base} at its best"))
    return out + measured_loop_speedups(m) + loop_vs_loop(m, predicted)


def _by_step(found: pd.DataFrame) -> Callable[[pd.Series], pd.DataFrame]:
    """The rows of `found` of a row's step (its model, batch and precision), `found`
    grouped once: a speedup's every side looks its baselines up, never filters them."""
    groups = dict(list(found.groupby(["model", "batch", "precision"], sort=False)))
    none = found.iloc[:0]
    return lambda r: groups.get((r.model, r.batch, r.precision), none)


def cpu_steps(measured: pd.DataFrame) -> pd.DataFrame:
    """The CPUs' one-device steps a speedup divides: the steady step of each formulation,
    loop and framework (jaxcnn's own loop, host included, is the accelerators' side)."""
    return rows(measured, platform="cpu", devices=1, extra="-")


def fastest(steps: pd.DataFrame, dataset: str | None = None) -> Row:
    """The fastest of `steps` (of one step): on `dataset` where one ran on it, else of
    all, so that a predicted and a measured speedup of one workload share their CPU
    baseline."""
    same = steps[steps.dataset == dataset] if dataset is not None else steps
    pool = same if len(same) else steps
    return pool.loc[pool.value.idxmin()].to_dict()


def measured_loop_speedups(measured: pd.DataFrame) -> list[Row]:
    """jaxcnn's loop measured on one accelerator device against the same loop on each
    CPU in the same formulation, and against the CPU's fastest step."""
    loops = rows(measured, extra=LOOP, devices=1)
    cpu, steps = _by_step(loops[loops.platform == "cpu"]), _by_step(cpu_steps(measured))
    own = _by_step(rows(measured, devices=1, extra="-"))  # each chip's steps
    out = []
    for _, a in loops[loops.platform != "cpu"].iterrows():
        for device, on_cpu in cpu(a).groupby("device"):
            base = f"jaxcnn's loop vs {device}"
            like = on_cpu[on_cpu.formulation == a.formulation]
            if len(like):
                b = fastest(like)
                out.append({**speedup(a, b, "like-for-like", base), **over_runs(a, b)})
        # the predicted speedups' baseline
        for device, on_cpu in steps(a).groupby("device"):
            best = fastest(on_cpu, a.dataset)
            extra = f"jaxcnn's loop vs {device} at its best"
            out.append(speedup(a, best, "cpu-best", extra))
            # like for like at the other end: the chip's own fastest step (its device
            # loop, where that ran) over the CPU's
            mine = own(a)[own(a).device == a.device]
            if len(mine):
                extra = f"{AT_ITS_BEST} vs {device} at its best"
                out.append(speedup(fastest(mine, a.dataset), best, "cpu-best", extra))
    return out


def over_runs(a: pd.Series, b: pd.Series | Row) -> dict[str, Any]:
    """The range of b's step over a's where a pools several runs: the speedup in a's
    slowest and fastest run (the verdict a single run of it could have given)."""
    if a.spread != "min-max over runs" or not (a.lo and a.hi):
        return {}
    return {"lo": b["value"] / a.hi, "hi": b["value"] / a.lo, "spread": OVER_ITS_RUNS, "n": a.n}


OWN_CEILING = "of its own measured matmul rate in the precision its matmuls ran (machine-best)"


def ceiling_fractions(table: pd.DataFrame) -> list[Row]:
    """A train step's achieved FLOP/s on one measured chip over that chip's own measured
    matmul rate in the precision its matmuls ran (TF32 where f32 ran as TF32 passes): the
    one ceiling every measured chip has, a CPU's only one. A datasheet's is `mfu`."""
    peaks = rows(table, quantity="peak_flops_per_s", kind="measured")
    # a chip's one measured rate per precision (none where it has several)
    one_peak = {k: p.iloc[0] for k, p in peaks.groupby(["device", "precision"]) if len(p) == 1}
    out = []
    steps = rows(table, quantity="flops_per_s", kind="measured", devices=1)
    for _, f in steps[steps.model != "matmul"].iterrows():
        p = one_peak.get((f.device, "tf32" if f.note == TF32_MATMULS else f.precision))
        if p is not None:
            out.append(row("matmul_fraction", "measured", f.value / p.value, workload_of_row(f),
                           f.selection, numerator=f.id, denominator=p.id,
                           note=OWN_CEILING))  # fmt: skip
    return out


def epoch_speedups(table: pd.DataFrame) -> list[Row]:
    """An accelerator's predicted epoch (its loop step's) against each CPU's trained epoch
    of the same step in jaxcnn's default CPU formulation (its runs pooled): what a user running
    the same fit on each sees, an epoch at a time."""
    trained = rows(table, quantity="epoch_s", kind="measured", platform="cpu", devices=1,
                   selection="pooled-trained", formulation=CPU_FORMULATION)  # fmt: skip
    trained = trained[~of_ensembles(trained)]  # one model's runs, not an ensemble's
    predicted = rows(table, quantity="epoch_s", kind="predicted", selection="epoch-from-step")
    predicted = predicted[predicted.extra.str.endswith("loop_step_s") & (predicted.devices == 1)]
    # and against the CPU's epoch made as the accelerator's is: its loop step's, like for like
    alike = rows(table, quantity="epoch_s", kind="derived", platform="cpu", devices=1,
                 formulation=CPU_FORMULATION)  # fmt: skip
    alike = alike[alike.extra.str.endswith(f"steps of {LOOP}")]
    trained, alike, out = _by_step(trained), _by_step(alike), []
    for _, a in predicted.iterrows():
        for _, b in trained(a).iterrows():
            extra = f"epoch vs {b.device}'s trained on {b.dataset}, {b.extra}"
            out.append(speedup(a, b, "loop-vs-loop", extra))
        for _, b in alike(a).iterrows():
            extra = f"epoch vs {b.device}'s on {b.dataset}, both from loop steps"
            out.append(speedup(a, b, "loop-vs-loop", extra))
    return out


def loop_vs_loop(measured: pd.DataFrame, predicted: pd.DataFrame) -> list[Row]:
    """An accelerator's jaxcnn's loop (measured or predicted) against the CPU's, each in
    jaxcnn's default formulation there: what a user running the same fit sees. A measured
    side is set against the CPU's loop on its own data set, a predicted one against each;
    a loop pooled in an earlier sitting too, so each sitting's verdict can be read (the
    crossover's, sitting by sitting)."""
    loops = rows(measured, extra=LOOP, devices=1)
    # the CPU's default formulation: the one CPU loop a user runs (every host loop timed
    # is fit's default step loop: host_rows)
    cpu = _by_step(rows(loops, platform="cpu", formulation=CPU_FORMULATION))
    earlier = rows(measured, selection="earlier-sitting")
    sides = [*loops[loops.platform != "cpu"].iterrows(),
             *earlier[earlier.platform != "cpu"].iterrows(),
             *predicted[predicted.quantity == "loop_step_s"].iterrows()]  # fmt: skip
    out = []
    for _, a in sides:
        same = cpu(a)
        if a.kind == "measured":
            same = same[same.dataset == a.dataset]
        for _, b in same.iterrows():
            extra = f"{LOOP} vs {b.device}'s on {b.dataset}"
            if a.selection == "earlier-sitting":  # its extra names its sitting
                out.append(speedup(a, b, a.selection, extra + a.extra.removeprefix(LOOP)))
            else:
                out.append({**speedup(a, b, "loop-vs-loop", extra), **over_runs(a, b)})
    return out


# --- the seeds' own figures and derived comparisons ------------------------------------

SEED_FIGURES = Path(__file__).with_name("seed_figures.json")


def seed_rows(path: Path = SEED_FIGURES) -> list[Row]:
    """The seeds' figures that are not a step (an epoch, a claimed speedup), as published
    rows citing the seed and its quoted line."""
    out = []
    for f in json.loads(path.read_text(encoding="utf-8")):
        w = {k: f[k] for k in ("model", "batch", "platform", "device")}
        w.update(devices=1, framework="seed " + f["seed"], extra=f["id"])
        note = f"{f['quote']} ({f['note']})"
        source = f"seed {f['seed']}"
        out.append(
            row(f["quantity"], "published", f["value"], w, "published", source=source, note=note)
        )
    return out


def seed_speedups(table: pd.DataFrame) -> list[Row]:
    """A seed's own accelerator over its own CPU: its published epochs of one model at one
    batch divided (seed 000's MX150 over its laptop), beside which ours are read."""
    epochs = rows(table, quantity="epoch_s", kind="published")
    epochs = epochs[epochs.framework.str.startswith("seed ")]
    out = []
    for _, same in epochs.groupby(["framework", "model", "batch"]):
        for _, cpu in same[same.platform == "cpu"].iterrows():
            for _, chip in same[same.platform != "cpu"].iterrows():
                out.append(speedup(chip, cpu, "seed-own", f"epoch vs {cpu.device}"))
    return out


def seed_step_bounds(table: pd.DataFrame) -> list[Row]:
    """Each seed's published accelerator step against each CPU's jaxcnn's loop of the
    same step, in the CPU's default formulation (RULES["seed-step-bound"])."""
    steps = rows(table, quantity="step_s", kind="published")
    steps = steps[steps.source.astype(str).str.startswith("seed ") & (steps.platform != "cpu")]
    loops = rows(table, quantity="step_s", kind="measured", platform="cpu", devices=1,
                 extra=LOOP, formulation=CPU_FORMULATION)  # fmt: skip
    loops, out = _by_step(loops), []
    for _, a in steps.iterrows():
        for _, b in loops(a).iterrows():
            extra = f"the seed's step vs {b.device}'s {LOOP} on {b.dataset}"
            ids = {"numerator": b.id, "denominator": a.id}
            out.append(row("speedup", "derived", b.value / a.value, workload_of_row(a),
                           "seed-step-bound", extra=extra, **ids))  # fmt: skip
    return out


def epochs_from_steps(table: pd.DataFrame) -> list[Row]:
    """An epoch of a seed model's training set from a measured step or a predicted loop
    step (RULES["epoch-from-step"])."""
    from jaxcnn import data

    out = []
    # a step timed alone, a predicted loop step, and jaxcnn's loop as it ran
    step = (table.quantity == "step_s") & (table.kind == "measured")
    loop = (table.quantity == "loop_step_s") & (table.kind == "predicted") & (table.extra == "-")
    timed = rows(table[step | loop], model=list(TRAIN_IMAGES), devices=1, extra=["-", LOOP])
    for d in timed.to_dict("records"):
        steps = data.steps_per_epoch(TRAIN_IMAGES[d["model"]], int(d["batch"]))
        if not steps:  # a batch past the training set (a batch search's largest): no epoch
            continue
        of = "jaxcnn's loop" if d["extra"] == LOOP else d["quantity"]
        said = (f"{steps} steps of {d['batch']}, evaluation apart", d["note"])
        band = {"band_quantity": None}
        if d["kind"] == "predicted":  # unvalidated as its step is, or banded by it
            bq = str(d["band_quantity"])
            band["band_quantity"] = bq if bq.startswith("unvalidated") else f"epoch from {bq}"
        if d["quantity"] == "loop_step_s":
            band.update({k: d[k] for k in BAND_COLUMNS if k != "band_quantity"})
        # a measured step's epoch was never timed: derived; a predicted one stays predicted
        kind = "derived" if d["kind"] == "measured" else d["kind"]
        w = {**d, "extra": f"{steps} steps of {of}"}
        note = "; ".join(n for n in said if isinstance(n, str))
        out.append(row("epoch_s", kind, d["value"] * steps, w, "epoch-from-step",
                       numerator=d["id"], note=note, **band))  # fmt: skip
    return out


# One epoch's training images of each seed model on its seed's dataset: seed 000's
# 20,000 cats-vs-dogs training images for its CNN, MNIST's 60,000 for the others.
TRAIN_IMAGES = {"catsdogs_cnn": 20_000, "mnist_cnn": 60_000, "lenet5_keras": 60_000, "mlp": 60_000}


def ensemble_speedups(table: pd.DataFrame) -> list[Row]:
    """K models in one vmapped step against K sequential steps of one model, per K, of
    the same workload on the same device; the same of their trained epochs (EPOCHS: what
    a user waits for); each K's over K=1's of the same clock."""
    measured = rows(table, kind="measured")
    timed = measured[measured.quantity.isin(["step_s", "epoch_s"]) & of_ensembles(measured)]
    same = [c for c in ("quantity", *KEY[2:], "ensemble_size") if c not in ("kind", "extra")]
    made: dict[tuple, Row] = {}  # (clock, workload past K) -> its K's vmap-vs-sequential
    for key, pair in timed.groupby(same, dropna=False):
        by = {r["ensemble_mode"]: r for _, r in pair.iterrows()}
        if len(pair) != 2 or set(by) != set(ENSEMBLE_MODES):
            continue
        said = EPOCHS if key[0] == "epoch_s" else ""
        k = int(by["vmap"]["ensemble_size"])
        made[key] = speedup(by["vmap"], by["sequential"], "equal-batch",
                            f"K={k} vmap vs sequential{said}")  # fmt: skip
    out = list(made.values())
    for key, r in made.items():  # each K's over K=1's of the same clock and workload
        one = made.get((*key[:-1], 1))
        if one is not None and r is not one:
            over = f"{r['extra']}{OVER_K1}"
            out.append(speedup(one, r, "over-k1", over, ensemble_size=r["ensemble_size"]))
    return out


EPOCHS = ", epochs"
OVER_K1 = ", over K=1's"
EPOCH_FROM_LOOP = "epoch from its loop step vs trained"


def epoch_checks(table: pd.DataFrame, sittings: dict[str, tuple] | None = None) -> list[Row]:
    """Each epoch made from a measured loop step against the epochs the same step trained
    on the same device in the same sitting (`sittings`: each run's; RULES["epoch-vs-
    trained"]): one clock against another, not one VM against another, and per platform
    their median and worst, the band of an epoch a loop step implies (a predicted chip's
    epoch is made so)."""
    from jaxcnn import data

    runs = table.set_index("id").records

    def sitting_of(ids: Any) -> tuple | None:  # a pooled row's runs are of one sitting
        first = str(ids).split()[0] if isinstance(ids, str) and ids else None
        return (sittings or {}).get(first) if first else None

    made = rows(table, quantity="epoch_s", kind="derived", selection="epoch-from-step")
    made = made[made.extra.str.endswith(f"steps of {LOOP}")]
    trained = rows(table, quantity="epoch_s", kind="measured", selection="pooled-trained")
    trained = trained[~of_ensembles(trained)]  # one model's runs, not an ensemble's
    # a made epoch is of the seed's training set (TRAIN_IMAGES): checked against epochs
    # of a set that size only (not the embedded digits')
    of_size = [data.train_size(d) == TRAIN_IMAGES.get(m)
               for d, m in zip(trained.dataset, trained.model, strict=True)]  # fmt: skip
    trained = trained[of_size]
    if not len(made) or not len(trained):
        return []
    key = ["device", "model", "dataset", "batch", "precision", "formulation", "placement"]
    out = []
    for _, a in made.iterrows():
        for _, b in trained[(trained[key] == a[key]).all(axis=1)].iterrows():
            if sitting_of(runs.get(a.numerator)) != sitting_of(b.records):
                continue
            longer = "from the loop step longer" if a.value > b.value else "trained longer"
            out.append(ratio("error_factor", a.to_dict(), b.to_dict(), "epoch-vs-trained",
                             extra=f"{EPOCH_FROM_LOOP}, {b.extra}", note=longer,
                             epochs=b.epochs))  # fmt: skip
    for platform in sorted({r["platform"] for r in out}):
        mine = [r for r in out if r["platform"] == platform]
        longer = sum(r["note"] == "from the loop step longer" for r in mine)
        note = f"from the loop step longer in {longer} of {len(mine)}"
        out.append(band_row(platform, "epochs", _median_worst([r["value"] for r in mine]),
                            "epoch-vs-trained", kind="derived", extra=EPOCH_FROM_LOOP,
                            note=note))  # fmt: skip
    return out


BEST_OVER_BEST = "at its best vs xla formulation at its best"
# over jaxcnn's own default on a CPU: what the library adds to the best without one
BEST_OVER_CPU = "at its best vs cpu formulation at its best"
# and what a user's fit sees of it: both in jaxcnn's loop, host work included
LOOP_OVER_CPU = f"in {LOOP} vs cpu formulation"
LOOP_OVER_XLA = f"in {LOOP} vs xla formulation"


def setting_speedups(table: pd.DataFrame) -> list[Row]:
    """What a setting of a measured JAX step is worth on its device: each formulation's
    step over the xla formulation's of the same step, loop and device (a kernel library
    on a CPU), and the device loop's over the step loop's (below 1 the device loop is the
    slower: on a CPU, the xla formulation's convolutions are); and onednn's fastest step
    (either loop) over the xla and cpu formulations' fastest, each at its best; and
    onednn's step over the xla and cpu formulations' in jaxcnn's loop, as a user's fit
    runs it."""
    m = rows(table, quantity="step_s", kind="measured", framework="jax", extra="-")
    loops = rows(table, quantity="step_s", kind="measured", framework="jax", extra=LOOP)
    out = [*_over_the_same(m, "formulation", ["onednn", "cpu"], "xla", "vs xla formulation"),
           *_over_the_same(m, "loop", "device", "step", DEVICE_OVER_STEP_LOOP),
           *_over_the_same(loops, "formulation", "onednn", "cpu", LOOP_OVER_CPU),
           *_over_the_same(loops, "formulation", "onednn", "xla", LOOP_OVER_XLA)]  # fmt: skip
    key = ["model", "batch", "precision", "device", "placement", "dataset"]
    for base, extra in (("xla", BEST_OVER_BEST), ("cpu", BEST_OVER_CPU)):
        for _, g in m[m.formulation.isin(["onednn", base])].groupby(key):
            mine, theirs = g[g.formulation == "onednn"], g[g.formulation == base]
            if len(mine) and len(theirs):
                out.append(speedup(fastest(mine), fastest(theirs), "cpu-best", extra))
    return out


def _over_the_same(m: pd.DataFrame, varies: str, chosen: Any, base: str, extra: str) -> list[Row]:
    """Each of the measured steps `m` whose `varies` is `chosen` over the one whose
    `varies` is `base`, equal to it in all else of its workload and device."""
    same = [c for c in (*PROGRAM, "device") if c != varies]
    bases, out = rows(m, **{varies: base}), []
    for _, r in rows(m, **{varies: chosen}).iterrows():
        found = bases[(bases[same] == r[same]).all(axis=1)]
        if len(found) == 1:
            out.append(speedup(r, found.iloc[0], "like-for-like", extra))
    return out


def chip_comparisons(table: pd.DataFrame) -> list[Row]:
    """TPU against GPU per chip: each model's fastest one-chip TPU target against its
    fastest one-chip GPU at equal batch, by the predicted loop and device step; a GPU chip
    that ran the step in jaxcnn's loop by its measured loop step (measured_loops)."""
    from jaxcnn import targets

    out = []
    one_chip = rows(table, quantity=["device_step_s", "loop_step_s"], kind="predicted",
                    device=[n for n, t in targets.TARGETS.items() if t.chips == 1])  # fmt: skip
    same = ["quantity", "model", "batch", "precision", "placement"]
    gpu_loops = rows(table, quantity="step_s", kind="measured", extra=LOOP, loop="step",
                     platform="gpu", devices=1)  # fmt: skip
    for (quantity, *_), g in one_chip.groupby(same):
        tpu, gpu = g[g.platform == "tpu"], g[g.platform == "gpu"]
        if quantity == "loop_step_s" and len(gpu):
            gpu = measured_loops(gpu_loops, gpu)
        if len(tpu) and len(gpu):
            t, q = fastest(tpu), fastest(gpu)
            fast, slow = (t, q) if t["value"] <= q["value"] else (q, t)
            extra = f"faster chip per chip, TPU vs GPU, {quantity}, over {slow['device']}"
            out.append(speedup(fast, slow, "equal-batch", extra))
    return out


def measured_loops(gpu_loops: pd.DataFrame, predicted: pd.DataFrame) -> pd.DataFrame:
    """Of one program's predicted loop steps on GPU targets (`predicted`), the GPUs that
    ran it in jaxcnn's step loop instead (`gpu_loops`: every one-GPU loop step measured
    in it), by their measured steps (on the prediction's data set where they ran on it,
    else on the seeds', SEED_DATASETS order), where any did: a measured chip is never set
    beside another's prediction, whose own error would decide which is the faster."""
    r = predicted.iloc[0]
    ran = rows(gpu_loops, model=r.model, batch=r.batch, precision=r.precision,
               placement=r.placement)  # fmt: skip
    order = [r.dataset, *SEED_DATASETS]
    ran = ran[ran.dataset.isin(order)]
    ran = ran.sort_values("dataset", key=lambda d: d.map(order.index)).drop_duplicates("device")
    return ran if len(ran) else predicted


def scaling_rows(table: pd.DataFrame) -> list[Row]:
    """Weak scaling predicted from compiles of the same per-device batch on 1 and on n
    devices of one chip (1 is ideal; above 1 cannot be true and is flagged)."""
    out = []
    p = rows(table, quantity="device_step_s", kind="predicted").copy()
    p["chip"] = p.device.map(chip_named)
    p["per_device"] = p.batch // p.devices
    for _, g in p.groupby(["model", "precision", "chip", "per_device"]):
        ones = g[g.devices == g.devices.min()]
        if len(g) < 2 or len(ones) != 1:
            continue
        one = ones.iloc[0].to_dict()
        for _, n in g[g.devices > one["devices"]].iterrows():
            extra = f"weak scaling from {one['device']}"
            # ratio's b / a: one device's step over n devices'
            e = ratio("scaling_efficiency", n.to_dict(), one, "equal-batch", extra=extra)
            if e["value"] > 1.0 + 1e-9:
                e["flag"] = "above ideal: cannot be true (a bug in the prediction)"
            out.append(e)
    return out


# What a measured step is compared with: (the measured row's extra, the predicted
# quantity, the loop whose timing is that quantity). The device step against a step
# timed with no host in it (the whole-epoch loop on the device) where one was timed,
# else the step timed alone; the loop step against jaxcnn's own step loop.
MEASURED_AGAINST = (("-", "device_step_s", "device"), (LOOP, "loop_step_s", "step"))
VERSUS_MEASURED = "vs measured on its chip"


def fitted_records(constants: dict[str, Any]) -> frozenset[str]:
    """The run_ids of the records `constants` were fitted on."""
    return frozenset(
        str(o.get("source")).removeprefix("record ")
        for family in (constants.get("families") or {}).values()
        for o in family.get("observations") or []
        if str(o.get("source")).startswith("record ")
    )


def measured_versus_predicted(
    table: pd.DataFrame, fitted: frozenset[str] = frozenset()
) -> list[Row]:
    """Each step measured on one accelerator device against the prediction of the same
    step for that chip's one-device target (MEASURED_AGAINST), one measured step per
    prediction: timed in its loop and on its dataset first, then of the most runs. A
    step the constants were fitted on (`fitted`) is compared in sample, and says so."""
    from jaxcnn import targets

    one_device = {t.chip: t.name for t in targets.TARGETS.values() if t.devices == 1}
    same = ["model", "batch", "precision", "placement"]
    out = []
    measured = rows(table, quantity="step_s", kind="measured", devices=1)
    measured = measured[measured.platform != "cpu"]
    predicted = table[table.kind == "predicted"]
    # a step's one prediction of a quantity for a target (none where there are several)
    by = predicted.groupby(["quantity", "device", *same])
    one_predicted = {k: p.iloc[0] for k, p in by if len(p) == 1}
    for extra, quantity, loop in MEASURED_AGAINST:
        chosen: dict[str, tuple[tuple[bool, bool, int], Row, Row]] = {}
        for _, m in measured[measured.extra == extra].iterrows():
            p = one_predicted.get((quantity, one_device.get(m.device), *m[same]))
            if p is not None:
                runs = len(str(m.records).split())  # a tie: the most runs'
                rank = (m.loop != loop, m.dataset != p.dataset, -runs)
                if p.id not in chosen or rank < chosen[p.id][0]:
                    chosen[p.id] = (rank, p.to_dict(), m.to_dict())
        what = quantity.removesuffix("_s").replace("_", " ")
        for _, p, m in chosen.values():
            in_sample = bool(fitted & set(str(m["records"]).split()))
            # the error of the prediction on the data the step ran on (a compiled program
            # reads none: its shapes are the same on any)
            on_its_data = {**p, "dataset": m["dataset"]}
            r = ratio("error_factor", on_its_data, m, "in-sample" if in_sample else "held-out",
                      extra=f"{what} {VERSUS_MEASURED}")  # fmt: skip
            if in_sample:
                r["note"] += "; in sample: the fit has this step"
            out.append(r)
    return out


def versus_measured_text(table: pd.DataFrame) -> str:
    """The measured-against-predicted rows as a small table, one line each, or the one
    line that says there are none."""
    e = table[(table.quantity == "error_factor") & table.extra.str.endswith(VERSUS_MEASURED)]
    if e.empty:
        return "no step measured here has a prediction compiled for its chip to compare with"
    by_id = table.set_index("id").value
    lines = [f"{'step':<34} {'device':<10} {'measured':>10} {'predicted':>10} {'factor':>7}  note"]
    for _, r in e.iterrows():
        step = f"{r.model} b{r.batch} {r.precision}, {r.extra.split(' vs ')[0]}"
        lines.append(
            f"{step:<34} {r.device:<10} {by_id[r.numerator] * 1e3:>8.3f}ms "
            f"{by_id[r.denominator] * 1e3:>8.3f}ms {r.value:>6.2f}x  {r.note}"
        )
    return "\n".join(lines)


# The registry's models of the small regime (jaxcnn.perf.predict.regime: under 1 GFLOP per
# image), as the predictions band them; catsdogs_cnn, at 224 pixels, is large.
SMALL_MODELS = ("mnist_cnn", "mlp", "lenet5", "lenet5_keras")


def framework_factors(table: pd.DataFrame) -> pd.DataFrame:
    """The factors between each published step of another framework's loop (or a large
    program's, of any framework) and our prediction of it: what `published_bands` bands
    (a small program's JAX loop is the fit's, held_out_loop_rows)."""
    e = table[
        (table.quantity == "error_factor")
        & (table.kind == "predicted")  # a prediction's error, not one clock against another
        & ~table.extra.str.endswith(SCALING_VERSUS)
        & ~table.extra.str.endswith(VERSUS_MEASURED)
        & (table.extra != HELD_OUT_LOOP)
    ]
    frameworks = e.numerator.map(table.set_index("id").framework).astype(str)
    is_jax = ~e.model.str.startswith("resnet") & frameworks.str.startswith(
        predictions.JAX_FRAMEWORKS
    )
    return e[~is_jax]


def is_small(rows: pd.DataFrame) -> pd.Series:
    """Which of `rows` are of small programs: their model's first word in SMALL_MODELS,
    or a network rebuilt from a published small-model loop."""
    from jaxcnn import models

    return rows.model.str.split(" ").str[0].isin([*SMALL_MODELS, *models.published_networks()])


def published_bands(table: pd.DataFrame) -> list[Row]:
    """Per platform and regime, the band of `framework_factors`."""
    out = []
    e = framework_factors(table)
    for (platform, small), g in e.groupby([e.platform, is_small(e)]):
        faster = int((g.note == "predicted faster").sum())
        programs = "small programs" if small else "large programs"
        note = f"published steps of other frameworks' loops; {prediction_faster(faster, len(g))}"
        out.append(band_row(platform, programs, _median_worst(g.value),
                            extra="against published", note=note, band_faster=faster))  # fmt: skip
    return out


# Published small programs' JAX loops (predictions.jax_loop): banded apart from other
# frameworks' loops.
JAX_VERSUS = "against published JAX loops"


ON_DEMAND = " on-demand, "  # a cost row's note: "<offering>, <provider> on-demand, <date>; ..."


def cost_rows(table: pd.DataFrame, prices: dict[str, Any] | None = None) -> list[Row]:
    """Predicted cost of an epoch on each priced target, all its chips and their host VM
    included (`prices`: the committed references.chip_prices() by default)."""
    from experiments.predict import references
    from jaxcnn import targets

    prices = references.chip_prices() if prices is None else prices
    out = []
    for _, e in rows(table, quantity="epoch_s", kind="predicted").iterrows():
        t = targets.TARGETS.get(e.device)
        price = prices.get(t.chip) if t else None
        if price is None:
            continue
        usd = e.value / 3600 * price.usd_per_chip_hour * t.chips
        d, p = e.to_dict(), price.price
        note = f"{p.offering}, {p.provider}{ON_DEMAND}{p.date}; the epoch: {d['note']}"
        # the price is a published figure: the cost errs as the epoch it prices does
        band = {k: d[k] for k in BAND_COLUMNS if pd.notna(d.get(k))}
        bq = band.get("band_quantity", "unvalidated")
        if not bq.startswith("unvalidated"):
            band["band_quantity"] = f"cost from {bq.removeprefix('epoch from ')}"
        out.append(row("usd_per_epoch", "predicted", usd, d, d["selection"], numerator=d["id"],
                       source=p.source_url, note=note, **band))  # fmt: skip
    return out + cost_ratios(out)


def cost_ratios(priced: list[Row]) -> list[Row]:
    """Each priced epoch over the cheapest target's epoch of the same program (model,
    data, batch, precision): how many times dearer."""
    groups: dict[tuple, list[Row]] = defaultdict(list)
    for r in priced:
        groups[tuple(r[c] for c in PROGRAM)].append(r)
    out = []
    for same in groups.values():
        cheapest = min(same, key=lambda r: r["value"])
        for r in same:
            if r is not cheapest:
                extra = f"usd_per_epoch vs {cheapest['device']}, the cheapest"
                out.append(row("cost_ratio", "predicted", r["value"] / cheapest["value"], r,
                               "equal-batch", extra=extra, numerator=r["id"],
                               denominator=cheapest["id"], note=r["note"]))  # fmt: skip
    return out


# --- the table -----------------------------------------------------------------------


def build(loaded: Sequence[Record], refs: Sequence[Any] | None = None) -> pd.DataFrame:
    """Every figure of the `loaded` records and the published references, one row each.
    A paired bench run's turns are no figure, but their matmul ceilings are."""
    from experiments import records as records_lib
    from experiments.predict import references

    refs = references.load() if refs is None else refs
    records = [r for r in loaded if not records_lib.took_turns(r)]
    constants = predictions.constants_table()
    bands = _bands(constants)
    host, measured = host_rows(records), measured_rows(records)
    compiled = compiled_records(records)
    out = [
        *measured,
        *matmul_rows(records, loaded),
        *paired_rows(loaded),
        *host,
        *speedrun_rows(records),
        *compiled_rows(compiled, records),
        *held_out_loop_rows(records, constants, host),
        *run_spread_rows(host),
        *core_rows(records),
        *sitting_spread_rows(records),
        *before_first_run_rows(records, measured),
        *predicted_rows(compiled, bands),
        *published_rows(refs, records),
        *scaling_published(refs, records),
        *band_rows(bands),
    ]
    out += seed_rows()
    out += epochs_from_steps(frame(out))
    table = frame(out)
    sittings = {r.run_id: sitting(r) for r in records}
    for derive in (
        published_bands,
        scaling_band,
        functools.partial(measured_versus_predicted, fitted=fitted_records(constants)),
        cpu_speedups,
        seed_speedups,
        seed_step_bounds,
        ensemble_speedups,
        setting_speedups,
        epoch_speedups,
        functools.partial(epoch_checks, sittings=sittings),
        ceiling_fractions,
        chip_comparisons,
        scaling_rows,
        cost_rows,
        memory_checks,
    ):
        out += derive(table)
    table = with_sittings(frame(out), records, sittings)
    table = banded_efficiencies(across_sittings(table, sittings))
    return with_chips(said_unvalidated(undecided_fits(with_bounds(table))))


def chip_named(device: str) -> str:
    """A target's chip from the chip table (gpu-h100: H100 SXM), else the device as named."""
    from jaxcnn.perf.chips import TARGETS

    return TARGETS[device].chip if device in TARGETS else device


def with_chips(table: pd.DataFrame) -> pd.DataFrame:
    """`chip`: a target's chip from the chip table, else the device as named (a chip or a
    CPU), `-` for a platform."""
    named = table.device.map(chip_named)
    several = table.device.str.contains(", ") & (table.platform != "cpu")  # "K80, P100, V100"
    named = named.where(~table.device.isin(["cpu", "gpu", "tpu"]) & ~several, "-")
    table["chip"] = table.chip.where(table.chip.notna(), named)  # a band's own, where it has one
    return table


ACROSS_SITTINGS = (
    "across sittings: its two sides ran from different code on one CPU label, whose VMs "
    "differ by up to 2x"
)


def with_sittings(
    table: pd.DataFrame, records: Sequence[Record], sittings: dict[str, tuple]
) -> pd.DataFrame:
    """`sitting` of each measured figure: when the sitting of its newest run began (its
    first record's time), the name under which figures of one sitting go together; and
    `software`, what its newest run ran in."""
    began: dict[tuple, str] = {}
    for r in sorted(records, key=lambda r: str(r.env.utc_time or "")):
        if r.env.utc_time:
            began.setdefault(sittings[r.run_id], str(r.env.utc_time)[:16].replace("T", " "))
    named = {run: began.get(key) for run, key in sittings.items()}
    runs = table.records.fillna("").astype(str).str.split().str[-1]
    measured = (table.kind == "measured") & table.numerator.isna()  # a ratio has two sides
    table.loc[measured, "sitting"] = [
        f"{named[run]} UTC" if named.get(run) else None for run in runs[measured]
    ]
    software = {r.run_id: software_of(r) for r in records}
    table.loc[measured, "software"] = [software.get(run) for run in runs[measured]]
    # a measured ratio: its two sides' sittings and software, one where they agree
    by_id = table.set_index("id")
    ratios = (table.kind == "measured") & table.numerator.notna() & table.denominator.notna()
    for column in ("sitting", "software"):
        top = table.numerator[ratios].map(by_id[column])
        below = table.denominator[ratios].map(by_id[column])
        table.loc[ratios, column] = [
            " / ".join(dict.fromkeys(x for x in pair if isinstance(x, str))) or None
            for pair in zip(top, below, strict=True)
        ]
    return table


def software_of(r: Record) -> str | None:
    """The framework and version a record's step ran in: `jax 0.10.2`, `torch 2.13.0`."""
    env = r.env
    framework = getattr(env, "framework", None)
    version = getattr(env, "framework_version", None) if framework else env.jax
    return f"{framework or 'jax'} {version}" if version else None


def across_sittings(table: pd.DataFrame, sittings: dict[str, tuple]) -> pd.DataFrame:
    """Flags a ratio of two measured figures of one CPU whose records share no sitting
    (records.sitting, by run id): it holds another VM's speed as well as the two
    configurations'."""
    cpu = rows(table, kind="measured", platform="cpu").set_index("id")

    def side(figure_id: Any) -> tuple[str, set[tuple | None]] | None:
        """A measured CPU figure's device and its runs' sittings; None for any other."""
        if figure_id not in cpu.index:
            return None
        runs = str(cpu.records[figure_id] or "").split()
        return cpu.device[figure_id], {sittings.get(run) for run in runs}

    for i, r in table[table.quantity == "speedup"].iterrows():
        a, b = side(r.numerator), side(r.denominator)
        if a and b and a[0] == b[0] and not a[1] & b[1] and pd.isna(r.flag):
            table.loc[i, "flag"] = ACROSS_SITTINGS
    return table


def banded_efficiencies(table: pd.DataFrame) -> pd.DataFrame:
    """A predicted scaling efficiency of a model with published 1-vs-N pairs on its
    platform carries that platform's band of the efficiency (scaling_band's), and as its
    lo and hi the efficiency off by the band's worst either way; the rest stay
    unvalidated."""
    bands = rows(table, quantity="band", extra=SCALING_BAND)
    published = rows(table, quantity="scaling_efficiency", kind="published")
    for b in bands.itertuples():
        covered = set(published[published.platform == b.platform].model)
        at = ((table.quantity == "scaling_efficiency") & (table.kind == "predicted")
              & (table.platform == b.platform) & table.model.isin(covered))  # fmt: skip
        table.loc[at, list(BAND_COLUMNS)] = (b.value, b.hi, b.n, None, SCALING_SPLIT, None,
                                             "scaling_efficiency")  # fmt: skip
        bare = at & table.lo.isna()  # what the band allows, as the row's own spread
        table.loc[bare, "lo"] = table.loc[bare, "value"] / b.hi
        # never above ideal: N chips do at most N times one chip's work
        table.loc[bare, "hi"] = (table.loc[bare, "value"] * b.hi).clip(upper=1.0)
        table.loc[bare, "spread"] = BAND_EITHER_WAY
    return table


UNDECIDED_FIT = "undecided"  # a fit verdict's flag where its margin is inside the check's
# a largest batch's flag where a fit verdict at its edge is undecided (the batches after)
UNDECIDED_EDGE = f"{UNDECIDED_FIT}: the fit verdict at its edge is inside the compile check's worst"


def compile_check_worst(table: pd.DataFrame) -> float | None:
    """The worst factor between a compiled memory here and the same program's as its chip
    compiled it (memory_checks): how near its limit a fit verdict is undecided."""
    checks = rows(table, quantity="memory_factor", selection="compiled-vs-ran")
    return float(checks.value.max()) if len(checks) else None


def undecided_fits(table: pd.DataFrame) -> pd.DataFrame:
    """A compiled fit verdict whose memory lies nearer its limit than the compiled memory
    was ever found from the chip's own compiler's (memory_checks' worst factor) is flagged
    undecided: either verdict is inside what the analysis it rests on can tell."""
    worst = compile_check_worst(table)
    if worst is None:
        return table
    usable = rows(table, quantity="memory_bytes", extra=USABLE)
    limit = usable.set_index("device").value
    memory = rows(table, quantity="memory_bytes", kind="compiled", extra="-")
    used = memory.set_index(memory.id.str.replace("memory_bytes|", "fits|", regex=False)).value
    verdicts = table[(table.quantity == "fits") & table.id.isin(used.index)]
    margin = used.reindex(verdicts.id).to_numpy() / verdicts.device.map(limit).to_numpy()
    factor = pd.Series(margin, index=verdicts.index).map(lambda m: max(m, 1 / m))
    inside = factor[factor < worst]
    table.loc[inside.index, "flag"] = [
        f"{UNDECIDED_FIT}: {value_text(f, 'x')} from its limit, inside the compile check's "
        f"worst ({value_text(worst, 'x')})"
        for f in inside
    ]
    # a largest batch whose boundary rests on such a verdict is no firmer than it
    unsure = verdicts.loc[inside.index]
    unsure_at = set(zip(*(unsure[c] for c in (*LARGEST_KEY, "batch")), strict=True))
    largest = table[(table.quantity == "largest_batch") & table.flag.isna()]
    for i, r in largest.iterrows():
        edges = [b for b in (r["value"], r["hi"]) if pd.notna(b)]
        near = [int(b) for b in edges if (*(r[c] for c in LARGEST_KEY), b) in unsure_at]
        if near:
            table.loc[i, "flag"] = f"{UNDECIDED_EDGE} ({'/'.join(f'b{b}' for b in near)})"
    return table


# what tells one batch search's verdicts from another's (batch aside)
LARGEST_KEY = ("model", "precision", "formulation", "loop", "placement", "device")


def said_unvalidated(table: pd.DataFrame) -> pd.DataFrame:
    """Every predicted figure carries a band or says why it has none."""
    bare = (table.kind == "predicted") & table.band_median.isna() & table.band_quantity.isna()
    error = table.quantity.isin(["band", "error_factor"])
    table.loc[bare & ~error, "band_quantity"] = "unvalidated"
    table.loc[bare & error, "band_quantity"] = "none: itself a measure of error"
    return table


def frame(rows: list[Row]) -> pd.DataFrame:
    table = pd.DataFrame(rows, columns=COLUMNS)
    for c in INTEGERS:
        table[c] = table[c].astype("Int64")
    return table.sort_values(KEY, na_position="first", kind="stable").reset_index(drop=True)


def duplicates(table: pd.DataFrame) -> pd.DataFrame:
    """The rows whose KEY another row shares (none, in a correct table)."""
    return table[table.duplicated(KEY, keep=False)]
