"""The host allocator policy: which one each device asks for, that it only takes effect
before JAX starts, and that it does what it is for: an execution with a large temporary
buffer stops faulting fresh pages in each time it runs."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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


# An environment with the `[targets]` extra's kind of packages and no accelerator: libtpu
# and a CUDA PJRT plugin importable (fakes that register no backend), the machine's
# device files and PCI devices under `root`.
def fake_compilers(site: Path) -> Path:
    """`site`, a folder that makes libtpu and a CUDA plugin installed when on the path."""
    (site / "libtpu").mkdir(parents=True)
    (site / "libtpu" / "__init__.py").write_text("")
    (site / "fake_cuda_plugin.py").write_text("def initialize():\n    pass\n")
    dist = site / "fake_cuda_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-cuda-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[jax_plugins]\nxla_cuda12_fake = fake_cuda_plugin\n")
    return site


@pytest.fixture
def compilers_installed(tmp_path, monkeypatch) -> Path:
    """Compilers installed, JAX_PLATFORMS unset; returns the machine's root, bare."""
    monkeypatch.syspath_prepend(str(fake_compilers(tmp_path / "site")))
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setattr(host_memory, "SYSTEM_ROOT", root)
    return root


def test_compilers_installed_without_their_hardware_leave_the_steps_on_the_cpu(
    compilers_installed,
):
    assert {"libtpu": "tpu", "xla_cuda12_fake": "nvidia"}.items() <= (
        host_memory.installed_backends().items()
    )
    assert host_memory.expected_platform("auto") == "cpu"
    assert host_memory.resolve("auto", "auto") == "retain"


def _pci_device(root: Path, address: str, vendor: str, device: str) -> None:
    folder = root / "sys/bus/pci/devices" / address
    folder.mkdir(parents=True)
    (folder / "vendor").write_text(vendor + "\n")
    (folder / "device").write_text(device + "\n")


