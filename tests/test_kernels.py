"""jaxcnn.perf.hlo: the launched kernels of a compiled program; jaxcnn.perf.price: their
modelled time.

Hand-written HLO with known answers, then real compiled programs: four stored under
tests/data/ (mnist_cnn at batch 128, compiled here by `python tests/test_kernels.py
--write-fixtures`: the train step and the two-step epoch program for gpu-t4, the epoch
program for tpu-v5e-1, the sharded train step for tpu-v5e-8; the debug sections of the
text, which name this machine's paths, are left out), and programs compiled live for
the CPU and, where the [targets] extra is installed, for gpu-t4.
"""

# ruff: noqa: E501 (HLO instructions are long lines, kept whole as the compiler prints them)
from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import needs_extra

from jaxcnn.perf import hlo as K
from jaxcnn.perf import price
from jaxcnn.perf.rates import Rates

DATA = Path(__file__).resolve().parent / "data"
MNIST_PARAMS = 225_034  # mnist_cnn's trainable parameters (models.param_counts; checked below)
BATCH = 128


def module(*computations: str, header: str = "HloModule m") -> str:
    return "\n\n".join([header, *computations]) + "\n"


def one(text: str) -> K.Kernel:
    (kernel,) = K.kernels(text)
    return kernel


def stored(name: str) -> str:
    return gzip.decompress((DATA / f"{name}.hlo.gz").read_bytes()).decode()


# --- Hand-written programs ------------------------------------------------------------

GEMM_FUSION = module(
    """%gemm_computation (p0: bf16[64,256], p1: bf16[256,32]) -> f32[64,32] {
  %p0 = bf16[64,256]{1,0} parameter(0)
  %p1 = bf16[256,32]{1,0} parameter(1)
  ROOT %dot.1 = f32[64,32]{1,0} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""",
    """ENTRY %main (a: bf16[64,256], b: bf16[256,32]) -> f32[64,32] {
  %a = bf16[64,256]{1,0} parameter(0)
  %b = bf16[256,32]{1,0} parameter(1)
  ROOT %gemm_fusion = f32[64,32]{1,0} fusion(%a, %b), kind=kCustom, calls=%gemm_computation, backend_config={"fusion_backend_config":{"kind":"__triton_gemm"}}
}""",
)


def test_a_gemm_fusion_is_2mnk_flops_and_reads_its_operands_writes_its_result():
    k = one(GEMM_FUSION)
    assert (k.name, k.kind, k.dtype, k.count) == ("gemm_fusion", "gemm", "bf16", 1)
    assert k.flops == 2 * 64 * 32 * 256
    assert k.bytes == 64 * 256 * 2 + 256 * 32 * 2 + 64 * 32 * 4
    assert k.collective_bytes == 0 and k.note == ""


def test_a_batched_split_k_gemm_counts_every_batch():
    # XLA:GPU's split-K form of a 128x1600 @ 1600x128 dot (from the a100 program).
    text = module(
        """%g (p0: f32[128,16,100], p1: f32[16,100,128]) -> f32[16,128,128] {
  %p0 = f32[128,16,100]{2,1,0} parameter(0)
  %p1 = f32[16,100,128]{2,1,0} parameter(1)
  ROOT %dot.3 = f32[16,128,128]{2,1,0} dot(%p0, %p1), lhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
}""",
        """ENTRY %main (a: f32[128,16,100], b: f32[16,100,128]) -> f32[16,128,128] {
  %a = f32[128,16,100]{2,1,0} parameter(0)
  %b = f32[16,100,128]{2,1,0} parameter(1)
  ROOT %gemm_fusion_dot.2 = f32[16,128,128]{2,1,0} fusion(%a, %b), kind=kCustom, calls=%g
}""",
    )
    assert one(text).flops == 2 * 128 * 128 * 1600


def test_a_cublas_call_is_a_gemm_and_its_workspace_is_not_traffic():
    text = module(
        """ENTRY %main (x: f32[128,128], w: f32[128,10]) -> (f32[128,10], s8[4194304]) {
  %x = f32[128,128]{1,0} parameter(0)
  %w = f32[128,10]{1,0} parameter(1)
  ROOT %cublas-lt-matmul.3 = (f32[128,10]{1,0}, s8[4194304]{0}) custom-call(%x, %w), custom_call_target="__cublas$lt$matmul", backend_config={"operation_queue_id":"0","gemm_backend_config":{"dot_dimension_numbers":{"lhs_contracting_dimensions":["1"],"rhs_contracting_dimensions":["0"],"lhs_batch_dimensions":[],"rhs_batch_dimensions":[]}}}
}"""
    )
    k = one(text)
    assert (k.kind, k.dtype) == ("gemm", "f32")
    assert k.flops == 2 * 128 * 10 * 128
    assert k.bytes == (128 * 128 + 128 * 10 + 128 * 10) * 4  # not the 4 MiB workspace


def cudnn(target: str, operands: str, result: str, params: str) -> str:
    return module(
        f"""ENTRY %main ({params}) -> ({result}, u8[0]) {{
  %x = f32[8,3,32,32]{{3,2,1,0}} parameter(0)
  %w = f32[16,3,3,3]{{3,2,1,0}} parameter(1)
  %dy = f32[8,16,16,16]{{3,2,1,0}} parameter(2)
  ROOT %conv = ({result}{{3,2,1,0}}, u8[0]{{0}}) custom-call({operands}), window={{size=3x3 stride=2x2 pad=1_1x1_1}}, dim_labels=bf01_oi01->bf01, custom_call_target="{target}", backend_config={{"cudnn_conv_backend_config":{{"activation_mode":"kNone"}}}}
}}"""
    )


CONV_PARAMS = "x: f32[8,3,32,32], w: f32[16,3,3,3], dy: f32[8,16,16,16]"


