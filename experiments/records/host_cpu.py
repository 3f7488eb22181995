"""Which CPU a record was made on: JAX names every CPU just "cpu", yet a CPU's vector
extensions move its figures by a factor of three (AVX-512 against AVX2 alone for a
convolution), and a verdict against other frameworks can flip between two machines.
Read from /proc/cpuinfo (Linux); elsewhere the platform's processor string, no
extensions."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

# The extensions that set a CPU's matmul and convolution speed, as the report names
# them, from /proc/cpuinfo's flags.
EXTENSIONS = {"avx2": "AVX2", "avx512f": "AVX-512", "amx_tile": "AMX"}


def cores() -> int | None:
    """The processors this process may run on: what a step's threads share (a VM's vCPUs,
    a container's quota of them), which sets a CPU's speed as much as its model does."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


def describe(cpuinfo: str | None = None) -> dict[str, Any]:
    """{"model": "AMD EPYC 9B14", "extensions": ["AVX2", "AVX-512"], "cores": 2} of this
    machine (or of `cpuinfo`, /proc/cpuinfo's text; cores: this process's, `cores`)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())  # the first processor's
    flags = set(fields.get("flags", "").split())
    return {
        "model": fields.get("model name") or platform.processor() or None,
        "extensions": [name for flag, name in EXTENSIONS.items() if flag in flags],
        "cores": cores(),
    }
