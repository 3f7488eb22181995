"""Every placement computes what one device computes, on 8 fake CPU devices.

Tolerance: float32, atol = rtol = 1e-5 on params, batch stats and loss after K=3 Adam
steps. Placements reorder the float32 sums of the gradient and of the BatchNorm
moments (per-device partial sums, then an all-reduce), so results agree to rounding,
not bit for bit: measured differences are at most ~1e-6 (a few ulps of values near
1), so 1e-5 leaves a margin of 10x while a wrong average (e.g. a missing pmean, or
per-device BatchNorm statistics) is off by 1e-3 or more.

Why resnet_tiny (shrunk) is the BatchNorm model and not catsdogs_cnn: shrunk to 4
channels, catsdogs_cnn is ill-conditioned. Its Dense bias before BatchNorm has an
exactly-zero true gradient, so its computed gradient is rounding noise that Adam
normalises to +-learning rate, and tiny differences flip max-pool winners. Its
placements differ by ~1e-3 from the first steps on: that measures noise, not placement.
"""

from __future__ import annotations

import functools
import os
import re
import signal
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import records
from experiments.cli.run import main
from experiments.harness.prepare import record_for
from experiments.records.workload import Workload
from jaxcnn import choices, data, devices, models, parallel, train
from jaxcnn.errors import UsageError
from jaxcnn.loop import FitOptions, fit

ATOL = RTOL = 1e-5
STEPS = 3
GLOBAL_BATCH = 16  # 2 examples per device on 8 devices

CASES = {
    "mnist_cnn": {"input_size": 14},  # the real layers on a smaller image: faster on CPU
    "mlp": {"width": 32, "dropout": 0.0},
    "resnet_tiny": {"stage_sizes": (1,), "num_filters": 4, "input_size": 16},
}


def _new_state(name: str, overrides: dict | None = None, lr: float = 1e-3):
    """(fresh initial state, input shape); initialised once per model and kept on the
    host, because each placement's step donates (deletes) the state it is given."""
    host, shape = _initial(name, tuple(sorted((overrides or CASES[name]).items())), lr)
    return jax.tree.map(np.array, host), shape


@functools.cache
def _initial(name: str, overrides: tuple, lr: float):
    overrides = dict(overrides)
    shape = models.input_shape(name, **overrides)
    module = models.get(name, **{k: v for k, v in overrides.items() if k != "input_size"})
    state = train.create_train_state(module, train.make_optimizer("adam", lr), shape)
    return jax.device_get(state), shape


def _batches(shape, steps: int = STEPS, batch_size: int = GLOBAL_BATCH, seed: int = 1):
    images, labels = data.synthetic(steps * batch_size, shape, 10, seed=seed)
    return list(data.batches(images, labels, batch_size))


def _train(placement: parallel.Placement, state, batches):
    """(final state as numpy, losses) after one step per batch."""
    state = placement.put_state(state)
    losses = []
    for batch in batches:
        state, metrics = placement.train_step(state, placement.put_batch(batch))
        losses.append(float(placement.get_metrics(metrics)["loss"]))
    return jax.device_get(placement.get_state(state)), np.array(losses)


def _assert_trees_close(actual, expected):
    assert jax.tree.structure(actual) == jax.tree.structure(expected)
    for (path, a), b in zip(
        jax.tree_util.tree_leaves_with_path(actual), jax.tree.leaves(expected), strict=True
    ):
        assert np.shape(a) == np.shape(b), jax.tree_util.keystr(path)
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL, err_msg=jax.tree_util.keystr(path))


@functools.cache
def _single_run(name: str):
    state, shape = _new_state(name)
    return _train(parallel.place("single", jax.devices()), state, _batches(shape))


@pytest.mark.parametrize("strategy", ["pmap", "sharded"])
@pytest.mark.parametrize("name", list(CASES))
def test_strategy_matches_single_device(name, strategy):
    assert jax.device_count() == 8
    expected, expected_losses = _single_run(name)
    state, shape = _new_state(name)
    placement = parallel.place(strategy, jax.devices())
    actual, losses = _train(placement, state, _batches(shape))
    assert int(actual.step) == STEPS and np.ndim(actual.step) == 0  # one logical copy
    np.testing.assert_allclose(losses, expected_losses, rtol=RTOL, atol=ATOL)
    _assert_trees_close(actual.params, expected.params)
    _assert_trees_close(actual.batch_stats, expected.batch_stats)
    if name == "resnet_tiny":  # the BatchNorm case really has statistics to compare
        assert jax.tree.leaves(actual.batch_stats)


