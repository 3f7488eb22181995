"""What an accelerator's runtime costs the host for each step: the jitted call's dispatch
on the chip's client, launching the program's kernels (one by one, or as CUDA graphs
where XLA:GPU captures them), and a copy's fixed latency beside its bandwidth. Every
figure is a published one, with its source and its words, in `runtime.json` beside the
chip table (`chips.py`); a part with no published figure has none here, and the loop
step names it as missing rather than counting it free.

    counts = runtime.launches(kernels, "gpu")      # from the program's kernels, in order
    runtime.host_side("gpu", counts, copies=3)     # {"parts", "missing", "launches"}

Per platform:

- gpu: each kernel launched outside a CUDA graph costs `launch`; each graph XLA:GPU
  captures (runs of at least `min_graph_size` consecutive commands of the default kinds:
  fusions, GEMMs, cuDNN calls, custom calls) costs `graph_launch` plus `graph_node` per
  kernel in it; a copy costs `copy_latency` besides its bytes over the link. The GPU
  client's own dispatch of a jitted call has no published figure measured alone.
- tpu: a step is one program, launched once; neither that launch's cost, nor a TPU
  client's dispatch, nor a TPU copy's latency is published alone (a trivial jitted
  call's whole cost on a v5e bounds the first two together from above: kept, not used).
- cpu: none: XLA:CPU's client is what jaxcnn measures its own loop on (`host_loop`'s
  dispatch), and its kernels run on the host's cores as the device step.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jaxcnn.perf.hlo import Kernel

RUNTIME_FILE = Path(__file__).with_name("runtime.json")
# The runtime's host parts of a step, as the loop step names them.
DISPATCH, LAUNCHES, GRAPHS, COPY_LATENCY = (
    "runtime_dispatch",
    "kernel_launches",
    "graph_launches",
    "copy_latency",
)
PARTS = (DISPATCH, LAUNCHES, GRAPHS, COPY_LATENCY)
# jaxcnn.perf.hlo's kinds of kernel XLA:GPU's default command buffers hold (FUSION,
# CUBLAS/CUBLASLT: gemm, CUDNN: conv, CUSTOM_CALL: custom); runtime.json's `capture`
# quotes the defaults. A kernel inside a loop (count > 1) runs in a while loop, which
# they do not capture.
CAPTURED_KINDS = frozenset({"fusion", "gemm", "conv", "custom"})


@dataclasses.dataclass(frozen=True)
class Figure:
    """One published figure of the runtime's host side."""

    platform: str
    part: str  # dispatch | launch | graph_launch | graph_node | copy_latency
    seconds: float
    used: bool  # the one figure that prices this part on this platform
    what: str
    source_url: str
    quote: str
    notes: str = ""
    seconds_high: float | None = None
    why_not_used: str | None = None


@functools.cache
def table(path: str | None = None) -> dict[str, Any]:
    """runtime.json: {"figures": [...], "capture": {...}}."""
    return json.loads(Path(path or RUNTIME_FILE).read_text())


def figures(path: str | None = None) -> list[Figure]:
    return [Figure(**row) for row in table(path)["figures"]]


def used(platform: str, part: str) -> Figure | None:
    """The figure that prices `part` on `platform`, or None where none is published."""
    return next((f for f in figures() if f.used and (f.platform, f.part) == (platform, part)), None)


def min_graph_size() -> int:
    return int(table()["capture"]["min_graph_size"])


def launches(ks: Sequence[Kernel], platform: str) -> dict[str, int]:
    """How the host launches one run of the program `ks` (kernels in program order, as
    jaxcnn.perf.hlo reads them): on a GPU, {"kernels", "outside_graphs", "graphs",
    "graph_nodes"} (runs of at least `min_graph_size` consecutive captured kernels are
    one graph each; the rest are launched one by one); on a TPU {"programs": 1}; on a
    CPU {} (its kernels are the device step)."""
    if platform == "tpu":
        return {"programs": 1}
    if platform != "gpu":
        return {}
    least = min_graph_size()
    outside = graphs = nodes = run = 0

    def close() -> None:
        nonlocal outside, graphs, nodes, run
        if run >= least:
            graphs, nodes = graphs + 1, nodes + run
        else:
            outside += run
        run = 0

    for k in ks:
        if k.kind in CAPTURED_KINDS and k.count == 1:
            run += 1
        else:
            close()
            outside += k.count
    close()
    return {
        "kernels": sum(k.count for k in ks),
        "outside_graphs": outside,
        "graphs": graphs,
        "graph_nodes": nodes,
    }


def host_side(platform: str, counts: Mapping[str, int] | None, copies: int = 1) -> dict[str, Any]:
    """The runtime's host seconds per step for a program launched as `counts`
    (`launches`; None: not known, e.g. a record that kept no kernel order), with
    `copies` host-to-device copies per step (the batch's arrays):
    {"parts": {part: seconds or None}, "missing": [why, per part without a figure],
    "launches": counts}. A CPU has no parts."""
    if platform not in ("gpu", "tpu"):
        return {"parts": {}, "missing": [], "launches": dict(counts or {})}
    parts: dict[str, float | None] = dict.fromkeys(PARTS)
    missing: list[str] = []
    client = used(platform, "dispatch")
    if client is None:
        named = platform.upper()
        missing.append(f"{DISPATCH}: no published {named} client dispatch measured alone")
    else:
        parts[DISPATCH] = client.seconds
    copy = used(platform, "copy_latency")
    if copy is None:
        missing.append(f"{COPY_LATENCY}: no published {platform.upper()} copy latency")
    else:
        parts[COPY_LATENCY] = copy.seconds * copies
    if platform == "tpu":
        parts.pop(GRAPHS)
        missing.append(f"{LAUNCHES}: no published cost of launching a TPU program (one per step)")
        return {"parts": parts, "missing": missing, "launches": dict(counts or {"programs": 1})}
    if counts is None:
        missing.append(f"{LAUNCHES}, {GRAPHS}: the kernels' order is not known")
        return {"parts": parts, "missing": missing, "launches": None}
    launch, graph, node = (used("gpu", p) for p in ("launch", "graph_launch", "graph_node"))
    if launch is not None:
        parts[LAUNCHES] = counts["outside_graphs"] * launch.seconds
    if graph is not None and node is not None:
        parts[GRAPHS] = counts["graphs"] * graph.seconds + counts["graph_nodes"] * node.seconds
    return {"parts": parts, "missing": missing, "launches": dict(counts)}
