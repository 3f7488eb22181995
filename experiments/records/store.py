"""Records on disk: one locked whole-line append, files written whole, and the one reader
(a bad line is kept, skipped with one warning per file)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import json
import math
import os
import re
import shutil
import stat
import sys
import tempfile
import typing
import uuid
import warnings
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from experiments.records.schema import (
    JSON_NAMES,
    MIGRATE_COMMAND,
    NEWER_MESSAGE,
    NewerSchema,
    NotRecorded,
    OldSchema,
    Record,
    RecordError,
    typed,
    validate,
)
from experiments.records.when import recorded_at


def _json_safe(value: Any) -> Any:
    """NaN and inf become null: JSON has no spelling for them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def encode(record: dict[str, Any], *, made_now: bool = True) -> bytes:
    """`record` validated, as the one JSON line that `append` writes. A record made now
    carries only the fields the schema declares; an older one rewritten (`made_now`
    False: a migration) keeps whatever its jaxcnn wrote."""
    line = json.dumps(validate(_json_safe(record), writing=made_now), sort_keys=True)
    return (line + "\n").encode()


def append(path: str | os.PathLike, record: dict[str, Any]) -> None:
    """Validate and append one record as one line, whole or not at all.

    One os.write under an exclusive lock, so a second writer never lands inside the
    line; a write that fails or falls short (a full disk) is truncated back to where
    the file ended, so it leaves no partial line, and raises OSError."""
    line = encode(record)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = _locked(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a writer died mid-line: keep its fragment off our line
        try:
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(
                    errno.ENOSPC, f"short write ({written} of {len(line)} bytes)", str(path)
                )
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):  # under the lock: only our bytes go
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


def _locked(path: Path) -> int:
    """`path` opened for appending under an exclusive lock, the file that is at `path`
    once the lock is held: a file replaced while we waited (experiments.records.migrate
    renames a new one over it) is opened again, so no line goes to the old one."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        os.close(fd)


# Below this much free space on the records file's disk a run is refused up front: a
# record is a few KB, and a measurement that cannot be written is hours lost.
MIN_FREE_BYTES = 32 * 1024


def check_writable(path: str | os.PathLike) -> None:
    """Raise OSError (its strerror says why) if a record could not be appended to
    `path`: a folder or an unwritable file there, an immutable file, a parent that is
    a file or read-only, a full disk. Creates nothing and changes nothing."""
    path = Path(path)
    check_regular(path)
    if path.exists():
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))  # EPERM if immutable
    check_writable_folder(path.parent)


# What a records path is when it is not a regular file, by its stat mode.
_SPECIAL_FILES = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_regular(path: str | os.PathLike) -> None:
    """Raise OSError if something other than a regular file is at `path` (a folder, a
    FIFO, a device, a socket): opening a FIFO blocks until another process opens its
    other end, and reading /dev/zero never ends, so a records path is checked before
    it is opened. Nothing at `path` is fine (the first append creates it)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode):
        return
    what = next((name for test, name in _SPECIAL_FILES if test(mode)), "not a regular file")
    code = errno.EISDIR if stat.S_ISDIR(mode) else errno.EINVAL
    raise OSError(code, f"{what}, not a records file", str(path))


def check_writable_folder(folder: str | os.PathLike) -> None:
    """Raise OSError if files could not be created in `folder` (made, with its parents,
    when the first file is written): a parent that is a file, no permission, a
    read-only or full disk. Creates nothing that it leaves behind."""
    folder = Path(folder)
    existing = folder
    while not existing.exists():
        if existing.is_symlink():  # mkdir would find it in the way, after the work
            why = f"a symlink to {os.readlink(existing)}, which does not exist"
            raise OSError(errno.ENOENT, why, str(existing))
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "a file, not a folder", str(existing))
    # A probe, not os.access: it also sees read-only mounts and holds for root.
    probe = existing / f".jaxcnn-write-test-{os.getpid()}"
    os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    probe.unlink()
    disk = os.statvfs(existing)
    free = disk.f_bavail * disk.f_frsize
    if free < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"no space left on its disk ({free} bytes free)", str(folder))


