"""python -m benchmarks.peers [--frameworks torch,keras] [--models ...] [--batch-sizes ...]
[--modes ...] [--steps K] [--repeats R] [--threads N] [--out DIR]: the JAX bench study's
three models and train step in PyTorch (modes eager, compile) and in Keras 3 on TensorFlow
(modes graph: a tf.function train step; xla: the same with jit_compile=True), on the CPU,
timed by the same rules, one record per (framework, model, batch, mode).

Optional and never run in CI. Run it from a separate virtualenv that has no JAX (see
benchmarks/README.md): it imports nothing from jax, jaxcnn or experiments.harness.measure. It
appends the records to DIR/records.jsonl with experiments.records (the standard library
and pydantic), with workload kind "peer", workload.framework "torch" | "keras" and
workload.mode. Its other imports of this repository are standard library too:
experiments.cli.options (the one-line parser), benchmarks.command_line (the command
line paired.py reads alike) and benchmarks.turns (how blocks take turns under
benchmarks/paired.py).

Rules, the same for every framework and as the JAX side: K batches of random uint8 images
and int labels made once in memory as the framework's tensors; the first step timed alone
(compile_time_s.train: torch.compile's tracing and codegen, tf.function's tracing and XLA's
compile, or eager first-call overheads) and one more untimed warm-up step; then R repeats of
K consecutive steps, the clock read with time.perf_counter() once the K-th step's loss has
been fetched to the host. Per repeat: K*batch/seconds images/s; median, p10, p90.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from benchmarks import turns  # the standard library only: no jax
from benchmarks.command_line import (  # the standard library only: no jax
    MLP_WIDTH,
    MODELS,
    UsageError,
    add_common,
    batch_sizes,
    names,
    records_path,
)
from experiments import records  # the standard library and pydantic: no jax
from experiments.cli.options import OneLineParser  # JAX-free
from experiments.records.stats import minor_page_faults, summarize  # NumPy only: as the JAX side

PROG = "python -m benchmarks.peers"
REPO = Path(__file__).resolve().parents[1]
REQUIREMENTS = "benchmarks/requirements-peers.txt"
# The Flax models' exact parameter counts (jaxcnn/models/small.py): a mismatch means the
# frameworks would not be timing the same network.
EXPECTED_PARAMS = {"lenet5_keras": 81_194, "mnist_cnn": 225_034, "mlp": 20_037_642}
IMAGE_SIZE = {"lenet5_keras": (32, 32), "mnist_cnn": (28, 28), "mlp": (28, 28)}  # 1 channel
DROPOUT = 0.2
NUM_CLASSES = 10
LEARNING_RATE = 1e-3
ADAM_EPSILON = 1e-8  # optax.adam's default (Keras' own is 1e-7; torch's is 1e-8)
SEED = 0
# Untimed calls before the repeats, as experiments.harness.measure.time_calls (warmup=2); the
# first of them is the one timed alone as compile_time_s.
WARMUP_STEPS = 2
MIN_REPEATS = 5
# Environment variables that change what a framework does on the CPU: recorded when set.
ENV_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)

Batches = list[tuple[Any, Any]]


class NotInstalled(RuntimeError):
    """A framework asked for (or none at all) is not installed: one line, exit code 2."""


# --- Shared: data and timing --------------------------------------------------------------


def make_arrays(name: str, batch: int, steps: int, channels_last: bool) -> list[tuple]:
    """`steps` batches of random uint8 images and int labels as numpy arrays, made once up
    front so the timed loop does no data work (the JAX side also times data in memory)."""
    rng = np.random.default_rng(SEED)
    height, width = IMAGE_SIZE[name]
    shape = (batch, height, width, 1) if channels_last else (batch, 1, height, width)
    return [
        (
            rng.integers(0, 256, shape, dtype=np.uint8),
            rng.integers(0, NUM_CLASSES, (batch,), dtype=np.int64),
        )
        for _ in range(steps)
    ]


def time_block(step: Callable, batches: Batches, fetch: Callable[[Any], float]) -> float:
    """Seconds for consecutive steps, one per batch, the clock read once the last step's
    loss is on the host (a step may return before its work is done); a loss that is not
    finite raises."""
    started = time.perf_counter()
    for images, labels in batches:
        loss = step(images, labels)
    value = fetch(loss)
    seconds = time.perf_counter() - started
    if not math.isfinite(value):
        raise FloatingPointError("loss is not finite")
    return seconds


def timed(
    step: Callable, batches: Batches, fetch: Callable[[Any], float], batch: int, repeats: int
) -> dict[str, Any]:
    """The timing rules: first step alone, untimed warm-up, R repeats of K steps."""
    steps = len(batches)
    first = time_block(step, batches[:1], fetch)  # compile (or first-call) time, apart
    for i in range(1, WARMUP_STEPS):  # the rest of the warm-up, untimed
        fetch(step(*batches[i % steps]))
    faults = minor_page_faults()
    # In a paired run (benchmarks/paired.py) each repeat waits for this process's turn.
    seconds = turns.timed_blocks(lambda: time_block(step, batches, fetch), repeats, steps * batch)
    faults_per_step = (minor_page_faults() - faults) / (repeats * steps)
    return {
        "compile_time_s": {"train": first, "eval": None},
        "throughput": {
            **summarize([steps * batch / s for s in seconds]),
            "steps": steps,
            "minor_faults_per_step": round(faults_per_step, 1),
        },
        "step_time_s": summarize([s / steps for s in seconds]),
    }


def size(weights: Sequence[Any]) -> int:
    """The number of values in these weights (Keras variables)."""
    return sum(math.prod(w.shape) for w in weights)


def checked_params(name: str, count: int) -> int:
    """`count` trainable parameters; raises if they differ from the Flax model's count."""
    expected = EXPECTED_PARAMS[name]
    if count != expected:
        raise AssertionError(f"{name} has {count:,} params, the Flax model {expected:,}")
    return count


