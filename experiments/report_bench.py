"""The bench study's report section: images/s of the train step per model, batch and
configuration (formulation x loop x precision), beside the peer frameworks measured on
the same machine by benchmarks/peers.py, and the ceiling the f32 matmul rate allows.

Every figure is read from records: `throughput` (median of timed blocks, p10-p90) for
JAX and peers alike, `matmul_ceiling` and `flops.per_image` for the bound.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from experiments.records import took_turns
from experiments.stats import summarize
from experiments.tables import format_table

Record = dict[str, Any]
GOAL = 1.5  # issue 8: JAX's best f32 figure over the fastest peer's


def configuration(record: Record) -> str:
    """`jax cpu device f32`, `torch compile`: what produced a bench figure."""
    w = record["workload"]
    if w.get("kind") == "peer":
        return f"{w.get('framework')} {w.get('mode')}"
    name = (record.get("formulation") or {}).get("name", "xla")
    return f"jax {name} {record.get('loop') or 'step'} {w.get('precision', 'f32')}"


def _model(record: Record) -> str:
    w = record["workload"]
    width = (w.get("model_overrides") or {}).get("width")
    return w["model"] + (f" {width}" if width else "")


def _machine(record: Record) -> str:
    d = record["device"]
    return d.get("host") or record["env"].get("host") or d["kind"]


def _when(record: Record) -> str:
    """The record's UTC time, for sorting ("" when it has none: oldest)."""
    return str(record["env"].get("utc_time") or "")


def _ok(session: list[Record]) -> list[Record]:
    return [r for r in session if r["status"] == "ok"]


def _rate(record: Record) -> float:
    return float(record["throughput"]["median"])


def _cell(record: Record | None) -> str:
    if record is None:
        return "-"
    if record["status"] != "ok":
        return record["status"]
    t = record["throughput"]
    return f"{t['median']:,.0f} [{t['p10']:,.0f}-{t['p90']:,.0f}]"


def _bound(record: Record) -> float | None:
    """Images/s if every FLOP of the step ran at the run's best measured f32 matmul rate."""
    ceiling = ((record.get("matmul_ceiling") or {}).get("float32") or {}).get("tflops")
    per_image = (record.get("flops") or {}).get("per_image")
    if not ceiling or not per_image:
        return None
    return ceiling * 1e12 / per_image


def host_memory_policy(record: Record) -> str:
    """The host allocator policy a record ran under (records before it existed: system)."""
    return (record["env"].get("host_memory") or {}).get("policy", "system")


def bench_records(records: list[Record]) -> list[Record]:
    """The latest ok-or-not record per (machine, model, batch, configuration, host
    memory policy)."""
    chosen: dict[tuple, Record] = {}
    for r in sorted(records, key=_when):
        w = r["workload"]
        if w.get("study") != "bench" or ("throughput" not in r and r["status"] == "ok"):
            continue
        if w.get("kind") == "paired" or took_turns(r):
            continue  # blocks taken in turns (benchmarks/paired.py): the paired table's
        key = (
            r["device"]["platform"],
            _machine(r),
            _model(r),
            w["batch_size"],
            configuration(r),
            host_memory_policy(r),
        )
        chosen[key] = r
    # Records from before the policy was recorded are glibc's defaults on another day:
    # a configuration measured since under a named policy leaves them out.
    named = {key[:-1] for key, r in chosen.items() if r["env"].get("host_memory")}
    return [r for key, r in chosen.items() if r["env"].get("host_memory") or key[:-1] not in named]


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
    ok = _ok(records)
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
    for (platform, host, name, size), cells in _groups(records).items():
        if (platform, host, name, size) == ("cpu", machine, model, batch):
            return _best(cells, peer=False), _best(cells, peer=True)
    return None, None


