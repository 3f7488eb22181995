"""One XLA compilation cache for the whole test run, its xdist workers and the runs they
start, set up on import (conftest imports it before JAX starts).

The suite compiles the same few steps hundreds of times, each subprocess run again (with
the cache the whole suite took 603 s against 899 s on two cores). A cache hit is the very
executable a compile would give; a record made with the cache on says so
(env.compilation_cache) and gives no compile-time figure. The process that makes the
folder (pytest, or xdist's controller, whose workers inherit it) removes it at exit.
"""

import atexit
import importlib.metadata
import os
import shutil
import tempfile

# JAX's settings of its persistent cache: the folder, and every compile kept whatever its
# time or size.
XLA_CACHE_VARS = (
    "JAX_COMPILATION_CACHE_DIR",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
)

# jaxlib before 0.10 reads a CPU executable back with false "machine type" errors on
# stderr and can hang deserializing one (seen on 0.9.2, the oldest CI runs): the suite
# compiles afresh there.
_JAXLIB = tuple(int(part) for part in importlib.metadata.version("jaxlib").split(".")[:2])

if "JAX_COMPILATION_CACHE_DIR" not in os.environ and _JAXLIB >= (0, 10):
    _folder = tempfile.mkdtemp(prefix="jaxcnn-tests-xla-cache-")
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)
    os.environ.update(zip(XLA_CACHE_VARS, (_folder, "0", "0"), strict=True))

# Whether this run's JAX starts with a persistent compilation cache.
ON = bool(os.environ.get("JAX_COMPILATION_CACHE_DIR"))
