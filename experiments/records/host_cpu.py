"""Which CPU a record was made on: JAX names every CPU just "cpu", yet a CPU's vector
extensions move its figures by a factor of three (AVX-512 against AVX2 alone for a
convolution), and a verdict against other frameworks can flip between two machines.
Read from /proc/cpuinfo (Linux); elsewhere the platform's processor string, no
extensions."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

# The extensions that set a CPU's matmul and convolution speed, as the report names
# them, from /proc/cpuinfo's flags.
EXTENSIONS = {"avx2": "AVX2", "avx512f": "AVX-512", "amx_tile": "AMX"}


def describe(cpuinfo: str | None = None) -> dict[str, Any]:
    """{"model": "AMD EPYC 9B14", "extensions": ["AVX2", "AVX-512"]} of this machine
    (or of `cpuinfo`, /proc/cpuinfo's text)."""
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
    }
