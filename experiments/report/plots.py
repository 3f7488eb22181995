"""The report's plots, each a view of the table of figures that answers the question in
its title: measured solid, predicted dashed, bands shaded, a point that does not fit
marked apart, never joined to the points that do; no plot with fewer than three points
along its axis (it is left out)."""

from __future__ import annotations

import math
import textwrap
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from experiments.report import answers as answers_lib
from experiments.report.figures import (
    AS_RUN,
    BEFORE_FIRST_RUN,
    RAN_OVER_COMPILED,
    UNDECIDED_FIT,
    chip_named,
    compile_check_worst,
    host_unpriced,
    is_small,
)
from experiments.report.fmt import batches_text, percent, value_text
from experiments.studies import crossover as crossover_study
from experiments.studies.page import (
    LOOP,
    OURS_LOOP_STEP,
    USABLE,
    on_seed_data,
    reference_cpu,
    rows,
    sitting_spread,
)
from experiments.studies.scaling import SCALES_AT
from jaxcnn.perf.predict import MIN_BAND_ROWS

MIN_POINTS = 3
NEUTRAL = "0.35"  # a legend proxy's grey: a line style, marker or fill on any colour
# jaxcnn.perf.predict's rule: fewer held out is no band (its points drawn, its bars or
# lines not)
MIN_BAND_N = MIN_BAND_ROWS
BAND_ALPHA = 0.35  # a CPU's spread, shaded: seen beside its line, the line seen through it
ONE_STEP = {"batch": 128, "precision": "f32", "placement": "single"}  # seed models compared
SITTINGS = "v^<>"  # a GPU's earlier sittings, a marker each
T4_HATCH = "///"  # the T4's predicted band: hatched, so the CPU's shade shows through it
# faint and thin: a measured line crossing the band stays the strongest stroke there
T4_HATCH_ALPHA, T4_HATCH_WIDTH = 0.4, 0.6
# the crossover's loop panel: bands at the bottom, the prediction over them, measured on top
BAND_Z, PREDICTED_Z, MEASURED_Z = 1, 2, 3


def band_drawn(n: Any) -> Any:
    """Whether a band of `n` held-out observations (a number or a column) is drawn: the
    one rule every plot asks, MIN_BAND_N or more (NaN: no band)."""
    return pd.to_numeric(n, errors="coerce") >= MIN_BAND_N


def pyplot() -> Any:
    """matplotlib.pyplot drawing to files only (no display on servers, CI or TPU VMs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    # Fixed metadata: the same table draws the same bytes.
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
    pyplot().close(fig)
    return path


def _finish(fig: Any, path: Path, title: str, top: float | None = None,
            tight: bool = True) -> Path:  # fmt: skip
    """`fig` titled, laid out and saved: its panels' tops at `top` where given (tight_layout
    leaves no room for legends hung below them), else tight unless `tight` is False."""
    fig.suptitle(title)
    if top is not None:
        fig.subplots_adjust(top=top)
    elif tight:
        fig.tight_layout()
    return _save(fig, path)  # a seam: the tests take the figure here, unsaved


def _grid(n: int, size: Callable[[int, int], tuple[float, float]], xlabel: str, ylabel: str,
          sharex: bool = True, across: int = 4) -> tuple[Any, Any]:  # fmt: skip
    """A figure of `n` panels, `across` at most in a row (`size` from columns and rows), the
    lowest panels' x axes labelled, every panel's own y axis (none shared), and the panels
    left over blank."""
    cols = min(across, n)
    rows_ = -(-n // cols)
    fig, axes = pyplot().subplots(rows_, cols, figsize=size(cols, rows_), squeeze=False,
                                  sharex=sharex)  # fmt: skip
    for ax in axes.flat[n:]:
        ax.axis("off")
    # each column's lowest panel carries the x ticks: above a blank one, sharing hides them
    last = n - (rows_ - 1) * cols  # the panels of the last row
    lowest = [axes[rows_ - 1 if col < last else rows_ - 2, col] for col in range(cols)]
    for ax in lowest if sharex else axes.flat[:n]:
        ax.xaxis.set_tick_params(labelbottom=True)
        ax.set_xlabel(xlabel)
    for ax in axes.flat[:n]:
        ax.set_ylabel(ylabel)
    return fig, axes


def _legend_below(fig: Any, more: dict[str, Any] | None = None, size: str = "small",
                  ncol: int = 2) -> None:  # fmt: skip
    """One legend under the figure: every panel's entries once, then `more`."""
    handles = {}
    for ax in fig.axes:
        for h, label in zip(*ax.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, h)
    handles |= more or {}
    fig.legend(handles.values(), handles.keys(), fontsize=size, ncol=ncol, loc="upper center",
               bbox_to_anchor=(0.5, 0.0))  # fmt: skip


def _legend_under(ax: Any, drop: float, size: str = "x-small") -> None:
    """`ax`'s own legend hung `drop` (a share of the panel's height) under its frame."""
    ax.legend(fontsize=size, loc="upper center", bbox_to_anchor=(0.5, -drop))


def _proxy(**style: Any) -> Any:
    """A legend entry's line, drawn nowhere: it stands for `style` wherever it is drawn."""
    return pyplot().Line2D([], [], **style)


def _padded(values: list[float]) -> tuple[float, float]:
    """A y-axis on `values`' own range, a tenth of it spare either side."""
    pad = 0.1 * (max(values) - min(values))
    return min(values) - pad, max(values) + pad


def _diagonal(ax: Any, x: pd.Series, y: pd.Series) -> tuple[float, float]:
    """The line y = x, drawn on the range of `x` and `y` with 2x spare either way: (lo, hi)."""
    lo, hi = min(x.min(), y.min()) / 2, max(x.max(), y.max()) * 2
    ax.plot([lo, hi], [lo, hi], "k-", linewidth=1, label="exact")
    return lo, hi


def _factor_lines(ax: Any, f: float, lo: float, hi: float, style: str, label: str,
                  **kwargs: Any) -> None:  # fmt: skip
    """The lines y = f * x and y = x / f inside the range lo to hi, the one above labelled."""
    for g in (f, 1 / f):
        x = [max(lo, lo / g), min(hi, hi / g)]
        ax.plot(x, [x[0] * g, x[1] * g], style, label=label if g > 1 else None, **kwargs)


def _square(ax: Any, lo: float, hi: float, xlabel: str, ylabel: str, title: str) -> None:
    """A log-log panel of one range on both axes, titled, its legend below it."""
    ax.set(xlim=(lo, hi), ylim=(lo, hi), xlabel=xlabel, ylabel=ylabel)
    ax.set_title(title, fontsize="medium")
    _legend_under(ax, 0.13)


MEASURED_SLOT = "shaded column: a chip measured, beside its target's prediction where one names it"


def baseline_label(cpu: str | None) -> str:
    """The seed-models plot's label of the CPU's step the answers' speedups divide by."""
    return f"{cpu}, jaxcnn's loop (measured): what the answers' speedups divide by"