@pytest.mark.parametrize(
    "target, operands, result",
    [
        ("__cudnn$convForward", "%x, %w", "f32[8,16,16,16]"),
        ("__cudnn$convBackwardInput", "%dy, %w", "f32[8,3,32,32]"),
        ("__cudnn$convBackwardFilter", "%x, %dy", "f32[16,3,3,3]"),
    ],
)
def test_each_cudnn_pass_is_the_forward_convolutions_flops(target, operands, result):
    # 3x3 stride 2 over 8x3x32x32 into 16 features: 8*16*16*16 outputs, 3*3*3 taps each.
    k = one(cudnn(target, operands, result, CONV_PARAMS))
    assert (k.kind, k.dtype) == ("conv", "f32")
    assert k.flops == 2 * (8 * 16 * 16 * 16) * (3 * 3 * 3)
    x, w, dy = 8 * 3 * 32 * 32 * 4, 16 * 27 * 4, 8 * 16 * 16 * 16 * 4
    assert k.bytes == x + w + dy  # two of them read, the third written; u8[0] scratch


def cpu_convolution(labels: str, kernel: str, operands: str, result: str, extra: str = "") -> str:
    """One unfused convolution as XLA:CPU leaves it in a loop body (lines as it prints
    them, from mnist_cnn's epoch program: a weight gradient)."""
    return module(
        f"""ENTRY %main (x: f32[128,13,13,32], dy: f32[128,11,11,64], w: {kernel}) -> {result} {{
  %x = f32[128,13,13,32]{{3,2,1,0}} parameter(0)
  %dy = f32[128,11,11,64]{{3,2,1,0}} parameter(1)
  %w = {kernel} parameter(2)
  ROOT %conv = {result} convolution({operands}), window={{size=11x11{extra}}}, dim_labels={labels}, backend_config={{"outer_dimension_partitions":["2"]}}
}}"""
    )


# Conv_1's weight gradient as XLA:CPU wrote it inside the device loop's while body
# (feature-first input: not a form its library takes), and the same work in the one
# form it does take.
ELEMENTAL = cpu_convolution(
    "f01b_i01o->01bf", "f32[3,3,32,64]{3,2,1,0}", "%x, %dy", "f32[3,3,32,64]{3,2,1,0}"
)
LIBRARY = cpu_convolution(
    "b01f_01io->b01f", "f32[11,11,32,64]{3,2,1,0}", "%x, %w", "f32[128,3,3,64]{3,2,1,0}"
)


def test_xla_cpu_writes_a_convolution_its_library_cannot_take_as_loops():
    assert one(LIBRARY).kind == "conv"  # the positive control: the library's form
    elemental = K.kernels(ELEMENTAL, platform="cpu")[0]
    assert elemental.kind == "elemental_conv"
    assert elemental.flops == 2 * (3 * 3 * 32 * 64) * (11 * 11 * 128)  # the work is the same
    assert K.kernels(LIBRARY, platform="cpu")[0].kind == "conv"


def test_only_xla_cpu_convolutions_are_told_apart():
    # A TPU runs any convolution on its matrix units; an unnamed platform is not guessed.
    assert one(ELEMENTAL).kind == "conv"
    assert K.kernels(ELEMENTAL, platform="tpu")[0].kind == "conv"


@pytest.mark.parametrize(
    "change",
    [
        ("size=11x11}", "size=11x11 rhs_reversal=1x1}"),  # a reversed window
        ("f32[11,11,32,64]{3,2,1,0}", "f32[11,11,32,64]{2,3,1,0}"),  # a column-major kernel
        ("b01f_01io->b01f", "b01f_01oi->b01f"),  # the kernel's features swapped
    ],
)
def test_each_condition_of_xla_cpus_library_path_is_read(change):
    text = LIBRARY.replace(*change)
    assert text != LIBRARY
    assert K.kernels(text, platform="cpu")[0].kind == "elemental_conv"


def test_an_elemental_convolution_runs_at_its_own_fraction_of_peak():
    costs = dataclasses.replace(COSTS, elemental_conv_efficiency=0.01)
    loops = kernel("elemental_conv", 1e9, 1e6, "f32")
    assert price.step_time([loops], RATES, costs)["seconds"] == pytest.approx(
        1e9 / (1e12 * 0.01) + 1e-6
    )
    library = kernel("conv", 1e9, 1e6, "f32")
    assert price.step_time([library], RATES, costs)["seconds"] == pytest.approx(
        1e9 / (1e12 * 0.5) + 1e-6
    )
    # Without its own constant (a platform that has none), it is priced as any other.
    assert price.step_time([loops], RATES, COSTS)["seconds"] == pytest.approx(
        1e9 / (1e12 * 0.5) + 1e-6
    )


def test_a_compiled_step_is_read_as_its_devices_platform_compiled_it():
    import jax

    from experiments.harness import measure

    class Compiled:  # what measure.step_kernels reads of a jax Compiled
        input_shardings = (jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0]),)

        def as_text(self) -> str:
            return ELEMENTAL

    (row,) = measure.step_kernels(Compiled())
    assert row[1] == "elemental_conv"


