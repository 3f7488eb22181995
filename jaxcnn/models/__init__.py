"""One registry of models by name.

    module = jaxcnn.models.get("mlp", width=4096)
    shape = jaxcnn.models.input_shape("mlp")          # (28, 28, 1), no batch axis
    trainable, non_trainable = jaxcnn.models.param_counts("catsdogs_cnn")

Overrides are the module's fields (num_classes, width, padding, dtype, ...) plus
`input_size`, which changes the square input the model is initialised on.
`formulation` ("auto" by default: the platform's, chosen where the program is made, the
default backend's or a compile target's, see jaxcnn.formulation; or "xla", "cpu", or a
Formulation) says how convolutions and pools are computed; it changes the program,
never the parameters.

Each spec names its class as a string ("module:Class"), imported when a model is built:
`names()`, `spec()` and `input_shape()` without overrides load no Flax and no JAX.
"""

from __future__ import annotations

import dataclasses
import importlib
from typing import TYPE_CHECKING, Any

from jaxcnn.errors import UsageError

if TYPE_CHECKING:
    import flax.linen as nn

# The modules' classes, by the name this package gives them: each imported (with Flax)
# when first used, so listing the models and their shapes loads no Flax.
_CLASSES = {
    "MLP": "jaxcnn.models.small:MLP",
    "CatsDogsCNN": "jaxcnn.models.small:CatsDogsCNN",
    "LeNet5": "jaxcnn.models.small:LeNet5",
    "LeNet5Keras": "jaxcnn.models.small:LeNet5Keras",
    "MnistCNN": "jaxcnn.models.small:MnistCNN",
    "FlaxExampleCNN": "jaxcnn.models.published:FlaxExampleCNN",
    "ToyMLP": "jaxcnn.models.published:ToyMLP",
    "JaxInActionMLP": "jaxcnn.models.published:JaxInActionMLP",
    "RayPodMLP": "jaxcnn.models.published:RayPodMLP",
    "VGG16": "jaxcnn.models.imagenet:VGG16",
    "ResNet": "jaxcnn.models.imagenet:ResNet",
    "UvAResNet": "jaxcnn.models.published:UvAResNet",
    "UvAGoogleNet": "jaxcnn.models.published:UvAGoogleNet",
    "UvADenseNet": "jaxcnn.models.published:UvADenseNet",
    "UvAAutoencoder": "jaxcnn.models.published:UvAAutoencoder",
    "CifarResNet56": "jaxcnn.models.published:CifarResNet56",
    "Flatten": "jaxcnn.models.layers:Flatten",
    "Pool": "jaxcnn.models.layers:Pool",
}

__all__ = [
    "MLP",
    "VGG16",
    "CatsDogsCNN",
    "CifarResNet56",
    "Flatten",
    "FlaxExampleCNN",
    "JaxInActionMLP",
    "LeNet5",
    "LeNet5Keras",
    "MnistCNN",
    "Pool",
    "RayPodMLP",
    "ResNet",
    "ToyMLP",
    "UvAAutoencoder",
    "UvADenseNet",
    "UvAGoogleNet",
    "UvAResNet",
    "get",
    "input_shape",
    "names",
    "param_counts",
    "published_networks",
    "spec",
    "summary",
]


def _resolve(path: str) -> Any:
    """The object a "module:name" string names, imported."""
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        value = _resolve(_CLASSES[name])
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    module: str  # its class, as "module:Class": imported when a model is built
    input_shape: tuple[int, int, int]
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    # A fixed count (one sigmoid; an autoencoder's image, flattened), else its num_classes
    outputs: int | None = None

    @property
    def num_outputs(self) -> int:
        return self.outputs or int(self.defaults.get("num_classes", 10))

    def module_class(self) -> type[nn.Module]:
        return _resolve(self.module)


_TINY_VGG = {"base_width": 4, "dense_width": 32, "num_classes": 10}
_TINY_RESNET = {"stage_sizes": (1, 1), "num_filters": 8, "num_classes": 10}
_SMALL, _IMAGENET = "jaxcnn.models.small", "jaxcnn.models.imagenet"
_PUBLISHED = "jaxcnn.models.published"

