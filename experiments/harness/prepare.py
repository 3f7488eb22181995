"""What a workload needs from JAX before it runs: the check of what was asked, the
devices it runs on, its Flax module, its compute dtype and its data.

The Workload itself (experiments/records/workload.py) is plain data and imports no JAX: it
names the choices and bounds a workload may take, and every check of them is `check` here;
the runners (experiments/harness/runners/) and the sweep take these helpers from here.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from experiments import records
from experiments.records.workload import (
    BOUNDS,
    ENSEMBLE_MODES,
    KINDS,
    MATMUL_PRECISIONS,
    MAX_COMPILE_BATCH,
    MAX_MATMUL_SIDE,
    PRECISIONS,
    SCALINGS,
    Workload,
)
from jaxcnn import data, host_memory, models, train
from jaxcnn import devices as devices_lib
from jaxcnn import formulation as formulation_lib
from jaxcnn.choices import LOOPS
from jaxcnn.errors import UsageError
from jaxcnn.parallel import check_batch_size, compiler_options, place

Split = tuple[np.ndarray, np.ndarray]


def _check_choice(what: str, value: Any, choices: Collection[str]) -> None:
    if value not in choices:
        raise UsageError(f"unknown {what} {value!r}: choose one of {', '.join(choices)}")


def check_precision(workload: Workload) -> None:
    _check_choice("precision", workload.precision, PRECISIONS)


def out_of_bounds(workload: Workload) -> str | None:
    """What is wrong with `workload`'s sizes (BOUNDS), in one line, or None. A matmul's
    batch_size is its matrix side: one too large for the device fails its allocation at
    once, an `oom` finding (the batch study's): it is bounded by MAX_MATMUL_SIDE."""
    for name, (least, most, why) in BOUNDS.items():
        value = getattr(workload, name)
        if value is None:
            continue
        if name == "batch_size" and workload.kind == "matmul":
            most = MAX_MATMUL_SIDE
        if name == "batch_size" and workload.kind == "compile":
            most = MAX_COMPILE_BATCH
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            return f"{name} {value!r:.40} is not a whole number in {least}..{most:,} ({why})"
    return None


def check(workload: Workload, devices: list[jax.Device]) -> None:
    """Raise UsageError for anything wrong in what was asked, before any work: unknown
    names, a batch that does not split over the workload's devices, too few devices."""
    if workload.kind not in KINDS:
        raise UsageError(f"unknown workload kind {workload.kind!r}: choose one of {KINDS}")
    wrong = out_of_bounds(workload)
    if wrong:
        raise UsageError(wrong)
    _check_choice("matmul precision", workload.matmul_precision, MATMUL_PRECISIONS)
    if workload.scaling not in SCALINGS:
        raise UsageError(f"unknown scaling {workload.scaling!r}: weak, strong or None")
    if workload.epochs < 0 or workload.timing_steps < 1 or workload.batch_size < 1:
        raise UsageError("epochs must be >= 0, timing_steps and batch_size >= 1")
    used = devices_for(workload, devices)
    formulation_lib.resolve(workload.formulation, used[0].platform)
    _check_choice("loop", workload.loop, LOOPS)
    if workload.loop == "device" and workload.kind != "train":
        raise UsageError("loop device runs train workloads only (not matmul or ensemble)")
    check_precision(workload)
    if workload.kind == "matmul":
        return
    models.get(workload.model, **workload.module_overrides())
    train.make_optimizer(
        workload.optimizer, workload.learning_rate, schedule=workload.schedule, total_steps=1
    )
    if workload.kind == "ensemble":
        if workload.schedule != "constant":
            raise UsageError("an ensemble trains at a constant learning rate (schedule constant)")
        if workload.ensemble_mode not in ENSEMBLE_MODES:
            raise UsageError(
                f"ensemble mode {workload.ensemble_mode!r}: choose one of {ENSEMBLE_MODES}"
            )
        if workload.ensemble_size < 1 or workload.strategy != "single":
            raise UsageError("an ensemble needs ensemble_size >= 1 and strategy single")
    check_batch_size(workload.batch_size, len(used))
    place(workload.strategy, used)  # an unknown strategy, a process without a device


def build_module(workload: Workload, devices: list[jax.Device]) -> Any:
    """The workload's Flax module, convolutions formulated for the devices' platform and
    computed in its precision's dtype."""
    chosen = formulation_lib.resolve(workload.formulation, devices[0].platform)
    overrides = workload.module_overrides()
    if isinstance(overrides.get("dtype"), str):  # a Workload names its dtype
        overrides["dtype"] = getattr(jnp, overrides["dtype"])
    return models.get(workload.model, **overrides, formulation=chosen)


# XLA flags that change no program a record times: where XLA writes its dumps, and the
# CPU device count (the record's device.count says it, and the key covers that).
NEUTRAL_XLA_FLAGS = ("--xla_dump_", "--xla_force_host_platform_device_count")
# Environment variables that change what a run measures on a GPU: how much of its
# memory JAX takes (an out-of-memory verdict is kept as final) and how.
MEMORY_ENV_VARS = (
    "XLA_PYTHON_CLIENT_MEM_FRACTION",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
)


def code_xla_flags(text: str) -> list[str]:
    """The flags of an XLA_FLAGS value that may change the compiled code (all but
    NEUTRAL_XLA_FLAGS), one per name (the last given wins, as in XLA), sorted."""
    by_name: dict[str, str] = {}
    for flag in text.split():
        if not flag.startswith(NEUTRAL_XLA_FLAGS):
            by_name[flag.split("=", 1)[0]] = flag
    return sorted(by_name.values())


def conditions(
    workload: Workload, platform: str, environ: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    """What this process measures `workload` on a `platform` device under that differs
    from the defaults, so the record's key covers it (records.config_key): 64-bit
    types (JAX_ENABLE_X64), a process-wide default matmul precision (one the workload
    does not set itself), XLA_FLAGS that may change code (`code_xla_flags`), JAX's GPU
    memory settings (MEMORY_ENV_VARS), allocator variables set before the process
    started (jaxcnn.host_memory.ENV_VARS), and a host memory policy asked for that
    differs from the one `auto` picks for the workload's loop on `platform` (a compile
    times no step: not for kind compile; where the asked policy could not take effect,
    env.host_memory says so). Empty under the defaults, so those keys stay as they were."""
    found: dict[str, Any] = {}
    if jax.config.jax_enable_x64:
        found["x64"] = True
    precision = jax.config.jax_default_matmul_precision
    if precision is not None and workload.matmul_precision == "default":
        found["default_matmul_precision"] = str(precision)
    flags = code_xla_flags(environ.get("XLA_FLAGS", ""))
    if flags:
        found["xla_flags"] = flags
    memory = {name: environ[name] for name in MEMORY_ENV_VARS if name in environ}
    if memory:
        found["jax_memory"] = memory
    if workload.kind != "compile":
        in_effect = host_memory.current()
        loops = (workload.loop,)
        chosen = host_memory.resolve(in_effect.get("asked") or "auto", platform, loops)
        if chosen != host_memory.resolve("auto", platform, loops):
            found["host_memory"] = chosen
        if in_effect.get("env_vars"):
            found["allocator_env"] = in_effect["env_vars"]
    return found


def config_key_for(workload: Workload, device: dict[str, Any]) -> str:
    """The config key a record of `workload` on the described `device` gets here and
    now (`record_for`'s): what a rerun looks up before it runs anything."""
    return records.config_key(workload.describe(), device, conditions(workload, device["platform"]))


def record_for(workload: Workload, devices: list[jax.Device]) -> dict[str, Any]:
    """The skeleton record (records.new_record) of `workload` on `devices`: the devices
    described, the conditions it runs under (`conditions`), and the formulation and
    compiler options it runs with there."""
    device = devices_lib.describe(devices)
    return records.new_record(
        workload.describe(),
        device,
        records.environment(
            host_memory=host_memory.current(),
            cpu_threads=devices_lib.cpu_threads(),
            **({"compilation_cache": True} if compilation_cache_on() else {}),
        ),
        conditions(workload, device["platform"]),
        loop=workload.loop,
        formulation=formulation_lib.resolve(workload.formulation, device["platform"]).describe(),
        compiler_options=compiler_options(workload.strategy, device["platform"]),
    )


def compilation_cache_on() -> bool:
    """Whether JAX's persistent compilation cache is on in this process: a compile timed
    then may be a read of that cache, not a compile."""
    return bool(jax.config.jax_compilation_cache_dir) and jax.config.jax_enable_compilation_cache


def devices_for(workload: Workload, devices: list[jax.Device]) -> list[jax.Device]:
    """The devices `workload` runs on: the first `num_devices` of `devices`, else all."""
    if workload.num_devices is None:
        return list(devices)
    if not 1 <= workload.num_devices <= len(devices):
        raise UsageError(
            f"workload wants {workload.num_devices} device(s) but {len(devices)} are present"
        )
    return list(devices[: workload.num_devices])


def split_key(workload: Workload) -> tuple[Any, ...]:
    """Workloads with equal keys read the same arrays."""
    shape = models.input_shape(workload.model, **workload.model_overrides)
    count = _synthetic_count(workload) if _timing_only_synthetic(workload) else None
    return workload.dataset, shape, count, workload.seed if workload.dataset == "synthetic" else 0


def _timing_only_synthetic(workload: Workload) -> bool:
    # Timing reads one batch: random images beyond it would only cost memory.
    return workload.dataset == "synthetic" and workload.epochs == 0


def _synthetic_count(workload: Workload) -> int:
    # The step loop times one batch again and again; the epoch loop reads a new batch
    # at every step, so it gets as many as it times.
    steps = workload.timing_steps if workload.loop == "device" else 1
    return workload.batch_size * steps


def dataset_dir(data_dir: str | None, dataset: str) -> str | None:
    """`data_dir` itself, or its `dataset` subfolder when it has one: one --data-dir
    (a folder holding mnist/ and fashion_mnist/) serves a study that reads MNIST and
    Fashion-MNIST."""
    if data_dir is not None and (Path(data_dir) / dataset).is_dir():
        return str(Path(data_dir) / dataset)
    return data_dir


def train_examples(workload: Workload, data_dir: str | None = None) -> int | None:
    """How many training images `workload` reads, known without reading them (an IDX
    file's header); None where that cannot be known cheaply (the loader then says why)."""
    if _timing_only_synthetic(workload):
        return _synthetic_count(workload)
    return data.train_size(workload.dataset, dataset_dir(data_dir, workload.dataset))


def load_splits(workload: Workload, data_dir: str | None = None) -> tuple[Split, Split | None]:
    """(train, test) arrays fitted to the model's input; test is None for synthetic data,
    whose accuracy would mean nothing."""
    shape = models.input_shape(workload.model, **workload.model_overrides)
    classes = models.spec(workload.model).num_outputs
    kwargs = {"shape": shape, "num_classes": max(classes, 2), "seed": workload.seed}
    if _timing_only_synthetic(workload):
        kwargs["num_examples"] = _synthetic_count(workload)
    data_dir = dataset_dir(data_dir, workload.dataset)

    def fitted(split: str) -> Split:
        images, labels = data.load(workload.dataset, split, data_dir, **kwargs)
        return data.fit_to_shape(images, shape), labels

    return fitted("train"), None if workload.dataset == "synthetic" else fitted("test")


def training_steps(workload: Workload, num_examples: int) -> int:
    """The optimizer steps `fit` will take: full epochs, capped by `steps`."""
    total = workload.epochs * data.steps_per_epoch(num_examples, workload.batch_size)
    return total if workload.steps is None else min(workload.steps, total)