def test_a_tpu_convolution_fusion_counts_its_convolution_in_its_input_type():
    text = module(
        """%fused_computation.10 (param_0: bf16[8,32,32,3], param_1: bf16[3,3,3,16]) -> f32[8,32,32,16] {
  %param_0 = bf16[8,32,32,3]{3,2,1,0:T(8,128)(2,1)} parameter(0)
  %param_1 = bf16[3,3,3,16]{3,2,1,0:T(8,128)(2,1)} parameter(1)
  %convolution.1 = f32[8,32,32,16]{3,2,1,0:T(8,128)} convolution(%param_0, %param_1), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  %constant.2 = f32[]{:T(128)} constant(0)
  %broadcast.3 = f32[8,32,32,16]{3,2,1,0:T(8,128)} broadcast(%constant.2), dimensions={}
  ROOT %maximum.4 = f32[8,32,32,16]{3,2,1,0:T(8,128)} maximum(%convolution.1, %broadcast.3)
}""",
        """ENTRY %main (x: bf16[8,32,32,3], w: bf16[3,3,3,16]) -> f32[8,32,32,16] {
  %x = bf16[8,32,32,3]{3,2,1,0:T(8,128)(2,1)} parameter(0)
  %w = bf16[3,3,3,16]{3,2,1,0:T(8,128)(2,1)} parameter(1)
  ROOT %convolution_maximum_fusion = f32[8,32,32,16]{3,2,1,0:T(8,128)S(1)} fusion(%x, %w), kind=kOutput, calls=%fused_computation.10
}""",
    )
    k = one(text)
    assert (k.kind, k.dtype) == ("conv", "bf16")
    # The taps on real input only: per spatial dimension, 32 outputs x 3 taps less the
    # two that fall on the padding (the first output's first, the last one's last).
    assert k.flops == 2 * (8 * 16) * (32 * 3 - 2) ** 2 * 3
    assert k.bytes == 8 * 32 * 32 * 3 * 2 + 27 * 16 * 2 + 8 * 32 * 32 * 16 * 4


def test_a_gradient_written_as_a_far_padded_convolution_costs_its_real_work():
    # libtpu writes a 1x1 convolution's input gradient with its roles swapped: the 1x1
    # kernel as the input, the gradient as a 56x56 "kernel", padded by 55. Its window
    # counted whole would be 56*56 taps per output; on real input there is one.
    text = module(
        """%fused_computation.7 (param_0: bf16[1,1,64,64], param_1: bf16[128,56,56,64]) -> bf16[128,56,56,64] {
  %param_0 = bf16[1,1,64,64]{3,2,1,0} parameter(0)
  %param_1 = bf16[128,56,56,64]{0,3,2,1} parameter(1)
  ROOT %convolution.391 = bf16[128,56,56,64]{0,3,2,1} convolution(%param_0, %param_1), window={size=56x56 pad=55_55x55_55 rhs_reversal=1x1}, dim_labels=01bf_o01i->f01b
}""",
        """ENTRY %main (w: bf16[1,1,64,64], g: bf16[128,56,56,64]) -> bf16[128,56,56,64] {
  %w = bf16[1,1,64,64]{3,2,1,0} parameter(0)
  %g = bf16[128,56,56,64]{0,3,2,1} parameter(1)
  ROOT %fusion.1346 = bf16[128,56,56,64]{0,3,2,1} fusion(%w, %g), kind=kOutput, calls=%fused_computation.7
}""",
    )
    k = one(text)
    assert k.flops == 2 * (128 * 56 * 56 * 64) * 64  # a 64-deep dot per output element


def test_jaxcnns_onednn_calls_are_the_forward_convolutions_flops():
    from jaxcnn import onednn

    assert onednn.TARGET_PREFIX == K.ONEDNN_TARGET_PREFIX
    calls = {"fwd": ("%x, %w", "f32[8,26,26,32]"), "bwd_data": ("%dy, %w", "f32[8,28,28,1]")}
    calls["bwd_weights"] = ("%x, %dy", "f32[3,3,1,32]")
    for kind, (operands, result) in calls.items():
        text = module(
            f"""ENTRY %main (x: f32[8,28,28,1], w: f32[3,3,1,32], dy: f32[8,26,26,32]) -> {result} {{
  %x = f32[8,28,28,1]{{3,2,1,0}} parameter(0)
  %w = f32[3,3,1,32]{{3,2,1,0}} parameter(1)
  %dy = f32[8,26,26,32]{{3,2,1,0}} parameter(2)
  ROOT %ffi_call.1 = {result}{{3,2,1,0}} custom-call({operands}), custom_call_target="jaxcnn_onednn_conv_{kind}", api_version=API_VERSION_TYPED_FFI, backend_config={{pb = 0 : i64, pl = 0 : i64, sh = 1 : i64}}
}}"""
        )
        k = one(text)
        assert (k.kind, k.flops, k.note) == ("conv", 2 * (8 * 26 * 26 * 32) * 9 * 1, ""), kind


def test_an_unknown_custom_call_counts_no_flops_and_says_so():
    text = module(
        """ENTRY %main (x: f32[100]) -> f32[100] {
  %x = f32[100]{0} parameter(0)
  ROOT %custom-call.1 = f32[100]{0} custom-call(%x), custom_call_target="SomeVendorKernel"
}"""
    )
    k = one(text)
    assert (k.kind, k.flops, k.bytes) == ("custom", 0, 800)
    assert "SomeVendorKernel" in k.note and "flops unknown" in k.note


def trip_config(trips: int | None) -> str:
    return "" if trips is None else f', backend_config={{"known_trip_count":{{"n":"{trips}"}}}}'


def body_and_cond(name: str, inner_trips: int | None = None) -> list[str]:
    """A loop over (counter, f32[1024]) whose body runs one fusion, then (given
    `inner_trips`) the loop `inner`."""
    tail = "  ROOT %out = (s32[], f32[1024]{0}) tuple(%i, %f)"
    if inner_trips is not None:
        tail = f"""  %t.in = (s32[], f32[1024]{{0}}) tuple(%i, %f)
  %w.in = (s32[], f32[1024]{{0}}) while(%t.in), condition=%inner_cond, body=%inner_body{trip_config(inner_trips)}
  %f2 = f32[1024]{{0}} get-tuple-element(%w.in), index=1
  ROOT %out = (s32[], f32[1024]{{0}}) tuple(%i, %f2)"""
    return [
        f"""%{name}_body (p: (s32[], f32[1024])) -> (s32[], f32[1024]) {{
  %p = (s32[], f32[1024]{{0}}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[1024]{{0}} get-tuple-element(%p), index=1
  %f = f32[1024]{{0}} fusion(%x), kind=kLoop, calls=%double
{tail}
}}""",
        f"""%{name}_cond (p: (s32[], f32[1024])) -> pred[] {{
  %p = (s32[], f32[1024]{{0}}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  ROOT %lt = pred[] fusion(%i), kind=kLoop, calls=%less
}}""",
    ]


