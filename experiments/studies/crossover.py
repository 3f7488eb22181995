"""When does the accelerator beat the CPU?

Seed 002: a dense net on MNIST, time vs trainable parameters; the GPU is slower
for small nets. `mlp` 784-n-n-10 (dropout 0.2) for n = 32, 64, ..., 8192 (n=4096
is 20,037,642 params), batch 128, timing only (compile + 20 timed steps, no
training) on synthetic 28x28 data: step time vs params per device. The report finds
the crossover from two devices' records.

Command: python -m experiments.run --study=crossover --device=gpu
Sizes: full everywhere. Smoke: n = 8, 32, batch 16.
Expected: CPU ~40 s (n=8192 is ~74M params, 0.45 s/step); smoke ~3 s;
GPU/TPU < 1 min (a guess).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments import analysis, predictions
from experiments.labels import device_label
from experiments.studies import bench
from experiments.studies._common import (
    Curve,
    curve,
    draw_curve,
    field,
    image,
    in_study,
    is_cpu,
    legend_below,
    log_axes,
    measured_on,
    median_step,
    no_accelerator,
    not_measured,
    on_accelerator,
    only_ok,
    pyplot,
    ran_as,
    same_step,
    save,
    section,
    when,
)
from experiments.studies.base import Context, Record, Study, Summary
from experiments.studies.targets import (
    compiled,
    fits_chip,
    prediction,
    prediction_method,
    target_name,
)
from experiments.tables import markdown_table, seconds
from experiments.workload import Workload

CROSSOVER_WIDTHS = tuple(2**i for i in range(5, 14))  # 32 .. 8192


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    widths, batch, timing = CROSSOVER_WIDTHS, 128, 20
    if ctx.smoke:
        widths, batch, timing = (8, 32), 16, 3
    return [
        Workload(
            model="mlp",
            model_overrides={"width": n},
            dataset="synthetic",
            batch_size=batch,
            epochs=0,
            timing_steps=timing,
            study="crossover",
            num_devices=1,
        )
        for n in widths
    ]


def _crossover_series(records: list[Record]) -> dict[tuple, dict[str, list[Record]]]:
    """{(model, dataset, batch, precision): {device: records over widths}}."""
    series: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in only_ok(in_study(records, "crossover")):
        if field(r, "params", "trainable"):
            w = r["workload"]
            key = (w["model"], w.get("dataset"), w["batch_size"], w.get("precision", "f32"))
            series[key][device_label(r)].append(r)
    return series


def _points(rs: list[Record]) -> list[analysis.Point]:
    return sorted((r["params"]["trainable"], median_step(r)) for r in rs)


def _by_params(table: dict[str, dict[int, float]], names: list[str]) -> list[list[str]]:
    """A row per parameter count: its s/step under each name."""
    params = sorted({p for steps in table.values() for p in steps})
    return [[f"{p:,}", *[seconds(table[n].get(p)) for n in names]] for p in params]


def _verdict(
    a: list[analysis.Point],
    b: list[analysis.Point],
    names: tuple[str, str],
    sides: tuple[str, str],
) -> tuple[list[str], float | None]:
    """(the table row for A against B, the crossover point if there is one)."""
    point = analysis.crossover_point(a, b)
    ends = analysis.faster_at_ends(a, b)
    side = {"A": sides[0], "B": sides[1], "tie": "neither"}
    at_ends = "-" if ends is None else f"{side[ends[0]]} / {side[ends[1]]}"
    return [*names, "none" if point is None else f"{point:,.0f}", at_ends], point


def crossover_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Seed 002: step time vs trainable parameters, and where the accelerator wins."""
    series = _crossover_series(records)
    if not series:
        return "", []
    parts = []
    for (model, dataset, batch, precision), by_device in sorted(series.items()):
        name = f"{model}, {dataset}, batch {batch}, {precision}"
        points = {d: _points(rs) for d, rs in by_device.items()}
        devices = sorted(by_device)
        rows = _by_params({d: dict(p) for d, p in points.items()}, devices)
        parts.append(f"{name}:\n\n" + markdown_table(["params", *devices], rows))
        cpus = [d for d in devices if is_cpu(by_device[d][0])]
        verdicts = [
            _verdict(points[a], points[b], (a, b), (a, b))[0]
            for a in cpus
            for b in (d for d in devices if d not in cpus)
        ]
        if verdicts:
            headers = ["A", "B", "B faster above (params)", "faster at smallest / largest"]
            parts.append(markdown_table(headers, verdicts))
            parts.append(_speedups(records, by_device, cpus))
        parts.append(predicted_crossover(records, by_device))
    curves, crossings = crossover_curves(records)
    path = save(crossover_figure(curves, crossings), out / "study_crossover.png")
    intro = (
        "Step time vs trainable parameters per device (seed 002). The crossover is where "
        "the accelerator's step time drops below the CPU's for good: log-log linear "
        "interpolation between the two bracketing widths both sides have a figure for "
        "(each side labelled: *measured*, a step timed on a device at hand, or "
        "*predicted*, the step compiled for a chip not at hand)."
    )
    plot = f"{image('crossover', path)}\n\n{crossover_caption(curves, crossings)}"
    return section("Study: crossover", intro, *parts, plot), [path]


