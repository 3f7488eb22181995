"""Which devices a run uses, how they are described in records, and what is chosen per
platform for them: the sizes a matmul ceiling is measured at, XLA:CPU's thread pools and
the XLA options the steps compile with (`platform_compiler_options`). The arithmetic a
matmul runs in and the vendors' peaks are chip facts: jaxcnn.perf.chips and
jaxcnn.perf.rates.

`--device=auto|cpu|gpu|tpu` resolves here and nowhere else. Asking for a platform
that is not present is an error naming the platforms that are: a Colab TPU runtime
that quietly trains on the CPU is the failure this prevents.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import jax

from jaxcnn.choices import DEVICES
from jaxcnn.errors import UsageError
from jaxcnn.machine import boot_id, machine_id

_PROBE_ORDER = ("tpu", "gpu", "cpu")


def _platform_devices(platform: str) -> list[jax.Device]:
    try:
        return list(jax.devices(platform))
    except RuntimeError:
        return []


def available_platforms() -> list[str]:
    """Platforms JAX can run on here, best first (e.g. ["gpu", "cpu"])."""
    return [p for p in _PROBE_ORDER if _platform_devices(p)]


# The JAX build each accelerator needs (pyproject.toml's extras), and a target the
# compilers can build for without one (jaxcnn.targets.TARGETS).
_ACCELERATOR_INSTALL = {
    "gpu": ('pip install -e ".[cuda]"', "an NVIDIA GPU", "gpu-t4"),
    "tpu": ('pip install -e ".[tpu]"', "a TPU VM", "tpu-v5e-1"),
}


def _accelerator_hint(device: str) -> str:
    """What to do when `device` is a GPU or TPU JAX does not see: install JAX's build
    for it where the chip is, or compile for one that is not here."""
    if device not in _ACCELERATOR_INSTALL:
        return ""
    install, where, target = _ACCELERATOR_INSTALL[device]
    return (
        f": on {where}, install JAX's {device.upper()} build ({install}); without one, "
        f"--target={target} (or another --target) compiles for it"
    )


def resolve(device: str = "auto", num_devices: int | None = None) -> list[jax.Device]:
    """The devices to run on: all of `device`'s platform, or its first `num_devices`.

    `auto` is JAX's default backend, which JAX already picks as TPU > GPU > CPU.
    """
    if device not in DEVICES:
        raise UsageError(f"unknown device {device!r}: choose one of {', '.join(DEVICES)}")
    check_platforms_start()
    named = os.environ.get("JAX_PLATFORMS", "").strip()
    if named and device != "auto" and device not in _named_platforms(named):
        present = ", ".join(available_platforms()) or "none"
        raise UsageError(
            f"--device={device} asked for, but JAX_PLATFORMS={named} in the environment "
            f"leaves it out (present: {present}); unset JAX_PLATFORMS or add {device} to it"
        )
    devices = list(jax.devices()) if device == "auto" else _platform_devices(device)
    if not devices:
        present = ", ".join(available_platforms()) or "none"
        raise UsageError(
            f"--device={device} asked for, but JAX sees no {device.upper()} here "
            f"(present: {present}){_accelerator_hint(device)}; or use --device=auto"
        )
    if num_devices is not None:
        if num_devices < 1:
            raise UsageError(f"--num-devices must be a positive integer, got {num_devices}")
        if num_devices > len(devices):
            more = (
                f"; for {num_devices} CPU devices set JAX_NUM_CPU_DEVICES={num_devices} in "
                "the environment (docs/placements.md)"
                if devices[0].platform == "cpu"
                else ""
            )
            raise UsageError(
                f"--num-devices={num_devices} but only {len(devices)} "
                f"{devices[0].platform} device(s) are present{more}"
            )
        devices = devices[:num_devices]
    return devices


# JAX_PLATFORMS's names of the platforms --device names.
_PLATFORM_ALIASES = {"cuda": "gpu", "rocm": "gpu"}


def _named_platforms(named: str) -> set[str]:
    """The --device platforms a JAX_PLATFORMS value lets JAX start."""
    names = {name.strip().lower() for name in named.split(",")}
    return {_PLATFORM_ALIASES.get(name, name) for name in names}


def check_platforms_start() -> None:
    """UsageError naming JAX_PLATFORMS, where the environment sets it, if JAX cannot
    start the platforms it names (one not here, a name JAX does not know): JAX would
    raise at its first device query, from wherever that is."""
    named = os.environ.get("JAX_PLATFORMS", "").strip()
    if not named or named in _STARTED:
        return
    try:
        with _start_log_held(named):
            jax.devices()
    # RuntimeError: a backend that failed to start; AssertionError: JAX skips a named
    # `cuda` without an NVIDIA GPU, then asserts that some backend started.
    except (RuntimeError, AssertionError) as e:
        raise UsageError(_platforms_failed(named, e)) from None
    _STARTED.add(named)


# The JAX_PLATFORMS values this process started: JAX starts its backends once, so a
# later check needs no witness process (_start_log_held) again.
_STARTED: set[str] = set()


def _platforms_failed(named: str, error: Exception) -> str:
    """The one line for a JAX_PLATFORMS whose platforms JAX could not start."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    # JAX's own advice ("set JAX_PLATFORMS=''") is the fix the line ends with.
    reason = (lines[0] if lines else "no such device").split(" (set JAX_PLATFORMS")[0]
    return (
        f"JAX_PLATFORMS={named} in the environment, but JAX could not start it here "
        f"({reason.rstrip('.')}); unset JAX_PLATFORMS to let JAX find the devices here"
    )


