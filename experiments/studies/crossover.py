"""When does the accelerator beat the CPU?

Seed 002: a dense net on MNIST, time vs trainable parameters; the GPU is slower
for small nets. `mlp` 784-n-n-10 (dropout 0.2) for n = 32, 64, ..., 8192 (n=4096
is 20,037,642 params), batch 128, timing only (compile + 20 timed steps, no
training) on synthetic 28x28 data: step time vs params per device. The report finds
the crossover from two devices' records.

Command: python -m experiments.run --study=crossover --device=gpu
Sizes: full everywhere. Smoke: n = 8, 32, batch 16.
Expected: CPU ~40 s (n=8192 is ~74M params, 0.45 s/step); smoke ~3 s;
GPU/TPU < 1 min (a guess).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from experiments.records.workload import Workload
from experiments.studies.base import Context, Study
from experiments.studies.page import (
    LOOP,
    Page,
    Section,
    reference_cpu,
    rows,
    select,
    sitting_spread,
)

if TYPE_CHECKING:  # the annotations only: importing a study imports no pandas
    import pandas as pd

CROSSOVER_WIDTHS = tuple(2**i for i in range(5, 14))  # 32 .. 8192
SWEPT = "mlp"  # the model whose widths the crossover sweeps


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    widths, batch, timing = CROSSOVER_WIDTHS, 128, 20
    if ctx.smoke:
        widths, batch, timing = (8, 32), 16, 3
    common = {"dataset": "synthetic", "batch_size": batch, "epochs": 0, "timing_steps": timing}
    return [
        Workload(
            model=SWEPT, model_overrides={"width": n}, study="crossover", num_devices=1, **common
        )
        for n in widths
    ]


CROSSOVER_RULE = (
    "a width counts as faster on the GPU where its predicted loop step is below the CPU's "
    "measured step of jaxcnn's loop (its step timed alone where it ran no loop); the "
    "crossover is the fewest parameters from which every larger width counts"
)


def cpu_sweep(t: pd.DataFrame, cpu: str | None, extra: str) -> pd.DataFrame:
    """`cpu`'s measured MLP steps at batch 128 of one `extra` (LOOP, or "-": timed alone), one
    a width: the formulation that ran the most widths, the sweep's synthetic data first."""
    mlp = rows(t, quantity="step_s", kind="measured", device=cpu, loop="step", framework="jax",
               batch=128, precision="f32", placement="single", extra=extra)  # fmt: skip
    mlp = mlp[mlp.model.str.startswith(SWEPT)]
    widths = mlp.groupby("formulation").model.nunique().sort_index()
    c = mlp[mlp.formulation == widths.idxmax()] if len(widths) else mlp
    c = c.assign(real=c.dataset != "synthetic").sort_values(["params", "real", "dataset"])
    return c.drop_duplicates("model").drop(columns="real")  # one data set a width


def crossover(t: pd.DataFrame, cpu: str | None, device: str = "gpu-t4") -> tuple[pd.DataFrame, ...]:
    """The MLP width sweep at batch 128: `cpu`'s measured steps (jaxcnn's loop, what a
    predicted loop step is, where it ran; else timed alone) and `device`'s predicted."""
    like = {"batch": 128, "precision": "f32", "placement": "single"}
    loop = cpu_sweep(t, cpu, LOOP)
    c = loop if len(loop) else cpu_sweep(t, cpu, "-")
    quantity = (
        "loop_step_s" if len(rows(t, quantity="loop_step_s", device=device)) else "device_step_s"
    )
    g = rows(t, quantity=quantity, kind="predicted", device=device, **like)
    return c, g[g.model.str.startswith(SWEPT)].sort_values("params")


def paired(c: pd.DataFrame, g: pd.DataFrame) -> pd.DataFrame:
    """The CPU's rows `c` beside a GPU's `g` of the same width and data set (columns
    suffixed _cpu, _gpu), fewest params first."""
    both = c.merge(g, on=["model", "dataset"], suffixes=("_cpu", "_gpu"))
    return both.sort_values("params_cpu").reset_index(drop=True)


