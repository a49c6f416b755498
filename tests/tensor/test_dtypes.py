"""Integer and bool tensors, as NumPy defines them, on the numpy and the reference backend.

Every expected value AND every expected dtype comes from NumPy itself, run on the same values:
promotion (``int32 + int64``, ``int32 + float32``, weak Python scalars), true division,
comparisons, ``where``, ``take``, reductions and ``astype``. Where llmfs deliberately differs
(transcendental functions of integers, ``astype`` of NaN to an integer), the refusal and its
message are specified instead.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.tensor import (
    AxisOutOfRangeError,
    BroadcastError,
    DTypeError,
    IndexOutOfBoundsError,
    Tensor,
    TensorError,
    use_backend,
)
from llmfs.tensor.dtypes import promote, resolve_dtype

BACKENDS = ["numpy", "reference"]
INTS = ["int32", "int64"]
EXACT = ["bool", *INTS]
ALL = ["bool", "int32", "int64", "float16", "float32", "float64"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[str]:
    with use_backend(request.param):
        yield request.param


def values(dtype: str, shape: tuple[int, ...], seed: int, *, low: int = -4, high: int = 5) -> Any:
    """Small exact values of ``dtype`` (ints in [low, high), halves for floats)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype in INTS:
        return rng.integers(low, high, size=shape).astype(dtype)
    return (rng.integers(2 * low, 2 * high, size=shape) / 2).astype(dtype)


def strided(array: np.ndarray) -> lt.TensorView:
    """The values of ``array`` as a transposed (non-contiguous) llmfs view."""
    owner = Tensor.from_numpy(np.ascontiguousarray(array.T))
    return owner.view().T


def same(got: Any, want: np.ndarray) -> None:
    """``got`` (a Tensor) has exactly NumPy's dtype, shape and values (floats to a few ulps)."""
    assert isinstance(got, Tensor)
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        rtol = {2: 2e-3, 4: 1e-6, 8: 1e-13}[want.dtype.itemsize]
        np.testing.assert_allclose(got.to_numpy(), want, rtol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got.to_numpy(), want)


# --------------------------------------------------------------------------------------------
# Constructors and dtype names
# --------------------------------------------------------------------------------------------


def test_constructors_keep_integers_integer_and_bools_bool() -> None:
    assert Tensor.from_vec([2], [1, 2]).dtype == np.int64
    assert Tensor([2], [1, 2]).dtype == np.int64
    assert Tensor.from_vec([2], [True, False]).dtype == np.bool_
    assert Tensor.from_vec([2], [1, 2.5]).dtype == np.float64
    assert Tensor.from_vec([0], []).dtype == np.float64  # NumPy's empty array is float64
    assert Tensor.from_numpy([[1, 2], [3, 4]]).dtype == np.int64
    assert Tensor.from_numpy(np.arange(3, dtype=np.int32)).dtype == np.int32
    assert Tensor.from_numpy(np.ones(2, dtype=np.float32)).dtype == np.float32
    assert Tensor.from_vec([2], [1, 2], dtype="float32").dtype == np.float32
    assert Tensor.from_numpy([1, 2], dtype=bool).tolist() == [True, True]
    # arange counts in integers, as np.arange(3) does; zeros is float64, as np.zeros is.
    assert Tensor.arange(3).dtype == np.arange(3).dtype == np.int64
    assert Tensor.arange(3, "float32").tolist() == [0.0, 1.0, 2.0]
    assert Tensor.zeros([2]).dtype == np.zeros(2).dtype


@pytest.mark.parametrize(
    ("source", "stored"),
    [("int8", "int32"), ("int16", "int32"), ("uint8", "int32"), ("uint16", "int32"),
     ("uint32", "int64")],
)  # fmt: skip
def test_narrow_and_unsigned_integers_are_stored_in_a_signed_dtype_that_holds_them(
    source: str, stored: str
) -> None:
    array = np.array([0, 1, np.iinfo(source).max], dtype=source)
    tensor = Tensor.from_numpy(array)
    assert tensor.dtype == np.dtype(stored)
    assert tensor.tolist() == array.tolist()