def _policy_note(record: Record | None, cells: dict[str, list[Record]]) -> str:
    """` (system)` where glibc's defaults beat `retain` for this configuration."""
    if record is None or len(cells.get(configuration(record)) or []) < 2:
        return ""
    return "" if host_memory_policy(record) == "retain" else f" ({host_memory_policy(record)})"


def _named(record: Record | None, cells: dict[str, list[Record]]) -> str:
    if record is None:
        return "-"
    return configuration(record).removeprefix("jax ") + _policy_note(record, cells)


def bench_table(records: list[Record]) -> str:
    """The bench records as one markdown table, "" when there are none."""
    groups = _groups(records)
    if not groups:
        return ""
    configs = sorted({c for cells in groups.values() for c in cells if c.startswith("jax")})
    peers = sorted({c for cells in groups.values() for c in cells if not c.startswith("jax")})
    paired = paired_ratios(records)
    rows = []
    for (platform, machine, model, batch), cells in groups.items():
        jax_best, peer_best = _best(cells, peer=False), _best(cells, peer=True)
        ratio = need = "-"
        bound = _bound(jax_best) if jax_best is not None else None
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
        rows.append(
            [
                f"{platform} ({machine})",
                model,
                batch,
                *[_cell(_shown(cells, c)) + _policy_note(_shown(cells, c), cells) for c in configs],
                *[_cell(_shown(cells, c)) + _policy_note(_shown(cells, c), cells) for c in peers],
                _named(jax_best, cells),
                _named(peer_best, cells),
                ratio,
                f"{bound:,.0f}" if bound else "-",
                need,
            ]
        )
    headers = [
        "device",
        "model",
        "batch",
        *configs,
        *peers,
        "best jax f32",
        "fastest peer",
        "best f32 / peer",
        "f32 matmul bound",
        "goal / bound",
    ]
    return format_table(headers, rows, markdown=True)


def best_batches(records: list[Record]) -> list[str]:
    """Per device and model, the JAX configuration and batch with the most images/s:
    `gpu (box) mnist_cnn: 1,234 [1,200-1,250] images/s at batch 2048 (jax xla device bf16)`."""
    best: dict[tuple, Record] = {}
    for (platform, machine, model, _), cells in _groups(records).items():
        for precision in ("f32", "bf16"):
            record = _best(cells, peer=False, precision=precision)
            held = best.get((platform, machine, model))
            if record is not None and (held is None or _rate(record) > _rate(held)):
                best[(platform, machine, model)] = record
    return [
        f"{platform} ({machine}) {model}: {_cell(r)} images/s at batch "
        f"{r['workload']['batch_size']} ({configuration(r)})"
        for (platform, machine, model), r in sorted(best.items())
    ]


def _best_part(records: list[Record]) -> str:
    lines = best_batches(records)
    if not lines:
        return ""
    items = "\n".join(f"- {line}" for line in lines)
    return f"\n\nEach model's fastest JAX figure over the batches measured:\n\n{items}"


POLICIES = ("system", "retain")


def host_memory_table(records: list[Record]) -> str:
    """Images/s under `retain` over images/s under `system` (jaxcnn/host_memory.py), per
    f32 configuration: the latest ok record of each policy, where both exist among the
    records that name their policy."""
    latest: dict[tuple, dict[str, Record]] = defaultdict(dict)
    for r in sorted(records, key=_when):
        w = r["workload"]
        if w.get("study") != "bench" or r["status"] != "ok" or "throughput" not in r:
            continue
        if took_turns(r):
            continue
        if w.get("precision", "f32") != "f32" or not r["env"].get("host_memory"):
            continue  # records from before the policy was recorded ran on other days
        key = (_machine(r), _model(r), w["batch_size"], configuration(r))
        latest[key][host_memory_policy(r)] = r
    pairs = {k: v for k, v in latest.items() if {"system", "retain"} <= v.keys()}
    if not pairs:
        return ""
    configs = sorted({config for *_, config in pairs}, key=lambda c: (not c.startswith("jax"), c))
    rows = []
    for machine, model, batch in sorted({k[:3] for k in pairs}):
        cells = []
        for config in configs:
            pair = pairs.get((machine, model, batch, config))
            if pair is None:
                cells.append("-")
                continue
            ratio = _rate(pair["retain"]) / _rate(pair["system"])
            faults = [pair[p]["throughput"].get("minor_faults_per_step") for p in POLICIES]
            shown = ["-" if f is None else f"{f:,.0f}" for f in faults]
            cells.append(f"{ratio:.2f} ({shown[0]} / {shown[1]})")
        rows.append([machine, model, batch, *cells])
    return format_table(["machine", "model", "batch", *configs], rows, markdown=True)


