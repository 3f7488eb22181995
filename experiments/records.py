"""Records: one JSON line per workload, whatever happened to it. This module is the
one place a record is made, checked, keyed, skipped, written and read; it imports no
JAX (benchmarks/peers.py runs without it), so what needs a device takes the device's
description (`jaxcnn.devices.describe`) as a plain dict.

Schema (version 2: every field written, none defaulted by readers; records of
version 1 are skipped by `load` with one line naming `python -m
experiments.migrate_records`). Required in every record:
    schema_version, run_id, status (ok|oom|nan|error|skipped), message (null when ok),
    config_key (every kind but paired: `config_key` of workload, device and conditions;
                checked on read),
    conditions (absent: the defaults; else what differed from them, which the key
                covers: experiments.prepare.conditions),
    workload {model, dataset, batch_size, strategy, kind, study, and for the kinds a
              experiments.workload.Workload describes (train|matmul|ensemble|compile)
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
                                           takes; `recompiled` where experiments.repredict
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
Kind "compile" (experiments/compile_only.py: compiled for workload.target, a device not
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
type-checked when present (`TYPES`, one table; `load` skips a record that fails it, and
`json_schema` publishes it as docs/records.schema.json), and what it means is checked
too (`_check_meaning`: accuracies in [0, 1], counts >= 1, a step time no chip could
beat refused, times parsed, the key the hash of what it sits beside). Records are
ordered by `recorded_at`, never by their time's text, and told apart by machine with
`machine_id`.

A rerun skips a cell already measured (`recorded`, `made_here`): a record whose status
is final (ok, nan, oom) in the same config key; an `error` is retried.

Appends are one os.write of a whole line under an exclusive lock, so a crash or a
second writer never leaves half a line, and a write that fails (a full disk) is cut
back to where the file ended. A bad line found on load (torn, not a JSON object, not
UTF-8) is kept, skipped with one warning per file, and the rest still loads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import glob
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import re
import socket
import stat
import subprocess
import sys
import tempfile
import traceback
import typing
import uuid
import warnings
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

from experiments import host_cpu
from experiments.workload import Workload

SCHEMA_VERSION = 2
# What turns a records file of an older schema into this one (experiments/migrate_records.py).
MIGRATE_COMMAND = "python -m experiments.migrate_records"
STATUSES = ("ok", "oom", "nan", "error", "skipped")
RECORDS_FILE = "records.jsonl"
# A user's runs go to a folder of their own (git-ignored), not into the records this
# repository commits (results/), which only `--out=results` adds to.
DEFAULT_OUT = "runs"
_REQUIRED = {
    "schema_version": int,
    "run_id": str,
    "status": str,
    "workload": dict,
    "device": dict,
    "env": dict,
}
_REQUIRED_WORKLOAD = ("model", "dataset", "batch_size", "strategy", "kind", "study")
_REQUIRED_DEVICE = ("platform", "kind", "count", "process_count", "host")
_REQUIRED_ENV = ("python", "git_commit", "host", "utc_time")
_REQUIRED_OK = ("params", "compile_time_s", "step_time_s", "images_per_s")
KINDS = ("train", "matmul", "ensemble", "peer", "paired", "compile")
# The kinds an experiments.workload.Workload describes; their records carry all of its
# fields.
WORKLOAD_KINDS = ("train", "matmul", "ensemble", "compile")
WORKLOAD_FIELDS = tuple(field.name for field in dataclasses.fields(Workload))
# What else a record of those kinds carries, in every status: where it ran and how.
_REQUIRED_BY_WORKLOAD = {
    "top": ("config_key", "loop", "formulation", "compiler_options"),
    "device": ("machine",),
    "env": ("jax", "jaxlib", "flax", "optax", "host_memory"),
}
FINAL_STATUSES = ("ok", "nan", "oom")  # results a rerun keeps instead of measuring again
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
}


class RecordError(ValueError):
    """A record that does not follow the schema."""


class NotRecorded(RuntimeError):
    """A record that could not be appended to its file; the message says where it was
    kept instead (or that it is on stderr) and how to add it back."""


class OldSchema(RecordError):
    """A record of an earlier schema version: `MIGRATE_COMMAND` rewrites its file once."""


def validate(record: dict[str, Any]) -> dict[str, Any]:
    """Return `record` if it follows the schema; raise RecordError naming what is wrong
    (OldSchema for a record of an earlier version)."""
    for key, kind in _REQUIRED.items():
        if not isinstance(record.get(key), kind):
            raise RecordError(f"field {key!r} missing or not {kind.__name__}")
    version = record["schema_version"]
    if version < SCHEMA_VERSION:
        raise OldSchema(f"schema_version {version}: run {MIGRATE_COMMAND} on its file")
    if version != SCHEMA_VERSION:
        raise RecordError(f"schema_version {version} is not {SCHEMA_VERSION}")
    if record["status"] not in STATUSES:
        raise RecordError(f"status {record['status']!r} is not one of {STATUSES}")
    if "message" not in record:
        raise RecordError("field 'message' missing")
    kind = record["workload"].get("kind")
    if kind not in KINDS:
        raise RecordError(f"workload.kind {kind!r} is not one of {KINDS}")
    workload_keys = WORKLOAD_FIELDS if kind in WORKLOAD_KINDS else _REQUIRED_WORKLOAD
    required = {"workload": workload_keys, "device": _REQUIRED_DEVICE, "env": _REQUIRED_ENV}
    if kind in WORKLOAD_KINDS:
        for section in ("device", "env"):
            required[section] = (*required[section], *_REQUIRED_BY_WORKLOAD[section])
        required[""] = _REQUIRED_BY_WORKLOAD["top"]
    elif kind == "peer":
        required[""] = ("config_key",)
        required["workload"] = (*workload_keys, "framework", "mode")
    for section, keys in required.items():
        missing = [k for k in keys if k not in (record[section] if section else record)]
        if missing:
            raise RecordError(f"{section or 'record'} lacks {', '.join(missing)}")
    if record["status"] == "ok":
        missing = [k for k in _REQUIRED_OK_BY_KIND[kind] if record.get(k) is None]
        if missing:
            raise RecordError(f"ok {kind} record lacks {', '.join(missing)}")
        for section, keys in _REQUIRED_SECTION.items():
            if section in _REQUIRED_OK_BY_KIND[kind]:
                if not isinstance(record[section], dict):
                    raise RecordError(f"{section} is not an object")
                absent = [k for k in keys if k not in record[section]]
                if absent:
                    raise RecordError(f"{section} lacks {', '.join(absent)}")
        step = record.get("step_time_s", {"median": None, "p10": None, "p90": None, "n": 0})
        if not all(k in step for k in ("median", "p10", "p90", "n")):
            raise RecordError("step_time_s needs median, p10, p90 and n")
    _check_types(record)
    for where, value in _divisors(record, kind):
        if not (_is(value, _NUMBER) and value > 0):
            raise RecordError(f"{where} is {_value_name(value)}, not a positive number")
    _check_meaning(record)
    return record


# --- Meaning: what a record's values may be, beyond their types --------------------------
#
# The fastest chip's dense peak is about 1e16 FLOP/s (NVIDIA's B200 at FP4, 9 PFLOP/s);
# a CPU device (JAX makes one of the whole host) stays below 1e15 (a two-socket
# server's AMX units). A step time that implies more, for the step's own FLOPs, is no
# measurement (a clock read before the work finished, a hand-edited record): ten times
# the fastest, so no real record comes near it.
MAX_FLOPS_PER_S = {"cpu": 1e15}
MAX_FLOPS_PER_S_OTHER = 1e17
# The fractions a record holds: accuracies in [0, 1].
_ACCURACIES = ("test_accuracy",)
_HISTORY_ACCURACIES = ("train_accuracy", "test_accuracy")
# The summaries whose median is a time or a rate: positive where measured.
_TIMED = ("step_time_s", "eval_step_time_s", "dispatch_s", "throughput")
# The counts that are at least 1 where present (a batch of 0 images times nothing).
_AT_LEAST_ONE = {
    "workload": ("batch_size", "timing_steps", "ensemble_size", "num_devices"),
    "device": ("count", "process_count"),
}


def _check_meaning(record: dict[str, Any]) -> None:
    """RecordError for a value of the right type that cannot be what it says: an
    accuracy outside [0, 1], a batch or a device count below 1, a step time faster than
    any chip could run the step's FLOPs (MAX_FLOPS_PER_S), a time that is not an ISO
    8601 time, a config_key that is not the hash of the workload,
    device and conditions beside it."""
    for section, keys in _AT_LEAST_ONE.items():
        for key in keys:
            value = record[section].get(key)
            if value is not None and not (_is(value, _INT) and value >= 1):
                raise RecordError(f"{section}.{key} is {value!r:.40}, not a whole number >= 1")
    for where, value in _accuracies(record):
        if value is not None and not 0 <= value <= 1:
            raise RecordError(f"{where} is {value!r:.40}, not an accuracy in [0, 1]")
    for key in _TIMED:
        median = (record.get(key) or {}).get("median")
        if median is not None and not median > 0:
            raise RecordError(f"{key}.median is {median!r}, not a positive time or rate")
    _check_rate(record)
    when = record["env"].get("utc_time")
    if when is not None and parse_time(when) is None:
        raise RecordError(
            f"env.utc_time {when!r:.40} is not an ISO 8601 time (2026-11-25T14:00:00Z)"
        )
    if "config_key" in record:
        expected = config_key(record["workload"], record["device"], record.get("conditions"))
        if record["config_key"] != expected:
            raise RecordError(
                f"config_key {record['config_key']!r:.24} is not the hash of its workload, "
                f"device and conditions ({expected})"
            )


def _accuracies(record: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    for key in _ACCURACIES:
        yield key, record.get(key)
    for number, epoch in enumerate(record.get("history") or []):
        for key in _HISTORY_ACCURACIES:
            yield f"history[{number}].{key}", epoch.get(key)
    for number, value in enumerate((record.get("ensemble") or {}).get("test_accuracy") or []):
        yield f"ensemble.test_accuracy[{number}]", value


def _check_rate(record: dict[str, Any]) -> None:
    """RecordError if the step time implies a FLOP rate per device above the bound."""
    step = (record.get("step_time_s") or {}).get("median")
    flops = (record.get("flops") or {}).get("per_step") or (record.get("matmul") or {}).get("flops")
    if record.get("compiled_not_run") or not step or not flops:
        return
    count = record["device"].get("count") or 1
    bound = MAX_FLOPS_PER_S.get(record["device"]["platform"], MAX_FLOPS_PER_S_OTHER)
    rate = flops / step / count
    if rate > bound:
        raise RecordError(
            f"step_time_s.median {step:.3g} s for {flops:.3g} FLOPs on {count} device(s) is "
            f"{rate:.3g} FLOP/s per device, above the {bound:.0e} any "
            f"{record['device']['platform']} device reaches"
        )


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


# A record up to this far ahead of the reader's clock is the writer's clock drifting,
# not a time to come.
CLOCK_SKEW = timedelta(minutes=10)


def recorded_at(record: dict[str, Any], now: datetime | None = None) -> datetime | None:
    """When `record` was made (its `env.utc_time`), an aware UTC datetime; None when
    the time is missing, unparseable or in the future of `now` (default: this machine's
    clock) by more than CLOCK_SKEW: a record from a machine whose clock said 2099 is
    never "the newest". The one way to order records by time: never their text."""
    when = parse_time((record.get("env") or {}).get("utc_time"))
    if when is None or when > (now or datetime.now(timezone.utc)) + CLOCK_SKEW:
        return None
    return when


_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


def recorded_at_or_oldest(record: dict[str, Any]) -> datetime:
    """recorded_at, with records of no readable time sorting first."""
    return recorded_at(record) or _OLDEST


def machine_id(record: dict[str, Any]) -> str:
    """The machine `record` was made on, the one way to tell two apart: its
    `device.machine` (a hash of the OS machine id and the host name,
    jaxcnn.devices.machine_id) where recorded; else, for older records and kinds that
    do not record it, `host:<env.host>|<env.cpu.model>` (two VMs both named "vm" with
    different CPUs stay two; with the same CPU model they cannot be told apart)."""
    machine = (record.get("device") or {}).get("machine")
    if machine:
        return str(machine)
    env = record.get("env") or {}
    host = env.get("host") or (record.get("device") or {}).get("host") or "unknown host"
    cpu = (env.get("cpu") or {}).get("model") or "unknown CPU"
    return f"host:{host}|{cpu}"


def _divisors(record: dict[str, Any], kind: str) -> Iterator[tuple[str, Any]]:
    """(where, value) of each value a reader divides by: an ok record's step time, the
    steps its kernels' program takes, each side's rate in a paired round."""
    if record["status"] == "ok" and "step_time_s" in _REQUIRED_OK_BY_KIND[kind]:
        yield "step_time_s.median", record["step_time_s"]["median"]
    if record.get("kernels_source"):
        yield "kernels_source.steps", record["kernels_source"].get("steps")
    for key in ("chips", "devices"):
        if key in (record.get("target") or {}):
            yield f"target.{key}", record["target"][key]
    for number, one in enumerate((record.get("paired") or {}).get("rounds") or []):
        for side in ("jax", "peer"):
            rate = (one.get(side) or {}).get("images_per_s")
            yield f"paired.rounds[{number}].{side}.images_per_s", rate


# --- Types: every field a reader uses, checked when a record is loaded ----------------
#
# A type is a tuple of Python types (a value of one of them), a dict (an object, each
# of whose keys that is present has the type given: unknown keys are kept, never
# rejected), a one-item list (an array whose every item has that type), or Maybe(type)
# (that, or null), or a Row (an array of fixed positions). Which fields must be present
# is the tables above (`validate`); this says what a present one may hold.
# `json_schema` writes the same as a JSON Schema. Beyond their types, every number is
# finite, at most NUMBER_LIMIT and not negative (but those in SIGNED), a summary's
# p10 <= median <= p90, and each value a reader divides by positive (`_divisors`): so a
# record the reader returns never makes a report or a fit divide by null or zero,
# format a NaN, or sort a list against a number.


class Maybe(NamedTuple):
    """A field that may be null."""

    kind: Any


class Row(NamedTuple):
    """An array of fixed positions, each of its own type; the last `optional` may be
    left out."""

    items: tuple[Any, ...]
    optional: int = 0


_NUMBER = (int, float)
_INT, _STR, _BOOL = (int,), (str,), (bool,)
NUMBER, INT, STR = Maybe(_NUMBER), Maybe(_INT), Maybe(_STR)  # measured: null where none
OBJECT, ARRAY = Maybe((dict,)), Maybe((list,))
_SUMMARY = {"median": NUMBER, "p10": NUMBER, "p90": NUMBER, "n": INT}  # stats.summarize
_PREDICTION = {
    **{
        key: NUMBER
        for key in (
            "step_time_s",
            "compute_s",
            "memory_s",
            "images_per_s",
            "peak_tflops_used",
            "bandwidth_bytes_per_s",
            "compiler_estimate_s",
            "overhead_s",
            "collective_s",
            "kernels",
        )
    },
    **{
        key: STR
        for key in (
            "bound",
            "peak_source",
            "peak_precision",
            "bandwidth_source",
            "flops_source",
            "method",
            "constants_version",
            "rates_source",
        )
    },
    "error_band": Maybe({"median": NUMBER, "worst": NUMBER}),
}
_JSON_OF_PYTHON = {str: _STR, int: _INT, float: _NUMBER, bool: _BOOL, dict: (dict,)}
# jaxcnn.perf.hlo.summarize: [count, kind, flops, bytes, dtype, collective bytes(, note)].
_KERNEL_ROW = Row((_INT, _STR, _NUMBER, _NUMBER, STR, _NUMBER, _STR), optional=1)
# One side of a paired run as the report's paired table reads it.
_PAIRED_SIDE = {
    "run_id": STR,
    "configuration": STR,
    "host_memory": STR,
    "throughput": Maybe({**_SUMMARY, "steps": INT, "minor_faults_per_step": NUMBER}),
}
_SIDE = {"images_per_s": _NUMBER, "start": NUMBER, "end": NUMBER}  # one side of a paired round


def _workload_types() -> dict[str, Any]:
    """The workload's fields as experiments.workload.Workload types them."""
    types: dict[str, Any] = {}
    for name, hint in typing.get_type_hints(Workload).items():
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        plain = typing.get_origin(hint) or hint
        if type(None) in typing.get_args(hint):
            types[name] = Maybe(_JSON_OF_PYTHON[typing.get_origin(args[0]) or args[0]])
        else:
            types[name] = _JSON_OF_PYTHON[plain]
    return types


