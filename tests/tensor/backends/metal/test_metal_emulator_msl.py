"""The emulator runs what Metal runs and refuses what Metal refuses.

Valid kernels using the MSL a learner meets after one-thread-per-value kernels (vector types and
swizzles, half literals and half arithmetic, atomics, threadgroup memory and barriers,
``[[threadgroup(n)]]`` arguments, simdgroup attributes and functions, the common math and
``as_type``, Metal's kernel spellings and implicit buffer indices) each give NumPy's result, in
grid order and shuffled. Invalid kernels are each refused with an llmfs error naming the rule
they break and the line, never the C++ compiler's raw text and never a wrong result.

All valid kernels live in one source, so the suite compiles once (the build cache keeps it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

from llmfs.tensor.backends.metal import emulator as emu
from llmfs.tensor.backends.metal import lint_msl, run_kernel
from llmfs.tensor.backends.metal.errors import (
    KernelArgumentError,
    KernelLaunchError,
    KernelLintError,
    KernelMemoryError,
)
from tests.requirements import require_tool
from tests.tensor.backends.metal.conftest import ORDERS

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"

VALID_SOURCE = (
    HEADER
    + r"""
constant uint TILE = 8;

// Apple's add_arrays sample: no [[buffer(n)]] indices (Metal assigns 0, 1, 2) and an
// unsuffixed literal, which is a float in MSL.
kernel void add_arrays(device const float* inA, device const float* inB, device float* result,
                       uint index [[thread_position_in_grid]]) {
    result[index] = inA[index] + inB[index] * 0.1;
}

// The [[kernel]] spelling, named by [[host_name]] as Metal names it.
[[host_name("scaled")]] [[kernel]] void scale_impl(device float* v [[buffer(0)]],
                                                   uint i [[thread_position_in_grid]]) {
    v[i] = v[i] * 1.5;
}

