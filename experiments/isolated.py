"""Calls that can kill their own process, made in a child process, so that the caller
lives to record the death.

A compiler is native code: libtpu 0.0.42.1 dies with SIGSEGV (a stack overflow in its
own code) on one resnet18 cell of the targets study. Compiled in the study's process,
that crash ends the study and leaves the cell without a record, so every rerun dies on
it again. Compiled in a child, the crash is `ChildDied` naming the signal; the caller
records it and goes on. One child serves call after call (JAX is imported once, not
per compile) and a new one starts after a death.

    compile_cell = InChild("experiments.compile_only:run_target")
    record = compile_cell(workload)   # ChildDied if the child died doing it
"""

from __future__ import annotations

import faulthandler
import importlib
import multiprocessing
import signal
from typing import Any

from experiments.records import one_line

READY = "ready"
# The signals a process raises on itself when its own code fails: a native crash, the
# compiler's own verdict on what it was compiling. Any other signal (SIGKILL from the
# out-of-memory killer, a SIGTERM, a SIGHUP, ...) was sent from outside.
CRASH_SIGNALS = frozenset({"SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT", "SIGTRAP", "SIGSYS"})


class ChildDied(Exception):
    """The child process died during a call: `exitcode` is -N for signal N."""

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode
        self.signal = signal.Signals(-exitcode).name if (exitcode or 0) < 0 else None
        how = f"signal {self.signal}" if self.signal else f"exit status {exitcode}"
        if self.signal == "SIGKILL":
            how += ": the kernel's out-of-memory killer, or a kill -9"
        super().__init__(f"the process doing it died ({how})")

    @property
    def from_outside(self) -> bool:
        """Killed by a signal from another process (SIGKILL: the out-of-memory killer, a
        kill -9; SIGTERM, SIGHUP, ...), not by a crash of its own code (CRASH_SIGNALS:
        SIGSEGV, SIGABRT, ...): no finding about what it was doing, so worth doing again."""
        return self.signal is not None and self.signal not in CRASH_SIGNALS


def _serve(connection: Any, function_path: str) -> None:
    """The child: call the function with each (args, kwargs) received, send back
    (True, result) or (False, exception) until the parent closes its end."""
    # Ctrl-C reaches the whole process group; the parent decides what it means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    faulthandler.enable()  # a native crash prints the Python stack that led to it
    module, name = function_path.split(":")
    function = getattr(importlib.import_module(module), name)
    connection.send(READY)
    while True:
        try:
            args, kwargs = connection.recv()
        except EOFError:
            return
        try:
            reply = (True, function(*args, **kwargs))
        except Exception as error:
            reply = (False, error)
        try:
            connection.send(reply)
        except Exception as unpicklable:  # what cannot travel goes back as its one line
            what = unpicklable if reply[0] else reply[1]
            connection.send((False, RuntimeError(one_line(what))))


class InChild:
    """`function_path` ("module:name") called in a child process kept between calls.
    The result and any exception travel back by pickle; a death raises ChildDied."""

    def __init__(self, function_path: str) -> None:
        self.function_path = function_path
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: Any = None

    def _start(self) -> None:
        # spawn, not fork: the parent has JAX (and its threads) loaded already.
        context = multiprocessing.get_context("spawn")
        self._connection, theirs = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(theirs, self.function_path), daemon=True
        )
        self._process.start()
        theirs.close()
        # A child that dies before it is ready (an import failing, a script that spawns
        # without the `if __name__ == "__main__"` guard) is a broken setup, not a death
        # during a call: it is raised as such, never recorded as a finding.
        try:
            ready = self._connection.recv()
        except EOFError:
            ready = None
        if ready != READY:
            self.close()
            raise RuntimeError(
                f"the child process for {self.function_path} ended before it was ready "
                "(its error is above)"
            )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._process is None:
            self._start()
        try:
            self._connection.send((args, kwargs))
            ok, value = self._connection.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            process, self._process = self._process, None
            process.join()
            self._connection.close()
            raise ChildDied(process.exitcode) from None
        if not ok:
            raise value
        return value

    def close(self) -> None:
        """End the child (at once, mid-call or not)."""
        process, self._process = self._process, None
        if process is not None:
            self._connection.close()
            if process.is_alive():
                process.kill()
            process.join()

    def __enter__(self) -> InChild:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
