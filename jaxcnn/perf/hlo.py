"""The kernels a compiled program launches, read from its optimized HLO: the one reader of
a compiled program's work (jaxcnn.perf.price prices what it reads).

    ks = kernels(compiled.as_text())       # what the compiler says will run, in order
    totals(ks)["flops"]                    # the program's work, counted as below

Pure functions over the text of `compiled.as_text()`: no JAX, no device, so stored
programs can be read again. A kernel is an instruction of the ENTRY computation that
runs as one unit of work on the device:

- fusions (XLA:GPU's kLoop/kInput/kCustom, TPU's output and convolution fusions,
  XLA:CPU's loop and library fusions), unfused `dot`/`convolution`, library calls
  (`custom-call`: cuBLAS GEMMs, cuDNN convolutions, jaxcnn's oneDNN FFI convolutions),
  `copy`/`transpose`, collectives (an async `-start`/`-done` pair is one), and any other
  instruction that computes something (an unfused `concatenate` on CPU, a scalar op on
  TPU's scalar unit);
- `while` loops: the body's kernels, each counted its trip count times (backend_config's
  `known_trip_count`, else read from the loop's condition, init and step; unknown: once,
  with a note), the condition's kernels one time more; `call` (XLA:GPU's command
  buffers too) and `async-start`: the kernels of the called computation, except a call
  XLA:CPU marks `xla_cpu_small_call` (a small computation, often a whole `while` loop such
  as threefry's rounds, compiled as one function: one kernel, a `fusion`, as its trace
  shows); `conditional`: its costliest branch;
- not kernels: parameters, constants, tuples, get-tuple-element, bitcasts, the `-done`
  of an async pair, buffer allocations, and `copy-start`/`copy-done` (TPU's prefetches
  between HBM and on-chip memory: they run beside the kernels, and the bytes they move
  are counted where a kernel reads the copied value).

Per kernel, per execution:

- kind: `elemental_conv` is a convolution XLA:CPU writes element by element (its
  elemental emitter's loop nest) because it is not in the one form its library path
  takes (Eigen's, and YNNPACK's fusions): input batch-first and feature-last, kernel
  spatial-input-output, output like the input, row-major layouts, f16 or f32, no
  reversed window (XLA's `PotentiallyImplementedAsEigenConvolution` and
  `CanUseEigenConvolution`). It runs far below the library's rate, so it is priced
  apart; only `kernels(text, platform="cpu")` tells them apart, since a TPU runs any
  such convolution on its matrix units.
- flops: 2 x multiply-accumulates of its dots and convolutions (inside a fusion too):
  2*M*N*K for a dot; for a convolution, 2 x its multiply-adds on real input: the taps
  that fall on padding or on an lhs dilation's holes are not counted (jaxcnn.flops'
  in-bounds count; what cuDNN and the TPU's convolution units do). Elementwise ops,
  reductions and pooling are not counted. A custom call whose target is none of the
  above gets 0 and says so in `note`.
- bytes: every operand read once and every result written once, from the element types
  and shapes of the instruction's signature, except where the signature overstates the
  traffic: a fused parameter only sliced (dynamic-slice, slice, gather: a batch taken
  from the dataset) counts the slices, an in-place dynamic-update-slice counts the
  update, and a cuBLAS/cuDNN call's scratch workspace is not counted. Caches are not
  modelled: a value re-read by the next kernel is counted again.
- collective_bytes: what a collective moves over the interconnect, the bus-bandwidth
  convention of nccl-tests: all-reduce 2(n-1)/n x its operand, all-gather (n-1) x its
  operand (a shard), reduce-scatter and all-to-all (n-1)/n x their operand,
  collective-permute its operand; n is the replica group size (the operand, with a
  note, where it is not known).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import re
from collections.abc import Iterator, Sequence

KINDS = ("gemm", "conv", "elemental_conv", "fusion", "copy", "collective", "custom", "other")
# 16-bit float types. A fusion that reads, computes or writes one runs at its own rate on
# a CPU: XLA:CPU converts each element to or from f32 (rounding on the way back) where
# the CPU has no vector instructions for the type; on this machine's EPYC such loops
# moved an eighth of what the same step's f32 loops do (benchmarks/cpu_kernel_kinds.py).
HALF_FLOATS = ("bf16", "f16")

# jaxcnn.onednn.TARGET_PREFIX (that module imports JAX; tests check the two agree).
ONEDNN_TARGET_PREFIX = "jaxcnn_onednn_conv_"

# Instructions that launch nothing: bookkeeping, views, and the second half of an async
# pair (the first half is the kernel).
_NOT_KERNELS = frozenset(
    {
        "parameter",
        "constant",
        "get-tuple-element",
        "tuple",
        "bitcast",
        "partition-id",
        "replica-id",
        "after-all",
        "add-dependency",
        "opt-barrier",
        "domain",
        "copy-start",
        "copy-done",
        "async-update",
        "async-done",
        "get-dimension-size",
    }
)
_NOT_KERNEL_TARGETS = frozenset({"AllocateBuffer"})  # TPU: reserves memory, computes nothing

# Collective -> factor of its operand bytes moved per device, given the group size n.
_COLLECTIVES = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: n - 1,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "ragged-all-to-all": lambda n: (n - 1) / n,
    "collective-permute": lambda n: 1.0,
    "collective-broadcast": lambda n: 1.0,
}

_BYTES_PER_ELEMENT = {
    **dict.fromkeys(("s2", "u2"), 0.25),
    **dict.fromkeys(("s4", "u4"), 0.5),
    **dict.fromkeys(("pred", "s8", "u8"), 1),
    **dict.fromkeys(("s16", "u16", "f16", "bf16"), 2),
    **dict.fromkeys(("s32", "u32", "f32"), 4),
    **dict.fromkeys(("s64", "u64", "f64", "c64"), 8),
    "c128": 16,
    "token": 0,
}


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One launched kernel: its work per execution and how often the program runs it."""

    name: str  # the HLO instruction's name in its computation
    kind: str  # one of KINDS
    flops: float  # per execution; dots and convolutions only
    bytes: float  # per execution: operands read once, results written once
    # The element type a dot/conv's inputs have; a fusion's: the 16-bit float type it
    # reads, computes or writes, where it has one (HALF_FLOATS); else None.
    dtype: str | None
    count: int  # executions per run of the program: product of enclosing trip counts
    collective_bytes: float = 0.0  # over the interconnect, per execution
    note: str = ""  # what the count could not know (an unknown trip count or target)


