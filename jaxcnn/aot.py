"""Any train step compiled ahead of time for a TPU or GPU not at hand (jaxcnn.targets),
and what its compiler and the per-kernel model say of it.

    state = aot.abstract_state(MyCNN(), jaxcnn.make_optimizer("adam"), (32, 32, 3))
    batch = aot.abstract_batch(256, (32, 32, 3))
    result = jaxcnn.compile_for("tpu-v5e-1", state, batch)
    result.fits, result.memory.total_bytes, result.prediction.device_step_s

Nothing runs and no array is made: the state and batch are shapes and dtypes
(jax.ShapeDtypeStruct, or arrays, whose shapes are taken), the devices are the target
compiler's compile-only devices, and the step is placed as a real run places it
(jaxcnn.parallel). What the compiler says (whether it compiles, memory per device by
part, its cost analysis, its kernels) is the compiler's own; the step time is the
per-kernel model's prediction (jaxcnn.perf.predict.Prediction), labelled with its method, the
constants' version and their error band, never a measurement. Nothing here prints: a
`progress` callback gets one line as each compile starts and ends.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxcnn import choices, parallel, targets, train
from jaxcnn import flops as flops_lib
from jaxcnn import formulation as formulation_lib
from jaxcnn.errors import DataError, UsageError, check_choice, check_count, check_names, described
from jaxcnn.perf import hlo
from jaxcnn.perf import host as host_lib
from jaxcnn.perf import predict as predict_lib
from jaxcnn.perf import rates as rates_lib
from jaxcnn.perf import runtime as runtime_lib

# The programs a placement compiles: its train step, its eval step, and its whole-epoch
# loop (jaxcnn.epochs), the last compiled for EPOCH_STEPS steps of its scan.
PROGRAMS = ("train", "eval", "epoch")
EPOCH_STEPS = 2
_TITLES = {"train": "train step", "eval": "eval step", "epoch": "whole-epoch program"}
BATCH_KEYS = ("image", "label", "mask")  # what jaxcnn.data.batches yields; mask optional

Progress = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class Memory:
    """A compiled program's memory per device, as its compiler's memory analysis gives it
    (None where the compiler gives none). `total_bytes` is what the program needs
    resident: arguments + outputs + temporaries + generated code, less the outputs that
    alias (donated) arguments, counted once."""

    argument_bytes: int | None
    output_bytes: int | None
    alias_bytes: int | None
    temp_bytes: int | None
    generated_code_bytes: int | None
    total_bytes: int | None

    def __str__(self) -> str:
        """In GiB (3 significant digits), the total then the parts it sums: `T GiB per
        device = arguments A GiB + outputs O GiB + temporaries P GiB + generated code C
        GiB - aliased D GiB` (`unknown` where the compiler gave no figure)."""

        def gib(nbytes: int | None) -> str:
            return "unknown" if nbytes is None else f"{nbytes / 2**30:.3g} GiB"

        added = (
            ("arguments", self.argument_bytes),
            ("outputs", self.output_bytes),
            ("temporaries", self.temp_bytes),
            ("generated code", self.generated_code_bytes),
        )
        summed = " + ".join(f"{name} {gib(nbytes)}" for name, nbytes in added)
        return f"{gib(self.total_bytes)} per device = {summed} - aliased {gib(self.alias_bytes)}"


def memory(compiled: Any) -> Memory:
    """`compiled`'s memory analysis (jax.stages.Compiled.memory_analysis), per device."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # not implemented on some backends
        stats = None
    if isinstance(stats, (list, tuple)):
        stats = stats[0] if stats else None

    def field(attr: str) -> int | None:
        value = getattr(stats, attr, None)
        return None if value is None or int(value) < 0 else int(value)

    parts = {
        "argument_bytes": field("argument_size_in_bytes"),
        "output_bytes": field("output_size_in_bytes"),
        "alias_bytes": field("alias_size_in_bytes"),
        "temp_bytes": field("temp_size_in_bytes"),
        "generated_code_bytes": field("generated_code_size_in_bytes"),
    }
    summed = [parts[k] for k in ("argument_bytes", "output_bytes", "temp_bytes")]
    total = (
        sum(summed) + (parts["generated_code_bytes"] or 0) - (parts["alias_bytes"] or 0)
        if None not in summed
        else None
    )
    return Memory(**parts, total_bytes=total)