def test_uint64_is_refused_without_a_dtype() -> None:
    with pytest.raises(DTypeError, match=r"uint64.*pass dtype="):
        Tensor.from_numpy(np.array([1], dtype=np.uint64))
    assert Tensor.from_numpy(np.array([1], dtype=np.uint64), dtype="int64").tolist() == [1]


def test_values_read_back_as_python_numbers_of_their_kind(backend: str) -> None:
    ints = Tensor.from_vec([2, 2], [1, 2, 3, 2**62 + 1])
    assert ints.get([1, 1]) == 2**62 + 1 and type(ints.get([1, 1])) is int
    assert type(ints.view().T.get([0, 1])) is int
    assert ints.as_mut_slice()[3] == 2**62 + 1
    flags = Tensor.from_vec([2], [True, False])
    assert flags.get([0]) is True and flags.tolist() == [True, False]


def test_supported_dtypes_and_their_spellings() -> None:
    assert lt.SUPPORTED_DTYPES == ("bool", "int32", "int64", "float16", "float32", "float64")
    assert resolve_dtype(bool) == np.bool_
    assert resolve_dtype(int) == np.int64
    assert resolve_dtype("int32") == np.int32
    assert resolve_dtype(np.int64) == np.int64
    for bad in ("int8", "uint8", "complex64", "bfloat16"):
        with pytest.raises(DTypeError, match=r"supported: bool, int32, int64, float16"):
            resolve_dtype(bad)


def test_remembered_spellings_and_promotions_give_the_same_answers_as_the_first_time() -> None:
    # Each spelling is resolved once and then looked up: the second answer must equal the first,
    # a byte-swapped spelling must still come back in the machine's order, and an unhashable or
    # unsupported spelling must still be refused every time.
    for spelling in ("float32", np.float32, np.dtype(">f4"), float, "int64", bool):
        first = resolve_dtype(spelling)
        assert resolve_dtype(spelling) == first and first.isnative
    for _ in range(2):
        with pytest.raises(DTypeError):
            resolve_dtype(["float32"])
        with pytest.raises(DTypeError):
            resolve_dtype("int8")
    int32, int64, f32 = np.dtype("int32"), np.dtype("int64"), np.dtype("float32")
    for _ in range(2):
        assert promote(int32, int64) == np.int64
        assert promote(int32, f32) == np.float64  # NumPy 2: int32 + float32 is float64
        assert promote(int32, 3) == np.int32  # a Python int is weak
        assert promote(f32, 2.5) == np.float32  # so is a Python float


# --------------------------------------------------------------------------------------------
# Elementwise arithmetic and comparisons against NumPy
# --------------------------------------------------------------------------------------------

