"""Materialize (copying a view into a new owner) against NumPy's copy of the same view.

Run: ``python benchmarks/bench_materialize.py``. Prints, in one run, the median time of
``TensorView.materialize`` for several views of a 2048x2048 float32 tensor, NumPy's copy of the
same view (``numpy.array(view, copy=True)``: ``ascontiguousarray`` that always copies), and
their ratio; a plain contiguous copy of the same bytes
(the memory-bandwidth limit); and the rate of the reference offset cursor, so the gap between the
teaching path and the fast path is visible.

Large copies are split over ``get_num_threads()`` threads (NumPy copies single-threaded), so the
goals assume a free second core; the three hardest transposes are printed again on one thread,
which shows what the cache blocking alone gives.
"""

from __future__ import annotations

import time

import numpy as np
from _timing import header, median_seconds, paired_medians, row

from llmfs.tensor import Tensor, get_num_threads, set_num_threads

N = 2048


def main() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((N, N)).astype(np.float32)
    tensor = Tensor.from_numpy(data)
    base = tensor.view()

    header(f"materialize of {N}x{N} float32 views vs numpy.ascontiguousarray")
    threads = get_num_threads()
    print(f"   large copies use {threads} thread(s) (set_num_threads, LLMFS_NUM_THREADS)")
    cases = {
        "transpose(0, 1)": (base.transpose(0, 1), data.T, 0.5),
        "transpose of a 2000x2000 slice": (base[:2000, :2000].T, data[:2000, :2000].T, 0.5),
        "flip(0)": (base.flip(0), data[::-1], 1.2),
        "flip(1)": (base.flip(1), data[:, ::-1], 1.2),
        "slice(1, 0, N, step=2)": (base.slice(1, 0, N, 2), data[:, ::2], 1.2),
        "slice(0, 1, N-1) (rows)": (base.slice(0, 1, N - 1), data[1 : N - 1], 1.2),
        "expand row to (N, N)": (base[0:1].expand((N, N)), np.broadcast_to(data[0:1], (N, N)), 1.0),
        "contiguous (plain view)": (base, data, 1.2),
    }
    # Transposes whose row stride is not a multiple of 4 KiB (NumPy copies those without
    # cache thrashing, so these are the harder comparisons).
    odd = rng.standard_normal((N - 48, N - 48)).astype(np.float32)
    cases["transpose of a 2000x2000 owner"] = (Tensor.from_numpy(odd).view().T, odd.T, 0.5)
    wide = rng.standard_normal((1531, 2600)).astype(np.float32)
    cases["transpose of a 1531x2600 owner"] = (Tensor.from_numpy(wide).view().T, wide.T, 0.5)
    for name, (view, peer, goal) in cases.items():
        ours, theirs = paired_medians(
            view.materialize, lambda peer=peer: np.array(peer, order="C", copy=True)
        )
        assert np.array_equal(view.materialize().to_numpy(), np.ascontiguousarray(peer))
        row(name, ours, theirs, goal)
    # The same hardest transposes on one thread: what the blocking alone gives.
    set_num_threads(1)
    for name in (
        "transpose(0, 1)",
        "transpose of a 2000x2000 owner",
        "transpose of a 1531x2600 owner",
    ):
        view, peer, _ = cases[name]
        ours, theirs = paired_medians(
            view.materialize, lambda peer=peer: np.array(peer, order="C", copy=True)
        )
        row(f"{name}, 1 thread", ours, theirs)
    set_num_threads(threads)

    flat = data.reshape(-1)
    bandwidth = median_seconds(flat.copy)
    transposed = median_seconds(base.transpose(0, 1).materialize)
    numpy_t = median_seconds(lambda: np.ascontiguousarray(data.T))
    print(
        f"   contiguous copy of the same {flat.nbytes >> 20} MiB: {bandwidth * 1e3:.2f} ms "
        f"(bandwidth limit); transpose: ours {transposed / bandwidth:.1f}x that limit, "
        f"numpy {numpy_t / bandwidth:.1f}x"
    )

    small = Tensor.from_numpy(data[:128, :128]).view().transpose(0, 1)
    start = time.perf_counter()
    count = sum(1 for _ in small.logical_offsets())
    cursor = time.perf_counter() - start
    fast = median_seconds(small.materialize)
    print(
        f"   reference offset cursor: {count / cursor / 1e6:.2f} M offsets/s; fast materialize of "
        f"the same 128x128 transpose: {count / fast / 1e6:.1f} M values/s "
        f"({cursor / fast:.0f}x faster)"
    )


if __name__ == "__main__":
    main()
