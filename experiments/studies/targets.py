"""Would it fit, and how fast, on a chip I do not have? (seeds 000 and 002)

Every zoo model x every target of jaxcnn/targets.py up to 8 chips, and the bigger
TPU slices for the ImageNet models (global batch scaling with the chips), in f32 and
bf16: the largest batch whose train step fits the chip's memory, from 16 per device
up to the first batch that does not fit, aiming where memory extrapolated from the
last two fits reaches the chip's, then closing in between the last fit and the first
miss to a sixteenth (compile_only.batch_search), each batch one compile-only record.
GPUs first, then one TPU chip, one TPU host, bigger slices (each compile
costs more); within each, the seeds' models first.

Command: python -m experiments.run --study=targets   (needs .[targets])
Smoke: mnist_cnn on tpu-v5e-1 and gpu-t4, f32, batch 16 to 32.
Expected: hours on this 2-core CPU (resnet50/vgg16 TPU compiles take minutes each).

The report's section for devices not at hand: what the real TPU and GPU compilers say
about chips this machine does not have (compile-only records: memory per chip, whether
it fits, a predicted images/s), and seed 000's answer from those compilers (a README
line). Three kinds of figure, never in one column: *compiled* (the compiler's memory
analysis of the step, and whether it fits the target's memory), *predicted* (the
per-kernel model of the compiled step: docs/predictions.md) and *measured* (a step
timed on a device at hand). Every heading says which.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from experiments import analysis, predictions
from experiments.labels import model_label, workload_kind
from experiments.studies._common import (
    PAGES,
    batch_size,
    latest_by,
    plain_log_y,
    precision_of,
    pyplot,
    save,
)
from experiments.studies.base import Record, Study, Summary, TargetCell
from experiments.tables import binary_bytes as gib
from experiments.tables import markdown_table, markdown_text

IMAGENET_MODELS = ("resnet18", "resnet50", "vgg16")
# The seeds' own models first (000's catsdogs_cnn, 001/003's mnist_cnn, 002/004's
# lenet5_keras and mlp); the rest by size.
TARGETS_FIRST = ("catsdogs_cnn", "mnist_cnn", "lenet5_keras", "mlp")
# The search goes up until the first batch that does not fit; the cap only bounds what a
# search may cost (2**26 / 16: at most 22 doublings from the start), far above where any
# model's memory meets a chip's: at 2**26 images per device the MNIST input batch alone
# (784 bytes an image) needs 49 GiB.
PER_DEVICE_START, PER_DEVICE_CAP = 16, 2**26


def cells(smoke: bool = False) -> list[TargetCell]:
    """The cells to compile, sized as the module docstring says."""
    from jaxcnn import models
    from jaxcnn import targets as targets_lib

    if smoke:
        chosen = [targets_lib.get("gpu-t4"), targets_lib.get("tpu-v5e-1")]
        return [TargetCell("mnist_cnn", t.name, "f32", "single", 16, 1, 32) for t in chosen]

    def tier(t: targets_lib.Target) -> int:  # GPUs, one TPU chip, one TPU host, slices
        return 0 if t.platform == "gpu" else 1 if t.devices == 1 else 2 if t.devices <= 8 else 3

    table = list(targets_lib.TARGETS.values())
    first = [m for m in TARGETS_FIRST if m in models.names()]
    rest = sorted(set(models.names()) - set(first), key=lambda m: sum(models.param_counts(m)))
    names = first + rest
    cells = []
    for level in range(4):
        for model in names:
            if level == 3 and model not in IMAGENET_MODELS:
                continue
            for target in (t for t in table if tier(t) == level):
                for precision in ("f32", "bf16"):
                    n = target.devices
                    strategy = "single" if n == 1 else "sharded"
                    start, cap = PER_DEVICE_START * n, PER_DEVICE_CAP * n
                    cells.append(TargetCell(model, target.name, precision, strategy, start, n, cap))
    return cells


GIB = analysis.GIB
COMMAND = "python -m experiments.run --study=targets"


def is_compiled(record: Record) -> bool:
    """A compile-only record: compiled for a target, never run."""
    return workload_kind(record) == "compile" or bool(record.get("compiled_not_run"))


def compiled(records: list[Record]) -> list[Record]:
    """The compile-only records (compiled for a target, not run) of each target as it
    is compiled now: the latest per cell. A record of a target whose devices have since
    changed (v4 compiled as two devices per chip before it was compiled as one megacore
    device, as it runs) is another program, and left out (`superseded`)."""
    return latest_by(
        [r for r in records if is_compiled(r) and not superseded(r)],
        lambda r: (target_name(r), model_label(r), batch_size(r), precision_of(r)),
    )


def superseded(record: Record) -> bool:
    """Whether a compile-only record's target had another device count than the
    target of that name has now."""
    from jaxcnn import targets

    target = targets.TARGETS.get(target_name(record))
    devices = target_field(record, "devices")
    return target is not None and devices is not None and devices != target.devices


def not_compiled(records: list[Record]) -> list[Record]:
    """Every record but the compile-only ones: what ran on a device at hand."""
    return [r for r in records if not is_compiled(r)]


def target_name(record: Record) -> str:
    """The record's target as the report shows it (a real target's name is unchanged)."""
    name = (record.get("target") or {}).get("name") or record["workload"].get("target")
    return markdown_text(name or "-")


def target_field(record: Record, key: str) -> Any:
    return (record.get("target") or {}).get(key)


def _total(record: Record | None) -> int | None:
    """Compiled memory per chip, where the compiler answered (ok and oom alike)."""
    if record is None or record["status"] not in ("ok", "oom"):
        return None
    return (record.get("memory") or {}).get("total_bytes")


def fits_chip(record: Record) -> bool:
    """The target's own compiler's verdict: compiled, and within the memory JAX can use
    of the chip (the record's `fits`, against `target.usable_bytes_per_device`): the rule
    `usable_memory_rule` states."""
    return record["status"] == "ok" and record.get("fits") is not False


# JAX's page on GPU memory, where the 75% default is stated: the one source every page's
# statement of the rule cites.
JAX_GPU_MEMORY_PAGE = "https://docs.jax.dev/en/latest/gpu_memory_allocation.html"


def usable_fractions() -> dict[str, float]:
    """{platform: the share of a chip's datasheet memory a JAX program may use}: the
    library's constant (jaxcnn.targets.USABLE_FRACTION), which `fits` was judged by."""
    from jaxcnn import targets as targets_lib

    return dict(targets_lib.USABLE_FRACTION)


def usable_memory_rule() -> str:
    """What "fits" means, in the words every page that judges a fit uses: the one
    statement of the usable-memory rule and why it is what it is."""
    share = usable_fractions()
    return (
        "a step *fits* a chip when its compiled memory per chip is at most the memory "
        f"JAX can use of it: {share['gpu']:.0%} of a GPU's datasheet memory (JAX "
        f"preallocates {share['gpu']:.0%} of a GPU's memory at its first operation by "
        "default, `XLA_PYTHON_CLIENT_MEM_FRACTION`; the rest is the CUDA context's: "
        f"[JAX's GPU memory page]({JAX_GPU_MEMORY_PAGE})), and {share['tpu']:.0%} of a "
        "TPU's (JAX's documentation states that default for GPUs only and names no share "
        "for a TPU, whose own compiler refuses a program larger than its HBM)"
    )


def prediction(record: Record | None) -> dict[str, Any]:
    """The record's prediction of its step ({} without one): the one place a report
    reads one. Per-kernel with the current constants where the record carries its
    step's kernels, else the roofline it was written with (experiments.predictions)."""
    return dict((predictions.of(record) if record else None) or {})


def prediction_method(record: Record | None) -> str:
    """How the record's prediction was made, as its figures are labelled."""
    return str(prediction(record).get("method") or predictions.BOUND_METHOD)


def predicted_images(record: Record | None) -> str:
    """Predicted images/s; "<= N" where the record has only its roofline: a bound on
    time is a ceiling on images/s, not a prediction."""
    images = prediction(record).get("images_per_s")
    if images is None or record is None or not fits_chip(record):
        return "-"
    return f"{images:,.0f}" if prediction_method(record) == "per-kernel" else f"<= {images:,.0f}"


def memory_cell(record: Record | None) -> str:
    if record is None:
        return "-"
    total = _total(record)  # None unless the compiler answered: ok or oom
    if total is None:
        return record["status"]
    return gib(total) + (" (over)" if record["status"] == "oom" else "")


def _is_doubling(batch: int, chips: int) -> bool:
    """A batch of the doubling sweep (per chip a power of two), not a bisection step."""
    per_chip = batch // max(chips, 1)
    return per_chip > 0 and batch % max(chips, 1) == 0 and per_chip & (per_chip - 1) == 0


# model -> (target, precision) -> global batch -> record
ByModel = dict[str, dict[tuple[str, str], dict[int, Record]]]


def _by_model(rs: list[Record]) -> ByModel:
    grouped: ByModel = defaultdict(lambda: defaultdict(dict))
    for r in rs:
        grouped[model_label(r)][(target_name(r), precision_of(r))][batch_size(r)] = r
    return grouped


def _row_order(rows: dict[tuple[str, str], dict[int, Record]]) -> list[tuple[str, str]]:
    # TPUs, then GPUs, then anything else; within each, by name, then f32 before bf16.
    def key(item: tuple[str, str]) -> tuple:
        name, precision = item
        platform = target_field(_first(rows[item]), "platform") or ""
        return ({"tpu": 0, "gpu": 1}.get(platform, 2), name, precision != "f32", precision)

    return sorted(rows, key=key)


def largest_fitting(by_batch: dict[int, Record]) -> tuple[Record | None, Record | None]:
    """(the record of the largest batch that fits, the smallest batch above it that
    does not), from one target and precision's records."""
    fit = [b for b, r in by_batch.items() if fits_chip(r)]
    best = max(fit, default=None)
    over = [b for b, r in by_batch.items() if r["status"] == "oom" and (best is None or b > best)]
    return by_batch.get(best), (by_batch[min(over)] if over else None)


def _first(by_batch: dict[int, Record]) -> Record:
    return next(iter(by_batch.values()))


def _chips(by_batch: dict[int, Record]) -> int:
    return target_field(_first(by_batch), "chips") or 1


def _matrix(rows, order, per_chip, cell) -> str:
    """Rows: targets; columns: batch per chip (the global batch is that x chips)."""
    body = []
    for name, precision in order:
        by_batch = rows[(name, precision)]
        chips = _chips(by_batch)
        body.append([name, precision, chips, *[cell(by_batch.get(b * chips)) for b in per_chip]])
    return markdown_table(["target", "precision", "chips", *map(str, per_chip)], body)


LARGEST_HEADERS = [
    "target",
    "precision",
    "chips",
    "memory per chip (datasheet)",
    "memory JAX can use per device (what fits is judged by)",
    "largest batch that fits (compiled)",
    "its memory per chip (compiled)",
    "smallest batch over (compiled)",
    "its memory per chip (compiled)",
    "images/s at the largest (predicted)",
]


# Why a search's largest fitting batch is only a floor (`>= N`): the short word a
# summary cell carries, and what it means, in the one wording every page uses.
OPEN_ENDS = {
    "stopped": "stopped before its next compile",
    "cap": f"reached the study's cap of {PER_DEVICE_CAP:,} per device",
    "refused": "met the compiler's refusal of the next batch",
}


def open_end(by_batch: dict[int, Record], best: Record | None) -> str | None:
    """Why no batch above `best` was found not to fit (an OPEN_ENDS key), or None where
    one was (or nothing fits)."""
    if best is None or any(
        r["status"] == "oom" and b > batch_size(best) for b, r in by_batch.items()
    ):
        return None
    if any(b > batch_size(best) and r["status"] == "error" for b, r in by_batch.items()):
        return "refused"
    devices = target_field(best, "devices") or 1
    return "cap" if batch_size(best) >= PER_DEVICE_CAP * devices else "stopped"


def largest_cell(by_batch: dict[int, Record], best: Record | None, over: Record | None) -> str:
    """The largest batch that fits, as far as the compiles tried show it: `>= N` where
    no batch above N was found not to fit (OPEN_ENDS: the compiler refused the next one,
    the search was stopped, or N is its cap)."""
    floor = 0 if best is None else batch_size(best)
    refused = [b for b, r in by_batch.items() if b > floor and r["status"] == "error"]
    if best is None:  # nothing fits, or nothing compiled to say
        return (
            "none"
            if over is not None or not refused
            else f"unknown (the compiler refused {min(refused)})"
        )
    why = open_end(by_batch, best)
    if over is not None or why is None:
        return str(batch_size(best))
    words = OPEN_ENDS[why]
    if why == "refused":
        words = f"the compiler refused {min(refused)}"
    elif why == "stopped":
        model = markdown_text(best["workload"]["model"])
        words += f"; `{COMMAND} --target={target_name(best)} --model={model}` finishes it"
    return f">= {batch_size(best)} ({why}: {words})"


def _largest_table(rows, order) -> str:
    body = []
    for name, precision in order:
        first = _first(rows[(name, precision)])
        best, over = largest_fitting(rows[(name, precision)])
        body.append(
            [
                name,
                precision,
                target_field(first, "chips") or "-",
                gib(target_field(first, "memory_per_chip_bytes")),
                gib(target_field(first, "usable_bytes_per_device")),
                largest_cell(rows[(name, precision)], best, over),
                gib(_total(best)),
                "-" if over is None else batch_size(over),
                gib(_total(over)),
                predicted_images(best),
            ]
        )
    return markdown_table(LARGEST_HEADERS, body)


def without_paths(message: str) -> str:
    """A compiler's message without this machine's file paths (`/.../bin/ptxas` ->
    `ptxas`): what it says, not where it was installed here."""
    return re.sub(r"(?<![\w.])/(?:[^\s/:]+/)+([^\s/:]+)", r"\1", message)


def refusals(rs: list[Record]) -> str:
    """Each refusal once: per target and message, the models, batches and precisions it
    refused."""
    refused: dict[tuple[str, str], set[tuple[str, int, str]]] = defaultdict(set)
    for r in rs:
        if r["status"] == "error":
            message = markdown_text(without_paths(r.get("message") or "")[:160])
            refused[(target_name(r), message)].add((model_label(r), batch_size(r), precision_of(r)))
    lines = []
    for (target, message), cells in sorted(refused.items()):
        by_model: dict[tuple[str, int], list[str]] = defaultdict(list)
        for model, batch, precision in sorted(cells):
            by_model[(model, batch)].append(precision)
        which = ", ".join(f"{m} batch {b} ({' and '.join(p)})" for (m, b), p in by_model.items())
        lines.append(f"- {target}: {message} ({which})")
    return "The compiler refused:\n\n" + "\n".join(lines) if lines else ""


def usable_gib(record: Record) -> float | None:
    """The memory a JAX program can use of one of the record's chips, in GiB: the
    record's `usable_bytes_per_device` (what its `fits` was judged against), else the
    same rule applied to its datasheet memory (jaxcnn.targets.USABLE_FRACTION)."""
    from jaxcnn.targets import USABLE_FRACTION

    usable = target_field(record, "usable_bytes_per_device")
    if usable is None:
        memory = target_field(record, "memory_per_chip_bytes")
        fraction = USABLE_FRACTION.get(str(target_field(record, "platform")))
        usable = None if memory is None or fraction is None else memory * fraction
    return None if usable is None else usable / GIB


@dataclasses.dataclass(frozen=True)
class MemoryLine:
    """One target and precision on a model's memory plot: compiled GiB per chip over
    batch per chip, and the GiB a program can use of that chip."""

    target: str
    precision: str
    points: tuple[tuple[int, float], ...]
    usable: float | None


def memory_lines(rows: dict[tuple[str, str], dict[int, Record]]) -> dict[str, list[MemoryLine]]:
    """{"GPU" | "TPU": lines} of one model's memory plot, from the records whose
    compiler gave a memory (ok or over)."""
    panels: dict[str, list[MemoryLine]] = defaultdict(list)
    for name, precision in _row_order(rows):
        by_batch = rows[(name, precision)]
        chips = _chips(by_batch)
        points = tuple(
            sorted((b // chips, _total(r) / GIB) for b, r in by_batch.items() if _total(r))
        )
        if points:
            first = _first(by_batch)
            platform = str(target_field(first, "platform") or "other").upper()
            panels[platform].append(MemoryLine(name, precision, points, usable_gib(first)))
    return dict(sorted(panels.items(), key=lambda item: item[0] != "GPU"))


def has_memory_plot(rows: dict[tuple[str, str], dict[int, Record]]) -> bool:
    """Whether a model's compiles draw a memory curve: some target and precision gave a
    memory at two batches or more (a single batch has nothing over batch to show)."""
    return any(len(line.points) > 1 for lines in memory_lines(rows).values() for line in lines)


def memory_plot_name(model: str) -> str:
    return f"targets_memory_{_slug(model)}.png"


def memory_figure(model: str, panels: dict[str, list[MemoryLine]]) -> Any:
    """A panel per platform: each target in its own colour (f32 solid, bf16 dashed), its
    usable memory a dotted line in that colour, one legend entry per target beside the
    axes."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fig, axes = pyplot().subplots(
        len(panels), 1, figsize=(10, 4.2 * len(panels)), squeeze=False, layout="constrained"
    )
    for ax, (platform, lines) in zip(axes[:, 0], panels.items(), strict=True):
        targets = list(dict.fromkeys(line.target for line in lines))
        palette = pyplot().get_cmap("tab10" if len(targets) <= 10 else "tab20").colors
        colours = {t: palette[i % len(palette)] for i, t in enumerate(targets)}
        usable: dict[str, float | None] = {}
        for line in lines:
            style = "-" if line.precision == "f32" else "--"
            xs, ys = zip(*line.points, strict=True)
            ax.plot(xs, ys, style, marker="o", markersize=3, color=colours[line.target])
            usable.setdefault(line.target, line.usable)
        for target, gib_ in usable.items():
            if gib_:
                ax.axhline(gib_, color=colours[target], linestyle=":", linewidth=1.2)
        handles = [Line2D([], [], color=colours[t], marker="o", markersize=3) for t in targets]
        names = [t + ("" if not usable[t] else f" (usable {usable[t]:.3g} GiB)") for t in targets]
        ax.legend(handles, names, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small")
        ax.set(xscale="log", yscale="log", xlabel="batch per chip", ylabel="GiB per chip")
        ax.xaxis.set_major_locator(LogLocator(base=2))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        plain_log_y(ax)
        ax.set_title(
            f"{model} on {platform}s, compiled: solid f32, dashed bf16, dotted usable memory",
            fontsize="medium",
        )
    return fig


def memory_plots(grouped: ByModel, out: Path) -> list[Path]:
    """One memory plot per model whose compiles draw a memory curve."""
    paths = []
    for model in sorted(grouped):
        if has_memory_plot(grouped[model]):
            figure = memory_figure(model, memory_lines(grouped[model]))
            paths.append(save(figure, out / memory_plot_name(model)))
    return paths


MEMORY_CAPTION = (
    "Memory per chip (compiled) against batch per chip; dotted lines: the memory a JAX "
    "program can use of each target's chip (a GPU's default preallocation, 75% of it; "
    "a TPU's whole HBM), what a batch's fit is judged against; solid f32, dashed bf16."
)


def intro() -> str:
    """What every targets page's cells are, the usable-memory rule among them."""
    return (
        "Each cell is the train step compiled by the target's own compiler (libtpu for "
        "TPUs, XLA:GPU with the chip's target config for NVIDIA GPUs) on this machine, "
        "placed over the target's chips, and never run. *Compiled*: the compiler's "
        "memory analysis per chip (arguments, outputs and temporaries), and whether it "
        f"fits: {usable_memory_rule()}; `(over)`: compiled, but more than the memory JAX "
        "can use of the chip; "
        "`error`: the compiler refused (listed below). *Predicted*: images/s from the "
        "per-kernel model of the compiled step (each kernel the compiler emitted, priced at "
        "the chip's datasheet peak and bandwidth with its platform's fitted efficiencies, "
        "plus a fixed cost per launch; [roofline.md](roofline.md) measures its error); "
        "`<= N`: a record compiled before records carried kernels, whose only figure is its "
        f"{predictions.BOUND_METHOD}, a ceiling on images/s as far as the bound holds. The "
        "tables by batch per chip show the doubling sweep (the global batch is the batch "
        "per chip x chips); the largest-batch table, in global batches, also the "
        "bisection between the last fit and the first miss, and `>= N` where no batch above "
        "N was found not to fit, with why: (stopped) the search "
        f"{OPEN_ENDS['stopped']}, (cap) it {OPEN_ENDS['cap']}, (refused) it "
        f"{OPEN_ENDS['refused']}."
    )


def _per_chip_batches(rows: dict[tuple[str, str], dict[int, Record]]) -> list[int]:
    return sorted(
        {
            b // _chips(by_batch)
            for by_batch in rows.values()
            for b in by_batch
            if _is_doubling(b, _chips(by_batch))
        }
    )


def model_page(model: str, rows: dict[tuple[str, str], dict[int, Record]]) -> str:
    """One model's page: memory per chip and predicted images/s by batch per chip, and
    the largest batch per target."""
    order, per_chip = _row_order(rows), _per_chip_batches(rows)
    method = "per-kernel; `<= N`: a roofline's ceiling, from a record that predates kernels"
    return "\n\n".join(
        [
            f"# {model} on devices not at hand (compiled, not run)",
            f"Back to [all targets](targets.md). {intro()}",
            "Memory per chip (compiled), by batch per chip:",
            _matrix(rows, order, per_chip, memory_cell),
            f"Images/s over all chips (predicted: {method}), by batch per chip:",
            _matrix(rows, order, per_chip, predicted_images),
            f"Largest global batch per target (compiled), and its images/s (predicted: {method}):",
            _largest_table(rows, order),
            _memory_image(model, rows),
        ]
    )


def _memory_image(model: str, rows: dict[tuple[str, str], dict[int, Record]]) -> str:
    """The model's memory plot as its page links it (the plots lie beside REPORT.md), with
    its caption; "" where its compiles draw no curve, so no plot was drawn."""
    if not has_memory_plot(rows):
        return ""
    name = memory_plot_name(model)
    return f"![{model}: memory per chip per target](../{name})\n\n{MEMORY_CAPTION}"


def model_pages(records: list[Record]) -> dict[str, str]:
    """{page name: markdown}: one page per model compiled for targets."""
    grouped = _by_model(compiled(records))
    return {f"targets-{_slug(m)}": model_page(m, grouped[m]) for m in sorted(grouped)}


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-")


def targets_section(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The details page: a link per model's page, each refusal once, memory against
    batch plotted with each target's memory as a line."""
    title = "## Devices not at hand (compiled, not run)"
    rs = compiled(records)
    if not rs:
        return f"{title}\n\nNo compile-only records yet (`{COMMAND}` writes them).", []
    grouped = _by_model(rs)
    links = ", ".join(f"[{m}](targets-{_slug(m)}.md)" for m in sorted(grouped))
    parts = [title, intro(), f"Per model: {links}.", refusals(rs), superseded_line(records)]
    paths = memory_plots(grouped, out)
    if paths:
        parts.append("Memory per chip against batch per chip: a plot on each model's page.")
    return "\n\n".join(p for p in parts if p), paths


def superseded_line(records: list[Record]) -> str:
    """What the tables leave out as another program than the target compiles now."""
    old = [r for r in records if is_compiled(r) and superseded(r)]
    if not old:
        return ""
    names = sorted({target_name(r) for r in old})
    return (
        f"Left out: {len(old)} compile record(s) of {', '.join(names)} made when the "
        "target had another device count per chip (v4 compiled as two one-core devices "
        "per chip, before it was compiled as the one megacore device it runs as); "
        f"`{COMMAND} --target=NAME` compiles them again."
    )


def _summary_cell(by_batch: dict[int, Record] | None) -> str:
    if not by_batch:
        return "-"
    best, over = largest_fitting(by_batch)
    largest = largest_cell(by_batch, best, over).split(" (")[0]
    if best is None:
        return largest
    if why := open_end(by_batch, best):
        largest += f" ({why})"
    return f"{largest} / {gib(_total(best))} / {predicted_images(best)}"


def targets_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The answers page: model x one-chip target, f32: the largest batch that fits
    (compiled), its memory per chip (compiled) and images/s (predicted)."""
    rs = [
        r
        for r in compiled(records)
        if (target_field(r, "chips") or 1) == 1 and not r["workload"].get("model_overrides")
    ]  # each model as the registry defines it (other widths: the crossover's page)
    if not rs:
        return f"No compile-only records yet: `{COMMAND}` writes them.", []
    grouped = _by_model(rs)
    names = sorted({n for rows in grouped.values() for n, _ in rows})
    names.sort(key=lambda n: (n.startswith("tpu"), n))  # GPUs, then TPUs
    body = [
        [f"[{m}]({PAGES}/targets-{_slug(m)}.md)"]
        + [_summary_cell(grouped[m].get((n, "f32"))) for n in names]
        for m in sorted(grouped)
    ]
    ends = Counter(
        open_end(by_batch, largest_fitting(by_batch)[0])
        for rows in grouped.values()
        for (_, precision), by_batch in rows.items()
        if precision == "f32"
    )
    text = (
        "The train step compiled by each target's own compiler (libtpu, XLA:GPU) on this "
        "machine and never run; each cell: the largest batch that fits in the memory JAX "
        "can use of one chip (compiled) / its memory (compiled) / images/s at that batch "
        "(predicted by the per-kernel model; `<= N` where the record predates kernels and "
        f"has only its {predictions.BOUND_METHOD}, a ceiling on images/s as far as the bound "
        "holds, not a prediction); f32, one chip "
        "(multi-chip slices and bf16 on each model's page); one step of the xla "
        "formulation in the step loop, no epochs run."
    )
    table = markdown_table(["model", *names], body)
    unfinished = open_ends_line(ends)
    return "\n\n".join(p for p in (text, table, unfinished) if p), []


def open_ends_line(ends: Counter) -> str:
    """What the `>= N` cells of a table are, counted by why (OPEN_ENDS); "" with none."""
    counted = [(ends[why], why, words) for why, words in OPEN_ENDS.items() if ends[why]]
    if not counted:
        return ""
    parts = "; ".join(f"{n} ({why}): the search {words}" for n, why, words in counted)
    finish = (
        f"; `{COMMAND} --target=TARGET --model=MODEL` finishes a stopped one"
        if ends["stopped"]
        else ""
    )
    total = sum(n for n, _, _ in counted)
    return (
        f"`>= N`: the largest batch that fits is at least N, no batch above N having been "
        f"found not to fit, in {total} of these searches: {parts}{finish}."
    )


# Seed 000's devices (analysis.SEED_000_OBSERVED) as the targets table names them.
SEED_000_TARGETS = {"MX150 2 GB": "gpu-mx150", "T4 16 GB": "gpu-t4"}


def seed_000_compiled(records: list[Record]) -> list[tuple[str, str, int, bool, Record]]:
    """What the seed saw beside what its device's own compiler says, for each of the
    seed's observations with a compile-only record of the seed's model (f32):
    [(reference device, target, batch, whether the seed trained it, the record)]."""
    found = {
        (target_name(r), batch_size(r)): r
        for r in compiled(records)
        if r["workload"]["model"] == analysis.SEED_000_MODEL
        and not r["workload"].get("model_overrides")
        and precision_of(r) == "f32"
        and r["status"] in ("ok", "oom")
    }
    return [
        (reference, SEED_000_TARGETS[reference], batch, ran, r)
        for reference, batch, ran in analysis.SEED_000_OBSERVED
        if _total(r := found.get((SEED_000_TARGETS.get(reference), batch))) is not None
    ]


def seed_000_headline(records: list[Record]) -> str:
    """The README's seed-000 sentence, from compile-only records; "" without them."""
    answers = seed_000_compiled(records)
    if not answers:
        return ""
    clauses = []
    for _, target, batch, ran, r in answers:
        capacity = target_field(r, "memory_per_chip_bytes")
        usable = target_field(r, "usable_bytes_per_device")
        room = f"its {gib(capacity)}"
        if usable and capacity and usable < capacity:  # a GPU: JAX preallocates a share
            room = f"the {gib(usable)} JAX can use of {room}"
        verdict = "fits in" if fits_chip(r) else "does not fit in"
        seed = "trained" if ran else "ran out of memory"
        clauses.append(
            f"batch {batch} needs {gib(_total(r))} on `{target}`, "
            f"which {verdict} {room} (the seed: {seed}; "
            f"{'agrees' if fits_chip(r) == ran else 'disagrees'})"
        )
    text = (
        f"Seed 000's `{analysis.SEED_000_MODEL}` (f32), compiled for the seed's GPUs by "
        "XLA:GPU and not run: " + "; ".join(clauses) + "."
    )
    return " ".join(p for p in (text, rests_on_the_rule(records)) if p)


def rests_on_the_rule(records: list[Record], state_rule: bool = True) -> str:
    """Where a seed-000 verdict turns on the usable-memory rule (the step is within the
    datasheet memory but over what JAX can use), that sentence, the rule stated in it
    unless `state_rule` is False (said just before); "" where none does."""
    turning = [
        (target, batch, r)
        for _, target, batch, _, r in seed_000_compiled(records)
        if (usable := target_field(r, "usable_bytes_per_device"))
        and (capacity := target_field(r, "memory_per_device_bytes"))
        and usable < _total(r) <= capacity
    ]
    if not turning:
        return ""
    cases = "; ".join(
        f"batch {batch} on `{target}` needs {gib(_total(r))}, within the chip's "
        f"{gib(target_field(r, 'memory_per_chip_bytes'))} datasheet memory but over the "
        f"{gib(target_field(r, 'usable_bytes_per_device'))} JAX can use of it"
        for target, batch, r in turning
    )
    rule = f" ({usable_memory_rule()})" if state_rule else ""
    return (
        f"The verdict rests on the usable-memory rule: {cases}, so against the datasheet "
        f"it would fit; the rule{rule} is what agrees with the seed."
    )


def _best_per_platform(rs: list[Record]) -> dict[str, Record]:
    """The one-chip target with the most predicted images/s per platform, each at its
    best batch compiled that fits (per-kernel predictions only)."""
    best: dict[str, Record] = {}
    for r in rs:
        if not fits_chip(r) or target_field(r, "chips") != 1:
            continue
        if prediction_method(r) != "per-kernel" or not prediction(r).get("images_per_s"):
            continue
        platform = r["device"]["platform"]
        if platform not in best or _images(r) > _images(best[platform]):
            best[platform] = r
    return best


def _images(record: Record) -> float:
    return float(prediction(record)["images_per_s"])


def targets_summary(records: list[Record]) -> list[Summary]:
    """Seed 002: TPU or GPU, which wins per chip for the seeds' models (f32, one chip,
    each at its best batch compiled). Per dollar is a separate question (prices)."""
    question = "TPU or GPU: which is faster per chip for these models?"
    parts, sources = [], set()
    for model in TARGETS_FIRST:
        rs = [
            r
            for r in compiled(records)
            if r["workload"]["model"] == model
            and not r["workload"].get("model_overrides")
            and precision_of(r) == "f32"
        ]
        best = _best_per_platform(rs)
        if "gpu" not in best or "tpu" not in best:
            continue
        gpu, tpu = best["gpu"], best["tpu"]
        winner, loser = (tpu, gpu) if _images(tpu) > _images(gpu) else (gpu, tpu)
        parts.append(
            f"{model}: {target_name(winner)} {_images(winner):,.0f} images/s (batch "
            f"{batch_size(winner)}) over {target_name(loser)} {_images(loser):,.0f} "
            f"(batch {batch_size(loser)}), {_images(winner) / _images(loser):.1f}x"
        )
        for r in (gpu, tpu):
            platform = r["device"]["platform"]
            sources.add(f"{platform.upper()}s {predictions.band_label(prediction(r), platform)}")
    if not parts:
        command = "python -m experiments.run --study=targets"
        return [Summary("002", question, f"no compiles yet: `{command}`", "-", "targets.md")]
    answer = "per chip, f32, each at its best batch compiled: " + "; ".join(parts)
    cheapest = _cheapest_epochs(records)
    answer += f"; per dollar: {cheapest}" if cheapest else "; per dollar: no priced target compiled"
    return [Summary("002", question, answer, "; ".join(sorted(sources)), "targets.md")]


def _cheapest_epochs(records: list[Record]) -> str:
    """Per seed model, the target whose epoch at the seeds' batch is predicted cheapest at
    its on-demand price (the devices page's costs, experiments/cloud_prices.json)."""
    from experiments.studies import devices  # it builds on this module's readers

    parts = []
    for model, w in devices.per_dollar_winners(records).items():
        if w.cheapest is not None:
            partial = ", host side partly left out" if w.cheapest.block.get("host_left_out") else ""
            usd = devices.fmt_usd(w.cheapest.usd)
            parts.append(f"{model} on {w.cheapest.target} ({usd} an epoch{partial})")
    if not parts:
        return ""
    return (
        f"cheapest epoch at batch {devices.COST_BATCH}: " + ", ".join(parts) + " (costs: "
        "[devices.md](report/devices.md))"
    )


STUDY = Study(
    "targets",
    cells=cells,
    sections=(targets_section,),
    headline=seed_000_headline,
    question="Would it fit, and how fast, on a chip not at hand? (seeds 000, 002)",
    answer=targets_answer,
    pages=model_pages,
    summary=targets_summary,
)
