"""python -m experiments.run [--device=auto|cpu|gpu|tpu] [--model=NAME | --study=NAME] [--out=DIR]

With no --model it runs a study: by default three of the seeds' models on the embedded
`digits` data, offline, in well under three minutes on a 2-core CPU; --study=NAME runs
one of the seeds' questions (experiments/studies.py; --study=all runs them all), and
--smoke shrinks any study to seconds on a CPU. With --model it runs that one workload.
Every workload appends one record to OUT/records.jsonl.

Exit codes: 0 when every workload is `ok` (or `oom`/`nan`, which are findings, not
failures); 1 when a workload ended in `error`, or a record could not be appended (it is
then kept in the temp folder, and one line says where); 2 for a usage error (bad flag,
absent device, missing data, a records file or folder that cannot be written), reported
in one line before anything is written; 143 after a SIGTERM (what cloud TPU VMs, Kaggle
and Slurm send before stopping a job): training stops at the next step boundary (epoch
boundary with --loop=device), saves a checkpoint there, says so in one line and exits.
The stopped workload gets no record, as after Ctrl-C (exit 130): the same command
resumes it from that checkpoint, to the same parameters bit for bit.

Nothing lost, nothing twice. Each workload has a configuration key (a hash of the
workload and the device platform/kind/count, stored in its record as `config_key`).
Rerunning a command skips every workload that already has an `ok`, `nan` or `oom`
record with its key in OUT/records.jsonl (those are results; an `error` is retried),
so a study killed midway and rerun ends with one record per workload. `--force`
runs them again (appending new records) and starts their training from scratch.

Resume is automatic: training checkpoints (Orbax) go to CHECKPOINT_DIR/<config key>
(default OUT/checkpoints/), at every epoch end and every --checkpoint-every steps,
and a workload whose directory holds a checkpoint resumes from its newest complete
one, at the same batch, to the same parameters bit for bit on CPU. The key makes a
checkpoint of another configuration impossible to pick up by mistake.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

from experiments.records import DEFAULT_OUT
from experiments.studies import COMPILE_STUDIES
from experiments.studies import STUDIES as NAMED_STUDIES
from experiments.studies.default import DEFAULT_STUDY
from experiments.tables import format_table, one_line_warning, seconds, si
from jaxcnn import host_memory  # imports no JAX backend: applied in _main before one starts

# --study NAME: a tuple of (model, overrides) runs with the command's flags (--epochs,
# --batch-size, ...); a function of a studies.Context sets its own sizes.
STUDIES: dict[str, Any] = {"default": DEFAULT_STUDY, **NAMED_STUDIES}
ALL = "all"  # every function study, in STUDIES order
DEFAULT_EPOCHS = 5
DEFAULT_BATCH = 64
# --smoke on a flag-driven study (default): seconds, not minutes
SMOKE_FLAGS = {"epochs": 1, "steps": 3, "batch_size": 32, "timing_steps": 3}
# flags that a function study sets itself: giving one with it is a usage error
STUDY_SETS = ("batch_size", "epochs", "steps", "width", "model")
# flags a function study fixes too: giving one away from its default is a usage error
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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not a usage dump
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _integer(text: str, minimum: int, maximum: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < minimum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise argparse.ArgumentTypeError(f"{value} is not {what}")
    if maximum is not None and value > maximum:
        raise argparse.ArgumentTypeError(f"{value} is not in {minimum}..{maximum}")
    return value


def _positive_int(text: str) -> int:
    return _integer(text, 1)


def _count(text: str) -> int:
    return _integer(text, 0)


def _seed(text: str) -> int:
    # JAX's keys take 32 bits; an ensemble adds its member index, so 31 leave room.
    return _integer(text, 0, 2**31 - 1)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m experiments.run", description=__doc__.split("\n\n")[1])
    p.add_argument("--device", default="auto", help="auto|cpu|gpu|tpu (default: auto)")
    p.add_argument("--num-devices", type=_positive_int, help="use the first N devices")
    p.add_argument(
        "--strategy",
        default="single",
        help="single (default; one device) | pmap (one replica per device) | "
        "sharded (jit over a data mesh)",
    )
    p.add_argument(
        "--target",
        help="compile for a device not at hand instead of running (e.g. tpu-v5e-8, gpu-t4; "
        "jaxcnn/targets.py lists them; here: this machine's chips): compiles?, fits?, "
        "memory per chip, predicted time",
    )
    p.add_argument("--model", help="a registered model; omit to run --study")
    p.add_argument(
        "--study",
        default="default",
        help=f"one of {', '.join([*STUDIES, ALL, *COMPILE_STUDIES])} (default: default)",
    )
    p.add_argument(
        "--smoke",
        action="store_true",
        help="shrink the study to seconds on a CPU (digits, tiny sizes, a few steps)",
    )
    p.add_argument("--width", type=_positive_int, help="hidden width for --model=mlp")
    p.add_argument("--dataset", default="digits", help="digits|mnist|fashion_mnist|synthetic")
    p.add_argument("--data-dir", help="folder with the original IDX .gz files")
    p.add_argument(
        "--batch-size", type=_positive_int, help=f"global batch (default {DEFAULT_BATCH})"
    )
    p.add_argument(
        "--epochs", type=_count, help=f"default {DEFAULT_EPOCHS}; 0: compile and time only"
    )
    p.add_argument("--steps", type=_positive_int, help="stop after this many training steps")
    p.add_argument("--optimizer", default="adam", help="adam|sgd")
    p.add_argument("--learning-rate", type=_positive_float, default=1e-3)
    p.add_argument("--precision", default="f32", help="f32|bf16 compute (params stay f32)")
    p.add_argument(
        "--schedule",
        default="constant",
        help="learning rate: constant (default) | onecycle (up to --learning-rate over the "
        "first quarter of the run, then down to 0)",
    )
    p.add_argument(
        "--loop",
        default="step",
        help="step: one compiled step per batch (default) | device: whole epochs on device",
    )
    p.add_argument(
        "--formulation",
        default="auto",
        help="how convolutions are computed: auto (the platform's fastest) | xla | cpu",
    )
    p.add_argument(
        "--host-memory",
        choices=host_memory.POLICIES,
        default="auto",
        help="host allocator: auto (retain where the step loop runs on a CPU, else system) "
        "| retain (reuse freed memory; jaxcnn/host_memory.py) | system (glibc's defaults)",
    )
    p.add_argument("--seed", type=_seed, default=0, help="0..2**31-1 (default 0)")
    p.add_argument(
        "--timing-steps",
        type=_positive_int,
        default=20,
        help="steps timed one by one for the step-time median (default 20)",
    )
    p.add_argument(
        "--out",
        default=DEFAULT_OUT,
        help=f"folder for records.jsonl (default {DEFAULT_OUT}/, git-ignored; --out=results "
        "adds to the records this repository commits)",
    )
    p.add_argument(
        "--checkpoint-dir", help="root of per-workload checkpoints (default OUT/checkpoints)"
    )
    p.add_argument(
        "--checkpoint-every",
        type=_positive_int,
        help="also checkpoint every N steps (always at each epoch end)",
    )
    p.add_argument(
        "--keep-checkpoints",
        type=_positive_int,
        default=2,
        help="checkpoints kept per workload (default 2)",
    )
    p.add_argument(
        "--no-checkpoints", action="store_true", help="no checkpoints, no resume (timing sweeps)"
    )
    p.add_argument(
        "--force", action="store_true", help="rerun workloads already recorded, from scratch"
    )
    p.add_argument("--summary", action="store_true", help="print --model's layer table and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    hosts = p.add_argument_group(
        "many hosts",
        "run the same command on every host, each with its own --process-id; process 0 "
        "writes the records. --coordinator=auto lets JAX detect TPU pods, Slurm, Open MPI",
    )
    hosts.add_argument("--coordinator", help="HOST:PORT of process 0, or auto")
    hosts.add_argument("--num-processes", type=_positive_int, help="processes in all")
    hosts.add_argument("--process-id", type=int, help="this process, 0..N-1")
    hosts.add_argument(
        "--coordinator-timeout",
        type=_positive_float,
        default=300.0,
        help="seconds to wait for the coordinator and the other processes (default 300)",
    )
    return p


def _study_names(name: str) -> list[str]:
    if name == ALL:
        return [n for n, study in STUDIES.items() if callable(study)]
    if name not in STUDIES:
        raise_usage(f"unknown study {name!r}: choose one of {', '.join([*STUDIES, ALL])}")
    return [name]


def _loops(args: argparse.Namespace) -> set[str]:
    """The loops (`step`, `device`) the command will run, known before JAX starts, as the
    host memory policy must be. A study's loops do not depend on the platform."""
    from experiments.studies import Context

    if args.model is not None:
        return {args.loop}
    names = _study_names(args.study)
    loops = {args.loop for name in names if not callable(STUDIES[name])}
    context = Context(smoke=args.smoke)
    return loops | {
        w.loop for name in names if callable(STUDIES[name]) for w in STUDIES[name](context)
    }