HELPERS = [
    """%double (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  ROOT %add = f32[1024]{0} add(%x, %x)
}""",
    """%less (i: s32[]) -> pred[] {
  %i = s32[] parameter(0)
  %n = s32[] constant(3)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}""",
]


def loop_program(outer_trips: int, nested: bool) -> str:
    inner = body_and_cond("inner") if nested else []
    outer = body_and_cond("outer", inner_trips=5 if nested else None)
    entry = f"""ENTRY %main (x: f32[1024]) -> f32[1024] {{
  %x = f32[1024]{{0}} parameter(0)
  %zero = s32[] constant(0)
  %t = (s32[], f32[1024]{{0}}) tuple(%zero, %x)
  %w = (s32[], f32[1024]{{0}}) while(%t), condition=%outer_cond, body=%outer_body{trip_config(outer_trips)}
  ROOT %r = f32[1024]{{0}} get-tuple-element(%w), index=1
}}"""
    return module(*HELPERS, *inner, *outer, entry)


def counts(ks: list[K.Kernel]) -> list[tuple[str, int]]:
    return [(k.name, k.count) for k in ks]


def test_a_loop_runs_its_body_trip_count_times_and_its_condition_once_more():
    ks = K.kernels(loop_program(7, nested=False))
    assert counts(ks) == [("lt", 8), ("f", 7)]
    assert all(k.note == "" for k in ks)
    assert K.totals(ks)["bytes"] == 8 * (4 + 1) + 7 * (4096 + 4096)


def test_nested_loops_multiply_their_trip_counts():
    ks = K.kernels(loop_program(3, nested=True))
    # outer condition 3+1; outer body's fusion 3; inner condition (5+1)*3; inner body 5*3
    assert counts(ks) == [("lt", 4), ("f", 3), ("lt", 18), ("f", 15)]


def inferred_loop(step: int) -> str:
    """A loop with no backend trip count: i from 2 while i < 7, by `step`."""
    return module(
        *HELPERS,
        f"""%b (p: (s32[], f32[1024])) -> (s32[], f32[1024]) {{
  %p = (s32[], f32[1024]{{0}}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[1024]{{0}} get-tuple-element(%p), index=1
  %f = f32[1024]{{0}} fusion(%x), kind=kLoop, calls=%double
  %step = s32[] constant({step})
  %next = s32[] add(%i, %step)
  ROOT %out = (s32[], f32[1024]{{0}}) tuple(%next, %f)
}}""",
        """%c (p: (s32[], f32[1024])) -> pred[] {
  %p = (s32[], f32[1024]{0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(7)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}""",
        """ENTRY %main (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  %two = s32[] constant(2)
  %start = s32[] copy(%two)
  %t = (s32[], f32[1024]{0}) tuple(%start, %x)
  %w = (s32[], f32[1024]{0}) while(%t), condition=%c, body=%b
  ROOT %r = f32[1024]{0} get-tuple-element(%w), index=1
}""",
    )


def test_a_loop_without_a_backend_trip_count_reads_it_from_its_counter():
    ks = K.kernels(inferred_loop(step=1))
    assert counts(ks) == [("start", 1), ("lt", 6), ("f", 5), ("next", 5)]
    assert all(k.note == "" for k in ks)


def test_a_loop_whose_count_cannot_be_read_runs_once_and_says_so():
    ks = K.kernels(inferred_loop(step=2))  # not a step of one: not inferred
    assert counts(ks) == [("start", 1), ("lt", 2), ("f", 1), ("next", 1)]
    assert all("trip count unknown" in k.note for k in ks[1:]) and ks[0].note == ""


def test_a_conditional_runs_its_costliest_branch_and_a_call_its_computation():
    text = module(
        *HELPERS,
        """%cheap (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  ROOT %copy.1 = f32[1024]{0} copy(%x)
}""",
        """%dear (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  %a = f32[1024]{0} fusion(%x), kind=kLoop, calls=%double
  ROOT %b = f32[1024]{0} fusion(%a), kind=kLoop, calls=%double
}""",
        """%command_buffer (x: f32[1024]) -> f32[1024] {
  %x = f32[1024]{0} parameter(0)
  ROOT %c = f32[1024]{0} fusion(%x), kind=kLoop, calls=%double
}""",
        """ENTRY %main (i: s32[], x: f32[1024]) -> f32[1024] {
  %i = s32[] parameter(0)
  %x = f32[1024]{0} parameter(1)
  %cond = f32[1024]{0} conditional(%i, %x, %x), branch_computations={%cheap, %dear}
  ROOT %call = f32[1024]{0} call(%cond), to_apply=%command_buffer
}""",
    )
    assert counts(K.kernels(text)) == [("a", 1), ("b", 1), ("c", 1)]


def collective(op: str, groups: str, operand: str = "f32[1000]", result: str = "f32[1000]") -> str:
    done = f"\n  ROOT %d = {result}{{0}} {op}-done(%s)" if op.endswith("start") else ""
    op_name = op.removesuffix("-start")
    start = f"{op_name}-start" if done else op
    root = "" if done else "ROOT "
    return module(
        *HELPERS,
        f"""ENTRY %main (x: {operand}) -> {result} {{
  %x = {operand}{{0}} parameter(0)
  {root}%s = {result}{{0}} {start}(%x), channel_id=1, replica_groups={groups}, use_global_device_ids=true, to_apply=%double{done}
}}""",
        header="HloModule m, num_partitions=8",
    )