def kernels(compiled: Any) -> list[hlo.Kernel]:
    """`compiled`'s kernels (jaxcnn.perf.hlo), kernels alike in all but name merged, the
    heaviest first (what a record's `kernels` summary holds), read as the platform's
    compiler wrote them (its devices say which)."""
    shardings = jax.tree.leaves(compiled.input_shardings)
    platform = next(iter(shardings[0].device_set)).platform if shardings else None
    found = hlo.kernels(compiled.as_text(), platform)
    return hlo.from_summary(hlo.summarize(found))


@dataclasses.dataclass(frozen=True)
class CompiledStep:
    """What compiling one train step for a target says. Per device: `memory`,
    `usable_bytes`, `xla_flops_per_device`, `prediction`, `kernels`; global (the whole
    batch, all devices): `flops`, `batch_size`."""

    target: str  # its name in jaxcnn.targets.TARGETS
    placement: str  # single, sharded, model or data_model
    devices: int  # the target's JAX devices the step runs on
    batch_size: int  # global
    compiled: bool  # every program asked for compiled
    # Why not, in one line: the compiler's refusal, or why a compiled step does not fit.
    message: str | None
    memory: Memory | None  # the train step's, per device, as its compiler analysed it
    usable_bytes: int | None  # what a JAX program may use of one device's memory
    # memory.total_bytes <= usable_bytes; False also where the compiler refused the step
    # for want of memory (RESOURCE_EXHAUSTED); None where neither is known.
    fits: bool | None
    flops: int  # one step's FLOPs counted from its jaxpr (jaxcnn.flops), all devices
    xla_flops_per_device: float | None  # the compiler's count; None where it gives none
    # PREDICTED, not measured: one step on one device (its device step, loop step,
    # band or None: unvalidated; `as_record()` is a record's block); None where the model
    # cannot price the program (a chip without vendor figures, no constants for it).
    prediction: predict_lib.Prediction | None
    kernels: tuple[hlo.Kernel, ...]  # the train step's, merged (`kernels`)
    compile_seconds: dict[str, float]  # per program compiled, in the order compiled
    # The compiler's refusal as raised (the first line of which is `message`), and the
    # compiled programs by name (jax.stages.Compiled: as_text(), cost_analysis(), ...).
    error: BaseException | None = dataclasses.field(default=None, repr=False, compare=False)
    executables: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)


# --- Shapes, and what is wrong with them --------------------------------------------------


def abstract_state(
    model: nn.Module, tx: optax.GradientTransformation, input_shape: Sequence[int], seed: int = 0
) -> train.TrainState:
    """The train state create_train_state would make for `model` and `tx` on examples of
    `input_shape` (no batch axis), as shapes: nothing is initialised (what
    create_train_state cannot take is a UsageError here too)."""
    return jax.eval_shape(lambda: train.create_train_state(model, tx, input_shape, seed))


def abstract_batch(batch_size: int, input_shape: Sequence[int]) -> dict[str, Any]:
    """A global batch as jaxcnn.data.batches yields it, as shapes: uint8 images, int32
    labels and the float32 mask of real rows. A size or shape it cannot be is a
    UsageError naming the fix."""
    check_count("batch_size", batch_size, 1)
    input_shape = train.input_shape_of(input_shape)
    return {
        "image": jax.ShapeDtypeStruct((batch_size, *input_shape), jnp.uint8),
        "label": jax.ShapeDtypeStruct((batch_size,), jnp.int32),
        "mask": jax.ShapeDtypeStruct((batch_size,), jnp.float32),
    }


