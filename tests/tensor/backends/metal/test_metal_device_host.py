"""The host side of the Metal path (buffers, binding, encoding, dispatch, read-back, errors),
run against a stand-in for PyObjC's ``Metal`` module whose "GPU" is the emulator.

This is not a substitute for a Mac (the ``metal``-marked tests are): it checks that
:mod:`llmfs.tensor.backends.metal.device` drives the API in the documented order, binds shared
buffers in place, copies back only what a kernel writes, and reports failures with Metal's text.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import types

import numpy as np
import pytest

from llmfs.tensor.backends.metal import device as metal_device
from llmfs.tensor.backends.metal import emulator, emulator_available, ops
from llmfs.tensor.backends.metal.errors import (
    KernelCompileError,
    KernelLaunchError,
    KernelNotFoundError,
)
from llmfs.tensor.layout import Layout

pytestmark = pytest.mark.skipif(
    not emulator_available(), reason="the stand-in GPU is the emulator, which needs a C++ compiler"
)


class FakeError:
    def __init__(self, text: str) -> None:
        self.text = text

    def localizedDescription(self) -> str:
        return self.text


class FakeBuffer:
    def __init__(self, data: np.ndarray) -> None:
        self.data = data

    def contents(self) -> types.SimpleNamespace:
        return types.SimpleNamespace(as_buffer=lambda n: memoryview(self.data)[:n])

    def length(self) -> int:
        return self.data.size


class FakeEncoder:
    def __init__(self, command_buffer: FakeCommandBuffer) -> None:
        self.command_buffer = command_buffer
        self.bound: dict[int, np.ndarray] = {}

    def setComputePipelineState_(self, pipeline) -> None:
        self.pipeline = pipeline

    def setBuffer_offset_atIndex_(self, buffer, offset, index) -> None:
        self.bound[index] = buffer.data[offset:]

    def setBytes_length_atIndex_(self, data, length, index) -> None:
        self.bound[index] = np.frombuffer(bytes(data), dtype=np.uint8)[:length].copy()

    def dispatchThreads_threadsPerThreadgroup_(self, grid, group) -> None:
        library, name = self.pipeline.function
        if self.command_buffer.fail:
            self.command_buffer.failed = True
            return
        pointers = (ctypes.c_void_p * 31)()
        for index, array in self.bound.items():
            pointers[index] = array.ctypes.data
        library._functions[name](pointers, (ctypes.c_uint * 3)(*grid), (ctypes.c_uint * 3)(*group))
        self.command_buffer.log.append(("dispatch", name, grid, group))

    def endEncoding(self) -> None:
        self.command_buffer.log.append("endEncoding")


class FakeCommandBuffer:
    def __init__(self, fail: bool) -> None:
        self.fail = fail
        self.failed = False
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
        return FakeError("Execution of the command buffer was aborted") if self.failed else None


class FakeDevice:
    def __init__(self) -> None:
        self.fail_next = False
        self.command_buffers: list[FakeCommandBuffer] = []
        self.math_modes: list[int] = []

    def newCommandQueue(self) -> types.SimpleNamespace:
        def command_buffer() -> FakeCommandBuffer:
            self.command_buffers.append(FakeCommandBuffer(self.fail_next))
            return self.command_buffers[-1]

        return types.SimpleNamespace(commandBuffer=command_buffer)

    def newLibraryWithSource_options_error_(self, source, options, error):
        self.math_modes.append(options.mode)
        try:
            library = emulator.load_library(source)
        except KernelCompileError as caught:
            return None, FakeError(caught.log)
        return types.SimpleNamespace(
            newFunctionWithName_=lambda name: (library, name) if name in library.kernels else None
        ), None

    def newComputePipelineStateWithFunction_error_(self, function, error):
        return types.SimpleNamespace(
            function=function,
            maxTotalThreadsPerThreadgroup=lambda: 1024,
            threadExecutionWidth=lambda: 32,
        ), None

    def newBufferWithLength_options_(self, length, options) -> FakeBuffer:
        return FakeBuffer(np.zeros(length, dtype=np.uint8))

    def newBufferWithBytes_length_options_(self, data, length, options) -> FakeBuffer:
        return FakeBuffer(np.frombuffer(bytes(data), dtype=np.uint8)[:length].copy())

    def newBufferWithBytesNoCopy_length_options_deallocator_(self, data, length, options, free):
        return FakeBuffer(np.frombuffer(data, dtype=np.uint8)[:length])


class FakeOptions:
    mode = -1

    def setMathMode_(self, mode: int) -> None:
        self.mode = mode


@pytest.fixture
def gpu(monkeypatch) -> tuple[metal_device.MetalDevice, FakeDevice]:
    fake = FakeDevice()
    metal = types.SimpleNamespace(
        MTLCreateSystemDefaultDevice=lambda: fake,
        MTLResourceStorageModeShared=0,
        MTLMathModeSafe=0,
        MTLSizeMake=lambda x, y, z: (x, y, z),
        MTLCompileOptions=types.SimpleNamespace(
            alloc=lambda: types.SimpleNamespace(init=FakeOptions)
        ),
    )
    objc = types.SimpleNamespace(autorelease_pool=contextlib.nullcontext)
    monkeypatch.setattr(metal_device, "_import_metal", lambda: metal)
    monkeypatch.setattr(metal_device, "unavailable_reason", lambda: None)
    monkeypatch.setitem(sys.modules, "objc", objc)
    return metal_device.MetalDevice(), fake


def test_ops_run_through_the_device_path_in_order(gpu) -> None:
    device, fake = gpu
    values = np.arange(12, dtype=np.float32)
    operand = ops.Strided(values, Layout((4, 3), (1, 4), 0))
    out = ops.strided_copy(device, operand)
    np.testing.assert_array_equal(out.reshape(4, 3), values.reshape(3, 4).T)
    assert fake.math_modes == [0]  # MTLMathModeSafe: fast math off
    log = fake.command_buffers[-1].log
    assert log == [("dispatch", "strided_copy_f32", (12, 1, 1), (32, 1, 1)), "endEncoding",
                   "commit", "wait"]  # fmt: skip


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