def write_whole(path: str | os.PathLike, content: bytes) -> None:
    """`path` holds `content` now, whole or not at all: written to a temporary file
    beside it, flushed to disk and renamed over it, so a kill or a full disk midway
    leaves the old file as it was, and no temporary file. A file's permissions are kept
    (a new one gets the umask's); a link is followed, and its target replaced."""
    path = Path(os.path.realpath(path))
    temporary = staged(path, content)
    try:
        os.replace(temporary, path)
    except BaseException as e:
        temporary.unlink(missing_ok=True)
        _raise_named(e, path)


def staged(path: str | os.PathLike, content: bytes) -> Path:
    """A temporary file beside `path` (a link followed) holding `content`, flushed to disk,
    with `path`'s permissions where it exists: what `write_whole` renames over `path`,
    and `replace_together` with others. On OSError (named `path`) nothing is left."""
    path = Path(os.path.realpath(path))
    temporary = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        _raise_named(e, path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(temporary, path.stat().st_mode & 0o7777)
    except BaseException as e:
        temporary.unlink(missing_ok=True)
        _raise_named(e, path)
    return temporary


def _raise_named(error: BaseException, path: Path) -> typing.NoReturn:
    """Raise `error`; an OSError about a temporary file as one about `path`, the file it
    stands for."""
    if isinstance(error, OSError) and error.filename != str(path):
        raise OSError(error.errno, error.strerror or str(error), str(path)) from error
    raise error


def replace_together(moves: Sequence[tuple[Path, Path]]) -> None:
    """Rename each (new, old) pair's new file or folder over its old one (a file, a
    folder, or nothing), all of them or none: a rename that fails puts back what was
    done. The news are written whole beforehand (`staged`, a folder filled), each on its
    old one's disk, so nothing here needs room on it. An old file is kept by a second
    link to it (the file itself stays until the new one replaces it in one rename, so a
    kill leaves each file whole: the old or the new); an old folder is moved aside. What
    was kept is deleted once all are in place."""
    done: list[tuple[Path, Path, Path | None, bool]] = []  # new, old, kept, moved in
    old = moves[0][1] if moves else Path()
    try:
        for new, old in moves:
            kept = _keep(old)
            done.append((new, old, kept, False))
            os.replace(new, old)
            done[-1] = (new, old, kept, True)
    except BaseException as e:
        for move in reversed(done):
            with contextlib.suppress(OSError):  # best effort: a rename needs no room
                _put_back(*move)
        _raise_named(e, old)  # the file meant, not its temporary
    for _, _, kept, _ in done:
        if kept is not None and kept.is_dir() and not kept.is_symlink():
            shutil.rmtree(kept, ignore_errors=True)
        elif kept is not None:
            kept.unlink(missing_ok=True)


def _keep(old: Path) -> Path | None:
    """`old` kept beside itself for `replace_together` to put back: a folder moved
    there, a file linked there (copied where the disk has no hard links)."""
    if not (old.exists() or old.is_symlink()):
        return None
    kept = old.parent / f".{old.name}.{uuid.uuid4().hex[:8]}.old"
    if old.is_dir() and not old.is_symlink():
        os.rename(old, kept)
        return kept
    try:
        os.link(old, kept, follow_symlinks=False)
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        shutil.copy2(old, kept, follow_symlinks=False)
    return kept


def _put_back(new: Path, old: Path, kept: Path | None, moved: bool) -> None:
    """Undo one move of `replace_together`."""
    folder = kept is not None and kept.is_dir() and not kept.is_symlink()
    if moved and (folder or kept is None):
        os.rename(old, new)
    if folder:
        os.rename(kept, old)
    elif kept is not None and moved:
        os.replace(kept, old)
    elif kept is not None:
        kept.unlink()


def remove_leftovers(path: str | os.PathLike) -> list[Path]:
    """Delete the temporary files that a `write_whole` of `path` cut short by a kill
    (SIGKILL, the out-of-memory killer: no chance to clean up) left beside it, and
    return them. Only for a caller holding the lock every rewrite of `path` takes: a
    temporary file then belongs to no rewrite in progress."""
    path = Path(os.path.realpath(path))
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}\.tmp")
    candidates = path.parent.glob(f".{glob.escape(path.name)}.*.tmp")
    left = [p for p in candidates if pattern.fullmatch(p.name)]
    for stale in left:
        stale.unlink(missing_ok=True)
    return left


