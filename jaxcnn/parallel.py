"""Placements: where one train step runs, without copying its body.

    placement = place("pmap", jax.devices())
    state = placement.put_state(state)
    state, metrics = placement.train_step(state, placement.put_batch(batch))
    loss = placement.get_metrics(metrics)["loss"]  # pmap: one copy per replica until then

`batch` is a dict {"image": (B, H, W, C), "label": (B,)} of host arrays (what
`jaxcnn.data.batches` yields); under `pmap` and `sharded` its B must divide over the
devices, under `data_model` over its data axis (a UsageError naming sizes that do,
otherwise).

A `Placement` is the compiled step plus the functions that move state and batches to
where its strategy wants them and bring them back. Strategies:

- `single`: jit on one device.
- `pmap`: one replica of the state per device, the global batch reshaped to
  (devices, per_device, ...); the step runs with `axis_name="batch"`, so gradients,
  BatchNorm statistics and metrics are averaged across replicas by the step itself.
  pmap has been in maintenance mode since JAX 0.8 (it is implemented on shard_map)
  but works, and is what the Flax ImageNet example and many users know. Its whole
  epoch is that same per-replica program written with `shard_map` (a `lax.scan` of the
  step with the same axis name, each replica gathering its columns of the order from
  its own copy of the dataset), since pmap cannot take a replicated dataset without
  copying it to every device on every call.
- `sharded`: jit with `NamedSharding` on a 1-D ("data",) mesh: state replicated,
  batch split along its first axis, `axis_name=None`; XLA inserts the collectives.
- `model`: jit on a 1-D ("model",) mesh: every parameter the split rule picks
  (`splits`: a kernel whose output features divide over the devices) split on its last
  axis, its optimizer state split as it is, everything else and the batch replicated.
- `data_model`: jit on a 2-D ("data", "model") mesh (`mesh_shape`): the batch split on
  "data", the parameters split on "model" by the same rule.

Both model strategies run the step with `axis_name=None`, as `sharded` does: XLA inserts
every collective. The rule is a function of shapes, so a state's shardings are known
while its step is traced: the step is wrapped in sharding constraints on the state it
takes and returns (`_constrained`), not compiled per state, and its body is unchanged.

Every jit here compiles with the platform's XLA options (`devices.platform_compiler_options`);
`jax.pmap` takes none, so a pmap placement compiles without them, its epoch too, and
says so in `compiler_options`.

Many hosts (after `jaxcnn.distributed.initialize`) use the same strategies with the
global device list: `put_batch` takes the global batch that every process reads
(the same shuffled order everywhere) and each process transfers only its own rows to
its own devices; metrics and state come back identical on every process.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxcnn import devices as devices_lib
from jaxcnn import epochs, train
from jaxcnn.choices import MODEL_STRATEGIES, STRATEGIES
from jaxcnn.errors import UsageError

PMAP_AXIS = "batch"  # the axis name the step's collectives use under pmap
DATA_AXIS = "data"  # the mesh axis the batch is split along under sharded jit
MODEL_AXIS = "model"  # the mesh axis the parameters are split along
# The split rule's minimum: a kernel is split only if each device keeps at least this
# many of its output features. A choice, not a measurement: a narrower slice leaves each
# device a sliver of a matmul for the same collectives.
MIN_FEATURES_PER_DEVICE = 4


@dataclasses.dataclass(frozen=True)
class Placement:
    strategy: str
    devices: tuple[jax.Device, ...]
    train_step: Callable[..., Any]  # (state, batch) -> (state, metrics); donates state
    eval_step: Callable[..., Any]  # (state, batch) -> metrics
    put_state: Callable[[train.TrainState], train.TrainState]  # idempotent
    put_batch: Callable[[dict[str, Any]], dict[str, Any]]  # global host batch -> placed
    get_state: Callable[[train.TrainState], train.TrainState]  # -> one logical copy
    get_metrics: Callable[[dict[str, Any]], dict[str, Any]]  # -> scalars
    # Whole epochs on device (jaxcnn.epochs): (state, dataset, order) -> (state,
    # per-step metrics); donates state.
    train_epoch: Callable[..., Any]
    put_dataset: Callable[[dict[str, Any]], dict[str, Any]]  # all rows, on every device
    compiler_options: dict[str, Any]  # the XLA options its steps were compiled with

    @property
    def num_devices(self) -> int:
        return len(self.devices)


def check_batch_size(batch_size: int, num_devices: int) -> None:
    """A global batch must split evenly over devices; the error names sizes that do."""
    if batch_size % num_devices:
        lower = batch_size - batch_size % num_devices
        options = [s for s in (lower, lower + num_devices) if s > 0]
        raise UsageError(
            f"batch size {batch_size} does not divide over {num_devices} devices: use a "
            f"multiple of {num_devices} (e.g. {' or '.join(map(str, options))})"
        )


def _check_batch(batch: dict[str, Any], num_devices: int) -> None:
    """`check_batch_size` for a host batch's leading axis, before it is split."""
    for x in jax.tree.leaves(batch):
        check_batch_size(int(np.shape(x)[0]), num_devices)