def seed_models(table: pd.DataFrame, path: Path) -> Path | None:
    """One step of each seed model at batch 128, a panel per model: each chip's predicted
    and measured steps against the CPU's."""
    cpu = reference_cpu(table)
    steps = rows(table, quantity="step_s", kind="measured", framework="jax", **ONE_STEP)
    steps = on_seed_data(steps)  # one point per chip and model
    measured, gpus = rows(steps, device=cpu, extra="-"), rows(steps, platform="gpu", extra="-")
    # the GPUs' measured step of jaxcnn's loop: what the predicted loop step is checked on
    loops = rows(steps, platform="gpu", extra=LOOP)
    predicted = rows(table, quantity=["device_step_s", "loop_step_s"], kind="predicted",
                     devices=1, extra="-", model=answers_lib.SEED_MODELS, **ONE_STEP)  # fmt: skip
    devices = sorted(set(predicted.device))
    if len(devices) < MIN_POINTS:
        return None
    ran = sorted(set(gpus[gpus.model.isin(answers_lib.SEED_MODELS)].device))
    # the CPU's step in jaxcnn's loop that the answers' speedups divide by
    bases, by_id = answers_lib.loop_over_loop(table), table.set_index("id")
    # a measured chip's column right of its target's (or last): never shared with a prediction
    order = [(d, False) for d in devices]
    for chip in ran:
        target = [i for i, (d, _) in enumerate(order) if chip_named(d) == chip]
        order.insert(target[-1] + 1 if target else len(order), (chip, True))
    at = {key: i for i, key in enumerate(order)}  # (chip, measured?) -> its column
    ticks = [f"{d} (measured)" if is_measured else d for d, is_measured in order]
    cpu_line = {"color": "C3", "linewidth": 1.2}
    unmeasured = []  # the models the CPU's step was not measured for: no CPU line
    fig, axes = _grid(4, lambda c, r: (10, 7.5), "", "seconds per step (log)", across=2)
    for ax, model in zip(axes.flat, answers_lib.SEED_MODELS, strict=True):
        lacks = []
        for quantity, shift, filled, label in (
            ("device_step_s", -0.15, True, "predicted device step"),
            ("loop_step_s", 0.15, False, "predicted loop step"),
        ):
            p = rows(predicted, model=model, quantity=quantity).set_index("device").reindex(devices)
            x = pd.Series([at[d, False] for d in devices], index=devices) + shift
            m, has, face = p.band_worst.astype(float), p.value.notna(), "C0" if filled else "none"
            # a band's bar at its worst factor, what the first screen's "undecided" goes by
            # (a band of too few held out is none: unvalidated, as jaxcnn.perf.predict says)
            b = m.notna() & band_drawn(p.band_n)
            u = has & ~b
            if b.any():
                y = p.value[b].astype(float)
                ax.errorbar(x[b], y, yerr=[y - y / m[b], y * m[b] - y], fmt="o", color="C0",
                            mfc=face, capsize=2,
                            label=f"{label} (bar: its band's worst factor)")  # fmt: skip
            if u.any():
                ax.plot(x[u], p.value[u], "o", color="0.55", mfc="0.55" if filled else "none",
                        label=f"{label}, unvalidated (no band)")  # fmt: skip
            # a loop step with host parts left out (no published figure for them) is a floor
            short = host_unpriced(p.note) & has
            if short.any():
                ax.plot(x[short], p.value[short], "x", color="black", markersize=5,
                        label=f"{label} with host parts left out: a floor")  # fmt: skip
        none = [d for d in devices if d not in set(predicted[predicted.model == model].device)]
        if none:
            named = ", ".join(d.split("-", 1)[-1] for d in none)
            lacks.append(f"no prediction for {named} (does not fit, or not compiled)")
        for device in ran:
            ax.axvspan(at[device, True] - 0.45, at[device, True] + 0.45, color="C2", alpha=0.08,
                       linewidth=0, label=MEASURED_SLOT)  # fmt: skip
            g = rows(gpus, model=model, device=device)
            for loop, shift, face in (("device", -0.2, "C2"), ("step", 0.0, "none")):
                v = g[(g.loop == loop) & (g.formulation == "xla")].value
                ax.plot([at[device, True] + shift] * len(v), v, "D", color="C2", mfc=face,
                        label=f"measured, {loop} loop (GPU)")  # fmt: skip
            mine = rows(loops, model=model, device=device).value
            ax.plot([at[device, True] + 0.2] * len(mine), mine, "s", color="C4", mfc="none",
                    label="measured, jaxcnn's loop (GPU): what a loop step predicts")  # fmt: skip
            if not len(g):
                lacks.append(f"no {device} step measured at batch 128 f32")
        m = measured[measured.model == model]
        like = answers_lib.cpu_step(table, cpu, model, 128)
        if like:
            ax.axhline(like["value"], **cpu_line, label=f"{cpu}, xla step loop (measured)")
        elif len(m):
            lacks.append(f"no {cpu} xla step loop at batch 128")
        for base in by_id.reindex(sorted(set(bases[bases.model == model].numerator))).value:
            ax.axhline(base, **cpu_line, linestyle="-.", label=baseline_label(cpu))
        if len(m):
            fastest = m.loc[m.value.astype(float).idxmin()]
            ax.axhline(fastest.value, **cpu_line, linestyle=":")
            # named in the title: a label on the line meets the frame or the data
            lacks.append(f"dotted: the CPU's fastest, {fastest.formulation} formulation, "
                         f"{fastest.loop} loop")  # fmt: skip
        else:
            lacks.append(f"no {cpu} step measured at batch 128 f32")
            unmeasured.append(model)
        ax.set_yscale("log")
        ax.margins(y=0.08)  # the CPU's lines clear of the top frame
        ax.set_title("\n".join([model, *lacks]), fontsize="small")
    for ax in axes[-1]:
        ax.set_xticks(list(range(len(ticks))), ticks, rotation=45, ha="right")
        for label, (_, is_measured) in zip(ax.get_xticklabels(), order, strict=True):
            if is_measured:
                label.set_color("C2")
    fastest = _proxy(color="C3", linestyle=":")
    _legend_below(fig, {f"{cpu}, its fastest measured way (named in the title)": fastest})
    return _finish(fig, path, seed_models_title(unmeasured))


def seed_models_title(unmeasured: list[str]) -> str:
    """The seed-models plot's title, naming the models with no CPU step (`unmeasured`)."""
    title = "One train step of each seed model at batch 128, f32: each chip against the CPU"
    if unmeasured:
        title += f" where it ran (no CPU step for {', '.join(unmeasured)})"
    return title


# a GPU's newest sitting, what the verdict reads, drawn over its earlier ones, faint
NEWEST = {"linewidth": 2, "zorder": MEASURED_Z}
EARLIER = {"alpha": 0.5, "markersize": 4, "linewidth": 0.8, "zorder": 2}


def _wrap(text: str, **how: Any) -> str:
    """A crossover legend entry wrapped to the width of the legend below its panel."""
    return textwrap.fill(text, 52, **how)


