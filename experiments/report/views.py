"""The report's pages as views of the table of figures: each page is a filter of the
table, formatted; the first screen is the answers (answers.py). Nothing here reads a
record or computes a figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from experiments.records.tables import markdown_table
from experiments.report import answers as answers_lib
from experiments.report.figures import BEFORE_FIRST_RUN, OURS_FOR_PUBLISHED, RULES, TF32_MATMULS
from experiments.report.fmt import fmt, value_text

REPORT_FILE = "REPORT.md"
PAGES = "report"
FIRST_PLOT = "seed_models.png"
FIGURES = "figures.csv"  # the table, beside REPORT.md
FIGURES_SCHEMA = "figures.schema.json"  # its columns (figures.table_schema), beside it
ANSWER_HEADERS = ["#", "seed", "question", "answer", "known", "band", "details"]
# The legend of the "known" column, a part per kind: only the kinds the table has.
KNOWN = {
    "measured": "**M** measured here",
    "derived": "**D** derived from a measured step",
    "compiled": "**C** compiled by the target's compiler, not run",
    "predicted": "**P** predicted from that compiled program",
    "published": "**published**: someone else's, cited",
}
BAND = (
    "A band is the factor max(predicted/actual, actual/predicted), median and worst over n "
    "held-out observations of that quantity; *unvalidated*: none exists."
)


def known(table: pd.DataFrame) -> str:
    kinds = set(table[table.quantity != "band"].kind)  # the constants' bands come with any
    if ((table.selection == answers_lib.DERIVED) & (table.kind == "measured")).any():
        kinds.add("derived")
    parts = "; ".join(words for kind, words in KNOWN.items() if kind in kinds)
    return f"{parts}." + (f" {BAND}" if "predicted" in kinds else "")


def what_ran(table: pd.DataFrame) -> str:
    """Line 2 of the first screen: what ran where, in bold; predictions named only
    where the table has them."""
    measured = table[table.kind == "measured"]
    accelerators = measured_accelerators(table)
    named = answers_lib.reference_cpu(table)
    cpu = named or "no CPU"
    older = set(measured[measured.platform == "cpu"].device) - {cpu}
    if accelerators:
        ran = f"Measured on {' and '.join([*accelerators, *([f'CPU {named}'] if named else [])])}"
    else:
        ran = f"Measured on CPUs only; every CPU figure below is {cpu}'s"
        ran += " (older CPUs': details)" if older else ""
        ran += (
            ". Nothing ran on a GPU or TPU: their figures are compiled by the real compilers "
            "and predicted"
            if (table.kind == "compiled").any()
            else ". Nothing here ran on, or was compiled for, a GPU or TPU"
        )
    return f"**{ran}. {len(table):,} figures in [{FIGURES}]({FIGURES}).**"


def measured_accelerators(table: pd.DataFrame) -> list[str]:
    """The accelerators figures were measured on, as the table names them, one entry per
    platform ("GPUs H100 SXM, H200")."""
    m = table[(table.kind == "measured") & (table.platform != "cpu")].dropna(subset=["platform"])
    by_platform: dict[str, list[str]] = {}
    for platform, device in sorted(set(zip(m.platform, m.device, strict=True))):
        by_platform.setdefault(platform.upper(), []).append(device)
    return [
        f"{platform}{'s' if len(devices) > 1 else ''} {', '.join(devices)}"
        for platform, devices in by_platform.items()
    ]


def gpu_goal(table: pd.DataFrame) -> str:
    """What the records say of PERFORMANCE.md's GPU goal: the accelerators measured and
    whether the speedrun, the goal's study, ran on one."""
    ran = measured_accelerators(table)
    runs = table[(table.quantity == "time_to_target_s") & (table.platform != "cpu")]
    on = " and ".join(ran) if ran else "no accelerator"
    if not len(runs):
        return (
            f"Measured on {on}; the speedrun (the GPU goal's study) has no record on an "
            "accelerator: the GPU goal is not measured."
        )
    devices = ", ".join(sorted(set(runs.device)))
    return (
        f"Measured on {on}; the speedrun ran on {devices}: its page says whether the goal is met."
    )


