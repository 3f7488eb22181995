"""The schema of a record (version 2): one pydantic model per kind of workload
(`workload.kind`), each carrying the fields its writers put in it, with what each field
means on the field and what an `ok` record of the kind must hold marked there too
(`when_ok`). `Record` is their union, told apart by the workload's kind; `validate`
checks a plain dict against it (types, ranges, the fields its kind and status need)
and then as a measurement (`_too_fast`, `_inconsistent`, `_wrong_key`), and hands the
same dict back. Unknown keys are kept, never rejected. `python -m
experiments.cli.schema` publishes the models as docs/records.schema.json and as the
field tables of docs/records.md. Imports no JAX (benchmarks/peers.py runs without it).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic_core import PydanticCustomError

from experiments.records.workload import Workload
from jaxcnn import choices

SCHEMA_VERSION = 2
# What turns a records file of an older schema into this one (experiments/records/migrate.py).
MIGRATE_COMMAND = "python -m experiments.cli.migrate"
STATUSES = ("ok", "oom", "nan", "error", "skipped")
RECORDS_FILE = "records.jsonl"
# A user's runs go to a folder of their own (git-ignored), not into the records this
# repository commits (results/), which only `--out=results` adds to.
DEFAULT_OUT = "runs"
KINDS = ("train", "matmul", "ensemble", "peer", "paired", "compile", "input")
PLATFORMS = ("cpu", "gpu", "tpu")
# A kernel row's kinds: jaxcnn.perf.hlo.KINDS (this module imports no JAX; a test checks
# the two agree).
KERNEL_KINDS = ("gemm", "conv", "elemental_conv", "fusion", "copy", "collective", "custom", "other")
# The kinds an experiments.records.workload.Workload describes; their records carry all of its
# fields.
WORKLOAD_KINDS = ("train", "matmul", "ensemble", "compile")
WORKLOAD_FIELDS = tuple(field.name for field in dataclasses.fields(Workload))
FINAL_STATUSES = ("ok", "nan", "oom")  # results a rerun keeps instead of measuring again


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


def typed(record: dict[str, Any], *, writing: bool = False) -> Record:
    """`record` as its kind's model (`Record`) if it follows the schema (its types and
    their meaning); RecordError naming the first field of a wrong type or value, else
    the first missing (OldSchema for a record of an earlier version, NewerSchema of a
    later). A record being written (`writing`) may carry no field the schema does not
    declare; one read keeps it as the model's extra."""
    version = record.get("schema_version") if isinstance(record, dict) else None
    if type(version) is int and 1 <= version < SCHEMA_VERSION:
        raise OldSchema(f"schema_version {version}: run {MIGRATE_COMMAND} on its file")
    if type(version) is int and SCHEMA_VERSION < version <= NUMBER_LIMIT:
        raise NewerSchema(f"schema_version {version}: {NEWER_MESSAGE} it")
    try:
        return _adapter(Record).validate_python(record, context={"writing": writing})
    except pydantic.ValidationError as e:
        model, errors = _errors(e, record)
        # a field there but wrong says more than one left out beside it
        first = next((error for error in errors if error["type"] != "missing"), errors[0])
        raise RecordError(_problem(first, model)) from None


def validate(record: dict[str, Any], *, writing: bool = False) -> dict[str, Any]:
    """Return `record`, unchanged, if it follows the schema (`typed`)."""
    typed(record, writing=writing)
    return record


def conforms(kind: Any, value: Any) -> bool:
    """Whether `value` (a part of a record, or a side file holding parts) is of `kind`,
    a type made of this module's (`Measured`, `tuple[Measured, Number]`, ...)."""
    try:
        _adapter(kind).validate_python(value)
    except pydantic.ValidationError:
        return False
    return True


def _errors(error: pydantic.ValidationError, record: Any) -> tuple[type[Part], list[Any]]:
    """The model that refused `record`, and its errors located in the record (the
    union's tag left out of their locations)."""
    kind = _kind(record)
    if kind is None:  # no kind known: checked as any record, which names what it lacks
        try:
            Common.model_validate(record)
        except pydantic.ValidationError as common:
            return Common, common.errors(include_url=False)
    located = [{**e, "loc": e["loc"][1:]} for e in error.errors(include_url=False)]
    return KIND_MODELS[kind], located


