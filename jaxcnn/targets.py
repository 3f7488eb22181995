"""Devices not at hand: TPU slices and NVIDIA GPUs the real compilers can target here.

    target = targets.get("tpu-v5e-8")
    devices = targets.abstract_devices(target)   # 8 compile-only "TPU v5 lite" devices
    placement = jaxcnn.place("sharded", devices) # the same placements as on real chips

`libtpu` (PyPI) compiles for TPU topologies by name, and the CUDA plugin compiles for
an NVIDIA chip described by an XLA:GPU target config (jaxcnn/gpu_specs/*.txtpb), both on
a machine with neither: `pip install -e ".[targets]"`. The devices they give cannot hold
arrays or run anything; a step lowered against ShapeDtypeStructs on them compiles with
the chip's own compiler, whose memory and cost analyses say whether it fits and what it
costs. The targets themselves (TARGETS: topologies and chips) and each chip's memory,
bandwidth and peaks are the chip table's (jaxcnn.perf.chips), its rates read through
jaxcnn.perf.rates.

A GPU whose machine code the plugin's ptxas (CUDA 12) no longer makes, the K80, names
a CUDA toolkit of its own (`CudaToolkit`, installed apart), used for its compiles only.

Adding a target is one entry in jaxcnn.perf.chips.TARGETS (and, for a GPU not listed,
one spec file).
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import os
import resource
from typing import Any

import jax

from jaxcnn import host_memory
from jaxcnn.errors import UsageError, first_line, unknown_name
from jaxcnn.perf import chips, rates
from jaxcnn.perf.chips import SPECS, TARGETS, USABLE_FRACTION, Target

INSTALL = 'pip install -e ".[targets]"'


def get(name: str) -> Target:
    """The target called `name`; a usage error naming the known ones otherwise."""
    if name not in TARGETS:
        raise UsageError(unknown_name("target", name, list(TARGETS)))
    return TARGETS[name]


def matching(device_kind: str, count: int) -> Target | None:
    """The target that is `count` devices of kind `device_kind` (a runtime's own chips,
    to pair its measured records with their prediction: Kaggle's two T4s are
    gpu-t4x2), else one of them (the one-device target, what a one-device workload
    runs on), or None."""
    chip = chips.chip_name(device_kind)
    found = [t for t in TARGETS.values() if t.chip == chip and t.devices in (count, 1)]
    return max(found, key=lambda t: t.devices == count, default=None)


def spec_memory_bytes(spec: str) -> int:
    """The device memory a GPU spec file tells the compiler the chip has."""
    for line in (SPECS / spec).read_text().splitlines():
        if line.strip().startswith("device_memory_size:"):
            return int(line.split(":", 1)[1])
    raise ValueError(f"{spec} has no device_memory_size")


# --- What each target's figures are, per JAX device -----------------------------------


def describe(target: Target) -> dict[str, Any]:
    """The record's `target` field: per chip as the vendor gives it, per device (what
    the compiler's memory analysis is per) where a chip is several devices, and what a
    JAX program may use of it by default (what `fits` compares with)."""
    memory = chips.fact(target.kind, "memory_bytes")
    per_device = None if memory is None else memory // target.devices_per_chip
    chip = rates.of_chip(target.platform, target.kind)
    return {
        "name": target.name,
        "platform": target.platform,
        "chip": target.chip,
        "chips": target.chips,
        "devices": target.devices,
        "topology": target.topology,
        "chip_config": target.chip_config,
        "gpu_spec": target.spec,
        "cuda_toolkit": None if target.toolkit is None else target.toolkit.requirement,
        "memory_per_chip_bytes": memory,
        "memory_per_device_bytes": per_device,
        "usable_fraction": USABLE_FRACTION[target.platform],
        "usable_bytes_per_device": (
            None if per_device is None else int(per_device * USABLE_FRACTION[target.platform])
        ),
        "bandwidth_bytes_per_s": chip.bytes_per_s,
        "peak_tflops": dict(chip.peak_tflops),
    }


# --- The compilers ---------------------------------------------------------------------


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_compiler(target: Target) -> None:
    """A usage error naming the install command when `target`'s compiler is missing."""
    needs = {"tpu": ("libtpu", "libtpu"), "gpu": ("jax_plugins.xla_cuda12", "the CUDA plugin")}
    module, what = needs[target.platform]
    if not _installed(module):
        raise UsageError(f"compiling for {target.name} needs {what}, not installed: {INSTALL}")
    toolkit = target.toolkit
    if toolkit is not None and not toolkit.installed():
        raise UsageError(
            f"compiling for {target.name} needs the ptxas of {toolkit.requirement} (the "
            f"CUDA plugin's has no {target.chip}), not installed: {toolkit.install}"
        )


