"""The host side of the Metal path (buffers, binding, ownership, compile options, dispatch,
read-back, errors), run against a stand-in for PyObjC's ``Metal`` and ``objc`` modules whose
"GPU" is the emulator.

The stand-in is strict where PyObjC and Metal are strict, so that these tests fail on the
mistakes a Mac would punish. It follows pyobjc-core's sources and Apple's documentation; it has
not been compared with a Mac by running both (the ``metal``-marked tests of
``test_metal_device.py`` are what run on one):

* a pointer argument is a Python buffer checked against the length asked for (PyObjC raises
  ``ValueError: Requesting buffer of 16, have buffer of 4`` when it is shorter) and refused
  without PyObjC's ``c_array_length_in_arg`` metadata; integers must be integers;
* objects returned by ``new*`` instance methods start with one retain that the caller owns; the
  bridge retains every object it hands to Python once more and releases that when the proxy
  dies, and gives the caller's retain back only when the selector's metadata says
  ``already_retained`` -- or, from pyobjc-core 13.0 on, by the method-family rule for instance
  methods too (the fix of PyObjC's issue 690). Both versions are modelled (the ``world``
  fixture runs every test under each); a missing registration leaks under 12.2.2, and the fake
  device's ``currentAllocatedSize()`` shows it;
* registering metadata for a selector replaces the earlier registration (as pyobjc-core does),
  so a registration that forgets the argument metadata breaks the pointer arguments;
* ``contents()`` returns a new varlist per call whose ``as_buffer(n)`` view does not keep the
  buffer alive and leaks one reference per call (``PyBuffer_FillInfo`` then
  ``PyMemoryView_FromBuffer``): a buffer viewed twice fails the test, and a freed buffer's
  memory is overwritten, so a view that outlives its buffer reads junk;
* objects Metal autoreleases (command buffers, encoders, errors, ``functionNames``, and what a
  buffer, library, function or pipeline autoreleases as it is freed) go to the innermost
  ``objc.autorelease_pool()`` of the thread; outside any pool they stay in PyObjC's global pool,
  which is never drained, and the test fails;
* ``setBuffer:offset:atIndex:`` refuses an offset that is not a multiple of the element size
  of a ``device`` parameter or of 256 bytes for a ``constant`` one (Metal's validation layer);
  a dispatch whose threadgroup exceeds the pipeline's ``maxTotalThreadsPerThreadgroup`` (set per
  kernel, below 1,024 where a test says so) fails its command buffer;
* ``setThreadgroupMemoryLength:atIndex:`` refuses a length that is not a multiple of 16 or an
  index past 30; a dispatch whose lengths and the pipeline's ``staticThreadgroupMemoryLength``
  pass the device's ``maxThreadgroupMemoryLength`` (32 KiB), or whose kernel declares a
  ``[[threadgroup(n)]]`` argument left without a length, fails its command buffer; the lengths
  reach the emulator's launcher, which gives each argument a junk-filled block of that size;
* the command buffer retains the buffers bound to it and its completion queue releases them on
  another thread a moment after ``waitUntilCompleted`` returns, as Metal does;
* ``MTLCreateSystemDefaultDevice()`` finds no device until CoreGraphics is loaded (a
  command-line process on macOS); ``dispatchThreads`` fails on a device without non-uniform
  threadgroup support; Metal's kernel names (``functionNames``) are what its compiler sees,
  ``[[host_name("...")]]`` and ``[[kernel]] void`` included.

This is not a substitute for a Mac.
"""

from __future__ import annotations

import copy
import gc
import operator
import re
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from llmfs.tensor.backends.metal import device as metal_device
from llmfs.tensor.backends.metal import emulator, emulator_available, ops
from llmfs.tensor.backends.metal.errors import (
    KernelArgumentError,
    KernelCompileError,
    KernelLaunchError,
    KernelLintError,
    KernelNotFoundError,
    MetalError,
    MetalUnavailableError,
)
from llmfs.tensor.backends.metal.lint import check_msl
from llmfs.tensor.layout import Layout
from tests.tensor.backends.metal.allocation import wait_for_allocated_size
from tests.tensor.backends.metal.pyobjc_releases import (
    PYOBJC_AFTER_NEW_FAMILY_FIX,
    PYOBJC_BEFORE_NEW_FAMILY_FIX,
)

pytestmark = [
    pytest.mark.skipif(
        not emulator_available(),
        reason="the stand-in GPU is the emulator, which needs a C++ compiler",
    ),
    # Seconds in all (kernels compiled and launched for every pyobjc release): scheduled early.
    pytest.mark.slow,
]

#: The metadata pyobjc-framework-Metal 12.2.2 registers for the selectors the device path calls
#: (its ``_metadata.py``): no ``already_retained`` on any result.
PYOBJC_METAL_METADATA: dict[bytes, dict[str, Any]] = {
    b"newCommandQueue": {"required": True, "retval": {"type": b"@"}},
    b"newBufferWithLength:options:": {
        "required": True,
        "retval": {"type": b"@"},
        "arguments": {2: {"type": b"Q"}, 3: {"type": b"Q"}},
    },
    b"newBufferWithBytes:length:options:": {
        "required": True,
        "retval": {"type": b"@"},
        "arguments": {
            2: {"type": b"^v", "type_modifier": b"n", "c_array_length_in_arg": 3},
            3: {"type": b"Q"},
            4: {"type": b"Q"},
        },
    },
    b"newBufferWithBytesNoCopy:length:options:deallocator:": {
        "required": True,
        "retval": {"type": b"@"},
        "arguments": {
            2: {"type": b"^v", "type_modifier": b"n", "c_array_length_in_arg": 3},
            3: {"type": b"Q"},
            4: {"type": b"Q"},
        },
    },
    b"newLibraryWithSource:options:error:": {
        "required": True,
        "retval": {"type": b"@"},
        "arguments": {
            2: {"type": b"@"},
            3: {"type": b"@"},
            4: {"type": b"^@", "type_modifier": b"o"},
        },
    },
    b"newFunctionWithName:": {
        "required": True,
        "retval": {"type": b"@"},
        "arguments": {2: {"type": b"@"}},
    },
    b"newComputePipelineStateWithFunction:error:": {
        "required": True,
        "retval": {"type": b"@"},
        "arguments": {2: {"type": b"@"}, 3: {"type": b"^@", "type_modifier": b"o"}},
    },
    b"setBytes:length:atIndex:": {
        "required": True,
        "retval": {"type": b"v"},
        "arguments": {
            2: {"type": b"^v", "type_modifier": b"n", "c_array_length_in_arg": 3},
            3: {"type": b"Q"},
            4: {"type": b"Q"},
        },
    },
}

#: Kinds of native object whose dealloc autoreleases something of Metal's own (a buffer frees
#: its resource-list entry that way, for example).
AUTORELEASE_ON_FREE = ("buffer", "library", "function", "pipeline", "queue")

#: Element sizes the stand-in's validation layer checks ``device`` offsets against (its own
#: table, independent of the device module's).
ELEMENT_SIZES = {"float": 4, "half": 2, "int": 4, "uint": 4, "short": 2, "ushort": 2,
                 "char": 1, "uchar": 1, "bool": 1, "float2": 8, "float4": 16, "half4": 8,
                 "int4": 16, "uint4": 16, "long": 8, "ulong": 8}  # fmt: skip
CONSTANT_ALIGNMENT = 256


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool | float) or not hasattr(value, "__index__"):
        raise TypeError(f"{what}: expected an integer, got {type(value).__name__}")
    return operator.index(value)  # type: ignore[arg-type]


def _new_family(selector: bytes) -> bool:
    """The ``new`` method family: ``new`` then the end, a colon or an upper-case letter."""
    rest = selector[3:]
    return selector.startswith(b"new") and (not rest or rest[:1] == b":" or rest[:1].isupper())