# --- Frameworks ---------------------------------------------------------------------------


class Framework:
    """A peer framework: its modes, how to load it and how to time one workload."""

    name: str
    module: str  # what to look for before importing
    modes: tuple[str, ...]
    pip: str

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def load(self, threads: int | None) -> dict[str, Any]:
        """Import, set the threads if asked, and return the framework's `env` fields."""
        raise NotImplementedError

    def measure(self, name: str, batch: int, mode: str, steps: int, repeats: int) -> dict:
        """Build, warm up and time one workload: the measured fields of its record."""
        raise NotImplementedError


class Torch(Framework):
    name = "torch"
    module = "torch"
    modes = ("eager", "compile")
    pip = "pip install torch==2.13.0"

    def load(self, threads: int | None) -> dict[str, Any]:
        import torch

        if threads is not None:
            torch.set_num_threads(threads)
        self.torch: ModuleType = torch
        return {
            "framework": "torch",
            "framework_version": torch.__version__,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),  # torch's default unless --threads
        }

    def build(self, name: str) -> Any:
        """The Flax model `name` in torch.nn, layer for layer (NCHW, torch's native CPU
        layout: the same math; default initializers: init does not change step time)."""
        nn = self.torch.nn
        if name == "lenet5_keras":
            return nn.Sequential(
                nn.Conv2d(1, 6, 3), nn.ReLU(), nn.AvgPool2d(2),
                nn.Conv2d(6, 16, 3), nn.ReLU(), nn.AvgPool2d(2),
                nn.Flatten(),
                nn.Linear(16 * 6 * 6, 120), nn.ReLU(),
                nn.Linear(120, 84), nn.ReLU(),
                nn.Linear(84, NUM_CLASSES),
            )  # fmt: skip
        if name == "mnist_cnn":
            return nn.Sequential(
                nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(),
                nn.Linear(64 * 5 * 5, 128), nn.ReLU(),
                nn.Linear(128, NUM_CLASSES),
            )  # fmt: skip
        if name == "mlp":
            return nn.Sequential(
                nn.Flatten(),
                nn.Linear(28 * 28, MLP_WIDTH), nn.ReLU(), nn.Dropout(DROPOUT),
                nn.Linear(MLP_WIDTH, MLP_WIDTH), nn.ReLU(), nn.Dropout(DROPOUT),
                nn.Linear(MLP_WIDTH, NUM_CLASSES),
            )  # fmt: skip
        raise ValueError(f"unknown model {name!r}")

    def measure(self, name: str, batch: int, mode: str, steps: int, repeats: int) -> dict:
        torch = self.torch
        if mode == "compile":
            # A fresh dynamo cache per workload: a second batch size of the same model would
            # otherwise recompile with a dynamic batch dim, timing different code.
            torch._dynamo.reset()
        torch.manual_seed(SEED)  # the same initial weights in every mode
        model = self.build(name)
        params = checked_params(name, sum(p.numel() for p in model.parameters()))
        model.train()  # dropout on, as the JAX train step
        forward = torch.compile(model) if mode == "compile" else model
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, eps=ADAM_EPSILON)
        cross_entropy = torch.nn.functional.cross_entropy

        def step(images: Any, labels: Any) -> Any:
            # uint8 -> f32 in [0, 1] inside the step, as jaxcnn.train._scaled does.
            x = images.to(torch.float32) / 255.0
            loss = cross_entropy(forward(x), labels)  # mean softmax CE, as optax's
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            return loss  # not .item(): only the K-th step of a block is synced

        batches = [
            (torch.from_numpy(x), torch.from_numpy(y))
            for x, y in make_arrays(name, batch, steps, channels_last=False)
        ]
        return {
            "params": {"trainable": params, "non_trainable": 0},
            **timed(step, batches, lambda loss: loss.item(), batch, repeats),
        }


