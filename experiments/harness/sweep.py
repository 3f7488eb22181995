"""A sweep: workloads run one after another on some devices, one record each.

    done, skipped = run_sweep(workloads, jax.devices(), SweepOptions(Path("runs")))

or `sweep_records(...)`, which yields each workload's record as the sweep reaches it
(one measured now once it is written), for a caller that shows them as they come.

Nothing lost, nothing twice: a workload whose configuration key already has a final
record (ok, nan, oom) in OUT/records.jsonl is skipped unless `force` (records.recorded);
an `error` is retried. Usage mistakes (an unknown model, a batch that does not split over the
devices) and data that cannot be read raise JaxcnnError before anything is run or
written. The device's matmul ceiling and memory bandwidth are measured once, before the
first workload that runs. With many processes, all run the same workloads (process 0
decides) and only process 0 writes.

One process per workload at a time: a workload's checkpoint folder (without
checkpoints, OUT/.locks/<key>) is locked while it runs (`jaxcnn.checkpoint.exclusive`),
and a second run of the same workload into the same folder says so in one line and
skips it, writing no record (it is not a result; the run holding it writes one). The
lock covers the whole check-then-append: once it is held, the records file is read
again, so a workload another run recorded after this one started is skipped, not
measured and recorded twice.

Out of memory ends a group: workloads sharing an `oom_group` (a batch sweep, smallest
first) after one that ran out of memory get `skipped` records naming it, since a larger
batch of the same program would only fail again, slowly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import shutil
import socket
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

from experiments import records
from experiments.harness import compile_only, died, kept, measure
from experiments.harness.prepare import (
    Split,
    check,
    config_key_for,
    devices_for,
    load_splits,
    record_for,
    split_key,
    train_examples,
)
from experiments.harness.runners.ensemble import run_ensemble
from experiments.harness.runners.interface import RunContext, Runner
from experiments.harness.runners.matmul import run_matmul
from experiments.harness.runners.train import run_train
from experiments.records.labels import device_name, model_with_overrides
from experiments.records.tables import si
from experiments.records.workload import Workload
from jaxcnn import data, host_memory, models
from jaxcnn import devices as devices_lib
from jaxcnn.checkpoint import CheckpointInUse, check_folder, exclusive
from jaxcnn.errors import UsageError
from jaxcnn.loop import Stopped, stop_agreed


def matmul_ceiling(device: jax.Device) -> dict[str, Any]:
    """The device's measured matmul TFLOP/s per dtype, for every record of this run;
    {} when it cannot be measured (the records then carry no measured MFU)."""
    try:
        ceiling = measure.measure_matmul_peak(device)
    except Exception as e:  # the ceiling is context; the workloads still run
        print(f"matmul ceiling not measured: {e}".splitlines()[0], file=sys.stderr)
        return {}
    found = ", ".join(f"{k} {si((v['tflops'] or 0) * 1e12, 'FLOP/s')}" for k, v in ceiling.items())
    print(f"matmul ceiling: {found}", file=sys.stderr)
    return ceiling


def memory_bandwidth(device: jax.Device) -> dict[str, Any] | None:
    """The device's measured memory bandwidth, for every record of this run (its
    predicted step time); None when it cannot be measured."""
    try:
        bandwidth = measure.measure_bandwidth(device)
    except Exception as e:  # context, like the ceiling: the workloads still run
        print(f"memory bandwidth not measured: {e}".splitlines()[0], file=sys.stderr)
        return None
    print(f"memory bandwidth: {si(bandwidth['bytes_per_s'], 'B/s')}", file=sys.stderr)
    return bandwidth


def keep_ceiling(
    checkpoint_dir: Path, device: dict[str, Any], ceiling: Any, bandwidth: Any
) -> None:
    """Keep this run's ceiling and bandwidth in the workload's checkpoint folder
    (kept.CEILING), for a run that resumes the workload after a stop (`kept_ceiling`)."""
    identity = {"host": socket.gethostname(), "device": device}
    kept.CEILING.write(checkpoint_dir, identity, {"ceiling": ceiling, "bandwidth": bandwidth})


def kept_ceiling(checkpoint_dir: Path | None, device: dict[str, Any]) -> tuple[Any, Any] | None:
    """(ceiling, bandwidth) that a stopped run measured on this host's `device` before
    it began the workload whose checkpoint folder this is; None where there is none
    (--force deletes the folder first, so a forced run measures again), or where the
    file is damaged or another's (set aside, in one line)."""
    identity = {"host": socket.gethostname(), "device": device}
    found = kept.CEILING.read(checkpoint_dir, identity)
    return None if found is None else (found["ceiling"], found["bandwidth"])


