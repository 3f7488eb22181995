"""The report's sections for devices not at hand and for predictions: what the real
TPU and GPU compilers say about chips this machine does not have (compile-only records:
memory per chip, whether it fits, a predicted images/s), and how far every measured
step is from its own predicted time.

Three kinds of figure, never in one column: *compiled* (the compiler's memory analysis
of the step, and whether it fits the target's memory), *predicted* (a roofline of the
compiled step at a chip's peak FLOP/s and memory bandwidth) and *measured* (a step
timed on a device at hand). Every heading says which.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from experiments import analysis
from experiments.labels import device_label, model_label, workload_kind
from experiments.tables import binary_bytes, format_table, seconds, si

Record = dict[str, Any]
GIB = analysis.GIB
COMMAND = "python -m experiments.run --study=targets"
PLOT = "targets_memory.png"


def is_compiled(record: Record) -> bool:
    """A compile-only record: compiled for a target, never run."""
    return workload_kind(record) == "compile" or bool(record.get("compiled_not_run"))


def compiled(records: list[Record]) -> list[Record]:
    """The compile-only records (compiled for a target, not run): the latest per cell."""
    chosen: dict[tuple, Record] = {}
    for r in sorted(records, key=lambda r: str(r["env"].get("utc_time") or "")):
        if is_compiled(r):
            w = r["workload"]
            key = (target_name(r), model_label(r), w["batch_size"], w.get("precision", "f32"))
            chosen[key] = r
    return list(chosen.values())


def not_compiled(records: list[Record]) -> list[Record]:
    """Every record but the compile-only ones: what ran on a device at hand."""
    return [r for r in records if not is_compiled(r)]


def target_name(record: Record) -> str:
    return (record.get("target") or {}).get("name") or record["workload"].get("target") or "-"


def _target(record: Record, key: str) -> Any:
    return (record.get("target") or {}).get(key)


def _total(record: Record) -> int | None:
    """Compiled memory per chip, where the compiler answered (ok and oom alike)."""
    if record["status"] not in ("ok", "oom"):
        return None
    return (record.get("memory") or {}).get("total_bytes")


def _fits(record: Record) -> bool:
    return record["status"] == "ok" and record.get("fits") is not False


_gib = binary_bytes


def _predicted_images(record: Record | None) -> str:
    images = ((record or {}).get("prediction") or {}).get("images_per_s")
    return "-" if images is None or record is None or not _fits(record) else f"{images:,.0f}"


def _memory_cell(record: Record | None) -> str:
    if record is None:
        return "-"
    total = _total(record)
    if record["status"] == "ok" and total is not None:
        return _gib(total)
    if record["status"] == "oom" and total is not None:
        return f"{_gib(total)} (over)"
    return record["status"]


def _is_doubling(batch: int, chips: int) -> bool:
    """A batch of the doubling sweep (per chip a power of two), not a bisection step."""
    per_chip = batch // max(chips, 1)
    return per_chip > 0 and batch % max(chips, 1) == 0 and per_chip & (per_chip - 1) == 0


def _by_model(rs: list[Record]) -> dict[str, dict[tuple[str, str], dict[int, Record]]]:
    """model -> (target, precision) -> global batch -> record."""
    grouped: dict[str, dict[tuple[str, str], dict[int, Record]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    for r in rs:
        w = r["workload"]
        grouped[model_label(r)][(target_name(r), w.get("precision", "f32"))][w["batch_size"]] = r
    return grouped


def _row_order(rows: dict[tuple[str, str], dict[int, Record]]) -> list[tuple[str, str]]:
    # TPUs, then GPUs, then anything else; within each, by name, then f32 before bf16.
    def key(item: tuple[str, str]) -> tuple:
        name, precision = item
        first = next(iter(rows[item].values()))
        platform = _target(first, "platform") or ""
        return ({"tpu": 0, "gpu": 1}.get(platform, 2), name, precision != "f32", precision)

    return sorted(rows, key=key)


def largest_fitting(by_batch: dict[int, Record]) -> tuple[Record | None, Record | None]:
    """(the record of the largest batch that fits, the smallest batch above it that
    does not), from one target and precision's records."""
    fit = [b for b, r in by_batch.items() if _fits(r)]
    best = max(fit, default=None)
    over = [b for b, r in by_batch.items() if r["status"] == "oom" and (best is None or b > best)]
    return (
        by_batch[best] if best is not None else None,
        by_batch[min(over)] if over else None,
    )


