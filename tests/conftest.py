"""Strict, fast, offline tests on fake CPU devices.

Eight CPU devices are created before JAX starts, so placements over many devices run
here; `single` uses the first. Nothing reads ../shared or the network.
"""

import os

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["JAX_NUM_CPU_DEVICES"] = "8"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# numpy's OpenBLAS on one thread: on two cores its second thread spins beside the other
# xdist worker (the fit: 111 CPU-seconds for 64 s of wall, 64 for the same wall on one)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# isort: off
import xla_cache  # noqa: F401 (the suite's compilation cache, set before JAX starts)
# isort: on

import contextlib
import errno
import gzip
import importlib.util
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import jax
import numpy as np
import pytest

from jaxcnn import devices

# XLA:CPU's thread pools sized for collectives over 8 devices, before JAX starts (else a
# pmap step can deadlock on 2 cores); the test process keeps glibc's allocator.
devices.reserve_collective_threads()

jax.config.update("jax_numpy_rank_promotion", "raise")
# Start the backends now: main() run in-process then finds JAX started and leaves the
# test process's allocator as it is (jaxcnn/host_memory.py), whatever test runs first.
jax.devices()


T = TypeVar("T")

# What each optional extra brings, as the modules a test needs from it.
EXTRA_MODULES = {
    "targets": ("libtpu", "jax_plugins.xla_cuda12"),
    "notebook": ("nbclient", "nbformat", "ipykernel"),
}


def missing_extra(extra: str) -> str | None:
    """Why the `extra` (a pyproject.toml optional dependency) cannot serve a test here,
    as the line that fixes it; None where it can."""
    install = f'pip install -e ".[{extra}]"'
    if extra == "onednn":
        from jaxcnn import onednn

        if onednn.available():
            return None
        return f"needs oneDNN and a g++: {install} (and a g++ on PATH)"
    missing = [m for m in EXTRA_MODULES[extra] if not _importable(m)]
    return f"needs the [{extra}] extra ({', '.join(missing)}): {install}" if missing else None


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a parent package missing
        return False


def needs_extra(extra: str) -> Callable[[T], T]:
    """Mark a test `extra` (CI's second step runs `-m extra` once the extras are
    installed) and skip it where `extra` is not installed, with the install line as
    the reason (`pytest -ra` lists them)."""
    reason = missing_extra(extra)
    skip = pytest.mark.skipif(reason is not None, reason=reason or "")
    return lambda test: pytest.mark.extra(extra)(skip(test))


def write_idx(path: Path, array: np.ndarray, magic: int | None = None, count: int | None = None):
    """An IDX file as in the MNIST distribution; magic/count override the true ones."""
    array = np.asarray(array, np.uint8)
    if magic is None:
        magic = 2051 if array.ndim == 3 else 2049
    dims = list(array.shape)
    if count is not None:
        dims[0] = count
    header = magic.to_bytes(4, "big") + b"".join(d.to_bytes(4, "big") for d in dims)
    payload = header + array.tobytes()
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(payload))
    else:
        path.write_bytes(payload)
    return path


@pytest.fixture
def idx_dir(tmp_path: Path) -> Path:
    """A small MNIST-format directory: 64 train and 32 test 28x28 images."""
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 64), ("t10k", 32)):
        write_idx(tmp_path / f"{prefix}-images-idx3-ubyte.gz", rng.integers(0, 256, (n, 28, 28)))
        write_idx(tmp_path / f"{prefix}-labels-idx1-ubyte.gz", rng.integers(0, 10, n))
    return tmp_path


class Analysed:
    """Stands in for a jax Compiled whose cost_analysis returns `analysis` (or raises it)."""

    def __init__(self, analysis):
        self.analysis = analysis

    def cost_analysis(self):
        if isinstance(self.analysis, Exception):
            raise self.analysis
        return self.analysis


def complete_record(record: dict) -> dict:
    """A hand-made test record with every field schema 2 requires that the test leaves
    out: the workload's at experiments.records.workload.Workload's defaults (kind train), where
    and how it ran as on a laptop's CPU, versions unknown. Fields the test set are kept."""
    from experiments import records
    from experiments.records.workload import Workload

    for section in ("workload", "device", "env"):  # shared dicts stay as they are
        record[section] = dict(record[section])
    workload = record["workload"]
    kind = workload.setdefault("kind", "train")
    workload.setdefault("study", None)
    record.setdefault("message", None)
    record["device"].setdefault("host", "laptop")
    env = record["env"]
    for key in ("python", "git_commit", "host", "utc_time"):
        env.setdefault(key, None)
    if kind in records.WORKLOAD_KINDS:
        for key, value in Workload().describe().items():
            workload.setdefault(key, value)
        record.setdefault("loop", workload["loop"])
        record.setdefault("formulation", {"name": "xla", "conv": "xla", "pool": "xla"})
        record.setdefault("compiler_options", {})
        record["device"].setdefault("machine", None)
        for key in ("jax", "jaxlib", "flax", "optax", "host_memory"):
            env.setdefault(key, None)
    if kind != "paired":
        record.setdefault("config_key", records.config_key(workload, record["device"]))
    return record


def typed(record: dict):
    """`record` completed (complete_record) and keyed for what it holds now, as the one
    reader (experiments.records.load) hands it on: its kind's model."""
    from experiments import records

    if not isinstance(record, dict):  # already the reader's
        return record
    return records.typed(rekeyed(complete_record(record)))


def rekeyed(record: dict) -> dict:
    """`record` with the config_key of its (changed) workload, device and conditions."""
    from experiments import records

    key = records.config_key(record["workload"], record["device"], record.get("conditions"))
    return {**record, "config_key": key}


def report_text(report_path):
    """REPORT.md and every details page beside it (report/*.md), as one text: what a
    reader finds one click from the answers."""
    pages = sorted((report_path.parent / "report").glob("*.md"))
    return "\n\n".join([report_path.read_text(), *(p.read_text() for p in pages)])


def fill_disk(folder: Path) -> None:
    """Write into `folder` until its disk is full (ENOSPC)."""
    with open(folder / "filler", "ab", buffering=0) as handle:
        try:
            while True:
                handle.write(b"x" * 1024)
        except OSError as e:
            assert e.errno == errno.ENOSPC
    with open(folder / "filler-tail", "ab", buffering=0) as handle:
        try:
            while True:
                handle.write(b"x")
        except OSError as e:
            assert e.errno == errno.ENOSPC


@pytest.fixture
def small_disk(tmp_path):
    """A 64 KiB tmpfs: a disk that really fills. Needs root (mount)."""
    folder = tmp_path / "small-disk"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()[:100]}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`path` made immutable (chattr +i: refused even to root) while the block runs; the
    test is skipped where that is not possible (not root, a filesystem without it)."""
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here (not root, or the filesystem lacks it)")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)