def _workloads(args: argparse.Namespace, devices: list[Any]) -> list[Any]:
    """The workloads of --model, or of --study given the devices resolved."""
    from experiments.studies import Context
    from experiments.workload import Workload

    smoke = SMOKE_FLAGS if args.smoke else {}
    common = {
        "dataset": args.dataset,
        "batch_size": args.batch_size or smoke.get("batch_size", DEFAULT_BATCH),
        "epochs": smoke.get("epochs", DEFAULT_EPOCHS) if args.epochs is None else args.epochs,
        "steps": args.steps or smoke.get("steps"),
        "optimizer": args.optimizer,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "strategy": args.strategy,
        "precision": args.precision,
        "timing_steps": smoke.get("timing_steps", args.timing_steps),
        "loop": args.loop,
        "formulation": args.formulation,
        "schedule": args.schedule,
    }
    if args.model is not None:
        overrides = {"width": args.width} if args.width else {}
        return [Workload(model=args.model, model_overrides=overrides, **common)]
    found = []
    for name in _study_names(args.study):
        study = STUDIES[name]
        if callable(study):
            given = [f"--{f.replace('_', '-')}" for f in STUDY_SETS if getattr(args, f) is not None]
            defaults = build_parser()
            given += [
                f"--{f.replace('_', '-')}"
                for f in STUDY_FIXED
                if getattr(args, f) != defaults.get_default(f)
            ]
            if given:
                raise_usage(
                    f"{', '.join(given)} cannot go with --study={args.study}: the study "
                    "sets its own sizes (see experiments/studies.py; --smoke shrinks them)"
                )
            context = Context(devices[0].platform, len(devices), smoke=args.smoke)
            found.extend(study(context))
        else:
            study_name = None if name not in ("default",) else name
            found.extend(
                Workload(model=m, model_overrides=o, study=study_name, **common) for m, o in study
            )
    return found