def agreed(flags: list[bool]) -> list[bool]:
    """Process 0's flags on every process: all processes must run the same workloads
    (each step is one program across them), and only process 0 has the records."""
    if jax.process_count() == 1:
        return flags
    from jax.experimental import multihost_utils

    return [bool(f) for f in multihost_utils.broadcast_one_to_all(np.array(flags, bool))]


def first_local(devices: list[jax.Device]) -> jax.Device:
    """The first of `devices` this process can run on (the matmul ceiling is local)."""
    return next(d for d in devices if d.process_index == jax.process_index())


def check_all(
    workloads: list[Workload], devices: list[jax.Device], data_dir: str | None = None
) -> None:
    """Every usage error of every workload, before any work or any write: a --data-dir
    that no workload reads, a batch larger than its training set (known without
    reading the data)."""
    for workload in workloads:
        check(workload, devices)
    if data_dir is not None and not any(w.dataset in data.FILE_DATASETS for w in workloads):
        asked = ", ".join(sorted({w.dataset for w in workloads if _needs_data(w)})) or "none"
        raise UsageError(
            f"--data-dir is read for {' and '.join(data.FILE_DATASETS)} only, and this run "
            f"reads {asked} (digits is embedded, synthetic is made up): drop --data-dir"
        )
    for workload in workloads:
        if not _needs_data(workload):
            continue
        size = train_examples(workload, data_dir)
        if size is not None and workload.batch_size > size:
            raise UsageError(
                f"batch {workload.batch_size} is larger than the {size:,} training images "
                f"of {workload.dataset}: choose --batch-size {size} or less"
            )
        if size is not None:
            check_sizes(workload, size)


# The train state's step counter is an int32 (optax's schedules count in it too).
MAX_STEPS = 2**31 - 1


