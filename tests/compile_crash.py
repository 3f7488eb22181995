"""Faults injected for real, in the child process that compiles: a SIGSEGV, as libtpu
0.0.42.1's own compiler gives on one resnet18 cell; a SIGKILL, as the kernel's
out-of-memory killer sends, or a SIGTERM; an abort (os.abort, SIGABRT); too little
address space for the compile (RLIMIT_AS: XLA's std::bad_alloc, or a thread it cannot
start); a temporary file written under a TMPDIR that does not exist, as ptxas writes
its input and output there. And the compiler's own refusal, for real: a program calling
a kernel no one registered."""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import os
import resource
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from experiments.harness import compile_only, measure
from jaxcnn import train

CRASHING_BATCH = 24
REFUSED_BATCH = 40  # its train step calls a kernel no one registered: the compiler refuses
# A file holding how many of the next compiles are killed (SIGKILL) before compiling;
# the child reads its path from the environment it was spawned with.
KILLS_FILE = "JAXCNN_TEST_KILLS_FILE"
KILL_SIGNAL = "JAXCNN_TEST_KILL_SIGNAL"  # the signal they die of (default SIGKILL)
# Set: each compile first writes a temporary file under TMPDIR, as ptxas does.
WRITES_TEMPORARY = "JAXCNN_TEST_WRITES_TEMPORARY"
# Set to N: each compile has N MiB of address space beyond what the child holds already.
ADDRESS_SPACE_LEFT_MB = "JAXCNN_TEST_ADDRESS_SPACE_LEFT_MB"


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
    with contextlib.ExitStack() as faults:
        if workload.batch_size == REFUSED_BATCH:
            faults.enter_context(_compiled_with_an_unknown_kernel())
        if ADDRESS_SPACE_LEFT_MB in os.environ:
            faults.enter_context(_address_space_left(int(os.environ[ADDRESS_SPACE_LEFT_MB])))
        return compile_only.run_target(workload, programs)


@contextlib.contextmanager
def _compiled_with_an_unknown_kernel() -> Iterator[None]:
    original = compile_only.aot.compile_for
    compile_only.aot.compile_for = functools.partial(original, step=_step_with_an_unknown_kernel)
    try:
        yield
    finally:
        compile_only.aot.compile_for = original


@contextlib.contextmanager
def _address_space_left(mib: int) -> Iterator[None]:
    before = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + mib * 2**20, before[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, before)


def _address_space() -> int:
    """The bytes of address space this process holds (VmSize)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmSize:"))
    return int(line.split()[1]) * 1024


def _step_with_an_unknown_kernel(state: Any, batch: Any, axis_name: Any = None) -> Any:
    """jaxcnn's train step, plus a call of a kernel no one registered."""
    unknown = jax.ffi.ffi_call(
        "jaxcnn_test_no_such_kernel", jax.ShapeDtypeStruct((1,), jnp.float32)
    )
    extra = unknown(batch["label"][:1].astype(jnp.float32))
    state, metrics = train.train_step(state, batch, axis_name=axis_name)
    return state, {**metrics, "unknown": extra[0]}


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
        name = os.environ.get(KILL_SIGNAL, "SIGKILL")
        if name == "SIGABRT":
            os.abort()  # the process's own abort, as a native failure ends in
        os.kill(os.getpid(), signal.Signals[name])