def test_fit_and_evaluate_match_single_device():
    """The whole loop: padded, masked eval batches and metrics brought back to scalars."""
    splits = [data.load("digits", s) for s in ("train", "test")]
    histories = {}
    for strategy in choices.STRATEGIES:
        state, _ = _new_state("mlp")
        placement = parallel.place(strategy, jax.devices())
        options = FitOptions(batch_size=GLOBAL_BATCH, max_steps=3, placement=placement)
        (histories[strategy],) = fit(state, *splits, options)[1]
    single = histories["single"]
    for strategy in ("pmap", "sharded"):
        for key in ("train_loss", "train_accuracy", "test_loss", "test_accuracy"):
            expected = pytest.approx(single[key], rel=RTOL, abs=ATOL)
            assert histories[strategy][key] == expected, (strategy, key)
        assert histories[strategy]["steps"] == 3


@pytest.mark.parametrize("strategy", ["single", "pmap", "sharded"])
def test_step_is_traced_once_and_compiles_ahead_of_time(strategy):
    traces = []

    def counted(state, batch, axis_name=None):
        traces.append(axis_name)  # runs only while tracing
        return train.train_step(state, batch, axis_name=axis_name)

    placement = parallel.place(strategy, jax.devices(), step=counted)
    state, shape = _new_state("mlp")
    state = placement.put_state(state)
    batches = [placement.put_batch(b) for b in _batches(shape, steps=4)]
    for batch in batches[:3]:
        state, _ = placement.train_step(state, batch)
    assert len(traces) == 1
    # What experiments/harness/measure.py does: lower + compile, then call the executables
    # with placed state and batches.
    compiled = placement.train_step.lower(state, batches[3]).compile()
    evaluate = placement.eval_step.lower(state, batches[3]).compile()
    before = placement.get_metrics(evaluate(state, batches[3]))["loss"]
    state, metrics = compiled(state, batches[3])
    after = placement.get_metrics(evaluate(state, batches[3]))["loss"]
    assert np.shape(placement.get_metrics(metrics)["loss"]) == ()
    assert float(after) < float(before)
    assert int(placement.get_state(state).step) == 4
    assert len(traces) == 1  # lower() reuses the trace; nothing traced again


# mlp's hidden kernel (4096x4096 at full width): the parameter whose copy the CPU's
# compiler options exist to remove (jaxcnn/devices.py, _COMPILER_OPTIONS).
HIDDEN_KERNEL = "state.params['Dense_1']['kernel']"
# An entry parameter of a compiled program, named by the JAX path XLA keeps in its
# metadata: the path survives XLA renaming the buffer (a partitioned program calls its
# parameters %param.N, where a one-device one says %state_params__Dense_1____kernel__).
_ENTRY_PARAMETER = re.compile(
    r'^\s*(%[^\s=]+) = [^\n]*? parameter\(\d+\)[^\n]*?op_name="(state\.params[^"]*)"', re.M
)
_COPY = re.compile(r"\bcopy\((%[^\s,)]+)\)")


def _copied_parameters(placement: parallel.Placement) -> set[str]:
    """The model parameters (JAX paths) that `placement`'s compiled mlp step copies."""
    state, shape = _new_state("mlp")
    state = placement.put_state(state)
    batch = placement.put_batch(_batches(shape, steps=1)[0])
    hlo = placement.train_step.lower(state, batch).compile().as_text()
    entry = hlo[hlo.index("\nENTRY ") :].replace("\\'", "'")
    parameters = dict(_ENTRY_PARAMETER.findall(entry))
    return {parameters[operand] for operand in _COPY.findall(entry) if operand in parameters}


@pytest.mark.parametrize("strategy", ["single", "sharded"])
def test_cpu_steps_compile_with_the_options_that_drop_the_kernel_copy(strategy, monkeypatch):
    """The CPU's options reach the compiler: with them, copy insertion's region analysis
    orders the step's reads of the donated hidden kernel before Adam's in-place update,
    so the compiled step does not copy it first; the same placement built with no options
    does (on jax 0.10), which also shows that the search finds a copy when there is one
    (should a later XLA drop that copy by itself, the control fails: the options may then
    be needless). One device: over 8, the partitioned mlp step copies no parameter either way."""
    one = jax.devices()[:1]
    placement = parallel.place(strategy, one)
    # What its records name as the options it compiled with.
    assert placement.compiler_options == {"xla_cpu_copy_insertion_use_region_analysis": True}
    with_options = _copied_parameters(placement)

    monkeypatch.setattr(devices, "platform_compiler_options", lambda platform: {})
    without = parallel.place(strategy, one)
    assert without.compiler_options == {}
    assert HIDDEN_KERNEL in _copied_parameters(without)  # positive control
    assert with_options == set()


