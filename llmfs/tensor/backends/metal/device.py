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

Bridge rules this module keeps (read from pyobjc-core's sources; none has run on a Mac in
llmfs's own CI, see ``.github/workflows/macos.yml``):

* ``contents()`` is an ``objc.varlist``, and ``varlist.as_buffer(n)`` returns a memoryview that
  does not keep the buffer alive and leaks one reference to the varlist per call (pyobjc-core
  fills the view with ``PyBuffer_FillInfo`` and hands it to ``PyMemoryView_FromBuffer``, which
  never gives that reference back). So ``as_buffer`` is called once per buffer
  (:class:`_SharedAllocation`), and that object holds the buffer for as long as the view is used.
* Metal autoreleases objects of its own while creating libraries and pipelines (their errors,
  ``functionNames``) and while freeing a buffer. A Python process has no autorelease pool that
  is ever drained (PyObjC's global pool on the main thread never is; other threads have none),
  so pipeline creation, every launch and every release of a buffer or of the device's objects
  run inside ``objc.autorelease_pool()``.
* ``setBuffer:offset:atIndex:`` needs the offset aligned to the element type the kernel reads
  through a ``device`` parameter (at most 16 bytes), and to the hardware's constant-buffer
  alignment for a ``constant`` one (this module uses 256 bytes, the largest in Apple's feature
  set tables). A view whose offset breaks that is copied to a fresh buffer instead
  (:func:`offset_alignment`).

Kernel names are what Metal knows: the library's ``functionNames``. A name Metal does not know
raises :class:`KernelNotFoundError` listing Metal's names. A kernel Metal knows but
:func:`~llmfs.tensor.backends.metal.msl.find_kernels` cannot describe (a macro-generated name,
or a spelling the reader does not know) still runs, with the host checks that need its
parameters left to Metal: every buffer is bound with ``setBuffer`` at a 256-byte aligned offset
(else copied) and every writeable copied array is copied back.

Dispatch follows ``dispatchThreads`` with the threadgroup sized from the pipeline's
``threadExecutionWidth`` and ``maxTotalThreadsPerThreadgroup`` when the device supports
non-uniform threadgroups (Apple4 and later, Mac2); a pipeline may allow fewer than 1,024
threads per group (registers, threadgroup memory), so its own limit bounds the default group and
refuses a larger explicit one before Metal sees it. Otherwise ``dispatchThreadgroups`` over the
grid rounded up to whole threadgroups, which the library's kernels allow for with their
``gid >= count`` guards. ``[[threadgroup(n)]]`` arguments get their lengths with
``setThreadgroupMemoryLength:atIndex:`` after the emulator's own check (multiples of 16; with
the pipeline's ``staticThreadgroupMemoryLength`` within ``maxThreadgroupMemoryLength``, 32 KiB
on Apple GPUs), so both refuse the same launches before the GPU sees them. Every launch
commits its command buffer and waits for it (``waitUntilCompleted``) before returning, so the
CPU never reads a buffer the GPU is still writing; a failed command buffer raises with Metal's
error text.

Math. Kernels are compiled with fast math off and, where the SDK has the setting (macOS 15 and
later), ``mathFloatingPointFunctions`` set to precise: on macOS 15 ``MTLMathModeSafe`` alone
leaves ``exp``/``log``/``sin``/``cos``/``tanh`` on their fast variants. The library's kernels also
spell those functions ``precise::``, so they are precise whatever the options.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import re
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from llmfs.tensor.backends.metal.emulator import (
    MAX_THREADGROUP_BYTES,
    TYPE_SIZES,
    BufferArgs,
    as_grid,
    check_buffers,
    check_threadgroup,
    default_threadgroup,
    normalize_buffers,
    threadgroup_lengths,
    writes,
)
from llmfs.tensor.backends.metal.errors import (
    KernelArgumentError,
    KernelCompileError,
    KernelLaunchError,
    KernelNotFoundError,
    MetalUnavailableError,
)
from llmfs.tensor.backends.metal.lint import check_msl
from llmfs.tensor.backends.metal.msl import Kernel, Parameter, find_kernels

#: Apple Silicon's page size: newBufferWithBytesNoCopy needs address and length aligned to it.
PAGE_SIZE = 16384

#: Largest parameter passed with setBytes instead of a buffer (Metal's documented limit is 4 KiB).
SET_BYTES_LIMIT = 4096

#: Smallest buffer the device path allocates (Metal refuses zero-length buffers).
MIN_BUFFER_BYTES = 16

#: Offset alignment for a buffer bound to a ``constant`` parameter, and for every buffer of a
#: kernel whose parameters are unknown: the largest minimum in Apple's feature set tables.
CONSTANT_OFFSET_ALIGNMENT = 256

#: Metal's largest alignment for an offset into a ``device`` buffer (its largest element type).
DEVICE_OFFSET_ALIGNMENT = 16

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


def _pool(objc: Any) -> contextlib.AbstractContextManager[object]:
    """``objc.autorelease_pool()``, or no pool once PyObjC is gone (interpreter shutdown)."""
    try:
        return objc.autorelease_pool()
    except Exception:  # during shutdown the module may be half torn down
        return contextlib.nullcontext()


def _release(objc: Any, owner: object, names: Sequence[str]) -> None:
    """Drops the attributes ``names`` of ``owner`` (PyObjC proxies) inside an autorelease pool,
    so what Metal autoreleases while freeing them is drained here and now."""
    with _pool(objc):
        for name in names:
            owner.__dict__.pop(name, None)


class _SharedAllocation:
    """Owner of one MTLBuffer and of the one memoryview of its ``contents()``.

    Every numpy array made from it (by ``__array_interface__``) has this object at the end of
    its ``base`` chain, so the buffer lives as long as any array (or Tensor storage) that views
    it. ``memory`` is the buffer's only ``as_buffer`` view (see the module docstring: the view
    does not own the buffer, and each call leaks a reference), made on first use; the buffer is
    released inside an autorelease pool when this object dies.
    """

    def __init__(self, objc: Any, buffer: Any, nbytes: int) -> None:
        self._objc = objc
        self.buffer = buffer
        self.nbytes = nbytes

    @functools.cached_property
    def memory(self) -> memoryview:
        """A writable byte view of the buffer's ``nbytes`` bytes (``as_buffer``, called once)."""
        return memoryview(self.buffer.contents().as_buffer(self.nbytes)).cast("B")

    @functools.cached_property
    def address(self) -> int:
        """The CPU address of the buffer's contents."""
        return int(np.frombuffer(self.memory, dtype=np.uint8).ctypes.data)

    @property
    def __array_interface__(self) -> dict[str, object]:
        return {
            "shape": (self.nbytes,),
            "typestr": "|u1",
            "data": (self.address, False),
            "version": 3,
        }

    def bytes(self, count: int) -> np.ndarray:
        """The first ``count`` bytes, as a uint8 array over the buffer (no copy)."""
        return np.frombuffer(self.memory, dtype=np.uint8, count=count)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # a finalizer must not raise (interpreter exit)
            _release(self._objc, self, ("memory", "address", "buffer"))


def _allocation_of(array: np.ndarray) -> _SharedAllocation | None:
    base: object = array
    while isinstance(base, np.ndarray):
        base = base.base
    return base if isinstance(base, _SharedAllocation) else None


_VECTOR_TYPE = re.compile(r"^(packed_)?([a-z]+?)([234])?$")


def offset_alignment(param: Parameter | None) -> int:
    """The alignment Metal requires of a byte offset bound to ``param`` with ``setBuffer``.

    ``device`` parameters: the size of the element type read through them, as MSL lays it out
    (``float`` 4, ``half2`` 4, ``float3`` and ``float4`` 16, ``packed_float3`` 4), at most
    :data:`DEVICE_OFFSET_ALIGNMENT`; a type this cannot size (a struct) gets that maximum.
    ``constant`` parameters, and ``None`` (a kernel whose parameters are unknown):
    :data:`CONSTANT_OFFSET_ALIGNMENT`.
    """
    if param is None or param.address_space != "device":
        return CONSTANT_OFFSET_ALIGNMENT
    words = param.base_type.split()
    # atomic_int, atomic_uint and atomic_float are laid out as their scalar
    base = words[-1].removeprefix("atomic_") if words else ""
    match = _VECTOR_TYPE.match(base)
    if match is None:
        return DEVICE_OFFSET_ALIGNMENT
    packed, scalar, lanes = match.groups()
    size = {**TYPE_SIZES, "bfloat": 2}.get(scalar)
    if size is None:
        return DEVICE_OFFSET_ALIGNMENT
    count = int(lanes) if lanes else 1
    if not packed and count == 3:
        count = 4  # a float3 is laid out (and aligned) like a float4
    return min(size if packed else size * count, DEVICE_OFFSET_ALIGNMENT)


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
        import objc  # PyObjC core, present with Metal

        self._objc = objc
        with _pool(objc):
            self.device = _system_device(self._metal)
            self.queue = self.device.newCommandQueue()
            self.nonuniform_threadgroups = _supports_nonuniform_threadgroups(
                self._metal, self.device
            )
            #: Threadgroup memory per threadgroup (bytes): 32 KiB on Apple GPUs.
            self.max_threadgroup_memory = (
                int(self.device.maxThreadgroupMemoryLength())
                if hasattr(self.device, "maxThreadgroupMemoryLength")
                else MAX_THREADGROUP_BYTES
            )
            self._options_tag = ""
            self._options = self._compile_options()
        self._libraries: dict[str, Any] = {}
        self._pipelines: dict[tuple[str, str], Any] = {}
        self._kernels: dict[str, dict[str, Kernel]] = {}
        self._names: dict[str, tuple[str, ...]] = {}
        self._keys: dict[str, str] = {}
        self._lock = threading.Lock()

    def __del__(self) -> None:
        objc = self.__dict__.get("_objc")
        if objc is not None:
            names = ("_pipelines", "_libraries", "_options", "queue", "device")
            with contextlib.suppress(Exception):  # a finalizer must not raise (interpreter exit)
                _release(objc, self, names)

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
        """The library cache key of ``source``: hashed once per source text (the op families
        pass one cached ``str`` each, found here by identity)."""
        key = self._keys.get(source)
        if key is None:
            key = hashlib.sha256((self._options_tag + "\0" + source).encode()).hexdigest()
            self._keys[source] = key
        return key

    def kernel_names(self, source: str) -> tuple[str, ...]:
        """The kernel functions Metal compiled from ``source`` (its ``functionNames``)."""
        key = self._key(source)
        with self._lock, _pool(self._objc):
            self._library(source, key)
        return self._names[key]

    def _library(self, source: str, key: str) -> Any:
        """The compiled library of ``source`` (lock and pool held by the caller)."""
        library = self._libraries.get(key)
        if library is not None:
            return library
        check_msl(source, rules="metal")
        library, error = self.device.newLibraryWithSource_options_error_(
            source, self._options, None
        )
        if library is None:
            text = error.localizedDescription() if error is not None else "no error text"
            raise KernelCompileError("the MSL source (Metal)", str(text))
        names = library.functionNames()
        self._names[key] = tuple(sorted(str(n) for n in (names if names is not None else ())))
        self._kernels[key] = {k.name: k for k in find_kernels(source)}
        self._libraries[key] = library
        return library

    def pipeline(self, source: str, name: str) -> Any:
        """The compute pipeline for kernel ``name`` of ``source``, compiled once per source hash.

        Raises :class:`KernelCompileError` with Metal's compiler text, or
        :class:`KernelNotFoundError` listing the kernels Metal compiled.
        """
        key = self._key(source)
        with self._lock:
            cached = self._pipelines.get((key, name))
            if cached is not None:
                return cached
            with _pool(self._objc):
                library = self._library(source, key)
                if name not in self._names[key]:
                    raise KernelNotFoundError(name, self._names[key])
                function = library.newFunctionWithName_(name)
                if function is None:
                    raise KernelNotFoundError(name, self._names[key])
                pipeline, error = self.device.newComputePipelineStateWithFunction_error_(
                    function, None
                )
                del function
                if pipeline is None:
                    text = error.localizedDescription() if error is not None else "no error text"
                    raise KernelCompileError(f"the pipeline for kernel {name}", str(text))
                self._pipelines[(key, name)] = pipeline
                return pipeline

    def _kernel(self, source: str, name: str) -> Kernel | None:
        """The parsed kernel ``name``, or ``None`` when Metal knows it but msl.py cannot read it
        (call :meth:`pipeline` first)."""
        return self._kernels[self._key(source)].get(name)

    # -- memory ----------------------------------------------------------------------------------

    def _shared(self, buffer: Any, nbytes: int) -> _SharedAllocation:
        return _SharedAllocation(self._objc, buffer, nbytes)

    def empty(self, count: int, dtype: np.dtype) -> np.ndarray:
        """A writeable 1-D numpy array of ``count`` elements over a new shared MTLBuffer."""
        dtype = np.dtype(dtype)
        nbytes = max(count * dtype.itemsize, MIN_BUFFER_BYTES)  # Metal refuses zero length
        buffer = self.device.newBufferWithLength_options_(
            nbytes, self._metal.MTLResourceStorageModeShared
        )
        if buffer is None:
            raise KernelLaunchError(f"Metal could not allocate a {nbytes}-byte shared buffer")
        raw = np.asarray(self._shared(buffer, nbytes))
        return raw.view(dtype)[:count]

    def _bind(self, array: np.ndarray, alignment: int = 1) -> tuple[_SharedAllocation, int, bool]:
        """(the buffer's owner, byte offset, copied) for an array: in place when possible.

        In place: a view of one of this device's shared buffers whose byte offset is a multiple
        of ``alignment`` (Metal's rule for the parameter, :func:`offset_alignment`), or
        page-aligned memory wrapped without a copy (offset 0); otherwise a copy. The MTLBuffer
        is the owner's ``buffer``; it is released (in a pool) with the owner.
        """
        allocation = _allocation_of(array)
        if allocation is not None:
            offset = int(array.ctypes.data) - allocation.address
            if offset % alignment == 0:
                return allocation, offset, False
            # A misaligned view of a shared buffer: Metal would read it wrongly; copy below.
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
            if buffer is not None:
                wrapped = self._shared(buffer, nbytes)
                # Trust "no copy" only if Metal's buffer really starts at the array's memory.
                if wrapped.address == address:
                    return wrapped, 0, False
                del wrapped
        data = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if nbytes < MIN_BUFFER_BYTES:
            # PyObjC checks the Python buffer against the length asked for ("Requesting buffer
            # of 16, have buffer of 4"), so a short array is padded to the minimum first.
            padded = np.zeros(MIN_BUFFER_BYTES, dtype=np.uint8)
            padded[:nbytes] = data
            data = padded
        length = max(nbytes, MIN_BUFFER_BYTES)
        buffer = self.device.newBufferWithBytes_length_options_(data.data, length, shared)
        if buffer is None:
            raise KernelLaunchError(f"Metal could not allocate a {nbytes}-byte buffer")
        return self._shared(buffer, length), 0, True

    # -- dispatch --------------------------------------------------------------------------------

    def run_kernel(
        self,
        source: str,
        name: str,
        buffers: BufferArgs | Mapping[int, np.ndarray],
        grid: object,
        threadgroup: object | None = None,
        *,
        threadgroup_memory: Mapping[int, int] | None = None,
    ) -> None:
        """Compiles (cached) and runs kernel ``name`` over ``grid`` threads, then waits.

        Same arguments and checks as the emulator's launch (buffers by ``[[buffer(n)]]`` index;
        for a kernel msl.py cannot describe, only that each buffer is a C-contiguous array).
        The threadgroup defaults to one sized from this pipeline's
        ``maxTotalThreadsPerThreadgroup`` and must not exceed it. ``threadgroup_memory``
        (``{n: bytes}``) sizes the ``[[threadgroup(n)]]`` arguments with
        ``setThreadgroupMemoryLength:atIndex:``, checked by the emulator's own rule
        (:func:`~llmfs.tensor.backends.metal.emulator.threadgroup_lengths`): multiples of 16,
        and with the pipeline's ``staticThreadgroupMemoryLength`` (the kernel's threadgroup
        variables) within the device's ``maxThreadgroupMemoryLength``. Arrays the kernel may
        write and that had to be copied are copied back after completion. Raises
        :class:`KernelArgumentError` for bad arguments and :class:`KernelLaunchError` with
        Metal's text when the command buffer fails.
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
        # The kernel's own threadgroup variables count against the same limit; Metal knows
        # their size once the pipeline exists (asked only when lengths are given: a launch
        # without them has nothing to add to what the pipeline already fits in).
        static = int(pipeline.staticThreadgroupMemoryLength()) if threadgroup_memory else 0
        lengths = threadgroup_lengths(
            kernel,
            threadgroup_memory,
            name=name,
            static=static,
            limit=self.max_threadgroup_memory,
        )
        bound = normalize_buffers(buffers)
        if kernel is not None:
            check_buffers(kernel, bound)
        else:
            for index, array in sorted(bound.items()):
                if not array.flags.c_contiguous:
                    raise KernelArgumentError(
                        f"kernel {name}: buffer {index} must be C-contiguous (pass "
                        f"np.ascontiguousarray(...) or the storage)"
                    )
        if 0 in dims:
            return
        # Command buffers and encoders are autoreleased objects, and so is what Metal makes
        # while freeing the launch's temporary buffers: drain them per launch.
        with _pool(self._objc):
            self._dispatch(pipeline, kernel, name, bound, dims, group, lengths)

    def _dispatch(
        self,
        pipeline: Any,
        kernel: Kernel | None,
        name: str,
        bound: Mapping[int, np.ndarray],
        dims: tuple[int, int, int],
        group: tuple[int, int, int],
        lengths: Sequence[int] = (),
    ) -> None:
        command_buffer = self.queue.commandBuffer()
        encoder = command_buffer.computeCommandEncoder()
        encoder.setComputePipelineState_(pipeline)
        copies: list[tuple[np.ndarray, _SharedAllocation]] = []
        keep_alive: list[_SharedAllocation] = []
        try:
            for index, array in sorted(bound.items()):
                param = kernel.buffers.get(index) if kernel is not None else None
                # Unknown parameters: any writeable array may be written.
                written = writes(param) if param is not None else bool(array.flags.writeable)
                if (
                    param is not None
                    and param.address_space == "constant"
                    and 0 < array.nbytes <= SET_BYTES_LIMIT
                ):
                    encoder.setBytes_length_atIndex_(array.tobytes(), array.nbytes, index)
                    continue
                allocation, offset, copied = self._bind(array, offset_alignment(param))
                keep_alive.append(allocation)
                encoder.setBuffer_offset_atIndex_(allocation.buffer, offset, index)
                if copied and written:
                    copies.append((array, allocation))
            for index, length in enumerate(lengths):
                if length:
                    encoder.setThreadgroupMemoryLength_atIndex_(length, index)
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
            for array, allocation in copies:
                array.reshape(-1).view(np.uint8)[:] = allocation.bytes(array.nbytes)
        finally:
            # Released here, inside the launch's pool, also when the launch failed.
            copies.clear()
            keep_alive.clear()
            del encoder, command_buffer

    def run(self, source: str, kernel: str, buffers: Sequence[np.ndarray], grid: int) -> None:
        """The :class:`~llmfs.tensor.backends.metal.ops.Executor` entry point."""
        self.run_kernel(source, kernel, buffers, grid)

    # -- what the device reports -----------------------------------------------------------------

    def report(self) -> dict[str, object]:
        """What the device says about itself: name, the GPU families it supports, its largest
        threadgroup, its threadgroup memory (``maxThreadgroupMemoryLength``),
        ``recommendedMaxWorkingSetSize``, non-uniform threadgroup support and the compile
        options this module set."""
        device = self.device
        families = [
            family
            for family in _FAMILY_NAMES
            if getattr(self._metal, family, None) is not None
            and bool(device.supportsFamily_(getattr(self._metal, family)))
        ]
        largest = device.maxThreadsPerThreadgroup()
        return {
            "name": str(device.name()),
            "families": families,
            "max_threads_per_threadgroup": (
                int(largest.width),
                int(largest.height),
                int(largest.depth),
            ),
            "max_threadgroup_memory_length": self.max_threadgroup_memory,
            "recommended_max_working_set_size": int(device.recommendedMaxWorkingSetSize()),
            "nonuniform_threadgroups": self.nonuniform_threadgroups,
            "compile_options": self._options_tag,
        }


#: The ``MTLGPUFamily`` names :meth:`MetalDevice.report` asks about (those the bindings have).
_FAMILY_NAMES = (
    *(f"MTLGPUFamilyApple{n}" for n in range(1, 11)),
    "MTLGPUFamilyMac2",
    "MTLGPUFamilyCommon3",
    "MTLGPUFamilyMetal3",
    "MTLGPUFamilyMetal4",
)


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
    "CONSTANT_OFFSET_ALIGNMENT",
    "COREGRAPHICS_PATH",
    "DEVICE_OFFSET_ALIGNMENT",
    "MIN_BUFFER_BYTES",
    "OWNED_RESULT_SELECTORS",
    "PAGE_SIZE",
    "SET_BYTES_LIMIT",
    "MetalDevice",
    "default_device",
    "is_available",
    "offset_alignment",
    "register_ownership_metadata",
    "unavailable_reason",
]