def crossover(table: pd.DataFrame, path: Path) -> Path | None:
    """MLP step time against trainable parameters: jaxcnn's loop on the CPU and GPUs, the T4
    predicted with row 9's undecided range; beside it, their ratio in each sitting."""
    cpu = reference_cpu(table)
    c, g = crossover_study.crossover(table, cpu)
    sweeps = crossover_study.measured_crossover(table, cpu)
    if len(c) < MIN_POINTS or len(g) < MIN_POINTS:
        return None
    fig, (loop_ax, ratio_ax) = pyplot().subplots(1, 2, figsize=(12, 4.4), sharex=True)
    colour = {d: f"C{2 + i}" for i, d in enumerate(sorted({gl.device.iloc[0] for _, gl in sweeps}))}
    # the CPU's steps the T4's and GPUs' are set against: jaxcnn's loop, or timed alone
    alone = "" if (c.extra == LOOP).all() else " (each step timed alone)"
    loop_ax.plot(c.params, c.value, "o-", color="C0", zorder=MEASURED_Z,
                 label=f"{cpu}, measured{alone}")  # fmt: skip
    spread = c.dropna(subset=["lo", "hi"])  # the CPU's spread, where it has one
    if len(spread):
        x, lo, hi = (spread[k].astype(float) for k in ("params", "lo", "hi"))
        loop_ax.fill_between(x, lo, hi, color="C0", alpha=BAND_ALPHA, linewidth=0,
                             label=f"{cpu}, {'/'.join(sorted(set(spread.spread)))}")  # fmt: skip
    for _, gl in sweeps:
        device = gl.device.iloc[0]
        single = "" if gl.lo.notna().all() else " (one window each: no spread)"
        loop_ax.plot(gl.params, gl.value, "D-", color=colour.get(device, "C4"), **NEWEST,
                     label=f"{device}, measured{single}")  # fmt: skip
    # each earlier sitting of a GPU: how far a sitting moves what the verdict reads
    for i, e in enumerate(crossover_study.sitting_crossovers(table, sweeps)):
        r = e["rows"].sort_values("params")
        label = _wrap(f"{e['device']}, another sitting ({e['when']})")
        loop_ax.plot(r.params, r.value, f"{SITTINGS[i % 4]}:", color=colour.get(e["device"], "C4"),
                     **EARLIER, label=label)  # fmt: skip
    what = g.quantity.iloc[0].removesuffix("_s").replace("_", " ")
    words = answers_lib.band_words(g.iloc[0].to_dict())
    worst = g.band_worst.astype(float)
    banded = bool(worst.notna().all() and band_drawn(g.band_n).all())
    label = f"T4, predicted {what}" + ("" if banded else f" ({words}: no band to draw)")
    loop_ax.plot(g.params, g.value, "s--", color="C1", mfc="none", zorder=PREDICTED_Z,
                 label=label)  # fmt: skip
    if banded:
        x, y = g.params.astype(float), g.value.astype(float)
        # row 9's undecided zone: each width's band at its worst, times the CPU's moves
        noise = crossover_study.undecided_range(table, c, g)["noise"]
        said = "; ".join(sorted({answers_lib.band_words(r) for r in g.to_dict("records")}))
        times = f" times the CPU's sitting spread ({value_text(noise, 'x')})" if noise > 1 else ""
        label = _wrap(f"T4 x/÷ its band's worst{times}, undecided inside: {said}",
                      break_on_hyphens=False)  # fmt: skip
        # hatched: a tint over the CPU's blue spread would read as a third, grey band
        loop_ax.fill_between(x, y / (worst * noise), y * worst * noise, facecolor="none",
                             edgecolor=("C1", T4_HATCH_ALPHA), hatch=T4_HATCH, linewidth=0,
                             hatch_linewidth=T4_HATCH_WIDTH, zorder=BAND_Z,
                             label=label)  # fmt: skip
    loop_ax.set_title("jaxcnn's loop on both sides (the verdicts')", fontsize="medium")
    sitting_ratios(table, ratio_ax, sweeps, colour)
    loop_ax.set(xscale="log", yscale="log", ylabel="seconds per step, batch 128, f32")
    for ax in (loop_ax, ratio_ax):
        ax.set_xlabel("trainable parameters (MLP width 32 to 8192)")
        if ax.get_legend_handles_labels()[0]:
            _legend_under(ax, 0.16, "small")
    return _finish(fig, path, "Seed 002: above how many parameters does the GPU win?", top=0.86)


def sitting_ratios(table: pd.DataFrame, ax: Any, sweeps: list, colour: dict[str, str]) -> None:
    """The CPU's loop step over each measured GPU's, per width and sitting, shaded where
    sittings move it (row 9's yardstick, answers.sitting_noise); blank without a GPU's loop."""
    printed = crossover_study.sitting_ratios(table)
    if not len(printed):
        ax.set_axis_off()
        return
    cpu_of = {gl.device.iloc[0]: cl for cl, gl in sweeps}
    for device, ratios in printed.groupby("device", sort=True):
        hue = colour.get(device, "C4")
        newest = ratios[ratios.selection == "loop-vs-loop"].sort_values("params")
        ax.plot(newest.params, newest.value, "D-", color=hue, **NEWEST,
                label=f"{device}, the newest sitting")  # fmt: skip
        earlier = ratios[ratios.selection != "loop-vs-loop"].groupby("extra", sort=True)
        for i, (extra, e) in enumerate(earlier):
            e, when = e.sort_values("params"), crossover_study.when_of(extra)
            ax.plot(e.params, e.value, f"{SITTINGS[i % 4]}:", color=hue, **EARLIER,
                    label=_wrap(f"{device}, {when}"))  # fmt: skip
        moves = sitting_spread(table, device)
        if len(moves) and device in cpu_of:  # the verdict's yardstick
            m, _, _ = answers_lib.sitting_noise(table, moves.iloc[0].to_dict(), cpu_of[device])
            label = f"sittings move the ratio up to {value_text(m, 'x')}: undecided inside"
            ax.axhspan(1 / m, m, color="0.5", alpha=0.15, label=_wrap(label))
    ax.axhline(1, color="k", linewidth=0.8)
    ax.set(yscale="log", ylabel="CPU's loop step / GPU's (above 1: the GPU faster)")
    ax.set_title("the GPU over the CPU, each sitting (row 9)", fontsize="medium")


SEED_RUNS = "the seed's own run: " + ", ".join(
    f"{d.removeprefix('gpu-').upper()} b{b} {'fit' if fit else 'OOM'}"
    for d, b, fit in answers_lib.SEED_MEMORY_RUNS
)


# A memory panel's axes in inches, a little under what the grid gives them (the tests
# check): where its markers will fall, known before it is drawn
MEMORY_AXES_IN = (2.2, 1.3)
# markers (or rotated tick labels) nearer than this, in points, would hide one another
APART_PT = 9.0
ZOOM = "crowded batches"  # a zoom panel's, near their chip's limit (_apart)
# a seed run's ring: the verdict's 7-point diamond shows whole inside it, and its edge a
# few points clear of the frame, which never reads as cutting it
RING_SIZE = 16.0
RING_PT = RING_SIZE / 2 + 3
MEMORY_YLABEL = "GiB per device"
# crowded batches far from the limit: named in their chip's title, so none is lost unsaid
CROWDED_HERE = "crowded, not drawn apart"
ZOOM_XLABEL = "batch, in order (not to scale)"
ZOOMED = "shaded: batches drawn apart in the panel right of it"
FALLS = "falls as the batch grows"
FALLS_WHY = (
    "Where compiled memory falls as the batch grows (a panel's title says where), the "
    "compiler's temporaries for that batch's shape fell: it is the compiler's plan per batch, "
    "not a steady function of it"
)