class FakePool:
    """One ``objc.autorelease_pool()``: what is autoreleased inside is released on exit."""

    def __init__(self, objc: FakeObjC) -> None:
        self.objc = objc
        self.objects: list[Native] = []

    def __enter__(self) -> FakePool:
        self.objc._stack().append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        stack = self.objc._stack()
        assert stack and stack[-1] is self, "autorelease pools must nest"
        while self.objects:  # draining may autorelease more (a dealloc's own objects)
            self.objects.pop().release()
        stack.pop()


class FakeObjC:
    """The ``objc`` module: the selector metadata registry, the bridge's ownership rules,
    autorelease pools, and accounting of what leaks."""

    def __init__(self, version: str) -> None:
        self.__version__ = version
        self.new_family_owned = version == PYOBJC_AFTER_NEW_FAMILY_FIX
        self.metadata = copy.deepcopy(PYOBJC_METAL_METADATA)
        self.registrations: list[bytes] = []
        self.natives: list[Native] = []
        self.unpooled: list[str] = []  # autoreleased outside any pool: never drained
        self.leaked_references = 0  # one per as_buffer call (PyBuffer_FillInfo's reference)
        self.lock = threading.RLock()
        self._local = threading.local()

    def _stack(self) -> list[FakePool]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack  # type: ignore[no-any-return]

    def autorelease_pool(self) -> FakePool:
        return FakePool(self)

    def autorelease(self, native: Native) -> None:
        stack = self._stack()
        if stack:
            stack[-1].objects.append(native)
        else:
            self.unpooled.append(native.kind)

    def autoreleased(self, kind: str) -> Native:
        """A native object as a non-``new`` method returns it: +0, owned by the pool."""
        native = Native(self, kind)
        self.autorelease(native)
        return native

    def registerMetaDataForSelector(self, cls: bytes, selector: bytes, metadata: dict) -> None:
        if not isinstance(cls, bytes) or not isinstance(selector, bytes):
            raise TypeError("registerMetaDataForSelector takes bytes class and selector names")
        self.registrations.append(selector)
        self.metadata[selector] = copy.deepcopy(metadata)  # replaces, as pyobjc-core does

    def returned(self, selector: bytes, native: Native, proxy_type: type[Proxy]) -> Proxy:
        """What Python receives for a ``new*`` result: a proxy holding its own retain; the
        caller's retain is given back when the metadata says ``already_retained`` or, from
        pyobjc-core 13.0 on, because the selector is in the ``new`` family."""
        proxy = proxy_type(native)
        retained = self.metadata.get(selector, {}).get("retval", {}).get("already_retained")
        if retained or (self.new_family_owned and _new_family(selector)):
            native.release()
        return proxy

    def pointer(self, selector: bytes, index: int, data: object, length: int) -> memoryview:
        """PyObjC's handling of a ``^v`` argument with ``c_array_length_in_arg``."""
        arguments = self.metadata.get(selector, {}).get("arguments", {})
        if "c_array_length_in_arg" not in arguments.get(index, {}):
            raise TypeError(
                f"{selector.decode()}: argument {index} is a pointer without length metadata; "
                f"PyObjC cannot pass a Python buffer for it"
            )
        try:
            view = memoryview(data).cast("B")  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"expecting a buffer, got {type(data).__name__}") from None
        if view.nbytes < length:
            raise ValueError(f"Requesting buffer of {length}, have buffer of {view.nbytes}")
        return view[:length]

    def live(self) -> list[Native]:
        return [native for native in self.natives if native.retain_count > 0]


class Native:
    """An Objective-C object: freed when its retain count reaches zero."""

    def __init__(self, objc: FakeObjC, kind: str, nbytes: int = 0) -> None:
        self.objc = objc
        self.kind = kind
        self.nbytes = nbytes
        self.retain_count = 1  # the caller's, from a new* method (or the pool's)
        self.as_buffer_calls = 0
        self.data: np.ndarray | None = None  # a buffer's bytes
        self.owns_data = False  # False for newBufferWithBytesNoCopy: the caller's memory
        self.entry: tuple[emulator.EmulatorLibrary, str] | None = None
        objc.natives.append(self)

    def retain(self) -> None:
        with self.objc.lock:
            self.retain_count += 1

    def release(self) -> None:
        with self.objc.lock:
            if self.retain_count <= 0:
                raise AssertionError(f"over-release of a {self.kind} (a crash on a Mac)")
            self.retain_count -= 1
            freed = self.retain_count == 0
        if freed:
            if self.data is not None and self.owns_data:
                self.data[:] = 0xDB  # freed memory: a view that outlived it reads junk
            if self.kind in AUTORELEASE_ON_FREE:
                self.objc.autorelease(Native(self.objc, f"what a freed {self.kind} autoreleases"))


class Proxy:
    """PyObjC's Python object for one native object: one retain, released when it dies."""

    def __init__(self, native: Native) -> None:
        native.retain()
        self._native = native

    def __del__(self) -> None:
        self._native.release()

    def retainCount(self) -> int:
        return self._native.retain_count


class FakeError(Proxy):
    """An ``NSError`` from an out-parameter: autoreleased."""

    def __init__(self, objc: FakeObjC, text: str) -> None:
        super().__init__(objc.autoreleased("NSError"))
        self.text = text

    def localizedDescription(self) -> str:
        return self.text


class FakeVarlist:
    """``objc.varlist`` for a ``void*`` result: a fresh object per ``contents()`` call."""

    def __init__(self, native: Native) -> None:
        self._native = native

    def as_buffer(self, count: int) -> memoryview:
        """A writable byte view that does not own the buffer; leaks a reference per call."""
        native = self._native
        native.as_buffer_calls += 1
        native.objc.leaked_references += 1
        assert native.data is not None and native.retain_count > 0, "contents() of a freed buffer"
        return memoryview(native.data)[: _integer(count, "count")]


class FakeBuffer(Proxy):
    def contents(self) -> FakeVarlist:
        return FakeVarlist(self._native)

    @property
    def data(self) -> np.ndarray:
        assert self._native.data is not None
        return self._native.data

    def length(self) -> int:
        return self.data.size


#: ``[[host_name("alias")]]`` before a kernel, and the ``[[kernel]] void`` spelling: what Metal
#: compiles and names that the emulator's reader does not (the stand-in rewrites them for it).
_HOST_NAME = re.compile(r'\[\[\s*host_name\s*\(\s*"([A-Za-z_]\w*)"\s*\)\s*\]\]\s*kernel\s+void\s+'
                        r"([A-Za-z_]\w*)")  # fmt: skip
_ATTRIBUTE_KERNEL = re.compile(r"\[\[\s*kernel\s*\]\]\s*void\b")


def _as_metal_compiles(source: str) -> tuple[str, dict[str, str]]:
    """(text the emulator can compile, {Metal's name: the emulator's name})."""
    aliases = {alias: real for alias, real in _HOST_NAME.findall(source)}
    text = _HOST_NAME.sub(lambda m: f"kernel void {m.group(2)}", source)
    return _ATTRIBUTE_KERNEL.sub("kernel void", text), aliases


class FakeLibrary(Proxy):
    library: emulator.EmulatorLibrary
    world: FakeDevice
    aliases: dict[str, str]

    def _visible(self) -> dict[str, str]:
        """Metal's names -> the emulator's."""
        hidden = set(self.aliases.values())
        names = {name: name for name in self.library.kernels if name not in hidden}
        return {**names, **self.aliases}

    def functionNames(self) -> list[str]:
        self.world.objc.autoreleased("NSArray")  # an autoreleased NSArray of NSString
        return sorted(self._visible())

    def newFunctionWithName_(self, name: str) -> Proxy | None:
        if not isinstance(name, str):
            raise TypeError(f"expected a str, got {type(name).__name__}")
        real = self._visible().get(name)
        if real is None:
            return None
        native = Native(self.world.objc, "function")
        native.entry = (self.library, real)
        return self.world.objc.returned(b"newFunctionWithName:", native, FakeFunction)


class FakeFunction(Proxy):
    @property
    def entry(self) -> tuple[emulator.EmulatorLibrary, str]:
        assert self._native.entry is not None
        return self._native.entry