BINARY: dict[str, Callable[..., Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "minimum": np.minimum,
    "maximum": np.maximum,
    "power": np.power,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}

#: Pairs of operand dtypes: every exact pair, and each exact dtype with each float.
PAIRS = [
    *itertools.combinations_with_replacement(EXACT, 2),
    *((a, b) for a in EXACT for b in ("float16", "float32", "float64")),
    *((b, a) for a in INTS for b in ("float32",)),
]


def _refused_by_numpy(op: str, left: str, right: str) -> bool:
    """bool - bool is a TypeError in NumPy; bool ** bool, // and % make int8, not stored here."""
    return left == right == "bool" and op in ("sub", "power", "floor_divide", "remainder")


@pytest.mark.parametrize("op", list(BINARY))
@pytest.mark.parametrize(("left", "right"), PAIRS, ids=lambda d: d)
def test_binary_ops_match_numpy_values_and_promotion(
    backend: str, op: str, left: str, right: str
) -> None:
    a = values(left, (3, 4), 1)
    # Non-negative exponents: NumPy refuses negative integer powers (tested below).
    b = values(right, (4,), 2, low=0 if op == "power" else -4, high=4 if op == "power" else 5)
    if _refused_by_numpy(op, left, right):
        with pytest.raises(DTypeError, match=f"unsupported dtype bool for {op}"):
            getattr(lt, op)(strided(a), Tensor.from_numpy(b))
        return
    with np.errstate(all="ignore"):
        want = BINARY[op](a, b)
    same(getattr(lt, op)(strided(a), Tensor.from_numpy(b)), want)
    # and with the operands swapped (broadcast on the left); a may hold negative exponents
    if op != "power" or a.dtype.kind == "f":
        with np.errstate(all="ignore"):
            want = BINARY[op](b, a)
        same(getattr(lt, op)(Tensor.from_numpy(b), strided(a)), want)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("scalar", [2, -3, 2.5, 0.5])
@pytest.mark.parametrize(
    "op", ["add", "mul", "sub", "div", "less", "equal", "maximum", "floor_divide", "remainder"]
)
def test_python_numbers_are_weak_as_in_numpy_2(
    backend: str, dtype: str, scalar: float, op: str
) -> None:
    a = values(dtype, (2, 3), 3)
    if dtype == "bool" and op == "sub" and isinstance(scalar, bool):
        return
    with np.errstate(all="ignore"):
        want_right, want_left = BINARY[op](a, scalar), BINARY[op](scalar, a)
    same(getattr(lt, op)(Tensor.from_numpy(a), scalar), want_right)
    same(getattr(lt, op)(scalar, Tensor.from_numpy(a)), want_left)


def test_promotion_examples_spelled_out() -> None:
    i32, i64 = Tensor.from_vec([1], [1], dtype="int32"), Tensor.from_vec([1], [1])
    f16, f32 = Tensor.from_vec([1], [1.0], dtype="float16"), Tensor.from_vec([1], [1.0], "float32")
    flag = Tensor.from_vec([1], [True])
    assert (i32 + i64).dtype == np.int64
    assert (i32 + f32).dtype == np.float64  # float32 cannot hold every int32
    assert (i32 + f16).dtype == np.float64
    assert (flag + f16).dtype == np.float16
    assert (flag + flag).dtype == np.bool_ and (flag + flag).tolist() == [True]
    assert (flag + 1).dtype == np.int64
    assert (i32 + 1).dtype == np.int32 and (i32 + 0.5).dtype == np.float64
    assert (f32 + 1).dtype == np.float32
    assert (i32 / i32).dtype == np.float64 and (flag / flag).dtype == np.float64


def test_an_int_that_does_not_fit_the_tensor_dtype_is_refused() -> None:
    i32 = Tensor.from_vec([1], [1], dtype="int32")
    with pytest.raises(TensorError, match=r"2147483648 does not fit int32"):
        i32 + 2**31
    with pytest.raises(OverflowError):  # NumPy 2 refuses it too
        np.array([1], dtype=np.int32) + 2**31
    assert (i32 + (2**31 - 1)).tolist() == [-(2**31)]  # fits, then wraps like NumPy


def test_integer_arithmetic_wraps_around_like_numpy(backend: str) -> None:
    i32 = np.array([2**31 - 1, -(2**31), 46341], dtype=np.int32)
    i64 = np.array([2**63 - 1, 2**62 + 1, -(2**63)], dtype=np.int64)
    with np.errstate(all="ignore"):
        same(lt.add(Tensor.from_numpy(i32), 1), i32 + 1)
        same(lt.mul(Tensor.from_numpy(i32), Tensor.from_numpy(i32)), i32 * i32)
        same(lt.mul(Tensor.from_numpy(i64), 3), i64 * 3)
        same(lt.neg(Tensor.from_numpy(i64)), -i64)
        same(lt.abs(Tensor.from_numpy(i32)), np.abs(i32))
        same(lt.power(Tensor.from_numpy(i64), 3), i64**3)


def test_int64_values_beyond_float_precision_stay_exact(backend: str) -> None:
    big = np.array([2**53 + 1, 2**60 + 3], dtype=np.int64)
    same(lt.add(Tensor.from_numpy(big), 1), big + 1)
    same(lt.equal(Tensor.from_numpy(big), 2**53), big == 2**53)
    same(lt.sum(Tensor.from_numpy(big)), np.sum(big))


def test_comparisons_with_nan_follow_ieee(backend: str) -> None:
    a = np.array([np.nan, 1.0, np.inf, -0.0])
    b = np.array([np.nan, np.nan, np.inf, 0.0])
    for op in ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal"):
        same(getattr(lt, op)(Tensor.from_numpy(a), Tensor.from_numpy(b)), BINARY[op](a, b))


def test_negative_integer_powers_are_refused_as_in_numpy() -> None:
    ints = Tensor.from_vec([2], [2, 3])
    with pytest.raises(TensorError, match=r"negative integer powers.*exponent is -1"):
        ints ** Tensor.from_vec([2], [1, -1])
    with pytest.raises(ValueError, match="negative integer powers"):
        np.array([2, 3]) ** np.array([1, -1])
    assert (ints**-1.0).tolist() == [0.5, 1 / 3]  # a float exponent makes a float result


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "int64"])
def test_floor_divide_and_remainder_by_zero_and_infinities_match_numpy(
    backend: str, dtype: str
) -> None:
    if dtype in INTS:
        a = np.array([7, -7, 7, -7, 0, 5, np.iinfo(dtype).min], dtype=dtype)
        b = np.array([2, 2, -2, -2, 0, 0, -1], dtype=dtype)
    else:
        a = np.array([7, -7, 7, -7, 0, np.inf, -np.inf, np.nan, 1, 5, -0.0, 3, -5], dtype=dtype)
        b = np.array([2, 2, -2, -2, 0, 1, 2, 1, np.inf, 0, 3, -np.inf, -0.0], dtype=dtype)
    with np.errstate(all="ignore"):
        floors, remainders = np.floor_divide(a, b), np.remainder(a, b)
    same(Tensor.from_numpy(a) // Tensor.from_numpy(b), floors)
    same(Tensor.from_numpy(a) % Tensor.from_numpy(b), remainders)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_float_powers_follow_ieee_on_every_backend(backend: str, dtype: str) -> None:
    base = np.array([0.0, -0.0, -8.0, -8.0, 10.0, -10.0, 2.0, np.nan, 1.0], dtype=dtype)
    exponent = np.array([-1.0, -1.0, 1 / 3, 3.0, 400.0, 401.0, -2.0, 0.0, np.nan], dtype=dtype)
    with np.errstate(all="ignore"):
        want = np.power(base, exponent)
    same(lt.power(Tensor.from_numpy(base), Tensor.from_numpy(exponent)), want)


# --------------------------------------------------------------------------------------------
# Unary ops: what integers and bools allow, and the refusals
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", EXACT)
def test_neg_abs_relu_on_integers_and_bools(backend: str, dtype: str) -> None:
    a = values(dtype, (3, 2), 4)
    same(lt.abs(strided(a)), np.abs(a))
    if dtype == "bool":
        with pytest.raises(DTypeError, match=r"bool for neg .*logical_not or ~"):
            lt.neg(Tensor.from_numpy(a))
        with pytest.raises(TypeError):  # NumPy refuses it too
            np.negative(a)
        with pytest.raises(DTypeError, match="bool for relu"):
            lt.relu(Tensor.from_numpy(a))
        same(lt.logical_not(strided(a)), ~a)
    else:
        same(lt.neg(strided(a)), -a)
        same(lt.relu(strided(a)), np.maximum(a, 0))
        same(lt.logical_not(strided(a)), np.logical_not(a))


@pytest.mark.parametrize("dtype", EXACT)
@pytest.mark.parametrize(
    "op", ["sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "reciprocal"]
)
def test_transcendental_ops_on_integers_and_bools_say_to_cast(dtype: str, op: str) -> None:
    with pytest.raises(DTypeError) as info:
        getattr(lt, op)(Tensor.from_numpy(values(dtype, (2,), 5)))
    message = str(info.value)
    assert f"unsupported dtype {dtype} for {op}" in message
    assert f"{op}(x.astype('float64'))" in message
    assert "supported: float16, float32, float64" in message


def test_bool_subtraction_is_refused_with_numpy_advice() -> None:
    flags = Tensor.from_vec([2], [True, False])
    with pytest.raises(DTypeError, match=r"bool for sub .*logical_xor or \^"):
        flags - flags
    with pytest.raises(TypeError):
        np.array([True]) - np.array([True])


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------

REDUCTIONS = {
    "sum": np.sum,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "mean": np.mean,
    "any": np.any,
    "all": np.all,
}


@pytest.mark.parametrize("op", list(REDUCTIONS))
@pytest.mark.parametrize("dtype", EXACT)
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2), ()], ids=repr)
def test_reductions_of_integers_and_bools_match_numpy(
    backend: str, op: str, dtype: str, axis: Any
) -> None:
    a = values(dtype, (3, 4, 2), 6, low=-2, high=3)
    same(getattr(lt, op)(strided(a), axis), REDUCTIONS[op](a, axis=axis))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_any_and_all_read_truth_values_of_floats(backend: str, dtype: str) -> None:
    a = np.array([[0.0, np.nan], [-0.0, 0.0], [2.5, 1.0]], dtype=dtype)
    for op in ("any", "all"):
        same(getattr(lt, op)(Tensor.from_numpy(a), 1), REDUCTIONS[op](a, axis=1))
        kept = getattr(lt, op)(Tensor.from_numpy(a), 1, keepdims=True)
        same(kept, REDUCTIONS[op](a, axis=1, keepdims=True))


