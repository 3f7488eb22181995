"""Which records stand for what: when a record was made, on which machine, whether a
workload is recorded already, and the selection rules readers share."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from experiments.records import labels
from experiments.records.schema import FINAL_STATUSES, CompileRecord, Record
from experiments.records.store import load


def recorded(
    path: str | os.PathLike, machine: str | None = None
) -> tuple[dict[str, Record], set[str]]:
    """(the last final record per config key, the keys with a `skipped` record) already
    in `path` (none if it does not exist). With `machine` (devices.machine_id()), only
    the records that count as made here (`made_here`)."""
    return recorded_among(load(path) if Path(path).exists() else [], machine)


def recorded_among(
    loaded: Iterable[Record], machine: str | None = None
) -> tuple[dict[str, Record], set[str]]:
    """`recorded` of records already loaded."""
    found, skips = {}, set()
    for record in loaded:
        key = record.config_key
        if key is None or (machine and not made_here(record, machine)):
            continue
        if record.status in FINAL_STATUSES:
            found[key] = record
        elif record.status == "skipped":
            skips.add(key)
    return found, skips


def made_here(record: Record, machine: str) -> bool:
    """Whether a record with a config key of this run's measured what this run would.
    An accelerator's key names its chip, so a record from any machine with that chip
    counts: a notebook that resumes from its Drive folder on a fresh Colab VM skips what
    the last VM measured. A CPU's kind is just "cpu" and its key names the host, but
    host names repeat ("localhost", a committed record's VM name): only a record from
    this very machine (device.machine) counts, and one whose machine is null never does."""
    device = record.device
    if device.kind != device.platform:
        return True
    return device.machine == machine


def one_sitting(runs: Sequence[Record]) -> list[Record]:
    """Of `runs` of one workload on one device (oldest first), those from the newest
    one's code, machine and boot (`sitting`): runs that differ only by chance. Another
    version of the timing code, or another VM under the same CPU label (a CPU label's VMs
    differ by up to 2x), differs by more than a run does. VMs cloned from one image share
    a machine id: the boot (where a record carries it) and the commit tell them apart."""

    return [r for r in runs if sitting(r) == sitting(runs[-1])]


def sitting(record: Record) -> tuple[str | None, ...]:
    """The sitting a record was made in (one_sitting): its machine id, git commit, boot
    (None in records made before boots were recorded) and its tree: how its tracked files
    differed from the commit (`env.git_diff`; "clean" where `env.git_dirty` says they did
    not), else, in records made before that was recorded, the fitted constants its own
    prediction used. A copy of the tree can run under a stale commit (the device copy
    keeps its first HEAD); either tells two trees, and two leases, apart."""
    env = record.env
    tree = getattr(env, "git_diff", None) or ("clean" if env.git_dirty is False else None)
    if tree is None:
        tree = getattr(getattr(record, "prediction", None), "constants_version", None)
    return record.device.machine, env.git_commit, record.device.boot, tree


def took_turns(record: Record) -> bool:
    """A side of a paired run (`env.turns`, added by benchmarks/paired.py): its blocks
    took turns with another process's, so it is the evidence behind a paired record,
    not a figure of its own; every table but the paired one leaves it out."""
    return bool(record.env.turns)


def chip_of(record: Record) -> str:
    """What an error split calls the chip a record's step ran (or was compiled) on: the
    chip table's name for an accelerator, and for a CPU its machine (a CPU model and its
    vector extensions, experiments.records.labels.machine), which no datasheet describes."""
    from jaxcnn.perf import chips

    if record.device.platform == "cpu":
        return labels.machine(record)
    kind = record.device.kind
    return chips.chip_name(kind) or kind


def kind_of(record: Record) -> str:
    return labels.workload_kind(record)


def is_compiled(record: Record) -> bool:
    return isinstance(record, CompileRecord)


def device_of(record: Record) -> str:
    """The device a figure belongs to: a CPU's model and vector extensions, an
    accelerator's chip, a compile-only record's target name."""
    if isinstance(record, CompileRecord):
        return (record.target.name if record.target else None) or record.workload.target or "-"
    return chip_of(record)


def superseded(record: Record) -> bool:
    from jaxcnn import targets

    if not isinstance(record, CompileRecord) or record.target is None:
        return False
    target = targets.TARGETS.get(device_of(record))
    return target is not None and record.target.devices != target.devices


def usable_bytes(record: CompileRecord) -> int | None:
    """What a JAX program may use of one device of the record's target by the chip table
    as it stands (jaxcnn.targets.describe), else as the record was judged: a corrected
    chip fact re-judges every compile of that chip without compiling again."""
    from jaxcnn import targets

    target = targets.TARGETS.get(device_of(record))
    if target is not None and not superseded(record):
        return targets.describe(target)["usable_bytes_per_device"]
    return record.target.usable_bytes_per_device if record.target else None


def fits(record: CompileRecord) -> bool:
    """The target's own compiler's memory analysis against what JAX can use of the chip
    (`usable_bytes`); a program the compiler refused, or one without an analysis, as the
    record judged it."""
    total, limit = record.memory and record.memory.total_bytes, usable_bytes(record)
    if record.status not in ("ok", "oom") or total is None or limit is None:
        return record.status == "ok" and record.fits is not False
    return total <= limit


def largest_fit(
    rs: Sequence[CompileRecord],
) -> tuple[CompileRecord | None, CompileRecord | None]:
    """(the compile of the largest batch that fits, the smallest batch above it that
    does not), from one search's compiles; (None, None) where nothing fits."""
    ok = [r for r in rs if fits(r)]
    if not ok:
        return None, None
    best = max(ok, key=lambda r: r.workload.batch_size)
    b = best.workload.batch_size
    over = [
        r for r in rs if r.status in ("ok", "oom") and not fits(r) and r.workload.batch_size > b
    ]
    return best, min(over, key=lambda r: r.workload.batch_size, default=None)
