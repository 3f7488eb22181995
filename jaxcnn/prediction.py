"""A compiled step's predicted time: the per-kernel model (jaxcnn.kernels) with one chip's
rates and the fitted efficiencies of its platform.

    ks = kernels.kernels(compiled.as_text())
    rates = prediction.vendor_rates(device)            # or measured_rates(...) on a CPU
    block = prediction.predict(ks, rates, "gpu", batch_size=256)

Three kinds of number meet here, each from one place:

- what the program does, kernel by kernel (FLOPs, bytes, launches): the target's own
  compiler, read by jaxcnn.kernels;
- what the chip can do (peak FLOP/s per precision, memory and interconnect bandwidth):
  the vendor table in jaxcnn.devices, or what a run measured on the chip itself;
- how far real kernels stay below those rates, and what each launch costs: the
  platform's constants in `prediction_constants.json`, fitted by one procedure
  (`python -m experiments.fit_predictions`) on published measurements and this
  project's own measured records, with the fit's leave-one-out error beside them.

The result is a prediction, never a measurement: every block says its method, the
constants' version and their error band, and whatever shows it labels it predicted.
The whole-program roofline (jaxcnn.roofline) stays what it is, a lower bound.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxcnn import devices as devices_lib
from jaxcnn import kernels as kernels_lib

CONSTANTS_FILE = Path(__file__).with_name("prediction_constants.json")
METHOD = "per-kernel"
BOUND_METHOD = "roofline bound"

# The element types a kernel's dot or convolution reads (jaxcnn.kernels) -> the dtype
# names jaxcnn.devices.matmul_precision takes.
_DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


@functools.cache
def constants(path: str | None = None) -> dict[str, Any]:
    """The fitted constants file: {"version", "families": {platform: {...}}, ...}."""
    return json.loads(Path(path or CONSTANTS_FILE).read_text())


def version() -> str:
    return str(constants()["version"])


def family_constants(platform: str, table: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One platform's constants (cpu, gpu or tpu); a KeyError names a platform the file
    has none for."""
    families = (table or constants())["families"]
    if platform not in families:
        raise KeyError(f"no prediction constants for platform {platform!r}")
    return families[platform]


def vendor_rates(device: Any, devices_per_chip: int = 1) -> dict[str, Any]:
    """`device`'s chip as the vendor table gives it, one device's share where a chip is
    several devices: {"peak_flops_per_s": {dtype: FLOP/s}, "bytes_per_s",
    "interconnect_bytes_per_s", "source": "vendor"}. A dtype whose matmuls run in a
    precision the table has no peak for is left out (jaxcnn.kernels then uses f32's)."""
    kind = device.device_kind
    peaks = {}
    for short, name in _DTYPES.items():
        precision = devices_lib.matmul_precision(device, name)
        peak = devices_lib.vendor_peak_tflops(kind, precision) if precision else None
        if peak:
            peaks[short] = peak * 1e12 / devices_per_chip
    bandwidth = devices_lib.vendor_bandwidth(kind)
    interconnect = devices_lib.vendor_interconnect(kind)
    return {
        "peak_flops_per_s": peaks,
        "bytes_per_s": None if bandwidth is None else bandwidth / devices_per_chip,
        "interconnect_bytes_per_s": None if interconnect is None else interconnect,
        "source": "vendor",
    }


def measured_rates(
    ceiling: Mapping[str, Any] | None, bandwidth: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The rates a run measured on its own device (a record's `matmul_ceiling` and
    `bandwidth`): the peaks its matmuls reached per dtype and its memory bandwidth."""
    peaks = {}
    for short, name in _DTYPES.items():
        tflops = ((ceiling or {}).get(name) or {}).get("tflops")
        if tflops:
            peaks[short] = tflops * 1e12
    return {
        "peak_flops_per_s": peaks,
        "bytes_per_s": (bandwidth or {}).get("bytes_per_s"),
        "interconnect_bytes_per_s": None,
        "source": "measured",
    }


def rates(
    device: Any,
    devices_per_chip: int = 1,
    ceiling: Mapping[str, Any] | None = None,
    bandwidth: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The rates a step on `device` is priced at: the vendor's where the chip table knows
    the chip (what a compile-only record of it uses), else what a run measured on it (a
    CPU's matmul ceiling and bandwidth)."""
    found = vendor_rates(device, devices_per_chip)
    if found["peak_flops_per_s"] and found["bytes_per_s"]:
        return found
    return measured_rates(ceiling, bandwidth)


def costs(
    rates: Mapping[str, Any], efficiencies: Mapping[str, Any]
) -> kernels_lib.KernelCosts | None:
    """The kernel model's costs from a chip's rates and a family's efficiencies; None
    where the chip has no f32 peak or no bandwidth (nothing can be predicted)."""
    peaks = dict(rates.get("peak_flops_per_s") or {})
    if "f32" not in peaks or not rates.get("bytes_per_s"):
        return None
    for short in _DTYPES:
        peaks.setdefault(short, peaks["f32"])  # no faster units for it: f32's rate
    return kernels_lib.KernelCosts(
        peak_flops_per_s=peaks,
        bytes_per_s=float(rates["bytes_per_s"]),
        compute_efficiency=float(efficiencies["compute_efficiency"]),
        memory_efficiency=float(efficiencies["memory_efficiency"]),
        kernel_overhead_s=float(efficiencies["kernel_overhead_s"]),
        # Where no interconnect figure is published (a CPU's devices share its memory; a
        # TPU v2), a collective moves its bytes at the memory's rate.
        interconnect_bytes_per_s=rates.get("interconnect_bytes_per_s") or rates["bytes_per_s"],
        elemental_conv_efficiency=efficiencies.get("elemental_conv_efficiency"),
    )


def predict(
    ks: list[kernels_lib.Kernel],
    rates: Mapping[str, Any],
    platform: str,
    batch_size: int,
    *,
    steps: int = 1,
    table: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A record's per-kernel `prediction` block of one step on one device: `ks` are the
    kernels of a program of `steps` steps (a train step, or a whole-epoch loop) priced at
    `rates` with `platform`'s fitted constants, the sums divided by `steps`. None where
    the rates cannot price a kernel or the platform has no constants."""
    table = table or constants()
    try:
        family = family_constants(platform, table)
    except KeyError:
        return None
    priced = costs(rates, family)
    if priced is None or not ks:
        return None
    timed = kernels_lib.step_time(ks, priced)
    seconds = timed["seconds"] / steps
    per_step = {part: timed[part] / steps for part in _PARTS}
    error = family.get("error")
    return {
        "method": METHOD,
        "constants_version": str(table["version"]),
        "step_time_s": seconds,
        "images_per_s": batch_size / seconds if seconds > 0 else None,
        **per_step,
        "kernels": timed["kernels"] / steps,
        "rates_source": rates.get("source"),
        "error_band": None if not error else {k: error[k] for k in ("median", "worst")},
    }


_PARTS = ("compute_s", "memory_s", "overhead_s", "collective_s")
