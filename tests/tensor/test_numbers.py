"""Numbers next to tensors and numbers entering storage, against NumPy 2, for every kind.

The rules (:mod:`llmfs.tensor.dtypes`):

* a number is what NumPy takes as one: a Python bool, int or float, or a NumPy scalar of those
  kinds; complex numbers, ``Fraction``, ``Decimal``, strings are a TensorError;
* a Python bool/int/float is weak, a NumPy scalar strong, and one function (``promote``) decides
  the result dtype for ``mul`` and for einsum alike;
* a value enters storage only when the dtype holds it: Python ints within an integer dtype's
  range (NumPy 2 raises OverflowError), floats into integers only when finite and in range
  (NumPy would write an arbitrary number, so this one rule is llmfs's own);
* ``copyto`` casts same-kind, as ``np.copyto(casting="same_kind")``.

Each test draws numbers of every kind with hypothesis and asks NumPy for the answer: where NumPy
raises, llmfs must raise a TensorError; where NumPy answers, llmfs must give the same dtype and
values.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs.tensor as lt
from llmfs.tensor import SUPPORTED_DTYPES, Tensor, TensorError
from llmfs.tensor.dtypes import INTEGER_RANGES, check_integer_cast, is_number

FLOATS = ("float16", "float32", "float64")
INTEGERS = ("int32", "int64")
EDGE_INTS = [0, 1, -1, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**63 - 1, 2**63, -(2**63), 2**64]

python_numbers = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(EDGE_INTS),
    st.floats(width=64),
    st.sampled_from([0.5, -2.5, 3.0, 1e10, 65520.0, 2.0**31, -(2.0**31) - 0.5, 1e300]),
)

NUMPY_KINDS = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64, *map(np.dtype, FLOATS)]


@st.composite
def numpy_numbers(draw: st.DrawFn) -> np.generic:
    kind = np.dtype(draw(st.sampled_from(NUMPY_KINDS)))
    if kind.kind == "b":
        return np.bool_(draw(st.booleans()))
    if kind.kind in "iu":
        info = np.iinfo(kind)
        return kind.type(draw(st.integers(min_value=int(info.min), max_value=int(info.max))))
    return kind.type(draw(st.floats(width=8 * kind.itemsize)))


numbers = st.one_of(python_numbers, numpy_numbers())
not_numbers = st.sampled_from(
    [1j, np.complex64(1), Fraction(1, 3), Decimal("1.5"), "1", np.str_("2"), None, [1.0]]
)


def small_tensor(dtype: str) -> tuple[Tensor, np.ndarray]:
    values = np.array([0, 1, 2, -3, 5, 1], dtype=np.int64).reshape(2, 3)
    array = (values != 0) if dtype == "bool" else values.astype(dtype)
    return Tensor.from_numpy(array), array


def numpy_answer(call: Callable[[], Any]) -> Any:
    """NumPy's result, or None where NumPy refuses (an exception of its own)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            return call()
        except (OverflowError, TypeError, ValueError):
            return None


def assert_same(ours: Tensor, theirs: np.ndarray) -> None:
    assert ours.dtype == theirs.dtype, (ours.dtype, theirs.dtype)
    np.testing.assert_array_equal(ours.to_numpy(), theirs)


def ours_or_error(call: Callable[[], Tensor]) -> Tensor | TensorError:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # llmfs never warns: a value converts or is refused
        try:
            return call()
        except TensorError as error:
            return error


# -- what a number is ----------------------------------------------------------------------


@given(numbers)
def test_every_python_and_numpy_number_is_a_number(number: object) -> None:
    assert is_number(number)


@given(not_numbers, st.sampled_from(SUPPORTED_DTYPES))
def test_anything_else_is_refused_with_a_tensor_error_by_every_op(
    value: object, dtype: str
) -> None:
    tensor, _ = small_tensor(dtype)
    for call in (
        lambda: lt.mul(tensor, value),
        lambda: lt.einsum("ij,->ij", tensor, value),
        lambda: lt.where(tensor, value, 1),
        lambda: lt.copyto(tensor.view(), value),
        lambda: Tensor.full([2], value, dtype),
    ):
        with pytest.raises(TensorError):
            call()  # type: ignore[arg-type]


# -- numbers next to tensors: mul and einsum, one promotion ----------------------------------


