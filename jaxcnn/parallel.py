"""Placements: where one train step runs, without copying its body.

    placement = place("pmap", jax.devices())
    state = placement.put_state(state)
    state, metrics = placement.train_step(state, placement.put_batch(batch))
    loss = placement.get_metrics(metrics)["loss"]  # pmap: one copy per replica until then

`batch` is a dict {"image": (B, H, W, C), "label": (B,)} of host arrays (what
`jaxcnn.data.batches` yields); under `pmap` and `sharded` its B must divide over the
devices (a UsageError naming sizes that do, otherwise).

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
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxcnn import devices as devices_lib
from jaxcnn import epochs, train
from jaxcnn.errors import UsageError

STRATEGIES = ("single", "pmap", "sharded")
PMAP_AXIS = "batch"  # the axis name the step's collectives use under pmap
DATA_AXIS = "data"  # the mesh axis the batch is split along under sharded jit


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


def input_shardings(strategy: str, devices: Sequence[jax.Device]) -> tuple[Any, Any]:
    """(the state's sharding, a batch's) as `strategy` places them on `devices`: what
    its steps are lowered against where no arrays can be put, such as compile-only
    devices (jaxcnn.targets). The whole-epoch program takes its dataset and order with
    the state's sharding. pmap has none: jax.pmap compiles only for devices at hand."""
    if strategy == "pmap":
        raise UsageError(
            "strategy pmap compiles only for devices at hand (jax.pmap cannot lower for "
            "compile-only devices): use --strategy=sharded, the same data parallelism"
        )
    if strategy == "single":
        one = jax.sharding.SingleDeviceSharding(devices[0])
        return one, one
    if strategy == "sharded":
        mesh = Mesh(np.array(devices), (DATA_AXIS,))
        return NamedSharding(mesh, P()), NamedSharding(mesh, P(DATA_AXIS))
    raise UsageError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")


def place(
    strategy: str,
    devices: Sequence[jax.Device],
    step: Callable[..., Any] = train.train_step,
    evaluate: Callable[..., Any] = train.eval_step,
    *,
    options: Mapping[str, Any] | None = None,
) -> Placement:
    """Place `step` and `evaluate` (functions of (state, batch, axis_name)) on `devices`.
    `options`: XLA options beyond the platform's own (a compile-only target's own,
    `jaxcnn.targets.compiler_options`), for this placement's jit calls only.

    With many processes, `devices` is the global list (`jax.devices()`), the same on
    every process.
    """
    builders = {"single": _single, "pmap": _pmap, "sharded": _sharded}
    if strategy not in builders:
        raise UsageError(f"unknown strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    devices = list(devices)
    if not devices:
        raise UsageError(f"strategy {strategy} needs at least one device")
    _check_processes(strategy, devices[:1] if strategy == "single" else devices)
    return builders[strategy](devices, step, evaluate, dict(options or {}))
