"""The report's sections that belong to no one study: the overview, the devices at hand,
every record's row, the FLOPs check, and the README's headline table (the devices study
where there is one, else the records outside the named studies).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

from experiments import predictions
from experiments.labels import CPU_NOT_RECORDED, cpu_label, device_label, model_label, workload_kind
from experiments.studies._common import (
    CPU_FIGURE_RULE,
    PAGES,
    batch_size,
    field,
    fmt_images,
    fmt_pct,
    fmt_status,
    fmt_step,
    fmt_test_acc,
    generic,
    hosts,
    is_cpu,
    latest,
    only_ok,
    precision_of,
    sort_key,
    study_of,
    when,
    workload_key,
)
from experiments.studies.base import Record, Section
from experiments.studies.targets import not_compiled
from experiments.tables import columns_table, markdown_text, si

FLOPS_MISMATCH = 0.10  # flag |XLA / jaxpr - 1| above this


def flops_flag(record: Record) -> str:
    """XLA / jaxpr FLOPs, flagged when they differ by more than FLOPS_MISMATCH."""
    ratio = field(record, "flops", "xla_vs_jaxpr")
    if ratio is None:
        return "-" if field(record, "flops", "per_step") is None else "no XLA count"
    flag = " (differs >10%)" if abs(ratio - 1) > FLOPS_MISMATCH else ""
    return f"{ratio:.2f}{flag}"


METHOD = (
    "Step times are medians over steps timed one by one after `block_until_ready`, "
    "warm-up and compile excluded, with [p10-p90]. FLOPs are counted from the jaxpr "
    "(dot_general and conv, 2 per multiply-accumulate); XLA/jaxpr is XLA's own count "
    "over it. MFU is achieved TFLOP/s over the vendor peak for the precision the "
    "matmuls run in, and over a matmul measured on the same device in the same run."
)


def counts_line(records: list[Record]) -> str:
    """What the records are: measured on devices at hand, or compiled and never run."""
    ran = not_compiled(records)
    platforms = ", ".join(sorted({r["device"]["platform"] for r in ran})) or "none"
    by_status = Counter(r["status"] for r in records)
    statuses = ", ".join(f"{n} {s}" for s, n in sorted(by_status.items()))
    return (
        f"{len(records)} record(s) from {len(hosts(records))} machine(s): {len(ran)} measured "
        f"on devices at hand ({platforms}), {len(records) - len(ran)} compiled for devices "
        f"not at hand and never run; {statuses}."
    )


def machines_line(records: list[Record]) -> str:
    """What this machine is: each host that measured, its devices and, for CPU
    figures, the CPU model and vector extensions they depend on."""
    seen: dict[str, set[str]] = defaultdict(set)
    for r in not_compiled(records):
        host = str(r["device"].get("host") or r["env"].get("host"))
        seen[host].add(cpu_label(r) if is_cpu(r) else device_label(r))
    machines = "; ".join(f"`{markdown_text(h)}`: {_devices(d)}" for h, d in sorted(seen.items()))
    return f"What this machine is: {machines or 'no device measured'}."


def _devices(labels: set[str]) -> str:
    """A host's devices; records that name no CPU beside some that do are said apart,
    not listed as a CPU of their own."""
    named = sorted(labels - {CPU_NOT_RECORDED})
    if not named or CPU_NOT_RECORDED not in labels:
        return ", ".join(sorted(labels))
    return ", ".join(named) + " (and older records that name no CPU)"


def prediction_error_line(records: list[Record]) -> str | None:
    """The prediction model's error band, where predicted figures are shown (None where
    no record is predicted)."""
    if not any(r.get("compiled_not_run") or r.get("prediction") for r in records):
        return None
    return predictions.error_line()


def answers_intro(records: list[Record]) -> str:
    """REPORT.md's title and one line on what the records are: all that stands before
    the first screen's answers."""
    smoke = bool(records) and all(is_smoke(r) for r in records)
    lines = [
        "# jaxcnn: smoke records only, which answer none of the questions"
        if smoke
        else "# jaxcnn: what the records answer",
        *([SMOKE_NOTE] if smoke else []),
        counts_line(records),
    ]
    return "\n\n".join(lines)