# --- Reading the text ----------------------------------------------------------------

_OPENERS = {"(": ")", "[": "]", "{": "}"}


def _skip_string(text: str, start: int) -> int:
    """The index after the quoted string that opens at `start`."""
    i = start + 1
    while i < len(text) and text[i] != '"':
        i += 2 if text[i] == "\\" else 1
    return i + 1


def _scan(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, bracket depth after it) of each character of `text` from
    `start` outside quoted strings: the one walk both readers below make."""
    depth, i = 0, start
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i = _skip_string(text, i)
            continue
        if ch in _OPENERS:
            depth += 1
        elif ch in ")]}":
            depth -= 1
        yield i, ch, depth
        i += 1


def _balanced_end(text: str, start: int) -> int:
    """The index after the bracket that closes the one at `start` (strings skipped)."""
    return next((i + 1 for i, ch, depth in _scan(text, start) if depth == 0), len(text))


def _split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at the separators outside brackets and strings."""
    parts, begin = [], 0
    for i, ch, depth in _scan(text):
        if ch == sep and depth == 0:
            parts.append(text[begin:i])
            begin = i + 1
    parts.append(text[begin:])
    return [p.strip() for p in parts if p.strip()]


_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([^\]]*)\]")
_COMMENT = re.compile(r"/\*.*?\*/")


@dataclasses.dataclass(frozen=True)
class _Array:
    dtype: str
    dims: tuple[int, ...]

    @property
    def elements(self) -> int:
        return math.prod(self.dims)

    @property
    def bytes(self) -> float:
        return self.elements * _element_bytes(self.dtype)


def _element_bytes(dtype: str) -> float:
    if dtype in _BYTES_PER_ELEMENT:
        return _BYTES_PER_ELEMENT[dtype]
    if dtype.startswith("f8"):
        return 1
    if dtype.startswith("f4"):
        return 0.5
    raise ValueError(f"unknown HLO element type {dtype!r}: add its size to jaxcnn/perf/hlo.py")


def _arrays(type_text: str) -> list[_Array]:
    """The arrays of an HLO type (a tuple's leaves, in order)."""
    found = []
    for dtype, dims in _ARRAY.findall(_COMMENT.sub("", type_text)):
        sizes = tuple(int(d.strip().lstrip("<=")) for d in dims.split(",") if d.strip())
        found.append(_Array(dtype, sizes))
    return found


@dataclasses.dataclass(frozen=True)
class _Instruction:
    name: str
    type: str  # the result type's text
    opcode: str
    operands: tuple[str, ...]  # the operands' names (a parameter's: its index)
    attributes: dict[str, str]
    root: bool

    @functools.cached_property
    def arrays(self) -> list[_Array]:
        return _arrays(self.type)

    @property
    def bytes(self) -> float:
        return sum(a.bytes for a in self.arrays)

    def called(self, key: str) -> list[str]:
        """The computations attribute `key` names (calls=%f, branch_computations={..})."""
        value = self.attributes.get(key)
        return [] if value is None else re.findall(r"%?([^\s{},%]+)", value)

    @functools.cached_property
    def backend_config(self) -> dict:
        """The backend_config as JSON; {} where it is absent or not JSON (an FFI call's
        attribute dictionary)."""
        text = self.attributes.get("backend_config", "")
        try:
            value = json.loads(text) if text else {}
            if isinstance(value, str):  # older text: the JSON as an escaped string
                value = json.loads(value)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


