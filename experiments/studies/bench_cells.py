"""How the bench names its cells: the machine and model of a figure, and the goal its
ratio is read against. Shared by the bench study's tables (experiments/studies/bench.py)
and the paired runs' (benchmarks/report_paired.py), which imports nothing else of it."""

from __future__ import annotations

from experiments.studies.base import Record

# The CPU goal: JAX's best f32 figure at least this multiple of the fastest peer's, so
# that no speedup over the CPU in the study is inflated by a slow CPU baseline.
GOAL = 1.0


def model_name(record: Record) -> str:
    """`mnist_cnn`, `mlp 4096`: the bench's model column."""
    w = record["workload"]
    width = (w.get("model_overrides") or {}).get("width")
    return w["model"] + (f" {width}" if width else "")


def machine(record: Record) -> str:
    """The host a figure was measured on (the chip where no host is recorded)."""
    d = record["device"]
    return d.get("host") or record["env"].get("host") or d["kind"]
