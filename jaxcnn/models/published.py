"""Networks taken from published benchmarks: the models of published training loops that
jaxcnn's predictions are checked against (experiments/predict/published_references.json),
each rebuilt layer for layer so its parameter count is the source's.

Every model is called as `model(x, train=..., axis_name=...)`, like jaxcnn.models.small.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxcnn.formulation import Formulation
from jaxcnn.models.layers import XLA, Flatten, Pool, conv


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
        x = Flatten()(x)
        x = nn.relu(nn.Dense(self.hidden_dim, dtype=self.dtype)(x))
        # As published; log_softmax of these logits leaves the cross-entropy unchanged.
        return nn.log_softmax(nn.Dense(self.num_classes, dtype=self.dtype)(x))
