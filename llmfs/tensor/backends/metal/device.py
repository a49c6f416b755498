"""The real Metal path: device, library, pipeline, buffers, encoder, dispatch, wait, read-back.

Written against PyObjC's Metal bindings (``pip install "llmfs[metal]"`` on macOS); ``Metal`` is
imported lazily, so this module imports everywhere and :func:`is_available` is simply False off
macOS. This path has not been run in llmfs's CI (no Mac is available there); the tests marked
``metal`` exercise it on a Mac (``pytest -m metal``).

Memory. Apple GPUs share memory with the CPU, so results are allocated as shared-storage
``MTLBuffer`` objects and numpy views their ``contents()`` without copying
(:meth:`MetalDevice.empty`); the numpy array's base object holds the buffer, so a Tensor whose
storage is such an array keeps the buffer alive. An input array is bound in place when it is one
of these buffers; otherwise it is wrapped without a copy when its address and length are
page-aligned (16 KiB), and copied once when not. Small read-only parameters go by
``setBytes``.

Dispatch follows ``dispatchThreads`` with the threadgroup sized from the pipeline's
``threadExecutionWidth`` and ``maxTotalThreadsPerThreadgroup``. Every launch commits its command
buffer and waits for it (``waitUntilCompleted``) before returning, so the CPU never reads a buffer
the GPU is still writing; a failed command buffer raises with Metal's error text.
"""

from __future__ import annotations

import functools
import hashlib
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from llmfs.tensor.backends.metal.emulator import (
    BufferArgs,
    as_grid,
    check_buffers,
    check_threadgroup,
    default_threadgroup,
    normalize_buffers,
    writes,
)
from llmfs.tensor.backends.metal.errors import (
    KernelCompileError,
    KernelLaunchError,
    KernelNotFoundError,
    MetalUnavailableError,
)
from llmfs.tensor.backends.metal.lint import check_msl
from llmfs.tensor.backends.metal.msl import Kernel, find_kernels

#: Apple Silicon's page size: newBufferWithBytesNoCopy needs address and length aligned to it.
PAGE_SIZE = 16384

#: Largest parameter passed with setBytes instead of a buffer (Metal's documented limit is 4 KiB).
SET_BYTES_LIMIT = 4096

#: MTLCommandBufferStatusError.
_STATUS_ERROR = 5

#: Part of the library cache key: the compile options used below.
_OPTIONS_TAG = "mathMode=safe"


def _import_metal() -> Any:
    """The PyObjC ``Metal`` module, or ``None`` off macOS or without pyobjc-framework-Metal."""
    if sys.platform != "darwin":
        return None
    try:
        import Metal  # type: ignore[import-not-found]
    except ImportError:
        return None
    return Metal


def unavailable_reason() -> str | None:
    """Why the ``metal`` backend cannot run here, or ``None`` when it can."""
    if sys.platform != "darwin":
        return f"Metal needs macOS; this is {sys.platform}"
    metal = _import_metal()
    if metal is None:
        return (
            "PyObjC's Metal bindings are not installed (pip install 'llmfs[metal]' installs "
            "pyobjc-framework-Metal)"
        )
    if metal.MTLCreateSystemDefaultDevice() is None:
        return "MTLCreateSystemDefaultDevice() found no Metal device"
    return None


def is_available() -> bool:
    """True only on macOS with the bindings installed and a Metal device present."""
    try:
        return unavailable_reason() is None
    except Exception:  # any failure of the probe means "not available"
        return False


class _SharedAllocation:
    """Owner of one shared-storage MTLBuffer, exposed to numpy by ``__array_interface__``.

    Every numpy array made from it has this object at the end of its ``base`` chain, so the
    buffer lives as long as any array (or Tensor storage) that views it.
    """

    def __init__(self, buffer: Any, nbytes: int) -> None:
        self.buffer = buffer
        self.nbytes = nbytes
        # contents() is a PyObjC varlist; as_buffer gives a writable memoryview of the bytes.
        self._memory = buffer.contents().as_buffer(nbytes)
        self.address = _contents_address(buffer, nbytes)
        self.__array_interface__ = {
            "shape": (nbytes,),
            "typestr": "|u1",
            "data": (self.address, False),
            "version": 3,
        }


def _contents_address(buffer: Any, nbytes: int) -> int:
    return int(np.frombuffer(buffer.contents().as_buffer(nbytes), dtype=np.uint8).ctypes.data)


