"""What a run keeps beside a workload's checkpoints for the run that resumes it: the
step's timing (timing.json) and the device's measured matmul ceiling and memory
bandwidth (ceiling.json). One type for both, `Kept`: each file is its identity's
fields and the content, written whole (records.write_whole: a kill or a full disk midway leaves the
old file), and read back only where it is of its shape and its identity is this run's.
A file that is damaged (not UTF-8, not JSON, not of its shape) or another's (another
program, host or device) is moved into the folder's `corrupt/`, said in one line naming
it, and the thing it held is measured again: never a failure of the workload, and never
a value taken on trust.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from experiments import records

CORRUPT_DIR = "corrupt"  # jaxcnn.checkpoint.CORRUPT_DIR: where damaged checkpoints go too


@dataclasses.dataclass(frozen=True)
class Kept:
    """A kind of file kept for a resume: its `name` in the workload's folder, `what` it
    holds and what is done `instead` when it cannot be used (for the one line that says
    so), and `is_content`, whether a value read back is of the shape written."""

    name: str
    what: str
    instead: str
    is_content: Callable[[Any], bool]
    field: str = "content"  # the key the content is kept under, beside the identity

    def read(self, folder: Path | None, identity: Mapping[str, Any]) -> Any | None:
        """The content kept in `folder` under this `identity`, else None: nothing kept,
        or a file set aside (`set_aside`) as damaged or another's."""
        if folder is None:
            return None
        path = folder / self.name
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            return self.set_aside(path, f"is not a kept {self.what} ({_first_line(e)})")
        if not (isinstance(kept, dict) and self.is_content(kept.get(self.field))):
            return self.set_aside(path, f"is not a kept {self.what} (not of its shape)")
        mismatched = [key for key, value in identity.items() if kept.get(key) != _as_read(value)]
        if mismatched:
            return self.set_aside(path, f"was kept for another {' and '.join(mismatched)}")
        return kept[self.field]

    def write(self, folder: Path, identity: Mapping[str, Any], content: Any) -> None:
        """Keep `content` in `folder` under `identity`, whole or not at all."""
        folder.mkdir(parents=True, exist_ok=True)
        text = json.dumps({**identity, self.field: content})
        records.write_whole(folder / self.name, text.encode())

    def set_aside(self, path: Path, why: str) -> None:
        """Move `path` into its folder's corrupt/ and say so in one line: None."""
        aside = path.parent / CORRUPT_DIR / f"{path.stem}-{time.time_ns()}{path.suffix}"
        try:
            aside.parent.mkdir(parents=True, exist_ok=True)
            path.rename(aside)
            where = f"set aside as {aside}"
        except OSError as e:  # a read-only folder: left where it is, overwritten if it can be
            where = f"not set aside ({e.strerror or e})"
        print(f"    {path} {why}: {where}, {self.instead}", file=sys.stderr, flush=True)
        return None


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:120]


def _as_read(value: Any) -> Any:
    """`value` as JSON gives it back (tuples become lists): what a kept identity holds."""
    return json.loads(json.dumps(value))


# A Timer's five results (experiments.harness.runners.train): the step's and eval step's
# summaries, the throughput's or null, compile seconds by program, the timed program's
# kernels and steps or null.
_TIMING = tuple[
    records.Measured,
    records.Measured,
    records.Measured | None,
    dict[str, records.Number],
    tuple[Any, Any] | None,
]


def is_timing(timing: Any) -> bool:
    """Whether `timing` is a Timer's five results as a record carries them (`_TIMING`)."""
    return records.conforms(_TIMING, timing)


def is_ceiling(kept: Any) -> bool:
    """Whether `kept` is {ceiling, bandwidth} as a record carries them (records.Record's
    matmul_ceiling and bandwidth)."""
    return (
        isinstance(kept, dict)
        and set(kept) == {"ceiling", "bandwidth"}
        and records.conforms(records.Ceilings, kept)
    )


TIMING = Kept("timing.json", "timing", "timing the step again", is_timing, field="timing")
CEILING = Kept(
    "ceiling.json",
    "matmul ceiling",
    "measuring the matmul ceiling and memory bandwidth again",
    is_ceiling,
)