@pytest.mark.parametrize(
    "groups", ["{{0,1,2,3},{4,5,6,7}}", "[2,4]<=[8]", "mesh['x'=2,'y'=4] {'y'}"]
)
def test_an_all_reduce_moves_the_ring_figure_of_its_operand(groups):
    k = one(collective("all-reduce", groups))
    assert (k.kind, k.flops, k.count, k.note) == ("collective", 0, 1, "")
    assert k.collective_bytes == 2 * (4 - 1) / 4 * 4000
    assert k.bytes == 4000 + 4000


def test_an_async_collective_pair_is_one_kernel():
    k = one(collective("all-reduce-start", "{{0,1,2,3},{4,5,6,7}}"))
    assert (k.name, k.collective_bytes) == ("s", 1.5 * 4000)


def test_an_all_gather_moves_the_other_shards_and_an_empty_group_is_every_device():
    k = one(collective("all-gather", "{}", operand="f32[250]", result="f32[2000]"))
    assert k.collective_bytes == (8 - 1) * 1000  # 8 partitions, each shard 1000 bytes
    assert k.bytes == 1000 + 8000


def test_instructions_that_launch_nothing_are_no_kernels():
    nothing = """  %p = f32[1024]{0} parameter(0)
  %c = f32[] constant(1)
  %b = f32[32,32]{1,0} bitcast(%p)
  %t = (f32[1024]{0}, f32[]) tuple(%p, %c)
  %g = f32[1024]{0} get-tuple-element(%t), index=0
  %cs = (f32[1024]{0:S(1)}, f32[1024]{0}, u32[]) copy-start(%g)
  %cd = f32[1024]{0:S(1)} copy-done(%cs)
  %id = u32[] partition-id()
  %tok = token[] after-all()
  %alloc = f32[2]{0:S(1)} custom-call(), custom_call_target="AllocateBuffer\""""

    def program(extra: str) -> str:
        entry = f"ENTRY %main (p: f32[1024]) -> f32[1024] {{\n{nothing}\n{extra}\n}}"
        return module(entry)

    assert K.kernels(program("  ROOT %r = f32[1024]{0} bitcast(%cd)")) == []
    # The positive control: the same program with one copy launches exactly that copy.
    assert counts(K.kernels(program("  ROOT %r = f32[1024]{0} copy(%cd)"))) == [("r", 1)]


def test_the_module_needs_no_jax(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # any `import jax` now fails
    spec = importlib.util.spec_from_file_location("kernels_alone", K.__file__)
    alone = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "kernels_alone", alone)  # dataclasses look it up
    spec.loader.exec_module(alone)
    assert alone.kernels(GEMM_FUSION)[0].flops == 2 * 64 * 32 * 256


def test_text_without_an_entry_computation_is_one_clear_error():
    with pytest.raises(ValueError, match="no ENTRY computation.*compiled.as_text"):
        K.kernels("HloModule m\n")


# --- The model ------------------------------------------------------------------------

RATES = Rates({"f32": 1e12, "bf16": 4e12}, bytes_per_s=1e11, interconnect_bytes_per_s=1e9)
COSTS = price.Constants(compute_efficiency=0.5, memory_efficiency=0.8, kernel_overhead_s=1e-6)


def kernel(kind="fusion", flops=0.0, nbytes=0.0, dtype=None, count=1, moved=0.0) -> K.Kernel:
    return K.Kernel("k", kind, flops, nbytes, dtype, count, moved)


def test_a_compute_bound_kernel_takes_its_flops_at_the_efficient_peak_plus_a_launch():
    t = price.step_time([kernel("gemm", 1e9, 1e6, "f32")], RATES, COSTS)
    # compute 1e9 / (1e12 * 0.5) = 2 ms; memory 1e6 / (1e11 * 0.8) = 12.5 us
    assert t["seconds"] == pytest.approx(2e-3 + 1e-6)
    assert t["compute_s"] == pytest.approx(2e-3) and t["memory_s"] == pytest.approx(12.5e-6)
    assert t["bound_by"] == {"compute": 1, "memory": 0, "overhead": 0, "collective": 0}


def test_the_peak_is_the_one_for_the_kernels_input_type():
    t = price.step_time([kernel("conv", 1e9, 1e6, "bf16")], RATES, COSTS)
    assert t["seconds"] == pytest.approx(1e9 / (4e12 * 0.5) + 1e-6)


def test_a_memory_bound_kernel_takes_its_bytes_at_the_efficient_bandwidth():
    t = price.step_time([kernel(nbytes=8e7, count=3)], RATES, COSTS)
    assert t["seconds"] == pytest.approx(3 * (8e7 / (1e11 * 0.8) + 1e-6))  # 3 x 1.001 ms
    assert t["kernels"] == 3 and t["overhead_s"] == pytest.approx(3e-6)
    assert t["bound_by"] == {"compute": 0, "memory": 3, "overhead": 0, "collective": 0}


def test_a_tiny_kernel_costs_its_launch():
    t = price.step_time([kernel(nbytes=8), kernel("gemm", 1000, 8, "f32")], RATES, COSTS)
    assert t["seconds"] == pytest.approx(2e-6 + 8 / 8e10 + 1000 / 5e11)
    assert t["bound_by"] == {"compute": 0, "memory": 0, "overhead": 2, "collective": 0}


def test_a_collective_adds_its_bytes_over_the_interconnect():
    t = price.step_time([kernel("collective", 0, 8000, moved=6000)], RATES, COSTS)
    assert t["seconds"] == pytest.approx(8000 / 8e10 + 1e-6 + 6000 / 1e9)
    assert t["collective_s"] == pytest.approx(6e-6) and t["bound_by"]["collective"] == 1


