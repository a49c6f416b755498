"""A matmul kernel of the user's own serving a Metal backend's matmuls
(``backend.matmul_kernel(...)``, :func:`~llmfs.tensor.backends.metal.ops.kernel_matmul`): inside
the block every float32 matmul runs on it, with numpy's shapes and errors, whatever the
operands' layouts; outside it, and for float16, the library's kernel runs; a kernel that does
not compile or has another name is refused on entry, and a bad tile by name."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from llmfs.tensor import Tensor, matmul, use_backend
from llmfs.tensor.backends import get_backend
from llmfs.tensor.backends.metal import (
    KernelArgumentError,
    KernelLintError,
    KernelNotFoundError,
    emulator_available,
    ops,
)
from llmfs.tensor.backends.metal.ops import EmulatorExecutor, MatmulKernel, kernel_matmul
from llmfs.tensor.errors import BroadcastError, RankMismatchError

pytestmark = pytest.mark.skipif(not emulator_available(), reason="the Metal emulator needs clang++")

TILE = 4
TILED = """
#include <metal_stdlib>
using namespace metal;

constant uint TILE = 4;

kernel void tiled(device const float* a [[buffer(0)]],
                  device const float* b [[buffer(1)]],
                  device float* c [[buffer(2)]],
                  constant uint& M [[buffer(3)]],
                  constant uint& N [[buffer(4)]],
                  constant uint& K [[buffer(5)]],
                  uint3 gid [[thread_position_in_grid]],
                  uint3 lid [[thread_position_in_threadgroup]]) {
    threadgroup float at[TILE][TILE];
    threadgroup float bt[TILE][TILE];
    a += gid.z * M * K;
    b += gid.z * K * N;
    c += gid.z * M * N;
    float acc = 0.0f;
    for (uint start = 0; start < K; start += TILE) {
        at[lid.y][lid.x] = (gid.y < M && start + lid.x < K) ? a[gid.y * K + start + lid.x] : 0.0f;
        bt[lid.y][lid.x] = (start + lid.y < K && gid.x < N) ? b[(start + lid.y) * N + gid.x] : 0.0f;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = 0; i < TILE; ++i) {
            acc += at[lid.y][i] * bt[i][lid.x];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (gid.y < M && gid.x < N) {
        c[gid.y * N + gid.x] = acc;
    }
}
"""
#: The same kernel adding 1000 to every value: shows which kernel ran.
MARKED = TILED.replace("c[gid.y * N + gid.x] = acc;", "c[gid.y * N + gid.x] = acc + 1000.0f;")

SHAPES = [
    ((3, 5), (5, 4)),
    ((9, 13), (13, 6)),
    ((2, 3, 7), (7, 9)),
    ((2, 3, 7), (2, 7, 9)),
    ((1, 3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (3, 4, 2)),
    ((7,), (7, 3)),
    ((4, 7), (7,)),
    ((5,), (5,)),
    ((2, 3, 0), (0, 4)),
    ((0, 3), (3, 2)),
]


def _quarters(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    # Quarters: products and sums are exact in float32, so results compare exactly.
    return (rng.integers(-8, 9, shape) / 4).astype(np.float32)


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPES)
def test_every_float32_matmul_in_the_block_runs_on_the_kernel(a_shape, b_shape) -> None:
    rng = np.random.default_rng(len(a_shape) * 10 + len(b_shape))
    a, b = _quarters(rng, a_shape), _quarters(rng, b_shape)
    backend = get_backend("metal-emulator")
    with backend.matmul_kernel(TILED, "tiled", tile=TILE), use_backend("metal-emulator"):
        got = matmul(Tensor.from_numpy(a), Tensor.from_numpy(b)).to_numpy()
    np.testing.assert_array_equal(got, a @ b)
    if a.size and b.size:  # with nothing to add up, the library answers without a kernel
        with backend.matmul_kernel(MARKED, "tiled", tile=TILE), use_backend("metal-emulator"):
            marked = matmul(Tensor.from_numpy(a), Tensor.from_numpy(b)).to_numpy()
        np.testing.assert_array_equal(marked, a @ b + 1000)


def test_strided_and_broadcast_operands_are_read_through_their_layouts() -> None:
    rng = np.random.default_rng(3)
    a, b = _quarters(rng, (6, 9)), _quarters(rng, (5, 6))
    backend = get_backend("metal-emulator")
    with backend.matmul_kernel(TILED, "tiled", tile=TILE), use_backend("metal-emulator"):
        x, y = Tensor.from_numpy(a), Tensor.from_numpy(b)
        transposed = matmul(x.view().transpose(0, 1), y.view().transpose(0, 1)).to_numpy()
        sliced = matmul(x.view().slice(1, 2, 7), y.view().flip(0)).to_numpy()
        expanded = matmul(y.view().expand([3, 5, 6]), x).to_numpy()
    np.testing.assert_array_equal(transposed, a.T @ b.T)
    np.testing.assert_array_equal(sliced, a[:, 2:7] @ b[::-1])
    np.testing.assert_array_equal(expanded, np.broadcast_to(b, (3, 5, 6)) @ a)


def test_outside_the_block_and_for_float16_the_librarys_kernel_runs() -> None:
    a = np.ones((3, 4), dtype=np.float32)
    backend = get_backend("metal-emulator")
    with backend.matmul_kernel(MARKED, "tiled", tile=TILE), use_backend("metal-emulator"):
        half = matmul(
            Tensor.from_numpy(a.astype(np.float16)), Tensor.from_numpy(a.T.astype(np.float16))
        )
        assert half.to_numpy().tolist() == [[4.0] * 3] * 3
    with use_backend("metal-emulator"):
        after = matmul(Tensor.from_numpy(a), Tensor.from_numpy(a.T)).to_numpy()
    assert after.tolist() == [[4.0] * 3] * 3


def test_the_kernel_is_set_for_this_thread_only() -> None:
    a = np.ones((2, 2), dtype=np.float32)
    seen: list[float] = []

    def other() -> None:
        with use_backend("metal-emulator"):
            seen.append(float(matmul(Tensor.from_numpy(a), Tensor.from_numpy(a)).to_numpy()[0, 0]))

    with get_backend("metal-emulator").matmul_kernel(MARKED, "tiled", tile=TILE):
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
    assert seen == [2.0]


def test_bad_kernels_and_tiles_are_refused_on_entry() -> None:
    backend = get_backend("metal-emulator")
    with pytest.raises(KernelNotFoundError):
        with backend.matmul_kernel(TILED, "tiled_matmul", tile=TILE):
            pass
    with pytest.raises(KernelLintError):
        with backend.matmul_kernel(TILED.replace("float acc", "double acc"), "tiled", tile=TILE):
            pass
    for tile in (0, -2, 33, True, 2.0):
        with pytest.raises(KernelArgumentError, match=r"tile|threadgroup"):
            with backend.matmul_kernel(TILED, "tiled", tile=tile):  # type: ignore[arg-type]
                pass


def test_the_shape_rules_and_errors_are_numpys() -> None:
    executor = EmulatorExecutor()
    kernel = MatmulKernel(TILED, "tiled", TILE)
    one = ops.Strided.contiguous(np.ones((2, 3), dtype=np.float32))
    with pytest.raises(RankMismatchError):
        kernel_matmul(executor, kernel, one, one)
    with pytest.raises(BroadcastError):
        kernel_matmul(
            executor,
            kernel,
            ops.Strided.contiguous(np.ones((2, 2, 3), dtype=np.float32)),
            ops.Strided.contiguous(np.ones((3, 3, 2), dtype=np.float32)),
        )
    with pytest.raises(Exception, match="float32"):
        half = ops.Strided.contiguous(np.ones((2, 2), dtype=np.float16))
        kernel_matmul(executor, kernel, half, half)


def test_an_unguarded_kernel_is_caught_by_the_isolated_launch() -> None:
    from llmfs.tensor.backends.metal import KernelMemoryError

    unguarded = TILED.replace(
        "(gid.y < M && start + lid.x < K) ? a[gid.y * K + start + lid.x] : 0.0f",
        "a[gid.y * K + start + lid.x]",
    )
    a = np.ones((5, 3), dtype=np.float32)
    with get_backend("metal-emulator").matmul_kernel(unguarded, "tiled", tile=TILE):
        with use_backend("metal-emulator"), pytest.raises(KernelMemoryError):
            matmul(Tensor.from_numpy(a), Tensor.from_numpy(a.T))