@dataclasses.dataclass(frozen=True)
class Crossing:
    """Where curve `faster` passes curve `slower` (a CPU's, measured) for good, in
    trainable parameters; `at` None where it does not, and `why` says why."""

    slower: str
    faster: str
    at: float | None
    why: str = ""


def crossover_curves(records: list[Record]) -> tuple[list[Curve], list[Crossing]]:
    """What the crossover plot draws: each device's measured step time over trainable
    parameters (one curve per way it ran: formulation and loop), each target's predicted
    one (per-kernel model of the same widths' steps compiled for it; a roofline bound is
    no prediction and is left out), and each CPU curve's crossing with every other."""
    curves: list[Curve] = []
    crossings: list[Crossing] = []
    series = _crossover_series(records)
    for key, by_device in sorted(series.items()):
        suffix = "" if len(series) == 1 else f" ({', '.join(map(str, key))})"
        cpus, others = [], []
        for device, rs in sorted(by_device.items()):
            by_run: dict[str, list[Record]] = defaultdict(list)
            for r in rs:
                by_run[ran_as(r)].append(r)
            for run, runs in sorted(by_run.items()):
                c = curve(f"{device} measured ({run}){suffix}", _points(runs))
                (cpus if is_cpu(runs[0]) else others).append(c)
        by_target, methods, _ = _predicted_series(records, by_device)
        for target, steps in sorted(by_target.items()):
            if methods[target] == "per-kernel":
                others.append(curve(f"{target} predicted{suffix}", steps.items(), True))
        curves += cpus + others
        crossings += [_crossing(a, b) for a in cpus for b in others]
    return curves, crossings


def _crossing(cpu: Curve, other: Curve) -> Crossing:
    """Where `other` passes the CPU's curve for good, or why it does not."""
    at = analysis.crossover_point(cpu.points, other.points)
    if at is not None:
        return Crossing(cpu.label, other.label, at)
    ends = analysis.faster_at_ends(cpu.points, other.points)
    why = {
        None: "has no width in common with",
        ("B", "B"): "is faster at every width than",
        ("A", "A"): "is slower at every width than",
    }.get(ends, "is faster at the smallest width only than")
    return Crossing(cpu.label, other.label, None, why)


def crossover_figure(curves: list[Curve], crossings: list[Crossing]) -> Any:
    """The measured curves solid, the predicted dashed, each crossing a dotted line."""
    fig, ax = pyplot().subplots(figsize=(8, 6))
    for c in curves:
        draw_curve(ax, c)
    for crossing in crossings:
        if crossing.at is not None:
            ax.axvline(crossing.at, color="gray", linestyle=":", linewidth=1)
            ax.annotate(
                f"crossing: {crossing.at:,.0f}",
                (crossing.at, 0.02),
                xycoords=("data", "axes fraction"),
                rotation=90,
                fontsize="x-small",
                ha="right",
            )
    title = "Step time vs trainable parameters (solid: measured, dashed: predicted)"
    log_axes(ax, "trainable parameters", "s / step (median)", title, legend=None)
    legend_below(ax, columns=1)
    return fig


def crossover_caption(curves: list[Curve], crossings: list[Crossing]) -> str:
    """The plot's line: what solid and dashed are, and each crossing or why there is none."""
    said = [
        f"{c.faster} is faster than {c.slower} above {c.at:,.0f} params"
        if c.at is not None
        else f"no crossing: {c.faster} {c.why} {c.slower}"
        for c in crossings
    ]
    if not crossings:
        said = ["no accelerator curve, measured or predicted, to cross the CPU's"]
    return (
        "Solid: measured; dashed, hollow squares: predicted (the per-kernel model of the "
        "step compiled for the target, never run); dotted: a crossing. "
        + f"Crossings: {'; '.join(said)}."
    )