def test_missing_rates_and_bad_constants_are_one_clear_error_each():
    with pytest.raises(ValueError, match="computes in s8: its rates give no peak"):
        price.step_time([kernel("gemm", 1e6, 10, "s8")], RATES, COSTS)
    # bf16 on a chip with no bf16 peak runs on f32's units, at f32's peak.
    f32_only = dataclasses.replace(RATES, peak_flops_per_s={"f32": 1e12})
    bf16 = price.step_time([kernel("gemm", 1e9, 0, "bf16")], f32_only, COSTS)
    assert bf16["compute_s"] == pytest.approx(1e9 / (1e12 * 0.5))
    # No interconnect figure (a CPU's devices, a TPU v2): collectives at the memory's rate.
    alone = dataclasses.replace(RATES, interconnect_bytes_per_s=None)
    moved = price.step_time([kernel("collective", 0, 10, moved=5)], alone, COSTS)
    assert moved["collective_s"] == pytest.approx(5 / 1e11)
    with pytest.raises(ValueError, match="compute_efficiency"):
        dataclasses.replace(COSTS, compute_efficiency=0)
    # Above 1 is a rate a run measured that the kernels pass, not an error.
    assert dataclasses.replace(COSTS, compute_efficiency=1.5).compute_efficiency == 1.5


def test_a_kernel_that_fits_in_cache_moves_its_bytes_at_the_caches_rate():
    cached = dataclasses.replace(COSTS, cache_memory_efficiency=8.0)
    small = kernel(nbytes=price.CACHE_BYTES, count=2)  # at the threshold: from cache
    large = kernel(nbytes=price.CACHE_BYTES + 1)
    t = price.step_time([small, large], RATES, cached)
    in_cache = price.CACHE_BYTES / (1e11 * 8.0)
    from_dram = (price.CACHE_BYTES + 1) / (1e11 * 0.8)
    assert t["memory_s"] == pytest.approx(2 * in_cache + from_dram)
    assert t["seconds"] == pytest.approx(2 * in_cache + from_dram + 3e-6)
    # Without a cache efficiency (a GPU's, a TPU's), every kernel is priced at DRAM's.
    plain = price.step_time([small, large], RATES, COSTS)
    assert plain["memory_s"] == pytest.approx((3 * price.CACHE_BYTES + 1) / (1e11 * 0.8))


def test_library_calls_and_16_bit_float_fusions_move_their_bytes_at_their_own_rates():
    costs = dataclasses.replace(
        COSTS,
        cache_memory_efficiency=8.0,
        library_memory_efficiency=0.1,
        half_float_memory_efficiency=0.2,
    )
    big = price.CACHE_BYTES * 4
    gemm = kernel("gemm", 1, big, "f32")  # its bytes bound it: 1 FLOP
    half = kernel("fusion", 0, big, "bf16")
    small_half = kernel("fusion", 0, 1024, "bf16")  # its own rate, though it fits in cache
    plain = kernel("fusion", 0, big)
    rates = [price.step_time([k], RATES, costs)["memory_s"] * 1e11 / k.bytes for k in (gemm, half)]
    assert rates == pytest.approx([1 / 0.1, 1 / 0.2])
    assert price.step_time([small_half], RATES, costs)["memory_s"] == pytest.approx(
        1024 / (1e11 * 0.2)
    )
    # Positive control: an f32 fusion of the same size at the DRAM rate; and without the
    # two (a GPU's, a TPU's costs), every kernel is priced by its size alone.
    assert price.step_time([plain], RATES, costs)["memory_s"] == pytest.approx(big / (1e11 * 0.8))
    alike = price.step_time([gemm, half, plain], RATES, COSTS)["memory_s"]
    assert alike == pytest.approx(3 * big / (1e11 * 0.8))


def test_a_fusion_of_a_16_bit_float_type_says_which_and_an_f32_one_none():
    def program(dtype: str) -> str:
        return module(
            f"""%fused (p0: f32[256]) -> f32[256] {{
  %p0 = f32[256]{{0}} parameter(0)
  %c = {dtype}[256]{{0}} convert(%p0)
  ROOT %back = f32[256]{{0}} convert(%c)
}}""",
            """ENTRY %main (a: f32[256]) -> f32[256] {
  %a = f32[256]{0} parameter(0)
  ROOT %convert_fusion = f32[256]{0} fusion(%a), kind=kLoop, calls=%fused
}""",
        )

    assert (one(program("bf16")).kind, one(program("bf16")).dtype) == ("fusion", "bf16")
    assert one(program("f16")).dtype == "f16"
    assert one(program("f32")).dtype is None  # positive control: the same loop in f32


def test_a_library_convolution_pays_its_own_fixed_cost_apart_from_a_gemm():
    costs = dataclasses.replace(COSTS, library_overhead_s=5e-6, conv_overhead_s=2e-5)
    ks = [kernel("gemm", 1, 1, "f32"), kernel("conv", 1, 1, "f32", count=2), kernel(nbytes=1)]
    assert price.step_time(ks, RATES, costs)["overhead_s"] == pytest.approx(5e-6 + 2 * 2e-5 + 1e-6)
    without = dataclasses.replace(costs, conv_overhead_s=None)
    assert price.step_time(ks, RATES, without)["overhead_s"] == pytest.approx(3 * 5e-6 + 1e-6)


# --- Real compiled programs -----------------------------------------------------------


def test_the_gpu_t4_train_step_is_the_kernels_counted_by_hand():
    ks = K.kernels(stored("gpu-t4_mnist_train"))
    by_kind: dict[str, int] = {}
    for k in ks:
        by_kind[k.kind] = by_kind.get(k.kind, 0) + k.count
    # Counted in the text's ENTRY: 43 fusions (30 kLoop, 13 kInput), 6 __cublas$lt$matmul,
    # 5 __cudnn$conv* (2 forward, 2 filter gradients, 1 input gradient), 4 copies.
    assert by_kind == {"fusion": 43, "gemm": 6, "conv": 5, "copy": 4}
    assert len(ks) == 58 and all(k.count == 1 and k.note == "" for k in ks)
    # Dense_0 forward: [128,1600] @ [1600,128] + bias [128] -> [128,128], f32.
    dense = next(k for k in ks if k.name == "cublas-lt-matmul.2")
    assert dense.flops == 2 * 128 * 128 * 1600
    assert dense.bytes == (128 * 1600 + 1600 * 128 + 128 + 128 * 128) * 4


