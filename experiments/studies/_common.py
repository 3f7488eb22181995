"""What several studies' report sections share: which records a section shows (the
latest per cell, a study's, the ones outside the named studies), how a record's values
are written in a table, and the plot plumbing (matplotlib, imported on first plot so
that listing the studies stays fast).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.labels import device_label, model_label, workload_kind
from experiments.studies.base import Record
from experiments.tables import binary_bytes, seconds


def pyplot() -> Any:
    """matplotlib.pyplot, drawing to files only: no display on servers, CI or TPU VMs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _cell(record: Record) -> tuple:
    """What a record measures, without the device: records with equal cells compare.
    The study fields are None in records older than the studies, so those still pair."""
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
        w.get("ensemble_size") or 1,  # older records have none: one model
        w.get("ensemble_mode"),
        w.get("matmul_precision") or "default",
        record.get("loop") or "step",  # older records: per-step dispatch, XLA's convs
        (record.get("formulation") or {}).get("name", "xla"),
        w.get("framework"),  # peer records: another framework's figure
        w.get("mode"),
    )


def _sort_key(record: Record) -> tuple:
    """The cell, orderable although fields may be None in some records and set in others."""
    return tuple((value is not None, value) for value in _cell(record))


def _study_of(record: Record) -> str | None:
    return record["workload"].get("study")


def generic(records: list[Record]) -> list[Record]:
    """Train records outside the named studies (single --model runs, older records):
    what the generic plots show; each study's records get that study's section."""
    return [r for r in records if _study_of(r) in (None, "default") and workload_kind(r) == "train"]


def accuracy(record: Record) -> float | None:
    """The record's test accuracy; never one for synthetic data, where it means nothing."""
    if record["workload"].get("dataset") == "synthetic":
        return None
    return record.get("test_accuracy")


def _ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r["status"] == "ok"]


def latest(records: list[Record]) -> list[Record]:
    """One record per (device, cell): the most recent, so reruns do not double points."""
    chosen: dict[tuple, Record] = {}
    for r in sorted(records, key=lambda r: str(r["env"].get("utc_time") or "")):
        chosen[(device_label(r), _cell(r))] = r
    return list(chosen.values())


def _batch_size(record: Record) -> int:
    return record["workload"]["batch_size"]


def _get(record: Record, *path: str) -> Any:
    value: Any = record
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.3g}%"


def _step(record: Record) -> str:
    step = record.get("step_time_s")
    if not step:
        return "-"
    return f"{seconds(step['median'])} [{seconds(step['p10'])}-{seconds(step['p90'])}]"


def _status(record: Record) -> str:
    if record["status"] == "ok":
        return "ok"
    message = (record.get("message") or "").replace("|", "/")
    return f"{record['status']}: {message[:80]}"


def _study(records: list[Record], name: str, kind: str = "train") -> list[Record]:
    """The latest record per cell of study `name` and workload kind `kind`."""
    return [r for r in latest(records) if _study_of(r) == name and workload_kind(r) == kind]


def _median_step(record: Record) -> float:
    return record["step_time_s"]["median"]


def _acc(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _images(record: Record) -> str:
    images = record.get("images_per_s")
    return f"{images:,.0f}" if images else "-"


_gib = binary_bytes


def _workload_label(record: Record) -> str:
    w = record["workload"]
    return f"{model_label(record)}, {w.get('dataset')}, batch {w['batch_size']}"


def _workload_key(record: Record) -> tuple:
    """Orders workloads by model, dataset, then batch as a number (64 before 128)."""
    w = record["workload"]
    return model_label(record), str(w.get("dataset")), w["batch_size"], device_label(record)


def _section(title: str, *parts: str) -> str:
    return "\n\n".join([f"## {title}", *[p for p in parts if p]])


def _save(fig: Any, path: Path) -> Path:
    plt = pyplot()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _image(title: str, path: Path) -> str:
    return f"![{title}]({path.name})"


def _count_ticks(ax: Any, values: Any) -> None:
    """Ticks at the measured counts (batch sizes, devices, K, n) on a log x axis, written
    as plain integers: a few points per decade get no useful ticks of their own."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    ax.set_xticks(sorted(set(values)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())


def _overrides(record: Record) -> tuple:
    return tuple(sorted((record["workload"].get("model_overrides") or {}).items()))
