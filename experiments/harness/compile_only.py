"""Compile-only workloads: the placed train step, eval step and whole-epoch program
compiled for a target not at hand (jaxcnn/targets.py), and the record of what its
compiler says: whether it compiles, whether it fits the chip's memory, how much memory
per device by part, the compiler's FLOPs and bytes, the step's kernels and their
per-kernel prediction of the step time, and the roofline bound beside it (labelled
predicted: nothing here ran).

    record = run_target(Workload(model="resnet50", batch_size=1024, kind="compile",
                                 target="tpu-v5e-8", strategy="sharded"))

The model, the step and the placement are the ones a real run uses (prepare.build_module,
jaxcnn.train, jaxcnn.parallel.place); only the inputs are abstract. The compile itself is
the library's, jaxcnn.aot.compile_for, what a user calls for a model of their own: this
module turns a workload into its arguments and its result into a record.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from experiments import records
from experiments.harness import measure
from experiments.harness.isolated import ChildFailed
from experiments.harness.prepare import build_module, check_precision, config_key_for, record_for
from experiments.records import select
from experiments.records.workload import Workload
from jaxcnn import aot, loop, models, targets, train
from jaxcnn import devices as devices_lib
from jaxcnn import flops as flops_lib
from jaxcnn.errors import JaxcnnError, UsageError
from jaxcnn.perf import hlo, predict, runtime
from jaxcnn.perf import rates as rates_lib

PROGRAMS = aot.PROGRAMS
EPOCH_STEPS = aot.EPOCH_STEPS  # the whole-epoch program is compiled for this many steps


def check(workload: Workload) -> targets.Target:
    """The workload's target; a usage error for anything wrong, before any work."""
    if workload.kind != "compile" or workload.target is None:
        raise UsageError("a compile-only workload needs kind 'compile' and a target")
    targets.get(workload.target)
    # What was asked is checked before what is installed: a wrong request stays wrong
    # whatever the install, and its error is the one worth reading first.
    check_precision(workload)
    models.get(workload.model, **workload.module_overrides())
    return aot.check(workload.target, workload.strategy, workload.batch_size)


def abstract_state(workload: Workload, devices: list[jax.Device]) -> train.TrainState:
    """The train state as shapes: what create_train_state would make, without making it."""
    shape = models.input_shape(workload.model, **workload.model_overrides)
    tx = train.make_optimizer(
        workload.optimizer, workload.learning_rate, schedule=workload.schedule, total_steps=1
    )
    return aot.abstract_state(build_module(workload, devices), tx, shape, workload.seed)


def abstract_batch(workload: Workload, rows: int) -> dict[str, jax.ShapeDtypeStruct]:
    """A batch of `rows` as data.batches gives it: uint8 images, int32 labels, a mask."""
    return aot.abstract_batch(rows, models.input_shape(workload.model, **workload.model_overrides))


def step_program(
    workload: Workload, devices: list[jax.Device], where: str | None = None
) -> tuple[Any, int]:
    """(the program a run of `workload` times, compiled for `devices` against abstract
    inputs, how many steps one run of it takes): the placed train step, or with the
    device loop the whole-epoch program of EPOCH_STEPS steps. `where` names the devices
    in the progress lines (a target's name; their platform by default)."""
    program = "epoch" if workload.loop == "device" else "train"
    ((_, compiled, _),) = aot.compiled_programs(
        devices,
        abstract_state(workload, devices),
        abstract_batch(workload, workload.batch_size),
        placement=workload.strategy,
        programs=(program,),
        where=where,
        progress=measure.progress,
        options=_target_options(workload),
    )
    return compiled, EPOCH_STEPS if program == "epoch" else 1


def _target_options(workload: Workload) -> dict[str, Any]:
    """The XLA options of the target `workload` is compiled for, beyond its platform's
    own (jaxcnn.targets.compiler_options); none for devices at hand."""
    if workload.target is None:
        return {}
    return targets.compiler_options(targets.get(workload.target))


def roofline_bound(
    target: targets.Target,
    dtype: str,
    batch_size: int,
    cost: dict[str, Any],
) -> dict[str, Any] | None:
    """The record's `prediction_bound` for one device of `target`: the roofline of
    measure.prediction on the vendor's peak (for the precision the matmuls run in) and
    bandwidth, each device's share of its chip; a lower bound on the step's time."""
    # one device's share of the chip: a v2/v3 core's
    chip_rates = rates_lib.of_target(target)
    precision, peak = chip_rates.matmul(dtype)
    bound = measure.prediction(
        cost,
        batch_size,
        peak_tflops=peak,
        peak_source="vendor",
        peak_precision=precision,
        bandwidth_bytes_per_s=chip_rates.bytes_per_s,
        bandwidth_source="vendor",
    )
    return None if bound is None else {**bound, "method": predict.BOUND_METHOD}


