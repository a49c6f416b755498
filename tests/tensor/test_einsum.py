"""Einsum (labels shared by operands multiply, labels absent from the output are summed), its
errors (each pointing at the label or operand), and plans.

Random expressions on random views, on every backend, are checked against ``np.einsum`` in
``tests/tensor/backends/test_backend_conformance.py``; this file pins each rule down by name.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import numpy as np
import pytest

import llmfs.tensor.backends as registry
from llmfs.tensor import (
    BroadcastError,
    ContractionPlan,
    DTypeError,
    EinsumError,
    EinsumPlan,
    OutputBufferError,
    PlanMismatchError,
    StaleViewError,
    Tensor,
    TensorDescriptor,
    TensorError,
    einsum,
    register_backend,
    use_backend,
)
from llmfs.tensor.backends.numpy_backend import NumpyBackend
from llmfs.tensor.einsum import DescriptorError


def rand(*shape: int, dtype: str = "float64", seed: int = 0) -> Tensor:
    values = np.random.default_rng(seed).standard_normal(shape)
    return Tensor.from_numpy(values, dtype=dtype)


def check(expression: str, *operands: Tensor) -> Tensor:
    """Our einsum equals NumPy's, shape and values."""
    got = einsum(expression, *operands)
    want = np.einsum(expression, *(o.to_numpy() for o in operands))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-12, atol=1e-12)
    return got


def error_of(expression: str, *operands: object) -> EinsumError:
    with pytest.raises(EinsumError) as info:
        einsum(expression, *operands)
    assert isinstance(info.value, TensorError)
    return info.value


# --------------------------------------------------------------------------------------------
# The rules, on valid expressions
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Every rule violation: an EinsumError naming the label or operand
# --------------------------------------------------------------------------------------------


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


def test_output_labels_must_be_unique() -> None:
    error = error_of("ij->ii", rand(2, 2))
    assert (error.label, error.position) == ("i", 5)
    assert "output label 'i' appears more than once" in str(error)


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


@pytest.mark.parametrize(
    ("expression", "label", "position", "text"),
    [
        ("i1->i", "1", 1, "'1' in operand 0's term is not a label"),
        ("i j,jk", None, None, None),  # spaces are ignored: not an error
        ("ij->i->j", "->", 5, "'->' may appear only once"),
        ("i-j", "-", 1, "'-' is only allowed as part of one arrow '->'"),
        ("i>j", ">", 1, "'>' is only allowed as part of one arrow '->'"),
        ("i..j", ".", 1, "a '.' in operand 0's term must be part of an ellipsis '...'"),
        ("......", "...", 3, "'...' may appear only once in operand 0's term"),
        ("ij->i,j", ",", 5, "the output after '->' is one term and may not contain ','"),
        ("ij->i.", ".", 5, "a '.' in the output must be part of an ellipsis"),
    ],
)
def test_syntax_errors_point_at_the_character(
    expression: str, label: str | None, position: int | None, text: str | None
) -> None:
    operands = [rand(2, 2)] * expression.split("->")[0].count(",") + [rand(2, 2)]
    if text is None:
        einsum(expression, *operands)
        return
    error = error_of(expression, *operands)
    assert (error.label, error.position) == (label, position)
    assert text in str(error)
    caret_line = str(error).splitlines()[-1]
    assert caret_line.index("^") - 3 == position  # under the character, past "  '"


def test_the_expression_must_be_a_string() -> None:
    error = error_of(42, rand(2))  # type: ignore[arg-type]
    assert "must be a string, got int" in str(error)


# --------------------------------------------------------------------------------------------
# EinsumPlan
# --------------------------------------------------------------------------------------------


def test_a_plan_is_validated_once_and_executed_many_times() -> None:
    plan = EinsumPlan("bij,bjk->bik", TensorDescriptor((2, 3, 4)), TensorDescriptor((2, 4, 5)))
    assert plan.output_shape == (2, 3, 5) and plan.output_dtype == np.float32
    assert plan.compute_dtype == np.float32
    for seed in range(3):
        a = rand(2, 3, 4, dtype="float32", seed=seed)
        b = rand(2, 4, 5, dtype="float32", seed=seed + 10)
        np.testing.assert_allclose(
            plan.execute(a, b).to_numpy(), a.to_numpy() @ b.to_numpy(), rtol=1e-5
        )