def _crowds(b: Any, gib: Any, ylim: tuple[float, float]) -> list[list[int]]:
    """The groups of a memory panel's points (batch on a log axis, GiB on `ylim`) each within
    APART_PT of another of its group on MEMORY_AXES_IN; in batch order."""
    lx = np.log2(np.asarray(b, float))
    span = (lx.max() - lx.min()) * 1.1 or 1.0
    x = (lx - lx.min()) / span * MEMORY_AXES_IN[0] * 72
    y = (np.asarray(gib, float) - ylim[0]) / (ylim[1] - ylim[0]) * MEMORY_AXES_IN[1] * 72
    near = np.hypot(x[:, None] - x[None, :], y[:, None] - y[None, :]) < APART_PT
    groups: list[set[int]] = []
    for i, j in zip(*np.nonzero(np.triu(near, 1)), strict=True):
        joined = [g for g in groups if i in g or j in g]
        groups = [g for g in groups if g not in joined] + [set().union({i, j}, *joined)]
    return sorted(sorted(int(i) for i in g) for g in groups)


def _apart(b: Any, gib: Any, ylim: tuple[float, float], usable: list[float],
           worst: float | None) -> tuple[Any, list[list[int]]]:  # fmt: skip
    """(a mask on `b` of the crowded batches drawn apart in a zoom panel, the crowded groups
    left on the chip's own). Only a group within limit x/÷ worst² of a usable limit is drawn
    apart, where the verdicts turn (with every batch between): one farther keeps one verdict."""
    b, gib = np.asarray(b, float), np.asarray(gib, float)
    near, crowds, stretch = (worst or 1.0) ** 2, _crowds(b, gib, ylim), b < 0
    split = [g for g in crowds
             if any(gib[g].min() <= u * near and gib[g].max() >= u / near
                    for u in usable)]  # fmt: skip
    # a group partly inside goes with it whole: none is split between the two panels
    while split:
        ends = [*b[stretch], *(b[i] for g in split for i in g)]
        stretch = (b >= min(ends)) & (b <= max(ends))
        split = [g for g in crowds if stretch[g].any() and not stretch[g].all()]
    return stretch, [g for g in crowds if not stretch[g].any()]


def _batch_ticks(ax: Any, batches: Any) -> None:
    """A log2 batch axis ticked at the `batches` it draws (never a power of two the table
    lacks), a label within APART_PT of the one before left out."""
    ax.set_xscale("log", base=2)
    at = sorted({float(x) for x in batches})
    span = (np.log2(at[-1]) - np.log2(at[0])) * 1.1 or 1.0
    kept: list[float] = []
    for x in at:
        if not kept or (np.log2(x) - np.log2(kept[-1])) / span * MEMORY_AXES_IN[0] * 72 >= APART_PT:
            kept.append(x)
    ax.set_xticks(kept, [str(int(x)) for x in kept], rotation=90, fontsize="x-small")
    # a label left out keeps its tick, unlabelled: every marker stands over its own tick
    left = [x for x in at if x not in kept]
    ax.set_xticks(left, [""] * len(left), minor=True)


def _span(values: list[str], unit: str) -> str:
    """'a-b unit' from formatted values, 'a unit' where both ends read the same."""
    return (values[0] if values[0] == values[-1] else f"{values[0]}-{values[-1]}") + unit


def zoom_title(name: str, batches: Any, gib: Any, limits: list[float]) -> str:
    """A zoom panel's title: its chip(s), the batches drawn apart and their memory_share."""
    return "\n".join([name, f"{ZOOM} {batches_text(list(batches))}, drawn apart:",
                      *_share_lines(gib, limits)])  # fmt: skip


def memory_share(gib: Any, limits: list[float]) -> str:
    """Compiled memory `gib` as a span in GiB, and what share that is of each of the
    memories JAX can use (`limits`, GiB): '5.92 GiB: 40% of the 14.9 GiB usable'."""
    ends = sorted(float(x) for x in gib)
    said = _span([f"{x:.3g}" for x in ends], " GiB")
    shares = [f"{_span([f'{100 * x / u:.0f}' for x in ends], '%')} of the {u:.3g} GiB usable"
              for u in sorted(set(limits))]  # fmt: skip
    return said + (": " + "; ".join(shares) if shares else "")


def _share_lines(gib: Any, limits: list[float]) -> list[str]:
    """memory_share wrapped to a panel title's width."""
    return textwrap.wrap(memory_share(gib, limits), 44, break_on_hyphens=False)


def _memory_ylim(gib: Any, usable: list[float], worst: float | None,
                 rings: Any) -> tuple[float, float]:  # fmt: skip
    """A memory panel's y-axis: its memory and every zone whole (_padded), widened so each
    seed run's ring (at `rings`, GiB) is drawn whole inside the frame."""
    zones = [x for u in usable for x in ((u / worst, u, u * worst) if worst else (u,))]
    lo, hi = _padded([*gib, *zones])
    h = MEMORY_AXES_IN[1] * 72
    for y in rings:
        hi = max(hi, (y * h - RING_PT * lo) / (h - RING_PT))
        lo = min(lo, (y * h - RING_PT * hi) / (h - RING_PT))
    return lo, hi


def _memory_panel(ax: Any, x: Any, gib: Any, ok: Any, unsure: Any, ringed: Any,
                  usable: list[float], worst: float | None, shown: Any = slice(None),
                  shade: tuple[float, float] | None = None) -> None:  # fmt: skip
    """A memory panel: compiled memory per batch, the verdicts `shown` on it, `shade` shaded,
    each usable memory dotted in its undecided zone. A marker drawn over another is hollow
    or strokes only, and smaller than a hollow one beneath it, so neither hides."""
    ax.plot(x, gib, "-", color="C0", linewidth=1, zorder=1)
    x, y, ok, unsure, ring = (np.asarray(a)[shown] for a in (x, gib, ok, unsure, ringed))
    ax.plot(x[ok & ~unsure], y[ok & ~unsure], "o", color="C0", markersize=4, zorder=2,
            label="fits (compiled memory)")  # fmt: skip
    ax.plot(x[unsure], y[unsure], "D", color=NEUTRAL, mfc="none", markersize=7, zorder=3,
            label="undecided: inside the zone")  # fmt: skip
    ax.plot(x[~ok & ~unsure], y[~ok & ~unsure], "x", color="C3", markersize=5, mew=1,
            zorder=4, label="does not fit")  # fmt: skip
    if ring.any():  # never clipped at a panel's edge
        ax.plot(x[ring], y[ring], "o", color="k", mfc="none", markersize=RING_SIZE, mew=1,
                label=SEED_RUNS, clip_on=False, zorder=5)  # fmt: skip
        ax.margins(x=0.08)  # a ring at the first or last batch clear of the side frames
    if shade:
        ax.axvspan(*shade, color="0.85", zorder=0, linewidth=0, label=ZOOMED)
    for limit in usable:
        ax.axhline(limit, color="C2", linestyle=":", linewidth=1, label="what JAX can use")
        if worst:
            label = f"undecided: within the compile check's worst ({value_text(worst, 'x')})"
            ax.axhspan(limit / worst, limit * worst, color="C2", alpha=0.12, label=label)
    ax.set_ylim(_memory_ylim(gib, usable, worst, np.asarray(gib)[np.asarray(ringed)]))


def as_ran_factors(table: pd.DataFrame) -> pd.DataFrame:
    """The seed model's allocator peak as it ran over its compiled memory, per chip and batch."""
    return rows(table, quantity="memory_factor", kind="measured", extra=RAN_OVER_COMPILED,
                model=answers_lib.SEED_MODEL, precision="f32")  # fmt: skip


