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
    """One step of each seed model at batch 128: this CPU measured, each chip predicted."""
    cpu = answers_lib.reference_cpu(table)
    models = ["lenet5_keras", "mnist_cnn", "mlp", "catsdogs_cnn"]
    measured = answers_lib.rows(
        table,
        quantity="step_s",
        kind="measured",
        device=cpu,
        batch=128,
        precision="f32",
        formulation="xla",
        loop="step",
        framework="jax",
        placement="single",
        extra="-",
    )
    predicted = answers_lib.rows(
        table,
        quantity="device_step_s",
        kind="predicted",
        batch=128,
        precision="f32",
        placement="single",
        devices=1,
    )
    loops = answers_lib.rows(
        table,
        quantity="loop_step_s",
        kind="predicted",
        batch=128,
        precision="f32",
        placement="single",
        devices=1,
    )
    devices = sorted(set(predicted.device))
    if len(devices) < MIN_POINTS:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for i, model in enumerate(models):
        p = predicted[predicted.model == model].set_index("device").reindex(devices)
        # chips are categories: markers only, a line between two chips would mean nothing
        ax.plot(devices, p.value, "o", label=f"{model} (predicted device step)", color=f"C{i}")
        loop = loops[loops.model == model].set_index("device").reindex(devices)
        if loop.value.notna().any():
            ax.plot(
                devices,
                loop.value,
                "o",
                mfc="none",
                color=f"C{i}",
                label=f"{model} (predicted loop step)",
            )
        c = measured[measured.model == model]
        if len(c):
            ax.axhline(
                c.value.iloc[0],
                color=f"C{i}",
                linewidth=1.2,
                label=f"{model} on the CPU (measured, xla step loop)",
            )
    ax.set_yscale("log")
    ax.set_ylabel("seconds per step, batch 128 (log)")
    ax.set_title(f"One train step per chip (predicted, dots) against {cpu} (measured, lines)")
    ax.tick_params(axis="x", rotation=45)
    ax.legend(fontsize="x-small", ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.28))
    return _save(fig, path)


def crossover(table: pd.DataFrame, path: Path) -> Path | None:
    """MLP step time against trainable parameters: the CPU measured, the T4 predicted."""
    c, g = answers_lib.crossover(table, answers_lib.reference_cpu(table))
    if len(c) < MIN_POINTS or len(g) < MIN_POINTS:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(c.params, c.value, "o-", color="C0", label=f"CPU, measured ({c.device.iloc[0]})")
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
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (points, devices) in enumerate(sorted(series.items(), key=lambda kv: kv[1])):
        b = [p[0] for p in points]
        gib = [p[1] / 2**30 for p in points]
        ok = [p[2] == 1 for p in points]
        name = ", ".join(d.removeprefix("gpu-") for d in devices)
        ax.plot(
            [x for x, k in zip(b, ok, strict=True) if k],
            [y for y, k in zip(gib, ok, strict=True) if k],
            "o-",
            color=f"C{i}",
            label=name,
        )
        ax.plot(
            [x for x, k in zip(b, ok, strict=True) if not k],
            [y for y, k in zip(gib, ok, strict=True) if not k],
            "x",
            color=f"C{i}",
            markersize=9,
        )
        usable = {targets.TARGETS[d].name: d for d in devices if d in targets.TARGETS}
        for d in usable:
            limit = _usable_gib(d)
            if limit:
                ax.axhline(limit, color=f"C{i}", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch")
    ax.set_ylabel("compiled memory per device (GiB)")
    ax.set_title(f"{model}: memory per batch (dotted: what JAX can use; x: does not fit)")
    ax.legend(fontsize="x-small")
    return _save(fig, path)


def _usable_gib(target: str) -> float | None:
    from jaxcnn import targets
    from jaxcnn.perf import chips

    t = targets.TARGETS[target]
    total = chips.fact(t.kind, "memory_bytes")
    share = targets.USABLE_FRACTION.get(t.platform)
    return total * share / 2**30 / t.devices_per_chip if total and share else None


def scaling(table: pd.DataFrame, path: Path) -> Path | None:
    """Predicted weak-scaling efficiency against the device count, 1 = ideal."""
    s = answers_lib.rows(table, quantity="scaling_efficiency", precision="f32")
    s = s[s.model.isin(["mnist_cnn", "lenet5_keras", "mlp", "catsdogs_cnn", "resnet50"])]
    if s.devices.nunique() < MIN_POINTS - 1:  # one device is the point every curve starts at
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    from jaxcnn import targets

    s = s.assign(chip=[targets.TARGETS[d].chip if d in targets.TARGETS else d for d in s.device])
    # A colour per chip, a marker per model: seventeen curves stay told apart.
    colour = {chip: f"C{i % 10}" for i, chip in enumerate(sorted(s.chip.unique()))}
    marker = {m: "os^Dv"[i % 5] for i, m in enumerate(sorted(s.model.unique()))}
    for (model, chip, precision, batch_per), g in s.assign(per=s.batch // s.devices).groupby(
        ["model", "chip", "precision", "per"]
    ):
        g = g.sort_values("devices")
        ax.plot(
            [1, *g.devices],
            [1.0, *g.value],
            linestyle="--",
            marker=marker[model],
            color=colour[chip],
            label=f"{model}, {chip}, {precision}, {batch_per}/device",
        )
        above = g[g.flag.notna()]
        ax.plot(above.devices, above.value, "r*", markersize=12)
    ax.axhline(1.0, color="black", linewidth=1, label="ideal")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("devices")
    ax.set_ylabel("efficiency (1 device's step / n devices' step)")
    ax.set_title("Data parallelism, predicted (weak scaling; red star: above ideal, a bug)")
    ax.legend(fontsize="x-small", ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.18))
    return _save(fig, path)


def predictions(table: pd.DataFrame, path: Path) -> Path | None:
    """Every published step against our prediction of the same step: on the diagonal is
    exact, the dashed lines are 1.5x either way."""
    e = answers_lib.rows(table, quantity="error_factor")
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
        ax.legend(fontsize="x-small")
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