STEP_DOC = """(state, batch) -> (new state, metrics), compiled for this placement.

The step donates `state`: XLA writes the new state into its memory, so the arrays of the
state given are deleted once the step runs (on one device, so are those of the state
`put_state` was given, which it returns as they are). Use the state the step returns;
keep a copy from before with `jax.tree.map(jnp.copy, state)`. A donated state given
again, and under pmap a state or batch not placed by `put_state`/`put_batch`, is a
UsageError naming the fix, raised before the step runs.
"""


def _shape(x: Any) -> tuple[int, ...]:
    """`x`'s shape; the attribute where it has one (np.shape costs microseconds more)."""
    shape = getattr(x, "shape", None)
    return tuple(shape) if shape is not None else np.shape(x)


def _check_not_donated(state: Any) -> None:
    """UsageError for a state whose arrays an earlier step took (donation deletes them
    all, its step counter included, which is the one array looked at here)."""
    is_deleted = getattr(getattr(state, "step", None), "is_deleted", None)  # duck-typed:
    if is_deleted is not None and is_deleted():  # isinstance(x, jax.Array) costs microseconds
        raise UsageError(
            "this state was given to an earlier train step, which reused its memory "
            "(the step donates its state): use the state each step returns, "
            "state, metrics = placement.train_step(state, batch)"
        )


def _check_replicated(state: Any, copies: int) -> None:
    """Under pmap the state has one copy per device, stacked on a leading axis."""
    step = getattr(state, "step", None)
    if step is not None and _shape(step)[:1] != (copies,):
        raise UsageError(
            f"under pmap the step takes one copy of the state per device ({copies}): "
            "place it first, state = placement.put_state(state)"
        )


def _check_split(batch: Any, copies: int) -> None:
    """Under pmap every array of a batch is split over the devices on a leading axis."""
    for x in jax.tree.leaves(batch):
        if _shape(x)[:1] != (copies,):
            raise UsageError(
                f"under pmap a batch is split over the {copies} devices: give the step "
                "placement.put_batch(batch), not the host batch"
            )


def _checked_step(compiled: Any, copies: int | None = None) -> Callable[..., Any]:
    """`compiled` (state, batch) -> (state, metrics) behind the checks of `STEP_DOC`:
    the donation check in front of the call (one attribute read), and under pmap the
    state's and batch's leading axes looked at only once pmap has refused them (it
    does before running anything), so a step that runs pays nothing for them."""

    def step(state: Any, batch: Any) -> Any:
        _check_not_donated(state)
        if copies is None:
            return compiled(state, batch)
        try:
            return compiled(state, batch)
        except (IndexError, ValueError, TypeError):
            _check_replicated(state, copies)
            _check_split(batch, copies)
            raise

    step.__doc__ = STEP_DOC
    step.lower = compiled.lower  # what measuring and compile-only lower
    return step


def _checked_epoch(compiled: Any) -> Callable[..., Any]:
    """`compiled` (state, dataset, order) -> (state, metrics) behind the donation check."""

    def epoch(state: Any, dataset: Any, order: Any) -> Any:
        _check_not_donated(state)
        return compiled(state, dataset, order)

    epoch.__doc__ = "(state, dataset, order) -> (new state, per-step metrics); donates state."
    epoch.lower = compiled.lower
    return epoch


