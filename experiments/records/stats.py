"""The one summary of timed samples every record uses (NumPy only, so the peer
benchmarks, which run without JAX, summarize exactly as the JAX side does)."""

from __future__ import annotations

import resource
from collections.abc import Sequence

import numpy as np


def summarize(samples: Sequence[float] | np.ndarray) -> dict[str, float | int]:
    """median, p10, p90 (NumPy's linear percentiles) and n."""
    values = np.asarray(samples, dtype=np.float64)
    return {
        "median": float(np.median(values)),
        "p10": float(np.percentile(values, 10)),
        "p90": float(np.percentile(values, 90)),
        "n": int(values.size),
    }


def minor_page_faults() -> int:
    """This process's minor page faults so far: pages the kernel mapped in (and zeroed)
    on first touch. Per timed step, the sign of memory freed to the OS and taken back
    each step (jaxcnn/host_memory.py)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