def test_pmap_placements_say_they_compile_without_options():
    assert parallel.place("pmap", jax.devices()).compiler_options == {}
    assert devices.platform_compiler_options("gpu") == {}


@pytest.mark.parametrize("strategy", ["single", "sharded"])
def test_a_placements_own_options_join_the_platforms(strategy):
    # A compile-only target's own options (jaxcnn.targets.compiler_options) go to this
    # placement's jit calls beside the platform's, and no other placement's.
    own = {"xla_cpu_enable_fast_math": False}
    placement = parallel.place(strategy, jax.devices()[:1], options=own)
    assert placement.compiler_options == {**devices.platform_compiler_options("cpu"), **own}
    assert parallel.place(strategy, jax.devices()[:1]).compiler_options == (
        devices.platform_compiler_options("cpu")
    )
    # They reach the compiler: one it does not know stops this placement's compile.
    unknown = parallel.place(strategy, jax.devices()[:1], options={"xla_no_such_option": 1})
    state, shape = _new_state("mlp", {"width": 8})
    batch = _batches(shape, steps=1)[0]

    def compile_step(p: parallel.Placement) -> None:
        p.train_step.lower(p.put_state(state), p.put_batch(batch)).compile()

    compile_step(placement)  # the positive control: the same step, known options
    with pytest.raises(Exception, match="xla_no_such_option"):
        compile_step(unknown)


def test_pmap_refuses_options_it_cannot_apply():
    with pytest.raises(UsageError, match="no XLA options: xla_gpu_cuda_data_dir cannot apply"):
        parallel.place("pmap", jax.devices(), options={"xla_gpu_cuda_data_dir": "/x"})


def test_put_state_is_idempotent():
    state, _ = _new_state("mlp")
    for strategy in choices.STRATEGIES:
        placement = parallel.place(strategy, jax.devices())
        once = placement.put_state(state)
        twice = placement.put_state(once)
        assert jax.tree.map(jnp.shape, once) == jax.tree.map(jnp.shape, twice), strategy


def test_pmap_with_dropout_trains_and_replicas_draw_different_masks():
    state, shape = _new_state("mlp", {"width": 32, "dropout": 0.5}, lr=1e-2)
    images, labels = data.synthetic(2, shape, 10, seed=3)
    # Every replica gets the same 2 examples. Were the masks the same on every
    # replica, the averaged gradient would be replica 0's alone, and 8 devices would
    # train exactly like pmap on 1 device (whose only replica is replica 0).
    same_on_each = {"image": np.tile(images, (8, 1, 1, 1)), "label": np.tile(labels, 8)}
    one = {"image": images, "label": labels}
    eight = parallel.place("pmap", jax.devices())
    alone = parallel.place("pmap", jax.devices()[:1])
    on_eight, _ = _train(eight, state, [same_on_each])
    on_one, _ = _train(alone, state, [one])
    gaps = jax.tree.leaves(jax.tree.map(lambda a, b: np.max(np.abs(a - b)), on_eight, on_one))
    assert max(gaps) > 1e-4  # masks differ: a real difference, far above rounding

    # And dropout still trains: 10 steps on a fixed batch lower its (dropout-free) loss.
    images, labels = data.synthetic(GLOBAL_BATCH, shape, 10, seed=4)
    batch = eight.put_batch({"image": images, "label": labels})
    placed = eight.put_state(state)
    start = float(eight.get_metrics(eight.eval_step(placed, batch))["loss"])
    for _ in range(10):
        placed, metrics = eight.train_step(placed, batch)
        assert np.isfinite(float(eight.get_metrics(metrics)["loss"]))
    end = float(eight.get_metrics(eight.eval_step(placed, batch))["loss"])
    assert end < start


def test_every_strategy_is_listed_and_unknown_ones_name_them():
    assert choices.STRATEGIES == ("single", "pmap", "sharded")
    with pytest.raises(UsageError, match="single, pmap, sharded"):
        parallel.place("ring", jax.devices())


@pytest.mark.parametrize("batch_size,num_devices,hint", [(12, 8, "8 or 16"), (3, 8, "8")])
def test_indivisible_batch_names_valid_sizes(batch_size, num_devices, hint):
    with pytest.raises(UsageError, match=f"multiple of {num_devices} \\(e.g. {hint}\\)"):
        parallel.check_batch_size(batch_size, num_devices)