def test_a_plan_takes_layouts_from_operands_and_holds_no_buffers() -> None:
    t = rand(3, 3)
    references = sys.getrefcount(t)
    plan = EinsumPlan("ij->ji", t.view().T)
    assert plan.descriptors[0] == TensorDescriptor((3, 3), (1, 3), "float64")
    assert sys.getrefcount(t) == references  # the plan kept no reference to the operand
    other = rand(3, 3, seed=5)
    assert plan.execute(other.view().T).tolist() == other.tolist()


def test_a_plan_refuses_operands_of_another_layout() -> None:
    plan = EinsumPlan("ij,jk->ik", rand(2, 3), rand(3, 4))
    b = rand(3, 4)
    with pytest.raises(PlanMismatchError, match=r"operand 0 .* shape is \[3, 2\]"):
        plan.execute(rand(3, 2), b)
    with pytest.raises(
        PlanMismatchError, match=r"strides is \[1, 2\] but the plan was made for \[3, 1\]"
    ):
        plan.execute(rand(3, 2).view().T, b)
    with pytest.raises(PlanMismatchError, match="dtype is float32"):
        plan.execute(rand(2, 3, dtype="float32"), b)
    with pytest.raises(PlanMismatchError, match="number of operands"):
        plan.execute(b)
    scalar_plan = EinsumPlan(",i->i", 2.0, rand(3))
    with pytest.raises(PlanMismatchError, match="kind"):
        scalar_plan.execute(rand(3), rand(3))
    assert scalar_plan.execute(3.0, Tensor.from_vec([3], [1, 2, 3])).tolist() == [3, 6, 9]


def test_a_plan_compute_type_cannot_drop_float64() -> None:
    with pytest.raises(DTypeError, match="float64"):
        EinsumPlan("i->i", rand(2), compute="float32")
    plan = EinsumPlan("i->i", rand(2, dtype="float32"), compute="float64")
    assert plan.compute_dtype == np.float64


def test_descriptor_checks() -> None:
    with pytest.raises(TensorError, match="one entry per axis"):
        TensorDescriptor((2, 3), (1,))
    assert TensorDescriptor((2, 3)).strides == (3, 1)


def test_execute_into_writes_an_owned_output() -> None:
    a, b = rand(2, 3), rand(3, 4)
    plan = EinsumPlan("ij,jk->ik", a, b)
    out = Tensor.zeros((2, 4))
    old_view = out.view()
    assert plan.execute_into(out, a, b) is out
    np.testing.assert_allclose(out.to_numpy(), a.to_numpy() @ b.to_numpy())
    with pytest.raises(StaleViewError):
        old_view.tolist()


# --------------------------------------------------------------------------------------------
# ContractionPlan: D = alpha * (A @ B) + beta * C
# --------------------------------------------------------------------------------------------


def test_contraction_plan_matches_its_formula() -> None:
    a, b, c = rand(3, 4, seed=1), rand(4, 5, seed=2), rand(3, 5, seed=3)
    plan = ContractionPlan(a, b, c)
    got = plan.execute(a, b, c, alpha=0.5, beta=-2.0)
    want = 0.5 * (a.to_numpy() @ b.to_numpy()) - 2.0 * c.to_numpy()
    np.testing.assert_allclose(got.to_numpy(), want)
    assert plan.output_shape == (3, 5) and plan.output_dtype == np.float64


def test_contraction_plan_without_c_with_batches_and_a_broadcast_bias() -> None:
    a, b = rand(2, 3, 4, seed=1), rand(4, 5, seed=2)
    assert np.allclose(
        ContractionPlan(a, b).execute(a, b, alpha=2.0).to_numpy(),
        2.0 * (a.to_numpy() @ b.to_numpy()),
    )
    bias = rand(5, seed=4)
    got = ContractionPlan(a, b, bias).execute(a, b, bias)
    np.testing.assert_allclose(got.to_numpy(), a.to_numpy() @ b.to_numpy() + bias.to_numpy())


def test_contraction_plan_with_an_expression_and_float16_storage() -> None:
    a = rand(4, 3, dtype="float16", seed=1)
    b = rand(4, 5, dtype="float16", seed=2)
    plan = ContractionPlan(a, b, expression="ki,kj->ij")
    got = plan.execute(a, b)
    assert got.dtype == np.float16 and plan.compute_dtype == np.float32
    want = a.to_numpy().astype(np.float32).T @ b.to_numpy().astype(np.float32)
    np.testing.assert_allclose(got.to_numpy(), want.astype(np.float16), rtol=4e-3, atol=4e-3)


