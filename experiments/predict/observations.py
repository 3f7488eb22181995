"""The fit's observations: every measured record carrying kernels and every published
reference a compile-only record matches, as jaxcnn.perf.fit Observations; the constants
no observation pins, with their reason; the host's measured side of a step; the fit's
summary. `python -m experiments.cli.fit` runs the fit and says what it does."""

from __future__ import annotations

import statistics
import warnings
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from experiments import records
from experiments.predict import references
from experiments.predict import shown as predictions
from experiments.records import CompileRecord, EnsembleRecord, Record, TrainRecord, took_turns
from experiments.records.workload import precision_of
from jaxcnn import targets
from jaxcnn.errors import DataError
from jaxcnn.perf import fit as fit_lib
from jaxcnn.perf import hlo, price
from jaxcnn.perf import host as host_lib
from jaxcnn.perf import rates as rates_lib
from jaxcnn.perf.fit import (
    CACHE,
    OWN_RATE_KINDS,
    PER_KIND_OVERHEADS,
    Observation,
    fit_platform,
    version_of,
)

# The published per-kernel cost the accelerators' fixed cost is held at: what a small
# kernel costs launched one after another, its own run included (experiments/
# published_overheads.json).
LAUNCH_SOURCE = "https://cuda.juliagpu.org/dev/usage/graphs/"


def fixed_constants(
    loaded: Sequence[Record] = (),
) -> dict[str, dict[str, tuple[float, str]]]:
    """Per platform, the constants not fitted: (value, why). The published references are
    ResNet-50-sized programs whose kernels take milliseconds, so they cannot pin a fixed
    cost per kernel of microseconds (a fit trades it for the published runs' loop cost):
    - on a GPU it is the published cost of a CUDA launch;
    - a platform with no published figure whose compiler estimates its own programs'
      time (libtpu: `compiler_estimate_s` in the compile records among `loaded`) is held
      at the fixed cost per op that compiler's estimates imply (`compiler_op_cost`): a
      TPU does not launch its ops one by one from a host, so no CUDA figure applies;
    - the CPU's is fitted to this machine's measured steps, which are small models."""
    launch = next((o for o in references.load_overheads() if o.source_url == LAUNCH_SOURCE), None)
    if launch is None:
        raise DataError(
            f"{references.OVERHEADS_PATH.name} has no row from {LAUNCH_SOURCE}: the fit takes "
            "a GPU's per-kernel cost from it"
        )
    published = f"published: {launch.what} ({launch.source_url})"
    held = {"gpu": {"kernel_overhead_s": (launch.seconds, published)}}
    for platform, (seconds, programs) in compiler_op_cost(loaded).items():
        held.setdefault(platform, {})["kernel_overhead_s"] = (
            seconds,
            f"the compiler's own cost model: the median, over {programs} small programs "
            "compiled for it, of (its estimate of the program's time - the program's "
            "kernels at their full peak and bandwidth) / its ops; no published figure",
        )
    return held


def compiler_op_cost(loaded: Sequence[Record]) -> dict[str, tuple[float, int]]:
    """jaxcnn.perf.fit.compiler_op_cost over the compile records among `loaded` whose
    compiler estimated the program's time (`compiler_estimate_s`, from its cost
    analysis)."""
    programs = []
    for r in loaded:
        if not (isinstance(r, CompileRecord) and r.kernels and r.prediction_bound):
            continue
        estimate = r.prediction_bound.compiler_estimate_s
        if not estimate:
            continue
        programs.append(
            (
                r.device.platform,
                hlo.from_summary(r.kernels),
                predictions.rates_of(r),
                estimate,
                predictions.program_steps(r),
                r.workload.batch_size // r.device.count,
            )
        )
    return fit_lib.compiler_op_cost(programs)


# --- Observations ----------------------------------------------------------------------