@pytest.mark.parametrize(
    "hardware,platform",
    [
        ({"dev/nvidia0": None}, "xla_cuda12_fake"),  # an NVIDIA driver: the plugin starts
        ({"pci": ("0x1ae0", "0x0063")}, "libtpu"),  # a TPU v5e chip
        ({"pci": ("0x1ae0", "0x0042")}, "cpu"),  # Google's network card, on every cloud VM
        ({"pci": ("0x8086", "0x1237")}, "cpu"),
    ],
)
def test_an_installed_backend_takes_the_steps_only_where_its_hardware_is(
    compilers_installed, hardware, platform
):
    root = compilers_installed
    for name, ids in hardware.items():
        if name == "pci":
            _pci_device(root, "0000:00:04.0", *ids)
        else:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("")
    assert host_memory.expected_platform("auto") == platform
    assert host_memory.resolve("auto", "auto") == ("retain" if platform == "cpu" else "system")


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
        "asked": "retain",
    }
    pages = BUFFER_BYTES // 4096
    # glibc: every execution faults the whole buffer in again, page by page
    assert all(f >= pages for f in system["faults"]), system["faults"]
    # retain: the first execution grows the heap; the rest reuse it
    assert retain["faults"][0] > pages // 2, retain["faults"]
    assert all(f < pages // 100 for f in retain["faults"][1:]), retain["faults"]


# A library user's script: jaxcnn.configure_host(POLICY) where an argument names one.
LIBRARY_USER = textwrap.dedent(
    """
    import json, sys
    import jaxcnn
    from jaxcnn import host_memory, models
    if sys.argv[1:]:
        jaxcnn.configure_host(sys.argv[1])
    jaxcnn.create_train_state(
        models.get("mlp", width=8), jaxcnn.make_optimizer("adam"), models.input_shape("mlp")
    )
    print(json.dumps(host_memory.current()))
    """
)


def _library_user(*policy: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-c", LIBRARY_USER, *policy],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "asked,policy,reason",
    [
        ((), "system", "not asked"),  # importing jaxcnn sets nothing
        (("auto",), "retain", "asked: auto"),  # asked for: the step loop's fast path
        (("system",), "system", "asked: system"),
    ],
)
def test_a_library_user_gets_the_host_policy_it_asks_for_and_none_it_did_not(asked, policy, reason):
    run = _library_user(*asked)
    assert run.returncode == 0, run.stderr
    state = json.loads(run.stdout.strip().splitlines()[-1])
    assert state["policy"] == policy
    assert reason in state["reason"]


def test_a_bad_policy_names_the_choices_before_anything_changes(monkeypatch):
    import jaxcnn
    from jaxcnn import devices
    from jaxcnn.errors import UsageError

    monkeypatch.delenv("NPROC", raising=False)
    before = host_memory.current()
    with pytest.raises(UsageError, match="unknown host memory policy 'huge': choose one of auto"):
        jaxcnn.configure_host("huge")
    assert "NPROC" not in os.environ and host_memory.current() == before
    assert devices.reserve_collective_threads({"JAX_NUM_CPU_DEVICES": "8"})  # would have set it


@pytest.mark.parametrize(
    "given,said",
    [
        ({"policy": 3}, "host memory policy must be a name (a str), got 3: choose one of auto"),
        ({"device": "quantum"}, "unknown device 'quantum': choose one of auto, cpu, gpu, tpu"),
        ({"loops": "step"}, "loops must be a list or tuple of names, e.g. ('step',), got 'step'"),
        ({"loops": ["async"]}, "unknown loop 'async': choose one of step, device"),
    ],
)
def test_configure_host_refuses_what_it_cannot_take_before_anything_changes(
    monkeypatch, given, said
):
    import jaxcnn
    from jaxcnn.errors import UsageError

    monkeypatch.delenv("NPROC", raising=False)
    before = host_memory.current()
    with pytest.raises(UsageError) as refused:
        jaxcnn.configure_host(**given)
    assert said in str(refused.value)
    assert "NPROC" not in os.environ and host_memory.current() == before
    # The positive control, the same arguments made good, is each call of the script below.


# Calls jaxcnn.configure_host once per argument in a fresh process (`start`: starts JAX's
# backends instead); prints what each returned or raised, what it warned, and NPROC.
CONFIGURE = textwrap.dedent(
    """
    import json, os, sys, warnings
    import jaxcnn
    said = []
    for call in sys.argv[1:]:
        if call == "start":
            import jax
            jax.devices()
            continue
        with warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            try:
                said.append({"result": jaxcnn.configure_host(call)})
            except jaxcnn.UsageError as error:
                said.append({"error": str(error)})
        said[-1].update(warned=[str(w.message) for w in warned], nproc=os.environ.get("NPROC"))
    print(json.dumps(said))
    """
)


def _configured(*calls: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "NPROC"}
    env.update(JAX_PLATFORMS="cpu", JAX_NUM_CPU_DEVICES="8")
    run = subprocess.run(
        [sys.executable, "-c", CONFIGURE, *calls],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


THREADS = str(max(os.cpu_count() or 1, 16))  # twice the 8 CPU devices, or the cores
TOO_LATE = (
    "JAX had already started its backends: the host allocator and XLA:CPU's thread pools "
    "are left as they were; call jaxcnn.configure_host() before the first JAX computation"
)


@pytest.mark.slow
def test_configure_host_again_with_the_policy_in_effect_returns_what_is_in_effect():
    first, again, by_name = _configured("auto", "auto", "retain")  # auto is retain here
    assert first["result"]["host_memory"]["policy"] == "retain"  # the control: it took
    assert first["result"]["host_memory"]["applied"] is True
    assert first["result"]["cpu_threads"] == int(THREADS) and first["nproc"] == THREADS
    assert first["result"]["too_late"] is None and first["warned"] == []
    assert again == first and by_name == first


@pytest.mark.slow
@pytest.mark.parametrize("first,then", [("retain", "system"), ("system", "retain")])
def test_configure_host_again_with_another_policy_says_the_first_is_in_effect(first, then):
    took, refused = _configured(first, then)
    assert took["result"]["host_memory"]["policy"] == first  # the control: the first took
    assert refused["error"] == (
        f"configure_host set this process's host memory policy to {first!r} already, which "
        f"is in effect and irreversible: it cannot be {then!r} too; call configure_host "
        "once per process, with the policy you want"
    )
    assert _configured(then)[0]["result"]["host_memory"]["policy"] == then  # alone, it takes


@pytest.mark.slow
def test_configure_host_after_jax_started_sets_no_thread_count_and_says_it_is_too_late():
    late, other = _configured("start", "auto", "system")
    assert late["result"]["too_late"] == TOO_LATE and late["warned"] == [TOO_LATE]
    assert late["result"]["cpu_threads"] is None and late["nproc"] is None
    assert late["result"]["host_memory"]["policy"] == "system"  # retain did not take
    assert late["result"]["host_memory"]["applied"] is False
    # Nothing took effect, so another policy is no conflict: it is too late as well.
    assert other["result"]["too_late"] == TOO_LATE and other["warned"] == [TOO_LATE]
    # The control: before JAX starts, the same call sets both (the test above's `first`).
    (early,) = _configured("auto")
    assert early["result"]["too_late"] is None and early["nproc"] == THREADS


SMALL_RUN = ["--model", "mlp", "--set", "width=8", "--epochs", "0", "--batch-size", "16"]
SMALL_RUN += ["--set", "timing_steps=2", "--set", "progress=false", "--set", "checkpoints=false"]


@pytest.mark.slow
def test_the_command_takes_the_fast_path_on_a_cpu_with_compilers_installed(tmp_path):
    # As a user's shell has it after `pip install -e ".[targets]"` on a machine with no
    # TPU or GPU: no JAX_PLATFORMS, no policy asked for, libtpu and a plugin importable.
    repo = Path(__file__).parent.parent
    site = fake_compilers(tmp_path / "site")
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(repo)])
    run = subprocess.run(
        [sys.executable, "-m", "experiments.run", "--out", str(tmp_path / "out"), *SMALL_RUN],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=repo,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "records.jsonl").open()]
    if record["device"]["platform"] != "cpu":
        pytest.skip("this machine has an accelerator, and the step rightly ran on it")
    assert record["env"]["host_memory"]["policy"] == "retain"
    assert record["env"]["host_memory"]["reason"] == "asked: auto; steps on cpu"
    assert "host memory: retain (asked: auto; steps on cpu)" in run.stderr
