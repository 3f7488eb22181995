"""The studies: one module per question the seeds ask (the five documents, 000-004,
the project grew from), each holding its question, seed, sizes, exact command and
expected run time (its docstring), its workloads and its page of the report (its
`STUDY.page`: sections, each a filter of the table of figures; studies/page.py), which
experiments/report/views.py draws. A new study is its module and its line in REGISTRY.

    python -m experiments.run --study=NAME [--device=auto|cpu|gpu|tpu] [--data-dir=DIR]
    python -m experiments.run --study=all   # every study that runs, one after another
    python -m experiments.run --study=NAME --smoke --device=cpu   # seconds, for tests

A study's workloads are `(Context) -> list[Workload]`: what to run given the devices at
hand. Sizes are the full ones on accelerators; where the full size would take
hours on a CPU, the study picks a smaller one and its docstring says which. `--smoke`
shrinks any study to seconds on a CPU (digits instead of MNIST, tiny models, a few
steps, 3 timed steps): it checks that the study runs and writes valid records, nothing
more.

Platform-dependent sizes live in the study modules and only there: the models and the
train step never look at the platform. Every workload carries `study=NAME`, which the
report can name. Real MNIST/Fashion-MNIST come from --data-dir (a folder of
IDX files, or a folder with `mnist/` and `fashion_mnist/` in it, such as DATASETS in
the README) or TFDS; a study that needs them without either stops with exit code 2
before any work.

Expected run times are for the whole study; "CPU" means this 2-core machine, the
accelerator figures are guesses until measured, and marked so.

Importing this package starts no JAX, no matplotlib and no pandas: the CLI lists the
studies in --help before any is needed.
"""

from __future__ import annotations

from experiments.studies import (
    accuracy,
    batch,
    bench,
    crossover,
    default,
    devices,
    ensemble,
    matmul,
    precision,
    roofline,
    scaling,
    speedrun,
    targets,
)
from experiments.studies.base import Context, Study, TargetCell

__all__ = [
    "COMPILE_STUDIES",
    "REGISTRY",
    "STUDIES",
    "Context",
    "Study",
    "TargetCell",
]

# Every study by name, in the order `--study=all` runs them: the default study last.
REGISTRY: dict[str, Study] = {
    module.STUDY.name: module.STUDY
    for module in (
        devices,
        crossover,
        batch,
        scaling,
        matmul,
        ensemble,
        precision,
        accuracy,
        bench,
        speedrun,
        targets,
        roofline,
        default,
    )
}
# The studies that run on the devices at hand and size their own workloads.
STUDIES = {name: s.workloads for name, s in REGISTRY.items() if s.workloads is not None}
# The studies compiled for devices not at hand, never run: the targets study's, and
# the scaling study's steps on several GPUs of one host (its records are the scaling
# page's compiled curves; the study that runs on devices at hand keeps its name).
COMPILE_STUDIES = {
    **{name: s.cells for name, s in REGISTRY.items() if s.cells is not None},
    "scaling_targets": scaling.target_cells,
}