def measured_observations(
    loaded: Sequence[Record], host: dict[str, Any] | None = None
) -> list[Observation]:
    """The measured records (status ok: a step time) that carry their step's kernels,
    but a paired run's sides (no step timed alone) and, with a warning naming it, one
    whose kernels or rates cannot be priced; a CPU's priced at the best matmul ceiling its
    machine's runs among `loaded` measured (predictions.machine_ceilings), each with its
    host side (predictions.host_of, the dispatch `host` gives where the record measured
    none)."""
    found = []
    ceilings = predictions.machine_ceilings(loaded)
    for r in loaded:
        if not (isinstance(r, TrainRecord) and r.status == "ok" and r.kernels):
            continue
        if took_turns(r):  # its blocks waited on another process's: no step timed alone
            continue
        platform = r.device.platform
        try:  # what the reader's checks let through but cannot be priced
            rates = predictions.rates_of(r, ceilings)
            kernels = tuple(hlo.from_summary(r.kernels))
            if not rates.can_price:
                raise ValueError("its run measured no f32 peak or no bandwidth to price it at")
        except ValueError as e:
            warnings.warn(f"record {r.run_id}: left out of the fit ({e})", stacklevel=2)
            continue
        steps = predictions.program_steps(r)
        label = _workload_label(r)
        side = predictions.host_of(r, {"host": host or {}})
        found.append(
            Observation(
                label=label,
                platform=platform,
                kernels=kernels,
                rates=rates,
                batch_per_device=r.workload.batch_size // r.device.count,
                measured_s=r.step_time_s.median * steps,
                source=f"record {r.run_id}",
                chip=predictions.chip_of(r),
                program=label,
                steps=steps,
                host_s=(side or {}).get("host_s", 0.0) * steps,
            )
        )
    return found


def _workload_label(r: TrainRecord) -> str:
    w = r.workload
    width = w.model_overrides.get("width")
    model = w.model + (f" n={width}" if width else "")
    formulation = (r.formulation.name if r.formulation else None) or w.formulation
    return (
        f"{r.device.kind or r.device.platform}: {model}, batch {w.batch_size}, "
        f"{precision_of(w)}, {formulation}, {r.loop or w.loop} loop"
    )


def reference_observations(
    refs: Sequence[references.Reference],
    loaded: Sequence[Record],
    host: dict[str, Any] | None = None,
) -> tuple[list[Observation], list[tuple[references.Reference, str]]]:
    """(observations of the references a compile record matches, [(reference, why it has
    none)]), each with the host side of jaxcnn's step on its chip (`host`'s dispatch)."""
    found, missing = [], []
    for ref in refs:
        why = predictions.unpredictable(ref)
        if why is not None:
            missing.append((ref, why))
            continue
        r = predictions.match_reference(ref, loaded)
        if r is None:
            missing.append(
                (ref, "no compile record with kernels: " + predictions.compile_command(ref))
            )
            continue
        target = targets.get(r.target.name)
        device = predictions.device_of(r)
        # The chips' batch over the devices it ran on: half a v2 chip's on each of its
        # two cores, all of it on tpu-v2-1's one.
        per_device = ref.batch_per_chip * target.chips // target.devices
        seconds_per_step = ref.batch_per_chip / ref.images_per_s_per_chip
        found.append(
            Observation(
                label=f"{ref.chip}: {ref.model}, batch {ref.batch_per_chip}/chip, "
                f"{ref.precision} ({ref.framework})",
                platform=target.platform,
                kernels=tuple(hlo.from_summary(r.kernels)),
                rates=rates_lib.of_device(device, target.devices_per_chip),
                batch_per_device=per_device,
                measured_s=seconds_per_step,
                source=f"reference {ref.id}",
                held_out=ref.held_out,
                published=True,
                chip=ref.chip,
                program=f"record {r.run_id}",
                host_s=(predictions.host_of(r, {"host": host or {}}) or {}).get("host_s", 0.0),
            )
        )
    return found, missing


def fit(loaded: Sequence[Record], refs: Sequence[references.Reference]) -> dict[str, Any]:
    """The constants file's content: every platform's fit, and the references no compile
    record matches yet (with the command that would make one)."""
    host = host_constants(loaded)
    measured = measured_observations(loaded, host)
    matched, missing = reference_observations(refs, loaded, host)
    by_platform: dict[str, list[Observation]] = {"cpu": [], "gpu": [], "tpu": []}
    for o in measured + matched:
        by_platform.setdefault(o.platform, []).append(o)
    fixed = fixed_constants(loaded)
    families = {p: fit_platform(p, obs, fixed.get(p)) for p, obs in sorted(by_platform.items())}
    table = {
        "version": version_of(families),
        "procedure": "experiments/predict/observations.py",
        "families": families,
        "host": host,
        "unmatched_references": [{"id": r.id, "why": why} for r, why in missing],
    }
    return {**table, "loop_error": loop_error(loaded, refs, table)}