def _chips(by_batch: dict[int, Record]) -> int:
    return _target(next(iter(by_batch.values())), "chips") or 1


def _matrix(rows, order, per_chip, cell) -> str:
    """Rows: targets; columns: batch per chip (the global batch is that x chips)."""
    body = [
        [name, precision, _chips(rows[(name, precision)])]
        + [cell(rows[(name, precision)].get(b * _chips(rows[(name, precision)]))) for b in per_chip]
        for name, precision in order
    ]
    return format_table(["target", "precision", "chips", *map(str, per_chip)], body, markdown=True)


def _largest_table(rows, order) -> str:
    body = []
    for name, precision in order:
        by_batch = rows[(name, precision)]
        first = next(iter(by_batch.values()))
        best, over = largest_fitting(by_batch)
        body.append(
            [
                name,
                precision,
                _target(first, "chips") or "-",
                _gib(_target(first, "memory_per_chip_bytes")),
                "none" if best is None else best["workload"]["batch_size"],
                _gib(_total(best)) if best else "-",
                "-" if over is None else over["workload"]["batch_size"],
                _gib(_total(over)) if over else "-",
                _predicted_images(best),
            ]
        )
    headers = [
        "target",
        "precision",
        "chips",
        "memory per chip (datasheet)",
        "largest batch that fits (compiled)",
        "its memory per chip (compiled)",
        "smallest batch over (compiled)",
        "its memory per chip (compiled)",
        "images/s at the largest (predicted)",
    ]
    return format_table(headers, body, markdown=True)


def _refusals(rs: list[Record]) -> str:
    failed = sorted(
        (target_name(r), model_label(r), r["workload"]["batch_size"], r.get("message") or "")
        for r in rs
        if r["status"] == "error"
    )
    if not failed:
        return ""
    lines = [f"- {t}, {m}, batch {b}: {msg[:160]}" for t, m, b, msg in failed]
    return "The compiler refused:\n\n" + "\n".join(lines)


