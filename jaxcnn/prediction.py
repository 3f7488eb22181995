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
The whole-program roofline (jaxcnn.roofline) stays what it is, the roofline bound:
a lower bound only under its assumptions (which a fused kernel can beat), not a prediction.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jaxcnn import devices as devices_lib
from jaxcnn import host_loop
from jaxcnn import kernels as kernels_lib
from jaxcnn.perf import chips

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
    peaks, units = {}, {}
    for short, name in _DTYPES.items():
        precision = devices_lib.matmul_precision(device, name)
        peak = chips.peak_tflops(kind, precision) if precision else None
        if peak:
            peaks[short] = peak * 1e12 / devices_per_chip
            units[short] = unit(device.platform, precision, kind)
    bandwidth = chips.fact(kind, "bandwidth")
    interconnect = chips.fact(kind, "interconnect")
    return {
        "peak_flops_per_s": peaks,
        "units": units,
        "bytes_per_s": None if bandwidth is None else bandwidth / devices_per_chip,
        "interconnect_bytes_per_s": None if interconnect is None else interconnect,
        "host_link_bytes_per_s": chips.fact(kind, "host_link"),
        "source": "vendor",
    }


# The arithmetic units a dot or convolution can run on, each with its own peak and its
# own fraction of it that real kernels reach: "matrix" (a GPU's tensor cores, a TPU's
# matrix units) and "vector" (a GPU's fp32 pipes). A chip's fraction of one says nothing
# of the other's: cuDNN's fp32 convolutions on a V100 keep its fp32 pipes busy, while the
# same step's TF32 convolutions on an A100 reach a small part of its tensor cores' peak.
UNITS = ("matrix", "vector")
# Where a unit's own fraction is kept in a family's constants (None where no fitted
# observation ran on it); "matrix" is compute_efficiency.
VECTOR_EFFICIENCY = "vector_efficiency"


def unit(platform: str, precision: str, device_kind: str) -> str:
    """The unit a matmul of `precision` (jaxcnn.devices.matmul_precision's name) runs on
    on a chip of `platform`: a TPU's are all matrix units; on a GPU fp32 runs on the fp32
    pipes, TF32 and bf16 only exist on tensor cores, and fp16 runs on tensor cores where
    the chip has them: tensor cores give fp16 at least 4x the fp32 peak (Volta and Turing
    8x, Ada 4x), Pascal's packed fp16 on its fp32 pipes 2x."""
    if platform != "gpu":
        return "matrix"
    if precision == "fp32":
        return "vector"
    if precision == "fp16":
        fp16 = chips.peak_tflops(device_kind, "fp16") or 0.0
        fp32 = chips.peak_tflops(device_kind, "fp32") or 0.0
        return "matrix" if fp16 >= 4 * fp32 else "vector"
    return "matrix"


def vector_dtypes(rates: Mapping[str, Any]) -> frozenset[str]:
    """The dot/conv input types `rates` price on vector units (`unit`); a type the chip
    has no peak of its own for runs as f32 does, on f32's units. None for rates that say
    nothing of units (a CPU's measured ones)."""
    units = dict(rates.get("units") or {})
    if "f32" in units:
        for short in _DTYPES:
            units.setdefault(short, units["f32"])
    return frozenset(short for short, kind in units.items() if kind == "vector")


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
    where the chip has no f32 peak or no bandwidth (nothing can be predicted). A dtype
    whose rates say it runs on vector units is priced at the family's
    `vector_efficiency` where it has one (else, like the rest, `compute_efficiency`)."""
    peaks = dict(rates.get("peak_flops_per_s") or {})
    if "f32" not in peaks or not rates.get("bytes_per_s"):
        return None
    for short in _DTYPES:
        peaks.setdefault(short, peaks["f32"])  # no faster units for it: f32's rate
    vector = efficiencies.get(VECTOR_EFFICIENCY)
    by_dtype = {short: float(vector) for short in vector_dtypes(rates)} if vector else {}
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
        compute_efficiency_by_dtype=by_dtype,
        copy_overhead_s=_optional(efficiencies.get("copy_overhead_s")),
        library_overhead_s=_optional(efficiencies.get("library_overhead_s")),
        conv_overhead_s=_optional(efficiencies.get("conv_overhead_s")),
        cache_memory_efficiency=_optional(efficiencies.get("cache_memory_efficiency")),
        library_memory_efficiency=_optional(efficiencies.get("library_memory_efficiency")),
        half_float_memory_efficiency=_optional(efficiencies.get("half_float_memory_efficiency")),
    )


def _optional(value: Any) -> float | None:
    return None if value is None else float(value)


def measured_dispatch(placement: str, table: Mapping[str, Any] | None = None) -> float | None:
    """The host's round trip of one step placed `placement` (single, pmap, sharded) as
    this project's runs measured it (the constants file's `host`: the median of the
    records' `dispatch_s`), or None where no run measured that placement.

    A step placed over devices does at least the host work of one device's call, so a
    placement measured faster than `single` (medians of other runs, on a loaded
    machine) takes single's: else a step spread over N devices would be predicted to
    dispatch faster than one device's, and N devices more than N times as fast."""
    measured = ((table or constants()).get("host") or {}).get("dispatch_s") or {}
    own, single = measured.get(placement), measured.get("single")
    return own if own is None or single is None else max(own, single)


