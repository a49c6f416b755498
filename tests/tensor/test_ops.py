"""The compute API as a user meets it: scalars, dtypes, broadcasting, reductions, matmul, errors.

Numerical agreement with NumPy on random views, for every backend, is in
``tests/tensor/backends/test_backend_conformance.py``; this file pins down the rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import llmfs.tensor.backends as registry
from llmfs.tensor import (
    AxisOutOfRangeError,
    BroadcastError,
    DTypeError,
    DuplicateAxisError,
    EinsumError,
    EmptyReductionError,
    MatmulShapeError,
    StaleViewError,
    Tensor,
    TensorError,
    TensorView,
    add,
    div,
    exp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mul,
    neg,
    ops,
    prod,
    reduce,
    register_backend,
    relu,
    scale,
    sub,
    sum,
    use_backend,
)
from llmfs.tensor.backends.numpy_backend import NumpyBackend
from llmfs.tensor.ops import ReduceError


def f32(*values: float, shape: tuple[int, ...] | None = None) -> Tensor:
    return Tensor.from_vec(shape or (len(values),), values, dtype="float32")


def arange(*shape: int, dtype: str = "float64") -> Tensor:
    count = int(np.prod(shape, dtype=np.int64))
    return Tensor.from_vec(shape, np.arange(count, dtype=np.float64), dtype=dtype)


# --------------------------------------------------------------------------------------------
# A spy backend: records what the primitives receive
# --------------------------------------------------------------------------------------------


class _Spy(NumpyBackend):
    name = "spy"
    received: list[tuple[str, tuple[Any, ...]]] = []  # noqa: RUF012 (reset by the fixture)

    def unary(self, op, x, *, dtype, compute):  # type: ignore[no-untyped-def]
        self.received.append((op, (x,), dtype, compute))
        return super().unary(op, x, dtype=dtype, compute=compute)

    def binary(self, op, a, b, *, dtype, compute):  # type: ignore[no-untyped-def]
        self.received.append((op, (a, b), dtype, compute))
        return super().binary(op, a, b, dtype=dtype, compute=compute)

    def reduce(self, op, x, axes, *, dtype, compute):  # type: ignore[no-untyped-def]
        self.received.append((op, (x, axes), dtype, compute))
        return super().reduce(op, x, axes, dtype=dtype, compute=compute)

    def matmul(self, a, b, *, dtype, compute):  # type: ignore[no-untyped-def]
        self.received.append(("matmul", (a, b), dtype, compute))
        return super().matmul(a, b, dtype=dtype, compute=compute)


@pytest.fixture
def spy() -> Iterator[list]:
    register_backend("spy", _Spy, replace=True)
    _Spy.received = []
    with use_backend("spy"):
        yield _Spy.received
    registry._loaders.pop("spy", None)
    registry._loaded.pop("spy", None)


# --------------------------------------------------------------------------------------------
# Scalars and dtypes
# --------------------------------------------------------------------------------------------


def test_a_python_scalar_takes_the_tensor_dtype_on_either_side() -> None:
    x = f32(1.0, 2.0)
    for result in (x + 1.0, 1.0 + x, x * 2, 3 - x, x / 4.0, 2.0 / x, add(x, 0.5), sub(1, x)):
        assert result.dtype == np.float32
    assert (x + 1.0).tolist() == [2.0, 3.0]
    assert (3 - x).tolist() == [2.0, 1.0]
    assert (2.0 / x).tolist() == [2.0, 1.0]
    half = Tensor.from_vec([1], [1.0], dtype="float16")
    assert (half * 2.5).dtype == np.float16


def test_a_scalar_is_rounded_to_the_tensor_dtype_as_in_numpy_2() -> None:
    x = f32(0.0)
    got = (x + 0.1).to_numpy()
    assert got == np.float32(0.1)
    assert got[0] == (np.zeros(1, np.float32) + 0.1)[0]


def test_mixed_dtypes_promote_to_the_widest() -> None:
    h = Tensor.from_vec([1], [1.0], dtype="float16")
    s = Tensor.from_vec([1], [1.0], dtype="float32")
    d = Tensor.from_vec([1], [1.0], dtype="float64")
    assert add(h, s).dtype == np.float32
    assert add(s, d).dtype == np.float64
    assert add(h, d).dtype == np.float64
    assert matmul(h, s).dtype == np.float32


def test_compute_is_float64_when_any_input_is_float64() -> None:
    tiny = Tensor.from_vec([1], [1e-10], dtype="float64")
    one = f32(1.0)
    assert add(one, tiny).tolist() == [1.0 + 1e-10]


def test_dtype_argument_sets_storage_but_not_compute_precision() -> None:
    one, small = f32(1.0), f32(1e-8)
    widened = add(one, small, dtype="float64")
    assert widened.dtype == np.float64
    # float32 arithmetic lost the 1e-8 before the result was widened (the arithmetic runs in
    # float32 unless an input is float64, whatever dtype the result is stored in).
    assert widened.tolist() == [1.0]
    assert add(one, small, dtype="float16").dtype == np.float16


def test_float16_storage_is_computed_in_float32(spy: list) -> None:
    h = Tensor.from_vec([2], [1.0, 2.0], dtype="float16")
    out = exp(h)
    assert out.dtype == np.float16
    (_, _, dtype, compute) = spy[-1]
    assert (dtype, compute) == (np.float16, np.float32)


def test_an_unsupported_dtype_argument_is_a_dtype_error() -> None:
    with pytest.raises(DTypeError, match="int8"):
        add(f32(1.0), f32(1.0), dtype="int8")


def test_only_tensors_views_and_real_numbers_are_operands() -> None:
    x = f32(1.0)
    with pytest.raises(TensorError, match=r"Tensor\.from_numpy"):
        add(x, np.ones(1))
    with pytest.raises(TensorError, match=r"got complex 1j \(numbers are bool, int and float"):
        add(x, 1j)
    with pytest.raises(TensorError, match="at least one"):
        add(1.0, 2.0)
    with pytest.raises(TensorError, match="real number"):
        scale(x, "2")  # type: ignore[arg-type]


def test_a_stale_view_is_refused() -> None:
    t = f32(1.0, 2.0)
    view = t.view()
    with t.mutate() as storage:
        storage[0] = 5.0
    with pytest.raises(StaleViewError):
        neg(view)


# --------------------------------------------------------------------------------------------
# Elementwise, broadcasting and outputs
# --------------------------------------------------------------------------------------------


def test_broadcasting_follows_numpy_rules() -> None:
    a = arange(2, 1, 3)
    b = arange(4, 1)
    got = add(a, b)
    assert got.shape == (2, 4, 3)
    np.testing.assert_array_equal(got.to_numpy(), a.to_numpy() + b.to_numpy())


def test_a_broadcast_mismatch_names_both_shapes_and_the_axis() -> None:
    with pytest.raises(BroadcastError) as info:
        add(arange(2, 3), arange(4))
    message = str(info.value)
    assert "[2, 3]" in message and "[4]" in message and "axis 1" in message
    assert "3 and 4" in message


def test_broadcasting_passes_zero_stride_views_not_copies(spy: list) -> None:
    a = arange(3, 4, dtype="float32")
    row = arange(4, dtype="float32")
    add(a.view().T.T, row)
    op, (left, right), _, _ = spy[-1]
    assert op == "add"
    assert left.owner is a and right.owner is row  # the inputs' own storage, not copies
    assert right.shape == (3, 4) and right.strides == (0, 1)


def test_non_contiguous_inputs_are_passed_as_they_are(spy: list) -> None:
    a = arange(3, 4, dtype="float32")
    flipped = a.view().T.flip(0)
    got = neg(flipped)
    (_, (x,), _, _) = spy[-1]
    assert x.owner is a and x.strides == (-1, 4)
    np.testing.assert_array_equal(got.to_numpy(), -a.to_numpy().T[::-1])


def test_outputs_are_new_row_major_owners() -> None:
    a = arange(2, 3)
    out = add(a.view().T, 1.0)
    assert isinstance(out, Tensor)
    assert out.strides == (2, 1)
    assert not np.shares_memory(out.as_slice(), a.as_slice())


def test_empty_outputs_do_no_work(spy: list) -> None:
    empty = arange(0, 3)
    assert add(empty, arange(3)).shape == (0, 3)
    assert neg(empty).shape == (0, 3)
    assert sum(empty, 1).shape == (0,)
    assert matmul(arange(0, 2), arange(2, 5)).shape == (0, 5)
    assert spy == []


def test_a_rank_0_result_holds_one_scalar() -> None:
    total = sum(arange(2, 3))
    assert total.shape == () and total.size == 1 and total.tolist() == 15.0
    scalar = Tensor.from_vec([], [2.0])
    assert (scalar * 3).tolist() == 6.0


def test_minimum_and_maximum_propagate_nan() -> None:
    a = Tensor.from_vec([3], [np.nan, 1.0, 5.0])
    b = Tensor.from_vec([3], [0.0, np.nan, 2.0])
    assert np.isnan(minimum(a, b).to_numpy()[:2]).all() and minimum(a, b).tolist()[2] == 2.0
    assert np.isnan(maximum(a, b).to_numpy()[:2]).all() and maximum(a, b).tolist()[2] == 5.0


def test_operators_route_to_the_ops() -> None:
    a, b = arange(2, 2), arange(2, 2)
    va = a.view().T
    assert (a + b).tolist() == add(a, b).tolist()
    assert (va - b).tolist() == sub(va, b).tolist()
    assert (va * va).tolist() == mul(va, va).tolist()
    assert (b / (a + 1)).tolist() == div(b, add(a, 1)).tolist()
    assert (-va).tolist() == neg(va).tolist()
    assert (a @ va).tolist() == matmul(a, va).tolist()
    assert relu(a - 1.0).tolist() == [[0.0, 0.0], [1.0, 2.0]]
    assert scale(a, 0.5).tolist() == [[0.0, 0.5], [1.0, 1.5]]


def _numpy_twin(operand: object) -> object:
    return operand.to_numpy() if isinstance(operand, (Tensor, TensorView)) else operand


@pytest.mark.parametrize(
    "expression",
    [
        "a == b", "a != b", "a < b", "a <= b", "a > b", "a >= b",
        "a == 2.0", "2.0 == a", "1.0 < a", "3 >= a", "a ** 2", "2 ** a", "a ** b", "abs(a - 2)",
        "-a", "2 - a", "3 / (a + 1)", "(a > 1) & (b < 3)", "(a > 1) | (b < 3)",
        "(a > 1) ^ (b < 3)", "~(a > 1)",
    ],
)  # fmt: skip
@pytest.mark.parametrize("kind", ["tensor", "view"])
def test_python_operators_mean_what_they_mean_in_numpy(expression: str, kind: str) -> None:
    owner = Tensor.from_vec([2, 3], [0.0, 1.0, 2.0, 3.0, 2.0, 1.0])
    other = Tensor.from_vec([3, 2], [2.0, 1.0, 2.0, 5.0, 0.0, 1.0])
    a = owner if kind == "tensor" else owner.view()
    b = other.view().T  # a transposed view on the right
    got = eval(expression, {}, {"a": a, "b": b})
    want = eval(expression, {}, {"a": _numpy_twin(a), "b": _numpy_twin(b)})
    assert isinstance(got, Tensor)
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_comparisons_make_tensors_unhashable_and_identity_explicit() -> None:
    a = arange(2)
    view = a.view()
    with pytest.raises(TypeError, match="unhashable"):
        hash(a)
    with pytest.raises(TypeError, match="unhashable"):
        _ = {view: 1}
    assert (a == None) is False and (a != "x") is True  # noqa: E711  (Python's fallback)
    assert (a == view).tolist() == [True, True]  # values, not identity
    assert any(item is a for item in [view, a])


def test_bitwise_operators_take_only_bool_tensors() -> None:
    ints = Tensor.from_vec([2], [1, 2])
    flags = ints > 1
    with pytest.raises(DTypeError, match=r"int64 for the and operator .*logical_and"):
        ints & flags
    with pytest.raises(DTypeError, match=r"int64 for the ~ operator .*logical_not"):
        _ = ~ints
    with pytest.raises(DTypeError, match="dtype int for the or operator"):
        flags | 1
    assert (flags & flags).tolist() == [False, True]


def test_astype_is_a_method_of_tensors_and_views() -> None:
    a = Tensor.from_vec([2, 2], [1.5, -2.5, 3.0, 0.0])
    assert a.astype("int64").tolist() == [[1, -2], [3, 0]]
    assert a.view().T.astype(bool).tolist() == [[True, True], [True, False]]
    assert a.astype(a.dtype).shares_storage(a) is False


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, 2, -1, -3, (0, 2), [2, 0], (), (-1, 0, 1)], ids=repr)
@pytest.mark.parametrize("keepdims", [False, True])
def test_axis_forms_match_numpy(axis: object, keepdims: bool) -> None:
    x = arange(2, 3, 4)
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    for ours, theirs in ((sum, np.sum), (max, np.max), (min, np.min), (mean, np.mean)):
        got = ours(x, axis, keepdims=keepdims)
        want = theirs(x.to_numpy(), axis=np_axis, keepdims=keepdims)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.to_numpy(), want)


def test_a_repeated_axis_is_an_error() -> None:
    with pytest.raises(DuplicateAxisError, match="axis 1 appears more than once"):
        sum(arange(2, 3), (1, -1))
    with pytest.raises(DuplicateAxisError):
        max(arange(2, 3), [0, 0])


def test_an_axis_out_of_range_is_an_error() -> None:
    with pytest.raises(AxisOutOfRangeError, match="axis 2 is out of range for rank 2"):
        sum(arange(2, 3), 2)
    with pytest.raises(AxisOutOfRangeError):
        mean(arange(2, 3), -3)


def test_empty_sum_is_zero_and_empty_prod_is_one() -> None:
    x = arange(0, 3)
    assert sum(x, 0).tolist() == [0.0, 0.0, 0.0]
    assert prod(x, 0).tolist() == [1.0, 1.0, 1.0]
    assert sum(x).tolist() == 0.0
    assert prod(x, 0, keepdims=True).shape == (1, 3)


@pytest.mark.parametrize("op", [max, min, mean], ids=lambda f: f.__name__)
def test_max_min_and_mean_over_an_empty_axis_are_errors(op: Any) -> None:
    with pytest.raises(EmptyReductionError) as info:
        op(arange(0, 3), 0)
    message = str(info.value)
    assert f"{op.__name__} over an empty axis" in message
    assert "[0, 3]" in message and "axis 0 has size 0" in message
    assert isinstance(info.value, TensorError)
    op(arange(0, 3), 1)  # the empty axis is kept, not reduced: an empty result, no error


def test_reducing_a_scalar_or_nothing_keeps_the_values() -> None:
    s = Tensor.from_vec([], [4.0])
    assert sum(s).tolist() == 4.0 and max(s).tolist() == 4.0
    x = arange(2, 2)
    assert mean(x, ()).tolist() == x.tolist()


def test_mode_label_reduce() -> None:
    a = Tensor.from_vec([2, 3], [1, 2, 3, 4, 5, 6])
    assert reduce(a, [0, 1], [0], "sum").tolist() == [6.0, 15.0]  # sums each row
    assert reduce(a, "ij", "j", "Sum").tolist() == [5.0, 7.0, 9.0]
    assert reduce(a, "ij", "ji", "max").tolist() == [[1, 4], [2, 5], [3, 6]]
    x = arange(2, 3, 4)
    assert reduce(x, "ijk", "ki", "min").tolist() == np.min(x.to_numpy(), 1).T.tolist()
    assert reduce(x, "ijk", "", "prod").shape == ()


def test_mode_label_reduce_errors() -> None:
    a = arange(2, 3)
    with pytest.raises(EinsumError, match="names 3 axes but the operand has rank 2"):
        reduce(a, "ijk", "i")
    with pytest.raises(EinsumError, match="input mode 'i' appears twice"):
        reduce(a, "ii", "i")
    with pytest.raises(EinsumError, match="output mode 'k' is not one of the input modes"):
        reduce(a, "ij", "k")
    with pytest.raises(EinsumError, match="output mode 'i' appears twice"):
        reduce(a, "ij", "ii")
    with pytest.raises(EinsumError, match="unknown reduction 'median'"):
        reduce(a, "ij", "i", "median")


def test_reduce_errors_name_reduce_the_modes_and_the_valid_ops() -> None:
    a = arange(2, 3)
    with pytest.raises(ReduceError) as info:
        reduce(a, "ij", "i", "foo")
    message = str(info.value)
    assert message.startswith("reduce(modes_in='ij', modes_out='i'): unknown reduction 'foo'")
    assert "sum, prod, max, min, mean" in message and "einsum" not in message
    assert isinstance(info.value, EinsumError)
    with pytest.raises(ReduceError, match=r"reduce\(modes_in=\[0, 1, 2\], modes_out=\[0\]\)"):
        reduce(a, [0, 1, 2], [0])
    with pytest.raises(ReduceError, match=r"modes_out must be a string .* got int"):
        reduce(a, "ij", 3)
    with pytest.raises(ReduceError, match="unknown reduction None"):
        reduce(a, "ij", "i", None)  # type: ignore[arg-type]


@pytest.mark.parametrize("reduction", [sum, prod, max, min, mean])
@pytest.mark.parametrize("keepdims", ["yes", "no", 1, 0, None])
def test_keepdims_must_be_a_bool(reduction, keepdims: object) -> None:
    # "no" is truthy: accepting it would keep the axes the caller asked to drop.
    with pytest.raises(TensorError, match="keepdims must be True or False") as info:
        reduction(arange(2, 3), 0, keepdims=keepdims)
    assert repr(keepdims) in str(info.value)


def test_keepdims_accepts_a_numpy_bool() -> None:
    assert sum(arange(2, 3), 0, keepdims=np.True_).shape == (1, 3)


# --------------------------------------------------------------------------------------------
# Matmul
# --------------------------------------------------------------------------------------------


def test_matmul_follows_numpy_shapes() -> None:
    cases = [
        ((2, 3), (3, 4)),
        ((3,), (3, 4)),
        ((2, 3), (3,)),
        ((3,), (3,)),
        ((5, 1, 2, 3), (4, 3, 2)),
    ]
    for a_shape, b_shape in cases:
        a, b = arange(*a_shape), arange(*b_shape)
        want = a.to_numpy() @ b.to_numpy()
        got = matmul(a, b)
        assert got.shape == want.shape
        np.testing.assert_allclose(got.to_numpy(), want)


def test_matmul_inner_size_mismatch_names_both_sizes() -> None:
    with pytest.raises(MatmulShapeError) as info:
        arange(2, 3) @ arange(4, 5)
    message = str(info.value)
    assert "[2, 3]" in message and "[4, 5]" in message
    assert "size 3" in message and "size 4" in message
    assert isinstance(info.value, TensorError)


def test_matmul_refuses_scalars_and_unbroadcastable_batches() -> None:
    with pytest.raises(MatmulShapeError, match="rank >= 1"):
        matmul(Tensor.from_vec([], [1.0]), arange(2))
    with pytest.raises(BroadcastError):
        matmul(arange(2, 2, 3), arange(3, 3, 2))


def test_matmul_over_an_empty_inner_axis_is_zeros() -> None:
    got = matmul(arange(2, 0), arange(0, 3))
    assert got.tolist() == [[0.0] * 3] * 2


def test_matmul_reads_transposed_and_flipped_operands() -> None:
    a = arange(4, 3)
    b = arange(4, 5)
    flipped = b.view().flip(0)
    np.testing.assert_allclose(
        matmul(a.view().T, flipped).to_numpy(), a.to_numpy().T @ b.to_numpy()[::-1]
    )


# --------------------------------------------------------------------------------------------
# Operands that are not tensors
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda: exp(2.0), "exp's operand"),
        (lambda: sum(2.0), "sum's operand"),
        (lambda: reduce(2.0, "", ""), "reduce's operand"),
        (lambda: matmul(2.0, arange(2, 2)), "matmul's left operand"),
        (lambda: arange(2, 2) @ 2, "matmul's right operand"),
        (lambda: 2 @ arange(2, 2), "matmul's left operand"),
    ],
)
def test_an_op_without_number_operands_says_so_for_a_number(call, what: str) -> None:
    with pytest.raises(TensorError) as info:
        call()
    message = str(info.value)
    assert message.startswith(f"{what} must be a Tensor or a TensorView, not a number")
    assert "got the number 2" in message and "real number" not in message


def test_matmul_by_a_number_points_at_mul() -> None:
    with pytest.raises(TensorError, match=r"use mul or \*"):
        matmul(arange(2, 2), 3.0)


def test_an_op_with_number_operands_lists_numbers_as_accepted() -> None:
    with pytest.raises(TensorError, match="add's operand must be a Tensor, a TensorView or a real"):
        add(arange(2), "1")
    with pytest.raises(TensorError, match=r"got Fraction Fraction\(1, 3\) \(numbers are"):
        add(arange(2), Fraction(1, 3))
    with pytest.raises(TensorError, match=r"all were numbers \(1, 2.5\)"):
        add(1, 2.5)


def test_an_array_operand_points_at_from_numpy() -> None:
    with pytest.raises(TensorError, match=r"got ndarray .*Tensor\.from_numpy"):
        exp(np.ones(2))  # type: ignore[arg-type]
    with pytest.raises(TensorError, match=r"got ndarray .*Tensor\.from_numpy"):
        ops.as_view(np.ones(2), numbers=True)
