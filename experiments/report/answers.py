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
TARGET_ACCURACY = 0.99


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


def rows(table: pd.DataFrame, **where: Any) -> pd.DataFrame:
    """The rows whose columns equal `where`'s values (a list: any of them)."""
    mask = pd.Series(True, index=table.index)
    for column, value in where.items():
        if isinstance(value, (list, tuple, set)):
            mask &= table[column].isin(list(value))
        else:
            mask &= table[column] == value
    return table[mask]


def one(table: pd.DataFrame, **where: Any) -> dict[str, Any] | None:
    found = rows(table, **where)
    return found.iloc[0].to_dict() if len(found) == 1 else None


def reference_cpu(table: pd.DataFrame) -> str | None:
    """The CPU the answers quote: the one with the most measured steps."""
    cpu = rows(table, quantity="step_s", kind="measured", platform="cpu")
    named = cpu[~cpu.device.str.contains("not recorded")]
    counts = (named if len(named) else cpu).device.value_counts()
    return str(counts.index[0]) if len(counts) else None


def cpu_with(table: pd.DataFrame, cpu: str | None, **where: Any) -> str | None:
    """`cpu` where it has rows matching `where`, else the CPU with the most such rows:
    an answer quotes the reference CPU where it can, and names another where not."""
    found = rows(table, platform="cpu", **where)
    if cpu is not None and (found.device == cpu).any():
        return cpu
    counts = found.device.value_counts()
    return str(counts.index[0]) if len(counts) else cpu


def elsewhere(on: str | None, cpu: str | None) -> str:
    """ " (on X)" where an answer's CPU is not the reference CPU."""
    return f" (on {on})" if on and on != cpu else ""


def band_words(r: dict[str, Any] | None) -> str:
    """A prediction's band as the first screen shows it, or "unvalidated"."""
    if r is None or r["kind"] != "predicted":
        return "-"
    if pd.isna(r.get("band_median")):
        return "unvalidated"
    median, worst = r["band_median"], r["band_worst"]
    return f"x{median:.2f} median, x{worst:.2f} worst, n={r['band_n']} ({r['band_split']})"


def kinds(*rs: dict[str, Any] | None) -> str:
    short = {"measured": "M", "compiled": "C", "predicted": "P", "published": "published"}
    seen = [short[r["kind"]] for r in rs if r]
    return " / ".join(dict.fromkeys(seen)) or "-"


def _ids(*rs: dict[str, Any] | None) -> list[str]:
    return [r["id"] for r in rs if r]


def _first_band(*rs: dict[str, Any] | None) -> str:
    words = [band_words(r) for r in rs if r and r["kind"] == "predicted"]
    return words[0] if words else "-"


def _step(table: pd.DataFrame, quantity: str, device: str, model: str, batch: int) -> dict | None:
    return one(
        table,
        quantity=quantity,
        kind="predicted",
        device=device,
        model=model,
        batch=batch,
        precision="f32",
        placement="single",
    )


def _cpu_step(
    table: pd.DataFrame, cpu: str | None, model: str, batch: int, dataset: str | None = None
) -> dict | None:
    """The like-for-like CPU step: the xla formulation in the step loop, one device."""
    found = rows(
        table,
        quantity="step_s",
        kind="measured",
        device=cpu,
        model=model,
        batch=batch,
        precision="f32",
        formulation="xla",
        loop="step",
        framework="jax",
        placement="single",
        extra="-",
    )
    if dataset:
        found = found[found.dataset == dataset]
    return found.iloc[-1].to_dict() if len(found) else None


def _accelerator_step(table: pd.DataFrame, device: str, model: str, batch: int) -> dict | None:
    """The loop step where predicted, else the device step (its quantity says which)."""
    return _step(table, "loop_step_s", device, model, batch) or _step(
        table, "device_step_s", device, model, batch
    )


def q_oom(t: pd.DataFrame) -> Answer:
    cells = [("gpu-mx150", 16, True), ("gpu-mx150", 32, False), ("gpu-t4", 128, True)]
    found, agree = [], 0
    for device, batch, seed_fits in cells:
        r = one(
            t,
            quantity="fits",
            device=device,
            model=SEED_MODEL,
            batch=batch,
            precision="f32",
            placement="single",
        )
        m = one(
            t,
            quantity="memory_bytes",
            device=device,
            model=SEED_MODEL,
            batch=batch,
            precision="f32",
            placement="single",
        )
        if r is not None:
            agree += bool(r["value"]) == seed_fits
            found += [r, m]
    words = (
        f"{agree} of {len(found) // 2} verdicts as the seed saw: "
        + "; ".join(
            f"{r['device'][4:]} b{r['batch']} {'fits' if r['value'] else 'OOM'} ({fmt(m)})"
            for r, m in zip(found[::2], found[1::2], strict=True)
        )
        if found
        else "not compiled yet: python -m experiments.run --study=targets"
    )
    return Answer(
        1,
        "000",
        "Does the cats-vs-dogs CNN fit an MX150 at batch 16, run out at 32, fit a T4 at 128?",
        words,
        kinds(*found),
        "the compiler's own memory analysis",
        "batch",
        _ids(*found),
    )


