"""What several studies' report sections share: which records a section shows (the
latest per cell, a study's, the ones outside the named studies), how a record's values
are written in a table, and the plot plumbing (matplotlib, imported on first plot so
that listing the studies stays fast).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from experiments import records
from experiments.labels import device_label, machine, model_label, workload_kind
from experiments.studies.base import Record
from experiments.tables import markdown_table, markdown_text, seconds


def pyplot() -> Any:
    """matplotlib.pyplot, drawing to files only: no display on servers, CI or TPU VMs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# --- which records --------------------------------------------------------------------


def cell(record: Record) -> tuple:
    """What a record measures, without the device: records with equal cells compare.
    Peer and paired records (benchmarks/) carry fewer workload fields: the ones they
    lack read as the defaults, so a peer's cell differs from JAX's by its framework."""
    w = record["workload"]
    return (
        model_label(record),
        w.get("dataset"),
        w["batch_size"],
        w.get("precision", "f32"),
        w["strategy"],
        w.get("study"),
        workload_kind(record),
        w.get("scaling"),
        w.get("ensemble_size") or 1,  # None: one model
        w.get("ensemble_mode"),
        w.get("matmul_precision") or "default",
        record.get("loop") or "step",
        (record.get("formulation") or {}).get("name", "xla"),
        w.get("framework"),  # peer records: another framework's figure
        w.get("mode"),
    )


def sort_key(record: Record) -> tuple:
    """The cell, orderable although fields may be None in some records and set in others."""
    return tuple((value is not None, value) for value in cell(record))


def ran_as(record: Record) -> str:
    """How a step ran: its formulation and loop (`xla formulation, step loop`), what
    sets a CPU's step time beside the workload."""
    formulation = (record.get("formulation") or {}).get("name", "xla")
    return f"{formulation} formulation, {record.get('loop') or 'step'} loop"


def study_of(record: Record) -> str | None:
    return record["workload"].get("study")


def run_series(record: Record) -> tuple:
    """What the points of one plotted line share: one study's records of a model on one
    device and host, on the same data, precision, placement, formulation and loop. A
    record outside the named studies (a single --model run) is a run of its own and is
    joined to no other: two such runs at two batch sizes are two commands, not a sweep."""
    w = record["workload"]
    study = study_of(record)
    host = record["device"].get("host") or record["env"].get("host")
    return (
        ("run", record["run_id"]) if study is None else ("study", study),
        model_label(record),
        device_label(record),
        host,
        w.get("dataset"),
        precision_of(record),
        w["strategy"],
        ran_as(record),
    )


def only_ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r["status"] == "ok"]


def is_cpu(record: Record) -> bool:
    return record["device"]["platform"] == "cpu"


def when(record: Record) -> str:
    """The record's UTC time, for sorting ("" when it has none: oldest)."""
    return str(record["env"].get("utc_time") or "")


def latest_by(records: list[Record], key: Callable[[Record], Hashable]) -> list[Record]:
    """The most recent record per key, so reruns replace rather than double a figure."""
    return list({key(r): r for r in sorted(records, key=when)}.values())


def latest(records: list[Record]) -> list[Record]:
    """One record per (device, cell)."""
    return latest_by(records, lambda r: (device_label(r), cell(r)))


def generic(records: list[Record]) -> list[Record]:
    """Train records outside the named studies (single --model runs, the default study):
    what the generic plots show; each study's records get that study's section."""
    return [r for r in records if study_of(r) in (None, "default") and workload_kind(r) == "train"]


def in_study(records: list[Record], name: str, kind: str = "train") -> list[Record]:
    """The latest record per cell of study `name` and workload kind `kind`."""
    return [r for r in latest(records) if study_of(r) == name and workload_kind(r) == kind]


def cpu_pairs(records: list[Record]) -> list[tuple[Record, Record]]:
    """(the CPU record of the same cell, the record) for each record off the CPU that
    has one: what a speedup over the CPU divides."""
    cpu = {cell(r): r for r in records if is_cpu(r)}
    return [(cpu[cell(r)], r) for r in records if not is_cpu(r) and cell(r) in cpu]


def hosts(records: list[Record]) -> list[str]:
    return sorted({str(r["device"].get("host") or r["env"].get("host")) for r in records})


# --- a record's values ----------------------------------------------------------------


def field(record: Record, *path: str) -> Any:
    """record[path[0]][path[1]]..., None where a level is missing."""
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def batch_size(record: Record) -> int:
    return record["workload"]["batch_size"]


def precision_of(record: Record) -> str:
    return record["workload"].get("precision", "f32")


def median_step(record: Record) -> float:
    return record["step_time_s"]["median"]