_REGISTRY: dict[str, ModelSpec] = {
    "lenet5": ModelSpec(f"{_SMALL}:LeNet5", (32, 32, 1)),
    "lenet5_keras": ModelSpec(f"{_SMALL}:LeNet5Keras", (32, 32, 1)),
    "mnist_cnn": ModelSpec(f"{_SMALL}:MnistCNN", (28, 28, 1)),
    "mlp": ModelSpec(f"{_SMALL}:MLP", (28, 28, 1)),
    "catsdogs_cnn": ModelSpec(f"{_SMALL}:CatsDogsCNN", (256, 256, 3), outputs=1),
    "vgg16": ModelSpec(f"{_IMAGENET}:VGG16", (224, 224, 3), {"num_classes": 1000}),
    "resnet18": ModelSpec(
        f"{_IMAGENET}:ResNet", (224, 224, 3), {"stage_sizes": (2, 2, 2, 2), "num_classes": 1000}
    ),
    "resnet50": ModelSpec(
        f"{_IMAGENET}:ResNet",
        (224, 224, 3),
        {"stage_sizes": (3, 4, 6, 3), "bottleneck": True, "num_classes": 1000},
    ),
    "vgg_tiny": ModelSpec(f"{_IMAGENET}:VGG16", (32, 32, 3), _TINY_VGG),
    "resnet_tiny": ModelSpec(f"{_IMAGENET}:ResNet", (32, 32, 3), _TINY_RESNET),
    # Networks of published JAX loops on consumer GPUs (jaxcnn/models/published.py)
    "uva_resnet": ModelSpec(f"{_PUBLISHED}:UvAResNet", (32, 32, 3)),
    "uva_preactresnet": ModelSpec(f"{_PUBLISHED}:UvAResNet", (32, 32, 3), {"preact": True}),
    "uva_googlenet": ModelSpec(f"{_PUBLISHED}:UvAGoogleNet", (32, 32, 3)),
    "uva_densenet": ModelSpec(f"{_PUBLISHED}:UvADenseNet", (32, 32, 3)),
    # UvA Tutorial 9's autoencoder: its output is its 32x32x3 reconstruction, flattened
    "uva_autoencoder": ModelSpec(f"{_PUBLISHED}:UvAAutoencoder", (32, 32, 3), outputs=3072),
    "cifar_resnet56": ModelSpec(f"{_PUBLISHED}:CifarResNet56", (32, 32, 3)),
    # Published JAX loops' networks (jaxcnn.models.published): Flax's example CNN on
    # MNIST and on CIFAR-10, and a 2-10-2 MLP on 2-D points (1x1x2 images).
    "flax_mnist_cnn": ModelSpec(f"{_PUBLISHED}:FlaxExampleCNN", (28, 28, 1)),
    "flax_cifar_cnn": ModelSpec(f"{_PUBLISHED}:FlaxExampleCNN", (32, 32, 3)),
    "toy_mlp": ModelSpec(f"{_PUBLISHED}:ToyMLP", (1, 1, 2), {"num_classes": 2}),
    # "JAX in Action"'s Chapter 11 MLP (784-512-10, swish), timed on a Colab T4
    "jia_mlp": ModelSpec(f"{_PUBLISHED}:JaxInActionMLP", (28, 28, 1)),
    # JiahaoYao/ray-jax-tpu-pod-demos's MNIST MLP (784-512-256-10, relu), on a TPU v2-32
    "raypod_mlp": ModelSpec(f"{_PUBLISHED}:RayPodMLP", (28, 28, 1)),
}


def names() -> list[str]:
    """Every registered model name."""
    return sorted(_REGISTRY)


def published_networks() -> list[str]:
    """The registered networks rebuilt from published loops (jaxcnn.models.published):
    compiled to check predictions against those loops, not the study's own models."""
    return sorted(n for n, s in _REGISTRY.items() if s.module.startswith(f"{_PUBLISHED}:"))


def spec(name: str) -> ModelSpec:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown model {name!r}: choose one of {', '.join(names())}") from None


def _split(name: str, overrides: dict[str, Any]) -> tuple[ModelSpec, dict[str, Any], tuple]:
    model_spec = spec(name)
    kwargs = {**model_spec.defaults, **overrides}
    size = kwargs.pop("input_size", None)
    if set(overrides) - {"input_size"}:  # the spec's own defaults are its fields
        fields = {f.name for f in dataclasses.fields(model_spec.module_class())}
        fields -= {"parent", "name"}
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
    from jaxcnn import formulation as formulation_lib

    model_spec, kwargs, _ = _split(name, overrides)
    kwargs["formulation"] = formulation_lib.for_model(kwargs.get("formulation"))
    return model_spec.module_class()(**kwargs)


def input_shape(name: str, **overrides: Any) -> tuple[int, int, int]:
    """(height, width, channels) the model is defined on; `input_size` changes H and W."""
    return _split(name, overrides)[2]


def _abstract_variables(module: nn.Module, shape: tuple) -> Any:
    """Variables as shapes only: counting VGG-16 must not allocate 138M floats."""
    import jax
    import jax.numpy as jnp

    rngs = {"params": jax.random.key(0), "dropout": jax.random.key(1)}
    x = jnp.zeros((1, *shape), jnp.float32)
    return jax.eval_shape(lambda: module.init(rngs, x, train=False))


def _size(tree: Any) -> int:
    import jax
    import numpy as np

    return int(sum(np.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(tree)))


def param_counts(name: str, **overrides: Any) -> tuple[int, int]:
    """(trainable, non_trainable): `params`, and everything else (BatchNorm statistics)."""
    _, _, shape = _split(name, overrides)
    variables = _abstract_variables(get(name, **overrides), shape)
    trainable = _size(variables.get("params", {}))
    return trainable, _size(variables) - trainable


def summary(name: str, **overrides: Any) -> str:
    """A Keras-like layer table in call order: layer, output shape, parameter count."""
    import flax.linen as nn

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
