"""python -m experiments.run [--device=auto|cpu|gpu|tpu] [--model=NAME | --study=NAME] [--out=DIR]

The command line of the study: it parses options and calls experiments.cli.plan (what
they ask for), experiments.harness.sweep (running it) and experiments.cli.targets (compiling for
devices not at hand). `--help` and every mistake in the options alone are answered
before JAX is imported. EPILOG says the exit codes and what a rerun skips and resumes.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import textwrap
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from experiments.cli import options as cli_options
from experiments.cli import plan as cli_plan
from experiments.cli.options import (
    DATASETS,
    DEVICES,
    GROUP_NOTES,
    HERE,
    MODELS,
    SETTING_GROUPS,
    SETTINGS,
    STRATEGIES,
    TARGETS,
    OneLineParser,
    as_setting,
    choice,
    read_setting,
    spelled,
)
from experiments.records import DEFAULT_OUT, Record, TrainRecord
from experiments.records.tables import format_table, one_line_warning

if TYPE_CHECKING:  # the annotations only: the parser and --help start no JAX
    from experiments.harness.sweep import Swept

DESCRIPTION = """\
Runs a study (by default three of the seeds' models on the embedded `digits` data,
offline, in well under three minutes on a 2-core CPU), one --model, or compiles for a
--target not at hand. Every workload appends one record to OUT/records.jsonl; the table
at the end shows them."""

EPILOG = """\
exit codes:
  0    every workload ok (oom and nan are findings, not failures)
  1    a workload ended in error, or a record could not be appended (it is then kept
       in the temp folder, and one line says where)
  2    a usage error (bad option, absent device, missing data, unwritable --out), said
       in one line before anything is written
  129  SIGHUP (a closed terminal or SSH session), 130 Ctrl-C (SIGINT), 143 SIGTERM
       (what cloud TPU VMs, Kaggle and Slurm send): training stops at the next step
       boundary (epoch boundary with loop=device) and checkpoints there, and one line
       says so. The stopped workload gets no record; the same command resumes it. A
       second Ctrl-C stops at once, without the checkpoint.

rerun, skip, resume:
  Each workload has a configuration key (a hash of the workload and the devices' platform,
  kind and count). A rerun skips every workload with an ok, nan or oom record of its key in
  OUT/records.jsonl (an error is retried), so a study killed midway and rerun ends with one
  record per workload; --force reruns them from scratch. Training checkpoints go to
  CHECKPOINT_DIR/<key> (default OUT/checkpoints) at every epoch end, and a workload
  resumes from its newest one, to the same parameters bit for bit on CPU.

less common options: --set NAME=VALUE (repeatable), e.g. --set timing_steps=50
  --set host_memory=system; --help-all lists them all.
"""


class _Parser(OneLineParser):
    def hint_for(self, argument: str) -> str | None:
        setting = as_setting(argument)  # a flag that became a setting?
        if setting:
            return f"{argument.split('=')[0]} is now {setting}"
        return super().hint_for(argument)


class _Set(argparse.Action):
    """--set NAME=VALUE: a less common option (experiments.cli.options.SETTINGS), read
    and checked like a flag, kept as the attribute NAME of the parsed options."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, *_) -> None:
        try:
            name, value = read_setting(values)
        except argparse.ArgumentTypeError as e:
            parser.error(f"--set {values}: {e}")
        setattr(namespace, name, value)


