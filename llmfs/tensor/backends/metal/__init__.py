"""The Metal backend and its CPU emulator: one set of MSL kernels, two ways to run them.

* ``metal`` (macOS with a Metal device, ``pip install "llmfs[metal]"``): the kernels in
  ``kernels/*.metal`` are compiled at run time by Metal (fast math off) and dispatched through
  PyObjC; see :mod:`~llmfs.tensor.backends.metal.device`.
* ``metal-emulator`` (anywhere with a C++ compiler): the SAME source text is compiled as C++ with
  a shim ``metal_stdlib`` header and run on the CPU; see
  :mod:`~llmfs.tensor.backends.metal.emulator`.

User-facing helpers: :func:`kernel_source` (the MSL an op runs, for notebooks),
:func:`run_kernel` (compile and run your own kernel on either), :func:`gpu_ops` (which ops run on
kernels; everything else falls back to the numpy backend), :func:`is_available` and
:func:`lint_msl`. A matmul kernel of your own can serve either backend's float32 matmuls for a
``with`` block: ``get_backend("metal-emulator").matmul_kernel(source, name, tile=8)`` (the
contract is :class:`~llmfs.tensor.backends.metal.ops.MatmulKernel`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from llmfs.tensor.backends.metal import device, emulator
from llmfs.tensor.backends.metal.errors import (
    KernelArgumentError,
    KernelCompileError,
    KernelLaunchError,
    KernelLintError,
    KernelMemoryError,
    KernelNotFoundError,
    MetalDTypeError,
    MetalError,
    MetalUnavailableError,
)
from llmfs.tensor.backends.metal.lint import check_msl, lint_msl
from llmfs.tensor.backends.metal.ops import OP_FAMILY, EmulatorExecutor, Strided, kernel_source

#: The executors :func:`run_kernel` accepts.
EXECUTORS = ("metal", "metal-emulator")


def is_available() -> bool:
    """True only on macOS with PyObjC's Metal module and a Metal device."""
    return device.is_available()


def emulator_available() -> bool:
    """True when the emulator's C++ compiler runs here."""
    return emulator.is_available()


def gpu_ops() -> tuple[str, ...]:
    """The op names that run on Metal kernels (sorted). Every other op of the Metal backends
    runs on the numpy backend; :func:`numpy_fallbacks` lists those with the reason."""
    return tuple(sorted(OP_FAMILY))


def numpy_fallbacks() -> dict[str, str]:
    """What the ``metal`` and ``metal-emulator`` backends hand to the numpy backend, and why."""
    # The backend classes need the Tensor machinery; this package loads them on first use only.
    from llmfs.tensor.backends.metal.backend import numpy_fallbacks as listing

    return listing()


def __getattr__(name: str) -> object:
    # The registry loads MetalBackend / MetalEmulatorBackend from here; importing them lazily
    # keeps `import llmfs.tensor.backends.metal` light (no Tensor machinery needed for kernels).
    if name in ("MetalBackend", "MetalEmulatorBackend"):
        # Loaded on first use: the backend classes need the Tensor machinery (see above).
        from llmfs.tensor.backends.metal import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def executor(name: str) -> object:
    """The executor called ``name`` (``"metal"`` or ``"metal-emulator"``).

    Raises :class:`MetalUnavailableError` saying why when it cannot run here.
    """
    if name == "metal-emulator":
        if not emulator.is_available():
            emulator.find_compiler()  # raises with the reason and what to install
        return EmulatorExecutor()
    if name == "metal":
        return device.default_device()
    raise MetalError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")