kernel void vectors(device float4* v [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    float4 x = v[i];
    x.xy = x.yx;
    v[i] = x.wzyx * 2.0 + float4(1.0, 2.0, x.zw);
}

kernel void half_vectors(device const half4* in [[buffer(0)]], device half4* out [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
    out[i] = in[i] * 2.0h + half4(0.5h);
}

kernel void half_ops(device const half* a [[buffer(0)]], device const half* b [[buffer(1)]],
                     device const half* c [[buffer(2)]], device half* out [[buffer(3)]],
                     uint i [[thread_position_in_grid]]) {
    out[i] = a[i] * b[i] + c[i];
}

kernel void int_vectors(device uint2* v [[buffer(0)]], device int3* w [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
    uint2 p = v[i];
    v[i] = p.yx + uint2(1u);
    int3 q = w[i];
    w[i] = int3(q.z, q.x * 2, -q.y);
}

kernel void histogram(device const uint* ids [[buffer(0)]],
                      device atomic_uint* counts [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    atomic_fetch_add_explicit(&counts[ids[i]], 1u, memory_order_relaxed);
}

kernel void extremes(device const int* x [[buffer(0)]], device atomic_int* out [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
    atomic_fetch_max_explicit(&out[0], x[i], memory_order_relaxed);
    atomic_fetch_min_explicit(&out[1], x[i], memory_order_relaxed);
}

kernel void float_total(device const float* x [[buffer(0)]],
                        device atomic_float* total [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
    atomic_fetch_add_explicit(total, x[i], memory_order_relaxed);
}

// A histogram in threadgroup memory: cleared, barrier, counted, barrier, added to the result.
kernel void group_histogram(device const uint* ids [[buffer(0)]],
                            device atomic_uint* counts [[buffer(1)]],
                            constant uint& n [[buffer(2)]],
                            uint i [[thread_position_in_grid]],
                            uint t [[thread_index_in_threadgroup]],
                            uint size [[threads_per_threadgroup]]) {
    threadgroup atomic_uint local[16];
    for (uint b = t; b < 16; b += size) atomic_store_explicit(&local[b], 0u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (i < n) atomic_fetch_add_explicit(&local[ids[i]], 1u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint b = t; b < 16; b += size) {
        atomic_fetch_add_explicit(&counts[b], atomic_load_explicit(&local[b], memory_order_relaxed),
                                  memory_order_relaxed);
    }
}

// A tree reduction in a threadgroup array (64 threads per group; the edge group is partial).
kernel void tree_sum(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                     constant uint& n [[buffer(2)]],
                     uint i [[thread_position_in_grid]], uint t [[thread_index_in_threadgroup]],
                     uint g [[threadgroup_position_in_grid]]) {
    threadgroup float partial[64];
    partial[t] = i < n ? x[i] : 0.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = 32; stride > 0; stride /= 2) {
        if (t < stride) partial[t] += partial[t + stride];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (t == 0) out[g] = partial[0];
}

// The same with the threadgroup memory an argument, sized at launch.
inline float add_pair(threadgroup float* values, uint a, uint b) { return values[a] + values[b]; }
kernel void tree_sum_argument(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                              constant uint& n [[buffer(2)]],
                              threadgroup float* partial [[threadgroup(0)]],
                              uint i [[thread_position_in_grid]],
                              uint t [[thread_index_in_threadgroup]],
                              uint g [[threadgroup_position_in_grid]],
                              uint size [[threads_per_threadgroup]]) {
    partial[t] = i < n ? x[i] : 0.0;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = size / 2; stride > 0; stride /= 2) {
        if (t < stride) partial[t] = add_pair(partial, t, t + stride);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (t == 0) out[g] = partial[0];
}

// One sum per simdgroup (32 lanes), written by its first lane.
kernel void simd_sums(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint sg [[simdgroup_index_in_threadgroup]],
                      uint groups [[simdgroups_per_threadgroup]],
                      uint g [[threadgroup_position_in_grid]]) {
    float s = simd_sum(x[i]);
    if (lane == 0) out[g * groups + sg] = s;
}

kernel void simd_maxima(device const int* x [[buffer(0)]], device int* out [[buffer(1)]],
                        uint i [[thread_position_in_grid]],
                        ushort lane [[thread_index_in_simdgroup]],
                        ushort width [[threads_per_simdgroup]]) {
    int m = simd_max(x[i]);
    if (lane == 0) out[i / width] = m;
}

kernel void simd_shuffles(device const float* x [[buffer(0)]], device float* reversed [[buffer(1)]],
                          device float* down [[buffer(2)]], device float* butterfly [[buffer(3)]],
                          uint i [[thread_position_in_grid]],
                          uint lane [[thread_index_in_simdgroup]]) {
    reversed[i] = simd_shuffle(x[i], ushort(31 - lane));
    down[i] = simd_shuffle_down(x[i], ushort(1));
    float v = x[i];
    for (ushort mask = 16; mask > 0; mask /= 2) v += simd_shuffle_xor(v, mask);
    butterfly[i] = v;
}

kernel void simd_scan(device const int* x [[buffer(0)]], device int* out [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
    out[i] = simd_prefix_exclusive_sum(x[i]);
}

// A simdgroup reduction, then one across the simdgroups of the group through threadgroup memory.
kernel void group_sum_simd(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                           constant uint& n [[buffer(2)]],
                           uint i [[thread_position_in_grid]],
                           uint lane [[thread_index_in_simdgroup]],
                           uint sg [[simdgroup_index_in_threadgroup]],
                           uint groups [[simdgroups_per_threadgroup]],
                           uint g [[threadgroup_position_in_grid]]) {
    threadgroup float sums[32];
    float s = simd_sum(i < n ? x[i] : 0.0);
    if (lane == 0) sums[sg] = s;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0) {
        float total = simd_sum(lane < groups ? sums[lane] : 0.0);
        if (lane == 0) out[g] = total;
    }
}

kernel void math(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
    float v = x[i];
    out[8 * i + 0] = mix(v, 2.0, 0.25);
    out[8 * i + 1] = saturate(v);
    out[8 * i + 2] = fmod(v, 0.75);
    out[8 * i + 3] = rint(v * 4.0);
    out[8 * i + 4] = fast::exp(v);
    out[8 * i + 5] = precise::divide(v, 3.0);
    out[8 * i + 6] = clamp(v, -0.5, 0.5) + sign(v) + step(0.0, v);
    out[8 * i + 7] = metal::precise::sqrt(fabs(v)) + max(v, 0.0);
}

kernel void bits(device const float* x [[buffer(0)]], device uint* out [[buffer(1)]],
                 device float* back [[buffer(2)]], uint i [[thread_position_in_grid]]) {
    uint b = as_type<uint>(x[i]);
    out[i] = b;
    back[i] = as_type<float>(b ^ 0x80000000u);
}

// A tiled matrix multiply: two threadgroup tiles, a barrier after loading and after using them,
// guards for the partial tiles at the edges; C[row * N + col] = acc with constant uint& N.
kernel void tiled_matmul(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                         device float* C [[buffer(2)]], constant uint& M [[buffer(3)]],
                         constant uint& K [[buffer(4)]], constant uint& N [[buffer(5)]],
                         uint2 gid [[thread_position_in_grid]],
                         uint2 tid [[thread_position_in_threadgroup]]) {
    threadgroup float As[TILE][TILE];
    threadgroup float Bs[TILE][TILE];
    uint row = gid.y, col = gid.x;
    float acc = 0.0;
    for (uint k0 = 0; k0 < K; k0 += TILE) {
        As[tid.y][tid.x] = (row < M && k0 + tid.x < K) ? A[row * K + k0 + tid.x] : 0.0;
        Bs[tid.y][tid.x] = (k0 + tid.y < K && col < N) ? B[(k0 + tid.y) * N + col] : 0.0;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint k = 0; k < TILE; ++k) acc += As[tid.y][k] * Bs[k][tid.x];
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (row < M && col < N) C[row * N + col] = acc;
}

kernel void positions(device uint4* out [[buffer(0)]],
                      uint i [[thread_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint sg [[simdgroup_index_in_threadgroup]],
                      uint width [[thread_execution_width]],
                      uint t [[thread_index_in_threadgroup]]) {
    out[i] = uint4(lane, sg, width, t);
}

[[max_total_threads_per_threadgroup(64)]]
kernel void limited(device float* v [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    v[i] = -v[i];
}
"""
)


@dataclass
class Case:
    """One valid kernel: its name, what to launch it with, and NumPy's answer."""

    kernel: str
    make: Callable[[np.random.Generator], tuple[list[np.ndarray], object, object]]
    expect: Callable[[list[np.ndarray]], list[tuple[int, np.ndarray]]]
    exact: bool = False
    threadgroup_memory: dict[int, int] = field(default_factory=dict)


def f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def u32(value: int) -> np.ndarray:
    return np.array([value], dtype=np.uint32)


def _matmul_case(rng: np.random.Generator) -> tuple[list[np.ndarray], object, object]:
    m, k, n = (int(v) for v in rng.integers(1, 20, 3))  # rarely multiples of the tile (8)
    a, b = f32(rng, m, k), f32(rng, k, n)
    # Whole tiles of threads: every thread of a group loads its slot of both tiles (a thread
    # outside the grid would not exist, and its slot would stay junk); the kernel guards the
    # loads and the store instead.
    grid = (-(-n // 8) * 8, -(-m // 8) * 8)
    return [a, b, np.zeros((m, n), np.float32), u32(m), u32(k), u32(n)], grid, (8, 8)


def _halves(rng: np.random.Generator) -> list[np.ndarray]:
    return [rng.uniform(-8, 8, 997).astype(np.float16) for _ in range(3)]


def _group_sums(x: np.ndarray, size: int) -> np.ndarray:
    padded = np.zeros(-(-x.size // size) * size, np.float32)
    padded[: x.size] = x
    return padded.reshape(-1, size).sum(axis=1, dtype=np.float64)


CASES = [
    Case(
        "add_arrays",
        lambda r: ([f32(r, 300), f32(r, 300), np.zeros(300, np.float32)], 300, None),
        lambda b: [(2, b[0] + b[1] * np.float32(0.1))],
        exact=True,  # computed in float, as Metal does, not in double
    ),
    Case("scaled", lambda r: ([f32(r, 77)], 77, None), lambda b: []),  # checked below
    Case(
        "vectors",
        lambda r: ([f32(r, 33, 4)], 33, None),
        lambda b: [],  # checked against the copy taken before the launch, below
    ),
    Case(
        "half_vectors",
        lambda r: (
            [r.uniform(-4, 4, (50, 4)).astype(np.float16), np.zeros((50, 4), np.float16)],
            50,
            None,
        ),
        lambda b: [(1, b[0] * np.float16(2) + np.float16(0.5))],
        exact=True,
    ),
    Case(
        "half_ops",
        lambda r: ([*_halves(r), np.zeros(997, np.float16)], 997, None),
        # Every operation rounds to half: a*b is rounded before c is added.
        lambda b: [(3, (b[0] * b[1]) + b[2])],
        exact=True,
    ),
    Case(
        "int_vectors",
        lambda r: (
            [
                r.integers(0, 1000, (40, 2)).astype(np.uint32),
                r.integers(-99, 99, (40, 4)).astype(np.int32),
            ],
            40,
            None,
        ),
        lambda b: [],  # checked below
    ),
    Case(
        "histogram",
        lambda r: (
            [r.integers(0, 13, 5000).astype(np.uint32), np.zeros(13, np.uint32)],
            5000,
            None,
        ),
        lambda b: [(1, np.bincount(b[0], minlength=13).astype(np.uint32))],
        exact=True,
    ),
    Case(
        "extremes",
        lambda r: (
            [
                r.integers(-(10**6), 10**6, 999).astype(np.int32),
                np.array([-(2**31), 2**31 - 1], np.int32),
            ],
            999,
            None,
        ),
        lambda b: [(1, np.array([b[0].max(), b[0].min()], np.int32))],
        exact=True,
    ),
    Case(
        "float_total",
        lambda r: (
            [r.integers(-50, 50, 700).astype(np.float32), np.zeros(1, np.float32)],
            700,
            None,
        ),
        lambda b: [(1, np.array([b[0].sum()], np.float32))],  # small integers: exact in any order
        exact=True,
    ),
    Case(
        "group_histogram",
        lambda r: (
            [r.integers(0, 16, 1000).astype(np.uint32), np.zeros(16, np.uint32), u32(1000)],
            1000,
            96,
        ),
        lambda b: [(1, np.bincount(b[0], minlength=16).astype(np.uint32))],
        exact=True,
    ),
    Case(
        "tree_sum",
        # Whole groups: in a partial group the slots of missing threads would stay junk.
        lambda r: ([f32(r, 1000), np.zeros(16, np.float32), u32(1000)], 1024, 64),
        lambda b: [(1, _group_sums(b[0], 64))],
    ),
    Case(
        "tree_sum_argument",
        lambda r: ([f32(r, 700), np.zeros(6, np.float32), u32(700)], 768, 128),
        lambda b: [(1, _group_sums(b[0], 128))],
        threadgroup_memory={0: 128 * 4},
    ),
    Case(
        "simd_sums",
        lambda r: ([f32(r, 256), np.zeros(8, np.float32)], 256, 128),
        lambda b: [(1, _group_sums(b[0], 32))],
    ),
    Case(
        "simd_maxima",
        lambda r: (
            [r.integers(-1000, 1000, 320).astype(np.int32), np.zeros(10, np.int32)],
            320,
            64,
        ),
        lambda b: [(1, b[0].reshape(10, 32).max(axis=1))],
        exact=True,
    ),
    Case(
        "simd_shuffles",
        lambda r: ([f32(r, 128), *(np.zeros(128, np.float32) for _ in range(3))], 128, 64),
        lambda b: [
            (1, b[0].reshape(-1, 32)[:, ::-1].reshape(-1)),
            # Lane 31 has no lane below it to read: it keeps its own value.
            (2, np.concatenate([np.append(w[1:], w[-1]) for w in b[0].reshape(-1, 32)])),
            (3, np.repeat(b[0].reshape(-1, 32).sum(axis=1), 32)),
        ],
    ),
    Case(
        "simd_scan",
        lambda r: ([r.integers(-9, 9, 96).astype(np.int32), np.zeros(96, np.int32)], 96, 96),
        lambda b: [(1, (np.cumsum(b[0].reshape(3, 32), axis=1) - b[0].reshape(3, 32)).reshape(-1))],
        exact=True,
    ),
    Case(
        "group_sum_simd",
        lambda r: ([f32(r, 1500), np.zeros(3, np.float32), u32(1500)], 1500, 512),
        lambda b: [(1, _group_sums(b[0], 512))],
    ),
    Case(
        "math",
        lambda r: (
            [r.uniform(-3, 3, 200).astype(np.float32), np.zeros(1600, np.float32)],
            200,
            None,
        ),
        lambda b: [
            (
                1,
                np.stack(
                    [
                        b[0] + (np.float32(2) - b[0]) * np.float32(0.25),
                        np.clip(b[0], 0, 1),
                        np.fmod(b[0], np.float32(0.75)),
                        np.rint(b[0] * np.float32(4)),
                        np.exp(b[0]),
                        b[0] / np.float32(3),
                        np.clip(b[0], -0.5, 0.5) + np.sign(b[0]) + (b[0] >= 0),
                        np.sqrt(np.abs(b[0])) + np.maximum(b[0], 0),
                    ],
                    axis=1,
                ).reshape(-1),
            )
        ],
    ),
    Case(
        "bits",
        lambda r: ([f32(r, 64), np.zeros(64, np.uint32), np.zeros(64, np.float32)], 64, None),
        lambda b: [(1, b[0].view(np.uint32)), (2, -b[0])],
        exact=True,
    ),
    Case(
        "tiled_matmul",
        _matmul_case,
        lambda b: [(2, (b[0].astype(np.float64) @ b[1]).astype(np.float32))],
    ),
    Case(
        "positions",
        lambda r: ([np.zeros((200, 4), np.uint32)], 200, 80),
        lambda b: [
            (
                0,
                np.stack(
                    [
                        (np.arange(200) % 80) % 32,
                        (np.arange(200) % 80) // 32,
                        np.full(200, 32),
                        np.arange(200) % 80,
                    ],
                    axis=1,
                ).astype(np.uint32),
            )
        ],
        exact=True,
    ),
    Case("limited", lambda r: ([f32(r, 100)], 100, None), lambda b: []),  # checked below
]


@pytest.fixture(scope="module")
def library() -> emu.EmulatorLibrary:
    if not emu.is_available():
        require_tool("the Metal emulator needs clang++; none suitable runs here")
    return emu.load_library(VALID_SOURCE)


def test_the_valid_suite_is_big_enough_and_clean_under_both_rule_sets() -> None:
    assert len(CASES) >= 20
    assert lint_msl(VALID_SOURCE) == []
    assert lint_msl(VALID_SOURCE, "metal") == []


@pytest.mark.parametrize("order", list(ORDERS))
@pytest.mark.parametrize("case", CASES, ids=[case.kernel for case in CASES])
def test_a_valid_kernel_gives_numpys_result(library, case: Case, order: str) -> None:
    rng = np.random.default_rng(sum(map(ord, case.kernel)))
    buffers, grid, group = case.make(rng)
    before = [b.copy() for b in buffers]
    library.run(
        case.kernel,
        buffers,
        grid,
        group,
        shuffle=ORDERS[order],
        threadgroup_memory=case.threadgroup_memory,
    )
    expected = case.expect(before)
    if case.kernel == "scaled":
        expected = [(0, before[0] * np.float32(1.5))]
    elif case.kernel == "limited":
        expected = [(0, -before[0])]
    elif case.kernel == "vectors":
        x = before[0].copy()
        x[:, [0, 1]] = x[:, [1, 0]]
        extra = np.stack([np.ones(33), np.full(33, 2.0), x[:, 2], x[:, 3]], axis=1)
        expected = [(0, (x[:, ::-1] * np.float32(2) + extra.astype(np.float32)))]
    elif case.kernel == "int_vectors":
        v, w = before
        expected = [
            (0, v[:, ::-1] + np.uint32(1)),
            (1, np.stack([w[:, 2], w[:, 0] * 2, -w[:, 1], w[:, 3]], axis=1)),
        ]
    assert expected
    for index, value in expected:
        got = buffers[index]
        if case.exact:
            np.testing.assert_array_equal(got, np.asarray(value, dtype=got.dtype))
        else:
            np.testing.assert_allclose(got, value, rtol=1e-4, atol=1e-4)


def test_half_arithmetic_rounds_every_operation_like_numpy_float16(library) -> None:
    """a*b+c in half rounds a*b first: NumPy's float16 step by step, not one rounding of the
    float result. Hostile inputs: values where the two differ."""
    rng = np.random.default_rng(5)
    a, b, c = (rng.uniform(-8, 8, 20000).astype(np.float16) for _ in range(3))
    once = (a.astype(np.float32) * b + c).astype(np.float16)
    step = (a * b) + c
    differ = once != step
    assert differ.sum() > 100  # the check can fail: rounding once would be caught
    out = np.zeros_like(a)
    library.run("half_ops", [a, b, c, out], a.size)
    np.testing.assert_array_equal(out, step)


def test_the_pipeline_limit_comes_from_the_kernel_attribute_and_the_device(library) -> None:
    assert library.max_total_threads_per_threadgroup("limited") == 64
    assert (
        library.max_total_threads_per_threadgroup("add_arrays") == emu.MAX_THREADS_PER_THREADGROUP
    )
    with pytest.raises(KernelArgumentError, match=r"at most 64 \(maxTotalThreadsPerThreadgroup\)"):
        library.run("limited", [np.zeros(128, np.float32)], 128, 128)
    small = emu.load_library(VALID_SOURCE, max_threads_per_threadgroup=256)
    assert small.max_total_threads_per_threadgroup("add_arrays") == 256
    with pytest.raises(KernelArgumentError, match="at most 256"):
        small.run("scaled", [np.zeros(512, np.float32)], 512, 512)


def test_threadgroup_argument_lengths_are_checked_at_launch(library) -> None:
    args = [np.zeros(64, np.float32), np.zeros(1, np.float32), u32(64)]
    with pytest.raises(
        KernelArgumentError, match=r"has no length; pass threadgroup_memory=\{0: bytes\}"
    ):
        library.run("tree_sum_argument", args, 64, 64)
    with pytest.raises(KernelArgumentError, match="positive multiple of 16"):
        library.run("tree_sum_argument", args, 64, 64, threadgroup_memory={0: 100})
    with pytest.raises(KernelArgumentError, match=r"threadgroup-memory-limit.*65536 bytes"):
        library.run("tree_sum_argument", args, 64, 64, threadgroup_memory={0: 65536})
    with pytest.raises(KernelArgumentError, match=r"declares no \[\[threadgroup\(3\)\]\]"):
        library.run("tree_sum_argument", args, 64, 64, threadgroup_memory={0: 256, 3: 16})


def test_a_missing_barrier_shows_in_both_orders() -> None:
    """Without the barrier between loading and reading the tile, thread t reads its neighbour's
    slot before the neighbour wrote it (junk, NaN), whatever the order: between barriers the
    threads of a group run one after another."""
    source = HEADER + (
        "kernel void neighbour(device const float* x [[buffer(0)]],\n"
        "                      device float* out [[buffer(1)]],\n"
        "                      uint i [[thread_position_in_grid]],\n"
        "                      uint t [[thread_index_in_threadgroup]],\n"
        "                      uint size [[threads_per_threadgroup]]) {\n"
        "    threadgroup float tile[64];\n"
        "    tile[t] = x[i];\n"
        "    BARRIER\n"
        "    out[i] = tile[(t + 1) % size];\n"
        "}\n"
    )
    x = np.arange(128, dtype=np.float32)
    expected = np.roll(x.reshape(2, 64), -1, axis=1).reshape(-1)
    for shuffle in ORDERS.values():
        with_barrier = np.zeros(128, np.float32)
        fixed = source.replace("BARRIER", "threadgroup_barrier(mem_flags::mem_threadgroup);")
        run_kernel(fixed, "neighbour", [x, with_barrier], 128, 64, shuffle=shuffle, sanitize=False)
        np.testing.assert_array_equal(with_barrier, expected)
        # A kernel without any barrier call runs its threads one after another too.
        without = np.zeros(128, np.float32)
        broken = source.replace("BARRIER", "")
        run_kernel(broken, "neighbour", [x, without], 128, 64, shuffle=shuffle, sanitize=False)
        assert not np.array_equal(without, expected)


# ------------------------------------------------------------------------------------------------
# Invalid kernels: (case, source, the rule named, the line named)
# ------------------------------------------------------------------------------------------------


def _k(body: str, params: str = "") -> str:
    extra = f"{params}, " if params else ""
    return HEADER + (
        f"kernel void k(device float* out [[buffer(0)]], {extra}"
        f"uint i [[thread_position_in_grid]]) {{\n"
        f"{body}\n}}\n"
    )


INVALID = [
    (
        "threadgroup address in a device pointer",
        _k("    threadgroup float tile[4];\n    device float* p = &tile[0];\n    out[i] = p[0];"),
        "address-space-mismatch",
        5,
    ),
    (
        "device pointer to a thread parameter",
        HEADER
        + "inline float first(thread float* v) { return v[0]; }\n"
        + _k("    out[i] = first(out);")[len(HEADER) :],
        "address-space-mismatch",
        5,
    ),
    (
        "device pointer to a constant parameter",
        HEADER
        + "inline float first(constant float* v) { return v[0]; }\n"
        + _k("    out[i] = first(out);")[len(HEADER) :],
        "address-space-mismatch",
        5,
    ),
    (
        "constant pointer to a device pointer",
        _k(
            "    device float* p = scale;\n    out[i] = p[0];",
            "constant float* scale [[buffer(1)]]",
        ),
        "address-space-mismatch",
        4,
    ),
    (
        "variable-length array",
        _k(
            "    float tmp[n];\n    tmp[0] = 1.0f;\n    out[i] = tmp[0];",
            "constant uint& n [[buffer(1)]]",
        ),
        "no-variable-length-array",
        4,
    ),
    (
        "function-local static",
        _k("    static float seen = 0.0f;\n    out[i] = seen;"),
        "no-static-local",
        4,
    ),
    (
        "64 KiB of threadgroup memory",
        _k("    threadgroup float big[16384];\n    big[i] = 1.0f;\n    out[i] = big[0];"),
        "threadgroup-memory-limit",
        4,
    ),
    ("compiler builtin", _k("    out[i] = __builtin_expf(out[i]);"), "no-compiler-builtin", 4),
    ("pthread call", _k("    out[i] = float(pthread_self());"), "no-host-library-call", 4),
    ("double", _k("    double x = out[i];\n    out[i] = float(x);"), "no-double", 4),
    ("bfloat", _k("    bfloat x = bfloat(out[i]);\n    out[i] = float(x);"), "outside-emulator", 4),
    (
        "write through a constant reference",
        _k("    n = 3;\n    out[i] = float(n);", "constant uint& n [[buffer(1)]]"),
        "constant-is-read-only",
        4,
    ),
    (
        "write through a constant pointer alias",
        _k(
            "    constant float* p = scale;\n    p[0] = 1.0f;\n    out[i] = p[0];",
            "constant float* scale [[buffer(1)]]",
        ),
        "constant-is-read-only",
        5,
    ),
    (
        "recursion",
        HEADER
        + "inline uint f(uint n) { return n ? f(n - 1) : 0u; }\n"
        + _k("    out[i] = float(f(i));")[len(HEADER) :],
        "no-recursion",
        3,
    ),
    ("an undeclared name", _k("    out[i] = missing_value;"), "compiles", 4),
    (
        "a vector assigned a scalar pointer",
        _k("    float4 v = out;\n    out[i] = v.x;"),
        "compiles",
        4,
    ),
]


@pytest.fixture(scope="module")
def compiler() -> None:
    if not emu.is_available():
        require_tool("the Metal emulator needs clang++; none suitable runs here")


def test_the_invalid_suite_is_big_enough() -> None:
    assert len(INVALID) >= 12


@pytest.mark.parametrize(("case", "source", "rule", "line"), INVALID, ids=[c[0] for c in INVALID])
def test_an_invalid_kernel_is_refused_naming_the_rule(compiler, case, source, rule, line) -> None:
    out = np.zeros(4, np.float32)
    with pytest.raises(KernelLintError) as caught:
        run_kernel(source, "k", {0: out}, 4, backend="metal-emulator", sanitize=False)
    error = caught.value
    assert (line, rule) in [(at, name) for at, name, _ in error.problems], error.problems
    text = str(error)
    assert f"[{rule}]" in text
    # No raw compiler output: no file names, shim spellings or clang's attribute syntax.
    for raw in ("kernel.metal", "error:", "__attribute__", "LLMFS_", "llmfs_", "LLMFS-RULE"):
        assert raw not in text, text
    assert not out.any()  # nothing ran


def test_threadgroup_memory_over_32_kib_in_variables_and_arguments_fails_the_launch(
    compiler,
) -> None:
    """Each part fits, together they do not: Metal's limit is per threadgroup."""
    source = HEADER + (
        "kernel void k(device float* out [[buffer(0)]],\n"
        "              threadgroup float* extra [[threadgroup(0)]],\n"
        "              uint i [[thread_position_in_grid]]) {\n"
        "    threadgroup float tile[4096];\n"
        "    tile[i] = 1.0f;\n"
        "    extra[i] = tile[i];\n"
        "    out[i] = extra[i];\n"
        "}\n"
    )
    library = emu.load_library(source)
    out = np.zeros(4, np.float32)
    library.run("k", [out], 4, threadgroup_memory={0: 16384})  # 16 + 16 KiB: fits
    np.testing.assert_array_equal(out, 1.0)
    with pytest.raises(KernelLaunchError, match="threadgroup-memory-limit"):
        library.run("k", [out], 4, threadgroup_memory={0: 16400})


ORDER_SOURCE = HEADER + (
    "kernel void order(device atomic_uint* next [[buffer(0)]], device uint* seen [[buffer(1)]],\n"
    "                  uint t [[thread_index_in_threadgroup]]) {\n"
    "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
    "    seen[atomic_fetch_add_explicit(next, 1u, memory_order_relaxed)] = t;\n"
    "}\n"
)


def test_between_barriers_threads_run_in_grid_order_or_a_seeded_shuffle(compiler) -> None:
    def run(shuffle: int | None) -> np.ndarray:
        seen = np.zeros(64, np.uint32)
        run_kernel(
            ORDER_SOURCE,
            "order",
            [np.zeros(1, np.uint32), seen],
            64,
            64,
            shuffle=shuffle,
            sanitize=False,
        )
        return seen

    np.testing.assert_array_equal(run(None), np.arange(64))
    shuffled = run(3)
    assert sorted(shuffled) == list(range(64)) and not np.array_equal(shuffled, np.arange(64))
    np.testing.assert_array_equal(run(3), shuffled)  # the same seed, the same order
    assert not np.array_equal(run(4), shuffled)


def test_simdgroup_functions_run_isolated_and_a_fault_after_a_barrier_names_its_thread(
    compiler,
) -> None:
    faulty = HEADER + (
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    float s = simd_sum(1.0f);\n"
        "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "    uint far = i == 37 ? 100000u * uint(out[64]) : 0u;\n"
        "    out[i + far] = s;\n"
        "}\n"
    )
    out = np.zeros(65, np.float32)  # out[64] == 0: every thread writes in bounds
    run_kernel(faulty, "k", [out], 64, 64, sanitize=None, shuffle=2)
    np.testing.assert_array_equal(out[:64], 32.0)
    out[64] = 1.0  # now thread 37 writes far past the end, after the barrier
    with pytest.raises(KernelMemoryError) as caught:
        run_kernel(faulty, "k", [out], 64, 64, sanitize=None, shuffle=5)
    assert caught.value.thread == (37, 0, 0)


def test_run_kernel_passes_threadgroup_memory_to_the_emulator(compiler) -> None:
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(2, np.float32)
    args = [x, out, u32(256)]
    run_kernel(
        VALID_SOURCE,
        "tree_sum_argument",
        args,
        256,
        128,
        backend="metal-emulator",
        sanitize=False,
        threadgroup_memory={0: 512},
    )
    np.testing.assert_array_equal(out, [x[:128].sum(), x[128:].sum()])


@pytest.mark.parametrize("seed", range(3))
def test_literal_rewriting_keeps_lines_and_gives_msls_float_and_half_literals(seed) -> None:
    """Random sources of literals, comments and strings: every unsuffixed floating literal
    gains an f, every h literal becomes a half cast, comments and strings stay as written,
    and no line moves."""
    rng = np.random.default_rng(seed)
    pieces, expected = [], []
    for _ in range(60):
        kind = int(rng.integers(6))
        value = f"{rng.integers(0, 100)}.{rng.integers(0, 100)}"
        if kind == 0:
            pieces.append(value)
            expected.append(value + "f")
        elif kind == 1:
            pieces.append(value + "f")
            expected.append(value + "f")
        elif kind == 2:
            pieces.append(value + "h")
            expected.append(f"((half){value}f)")
        elif kind == 3:
            pieces.append(f"// {value} in a comment\n")
            expected.append(f"// {value} in a comment\n")
        elif kind == 4:
            pieces.append(f"x{rng.integers(10)}")  # an identifier, never a literal
            expected.append(pieces[-1])
        else:
            exponent = f"{rng.integers(1, 9)}e-{rng.integers(1, 5)}"
            pieces.append(exponent)
            expected.append(exponent + "f")
    source = " + ".join(pieces)
    rewritten = emu.msl_as_cpp(source)
    assert rewritten == " + ".join(expected)
    assert rewritten.count("\n") == source.count("\n")


def test_a_simdgroup_function_in_divergent_code_combines_the_active_lanes_only(compiler) -> None:
    """Lanes that returned, or wait at a barrier, take no part, as on a GPU; lanes of a partial
    simdgroup (the edge of the grid) do not exist."""
    source = HEADER + (
        "kernel void k(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],\n"
        "              uint i [[thread_position_in_grid]],\n"
        "              uint lane [[thread_index_in_simdgroup]]) {\n"
        "    if (lane % 3 == 1) return;\n"
        "    out[i] = simd_sum(x[i]);\n"
        "}\n"
    )
    x = np.arange(80, dtype=np.float32)
    for shuffle in ORDERS.values():
        out = np.full(80, -1.0, np.float32)
        run_kernel(source, "k", [x, out], 80, 64, shuffle=shuffle, sanitize=False)
        active = (np.arange(80) % 32) % 3 != 1
        for start in (0, 32, 64):  # the last simdgroup has 16 lanes (80 = 64 + 16)
            lanes = np.arange(start, min(start + 32, 80))
            total = x[lanes][active[lanes]].sum()
            np.testing.assert_array_equal(out[lanes][active[lanes]], total)
            np.testing.assert_array_equal(out[lanes][~active[lanes]], -1.0)
