"""python -m benchmarks.cpu_kernel_kinds [--width N] [--batch B] [--steps S]
[--dtype bfloat16] --out FILE.json: what each kind of kernel costs on this CPU, measured
by XLA:CPU's own trace.

The MLP's train step (jaxcnn's one step, Adam, f32 or the --dtype given) is compiled and
run here; then
`jax.profiler` traces S steps. XLA:CPU's runtime emits one trace event per thunk it runs,
named after its HLO instruction, so each event is matched to the kernel jaxcnn.perf.hlo
reads from the same compiled program and grouped by the kernel's kind (copy, fusion,
gemm: a library call; a fusion of a 16-bit float type apart, "fusion-bf16") and size
(tiny: under 4 KiB moved; small: under 1 MiB; big). The JSON written holds, per group:
kernels per step, microseconds per step, each event's median and 10th percentile, and the
group's bytes over its time (GB/s), beside the step's untraced median. Events inside a thunk
that XLA:CPU compiles as one function (a `call` marked `xla_cpu_small_call`) do not
exist: those are listed apart (`kernels_not_traced`), by kind.

The trace adds its own cost to each event, and other processes on the machine slow the
library calls' threads: the figures are upper bounds of each kind's cost, for comparing
kinds, not a step time. What the prediction model's per-kind fixed costs are bounded by
(experiments/predict/observations.py, PER_KIND_BOUNDS) is the 10th percentile here.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def size_class(nbytes: float) -> str:
    return "tiny" if nbytes < 4096 else ("small" if nbytes < 1 << 20 else "big")


def by_kind(ks: Sequence[Any], events: Sequence[tuple[str, int]], steps: int) -> dict[str, Any]:
    """Trace events (thunk name, duration ns) over `steps` steps grouped by the kind and
    size of the kernel (jaxcnn.perf.hlo.Kernel) of the same name; the kernels no event
    names, counted per kind."""
    named = {k.name: k for k in ks}
    durations: dict[str, list[float]] = collections.defaultdict(list)
    moved: dict[str, float] = collections.defaultdict(float)
    seen = set()
    for name, ns in events:
        k = named.get(name)
        if k is not None:
            kind = f"{k.kind}-{k.dtype}" if k.kind == "fusion" and k.dtype else k.kind
            key = f"{kind}/{size_class(k.bytes)}"
            durations[key].append(ns / 1e3)
            moved[key] += k.bytes
            seen.add(name)
    groups = {
        key: {
            "kernels_per_step": len(us) / steps,
            "us_per_step": sum(us) / steps,
            "median_us": statistics.median(us),
            "p10_us": sorted(us)[len(us) // 10],
            "gb_per_s": moved[key] / sum(us) / 1e3 if sum(us) else None,
        }
        for key, us in sorted(durations.items())
    }
    missing = collections.Counter(k.kind for k in ks if k.name not in seen)
    return {"groups": groups, "kernels_not_traced": dict(sorted(missing.items()))}


def measure(width: int, batch: int, steps: int, dtype: str = "float32") -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jaxcnn
    from jaxcnn.perf import hlo

    model = jaxcnn.models.get("mlp", width=width, dtype=jnp.dtype(dtype))
    state = jaxcnn.create_train_state(model, jaxcnn.make_optimizer("adam"), (28, 28, 1))
    data = {
        "image": jnp.zeros((batch, 28, 28, 1), jnp.uint8),
        "label": jnp.zeros((batch,), jnp.int32),
    }
    compiled = jax.jit(jaxcnn.train_step, donate_argnums=0).lower(state, data).compile()
    ks = hlo.kernels(compiled.as_text(), platform="cpu")
    for _ in range(10):
        state, _ = compiled(state, data)
    jax.block_until_ready(state)
    untraced = []
    for _ in range(max(20, steps)):
        start = time.perf_counter()
        state, _ = compiled(state, data)
        jax.block_until_ready(state)
        untraced.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder)
        for _ in range(steps):
            state, _ = compiled(state, data)
            jax.block_until_ready(state)
        jax.profiler.stop_trace()
        trace = sorted(glob.glob(f"{folder}/**/*.xplane.pb", recursive=True))[-1]
        profile = jax.profiler.ProfileData.from_file(trace)
        events = [
            (ev.name, ev.duration_ns)
            for plane in profile.planes
            for line in plane.lines
            for ev in line.events
        ]
    return {
        "benchmark": "cpu_kernel_kinds",
        "model": "mlp",
        "width": width,
        "dtype": dtype,
        "batch_size": batch,
        "steps_traced": steps,
        "jax": jax.__version__,
        "device": jaxcnn.devices.describe(jax.devices()[:1]),
        "step_untraced_median_us": float(np.median(untraced)) * 1e6,
        **by_kind(ks, events, steps),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cpu_kernel_kinds")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    args = parser.parse_args(argv)
    if min(args.width, args.batch, args.steps) < 1:
        parser.error("--width, --batch and --steps take positive integers")
    out = Path(args.out)
    if not out.parent.is_dir():
        parser.error(f"--out {out}: no such folder {out.parent}")
    result = measure(args.width, args.batch, args.steps, args.dtype)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["groups"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
