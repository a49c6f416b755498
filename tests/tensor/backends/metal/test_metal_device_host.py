"""The host side of the Metal path (buffers, binding, ownership, compile options, dispatch,
read-back, errors), run against a stand-in for PyObjC's ``Metal`` and ``objc`` modules whose
"GPU" is the emulator.

The stand-in is strict where PyObjC is strict, so that these tests fail on the mistakes a Mac
would punish:

* a pointer argument is a Python buffer checked against the length asked for (PyObjC raises
  ``ValueError: Requesting buffer of 16, have buffer of 4`` when it is shorter) and refused
  without PyObjC's ``c_array_length_in_arg`` metadata; integers must be integers;
* objects returned by ``new*`` instance methods start with one retain that the caller owns; the
  bridge retains every object it hands to Python once more and releases that when the proxy
  dies, and gives the caller's retain back only when the selector's metadata says
  ``already_retained`` (as pyobjc-core does). A missing registration therefore leaks, and the
  fake device's ``currentAllocatedSize()`` shows it;
* registering metadata for a selector replaces the earlier registration (as pyobjc-core does),
  so a registration that forgets the argument metadata breaks the pointer arguments;
* ``MTLCreateSystemDefaultDevice()`` finds no device until CoreGraphics is loaded (a
  command-line process on macOS); ``dispatchThreads`` fails on a device without non-uniform
  threadgroup support.

This is not a substitute for a Mac (the ``metal``-marked tests are).
"""

from __future__ import annotations

import contextlib
import copy
import gc
import operator
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from llmfs.tensor.backends.metal import device as metal_device
from llmfs.tensor.backends.metal import emulator, emulator_available, ops
from llmfs.tensor.backends.metal.errors import (
    KernelCompileError,
    KernelLaunchError,
    KernelNotFoundError,
    MetalUnavailableError,
)
from llmfs.tensor.layout import Layout

pytestmark = pytest.mark.skipif(
    not emulator_available(), reason="the stand-in GPU is the emulator, which needs a C++ compiler"
)

#: The metadata pyobjc-framework-Metal registers for the selectors the device path calls (its
#: ``_metadata.py``): no ``already_retained`` on any result.
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
        "arguments": {2: {"type": b"@"}, 3: {"type": b"@"}, 4: {"type": b"^@"}},
    },
    b"newFunctionWithName:": {"required": True, "retval": {"type": b"@"}},
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


def _integer(value: object, what: str) -> int:
    if isinstance(value, bool | float) or not hasattr(value, "__index__"):
        raise TypeError(f"{what}: expected an integer, got {type(value).__name__}")
    return operator.index(value)  # type: ignore[arg-type]


class FakeObjC:
    """The ``objc`` module: the selector metadata registry and the bridge's ownership rules."""

    def __init__(self) -> None:
        self.metadata = copy.deepcopy(PYOBJC_METAL_METADATA)
        self.registrations: list[bytes] = []
        self.natives: list[Native] = []

    autorelease_pool = staticmethod(contextlib.nullcontext)

    def registerMetaDataForSelector(self, cls: bytes, selector: bytes, metadata: dict) -> None:
        if not isinstance(cls, bytes) or not isinstance(selector, bytes):
            raise TypeError("registerMetaDataForSelector takes bytes class and selector names")
        self.registrations.append(selector)
        self.metadata[selector] = copy.deepcopy(metadata)  # replaces, as pyobjc-core does

    def returned(self, selector: bytes, native: Native, proxy_type: type[Proxy]) -> Proxy:
        """What Python receives for a ``new*`` result: a proxy holding its own retain; the
        caller's retain is given back only when the metadata says ``already_retained``."""
        proxy = proxy_type(native)
        if self.metadata.get(selector, {}).get("retval", {}).get("already_retained"):
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
        self.kind = kind
        self.nbytes = nbytes
        self.retain_count = 1  # the caller's, from a new* method
        objc.natives.append(self)

    def retain(self) -> None:
        self.retain_count += 1

    def release(self) -> None:
        if self.retain_count <= 0:
            raise AssertionError(f"over-release of a {self.kind} (a crash on a Mac)")
        self.retain_count -= 1