def test_the_gpu_epoch_program_is_the_step_twice_and_reads_only_its_batch():
    step = K.totals(K.kernels(stored("gpu-t4_mnist_train")))
    ks = K.kernels(stored("gpu-t4_mnist_epoch"))  # a two-step scan: known_trip_count 2
    assert K.totals(ks)["flops"] == 2 * step["flops"]
    assert {k.count for k in ks} == {1, 2, 3}  # outside, body, condition (2 + 1)
    # The batch is gathered from the dataset's 256 images: read 128 of them (u8), the
    # order's row of 128 indices (s32), the step (s32); write 128 f32 images.
    gather = next(k for k in ks if k.name == "loop_multiply_fusion")
    assert gather.count == 2
    assert gather.bytes == BATCH * 784 + BATCH * 4 + 4 + BATCH * 784 * 4


def test_the_tpu_epoch_loop_count_is_read_from_its_counter():
    ks = K.kernels(stored("tpu-v5e-1_mnist_epoch"))  # libtpu gives no known_trip_count
    # Nothing unknown: not the count, nor the FLOPs (TPU's gather index helpers are
    # custom calls inside fusions, computing no dots).
    assert all(k.note == "" for k in ks)
    assert max(k.count for k in ks) == 3
    # Two steps of the TPU train step: jaxcnn.flops' in-bounds count (1,970,798,592, what
    # cuDNN does on a GPU), not its dense one (2,197,291,008), which also counts the taps
    # of the input gradient's padded convolution that fall on its padding.
    assert K.totals(ks)["flops"] == 2 * 1_970_798_592


def test_the_sharded_tpu_step_all_reduces_the_gradients_over_eight_chips():
    ks = K.kernels(stored("tpu-v5e-8_mnist_train"))
    collectives = [k for k in ks if k.kind == "collective"]
    # One all-reduce of a scalar (the batch's count), one of the gradients and two
    # scalars; replica groups given as mesh['axis_0'=8] {'axis_0'}.
    operand_bytes = 4 + 4 * (MNIST_PARAMS + 2)
    assert len(collectives) == 2 and all(k.note == "" for k in collectives)
    assert sum(k.collective_bytes for k in collectives) == 2 * 7 / 8 * operand_bytes
    assert K.totals(ks)["flops"] == 1_970_798_592 / 8  # each chip's eighth of the batch


def test_a_summary_is_json_and_gives_back_the_same_kernels_and_time():
    ks = K.kernels(stored("tpu-v5e-8_mnist_train")) + K.kernels(stored("gpu-t4_mnist_epoch"))
    rows = K.summarize(ks)
    assert json.loads(json.dumps(rows)) == rows
    assert len(rows) < len(ks)  # identical kernels merged
    back = K.from_summary(rows)
    assert K.summarize(back) == rows
    assert K.totals(back) == K.totals(ks)
    rates = dataclasses.replace(RATES, peak_flops_per_s={"f32": 8e12, "bf16": 65e12})
    time, time_back = price.step_time(ks, rates, COSTS), price.step_time(back, rates, COSTS)
    assert time_back.pop("bound_by") == time.pop("bound_by")
    assert time_back == pytest.approx(time)  # summed in another order
    noted = K.from_summary([[2, "custom", 0, 800, None, 0, "custom call X: flops unknown"]])
    assert noted[0].note == "custom call X: flops unknown" and noted[0].count == 2


def test_a_summary_row_of_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kernel kind 'kernal'"):
        K.from_summary([[1, "kernal", 0, 8, None, 0]])


# --- Compiled here --------------------------------------------------------------------


def compiled_text(target: str | None, program: str = "train", strategy: str = "single") -> str:
    """`compiled.as_text()` of mnist_cnn's placed train step (or two-step epoch program)
    at batch 128, for `target` (None: this machine's CPU), as compile_only builds it."""
    import jax

    from experiments.harness import compile_only
    from experiments.records.workload import Workload
    from jaxcnn import targets

    loop = "device" if program == "epoch" else "step"
    if target is None:
        workload, devices = Workload(batch_size=BATCH, loop=loop), jax.devices("cpu")[:1]
    else:
        workload = Workload(
            batch_size=BATCH, kind="compile", target=target, strategy=strategy, loop=loop
        )
        devices = list(targets.abstract_devices(compile_only.check(workload)))
    compiled, _ = compile_only.step_program(workload, devices)
    return compiled.as_text()


def jaxpr_flops(target: str | None):
    import jax

    from experiments.harness import compile_only
    from experiments.records.workload import Workload
    from jaxcnn import flops, targets, train

    workload = Workload(batch_size=BATCH, kind="compile" if target else "train", target=target)
    devices = (
        list(targets.abstract_devices(compile_only.check(workload)))
        if target
        else jax.devices("cpu")[:1]
    )
    shapes = compile_only.abstract_state(workload, devices)
    return flops.count(train.train_step, shapes, compile_only.abstract_batch(workload, BATCH))


def lower_bound_bytes() -> int:
    """Adam's step reads and writes the parameters and both moments (f32), and reads
    the batch (uint8 images, int32 labels, f32 mask): no program moves less."""
    from jaxcnn import models

    assert models.param_counts("mnist_cnn") == (MNIST_PARAMS, 0)
    return 2 * 3 * 4 * MNIST_PARAMS + BATCH * (28 * 28 + 4 + 4)


def test_the_cpu_train_steps_kernels_do_the_jaxprs_flops():
    ks = K.kernels(compiled_text(None))
    # XLA:CPU runs the CPU formulation's convolutions as dots (im2col), which the jaxpr
    # already has: the same dots, the same FLOPs, to the unit.
    assert K.totals(ks)["flops"] == jaxpr_flops(None).total
    assert K.totals(ks)["bytes"] >= lower_bound_bytes()
    assert {k.kind for k in ks} <= {"fusion", "gemm", "copy", "other"}


