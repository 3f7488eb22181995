"""The one table of chip facts: per chip its dense peak TFLOP/s per precision, memory,
memory bandwidth, interconnect, host link and thermal design power, each from the
vendor's datasheet or the page cited beside it. Everything that needs a chip's numbers
(jaxcnn.devices' matmul precision, jaxcnn.targets, the pricing, the fit, the report)
reads them here. Pure data and lookups: no JAX.

    chips.find("NVIDIA H100 80GB HBM3").bandwidth      # 3.35e12 bytes/s
    chips.peak_tflops("Tesla T4", "fp16")              # 65.0
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Dense (no structured sparsity) peak TFLOP/s per chip, memory per chip and memory
# bandwidth per chip, from the vendors' datasheets. Every device-specific number lives in
# this table; MFU and predictions are only ever computed against an entry here (or a
# matmul measured on the device, in experiments/harness/measure.py). Patterns are
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
