"""The report's pages as views of the table of figures: each page is a filter of the
table, formatted (a study's page declared in its module, experiments/studies/); the first
screen is the answers (answers.py). Nothing here reads a record or computes a figure."""

from __future__ import annotations

import re

import pandas as pd

from experiments.records.tables import markdown_table
from experiments.report import answers as answers_lib
from experiments.report.figures import (
    BEFORE_FIRST_RUN,
    BOUNDS,
    LEFT_OUT,
    ONE_CODE_SITTINGS,
    RULES,
    TF32_MATMULS,
    UNDECIDED_EDGE,
    paired_sides,
)
from experiments.report.fmt import BOUND_MARKS, fmt, shown_value, span_text, value_text
from experiments.studies import REGISTRY
from experiments.studies.page import (
    OURS_LOOP_STEP,
    Page,
    Section,
    reference_cpu,
    rows,
    sitting_spread,
    where,
)
from jaxcnn.perf.chips import USABLE_FRACTION

REPORT_FILE = "REPORT.md"
PAGES = "report"
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
    "held-out observations of that quantity; *unvalidated*: none exists (*leaning yes/no*: "
    "the side its prediction falls); *>=* a floor, *<=* "
    "a ceiling (a predicted step with host time left out is a floor). *known*: the kinds "
    "of the figures a row quotes, its band's too."
)


# The words the answers use of how a step ran (docs/usage.md and docs/cpu.md say more).
TERMS = (
    "Formulations (how convolutions are computed): *cpu* patches and one matmul each, a "
    "CPU's default; *xla* XLA's own, an accelerator's; *onednn* oneDNN's kernels. "
    "*jaxcnn's loop*: its fit's loop, one jitted call a batch, host work included; "
    "*step loop*: the step alone in a bare loop, no input; *device loop*: an epoch as one "
    "call; *device step* or *kernels*: the compiled "
    "program's run alone, no host time; *host time*: what the host spends a step, "
    "*dispatch* and *put* of it: its jitted call and its batch's copy to the device; a "
    "*sitting*: one machine, boot and code; *undecided*: either verdict lies within the "
    "figures' error; a factor after a chip's time, \"(Nx)\": its speed over the row's CPU; "
    "*TPU loops' error*: our predictions of published JAX loops on a TPU against them; "
    "*x of y GiB*: memory against JAX's default share of the chip's (a "
    f"GPU's {USABLE_FRACTION['gpu']:.0%}). A compile target (gpu-t4) is predicted; a chip's "
    "name (H100 SXM) is measured unless the row says predicted. "
    "Precision f32 unless a row names another, its matmuls at JAX's default precision "
    "(TF32 on NVIDIA Ampere and newer, one bf16 pass on a TPU)."
)


def known(table: pd.DataFrame) -> str:
    kinds = set(table[table.quantity != "band"].kind)  # the constants' bands come with any
    parts = "; ".join(words for kind, words in KNOWN.items() if kind in kinds)
    return f"{parts}." + (f" {BAND}" if "predicted" in kinds else "") + f" {TERMS}"


def what_ran(table: pd.DataFrame) -> str:
    """Line 2 of the first screen: what ran where, in bold."""
    accelerators = measured_accelerators(table)
    named = reference_cpu(table)
    cpu = named or "no CPU"
    older = set(rows(table, kind="measured", platform="cpu").device) - {cpu}
    cores = cores_said(table, named)
    if accelerators:
        cpu_said = [f"CPU {named}{cores}{cpu_context(table, named)}"] if named else []
        ran = f"Measured on {' and '.join([*accelerators, *cpu_said])}"
    else:
        ran = f"Measured on CPUs only; every CPU figure below is {cpu}'s"
        ran += f" ({cores.removeprefix(', ')})" if cores else ""
        ran += " (older CPUs': details)" if older else ""
        ran += (
            ". Nothing ran on a GPU or TPU: their figures are compiled by the real compilers "
            "and predicted"
            if (table.kind == "compiled").any()
            else ". Nothing here ran on, or was compiled for, a GPU or TPU"
        )
    return f"**{ran}. {len(table):,} figures in [{FIGURES}]({FIGURES}).**"


