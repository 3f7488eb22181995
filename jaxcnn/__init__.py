"""jaxcnn: Flax CNNs and one pure train step that run unchanged on CPU, GPU and TPU.

import jaxcnn
model = jaxcnn.models.get("mnist_cnn")
state = jaxcnn.create_train_state(model, jaxcnn.make_optimizer("adam"), (28, 28, 1))
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"), epochs=3)
state, history = jaxcnn.fit(state, jaxcnn.data.load("digits", "train"), loop="device")
on_tpu = jaxcnn.compile_for("tpu-v5e-1", state, jaxcnn.aot.abstract_batch(256, (28, 28, 1)))
"""

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
from jaxcnn.loop import evaluate, fit
from jaxcnn.parallel import Placement, place
from jaxcnn.train import (
    TrainState,
    create_train_state,
    eval_step,
    make_optimizer,
    mean_metrics,
    train_step,
)

# Importing does not start a JAX backend; this must happen before one starts, so that
# pmap over many fake CPU devices cannot deadlock (see the function).
devices.reserve_collective_threads()
targets.prepare_environment()  # before any JAX backend starts
# The host allocator's policy for per-step dispatch, which a user would not know to ask
# for; $JAXCNN_HOST_MEMORY changes it (see the module).
try:
    host_memory.apply_default()
except ValueError as e:  # host_memory raises no UsageError: peers load it without JAX
    raise UsageError(str(e)) from None

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