def _check_writable(path: Path, flag: str, folder: bool = False) -> None:
    """A usage error if `path` (the records file, or a folder) could not be written;
    creates nothing, so a usage error found later leaves the disk as it was."""
    from experiments import records

    try:
        (records.check_writable_folder if folder else records.check_writable)(path)
    except OSError as e:
        raise_usage(f"cannot write to {flag} {e.filename or path}: {e.strerror or e}")


def _row(record: dict[str, Any]) -> list[Any]:
    w, d = record["workload"], record["device"]
    step = record.get("step_time_s") or {}
    spread = f" [{seconds(step['p10'])}-{seconds(step['p90'])}]" if step else ""
    acc = record.get("test_accuracy")
    model = w["model"] + "".join(f" {k}={v}" for k, v in w["model_overrides"].items())
    if w.get("kind") == "matmul":
        model = f"matmul {w['precision']}" + (
            f" ({w['matmul_precision']})" if w.get("matmul_precision") != "default" else ""
        )
    elif w.get("kind") == "ensemble":
        model += f" x{w['ensemble_size']} {w['ensemble_mode']}"
    if w.get("strategy", "single") != "single":
        model += f" [{w['strategy']}{' ' + w['scaling'] if w.get('scaling') else ''}]"
    return [
        model,
        f"{d['platform']} x{d['count']} ({d['kind']})",
        w["batch_size"],
        si((record.get("flops") or {}).get("per_step")),
        (seconds(step.get("median")) + spread) if step else "-",
        f"{record['images_per_s']:,.0f}" if record.get("images_per_s") else "-",
        f"{acc:.4f}" if acc is not None else "-",
        record["status"]
        if record["status"] == "ok"
        else f"{record['status']}: {record['message']}",
    ]


HEADERS = [
    "model",
    "device",
    "batch",
    "FLOPs/step",
    "step time [p10-p90]",
    "images/s",
    "test acc",
    "status",
]