def compiler_options(target: Target) -> dict[str, Any]:
    """The XLA options `target`'s steps compile with beyond their platform's own: its
    own CUDA toolkit, where it has one."""
    if target.toolkit is None:
        return {}
    return {"xla_gpu_cuda_data_dir": str(target.toolkit.cuda_dir)}


def compiler_versions() -> dict[str, str | None]:
    """The installed compiler packages' versions (records' env), None where absent."""
    found = {}
    for key, dist in (("libtpu", "libtpu"), ("jax_cuda12_plugin", "jax-cuda12-plugin")):
        try:
            found[key] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            found[key] = None
    return found


@functools.cache
def abstract_devices(target: Target) -> tuple[jax.Device, ...]:
    """`target`'s compile-only devices, from its compiler. The one call here that
    depends on JAX's version (jax.experimental.topologies).

    Where no TPU or GPU is here and JAX has not started its backends, JAX is first told
    the CPU is all there is (`cpu_backend_only`, as experiments.cli.run tells it): the CUDA
    plugin then loads as a compiler without looking for the cuDNN and driver a GPU run
    needs (none is here, and compiling needs neither), and JAX, when it starts, tries
    no TPU or CUDA backend to log its failure; the process's computations run on the
    CPU, where they would run anyway. Where JAX started first without it, the CUDA
    plugin did not load, and a GPU target is a UsageError saying so."""
    require_compiler(target)
    from jax.experimental import topologies

    started = host_memory.jax_started()
    cpu_backend_only()
    try:
        if target.platform == "tpu":
            prepare_libtpu()
            topology = topologies.get_topology_desc(target.topology, "tpu", **_tpu_options(target))
        else:
            config = (SPECS / str(target.spec)).read_text()
            # slices x hosts x devices: the GPUs of one host, each the spec's chip
            topology = topologies.get_topology_desc(
                platform="cuda", target_config=config, topology=f"1x1x{target.chips}"
            )
    except jax.errors.JaxRuntimeError as error:  # the compiler's library did not load
        raise UsageError(_not_loaded(target, error)) from None
    except NotImplementedError:  # no CUDA plugin registered its topologies
        if not started and resource.getrlimit(resource.RLIMIT_AS)[0] != resource.RLIM_INFINITY:
            # a process held to a few MiB cannot load the plugin: the machine, not the
            # install (a compile child starved of memory); said as what it is
            raise MemoryError(_no_cuda_plugin(target, started)) from None
        raise UsageError(_no_cuda_plugin(target, started)) from None
    devices = tuple(topology.devices)
    if len(devices) != target.chips * target.devices_per_chip:  # every per-chip figure
        raise RuntimeError(  # would be off by the ratio
            f"{target.name}: the compiler gives {len(devices)} devices, the target table says "
            f"{target.chips} chips x {target.devices_per_chip}: fix its entry in TARGETS"
        )
    return devices[: target.devices]  # a target of part of a chip: its first core