@functools.cache
def _adapter(kind: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(kind)


# --- The types of a record's values ----------------------------------------------------
#
# Types are strict (no "64" for 64, no true for 1). Every number is finite and not
# negative (but `Signed`), an integer at most NUMBER_LIMIT, a summary's p10 <= median <=
# p90, and each value a reader divides by positive: so a record the reader returns never
# makes a report or a fit divide by null or zero, format a NaN, or sort a list against a
# number. A field with a default of None may be absent; one typed `X | None` may be null.

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


def parse_time(text: object) -> datetime | None:
    """`text` (an `env.utc_time`) as an aware UTC datetime; None unless it is an ISO 8601
    time. One without an offset is taken as UTC, as the field's name says (every writer
    here gives the offset; a hand-made record may not)."""
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        return when.replace(tzinfo=timezone.utc)
    return when.astimezone(timezone.utc)


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


def about(meaning: str) -> Any:
    """A field that may be absent (or null, where its type says so), meaning `meaning`."""
    return pydantic.Field(None, description=meaning)


def always(meaning: str) -> Any:
    """A field every record of its model carries (null, where its type says so)."""
    return pydantic.Field(description=meaning)


def when_ok(meaning: str, holding: str = "", positive: str = "") -> Any:
    """A field an `ok` record of its model carries, not null (`_unfinished`), holding
    the keys `holding` (split at spaces), of which those in `positive` are not null: a
    reader divides by them. Any other status may leave it out."""
    extra: dict[str, Any] = {"required_when": "ok"}
    if holding:
        extra["holding_when_ok"] = holding.split()
    if positive:
        extra["positive_when_ok"] = positive.split()
    return pydantic.Field(None, description=meaning, json_schema_extra=extra)


class Part(pydantic.BaseModel):
    # A reader keeps a field no model names (a newer jaxcnn's, under the same schema
    # version) as an extra; a writer may not add one (`validate(..., writing=True)`):
    # every field this jaxcnn writes is typed and documented here.
    model_config = pydantic.ConfigDict(extra="allow")

    @pydantic.model_validator(mode="after")
    def _no_unknown_field_written(self, info: pydantic.ValidationInfo) -> Part:
        unknown = sorted(self.model_extra or ())
        if unknown and (info.context or {}).get("writing"):
            raise _meaning_error(
                f"has {', '.join(unknown)}, not a field of this schema: a field a record "
                "carries is declared in experiments/records/schema.py"
            )
        return self


def _part(name: str, doc: str, kind: Any, /, **fields: str | tuple[Any, str]) -> type[Part]:
    """A part (`doc` says what it is) whose `fields`, name=meaning (of `kind`) or
    name=(type, meaning), are each of their type or null; any of them may be absent."""
    made: dict[str, Any] = {}
    for key, spec in fields.items():
        of, meaning = (kind, spec) if isinstance(spec, str) else spec
        made[key] = (of | None, about(meaning))
    return pydantic.create_model(name, __base__=Part, __doc__=doc, **made)


class Summary(Part):
    """Samples summarized (experiments.records.stats.summarize), in order."""

    median: Number | None = about("the samples' median")
    p10: Number | None = about("their 10th percentile")
    p90: Number | None = about("their 90th percentile")
    n: Count | None = about("how many samples")

    @pydantic.model_validator(mode="after")
    def _in_order(self) -> Summary:
        values = [self.p10, self.median, self.p90]
        if None not in values and not values[0] <= values[1] <= values[2]:
            raise _meaning_error(f"has p10, median, p90 {values}, not in that order")
        return self


class Timed(Summary):
    """A summary of times or rates: its median positive where measured, and of at least
    one sample."""

    median: Positive | None = about("the samples' median")
    steps: Count | None = about("the steps of each timed block, where blocks were timed")

    @pydantic.model_validator(mode="after")
    def _sampled(self) -> Timed:
        if self.median is not None and self.n == 0:
            raise _meaning_error("has a median of n 0 samples, not of at least one")
        return self


class Measured(Timed):
    """A summary of times measured, every figure there (experiments.harness.kept's timing)."""

    median: Positive = always("the samples' median")
    p10: Number = always("their 10th percentile")
    p90: Number = always("their 90th percentile")
    n: Count = always("how many samples")


class Throughput(Timed):
    """Images a second over n timed blocks of `steps` steps back to back (loop step:
    dispatched ahead, one sync per block; device: one compiled call per block): the
    figure the bench compares across loops and frameworks."""

    minor_faults_per_step: Number | None = about(
        "the host's minor page faults per timed step (env.host_memory says why they matter)"
    )


class HostPart(Summary):
    """One host part of jaxcnn's step loop (jaxcnn.host_loop), in seconds: the report
    reads its median and mean as numbers."""

    median: Number = always("the samples' median")
    mean: Number = always("their mean")


HostParts = _part(
    "HostParts",
    "The host parts of a step of jaxcnn's loop, each timed by the loop's own code.",
    HostPart,
    batch="per step: the shuffle, the gather of images and labels, the mask",
    put="per step: jax.device_put of the batch",
    dispatch="per step: the jitted call, which returns once the step is queued",
    metrics="per step: the metrics, kept on the device",
    progress="per step: the progress bar",
    sync="per step: the loop's checks, and the metrics fetched every 50 steps or at an epoch's end",
    wait="per sync: the host waiting for the device (the device's time, kept apart)",
)


class HostLoop(Part):
    """jaxcnn's own step loop (loop.fit) run in windows of timing_steps steps (after 2
    unrecorded) on a copy of the state, each step's host parts timed by the loop's own
    code; records before windows hold one window (no window_step_s)."""

    loop: Str | None = about("the loop run (step)")
    steps: Count | None = about("the steps timed")
    steps_per_epoch: Count | None = about("the loop's steps per epoch")
    check_every: Count | None = about("steps between the loop's metric fetches")
    syncs: Count | None = about("the syncs among the steps timed")
    parts: HostParts = about("each host part's times")
    window_step_s: list[Number] | None = about(
        "each timed window's own time per step: its parts and waits over its steps"
    )
    loop_step_s: Number | None = about("the loop's own time per step: its windows' median")


class Epoch(Part):
    """One epoch of training (kind ensemble: losses and accuracies averaged over the
    models, times summed, no per-epoch test)."""

    epoch: Count = about("its number, from 1")
    steps: Count | None = about("its training steps")
    train_loss: Number | None = about("the mean training loss")
    train_accuracy: Accuracy | None = about("the training accuracy")
    train_time_s: Number | None = about("its training time, compile excluded")
    test_loss: Number | None = about("the test loss after it")
    test_accuracy: Accuracy | None = about("the test accuracy after it; null for synthetic data")
    eval_time_s: Number | None = about("the test's time")
    compile_time_s: Number | None = about(
        "loop device: the epoch loop's compile, apart from train_time_s"
    )


Flops = _part(
    "Flops",
    "FLOPs, 2 per multiply-accumulate, global (all devices).",
    Number,
    per_step=(Count, "jaxpr count of the train step (dot + conv), every conv tap counted"),
    per_step_in_bounds=(Count, "the same, conv taps on real input only (no padding)"),
    per_image="per_step / batch_size",
    forward_per_image="jaxpr count of the eval step / batch_size",
    xla_per_device='compiled cost_analysis()["flops"]; null if none',
    xla_per_step="xla_per_device x device count",
    xla_vs_jaxpr="xla_per_step / per_step (XLA also counts elementwise ops, in-bounds taps only)",
    by_primitive=(Object, "{primitive: flops}"),
    unknown_trip_count=(Bool, "a while loop of unknown trip count, counted once"),
)
Mfu = _part(
    "Mfu",
    "The achieved FLOP rate over the peak times the device count.",
    Number,
    chip=(Str, "the peak table's chip name; null if unknown"),
    vendor_precision=(Str, "what the matmuls run in: fp32|tf32|bf16|fp16"),
    vendor_peak_tflops="the datasheet's peak per chip; null if unknown",
    vs_vendor="achieved over the vendor's peak",
    measured_dtype=(Str, "float32|bfloat16: the measured ceiling compared with"),
    measured_ceiling_tflops="the best matmul measured in this run",
    vs_measured="achieved over the measured ceiling",
)
Memory = _part(
    "Memory",
    "XLA's compiled memory analysis, per device, and the allocator's figures where the "
    "runtime keeps them (GPU, TPU; peak since the process started).",
    Count,
    argument_bytes="the program's arguments",
    output_bytes="its outputs",
    alias_bytes="outputs aliasing arguments",
    temp_bytes="its temporaries",
    generated_code_bytes="its generated code",
    total_bytes="all of them",
    peak_bytes_in_use="the allocator's peak",
    bytes_limit="the allocator's limit",
    bytes_in_use_before="what the allocator held when the workload began",
    peak_bytes_in_use_before="the allocator's peak when the workload began",
)


class Bandwidth(Part):
    """The memory bandwidth measured once per run on the first device (an in-place
    x + 1 of size_bytes: read and written): the predictions divide by it."""

    bytes_per_s: Positive = always("the median rate")
    p10: Number | None = about("its 10th percentile")
    p90: Number | None = about("its 90th percentile")
    n: Count | None = about("how many samples")
    size_bytes: Count | None = about("the array's size")


CeilingEntry = _part(
    "CeilingEntry",
    "One dtype's best matmul rate measured in a run: the predictions divide by it.",
    Count,
    tflops=(Positive, "the best rate, TFLOP/s"),
    size="the matrix side that reached it",
    by_size=(Object, "{side: tflops}"),
    reps="timed repeats per size",
    passes="passes over the sizes, each size's best kept (older records: one)",
    precision=(Str, "the matmul precision asked"),
)


class Ceilings(Part):
    """What a run keeps of its matmul ceiling and bandwidth for the run that resumes it
    (experiments.harness.kept): as its records carry them."""

    ceiling: dict[str, CeilingEntry]
    bandwidth: Bandwidth | None


Cost = _part(
    "Cost",
    "The compiled train step's cost analysis, per device.",
    Number,
    flops="its FLOPs; from the jaxpr where XLA has none",
    bytes_accessed="the bytes it reads and writes",
    optimal_seconds=(Signed, "XLA's own estimate; -1: none"),
    flops_source=(Str, "xla|jaxpr: where flops came from"),
)
ErrorBand = _part(
    "ErrorBand",
    "How far the method's predictions were from measured steps (jaxcnn.perf.predict's "
    "error_band and loop_band).",
    Number,
    median="the median ratio",
    worst="the worst ratio",
    observations=(Count, "the held-out observations it was measured on"),
    split=(Str, "how they were held out: chip|program|published_jax_loops"),
    quantity=(Str, "device_step|loop_step: the quantity it was measured on"),
    faster=(Count, "how many of them the prediction was the faster of (absent: not counted)"),
    hosts=(list[Str], "loop band: the chips the published loops ran on"),
    chips=(list[Str], "a band by chip: the chips its observations ran on, left out one at a time"),
    mostly_kernels=(
        Bool,
        "loop band: the device step's band, carried where the device "
        "step is most of the loop step and its band the wider",
    ),
)
Prediction = _part(
    "Prediction",
    "A predicted step (per-kernel, jaxcnn.perf.predict) or a roofline bound: never a measurement.",
    Number,
    method=(Str, "per-kernel, or roofline (a bound; older records' prediction)"),
    constants_version=(Str, "the fitted constants' version"),
    step_time_s="the step's time (the device step; a roofline's bound)",
    device_step_s="the device step: the chip's kernels and collectives",
    images_per_s="batch_size / step_time_s",
    compute_s="its compute part",
    memory_s="its memory part",
    overhead_s="its fixed overheads",
    collective_s="its collectives",
    kernels="the kernels priced",
    rates_source=(Str, "vendor|measured: the rates it priced at"),
    error_band=(ErrorBand, "the method's error band"),
    formulation=(Str, "the program's formulation (jaxcnn.formulation), where known"),
    regime=(Str, "small|large: the program's regime by its FLOPs per image"),
    loop_step_s="the loop step: jaxcnn's step loop on that chip with its host "
    "(jaxcnn.perf.host.loops); absent where no host side is known",
    loop_parts=(dict[str, Number | None], "{host part: seconds per step}; null: no figure"),
    loop_left_out=(list[Str], "the host parts without a figure, counted 0"),
    loop_overlap=(Str, "overlapped|serialised: how the loop runs host and device"),
    loop_bound=(Str, "host|device: which side bounds the loop step"),
    loop_parts_basis=(Str, "measured|modelled: how the host parts were had"),
    loop_parts_platform=(Str, "whose client ran the loop the host parts were timed in"),
    loop_launches=(Object, "how the runtime launches the program (jaxcnn.perf.runtime)"),
    loop_band=(ErrorBand, "the loop step's error band; null: unvalidated"),
    epoch_s="an epoch of loop steps, where its steps are known (evaluation not priced)",
    epoch_steps=(Count, "the epoch's steps"),
    epoch_left_out=(list[Str], "what the epoch's figure leaves out"),
    device_loop_step_s="a step of the device loop: the device step and its share of "
    "the epoch's one call",
    bytes_source=(Str, "xla: a roofline's bytes from the compiled cost analysis; null: none"),
    device_s="older records: the device step",
    dispatch_s="older records: the dispatch added to the device step",
    host_s="older records: the host's share added to the device step",
    transfer_s="older records: the batch's copy added to the device step",
    host_left_out=(list[Str], "older records: the host parts without a figure"),
    bound=(Str, "compute|memory: what bounds the roofline"),
    peak_tflops_used="the peak the roofline used",
    peak_source=(Str, "where that peak came from"),
    peak_precision=(Str, "the precision of that peak"),
    bandwidth_bytes_per_s="the bandwidth the roofline used",
    bandwidth_source=(Str, "measured|vendor"),
    flops_source=(Str, "xla|jaxpr"),
    compiler_estimate_s="XLA's own estimate",
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
    """Which program the kernels came from, and how many steps one run of it takes."""

    program: Str | None = about("train_step|epoch")
    steps: PositiveCount = always("the steps one run of the program takes")
    recompiled: Str | None = about(
        "where experiments.predict.repredict compiled it again for an older record"
    )
    jax: Str | None = about("the jax that compiled it again")
    launches: Object | None = about(
        "how the runtime launches one run of it (jaxcnn.perf.runtime.launches)"
    )


Matmul = _part(
    "Matmul",
    "The square matmul timed.",
    Number,
    n=(Count, "the matrix side"),
    dtype=(Str, "its dtype"),
    flops="2 n^3",
    tflops="the rate reached, TFLOP/s",
)


class Ensemble(Part):
    """K models trained together on one device."""

    k: Count | None = about("the models")
    mode: Str | None = about("vmap: one call of all K | sequential: K calls one after another")
    seeds: list[Count | None] | None = about("each model's seed")
    learning_rates: list[Number | None] | None = about("each model's learning rate")
    test_accuracy: list[Accuracy | None] | None = about(
        "each model's test accuracy; null for synthetic data"
    )
    test_loss: list[Number | None] | None = about("each model's test loss")


class Side(Part):
    """One side's block in a paired round."""

    images_per_s: Positive = always("its rate")
    start: Number | None = about("its start on the host's monotonic clock")
    end: Number | None = about("its end on that clock")


class Round(Part):
    """One block of each side, the side that went first alternating."""

    first: Str | None = about("jax|peer: the side that went first")
    jax: Side = always("JAX's block")
    peer: Side = always("the peer's block")


class PairedSide(Part):
    """What one side of a paired run ran, as the report's paired table reads it."""

    run_id: Str | None = about("its own record (env.turns names the pair)")
    configuration: Str | None = always("what it ran")
    host_memory: Str | None = about("its host memory policy")
    throughput: Throughput | None = about("its own record's throughput")


class Ratio(Summary):
    """Per round, JAX's images a second over the peer's."""

    median: Number | None = always("the median ratio (the report's paired table reads it)")


class Paired(Part):
    """JAX's and a peer's timed blocks alternated, one process computing at a time (not
    ok: only jax and peer, what was asked)."""

    rounds: list[Round] | None = about("the rounds")
    ratio: Ratio | None = about("the rounds' ratios")
    jax: PairedSide | None = about("JAX's side")
    peer: PairedSide | None = about("the peer's side")


Session = _part(
    "Session",
    "The paired driver's run, and its pass over the plan.",
    Count,
    id=(Str, "the run"),
    **{"pass": "this pass", "passes": "the passes planned"},
)


class Target(Part):
    """The target a compile-only record was compiled for (jaxcnn.targets): always known."""

    name: Name = about("the targets table's name")
    platform: Literal[PLATFORMS] = about("cpu|gpu|tpu")
    chip: Str = about("the chip")
    chips: PositiveCount = always("chips (the report divides by them)")
    devices: PositiveCount = always("devices")
    memory_per_chip_bytes: Count = about("each chip's memory")
    memory_per_device_bytes: Count = about("each device's memory")
    usable_bytes_per_device: Count = about("what a program may use of it")
    bandwidth_bytes_per_s: Number = about("the vendor's memory bandwidth")
    peak_tflops: Object | None = about("the vendor's peaks, by precision")
    topology: Str | None = about("a TPU's topology as its compiler names it")
    chip_config: Str | None = about("a TPU's chip configuration")
    gpu_spec: Str | None = about("a GPU's target spec file (jaxcnn/targets)")
    cuda_toolkit: Str | None = about("the CUDA toolkit package an older GPU's compiler needs")
    usable_fraction: Number | None = about("the share of device memory a program may use")


# --- The workload, where it ran, how ---------------------------------------------------

_JSON_TYPES = {str: Str, int: Count, float: Number, bool: Bool, dict: Object}
# What each field of experiments.records.workload.Workload means in a record.
_WORKLOAD_MEANINGS = {
    "model": "the model's name (jaxcnn.models); kind matmul: matmul",
    "model_overrides": "the model's arguments that differ from its defaults",
    "dataset": "the dataset's name; kind matmul: none",
    "batch_size": "images per step, global; kind matmul: the matrix side n",
    "epochs": "epochs trained; 0: timing only (no training, history [], test_accuracy null)",
    "steps": "a cap on the training steps in all; null: whole epochs",
    "optimizer": "the optimizer's name",
    "learning_rate": "the learning rate (onecycle: its peak)",
    "seed": "the seed of the model's initialization and the data's order",
    "strategy": "the placement over the devices (jaxcnn.placement)",
    "precision": "f32|bf16: the compute dtype (params and optimizer state stay f32)",
    "timing_steps": "the steps timed, warm-up excluded",
    "study": "the study that made it (devices|crossover|batch|scaling|matmul|ensemble|"
    "precision|accuracy|bench|speedrun|roofline|targets|default); null: a single --model run",
    "kind": "train|matmul|ensemble|peer|paired|compile|input: which model checks the record",
    "num_devices": "the first N devices; null: all the run resolved",
    "scaling": "null|weak|strong: per-device batch fixed | global batch fixed",
    "ensemble_size": "kind ensemble: the models trained together",
    "ensemble_mode": "null|vmap|sequential",
    "matmul_precision": "default|highest: GPU TF32 on | off (f32 at highest is the "
    "precision `f32-highest` in the table of figures)",
    "oom_group": "the sweep skips the rest of a group after an oom",
    "loop": "step|device: per-step dispatch | whole epochs as one compiled loop",
    "formulation": f"{'|'.join(choices.FORMULATIONS)}: what was asked (the record's "
    "formulation: what ran)",
    "schedule": "constant|onecycle: the learning rate over the run",
    "target": "kind compile: the target compiled for (jaxcnn.targets); else null",
}
# What every record's workload carries, whatever its kind.
_IN_EVERY_WORKLOAD = ("model", "dataset", "batch_size", "strategy", "kind", "study")


def _workload_model(kind: str | None) -> type[Part]:
    """The workload of a record of `kind` (None: of any kind), as
    experiments.records.workload.Workload types its fields (the counts a step needs at
    least one of): a Workload's kinds carry every field, a peer its framework and mode."""
    fields: dict[str, Any] = {}
    for name, hint in typing.get_type_hints(Workload).items():
        nullable = type(None) in typing.get_args(hint)
        plain = next(a for a in typing.get_args(hint) if a is not type(None)) if nullable else hint
        of = _JSON_TYPES[typing.get_origin(plain) or plain]
        if name in ("batch_size", "timing_steps", "ensemble_size", "num_devices"):
            of = AtLeastOne
        if name in ("model", "dataset", "study", "target"):
            of = Name
        if name == "kind":
            of = Literal[KINDS] if kind is None else Literal[kind]
        carried = name in _IN_EVERY_WORKLOAD or kind in WORKLOAD_KINDS
        meaning = _WORKLOAD_MEANINGS[name]
        fields[name] = (
            of | None if nullable else of,
            always(meaning) if carried else about(meaning),
        )
    if kind == "peer":
        fields["framework"] = (Str | None, always("the peer's framework (benchmarks/peers.py)"))
        fields["mode"] = (Str | None, always("how the framework ran the step"))
    if kind == "input":
        fields["pipeline"] = (
            Name,
            always("the published loop's input pipeline replayed (benchmarks/published_inputs.py)"),
        )
    name = f"{kind.capitalize()}Workload" if kind else "Workload"
    return pydantic.create_model(name, __base__=Part, __doc__="What ran.", **fields)


_MACHINE = (
    "a hash of the OS machine id and the host name (devices.machine_id): reruns skip a CPU "
    "cell only when it was recorded on this machine; null where it was not recorded"
)


class Device(Part):
    """Where it ran (jaxcnn.devices.describe)."""

    platform: Literal[PLATFORMS] = always("cpu|gpu|tpu")
    kind: Str = always('the device kind ("TPU v5 lite"; "cpu" for any CPU)')
    count: AtLeastOne = always("the devices used")
    process_count: AtLeastOne = always("the processes")
    host: Str | None = always("the host's name")
    machine: Str | None = about(_MACHINE)
    boot: Str | None = about(
        "a hash of the kernel's boot id (devices.boot_id): VMs cloned from one image share a "
        "machine id, not a boot; null where it was not recorded"
    )


class HarnessDevice(Device):
    """Where it ran (jaxcnn.devices.describe), and on which machine."""

    machine: Str | None = always(_MACHINE)


HostMemory = _part(
    "HostMemory",
    "The host memory policy (jaxcnn.host_memory).",
    Str,
    policy="the policy",
    reason="why it was chosen",
    applied=(Bool, "whether it took effect"),
    asked="the policy asked for (what a record's key covers)",
    settings=(Object, "the allocator settings it made, {name: value}"),
    env_vars=(Object, "allocator environment variables the process started with"),
)
Cpu = _part(
    "Cpu",
    "The host's CPU, on which a CPU's step time depends.",
    Str,
    model="its model name",
    extensions=(list[Str], "its vector extensions (AVX2, AVX-512, AMX)"),
    cores=(Count, "the processors this process could run on (its affinity, else os.cpu_count)"),
)
CpuThreads = _part(
    "CpuThreads",
    "What sized XLA:CPU's thread pools (jaxcnn.devices.cpu_threads).",
    Str,
    NPROC="the NPROC the process ran with",
    set_by="jaxcnn|user: who set it",
)
_VERSION = "its version; null where not recorded"


class Env(Part):
    """What it ran with."""

    python: Str | None = always("python's version")
    git_commit: Str | None = always("the commit of the checkout that ran")
    git_dirty: Bool | None = about(
        "true: its tracked files differed from git_commit (a local edit, or a newer tree "
        "copied beside an older .git), so the commit alone does not name the code that ran"
    )
    git_diff: Str | None = about(
        "where git_dirty: a digest of how the tracked files differed (sha256 of git diff "
        "HEAD, 16 hex digits): two trees on one commit told apart"
    )
    host: Str | None = always("the host's name")
    utc_time: Time | None = always("when it was made, ISO 8601 (without an offset: UTC)")
    jax: Str | None = about(_VERSION)
    jaxlib: Str | None = about(_VERSION)
    flax: Str | None = about(_VERSION)
    optax: Str | None = about(_VERSION)
    host_memory: HostMemory | None = about("the host memory policy; null where not recorded")
    turns: Object | None = about(
        "a side of a paired run: {pair, side}, which benchmarks/paired.py adds (took_turns)"
    )
    cpu: Cpu | None = about("the host's CPU")
    cpu_threads: CpuThreads | None = about("what sized XLA:CPU's thread pools; null: XLA's own")
    smoke: Bool | None = about("true: made by a --smoke run (seconds, tiny: no measurement)")


class HarnessEnv(Env):
    """What it ran with, the JAX side's versions and host memory policy included."""

    jax: Str | None = always(_VERSION)
    jaxlib: Str | None = always(_VERSION)
    flax: Str | None = always(_VERSION)
    optax: Str | None = always(_VERSION)
    host_memory: HostMemory | None = always("the host memory policy; null where not recorded")
    compilation_cache: Bool | None = about(
        "true: JAX's persistent compilation cache was on (JAX_COMPILATION_CACHE_DIR), so a "
        "compile time may be a cache read and no figure takes it; null or absent: off"
    )


class CompileEnv(HarnessEnv):
    """What it was compiled with: the compilers' packages too (jaxcnn.targets)."""

    libtpu: Str | None = about("libtpu's version; null where not installed")
    jax_cuda12_plugin: Str | None = about("jax-cuda12-plugin's version; null where not installed")


class PeerEnv(Env):
    """What the peer framework ran with (benchmarks/peers.py)."""

    framework: Str | None = about("the framework")
    framework_version: Str | None = about("its version")
    torch: Str | None = about("torch's version, where it ran")
    tensorflow: Str | None = about("TensorFlow's version, where Keras ran on it")
    keras: Str | None = about("Keras's version, where it ran")
    keras_backend: Str | None = about("Keras's backend")
    threads: Count | None = about("the framework's (intra-op) threads; 0: its default")
    tf_inter_op_threads: Count | None = about("TensorFlow's inter-op threads; 0: its default")
    threads_note: Str | None = about("what a thread count of 0 means")
    threads_requested: Count | None = about("--threads; null: the framework's default")
    cpu_count: Count | None = about("the host's cores (os.cpu_count)")
    env_vars: Object | None = about("allocator environment variables the process started with")


Formulation = _part(
    "Formulation",
    "How convolutions and pools were computed (jaxcnn.formulation).",
    Str,
    name="xla|cpu",
    conv="the convolutions'",
    pool="the pools'",
)
Params = _part(
    "Params",
    "The model's parameters.",
    Count,
    trainable="trained",
    non_trainable="kept (batch norm statistics)",
)
CompileTimes = _part(
    "CompileTimes",
    "Lower + compile, apart from step time.",
    Number,
    train="the train step (peer: its first step)",
    eval="the eval step",
    epoch="loop device: the whole-epoch loop",
)


# --- A record, by kind -----------------------------------------------------------------

_KEY = (
    "the cell measured: 16 hex digits, config_key of workload, device and conditions; "
    "checked on read"
)
_STEP = (
    "per step, warm-up excluded, after block_until_ready: loop step: each step timed alone; "
    "loop device: a compiled loop of timing_steps steps timed whole, / steps"
)
_SUMMARY = "median p10 p90 n"
_IMAGES = "batch_size (x ensemble.k) / step_time_s.median"
_PARAMS = "the model's parameters"
_COMPILE = "lower + compile, apart from step time"


class Common(Part):
    """What every record carries: what ran, where, with what, and what became of it. A
    failure carries a one-line `message` and the traceback's last lines (`failed`)."""

    schema_version: Literal[SCHEMA_VERSION] = always("this schema's version")
    run_id: Name = always("the run's id, unique in its file")
    status: Literal[STATUSES] = always(
        "ok: ran (compile: compiled and fits); oom: out of memory (compile: does not fit); "
        "nan: the loss not finite; error: anything else (retried on rerun); skipped: not "
        "run (a smaller batch of its group ran out of memory)"
    )
    message: Str | None = always("null when ok; else one line saying why")
    config_key: Str = about(_KEY)
    conditions: Object | None = about(
        "absent: the defaults; else what differed from them, which the key covers "
        "(experiments.harness.prepare.conditions)"
    )
    workload: _workload_model(None) = always("what ran")
    device: Device = always("where it ran")
    env: Env = always("what it ran with")
    traceback_tail: list[Any] | None = about("a failure's traceback, its last lines")

    @pydantic.model_validator(mode="wrap")
    @classmethod
    def _meaning(cls, record: Any, handler: Callable[[Any], Common]) -> Common:
        """After the types, what the record's kind requires of an ok record, and what no
        one field shows: the key is the hash of what it sits beside, the step time no
        faster than its device could run the step's FLOPs, and the one its epochs and
        its images a second say."""
        model = handler(record)
        why = (
            _unfinished(type(model), record)
            or _too_fast(record)
            or _inconsistent(record)
            or _wrong_key(record)
        )
        if why:
            raise _meaning_error(why)
        return model


class Described(Common):
    """A record of a Workload's kinds (train, matmul, ensemble, compile): the whole
    workload, and where and how it ran, in every status."""

    config_key: Str = always(_KEY)
    device: HarnessDevice = always("where it ran")
    env: HarnessEnv = always("what it ran with")
    loop: Str | None = always("step|device, as run")
    formulation: Formulation | None = always("how convolutions and pools were computed")
    compiler_options: Object | None = always(
        "the XLA options the steps compiled with; null where not recorded"
    )
    params: Params | None = when_ok(_PARAMS)
    compile_time_s: CompileTimes | None = when_ok(_COMPILE)
    flops: Flops | None = about("the step's FLOPs")
    memory: Memory | None = about("the step's memory, per device; null where unavailable")


class Ran(Described):
    """A workload run and timed on devices at hand (train, matmul, ensemble)."""

    step_time_s: Timed | None = when_ok(_STEP, holding=_SUMMARY, positive="median")
    images_per_s: Positive | None = about(_IMAGES)
    achieved_tflops: Number | None = about("flops.per_step / step_time_s.median / 1e12")
    mfu: Mfu | None = about("the achieved rate against the peaks")
    matmul_ceiling: dict[str, CeilingEntry] | None = about(
        "{dtype: its best matmul}, measured once per run on the first device"
    )
    bandwidth: Bandwidth | None = about("the memory bandwidth; null where not measured")
    nan_step: Count | None = about("status nan: the first step whose loss was not finite")


class MatmulRecord(Ran):
    """Kind matmul: one jitted square matmul of side batch_size, timed (params 0,
    images_per_s null)."""

    workload: _workload_model("matmul") = always("what ran")
    matmul: Matmul | None = when_ok("the matmul timed", holding="n dtype flops tflops")


class TrainRecord(Ran):
    """Kind train: the placed train step timed, then trained with fit."""

    workload: _workload_model("train") = always("what ran")
    images_per_s: Positive | None = when_ok(_IMAGES)
    eval_step_time_s: Timed | None = about("one eval step on the same batch, timed alike")
    dispatch_s: Timed | None = about(
        "one call of the same placement's step doing no work, timed alike: the host's "
        "round trip of a step (jaxcnn.perf.host.host_side)"
    )
    host_loop: HostLoop | None = about("jaxcnn's own step loop, its host parts timed")
    throughput: Throughput | None = about("images a second over timed blocks of steps")
    history: list[Epoch] | None = about("each epoch's training and test")
    test_accuracy: Accuracy | None = about("the last epoch's; null for synthetic data")
    test_loss: Number | None = about("the last epoch's; null for synthetic data")
    train_time_s: Number | None = about("all epochs' training, compile excluded")
    cost: Cost | None = about("the compiled train step's cost analysis, per device")
    kernels: list[KernelRow] | None = about(
        "the kernels of the program the step times came from (jaxcnn.perf.hlo.summarize "
        "of its optimized HLO: [count, kind, flops, bytes, dtype, collective bytes, note]): "
        "the predictions' input"
    )
    kernels_source: KernelsSource | None = about("which program the kernels came from")
    prediction: Prediction | None = about(
        "the per-kernel model's step time of those kernels (jaxcnn.perf.predict), at the "
        "vendor's rates or on a CPU this run's measured ceiling and bandwidth; older "
        "records: the roofline (method roofline), shown as a bound"
    )
    prediction_vendor: Prediction | None = about(
        "older records: the roofline at the vendor's figures"
    )
    prediction_bound: Prediction | None = about(
        "the step's whole-program roofline from cost: a lower bound, not a prediction"
    )
    prediction_vendor_bound: Prediction | None = about(
        "the same from the vendor's figures alone; null for a chip without them (a CPU)"
    )
    params_digest: Str | None = about("a digest of the trained parameters")
    resumed_from_step: Count | None = about("the checkpoint's step a resumed run went on from")


class EnsembleRecord(TrainRecord):
    """Kind ensemble: ensemble_size models on one device trained together; its step,
    images a second and FLOPs are all the models' work, its history and test figures
    their mean."""

    workload: _workload_model("ensemble") = always("what ran")
    ensemble: Ensemble | None = when_ok(
        "the models", holding="k mode seeds learning_rates test_accuracy"
    )


class CompileRecord(Described):
    """Kind compile (experiments/harness/compile_only.py): compiled for workload.target,
    a device not at hand, never run. ok: compiled and fits; oom: does not fit (or the
    compiler ran out of memory); error: the compiler refused. env gains libtpu and
    jax_cuda12_plugin."""

    workload: _workload_model("compile") = always("what was compiled")
    env: CompileEnv = always("what it was compiled with")
    compiled_not_run: Bool | None = about("true: compiled, never run")
    fits: Bool | None = about("whether the train step fits the target's memory")
    failed_by: Literal["compiler", "machine"] | None = about(
        "error: who failed the compile (absent: made before it was)"
    )
    target: Target | None = when_ok("the target compiled for")
    memory: Memory | None = when_ok("the train step's memory, per device")
    epoch_memory: Object | None = about("the epoch loop's memory, per device")
    cost: Cost | None = about("the train step's cost analysis; null on XLA:GPU")
    kernels: list[KernelRow] | None = about("the compiled train step's kernels")
    kernels_source: KernelsSource | None = about("which program the kernels came from")
    prediction: Prediction | None = about("the per-kernel prediction: always predicted")
    prediction_bound: Prediction | None = about("the roofline: a lower bound")


class PeerRecord(Common):
    """Kind peer (benchmarks/peers.py): the same model and train step in another
    framework, workload.framework and workload.mode say which."""

    config_key: Str = always(_KEY)
    workload: _workload_model("peer") = always("what ran")
    env: PeerEnv = always("what it ran with")
    params: Params | None = when_ok(_PARAMS)
    compile_time_s: CompileTimes | None = when_ok(_COMPILE)
    step_time_s: Timed | None = when_ok(_STEP, holding=_SUMMARY, positive="median")
    throughput: Throughput | None = when_ok("images a second over timed blocks of steps")
    images_per_s: Positive | None = when_ok("throughput.median")


class InputEnv(PeerEnv):
    """What a replayed input pipeline ran with (benchmarks/published_inputs.py)."""

    numpy: Str | None = about(_VERSION)
    torchvision: Str | None = about("torchvision's version, where it ran")
    pillow: Str | None = about("Pillow's version, where it ran")


class InputTiming(Part):
    """A published loop's input pipeline replayed alone: how long its loop waits for
    each batch with no model behind it."""

    workers: Count = always(
        "what made the batches beside the loop's thread as replayed: a loader's worker "
        "processes, 1 for a prefetching tf.data pipeline (0: the loop's thread alone)"
    )
    workers_published: Count = always("the same, as the published loop ran")
    batch_bytes: Count = always("the bytes of one batch the pipeline yields (all its arrays)")
    batches: Count = always("the batches of each timed epoch")
    batch_s: Timed = always("seconds a batch, one sample per timed epoch")


class InputRecord(Common):
    """Kind input (benchmarks/published_inputs.py): a published JAX loop's input pipeline
    (its dataset class, transforms, collate and loader, on synthetic data of its shapes)
    replayed on this CPU with no model; workload.pipeline says which."""

    config_key: Str = always(_KEY)
    workload: _workload_model("input") = always("what ran")
    env: InputEnv = always("what it ran with")
    input: InputTiming | None = when_ok("the pipeline's time a batch", holding="batch_s")


class PairedRecord(Common):
    """Kind paired (benchmarks/paired.py): JAX's and a peer's timed blocks alternated,
    one process computing at a time; workload.study bench; no config_key."""

    workload: _workload_model("paired") = always("what ran")
    paired: Paired | None = when_ok("the rounds and the sides", holding="rounds ratio jax peer")
    session: Session | None = about("the driver's run and its pass over the plan")


# The model of each kind's records.
KIND_MODELS: dict[str, type[Common]] = {
    "train": TrainRecord,
    "matmul": MatmulRecord,
    "ensemble": EnsembleRecord,
    "peer": PeerRecord,
    "paired": PairedRecord,
    "compile": CompileRecord,
    "input": InputRecord,
}


def _kind(record: Any) -> str | None:
    """The kind of `record`'s workload, where it is one of KINDS."""
    workload = record.get("workload") if isinstance(record, dict) else None
    kind = workload.get("kind") if isinstance(workload, dict) else None
    return kind if isinstance(kind, str) and kind in KIND_MODELS else None


# One line of records.jsonl: the model of its workload's kind.
Record = Annotated[
    # built from KIND_MODELS, so spelled with Union: `|` takes no tuple
    typing.Union[tuple(Annotated[m, pydantic.Tag(k)] for k, m in KIND_MODELS.items())],  # noqa: UP007
    pydantic.Discriminator(_kind),
]


def _unfinished(model: type[Common], record: dict[str, Any]) -> str | None:
    """What an ok record of `model` lacks of what its `when_ok` fields require."""
    if record["status"] != "ok":
        return None
    needed = {
        name: field.json_schema_extra
        for name, field in model.model_fields.items()
        if isinstance(field.json_schema_extra, dict)
        and field.json_schema_extra.get("required_when") == "ok"
    }
    missing = [name for name in needed if record.get(name) is None]
    if missing:
        return f"ok {record['workload']['kind']} record lacks {', '.join(missing)}"
    for name, extra in needed.items():
        absent = [k for k in extra.get("holding_when_ok", ()) if k not in record[name]]
        if absent:
            return f"{name} lacks {', '.join(absent)}"
        for key in extra.get("positive_when_ok", ()):
            if record[name][key] is None:
                return f"{name}.{key} is null, not a positive number"
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
# EPOCH_MARGIN slower and EPOCH_FAST_MARGIN faster, the epoch's own fixed work (its
# order, its progress, a checkpoint saved) allowed EPOCH_FIXED_S beside them: the
# committed records' epochs take 0.67 to 1.33 times their steps, and an epoch of two
# 0.2 ms steps 14 ms. An epoch dispatches its steps ahead while the step time is each
# step timed alone to its end: on a busy 2-core machine a tiny model's epoch ran 10.6
# times faster than its steps so timed, a real measurement; a unit slip (ms for s) is
# 1000x. The images a second and the step time are one figure twice (images_per_s =
# batch_size x models / step_time_s.median), so agree within IMAGES_MARGIN.
EPOCH_MARGIN = 10
EPOCH_FAST_MARGIN = 100
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
        if not expected / EPOCH_FAST_MARGIN <= seconds <= expected * EPOCH_MARGIN + EPOCH_FIXED_S:
            return (
                f"history[{i}].train_time_s {seconds:.3g} s is not within {EPOCH_FAST_MARGIN}x "
                f"faster or {EPOCH_MARGIN}x slower than its {steps} steps{of} at "
                f"step_time_s.median {step:.3g} s ({expected:.3g} s; {EPOCH_FIXED_S:.0f} s more "
                "allowed)"
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


def _problem(error: Mapping[str, Any], model: type[Part]) -> str:
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
    maybe = " or null" if _nullable(model, error["loc"]) else ""
    return f"{where} is {JSON_NAMES.get(type(value), 'a value')}, not {expected}{maybe}"


def _dotted(loc: Sequence[str | int]) -> str:
    """A location as a record's reader names it: history[0].train_loss."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _nullable(model: type[Part], loc: Sequence[str | int]) -> bool:
    """Whether the field of `model` at `loc` may be null (to say so beside its type)."""
    annotation: Any = model
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


# The JSON Schema published for users who merge records made elsewhere (a notebook's),
# and the field tables of docs/records.md: `python -m experiments.cli.schema` writes
# both from the models; a test checks they are current.
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "records.schema.json"
FIELDS_PAGE = SCHEMA_FILE.parent / "records.md"
FIELDS_START, FIELDS_END = "<!-- fields:start -->", "<!-- fields:end -->"


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
    one of the kinds' models, each field's type, range and meaning, and which fields an
    ok record of its kind requires (`required_when`)."""
    schema = _without_titles(_adapter(Record).json_schema())
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": schema_generator(),
        "title": f"A jaxcnn record, schema version {SCHEMA_VERSION} (one line of records.jsonl)",
        "description": (
            "Generated from experiments.records.Record, one model per workload.kind; "
            "unknown keys are allowed. required_when ok: the field an ok record carries, "
            "not null. The same as tables: docs/records.md."
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


def fields_text() -> str:
    """The models as the tables of docs/records.md (between FIELDS_START and
    FIELDS_END): the fields every record has, what each group of kinds and each kind
    adds, the workload, device and env across the kinds, and each part (an object a
    field holds)."""
    titles = {
        Common: "Every record",
        Described: "Kinds train, matmul, ensemble and compile",
        Ran: "Kinds train, matmul and ensemble",
        **{model: f"Kind {kind}" for kind, model in KIND_MODELS.items()},
    }
    blocks = []
    for model, title in titles.items():
        base = next((c for c in model.__mro__[1:] if c in titles), Part)
        besides = f" (besides those of {titles[base].lower()})" if base is not Part else ""
        blocks.append(_kind_table(title + besides, model, _own(model, base)))
    blocks += [_family_table(section) for section in ("workload", "device", "env")]
    blocks += [_part_table(part) for part in _parts()]
    return "\n\n".join(blocks)


def _own(model: type[Part], base: type[Part]) -> dict[str, Any]:
    """The fields of `model` declared below `base` (the workload, device and env but in
    every record's table: they have tables of their own)."""
    below = [c for c in model.__mro__ if issubclass(c, Part) and not issubclass(base, c)]
    declared = {name for c in below for name in vars(c).get("__annotations__", {})}
    if base is not Part:
        declared -= {"workload", "device", "env"}
    return {n: f for n, f in model.model_fields.items() if n in declared}


def _kind_table(title: str, model: type[Part], fields: dict[str, Any]) -> str:
    rows = [
        f"| `{name}` | {_type_text(field.annotation)} | {_required_text(field)} | "
        f"{_cell(field.description)} |"
        for name, field in fields.items()
    ]
    head = ["| field | type | required | meaning |", "|---|---|---|---|"]
    return "\n".join([f"### {title}", "", _cell(model.__doc__), "", *head, *rows])


def _family_table(section: str) -> str:
    """One table of `section` (workload, device, env) across the kinds, saying which
    kinds require each field."""
    models = {kind: _inner(m.model_fields[section].annotation) for kind, m in KIND_MODELS.items()}
    names = dict.fromkeys(n for m in models.values() for n in m.model_fields)
    rows = []
    for name in names:
        carrying = {k: m.model_fields[name] for k, m in models.items() if name in m.model_fields}
        # every record's section types a field as any kind may hold it (its kind: any)
        field = _inner(Common.model_fields[section].annotation).model_fields.get(name)
        field = field or next(iter(carrying.values()))
        required = [k for k, f in carrying.items() if f.is_required()]
        said = "every kind" if len(required) == len(KIND_MODELS) else ", ".join(required)
        only = "" if len(carrying) == len(KIND_MODELS) else f" (kind {', '.join(carrying)})"
        rows.append(
            f"| `{name}` | {_type_text(field.annotation)} | {said} | "
            f"{_cell(field.description)}{only} |"
        )
    head = ["| field | type | required in | meaning |", "|---|---|---|---|"]
    doc = _cell(Common.model_fields[section].description).capitalize() + "."
    return "\n".join([f"### {section.capitalize()}", "", doc, "", *head, *rows])


def _parts() -> list[type[Part]]:
    """Every part the kinds' fields hold (but the workload, device and env), in the
    order first met."""
    seen: dict[type[Part], None] = {}

    def visit(annotation: Any) -> None:
        for inner in _models_in(annotation):
            if inner not in seen:
                seen[inner] = None
                for field in inner.model_fields.values():
                    visit(field.annotation)

    for model in KIND_MODELS.values():
        for name, field in model.model_fields.items():
            if name not in ("workload", "device", "env"):
                visit(field.annotation)
    return list(seen)


def _models_in(annotation: Any) -> list[type[Part]]:
    """The models an annotation holds (in a union, a list, a dict)."""
    inner = _inner(annotation)
    if isinstance(inner, type) and issubclass(inner, Part):
        return [inner]
    return [m for arg in typing.get_args(inner) for m in _models_in(arg)]


def _part_table(part: type[Part]) -> str:
    rows = [
        f"| `{name}` | {_type_text(field.annotation)} | {'always' if field.is_required() else ''} "
        f"| {_cell(field.description)} |"
        for name, field in part.model_fields.items()
    ]
    head = ["| field | type | required | meaning |", "|---|---|---|---|"]
    return "\n".join([f"#### {part.__name__}", "", _cell(part.__doc__), "", *head, *rows])


def _required_text(field: Any) -> str:
    if field.is_required():
        return "always"
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if extra.get("required_when") != "ok":
        return ""
    holding = extra.get("holding_when_ok")
    return "ok" + (f", holding {', '.join(holding)}" if holding else "")


_TYPE_NAMES = {float: "number", int: "integer", str: "string", bool: "true or false"}


def _type_text(annotation: Any) -> str:
    """A field's type as the tables say it: "integer or null", "array of [Epoch](#epoch)"."""
    nullable = type(None) in typing.get_args(annotation)
    inner = _inner(annotation)
    origin = typing.get_origin(inner)
    if origin is Literal:
        text = " \\| ".join(f"`{v}`" for v in typing.get_args(inner))
    elif isinstance(inner, type) and issubclass(inner, Part):
        text = f"[{inner.__name__}](#{inner.__name__.lower()})"
    elif origin is list:
        text = f"array of {_type_text(typing.get_args(inner)[0])}"
    elif origin is tuple:
        text = "kernel row (array)"
    elif origin is dict:
        text = f"object of {_type_text(typing.get_args(inner)[1])}"
    else:
        text = _TYPE_NAMES.get(inner, "any" if inner is Any else "object")
    return f"{text} or null" if nullable else text


def _cell(text: str | None) -> str:
    """`text` on one line of a table cell."""
    return " ".join((text or "").split()).replace("|", "\\|")


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
