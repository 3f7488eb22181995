"""What a command line runs, worked out from its parsed options by small functions, so
that experiments/cli/run.py only parses and calls: the checks of options that cannot go
together (made before JAX starts), the loops the command will run (known before JAX
starts, as the host memory policy must be), its workloads, the devices it keeps, its
checkpoint folder, and the rows of the table it prints at the end.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from experiments.cli.options import path_problem, spelled
from experiments.records import RECORDS_FILE, MatmulRecord, Record, TrainRecord
from experiments.records.labels import device_label, model_with_overrides
from experiments.records.tables import seconds, si
from experiments.records.workload import Workload
from experiments.studies import COMPILE_STUDIES, REGISTRY, Context
from experiments.studies import STUDIES as NAMED_STUDIES
from experiments.studies.default import DEFAULT_STUDY

# --study NAME: a tuple of (model, overrides) runs with the command's options (--epochs,
# --batch-size, ...); a function of a studies.Context sets its own sizes.
STUDIES: dict[str, Any] = {"default": DEFAULT_STUDY, **NAMED_STUDIES}
ALL = "all"  # every function study, in STUDIES order
DEFAULT_EPOCHS = 5
DEFAULT_BATCH = 64
# --smoke on a study that takes the command's options (default): seconds, not minutes
SMOKE_FLAGS = {"epochs": 1, "steps": 3, "batch_size": 32, "timing_steps": 3}
# options that a function study sets itself: giving one with it is a usage error
STUDY_SETS = ("batch_size", "epochs", "steps", "width", "model")
# options a function study fixes too: giving one away from its default is a usage error
STUDY_FIXED = (
    "dataset",
    "strategy",
    "precision",
    "loop",
    "formulation",
    "schedule",
    "optimizer",
    "learning_rate",
    "seed",
    "timing_steps",
)
# options that mean "run here", which a compile-only command does not do
RUN_HERE = ("num_devices", "coordinator", "num_processes", "process_id", "epochs", "steps")
# options that choose the data, which a compile-only command never reads
READS_DATA = ("dataset", "data_dir")

Options = argparse.Namespace
D = TypeVar("D")


class OptionError(ValueError):
    """Options that cannot go together: a usage error, found before JAX starts."""


def study_choices() -> list[str]:
    """What --study takes: the studies, `all`, and the compile-only studies."""
    return [*STUDIES, ALL, *COMPILE_STUDIES]


def study_names(name: str) -> list[str]:
    """The studies --study=`name` runs (`all`: every function study)."""
    if name == ALL:
        return [n for n, study in STUDIES.items() if callable(study)]
    return [name]


def host_memory(options: Options) -> str:
    """The host memory policy the command asks for: --set host_memory, or where that is
    `auto`, `system` if one of its studies needs it (Study.host_memory), else `auto`."""
    if options.host_memory != "auto" or takes_flags(options):
        return options.host_memory
    wanted = {REGISTRY[name].host_memory for name in study_names(options.study)}
    return "system" if "system" in wanted else "auto"


def compile_only(options: Options) -> bool:
    """Whether the command compiles for devices not at hand instead of running."""
    return options.target is not None or options.study in COMPILE_STUDIES


def takes_flags(options: Options) -> bool:
    """Whether the command's workloads take its options (--model, or a study of models)
    rather than a function study's own sizes."""
    if options.model is not None:
        return True
    return not (options.study == ALL or callable(STUDIES.get(options.study)))


def check(options: Options, defaults: Mapping[str, Any]) -> None:
    """Every usage error that the options alone show, as OptionError; `defaults` are
    the options' values when not given."""
    check_environment(os.environ)
    check_paths(options)
    if compile_only(options):
        _check_compile_only(options, defaults)
        return
    if options.model is not None and options.study != defaults["study"]:
        raise OptionError(
            f"--model={options.model} and --study={options.study} cannot go together: "
            "--model runs that one model, --study the study's own workloads; give one"
        )
    if options.summary and not options.model:
        raise OptionError("--summary needs --model=NAME")
    if not options.checkpoints and (options.checkpoint_every or options.checkpoint_dir):
        raise OptionError(
            "--set checkpoint_every/--set checkpoint_dir cannot go with --set checkpoints=false"
        )
    if not takes_flags(options):
        given = [spelled(f) for f in STUDY_SETS if getattr(options, f) is not None]
        given += [spelled(f) for f in STUDY_FIXED if getattr(options, f) != defaults[f]]
        if given:
            raise OptionError(
                f"{', '.join(given)} cannot go with --study={options.study}: the study "
                "sets its own sizes (see experiments/studies/; --smoke shrinks them)"
            )


