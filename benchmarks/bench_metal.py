"""Rates of the Metal kernels: the CPU emulator (everywhere) and Metal itself (on a Mac).

Prints the median time, the element rate and the ratio to NumPy of the strided copy (a transposed
matrix made contiguous, which is what ``materialize`` does) and of matmul, next to NumPy doing the
same work. The emulator runs one GPU thread after another on one CPU core; its rows are printed
for scale only, they are not a performance target. On a Mac with a Metal device the same kernels
also run on the GPU (the ``metal`` rows).

Usage: ``python benchmarks/bench_metal.py [--size N] [--matmul M] [--repeat R]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from llmfs.tensor.backends.metal import EmulatorExecutor, emulator_available, is_available, ops
from llmfs.tensor.layout import Layout


def median_seconds(work: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``work()`` over ``repeat`` runs, after one warm-up run (which also
    compiles the kernel, so compile time is not measured)."""
    work()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def row(label: str, seconds: float, numpy_seconds: float, elements: int) -> str:
    rate = elements / seconds / 1e6
    ratio = seconds / numpy_seconds
    return f"{label:<44} {seconds * 1e3:10.3f} ms {rate:10.1f} M elem/s {ratio:8.1f}x"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="square matrix side for the copy")
    parser.add_argument("--matmul", type=int, default=192, help="square matrix side for matmul")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per row")
    args = parser.parse_args()

    executors: list[tuple[str, ops.Executor]] = []
    if emulator_available():
        executors.append(("metal-emulator", EmulatorExecutor()))
    else:
        print("metal-emulator: skipped (no C++ compiler)")
    if is_available():
        from llmfs.tensor.backends.metal.device import default_device

        executors.append(("metal", default_device()))
    else:
        print("metal: skipped (needs macOS with a Metal device)")

    rng = np.random.default_rng(0)
    n = args.size
    matrix = rng.standard_normal((n, n)).astype(np.float32)
    transposed = ops.Strided(matrix.reshape(-1), Layout((n, n), (1, n), 0))
    numpy_copy = median_seconds(lambda: np.ascontiguousarray(matrix.T), args.repeat)

    m = args.matmul
    a = rng.standard_normal((m, m)).astype(np.float32)
    b = rng.standard_normal((m, m)).astype(np.float32)
    numpy_matmul = median_seconds(lambda: a @ b, args.repeat)

    print(f"{'row (median of --repeat runs)':<44} {'time':>13} {'rate':>18} {'vs numpy':>9}")
    print(row(f"numpy copy transpose {n}x{n} f32", numpy_copy, numpy_copy, n * n))
    for name, executor in executors:
        seconds = median_seconds(lambda e=executor: ops.strided_copy(e, transposed), args.repeat)
        print(row(f"{name} strided copy {n}x{n} f32", seconds, numpy_copy, n * n))
    print(row(f"numpy matmul {m}x{m} f32", numpy_matmul, numpy_matmul, m * m))
    left, right = ops.Strided.contiguous(a), ops.Strided.contiguous(b)
    for name, executor in executors:
        seconds = median_seconds(lambda e=executor: ops.matmul(e, left, right), args.repeat)
        print(row(f"{name} matmul {m}x{m} f32", seconds, numpy_matmul, m * m))
    print("(emulator rows are for scale only: one CPU core runs every GPU thread in turn)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
