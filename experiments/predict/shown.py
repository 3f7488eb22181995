"""The prediction a record is shown with, and the tables that say how far predictions can
be trusted. Pure functions of records, the published references and the constants file:
no JAX device, no compile.

A record that carries its step's kernels (`kernels`, jaxcnn.perf.hlo) is predicted with
the current constants, so every record is priced by the same model and a refit moves
them all at once; one without (made before records carried kernels) keeps the roofline
it was written with, labelled as the roofline bound it is (a bound only under its
assumptions, which a fused kernel can break).

Importing it starts no JAX (the report's study modules import it, and `jaxcnn` imports
JAX): the library is imported where a record is priced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from experiments.predict import published_loops
from experiments.records import (
    CompileRecord,
    InputRecord,
    MatmulRecord,
    PairedRecord,
    PeerRecord,
    Record,
    TrainRecord,
    recorded_at_or_oldest,
)
from experiments.records.schema import CeilingEntry, Target
from experiments.records.select import chip_of

if TYPE_CHECKING:
    from jaxcnn.perf.rates import Rates

# The arrays of a batch as jaxcnn.data.batches yields it (jaxcnn.aot.BATCH_KEYS), each
# one host-to-device copy per step.
BATCH_KEYS = ("image", "label", "mask")
METHOD, BOUND_METHOD = "per-kernel", "roofline bound"  # jaxcnn.perf.predict's names
# {machine (experiments.records.labels.machine): {dtype: its best matmul ceiling}}
Ceilings = Mapping[str, Mapping[str, CeilingEntry]]


def device_of(record: Record) -> Any:
    """A stand-in for the record's device (a target's for a compile-only record): what
    jaxcnn.perf.rates needs to name the precision its matmuls ran in."""
    return SimpleNamespace(
        platform=record.device.platform,
        device_kind=record.device.kind,
        devices_per_chip=_devices_per_chip(
            record.target if isinstance(record, CompileRecord) else None
        ),
    )


def _devices_per_chip(target: Target | None) -> int:
    from jaxcnn import targets

    if target is None:
        return 1
    if target.name in targets.TARGETS:
        return targets.TARGETS[target.name].devices_per_chip
    return target.devices // target.chips


def rates_of(
    record: TrainRecord | MatmulRecord | CompileRecord, ceilings: Ceilings | None = None
) -> Rates:
    """The rates a record's step is priced at: the vendor's where the chip table knows
    the chip (what a compile-only record of it uses), else what the run measured: a
    measured CPU step at the best matmul ceiling its machine's runs measured where
    `ceilings` (`machine_ceilings`) are given, else at its own."""
    from jaxcnn.perf import rates

    device = device_of(record)
    if isinstance(record, CompileRecord):  # compiled, never run: nothing measured
        return rates.pricing(device, device.devices_per_chip)
    ceiling = _machine_ceiling(record, ceilings) or record.matmul_ceiling
    return rates.pricing(
        device,
        device.devices_per_chip,
        {dtype: entry.model_dump(exclude_unset=True) for dtype, entry in (ceiling or {}).items()},
        record.bandwidth.model_dump(exclude_unset=True) if record.bandwidth else None,
    )


# A CPU run measures its matmul ceiling once, at its start, and a busy moment then halves
# it: one bench run here measured 101 GFLOP/s in f32 on a CPU whose other runs reached
# up to 218. Interference only ever lowers a peak, so a measured CPU step is priced at
# the best ceiling any run on its machine (experiments.records.labels.machine) measured. Its own
# stays in the record; the bandwidth, a median of ten copies, is the run's own.
def machine_ceilings(records: Sequence[Record]) -> dict[str, dict[str, CeilingEntry]]:
    """Per machine, per dtype, the best matmul ceiling its measured CPU runs among
    `records` measured: what `rates_of` prices a measured CPU step at. Give it every
    record loaded, before any filtering, so that the report and the fit price each step
    alike."""
    from experiments.records.labels import machine

    best: dict[str, dict[str, CeilingEntry]] = {}
    for r in filter(_measured_cpu, records):
        mine = best.setdefault(machine(r), {})
        for dtype, entry in r.matmul_ceiling.items():
            if entry.tflops and (dtype not in mine or entry.tflops > mine[dtype].tflops):
                mine[dtype] = entry
    return best


def _measured_cpu(record: Record) -> bool:
    """Whether `record` is a CPU run that measured its matmul ceiling."""
    return (
        isinstance(record, TrainRecord | MatmulRecord)
        and record.device.platform == "cpu"
        and bool(record.matmul_ceiling)
    )


def _machine_ceiling(
    record: Record, ceilings: Ceilings | None
) -> Mapping[str, CeilingEntry] | None:
    from experiments.records.labels import machine

    return ceilings.get(machine(record)) if ceilings and _measured_cpu(record) else None


def batch_bytes(record: TrainRecord | CompileRecord) -> int | None:
    """The bytes of one device's share of a step's batch as jaxcnn.data.batches gives it
    (uint8 images, int32 labels, an f32 mask), or None for a model this jaxcnn lacks."""
    from jaxcnn import host_loop
    from jaxcnn.errors import UsageError

    w = record.workload
    try:
        return host_loop.batch_bytes(
            w.model, w.model_overrides, w.batch_size // record.device.count
        )
    except (KeyError, TypeError, ValueError, UsageError):
        return None


def program_steps(record: TrainRecord | CompileRecord) -> int:
    """The steps one run of the program `record`'s kernels came from takes (1 where it
    names none)."""
    return record.kernels_source.steps if record.kernels_source else 1


def convs_of(record: TrainRecord | CompileRecord) -> int | None:
    """The convolution kernels a step of `record`'s program launches (None where it kept
    no kernels): what its dispatch is modelled at (jaxcnn.host_loop.modelled_parts)."""
    from jaxcnn.perf import hlo
    from jaxcnn.perf import host as host_lib

    if not record.kernels:
        return None
    return host_lib.convs_per_step(hlo.from_summary(record.kernels), program_steps(record))


def host_of(
    record: TrainRecord | CompileRecord,
    table: dict[str, Any] | None = None,
    held_out: bool = False,
) -> dict[str, Any] | None:
    """The host side of `record`'s step (jaxcnn.perf.host.host_side): the step loop's
    host parts as the record's own host measured them (its `host_loop`: this CPU's, or a
    notebook's runtime CPU beside its accelerator), else as this project's runs measured
    them for its model and batch (the constants file's `host.loop`); its batch over its
    chip's host link; one call's round trip, the record's own `dispatch_s` where it has
    one, else what this project's runs measured for its placement; its epoch's steps
    where its dataset's size is known. A record whose host measured no loop (a
    compile-only record) gets the loop's parts modelled from those measured here for its
    batch's bytes (jaxcnn.host_loop.modelled_parts), as jaxcnn.compile_for predicts them.
    None where the batch's size is unknown. `held_out`: nothing the record measured of its
    own host (no loop, no round trip), and the loops modelled without its model and batch.
    """
    from jaxcnn import host_loop
    from jaxcnn.perf import host as host_lib

    table = table or constants_table()
    nbytes = batch_bytes(record)
    if nbytes is None:
        return None
    w = record.workload
    ran = isinstance(record, TrainRecord) and not held_out  # what its own host measured
    own = record.dispatch_s.median if ran and record.dispatch_s else None
    measured = record.host_loop.model_dump(exclude_unset=True) if ran and record.host_loop else None
    whole = host_loop.batch_bytes(w.model, w.model_overrides, w.batch_size)
    platform = record.device.platform
    plain = w.model_dump(exclude_unset=True)
    leave_out = host_lib.host_loop_key(plain) if held_out else None
    if own is None and not held_out:
        own = host_lib.measured_dispatch(w.strategy, table, platform)
    return host_lib.host_side(
        measured=measured,
        modelled=None
        if measured
        else host_loop.modelled_parts(
            whole, 1, table, platform, leave_out=leave_out, convs=convs_of(record)
        ),
        modelled_on=host_lib.section(table, platform)[0],
        dispatch_s=own,
        batch_bytes=nbytes,
        host_link_bytes_per_s=rates_of(record).host_link_bytes_per_s,
        platform=platform,
        steps_per_epoch=steps_per_epoch(record),
        loop=record.loop or w.loop,
        steps=program_steps(record),
    )


def steps_per_epoch(record: TrainRecord | CompileRecord) -> int | None:
    """The steps of one epoch of `record`'s workload (its dataset's training images over
    its batch), or None where the dataset's size cannot be told without reading it."""
    from jaxcnn import data

    w = record.workload
    size = data.train_size(w.dataset)
    return data.steps_per_epoch(size, w.batch_size) if size else None