def answers_notes(records: list[Record]) -> str:
    """What follows the first screen: what measured the records, how figures are
    labelled, the one-figure rule, and the prediction model's error bands."""
    lines = [
        "## How to read the answers",
        machines_line(records),
        "Every figure says whether it was *measured* (on which device) or *predicted* "
        "(by which method); *compiled* figures are the target's own compiler's memory "
        "analysis of a step never run. Each answer links its details; every record's row: "
        f"[{PAGES}/records.md]({PAGES}/records.md).",
        CPU_FIGURE_RULE,
    ]
    if error := prediction_error_line(records):
        lines.append(error)
    return "\n\n".join(lines)


SMOKE_NOTE = (
    "`--smoke` runs use tiny sizes and a few steps: they show that the studies run and "
    "write valid records, and their figures are no finding."
)


def is_smoke(record: Record) -> bool:
    """Made by a `--smoke` run (records.SMOKE_ENV)."""
    return bool(record["env"].get("smoke"))


def method_note(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    return f"## How the figures are made\n\n{METHOD}", []


def _measured_matmul(record: Record) -> str:
    ceiling = record.get("matmul_ceiling") or {}
    measured = ", ".join(
        f"{dtype} {si((m.get('tflops') or 0) * 1e12, 'FLOP/s')}"
        for dtype, m in sorted(ceiling.items())
        if m.get("tflops")
    )
    return measured or "-"


def _vendor_peak(record: Record) -> str:
    vendor = field(record, "mfu", "vendor_peak_tflops")
    return f"{vendor:g} TFLOP/s {field(record, 'mfu', 'vendor_precision')}" if vendor else "-"


DEVICE_COLUMNS = {
    "device": device_label,
    "host": lambda r: r["device"].get("host") or "-",
    "chip": lambda r: field(r, "mfu", "chip") or "-",
    "vendor peak / chip": _vendor_peak,
    "measured matmul": _measured_matmul,
    "jax": lambda r: r["env"].get("jax", "-"),
}


def devices_table(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    first: dict[tuple, Record] = {}
    for r in latest(not_compiled(records)):  # devices at hand, not compile targets
        first.setdefault((device_label(r), r["device"].get("host")), r)
    return "## Devices\n\n" + columns_table(first.values(), DEVICE_COLUMNS), []


def framework(record: Record) -> str:
    """What produced the record's figure: `jax`, or a peer's framework and mode."""
    w = record["workload"]
    if w.get("kind") == "peer":
        return markdown_text(f"{w.get('framework')} {w.get('mode')}")
    return "jax"


def _jax_only(value: str) -> Callable[[Record], str]:
    """A column that describes a JAX run (formulation, loop): "-" for a peer's."""

    def cell(record: Record) -> str:
        if record["workload"].get("kind") == "peer":
            return "-"
        if value == "formulation":
            return str((record.get("formulation") or {}).get("name") or "xla")
        return str(record.get("loop") or "step")

    return cell


def run_date(record: Record) -> str:
    """The record's UTC date."""
    return str(record["env"].get("utc_time") or "-")[:10]


RESULT_COLUMNS = {
    "date": run_date,
    "study": lambda r: study_of(r) or "-",
    "device": device_label,
    "model": lambda r: model_label({**r, "formulation": None, "loop": None}),
    "framework": framework,
    "formulation": _jax_only("formulation"),
    "loop": _jax_only("loop"),
    "K": lambda r: r["workload"].get("ensemble_size") or 1,
    "batch": batch_size,
    "precision": precision_of,
    "step time [p10-p90]": fmt_step,
    "images/s": fmt_images,
    "FLOPs/step": lambda r: si(field(r, "flops", "per_step")),
    "XLA/jaxpr": flops_flag,
    "TFLOP/s": lambda r: "-" if r.get("achieved_tflops") is None else f"{r['achieved_tflops']:.4g}",
    "MFU vendor": lambda r: fmt_pct(field(r, "mfu", "vs_vendor")),
    "MFU measured": lambda r: fmt_pct(field(r, "mfu", "vs_measured")),
    "test acc": fmt_test_acc,
    "status": fmt_status,
}


def results_table(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Every record measured on a device at hand, one row each: a step's figures, with
    what tells two runs of one workload apart (when, which study, how it ran, K); the
    paired runs, which time two configurations in turns and have no step of their own,
    in a table of their figures."""
    measured = [r for r in not_compiled(records) if workload_kind(r) != "paired"]
    ordered = sorted(measured, key=lambda r: (model_label(r), device_label(r), sort_key(r)))
    text = "## Results\n\n" + columns_table(ordered, RESULT_COLUMNS)
    paired = sorted(
        (r for r in not_compiled(records) if workload_kind(r) == "paired"),
        key=lambda r: (model_label(r), batch_size(r), when(r)),
    )
    if paired:
        text += (
            "\n\n## Paired runs\n\nTwo configurations measured in turns on one machine "
            "(benchmarks/paired.py), one record per pass: each side's images/s, median "
            "[p10-p90] over its timed blocks, and their ratio per round.\n\n"
            + columns_table(paired, PAIRED_COLUMNS)
        )
    return text, []


def _side(record: Record, side: str) -> dict:
    return (record.get("paired") or {}).get(side) or {}


def _spread(summary: dict | None, fmt: str) -> str:
    """A median and its [p10-p90], each "-" where the record has none."""
    if not summary or summary.get("median") is None:
        return "-"

    def one(key: str) -> str:
        value = summary.get(key)
        return "-" if value is None else f"{value:{fmt}}"

    return f"{one('median')} [{one('p10')}-{one('p90')}]"


PAIRED_COLUMNS = {
    "date": run_date,
    "device": device_label,
    "model": model_label,
    "batch": batch_size,
    "precision": precision_of,
    "JAX side": lambda r: markdown_text(str(_side(r, "jax").get("configuration") or "-")),
    "peer side": lambda r: markdown_text(str(_side(r, "peer").get("configuration") or "-")),
    "JAX images/s": lambda r: _spread(_side(r, "jax").get("throughput"), ",.0f"),
    "peer images/s": lambda r: _spread(_side(r, "peer").get("throughput"), ",.0f"),
    "JAX / peer": lambda r: _spread((r.get("paired") or {}).get("ratio"), ".2f"),
    "pass": lambda r: (
        f"{r['session'].get('pass')}/{r['session'].get('passes')}" if r.get("session") else "-"
    ),
    "status": fmt_status,
}


def flops_check(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Where XLA and the jaxpr disagree by more than FLOPS_MISMATCH, both counts side by
    side with the jaxpr count that skips padding and dilation taps."""
    flagged = [r for r in latest(only_ok(not_compiled(records))) if "differs" in flops_flag(r)]
    if not flagged:
        return "", []
    columns = {
        "model": model_label,
        "device": device_label,
        "batch": batch_size,
        "jaxpr": lambda r: si(field(r, "flops", "per_step")),
        "jaxpr in-bounds": lambda r: si(field(r, "flops", "per_step_in_bounds")),
        "XLA": lambda r: si(field(r, "flops", "xla_per_step")),
        "XLA/jaxpr": flops_flag,
    }
    table = columns_table(sorted(flagged, key=lambda r: (model_label(r), device_label(r))), columns)
    text = (
        f"## FLOPs check\n\nXLA's count differs from the jaxpr's by more than "
        f"{FLOPS_MISMATCH:.0%} for these. The jaxpr count includes every conv tap, zero "
        "padding and the holes of the backward pass's dilated convs too; XLA counts only "
        "taps on real input, plus elementwise ops.\n\n"
    )
    return text + table, []


def headline_records(records: list[Record]) -> list[Record]:
    """The README's rows: the devices study where there is one (the seeds' headline
    question), else every train record outside the studies, else every train record."""
    train = [r for r in latest(only_ok(records)) if workload_kind(r) == "train"]
    for chosen in ([r for r in train if study_of(r) == "devices"], generic(train), train):
        if chosen:
            return sorted(chosen, key=workload_key)
    return []


def how_run(record: Record) -> str:
    """`cpu formulation, step loop`: named on every row, the default's too, so that two
    rows of one model never look alike."""
    formulation = (record.get("formulation") or {}).get("name", "xla")
    return f"{formulation} formulation, {record.get('loop') or 'step'} loop"


HEADLINE_COLUMNS = {
    "device (measured)": device_label,
    "model": lambda r: model_label({**r, "formulation": None, "loop": None}),
    "how it ran": how_run,
    "dataset": lambda r: r["workload"].get("dataset"),
    "batch": batch_size,
    "s/step [p10-p90]": fmt_step,
    "images/s": fmt_images,
    "test acc": fmt_test_acc,
}


def headline_table(records: list[Record]) -> str:
    """The README's results table: one row per headline record."""
    return columns_table(headline_records(records), HEADLINE_COLUMNS)


# report/records.md: the tables over every record.
DETAILS: tuple[Section, ...] = (method_note, devices_table, results_table, flops_check)
