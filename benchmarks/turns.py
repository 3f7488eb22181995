"""Timed blocks taken in turns with another process: the side of a paired measurement
(benchmarks/paired.py), inside a JAX bench workload or a peer framework's.

On this VM the CPU's speed drifts by more than many of the effects compared, within
minutes; two frameworks measured one after the other can differ by the drift alone. A
paired run starts both, lets each compile and warm up alone, then alternates their
timed blocks, one process computing at a time, so every JAX block has a peer block
beside it in time. The driver hands the turn over through two pipes per side, named
in the environment variable `JAXCNN_TURNS` (JSON: go and done file descriptors, the
pair's id and this side's name). Unset, `timed_blocks` runs the blocks back to back,
as always.

The peers call `timed_blocks` themselves. The JAX side is the study's own command,
launched through this module (`python -m benchmarks.turns experiments.run ARGS...`),
which installs `timed_blocks` as experiments.harness.measure's one hook, `measure.pace`: the
study's code knows nothing of pairs.

Standard library only: the peers run without JAX.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

ENV_VAR = "JAXCNN_TURNS"
DRIVER = "benchmarks/paired.py"


class Turns:
    """This process's end of the driver's two pipes: it reports on `done` and waits
    for its turn on `go`."""

    def __init__(self, go: int, done: int, pair: str, side: str) -> None:
        self.go, self.done, self.pair, self.side = go, done, pair, side

    def pause(self, message: dict[str, Any]) -> None:
        """Tell the driver `message` (this process is idle now), then wait for the turn."""
        os.write(self.done, (json.dumps(message) + "\n").encode())
        if not _read_line(self.go):
            raise RuntimeError("the paired driver went away (its go pipe closed)")


def _read_line(fd: int) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            return b""
        line += chunk
    return line


def from_env() -> Turns | None:
    """The turns a driver set up for this process, or None (run blocks back to back)."""
    text = os.environ.get(ENV_VAR)
    if not text:
        return None
    try:
        spec = json.loads(text)
        return Turns(int(spec["go"]), int(spec["done"]), str(spec["pair"]), str(spec["side"]))
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{ENV_VAR}={text!r} is not what {DRIVER} sets: {e}") from e


def timed_blocks(block: Callable[[], float], repeats: int, images: int) -> list[float]:
    """`repeats` results of `block()` (the seconds of one timed block of `images`
    images). In a paired run each block waits for this process's turn, which starts
    with one more block, untimed: the other process has just had the cores and the
    caches, and a block timed cold would measure the hand-over, not the step (at small
    batches, by half). Each turn ends by reporting the timed block's images/s, and the
    start and end of the turn on the system-wide monotonic clock (so the driver, and a
    test, can see that no two turns overlapped)."""
    turns = from_env()
    if turns is None:
        return [block() for _ in range(repeats)]
    turns.pause({"ready": True, "blocks": repeats})
    seconds = []
    for _ in range(repeats):
        start = time.monotonic()
        block()  # untimed: warm again after the other side's turn
        seconds.append(block())
        end = time.monotonic()
        turns.pause({"images_per_s": images / seconds[-1], "start": start, "end": end})
    return seconds


def main(argv: Sequence[str]) -> None:
    """Run `python -m MODULE ARGS...` (argv: MODULE ARGS...) in this process, its timed
    blocks (experiments.harness.measure.time_blocks) taking turns: the JAX side of a pair."""
    if not argv:
        print(
            f"usage: python -m benchmarks.turns MODULE [ARGS...] (run by {DRIVER})", file=sys.stderr
        )
        sys.exit(2)
    # Imports JAX (the JAX side only, never the peers) but starts no backend: the module's
    # host memory policy still comes before JAX's first computation, as it must.
    from experiments.harness import measure

    measure.pace = timed_blocks
    module, *args = argv
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