def _speedups(records: list[Record], by_device: dict[str, list[Record]], cpus: list[str]) -> str:
    """Per width, each accelerator's speedup per step over each CPU measured, and over
    the CPU at its best for that step (bench.RATIOS_NOTE)."""
    rows = []
    for a in cpus:
        base = {r["params"]["trainable"]: r for r in by_device[a]}
        for b in (d for d in sorted(by_device) if d not in cpus):
            for r in sorted(by_device[b], key=lambda r: r["params"]["trainable"]):
                cpu = base.get(r["params"]["trainable"])
                if cpu is not None:
                    speedups = bench.speedups(records, cpu, r)
                    rows.append([f"{r['params']['trainable']:,}", a, b, *speedups])
    headers = ["params", "A (CPU)", "B", "B over A like for like", "over the CPU at its best"]
    return f"{bench.RATIOS_NOTE}\n\n" + markdown_table(headers, rows)


def _predicted_series(
    records: list[Record], measured: dict[str, list[Record]]
) -> tuple[dict[str, dict[int, float]], dict[str, str], dict[str, dict[int, dict]]]:
    """({target: {trainable params: predicted s/step}}, {target: how it was predicted},
    {target: {trainable params: the prediction}}) for the widths of `measured` (one
    series' records per device at hand)."""
    # The widths' trainable parameters, as the measured records count them, by their step
    # (one model, batch and precision: the series').
    params = {same_step(r): r["params"]["trainable"] for rs in measured.values() for r in rs}
    by_target: dict[str, dict[int, float]] = defaultdict(dict)
    blocks: dict[str, dict[int, dict]] = defaultdict(dict)
    methods: dict[str, str] = {}
    for r in sorted(compiled(records), key=when):  # a newer compile of a cell wins
        block = prediction(r)
        step = block.get("step_time_s")
        if fits_chip(r) and step and same_step(r) in params:
            by_target[target_name(r)][params[same_step(r)]] = step
            blocks[target_name(r)][params[same_step(r)]] = block
            methods[target_name(r)] = prediction_method(r)
    return by_target, methods, blocks


def host_words(block: dict) -> str:
    """The host's side of a predicted step in words: its total, its dispatch and the
    batch's copy, and what no figure exists for."""
    if "host_s" not in block:
        return "the kernels alone (no host side: a roofline bound)"
    left = block.get("host_left_out") or []
    words = (
        f"{seconds(block['host_s'])} of it the host's (dispatch {seconds(block['dispatch_s'])}, "
        f"the batch's copy {seconds(block['transfer_s'])})"
    )
    return words + (f"; left out: {', '.join(left)}" if left else "")


def _predicted_answer(records: list[Record], measured: dict[str, list[Record]]) -> list[str]:
    """One line per target compiled for a series' widths: its predicted s/step over them
    and where it is predicted to pass each CPU measured, or why nowhere."""
    by_target, methods, blocks = _predicted_series(records, measured)
    lines = []
    for target, steps in sorted(by_target.items()):
        ours = sorted(steps.items())
        (p0, t0), (p1, t1) = ours[0], ours[-1]
        line = (
            f"- {target}, predicted ({methods[target]}; the step compiled for it, never run): "
            f"{seconds(t0)}/step at {p0:,} params ({host_words(blocks[target][p0])}) to "
            f"{seconds(t1)} at {p1:,}"
        )
        if methods[target] != "per-kernel":
            lines.append(line + "; a roofline bound only, from which no crossover is read")
            continue
        for device, rs in sorted(measured.items()):
            if not is_cpu(rs[0]):
                continue
            point = analysis.crossover_point(_points(rs), ours)
            ends = analysis.faster_at_ends(_points(rs), ours)
            if point is not None:
                line += f"; predicted faster than {device} above {point:,.0f} params"
            elif ends == ("B", "B"):
                line += (
                    f"; predicted faster than {device} at the smallest width and the "
                    "largest alike, so no crossover is predicted for jaxcnn's step, "
                    "host side included; where seed 002 saw the GPU lose for small "
                    "networks, its framework spent more per step on the host than "
                    "jaxcnn's jitted step is predicted to (published small-model epochs: "
                    "the roofline page's held-out rows)"
                )
            elif ends == ("A", "A"):
                line += f"; predicted slower than {device} at the smallest width and the largest"
        lines.append(line)
    return lines


def predicted_crossover(records: list[Record], measured: dict[str, list[Record]]) -> str:
    """The crossover study's series (one model at one batch over widths, `measured` per
    device at hand) against the targets compiled for the same widths: each target's
    predicted s/step per width, and the width above which it is predicted faster than
    each CPU measured here. "" without such compile-only records."""
    by_target, methods, _ = _predicted_series(records, measured)
    if not by_target:
        return ""
    targets = sorted(by_target)
    headers = ["params", *[f"{t} (predicted: {methods[t]})" for t in targets]]
    text = (
        "Predicted s/step on devices not at hand (the step compiled for each target, not "
        "run: its kernels and the host's side of each step, a jitted call's dispatch as "
        f"measured here and the batch's copy over the chip's host link; "
        f"{predictions.BOUND_WORDS}):\n\n" + markdown_table(headers, _by_params(by_target, targets))
    )
    verdicts = [
        _verdict(
            _points(rs),
            sorted(by_target[t].items()),
            (device, t),
            (f"{device} (measured)", f"{t} (predicted)"),
        )[0]
        for device, rs in sorted(measured.items())
        if is_cpu(rs[0])
        for t in targets
        if methods[t] == "per-kernel"  # a bound on one side bounds no crossover
    ]
    if verdicts:
        headers = ["A (measured)", "B (predicted)", "B predicted faster above (params)"]
        headers.append("faster at smallest / largest")
        text += "\n\n" + markdown_table(headers, verdicts)
    return text


