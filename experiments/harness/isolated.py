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

What the child writes to stderr (a native crash's stack dumps: Python's faulthandler and
the runtime's own, over a hundred lines) goes to a log file of its own, not between the
caller's lines: a death carries the log's last lines (`ChildFailed.dump`, which
compile_only puts in the record) and the caller says one line. A child that does not
start within `start_timeout_s` (stuck in libtpu's retries to create its threads, on a
host out of them) is ended, with a progress line every `progress_every_s` meanwhile.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import multiprocessing
import os
import signal
import sys
import tempfile
from typing import Any

from experiments.records import one_line

READY = "ready"
# How long a child may take to import its function's module (JAX, a compiler plugin:
# seconds to a minute on a loaded host) before it is taken for stuck, and how often the
# wait says so.
START_TIMEOUT_S = 180.0
PROGRESS_EVERY_S = 30.0
DUMP_LINES = 40  # of the child's log, kept with a death


class ChildFailed(RuntimeError):
    """The child process could not do the call: it died, or could not start. `dump`:
    the last lines its stderr log gained meanwhile (a crash's stack dumps)."""

    dump: tuple[str, ...] = ()


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


def _serve(connection: Any, function_path: str, log: str | None = None) -> None:
    """The child: call the function with each (args, kwargs) received, send back
    (True, result) or (False, exception) until the parent closes its end. Its stderr
    (native code's too: file descriptor 2) goes to the file `log`."""
    # Ctrl-C reaches the whole process group; the parent decides what it means.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if log is None:
        faulthandler.enable()  # a native crash prints the Python stack that led to it
    else:
        kept = os.dup(2)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.dup2(fd, 2)
        os.close(fd)
        # Python's own lines (a compile's progress) still reach the caller's stderr;
        # native code's and the stack dumps of a crash go to the log.
        sys.stderr = os.fdopen(kept, "w", buffering=1)
        faulthandler.enable(file=open(log, "a"))
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

    def __init__(
        self,
        function_path: str,
        start_timeout_s: float = START_TIMEOUT_S,
        progress_every_s: float = PROGRESS_EVERY_S,
    ) -> None:
        self.function_path = function_path
        self.start_timeout_s = start_timeout_s
        self.progress_every_s = progress_every_s
        self._process: multiprocessing.process.BaseProcess | None = None
        self._connection: Any = None
        fd, self.log = tempfile.mkstemp(prefix="jaxcnn-child-", suffix=".log")
        os.close(fd)

    def _dump(self, since: int) -> tuple[str, ...]:
        """The log's lines written after byte `since`, the last DUMP_LINES of them."""
        try:
            with open(self.log, "rb") as handle:
                handle.seek(since)
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return ()
        return tuple(text.splitlines()[-DUMP_LINES:])

    def _log_size(self) -> int:
        try:
            return os.path.getsize(self.log)
        except OSError:
            return 0

    def _failed(self, error: ChildFailed, since: int) -> ChildFailed:
        error.dump = self._dump(since)
        return error

    def _start(self) -> None:
        # spawn, not fork: the parent has JAX (and its threads) loaded already.
        context = multiprocessing.get_context("spawn")
        self._connection, theirs = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(theirs, self.function_path, self.log), daemon=True
        )
        since = self._log_size()
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
        waited = 0.0
        while not self._connection.poll(min(self.progress_every_s, self.start_timeout_s)):
            waited += min(self.progress_every_s, self.start_timeout_s)
            if waited >= self.start_timeout_s or not self._process.is_alive():
                break
            print(
                f"    waiting for the child process for {self.function_path} to start "
                f"({waited:.0f} s of at most {self.start_timeout_s:.0f})...",
                file=sys.stderr,
                flush=True,
            )
        else:
            try:
                ready = self._connection.recv()
            except EOFError:
                ready = None
            if ready == READY:
                return
            self.close()
            raise self._failed(
                ChildFailed(
                    f"the child process for {self.function_path} ended before it was "
                    "ready (its error is in the record's traceback_tail)"
                ),
                since,
            )
        alive = self._process.is_alive()
        self.close()
        how = (
            f"did not start within {self.start_timeout_s:.0f} s (stuck: out of threads or memory?)"
            if alive
            else "ended before it was ready (its error is in the record's traceback_tail)"
        )
        raise self._failed(ChildFailed(f"the child process for {self.function_path} {how}"), since)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._process is None:
            self._start()
        since = self._log_size()
        try:
            self._connection.send((args, kwargs))
            ok, value = self._connection.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            process, self._process = self._process, None
            process.join()
            self._connection.close()
            raise self._failed(ChildDied(process.exitcode), since) from None
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
        with contextlib.suppress(OSError):
            os.unlink(self.log)