def own_steps(table: pd.DataFrame) -> str | None:
    """A folder of runs alone (nothing compiled): the steps its runs measured, as the run
    printed them."""
    if (table.kind == "compiled").any():
        return None
    steps = answers_lib.rows(table, quantity="step_s", kind="measured", extra="-")
    if not len(steps):
        return None
    columns = ["model", "dataset", "batch", "precision", "device", "how", "value", "spread"]
    return "Steps measured here (median over timed steps):\n\n" + view(steps, columns)


def before_first_run(table: pd.DataFrame, link: str = PAGES) -> str | None:
    """The first screen's check no fit could have tuned: per accelerator and regime, the
    device step each record was predicted with before its chip first ran, against what
    it measured (figures.before_first_run_rows); small programs first."""
    b = answers_lib.rows(table, quantity="band", extra=BEFORE_FIRST_RUN)
    if not len(b):
        return None
    b = b.sort_values(["model", "device"], ascending=[False, True])
    said = "; ".join(
        f"{r['device']} {r['model'].split()[0]} {fmt(r)} median, "
        f"{value_text(r['hi'], 'x')} worst (n={r['n']})"
        for r in b.to_dict("records")
    )
    return (
        "**Predicted before the chip first ran** (the device step each record was written "
        f"with, against what it measured): {said}. [Details]({link}/predictions.md)."
    )


def answers_table(table: pd.DataFrame, link: str = PAGES) -> str:
    """The first screen's table: one row per seed question."""
    body = [
        [
            a.number,
            a.seeds,
            a.question,
            a.answer,
            a.known,
            a.band,
            f"[{a.page}]({link}/{a.page}.md)",
        ]
        for a in answers_lib.answers(table)
    ]
    return markdown_table(ANSWER_HEADERS, body)


def first_screen(table: pd.DataFrame, link: str = PAGES, plot: str | None = None) -> str:
    parts = [
        "# jaxcnn: what the records answer",
        what_ran(table),
        own_steps(table),
        answers_table(table, link),
        " ".join(filter(None, [known(table), before_first_run(table, link)])),
    ]
    if plot:
        parts.append(f"![Step time of the seeds' models per device]({plot})")
    return "\n\n".join(p for p in parts if p)


# --- detail pages: each a filter of the table ------------------------------------------

COLUMNS = {
    "model": "model",
    "dataset": "dataset",
    "batch": "batch",
    "precision": "precision",
    "devices": "devices",
    "formulation": "formulation",
    "loop": "loop",
    "extra": "extra",
    "device": "device",
    "kind": "kind",
    "quantity": "quantity",
    "value": "value",
    "spread": "spread",
    "how": "how it ran",
    "selection": "rule",
    "band": "band",
    "flag": "flag",
    "note": "note",
}


def _cell(r: dict, column: str) -> str:
    if column == "value":
        return fmt(r)
    if column == "spread":
        if pd.isna(r.get("lo")) or pd.isna(r.get("hi")):
            return "-"
        lo, hi = value_text(r["lo"], r["unit"]), value_text(r["hi"], r["unit"])
        return f"{lo}-{hi} ({r['spread'] or 'range'})"
    if column == "band":
        return answers_lib.band_words(r)
    if column == "precision" and r.get("note") == TF32_MATMULS:
        return TF32_MATMULS
    if column == "how":
        bits = [r.get("framework")]
        if not _blank(r.get("formulation")):
            bits.append(f"{r['formulation']} formulation, {r['loop']} loop")
        if not _blank(r.get("placement")) and r["placement"] != "single":
            bits.append(r["placement"])
        if not _blank(r.get("extra")):
            bits.append(str(r["extra"]))
        return ", ".join(str(b) for b in bits if b and not pd.isna(b))
    value = r.get(column)
    return "-" if value is None or (not isinstance(value, str) and pd.isna(value)) else str(value)


def _blank(value: object) -> bool:
    return value is None or value == "-" or (not isinstance(value, str) and pd.isna(value))


