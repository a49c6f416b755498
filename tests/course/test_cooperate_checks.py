"""The checks of chapter 12's kernel exercises: the solutions pass on the shuffled emulator, and
each way a cooperating kernel goes wrong fails with the misconception named (a race, an unguarded
thread, a thread that misses a barrier, a read of memory no thread wrote, a missing atomic or
tile), the library's own matmul kernel is refused as a shortcut, and the prediction helpers
measure what the chapter says they measure."""

from __future__ import annotations

from typing import Any

import pytest
from solutionkit import SOLUTIONS

from llmfs.course import CourseError
from llmfs.course.exercise_checks import CHECKS, SPECS, run_spec
from llmfs.course.exercise_checks.cooperate import (
    MEASURE_GROUP,
    TILE,
    device_loads_per_output,
    global_reads,
    missing_barrier,
    thread_census,
    tiled_grid,
    tree_measure,
)
from llmfs.course.exercise_checks.spec import SHORTCUT, draw_cases, outcome_of
from llmfs.tensor.backends.metal import emulator_available
from llmfs.tensor.backends.metal.ops import kernel_source

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not emulator_available(), reason="the checks run on the Metal emulator"),
]


def _solution(exercise_id: str) -> str:
    source = SOLUTIONS[exercise_id]()  # type: ignore[operator]
    assert isinstance(source, str)
    return source


def _changed(exercise_id: str, old: str, new: str) -> str:
    source = _solution(exercise_id)
    assert old in source, old
    return source.replace(old, new)


def _report(exercise_id: str, answer: Any) -> str:
    report = CHECKS[exercise_id](answer, record_attempt=False)
    assert not report.passed, repr(report)
    return repr(report)


@pytest.mark.parametrize(
    "exercise_id", ["ch12.tree_sum", "ch12.simd_sum", "ch12.histogram", "ch12.tiled_matmul"]
)
def test_the_solution_passes_on_the_visible_and_a_hidden_seed(exercise_id: str) -> None:
    for seed in (None, 3):
        report = run_spec(
            SPECS[exercise_id], _solution(exercise_id), seed=seed, record_attempt=False
        )
        assert report.passed, repr(report)