def _check_processes(strategy: str, devices: Sequence[jax.Device]) -> None:
    """Every process runs the same program, so each must own some of the devices."""
    owned = {d.process_index for d in devices}
    missing = [p for p in range(jax.process_count()) if p not in owned]
    if missing:
        hint = "; use pmap or sharded over all devices" if strategy == "single" else ""
        raise UsageError(
            f"strategy {strategy} on {len(devices)} device(s) leaves process(es) "
            f"{', '.join(map(str, missing))} of {jax.process_count()} without one{hint}"
        )


def _put(x: Any, sharding: NamedSharding) -> jax.Array:
    """`x` (the same global value on every process) placed with `sharding`; each
    process transfers only the slices its own devices hold."""
    if isinstance(x, jax.Array) and x.sharding == sharding:  # already placed
        return x
    if sharding.is_fully_addressable:  # one process: one batched transfer
        return jax.device_put(x, sharding)
    host = np.asarray(x)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _put_everywhere(tree: Any, sharding: NamedSharding) -> Any:
    """Every array of `tree` placed with `sharding` (replicated: whole on every device)."""
    return jax.tree.map(lambda x: _put(x, sharding), tree)


def compiler_options(strategy: str, platform: str) -> dict[str, Any]:
    """The XLA options a `strategy` placement on `platform` compiles its steps with."""
    return {} if strategy == "pmap" else devices_lib.platform_compiler_options(platform)