def append_or_keep(path: str | os.PathLike, *batch: dict[str, Any]) -> None:
    """`append` each record of `batch` in turn, and if one fails, keep it and the rest
    where they can be recovered (a new file in the temp folder; if even that fails, the
    JSON lines on stderr) and raise NotRecorded saying where: a measurement is never
    lost to a full disk."""
    for done, record in enumerate(batch):
        try:
            append(path, record)
        except OSError as e:
            rest = batch[done:]
            why = f"could not append to {path} ({e.strerror or e})"
            kept = _keep_elsewhere(rest, Path(path).name)
            one = len(rest) == 1
            if kept is None:
                print("".join(encode(r).decode() for r in rest), end="", file=sys.stderr)
                above = "the record is the JSON line" if one else "the records are the JSON lines"
                raise NotRecorded(f"{why}: {above} above") from None
            which = "the record is" if one else f"the {len(rest)} records not appended are"
            raise NotRecorded(f"{why}: {which} kept in {kept} (cat {kept} >> {path})") from None


def _keep_elsewhere(batch: Sequence[dict[str, Any]], name: str) -> Path | None:
    stem = name.removesuffix(".jsonl")
    try:
        fd, kept = tempfile.mkstemp(prefix=f"jaxcnn-unrecorded-{stem}-", suffix=".jsonl")
        os.close(fd)
        for record in batch:
            append(kept, record)
    except OSError:
        return None
    return Path(kept)