def run_target(workload: Workload, programs: tuple[str, ...] = PROGRAMS) -> dict[str, Any]:
    """Compile `workload`'s `programs` for its target: the record, whatever happens
    (ok: compiled and fits; oom: compiled, or refused by the compiler, for want of
    memory; error: the compiler refused, with its one-line reason, or the machine
    failed the compile: `failed_by` says which, FAILED_BY)."""
    targets.cpu_backend_only()  # this child computes on the CPU; it compiles for the target
    target, devices, record = _new_record(workload)
    try:
        fields = _compiled(workload, target, devices, programs, record)
    except JaxcnnError:
        raise
    except CompilerRefused as refused:
        records.failed(record, refused.error)
        # The compiler's words, and only those, can be a verdict on the program; where
        # they relay the operating system's (ptxas finding no TMPDIR, a full disk) the
        # machine failed it. Misread, this costs one compile again, never a false finding.
        if records.machine_fault(record["message"] or ""):
            return machine_fault(record, record["message"])
        record["failed_by"] = "compiler"
        if record["status"] == "oom":  # the compiler found it too big
            record["fits"] = False
        return record
    except Exception as error:  # host memory, a lost file, ...: no word of the compiler's
        records.failed(record, error)
        return machine_fault(record, record["message"])
    record.update({"status": "ok", **fields})
    return record


def _new_record(workload: Workload) -> tuple[targets.Target, list[jax.Device], dict[str, Any]]:
    """The target, its abstract devices, and the record before anything compiled."""
    target = check(workload)
    devices = list(targets.abstract_devices(target))
    record = record_for(workload, devices)
    record.update(
        compiled_not_run=True,
        target=targets.describe(target),
        compiler_options={**record["compiler_options"], **targets.compiler_options(target)},
        compile_time_s={p: None for p in PROGRAMS},
    )
    record["env"].update(targets.compiler_versions())
    return target, devices, record


class CompilerRefused(Exception):
    """The compiler's own refusal of a program, as jaxcnn.aot.compile_for returns it
    (CompiledStep.error): the one failure of a compile that is a finding."""

    def __init__(self, error: BaseException) -> None:
        self.error = error
        super().__init__(str(error))


# A compile `error` record's `failed_by`: the compiler refused the program (kept for the
# same compiler, like an ok or oom record), or the machine failed the compile (a signal,
# host memory, a file lost or unwritable, a child that could not start; compiled again
# by the next run).
FAILED_BY = ("compiler", "machine")
RETRIED = "no finding about the compiler, a rerun compiles it again"


def machine_fault(record: dict[str, Any], why: str) -> dict[str, Any]:
    """`record` as the `error` of a compile the machine failed (`why`, one line)."""
    record.update(status="error", failed_by="machine", message=f"machine fault: {why}; {RETRIED}")
    return record


def crashed(workload: Workload, failed: ChildFailed) -> dict[str, Any]:
    """The `error` record of a compile whose child process died (whatever the signal)
    or could not start, twice: a machine fault, which a rerun compiles again."""
    _, _, record = _new_record(workload)
    record = machine_fault(record, f"compiling it twice, {failed}")
    if failed.dump:  # the child's stack dumps, kept here rather than printed
        record["traceback_tail"] = list(failed.dump)
    return record


def kept_refusal(record: records.CompileRecord) -> bool:
    """Whether a compile record is the compiler's refusal, which a rerun keeps (for the
    same compiler) instead of compiling again: an `error` whose `failed_by` says the
    compiler. Records of earlier releases say nothing explicit, so they are compiled
    again; their messages are not read for a verdict."""
    return record.status == "error" and record.failed_by == "compiler"


