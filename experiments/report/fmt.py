"""How a figure is written: one function per unit, so a value reads the same on every
page (tests compare the pages' numbers with the table's, written by these)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from typing import Any


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def seconds(value: float) -> str:
    for scale, unit in ((3600, "h"), (60, "min"), (1, "s")):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value * 1e3:.3g} ms" if value >= 1e-3 else f"{value * 1e6:.3g} us"


def value_text(value: Any, unit: str) -> str:
    """`value` in `unit` as every page writes it ("-" for none)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    value = float(value)
    if unit == "s":
        return seconds(value)
    if unit == "bytes":
        return f"{value / 2**30:.3g} GiB"
    if unit == "x":
        return f"{value:.3g}x"
    if unit == "USD":  # three figures, never an exponent: $0.0000645, $1.23, $12,300
        return f"${value:,.2f}" if value >= 100 else f"${Decimal(f'{value:.3g}'):f}"
    if unit == "bool":
        return "fits" if value else "does not fit"
    if unit == "cores":  # os.sched_getaffinity's: logical processors (a VM's vCPUs)
        return f"{value:.0f} logical cores"
    if unit == "images":
        return f"{value:,.0f}"
    if unit == "FLOP/s per W":
        return _si(value, "FLOP/s") + " per W"
    if unit in ("FLOP/s", "images/s"):
        return _si(value, unit)
    if unit == "fraction":
        return f"{value:.4f}" if 0.5 < value <= 1 else percent(value)
    return f"{value:.4g}"


def percent(value: float) -> str:
    """A fraction as a percentage, one decimal; under 0.1%, two significant figures
    (0.043%), so a small nonzero fraction never reads 0.0%."""
    return f"{value * 100:.2g}%" if 0 < abs(value) < 0.001 else f"{value:.1%}"


def fmt(row: dict[str, Any] | None) -> str:
    """A table row's value with its unit; "-" for no row."""
    if row is None:
        return "-"
    if row["quantity"] in ("mfu", "matmul_fraction", "scaling_efficiency"):
        return percent(float(row["value"]))
    return value_text(row["value"], row["unit"])


BOUND_MARKS = {"floor": ">=", "ceiling": "<="}  # the table's `bound` column, as printed


def shown_value(row: dict[str, Any]) -> str:
    """A table row's value with its unit, marked where it is a bound."""
    return BOUND_MARKS.get(row.get("bound"), "") + fmt(row)


def each_text(values: list[str]) -> str:
    """Written values one per chip, in the chips' order, their shared unit written once
    ("1.56/1.46 ms"): never a range."""
    units = {v.partition(" ")[2] for v in values}
    if len(units) == 1 and units != {""}:
        return "/".join([v.partition(" ")[0] for v in values[:-1]] + values[-1:])
    return "/".join(values)


def span_text(lo: str, hi: str) -> str:
    """Two written values as a range, their shared unit written once ("256-375 us")."""
    if lo == hi:
        return lo
    lo_number, _, lo_unit = lo.partition(" ")
    if lo_unit and hi.endswith(f" {lo_unit}"):
        return f"{lo_number}-{hi}"
    return f"{lo}-{hi}"


def batches_text(batches: Iterable[float]) -> str:
    """Batches as the pages write them: "b524" alone, "b524-b657" for several."""
    ends = sorted({int(b) for b in batches})
    return f"b{ends[0]}" + (f"-b{ends[-1]}" if len(ends) > 1 else "")