class Proxy:
    """PyObjC's Python object for one native object: one retain, released when it dies."""

    def __init__(self, native: Native) -> None:
        native.retain()
        self._native = native

    def __del__(self) -> None:
        self._native.release()

    def retainCount(self) -> int:
        return self._native.retain_count


class FakeError:
    def __init__(self, text: str) -> None:
        self.text = text

    def localizedDescription(self) -> str:
        return self.text


class FakeBuffer(Proxy):
    data: np.ndarray

    def contents(self) -> Any:
        data = self.data
        return type("Contents", (), {"as_buffer": lambda _, n: memoryview(data)[:n]})()

    def length(self) -> int:
        return self.data.size


class FakeLibrary(Proxy):
    library: emulator.EmulatorLibrary
    world: FakeDevice

    def newFunctionWithName_(self, name: str) -> Proxy | None:
        if not isinstance(name, str):
            raise TypeError(f"expected a str, got {type(name).__name__}")
        if name not in self.library.kernels:
            return None
        function = self.world.objc.returned(
            b"newFunctionWithName:", Native(self.world.objc, "function"), FakeFunction
        )
        function.entry = (self.library, name)  # type: ignore[attr-defined]
        return function


class FakeFunction(Proxy):
    entry: tuple[emulator.EmulatorLibrary, str]


class FakePipeline(Proxy):
    function: FakeFunction

    def maxTotalThreadsPerThreadgroup(self) -> int:
        return 1024

    def threadExecutionWidth(self) -> int:
        return 32


class FakeEncoder:
    def __init__(self, command_buffer: FakeCommandBuffer) -> None:
        self.command_buffer = command_buffer
        self.world = command_buffer.world
        self.bound: dict[int, np.ndarray] = {}

    def setComputePipelineState_(self, pipeline: FakePipeline) -> None:
        if not isinstance(pipeline, FakePipeline):
            raise TypeError(f"expected a pipeline, got {type(pipeline).__name__}")
        self.pipeline = pipeline

    def setBuffer_offset_atIndex_(self, buffer: FakeBuffer, offset: int, index: int) -> None:
        if not isinstance(buffer, FakeBuffer):
            raise TypeError(f"expected an MTLBuffer, got {type(buffer).__name__}")
        offset = _integer(offset, "offset")
        self.bound[_integer(index, "index")] = buffer.data[offset:]

    def setBytes_length_atIndex_(self, data: object, length: int, index: int) -> None:
        length = _integer(length, "length")
        view = self.world.objc.pointer(b"setBytes:length:atIndex:", 2, data, length)
        self.bound[_integer(index, "index")] = np.frombuffer(bytes(view), dtype=np.uint8).copy()

    def _run(self, kind: str, grid: tuple[int, int, int], group: tuple[int, int, int]) -> None:
        self.command_buffer.log.append((kind, self.pipeline.function.entry[1], grid, group))
        if self.command_buffer.fail:
            self.command_buffer.failed = "Execution of the command buffer was aborted"
            return
        library, name = self.pipeline.function.entry
        pointers = {index: array.ctypes.data for index, array in self.bound.items()}
        library.launch_pointers(name, pointers, grid, group)  # in grid order

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


class FakeCommandBuffer:
    def __init__(self, world: FakeDevice, fail: bool) -> None:
        self.world = world
        self.fail = fail
        self.failed: str | None = None
        self.log: list[object] = []

    def computeCommandEncoder(self) -> FakeEncoder:
        return FakeEncoder(self)

    def commit(self) -> None:
        self.log.append("commit")

    def waitUntilCompleted(self) -> None:
        self.log.append("wait")

    def status(self) -> int:
        return 5 if self.failed else 4

    def error(self) -> FakeError | None:
        return FakeError(self.failed) if self.failed else None


