"""The seeds' fifteen questions, each answered from the table of figures: one number or
verdict, how it is known, its band, and the figure ids it rests on. No record is read here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from experiments.report.fmt import fmt

SEED_MODEL = "catsdogs_cnn"
MNIST_MODEL = "mnist_cnn"
SEED_MODELS = [SEED_MODEL, MNIST_MODEL, "lenet5_keras", "mlp"]
Row = dict[str, Any] | None


@dataclass
class Answer:
    number: int
    seeds: str
    question: str
    answer: str
    known: str  # M, C, P, published, or several ("M / P")
    band: str
    page: str
    ids: list[str] = field(default_factory=list)


@dataclass
class Said:
    """What a question's function found: its words, the rows they quote, and the band
    when it is not the first predicted row's."""

    text: str
    rows: list[Row] = field(default_factory=list)
    band: str | None = None


def rows(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """The rows whose columns equal `where`'s values (a list: any of them)."""
    mask = pd.Series(True, index=table.index)
    for column, value in where.items():
        many = isinstance(value, (list, tuple, set))
        mask &= table[column].isin(list(value)) if many else table[column] == value
    return table[mask]


def one(table: pd.DataFrame, **where: Any) -> Row:
    """The one row matching `where`, or None (none, or a filter too loose to pick one)."""
    found = rows(table, **where)
    return found.iloc[0].to_dict() if len(found) == 1 else None


def reference_cpu(table: pd.DataFrame) -> str | None:
    """The CPU the answers quote: the named CPU with the most measured steps."""
    cpu = rows(table, quantity="step_s", kind="measured", platform="cpu")
    named = cpu[~cpu.device.str.contains("not recorded")]
    counts = (named if len(named) else cpu).device.value_counts()
    return str(counts.index[0]) if len(counts) else None


def cpu_with(table: pd.DataFrame, cpu: str | None, **where: Any) -> str | None:
    """`cpu` where it has rows matching `where`, else the CPU with the most such rows:
    an answer quotes the reference CPU where it can, and names another where not."""
    found = rows(table, platform="cpu", **{"kind": "measured", **where})
    if cpu is not None and (found.device == cpu).any():
        return cpu
    counts = found.device.value_counts()
    return str(counts.index[0]) if len(counts) else cpu


def elsewhere(on: str | None, cpu: str | None) -> str:
    """ " (on X)" where an answer's CPU is not the reference CPU."""
    return (
        f" (on {on.replace(', CPU model not recorded', ', unnamed CPU')})"
        if on and on != cpu
        else ""
    )


def band_words(r: Row) -> str:
    """A prediction's band as the pages show it, or "unvalidated"."""
    if r is None or r["kind"] != "predicted":
        return "-"
    if pd.isna(r.get("band_median")):
        why = str(r.get("band_quantity") or "")
        return why if why.startswith("unvalidated (") else "unvalidated"
    median, worst = r["band_median"], r["band_worst"]
    return f"x{median:.2f} median, x{worst:.2f} worst, n={r['band_n']} ({r['band_split']})"


def kinds(rs: list[Row]) -> str:
    short = {"measured": "M", "compiled": "C", "predicted": "P", "published": "published"}
    return " / ".join(dict.fromkeys(short[r["kind"]] for r in rs if r)) or "-"


def _first_band(rs: list[Row]) -> str:
    words = [band_words(r) for r in rs if r and r["kind"] == "predicted"]
    return words[0] if words else "-"


def predicted(t: pd.DataFrame, quantity: str, device: str, model: str, batch: int) -> Row:
    return one(
        t, quantity=quantity, kind="predicted", device=device, model=model, batch=batch,
        precision="f32", placement="single",
    )  # fmt: skip


def accelerator_step(t: pd.DataFrame, device: str, model: str, batch: int) -> Row:
    """The loop step where predicted, else the device step (its quantity says which)."""
    return predicted(t, "loop_step_s", device, model, batch) or predicted(
        t, "device_step_s", device, model, batch
    )


def cpu_step(t: pd.DataFrame, cpu: str | None, model: str, batch: int) -> Row:
    """The like-for-like CPU step (the xla formulation in the step loop, one device) on
    real data where it ran on it, else on synthetic data."""
    found = rows(
        t, quantity="step_s", kind="measured", device=cpu, model=model, batch=batch,
        precision="f32", formulation="xla", loop="step", framework="jax", placement="single",
        extra="-",
    )  # fmt: skip
    real = found[found.dataset != "synthetic"]
    found = real if len(real) else found
    return found.iloc[0].to_dict() if len(found) == 1 else None


def published(t: pd.DataFrame, ref: str) -> Row:
    return one(t, kind="published", extra=ref)


def q_oom(t: pd.DataFrame, cpu: str | None) -> Said:
    cells = [("gpu-mx150", 16, True), ("gpu-mx150", 32, False), ("gpu-t4", 128, True)]
    words, picked, agree = [], [], 0
    for device, batch, seed_fits in cells:
        at = {"device": device, "model": SEED_MODEL, "batch": batch, "precision": "f32"}
        verdict = one(t, quantity="fits", placement="single", **at)
        memory = one(t, quantity="memory_bytes", placement="single", **at)
        if verdict is not None:
            agree += bool(verdict["value"]) == seed_fits
            picked += [verdict, memory]
            fits = "fits" if verdict["value"] else "OOM"
            words.append(f"{device[4:].upper()} b{batch} {fits} ({fmt(memory)})")
    if not words:
        return Said("not compiled yet: python -m experiments.run --study=targets")
    head = f"{agree} of {len(words)} as the seed saw: "
    return Said(head + "; ".join(words), picked, "the compiler's own memory analysis")


def q_seed_step(t: pd.DataFrame, cpu: str | None) -> Said:
    mx = accelerator_step(t, "gpu-mx150", SEED_MODEL, 16)
    t4 = accelerator_step(t, "gpu-t4", SEED_MODEL, 128)
    on = cpu_with(t, cpu, quantity="step_s", model=SEED_MODEL, batch=16)
    c = cpu_step(t, on, SEED_MODEL, 16)
    pm, pt = published(t, "seed000-mx150-catsdogs"), published(t, "seed000-t4-catsdogs")
    parts = [f"MX150 b16 {fmt(mx)} (seed {fmt(pm)})" if mx else ""]
    parts.append(f"T4 b128 {fmt(t4)} (seed {fmt(pt)}, Drive reads)" if t4 else "")
    parts.append(f"CPU b16 {fmt(c)}{elsewhere(on, cpu)}" if c else "")
    return Said("; ".join(p for p in parts if p) or "no figures yet", [mx, t4, c, pm, pt])


def q_seed_epoch(t: pd.DataFrame, cpu: str | None) -> Said:
    def epoch(device: str | None, batch: int, kind: str) -> Row:
        found = rows(t, quantity="epoch_s", kind=kind, device=device, model=SEED_MODEL,
                     batch=batch, precision="f32", placement="single")  # fmt: skip
        if kind == "measured":
            found = found[(found.formulation == "xla") & (found.loop == "step")]
        return found.iloc[0].to_dict() if len(found) == 1 else None

    mx, t4 = epoch("gpu-mx150", 16, "predicted"), epoch("gpu-t4", 128, "predicted")
    on = cpu_with(t, cpu, quantity="epoch_s", model=SEED_MODEL, batch=16)
    c = epoch(on, 16, "measured")
    s_cpu = published(t, "seed000-cpu-catsdogs-epoch")
    s_mx = published(t, "seed000-mx150-catsdogs-epoch")
    s_t4 = published(t, "seed000-t4-catsdogs-epoch")
    parts = [
        f"{name} {fmt(mine) if mine else 'none'} (seed{' ETA' if name == 'CPU' else ''} {fmt(s)})"
        for name, mine, s in (("CPU", c, s_cpu), ("MX150", mx, s_mx), ("T4", t4, s_t4))
    ]
    parts[0] = parts[0].replace("CPU ", f"CPU{elsewhere(on, cpu)} ", 1)
    return Said("; ".join(parts), [c, mx, t4, s_cpu, s_mx, s_t4])


def q_accuracy(t: pd.DataFrame, cpu: str | None) -> Said:
    acc = rows(t, quantity="test_accuracy", kind="measured", model=MNIST_MODEL, precision="f32")
    acc = acc[acc.extra.str.endswith(" epochs") & (acc.selection == "newest-trained")]
    picked = [g.iloc[-1].to_dict() for _, g in acc.groupby("platform")]
    parts = [f"{r['platform']}: {fmt(r)} ({r['extra']}, {r['dataset']})" for r in picked]
    missing = [p.upper() for p in ("gpu", "tpu") if p not in set(acc.platform)]
    if missing:
        parts.append(f"no {'/'.join(missing)} run yet")
    return Said("; ".join(parts), picked)


def speedups(t: pd.DataFrame, device: str, model: str, batch: int, cpu: str | None) -> list[Row]:
    """[like for like, against the CPU at its best] of `device`'s predicted step (the
    loop step where predicted) over `cpu`'s."""
    s = rows(t, quantity="speedup", device=device, model=model, batch=batch, precision="f32",
             placement="single")  # fmt: skip
    quantity = "loop_step_s" if s.extra.str.startswith("loop_step_s").any() else "device_step_s"
    base = f"{quantity} vs {cpu}"
    return [one(s, selection="like-for-like", extra=base), one(s, extra=f"{base} at its best")]


def small_band(t: pd.DataFrame, platform: str = "gpu") -> tuple[str | None, Row]:
    """The band column of a small program's prediction: unvalidated on jaxcnn's own
    step, with how far published small-program steps of other frameworks' loops lie."""
    b = one(t, quantity="band", kind="published", device=platform, model="small programs")
    if b is None:
        return None, None
    return f"unvalidated; published loops, held out: {fmt(b)} off (median, n={b['n']})", b


def q_gpu_vs_cpu(t: pd.DataFrame, cpu: str | None) -> Said:
    p = accelerator_step(t, "gpu-t4", MNIST_MODEL, 128)
    like, best = speedups(t, "gpu-t4", MNIST_MODEL, 128, cpu)
    if not (p and like):
        return Said("not predicted yet", [p])
    text = f"T4 {fmt(p)}/step: {fmt(like)} the CPU like for like, {fmt(best)} its best (b128)"
    band, b = small_band(t)
    return Said(text, [p, like, best, b], band)


def q_k80(t: pd.DataFrame, cpu: str | None) -> Said:
    p = accelerator_step(t, "gpu-k80", MNIST_MODEL, 128)
    seed, keras = published(t, "seed001-k80-mnist-cnn"), published(t, "keras-tf14-k80-mnist-cnn")
    factor = one(t, quantity="error_factor", extra="keras-tf14-k80-mnist-cnn vs published")
    parts = [f"K80 {fmt(p)}/step at b128" if p else "K80 not predicted"]
    parts.append(f"seed 001: {fmt(seed)}/batch")
    if keras is not None:
        off = f", {fmt(factor)} off our prediction" if factor else ""
        parts.append(f"Keras K80 row {fmt(keras)}{off}")
    band, b = small_band(t)
    return Said("; ".join(parts), [p, seed, keras, factor, b], band)


def q_host(t: pd.DataFrame, cpu: str | None) -> Said:
    host = rows(t, quantity="host_s", kind="measured", model=MNIST_MODEL, batch=128)
    on = cpu_with(host, cpu)
    total = one(host, device=on, extra="loop total") if on else None
    if total is None:
        return Said("jaxcnn's host loop is not measured yet")
    text = (
        f"jaxcnn's loop costs the host {fmt(total)}/step (mnist_cnn, b128{elsewhere(on, cpu)}): "
        "a GPU saves nothing on a step shorter than that"
    )
    return Said(text, [total])


def q_scaling(t: pd.DataFrame, cpu: str | None) -> Said:
    s = rows(t, quantity="scaling_efficiency", precision="f32")
    flagged = int(s.flag.notna().sum())
    seeds = s[s.model.isin(SEED_MODELS)]
    pick = seeds[seeds.platform == "gpu"] if (seeds.platform == "gpu").any() else seeds
    if not len(pick):
        return Said("no multi-device compile yet; model parallelism is not studied")
    r = pick.loc[pick.devices.idxmax()].to_dict()
    text = f"{r['model']} on {r['device']}: {fmt(r)} of ideal (weak); model parallelism not studied"
    return Said(text + (f"; {flagged} above ideal flagged" if flagged else ""), [r], "unvalidated")


def crossover(t: pd.DataFrame, cpu: str | None, device: str = "gpu-t4") -> tuple[pd.DataFrame, ...]:
    """The MLP width sweep at batch 128: the CPU's measured steps (on the CPU that ran the
    sweep) and `device`'s predicted (the loop step where predicted)."""
    like = {"batch": 128, "precision": "f32", "placement": "single"}
    mlp = rows(t, quantity="step_s", kind="measured", platform="cpu", formulation="xla",
               loop="step", framework="jax", extra="-", **like)  # fmt: skip
    mlp = mlp[mlp.model.str.startswith("mlp")]
    widths = mlp.groupby("device").model.nunique()
    if len(widths) and (cpu not in widths.index or widths[cpu] < widths.max()):
        cpu = str(widths.idxmax())
    c = mlp[mlp.device == cpu]
    c = c.sort_values(["params", "dataset"]).drop_duplicates("model")  # one data set a width
    quantity = (
        "loop_step_s" if len(rows(t, quantity="loop_step_s", device=device)) else "device_step_s"
    )
    g = rows(t, quantity=quantity, kind="predicted", device=device, **like)
    return c, g[g.model.str.startswith("mlp")].sort_values("params")


def q_crossover(t: pd.DataFrame, cpu: str | None) -> Said:
    c, g = crossover(t, cpu)
    both = c.merge(g, on="model", suffixes=("_cpu", "_gpu")).sort_values("params_cpu")
    if not len(both):
        return Said("no MLP sweep on both sides yet")
    slower = both[both.value_gpu >= both.value_cpu]
    r = slower.iloc[-1] if len(slower) else both.iloc[0]
    on = elsewhere(str(r.device_cpu), cpu).removeprefix(" (").removesuffix(")")
    where = f"MLP, b128{', ' + on if on else ''}"
    text = (
        f"T4 slower up to {int(r.params_cpu):,} params, faster above ({where})"
        if len(slower)
        else f"T4 faster at every width from {int(r.params_cpu):,} params ({where})"
    )
    chosen = [c[c.id == r.id_cpu].iloc[0].to_dict(), g[g.id == r.id_gpu].iloc[0].to_dict()]
    if g.note.astype(str).str.contains("left out").any():
        text += "; its loop steps leave out host parts unmeasured at most widths"
    return Said(text, chosen)


def q_tpu_vs_gpu(t: pd.DataFrame, cpu: str | None) -> Said:
    s = rows(t, quantity="speedup", selection="equal-batch", batch=128, precision="f32",
             placement="single", model=SEED_MODELS)  # fmt: skip
    s = s[s.extra.str.startswith("faster chip per chip")]
    if not len(s):
        return Said("not compiled for both yet")
    parts = [f"{r['model']} {r['device']} {fmt(r)}" for r in s.to_dict("records")]
    return Said("faster chip, by: " + "; ".join(parts), list(s.to_dict("records")), "unvalidated")


def q_cost(t: pd.DataFrame, cpu: str | None) -> Said:
    c = rows(t, quantity="usd_per_epoch", batch=128, precision="f32", model=MNIST_MODEL)
    if not len(c):
        return Said("no predicted epoch on a priced target yet")
    r = c.loc[c.value.idxmin()].to_dict()
    partly = " (host side partly left out)" if "left out" in str(r["note"]) else ""
    text = f"cheapest mnist_cnn epoch: {r['device']} {fmt(r)}{partly}"
    w = rows(t, quantity="flops_per_watt", batch=128, precision="f32", model=MNIST_MODEL)
    if not len(w):
        return Said(f"{text}; FLOP/s per watt: no chip with a published TDP predicted", [r])
    best = w.loc[w.value.idxmax()].to_dict()
    return Said(f"{text}; most FLOP/s per TDP watt: {best['device']} {fmt(best)}", [r, best])


def q_five_epochs(t: pd.DataFrame, cpu: str | None) -> Said:
    on = cpu_with(t, cpu, quantity="epoch_s", model=MNIST_MODEL, selection="newest-trained")
    e = rows(t, quantity="epoch_s", kind="measured", device=on, model=MNIST_MODEL, batch=128,
             precision="f32", formulation="xla", loop="step", dataset="mnist",
             selection="newest-trained")  # fmt: skip
    e = e[e.extra == "5 epochs"] if (e.extra == "5 epochs").any() else e
    c = e.iloc[0].to_dict() if len(e) == 1 else None
    g = predicted(t, "epoch_s", "gpu-t4", MNIST_MODEL, 128)
    mine = f"CPU {fmt(c)} an epoch ({c['extra']}{elsewhere(on, cpu)})" if c else "no CPU epoch"
    text = f"{mine}; T4 {fmt(g)} an epoch" if g else f"{mine}; T4 not predicted"
    return Said(text, [c, g])


def q_flops(t: pd.DataFrame, cpu: str | None) -> Said:
    peak = one(t, quantity="peak_flops_per_s", device=cpu, precision="f32")
    steps = rows(t, quantity="flops_per_s", kind="measured", device=cpu)
    steps = steps[steps.model != "matmul"]
    best = steps.loc[steps.value.idxmax()].to_dict() if len(steps) else None
    parts = [f"CPU matmul {fmt(peak)}", f"best CPU train step {fmt(best)}"]
    picked = [peak, best]
    mfu = rows(t, quantity="mfu", kind="predicted")
    for platform in ("gpu", "tpu"):
        m = mfu[mfu.platform == platform]
        if len(m):
            r = m.loc[m.value.idxmax()].to_dict()
            picked.append(r)
            parts.append(f"{platform.upper()} best {fmt(r)} of peak ({r['device']}, {r['model']})")
    return Said("; ".join(parts), picked)


def q_vmap(t: pd.DataFrame, cpu: str | None) -> Said:
    s = rows(t, quantity="speedup", kind="measured")
    s = s[s.extra.str.contains("vmap vs sequential")]
    on = cpu_with(s, cpu)
    s = s[s.device == on]
    if not len(s):
        return Said("no ensemble records yet")
    s = s.assign(k=s.extra.str.extract(r"K=(\d+)")[0].astype(int)).sort_values("k")
    parts = [f"K={r['k']}: {fmt(r)}" for r in s.to_dict("records")]
    text = f"{s.iloc[0].model}{elsewhere(on, cpu)}, vmap's speed over sequential: " + ", ".join(
        parts
    )
    return Said(text, list(s.to_dict("records")))


def q_library(t: pd.DataFrame, cpu: str | None) -> Said:
    s = rows(t, quantity="speedup", kind="measured", device=cpu, formulation="onednn",
             loop="step", precision="f32")  # fmt: skip
    s = s[s.extra == "vs xla formulation"]
    seed = published(t, "seed004-cudnn-speedup")
    if not len(s):
        return Said(f"no oneDNN runs yet; seed 004: cuDNN {fmt(seed)}", [seed])
    lo, hi = s.loc[s.value.idxmin()].to_dict(), s.loc[s.value.idxmax()].to_dict()
    text = f"oneDNN {fmt(lo)}-{fmt(hi)} the xla formulation's step here; "
    text += f"seed 004 shows cuDNN {fmt(seed)}"
    return Said(text, [lo, hi, seed])


@dataclass(frozen=True)
class Question:
    number: int
    seeds: str
    text: str
    page: str
    answer: Callable[[pd.DataFrame, str | None], Said]


QUESTIONS = [
    Question(1, "000", "Does the cats-vs-dogs CNN fit an MX150 at batch 16, run out at 32, "
             "fit a T4 at 128?", "batch", q_oom),
    Question(2, "000", "Its step time on the MX150 and T4 against the CPU, beside the "
             "seed's own?", "devices", q_seed_step),
    Question(3, "000", "One epoch on each device?", "devices", q_seed_epoch),
    Question(4, "000", "The same accuracy and curves on every device?", "accuracy", q_accuracy),
    Question(5, "001, 003", "How much faster is a GPU than the CPU for the MNIST CNN?",
             "devices", q_gpu_vs_cpu),
    Question(6, "001", "And on the seed's K80?", "devices", q_k80),
    Question(7, "001", "When does a GPU not pay (host copy, small work)?", "crossover", q_host),
    Question(8, "001, 004", "Does data parallelism over several GPUs scale? Model "
             "parallelism?", "scaling", q_scaling),
    Question(9, "002", "Above how many parameters does a GPU beat the CPU?", "crossover",
             q_crossover),
    Question(10, "002", "TPU or GPU, per chip at equal batch (128)?", "targets", q_tpu_vs_gpu),
    Question(11, "002", "Cost per epoch (and FLOP/s per watt)?", "targets", q_cost),
    Question(12, "003", "5 epochs of the MNIST CNN: CPU against a T4?", "devices",
             q_five_epochs),
    Question(13, "004", "What FLOP/s do CPU, GPU and TPU reach, against peak?", "matmul",
             q_flops),
    Question(14, "004", "Training K models at once with vmap: faster?", "ensemble", q_vmap),
    Question(15, "004", "What is the kernel library worth (xla vs oneDNN on CPU; cuDNN)?",
             "bench", q_library),
]  # fmt: skip


def answers(table: pd.DataFrame) -> list[Answer]:
    """The fifteen answers, in the seeds' order."""
    cpu = reference_cpu(table)
    out = []
    for q in QUESTIONS:
        said = q.answer(table, cpu)
        band = said.band if said.band is not None else _first_band(said.rows)
        ids = [r["id"] for r in said.rows if r]
        out.append(
            Answer(q.number, q.seeds, q.text, said.text, kinds(said.rows), band, q.page, ids)
        )
    return out