_HISTORY_ENTRY = {
    "epoch": _INT,
    "steps": INT,
    **{
        key: NUMBER
        for key in (
            "train_loss",
            "train_accuracy",
            "train_time_s",
            "test_loss",
            "test_accuracy",
            "eval_time_s",
            "compile_time_s",
        )
    },
}
TYPES: dict[str, Any] = {
    "schema_version": _INT,
    "run_id": _STR,
    "status": _STR,
    "message": STR,
    "config_key": _STR,
    "conditions": OBJECT,  # experiments.prepare.conditions: what differs from the defaults
    "workload": {**_workload_types(), "framework": STR, "mode": STR},
    "device": {
        "platform": _STR,
        "kind": _STR,
        "count": _INT,
        "process_count": _INT,
        "host": STR,
        "machine": STR,
    },
    "env": {
        **{key: STR for key in ("python", "git_commit", "host", "utc_time")},
        **{key: STR for key in ("jax", "jaxlib", "flax", "optax")},
        "host_memory": Maybe({"applied": Maybe(_BOOL), "policy": STR, "reason": STR}),
        "turns": OBJECT,
        "cpu": Maybe({"model": STR, "extensions": Maybe([_STR])}),
    },
    "loop": STR,
    "formulation": Maybe({"name": STR, "conv": STR, "pool": STR}),
    "compiler_options": OBJECT,  # the XLA options the steps compiled with: any values
    "params": Maybe({"trainable": INT, "non_trainable": INT}),
    "compile_time_s": Maybe({"train": NUMBER, "eval": NUMBER, "epoch": NUMBER}),
    "step_time_s": Maybe(_SUMMARY),
    "eval_step_time_s": Maybe(_SUMMARY),
    "dispatch_s": Maybe(_SUMMARY),
    "host_loop": Maybe(
        {
            "loop": STR,
            **{key: INT for key in ("steps", "steps_per_epoch", "check_every", "syncs")},
            "parts": {
                part: Maybe({**_SUMMARY, "mean": NUMBER})
                for part in ("batch", "put", "dispatch", "metrics", "progress", "sync", "wait")
            },
            "loop_step_s": NUMBER,
        }
    ),
    "throughput": Maybe({**_SUMMARY, "steps": INT, "minor_faults_per_step": NUMBER}),
    "images_per_s": NUMBER,
    "history": Maybe([_HISTORY_ENTRY]),
    "test_accuracy": NUMBER,
    "test_loss": NUMBER,
    "train_time_s": NUMBER,
    "achieved_tflops": NUMBER,
    "flops": Maybe(
        {
            "per_step": INT,
            "per_step_in_bounds": INT,
            "per_image": NUMBER,
            "forward_per_image": NUMBER,
            "xla_per_device": NUMBER,
            "xla_per_step": NUMBER,
            "xla_vs_jaxpr": NUMBER,
            "by_primitive": OBJECT,
            "unknown_trip_count": Maybe(_BOOL),
        }
    ),
    "mfu": Maybe(
        {
            "chip": STR,
            "vendor_precision": STR,
            "vendor_peak_tflops": NUMBER,
            "vs_vendor": NUMBER,
            "measured_dtype": STR,
            "measured_ceiling_tflops": NUMBER,
            "vs_measured": NUMBER,
        }
    ),
    "memory": Maybe(
        {
            key: INT
            for key in (
                "argument_bytes",
                "output_bytes",
                "alias_bytes",
                "temp_bytes",
                "generated_code_bytes",
                "total_bytes",
                "peak_bytes_in_use",
                "bytes_limit",
            )
        }
    ),
    "bandwidth": Maybe(
        {"bytes_per_s": NUMBER, "p10": NUMBER, "p90": NUMBER, "n": INT, "size_bytes": INT}
    ),
    "cost": Maybe(
        {"flops": NUMBER, "bytes_accessed": NUMBER, "optimal_seconds": NUMBER, "flops_source": STR}
    ),
    "prediction": Maybe(_PREDICTION),
    "prediction_vendor": Maybe(_PREDICTION),
    "prediction_bound": Maybe(_PREDICTION),
    "prediction_vendor_bound": Maybe(_PREDICTION),
    "kernels": Maybe([_KERNEL_ROW]),
    "kernels_source": Maybe({"program": STR, "steps": _INT, "recompiled": STR, "jax": STR}),
    "matmul_ceiling": Maybe({}),  # {dtype: {tflops, ...}}: checked in `_check_types`
    "matmul": Maybe({"n": INT, "dtype": STR, "flops": NUMBER, "tflops": NUMBER}),
    "ensemble": Maybe(
        {
            "k": INT,
            "mode": STR,
            "seeds": Maybe([INT]),
            "learning_rates": Maybe([NUMBER]),
            "test_accuracy": Maybe([NUMBER]),
            "test_loss": Maybe([NUMBER]),
        }
    ),
    "paired": Maybe(
        {
            "rounds": Maybe([{"jax": _SIDE, "peer": _SIDE, "first": STR}]),
            "ratio": Maybe(_SUMMARY),
            "jax": Maybe(_PAIRED_SIDE),
            "peer": Maybe(_PAIRED_SIDE),
        }
    ),
    "session": Maybe({"id": STR, "pass": INT, "passes": INT}),  # a paired run's passes
    "compiled_not_run": Maybe(_BOOL),
    "fits": Maybe(_BOOL),
    "target": Maybe(  # always known: the target table's (jaxcnn.targets)
        {
            "name": _STR,
            "platform": _STR,
            "chip": _STR,
            "chips": _INT,
            "devices": _INT,
            "memory_per_chip_bytes": _INT,
            "memory_per_device_bytes": _INT,
            "usable_bytes_per_device": _INT,
            "bandwidth_bytes_per_s": _NUMBER,
            "peak_tflops": OBJECT,
        }
    ),
    "epoch_memory": OBJECT,
    "nan_step": INT,
    "params_digest": STR,
    "resumed_from_step": INT,
    "traceback_tail": ARRAY,
}
MATMUL_CEILING_ENTRY = {
    "tflops": NUMBER,
    "size": INT,
    "reps": INT,
    "passes": INT,
    "precision": STR,
}