def _compiled(
    workload: Workload,
    target: targets.Target,
    devices: list[jax.Device],
    programs: tuple[str, ...],
    record: dict[str, Any],
) -> dict[str, Any]:
    """The record's fields once `programs` compiled for `devices` (jaxcnn.aot.compile_for);
    their compile times go into `record` as each ends, so a later failure keeps them."""
    shapes = abstract_state(workload, devices)
    host_batch = abstract_batch(workload, workload.batch_size)
    result = aot.compile_for(
        target.name,
        shapes,
        host_batch,
        placement=workload.strategy,
        programs=programs,
        progress=measure.progress,
    )
    record["compile_time_s"].update(result.compile_seconds)
    if result.error is not None:  # the compiler's refusal, recorded as raised (oom, error)
        raise CompilerRefused(result.error)
    compiled = result.executables
    forward = flops_lib.count(train.eval_step, shapes, host_batch).total
    # Where the compiler counts no FLOPs (XLA:GPU), the jaxpr count per device stands in.
    compiler = measure.step_cost(compiled["train"], result.flops / len(devices))
    xla_flops = compiler["flops"] if compiler["flops_source"] == "xla" else None
    trainable, non_trainable = models.param_counts(workload.model, **workload.model_overrides)
    fields = dict(
        status="ok" if result.fits else "oom",
        message=result.message,
        params={"trainable": trainable, "non_trainable": non_trainable},
        memory=dataclasses.asdict(result.memory),
        fits=bool(result.fits),
        cost=compiler,
        flops=measure.flops_field(
            result.flops, forward, workload.batch_size, xla_flops, len(devices)
        ),
        kernels=hlo.summarize(result.kernels),
        kernels_source={
            "program": "train_step",
            "steps": 1,
            "launches": runtime.launches(result.kernels, target.platform),
        },
        prediction=None if result.prediction is None else result.prediction.as_record(),
        prediction_bound=roofline_bound(
            target, workload.compute_dtype, workload.batch_size, compiler
        ),
    )
    if "epoch" in compiled:
        fields["epoch_memory"] = measure.memory(compiled["epoch"])
    return fields


# --- Cells and the batch search ------------------------------------------------------


def _same_compiler(record: records.CompileRecord) -> bool:
    """Whether `record` was compiled by the compiler its target has here: the same
    packages, and the same CUDA toolkit where its target names one."""
    versions = {"jaxlib": importlib.metadata.version("jaxlib"), **targets.compiler_versions()}
    described = record.target
    target = targets.TARGETS.get(described.name) if described else None
    toolkit = target.toolkit.requirement if target and target.toolkit else None
    # each package is the compile env's field of its name (records.CompileRecord)
    same_packages = all(getattr(record.env, k) == v for k, v in versions.items())
    return same_packages and (described.cuda_toolkit if described else None) == toolkit


def recorded_runner(
    path: Any,
    compile_cell: Callable[..., dict[str, Any]],
    *,
    force: bool = False,
    on_record: Callable[[records.CompileRecord], None] | None = None,
) -> Callable[[Workload], records.CompileRecord]:
    """`run(workload) -> record` that compiles a cell not yet recorded in `path` and
    appends its record (returned as the reader returns it, like one already there): a
    study killed midway and rerun compiles only what is missing.
    Taken as is from `path` (unless `force`): ok and oom records, and errors (the
    compiler's refusals and crashes) from the same jaxlib and libtpu or plugin; a new
    compiler tries again. `compile_cell` is run_target, or an isolated.InChild of it:
    a child that dies there (whatever the signal: a compiler's crash, host memory, a
    kill) or cannot start is asked once more in a new child, then becomes a machine
    fault's `error` record (`crashed`), and the study goes on (unless a stop was asked
    for: that death is no finding). Only the compiler's own refusal (`kept_refusal`) is
    taken as final; a machine fault is compiled again on rerun."""
    try:  # this jaxcnn would compile their cells again beside them
        records.refuse_newer(path)
    except records.NewerSchema as e:
        raise UsageError(str(e)) from None
    loaded = records.load(path) if Path(path).exists() else []
    found, _ = records.recorded_among(loaded)
    refused = {
        r.config_key: r
        for r in loaded
        if isinstance(r, records.CompileRecord) and kept_refusal(r) and _same_compiler(r)
    }

    def compiled(workload: Workload, programs: tuple[str, ...], retries: int = 1) -> dict:
        try:
            return compile_cell(workload, programs=programs)
        except ChildFailed as failed:
            if loop.stop_requested():
                raise
            if retries:  # in a new child
                return compiled(workload, programs, retries - 1)
            return crashed(workload, failed)
        except MemoryError as starved:  # the child could not load its compiler at all
            _, _, record = _new_record(workload)
            records.failed(record, starved)
            return machine_fault(record, record["message"])

    def run(workload: Workload) -> records.CompileRecord:
        target = check(workload)
        device = devices_lib.describe(list(targets.abstract_devices(target)))
        key = config_key_for(workload, device)
        if not force and (key in found or key in refused):
            record = found.get(key) or refused[key]
        else:
            made = compiled(workload, ("train",) if workload.study else PROGRAMS)
            records.append_or_keep(path, made)  # NotRecorded: kept, and said where
            record = records.typed(made)
            (found if record.status in records.FINAL_STATUSES else refused)[key] = record
        if on_record is not None:
            on_record(record)
        return record

    return run


def _memory(record: records.CompileRecord) -> tuple[int, int] | None:
    """(bytes the step needs per device, bytes JAX can use there), where known."""
    total = record.memory.total_bytes if record.memory else None
    usable = select.usable_bytes(record)
    return None if total is None or usable is None else (total, usable)