def _expected_product(array: np.ndarray, number: object) -> np.ndarray | None:
    theirs = numpy_answer(lambda: np.multiply(array, number))
    if theirs is not None and theirs.dtype.name not in SUPPORTED_DTYPES:
        return None  # a dtype llmfs does not store (int8 from np.int8 * bools): a DTypeError
    return theirs


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SUPPORTED_DTYPES), numbers)
def test_mul_and_einsum_with_a_number_match_numpys_weak_promotion(dtype: str, number: Any) -> None:
    tensor, array = small_tensor(dtype)
    theirs = _expected_product(array, number)
    calls = {
        "mul": lambda: lt.mul(tensor, number),
        "einsum i,->": lambda: lt.einsum("ij,->ij", tensor, number),
        "einsum ,i->": lambda: lt.einsum(",ij->ji", number, tensor),
        "plan": lambda: lt.EinsumPlan("ij,->ij", tensor, number).execute(tensor, number),
    }
    for name, call in calls.items():
        ours = ours_or_error(call)
        if theirs is None:
            assert isinstance(ours, TensorError), (name, ours)
        else:
            assert isinstance(ours, Tensor), (name, ours)
            assert_same(ours, theirs.T if name == "einsum ,i->" else theirs)


@given(st.sampled_from(SUPPORTED_DTYPES), numbers, st.sampled_from(["ij,->", "ij,->i", "ij,->j"]))
def test_einsum_promotes_numbers_by_the_rule_of_mul(
    dtype: str, number: Any, expression: str
) -> None:
    tensor, _ = small_tensor(dtype)
    product = ours_or_error(lambda: lt.mul(tensor, number))
    plan = ours_or_error(lambda: lt.EinsumPlan(expression, tensor, number))  # type: ignore[arg-type,return-value]
    if isinstance(product, Tensor) and isinstance(plan, lt.EinsumPlan):
        assert plan.output_dtype == product.dtype


def test_a_plan_for_one_kind_of_number_refuses_another() -> None:
    tensor, _ = small_tensor("int32")
    plan = lt.EinsumPlan("ij,->ij", tensor, 2)
    assert plan.output_dtype == np.int32 and plan.execute(tensor, 3).dtype == np.int32
    for other, shown in ((2.0, "a Python float"), (np.int64(2), "a NumPy int64 scalar")):
        with pytest.raises(lt.PlanMismatchError, match=f"kind is {shown} but the plan was made"):
            plan.execute(tensor, other)


# -- copyto: same-kind casting ---------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SUPPORTED_DTYPES), numbers)
def test_copyto_a_number_matches_np_copyto_same_kind(dtype: str, number: Any) -> None:
    tensor, array = small_tensor(dtype)
    target = array.copy()
    refused = numpy_answer(lambda: np.copyto(target, number, casting="same_kind") or True) is None
    outcome = ours_or_error(lambda: lt.copyto(tensor.view(), number))  # type: ignore[arg-type,func-returns-value]
    if refused:
        assert isinstance(outcome, TensorError), outcome
        assert tensor.to_numpy().tolist() == array.tolist()  # nothing written
    else:
        assert outcome is None
        assert_same(tensor, target)


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(SUPPORTED_DTYPES),
    st.sampled_from(SUPPORTED_DTYPES),
    st.lists(st.floats(width=16) | st.integers(-(2**40), 2**40), min_size=3, max_size=3),
)
def test_copyto_a_tensor_matches_np_copyto_same_kind(source: str, target: str, raw: list) -> None:
    values = numpy_answer(lambda: np.array(raw, dtype=np.float64).astype(source))
    if values is None or (np.dtype(source).kind == "f" and np.dtype(target).kind != "f"):
        values = np.zeros(3, dtype=source)  # float -> int is refused before any value is read
    destination = np.zeros(3, dtype=target)
    refused = numpy_answer(lambda: np.copyto(destination, values, casting="same_kind") or 1) is None
    ours = Tensor.zeros([3], target)
    outcome = ours_or_error(lambda: lt.copyto(ours.view(), Tensor.from_numpy(values)))  # type: ignore[arg-type,func-returns-value]
    if refused:
        assert isinstance(outcome, lt.DTypeError), outcome
    else:
        assert outcome is None
        assert_same(ours, destination)


# -- constructors and storage writes -------------------------------------------------------


def _float_has_no_integer(number: object, dtype: str) -> bool:
    """llmfs's own rule (NumPy would write an arbitrary number): a float into an integer dtype
    must be finite and within the range after truncation."""
    if np.dtype(dtype).kind not in "iu" or np.asarray(number).dtype.kind != "f":
        return False
    low, high = INTEGER_RANGES[np.dtype(dtype)]
    return not low - 1 < float(number) < high + 1  # type: ignore[arg-type]


#: Constructors that take the number inside a list: a sequence is Python data, so its integers
#: are range-checked even when they are NumPy scalars (a NumPy scalar alone wraps, as in NumPy).
LISTED = ("from_vec", "from_numpy")


