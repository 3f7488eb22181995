"""The peak table and the precision an MFU is measured against (jaxcnn.perf.chips, read
through jaxcnn.perf.rates)."""

import dataclasses

import jax
import pytest

from jaxcnn import devices
from jaxcnn.perf import chips, rates


@dataclasses.dataclass
class _Chip:
    """Stands in for a jax.Device of a platform this CPU does not have."""

    platform: str
    device_kind: str
    compute_capability: str | None = None


@pytest.mark.parametrize(
    ("kind", "chip", "precision", "tflops"),
    [
        ("TPU v2", "TPU v2", "bf16", 45.0),
        ("TPU v3", "TPU v3", "bf16", 123.0),
        ("TPU v4", "TPU v4", "bf16", 275.0),
        ("TPU v5 lite", "TPU v5e", "bf16", 197.0),
        ("TPU v5e", "TPU v5e", "bf16", 197.0),
        ("TPU v6 lite", "TPU v6e", "bf16", 918.0),
        ("Tesla T4", "T4", "fp32", 8.1),
        ("Tesla T4", "T4", "fp16", 65.0),
        ("Tesla V100-SXM2-16GB", "V100 SXM2", "fp16", 125.0),
        ("NVIDIA A100-SXM4-40GB", "A100", "tf32", 156.0),
        ("NVIDIA A100-SXM4-40GB", "A100", "bf16", 312.0),
        ("nvidia a100 80gb pcie", "A100 80GB", "fp32", 19.5),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", "tf32", 495.0),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", "bf16", 989.0),
        ("NVIDIA H200", "H200", "fp32", 67.0),
    ],
)
def test_vendor_peaks_match_device_kinds(kind, chip, precision, tflops):
    assert chips.chip_name(kind) == chip
    assert chips.peak_tflops(kind, precision) == tflops


def test_unknown_chips_and_precisions_have_no_peak():
    assert chips.chip_name("cpu") is None
    assert chips.peak_tflops("cpu", "fp32") is None
    assert chips.peak_tflops("Tesla T4", "tf32") is None  # Turing has no TF32
    assert chips.peak_tflops("TPU v4", "fp32") is None
    assert chips.chip_name("NVIDIA L40S") is None  # not an L4


@pytest.mark.parametrize(
    ("device", "dtype", "precision"),
    [
        (_Chip("tpu", "TPU v5 lite"), "float32", "bf16"),  # f32 as one bf16 pass
        (_Chip("gpu", "NVIDIA A100-SXM4-40GB", "8.0"), "float32", "tf32"),
        (_Chip("gpu", "NVIDIA H100 80GB HBM3"), "float32", "tf32"),  # no capability: table
        (_Chip("gpu", "Tesla T4", "7.5"), "float32", "fp32"),
        (_Chip("gpu", "Tesla V100-SXM2-16GB"), "float32", "fp32"),
        (_Chip("gpu", "Tesla T4", "7.5"), "float16", "fp16"),
        (_Chip("tpu", "TPU v4"), "bfloat16", "bf16"),
    ],
)
def test_default_matmul_precision_per_platform(device, dtype, precision):
    assert rates.matmul_precision(device, dtype) == precision


def test_this_cpu_runs_f32_as_f32():
    assert rates.matmul_precision(jax.devices()[0]) == "fp32"
    assert devices.matmul_sizes("cpu")[-1] <= 2048  # quick here


def test_highest_precision_is_true_fp32():
    with jax.default_matmul_precision("highest"):
        assert rates.matmul_precision(_Chip("gpu", "NVIDIA A100-SXM4-40GB", "8.0")) == "fp32"
        assert rates.matmul_precision(_Chip("tpu", "TPU v4")) is None  # 6 bf16 passes