def test_empty_reductions_of_integers_and_truth_values() -> None:
    empty = Tensor.from_numpy(np.zeros((0, 3), dtype=np.int32))
    same(lt.sum(empty, 0), np.sum(np.zeros((0, 3), np.int32), 0))
    same(lt.prod(empty, 0), np.prod(np.zeros((0, 3), np.int32), 0))
    same(lt.any(empty, 0), np.zeros(3, dtype=bool))
    same(lt.all(empty, 0), np.ones(3, dtype=bool))


# --------------------------------------------------------------------------------------------
# matmul and einsum
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("left", "right"), [("int32", "int32"), ("int32", "int64"),
                                             ("bool", "bool"), ("int64", "float32")])  # fmt: skip
def test_matmul_and_einsum_of_integers_match_numpy(backend: str, left: str, right: str) -> None:
    a, b = values(left, (2, 3, 4), 7), values(right, (4, 5), 8)
    same(lt.matmul(strided(a), Tensor.from_numpy(b)), np.matmul(a, b))
    same(lt.einsum("bij,jk->bik", Tensor.from_numpy(a), Tensor.from_numpy(b)), np.matmul(a, b))


# --------------------------------------------------------------------------------------------
# where
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cond_dtype", ["bool", "int32", "float64"])
@pytest.mark.parametrize(("left", "right"), [("int32", "int64"), ("float32", "int32"),
                                             ("bool", "bool"), ("float16", "bool")])  # fmt: skip
