"""Records: one JSON line per workload, whatever happened to it. This module is the
one place a record is made, checked, keyed, skipped, written and read; it imports no
JAX (benchmarks/peers.py runs without it), so what needs a device takes the device's
description (`jaxcnn.devices.describe`) as a plain dict.

Schema (version 2: every field written, none defaulted by readers; records of
version 1 are skipped by `load` with one line naming `python -m
experiments.cli.migrate`). Required in every record:
    schema_version, run_id, status (ok|oom|nan|error|skipped), message (null when ok),
    config_key (every kind but paired: `config_key` of workload, device and conditions;
                checked on read),
    conditions (absent: the defaults; else what differed from them, which the key
                covers: experiments.harness.prepare.conditions),
    workload {model, dataset, batch_size, strategy, kind, study, and for the kinds a
              experiments.records.workload.Workload describes (train|matmul|ensemble|compile)
              all of its fields (WORKLOAD_FIELDS):
              model_overrides, epochs, steps, optimizer, learning_rate, seed,
              precision, timing_steps,
              study (devices|crossover|batch|scaling|matmul|ensemble|precision|
                     accuracy|bench|speedrun|roofline|targets|default; null for a single
                     --model run),
              kind (train|matmul|ensemble|peer|paired|compile),
              num_devices (the first N devices; null = all the run resolved),
              scaling (null|weak|strong: per-device batch fixed | global batch fixed),
              ensemble_size, ensemble_mode (null|vmap|sequential),
              matmul_precision (default|highest: GPU TF32 on | off),
              oom_group (the sweep skips the rest of a group after an oom),
              loop (step|device: per-step dispatch | whole epochs as one compiled loop),
              formulation (auto|xla|cpu: what was asked; see the top-level field),
              schedule (constant|onecycle: the learning rate over the run; onecycle
                    peaks at learning_rate),
              target (kind compile: the target compiled for; else null)}
              epochs == 0 means timing only: no training, history [], test_accuracy null.
    device {platform, kind, count, process_count, host, and for those kinds machine (a
            hash of the OS machine id and the host name, devices.machine_id: reruns
            skip a CPU cell only when it was recorded on this machine; null where it was
            not recorded)},
    env {python, git_commit, host, utc_time; for those kinds also jax, jaxlib, flax,
         optax and host_memory (the policy, jaxcnn.host_memory; null where it was not
         recorded); a side of a paired run also turns {pair, side}, which
         benchmarks/paired.py adds (`took_turns`)}
For those kinds also:
    loop                                   step | device, as run
    formulation {name, conv, pool}         how convolutions and pools were computed
                                           (jaxcnn.formulation; name xla|cpu)
    compiler_options {option: value}       the XLA options the steps compiled with;
                                           null where they were not recorded
Present when status is ok (null or absent otherwise), for kind "train" (the default):
    params {trainable, non_trainable}
    compile_time_s {train, eval[, epoch]}  lower + compile, apart from step time; epoch:
                                           the whole-epoch loop (loop device)
    step_time_s {median, p10, p90, n}      per step, warm-up excluded, after block_until_ready:
                                           loop step: each step timed alone; loop device:
                                           a compiled loop of timing_steps steps timed
                                           whole, / steps (n = repeats, plus `steps`)
    throughput {median, p10, p90, n, steps[, minor_faults_per_step]}
                                           images/s over n timed blocks of `steps`
                                           steps back to back (loop step: dispatched
                                           ahead, one sync per block; device: one
                                           compiled call per block): the figure the
                                           bench compares across loops and frameworks;
                                           the host's minor page faults per timed step
                                           (env.host_memory says why they matter)
    eval_step_time_s {median, p10, p90, n} one eval step on the same batch, timed alike
    dispatch_s {median, p10, p90, n}       one call of the same placement's step doing no
                                           work, on the same arguments, timed alike: the
                                           host's round trip of a step (the host side of
                                           a predicted step, jaxcnn.perf.host.host_side)
    host_loop {loop, steps, steps_per_epoch, check_every, syncs, parts, loop_step_s}
                                           jaxcnn's own step loop (loop.fit) run for
                                           timing_steps steps (after 2 unrecorded) on a
                                           copy of the state, each
                                           step's host parts timed by the loop's own code
                                           (jaxcnn.host_loop): parts {batch, put, dispatch,
                                           metrics, progress, sync: per step; wait: per
                                           sync, the host waiting for the device} each
                                           {median, p10, p90, n, mean} in seconds;
                                           loop_step_s: its parts and waits over the steps
    images_per_s                           batch_size / step_time_s.median
    history [{epoch, steps, train_loss, train_accuracy, train_time_s,
              test_loss, test_accuracy, eval_time_s[, compile_time_s: loop device, the
              epoch loop's compile, apart from train_time_s]}]
    test_accuracy, test_loss               the last epoch's, null for synthetic data
    train_time_s                           all epochs' training, compile excluded
    flops {                                2 per multiply-accumulate, global (all devices)
        per_step                           jaxpr count of the train step (dot + conv),
                                           every conv tap counted, padding included
        per_step_in_bounds                 the same, conv taps on real input only
        per_image                          per_step / batch_size
        forward_per_image                  jaxpr count of the eval step / batch_size
        xla_per_device                     compiled cost_analysis()["flops"]; null if none
        xla_per_step                       xla_per_device x device count
        xla_vs_jaxpr                       xla_per_step / per_step (XLA also counts
                                           elementwise ops; only in-bounds conv taps)
        by_primitive {name: flops}, unknown_trip_count (a while loop counted once)}
    achieved_tflops                        flops.per_step / step_time_s.median / 1e12
    mfu {                                  achieved over (peak x device count)
        chip                               the peak table's chip name, null if unknown
        vendor_precision                   what the matmuls run in: fp32|tf32|bf16|fp16
        vendor_peak_tflops, vs_vendor      datasheet peak per chip; null if unknown
        measured_dtype                     float32|bfloat16: the ceiling compared with
        measured_ceiling_tflops, vs_measured  best matmul measured in this run}
    memory {argument_bytes, output_bytes, alias_bytes, temp_bytes, generated_code_bytes,
            total_bytes (XLA's compiled memory analysis, per device),
            peak_bytes_in_use, bytes_limit (the allocator's, where the runtime keeps
            one: GPU/TPU; peak since the process started)}   null where unavailable
    matmul_ceiling {dtype: {tflops, size, by_size {n: tflops}, reps, passes (each size's
                   best pass kept; older records: one pass), precision}}
                                           measured once per run on the first device
    bandwidth {bytes_per_s, p10, p90, n, size_bytes}
                                           memory bandwidth measured once per run on the
                                           first device (an in-place x + 1 of size_bytes:
                                           read and written), null where not measured
    cost {flops, bytes_accessed, optimal_seconds, flops_source}
                                           the compiled train step's cost analysis, per
                                           device; flops from the jaxpr where XLA has none
    kernels [[count, kind, flops, bytes, dtype, collective_bytes(, note)]]
                                           the kernels of the program the step times came
                                           from (jaxcnn.perf.hlo.summarize of its optimized
                                           HLO): the predictions' input
    kernels_source {program (train_step|epoch), steps, recompiled, jax}
                                           which program, and how many steps one run of it
                                           takes; `recompiled` where experiments.predict.repredict
                                           compiled it again for an older record
    prediction {method (per-kernel), constants_version, step_time_s, images_per_s,
                compute_s, memory_s, overhead_s, collective_s, kernels, rates_source
                (vendor|measured), error_band {median, worst}}
                                           the per-kernel model's step time of those
                                           kernels (jaxcnn.perf.predict) at the vendor's
                                           rates, or on a CPU this run's measured matmul
                                           ceiling and bandwidth; a prediction, never a
                                           measurement. Older records: the roofline below
                                           (method roofline), shown as a bound
    prediction_bound {step_time_s, compute_s, memory_s, bound (compute|memory),
                images_per_s, peak_tflops_used, peak_source, peak_precision,
                bandwidth_bytes_per_s, bandwidth_source (measured|vendor), flops_source
                (xla|jaxpr), compiler_estimate_s, method (roofline bound)}
                                           the step's whole-program roofline from cost: a
                                           lower bound, not a prediction
    prediction_vendor_bound {...}          the same from the vendor's figures alone; null
                                           for a chip without them (a CPU)
Kind "matmul" (workload model "matmul", dataset "none", batch_size = n, the matrix
side; precision f32|bf16), when ok:
    matmul {n, dtype, flops (= 2 n^3), tflops}, step_time_s, compile_time_s {train, eval
    null}, params {trainable 0, non_trainable 0}, images_per_s null, flops {per_step},
    achieved_tflops, mfu {chip, vendor_precision, vendor_peak_tflops, vs_vendor}, memory
Kind "ensemble" (ensemble_size K models on one device), when ok: as "train", plus
    ensemble {k, mode, seeds [K], learning_rates [K], test_accuracy [K, null for
              synthetic data], test_loss [K]}
    step_time_s                            one step of all K models (vmap: one call;
                                           sequential: K calls one after another, summed)
    images_per_s                           K x batch_size / step_time_s.median
    flops, achieved_tflops, mfu            all K models' work per step
    history                                per epoch, losses/accuracies averaged over the
                                           K models, times summed; no per-epoch test
    test_accuracy, test_loss               the mean over the K models
Kind "peer" (benchmarks/peers.py: the same model and train step in another
framework, workload.framework and workload.mode say which), when ok: params,
    compile_time_s {train: the first step}, step_time_s, throughput, images_per_s
Kind "paired" (benchmarks/paired.py: JAX's and a peer's timed blocks alternated, one
process computing at a time; workload.study "bench"), when ok:
    paired {rounds [{first: jax|peer, jax {images_per_s, start, end}, peer {...}}]
                                           one block of each side per round, the side
                                           that went first alternating; start/end on the
                                           host's monotonic clock,
            ratio {median, p10, p90, n}    per round, jax images/s over peer images/s,
            jax, peer {run_id, configuration, host_memory, throughput}
                                           each side's own record (env.turns names the
                                           pair) and what it ran}
    session {id, pass, passes}             the driver's run and its pass over the plan
    (not ok: paired {jax, peer: {configuration, host_memory}}, what was asked)
Kind "compile" (experiments/harness/compile_only.py: compiled for workload.target, a device not
at hand, never run; compiled_not_run true): target {name, platform, chip, chips, devices,
topology, chip_config, gpu_spec, cuda_toolkit (a GPU compiled with its own CUDA toolkit: the
wheel), memory_per_chip_bytes, memory_per_device_bytes, bandwidth_bytes_per_s,
peak_tflops}, compile_time_s {train, eval, epoch}, memory (per device, the train step),
fits, cost {flops, bytes_accessed, optimal_seconds} (null on XLA:GPU), flops, kernels,
kernels_source, prediction (per-kernel) and prediction_bound (the roofline), always
labelled predicted, epoch_memory; env gains libtpu and
jax_cuda12_plugin. Status ok: compiled and fits; oom: does not fit (or the compiler ran
out of memory); error: the compiler refused.
Status skipped: not run, `message` says why (a smaller batch of its group ran out of
memory). Failures: status oom (RESOURCE_EXHAUSTED / out of memory), nan (loss not finite) or
error (anything else, compile errors included), with a one-line `message` and the
traceback's last lines (`traceback_tail`): `failed` is the one rule.
Unknown keys are kept, never rejected; every field above that a reader uses is
type-checked when present (`Record`, pydantic models; `load` skips a record that fails
them, and `json_schema` publishes them as docs/records.schema.json), and what it means
is checked too (accuracies in [0, 1], counts >= 1, times and sizes finite and not
negative, rates positive, platforms and kernel kinds of their closed sets, names not
paths, times parsed, the fields its kind and status need, the key the hash of what it
sits beside) and the record as a measurement (`_too_fast`: no step faster than its own
matmul ceiling or its chip allows; `_inconsistent`: its epochs and images a second
agree with its step time). A record of a later schema version is `NewerSchema`: never
bad, never measured again beside (`store.refuse_newer`). Records stay plain dicts:
`validate` hands back the dict it checked. Records are ordered by `recorded_at`, never
by their time's text, and told apart by machine with `machine_id`.

A rerun skips a cell already measured (`recorded`, `made_here`): a record whose status
is final (ok, nan, oom) in the same config key; an `error` is retried.

Appends are one os.write of a whole line under an exclusive lock, so a crash or a
second writer never leaves half a line, and a write that fails (a full disk) is cut
back to where the file ended. A bad line found on load (torn, not a JSON object, not
UTF-8) is kept, skipped with one warning per file, and the rest still loads.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic_core import PydanticCustomError

from experiments.records.when import parse_time
from experiments.records.workload import Workload

SCHEMA_VERSION = 2
# What turns a records file of an older schema into this one (experiments/records/migrate.py).
MIGRATE_COMMAND = "python -m experiments.cli.migrate"
STATUSES = ("ok", "oom", "nan", "error", "skipped")
RECORDS_FILE = "records.jsonl"
# A user's runs go to a folder of their own (git-ignored), not into the records this
# repository commits (results/), which only `--out=results` adds to.
DEFAULT_OUT = "runs"
_REQUIRED_WORKLOAD = ("model", "dataset", "batch_size", "strategy", "kind", "study")
KINDS = ("train", "matmul", "ensemble", "peer", "paired", "compile")
PLATFORMS = ("cpu", "gpu", "tpu")
# A kernel row's kinds: jaxcnn.perf.hlo.KINDS (this module imports no JAX; a test checks
# the two agree).
KERNEL_KINDS = ("gemm", "conv", "elemental_conv", "fusion", "copy", "collective", "custom", "other")
# The kinds an experiments.records.workload.Workload describes; their records carry all of its
# fields.
WORKLOAD_KINDS = ("train", "matmul", "ensemble", "compile")
WORKLOAD_FIELDS = tuple(field.name for field in dataclasses.fields(Workload))
# What else a record of those kinds carries, in every status: where it ran and how.
_REQUIRED_BY_WORKLOAD = {
    "": ("config_key", "loop", "formulation", "compiler_options"),
    "workload": WORKLOAD_FIELDS,
    "device": ("machine",),
    "env": ("jax", "jaxlib", "flax", "optax", "host_memory"),
}
_REQUIRED_BY_PEER = {"": ("config_key",), "workload": ("framework", "mode")}
FINAL_STATUSES = ("ok", "nan", "oom")  # results a rerun keeps instead of measuring again
_REQUIRED_OK = ("params", "compile_time_s", "step_time_s", "images_per_s")
# What an ok record must carry, by workload kind (a matmul has no images).
_REQUIRED_OK_BY_KIND = {
    "train": _REQUIRED_OK,
    "matmul": ("params", "compile_time_s", "step_time_s", "matmul"),
    "ensemble": (*_REQUIRED_OK, "ensemble"),
    "peer": (*_REQUIRED_OK, "throughput"),
    "paired": ("paired",),
    "compile": ("params", "compile_time_s", "memory", "target"),
}
_REQUIRED_SECTION = {
    "matmul": ("n", "dtype", "flops", "tflops"),
    "ensemble": ("k", "mode", "seeds", "learning_rates", "test_accuracy"),
    "paired": ("rounds", "ratio", "jax", "peer"),
    "step_time_s": ("median", "p10", "p90", "n"),
}


class RecordError(ValueError):
    """A record that does not follow the schema."""


class NotRecorded(RuntimeError):
    """A record that could not be appended to its file; the message says where it was
    kept instead (or that it is on stderr) and how to add it back."""


class OldSchema(RecordError):
    """A record of an earlier schema version: `MIGRATE_COMMAND` rewrites its file once."""


class NewerSchema(RecordError):
    """A record of a later schema version than this jaxcnn reads: written by a newer
    jaxcnn, which this one must be upgraded to to read it, or to add to its file."""


NEWER_MESSAGE = "written by a newer jaxcnn: upgrade jaxcnn to read"


def validate(record: dict[str, Any]) -> dict[str, Any]:
    """Return `record`, unchanged, if it follows the schema (`Record`, its types and
    their meaning); raise RecordError naming the first field of a wrong type or value,
    else the first missing (OldSchema for a record of an earlier version)."""
    version = record.get("schema_version") if isinstance(record, dict) else None
    if type(version) is int and 1 <= version < SCHEMA_VERSION:
        raise OldSchema(f"schema_version {version}: run {MIGRATE_COMMAND} on its file")
    if type(version) is int and SCHEMA_VERSION < version <= NUMBER_LIMIT:
        raise NewerSchema(f"schema_version {version}: {NEWER_MESSAGE} it")
    try:
        Record.model_validate(record)
    except pydantic.ValidationError as e:
        errors = e.errors(include_url=False)
        # a field there but wrong says more than one left out beside it
        first = next((error for error in errors if error["type"] != "missing"), errors[0])
        raise RecordError(_problem(first)) from None
    return record


def conforms(kind: Any, value: Any) -> bool:
    """Whether `value` (a part of a record, or a side file holding parts) is of `kind`,
    a type made of this module's (`Measured`, `tuple[Measured, Number]`, ...)."""
    try:
        _adapter(kind).validate_python(value)
    except pydantic.ValidationError:
        return False
    return True


