"""python -m benchmarks.paired [--models ...] [--batch-sizes ...] [--jax best|F:LOOP:POLICY]
[--peer fastest|FRAMEWORK:MODE:POLICY|jax:FORMULATION:LOOP:POLICY] [--peer-python PATH]
[--data-dir DIR] [--out DIR]: JAX's train step and a peer framework's (or another JAX
configuration's), re-measured in turns, one paired record per model and batch.

Why: on this VM the CPU's speed drifts within minutes by more than many of the effects
the bench compares, and the bench times JAX and the peers minutes apart, in separate
runs. Here both run at once, each in its own process and environment: the JAX side is
`python -m experiments.run --model=...` (the project's venv, launched through
benchmarks/turns.py), the peer side `python -m benchmarks.peers` (the peers' venv).
Each compiles and warms up alone; then their timed blocks alternate, one process
computing while the other waits on a pipe (benchmarks/turns.py), and the side that goes
first swaps every round. The ratio is taken round by round, from two blocks adjacent in
time.

Default pairs: the bench table's own (`--jax=best --peer=fastest`): for each model and
batch, the best JAX f32 configuration and the fastest peer among OUT's bench records on
this host, each under the host memory policy it was fastest with. Each side writes its
own full record into a folder of its own; this driver appends them to OUT with env.turns
naming the pair (the bench table leaves them out), then one record of kind "paired" with
every round's images/s and the ratios.

The other side can be JAX itself (`--peer=jax:cpu:step:retain`): whether the epoch as one
compiled loop beats per-step dispatch is a question about 10%, and needs the two loops
measured in turns just as much (docs/performance-log.md, "The compiled epoch against
per-step dispatch, measured in turns"):

    python -m benchmarks.paired --jax=cpu:device:retain --peer=jax:cpu:step:retain

Optional and never run in CI (it needs the peers' venv, benchmarks/README.md); the
tests pair two JAX sides.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import turns
from benchmarks.command_line import (
    MLP_WIDTH,
    MODELS,
    UsageError,
    add_common,
    batch_sizes,
    names,
    records_path,
)
from experiments import records
from experiments.cli.options import OneLineParser  # JAX-free
from experiments.records.stats import summarize
from experiments.studies import bench as bench_study
from experiments.studies.bench_cells import machines_here

PROG = "python -m benchmarks.paired"
REPO = Path(__file__).resolve().parents[1]
ROUNDS = 7  # experiments.harness.measure.THROUGHPUT_REPEATS: the JAX side's timed blocks
STEPS = 20  # steps per block, as the bench (BENCH_TIMING_STEPS) and the peers' default
POLICIES = ("retain", "system")
PEER_PYTHON = ".peers-venv/bin/python"  # where benchmarks/README.md sets it up


@dataclass(frozen=True)
class Config:
    """One side of a pair: `jax FORMULATION LOOP f32` or `FRAMEWORK MODE`, and a policy."""

    side: str  # jax | peer: the two roles of a pair
    first: str  # JAX: formulation; a peer framework: the framework
    second: str  # JAX: loop; a peer framework: its mode
    host_memory: str
    dataset: str = "synthetic"
    jax_peer: bool = False  # the peer role played by JAX itself (another configuration)

    @property
    def runs_jax(self) -> bool:
        return self.side == "jax" or self.jax_peer

    @property
    def configuration(self) -> str:  # as bench_study.configuration names it
        if self.runs_jax:
            return f"jax {self.first} {self.second} f32"
        return f"{self.first} {self.second}"


def names_jax_peer(text: str) -> bool:
    """Whether a `--peer` value asks for JAX itself: `jax:FORMULATION:LOOP:POLICY`."""
    return text.split(":")[0] == "jax"


def parse_config(side: str, text: str) -> Config:
    """`cpu:device:retain` (jax), `keras:graph:system` or `jax:cpu:step:retain` (peer)."""
    parts = text.split(":")
    jax_peer = side == "peer" and names_jax_peer(text)
    if jax_peer:
        parts = parts[1:]
    if len(parts) != 3 or parts[2] not in POLICIES or not all(parts):
        example = "cpu:device:retain" if side == "jax" else "keras:graph:system"
        also = ", jax:FORMULATION:LOOP:POLICY" if side == "peer" else ""
        raise UsageError(
            f"--{side} {text!r}: give FIRST:SECOND:POLICY, e.g. {example} "
            f"(POLICY one of {', '.join(POLICIES)}){also}, "
            f"or {'best' if side == 'jax' else 'fastest'}"
        )
    dataset = "mnist" if side == "jax" or jax_peer else "synthetic"
    return Config(side, *parts, dataset=dataset, jax_peer=jax_peer)


def config_of(record: records.TrainRecord | records.PeerRecord) -> Config:
    """The configuration a bench record ran."""
    w, memory = record.workload, record.env.host_memory
    policy = (memory.policy if memory else None) or "system"
    if isinstance(record, records.PeerRecord):
        return Config("peer", w.framework, w.mode, policy)
    formulation = (record.formulation.name if record.formulation else None) or "xla"
    return Config("jax", formulation, record.loop or "step", policy, w.dataset)


def table_name(model: str) -> str:
    return f"mlp {MLP_WIDTH}" if model == "mlp" else model


def choose(
    bench: list[records.Record],
    model: str,
    batch: int,
    jax: str,
    peer: str,
    machines: Sequence[str],
) -> tuple[Config, Config]:
    """The pair to measure: named, or the bench table's best JAX f32 and fastest peer of
    the first of `machines` (bench_cells.machines_here) that has the cell."""
    best = fastest = None
    for machine in machines:
        best, fastest = bench_study.fastest_pair(bench, table_name(model), batch, machine)
        if best is not None or fastest is not None:
            break
    host = machines[0]
    chosen = []
    for side, text, record in (("jax", jax, best), ("peer", peer, fastest)):
        if text not in ("best", "fastest"):
            chosen.append(parse_config(side, text))
        elif record is None:
            raise UsageError(
                f"no ok bench record of {side} for {model} at batch {batch} on {host}: run "
                f"the bench first (benchmarks/README.md) or name --{side}"
            )
        else:
            chosen.append(config_of(record))
    return chosen[0], chosen[1]


def jax_command(
    python: str, config: Config, model: str, batch: int, data_dir: str | None, out: str
) -> list[str]:
    """`python -m experiments.run` of one workload, its timed blocks taking turns."""
    command = [python, "-m", "benchmarks.turns", "experiments.run", "--device=cpu"]
    command.append(f"--model={model}")
    if model == "mlp":
        command += ["--set", f"width={MLP_WIDTH}"]
    command += [
        f"--batch-size={batch}",
        "--epochs=0",
        *("--set", f"formulation={config.first}"),
        *("--set", f"loop={config.second}"),
        *("--set", "precision=f32"),
        *("--set", f"host_memory={config.host_memory}"),
        f"--dataset={config.dataset}",
        *("--set", f"timing_steps={STEPS}"),
        *("--set", "checkpoints=false"),
        "--force",
        *("--set", "progress=false"),
        f"--out={out}",
    ]
    return command + ([f"--data-dir={data_dir}"] if data_dir else [])


def side_command(
    args: argparse.Namespace, config: Config, model: str, batch: int, out: str
) -> list[str]:
    """The command that runs one side: experiments.run (JAX) or benchmarks.peers."""
    if config.runs_jax:
        return jax_command(args.jax_python, config, model, batch, args.data_dir, out)
    return peer_command(args.peer_python, config, model, batch, out)


def peer_command(python: str, config: Config, model: str, batch: int, out: str) -> list[str]:
    return [
        python,
        "-m",
        "benchmarks.peers",
        f"--frameworks={config.first}",
        f"--modes={config.second}",
        f"--models={model}",
        f"--batch-sizes={batch}",
        f"--steps={STEPS}",
        f"--repeats={ROUNDS}",
        f"--host-memory={config.host_memory}",
        f"--out={out}",
    ]


class SideFailed(RuntimeError):
    """A side stopped before or during its turns: one line, from its own output."""


@dataclass
class Side:
    """One running side: its process and the driver's ends of its two pipes."""

    name: str  # jax | peer
    command: list[str]
    pair: str
    log: Path
    process: subprocess.Popen | None = None
    go: int = -1
    done: Any = None

    def start(self) -> dict[str, Any]:
        """Start it and wait until it is ready to time (compiled and warmed up alone)."""
        go_read, self.go = os.pipe()
        done_read, done_write = os.pipe()
        spec = {"go": go_read, "done": done_write, "pair": self.pair, "side": self.name}
        env = {**os.environ, turns.ENV_VAR: json.dumps(spec)}
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(go_read, done_write),
            )
        os.close(go_read)  # the child holds these now: its exit closes them, so the
        os.close(done_write)  # driver reads EOF instead of waiting forever
        self.done = os.fdopen(done_read, "rb")
        return self.wait()

    def wait(self) -> dict[str, Any]:
        """The side's next report (it is idle once it has sent one)."""
        line = self.done.readline()
        if not line:
            raise SideFailed(f"{self.name} side stopped: {self.last_words()}")
        return json.loads(line)

    def turn(self) -> dict[str, Any]:
        """Let it time one block; return its report of the block."""
        try:
            os.write(self.go, b"go\n")
        except BrokenPipeError:
            raise SideFailed(f"{self.name} side stopped: {self.last_words()}") from None
        report = self.wait()
        if "images_per_s" not in report:
            raise SideFailed(f"{self.name} side sent {report} instead of a block's report")
        return report

    def finish(self) -> int:
        """Let it write its record and exit; its exit code."""
        try:
            os.write(self.go, b"go\n")
        except BrokenPipeError:
            pass
        return self.process.wait()

    def last_words(self) -> str:
        """The side's exit code and the last line it printed."""
        code = self.process.wait() if self.process else None
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return f"exit code {code}: {lines[-1] if lines else 'no output'} (log: {self.log})"

    def stop(self) -> None:
        """Whatever state it is in, it is gone afterwards, its pipes closed."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        for close in (lambda: os.close(self.go), lambda: self.done and self.done.close()):
            try:
                close()
            except OSError:
                pass


def run_pair(jax: Side, peer: Side, rounds: int = ROUNDS) -> list[dict[str, Any]]:
    """Start both sides one after the other, alternate their blocks `rounds` times (the
    side that goes first swapping every round), let each finish alone. The rounds."""
    try:
        sides = (jax, peer)
        blocks = {side.name: side.start().get("blocks") for side in sides}  # one by one
        if set(blocks.values()) != {rounds}:
            raise SideFailed(f"the sides time {blocks} blocks, not {rounds} each")
        done = []
        for number in range(rounds):
            order = sides if number % 2 == 0 else sides[::-1]
            one = {"first": order[0].name}
            for side in order:
                one[side.name] = side.turn()
            done.append(one)
            print(
                f"  round {number + 1}/{rounds}: jax {one['jax']['images_per_s']:,.0f}, "
                f"peer {one['peer']['images_per_s']:,.0f} img/s, "
                f"ratio {one['jax']['images_per_s'] / one['peer']['images_per_s']:.2f}",
                flush=True,
            )
        for side in sides:
            code = side.finish()
            if code != 0:
                raise SideFailed(f"{side.name} side: {side.last_words()}")
        return done
    finally:
        jax.stop()
        peer.stop()


def side_records(folder: Path, pair: str, side: str) -> list[records.Record]:
    """The records a side wrote into its own `folder`, each with `env.turns` naming the
    pair and the side (which keeps them out of every table but the paired one)."""
    path = folder / records.RECORDS_FILE
    saved = records.load(path) if path.exists() else []
    turns = {"pair": pair, "side": side}
    return [r.model_copy(update={"env": r.env.model_copy(update={"turns": turns})}) for r in saved]


def paired_record(
    pair: str,
    model: str,
    batch: int,
    configs: tuple[Config, Config],
    rounds: list[dict[str, Any]] | None,
    sides: dict[str, records.TrainRecord | records.PeerRecord | None],
    error: str | None,
    session: dict[str, Any],
) -> dict[str, Any]:
    """The driver's record of one pair, ok (with its rounds) or not (with why);
    `session` {id, pass, passes}: which run of the driver, and which pass over its plan."""
    jax_record = sides.get("jax")
    overrides = {"width": MLP_WIDTH} if model == "mlp" else {}
    if jax_record is not None:
        overrides = jax_record.workload.model_overrides
    record: dict[str, Any] = {
        "schema_version": records.SCHEMA_VERSION,
        "run_id": pair,
        "status": "error" if error else "ok",
        "message": error,
        "workload": {
            "kind": "paired",
            "study": "bench",
            "model": model,
            "model_overrides": overrides,
            "dataset": configs[0].dataset,
            "batch_size": batch,
            "strategy": "single",
            "epochs": 0,
            "precision": "f32",
            "timing_steps": STEPS,
        },
        "device": jax_record.device.model_dump(exclude_unset=True) if jax_record else
        {"platform": "cpu", "kind": "cpu", "count": 1, "process_count": 1,
            "host": socket.gethostname()},
        "env": records.environment(packages=()),
        "session": session,
    }  # fmt: skip
    if error:  # what was asked, so that the report finds the failure's cell
        record["paired"] = {
            name: {"configuration": config.configuration, "host_memory": config.host_memory}
            for name, config in zip(("jax", "peer"), configs, strict=True)
        }
        return record
    record["paired"] = {
        "rounds": rounds,
        "ratio": summarize(
            [one["jax"]["images_per_s"] / one["peer"]["images_per_s"] for one in rounds]
        ),
        **{name: _side_part(sides[name]) for name in ("jax", "peer")},
    }
    return record


def _side_part(side: records.TrainRecord | records.PeerRecord) -> dict[str, Any]:
    """What a side's own record says it ran, as the paired record carries it."""
    throughput = side.throughput
    return {
        "run_id": side.run_id,
        "configuration": bench_study.configuration(side),
        "host_memory": bench_study.host_memory_policy(side),
        "throughput": throughput.model_dump(exclude_unset=True) if throughput else None,
    }


