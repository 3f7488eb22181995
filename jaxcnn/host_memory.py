"""How the process gets host memory from the C allocator: the one host-side choice the
CPU platform makes (jaxcnn.formulation holds the choices that change programs).

Why it matters. XLA:CPU mallocs each execution's temporary buffer when the execution
starts and frees it when it ends; for a convolutional step at batch 512 that buffer is
hundreds of MB (the patches of the `cpu` formulation). glibc serves a block above its
mmap threshold (32 MiB at most), and any block a worker thread's arena cannot hold,
with a fresh `mmap`, and `munmap`s it on free: every execution then faults its whole
temporary buffer back in, one 4 KiB page at a time, each page zeroed by the kernel.
That is the fixed per-execution cost that made separately dispatched steps slower than
the same steps inside one `lax.scan` (PERFORMANCE.md).

`retain` keeps freed memory in the process: one arena, so XLA's worker threads allocate
from the main heap, which grows by `brk` (M_ARENA_MAX=1); no `mmap` for large blocks
(M_MMAP_MAX=0); no trimming of the heap's top (M_TRIM_THRESHOLD at its maximum). After
the first execution the temporary buffer is reused memory, not fresh pages. The cost:
the process keeps its peak heap, and threads share one arena's lock. The heap can also
fragment: with XLA's worker threads allocating small blocks beside the large one, an
occasional execution finds no free block big enough and grows the heap by another
buffer (seen in scratch runs of a 100 MB buffer: a few such executions in forty,
resident memory settling at a few buffers above the largest). Records carry the page
faults per timed step, so a run where this happened shows it.

`system` leaves glibc's defaults. `auto` is `retain` where the process will dispatch
steps one by one on the CPU, else `system`. Where the steps run is known before JAX
starts the way JAX itself finds out (`expected_platform`): `--device` or JAX_PLATFORMS
where given, else the CPU unless an installed backend (libtpu, a PJRT plugin) has its
hardware here. A compiler installed for devices not at hand (the `[targets]` extra) on
a machine with no TPU or GPU leaves the step on the CPU, and on the fast path. A
process that runs only whole epochs as one compiled loop (`loop=device`) gets
`system`: the loop allocates its temporary buffers once per call, so keeping freed
memory saves it nothing, and one shared arena cost it time when measured in turns
(docs/performance-log.md, "The host memory policy follows the loop"). The step loop's
`retain` is a trade: far ahead where glibc maps the step's buffer afresh, behind for
small steps whose buffers glibc already reuses; which one a step is, is known only once
it is compiled, too late to set the arenas.

Order matters: a thread keeps the arena it first allocated from, so this must run
before JAX starts its CPU client (the first computation or `jax.devices()`). Called
later it changes nothing and says so in what it returns. This module imports no JAX,
so the JAX-free peer benchmarks apply the same policy to PyTorch and Keras.

Nothing here runs on import: `jaxcnn.configure_host()` (or `apply`) sets the policy
where a program asks for it; experiments.cli.run asks, from the loops it will run, and
says what took effect.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.metadata
import importlib.util
import os
import platform
import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

POLICIES = ("auto", "retain", "system")
RETAIN = {"M_ARENA_MAX": 1, "M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": 2**31 - 1}
_MALLOPT_PARAM = {"M_ARENA_MAX": -8, "M_MMAP_MAX": -4, "M_TRIM_THRESHOLD": -1}  # malloc.h

_current: dict[str, Any] = {"policy": "system", "applied": False, "reason": "not asked"}

# --- Where the steps will run, known before JAX starts ------------------------------------

# What JAX looks for before it starts a backend (jax._src.hardware_utils, xla_bridge):
# the CUDA backend starts only where one of NVIDIA's driver files exists, and libtpu
# finds TPU chips as device files or as Google PCI devices of these ids (Google's vendor
# id alone is also its network card's, on every cloud VM). ROCm's GPUs are served
# through AMD's kernel driver.
SYSTEM_ROOT = Path("/")
_DEVICE_FILES = {
    "nvidia": ("dev/nvidia0", "dev/nvidiactl", "dev/dxg"),  # dxg: WSL2
    "tpu": ("dev/accel0", "dev/vfio/0"),
    "amd": ("dev/kfd",),
}
_GOOGLE_PCI_VENDOR = "0x1ae0"
_TPU_PCI_DEVICES = ("0x0027", "0x0056", "0x005e", "0x0062", "0x0063", "0x006f", "0x0076")
# The hardware each installed backend runs on: libtpu (the package that makes JAX's
# default backend a TPU) and the PJRT plugins (entry points in group "jax_plugins"),
# known by the words their names contain.
TPU_PACKAGES = ("libtpu", "libtpu_nightly")
_PLUGIN_HARDWARE = {"cuda": "nvidia", "rocm": "amd", "tpu": "tpu"}


def _tpu_on_pci(root: Path) -> bool:
    try:
        devices = list((root / "sys/bus/pci/devices").iterdir())
    except OSError:
        return False
    for device in devices:
        try:
            vendor, chip = ((device / f).read_text().strip().lower() for f in ("vendor", "device"))
        except OSError:
            continue
        if vendor == _GOOGLE_PCI_VENDOR and chip in _TPU_PCI_DEVICES:
            return True
    return False


def accelerators_here(root: Path = SYSTEM_ROOT) -> set[str]:
    """The accelerator hardware JAX could use on this machine (`tpu`, `nvidia`, `amd`),
    from its device files and PCI devices under `root`; starts nothing."""
    found = {
        kind for kind, files in _DEVICE_FILES.items() if any((root / f).exists() for f in files)
    }
    return found | ({"tpu"} if _tpu_on_pci(root) else set())


def installed_backends() -> dict[str, str | None]:
    """Each installed accelerator backend (libtpu's package, each PJRT plugin's entry
    point) and the hardware it runs on (as `accelerators_here` names it); None where
    its name does not say."""
    found: dict[str, str | None] = {}
    for name in TPU_PACKAGES:
        try:
            if importlib.util.find_spec(name) is not None:
                found[name] = "tpu"
        except (ImportError, ValueError):
            continue
    for plugin in importlib.metadata.entry_points(group="jax_plugins"):
        words = [w for w in _PLUGIN_HARDWARE if w in plugin.name.lower()]
        found[plugin.name] = _PLUGIN_HARDWARE[words[0]] if words else None
    return found


def expected_platform(device: str = "auto") -> str:
    """Where JAX will run the steps, as far as that can be known before it starts: the
    `--device` asked for; for `auto`, the first of JAX_PLATFORMS where set, else `cpu`
    unless an installed backend finds its hardware here (the backend's name then; an
    installed plugin whose hardware its name does not say is taken to find it)."""
    if device != "auto":
        return device
    platforms = os.environ.get("JAX_PLATFORMS", "")
    if platforms:
        return platforms.split(",")[0].strip()
    here = accelerators_here(SYSTEM_ROOT)
    for name, hardware in installed_backends().items():
        if hardware is None or hardware in here:
            return name
    return "cpu"


def resolve(policy: str, device: str = "auto", loops: Collection[str] = ("step",)) -> str:
    """`retain` or `system` for `policy` (one of POLICIES), the `--device` asked for and
    the loops the process will run (`step`, `device`: jaxcnn.choices.LOOPS)."""
    if policy not in POLICIES:
        # ValueError, not UsageError: importing jaxcnn.errors would import JAX here
        raise ValueError(
            f"unknown host memory policy {policy!r}: choose one of {', '.join(POLICIES)}"
        )
    if policy != "auto":
        return policy
    return "retain" if "step" in loops and expected_platform(device) == "cpu" else "system"


def _why(policy: str, device: str, loops: Collection[str]) -> str:
    """What `auto` was decided from, for the record."""
    if policy != "auto":
        return f"asked: {policy}"
    if "step" not in loops:
        return "asked: auto; whole epochs as one compiled loop"
    return f"asked: auto; steps on {expected_platform(device)}"


def jax_started() -> bool:
    """Whether JAX has started its backends in this process (nothing is started to know)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    started = getattr(bridge, "backends_are_initialized", None)
    return bool(started and started())