def _shapes(tree: Any, what: str, fix: str) -> Any:
    """`tree` with every leaf as its jax.ShapeDtypeStruct; a usage error naming the first
    leaf that has no shape and dtype."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(tree)
    shapes = []
    for path, leaf in leaves:
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            where = jax.tree_util.keystr(path) or " itself"
            raise UsageError(
                f"{what}{where} is a {type(leaf).__name__}, not an array or "
                f"jax.ShapeDtypeStruct: {fix}"
            )
        shapes.append(jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype))
    return jax.tree_util.tree_unflatten(treedef, shapes)


_STATE_FIX = (
    "pass the state as shapes, e.g. "
    "jaxcnn.aot.abstract_state(model, jaxcnn.make_optimizer('adam'), input_shape)"
)
_BATCH_FIX = "pass e.g. jaxcnn.aot.abstract_batch(batch_size, input_shape)"


def _checked_state(state: Any, step: Callable[..., Any]) -> Any:
    if step is train.train_step and not isinstance(state, train.TrainState):
        raise UsageError(
            f"the state is a {type(state).__name__}, not a jaxcnn TrainState: {_STATE_FIX}"
        )
    return _shapes(state, "state", _STATE_FIX)


def _checked_batch(batch: Any, step: Callable[..., Any]) -> tuple[dict[str, Any], int]:
    """(the batch as shapes, its global size); a usage error for a batch that is not a
    dict of arrays of one leading size, or (for jaxcnn's own step) has other keys."""
    if not isinstance(batch, Mapping):
        raise UsageError(f"the batch is a {type(batch).__name__}, not a dict: {_BATCH_FIX}")
    if step is train.train_step:
        missing = [k for k in ("image", "label") if k not in batch]
        unknown = [k for k in batch if k not in BATCH_KEYS]
        if missing or unknown:
            found = ", ".join(map(repr, batch)) or "none"
            raise UsageError(
                f"the batch has keys {found}: train_step takes 'image' and 'label' (and "
                f"optionally 'mask'); {_BATCH_FIX}"
            )
    shapes = _shapes(dict(batch), "batch", _BATCH_FIX)
    sizes = {x.shape[0] if x.shape else None for x in jax.tree.leaves(shapes)}
    if len(sizes) != 1 or None in sizes:
        raise UsageError(
            f"the batch's arrays have leading sizes {sorted(map(str, sizes))}: every one "
            "needs the same batch axis first"
        )
    return shapes, sizes.pop()


def check(target_name: str, placement: str, batch_size: int) -> targets.Target:
    """The target called `target_name`, once the placement and batch size suit it and its
    compiler is installed; a usage error naming the fix otherwise."""
    target = targets.get(target_name)
    check_choice("placement", placement, choices.STRATEGIES + choices.MODEL_STRATEGIES)
    parallel.check_batch_size(batch_size, parallel.mesh_axes(placement, target.devices)[0])
    if placement == "single" and target.devices > 1:
        raise UsageError(
            f"{target.name} has {target.devices} devices: place the step 'sharded' "
            "(--strategy=sharded) to spread the batch over them (single would use one)"
        )
    if placement == "pmap":
        parallel.input_shardings(placement, [], None)  # a usage error naming sharded
    targets.require_compiler(target)  # what was asked first, then what is installed
    return target


# --- Compiling -------------------------------------------------------------------------


def _placed(tree: Any, sharding: Any) -> Any:
    """`tree`'s shapes with `sharding`: one for every leaf, or a tree like `tree`'s."""
    if not isinstance(sharding, jax.sharding.Sharding):
        return jax.tree.map(
            lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, sharding
        )
    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding), tree)


def _epoch_inputs(batch: Mapping[str, Any], steps: int = EPOCH_STEPS) -> tuple[dict[str, Any], Any]:
    """The whole-epoch program's (dataset, order) for `steps` batches like `batch`: the
    dataset's rows (no mask: every row is real) and the order that picks them."""
    size = jax.tree.leaves(batch)[0].shape[0]
    dataset = {
        k: jax.ShapeDtypeStruct((size * steps, *v.shape[1:]), v.dtype)
        for k, v in batch.items()
        if k != "mask"
    }
    return dataset, jax.ShapeDtypeStruct((steps, size), jnp.int32)


def compiled_programs(
    devices: Sequence[jax.Device],
    state: Any,
    batch: Mapping[str, Any],
    *,
    placement: str = "single",
    programs: Sequence[str] = ("train",),
    step: Callable[..., Any] = train.train_step,
    evaluate: Callable[..., Any] = train.eval_step,
    where: str | None = None,
    progress: Progress | None = None,
    options: Mapping[str, Any] | None = None,
) -> Iterator[tuple[str, Any, float]]:
    """(name, compiled, seconds) of each of `programs` as it compiles: `placement` of
    `step` and `evaluate` on `devices` (a target's compile-only ones, or devices at
    hand), lowered against `state` and `batch` as shapes. The one place jaxcnn compiles
    a program ahead of time. `progress` gets a line before and after each compile,
    naming the program and `where` (the devices' platform by default). `options`: XLA
    options beyond the platform's own (a target's, jaxcnn.targets.compiler_options)."""
    placed = parallel.place(placement, devices, step, evaluate, options=options)
    state_sharding, batch_sharding, dataset_sharding = parallel.input_shardings(
        placement, devices, state
    )
    state = _placed(state, state_sharding)
    calls = {
        "train": (placed.train_step, state, _placed(batch, batch_sharding)),
        "eval": (placed.eval_step, state, _placed(batch, batch_sharding)),
        "epoch": (placed.train_epoch, state, *_placed(_epoch_inputs(batch), dataset_sharding)),
    }
    where = where or devices[0].platform
    for name in programs:
        fn, *args = calls[name]
        title = f"the {_TITLES[name]} for {where}"
        if progress is not None:
            progress(f"compiling {title}...")
        started = time.perf_counter()
        compiled = fn.lower(*args).compile()
        seconds = time.perf_counter() - started
        if progress is not None:
            progress(f"compiled {title} in {seconds:.1f} s")
        yield name, compiled, seconds


