"""The command line's compile-only half: `--target=NAME` (one workload),
`--study=targets` (the batch search over every model and target; with --target or
--model, that one's cells) and `--study=scaling_targets` (the data-parallel step on
several GPUs of one host, one batch per GPU), compiled for devices
not at hand (experiments/harness/compile_only.py) and told in words. Nothing here runs a step.

    python -m experiments.run --target=tpu-v5e-8 --model=resnet50 --batch-size=1024

Exit codes as experiments.cli.run: 0 when every cell compiled (fits or not), 1 when the
compiler refused one, 2 for a usage error (an unknown target, a missing compiler, with
the install command) before any work.
"""

from __future__ import annotations

import argparse
import collections
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments import records
from experiments.cli import plan as cli_plan
from experiments.cli.options import HERE
from experiments.harness import compile_only
from experiments.harness.isolated import ChildFailed, InChild
from experiments.predict import shown as predictions
from experiments.records.tables import seconds, si
from experiments.records.workload import Workload
from experiments.studies import COMPILE_STUDIES, TargetCell
from jaxcnn import loop, models, targets
from jaxcnn.errors import UsageError
from jaxcnn.perf.predict import MIN_BAND_ROWS


def _here() -> targets.Target:
    import jax

    found = jax.devices()
    target = targets.matching(found[0].device_kind, len(found))
    if target is None:
        raise UsageError(
            f"no target is this machine's {len(found)} x {found[0].device_kind}: "
            f"jaxcnn/targets.py has {', '.join(targets.TARGETS)}"
        )
    return target


def workload(args: argparse.Namespace, target: targets.Target) -> Workload:
    """The workload of `--target`: `single` (the default) on a many-device target means
    the batch spread over all its devices, as `sharded` does."""
    strategy = "sharded" if args.strategy == "single" and target.devices > 1 else args.strategy
    return _compile_workload(
        model=args.model,
        model_overrides=cli_plan.model_overrides(args),
        batch_size=args.batch_size or cli_plan.DEFAULT_BATCH,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        seed=args.seed,
        strategy=strategy,
        precision=args.precision,
        formulation=args.formulation,
        target=target.name,
    )


def _compile_workload(**fields: Any) -> Workload:
    """A workload compiled, not run: no data read, no epoch trained."""
    return Workload(dataset="synthetic", epochs=0, kind="compile", **fields)