class FakePipeline(Proxy):
    function: FakeFunction
    world: FakeDevice

    @property
    def kernel_name(self) -> str:
        return self.function.entry[1]

    def maxTotalThreadsPerThreadgroup(self) -> int:
        return self.world.thread_limits.get(self.kernel_name, 1024)

    def threadExecutionWidth(self) -> int:
        return 32

    def staticThreadgroupMemoryLength(self) -> int:
        """The bytes of the kernel's own threadgroup variables (set per kernel by a test)."""
        return self.world.static_threadgroup.get(self.kernel_name, 0)


def _required_alignment(param: Any) -> int:
    """The stand-in validation layer's rule for a ``setBuffer`` offset."""
    if param.address_space == "constant":
        return CONSTANT_ALIGNMENT
    return ELEMENT_SIZES.get(param.base_type, 16)


class FakeEncoder(Proxy):
    def __init__(self, command_buffer: FakeCommandBuffer) -> None:
        super().__init__(command_buffer.world.objc.autoreleased("encoder"))
        self.command_buffer = command_buffer
        self.world = command_buffer.world
        self.bound: dict[int, np.ndarray] = {}
        self.lengths = [0] * 32

    def setComputePipelineState_(self, pipeline: FakePipeline) -> None:
        if not isinstance(pipeline, FakePipeline):
            raise TypeError(f"expected a pipeline, got {type(pipeline).__name__}")
        self.pipeline = pipeline

    def setBuffer_offset_atIndex_(self, buffer: FakeBuffer, offset: int, index: int) -> None:
        if not isinstance(buffer, FakeBuffer):
            raise TypeError(f"expected an MTLBuffer, got {type(buffer).__name__}")
        offset, index = _integer(offset, "offset"), _integer(index, "index")
        if not 0 <= index <= 30 or not 0 <= offset < buffer.length():
            raise AssertionError(f"setBuffer: index {index} or offset {offset} out of range")
        library, name = self.pipeline.function.entry
        param = library.kernels[name].buffers.get(index)
        if param is not None and offset % _required_alignment(param):
            raise AssertionError(
                f"-[MTLDebugComputeCommandEncoder setBuffer:offset:atIndex:]: offset {offset} "
                f"for buffer {index} ({param.type_text}) must be a multiple of "
                f"{_required_alignment(param)}"
            )
        buffer._native.retain()  # the command buffer holds what is bound to it
        self.command_buffer.resources.append(buffer._native)
        self.bound[index] = buffer.data[offset:]

    def setBytes_length_atIndex_(self, data: object, length: int, index: int) -> None:
        length = _integer(length, "length")
        if length > 4096:  # Metal's documented limit for setBytes
            raise AssertionError(f"setBytes: {length} bytes exceed 4 KiB (use a buffer)")
        view = self.world.objc.pointer(b"setBytes:length:atIndex:", 2, data, length)
        self.bound[_integer(index, "index")] = np.frombuffer(bytes(view), dtype=np.uint8).copy()

    def setThreadgroupMemoryLength_atIndex_(self, length: int, index: int) -> None:
        length, index = _integer(length, "length"), _integer(index, "index")
        if not 0 <= index <= 30:
            raise AssertionError(f"setThreadgroupMemoryLength: index {index} out of range")
        if length % 16:
            raise AssertionError(
                f"-[MTLDebugComputeCommandEncoder setThreadgroupMemoryLength:atIndex:]: length "
                f"{length} must be a multiple of 16 bytes"
            )
        if length > self.world.maxThreadgroupMemoryLength():
            raise AssertionError(
                f"setThreadgroupMemoryLength: length {length} exceeds the device's "
                f"maxThreadgroupMemoryLength {self.world.maxThreadgroupMemoryLength()}"
            )
        self.command_buffer.log.append(("setThreadgroupMemoryLength", length, index))
        self.lengths[index] = length

    def _run(self, kind: str, grid: tuple[int, int, int], group: tuple[int, int, int]) -> None:
        library, name = self.pipeline.function.entry
        self.command_buffer.log.append((kind, name, grid, group))
        limit = self.pipeline.maxTotalThreadsPerThreadgroup()
        if group[0] * group[1] * group[2] > limit:
            self.command_buffer.failed = (
                f"threadgroup {group} exceeds the pipeline's maxTotalThreadsPerThreadgroup {limit}"
            )
            return
        memory = sum(self.lengths) + self.pipeline.staticThreadgroupMemoryLength()
        if memory > self.world.maxThreadgroupMemoryLength():
            self.command_buffer.failed = (
                f"threadgroup memory {memory} bytes exceeds maxThreadgroupMemoryLength "
                f"{self.world.maxThreadgroupMemoryLength()}"
            )
            return
        unset = [i for i in library.kernels[name].threadgroup_arguments if not self.lengths[i]]
        if unset:
            self.command_buffer.failed = f"threadgroup memory at index {unset[0]} was not set"
            return
        if self.command_buffer.fail:
            self.command_buffer.failed = "Execution of the command buffer was aborted"
            return
        pointers = {index: array.ctypes.data for index, array in self.bound.items()}
        rc = library.launch_pointers(name, pointers, grid, group, lengths=self.lengths)
        if rc != 0:  # in grid order; a failed launch is a failed command buffer
            self.command_buffer.failed = f"the emulator's launcher returned {rc}"

    def dispatchThreads_threadsPerThreadgroup_(self, grid: tuple, group: tuple) -> None:
        if not self.world.nonuniform:
            self.command_buffer.failed = "dispatchThreads needs non-uniform threadgroup support"
            return
        self._run("dispatchThreads", grid, group)

    def dispatchThreadgroups_threadsPerThreadgroup_(self, groups: tuple, group: tuple) -> None:
        grid = (groups[0] * group[0], groups[1] * group[1], groups[2] * group[2])
        self._run("dispatchThreadgroups", grid, group)

    def endEncoding(self) -> None:
        self.command_buffer.log.append("endEncoding")


class Record:
    """What one command buffer did (kept by the stand-in after the command buffer is gone)."""

    def __init__(self) -> None:
        self.log: list[object] = []


class FakeCommandBuffer(Proxy):
    def __init__(self, world: FakeDevice, fail: bool) -> None:
        super().__init__(world.objc.autoreleased("command buffer"))
        self.world = world
        self.fail = fail
        self.failed: str | None = None
        self.record = Record()
        self.log = self.record.log
        self.resources: list[Native] = []

    def computeCommandEncoder(self) -> FakeEncoder:
        return FakeEncoder(self)

    def commit(self) -> None:
        self.log.append("commit")

    def waitUntilCompleted(self) -> None:
        self.log.append("wait")
        # Metal's completion queue lets go of the bound resources a moment later, elsewhere.
        resources, self.resources = self.resources, []
        self.world.completion_queue(resources)

    def status(self) -> int:
        return 5 if self.failed else 4

    def error(self) -> FakeError | None:
        return FakeError(self.world.objc, self.failed) if self.failed else None


class FakeQueue(Proxy):
    world: FakeDevice

    def commandBuffer(self) -> FakeCommandBuffer:
        command_buffer = FakeCommandBuffer(self.world, self.world.fail_next)
        self.world.command_buffers.append(command_buffer.record)
        return command_buffer


class FakeSize:
    def __init__(self, width: int, height: int, depth: int) -> None:
        self.width, self.height, self.depth = width, height, depth