class Keras(Framework):
    name = "keras"
    module = "tensorflow"
    modes = ("graph", "xla")
    pip = "pip install tensorflow-cpu==2.21.0  (Keras 3 comes with it)"

    def installed(self) -> bool:
        return super().installed() and importlib.util.find_spec("keras") is not None

    def load(self, threads: int | None) -> dict[str, Any]:
        os.environ["KERAS_BACKEND"] = "tensorflow"  # the step is a tf.GradientTape step
        import keras
        import tensorflow as tf

        if keras.backend.backend() != "tensorflow":
            raise RuntimeError(f"Keras runs on {keras.backend.backend()}, not tensorflow")
        if threads is not None:  # before TF runs anything: it cannot change them after
            tf.config.threading.set_intra_op_parallelism_threads(threads)
            tf.config.threading.set_inter_op_parallelism_threads(threads)
        self.tf: ModuleType = tf
        self.keras: ModuleType = keras
        intra = tf.config.threading.get_intra_op_parallelism_threads()
        inter = tf.config.threading.get_inter_op_parallelism_threads()
        env = {
            "framework": "keras",
            "framework_version": keras.__version__,
            "keras": keras.__version__,
            "keras_backend": "tensorflow",
            "tensorflow": tf.__version__,
            "threads": intra,  # TF's intra-op threads
            "tf_inter_op_threads": inter,
        }
        if 0 in (intra, inter):
            env["threads_note"] = "0 = TF's default: as many threads as cores (cpu_count)"
        return env

    def build(self, name: str) -> Any:
        """The Flax model `name` in Keras layers, channels-last as Flax."""
        keras = self.keras
        layers = keras.layers
        last = "channels_last"

        def conv(filters: int) -> Any:
            return layers.Conv2D(filters, 3, padding="valid", activation="relu", data_format=last)

        if name == "lenet5_keras":
            body = [
                conv(6), layers.AveragePooling2D(2, data_format=last),
                conv(16), layers.AveragePooling2D(2, data_format=last),
                layers.Flatten(data_format=last),
                layers.Dense(120, activation="relu"),
                layers.Dense(84, activation="relu"),
                layers.Dense(NUM_CLASSES),
            ]  # fmt: skip
        elif name == "mnist_cnn":
            body = [
                conv(32), layers.MaxPooling2D(2, data_format=last),
                conv(64), layers.MaxPooling2D(2, data_format=last),
                layers.Flatten(data_format=last),
                layers.Dense(128, activation="relu"),
                layers.Dense(NUM_CLASSES),
            ]  # fmt: skip
        elif name == "mlp":
            body = [
                layers.Flatten(data_format=last),
                layers.Dense(MLP_WIDTH, activation="relu"), layers.Dropout(DROPOUT),
                layers.Dense(MLP_WIDTH, activation="relu"), layers.Dropout(DROPOUT),
                layers.Dense(NUM_CLASSES),
            ]  # fmt: skip
        else:
            raise ValueError(f"unknown model {name!r}")
        height, width = IMAGE_SIZE[name]
        return keras.Sequential([keras.Input((height, width, 1)), *body], name=name)

    def measure(self, name: str, batch: int, mode: str, steps: int, repeats: int) -> dict:
        tf, keras = self.tf, self.keras
        keras.backend.clear_session()  # the last workload's graphs and names go
        keras.utils.set_random_seed(SEED)  # the same initial weights in every mode
        model = self.build(name)
        params = checked_params(name, size(model.trainable_weights))
        variables = model.trainable_variables
        optimizer = keras.optimizers.Adam(learning_rate=LEARNING_RATE, epsilon=ADAM_EPSILON)
        optimizer.build(variables)  # its slots exist before tracing
        loss_of = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # mean CE

        @tf.function(jit_compile=mode == "xla")
        def step(images: Any, labels: Any) -> Any:
            x = tf.cast(images, tf.float32) / 255.0  # as jaxcnn.train._scaled
            with tf.GradientTape() as tape:
                loss = loss_of(labels, model(x, training=True))  # dropout on
            grads = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))
            return loss

        batches = [
            (tf.constant(x), tf.constant(y.astype(np.int32)))
            for x, y in make_arrays(name, batch, steps, channels_last=True)
        ]
        return {
            "params": {"trainable": params, "non_trainable": size(model.non_trainable_weights)},
            **timed(step, batches, lambda loss: float(loss.numpy()), batch, repeats),
        }