@pytest.mark.parametrize("strategy", ["pmap", "sharded"])
@pytest.mark.parametrize("num_devices", [3, 4])
def test_a_library_batch_that_does_not_divide_is_the_clis_one_line(strategy, num_devices):
    placement = parallel.place(strategy, jax.devices()[:num_devices])
    batch = {"image": np.zeros((31, 28, 28, 1), np.uint8), "label": np.zeros(31, np.int32)}
    lower = 31 - 31 % num_devices
    with pytest.raises(UsageError) as raised:
        placement.put_batch(batch)
    assert str(raised.value) == (
        f"batch size 31 does not divide over {num_devices} devices: use a multiple of "
        f"{num_devices} (e.g. {lower} or {lower + num_devices})"
    )


CLI_TINY = ["--model", "mlp", "--set", "width=8", "--epochs", "1", "--set", "steps=2"]
CLI_TINY += ["--set", "progress=false"]


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["--strategy", "pmap", "--num-devices", "8", "--batch-size", "12"],
            "batch size 12 does not divide over 8 devices: use a multiple of 8 (e.g. 8 or 16)",
        ),
        (["--strategy", "sharded", "--num-devices", "9"], "only 8 cpu device(s) are present"),
        (["--strategy", "ring"], "choose one of single, pmap, sharded"),
    ],
)
def test_cli_placement_errors_exit_2_in_one_line(tmp_path, capsys, argv, message):
    assert main(["--out", str(tmp_path), *CLI_TINY, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / records.RECORDS_FILE).exists()


def test_cli_pmap_on_eight_devices_records_them(tmp_path):
    argv = ["--out", str(tmp_path), *CLI_TINY, "--strategy", "pmap", "--batch-size", "16"]
    assert main([*argv, "--set", "timing_steps=2"]) == 0
    (record,) = records.load(tmp_path / records.RECORDS_FILE)
    assert record.status == "ok", record.message
    assert record.workload.strategy == "pmap"
    assert record.device.count == 8 and record.device.process_count == 1
    assert record.compiler_options == {}  # pmap takes no XLA options


@pytest.mark.parametrize("strategy", choices.STRATEGIES)
def test_get_state_is_one_logical_copy_that_puts_back(strategy):
    placement = parallel.place(strategy, jax.devices())
    state, shape = _new_state("mlp")
    placed = placement.put_state(state)
    placed, _ = placement.train_step(placed, placement.put_batch(_batches(shape, steps=1)[0]))
    logical = placement.get_state(placed)
    assert jax.tree.map(np.shape, logical) == jax.tree.map(np.shape, state)
    again = placement.put_state(logical)  # e.g. a restored checkpoint
    assert jax.tree.map(np.shape, again) == jax.tree.map(np.shape, placed)
    _assert_trees_close(jax.device_get(placement.get_state(again)), jax.device_get(logical))


# The pmap loop (train steps, then padded eval steps) on 8 fake devices, run 3 times in
# one process. A rendezvous that waits 10 s (XLA's default: 40 s) aborts it: nothing
# in these steps takes a tenth of that, even on a saturated CPU, unless it is stuck.
_PMAP_UNDER_LOAD = """
import jaxcnn
jaxcnn.configure_host(policy="system")  # the collective threads, before JAX starts
import jax
from jaxcnn import data, models, parallel, train
shape = models.input_shape("mnist_cnn")
tx = train.make_optimizer("adam", 1e-3)
state = jax.device_get(train.create_train_state(models.get("mnist_cnn"), tx, shape))
splits = [data.load("digits", s) for s in ("train", "test")]
splits = [(data.fit_to_shape(x, shape), y) for x, y in splits]
placement = parallel.place("pmap", jax.devices())
for _ in range(3):
    jaxcnn.fit(state, *splits, jaxcnn.FitOptions(batch_size=64, max_steps=6, placement=placement))
print("threads", __import__("os").environ["NPROC"])
"""
_BUSY = "import time\nend = time.time() + 120\nwhile time.time() < end: pass"


def test_collective_threads_cover_twice_the_cpu_devices():
    cores = os.cpu_count() or 1
    flags = {"XLA_FLAGS": "--xla_dump_to=x --xla_force_host_platform_device_count=64"}
    assert devices.reserve_collective_threads(flags) == max(cores, 128)
    assert flags["NPROC"] == str(max(cores, 128))
    env = {"JAX_NUM_CPU_DEVICES": "8"}
    assert devices.reserve_collective_threads(env) == max(cores, 16)
    assert devices.reserve_collective_threads({"JAX_NUM_CPU_DEVICES": "1"}) is None
    kept = {"JAX_NUM_CPU_DEVICES": "8", "NPROC": "3"}  # the user's choice stays
    assert devices.reserve_collective_threads(kept) is None and kept["NPROC"] == "3"
    assert devices.cpu_threads(kept) == {"NPROC": "3", "set_by": "user"}
    assert devices.cpu_threads({}) is None  # XLA sizes its pools itself


def test_records_say_what_sized_the_cpu_threads(monkeypatch):
    monkeypatch.delenv("NPROC", raising=False)
    monkeypatch.setattr(devices, "_reserved_threads", None)
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "8")
    threads = devices.reserve_collective_threads()  # what `jaxcnn.configure_host()` does
    env = lambda: record_for(Workload(model="mlp"), jax.devices()[:1])["env"]  # noqa: E731
    assert env()["cpu_threads"] == {"NPROC": str(threads), "set_by": "jaxcnn"}
    monkeypatch.setenv("NPROC", "3")
    assert env()["cpu_threads"] == {"NPROC": "3", "set_by": "user"}


