"""The Metal emulator: runs MSL kernel source on the CPU by compiling it as C++.

How it works, in the order a launch happens:

1. :func:`~llmfs.tensor.backends.metal.lint.check_msl` checks both rule sets: Metal's own
   (``double``, pointer parameters without an address space, ...) and the emulator's (no
   ``__builtin_*`` or C library calls, nothing outside the emulator's MSL such as ``bfloat``).
2. :func:`msl_as_cpp` rewrites what C++ reads otherwise (unsuffixed literals are floats,
   ``2.0h`` is a half, ``float4(a, b, c, d)`` a vector constructor; attributes are blanked), and
   the source's ``#include <metal_stdlib>`` finds the shim header in ``include/``: real address
   spaces (mixing them does not compile, as in Metal), vector types with swizzles, ``half``
   arithmetic that rounds every operation, atomics, simdgroup functions and the ``metal::``
   math. clang++ compiles it (see :mod:`~llmfs.tensor.backends.metal.toolchain`); its errors
   become a :class:`~llmfs.tensor.backends.metal.errors.KernelLintError` naming the rule and
   the source line (:func:`compile_error`), never the compiler's raw text.
3. For every kernel (``kernel void f``, ``[[kernel]] void f``, named by ``[[host_name]]`` when
   it has one, as Metal names it) a launcher is generated and appended to the source. The
   launcher walks the grid the way ``dispatchThreads`` does, threadgroup by threadgroup, with
   partial threadgroups on the far edges, and calls the kernel once per thread with the buffer
   pointers taken from the same buffer indices the Metal path binds (explicit, or assigned as
   Metal assigns them) and ``[[threadgroup(n)]]`` blocks of the lengths given at launch. A
   kernel that uses ``threadgroup_barrier`` or a simdgroup function runs the threads of a group
   as fibers on one OS thread, switched only there: between two barriers the threads run one
   after another, so a missing barrier shows; a simdgroup function exchanges the values of the
   32 lanes that reached it. Other kernels run their threads one after another.

   What a GPU does not promise, the emulator does not give either: every ``threadgroup``
   variable of a kernel body is rewritten into a reference to a block of its group's memory that
   starts out filled with junk (0xFF bytes: NaN for floats, -1 for integers) on every launch and
   in every group; ``shuffle=<seed>`` runs the groups and the threads inside each group in a
   seeded random order (for fibers: a new order after every barrier), so a kernel whose result
   depends on thread order shows it; a thread that returns while the rest of its group waits
   at a barrier fails the launch (:class:`KernelLaunchError`) instead of hanging; more than
   32 KiB of threadgroup memory, or a threadgroup larger than the pipeline's
   :meth:`EmulatorLibrary.max_total_threads_per_threadgroup`, is refused.
4. The text is compiled once per hash into the cache folder (see
   :mod:`~llmfs.tensor.backends.metal.toolchain`) and loaded with :mod:`ctypes`.

An isolated launch (``sanitize=True``, or ``None``: the default of
:func:`~llmfs.tensor.backends.metal.run_kernel` for learners' kernels) builds the same text as a
standalone executable and runs it in a subprocess on copies of the buffers, each in its own
exactly-sized block: under AddressSanitizer, or between inaccessible guard regions, whichever of
:data:`ISOLATION_MODES` first passes its probe (:func:`isolation_check`: the real shim and harness
must report reads and writes one element past either end of a buffer); a mode that lets one
through is never used. An access outside a buffer is reported (:class:`KernelMemoryError`,
naming the first thread outside) without any risk to the calling process. ``sanitize=False``
(the library's own kernels) runs in process through :mod:`ctypes`, fast and unchecked.

A counted launch (:meth:`EmulatorLibrary.count_accesses`) is an isolated launch of a build whose
every load instruction calls the harness first (clang's ``-fsanitize-coverage=trace-loads``):
it reports the bytes read from each buffer, the barrier rounds of a threadgroup and how many
distinct words of threadgroup memory one thread read, so a check can judge how a kernel
cooperates by what it does rather than by its text.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import operator
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmfs.tensor.backends.metal.errors import (
    KernelArgumentError,
    KernelCompileError,
    KernelLaunchError,
    KernelLintError,
    KernelMemoryError,
    KernelNotFoundError,
    MetalUnavailableError,
)
from llmfs.tensor.backends.metal.lint import Problem, check_msl
from llmfs.tensor.backends.metal.msl import Kernel, Parameter, blank_comments, find_kernels
from llmfs.tensor.backends.metal.toolchain import build, find_compiler, sanitizer_available

#: What the emulator reports as its device limits (those of current Apple GPUs).
MAX_THREADS_PER_THREADGROUP = 1024
THREAD_EXECUTION_WIDTH = 32

#: How long an isolated launch may run before it is stopped (seconds).
DEFAULT_TIMEOUT_S = 30.0

#: The numpy dtype of each MSL scalar type (and of its 2/3/4-vectors' elements).
ELEMENT_DTYPES = {
    "float": np.dtype(np.float32),
    "half": np.dtype(np.float16),
    "int": np.dtype(np.int32),
    "uint": np.dtype(np.uint32),
    "short": np.dtype(np.int16),
    "ushort": np.dtype(np.uint16),
    "char": np.dtype(np.int8),
    "uchar": np.dtype(np.uint8),
    "bool": np.dtype(np.bool_),
    "long": np.dtype(np.int64),
    "ulong": np.dtype(np.uint64),
}

#: Element sizes of the MSL scalar types a buffer may hold, for argument checks.
TYPE_SIZES = {
    "float": 4,
    "half": 2,
    "int": 4,
    "uint": 4,
    "short": 2,
    "ushort": 2,
    "char": 1,
    "uchar": 1,
    "bool": 1,
    "long": 8,
    "ulong": 8,
}

Grid = tuple[int, int, int]
BufferArgs = Sequence[np.ndarray | None] | Mapping[int, np.ndarray]


# ------------------------------------------------------------------------------------------------
# Grid and threadgroup sizes (shared with the Metal path)
# ------------------------------------------------------------------------------------------------


def as_grid(grid: object, what: str = "grid") -> Grid:
    """Normalises an int or a 1-3 tuple of non-negative ints to ``(x, y, z)``.

    Raises :class:`KernelArgumentError` for anything else or for sizes above 2**32 - 1.
    """
    if isinstance(grid, int | np.integer):
        values: object = (grid,)
    else:
        values = grid
    try:
        if isinstance(values, str | bytes) or not isinstance(values, Iterable):
            raise TypeError
        dims = tuple(operator.index(v) for v in values)
    except TypeError:
        raise KernelArgumentError(
            f"{what} must be an int or a tuple of 1 to 3 ints, got {grid!r}"
        ) from None
    if not 1 <= len(dims) <= 3:
        raise KernelArgumentError(f"{what} must have 1 to 3 dimensions, got {len(dims)}")
    for value in dims:
        if not 0 <= value <= 0xFFFFFFFF:
            raise KernelArgumentError(f"{what} size {value} is outside 0 .. {0xFFFFFFFF}")
    padded = (*dims, 1, 1)[:3]
    return (padded[0], padded[1], padded[2])


def default_threadgroup(grid: Grid, max_threads: int, width: int) -> Grid:
    """Metal's usual choice: ``width`` threads wide (the SIMD width), as many rows as the
    pipeline's ``maxTotalThreadsPerThreadgroup`` allows, never larger than the grid needs."""
    x, y, z = grid
    if y == 1 and z == 1:
        return (max(1, min(max_threads, -(-x // width) * width)), 1, 1)
    gx = max(1, min(width, x))
    gy = max(1, min(max_threads // gx, y))
    gz = max(1, min(max_threads // (gx * gy), z))
    return (gx, gy, gz)


def check_threadgroup(threadgroup: Grid, max_threads: int) -> None:
    """Raises :class:`KernelArgumentError` unless every size is >= 1 and the product is at most
    ``max_threads``."""
    total = threadgroup[0] * threadgroup[1] * threadgroup[2]
    if min(threadgroup) < 1 or total > max_threads:
        raise KernelArgumentError(
            f"threadgroup {threadgroup} is invalid: every size must be >= 1 and their product "
            f"({total}) at most {max_threads} (maxTotalThreadsPerThreadgroup)"
        )


# ------------------------------------------------------------------------------------------------
# Buffers
# ------------------------------------------------------------------------------------------------


def normalize_buffers(buffers: BufferArgs) -> dict[int, np.ndarray]:
    """Buffers as ``{index: array}``; a sequence binds position i to ``[[buffer(i)]]``.

    Python and numpy scalars are not accepted (their size would be a guess): pass
    ``np.array([v], dtype=np.int32)`` or a numpy scalar such as ``np.float32(2.0)``.
    """
    if isinstance(buffers, Mapping):
        items: Iterable[tuple[object, object]] = buffers.items()
    elif isinstance(buffers, Sequence) and not isinstance(buffers, str | bytes):
        items = enumerate(buffers)
    else:
        raise KernelArgumentError(
            f"buffers must be a list of numpy arrays (buffers[i] binds [[buffer(i)]]) or a dict "
            f"{{index: array}}, got {type(buffers).__name__}"
        )
    bound: dict[int, np.ndarray] = {}
    for index, value in items:
        if isinstance(index, bool) or not isinstance(index, int | np.integer):
            raise KernelArgumentError(
                f"buffer keys are [[buffer(n)]] indices (ints), got {index!r}; bind by index, "
                f"for example {{0: values, 1: out}}"
            )
        if value is None:
            continue
        if isinstance(value, np.generic):
            value = np.array([value])
        if not isinstance(value, np.ndarray):
            raise KernelArgumentError(
                f"buffer {index} must be a numpy array or numpy scalar, got "
                f"{type(value).__name__} (wrap a Python number as np.float32(x) or np.int32(n))"
            )
        bound[int(index)] = value
    return bound


def check_buffers(kernel: Kernel, bound: Mapping[int, np.ndarray]) -> None:
    """Checks the bound arrays against the kernel's declared buffers.

    Every declared index needs a C-contiguous array; its dtype must be the declared element
    type's (``float`` holds float32, ``half`` float16, ``int`` int32, ``uint`` uint32, ...; a
    vector type such as ``float4`` holds its element type); a buffer the kernel may write
    (``device`` without ``const``) must be writeable; a ``T&`` argument needs at least one
    element. A bound index the kernel does not declare is refused too. Raises
    :class:`KernelArgumentError` naming the parameter.
    """
    for index in sorted(bound):
        if index not in kernel.buffers:
            declared = ", ".join(str(i) for i in sorted(kernel.buffers)) or "none"
            raise KernelArgumentError(
                f"kernel {kernel.name}: buffer {index} is bound but the kernel declares no "
                f"[[buffer({index})]] (declared indices: {declared})"
            )
    for index, param in sorted(kernel.buffers.items()):
        where = f"kernel {kernel.name}: buffer {index} ({param.type_text} {param.name})"
        array = bound.get(index)
        if array is None:
            raise KernelArgumentError(f"{where} is not bound")
        if not array.flags.c_contiguous:
            raise KernelArgumentError(
                f"{where} must be C-contiguous (pass np.ascontiguousarray(...) or the storage)"
            )
        element = param.base_type.rstrip("234")
        expected = ELEMENT_DTYPES.get(element)
        if expected is not None and array.dtype != expected:
            raise KernelArgumentError(
                f"{where} holds {element} ({expected}) but the array is {array.dtype}; pass "
                f"an array of dtype {expected} (for example arr.astype(np.{expected}))"
            )
        size = TYPE_SIZES.get(param.base_type)
        if size is not None and array.dtype.itemsize != size:
            raise KernelArgumentError(
                f"{where} holds {param.base_type} ({size} bytes) but the array is {array.dtype} "
                f"({array.dtype.itemsize} bytes per element)"
            )
        if writes(param) and not array.flags.writeable:
            raise KernelArgumentError(f"{where} may be written by the kernel but is read-only")
        if param.is_reference and array.size < 1:
            raise KernelArgumentError(f"{where} is a reference and needs at least one element")


def writes(param: Parameter) -> bool:
    """True when the kernel may write through the parameter (device memory, not const)."""
    words = param.type_text.replace("*", " ").replace("&", " ").split()
    return param.address_space == "device" and "const" not in words


# ------------------------------------------------------------------------------------------------
# Launcher generation
# ------------------------------------------------------------------------------------------------


_COOPERATIVE = re.compile(r"\b(?:threadgroup_barrier|simdgroup_barrier|simd_\w+|quad_\w+)\s*\(")


def uses_barrier(source: str, kernel: Kernel) -> bool:
    """True when ``kernel`` may reach ``threadgroup_barrier`` or a simdgroup function: in its
    own body, or anywhere outside the kernel bodies (a helper it may call). Such a kernel runs
    its threads as fibers that meet there (see the shim)."""
    if _COOPERATIVE.search(kernel.body):
        return True
    text = blank_comments(source)
    for other in find_kernels(source):
        text = text.replace(other.body, "")
    return _COOPERATIVE.search(text) is not None


# Unsuffixed floating literals (0.5, .5, 2., 1e-3) are floats in MSL, doubles in C++.
_UNSUFFIXED = re.compile(
    r"(?<![\w.])(?:(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])"
)
# Half literals: 2.0h, .5h, 1e-3h, 3h.
_HALF_LITERAL = re.compile(r"(?<![\w.])((?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)[hH](?![\w.])")
# MSL vector constructors: float4(a, b, c, d), half2(x), uint3(v.xy, z).
_VECTOR_CONSTRUCTOR = re.compile(
    r"(?<![\w.:])(float|half|int|uint|short|ushort|char|uchar)([234])\s*\("
)


# An attribute: [[buffer(0)]], [[threadgroup(0)]], [[kernel]], [[host_name("f")]].
_ATTRIBUTE_TEXT = re.compile(r"\[\[[^\[\]]*\]\]")


def msl_as_cpp(source: str) -> str:
    """``source`` with MSL's spellings that C++ reads otherwise rewritten, line numbers kept:
    attributes are blanked (the launcher reads them from the source; left in, the address-space
    words inside ``[[threadgroup(0)]]`` would expand), unsuffixed floating literals become float
    literals (``0.5f``), half literals casts of float ones (``((half)2.0f)``), vector
    constructors calls of the shim's ``llmfs_vec<T, N>``. Comments and string literals are left
    alone."""
    text = blank_comments(source)
    edits: list[tuple[int, int, str]] = []
    for match in _ATTRIBUTE_TEXT.finditer(text):
        edits.append((match.start(), match.end(), " " * (match.end() - match.start())))
    for match in _HALF_LITERAL.finditer(text):
        number = match.group(1)
        if not any(c in number for c in ".eE"):
            number += ".0"
        edits.append((match.start(), match.end(), f"((half){number}f)"))
    for match in _UNSUFFIXED.finditer(text):
        edits.append((match.end(), match.end(), "f"))
    for match in _VECTOR_CONSTRUCTOR.finditer(text):
        edits.append(
            (match.start(), match.end(), f"llmfs_vec<{match.group(1)}, {match.group(2)}>(")
        )
    for start, end, replacement in sorted(edits, reverse=True):
        source = source[:start] + replacement + source[end:]
    return source


_THREADGROUP_DECLARATION = re.compile(r"\bthreadgroup\b([^;{}()]*);")
_DECLARATOR = re.compile(r"^(.*?)\b([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", re.DOTALL)


def with_threadgroup_memory(source: str, kernels: Sequence[Kernel]) -> str:
    """``source`` with every ``threadgroup`` variable of a kernel body turned into a reference
    to its group's block (``auto& tile = *llmfs_threadgroup<float[64]>(0);``), which the shim
    allocates junk-filled per group. Line numbers are kept. Pointers to threadgroup memory are
    left alone (the shim defines the word away)."""
    text = blank_comments(source)
    edits: list[tuple[int, int, str]] = []
    slot = 0
    for kernel in kernels:
        if kernel.body_start < 0:
            continue
        body = text[kernel.body_start : kernel.body_start + len(kernel.body)]
        for match in _THREADGROUP_DECLARATION.finditer(body):
            declarator = match.group(1)
            if any(c in declarator for c in "*&=,"):
                continue  # a pointer or reference, or a form the lint refuses
            parts = _DECLARATOR.match(declarator.strip())
            if parts is None or not parts.group(1).strip():
                continue
            if slot >= MAX_THREADGROUP_VARIABLES:
                raise KernelArgumentError(
                    f"kernel {kernel.name}: the emulator supports at most "
                    f"{MAX_THREADGROUP_VARIABLES} threadgroup variables per source"
                )
            element, name, dims = parts.group(1).strip(), parts.group(2), parts.group(3)
            dims = "".join(dims.split())
            newlines = "\n" * match.group(0).count("\n")
            kind = f"{element}{dims}"
            replacement = (
                f"auto& {name} = *llmfs_threadgroup<{kind}>({slot}); "
                f'static_assert(sizeof({kind}) <= {MAX_THREADGROUP_BYTES}, "LLMFS-RULE '
                f"threadgroup-memory-limit: threadgroup variable '{name}' is larger than "
                f"Metal's {MAX_THREADGROUP_BYTES} bytes of threadgroup memory\");{newlines}"
            )
            start = kernel.body_start + match.start()
            edits.append((start, start + len(match.group(0)), replacement))
            slot += 1
    for start, end, replacement in sorted(edits, reverse=True):
        source = source[:start] + replacement + source[end:]
    return source


#: Threadgroup variables of a kernel body the emulator supports (slots 0..63 in the shim).
MAX_THREADGROUP_VARIABLES = 64
#: Metal's threadgroup memory per threadgroup (bytes): variables and [[threadgroup(n)]] together.
MAX_THREADGROUP_BYTES = 32768
#: The last index of Metal's threadgroup memory argument table (31 entries per encoder).
MAX_THREADGROUP_ARGUMENT_INDEX = 30


def launcher_source(source: str, kernels: Sequence[Kernel]) -> str:
    """``source`` (threadgroup variables rewritten, see :func:`with_threadgroup_memory`)
    followed by one ``extern "C"`` launcher per kernel (see the module text) and the order
    setter."""
    parts = [
        msl_as_cpp(with_threadgroup_memory(source, kernels)).rstrip("\n"),
        "",
        "// ---- llmfs emulator: generated launchers ----",
        "#if defined(LLMFS_HARNESS)",
        "// The thread running the kernel, for the harness's report of a memory fault (volatile:",
        "// only a fault handler reads them, which the optimizer cannot see).",
        "static thread_local volatile unsigned llmfs_fault_thread[3] = {0, 0, 0};",
        "static thread_local volatile int llmfs_in_kernel = 0;",
        "// How many times a thread started or resumed: the same at every point of two runs of",
        "// one launch, so the guarded harness can tell which of two runs' faults came first.",
        "static thread_local volatile unsigned long long llmfs_fault_step = 0;",
        "#define LLMFS_ENTER(ids) (llmfs_fault_thread[0] = (ids).thread_position_in_grid.x, "
        "llmfs_fault_thread[1] = (ids).thread_position_in_grid.y, "
        "llmfs_fault_thread[2] = (ids).thread_position_in_grid.z, llmfs_fault_step += 1, "
        "llmfs_in_kernel = 1)",
        "#define LLMFS_LEAVE() (llmfs_in_kernel = 0)",
        "static void llmfs_note_thread(const llmfs_ids* ids) {",
        "    llmfs_fault_thread[0] = ids->thread_position_in_grid.x;",
        "    llmfs_fault_thread[1] = ids->thread_position_in_grid.y;",
        "    llmfs_fault_thread[2] = ids->thread_position_in_grid.z;",
        "    llmfs_fault_step += 1;",
        "    llmfs_in_kernel = 1;  // a fiber resumed: the kernel runs again",
        "}",
        "#else",
        "#define LLMFS_ENTER(ids) ((void)0)",
        "#define LLMFS_LEAVE() ((void)0)",
        "#endif",
        'extern "C" __attribute__((visibility("default"))) void '
        "llmfs_set_order(int shuffled, unsigned long long seed) {\n"
        "    llmfs_order_shuffled = shuffled;\n"
        "    llmfs_order_seed = seed;\n"
        "}",
    ]
    for number, kernel in enumerate(kernels):
        args = []
        for param in kernel.parameters:
            if param.attribute == "buffer":
                if param.is_reference:
                    pointer_type = param.type_text.rstrip()[:-1] + "*"
                    args.append(f"*({pointer_type})llmfs_buffers[{param.index}]")
                else:
                    args.append(f"({param.type_text})llmfs_buffers[{param.index}]")
            elif param.attribute == "threadgroup":
                args.append(f"llmfs_threadgroup_argument<{param.type_text}>({param.index})")
            else:
                args.append(f"llmfs_pick<{param.base_type}>(llmfs_ids_.{param.attribute})")
        runner = "llmfs_run_threaded" if uses_barrier(source, kernel) else "llmfs_run_serial"
        parts.append(
            f"#line {kernel.line}\n"
            f'extern "C" __attribute__((visibility("default"))) int '
            f"llmfs_launch_{number}(void** llmfs_buffers, const unsigned* llmfs_grid, "
            f"const unsigned* llmfs_group, const unsigned* llmfs_lengths) {{\n"
            f"    uint3 llmfs_grid_ = {{llmfs_grid[0], llmfs_grid[1], llmfs_grid[2]}};\n"
            f"    uint3 llmfs_group_ = {{llmfs_group[0], llmfs_group[1], llmfs_group[2]}};\n"
            f"    llmfs_threadgroup_lengths = llmfs_lengths;\n"
            f"    auto llmfs_body_ = [&](const llmfs_ids& llmfs_ids_) {{\n"
            f"        (void)llmfs_ids_;\n"
            f"        LLMFS_ENTER(llmfs_ids_);\n"
            f"        {kernel.function}({', '.join(args)});\n"
            f"        LLMFS_LEAVE();\n"
            f"    }};\n"
            f"    return {runner}(llmfs_grid_, llmfs_group_, llmfs_body_);\n"
            f"}}"
        )
    return "\n".join(parts) + "\n"


_HARNESS_MAIN = r"""
// ---- llmfs emulator: isolated launch harness ----
// argv[1] names a manifest: "gx gy gz tx ty tz count shuffled seed", then the 32 lengths of
// the [[threadgroup(n)]] arguments, then per buffer index "bytes path"
// (path "-" for an unbound index); argv[2] is the guarded layout (see below) and argv[3] says
// whether the buffers are written back to their files after a clean run ("1") or not ("0").
// Every buffer gets its own exactly-sized block:
// * AddressSanitizer build: a malloc of exactly `bytes` bytes; the sanitizer reports any access
//   outside it (the shim flattens the address spaces in this build, so every access is checked).
// * Guarded build (LLMFS_GUARDED): the block lies between two inaccessible guard regions. Memory
//   comes in pages, so only one end of a block can touch a guard: layout "end" puts the block's
//   end on the back guard (an access past the end faults at once), layout "start" its start on
//   the front guard (an access before the start faults at once). The emulator runs a launch
//   in both layouts; the two runs do the same until the first stray access, which one of them
//   catches, and each report carries the step (thread starts and resumes) it happened at, so
//   the earlier of the two reports names the first thread that stepped outside.
#if defined(LLMFS_GUARDED)
#define LLMFS_GUARD_BYTES (64 * 1024)
static unsigned char* llmfs_starts[31];
static size_t llmfs_sizes[31];
static int llmfs_count = 0;
static int llmfs_layout_start = 0;

static void llmfs_say(const char* text) { (void)!write(2, text, strlen(text)); }

static void llmfs_say_thread() {
    if (!llmfs_in_kernel) return;
    char line[128];
    snprintf(line, sizeof line, "LLMFS-THREAD: %u %u %u\nLLMFS-STEP: %llu\n",
             llmfs_fault_thread[0], llmfs_fault_thread[1], llmfs_fault_thread[2],
             (unsigned long long)llmfs_fault_step);
    llmfs_say(line);
}

// Names the buffer nearest to the faulting address. snprintf is not formally async-signal-safe,
// but the process ends right after, with nothing else running in it that could be disturbed.
static void llmfs_on_fault(int, siginfo_t* info, void*) {
    char line[256];
    const unsigned char* at = (const unsigned char*)info->si_addr;
    int best = -1;
    long long best_offset = 0, best_distance = 0;
    for (int i = 0; i < llmfs_count; ++i) {
        if (!llmfs_starts[i]) continue;
        long long offset = (long long)(at - llmfs_starts[i]);
        long long distance = offset < 0 ? -offset : offset - (long long)llmfs_sizes[i];
        if (best < 0 || distance < best_distance) {
            best = i;
            best_offset = offset;
            best_distance = distance;
        }
    }
    if (best >= 0) {
        snprintf(line, sizeof line,
                 "LLMFS-GUARD: memory fault\nSUMMARY: guarded emulator: invalid access at "
                 "byte offset %lld of buffer %d, which has %zu bytes\n",
                 best_offset, best, llmfs_sizes[best]);
    } else {
        snprintf(line, sizeof line,
                 "LLMFS-GUARD: memory fault\nSUMMARY: guarded emulator: invalid access at %p\n",
                 info->si_addr);
    }
    llmfs_say(line);
    llmfs_say_thread();
    _exit(87);
}

static void* llmfs_alloc(int index, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = (bytes + page - 1) / page * page;
    size_t guard = (LLMFS_GUARD_BYTES + page - 1) / page * page;
    unsigned char* base = (unsigned char*)mmap(0, guard + data + guard, PROT_READ | PROT_WRITE,
                                               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == (unsigned char*)MAP_FAILED) return 0;
    mprotect(base, guard, PROT_NONE);
    mprotect(base + guard + data, guard, PROT_NONE);
    unsigned char* start = llmfs_layout_start ? base + guard : base + guard + data - bytes;
    llmfs_starts[index] = start;
    llmfs_sizes[index] = bytes;
    return start;
}
#else
#include <sanitizer/common_interface_defs.h>
static void* llmfs_alloc(int, size_t bytes) { return malloc(bytes); }

// Called by AddressSanitizer after its report, in the faulting thread: names that thread.
static void llmfs_say_thread() {
    if (!llmfs_in_kernel) return;
    fprintf(stderr, "LLMFS-THREAD: %u %u %u\n", llmfs_fault_thread[0], llmfs_fault_thread[1],
            llmfs_fault_thread[2]);
}
#endif

#if defined(LLMFS_COUNT)
// ---- counting build (clang's -fsanitize-coverage=trace-loads calls these before every load)
// Bytes each device buffer gave, barrier rounds of the group with the most, and the most
// distinct 4-byte words of threadgroup memory one thread read within its group.
#define LLMFS_NO_COUNT __attribute__((no_sanitize("coverage"), noinline))
#define LLMFS_COUNT_WORDS 8192u  /* 32 KiB of threadgroup memory */
#define LLMFS_COUNT_THREADS 1024u
static unsigned char* llmfs_count_starts[31];
static size_t llmfs_count_sizes[31];
static unsigned long long llmfs_count_bytes[31];
static int llmfs_count_buffers = 0;
static unsigned char* llmfs_count_blocks[96];
static unsigned long llmfs_count_block_bytes[96];
static unsigned llmfs_count_block_base[96];
static int llmfs_count_nblocks = 0;
static unsigned llmfs_count_words = 0;
static unsigned llmfs_count_thread = 0;
static unsigned char* llmfs_count_seen = 0;  // [thread][word] bits of the current group
static unsigned llmfs_count_rows = 0;         // threads of the group that read anything + 1
static unsigned long long llmfs_count_rounds = 0, llmfs_count_max_rounds = 0;
static unsigned long long llmfs_count_max_words = 0;

LLMFS_NO_COUNT static void llmfs_count_load(const void* address, unsigned bytes) {
    const unsigned char* at = (const unsigned char*)address;
    for (int i = 0; i < llmfs_count_buffers; ++i) {
        if (at >= llmfs_count_starts[i] && at < llmfs_count_starts[i] + llmfs_count_sizes[i]) {
            llmfs_count_bytes[i] += bytes;
            return;
        }
    }
    for (int b = 0; b < llmfs_count_nblocks; ++b) {
        const unsigned char* start = llmfs_count_blocks[b];
        if (at >= start && at < start + llmfs_count_block_bytes[b]) {
            unsigned first = llmfs_count_block_base[b] + (unsigned)((at - start) / 4);
            unsigned last = llmfs_count_block_base[b] + (unsigned)((at - start + bytes - 1) / 4);
            unsigned who = llmfs_count_thread;  // (`thread` is an address space here)
            if (who >= LLMFS_COUNT_THREADS || !llmfs_count_seen) return;
            for (unsigned w = first; w <= last && w < LLMFS_COUNT_WORDS; ++w)
                llmfs_count_seen[who * (LLMFS_COUNT_WORDS / 8) + w / 8] |=
                    (unsigned char)(1u << (w % 8));
            if (who + 1 > llmfs_count_rows) llmfs_count_rows = who + 1;
            return;
        }
    }
}
extern "C" {
LLMFS_NO_COUNT void __sanitizer_cov_load1(uint8_t* a) { llmfs_count_load(a, 1); }
LLMFS_NO_COUNT void __sanitizer_cov_load2(uint16_t* a) { llmfs_count_load(a, 2); }
LLMFS_NO_COUNT void __sanitizer_cov_load4(uint32_t* a) { llmfs_count_load(a, 4); }
LLMFS_NO_COUNT void __sanitizer_cov_load8(uint64_t* a) { llmfs_count_load(a, 8); }
LLMFS_NO_COUNT void __sanitizer_cov_load16(__int128* a) { llmfs_count_load(a, 16); }
LLMFS_NO_COUNT void __sanitizer_cov_8bit_counters_init(char*, char*) {}
}

LLMFS_NO_COUNT static void llmfs_count_on_block(void* block, unsigned long bytes) {
    if (llmfs_count_nblocks >= 96) return;
    llmfs_count_blocks[llmfs_count_nblocks] = (unsigned char*)block;
    llmfs_count_block_bytes[llmfs_count_nblocks] = bytes;
    llmfs_count_block_base[llmfs_count_nblocks] = llmfs_count_words;
    llmfs_count_words += (unsigned)((bytes + 3) / 4);
    ++llmfs_count_nblocks;
}

LLMFS_NO_COUNT static void llmfs_count_on_round(void) { ++llmfs_count_rounds; }

LLMFS_NO_COUNT static void llmfs_count_on_group_end(void) {
    for (unsigned t = 0; t < llmfs_count_rows; ++t) {
        unsigned long long words = 0;
        unsigned char* row = llmfs_count_seen + t * (LLMFS_COUNT_WORDS / 8);
        for (unsigned k = 0; k < LLMFS_COUNT_WORDS / 8; ++k) words += __builtin_popcount(row[k]);
        if (words > llmfs_count_max_words) llmfs_count_max_words = words;
        memset(row, 0, LLMFS_COUNT_WORDS / 8);
    }
    llmfs_count_rows = 0;
    if (llmfs_count_rounds > llmfs_count_max_rounds) llmfs_count_max_rounds = llmfs_count_rounds;
    llmfs_count_rounds = 0;
    llmfs_count_nblocks = 0;
    llmfs_count_words = 0;
}

LLMFS_NO_COUNT static void llmfs_count_note_thread(const llmfs_ids* ids) {
    llmfs_note_thread(ids);
    llmfs_count_thread = ids->thread_index_in_threadgroup.x;
}

LLMFS_NO_COUNT static void llmfs_count_report(void) {
    fprintf(stderr, "LLMFS-COUNTS: %llu %llu", llmfs_count_max_rounds, llmfs_count_max_words);
    for (int i = 0; i < llmfs_count_buffers; ++i) fprintf(stderr, " %llu", llmfs_count_bytes[i]);
    fprintf(stderr, "\n");
}
#endif

int main(int argc, char** argv) {
    if (argc != 4) return 64;
    FILE* manifest = fopen(argv[1], "r");
    if (!manifest) return 65;
    int write_back = argv[3][0] == '1';
#if defined(LLMFS_GUARDED)
    llmfs_layout_start = strcmp(argv[2], "start") == 0;
#endif
    unsigned grid[3], group[3];
    int count = 0, shuffled = 0;
    unsigned long long seed = 0;
    if (fscanf(manifest, "%u %u %u %u %u %u %d %d %llu", &grid[0], &grid[1], &grid[2], &group[0],
               &group[1], &group[2], &count, &shuffled, &seed) != 9 || count < 0 || count > 31)
        return 66;
    llmfs_set_order(shuffled, seed);
    unsigned lengths[32] = {0};
    for (int i = 0; i < 32; ++i) {
        if (fscanf(manifest, "%u", &lengths[i]) != 1) return 66;
    }
    void* buffers[31] = {0};
    size_t sizes[31] = {0};
    char paths[31][1024];
    for (int i = 0; i < count; ++i) {
        if (fscanf(manifest, "%zu %1023s", &sizes[i], paths[i]) != 2) return 67;
        if (paths[i][0] == '-' && paths[i][1] == 0) continue;
        buffers[i] = llmfs_alloc(i, sizes[i]);
        if (!buffers[i] && sizes[i]) return 70;
        FILE* f = fopen(paths[i], "rb");
        if (!f || fread(buffers[i], 1, sizes[i], f) != sizes[i]) return 68;
        fclose(f);
    }
    fclose(manifest);
#if defined(LLMFS_GUARDED)
    llmfs_count = count;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = llmfs_on_fault;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &action, 0);
    sigaction(SIGBUS, &action, 0);
#else
    __sanitizer_set_death_callback(llmfs_say_thread);
#endif
    llmfs_switch_hook = llmfs_note_thread;
#if defined(LLMFS_COUNT)
    for (int i = 0; i < count; ++i) {
        llmfs_count_starts[i] = (unsigned char*)buffers[i];
        llmfs_count_sizes[i] = buffers[i] ? sizes[i] : 0;
    }
    llmfs_count_buffers = count;
    llmfs_count_seen = (unsigned char*)calloc(LLMFS_COUNT_THREADS, LLMFS_COUNT_WORDS / 8);
    if (!llmfs_count_seen) return 70;
    llmfs_block_hook = llmfs_count_on_block;
    llmfs_group_end_hook = llmfs_count_on_group_end;
    llmfs_round_hook = llmfs_count_on_round;
    llmfs_switch_hook = llmfs_count_note_thread;
#endif
    int rc = LLMFS_LAUNCH(buffers, grid, group, lengths);
#if defined(LLMFS_COUNT)
    llmfs_count_on_group_end();
    llmfs_count_report();
#endif
    for (int i = 0; i < count && write_back; ++i) {
        if (!buffers[i]) continue;
        FILE* f = fopen(paths[i], "wb");
        if (!f || fwrite(buffers[i], 1, sizes[i], f) != sizes[i]) return 69;
        fclose(f);
    }
    return rc;
}
"""


# ------------------------------------------------------------------------------------------------
# Libraries
# ------------------------------------------------------------------------------------------------


class EmulatorLibrary:
    """One compiled MSL source: its kernels, callable by name with numpy buffers.

    Made by :func:`load_library`, which caches one per source text. Launches of one library are
    serialised by a lock, because the thread order is a setting of the library.
    """

    def __init__(self, source: str, *, max_threads_per_threadgroup: int | None = None) -> None:
        check_msl(source)
        self.source = source
        found = find_kernels(source)
        self.kernels = {kernel.name: kernel for kernel in found}
        #: The device's limit on threads per threadgroup this library reports (a real device
        #: may report fewer than 1,024); each pipeline's own limit is at most this.
        self.max_threads_per_threadgroup = (
            MAX_THREADS_PER_THREADGROUP
            if max_threads_per_threadgroup is None
            else max_threads_per_threadgroup
        )
        self._text = launcher_source(source, found)
        try:
            path = build(self._text, kind="so", what="the MSL source (as C++ for the emulator)")
        except KernelCompileError as error:
            raise compile_error(source, error.log) from None
        self._dll = ctypes.CDLL(str(path))
        self._lock = threading.Lock()
        self._functions: dict[str, Any] = {}  # ctypes function pointers
        self._numbers = {kernel.name: number for number, kernel in enumerate(found)}
        for number, kernel in enumerate(found):
            function = getattr(self._dll, f"llmfs_launch_{number}")
            function.argtypes = [
                ctypes.POINTER(ctypes.c_void_p),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.POINTER(ctypes.c_uint),
                ctypes.POINTER(ctypes.c_uint),
            ]
            function.restype = ctypes.c_int
            self._functions[kernel.name] = function
        self._set_order = self._dll.llmfs_set_order
        self._set_order.argtypes = [ctypes.c_int, ctypes.c_ulonglong]
        self._set_order.restype = None

    def max_total_threads_per_threadgroup(self, name: str) -> int:
        """The pipeline's ``maxTotalThreadsPerThreadgroup`` for kernel ``name``: the device's
        limit (:attr:`max_threads_per_threadgroup`), lowered by the kernel's
        ``[[max_total_threads_per_threadgroup(n)]]`` when it has one. Dispatch enforces it."""
        kernel = self.kernel(name)
        limit = self.max_threads_per_threadgroup
        if kernel.max_total_threads is not None:
            limit = min(limit, kernel.max_total_threads)
        return limit

    def kernel(self, name: str) -> Kernel:
        """The parsed kernel ``name``; raises :class:`KernelNotFoundError`."""
        try:
            return self.kernels[name]
        except KeyError:
            raise KernelNotFoundError(name, list(self.kernels)) from None

    def run(
        self,
        name: str,
        buffers: BufferArgs,
        grid: object,
        threadgroup: object | None = None,
        *,
        sanitize: bool | None = False,
        shuffle: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        threadgroup_memory: Mapping[int, int] | None = None,
    ) -> None:
        """Runs kernel ``name`` over ``grid`` threads (``dispatchThreads`` semantics).

        ``threadgroup_memory`` maps each ``[[threadgroup(n)]]`` argument's index to its length
        in bytes (``setThreadgroupMemoryLength:atIndex:``): a multiple of 16, all of them and
        the kernel's threadgroup variables together at most 32 KiB. The threadgroup size may
        not pass :meth:`max_total_threads_per_threadgroup`.

        Writes land in the bound numpy arrays. ``threadgroup`` defaults to
        :func:`default_threadgroup`. ``shuffle``: ``None`` runs groups and threads in grid
        order; an int runs them in an order shuffled from that seed (the same seed gives the
        same order). ``timeout`` (seconds, default :data:`DEFAULT_TIMEOUT_S`) bounds an isolated
        launch. ``sanitize`` chooses where the launch runs:

        * ``False``: in this process, fast, and unchecked: a kernel that reads or writes outside
          its buffers corrupts this process or kills it. For kernels known to guard every
          access (the library's own).
        * ``True``: in a subprocess under AddressSanitizer (see :meth:`run_isolated`);
          :class:`~llmfs.tensor.backends.metal.errors.MetalUnavailableError` when the compiler
          cannot build sanitized code here.
        * ``None``: in a subprocess, in the first mode of :data:`ISOLATION_MODES` whose probe
          (:func:`isolation_check`) caught every stray access here: under AddressSanitizer, or
          with guard regions around exactly-sized buffers. Safe for any kernel.

        Raises :class:`KernelArgumentError` for bad arguments, :class:`KernelMemoryError` (naming
        the kernel) for an access outside a buffer in an isolated launch, and
        :class:`KernelLaunchError` when the launch reports another failure (threads of a group
        that cannot all meet at a barrier, or an isolated launch past ``timeout``).
        """
        if not isinstance(name, str):
            raise KernelArgumentError(f"the kernel name must be a str, got {type(name).__name__}")
        if shuffle is not None and (isinstance(shuffle, bool) or not isinstance(shuffle, int)):
            raise KernelArgumentError(f"shuffle must be None or an int seed, got {shuffle!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
            raise KernelArgumentError(
                f"timeout must be a positive number of seconds, got {timeout!r}"
            )
        kernel = self.kernel(name)
        limit = self.max_total_threads_per_threadgroup(name)
        dims = as_grid(grid)
        group = (
            default_threadgroup(dims, limit, THREAD_EXECUTION_WIDTH)
            if threadgroup is None
            else as_grid(threadgroup, "threadgroup")
        )
        check_threadgroup(group, limit)
        lengths = threadgroup_lengths(kernel, threadgroup_memory)
        bound = normalize_buffers(buffers)
        check_buffers(kernel, bound)
        if sanitize:
            require_sanitizer()  # asked for by name: say so even when no thread would run
        if 0 in dims:
            return  # no threads: nothing runs, nothing to isolate
        if sanitize is None or sanitize:
            chosen = isolation_mode() == "asan" if sanitize is None else True
            self.run_isolated(
                kernel,
                bound,
                dims,
                group,
                sanitize=chosen,
                shuffle=shuffle,
                timeout=timeout,
                lengths=lengths,
            )
            return
        slots = max(bound, default=-1) + 1
        pointers = (ctypes.c_void_p * max(slots, 1))()
        for index, array in bound.items():
            pointers[index] = array.ctypes.data
        grid_arg = (ctypes.c_uint * 3)(*dims)
        group_arg = (ctypes.c_uint * 3)(*group)
        length_arg = (ctypes.c_uint * 32)(*lengths)
        with self._lock:
            self._set_order(0 if shuffle is None else 1, _seed(shuffle))
            rc = self._functions[name](pointers, grid_arg, group_arg, length_arg)
        if rc != 0:
            raise KernelLaunchError(_launch_failure(name, rc, group))

    def launch_pointers(
        self,
        name: str,
        pointers: Mapping[int, int],
        grid: Grid,
        group: Grid,
        *,
        shuffle: int | None = None,
        lengths: Sequence[int] = (0,) * 32,
    ) -> int:
        """Launches kernel ``name`` in this process on raw buffer addresses (``{index:
        address}``), with no argument checks; returns the launcher's code (0: success). For a
        stand-in of a GPU driver that binds its own memory; everything else uses :meth:`run`."""
        slots = (ctypes.c_void_p * 31)()
        for index, address in pointers.items():
            slots[index] = address
        with self._lock:
            self._set_order(0 if shuffle is None else 1, _seed(shuffle))
            return int(
                self._functions[name](
                    slots,
                    (ctypes.c_uint * 3)(*grid),
                    (ctypes.c_uint * 3)(*group),
                    (ctypes.c_uint * 32)(*lengths),
                )
            )

    def run_isolated(
        self,
        kernel: Kernel,
        bound: Mapping[int, np.ndarray],
        grid: Grid,
        group: Grid,
        *,
        sanitize: bool = True,
        shuffle: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        lengths: Sequence[int] = (0,) * 32,
    ) -> None:
        """Runs one launch as a standalone executable in a subprocess, on copies of the buffers.

        Each buffer is copied into its own exactly-sized block; writeable arrays are copied back
        after a clean run. With ``sanitize`` the executable is built with AddressSanitizer;
        without, each block lies between inaccessible guard regions and the launch runs twice,
        once with each block's end on its back guard and once with its start on its front
        guard (see the harness text). Nothing the kernel does can reach the calling process.
        Raises :class:`KernelMemoryError` with the report when an access leaves a buffer,
        :class:`KernelLaunchError` for any other failure (or a launch running past ``timeout``
        seconds, which then is stopped), and
        :class:`~llmfs.tensor.backends.metal.errors.MetalUnavailableError` when the mode asked
        for did not catch the stray accesses of :func:`isolation_check`'s probe here.
        """
        require_isolation("asan" if sanitize else "guarded")
        self._launch_isolated(
            kernel,
            bound,
            grid,
            group,
            sanitize=sanitize,
            shuffle=shuffle,
            timeout=timeout,
            lengths=lengths,
        )

    def count_accesses(
        self,
        name: str,
        buffers: BufferArgs,
        grid: object,
        threadgroup: object,
        *,
        shuffle: int | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        threadgroup_memory: Mapping[int, int] | None = None,
    ) -> AccessCounts:
        """Runs kernel ``name`` once, isolated (guarded build, as :meth:`run_isolated` without
        the sanitizer), with every load instruction counted, and returns what it read
        (:class:`AccessCounts`). Writes land in the bound arrays as with :meth:`run`. The count
        is of load instructions as compiled (optimised): on a GPU, caches absorb many of them,
        so it measures what a kernel asks of memory, not its traffic. Raises what :meth:`run`
        raises, and :class:`MetalUnavailableError` where the compiler cannot instrument loads
        (clang's ``-fsanitize-coverage=trace-loads``, clang 14 and later)."""
        kernel = self.kernel(name)
        dims = as_grid(grid)
        group = as_grid(threadgroup, "threadgroup")
        check_threadgroup(group, self.max_total_threads_per_threadgroup(name))
        lengths = threadgroup_lengths(kernel, threadgroup_memory)
        bound = normalize_buffers(buffers)
        check_buffers(kernel, bound)
        if find_compiler().family != "clang":
            raise MetalUnavailableError(
                "counting a kernel's loads needs clang (its -fsanitize-coverage=trace-loads)"
            )
        if 0 in dims:
            return AccessCounts({index: 0 for index in bound}, 0, 0)
        require_isolation("guarded")  # the learner's kernel runs here too: only where it holds
        counts = self._launch_isolated(
            kernel,
            bound,
            dims,
            group,
            sanitize=False,
            shuffle=shuffle,
            timeout=timeout,
            lengths=lengths,
            counting=True,
        )
        assert counts is not None
        return counts

    def _launch_isolated(
        self,
        kernel: Kernel,
        bound: Mapping[int, np.ndarray],
        grid: Grid,
        group: Grid,
        *,
        sanitize: bool,
        shuffle: int | None,
        timeout: float,
        lengths: Sequence[int],
        symbolize: bool = True,
        counting: bool = False,
    ) -> AccessCounts | None:
        """:meth:`run_isolated` without the check that the mode works (the probe uses it, with
        ``symbolize=False``: it needs to know that a stray access was reported, not its line,
        and naming the line starts a symbolizer for every report). With ``counting``, the
        build counts every load and the counts of the last run are returned
        (:meth:`count_accesses`)."""
        mode = "" if sanitize else "#define LLMFS_GUARDED 1\n"
        mode += "#define LLMFS_COUNT 1\n" if counting else ""
        text = (
            f"#define LLMFS_HARNESS 1\n{mode}#line 1\n{self._text}"
            f"#define LLMFS_LAUNCH llmfs_launch_{self._numbers[kernel.name]}\n{_HARNESS_MAIN}"
        )
        what = "the sanitized emulator build" if sanitize else "the guarded emulator build"
        extra = COUNTING_FLAGS if counting else ()
        try:
            exe = build(text, kind="exe", what=what, sanitize=sanitize, extra=extra)
        except KernelCompileError as error:
            raise compile_error(self.source, error.log) from None
        with tempfile.TemporaryDirectory(prefix="llmfs-isolated-run-") as tmp:
            folder = Path(tmp)
            count = max(bound, default=-1) + 1
            order = (0 if shuffle is None else 1, _seed(shuffle))
            lines = [" ".join(str(v) for v in (*grid, *group, count, *order))]
            lines.append(" ".join(str(v) for v in lengths))
            for index in range(count):
                array = bound.get(index)
                if array is None:
                    lines.append("0 -")
                    continue
                path = folder / f"buffer{index}.bin"
                path.write_bytes(array.tobytes())
                lines.append(f"{array.nbytes} {path}")
            manifest = folder / "manifest.txt"
            manifest.write_text("\n".join(lines) + "\n")
            env = dict(os.environ)
            env["ASAN_OPTIONS"] = (
                f"detect_leaks=0:exitcode=86:abort_on_error=0:symbolize={int(symbolize)}"
            )
            # AddressSanitizer sees both ends of every block in one run; the guarded build sees
            # one end per run (see the harness text), so it runs once per layout, the results
            # coming back from the last.
            layouts = ("asan",) if sanitize else ("end", "start")
            deadline = time.monotonic() + timeout
            faults: list[tuple[int, str]] = []
            for number, layout in enumerate(layouts):
                last = number == len(layouts) - 1
                result = _run_harness(
                    [str(exe), str(manifest), layout, "1" if last else "0"],
                    env,
                    max(deadline - time.monotonic(), 0.001),
                    kernel.name,
                    timeout,
                )
                if "ERROR: AddressSanitizer" in result.stderr or "LLMFS-GUARD:" in result.stderr:
                    faults.append((_fault_step(result.stderr), result.stderr))
                    continue
                if result.returncode < 0 and not sanitize:
                    # A fault the guard handler did not see (another signal): still memory-related
                    # in practice, but say exactly what happened.
                    raise KernelLaunchError(
                        f"isolated launch of kernel {kernel.name} was killed by signal "
                        f"{-result.returncode}: {result.stderr.strip()[-2000:]}"
                    )
                if faults:
                    continue  # a clean run after a caught one: the caught one is the report
                if result.returncode in (2, 3, 4, 5, 6):
                    raise KernelLaunchError(_launch_failure(kernel.name, result.returncode, group))
                if result.returncode != 0:
                    raise KernelLaunchError(
                        f"isolated launch of kernel {kernel.name} failed with code "
                        f"{result.returncode}: {result.stderr.strip()[-2000:]}"
                    )
            if faults:
                raise KernelMemoryError(kernel.name, min(faults, key=lambda fault: fault[0])[1])
            for index, array in bound.items():
                if array.flags.writeable and array.nbytes:
                    data = (folder / f"buffer{index}.bin").read_bytes()
                    array.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, dtype=np.uint8)
            return _access_counts(result.stderr) if counting else None


#: clang flags of the counting build: a call before every load (with its address and width).
COUNTING_FLAGS = ("-fsanitize-coverage=inline-8bit-counters,trace-loads",)


@dataclass(frozen=True)
class AccessCounts:
    """What one counted launch read (:meth:`EmulatorLibrary.count_accesses`).

    ``bytes_read``: buffer index -> bytes its load instructions read from that buffer (a
    ``float`` load is 4). ``barrier_rounds``: the most times the threads of one threadgroup
    passed a ``threadgroup_barrier`` together. ``threadgroup_words``: the most distinct 4-byte
    words of threadgroup memory one thread read within its group (a thread reading all of a
    16-float array reads 16)."""

    bytes_read: dict[int, int]
    barrier_rounds: int
    threadgroup_words: int

    def values_read(self, index: int, width: int = 4) -> int:
        """Values of ``width`` bytes read from buffer ``index`` (bytes / width)."""
        return self.bytes_read.get(index, 0) // width


def _access_counts(stderr: str) -> AccessCounts:
    match = re.search(r"^LLMFS-COUNTS: ([0-9 ]+)$", stderr, re.MULTILINE)
    if match is None:
        raise KernelLaunchError("the counting launch reported no counts")
    numbers = [int(v) for v in match.group(1).split()]
    return AccessCounts(dict(enumerate(numbers[2:])), numbers[0], numbers[1])


def _run_harness(
    args: list[str], env: Mapping[str, str], limit: float, name: str, timeout: float
) -> subprocess.CompletedProcess[str]:
    """One run of an isolated launch's executable, in its own session so that a run past
    ``limit`` seconds is stopped with everything it started."""
    with subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(env),
        start_new_session=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise KernelLaunchError(
                f"isolated launch of kernel {name} ran past its {timeout:g} s timeout "
                f"and was stopped (an endless loop, or a barrier some threads never reach?)"
            ) from None
    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)


def _fault_step(report: str) -> int:
    """The step (thread starts and resumes) a guarded run's fault happened at; AddressSanitizer's
    reports, which come from a single run, count as step 0."""
    found = re.search(r"^LLMFS-STEP: (\d+)$", report, re.MULTILINE)
    return int(found.group(1)) if found else 0


def _seed(shuffle: int | None) -> int:
    return 0 if shuffle is None else shuffle % 2**64


def _launch_failure(name: str, rc: int, group: Grid) -> str:
    """The message for a launcher's non-zero return code."""
    if rc == 2:
        return (
            f"kernel {name} called threadgroup_barrier from code the emulator did not see as a "
            f"barrier user; call it directly in the kernel body"
        )
    if rc == 4:
        return (
            f"kernel {name}: the threads of a threadgroup did not all reach threadgroup_barrier "
            f"(some returned while others waited at a barrier, e.g. an early return before "
            f"it). On a GPU this hangs or corrupts threadgroup memory: every thread of a group "
            f"must reach every barrier, so guard the work, not the barrier"
        )
    if rc == 5:
        return (
            f"kernel {name}: the lanes of a simdgroup waited at different places (some at a "
            f"simdgroup function, others at threadgroup_barrier) and could not go on; on a "
            f"GPU this hangs: let every lane reach the same calls"
        )
    if rc == 6:
        return (
            f"kernel {name} [threadgroup-memory-limit]: its threadgroup variables and "
            f"[[threadgroup(n)]] arguments together pass Metal's {MAX_THREADGROUP_BYTES} bytes "
            f"of threadgroup memory per threadgroup"
        )
    return (
        f"kernel {name}: the emulator could not allocate the stacks of a {group} threadgroup's "
        f"threads (code {rc}); use a smaller threadgroup"
    )


def threadgroup_lengths(
    kernel: Kernel | None,
    lengths: Mapping[int, int] | None,
    *,
    name: str | None = None,
    static: int = 0,
    limit: int = MAX_THREADGROUP_BYTES,
) -> list[int]:
    """The 32 lengths (bytes) the launcher gives the ``[[threadgroup(n)]]`` arguments.

    Every argument the kernel declares needs a length; each is a multiple of 16 (Metal's
    rule for ``setThreadgroupMemoryLength``) and together with ``static`` (the kernel's own
    threadgroup variables, where the caller knows them before the launch, as Metal's
    ``staticThreadgroupMemoryLength``) at most ``limit`` (:data:`MAX_THREADGROUP_BYTES`, or the
    device's ``maxThreadgroupMemoryLength``); an index the kernel does not declare is refused.
    ``kernel=None`` (a kernel Metal compiled that msl.py cannot describe, called ``name``)
    checks the lengths and indices (0..30, Metal's threadgroup argument table) only. Raises
    :class:`KernelArgumentError` naming the argument. The Metal path and the emulator share
    this check, so a launch is refused the same way on both.
    """
    given = dict(lengths or {})
    label = kernel.name if kernel is not None else name
    declared = kernel.threadgroup_arguments if kernel is not None else None
    out = [0] * 32
    for index, value in given.items():
        if declared is None:
            if (
                isinstance(index, bool)
                or not isinstance(index, int | np.integer)
                or not (0 <= index <= MAX_THREADGROUP_ARGUMENT_INDEX)
            ):
                raise KernelArgumentError(
                    f"kernel {label}: threadgroup_memory index {index!r} must be an int from 0 "
                    f"to {MAX_THREADGROUP_ARGUMENT_INDEX} (Metal's threadgroup argument table)"
                )
        elif index not in declared:
            raise KernelArgumentError(
                f"kernel {label}: threadgroup_memory gives index {index!r} a length but "
                f"the kernel declares no [[threadgroup({index})]] argument (declared: "
                f"{sorted(declared) or 'none'})"
            )
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise KernelArgumentError(
                f"kernel {label}: threadgroup_memory[{index}] must be a byte count, got {value!r}"
            )
        if value <= 0 or value % 16:
            raise KernelArgumentError(
                f"kernel {label}: threadgroup_memory[{index}] = {value} bytes; Metal needs "
                f"a positive multiple of 16"
            )
        out[int(index)] = int(value)
    for index, param in sorted((declared or {}).items()):
        if index not in given:
            raise KernelArgumentError(
                f"kernel {label}: [[threadgroup({index})]] argument {param.name!r} has no "
                f"length; pass threadgroup_memory={{{index}: bytes}}"
            )
    if sum(out) + static > limit:
        variables = f" and its threadgroup variables {static} more" if static else ""
        raise KernelArgumentError(
            f"kernel {label} [threadgroup-memory-limit]: threadgroup_memory asks for "
            f"{sum(out)} bytes{variables}; Metal allows {limit} per threadgroup"
        )
    return out


# One clang diagnostic: `kernel.metal:12:5: error: message`.
_DIAGNOSTIC = re.compile(r"^[^\n:]*:(\d+):(\d+): (error|fatal error|note): (.*)$", re.MULTILINE)
#: How a compiler error reads, and the rule (with what to tell the learner) it breaks.
_COMPILER_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"LLMFS-RULE ([\w-]+): (.*?)\"?$"),
        "",
        "",
    ),
    (
        re.compile(r"address.space|address_space\(|LLMFS_(?:DEVICE|CONSTANT|THREADGROUP)"),
        "address-space-mismatch",
        "pointers and references of different address spaces (device, constant, threadgroup, "
        "thread) do not convert into each other",
    ),
    (
        re.compile(r"variable length array"),
        "no-variable-length-array",
        "an array's size must be a compile-time constant in Metal (no variable-length arrays)",
    ),
    (
        re.compile(r"read-only variable is not assignable|cannot assign to .*const"),
        "constant-is-read-only",
        "a write through something read-only (constant memory or a const value)",
    ),
)


def compile_error(source: str, log: str) -> KernelLintError:
    """The llmfs error for a failed emulator build: each compiler error mapped to the rule it
    breaks and its source line (an error in generated code points at the kernel's line), the
    compiler's text kept in ``compiler_log``. An error no rule names is reported as rule
    ``compiles`` with the compiler's one-line message."""
    lines = source.count("\n") + 1
    problems: list[Problem] = []
    # Each error with the notes after it (the candidates clang tried say why a call failed).
    errors: list[tuple[int, str, str]] = []
    for match in _DIAGNOSTIC.finditer(log):
        if match.group(3) == "note":
            if errors:
                line, message, notes = errors[-1]
                errors[-1] = (line, message, f"{notes}\n{match.group(4)}")
            continue
        errors.append((int(match.group(1)), match.group(4).strip(), ""))
    for line, message, notes in errors:
        if line > lines:
            line = 1
        for pattern, rule, explanation in _COMPILER_RULES:
            found = pattern.search(message)
            why = ""
            if found is None and rule:
                # A failed call: the note on the candidate says why (an address space).
                note = next((n for n in notes.splitlines() if pattern.search(n)), None)
                if note is not None:
                    found = pattern.search(note)
                    why = f"; {_plain(note)}"
            if found is None:
                continue
            if not rule:  # the shim's own static_assert names its rule
                problems.append(Problem(line, found.group(1), found.group(2)))
            else:
                problems.append(Problem(line, rule, f"{explanation} ({_plain(message)}{why})"))
            break
        else:
            problems.append(Problem(line, "compiles", _plain(message)))
    if not problems:
        problems.append(Problem(1, "compiles", "the emulator's compiler refused the source"))
    unique = sorted(set(problems))
    return KernelLintError(unique, compiler_log=log)


def _plain(message: str) -> str:
    """A compiler message in MSL's words: the shim's spellings of the address spaces and
    vector constructors turned back into MSL's."""
    message = re.sub(r"__attribute__\(\(address_space\(1\)\)\)\s*", "device ", message)
    message = re.sub(r"__attribute__\(\(address_space\(2\)\)\)\s*", "constant ", message)
    message = re.sub(r"__attribute__\(\(address_space\(3\)\)\)\s*", "threadgroup ", message)
    message = re.sub(r"LLMFS_DEVICE\s*", "device ", message)
    message = re.sub(r"LLMFS_CONSTANT\s*", "constant ", message)
    message = re.sub(r"LLMFS_THREADGROUP\s*", "threadgroup ", message)
    message = re.sub(r"llmfs_vec<(\w+), (\d)>", r"\1\2", message)
    for number, space in ((1, "device"), (2, "constant"), (3, "threadgroup")):
        message = re.sub(rf"address space '?{number}'?", f"the {space} address space", message)
    message = message.replace("generic address space", "thread address space")
    message = message.replace("const constant", "constant")
    return re.sub(r"\s*\[-W[^\]]*\]", "", message)


#: The isolation modes of an isolated launch, in the order :func:`isolation_mode` prefers them:
#: ``"asan"`` (AddressSanitizer: exact reports, naming the line) and ``"guarded"`` (guard pages
#: around each buffer, two runs: reports name the buffer and the byte offset).
ISOLATION_MODES = ("asan", "guarded")

#: The probe kernel of :func:`isolation_check`: thread 0 of a one-thread launch makes the access
#: ``plan`` asks for, through a ``device`` or ``constant`` pointer, at element ``plan[1]``.
_PROBE_SOURCE = """#include <metal_stdlib>
using namespace metal;

kernel void stray(device float* data [[buffer(0)]],
                  constant float* table [[buffer(1)]],
                  device float* out [[buffer(2)]],
                  constant int* plan [[buffer(3)]],
                  uint gid [[thread_position_in_grid]]) {
    if (gid != 0) {
        return;
    }
    int at = plan[1];
    if (plan[0] == 0) {
        out[0] = data[at];
    } else if (plan[0] == 1) {
        data[at] = 7.0f;
    } else {
        out[0] = table[at];
    }
}
"""
_PROBE_DATA, _PROBE_TABLE = 5, 3  # elements: 20 and 12 bytes, neither a whole page nor granule
#: (what the probe does, plan) for every stray access a mode must catch.
_PROBE_CASES = (
    ("a device read one element past the end", (0, _PROBE_DATA)),
    ("a device read one element before the start", (0, -1)),
    ("a device write one element past the end", (1, _PROBE_DATA)),
    ("a device write one element before the start", (1, -1)),
    ("a constant read one element past the end", (2, _PROBE_TABLE)),
    ("a constant read one element before the start", (2, -1)),
)


@functools.cache
def isolation_check(mode: str) -> str:
    """Why isolation ``mode`` (one of :data:`ISOLATION_MODES`) cannot be trusted here, or ``""``
    when it can: the real shim and harness, built in that mode, run the probe kernel once per
    stray access of :data:`_PROBE_CASES` (reads and writes past either end of a ``device``
    buffer, reads past either end of a ``constant`` one) and must report every one as a
    :class:`KernelMemoryError`, and an in-bounds run must come back clean. Checked once per
    process and mode. A compiler, runtime or platform that silently lets an access through
    (AddressSanitizer, for one, skips accesses through non-default address spaces) fails here,
    and the mode is then never used."""
    if mode not in ISOLATION_MODES:
        raise KernelArgumentError(f"isolation mode must be one of {ISOLATION_MODES}, got {mode!r}")
    sanitize = mode == "asan"
    if sanitize and not sanitizer_available():
        return f"{find_compiler().path} cannot build and run AddressSanitizer executables here"
    library = load_library(_PROBE_SOURCE)
    kernel = library.kernel("stray")
    missed: list[str] = []

    def launch(plan: tuple[int, int]) -> dict[int, np.ndarray]:
        buffers = {
            0: np.arange(_PROBE_DATA, dtype=np.float32),
            1: np.arange(_PROBE_TABLE, dtype=np.float32),
            2: np.zeros(1, dtype=np.float32),
            3: np.array(plan, dtype=np.int32),
        }
        library._launch_isolated(
            kernel,
            buffers,
            (1, 1, 1),
            (1, 1, 1),
            sanitize=sanitize,
            shuffle=None,
            timeout=DEFAULT_TIMEOUT_S,
            lengths=(0,) * 32,
            symbolize=False,
        )
        return buffers

    try:
        if launch((0, _PROBE_DATA - 1))[2][0] != _PROBE_DATA - 1:
            return f"the {mode} build of the probe kernel returned a wrong value"
        for what, plan in _PROBE_CASES:
            try:
                launch(plan)
            except KernelMemoryError:
                continue
            missed.append(what)
    except (KernelCompileError, KernelLintError, KernelLaunchError, OSError) as error:
        return f"the {mode} build of the probe kernel does not run here ({error})"
    if missed:
        return f"the {mode} build let {', '.join(missed)} through unreported"
    return ""


def isolation_mode() -> str:
    """The isolation mode ``sanitize=None`` uses: the first of :data:`ISOLATION_MODES` whose
    :func:`isolation_check` passes. Raises
    :class:`~llmfs.tensor.backends.metal.errors.MetalUnavailableError` naming each mode's
    failure when none does: a launch that could not report a stray access is never made."""
    reasons = []
    for mode in ISOLATION_MODES:
        reason = isolation_check(mode)
        if not reason:
            return mode
        reasons.append(f"{mode}: {reason}")
    raise MetalUnavailableError(
        f"no isolated launch mode catches an out-of-bounds access here ({'; '.join(reasons)})"
    )


def require_isolation(mode: str) -> None:
    """Raises :class:`~llmfs.tensor.backends.metal.errors.MetalUnavailableError` unless isolation
    ``mode`` passed its :func:`isolation_check` here."""
    reason = isolation_check(mode)
    if reason:
        other = "sanitize=None isolates the launch in a mode that works here instead"
        raise MetalUnavailableError(
            f"the {'AddressSanitizer' if mode == 'asan' else 'guarded'} isolated launch cannot "
            f"be trusted with {find_compiler().path} here: {reason}; {other}"
        )


def require_sanitizer() -> None:
    """Raises :class:`~llmfs.tensor.backends.metal.errors.MetalUnavailableError` unless the
    compiler builds AddressSanitizer code here that catches stray accesses (see
    :func:`isolation_check`)."""
    require_isolation("asan")


_LIBRARIES: dict[tuple[str, int | None], EmulatorLibrary] = {}
_LIBRARIES_LOCK = threading.Lock()


def load_library(source: str, *, max_threads_per_threadgroup: int | None = None) -> EmulatorLibrary:
    """The compiled library for ``source`` (compiled on first use, then reused in-process; the
    disk cache makes later processes skip the compiler too).

    Raises :class:`~llmfs.tensor.backends.metal.errors.KernelLintError`,
    :class:`~llmfs.tensor.backends.metal.errors.KernelCompileError` or
    :class:`~llmfs.tensor.backends.metal.errors.MetalUnavailableError`.
    """
    key = (source, max_threads_per_threadgroup)
    with _LIBRARIES_LOCK:
        library = _LIBRARIES.get(key)
        if library is None:
            library = EmulatorLibrary(
                source, max_threads_per_threadgroup=max_threads_per_threadgroup
            )
            _LIBRARIES[key] = library
        return library


def is_available() -> bool:
    """True when a C++ compiler for the emulator runs here."""
    try:
        find_compiler()
    except MetalUnavailableError:
        return False
    return True


__all__ = [
    "COUNTING_FLAGS",
    "DEFAULT_TIMEOUT_S",
    "ELEMENT_DTYPES",
    "ISOLATION_MODES",
    "MAX_THREADGROUP_ARGUMENT_INDEX",
    "MAX_THREADGROUP_BYTES",
    "MAX_THREADGROUP_VARIABLES",
    "MAX_THREADS_PER_THREADGROUP",
    "THREAD_EXECUTION_WIDTH",
    "AccessCounts",
    "EmulatorLibrary",
    "as_grid",
    "check_buffers",
    "check_threadgroup",
    "compile_error",
    "default_threadgroup",
    "is_available",
    "isolation_check",
    "isolation_mode",
    "launcher_source",
    "load_library",
    "msl_as_cpp",
    "normalize_buffers",
    "require_isolation",
    "require_sanitizer",
    "threadgroup_lengths",
    "uses_barrier",
    "with_threadgroup_memory",
    "writes",
]