@functools.cache
def _adapter(kind: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(kind)


# --- The schema: pydantic models of every field a reader uses -------------------------
#
# A record stays a plain dict: `validate` checks it against `Record` and hands the same
# dict back. Unknown keys are kept, never rejected. A field with a default of None may
# be absent (which fields a kind or a status needs is `Record._meaning`'s); one typed
# `X | None` may be null. Types are strict (no "64" for 64, no true for 1). Every number
# is finite and not negative (but `Signed`), an integer at most NUMBER_LIMIT, a summary's
# p10 <= median <= p90, and each value a reader divides by positive: so a record the
# reader returns never makes a report or a fit divide by null or zero, format a NaN, or
# sort a list against a number.

# The largest magnitude a record's integer may have: beyond any count, size or time (a
# 400-digit integer overflows where a reader makes it a float). A float need only be
# finite: a learning rate of 1e30 is how a diverging run is asked for.
NUMBER_LIMIT = 2**63
Str = Annotated[str, pydantic.Strict()]
Bool = Annotated[bool, pydantic.Strict()]
Object = dict[str, Any]
Count = Annotated[int, pydantic.Strict(), pydantic.Field(ge=0, le=NUMBER_LIMIT)]
AtLeastOne = Annotated[int, pydantic.Strict(), pydantic.Field(ge=1, le=NUMBER_LIMIT)]


def _integer_within_limit(value: Any) -> Any:
    # an integer where a float may be is held to the integers' limit, before it is
    # made a float (a 400-digit one cannot be)
    if type(value) is int and abs(value) > NUMBER_LIMIT:
        raise _meaning_error(f"is {value!r:.40}, not a finite number below 2**63")
    return value


def _finite(**limits: float) -> Any:
    """A finite number within `limits` (pydantic.Field's ge, gt, le)."""
    return Annotated[
        float,
        pydantic.Strict(),
        pydantic.Field(allow_inf_nan=False, **limits),
        pydantic.BeforeValidator(_integer_within_limit),
    ]


Signed = _finite()
Number = _finite(ge=0)  # a time, a rate, a size, a ratio
Positive = _finite(gt=0)  # what a reader divides by
Accuracy = _finite(ge=0, le=1)
PositiveCount = Annotated[Count, pydantic.Field(gt=0)]


def _meaning_error(why: str) -> PydanticCustomError:
    # the text goes in the context: a value's braces are no template's
    return PydanticCustomError("meaning", "{why}", {"why": why})


def _iso_time(text: str) -> str:
    if parse_time(text) is None:
        raise _meaning_error(f"is {text!r:.40}, not an ISO 8601 time (2026-11-25T14:00:00Z)")
    return text


Time = Annotated[Str, pydantic.AfterValidator(_iso_time)]


def _name(text: str) -> str:
    # names become file names, folder names and table cells: "../../etc" is none of them
    path_like = text in (".", "..") or any(c in text for c in "/\\")
    if not text.strip() or path_like or not text.isprintable():
        raise _meaning_error(f"is {text!r:.40}, not a name (no path, no control characters)")
    return text


Name = Annotated[Str, pydantic.AfterValidator(_name)]


class Part(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")


class Summary(Part):
    """Samples summarized (experiments.records.stats.summarize), in order."""

    median: Number | None = None
    p10: Number | None = None
    p90: Number | None = None
    n: Count | None = None

    @pydantic.model_validator(mode="after")
    def _in_order(self) -> Summary:
        values = [self.p10, self.median, self.p90]
        if None not in values and not values[0] <= values[1] <= values[2]:
            raise _meaning_error(f"has p10, median, p90 {values}, not in that order")
        return self


class Timed(Summary):
    """A summary of times or rates: its median positive where measured, and of at least
    one sample."""

    median: Positive | None = None

    @pydantic.model_validator(mode="after")
    def _sampled(self) -> Timed:
        if self.median is not None and self.n == 0:
            raise _meaning_error("has a median of n 0 samples, not of at least one")
        return self


class Measured(Timed):
    """A summary of times measured, every figure there (experiments.harness.kept's timing)."""

    median: Positive
    p10: Number
    p90: Number
    n: Count


class Throughput(Timed):
    steps: Count | None = None
    minor_faults_per_step: Number | None = None


class HostPart(Summary):
    """One host part of jaxcnn's step loop (jaxcnn.host_loop): the report reads its
    median and mean as numbers."""

    median: Number
    mean: Number


def _part(name: str, kind: Any, keys: str = "", **others: Any) -> type[Part]:
    """A part whose fields `keys` (split at spaces) are each of `kind` or null, and
    `others` (name=type) each of its type or null; any of them may be absent."""
    fields = {key: (kind | None, None) for key in keys.split()}
    fields.update({key: (other | None, None) for key, other in others.items()})
    return pydantic.create_model(name, __base__=Part, **fields)


HostParts = _part("HostParts", HostPart, "batch put dispatch metrics progress sync wait")


class HostLoop(Part):
    loop: Str | None = None
    steps: Count | None = None
    steps_per_epoch: Count | None = None
    check_every: Count | None = None
    syncs: Count | None = None
    parts: HostParts = None
    loop_step_s: Number | None = None


class Epoch(Part):
    epoch: Count = None
    steps: Count | None = None
    train_loss: Number | None = None
    train_accuracy: Accuracy | None = None
    train_time_s: Number | None = None
    test_loss: Number | None = None
    test_accuracy: Accuracy | None = None
    eval_time_s: Number | None = None
    compile_time_s: Number | None = None


Flops = _part(
    "Flops",
    Number,
    "per_image forward_per_image xla_per_device xla_per_step xla_vs_jaxpr",
    per_step=Count,
    per_step_in_bounds=Count,
    by_primitive=Object,
    unknown_trip_count=Bool,
)
Mfu = _part(
    "Mfu",
    Number,
    "vendor_peak_tflops vs_vendor measured_ceiling_tflops vs_measured",
    chip=Str,
    vendor_precision=Str,
    measured_dtype=Str,
)
Memory = _part(
    "Memory",
    Count,
    "argument_bytes output_bytes alias_bytes temp_bytes generated_code_bytes total_bytes "
    "peak_bytes_in_use bytes_limit",
)


class Bandwidth(Part):
    """The memory bandwidth a run measured: the predictions divide by it."""

    bytes_per_s: Positive
    p10: Number | None = None
    p90: Number | None = None
    n: Count | None = None
    size_bytes: Count | None = None


# One dtype's best matmul rate measured in a run: the predictions divide by it.
CeilingEntry = _part("CeilingEntry", Count, "size reps passes", tflops=Positive, precision=Str)


class Ceilings(Part):
    """What a run keeps of its matmul ceiling and bandwidth for the run that resumes it
    (experiments.harness.kept): as its records carry them."""

    ceiling: dict[str, CeilingEntry]
    bandwidth: Bandwidth | None


# optimal_seconds: XLA's -1 is "no estimate"
Cost = _part("Cost", Number, "flops bytes_accessed", optimal_seconds=Signed, flops_source=Str)
# A predicted step (per-kernel, jaxcnn.perf.predict) or a roofline bound: never a measurement.
Prediction = _part(
    "Prediction",
    Number,
    "step_time_s compute_s memory_s overhead_s collective_s images_per_s kernels "
    "peak_tflops_used bandwidth_bytes_per_s compiler_estimate_s",
    **dict.fromkeys(
        "method bound peak_source peak_precision bandwidth_source flops_source "
        "constants_version rates_source".split(),
        Str,
    ),
    error_band=_part("ErrorBand", Number, "median worst"),
)


def _row_length(row: Any) -> Any:
    """A kernel row of 6 items validated as one of 7 (its note left out)."""
    if isinstance(row, list | tuple) and not 6 <= len(row) <= 7:
        raise _meaning_error(f"has {len(row)} items, not 6 to 7")
    return [*row, ""] if isinstance(row, list | tuple) and len(row) == 6 else row


# jaxcnn.perf.hlo.summarize: [count, kind, flops, bytes, dtype, collective bytes(, note)].
KernelRow = Annotated[
    tuple[Count, Literal[KERNEL_KINDS], Number, Number, Str | None, Number, Str],
    pydantic.BeforeValidator(_row_length),
    pydantic.Field(json_schema_extra={"minItems": 6}),
]


class KernelsSource(Part):
    program: Str | None = None
    steps: PositiveCount
    recompiled: Str | None = None
    jax: Str | None = None


Matmul = _part("Matmul", Number, "flops tflops", n=Count, dtype=Str)


class Ensemble(Part):
    k: Count | None = None
    mode: Str | None = None
    seeds: list[Count | None] | None = None
    learning_rates: list[Number | None] | None = None
    test_accuracy: list[Accuracy | None] | None = None
    test_loss: list[Number | None] | None = None


class Side(Part):
    """One side's block in a paired round."""

    images_per_s: Positive
    start: Number | None = None
    end: Number | None = None


class Round(Part):
    first: Str | None = None
    jax: Side
    peer: Side


class PairedSide(Part):
    """What one side of a paired run ran, as the report's paired table reads it."""

    run_id: Str | None = None
    configuration: Str | None
    host_memory: Str | None = None
    throughput: Throughput | None = None


class Ratio(Summary):
    median: Number | None  # the report's paired table reads it: there, null or not


class Paired(Part):
    rounds: list[Round] | None = None
    ratio: Ratio | None = None
    jax: PairedSide | None = None
    peer: PairedSide | None = None


Session = _part("Session", Count, "pass passes", id=Str)  # a paired run's passes


class Target(Part):
    """The target a compile-only record was compiled for (jaxcnn.targets): always known."""

    name: Name = None
    platform: Literal[PLATFORMS] = None
    chip: Str = None
    chips: PositiveCount  # the report divides by them
    devices: PositiveCount
    memory_per_chip_bytes: Count = None
    memory_per_device_bytes: Count = None
    usable_bytes_per_device: Count = None
    bandwidth_bytes_per_s: Number = None
    peak_tflops: Object | None = None


_JSON_TYPES = {str: Str, int: Count, float: Number, bool: Bool, dict: Object}


def _workload_model() -> type[Part]:
    """The workload as experiments.records.workload.Workload types its fields (the counts a step
    needs at least one of), plus a peer's framework and mode."""
    fields: dict[str, Any] = {}
    for name, hint in typing.get_type_hints(Workload).items():
        nullable = type(None) in typing.get_args(hint)
        plain = next(a for a in typing.get_args(hint) if a is not type(None)) if nullable else hint
        kind = _JSON_TYPES[typing.get_origin(plain) or plain]
        if name in ("batch_size", "timing_steps", "ensemble_size", "num_devices"):
            kind = AtLeastOne
        if name in ("model", "dataset", "study", "target"):
            kind = Name
        kind = Literal[KINDS] if name == "kind" else kind
        default = ... if name in _REQUIRED_WORKLOAD else None
        fields[name] = (kind | None if nullable else kind, default)
    return pydantic.create_model(
        "Workload", __base__=Part, framework=(Str | None, None), mode=(Str | None, None), **fields
    )


WorkloadModel = _workload_model()


class Device(Part):
    platform: Literal[PLATFORMS]
    kind: Str
    count: AtLeastOne
    process_count: AtLeastOne
    host: Str | None
    machine: Str | None = None


HostMemory = _part("HostMemory", Str, "policy reason", applied=Bool)


Cpu = _part("Cpu", Str, "model", extensions=list[Str])


class Env(Part):
    python: Str | None
    git_commit: Str | None
    host: Str | None
    utc_time: Time | None
    jax: Str | None = None
    jaxlib: Str | None = None
    flax: Str | None = None
    optax: Str | None = None
    host_memory: HostMemory | None = None
    turns: Object | None = None
    cpu: Cpu | None = None


Formulation = _part("Formulation", Str, "name conv pool")
Params = _part("Params", Count, "trainable non_trainable")
CompileTimes = _part("CompileTimes", Number, "train eval epoch")


class Record(Part):
    """One line of records.jsonl: every field a reader uses (the module's docstring
    says what each means)."""

    schema_version: Literal[SCHEMA_VERSION]
    run_id: Name
    status: Literal[STATUSES]
    message: Str | None
    config_key: Str = None
    conditions: Object | None = None  # experiments.harness.prepare.conditions
    workload: WorkloadModel
    device: Device
    env: Env
    loop: Str | None = None
    formulation: Formulation | None = None
    compiler_options: Object | None = None  # the XLA options the steps compiled with
    params: Params | None = None
    compile_time_s: CompileTimes | None = None
    step_time_s: Timed | None = None
    eval_step_time_s: Timed | None = None
    dispatch_s: Timed | None = None
    host_loop: HostLoop | None = None
    throughput: Throughput | None = None
    images_per_s: Positive | None = None
    history: list[Epoch] | None = None
    test_accuracy: Accuracy | None = None
    test_loss: Number | None = None
    train_time_s: Number | None = None
    achieved_tflops: Number | None = None
    flops: Flops | None = None
    mfu: Mfu | None = None
    memory: Memory | None = None
    bandwidth: Bandwidth | None = None
    cost: Cost | None = None
    prediction: Prediction | None = None
    prediction_vendor: Prediction | None = None
    prediction_bound: Prediction | None = None
    prediction_vendor_bound: Prediction | None = None
    kernels: list[KernelRow] | None = None
    kernels_source: KernelsSource | None = None
    matmul_ceiling: dict[str, CeilingEntry] | None = None
    matmul: Matmul | None = None
    ensemble: Ensemble | None = None
    paired: Paired | None = None
    session: Session | None = None
    compiled_not_run: Bool | None = None
    fits: Bool | None = None
    failed_by: Literal["compiler", "machine"] | None = None  # absent: made before it was
    target: Target | None = None
    epoch_memory: Object | None = None
    nan_step: Count | None = None
    params_digest: Str | None = None
    resumed_from_step: Count | None = None
    traceback_tail: list[Any] | None = None

    @pydantic.model_validator(mode="wrap")
    @classmethod
    def _meaning(cls, record: Any, handler: Callable[[Any], Record]) -> Record:
        """After the types, what the record's kind and status require of it, and what
        no one field shows: the key is the hash of what it sits beside, the step time
        no faster than its device could run the step's FLOPs, and the one its epochs
        and its images a second say."""
        model = handler(record)
        why = _missing(record) or _too_fast(record) or _inconsistent(record) or _wrong_key(record)
        if why:
            raise _meaning_error(why)
        return model


def _missing(record: dict[str, Any]) -> str | None:
    """What `record`'s kind and status require that it lacks (or holds null)."""
    kind = record["workload"]["kind"]
    required = _REQUIRED_BY_WORKLOAD if kind in WORKLOAD_KINDS else {}
    required = _REQUIRED_BY_PEER if kind == "peer" else required
    for section, keys in required.items():
        missing = [k for k in keys if k not in (record[section] if section else record)]
        if missing:
            return f"{section or 'record'} lacks {', '.join(missing)}"
    if record["status"] != "ok":
        return None
    needed = _REQUIRED_OK_BY_KIND[kind]
    missing = [k for k in needed if record.get(k) is None]
    if missing:
        return f"ok {kind} record lacks {', '.join(missing)}"
    for section, keys in _REQUIRED_SECTION.items():
        absent = [k for k in keys if section in needed and k not in record[section]]
        if absent:
            return f"{section} lacks {', '.join(absent)}"
    if "step_time_s" in needed and record["step_time_s"]["median"] is None:
        return "step_time_s.median is null, not a positive number"
    return None


# A step time is a measurement only at a FLOP rate its device could run. Its bound is the
# record's own matmul ceiling (the best dtype's, measured by the same run on the same
# device) times CEILING_MARGIN: the committed CPU records reach at most 1.5 times theirs
# (a ceiling is a few square matmuls' best, a convolution may beat it). Else, for an
# accelerator, its chip's highest peak in the chip table (jaxcnn.perf.chips) times
# PEAK_MARGIN. Else the fastest any device of its platform reaches: NVIDIA's B200, the
# fastest chip, peaks near 1e16 FLOP/s (FP4), a CPU device (JAX makes one of the whole
# host) below 1e15 (a two-socket server's AMX units).
CEILING_MARGIN = 4
PEAK_MARGIN = 2
MAX_FLOPS_PER_S = {"cpu": 1e15}
MAX_FLOPS_PER_S_OTHER = 1e17


def _too_fast(record: dict[str, Any]) -> str | None:
    """Why the step time is no measurement: a FLOP rate per device above its bound."""
    step = (record.get("step_time_s") or {}).get("median")
    flops = record.get("flops") or {}
    name, count = "flops.per_step", flops.get("per_step")
    if flops.get("per_step_in_bounds"):  # the taps that are work, not padding
        name, count = "flops.per_step_in_bounds", flops["per_step_in_bounds"]
    if not count:
        name, count = "matmul.flops", (record.get("matmul") or {}).get("flops")
    if record.get("compiled_not_run") or not step or not count:
        return None
    devices = record["device"]["count"]
    bound, which = _rate_bound(record)
    rate = count / step / devices
    if rate <= bound:
        return None
    return (
        f"step_time_s.median {step:.3g} s for {name} {count:.3g} on {devices} device(s) is "
        f"{rate:.3g} FLOP/s per device, above the {bound:.3g} of {which}"
    )


# A ceiling below this is no chip's: a smoke run's matmul of a few dozen rows, timed
# mostly in its dispatch; the step is then held to the chip's or platform's bound.
MIN_CEILING_FLOPS = 1e9


def _rate_bound(record: dict[str, Any]) -> tuple[float, str]:
    """(the FLOP rate per device no step of `record` can beat, what it is)."""
    entries = (record.get("matmul_ceiling") or {}).values()
    ceiling = max((e.get("tflops") or 0 for e in entries), default=0)
    if ceiling * 1e12 >= MIN_CEILING_FLOPS:
        return CEILING_MARGIN * ceiling * 1e12, (
            f"{CEILING_MARGIN} x the matmul ceiling it measured ({ceiling:.3g} TFLOP/s)"
        )
    device = record["device"]
    peak = _chip_peak_tflops(device["kind"]) if device["platform"] != "cpu" else None
    if peak:
        return PEAK_MARGIN * peak * 1e12, f"{PEAK_MARGIN} x its chip's peak ({peak:.3g} TFLOP/s)"
    platform = device["platform"]
    return MAX_FLOPS_PER_S.get(platform, MAX_FLOPS_PER_S_OTHER), f"any {platform} device"


def _chip_peak_tflops(kind: str) -> float | None:
    """The chip table's highest peak for a device kind; None for a chip it does not
    know, or where jaxcnn cannot be imported (a peer's virtualenv has no JAX)."""
    try:
        from jaxcnn.perf import chips
    except ImportError:
        return None
    chip = chips.find(kind)
    return max(chip.peak_tflops.values(), default=None) if chip else None


# An epoch's training time and its steps at the record's step time agree within
# EPOCH_MARGIN either way, the epoch's own fixed work (its order, its progress, a
# checkpoint saved) allowed EPOCH_FIXED_S beside them: the committed records' epochs
# take 0.67 to 1.33 times their steps (an epoch's steps are dispatched ahead, the step
# time's timed alone), and an epoch of two 0.2 ms steps 14 ms. The images a second and
# the step time are one figure twice (images_per_s = batch_size x models /
# step_time_s.median), so agree within IMAGES_MARGIN.
EPOCH_MARGIN = 10
EPOCH_FIXED_S = 30.0
# One figure twice, but a record's images a second may count another batch than its
# workload's (a paired side, an older writer): a step 10 times off is no rounding.
IMAGES_MARGIN = 10


def _inconsistent(record: dict[str, Any]) -> str | None:
    """Why `record`'s step time is not the one its epochs and its images a second say."""
    step = (record.get("step_time_s") or {}).get("median")
    if not step or record.get("compiled_not_run"):
        return None
    ensemble = record.get("ensemble") or {}
    models = ensemble.get("k") or 1
    per_step = record["workload"]["batch_size"] * models
    images = record.get("images_per_s")
    # an ensemble's figures depend on its k and mode: a refusal names them
    of = f" (ensemble.mode {ensemble.get('mode')}, k {ensemble.get('k')})" if ensemble else ""
    if images and not 1 / IMAGES_MARGIN <= images * step / per_step <= IMAGES_MARGIN:
        return (
            f"images_per_s {images:.4g} is not the {per_step} images of a step{of} over "
            f"step_time_s.median {step:.4g} s ({per_step / step:.4g})"
        )
    # a sequential ensemble's epoch counts each model's steps
    counted = models if ensemble.get("mode") == "sequential" else 1
    for i, epoch in enumerate(record.get("history") or []):
        steps, seconds = epoch.get("steps"), epoch.get("train_time_s")
        if not steps or seconds is None:
            continue
        expected = steps / counted * step
        if not expected / EPOCH_MARGIN <= seconds <= expected * EPOCH_MARGIN + EPOCH_FIXED_S:
            return (
                f"history[{i}].train_time_s {seconds:.3g} s is not within {EPOCH_MARGIN}x "
                f"of its {steps} steps{of} at step_time_s.median {step:.3g} s ({expected:.3g} s; "
                f"{EPOCH_FIXED_S:.0f} s more allowed)"
            )
    return None


def _wrong_key(record: dict[str, Any]) -> str | None:
    if "config_key" not in record:
        return None
    expected = config_key(record["workload"], record["device"], record.get("conditions"))
    if record["config_key"] == expected:
        return None
    return (
        f"config_key {record['config_key']!r:.24} is not the hash of its workload, "
        f"device and conditions ({expected})"
    )


# --- A validation error as one line naming the field ---------------------------------

JSON_NAMES = {list: "an array", str: "a string", int: "a number", float: "a number"}
JSON_NAMES.update({bool: "true or false", type(None): "null", dict: "an object"})
_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "list_type": "an array",
    "tuple_type": "an array",
}


def _problem(error: Mapping[str, Any]) -> str:
    """One pydantic error as the line a reader is shown: "device.count is a string, not
    an integer", "workload lacks loop", "test_accuracy is 2.0, not an accuracy in [0, 1]"."""
    *parent, last = error["loc"] or ("record",)
    where = _dotted(error["loc"]) or "record"
    value, kind, limits = error.get("input"), error["type"], error.get("ctx") or {}
    if kind == "missing":
        return f"{_dotted(parent) or 'record'} lacks {last}"
    if kind == "meaning":
        return f"{where} {limits['why']}" if error["loc"] else limits["why"]
    if kind == "finite_number" or limits.get("le") == NUMBER_LIMIT:
        return f"{where} is {value!r:.40}, not a finite number below 2**63"
    if kind == "greater_than_equal":
        least = limits["ge"]
        return f"{where} is {value!r:.40}, " + (
            "a negative number" if least == 0 else f"not a whole number >= {least}"
        )
    if kind == "greater_than":
        return f"{where} is {JSON_NAMES.get(type(value), 'a value')}, not a positive number"
    if kind == "less_than_equal":
        return f"{where} is {value!r:.40}, not an accuracy in [0, 1]"
    if kind == "literal_error":
        return f"{where} {value!r:.40} is not one of {limits['expected']}"
    expected = _EXPECTED.get(kind, error["msg"])
    maybe = " or null" if _nullable(error["loc"]) else ""
    return f"{where} is {JSON_NAMES.get(type(value), 'a value')}, not {expected}{maybe}"


def _dotted(loc: Sequence[str | int]) -> str:
    """A location as a record's reader names it: history[0].train_loss."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _nullable(loc: Sequence[str | int]) -> bool:
    """Whether the field at `loc` may be null (to say so beside its type)."""
    annotation: Any = Record
    for part in loc:
        annotation = _inner(annotation)
        if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return False
            annotation = field.annotation
        elif typing.get_origin(annotation) in (list, tuple, dict):
            args = typing.get_args(annotation)
            annotation = args[-1] if typing.get_origin(annotation) is not tuple else args[part]
        else:
            return False
    return type(None) in typing.get_args(annotation)


def _inner(annotation: Any) -> Any:
    """An annotation without its null and its constraints: Count | None -> int."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    while typing.get_origin(annotation) is Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


# The JSON Schema published for users who merge records made elsewhere (a notebook's):
# `python -m experiments.cli.schema` writes it; a test checks it is current.
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "records.schema.json"


def schema_generator() -> str:
    """What wrote the schema: pydantic's output changes between its minor releases, so a
    schema is compared with the one this pydantic writes only where the same wrote it."""
    import pydantic

    return "generated with pydantic " + ".".join(pydantic.VERSION.split(".")[:2])


def schema_text() -> str:
    """`json_schema()` as SCHEMA_FILE holds it."""
    return json.dumps(json_schema(), indent=2) + "\n"


def json_schema() -> dict[str, Any]:
    """The records' schema as a JSON Schema (draft 2020-12), generated from `Record`:
    the fields all records have, and the type and range of each field a reader uses;
    the fields required by kind and status are this module's docstring."""
    schema = _without_titles(Record.model_json_schema())
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": schema_generator(),
        "title": f"A jaxcnn record, schema version {SCHEMA_VERSION} (one line of records.jsonl)",
        "description": (
            "Generated from experiments.records.Record; unknown keys are allowed. "
            "What each field means: docs/records.md and experiments/records.py."
        ),
        **schema,
    }