def crossover_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Where an accelerator's step drops below the CPU's, measured; else the CPU's
    range over model size."""
    series = _crossover_series(records)
    if not series:
        return "", []
    lines = []
    for (model, dataset, batch, precision), by_device in sorted(series.items()):
        for device, rs in sorted(by_device.items()):
            (p0, t0), (p1, t1) = _points(rs)[0], _points(rs)[-1]
            lines.append(
                f"- {model}, {dataset}, batch {batch}, {precision}, measured on {device}: "
                f"{seconds(t0)}/step at {p0:,} params to {seconds(t1)} at {p1:,}"
            )
        lines += _predicted_answer(records, by_device)
    measured = any(on_accelerator(r) for d in series.values() for rs in d.values() for r in rs)
    note = "" if measured else no_accelerator("crossover")
    return "\n\n".join(p for p in ("\n".join(lines), note) if p), []


CROSSOVER_TARGET = "gpu-t4"  # the GPU the question is asked of where none ran: the seeds'


def crossover_summary(records: list[Record]) -> list[Summary]:
    """Seed 002: above how many trainable parameters the GPU beats the CPU: measured
    where a GPU ran the widths, else the T4's predicted steps against the CPU's."""
    question = "Above how many trainable parameters does a GPU beat the CPU?"
    series = _crossover_series(records)
    for (model, _, batch, precision), by_device in sorted(series.items()):
        cpus = {d: rs for d, rs in by_device.items() if is_cpu(rs[0])}
        if not cpus:
            continue
        cpu_name, cpu_rs = sorted(cpus.items())[0]
        a = _points(cpu_rs)
        step = f"{model}, batch {batch}, {precision}"
        ran = {d: rs for d, rs in by_device.items() if not is_cpu(rs[0])}
        if ran:
            gpu, rs = sorted(ran.items())[0]
            b, source = _points(rs), f"{measured_on(rs)}; CPU {measured_on(cpu_rs)}"
            sides = f"{gpu} (measured)"
        else:
            by_target, methods, blocks = _predicted_series(records, {cpu_name: cpu_rs})
            steps = by_target.get(CROSSOVER_TARGET)
            if not steps or methods[CROSSOVER_TARGET] != "per-kernel":
                command = (
                    f"python -m experiments.run --study=targets --target={CROSSOVER_TARGET} "
                    f"--model={model}"
                )
                answer = f"{step}: CPU measured, no {CROSSOVER_TARGET} prediction: `{command}`"
                return [Summary("002", question, answer, measured_on(cpu_rs), "crossover.md")]
            b = sorted(steps.items())
            largest = blocks[CROSSOVER_TARGET][b[-1][0]]
            band = predictions.band_label(largest, "gpu")
            source = f"{CROSSOVER_TARGET} {band}; CPU {measured_on(cpu_rs)}"
            sides = f"{CROSSOVER_TARGET} (predicted)"
        point = analysis.crossover_point(a, b)
        ends = analysis.faster_at_ends(a, b)
        (p0, ta), (p1, _) = a[0], a[-1]
        tb = dict(b).get(p0)
        if point is not None:
            verdict = f"{sides} faster above {point:,.0f} params"
        elif ends == ("B", "B"):
            verdict = f"{sides} faster at every width, so no crossover"
        elif ends == ("A", "A"):
            verdict = "the CPU faster at every width, so no crossover"
        else:
            verdict = "no single crossover"
        at_small = f" ({seconds(tb)} vs the CPU's {seconds(ta)}/step at {p0:,})" if tb else ""
        answer = f"{step}, {p0:,} to {p1:,} params: {verdict}{at_small}"
        return [Summary("002", question, answer, source, "crossover.md")]
    return [Summary("002", question, not_measured("crossover", "cpu"), "-", "crossover.md")]


STUDY = Study(
    "crossover",
    workloads=workloads,
    sections=(crossover_study,),
    question="When does the accelerator beat the CPU, by trainable parameters? (seed 002)",
    answer=crossover_answer,
    summary=crossover_summary,
)
