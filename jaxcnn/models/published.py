"""Networks taken from published JAX training benchmarks, rebuilt layer for layer so a
published loop's step can be compiled and predicted as it ran (experiments/predict/
published_references.json). Each class cites the source it copies; parameter counts are
asserted in tests/test_models.py. Convolutions and pools go through jaxcnn's formulation
helpers (jaxcnn.models.layers), which keep Flax's parameters and names.

UvA Deep Learning Tutorial 5 (JAX) as benchmarked on an RTX 3090 in
github.com/phlippe/uvadlc_notebooks_benchmarking @1df2da7b27ff54cd00a306d648a74b308942b664,
JAX/Tutorial5_Inception_ResNet_DenseNet.py: `UvAResNet` (and its pre-activation form),
`UvAGoogleNet`, `UvADenseNet`, CIFAR-10 32x32x3, Flax BatchNorm defaults there
(momentum 0.99, epsilon 1e-5). Tutorial 9's CIFAR-10 autoencoder, benchmarked in the
same repository and README (JAX/Tutorial9_AE_CIFAR10.py): `UvAAutoencoder`.

The Lightweighting Cookbook's CIFAR ResNet-56, timed on a GTX 1080 in
github.com/sseung0703/Lightweighting_Cookbook @fa950c198ec0883b813ccf83a1f1b168f4a2f648,
nets/ResNet.py: `CifarResNet56`.

Flax's MNIST example CNN (`FlaxExampleCNN`) and a 2-10-2 MLP (`ToyMLP`), timed on one
core of a TPU v2 in Colab; a 784-512-256-10 MLP (`RayPodMLP`), timed on a TPU v2-32; each
class cites its source.

Every model is called as `model(x, train=..., axis_name=...)`, like jaxcnn.models.small.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxcnn.formulation import Formulation
from jaxcnn.models.layers import XLA, Flatten, Pool, conv

# The UvA tutorial's initialisers: ResNets variance_scaling(2, fan_out, normal), the
# others kaiming_normal. Init does not change a step's cost, but the rebuild is exact.
_UVA_RESNET_INIT = nn.initializers.variance_scaling(2.0, mode="fan_out", distribution="normal")
_KAIMING = nn.initializers.kaiming_normal()


def _uva_norm(train: bool, axis_name: str | None):
    def norm() -> nn.BatchNorm:
        return nn.BatchNorm(use_running_average=not train, axis_name=axis_name)

    return norm


class _UvAResNetBlock(nn.Module):
    c_out: int
    subsample: bool
    preact: bool
    train: bool
    axis_name: str | None
    formulation: Formulation

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        norm = _uva_norm(self.train, self.axis_name)
        stride = (2, 2) if self.subsample else (1, 1)

        def conv3(y: jax.Array, strides: tuple[int, int] = (1, 1)) -> jax.Array:
            return conv(
                self.formulation,
                self.c_out,
                (3, 3),
                strides=strides,
                kernel_init=_UVA_RESNET_INIT,
                use_bias=False,
            )(y)

        if not self.preact:
            z = conv3(nn.relu(norm()(conv3(x, stride))))
            z = norm()(z)
            if self.subsample:  # the source's 1x1 stride-2 projection has a bias
                x = conv(
                    self.formulation,
                    self.c_out,
                    (1, 1),
                    strides=(2, 2),
                    kernel_init=_UVA_RESNET_INIT,
                )(x)
            return nn.relu(z + x)
        z = conv3(nn.relu(norm()(x)), stride)
        z = conv3(nn.relu(norm()(z)))
        if self.subsample:
            x = conv(
                self.formulation,
                self.c_out,
                (1, 1),
                strides=(2, 2),
                kernel_init=_UVA_RESNET_INIT,
                use_bias=False,
            )(nn.relu(norm()(x)))
        return z + x


class UvAResNet(nn.Module):
    """UvA Tutorial 5's ResNet: conv3x3(16) [BN ReLU], 3 groups x 3 blocks of 16, 32, 64
    channels (stride 2 on the first block of groups 2 and 3), global mean, Dense(10).
    272,378 params + 1,376 BatchNorm statistics; `preact=True` (its "Pre-Activation
    ResNet": BN-ReLU-conv blocks, no ReLU after the add, no stem BN): 272,250 + 1,344."""

    num_classes: int = 10
    num_blocks: Sequence[int] = (3, 3, 3)
    c_hidden: Sequence[int] = (16, 32, 64)
    preact: bool = False
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        x = conv(
            self.formulation, self.c_hidden[0], (3, 3), kernel_init=_UVA_RESNET_INIT, use_bias=False
        )(x)
        if not self.preact:
            x = nn.relu(_uva_norm(train, axis_name)()(x))
        for group, count in enumerate(self.num_blocks):
            for b in range(count):
                x = _UvAResNetBlock(
                    self.c_hidden[group],
                    subsample=b == 0 and group > 0,
                    preact=self.preact,
                    train=train,
                    axis_name=axis_name,
                    formulation=self.formulation,
                )(x)
        return nn.Dense(self.num_classes)(x.mean(axis=(1, 2)))


class _InceptionBlock(nn.Module):
    c_red: dict[str, int]
    c_out: dict[str, int]
    train: bool
    axis_name: str | None
    formulation: Formulation

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        def conv_bn_relu(y: jax.Array, features: int, k: int) -> jax.Array:
            y = conv(self.formulation, features, (k, k), kernel_init=_KAIMING, use_bias=False)(y)
            return nn.relu(_uva_norm(self.train, self.axis_name)()(y))

        x1 = conv_bn_relu(x, self.c_out["1x1"], 1)
        x3 = conv_bn_relu(conv_bn_relu(x, self.c_red["3x3"], 1), self.c_out["3x3"], 3)
        x5 = conv_bn_relu(conv_bn_relu(x, self.c_red["5x5"], 1), self.c_out["5x5"], 5)
        # The source max-pools x and discards the result: its "max" branch is a 1x1 conv
        # of x itself. Kept as published (the dead pool is left out: XLA removes it).
        xm = conv_bn_relu(x, self.c_out["max"], 1)
        return jnp.concatenate([x1, x3, x5, xm], axis=-1)


_R1 = {"3x3": 32, "5x5": 16}
_R2 = {"3x3": 48, "5x5": 16}
# The source's blocks in order, "pool" a 3x3 stride-2 max pool between groups.
_GOOGLENET_BLOCKS: tuple[Any, ...] = (
    (_R1, {"1x1": 16, "3x3": 32, "5x5": 8, "max": 8}),
    (_R1, {"1x1": 24, "3x3": 48, "5x5": 12, "max": 12}),
    "pool",
    (_R1, {"1x1": 24, "3x3": 48, "5x5": 12, "max": 12}),
    (_R1, {"1x1": 16, "3x3": 48, "5x5": 16, "max": 16}),
    (_R1, {"1x1": 16, "3x3": 48, "5x5": 16, "max": 16}),
    (_R1, {"1x1": 32, "3x3": 48, "5x5": 24, "max": 24}),
    "pool",
    (_R2, {"1x1": 32, "3x3": 64, "5x5": 16, "max": 16}),
    (_R2, {"1x1": 32, "3x3": 64, "5x5": 16, "max": 16}),
)


class UvAGoogleNet(nn.Module):
    """UvA Tutorial 5's GoogleNet for CIFAR-10: conv3x3(64) BN ReLU, 9 Inception blocks
    with two 3x3 stride-2 max pools between groups, global mean, Dense(10). 259,338
    params + 2,624 BatchNorm statistics. The pools use Flax's default VALID padding as
    the source does: 32 -> 15 -> 7, not the 16 and 8 its comments say."""

    num_classes: int = 10
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        x = conv(self.formulation, 64, (3, 3), kernel_init=_KAIMING, use_bias=False)(x)
        x = nn.relu(_uva_norm(train, axis_name)()(x))
        for block in _GOOGLENET_BLOCKS:
            if block == "pool":
                x = Pool("max", 3, 2, "VALID", self.formulation)(x)
            else:
                x = _InceptionBlock(block[0], block[1], train, axis_name, self.formulation)(x)
        return nn.Dense(self.num_classes)(x.mean(axis=(1, 2)))


class UvADenseNet(nn.Module):
    """UvA Tutorial 5's DenseNet: conv3x3(32, with bias), 4 dense blocks of 6 layers
    (BN-ReLU-conv1x1(32)-BN-ReLU-conv3x3(16), concatenated), transitions BN-ReLU-conv1x1
    halving the channels and a 2x2 average pool, final BN-ReLU, global mean, Dense(10).
    239,146 params + 7,920 BatchNorm statistics."""

    num_classes: int = 10
    num_layers: Sequence[int] = (6, 6, 6, 6)
    bn_size: int = 2
    growth_rate: int = 16
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        norm = _uva_norm(train, axis_name)

        def conv_k(features: int, k: int, **kwargs: Any) -> nn.Conv:
            return conv(self.formulation, features, (k, k), kernel_init=_KAIMING, **kwargs)

        c_hidden = self.growth_rate * self.bn_size
        x = conv_k(c_hidden, 3)(x)
        for i, n in enumerate(self.num_layers):
            for _ in range(n):
                z = conv_k(self.bn_size * self.growth_rate, 1, use_bias=False)(nn.relu(norm()(x)))
                z = conv_k(self.growth_rate, 3, use_bias=False)(nn.relu(norm()(z)))
                x = jnp.concatenate([x, z], axis=-1)
            c_hidden += n * self.growth_rate
            if i < len(self.num_layers) - 1:
                x = conv_k(c_hidden // 2, 1, use_bias=False)(nn.relu(norm()(x)))
                x = Pool("avg", 2, formulation=self.formulation)(x)
                c_hidden //= 2
        x = nn.relu(norm()(x))
        return nn.Dense(self.num_classes)(x.mean(axis=(1, 2)))


class _UvAEncoder(nn.Module):
    c_hid: int
    latent_dim: int
    formulation: Formulation

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        # (features, stride) of the source's five 3x3 convs: 32x32 -> 16 -> 8 -> 4
        for features, stride in ((1, 2), (1, 1), (2, 2), (2, 1), (2, 2)):
            x = conv(self.formulation, features * self.c_hid, (3, 3), strides=stride)(x)
            x = nn.gelu(x)
        return nn.Dense(self.latent_dim)(x.reshape(x.shape[0], -1))


class _UvADecoder(nn.Module):
    c_out: int
    c_hid: int
    formulation: Formulation

    @nn.compact
    def __call__(self, z: jax.Array) -> jax.Array:
        x = nn.gelu(nn.Dense(2 * 16 * self.c_hid)(z))
        x = x.reshape(x.shape[0], 4, 4, -1)
        # The formulations cover convolutions and pools only: a transposed convolution
        # is Flax's own (lax.conv_transpose) on every platform.
        x = nn.gelu(nn.ConvTranspose(2 * self.c_hid, (3, 3), strides=(2, 2))(x))
        x = nn.gelu(conv(self.formulation, 2 * self.c_hid, (3, 3))(x))
        x = nn.gelu(nn.ConvTranspose(self.c_hid, (3, 3), strides=(2, 2))(x))
        x = nn.gelu(conv(self.formulation, self.c_hid, (3, 3))(x))
        return nn.tanh(nn.ConvTranspose(self.c_out, (3, 3), strides=(2, 2))(x))


class UvAAutoencoder(nn.Module):
    """UvA Tutorial 9's CIFAR-10 autoencoder (`Autoencoder(c_hid=32, latent_dim)`):
    an encoder of five 3x3 convs with GELU (32, 32, 64, 64, 64 channels, strides 2, 1,
    2, 1, 2: 32x32 -> 4x4) and Dense(latent_dim); a decoder of Dense(2*16*c_hid) GELU,
    a 4x4x64 reshape, 3x3 stride-2 transposed convs (64, 32, 3 channels) each but the
    last followed by a 3x3 conv, GELU throughout, tanh on the 32x32x3 image. At
    latent_dim 64: 337,091 params, in modules named as the source's (`encoder`,
    `decoder`).

    Its output is the reconstructed image flattened to 3,072 values (the registry's
    `outputs`): jaxcnn's one train step puts softmax cross-entropy over it where the
    source puts a squared error against the input, both a few elementwise ops and a
    reduction over the batch's 3,072 values per image beside the same network."""

    c_hid: int = 32
    latent_dim: int = 64
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name  # no BatchNorm or dropout
        z = _UvAEncoder(self.c_hid, self.latent_dim, self.formulation, name="encoder")(x)
        image = _UvADecoder(x.shape[-1], self.c_hid, self.formulation, name="decoder")(z)
        return image.reshape(image.shape[0], -1)


class CifarResNet56(nn.Module):
    """The Lightweighting Cookbook's CIFAR ResNet-56 (ResNet v1): conv3x3(16) BN ReLU, 3
    stages x 9 basic blocks of 16, 32, 64 channels (stride 2 at stages 2 and 3; a 1x1
    conv + BN projection where the shape changes; each block's second BN scale
    zero-initialised), global mean, Dense(10); BatchNorm momentum 0.9, epsilon 1e-5; no
    conv biases. 855,770 params + 4,256 BatchNorm statistics."""

    num_classes: int = 10
    stage_sizes: Sequence[int] = (9, 9, 9)
    num_filters: int = 16
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        def norm(**kwargs: Any) -> nn.BatchNorm:
            return nn.BatchNorm(
                use_running_average=not train,
                momentum=0.9,
                epsilon=1e-5,
                axis_name=axis_name,
                **kwargs,
            )

        def conv_k(features: int, k: int, strides: tuple[int, int] = (1, 1)) -> nn.Conv:
            return conv(self.formulation, features, (k, k), strides=strides, use_bias=False)

        x = nn.relu(norm()(conv_k(self.num_filters, 3)(x)))
        for i, size in enumerate(self.stage_sizes):
            filters = self.num_filters * 2**i
            for j in range(size):
                strides = (2, 2) if i > 0 and j == 0 else (1, 1)
                y = nn.relu(norm()(conv_k(filters, 3, strides)(x)))
                y = norm(scale_init=nn.initializers.zeros)(conv_k(filters, 3)(y))
                if x.shape != y.shape:
                    x = norm()(conv_k(filters, 1, strides)(x))
                x = nn.relu(x + y)
        return nn.Dense(self.num_classes)(jnp.mean(x, axis=(1, 2)))


class FlaxExampleCNN(nn.Module):
    """Flax's MNIST example CNN (examples/mnist/train.py, `CNN`,
    https://github.com/google/flax/blob/e466742c2bb31c9748063850fbedc422eb6eb4cf/examples/mnist/train.py):
    Conv(32, 3x3, SAME) relu, 2x2 average pool, Conv(64, 3x3, SAME) relu, 2x2 average
    pool, Dense(256) relu, Dense(10). On 28x28x1: 824,458 params. The "JAX Speed Test"
    notebook (mashaan14/YouTube-channel, jax_performance/2024_04_14_jax_speed_test.md)
    trains the same module on CIFAR-10's 32x32x3: 1,070,794 params.

    Not jaxcnn's `mnist_cnn` (max pools, Dense 128, VALID padding by default).
    """

    num_classes: int = 10
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name
        x = nn.relu(conv(self.formulation, 32, (3, 3), padding="SAME", dtype=self.dtype)(x))
        x = Pool("avg", 2, formulation=self.formulation)(x)
        x = nn.relu(conv(self.formulation, 64, (3, 3), padding="SAME", dtype=self.dtype)(x))
        x = Pool("avg", 2, formulation=self.formulation)(x)
        x = Flatten()(x)
        x = nn.relu(nn.Dense(256, dtype=self.dtype)(x))
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)


def _hidden_layers(
    x: jax.Array,
    widths: tuple[int, ...],
    classes: int,
    activation: Callable[[jax.Array], jax.Array],
    dtype: Any,
) -> jax.Array:
    """A published MLP's logits on the flattened input, a Dense layer of each of `widths`
    then the classes' (called inside a module's compact __call__: its Dense layers are
    that module's Dense_0, Dense_1, ...)."""
    x = Flatten()(x)
    for width in widths:
        x = activation(nn.Dense(width, dtype=dtype)(x))
    return nn.Dense(classes, dtype=dtype)(x)


class ToyMLP(nn.Module):
    """The "JAX Speed Test" notebook's `MLPClassifier(hidden_layers=1, hidden_dim=10,
    n_classes=2)` on 2-D points (mashaan14/YouTube-channel,
    https://github.com/mashaan14/YouTube-channel/blob/5650ca2d908907fc2fc78b24d6242bd32373cc3b/jax_performance/2024_04_14_jax_speed_test.md):
    Dense(10) relu, Dense(2), log_softmax: 2*10+10 + 10*2+2 = 52 params. A step with
    almost no device work: what a loop costs its host. Its points are registered as
    1x1x2 images (jaxcnn's inputs are HWC), the same two floats each.
    """

    hidden_dim: int = 10
    num_classes: int = 2
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get; no conv or pool

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name
        logits = _hidden_layers(x, (self.hidden_dim,), self.num_classes, nn.relu, self.dtype)
        # As published; log_softmax of these logits leaves the cross-entropy unchanged.
        return nn.log_softmax(logits)


class JaxInActionMLP(ToyMLP):
    """The "JAX in Action" book's Chapter 11 Flax MLP (che-shr-cat/JAX-in-Action,
    https://github.com/che-shr-cat/JAX-in-Action/blob/904d69f2ed26ab31800c7e70f60275e6b513a069/Chapter-11/Chapter_11.1_MNIST_MLP_Flax_TrainState_with_metrics.ipynb,
    `MLP`): Dense(512) swish, Dense(10) on the flattened 28x28x1 image: 784*512+512 +
    512*10+10 = 407,050 params, as the notebook's `model.tabulate` prints ("Total
    Parameters: 407,050"). Not jaxcnn's `mlp` (two hidden layers, relu, dropout). ToyMLP's
    shape at its own sizes, swish for relu, its logits as they come.
    """

    hidden_dim: int = 512
    num_classes: int = 10

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name
        return _hidden_layers(x, (self.hidden_dim,), self.num_classes, nn.swish, self.dtype)


class RayPodMLP(nn.Module):
    """The MLP of the MNIST demo in JiahaoYao/ray-jax-tpu-pod-demos (Flax's MNIST example
    with its CNN's layers swapped for Dense ones, the class still named `CNN`;
    https://github.com/JiahaoYao/ray-jax-tpu-pod-demos/blob/7014b9cf3ee3bfcc5a424f5651e48490b90674cd/train.py),
    timed on a TPU v2-32: Dense(512) relu, Dense(256) relu, Dense(10) on the flattened
    28x28x1 image: 784*512+512 + 512*256+256 + 256*10+10 = 535,818 params. Not jaxcnn's
    `mlp` (two hidden layers of one width, dropout).
    """

    widths: tuple[int, ...] = (512, 256)
    num_classes: int = 10
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get; no conv or pool

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name
        return _hidden_layers(x, self.widths, self.num_classes, nn.relu, self.dtype)
