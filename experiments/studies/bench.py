"""How fast is the train step, and which choice makes it so?

`lenet5_keras`, `mnist_cnn` and `mlp` n=4096 at batch 32, 128 and 512 (and 2048
and 8192 on accelerators, where the best batch is larger), timing only
(compile, then 7 timed blocks of 20 steps; images/s is their median, the record's
`throughput`) on MNIST (real images: the device loop reads a new batch each step).
Per model and batch: XLA's own convolutions and the platform's formulation (on a
CPU these differ: jaxcnn.formulation), each with per-step dispatch (`loop=step`)
and whole epochs as one compiled loop (`loop=device`); then bf16 compute with the
platform's formulation in both loops; on a CPU where oneDNN is installed (the
`[onednn]` extra, and a g++), also the `onednn` formulation in f32, both loops, for
the two convolutional models. The report sets the CPU figures beside the
PyTorch and Keras peers' (benchmarks/peers.py). Both loops run in
one process, so on a CPU `--set host_memory=auto` gives both `retain` (the step loop's
choice, jaxcnn/host_memory.py); `--set host_memory=system` measures the other policy.

On accelerators also `catsdogs_cnn`, `resnet18`, `resnet50` and `vgg16` on synthetic
images at batch 32, 128 and 512, per-step dispatch in f32 and bf16; a batch that
runs out of memory ends its model and precision's sweep (the rest `skipped`). The
report names each model's fastest figure and its batch.

Command: python -m experiments.run --study=bench --device=cpu --data-dir=DIR
Sizes: full everywhere. Smoke: `mlp` n=8 only, digits, batch 32, 3 steps per block
(the formulations' convolutions are checked by tests/test_formulation.py).
Expected: CPU ~30 min (XLA's convolutions in a compiled loop are the slow cells);
smoke ~20 s; GPU/TPU ~15 min, most of it compiling the large models (a guess).

The report section sets images/s of the train step per model, batch and configuration
(formulation x loop x precision) beside the peer frameworks measured on the same
machine by benchmarks/peers.py, and the ceiling the f32 matmul rate allows: every
figure read from records (`throughput`, the median of timed blocks, p10-p90, for JAX
and peers alike; `matmul_ceiling` and `flops.per_image` for the bound). The paired-run
tables are bench_paired.py's.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from experiments.records import took_turns
from experiments.studies import bench_cells, bench_paired
from experiments.studies._common import (
    cpu_figure,
    cpu_figures,
    field,
    latest_by,
    only_ok,
    plain_log_y,
    pyplot,
    same_step,
    save,
    when,
)
from experiments.studies.base import SMOKE_TIMING, TINY_MLP, Context, Record, Study, dataset_for
from experiments.studies.bench_cells import GOAL
from experiments.tables import markdown_table, markdown_text
from experiments.workload import Workload

BENCH_MODELS = (("lenet5_keras", {}), ("mnist_cnn", {}), ("mlp", {"width": 4096}))
BENCH_BATCHES = (32, 128, 512)
# An accelerator's best batch for these models lies far above a CPU's.
BENCH_BATCHES_ACCELERATOR = (*BENCH_BATCHES, 2048, 8192)
BENCH_TIMING_STEPS = 20
# oneDNN's convolutions (on a CPU where they can be built) for the convolutional models;
# mlp has no convolution, so its `onednn` program is its `cpu` one.
ONEDNN_MODELS = ("lenet5_keras", "mnist_cnn")
# Accelerators also time every other model of the zoo at its own input size (synthetic
# images), per-step dispatch in f32 and bf16, up to the first batch that does not fit.
BENCH_MODELS_ACCELERATOR = ("catsdogs_cnn", "resnet18", "resnet50", "vgg16")
BENCH_BATCHES_LARGE_MODELS = (32, 128, 512)


def workloads(ctx: Context) -> list[Workload]:
    """The workloads for `ctx`, sized as the module docstring says."""
    from jaxcnn import formulation, onednn

    platform_choice = formulation.for_platform(ctx.platform).name
    formulations = ("xla",) if platform_choice == "xla" else ("xla", platform_choice)
    cells = [(f, loop, "f32") for f in formulations for loop in ("step", "device")]
    cells += [(platform_choice, loop, "bf16") for loop in ("step", "device")]
    with_onednn = ctx.cpu and not ctx.smoke and onednn.available()
    extra = [("onednn", loop, "f32") for loop in ("step", "device")] if with_onednn else []
    chosen_models = BENCH_MODELS
    batches = BENCH_BATCHES if ctx.cpu else BENCH_BATCHES_ACCELERATOR
    timing = {"timing_steps": BENCH_TIMING_STEPS}
    if ctx.smoke:
        chosen_models, batches, timing = (("mlp", TINY_MLP),), (32,), SMOKE_TIMING
    common = {"epochs": 0, "study": "bench", "num_devices": 1, **timing}
    small = [
        Workload(
            model=model,
            model_overrides=overrides,
            dataset=dataset_for(ctx),
            batch_size=size,
            precision=precision,
            loop=loop,
            formulation=chosen,
            **common,
        )
        for model, overrides in chosen_models
        for size in batches
        for chosen, loop, precision in cells + (extra if model in ONEDNN_MODELS else [])
    ]
    if ctx.cpu or ctx.smoke:
        return small
    large = [
        Workload(
            model=model,
            dataset="synthetic",
            batch_size=size,
            precision=precision,
            oom_group=f"bench:{model}:{precision}",
            **common,
        )
        for model in BENCH_MODELS_ACCELERATOR
        for precision in ("f32", "bf16")
        for size in BENCH_BATCHES_LARGE_MODELS
    ]
    return small + large


def configuration(record: Record) -> str:
    """`jax cpu device f32`, `torch compile`: what produced a bench figure."""
    w = record["workload"]
    if w.get("kind") == "peer":
        return markdown_text(f"{w.get('framework')} {w.get('mode')}")
    name = (record.get("formulation") or {}).get("name", "xla")
    return f"jax {name} {record.get('loop') or 'step'} {w.get('precision', 'f32')}"


_model, _machine = bench_cells.model_name, bench_cells.machine


def _rate(record: Record) -> float:
    return float(record["throughput"]["median"])


def _rate_cell(record: Record | None) -> str:
    if record is None:
        return "-"
    if record["status"] != "ok":
        return record["status"]
    t = record["throughput"]
    return f"{t['median']:,.0f} [{t['p10']:,.0f}-{t['p90']:,.0f}]"


def _bound(record: Record | None) -> float | None:
    """Images/s if every FLOP of the step ran at the run's best measured f32 matmul rate."""
    ceiling = field(record, "matmul_ceiling", "float32", "tflops")
    per_image = field(record, "flops", "per_image")
    return ceiling * 1e12 / per_image if ceiling and per_image else None


