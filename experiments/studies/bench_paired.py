"""The bench study's paired-run tables: records of `python -m benchmarks.paired`, where
the best JAX configuration of a cell and its fastest peer (or two JAX configurations)
are re-measured in turns (benchmarks/turns.py). The bench section
(experiments/studies/bench.py) reads them through `paired_ratios` (the bench table's
`(paired R)`) and `paired_part` (the tables). They live in the study package, not in
benchmarks/, which is no installed package: the report's verdict must not depend on
the folder it is run from.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from experiments.stats import summarize
from experiments.studies._common import only_ok
from experiments.studies._common import when as _when
from experiments.studies.base import Record
from experiments.studies.bench_cells import GOAL
from experiments.studies.bench_cells import machine as _machine
from experiments.studies.bench_cells import model_name as _model
from experiments.tables import format_table


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


def paired_summaries(records: list[Record]) -> dict[tuple, dict[str, Any]]:
    """(machine, model, batch) -> the ratio per round of its latest session of JAX
    against a peer framework, measured in turns, summarized (median, p10, p90, n)."""
    found = {}
    for key, sessions in _peer_sessions(records).items():
        ok = only_ok(sessions[-1])
        if ok:
            found[key] = _pooled_rounds(ok)[1]
    return found


def paired_ratios(records: list[Record]) -> dict[tuple, float]:
    """(machine, model, batch) -> the median of `paired_summaries` (the paired table's)."""
    return {key: summary["median"] for key, summary in paired_summaries(records).items()}


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
        ok = only_ok(session)
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
        ok = only_ok(session)
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
        ok = only_ok(session)
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
    "Paired (`python -m benchmarks.paired`): the cell's best JAX f32 configuration (the "
    "bench table's, or one named with `--jax`, such as `onednn`) and its fastest peer, "
    "each under its faster host memory policy, re-measured in turns: "
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
    "compiled step per batch dispatched from Python (`step`), which the first is meant "
    "to beat, and each loop under the two host memory policies (`retain`, "
    "`system`). A column per pair, `first / second`: the ratio of their timed blocks, "
    "round by round, median [p10-p90] over the latest session's passes; `(faster)` / "
    "`(slower)` where its whole p10-p90 lies above / below 1, nothing where the rounds "
    "go both ways."
)


def paired_part(records: list[Record], detail: bool = True) -> str:
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
