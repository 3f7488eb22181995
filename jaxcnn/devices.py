"""Which devices a run uses, and how they are described in records.

`--device=auto|cpu|gpu|tpu` resolves here and nowhere else. Asking for a platform
that is not present is an error naming the platforms that are: a Colab TPU runtime
that quietly trains on the CPU is the failure this prevents.
"""

from __future__ import annotations

import socket
from typing import Any

import jax

from jaxcnn.errors import UsageError

DEVICE_CHOICES = ("auto", "cpu", "gpu", "tpu")
_PROBE_ORDER = ("tpu", "gpu", "cpu")


def _platform_devices(platform: str) -> list[jax.Device]:
    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []


def available_platforms() -> list[str]:
    """Platforms JAX can run on here, best first (e.g. ["gpu", "cpu"])."""
    return [p for p in _PROBE_ORDER if _platform_devices(p)]


def resolve(device: str = "auto", num_devices: int | None = None) -> list[jax.Device]:
    """The devices to run on: all of `device`'s platform, or its first `num_devices`.

    `auto` is JAX's default backend, which JAX already picks as TPU > GPU > CPU.
    """
    if device not in DEVICE_CHOICES:
        raise UsageError(f"unknown device {device!r}: choose one of {', '.join(DEVICE_CHOICES)}")
    devices = list(jax.devices()) if device == "auto" else _platform_devices(device)
    if not devices:
        present = ", ".join(available_platforms()) or "none"
        raise UsageError(
            f"--device={device} asked for, but JAX sees no {device.upper()} here "
            f"(present: {present}); use --device=auto or one of those"
        )
    if num_devices is not None:
        if num_devices < 1:
            raise UsageError(f"--num-devices must be a positive integer, got {num_devices}")
        if num_devices > len(devices):
            raise UsageError(
                f"--num-devices={num_devices} but only {len(devices)} "
                f"{devices[0].platform} device(s) are present"
            )
        devices = devices[:num_devices]
    return devices


def describe(devices: list[jax.Device]) -> dict[str, Any]:
    """The `device` field of a record: what ran, counted globally across processes."""
    first = devices[0]
    return {
        "platform": first.platform,
        "kind": first.device_kind,
        "count": len(devices),
        "process_count": jax.process_count(),
        "host": socket.gethostname(),
    }