# Many independent pmap programs, each with an all-reduce, all in flight at once: the
# shape of `loop.evaluate`'s eval steps (nothing orders one after another). With as
# many XLA:CPU workers as devices, replicas of several programs waiting in their
# rendezvous hold every worker and the last replica of the oldest one never runs: a
# 5 s rendezvous timeout aborts the process. On 2 cores loaded by other jobs this
# aborted 5 times of 5 with 8 workers and completed 5 times of 5 with jaxcnn's 16.
_COLLECTIVES_IN_FLIGHT = """
import os, jaxcnn, jax, jax.numpy as jnp
jaxcnn.configure_host()  # sizes the pools, before JAX starts
f = jax.pmap(lambda x: jax.lax.psum(jnp.tanh(x @ x).sum(0), "i"), axis_name="i")
x = jnp.ones((jax.device_count(), 256, 256))
jax.block_until_ready([f(x + k) for k in range(200)])
print("threads", os.environ["NPROC"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("reserved", [True, False])
def test_collectives_in_flight_deadlock_only_without_the_reserved_threads(reserved):
    """The deadlock for real, bounded by XLA's own rendezvous timeout: it aborts with
    workers = devices (NPROC=8, a user's NPROC is kept; XLA's own choice on up to 8
    cores), and completes with the workers jaxcnn reserves."""
    env = {k: v for k, v in os.environ.items() if k not in ("NPROC", "JAX_NUM_CPU_DEVICES")}
    env["JAX_PLATFORMS"] = "cpu"
    env["XLA_FLAGS"] = (
        "--xla_force_host_platform_device_count=8 "
        "--xla_cpu_collective_call_warn_stuck_timeout_seconds=2 "
        "--xla_cpu_collective_call_terminate_timeout_seconds=5"
    )
    if not reserved:
        env["NPROC"] = "8"
    run = subprocess.run(
        [sys.executable, "-c", _COLLECTIVES_IN_FLIGHT],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if reserved:
        assert run.returncode == 0, run.stderr[-2000:]
        assert f"threads {max(os.cpu_count() or 1, 16)}" in run.stdout
    else:  # the positive control: stuck in a rendezvous, then XLA's abort
        if run.returncode == 0:  # newer XLA:CPU (jax 0.12) no longer deadlocks here
            pytest.skip(f"jax {jax.__version__} completes with as many workers as devices")
        assert run.returncode == -signal.SIGABRT, (run.returncode, run.stderr[-2000:])
        assert "Expected 8 threads to join the rendezvous" in run.stderr


@pytest.mark.slow
def test_pmap_train_and_eval_survive_a_saturated_cpu():
    """Every core busy twice over: the run gets slower, it must not deadlock (it did:
    XLA:CPU had as many intra-op workers as devices; see devices.reserve_collective_threads)."""
    busy = [
        subprocess.Popen([sys.executable, "-c", _BUSY]) for _ in range(2 * (os.cpu_count() or 1))
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("NPROC", "JAX_NUM_CPU_DEVICES")}
    env["XLA_FLAGS"] = (
        "--xla_force_host_platform_device_count=8 "
        "--xla_cpu_collective_call_terminate_timeout_seconds=10"
    )
    try:
        run = subprocess.run(
            [sys.executable, "-c", _PMAP_UNDER_LOAD], env=env, capture_output=True, text=True
        )
    finally:
        for process in busy:
            process.kill()
            process.wait()
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"threads {max(os.cpu_count() or 1, 16)}" in run.stdout