def host_memory_policy(record: Record) -> str:
    """The host allocator policy a record ran under (records before it existed: system)."""
    return (record["env"].get("host_memory") or {}).get("policy", "system")


def _own(records: list[Record]) -> list[Record]:
    """The bench study's records but the paired driver's: its pairs, and the blocks
    taken in turns behind them (benchmarks/paired.py), are the paired table's."""
    return [
        r
        for r in records
        if r["workload"].get("study") == "bench"
        and r["workload"].get("kind") != "paired"
        and not took_turns(r)
    ]


def bench_records(records: list[Record]) -> list[Record]:
    """The latest ok-or-not record per (machine, model, batch, configuration, host
    memory policy)."""

    def key(r: Record) -> tuple:
        w = r["workload"]
        platform, policy = r["device"]["platform"], host_memory_policy(r)
        return platform, _machine(r), _model(r), w["batch_size"], configuration(r), policy

    ours = [r for r in _own(records) if "throughput" in r or r["status"] != "ok"]
    chosen = {key(r): r for r in latest_by(ours, key)}
    # Records from before the policy was recorded are glibc's defaults on another day:
    # a configuration measured since under a named policy leaves them out.
    named = {key[:-1] for key, r in chosen.items() if r["env"].get("host_memory")}
    return [r for key, r in chosen.items() if r["env"].get("host_memory") or key[:-1] not in named]