def _is(value: Any, kinds: tuple[type, ...]) -> bool:
    # bool is an int in Python; a count or a byte size that is True is a bug.
    if isinstance(value, bool) and bool not in kinds:
        return False
    return isinstance(value, kinds)


def _type_name(kind: Any) -> str:
    """A type as the JSON it describes: "a number or null", "an object", ..."""
    if isinstance(kind, Maybe):
        return f"{_type_name(kind.kind)} or null"
    if isinstance(kind, dict):
        return "an object"
    if isinstance(kind, list | Row):
        return "an array"
    if set(kind) == {int, float}:
        return "a number"
    return " or ".join(_TYPE_NAMES[k] for k in kind)


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
_TYPE_NAMES.update({dict: "an object", list: "an array"})


def check_types(value: Any, kind: Any, where: str) -> None:
    """RecordError naming the first field of `value` (called `where`) that is not of
    `kind` (a type of `TYPES`)."""
    declared = kind
    if isinstance(kind, Maybe):
        if value is None:
            return
        kind = kind.kind
    if isinstance(kind, dict):
        if not isinstance(value, dict):
            raise _wrong(value, declared, where)
        for key, inner in kind.items():
            if key in value and not _plainly(value[key], inner):
                check_types(value[key], inner, f"{where}.{key}" if where else key)
    elif isinstance(kind, list):
        if not isinstance(value, list):
            raise _wrong(value, declared, where)
        for number, item in enumerate(value):
            if not _plainly(item, kind[0]):
                check_types(item, kind[0], f"{where}[{number}]")
    elif isinstance(kind, Row):
        least, most = len(kind.items) - kind.optional, len(kind.items)
        if not isinstance(value, list):
            raise _wrong(value, declared, where)
        if not least <= len(value) <= most:
            raise RecordError(f"{where} has {len(value)} items, not {least} to {most}")
        for number, (item, inner) in enumerate(zip(value, kind.items, strict=False)):
            if not _plainly(item, inner):
                check_types(item, inner, f"{where}[{number}]")
    elif not _is(value, kind):
        raise _wrong(value, declared, where)
    elif type(value) in (int, float) and not 0 <= value <= NUMBER_LIMIT:
        _check_number(value, where)
    if isinstance(value, dict) and "p10" in value and "median" in value and "p90" in value:
        _check_summary(value, where)