def cores_said(table: pd.DataFrame, cpu: str | None) -> str:
    """ ", 2 cores": the processors `cpu`'s records say its runs could use (a VM's share of a
    CPU sets every ratio over it); "" where none says."""
    found = rows(table, quantity="cores", device=cpu)
    if not len(found):
        return ""
    r = found.iloc[0].to_dict()
    other = f" ({r['lo']:.0f}-{r['hi']:.0f} in its records)" if r["lo"] != r["hi"] else ""
    return f", {fmt(r)}{other}"


def cpu_context(table: pd.DataFrame, cpu: str) -> str:
    """ " (JAX 0.10.2; a sitting ... moves its loop step 1.11x median, 2.92x worst; ...)":
    a CPU label names a VM type and a sitting may run another commit: ratios move with both."""
    releases = jax_releases(rows(table, kind="measured", device=cpu))
    moves = sitting_spread(table, cpu)
    if not len(moves):
        return releases
    m = moves.iloc[0].to_dict()
    worst = value_text(m["hi"], "x")
    said = f"a sitting (another VM or commit) moves its loop step {fmt(m)} median, {worst} worst"
    # the same commit on other VMs apart: how much of that the machine alone moves
    same = rows(table, quantity="run_spread", device=cpu, extra=ONE_CODE_SITTINGS)
    if len(same):
        said += f"; one commit's {value_text(same.hi.iloc[0], 'x')} worst"
    return f"{releases[:-1]}; {said})" if releases else f" ({said})"


def measured_accelerators(table: pd.DataFrame) -> list[str]:
    """The accelerators measured, one entry per platform ("GPUs H100 SXM, H200")."""
    m = table[(table.kind == "measured") & (table.platform != "cpu")].dropna(subset=["platform"])
    ran = m[["platform", "device"]].drop_duplicates().sort_values(["platform", "device"])
    return [
        f"{platform.upper()}{'s' if len(g) > 1 else ''} {', '.join(g.device)}"
        f"{jax_releases(m[m.platform == platform])}"
        for platform, g in ran.groupby("platform")
    ]


def jax_releases(measured: pd.DataFrame) -> str:
    """ " (JAX 0.11.2)": the JAX releases `measured` ran in (releases differ in speed too)."""
    if "software" not in measured:
        return ""
    own = measured[measured.numerator.isna()]  # a ratio's software is its two sides'
    jax = sorted(set(own.software.dropna()) - {""})
    releases = sorted(
        (s.removeprefix("jax ") for s in jax if s.startswith("jax ")),
        key=lambda v: tuple(int(d) for d in re.findall(r"\d+", v)),
    )
    return f" (JAX {'/'.join(releases)})" if releases else ""


def gpu_goal(table: pd.DataFrame) -> str:
    """PERFORMANCE.md's GPU goal: the accelerators measured, and where the speedrun ran."""
    speedrun = table.quantity.isin(["time_to_target_s", "train_time_s"])
    runs = table[speedrun & (table.platform != "cpu")]
    on = " and ".join(measured_accelerators(table)) or "no accelerator"
    said = (
        f"ran on {', '.join(sorted(set(runs.device)))}: its page says whether the goal is met"
        if len(runs)
        else "(the GPU goal's study) has no record on an accelerator: the GPU goal is not measured"
    )
    return f"Measured on {on}; the speedrun {said}."


def own_steps(table: pd.DataFrame) -> str | None:
    """A folder of runs alone (nothing compiled): the steps its runs measured."""
    if (table.kind == "compiled").any():
        return None
    steps = rows(table, quantity="step_s", kind="measured", extra="-")
    if not len(steps):
        return None
    columns = ["model", "dataset", "batch", "precision", "device", "how", "value", "spread"]
    return "Steps measured here (median over timed steps):\n\n" + view(steps, columns)