def of(record: Record, table: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The prediction to show for `record`: per-kernel with the current constants where
    it carries kernels (the device's kernels and the host's side of the step, each kept
    apart), else the block it was written with (a roofline bound), its method
    saying which; None for a kind that carries neither."""
    if isinstance(record, MatmulRecord | PeerRecord | PairedRecord | InputRecord):
        return None
    if record.kernels:
        from jaxcnn.perf import hlo, predict

        table = table or predict.constants()
        source = record.kernels_source
        found = predict.predict(
            hlo.from_summary(record.kernels),
            rates_of(record),
            record.device.platform,
            record.workload.batch_size,
            steps=program_steps(record),
            devices=record.device.count,
            chip=chip_of(record),
            host=host_of(record, table),
            launches=source.launches if source else None,
            copies=len(BATCH_KEYS),
            formulation=record.formulation.name if record.formulation else None,
            table=table,
        )
        return None if found is None else found.as_record()
    if not record.prediction:
        return None
    block = record.prediction.model_dump(exclude_unset=True)
    if record.prediction.method in (None, "roofline"):
        block["method"] = BOUND_METHOD
    return block


def held_out_loop(record: Record, table: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The step of jaxcnn's loop that a measured accelerator `record` timed on its host
    (`host_loop`), predicted out of sample: its device step as the fit predicted it with
    the record's chip left out (the constants' observation of it, `held_out_predicted_s`
    by chip, less the host's share the fit adds to a step timed alone); its loop's host
    parts modelled from the loops measured on its platform's client with its own model
    and batch left out (jaxcnn.host_loop.modelled_parts); nothing it measured itself.
    {"loop_step_s", "device_step_s", "parts_platform", "regime"}, or None where the
    record timed no loop a training run makes, runs on a CPU, or the fit could not hold
    its chip out."""
    from jaxcnn.perf import host as host_lib

    if not isinstance(record, TrainRecord) or not record.host_loop:
        return None
    platform = record.device.platform
    if platform == "cpu" or not host_lib.like_training(
        record.host_loop.model_dump(exclude_unset=True)
    ):
        return None
    table = table or constants_table()
    source = f"record {record.run_id}"
    family = (table.get("families") or {}).get(platform) or {}
    seen = next((o for o in family.get("observations") or [] if o.get("source") == source), None)
    held = ((seen or {}).get(HELD_OUT_STEPS) or {}).get("chip")
    side, host = host_of(record, table), host_of(record, table, held_out=True)
    if not held or side is None or host is None:
        return None
    device = max(0.0, held / program_steps(record) - side["host_s"])
    loop = host_lib.loops(device, host, platform)
    return {
        "loop_step_s": loop["loop_step_s"],
        "device_step_s": device,
        "parts_platform": host["parts_platform"],
        "regime": seen["regime"],
    }


DEVICE_STEP = "device_step"  # jaxcnn.perf.predict.DEVICE_STEP, read without starting JAX
QUANTITY_WORDS = {DEVICE_STEP: "device step", "loop_step": "loop step"}


def prediction_faster(faster: int, n: int) -> str:
    """Which way a band errs, as every page and label says it."""
    return f"prediction faster in {faster} of {n}"


def label(block: dict[str, Any] | None) -> str:
    """How a prediction is named beside its figure: its method, and for the per-kernel
    model its constants' version and leave-one-out error band."""
    if not block:
        return "no prediction"
    if block.get("method") != METHOD:
        return f"predicted: {BOUND_METHOD} (not a prediction, no error band)"
    band = block.get("error_band") or {}
    if band.get("median") is None:
        regime = block.get("regime") or ""
        error = f", unvalidated: no {regime} program observed on this platform"
    else:
        split = SPLIT_WORDS.get(band.get("split"), "out of sample")
        quantity = QUANTITY_WORDS[band.get("quantity", DEVICE_STEP)]
        error = f", {split} error on the {quantity} median {band['median']:.0%}, worst "
        error += f"{band['worst']:.0%}"
        if "faster" in band:  # which way it errs, where the band counted it
            error += f", {prediction_faster(band['faster'], band['observations'])}"
    return f"predicted: per-kernel model, constants {block.get('constants_version')}{error}"


PRECISIONS = {"fp32": "f32", "tf32": "f32", "amp": "bf16", "bf16": "bf16", "fp16": "bf16"}


def match_reference(ref: Any, loaded: Sequence[Record]) -> CompileRecord | None:
    """The newest compile-only record with kernels of `ref`'s chip, model, precision and
    batch per chip (on a one-chip target where one exists; a scaling row's on a target of
    its own chips, `compiled_chips`; on the devices the run used, `runs_on_its_devices`),
    or None."""
    if unpredictable(ref) is not None:
        return None
    precision = PRECISIONS[ref.precision]
    chips = compiled_chips(ref)
    found = []
    for r in loaded:
        if not (isinstance(r, CompileRecord) and r.kernels and r.status in ("ok", "oom")):
            continue
        t, w = r.target, r.workload
        if t is None or t.chip != ref.chip or w.model != ref.model or w.precision != precision:
            continue
        if w.model_overrides != (ref.model_overrides or {}):
            continue  # another network under the same name (the MLP at another width)
        if chips is not None and t.chips != chips:
            continue
        if not runs_on_its_devices(ref, t):
            continue  # one core of a chip for a run on the whole chip, or the reverse
        if w.batch_size != ref.batch_per_chip * t.chips:
            continue
        found.append(r)
    return max(found, key=lambda r: (-r.target.chips, recorded_at_or_oldest(r)), default=None)


def runs_on_its_devices(ref: Any, target: Target) -> bool:
    """Whether a compile-only record's `target` runs on the devices `ref`'s run used: as
    many as it names (`devices`, one core of a TPU v2), else every device of its chips."""
    from jaxcnn.perf import chips

    devices = getattr(ref, "devices", None)
    if devices is not None:
        return target.devices == devices
    known = chips.TARGETS.get(target.name)
    return known is None or known.whole_chips


def compiled_chips(ref: Any) -> int | None:
    """How many chips the program a reference is predicted from spans: a scaling row's
    own (its efficiency is the N-chip step against the one-chip step, collectives
    included), None for any other row (the smallest target of its chip: the fitted
    many-chip rows are priced by the one-chip program they were fitted with)."""
    return ref.chips if getattr(ref, "one_chip_images_per_s", None) is not None else None


def one_chip_of(ref: Any) -> Any:
    """A scaling row's one-chip side as a reference of its own: the same system, table
    and batch per chip on one chip (what its predicted efficiency is divided by)."""
    import dataclasses

    return dataclasses.replace(
        ref,
        id=f"{ref.id}-one-chip",
        chips=1,
        images_per_s_per_chip=ref.one_chip_images_per_s,
        one_chip_images_per_s=None,
    )


def unpredictable(ref: Any) -> str | None:
    """Why no jaxcnn program can stand for published reference `ref`, or None."""
    if ref.batch_per_chip is None or ref.images_per_s_per_chip is None:
        return "the source gives no batch or no throughput"
    if ref.precision not in PRECISIONS:
        return f"precision {ref.precision} has no jaxcnn counterpart"
    if PRECISIONS[ref.precision] == "bf16" and not has_bf16(ref.chip):
        return f"jaxcnn's reduced precision is bf16, which a {ref.chip} lacks"
    return None


def has_bf16(chip: str) -> bool:
    """Whether `chip` (a chip table name) has bf16 matmul units."""
    from jaxcnn.perf import chips

    return chips.peak_tflops(chip, "bf16") is not None


def reference_workload(ref: Any) -> Any:
    """The compile-only workload whose program `ref` is predicted from: its model,
    precision and batch per chip on the smallest target of its chip's whole chips, or
    the target of the devices it names (`devices`: one core of a TPU v2) (study
    "references": only the train step is compiled), or None where no target has it."""
    from experiments.records.workload import Workload
    from jaxcnn import targets
    from jaxcnn.perf import chips as chip_table

    chips = compiled_chips(ref)
    devices = getattr(ref, "devices", None)
    target = (
        chip_table.part_of_chips(ref.chip, ref.chips, devices)
        if devices is not None
        else min(
            (
                t
                for t in targets.TARGETS.values()
                if t.chip == ref.chip and t.whole_chips and chips in (None, t.chips)
            ),
            key=lambda t: t.chips,
            default=None,
        )
    )
    if target is None or ref.batch_per_chip is None or ref.precision not in PRECISIONS:
        return None
    return Workload(
        model=ref.model,
        model_overrides=dict(ref.model_overrides or {}),
        dataset="synthetic",
        epochs=0,
        kind="compile",
        study="references",
        batch_size=ref.batch_per_chip * target.chips,
        precision=PRECISIONS[ref.precision],
        strategy="sharded" if target.devices > 1 else "single",
        target=target.name,
    )


def compile_command(ref: Any) -> str:
    """What makes the compile record `ref` is matched with."""
    if reference_workload(ref) is None:
        return f"(no target for chip {ref.chip} in jaxcnn/targets.py)"
    return "python -m experiments.cli.fit results/ --compile-missing results"


def versus_published(
    records: Sequence[Record], refs: Sequence[Any], table: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Per published reference: its compile record's per-kernel prediction of images/s
    per chip beside the published figure ({"reference", "record", "predicted",
    "ratio"}: predicted / published), or why it has none ({"why"}). A JAX loop of a
    small program (`jax_loop`) is predicted by a loop step ("compared": "loop_step_s"):
    its own loop's shape where the reference rebuilds it (published_loops.loop_step, with
    the input replays among `records`; the block's "input" says so), else jaxcnn's;
    any other "predicted" adds,
    to each step, the per-step cost of a published run's loop where the platform's fit
    kept one (another framework's, never jaxcnn's); "predicted_step" is the step alone
    (as the fit prices it: the device step plus a call's round trip and its batch's
    copy)."""
    from jaxcnn.perf import predict

    table = table or predict.constants()
    rows = []
    for ref in refs:
        row: dict[str, Any] = {"reference": ref, "record": None, "predicted": None, "ratio": None}
        record = None
        row["why"] = unpredictable(ref)
        if row["why"] is None:
            record = match_reference(ref, records)
            if record is None:
                row["why"] = f"not compiled yet: {compile_command(ref)}"
        block = of(record, table) if record else None
        if block and block.get("loop_step_s") and jax_loop(ref):
            # A JAX loop of a small model: its own loop's shape around the compiled step
            # where it is rebuilt, else jaxcnn's loop step.
            if ref.loop is not None:
                block = {
                    **block,
                    **published_loops.loop_step(
                        record,
                        block,
                        ref.loop,
                        records,
                        table,
                        own_bytes=batch_bytes(record),
                        link_bytes_per_s=rates_of(record).host_link_bytes_per_s,
                        convs=convs_of(record),
                    ),
                }
            step = block["loop_step_s"]
            row.update(record=record, block=block, predicted_step=ref.batch_per_chip / step,
                       predicted=ref.batch_per_chip / step, compared="loop_step_s")  # fmt: skip
            row["ratio"] = row["predicted"] / ref.images_per_s_per_chip
        elif block and block.get("images_per_s"):
            family = table["families"].get(record.device.platform) or {}
            loop = family.get("published_loop_step_s") or 0.0
            # As the fit predicts a published observation: the device step and what a
            # step called alone adds to it, plus the published run's own loop.
            step = block["device_step_s"] + (host_of(record, table) or {}).get("host_s", 0.0)
            row.update(
                record=record,
                block=block,
                predicted_step=ref.batch_per_chip / step,
                predicted=ref.batch_per_chip / (step + loop),
            )
            row["ratio"] = row["predicted"] / ref.images_per_s_per_chip
        elif record is not None:
            row["why"] = "its compile record has no per-kernel prediction"
        rows.append(row)
    return rows


# A published loop written in JAX (stax, Flax, Haiku, ...): jaxcnn's kind of loop.
JAX_FRAMEWORKS = ("JAX", "Flax", "Haiku", "Equinox", "Objax", "Trax")


def jax_loop(ref: Any) -> bool:
    """Whether published reference `ref` times a JAX training loop of a small program
    (every model but ResNet-sized ones: those are compared by their device step)."""
    return ref.framework.startswith(JAX_FRAMEWORKS) and not ref.model.startswith("resnet")


def constants_table() -> dict[str, Any]:
    """The committed constants file (jaxcnn/perf/constants.json), read without
    importing jaxcnn (which starts JAX)."""
    import importlib.util
    import json
    from pathlib import Path

    spec = importlib.util.find_spec("jaxcnn")
    folder = Path(next(iter(spec.submodule_search_locations or [])))
    return json.loads((folder / "perf" / "constants.json").read_text())


def loop_words(family: dict[str, Any]) -> str:
    """What a family's fit made of the published runs' loop cost: fitted and kept, or
    left out, with the errors that decided; "" where it has no published observation."""
    choice = family.get("loop_choice")
    if not choice:
        return ""
    errors = (
        f"leave-one-out median error {choice['leave_one_out_median_with']:.0%} with it, "
        f"{choice['leave_one_out_median_without']:.0%} without"
    )
    if choice["kept"]:
        return f"{choice['fitted_s'] * 1e3:.1f} ms per step ({errors})"
    return f"left out ({errors})"


def unit_words(family: dict[str, Any]) -> str:
    """What a family's fit made of its vector units' own efficiency (a GPU's fp32 pipes
    beside its tensor cores): kept, or one efficiency for every unit, with the errors of
    the split that decided; "" where no fitted observation computes on both kinds."""
    choice = family.get("unit_choice")
    if not choice:
        return ""

    def said(side: dict[str, Any]) -> str:
        untested = side["untested_groups"]
        median = "no error" if side["median"] is None else f"median {side['median']:.0%}"
        return f"{median} over {side['observations']}" + (
            f", {', '.join(untested)} untested" if untested else ""
        )

    errors = (
        f"{SPLIT_WORDS[choice['split']]} {said(choice['with'])} with it, "
        f"{said(choice['without'])} without"
    )
    if choice["kept"]:
        return f"{family['vector_efficiency']:.3f} of their peak ({errors})"
    return f"not kept, one efficiency for every unit ({errors})"


SPLIT_WORDS = {"chip": "leave one chip out", "program": "leave one program out"}
# Where a fitted observation's row in the constants file keeps its step as each split
# predicted it, by constants fitted without its group: {split: seconds or None}.
HELD_OUT_STEPS = "held_out_predicted_s"
REGIME_WORDS = {
    "large": "large programs (ResNet-50-sized: 1 GFLOP or more per image)",
    "small": "small programs (the seeds' models: under 1 GFLOP per image)",
}


# What an error band is measured over: a step jaxcnn timed on a device at hand is
# *measured*; a whole-run figure someone else published is *published*. Never one word
# for both.
MEASURED_NOUN = "steps measured here"
PUBLISHED_NOUN = "published figures"
SINGULAR = {MEASURED_NOUN: "step measured here", PUBLISHED_NOUN: "published figure"}


def observed_as(family: dict[str, Any] | None) -> str:
    """What a family's error observations are (MEASURED_NOUN, PUBLISHED_NOUN, or both
    counted): from the sources of the observations its fit used."""
    sources = [
        str(o.get("source", ""))
        for o in (family or {}).get("observations") or ()
        if not o.get("held_out")
    ]
    measured = sum(src.startswith("record ") for src in sources)
    published = len(sources) - measured
    if measured and published:
        return f"observations ({measured} {MEASURED_NOUN}, {published} {PUBLISHED_NOUN})"
    if measured or published:
        return MEASURED_NOUN if measured else PUBLISHED_NOUN
    return "observations"  # a table whose observations are not listed: not named


def band_words(
    error: dict[str, Any] | None, split: str | None = None, noun: str = "observations"
) -> str:
    """A family's error band by `split` (default: its headline split) in words: per
    regime the median and worst error over how many observations (`noun`: what they
    are, `observed_as`), or that the regime has none (unvalidated)."""
    if not error:
        return "no error band (constants not fitted)"
    split = split or error.get("split")
    regimes = ((error.get("splits") or {}).get(split) or {}).get("regimes") or {}
    parts = []
    for regime, words in REGIME_WORDS.items():
        band = regimes.get(regime)
        if band:
            n = band["observations"]
            parts.append(
                f"{words}: median {band['median']:.0%}, worst {band['worst']:.0%} over "
                f"{n} {SINGULAR.get(noun, noun) if n == 1 else noun}"
            )
        else:
            parts.append(f"{words}: none observed, so unvalidated")
    return f"{SPLIT_WORDS.get(split, 'out of sample')}: {'; '.join(parts)}"
