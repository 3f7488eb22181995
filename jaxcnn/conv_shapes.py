"""Which convolutions the `cpu` and `onednn` formulations compute themselves: a leaf
module both import (jaxcnn/formulation.py, jaxcnn/onednn), so neither imports the
other at load time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
from jax import lax

# What flax.linen.Conv passes for NHWC inputs and HWIO kernels.
_NHWC = lax.ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))


def _ones(values: Sequence[int] | None) -> bool:
    return values is None or all(v == 1 for v in values)


def plain_2d_conv(
    lhs: jax.Array,
    rhs: jax.Array,
    lhs_dilation: Sequence[int] | None,
    rhs_dilation: Sequence[int] | None,
    dimension_numbers: Any,
    feature_group_count: int,
    batch_group_count: int,
) -> bool:
    """Whether a `lax.conv_general_dilated` call is the 2-D NHWC/HWIO convolution without
    dilation or groups that the `cpu` and `onednn` formulations compute themselves."""
    return (
        lhs.ndim == 4
        and feature_group_count == 1
        and batch_group_count == 1
        and _ones(lhs_dilation)
        and _ones(rhs_dilation)
        and lax.conv_dimension_numbers(lhs.shape, rhs.shape, dimension_numbers) == _NHWC
    )