def _where(platform: str, machine: str) -> str:
    """A cell's device as the tables name it: a CPU by its model (bench_cells.machine),
    an accelerator by platform and host."""
    return machine if platform == "cpu" else f"{platform} ({machine})"


def _groups(records: list[Record]) -> dict[tuple, dict[str, list[Record]]]:
    """(platform, machine, model, batch) -> configuration -> its records, one per policy,
    `retain` (jaxcnn/host_memory.py) first."""
    grouped: dict[tuple, dict[str, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in sorted(bench_records(records), key=lambda r: host_memory_policy(r) != "retain"):
        key = (r["device"]["platform"], _machine(r), _model(r), r["workload"]["batch_size"])
        grouped[key][configuration(r)].append(r)
    return dict(sorted(grouped.items()))


def _shown(cells: dict[str, list[Record]], config: str) -> Record | None:
    """A configuration's figure: its faster host memory policy's record (ok first)."""
    records = cells.get(config) or []
    ok = only_ok(records)
    return max(ok, key=_rate) if ok else (records[0] if records else None)


def _best(cells: dict[str, list[Record]], peer: bool, precision: str = "f32") -> Record | None:
    """The fastest ok figure on one side (JAX at `precision`, or the peers)."""
    shown = [
        _shown(cells, name)
        for name in cells
        if name.startswith("jax") != peer and (peer or name.endswith(precision))
    ]
    return max([r for r in shown if r and r["status"] == "ok"], key=_rate, default=None)


def fastest_pair(
    records: list[Record], model: str, batch: int, machine: str
) -> tuple[Record | None, Record | None]:
    """(the best JAX f32 record, the fastest peer's) of the CPU bench table's cell for
    `model` (`mlp 4096`, as the table names it) at `batch` on `machine`: the two figures
    its `best f32 / peer` divides, and what benchmarks/paired.py re-measures in turns."""
    cells = _groups(records).get(("cpu", machine, model, batch))
    return (None, None) if cells is None else (_best(cells, False), _best(cells, True))


def fastest_cpu_step(records: list[Record], cpu: Record) -> tuple[float, str]:
    """The fastest median s/step any configuration reached for `cpu`'s step on its
    machine (JAX in any loop or formulation, and the peers of benchmarks/peers.py),
    each configuration by its one figure (`_common.cpu_figure`: its most recent run, so
    no lucky old run is picked), with what produced it (`keras graph`, `jax cpu device
    f32`): the CPU at its best, the baseline that keeps an accelerator's speedup from
    being inflated by a slow CPU figure. At worst `cpu`'s own figure."""
    found = [
        (r["step_time_s"]["median"], configuration(r))
        for r in cpu_figures(records)
        if _machine(r) == _machine(cpu)
        and r["workload"].get("kind", "train") in ("train", "peer")
        and same_step(r) == same_step(cpu)
    ]
    own = cpu_figure(records, cpu)
    return min([(own["step_time_s"]["median"], configuration(own)), *found])


def speedups(records: list[Record], cpu: Record, other: Record) -> tuple[str, str]:
    """`other`'s speedup per step like for like (over the one CPU figure of `cpu`'s
    workload, `_common.cpu_figure`) and over the CPU at its best (the fastest figure of
    any configuration or framework for the same step, named): RATIOS_NOTE."""
    step = other["step_time_s"]["median"]
    fastest, by = fastest_cpu_step(records, cpu)
    like = cpu_figure(records, cpu)["step_time_s"]["median"]
    return f"{like / step:.1f}x", f"{fastest / step:.1f}x ({by})"


# The two ratios to the CPU every answer gives, defined once.
RATIOS_NOTE = (
    "Two ratios to the CPU: *like for like*, over the CPU figure of the same program (for "
    "an accelerator's run, the CPU run of the same JAX step, formulation and loop; for a "
    "prediction, the step as the targets are compiled, xla formulation in the step loop); "
    "and *over the CPU at its best*, over the fastest s/step "
    "any configuration or framework reached for the same step (model, batch, precision) "
    "on that CPU model, JAX in any formulation and loop or a peer (PyTorch, Keras: "
    "benchmarks/peers.py), named in brackets. The second is the fair comparison, each "
    "side at its best; the first says what the accelerator does for the same program. "
    "Each CPU figure follows the one-figure rule."
)


def _policy_note(record: Record | None, cells: dict[str, list[Record]]) -> str:
    """` (system)` where glibc's defaults beat `retain` for this configuration."""
    if record is None or len(cells.get(configuration(record)) or []) < 2:
        return ""
    return "" if host_memory_policy(record) == "retain" else f" ({host_memory_policy(record)})"


def _named(record: Record | None, cells: dict[str, list[Record]]) -> str:
    if record is None:
        return "-"
    return configuration(record).removeprefix("jax ") + _policy_note(record, cells)


def _jax_first(config: str) -> tuple[bool, str]:
    """Orders configurations JAX's first, then the peers', each by name."""
    return not config.startswith("jax"), config


def _configs(groups: dict[tuple, dict[str, list[Record]]]) -> list[str]:
    """Every configuration in the groups: JAX's, then the peers'."""
    return sorted({c for cells in groups.values() for c in cells}, key=_jax_first)


def bench_table(records: list[Record]) -> str:
    """The bench records as one markdown table, "" when there are none."""
    groups = _groups(records)
    if not groups:
        return ""
    configs = _configs(groups)
    paired = bench_paired.paired_ratios(records)
    rows = []
    for (platform, machine, model, batch), cells in groups.items():
        jax_best, peer_best = _best(cells, peer=False), _best(cells, peer=True)
        ratio = need = "-"
        bound = _bound(jax_best)
        if jax_best is not None and peer_best is not None:
            value = _rate(jax_best) / _rate(peer_best)
            in_turns = paired.get((machine, model, batch))
            if in_turns is None:
                ratio = f"{value:.2f}{' (goal met)' if value >= GOAL else ''}"
            else:  # the verdict is the pairing's: these two records may be days apart
                met = " goal met" if in_turns >= GOAL else ""
                ratio = f"{value:.2f} (paired {in_turns:.2f}{met})"
            if bound:
                need = f"{GOAL * _rate(peer_best) / bound:.2f}"
        shown = [_shown(cells, c) for c in configs]
        rows.append(
            [
                _where(platform, machine),
                model,
                batch,
                *[_rate_cell(r) + _policy_note(r, cells) for r in shown],
                _named(jax_best, cells),
                _named(peer_best, cells),
                ratio,
                f"{bound:,.0f}" if bound else "-",
                need,
            ]
        )
    headers = ["device", "model", "batch", *configs, "best jax f32", "fastest peer"]
    headers += ["best f32 / peer", "f32 matmul bound", "goal / bound"]
    return markdown_table(headers, rows)


def best_batches(records: list[Record]) -> list[str]:
    """Per device and model, the JAX configuration and batch with the most images/s:
    `gpu (box) mnist_cnn: 1,234 [1,200-1,250] images/s at batch 2048 (jax xla device bf16)`."""
    found: dict[tuple, list[Record]] = defaultdict(list)
    for (platform, machine, model, _), cells in _groups(records).items():
        found[(platform, machine, model)] += [_best(cells, False, p) for p in ("f32", "bf16")]
    # the first of equal figures: the smaller batch, f32 before bf16
    best = {k: max(filter(None, rs), key=_rate) for k, rs in found.items() if any(rs)}
    return [
        f"{_where(platform, machine)} {model}: {_rate_cell(r)} images/s at batch "
        f"{r['workload']['batch_size']} ({configuration(r)})"
        for (platform, machine, model), r in sorted(best.items())
    ]


POLICIES = ("system", "retain")


def host_memory_table(records: list[Record]) -> str:
    """Images/s under `retain` over images/s under `system` (jaxcnn/host_memory.py), per
    f32 configuration: the latest ok record of each policy, where both exist among the
    records that name their policy."""
    ours = [
        r
        for r in only_ok(_own(records))
        if "throughput" in r
        and r["workload"].get("precision", "f32") == "f32"
        # records from before the policy was recorded ran on other days
        and r["env"].get("host_memory")
    ]
    latest: dict[tuple, dict[str, Record]] = defaultdict(dict)
    for r in sorted(ours, key=when):
        key = (_machine(r), _model(r), r["workload"]["batch_size"], configuration(r))
        latest[key][host_memory_policy(r)] = r
    pairs = {k: v for k, v in latest.items() if set(POLICIES) <= v.keys()}
    if not pairs:
        return ""
    configs = sorted({config for *_, config in pairs}, key=_jax_first)
    rows = [
        [*cell, *[_policy_ratio(pairs.get((*cell, config))) for config in configs]]
        for cell in sorted({k[:3] for k in pairs})
    ]
    return markdown_table(["machine", "model", "batch", *configs], rows)


def _policy_ratio(pair: dict[str, Record] | None) -> str:
    """`retain` over `system` images/s, the minor page faults per step of each in brackets."""
    if pair is None:
        return "-"
    faults = [pair[p]["throughput"].get("minor_faults_per_step") for p in POLICIES]
    shown = ["-" if f is None else f"{f:,.0f}" for f in faults]
    return f"{_rate(pair['retain']) / _rate(pair['system']):.2f} ({shown[0]} / {shown[1]})"


HOST_MEMORY_INTRO = (
    "The host allocator (`--set host_memory`, jaxcnn/host_memory.py): images/s with "
    "`retain` over images/s with glibc's defaults (`system`), the latest record of "
    "each, per f32 configuration; in brackets, the minor page faults per timed step "
    "under `system` / `retain`. The peers ran under each policy too "
    "(`benchmarks/peers.py --host-memory`)."
)
INTRO = (
    "Images/s of the train step (Adam, timing only), the median of timed blocks of "
    "steps [p10-p90]. `jax FORMULATION LOOP PRECISION`: `xla` = XLA's own "
    "convolutions and pools, `cpu` = patches + matmul, `onednn` = oneDNN's "
    "convolution kernels through XLA's FFI, an optional install (jaxcnn.formulation); "
    "`step` = "
    "one compiled step per batch dispatched ahead from Python, `device` = the epoch "
    "as one compiled loop over device-resident data. Peers (benchmarks/peers.py, "
    "same machine, same architecture, batch and timing rules): `torch eager|compile`, "
    "`keras graph|xla`. `best f32 / peer`: the best JAX f32 figure over the fastest "
    f"peer's (the goal is {GOAL}). Each cell is its configuration's latest record on "
    "that machine; every earlier run is listed, with its date, on the records page. "
    "Where a configuration was measured under "
    "both host memory policies (`--set host_memory`, jaxcnn/host_memory.py), its cell is "
    "the faster one's latest record, marked `(system)` where glibc's defaults beat "
    "`retain` (the default for the CPU's step loop). Where the paired driver measured "
    "the cell (below), `(paired R)` gives its ratio in turns, the verdict: the two "
    "records of the unpaired ratio may be days apart. `f32 matmul bound`: "
    "images/s if every FLOP "
    "of the best JAX configuration ran at the best f32 matmul rate measured in the "
    "same run (`matmul_ceiling` / `flops.per_image`): no formulation of the same "
    "FLOPs passes it on that machine. `goal / bound`: the goal's images/s "
    f"({GOAL}x the fastest peer's) over that bound, the share of the f32 matmul rate "
    "every FLOP would need to run at to meet it; above 1, the goal needs fewer FLOPs, "
    "not a better schedule."
)
PLOT = "study_bench.png"


def _after_table(records: list[Record], detail: bool = True) -> tuple[str, str]:
    """(each model's fastest figure, then the paired and host memory tables): what
    follows the bench table in REPORT.md and PERFORMANCE.md."""
    lines = "\n".join(f"- {line}" for line in best_batches(records))
    best = f"\n\nEach model's fastest JAX figure over the batches measured:\n\n{lines}"
    paired = bench_paired.paired_part(records, detail)
    host_memory = host_memory_table(records)
    if host_memory:
        paired += f"\n\n{HOST_MEMORY_INTRO}\n\n{host_memory}"
    return best if lines else "", paired


def verdicts(records: list[Record]) -> str:
    """Per CPU, in how many cells JAX's best f32 step meets the goal against the fastest
    peer, by the ratio measured in turns where there is one: where the verdict holds."""
    paired = bench_paired.paired_summaries(records)
    # machine -> [(cell, ratio, its rounds' p10 or None where not paired)]
    cells: dict[str, list[tuple[str, float, float | None]]] = defaultdict(list)
    for (platform, machine, model, batch), found in _groups(records).items():
        ours, peer = _best(found, False), _best(found, True)
        if platform != "cpu" or ours is None or peer is None:
            continue
        in_turns = paired.get((machine, model, batch))
        if in_turns is None:
            cells[machine].append((f"{model} at {batch}", _rate(ours) / _rate(peer), None))
        else:
            cells[machine].append((f"{model} at {batch}", in_turns["median"], in_turns["p10"]))
    lines = []
    for machine, found in sorted(cells.items()):
        short = [f"{cell} ({ratio:.2f})" for cell, ratio, _ in found if ratio < GOAL]
        close = [
            f"{cell} ({ratio:.2f}, p10 {p10:.2f})"
            for cell, ratio, p10 in found
            if ratio >= GOAL and p10 is not None and p10 < GOAL
        ]
        turns = sum(p10 is not None for _, _, p10 in found)
        lines.append(
            f"- {machine}: the goal is met in {len(found) - len(short)} of {len(found)} "
            f"cells ({turns} of them measured in turns)"
            + (f"; short of it: {', '.join(short)}" if short else "")
            + (
                "; met by the median, with a tenth of its rounds or more below 1: "
                + ", ".join(close)
                if close
                else ""
            )
            + "."
        )
    if not lines:
        return ""
    return (
        "On which CPUs the goal is met (a CPU named by its model and vector extensions, "
        "on which the peers' speed turns): JAX's best f32 figure over the fastest "
        "peer's, by the ratio in turns where the cell was paired:\n\n" + "\n".join(lines)
    )


def bench_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """The fastest train step on each device, against PyTorch and Keras."""
    table = bench_table(records)
    if not table:
        return "", []
    path = _bench_plot(_groups(records), out / PLOT)
    image = f"\n\n![bench]({path.name})" if path else ""
    best, rest = _after_table(records)
    held = verdicts(records)
    held = f"\n\n{held}" if held else ""
    text = f"## Study: bench\n\n{INTRO}\n\n{table}{held}{best}{image}{rest}"
    return text, [path] if path else []


def bench_block(records: list[Record], image: str | None) -> str:
    """The generated block of PERFORMANCE.md: the table, its provenance, the plot."""
    table = bench_table(records)
    if not table:
        return "No bench records yet: run `python -m experiments.run --study=bench`."
    ours = bench_records(records)
    hosts = sorted({_machine(r) for r in ours})
    commits = sorted({str(r["env"].get("git_commit"))[:7] for r in ours})
    provenance = (
        f"{len(ours)} bench record(s) from {', '.join(hosts)} at commit(s) "
        f"{', '.join(commits)}; generated by `python -m experiments.report results/ "
        "--performance PERFORMANCE.md`."
    )
    plot = f"\n\n![bench]({image})" if image else ""
    best, rest = _after_table(records, detail=False)  # pair by pair: results/REPORT.md
    held = verdicts(records)
    held = f"\n\n{held}" if held else ""
    return f"{INTRO}\n\n{table}{held}{best}\n\n{provenance}{plot}{rest}"


Panels = dict[tuple[str, str, str], dict[str, list[tuple[int, float]]]]


def bench_panels(groups: dict[tuple, dict[str, list[Record]]]) -> Panels:
    """{(platform, machine, model): {configuration: [(batch, images/s)]}}: the bench
    plot's panels, each configuration's shown figure (`_shown`) over batches."""
    panels: Panels = defaultdict(lambda: defaultdict(list))
    for (platform, machine, model, batch), cells in groups.items():
        for name in cells:
            r = _shown(cells, name)
            if r is not None and r["status"] == "ok":
                panels[(platform, machine, model)][name].append((batch, _rate(r)))
    return {k: {n: sorted(v) for n, v in lines.items()} for k, lines in sorted(panels.items())}


def bench_figure(panels: Panels, configs: list[str]) -> Any:
    """A small multiple readable at page width: a row per machine, a column per model,
    one colour per configuration across every panel (JAX solid, peers dashed), and one
    legend under the grid."""
    from matplotlib.ticker import NullFormatter

    machines = sorted({(platform, machine) for platform, machine, _ in panels})
    models = sorted({model for _, _, model in panels})
    fig, axes = pyplot().subplots(
        len(machines),
        len(models),
        figsize=(4.2 * len(models), 3.2 * len(machines) + 1.4),
        squeeze=False,
        layout="constrained",  # room for the legend outside the grid
    )
    palette = pyplot().get_cmap("tab20").colors
    colours = {name: palette[i % len(palette)] for i, name in enumerate(configs)}
    for (platform, machine, model), lines in panels.items():
        ax = axes[machines.index((platform, machine))][models.index(model)]
        for name in configs:
            points = lines.get(name)
            if points:
                style = "-" if name.startswith("jax") else "--"
                xs, ys = zip(*points, strict=True)
                ax.plot(xs, ys, style, marker="o", markersize=3, color=colours[name], label=name)
        ax.set(xscale="log", yscale="log")
        batches = sorted({b for points in lines.values() for b, _ in points})
        ax.set_xticks(batches, [str(b) for b in batches])  # the measured sizes only
        ax.xaxis.set_minor_formatter(NullFormatter())
        plain_log_y(ax)
        ax.tick_params(labelsize="small")
        ax.set_title(f"{model} on {_where(platform, machine)}", fontsize="small")
    for ax in axes[-1]:
        ax.set_xlabel("batch")
    for row in axes:
        row[0].set_ylabel("images/s")
    for ax in axes.flat:
        if not ax.get_lines():
            ax.set_visible(False)
    handles = {}
    for ax in axes.flat:
        for line in ax.get_lines():
            handles.setdefault(line.get_label(), line)
    fig.legend(
        [handles[n] for n in configs if n in handles],
        [n for n in configs if n in handles],
        loc="outside lower center",
        ncol=4,
        fontsize="small",
        frameon=False,
    )
    return fig


def _bench_plot(groups: dict[tuple, dict[str, list[Record]]], path: Path) -> Path | None:
    panels = bench_panels(groups)
    if not panels:
        return None
    return save(bench_figure(panels, _configs(groups)), path, dpi=100)


def bench_answer(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Per cell: the best JAX f32 figure over the fastest peer's, measured, on each CPU
    (the verdict depends on the CPU's vector extensions)."""
    paired = bench_paired.paired_ratios(records)
    rows = []
    for (_platform, machine, model, batch), cells in _groups(records).items():
        ours, peer = _best(cells, False), _best(cells, True)
        if ours and peer:
            in_turns = paired.get((machine, model, batch))
            turns = "" if in_turns is None else f" (in turns {in_turns:.2f})"
            rows.append(
                [
                    machine,
                    model,
                    batch,
                    f"{_rate(ours):,.0f} ({configuration(ours)})",
                    f"{_rate(peer):,.0f} ({configuration(peer)})",
                    f"{_rate(ours) / _rate(peer):.2f}{turns}",
                ]
            )
    if not rows:
        return "", []
    headers = ["CPU (measured on)", "model", "batch", "best JAX f32 images/s"]
    table = markdown_table([*headers, "fastest peer images/s", "JAX / peer"], rows)
    text = (
        f"The train step's images/s against PyTorch and Keras on the same machine (goal: "
        f"JAX / peer >= {GOAL:g}); each side's fastest configuration, measured, and where "
        "the two were measured in turns (benchmarks/paired.py) that ratio, the verdict: "
        "the two figures beside it may be days apart; timed steps only (no epochs), each "
        "JAX configuration named by its formulation, loop and precision:"
    )
    held = verdicts(records)
    return "\n\n".join(p for p in (text, table, held) if p), []


STUDY = Study(
    "bench",
    workloads=workloads,
    sections=(bench_study,),
    question="How fast is the train step, and how does it compare with PyTorch and Keras?",
    answer=bench_answer,
)