def before_first_run(table: pd.DataFrame, link: str = PAGES) -> str | None:
    """The first screen's check no fit could have tuned (figures.before_first_run_rows):
    per accelerator and regime, small programs first."""
    b = rows(table, quantity="band", extra=BEFORE_FIRST_RUN)
    if not len(b):
        return None
    b = b.sort_values(["model", "device"], ascending=[False, True])
    said = "; ".join(
        f"{r['device']} {r['model'].split()[0]} "
        + answers_lib.band_row_text(r, answers_lib.way_of(r))
        for r in b.to_dict("records")
    )
    return (
        "**Predicted before the program first ran on the chip** (its first run's device "
        f"step, against its runs' median): {said}. [Details]({link}/predictions.md)."
    )


def answers_table(table: pd.DataFrame, link: str = PAGES) -> str:
    """The first screen's table: one row per seed question."""
    details = "[{0}]({1}/{0}.md)"
    body = [
        [a.number, a.seeds, a.question, a.answer, a.known, a.band, details.format(a.page, link)]
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
        f"![Step time of the seeds' models per device]({plot})" if plot else None,
    ]
    return "\n\n".join(p for p in parts if p)


# --- detail pages: each a filter of the table ------------------------------------------

# The columns a page may print (the table's, and what _cell makes), each with its header.
COLUMNS = {
    c: {"how": "how it ran", "selection": "rule"}.get(c, c)
    for c in "model dataset batch precision devices formulation loop extra device kind quantity "
    "value spread sitting how selection band flag note".split()
}


def bounds_said(rows: pd.DataFrame, table: pd.DataFrame) -> str:
    """What the bound marks among `rows` mean and, for a floor of host parts left out, on
    which chips and what each leaves out (a ratio's: its floor side's); "" where none."""
    bounded = rows[rows.bound.notna()]
    if bounded.empty:
        return ""
    by_id = table.set_index("id")[["device", "note"]]
    sides = pd.concat([bounded[["device", "note"]], by_id.reindex(bounded.numerator.dropna()),
                       by_id.reindex(bounded.denominator.dropna())])  # fmt: skip
    unpriced = sides[sides.note.astype(str).str.contains(LEFT_OUT, regex=False)]
    words = {"floor": "a floor", "ceiling": "a ceiling (a ratio over a floor)"}
    marks = [f"`{BOUND_MARKS[b]}` {words[b]}" for b in BOUNDS if (bounded.bound == b).any()]
    said = f"{', '.join(marks)}: a bound, not a point"
    if len(unpriced):
        left = sorted({n[n.index(LEFT_OUT) :] for n in unpriced.note.astype(str)})
        said += (f"; on {', '.join(sorted(set(unpriced.device)))} the host parts with no "
                 f"figure counted 0; {'; '.join(left)}")  # fmt: skip
    return said + "."


def flags_said(rows: pd.DataFrame) -> str:
    """Under a pivot, what its `(!)` marks mean (a bound's `>=` says its own); "" where none."""
    flagged = rows[rows.flag.notna() & (rows.bound != "floor")]
    if flagged.empty:
        return ""
    # each kind of flag once, its cell's own batches left to figures.csv's `flag`
    kinds = sorted(
        {UNDECIDED_EDGE if f.startswith(UNDECIDED_EDGE) else f for f in flagged.flag.astype(str)}
    )
    return f"`(!)` flagged: {'; '.join(kinds)} (each cell's own: figures.csv's `flag`)."


def _cell(r: dict, column: str) -> str:
    if column == "value":
        return shown_value(r)
    if column == "spread":
        if pd.isna(r.get("lo")) or pd.isna(r.get("hi")):
            return "-"
        # each end written as the value is (a fraction of ideal or peak as a percentage)
        lo, hi = fmt({**r, "value": r["lo"]}), fmt({**r, "value": r["hi"]})
        if r.get("spread") == "median, worst":  # a band: the value is its median
            return f"worst {hi}, n={r['n']}"
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
    return "-" if _blank(r.get(column)) else str(r[column])


def _blank(value: object) -> bool:
    return value is None or value == "-" or (not isinstance(value, str) and pd.isna(value))


