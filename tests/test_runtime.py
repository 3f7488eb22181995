"""jaxcnn.perf.runtime: the accelerator runtime's host side, every figure published and
quoted, a part without one named as missing, and a program's kernels told into CUDA
graphs as XLA:GPU's default command buffers capture them."""

from __future__ import annotations

import collections

import pytest

from jaxcnn.perf import runtime
from jaxcnn.perf.hlo import Kernel


def _k(kind: str, count: int = 1) -> Kernel:
    return Kernel("k", kind, 0.0, 0.0, None, count)


def test_every_figure_has_its_source_and_its_words():
    rows = runtime.figures()
    assert rows
    for row in rows:
        assert row.source_url.startswith("https://") and row.quote.strip(), row
        assert row.seconds > 0 and (row.seconds_high is None or row.seconds_high > row.seconds)
        assert row.used or row.why_not_used, f"{row.what}: say why it is not used"
    capture = runtime.table()["capture"]
    assert capture["source_url"].startswith("https://") and "min_graph_size(5)" in capture["quote"]


def test_one_figure_prices_each_part_and_none_is_made_up():
    used = collections.Counter((r.platform, r.part) for r in runtime.figures() if r.used)
    assert set(used.values()) == {1}
    assert set(used) == {
        ("gpu", "launch"),
        ("gpu", "graph_launch"),
        ("gpu", "graph_node"),
        ("gpu", "copy_latency"),
    }
    assert runtime.used("gpu", "dispatch") is None and runtime.used("tpu", "copy_latency") is None


def test_runs_of_five_captured_kernels_are_one_graph_and_the_rest_launch_alone():
    ks = [
        *[_k("fusion")] * 3,  # a run of 3: launched one by one
        _k("collective"),  # never captured by default
        *[_k("conv"), _k("gemm"), _k("fusion"), _k("custom"), _k("fusion")],  # one graph of 5
        _k("fusion", count=4),  # inside a while loop: four launches
        *[_k("fusion")] * 6,  # a second graph
    ]
    assert runtime.launches(ks, "gpu") == {
        "kernels": 19,
        "outside_graphs": 3 + 1 + 4,
        "graphs": 2,
        "graph_nodes": 11,
    }
    assert runtime.launches(ks, "tpu") == {"programs": 1}
    assert runtime.launches(ks, "cpu") == {}


def test_the_gpu_host_side_is_its_launches_graphs_and_copies_and_names_the_dispatch():
    counts = {"kernels": 19, "outside_graphs": 8, "graphs": 2, "graph_nodes": 11}
    side = runtime.host_side("gpu", counts, copies=3)
    fig = {p: runtime.used("gpu", p).seconds for p in ("launch", "graph_launch", "graph_node")}
    assert side["parts"][runtime.LAUNCHES] == pytest.approx(8 * fig["launch"])
    assert side["parts"][runtime.GRAPHS] == pytest.approx(
        2 * fig["graph_launch"] + 11 * fig["graph_node"]
    )
    assert side["parts"][runtime.COPY_LATENCY] == pytest.approx(
        3 * runtime.used("gpu", "copy_latency").seconds
    )
    assert side["parts"][runtime.DISPATCH] is None
    assert side["missing"] == ["runtime_dispatch: no published GPU client dispatch measured alone"]
    # Unknown launches are missing, never 0.
    unknown = runtime.host_side("gpu", None)
    assert unknown["parts"][runtime.LAUNCHES] is None and len(unknown["missing"]) == 2


def test_a_tpu_names_its_missing_parts_and_a_cpu_has_none():
    tpu = runtime.host_side("tpu", {"programs": 1}, copies=3)
    assert set(tpu["parts"].values()) == {None}
    assert [m.split(":")[0] for m in tpu["missing"]] == [
        runtime.DISPATCH,
        runtime.COPY_LATENCY,
        runtime.LAUNCHES,
    ]
    assert runtime.host_side("cpu", {}) == {"parts": {}, "missing": [], "launches": {}}