def test_where_matches_numpy(backend: str, cond_dtype: str, left: str, right: str) -> None:
    cond = values(cond_dtype, (3, 1), 9, low=-1, high=2)
    a, b = values(left, (4,), 10), values(right, (3, 4), 11)
    same(lt.where(Tensor.from_numpy(cond), Tensor.from_numpy(a), strided(b)), np.where(cond, a, b))


@pytest.mark.parametrize("dtype", ["int32", "float32", "bool"])
def test_where_with_numbers_promotes_weakly(backend: str, dtype: str) -> None:
    cond = np.array([True, False, True])
    a = values(dtype, (3,), 12)
    for number in (0, -1, 0.5):
        mask, tensor = Tensor.from_numpy(cond), Tensor.from_numpy(a)
        same(lt.where(mask, tensor, number), np.where(cond, a, number))
        same(lt.where(mask, number, tensor), np.where(cond, number, a))
    same(lt.where(Tensor.from_numpy(cond), 1, 0), np.where(cond, 1, 0))


def test_where_refuses_bad_operands() -> None:
    with pytest.raises(TensorError, match="where's condition must be a Tensor"):
        lt.where(True, Tensor.from_vec([1], [1.0]), 0.0)
    with pytest.raises(BroadcastError):
        lt.where(Tensor.from_vec([2], [True, False]), Tensor.from_vec([3], [1, 2, 3]), 0)


