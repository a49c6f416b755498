"""Rates of the Metal kernels: the CPU emulator (everywhere) and Metal itself (on a Mac).

Prints the median time, the element rate and the ratio to NumPy of the strided copy (a transposed
matrix made contiguous, which is what ``materialize`` does) and of matmul, next to NumPy doing the
same work. The emulator runs one GPU thread after another on one CPU core; its rows are printed
for scale only, they are not a performance target. On a Mac with a Metal device the same kernels
also run on the GPU (the ``metal`` rows).

Then chapter 12's tiled matmul (the solution notebook's ``tiled_matmul`` kernel, two 8 x 8
threadgroup tiles, run through :func:`~llmfs.tensor.backends.metal.ops.kernel_matmul`): on the
emulator next to the library's own matmul kernel (for scale only: the emulator switches between
its threads at every barrier, which a GPU does in hardware), and on a Mac next to ``ops.matmul``
on the numpy backend. The Mac rows have not been run on hardware by the project's CI.

Usage: ``python benchmarks/bench_metal.py [--size N] [--matmul M] [--tiled T] [--repeat R]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from llmfs.tensor.backends.metal import EmulatorExecutor, emulator_available, is_available, ops
from llmfs.tensor.layout import Layout

#: The notebook whose ``tiled_matmul_kernel`` is benchmarked (the chapter's own solution).
CHAPTER_12 = Path(__file__).resolve().parents[1] / "solutions" / "ch12_kernels_that_cooperate.ipynb"


def tiled_matmul_source() -> str:
    """The MSL of the solution notebook's ``tiled_matmul_kernel()``, read as the grader reads an
    implement cell (the function and the helpers it uses), then called."""
    import json

    from llmfs.course.grading.extract import implement_module, tagged_cells

    notebook = json.loads(CHAPTER_12.read_text(encoding="utf-8"))
    position = tagged_cells(notebook)["ch12.tiled_matmul"][0]
    source, problem = implement_module(notebook, position, "tiled_matmul_kernel")
    if source is None:
        raise SystemExit(f"{CHAPTER_12}: {problem}")
    namespace: dict[str, object] = {}
    exec(compile(source, str(CHAPTER_12), "exec"), namespace)
    kernel = namespace["tiled_matmul_kernel"]
    assert callable(kernel)
    text = kernel()
    assert isinstance(text, str)
    return text


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
    parser.add_argument("--tiled", type=int, default=128, help="square side for the tiled matmul")
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
    tiled_rows(args.tiled, args.repeat, rng)
    return 0


def tiled_rows(size: int, repeat: int, rng: np.random.Generator) -> None:
    """Chapter 12's tiled matmul: against the library's matmul kernel on the emulator, and
    against ``ops.matmul`` on the numpy backend on a Mac."""
    import llmfs.tensor as lt

    source = tiled_matmul_source()
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    left, right = ops.Strided.contiguous(a), ops.Strided.contiguous(b)
    print()
    print(f"chapter 12's tiled matmul, {size}x{size} f32 (8 x 8 tiles)")
    if emulator_available():
        executor = EmulatorExecutor()
        # The solution guards every access: it runs in process, as the library's kernels do.
        kernel = ops.MatmulKernel(source, "tiled_matmul", 8, sanitize=False)
        values, _ = ops.kernel_matmul(executor, kernel, left, right)
        assert np.allclose(values.reshape(size, size), a @ b, atol=1e-3)
        shipped = median_seconds(lambda: ops.matmul(executor, left, right), repeat)
        tiled = median_seconds(lambda: ops.kernel_matmul(executor, kernel, left, right), repeat)
        print(row("metal-emulator shipped matmul", shipped, shipped, size * size))
        print(row("metal-emulator tiled matmul", tiled, shipped, size * size))
        print("(ratio to the shipped kernel, on the emulator: for scale only; the emulator runs")
        print(" each GPU thread as a fiber and switches fibers at every barrier, which a GPU")
        print(" does in hardware, so the tiled kernel's speed-up cannot show here)")
    else:
        print("metal-emulator tiled matmul: skipped (no C++ compiler)")
    if not is_available():
        print("metal tiled matmul vs ops.matmul on the numpy backend: skipped (needs macOS with a")
        print(" Metal device); these rows have not been run on hardware")
        return
    from llmfs.tensor.backends.metal.device import default_device

    device = default_device()
    kernel = ops.MatmulKernel(source, "tiled_matmul", 8)
    x, y = lt.Tensor.from_numpy(a), lt.Tensor.from_numpy(b)

    def on_numpy() -> object:
        with lt.use_backend("numpy"):
            return lt.matmul(x, y)

    numpy_backend = median_seconds(on_numpy, repeat)
    values, _ = ops.kernel_matmul(device, kernel, left, right)
    assert np.allclose(values.reshape(size, size), a @ b, atol=1e-3)
    shipped = median_seconds(lambda: ops.matmul(device, left, right), repeat)
    tiled = median_seconds(lambda: ops.kernel_matmul(device, kernel, left, right), repeat)
    print(row("numpy backend ops.matmul", numpy_backend, numpy_backend, size * size))
    print(row("metal shipped matmul", shipped, numpy_backend, size * size))
    print(row("metal tiled matmul", tiled, numpy_backend, size * size))
    print("(metal rows: ratio to ops.matmul on the numpy backend)")


if __name__ == "__main__":
    raise SystemExit(main())