def _plainly(value: Any, kind: Any) -> bool:
    """Whether `value` is plainly of `kind` (null where it may be; a string, an object
    or an array where that is all `kind` says; a number from 0 to NUMBER_LIMIT), known
    without the path `check_types` would name: most of a record's values are, and a
    record has thousands (its kernels)."""
    if type(kind) is Maybe:
        if value is None:
            return True
        kind = kind.kind
    if type(kind) is not tuple or type(value) not in kind:
        return False
    return type(value) not in (int, float) or 0 <= value <= NUMBER_LIMIT


def _wrong(value: Any, kind: Any, where: str) -> RecordError:
    return RecordError(f"{where} is {_value_name(value)}, not {_type_name(kind)}")


# The largest magnitude a record's integer may have: beyond any count, size or time (a
# 400-digit integer overflows where a reader makes it a float). A float need only be
# finite: a learning rate of 1e30 is how a diverging run is asked for.
NUMBER_LIMIT = 2**63
# The numbers a record holds that may be negative (XLA's -1: "no estimate"); every other
# is a count, a size, a time, a rate or a fraction.
SIGNED = frozenset({"cost.optimal_seconds"})


def _check_number(value: float, where: str) -> None:
    """RecordError unless `value` is finite (an integer: within NUMBER_LIMIT), and not
    negative."""
    finite = math.isfinite(value) if type(value) is float else abs(value) <= NUMBER_LIMIT
    if not finite:
        raise RecordError(f"{where} is {value!r:.40}, not a finite number below 2**63")
    if value < 0 and re.sub(r"\[\d+\]", "[]", where) not in SIGNED:
        raise RecordError(f"{where} is {value!r}, a negative number")


