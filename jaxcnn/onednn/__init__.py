"""A 2-D convolution on XLA:CPU computed by oneDNN, called through XLA's FFI: the
`onednn` formulation's convolution (jaxcnn/formulation.py).

    from jaxcnn import onednn
    y = onednn.conv(x, kernel, strides=(1, 1), padding="SAME")   # NHWC x, HWIO kernel

Forward, input gradient and weight gradient are three oneDNN primitives (conv.cc), each
an FFI target; `conv` is a `jax.custom_vjp` whose backward calls the two gradient
kernels. f32 only, no dilation, no groups. `conv_general_dilated` has lax's signature
(what flax.linen.Conv passes) and sends anything else to lax unchanged.

The shared library is compiled on first use (g++, a few seconds) into
~/.cache/jaxcnn/onednn-<hash>/ against oneDNN from `pip install onednn-devel-cpu-gomp`
(oneDNN 3.2 built with OpenMP: headers in <venv>/include, libdnnl.so in <venv>/lib;
about 39 MB to download) or from the folder in $DNNLROOT. The newer `onednn-devel`
wheels depend on Intel's SYCL and OpenCL runtimes, which a CPU convolution has no use
for. JAXCNN_ONEDNN_LAYOUT (read when the library loads) or `set_layout` picks the
memory layouts: `plain` runs oneDNN on nhwc/hwio directly (on an AVX-512 Zen 4: brgconv
forward, im2col + GEMM for both gradients), `any` lets it choose blocked layouts for
everything (its direct convolution kernels) and reorders on every call, `mixed` keeps
the activations nhwc and lets it choose the weights' layout (the default, and what
TensorFlow asks oneDNN for: brgemm and direct kernels on nhwc, only the weights
reordered; on this project's AVX-512 machine the fastest of the three for every
primitive of mnist_cnn, see the performance log), `auto` times the three the first time
a shape is seen and keeps the fastest (its choice rests on timings, so two processes
may compute a step with different kernels: not the default).

Threads: oneDNN runs its own OpenMP team beside XLA's thread pool, so OMP_NUM_THREADS
(read when the library loads) sets its threads and nothing else. None is forced: on a
quiet 2-core machine OpenMP's default (one per core) was the faster for `mnist_cnn`;
with another process busy on one core, one thread was (scratch A/B runs: the
performance log's "oneDNN's convolutions through XLA's FFI").
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from jaxcnn.conv_shapes import plain_2d_conv
from jaxcnn.errors import UsageError

_SOURCE = Path(__file__).with_name("conv.cc")
_INSTALL = "pip install onednn-devel-cpu-gomp"
# The FFI targets' names: TARGET_PREFIX + fwd | bwd_data | bwd_weights (jaxcnn.flops
# counts the calls by it).
TARGET_PREFIX = "jaxcnn_onednn_conv_"
_TARGETS = {
    "fwd": "JaxcnnOnednnConvFwd",
    "bwd_data": "JaxcnnOnednnConvBwdData",
    "bwd_weights": "JaxcnnOnednnConvBwdWeights",
}


# Where a system package (apt's libdnnl-dev) puts oneDNN, looked in after the venv.
_SYSTEM_PREFIXES = ("/usr/local", "/usr")


def _onednn_prefix() -> Path:
    """The folder with include/oneapi/dnnl/dnnl.hpp and lib/libdnnl.so."""
    candidates = [os.environ.get("DNNLROOT"), sys.prefix, sys.base_prefix, *_SYSTEM_PREFIXES]
    candidates = list(dict.fromkeys(filter(None, candidates)))
    for prefix in candidates:
        root = Path(prefix)
        header = root / "include" / "oneapi" / "dnnl" / "dnnl.hpp"
        libs = [root / "lib" / "libdnnl.so", root / "lib" / "x86_64-linux-gnu" / "libdnnl.so"]
        if header.exists() and any(lib.exists() for lib in libs):
            return root
    raise UsageError(
        f"oneDNN headers/library not found (looked in {', '.join(candidates)}; "
        f"$DNNLROOT may name another folder): run `{sys.executable} -m {_INSTALL}`"
    )


def available() -> bool:
    """Whether the kernels can be built here (oneDNN found, a C++ compiler on PATH),
    without building them."""
    try:
        _onednn_prefix()
    except UsageError:
        return False
    return shutil.which(os.environ.get("CXX", "g++")) is not None


def _library_dir(prefix: Path) -> Path:
    plain = prefix / "lib"
    return plain if (plain / "libdnnl.so").exists() else prefix / "lib" / "x86_64-linux-gnu"


def _build() -> Path:
    prefix = _onednn_prefix()
    libdir = _library_dir(prefix)
    compiler = os.environ.get("CXX", "g++")
    if shutil.which(compiler) is None:
        raise UsageError(
            f"no C++ compiler {compiler!r} to build the oneDNN convolution: install g++"
        )
    source = _SOURCE.read_bytes()
    digest = hashlib.sha256(
        source + str(prefix).encode() + jax.ffi.include_dir().encode() + jax.__version__.encode()
    ).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "jaxcnn"
    target = cache / f"onednn-{digest}" / "libjaxcnn_onednn.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".so", delete=False) as tmp:
        partial = Path(tmp.name)
    command = [
        compiler,
        "-O2",
        "-std=c++17",
        "-shared",
        "-fPIC",
        f"-I{jax.ffi.include_dir()}",
        f"-I{prefix / 'include'}",
        str(_SOURCE),
        "-o",
        str(partial),
        f"-L{libdir}",
        "-ldnnl",
        f"-Wl,-rpath,{libdir}",
    ]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise UsageError(
            f"building the oneDNN convolution failed ({' '.join(command)}):\n{done.stderr[-4000:]}"
        )
    partial.replace(target)  # atomic: a concurrent build just overwrites the same file
    return target


@functools.cache
def _library() -> ctypes.CDLL:
    """Build (once per source), load, and register the three FFI targets."""
    lib = ctypes.CDLL(str(_build()))
    for name, symbol in _TARGETS.items():
        jax.ffi.register_ffi_target(
            TARGET_PREFIX + name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu"
        )
    lib.JaxcnnOnednnDescribe.restype = ctypes.c_char_p
    lib.JaxcnnOnednnSetLayout.argtypes = [ctypes.c_int]
    layout = os.environ.get("JAXCNN_ONEDNN_LAYOUT", "mixed")
    lib.JaxcnnOnednnSetLayout(_layout_code(layout, f"JAXCNN_ONEDNN_LAYOUT={layout!r}"))
    return lib


LAYOUTS = {"plain": 0, "any": 1, "auto": 2, "mixed": 3}  # conv.cc's `Layout`


def _layout_code(name: str, given: str) -> int:
    if name not in LAYOUTS:
        raise UsageError(f"{given} is not a oneDNN layout: choose from {', '.join(LAYOUTS)}")
    return LAYOUTS[name]


def set_layout(name: str) -> None:
    """The layout mode for primitives built from now on (each mode caches its own)."""
    code = _layout_code(name, repr(name))
    _library().JaxcnnOnednnSetLayout(code)


def ensure() -> None:
    """Build and load the kernels now, so that a missing oneDNN or compiler is a
    UsageError naming the fix before any work, not a failure inside a trace."""
    _library()


def describe() -> str:
    """The primitives built so far, with the implementation oneDNN chose for each."""
    return _library().JaxcnnOnednnDescribe().decode()


def resolve_padding(
    input_hw: Sequence[int],
    kernel_hw: Sequence[int],
    strides: Sequence[int],
    padding: str | Sequence[tuple[int, int]],
) -> tuple[tuple[int, int], tuple[int, int]]:
    """`SAME` / `VALID` / explicit pairs -> ((top, bottom), (left, right)), as lax does."""
    if isinstance(padding, str):
        padding = lax.padtype_to_pads(tuple(input_hw), tuple(kernel_hw), tuple(strides), padding)
    (top, bottom), (left, right) = padding
    return (int(top), int(bottom)), (int(left), int(right))


def _attributes(strides, padding) -> dict[str, np.int64]:
    (top, bottom), (left, right) = padding
    values = {"sh": strides[0], "sw": strides[1], "pt": top, "pb": bottom, "pl": left, "pr": right}
    return {key: np.int64(value) for key, value in values.items()}


def _call(kind: str, out_shape: tuple[int, ...], a, b, strides, padding) -> jax.Array:
    _library()
    # Under vmap (an ensemble of models) the kernels run once per member: they take one
    # batch of images and one kernel, not a stack of them.
    return jax.ffi.ffi_call(
        TARGET_PREFIX + kind,
        jax.ShapeDtypeStruct(out_shape, jnp.float32),
        vmap_method="sequential",
    )(a, b, **_attributes(strides, padding))


def _output_hw(x_shape, k_shape, strides, padding) -> tuple[int, int]:
    (top, bottom), (left, right) = padding
    out_h = (x_shape[1] + top + bottom - k_shape[0]) // strides[0] + 1
    out_w = (x_shape[2] + left + right - k_shape[1]) // strides[1] + 1
    return out_h, out_w


@functools.partial(jax.custom_vjp, nondiff_argnums=(2, 3))
def _conv(x: jax.Array, kernel: jax.Array, strides, padding) -> jax.Array:
    out_h, out_w = _output_hw(x.shape, kernel.shape, strides, padding)
    return _call("fwd", (x.shape[0], out_h, out_w, kernel.shape[3]), x, kernel, strides, padding)


def _conv_fwd(x, kernel, strides, padding):
    return _conv(x, kernel, strides, padding), (x, kernel)


def _conv_bwd(strides, padding, residuals, g):
    x, kernel = residuals
    g = g.astype(jnp.float32)
    dx = _call("bwd_data", x.shape, g, kernel, strides, padding)
    dw = _call("bwd_weights", kernel.shape, x, g, strides, padding)
    return dx, dw


_conv.defvjp(_conv_fwd, _conv_bwd)


def conv(
    x: jax.Array,
    kernel: jax.Array,
    strides: Sequence[int] = (1, 1),
    padding: str | Sequence[tuple[int, int]] = "VALID",
) -> jax.Array:
    """2-D convolution of NHWC `x` with an HWIO `kernel` (f32), by oneDNN."""
    if x.ndim != 4 or kernel.ndim != 4 or x.shape[3] != kernel.shape[2]:
        raise UsageError(f"need NHWC x and HWIO kernel, got {x.shape} and {kernel.shape}")
    if x.dtype != jnp.float32 or kernel.dtype != jnp.float32:
        raise UsageError(f"the oneDNN convolution is f32 only, got {x.dtype} and {kernel.dtype}")
    strides = tuple(int(s) for s in strides)
    pads = resolve_padding(x.shape[1:3], kernel.shape[:2], strides, padding)
    return _conv(x, kernel, strides, pads)


def conv_general_dilated(
    lhs,
    rhs,
    window_strides,
    padding,
    lhs_dilation=None,
    rhs_dilation=None,
    dimension_numbers=None,
    feature_group_count=1,
    batch_group_count=1,
    precision=None,
    preferred_element_type=None,
):
    """`lax.conv_general_dilated` (same signature, what flax.linen.Conv calls): oneDNN for
    f32 2-D NHWC/HWIO convolutions without dilation or groups, lax for anything else."""
    simple = (
        lhs.dtype == jnp.float32
        and rhs.dtype == jnp.float32
        and preferred_element_type in (None, jnp.float32)
        and plain_2d_conv(
            lhs, rhs, lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
            batch_group_count,
        )
    )  # fmt: skip
    if not simple:
        return lax.conv_general_dilated(
            lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
            dimension_numbers, feature_group_count, batch_group_count, precision,
            preferred_element_type,
        )  # fmt: skip
    return conv(lhs, rhs, window_strides, padding)