# --------------------------------------------------------------------------------------------
# take and integer-array indexing (embedding lookups)
# --------------------------------------------------------------------------------------------


def test_an_embedding_lookup_has_the_ids_shape_plus_the_row(backend: str) -> None:
    table = np.arange(15.0).reshape(5, 3)
    ids = np.array([[0, 4, 2, 2], [-1, 1, 0, -5]])
    for ids_dtype in INTS:
        got = lt.take(Tensor.from_numpy(table), Tensor.from_numpy(ids.astype(ids_dtype)))
        assert got.shape == (2, 4, 3)
        same(got, np.take(table, ids, axis=0))
    same(Tensor.from_numpy(table)[Tensor.from_numpy(ids)].materialize(), table[ids])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
def test_take_along_any_axis_of_a_strided_view_matches_numpy(
    backend: str, axis: int, dtype: str
) -> None:
    table = values(dtype, (4, 3, 5), 13)
    view = strided(table)  # reversed-stride storage underneath
    ids = np.array([[2, 0], [-1, 1], [1, 1]])
    id_view = Tensor.from_numpy(ids.T.copy()).view().T  # non-contiguous ids too
    same(lt.take(view, id_view, axis=axis), np.take(table, ids, axis=axis))


def test_take_with_empty_ids_or_empty_rows() -> None:
    table = Tensor.from_numpy(np.arange(6.0).reshape(3, 2))
    no_ids = Tensor.from_numpy(np.zeros((2, 0), dtype=np.int64))
    same(lt.take(table, no_ids), np.take(np.arange(6.0).reshape(3, 2), np.zeros((2, 0), int), 0))
    empty_rows = Tensor.from_numpy(np.zeros((3, 0)))
    same(lt.take(empty_rows, Tensor.from_vec([2], [2, 0])), np.zeros((2, 0)))


def test_an_out_of_range_id_names_the_id_the_axis_and_its_size() -> None:
    table = Tensor.from_numpy(np.zeros((5, 3)))
    with pytest.raises(IndexOutOfBoundsError) as info:
        lt.take(table, Tensor.from_vec([3], [1, 7, 9]))
    assert (info.value.index, info.value.axis, info.value.size) == (7, 0, 5)
    assert re.search(r"id 7 is out of bounds for axis 0 of size 5", str(info.value))
    with pytest.raises(IndexOutOfBoundsError, match=r"id -4 .* axis 1 of size 3"):
        lt.take(table, Tensor.from_vec([1], [-4]), axis=1)
    with pytest.raises(IndexOutOfBoundsError, match=r"id 0 .* size 0"):
        lt.take(Tensor.from_numpy(np.zeros((0, 3))), Tensor.from_vec([1], [0]))


def test_take_refuses_ids_that_are_not_integers_and_bad_axes() -> None:
    table = Tensor.from_numpy(np.zeros((5, 3)))
    for ids in (Tensor.from_vec([1], [1.0]), Tensor.from_vec([1], [True])):
        with pytest.raises(DTypeError, match=r"take's ids .*must be integers"):
            lt.take(table, ids)
    with pytest.raises(DTypeError, match=r"boolean-mask selection is not supported, where\("):
        table[Tensor.from_vec([5], [True, False, True, False, False])]
    with pytest.raises(AxisOutOfRangeError):
        lt.take(table, Tensor.from_vec([1], [0]), axis=2)
    with pytest.raises(TensorError, match="take's ids must be a Tensor"):
        lt.take(table, [0, 1])  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# astype and copies
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("source", "target"), list(itertools.product(ALL, ALL)))
def test_astype_matches_numpy_and_always_copies(backend: str, source: str, target: str) -> None:
    a = values(source, (3, 4), 14)
    view = strided(a)
    got = view.astype(target)
    same(got, a.astype(target))
    assert not got.shares_storage(view)


