"""How the report names a record's device, model and workload kind: one definition,
shared by every report section."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from experiments.records.schema import Record
from experiments.records.tables import markdown_text


def workload_kind(record: Record) -> str:
    """train | matmul | ensemble | peer | paired | compile."""
    return record.workload.kind


def device_label(record: Record) -> str:
    """A device as the report names it: cpu, gpu NVIDIA H100 80GB HBM3, tpu TPU v5 lite x8."""
    d = record.device
    return device_name(d.platform, d.kind, d.count)


def device_name(platform: str, kind: str, count: int) -> str:
    """device_label of a device's platform, kind and count (jaxcnn.devices.describe)."""
    named = "" if kind == platform else f" {kind}"
    counted = f" x{count}" if count > 1 else ""
    return markdown_text(f"{platform}{named}{counted}")


# The overrides that restate a model's own default (jaxcnn/models: mlp's width is 512),
# so `mlp width=512` and `mlp` are one model in the report; tests/test_report_answers.py
# checks these against the models.
DEFAULTS: dict[str, dict[str, Any]] = {"mlp": {"width": 512}}


class NamesModel(Protocol):
    """What names a model: a record's workload, an experiments.records.workload.Workload,
    a published reference."""

    @property
    def model(self) -> str: ...

    @property
    def model_overrides(self) -> Mapping[str, Any] | None: ...


def model_with_overrides(workload: NamesModel) -> str:
    """`mlp width=4096`: the model and the overrides that are not its own defaults."""
    defaults = DEFAULTS.get(workload.model, {})
    given = (workload.model_overrides or {}).items()
    overrides = {k: v for k, v in given if k not in defaults or defaults[k] != v}
    return workload.model + "".join(f" {k}={v}" for k, v in sorted(overrides.items()))


CPU_NOT_RECORDED = "CPU (model not recorded)"


def cpu_name(model: str | None, extensions: Sequence[str] | None) -> str:
    """A CPU as the report groups CPU figures: its model and the vector extensions that
    set its speed (experiments.records.host_cpu), or CPU_NOT_RECORDED for records made
    before it was recorded."""
    if not model:
        return CPU_NOT_RECORDED
    return markdown_text(f"{model} ({', '.join(extensions or []) or 'no AVX2'})")


def machine(record: Record) -> str:
    """What a figure was measured on: a CPU's model and vector extensions (which set the
    verdict against the peers: one host name can be one of several CPUs), else the host
    (the chip where no host is recorded)."""
    d, cpu = record.device, record.env.cpu
    host = d.host or record.env.host or d.kind
    return machine_name(
        d.platform, host, cpu.model if cpu else None, cpu.extensions if cpu else None
    )


def machine_name(
    platform: str, host: str, cpu_model: str | None, extensions: Sequence[str] | None
) -> str:
    """`machine` of a device's platform, its host and the host's CPU (model and vector
    extensions; None where not recorded)."""
    if platform != "cpu":
        return markdown_text(host)
    label = cpu_name(cpu_model, extensions)
    if label == CPU_NOT_RECORDED:
        return f"{markdown_text(host)}, CPU model not recorded"
    return label