_INSTRUCTION = re.compile(r"^\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_OPCODE = re.compile(r"([a-z][\w\-$.]*)\(")


def _type_end(text: str) -> int:
    """The end of the type that starts `text`: the first space outside brackets."""
    return next((i for i, ch, depth in _scan(text) if ch == " " and depth == 0), len(text))


def _parse_instruction(line: str) -> _Instruction | None:
    head = _INSTRUCTION.match(line)
    if head is None:
        return None
    rest = line[head.end() :]
    end = _type_end(rest)
    type_text, rest = rest[:end], rest[end:].lstrip()
    opcode = _OPCODE.match(rest)
    if opcode is None:
        return None
    close = _balanced_end(rest, opcode.end() - 1)
    operands = tuple(
        _COMMENT.sub("", o).split()[-1].lstrip("%")
        for o in _split_top(rest[opcode.end() : close - 1])
        if _COMMENT.sub("", o).strip()
    )
    attributes = {}
    for part in _split_top(rest[close:]):
        key, _, value = part.partition("=")
        attributes[key.strip()] = value.strip()
    return _Instruction(
        head.group(2), type_text, opcode.group(1), operands, attributes, bool(head.group(1))
    )


@dataclasses.dataclass
class _Computation:
    name: str
    instructions: list[_Instruction]
    by_name: dict[str, _Instruction]

    @property
    def root(self) -> _Instruction:
        return next((i for i in self.instructions if i.root), self.instructions[-1])

    def operand(self, instruction: _Instruction, index: int) -> _Instruction | None:
        if index >= len(instruction.operands):
            return None
        return self.by_name.get(instruction.operands[index])

    def operand_arrays(self, instruction: _Instruction, index: int) -> list[_Array]:
        found = self.operand(instruction, index)
        return [] if found is None else found.arrays

    def operand_bytes(self, instruction: _Instruction) -> float:
        return sum(
            sum(a.bytes for a in self.operand_arrays(instruction, i))
            for i in range(len(instruction.operands))
        )

    @functools.cached_property
    def users(self) -> dict[str, list[_Instruction]]:
        found: dict[str, list[_Instruction]] = {}
        for instruction in self.instructions:
            for name in instruction.operands:
                found.setdefault(name, []).append(instruction)
        return found


@dataclasses.dataclass
class _Module:
    computations: dict[str, _Computation]
    entry: str
    participants: int  # replica_count x num_partitions: an empty replica group's size
    platform: str | None = None  # the compiler's: "cpu" reads XLA:CPU's convolutions
    work: dict[str, _Work] = dataclasses.field(default_factory=dict)  # by computation


_HEADER = re.compile(r"^(ENTRY\s+)?%?([^\s(]+)\s*\(")


def _parse(hlo_text: str, platform: str | None = None) -> _Module:
    computations: dict[str, _Computation] = {}
    entry, current = None, None
    participants = 1
    for line in hlo_text.splitlines():
        if line.startswith("HloModule"):
            for key in ("replica_count", "num_partitions"):
                found = re.search(rf"\b{key}=(\d+)", line)
                participants *= int(found.group(1)) if found else 1
        elif current is None:
            header = _HEADER.match(line)
            if header and line.rstrip().endswith("{"):
                current = _Computation(header.group(2), [], {})
                if header.group(1):
                    entry = current.name
        elif line.startswith("}"):
            if current.instructions:
                computations[current.name] = current
            current = None
        else:
            instruction = _parse_instruction(line)
            if instruction is not None:
                current.instructions.append(instruction)
                current.by_name[instruction.name] = instruction
    if entry is None or entry not in computations:
        raise ValueError(
            "no ENTRY computation in the HLO text: pass compiled.as_text() of a compiled "
            "program (jax.jit(f).lower(...).compile())"
        )
    return _Module(computations, entry, participants, platform)


# --- FLOPs of one instruction ---------------------------------------------------------


def _conv_flops(output: _Array, kernel: _Array, kernel_labels: str) -> float:
    """2 x output elements x kernel window x kernel input features; `kernel_labels` names
    the kernel's dimensions ('i' input features, 'o' output features, digits spatial).
    The kernel's input features are already the input's over the feature groups."""
    window = math.prod(kernel.dims[i] for i, c in enumerate(kernel_labels) if c.isdigit())
    return 2.0 * output.elements * window * kernel.dims[kernel_labels.index("i")]


def in_bounds_taps(
    size: int, kernel: int, out: int, stride: int, pad_lo: int, lhs_dil: int, rhs_dil: int
) -> int:
    """Kernel taps, summed over one spatial dimension's outputs, that land on a real
    input element: not on padding, not on a hole an lhs dilation inserted."""
    dilated = (size - 1) * lhs_dil + 1
    taps = 0
    for o in range(out):
        for k in range(kernel):
            at = o * stride + k * rhs_dil - pad_lo
            taps += 0 <= at < dilated and at % lhs_dil == 0
    return taps


def _window(text: str | None) -> dict[str, list[int]]:
    """`window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=2x2}` as lists per spatial
    dimension (a pad as its low side)."""
    fields = {}
    for part in (text or "").strip("{}").split():
        key, _, value = part.partition("=")
        fields[key] = [int(v.split("_")[0]) for v in value.split("x")]
    return fields


def _in_bounds_conv_flops(
    lhs: _Array, kernel: _Array, out: _Array, dim_labels: str, window: dict[str, list[int]]
) -> float | None:
    """2 x multiply-adds that meet real input (padding taps and lhs-dilation holes
    skipped), as cuDNN and the TPU's convolution units do them: a gradient that XLA writes
    as a convolution padded far beyond its input (a 1x1 kernel's input gradient, its
    roles swapped, over a 56x56 window padded by 55) costs its real work, not its
    window's. None where the labels or the window cannot be read."""
    try:
        lhs_labels, rest = dim_labels.split("_", 1)
        kernel_labels, out_labels = rest.split("->")
        sizes = window["size"]
        spatial = len(sizes)
        taps, out_spatial = 1, 1
        for d in range(spatial):
            label = str(d)
            n_out = out.dims[out_labels.index(label)]
            out_spatial *= n_out
            taps *= in_bounds_taps(
                lhs.dims[lhs_labels.index(label)],
                kernel.dims[kernel_labels.index(label)],
                n_out,
                window.get("stride", [1] * spatial)[d],
                window.get("pad", [0] * spatial)[d],
                window.get("lhs_dilate", [1] * spatial)[d],
                window.get("rhs_dilate", [1] * spatial)[d],
            )
        return 2.0 * out.elements / out_spatial * taps * kernel.dims[kernel_labels.index("i")]
    except (ValueError, IndexError, KeyError):
        return None


def _kernel_labels(dim_labels: str) -> str:
    """'b01f_01io->b01f' -> '01io'."""
    return dim_labels.split("->")[0].split("_", 1)[1]


def _ints(text: str | None) -> list[int]:
    return [int(x) for x in re.findall(r"\d+", text or "")]


def _first(arrays: list[_Array]) -> _Array | None:
    return arrays[0] if arrays else None


@dataclasses.dataclass(frozen=True)
class _Work:
    """The dot/conv work of an instruction or a computation."""

    flops: float = 0.0
    dtype: str | None = None
    kind: str | None = None  # "gemm" | "conv" | "elemental_conv" | None
    note: str = ""

    def __add__(self, other: _Work) -> _Work:
        # A kernel is named by its slowest kind of work: elemental loops, then a library
        # convolution, then a GEMM.
        kinds = (self.kind, other.kind)
        kind = next((k for k in ("elemental_conv", "conv") if k in kinds), None)
        kind = kind or self.kind or other.kind
        notes = "; ".join(n for n in dict.fromkeys((self.note, other.note)) if n)
        return _Work(self.flops + other.flops, self.dtype or other.dtype, kind, notes)


def _dot_work(comp: _Computation, instruction: _Instruction) -> _Work:
    lhs, out = _first(comp.operand_arrays(instruction, 0)), _first(instruction.arrays)
    if lhs is None or out is None:
        return _Work(kind="gemm", note=f"{instruction.name}: operand shapes unknown, 0 flops")
    k = math.prod(lhs.dims[d] for d in _ints(instruction.attributes.get("lhs_contracting_dims")))
    return _Work(2.0 * out.elements * k, lhs.dtype, "gemm")


_LIBRARY_CONV_DTYPES = ("f16", "f32")


def _row_major(type_text: str | None) -> bool:
    """Whether an array's layout is row-major (`{3,2,1,0}`, or none written)."""
    found = re.search(r"\]\{([^}]*)\}", type_text or "")
    if found is None:
        return True
    minor_to_major = _ints(found.group(1).split(":")[0])
    return minor_to_major == sorted(minor_to_major, reverse=True)


def _xla_cpu_library_conv(comp: _Computation, instruction: _Instruction) -> bool:
    """Whether XLA:CPU runs `instruction` (a convolution) in its library, else its
    elemental emitter writes it as loops (the module docstring's conditions)."""
    labels = instruction.attributes.get("dim_labels", "")
    lhs_labels, _, rest = labels.partition("_")
    kernel_labels, _, out_labels = rest.partition("->")
    spatial = "".join(str(d) for d in range(len(lhs_labels) - 2))
    window = _window(instruction.attributes.get("window"))
    lhs = _first(comp.operand_arrays(instruction, 0))
    operands = [comp.operand(instruction, i) for i in (0, 1)]
    return (
        1 <= len(spatial) <= 3
        and lhs_labels == out_labels == f"b{spatial}f"
        and kernel_labels == f"{spatial}io"
        and not any(window.get("rhs_reversal", []))
        and lhs is not None
        and lhs.dtype in _LIBRARY_CONV_DTYPES
        and all(_row_major(o.type if o else None) for o in operands)
        and _row_major(instruction.type)
    )


def _convolution_work(module: _Module, comp: _Computation, instruction: _Instruction) -> _Work:
    lhs = _first(comp.operand_arrays(instruction, 0))
    kernel, out = _first(comp.operand_arrays(instruction, 1)), _first(instruction.arrays)
    if lhs is None or kernel is None or out is None:
        return _Work(kind="conv", note=f"{instruction.name}: operand shapes unknown, 0 flops")
    dim_labels = instruction.attributes.get("dim_labels", "_01io->")
    window = _window(instruction.attributes.get("window"))
    flops = _in_bounds_conv_flops(lhs, kernel, out, dim_labels, window) if window else None
    if flops is None:
        flops = _conv_flops(out, kernel, _kernel_labels(dim_labels))
    elemental = module.platform == "cpu" and not _xla_cpu_library_conv(comp, instruction)
    return _Work(flops, lhs.dtype, "elemental_conv" if elemental else "conv")


def _cudnn_work(comp: _Computation, instruction: _Instruction, target: str) -> _Work:
    """A cuDNN convolution: its dim_labels describe the forward convolution (input,
    filter, output); which of those are operands and which the result depends on the
    pass."""
    op0, op1 = (_first(comp.operand_arrays(instruction, i)) for i in (0, 1))
    result = _first(instruction.arrays)
    if "BackwardInput" in target:  # (d output, filter) -> d input
        output, kernel = op0, op1
    elif "BackwardFilter" in target:  # (input, d output) -> d filter
        output, kernel = op1, result
    else:  # (input, filter, [bias, side input]) -> output
        output, kernel = result, op1
    labels = instruction.attributes.get("dim_labels")
    if output is None or kernel is None or op0 is None or labels is None:
        return _Work(kind="conv", note=f"{target}: shapes or dim_labels unknown, 0 flops")
    return _Work(_conv_flops(output, kernel, _kernel_labels(labels)), op0.dtype, "conv")


def _cublas_work(comp: _Computation, instruction: _Instruction, target: str) -> _Work:
    lhs, out = _first(comp.operand_arrays(instruction, 0)), _first(instruction.arrays)
    dims = instruction.backend_config.get("gemm_backend_config", {}).get("dot_dimension_numbers")
    if lhs is None or out is None or dims is None:
        return _Work(kind="gemm", note=f"{target}: dot dimensions unknown, 0 flops")
    k = math.prod(lhs.dims[int(d)] for d in dims.get("lhs_contracting_dimensions", []))
    return _Work(2.0 * out.elements * k, lhs.dtype, "gemm")


def _onednn_work(comp: _Computation, instruction: _Instruction, target: str) -> _Work:
    """jaxcnn.onednn's kernels (NHWC activations, HWIO kernel): forward (x, w) -> y,
    input gradient (dy, w) -> dx, weight gradient (x, dy) -> dw; each is the forward
    convolution's multiply-accumulates."""
    op0, op1 = (_first(comp.operand_arrays(instruction, i)) for i in (0, 1))
    result = _first(instruction.arrays)
    output, kernel = {
        "fwd": (result, op1),
        "bwd_data": (op0, op1),
        "bwd_weights": (op1, result),
    }.get(target[len(ONEDNN_TARGET_PREFIX) :], (None, None))
    if output is None or kernel is None or op0 is None:
        return _Work(kind="conv", note=f"{target}: not a known oneDNN kernel, 0 flops")
    return _Work(_conv_flops(output, kernel, "01io"), op0.dtype, "conv")


def _custom_call_work(comp: _Computation, instruction: _Instruction) -> _Work:
    target = instruction.attributes.get("custom_call_target", "").strip('"')
    if target.startswith("__cudnn$conv"):
        return _cudnn_work(comp, instruction, target)
    if target.startswith("__cublas"):
        return _cublas_work(comp, instruction, target)
    if target.startswith(ONEDNN_TARGET_PREFIX):
        return _onednn_work(comp, instruction, target)
    return _Work(note=f"custom call {target}: flops unknown, counted as 0")


def _instruction_work(module: _Module, comp: _Computation, instruction: _Instruction) -> _Work:
    if instruction.opcode == "dot":
        return _dot_work(comp, instruction)
    if instruction.opcode == "convolution":
        return _convolution_work(module, comp, instruction)
    if instruction.opcode == "custom-call":
        return _custom_call_work(comp, instruction)
    if instruction.opcode in ("fusion", "call"):  # a fusion's or library fusion's inside
        work = _Work()
        for name in instruction.called("calls") + instruction.called("to_apply"):
            work = work + _computation_work(module, name)
        return work
    return _Work()


def _computation_work(module: _Module, name: str) -> _Work:
    """The dot/conv work inside a computation. A custom call there that is none of the
    known libraries is a backend's helper (TPU's gather index checks), not noted."""
    cache = module.work
    if name not in cache:
        comp = module.computations.get(name)
        work = _Work()
        for instruction in comp.instructions if comp else []:
            inner = _instruction_work(module, comp, instruction)
            if instruction.opcode == "custom-call" and inner.kind is None:
                inner = _Work()
            work = work + inner
        cache[name] = work
    return cache[name]


# --- Bytes of one kernel --------------------------------------------------------------

_SLICES = ("dynamic-slice", "slice", "gather")


def _fusion_bytes(module: _Module, comp: _Computation, fusion: _Instruction) -> float:
    """Operands read and results written by a fusion, where a parameter only sliced is
    read as its slices and an in-place dynamic-update-slice writes its update."""
    fused = module.computations.get(next(iter(fusion.called("calls")), ""))
    if fused is None:
        return comp.operand_bytes(fusion) + fusion.bytes
    params = {int(i.operands[0]): i for i in fused.instructions if i.opcode == "parameter"}
    root = fused.root
    outputs = [fused.by_name[n] for n in root.operands] if root.opcode == "tuple" else [root]
    written, in_place = 0.0, set()
    for output in outputs:
        buffer = fused.operand(output, 0)
        if output.opcode == "dynamic-update-slice" and buffer and buffer.opcode == "parameter":
            in_place.add(buffer.name)
            written += sum(a.bytes for a in fused.operand_arrays(output, 1))
        else:
            written += output.bytes
    read = 0.0
    for index in range(len(fusion.operands)):
        full = sum(a.bytes for a in comp.operand_arrays(fusion, index))
        param = params.get(index)
        users = fused.users.get(param.name, []) if param else []
        if param is None or not users:
            read += full if param is None else 0.0
        elif param.name in in_place and all(u.opcode == "dynamic-update-slice" for u in users):
            pass  # updated in place: only the update is written, nothing read
        elif all(u.opcode in _SLICES and u.operands[0] == param.name for u in users):
            read += sum(u.bytes for u in users)
        else:
            read += full
    return read + written


def _custom_call_bytes(comp: _Computation, instruction: _Instruction) -> float:
    """Operands and results, less a library call's scratch workspace (the u8/s8 buffer
    last in its result tuple: scratch, not traffic)."""
    results = instruction.arrays
    target = instruction.attributes.get("custom_call_target", "").strip('"')
    library = target.startswith(("__cublas", "__cudnn"))
    if library and instruction.type.startswith("(") and results[-1].dtype in ("u8", "s8"):
        results = results[:-1]
    return comp.operand_bytes(instruction) + sum(a.bytes for a in results)


# --- Collectives ----------------------------------------------------------------------


def _group_size(module: _Module, instruction: _Instruction) -> int | None:
    groups = instruction.attributes.get("replica_groups")
    if groups is None:
        return None
    iota = re.match(r"\[(\d+),(\d+)\]<=", groups)  # [groups, size]<=[devices]
    if iota:
        return int(iota.group(2))
    mesh = re.match(r"mesh\[(.*?)\]\s*\{(.*?)\}", groups)  # mesh['x'=2,'y'=4] {'y'}
    if mesh:
        sizes = {axis: int(n) for axis, n in re.findall(r"'([^']+)'=(\d+)", mesh.group(1))}
        return math.prod(sizes.get(axis, 1) for axis in re.findall(r"'([^']+)'", mesh.group(2)))
    listed = [g for g in re.findall(r"\{([\d,\s]*)\}", groups) if g.strip()]
    return len(listed[0].split(",")) if listed else module.participants


def _collective(module: _Module, comp: _Computation, instruction: _Instruction) -> Kernel:
    base = instruction.opcode.removesuffix("-start")
    size = comp.operand_bytes(instruction)
    if instruction.opcode == "all-reduce-start" or not instruction.opcode.endswith("-start"):
        written = instruction.bytes
    else:  # an async start's result holds its operands, then its results
        written = max(instruction.bytes - size, 0.0)
    n = _group_size(module, instruction)
    note = ""
    if base in ("collective-permute", "collective-broadcast"):
        moved = size
    elif n is None:
        moved, note = size, f"{base}: replica group size unknown, its operand counted"
    else:
        moved = _COLLECTIVES[base](n) * size
    return Kernel(instruction.name, "collective", 0.0, size + written, None, 1, moved, note)


# --- Kernels --------------------------------------------------------------------------


def _is_collective(opcode: str) -> bool:
    return opcode.removesuffix("-start") in _COLLECTIVES


def _kernel(module: _Module, comp: _Computation, instruction: _Instruction) -> Kernel | None:
    """The kernel one instruction launches; None for what launches nothing."""
    opcode = instruction.opcode
    if _is_collective(opcode):
        return _collective(module, comp, instruction)
    if opcode == "custom-call":
        target = instruction.attributes.get("custom_call_target", "").strip('"')
        if target in _NOT_KERNEL_TARGETS:
            return None
        nbytes = _custom_call_bytes(comp, instruction)
    elif opcode == "fusion":
        nbytes = _fusion_bytes(module, comp, instruction)
    else:
        nbytes = comp.operand_bytes(instruction) + instruction.bytes
    work = _instruction_work(module, comp, instruction)
    if work.kind:
        kind = work.kind
    elif opcode in ("fusion", "copy"):
        kind = opcode
    elif opcode == "call":  # a small call: one generated function, like a fusion
        kind = "fusion"
    else:
        kind = {"transpose": "copy", "custom-call": "custom"}.get(opcode, "other")
    dtype = work.dtype
    if kind == "fusion":
        dtype = next(
            filter(None, (_half_float(module, c) for c in instruction.called("calls"))),
            None,
        )
    return Kernel(instruction.name, kind, work.flops, nbytes, dtype, 1, 0.0, work.note)


def _half_float(module: _Module, name: str, seen: frozenset[str] = frozenset()) -> str | None:
    """The 16-bit float type (HALF_FLOATS) an array in the computation `name`, or in a
    computation it calls, has; None where none has one."""
    comp = module.computations.get(name)
    if comp is None or name in seen:
        return None
    for instruction in comp.instructions:
        for array in instruction.arrays:
            if array.dtype in HALF_FLOATS:
                return array.dtype
        for called in instruction.called("calls") + instruction.called("to_apply"):
            found = _half_float(module, called, seen | {name})
            if found:
                return found
    return None


def _through_copies(comp: _Computation, name: str) -> _Instruction | None:
    found = comp.by_name.get(name)
    while found is not None and found.opcode in ("copy", "bitcast", "convert"):
        found = comp.operand(found, 0)
    return found


def _constant(instruction: _Instruction | None) -> int | None:
    if instruction is None or instruction.opcode != "constant":
        return None
    try:
        return int(instruction.operands[0])
    except (IndexError, ValueError):
        return None


def _inferred_trip_count(module: _Module, comp: _Computation, loop: _Instruction) -> int | None:
    """A trip count from the loop itself, where the backend gives none (TPU): a condition
    `i < N` (or `<=`) on a tuple element that starts at a constant and that the body
    increments by one."""
    cond = module.computations.get(next(iter(loop.called("condition")), ""))
    body = module.computations.get(next(iter(loop.called("body")), ""))
    if cond is None or body is None or cond.root.opcode != "compare":
        return None
    direction = cond.root.attributes.get("direction")
    counter, limit = (_through_copies(cond, n) for n in cond.root.operands[:2])
    if counter is None or counter.opcode != "get-tuple-element" or direction not in ("LT", "LE"):
        return None
    index, limit = int(counter.attributes.get("index", -1)), _constant(limit)
    init_tuple = comp.operand(loop, 0)
    if limit is None or init_tuple is None or init_tuple.opcode != "tuple":
        return None
    start = _constant(_through_copies(comp, init_tuple.operands[index]))
    if start is None or body.root.opcode != "tuple":
        return None
    step = _through_copies(body, body.root.operands[index])
    if step is None or step.opcode != "add":
        return None
    terms = [_through_copies(body, n) for n in step.operands]
    gets = [t for t in terms if t is not None and t.opcode == "get-tuple-element"]
    ones = [t for t in terms if _constant(t) == 1]
    if len(gets) != 1 or len(ones) != 1 or int(gets[0].attributes.get("index", -1)) != index:
        return None
    return max(limit - start + (direction == "LE"), 0)


def _trip_count(module: _Module, comp: _Computation, loop: _Instruction) -> int | None:
    known = loop.backend_config.get("known_trip_count", {}).get("n")
    if known is not None:
        return int(known)
    return _inferred_trip_count(module, comp, loop)


def _scaled(kernel: Kernel, times: int, note: str) -> Kernel:
    notes = "; ".join(n for n in dict.fromkeys((kernel.note, note)) if n)
    return dataclasses.replace(kernel, count=kernel.count * times, note=notes)


def _expand(module: _Module, name: str) -> Iterator[Kernel]:
    """The kernels of computation `name` in program order, counts for one run of it."""
    comp = module.computations[name]
    for instruction in comp.instructions:
        opcode = instruction.opcode
        if opcode in _NOT_KERNELS or opcode.endswith("-done"):  # a pair's start is the kernel
            continue
        if opcode == "while":
            trips = _trip_count(module, comp, instruction)
            note = "" if trips is not None else f"{instruction.name}: trip count unknown, ran once"
            runs = 1 if trips is None else trips
            for called, times in (("condition", runs + 1), ("body", runs)):
                for sub in instruction.called(called):
                    yield from (_scaled(k, times, note) for k in _expand(module, sub))
        elif opcode == "conditional":
            branches = instruction.called("branch_computations") or (
                instruction.called("true_computation") + instruction.called("false_computation")
            )
            yield from max(([*_expand(module, b)] for b in branches), key=_weight, default=[])
        elif opcode in ("call", "async-start") and not _small_call(instruction):
            for sub in instruction.called("to_apply") + instruction.called("calls"):
                yield from _expand(module, sub)
        else:
            kernel = _kernel(module, comp, instruction)
            if kernel is not None:
                yield kernel


def _small_call(instruction: _Instruction) -> bool:
    """A call XLA:CPU compiles as one function (no thunk per instruction inside)."""
    return 'xla_cpu_small_call="true"' in instruction.attributes.get("frontend_attributes", "")


def _weight(ks: Sequence[Kernel]) -> tuple[float, float]:
    return sum(k.flops * k.count for k in ks), sum(k.bytes * k.count for k in ks)


def kernels(hlo_text: str, platform: str | None = None) -> list[Kernel]:
    """The launched kernels of the ENTRY computation of `hlo_text` (compiled.as_text())
    in program order; a loop's kernels once each, with its trip count in `count`.
    `platform` is the compiler's (jax's platform name): "cpu" tells XLA:CPU's library
    convolutions from those it writes as loops."""
    module = _parse(hlo_text, platform)
    return list(_expand(module, module.entry))


def totals(ks: Sequence[Kernel]) -> dict[str, float]:
    """Kernels launched, FLOPs, bytes and interconnect bytes of one run of the program."""
    return {
        "kernels": sum(k.count for k in ks),
        "flops": sum(k.flops * k.count for k in ks),
        "bytes": sum(k.bytes * k.count for k in ks),
        "collective_bytes": sum(k.collective_bytes * k.count for k in ks),
    }


# --- A record's compact form ----------------------------------------------------------

# One summary row: identical kernels merged, with how many times they run in all.
SUMMARY_FIELDS = ("count", "kind", "flops", "bytes", "dtype", "collective_bytes", "note")
# Only orders the rows: a kernel's weight is the larger of its FLOPs over this balance
# (about a recent GPU's FLOP/s per byte/s) and its bytes.
_ORDERING_FLOPS_PER_BYTE = 100.0


def _compact(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def summarize(ks: Sequence[Kernel]) -> list[list]:
    """`ks` as JSON-able rows (SUMMARY_FIELDS; the note only where there is one):
    kernels alike in all but name and place merged, their counts summed, the heaviest
    first. Program order and names are dropped; `step_time` needs neither."""
    merged: dict[tuple, int] = {}
    for k in ks:
        key = (k.kind, k.flops, k.bytes, k.dtype, k.collective_bytes, k.note)
        merged[key] = merged.get(key, 0) + k.count
    rows = []
    for (kind, flops, nbytes, dtype, moved, note), count in merged.items():
        row = [count, kind, _compact(flops), _compact(nbytes), dtype, _compact(moved)]
        rows.append([*row, note] if note else row)

    def heaviest_first(row: list) -> tuple:
        weight = row[0] * max(row[2] / _ORDERING_FLOPS_PER_BYTE, row[3], row[5])
        return (-weight, -row[0], row[1], str(row[4]), row[2], row[3], row[5], row[6:])

    return sorted(rows, key=heaviest_first)


def from_summary(rows: Sequence[Sequence]) -> list[Kernel]:
    """The kernels of `summarize`'s rows, one per row (named by its place)."""
    ks = []
    for i, row in enumerate(rows):
        count, kind, flops, nbytes, dtype, moved, *note = row
        if kind not in KINDS:
            raise ValueError(f"summary row {i}: unknown kernel kind {kind!r} (one of {KINDS})")
        ks.append(
            Kernel(
                f"row{i}",
                kind,
                float(flops),
                float(nbytes),
                dtype,
                int(count),
                float(moved),
                note[0] if note else "",
            )
        )
    return ks
