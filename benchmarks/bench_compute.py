"""Compute on views (the NumPy backend) against NumPy doing the same work.

Run: ``python benchmarks/bench_compute.py``. Prints, in one run, the median time of each llmfs op
on the default (NumPy) backend, NumPy's time for the same result, and their ratio (goal <= 1.1):

* a broadcast ``add`` of a transposed 2048x2048 float32 view and a row vector, against
  ``np.add(a.T, row, order="C")`` (our results are row-major; NumPy's default order would write
  the transposed layout, which is less work and not the same result layout);
* ``sum`` over axis 0 of a transposed 4096x4096 float32 view, against ``np.sum(a.T, axis=0)``;
* ``einsum("bij,bjk->bik")`` on 16x256x256 float32, against ``np.einsum(..., optimize=True)``;
* ``matmul`` of 1024x1024 float32, against ``a @ b``;
* an embedding lookup, ``take`` of 64x128 int64 ids from a 50000x256 float32 table, against
  ``np.take(table, ids, axis=0)``;
* the comparison ``less`` of the transposed view and the row vector (a bool result), against
  ``np.less(a.T, r, order="C")``.

Then the reference backend (pure Python) is timed on a small size, and its rate printed, so the
distance between the teaching path and the fast path is visible.

NumPy's speed here depends on its BLAS: ``OPENBLAS_CORETYPE``/``OPENBLAS_L2_SIZE`` (if set) can
slow it down, for both sides of a ratio alike; unset them when you run this script to see the
machine's real numbers.
"""

from __future__ import annotations

import numpy as np
from _timing import header, median_seconds, paired_medians, row

from llmfs.tensor import Tensor, add, einsum, less, matmul, sum, take, use_backend

GOAL = 1.1


def main() -> None:
    rng = np.random.default_rng(0)
    ratios: list[float] = []
    header("compute on views (numpy backend) vs numpy")

    a = rng.standard_normal((2048, 2048)).astype(np.float32)
    r = rng.standard_normal(2048).astype(np.float32)
    ta, tr = Tensor.from_numpy(a), Tensor.from_numpy(r)
    view = ta.view().T
    ours, peer = paired_medians(lambda: add(view, tr), lambda: np.add(a.T, r, order="C"))
    np.testing.assert_allclose(add(view, tr).to_numpy(), np.add(a.T, r, order="C"))
    ratios.append(row("add(2048x2048 transposed, row vector)", ours, peer, GOAL))

    big = rng.standard_normal((4096, 4096)).astype(np.float32)
    tbig = Tensor.from_numpy(big)
    big_view = tbig.view().T
    ours, peer = paired_medians(lambda: sum(big_view, 0), lambda: np.sum(big.T, axis=0))
    np.testing.assert_allclose(
        sum(big_view, 0).to_numpy(), np.sum(big.T, axis=0), rtol=1e-4, atol=1e-2
    )
    ratios.append(row("sum(4096x4096 transposed, axis=0)", ours, peer, GOAL))

    x = rng.standard_normal((16, 256, 256)).astype(np.float32)
    y = rng.standard_normal((16, 256, 256)).astype(np.float32)
    tx, ty = Tensor.from_numpy(x), Tensor.from_numpy(y)
    ours, peer = paired_medians(
        lambda: einsum("bij,bjk->bik", tx, ty),
        lambda: np.einsum("bij,bjk->bik", x, y, optimize=True),
    )
    np.testing.assert_allclose(
        einsum("bij,bjk->bik", tx, ty).to_numpy(),
        np.einsum("bij,bjk->bik", x, y, optimize=True),
        rtol=1e-3,
        atol=1e-3,
    )
    ratios.append(row('einsum("bij,bjk->bik", 16x256x256)', ours, peer, GOAL))

    m = rng.standard_normal((1024, 1024)).astype(np.float32)
    n = rng.standard_normal((1024, 1024)).astype(np.float32)
    tm, tn = Tensor.from_numpy(m), Tensor.from_numpy(n)
    ours, peer = paired_medians(lambda: matmul(tm, tn), lambda: m @ n)
    ratios.append(row("matmul(1024x1024, 1024x1024)", ours, peer, GOAL))

    vocab = rng.standard_normal((50_000, 256)).astype(np.float32)
    ids = rng.integers(0, 50_000, size=(64, 128))
    tvocab, tids = Tensor.from_numpy(vocab), Tensor.from_numpy(ids)
    ours, peer = paired_medians(lambda: take(tvocab, tids), lambda: np.take(vocab, ids, axis=0))
    np.testing.assert_array_equal(take(tvocab, tids).to_numpy(), np.take(vocab, ids, axis=0))
    ratios.append(row("take(50000x256 table, 64x128 int64 ids)", ours, peer, GOAL))

    ours, peer = paired_medians(lambda: less(view, tr), lambda: np.less(a.T, r, order="C"))
    np.testing.assert_array_equal(less(view, tr).to_numpy(), np.less(a.T, r, order="C"))
    ratios.append(row("less(2048x2048 transposed, row vector)", ours, peer, GOAL))

    worst = max(ratios)
    verdict = "met" if worst <= GOAL else "MISSED"
    print(f"   worst ratio {worst:.2f}: goal <= {GOAL} {verdict}")

    print("== reference backend (pure Python over the offset cursor), small sizes")
    small = Tensor.from_numpy(rng.standard_normal((64, 64)).astype(np.float32))
    small_row = Tensor.from_numpy(rng.standard_normal(64).astype(np.float32))
    mat = Tensor.from_numpy(rng.standard_normal((16, 16)).astype(np.float32))
    with use_backend("reference"):
        seconds = median_seconds(lambda: add(small.view().T, small_row), repeat=3)
        print(
            f"   add 64x64 transposed + row: {seconds * 1e3:8.1f} ms, "
            f"{64 * 64 / seconds / 1e3:8.1f} thousand values/s"
        )
        seconds = median_seconds(lambda: sum(small.view().T, 0), repeat=3)
        print(
            f"   sum 64x64 transposed, axis 0: {seconds * 1e3:6.1f} ms, "
            f"{64 * 64 / seconds / 1e3:8.1f} thousand values/s"
        )
        seconds = median_seconds(lambda: matmul(mat, mat), repeat=3)
        print(
            f"   matmul 16x16 @ 16x16: {seconds * 1e3:14.1f} ms, "
            f"{16 * 16 * 16 / seconds / 1e3:8.1f} thousand multiply-adds/s"
        )


if __name__ == "__main__":
    main()