# What a printed row is told apart by, beside its figure: the value-like columns are not.
VALUE_COLUMNS = ("value", "spread", "band", "flag", "note")
# The columns that tell rows apart, in the order one is added where a label repeats.
DISTINGUISHING = ("dataset", "precision", "devices", "batch", "model", "device", "kind",
                  "quantity", "selection", "formulation", "loop", "extra")  # fmt: skip


def labelled(rows: pd.DataFrame, columns: list[str]) -> list[str]:
    """`columns` with the columns added that tell apart rows whose printed label would
    otherwise be the same."""
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
    """Rows of the table as a markdown table of `columns` and those that tell them apart."""
    if not len(rows):
        return "No figures yet."
    columns = labelled(rows, columns)
    body = [[_cell(r, c) for c in columns] for r in rows.to_dict("records")]
    return markdown_table([COLUMNS[c] for c in columns], body)


def _value(r: dict) -> str:
    """A pivot cell: the figure, ` (!)` where flagged (not a floor: its flag says why)."""
    flagged = r.get("flag") and not pd.isna(r.get("flag")) and r.get("bound") != "floor"
    return shown_value(r) + (" (!)" if flagged else "")


def pivot(rows: pd.DataFrame, index: str, column: str) -> str:
    """Rows of the table as a matrix, `index` down and `column` across: one figure a cell
    (two is a filter that picked badly: an error)."""
    if not len(rows):
        return "No figures yet."
    if rows.duplicated([index, column]).any():
        raise ValueError(f"two figures for one cell of {index} x {column}")
    columns = sorted(set(rows[column]))
    cells = {(r[index], r[column]): _value(r) for r in rows.to_dict("records")}
    body = [[i, *(cells.get((i, c), "-") for c in columns)] for i in dict.fromkeys(rows[index])]
    # a matrix of several kinds (measured chips beside predicted targets) heads each
    # column with its kind: a row's cells are not all known one way
    kinds = rows.groupby(column).kind.agg(lambda k: "/".join(sorted(set(k))))
    heads = [f"{c} ({kinds[c]})" for c in columns] if kinds.nunique() > 1 else columns
    return markdown_table([index, *heads], body)


# The details pages: each study's own (its module's `STUDY.page`), and the predictions'.
PAGE_SECTIONS: dict[str, Page] = {
    **{name: study.page for name, study in REGISTRY.items() if study.page},
    "predictions": Page("How far predictions can be trusted", [
        # each baseline beside the band of the same checks (their `extra`s share a start)
        Section("Error bands (held out, per platform and regime; a baseline with no model "
                "beside its band)", lambda t: rows(t, quantity="band").sort_values(
                    ["device", "model", "extra"], kind="stable"),
                "device kind value spread how note"),
        Section("Error factors (a prediction against the published or measured step it "
                "predicts; an epoch made from its loop step against the epoch trained, "
                "derived), and the published steps",
                where(lambda t: (t.quantity == "error_factor")
                      | ((t.kind == "published") & (t.quantity == "step_s"))),
                "model batch precision device kind value how note"),
        Section("Published JAX loops: our loop step for each, and what it charged",
                where(lambda t: (t.kind == "predicted") & (t.quantity == "step_s")
                      & t.note.astype(str).str.startswith(OURS_LOOP_STEP)),
                "model batch device value how note"),
    ]),
}  # fmt: skip


# What a first-screen answer's own rows are shown with on its details page.
QUOTED_COLUMNS = "model dataset batch precision device kind quantity value spread how band note"