class FakeDevice(Proxy):
    """``MTLDevice``: every ``new*`` result is a fresh native object the caller owns."""

    def __init__(self, objc: FakeObjC) -> None:
        self.objc = objc
        super().__init__(Native(objc, "device"))
        self.fail_next = False
        self.nonuniform = True
        self.command_buffers: list[Record] = []
        self.options: list[FakeOptions] = []
        self.thread_limits: dict[str, int] = {}
        self.static_threadgroup: dict[str, int] = {}
        self.threadgroup_memory_limit = 32768
        self.completion_delay_s = 0.05
        self._completions: list[threading.Thread] = []

    def completion_queue(self, resources: list[Native]) -> None:
        """Releases ``resources`` on another thread after a delay, in that thread's own pool
        (a dispatch queue has one)."""

        def complete() -> None:
            time.sleep(self.completion_delay_s)
            with self.objc.autorelease_pool():
                for native in resources:
                    native.release()

        thread = threading.Thread(target=complete, daemon=True)
        thread.start()
        self._completions.append(thread)

    def drain_completions(self) -> None:
        for thread in self._completions:
            thread.join()
        self._completions.clear()

    def name(self) -> str:
        return "Stand-in GPU (the emulator)"

    def maxThreadsPerThreadgroup(self) -> FakeSize:
        return FakeSize(1024, 1024, 1024)

    def maxThreadgroupMemoryLength(self) -> int:
        return self.threadgroup_memory_limit

    def recommendedMaxWorkingSetSize(self) -> int:
        return 4 << 30

    def supportsFamily_(self, family: int) -> bool:
        family = _integer(family, "family")
        return self.nonuniform and family in (1004, 1005, 2002)

    def currentAllocatedSize(self) -> int:
        with self.objc.lock:
            return sum(n.nbytes for n in self.objc.live() if n.kind == "buffer" and n.owns_data)

    def _buffer(self, selector: bytes, data: np.ndarray, owns: bool) -> FakeBuffer:
        native = Native(self.objc, "buffer", data.size)
        native.data, native.owns_data = data, owns
        return self.objc.returned(selector, native, FakeBuffer)  # type: ignore[return-value]

    def newCommandQueue(self) -> FakeQueue:
        queue = self.objc.returned(b"newCommandQueue", Native(self.objc, "queue"), FakeQueue)
        queue.world = self  # type: ignore[attr-defined]
        return queue  # type: ignore[return-value]

    def newBufferWithLength_options_(self, length: int, options: int) -> FakeBuffer | None:
        length, _ = _integer(length, "length"), _integer(options, "options")
        if length == 0:
            return None  # Metal returns nil for a zero-length buffer
        data = np.zeros(length, dtype=np.uint8)
        return self._buffer(b"newBufferWithLength:options:", data, True)

    def newBufferWithBytes_length_options_(self, data: object, length: int, options: int):
        length, _ = _integer(length, "length"), _integer(options, "options")
        view = self.objc.pointer(b"newBufferWithBytes:length:options:", 2, data, length)
        copied = np.frombuffer(bytes(view), dtype=np.uint8).copy()
        return self._buffer(b"newBufferWithBytes:length:options:", copied, True)

    def newBufferWithBytesNoCopy_length_options_deallocator_(self, data, length, options, free):
        length, _ = _integer(length, "length"), _integer(options, "options")
        selector = b"newBufferWithBytesNoCopy:length:options:deallocator:"
        view = self.objc.pointer(selector, 2, data, length)
        return self._buffer(selector, np.frombuffer(view, dtype=np.uint8), False)

    def newLibraryWithSource_options_error_(self, source: str, options: FakeOptions, error: None):
        if not isinstance(source, str) or not isinstance(options, FakeOptions):
            raise TypeError("newLibraryWithSource:options:error: takes a str and MTLCompileOptions")
        if error is not None:
            raise TypeError("the error argument is an output: pass None")
        self.options.append(options)
        text, aliases = _as_metal_compiles(source)
        try:
            library = emulator.load_library(text)
        except KernelCompileError as caught:
            return None, FakeError(self.objc, caught.log)
        wrapped = self.objc.returned(
            b"newLibraryWithSource:options:error:", Native(self.objc, "library"), FakeLibrary
        )
        wrapped.library = library  # type: ignore[attr-defined]
        wrapped.world = self  # type: ignore[attr-defined]
        wrapped.aliases = aliases  # type: ignore[attr-defined]
        return wrapped, None

    def newComputePipelineStateWithFunction_error_(self, function: FakeFunction, error: None):
        if not isinstance(function, FakeFunction) or error is not None:
            raise TypeError("newComputePipelineStateWithFunction:error: takes an MTLFunction")
        pipeline = self.objc.returned(
            b"newComputePipelineStateWithFunction:error:",
            Native(self.objc, "pipeline"),
            FakePipeline,
        )
        function._native.retain()  # a pipeline keeps its function
        pipeline.function = FakeFunction(function._native)  # type: ignore[attr-defined]
        function._native.release()
        pipeline.world = self  # type: ignore[attr-defined]
        return pipeline, None


class FakeOptions:
    """``MTLCompileOptions`` of macOS 15 and later (``modern``) or of an earlier macOS."""

    modern = True

    def __init__(self) -> None:
        self.settings: dict[str, int | bool] = {}

    def __getattr__(self, name: str) -> Any:
        modern = ("setMathMode_", "setMathFloatingPointFunctions_")
        if name in modern and type(self).modern:
            return lambda value: self.settings.__setitem__(name, _integer(value, name))
        if name == "setFastMathEnabled_":
            return lambda value: self.settings.__setitem__(name, bool(value))
        raise AttributeError(name)


class FakeMetal:
    """The ``Metal`` module."""

    MTLResourceStorageModeShared = 0
    MTLMathModeSafe = 0
    MTLMathFloatingPointFunctionsPrecise = 1
    MTLGPUFamilyApple4 = 1004
    MTLGPUFamilyApple5 = 1005
    MTLGPUFamilyApple6 = 1006
    MTLGPUFamilyMac2 = 2002

    def __init__(self, device: FakeDevice, loaded: list[str]) -> None:
        self.device = device
        self.loaded = loaded
        self.default_device_works = True
        self.MTLCompileOptions = type(
            "MTLCompileOptions", (), {"alloc": staticmethod(lambda: _Alloc())}
        )

    def MTLCreateSystemDefaultDevice(self) -> FakeDevice | None:
        if metal_device.COREGRAPHICS_PATH not in self.loaded or not self.default_device_works:
            return None  # a command-line process without CoreGraphics sees no device
        return self.device

    def MTLCopyAllDevices(self) -> list[FakeDevice]:
        return [self.device]

    @staticmethod
    def MTLSizeMake(x: int, y: int, z: int) -> tuple[int, int, int]:
        return (_integer(x, "width"), _integer(y, "height"), _integer(z, "depth"))


class _Alloc:
    def init(self) -> FakeOptions:
        return FakeOptions()


class World:
    def __init__(self, objc: FakeObjC, fake: FakeDevice, metal: FakeMetal) -> None:
        self.objc, self.fake, self.metal = objc, fake, metal


@pytest.fixture(params=[PYOBJC_BEFORE_NEW_FAMILY_FIX, PYOBJC_AFTER_NEW_FAMILY_FIX],
                ids=lambda v: f"pyobjc-core-{v}")  # fmt: skip
def world(request: pytest.FixtureRequest, monkeypatch) -> Iterator[World]:
    """The stand-in, installed as ``Metal`` and ``objc``; after the test, checks that nothing
    was autoreleased outside a pool and that no buffer was viewed with ``as_buffer`` twice."""
    objc = FakeObjC(request.param)
    fake = FakeDevice(objc)
    loaded: list[str] = []
    metal = FakeMetal(fake, loaded)
    monkeypatch.setitem(sys.modules, "Metal", metal)
    monkeypatch.setitem(sys.modules, "objc", objc)
    monkeypatch.setattr(metal_device, "_on_macos", lambda: True)
    monkeypatch.setattr(metal_device, "_dlopen", loaded.append)
    monkeypatch.setattr(metal_device, "_REGISTERED", [])
    metal_device._load_coregraphics.cache_clear()
    yield World(objc, fake, metal)
    metal_device._load_coregraphics.cache_clear()
    gc.collect()
    fake.drain_completions()
    assert objc.unpooled == [], "autoreleased with no pool in place (never drained)"
    viewed = [n.as_buffer_calls for n in objc.natives if n.as_buffer_calls > 1]
    assert viewed == [], "a buffer's contents were viewed with as_buffer more than once"