def loop_error(
    loaded: Sequence[Record],
    refs: Sequence[references.Reference],
    table: dict[str, Any],
) -> dict[str, Any]:
    """How far the predicted loop step is from measured loops, per platform:
    - `loops`: jaxcnn's loops timed on an accelerator's own client (the runs of each
      configuration in the newest one's sitting, records.one_sitting: the median of
      their loop steps), each predicted held out
      (predictions.held_out_loop: its host parts from the other programs' loops, its
      device step from the fit without its chip), and per regime the band of their
      factors max(p/a, a/p) (`regimes`): how well the loop is predicted on the hosts
      those loops ran on;
    - `published`: the published JAX loops of small programs (held out of every fit),
      each predicted by the loop step of its compiled program, and their band
      (`published_band`): how well it is predicted on other hosts, the band a loop step
      is shown with (jaxcnn.perf.predict.loop_band).
    Each band gives how many the prediction was the faster of."""
    runs: dict[tuple[str, str], list[TrainRecord]] = defaultdict(list)
    for r in sorted(loaded, key=records.recorded_at_or_oldest):  # a wrong clock never outranks
        if r.status == "ok" and _timed_a_training_loop(r) and r.host_loop.loop_step_s:
            runs[(r.device.kind or r.device.platform, _program(r))].append(r)
    out: dict[str, Any] = {}
    for ran in runs.values():
        ran = records.one_sitting(ran)
        r = ran[-1]  # the newest run's workload and host parts are predicted
        held = predictions.held_out_loop(r, table)
        if not held:
            continue
        found = out.setdefault(r.device.platform, {"loops": [], "regimes": {}})
        found["loops"].append(
            {
                "record": r.run_id,
                "records": [x.run_id for x in ran],
                "host": r.device.kind or r.device.platform,
                "program": _program(r),
                "regime": held["regime"],
                # every run of it: one run's loop step moves by a third from run to run
                "measured_s": statistics.median(x.host_loop.loop_step_s for x in ran),
                "predicted_s": held["loop_step_s"],
            }
        )
    for v in predictions.versus_published(loaded, refs, table):
        if v.get("compared") != "loop_step_s":
            continue
        ref = v["reference"]
        found = out.setdefault(v["record"].device.platform, {"loops": [], "regimes": {}})
        found.setdefault("published", []).append(
            {
                "reference": ref.id,
                "host": ref.chip,
                "regime": v["block"]["regime"],
                "measured_s": ref.batch_per_chip / ref.images_per_s_per_chip,
                "predicted_s": v["block"]["loop_step_s"],
            }
        )
    for found in out.values():
        found["loops"].sort(key=lambda c: (c["host"], c["program"], c["record"]))
        for name in sorted({c["regime"] for c in found["loops"]}):
            found["regimes"][name] = _loop_band([c for c in found["loops"] if c["regime"] == name])
        published = sorted(found.get("published", []), key=lambda c: c["reference"])
        found["published"] = published
        found["published_band"] = {
            name: _loop_band([c for c in published if c["regime"] == name])
            for name in sorted({c["regime"] for c in published})
        }
    return out


def _timed_a_training_loop(record: Record) -> bool:
    """Whether `record` timed jaxcnn's step loop as a training run of one model makes it
    (jaxcnn.perf.host.like_training): an ensemble's loop is K models' steps at once,
    under the same model and batch."""
    return (
        isinstance(record, TrainRecord)
        and not isinstance(record, EnsembleRecord)
        and not took_turns(record)  # a paired side: another process ran beside it
        and record.host_loop is not None
        and host_lib.like_training(record.host_loop.model_dump(exclude_unset=True))
    )


def _program(record: TrainRecord) -> str:
    """What a loop ran: its model, overrides and batch, data, precision and loop (one check
    per program and host, of every run of it)."""
    w = record.workload
    key = host_lib.host_loop_key(w.model_dump(exclude_unset=True))
    # the loop it timed (fit's step loop), whichever loop the run trained in
    timed = record.host_loop.loop or "step"
    return f"{key}, {w.dataset or '-'}, {precision_of(w)}, loop {timed}"