def page(
    name: str,
    table: pd.DataFrame,
    plots: dict[str, str],
    answered: list[answers_lib.Answer] | None = None,
) -> str:
    """Page `name` of the details: the rows the answers linking it quote (`answered`, by
    default computed here), then its sections."""
    title, sections = PAGE_SECTIONS[name]
    parts = [
        f"# {title}",
        f"Back to the [answers](../{REPORT_FILE}). "
        f"Every row is a row of [{FIGURES}](../{FIGURES}).",
        *([f"![{title}]({plots[name]})"] if name in plots else []),
    ]
    # per answer linking this page, the very rows it quotes: every figure of the first
    # screen can be found on the page it links
    answered = answers_lib.answers(table) if answered is None else answered
    shown_rows = [table[table.id.isin(a.ids)].assign(answer=a.number, question=a.question)
                  for a in answered if a.page == name and a.ids]  # fmt: skip
    for found in shown_rows:
        number, question = found.answer.iloc[0], found.question.iloc[0]
        flagged = ["flag"] if found.flag.notna().any() else []  # a verdict's own flag, said
        said = view(found, [*QUOTED_COLUMNS.split(), *flagged])
        parts.append(f"## The figures answer {number} quotes\n\n{question}\n\n{said}")
    for s in sections:
        rows = s.select(table)
        shown_rows.append(rows)
        shown = pivot(rows, *s.pivot) if s.pivot else view(rows, s.columns.split())
        parts.append(f"## {s.title}\n\n{shown}")
        if (said := bounds_said(rows, table)) and (s.pivot or "note" not in s.columns.split()):
            parts.append(said)
        if s.pivot and (said := flags_said(rows)):
            parts.append(said)
        if s.verdict:
            parts.append(f"**Verdict**: {s.verdict(table)}")
    rules = sorted({r for found in shown_rows for r in found.selection.dropna()})
    if rules:
        said = "\n".join(f"- `{r}`: {RULES[r]}" for r in rules)
        parts.append(f"Rules that picked these figures:\n\n{said}")
    return "\n\n".join(parts)


def readme_block(table: pd.DataFrame, report_link: str) -> str:
    """The README's generated block: REPORT.md's answers table, with its columns' legend."""
    folder = report_link.rsplit("/", 1)[0] + "/" if "/" in report_link else ""
    pages = folder + PAGES
    parts = [
        what_ran(table).replace(f"]({FIGURES})", f"]({folder}{FIGURES})"),
        answers_table(table, pages),
        " ".join(filter(None, [known(table), before_first_run(table, pages)])),
        f"Full report: [{report_link}]({report_link}).",
    ]
    return "\n\n".join(filter(None, parts))


def _first(found: pd.DataFrame) -> str:
    return fmt(found.iloc[0].to_dict()) if len(found) else "-"


BENCH_PEERS = ["torch eager", "torch compile", "keras graph", "keras xla"]  # JAX's, in order


def goal_line(cells: int, missed: list[str], across: list[str], sittings: dict[str, set]) -> str:
    """The CPU goal, judged only where JAX's best step and the fastest peer's come from one
    sitting (another sitting of one CPU label may be another VM's speed)."""
    judged = cells - len(across)
    said = ("By the table's medians (unlike samples: the pairs below are the verdict), JAX at "
            "its best against the fastest peer in each cell")  # fmt: skip
    if judged:
        said += f" measured in one sitting: faster in {judged - len(missed)} of {judged}"
        said += f"; not in {', '.join(missed)}" if missed else ""
    if across:
        jax, peers = (", ".join(sorted(str(x) for x in sittings[k])) for k in ("jax", "peers"))
        said += (f"{'; ' if judged else ': '}unjudged in {len(across)} of {cells} cells, "
                 f"JAX's best steps and the fastest peers' from different sittings (JAX: {jax}; "
                 f"peers: {peers}): the paired runs on the bench page judge those")  # fmt: skip
    return said + "."


