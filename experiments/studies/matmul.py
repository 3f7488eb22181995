"""How close does the device get to its peak?

Seed 004: a matmul kernel 5x faster on a K20X than on a 6-core i7. Square matmuls
n = 256, 512, ..., 8192 in f32 and bf16, one jitted call timed 20 times: TFLOP/s
vs n, against the vendor's peak for the precision they run in. On a GPU f32 is
also run with matmul precision "highest" (true fp32 instead of TF32).

Command: python -m experiments.run --study=matmul --device=gpu
Sizes: full on accelerators. CPU: n up to 4096 (n=8192 is 1.1 TFLOP a call, ~5 s
here, 2 min per dtype for 22 calls). Smoke: n = 16, 32.
Expected: CPU ~40 s (n=2048 takes ~85 ms in f32, ~105 ms in bf16); smoke ~2 s;
GPU/TPU < 1 min (a guess).
"""

from __future__ import annotations

from experiments.records.workload import Workload
from experiments.studies.base import Context, Study
from experiments.studies.page import Page, Section, select, where

MATMUL_SIZES = (256, 512, 1024, 2048, 4096, 8192)
MATMUL_SIZES_CPU = (256, 512, 1024, 2048, 4096)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    sizes, timing = (MATMUL_SIZES_CPU if ctx.cpu else MATMUL_SIZES), 20
    if ctx.smoke:
        sizes, timing = (16, 32), 3
    variants = [("f32", "default"), ("bf16", "default")]
    if ctx.platform == "gpu":
        variants.append(("f32", "highest"))
    return [
        Workload(
            model="matmul",
            dataset="none",
            batch_size=n,
            epochs=0,
            precision=precision,
            matmul_precision=matmul_precision,
            timing_steps=timing,
            study="matmul",
            kind="matmul",
            num_devices=1,
        )
        for precision, matmul_precision in variants
        for n in sizes
    ]


STUDY = Study(
    "matmul",
    workloads=workloads,
    question="How close does the device get to its peak FLOP/s? (seed 004)",
    page=Page("FLOP/s reached", [
        Section("Matmul rate per size (measured)", select(quantity="flops_per_s", model="matmul"),
                "device precision value how"),
        Section("Each machine's best matmul rate (its measured peak)",
                select(quantity="peak_flops_per_s"), "device precision value selection"),
        Section("Train steps (measured)",
                where(lambda t: (t.quantity == "flops_per_s") & (t.model != "matmul")
                      & (t.kind == "measured")),
                "model batch precision device value how"),
        Section("Train steps against a ceiling (measured): their chip's own matmul rate, "
                "a datasheet's peak (`mfu`)",
                select(quantity=["matmul_fraction", "mfu"], kind="measured"),
                "model batch precision device quantity value how note"),
    ]),
)  # fmt: skip