def _as_ran(ax: Any, factors: pd.DataFrame) -> None:
    """What a program held as it ran over its compiled memory: what a fit verdict leaves out."""
    for (device, g), mark in zip(factors.groupby("device"), "^vsD", strict=False):
        g = g.sort_values("batch")
        ax.plot(g.batch.astype(float), g.value.astype(float), f"{mark}-", color="C1",
                linewidth=1, label=f"{device}: its allocator's own peak as it ran ÷ its "
                "compiled memory (measured)")  # fmt: skip
    ax.axhline(1.0, color="black", linewidth=0.8, label="= the compiled memory")
    ax.set_ylim(_padded([1.0, *factors.value.astype(float)]))
    _batch_ticks(ax, factors.batch)
    ax.set_ylabel("× compiled memory")
    chips = ", ".join(sorted(set(factors.device)))
    ax.set_title(f"{chips} as it ran (measured)\nwhat else it held at its peak\nis not "
                 "measured apart", fontsize="small")  # fmt: skip


def memory(table: pd.DataFrame, path: Path) -> Path | None:
    """The seed model's compiled memory per batch in f32, a panel per one-device chip on its
    own ranges (a 2 GiB chip's fit boundary as readable as an 80 GiB one's), crowded
    batches near the limit drawn apart beside it (_apart), and what each held as it ran."""
    model = answers_lib.SEED_MODEL
    where = {"model": model, "precision": "f32", "platform": ["gpu", "tpu"]}
    mem = rows(table, quantity="memory_bytes", kind="compiled", extra="-", placement="single",
               **where)  # fmt: skip
    every = rows(table, quantity="fits", **where)
    fits = rows(every, placement="single")
    fits = fits.assign(unsure=fits.flag.astype(str).str.startswith(UNDECIDED_FIT))
    # every verdict, its compiled memory where the table holds one
    mem = fits[["device", "batch", "value", "unsure"]].merge(
        mem[["device", "batch", "value"]], on=["device", "batch"], how="left",
        suffixes=("_fits", ""))  # fmt: skip
    series: dict[tuple, list[str]] = {}
    for device, g in mem.groupby("device"):
        g = g.sort_values("batch")
        placed, unplaced = g[g.value.notna()], g[g.value.isna()]
        key = tuple(zip(placed.batch, placed.value, placed.value_fits, placed.unsure, strict=True))
        lost = tuple(zip(unplaced.batch, unplaced.value_fits, strict=True))
        series.setdefault((key, lost), []).append(device)
    series = {k: v for k, v in series.items() if len(k[0]) >= MIN_POINTS}
    if not series:
        return None
    seed = {(d, b) for d, b, _ in answers_lib.SEED_MEMORY_RUNS}
    # the compile check's worst factor: a batch that near its limit is undecided (row 1's rule)
    worst = compile_check_worst(table)
    # what every verdict on a chip is held to (figures.undecided_fits reads the same rows)
    limit = rows(table, quantity="memory_bytes", extra=USABLE).set_index("device").value / 2**30
    panels = []  # batch, GiB, fits, undecided, the seed's runs, lost, devices, usable, ...
    for (points, lost), devices in sorted(series.items(), key=lambda kv: kv[1]):
        b, gib, ok, unsure = pd.DataFrame(points).to_numpy(float).T  # batch, bytes, fits
        gib, ok, unsure = gib / 2**30, ok == 1, unsure == 1
        ringed = np.array([any((d, x) in seed for d in devices) for x in b])
        usable = [float(limit[d]) for d in devices if d in limit.index]
        ylim = _memory_ylim(gib, usable, worst, gib[ringed])  # as its panel will draw it
        stretch, overlaps = _apart(b, gib, ylim, usable, worst)
        panels.append((b, gib, ok, unsure, ringed, lost, devices, usable, overlaps, stretch))
    # the chips with a zoom panel first: each pair on one row, no hole between them
    panels.sort(key=lambda p: not p[-1].any())
    factors = as_ran_factors(table)
    n = sum(1 + bool(p[-1].any()) for p in panels) + bool(len(factors))
    fig, axes = _grid(n, lambda cols, rows_: (3 * cols, 2.7 * rows_ + 0.6), "batch",
                      MEMORY_YLABEL, sharex=False)  # fmt: skip
    free = iter(axes.flat)
    for b, gib, ok, unsure, ringed, lost, devices, usable, overlaps, s in panels:
        ax = next(free)
        shade = (b[s].min(), b[s].max()) if s.any() else None
        _memory_panel(ax, b, gib, ok, unsure, ringed, usable, worst, shown=~s, shade=shade)
        name = ", ".join(d.removeprefix("gpu-") for d in devices)
        title = [name]
        falls = [int(x) for x, d in zip(b[1:], np.diff(gib), strict=True) if d < 0]
        if falls:  # said where it is drawn: a reader expects memory to grow with the batch
            title.append(textwrap.fill(f"{FALLS} at {', '.join(f'b{x}' for x in falls)}", 40))
        for fit, words in ((0, "do not fit"), (1, "fit")):
            mine = [x for x, f in lost if f == fit]
            if mine:  # a verdict with no memory to place it by: said, not dropped
                title.append(textwrap.fill(f"{batches_text(mine)} {words}, not drawn: no compiled "
                                           "memory to place them by", 40))  # fmt: skip
        for g in overlaps:  # crowded far from the limit: left crowded, and said how far
            title += [f"{batches_text(list(b[g]))} {CROWDED_HERE}:", *_share_lines(gib[g], usable)]
        ax.set_title("\n".join(title), fontsize="small")
        # the batches drawn apart ticked at their ends only: the zoom panel names each
        _batch_ticks(ax, [*b[~s], *b[s][[0, -1]]] if s.any() else b)
        if not s.any():
            continue
        # the stretch's batches evenly apart in order, each tick naming its batch
        zoom = next(free)
        at = np.arange(s.sum(), dtype=float)
        _memory_panel(zoom, at, gib[s], ok[s], unsure[s], ringed[s], usable, worst)
        zoom.set_xticks(at, [str(int(x)) for x in b[s]], rotation=90, fontsize="x-small")
        # the end batches' markers and rings off the frame; its own range: labelled as its own
        zoom.set(xlim=(-0.8, len(at) - 0.2), xlabel=ZOOM_XLABEL, ylabel=MEMORY_YLABEL)
        zoom.set_title(zoom_title(name, b[s], gib[s], usable), fontsize="small")
    if len(factors):
        _as_ran(next(free), factors)
    _legend_below(fig)
    title = f"{model}, f32: compiled memory per batch, each one-device chip on its own scale"
    if (every.placement != "single").any():
        title += " (the sharded targets' verdicts on the page, not drawn)"
    if any(len(a.get_title().split(FALLS)) > 1 for a in fig.axes):
        title += "\n" + textwrap.fill(FALLS_WHY, 110)
    return _finish(fig, path, title)


# the table's placement names, as the plot titles its panels
PLACEMENTS = {"sharded": "data-parallel", "data-parallel": "data-parallel",
              "model": "model-parallel"}  # fmt: skip