def test_the_cases_hold_partial_groups_and_sizes_off_the_tile() -> None:
    for _values, group in draw_cases(SPECS["ch12.tree_sum"], seed=9):
        assert group & (group - 1) == 0
    assert any(len(v) % g for v, g in draw_cases(SPECS["ch12.tree_sum"], seed=9))
    # The first case is one whole tile; every other has a size off the tile.
    for *_, batch, m, n, k in draw_cases(SPECS["ch12.tiled_matmul"], seed=9)[1:]:
        assert not (m % 8 == n % 8 == k % 8 == 0)
        assert tiled_grid(m, n, batch)[:2] == (-(-n // 8) * 8, -(-m // 8) * 8)


TREE_LOOP_BARRIER = """        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (lid == 0) {"""


@pytest.mark.parametrize(
    ("exercise_id", "old", "new", "named"),
    [
        # The loop's barrier removed: partners' slots read before they are written.
        ("ch12.tree_sum", TREE_LOOP_BARRIER, "    }\n    if (lid == 0) {", "RaceBetweenThreads"),
        # x read past its end by the last group's extra threads.
        ("ch12.tree_sum", "gid < count ? x[gid] : 0.0f", "x[gid]", "UnguardedThreads"),
        # The extra threads skip their store: their slots keep the emulator's junk.
        (
            "ch12.tree_sum",
            "shared[lid] = gid < count ? x[gid] : 0.0f;",
            "if (gid < count) { shared[lid] = x[gid]; }",
            "UnwrittenMemoryRead",
        ),
        # The extra threads return before the barrier the others wait at.
        (
            "ch12.tree_sum",
            "    shared[lid] = gid < count",
            "    if (gid >= count) { return; }\n    shared[lid] = gid < count",
            "ThreadsMissABarrier",
        ),
        ("ch12.simd_sum", "simd_sum(", "(", "MissingCooperation"),
        (
            "ch12.simd_sum",
            "    float value = gid",
            "    if (gid >= count) { return; }\n    float value = gid",
            "ThreadsMissABarrier",
        ),
        (
            "ch12.histogram",
            "atomic_fetch_add_explicit(&counts[ids[gid]], 1u, memory_order_relaxed);",
            "atomic_store_explicit(&counts[ids[gid]], 1u, memory_order_relaxed);",
            "MissingCooperation",
        ),
        ("ch12.histogram", "if (gid >= count) {", "if (false) {", "UnguardedThreads"),
        (
            "ch12.tiled_matmul",
            "(row < M && ak < K) ? a[row * K + ak] : 0.0f",
            "a[row * K + ak]",
            "UnguardedThreads",
        ),
        (
            "ch12.tiled_matmul",
            "        }\n        threadgroup_barrier(mem_flags::mem_threadgroup);\n    }",
            "        }\n    }",
            "RaceBetweenThreads",
        ),
        (
            "ch12.tiled_matmul",
            "    float acc = 0.0f;",
            "    if (row >= M || col >= N) { return; }\n    float acc = 0.0f;",
            "ThreadsMissABarrier",
        ),
    ],
)
def test_each_wrong_kernel_fails_with_its_misconception_named(
    exercise_id: str, old: str, new: str, named: str
) -> None:
    text = _report(exercise_id, _changed(exercise_id, old, new))
    assert f"raised {named}" in text, text


def test_a_tiled_matmul_that_skips_the_last_partial_tile_is_told_so() -> None:
    text = _report(
        "ch12.tiled_matmul",
        _changed(
            "ch12.tiled_matmul", "start < K; start += TILE", "start + TILE <= K; start += TILE"
        ),
    )
    assert "the last tile along K is skipped" in text, text


def test_a_naive_matmul_without_tiles_is_refused_by_name() -> None:
    naive = """
#include <metal_stdlib>
using namespace metal;

kernel void tiled_matmul(device const float* a [[buffer(0)]],
                         device const float* b [[buffer(1)]],
                         device float* c [[buffer(2)]],
                         constant uint& M [[buffer(3)]],
                         constant uint& N [[buffer(4)]],
                         constant uint& K [[buffer(5)]],
                         uint3 gid [[thread_position_in_grid]]) {
    if (gid.y >= M || gid.x >= N) {
        return;
    }
    float acc = 0.0f;
    for (uint k = 0; k < K; ++k) {
        acc += a[gid.z * M * K + gid.y * K + k] * b[gid.z * K * N + k * N + gid.x];
    }
    c[gid.z * M * N + gid.y * N + gid.x] = acc;
}
"""
    text = _report("ch12.tiled_matmul", naive)
    assert "raised MissingCooperation" in text and "two threadgroup float tiles" in text, text


def test_the_librarys_matmul_kernel_is_a_shortcut_however_it_is_reached() -> None:
    spec = SPECS["ch12.tiled_matmul"]
    case = draw_cases(spec, cases=1)[0]
    called = outcome_of(lambda: kernel_source("matmul"), case, spec)
    assert called["error"] == SHORTCUT and called["shortcut"].endswith("kernel_source")
    copied = outcome_of(kernel_source("matmul"), case, spec)  # the text handed over directly
    assert copied["error"] == SHORTCUT and "matmul.metal" in copied["shortcut"]


def test_the_prediction_helpers_measure_what_the_chapter_says() -> None:
    for n, tile in ((16, 4), (24, 8), (20, 8)):
        reads = global_reads(n, tile)
        assert reads == {"naive": 2 * n, "tiled": 2 * -(-n // tile)}
    barrier = missing_barrier([float(v) for v in range(1, 9)])
    assert barrier["grid_order"] == 1 + 5 + 3 + 2 and not barrier["same_in_every_order"]
    # The chapter's group of 128 threads (four 32-lane SIMD-groups): in grid order thread 0 adds
    # the stored values of slots 64, 32, ..., 1, and the shuffled orders disagree.
    barrier = missing_barrier([float(v) for v in range(1, 129)])
    assert barrier["grid_order"] == 1 + sum(1 + 2**k for k in range(7))
    assert not barrier["same_in_every_order"] and len(set(barrier["totals"])) > 1
    for rows, cols in ((13, 10), (8, 8), (1, 17)):
        grid = tiled_grid(rows, cols)
        census = thread_census(rows, cols)
        assert census == {"launched": grid[0] * grid[1], "guarded": grid[0] * grid[1] - rows * cols}
    with pytest.raises(CourseError, match="power of two"):
        missing_barrier([1.0, 2.0, 3.0])
    with pytest.raises(CourseError):
        thread_census(0, 4)
    with pytest.raises(CourseError):
        global_reads(8, 64)


# Kernels that give the right numbers without the cooperation the exercises are about: the
# checks measure what they do (barrier rounds, slots each thread reads, device loads per output)
# on the emulator, so each fails with the mistake named.
SERIAL_SUM = """
#include <metal_stdlib>
using namespace metal;

kernel void group_sum(device const float* x [[buffer(0)]],
                      device float* partial [[buffer(1)]],
                      constant uint& count [[buffer(2)]],
                      threadgroup float* shared [[threadgroup(0)]],
                      uint gid [[thread_position_in_grid]],
                      uint lid [[thread_position_in_threadgroup]],
                      uint group [[threadgroup_position_in_grid]],
                      uint size [[threads_per_threadgroup]]) {
    shared[lid] = gid < count ? x[gid] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid == 0) {
        float total = 0.0f;
        for (uint i = 0; i < size; ++i) {
            total += shared[i];
        }
        partial[group] = total;
    }
}
"""
TWO_LEVEL_SUM = """
#include <metal_stdlib>
using namespace metal;

kernel void group_sum(device const float* x [[buffer(0)]],
                      device float* partial [[buffer(1)]],
                      constant uint& count [[buffer(2)]],
                      threadgroup float* shared [[threadgroup(0)]],
                      uint gid [[thread_position_in_grid]],
                      uint lid [[thread_position_in_threadgroup]],
                      uint group [[threadgroup_position_in_grid]],
                      uint size [[threads_per_threadgroup]]) {
    shared[lid] = gid < count ? x[gid] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint chunk = size / 4;
    if (lid < 4) {
        float part = 0.0f;
        for (uint i = 0; i < chunk; ++i) {
            part += shared[lid * chunk + i];
        }
        shared[lid * chunk] = part;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid == 0) {
        partial[group] = shared[0] + shared[chunk] + shared[2 * chunk] + shared[3 * chunk];
    }
}
"""
DECOY_TILES = """
#include <metal_stdlib>
using namespace metal;

kernel void tiled_matmul(device const float* a [[buffer(0)]],
                         device const float* b [[buffer(1)]],
                         device float* c [[buffer(2)]],
                         constant uint& M [[buffer(3)]],
                         constant uint& N [[buffer(4)]],
                         constant uint& K [[buffer(5)]],
                         uint3 gid [[thread_position_in_grid]]) {
    threadgroup float a_tile[1];
    threadgroup float b_tile[1];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (gid.y >= M || gid.x >= N) {
        return;
    }
    float acc = 0.0f;
    for (uint k = 0; k < K; ++k) {
        acc += a[gid.z * M * K + gid.y * K + k] * b[gid.z * K * N + k * N + gid.x];
    }
    c[gid.z * M * N + gid.y * N + gid.x] = acc;
}
"""

# Barrier rounds of a tree, each round's additions all made by thread 0: the right number of
# rounds, but one thread reads every slot.
ROUNDS_BY_ONE_THREAD = """
#include <metal_stdlib>
using namespace metal;

kernel void group_sum(device const float* x [[buffer(0)]],
                      device float* partial [[buffer(1)]],
                      constant uint& count [[buffer(2)]],
                      threadgroup float* shared [[threadgroup(0)]],
                      uint gid [[thread_position_in_grid]],
                      uint lid [[thread_position_in_threadgroup]],
                      uint group [[threadgroup_position_in_grid]],
                      uint size [[threads_per_threadgroup]]) {
    shared[lid] = gid < count ? x[gid] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = size / 2; stride > 0; stride /= 2) {
        if (lid == 0) {
            for (uint i = 0; i < stride; ++i) {
                shared[i] += shared[i + stride];
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (lid == 0) {
        partial[group] = shared[0];
    }
}
"""
# Two tiles, two barriers per tile step, but only a is read through its tile: every product
# still loads its value of b from device memory.
HALF_TILED = """
#include <metal_stdlib>
using namespace metal;

constant uint TILE = 8;

kernel void tiled_matmul(device const float* a [[buffer(0)]],
                         device const float* b [[buffer(1)]],
                         device float* c [[buffer(2)]],
                         constant uint& M [[buffer(3)]],
                         constant uint& N [[buffer(4)]],
                         constant uint& K [[buffer(5)]],
                         uint3 gid [[thread_position_in_grid]],
                         uint3 lid [[thread_position_in_threadgroup]]) {
    threadgroup float a_tile[TILE][TILE];
    threadgroup float b_tile[TILE][TILE];
    uint row = gid.y;
    uint col = gid.x;
    a += gid.z * M * K;
    b += gid.z * K * N;
    c += gid.z * M * N;
    float acc = 0.0f;
    for (uint start = 0; start < K; start += TILE) {
        uint ak = start + lid.x;
        a_tile[lid.y][lid.x] = (row < M && ak < K) ? a[row * K + ak] : 0.0f;
        b_tile[lid.y][lid.x] = 0.0f;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint k = 0; k < TILE; ++k) {
            uint bk = start + k;
            acc += a_tile[lid.y][k] * ((bk < K && col < N) ? b[bk * N + col] : 0.0f);
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (row < M && col < N) {
        c[row * N + col] = acc;
    }
}
"""


@pytest.mark.parametrize(
    ("exercise_id", "source", "named", "says"),
    [
        ("ch12.tree_sum", SERIAL_SUM, "SerialReduction", f"read {MEASURE_GROUP} of the"),
        ("ch12.tree_sum", TWO_LEVEL_SUM, "SerialReduction", "one thread read"),
        ("ch12.tiled_matmul", DECOY_TILES, "UntiledLoads", "loads 64 values"),
        ("ch12.tree_sum", ROUNDS_BY_ONE_THREAD, "SerialReduction", "one thread read"),
        ("ch12.tiled_matmul", HALF_TILED, "UntiledLoads", "should cut that 8 times"),
    ],
)
def test_a_kernel_that_skips_the_cooperation_fails_by_what_it_does(
    exercise_id: str, source: str, named: str, says: str
) -> None:
    text = _report(exercise_id, source)
    assert f"raised {named}" in text and says in text, text


def test_the_measurements_count_a_tree_and_a_tiling() -> None:
    halvings = MEASURE_GROUP.bit_length() - 1
    rounds, words = tree_measure(_solution("ch12.tree_sum")) or (0, 0)
    assert rounds == halvings + 1 and words == halvings + 1  # own slot, then one per round
    assert tree_measure(SERIAL_SUM) == (1, MEASURE_GROUP)
    naive = device_loads_per_output(DECOY_TILES)
    tiled = device_loads_per_output(_solution("ch12.tiled_matmul"))
    assert naive is not None and tiled is not None and naive == TILE * tiled