def check_paths(options: Options) -> None:
    """OptionError for a path option that names no usable path: empty (an unset
    variable, `--out=$OUT`); a control character in it (a newline splits every line
    that names it, the report command printed at the end included); a folder not UTF-8,
    which TensorStore refuses at the first checkpoint save, an epoch in; and, in --out,
    a records file or checkpoints folder that is a symlink out of --out (followed, this
    run's records or checkpoints would land in another folder than the one named)."""
    for name in ("out", "checkpoint_dir", "data_dir"):
        given = getattr(options, name, None)
        # data_dir is read only, never by TensorStore
        problem = given is not None and path_problem(
            spelled(name), given, what="folder", utf8=name != "data_dir"
        )
        if problem:
            raise OptionError(problem)
    if getattr(options, "out", None) is not None:
        _check_links_stay_in(Path(options.out), getattr(options, "checkpoint_dir", None))


CHECKPOINTS_FOLDER = "checkpoints"  # in --out, unless --set checkpoint_dir names one
# What --out holds that a run writes through.
_IN_OUT = (RECORDS_FILE, CHECKPOINTS_FOLDER)


def _check_links_stay_in(out: Path, checkpoint_dir: str | None) -> None:
    real_out = out.resolve()
    for name in _IN_OUT:
        if name == CHECKPOINTS_FOLDER and checkpoint_dir is not None:
            continue  # --checkpoint-dir names its own folder: out/checkpoints is not used
        path = out / name
        try:
            if not path.is_symlink():
                continue
        except OSError:  # a name too long to look up: the writability check names it
            continue
        target = path.resolve()
        if target.parent == real_out:
            continue  # a link to a sibling inside --out: still --out's
        if target.exists() and not (target.is_file() or target.is_dir()):
            continue  # a device, a FIFO: records.check_regular names what it is
        fix = (
            f"give {spelled('checkpoint_dir')}={target} to keep checkpoints there"
            if name == CHECKPOINTS_FOLDER
            else f"give --out={target.parent} to write there"
        )
        raise OptionError(
            f"{path} is a symlink to {target}, outside --out {out}: {fix}, or remove the link"
        )


def check_environment(environ: Mapping[str, str]) -> None:
    """OptionError for a JAX setting in the environment that would end `import jax` in
    a traceback. (JAX_PLATFORMS is checked where JAX starts the platforms it names,
    jaxcnn.devices.resolve: which names it knows depends on the plugins installed.)"""
    count = environ.get("JAX_NUM_CPU_DEVICES", "").strip()
    if count and not _whole_number(count, at_least=1):
        raise OptionError(
            f"JAX_NUM_CPU_DEVICES={count} in the environment is not a number of CPU devices: "
            "set it to a whole number of at least 1 (JAX_NUM_CPU_DEVICES=8) or unset it"
        )
    flag = re.search(r"--xla_force_host_platform_device_count=(\S*)", environ.get("XLA_FLAGS", ""))
    for name, value in (
        ("JAX_NUM_CPU_DEVICES", count),
        ("XLA_FLAGS=--xla_force_host_platform_device_count", flag.group(1) if flag else ""),
    ):
        if value and _whole_number(value, at_least=MAX_CPU_DEVICES + 1):
            raise OptionError(
                f"{name}={value} asks for more than {MAX_CPU_DEVICES} CPU devices, which JAX "
                f"cannot start (it crashes without a word): set at most {MAX_CPU_DEVICES}"
            )


# The most CPU devices a run may ask JAX for: JAX starts this many in seconds, and
# dies of a segmentation fault, saying nothing, at 100,000.
MAX_CPU_DEVICES = 4096


def _whole_number(text: str, at_least: int) -> bool:
    try:
        return int(text) >= at_least
    except ValueError:
        return False


def _check_compile_only(options: Options, defaults: Mapping[str, Any]) -> None:
    if options.device != "auto":
        raise OptionError(
            "--target compiles for a device not at hand, --device runs on one here: give one"
        )
    given = [spelled(f) for f in RUN_HERE if getattr(options, f) is not None]
    if given:
        raise OptionError(f"{', '.join(given)} cannot go with a compile-only run (nothing runs)")
    # Said, not ignored: the record would name a dataset that shaped nothing in it.
    data = [spelled(f) for f in READS_DATA if getattr(options, f) != defaults[f]]
    if data:
        raise OptionError(
            f"{', '.join(data)} cannot go with a compile-only run: it compiles for the "
            "model's input shape and reads no data"
        )
    if options.study in COMPILE_STUDIES:
        if options.batch_size is not None:
            raise OptionError(f"--study={options.study} searches its own batches")
    elif options.model is None:
        raise OptionError("--target needs --model=NAME (and --batch-size)")


def loops(options: Options) -> set[str]:
    """The loops (`step`, `device`) the command will run, known before JAX starts, as the
    host memory policy must be. A study's loops do not depend on the platform."""
    if takes_flags(options):
        return {options.loop}
    context = Context(smoke=options.smoke)
    return {w.loop for name in study_names(options.study) for w in STUDIES[name](context)}


