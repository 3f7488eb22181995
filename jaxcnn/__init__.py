"""jaxcnn: Flax CNNs and one pure train step that run unchanged on CPU, GPU and TPU.

import jaxcnn
model = jaxcnn.models.get("mnist_cnn")
state = jaxcnn.create_train_state(model, jaxcnn.make_optimizer("adam"), (28, 28, 1))
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"))
options = jaxcnn.FitOptions(epochs=3, batch_size=32, loop="device")
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"), options=options)
on_tpu = jaxcnn.compile_for("tpu-v5e-1", state, jaxcnn.aot.abstract_batch(256, (28, 28, 1)))

Each public name is imported when first used: `import jaxcnn` loads no JAX or Flax.
"""

from __future__ import annotations

import copy
import importlib
import warnings
from collections.abc import Collection
from typing import Any

# Each public name and the module it is read from, imported on first use (PEP 562):
# `import jaxcnn` imports no JAX or Flax, and reading a name table (jaxcnn.choices,
# jaxcnn.models.names(), jaxcnn.data.DATASETS, jaxcnn.perf.chips) imports only what that
# table needs.
_SUBMODULES = (
    "aot",
    "choices",
    "data",
    "devices",
    "distributed",
    "epochs",
    "flops",
    "formulation",
    "host_memory",
    "models",
    "parallel",
    "targets",
)
_NAMES = {
    "CompiledStep": "aot",
    "compile_for": "aot",
    "DataError": "errors",
    "JaxcnnError": "errors",
    "UsageError": "errors",
    "FitOptions": "loop",
    "evaluate": "loop",
    "fit": "loop",
    "Placement": "parallel",
    "place": "parallel",
    "TrainState": "train",
    "create_train_state": "train",
    "eval_step": "train",
    "make_optimizer": "train",
    "mean_metrics": "train",
    "train_step": "train",
}


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _NAMES:
        value = getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


# The resolved policy of the configure_host call that took effect (before JAX started)
# and what it returned: later calls are measured against it.
_configured: dict[str, Any] = {}


def configure_host(
    policy: str = "auto", device: str = "auto", loops: Collection[str] = ("step",)
) -> dict[str, Any]:
    """Set this process's host for jaxcnn's steps; call it once, before the first JAX
    computation, if you want it: importing jaxcnn changes nothing of the process.

    - The host allocator's policy (jaxcnn.host_memory: `auto` is `retain` where steps
      are dispatched one by one on the CPU, which keeps freed memory instead of faulting
      each step's buffers in afresh). Irreversible: glibc's `mallopt`, process-wide.
    - XLA:CPU's thread pools sized for collectives over many CPU devices (NPROC), where
      JAX_NUM_CPU_DEVICES or XLA_FLAGS ask for several: without it a pmap step over 8
      fake devices on 2 cores can deadlock (jaxcnn.devices.reserve_collective_threads).

    Returns what is now in effect: {"host_memory": jaxcnn.host_memory.current(),
    "cpu_threads": the NPROC jaxcnn set, or None where left alone, "too_late": None, or
    why nothing was set}. Called after JAX started its backends it sets neither (XLA
    has sized its pools already: a thread count set then would be recorded but not in
    effect), says so in "too_late" and warns. Called again after one that took effect:
    with the policy in effect (as resolved: `auto` may be `retain`), it returns what
    that call did; with another, it is a UsageError. So is a policy, device or loop not
    known."""
    from jaxcnn import choices, devices, host_memory
    from jaxcnn.errors import UsageError, check_choice, check_names

    check_choice("host memory policy", policy, host_memory.POLICIES)
    check_choice("device", device, choices.DEVICES)
    check_names("loops", loops, "loop", choices.LOOPS, "('step',)")
    chosen = host_memory.resolve(policy, device, loops)
    if _configured:  # the first call took effect: nothing changes now
        first = _configured["chosen"]
        if chosen == first:
            return copy.deepcopy(_configured["result"])
        raise UsageError(
            f"configure_host set this process's host memory policy to {first!r} already, "
            f"which is in effect and irreversible: it cannot be {chosen!r} too; call "
            "configure_host once per process, with the policy you want"
        )
    too_late = None
    if host_memory.jax_started():
        too_late = (
            "JAX had already started its backends: the host allocator and XLA:CPU's thread "
            "pools are left as they were; call jaxcnn.configure_host() before the first JAX "
            "computation"
        )
        warnings.warn(too_late, RuntimeWarning, stacklevel=2)
        threads = None
    else:
        threads = devices.reserve_collective_threads()
    result = {
        "host_memory": host_memory.apply(policy, device, loops),
        "cpu_threads": threads,
        "too_late": too_late,
    }
    if too_late is None:
        _configured.update(chosen=chosen, result=copy.deepcopy(result))
    return result


__version__ = "0.1.0"
__all__ = [
    "CompiledStep",
    "DataError",
    "FitOptions",
    "JaxcnnError",
    "Placement",
    "TrainState",
    "UsageError",
    "aot",
    "choices",
    "compile_for",
    "configure_host",
    "create_train_state",
    "data",
    "devices",
    "distributed",
    "epochs",
    "eval_step",
    "evaluate",
    "fit",
    "flops",
    "formulation",
    "host_memory",
    "make_optimizer",
    "mean_metrics",
    "models",
    "parallel",
    "place",
    "targets",
    "train_step",
]