@pytest.fixture
def gpu(world: World) -> tuple[metal_device.MetalDevice, FakeDevice]:
    return metal_device.MetalDevice(), world.fake


def test_ops_run_through_the_device_path_in_order(gpu) -> None:
    device, fake = gpu
    values = np.arange(12, dtype=np.float32)
    operand = ops.Strided(values, Layout((4, 3), (1, 4), 0))
    out = ops.strided_copy(device, operand)
    np.testing.assert_array_equal(out.reshape(4, 3), values.reshape(3, 4).T)
    log = fake.command_buffers[-1].log
    assert log == [("dispatchThreads", "strided_copy_f32", (12, 1, 1), (32, 1, 1)), "endEncoding",
                   "commit", "wait"]  # fmt: skip


def test_buffers_shorter_than_the_minimum_are_padded(gpu) -> None:
    """PyObjC checks the Python buffer against the requested length: a 3-float input, a
    one-element operand and matmul's 4-byte placeholder for C must be padded first."""
    device, _ = gpu
    three = np.array([0.0, 1.0, -1.0], dtype=np.float32)
    result = ops.unary(device, "exp", ops.Strided.contiguous(three))
    np.testing.assert_allclose(result, np.exp(three), rtol=1e-6)
    one = ops.Strided.contiguous(np.array([2.0], dtype=np.float32))
    total, _ = ops.binary(device, "mul", ops.Strided.contiguous(three), one)
    np.testing.assert_array_equal(total.reshape(-1)[:3], three * 2)
    a = ops.Strided.contiguous(np.ones((2, 3), dtype=np.float32))
    b = ops.Strided.contiguous(np.ones((3, 2), dtype=np.float32))
    product, shape = ops.matmul(device, a, b)
    np.testing.assert_array_equal(product.reshape(shape), np.full((2, 2), 3.0))
    _, _, copied = device._bind(np.zeros(0, dtype=np.float32))  # empty: a zero-filled minimum
    assert copied


def test_the_fake_refuses_what_pyobjc_refuses(world) -> None:
    fake = world.fake
    with pytest.raises(ValueError, match="Requesting buffer of 16, have buffer of 4"):
        fake.newBufferWithBytes_length_options_(memoryview(b"abcd"), 16, 0)
    with pytest.raises(TypeError, match="expecting a buffer"):
        fake.newBufferWithBytes_length_options_([1, 2, 3, 4], 4, 0)
    with pytest.raises(TypeError, match="integer"):
        fake.newBufferWithLength_options_(16.0, 0)


def test_new_results_are_owned_once_and_freed_when_dropped(world) -> None:
    """Each new* result is held once (by Python); dropping the arrays and the device frees
    every buffer, queue, library, function and pipeline."""
    device = metal_device.MetalDevice()
    fake = world.fake
    assert device.queue.retainCount() == 1
    start = fake.currentAllocatedSize()
    small = ops.Strided.contiguous(np.linspace(-1, 1, 40, dtype=np.float32))
    for _ in range(5):
        out = device.empty(1000, np.float32)
        out[:] = 1.0
        result = ops.unary(device, "exp", small)  # one copied input, one result buffer
        assert fake.currentAllocatedSize() > start
        del out, result
    assert wait_for_allocated_size(fake, start) == start
    del device
    gc.collect()
    fake.drain_completions()
    assert [native.kind for native in world.objc.live()] == ["device"]


def test_ownership_metadata_keeps_pyobjcs_argument_metadata(world) -> None:
    metal_device.MetalDevice()
    registered = world.objc.metadata
    for selector in metal_device.OWNED_RESULT_SELECTORS:
        assert registered[selector]["retval"]["already_retained"] is True
        original = PYOBJC_METAL_METADATA[selector].get("arguments", {})
        for index, argument in original.items():
            for key, value in argument.items():
                assert registered[selector]["arguments"][index][key] == value, (selector, index)
    metal_device.MetalDevice()  # registering once per process is enough
    assert len(world.objc.registrations) == len(metal_device.OWNED_RESULT_SELECTORS)


def test_coregraphics_is_loaded_before_the_device_and_all_devices_is_the_fallback(world) -> None:
    device = metal_device.MetalDevice()
    assert device.device is world.fake
    assert world.metal.loaded == [metal_device.COREGRAPHICS_PATH]
    world.metal.default_device_works = False  # e.g. a headless session
    assert metal_device.MetalDevice().device is world.fake  # from MTLCopyAllDevices()


@pytest.mark.parametrize("modern", [True, False], ids=["macos15", "before-macos15"])
def test_math_is_precise_on_every_macos_and_part_of_the_cache_key(world, monkeypatch, modern):
    monkeypatch.setattr(FakeOptions, "modern", modern)
    device = metal_device.MetalDevice()
    ops.unary(device, "exp", ops.Strided.contiguous(np.ones(4, np.float32)))
    settings = world.fake.options[-1].settings
    if modern:
        assert settings == {"setMathMode_": 0, "setMathFloatingPointFunctions_": 1}
    else:
        assert settings == {"setFastMathEnabled_": False}
    tag = device._options_tag
    monkeypatch.setattr(FakeOptions, "modern", not modern)
    other = metal_device.MetalDevice()
    assert other._options_tag != tag and other._key("src") != device._key("src")


def test_without_nonuniform_threadgroups_whole_groups_are_dispatched(world) -> None:
    world.fake.nonuniform = False
    device = metal_device.MetalDevice()
    values = np.arange(1500, dtype=np.float32) - 750
    result = ops.unary(device, "relu", ops.Strided.contiguous(values))
    np.testing.assert_array_equal(result, np.maximum(values, 0))
    kind, _, grid, group = world.fake.command_buffers[-1].log[0]
    # two whole groups of 1024: 548 threads past the end, stopped by the kernel's guard
    assert (kind, grid, group) == ("dispatchThreadgroups", (2048, 1, 1), (1024, 1, 1))


def test_results_are_shared_buffers_bound_in_place(gpu) -> None:
    device, _ = gpu
    out = device.empty(10, np.float32)
    assert isinstance(metal_device._allocation_of(out), metal_device._SharedAllocation)
    _, offset, copied = device._bind(out[3:])
    assert offset == 12 and not copied
    first, _ = ops.binary(device, "add", ops.Strided.contiguous(out), ops.Strided.contiguous(out))
    assert metal_device._allocation_of(first) is not None  # a result is again a shared buffer


def test_copied_outputs_are_written_back_and_inputs_are_not(gpu) -> None:
    device, _ = gpu
    relu = (
        "#include <metal_stdlib>\nusing namespace metal;\n"
        "kernel void relu(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],"
        " uint id [[thread_position_in_grid]]) { out[id] = fmax(in[id], 0.0f); }\n"
    )
    values = np.array([-1.0, 2.0, -3.0], dtype=np.float32)
    out = np.zeros(3, dtype=np.float32)  # ordinary numpy memory: copied in, copied back
    device.run_kernel(relu, "relu", [values, out], 3)
    np.testing.assert_array_equal(out, [0.0, 2.0, 0.0])
    np.testing.assert_array_equal(values, [-1.0, 2.0, -3.0])
    with pytest.raises(KernelNotFoundError):
        device.run_kernel(relu, "gelu", [values, out], 3)


def test_failures_carry_metals_text(gpu) -> None:
    device, fake = gpu
    with pytest.raises(KernelCompileError, match="undefined_name"):
        device.run_kernel(
            "#include <metal_stdlib>\nkernel void k(device float* o [[buffer(0)]],"
            " uint i [[thread_position_in_grid]]) { o[i] = undefined_name; }\n",
            "k",
            [np.zeros(1, np.float32)],
            1,
        )
    fake.fail_next = True
    with pytest.raises(KernelLaunchError, match="aborted"):
        ops.unary(device, "exp", ops.Strided.contiguous(np.ones(4, np.float32)))


