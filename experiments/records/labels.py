"""How the report names a record's device, model and workload kind: one definition,
shared by every report section."""

from __future__ import annotations

from typing import Any

from experiments.records.tables import markdown_text

Record = dict[str, Any]


def workload_kind(record: Record) -> str:
    """train | matmul | ensemble | peer; older records have no kind: train."""
    return record["workload"].get("kind") or "train"


def device_label(record: Record) -> str:
    """A device as the report names it: cpu, gpu NVIDIA H100 80GB HBM3, tpu TPU v5 lite x8."""
    return device_name(record["device"])


def device_name(d: dict[str, Any]) -> str:
    """device_label of a record's `device` field (jaxcnn.devices.describe)."""
    kind = "" if d["kind"] == d["platform"] else f" {d['kind']}"
    count = f" x{d['count']}" if d["count"] > 1 else ""
    return markdown_text(f"{d['platform']}{kind}{count}")


# The overrides that restate a model's own default (jaxcnn/models: mlp's width is 512),
# so `mlp width=512` and `mlp` are one model in the report; tests/test_report_answers.py
# checks these against the models.
DEFAULTS: dict[str, dict[str, Any]] = {"mlp": {"width": 512}}


def model_with_overrides(workload: dict[str, Any]) -> str:
    """`mlp width=4096`: the model and the overrides that are not its own defaults."""
    defaults = DEFAULTS.get(workload["model"], {})
    given = (workload.get("model_overrides") or {}).items()
    overrides = {k: v for k, v in given if k not in defaults or defaults[k] != v}
    return workload["model"] + "".join(f" {k}={v}" for k, v in sorted(overrides.items()))


CPU_NOT_RECORDED = "CPU (model not recorded)"


def cpu_label(record: Record) -> str:
    """The record's CPU as the report groups CPU figures: its model and the vector
    extensions that set its speed (`env.cpu`), or CPU_NOT_RECORDED for records made
    before it was recorded."""
    cpu = record.get("env", {}).get("cpu") or {}
    if not cpu.get("model"):
        return CPU_NOT_RECORDED
    extensions = ", ".join(cpu.get("extensions") or []) or "no AVX2"
    return markdown_text(f"{cpu['model']} ({extensions})")


def machine(record: Record) -> str:
    """What a figure was measured on: a CPU's model and vector extensions (which set the
    verdict against the peers: one host name can be one of several CPUs), else the host
    (the chip where no host is recorded)."""
    d = record["device"]
    host = d.get("host") or record["env"].get("host") or d["kind"]
    if d.get("platform") != "cpu":
        return markdown_text(host)
    label = cpu_label(record)
    if label == CPU_NOT_RECORDED:
        return f"{markdown_text(host)}, CPU model not recorded"
    return label
