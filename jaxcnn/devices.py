"""Which devices a run uses, how they are described in records, and what is chosen per
platform for them: the arithmetic a matmul runs in, the vendors' peaks, and the XLA
options the steps compile with (`compiler_options`).

`--device=auto|cpu|gpu|tpu` resolves here and nowhere else. Asking for a platform
that is not present is an error naming the platforms that are: a Colab TPU runtime
that quietly trains on the CPU is the failure this prevents.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcnn.errors import UsageError

DEVICE_CHOICES = ("auto", "cpu", "gpu", "tpu")
_PROBE_ORDER = ("tpu", "gpu", "cpu")


def _platform_devices(platform: str) -> list[jax.Device]:
    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []


def available_platforms() -> list[str]:
    """Platforms JAX can run on here, best first (e.g. ["gpu", "cpu"])."""
    return [p for p in _PROBE_ORDER if _platform_devices(p)]


# The JAX build each accelerator needs (pyproject.toml's extras), and a target the
# compilers can build for without one (jaxcnn.targets.TARGETS).
_ACCELERATOR_INSTALL = {
    "gpu": ('pip install -e ".[cuda]"', "an NVIDIA GPU", "gpu-t4"),
    "tpu": ('pip install -e ".[tpu]"', "a TPU VM", "tpu-v5e-1"),
}


def _accelerator_hint(device: str) -> str:
    """What to do when `device` is a GPU or TPU JAX does not see: install JAX's build
    for it where the chip is, or compile for one that is not here."""
    if device not in _ACCELERATOR_INSTALL:
        return ""
    install, where, target = _ACCELERATOR_INSTALL[device]
    return (
        f": on {where}, install JAX's {device.upper()} build ({install}); without one, "
        f"--target={target} (or another --target) compiles for it"
    )


def resolve(device: str = "auto", num_devices: int | None = None) -> list[jax.Device]:
    """The devices to run on: all of `device`'s platform, or its first `num_devices`.

    `auto` is JAX's default backend, which JAX already picks as TPU > GPU > CPU.
    """
    if device not in DEVICE_CHOICES:
        raise UsageError(f"unknown device {device!r}: choose one of {', '.join(DEVICE_CHOICES)}")
    check_platforms_start()
    named = os.environ.get("JAX_PLATFORMS", "").strip()
    if named and device != "auto" and device not in _named_platforms(named):
        present = ", ".join(available_platforms()) or "none"
        raise UsageError(
            f"--device={device} asked for, but JAX_PLATFORMS={named} in the environment "
            f"leaves it out (present: {present}); unset JAX_PLATFORMS or add {device} to it"
        )
    devices = list(jax.devices()) if device == "auto" else _platform_devices(device)
    if not devices:
        present = ", ".join(available_platforms()) or "none"
        raise UsageError(
            f"--device={device} asked for, but JAX sees no {device.upper()} here "
            f"(present: {present}){_accelerator_hint(device)}; or use --device=auto"
        )
    if num_devices is not None:
        if num_devices < 1:
            raise UsageError(f"--num-devices must be a positive integer, got {num_devices}")
        if num_devices > len(devices):
            more = (
                f"; for {num_devices} CPU devices set JAX_NUM_CPU_DEVICES={num_devices} in "
                "the environment (docs/placements.md)"
                if devices[0].platform == "cpu"
                else ""
            )
            raise UsageError(
                f"--num-devices={num_devices} but only {len(devices)} "
                f"{devices[0].platform} device(s) are present{more}"
            )
        devices = devices[:num_devices]
    return devices


# JAX_PLATFORMS's names of the platforms --device names.
_PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def _named_platforms(named: str) -> set[str]:
    """The --device platforms a JAX_PLATFORMS value lets JAX start."""
    names = {name.strip().lower() for name in named.split(",")}
    return {_PLATFORM_ALIASES.get(name, name) for name in names}


def check_platforms_start() -> None:
    """UsageError naming JAX_PLATFORMS, where the environment sets it, if JAX cannot
    start the platforms it names (one not here, a name JAX does not know): JAX would
    raise at its first device query, from wherever that is."""
    named = os.environ.get("JAX_PLATFORMS", "").strip()
    if not named or named in _STARTED:
        return
    try:
        with _start_log_held(named):
            jax.devices()
    # RuntimeError: a backend that failed to start; AssertionError: JAX skips a named
    # `cuda` without an NVIDIA GPU, then asserts that some backend started.
    except (RuntimeError, AssertionError) as e:
        raise UsageError(_platforms_failed(named, e)) from None
    _STARTED.add(named)


# The JAX_PLATFORMS values this process started: JAX starts its backends once, so a
# later check needs no witness process (_start_log_held) again.
_STARTED: set[str] = set()


def _platforms_failed(named: str, error: Exception) -> str:
    """The one line for a JAX_PLATFORMS whose platforms JAX could not start."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # JAX's own advice ("set JAX_PLATFORMS=''") is the fix the line ends with.
    reason = (lines[0] if lines else "no such device").split(" (set JAX_PLATFORMS")[0]
    return (
        f"JAX_PLATFORMS={named} in the environment, but JAX could not start it here "
        f"({reason.rstrip('.')}); unset JAX_PLATFORMS to let JAX find the devices here"
    )


