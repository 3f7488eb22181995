"""The default study: what `python -m experiments.run` runs with no --model or --study.

Three of the seeds' models (`mnist_cnn`, `lenet5_keras`, `mlp` n=512) with the
command's own settings (--dataset, --epochs, --batch-size, ...; by default the
embedded `digits` data), one workload each: the quickstart, offline.
Its records are figures of the report's table like any other.

Command: python -m experiments.run [--device=auto|cpu|gpu|tpu] [--out=DIR]
Expected: well under three minutes on a 2-core CPU; --smoke: seconds.
"""

from __future__ import annotations

from experiments.studies.base import Study

# (model, overrides): each runs with the command's flags (--epochs, --batch-size, ...).
DEFAULT_STUDY = (
    ("mnist_cnn", {}),
    ("lenet5_keras", {}),
    ("mlp", {"width": 512}),
)

STUDY = Study("default")