def chip_name(device: str) -> str:
    """A verdict's name for a device: a target's chip ("gpu-t4" -> "T4"), else the device."""
    return device.removeprefix("gpu-").upper() if device.startswith("gpu-") else device


def crossover_verdict(
    c: pd.DataFrame, g: pd.DataFrame, how: str = ""
) -> tuple[str, list[dict[str, Any]]]:
    """CROSSOVER_RULE over `crossover`'s rows: the verdict and the two rows of its width
    (`how`, how the sides were measured, said instead of the widths' count)."""
    both = paired(c, g)
    if not len(both):
        return "", []
    name = chip_name(str(g.device.iloc[0]))
    faster = (both.value_gpu < both.value_cpu).to_numpy()
    slower = [int(p) for p in both.params_cpu[~faster]]
    tail = _faster_from(faster)
    also = f"; {how}" if how else ""
    if tail >= len(faster):
        return f"{name} slower at the widest MLP ({slower[-1]:,} params{also})", []
    r = both.iloc[tail]
    if not slower:
        text = f"{name} faster at every width ({int(r.params_cpu):,} params and up{also})"
    else:
        count = "" if how else f"{int(faster.sum())} of {len(both)} widths; "
        slow = ", ".join(f"{p:,}" for p in slower)
        text = f"{name} faster from {int(r.params_cpu):,} params on ({count}slower at {slow}{also})"
    chosen = [c[c.id == r.id_cpu].iloc[0].to_dict(), g[g.id == r.id_gpu].iloc[0].to_dict()]
    return text, chosen


def _faster_from(faster: Any) -> int:
    """The index of the narrowest width from which every wider one is faster (the
    crossover's rule), over widths in order; their count where the widest is slower."""
    return len(faster) - (faster[::-1].argmin() if not faster.all() else len(faster))


def sitting_crossovers(
    t: pd.DataFrame, sweeps: list[tuple[pd.DataFrame, ...]]
) -> list[dict[str, Any]]:
    """MEASURED_CROSSOVER_RULE read again in each earlier sitting of each GPU of `sweeps`
    (measured_crossover's), against the CPU rows the newest verdict uses: per sitting its
    device, extra, when, params (None: the widest slower), fewest runs per width, rows."""
    out = []
    for c, g in sweeps:
        device = g.device.iloc[0]
        earlier = rows(t, quantity="step_s", selection="earlier-sitting", device=device,
                       batch=128, precision="f32", placement="single")  # fmt: skip
        earlier = earlier[earlier.model.str.startswith(SWEPT)]
        for extra, s in earlier.groupby("extra", sort=True):
            both = paired(c, s)
            if len(both) < 3:
                continue
            tail = _faster_from((both.value_gpu < both.value_cpu).to_numpy())
            params = int(both.params_cpu.iloc[tail]) if tail < len(both) else None
            runs = int(both.n_gpu.fillna(1).min())
            out.append({"device": device, "extra": extra, "when": when_of(extra), "params": params,
                        "runs": runs, "rows": s[s.model.isin(both.model)]})  # fmt: skip
    return out


def when_of(extra: str) -> str:
    """When an earlier sitting began and how its loop was timed (its `extra`'s last
    parenthesis)."""
    return extra.split("(")[-1].rstrip(")")


def _stacked(t: pd.DataFrame, frames: list[pd.DataFrame]) -> pd.DataFrame:
    """`frames` one under another; none: no rows of `t`."""
    import pandas as pd  # drawing the page, never listing the study

    return pd.concat(frames) if frames else t.iloc[:0]


def _earlier(t: pd.DataFrame) -> list[dict[str, Any]]:
    return sitting_crossovers(t, measured_crossover(t, reference_cpu(t)))