class FakeQueue(Proxy):
    world: FakeDevice

    def commandBuffer(self) -> FakeCommandBuffer:
        self.world.command_buffers.append(FakeCommandBuffer(self.world, self.world.fail_next))
        return self.world.command_buffers[-1]


class FakeDevice(Proxy):
    """``MTLDevice``: every ``new*`` result is a fresh native object the caller owns."""

    def __init__(self, objc: FakeObjC) -> None:
        self.objc = objc
        super().__init__(Native(objc, "device"))
        self.fail_next = False
        self.nonuniform = True
        self.command_buffers: list[FakeCommandBuffer] = []
        self.options: list[FakeOptions] = []

    def supportsFamily_(self, family: int) -> bool:
        family = _integer(family, "family")
        return self.nonuniform and family in (1004, 2002)

    def currentAllocatedSize(self) -> int:
        return sum(native.nbytes for native in self.objc.live() if native.kind == "buffer")

    def _buffer(self, selector: bytes, data: np.ndarray) -> FakeBuffer:
        buffer = self.objc.returned(selector, Native(self.objc, "buffer", data.size), FakeBuffer)
        buffer.data = data  # type: ignore[attr-defined]
        return buffer  # type: ignore[return-value]

    def newCommandQueue(self) -> FakeQueue:
        queue = self.objc.returned(b"newCommandQueue", Native(self.objc, "queue"), FakeQueue)
        queue.world = self  # type: ignore[attr-defined]
        return queue  # type: ignore[return-value]

    def newBufferWithLength_options_(self, length: int, options: int) -> FakeBuffer | None:
        length, _ = _integer(length, "length"), _integer(options, "options")
        if length == 0:
            return None  # Metal returns nil for a zero-length buffer
        return self._buffer(b"newBufferWithLength:options:", np.zeros(length, dtype=np.uint8))

    def newBufferWithBytes_length_options_(self, data: object, length: int, options: int):
        length, _ = _integer(length, "length"), _integer(options, "options")
        view = self.objc.pointer(b"newBufferWithBytes:length:options:", 2, data, length)
        copied = np.frombuffer(bytes(view), dtype=np.uint8).copy()
        return self._buffer(b"newBufferWithBytes:length:options:", copied)

    def newBufferWithBytesNoCopy_length_options_deallocator_(self, data, length, options, free):
        length, _ = _integer(length, "length"), _integer(options, "options")
        selector = b"newBufferWithBytesNoCopy:length:options:deallocator:"
        view = self.objc.pointer(selector, 2, data, length)
        return self._buffer(selector, np.frombuffer(view, dtype=np.uint8))

    def newLibraryWithSource_options_error_(self, source: str, options: FakeOptions, error: None):
        if not isinstance(source, str) or not isinstance(options, FakeOptions):
            raise TypeError("newLibraryWithSource:options:error: takes a str and MTLCompileOptions")
        if error is not None:
            raise TypeError("the error argument is an output: pass None")
        self.options.append(options)
        try:
            library = emulator.load_library(source)
        except KernelCompileError as caught:
            return None, FakeError(caught.log)
        wrapped = self.objc.returned(
            b"newLibraryWithSource:options:error:", Native(self.objc, "library"), FakeLibrary
        )
        wrapped.library = library  # type: ignore[attr-defined]
        wrapped.world = self  # type: ignore[attr-defined]
        return wrapped, None

    def newComputePipelineStateWithFunction_error_(self, function: FakeFunction, error: None):
        if not isinstance(function, FakeFunction) or error is not None:
            raise TypeError("newComputePipelineStateWithFunction:error: takes an MTLFunction")
        pipeline = self.objc.returned(
            b"newComputePipelineStateWithFunction:error:",
            Native(self.objc, "pipeline"),
            FakePipeline,
        )
        pipeline.function = function  # type: ignore[attr-defined]
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


@pytest.fixture
def world(monkeypatch) -> Iterator[World]:
    objc = FakeObjC()
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
    gc.collect()
    assert fake.currentAllocatedSize() == start
    del device
    gc.collect()
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