def _crossing(
    a: tuple[int, records.CompileRecord], b: tuple[int, records.CompileRecord]
) -> float | None:
    """The batch where the line through two (batch, record) points' memory reaches the
    memory JAX can use: memory grows about linearly with the batch (activations). None
    where a record has no memory figures or memory does not grow from `a` to `b`."""
    ma, mb = _memory(a[1]), _memory(b[1])
    if ma is None or mb is None or mb[0] <= ma[0] or b[0] == a[0]:
        return None
    slope = (mb[0] - ma[0]) / (b[0] - a[0])
    return b[0] + (mb[1] - mb[0]) / slope


def tolerance(fit: int, step: int) -> int:
    """How close a closed search's last fit and first miss are: a sixteenth of the fit
    (a multiple of `step`), at least `step`."""
    return max(step, fit // 16 // step * step)


def _next_up(tried: dict[int, records.CompileRecord], batch: int, step: int, cap: int) -> int:
    """The next batch up after `batch` fit (nothing above it found not to fit): where the
    line through the two largest fits' memory reaches the chip's, at least a tolerance
    above `batch` (the line is often just short); twice `batch` where it cannot be drawn
    (one fit, no memory figures, memory not growing); never above `cap`."""
    fitted = sorted(b for b in tried if tried[b].status == "ok")
    guess = None
    if len(fitted) >= 2:
        a, b = fitted[-2:]
        guess = _crossing((a, tried[a]), (b, tried[b]))
    if guess is None:
        return min(batch * 2, cap)
    aimed = int(guess) // step * step
    return min(max(aimed, batch + tolerance(batch, step)), cap)


def _next_between(
    tried: dict[int, records.CompileRecord], fit: int, miss: int, step: int, bisect: bool
) -> int:
    """The next batch between the largest fit and the smallest miss above it: where the
    line through their memory reaches the chip's, kept a tolerance inside both ends (so
    a line that is right closes the search in one more compile); the middle when
    `bisect` or where no line can be drawn. A multiple of `step`."""
    guess = None if bisect else _crossing((fit, tried[fit]), (miss, tried[miss]))
    if guess is None:
        return (fit + miss) // 2 // step * step
    margin = tolerance(fit, step)
    aimed = int(guess) // step * step
    return max(fit + margin, min(aimed, miss - margin))


def batch_search(
    make: Callable[[int], Workload],
    run: Callable[[Workload], records.CompileRecord],
    *,
    start: int,
    step: int,
    cap: int,
) -> list[records.CompileRecord]:
    """Records of the batches tried to find the largest that fits (each compile costs
    seconds to minutes here, so few are tried), every answer a real compile:

    - `start`, halving while it does not fit;
    - else up from the last fit until the first batch that does not fit: twice `start`,
      then where memory on the line through the two largest fits reaches what JAX can
      use (`_next_up`; doubling where no line can be drawn);
    - then closing in between the last fit and that miss (`_next_between`): aimed along
      the line through their memory, bisecting instead after an aim that did not halve
      the gap, until they are at most `tolerance` apart.

    `cap` is a hard bound, not a stopping rule for a search still far below the chip: a
    search whose memory grows with the batch meets a miss long before it (the targets
    study's cap, PER_DEVICE_CAP per device, is a bound on the compiles a search costs);
    one that reaches it stops there, its largest fit a floor. A batch the compiler
    refuses (an `error` record: say an index past 2**31 elements) is an end the search
    cannot pass, closed in on as a miss is, so the floor it leaves is stated with the
    refusal just above it; a refusal before any fit, or an error that says nothing about
    the compiler (`failed_by` "machine"), stops the search.
    """
    tried: dict[int, records.CompileRecord] = {}

    def fits(batch: int) -> bool | None:
        """Whether `batch` fits; None to stop the search (a refusal before any fit says
        nothing of the batch, one the machine failed nothing of the compiler)."""
        record = tried[batch] = run(make(batch))
        if record.status != "error":  # a kept record judged by the chip table as it stands
            return select.fits(record)
        return None if fit is None or record.failed_by != "compiler" else False

    fit, miss = None, None
    batch = start
    while step <= batch <= cap:
        ok = fits(batch)
        if ok is None:
            return list(tried.values())
        if ok:
            fit = batch
            if miss is not None or batch == cap:
                break
            batch = _next_up(tried, batch, step, cap)
        else:
            miss = batch
            if fit is not None:
                break
            batch //= 2
    bisect = False
    while fit is not None and miss is not None and miss - fit > tolerance(fit, step):
        gap = miss - fit
        batch = _next_between(tried, fit, miss, step, bisect)
        if batch in (fit, miss):
            break
        ok = fits(batch)
        if ok is None:
            break
        fit, miss = (batch, miss) if ok else (fit, batch)
        bisect = not bisect and miss - fit > gap // 2
    return list(tried.values())