def check_sizes(workload: Workload, size: int) -> None:
    """UsageError, before anything is allocated or compiled, where `workload` (of `size`
    training images) could not run at all: its images would not fit in this machine's
    memory, or its training steps would overflow the step counter."""
    image_bytes = math.prod(models.input_shape(workload.model, **workload.model_overrides))
    memory = available_memory()
    if size * image_bytes > memory:
        fits = max(1, memory // image_bytes)
        # Synthetic images are made per batch, so a smaller batch fits; a dataset is read whole.
        fix = (
            f"choose --batch-size {min(fits, workload.batch_size)} or less"
            if workload.dataset == "synthetic"
            else "free memory, or run where more is available"
        )
        raise UsageError(
            f"{size:,} images of {workload.dataset} ({si(size * image_bytes, 'B')}) do not fit "
            f"in the {si(memory, 'B')} of memory this machine has available now: {fix}"
        )
    steps = workload.epochs * -(-size // workload.batch_size)
    if workload.steps is not None:
        steps = min(steps, workload.steps)
    if steps > MAX_STEPS:
        raise UsageError(
            f"{workload.epochs:,} epochs of {-(-size // workload.batch_size):,} steps are "
            f"{steps:,} steps, more than the step counter's {MAX_STEPS:,}: choose fewer "
            "--epochs or --set steps"
        )


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int:
    """Bytes this machine can give a new allocation without swapping: Linux's
    MemAvailable (free memory plus what the page cache would give back), where the
    kernel says it; else the physical memory (an upper bound that refuses less)."""
    try:
        for line in meminfo.read_text().splitlines():
            name, _, value = line.partition(":")
            if name == "MemAvailable" and value.split()[1:] == ["kB"]:
                return int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _needs_data(workload: Workload) -> bool:
    return workload.kind != "matmul"


def preload(workloads: list[Workload], data_dir: str | None) -> dict[tuple, Any]:
    """Real datasets, read before any work so a missing one is a usage error up front;
    synthetic data is made when its workload runs (large, and it cannot fail)."""
    splits: dict[tuple, Any] = {}
    for w in workloads:
        if _needs_data(w) and w.dataset != "synthetic" and split_key(w) not in splits:
            splits[split_key(w)] = load_splits(w, data_dir)
    return splits


def _splits_for(
    workload: Workload, cache: dict[tuple, Any], data_dir: str | None
) -> tuple[Split, Split | None] | None:
    if not _needs_data(workload):
        return None
    return cache.get(split_key(workload)) or load_splits(workload, data_dir)


def _title(workload: Workload, num_devices: int = 1) -> str:
    """The progress line's name for `workload`, run on `num_devices` devices; the model
    named as the final table and the report name it."""
    if workload.kind == "matmul":
        return f"matmul {workload.batch_size}x{workload.batch_size} {workload.precision}"
    model = model_with_overrides(workload)
    what = f"{model} on {workload.dataset}, batch {workload.batch_size}"
    if workload.kind == "ensemble":
        what += f", {workload.ensemble_size} models ({workload.ensemble_mode})"
    if workload.strategy != "single" or num_devices != 1:
        what += f", {workload.strategy} x{num_devices}"
    if workload.precision != "f32":
        what += f", {workload.precision}"
    if workload.formulation != "auto":  # a study's cells differ by these alone
        what += f", {workload.formulation} formulation"
    if workload.loop != "step":
        what += f", {workload.loop} loop"
    what += f", {workload.epochs} epoch(s)" if workload.epochs else ", timing only"
    return what + (f", seed {workload.seed}" if workload.seed else "")


# The runner of each kind run here (experiments/harness/runners/ says what each does);
# kind compile is compile_only.run_target's, on its target's devices.
RUNNERS: dict[str, Runner] = {
    "train": run_train,
    "matmul": run_matmul,
    "ensemble": run_ensemble,
}
# Kinds whose runner takes one device whatever it is given: a matmul times one device's
# ceiling, and an ensemble's K models share one device.
ONE_DEVICE_KINDS = ("matmul", "ensemble")


def runs_on(workload: Workload, devices: list[jax.Device]) -> list[jax.Device]:
    """The devices `workload`'s runner is given and its record describes, of `devices`
    (its `devices_for`): the first alone for ONE_DEVICE_KINDS, else all."""
    return devices[:1] if workload.kind in ONE_DEVICE_KINDS else devices


def _matmul_precision(workload: Workload) -> contextlib.AbstractContextManager:
    # Set around compile and run, outside model and step code: the same program, only
    # the precision XLA lowers f32 dots to differs (GPU: TF32 on/off).
    if workload.matmul_precision == "default":
        return contextlib.nullcontext()
    return jax.default_matmul_precision(workload.matmul_precision)


def run_workload(workload: Workload, context: RunContext) -> dict[str, Any]:
    """Compile, time and (epochs > 0) train `workload` with its kind's runner, in
    `context` (its devices its `devices_for`; RunContext says what else): its record,
    made before it runs (`record_for`), with the runner's outcome. A loss that turns
    NaN/inf stops training and makes a `nan` record naming the step; any other failure
    while running an `error` (or `oom`) record with a one-line message, so a sweep goes
    on."""
    with _matmul_precision(workload):
        if workload.kind == "compile":  # its devices are the target's, abstract
            return compile_only.run_target(workload)
        on = runs_on(workload, context.devices)
        record = record_for(workload, on)
        # its memory also says what the allocator held when it began, whatever its kind
        runner = functools.partial(RUNNERS[workload.kind], workload)
        run = measure.with_allocator_before(runner, on[0])
        found = run(dataclasses.replace(context, devices=on))
    return {**record, **found}


LOCKS = ".locks"


def recorded_meanwhile(path: Path, key: str) -> records.Record | None:
    """The final record of `key` made on this machine in the records file `path`, if
    another run wrote one since this one read the file (checked under the workload's
    lock). The file is searched for the key's text first: it is read as records only
    where the key appears in it."""
    try:
        if key.encode() not in path.read_bytes():
            return None
    except FileNotFoundError:
        return None
    return records.recorded(path, devices_lib.machine_id())[0].get(key)


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs its workloads: where its records go (OUT/records.jsonl), where
    its data and checkpoints are, and whether recorded workloads run again (`force`)."""

    out: Path
    data_dir: str | None = None
    force: bool = False
    progress: bool = False
    checkpoint_root: Path | None = None
    checkpoint_every: int | None = None
    keep_checkpoints: int = 2


@dataclasses.dataclass(frozen=True)
class Swept:
    """What a sweep made of one workload: its record as the reader returns it (None on
    a process other than 0 for a workload process 0 found recorded: only process 0 reads
    the records), whether it was recorded before this sweep (`already`: not written
    again), and whether it was measured now (`measured`: not a skip or a death written
    in its place)."""

    record: records.Record | None
    already: bool = False
    measured: bool = False


def tally(swept: Iterable[Swept]) -> tuple[list[records.Record], int]:
    """(the records of `swept`, new or already there, and how many were already
    recorded): what `run_sweep` returns."""
    done, already = [], 0
    for one in swept:
        if one.record is not None:
            done.append(one.record)
        already += one.already
    return done, already


def run_sweep(
    workloads: list[Workload], devices: list[jax.Device], options: SweepOptions
) -> tuple[list[records.Record], int]:
    """Run `workloads` on `devices` (each on its `devices_for`), appending one record
    each to options.out/records.jsonl: (the records of this sweep, new or already there,
    each as the reader returns it, and how many were already recorded). Raises
    JaxcnnError for usage or data mistakes before any work."""
    return tally(sweep_records(workloads, devices, options))


def sweep_records(
    workloads: list[Workload], devices: list[jax.Device], options: SweepOptions
) -> Iterator[Swept]:
    """`run_sweep`, yielding what it made of each workload as it goes: a record measured
    now once it is written. Raises JaxcnnError for usage or data mistakes before any
    work, at the first step of the iteration."""
    path = options.out / records.RECORDS_FILE
    try:  # this jaxcnn would measure their cells again beside them
        records.refuse_newer(path)
    except records.NewerSchema as e:
        raise UsageError(str(e)) from None
    check_all(workloads, devices, options.data_dir)
    cache = preload(workloads, options.data_dir)
    found, skips = records.recorded(path, devices_lib.machine_id())
    used = [devices_for(w, devices) for w in workloads]
    keys = [
        config_key_for(w, devices_lib.describe(d)) for w, d in zip(workloads, used, strict=True)
    ]
    skip = agreed([key in found and not options.force for key in keys])
    locks = options.out / LOCKS  # where a workload without a checkpoint folder is locked
    # Each workload's folder: its checkpoints', else its lock's (and its marker beside it).
    folders: dict[str, Path | None] = {}
    for key, skipped in zip(keys, skip, strict=True):
        try:
            folder = folders[key] = records.key_folder(options.checkpoint_root or locks, key)
        except ValueError as refused:  # a symlink where a key's folder goes
            folders[key] = None
            if skipped:
                continue
            raise UsageError(str(refused)) from None
        if skipped:
            continue
        if options.checkpoint_root is not None:  # Orbax would find a file there at its first save
            check_folder(folder)
    writer = jax.process_index() == 0  # with many processes, process 0 alone writes
    stopped: dict[str, str] = {}  # oom_group -> why the rest of it is skipped
    ceiling = bandwidth = None
    described = devices_lib.describe(devices)
    processes = described["process_count"]
    across = f" across {processes} processes" if processes > 1 else ""
    named = device_name(described["platform"], described["kind"], described["count"])
    print(f"devices: {named}{across}", file=sys.stderr)
    memory = host_memory.current()
    print(f"host memory: {memory['policy']} ({memory['reason']})", file=sys.stderr)
    for i, (w, on, key) in enumerate(zip(workloads, used, keys, strict=True), 1):
        asked = stop_agreed()  # asked to stop (SIGTERM) between workloads, on any process
        if asked:
            raise Stopped(0, None, asked)
        print(f"[{i}/{len(workloads)}] {w.study or 'run'}: {_title(w, len(on))}", file=sys.stderr)
        if skip[i - 1]:
            status = found[key].status if key in found else "by process 0"
            print(f"    already recorded ({status}): skipped", file=sys.stderr)
            if writer and folders[key] is not None:  # killed between its record and its
                died.ended(died.marker_for(folders[key]))  # marker's removal: nothing died
            if key in found and w.oom_group and status == "oom":
                stopped[w.oom_group] = _oom_reason(w)
            yield Swept(found.get(key), already=True)
            continue
        if w.oom_group in stopped:
            reason = stopped[w.oom_group]
            print(f"    not run: {reason}", file=sys.stderr)
            record = record_for(w, on)
            record.update(status="skipped", message=reason)
            written = key in skips and not options.force  # a rerun: that skip is already written
            if writer and not written:
                records.append_or_keep(path, record)
            yield Swept(records.typed(record), already=written)
            continue
        checkpoint_dir = None if options.checkpoint_root is None else folders[key]
        with contextlib.ExitStack() as held:
            in_use = late = None
            if writer:
                try:
                    held.enter_context(exclusive(folders[key]))
                except CheckpointInUse as error:
                    in_use = str(error)
            if agreed([in_use is not None])[0]:
                print(f"    skipped: {in_use or 'in use'}; rerun after it ends", file=sys.stderr)
                continue
            if writer and not options.force:
                late = recorded_meanwhile(path, key)
            if agreed([late is not None])[0]:
                status = late.status if late else "by process 0"
                print(f"    recorded meanwhile by another run ({status}): skipped", file=sys.stderr)
                if late is not None and w.oom_group and status == "oom":
                    stopped[w.oom_group] = _oom_reason(w)
                held.close()  # the lock is let go before the caller sees the record
                yield Swept(late, already=True)
                continue
            # A run that died in this workload left its marker and no record: its record
            # now (an oom is final, its group stops; another death is retried below).
            marker = died.marker_for(folders[key])
            death = died.found(marker) if writer else None
            if death is not None and died.resumable(checkpoint_dir):
                # its checkpoint carries it on: the resumed record says from which step
                died.ended(marker)
                death = None
            if death is not None:
                print(f"    an earlier run died in it: {death['message']}", file=sys.stderr)
                dead = {**record_for(w, on), **death}
                records.append_or_keep(path, dead)
                died.ended(marker)
            if agreed([death is not None and death["status"] == "oom"])[0]:
                if w.oom_group:
                    stopped[w.oom_group] = _oom_reason(w)
                held.close()  # the lock is let go before the caller sees the record
                if writer:
                    yield Swept(records.typed(dead))
                continue
            if options.force and checkpoint_dir is not None and checkpoint_dir.exists():
                shutil.rmtree(checkpoint_dir)  # --force means from scratch, not resumed
            if ceiling is None:  # once per run, and only when something will be measured
                kept = kept_ceiling(checkpoint_dir, described)
                if kept is not None:
                    measure.phase(
                        "taking the matmul ceiling and memory bandwidth measured before "
                        "the stop, not measuring again"
                    )
                    ceiling, bandwidth = kept
                else:
                    measure.phase("measuring the device's matmul ceiling and memory bandwidth")
                    ceiling = matmul_ceiling(first_local(devices))
                    bandwidth = memory_bandwidth(first_local(devices))
            if checkpoint_dir is not None and writer:
                keep_ceiling(checkpoint_dir, described, ceiling, bandwidth)
            context = RunContext(
                devices=on,
                splits=_splits_for(w, cache, options.data_dir),
                ceiling=ceiling,
                bandwidth=bandwidth,
                progress=options.progress,
                checkpoint_dir=checkpoint_dir,
                checkpoint_every=options.checkpoint_every,
                keep_checkpoints=options.keep_checkpoints,
            )
            if writer:
                died.started(marker, key)
            try:
                record = run_workload(w, context)
            except BaseException:  # Python left it (a stop, a bug): not a death
                if writer:
                    died.ended(marker)
                raise
            if writer:  # under the lock: a run that starts next finds the record
                records.append_or_keep(path, record)  # NotRecorded ends the sweep
                died.ended(marker)
        made = records.typed(record)
        if w.oom_group and agreed([made.status == "oom"])[0]:
            stopped[w.oom_group] = _oom_reason(w)
        yield Swept(made, measured=True)


def _oom_reason(workload: Workload) -> str:
    return (
        f"{workload.oom_group}: batch {workload.batch_size} ran out of memory, so larger "
        "ones were not tried"
    )
