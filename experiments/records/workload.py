"""A workload (model x dataset x optimizer x batch x precision x strategy): what one
record measures, as plain data. Importing this module imports no JAX, so the studies
and the command line can build workloads before a backend starts; running one is
experiments/harness/runners/, and its JAX-side helpers (checks, devices, module, data) are in
experiments/harness/prepare.py.

Four kinds of workload share one record schema:

- `train`: the placed train step, timed, then trained with `fit` (`epochs == 0`:
  timing only, no training, no history).
- `matmul`: one jitted square matmul of side `batch_size` in `precision`, timed: the
  device's arithmetic ceiling next to the vendor's figure.
- `ensemble`: `ensemble_size` models (different seeds and learning rates) trained
  together, `jax.vmap` of the one train step over stacked states (`vmap`), or one
  after another with the plain step (`sequential`).
- `compile`: compiled for a target not at hand, not run (experiments/harness/compile_only.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

# precision -> the compute dtype's name (the JAX side maps names to dtypes)
PRECISIONS = {"f32": "float32", "bf16": "bfloat16"}
KINDS = ("train", "matmul", "ensemble")  # run on devices at hand; "compile" is checked apart
SCALINGS = (None, "weak", "strong")
ENSEMBLE_MODES = ("vmap", "sequential")
MATMUL_PRECISIONS = ("default", "highest")
# The bounds on a workload's sizes, (least, most, what the most protects against), each
# checked before any work (the command line's readers, experiments.harness.prepare.check). A
# bound sits far beyond what a study asks, and below a run that would last for days.
BOUNDS = {
    "timing_steps": (1, 10_000, "each is timed alone; 10,000 steps of 1 s are about three hours"),
    "epochs": (0, 10_000, "0 times only; no study trains for more"),
    "steps": (1, 10**8, "at 1 ms a step, 10^8 steps are more than a day"),
    "batch_size": (
        1,
        2**26,
        "no chip holds a train step of more: the largest compiled to fit is about 4 million",
    ),
    "num_devices": (1, 8_192, "more devices than any machine or pod this runs on"),
    "ensemble_size": (1, 1_024, "more models than one device holds"),
}


# The largest matmul side: 2**24 squared f32 is 1 PiB, beyond any device (its allocation
# fails at once), and its sizes stay far inside int64.
MAX_MATMUL_SIDE = 2**24
# The largest batch a compile-only search may ask (experiments/compile_only.batch_search):
# past 2**31 a batch's element count leaves int32, which the compilers index with.
MAX_COMPILE_BATCH = 2**31 - 1


F32_HIGHEST = "f32-highest"  # f32 at JAX's matmul precision "highest" (precision_of)


def precision_of(w: Any) -> str:
    """The precision a workload's step computes in, f32 with JAX's matmul precision
    "highest" told apart: no TF32 or bf16 passes, another program at another speed.
    Any workload kind (a peer's has no matmul precision)."""
    precision = w.precision or "f32"
    if precision == "f32" and getattr(w, "matmul_precision", "default") == "highest":
        return F32_HIGHEST
    return precision


@dataclasses.dataclass(frozen=True)
class Workload:
    model: str = "mnist_cnn"
    model_overrides: dict[str, Any] = dataclasses.field(default_factory=dict)
    dataset: str = "digits"
    batch_size: int = 128
    epochs: int = 1
    steps: int | None = None  # cap on training steps in all; None = full epochs
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    seed: int = 0
    strategy: str = "single"
    precision: str = "f32"  # compute dtype; params and optimizer state stay f32
    timing_steps: int = 20
    # Added by the studies (schema 1 records left them out at their defaults;
    # experiments/records/migrate.py writes them in).
    study: str | None = None  # the study that made it; None for a single --model run
    kind: str = "train"  # train | matmul | ensemble
    num_devices: int | None = None  # the first N devices the sweep has; None = all
    scaling: str | None = None  # weak (per-device batch fixed) | strong (global fixed)
    ensemble_size: int = 1
    ensemble_mode: str | None = None  # vmap | sequential (kind "ensemble")
    matmul_precision: str = "default"  # "highest": true f32 matmuls (no TF32/bf16 passes)
    # The sweep skips the rest of a group after one of its workloads runs out of
    # memory (batch sizes in increasing order); not part of what is measured.
    oom_group: str | None = None
    # step: one compiled step per batch, dispatched from the host; device: the training
    # set on the device and each epoch one compiled loop (jaxcnn.epochs).
    loop: str = "step"
    # How convolutions and pools are computed (jaxcnn.formulation): auto = the
    # platform's default; the record names the one used, the config key what was asked.
    formulation: str = "auto"
    # The learning rate over the run (jaxcnn.train.learning_rate_schedule): constant,
    # or onecycle, which peaks at learning_rate and spans the run's training steps.
    schedule: str = "constant"
    # kind "compile": the targets table's name (jaxcnn/targets.py) it is compiled for,
    # not run (experiments/harness/compile_only.py).
    target: str | None = None

    def describe(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def compute_dtype(self) -> str:
        """The compute dtype's name ("float32", "bfloat16"); the precision is checked
        first (experiments.harness.prepare.check)."""
        return PRECISIONS[self.precision]

    def module_overrides(self) -> dict[str, Any]:
        """The model's overrides plus its compute dtype, by name, where not f32."""
        overrides = dict(self.model_overrides)
        if self.precision != "f32":
            overrides["dtype"] = self.compute_dtype
        return overrides
