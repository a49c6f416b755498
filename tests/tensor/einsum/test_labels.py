"""Binding labels to operand shapes: each einsum rule on valid expressions, and each violation
as an EinsumError naming the label and operand.

Random expressions on random views, on every backend, are checked against ``np.einsum`` in
``tests/tensor/backends/test_backend_conformance.py``; this file pins each rule down by name."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import llmfs.tensor.backends as registry
from llmfs.tensor import (
    Tensor,
    einsum,
    register_backend,
    use_backend,
)
from llmfs.tensor.backends.numpy_backend import NumpyBackend

from .support import check, error_of, rand


def test_seed_example_matrix_product_with_a_list_of_operands() -> None:
    a = Tensor.from_vec([2, 3], [1, 2, 3, 4, 5, 6], dtype="float32")
    b = Tensor.from_vec([3, 2], [1, 0, 0, 1, 1, 1], dtype="float32")
    product = einsum("ik,kj->ij", [a, b])
    assert product.shape == (2, 2) and product.dtype == np.float32
    assert product.tolist() == [[4.0, 5.0], [10.0, 11.0]]


def test_labels_are_case_sensitive() -> None:
    check("aA,Ab->ab", rand(2, 3), rand(3, 4, seed=1))
    assert einsum("aA->Aa", rand(2, 3)).shape == (3, 2)


def test_implicit_output_is_once_only_labels_in_ascii_order() -> None:
    x = rand(2, 3)
    assert check("ba", x).shape == (3, 2)  # output "ab": a transpose
    assert check("bA", x).shape == (3, 2)  # uppercase sorts first: output "Ab"
    assert check("ij,jk", x, rand(3, 4, seed=1)).shape == (2, 4)  # j occurs twice: summed
    assert check("ii", rand(3, 3)).shape == ()  # the trace


def test_implicit_output_puts_ellipsis_axes_first() -> None:
    got = check("...ij,...jk", rand(5, 2, 3), rand(3, 4, seed=1))
    assert got.shape == (5, 2, 4)


def test_a_repeated_label_takes_the_diagonal() -> None:
    m = rand(3, 3)
    assert check("ii->i", m).tolist() == [m.get((k, k)) for k in range(3)]
    check("iij->ij", rand(3, 3, 2))
    check("iji->j", rand(3, 2, 3))
    check("ii,i->i", m, rand(3, seed=1))


class _CopySpy(NumpyBackend):
    name = "copy-spy"
    seen: list = []  # noqa: RUF012 (reset by the fixture)

    def copy(self, x, *, dtype):  # type: ignore[no-untyped-def]
        self.seen.append(x)
        return super().copy(x, dtype=dtype)


@pytest.fixture
def copy_spy() -> Iterator[list]:
    register_backend("copy-spy", _CopySpy, replace=True)
    _CopySpy.seen = []
    with use_backend("copy-spy"):
        yield _CopySpy.seen
    registry._loaders.pop("copy-spy", None)
    registry._loaded.pop("copy-spy", None)


def test_a_diagonal_is_a_view_with_summed_strides(copy_spy: list) -> None:
    m = rand(4, 4)
    einsum("ii->i", m)
    (view,) = copy_spy
    assert view.owner is m  # read in place, never copied into a square first
    assert view.shape == (4,) and view.strides == (5,)


def test_size_1_labels_broadcast() -> None:
    a, b = rand(3, 1), rand(4, 5, seed=1)
    got = einsum("ij,jk->ik", a, b)
    want = np.einsum("ij,jk->ik", np.broadcast_to(a.to_numpy(), (3, 4)), b.to_numpy())
    np.testing.assert_allclose(got.to_numpy(), want)
    assert einsum("i,i->i", rand(1), rand(5, seed=1)).shape == (5,)


def test_ellipsis_axes_broadcast_right_aligned() -> None:
    check("...ij,...jk->...ik", rand(2, 1, 3, 4), rand(5, 4, 2, seed=1))
    check("i...,i...->...", rand(3, 2, 1), rand(3, 4, seed=1))
    check("...->...", rand())


def test_an_explicit_output_may_omit_an_ellipsis_that_covers_nothing() -> None:
    assert einsum("...ij->ij", rand(2, 3)).shape == (2, 3)


def test_scalar_operands_use_an_empty_term() -> None:
    s = Tensor.from_vec([], [2.0])
    m = rand(2, 3)
    np.testing.assert_allclose(einsum(",ij->ij", s, m).to_numpy(), 2.0 * m.to_numpy())
    np.testing.assert_allclose(einsum(",ij->ij", 2.0, m).to_numpy(), 2.0 * m.to_numpy())
    assert einsum(",->", s, s).tolist() == 4.0
    assert einsum(",ij->ij", 2.0, rand(2, 3, dtype="float32")).dtype == np.float32


def test_repeated_operands_and_several_operands() -> None:
    a = rand(3, 4)
    check("ij,ij->", a, a)
    check("ij,jk,kl->il", a, rand(4, 5, seed=1), rand(5, 2, seed=2))
    check("ij,jk,kl", a, rand(4, 5, seed=1), rand(5, 2, seed=2))
    check("i,j,k->ijk", rand(2), rand(3, seed=1), rand(4, seed=2))


def test_inputs_may_be_non_contiguous() -> None:
    a, b = rand(4, 3), rand(5, 4, seed=1)
    got = einsum("ij,jk->ik", a.view().T.flip(0), b.view().T[:, ::2])
    want = np.einsum("ij,jk->ik", a.to_numpy().T[::-1], b.to_numpy().T[:, ::2])
    np.testing.assert_allclose(got.to_numpy(), want)


def test_empty_axes() -> None:
    assert einsum("ij,jk->ik", rand(2, 0), rand(0, 3)).tolist() == [[0.0] * 3] * 2
    assert einsum("ij,jk->ik", rand(0, 2), rand(2, 3)).shape == (0, 3)
    assert einsum("i->", rand(0)).tolist() == 0.0


def test_dtypes_follow_the_inputs_unless_asked() -> None:
    h, s = rand(2, 2, dtype="float16"), rand(2, 2, dtype="float32")
    assert einsum("ij,jk->ik", h, h).dtype == np.float16
    assert einsum("ij,jk->ik", h, s).dtype == np.float32
    assert einsum("ij,jk->ik", h, h, dtype="float64").dtype == np.float64


def test_a_mismatched_label_size_names_the_label_and_both_operands() -> None:
    error = error_of("ij,jk->ik", rand(3, 4), rand(5, 6))
    assert (error.label, error.operand, error.position) == ("j", 1, 3)
    assert "label 'j' has size 5 in operand 1 but size 4 in operand 0" in str(error)
    assert "equal, or 1 to broadcast" in str(error)


def test_a_diagonal_needs_exactly_equal_sizes() -> None:
    error = error_of("ii->i", rand(3, 4))
    assert (error.label, error.operand) == ("i", 0)
    assert "label 'i' repeats in operand 0's term" in str(error)
    assert "exactly equal sizes; got 3 and 4" in str(error)
    error = error_of("ii->i", rand(3, 1))  # size 1 does not broadcast inside a diagonal
    assert "got 3 and 1" in str(error)


def test_ellipsis_axes_that_do_not_broadcast() -> None:
    error = error_of("...i,...i->...", rand(2, 3), rand(4, 3))
    assert error.label == "..." and error.operand == 1
    assert "broadcast right-aligned" in str(error) and "size 4 in operand 1 and 2" in str(error)


def test_output_labels_must_appear_in_an_input() -> None:
    error = error_of("ij->ik", rand(2, 2))
    assert (error.label, error.position) == ("k", 5)
    assert "output label 'k' does not appear in any input term" in str(error)


def test_an_explicit_output_without_ellipsis_while_inputs_have_ellipsis_axes() -> None:
    error = error_of("...ij->ij", rand(5, 2, 3))
    assert error.label == "..."
    assert "covers 1 axis/axes but the output has no '...'" in str(error)


def test_a_term_must_name_every_axis() -> None:
    error = error_of("ij->i", rand(2, 3, 4))
    assert error.operand == 0
    assert "operand 0 has rank 3 (shape [2, 3, 4]) but its term 'ij' names 2 axes" in str(error)
    error = error_of("ijk...->i", rand(2, 3))
    assert "names 3 axes besides '...'" in str(error)
    error = error_of("i,ij->ij", rand(), rand(2, 3))
    assert "a scalar operand takes an empty term" in str(error)


def test_terms_and_operands_must_agree_in_number() -> None:
    error = error_of("ij,jk->ik", rand(2, 2))
    assert "2 input term(s) but 1 operand(s)" in str(error)
