"""A roofline prediction of a compiled step's time: the larger of its arithmetic at the
chip's peak and its memory traffic at the chip's bandwidth.

    predict(flops=2.1e9, bytes_accessed=3.0e8, peak_flops_per_s=197e12, bytes_per_s=819e9)

It is the roofline bound, not a measurement: a lower bound on a step only under its
assumptions (every FLOP at the peak, every byte XLA's cost analysis counts moved at the
bandwidth). It ignores launch and dispatch overheads, imperfect overlap of compute with
memory traffic and every kernel's distance from the peak, which make it low; a fused
kernel that keeps bytes in cache, or a GEMM past a measured ceiling, beats it. Whatever
shows it is labelled as predicted, and its error is measured against a real run wherever
one exists (`measured / predicted`, at least 1 where the bound holds).
"""

from __future__ import annotations

from typing import Any


def predict(
    flops: float | None,
    bytes_accessed: float | None,
    peak_flops_per_s: float | None,
    bytes_per_s: float | None,
) -> dict[str, Any] | None:
    """{"seconds", "compute_s", "memory_s", "bound"} for one step, or None when neither
    side can be computed. `bound` names the side that sets `seconds` ("compute" or
    "memory"); a side with a missing count or rate is None and cannot bound."""
    compute_s = _ratio(flops, peak_flops_per_s)
    memory_s = _ratio(bytes_accessed, bytes_per_s)
    sides = {k: v for k, v in (("compute", compute_s), ("memory", memory_s)) if v is not None}
    if not sides:
        return None
    bound = max(sides, key=sides.__getitem__)
    return {"seconds": sides[bound], "compute_s": compute_s, "memory_s": memory_s, "bound": bound}


def _ratio(amount: float | None, rate: float | None) -> float | None:
    if amount is None or rate is None or amount < 0 or rate <= 0:
        return None  # XLA reports -1 for a count it could not make
    return amount / rate
