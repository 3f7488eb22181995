"""How the bench names its cells: the machine and model of a figure. Shared by the bench
study (experiments/studies/bench.py) and benchmarks/paired.py, which imports nothing else
of it."""

from __future__ import annotations

from experiments.records import Record, labels
from experiments.records.tables import markdown_text


def model_name(record: Record) -> str:
    """`mnist_cnn`, `mlp 4096`: the bench's model column."""
    w = record.workload
    width = (w.model_overrides or {}).get("width")  # an Object: the overrides as given
    return markdown_text(w.model) + (f" {width}" if width else "")


def machines_here(host: str | None = None) -> list[str]:
    """How `machine` names a CPU figure made on this machine, in the order to look for
    one: by this CPU (records that name it), then by this host (records made before the
    CPU was recorded)."""
    import socket

    from experiments.records import host_cpu

    host = host or socket.gethostname()
    cpu = host_cpu.describe()
    return [
        labels.machine_name("cpu", host, cpu["model"], cpu["extensions"]),
        labels.machine_name("cpu", host, None, None),
    ]