def _allocation_of(array: np.ndarray) -> _SharedAllocation | None:
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base if isinstance(base, _SharedAllocation) else None


class MetalDevice:
    """The system default Metal device with one command queue and compiled-pipeline caches.

    Use :func:`default_device` rather than constructing one per call. Raises
    :class:`MetalUnavailableError` (with the reason) when Metal cannot run here.
    """

    name = "metal"

    def __init__(self) -> None:
        reason = unavailable_reason()
        if reason is not None:
            raise MetalUnavailableError(f"the metal backend is unavailable: {reason}")
        self._metal = _import_metal()
        self.device = self._metal.MTLCreateSystemDefaultDevice()
        self.queue = self.device.newCommandQueue()
        self._libraries: dict[str, Any] = {}
        self._pipelines: dict[tuple[str, str], Any] = {}
        self._kernels: dict[str, dict[str, Kernel]] = {}
        self._lock = threading.Lock()

    # -- compilation -----------------------------------------------------------------------------

    def _compile_options(self) -> Any:
        options = self._metal.MTLCompileOptions.alloc().init()
        if hasattr(options, "setMathMode_"):  # macOS 15 and later
            options.setMathMode_(getattr(self._metal, "MTLMathModeSafe", 0))
        else:  # before macOS 15
            options.setFastMathEnabled_(False)
        return options

    def pipeline(self, source: str, name: str) -> Any:
        """The compute pipeline for kernel ``name`` of ``source``, compiled once per source hash.

        Raises :class:`KernelCompileError` with Metal's compiler text, or
        :class:`KernelNotFoundError`.
        """
        key = hashlib.sha256((_OPTIONS_TAG + "\0" + source).encode()).hexdigest()
        with self._lock:
            cached = self._pipelines.get((key, name))
            if cached is not None:
                return cached
            library = self._libraries.get(key)
            if library is None:
                check_msl(source)
                library, error = self.device.newLibraryWithSource_options_error_(
                    source, self._compile_options(), None
                )
                if library is None:
                    text = error.localizedDescription() if error is not None else "no error text"
                    raise KernelCompileError("the MSL source (Metal)", str(text))
                self._libraries[key] = library
                self._kernels[key] = {k.name: k for k in find_kernels(source)}
            function = library.newFunctionWithName_(name)
            if function is None:
                raise KernelNotFoundError(name, list(self._kernels[key]))
            pipeline, error = self.device.newComputePipelineStateWithFunction_error_(function, None)
            if pipeline is None:
                text = error.localizedDescription() if error is not None else "no error text"
                raise KernelCompileError(f"the pipeline for kernel {name}", str(text))
            self._pipelines[(key, name)] = pipeline
            return pipeline

    def _kernel(self, source: str, name: str) -> Kernel:
        key = hashlib.sha256((_OPTIONS_TAG + "\0" + source).encode()).hexdigest()
        return self._kernels[key][name]

    # -- memory ----------------------------------------------------------------------------------

    def empty(self, count: int, dtype: np.dtype) -> np.ndarray:
        """A writeable 1-D numpy array of ``count`` elements over a new shared MTLBuffer."""
        dtype = np.dtype(dtype)
        nbytes = max(count * dtype.itemsize, 16)  # Metal refuses zero-length buffers
        buffer = self.device.newBufferWithLength_options_(
            nbytes, self._metal.MTLResourceStorageModeShared
        )
        if buffer is None:
            raise KernelLaunchError(f"Metal could not allocate a {nbytes}-byte shared buffer")
        raw = np.asarray(_SharedAllocation(buffer, nbytes))
        return raw.view(dtype)[:count]

    def _bind(self, array: np.ndarray) -> tuple[Any, int, bool]:
        """(MTLBuffer, byte offset, copied) for an array: in place when possible."""
        allocation = _allocation_of(array)
        if allocation is not None:
            return allocation.buffer, int(array.ctypes.data) - allocation.address, False
        shared = self._metal.MTLResourceStorageModeShared
        nbytes = array.nbytes
        address = int(array.ctypes.data)
        if nbytes and address % PAGE_SIZE == 0 and nbytes % PAGE_SIZE == 0:
            try:
                buffer = self.device.newBufferWithBytesNoCopy_length_options_deallocator_(
                    memoryview(array).cast("B"), nbytes, shared, None
                )
            except (TypeError, ValueError):  # e.g. a read-only array the bridge will not lend
                buffer = None
            # Trust "no copy" only if Metal's buffer really starts at the array's memory.
            if buffer is not None and _contents_address(buffer, nbytes) == address:
                return buffer, 0, False
        buffer = self.device.newBufferWithBytes_length_options_(
            memoryview(np.ascontiguousarray(array)).cast("B") if nbytes else b"\0" * 16,
            max(nbytes, 16),
            shared,
        )
        if buffer is None:
            raise KernelLaunchError(f"Metal could not allocate a {nbytes}-byte buffer")
        return buffer, 0, True

    # -- dispatch --------------------------------------------------------------------------------

    def run_kernel(
        self,
        source: str,
        name: str,
        buffers: BufferArgs | Mapping[int, np.ndarray],
        grid: object,
        threadgroup: object | None = None,
    ) -> None:
        """Compiles (cached) and runs kernel ``name`` over ``grid`` threads, then waits.

        Same arguments and checks as the emulator's launch (buffers by ``[[buffer(n)]]`` index).
        Arrays the kernel may write and that had to be copied are copied back after completion.
        Raises :class:`KernelLaunchError` with Metal's text when the command buffer fails.
        """
        pipeline = self.pipeline(source, name)
        kernel = self._kernel(source, name)
        dims = as_grid(grid)
        max_threads = int(pipeline.maxTotalThreadsPerThreadgroup())
        group = (
            default_threadgroup(dims, max_threads, int(pipeline.threadExecutionWidth()))
            if threadgroup is None
            else as_grid(threadgroup, "threadgroup")
        )
        check_threadgroup(group, max_threads)
        bound = normalize_buffers(buffers)
        check_buffers(kernel, bound)
        if 0 in dims:
            return
        import objc  # type: ignore[import-not-found]  # PyObjC core, present with Metal

        # Command buffers and encoders are autoreleased objects: drain them per launch.
        with objc.autorelease_pool():
            self._dispatch(pipeline, kernel, name, bound, dims, group)

    def _dispatch(
        self,
        pipeline: Any,
        kernel: Kernel,
        name: str,
        bound: Mapping[int, np.ndarray],
        dims: tuple[int, int, int],
        group: tuple[int, int, int],
    ) -> None:
        command_buffer = self.queue.commandBuffer()
        encoder = command_buffer.computeCommandEncoder()
        encoder.setComputePipelineState_(pipeline)
        copies: list[tuple[np.ndarray, Any]] = []
        keep_alive: list[Any] = []
        for index, array in sorted(bound.items()):
            param = kernel.buffers[index] if index in kernel.buffers else None
            written = param is not None and writes(param)
            if (
                param is not None
                and param.address_space == "constant"
                and 0 < array.nbytes <= SET_BYTES_LIMIT
            ):
                encoder.setBytes_length_atIndex_(array.tobytes(), array.nbytes, index)
                continue
            buffer, offset, copied = self._bind(array)
            keep_alive.append(buffer)
            encoder.setBuffer_offset_atIndex_(buffer, offset, index)
            if copied and written:
                copies.append((array, buffer))
        size = self._metal.MTLSizeMake
        encoder.dispatchThreads_threadsPerThreadgroup_(size(*dims), size(*group))
        encoder.endEncoding()
        command_buffer.commit()
        command_buffer.waitUntilCompleted()
        error = command_buffer.error()
        if command_buffer.status() == _STATUS_ERROR or error is not None:
            text = error.localizedDescription() if error is not None else "status: error"
            raise KernelLaunchError(f"Metal command buffer for kernel {name} failed: {text}")
        for array, buffer in copies:
            data = buffer.contents().as_buffer(array.nbytes)
            array.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, dtype=np.uint8)
        del keep_alive

    def run(self, source: str, kernel: str, buffers: Sequence[np.ndarray], grid: int) -> None:
        """The :class:`~llmfs.tensor.backends.metal.ops.Executor` entry point."""
        self.run_kernel(source, kernel, buffers, grid)


@functools.lru_cache(maxsize=1)
def default_device() -> MetalDevice:
    """The process-wide :class:`MetalDevice` (created on first use)."""
    return MetalDevice()


__all__ = [
    "PAGE_SIZE",
    "SET_BYTES_LIMIT",
    "MetalDevice",
    "default_device",
    "is_available",
    "unavailable_reason",
]