def _integer_out_of_range(number: object, dtype: str | None) -> bool:
    if dtype is None or np.dtype(dtype).kind not in "iu" or not isinstance(number, np.integer):
        return False
    low, high = INTEGER_RANGES[np.dtype(dtype)]
    return not low <= int(number) <= high


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*SUPPORTED_DTYPES, None]), numbers)
def test_constructors_and_storage_writes_take_a_number_as_numpy_does(
    dtype: str | None, number: Any
) -> None:
    theirs = numpy_answer(lambda: np.array(number, dtype=dtype))
    if theirs is not None and dtype is None and theirs.dtype.kind in "iu":
        # Imported integers: the narrowest signed storage dtype (int8, uint8 -> int32).
        if theirs.dtype.itemsize < 8 or theirs.dtype.kind == "i":
            small = theirs.dtype.itemsize < 4 or (
                theirs.dtype.itemsize == 4 and theirs.dtype.kind == "i"
            )
            theirs = theirs.astype(np.int32 if small else np.int64)
    if dtype is None and theirs is not None and theirs.dtype.name not in SUPPORTED_DTYPES:
        theirs = None  # uint64 or an object array of a huge int: no dtype llmfs stores
    if dtype is not None and _float_has_no_integer(number, dtype):
        theirs = None
    written = Tensor.zeros([2], dtype or "float64")
    for name, call in {
        "full": lambda: Tensor.full([2], number, dtype or "float64"),
        "from_vec": lambda: Tensor.from_vec([2], [number, number], dtype),
        "from_numpy": lambda: Tensor.from_numpy([[number], [number]], dtype),
        "storage write": lambda: (written.as_mut_slice().__setitem__(slice(None), number), written)[
            1
        ],
    }.items():
        if dtype is None and name in ("full", "storage write"):
            continue
        ours = ours_or_error(call)
        if theirs is None or (name in LISTED and _integer_out_of_range(number, dtype)):
            assert isinstance(ours, TensorError), (name, number, ours)
        else:
            assert isinstance(ours, Tensor), (name, number, ours)
            expected = np.full(ours.shape, theirs, dtype=theirs.dtype)
            assert_same(ours, expected)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(FLOATS),
    st.sampled_from(INTEGERS),
    st.lists(st.floats(width=64), min_size=1, max_size=5),
    st.booleans(),
)
def test_a_float_converts_to_an_integer_only_when_finite_and_in_range(
    source: str, target: str, raw: list[float], broadcast: bool
) -> None:
    # The rule for every float and integer dtype, compared exactly: float16's -2**31 is -inf.
    with np.errstate(all="ignore"):
        values = np.array(raw, dtype=source)
    if broadcast:
        values = np.broadcast_to(values[:1], (len(raw), 3))
    low, high = INTEGER_RANGES[np.dtype(target)]
    convertible = all(low - 1 < float(v) < high + 1 for v in values.flat)
    tensor = Tensor.from_numpy(values)
    if convertible:
        with np.errstate(all="ignore"):
            expected = values.astype(target)
        check_integer_cast(values, np.dtype(target), where="test")
        assert_same(lt.astype(tensor, target), expected)
        assert_same(Tensor.from_numpy(values, dtype=target), expected)
    else:
        for call in (
            lambda: check_integer_cast(values, np.dtype(target), where="test"),
            lambda: lt.astype(tensor, target),
            lambda: Tensor.from_numpy(values, dtype=target),
            lambda: (
                Tensor.zeros([values.size], target)
                .as_mut_slice()
                .__setitem__(slice(None), values.reshape(-1))
            ),
        ):
            with pytest.raises(TensorError, match=f"has no {target} counterpart"):
                call()


@pytest.mark.parametrize("source", FLOATS)
@pytest.mark.parametrize("target", INTEGERS)
def test_the_float_bounds_are_exact_for_every_float_and_integer_dtype(
    source: str, target: str
) -> None:
    low, high = INTEGER_RANGES[np.dtype(target)]
    edges = [-np.inf, np.inf, np.nan, float(low), float(high), float(low) - 2**40, 2.0**64]
    with np.errstate(all="ignore"):
        values = np.array(edges, dtype=source)
    for value in values:
        expected_ok = bool(low - 1 < float(value) < high + 1)
        try:
            check_integer_cast(np.array([value]), np.dtype(target), where="edge")
            ok = True
        except TensorError:
            ok = False
        assert ok == expected_ok, (source, target, value)


def test_python_ints_are_range_checked_but_numpy_integers_wrap_as_in_numpy() -> None:
    # NumPy 2: np.array([2**40], dtype=np.int32) raises; np.array(np.array([2**40]), np.int32)
    # wraps (an astype). llmfs: the same.
    with pytest.raises(TensorError, match="does not fit int32"):
        Tensor.from_numpy([[2**40]], dtype="int32")
    wrapped = Tensor.from_numpy(np.array([2**40 + 5]), dtype="int32")
    assert wrapped.tolist() == np.array([2**40 + 5]).astype(np.int32).tolist() == [5]
    assert Tensor.from_vec([1], [2**64], dtype="float64").tolist() == [2.0**64]
    with pytest.raises(TensorError, match="too large for any float"):
        Tensor.from_vec([1], [2**1100], dtype="float64")
