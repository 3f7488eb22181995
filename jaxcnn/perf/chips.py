"""The one table of chip facts: per chip its dense peak TFLOP/s per precision, memory,
memory bandwidth, interconnect, host link and thermal design power, each from the
vendor's datasheet or the page cited beside it; the arithmetic a matmul runs in on each
platform; and the topologies the compilers can target (TARGETS: TPU slices and NVIDIA
GPUs, alone or several to a host). Everything that needs a chip's numbers reads them
here, its rates through jaxcnn.perf.rates. Pure data and lookups: no JAX.

    chips.find("NVIDIA H100 80GB HBM3").bandwidth      # 3.35e12 bytes/s
    chips.peak_tflops("Tesla T4", "fp16")              # 65.0
    chips.TARGETS["tpu-v5e-8"].chips                   # 8
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import NamedTuple

# Dense (no structured sparsity) peak TFLOP/s per chip, memory per chip and memory
# bandwidth per chip, from the vendors' datasheets. Every device-specific number lives in
# this table; MFU and predictions are only ever computed against an entry here (or a
# matmul measured on the device, in experiments/harness/measure.py). Patterns are
# case-insensitive regexes searched in `device_kind`, most specific first.
GiB = 2**30
MiB = 2**20
GB = 10**9


class Chip(NamedTuple):
    name: str
    pattern: str
    peak_tflops: dict[str, float]
    memory_bytes: int | None  # per chip: what CUDA reports where published, else the datasheet's
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
    # for Gen4, 3.938 for Gen5); a TPU's from the JAX team's scaling book, which gives one
    # figure for TPUs and one for the v6e. None where no figure is published (a CPU,
    # whose devices are host memory): the copy is then left out and said to be.
    host_link: float | None = None
    # The board's thermal design power in watts, where the vendor's datasheet gives one.
    tdp_watts: float | None = None


# PCIe's rate per lane, one way, in bytes/s (the specification's transfer rate after its
# line encoding: 8 GT/s x 128/130 bits for Gen3, doubling each generation).
_GEN3 = 8e9 * 128 / 130 / 8
_GEN4 = 2 * _GEN3
_GEN5 = 4 * _GEN3
_TPU_PCIE = 1.6e10  # a TPU's host link, one way (the CHIPS comment on TPUs says whose)

CHIPS: tuple[Chip, ...] = (
    # Google Cloud TPU system architecture pages (cloud.google.com/tpu/docs/v2, v3, v4,
    # v5e, v5p, v6e): bf16 peak, HBM capacity and bandwidth per chip (v2 16 GiB 600 GBps,
    # v3 32 GiB 900 GBps, v4 32 GiB 1200 GBps, v5e 16 GB 819 GBps, v5p 95 GB 2765 GBps,
    # v6e 32 GB 1640 GBps). JAX names v5e "TPU v5 lite", v6e "TPU v6 lite". Interconnect:
    # the same pages' "All-reduce bandwidth per Pod" over the pod's chips (v3 340 TB/s,
    # 1024 chips; v4 1.1 PB/s, 4096; v5e 51.2 TB/s, 256; v6e 102.4 TB/s, 256) and, for
    # v5p, which gives none, half its "Bidirectional ICI bandwidth per chip" of 1200 GBps;
    # v2's page gives neither. A v2/v3 chip
    # (and a v4 chip in libtpu's compile-only topologies) is two JAX devices, one per core:
    # jaxcnn/targets.py divides by its cores per chip. Host link: "PCIe bandwidth is
    # typically around `1.6e10` bytes / second per TPU (`3.2e10` for TPU v6e)" (How to
    # Scale Your Model, jax-ml/scaling-book@54e2c43 tpus.md; said of TPUs in general,
    # its tables list v3 onward).
    Chip("TPU v2", r"tpu v2", {"bf16": 45.0}, 16 * GiB, 600 * GB, None, _TPU_PCIE),
    Chip("TPU v3", r"tpu v3", {"bf16": 123.0}, 32 * GiB, 900 * GB, 340e12 / 1024, _TPU_PCIE),
    Chip("TPU v4", r"tpu v4", {"bf16": 275.0}, 32 * GiB, 1200 * GB, 1.1e15 / 4096, _TPU_PCIE),
    Chip(
        "TPU v5e",
        r"tpu v5 ?(lite|e)\b",
        {"bf16": 197.0},
        16 * GB,
        819 * GB,
        51.2e12 / 256,
        _TPU_PCIE,
    ),
    Chip("TPU v5p", r"tpu v5 ?p?$", {"bf16": 459.0}, 95 * GB, 2765 * GB, 1200 * GB / 2, _TPU_PCIE),
    Chip(
        "TPU v6e",
        r"tpu v6 ?(lite|e)\b",
        {"bf16": 918.0},
        32 * GB,
        1640 * GB,
        102.4e12 / 256,
        2 * _TPU_PCIE,
    ),
    # NVIDIA datasheets. T4 (Turing): fp32 8.1, fp16 tensor 65; no tf32/bf16 units;
    # 16 GB GDDR6 at 320 GB/s. Its memory here is what CUDA reports with ECC on, as Colab
    # and Kaggle run it: deviceQuery on a Colab T4,
    # "Global Memory | 15095 MBytes" (github.com/sylvia-ymlin/cuda-kernels-from-scratch,
    # README.md). JAX's share (USABLE_FRACTION) is of that total, not of the datasheet's.
    # T4 datasheet: "System Interface: x16 PCIe Gen3"; "Max Power Consumption: 70 W".
    # No NVLink: T4s of one host (Kaggle's two) all-reduce over PCIe.
    Chip(
        "T4",
        r"\bt4\b",
        {"fp32": 8.1, "fp16": 65.0},
        15095 * MiB,
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
    # GeForce RTX 3090 (GA102, sm_86): the launch spec table, as copied at
    # holynerdvana.blogspot.com/2022/10/nvidia-geforce-rtx-3090-specifications.html:
    # "Streaming Multiprocessors82", "GPU Cores (Shaders)10496", "Boost Clock (MHz)1695",
    # "VRAM (GB)24", "L2 Cache6", "FP32 TFLOPS (Single-Precision)35.6", "FP16 TFLOPS
    # (Sparsity)142 (285)", "Bandwidth (GB/s)936", "Total Board Power (Watts)350". That
    # 142 is fp16 tensor math accumulating in fp16 (82 SMs x 4 tensor cores x 128 FMA x 2
    # x 1.695 GHz = 142.3); a GeForce Ampere card accumulates in fp32 (what XLA's dots and
    # convolutions do) at half that and runs tf32 at a quarter (the arithmetic for a
    # GA10x card in gist.github.com/getianao/33fb5306ba896193c7ae59ec64794283: "f16 and
    # f32 acc: 54.865920 / 2", "f32 and f32 acc: 54.865920 / 4", and its "6144 KB L2
    # Cache"; github.com/physicsdolphin/nv-uefi-unlocker discussion 227 names GA102's
    # "FP32-accum half-rate"): fp16/bf16 71, tf32 35.6, the GA102 whitepaper's figures.
    # Host link PCIe 4.0 x16; its NVLink is a bridge joining two cards, not a host's GPUs.
    Chip(
        "RTX 3090",
        r"rtx 3090",
        {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0},
        24 * GiB,
        936 * GB,
        None,
        16 * _GEN4,
        tdp_watts=350.0,
    ),
    # GeForce GTX 1080 (GP104, sm_61): 20 SMs of 128 CUDA cores (2560), 1607 MHz base,
    # 1733 MHz boost, 8 GB GDDR5X on 256 bits at 10 Gbps, 2 MB L2, 180 W (fudzilla.net/
    # news/graphics/40701: "a total of 2560 CUDA cores", "48KB of L1 and 2MB of L2
    # cache", "a total memory bandwidth of 320GB/s", "base clock at 1607MHz while the
    # maximum GPU Boost is set at 1733MHz", "The TDP of the GTX 1080 is set at 180W"; its
    # host link, "PCI Express 3.0 interface": infinitebrandedaccessories.com's sheet). fp32
    # at boost as for the MX150: 2 x 2560 x 1.733 GHz = 8.87 TFLOP/s (NVIDIA's launch
    # "8.2 TFLOPs" is the base clock's 8.23). GP104's fp16 runs at 1/64 of fp32: no fp16
    # peak here. No NVLink: GPUs of one host exchange over PCIe.
    Chip(
        "GTX 1080",
        r"gtx 1080(?! ?ti)",
        {"fp32": 8.87},
        8 * GiB,
        320 * GB,
        16 * _GEN3,
        16 * _GEN3,
        tdp_watts=180.0,
    ),
)


def _normalized(kind: str) -> str:
    return " ".join(kind.lower().replace("-", " ").replace("_", " ").split())


def find(device_kind: str) -> Chip | None:
    """The table's chip for a `device_kind` (JAX's name, or the table's own), or None for
    a chip it does not know (a CPU)."""
    kind = _normalized(device_kind)
    return next((c for c in CHIPS if re.search(c.pattern, kind)), None)


def chip_name(device_kind: str) -> str | None:
    """The table's name for a `device_kind` ("NVIDIA H100 80GB HBM3" -> "H100 SXM"), or
    None for a chip it does not know."""
    chip = find(device_kind)
    return chip.name if chip else None


def peak_tflops(device_kind: str, precision: str) -> float | None:
    """The vendor's dense peak TFLOP/s for one chip at `precision` (fp32, tf32, bf16,
    fp16), or None where the chip or that precision is not in the table."""
    chip = find(device_kind)
    return chip.peak_tflops.get(precision) if chip else None


def fact(device_kind: str, name: str) -> float | None:
    """One of the table's facts of a chip (`memory_bytes`, `bandwidth`, `interconnect`,
    `host_link`, `tdp_watts`), or None where no figure is published or the chip is
    unknown."""
    chip = find(device_kind)
    return getattr(chip, name) if chip else None


# --- The arithmetic a matmul runs in ----------------------------------------------------

# The input types of a dot or convolution whose arithmetic a chip's peaks are given for.
_HALF_PRECISIONS = {"bfloat16": "bf16", "float16": "fp16"}


def matmul_precision(
    platform: str,
    device_kind: str,
    dtype: str,
    setting: str = "default",
    compute_capability: str | None = None,
) -> str | None:
    """The arithmetic a matmul of `dtype` inputs (float32, bfloat16, float16) runs in on a
    chip of `platform` at JAX's default matmul precision `setting` (default, high,
    highest, or their other names): what an MFU must be measured against.

    f32 inputs run as one bf16 pass on TPU and as TF32 on NVIDIA Ampere and newer (a
    `compute_capability` of 8 or more, else a chip with TF32 units in the table: they
    arrived with Ampere); "highest" makes them true fp32 (on TPU, several bf16 passes,
    for which no vendor peak exists: None). bf16/fp16 inputs run as themselves."""
    if dtype in _HALF_PRECISIONS:
        return _HALF_PRECISIONS[dtype]
    if dtype != "float32":
        return None
    setting = setting.lower()
    exact = setting in ("highest", "float32")
    three_pass = setting in ("high", "bfloat16_3x", "tensorfloat32")
    if platform == "tpu":
        return None if exact or three_pass else "bf16"
    if platform == "gpu" and not exact and _ampere_or_newer(device_kind, compute_capability):
        return "tf32"
    return "fp32"


def _ampere_or_newer(device_kind: str, compute_capability: str | None) -> bool:
    if compute_capability:
        return int(str(compute_capability).split(".")[0]) >= 8
    chip = find(device_kind)
    return chip is not None and "tf32" in chip.peak_tflops


# --- Topologies: the chips the compilers can target, alone or several together ----------

SPECS = Path(__file__).resolve().parent.parent / "gpu_specs"


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    platform: str  # tpu | gpu
    chip: str  # the chip table's name
    chips: int
    topology: str | None = None  # TPU: libtpu's topology name
    spec: str | None = None  # GPU: the target config file in jaxcnn/gpu_specs
    # TPU: libtpu's chip config, where the chip runs in a mode its compile-only default
    # is not sure to give: "megacore", one JAX device driving both TensorCores of a v4
    # or v5p chip, as these chips run on Cloud TPU (without it, v4 compiles for two
    # one-core devices per chip).
    chip_config: str | None = None
    # JAX devices per chip, as the chip runs: 2 on v2 and v3, whose two cores are two
    # devices; 1 elsewhere (megacore v4 and v5p, one-core v5e and v6e, GPUs).
    # jaxcnn.targets.abstract_devices checks the compiler gives chips x this.
    devices_per_chip: int = 1
    # The devices its programs run on where fewer than its chips hold, else None (all):
    # 1 on a v2 chip is one TensorCore, JAX's default device, what a program jitted
    # without a mesh runs on (half the chip; the other core idles).
    devices_used: int | None = None
    # GPU: a CUDA toolkit other than the CUDA plugin's own, for a chip whose ptxas that
    # toolkit no longer has (CudaToolkit below); None: the plugin's.
    toolkit: CudaToolkit | None = None

    @property
    def devices(self) -> int:
        return self.devices_used or self.chips * self.devices_per_chip

    @property
    def whole_chips(self) -> bool:
        """Whether its programs run on every device of its chips."""
        return self.devices == self.chips * self.devices_per_chip

    @property
    def kind(self) -> str:
        """A device_kind the chip table knows this chip by."""
        return self.chip if self.platform == "tpu" else _spec_kind(self.spec)


@dataclasses.dataclass(frozen=True)
class CudaToolkit:
    """A CUDA toolkit's ptxas and libdevice, from NVIDIA's pip wheel, installed apart
    from the environment's own: every nvidia-cuda-nvcc-cuXX wheel unpacks into the same
    nvidia/cuda_nvcc folder, so one environment holds only one of them, and the CUDA
    plugin's (CUDA 12) is the one jax finds. A target that names a toolkit compiles
    with `xla_gpu_cuda_data_dir` set to it (XLA takes ptxas from its bin/ first), in
    that target's jit calls only."""

    package: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def root(self) -> Path:
        """Where it is installed: beside the environment that compiles, one folder each."""
        return Path(sys.prefix) / "jaxcnn-toolkits" / f"{self.package}-{self.version}"

    @property
    def cuda_dir(self) -> Path:
        """The folder XLA reads as a CUDA install: bin/ptxas, nvvm/libdevice."""
        return self.root / "nvidia" / "cuda_nvcc"

    @property
    def install(self) -> str:
        return f"pip install --no-deps --target={self.root} {self.requirement}"

    def installed(self) -> bool:
        return (self.cuda_dir / "bin" / "ptxas").is_file()


