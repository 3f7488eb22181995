"""Kind `matmul`: one jitted square matmul of side `batch_size` in the workload's dtype,
timed on one device: 2 n^3 FLOPs, the device's arithmetic ceiling next to the vendor's
figure."""

from __future__ import annotations

from typing import Any

from experiments.harness import measure
from experiments.harness.runners.interface import Outcome, RunContext, outcome
from experiments.records.workload import Workload


def run_matmul(workload: Workload, context: RunContext) -> Outcome:
    devices = context.devices
    n, dtype = workload.batch_size, workload.compute_dtype

    def timed(learned: dict[str, Any]) -> dict[str, Any]:  # an n that does not fit: `oom`
        compiled, compile_s, step_time = measure.time_matmul(
            devices[0], dtype, n, steps=workload.timing_steps, seed=workload.seed
        )
        achieved, mfu = measure.utilization(2 * n**3, step_time["median"], devices, dtype)
        return dict(
            matmul={"n": n, "dtype": dtype, "flops": 2 * n**3, "tflops": achieved},
            params={"trainable": 0, "non_trainable": 0},
            compile_time_s={"train": compile_s, "eval": None},
            step_time_s=step_time,
            images_per_s=None,
            flops={"per_step": 2 * n**3},
            achieved_tflops=achieved,
            mfu={
                **mfu,
                "measured_dtype": None,
                "measured_ceiling_tflops": None,
                "vs_measured": None,
            },
            memory=measure.memory(compiled, devices[0]),
            matmul_ceiling=context.ceiling,
        )

    return outcome(timed)