def _loop_band(checks: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The band of predicted against measured loop steps `checks`: the median and worst
    factor max(p/a, a/p), how many, how many the prediction was the faster of, and
    where they ran (hosts, or chips for published rows)."""
    factors = [
        max(c["predicted_s"] / c["measured_s"], c["measured_s"] / c["predicted_s"]) for c in checks
    ]
    return {
        "median": statistics.median(factors),
        "worst": max(factors),
        "observations": len(checks),
        "faster": sum(1 for c in checks if c["predicted_s"] < c["measured_s"]),
        "hosts": sorted({c["host"] for c in checks}),
    }


def host_constants(loaded: Sequence[Record]) -> dict[str, Any]:
    """The host's side of a step as this project's runs measured it, given to every step
    predicted for a chip not at hand: on the CPU's client (the section's top level), and
    on each accelerator's own client where a run measured one (`accelerators`, by
    platform; jaxcnn.perf.host.section picks the one a platform is priced with). Each:
    per placement, one call's round trip (records' `dispatch_s`: a call of the placed
    step doing no work), the median of the records' medians and how many; per model and
    global batch (jaxcnn.perf.host.host_loop_key), jaxcnn's step loop on the host
    (`loop`: the newest measured record's `host_loop` that ran as a training run does,
    jaxcnn.host_lib.like_training, its run id beside it, and the convolution kernels a
    step of its program launches where the record kept its kernels)."""
    by_platform: dict[str, tuple[dict[str, list[float]], dict[str, dict[str, Any]]]] = {}
    kinds: dict[str, set[str]] = {}
    for r in sorted(loaded, key=records.recorded_at_or_oldest):  # a wrong clock never outranks
        # only a train run of one model times its call and loop (_timed_a_training_loop)
        if not isinstance(r, TrainRecord) or isinstance(r, EnsembleRecord) or took_turns(r):
            continue
        platform = r.device.platform
        found, loops = by_platform.setdefault(platform, ({}, {}))
        median = r.dispatch_s.median if r.dispatch_s else None
        if median:
            found.setdefault(r.workload.strategy, []).append(median)
        if _timed_a_training_loop(r) and r.status == "ok":
            key = host_lib.host_loop_key(r.workload.model_dump(exclude_unset=True))
            loops[key] = {**r.host_loop.model_dump(exclude_unset=True), "record": r.run_id}
            if r.kernels:  # what its dispatch launched (jaxcnn.perf.host.dispatch_line)
                loops[key]["convs_per_step"] = predictions.convs_of(r)
            kinds.setdefault(platform, set()).add(r.device.kind or platform)

    def one(platform: str) -> dict[str, Any]:
        found, loops = by_platform.get(platform, ({}, {}))
        return {
            "dispatch_s": {s: statistics.median(xs) for s, xs in sorted(found.items())},
            "records": {s: len(xs) for s, xs in sorted(found.items())},
            "loop": dict(sorted(loops.items())),
        }

    accelerators = {
        platform: {
            **one(platform),
            "basis": f"measured on {', '.join(sorted(kinds[platform]))}: jaxcnn's step loop "
            "on that client, its dispatch, kernel launches and copies included",
        }
        for platform in sorted(by_platform)
        if platform != "cpu" and one(platform)["loop"]
    }
    return {
        **one("cpu"),
        "basis": "measured here: records' dispatch_s (a call of the placed step doing no "
        "work, on the step's arguments), the median per placement, and the newest "
        "record's host_loop (jaxcnn's step loop, its host parts timed by its own code) "
        "per model and batch, on the JAX and CPU that ran them; a GPU's or TPU's "
        "runtime adds its own where no run measured jaxcnn's loop on it (accelerators)",
        **({"accelerators": accelerators} if accelerators else {}),
    }


# --- The command -------------------------------------------------------------------------


def summary(result: dict[str, Any]) -> str:
    lines = [f"constants version {result['version']}"]
    for platform, f in result["families"].items():
        band = "; ".join(
            predictions.band_words(f["error"], split, predictions.observed_as(f))
            for split in predictions.SPLIT_WORDS
        )
        elemental = f.get("elemental_conv_efficiency")
        loops = "" if elemental is None else f", convolutions as loops {elemental:.3f} of peak"
        loop = predictions.loop_words(f)
        loops += f", published runs' loop {loop}" if loop else ""
        units = predictions.unit_words(f)
        loops += f", vector units' own efficiency {units}" if units else ""
        kinds = [
            f"{name.removesuffix('_overhead_s')} {f[name] * 1e6:.2f} us"
            for name in PER_KIND_OVERHEADS
            if f.get(name) is not None
        ]
        loops += f" (per kind: {', '.join(kinds)})" if kinds else ""
        cache = f.get(CACHE)
        if cache is not None:
            loops += (
                f", kernels of at most {price.CACHE_BYTES // 1024} KiB at {cache:.2f} x "
                "the measured bandwidth"
            )
        for name, label in zip(
            OWN_RATE_KINDS, ("library calls", "16-bit float fusions"), strict=True
        ):
            if f.get(name) is not None:
                loops += f", {label}' bytes at {f[name]:.3f} of it"
        lines.append(
            f"{platform}: compute efficiency {f['compute_efficiency']:.3f}, memory efficiency "
            f"{f['memory_efficiency']:.3f}, {f['kernel_overhead_s'] * 1e6:.2f} us per kernel"
            f"{loops} ({f['basis']}); {band}"
        )
    for m in result["unmatched_references"]:
        lines.append(f"unmatched reference {m['id']}: {m['why']}")
    return "\n".join(lines)