def _side(side: dict[str, Any]) -> str:
    """`jax cpu device f32 (retain)`: a paired side's configuration and host memory."""
    return f"{side['configuration']} ({side['host_memory']})"


def _spread(summary: dict[str, Any], digits: str = ",.0f") -> str:
    return f"{summary['median']:{digits}} [{summary['p10']:{digits}}-{summary['p90']:{digits}}]"


def _session(record: Record) -> str:
    """The run of benchmarks/paired.py a paired record came from (older: its own)."""
    return (record.get("session") or {}).get("id") or record["run_id"]


def _jax_versus_jax(record: Record) -> bool:
    """A pair whose peer role JAX itself played (another loop or formulation)."""
    peer = (record.get("paired") or {}).get("peer") or {}
    return str(peer.get("configuration", "")).startswith("jax ")


def _sessions(records: list[Record], jax_versus_jax: bool) -> dict[tuple, list[list[Record]]]:
    """(machine, model, batch, first side, second side) -> its sessions of
    benchmarks/paired.py, oldest first, each its paired records; pairs against a peer
    framework or (`jax_versus_jax`) against another JAX configuration."""
    cells: dict[tuple, dict[str, list[Record]]] = defaultdict(dict)
    for r in sorted(records, key=_when):
        w = r["workload"]
        if w.get("kind") != "paired" or w.get("study") != "bench":
            continue
        if _jax_versus_jax(r) != jax_versus_jax:
            continue
        sides = r.get("paired") or {}
        names = tuple(_side(sides[s]) if s in sides else "-" for s in ("jax", "peer"))
        key = (_machine(r), _model(r), w["batch_size"], *names)
        cells[key].setdefault(_session(r), []).append(r)
    return {key: list(found.values()) for key, found in sorted(cells.items())}


def _latest_sessions(records: list[Record], jax_versus_jax: bool) -> dict[tuple, list[Record]]:
    """(machine, model, batch, first side, second side) -> its latest session's records."""
    return {key: found[-1] for key, found in _sessions(records, jax_versus_jax).items()}


def _peer_sessions(records: list[Record]) -> dict[tuple, list[list[Record]]]:
    """(machine, model, batch) -> its sessions of JAX against a peer framework, oldest
    first, whatever the two sides were (the best JAX configuration and the fastest peer
    change as the code and the records do)."""
    cells: dict[tuple, list[list[Record]]] = defaultdict(list)
    for key, found in _sessions(records, jax_versus_jax=False).items():
        cells[key[:3]].extend(found)
    return {
        key: sorted(found, key=lambda session: _when(session[-1]))
        for key, found in sorted(cells.items())
    }


def paired_ratios(records: list[Record]) -> dict[tuple, float]:
    """(machine, model, batch) -> the median ratio per round of its latest session of
    JAX against a peer framework, measured in turns (the paired table's)."""
    ratios = {}
    for key, sessions in _peer_sessions(records).items():
        ok = _ok(sessions[-1])
        if ok:
            ratios[key] = _pooled_rounds(ok)[1]["median"]
    return ratios


def _commit(record: Record) -> str:
    return str(record["env"].get("git_commit") or "")[:7]