def scaling_series(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The scaling plot's series, predicted (from its base, 100%) or published (NVIDIA's
    1-vs-N-GPU pairs, one series a framework's sweep)."""
    base = table.set_index("id").devices
    s = rows(table, quantity="scaling_efficiency", selection="equal-batch")
    s = s.assign(per=s.batch // s.devices, base=[int(base[i]) for i in s.numerator], sweep="-")
    p = rows(table, quantity="scaling_efficiency", kind="published")
    # a batch is the global one, published or not; a sweep is one configuration's x2, x4, x8
    p = p.assign(per=p.batch // p.devices, base=1,
                 sweep=p.extra.astype(str).str.replace(r"-x\d+$", "", regex=True))  # fmt: skip
    out = []
    keys = ["kind", "model", "placement", "platform", "chip", "precision", "per", "base", "sweep"]
    for key, g in pd.concat([s, p]).groupby(keys, sort=True):
        r, g = dict(zip(keys, key, strict=True)), g.sort_values("devices")
        above = [(int(d), float(v)) for d, v, f in zip(g.devices, g.value, g.flag, strict=True)
                 if str(f).startswith("above ideal")]  # fmt: skip
        out.append({**r, "placement": PLACEMENTS.get(r["placement"], r["placement"]),
                    "per": int(r["per"]), "base": int(r["base"]), "above": above,
                    "devices": [int(r["base"]), *g.devices.astype(int)],
                    "values": [1.0, *g.value.astype(float)]})  # fmt: skip
    return out


MAX_SERIES = 8  # a scaling panel's most series before it splits by platform
ABOVE_IDEAL = "ringed: above ideal, a flaw in the prediction (no real gain)"
FLAW = "above ideal:\na flaw"  # written beside each ringed point, its value first
RING = {"color": "r", "mfc": "none", "markersize": 13, "mew": 1.5}  # a point above ideal
SCALING_MARKER = 5.0  # a scaling point's marker, in points
SCALING_AXES_IN = (2.3, 1.9)  # as MEMORY_AXES_IN, a scaling panel's
# a panel's frame this far (points) from its outermost markers' centres: a ring's edge a
# marker clear of it
SCALING_EDGE = RING["markersize"] / 2 + RING["mew"] + SCALING_MARKER + 1


def _scaling_limits(ax: Any, xs: list[list[float]], values: list[float]
                    ) -> tuple[float, float, float, float]:  # fmt: skip
    """A scaling panel's axes (log2 x) on its points `xs`, `values`, SCALING_EDGE clear of
    its frame on a panel of SCALING_AXES_IN: (left, right, bottom, top)."""
    width, height = (72 * inches for inches in SCALING_AXES_IN)
    ends = min(min(x) for x in xs), max(max(x) for x in xs)
    octaves = max(math.log2(ends[1] / ends[0]), 1.0)
    pad = 2 ** (octaves * SCALING_EDGE / (width - 2 * SCALING_EDGE))
    low, high = min(values), max(values)
    spare = max(high - low, 0.01) * SCALING_EDGE / (height - 2 * SCALING_EDGE)
    ax.set_xscale("log", base=2)
    ax.set(xlim=(ends[0] / pad, ends[1] * pad), ylim=(low - spare, high + spare))
    return ends[0] / pad, ends[1] * pad, low - spare, high + spare


def _clear_of(points: list[tuple[float, float]], fixed: list[tuple[float, float]],
              gap: float) -> list[float]:  # fmt: skip
    """The x offset (0, else the nearest step of `gap` either way) leaving each of `points`
    `gap` clear of those placed before it and of `fixed`: series a hair apart stay apart."""
    placed, out = list(fixed), []
    for x, y in points:
        for k in range(64):
            dx = gap * ((k + 1) // 2) * (1 if k % 2 else -1)
            if all((x + dx - px) ** 2 + (y - py) ** 2 >= gap**2 for px, py in placed):
                break
        placed.append((x + dx, y))
        out.append(dx)
    return out


# matplotlib's cycle reordered so that neighbours differ in hue (not red, purple, pink)
DISTINCT = ("C0", "C1", "C2", "C3", "C9", "C5", "C4", "C8", "C7", "C6")


def _spread_apart(xs: list[list[float]], series: list[dict[str, Any]],
                  limits: tuple[float, float, float, float]) -> None:  # fmt: skip
    """`xs` (one panel's series' x) moved apart in place where filled points would hide one
    another on a panel of SCALING_AXES_IN and `limits`; bases and hollow points stay."""
    left, right, lo, hi = limits
    octaves = math.log2(right / left)
    width, height = (72 * inches for inches in SCALING_AXES_IN)

    def at(x: float, y: float) -> tuple[float, float]:
        return math.log2(x / left) / octaves * width, (y - lo) / (hi - lo) * height

    # hollow (published) markers stay: both outlines show, and a sweep stays on its devices
    still = [(i, j) for i, x in enumerate(xs) for j in range(len(x))
             if j == 0 or series[i]["kind"] == "published"]  # fmt: skip
    bases = [at(xs[i][j], series[i]["values"][j]) for i, j in still]
    rest = [(i, j) for i, x in enumerate(xs) for j in range(1, len(x)) if (i, j) not in still]
    moves = _clear_of([at(xs[i][j], series[i]["values"][j]) for i, j in rest], bases,
                      SCALING_MARKER + 1)  # fmt: skip
    for (i, j), dx in zip(rest, moves, strict=True):
        xs[i][j] *= 2 ** (dx / width * octaves)


def _side_by_side(n: int, step: float, spread: float) -> list[float]:
    """The offsets of a panel's `n` series, centred on 0: `step` apart, nearer where that
    would span more than `spread`."""
    step = min(step, spread / max(1, n - 1))
    return [step * (i - (n - 1) / 2) for i in range(n)]


SCALES_LINE = {"color": "grey", "linestyle": "--", "linewidth": 0.8}  # the verdicts' line
SCALES_NEAR = 0.1  # a panel whose lowest is this near the line shows it


def scaling(table: pd.DataFrame, path: Path) -> Path | None:
    """Weak-scaling efficiency against the device count, one panel per model and
    placement: colour per chip, line per precision, marker per per-device batch;
    predicted filled, published hollow and dotted; a panel's series side by side."""
    series = scaling_series(table)
    if len({d for r in series for d in r["devices"]}) < MIN_POINTS:
        return None
    chips = sorted({r["chip"] for r in series})
    colour = {c: DISTINCT[i % len(DISTINCT)] for i, c in enumerate(chips)}
    marker = {b: "os^Dv<>pPXh*"[i % 12] for i, b in enumerate(sorted({r["per"] for r in series}))}
    style = {"f32": "-", "bf16": "--", "tf32": "-.", "amp": (0, (5, 1, 1, 1))}
    # published series in a panel of their own: they and the predictions crowd 0.9-1.0
    mixed = {(r["model"], r["placement"]) for r in series if r["kind"] == "published"}
    # A panel of more series than a reader can tell apart comes apart by platform.
    counts = Counter((r["model"], r["placement"], r["kind"]) for r in series)
    held = {(r["model"], r["placement"], r["kind"], r["platform"]) for r in series}
    several = Counter(key[:3] for key in held)  # how many platforms each panel holds

    def panel_of(r: dict[str, Any]) -> tuple[str, str, str]:
        key = r["model"], r["placement"]
        kind = f", {r['kind']}" if key in mixed else ""
        crowded = several[(*key, r["kind"])] > 1 and counts[(*key, r["kind"])] > MAX_SERIES
        return *key, kind + (f", {r['platform'].upper()}s" if crowded else "")

    panels: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in series:
        panels.setdefault(panel_of(r), []).append(r)
    from matplotlib.ticker import PercentFormatter

    # each panel's devices its own: one that stops at 8 is not squeezed by one of 64
    fig, axes = _grid(len(panels), lambda c, r: (3.3 * c, 2.9 * r), "devices", "efficiency",
                      sharex=False)  # fmt: skip
    for ax, ((model, placement, kind), mine) in zip(axes.flat, sorted(panels.items()),
                                                    strict=False):  # fmt: skip
        # a fraction of an octave apart: same-valued series stay visible side by side
        shifts = _side_by_side(len(mine), 0.07, 0.6)
        xs = [[d * 2**s for d in r["devices"]] for r, s in zip(mine, shifts, strict=True)]
        # each panel on its own data's range (series 1% apart stay apart, not a smear),
        # down to the verdicts' line where its lowest comes near it
        values = [v for r in mine for v in r["values"]]
        values += [SCALES_AT] if min(values) < SCALES_AT + SCALES_NEAR else []
        _spread_apart(xs, mine, _scaling_limits(ax, xs, values))
        _scaling_limits(ax, xs, values)  # on the points as drawn
        named: list[int] = []  # the bases above 1 a panel's series start from
        for r, x in zip(mine, xs, strict=True):
            published = r["kind"] == "published"
            ax.plot(x, r["values"], ":" if published else style.get(r["precision"], ":"),
                    marker=marker[r["per"]], color=colour[r["chip"]],
                    mfc="none" if published else colour[r["chip"]],
                    linewidth=0.8 if published else 1.2, markersize=SCALING_MARKER)  # fmt: skip
            for d, v in r["above"]:
                at = x[r["devices"].index(d)]
                ax.plot([at], [v], "o", **RING)
                # said where it is drawn: a value above 100% is no gain but a flaw
                ax.annotate(f"{percent(v)} {FLAW}", (at, v), xytext=(-9, 0),
                            textcoords="offset points", fontsize="xx-small", color="r",
                            ha="right", va="center")  # fmt: skip
            if r["base"] > 1 and r["base"] not in named:  # one colour with its chip's: named
                named.append(r["base"])  # once a base, each a line lower: none overwritten
                ax.annotate(f"from {r['base']}", (x[0], 1.0), xytext=(0, -4 - 7 * len(named)),
                            textcoords="offset points", fontsize="xx-small",
                            color=colour[r["chip"]], ha="center")  # fmt: skip
        ax.axhline(1.0, color="black", linewidth=0.8)
        if ax.get_ylim()[0] <= SCALES_AT:
            ax.axhline(SCALES_AT, **SCALES_LINE)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_title(f"{model}, {placement}{kind}", fontsize="small")
    handles = {chip: _proxy(color=c) for chip, c in colour.items()}
    for k in sorted({r["precision"] for r in series if r["kind"] == "predicted"}):
        handles[f"{k}, predicted (filled)"] = _proxy(color=NEUTRAL, linestyle=style.get(k, ":"))
    if any(r["kind"] == "published" for r in series):
        handles["published (NVIDIA, 1 vs N GPUs), hollow"] = _proxy(color=NEUTRAL, linestyle=":")
    for k, v in marker.items():
        handles[f"{k}/device"] = _proxy(color=NEUTRAL, marker=v, linestyle="")
    if any(r["above"] for r in series):
        handles[ABOVE_IDEAL] = _proxy(marker="o", linestyle="", **RING)
    handles[
        f"{SCALES_AT:.0%}: scales (yes) at or above it at the band's worst (drawn in "
        f"every panel reaching {SCALES_AT + SCALES_NEAR:.0%})"
    ] = _proxy(**SCALES_LINE)
    _legend_below(fig, handles, size="x-small", ncol=6)
    return _finish(fig, path, scaling_title(series))


def scaling_title(series: list[dict[str, Any]]) -> str:
    """The scaling plot's title, saying which efficiencies are predicted and which published:
    the title alone must not pass a prediction off as a measurement."""
    kinds = {r["kind"] for r in series}
    said = "predicted" if kinds == {"predicted"} else (
        "published" if "predicted" not in kinds
        else "predicted (filled), published where a panel says so (hollow)")  # fmt: skip
    # a series starts at 100% on its base: one device, or the "from n" its label says
    return (f"Weak scaling, {said}: the base's step / n devices' step, % of ideal "
            "(each panel its own y-axis)")  # fmt: skip


def prediction_points(table: pd.DataFrame) -> pd.DataFrame:
    """Each published step beside our prediction of it, with its regime as the bands name it."""
    by_id = table.set_index("id")
    e = rows(table, quantity="error_factor", kind="predicted")
    e = e[(e.numerator.map(by_id.kind) == "published")
          & (e.numerator.map(by_id.quantity) == "step_s")]  # fmt: skip
    jax = by_id.note.reindex(e.denominator).astype(str).str.startswith(OURS_LOOP_STEP)
    return pd.DataFrame({
        "published": by_id.value.reindex(e.numerator).to_numpy(float),
        "predicted": by_id.value.reindex(e.denominator).to_numpy(float),
        "regime": ["small programs" if s else "large programs" for s in is_small(e)],
        "jax_loop": jax.to_numpy(),
        "model": e.model.to_numpy(), "platform": e.platform.to_numpy(),
    })  # fmt: skip


# (regime, a published JAX loop?) -> words, its band's `extra`, colour and marker
PUBLISHED_SERIES = {
    ("large programs", False): ("large programs", "against published", "C0", "o"),
    ("small programs", False): ("small programs, other frameworks' loops",
                                "against published", "C1", "s"),
    ("small programs", True): ("small programs, published JAX loops",
                               "against published JAX loops", "C2", "D"),
}  # fmt: skip


def predictions(table: pd.DataFrame, path: Path) -> Path | None:
    """Every published step against our prediction of it, a panel per platform with its
    bands, beside the predictions made before each program first ran on its chip."""
    points = prediction_points(table)
    if len(points) < MIN_POINTS:
        return None
    first = first_run_points(table)
    platforms = sorted(set(points.platform), key=lambda p: (p != "gpu", p))
    n = len(platforms) + bool(len(first))
    fig, axes = pyplot().subplots(1, n, figsize=(5.5 * n, 5), squeeze=False)
    if len(first):
        _first_runs(axes[0][-1], first)
    bands = rows(table, quantity="band")
    for ax, platform in zip(axes[0], platforms, strict=False):
        here = points[points.platform == platform]
        lo, hi = _diagonal(ax, here.published, here.predicted)
        for (regime, jax), g in here.groupby(["regime", "jax_loop"]):
            words, extra, colour, mark = PUBLISHED_SERIES[(regime, bool(jax))]
            label = textwrap.fill(f"{words}: {', '.join(sorted(set(g.model)))}", 62)
            ax.loglog(g.published, g.predicted, mark, color=colour,
                      mfc="none" if jax else colour, label=label)  # fmt: skip
            band = rows(bands, model=regime, extra=extra, device=platform)
            if len(band) and band_drawn(band.iloc[0].n):
                b = band.iloc[0]
                label = f"its band: {answers_lib.band_text(b.value, b.hi, b.n)}"
                _factor_lines(ax, b.value, lo, hi, "--", label, color=colour, linewidth=0.8)
                # its worst too: a point past the median's dashes lies inside a line
                label = f"its band's worst, {value_text(b.hi, 'x')} either way"
                _factor_lines(ax, b.hi, lo, hi, ":", label, color=colour, linewidth=0.8)
            elif len(band):  # said, not drawn
                ax.plot([], [], " ", label=f"its band: n={int(band.iloc[0].n)}, not drawn")
        title = f"{platform.upper()}: published steps against the prediction"
        _square(ax, lo, hi, "published step (s)", "predicted step (s)", title)
    title = ("Below the diagonal: predicted faster; a band's dashes: its median either way, "
             "its dots: its worst")  # fmt: skip
    return _finish(fig, path, title, tight=False)


def first_run_points(table: pd.DataFrame) -> pd.DataFrame:
    """Each step predicted before its program first ran on a chip beside the step measured."""
    p = rows(table, quantity=AS_RUN, extra=BEFORE_FIRST_RUN)
    measured = table.set_index("id").value
    return p.assign(measured=p.numerator.map(measured)).dropna(subset=["measured"])


def _first_runs(ax: Any, points: pd.DataFrame) -> None:
    """The predictions no fit could have tuned, a series per chip, with 2x either way."""
    lo, hi = _diagonal(ax, points.measured, points.value)
    _factor_lines(ax, 2, lo, hi, "k:", "2x", linewidth=0.8)
    for (device, g), mark in zip(points.groupby("device"), "os^D", strict=False):
        ax.loglog(g.measured, g.value.astype(float), mark, mfc="none",
                  label=f"{device} ({len(g)} programs)")  # fmt: skip
    title = "Measured here, predicted before\nthe program first ran on the chip"
    _square(ax, lo, hi, "measured step (s)", "predicted device step (s)", title)


ACCURACY_MARKERS = "osD^v"
ACCURACY_SIZE = 11  # a panel's first run's marker, in points
ACCURACY_SHRINK = 0.75  # each run of a panel a quarter smaller than the one before
# a panel's runs side by side at each epoch, this far apart at most (in epochs): well
# inside half an epoch, so each point stays over its own epoch's tick
ACCURACY_SPREAD = 0.4


def accuracy(table: pd.DataFrame, path: Path) -> Path | None:
    """Test accuracy per epoch in f32, a line per run, a panel per model, data set, batch and
    epoch count; each run its own hollow shape and size, set a little apart so none hides."""
    # devices compared in f32: the precision study's runs answer another question (its page)
    curves = rows(table, quantity="test_accuracy", precision="f32")
    curves = curves[curves.epoch.notna()]
    if not len(curves):
        return None
    curves = curves.assign(epoch=curves.epoch.astype(int), of=curves.epochs.astype(int))
    colour = {d: f"C{i % 10}" for i, d in enumerate(sorted(set(curves.device)))}
    # the panels comparing the most runs first; one device's alone compares none
    panels = sorted(curves.groupby(["dataset", "model", "batch", "of"]),
                    key=lambda kv: (-kv[1].records.nunique(), kv[0]))  # fmt: skip
    alone = ""
    if any(d.device.nunique() > 1 for _, d in panels):
        # a run no other device matched is left to the page, and said so in the title
        left = sum(d.device.nunique() == 1 for _, d in panels)
        alone = (f"\nnot drawn: {left} settings (model, data, batch, epochs) whose curves "
                 "only one device ran (the accuracy page lists them)") if left else ""  # fmt: skip
        panels = [(k, d) for k, d in panels if d.device.nunique() > 1]
    # each panel's y-axis its own, named, clear of its left neighbour's
    fig, axes = pyplot().subplots(1, len(panels), figsize=(4.8 * len(panels), 4), squeeze=False,
                                  gridspec_kw={"wspace": 0.35})  # fmt: skip
    for ax, ((dataset, model, batch, of), d) in zip(axes[0], panels, strict=True):
        runs = sorted(d.groupby("records"), key=lambda kv: (kv[1].device.iloc[0],
                                                            kv[1].extra.max()))  # fmt: skip
        shifts = _side_by_side(len(runs), 0.08, ACCURACY_SPREAD)
        at = {}  # each run's offset, which its device's seeds' spread spans
        for i, ((records, g), shift) in enumerate(zip(runs, shifts, strict=True)):
            g = g.sort_values("epoch")
            first = g.iloc[0]
            seed = f", seed {first.seed}" if first.seed else ""  # seed 0 says nothing
            label = f"{first.precision}, {first.formulation}{seed}"
            label += f" ({first.platform.upper()}: {first.device})"
            at[records] = shift
            k = i % len(ACCURACY_MARKERS)
            ax.plot(g.epoch + shift, g.value, "-", marker=ACCURACY_MARKERS[k],
                    markersize=ACCURACY_SIZE * ACCURACY_SHRINK**k, mfc="none", mew=1.5,
                    color=colour[first.device], linewidth=1, label=label)  # fmt: skip
        # a device's seeds' spread (a gap between devices is judged by it), across its offsets
        for (device, _, _), g in d.groupby(["device", "formulation", "precision"]):
            if (seeds := g.seed.nunique()) > 1:
                spread = g.groupby("epoch").value.agg(["min", "max"])
                offsets = [at[r] for r in set(g.records)]
                x = [e + o for e in spread.index for o in (min(offsets), max(offsets))]
                lo, hi = (spread[k].repeat(2).to_numpy() for k in ("min", "max"))
                ax.fill_between(x, lo, hi, alpha=BAND_ALPHA, color=colour[device], linewidth=0,
                                label=f"{device}: its {seeds} seeds' spread")  # fmt: skip
        title = f"{model} on {dataset}, batch {int(batch)}, {of} epochs"
        cpus = sorted(set(d[d.platform == "cpu"].device))
        if len(cpus) > 1:  # never read as one CPU's runs
            title += f"\n{len(cpus)} CPUs, not one machine: each run's label names its own"
        ax.set_title(title, fontsize="medium")
        ax.set(xlabel="epoch (a panel's runs side by side at each)", xticks=range(1, of + 1))
        _legend_under(ax, 0.17)
    for ax in axes.flat:
        ax.set_ylabel("test accuracy (measured)")
    # its panels' ranges differ by tenths of a point to points: said, never assumed alike
    title = f"Test accuracy per epoch, f32 (each panel its own y-axis){alone}"
    # a panel's second title line clear of the figure's (and of its third, where it has one)
    return _finish(fig, path, title, top=0.76 if alone else 0.8)


PLOTS: dict[str, tuple[str, Callable[[pd.DataFrame, Path], Path | None]]] = {
    "first": ("seed_models.png", seed_models),
    "crossover": ("crossover.png", crossover),
    "batch": ("memory_catsdogs_cnn.png", memory),
    "scaling": ("scaling.png", scaling),
    "predictions": ("predictions.png", predictions),
    "accuracy": ("accuracy.png", accuracy),
}


def draw(table: pd.DataFrame, folder: Path) -> dict[str, str]:
    """Every plot the table can draw, into `folder`: {page: file name}."""
    return {page: name for page, (name, plot) in PLOTS.items() if plot(table, folder / name)}