def _check_summary(summary: dict[str, Any], where: str) -> None:
    """A summary of samples (experiments.stats.summarize) in order: p10 <= median <= p90."""
    values = [summary["p10"], summary["median"], summary["p90"]]
    if None not in values and not values[0] <= values[1] <= values[2]:
        raise RecordError(f"{where} has p10, median, p90 {values}, not in that order")


def _value_name(value: Any) -> str:
    return "an object" if isinstance(value, dict) else _JSON_NAMES.get(type(value), "a value")


def _check_types(record: dict[str, Any]) -> None:
    """Every field of `TYPES` that `record` has, of its type."""
    check_types(record, TYPES, "")
    for dtype, measured in (record.get("matmul_ceiling") or {}).items():
        check_types(measured, MATMUL_CEILING_ENTRY, f"matmul_ceiling.{dtype}")


_JSON_SCHEMA_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}
_JSON_SCHEMA_TYPES.update({dict: "object", list: "array", type(None): "null"})


def _schema_of(kind: Any) -> dict[str, Any]:
    if isinstance(kind, Maybe):
        inner = _schema_of(kind.kind)
        if set(inner) != {"type"}:
            return {"anyOf": [inner, {"type": "null"}]}
        return {"type": [*_as_list(inner["type"]), "null"]}
    if isinstance(kind, dict):
        properties = {key: _schema_of(inner) for key, inner in kind.items()}
        return {"type": "object", **({"properties": properties} if properties else {})}
    if isinstance(kind, list):
        return {"type": "array", "items": _schema_of(kind[0])}
    if isinstance(kind, Row):
        items = [_schema_of(inner) for inner in kind.items]
        least = len(items) - kind.optional
        return {"type": "array", "prefixItems": items, "minItems": least, "items": False}
    names = list(dict.fromkeys(_JSON_SCHEMA_TYPES[k] for k in kind))
    names = ["number"] if names == ["integer", "number"] else names
    return {"type": names[0] if len(names) == 1 else names}


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


# The JSON Schema published for users who merge records made elsewhere (a notebook's):
# `python -m experiments.records` writes it; a test checks it is current.
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "docs" / "records.schema.json"


def schema_text() -> str:
    """`json_schema()` as SCHEMA_FILE holds it."""
    return json.dumps(json_schema(), indent=2) + "\n"


def json_schema() -> dict[str, Any]:
    """The records' schema as a JSON Schema (draft 2020-12): what `load` checks of
    every record (the fields all records have, and the type of each field a reader
    uses); the fields required by kind and status are this module's docstring."""
    schema = _schema_of(TYPES)
    schema["properties"]["schema_version"] = {"const": SCHEMA_VERSION}
    schema["properties"]["status"] = {"enum": list(STATUSES)}
    schema["properties"]["workload"]["properties"]["kind"] = {"enum": list(KINDS)}
    schema["required"] = [*_REQUIRED, "message"]
    for section, keys in (
        ("workload", _REQUIRED_WORKLOAD),
        ("device", _REQUIRED_DEVICE),
        ("env", _REQUIRED_ENV),
    ):
        schema["properties"][section]["required"] = list(keys)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"A jaxcnn record, schema version {SCHEMA_VERSION} (one line of records.jsonl)",
        "description": (
            "Generated by experiments.records.json_schema(); unknown keys are allowed. "
            "What each field means: docs/records.md and experiments/records.py."
        ),
        **schema,
    }


