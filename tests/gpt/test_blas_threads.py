"""``blas_threads(n)`` limits NumPy's OpenBLAS to ``n`` threads for a block and restores the
count it had; the products' values do not change with the count."""

from __future__ import annotations

import numpy as np
import pytest

from llmfs.gpt.experiment import _openblas, blas_threads


def _count() -> int:
    lib = _openblas()
    for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads"):
        if lib is not None and hasattr(lib, name):
            return int(getattr(lib, name)())
    pytest.skip("NumPy's BLAS here is not an OpenBLAS this process can reach")


def test_the_count_holds_inside_the_block_and_comes_back_after_it() -> None:
    before = _count()
    with blas_threads(1):
        assert _count() == 1
    assert _count() == before
    with pytest.raises(RuntimeError), blas_threads(1):  # restored on an error too
        raise RuntimeError("inside")
    assert _count() == before


def test_the_products_are_the_same_with_one_thread() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((256, 96)), rng.standard_normal((96, 384))
    many = a @ b
    with blas_threads(1):
        one = a @ b
    assert np.array_equal(one, many)


@pytest.mark.parametrize("count", [0, -1, 1.5, True])
def test_a_count_below_one_or_not_a_whole_number_is_refused(count: object) -> None:
    with pytest.raises(ValueError, match="at least 1"), blas_threads(count):  # type: ignore[arg-type]
        pass