def _put_state(put: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`put` for a state, refusing one an earlier step donated."""

    def put_state(state: Any) -> Any:
        _check_not_donated(state)
        return put(state)

    return put_state


def _single(devices: Sequence[jax.Device], step, evaluate, extra: dict[str, Any]) -> Placement:
    device = devices[0]
    put = lambda tree: jax.device_put(tree, device)  # noqa: E731
    options = {**compiler_options("single", device.platform), **extra}
    jit = functools.partial(jax.jit, compiler_options=options)
    return Placement(
        strategy="single",
        devices=(device,),
        train_step=_checked_step(jit(step, donate_argnums=0)),
        eval_step=jit(evaluate),
        put_state=_put_state(put),
        put_batch=put,
        get_state=lambda state: state,
        get_metrics=lambda metrics: metrics,
        train_epoch=_checked_epoch(
            jit(functools.partial(epochs.train_epoch, step=step), donate_argnums=0)
        ),
        put_dataset=put,
        compiler_options=options,
    )


def _first_replica(tree: Any) -> Any:
    # Metrics are equal on every replica (psum'd), so this process's replica 0 is them;
    # addressable_data works on every host, where x[0] may need another host's device.
    return jax.tree.map(lambda x: x.addressable_data(0)[0], tree)


def _unreplicate(tree: Any, mesh: Mesh) -> Any:
    """The (n, ...) stacked replicas as one global array replicated over the mesh, made
    from the shards each process already holds: no transfer, and in a multi-host run
    still a global array (what Orbax needs to save), unlike one host-local replica."""
    replicated = NamedSharding(mesh, P())

    def one(x: jax.Array) -> jax.Array:
        shards = [s.data.reshape(x.shape[1:]) for s in x.addressable_shards]
        return jax.make_array_from_single_device_arrays(x.shape[1:], replicated, shards)

    return jax.tree.map(one, tree)


def _pmap(devices: Sequence[jax.Device], step, evaluate, extra: dict[str, Any]) -> Placement:
    if extra:
        raise UsageError(f"pmap compiles with no XLA options: {', '.join(extra)} cannot apply")
    mesh = Mesh(np.array(devices), (PMAP_AXIS,))
    stacked = NamedSharding(mesh, P(PMAP_AXIS))  # what pmap itself returns
    local = [d for d in devices if d.process_index == jax.process_index()]
    n = len(devices)

    def replicate(x: Any) -> jax.Array:
        if isinstance(x, jax.Array) and x.is_fully_replicated:  # e.g. from get_state
            x = x.addressable_data(0)  # the local copy: the value may span hosts
        x = jnp.asarray(x)[None]
        shards = [jax.device_put(x, d) for d in local]
        return jax.make_array_from_single_device_arrays((n, *x.shape[1:]), stacked, shards)

    def put_state(state: train.TrainState) -> train.TrainState:
        _check_not_donated(state)
        if jnp.ndim(state.step) == 1:  # the logical step is a scalar: already replicated
            return state
        return jax.tree.map(replicate, state)

    def put_batch(batch: dict[str, Any]) -> dict[str, Any]:
        _check_batch(batch, n)
        split = lambda x: _put(np.reshape(x, (n, -1, *np.shape(x)[1:])), stacked)  # noqa: E731
        return jax.tree.map(split, batch)

    pmapped = functools.partial(jax.pmap, axis_name=PMAP_AXIS, devices=list(devices))
    replica_step = functools.partial(step, axis_name=PMAP_AXIS)

    def replica_epoch(state, dataset, order):
        # One replica's shard: its state with a leading axis of 1, the whole dataset,
        # and its columns of the order, which are the rows put_batch would give it.
        state = jax.tree.map(lambda x: x[0], state)
        state, metrics = epochs.train_epoch(state, dataset, order, step=replica_step)
        return jax.tree.map(lambda x: x[None], (state, metrics))

    epoch = jax.shard_map(
        replica_epoch,
        mesh=mesh,
        in_specs=(P(PMAP_AXIS), P(), P(None, PMAP_AXIS)),
        out_specs=(P(PMAP_AXIS), P(PMAP_AXIS)),
    )
    return Placement(
        strategy="pmap",
        devices=tuple(devices),
        train_step=_checked_step(pmapped(replica_step, donate_argnums=0), copies=n),
        eval_step=pmapped(functools.partial(evaluate, axis_name=PMAP_AXIS)),
        put_state=put_state,
        put_batch=put_batch,
        get_state=lambda state: _unreplicate(state, mesh),
        get_metrics=_first_replica,
        train_epoch=_checked_epoch(jax.jit(epoch, donate_argnums=0)),  # as the step: no options
        put_dataset=functools.partial(_put_everywhere, sharding=NamedSharding(mesh, P())),
        compiler_options=compiler_options("pmap", devices[0].platform),
    )


def _put_split(batch: dict[str, Any], n: int, sharding: NamedSharding) -> dict[str, Any]:
    _check_batch(batch, n)
    return jax.tree.map(lambda x: _put(x, sharding), batch)


def _sharded(devices: Sequence[jax.Device], step, evaluate, extra: dict[str, Any]) -> Placement:
    mesh = Mesh(np.array(devices), (DATA_AXIS,))
    replicated = NamedSharding(mesh, P())
    split = NamedSharding(mesh, P(DATA_AXIS))
    options = {**compiler_options("sharded", devices[0].platform), **extra}
    jit = functools.partial(jax.jit, compiler_options=options)
    # Explicit out_shardings keep the state replicated: left to itself, sharding
    # propagation may hand back parameters split over devices.
    return Placement(
        strategy="sharded",
        devices=tuple(devices),
        train_step=_checked_step(
            jit(
                step,
                in_shardings=(replicated, split),
                out_shardings=(replicated, replicated),
                donate_argnums=0,
            )
        ),
        eval_step=jit(evaluate, in_shardings=(replicated, split), out_shardings=replicated),
        put_state=_put_state(functools.partial(_put_everywhere, sharding=replicated)),
        put_batch=functools.partial(_put_split, n=len(devices), sharding=split),
        get_state=lambda state: state,  # replicated: already one logical copy
        get_metrics=lambda metrics: metrics,
        # The dataset is replicated (every device gathers its rows of each batch from
        # its own copy: no data moves between devices during the epoch).
        train_epoch=_checked_epoch(
            jit(
                functools.partial(epochs.train_epoch, step=step, batch_sharding=split),
                in_shardings=(replicated, replicated, replicated),
                out_shardings=(replicated, replicated),
                donate_argnums=0,
            )
        ),
        put_dataset=functools.partial(_put_everywhere, sharding=replicated),
        compiler_options=options,
    )


# --- Model parallelism: the parameters split too ------------------------------------


def splits(shape: Sequence[int], model_devices: int) -> bool:
    """The split rule: a parameter of `shape` is split over `model_devices` devices when it
    is a kernel (two axes or more: Dense's (in, out), Conv's (h, w, in, out)) whose last
    axis, its output features, divides over them into slices of at least
    MIN_FEATURES_PER_DEVICE. Biases, BatchNorm's scales and narrower kernels stay whole."""
    return (
        len(shape) >= 2
        and shape[-1] % model_devices == 0
        and shape[-1] // model_devices >= MIN_FEATURES_PER_DEVICE
    )


def parameter_spec(shape: Sequence[int], model_devices: int) -> P:
    """A parameter's PartitionSpec under the split rule: its last axis on "model", or whole."""
    if splits(shape, model_devices):
        return P(*([None] * (len(shape) - 1)), MODEL_AXIS)
    return P()


def check_split(params: Any, model_devices: int) -> None:
    """UsageError, naming why, unless the split rule splits some of `params` (arrays or
    shapes) over `model_devices` devices."""
    if any(splits(_shape(x), model_devices) for x in jax.tree.leaves(params)):
        return
    widths = sorted({_shape(x)[-1] for x in jax.tree.leaves(params) if len(_shape(x)) >= 2})
    found = ", ".join(map(str, widths)) or "none: it has no kernel"
    raise UsageError(
        f"the split rule splits none of this model's parameters over {model_devices} model "
        f"devices: no kernel's output features ({found}) divide into {model_devices} slices "
        f"of at least {MIN_FEATURES_PER_DEVICE}; use strategy sharded, or fewer devices on "
        "the model axis"
    )


def state_shardings(state: train.TrainState, mesh: Mesh) -> train.TrainState:
    """`state`'s NamedShardings on `mesh` (a tree like the state; arrays or shapes alike):
    the parameters by the split rule over the mesh's "model" axis, the optimizer state's
    copies of them (Adam's mu and nu, SGD's momentum) as their parameters, everything
    else replicated. A state of which the rule splits nothing is a UsageError saying why."""
    model_devices = mesh.shape[MODEL_AXIS]
    check_split(state.params, model_devices)
    replicated = NamedSharding(mesh, P())
    params = jax.tree.map(
        lambda x: NamedSharding(mesh, parameter_spec(_shape(x), model_devices)), state.params
    )
    opt_state = optax.tree_utils.tree_map_params(
        state.tx,
        lambda _, sharding: sharding,
        state.opt_state,
        params,
        transform_non_params=lambda _: replicated,
    )
    return state.replace(
        step=replicated,
        params=params,
        batch_stats=jax.tree.map(lambda _: replicated, state.batch_stats),
        opt_state=opt_state,
        rng=replicated,
    )


def mesh_shape(num_devices: int) -> tuple[int, int]:
    """data_model's (data, model) mesh on `num_devices`: the most balanced factorisation,
    the model axis the smaller factor (8 devices: 4 x 2; 16: 4 x 4; 6: 3 x 2)."""
    data, model = _balanced(num_devices)
    if model < 2:
        raise UsageError(
            f"strategy data_model splits {num_devices} device(s) into data x model axes of "
            f"2 or more, and {num_devices} has no such factors: use strategy model, or give "
            f"mesh_shape=(1, {num_devices})"
        )
    return data, model


def _balanced(n: int) -> tuple[int, int]:
    """(n // m, m) for the largest divisor m of `n` with m * m <= n."""
    model = max(d for d in range(1, math.isqrt(n) + 1) if n % d == 0)
    return n // model, model


def _model_mesh(
    strategy: str, devices: Sequence[jax.Device], shape: tuple[int, int] | None
) -> Mesh:
    """The mesh a model strategy places on: ("model",) over every device, or
    ("data", "model") of `shape` (data, model), by default `mesh_shape`'s."""
    n = len(devices)
    if strategy == "model":
        if shape is not None:
            raise UsageError(
                "mesh_shape is data_model's (data, model) mesh: strategy model puts every "
                "device on the model axis"
            )
        mesh_axes(strategy, n)  # at least 2 devices
        return Mesh(np.array(devices), (MODEL_AXIS,))
    data, model = mesh_shape(n) if shape is None else shape
    if shape is not None and (data * model != n or data < 1 or model < 2):
        balanced = _balanced(n)
        raise UsageError(
            f"mesh_shape {tuple(shape)} does not fit {n} devices: give (data, model) with "
            f"data x model = {n} and model >= 2, e.g. {balanced if balanced[1] > 1 else (1, n)}"
        )
    return Mesh(np.array(devices).reshape(data, model), (DATA_AXIS, MODEL_AXIS))


def _constrained(
    fn: Callable[..., Any], mesh: Mesh, batch_sharding: NamedSharding, *, returns_state: bool
) -> Callable[..., Any]:
    """`fn` (state, batch) with its state and batch constrained on entry to where the model
    strategies keep them (`state_shardings`, `batch_sharding`), and what it returns (a train
    step's (state, metrics), an eval step's metrics) to the state's shardings, the rest
    replicated: what jit's in and out shardings would say, which depend on the state's
    shapes, known once tracing starts."""
    constrain = jax.lax.with_sharding_constraint
    replicated = NamedSharding(mesh, P())

    def on(tree: Any, sharding: NamedSharding) -> Any:
        return constrain(tree, jax.tree.map(lambda _: sharding, tree))

    def placed(state: Any, batch: Any) -> Any:
        state = constrain(state, state_shardings(state, mesh))
        out = fn(state, on(batch, batch_sharding))
        if not returns_state:
            return on(out, replicated)
        new, metrics = out
        return constrain(new, state_shardings(new, mesh)), on(metrics, replicated)

    return placed


def _model(
    strategy: str,
    devices: Sequence[jax.Device],
    step,
    evaluate,
    extra: dict[str, Any],
    shape: tuple[int, int] | None,
) -> Placement:
    mesh = _model_mesh(strategy, devices, shape)
    replicated = NamedSharding(mesh, P())
    # The batch: split on "data" where the mesh has it, whole on every device otherwise.
    data_devices = dict(mesh.shape).get(DATA_AXIS, 1)
    batch = NamedSharding(mesh, P(DATA_AXIS)) if data_devices > 1 else replicated
    options = {**compiler_options(strategy, devices[0].platform), **extra}
    jit = functools.partial(jax.jit, compiler_options=options)
    placed_step = _constrained(step, mesh, batch, returns_state=True)

    def put(state: train.TrainState) -> train.TrainState:
        return jax.tree.map(_put, state, state_shardings(state, mesh))

    return Placement(
        strategy=strategy,
        devices=tuple(devices),
        train_step=_checked_step(jit(placed_step, donate_argnums=0)),
        eval_step=jit(_constrained(evaluate, mesh, batch, returns_state=False)),
        put_state=_put_state(put),
        put_batch=functools.partial(_put_split, n=data_devices, sharding=batch),
        get_state=lambda state: state,  # one logical copy, its parameters still split
        get_metrics=lambda metrics: metrics,
        train_epoch=_checked_epoch(
            jit(
                functools.partial(epochs.train_epoch, step=placed_step, batch_sharding=batch),
                donate_argnums=0,
            )
        ),
        put_dataset=functools.partial(_put_everywhere, sharding=replicated),
        compiler_options=options,
    )


@dataclasses.dataclass(frozen=True)
class Split:
    """How a placed state lies on each of its devices (`split_report`)."""

    split: int  # parameter arrays split over devices
    replicated: int  # parameter arrays whole on every device
    split_bytes: int  # one device's slices of the split parameters
    replicated_bytes: int  # the replicated parameters, whole, on each device
    state_bytes: int  # one device's share of the whole state (optimizer state included)

    @property
    def param_bytes(self) -> int:
        """The parameters' bytes on one device."""
        return self.split_bytes + self.replicated_bytes


def _nbytes(shape: Sequence[int], dtype: Any) -> int:
    return math.prod(shape) * np.dtype(dtype).itemsize


def split_report(state: train.TrainState) -> Split:
    """Which of `state`'s parameters its placement split and what each device holds, from
    the shardings of its arrays (or of shapes with shardings, for compile-only devices);
    a host state or a pmap replica is whole on each device."""
    stacked = np.ndim(state.step) == 1  # pmap: one copy per device on a leading axis

    def per_device(x: Any) -> tuple[int, ...]:
        shape = _shape(x)
        if stacked:
            return shape[1:]
        sharding = getattr(x, "sharding", None)
        return tuple(sharding.shard_shape(shape)) if sharding is not None else shape

    def full(x: Any) -> tuple[int, ...]:
        return _shape(x)[1:] if stacked else _shape(x)

    params = jax.tree.leaves(state.params)
    split = [x for x in params if per_device(x) != full(x)]
    whole = [x for x in params if per_device(x) == full(x)]
    return Split(
        split=len(split),
        replicated=len(whole),
        split_bytes=sum(_nbytes(per_device(x), x.dtype) for x in split),
        replicated_bytes=sum(_nbytes(full(x), x.dtype) for x in whole),
        state_bytes=sum(_nbytes(per_device(x), x.dtype) for x in jax.tree.leaves(state)),
    )


def input_shardings(
    strategy: str, devices: Sequence[jax.Device], state: Any
) -> tuple[Any, Any, Any]:
    """(the shardings of `state`, a tree like it; a batch's; the whole-epoch program's
    dataset and order's) as `strategy` places them on `devices`: what its steps are
    lowered against where no arrays can be put, such as compile-only devices
    (jaxcnn.targets). pmap has none: jax.pmap compiles only for devices at hand."""
    if strategy == "pmap":
        raise UsageError(
            "strategy pmap compiles only for devices at hand (jax.pmap cannot lower for "
            "compile-only devices): use --strategy=sharded, the same data parallelism"
        )
    if strategy == "single":
        one = jax.sharding.SingleDeviceSharding(devices[0])
        return jax.tree.map(lambda _: one, state), one, one
    if strategy == "sharded":
        mesh = Mesh(np.array(devices), (DATA_AXIS,))
        replicated = NamedSharding(mesh, P())
        return (
            jax.tree.map(lambda _: replicated, state),
            NamedSharding(mesh, P(DATA_AXIS)),
            replicated,
        )
    if strategy in MODEL_STRATEGIES:
        mesh = _model_mesh(strategy, devices, None)
        replicated = NamedSharding(mesh, P())
        split = NamedSharding(mesh, P(DATA_AXIS)) if strategy == "data_model" else replicated
        return state_shardings(state, mesh), split, replicated
    raise UsageError(_unknown(strategy))


def mesh_axes(strategy: str, num_devices: int) -> tuple[int, int]:
    """(the ways `strategy` on `num_devices` devices splits a global batch, which must
    divide by it; the ways it splits a kernel the rule picks): (1, 1) under single,
    (n, 1) under pmap and sharded, (1, n) under model, data_model's `mesh_shape`."""
    if strategy in ("pmap", "sharded"):
        return num_devices, 1
    if strategy == "model":
        if num_devices < 2:
            raise UsageError(
                f"strategy model splits parameters over 2 devices or more, got {num_devices}"
            )
        return 1, num_devices
    return mesh_shape(num_devices) if strategy == "data_model" else (1, 1)


def _unknown(strategy: str) -> str:
    known = ", ".join(STRATEGIES + MODEL_STRATEGIES)
    return f"unknown strategy {strategy!r}: choose one of {known}"


def place(
    strategy: str,
    devices: Sequence[jax.Device],
    step: Callable[..., Any] = train.train_step,
    evaluate: Callable[..., Any] = train.eval_step,
    *,
    options: Mapping[str, Any] | None = None,
    mesh_shape: tuple[int, int] | None = None,
) -> Placement:
    """Place `step` and `evaluate` (functions of (state, batch, axis_name)) on `devices`.
    `options`: XLA options beyond the platform's own (a compile-only target's own,
    `jaxcnn.targets.compiler_options`), for this placement's jit calls only.
    `mesh_shape`: data_model's (data, model) mesh, instead of `mesh_shape(len(devices))`.

    With many processes, `devices` is the global list (`jax.devices()`), the same on
    every process.
    """
    builders = {"single": _single, "pmap": _pmap, "sharded": _sharded}
    if strategy not in builders and strategy not in MODEL_STRATEGIES:
        raise UsageError(_unknown(strategy))
    devices = list(devices)
    if not devices:
        raise UsageError(f"strategy {strategy} needs at least one device")
    _check_processes(strategy, devices[:1] if strategy == "single" else devices)
    if strategy in MODEL_STRATEGIES:
        return _model(strategy, devices, step, evaluate, dict(options or {}), mesh_shape)
    if mesh_shape is not None:
        raise UsageError(
            f"mesh_shape is data_model's (data, model) mesh: strategy {strategy} takes none"
        )
    return builders[strategy](devices, step, evaluate, dict(options or {}))