# A witness of the start, in its own process: it waits for the word that the start
# ended (argv[1], a pipe's read end); if the pipe closes without it, the process starting
# JAX died inside (a native fatal error: absl's "F" line, then an abort), and the witness
# says so in one line on the stderr both share, from the log held back (argv[2], the
# file's descriptor): the fatal line (its absl prefix cut), else the last line written.
_WITNESS = r"""
import os, re, sys
ended = os.read(int(sys.argv[1]), 1)
if not ended:
    held = os.pread(int(sys.argv[2]), 1 << 20, 0).decode(errors="replace").splitlines()
    lines = [line.strip() for line in held if line.strip()]
    fatal = [line for line in lines if re.match(r"F\d{4} ", line)]
    said = (fatal or lines[-1:] or ["it wrote nothing"])[0]
    said = re.sub(r"^[FEWI]\d{4} [\d:.]+\s+\d+ [^\]]*\] ", "", said)
    sys.stderr.write(f"error: {sys.argv[3]}, but JAX died starting it: {said}\n")
"""


@contextlib.contextmanager
def _start_log_held(named: str = "") -> Iterator[None]:
    """Hold what native code writes to stderr (fd 2) while JAX starts the backends a
    user named (`named`, JAX_PLATFORMS's value): libtpu logs its search for a TPU that
    is not here before JAX raises, and the one line `_platforms_failed` says why. Given
    back when the start succeeds. Where native code ends the process instead (a bad
    XLA_FLAGS is a fatal error), a witness process (_WITNESS) prints the one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        ended_read, ended_write = os.pipe()
        # Its own session: a Ctrl-C to the terminal's process group does not reach it.
        witness = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                "-c",
                _WITNESS,
                str(ended_read),
                str(held.fileno()),
                f"JAX_PLATFORMS={named} in the environment",
            ],
            pass_fds=(ended_read, held.fileno()),
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(ended_read)
        os.dup2(held.fileno(), 2)
        started = False
        try:
            yield
            started = True
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            os.write(ended_write, b"1")
            os.close(ended_write)
            witness.wait()
            if started:
                held.seek(0)
                os.write(2, held.read())


def describe(devices: list[jax.Device]) -> dict[str, Any]:
    """The `device` field of a record: what ran, counted globally across processes."""
    first = devices[0]
    return {
        "platform": first.platform,
        "kind": first.device_kind,
        "count": len(devices),
        "process_count": jax.process_count(),
        "host": socket.gethostname(),
        "machine": machine_id(),
        "boot": boot_id(),
    }


# --- The sizes a matmul's ceiling is measured at

# Square matmul sizes for the measured ceiling: large enough to fill the chip, small
# enough to stay quick (a 1024^3 f32 matmul takes ~10 ms on a 2-core CPU).
_MATMUL_SIZES = {"cpu": (256, 512, 1024), "gpu": (2048, 4096, 8192), "tpu": (2048, 4096, 8192)}


def _requested_cpu_devices(environ: MutableMapping[str, str]) -> int:
    """How many CPU devices JAX will create, from the two settings that ask for more."""
    counts = [1]
    flag = re.search(r"--xla_force_host_platform_device_count=(\d+)", environ.get("XLA_FLAGS", ""))
    if flag:
        counts.append(int(flag.group(1)))
    if environ.get("JAX_NUM_CPU_DEVICES", "").strip().isdigit():
        counts.append(int(environ["JAX_NUM_CPU_DEVICES"]))
    return max(counts)


_reserved_threads: int | None = None  # the NPROC reserve_collective_threads set, if any


def reserve_collective_threads(environ: MutableMapping[str, str] = os.environ) -> int | None:
    """Size XLA:CPU's thread pools for collectives over many CPU devices; call before
    JAX starts its CPU backend. Returns the pool size asked for, or None if left alone.

    XLA:CPU sizes both its pools (launches, and the intra-op workers that run a
    program's thunks) to max(cores, devices). A pmap step over 8 devices on 2 cores
    then has exactly 8 intra-op workers: when 7 replicas reach an all-reduce first, 7
    workers block in its rendezvous, and the 8th replica's own parallel work needs
    workers that are blocked or busy. Under load that ordering is common, nothing
    moves, and XLA aborts the process after its 40 s rendezvous timeout. With twice as
    many workers as devices, the replica that is late always finds free ones: load
    makes the step slower, never stuck. XLA reads the pool size from NPROC; one set by
    the user is kept.
    """
    devices = _requested_cpu_devices(environ)
    if devices < 2 or "NPROC" in environ:
        return None
    global _reserved_threads
    threads = max(os.cpu_count() or 1, 2 * devices)
    environ["NPROC"] = str(threads)
    if environ is os.environ:  # this process's pools, as records report them
        _reserved_threads = threads
    return threads


def cpu_threads(environ: Mapping[str, str] = os.environ) -> dict[str, Any] | None:
    """What sized XLA:CPU's thread pools in this process, for records (step times on fake CPU
    devices depend on it): {"NPROC": value, "set_by": "jaxcnn" (reserve_collective_threads)
    or "user"}; None where NPROC is unset and XLA picked max(cores, devices) itself."""
    value = environ.get("NPROC")
    if value is None:
        return None
    return {"NPROC": value, "set_by": "jaxcnn" if value == str(_reserved_threads) else "user"}


# XLA compiler options for the train and eval steps, by platform (jaxcnn.parallel
# passes them to jax.jit; records name them). XLA:CPU's copy insertion, without its
# region analysis, copies a donated parameter that an in-place update overwrites while
# the step still reads it (the 4096x4096 kernel of `mlp`, every step); with it, the
# reads are ordered before the update and the copy goes (docs/performance-log.md,
# "XLA:CPU's copy insertion with region analysis").
_COMPILER_OPTIONS: dict[str, dict[str, Any]] = {
    "cpu": {"xla_cpu_copy_insertion_use_region_analysis": True},
}


def platform_compiler_options(platform: str) -> dict[str, Any]:
    """The XLA compiler options a step is compiled with on `platform` (a copy)."""
    return dict(_COMPILER_OPTIONS.get(platform, {}))


def matmul_sizes(platform: str) -> tuple[int, ...]:
    """Square sizes for the measured matmul ceiling on `platform`."""
    return _MATMUL_SIZES.get(platform, _MATMUL_SIZES["gpu"])