def apply(
    policy: str = "auto", device: str = "auto", loops: Collection[str] = ("step",)
) -> dict[str, Any]:
    """Set the host allocator for `policy` (see `resolve`) and return what is now in
    effect (also kept for `current()`, which every record stores). Once `retain` has
    taken effect it stays: threads keep the arena they were given."""
    global _current
    chosen = resolve(policy, device, loops)
    if _current["applied"]:  # a thread keeps its arena: the first policy that took stays
        return current()
    if chosen == "system":
        _current = {"policy": "system", "applied": False, "reason": _why(policy, device, loops)}
    elif sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        _current = {"policy": "system", "applied": False, "reason": "not glibc on Linux"}
    elif jax_started():
        _current = {
            "policy": "system",
            "applied": False,
            "reason": "JAX had already started its backends; call before the first computation",
        }
    else:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        failed = [
            name for name, value in RETAIN.items() if libc.mallopt(_MALLOPT_PARAM[name], value) != 1
        ]
        _current = {
            "policy": "partial" if failed else "retain",
            "applied": not failed,
            "reason": (
                f"mallopt refused {', '.join(failed)}" if failed else _why(policy, device, loops)
            ),
            "settings": dict(RETAIN),
        }
    _current["asked"] = policy  # what a record key covers (harness.prepare.conditions)
    return current()


# Set before the process started, these change the allocator whatever `apply` does.
ENV_VARS = ("GLIBC_TUNABLES", "MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "LD_PRELOAD")


def current() -> dict[str, Any]:
    """What `apply` set in this process: policy, whether it took effect, and why (and
    any allocator environment variable the process started with)."""
    env = {name: os.environ[name] for name in ENV_VARS if name in os.environ}
    return {**_current, **({"env_vars": env} if env else {})}