# What a printed row is told apart by, beside its figure: the value-like columns are not.
VALUE_COLUMNS = ("value", "spread", "band", "flag", "note")
# The columns that tell rows apart, in the order one is added where a label repeats.
DISTINGUISHING = ("dataset", "precision", "devices", "batch", "model", "device", "kind",
                  "quantity", "selection", "formulation", "loop", "extra")  # fmt: skip


def labelled(rows: pd.DataFrame, columns: list[str]) -> list[str]:
    """`columns` with the columns added that tell apart rows whose printed label (every
    column but the values) would otherwise be the same: no label is printed twice."""
    columns, records = list(columns), rows.to_dict("records")
    for extra in DISTINGUISHING:
        labels = pd.Series(
            ["|".join(_cell(r, c) for c in columns if c not in VALUE_COLUMNS) for r in records]
        )
        if labels.is_unique:
            break
        values = pd.Series([_cell(r, extra) for r in records])
        if extra not in columns and (values.groupby(labels).nunique() > 1).any():
            columns.insert(columns.index("value") if "value" in columns else len(columns), extra)
    return columns


def view(rows: pd.DataFrame, columns: list[str]) -> str:
    """Rows of the table as a markdown table of `columns` (COLUMNS' keys), with the
    columns that tell its rows apart (`labelled`)."""
    if not len(rows):
        return "No figures yet."
    columns = labelled(rows, columns)
    body = [[_cell(r, c) for c in columns] for r in rows.to_dict("records")]
    return markdown_table([COLUMNS[c] for c in columns], body)


def _value(r: dict) -> str:
    """A pivot cell: the figure, marked where its search is open or it is flagged."""
    text = fmt(r)
    if str(r.get("flag") or "").startswith("open"):
        return f">= {text}"
    return text + (" (!)" if r.get("flag") and not pd.isna(r.get("flag")) else "")


def pivot(rows: pd.DataFrame, index: str, column: str) -> str:
    """Rows of the table as a matrix, `index` down and `column` across: one figure a
    cell (two figures for one cell is a filter that picked badly: an error)."""
    if not len(rows):
        return "No figures yet."
    if rows.duplicated([index, column]).any():
        raise ValueError(f"two figures for one cell of {index} x {column}")
    columns = sorted(set(rows[column]))
    cells = {(r[index], r[column]): _value(r) for r in rows.to_dict("records")}
    body = [[i, *(cells.get((i, c), "-") for c in columns)] for i in dict.fromkeys(rows[index])]
    return markdown_table([index, *columns], body)


@dataclass(frozen=True)
class Section:
    """One table of a page: a filter of the table, shown as a list of `columns` (words
    of COLUMNS' keys) or, with `pivot` (down, across), as a matrix."""

    title: str
    select: Callable[[pd.DataFrame], pd.DataFrame]
    columns: str = "model batch device kind quantity value spread how band"
    pivot: tuple[str, str] | None = None
    verdict: Callable[[pd.DataFrame], str] | None = None  # said under the rows, from them


def _q(**where) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda t: answers_lib.rows(t, **where)


SEED_MODELS = ["catsdogs_cnn", "mnist_cnn", "lenet5_keras", "mlp"]


def _seed_steps(t: pd.DataFrame) -> pd.DataFrame:
    steps = t[t.quantity.isin(["step_s", "device_step_s", "loop_step_s", "epoch_s"])]
    return steps[steps.model.isin(SEED_MODELS) & (steps.devices == 1)]


