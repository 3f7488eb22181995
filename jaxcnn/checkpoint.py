"""Orbax checkpoints of a run: the whole train state plus where training stood.

    with Checkpoints(directory, keep=2) as ckpt:
        ckpt.save(step, state, Position(epoch=1, index=40), history)
        restored = ckpt.restore(like=state)  # None when there is nothing to resume

One checkpoint is one Orbax step directory with two items: `state` (step, params,
batch_stats, opt_state, rng: every array a step reads or writes) and `meta` (JSON: the
data position, the history so far and whatever the caller adds). Orbax writes a step
into a temporary directory and renames it when complete, so a run killed mid-save
leaves no half checkpoint behind, only a temporary directory that is ignored.

Restore reads onto host numpy arrays shaped like `like`, whatever placement wrote
them; the caller puts the result where its placement wants it (`put_state`). A
checkpoint is trusted only when
- every array's shape and dtype are those of `like` (the meta lists them: Orbax casts
  to the target's dtype and keeps the stored shape, so a model whose code changed under
  the same folder would otherwise resume another model's weights), and
- its whole content, every array and the meta, matches the digest saved in the meta.
A checkpoint that fails to restore (truncated, deleted files), is of another shape, or
restores other bits than were saved (a flipped bit that still decodes, in the arrays or
the meta) is moved aside into `corrupt/` and the one before it is tried; one warning
says which were set aside and why.

Temporary directories that a run killed mid-save left behind are removed before the
manager opens, so no save of this run can meet them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import resource
import shutil
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from jaxcnn import compat
from jaxcnn.errors import UsageError, absl_logs_held
from jaxcnn.train import TrainState

STATE_FIELDS = ("step", "params", "batch_stats", "opt_state", "rng")
CORRUPT_DIR = "corrupt"
DIGEST_KEY = "content_digest"  # in the meta: over the arrays and the rest of the meta


class Position(NamedTuple):
    """Where the data stream stands: `index` batches of epoch `epoch` (0-based) are done."""

    epoch: int
    index: int


class Restored(NamedTuple):
    step: int
    state: TrainState  # host numpy leaves; static fields taken from `like`
    position: Position
    history: list[dict[str, Any]]
    extra: dict[str, Any]


class CheckpointWarning(UserWarning):
    """A checkpoint could not be restored and an older one (or none) is used."""


class DigestMismatch(ValueError):
    """A restored checkpoint (its state or its meta) is not what was saved."""


class LayoutMismatch(ValueError):
    """A checkpoint's arrays are not of the shapes and dtypes of the state it would
    restore into: the checkpoint of another model, or of this model's older code."""


class CheckpointSaveError(RuntimeError):
    """A checkpoint could not be written (a full disk, a folder that cannot be written).

    Not an out-of-memory, whatever the storage layer calls it (TensorStore reports a
    full disk as RESOURCE_EXHAUSTED): the message names the folder and its free space.
    """


class CheckpointInUse(RuntimeError):
    """Another process holds this checkpoint folder (see `exclusive`)."""


@contextlib.contextmanager
def exclusive(directory: str | Path) -> Iterator[None]:
    """Hold checkpoint folder `directory` for this process, or raise CheckpointInUse.

    Two runs of one workload writing one folder would save and delete each other's
    steps. The lock is an flock on `<directory>.lock` beside the folder (so deleting the
    folder keeps it), which the kernel releases when the process dies, even by kill -9.
    The file holds the owner's pid, for the message, and is removed when the folder is
    released: a lock taken on a file that its owner removed meanwhile is let go and the
    new file's taken instead, so two processes never both hold one folder.
    """
    directory = Path(directory).resolve()  # beside the real folder, not beside a link to it
    path = directory.parent / f"{directory.name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(path, "a+")  # held across the yield, closed below
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown"
            handle.close()
            raise CheckpointInUse(f"{directory} is in use by process {owner}") from None
        if _is_at(handle, path):
            break
        handle.close()  # its owner removed that file after this process opened it
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: no one can take the old file
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def _is_at(handle: Any, path: Path) -> bool:
    """Whether the open file `handle` is still the file at `path`."""
    try:
        return os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        return False


def _free_space(directory: Path) -> str:
    for folder in (directory, *directory.parents):  # the nearest folder that exists
        try:
            free = shutil.disk_usage(folder).free
        except OSError:
            continue
        return (
            f"{free / 1024:,.0f} KiB free" if free < 1024**3 else f"{free / 1024**3:,.1f} GiB free"
        )
    return "free space unknown"