def _seed_pub(t: pd.DataFrame, extra: str) -> dict | None:
    return one(t, kind="published", extra=extra)


def q_seed_step(t: pd.DataFrame, cpu: str | None) -> Answer:
    mx = _accelerator_step(t, "gpu-mx150", SEED_MODEL, 16)
    t4 = _accelerator_step(t, "gpu-t4", SEED_MODEL, 128)
    on = cpu_with(t, cpu, quantity="step_s", model=SEED_MODEL, batch=16)
    c = _cpu_step(t, on, SEED_MODEL, 16)
    pm, pt = _seed_pub(t, "seed000-mx150-catsdogs"), _seed_pub(t, "seed000-t4-catsdogs")
    parts = []
    if mx:
        parts.append(f"MX150 b16 {fmt(mx)} (seed {fmt(pm)})")
    if t4:
        parts.append(f"T4 b128 {fmt(t4)} (seed {fmt(pt)}, Drive reads)")
    if c:
        parts.append(f"CPU b16 {fmt(c)}{elsewhere(on, cpu)}")
    return Answer(
        2,
        "000",
        "Its step time on the MX150 and T4 against the CPU, beside the seed's own?",
        "; ".join(parts) or "no figures yet",
        kinds(mx, t4, c, pm),
        _first_band(mx, t4),
        "devices",
        _ids(mx, t4, c, pm, pt),
    )


def q_seed_epoch(t: pd.DataFrame, cpu: str | None) -> Answer:
    def epoch(device: str, batch: int, kind: str) -> dict | None:
        found = rows(
            t,
            quantity="epoch_s",
            kind=kind,
            device=device,
            model=SEED_MODEL,
            batch=batch,
            precision="f32",
        )
        found = (
            found[found.formulation.isin(["xla"]) & (found.loop == "step")]
            if kind == "measured"
            else found
        )
        return found.iloc[0].to_dict() if len(found) else None

    mx, t4 = epoch("gpu-mx150", 16, "predicted"), epoch("gpu-t4", 128, "predicted")
    on = cpu_with(t, cpu, quantity="epoch_s", model=SEED_MODEL, batch=16)
    c = epoch(on, 16, "measured") if on else None
    s_cpu = _seed_pub(t, "seed000-cpu-catsdogs-epoch")
    s_mx = _seed_pub(t, "seed000-mx150-catsdogs-epoch")
    parts = [
        f"CPU b16 {fmt(c)}{elsewhere(on, cpu)} (seed ETA {fmt(s_cpu)})"
        if c
        else f"seed CPU ETA {fmt(s_cpu)}"
    ]
    parts.append(
        f"MX150 {fmt(mx)} (seed {fmt(s_mx)})" if mx else f"MX150 seed {fmt(s_mx)}, not predicted"
    )
    if t4:
        parts.append(f"T4 b128 {fmt(t4)}")
    return Answer(
        3,
        "000",
        "One epoch on each device?",
        "; ".join(parts),
        kinds(c, mx, t4, s_cpu),
        _first_band(mx, t4),
        "devices",
        _ids(c, mx, t4, s_cpu, s_mx),
    )


def q_accuracy(t: pd.DataFrame) -> Answer:
    acc = rows(t, quantity="test_accuracy", kind="measured", model=MNIST_MODEL, precision="f32")
    acc = acc[acc.extra.str.endswith(" epochs") & (acc.selection == "newest-trained")]
    by_platform = acc.groupby("platform")
    parts = [
        f"{p}: {fmt(g.iloc[-1].to_dict())} ({g.iloc[-1].extra}, {g.iloc[-1].dataset})"
        for p, g in by_platform
    ]
    missing = [p for p in ("gpu", "tpu") if p not in by_platform.groups]
    if missing:
        parts.append(f"no {'/'.join(missing).upper()} run yet")
    picked = [g.iloc[-1].to_dict() for _, g in by_platform]
    return Answer(
        4,
        "000",
        "The same accuracy and curves on every device?",
        "; ".join(parts),
        kinds(*picked),
        "-",
        "accuracy",
        _ids(*picked),
    )