def _not_loaded(target: Target, error: BaseException) -> str:
    """The one line for a compiler installed but not loaded: the loader's reason, and
    this process's address-space limit where it has one (libtpu maps 700 MB), the
    usual cause."""
    what = "libtpu" if target.platform == "tpu" else "the CUDA plugin's compiler"
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    room = (
        ""
        if limit == resource.RLIM_INFINITY
        else f"; this process may map {limit / 2**30:.1f} GiB in all (ulimit -v)"
    )
    return (
        f"{what} could not be loaded to compile for {target.name} ({first_line(error)}){room}: "
        f"give it more memory (ulimit -v unlimited, or free memory), or reinstall it: {INSTALL}"
    )


def _no_cuda_plugin(target: Target, started: bool) -> str:
    """The one line for a CUDA plugin installed but not loaded: JAX started its backends
    before the first compile for a GPU (`started`), when the plugin, finding no cuDNN
    or GPU, refused to load; or it failed to load on its own (JAX's log says why)."""
    if started:
        return (
            f"the CUDA plugin is not loaded in this process, so nothing can compile for "
            f"{target.name}: JAX started its backends before this compile, and the plugin "
            "did not load then (it looks for the cuDNN a GPU run needs); compile for GPU "
            "targets before the first JAX computation, or start Python with JAX_PLATFORMS=cpu"
        )
    return (
        f"the CUDA plugin did not load to compile for {target.name} (JAX's log above says "
        f"why): reinstall it: {INSTALL}"
    )


def _tpu_options(target: Target) -> dict[str, Any]:
    """libtpu's topology options for `target` beyond its topology name."""
    options: dict[str, Any] = {}
    if target.chips == 1:  # a one-chip slice is smaller than libtpu's default host (2x2x1)
        options["chips_per_host_bounds"] = [1, 1, 1]
    if target.chip_config is not None:
        options["chip_config_name"] = target.chip_config
    return options


# --- The compilers' environment, set where a compile or a program needs it ----------------


def _accelerators_here() -> bool:
    """Whether this machine shows any TPU or GPU hardware JAX could use."""
    return bool(host_memory.accelerators_here())


def prepare_libtpu() -> dict[str, str]:
    """Settings libtpu needs to compile for a TPU that is not here, made in this
    process's environment where a TPU compile is about to load libtpu (libtpu reads them
    as it loads); the ones set now, {} where an accelerator is here (a real TPU or GPU is
    left untouched) or all were set already:

    - libtpu skips asking for a TPU VM's metadata server (there is none), is told this
      host's name and bounds (it would print a warning looking for each), and may be
      loaded by several processes at once (pytest-xdist, two studies): its lockfile
      guards the chips, and there are none to guard. One host's bounds: compile-only
      topologies are the same with them (their devices, coordinates and programs alike).
    """
    if _accelerators_here():
        return {}
    wanted = {
        "TPU_SKIP_MDS_QUERY": "1",
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
        "TPU_WORKER_HOSTNAMES": "localhost",
        "TPU_HOST_BOUNDS": "1,1,1",
    }
    added = {name: value for name, value in wanted.items() if name not in os.environ}
    os.environ.update(added)
    return added


def cpu_backend_only() -> bool:
    """For a program that compiles for targets or runs on this CPU (experiments.cli.run, its
    compile child), never for a library import: with a compiler installed (the
    [targets] extra) and no TPU or GPU here, JAX would try to start the TPU and CUDA
    backends and log their failures at length before settling on the CPU; it is told
    the CPU is all there is. Whether it did: not where JAX_PLATFORMS (the user's) is
    set, a backend already started, an accelerator is here, or no compiler installed."""
    if _accelerators_here() or jax.config.jax_platforms is not None:
        return False
    if not (_installed("libtpu") or _installed("jax_plugins.xla_cuda12")):
        return False
    try:
        jax.config.update("jax_platforms", "cpu")
    except RuntimeError:  # a backend already started: too late, and harmless
        return False
    return True
