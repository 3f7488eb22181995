"""Layers that Flax has as functions, wrapped as modules so summaries list them."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax

from jaxcnn.formulation import FORMULATIONS, Formulation, conv_function
from jaxcnn.formulation import pool as pool_with

XLA = FORMULATIONS["xla"]


class Pool(nn.Module):
    """Max or average pooling over a square window (Keras MaxPool2D/AveragePooling2D)."""

    kind: str = "max"
    window: int = 2
    stride: int | None = None
    padding: str = "VALID"
    formulation: Formulation = XLA

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        stride = self.stride or self.window
        return pool_with(x, self.kind, self.window, stride, self.padding, self.formulation)


def conv(
    formulation: Formulation, features: int, kernel: tuple[int, int], **kwargs: Any
) -> nn.Conv:
    """`nn.Conv` (same parameters, same names) computed the way `formulation` says."""
    return nn.Conv(features, kernel, conv_general_dilated=conv_function(formulation), **kwargs)


class Flatten(nn.Module):
    """(N, H, W, C) -> (N, H*W*C), in NHWC order like Keras' Flatten."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return x.reshape((x.shape[0], -1))