def _speedups(
    t: pd.DataFrame, device: str, model: str, batch: int, cpu: str | None
) -> tuple[dict | None, dict | None]:
    s = rows(
        t,
        quantity="speedup",
        device=device,
        model=model,
        batch=batch,
        precision="f32",
        placement="single",
    )
    s = s[s.extra.str.contains(str(cpu), regex=False)] if cpu else s.iloc[0:0]
    quantity = "loop_step_s" if s.extra.str.startswith("loop_step_s").any() else "device_step_s"
    s = s[s.extra.str.startswith(quantity)]
    like = s[s.selection == "like-for-like"]
    best = s[s.selection == "cpu-best"]
    return (
        like.iloc[0].to_dict() if len(like) else None,
        best.iloc[0].to_dict() if len(best) else None,
    )


def q_gpu_vs_cpu(t: pd.DataFrame, cpu: str | None) -> Answer:
    p = _accelerator_step(t, "gpu-t4", MNIST_MODEL, 128)
    like, best = _speedups(t, "gpu-t4", MNIST_MODEL, 128, cpu)
    words = (
        f"T4 {fmt(p)}/step: {fmt(like)} the CPU like for like, {fmt(best)} its best (batch 128)"
        if p and like
        else "not predicted yet"
    )
    return Answer(
        5,
        "001, 003",
        "How much faster is a GPU than the CPU for the MNIST CNN?",
        words,
        kinds(p, like),
        _first_band(p),
        "devices",
        _ids(p, like, best),
    )


def q_k80(t: pd.DataFrame, cpu: str | None) -> Answer:
    p = _accelerator_step(t, "gpu-k80", MNIST_MODEL, 128)
    seed = _seed_pub(t, "seed001-k80-mnist-cnn")
    keras = _seed_pub(t, "keras-tf14-k80-mnist-cnn")
    factor = one(t, quantity="error_factor", extra="keras-tf14-k80-mnist-cnn vs published")
    parts = [f"K80 {fmt(p)}/step at b128" if p else "K80 not predicted"]
    parts.append(f"seed 001: {fmt(seed)}/batch")
    if keras is not None:
        parts.append(
            f"Keras K80 row {fmt(keras)}"
            + (f", {fmt(factor)} off our prediction" if factor else "")
        )
    return Answer(
        6,
        "001",
        "And on the seed's K80?",
        "; ".join(parts),
        kinds(p, seed),
        _first_band(p),
        "devices",
        _ids(p, seed, keras, factor),
    )


def q_host(t: pd.DataFrame, cpu: str | None) -> Answer:
    host = rows(t, quantity="host_s", kind="measured", device=cpu)
    if not len(host):
        return Answer(
            7,
            "001",
            "When does a GPU not pay (host copy, small work)?",
            "the host loop is not measured yet",
            "-",
            "-",
            "crossover",
        )
    total = host[host.extra == "loop total"]
    r = total.iloc[0].to_dict() if len(total) else host.iloc[0].to_dict()
    return Answer(
        7,
        "001",
        "When does a GPU not pay (host copy, small work)?",
        f"jaxcnn's host loop costs {fmt(r)}/step here; a GPU step shorter than that saves nothing",
        kinds(r),
        "-",
        "crossover",
        _ids(r),
    )


def q_scaling(t: pd.DataFrame) -> Answer:
    s = rows(t, quantity="scaling_efficiency")
    gpu = s[s.platform == "gpu"]
    pick = gpu if len(gpu) else s
    flagged = int(s.flag.notna().sum())
    if not len(pick):
        return Answer(
            8,
            "001, 004",
            "Does data parallelism over several GPUs scale? Model parallelism?",
            "no multi-device compile yet; model parallelism is not studied",
            "-",
            "-",
            "scaling",
        )
    r = pick.loc[pick.devices.idxmax()].to_dict()
    words = (
        f"{r['model']} on {r['device']}: {fmt(r)} of ideal (weak); model parallelism not studied"
    )
    if flagged:
        words += f"; {flagged} above ideal flagged"
    return Answer(
        8,
        "001, 004",
        "Does data parallelism over several GPUs scale? Model parallelism?",
        words,
        kinds(r),
        "unvalidated",
        "scaling",
        _ids(r),
    )