class _HelpAll(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(parser.format_help() + "\n" + settings_help())
        parser.exit()


def settings_help(width: int = 88) -> str:
    """The less common options, by group, as --help-all lists them."""
    lines = ["less common options, as --set NAME=VALUE:"]
    for group, settings in SETTING_GROUPS.items():
        lines.append(f"\n  {group}:")
        note = GROUP_NOTES.get(group, "")
        lines += textwrap.wrap(note, width, initial_indent="    ", subsequent_indent="    ")
        for name, setting in settings.items():
            head = f"    {name}={setting.metavar}"
            if len(head) > 30:  # a name too long for the column: its help starts below
                lines.append(head)
                head = ""
            lines += textwrap.wrap(
                setting.help, width, initial_indent=f"{head:<32}", subsequent_indent=" " * 32
            )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m experiments.run",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--help-all", action=_HelpAll, help="also list the --set options, and exit")
    run = p.add_argument_group("what to run")
    run.add_argument(
        "--model",
        metavar="NAME",
        type=choice("model", MODELS),
        help=f"run this one model instead of a study: {', '.join(MODELS)}",
    )
    run.add_argument(
        "--study",
        metavar="NAME",
        default="default",
        type=choice("study", cli_plan.study_choices),
        help=f"{', '.join(cli_plan.study_choices())} (default: default; "
        "experiments/studies/ says what each asks)",
    )
    run.add_argument(
        "--smoke",
        action="store_true",
        help="shrink the study to seconds on a CPU (digits, tiny sizes, a few steps)",
    )
    run.add_argument("--summary", action="store_true", help="print --model's layer table and exit")
    where = p.add_argument_group("where")
    where.add_argument(
        "--device",
        metavar="NAME",
        default="auto",
        type=choice("device", DEVICES),
        help="auto | cpu | gpu | tpu (default: auto, the accelerator JAX finds, else the CPU)",
    )
    where.add_argument(
        "--num-devices",
        metavar="N",
        type=cli_options.devices,
        help="use the first N devices (default: 1 with --strategy=single, else all)",
    )
    where.add_argument(
        "--strategy",
        metavar="NAME",
        default="single",
        type=choice("strategy", STRATEGIES),
        help="single: one device | pmap: one replica per device | sharded: jit over a data "
        "mesh | model: the weights split over the devices on their output features, the "
        "batch on each | data_model: both, on a 2-D mesh (default: single). Several CPU "
        "devices: JAX_NUM_CPU_DEVICES=8 in the environment",
    )
    where.add_argument(
        "--target",
        metavar="NAME",
        type=choice("target", (*TARGETS, HERE)),
        help="compile for a device not at hand instead of running, and say whether it "
        f"compiles and fits, and its predicted time: {', '.join(TARGETS)}, or {HERE} "
        "(this machine's chips)",
    )
    data = p.add_argument_group("data")
    data.add_argument(
        "--dataset",
        metavar="NAME",
        default="digits",
        type=choice("dataset", DATASETS),
        help=f"{' | '.join(DATASETS)} (default: digits, embedded)",
    )
    data.add_argument(
        "--data-dir",
        metavar="DIR",
        help="folder with the original IDX .gz files of mnist or fashion_mnist, or a folder "
        "holding mnist/ and fashion_mnist/ (default: TFDS downloads them)",
    )
    training = p.add_argument_group("training")
    training.add_argument(
        "--epochs",
        metavar="N",
        type=cli_options.epochs,
        help=f"0: compile and time only (default: {cli_plan.DEFAULT_EPOCHS}; --smoke: "
        f"{cli_plan.SMOKE_FLAGS['epochs']})",
    )
    training.add_argument(
        "--batch-size",
        metavar="N",
        type=cli_options.batch_size,
        help=f"global batch (default: {cli_plan.DEFAULT_BATCH}; --smoke: "
        f"{cli_plan.SMOKE_FLAGS['batch_size']})",
    )
    records = p.add_argument_group("records")
    records.add_argument(
        "--out",
        metavar="DIR",
        default=DEFAULT_OUT,
        help=f"folder for records.jsonl and checkpoints (default: {DEFAULT_OUT}, git-ignored; "
        "--out=results adds to the records this repository commits)",
    )
    records.add_argument(
        "--force", action="store_true", help="rerun workloads already recorded, from scratch"
    )
    records.add_argument(
        "--set",
        action=_Set,
        metavar="NAME=VALUE",
        help=f"a less common option, repeatable: {', '.join(SETTINGS)} (what each does: "
        "see --help-all)",
    )
    p.set_defaults(**{name: setting.default for name, setting in SETTINGS.items()})
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options of `argv`; a usage error the options alone show exits 2 in one line,
    before JAX is imported."""
    parser = build_parser()
    options = parser.parse_args(argv)
    defaults = {name: parser.get_default(name) for name in vars(options)}
    try:
        cli_plan.check(options, defaults)
    except cli_plan.OptionError as e:
        parser.error(str(e))
    return options


EXIT_TERMINATED = 143  # 128 + SIGTERM, what shells report for a job SIGTERM ended
# The signals that stop a run at its next step boundary, checkpointed: a scheduler's or
# a preemption's (SIGTERM), a closed terminal's (SIGHUP), Ctrl-C (SIGINT). Each ends the
# run with 128 + its number, as a shell reports a job the signal ended.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def main(argv: list[str] | None = None) -> int:
    try:
        options = parse_args(argv)
    except SystemExit as done:  # --help, or a usage error already said in one line
        return done.code if isinstance(done.code, int) else 0
    with warnings.catch_warnings(), _stop_on_signals() as received:
        warnings.showwarning = one_line_warning
        return _main(options, received)


class _stop_on_signals:
    """Each of STOP_SIGNALS asks training to stop at a step boundary
    (jaxcnn.loop.request_stop) instead of killing the process mid-step; the signals
    received are kept in the list `__enter__` returns (a second SIGINT raises
    KeyboardInterrupt: a user who presses Ctrl-C twice does not wait). The previous
    handlers are put back after."""

    def __enter__(self) -> list[signal.Signals]:
        from jaxcnn import loop

        loop.clear_stop()
        self.received: list[signal.Signals] = []
        self._previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
        for number in STOP_SIGNALS:
            signal.signal(number, self._stop)
        return self.received

    def _stop(self, number: int, frame: object) -> None:
        from jaxcnn import loop

        if number == signal.SIGINT and signal.SIGINT in self.received:
            raise KeyboardInterrupt
        self.received.append(signal.Signals(number))
        loop.request_stop()

    def __exit__(self, *exc: object) -> None:
        from jaxcnn import loop

        for number, previous in self._previous.items():
            signal.signal(number, previous)
        loop.clear_stop()


def stopped_by(received: list[signal.Signals]) -> signal.Signals:
    """The signal that stopped a run: the first of those `received` (SIGTERM where the
    stop was asked some other way, jaxcnn.loop.request_stop called in-process)."""
    return received[0] if received else signal.SIGTERM


def _main(options: argparse.Namespace, received: list[signal.Signals]) -> int:
    if sys.stderr.isatty():  # a log or a test reads a usage error below as its one line
        print("starting JAX...", file=sys.stderr, flush=True)
    import jaxcnn
    from experiments import records
    from jaxcnn import distributed, models, targets
    from jaxcnn.errors import DataError, JaxcnnError
    from jaxcnn.loop import Stopped
    from jaxcnn.perf import predict

    if options.smoke:  # every record of this run, subprocesses' too, says it is a smoke one
        os.environ[records.SMOKE_ENV] = "1"

    # With the [targets] extra on a machine with no TPU or GPU, JAX would log the TPU
    # and CUDA backends failing to start; this program runs on the CPU, or compiles there.
    targets.cpu_backend_only()
    try:
        try:  # what every record's prediction is priced with, checked before any work
            predict.constants()
        except predict.ConstantsError as e:
            raise DataError(str(e)) from None
        if cli_plan.compile_only(options):
            from experiments.cli import targets as run_targets  # compiled for devices not at hand
            from jaxcnn import devices as devices_lib

            devices_lib.check_platforms_start()  # the compiler runs on this host's CPU
            _check_writable(Path(options.out) / records.RECORDS_FILE, "--out", options.out)
            return run_targets.run(options)
        # before JAX starts; then, before any other JAX call, the processes meet, and
        # afterwards jax.devices() is every process's devices
        with warnings.catch_warnings():  # main() run again in one process (tests) comes
            warnings.simplefilter("ignore", RuntimeWarning)  # too late: records say so
            policy = cli_plan.host_memory(options)
            if policy != options.host_memory:
                print(f"host memory: {policy}, as --study={options.study} needs", file=sys.stderr)
            jaxcnn.configure_host(policy, options.device, cli_plan.loops(options))
        joined = distributed.initialize(
            options.coordinator,
            options.num_processes,
            options.process_id,
            options.coordinator_timeout,
        )
        try:
            if options.summary:
                print(models.summary(options.model, **cli_plan.model_overrides(options)))
                return 0
            return _run(options)
        finally:
            if joined:
                distributed.shutdown()
    except (JaxcnnError, records.NotRecorded) as e:  # NotRecorded: after the work, the record kept
        print(f"error: {e}", file=sys.stderr)
        return 1 if isinstance(e, records.NotRecorded) else 2
    except KeyboardInterrupt:
        print("interrupted: records written so far are kept", file=sys.stderr)
        return 128 + signal.SIGINT
    except Stopped as stopped:
        by = stopped_by(received)
        print(
            f"terminated ({by.name}): {stopped}; records written so far are kept; "
            "the same command resumes",
            file=sys.stderr,
        )
        return 128 + by


def _check_writable(path: Path, option: str, given: str | Path, folder: bool = False) -> None:
    """A usage error naming `option` and the path the user `given` for it, if `path`
    (the records file, or a folder) could not be written; creates nothing, so a usage
    error found later leaves the disk as it was."""
    from experiments import records
    from jaxcnn.errors import UsageError

    try:
        (records.check_writable_folder if folder else records.check_writable)(path)
    except OSError as e:
        # The path in the way (a file where a folder must be), not a probe that failed
        # to be made, which does not exist and the user never named. os.path.exists, not
        # Path.exists: a name too long to look up is "not there", not a second error.
        culprit = e.filename and os.path.lexists(e.filename) and Path(e.filename) != Path(given)
        where = f" ({e.filename})" if culprit else ""
        raise UsageError(f"cannot write to {option} {given}: {e.strerror or e}{where}") from None


def _printed(swept: Iterable[Swept]) -> Iterator[Swept]:
    """`swept` as it comes, each record measured now printed once it is written."""
    for one in swept:
        if one.measured:
            _print_done(one.record)
        yield one


def _print_done(record: Record) -> None:
    resumed = record.resumed_from_step if isinstance(record, TrainRecord) else None
    if resumed:
        print(f"    resumed at checkpoint step {resumed}", file=sys.stderr)
    print("    " + cli_plan.measured_line(record), file=sys.stderr)


def _run(options: argparse.Namespace) -> int:
    import jax

    from experiments import records
    from experiments.harness import sweep
    from jaxcnn import devices as devices_lib

    found = devices_lib.resolve(options.device, options.num_devices)
    devices = cli_plan.devices_kept(options, found)
    workloads = cli_plan.workloads(options, devices[0].platform, len(devices))
    _check_writable(Path(options.out) / records.RECORDS_FILE, "--out", options.out)
    out = Path(options.out).resolve()  # the real folder: the records' and the locks' place
    checkpoint_root = cli_plan.checkpoint_root(options)
    if checkpoint_root is not None:
        option = spelled("checkpoint_dir") if options.checkpoint_dir else "--out"
        given = options.checkpoint_dir or options.out
        _check_writable(checkpoint_root, option, given, folder=True)
    sweep_options = sweep.SweepOptions(
        out,
        data_dir=options.data_dir,
        force=options.force,
        progress=options.progress,
        checkpoint_root=checkpoint_root,
        checkpoint_every=options.checkpoint_every,
        keep_checkpoints=options.keep_checkpoints,
    )
    done, skipped = sweep.tally(_printed(sweep.sweep_records(workloads, devices, sweep_options)))
    failed = 1 if any(r.status == "error" for r in done) else 0
    if jax.process_index() != 0:
        return failed
    rows = [cli_plan.summary_row(r) for r in done]
    print(format_table(cli_plan.SUMMARY_HEADERS, rows, left=cli_plan.NAME_COLUMNS))
    print(f"\n{len(done) - skipped} record(s) appended to {out / records.RECORDS_FILE}")
    if skipped:
        print(f"{skipped} workload(s) already recorded were skipped (--force reruns them)")
    print(f"next, their report (REPORT.md and its plots in {out}): {report_command(out)}")
    return failed


def report_command(out: Path) -> str:
    """The command that writes the report of the records in `out`: a run's next step."""
    return f"python -m experiments.report {shlex.quote(str(out).rstrip('/') + '/')}"
