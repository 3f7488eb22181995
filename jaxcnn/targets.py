"""Devices not at hand: TPU slices and NVIDIA GPUs the real compilers can target here.

    target = targets.get("tpu-v5e-8")
    devices = targets.abstract_devices(target)   # 8 compile-only "TPU v5 lite" devices
    placement = jaxcnn.place("sharded", devices) # the same placements as on real chips

`libtpu` (PyPI) compiles for TPU topologies by name, and the CUDA plugin compiles for
an NVIDIA chip described by an XLA:GPU target config (jaxcnn/gpu_specs/*.txtpb), both on
a machine with neither: `pip install -e ".[targets]"`. The devices they give cannot hold
arrays or run anything; a step lowered against ShapeDtypeStructs on them compiles with
the chip's own compiler, whose memory and cost analyses say whether it fits and what it
costs. Memory, bandwidth and peaks per chip come from the chip table in jaxcnn/devices.py.

A GPU whose machine code the plugin's ptxas (CUDA 12) no longer makes, the K80, names
a CUDA toolkit of its own (`CudaToolkit`, installed apart), used for its compiles only.

Adding a target is one entry in TARGETS (and, for a GPU not listed, one spec file).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import importlib.util
import os
import resource
import sys
from pathlib import Path
from typing import Any

import jax

from jaxcnn import host_memory
from jaxcnn.errors import UsageError, first_line, unknown_name
from jaxcnn.perf import chips

INSTALL = 'pip install -e ".[targets]"'
SPECS = Path(__file__).parent / "gpu_specs"


@dataclasses.dataclass(frozen=True)
class Target:
    name: str
    platform: str  # tpu | gpu
    chip: str  # the chip table's name (jaxcnn.devices)
    chips: int
    topology: str | None = None  # TPU: libtpu's topology name
    spec: str | None = None  # GPU: the target config file in jaxcnn/gpu_specs
    # TPU: libtpu's chip config, where the chip runs in a mode its compile-only default
    # is not sure to give: "megacore", one JAX device driving both TensorCores of a v4
    # or v5p chip, as these chips run on Cloud TPU (without it, v4 compiles for two
    # one-core devices per chip).
    chip_config: str | None = None
    # JAX devices per chip, as the chip runs: 2 on v2 and v3, whose two cores are two
    # devices; 1 elsewhere (megacore v4 and v5p, one-core v5e and v6e, GPUs).
    # abstract_devices checks the compiler gives chips x this.
    devices_per_chip: int = 1
    # GPU: a CUDA toolkit other than the CUDA plugin's own, for a chip whose ptxas that
    # toolkit no longer has (CudaToolkit below); None: the plugin's.
    toolkit: CudaToolkit | None = None

    @property
    def devices(self) -> int:
        return self.chips * self.devices_per_chip

    @property
    def kind(self) -> str:
        """A device_kind the chip table knows this chip by."""
        return self.chip if self.platform == "tpu" else _spec_kind(self.spec)


@dataclasses.dataclass(frozen=True)
class CudaToolkit:
    """A CUDA toolkit's ptxas and libdevice, from NVIDIA's pip wheel, installed apart
    from the environment's own: every nvidia-cuda-nvcc-cuXX wheel unpacks into the same
    nvidia/cuda_nvcc folder, so one environment holds only one of them, and the CUDA
    plugin's (CUDA 12) is the one jax finds. A target that names a toolkit compiles
    with `xla_gpu_cuda_data_dir` set to it (XLA takes ptxas from its bin/ first), in
    that target's jit calls only."""

    package: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.package}=={self.version}"

    @property
    def root(self) -> Path:
        """Where it is installed: beside the environment that compiles, one folder each."""
        return Path(sys.prefix) / "jaxcnn-toolkits" / f"{self.package}-{self.version}"

    @property
    def cuda_dir(self) -> Path:
        """The folder XLA reads as a CUDA install: bin/ptxas, nvvm/libdevice."""
        return self.root / "nvidia" / "cuda_nvcc"

    @property
    def install(self) -> str:
        return f"pip install --no-deps --target={self.root} {self.requirement}"

    def installed(self) -> bool:
        return (self.cuda_dir / "bin" / "ptxas").is_file()


# CUDA 12's ptxas has no Kepler: `ptxas fatal   : Value 'sm_37' is not defined for option
# 'gpu-name'` (XLA then says "ptxas too old" and, with no driver here, refuses). CUDA
# 11.8's is the last to assemble sm_35/sm_37 (deprecated there; CUDA 12.0 removed them),
# and assembles the PTX XLA's LLVM emits for sm_37. Its wheel is 19.5 MB (46 MB unpacked).
KEPLER_TOOLKIT = CudaToolkit("nvidia-cuda-nvcc-cu11", "11.8.89")


def _tpu(
    name: str, chip: str, chips: int, topology: str, per_chip: int = 1, config: str | None = None
) -> Target:
    return Target(
        name, "tpu", chip, chips, topology=topology, chip_config=config, devices_per_chip=per_chip
    )


def _gpu(
    name: str, chip: str, spec: str, chips: int = 1, toolkit: CudaToolkit | None = None
) -> Target:
    return Target(name, "gpu", chip, chips, spec=spec, toolkit=toolkit)


def _gpus(chip: str, spec: str, counts: tuple[int, ...], stem: str) -> tuple[Target, ...]:
    """`counts` GPUs of one host, each count a target: the chip's one-GPU spec, given to
    the compiler as a topology of that many devices (1 slice x 1 host x N devices)."""
    return tuple(_gpu(f"{stem}x{n}", chip, spec, chips=n) for n in counts)