def _pooled_rounds(ok: list[Record]) -> tuple[dict[str, list[float]], dict[str, Any]]:
    """Each side's images/s over every round of `ok`'s passes, and their ratio round by
    round, summarized."""
    rounds = [one for r in ok for one in r["paired"]["rounds"]]
    rates = {s: [one[s]["images_per_s"] for one in rounds] for s in ("jax", "peer")}
    return rates, summarize([j / p for j, p in zip(rates["jax"], rates["peer"], strict=True)])


def paired_table(records: list[Record], jax_versus_jax: bool = False) -> str:
    """The paired records (benchmarks/paired.py), each session's passes' rounds pooled:
    each side's images/s, the ratio of the blocks round by round, and each pass's median
    ratio, and the commit it measured; "" when there are none. JAX against a peer
    framework: a row per machine, model and batch, its latest session, and the latest
    one that measured an earlier commit (its pooled ratio and commit: what the changes
    between did, both measured in turns). Or (`jax_versus_jax`) against another JAX
    configuration: a row per pair of configurations, the verdict `(faster)` /
    `(slower)` when the ratio's whole p10-p90 lies above / below 1."""
    if jax_versus_jax:
        cells = {key: [session] for key, session in _latest_sessions(records, True).items()}
    else:
        cells = _peer_sessions(records)
    rows = []
    for key, sessions in cells.items():
        session = sessions[-1]
        ok = _ok(session)
        sides = session[-1].get("paired") or {}
        names = [_side(sides[s]) if s in sides else "-" for s in ("jax", "peer")]
        measured = _commit(session[-1])
        commit = measured or "-"
        before = [] if jax_versus_jax else [_before(sessions[:-1], measured)]
        if not ok:
            status = session[-1]["status"]
            rows.append([*key[:3], *names, status, "-", "-", "-", "-", commit, *before])
            continue
        rates, ratio = _pooled_rounds(ok)
        passes = ", ".join(f"{r['paired']['ratio']['median']:.2f}" for r in ok)
        failed = len(session) - len(ok)
        rows.append(
            [
                *key[:3],
                *names,
                _spread(summarize(rates["jax"])),
                _spread(summarize(rates["peer"])),
                _spread(ratio, ".2f") + _paired_verdict(ratio, jax_versus_jax),
                passes + (f" ({failed} failed)" if failed else ""),
                ratio["n"],
                commit,
                *before,
            ]
        )
    if not rows:
        return ""
    if jax_versus_jax:
        headers = ["machine", "model", "batch", "first", "second", "first img/s"]
        headers += ["second img/s", "first / second, per round", "per pass", "rounds"]
        headers += ["commit"]
    else:
        headers = ["machine", "model", "batch", "jax", "peer", "jax img/s", "peer img/s"]
        headers += ["jax / peer, per round", "per pass", "rounds", "commit", "earlier commit"]
    return format_table(headers, rows, markdown=True)


def _before(earlier: list[list[Record]], commit_now: str) -> str:
    """The latest of `earlier` sessions that measured another commit than `commit_now`
    (a session re-measuring the same code is no "before"): its pooled ratio per round
    and its commit."""
    for session in reversed(earlier):
        ok = _ok(session)
        if ok and (not commit_now or _commit(ok[-1]) != commit_now):
            commit = _commit(ok[-1])
            return f"{_pooled_rounds(ok)[1]['median']:.2f}" + (f" ({commit})" if commit else "")
    return "-"


LOOP_WORD = 2  # in `configuration`'s `jax FORMULATION LOOP PRECISION`


def _pair_label(first: str, second: str) -> str:
    """`device (system) / step (retain)`: two JAX sides by what tells them apart, the
    loop and the host memory policy always named, the other words they share dropped."""
    a, b = first.split(), second.split()
    if len(a) != len(b) or len(a) <= LOOP_WORD:
        return f"{first} / {second}"
    keep = [i for i in range(len(a)) if a[i] != b[i] or i in (LOOP_WORD, len(a) - 1)]
    return f"{' '.join(a[i] for i in keep)} / {' '.join(b[i] for i in keep)}"