needs_targets = needs_extra("targets")


@needs_targets
def test_the_gpu_train_steps_kernels_do_the_jaxprs_in_bounds_flops():
    ks = K.kernels(compiled_text("gpu-t4"))
    count = jaxpr_flops("gpu-t4")
    # cuDNN's input-gradient call does the forward convolution's multiply-adds; the
    # jaxpr's transposed convolution also counts the taps on its padding (Conv_1's
    # gradient over 11x11 maps padded by 2). So the kernels do the in-bounds count.
    assert K.totals(ks)["flops"] == count.in_bounds < count.total
    assert K.totals(ks)["bytes"] >= lower_bound_bytes()
    assert sum(k.count for k in ks) == 58  # as the stored program of this version


def write_fixtures() -> None:
    """Compile the stored programs again (the debug sections left out)."""
    sections = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
    programs = {
        "gpu-t4_mnist_train": ("gpu-t4", "train", "single"),
        "gpu-t4_mnist_epoch": ("gpu-t4", "epoch", "single"),
        "tpu-v5e-1_mnist_epoch": ("tpu-v5e-1", "epoch", "single"),
        "tpu-v5e-8_mnist_train": ("tpu-v5e-8", "train", "sharded"),
    }
    DATA.mkdir(exist_ok=True)
    for name, (target, program, strategy) in programs.items():
        kept, skipping = [], False
        for line in compiled_text(target, program, strategy).splitlines():
            if line in sections:
                skipping = True
            elif skipping and not line.strip():
                skipping = False
                continue
            if not skipping:
                kept.append(line)
        text = "\n".join(kept) + "\n"
        (DATA / f"{name}.hlo.gz").write_bytes(gzip.compress(text.encode(), 9, mtime=0))
        print(f"{name}: {len(K.kernels(text))} kernels")


if __name__ == "__main__":
    if sys.argv[1:] != ["--write-fixtures"]:
        sys.exit("usage: python tests/test_kernels.py --write-fixtures")
    write_fixtures()


def test_an_xla_cpu_small_call_is_one_kernel_not_its_loops_body_times_its_trips():
    def program(attributes: str) -> str:
        return module(
            *HELPERS,
            """%body (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %c = f32[4]{0} copy(%x)
  ROOT %f = f32[4]{0} fusion(%c), kind=kLoop, calls=%double
}""",
            """%cond (x: f32[4]) -> pred[] {
  %x = f32[4]{0} parameter(0)
  ROOT %t = pred[] constant(true)
}""",
            """%rounds (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %w = f32[4]{0} while(%x), condition=%cond, body=%body, backend_config={"known_trip_count":{"n":"5"}}
}""",
            f"""ENTRY %main (x: f32[4]) -> f32[4] {{
  %x = f32[4]{{0}} parameter(0)
  ROOT %call.2 = f32[4]{{0}} call(%x), to_apply=%rounds{attributes}
}}""",
        )

    small = K.kernels(program(', frontend_attributes={xla_cpu_small_call="true"}'), "cpu")
    assert [(k.name, k.kind, k.count, k.bytes) for k in small] == [("call.2", "fusion", 1, 32)]
    # Positive control: an ordinary call runs its computation's kernels, the loop's
    # body five times.
    plain = K.kernels(program(""), "cpu")
    assert counts(plain) == [("c", 5), ("f", 5)]


def test_the_kernel_kinds_benchmark_groups_trace_events_by_the_kernel_of_the_same_name():
    from benchmarks.cpu_kernel_kinds import by_kind

    ks = [
        K.Kernel("copy.1", "copy", 0, 32, None, 1),
        K.Kernel("fusion.2", "fusion", 0, 8 << 20, None, 1),
        K.Kernel("dot", "gemm", 1e6, 1e5, "f32", 1),
        K.Kernel("copy.9", "copy", 0, 32, None, 5),  # inside a loop with no event
        K.Kernel("fusion.4", "fusion", 0, 8 << 20, "bf16", 1),
    ]
    events = [("copy.1", 400), ("copy.1", 600), ("fusion.2", 50_000), ("dot", 7_000)]
    events += [("dot", 9_000), ("while.3", 1_000_000), ("ThunkExecutor::Execute", 10)]
    events += [("fusion.4", 250_000)]
    found = by_kind(ks, events, steps=2)
    assert found["groups"]["copy/tiny"] == {
        "kernels_per_step": 1.0,
        "us_per_step": 0.5,
        "median_us": 0.5,
        "p10_us": 0.4,
        "gb_per_s": pytest.approx(64 / 1e-6 / 1e9),  # 64 bytes in 1 us
    }
    assert found["groups"]["fusion/big"]["us_per_step"] == 25.0
    # A 16-bit float fusion is a group of its own, with its own rate: 5x slower here.
    assert found["groups"]["fusion-bf16/big"]["us_per_step"] == 125.0
    rates = (found["groups"][g]["gb_per_s"] for g in ("fusion/big", "fusion-bf16/big"))
    assert pytest.approx(next(rates) / next(rates)) == 5.0
    assert found["groups"]["gemm/small"]["kernels_per_step"] == 1.0
    assert found["kernels_not_traced"] == {"copy": 1}


def test_the_kernel_kinds_benchmark_refuses_a_bad_flag_before_any_work(tmp_path, capsys):
    from benchmarks.cpu_kernel_kinds import main

    out = str(tmp_path / "out.json")
    for argv, says in (
        (["--dtype", "float16", "--out", out], "invalid choice: 'float16'"),
        (["--width", "0", "--out", out], "take positive integers"),
        (["--out", str(tmp_path / "no" / "out.json")], "no such folder"),
    ):
        with pytest.raises(SystemExit) as stopped:
            main(argv)
        assert stopped.value.code == 2
        assert says in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
