"""python -m experiments.run [--device=auto|cpu|gpu|tpu] [--model=NAME ...] [--out=DIR]

With no --model it runs the default study: three of the seeds' models on the embedded
`digits` data, offline, in well under three minutes on a 2-core CPU. With --model it
runs that one workload. Every workload appends one record to OUT/records.jsonl.

Exit codes: 0 when every workload is `ok` (or `oom`/`nan`, which are findings, not
failures); 1 when a workload ended in `error`; 2 for a usage error (bad flag, absent
device, missing data), reported in one line before anything is written.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from experiments.tables import format_table, seconds, si

DEFAULT_STUDY = (
    ("mnist_cnn", {}),
    ("lenet5_keras", {}),
    ("mlp", {"width": 512}),
)
DEFAULT_EPOCHS = 5
DEFAULT_BATCH = 64


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, not a usage dump
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m experiments.run", description=__doc__.split("\n\n")[1])
    p.add_argument("--device", default="auto", help="auto|cpu|gpu|tpu (default: auto)")
    p.add_argument("--num-devices", type=_positive_int, help="use the first N devices")
    p.add_argument("--strategy", default="single", help="single (default)")
    p.add_argument("--model", help="a registered model; omit for the default study")
    p.add_argument("--width", type=_positive_int, help="hidden width for --model=mlp")
    p.add_argument("--dataset", default="digits", help="digits|mnist|fashion_mnist|synthetic")
    p.add_argument("--data-dir", help="folder with the original IDX .gz files")
    p.add_argument(
        "--batch-size", type=_positive_int, help=f"global batch (default {DEFAULT_BATCH})"
    )
    p.add_argument("--epochs", type=_positive_int, help=f"default {DEFAULT_EPOCHS}")
    p.add_argument("--steps", type=_positive_int, help="stop after this many training steps")
    p.add_argument("--optimizer", default="adam", help="adam|sgd")
    p.add_argument("--learning-rate", type=_positive_float, default=1e-3)
    p.add_argument("--precision", default="f32", help="f32|bf16 compute (params stay f32)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--timing-steps",
        type=_positive_int,
        default=20,
        help="steps timed one by one for the step-time median (default 20)",
    )
    p.add_argument("--out", default="results", help="folder for records.jsonl (default results/)")
    p.add_argument("--summary", action="store_true", help="print --model's layer table and exit")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    return p


def _workloads(args: argparse.Namespace) -> list[Any]:
    from experiments.workload import Workload

    common = {
        "dataset": args.dataset,
        "batch_size": args.batch_size or DEFAULT_BATCH,
        "epochs": args.epochs or DEFAULT_EPOCHS,
        "steps": args.steps,
        "optimizer": args.optimizer,
        "learning_rate": args.learning_rate,
        "seed": args.seed,
        "strategy": args.strategy,
        "precision": args.precision,
        "timing_steps": args.timing_steps,
    }
    if args.model is None:
        return [Workload(model=m, model_overrides=o, **common) for m, o in DEFAULT_STUDY]
    overrides = {"width": args.width} if args.width else {}
    return [Workload(model=args.model, model_overrides=overrides, **common)]


def _check_out(out: Path) -> Path:
    from jaxcnn.errors import UsageError

    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"cannot write to --out {out}: {e.strerror or e}") from None
    return out


def _row(record: dict[str, Any]) -> list[Any]:
    w, d = record["workload"], record["device"]
    step = record.get("step_time_s") or {}
    spread = f" [{seconds(step['p10'])}-{seconds(step['p90'])}]" if step else ""
    acc = record.get("test_accuracy")
    model = w["model"] + "".join(f" {k}={v}" for k, v in w["model_overrides"].items())
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


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from jaxcnn import devices as devices_lib
    from jaxcnn import models
    from jaxcnn.errors import JaxcnnError

    try:
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
    except KeyboardInterrupt:
        print("interrupted: records written so far are kept", file=sys.stderr)
        return 130


def raise_usage(message: str) -> NoReturn:
    from jaxcnn.errors import UsageError

    raise UsageError(message)


def _run(args: argparse.Namespace, devices_lib: Any) -> int:
    from experiments import records
    from experiments.workload import load_splits, run_workload
    from jaxcnn import models, parallel

    devices = devices_lib.resolve(args.device, args.num_devices)
    if args.strategy == "single" and args.num_devices is None:
        devices = devices[:1]  # one device unless a placement that spreads is asked for
    workloads = _workloads(args)
    for w in workloads:  # every usage error surfaces before any work or any write
        models.get(w.model, **w.module_overrides())
        parallel.check_batch_size(w.batch_size, len(devices))
        parallel.place(w.strategy, devices)
    out = _check_out(Path(args.out))
    splits = {}
    for w in workloads:
        key = (w.dataset, models.input_shape(w.model, **w.model_overrides))
        if key not in splits:
            splits[key] = load_splits(w, args.data_dir)
    path = out / records.RECORDS_FILE
    done = []
    print(f"devices: {devices_lib.describe(devices)}", file=sys.stderr)
    for i, w in enumerate(workloads, 1):
        print(
            f"[{i}/{len(workloads)}] {w.model} on {w.dataset}, batch {w.batch_size}, "
            f"{w.epochs} epoch(s)",
            file=sys.stderr,
        )
        key = (w.dataset, models.input_shape(w.model, **w.model_overrides))
        record = run_workload(w, devices, splits[key], progress=not args.no_progress)
        records.append(path, record)
        done.append(record)
        print(
            "    "
            + "  ".join(f"{h}: {c}" for h, c in zip(HEADERS[3:], _row(record)[3:], strict=True)),
            file=sys.stderr,
        )
    print(format_table(HEADERS, [_row(r) for r in done]))
    print(f"\n{len(done)} record(s) appended to {path}")
    return 1 if any(r["status"] == "error" for r in done) else 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