def _one_chip(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[(rows.devices == 1) & (rows.placement == "single")]


def _per_chip(
    t: pd.DataFrame, quantity: str, models: list[str] | None = SEED_MODELS
) -> pd.DataFrame:
    """One chip's predicted `quantity` at batch 128, f32 (of the seed models, or all)."""
    rows = answers_lib.rows(t, quantity=quantity, kind="predicted", batch=128, precision="f32")
    return _one_chip(rows[rows.model.isin(models)] if models else rows)


def _like_for_like(t: pd.DataFrame) -> pd.DataFrame:
    rows = answers_lib.rows(t, quantity="speedup", selection="like-for-like", batch=128)
    cpu = answers_lib.reference_cpu(t)
    quantity = "loop_step_s" if rows.extra.str.startswith("loop_step_s").any() else "device_step_s"
    rows = rows[rows.extra == f"{quantity} vs {cpu}"]
    return _one_chip(rows[rows.model.isin(SEED_MODELS) & (rows.precision == "f32")])


def _extra(pattern: str, **where) -> Callable[[pd.DataFrame], pd.DataFrame]:
    def select(t: pd.DataFrame) -> pd.DataFrame:
        found = answers_lib.rows(t, **where)
        return found[found.extra.astype(str).str.contains(pattern, regex=False)]

    return select


def _mlp(t: pd.DataFrame) -> pd.DataFrame:
    c, g = answers_lib.crossover(t, answers_lib.reference_cpu(t))
    return pd.concat([c, g])


def _mlp_verdict(t: pd.DataFrame) -> str:
    text, _ = answers_lib.crossover_verdict(*answers_lib.crossover(t, answers_lib.reference_cpu(t)))
    return (
        f"{text or 'No verdict: no width on both sides.'} (the rule: {answers_lib.CROSSOVER_RULE})"
    )


def _mlp_loops(t: pd.DataFrame) -> pd.DataFrame:
    found = answers_lib.measured_crossover(t, answers_lib.reference_cpu(t))
    return pd.concat([rows for pair in found for rows in pair]) if found else t.iloc[:0]


def _mlp_loops_verdict(t: pd.DataFrame) -> str:
    found = answers_lib.measured_crossover(t, answers_lib.reference_cpu(t))
    said = [answers_lib.crossover_verdict(c, g)[0] for c, g in found]
    text = (
        "; ".join(s for s in said if s) or "No verdict: no GPU ran jaxcnn's loop over the widths."
    )
    return f"{text} (the rule: {answers_lib.MEASURED_CROSSOVER_RULE})"


def _where(test: Callable[[pd.DataFrame], pd.Series]) -> Callable[[pd.DataFrame], pd.DataFrame]:
    return lambda t: t[test(t)]


def _measured_cpu_steps(t: pd.DataFrame) -> pd.Series:
    return (t.quantity == "step_s") & (t.kind == "measured") & (t.platform == "cpu")


BY_CHIP = ("model", "device")
PAGE_SECTIONS: dict[str, tuple[str, list[Section]]] = {
    "batch": ("Seed 000's cats-vs-dogs CNN: memory per batch and where it runs out", [
        Section("Compiled memory and the verdict per batch (the target's own compiler)",
                _where(lambda t: t.quantity.isin(["memory_bytes", "fits"])
                       & (t.model == "catsdogs_cnn")),
                "batch precision device quantity value how"),
        Section("Largest batch that fits", _q(quantity="largest_batch", model="catsdogs_cnn"),
                "precision device value flag note"),
    ]),
    "devices": ("The seeds' models per device: steps, epochs, speedups", [
        Section("One train step at batch 128, f32, predicted: the chip's kernels (device step)",
                lambda t: _per_chip(t, "device_step_s"), pivot=BY_CHIP),
        Section("The same step as jaxcnn's loop sees it on that chip with its host (loop step)",
                lambda t: _per_chip(t, "loop_step_s"), pivot=BY_CHIP),
        Section("Over the CPU the answers quote, like for like (the same program on both sides)",
                _like_for_like, pivot=BY_CHIP),
        Section("The CPU's own steps at batch 128 (measured)",
                lambda t: _seed_steps(t)[_measured_cpu_steps(_seed_steps(t))
                                         & (_seed_steps(t).batch == 128)],
                "model precision device quantity value spread how"),
        Section("Published figures of these models and our prediction of each",
                _where(lambda t: t.model.isin(SEED_MODELS)
                       & ((t.kind == "published") | (t.quantity == "error_factor")
                          | t.note.astype(str).str.startswith(OURS_FOR_PUBLISHED))),
                "model batch device kind quantity value how note"),
    ]),
    "accuracy": ("Accuracy per device", [
        Section("Final test accuracy",
                _where(lambda t: (t.quantity == "test_accuracy")
                       & ~t.extra.astype(str).str.startswith("epoch ")),
                "model batch precision device value how"),
    ]),
    "crossover": ("Seed 002's MLP: step time against trainable parameters", [
        Section("MLP width sweep, batch 128", _mlp,
                "model device kind quantity value spread band", verdict=_mlp_verdict),
        Section("The same sweep as jaxcnn's loop ran it on both sides (measured)", _mlp_loops,
                "model dataset device value spread how", verdict=_mlp_loops_verdict),
    ]),
    "scaling": ("Data parallelism: predicted weak scaling", [
        Section("Efficiency against the fewest devices of the same chip compiled at that "
                "per-device batch (named under how it ran; 100% is ideal)",
                _q(quantity="scaling_efficiency"), "model batch precision device value how flag"),
    ]),
    "targets": ("Chips not at hand: largest batch, TPU against GPU, cost, fraction of peak, "
                "FLOP/s per watt", [
        Section("Largest batch that fits, f32, one chip (compiled; >= where the search is open)",
                lambda t: _one_chip(answers_lib.rows(t, quantity="largest_batch",
                                                     precision="f32")), pivot=BY_CHIP),
        Section("TPU or GPU: the faster chip at equal batch (predicted loop step, and device "
                "step)", _extra("faster chip per chip", quantity="speedup"),
                "model batch precision device value how"),
        Section("Cost of an epoch at batch 128, f32 (predicted)",
                lambda t: _per_chip(t, "usd_per_epoch", models=None), pivot=BY_CHIP),
        Section("Fraction of the datasheet peak at batch 128, f32 (predicted)",
                lambda t: _per_chip(t, "mfu", models=None), pivot=BY_CHIP),
        Section("FLOP/s per watt of the board's TDP at batch 128, f32 (predicted; GPUs only: no "
                "TPU's TDP is published)", lambda t: _per_chip(t, "flops_per_watt", models=None),
                pivot=BY_CHIP),
    ]),
    "matmul": ("FLOP/s reached", [
        Section("Matmul rate per size (measured)", _q(quantity="flops_per_s", model="matmul"),
                "device precision value how"),
        Section("Each machine's best matmul rate (its measured peak)",
                _q(quantity="peak_flops_per_s"), "device precision value selection"),
        Section("Train steps (measured)",
                _where(lambda t: (t.quantity == "flops_per_s") & (t.model != "matmul")),
                "model batch precision device value how"),
    ]),
    "ensemble": ("K models at once with vmap", [
        Section("vmap's speed over K sequential steps",
                _extra("vmap vs sequential", quantity="speedup"), "model batch device value how"),
        Section("The steps", _where(lambda t: (t.quantity == "step_s")
                                    & t.extra.astype(str).str.startswith("K=")),
                "model batch device value spread how"),
    ]),
    "speedrun": ("The MNIST speedrun (mnist_cnn): training time per recipe, and whether its "
                 "seeds reached 99% test accuracy", [
        Section("Median training time over seeds (a time to 99% only where no flag says a seed "
                "fell short), and the seeds' accuracy", _q(selection="seeds"),
                "model batch precision device quantity value spread how flag"),
    ]),
    "bench": ("The CPU step against PyTorch and Keras, and the kernel libraries", [
        Section("Step time per framework and formulation (measured)",
                _where(lambda t: _measured_cpu_steps(t) & (t.extra == "-")),
                "model batch precision device value spread how"),
        Section("Paired runs: the first configuration's speed over the second's, in turns",
                _q(quantity="speedup", framework="paired"),
                "model batch precision device value spread how"),
        Section("Each formulation over the xla formulation",
                _extra("vs xla formulation", quantity="speedup"),
                "model batch precision device value how"),
        Section("The seed's kernel-library claim", _q(kind="published", quantity="speedup"),
                "model batch device value note"),
    ]),
    "predictions": ("How far predictions can be trusted", [
        Section("Error bands (held out, per platform and regime)", _q(quantity="band"),
                "device value how note"),
        Section("Published figures against the prediction of the same step",
                _where(lambda t: (t.quantity == "error_factor")
                       | ((t.kind == "published") & (t.quantity == "step_s"))),
                "model batch precision device kind value how note"),
    ]),
}  # fmt: skip


def page(name: str, table: pd.DataFrame, plots: dict[str, str]) -> str:
    title, sections = PAGE_SECTIONS[name]
    parts = [
        f"# {title}",
        f"Back to the [answers](../{REPORT_FILE}). "
        f"Every row is a row of [{FIGURES}](../{FIGURES}).",
    ]
    if name in plots:
        parts.append(f"![{title}]({plots[name]})")
    for s in sections:
        rows = s.select(table)
        shown = pivot(rows, *s.pivot) if s.pivot else view(rows, s.columns.split())
        parts.append(f"## {s.title}\n\n{shown}")
        if s.verdict:
            parts.append(f"**Verdict**: {s.verdict(table)}")
    rules = sorted({r for s in sections for r in s.select(table).selection.dropna()})
    if rules:
        parts.append(
            "Rules that picked these figures:\n\n"
            + "\n".join(f"- `{r}`: {RULES[r]}" for r in rules)
        )
    return "\n\n".join(parts)


def readme_block(table: pd.DataFrame, report_link: str) -> str:
    """The README's generated block: the same answers table as REPORT.md's."""
    folder = report_link.rsplit("/", 1)[0] + "/" if "/" in report_link else ""
    pages = folder + PAGES
    return "\n\n".join(
        [
            what_ran(table).replace(f"]({FIGURES})", f"]({folder}{FIGURES})"),
            answers_table(table, pages),
            *filter(None, [before_first_run(table, pages)]),
            f"Full report: [{report_link}]({report_link}).",
        ]
    )


BENCH_FRAMEWORKS = ["jax", "torch eager", "torch compile", "keras graph", "keras xla"]


def bench_block(table: pd.DataFrame, image: str | None) -> str:
    """PERFORMANCE.md's table: per bench cell on the reference CPU, the step of JAX (xla
    step loop, and its best formulation) and of each peer."""
    cpu = answers_lib.reference_cpu(table)
    m = answers_lib.rows(
        table, quantity="step_s", kind="measured", device=cpu, placement="single", extra="-"
    )
    peers = m[m.framework != "jax"]
    body = []
    for (model, batch, precision), g in peers.groupby(["model", "batch", "precision"]):
        jax = m[
            (m.framework == "jax")
            & (m.model == model)
            & (m.batch == batch)
            & (m.precision == precision)
        ]
        like = jax[(jax.formulation == "xla") & (jax.loop == "step")]
        best = jax.loc[jax.value.idxmin()].to_dict() if len(jax) else None
        shown = [r for r in (like.head(1), g) for r in r.to_dict("records")] + [best]
        data = "/".join(sorted({str(r["dataset"]) for r in shown if r}))
        cells = [model, batch, precision, data]
        cells.append(fmt(like.iloc[0].to_dict()) if len(like) else "-")
        cells.append(f"{fmt(best)} ({best['formulation']}, {best['loop']} loop)" if best else "-")
        for fw in BENCH_FRAMEWORKS[1:]:
            f = g[g.framework == fw]
            cells.append(fmt(f.iloc[0].to_dict()) if len(f) else "-")
        body.append(cells)
    headers = [
        "model",
        "batch",
        "precision",
        "data",
        "jax (xla, step loop)",
        "jax at its best",
        *BENCH_FRAMEWORKS[1:],
    ]
    parts = [
        f"Step time on {cpu}, median over timed steps, the newest run of each cell "
        "(`newest`): lower is faster. `data`: what the row's steps were fed (the peers "
        "train on synthetic data; JAX's step reads MNIST from memory where it ran on it).",
        markdown_table(headers, body),
    ]
    if image:
        parts.append(f"![bench]({image})")
    parts.append(gpu_goal(table))
    return "\n\n".join(parts)