def _too_big(total: int | None, limit: int | None) -> str:
    if total is None or limit is None:
        return "memory unknown: the compiler gave no memory analysis"
    return (
        f"needs {total / 2**30:.2f} GiB per device; JAX can use {limit / 2**30:.2f} GiB of "
        "the target's memory"
    )


def _traced_flops(step: Callable[..., Any], state: Any, batch: Any) -> int:
    """One step's FLOPs from its jaxpr; a usage error where the step cannot be traced on
    these shapes (a model whose input is not the batch's images, say)."""
    try:
        return flops_lib.count(step, state, batch).total
    except UsageError:
        raise
    except Exception as error:  # the user's model or step, on the user's shapes
        first = next((line for line in str(error).splitlines() if line.strip()), "")
        raise UsageError(
            f"the step cannot be traced on this state and batch ({type(error).__name__}: "
            f"{first[:200]}): give the batch the shapes the model takes"
        ) from None


def compile_for(
    target: str,
    state: Any,
    batch: Mapping[str, Any],
    *,
    placement: str = "single",
    step: Callable[..., Any] = train.train_step,
    evaluate: Callable[..., Any] = train.eval_step,
    programs: Sequence[str] = ("train",),
    progress: Progress | None = None,
) -> CompiledStep:
    """Compile `step` (jaxcnn's train step by default, or any function of (state, batch,
    axis_name=None) -> (state, metrics)) for the target called `target`, placed `single`
    (one device), `sharded` (the batch split over all its devices), `model` or
    `data_model` (jaxcnn's TrainState's kernels split too: jaxcnn.parallel), against
    `state` and `batch` as shapes; `programs` may add "eval" (`evaluate`) and "epoch" (the
    whole-epoch loop). A usage error (an unknown target, a state or batch without
    shapes, a batch that does not split) is raised before anything compiles; a
    compiler's refusal is the result's `message`, not an exception."""
    targets.get(target)  # the name first: the rest is checked against it
    check_choice("placement", placement, choices.STRATEGIES + choices.MODEL_STRATEGIES)
    check_names("programs", programs, "program", PROGRAMS, "('train', 'eval')")
    if "train" not in programs:
        raise UsageError(
            f"programs {list(programs)}: give 'train', and any of {', '.join(PROGRAMS[1:])}"
        )
    for name, fn in (("step", step), ("evaluate", evaluate), ("progress", progress)):
        if not (callable(fn) or (name == "progress" and fn is None)):
            raise UsageError(
                f"{name} is {described(fn)}, not a function: give one taking "
                + ("a line of text, or None" if name == "progress" else "(state, batch)")
            )
    checked_state = _checked_state(state, step)
    checked_batch, batch_size = _checked_batch(batch, step)
    found = check(target, placement, batch_size)
    try:  # the constants it will be priced with, before the compiler starts
        predict_lib.constants()
    except predict_lib.ConstantsError as e:
        raise DataError(str(e)) from None
    if placement in choices.MODEL_STRATEGIES:  # what the rule splits: known from shapes
        parallel.check_split(checked_state.params, parallel.mesh_axes(placement, found.devices)[1])
    checked_state, formulation = _formulated(checked_state, found.platform)
    flops = _traced_flops(step, checked_state, checked_batch)  # before the compiler starts
    devices = list(targets.abstract_devices(found))
    usable = targets.describe(found)["usable_bytes_per_device"]
    done: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    refused = None
    try:
        for name, compiled, took in compiled_programs(
            devices,
            checked_state,
            checked_batch,
            placement=placement,
            programs=programs,
            step=step,
            evaluate=evaluate,
            where=found.name,
            progress=progress,
            options=targets.compiler_options(found),
        ):
            done[name], seconds[name] = compiled, took
    except jax.errors.JaxRuntimeError as error:  # the compiler's refusal: an answer
        refused = error
    common = dict(
        target=found.name,
        placement=placement,
        devices=len(devices),
        batch_size=batch_size,
        usable_bytes=usable,
        flops=flops,
        compile_seconds=seconds,
        executables=done,
    )
    if refused is not None:
        first = next((line for line in str(refused).splitlines() if line.strip()), "")
        return CompiledStep(
            compiled=False,
            message=first,
            memory=memory(done["train"]) if "train" in done else None,
            fits=False if first.startswith("RESOURCE_EXHAUSTED") else None,
            xla_flops_per_device=None,
            prediction=None,
            kernels=(),
            error=refused,
            **common,
        )
    train_step = done["train"]
    needs = memory(train_step)
    known = needs.total_bytes is not None and usable is not None
    fits = known and needs.total_bytes <= usable
    ks = kernels(train_step)
    return CompiledStep(
        compiled=True,
        message=None if fits else _too_big(needs.total_bytes, usable),
        memory=needs,
        fits=fits if known else None,
        xla_flops_per_device=flops_lib.xla_flops(train_step),
        prediction=_predicted(ks, checked_batch, devices, found, placement, formulation),
        kernels=tuple(ks),
        **common,
    )


