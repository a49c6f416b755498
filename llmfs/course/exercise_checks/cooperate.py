"""Checks of the "implement it" exercises about kernels whose threads cooperate (chapter 12).

Four kernels, each the MSL source a learner's function returns (as in chapter 5,
:mod:`.kernels`): a tree reduction through threadgroup memory and barriers (``group_sum``), the
same sum with ``simd_sum`` (``simd_group_sum``), a histogram of token ids with
``atomic_fetch_add_explicit`` (``histogram``) and a matrix multiply through two threadgroup
tiles (``tiled_matmul``, the kernel of :class:`~llmfs.tensor.backends.metal.ops.MatmulKernel`,
so the same source then serves the GPT's matmuls).

Every case runs the kernel on the emulator with its threads SHUFFLED (:data:`SHUFFLE_SEED`; on
Metal where no C++ compiler is found), isolated, on random sizes that are not multiples of the
group or the tile, so the last threadgroup always holds threads past the data. What a wrong
kernel does is named, by an error whose class is the misconception (the notebook's report shows
its message, the grader's row its name):

* :class:`UnguardedThreads`: a thread read or wrote outside a buffer (the emulator's fences);
* :class:`ThreadsMissABarrier`: a thread returned while the rest of its group waited at a
  barrier;
* :class:`RaceBetweenThreads`: the result changes with the order the threads run in: a barrier
  is missing between writing threadgroup memory and reading it (or overwriting it);
* :class:`UnwrittenMemoryRead`: a value no thread wrote reached the result (the emulator fills
  threadgroup memory with NaN on every launch, as a GPU promises nothing there);
* :class:`MissingCooperation`: the kernel does without what the exercise is about (threadgroup
  tiles and barriers, ``simd_sum``, an atomic increment), which no value can show: a plain
  ``counts[id] += 1`` loses increments on a GPU, and the emulator, running one thread at a time,
  would never lose one;
* :class:`SerialReduction`: a "tree" sum whose threads do not share the work, measured on the
  emulator (its counted launch, ``EmulatorLibrary.count_accesses``): one thread reads all (or
  most) of the slots of threadgroup memory; a tree whose group passes fewer barrier rounds
  than log2 of its size is a :class:`RaceBetweenThreads`, even where one run is right;
* :class:`UntiledLoads`: a "tiled" matmul whose threads load as many values of ``a`` and ``b``
  from device memory per output as the naive kernel does, where a T x T tile loads T times
  fewer: declared tiles and a barrier are not tiling.

The two measurements count what a kernel does, not what its text says (see
:func:`tree_measure` and :func:`device_loads_per_output`); where loads cannot be counted (a
Mac's Metal without the emulator) only the text rules stand.

Copying the library's own matmul kernel (its source text, or :func:`kernel_source`) is a
shortcut and is refused as one.

The helpers :func:`global_reads`, :func:`missing_barrier` and :func:`thread_census` measure what
the chapter's predictions ask about, by running kernels on the emulator.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from llmfs.course import CourseError
from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register, to_json

#: Random cases per kernel check (each an isolated launch, tens of milliseconds).
KERNEL_CASES = 12

#: The thread order the checks run the learner's kernels in; a result that is wrong is run again
#: in grid order and in :data:`SECOND_SEED`'s order, to tell a race from a wrong formula.
SHUFFLE_SEED = 5
SECOND_SEED = 11

#: The tile of ``tiled_matmul``: threadgroups of TILE x TILE threads, two TILE x TILE tiles.
TILE = 8


# --------------------------------------------------------------------------------------------
# The misconceptions, as errors
# --------------------------------------------------------------------------------------------


class KernelMisconception(CourseError):
    """A kernel that breaks a rule of cooperating threads; the subclass names the rule."""


class UnguardedThreads(KernelMisconception):
    """A thread past the data read or wrote outside a buffer."""


class ThreadsMissABarrier(KernelMisconception):
    """A thread returned while its group waited at a barrier."""


class RaceBetweenThreads(KernelMisconception):
    """The result depends on the order the threads run in."""


class UnwrittenMemoryRead(KernelMisconception):
    """A value no thread wrote reached the result."""


class MissingCooperation(KernelMisconception):
    """The kernel does without the construct the exercise is about."""


class SerialReduction(KernelMisconception):
    """A "tree" sum whose threads do not share the work: one thread reads many slots of
    threadgroup memory (more than its own and one partner's per halving)."""


class UntiledLoads(KernelMisconception):
    """A "tiled" matmul that reads device memory as often as the naive kernel: its tiles do not
    replace the device loads they are for."""


def _named(kernel: str, error: Exception) -> Exception:
    """The misconception a launch error shows, or the error itself."""
    from llmfs.tensor.backends.metal import KernelLaunchError, KernelMemoryError

    if isinstance(error, KernelMemoryError):
        where = f" {list(error.thread)}" if error.thread else ""
        return UnguardedThreads(
            f"thread{where} read or wrote outside a buffer: a thread past the data must load 0, "
            f"skip its store and still reach every barrier (kernel {kernel})"
        )
    if isinstance(error, KernelLaunchError) and "did not all reach threadgroup_barrier" in str(
        error
    ):
        return ThreadsMissABarrier(
            f"threads returned while their group waited at threadgroup_barrier (Metal requires "
            f"every thread of a group to reach every barrier; on a GPU the result is undefined, "
            f"a hang among the possible outcomes): guard the work, never the barrier "
            f"(kernel {kernel})"
        )
    return error


def _requirements(kernel: str, source: str, rules: Sequence[tuple[str, str]]) -> None:
    """Raises :class:`MissingCooperation` for the first ``(pattern, message)`` whose pattern the
    source (comments blanked) does not match."""
    from llmfs.tensor.backends.metal.msl import blank_comments

    text = blank_comments(source)
    for pattern, message in rules:
        if not re.search(pattern, text):
            raise MissingCooperation(f"{message} (kernel {kernel})")


def _launch(
    source: str,
    name: str,
    buffers: list[Any],
    grid: Any,
    group: Any,
    memory: dict[int, int] | None,
    shuffle: int | None,
) -> None:
    # The Metal backend probes for a compiler when loaded: only kernel checks pay for it.
    from llmfs.tensor.backends.metal import MetalError, emulator_available, run_kernel

    try:
        if emulator_available():
            run_kernel(
                source,
                name,
                buffers,
                grid,
                group,
                backend="metal-emulator",
                shuffle=shuffle,
                threadgroup_memory=memory,
            )
        else:
            run_kernel(
                source, name, buffers, grid, group, backend="metal", threadgroup_memory=memory
            )
    except MetalError as error:
        raise _named(name, error) from None


def _cooperative_run(
    name: str,
    run_once: Callable[[int | None], np.ndarray],
    expected: np.ndarray,
) -> list[Any]:
    """Runs ``run_once(shuffle)`` shuffled; a wrong result is run again in two other orders and
    named: :class:`RaceBetweenThreads` when the orders disagree, :class:`UnwrittenMemoryRead`
    when a NaN the inputs cannot make came out. Else the (right or wrong) values."""
    got = run_once(SHUFFLE_SEED)
    if np.array_equal(got, expected, equal_nan=True):
        return _plain(got)
    others = [run_once(None), run_once(SECOND_SEED)]
    if any(not np.array_equal(got, other, equal_nan=True) for other in others):
        raise RaceBetweenThreads(
            f"the result changes with the thread order (a race): a threadgroup_barrier is "
            f"missing between writing threadgroup memory and reading or overwriting it "
            f"(kernel {name})"
        )
    if np.isnan(got).any() and not np.isnan(expected).any():
        raise UnwrittenMemoryRead(
            f"NaN from finite inputs: threadgroup memory was read before any thread wrote it "
            f"(the emulator fills it with NaN); threads past the data write 0 (kernel {name})"
        )
    return _plain(got)


def _plain(values: np.ndarray) -> list[Any]:
    return [to_json(float(v)) if isinstance(v, float | np.floating) else to_json(v) for v in values]


def _quarters(rng: random.Random, count: int, low: int = -16, high: int = 16) -> list[float]:
    # Quarters are exact in float32 and so are their sums here: results compare exactly.
    return [rng.randint(low, high) / 4 for _ in range(count)]


# --------------------------------------------------------------------------------------------
# Cooperation measured: what a kernel reads, counted by the emulator (not read off its text)
# --------------------------------------------------------------------------------------------

#: The group of the tree sum's measurement launch: 5 halvings.
MEASURE_GROUP = 32
#: The matmul measurement's sizes (whole tiles: every thread loads, none is past the data).
MEASURE_MATMUL = (2 * TILE, 2 * TILE, 4 * TILE)  # M, N, K

_MEASURED: dict[tuple[str, str], Any] = {}


def _counted(source: str, name: str, buffers: list[Any], grid: Any, group: Any, memory: Any) -> Any:
    """The emulator's :class:`~llmfs.tensor.backends.metal.emulator.AccessCounts` of one launch
    of ``name``, remembered per source (a check's cases share one measurement); ``None`` where
    loads cannot be counted (no emulator, or a compiler without load tracing)."""
    from llmfs.tensor.backends.metal import MetalError, MetalUnavailableError, emulator_available

    key = (name, source)
    if key in _MEASURED:
        return _MEASURED[key]
    if not emulator_available():
        return None
    from llmfs.tensor.backends.metal.emulator import load_library

    try:
        counts = load_library(source).count_accesses(
            name, buffers, grid, group, threadgroup_memory=memory
        )
    except MetalUnavailableError:
        counts = None
    except MetalError as error:
        raise _named(name, error) from None
    if len(_MEASURED) > 64:
        _MEASURED.clear()
    _MEASURED[key] = counts
    return counts


def tree_measure(source: str, group: int = MEASURE_GROUP) -> tuple[int, int] | None:
    """``(barrier rounds, most slots one thread read)`` of kernel ``group_sum`` in ``source`` on
    two full groups of ``group`` threads (counted by the emulator), or ``None`` where loads
    cannot be counted."""
    x = np.arange(1, 2 * group + 1, dtype=np.float32)
    out = np.zeros(2, dtype=np.float32)
    buffers = [x, out, np.uint32(2 * group)]
    counts = _counted(source, "group_sum", buffers, 2 * group, (group, 1, 1), {0: 4 * group})
    return None if counts is None else (counts.barrier_rounds, counts.threadgroup_words)


def _check_tree(source: str) -> None:
    measured = tree_measure(source)
    if measured is None:
        return
    rounds, words = measured
    halvings = MEASURE_GROUP.bit_length() - 1
    if words >= MEASURE_GROUP or words > 2 * halvings:
        # Short enough to show in full under the report's table (MESSAGE_LIMIT).
        raise SerialReduction(
            f"one thread read {words} of the {MEASURE_GROUP} slots of threadgroup memory: in a "
            f"tree each thread reads its own slot and one partner's per round ({halvings} "
            f"rounds) (kernel group_sum)"
        )
    if rounds < halvings:
        # A tree whose rounds are not separated by barriers races, whatever one run shows.
        raise RaceBetweenThreads(
            f"the group passed {rounds} barrier round(s) where a tree over {MEASURE_GROUP} "
            f"threads has {halvings}: without a barrier between rounds a thread can read a slot "
            f"before it is written (kernel group_sum)"
        )


_NAIVE_MATMUL = """
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


def device_loads_per_output(source: str) -> float | None:
    """Values kernel ``tiled_matmul`` in ``source`` loads from ``a`` and ``b`` in device memory
    per output, on a ``[1, M, K] @ [1, K, N]`` product of whole tiles (:data:`MEASURE_MATMUL`),
    counted by the emulator; ``None`` where loads cannot be counted."""
    m, n, k = MEASURE_MATMUL
    rng = np.random.default_rng(0)
    a = rng.integers(-4, 5, (1, m, k)).astype(np.float32)
    b = rng.integers(-4, 5, (1, k, n)).astype(np.float32)
    c = np.zeros(m * n, dtype=np.float32)
    buffers = [a, b, c, np.uint32(m), np.uint32(n), np.uint32(k)]
    counts = _counted(source, "tiled_matmul", buffers, tiled_grid(m, n), (TILE, TILE, 1), None)
    if counts is None:
        return None
    return (counts.values_read(0) + counts.values_read(1)) / (m * n)


def _check_tiling(source: str) -> None:
    loads = device_loads_per_output(source)
    naive = device_loads_per_output(_NAIVE_MATMUL)
    if loads is None or naive is None:
        return
    if loads * TILE > naive:
        raise UntiledLoads(
            f"each output loads {loads:g} values of a and b from device memory, the naive "
            f"kernel {naive:g}: {TILE} x {TILE} tiles should cut that {TILE} times, to "
            f"{naive / TILE:g}, products reading only the tiles (kernel tiled_matmul)"
        )


# --------------------------------------------------------------------------------------------
# group_sum: buffers 0 x, 1 partial (one per group), 2 count; [[threadgroup(0)]] one float
# per thread
# --------------------------------------------------------------------------------------------

_REDUCTION_RULES = (
    (r"\bthreadgroup\b", "no threadgroup memory: the exercise sums through it"),
    (
        r"\bthreadgroup_barrier\s*\(",
        "no threadgroup_barrier: a thread reads its partner's slot only after a barrier",
    ),
)


def _sum_cases(rng: random.Random, n: int, sizes: Sequence[int]) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [
        ([float(k) for k in range(1, 17)], sizes[1]),
        (_quarters(rng, 37), sizes[0]),
        (_quarters(rng, 3), sizes[-1]),
    ]
    while len(cases) < n:
        group = rng.choice(sizes)
        count = rng.randint(1, 3 * group + group // 2)
        if count % group == 0:
            count += rng.randint(1, group - 1)  # the last group is partial
        cases.append((_quarters(rng, count), group))
    return cases[:n]


def _chunk_sums(values: list[float], group: int) -> np.ndarray:
    # The runners compare with this, not with the spec's reference: a grader refuses any call
    # of a reference answer while a learner's code runs.
    x = np.array(values, dtype=np.float32)
    groups = -(-len(values) // group)
    return np.array([x[g * group : (g + 1) * group].sum() for g in range(groups)], np.float32)


def _sum_reference(values: list[float], group: int) -> list[Any]:
    return _plain(_chunk_sums(values, group))


def _run_sum(
    name: str,
    rules: Sequence[tuple[str, str]],
    memory_bytes: Callable[[int], int],
    measure: Callable[[str], None] | None = None,
) -> Callable[..., list[Any]]:
    """The case runner of a per-group sum kernel ``name`` (``[[threadgroup(0)]]`` of
    ``memory_bytes(group)`` bytes); ``measure(source)`` then checks how it cooperates."""

    def run(kernel_source: str, values: list[float], group: int) -> list[Any]:
        _requirements(name, kernel_source, rules)
        if measure is not None:
            # Measured first (then remembered), so the counting build compiles in the warm-up
            # launch, never inside a timed case; judged after the values, so a race is named
            # as one.
            tree_measure(kernel_source)
        x = np.array(values, dtype=np.float32)
        groups = -(-len(values) // group)
        expected = _chunk_sums(values, group)

        def once(shuffle: int | None) -> np.ndarray:
            out = np.full(groups, -1.0, dtype=np.float32)
            buffers = [x, out, np.uint32(len(values))]
            memory = {0: memory_bytes(group)}
            _launch(kernel_source, name, buffers, groups * group, (group, 1, 1), memory, shuffle)
            return out

        result = _cooperative_run(name, once, expected)
        if measure is not None:
            measure(kernel_source)
        return result

    return run


_run_group_sum = _run_sum(
    "group_sum", _REDUCTION_RULES, lambda group: max(16, 4 * group), _check_tree
)

_SIMD_RULES = (
    (r"\bsimd_sum\s*\(", "no simd_sum: the exercise sums each simdgroup's lanes with it"),
)
#: Up to 32 simdgroups of 32 lanes: one float per simdgroup.
_run_simd_sum = _run_sum("simd_group_sum", _SIMD_RULES, lambda group: 128)


def _explain_sum(got: Any, want: Any, values: list[float], group: int) -> str | None:
    if not isinstance(got, list) or len(got) != len(want):
        return None
    last = len(want) - 1
    if all(g == w for g, w in zip(got[:last], want[:last])) and got[last] != want[last]:
        return (
            "only the last group's sum is wrong, and only the last group holds threads past "
            "the data: such a thread must add 0 (store 0 in its slot, or take 0 as its "
            "value), never skip its part or read x past its end, and still reach every barrier"
        )
    return None


# --------------------------------------------------------------------------------------------
# histogram: buffers 0 ids (int), 1 counts (atomic_uint), 2 count (uint)
# --------------------------------------------------------------------------------------------

_HISTOGRAM_RULES = (
    (
        r"\batomic_fetch_add_explicit\s*\(",
        "no atomic_fetch_add_explicit: two threads that += one counter can lose an increment, "
        "which the emulator (one thread at a time) never shows",
    ),
)


def _histogram_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([3, 1, 3, 3, 0, 11, 3], 12, 9), ([], 4, 3), ([0] * 40, 1, 40)]
    while len(cases) < n:
        bins = rng.randint(1, 16)
        count = rng.randint(1, 90)
        # A few ids drawn often: the same counter is hit many times.
        popular = [rng.randrange(bins) for _ in range(rng.randint(1, 3))]
        ids = [
            rng.choice(popular) if rng.random() < 0.5 else rng.randrange(bins) for _ in range(count)
        ]
        cases.append((ids, bins, count + rng.choice((0, 0, 1, 5, 31))))
    return cases[:n]


def _counts(ids: list[int], bins: int) -> np.ndarray:
    return np.bincount(np.array(ids, dtype=np.int64), minlength=bins).astype(np.uint32)


def _histogram_reference(ids: list[int], bins: int, grid: int) -> list[Any]:
    return _plain(_counts(ids, bins).astype(np.int64))


def _run_histogram(source: str, ids: list[int], bins: int, grid: int) -> list[Any]:
    _requirements("histogram", source, _HISTOGRAM_RULES)
    expected = _counts(ids, bins)
    tokens = np.array(ids, dtype=np.int32)

    def once(shuffle: int | None) -> np.ndarray:
        counts = np.zeros(bins, dtype=np.uint32)
        _launch(
            source, "histogram", [tokens, counts, np.uint32(len(ids))], grid, None, None, shuffle
        )
        return counts

    return _cooperative_run("histogram", once, expected)


# --------------------------------------------------------------------------------------------
# tiled_matmul: buffers 0 a [batch, M, K], 1 b [batch, K, N], 2 c [batch, M, N], 3 M, 4 N, 5 K
# --------------------------------------------------------------------------------------------

_TILED_RULES = (
    (
        r"\bthreadgroup\s+float\s+\w+\s*\[[^\]]*\](?:\s*\[[^\]]*\])?\s*;[\s\S]*"
        r"\bthreadgroup\s+float\s+\w+\s*\[",
        "fewer than two threadgroup float tiles: stage a tile of a and one of b in threadgroup "
        "memory, read from device memory once per tile",
    ),
    (
        r"\bthreadgroup_barrier\s*\(",
        "no threadgroup_barrier: the tiles are shared, so barriers must separate their loads "
        "from their reads",
    ),
)

#: Text of the library's matmul kernel: a source holding it copies the library's work.
_SHIPPED_MATMUL = "inline void matmul(device const T* a"


def tiled_grid(m: int, n: int, batch: int = 1, tile: int = TILE) -> tuple[int, int, int]:
    """The grid a ``tiled_matmul`` launch uses for ``[batch, m, n]``: each axis rounded up to
    whole tiles (x along the columns, y along the rows), z one per batch entry."""
    return (-(-n // tile) * tile, -(-m // tile) * tile, batch)


def _matmul_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    def case(batch: int, m: int, k: int, cols: int) -> tuple[Any, ...]:
        return (
            _quarters(rng, batch * m * k, -8, 8),
            _quarters(rng, batch * k * cols, -8, 8),
            batch,
            m,
            cols,
            k,
        )

    cases = [case(1, 8, 8, 8), case(1, 13, 19, 10), case(2, 3, 5, 9)]
    while len(cases) < n:
        dims = [rng.randint(1, 3 * TILE) for _ in range(3)]
        if all(d % TILE == 0 for d in dims):
            dims[0] += 1
        cases.append(case(rng.choice((1, 1, 2, 3)), *dims))
    return cases[:n]


def _matmul_arrays(
    a: list[float], b: list[float], batch: int, m: int, n: int, k: int
) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array(a, dtype=np.float32).reshape(batch, m, k),
        np.array(b, dtype=np.float32).reshape(batch, k, n),
    )


def _product(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return (left.astype(np.float64) @ right.astype(np.float64)).reshape(-1)


def _matmul_reference(a: list[float], b: list[float], batch: int, m: int, n: int, k: int) -> Any:
    return _plain(_product(*_matmul_arrays(a, b, batch, m, n, k)))


def _run_matmul(
    source: str, a: list[float], b: list[float], batch: int, m: int, n: int, k: int
) -> list[Any]:
    _requirements("tiled_matmul", source, _TILED_RULES)
    # Measured first (then remembered): the counting builds compile in the warm-up launch.
    device_loads_per_output(source)
    device_loads_per_output(_NAIVE_MATMUL)
    left, right = _matmul_arrays(a, b, batch, m, n, k)
    expected = _product(left, right).astype(np.float32)

    def once(shuffle: int | None) -> np.ndarray:
        out = np.full(batch * m * n, -1.0, dtype=np.float32)
        buffers = [left, right, out, np.uint32(m), np.uint32(n), np.uint32(k)]
        grid = tiled_grid(m, n, batch)
        _launch(source, "tiled_matmul", buffers, grid, (TILE, TILE, 1), None, shuffle)
        return out

    result = _cooperative_run("tiled_matmul", once, expected)
    _check_tiling(source)
    return result


def _shipped_matmul(source: str) -> str | None:
    """The library kernel a source copies, if it holds the library's matmul text."""
    if _SHIPPED_MATMUL in source:
        return "llmfs.tensor.backends.metal kernels/matmul.metal"
    return None


def _explain_matmul(
    got: Any, want: Any, a: list[float], b: list[float], batch: int, m: int, n: int, k: int
) -> str | None:
    """Names two wrong tilings by the entries they get wrong (never the expected values)."""
    if not isinstance(got, list) or len(got) != len(want):
        return None
    left, right = _matmul_arrays(a, b, batch, m, n, k)
    full_k = (k // TILE) * TILE
    if full_k < k:
        truncated = left[:, :, :full_k].astype(np.float64) @ right[:, :full_k, :].astype(np.float64)
        if np.array_equal(np.array(got, dtype=np.float64), truncated.reshape(-1)):
            return (
                "the last tile along K is skipped: when K is not a multiple of the tile, the loop "
                "over tiles still runs once more (ceil(K / TILE) steps) and loads 0 past K"
            )
    wrong = np.array(got, dtype=np.float64).reshape(batch, m, n) != np.array(
        want, dtype=np.float64
    ).reshape(batch, m, n)
    rows, cols = (m // TILE) * TILE, (n // TILE) * TILE
    if wrong.any() and not wrong[:, :rows, :cols].any():
        return (
            "only outputs in the edge tiles (past the last whole tile of rows or columns) are "
            "wrong: check the loads there: a thread loads the slot at its own (row, k) of a and "
            "(k, col) of b, and 0 where that lies past the matrix"
        )
    if wrong.any():
        return (
            "wrong values without a race: check the tile indices. Thread (tx, ty) stores "
            "a[row, t * TILE + tx] at a_tile[ty][tx] and b[t * TILE + ty, col] at b_tile[ty][tx], "
            "and sums a_tile[ty][i] * b_tile[i][tx] over i"
        )
    return None


# --------------------------------------------------------------------------------------------
# What the predictions measure
# --------------------------------------------------------------------------------------------

_COUNTING = """
#include <metal_stdlib>
using namespace metal;

constant uint TILE = {tile};

// One counter per output value: every read of a or b from device memory adds 1.
kernel void naive_counted(device const float* a [[buffer(0)]],
                          device const float* b [[buffer(1)]],
                          device float* c [[buffer(2)]],
                          device atomic_uint* reads [[buffer(3)]],
                          constant uint& n [[buffer(4)]],
                          uint2 gid [[thread_position_in_grid]]) {{
    if (gid.x >= n || gid.y >= n) {{
        return;
    }}
    float acc = 0.0f;
    for (uint k = 0; k < n; ++k) {{
        acc += a[gid.y * n + k] * b[k * n + gid.x];
        atomic_fetch_add_explicit(&reads[gid.y * n + gid.x], 2u, memory_order_relaxed);
    }}
    c[gid.y * n + gid.x] = acc;
}}

kernel void tiled_counted(device const float* a [[buffer(0)]],
                          device const float* b [[buffer(1)]],
                          device float* c [[buffer(2)]],
                          device atomic_uint* reads [[buffer(3)]],
                          constant uint& n [[buffer(4)]],
                          uint2 gid [[thread_position_in_grid]],
                          uint2 lid [[thread_position_in_threadgroup]]) {{
    threadgroup float a_tile[TILE][TILE];
    threadgroup float b_tile[TILE][TILE];
    bool inside = gid.x < n && gid.y < n;
    float acc = 0.0f;
    for (uint start = 0; start < n; start += TILE) {{
        uint ak = start + lid.x;
        uint bk = start + lid.y;
        a_tile[lid.y][lid.x] = (gid.y < n && ak < n) ? a[gid.y * n + ak] : 0.0f;
        b_tile[lid.y][lid.x] = (bk < n && gid.x < n) ? b[bk * n + gid.x] : 0.0f;
        if (inside) {{
            atomic_fetch_add_explicit(&reads[gid.y * n + gid.x], 2u, memory_order_relaxed);
        }}
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = 0; i < TILE; ++i) {{
            acc += a_tile[lid.y][i] * b_tile[i][lid.x];
        }}
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }}
    if (inside) {{
        c[gid.y * n + gid.x] = acc;
    }}
}}
"""


def global_reads(n: int, tile: int = TILE) -> dict[str, int]:
    """Reads of ``a`` and ``b`` from device memory per output value of an ``n x n`` matmul, by
    the naive kernel (one thread per output, a row of ``a`` times a column of ``b``) and by the
    tiled one (two ``tile x tile`` tiles in threadgroup memory), counted by the kernels
    themselves (an atomic counter per output, see :data:`_COUNTING`) on the emulator, and
    checked against NumPy. Raises :class:`CourseError` for a size or tile below 1 (or a
    ``tile x tile`` group above 1,024 threads)."""
    from llmfs.tensor.backends.metal import run_kernel

    if n < 1 or tile < 1 or tile * tile > 1024:
        raise CourseError(f"global_reads needs n >= 1 and 1 <= tile <= 32, got {n} and {tile}")
    source = _COUNTING.format(tile=tile)
    rng = np.random.default_rng(n)
    a = rng.integers(-4, 5, (n, n)).astype(np.float32)
    b = rng.integers(-4, 5, (n, n)).astype(np.float32)
    grid = (-(-n // tile) * tile, -(-n // tile) * tile)
    result: dict[str, int] = {}
    for kind in ("naive", "tiled"):
        c = np.zeros((n, n), dtype=np.float32)
        reads = np.zeros(n * n, dtype=np.uint32)
        run_kernel(
            source,
            f"{kind}_counted",
            [a, b, c, reads, np.array([n], dtype=np.uint32)],
            grid,
            (tile, tile, 1),
            backend="metal-emulator",
            sanitize=False,  # the library's own kernels: every access guarded
        )
        if not np.array_equal(c, a @ b):
            raise CourseError(f"the counting {kind} kernel computed a wrong product")
        result[kind] = int(reads.sum()) // (n * n)
    return result


_TREE_WITHOUT_LOOP_BARRIER = """
#include <metal_stdlib>
using namespace metal;

kernel void tree_sum(device const float* x [[buffer(0)]],
                     device float* total [[buffer(1)]],
                     threadgroup float* shared [[threadgroup(0)]],
                     uint lid [[thread_position_in_threadgroup]],
                     uint size [[threads_per_threadgroup]]) {
    shared[lid] = x[lid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = size / 2; stride > 0; stride /= 2) {
        if (lid < stride) {
            shared[lid] += shared[lid + stride];
        }
        // The barrier that belongs here is missing.
    }
    if (lid == 0) {
        total[0] = shared[0];
    }
}
"""

#: The kernel :func:`missing_barrier` runs: a tree sum whose loop lost its barrier.
TREE_WITHOUT_LOOP_BARRIER = _TREE_WITHOUT_LOOP_BARRIER

#: The shuffled orders :func:`missing_barrier` compares.
BARRIER_SEEDS = (1, 2, 3, 4, 5, 6, 7, 8)


def missing_barrier(
    values: Sequence[float], shuffles: Sequence[int] = BARRIER_SEEDS
) -> dict[str, Any]:
    """Runs :data:`TREE_WITHOUT_LOOP_BARRIER` over ``values`` (one threadgroup, a power of two
    of at most 1,024 values) on the emulator: ``grid_order``, the total it writes when the
    threads run in grid order; ``totals``, what it writes in each shuffled order of
    ``shuffles``; ``same_in_every_order``, whether all of those agree. Raises
    :class:`CourseError` for a count that is not a power of two."""
    from llmfs.tensor.backends.metal import run_kernel

    count = len(values)
    if count < 1 or count > 1024 or count & (count - 1):
        raise CourseError(f"missing_barrier takes 1 to 1024 values, a power of two; got {count}")
    x = np.array(values, dtype=np.float32)

    def run(shuffle: int | None) -> float:
        total = np.zeros(1, dtype=np.float32)
        run_kernel(
            _TREE_WITHOUT_LOOP_BARRIER,
            "tree_sum",
            [x, total],
            count,
            (count, 1, 1),
            backend="metal-emulator",
            sanitize=False,  # every access is inside the buffers: only the order is wrong
            shuffle=shuffle,
            threadgroup_memory={0: max(16, 4 * count)},
        )
        return float(total[0])

    first = run(None)
    totals = [run(seed) for seed in shuffles]
    return {
        "grid_order": to_json(first),
        "totals": [to_json(t) for t in totals],
        "same_in_every_order": len({first, *totals}) == 1,
    }


_CENSUS = """
#include <metal_stdlib>
using namespace metal;

// Every thread of the launch marks its own slot: 1 inside the matrix, 2 past its edge.
kernel void census(device uint* marks [[buffer(0)]],
                   constant uint& rows [[buffer(1)]],
                   constant uint& cols [[buffer(2)]],
                   uint2 gid [[thread_position_in_grid]],
                   uint2 grid [[threads_per_grid]]) {
    marks[gid.y * grid.x + gid.x] = (gid.y < rows && gid.x < cols) ? 1u : 2u;
}
"""


def thread_census(rows: int, cols: int, tile: int = TILE) -> dict[str, int]:
    """The threads of a ``tiled_matmul`` launch for a ``rows x cols`` result (:func:`tiled_grid`,
    ``tile x tile`` groups), counted on the emulator: ``launched``, every thread that ran, and
    ``guarded``, those whose row or column lies past the result (they must load 0 and not
    store). Raises :class:`CourseError` for sizes below 1."""
    from llmfs.tensor.backends.metal import run_kernel

    if rows < 1 or cols < 1 or tile < 1 or tile * tile > 1024:
        raise CourseError(
            f"thread_census needs sizes >= 1 and a tile of 1 to 32, got {rows}, {cols}, {tile}"
        )
    grid = tiled_grid(rows, cols, 1, tile)
    marks = np.zeros(grid[0] * grid[1], dtype=np.uint32)
    run_kernel(
        _CENSUS,
        "census",
        [marks, np.array([rows], dtype=np.uint32), np.array([cols], dtype=np.uint32)],
        grid[:2],
        (tile, tile, 1),
        backend="metal-emulator",
        sanitize=False,  # one write per thread, inside the grid's own buffer
    )
    return {"launched": int((marks > 0).sum()), "guarded": int((marks == 2).sum())}


def teacher_forced_accuracy(w: Any, config: Any, problems: np.ndarray) -> dict[str, Any]:
    """Exact-match accuracy of the adder on ``problems`` from ONE forward pass of each whole
    sequence (prompt and answer): the answer is right when the argmax at every answer position
    is the next answer token. It equals greedy generation's accuracy: generation writes the same
    tokens as long as every argmax so far was right, and its first wrong argmax is the same
    wrong token. Returns the accuracy, the count right and the logits (a NumPy array), computed
    on the active backend."""
    from llmfs.gpt import task
    from llmfs.gpt.tensor_model import forward

    sequences = task.sequences(np.asarray(problems))
    inputs = sequences[:, :-1]
    logits = forward(w, config, inputs).to_numpy()
    start = task.PROMPT_LENGTH - 1
    predicted = logits[:, start:, :].argmax(axis=-1)
    right = (predicted == sequences[:, start + 1 :]).all(axis=1)
    return {
        "accuracy": float(right.mean()),
        "right": int(right.sum()),
        "logits": logits,
    }


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------

check_group_sum_kernel = register(
    ImplementSpec(
        "ch12.tree_sum",
        "group_sum_kernel",
        lambda rng, n: _sum_cases(rng, n, (8, 16, 32, 64)),
        _sum_reference,
        cases=KERNEL_CASES,
        parameters=("values", "group"),
        kernel=_run_group_sum,
        explain=_explain_sum,
        size=lambda values, group: (len(values), group),
    ),
    "Checks ``group_sum_kernel() -> MSL``: kernel ``group_sum`` (buffers 0 x float, 1 partial "
    "float, 2 count uint; ``[[threadgroup(0)]]`` one float per thread) writes the sum of each "
    "threadgroup's values to ``partial[group]``, launched over whole groups of 8 to 64 threads "
    "(a power of two), the threads shuffled.",
)
check_simd_sum_kernel = register(
    ImplementSpec(
        "ch12.simd_sum",
        "simd_sum_kernel",
        lambda rng, n: _sum_cases(rng, n, (32, 64, 128, 256)),
        _sum_reference,
        cases=KERNEL_CASES,
        parameters=("values", "group"),
        kernel=_run_simd_sum,
        explain=_explain_sum,
        size=lambda values, group: (len(values), group),
    ),
    "Checks ``simd_sum_kernel() -> MSL``: kernel ``simd_group_sum`` (buffers as ``group_sum``; "
    "``[[threadgroup(0)]]`` 32 floats, one per simdgroup) writes each threadgroup's sum, built "
    "with ``simd_sum``, over whole groups of 32 to 256 threads.",
)
check_histogram_kernel = register(
    ImplementSpec(
        "ch12.histogram",
        "histogram_kernel",
        _histogram_cases,
        _histogram_reference,
        cases=KERNEL_CASES,
        parameters=("ids", "bins", "grid"),
        kernel=_run_histogram,
        size=lambda ids, bins, grid: (len(ids), bins),
    ),
    "Checks ``histogram_kernel() -> MSL``: kernel ``histogram`` (buffers 0 ids int, 1 counts "
    "atomic_uint, 2 count uint) adds 1 to ``counts[id]`` for each of the ``count`` ids with "
    "``atomic_fetch_add_explicit``, launched with up to 31 threads more than ids.",
)
check_tiled_matmul_kernel = register(
    ImplementSpec(
        "ch12.tiled_matmul",
        "tiled_matmul_kernel",
        _matmul_cases,
        _matmul_reference,
        cases=KERNEL_CASES,
        parameters=("a", "b", "batch", "M", "N", "K"),
        kernel=_run_matmul,
        explain=_explain_matmul,
        shortcuts=Shortcuts(
            ("llmfs.tensor.backends.metal.ops.kernel_source",),
            "two threadgroup tiles of your own, loaded and read between barriers",
        ),
        kernel_shortcut=_shipped_matmul,
        size=lambda a, b, batch, m, n, k: (batch * m * n, batch),
    ),
    "Checks ``tiled_matmul_kernel() -> MSL``: kernel ``tiled_matmul`` (buffers 0 a [batch, M, "
    "K], 1 b [batch, K, N], 2 c [batch, M, N], all float, 3 M, 4 N, 5 K uint) writes "
    f"``a @ b`` through two {TILE} x {TILE} threadgroup tiles; the grid is rounded up to whole "
    f"tiles ({TILE} x {TILE} threadgroups, z one per batch entry), the threads shuffled.",
)

__all__ = [
    "BARRIER_SEEDS",
    "KERNEL_CASES",
    "MEASURE_GROUP",
    "MEASURE_MATMUL",
    "SECOND_SEED",
    "SHUFFLE_SEED",
    "TILE",
    "TREE_WITHOUT_LOOP_BARRIER",
    "KernelMisconception",
    "MissingCooperation",
    "RaceBetweenThreads",
    "SerialReduction",
    "ThreadsMissABarrier",
    "UnguardedThreads",
    "UntiledLoads",
    "UnwrittenMemoryRead",
    "check_group_sum_kernel",
    "check_histogram_kernel",
    "check_simd_sum_kernel",
    "check_tiled_matmul_kernel",
    "device_loads_per_output",
    "global_reads",
    "missing_barrier",
    "teacher_forced_accuracy",
    "thread_census",
    "tiled_grid",
    "tree_measure",
]