def run_kernel(
    source: str,
    name: str,
    buffers: Sequence[np.ndarray | None] | Mapping[int, np.ndarray],
    grid: int | Sequence[int],
    threadgroup: Sequence[int] | None = None,
    *,
    backend: str | None = None,
    sanitize: bool | None = None,
    shuffle: int | None = None,
    timeout: float = emulator.DEFAULT_TIMEOUT_S,
    threadgroup_memory: Mapping[int, int] | None = None,
) -> None:
    """Compiles MSL ``source`` and runs kernel ``name`` over ``grid`` threads.

    ``buffers[i]`` (numpy arrays, C-contiguous) is bound to ``[[buffer(i)]]``; a mapping binds
    explicit indices. Small parameters go in one-element arrays or numpy scalars
    (``np.uint32(n)``). The kernel's writes land in the arrays. ``grid`` follows
    ``dispatchThreads``: the exact thread count per dimension (edge threadgroups are partial);
    ``threadgroup`` defaults to Metal's usual choice. ``backend`` is ``"metal"``,
    ``"metal-emulator"``, or ``None`` for Metal when available, else the emulator.

    On the emulator a kernel of yours can never corrupt or crash the calling process: by default
    (``sanitize=None``) it runs in a subprocess on copies of the buffers, under AddressSanitizer
    or between guard regions, whichever first passed its probe here (the emulator's
    ``isolation_check``: a probe kernel's reads and writes past either end of a buffer must all
    be reported, else the mode is never used), and an access outside a buffer raises
    :class:`KernelMemoryError` naming the kernel and the first thread outside.
    ``sanitize=True`` insists on AddressSanitizer (its report says which line and which
    buffer). ``timeout`` (seconds,
    default 30) stops an isolated launch that runs longer (an endless loop).
    ``threadgroup_memory`` gives each ``[[threadgroup(n)]]`` argument its length in bytes
    (``{n: bytes}``, multiples of 16, at most 32 KiB per threadgroup with the kernel's own
    threadgroup variables; on a Mac, the device's ``maxThreadgroupMemoryLength``), on both
    backends and checked the same way (``setThreadgroupMemoryLength:atIndex:`` on a Mac).

    The emulator also refuses to hide what a GPU does not promise: threadgroup memory starts
    out as junk (NaN floats) in every launch, ``shuffle=<seed>`` runs the threads in a shuffled
    order (a kernel whose result depends on thread order then changes), and threads of a group
    that cannot all meet at a ``threadgroup_barrier`` fail the launch instead of hanging.
    ``sanitize=False`` runs in this process: much faster, but UNSAFE -- a missing bounds guard
    then silently overwrites other memory or kills Python. Use it only for kernels that guard
    every access (as the library's own kernels, which always run that way, do). On a Mac
    (``backend="metal"``) the kernel runs on the GPU, outside this process, and ``sanitize``
    must be ``None`` or ``False``; Xcode's Metal validation layer checks accesses there.

    Raises :class:`KernelLintError`, :class:`KernelCompileError`, :class:`KernelNotFoundError`,
    :class:`KernelArgumentError`, :class:`KernelMemoryError`, :class:`KernelLaunchError`,
    :class:`MetalUnavailableError`.
    """
    if not isinstance(source, str):
        raise KernelArgumentError(
            f"source must be the kernel's MSL text (a str), got {type(source).__name__}"
        )
    if not isinstance(name, str):
        raise KernelArgumentError(
            f"name must be the kernel function's name (a str), got {type(name).__name__}"
        )
    if buffers is None:
        raise KernelArgumentError(
            "buffers is None: pass a list of numpy arrays (buffers[i] binds [[buffer(i)]])"
        )
    chosen = backend or ("metal" if is_available() else "metal-emulator")
    if chosen == "metal-emulator":
        emulator.load_library(source).run(
            name,
            buffers,
            grid,
            threadgroup,
            sanitize=sanitize,
            shuffle=shuffle,
            timeout=timeout,
            threadgroup_memory=threadgroup_memory,
        )
        return
    if chosen == "metal":
        if sanitize or shuffle is not None:
            raise KernelArgumentError(
                "sanitize=True and shuffle need the emulator (backend='metal-emulator'); on a "
                "Mac, Xcode's Metal validation layer plays that role"
            )
        device.default_device().run_kernel(
            source, name, buffers, grid, threadgroup, threadgroup_memory=threadgroup_memory
        )
        return
    raise MetalError(f"unknown backend {chosen!r} for run_kernel; choose one of {EXECUTORS}")


__all__ = [
    "EXECUTORS",
    "EmulatorExecutor",
    "KernelArgumentError",
    "KernelCompileError",
    "KernelLaunchError",
    "KernelLintError",
    "KernelMemoryError",
    "KernelNotFoundError",
    "MetalBackend",
    "MetalDTypeError",
    "MetalEmulatorBackend",
    "MetalError",
    "MetalUnavailableError",
    "Strided",
    "check_msl",
    "emulator_available",
    "executor",
    "gpu_ops",
    "is_available",
    "kernel_source",
    "lint_msl",
    "numpy_fallbacks",
    "run_kernel",
]