def crossover(
    t: pd.DataFrame, cpu: str | None, device: str = "gpu-t4"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The MLP width sweep at batch 128: CPU measured steps and `device`'s predicted."""
    mlp = rows(
        t,
        quantity="step_s",
        kind="measured",
        batch=128,
        platform="cpu",
        formulation="xla",
        loop="step",
        extra="-",
    )
    widths = mlp[mlp.model.str.startswith("mlp")].groupby("device").model.nunique()
    if len(widths) and (cpu not in widths.index or widths[cpu] < widths.max()):
        cpu = str(widths.idxmax())  # the CPU that ran the sweep
    c = rows(
        t,
        quantity="step_s",
        kind="measured",
        device=cpu,
        batch=128,
        precision="f32",
        formulation="xla",
        loop="step",
        framework="jax",
        placement="single",
        extra="-",
    )
    c = c[c.model.str.startswith("mlp")].sort_values("params")
    quantity = (
        "loop_step_s" if len(rows(t, quantity="loop_step_s", device=device)) else "device_step_s"
    )
    g = rows(
        t,
        quantity=quantity,
        kind="predicted",
        device=device,
        batch=128,
        precision="f32",
        placement="single",
    )
    g = g[g.model.str.startswith("mlp")].sort_values("params")
    return c, g


def q_crossover(t: pd.DataFrame, cpu: str | None) -> Answer:
    c, g = crossover(t, cpu)
    both = c.merge(g, on="model", suffixes=("_cpu", "_gpu")).sort_values("params_cpu")
    if not len(both):
        return Answer(
            9,
            "002",
            "Above how many parameters does a GPU beat the CPU?",
            "no MLP sweep on both sides yet",
            "-",
            "-",
            "crossover",
        )
    slower = both[both.value_gpu >= both.value_cpu]
    if len(slower):
        r = slower.iloc[-1]
        words = f"T4 slower up to {int(r.params_cpu):,} params, faster above (MLP, batch 128)"
    else:
        r = both.iloc[0]
        words = (
            f"T4 faster at every width from {int(r.params_cpu):,} params "
            "(MLP, batch 128): no crossover in range"
        )
    ids = [r.id_cpu, r.id_gpu]
    gpu_row = g[g.id == r.id_gpu].iloc[0].to_dict()
    return Answer(
        9,
        "002",
        "Above how many parameters does a GPU beat the CPU?",
        words,
        "M / P",
        band_words(gpu_row),
        "crossover",
        ids,
    )


def q_tpu_vs_gpu(t: pd.DataFrame) -> Answer:
    s = rows(
        t,
        quantity="speedup",
        selection="equal-batch",
        batch=128,
        precision="f32",
        placement="single",
    )
    s = s[s.extra.str.startswith("faster chip per chip")]
    s = s[s.model.isin([SEED_MODEL, MNIST_MODEL, "lenet5_keras", "mlp"])]
    if not len(s):
        return Answer(
            10,
            "002",
            "TPU or GPU, per chip at equal batch?",
            "not compiled for both yet",
            "-",
            "-",
            "targets",
        )
    parts = [f"{r.model} {r.device} {fmt(r.to_dict())}" for _, r in s.iterrows()]
    return Answer(
        10,
        "002",
        "TPU or GPU, per chip at equal batch (128)?",
        "faster chip, by: " + "; ".join(parts),
        "P",
        "unvalidated",
        "targets",
        list(s.id),
    )


def q_cost(t: pd.DataFrame) -> Answer:
    c = rows(t, quantity="usd_per_epoch", batch=128, precision="f32")
    c = c[c.model.isin([MNIST_MODEL])]
    if not len(c):
        return Answer(
            11,
            "002",
            "Cost per epoch?",
            "no predicted epoch on a priced target yet",
            "-",
            "-",
            "targets",
        )
    r = c.loc[c.value.idxmin()].to_dict()
    return Answer(
        11,
        "002",
        "Cost per epoch (and FLOP/s per watt)?",
        f"cheapest mnist_cnn epoch: {r['device']} {fmt(r)}; no TDP cited, so no FLOP/s per watt",
        "P",
        band_words(r),
        "targets",
        [r["id"]],
    )


def q_five_epochs(t: pd.DataFrame, cpu: str | None) -> Answer:
    on = cpu_with(t, cpu, quantity="epoch_s", model=MNIST_MODEL, selection="newest-trained")
    e = rows(
        t,
        quantity="epoch_s",
        kind="measured",
        device=on,
        model=MNIST_MODEL,
        batch=128,
        precision="f32",
        formulation="xla",
        loop="step",
        dataset="mnist",
    )
    e = e[e.selection == "newest-trained"]
    c = e.iloc[0].to_dict() if len(e) else None
    g = one(
        t,
        quantity="epoch_s",
        kind="predicted",
        device="gpu-t4",
        model=MNIST_MODEL,
        batch=128,
        precision="f32",
        placement="single",
    )
    parts = [f"CPU {fmt(c)} per epoch{elsewhere(on, cpu)}" if c else "CPU: no epoch timed"]
    parts.append(f"T4 {fmt(g)} per epoch" if g else "T4 epoch not predicted yet")
    return Answer(
        12,
        "003",
        "5 epochs of the MNIST CNN: CPU against a T4?",
        "; ".join(parts),
        kinds(c, g),
        _first_band(g),
        "devices",
        _ids(c, g),
    )


def q_flops(t: pd.DataFrame, cpu: str | None) -> Answer:
    peak = rows(t, quantity="peak_flops_per_s", device=cpu, precision="f32")
    peak_r = peak.iloc[0].to_dict() if len(peak) else None
    steps = rows(t, quantity="flops_per_s", kind="measured", device=cpu)
    steps = steps[steps.model != "matmul"]
    best_step = steps.loc[steps.value.idxmax()].to_dict() if len(steps) else None
    mfu = rows(t, quantity="mfu", kind="predicted")
    parts = []
    if peak_r:
        parts.append(f"CPU matmul {fmt(peak_r)}")
    if best_step:
        parts.append(f"best CPU train step {fmt(best_step)}")
    picked = [peak_r, best_step]
    for platform in ("gpu", "tpu"):
        m = mfu[mfu.platform == platform]
        if len(m):
            r = m.loc[m.value.idxmax()].to_dict()
            picked.append(r)
            parts.append(f"{platform.upper()} best {fmt(r)} of peak ({r['device']}, {r['model']})")
    return Answer(
        13,
        "004",
        "What FLOP/s do CPU, GPU and TPU reach, against peak?",
        "; ".join(parts) or "no figures yet",
        kinds(*picked),
        _first_band(*picked[2:]),
        "matmul",
        _ids(*picked),
    )


def q_vmap(t: pd.DataFrame, cpu: str | None) -> Answer:
    s = rows(t, quantity="speedup", kind="measured")
    s = s[s.extra.str.contains("vmap vs sequential")]
    on = cpu_with(s, cpu)
    s = s[s.device == on]
    if not len(s):
        return Answer(
            14,
            "004",
            "Training K models at once with vmap?",
            "no ensemble records yet",
            "-",
            "-",
            "ensemble",
        )
    s = s.assign(k=s.extra.str.extract(r"K=(\d+)")[0].astype(int)).sort_values("k")
    parts = [f"K={r.k}: {fmt(r.to_dict())}" for _, r in s.iterrows()]
    return Answer(
        14,
        "004",
        "Training K models at once with vmap: faster?",
        f"{s.iloc[0].model}{elsewhere(on, cpu)}, vmap's speed over sequential: " + ", ".join(parts),
        "M",
        "-",
        "ensemble",
        list(s.id),
    )


def q_library(t: pd.DataFrame, cpu: str | None) -> Answer:
    s = rows(
        t,
        quantity="speedup",
        kind="measured",
        device=cpu,
        formulation="onednn",
        loop="step",
        precision="f32",
    )
    seed = one(t, kind="published", extra="seed004-cudnn-speedup")
    if not len(s):
        return Answer(
            15,
            "004",
            "What is the kernel library worth?",
            f"no oneDNN runs yet; seed 004: cuDNN {fmt(seed)}",
            kinds(seed),
            "-",
            "bench",
            _ids(seed),
        )
    lo, hi = fmt(s.loc[s.value.idxmin()].to_dict()), fmt(s.loc[s.value.idxmax()].to_dict())
    return Answer(
        15,
        "004",
        "What is the kernel library worth (xla vs oneDNN on CPU; cuDNN)?",
        f"oneDNN {lo}-{hi} the xla formulation's step on this CPU; "
        f"seed 004 shows cuDNN {fmt(seed)}",
        kinds(s.iloc[0].to_dict(), seed),
        "-",
        "bench",
        [*s.id, *_ids(seed)],
    )


QUESTIONS: list[Callable[..., Answer]] = [
    q_oom,
    q_seed_step,
    q_seed_epoch,
    q_accuracy,
    q_gpu_vs_cpu,
    q_k80,
    q_host,
    q_scaling,
    q_crossover,
    q_tpu_vs_gpu,
    q_cost,
    q_five_epochs,
    q_flops,
    q_vmap,
    q_library,
]


def answers(table: pd.DataFrame) -> list[Answer]:
    """The fifteen answers, in the seeds' order."""
    cpu = reference_cpu(table)
    out = []
    for q in QUESTIONS:
        takes_cpu = q.__code__.co_argcount == 2
        out.append(q(table, cpu) if takes_cpu else q(table))
    return out
