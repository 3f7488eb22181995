"""Faults injected for real, in the child process that compiles: a SIGSEGV, as libtpu
0.0.42.1's own compiler gives on one resnet18 cell; a SIGKILL, as the kernel's
out-of-memory killer sends, or a SIGTERM; a temporary file written under a TMPDIR that
does not exist, as ptxas writes its input and output there."""

from __future__ import annotations

import faulthandler
import os
import signal
import tempfile
from pathlib import Path
from typing import Any

from experiments import compile_only, measure

CRASHING_BATCH = 24
# A file holding how many of the next compiles are killed (SIGKILL) before compiling;
# the child reads its path from the environment it was spawned with.
KILLS_FILE = "JAXCNN_TEST_KILLS_FILE"
KILL_SIGNAL = "JAXCNN_TEST_KILL_SIGNAL"  # the signal they die of (default SIGKILL)
# Set: each compile first writes a temporary file under TMPDIR, as ptxas does.
WRITES_TEMPORARY = "JAXCNN_TEST_WRITES_TEMPORARY"


def pid_or_crash(crash: bool) -> int:
    """This process's id, or a segmentation fault."""
    if crash:
        faulthandler._sigsegv()
    return os.getpid()


def run_target(workload: Any, programs: tuple[str, ...] = compile_only.PROGRAMS) -> dict:
    """compile_only.run_target, except that batch CRASHING_BATCH kills the process."""
    pid_or_crash(workload.batch_size == CRASHING_BATCH)
    _killed_if_asked()
    if WRITES_TEMPORARY in os.environ and not hasattr(measure.timed_compile, "writes"):
        measure.timed_compile = _writing_a_temporary_file(measure.timed_compile)
    return compile_only.run_target(workload, programs)


def _writing_a_temporary_file(compile_fn: Any) -> Any:
    def compiled(*args: Any) -> Any:
        fd, name = tempfile.mkstemp(dir=os.environ["TMPDIR"])  # no such folder: it fails
        os.close(fd)
        os.unlink(name)
        return compile_fn(*args)

    compiled.writes = True
    return compiled


def _killed_if_asked() -> None:
    if KILLS_FILE not in os.environ:
        return
    kills = Path(os.environ[KILLS_FILE])
    left = int(kills.read_text())
    if left > 0:
        kills.write_text(str(left - 1))
        os.kill(os.getpid(), signal.Signals[os.environ.get(KILL_SIGNAL, "SIGKILL")])