def _os_error_codes(error: BaseException) -> set[int]:
    """The operating system's error numbers in `error` and the errors it came from:
    an OSError's errno, and TensorStore's `[os_error_code='27']` (it raises ValueError
    with the code in its text, a field of its status, not prose)."""
    codes: set[int] = set()
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno is not None:
            codes.add(error.errno)
        codes.update(int(code) for code in re.findall(r"os_error_code='?(\d+)", str(error)))
        error = error.__cause__ or error.__context__
    return codes


def _why_not_saved(directory: Path, error: BaseException) -> str:
    """Why a save failed, in words that name the fix: a file past this process's
    file-size limit is no matter of free space (EFBIG); otherwise the free space, and
    the error's first line."""
    if errno.EFBIG in _os_error_codes(error):
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        said = "unlimited" if limit == resource.RLIM_INFINITY else f"{limit:,} bytes"
        return (
            f": a file would pass this process's file-size limit (ulimit -f: {said}): raise "
            "it (ulimit -f unlimited)"
        )
    return f" ({_free_space(directory)}): {_one_line(error)}"


def _arrays(state: TrainState) -> dict[str, Any]:
    return {name: getattr(state, name) for name in STATE_FIELDS}


def _host(leaf: Any) -> np.ndarray:
    """A leaf as one numpy array, gathered across processes when it is sharded over them."""
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
    return np.asarray(jax.device_get(leaf))