def accuracy(record: Record) -> float | None:
    """The record's test accuracy; never one for synthetic data, where it means nothing."""
    if record["workload"].get("dataset") == "synthetic":
        return None
    return record.get("test_accuracy")


def overrides(record: Record) -> tuple:
    """The model overrides as a key: JSON gives a nested override (catsdogs' `widths`)
    back as lists, which cannot key a dict, so each value is made a tuple."""
    given = record["workload"].get("model_overrides") or {}
    return tuple(sorted((k, _hashable(v)) for k, v in given.items()))


def _hashable(value: Any) -> Hashable:
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def same_step(record: Record) -> tuple:
    """What a step's time depends on: model, its overrides, batch, precision (not the
    data: a step's time does not depend on the pixels, synthetic or MNIST)."""
    return record["workload"]["model"], overrides(record), batch_size(record), precision_of(record)


def workload_label(record: Record) -> str:
    w = record["workload"]
    return f"{model_label(record)}, {w.get('dataset')}, batch {w['batch_size']}"


def workload_key(record: Record) -> tuple:
    """Orders workloads by model, dataset, then batch as a number (64 before 128)."""
    w = record["workload"]
    return model_label(record), str(w.get("dataset")), w["batch_size"], device_label(record)


# --- one figure per quantity ----------------------------------------------------------

CPU_FIGURE_RULE = (
    "One figure per quantity: where several runs measured the same workload on a CPU, "
    "the CPU figure is the most recent ok run of that exact workload (model, batch, "
    "precision, formulation, loop, placement; a peer's framework and mode) on the same "
    "CPU model; every ratio to the CPU divides by it, and the details pages list the "
    "other runs with their dates."
)


def figure_key(record: Record) -> tuple:
    """The exact workload a CPU figure measures, and the CPU model it ran on: what
    `cpu_figure` picks one record of. The dataset is not in it (a step's time does not
    depend on the pixels), nor the epochs (the step is timed apart from training)."""
    w = record["workload"]
    return (
        machine(record),
        workload_kind(record),
        *same_step(record),
        w["strategy"],
        record["device"].get("count") or 1,
        w.get("ensemble_size") or 1,
        w.get("matmul_precision") or "default",
        record.get("loop") or "step",
        (record.get("formulation") or {}).get("name", "xla"),
        w.get("framework"),
        w.get("mode"),
    )


def _timed_cpu(record: Record) -> bool:
    """An ok record measured on a CPU at hand with a step time: a CPU figure."""
    return (
        record["status"] == "ok"
        and is_cpu(record)
        and not record.get("compiled_not_run")
        and not records.took_turns(record)
        and field(record, "step_time_s", "median") is not None
    )


def cpu_runs(records: list[Record], record: Record) -> list[Record]:
    """Every CPU figure of `record`'s exact workload on its CPU model, oldest first."""
    key = figure_key(record)
    return sorted((r for r in records if _timed_cpu(r) and figure_key(r) == key), key=when)


def cpu_figure(records: list[Record], record: Record) -> Record:
    """The one CPU figure for `record`'s workload (CPU_FIGURE_RULE): the most recent ok
    run of that exact workload on the same CPU model; `record` itself where no run of
    it is among `records`.

    Why the most recent, and not the median of all runs: the runs of one workload span
    changes to the library (the host allocator policy, XLA:CPU's thread pools, the
    formulations' kernels), so an older run measured another program of the same
    workload, and a median over versions is a figure no version of the code produces.
    Each run is already a median over its timed steps, with its p10-p90 beside it; the
    older runs stay on the details pages with their dates (`runs_table`), where a reader
    sees the spread a median would hide."""
    runs = cpu_runs(records, record)
    return runs[-1] if runs else record


def cpu_figures(records: list[Record]) -> list[Record]:
    """One CPU figure per exact workload and CPU model (the rule's pick of each)."""
    return latest_by([r for r in records if _timed_cpu(r)], figure_key)


def same_program_on_cpu(records: list[Record], record: Record) -> Record | None:
    """The like-for-like CPU figure for an accelerator's step: `record`'s step (model,
    batch, precision) as the program the targets are compiled as, the xla formulation in
    the step loop on one device, its one figure on the CPU model that ran it most
    recently; None where no CPU ran that program."""
    rs = [
        r
        for r in cpu_figures(records)
        if same_step(r) == same_step(record)
        and workload_kind(r) == "train"
        and not r["workload"].get("framework")
        and (r.get("formulation") or {}).get("name", "xla") == "xla"
        and (r.get("loop") or "step") == "step"
        and (r["device"].get("count") or 1) == 1
    ]
    return max(rs, key=when, default=None)


