"""What the command line accepts, as plain data: the names it offers, how a value is
read, and its less common options (`--set KEY=VALUE`). Nothing here imports JAX, so
`--help` and a mistyped value are answered at once; the library still checks every
value it is given. Every name offered is read from the library's registries, which load
no JAX (jaxcnn.choices, jaxcnn.models, ...), or from the workload's (PRECISIONS).
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from experiments.records import workload
from jaxcnn import choices, data, host_memory, models
from jaxcnn.perf import chips

# The names each option offers, read from the library's registries that load no JAX.
MODELS = tuple(models.names())
DATASETS = data.DATASETS
TARGETS = tuple(chips.TARGETS)
DEVICES = choices.DEVICES
STRATEGIES = choices.STRATEGIES + choices.MODEL_STRATEGIES
PRECISIONS = tuple(workload.PRECISIONS)
HERE = "here"  # --target=here: the target that is this machine's chips


def path_problem(option: str, given: str, *, what: str = "path", utf8: bool = False) -> str | None:
    """Why `given`, the value of the path option `option` (`--out`, `RECORDS`), names no
    usable `what` (a path, a folder, a file), in one line; None where it does. Empty (an
    unset variable, `--out=$OUT`); a control character in it (a newline splits every
    line that names it, the command printed at the end included); with `utf8`, a name
    not UTF-8, which TensorStore refuses at the first checkpoint save, an epoch in. The one check of
    every command's path options (`OneLineParser.add_path`, the run's
    experiments.cli.plan.check_paths)."""
    if not given.strip():
        return f"{option} is empty: give a {what}"
    control = next((c for c in given if ord(c) < 32 or ord(c) == 127), None)
    if control is not None:
        return (
            f"{option} {given!r} has a control character ({control!r}) in its name: give a "
            f"{what} whose name has none"
        )
    if utf8:
        try:
            given.encode("utf-8")
        except UnicodeEncodeError:
            return (
                f"{option} {os.fsencode(given)!r} is not UTF-8, and TensorStore, which writes "
                "checkpoints, takes UTF-8 paths only: give a folder whose name is UTF-8"
            )
    return None


class OneLineParser(argparse.ArgumentParser):
    """argparse with a usage error in one line (exit code 2), not a usage dump: every
    command of the project parses with it. Its path arguments (`add_path`) are checked
    as they are parsed (`path_problem`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # A prefix of an option is refused, not taken for it: `--mod` is no `--model`
        # (the hint names it), and a new option can never change what an old line meant.
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self.paths: list[tuple[argparse.Action, str]] = []

    def add_path(self, *flags: str, what: str = "path", **kwargs: Any) -> argparse.Action:
        """`add_argument` of an argument that names a `what`: a file, a folder, a path."""
        action = self.add_argument(*flags, **kwargs)
        self.paths.append((action, what))
        return action

    def parse_args(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        parsed = super().parse_args(*args, **kwargs)
        for action, what in self.paths:
            given = getattr(parsed, action.dest)
            option = action.option_strings[0] if action.option_strings else action.metavar
            for value in given if isinstance(given, list) else [given]:
                problem = value is not None and path_problem(
                    option or action.dest, value, what=what
                )
                if problem:
                    self.error(problem)
        return parsed

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            hints = [h for h in map(self.hint_for, message.split()[2:]) if h]
            message += f" ({'; '.join(hints)})" if hints else ""
        # "error: ", as every other usage error the commands say after parsing
        self.exit(2, f"error: {message} (see --help)\n")

    def hint_for(self, argument: str) -> str | None:
        """What an unrecognized `argument` may have meant: the closest option's name."""
        flag = argument.split("=")[0]
        if not flag.startswith("--"):
            return None
        known = [o[2:] for o in self._option_string_actions if o.startswith("--")]
        close = difflib.get_close_matches(flag[2:], known, n=1)  # not alike by "--" alone
        return f"did you mean --{close[0]}?" if close else None


def integer(text: str, minimum: int | None = None, maximum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if minimum is not None and value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise argparse.ArgumentTypeError(f"{value} is not {what}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"{value} is not in {minimum}..{maximum}")
    return value


def positive_int(text: str) -> int:
    return integer(text, 1)


def count(text: str) -> int:
    return integer(text, 0)


def bounded(name: str) -> Callable[[str], int]:
    """A reader of workload field `name`'s integer, in its bounds
    (experiments.records.workload.BOUNDS, which say what each protects against)."""
    least, most, why = workload.BOUNDS[name]

    def read(text: str) -> int:
        value = integer(text, least)
        if value > most:
            raise argparse.ArgumentTypeError(f"{value} is above {most:,} ({why})")
        return value

    return read


timing_steps, epochs, steps = bounded("timing_steps"), bounded("epochs"), bounded("steps")
batch_size, devices = bounded("batch_size"), bounded("num_devices")
MAX_WIDTH = 2**16  # an mlp wider than this fills no memory usefully


def width(text: str) -> int:
    return integer(text, 1, MAX_WIDTH)


def seed(text: str) -> int:
    # JAX's keys take 32 bits; an ensemble adds its member index, so 31 leave room.
    return integer(text, 0, 2**31 - 1)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def boolean(text: str) -> bool:
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} is not true or false")
    return text == "true"


def unknown_name(what: str, name: str, known: Sequence[str]) -> str:
    """The one line for a name not among `known`, with the closest known one if any:
    every name the commands take (models, studies, targets, datasets, settings...) is
    looked up through this."""
    close = difflib.get_close_matches(name.replace("-", "_"), known, n=1) or (
        difflib.get_close_matches(name, known, n=1)
    )
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown {what} {name!r}: {hint}choose one of {', '.join(known)}"


def choice(what: str, names: Sequence[str] | Callable[[], Sequence[str]]) -> Callable[[str], str]:
    """A reader of one of `names`, or of `names()` (read when a value is checked, so a study
    registered after the parser was built counts), in the library's words for an unknown name."""

    def read(text: str) -> str:
        known = names() if callable(names) else names
        if text not in known:
            raise argparse.ArgumentTypeError(unknown_name(what, text, known))
        return text

    return read


@dataclasses.dataclass(frozen=True)
class Setting:
    """An option given as `--set NAME=VALUE`: read by `read`, `default` when not given."""

    read: Callable[[str], Any]
    default: Any
    metavar: str  # what VALUE is, in --help-all
    help: str


# The less common options, by the group --help-all lists them under. A name is the
# attribute the parsed arguments carry, as for a flag.
SETTING_GROUPS: dict[str, dict[str, Setting]] = {
    "training": {
        "width": Setting(
            width, None, "N", "hidden width of --model=mlp (default: the model's own)"
        ),
        "steps": Setting(
            steps,
            None,
            "N",
            "stop after this many training steps in all (default: whole epochs; --smoke: 3)",
        ),
        "optimizer": Setting(
            choice("optimizer", choices.OPTIMIZERS), "adam", "NAME", "adam | sgd (default: adam)"
        ),
        "learning_rate": Setting(
            positive_float, 1e-3, "X", "the learning rate; onecycle's peak (default: 0.001)"
        ),
        "schedule": Setting(
            choice("schedule", choices.SCHEDULES),
            "constant",
            "NAME",
            "constant | onecycle: up to learning_rate over the first quarter of the run, then "
            "down to 0 (default: constant)",
        ),
        "precision": Setting(
            choice("precision", PRECISIONS),
            "f32",
            "NAME",
            "f32 | bf16 compute; parameters stay f32 (default: f32)",
        ),
        "seed": Setting(seed, 0, "N", "0..2**31-1 (default: 0)"),
        "loop": Setting(
            choice("loop", choices.LOOPS),
            "step",
            "NAME",
            "step: one compiled step per batch | device: whole epochs as one compiled loop on "
            "the device (default: step)",
        ),
        "formulation": Setting(
            choice("formulation", choices.FORMULATIONS),
            "auto",
            "NAME",
            "how convolutions are computed: auto (the platform's fastest that needs no "
            "install; cpu on a CPU) | xla | cpu | onednn (oneDNN's kernels on a CPU, the "
            "fastest there: pip install -e '.[onednn]') (default: auto)",
        ),
    },
    "measurement": {
        "timing_steps": Setting(
            timing_steps,
            20,
            "N",
            "steps timed one by one for the step-time median (default: 20; --smoke: 3)",
        ),
        "host_memory": Setting(
            choice("host memory policy", host_memory.POLICIES),
            "auto",
            "NAME",
            "host allocator: auto (retain where the step loop runs on a CPU, else system) | "
            "retain (reuse freed memory; jaxcnn/host_memory.py) | system (glibc's defaults) "
            "(default: auto)",
        ),
    },
    "checkpoints": {
        "checkpoints": Setting(
            boolean,
            True,
            "true|false",
            "false: no checkpoints and no resume, for timing sweeps (default: true)",
        ),
        "checkpoint_dir": Setting(
            str, None, "DIR", "root of the per-workload checkpoints (default: OUT/checkpoints)"
        ),
        "checkpoint_every": Setting(
            positive_int,
            None,
            "N",
            "also checkpoint every N steps (default: at each epoch end only)",
        ),
        "keep_checkpoints": Setting(
            positive_int, 2, "N", "checkpoints kept per workload (default: 2)"
        ),
    },
    "many hosts": {
        "coordinator": Setting(
            str, None, "HOST:PORT", "HOST:PORT of process 0, or auto (TPU pods, Slurm, Open MPI)"
        ),
        "num_processes": Setting(devices, None, "N", "processes in all"),
        "process_id": Setting(integer, None, "N", "this process, 0..num_processes-1"),
        "coordinator_timeout": Setting(
            positive_float,
            300.0,
            "SECONDS",
            "seconds to wait for the coordinator and the other processes (default: 300)",
        ),
    },
    "output": {
        "progress": Setting(
            boolean, True, "true|false", "progress bars while training (default: true)"
        ),
    },
}
# every setting by its name, in the order of the groups
SETTINGS = {name: setting for group in SETTING_GROUPS.values() for name, setting in group.items()}
GROUP_NOTES = {
    "many hosts": "run the same command on every host, each with its own process_id; "
    "process 0 writes the records",
}


def read_setting(assignment: str) -> tuple[str, Any]:
    """`NAME=VALUE` -> (NAME, VALUE read by its Setting); ArgumentTypeError otherwise."""
    name, equals, value = assignment.partition("=")
    if not equals:
        raise argparse.ArgumentTypeError(f"{assignment!r} is not NAME=VALUE")
    if name not in SETTINGS:
        raise argparse.ArgumentTypeError(unknown_name("setting", name, list(SETTINGS)))
    return name, SETTINGS[name].read(value)


def spelled(name: str) -> str:
    """How a user gives option `name`: `--batch-size`, or `--set loop` for a setting."""
    return f"--set {name}" if name in SETTINGS else f"--{name.replace('_', '-')}"


def as_setting(flag: str) -> str | None:
    """How a flag that became a setting is given now (`--timing-steps` ->
    `--set timing_steps=VALUE`, `--no-checkpoints` -> `--set checkpoints=false`), else None."""
    name = flag.split("=")[0].removeprefix("--").replace("-", "_")
    if name.startswith("no_") and name[3:] in SETTINGS:
        return f"--set {name[3:]}=false"
    return f"--set {name}=VALUE" if name in SETTINGS else None