# --- Construction ----------------------------------------------------------------------


def config_key(
    workload: dict[str, Any],
    device: dict[str, Any],
    conditions: dict[str, Any] | None = None,
) -> str:
    """The cell a record measures, as 16 hex digits: a sha256 of the whole described
    workload (every field, as asked), the device's identity (platform, kind, count,
    process count) and the `conditions` it ran under that differ from the defaults
    (experiments.prepare.conditions: x64, a default matmul precision, XLA flags, the
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


def key_folder(root: str | os.PathLike, key: object) -> Path:
    """The real folder under `root` (resolved) named by the config key `key` (a
    workload's checkpoints). The one way a path is made from a key, which may come from
    a record's text (records merged from other machines are an intended input):
    ValueError unless `key` is a config key, so no `..`, separator or absolute path in
    it can climb out of `root`, and unless the folder is a child of `root`, not a
    symlink: jaxcnn never makes one there, and one to another run's folder would have
    this run set that run's checkpoints aside and write its own there."""
    if not is_config_key(key):
        raise ValueError(f"{key!r} is not a config key (16 hex digits)")
    base = Path(root).resolve()
    folder = base / key
    if folder.parent != base:
        raise ValueError(f"{key!r} names no folder inside {root}")
    if folder.is_symlink():
        raise ValueError(
            f"checkpoint folder {folder} is a symlink (to {os.readlink(folder)}), not a folder "
            f"of its own in {base}: remove the link"
        )
    return folder


def new_record(
    workload: dict[str, Any],
    device: dict[str, Any],
    env: dict[str, Any],
    conditions: dict[str, Any] | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The skeleton of a record before its workload runs: status `error` until an
    outcome replaces it (so a run that dies midway still says so), keyed by
    `config_key`. `workload` is the described workload (Workload.describe()), `device`
    the devices' description (jaxcnn.devices.describe), `env` from `environment`,
    `conditions` those that differ from the defaults (kept in the record, whose key
    covers them); `fields` are the kind's own (loop, formulation, compiler_options)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": uuid.uuid4().hex,
        "config_key": config_key(workload, device, conditions),
        "status": "error",
        "message": None,
        "workload": workload,
        "device": device,
        "env": env,
        **({"conditions": conditions} if conditions else {}),
        **fields,
    }


JAX_PACKAGES = ("jax", "jaxlib", "flax", "optax")
# Set by `--smoke` for the run and its subprocesses: their records say `env.smoke`, so
# a report leaves them out (the workload, and so the config key, is unchanged).
SMOKE_ENV = "JAXCNN_SMOKE"


def environment(packages: Sequence[str] = JAX_PACKAGES, **fields: Any) -> dict[str, Any]:
    """The `env` field of a record made now: Python, the installed `packages`' versions
    (read from their metadata: nothing is imported), the commit, host and time, and
    `fields`."""
    return {
        "python": platform.python_version(),
        **{name: _version(name) for name in packages},
        "git_commit": git_commit(),
        "host": socket.gethostname(),
        "utc_time": utc_now(),
        "cpu": host_cpu.describe(),
        **({"smoke": True} if os.environ.get(SMOKE_ENV) else {}),
        **fields,
    }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def utc_now() -> str:
    """This moment as a record's `env.utc_time`."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def git_commit() -> str | None:
    """The commit of this checkout, None outside git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def one_line(error: BaseException) -> str:
    """An exception as a record's `message`: its type and first non-blank line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[0] if lines else ''}"[:300]


_OOM_MARKERS = ("resource_exhausted", "out of memory", "oom when allocating")


def classify_failure(error: BaseException) -> str:
    """The status a failure gives its record: `oom` (XLA's RESOURCE_EXHAUSTED, an
    allocator's "out of memory"), `nan` (a non-finite loss caught by a check), else
    `error` (compile errors included). A checkpoint that could not be saved is an
    `error` (retried on rerun) even though a full disk says RESOURCE_EXHAUSTED too, and
    so is a kernel that wants more on-chip shared memory than the chip has (not the
    device's memory: a smaller batch would not help)."""
    # jaxcnn.checkpoint.CheckpointSaveError, by name: importing it would import JAX.
    saving = any(c.__name__ == "CheckpointSaveError" for c in type(error).__mro__)
    text = f"{type(error).__name__}: {error}".lower()
    if saving or "no space left on device" in text or "shared memory" in text:
        return "error"
    if isinstance(error, MemoryError) or any(m in text for m in _OOM_MARKERS):
        return "oom"
    name = type(error).__name__.lower()
    if isinstance(error, FloatingPointError) or "nan" in name or "nonfinite" in name:
        return "nan"
    return "error"


# What an operating system says when the machine, not the program, failed a step: a
# folder missing, full or read-only (a compiler's temporary files: ptxas writes its
# input and output under TMPDIR), a file that cannot be opened, no file handles left.
_MACHINE_FAULTS = (
    "no space left on device",
    "disk quota exceeded",
    "read-only file system",
    "no such file or directory",
    "permission denied",
    "too many open files",
    "could not open",
    "unable to open",
    "cannot open",
    "failed to create temp",
    "[errno ",
)


def machine_fault(message: str) -> bool:
    """Whether a failure's message (`one_line`) names a fault of the machine (a missing
    temporary folder, a full disk; _MACHINE_FAULTS), not a verdict on the program: a
    rerun does it again instead of keeping it as a finding."""
    text = message.lower()
    return any(marker in text for marker in _MACHINE_FAULTS)


def failed(record: dict[str, Any], error: BaseException) -> dict[str, Any]:
    """`record` updated with how `error` ended its workload: status by
    `classify_failure`, a one-line message and the traceback's last three lines. A
    failing workload is data, not the end of a sweep."""
    record["status"] = classify_failure(error)
    record["message"] = one_line(error)
    record["traceback_tail"] = traceback.format_exception(error)[-3:]
    return record


# --- What a rerun skips ---------------------------------------------------------------


def recorded(
    path: str | os.PathLike, machine: str | None = None
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """(the last final record per config key, the keys with a `skipped` record) already
    in `path` (none if it does not exist). With `machine` (devices.machine_id()), only
    the records that count as made here (`made_here`)."""
    return recorded_among(load(path) if Path(path).exists() else [], machine)


def recorded_among(
    loaded: Iterable[dict[str, Any]], machine: str | None = None
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    """`recorded` of records already loaded."""
    found, skips = {}, set()
    for record in loaded:
        key = record.get("config_key")
        if key is None or (machine and not made_here(record, machine)):
            continue
        if record["status"] in FINAL_STATUSES:
            found[key] = record
        elif record["status"] == "skipped":
            skips.add(key)
    return found, skips


def made_here(record: dict[str, Any], machine: str) -> bool:
    """Whether a record with a config key of this run's measured what this run would.
    An accelerator's key names its chip, so a record from any machine with that chip
    counts: a notebook that resumes from its Drive folder on a fresh Colab VM skips what
    the last VM measured. A CPU's kind is just "cpu" and its key names the host, but
    host names repeat ("localhost", a committed record's VM name): only a record from
    this very machine (device.machine) counts, and one whose machine is null never does."""
    device = record["device"]
    if device["kind"] != device["platform"]:
        return True
    return device.get("machine") == machine


def _json_safe(value: Any) -> Any:
    """NaN and inf become null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def encode(record: dict[str, Any]) -> bytes:
    """`record` validated, as the one JSON line that `append` writes."""
    return (json.dumps(validate(_json_safe(record)), sort_keys=True) + "\n").encode()


def append(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Validate and append one record as one line, whole or not at all.

    One os.write under an exclusive lock, so a second writer never lands inside the
    line; a write that fails or falls short (a full disk) is truncated back to where
    the file ended, so it leaves no partial line, and raises OSError."""
    line = encode(record)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _locked(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a writer died mid-line: keep its fragment off our line
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(
                    errno.ENOSPC, f"short write ({written} of {len(line)} bytes)", str(path)
                )
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):  # under the lock: only our bytes go
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def _locked(path: Path) -> int:
    """`path` opened for appending under an exclusive lock, the file that is at `path`
    once the lock is held: a file replaced while we waited (experiments.migrate_records
    renames a new one over it) is opened again, so no line goes to the old one."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)


# Below this much free space on the records file's disk a run is refused up front: a
# record is a few KB, and a measurement that cannot be written is hours lost.
MIN_FREE_BYTES = 32 * 1024


def check_writable(path: str | os.PathLike) -> None:
    """Raise OSError (its strerror says why) if a record could not be appended to
    `path`: a folder or an unwritable file there, an immutable file, a parent that is
    a file or read-only, a full disk. Creates nothing and changes nothing."""
    path = Path(path)
    check_regular(path)
    if path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))  # EPERM if immutable
    check_writable_folder(path.parent)


# What a records path is when it is not a regular file, by its stat mode.
_SPECIAL_FILES = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_regular(path: str | os.PathLike) -> None:
    """Raise OSError if something other than a regular file is at `path` (a folder, a
    FIFO, a device, a socket): opening a FIFO blocks until another process opens its
    other end, and reading /dev/zero never ends, so a records path is checked before
    it is opened. Nothing at `path` is fine (the first append creates it)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        return
    what = next((name for test, name in _SPECIAL_FILES if test(mode)), "not a regular file")
    code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
    raise OSError(code, f"{what}, not a records file", str(path))


def check_writable_folder(folder: str | os.PathLike) -> None:
    """Raise OSError if files could not be created in `folder` (made, with its parents,
    when the first file is written): a parent that is a file, no permission, a
    read-only or full disk. Creates nothing that it leaves behind."""
    folder = Path(folder)
    existing = folder
    while not existing.exists():
        if existing.is_symlink():  # mkdir would find it in the way, after the work
            why = f"a symlink to {os.readlink(existing)}, which does not exist"
            raise OSError(errno.ENOENT, why, str(existing))
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", str(existing))
    # A probe, not os.access: it also sees read-only mounts and holds for root.
    probe = existing / f".jaxcnn-write-test-{os.getpid()}"
    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    probe.unlink()
    disk = os.statvfs(existing)
    free = disk.f_bavail * disk.f_frsize
    if free < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"no space left on its disk ({free} bytes free)", str(folder))


def write_whole(path: str | os.PathLike, content: bytes) -> None:
    """`path` holds `content` now, whole or not at all: written to a temporary file
    beside it, flushed to disk and renamed over it, so a kill or a full disk midway
    leaves the old file as it was, and no temporary file. A file's permissions are kept
    (a new one gets the umask's); a link is followed, and its target replaced."""
    path = Path(os.path.realpath(path))
    temporary = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o7777)
        os.replace(temporary, path)
    except BaseException as e:
        temporary.unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename != str(path):  # the temporary's: name ours
            raise OSError(e.errno, e.strerror or str(e), str(path)) from e
        raise


def remove_leftovers(path: str | os.PathLike) -> list[Path]:
    """Delete the temporary files that a `write_whole` of `path` cut short by a kill
    (SIGKILL, the out-of-memory killer: no chance to clean up) left beside it, and
    return them. Only for a caller holding the lock every rewrite of `path` takes: a
    temporary file then belongs to no rewrite in progress."""
    path = Path(os.path.realpath(path))
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}\.tmp")
    candidates = path.parent.glob(f".{glob.escape(path.name)}.*.tmp")
    left = [p for p in candidates if pattern.fullmatch(p.name)]
    for stale in left:
        stale.unlink(missing_ok=True)
    return left


def append_or_keep(path: str | os.PathLike, *batch: dict[str, Any]) -> None:
    """`append` each record of `batch` in turn, and if one fails, keep it and the rest
    where they can be recovered (a new file in the temp folder; if even that fails, the
    JSON lines on stderr) and raise NotRecorded saying where: a measurement is never
    lost to a full disk."""
    for done, record in enumerate(batch):
        try:
            append(path, record)
        except OSError as e:
            rest = batch[done:]
            why = f"could not append to {path} ({e.strerror or e})"
            kept = _keep_elsewhere(rest, Path(path).name)
            one = len(rest) == 1
            if kept is None:
                print("".join(encode(r).decode() for r in rest), end="", file=sys.stderr)
                above = "the record is the JSON line" if one else "the records are the JSON lines"
                raise NotRecorded(f"{why}: {above} above") from None
            which = "the record is" if one else f"the {len(rest)} records not appended are"
            raise NotRecorded(f"{why}: {which} kept in {kept} (cat {kept} >> {path})") from None


def _keep_elsewhere(batch: Sequence[dict[str, Any]], name: str) -> Path | None:
    stem = name.removesuffix(".jsonl")
    try:
        fd, kept = tempfile.mkstemp(prefix=f"jaxcnn-unrecorded-{stem}-", suffix=".jsonl")
        os.close(fd)
        for record in batch:
            append(kept, record)
    except OSError:
        return None
    return Path(kept)


def records_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """These files, and every *.jsonl file under these folders (sorted); OSError
    (`check_regular`) if one is a FIFO, a device or a socket: it is never opened."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*.jsonl")) if not p.is_dir())
        else:
            found.append(path)
    for file in found:
        check_regular(file)
    return found


def took_turns(record: dict[str, Any]) -> bool:
    """A side of a paired run (`env.turns`, added by benchmarks/paired.py): its blocks
    took turns with another process's, so it is the evidence behind a paired record,
    not a figure of its own; every table but the paired one leaves it out."""
    return bool(record["env"].get("turns"))


def load(*paths: str | os.PathLike) -> list[dict[str, Any]]:
    """Every valid record in these files or folders (searched for *.jsonl), in file
    order: the one reader of records (the report, the fit, a rerun's skips). Bad lines
    (torn, not JSON, not an object, not UTF-8, not the schema or its meaning:
    `validate`) are kept in the file and skipped, with one warning per file naming
    them; records of an earlier schema version too, with one warning per file naming
    the command that migrates them (`MIGRATE_COMMAND`). A run_id seen before keeps its
    first record, with one warning per file naming the lines of the others; records
    dated in the future of this machine's clock are kept, with one warning per file
    (`recorded_at` gives them no time). A UTF-8 byte order mark is read as text. OSError
    if a path is a FIFO, a device or a socket (`records_files`)."""
    records: dict[str, dict[str, Any]] = {}
    now = datetime.now(timezone.utc)
    for file in records_files(paths):
        bad: list[tuple[int, str]] = []
        repeated: list[int] = []
        future: list[int] = []
        old = 0
        with open(file, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                if not raw.strip():
                    continue
                try:
                    record = validate(parse_line(raw))
                except OldSchema:
                    old += 1
                    continue
                except (ValueError, TypeError, AttributeError, KeyError) as e:
                    bad.append((number, str(e).splitlines()[0][:120] if str(e) else repr(e)))
                    continue
                if record["run_id"] in records:
                    repeated.append(number)
                    continue
                if record["env"].get("utc_time") and recorded_at(record, now) is None:
                    future.append(number)
                records[record["run_id"]] = record
        if old:
            warnings.warn(
                f"{file}: skipped {old} record(s) of an earlier schema version; "
                f"{MIGRATE_COMMAND} {file} rewrites them (nothing is deleted)",
                stacklevel=2,
            )
        if bad:
            warnings.warn(bad_lines(file, bad), stacklevel=2)
        if repeated:
            warnings.warn(
                f"{file}: skipped {len(repeated)} record(s) whose run_id an earlier line "
                f"has (lines {line_numbers(repeated)}): the first record of a run_id is kept",
                stacklevel=2,
            )
        if future:
            warnings.warn(
                f"{file}: {len(future)} record(s) dated after this machine's clock (lines "
                f"{line_numbers(future)}): kept, but never taken for the newest",
                stacklevel=2,
            )
    return list(records.values())


_JSON_NAMES = {list: "an array", str: "a string", int: "a number", float: "a number"}
_JSON_NAMES.update({bool: "true or false", type(None): "null"})


def parse_line(raw: bytes) -> dict[str, Any]:
    """One line of a records file as a JSON object, not yet validated; ValueError says
    why it is none."""
    # utf-8-sig: a byte order mark (an editor's, at the file's start) is no part of the JSON
    value = json.loads(raw.decode("utf-8-sig"))
    if not isinstance(value, dict):
        raise RecordError(f"{_JSON_NAMES.get(type(value), 'a value')}, not an object")
    return value


def bad_lines(file: Path, bad: list[tuple[int, str]]) -> str:
    """One line for all of a file's bad lines ((line number, why) each): where they are
    and why the first is bad."""
    (first, reason), *rest = bad
    if not rest:
        return f"{file}:{first}: skipped a bad record ({reason}); the line is kept"
    numbers = line_numbers([n for n, _ in bad])
    return (
        f"{file}: skipped {len(bad)} bad records (lines {numbers}; line {first}: {reason}); "
        "the lines are kept"
    )


def line_numbers(numbers: Sequence[int]) -> str:
    """Line numbers as a message lists them: the first ten, then "..." if there are more."""
    return ", ".join(map(str, numbers[:10])) + (", ..." if len(numbers) > 10 else "")


if __name__ == "__main__":
    write_whole(SCHEMA_FILE, schema_text().encode())
    print(f"{SCHEMA_FILE} written")