# Cloud TPU names count cores for v2-v4 and v5p (tpu-v4-8: 4 chips) and chips for v5e
# and v6e (tpu-v5e-8: 8 chips).
TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        _tpu("tpu-v2-8", "TPU v2", 4, "v2:2x2", per_chip=2),
        _tpu("tpu-v3-8", "TPU v3", 4, "v3:2x2", per_chip=2),
        _tpu("tpu-v4-8", "TPU v4", 4, "v4:2x2x1", config="megacore"),
        _tpu("tpu-v4-32", "TPU v4", 16, "v4:2x2x4", config="megacore"),
        _tpu("tpu-v5e-1", "TPU v5e", 1, "v5e:1x1"),
        _tpu("tpu-v5e-8", "TPU v5e", 8, "v5e:2x4"),
        _tpu("tpu-v5e-16", "TPU v5e", 16, "v5e:4x4"),
        _tpu("tpu-v5e-64", "TPU v5e", 64, "v5e:8x8"),
        _tpu("tpu-v5p-8", "TPU v5p", 4, "v5p:2x2x1", config="megacore"),
        _tpu("tpu-v6e-1", "TPU v6e", 1, "v6e:1x1"),
        _tpu("tpu-v6e-8", "TPU v6e", 8, "v6e:2x4"),
        _tpu("tpu-v6e-64", "TPU v6e", 64, "v6e:8x8"),
        _gpu("gpu-mx150", "MX150", "mx150.txtpb"),
        _gpu("gpu-k80", "K80", "k80.txtpb", toolkit=KEPLER_TOOLKIT),
        _gpu("gpu-p100", "P100 PCIe", "p100.txtpb"),
        _gpu("gpu-t4", "T4", "t4.txtpb"),
        _gpu("gpu-v100", "V100 SXM2", "v100.txtpb"),
        _gpu("gpu-a100", "A100", "a100.txtpb"),
        _gpu("gpu-a100-80gb", "A100 80GB", "a100_80gb.txtpb"),
        _gpu("gpu-l4", "L4", "l4.txtpb"),
        _gpu("gpu-h100", "H100 SXM", "h100.txtpb"),
        _gpu("gpu-h100-pcie", "H100 PCIe", "h100_pcie.txtpb"),
        # Data parallelism over the GPUs of one host (seed 001's recipe). Kaggle's free
        # GPU runtime is 2 x T4, and a cloud VM takes up to 4; 8 x V100 / A100 / H100
        # is one DGX-class host (NVLink between the GPUs: jaxcnn.devices' interconnect).
        *_gpus("T4", "t4.txtpb", (2, 4), "gpu-t4"),
        *_gpus("V100 SXM2", "v100.txtpb", (2, 4, 8), "gpu-v100"),
        *_gpus("A100", "a100.txtpb", (2, 4, 8), "gpu-a100"),
        *_gpus("H100 SXM", "h100.txtpb", (2, 4, 8), "gpu-h100"),
    )
}


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


def _spec_kind(spec: str | None) -> str:
    for line in (SPECS / str(spec)).read_text().splitlines():
        if line.startswith("device_description_str:"):
            return line.split(":", 1)[1].strip().strip('"')
    raise ValueError(f"{spec} has no device_description_str")


def spec_memory_bytes(spec: str) -> int:
    """The device memory a GPU spec file tells the compiler the chip has."""
    for line in (SPECS / spec).read_text().splitlines():
        if line.strip().startswith("device_memory_size:"):
            return int(line.split(":", 1)[1])
    raise ValueError(f"{spec} has no device_memory_size")


# --- What each target's figures are, per JAX device -----------------------------------

# The share of a chip's memory a JAX program can have by default. On a GPU, JAX
# preallocates 75% of the memory at its first operation (XLA_PYTHON_CLIENT_MEM_FRACTION,
# JAX's "GPU memory allocation" page); the rest is the CUDA context's and other
# processes'. A TPU's HBM is the program's.
USABLE_FRACTION = {"gpu": 0.75, "tpu": 1.0}


def describe(target: Target) -> dict[str, Any]:
    """The record's `target` field: per chip as the vendor gives it, per device (what
    the compiler's memory analysis is per) where a chip is several devices, and what a
    JAX program may use of it by default (what `fits` compares with)."""
    kind = target.kind
    memory = chips.fact(kind, "memory_bytes")
    per_device = None if memory is None else memory // target.devices_per_chip
    peaks = {
        p: chips.peak_tflops(kind, p)
        for p in ("fp32", "tf32", "bf16", "fp16")
        if chips.peak_tflops(kind, p) is not None
    }
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
        "bandwidth_bytes_per_s": chips.fact(kind, "bandwidth"),
        "peak_tflops": peaks,
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
    the CPU is all there is (`cpu_backend_only`, as experiments.run tells it): the CUDA
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
        raise UsageError(_no_cuda_plugin(target, started)) from None
    devices = tuple(topology.devices)
    if len(devices) != target.devices:  # every per-chip figure would be off by the ratio
        raise RuntimeError(
            f"{target.name}: the compiler gives {len(devices)} devices, the target table says "
            f"{target.chips} chips x {target.devices_per_chip}: fix its entry in TARGETS"
        )
    return devices


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
    """For a program that compiles for targets or runs on this CPU (experiments.run, its
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
