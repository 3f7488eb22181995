"""The names of the library's choices, as plain data, each defined here once: the module
that implements a choice (jaxcnn.devices, parallel, train, loop, formulation) reads its
names from here, and so does whoever offers the choice without making it (the command
line answers `--help` and a mistyped value with them). This module imports nothing, so
reading it loads no JAX. The host memory policies are jaxcnn.host_memory.POLICIES, in a
module that imports no JAX either (benchmarks load it by path, without jaxcnn).
"""

from __future__ import annotations

# Where the steps run (jaxcnn.devices): `auto` is the best platform present.
DEVICES = ("auto", "cpu", "gpu", "tpu")

# Placements of the one step (jaxcnn.parallel). Data parallelism, the study's strategies:
STRATEGIES = ("single", "pmap", "sharded")
# The parameters split over devices too (model parallelism):
MODEL_STRATEGIES = ("model", "data_model")

# The optimizers and their learning-rate schedules (jaxcnn.train).
OPTIMIZERS = ("adam", "sgd")
SCHEDULES = ("constant", "onecycle")

# How batches are fed (jaxcnn.loop): per-step dispatch from the host | whole epochs on
# the device.
LOOPS = ("step", "device")

# How convolutions and pools are computed (jaxcnn.formulation): each formulation's
# programs, (convolution, pool); `auto` is the platform's own, chosen where the program
# is made.
FORMULATION_PROGRAMS = {
    "xla": ("xla", "xla"),
    "cpu": ("patches", "slices"),
    "onednn": ("onednn", "slices"),
}
FORMULATIONS = ("auto", *FORMULATION_PROGRAMS)
# Each platform's own (what `auto` becomes there, the fastest measured on it); a
# platform not named here gets XLA's own convolutions.
PLATFORM_FORMULATIONS = {"cpu": "cpu"}


def platform_formulation(platform: str) -> str:
    """The formulation `auto` becomes on `platform` (cpu | gpu | tpu | ...)."""
    return PLATFORM_FORMULATIONS.get(platform, "xla")
