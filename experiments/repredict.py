"""python -m experiments.repredict RECORDS_FILE: give the measured CPU records that carry
a roofline prediction (made before records carried their step's kernels) the kernels of
that step, by compiling it again here, so the per-kernel model predicts them too and its
error on this CPU is measured on the same records the roofline's was.

What is compiled is the record's own workload (its model, batch, precision, strategy and
device count, and the formulation it ran with, not the one `auto` would pick today),
placed on this machine's CPU devices against abstract inputs, with the jax and jaxlib
the record names: a record made by another version is left alone (its program may
differ), and so is one whose step cannot be compiled here (pmap needs real arrays).
Each rewritten record gains `kernels` (jaxcnn.kernels.summarize of the program it timed:
the train step, or with the device loop the whole-epoch program) and `kernels_source`
{"program", "steps" one run of it takes, "recompiled": when, "jax": version}; its measured
values and its
own roofline `prediction` are not touched. The file is rewritten atomically under the
lock appends take, once: a record with kernels is skipped.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from experiments import records
from experiments.cli_options import OneLineParser
from experiments.migrate_records import rewrite_lines
from experiments.workload import Workload
from jaxcnn.kernels import KINDS


def needs_kernels(record: dict[str, Any], again: str | None = None) -> str | None:
    """Why `record` is not recompiled here, or None when it is. With `again` (a kernel
    kind), a record this command gave kernels of that kind is compiled again: what to
    do when jaxcnn.kernels changes how it reads that kind of kernel."""
    redo = (
        again is not None
        and (record.get("kernels_source") or {}).get("recompiled")
        and any(row[1] == again for row in record.get("kernels") or [])
    )
    if (record.get("kernels") and not redo) or record.get("compiled_not_run"):
        return "has kernels" if record.get("kernels") else "compile-only"
    if record.get("status") != "ok" or record["workload"].get("kind") != "train":
        return "not an ok train record"
    if record["device"]["platform"] != "cpu":
        return "not a CPU record"
    if not record.get("prediction"):
        return "made before records carried a prediction"
    if record["workload"].get("strategy") == "pmap":
        return "pmap compiles only with arrays at hand"
    versions = {p: importlib.metadata.version(p) for p in ("jax", "jaxlib")}
    if any(record["env"].get(p) != v for p, v in versions.items()):
        return "made by another jax or jaxlib"
    return None


def step_kernels(record: dict[str, Any]) -> tuple[list[list], int]:
    """The program the record timed (its train step, or with the device loop its
    whole-epoch program), compiled here for its CPU devices: (its kernel summary, the
    steps one run of it takes)."""
    import jax

    from experiments.compile_only import step_program
    from experiments.measure import step_kernels as read_kernels

    workload = Workload(**record["workload"])
    ran_with = (record.get("formulation") or {}).get("name")
    if ran_with:
        workload = dataclasses.replace(workload, formulation=ran_with)
    devices = jax.devices("cpu")[: record["device"].get("count") or 1]
    program, steps = step_program(workload, devices)
    return read_kernels(program), steps


def repredict_file(path: str | Path, again: str | None = None) -> dict[str, int]:
    """Add kernels to every record of `path` that needs them (`needs_kernels`): counts
    by outcome."""
    counts: dict[str, int] = {}
    by_key: dict[str, tuple[list[list], int]] = {}  # one compile per configuration

    def rewrite(raw: bytes, number: int) -> bytes:
        try:
            record = records.parse_line(raw)
            records.validate(record)
        except (ValueError, TypeError, KeyError, AttributeError):
            return raw  # a bad line stays as it is, byte for byte
        why = needs_kernels(record, again)
        if why is not None:
            counts[why] = counts.get(why, 0) + 1
            return raw
        key = record["config_key"] + str((record.get("formulation") or {}).get("name"))
        if key not in by_key:
            by_key[key] = step_kernels(record)
            print(f"compiled {_label(record)}", file=sys.stderr, flush=True)
        record["kernels"], steps = by_key[key]
        record["kernels_source"] = {
            "program": "epoch" if record.get("loop") == "device" else "train_step",
            "steps": steps,
            "recompiled": records.utc_now(),
            "jax": importlib.metadata.version("jax"),
        }
        counts["recompiled"] = counts.get("recompiled", 0) + 1
        ending = b"\n" if raw.endswith(b"\n") else b""
        return records.encode(record).rstrip(b"\n") + ending

    rewrite_lines(Path(path), rewrite)
    return counts


def _label(record: dict[str, Any]) -> str:
    w = record["workload"]
    return f"{w['model']} batch {w['batch_size']} {w['precision']} ({record['config_key']})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m experiments.repredict", description=__doc__)
    parser.add_argument("path", metavar="RECORDS_FILE")
    parser.add_argument(
        "--again",
        metavar="KIND",
        choices=KINDS,
        help="also compile again the records this command gave kernels of this kind "
        "(after jaxcnn.kernels changed how it reads them)",
    )
    args = parser.parse_args(argv)
    if not Path(args.path).is_file():
        parser.error(f"{args.path} is not a records file")
    counts = repredict_file(args.path, args.again)
    print(", ".join(f"{n} {why}" for why, n in sorted(counts.items())) or "no records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