def test_contraction_plan_refuses_a_c_that_does_not_broadcast() -> None:
    with pytest.raises(BroadcastError):
        ContractionPlan(rand(3, 4), rand(4, 5), rand(3, 4))


def test_contraction_plan_checks_the_presence_of_c() -> None:
    a, b, c = rand(2, 2), rand(2, 2), rand(2, 2)
    with pytest.raises(PlanMismatchError, match="presence"):
        ContractionPlan(a, b).execute(a, b, c)
    with pytest.raises(PlanMismatchError, match="presence"):
        ContractionPlan(a, b, c).execute(a, b)
    with pytest.raises(PlanMismatchError, match="dtype"):
        ContractionPlan(a, b, c).execute(a, b, rand(2, 2, dtype="float32"))


def test_contraction_execute_into_writes_and_refuses_views_and_shared_buffers() -> None:
    a, b, c = rand(3, 4, seed=1), rand(4, 5, seed=2), rand(3, 5, seed=3)
    plan = ContractionPlan(a, b, c)
    out = Tensor.zeros((3, 5))
    assert plan.execute_into(out, a, b, c, alpha=1.0, beta=1.0) is out
    np.testing.assert_allclose(out.to_numpy(), a.to_numpy() @ b.to_numpy() + c.to_numpy())
    with pytest.raises(OutputBufferError, match="TensorView"):
        plan.execute_into(out.view(), a, b, c)
    with pytest.raises(OutputBufferError, match="shared with operand 2"):
        plan.execute_into(c, a, b, c)
    with pytest.raises(OutputBufferError, match=r"shape is \[5, 3\]"):
        plan.execute_into(Tensor.zeros((5, 3)), a, b, c)
    with pytest.raises(OutputBufferError, match="dtype is float32"):
        plan.execute_into(Tensor.zeros((3, 5), dtype="float32"), a, b, c)


@pytest.mark.parametrize(
    ("strides", "expected"),
    [
        ([1.7], "entry 0 must be an integer (a number of elements), not float 1.7"),
        (["a"], "entry 0 must be an integer (a number of elements), not str 'a'"),
        ([True], "entry 0 must be an integer, not a bool"),
        (3, "must be a sequence of integers, got 3"),
        ("1", "must be a sequence of integers, got '1'"),
        ([1, 1], "must have one entry per axis (1), but has 2"),
    ],
)
def test_descriptor_strides_must_be_exact_integers(strides, expected: str) -> None:
    # 1.7 must not become a stride of 1: a wrong layout would compute silently wrong values.
    with pytest.raises(DescriptorError, match=re.escape(expected)) as info:
        TensorDescriptor([2], strides)
    assert info.value.field == "strides" and info.value.value == strides
    assert "TensorDescriptor's strides" in str(info.value)
    assert isinstance(info.value, TensorError)


def test_descriptor_strides_accept_numpy_integers() -> None:
    assert TensorDescriptor([2, 3], [np.int64(1), np.int32(2)]).strides == (1, 2)


@pytest.mark.parametrize("dtype", ["int8", "nope", {"a": 1}, "f4,f4", 3])
def test_descriptor_dtype_must_be_a_supported_name(dtype) -> None:
    with pytest.raises(TensorError, match="TensorDescriptor's dtype"):
        TensorDescriptor([2], dtype=dtype)


@pytest.mark.parametrize("shape", [[2.5], ["a"], [True], [-1]])
def test_descriptor_shape_sizes_must_be_integers_at_least_0(shape) -> None:
    with pytest.raises(TensorError, match="invalid shape"):
        TensorDescriptor(shape)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"alpha": "2"}, "alpha must be a real number .*got str '2'"),
        ({"beta": True}, "beta must be a real number .*got bool True"),
        ({"alpha": 10**400}, r"alpha is too large for a float .*1\.8e308"),
    ],
)
def test_contraction_scalars_must_be_real_numbers_that_fit_a_float(kwargs, expected) -> None:
    a, b = rand(2, 2), rand(2, 2)
    plan = ContractionPlan(a, b)
    with pytest.raises(TensorError, match=expected):
        plan.execute(a, b, **kwargs)