def test_page_aligned_arrays_are_wrapped_without_a_copy(gpu) -> None:
    device, _ = gpu
    page = metal_device.PAGE_SIZE
    raw = np.zeros(3 * page, dtype=np.uint8)
    start = (-raw.ctypes.data) % page
    aligned = raw[start : start + page].view(np.float32)
    _, offset, copied = device._bind(aligned)
    assert not copied and offset == 0
    unaligned = raw[start + 4 : start + 4 + page].view(np.float32)
    _, _, copied = device._bind(unaligned)
    assert copied


def test_without_metal_the_device_says_why(world, monkeypatch) -> None:
    monkeypatch.setattr(metal_device, "_on_macos", lambda: False)
    with pytest.raises(MetalUnavailableError, match="needs macOS"):
        metal_device.MetalDevice()


# ------------------------------------------------------------------------------------------------
# Kernel names are Metal's
# ------------------------------------------------------------------------------------------------

RELU_BODY = (
    "(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],"
    " uint id [[thread_position_in_grid]]) { out[id] = fmax(in[id], 0.0f); }\n"
)
PRELUDE = "#include <metal_stdlib>\nusing namespace metal;\n"


@pytest.mark.parametrize(
    ("source", "metal_name", "hidden_name"),
    [
        (
            PRELUDE + '[[host_name("relu_alias")]] kernel void relu' + RELU_BODY,
            "relu_alias",
            "relu",
        ),
        (PRELUDE + "[[kernel]] void relu" + RELU_BODY, "relu", "gelu"),
    ],
    ids=["host_name", "attribute-spelling"],
)
def test_kernels_metal_names_run_even_when_msl_py_cannot_read_them(
    gpu, source: str, metal_name: str, hidden_name: str
) -> None:
    """Metal's functionNames decide what exists: a kernel it compiled runs although msl.py
    cannot describe it (no KeyError), and a name it does not know is a KernelNotFoundError
    listing Metal's names, not msl.py's."""
    device, _ = gpu
    values = np.array([-1.0, 2.0, -3.0, 4.0], dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)  # ordinary memory: copied, written back
    device.run_kernel(source, metal_name, [values, out], 4)
    np.testing.assert_array_equal(out, np.maximum(values, 0))
    assert device.kernel_names(source) == (metal_name,)
    with pytest.raises(KernelNotFoundError) as caught:
        device.run_kernel(source, hidden_name, [values, out], 4)
    assert caught.value.available == (metal_name,)
    strided = np.zeros(8, dtype=np.float32)[::2]
    with pytest.raises(KernelArgumentError, match="C-contiguous"):
        device.run_kernel(source, metal_name, [values, strided], 4)


def test_metal_compiler_errors_and_lint_errors_are_llmfs_errors(gpu) -> None:
    device, _ = gpu
    with pytest.raises(KernelCompileError) as caught:
        device.pipeline(
            PRELUDE + "kernel void k(device float* o [[buffer(0)]]) { o[0] = oops; }", "k"
        )
    assert "oops" in caught.value.log and caught.value.what == "the MSL source (Metal)"
    with pytest.raises(KernelLintError, match="double"):
        device.pipeline(PRELUDE + "kernel void k(device float* o [[buffer(0)]]) { double d; }", "k")
    with pytest.raises(MetalError, match="rule set"):
        check_msl(PRELUDE, rules="emulator-only")
    check_msl(PRELUDE, rules="metal")


# ------------------------------------------------------------------------------------------------
# One as_buffer per buffer; autorelease pools
# ------------------------------------------------------------------------------------------------


def test_each_buffer_is_viewed_once_and_its_view_lives_as_long_as_an_array(gpu, world) -> None:
    """as_buffer leaks a reference per call and its view does not own the buffer: every result
    is viewed once, and a result stays valid while only a slice of it is kept."""
    device, fake = gpu
    values = np.linspace(-2, 2, 50, dtype=np.float32)
    result = ops.unary(device, "exp", ops.Strided.contiguous(values))
    tail = result[40:]
    del result
    gc.collect()
    fake.drain_completions()
    np.testing.assert_allclose(tail, np.exp(values[40:]), rtol=1e-6)  # not the 0xDB junk
    buffers = [n for n in world.objc.natives if n.kind == "buffer"]
    assert buffers and max(n.as_buffer_calls for n in buffers) == 1
    shared = [n for n in buffers if n.as_buffer_calls]
    assert world.objc.leaked_references == len(shared)  # one per viewed buffer, never more
    del tail
    assert wait_for_allocated_size(fake, 0) == 0


def test_releases_and_pipeline_creation_run_inside_autorelease_pools(world) -> None:
    """What Metal autoreleases while a pipeline is made (its errors, functionNames) or while a
    buffer, library or pipeline is freed lands in a pool that is drained; nothing in PyObjC's
    never-drained global pool."""
    device = metal_device.MetalDevice()
    for op in ("exp", "neg"):
        ops.unary(device, op, ops.Strided.contiguous(np.ones(3000, np.float32)))
    with pytest.raises(KernelCompileError):
        device.pipeline(PRELUDE + "kernel void k(device float* o [[buffer(0)]]) { o[0] = x; }", "k")
    out = device.empty(100, np.float32)
    out[:] = 1.0
    del out
    gc.collect()
    assert world.objc.unpooled == []
    del device
    gc.collect()
    world.fake.drain_completions()
    assert world.objc.unpooled == []
    assert [n.kind for n in world.objc.live()] == ["device"]


def test_without_the_registration_only_pyobjc_13_frees_metal_objects(world, monkeypatch) -> None:
    """The two PyObjC releases the workflow runs: before 13.0 the registration is what frees a
    new* result; from 13.0 on the method-family rule does it too (and the two agree)."""
    monkeypatch.setattr(metal_device, "register_ownership_metadata", lambda objc: None)
    device = metal_device.MetalDevice()
    start = world.fake.currentAllocatedSize()
    out = device.empty(1000, np.float32)
    del out
    leaked = world.objc.__version__ == PYOBJC_BEFORE_NEW_FAMILY_FIX
    expected = start + 4000 if leaked else start
    assert (
        wait_for_allocated_size(world.fake, expected, timeout=1.0 if leaked else 30.0) == expected
    )
    del device
    gc.collect()
    with world.objc.autorelease_pool():  # give the leaked objects back, for a clean teardown
        for native in world.objc.live():
            while native.kind != "device" and native.retain_count > 0:
                native.release()


# ------------------------------------------------------------------------------------------------
# Offsets aligned as Metal requires
# ------------------------------------------------------------------------------------------------

WIDE = PRELUDE + (
    "kernel void twice_long(device const long* in [[buffer(0)]], device long* out [[buffer(1)]],"
    " uint id [[thread_position_in_grid]]) { out[id] = 2 * in[id]; }\n"
)
LOOKUP = PRELUDE + (
    "kernel void lookup(constant float* table [[buffer(0)]], device float* out [[buffer(1)]],"
    " uint id [[thread_position_in_grid]]) { out[id] = table[id * 7u]; }\n"
)
HALF = PRELUDE + (
    "kernel void neg_half(device const half* in [[buffer(0)]], device half* out [[buffer(1)]],"
    " uint id [[thread_position_in_grid]]) { out[id] = -in[id]; }\n"
)


def test_offsets_are_aligned_to_the_element_type_or_copied(gpu) -> None:
    device, _ = gpu
    raw = device.empty(4096, np.uint8)
    # a 4-byte offset: in place for float, copied for an 8-byte long
    inputs = raw[4 : 4 + 64].view(np.int64)
    inputs[:] = np.arange(8) - 3
    _, offset, copied = device._bind(inputs, 8)
    assert copied and offset == 0
    _, offset, copied = device._bind(raw[4 : 4 + 64].view(np.float32), 4)
    assert not copied and offset == 4
    out = device.empty(8, np.int64)
    device.run_kernel(WIDE, "twice_long", [inputs, out], 8)
    np.testing.assert_array_equal(out, 2 * (np.arange(8) - 3))
    # an output at a misaligned offset: copied, and the result copied back into place
    target = raw[1004 : 1004 + 64].view(np.int64)
    device.run_kernel(WIDE, "twice_long", [inputs, target], 8)
    np.testing.assert_array_equal(target, 2 * (np.arange(8) - 3))
    # an odd byte offset for float: copied
    odd = raw[2001 : 2001 + 16].view(np.float32)
    odd[:] = [1, -2, 3, -4]
    relu_out = device.empty(4, np.float32)
    device.run_kernel(PRELUDE + "kernel void relu" + RELU_BODY, "relu", [odd, relu_out], 4)
    np.testing.assert_array_equal(relu_out, [1, 0, 3, 0])