def _plot(grouped, out: Path) -> Path:
    models = sorted(grouped)
    cols = min(2, len(models))
    rows_n = (len(models) + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(6.5 * cols, 4.8 * rows_n), squeeze=False)
    for ax, model in zip(axes.flat, models, strict=False):
        rows = grouped[model]
        colors: dict[str, Any] = {}
        capacities: dict[float, list[str]] = defaultdict(list)
        for name, precision in _row_order(rows):
            by_batch = rows[(name, precision)]
            first = next(iter(by_batch.values()))
            chips = _target(first, "chips") or 1
            points = sorted((b // chips, _total(r) / GIB) for b, r in by_batch.items() if _total(r))
            if not points:
                continue
            style = "-" if precision == "f32" else "--"
            line = ax.plot(
                *zip(*points, strict=True),
                style,
                marker="o",
                markersize=3,
                color=colors.get(name),
                label=f"{name} {precision}",
            )[0]
            colors.setdefault(name, line.get_color())
            capacity = _target(first, "memory_per_chip_bytes")
            if capacity and name not in capacities[capacity / GIB]:
                capacities[capacity / GIB].append(name)
        for gib, names in sorted(capacities.items()):
            ax.axhline(gib, color="gray", linestyle=":", linewidth=1)
            ax.annotate(
                ", ".join(names) + f" ({gib:.3g} GiB)",
                (0.01, gib),
                xycoords=("axes fraction", "data"),
                fontsize=6,
                va="bottom",
            )
        ax.set(xscale="log", yscale="log", xlabel="batch per chip", ylabel="GiB per chip")
        # Powers of two on x (the batches a bisection finds would crowd the axis) and
        # plain numbers on y, small ones included.
        ax.xaxis.set_major_locator(LogLocator(base=2))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", labelsize=7, rotation=45)
        ax.set_title(f"{model}: memory per chip (compiled, not run)", fontsize=9)
        ax.legend(fontsize=5, ncol=2)
    for ax in list(axes.flat)[len(models) :]:
        ax.set_visible(False)
    path = out / PLOT
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def targets_section(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Per model: compiled memory per chip and fit, and predicted images/s, per target
    and batch; the largest batch that fits each target; memory against batch, plotted
    with each target's memory as a line."""
    title = "## Devices not at hand (compiled, not run)"
    rs = compiled(records)
    if not rs:
        return f"{title}\n\nNo compile-only records yet (`{COMMAND}` writes them).", []
    grouped = _by_model(rs)
    intro = (
        "Each cell is the train step compiled by the target's own compiler (libtpu for "
        "TPUs, XLA:GPU with the chip's target config for NVIDIA GPUs) on this machine, "
        "placed over the target's chips, and never run. *Compiled*: the compiler's "
        "memory analysis per chip (arguments, outputs and temporaries), and whether it "
        "fits the chip's datasheet memory; `(over)`: compiled, but more than the chip has; "
        "`error`: the compiler refused (listed below). *Predicted*: images/s from a "
        "roofline of the compiled step (its FLOPs at the datasheet peak for the precision "
        "its matmuls run in, its bytes at the datasheet bandwidth, the slower of the two), "
        "a lower bound on step time that no chip was timed against here; the section "
        "after this one measures that method's error wherever a real run exists. The "
        "tables by batch per chip show the doubling sweep (the global batch is the batch "
        "per chip x chips); the largest-batch table, in global batches, also the "
        "bisection between the last fit and the first miss."
    )
    parts = [title, intro]
    for model in sorted(grouped):
        rows = grouped[model]
        order = _row_order(rows)
        per_chip = sorted(
            {
                b // _chips(by_batch)
                for by_batch in rows.values()
                for b in by_batch
                if _is_doubling(b, _chips(by_batch))
            }
        )
        parts += [
            f"### {model}",
            "Memory per chip (compiled), by batch per chip:",
            _matrix(rows, order, per_chip, _memory_cell),
            "Images/s over all chips (predicted: roofline at the datasheet figures), by batch "
            "per chip:",
            _matrix(rows, order, per_chip, _predicted_images),
            "Largest global batch per target (compiled), and its images/s (predicted):",
            _largest_table(rows, order),
        ]
    refused = _refusals(rs)
    if refused:
        parts.append(refused)
    path = _plot(grouped, out)
    parts.append(
        "Memory per chip (compiled) against batch per chip; dotted lines: each target's "
        "memory per chip (datasheet); solid f32, dashed bf16.\n\n"
        f"![memory per chip per target]({path.name})"
    )
    return "\n\n".join(parts), [path]


# --- Predicted vs measured ---------------------------------------------------------------


def _ratio(record: Record, predicted: dict[str, Any] | None) -> float | None:
    step = (predicted or {}).get("step_time_s")
    if not step or record["status"] != "ok":
        return None
    return record["step_time_s"]["median"] / step


def _rates(predicted: dict[str, Any]) -> str:
    peak, rate = predicted.get("peak_tflops_used"), predicted.get("bandwidth_bytes_per_s")
    parts = []
    if peak:
        parts.append(
            f"{si(peak * 1e12, 'FLOP/s')} {predicted.get('peak_precision') or ''} "
            f"{predicted.get('peak_source')}".replace("  ", " ")
        )
    if rate:
        parts.append(f"{si(rate, 'B/s')} {predicted.get('bandwidth_source')}")
    return ", ".join(parts) or "-"


def _chip_key(record: Record) -> tuple:
    w = record["workload"]
    overrides = tuple(sorted((w.get("model_overrides") or {}).items()))
    return w["model"], overrides, w["batch_size"], w.get("precision", "f32")


def _compile_pairs(records: list[Record]) -> dict[tuple, Record]:
    """(chip, chips, workload) -> the compile-only record that predicts it."""
    pairs = {}
    for r in compiled(records):
        if r["status"] == "ok" and (r.get("prediction") or {}).get("step_time_s"):
            pairs[(_target(r, "chip"), _target(r, "chips"), *_chip_key(r))] = r
    return pairs


def _measured_chip(record: Record) -> tuple:
    return ((record.get("mfu") or {}).get("chip"), record["device"]["count"], *_chip_key(record))


def _spread(values: list[float]) -> str:
    if not values:
        return ""
    return (
        f"median {statistics.median(values):.3g}, range {min(values):.3g}-{max(values):.3g} "
        f"over {len(values)} record(s)"
    )


def predicted_measured(records: list[Record]) -> list[Record]:
    """The latest ok measured record per device and cell that carries a prediction."""
    chosen: dict[tuple, Record] = {}
    for r in sorted(not_compiled(records), key=lambda r: str(r["env"].get("utc_time") or "")):
        if r["status"] == "ok" and (r.get("prediction") or {}).get("step_time_s"):
            w = r["workload"]
            key = (device_label(r), w.get("study"), model_label(r), *_chip_key(r), w["strategy"])
            chosen[key] = r
    return list(chosen.values())


def predicted_vs_measured(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Per device: every measured step beside its predicted time, and their ratio."""
    title = "## Predicted vs measured step time"
    rs = predicted_measured(records)
    if not rs:
        return (
            f"{title}\n\nNo measured record carries a prediction yet "
            "(`python -m experiments.run --study=roofline` writes them).",
            [],
        )
    pairs = _compile_pairs(records)
    by_device: dict[str, list[Record]] = defaultdict(list)
    for r in rs:
        by_device[device_label(r)].append(r)
    intro = (
        "Every measured record with a prediction: the step time measured on the device "
        "(median of the record's timed steps, p10-p90) beside the step time predicted "
        "for it by a roofline of the same compiled step, computed in the same run "
        "(`predicted`: from that run's measured matmul ceiling for the step's dtype and "
        "its measured memory bandwidth; `predicted, datasheet`: from the vendor's figures, "
        "where the chip has them; `predicted, target compile`: the compile-only record of "
        "the same workload for the same chip and chip count). `measured / predicted` is "
        "the method's error: at least 1 where the roofline is a true lower bound; the "
        "bound names the side (compute or memory) that sets the prediction."
    )
    parts = [title, intro]
    for device in sorted(by_device):
        group = sorted(
            by_device[device],
            key=lambda r: (
                str(r["workload"].get("study")),
                model_label(r),
                r["workload"]["batch_size"],
                r["workload"].get("precision", "f32"),
            ),
        )
        vendor = any(r.get("prediction_vendor") for r in group)
        paired = {id(r): pairs.get(_measured_chip(r)) for r in group}
        target = any(paired.values())
        rows, ratios = [], []
        for r in group:
            predicted = r["prediction"]
            ratio = _ratio(r, predicted)
            ratios.append(ratio)
            step = r["step_time_s"]
            row = [
                r["workload"].get("study") or "-",
                model_label(r),
                r["workload"]["batch_size"],
                r["workload"].get("precision", "f32"),
                f"{seconds(step['median'])} [{seconds(step['p10'])}-{seconds(step['p90'])}]",
                seconds(predicted["step_time_s"]),
                f"{ratio:.2f}",
                predicted.get("bound") or "-",
                _rates(predicted),
            ]
            if vendor:
                other = r.get("prediction_vendor")
                other_ratio = _ratio(r, other)
                row += [
                    seconds((other or {}).get("step_time_s")),
                    "-" if other_ratio is None else f"{other_ratio:.2f}",
                ]
            if target:
                pair = paired[id(r)]
                pair_prediction = (pair or {}).get("prediction")
                pair_ratio = _ratio(r, pair_prediction)
                row += [
                    seconds((pair_prediction or {}).get("step_time_s")),
                    "-" if pair_ratio is None else f"{pair_ratio:.2f}",
                ]
            rows.append(row)
        headers = [
            "study",
            "model",
            "batch",
            "precision",
            "measured s/step [p10-p90]",
            "predicted s/step",
            "measured / predicted",
            "bound (predicted)",
            "predicted from",
        ]
        if vendor:
            headers += ["predicted s/step, datasheet", "measured / predicted, datasheet"]
        if target:
            headers += ["predicted s/step, target compile", "measured / predicted, target compile"]
        summary = f"measured / predicted: {_spread([x for x in ratios if x is not None])}."
        parts += [f"### {device}", format_table(headers, rows, markdown=True), summary]
    return "\n\n".join(parts), []


# --- Seed 000, answered by the target compilers -------------------------------------------

# Seed 000's devices (analysis.SEED_000_OBSERVED) as the targets table names them.
SEED_000_TARGETS = {"MX150 2 GB": "gpu-mx150", "T4 16 GB": "gpu-t4"}


def seed_000_compiled(records: list[Record]) -> list[dict[str, Any]]:
    """What the seed saw beside what its device's own compiler says, for each of the
    seed's observations with a compile-only record of the seed's model (f32):
    [{reference, target, batch, ran, record, fits, agrees}]."""
    found = {
        (target_name(r), r["workload"]["batch_size"]): r
        for r in compiled(records)
        if r["workload"]["model"] == analysis.SEED_000_MODEL
        and not r["workload"].get("model_overrides")
        and r["workload"].get("precision", "f32") == "f32"
        and r["status"] in ("ok", "oom")
    }
    answers = []
    for reference, batch, ran in analysis.SEED_000_OBSERVED:
        target = SEED_000_TARGETS.get(reference)
        r = found.get((target, batch))
        if r is None or _total(r) is None:
            continue
        fits = _fits(r)
        answers.append(
            {
                "reference": reference,
                "target": target,
                "batch": batch,
                "ran": ran,
                "record": r,
                "fits": fits,
                "agrees": fits == ran,
            }
        )
    return answers


def seed_000_headline(records: list[Record]) -> str:
    """The README's seed-000 sentence, from compile-only records; "" without them."""
    answers = seed_000_compiled(records)
    if not answers:
        return ""
    clauses = []
    for a in answers:
        capacity = _target(a["record"], "memory_per_chip_bytes")
        usable = _target(a["record"], "usable_bytes_per_device")
        room = f"its {_gib(capacity)}"
        if usable and capacity and usable < capacity:  # a GPU: JAX preallocates a share
            room = f"the {_gib(usable)} JAX can use of {room}"
        verdict = "fits in" if a["fits"] else "does not fit in"
        seed = "trained" if a["ran"] else "ran out of memory"
        clauses.append(
            f"batch {a['batch']} needs {_gib(_total(a['record']))} on `{a['target']}`, "
            f"which {verdict} {room} (the seed: {seed}; "
            f"{'agrees' if a['agrees'] else 'disagrees'})"
        )
    return (
        f"Seed 000's `{analysis.SEED_000_MODEL}` (f32), compiled for the seed's GPUs by "
        "XLA:GPU and not run: " + "; ".join(clauses) + "."
    )


# --- Predicted columns for the studies measured here ---------------------------------------


def predicted_crossover(
    records: list[Record], batch: int, precision: str, measured: dict[str, list[Record]]
) -> str:
    """The crossover study's series (one model at one batch over widths, `measured` per
    device at hand) against the targets compiled for the same widths: each target's
    predicted s/step per width, and the width above which it is predicted faster than
    each CPU measured here. "" without such compile-only records."""
    params = {}  # the widths' trainable parameters, as the measured records count them
    for rs in measured.values():
        for r in rs:
            params[_overrides(r)] = r["params"]["trainable"]
    model = next(iter(measured.values()))[0]["workload"]["model"]
    by_target: dict[str, dict[int, float]] = defaultdict(dict)
    for r in compiled(records):
        w = r["workload"]
        step = (r.get("prediction") or {}).get("step_time_s")
        if (
            (w["model"], w["batch_size"], w.get("precision", "f32")) == (model, batch, precision)
            and _fits(r)
            and step
            and _overrides(r) in params
        ):
            by_target[target_name(r)][params[_overrides(r)]] = step
    if not by_target:
        return ""
    targets = sorted(by_target)
    sizes = sorted({p for steps in by_target.values() for p in steps})
    rows = [[f"{p:,}", *[seconds(by_target[t].get(p)) for t in targets]] for p in sizes]
    table = format_table(["params", *[f"{t} (predicted)" for t in targets]], rows, markdown=True)
    verdicts = []
    for device, rs in sorted(measured.items()):
        if rs[0]["device"]["platform"] != "cpu":
            continue
        cpu = sorted((r["params"]["trainable"], r["step_time_s"]["median"]) for r in rs)
        for t in targets:
            point = analysis.crossover_point(cpu, sorted(by_target[t].items()))
            ends = analysis.faster_at_ends(cpu, sorted(by_target[t].items()))
            side = {"A": f"{device} (measured)", "B": f"{t} (predicted)", "tie": "neither"}
            at_ends = "-" if ends is None else f"{side[ends[0]]} / {side[ends[1]]}"
            verdicts.append([device, t, "none" if point is None else f"{point:,.0f}", at_ends])
    text = (
        "Predicted s/step on devices not at hand (the roofline of the step compiled for "
        "each target, not run):\n\n" + table
    )
    if verdicts:
        headers = [
            "A (measured)",
            "B (predicted)",
            "B predicted faster above (params)",
            "faster at smallest / largest",
        ]
        text += "\n\n" + format_table(headers, verdicts, markdown=True)
    return text


def _overrides(record: Record) -> tuple:
    return tuple(sorted((record["workload"].get("model_overrides") or {}).items()))


def predicted_scaling(records: list[Record], measured: list[Record]) -> str:
    """The scaling study's workloads (each model, precision, and weak per-chip or
    strong global batch that `measured` ran) on the compiled targets, grouped by chip
    over chip counts: memory per chip (compiled), step time and images/s (predicted)
    and the predicted efficiency against one chip of the same kind; collectives are in
    the compiled step, counted as the target's compiler counts them. "" without
    compile-only records of those workloads."""
    wanted = set()
    for r in measured:
        w = r["workload"]
        mode = w.get("scaling") or "weak"
        size = w["batch_size"] // r["device"]["count"] if mode == "weak" else w["batch_size"]
        wanted.add((mode, w["model"], _overrides(r), w.get("precision", "f32"), size))
    groups: dict[tuple, dict[int, Record]] = defaultdict(dict)
    for r in compiled(records):
        w = r["workload"]
        chips = _target(r, "chips") or 1
        for mode, size in (("weak", w["batch_size"] // chips), ("strong", w["batch_size"])):
            key = (mode, w["model"], _overrides(r), w.get("precision", "f32"), size)
            if key in wanted and (mode == "strong" or w["batch_size"] % chips == 0):
                groups[(*key, _target(r, "chip"))][chips] = r
    if not groups:
        return ""
    rows = []
    for (mode, model, overrides, precision, _size, chip), by_chips in sorted(
        groups.items(), key=lambda item: tuple(map(str, item[0]))
    ):
        images = {
            n: r["prediction"]["images_per_s"]
            for n, r in by_chips.items()
            if _fits(r) and (r.get("prediction") or {}).get("images_per_s")
        }
        efficiency = analysis.scaling_efficiency(images)
        name = model + "".join(f" {k}={v}" for k, v in overrides)
        for n, r in sorted(by_chips.items()):
            predicted = r.get("prediction") or {}
            rows.append(
                [
                    mode,
                    f"{name} {precision}",
                    chip or "-",
                    target_name(r),
                    n,
                    r["workload"]["batch_size"],
                    _memory_cell(r),
                    seconds(predicted.get("step_time_s")) if _fits(r) else "-",
                    f"{images[n]:,.0f}" if n in images else "-",
                    "-" if n not in efficiency else f"{100 * efficiency[n]:.3g}%",
                ]
            )
    headers = [
        "scaling",
        "model",
        "chip",
        "target",
        "chips",
        "global batch",
        "memory per chip (compiled)",
        "s/step (predicted)",
        "images/s (predicted)",
        "efficiency (predicted)",
    ]
    return (
        "The same workloads compiled for devices not at hand (sharded over each target's "
        "chips, not run): memory per chip as compiled, step time and images/s as the "
        "roofline predicts them, efficiency as above against one chip of the same kind:"
        "\n\n" + format_table(headers, rows, markdown=True)
    )