def test_astype_truncates_and_wraps_like_numpy(backend: str) -> None:
    floats = np.array([2.7, -2.7, 0.5, -0.0])
    same(Tensor.from_numpy(floats).astype("int32"), floats.astype(np.int32))
    wide = np.array([2**40 + 5, -(2**33)], dtype=np.int64)
    same(Tensor.from_numpy(wide).astype("int32"), wide.astype(np.int32))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, 2.0**31, -(2.0**31) - 1])
def test_astype_refuses_floats_with_no_integer_counterpart(bad: float) -> None:
    with pytest.raises(TensorError, match=r"astype\(int32\): the value .* has no int32"):
        Tensor.from_vec([2], [1.0, bad]).astype("int32")
    assert Tensor.from_vec([1], [-(2.0**31)]).astype("int32").tolist() == [-(2**31)]


def test_every_way_into_integer_storage_refuses_floats_without_an_integer_counterpart() -> None:
    ints = Tensor.from_vec([2], [1, 2], dtype="int32")
    writes: dict[str, Callable[[], object]] = {
        "from_vec": lambda: Tensor.from_vec([2], [1.0, np.nan], dtype="int32"),
        "from_numpy": lambda: Tensor.from_numpy([np.inf], dtype="int64"),
        "full": lambda: Tensor.full([2], -np.inf, dtype="int64"),
        "writing to storage": lambda: ints.as_mut_slice().__setitem__(0, 2.0**40),
    }
    for where, write in writes.items():
        with pytest.raises(TensorError, match=rf"{re.escape(where)}: the value .* has no int"):
            write()
    assert ints.tolist() == [1, 2]  # the refused write changed nothing
    ints.as_mut_slice()[0] = -7.9  # in range: truncated towards zero, as NumPy does
    assert ints.tolist() == [-7, 2]


def test_integer_and_bool_views_materialize_and_transpose(backend: str) -> None:
    for dtype in EXACT:
        a = values(dtype, (3, 4), 15)
        owner = Tensor.from_numpy(a)
        same(owner.view().T.materialize(), a.T)
        same(lt.copying_transpose(owner), a.T)
        same(owner.view().flip(1)[::2].materialize(), a[::2, ::-1])


# --------------------------------------------------------------------------------------------
# Whole-tensor questions
# --------------------------------------------------------------------------------------------


def test_array_equal_matches_numpy(backend: str) -> None:
    a = np.array([[1.0, np.nan], [3.0, 4.0]])
    cases = [
        (a, a),
        (a, a.T),
        (a, a[:1]),
        (np.array([1, 2]), np.array([1.0, 2.0])),
        (np.array([True, False]), np.array([1, 0])),
    ]
    for x, y in cases:
        for equal_nan in (False, True):
            got = lt.array_equal(Tensor.from_numpy(x), Tensor.from_numpy(y), equal_nan=equal_nan)
            assert got is np.array_equal(x, y, equal_nan=equal_nan)


def test_isclose_and_allclose_match_numpy(backend: str) -> None:
    x = np.array([1.0, 1.0 + 1e-9, np.inf, np.inf, np.nan, 100.0, 1.0, 0.0])
    y = np.array([1.0, 1.0, np.inf, -np.inf, np.nan, 100.001, np.inf, 1e-9])
    for equal_nan in (False, True):
        same(
            lt.isclose(Tensor.from_numpy(x), Tensor.from_numpy(y), equal_nan=equal_nan),
            np.isclose(x, y, equal_nan=equal_nan),
        )
    same(lt.isclose(Tensor.from_numpy(x), 1.0, rtol=0.0, atol=1e-6), np.isclose(x, 1.0, 0.0, 1e-6))
    ints = np.array([[1, 2], [3, 5]])
    assert lt.allclose(Tensor.from_numpy(ints), Tensor.from_numpy(ints + 0.0)) is True
    assert lt.allclose(Tensor.from_numpy(ints), Tensor.from_vec([2], [1, 2])) is False
    assert np.allclose(ints, [1, 2]) is False  # broadcast: the second row differs
    with pytest.raises(BroadcastError):
        lt.allclose(Tensor.from_numpy(ints), Tensor.from_vec([3], [1, 2, 3]))
    with pytest.raises(TensorError, match="rtol must be a real number"):
        lt.isclose(Tensor.from_numpy(ints), 1, rtol="0.1")  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# The Metal backends refuse what their kernels cannot read, by name, before any kernel runs