# A witness of the start, in its own process: it waits for the word that the start
# ended (argv[1], a pipe's read end); if the pipe closes without it, the process starting
# JAX died inside (a native fatal error: absl's "F" line, then an abort), and the witness
# says so in one line on the stderr both share, from the log held back (argv[2], the
# file's descriptor): the fatal line (its absl prefix cut), else the last line written.
_WITNESS = r"""
import os, re, sys
ended = os.read(int(sys.argv[1]), 1)
if not ended:
    held = os.pread(int(sys.argv[2]), 1 << 20, 0).decode(errors="replace").splitlines()
    lines = [line.strip() for line in held if line.strip()]
    fatal = [line for line in lines if re.match(r"F\d{4} ", line)]
    said = (fatal or lines[-1:] or ["it wrote nothing"])[0]
    said = re.sub(r"^[FEWI]\d{4} [\d:.]+\s+\d+ [^\]]*\] ", "", said)
    sys.stderr.write(f"error: {sys.argv[3]}, but JAX died starting it: {said}\n")
"""


@contextlib.contextmanager
def _start_log_held(named: str = "") -> Iterator[None]:
    """Hold what native code writes to stderr (fd 2) while JAX starts the backends a
    user named (`named`, JAX_PLATFORMS's value): libtpu logs its search for a TPU that
    is not here before JAX raises, and the one line `_platforms_failed` says why. Given
    back when the start succeeds. Where native code ends the process instead (a bad
    XLA_FLAGS is a fatal error), a witness process (_WITNESS) prints the one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        ended_read, ended_write = os.pipe()
        # Its own session: a Ctrl-C to the terminal's process group does not reach it.
        witness = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                _WITNESS,
                str(ended_read),
                str(held.fileno()),
                f"JAX_PLATFORMS={named} in the environment",
            ],
            pass_fds=(ended_read, held.fileno()),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(ended_read)
        os.dup2(held.fileno(), 2)
        started = False
        try:
            yield
            started = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.write(ended_write, b"1")
            os.close(ended_write)
            witness.wait()
            if started:
                held.seek(0)
                os.write(2, held.read())


def describe(devices: list[jax.Device]) -> dict[str, Any]:
    """The `device` field of a record: what ran, counted globally across processes."""
    first = devices[0]
    return {
        "platform": first.platform,
        "kind": first.device_kind,
        "count": len(devices),
        "process_count": jax.process_count(),
        "host": socket.gethostname(),
        "machine": machine_id(),
    }


_MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")


def machine_id() -> str:
    """This computer, as a 16-hex-digit hash of its OS machine id (systemd's, made once
    per installation; absent in some containers) and its host name. Host names repeat
    across computers ("localhost", a default VM name) and container images can ship one
    machine id to every container, but the pair rarely does; a fresh VM (a new Colab
    session) is a new machine. Hashed: a record names the machine without exposing it."""
    found = ""
    for candidate in _MACHINE_ID_FILES:
        try:
            found = Path(candidate).read_text().strip()
        except OSError:
            continue
        if found:
            break
    text = f"{found}\n{socket.gethostname()}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- Peak FLOP/s: vendor figures, and the precision a default matmul runs in ---------
#
# Dense (no structured sparsity) peak TFLOP/s per chip, memory per chip and memory
# bandwidth per chip, from the vendors' datasheets. Every device-specific number lives in
# this table; MFU and predictions are only ever computed against an entry here (or a
# matmul measured on the device, in experiments/measure.py). Patterns are
# case-insensitive regexes searched in `device_kind`, most specific first.
GiB = 2**30
GB = 10**9


class Chip(NamedTuple):
    name: str
    pattern: str
    peak_tflops: dict[str, float]
    memory_bytes: int | None  # per chip
    bandwidth: float | None  # memory bandwidth per chip, bytes/s
    # What one chip's collectives move per second: a TPU pod's published all-reduce
    # bandwidth over its chips, where Google gives one, else half the bidirectional ICI
    # figure per chip (the two agree on v5e: 51.2 TB/s over 256 chips, 400 GB/s
    # bidirectional). A GPU: half its NVLink total (NVIDIA quotes both directions),
    # or, for a GPU without NVLink, its PCIe link one way (GPUs of one host then
    # exchange gradients over PCIe). None where no figure is published: collectives
    # then move their bytes at the memory's rate.
    interconnect: float | None = None
    # The chip's link to its host, bytes/s one way: what a batch copied from host memory
    # to the chip crosses each step (PCIe: its generation and lanes, from the vendor's
    # datasheet, at the PCIe specification's rate per lane: 0.985 GB/s for Gen3, 1.969
    # for Gen4, 3.938 for Gen5). None where no figure is published (a TPU's host link;
    # a CPU, whose devices are host memory): the copy is then left out and said to be.
    host_link: float | None = None
    # The board's thermal design power in watts, where the vendor's datasheet gives one.
    tdp_watts: float | None = None


# PCIe's rate per lane, one way, in bytes/s (the specification's transfer rate after its
# line encoding: 8 GT/s x 128/130 bits for Gen3, doubling each generation).
_GEN3 = 8e9 * 128 / 130 / 8
_GEN4 = 2 * _GEN3
_GEN5 = 4 * _GEN3

_PEAK_TFLOPS: tuple[Chip, ...] = (
    # Google Cloud TPU system architecture pages (cloud.google.com/tpu/docs/v2, v3, v4,
    # v5e, v5p, v6e): bf16 peak, HBM capacity and bandwidth per chip (v2 16 GiB 600 GBps,
    # v3 32 GiB 900 GBps, v4 32 GiB 1200 GBps, v5e 16 GB 819 GBps, v5p 95 GB 2765 GBps,
    # v6e 32 GB 1640 GBps). JAX names v5e "TPU v5 lite", v6e "TPU v6 lite". Interconnect:
    # the same pages' "All-reduce bandwidth per Pod" over the pod's chips (v3 340 TB/s,
    # 1024 chips; v4 1.1 PB/s, 4096; v5e 51.2 TB/s, 256; v6e 102.4 TB/s, 256) and, for
    # v5p, which gives none, half its "Bidirectional ICI bandwidth per chip" of 1200 GBps;
    # v2's page gives neither. A v2/v3 chip
    # (and a v4 chip in libtpu's compile-only topologies) is two JAX devices, one per core:
    # jaxcnn/targets.py divides by its cores per chip.
    Chip("TPU v2", r"tpu v2", {"bf16": 45.0}, 16 * GiB, 600 * GB),
    Chip("TPU v3", r"tpu v3", {"bf16": 123.0}, 32 * GiB, 900 * GB, 340e12 / 1024),
    Chip("TPU v4", r"tpu v4", {"bf16": 275.0}, 32 * GiB, 1200 * GB, 1.1e15 / 4096),
    Chip("TPU v5e", r"tpu v5 ?(lite|e)\b", {"bf16": 197.0}, 16 * GB, 819 * GB, 51.2e12 / 256),
    Chip("TPU v5p", r"tpu v5 ?p?$", {"bf16": 459.0}, 95 * GB, 2765 * GB, 1200 * GB / 2),
    Chip("TPU v6e", r"tpu v6 ?(lite|e)\b", {"bf16": 918.0}, 32 * GB, 1640 * GB, 102.4e12 / 256),
    # NVIDIA datasheets. T4 (Turing): fp32 8.1, fp16 tensor 65; no tf32/bf16 units;
    # 16 GB GDDR6 at 320 GB/s.
    # T4 datasheet: "System Interface: x16 PCIe Gen3"; "Max Power Consumption: 70 W".
    # No NVLink: T4s of one host (Kaggle's two) all-reduce over PCIe.
    Chip(
        "T4",
        r"\bt4\b",
        {"fp32": 8.1, "fp16": 65.0},
        16 * GiB,
        320 * GB,
        16 * _GEN3,
        16 * _GEN3,
        tdp_watts=70.0,
    ),
    # Tesla P100 datasheet: PCIe fp32 9.3 / fp16 18.7, 16 GB at 732 GB/s; SXM2 10.6 /
    # 21.2, 16 GB at 732 GB/s.
    # Both P100s reach their host over PCIe Gen3 x16 (the datasheet's "PCIe x16 Gen3";
    # the SXM2 module's NVLink joins GPUs, not the host).
    Chip(
        "P100 PCIe",
        r"p100.*pcie",
        {"fp32": 9.3, "fp16": 18.7},
        16 * GiB,
        732 * GB,
        None,
        16 * _GEN3,
    ),
    Chip("P100 SXM2", r"p100", {"fp32": 10.6, "fp16": 21.2}, 16 * GiB, 732 * GB, None, 16 * _GEN3),
    # Tesla V100 datasheet: SXM2 fp32 15.7 / fp16 tensor 125; PCIe 14 / 112; 16 or 32 GB
    # HBM2 at 900 GB/s (the 16 GB card here, as Colab and Kaggle lent it).
    # Host link: "PCIe Gen3 32 GB/s" (both directions) on both forms. The SXM2 module's
    # NVLink: 6 links, "300 GB/s" both directions together (NVLink 2.0: 50 GB/s a link);
    # Dell's DL reference guide for the V100-SXM2 lists "NVLink Uni-direction Bandwidth
    # (GB/s) 150" (manualshelf.com/manual/dell/high-performance-computing-solution-
    # resources/reference-guide-english/page-17.html), what one direction moves; its
    # "TDP (Watts) 300".
    Chip(
        "V100 PCIe",
        r"v100.*pcie",
        {"fp32": 14.0, "fp16": 112.0},
        16 * GiB,
        900 * GB,
        None,
        16 * _GEN3,
    ),
    Chip(
        "V100 SXM2",
        r"v100",
        {"fp32": 15.7, "fp16": 125.0},
        16 * GiB,
        900 * GB,
        150 * GB,
        16 * _GEN3,
        tdp_watts=300.0,
    ),
    # A100 datasheet (SXM4 and PCIe alike): fp32 19.5, tf32 156, bf16/fp16 312; 40 GB
    # HBM2 at 1555 GB/s; the 80 GB SXM4 card: 80 GB HBM2e at 2039 GB/s, the same compute
    # (a chip of its own here: its memory and bandwidth differ, and so does what fits).
    # Host link: the datasheet's "PCIe Gen4: 64 GB/s" (both directions). SXM4's NVLink:
    # "NVLink: 600 GB/s" (12 third-generation links, both directions together), 300 GB/s
    # each way; "Max TDP Power 400W". The 80 GB SXM4 card: the same links and power
    # (glennklockwood.com/garden/processors/A100: "300+300 GB/s NVLink (D2D)", "400 W
    # maximum"; the 80 GB part: "2.039 GB/s" [sic, TB/s], "Everything else was the same").
    Chip(
        "A100 80GB",
        r"a100.*80",
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        80 * GiB,
        2039 * GB,
        300 * GB,
        16 * _GEN4,
        tdp_watts=400.0,
    ),
    Chip(
        "A100",
        r"a100",
        {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0},
        40 * GiB,
        1555 * GB,
        300 * GB,
        16 * _GEN4,
        tdp_watts=400.0,
    ),
    # L4 datasheet: fp32 30.3, tf32 60, bf16/fp16 121 (half the "with sparsity" figures);
    # 24 GB GDDR6 at 300 GB/s.
    Chip(
        "L4",
        r"\bl4\b",
        {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0},
        24 * GiB,
        300 * GB,
        None,
        16 * _GEN4,  # L4 datasheet: "PCIe Gen4 x16 64GB/s"
    ),
    # H100 datasheet, halving the sparsity figures: PCIe fp32 51, tf32 378, bf16 756
    # (80 GB, 2.0 TB/s); NVL fp32 60, tf32 417.5, bf16 835 (94 GB, 3.9 TB/s); SXM fp32 67,
    # tf32 495, bf16 989 (80 GB HBM3, 3.35 TB/s). The datasheet's table, as HPC Tech
    # copies it (archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html), SXM | PCIe:
    # "SMs | 132 | 114", "GPU メモリ帯域幅 | 3,350 GB/sec | 2000 GB/sec", "TDP | 700 W |
    # 300-350 W", "相互接続 | NVLink: 900GB/秒 PCIe Gen5: 128GB/秒 | NVLINK: 600GB/秒
    # PCIe Gen5: 128GB/秒"; NVIDIA's H100 PCIe product brief (PB-11133-001): "maximum
    # thermal design power (TDP) level of 350 W". The SXM's NVLink: 450 GB/s each way.
    # The PCIe card's NVLink is a bridge joining two cards, not a host's GPUs: None.
    Chip(
        "H100 PCIe",
        r"h100.*pcie",
        {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0},
        80 * GiB,
        2000 * GB,
        None,
        16 * _GEN5,  # H100/H200 datasheets: "PCIe Gen5: 128GB/s" (both directions)
        tdp_watts=350.0,
    ),
    Chip(
        "H100 NVL",
        r"h100.*nvl",
        {"fp32": 60.0, "tf32": 417.5, "bf16": 835.0, "fp16": 835.0},
        94 * GiB,
        3900 * GB,
        None,
        16 * _GEN5,
    ),
    Chip(
        "H100 SXM",
        r"h100",
        {"fp32": 67.0, "tf32": 495.0, "bf16": 989.0, "fp16": 989.0},
        80 * GiB,
        3350 * GB,
        900 * GB / 2,
        16 * _GEN5,
        tdp_watts=700.0,
    ),
    # H200 datasheet: the H100 SXM's compute with 141 GB of HBM3e at 4.8 TB/s.
    Chip(
        "H200",
        r"h200",
        {"fp32": 67.0, "tf32": 495.0, "bf16": 989.0, "fp16": 989.0},
        141 * GB,
        4800 * GB,
        None,
        16 * _GEN5,
    ),
    # Tesla K80 datasheet: per board 8.73 TFLOP/s fp32 (boost), 24 GB GDDR5 at 480 GB/s,
    # two GK210 GPUs; JAX sees each GPU as a device, so half of each here.
    # Its two GPUs share the board's one PCIe Gen3 x16 link to the host (a PCIe switch
    # on the board): half each when both copy at once, the whole link when one does.
    Chip("K80", r"\bk80\b", {"fp32": 4.37}, 12 * GiB, 240 * GB, None, 16 * _GEN3),
    # GeForce MX150 (GP108, the 1D10 variant): 384 CUDA cores at up to 1532 MHz boost
    # (2 x 384 x 1.532 GHz = 1.18 TFLOP/s fp32), 2 GB GDDR5 on a 64-bit bus at 6 Gbps
    # (48 GB/s): NVIDIA's product page and notebookcheck's spec sheet.
    # Its host link: PCIe 3.0 x4 (notebookcheck's spec sheet: "PCIe 3.0 x4").
    Chip("MX150", r"\bmx150\b", {"fp32": 1.18}, 2 * GiB, 48 * GB, None, 4 * _GEN3),
)

# Square matmul sizes for the measured ceiling: large enough to fill the chip, small
# enough to stay quick (a 1024^3 f32 matmul takes ~10 ms on a 2-core CPU).
_MATMUL_SIZES = {"cpu": (256, 512, 1024), "gpu": (2048, 4096, 8192), "tpu": (2048, 4096, 8192)}


def _normalized(kind: str) -> str:
    return " ".join(kind.lower().replace("-", " ").replace("_", " ").split())


def chip_name(device_kind: str) -> str | None:
    """The peak table's name for a `device_kind` ("NVIDIA H100 80GB HBM3" -> "H100 SXM"),
    or None for a chip it does not know (a CPU)."""
    chip = _chip(device_kind)
    return chip.name if chip else None


def _chip(device_kind: str) -> Chip | None:
    kind = _normalized(device_kind)
    return next((c for c in _PEAK_TFLOPS if re.search(c.pattern, kind)), None)


def vendor_peak_tflops(device_kind: str, precision: str) -> float | None:
    """The vendor's dense peak TFLOP/s for one chip at `precision` (fp32, tf32, bf16,
    fp16), or None where the chip or that precision is not in the table."""
    chip = _chip(device_kind)
    return chip.peak_tflops.get(precision) if chip else None


def vendor_bandwidth(device_kind: str) -> float | None:
    """The vendor's memory bandwidth of one chip in bytes/s, or None for a chip the
    table does not know."""
    chip = _chip(device_kind)
    return chip.bandwidth if chip else None


def vendor_interconnect(device_kind: str) -> float | None:
    """What one chip's collectives move per second (the table's `interconnect`), or None
    where no figure is published or the chip is unknown."""
    chip = _chip(device_kind)
    return chip.interconnect if chip else None


def vendor_host_link(device_kind: str) -> float | None:
    """The bytes/s one way over the chip's link to its host (the table's `host_link`), or
    None where no figure is published or the chip is unknown."""
    chip = _chip(device_kind)
    return chip.host_link if chip else None


def vendor_memory_bytes(device_kind: str) -> int | None:
    """The vendor's memory per chip in bytes, or None for a chip the table does not
    know."""
    chip = _chip(device_kind)
    return chip.memory_bytes if chip else None


def _ampere_or_newer(device: jax.Device) -> bool:
    capability = getattr(device, "compute_capability", None)
    if capability:
        return int(str(capability).split(".")[0]) >= 8
    chip = _chip(device.device_kind)
    return chip is not None and "tf32" in chip.peak_tflops  # tf32 units arrived with Ampere


def matmul_precision(device: jax.Device, dtype: str = "float32") -> str | None:
    """The arithmetic a matmul of `dtype` inputs runs in on `device` at JAX's default
    precision: what an MFU must be measured against.

    f32 inputs run as one bf16 pass on TPU and as TF32 on NVIDIA Ampere and newer;
    `jax_default_matmul_precision="highest"` makes them true fp32 (on TPU, several bf16
    passes, for which no vendor peak exists: None). bf16/fp16 inputs run as themselves.
    """
    dtype = str(jnp.dtype(dtype))
    if dtype in ("bfloat16", "float16"):
        return {"bfloat16": "bf16", "float16": "fp16"}[dtype]
    if dtype != "float32":
        return None
    setting = str(jax.config.jax_default_matmul_precision or "default").lower()
    exact = setting in ("highest", "float32")
    three_pass = setting in ("high", "bfloat16_3x", "tensorfloat32")
    if device.platform == "tpu":
        return None if exact or three_pass else "bf16"
    if device.platform == "gpu" and not exact and _ampere_or_newer(device):
        return "tf32"
    return "fp32"


def _requested_cpu_devices(environ: MutableMapping[str, str]) -> int:
    """How many CPU devices JAX will create, from the two settings that ask for more."""
    counts = [1]
    flag = re.search(r"--xla_force_host_platform_device_count=(\d+)", environ.get("XLA_FLAGS", ""))
    if flag:
        counts.append(int(flag.group(1)))
    if environ.get("JAX_NUM_CPU_DEVICES", "").strip().isdigit():
        counts.append(int(environ["JAX_NUM_CPU_DEVICES"]))
    return max(counts)


_reserved_threads: int | None = None  # the NPROC reserve_collective_threads set, if any


def reserve_collective_threads(environ: MutableMapping[str, str] = os.environ) -> int | None:
    """Size XLA:CPU's thread pools for collectives over many CPU devices; call before
    JAX starts its CPU backend. Returns the pool size asked for, or None if left alone.

    XLA:CPU sizes both its pools (launches, and the intra-op workers that run a
    program's thunks) to max(cores, devices). A pmap step over 8 devices on 2 cores
    then has exactly 8 intra-op workers: when 7 replicas reach an all-reduce first, 7
    workers block in its rendezvous, and the 8th replica's own parallel work needs
    workers that are blocked or busy. Under load that ordering is common, nothing
    moves, and XLA aborts the process after its 40 s rendezvous timeout. With twice as
    many workers as devices, the replica that is late always finds free ones: load
    makes the step slower, never stuck. XLA reads the pool size from NPROC; one set by
    the user is kept.
    """
    devices = _requested_cpu_devices(environ)
    if devices < 2 or "NPROC" in environ:
        return None
    global _reserved_threads
    threads = max(os.cpu_count() or 1, 2 * devices)
    environ["NPROC"] = str(threads)
    if environ is os.environ:  # this process's pools, as records report them
        _reserved_threads = threads
    return threads


def cpu_threads(environ: Mapping[str, str] = os.environ) -> dict[str, Any] | None:
    """What sized XLA:CPU's thread pools in this process, for records (step times on fake CPU
    devices depend on it): {"NPROC": value, "set_by": "jaxcnn" (reserve_collective_threads)
    or "user"}; None where NPROC is unset and XLA picked max(cores, devices) itself."""
    value = environ.get("NPROC")
    if value is None:
        return None
    return {"NPROC": value, "set_by": "jaxcnn" if value == str(_reserved_threads) else "user"}


# XLA compiler options for the train and eval steps, by platform (jaxcnn.parallel
# passes them to jax.jit; records name them). XLA:CPU's copy insertion, without its
# region analysis, copies a donated parameter that an in-place update overwrites while
# the step still reads it (the 4096x4096 kernel of `mlp`, every step); with it, the
# reads are ordered before the update and the copy goes (docs/performance-log.md,
# "XLA:CPU's copy insertion with region analysis").
_COMPILER_OPTIONS: dict[str, dict[str, Any]] = {
    "cpu": {"xla_cpu_copy_insertion_use_region_analysis": True},
}


def platform_compiler_options(platform: str) -> dict[str, Any]:
    """The XLA compiler options a step is compiled with on `platform` (a copy)."""
    return dict(_COMPILER_OPTIONS.get(platform, {}))


def matmul_sizes(platform: str) -> tuple[int, ...]:
    """Square sizes for the measured matmul ceiling on `platform`."""
    return _MATMUL_SIZES.get(platform, _MATMUL_SIZES["gpu"])