def jax_pairs_matrix(records: list[Record]) -> str:
    """JAX against JAX at a glance: a row per machine, model and batch, a column per
    pair of configurations, each cell the latest session's ratio per round, median
    [p10-p90], with its verdict; "" when there are none."""
    cells: dict[tuple, dict[str, str]] = defaultdict(dict)
    for (machine, model, batch, first, second), session in _latest_sessions(
        records, jax_versus_jax=True
    ).items():
        ok = _ok(session)
        if ok:
            _, ratio = _pooled_rounds(ok)
            cell = _spread(ratio, ".2f") + _paired_verdict(ratio, jax_versus_jax=True)
        else:
            cell = session[-1]["status"]
        cells[(machine, model, batch)][_pair_label(first, second)] = cell
    if not cells:
        return ""
    columns = sorted({label for row in cells.values() for label in row})
    rows = [[*key, *(row.get(c, "-") for c in columns)] for key, row in sorted(cells.items())]
    return format_table(["machine", "model", "batch", *columns], rows, markdown=True)


def _paired_verdict(ratio: dict[str, Any], jax_versus_jax: bool) -> str:
    if not jax_versus_jax:
        return " (goal met)" if ratio["median"] >= GOAL else ""
    if ratio["p10"] > 1:
        return " (faster)"
    return " (slower)" if ratio["p90"] < 1 else ""


PAIRED_INTRO = (
    "Paired (`python -m benchmarks.paired`): the cell's best JAX f32 configuration and "
    "its fastest peer, each under its faster host memory policy, re-measured in turns: "
    "each side, in its own process, compiles and warms up alone, then their turns "
    "alternate, one process computing at a time, the side that goes first swapping "
    "every round; a turn is one untimed block (the other process just had the cores "
    "and caches) and one timed block. `jax / peer, per round`: the ratio of the two "
    "timed blocks of each round, median [p10-p90] over all rounds of the latest "
    "session's passes, so that drift that moves both blocks of a round alike does not "
    "enter it; `per pass`: each pass's median ratio, new processes each pass (this "
    "VM's speed moves between processes by more than within one); `(goal met)` where "
    f"the median reaches {GOAL}. Images/s: each side's timed blocks, median [p10-p90]. "
    "`earlier commit`: the median ratio per round of the cell's latest session that "
    "measured an earlier commit, and that commit, so a change's effect is read from "
    "two measurements in turns, not from two sessions' images/s (its sides may "
    "differ: each session pairs the best JAX configuration and the fastest peer the "
    "records named then)."
)


LOOPS_INTRO = (
    "The same pairs one by one: each side's images/s (its timed blocks, median "
    "[p10-p90]), `first / second, per round` as in the matrix, and each pass's median "
    "ratio (new processes each pass)."
)


MATRIX_INTRO = (
    "JAX against JAX (`python -m benchmarks.paired --peer=jax:FORMULATION:LOOP:POLICY`), "
    "measured in turns as above: the epoch as one compiled loop (`device`) against one "
    "compiled step per batch dispatched from Python (`step`), which issue 8 asks the "
    "first to beat, and each loop under the two host memory policies (`retain`, "
    "`system`). A column per pair, `first / second`: the ratio of their timed blocks, "
    "round by round, median [p10-p90] over the latest session's passes; `(faster)` / "
    "`(slower)` where its whole p10-p90 lies above / below 1, nothing where the rounds "
    "go both ways."
)