def test_constant_buffers_bound_by_setbuffer_use_the_constant_alignment(gpu) -> None:
    """A constant table too large for setBytes is bound with setBuffer: offset 4 breaks the
    constant alignment (256) although it suits a float."""
    device, _ = gpu
    table = device.empty(2000, np.float32)
    table[:] = np.arange(2000, dtype=np.float32)
    view = table[1:]  # 7996 bytes: above SET_BYTES_LIMIT
    out = device.empty(100, np.float32)
    device.run_kernel(LOOKUP, "lookup", [view, out], 100)
    np.testing.assert_array_equal(out, np.arange(100, dtype=np.float32) * 7 + 1)
    aligned = table[64:]  # 256 bytes in: bound in place
    device.run_kernel(LOOKUP, "lookup", [aligned, out], 100)
    np.testing.assert_array_equal(out, np.arange(100, dtype=np.float32) * 7 + 64)


@given(offset=st.integers(0, 200), count=st.integers(1, 40), dtype=st.sampled_from(["f4", "f2"]))
@hypothesis_settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
def test_any_view_of_a_shared_buffer_binds_legally_and_computes_numpys_result(
    gpu, offset: int, count: int, dtype: str
) -> None:
    """Views at every byte offset, as input and as output: never a misaligned setBuffer (the
    stand-in's validation layer would raise), always numpy's result in place."""
    device, _ = gpu
    dt = np.dtype(dtype)
    raw = device.empty(1024, np.uint8)
    size = count * dt.itemsize
    source = raw[offset : offset + size].view(dt)
    source[:] = np.linspace(-3, 3, count).astype(dt)
    target = raw[offset + 512 : offset + 512 + size].view(dt)
    if dt == np.float32:
        device.run_kernel(PRELUDE + "kernel void relu" + RELU_BODY, "relu", [source, target], count)
        expected = np.maximum(source, 0)
    else:
        device.run_kernel(HALF, "neg_half", [source, target], count)
        expected = -source
    np.testing.assert_array_equal(target, expected)


@pytest.mark.parametrize(
    ("type_text", "expected"),
    [("device const float*", 4), ("device half*", 2), ("device float4*", 16),
     ("device float3*", 16), ("device packed_float3*", 4), ("device half2*", 4),
     ("device const atomic_uint*", 4), ("device MyStruct*", 16), ("device long4*", 16),
     ("constant float*", 256), ("constant float&", 256)],
)  # fmt: skip
def test_offset_alignment_follows_msl_layout(type_text: str, expected: int) -> None:
    from llmfs.tensor.backends.metal.msl import Parameter

    param = Parameter(type_text, "p", "buffer", 0, 1)
    assert metal_device.offset_alignment(param) == expected
    assert metal_device.offset_alignment(None) == metal_device.CONSTANT_OFFSET_ALIGNMENT


# ------------------------------------------------------------------------------------------------
# Per-pipeline thread limits; cached sources and keys; what the device reports
# ------------------------------------------------------------------------------------------------


def test_the_pipelines_own_thread_limit_sizes_and_bounds_the_threadgroup(gpu) -> None:
    device, fake = gpu
    fake.thread_limits["unary_f32"] = 448  # fewer than 1,024 (registers, for example)
    values = np.linspace(-1, 1, 5000, dtype=np.float32)
    result = ops.unary(device, "neg", ops.Strided.contiguous(values))
    np.testing.assert_array_equal(result, -values)
    kind, name, grid, group = fake.command_buffers[-1].log[0]
    assert name == "unary_f32" and group == (448, 1, 1)
    source = ops.family_source("elementwise")
    buffers = [values, device.empty(5000, np.float32),
               ops.view_descriptor(Layout((5000,), (1,), 0)), np.array([5000], np.uint32),
               np.array([ops.UNARY_OPS.index("neg")], np.int32)]  # fmt: skip
    with pytest.raises(KernelArgumentError, match="448"):
        device.run_kernel(source, "unary_f32", buffers, 5000, threadgroup=512)
    fake.nonuniform = False
    whole = metal_device.MetalDevice()
    ops.unary(whole, "neg", ops.Strided.contiguous(values))
    kind, _, grid, group = fake.command_buffers[-1].log[0]
    assert (kind, group) == ("dispatchThreadgroups", (448, 1, 1)) and grid[0] % 448 == 0


