"""The report's plots, each a view of the table of figures that answers the question in
its title: measured solid, predicted dashed, bands shaded, a point that does not fit
marked apart, never joined to the points that do; no plot with fewer than three points
along its axis (it is left out)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from experiments.report import answers as answers_lib

MIN_POINTS = 3


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


def _band(ax: Any, x: Any, y: Any, r: pd.DataFrame, color: str) -> None:
    """Shade a predicted curve's held-out band (median factor) where it has one."""
    m = r.band_median.astype(float)
    if m.notna().all() and len(m):
        ax.fill_between(x, y / m, y * m, color=color, alpha=0.15, linewidth=0)


def seed_models(table: pd.DataFrame, path: Path) -> Path | None:
    """One step of each seed model at batch 128, a panel per model: each chip's predicted
    device step and loop step side by side (neither hides the other), against the CPU's
    measured step: the same program (the xla step loop) and its fastest."""
    cpu = answers_lib.reference_cpu(table)
    one = {"batch": 128, "precision": "f32", "placement": "single"}
    measured = answers_lib.rows(
        table, quantity="step_s", kind="measured", device=cpu, framework="jax", extra="-", **one
    )
    predicted = answers_lib.rows(
        table,
        quantity=["device_step_s", "loop_step_s"],
        kind="predicted",
        devices=1,
        extra="-",
        **one,
    )
    devices = sorted(set(predicted.device))
    if len(devices) < MIN_POINTS:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(10, 6.5), sharex=True, squeeze=False)
    x = range(len(devices))
    for ax, model in zip(axes.flat, answers_lib.SEED_MODELS, strict=True):
        for quantity, shift, face in (
            ("device_step_s", -0.15, "C0"),
            ("loop_step_s", 0.15, "none"),
        ):
            p = predicted[(predicted.model == model) & (predicted.quantity == quantity)]
            p = p.set_index("device").reindex(devices)
            ax.plot([i + shift for i in x], p.value, "o", color="C0", mfc=face)
        m = measured[measured.model == model]
        like = m[(m.formulation == "xla") & (m.loop == "step")]
        if len(like):
            ax.axhline(like.value.iloc[0], color="C3", linewidth=1.2)
        if len(m):
            ax.axhline(m.value.min(), color="C3", linewidth=1.2, linestyle=":")
        ax.set_yscale("log")
        ax.set_title(model, fontsize="small")
    for ax in axes[-1]:
        ax.set_xticks(list(x), devices, rotation=45, ha="right")
    for ax in axes[:, 0]:
        ax.set_ylabel("seconds per step (log)")
    handles = [
        plt.Line2D([], [], color="C0", marker="o", linestyle="", label="predicted device step"),
        plt.Line2D([], [], color="C0", marker="o", mfc="none", linestyle="",
                   label="predicted loop step"),
        plt.Line2D([], [], color="C3", label=f"{cpu}, xla step loop (measured)"),
        plt.Line2D([], [], color="C3", linestyle=":", label=f"{cpu}, its fastest (measured)"),
    ]  # fmt: skip
    fig.legend(handles=handles, fontsize="small", ncol=2, loc="upper center",
               bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    fig.suptitle("One train step of each seed model at batch 128, f32: each chip against the CPU")
    fig.tight_layout()
    return _save(fig, path)


def crossover(table: pd.DataFrame, path: Path) -> Path | None:
    """MLP step time against trainable parameters: the CPU measured, the T4 predicted."""
    c, g = answers_lib.crossover(table, answers_lib.reference_cpu(table))
    if len(c) < MIN_POINTS or len(g) < MIN_POINTS:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(
        c.params,
        c.value,
        "o-",
        color="C0",
        label=f"{c.device.iloc[0]}, measured ({c.formulation.iloc[0]} formulation)",
    )
    ax.plot(
        g.params,
        g.value,
        "s--",
        color="C1",
        label=f"T4, predicted {g.quantity.iloc[0].removesuffix('_s').replace('_', ' ')}",
    )
    _band(ax, g.params.astype(float), g.value.astype(float), g, "C1")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("trainable parameters (MLP width 32 to 8192)")
    ax.set_ylabel("seconds per step, batch 128")
    ax.set_title("Seed 002: above how many parameters does the GPU win?")
    ax.legend(fontsize="small")
    return _save(fig, path)


def memory(table: pd.DataFrame, path: Path, model: str = "catsdogs_cnn") -> Path | None:
    """Compiled memory per batch on each GPU target, the memory JAX can use drawn as a
    line, batches that do not fit marked x; identical series drawn once, every chip
    named."""
    from jaxcnn import targets

    mem = answers_lib.rows(
        table,
        quantity="memory_bytes",
        model=model,
        precision="f32",
        placement="single",
        platform="gpu",
    )
    fits = answers_lib.rows(
        table, quantity="fits", model=model, precision="f32", placement="single", platform="gpu"
    )
    mem = mem.merge(
        fits[["device", "batch", "value"]], on=["device", "batch"], suffixes=("", "_fits")
    )
    series: dict[tuple, list[str]] = {}
    for device, g in mem.groupby("device"):
        g = g.sort_values("batch")
        series.setdefault(tuple(zip(g.batch, g.value, g.value_fits, strict=True)), []).append(
            device
        )
    series = {k: v for k, v in series.items() if len(k) >= MIN_POINTS}
    if not series:
        return None
    plt = pyplot()
    panels = sorted(series.items(), key=lambda kv: kv[1])
    cols = min(4, len(panels))
    fig, axes = plt.subplots(-(-len(panels) // cols), cols, figsize=(3 * cols, 5), squeeze=False,
                             sharex=True, sharey=True)  # fmt: skip
    for ax, (points, devices) in zip(axes.flat, panels, strict=False):
        b = [p[0] for p in points]
        gib = [p[1] / 2**30 for p in points]
        ok = [p[2] == 1 for p in points]
        ax.plot([x for x, k in zip(b, ok, strict=True) if k],
                [y for y, k in zip(gib, ok, strict=True) if k], "o-", color="C0")  # fmt: skip
        ax.plot([x for x, k in zip(b, ok, strict=True) if not k],
                [y for y, k in zip(gib, ok, strict=True) if not k], "x", color="C3",
                markersize=9)  # fmt: skip
        for d in devices:
            limit = _usable_gib(d) if d in targets.TARGETS else None
            if limit:
                ax.axhline(limit, color="C2", linestyle=":", linewidth=1)
        ax.set_title(", ".join(d.removeprefix("gpu-") for d in devices), fontsize="small")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
    for ax in axes.flat[len(panels) :]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("batch")
    for ax in axes[:, 0]:
        ax.set_ylabel("GiB per device")
    fig.suptitle(f"{model}: compiled memory per batch (dotted: what JAX can use; x: does not fit)")
    fig.tight_layout()
    return _save(fig, path)


def _usable_gib(target: str) -> float | None:
    from jaxcnn import targets
    from jaxcnn.perf import chips

    t = targets.TARGETS[target]
    total = chips.fact(t.kind, "memory_bytes")
    share = targets.USABLE_FRACTION.get(t.platform)
    return total * share / 2**30 / t.devices_per_chip if total and share else None


def scaling(table: pd.DataFrame, path: Path) -> Path | None:
    """Predicted weak-scaling efficiency against the device count, one panel per model:
    each series starts at the device count it is measured against (100%), colour per
    chip, line per precision, marker per per-device batch; the y-axis holds every point."""
    from jaxcnn import targets

    # the compiled curves (published pairs and their predictions are the band's)
    s = answers_lib.rows(table, quantity="scaling_efficiency", selection="equal-batch")
    if s.devices.nunique() < MIN_POINTS - 1:  # the base is the point every curve starts at
        return None
    base = table.set_index("id").devices
    s = s.assign(
        chip=[targets.TARGETS[d].chip if d in targets.TARGETS else d for d in s.device],
        per=s.batch // s.devices,
        base=[int(base[i]) for i in s.numerator],
    )
    colour = {chip: f"C{i % 10}" for i, chip in enumerate(sorted(s.chip.unique()))}
    marker = {b: "os^Dv<>p"[i % 8] for i, b in enumerate(sorted(s.per.unique()))}
    style = {"f32": "-", "bf16": "--"}
    models = sorted(s.model.unique())
    plt = pyplot()
    cols = min(4, len(models))
    rows_ = -(-len(models) // cols)
    fig, axes = plt.subplots(rows_, cols, figsize=(3.2 * cols, 2.6 * rows_), squeeze=False,
                             sharex=True, sharey=True)  # fmt: skip
    for ax, model in zip(axes.flat, models, strict=False):
        m = s[s.model == model]
        for (chip, precision, per, b), g in m.groupby(["chip", "precision", "per", "base"]):
            g = g.sort_values("devices")
            ax.plot([b, *g.devices], [1.0, *g.value], style.get(precision, ":"),
                    marker=marker[per], color=colour[chip])  # fmt: skip
            above = g[g.flag.notna()]
            ax.plot(above.devices, above.value, "r*", markersize=12)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_title(model, fontsize="small")
        ax.set_xscale("log", base=2)
    for ax in axes.flat[len(models) :]:
        ax.axis("off")
    low = min(0.9, float(s.value.min()) - 0.05)
    axes[0][0].set_ylim(low, max(1.05, float(s.value.max()) + 0.03))
    for ax in axes[:, 0]:
        ax.set_ylabel("efficiency")
    for ax in axes[-1]:
        ax.set_xlabel("devices")
    handles = [plt.Line2D([], [], color=c, label=chip) for chip, c in colour.items()]
    handles += [plt.Line2D([], [], color="k", linestyle=v, label=k) for k, v in style.items()]
    handles += [plt.Line2D([], [], color="k", marker=v, linestyle="", label=f"{k}/device")
                for k, v in marker.items()]  # fmt: skip
    handles.append(plt.Line2D([], [], color="r", marker="*", linestyle="", label="above ideal"))
    fig.legend(handles=handles, fontsize="x-small", ncol=6, loc="upper center",
               bbox_to_anchor=(0.5, 0.0))  # fmt: skip
    fig.suptitle("Data parallelism, predicted weak scaling: the base's step / n devices' step")
    fig.tight_layout()
    return _save(fig, path)


def predictions(table: pd.DataFrame, path: Path) -> Path | None:
    """Every published step against our prediction of the same step: on the diagonal is
    exact, the dashed lines are 1.5x either way."""
    e = answers_lib.rows(table, quantity="error_factor")
    e = e[e.kind == "predicted"]
    e = e[e.numerator.map(table.set_index("id").kind) == "published"]
    if len(e) < MIN_POINTS:
        return None
    by_id = table.set_index("id")
    pub = by_id.loc[list(e.numerator)].value.to_numpy(float)
    pred = by_id.loc[list(e.denominator)].value.to_numpy(float)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    small = e.model.isin(["mnist_cnn", "mlp", "lenet5", "lenet5_keras", "catsdogs_cnn"]).to_numpy()
    ax.loglog(pub[~small], pred[~small], "o", label="large programs (ResNet-50)")
    ax.loglog(pub[small], pred[small], "s", label="small programs (the seeds')")
    lo, hi = min(pub.min(), pred.min()) / 2, max(pub.max(), pred.max()) * 2
    ax.plot([lo, hi], [lo, hi], "k-", linewidth=1)
    for f in (1.5, 1 / 1.5):
        ax.plot([lo, hi], [lo * f, hi * f], "k--", linewidth=0.7)
    ax.set_xlabel("published step (s)")
    ax.set_ylabel("predicted step (s)")
    ax.set_title("Published steps against the prediction")
    ax.legend(fontsize="small")
    return _save(fig, path)


def accuracy(table: pd.DataFrame, path: Path) -> Path | None:
    """Test accuracy per epoch, one line per run (model, data, precision, device, how it
    ran): the same model should reach the same accuracy on every device."""
    curves = table[
        (table.quantity == "test_accuracy") & table.extra.astype(str).str.startswith("epoch ")
    ]
    if not len(curves):
        return None
    curves = curves.assign(epoch=curves.extra.str.extract(r"epoch (\d+)")[0].astype(int))
    plt = pyplot()
    fig, axes = plt.subplots(1, curves.dataset.nunique(), figsize=(10, 4), squeeze=False)
    for ax, (dataset, d) in zip(axes[0], curves.groupby("dataset"), strict=True):
        for i, (_, g) in enumerate(d.groupby("records")):
            g = g.sort_values("epoch")
            first = g.iloc[0]
            epochs = first.extra.split(" of ")[1]
            label = (
                f"{first.model}, batch {first.batch}, {first.precision}, {first.formulation}, "
                f"{epochs} epochs ({first.device})"
            )
            ax.plot(g.epoch, g.value, "o-", color=f"C{i % 10}", label=label)
        ax.set_title(f"{dataset}: test accuracy per epoch (measured)")
        ax.set_xlabel("epoch")
        ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.15))
    axes[0][0].set_ylabel("test accuracy")
    return _save(fig, path)


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
    drawn = {}
    for page, (name, plot) in PLOTS.items():
        if plot(table, folder / name) is not None:
            drawn[page] = name
    return drawn
