"""The real Metal path. Tests marked ``metal`` need a Mac with a Metal device and skip elsewhere
with the reason; run them there with ``pytest -m metal``. They compare the GPU with the emulator
and numpy on the same kernels, and check the zero-copy shared buffers.

llmfs's own CI has no Mac: these tests run in ``.github/workflows/macos.yml`` on GitHub's macOS
runners (a paravirtualized GPU, weak evidence for custom kernels) and on a developer's Mac. The
host side they exercise is tested everywhere through the stand-in of
``test_metal_device_host.py``."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pytest

from llmfs.tensor.backends.metal import (
    KernelCompileError,
    MetalUnavailableError,
    executor,
    is_available,
    ops,
    run_kernel,
)
from llmfs.tensor.backends.metal import device as metal_device
from llmfs.tensor.layout import Layout
from tests.tensor.backends.metal.allocation import wait_for_allocated_size

REASON = metal_device.unavailable_reason() if not is_available() else None

RELU = """#include <metal_stdlib>
using namespace metal;
kernel void relu(device const float* in [[buffer(0)]],
                 device float* out [[buffer(1)]],
                 uint id [[thread_position_in_grid]]) {
    float val = in[id];
    out[id] = fmax(val, 0.0f);
}
"""


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the refusal off macOS")
def test_off_macos_the_device_path_says_why() -> None:
    assert not metal_device.is_available()
    assert "macOS" in (metal_device.unavailable_reason() or "")
    with pytest.raises(MetalUnavailableError, match="needs macOS"):
        metal_device.MetalDevice()
    with pytest.raises(MetalUnavailableError):
        executor("metal")
    with pytest.raises(MetalUnavailableError):
        run_kernel(RELU, "relu", [np.zeros(1, np.float32)] * 2, 1, backend="metal")


@pytest.mark.metal
@pytest.mark.skipif(not is_available(), reason=f"needs a Metal device: {REASON}")
def test_the_seed_relu_kernel_on_the_gpu() -> None:
    values = np.array([-2.0, -0.5, 0.0, 1.5, 3.0], dtype=np.float32)
    out = np.zeros_like(values)
    run_kernel(RELU, "relu", [values, out], values.size, backend="metal")
    np.testing.assert_array_equal(out, np.maximum(values, 0))


@pytest.mark.metal
@pytest.mark.skipif(not is_available(), reason=f"needs a Metal device: {REASON}")
class TestOnTheGpu:
    """Every op family on the GPU agrees with the emulator and numpy."""

    @pytest.fixture(scope="class")
    def gpu(self) -> metal_device.MetalDevice:
        return metal_device.default_device()

    @pytest.mark.parametrize("dtype", ["float32", "float16"])
    def test_op_families_match_numpy(self, gpu, dtype: str) -> None:
        rng = np.random.default_rng(1)
        parent = rng.uniform(0.5, 2.0, (4, 6, 5)).astype(dtype)
        view = np.flip(parent.transpose(2, 0, 1), 1)[:, :, ::2]
        item = parent.itemsize
        operand = ops.Strided(
            parent.reshape(-1),
            Layout(
                view.shape,
                tuple(s // item for s in view.strides),
                (view.ctypes.data - parent.ctypes.data) // item,
            ),
        )
        tol = {"rtol": 2e-3, "atol": 2e-3} if dtype == "float16" else {"rtol": 1e-5}
        copy = ops.strided_copy(gpu, operand).reshape(view.shape)
        np.testing.assert_array_equal(copy, view)
        for op in ops.UNARY_OPS:
            result = ops.unary(gpu, op, operand).reshape(view.shape)
            assert result.dtype == np.dtype(dtype)
        exp = ops.unary(gpu, "exp", operand).reshape(view.shape)
        np.testing.assert_allclose(exp, np.exp(view.astype(np.float32)).astype(dtype), **tol)
        total, shape = ops.reduce(gpu, "sum", operand, (0, 2))
        np.testing.assert_allclose(total, view.astype(np.float64).sum((0, 2)), **tol)
        a = ops.Strided.contiguous(rng.uniform(-1, 1, (7, 9)).astype(dtype))
        b = ops.Strided.contiguous(rng.uniform(-1, 1, (9, 3)).astype(dtype))
        product, shape = ops.matmul(gpu, a, b)
        expected = a.storage.reshape(7, 9).astype(np.float64) @ b.storage.reshape(9, 3)
        np.testing.assert_allclose(product.reshape(shape), expected, rtol=5e-3, atol=5e-3)

    def test_results_live_in_shared_buffers_read_without_copy(self, gpu) -> None:
        out = gpu.empty(1000, np.float32)
        allocation, offset, copied = gpu._bind(out[10:])
        assert offset == 40 and not copied
        assert allocation.buffer.length() >= 4000

    def test_page_aligned_arrays_are_wrapped_without_copy(self, gpu) -> None:
        raw = np.zeros(2 * metal_device.PAGE_SIZE + metal_device.PAGE_SIZE, np.uint8)
        start = (-raw.ctypes.data) % metal_device.PAGE_SIZE
        aligned = raw[start : start + metal_device.PAGE_SIZE].view(np.float32)
        _, _, copied = gpu._bind(aligned)
        assert not copied

    def test_buffers_are_freed_when_dropped(self, gpu) -> None:
        """Every new* result is owned once: allocating and dropping in a loop returns the
        device's allocated size to where it started (polled: Metal's completion queue lets go
        of a launch's buffers a moment after waitUntilCompleted returns)."""
        small = ops.Strided.contiguous(np.linspace(-1, 1, 3, dtype=np.float32))
        ops.unary(gpu, "exp", small)  # compile and cache the pipeline first
        gc.collect()
        start = gpu.device.currentAllocatedSize()
        for _ in range(20):
            out = gpu.empty(1 << 20, np.float32)
            out[:] = 1.0
            result = ops.unary(gpu, "exp", small)
            del out, result
        assert wait_for_allocated_size(gpu.device, start) == start

    def test_small_inputs_are_padded_to_the_minimum_buffer(self, gpu) -> None:
        three = np.array([0.0, 1.0, -1.0], dtype=np.float32)
        np.testing.assert_allclose(
            ops.unary(gpu, "exp", ops.Strided.contiguous(three)), np.exp(three), rtol=1e-6
        )
        a = ops.Strided.contiguous(np.ones((2, 3), dtype=np.float32))
        b = ops.Strided.contiguous(np.ones((3, 2), dtype=np.float32))
        product, shape = ops.matmul(gpu, a, b)  # no C: a 4-byte placeholder is bound
        np.testing.assert_array_equal(product.reshape(shape), np.full((2, 2), 3.0))

    def test_math_functions_are_precise(self, gpu) -> None:
        values = np.linspace(-20, 20, 4001, dtype=np.float32)
        operand = ops.Strided.contiguous(values)
        for op, reference in (("exp", np.exp), ("sin", np.sin), ("tanh", np.tanh)):
            got = ops.unary(gpu, op, operand)
            np.testing.assert_allclose(got, reference(values.astype(np.float64)), rtol=2e-6,
                                       atol=1e-6, err_msg=op)  # fmt: skip

    def test_a_kernel_only_metal_can_name_runs(self, gpu) -> None:
        """``[[host_name]]`` renames a kernel for Metal; msl.py cannot describe it, and it runs
        all the same (its buffers bound with the strictest alignment)."""
        source = RELU.replace("kernel void relu", '[[host_name("relu_alias")]] kernel void relu')
        values = np.array([-2.0, 1.0, -0.5, 3.0], dtype=np.float32)
        out = np.zeros_like(values)
        gpu.run_kernel(source, "relu_alias", [values, out], 4)
        np.testing.assert_array_equal(out, np.maximum(values, 0))
        assert gpu.kernel_names(source) == ("relu_alias",)

    def test_misaligned_views_of_shared_buffers_are_copied(self, gpu) -> None:
        raw = gpu.empty(4096, np.uint8)
        values = raw[2001 : 2001 + 16].view(np.float32)
        values[:] = [1.0, -2.0, 3.0, -4.0]
        out = raw[3003 : 3003 + 16].view(np.float32)
        run_kernel(RELU, "relu", [values, out], 4, backend="metal")
        np.testing.assert_array_equal(out, [1.0, 0.0, 3.0, 0.0])

    def test_the_device_reports_itself(self, gpu) -> None:
        report = gpu.report()
        assert report["name"] and report["recommended_max_working_set_size"] > 0
        limit = int(gpu.pipeline(RELU, "relu").maxTotalThreadsPerThreadgroup())
        assert 0 < limit <= report["max_threads_per_threadgroup"][0]

    def test_metal_compiler_errors_carry_metals_text(self, gpu) -> None:
        broken = RELU.replace("fmax(val, 0.0f)", "undefined_name")
        with pytest.raises(KernelCompileError, match="undefined_name"):
            run_kernel(broken, "relu", [np.zeros(1, np.float32)] * 2, 1, backend="metal")
