"""jaxcnn: Flax CNNs and one pure train step that run unchanged on CPU, GPU and TPU.

import jaxcnn
model = jaxcnn.models.get("mnist_cnn")
state = jaxcnn.create_train_state(model, jaxcnn.make_optimizer("adam"), (28, 28, 1))
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"), epochs=3)
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"), loop="device")
on_tpu = jaxcnn.compile_for("tpu-v5e-1", state, jaxcnn.aot.abstract_batch(256, (28, 28, 1)))

Each public name is imported when first used: `import jaxcnn` loads no JAX or Flax.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection
from typing import Any

# Each public name and the module it is read from, imported on first use (PEP 562):
# `import jaxcnn` imports no JAX or Flax, and reading a name table (jaxcnn.models.names(),
# jaxcnn.data.DATASETS, jaxcnn.perf.chips) imports only what that table needs.
_SUBMODULES = (
    "aot",
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
    "cpu_threads": the NPROC set, or None where left alone}. A policy not in
    jaxcnn.host_memory.POLICIES is a UsageError."""
    from jaxcnn import devices, host_memory
    from jaxcnn.errors import UsageError

    try:
        host_memory.resolve(policy, device, loops)  # a bad policy, before anything changes
    except ValueError as e:  # host_memory raises no UsageError: peers load it without JAX
        raise UsageError(str(e)) from None
    threads = devices.reserve_collective_threads()
    return {"host_memory": host_memory.apply(policy, device, loops), "cpu_threads": threads}


__version__ = "0.1.0"
__all__ = [
    "CompiledStep",
    "DataError",
    "JaxcnnError",
    "Placement",
    "TrainState",
    "UsageError",
    "aot",
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