def test_family_sources_are_read_once_and_hashed_once(gpu, monkeypatch) -> None:
    device, _ = gpu
    reads: list[str] = []
    real_read = ops.Path.read_text

    def counting_read(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(self.name)
        return real_read(self, *args, **kwargs)

    hashes: list[int] = []
    real_sha = metal_device.hashlib.sha256

    class CountingHashlib:
        @staticmethod
        def sha256(data: bytes):  # type: ignore[no-untyped-def]
            hashes.append(len(data))
            return real_sha(data)

    monkeypatch.setattr(ops.Path, "read_text", counting_read)
    monkeypatch.setattr(metal_device, "hashlib", CountingHashlib)
    ops.family_source.cache_clear()
    operand = ops.Strided.contiguous(np.ones(10, np.float32))
    for op in ("exp", "neg", "relu", "exp"):
        ops.unary(device, op, operand)
    ops.binary(device, "add", operand, operand)
    assert sorted(reads) == ["common.metal", "elementwise.metal"]
    assert len(hashes) == 1
    ops.family_source.cache_clear()


def test_the_device_reports_what_it_is(gpu) -> None:
    device, _ = gpu
    report = device.report()
    assert report["name"] == "Stand-in GPU (the emulator)"
    assert report["families"] == ["MTLGPUFamilyApple4", "MTLGPUFamilyApple5", "MTLGPUFamilyMac2"]
    assert report["max_threads_per_threadgroup"] == (1024, 1024, 1024)
    assert report["max_threadgroup_memory_length"] == 32768
    assert report["recommended_max_working_set_size"] == 4 << 30
    assert report["nonuniform_threadgroups"] is True


# ------------------------------------------------------------------------------------------------
# [[threadgroup(n)]] arguments sized at launch
# ------------------------------------------------------------------------------------------------

TREE_SUM = PRELUDE + (
    "kernel void tree_sum(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],\n"
    "                     threadgroup float* partial [[threadgroup(0)]],\n"
    "                     uint i [[thread_position_in_grid]],\n"
    "                     uint t [[thread_index_in_threadgroup]],\n"
    "                     uint g [[threadgroup_position_in_grid]],\n"
    "                     uint size [[threads_per_threadgroup]]) {\n"
    "    partial[t] = x[i];\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    for (uint stride = size / 2; stride > 0; stride /= 2) {\n"
    "        if (t < stride) partial[t] += partial[t + stride];\n"
    "        threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    }\n"
    "    if (t == 0) out[g] = partial[0];\n"
    "}\n"
)
#: The kernel with 16 KiB of threadgroup variables of its own besides its argument.
TILED = PRELUDE + (
    "kernel void tiled(device float* out [[buffer(0)]],\n"
    "                  threadgroup float* extra [[threadgroup(0)]],\n"
    "                  uint i [[thread_position_in_grid]]) {\n"
    "    threadgroup float tile[4096];\n"
    "    tile[i] = 1.0f;\n"
    "    extra[i] = tile[i];\n"
    "    out[i] = extra[i];\n"
    "}\n"
)


def _tree_sum_buffers(groups: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    return np.arange(groups * size, dtype=np.float32) % 7, np.zeros(groups, np.float32)


@pytest.mark.parametrize("through", ["device", "run_kernel"])
def test_threadgroup_arguments_are_sized_with_set_threadgroup_memory_length(
    gpu, monkeypatch, through: str
) -> None:
    """The lengths go to the encoder before the dispatch, and the kernel sums its groups in
    them; ``run_kernel(backend="metal")`` takes ``threadgroup_memory`` as the emulator does."""
    device, fake = gpu
    x, out = _tree_sum_buffers(3, 128)
    if through == "device":
        device.run_kernel(TREE_SUM, "tree_sum", [x, out], 384, 128, threadgroup_memory={0: 512})
    else:
        from llmfs.tensor.backends import metal

        monkeypatch.setattr(metal_device, "default_device", lambda: device)
        metal.run_kernel(
            TREE_SUM, "tree_sum", [x, out], 384, 128, backend="metal",
            threadgroup_memory={0: 512},
        )  # fmt: skip
    np.testing.assert_array_equal(out, x.reshape(3, 128).sum(axis=1))
    log = fake.command_buffers[-1].log
    assert log[0] == ("setThreadgroupMemoryLength", 512, 0)
    assert log[1] == ("dispatchThreads", "tree_sum", (384, 1, 1), (128, 1, 1))


_LENGTHS = st.dictionaries(
    st.one_of(st.integers(-2, 33), st.just(True), st.text(max_size=1)),
    st.one_of(
        st.integers(-32, 40000),
        st.integers(1, 2048).map(lambda n: 16 * n),
        st.floats(0, 1024),
        st.just(False),
    ),
    max_size=3,
)


@given(lengths=_LENGTHS)
@hypothesis_settings(max_examples=60, deadline=None,
                     suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
def test_the_device_refuses_exactly_the_lengths_the_emulator_refuses(gpu, lengths) -> None:
    """One rule on both paths: any ``threadgroup_memory`` either runs on both with the same
    sums or is refused by both with the same KernelArgumentError, before anything runs."""
    device, fake = gpu
    library = emulator.load_library(TREE_SUM)
    x, out = _tree_sum_buffers(2, 64)
    launches = len(fake.command_buffers)
    try:
        library.run("tree_sum", [x, out], 128, 64, threadgroup_memory=lengths)
    except KernelArgumentError as emulated:
        with pytest.raises(KernelArgumentError) as caught:
            device.run_kernel(TREE_SUM, "tree_sum", [x, out], 128, 64, threadgroup_memory=lengths)
        assert str(caught.value) == str(emulated)
        assert len(fake.command_buffers) == launches  # refused before any command buffer
        return
    expected = out.copy()
    out[:] = -1
    device.run_kernel(TREE_SUM, "tree_sum", [x, out], 128, 64, threadgroup_memory=lengths)
    np.testing.assert_array_equal(out, expected)


def test_the_kernels_own_threadgroup_variables_count_against_the_devices_limit(gpu) -> None:
    """Metal's staticThreadgroupMemoryLength and the lengths together within
    maxThreadgroupMemoryLength: refused by the shared rule, with the numbers, before the GPU
    would fail the command buffer."""
    device, fake = gpu
    fake.static_threadgroup["tiled"] = 16384  # float tile[4096]
    out = np.zeros(4, np.float32)
    device.run_kernel(TILED, "tiled", [out], 4, threadgroup_memory={0: 16384})  # 32 KiB: fits
    np.testing.assert_array_equal(out, 1.0)
    with pytest.raises(
        KernelArgumentError,
        match=r"threadgroup-memory-limit\]: threadgroup_memory asks for 16400 bytes and its "
        r"threadgroup variables 16384 more; Metal allows 32768",
    ):
        device.run_kernel(TILED, "tiled", [out], 4, threadgroup_memory={0: 16400})
    fake.static_threadgroup["tiled"] = 0
    fake.threadgroup_memory_limit = 16384  # a device with less threadgroup memory
    smaller = metal_device.MetalDevice()
    assert smaller.max_threadgroup_memory == 16384
    with pytest.raises(KernelArgumentError, match="asks for 16400 bytes; Metal allows 16384"):
        smaller.run_kernel(TILED, "tiled", [out], 4, threadgroup_memory={0: 16400})
    smaller.run_kernel(TILED, "tiled", [out], 4, threadgroup_memory={0: 16384})


def test_a_kernel_msl_py_cannot_read_gets_the_checks_that_need_no_parameters(gpu) -> None:
    """A kernel Metal compiled but msl.py could not describe (a macro-generated one, say;
    here msl.py's description is removed, as the stand-in's GPU needs one to run it): lengths
    are still multiples of 16 at indices of Metal's table, the rest is Metal's to check."""
    device, _ = gpu
    source = TREE_SUM.replace("kernel void tree_sum", '[[host_name("sums")]] kernel void tree_sum')
    device.pipeline(source, "sums")
    del device._kernels[device._key(source)]["sums"]
    assert device._kernel(source, "sums") is None
    x, out = _tree_sum_buffers(2, 64)
    device.run_kernel(source, "sums", [x, out], 128, 64, threadgroup_memory={0: 256})
    np.testing.assert_array_equal(out, x.reshape(2, 64).sum(axis=1))
    with pytest.raises(KernelArgumentError, match="positive multiple of 16"):
        device.run_kernel(source, "sums", [x, out], 128, 64, threadgroup_memory={0: 250})
    with pytest.raises(KernelArgumentError, match="from 0 to 30"):
        device.run_kernel(source, "sums", [x, out], 128, 64, threadgroup_memory={31: 256})
    # Without a length, msl.py cannot say one is missing: Metal's command buffer fails.
    with pytest.raises(KernelLaunchError, match="index 0 was not set"):
        device.run_kernel(source, "sums", [x, out], 128, 64)


def test_the_fake_encoder_refuses_what_metals_validation_layer_refuses(gpu) -> None:
    device, fake = gpu
    pipeline = device.pipeline(TREE_SUM, "tree_sum")
    with fake.objc.autorelease_pool():  # command buffers and encoders are autoreleased
        encoder = device.queue.commandBuffer().computeCommandEncoder()
        encoder.setComputePipelineState_(pipeline)
        with pytest.raises(AssertionError, match="multiple of 16"):
            encoder.setThreadgroupMemoryLength_atIndex_(100, 0)
        with pytest.raises(AssertionError, match="out of range"):
            encoder.setThreadgroupMemoryLength_atIndex_(16, 31)
        with pytest.raises(AssertionError, match="maxThreadgroupMemoryLength"):
            encoder.setThreadgroupMemoryLength_atIndex_(32784, 0)
        with pytest.raises(TypeError, match="integer"):
            encoder.setThreadgroupMemoryLength_atIndex_(16.0, 0)
        encoder.setThreadgroupMemoryLength_atIndex_(16, 0)
        assert encoder.lengths[0] == 16
        del encoder


def test_a_matmul_kernel_of_ones_own_runs_through_the_device_path(gpu) -> None:
    """``kernel_matmul`` on a Mac: the operands copied by the library's copy kernel, then one
    3-D dispatch of whole tiles of the user's kernel, bound like any other launch."""
    from tests.tensor.backends.metal.test_metal_matmul_kernel import TILE, TILED

    device, fake = gpu
    rng = np.random.default_rng(4)
    a = (rng.integers(-8, 9, (2, 5, 7)) / 4).astype(np.float32)
    b = (rng.integers(-8, 9, (7, 6)) / 4).astype(np.float32)
    kernel = ops.MatmulKernel(TILED, "tiled", TILE)
    values, shape = ops.kernel_matmul(
        device,
        kernel,
        ops.Strided.contiguous(a),
        ops.Strided(b.reshape(-1), Layout((7, 6), (6, 1), 0)),
    )
    np.testing.assert_array_equal(values.reshape(shape), a @ b)
    dispatch = fake.command_buffers[-1].log[0]
    # The weight is shared by the batch: its rows fold into M = 10, one launch of whole tiles.
    assert dispatch == ("dispatchThreads", "tiled", (8, 12, 1), (TILE, TILE, 1))