def records_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """These files, and every *.jsonl file under these folders (sorted); OSError
    (`check_regular`) if one is a FIFO, a device or a socket: it is never opened."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found.extend(p for p in sorted(path.rglob("*.jsonl")) if not p.is_dir())
        else:
            found.append(path)
    for file in found:
        check_regular(file)
    return found


def load(*paths: str | os.PathLike) -> list[Record]:
    """Every valid record in these files or folders (searched for *.jsonl), in file
    order, each as its kind's model (`Record`, read by attribute): the one reader of
    records (the report, the fit, a rerun's skips; a rewrite of a file's lines reads them
    with `read_lines`). Bad lines (torn, not JSON, not an object, not UTF-8, not the
    schema or its meaning: `typed`) are kept in the file and skipped, with one warning
    per file naming them; records of an earlier schema version too, with one warning per
    file naming the command that migrates them (`MIGRATE_COMMAND`). A run_id seen before
    keeps its first record, with one warning per file naming the lines of the others;
    records dated in the future of this machine's clock are kept, with one warning per
    file (`recorded_at` gives them no time). A UTF-8 byte order mark is read as text.
    OSError if a path is a FIFO, a device or a socket (`records_files`)."""
    records: dict[str, Record] = {}
    now = datetime.now(timezone.utc)
    for file in records_files(paths):
        bad: list[tuple[int, str]] = []
        repeated: list[int] = []
        future: list[int] = []
        newer: list[int] = []
        old = 0
        with open(file, "rb") as handle:
            for line in read_lines(handle):
                record = line.model
                if line.why:
                    bad.append((line.number, line.why))
                old += line.old
                if line.newer:
                    newer.append(line.number)
                if record is None:
                    continue
                if record.run_id in records:
                    repeated.append(line.number)
                    continue
                if record.env.utc_time and recorded_at(record, now) is None:
                    future.append(line.number)
                records[record.run_id] = record
        if old:
            warnings.warn(
                f"{file}: skipped {old} record(s) of an earlier schema version; "
                f"{MIGRATE_COMMAND} {file} rewrites them (nothing is deleted)",
                stacklevel=2,
            )
        if newer:
            warnings.warn(newer_lines(file, newer), stacklevel=2)
        if bad:
            warnings.warn(bad_lines(file, bad), stacklevel=2)
        if repeated:
            warnings.warn(
                f"{file}: skipped {len(repeated)} record(s) whose run_id an earlier line "
                f"has (lines {line_numbers(repeated)}): the first record of a run_id is kept",
                stacklevel=2,
            )
        if future:
            warnings.warn(
                f"{file}: {len(future)} record(s) dated after this machine's clock (lines "
                f"{line_numbers(future)}): kept, but never taken for the newest",
                stacklevel=2,
            )
    return list(records.values())


class Line(NamedTuple):
    """One line of a records file as `read_lines` reads it."""

    number: int  # from 1
    raw: bytes  # as it is in the file, its newline included
    record: dict[str, Any] | None  # validated; None where the line holds none
    why: str | None = None  # why a line that is not blank holds none (one line)
    old: bool = False  # a record of an earlier schema version (no `why`: not bad)
    newer: bool = False  # a record of a later schema version (no `why`: not bad)
    model: Record | None = None  # the record as its kind's model, where it holds one


def read_lines(raw_lines: Iterable[bytes]) -> Iterator[Line]:
    """Each line of a records file with its record, validated, or why it has none:
    what `load` reads, for a caller that rewrites the file line by line and so keeps
    every line, a bad one byte for byte."""
    for number, raw in enumerate(raw_lines, 1):
        if not raw.strip():
            yield Line(number, raw, None)
            continue
        try:
            record = parse_line(raw)
            yield Line(number, raw, record, model=typed(record))
        except OldSchema:
            yield Line(number, raw, None, old=True)
        except NewerSchema:
            yield Line(number, raw, None, newer=True)
        except ValueError as e:  # not JSON, not UTF-8, not a record (RecordError)
            yield Line(number, raw, None, (str(e).splitlines() or [repr(e)])[0][:120])


def parse_line(raw: bytes) -> dict[str, Any]:
    """One line of a records file as a JSON object, not yet validated; ValueError says
    why it is none."""
    # utf-8-sig: a byte order mark (an editor's, at the file's start) is no part of the JSON
    value = json.loads(raw.decode("utf-8-sig"))
    if not isinstance(value, dict):
        raise RecordError(f"{JSON_NAMES.get(type(value), 'a value')}, not an object")
    return value


def newer_lines(file: Path, numbers: Sequence[int]) -> str:
    """One line for a file's records of a later schema version (their line numbers)."""
    return (
        f"{file}: skipped {len(numbers)} record(s) {NEWER_MESSAGE} them (lines "
        f"{line_numbers(numbers)}); the lines are kept"
    )


def refuse_newer(path: str | os.PathLike) -> None:
    """Raise NewerSchema if the records file `path` holds records a newer jaxcnn wrote:
    this one cannot tell which cells they measured (a later schema may key them
    otherwise), so it would measure them again beside them, and must not add to it."""
    try:
        with open(path, "rb") as handle:
            newer = [line.number for line in read_lines(handle) if line.newer]
    except FileNotFoundError:
        return
    if newer:
        raise NewerSchema(
            f"{path} holds {len(newer)} record(s) written by a newer jaxcnn (lines "
            f"{line_numbers(newer)}): upgrade jaxcnn before adding records to it, or "
            "write them to another folder"
        )


def bad_lines(file: Path, bad: list[tuple[int, str]]) -> str:
    """One line for all of a file's bad lines ((line number, why) each): where they are
    and why the first is bad."""
    (first, reason), *rest = bad
    if not rest:
        return f"{file}:{first}: skipped a bad record ({reason}); the line is kept"
    numbers = line_numbers([n for n, _ in bad])
    return (
        f"{file}: skipped {len(bad)} bad records (lines {numbers}; line {first}: {reason}); "
        "the lines are kept"
    )


def line_numbers(numbers: Sequence[int]) -> str:
    """Line numbers as a message lists them: the first ten, then "..." if there are more."""
    return ", ".join(map(str, numbers[:10])) + (", ..." if len(numbers) > 10 else "")