def paired_goal(table: pd.DataFrame, cpu: str | None) -> str:
    """The CPU goal in turns (benchmarks/paired.py): per cell, the newest sitting's pairs of
    JAX's best and the fastest peer, blocks adjacent in time (no drift between the sides,
    which the table's medians, minutes apart, cannot rule out); "" where none ran."""
    p = rows(table, quantity="speedup", kind="measured", framework="paired", device=cpu)
    sides = p.extra.map(paired_sides)
    p = p[sides.map(lambda s: s[0].startswith("jax ") and not s[1].startswith("jax "))]
    if p.empty:
        return ""
    # per cell, the newest sitting's pairs, JAX's best of them (its paired configurations
    # over one peer; the table's "at its best" may be a configuration no pair ran)
    p = p[p.sitting == p.groupby(["model", "batch", "precision"]).sitting.transform("max")]
    p = p.sort_values("value").drop_duplicates(["model", "batch", "precision"], keep="last")
    # a cell is decided only where its rounds agree: p10 above 1x faster, p90 below slower
    faster, slower = p[p.lo >= 1], p[p.hi <= 1]
    level = p[(p.lo < 1) & (p.hi > 1)]
    when = sorted(set(p.sitting))
    said = (f"In turns (the paired runs on the bench page, {len(p)} cells, sitting"
            f"{'s' * (len(when) > 1)} {', '.join(when)}): JAX's fastest paired configuration "
            "(not always the table's at its best) faster in "
            f"{len(faster)} of {len(p)} (p10 of the rounds above 1x)")  # fmt: skip

    def cell(r: dict) -> str:  # "lenet5_keras b128 1.02x keras graph's speed (0.76x-1.22x)"
        _, peer = paired_sides(r["extra"])
        rounds = span_text(value_text(r["lo"], "x"), value_text(r["hi"], "x"))
        return f"{r['model']} b{int(r['batch'])} {fmt(r)} {peer}'s speed ({rounds})"

    def cells(found: pd.DataFrame) -> str:
        return ", ".join(map(cell, found.to_dict("records")))

    if len(level):
        said += f"; level, rounds either way, in {len(level)}: {cells(level)}"
    if len(slower):
        said += f"; slower in {len(slower)}: {cells(slower)}"
    return said + "."


def bench_block(table: pd.DataFrame, image: str | None) -> str:
    """PERFORMANCE.md's table: per bench cell on the reference CPU, JAX's step (xla step
    loop, and at its best) and each peer's."""
    cpu = reference_cpu(table)
    m = rows(table, quantity="step_s", kind="measured", device=cpu, placement="single", extra="-")
    peers = m[m.framework != "jax"]
    body, missed, across = [], [], []
    sittings: dict[str, set] = {"jax": set(), "peers": set()}
    for (model, batch, precision), g in peers.groupby(["model", "batch", "precision"]):
        jax = rows(m, framework="jax", model=model, batch=batch, precision=precision)
        like = rows(jax, formulation="xla", loop="step")
        best = answers_lib.least(jax)
        shown = [r for r in (like.head(1), g) for r in r.to_dict("records")] + [best]
        data = "/".join(sorted({str(r["dataset"]) for r in shown if r}))
        at_best = f"{fmt(best)} ({best['formulation']}, {best['loop']} loop)" if best else "-"
        peer = [_first(g[g.framework == fw]) for fw in BENCH_PEERS]
        body.append([model, batch, precision, data, _first(like), at_best, *peer])
        fastest = answers_lib.least(g)
        if best is not None and best["sitting"] != fastest["sitting"]:  # another VM's speed
            across.append(f"{model} b{batch} {precision}")
            sittings["jax"].add(best["sitting"])
            sittings["peers"].add(fastest["sitting"])
        elif best is None or best["value"] > fastest["value"]:  # the CPU goal not met here
            missed.append(f"{model} b{batch} {precision} ({fmt(best)} against "
                          f"{fastest['framework']}'s {fmt(fastest)})")  # fmt: skip
    headers = ["model", "batch", "precision", "data", "jax (xla, step loop)", "jax at its best"]
    headers += BENCH_PEERS
    parts = [
        f"Step time on {cpu}, median over timed steps, of each cell's runs in one sitting "
        "(`pooled`: the median over runs): lower is faster. `data`: what the row's steps "
        "were fed (the peers train on synthetic data; JAX's step reads MNIST from memory "
        "where it ran on it).",
        markdown_table(headers, body),
        goal_line(len(body), missed, across, sittings),
        paired_goal(table, cpu),
        *([f"![bench]({image})"] if image else []),
        gpu_goal(table),
    ]
    return "\n\n".join(parts)