def _gib(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 2**30:.2f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def describe(record: records.CompileRecord, recorded: bool = False) -> str:
    """What a compile-only record says, in words, predictions labelled as such;
    `recorded`: taken from the records file, not compiled by this command."""
    w, t = record.workload, record.target
    where = t.topology or t.gpu_spec
    per = w.batch_size // t.devices
    lines = [
        f"{t.name} ({t.chips} x {t.chip}, {t.devices} device(s), {where}; "
        f"{w.strategy}): {w.model}, batch {w.batch_size} ({per} per device), "
        f"{w.precision}"
    ]
    compiled = record.compile_time_s.model_dump() if record.compile_time_s else {}
    times = ", ".join(f"{k} {seconds(v)}" for k, v in compiled.items() if v)
    if record.status == "error" or not record.memory:
        lines.append(f"  compiles: no ({record.status}): {record.message}")
        return "\n".join(lines)
    if recorded:
        when = record.env.utc_time or "an earlier run"
        lines.append(
            f"  compiles: yes (recorded {when}, compiled nothing now: --force compiles "
            f"again; compiler time then: {times})"
        )
    else:
        lines.append(f"  compiles: yes (compiler time here: {times})")
    m = record.memory
    parts = (
        f"arguments {_gib(m.argument_bytes)}, outputs {_gib(m.output_bytes)}, "
        f"temporaries {_gib(m.temp_bytes)}, code {_gib(m.generated_code_bytes)}, "
        f"aliased (counted once) {_gib(m.alias_bytes)}"
    )
    verdict = "yes" if record.fits else "NO"
    lines.append(
        f"  fits: {verdict}: {_gib(m.total_bytes)} per device of the "
        f"{_gib(t.usable_bytes_per_device)} JAX can use "
        f"({t.usable_fraction:.0%} of {_gib(t.memory_per_device_bytes)}) ({parts})"
    )
    cost = record.cost
    if cost:
        estimate = cost.optimal_seconds
        accessed = cost.bytes_accessed
        lines.append(
            f"  compiler's count per device per step: {si(cost.flops, 'FLOP')}, "
            + (
                f"{si(accessed, 'B')} accessed"
                if accessed is not None
                else "bytes accessed not given by this compiler"
            )
            + (
                f"; its own time estimate {seconds(estimate)}"
                if estimate and estimate > 0
                else "; its own time estimate is not positive (not used)"
                if estimate is not None
                else ""
            )
        )
    else:
        lines.append(
            "  compiler's count: none (XLA:GPU gives no cost analysis): FLOPs from the "
            f"jaxpr, {si(record.flops.per_step / t.devices, 'FLOP')} per device"
        )
    p = predictions.of(record)
    if p and p.get("method") == "per-kernel":
        parts = ", ".join(
            f"{name} {seconds(p[key])}"
            for name, key in (
                ("compute", "compute_s"),
                ("memory", "memory_s"),
                ("launches", "overhead_s"),
                (_collectives_over(record), "collective_s"),
            )
            if key != "collective_s" or p[key]
        )
        lines.append(
            f"  PREDICTED (per-kernel model, {p['kernels']:,.0f} kernels: {parts}): device "
            f"step {seconds(p['device_step_s'])}, {p['images_per_s']:,.0f} images/s"
        )
        lines.append(f"    {predictions.label(p)}")
        if p.get("loop_step_s") is not None:
            left = ", ".join(p["loop_left_out"])
            own = p.get("loop_parts_platform") == record.device.platform
            parts = (
                "host parts from jaxcnn's loops timed on this platform's client"
                if own
                else "host parts from the CPU client's loops and the runtime's published costs"
            )
            lines.append(
                f"    jaxcnn's loop step {seconds(p['loop_step_s'])} ({p['loop_overlap']}, "
                f"{p['loop_bound']}-bound{'; no figure for: ' + left if left else ''}; {parts})"
            )
            lines.append(f"    {loop_band_words(p.get('loop_band'))}")
    bound = record.prediction_bound
    if p and p.get("method") != "per-kernel":  # made before kernels were read: its
        bound, p = record.prediction, None  # prediction, shown, is the roofline bound
    if bound:
        peak = bound.peak_precision
        note = (
            f"; f32 matmuls run as {peak} at JAX's default precision"
            if w.precision == "f32" and peak not in (None, "fp32")
            else ""
        )
        lines.append(
            f"  roofline bound (whole-program roofline at the vendor's peak{note}): step "
            f"{seconds(bound.step_time_s)}, {bound.images_per_s:,.0f} images/s"
        )
    if not p and not bound:
        lines.append("  predicted: none (no vendor figures for this chip)")
    return "\n".join(lines)


def loop_band_words(band: dict[str, Any] | None) -> str:
    """How a loop step's band (jaxcnn.perf.predict.loop_band) is said beside it."""
    if not band:
        return (
            f"loop step unvalidated: fewer than {MIN_BAND_ROWS} published JAX loops of such "
            "programs on this platform to check it against"
        )
    if band.get("mostly_kernels"):  # jaxcnn.perf.predict.kernels_band_instead
        return (
            f"loop step band: {band['median']:.3g}x off (worst {band['worst']:.3g}x, "
            f"n={band['observations']}, the device step's, leave one {band['split']} out: "
            "its kernels are most of this loop step)"
        )
    return (
        f"loop step band: {band['median']:.3g}x off (worst {band['worst']:.3g}x, "
        f"n={band['observations']} published JAX loops held out, on "
        f"{', '.join(band['hosts'])}; the prediction faster on {band['faster']})"
    )


def _collectives_over(record: records.CompileRecord) -> str:
    """What a step's collectives are priced over, as the chip table gives it."""
    rate = predictions.rates_of(record).interconnect_bytes_per_s
    if not rate:
        return "collectives (at the memory's rate: no interconnect figure)"
    return f"collectives (over the chip's link at {si(rate, 'B/s')})"


# Compiles run in a child process: a compiler that crashes (libtpu 0.0.42.1's SIGSEGV on
# one resnet18 cell) costs that cell an `error` record, not the study.
COMPILER = "experiments.harness.compile_only:run_target"


class StoppedBetweenCompiles(loop.Stopped):
    """A SIGTERM stopped the compiles; nothing is checkpointed (each record is whole)."""

    def __init__(self, compiled: int) -> None:
        BaseException.__init__(self, f"stopped between compiles, after {compiled} compile(s)")
        self.step, self.saved = 0, None


def _breadth_first(cells: list[TargetCell]) -> list[TargetCell]:
    """The first batches' order: f32 before bf16, and every chip's smallest target before
    a second target of any chip (tpu-v5e-1 before tpu-v5e-8), each group in the study's
    order: a pass stopped early has put each model on as many chips as it could."""
    repeat, seen = {}, collections.Counter()
    used = sorted({c.target for c in cells}, key=lambda n: (targets.TARGETS[n].devices, n))
    for t in (targets.TARGETS[name] for name in used):  # a chip's smallest among the cells'
        repeat[t.name] = seen[t.chip]
        seen[t.chip] += 1
    return sorted(cells, key=lambda c: (c.precision != "f32", repeat[c.target]))


def _cell_title(cell: TargetCell) -> str:
    changed = "".join(f" {k}={v}" for k, v in cell.overrides)
    return f"{cell.model}{changed} on {cell.target}, {cell.precision}"


def _cell_workload(study: str, cell: TargetCell, batch: int) -> Workload:
    """The compile-only workload of compile study `study`'s `cell` at global batch
    `batch`."""
    return _compile_workload(
        model=cell.model,
        model_overrides=dict(cell.overrides),
        batch_size=batch,
        strategy=cell.strategy,
        precision=cell.precision,
        target=cell.target,
        study=study,
    )


def run(args: argparse.Namespace) -> int:
    """--target or --study=targets (options already checked by
    experiments.cli.plan.check): what is installed first, then compile and tell."""
    out = Path(args.out)
    if args.study in COMPILE_STUDIES:
        cells, single = _study_cells(args), None
    else:
        target = _here() if args.target == HERE else targets.get(args.target)
        cells, single = None, workload(args, target)
        compile_only.check(single)
        targets.abstract_devices(target)  # its compiler loads, before anything is written
    out.mkdir(parents=True, exist_ok=True)
    path = out / records.RECORDS_FILE
    before = {r.run_id for r in records.load(path)} if path.exists() else set()
    with InChild(COMPILER) as in_child:
        recorded = compile_only.recorded_runner(
            path, in_child, force=args.force, on_record=_teller(before)
        )
        compile_cell = _stopping_between(recorded)
        done = (
            [compile_cell(single)]
            if cells is None
            else _compile_study(cells, compile_cell, study=args.study)
        )
    print(f"records in {path}")
    return 1 if any(r.status == "error" for r in done) else 0


def _teller(before: set[str]) -> Callable[[records.CompileRecord], None]:
    """Prints each record once (`describe`): the batch search starts from the batch the
    first pass recorded, which it is handed again."""
    told: set[str] = set()

    def tell(record: records.CompileRecord) -> None:
        run_id = record.run_id
        if run_id in told:
            return
        told.add(run_id)
        print(describe(record, recorded=run_id in before), flush=True)

    return tell


def _study_cells(args: argparse.Namespace) -> list[TargetCell]:
    """The compile-only study's cells (with --target or --model, that one's), each
    target's compiler checked installed."""
    cells = COMPILE_STUDIES[args.study](args.smoke)
    if args.target is not None:  # the study's cells for one target
        cells = [c for c in cells if c.target == targets.get(args.target).name]
    if args.model is not None:  # ... or one model
        models.spec(args.model)  # an unknown name: a usage error naming the known
        cells = [c for c in cells if c.model == args.model]
    for name in {c.target for c in cells}:  # each compiler installed and loads
        targets.abstract_devices(targets.get(name))
    return cells


def _stopping_between(
    compile_cell: Callable[[Workload], records.CompileRecord],
) -> Callable[[Workload], records.CompileRecord]:
    """`compile_cell`, stopped between compiles by a SIGTERM (experiments.cli.run asks every
    loop to stop), as training stops between steps: what is recorded stays, a rerun goes
    on from there."""
    compiled = 0

    def runner(w: Workload) -> records.CompileRecord:
        nonlocal compiled
        if loop.stop_requested():
            raise StoppedBetweenCompiles(compiled)
        try:
            record = compile_cell(w)
        except ChildFailed:  # killed by the stop asked for, mid-compile: nothing to record
            raise StoppedBetweenCompiles(compiled) from None
        compiled += 1
        return record

    return runner


def _compile_study(
    cells: list[TargetCell],
    runner: Callable[[Workload], records.CompileRecord],
    study: str = "targets",
) -> list[records.CompileRecord]:
    """The records of the study's `cells`: every cell's first batch before any cell's
    search, so a study stopped early (each compile costs seconds to minutes here) still
    says something of every model on every target; the search then starts from the
    batch already recorded (a cell that starts at its cap has one batch: no search).
    Each record's workload names `study`, the compile study the cells are of."""
    done = []
    first = _breadth_first(cells)
    for i, cell in enumerate(first, 1):
        print(f"[first batches {i}/{len(first)}] {_cell_title(cell)}", file=sys.stderr)
        done.append(runner(_cell_workload(study, cell, cell.start)))
    searched_cells = [c for c in cells if c.start != c.cap]  # the rest have one batch
    for i, cell in enumerate(searched_cells, 1):
        print(f"[batch search {i}/{len(searched_cells)}] {_cell_title(cell)}", file=sys.stderr)
        make = functools.partial(_cell_workload, study, cell)
        searched = compile_only.batch_search(
            make, runner, start=cell.start, step=cell.step, cap=cell.cap
        )
        print(largest_line(cell, searched), flush=True)
        done += searched
    return done


def largest_line(cell: TargetCell, searched: list[records.CompileRecord]) -> str:
    """The batch search's answer for `cell`, as the report's table of largest batches
    words it."""
    from experiments.records import select

    best, over = select.largest_fit(searched)
    if best is None:
        return f"largest batch that fits, {_cell_title(cell)}: none"
    batch = best.workload.batch_size
    said = str(batch) if over is not None else f">= {batch} (no larger batch found not to fit)"
    return f"largest batch that fits, {_cell_title(cell)}: {said}"