def measured_host_loop(
    workload: Mapping[str, Any], table: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """jaxcnn's step loop on this project's host for a workload's model (with its
    overrides) at its global batch: the newest measured record's `host_loop` (the
    constants file's `host.loop`), or None where no run measured that model and batch."""
    host = (table or constants()).get("host") or {}
    return (host.get("loop") or {}).get(host_loop_key(workload))


def host_loop_key(workload: Mapping[str, Any]) -> str:
    """Where the constants file keeps a workload's measured host loop: its model, the
    overrides that make it another network (a width, an image size), its global batch
    (what the host's parts depend on: the arrays gathered, the state's leaves)."""
    overrides = workload.get("model_overrides") or {}
    named = "".join(f" {k}={v}" for k, v in sorted(overrides.items()))
    return f"{workload['model']}{named}, batch {workload['batch_size']}"


def host_side(
    *,
    measured: Mapping[str, Any] | None,
    dispatch_s: float | None,
    batch_bytes: int,
    host_link_bytes_per_s: float | None,
    platform: str = "gpu",
    steps_per_epoch: int | None = None,
    loop: str = "step",
    steps: int = 1,
) -> dict[str, Any]:
    """What the host adds around a step's kernels in jaxcnn's loops (`predict`'s `host`):

    - parts: the step loop's host parts per step (jaxcnn.host_loop.per_step of
      `measured`, a record's `host_loop`: measured with the loop's own code on the host
      that runs it), each None where nothing was measured;
    - transfer_s: the batch's bytes over the chip's link to its host, once per step of
      the step loop (the device loop's dataset crosses once, before training); 0 on a
      CPU, whose device memory is the host's; None where no link figure is published;
    - call_s: one call's round trip (`dispatch_s`: a call of the placed step doing no
      work, measured here), which the device loop pays once per epoch;
    - steps_per_epoch: the epoch's steps where the dataset's size is known;
    - host_s: what a step timed alone (a record's `step_time_s`) adds to its kernels:
      in the step loop (`loop`) the call's round trip and the batch's copy, in the
      device loop the call's round trip shared by the `steps` steps of one call (each
      0 where it has no figure); the fit adds it, known, to its observations."""
    transfer = None
    if platform == "cpu":
        transfer = 0.0
    elif host_link_bytes_per_s:
        transfer = batch_bytes / host_link_bytes_per_s
    parts = (
        host_loop.per_step(measured, steps_per_epoch)
        if measured
        else dict.fromkeys(host_loop.PARTS)
    )
    return {
        "parts": parts,
        "transfer_s": transfer,
        "call_s": dispatch_s,
        "steps_per_epoch": steps_per_epoch,
        "host_s": (dispatch_s or 0.0) / max(1, steps)
        + ((transfer or 0.0) if loop == "step" else 0.0),
    }


def loops(device_step_s: float, host: Mapping[str, Any], platform: str) -> dict[str, Any]:
    """The loop step, the epoch and the device loop's step around a device step of
    `device_step_s` with the host side `host` (`host_side`):

    - loop_step_s (jaxcnn.host_loop.loop_step: the step loop's host parts and the
      batch's copy, overlapped or serialised as the loop runs them), loop_parts,
      loop_left_out, loop_overlap, loop_bound;
    - epoch_s: an epoch's loop steps, where its steps are known; its evaluation is not
      priced (no eval-step kernels are read) and is named in `epoch_left_out`;
    - device_loop_step_s: a step of the device loop (a whole epoch as one lax.scan):
      the device step plus its share of the epoch's one call (the call's round trip),
      no copy; None where the epoch's steps or the call are unknown."""
    loop = host_loop.loop_step(device_step_s, host["parts"], host["transfer_s"], platform=platform)
    per_epoch = host.get("steps_per_epoch")
    call = host.get("call_s")
    return {
        **loop,
        "epoch_s": per_epoch * loop["loop_step_s"] if per_epoch else None,
        "epoch_steps": per_epoch,
        "epoch_left_out": ["evaluation (no eval-step kernels priced)"]
        + ([] if per_epoch else ["the epoch's steps (the dataset's size is not known)"]),
        "device_loop_step_s": (
            device_step_s + call / per_epoch if per_epoch and call is not None else None
        ),
    }


def predict(
    ks: list[kernels_lib.Kernel],
    rates: Mapping[str, Any],
    platform: str,
    batch_size: int,
    *,
    steps: int = 1,
    devices: int = 1,
    chip: str | None = None,
    host: Mapping[str, Any] | None = None,
    table: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """A record's per-kernel `prediction` block of one step on one device: `ks` are the
    kernels of a program of `steps` steps (a train step, or a whole-epoch loop) priced at
    `rates` with `platform`'s fitted constants, the sums divided by `steps`. None where
    the rates cannot price a kernel or the platform has no constants. `batch_size` is
    the step's global batch, `devices` the devices it is split over (the kernels are one
    device's), `chip` what it runs on (the chip table's name; a CPU's machine).

    Two predictions, labelled: `device_step_s`, the chip's kernels (and collectives) of
    one step; and with `host` (`host_side`), `loop_step_s`, the step jaxcnn's step loop
    makes of it on that chip with that host (`loops`: its parts, what is left out, the
    epoch, the device loop's step). `step_time_s` is the device step, and `images_per_s`
    the batch over it. Its error band (`error_band`) is the one measured on programs of
    the same regime by the split its claim needs, on the quantity it names."""
    table = table or constants()
    try:
        family = family_constants(platform, table)
    except KeyError:
        return None
    priced = costs(rates, family)
    if priced is None or not ks:
        return None
    timed = kernels_lib.step_time(ks, priced)
    device_step = timed["seconds"] / steps
    per_step = {part: timed[part] / steps for part in _PARTS}
    kind = regime(ks, batch_size // max(1, devices) * steps)
    return {
        "method": METHOD,
        "constants_version": str(table["version"]),
        "device_step_s": device_step,
        "step_time_s": device_step,
        "images_per_s": batch_size / device_step if device_step > 0 else None,
        **per_step,
        **(loops(device_step, host, platform) if host is not None else {}),
        "kernels": timed["kernels"] / steps,
        "rates_source": rates.get("source"),
        "regime": kind,
        "error_band": error_band(family, kind, chip),
    }


_PARTS = ("compute_s", "memory_s", "overhead_s", "collective_s")

# A program's regime, by the arithmetic of its train step per image: "large" programs
# (ResNet-50 at 224 pixels does ~12 GFLOP per image) spend their step in a few long
# kernels, "small" ones (the seeds' MNIST models do ~1-40 MFLOP per image) in launches
# and copies. The published measurements behind the accelerators' error bands are all
# large, so a band measured on one regime is never shown beside the other.
LARGE_FLOPS_PER_IMAGE = 1e9
REGIMES = ("large", "small")


def regime(ks: list[kernels_lib.Kernel], images: int) -> str:
    """ "large" or "small": the FLOPs of one run of the program `ks` per image it trains
    (`images`: the batch per device times the steps one run takes), against
    LARGE_FLOPS_PER_IMAGE."""
    flops = sum(k.flops * k.count for k in ks)
    return "large" if flops / max(1, images) >= LARGE_FLOPS_PER_IMAGE else "small"


# What an error band was measured on: the device step (a step's kernels against steps
# measured alone, or against published figures), or jaxcnn's loop step. A band is only
# shown beside the quantity it names. Constants fitted before bands named it measured
# theirs on the device step.
DEVICE_STEP, LOOP_STEP = "device_step", "loop_step"


def error_band(
    family: Mapping[str, Any], regime_name: str, chip: str | None = None
) -> dict[str, Any] | None:
    """The error band a prediction of `regime_name` on `chip` is shown with: measured by
    the split that matches its claim, leave one program out on a chip the fit has
    observations of, leave one chip out on any other; over the family's observations of
    that regime ({"median", "worst", "observations", "split", "quantity": DEVICE_STEP or
    LOOP_STEP}). None where that split has none of that regime: the prediction is then
    unvalidated."""
    error = family.get("error") or {}
    split = "program" if chip is not None and chip in (error.get("chips") or ()) else "chip"
    band = (((error.get("splits") or {}).get(split) or {}).get("regimes") or {}).get(regime_name)
    if not band:
        return None
    return {
        "median": band["median"],
        "worst": band["worst"],
        "observations": band["observations"],
        "split": split,
        "quantity": error.get("quantity", DEVICE_STEP),
    }