# --------------------------------------------------------------------------------------------

needs_emulator = pytest.mark.skipif(
    "metal-emulator" not in lt.available_backends(),
    reason="the Metal emulator needs a C++ compiler (clang++)",
)


@pytest.fixture
def no_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes every Metal kernel entry point fail the test if it is reached."""
    from llmfs.tensor.backends.metal import ops as metal_ops

    def reached(*_: object, **__: object) -> None:
        raise AssertionError("a Metal kernel ran for a refused dtype")

    for name in ("unary", "binary", "reduce", "matmul", "strided_copy"):
        monkeypatch.setattr(metal_ops, name, reached)


@needs_emulator
@pytest.mark.usefixtures("no_kernels")
@pytest.mark.parametrize("dtype", ["float64", "int64", "int32", "bool"])
def test_metal_refuses_dtypes_without_kernels_by_name(dtype: str) -> None:
    declared = lt.get_backend("metal-emulator").dtypes
    assert "float64" not in declared and "int64" not in declared  # no 64-bit kernels, ever
    if dtype in declared:
        pytest.skip(f"the Metal kernels read {dtype}")
    x = Tensor.from_numpy(values(dtype, (2, 3), 16, low=0))
    calls = {
        "abs": lambda: lt.abs(x),
        "add": lambda: lt.add(x, x),
        "max": lambda: lt.max(x, 0),
        "materialize": lambda: x.view().T.materialize(),
        "matmul": lambda: lt.matmul(x, x.view().T),
        "where": lambda: lt.where(x, x, x),
        "take": lambda: lt.take(x, Tensor.from_vec([1], [0])),
    }
    with use_backend("metal-emulator"):
        for what, call in calls.items():
            with pytest.raises(DTypeError) as info:
                call()
            message = str(info.value)
            assert f"metal-emulator backend does not take {dtype}" in message, what
            assert "Convert" in message, what


@needs_emulator
@pytest.mark.usefixtures("no_kernels")
@pytest.mark.parametrize("dtype", ["float64", "int64"])
def test_values_a_metal_backend_refuses_to_compute_are_still_read_out(dtype: str) -> None:
    # The refusal is of arithmetic and kernel copies in a dtype Metal lacks; reading the values
    # back to NumPy (the way the refusal's own advice converts them) needs no kernel.
    source = values(dtype, (2, 3), 16, low=0)
    x = Tensor.from_numpy(source)
    with use_backend("metal-emulator"):
        assert np.array_equal(x.view().T.to_numpy(), source.T)
        assert x.view()[1].tolist() == source[1].tolist()
        assert np.array_equal(np.asarray(x.view().flip(0)), source[::-1])
        with pytest.raises(DTypeError, match=f"does not take {dtype}"):
            x.view().T.materialize()


@needs_emulator
@pytest.mark.usefixtures("no_kernels")
def test_metal_refuses_converting_float32_to_a_dtype_it_lacks() -> None:
    with use_backend("metal-emulator"), pytest.raises(DTypeError, match="does not take int64"):
        Tensor.from_vec([2], [1.0, 2.0], dtype="float32").astype("int64")


@needs_emulator
def test_under_metal_comparisons_and_lookups_of_float32_run_on_numpy() -> None:
    table = Tensor.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2))
    with use_backend("metal-emulator"):
        assert lt.take(table, Tensor.from_vec([2], [2, 0])).tolist() == [[4.0, 5.0], [0.0, 1.0]]
        assert (table > 2).tolist() == [[False, False], [False, True], [True, True]]
