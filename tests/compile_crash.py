"""Faults injected for real, in the child process that compiles: a SIGSEGV, as libtpu
0.0.42.1's own compiler gives on one resnet18 cell."""

from __future__ import annotations

import faulthandler
import os
from typing import Any

from experiments import compile_only

CRASHING_BATCH = 24


def pid_or_crash(crash: bool) -> int:
    """This process's id, or a segmentation fault."""
    if crash:
        faulthandler._sigsegv()
    return os.getpid()


def run_target(workload: Any, programs: tuple[str, ...] = compile_only.PROGRAMS) -> dict:
    """compile_only.run_target, except that batch CRASHING_BATCH kills the process."""
    pid_or_crash(workload.batch_size == CRASHING_BATCH)
    return compile_only.run_target(workload, programs)