FRAMEWORKS: dict[str, Framework] = {f.name: f for f in (Torch(), Keras())}
OWNER = {mode: f.name for f in FRAMEWORKS.values() for mode in f.modes}


# --- Records ------------------------------------------------------------------------------


def load_jax_free(name: str) -> ModuleType:
    """jaxcnn/`name`.py, loaded by path: `import jaxcnn.host_memory` would run
    jaxcnn/__init__, which imports JAX, absent here. The module itself imports no JAX."""
    spec = importlib.util.spec_from_file_location(f"jaxcnn_{name}", REPO / "jaxcnn" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOST_MEMORY = load_jax_free("host_memory")
MACHINE = load_jax_free("machine")  # this computer and boot, named as a JAX record names them


def environment(
    framework_env: dict[str, Any], threads: int | None, host_memory: dict[str, Any]
) -> dict[str, Any]:
    """The `env` field (utc_time set again per record): versions, commit, host, threads."""
    return records.environment(
        packages=(),
        cpu_count=os.cpu_count(),
        **framework_env,
        threads_requested=threads,  # --threads; None: the framework's default
        host_memory=host_memory,  # jaxcnn/host_memory.py: what --host-memory set
        env_vars={k: os.environ[k] for k in ENV_VARS if k in os.environ},
    )


def workload_of(framework: str, name: str, batch: int, mode: str, steps: int) -> dict:
    return {
        "kind": "peer",
        "study": "bench",
        "framework": framework,
        "mode": mode,
        "model": name,
        "model_overrides": {"width": MLP_WIDTH} if name == "mlp" else {},
        "dataset": "synthetic",
        "batch_size": batch,
        "epochs": 0,
        "steps": None,
        "optimizer": "adam",
        "learning_rate": LEARNING_RATE,
        "seed": SEED,
        "strategy": "single",
        "precision": "f32",
        "timing_steps": steps,
    }


def device_of() -> dict[str, Any]:
    return {
        "platform": "cpu",
        "kind": "cpu",
        "count": 1,
        "process_count": 1,
        "host": socket.gethostname(),
        "machine": MACHINE.machine_id(),
        "boot": MACHINE.boot_id(),
    }


DEFAULT_HOST_MEMORY = "retain"


def conditions(env: dict[str, Any]) -> dict[str, Any]:
    """What a peer's record was measured under that differs from the defaults, so its
    key covers it (records.config_key), as a JAX record's conditions do: threads asked
    for (--threads), a host allocator other than the default, thread and allocator
    variables set in the environment. Empty under the defaults."""
    found: dict[str, Any] = {}
    if env.get("threads_requested") is not None:
        found["threads"] = env["threads_requested"]
    policy = (env.get("host_memory") or {}).get("policy")
    if policy not in (None, DEFAULT_HOST_MEMORY):
        found["host_memory"] = policy
    if env.get("env_vars"):
        found["env_vars"] = env["env_vars"]
    return found


def run_one(
    framework: Framework, env: dict[str, Any], name: str, batch: int, mode: str, args: Any
) -> dict[str, Any]:
    """One workload's record, ok or not: a failure is data, the run goes on."""
    workload = workload_of(framework.name, name, batch, mode, args.steps)
    device = device_of()
    env = {**env, "utc_time": records.utc_now()}
    record = records.new_record(workload, device, env, conditions(env))
    try:
        record.update(framework.measure(name, batch, mode, args.steps, args.repeats))
    except Exception as e:  # any one workload's failure becomes its record
        return records.failed(record, e)
    record["status"] = "ok"
    record["images_per_s"] = record["throughput"]["median"]
    return record


def line_of(record: dict[str, Any]) -> str:
    w = record["workload"]
    head = f"{w['framework']:<6} {w['model']:<13} batch {w['batch_size']:<5} {w['mode']:<8}"
    if record["status"] != "ok":
        return f"{head}{record['status']}: {record['message']}"
    t = record["throughput"]
    first = record["compile_time_s"]["train"]
    spread = f"[{t['p10']:,.0f}-{t['p90']:,.0f}]"
    return f"{head}{t['median']:>10,.0f} img/s {spread}  first step {first:.2f}s"


# --- Command line -------------------------------------------------------------------------


def _plan(frameworks: str | None, modes: str | None) -> dict[str, list[str]]:
    """{framework: its modes to run}, from --frameworks and --modes. Neither: every
    installed framework, all its modes; --modes alone: the frameworks they belong to."""
    wanted = names(modes, list(OWNER), "mode") if modes else None
    if frameworks:
        chosen = names(frameworks, list(FRAMEWORKS), "framework")
    elif wanted:
        chosen = [f for f in FRAMEWORKS if any(OWNER[m] == f for m in wanted)]
    else:
        chosen = [f for f, framework in FRAMEWORKS.items() if framework.installed()]
        if not chosen:
            raise NotInstalled(f"no peer framework is installed: pip install -r {REQUIREMENTS}")
    if wanted is None:
        return {f: list(FRAMEWORKS[f].modes) for f in chosen}
    stray = [m for m in wanted if OWNER[m] not in chosen]
    if stray:
        raise UsageError(
            f"mode {', '.join(stray)} belongs to no chosen framework ({', '.join(chosen)}): "
            + "; ".join(f"{f}: {', '.join(FRAMEWORKS[f].modes)}" for f in chosen)
        )
    plan = {f: [m for m in wanted if OWNER[m] == f] for f in chosen}
    idle = [f for f, run in plan.items() if not run]
    if idle:
        raise UsageError(f"--modes {modes} has no mode of {', '.join(idle)}")
    return plan


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = OneLineParser(
        prog=PROG,
        description="The JAX bench study's models and train step in PyTorch and Keras 3 "
        "(TensorFlow) on the CPU.",
    )
    p.add_argument(
        "--frameworks", help="torch, keras or both (default: those installed; with --modes, "
        "the frameworks of those modes)"
    )  # fmt: skip
    add_common(p)
    p.add_argument(
        "--modes", help="of torch: eager, compile; of keras: graph, xla (default: all of each)"
    )
    p.add_argument("--steps", type=int, default=20, help="K: consecutive steps per repeat")
    p.add_argument("--repeats", type=int, default=7, help=f"R >= {MIN_REPEATS}: timed repeats")
    p.add_argument(
        "--threads", type=int, help="torch.set_num_threads and TF's intra/inter-op threads "
        "(default: each framework's own, recorded)"
    )  # fmt: skip
    p.add_argument(
        "--host-memory",
        choices=HOST_MEMORY.POLICIES,
        default=DEFAULT_HOST_MEMORY,
        help="host allocator, as the JAX bench's on CPU: retain (default; "
        "jaxcnn/host_memory.py) | system (glibc's defaults)",
    )
    args = p.parse_args(argv)
    args.models = names(args.models, MODELS, "model")
    args.batch_sizes = batch_sizes(args.batch_sizes)
    args.records = records_path(args.out)
    if args.steps < 1:
        raise UsageError(f"--steps {args.steps}: must be >= 1")
    if args.repeats < MIN_REPEATS:
        raise UsageError(f"--repeats {args.repeats}: must be >= {MIN_REPEATS} (p10/p90 need them)")
    if args.threads is not None and args.threads < 1:
        raise UsageError(f"--threads {args.threads}: must be >= 1")
    args.plan = _plan(args.frameworks, args.modes)
    missing = [f for f in args.plan if not FRAMEWORKS[f].installed()]
    if missing:
        raise NotInstalled(
            "; ".join(f"{f} is not installed: {FRAMEWORKS[f].pip}" for f in missing)
            + f"  (or: pip install -r {REQUIREMENTS})"
        )
    return args


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse(argv)
    except (UsageError, NotInstalled) as e:
        print(f"error: {e}" if isinstance(e, UsageError) else str(e), file=sys.stderr)
        return 2
    path = args.records
    # before any framework is imported: threads keep the arena they first allocate from
    host_memory = HOST_MEMORY.apply(args.host_memory, "cpu")
    for name, modes in args.plan.items():  # torch first, then keras: each imported in turn
        framework = FRAMEWORKS[name]
        env = environment(framework.load(args.threads), args.threads, host_memory)
        note = f" ({env['threads_note']})" if "threads_note" in env else ""
        print(
            f"{name} {env['framework_version']}, {env['threads']} threads{note} -> {path}",
            flush=True,
        )
        for model in args.models:
            for batch in args.batch_sizes:
                for mode in modes:
                    record = run_one(framework, env, model, batch, mode, args)
                    try:
                        records.append_or_keep(path, record)
                    except records.RecordError as e:
                        print(f"records.append rejected the record: {e}", file=sys.stderr)
                        return 1
                    except records.NotRecorded as e:  # kept elsewhere, and said where
                        print(f"error: {e}", file=sys.stderr)
                        return 1
                    print(line_of(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
