"""`import jaxcnn` changes nothing of the process that imports it: not its environment
(which every child process inherits), not JAX's configuration (`jax_platforms` least of
all), not the C allocator (glibc's `mallopt`, irreversible). What jaxcnn does to the
process it does when asked (`jaxcnn.configure_host`, `targets.prepare_libtpu`,
`targets.cpu_backend_only`), and the positive control checks that those calls do make
the changes the same probe sees."""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from jaxcnn import host_memory, targets

ROOT = Path(__file__).resolve().parents[1]

# Runs in a fresh process: snapshots after `import jax` (JAX's own settings are JAX's),
# then after `import jaxcnn` and, with argument "configure", after the explicit calls;
# prints what changed. ctypes.CDLL is wrapped first, so every mallopt through any CDLL
# handle opened from then on is seen.
PROBE = """
import ctypes, json, os, sys

mallopt_calls = []


class Spy(ctypes.CDLL):
    def __getattribute__(self, name):
        if name == "mallopt":
            real = ctypes.CDLL.__getattr__(self, name)
            return lambda *args: (mallopt_calls.append(list(args)), real(*args))[1]
        return super().__getattribute__(name)


ctypes.CDLL = Spy
import jax

def snapshot():
    return dict(os.environ), {k: repr(v) for k, v in jax.config.values.items()}

env, config = snapshot()
import jaxcnn
if sys.argv[1] == "configure":
    jaxcnn.configure_host()
    jaxcnn.targets.prepare_libtpu()
    jaxcnn.targets.cpu_backend_only()
env_after, config_after = snapshot()
print(json.dumps({
    "environ": {k: v for k, v in env_after.items() if env.get(k) != v},
    "environ_removed": sorted(set(env) - set(env_after)),
    "config": {k: v for k, v in config_after.items() if config.get(k) != v},
    "mallopt": mallopt_calls,
}))
"""


def _probe(mode: str) -> dict:
    # As a user's shell has it: no platform chosen, many CPU devices asked for (the one
    # case where jaxcnn sizes XLA's thread pools), no NPROC or libtpu settings of its own.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("JAX_PLATFORMS", "NPROC")
        and not k.startswith("TPU_")
        and k != "ALLOW_MULTIPLE_LIBTPU_LOAD"
    }
    env["JAX_NUM_CPU_DEVICES"] = "8"
    run = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_importing_jaxcnn_changes_no_environment_config_or_allocator():
    changed = _probe("import")
    assert changed == {"environ": {}, "environ_removed": [], "config": {}, "mallopt": []}


@pytest.mark.slow
def test_the_explicit_calls_make_the_changes_the_probe_sees():  # the control of the above
    changed = _probe("configure")
    assert changed["environ_removed"] == []
    assert changed["environ"]["NPROC"] == str(max(os.cpu_count() or 1, 16))
    no_accelerator = not targets._accelerators_here()
    # TPU_SKIP_MDS_QUERY is not among them: `import jax` sets it already.
    libtpu = {"ALLOW_MULTIPLE_LIBTPU_LOAD", "TPU_WORKER_HOSTNAMES", "TPU_HOST_BOUNDS"}
    assert (libtpu <= set(changed["environ"])) is no_accelerator
    compilers = targets._installed("libtpu") or targets._installed("jax_plugins.xla_cuda12")
    assert ("jax_platforms" in changed["config"]) is (no_accelerator and compilers)
    # The step loop's policy on a CPU with glibc: retain, by three mallopt calls.
    glibc = sys.platform == "linux" and platform.libc_ver()[0] == "glibc"
    retain = [
        [host_memory._MALLOPT_PARAM[name], value] for name, value in host_memory.RETAIN.items()
    ]
    assert changed["mallopt"] == (retain if no_accelerator and glibc else [])


# Reads the library's registries (models, chips, targets, datasets, choices, host memory
# policies) after `import jaxcnn`, then touches what argv[1] names; prints which of Flax
# and JAX were imported before and after that touch.
LAZY = """
import json, sys
import jaxcnn
import jaxcnn.perf.chips

read = (
    jaxcnn.models.names(),
    jaxcnn.models.input_shape("mlp"),
    jaxcnn.models.spec("catsdogs_cnn").num_outputs,
    jaxcnn.perf.chips.find("Tesla T4").bandwidth,
    sorted(jaxcnn.perf.chips.TARGETS),
    jaxcnn.data.DATASETS,
    jaxcnn.choices.FORMULATIONS,
    jaxcnn.host_memory.POLICIES,
)
loaded = lambda: sorted(m for m in ("flax", "jax") if m in sys.modules)
before = loaded()
if sys.argv[1] == "fit":
    jaxcnn.fit
elif sys.argv[1] == "model":
    jaxcnn.models.get("mlp")
print(json.dumps({"before": before, "after": loaded(), "models": len(read[0])}))
"""


def _lazy(touch: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-c", LAZY, touch],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_registries_are_read_without_flax_or_jax():
    from jaxcnn import models

    found = _lazy("nothing")
    assert found == {"before": [], "after": [], "models": len(models.names())}


@pytest.mark.parametrize("touch", ["fit", "model"])
def test_a_name_that_needs_them_loads_flax_and_jax(touch):  # the control of the above
    from jaxcnn import models

    found = _lazy(touch)
    assert found == {"before": [], "after": ["flax", "jax"], "models": len(models.names())}
