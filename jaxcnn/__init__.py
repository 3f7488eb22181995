"""jaxcnn: Flax CNNs and one pure train step that run unchanged on CPU, GPU and TPU.

import jaxcnn
model = jaxcnn.models.get("mnist_cnn")
state = jaxcnn.create_train_state(model, jaxcnn.make_optimizer("adam"), (28, 28, 1))
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"))
options = jaxcnn.FitOptions(epochs=3, batch_size=32, loop="device")
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"), options=options)
on_tpu = jaxcnn.compile_for("tpu-v5e-1", state, jaxcnn.aot.abstract_batch(256, (28, 28, 1)))
"""

from collections.abc import Collection
from typing import Any

from jaxcnn import (
    aot,
    data,
    devices,
    distributed,
    epochs,
    flops,
    formulation,
    host_memory,
    models,
    parallel,
    targets,
)
from jaxcnn.aot import CompiledStep, compile_for
from jaxcnn.errors import DataError, JaxcnnError, UsageError
from jaxcnn.loop import FitOptions, evaluate, fit
from jaxcnn.parallel import Placement, place
from jaxcnn.train import (
    TrainState,
    create_train_state,
    eval_step,
    make_optimizer,
    mean_metrics,
    train_step,
)


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
    "FitOptions",
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
