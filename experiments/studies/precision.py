"""Same accuracy in fp32 and bf16?

TPUs run bf16 natively (and f32 matmuls as bf16 passes by default); recent NVIDIA
GPUs run f32 matmuls as TF32 by default. `mnist_cnn` on MNIST, batch 128, in f32
and in bf16 compute (params stay f32), and on a GPU also f32 with matmul precision
"highest" (TF32 off): step time and per-epoch accuracy.

Command: python -m experiments.run --study=precision --device=gpu --data-dir=DIR
Sizes: 5 epochs on accelerators; CPU: 1 epoch. Smoke: `mlp` n=8 on digits, 3 steps
(the bf16 path, not the CNN, is what a smoke run checks; the CNNs compile slowly on
a CPU).
Expected: CPU ~5 min; smoke ~5 s; one H100 ~1 min (measured once); a TPU unmeasured.
"""

from __future__ import annotations

from experiments.records.workload import Workload
from experiments.studies.base import SMOKE_TRAIN, TINY_MLP, Context, Study, dataset_for


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    common = {
        "model": "mnist_cnn",
        "dataset": dataset_for(ctx),
        "batch_size": 128,
        "epochs": 1 if ctx.cpu else 5,
        "timing_steps": 20,
    }
    if ctx.smoke:
        common = {"model": "mlp", "model_overrides": TINY_MLP, **SMOKE_TRAIN}
    variants = [("f32", "default"), ("bf16", "default")]
    if ctx.platform == "gpu":
        variants.append(("f32", "highest"))
    return [
        Workload(**common, precision=p, matmul_precision=m, study="precision", num_devices=1)
        for p, m in variants
    ]


STUDY = Study(
    "precision",
    workloads=workloads,
    question="Same accuracy, and what speed, in f32 and bf16?",
)
