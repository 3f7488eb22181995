"""One XLA compilation cache for the whole test run, its xdist workers and the runs they
start, set up on import (conftest imports it before JAX starts).

The suite compiles the same few steps hundreds of times, each subprocess run again (with
the cache the whole suite took 603 s against 899 s on two cores). A cache hit is the very
executable a compile would give; a record made with the cache on says so
(env.compilation_cache) and gives no compile-time figure. The process that makes the
folder (pytest, or xdist's controller, whose workers inherit it) removes it at exit.
"""

import atexit
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

if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _folder = tempfile.mkdtemp(prefix="jaxcnn-tests-xla-cache-")
    atexit.register(shutil.rmtree, _folder, ignore_errors=True)
    os.environ.update(zip(XLA_CACHE_VARS, (_folder, "0", "0"), strict=True))