def earlier_sittings(t: pd.DataFrame) -> pd.DataFrame:
    return _stacked(t, [f["rows"] for f in _earlier(t)]).sort_values(["extra", "params"])


def sitting_ratios(t: pd.DataFrame) -> pd.DataFrame:
    """Each measured GPU's MLP sweep over the reference CPU's, jaxcnn's loop both sides:
    the newest sitting's ratios (loop-vs-loop) and each earlier sitting's."""
    cpu = reference_cpu(t)
    found = rows(t, quantity="speedup", kind="measured", platform="gpu", batch=128,
                 precision="f32", selection=["loop-vs-loop", "earlier-sitting"])  # fmt: skip
    found = found[found.model.str.startswith(SWEPT)
                  & found.extra.str.startswith(f"{LOOP} vs {cpu}'s on ")]  # fmt: skip
    # the sweeps the verdicts read (each GPU's, on its data), not a lone width elsewhere
    swept = {(g.device.iloc[0], d) for _, g in measured_crossover(t, cpu) for d in set(g.dataset)}
    found = found.loc[[k in swept for k in zip(found.device, found.dataset, strict=True)]]
    return found.sort_values(["device", "extra", "params"])


def earlier_verdict(t: pd.DataFrame) -> str:
    said = [
        f"{f['device']}, {f['when']}: "
        + (f"faster from {f['params']:,} params on" if f["params"] else "slower at the widest")
        + f" ({f['runs']} run{'s' if f['runs'] > 1 else ''} per width)"
        for f in _earlier(t)
    ]
    return "; ".join(said) or "No earlier sitting ran the sweep."


def undecided_widths(c: pd.DataFrame, g: pd.DataFrame, noise: float = 1.0) -> list[int] | None:
    """The widths' params whose predicted-over-measured ratio lies inside the band's worst
    times `noise` (the measured side's sitting spread): undecided. None where one has no
    band."""
    both = paired(c, g)
    worst = both.band_worst_gpu.astype(float)
    if not len(both) or worst.isna().any():
        return None
    ratio = both.value_gpu / both.value_cpu
    inside = ratio.where(ratio > 1, 1 / ratio) < worst * noise
    return [int(p) for p in both.params_cpu[inside]]


def undecided_below(c: pd.DataFrame, g: pd.DataFrame, noise: float = 1.0) -> int | None:
    """The fewest params from which every width is outside its band; None where no band,
    no width is inside, or the widest is."""
    inside = undecided_widths(c, g, noise)
    if not inside:
        return None
    wider = [int(p) for p in paired(c, g).params_cpu if p > inside[-1]]
    return wider[0] if wider else None


MEASURED_CROSSOVER_RULE = (
    "a width counts as faster on the GPU where its measured step of jaxcnn's loop is below "
    "the CPU's, on the same data; the crossover is the fewest parameters from which every "
    "larger width counts"
)


def measured_crossover(t: pd.DataFrame, cpu: str | None) -> list[tuple[pd.DataFrame, ...]]:
    """The MLP sweep at batch 128 in jaxcnn's loop on both sides: per GPU of three widths
    or more, (`cpu`'s rows, the GPU's), one a width, each CPU row on its GPU row's data."""
    like = {"batch": 128, "precision": "f32", "placement": "single", "extra": LOOP}
    loops = rows(t, quantity="step_s", kind="measured", loop="step", **like)
    loops = loops[loops.model.str.startswith(SWEPT)]
    # one row a width: the crossover study's synthetic data first, as it ran them
    loops = loops.assign(real=loops.dataset != "synthetic").sort_values(["params", "real"])
    c = loops[loops.device == cpu]
    if len(c):  # the CPU's formulation that ran the most widths, as `crossover` takes
        c = c[c.formulation == c.groupby("formulation").model.nunique().idxmax()]
    out = []
    for device in sorted(set(loops[loops.platform == "gpu"].device)):
        g = loops[loops.device == device].drop_duplicates("model").drop(columns="real")
        both = g.set_index(["model", "dataset"]).index
        mine = c[c.set_index(["model", "dataset"]).index.isin(both)].drop(columns="real")
        if len(g) >= 3 and len(mine):
            out.append((mine, g))
    return out