def runs_table(records: list[Record], shown: list[Record]) -> str:
    """Every CPU run of the workloads of `shown`, with its date and study, the one the
    rule picks marked: the figures the answers do not show. "" where each workload ran
    once."""
    rows, seen = [], set()
    for record in shown:
        runs = cpu_runs(records, record)
        if len(runs) < 2 or figure_key(record) in seen:
            continue
        seen.add(figure_key(record))
        chosen = runs[-1]
        for r in runs:
            w = r["workload"]
            rows.append(
                [
                    workload_label(r),
                    machine(r),
                    run_label(r),
                    when(r)[:16].replace("T", " "),
                    w.get("study") or "-",
                    fmt_step(r),
                    "shown (most recent)" if r is chosen else "-",
                ]
            )
    if not rows:
        return ""
    headers = ["workload", "CPU", "ran", "UTC", "study", "s/step [p10-p90]", "figure"]
    return f"{CPU_FIGURE_RULE} Every run of these workloads, by CPU model:\n\n" + markdown_table(
        headers, rows
    )


def run_label(record: Record) -> str:
    """What a figure ran: its epochs (0: timed steps only), loop and formulation, as
    every answer's table states them."""
    w = record["workload"]
    if w.get("framework"):
        return f"{w['framework']} {w.get('mode')}, timed steps only"
    formulation = (record.get("formulation") or {}).get("name", "xla")
    count = w.get("epochs") or 0
    epochs = f"{count} epoch{'s' if count > 1 else ''}" if count else "timed steps only"
    return f"{epochs}, {record.get('loop') or 'step'} loop, {formulation}"


# --- the first screen -----------------------------------------------------------------


def not_measured(study: str, platform: str | None = None) -> str:
    """A first-screen answer where no record answers: the command that measures it."""
    device = f" --device={platform}" if platform else ""
    return f"no records yet: `python -m experiments.run --study={study}{device}` measures it"


def on_accelerator_command(study: str) -> str:
    """A first-screen note where only the CPU measured: the command for a GPU's run."""
    return f"no GPU or TPU run yet: `python -m experiments.run --study={study} --device=gpu`"


def measured_on(rs: list[Record]) -> str:
    """ "measured on cpu (AMD EPYC (AVX2))": where a first-screen number was measured."""
    labels = sorted({device_label(r) for r in rs})
    machines = sorted({machine(r) for r in rs if is_cpu(r)})
    where = f" ({'; '.join(machines)})" if machines else ""
    return f"measured on {', '.join(labels)}{where}"


# --- table cells ----------------------------------------------------------------------


def fmt_pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.3g}%"


def fmt_acc(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def epochs_run(record: Record) -> int | None:
    """The epochs the record's final accuracy is after: its history's last epoch (a run
    stopped early trained fewer than it asked for), else the epochs it asked for."""
    history = record.get("history") or []
    if history and history[-1].get("epoch") is not None:
        return int(history[-1]["epoch"])
    return record["workload"].get("epochs")


def fmt_test_acc(record: Record) -> str:
    """The final test accuracy with the epochs it is after, so that two runs of one
    workload at different lengths never read as one figure: `ACC after N epochs`."""
    acc = accuracy(record)
    epochs = epochs_run(record)
    if acc is None or not epochs:
        return fmt_acc(acc)
    return f"{fmt_acc(acc)} after {epochs} epoch{'s' if epochs != 1 else ''}"


def fmt_step(record: Record) -> str:
    step = record.get("step_time_s")
    if not step:
        return "-"
    return f"{seconds(step['median'])} [{seconds(step['p10'])}-{seconds(step['p90'])}]"


def fmt_images(record: Record) -> str:
    images = record.get("images_per_s")
    return f"{images:,.0f}" if images else "-"


def fmt_status(record: Record) -> str:
    if record["status"] == "ok":
        return "ok"
    return f"{record['status']}: {markdown_text((record.get('message') or '')[:80])}"


# --- sections and plots ---------------------------------------------------------------


PAGES = "report"  # the details pages' folder, beside REPORT.md


def details(page: str) -> str:
    """The answer's link to its details page (report/PAGE.md)."""
    return f"Details: [{PAGES}/{page}.md]({PAGES}/{page}.md)."


def no_accelerator(study: str) -> str:
    """What a real run would add where a question has no GPU or TPU record, and how."""
    return (
        f"No GPU or TPU record yet: `python -m experiments.run --study={study} "
        "--device=gpu` (or `colab/jaxcnn_study.ipynb` on a Colab T4 or TPU v5e) would "
        "measure it."
    )


def on_accelerator(record: Record) -> bool:
    """Ran on a GPU or TPU at hand (compile-only records never ran)."""
    return record["device"]["platform"] != "cpu" and not record.get("compiled_not_run")


def section(title: str, *parts: str) -> str:
    """A `## title` section of the parts that are not empty."""
    return "\n\n".join([f"## {title}", *[p for p in parts if p]])


def save(fig: Any, path: Path, **savefig: Any) -> Path:
    """`fig` as the image `path` names (its suffix), the old file kept whole until the
    new one is (`records.write_whole`)."""
    plt = pyplot()
    if fig.get_layout_engine() is None:  # a figure laid out its own way keeps it
        fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, **{"dpi": 100, "format": path.suffix.lstrip("."), **savefig})
    plt.close(fig)
    records.write_whole(path, image.getvalue())
    return path


