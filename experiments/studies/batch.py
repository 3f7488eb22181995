"""How do batch size and memory interact?

Seed 000: the cats-vs-dogs CNN (21,463,713 params, 256x256x3) at batch 16 vs 128,
out of memory at 32 on a 2 GB MX150. `catsdogs_cnn` on synthetic 256x256x3 images
(no cats-vs-dogs data here) at batch 8, 16, ..., 512, timing only: images/s and
XLA's compiled memory per batch; the first OOM is recorded and the larger batches
get `skipped` records (one oom group). The report turns the memory figures into
which batches fit on reference devices.

Command: python -m experiments.run --study=batch --device=gpu
Sizes: full on accelerators. CPU: batch 8..64 and 3 timed steps (a step is ~31
GFLOP per image, ~0.2 s per image at batch 8..32 on a 2-core EPYC, 24 s at batch 64;
XLA's compiled memory is ~2.3 GB at batch 16 and grows with the batch, so 512 would
need more host memory than this machine shares: a CPU has no OOM to record, the Linux
OOM killer would end the run instead). Smoke: catsdogs shrunk to 4 channels, 8 dense
units, 96x96 inputs, batch 2 and 4.
Expected: CPU ~27 min on 2 cores, resident memory peaking at ~17 GiB at batch 64 under
the system allocator (below; /usr/bin/time's maximum resident size, not a record);
smoke ~5 s; GPU < 2 min (a guess).
"""

from __future__ import annotations

from experiments.records.workload import Workload
from experiments.studies.base import SMOKE_CATSDOGS, Context, Study
from experiments.studies.page import (
    ALLOCATOR_PEAK,
    ON_THE_CHIP,
    USABLE,
    WORKLOAD_PEAK,
    Page,
    Section,
    select,
    where,
)

BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512)
BATCH_SIZES_CPU = (8, 16, 32, 64)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    sizes, overrides, timing = BATCH_SIZES, {}, 20
    if ctx.cpu:
        sizes, timing = BATCH_SIZES_CPU, 3
    if ctx.smoke:
        sizes, overrides, timing = (2, 4), SMOKE_CATSDOGS, 3
    return [
        Workload(
            model="catsdogs_cnn",
            model_overrides=overrides,
            dataset="synthetic",
            batch_size=b,
            epochs=0,
            timing_steps=timing,
            study="batch",
            num_devices=1,
            oom_group="batch:catsdogs_cnn",
        )
        for b in sizes
    ]


STUDY = Study(
    "batch",
    workloads=workloads,
    # A step's buffers are gigabytes here (XLA's compiled memory: 7.9 GiB at b32, 15.6
    # GiB at b64, in the records), and `retain` (the CPU step loop's `auto`) keeps a
    # freed one beside the next: in a scratch run of b8, b16, b32 in one process (resident
    # memory is in no record) b32 peaked at 18.4 GiB resident under `retain` against 9.2
    # GiB under `system`, and the kernel's OOM killer ended the study at b32 on a 24 GiB
    # host. The price, in the records: the smallest batch's step faults its buffers in
    # afresh, 1.63 s at b8 against 1.13 s under `retain` on one 2-core EPYC; from b16 on
    # the two measured the same.
    host_memory="system",
    question="How do batch size and memory interact; where is the OOM? (seed 000)",
    page=Page("Seed 000's cats-vs-dogs CNN: memory per batch and where it runs out", [
        Section("The memory a program may use of each chip, what every verdict below is "
                "held to", select(quantity="memory_bytes", extra=USABLE),
                "device devices value"),
        Section("Compiled memory and the verdict per batch (the target's own compiler)",
                select(quantity=["memory_bytes", "fits"], model="catsdogs_cnn", kind="compiled",
                       extra="-"),
                "batch precision device quantity value how flag"),
        Section("On a chip that ran it: its own compiler's memory as it ran (what the "
                "target's, compiled here, stands for), the allocator's peak, and the step",
                where(lambda t: t.quantity.isin(["memory_bytes", "step_s"])
                      & (t.model == "catsdogs_cnn") & (t.platform != "cpu")
                      & (((t.kind == "measured")
                          & t.extra.isin(["-", ALLOCATOR_PEAK, WORKLOAD_PEAK]))
                         | (t.extra == ON_THE_CHIP))),
                "batch precision device kind quantity value spread how"),
        Section("As it ran: the allocator's own peak in the workload over the program's "
                "compiled memory (a fit verdict holds the compiled memory to the limit)",
                select(quantity="memory_factor", selection="newest"),
                "model batch precision device value note"),
        Section("A target's compiled memory (compiled here, not run) against its chip's own "
                "compiler's as the program ran: the check of every verdict above",
                select(quantity="memory_factor", selection="compiled-vs-ran"),
                "model batch precision device value note"),
        Section("Largest batch that fits", select(quantity="largest_batch", model="catsdogs_cnn"),
                "precision device how value flag note"),
    ]),
)  # fmt: skip