def predicted_sweep(t: pd.DataFrame) -> pd.DataFrame:
    return _stacked(t, list(crossover(t, reference_cpu(t))))


def cpu_sittings(t: pd.DataFrame, c: pd.DataFrame) -> pd.DataFrame:
    """How far the CPU of sweep `c` moves between sittings (page.sitting_spread)."""
    return sitting_spread(t, c.device.iloc[0])


def undecided_range(t: pd.DataFrame, c: pd.DataFrame, g: pd.DataFrame) -> dict[str, Any]:
    """Where `g` against `c` is undecided: inside its band's worst times the CPU's sitting
    spread (`noise`, its `moves` row or None). `below`: the fewest params from which every
    width is decided; `every`: every width undecided (True), the widest (False), or None."""
    moves = cpu_sittings(t, c) if len(c) else c
    noise = float(moves.hi.iloc[0]) if len(moves) else 1.0
    inside = undecided_widths(c, g, noise) or []
    widest = bool(inside) and inside[-1] == int(g.params.max())
    return {"below": undecided_below(c, g, noise), "noise": noise,
            "moves": moves.iloc[0].to_dict() if len(moves) else None,
            "every": (len(inside) == len(g)) if widest else None}  # fmt: skip


def predicted_verdict(t: pd.DataFrame) -> str:
    c, g = crossover(t, reference_cpu(t))
    text, _ = crossover_verdict(c, g)
    u = undecided_range(t, c, g)
    within = "its band's worst" + (
        f" times the CPU's sitting spread, {u['noise']:.3g}x" if u["moves"] else ""
    )
    if u["below"]:
        text += f"; undecided below {u['below']:,} params (inside {within})"
    elif u["every"] is not None:
        text += f"; undecided at {'every' if u['every'] else 'its widest'} width (inside {within})"
    return f"{text or 'No verdict: no width on both sides.'} (the rule: {CROSSOVER_RULE})"


def measured_sweeps(t: pd.DataFrame) -> pd.DataFrame:
    return _stacked(t, [f for pair in measured_crossover(t, reference_cpu(t)) for f in pair])


def measured_verdict(t: pd.DataFrame) -> str:
    said = [crossover_verdict(c, g)[0] for c, g in measured_crossover(t, reference_cpu(t))]
    none = "No verdict: no GPU ran jaxcnn's loop over the widths."
    text = "; ".join(s for s in said if s) or none
    return f"{text} (the rule: {MEASURED_CROSSOVER_RULE})"


STUDY = Study(
    "crossover",
    workloads=workloads,
    question="When does the accelerator beat the CPU, by trainable parameters? (seed 002)",
    page=Page("Seed 002's MLP: step time against trainable parameters", [
        Section("MLP width sweep, batch 128: the CPU's measured step of jaxcnn's loop "
                "against the T4's predicted loop step", predicted_sweep,
                "model dataset device kind quantity value spread how band",
                verdict=predicted_verdict),
        Section("The same sweep as jaxcnn's loop ran it on both sides (measured)", measured_sweeps,
                "model dataset device value spread how", verdict=measured_verdict),
        Section("The same sweep in each earlier sitting of the GPU (measured), against the "
                "same CPU rows: the verdict read again", earlier_sittings,
                "model dataset device value spread how", verdict=earlier_verdict),
        Section("The CPU's loop step over the GPU's per width, in each sitting of the GPU "
                "(the plot's right panel; above 1x the GPU faster)", sitting_ratios,
                "model dataset device value how"),
        Section("How far a loop step moves from one run to another, and from one sitting "
                "to another, per chip: the yardsticks of a margin measured once per width",
                select(quantity="run_spread"),
                "device model value spread how"),
    ]),
)  # fmt: skip
