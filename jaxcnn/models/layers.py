"""Layers that Flax has as functions, wrapped as modules so summaries list them."""

from __future__ import annotations

import flax.linen as nn
import jax


class Pool(nn.Module):
    """Max or average pooling over a square window (Keras MaxPool2D/AveragePooling2D)."""

    kind: str = "max"
    window: int = 2
    stride: int | None = None
    padding: str = "VALID"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        pool = {"max": nn.max_pool, "avg": nn.avg_pool}[self.kind]
        stride = self.stride or self.window
        return pool(x, (self.window, self.window), (stride, stride), self.padding)


class Flatten(nn.Module):
    """(N, H, W, C) -> (N, H*W*C), in NHWC order like Keras' Flatten."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        return x.reshape((x.shape[0], -1))