def _formulated(state: Any, platform: str) -> tuple[Any, str | None]:
    """`state` with its model formulated for `platform` where the model left the choice
    to where it is compiled (jaxcnn.formulation.AUTO: a registry model's default), and
    the formulation's name (None where the model is not one of jaxcnn's layers')."""
    module = getattr(state.apply_fn, "__self__", None)
    chosen = getattr(module, "formulation", None)
    if not isinstance(chosen, formulation_lib.Formulation):
        return state, None
    placed = formulation_lib.for_target(chosen, platform)
    if placed is chosen:
        return state, chosen.name
    return state.replace(apply_fn=module.clone(formulation=placed).apply), placed.name


def predicted(
    ks: Sequence[hlo.Kernel],
    *,
    target: targets.Target,
    devices: int,
    batch_size: int,
    batch_bytes: int,
    copies: int,
    placement: str = "single",
    dispatches: int = 1,
    formulation: str | None = None,
    table: Mapping[str, Any] | None = None,
) -> predict_lib.Prediction | None:
    """The per-kernel model's prediction of one step of the program `ks` (kernels in
    program order) on one of `devices` devices of `target` at its chip's vendor rates,
    with the loop step of jaxcnn's step loop around it: the loop's host parts modelled
    for a global batch of `batch_bytes` in `copies` arrays handed over in `dispatches`
    jitted calls per step (jaxcnn.host_loop.modelled_parts), one device's share of the
    batch over the chip's host link, and the runtime's host side of launching `ks`
    (jaxcnn.perf.runtime). The kernels are priced in their summary form (a record's
    `kernels`), so a record of the same program is priced to the same bit. None where a
    kernel cannot be priced."""
    from jaxcnn import host_loop

    table = table or predict_lib.constants()
    chip_rates = rates_lib.of_target(target)
    devices = parallel.mesh_axes(placement, devices)[0]  # a model placement: all on each
    host = host_lib.host_side(
        measured=None,
        dispatch_s=host_lib.measured_dispatch(placement, table, target.platform),
        batch_bytes=batch_bytes // devices,
        host_link_bytes_per_s=chip_rates.host_link_bytes_per_s,
        platform=target.platform,
        modelled=host_loop.modelled_parts(
            batch_bytes, dispatches, table, target.platform, convs=host_lib.convs_per_step(ks)
        ),
        modelled_on=host_lib.section(table, target.platform)[0],
    )
    try:
        return predict_lib.predict(
            hlo.from_summary(hlo.summarize(ks)),
            chip_rates,
            target.platform,
            batch_size,
            devices=devices,
            chip=target.chip,
            host=host,
            launches=runtime_lib.launches(ks, target.platform),
            copies=copies,
            formulation=formulation,
            table=table,
        )
    except ValueError:
        return None


def _predicted(
    ks: list[hlo.Kernel],
    batch: Mapping[str, Any],
    devices: Sequence[jax.Device],
    target: targets.Target,
    placement: str,
    formulation: str | None,
) -> predict_lib.Prediction | None:
    """`predicted` for a step of `batch` (its arrays' bytes and count) in jaxcnn's own
    step loop (one jitted call per step)."""
    nbytes = sum(math.prod(x.shape) * np.dtype(x.dtype).itemsize for x in batch.values())
    return predicted(
        ks,
        target=target,
        devices=len(devices),
        batch_size=next(iter(batch.values())).shape[0],
        batch_bytes=nbytes,
        copies=len(batch),
        placement=placement,
        formulation=formulation,
    )