def params_digest(params: Any) -> str:
    """sha256 over every leaf in tree order: its path, dtype, shape and bytes.

    Two runs are bit-identical exactly when their digests are equal, so records can be
    compared without loading any parameters.
    """
    digest = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        array = np.ascontiguousarray(_host(leaf))
        digest.update(f"{jax.tree_util.keystr(path)}|{array.dtype}|{array.shape}|".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _layout(arrays: Any) -> dict[str, str]:
    """Each leaf's path -> its dtype and shape, as `float32[784,16]`."""

    def spelled(leaf: Any) -> str:
        return f"{np.dtype(leaf.dtype).name}[{','.join(map(str, np.shape(leaf)))}]"

    flat = jax.tree_util.tree_flatten_with_path(arrays)[0]
    return {jax.tree_util.keystr(path): spelled(leaf) for path, leaf in flat}


def _layout_difference(saved: dict[str, str], here: dict[str, str]) -> str | None:
    """None when equal, else the first difference (the parameters' first), in a few words."""
    params_first = lambda path: (not path.startswith("['params']"), path)  # noqa: E731
    for path in sorted(saved.keys() | here.keys(), key=params_first):
        if saved.get(path) != here.get(path):
            there, now = saved.get(path, "absent"), here.get(path, "absent")
            return f"{path} is {there} in the checkpoint, {now} here"
    return None


def _content_digest(arrays: Any, meta: dict[str, Any]) -> str:
    """sha256 over a checkpoint's whole content: its arrays (`params_digest`) and its
    meta as JSON (keys sorted: the same text after a JSON round trip)."""
    digest = hashlib.sha256(params_digest(arrays).encode())
    digest.update(json.dumps(meta, sort_keys=True).encode())
    return digest.hexdigest()


def check_folder(directory: str | Path) -> None:
    """Raise UsageError if `directory` could not be a checkpoint folder: its path is not
    UTF-8 (TensorStore, which writes the arrays, takes no other), a symlink on it leads
    nowhere, or it or the nearest of its parents that exists is not a folder. Checked
    before any training, since Orbax would find it only at the first save, an epoch later."""
    directory = Path(directory).absolute()
    try:
        str(directory).encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(
            f"checkpoint folder {os.fsencode(directory)!r} is not UTF-8, and TensorStore, "
            "which writes checkpoints, takes UTF-8 paths only: choose a folder whose path is"
        ) from None
    existing = directory
    while not existing.exists() and existing != existing.parent:
        if existing.is_symlink():
            raise UsageError(
                f"checkpoint folder {directory} has {existing} on its path, a symlink to "
                f"{os.readlink(existing)}, which does not exist: make that folder or "
                "choose another checkpoint folder"
            )
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == directory else f" (in the path of {directory})"
        raise UsageError(
            f"checkpoint folder {existing} is a file, not a folder{where}: move or delete "
            "it, or choose another checkpoint folder"
        )


TMP_MARKER = ".orbax-checkpoint-tmp"  # Orbax names a step's directory so until it is final


def _quiet_failed_operation_aftermath() -> None:
    """Hide the benign noise a failed Orbax save or restore leaves behind, which it
    reports itself (CheckpointSaveError, CheckpointWarning). Installed once per process.

    When one array fails to read or write, Orbax closes its asyncio loop while
    TensorStore operations on other arrays are still in flight:
    - their completion callbacks raise "Event loop is closed", which Python prints as
      unraisable tracebacks during the call that fails: exactly those are dropped, and
      every other unraisable exception reaches the previous hook;
    - futures of a failed save that nothing awaits any more are logged by asyncio
      ("exception was never retrieved", with a traceback) whenever they are collected,
      possibly much later: those whose error names an Orbax temporary folder, which
      the failed save removed, are dropped, and so are those Orbax's own code raised for
      a full disk (a write that runs out of room names no file; the failed save names
      the folder and its free space).
    """
    logging.getLogger("asyncio").addFilter(_not_a_failed_save_left_unretrieved)  # once
    previous = sys.unraisablehook
    if getattr(previous, "quiet_closed_loop", False):
        return

    def hook(unraisable) -> None:
        error = unraisable.exc_value
        if isinstance(error, RuntimeError) and str(error) == "Event loop is closed":
            return
        previous(unraisable)

    hook.quiet_closed_loop = True
    sys.unraisablehook = hook


def _not_a_failed_save_left_unretrieved(record: logging.LogRecord) -> bool:
    error = record.exc_info[1] if record.exc_info else None
    if error is None or "never retrieved" not in record.getMessage():
        return True
    if TMP_MARKER in str(error):
        return False
    full = isinstance(error, OSError) and error.errno == errno.ENOSPC
    return not (full and _raised_in_orbax(error))


_ORBAX_CODE = f"{os.sep}orbax{os.sep}checkpoint{os.sep}"


def _raised_in_orbax(error: BaseException) -> bool:
    """Whether a frame of `error`'s traceback is Orbax checkpoint's own code."""
    tb = error.__traceback__
    while tb is not None:
        if _ORBAX_CODE in tb.tb_frame.f_code.co_filename:
            return True
        tb = tb.tb_next
    return False


def _remove_unfinished_saves(directory: Path) -> None:
    """Delete what a run killed mid-save left: `<step>.orbax-checkpoint-tmp*` folders.

    Orbax can do this itself, but in a background thread started when the manager
    opens, which can still be deleting while this run writes a step of the same number.
    Here it is finished before the manager exists. Process 0 alone deletes.
    """
    if jax.process_index() != 0 or not directory.is_dir():
        return
    for leftover in directory.glob(f"*{TMP_MARKER}*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _remove_failed_save(directory: Path, before: set[threading.Thread], took: float) -> None:
    """Delete a failed save's temporary folders once nothing writes into them.

    Orbax raises the first item's failure without waiting for the others: their commit
    threads, and TensorStore writes still in flight (on its own threads, which nothing
    here can join), go on and make the folders they write into again after a first
    removal. So the threads this save started are joined, then the folders are removed
    until none has come back for a quiet spell (at most half a minute: a failed save is
    rare, and a folder left behind would keep a full disk full; the next run's open
    removes what is left even so). The spell is as long as the failed save took (`took`
    seconds), at least QUIET_S and at most MAX_QUIET_S: the writers left were queued
    during the save, and they drain as slowly as the machine ran it.
    """
    for thread in set(threading.enumerate()) - before:
        if type(thread).__module__.startswith("orbax."):
            thread.join(timeout=60)
    if jax.process_index() != 0:  # process 0 alone deletes: nothing here to wait for
        return
    spell = min(max(took, QUIET_S), MAX_QUIET_S)
    quiet, deadline = time.monotonic() + spell, time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(directory.glob(f"*{TMP_MARKER}*")):
            _remove_unfinished_saves(directory)
            quiet = time.monotonic() + spell
        elif time.monotonic() >= quiet:
            return
        time.sleep(0.05)


QUIET_S, MAX_QUIET_S = 1.0, 10.0


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:200]


def _ocp():
    """Orbax, imported on first use: `import jaxcnn` stays quick without checkpoints."""
    import orbax.checkpoint

    return orbax.checkpoint


class Checkpoints:
    """An Orbax CheckpointManager that keeps the last `keep` checkpoints of one run.

    Saves are synchronous: the next train step donates the state's buffers, and a
    checkpoint that is reported saved is on disk, which is what a kill right after
    it needs.
    """

    def __init__(self, directory: str | Path, *, keep: int = 2):
        if keep < 1:
            raise ValueError(f"keep must be at least 1, got {keep}")
        self.directory = Path(directory).absolute()
        check_folder(self.directory)
        self.restored_step: int | None = None
        _quiet_failed_operation_aftermath()  # before the first call that could fail
        _remove_unfinished_saves(self.directory)
        options = compat.checkpoint_manager_options(
            keep,
            enable_async_checkpointing=False,
            cleanup_tmp_directories=True,  # already done, synchronously; kept as a backstop
            create=True,
        )
        self._manager = _ocp().CheckpointManager(
            self.directory, item_names=("state", "meta"), options=options
        )

    def __enter__(self) -> Checkpoints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._manager.close()

    def steps(self) -> list[int]:
        return sorted(self._manager.all_steps())

    def save(
        self,
        step: int,
        state: TrainState,
        position: Position,
        history: list[dict[str, Any]],
        extra: dict[str, Any] | None = None,
    ) -> None:
        """Write checkpoint `step`: `state` as placed (one logical copy) and its meta."""
        arrays = _arrays(state)
        meta = {
            "position": {"epoch": int(position.epoch), "index": int(position.index)},
            "history": history,
            "extra": extra or {},
            "layout": _layout(arrays),
        }
        meta = json.loads(json.dumps(meta))  # as it will be read back: the digest's input
        meta[DIGEST_KEY] = _content_digest(arrays, meta)
        ocp = _ocp()
        threads, started = set(threading.enumerate()), time.monotonic()
        try:
            # Each writer thread logs the failure with a traceback before save raises it.
            with absl_logs_held(logging.ERROR):
                self._manager.save(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardSave(_arrays(state)),
                        meta=ocp.args.JsonSave(meta),
                    ),
                    force=True,  # the caller decides when; Orbax's interval policy is unused
                )
        except Exception as error:
            why = _why_not_saved(self.directory, error)
            message = f"could not save checkpoint {step} in {self.directory}{why}"
            # Its half-written folder would keep the disk full for the rerun.
            _remove_failed_save(self.directory, threads, time.monotonic() - started)
            raise CheckpointSaveError(message) from error

    def restore(self, like: TrainState) -> Restored | None:
        """The newest checkpoint that restores onto `like`, or None.

        Each one that fails (unreadable, of other shapes or dtypes than `like`'s, or
        not matching its digest) is moved into `corrupt/`, so it is neither tried again
        nor in the way of a later save of the same step; one CheckpointWarning says
        which and why, and what is used instead.
        """
        target = jax.tree.map(lambda x: np.zeros(np.shape(x), x.dtype), _arrays(like))
        set_aside: list[tuple[int, BaseException]] = []
        found = None
        for step in reversed(self.steps()):
            try:
                found = self._restore_checked(step, target)
            except Exception as error:  # any checkpoint not to be trusted: fall back
                set_aside.append((step, error))
                continue
            break
        if set_aside:
            self._set_aside(set_aside, found)
        if found is None:
            return None
        self.restored_step = found.step
        return found._replace(state=like.replace(**found.state))

    def _restore_checked(self, step: int, target: dict[str, Any]) -> Restored:
        """Checkpoint `step` onto `target`'s arrays (`state` still a dict of them), or
        the reason it is not to be trusted, raised."""
        ocp = _ocp()
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(target), meta=ocp.args.JsonRestore()
            ),
        )
        meta = dict(restored.meta)
        saved = meta.pop(DIGEST_KEY, None)
        if saved is None:
            raise DigestMismatch("it has no digest (written by an older jaxcnn, or damaged)")
        difference = _layout_difference(meta.get("layout") or {}, _layout(target))
        if difference is None:  # Orbax keeps the stored shapes, whatever the target's
            difference = _layout_difference(_layout(restored.state), _layout(target))
        if difference is not None:
            raise LayoutMismatch(f"another model: {difference}")
        digest = _content_digest(restored.state, meta)
        if digest != saved:
            raise DigestMismatch(f"its content has digest {digest[:12]}, saved {saved[:12]}")
        position = Position(**meta["position"])
        history, extra = list(meta["history"]), dict(meta.get("extra") or {})
        return Restored(step, restored.state, position, history, extra)

    def _set_aside(self, failed: list[tuple[int, BaseException]], used: Restored | None) -> None:
        """Move the `failed` checkpoints into `corrupt/`; one warning names them, why
        (once, where they failed alike: the checkpoints of another model) and what is
        used instead."""
        fallback = f"using step {used.step}" if used else "no older checkpoint, starting over"
        reasons: dict[str, list[int]] = {}
        for step, error in failed:
            reasons.setdefault(_one_line(error), []).append(step)
        said = "; ".join(
            f"{'checkpoint' if len(steps) == 1 else 'checkpoints'} "
            f"{self.directory / ', '.join(map(str, steps))} could not be restored ({why})"
            for why, steps in reasons.items()
        )
        warnings.warn(f"{said}; {fallback}", CheckpointWarning, stacklevel=3)
        if jax.process_index() == 0:
            for step, _ in failed:
                aside = self.directory / CORRUPT_DIR / f"{step}-{int(time.time())}"
                aside.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(self.directory / str(step)), aside)
        self._manager.reload()