def measure_pair(
    model: str,
    batch: int,
    configs: tuple[Config, Config],
    command: Callable[[Config, Path], list[str]],
    out: Path,
    logs: Path,
    session: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run one pair, `command(config, folder)` running a side that writes its records
    into `folder` (one of its own, under `logs`); append the sides' records to OUT
    (`side_records`), then the paired record, all kept elsewhere if OUT cannot take them
    (records.NotRecorded says where); the paired record."""
    pair = uuid.uuid4().hex
    session = session or {"id": pair, "pass": 1, "passes": 1}
    folders = {c.side: logs / f"{model}-{batch}-{c.side}-{session['pass']}" for c in configs}
    sides = [
        Side(c.side, command(c, folders[c.side]), pair, logs / f"{folders[c.side].name}.log")
        for c in configs
    ]
    rounds, error = None, None
    try:
        rounds = run_pair(*sides)
    except SideFailed as failed:
        error = str(failed)
    adopted = {s.name: side_records(folders[s.name], pair, s.name) for s in sides}
    written = {name: saved[-1] if saved else None for name, saved in adopted.items()}
    if error is None and None in written.values():
        missing = [name for name, r in written.items() if r is None]
        error = f"no record from the {' and '.join(missing)} side in {logs}"
    if error is None:
        failed = [r for r in written.values() if r.status != "ok"]
        if failed:
            error = f"{failed[0].status}: {failed[0].message}"
    record = paired_record(pair, model, batch, configs, rounds, written, error, session)
    # each side's record written again as its line held it, with its turns
    sides_records = [r.model_dump(exclude_unset=True) for saved in adopted.values() for r in saved]
    records.append_or_keep(out / records.RECORDS_FILE, *sides_records, record)
    return record


# --- Command line -------------------------------------------------------------------------


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(prog=PROG, description=__doc__.split("\n\n")[0].split("]: ", 1)[-1].strip())
    add_common(p)
    p.add_argument(
        "--jax", default="best", help="best (the bench table's best f32, default) or "
        "FORMULATION:LOOP:POLICY, e.g. cpu:device:retain"
    )  # fmt: skip
    p.add_argument(
        "--peer", default="fastest", help="fastest (the bench table's, default), "
        "FRAMEWORK:MODE:POLICY, e.g. keras:graph:system, or JAX itself: "
        "jax:FORMULATION:LOOP:POLICY, e.g. jax:cpu:step:retain"
    )  # fmt: skip
    p.add_argument("--jax-python", default=sys.executable, help="default: this python")
    p.add_argument(
        "--peer-python", default=PEER_PYTHON, help=f"the peers' venv (default {PEER_PYTHON})"
    )
    p.add_argument("--passes", type=int, default=3, help="passes over the pairs (default 3)")
    p.add_argument("--data-dir", help="MNIST's IDX files, for the JAX side (as the bench)")
    args = p.parse_args(argv)
    args.models = names(args.models, MODELS, "model")
    args.batch_sizes = batch_sizes(args.batch_sizes)
    args.records = records_path(args.out)
    if args.passes < 1:
        raise UsageError(f"--passes {args.passes}: must be >= 1")
    needed = ("jax_python",) if names_jax_peer(args.peer) else ("jax_python", "peer_python")
    for name in needed:
        if not Path(getattr(args, name)).exists():
            raise UsageError(
                f"--{name.replace('_', '-')} {getattr(args, name)} does not exist"
                + (": set up the peers' venv, benchmarks/README.md" if "peer" in name else "")
            )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(argv)
        out = Path(args.out)
        bench = records.load(args.records) if args.records.exists() else []
        here = machines_here()
        plan = [
            (model, batch, choose(bench, model, batch, args.jax, args.peer, here))
            for model in args.models
            for batch in args.batch_sizes
        ]
    except UsageError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    logs = Path(tempfile.mkdtemp(prefix="jaxcnn-paired-"))
    failures, session = 0, uuid.uuid4().hex
    # Pass after pass over the whole plan: each pair's processes meet the VM at another
    # time, and its speed moves between processes by more than within one.
    for number, (model, batch, configs) in _passes(plan, args.passes):
        jax_config, peer_config = configs
        print(
            f"pass {number}/{args.passes}, {model} batch {batch}: {jax_config.configuration} "
            f"({jax_config.host_memory}) vs {peer_config.configuration} "
            f"({peer_config.host_memory})",
            flush=True,
        )

        def command(config: Config, folder: Path, model=model, batch=batch) -> list[str]:
            return side_command(args, config, model, batch, str(folder))

        where = {"id": session, "pass": number, "passes": args.passes}
        try:
            record = measure_pair(model, batch, configs, command, out, logs, where)
        except KeyboardInterrupt:  # both sides are stopped; what was recorded stays
            print(f"interrupted: the pairs before this one are in {out}", file=sys.stderr)
            return 130
        except records.NotRecorded as e:  # kept elsewhere: the next pair would fare no better
            print(f"error: {e}", file=sys.stderr)
            return 1
        if record["status"] != "ok":
            failures += 1
            print(f"  {record['status']}: {record['message']}", flush=True)
            continue
        ratio = record["paired"]["ratio"]
        print(
            f"  jax / peer per round: {ratio['median']:.2f} "
            f"[{ratio['p10']:.2f}-{ratio['p90']:.2f}], n={ratio['n']}",
            flush=True,
        )
    total = len(plan) * args.passes
    print(f"{total - failures} of {total} pairs ok -> {out / records.RECORDS_FILE} (logs: {logs})")
    return 1 if failures else 0


def _passes(plan: list, passes: int) -> list[tuple[int, Any]]:
    return [(number, cell) for number in range(1, passes + 1) for cell in plan]


if __name__ == "__main__":
    sys.exit(main())
