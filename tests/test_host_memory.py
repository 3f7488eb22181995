"""The host allocator policy: which one each device asks for, that it only takes effect
before JAX starts, and that it does what it is for: an execution with a large temporary
buffer stops faulting fresh pages in each time it runs."""

import json
import os
import subprocess
import sys
import textwrap

import jax
import pytest

from jaxcnn import host_memory


@pytest.mark.parametrize(
    "policy,device,expected",
    [
        ("retain", "gpu", "retain"),
        ("system", "cpu", "system"),
        ("auto", "cpu", "retain"),
        ("auto", "gpu", "system"),
        ("auto", "tpu", "system"),
    ],
)
def test_the_policy_each_device_asks_for(policy, device, expected):
    assert host_memory.resolve(policy, device) == expected


@pytest.mark.parametrize(
    "policy,loops,expected",
    [
        ("auto", {"step"}, "retain"),
        ("auto", {"device"}, "system"),  # the compiled epoch allocates once per call
        ("auto", {"step", "device"}, "retain"),
        ("retain", {"device"}, "retain"),  # asked for by name: given
    ],
)
def test_auto_on_a_cpu_follows_the_loops_the_process_runs(policy, loops, expected):
    assert host_memory.resolve(policy, "cpu", loops) == expected


@pytest.mark.parametrize("platforms,expected", [("cpu", "retain"), ("cuda,cpu", "system")])
def test_auto_follows_jax_platforms(monkeypatch, platforms, expected):
    monkeypatch.setenv("JAX_PLATFORMS", platforms)
    assert host_memory.resolve("auto", "auto") == expected


def test_an_unknown_policy_names_the_choices():
    with pytest.raises(ValueError, match="unknown host memory policy 'huge': choose one of auto"):
        host_memory.resolve("huge")


def test_after_jax_has_started_nothing_is_set_and_the_record_says_why():
    jax.devices()  # the test process's backends are up
    state = host_memory.apply("retain", "cpu")
    assert state["applied"] is False and state["policy"] == "system"
    assert "already started its backends" in state["reason"]
    assert host_memory.current()["reason"] == state["reason"]


# The allocation pattern of XLA:CPU's executions, in C: a worker thread mallocs a
# temporary buffer larger than glibc's largest mmap threshold (32 MiB), writes it all
# and frees it, execution after execution. The module is loaded by path, as the
# JAX-free peer benchmarks load it: nothing else runs in the process.
ONE_BUFFER_PER_EXECUTION = textwrap.dedent(
    """
    import ctypes, importlib.util, json, resource, sys, threading
    spec = importlib.util.spec_from_file_location("host_memory", sys.argv[2])
    host_memory = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(host_memory)
    state = host_memory.apply(sys.argv[1], "cpu")
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    size = int(sys.argv[3])
    faults = []

    def executions():
        for _ in range(5):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            buffer = libc.malloc(size)
            libc.memset(buffer, 1, size)
            libc.free(buffer)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

    worker = threading.Thread(target=executions)
    worker.start()
    worker.join()
    print(json.dumps({"state": state, "faults": faults}))
    """
)
BUFFER_BYTES = 96 * 2**20


def _executions(policy: str) -> dict:
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            ONE_BUFFER_PER_EXECUTION,
            policy,
            host_memory.__file__,
            str(BUFFER_BYTES),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_retain_reuses_a_freed_buffer_where_glibc_maps_it_afresh():
    system, retain = _executions("system"), _executions("retain")
    assert system["state"]["policy"] == "system"
    assert retain["state"] == {
        "policy": "retain",
        "applied": True,
        "reason": "asked: retain",
        "settings": host_memory.RETAIN,
    }
    pages = BUFFER_BYTES // 4096
    # glibc: every execution faults the whole buffer in again, page by page
    assert all(f >= pages for f in system["faults"]), system["faults"]
    # retain: the first execution grows the heap; the rest reuse it
    assert retain["faults"][0] > pages // 2, retain["faults"]
    assert all(f < pages // 100 for f in retain["faults"][1:]), retain["faults"]


# A library user's script: no host_memory call of its own.
LIBRARY_USER = textwrap.dedent(
    """
    import json, sys
    import jaxcnn
    from jaxcnn import host_memory, models
    jaxcnn.create_train_state(
        models.get("mlp", width=8), jaxcnn.make_optimizer("adam"), models.input_shape("mlp")
    )
    print(json.dumps(host_memory.current()))
    """
)


def _library_user(policy_env: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != host_memory.ENV_POLICY}
    env["JAX_PLATFORMS"] = "cpu"
    if policy_env is not None:
        env[host_memory.ENV_POLICY] = policy_env
    return subprocess.run(
        [sys.executable, "-c", LIBRARY_USER],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "policy_env,policy,reason",
    [
        (None, "retain", "asked: auto"),  # the README's path gets the fast one
        ("system", "system", "asked: system"),  # the way out
        ("manual", "system", "not asked"),  # the program calls apply itself
    ],
)
def test_importing_jaxcnn_sets_the_policy_a_library_user_did_not_ask_for(
    policy_env, policy, reason
):
    run = _library_user(policy_env)
    assert run.returncode == 0, run.stderr
    state = json.loads(run.stdout.strip().splitlines()[-1])
    assert state["policy"] == policy
    assert reason in state["reason"]


@pytest.mark.slow
def test_a_bad_policy_in_the_environment_names_the_variable_and_the_choices():
    run = _library_user("huge")
    assert run.returncode != 0
    # a UsageError, what a library user catches (JaxcnnError) for a mistake they can fix
    assert (
        "jaxcnn.errors.UsageError: $JAXCNN_HOST_MEMORY='huge' is not a host memory policy: "
        "choose one of auto" in run.stderr
    )
