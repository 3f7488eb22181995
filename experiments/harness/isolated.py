"""Calls that can kill their own process, made in a child process, so that the caller
lives to record the death.

A compiler is native code: libtpu 0.0.42.1 dies with SIGSEGV (a stack overflow in its
own code) on one resnet18 cell of the targets study, and a compile short of host memory
aborts (`std::bad_alloc`, a failed thread start: SIGABRT). Compiled in the study's
process, that death ends the study and leaves the cell without a record, so every rerun
dies on it again. Compiled in a child, it is `ChildDied` naming the signal; the caller
records it and goes on. One child serves call after call (JAX is imported once, not per
compile) and a new one starts after a death.

    compile_cell = InChild("experiments.harness.compile_only:run_target")
    record = compile_cell(workload)   # ChildFailed if the child died or could not start

A death says nothing about what the child was doing: whatever the signal, the machine
failed the call (its memory, a kill from outside, a crash), never the callee's verdict.
"""

from __future__ import annotations

import faulthandler
import importlib
import multiprocessing
import signal
from typing import Any

from experiments.records import one_line

READY = "ready"


class ChildFailed(RuntimeError):
    """The child process could not do the call: it died, or could not start."""


class ChildDied(ChildFailed):
    """The child process died during a call: `exitcode` is -N for signal N."""

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode
        self.signal = signal.Signals(-exitcode).name if (exitcode or 0) < 0 else None
        how = f"signal {self.signal}" if self.signal else f"exit status {exitcode}"
        if self.signal == "SIGKILL":
            how += ": the kernel's out-of-memory killer, or a kill -9"
        elif self.signal == "SIGABRT":
            how += ": a native abort, as a failed allocation (std::bad_alloc) ends in"
        super().__init__(f"the process doing it died ({how})")


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
        try:
            self._process.start()
        except OSError as error:  # no memory or process slot left to start it
            self._process = None
            self._connection.close()
            raise ChildFailed(f"the child process could not start: {one_line(error)}") from None
        finally:
            theirs.close()
        # A child that dies before it is ready (too little memory to import JAX, an
        # import failing, a script that spawns without the `if __name__ == "__main__"`
        # guard) did nothing of the call: ChildFailed, never a finding about it.
        try:
            ready = self._connection.recv()
        except EOFError:
            ready = None
        if ready != READY:
            self.close()
            raise ChildFailed(
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