EXIT_TERMINATED = 143  # 128 + SIGTERM, what shells report for a job SIGTERM ended


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings(), _stop_on_sigterm():
        warnings.showwarning = one_line_warning
        return _main(args)


class _stop_on_sigterm:
    """SIGTERM asks training to stop at a step boundary (jaxcnn.loop.request_stop)
    instead of killing the process mid-step; the previous handler is put back after."""

    def __enter__(self) -> None:
        from jaxcnn import loop

        loop.clear_stop()
        self._previous = signal.signal(signal.SIGTERM, lambda *_: loop.request_stop())

    def __exit__(self, *exc: object) -> None:
        from jaxcnn import loop

        signal.signal(signal.SIGTERM, self._previous)
        loop.clear_stop()


def _main(args: argparse.Namespace) -> int:
    from experiments import records
    from jaxcnn import devices as devices_lib
    from jaxcnn import models
    from jaxcnn.errors import JaxcnnError
    from jaxcnn.loop import Stopped

    try:
        if args.target is not None or args.study in COMPILE_STUDIES:
            from experiments import run_targets  # compiled for devices not at hand

            return run_targets.run(args)
        host_memory.apply(args.host_memory, args.device, _loops(args))  # before JAX starts
        # before any other JAX call; afterwards jax.devices() is every process's devices
        from jaxcnn import distributed

        distributed.initialize(
            args.coordinator, args.num_processes, args.process_id, args.coordinator_timeout
        )
        if args.summary:
            if not args.model:
                raise_usage("--summary needs --model=NAME")
            overrides = {"width": args.width} if args.width else {}
            print(models.summary(args.model, **overrides))
            return 0
        return _run(args, devices_lib)
    except JaxcnnError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except records.NotRecorded as e:  # after the work: exit 1, the record kept
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: records written so far are kept", file=sys.stderr)
        return 130
    except Stopped as stopped:
        print(
            f"terminated (SIGTERM): {stopped}; records written so far are kept; "
            "the same command resumes",
            file=sys.stderr,
        )
        return EXIT_TERMINATED


def raise_usage(message: str) -> NoReturn:
    from jaxcnn.errors import UsageError

    raise UsageError(message)


def _print_done(record: dict[str, Any]) -> None:
    if record.get("resumed_from_step"):
        print(f"    resumed at checkpoint step {record['resumed_from_step']}", file=sys.stderr)
    cells = zip(HEADERS[3:], _row(record)[3:], strict=True)
    print("    " + "  ".join(f"{h}: {c}" for h, c in cells), file=sys.stderr)


def _run(args: argparse.Namespace, devices_lib: Any) -> int:
    import jax

    from experiments import records, sweep

    devices = devices_lib.resolve(args.device, args.num_devices)
    flag_driven = args.model is not None or not (
        args.study == ALL or callable(STUDIES.get(args.study))
    )
    if flag_driven and args.strategy == "single" and args.num_devices is None:
        devices = devices[:1]  # one device unless a placement that spreads is asked for
    workloads = _workloads(args, devices)
    sweep.check_all(workloads, devices, args.data_dir)  # every usage error before any work
    if args.no_checkpoints and (args.checkpoint_every or args.checkpoint_dir):
        raise_usage("--checkpoint-every/--checkpoint-dir cannot go with --no-checkpoints")
    out = Path(args.out)
    _check_writable(out / records.RECORDS_FILE, "--out")
    checkpoint_root = None
    if not args.no_checkpoints:
        checkpoint_root = Path(args.checkpoint_dir) if args.checkpoint_dir else out / "checkpoints"
        _check_writable(checkpoint_root, "--checkpoint-dir", folder=True)
    done, skipped = sweep.run_sweep(
        workloads,
        devices,
        out,
        data_dir=args.data_dir,
        force=args.force,
        progress=not args.no_progress,
        checkpoint_root=checkpoint_root,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        on_record=_print_done,
    )
    failed = 1 if any(r["status"] == "error" for r in done) else 0
    if jax.process_index() != 0:
        return failed
    print(format_table(HEADERS, [_row(r) for r in done]))
    print(f"\n{len(done) - skipped} record(s) appended to {out / records.RECORDS_FILE}")
    if skipped:
        print(f"{skipped} workload(s) already recorded were skipped (--force reruns them)")
    return failed


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
