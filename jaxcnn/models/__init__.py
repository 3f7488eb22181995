"""One registry of models by name.

    module = jaxcnn.models.get("mlp", width=4096)
    shape = jaxcnn.models.input_shape("mlp")          # (28, 28, 1), no batch axis
    trainable, non_trainable = jaxcnn.models.param_counts("catsdogs_cnn")

Overrides are the module's fields (num_classes, width, padding, dtype, ...) plus
`input_size`, which changes the square input the model is initialised on.
`formulation` ("auto" by default: the default backend's, see jaxcnn.formulation; or
"xla", "cpu", or a Formulation) says how convolutions and pools are computed; it
changes the program, never the parameters.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jaxcnn import formulation as formulation_lib
from jaxcnn.errors import UsageError
from jaxcnn.models.imagenet import VGG16, ResNet
from jaxcnn.models.layers import Flatten, Pool
from jaxcnn.models.small import MLP, CatsDogsCNN, LeNet5, LeNet5Keras, MnistCNN

__all__ = [
    "MLP",
    "VGG16",
    "CatsDogsCNN",
    "Flatten",
    "LeNet5",
    "LeNet5Keras",
    "MnistCNN",
    "Pool",
    "ResNet",
    "get",
    "input_shape",
    "names",
    "param_counts",
    "spec",
    "summary",
]


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    module: type[nn.Module]
    input_shape: tuple[int, int, int]
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_outputs(self) -> int:
        return 1 if self.module is CatsDogsCNN else int(self.defaults.get("num_classes", 10))


_TINY_VGG = {"base_width": 4, "dense_width": 32, "num_classes": 10}
_TINY_RESNET = {"stage_sizes": (1, 1), "num_filters": 8, "num_classes": 10}

_REGISTRY: dict[str, ModelSpec] = {
    "lenet5": ModelSpec(LeNet5, (32, 32, 1)),
    "lenet5_keras": ModelSpec(LeNet5Keras, (32, 32, 1)),
    "mnist_cnn": ModelSpec(MnistCNN, (28, 28, 1)),
    "mlp": ModelSpec(MLP, (28, 28, 1)),
    "catsdogs_cnn": ModelSpec(CatsDogsCNN, (256, 256, 3)),
    "vgg16": ModelSpec(VGG16, (224, 224, 3), {"num_classes": 1000}),
    "resnet18": ModelSpec(
        ResNet, (224, 224, 3), {"stage_sizes": (2, 2, 2, 2), "num_classes": 1000}
    ),
    "resnet50": ModelSpec(
        ResNet,
        (224, 224, 3),
        {"stage_sizes": (3, 4, 6, 3), "bottleneck": True, "num_classes": 1000},
    ),
    "vgg_tiny": ModelSpec(VGG16, (32, 32, 3), _TINY_VGG),
    "resnet_tiny": ModelSpec(ResNet, (32, 32, 3), _TINY_RESNET),
}


def names() -> list[str]:
    """Every registered model name."""
    return sorted(_REGISTRY)


def spec(name: str) -> ModelSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r}: choose one of {', '.join(names())}") from None


def _split(name: str, overrides: dict[str, Any]) -> tuple[ModelSpec, dict[str, Any], tuple]:
    model_spec = spec(name)
    fields = {f.name for f in dataclasses.fields(model_spec.module)} - {"parent", "name"}
    kwargs = {**model_spec.defaults, **overrides}
    size = kwargs.pop("input_size", None)
    unknown = sorted(set(kwargs) - fields)
    if unknown:
        raise UsageError(
            f"model {name!r} has no option {', '.join(unknown)}: it takes "
            f"{', '.join(sorted(fields | {'input_size'}))}"
        )
    h, w, c = model_spec.input_shape
    shape = (h, w, c) if size is None else (int(size), int(size), c)
    return model_spec, kwargs, shape


def get(name: str, **overrides: Any) -> nn.Module:
    """The Flax module registered as `name`, with its fields overridden."""
    model_spec, kwargs, _ = _split(name, overrides)
    kwargs["formulation"] = formulation_lib.resolve(kwargs.get("formulation"))
    return model_spec.module(**kwargs)


def input_shape(name: str, **overrides: Any) -> tuple[int, int, int]:
    """(height, width, channels) the model is defined on; `input_size` changes H and W."""
    return _split(name, overrides)[2]


def _abstract_variables(module: nn.Module, shape: tuple) -> Any:
    """Variables as shapes only: counting VGG-16 must not allocate 138M floats."""
    rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
    x = jnp.zeros((1, *shape), jnp.float32)
    return jax.eval_shape(lambda: module.init(rngs, x, train=False))


def _size(tree: Any) -> int:
    return int(sum(np.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(tree)))


def param_counts(name: str, **overrides: Any) -> tuple[int, int]:
    """(trainable, non_trainable): `params`, and everything else (BatchNorm statistics)."""
    _, _, shape = _split(name, overrides)
    variables = _abstract_variables(get(name, **overrides), shape)
    trainable = _size(variables.get("params", {}))
    return trainable, _size(variables) - trainable


def summary(name: str, **overrides: Any) -> str:
    """A Keras-like layer table in call order: layer, output shape, parameter count."""
    _, _, shape = _split(name, overrides)
    called: list[tuple[str, str, tuple]] = []

    def record_top_level(next_fun, args, kwargs, context):
        out = next_fun(*args, **kwargs)
        module = context.module
        if context.method_name == "__call__" and len(module.path) == 1:
            called.append((module.path[0], type(module).__name__, out.shape))
        return out

    with nn.intercept_methods(record_top_level):
        variables = _abstract_variables(get(name, **overrides), shape)
    rows = [("Layer (type)", "Output Shape", "Param #"), ("input", str((None, *shape)), "0")]
    for layer, kind, out_shape in called:
        size = sum(_size(collection.get(layer, {})) for collection in variables.values())
        rows.append((f"{layer} ({kind})", str((None, *out_shape[1:])), f"{size:,}"))
    widths = [max(len(r[i]) for r in rows) + 2 for i in range(3)]
    rule = "=" * sum(widths)
    lines = [f"Model: {name}", rule]
    for i, row in enumerate(rows):
        lines.append(
            "".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
        if i == 0:
            lines.append(rule)
    trainable, non_trainable = param_counts(name, **overrides)
    lines += [
        rule,
        f"Total params: {trainable + non_trainable:,}",
        f"Trainable params: {trainable:,}",
        f"Non-trainable params: {non_trainable:,}",
    ]
    return "\n".join(lines)