def _without_titles(schema: Any) -> Any:
    """pydantic's generated titles ("Run Id") left out: each field is named by its key."""
    if isinstance(schema, dict):
        return {k: _without_titles(v) for k, v in schema.items() if k != "title"}
    if isinstance(schema, list):
        return [_without_titles(v) for v in schema]
    return schema


# --- Construction ----------------------------------------------------------------------


def config_key(
    workload: dict[str, Any],
    device: dict[str, Any],
    conditions: dict[str, Any] | None = None,
) -> str:
    """The cell a record measures, as 16 hex digits: a sha256 of the whole described
    workload (every field, as asked), the device's identity (platform, kind, count,
    process count) and the `conditions` it ran under that differ from the defaults
    (experiments.harness.prepare.conditions: x64, a default matmul precision, XLA flags, the
    host memory policy), not the time. Equal keys mean "the same cell": a rerun skips
    cells already recorded, and checkpoints live under this name. Stable across
    releases: a test pins one key; a run under default conditions (none) keeps the key
    records had before conditions were keyed.

    An accelerator's kind names its chip ("TPU v5 lite"), so records from two hosts with
    the same chip are one cell. JAX names every CPU just "cpu": there the host stands in
    for the chip, so a record committed from one computer is not taken for another's."""
    identity = {k: device[k] for k in ("platform", "kind", "count", "process_count")}
    if device["kind"] == device["platform"]:
        identity["host"] = device["host"]
    keyed: dict[str, Any] = {"workload": workload, "device": identity}
    if conditions:
        keyed["conditions"] = conditions
    text = json.dumps(keyed, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_config_key(value: object) -> bool:
    """Whether `value` is what `config_key` makes: 16 lowercase hex digits."""
    return (
        isinstance(value, str) and len(value) == 16 and all(c in "0123456789abcdef" for c in value)
    )