# CUDA 12's ptxas has no Kepler: `ptxas fatal   : Value 'sm_37' is not defined for option
# 'gpu-name'` (XLA then says "ptxas too old" and, with no driver here, refuses). CUDA
# 11.8's is the last to assemble sm_35/sm_37 (deprecated there; CUDA 12.0 removed them),
# and assembles the PTX XLA's LLVM emits for sm_37. Its wheel is 19.5 MB (46 MB unpacked).
KEPLER_TOOLKIT = CudaToolkit("nvidia-cuda-nvcc-cu11", "11.8.89")


def _tpu(
    name: str,
    chip: str,
    chips: int,
    topology: str,
    per_chip: int = 1,
    config: str | None = None,
    used: int | None = None,
) -> Target:
    return Target(
        name,
        "tpu",
        chip,
        chips,
        topology=topology,
        chip_config=config,
        devices_per_chip=per_chip,
        devices_used=used,
    )


def _gpu(
    name: str, chip: str, spec: str, chips: int = 1, toolkit: CudaToolkit | None = None
) -> Target:
    return Target(name, "gpu", chip, chips, spec=spec, toolkit=toolkit)


def _gpus(chip: str, spec: str, counts: tuple[int, ...], stem: str) -> tuple[Target, ...]:
    """`counts` GPUs of one host, each count a target: the chip's one-GPU spec, given to
    the compiler as a topology of that many devices (1 slice x 1 host x N devices)."""
    return tuple(_gpu(f"{stem}x{n}", chip, spec, chips=n) for n in counts)


