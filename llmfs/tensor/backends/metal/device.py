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

Ownership. Metal's creation methods (``-[MTLDevice newBufferWithLength:options:]``,
``newCommandQueue``, ``newLibraryWithSource:options:error:``, ...) are instance methods of the
``new`` family: the caller owns the object they return. pyobjc-core applies that rule by name only
to class methods and Metal's bridge metadata does not state it, so PyObjC would retain each result
once more and never release it: every buffer would leak. :func:`register_ownership_metadata`
restates PyObjC's own metadata for those selectors (types and argument rules unchanged) with
``already_retained`` added on the result; it runs once, after ``import Metal`` (whose own
registration it must replace) and before the first call.

Dispatch follows ``dispatchThreads`` with the threadgroup sized from the pipeline's
``threadExecutionWidth`` and ``maxTotalThreadsPerThreadgroup`` when the device supports
non-uniform threadgroups (Apple4 and later, Mac2); otherwise ``dispatchThreadgroups`` over the
grid rounded up to whole threadgroups, which the library's kernels allow for with their
``gid >= count`` guards. Every launch commits its command buffer and waits for it
(``waitUntilCompleted``) before returning, so the CPU never reads a buffer the GPU is still
writing; a failed command buffer raises with Metal's error text.

Math. Kernels are compiled with fast math off and, where the SDK has the setting (macOS 15 and
later), ``mathFloatingPointFunctions`` set to precise: on macOS 15 ``MTLMathModeSafe`` alone
leaves ``exp``/``log``/``sin``/``cos``/``tanh`` on their fast variants. The library's kernels also
spell those functions ``precise::``, so they are precise whatever the options.
"""

from __future__ import annotations

import ctypes
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

#: Smallest buffer the device path allocates (Metal refuses zero-length buffers).
MIN_BUFFER_BYTES = 16

#: MTLCommandBufferStatusError.
_STATUS_ERROR = 5

#: Enum values from Metal's headers, used when the bindings predate the names.
_MATH_MODE_SAFE = 0  # MTLMathModeSafe
_MATH_FUNCTIONS_PRECISE = 1  # MTLMathFloatingPointFunctionsPrecise
_GPU_FAMILY_APPLE4 = 1004  # MTLGPUFamilyApple4: first Apple GPU with non-uniform threadgroups
_GPU_FAMILY_MAC2 = 2002  # MTLGPUFamilyMac2

#: Loaded before the first device query: a command-line process (no AppKit) otherwise may get
#: no device from MTLCreateSystemDefaultDevice().
COREGRAPHICS_PATH = "/System/Library/Frameworks/CoreGraphics.framework/CoreGraphics"

#: The ``new``-family instance methods this module calls, with PyObjC's own argument metadata
#: (pyobjc-framework-Metal's ``_metadata.py``). Registering metadata for a selector replaces what
#: was registered before for the same class, so the argument rules are restated unchanged and
#: only ``already_retained`` is added to the result.
OWNED_RESULT_SELECTORS: dict[bytes, dict[int, dict[str, object]]] = {
    b"newCommandQueue": {},
    b"newBufferWithLength:options:": {2: {"type": b"Q"}, 3: {"type": b"Q"}},
    b"newBufferWithBytes:length:options:": {
        2: {"type": b"^v", "type_modifier": b"n", "c_array_length_in_arg": 3},
        3: {"type": b"Q"},
        4: {"type": b"Q"},
    },
    b"newBufferWithBytesNoCopy:length:options:deallocator:": {
        2: {"type": b"^v", "type_modifier": b"n", "c_array_length_in_arg": 3},
        3: {"type": b"Q"},
        4: {"type": b"Q"},
        5: {
            "callable": {
                "retval": {"type": b"v"},
                "arguments": {0: {"type": b"^v"}, 1: {"type": b"n^v"}, 2: {"type": b"Q"}},
            },
            "type": b"@?",
        },
    },
    b"newLibraryWithSource:options:error:": {
        2: {"type": b"@"},
        3: {"type": b"@"},
        4: {"type": b"^@", "type_modifier": b"o"},
    },
    b"newFunctionWithName:": {2: {"type": b"@"}},
    b"newComputePipelineStateWithFunction:error:": {
        2: {"type": b"@"},
        3: {"type": b"^@", "type_modifier": b"o"},
    },
}

_REGISTERED: list[bool] = []  # one entry once the metadata is registered in this process
_REGISTER_LOCK = threading.Lock()


def register_ownership_metadata(objc: Any) -> None:
    """Tells PyObjC that the results of :data:`OWNED_RESULT_SELECTORS` are owned by the caller.

    Idempotent; must run after ``import Metal`` (which registers the metadata this replaces).
    Without it, each of those calls leaks the object it returns.
    """
    with _REGISTER_LOCK:
        if _REGISTERED:
            return
        for selector, arguments in OWNED_RESULT_SELECTORS.items():
            metadata: dict[str, object] = {
                "required": True,
                "retval": {"type": b"@", "already_retained": True},
            }
            if arguments:
                metadata["arguments"] = arguments
            objc.registerMetaDataForSelector(b"NSObject", selector, metadata)
        _REGISTERED.append(True)


def _import_metal() -> Any:
    """The PyObjC ``Metal`` module, or ``None`` off macOS or without pyobjc-framework-Metal.

    Loads CoreGraphics first and registers the ownership metadata (both once).
    """
    if not _on_macos():
        return None
    _load_coregraphics()
    try:
        import Metal
        import objc
    except ImportError:
        return None
    register_ownership_metadata(objc)
    return Metal


def _on_macos() -> bool:
    return sys.platform == "darwin"


#: How a system framework is loaded (a seam for the host tests).
_dlopen = ctypes.CDLL


@functools.lru_cache(maxsize=1)
def _load_coregraphics() -> bool:
    """Loads CoreGraphics (what AppKit would have loaded); False when it cannot be loaded."""
    try:
        _dlopen(COREGRAPHICS_PATH)
    except OSError:
        return False
    return True


def _system_device(metal: Any) -> Any:
    """The default Metal device, else the first of ``MTLCopyAllDevices()``, else ``None``."""
    device = metal.MTLCreateSystemDefaultDevice()
    if device is not None:
        return device
    copy_all = getattr(metal, "MTLCopyAllDevices", None)
    devices = copy_all() if copy_all is not None else None
    return devices[0] if devices is not None and len(devices) > 0 else None


def unavailable_reason() -> str | None:
    """Why the ``metal`` backend cannot run here, or ``None`` when it can."""
    if not _on_macos():
        return f"Metal needs macOS; this is {sys.platform}"
    metal = _import_metal()
    if metal is None:
        return (
            "PyObjC's Metal bindings are not installed (pip install 'llmfs[metal]' installs "
            "pyobjc-framework-Metal)"
        )
    if _system_device(metal) is None:
        return "neither MTLCreateSystemDefaultDevice() nor MTLCopyAllDevices() found a Metal device"
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
        self.device = _system_device(self._metal)
        self.queue = self.device.newCommandQueue()
        self.nonuniform_threadgroups = _supports_nonuniform_threadgroups(self._metal, self.device)
        self._options_tag = ""
        self._options = self._compile_options()
        self._libraries: dict[str, Any] = {}
        self._pipelines: dict[tuple[str, str], Any] = {}
        self._kernels: dict[str, dict[str, Kernel]] = {}
        self._lock = threading.Lock()

    # -- compilation -----------------------------------------------------------------------------

    def _compile_options(self) -> Any:
        """Fast math off and precise math functions, with whatever this macOS offers; records
        what was set in ``_options_tag`` (part of the library cache key)."""
        metal = self._metal
        options = metal.MTLCompileOptions.alloc().init()
        tags = []
        if hasattr(options, "setMathMode_"):  # macOS 15 and later
            options.setMathMode_(getattr(metal, "MTLMathModeSafe", _MATH_MODE_SAFE))
            tags.append("mathMode=safe")
        else:  # before macOS 15: fast math off also selects the precise math functions
            options.setFastMathEnabled_(False)
            tags.append("fastMath=off")
        if hasattr(options, "setMathFloatingPointFunctions_"):  # macOS 15 and later
            options.setMathFloatingPointFunctions_(
                getattr(metal, "MTLMathFloatingPointFunctionsPrecise", _MATH_FUNCTIONS_PRECISE)
            )
            tags.append("functions=precise")
        self._options_tag = ",".join(tags)
        return options

    def _key(self, source: str) -> str:
        return hashlib.sha256((self._options_tag + "\0" + source).encode()).hexdigest()

    def pipeline(self, source: str, name: str) -> Any:
        """The compute pipeline for kernel ``name`` of ``source``, compiled once per source hash.

        Raises :class:`KernelCompileError` with Metal's compiler text, or
        :class:`KernelNotFoundError`.
        """
        key = self._key(source)
        with self._lock:
            cached = self._pipelines.get((key, name))
            if cached is not None:
                return cached
            library = self._libraries.get(key)
            if library is None:
                check_msl(source, rules="metal")  # Metal checks the rest itself
                library, error = self.device.newLibraryWithSource_options_error_(
                    source, self._options, None
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
        return self._kernels[self._key(source)][name]

    # -- memory ----------------------------------------------------------------------------------

    def empty(self, count: int, dtype: np.dtype) -> np.ndarray:
        """A writeable 1-D numpy array of ``count`` elements over a new shared MTLBuffer."""
        dtype = np.dtype(dtype)
        nbytes = max(count * dtype.itemsize, MIN_BUFFER_BYTES)  # Metal refuses zero length
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
                    array.data.cast("B"), nbytes, shared, None
                )
            except (TypeError, ValueError):  # e.g. a read-only array the bridge will not lend
                buffer = None
            # Trust "no copy" only if Metal's buffer really starts at the array's memory.
            if buffer is not None and _contents_address(buffer, nbytes) == address:
                return buffer, 0, False
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if nbytes < MIN_BUFFER_BYTES:
            # PyObjC checks the Python buffer against the length asked for ("Requesting buffer
            # of 16, have buffer of 4"), so a short array is padded to the minimum first.
            padded = np.zeros(MIN_BUFFER_BYTES, dtype=np.uint8)
            padded[:nbytes] = data
            data = padded
        buffer = self.device.newBufferWithBytes_length_options_(
            data.data, max(nbytes, MIN_BUFFER_BYTES), shared
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
        import objc  # PyObjC core, present with Metal

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
        if self.nonuniform_threadgroups:
            encoder.dispatchThreads_threadsPerThreadgroup_(size(*dims), size(*group))
        else:
            # Whole threadgroups only: the grid is rounded up and the extra threads run too,
            # so this path needs kernels that guard their accesses (the library's all do).
            groups = tuple(-(-d // g) for d, g in zip(dims, group, strict=True))
            encoder.dispatchThreadgroups_threadsPerThreadgroup_(size(*groups), size(*group))
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


def _supports_nonuniform_threadgroups(metal: Any, device: Any) -> bool:
    """True when ``dispatchThreads`` (partial edge threadgroups) is available on ``device``."""
    if not hasattr(device, "supportsFamily_"):
        return False
    families = (
        getattr(metal, "MTLGPUFamilyApple4", _GPU_FAMILY_APPLE4),
        getattr(metal, "MTLGPUFamilyMac2", _GPU_FAMILY_MAC2),
    )
    return any(bool(device.supportsFamily_(family)) for family in families)


@functools.lru_cache(maxsize=1)
def default_device() -> MetalDevice:
    """The process-wide :class:`MetalDevice` (created on first use)."""
    return MetalDevice()


__all__ = [
    "COREGRAPHICS_PATH",
    "MIN_BUFFER_BYTES",
    "OWNED_RESULT_SELECTORS",
    "PAGE_SIZE",
    "SET_BYTES_LIMIT",
    "MetalDevice",
    "default_device",
    "is_available",
    "register_ownership_metadata",
    "unavailable_reason",
]
