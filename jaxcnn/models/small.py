"""The seeds' models: LeNet-5 two ways, the MNIST CNN, the dense net, the cats-vs-dogs CNN.

Every model is called as `model(x, train=..., axis_name=...)`. `axis_name` names the
pmap axis so BatchNorm averages its batch statistics over all replicas (the global
batch, as under one device); models without BatchNorm ignore it.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxcnn.formulation import Formulation
from jaxcnn.models.layers import XLA, Flatten, Pool, conv


class LeNet5(nn.Module):
    """LeCun et al. 1998 on 32x32x1, tanh; 61,706 params.

    Differences from the paper, kept deliberately simple: C3 connects to all six S2
    maps (the paper's sparse table has 1,516 weights, this 2,416), S2/S4 are plain
    average pools (no trainable coefficient and bias), and the output is a Dense
    layer, not Euclidean RBF units.
    """

    num_classes: int = 10
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name
        x = jnp.tanh(conv(self.formulation, 6, (5, 5), padding="VALID", dtype=self.dtype)(x))  # C1
        x = Pool("avg", 2, formulation=self.formulation)(x)  # S2
        x = jnp.tanh(conv(self.formulation, 16, (5, 5), padding="VALID", dtype=self.dtype)(x))  # C3
        x = Pool("avg", 2, formulation=self.formulation)(x)  # S4
        x = jnp.tanh(
            conv(self.formulation, 120, (5, 5), padding="VALID", dtype=self.dtype)(x)
        )  # C5
        x = Flatten()(x)
        x = jnp.tanh(nn.Dense(84, dtype=self.dtype)(x))  # F6
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)


class LeNet5Keras(nn.Module):
    """Seed 002's Keras LeNet: 3x3 relu convs, average pools; exactly 81,194 params."""

    num_classes: int = 10
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name
        x = nn.relu(conv(self.formulation, 6, (3, 3), padding="VALID", dtype=self.dtype)(x))
        x = Pool("avg", 2, formulation=self.formulation)(x)
        x = nn.relu(conv(self.formulation, 16, (3, 3), padding="VALID", dtype=self.dtype)(x))
        x = Pool("avg", 2, formulation=self.formulation)(x)
        x = Flatten()(x)
        x = nn.relu(nn.Dense(120, dtype=self.dtype)(x))
        x = nn.relu(nn.Dense(84, dtype=self.dtype)(x))
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)


class MnistCNN(nn.Module):
    """Seed 003's Keras MNIST CNN. VALID padding (Keras' default): 225,034 params.

    `padding="SAME"` gives the 421,642-parameter variant.
    """

    num_classes: int = 10
    padding: str = "VALID"
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del train, axis_name
        x = nn.relu(conv(self.formulation, 32, (3, 3), padding=self.padding, dtype=self.dtype)(x))
        x = Pool("max", 2, formulation=self.formulation)(x)
        x = nn.relu(conv(self.formulation, 64, (3, 3), padding=self.padding, dtype=self.dtype)(x))
        x = Pool("max", 2, formulation=self.formulation)(x)
        x = Flatten()(x)
        x = nn.relu(nn.Dense(128, dtype=self.dtype)(x))
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)


class MLP(nn.Module):
    """Seed 002's dense net: 784 -> n -> n -> 10 with Dropout 0.2; n=4096 is 20,037,642."""

    width: int = 512
    num_classes: int = 10
    dropout: float = 0.2
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del axis_name
        x = Flatten()(x)
        for _ in range(2):
            x = nn.relu(nn.Dense(self.width, dtype=self.dtype)(x))
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)


class CatsDogsCNN(nn.Module):
    """Seed 000's cats-vs-dogs CNN on 256x256x3: 21,463,713 params, 8,192 non-trainable.

    Thirteen 3x3 SAME relu convs in five blocks with VALID max pools (2, 2, 2, 3, 3),
    then 4608 -> 2048 -> 2048 -> 1 with Dropout and Keras-default BatchNorm
    (momentum 0.99, epsilon 1e-3). One logit: sigmoid binary cross-entropy.
    """

    widths: tuple[tuple[int, ...], ...] = ((32, 32), (64, 64), (128,) * 3, (256,) * 3, (512,) * 3)
    pools: tuple[int, ...] = (2, 2, 2, 3, 3)
    dense_width: int = 2048
    dropout: tuple[float, float] = (0.5, 0.4)
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        for block, pool in zip(self.widths, self.pools, strict=True):
            for width in block:
                x = nn.relu(
                    conv(self.formulation, width, (3, 3), padding="SAME", dtype=self.dtype)(x)
                )
            x = Pool("max", pool, formulation=self.formulation)(x)
        x = Flatten()(x)
        for rate in self.dropout:
            x = nn.relu(nn.Dense(self.dense_width, dtype=self.dtype)(x))
            x = nn.Dropout(rate, deterministic=not train)(x)
            x = nn.BatchNorm(
                use_running_average=not train,
                momentum=0.99,
                epsilon=1e-3,
                axis_name=axis_name,
                dtype=self.dtype,
            )(x)
        return nn.Dense(1, dtype=self.dtype)(x)