def _paired_part(records: list[Record], detail: bool = True) -> str:
    """The paired tables: JAX against its peers, then JAX against JAX as a matrix and,
    with `detail`, pair by pair with each side's images/s and each pass."""
    parts = []
    table = paired_table(records)
    parts.append(f"\n\n{PAIRED_INTRO}\n\n{table}" if table else "")
    matrix = jax_pairs_matrix(records)
    parts.append(f"\n\n{MATRIX_INTRO}\n\n{matrix}" if matrix else "")
    if matrix:
        commits = Counter(
            _commit(session[-1]) or "-" for session in _latest_sessions(records, True).values()
        )
        measured = ", ".join(
            f"{c} ({n} pair{'s' if n > 1 else ''})" for c, n in sorted(commits.items())
        )
        parts.append(f"\n\nThe matrix's sessions measured commits {measured}.")
    if matrix and not detail:
        parts.append(
            " Pair by pair, with each side's images/s, each pass and its commit: results/REPORT.md."
        )
    table = paired_table(records, jax_versus_jax=True) if detail else ""
    parts.append(f"\n\n{LOOPS_INTRO}\n\n{table}" if table else "")
    return "".join(parts)


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
    "convolutions and pools, `cpu` = patches + matmul (jaxcnn.formulation); `step` = "
    "one compiled step per batch dispatched ahead from Python, `device` = the epoch "
    "as one compiled loop over device-resident data. Peers (benchmarks/peers.py, "
    "same machine, same architecture, batch and timing rules): `torch eager|compile`, "
    "`keras graph|xla`. `best f32 / peer`: the best JAX f32 figure over the fastest "
    f"peer's (the issue's goal is {GOAL}). Where a configuration was measured under "
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


def bench_study(records: list[Record], out: Path) -> tuple[str, list[Path]]:
    """Issue 8: the fastest train step on each device, against PyTorch and Keras."""
    table = bench_table(records)
    if not table:
        return "", []
    groups = _groups(records)
    configs = sorted({c for cells in groups.values() for c in cells if c.startswith("jax")})
    peers = sorted({c for cells in groups.values() for c in cells if not c.startswith("jax")})
    path = _plot(groups, configs, peers, out / PLOT)
    image = f"\n\n![bench]({path.name})" if path else ""
    text = (
        f"## Study: bench (issue 8)\n\n{INTRO}\n\n{table}{_best_part(records)}{image}"
        f"{_paired_part(records)}{_host_memory_part(records)}"
    )
    return text, [path] if path else []


def _host_memory_part(records: list[Record]) -> str:
    table = host_memory_table(records)
    return f"\n\n{HOST_MEMORY_INTRO}\n\n{table}" if table else ""


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
    paired = _paired_part(records, detail=False)  # pair by pair: results/REPORT.md
    best = _best_part(records)
    return f"{INTRO}\n\n{table}{best}\n\n{provenance}{plot}{paired}{_host_memory_part(records)}"


def _plot(groups: dict[tuple, dict[str, list[Record]]], configs, peers, path: Path) -> Path | None:
    series: dict[tuple, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))
    for (platform, machine, model, batch), cells in groups.items():
        for name in cells:
            r = _shown(cells, name)
            if r["status"] == "ok":
                series[(platform, machine, model)][name].append((batch, _rate(r)))
    if not series:
        return None
    fig, axes = plt.subplots(1, len(series), figsize=(5 * len(series), 4.2), squeeze=False)
    for ax, ((platform, machine, model), lines) in zip(
        axes[0], sorted(series.items()), strict=True
    ):
        for name in [*configs, *peers]:
            points = sorted(lines.get(name, []))
            if points:
                style = "--" if not name.startswith("jax") else "-"
                ax.plot(*zip(*points, strict=True), style, marker="o", label=name)
        ax.set(xscale="log", yscale="log", xlabel="batch", ylabel="images/s")
        batches = sorted({b for points in lines.values() for b, _ in points})
        ax.set_xticks(batches, [str(b) for b in batches])  # the measured sizes only
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{model} on {platform} ({machine})", fontsize="small")
        ax.legend(fontsize="xx-small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
