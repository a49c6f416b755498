"""How the two built-in backends read their inputs.

* The NumPy backend reads every input in place through ``numpy_view`` (no copy), except a
  ``matmul`` operand whose matrices BLAS cannot read (a flip, a broadcast row), which it gathers.
* The reference backend reads only through the offset cursor: it works with NumPy views of the
  storage switched off entirely.
"""

from __future__ import annotations

import numpy as np
import pytest

import llmfs.tensor.backends.numpy_backend as numpy_backend
from llmfs.tensor import (
    Tensor,
    TensorView,
    add,
    dispatch,
    einsum,
    exp,
    matmul,
    max,
    mean,
    sum,
    use_backend,
)
from llmfs.tensor.backends.reference import UNARY, _div


def arange(*shape: int) -> Tensor:
    count = int(np.prod(shape, dtype=np.int64))
    return Tensor.from_vec(shape, np.arange(count, dtype=np.float64) / 7.0, dtype="float32")


@pytest.fixture
def gathers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """Records every gather (copy) the NumPy backend makes, by the copied shape."""
    seen: list[tuple[int, ...]] = []
    real = numpy_backend.gather

    def recording(storage, layout):  # type: ignore[no-untyped-def]
        seen.append(tuple(layout.shape))
        return real(storage, layout)

    monkeypatch.setattr(numpy_backend, "gather", recording)
    return seen


def test_numpy_backend_reads_strided_inputs_in_place(gathers: list) -> None:
    a = arange(4, 5)
    transposed, flipped = a.view().T, a.view().flip(1)[::2]
    row = arange(5).view()
    with use_backend("numpy"):
        add(flipped, row)
        add(transposed, arange(4))
        exp(transposed)
        sum(flipped, 0)
        max(transposed, (0, 1))
        mean(row.expand((3, 5)), 1)
        matmul(transposed, a)  # a transposed matrix is BLAS-readable as it is
        einsum("ij,jk->ik", a.view().T, a)
    assert gathers == []


def test_numpy_backend_gathers_only_matrices_blas_cannot_read(gathers: list) -> None:
    a = arange(4, 4)
    with use_backend("numpy"):
        got = matmul(a.view().flip(0), a)
    assert gathers == [(4, 4)]
    np.testing.assert_allclose(got.to_numpy(), a.to_numpy()[::-1] @ a.to_numpy(), rtol=1e-6)


@pytest.mark.parametrize(
    ("shape", "strides", "expected"),
    [
        ((2, 3), (3, 1), "rows"),
        ((2, 3), (1, 2), "columns"),
        ((4, 2, 3), (6, 5, 1), "rows"),  # padded rows
        ((2, 3), (1, 1), None),  # overlapping
        ((2, 3), (-3, 1), None),  # flipped rows
        ((2, 3), (0, 1), None),  # a broadcast row
        ((1, 3), (99, 1), "rows"),  # a size-1 axis takes any stride
        ((0, 3), (7, -1), "rows"),  # an empty matrix reads nothing
        ((3,), (1,), None),  # a vector is not a matrix
    ],
)
def test_matrix_orientation_says_how_blas_reads_the_last_two_axes(
    shape: tuple[int, ...], strides: tuple[int, ...], expected: str | None
) -> None:
    assert numpy_backend.matrix_orientation(shape, strides) == expected


def test_reference_backend_reads_only_through_the_offset_cursor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def refuse(self: TensorView) -> np.ndarray:
        raise AssertionError("the reference backend must not use NumPy views")

    monkeypatch.setattr(TensorView, "numpy_view", refuse)
    a = arange(3, 4)
    with use_backend("reference"):
        assert add(a.view().T, 1.0).shape == (4, 3)
        assert sum(a.view().flip(0), 1).shape == (3,)
        assert matmul(a, a.view().T).shape == (3, 3)
        assert einsum("ii->i", arange(3, 3)).shape == (3,)


@pytest.mark.parametrize(
    ("op", "value", "expected"),
    [
        ("exp", 1000.0, np.inf),
        ("exp", -np.inf, 0.0),
        ("log", 0.0, -np.inf),
        ("log", -0.0, -np.inf),
        ("log", -1.0, np.nan),
        ("log", np.inf, np.inf),
        ("sqrt", -1.0, np.nan),
        ("sqrt", -np.inf, np.nan),
        ("sin", np.inf, np.nan),
        ("cos", -np.inf, np.nan),
        ("sigmoid", -1000.0, 0.0),
        ("sigmoid", 1000.0, 1.0),
        ("sigmoid", np.nan, np.nan),
        ("reciprocal", 0.0, np.inf),
        ("reciprocal", -0.0, -np.inf),
        ("relu", np.nan, np.nan),
        ("tanh", np.inf, 1.0),
    ],
)
def test_reference_maths_gives_ieee_answers_instead_of_python_exceptions(
    op: str, value: float, expected: float
) -> None:
    got = UNARY[op](value)
    assert (np.isnan(got) and np.isnan(expected)) or got == expected


def test_reference_division_by_zero_keeps_the_signs() -> None:
    assert _div(1.0, 0.0) == np.inf
    assert _div(1.0, -0.0) == -np.inf
    assert _div(-1.0, -0.0) == np.inf
    assert np.isnan(_div(0.0, 0.0)) and np.isnan(_div(np.nan, 0.0))
    assert _div(6.0, 3.0) == 2.0


def test_every_copying_read_asks_the_active_backend(
    gathers: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On numpy: the blocked gather. On reference: the offset cursor, with the numpy backend's
    # copies and NumPy views of the storage switched off.
    a = arange(3, 4)
    readers = (
        lambda v: v.materialize().tolist(),
        lambda v: v.tolist(),
        lambda v: v.to_numpy().tolist(),
        lambda v: np.asarray(v).tolist(),
    )
    expected = a.to_numpy().T.tolist()
    # (A small read is planned at dispatch, one NumPy copy: test_dispatch holds it equal to this
    # path. Suspended, every read takes the full path to the backend.)
    with dispatch.suspended():
        for read in readers:
            gathers.clear()
            assert read(a.view().T) == expected
            assert gathers and set(gathers) == {(4, 3)}  # the numpy backend's gather copied

    def refuse(*_: object) -> np.ndarray:
        raise AssertionError("the reference backend copies through the offset cursor alone")

    monkeypatch.setattr(numpy_backend, "gather", refuse)
    monkeypatch.setattr(TensorView, "numpy_view", refuse)
    with use_backend("reference"):
        for read in readers:
            assert read(a.view().T) == expected
        assert a.tolist() == a.view().T.T.tolist()
