"""ImageNet classics: VGG-16 and ResNet-18/50, with sizes that shrink for tests.

ResNet follows the Flax ImageNet example (bias-free convs, BatchNorm, zero-initialised
last scale in each block); its trainable counts equal torchvision's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxcnn.formulation import Formulation
from jaxcnn.models.layers import XLA, Flatten, Pool, conv


class VGG16(nn.Module):
    """Simonyan & Zisserman 2014, configuration D: 138,357,544 params at 224x224, 1000 classes."""

    num_classes: int = 1000
    base_width: int = 64
    dense_width: int = 4096
    dropout: float = 0.5
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        del axis_name
        for multiplier, repeats in ((1, 2), (2, 2), (4, 3), (8, 3), (8, 3)):
            for _ in range(repeats):
                width = self.base_width * multiplier
                x = conv(self.formulation, width, (3, 3), padding="SAME", dtype=self.dtype)(x)
                x = nn.relu(x)
            x = Pool("max", 2, formulation=self.formulation)(x)
        x = Flatten()(x)
        for _ in range(2):
            x = nn.relu(nn.Dense(self.dense_width, dtype=self.dtype)(x))
            x = nn.Dropout(self.dropout, deterministic=not train)(x)
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)


class _BasicBlock(nn.Module):
    filters: int
    strides: int
    dtype: Any
    axis_name: str | None
    train: bool
    formulation: Formulation

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        conv = _conv(self.dtype, self.formulation)
        norm = _norm(self.train, self.axis_name, self.dtype)
        y = nn.relu(norm()(conv(self.filters, (3, 3), (self.strides, self.strides))(x)))
        y = norm(scale_init=nn.initializers.zeros)(conv(self.filters, (3, 3))(y))
        if x.shape != y.shape:
            x = norm()(conv(self.filters, (1, 1), (self.strides, self.strides))(x))
        return nn.relu(x + y)


class _Bottleneck(nn.Module):
    filters: int
    strides: int
    dtype: Any
    axis_name: str | None
    train: bool
    formulation: Formulation

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        conv = _conv(self.dtype, self.formulation)
        norm = _norm(self.train, self.axis_name, self.dtype)
        y = nn.relu(norm()(conv(self.filters, (1, 1))(x)))
        y = nn.relu(norm()(conv(self.filters, (3, 3), (self.strides, self.strides))(y)))
        y = norm(scale_init=nn.initializers.zeros)(conv(self.filters * 4, (1, 1))(y))
        if x.shape != y.shape:
            x = norm()(conv(self.filters * 4, (1, 1), (self.strides, self.strides))(x))
        return nn.relu(x + y)


def _conv(dtype: Any, formulation: Formulation):
    def bias_free(features: int, kernel: tuple[int, int], strides: tuple[int, int] = (1, 1)):
        return conv(
            formulation,
            features,
            kernel,
            strides=strides,
            padding="SAME",
            use_bias=False,
            dtype=dtype,
        )

    return bias_free


def _norm(train: bool, axis_name: str | None, dtype: Any):
    def norm(**kwargs):
        return nn.BatchNorm(
            use_running_average=not train,
            momentum=0.9,
            epsilon=1e-5,
            axis_name=axis_name,
            dtype=dtype,
            **kwargs,
        )

    return norm


class ResNet(nn.Module):
    """He et al. 2015. (2,2,2,2) basic = ResNet-18, (3,4,6,3) bottleneck = ResNet-50."""

    stage_sizes: Sequence[int] = (2, 2, 2, 2)
    bottleneck: bool = False
    num_classes: int = 1000
    num_filters: int = 64
    dtype: Any = jnp.float32
    formulation: Formulation = XLA  # chosen per platform by models.get

    @nn.compact
    def __call__(self, x: jax.Array, train: bool = False, axis_name: str | None = None):
        x = _conv(self.dtype, self.formulation)(self.num_filters, (7, 7), (2, 2))(x)
        x = nn.relu(_norm(train, axis_name, self.dtype)()(x))
        x = Pool("max", 3, 2, "SAME", self.formulation)(x)
        block = _Bottleneck if self.bottleneck else _BasicBlock
        for i, size in enumerate(self.stage_sizes):
            for j in range(size):
                strides = 2 if i > 0 and j == 0 else 1
                x = block(
                    self.num_filters * 2**i, strides, self.dtype, axis_name, train, self.formulation
                )(x)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.num_classes, dtype=self.dtype)(x)