# Cloud TPU names count cores for v2-v4 and v5p (tpu-v4-8: 4 chips) and chips for v5e
# and v6e (tpu-v5e-8: 8 chips): tpu-v2-1 is one core, what a program jitted without a
# mesh runs on, on a TPU v2-8 (Colab's TPU runtime, Flax's examples). Adding a target
# is one entry here (and, for a GPU not listed, one spec file in jaxcnn/gpu_specs).
TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _tpu("tpu-v2-8", "TPU v2", 4, "v2:2x2", per_chip=2),
        _tpu("tpu-v2-1", "TPU v2", 1, "v2:1x1", per_chip=2, used=1),
        _tpu("tpu-v3-8", "TPU v3", 4, "v3:2x2", per_chip=2),
        _tpu("tpu-v4-8", "TPU v4", 4, "v4:2x2x1", config="megacore"),
        _tpu("tpu-v4-32", "TPU v4", 16, "v4:2x2x4", config="megacore"),
        _tpu("tpu-v5e-1", "TPU v5e", 1, "v5e:1x1"),
        _tpu("tpu-v5e-8", "TPU v5e", 8, "v5e:2x4"),
        _tpu("tpu-v5e-16", "TPU v5e", 16, "v5e:4x4"),
        _tpu("tpu-v5e-64", "TPU v5e", 64, "v5e:8x8"),
        _tpu("tpu-v5p-8", "TPU v5p", 4, "v5p:2x2x1", config="megacore"),
        _tpu("tpu-v6e-1", "TPU v6e", 1, "v6e:1x1"),
        _tpu("tpu-v6e-8", "TPU v6e", 8, "v6e:2x4"),
        _tpu("tpu-v6e-64", "TPU v6e", 64, "v6e:8x8"),
        _gpu("gpu-mx150", "MX150", "mx150.txtpb"),
        _gpu("gpu-k80", "K80", "k80.txtpb", toolkit=KEPLER_TOOLKIT),
        _gpu("gpu-gtx1080", "GTX 1080", "gtx1080.txtpb"),
        _gpu("gpu-p100", "P100 PCIe", "p100.txtpb"),
        _gpu("gpu-t4", "T4", "t4.txtpb"),
        _gpu("gpu-v100", "V100 SXM2", "v100.txtpb"),
        _gpu("gpu-a100", "A100", "a100.txtpb"),
        _gpu("gpu-a100-80gb", "A100 80GB", "a100_80gb.txtpb"),
        _gpu("gpu-rtx3090", "RTX 3090", "rtx3090.txtpb"),
        _gpu("gpu-l4", "L4", "l4.txtpb"),
        _gpu("gpu-h100", "H100 SXM", "h100.txtpb"),
        _gpu("gpu-h100-pcie", "H100 PCIe", "h100_pcie.txtpb"),
        # Data parallelism over the GPUs of one host (seed 001's recipe). Kaggle's free
        # GPU runtime is 2 x T4, and a cloud VM takes up to 4; 8 x V100 / A100 / H100
        # is one DGX-class host (NVLink between the GPUs: the chips' interconnect).
        *_gpus("T4", "t4.txtpb", (2, 4), "gpu-t4"),
        *_gpus("V100 SXM2", "v100.txtpb", (2, 4, 8), "gpu-v100"),
        *_gpus("A100", "a100.txtpb", (2, 4, 8), "gpu-a100"),
        # DGX A100's 80 GB cards: what NVIDIA's published 1-vs-4 and 1-vs-8 GPU ResNet-50
        # rows ran on (experiments/predict/published_references.json, the scaling rows).
        *_gpus("A100 80GB", "a100_80gb.txtpb", (4, 8), "gpu-a100-80gb"),
        *_gpus("H100 SXM", "h100.txtpb", (2, 4, 8), "gpu-h100"),
    )
}


def part_of_chips(chip: str, chips: int, devices: int) -> Target | None:
    """The target whose programs run on `devices` devices, fewer than its `chips` chips of
    `chip` hold (tpu-v2-1: one core of a v2 chip), or None."""
    return next(
        (
            t
            for t in TARGETS.values()
            if (t.chip, t.chips, t.devices) == (chip, chips, devices) and not t.whole_chips
        ),
        None,
    )


# The share of a chip's memory a JAX program can have by default. On a GPU, JAX
# preallocates 75% of the memory at its first operation (XLA_PYTHON_CLIENT_MEM_FRACTION,
# JAX's "GPU memory allocation" page); the rest is the CUDA context's and other
# processes'. A TPU's HBM is the program's.
USABLE_FRACTION = {"gpu": 0.75, "tpu": 1.0}


def _spec_kind(spec: str | None) -> str:
    for line in (SPECS / str(spec)).read_text().splitlines():
        if line.startswith("device_description_str:"):
            return line.split(":", 1)[1].strip().strip('"')
    raise ValueError(f"{spec} has no device_description_str")