def image(title: str, path: Path) -> str:
    return f"![{title}]({path.name})"


def log_axes(
    ax: Any,
    xlabel: str,
    ylabel: str,
    title: str | None = None,
    ticks: Any = None,
    legend: str | None = "x-small",
) -> None:
    """Log-log axes with their labels, and ticks at the measured counts where given."""
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
    if ticks is not None:
        count_ticks(ax, ticks)
    if title:
        ax.set_title(title)
    if legend:
        ax.legend(fontsize=legend)


def count_ticks(ax: Any, values: Any) -> None:
    """Ticks at the measured counts (batch sizes, devices, K, n) on a log x axis, written
    as plain integers: a few points per decade get no useful ticks of their own."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def plain_log_y(ax: Any) -> None:
    """A log y axis ticked 1, 2, 5 per decade in plain numbers (12,000, not 1.2 x 10^4)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def epoch_ticks(*axes: Any) -> None:
    """Whole epochs only on the x axis."""
    from matplotlib.ticker import MaxNLocator

    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def throughput_curve(ax: Any, records: list[Record], label: str, note_ooms: bool = False) -> Any:
    """images/s over batch size of the ok records, and each OOM's batch as an x on the
    floor of the curve (an OOM has no throughput), `OOM` written above it where
    `note_ooms`; the curve's line."""
    ok = sorted((r for r in records if r["status"] == "ok"), key=batch_size)
    xs, ys = [batch_size(r) for r in ok], [r["images_per_s"] for r in ok]
    line = ax.plot(xs, ys, marker="o", label=label)[0]
    ooms = [batch_size(r) for r in records if r["status"] == "oom"]
    if ooms:
        floor = min(ys, default=1.0)
        above = {"zorder": 3} if note_ooms else {}
        ax.scatter(ooms, [floor] * len(ooms), marker="x", s=80, color=line.get_color(), **above)
        for b in ooms if note_ooms else ():
            ax.annotate("OOM", (b, floor), textcoords="offset points", xytext=(0, 6), ha="center")
    return line


# --- curves: what a plot draws, as data a test can read --------------------------------


@dataclasses.dataclass(frozen=True)
class Curve:
    """One series a plot draws: its legend label, its (x, y) points in x order, and
    whether it is a prediction (dashed) or a measurement (solid). A curve of one point
    is a marker: there is nothing to join."""

    label: str
    points: tuple[tuple[float, float], ...]
    predicted: bool = False

    @property
    def xs(self) -> list[float]:
        return [x for x, _ in self.points]

    @property
    def ys(self) -> list[float]:
        return [y for _, y in self.points]


PREDICTED_STYLE = "--"
MEASURED_STYLE = "-"


def curve(label: str, points: Any, predicted: bool = False) -> Curve:
    """A Curve of `points` sorted by x; a predicted curve's label says so."""
    if predicted and "predicted" not in label:
        label += ", predicted"
    return Curve(label, tuple(sorted((float(x), float(y)) for x, y in points)), predicted)


def draw_curve(ax: Any, c: Curve, **style: Any) -> Any:
    """`c` on `ax`: dashed where predicted, solid where measured, a marker alone where it
    has one point; its line (for its colour)."""
    linestyle = "none" if len(c.points) < 2 else PREDICTED_STYLE if c.predicted else MEASURED_STYLE
    marker = "s" if c.predicted else "o"
    options = {"marker": marker, "linestyle": linestyle, "label": c.label, **style}
    if c.predicted:
        options.setdefault("markerfacecolor", "none")  # hollow: not a measurement
    return ax.plot(c.xs, c.ys, **options)[0]


def legend_below(ax: Any, columns: int = 2, fontsize: str = "small") -> None:
    """The legend under the axes, off the data."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(
            loc="upper center",
            bbox_to_anchor=(0.5, -0.16),
            ncol=columns,
            fontsize=fontsize,
            frameon=False,
        )