def workloads(options: Options, platform: str, num_devices: int) -> list[Workload]:
    """The workloads of --model, or of --study on `num_devices` devices of `platform`."""
    smoke = SMOKE_FLAGS if options.smoke else {}
    common = {
        "dataset": options.dataset,
        "batch_size": options.batch_size or smoke.get("batch_size", DEFAULT_BATCH),
        "epochs": smoke.get("epochs", DEFAULT_EPOCHS) if options.epochs is None else options.epochs,
        "steps": options.steps or smoke.get("steps"),
        "optimizer": options.optimizer,
        "learning_rate": options.learning_rate,
        "seed": options.seed,
        "strategy": options.strategy,
        "precision": options.precision,
        "timing_steps": smoke.get("timing_steps", options.timing_steps),
        "loop": options.loop,
        "formulation": options.formulation,
        "schedule": options.schedule,
    }
    if options.model is not None:
        return [Workload(model=options.model, model_overrides=model_overrides(options), **common)]
    if takes_flags(options):  # a study of models, each run with the command's options
        study = options.study if options.study == "default" else None
        return [
            Workload(model=m, model_overrides=o, study=study, **common)
            for m, o in STUDIES[options.study]
        ]
    context = Context(platform, num_devices, smoke=options.smoke)
    return [w for name in study_names(options.study) for w in STUDIES[name](context)]


def model_overrides(options: Options) -> dict[str, Any]:
    return {"width": options.width} if options.width else {}


def devices_kept(options: Options, devices: Sequence[D]) -> list[D]:
    """The devices the command runs on: one, unless a placement that spreads (or a
    count) is asked for or a study picks its own."""
    if takes_flags(options) and options.strategy == "single" and options.num_devices is None:
        return list(devices[:1])
    return list(devices)


def checkpoint_root(options: Options) -> Path | None:
    """The root of the per-workload checkpoint folders; None without checkpoints."""
    if not options.checkpoints:
        return None
    return Path(options.checkpoint_dir or Path(options.out) / CHECKPOINTS_FOLDER)


SUMMARY_HEADERS = [
    "study",
    "model",
    "precision",
    "loop",
    "device",
    "batch",
    "FLOPs/step",
    "step time [p10-p90]",
    "images/s",
    "FLOP/s",
    "test acc",
    "status",
]
NAME_COLUMNS = 2  # study and model read left-aligned, the rest right-aligned
MEASURED_FROM = SUMMARY_HEADERS.index("FLOPs/step")  # the cells said once a record is made


def model_cell(workload: Workload) -> str:
    """The model as the table names it, with what else sets its row apart (of a
    Workload, or a record's workload, which carries the same fields)."""
    w = workload
    model = model_with_overrides(w)
    if w.kind == "matmul":  # its batch_size is the matrices' side
        precision = w.matmul_precision
        side = f" {w.batch_size}x{w.batch_size}"
        model = "matmul" + side + (f" ({precision})" if precision != "default" else "")
    elif w.kind == "ensemble":
        model += f" x{w.ensemble_size} {w.ensemble_mode}"
    if w.strategy != "single":
        model += f" [{w.strategy}{' ' + w.scaling if w.scaling else ''}]"
    if w.formulation != "auto":
        model += f" formulation={w.formulation}"
    if w.seed:
        model += f" seed={w.seed}"
    return model


def summary_row(record: Record) -> list[Any]:
    """One record of a sweep (train, matmul, ensemble) as a row of the table under
    SUMMARY_HEADERS."""
    w = record.workload
    step = record.step_time_s
    spread = f" [{seconds(step.p10)}-{seconds(step.p90)}]" if step else ""
    acc = record.test_accuracy if isinstance(record, TrainRecord) else None
    matmul = isinstance(record, MatmulRecord)
    rate = record.achieved_tflops
    return [
        w.study or "-",
        model_cell(w),
        w.precision,
        "-" if matmul else w.loop,
        device_label(record),
        "-" if matmul else w.batch_size,
        si(record.flops.per_step if record.flops else None),
        (seconds(step.median) + spread) if step else "-",
        f"{record.images_per_s:,.0f}" if record.images_per_s else "-",
        si(rate * 1e12) if rate else "-",
        f"{acc:.4f}" if acc is not None else "-",
        record.status if record.status == "ok" else f"{record.status}: {record.message}",
    ]


def measured_line(record: Record) -> str:
    """What a record measured, in one line, said as soon as it is made."""
    cells = zip(SUMMARY_HEADERS[MEASURED_FROM:], summary_row(record)[MEASURED_FROM:], strict=True)
    return "  ".join(f"{h}: {c}" for h, c in cells)
