"""Every hostile input found by probing the public API is a clear TensorError with the numbers.

One row per input: what is called, the error class it must raise, and a pattern its message
must match (the numbers included). NumPy's own ValueError/MemoryError, a bare TypeError or a
silently wrong value would all fail a row.
"""

from __future__ import annotations

import copy
import pickle
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.tensor import Tensor, TensorError, ops
from llmfs.tensor import backends as registry
from llmfs.tensor.backends.metal import (
    KernelArgumentError,
    emulator_available,
    is_available,
    run_kernel,
)
from llmfs.tensor.layout import MAX_RANK
from llmfs.tensor.strided import allocating
from tests.requirements import require_tool

TWO_62 = 2**62  # 4611686018427387904
TWO_40 = 2**40  # 1099511627776


def _view() -> lt.TensorView:
    return Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22]).view()


def _write_storage(key: object) -> None:
    Tensor.arange(3).as_mut_slice()[key] = 5.0


def _add_in_place(array: np.ndarray) -> None:
    array += 1


def _use_exploding_backend() -> None:
    def loader() -> lt.Backend:
        raise RuntimeError("the driver crashed")

    registry.register_backend("exploding", loader)
    try:
        with lt.use_backend("exploding"):
            pass
    finally:
        registry._loaders.pop("exploding", None)
        registry._refused.pop("exploding", None)


def _use_backend_whose_loader_returns_a_number() -> None:
    registry.register_backend("returns-3", lambda: 3)  # type: ignore[arg-type,return-value]
    try:
        lt.available_backends()  # listing still works: only this backend is refused
        lt.get_backend("returns-3")
    finally:
        registry._loaders.pop("returns-3", None)
        registry._refused.pop("returns-3", None)


def _copyto_number(dtype: str, number: object) -> None:
    lt.copyto(Tensor.zeros([2], dtype).view(), number)  # type: ignore[arg-type]


def _huge_view() -> lt.TensorView:
    """A valid layout over 2**65 bytes: 2**62 float64 values, all reading one stored value."""
    return lt.as_strided(Tensor.zeros([2]), [TWO_62], [0])


def _true_2_40() -> lt.TensorView:
    return Tensor.full([1], True, "bool").expand([TWO_40])


RANK_65 = "rank 65 is above the limit of 64 axes"
INT32_RANGE = r"does not fit int32 \(its range is -2147483648 to 2147483647\)"
TOO_BIG = (
    rf"would read {TWO_62} values of float64 \({TWO_62 * 8} bytes\) from one view, but NumPy "
    r"arrays hold at most 9223372036854775807 bytes: only a broadcast"
)
BOOLS_2_40 = rf"would read {TWO_40} values of bool \({TWO_40} bytes\) from one view, but"
TWO_62_VALUES = rf"cannot allocate {TWO_62} values of float64 \({TWO_62 * 8} bytes"
READ_ONLY = r"read-only export of a tensor's storage .*: write through tensor\.as_mut_slice\(\)"

# (id, call, error class, pattern the message must match)
ROWS: list[tuple[str, Callable[[], Any], type[TensorError], str]] = [
    # Allocations NumPy cannot make: the element count and the bytes, never NumPy's error.
    (
        "arange-2**62",
        lambda: Tensor.arange(TWO_62),
        lt.AllocationError,
        TWO_62_VALUES.replace("float64", "int64"),
    ),
    (
        "zeros-2**31x2**31",
        lambda: Tensor.zeros([2**31, 2**31]),
        lt.AllocationError,
        TWO_62_VALUES + r".*NumPy arrays hold at most 9223372036854775807 bytes",
    ),
    (
        "zeros-2**40",
        lambda: Tensor.zeros([TWO_40]),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64 \({TWO_40 * 8} bytes, 8\.00 TiB\)",
    ),
    (
        "full-2**40-float32",
        lambda: Tensor.full([TWO_40], 1.0, dtype="float32"),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float32 \({TWO_40 * 4} bytes, 4\.00 TiB\)",
    ),
    (
        "mul-of-an-expanded-2**62",
        lambda: ops.mul(Tensor.zeros([1]).expand([TWO_62]), 1.0),
        lt.AllocationError,
        TWO_62_VALUES,
    ),
    (
        "exp-of-an-expanded-2**40",
        lambda: ops.exp(Tensor.zeros([1]).expand([TWO_40])),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64",
    ),
    (
        "materialize-an-expanded-2**40",
        lambda: Tensor.zeros([1]).expand([TWO_40]).materialize(),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64",
    ),
    (
        "sum-keeping-an-expanded-2**40",
        lambda: ops.sum(Tensor.zeros([1, 1]).expand([TWO_40, 2]), 1),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64",
    ),
    (
        "matmul-with-a-2**40-result",
        lambda: ops.matmul(
            Tensor.zeros([1, 1]).expand([TWO_40, 1]), Tensor.zeros([1, 1]).expand([1, 2])
        ),
        lt.AllocationError,
        rf"cannot allocate {TWO_40 * 2} values of float64",
    ),
    (
        "einsum-outer-product-of-2**40",
        lambda: lt.einsum("i,j->ij", Tensor.zeros([1]).expand([TWO_40]), Tensor.zeros([2])),
        lt.AllocationError,
        rf"cannot allocate {TWO_40 * 2} values of float64",
    ),
    (
        "from-numpy-of-a-broadcast-2**40",
        lambda: Tensor.from_numpy(np.broadcast_to(np.zeros(1), (TWO_40,))),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64",
    ),
    (
        "tolist-of-an-expanded-2**40",
        lambda: Tensor.zeros([1]).expand([TWO_40]).tolist(),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64",
    ),
    (
        "to-numpy-of-an-expanded-2**40",
        lambda: np.asarray(Tensor.zeros([1], dtype="float16").expand([TWO_40])),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float16 \({TWO_40 * 2} bytes, 2\.00 TiB\)",
    ),
    # Rank above NumPy's limit: refused where the layout is made, never later in NumPy.
    ("zeros-rank-65", lambda: Tensor.zeros([1] * 65), lt.InvalidShapeError, RANK_65),
    ("from-vec-rank-65", lambda: Tensor.from_vec([1] * 65, [1.0]), lt.InvalidShapeError, RANK_65),
    (
        "reshape-to-rank-65",
        lambda: Tensor.zeros([1]).reshape([1] * 65),
        lt.InvalidShapeError,
        RANK_65,
    ),
    (
        "unsqueeze-to-rank-65",
        lambda: Tensor.zeros([1] * 64).unsqueeze(0),
        lt.InvalidShapeError,
        RANK_65,
    ),
    (
        "none-indices-to-rank-65",
        lambda: Tensor.zeros([1] * 60)[(None,) * 5],
        lt.InvalidShapeError,
        RANK_65,
    ),
    (
        "split-to-rank-65",
        lambda: Tensor.zeros([1] * 64).split(0, [1, 1]),
        lt.InvalidShapeError,
        RANK_65,
    ),
    (
        "expand-to-rank-65",
        lambda: Tensor.zeros([1]).expand([1] * 65),
        lt.InvalidShapeError,
        RANK_65,
    ),
    (
        "as-strided-rank-65",
        lambda: lt.as_strided(Tensor.zeros([1]), [1] * 65, [1] * 65),
        lt.InvalidLayoutError,
        r"invalid layout \(rank <= 64\): " + RANK_65,
    ),
    (
        "row-major-strides-rank-65",
        lambda: lt.row_major_strides([1] * 65),
        lt.InvalidShapeError,
        RANK_65,
    ),
    # Not a list of layouts.
    (
        "can-view-as-contiguous-all-none",
        lambda: lt.can_view_as_contiguous_all(None),
        TensorError,
        r"can_view_as_contiguous_all takes a list of views or \(shape, strides\) pairs, "
        r"got NoneType None",
    ),
    (
        "can-view-as-contiguous-all-int",
        lambda: lt.can_view_as_contiguous_all(3),
        TensorError,
        r"takes a list of views .* got int 3",
    ),
    # Writes into read-only exports: our error, saying how to write.
    (
        "as-slice-item-write",
        lambda: Tensor.arange(3).as_slice().__setitem__(0, 1.0),
        TensorError,
        READ_ONLY,
    ),
    (
        "as-slice-in-place-add",
        lambda: _add_in_place(Tensor.arange(3).as_slice()),
        TensorError,
        READ_ONLY,
    ),
    ("as-slice-fill", lambda: Tensor.arange(3).as_slice().fill(0.0), TensorError, READ_ONLY),
    (
        "as-slice-part-write",
        lambda: Tensor.arange(3).as_slice()[1:].__setitem__(0, 1.0),
        TensorError,
        READ_ONLY,
    ),
    (
        "numpy-view-item-write",
        lambda: _view().transpose(0, 1).numpy_view().__setitem__((0, 0), 1.0),
        TensorError,
        READ_ONLY,
    ),
    # A backend loader's own exception: the backend is unavailable, naming it and the cause.
    (
        "backend-loader-raises",
        _use_exploding_backend,
        lt.BackendUnavailableError,
        r"backend 'exploding' is not available: its loader raised RuntimeError: the driver "
        r"crashed \(available: reference, numpy",
    ),
    # Shapes that are not sequences: a dict (only its keys) or a set (no order).
    (
        "zeros-of-a-dict",
        lambda: Tensor.zeros({2: 3}),
        lt.InvalidShapeError,
        r"invalid shape \{2: 3\}: expected a sequence of integers \(a list or tuple\), "
        r"got dict \{2: 3\}",
    ),
    ("zeros-of-a-set", lambda: Tensor.zeros({2, 3}), lt.InvalidShapeError, r"got set \{2, 3\}"),
    (
        "zeros-of-a-frozenset",
        lambda: Tensor.zeros(frozenset({2})),
        lt.InvalidShapeError,
        r"got frozenset",
    ),
    (
        "reshape-to-a-set",
        lambda: Tensor.zeros([6]).reshape({2, 3}),
        lt.InvalidShapeError,
        "got set",
    ),
    ("zeros-of-a-string", lambda: Tensor.zeros("23"), lt.InvalidShapeError, r"got str '23'"),
    ("permute-by-a-set", lambda: _view().permute({1, 0}), lt.InvalidArgumentError, r"\{0, 1\}"),
    # Bool keys into storage handles: True is not index 1.
    (
        "storage-key-true",
        lambda: _write_storage(True),
        lt.InvalidIndexError,
        r"storage handles take an int or a slice, not the bool True \(a bool would select "
        r"element 1\)",
    ),
    ("storage-key-numpy-true", lambda: _write_storage(np.True_), lt.InvalidIndexError, "bool True"),
    (
        "storage-read-false",
        lambda: Tensor.arange(3).as_mut_slice()[False],
        lt.InvalidIndexError,
        "bool False",
    ),
    # Overflow is checked by every predicate, not only by constructors.
    (
        "broadcast-shapes-2**40-by-2**40",
        lambda: lt.broadcast_shapes([TWO_40, 1], [1, TWO_40]),
        lt.ShapeOverflowError,
        rf"shape \[{TWO_40}, {TWO_40}\] overflows: the product of the sizes \(a 0 counted as "
        rf"1\), {TWO_40**2}, exceeds the largest signed 64-bit index 9223372036854775807",
    ),
    (
        "add-broadcasting-to-2**80",
        lambda: ops.add(
            Tensor.zeros([1, 1]).expand([TWO_40, 1]), Tensor.zeros([1, 1]).expand([1, TWO_40])
        ),
        lt.ShapeOverflowError,
        rf"product of the sizes .*, {TWO_40**2}",
    ),
    (
        "can-view-as-contiguous-2**64",
        lambda: lt.can_view_as_contiguous([2**64], [1]),
        lt.ShapeOverflowError,
        rf"shape \[{2**64}\] overflows: the product of the sizes \(a 0 counted as 1\), {2**64}",
    ),
    (
        "is-contiguous-2**64",
        lambda: lt.is_contiguous([2**64], [1]),
        lt.ShapeOverflowError,
        str(2**64),
    ),
    (
        "can-view-as-contiguous-all-2**64",
        lambda: lt.can_view_as_contiguous_all([([2**64], [1])]),
        lt.ShapeOverflowError,
        str(2**64),
    ),
    (
        "is-contiguous-stride-2**63",
        lambda: lt.is_contiguous([2], [2**63]),
        lt.ShapeOverflowError,
        rf"stride {2**63} of axis 0",
    ),
    (
        "is-contiguous-offsets-past-2**63",
        lambda: lt.is_contiguous([3], [TWO_62]),
        lt.ShapeOverflowError,
        rf"the reachable offset range \(0, {2 * TWO_62}\)",
    ),
    # One stride limit: a step may not make a stride that as_strided would refuse.
    (
        "strict-slice-step-2**70",
        lambda: _view().slice(1, 0, 3, 2**70),
        lt.ShapeOverflowError,
        rf"the stride of axis 1 after a step of {2**70} \(1 \* {2**70} = {2**70}\)",
    ),
    (
        "python-slice-step-2**70",
        lambda: _view()[:, :: 2**70],
        lt.ShapeOverflowError,
        rf"after a step of {2**70}",
    ),
    (
        "python-slice-step-minus-2**70",
        lambda: _view()[:, :: -(2**70)],
        lt.ShapeOverflowError,
        rf"after a step of {-(2**70)}",
    ),
    (
        "as-strided-stride-2**70",
        lambda: lt.as_strided(Tensor.arange(3), [1], [2**70]),
        lt.InvalidLayoutError,
        rf"stride {2**70} of axis 0 does not fit in 64 bits",
    ),
    # A storage length below 0 is refused, even for a layout that reaches nothing.
    (
        "validate-storage-length-minus-1",
        lambda: lt.validate([2], [1], 0, -1),
        lt.InvalidLayoutError,
        r"invalid layout \(storage length >= 0\): the storage length -1 is negative",
    ),
    (
        "validate-empty-layout-storage-length-minus-1",
        lambda: lt.validate([0], [1], 0, -1),
        lt.InvalidLayoutError,
        "storage length -1 is negative",
    ),
    (
        "validate-scalar-storage-length-minus-5",
        lambda: lt.validate([], [], 0, -5),
        lt.InvalidLayoutError,
        "storage length -5 is negative",
    ),
    # Messages give the axis's real size.
    (
        "strict-slice-negative-start",
        lambda: _view().slice(1, -2, 3),
        lt.NegativeSliceBoundError,
        r"slice start -2 is out of bounds for axis 1 of size 3 \(a strict slice needs "
        r"0 <= slice start <= 3",
    ),
    (
        "strict-slice-negative-stop",
        lambda: _view().slice(0, 0, -1),
        lt.NegativeSliceBoundError,
        r"slice stop -1 is out of bounds for axis 0 of size 2 \(a strict slice needs "
        r"0 <= slice stop <= 2",
    ),
    # A float converts to an integer only when finite and in range, compared exactly: float16's
    # own -2**31 is -inf, so a comparison in float16 let -inf through.
    (
        "astype-float16-minus-inf-to-int32",
        lambda: ops.astype(Tensor.from_vec([1], [-np.inf], dtype="float16"), "int32"),
        TensorError,
        r"astype\(int32\): the value -inf has no int32 counterpart",
    ),
    (
        "astype-float16-inf-to-int64",
        lambda: ops.astype(Tensor.from_vec([2], [1.0, np.inf], dtype="float16"), "int64"),
        TensorError,
        r"the value inf has no int64 counterpart",
    ),
    # Python ints enter storage only when they fit (NumPy 2 refuses them with OverflowError).
    (
        "from-vec-2**40-into-int32",
        lambda: Tensor.from_vec([1], [TWO_40], dtype="int32"),
        TensorError,
        rf"from_vec: the integer {TWO_40} " + INT32_RANGE,
    ),
    (
        "full-2**40-int32",
        lambda: Tensor.full([2], TWO_40, "int32"),
        TensorError,
        rf"full: the integer {TWO_40} " + INT32_RANGE,
    ),
    (
        "storage-write-2**40-into-int32",
        lambda: Tensor.zeros([2], "int32").as_mut_slice().__setitem__(0, TWO_40),
        TensorError,
        rf"writing to storage: the integer {TWO_40} " + INT32_RANGE,
    ),
    (
        "from-numpy-nested-2**64-into-int64",
        lambda: Tensor.from_numpy([[1], [2**64]], dtype="int64"),
        TensorError,
        rf"the integer {2**64} does not fit in 64 bits",
    ),
    (
        "arange-past-int32",
        lambda: Tensor.arange(2**31 + 1, "int32"),
        TensorError,
        rf"arange\({2**31 + 1}\): the integer {2**31} " + INT32_RANGE,
    ),
    (
        "arange-3-bool",
        lambda: Tensor.arange(3, dtype="bool"),
        lt.DTypeError,
        r"unsupported dtype bool for arange\(3\) \(bool holds only 0 and 1",
    ),
    # copyto casts numbers same-kind, as np.copyto(casting="same_kind"): by their Python type.
    (
        "copyto-python-int-into-bool",
        lambda: _copyto_number("bool", 2),
        lt.DTypeError,
        r"unsupported dtype a Python int for copyto into bool storage \(same-kind casting\); "
        r"supported: bool$",
    ),
    (
        "copyto-python-float-into-int32",
        lambda: _copyto_number("int32", 3.0),
        lt.DTypeError,
        r"a Python float for copyto into int32 storage .*; supported: bool, int32, int64$",
    ),
    (
        "copyto-python-int-2**40-into-int32",
        lambda: _copyto_number("int32", TWO_40),
        TensorError,
        rf"the integer {TWO_40} " + INT32_RANGE,
    ),
    # Numbers are what NumPy takes as numbers; anything else is our error, not NumPy's.
    (
        "add-a-fraction",
        lambda: ops.add(Tensor.zeros([2]), Fraction(1, 3)),
        TensorError,
        r"add's operand must be a Tensor, a TensorView or a real number, got Fraction "
        r"Fraction\(1, 3\) \(numbers are bool, int and float, or NumPy scalars of those kinds\)",
    ),
    ("mul-by-a-complex", lambda: ops.mul(Tensor.zeros([2]), 2j), TensorError, r"got complex 2j"),
    (
        "equal-to-a-fraction",
        lambda: Tensor.zeros([2]) == Fraction(1, 2),
        TensorError,
        r"equal's operand .* got Fraction Fraction\(1, 2\)",
    ),
    ("equal-to-a-complex", lambda: Tensor.zeros([2]) != 1j, TensorError, r"got complex 1j"),
    (
        "einsum-with-a-fraction",
        lambda: lt.einsum("i,->i", Tensor.zeros([2]), Fraction(1, 2)),
        TensorError,
        r"einsum operand must be a Tensor, a TensorView or a real number, got Fraction",
    ),
    (
        "where-of-a-numpy-string",
        lambda: ops.where(Tensor.zeros([2]), np.str_("a"), 1.0),
        TensorError,
        r"got str_ np\.str_\('a'\)",
    ),
    # The allocation guard on every result, where and take included.
    (
        "where-on-a-2**40-broadcast",
        lambda: ops.where(_true_2_40(), 1.0, 2.0),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64",
    ),
    (
        "take-with-2**40-broadcast-ids",
        lambda: ops.take(Tensor.zeros([3]), Tensor.zeros([1], "int64").expand([TWO_40])),
        lt.AllocationError,
        rf"cannot allocate {TWO_40} values of float64",
    ),
    # Views over 2**63 bytes are valid layouts; NumPy cannot describe them: our error.
    (
        "numpy-view-over-2**63-bytes",
        lambda: _huge_view().numpy_view(),
        lt.ViewTooLargeError,
        TOO_BIG,
    ),
    ("sum-over-2**63-bytes", lambda: ops.sum(_huge_view()), lt.ViewTooLargeError, TOO_BIG),
    ("max-over-2**63-bytes", lambda: ops.max(_huge_view()), lt.ViewTooLargeError, TOO_BIG),
    ("any-over-2**63-bytes", lambda: ops.any(_huge_view()), lt.ViewTooLargeError, TOO_BIG),
    (
        "einsum-over-2**63-bytes",
        lambda: lt.einsum("i->", _huge_view()),
        lt.ViewTooLargeError,
        r"einsum 'i->' " + TOO_BIG,
    ),
    (
        "take-from-2**63-bytes",
        lambda: ops.take(_huge_view(), Tensor.from_vec([1], [0])),
        lt.ViewTooLargeError,
        TOO_BIG,
    ),
    (
        "reduce-over-2**63-bytes",
        lambda: ops.reduce(_huge_view(), "i", "", "max"),
        lt.ViewTooLargeError,
        TOO_BIG,
    ),
    # The work limit: an op never reads more values than memory holds (it would run for hours).
    (
        "sum-of-a-2**40-bool-broadcast",
        lambda: ops.sum(_true_2_40()),
        lt.ViewTooLargeError,
        r"sum over axes \[0\] " + BOOLS_2_40,
    ),
    (
        "matmul-over-a-2**40-inner-axis",
        lambda: ops.matmul(
            Tensor.zeros([1, 1], "bool").expand([1, TWO_40]),
            Tensor.zeros([1, 1], "bool").expand([TWO_40, 1]),
        ),
        lt.ViewTooLargeError,
        r"matmul " + BOOLS_2_40,
    ),
    (
        "einsum-dot-of-2**40-broadcasts",
        lambda: lt.einsum("i,i->", _true_2_40(), _true_2_40()),
        lt.ViewTooLargeError,
        r"einsum 'i,i->' " + BOOLS_2_40,
    ),
    # One loader's failure, whatever it is, refuses that backend alone.
    (
        "backend-loader-returns-a-number",
        _use_backend_whose_loader_returns_a_number,
        lt.BackendUnavailableError,
        r"backend 'returns-3' is not available: its loader returned int, not a Backend "
        r"\(available: reference, numpy",
    ),
    # get takes a coordinate; None is not one (storage_offset(None) is PyTorch's first offset).
    (
        "get-none",
        lambda: Tensor.arange(3).get(None),  # type: ignore[arg-type]
        lt.InvalidArgumentError,
        r"indices must be integers \(one or a sequence of them\), got None",
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "pattern"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS]
)
def test_bad_input_is_a_clear_tensor_error(
    call: Callable[[], Any], error: type[TensorError], pattern: str
) -> None:
    assert issubclass(error, TensorError)
    with pytest.raises(error) as info:
        call()
    assert re.search(pattern, str(info.value)), f"{str(info.value)!r} does not match {pattern!r}"


@pytest.mark.parametrize("coordinate", [None, "0", 1.0, [0.5], {0}, [True], (), [0, 0]], ids=repr)
@pytest.mark.parametrize("reader", ["get", "item", "storage_offset-of-a-view"])
def test_a_value_is_read_only_at_a_coordinate_of_integers(coordinate: object, reader: str) -> None:
    # The rule behind get(None): every component is an exact integer and there is one per axis
    # (storage_offset() with no argument is PyTorch's first offset; None is not a coordinate).
    view = Tensor.arange(3).view()
    read = {
        "get": lambda: view.get(coordinate),  # type: ignore[arg-type]
        "item": lambda: view.item(coordinate),  # type: ignore[arg-type]
        "storage_offset-of-a-view": lambda: view.layout.storage_offset(coordinate),
    }[reader]
    with pytest.raises((lt.InvalidArgumentError, lt.RankMismatchError)):
        read()


def _pickled_in_a_window() -> Tensor:
    tensor = Tensor.arange(3)
    with tensor.mutate() as buffer:
        buffer[0] = 7
        restored: Tensor = pickle.loads(pickle.dumps(tensor))
    return restored


def _copied_then_written() -> list[Any]:
    tensor = Tensor.arange(3)
    old_view = tensor.view()
    duplicate = copy.copy(tensor)
    duplicate.as_mut_slice()[0] = 9  # NumPy's copy.copy copies: the original cannot change
    return [old_view.tolist(), duplicate.tolist(), old_view.is_stale]


# Inputs that used to give a wrong value: (id, call, the value NumPy 2's rules give).
VALUE_ROWS: list[tuple[str, Callable[[], Any], Any]] = [
    (
        "einsum-bools-times-a-python-float",
        lambda: lt.einsum("i,->i", Tensor.from_vec([2], [True, False]), 2.0).tolist(),
        [2.0, 0.0],
    ),
    (
        "einsum-python-float-times-int32",
        lambda: lt.einsum(",i->i", 2.5, Tensor.from_vec([2], [1, 2], dtype="int32")).tolist(),
        [2.5, 5.0],
    ),
    (
        "einsum-plan-bools-times-a-python-float",
        lambda: (
            lt.EinsumPlan("i,->i", Tensor.zeros([2], "bool"), 2.0)
            .execute(Tensor.from_vec([2], [True, False]), 3.0)
            .tolist()
        ),
        [3.0, 0.0],
    ),
    (
        "repr-of-a-view-over-2**63-bytes",
        lambda: repr(_huge_view()).splitlines()[0],
        f"TensorView(<{TWO_62} values of float64, more bytes than one NumPy array holds>)",
    ),
    ("copy-copy-copies-the-storage", _copied_then_written, [[0, 1, 2], [9, 1, 2], False]),
    (
        "unpickled-in-a-window-is-not-locked",
        lambda: (lambda t: (t.view().tolist(), t.mutate().__enter__() is not None))(
            _pickled_in_a_window()
        ),
        ([7, 1, 2], True),
    ),
]


@pytest.mark.parametrize(
    ("call", "expected"), [row[1:] for row in VALUE_ROWS], ids=[row[0] for row in VALUE_ROWS]
)
def test_an_input_that_gave_a_wrong_value_gives_numpys(
    call: Callable[[], Any], expected: Any
) -> None:
    assert call() == expected


def test_the_row_ids_are_unique() -> None:
    ids = [row[0] for row in ROWS + VALUE_ROWS]  # type: ignore[operator]
    assert len(ids) == len(set(ids))


def test_the_rank_limit_is_numpys() -> None:
    # Measured at run time: NumPy 2 makes arrays of up to MAX_RANK axes and refuses one more.
    assert np.empty((1,) * MAX_RANK, dtype=np.int8).ndim == MAX_RANK
    with pytest.raises(ValueError, match="maximum supported dimension"):
        np.empty((1,) * (MAX_RANK + 1), dtype=np.int8)


def test_rank_64_works_everywhere_the_rank_65_layouts_were_refused() -> None:
    tensor = Tensor.zeros([1] * 64)
    view = Tensor.zeros([1]).reshape([1] * 64)
    assert repr(tensor).startswith("Tensor(")  # printed through NumPy, which takes 64 axes
    assert np.array(view.tolist()).ndim == 64
    assert view.materialize().shape == (1,) * 64
    assert lt.exp(view).shape == (1,) * 64
    assert Tensor.zeros([1] * 63).unsqueeze(0).rank == 64


def test_a_memory_error_during_a_computation_names_the_array_that_failed() -> None:
    # NumPy's MemoryError carries the shape and dtype it could not allocate.
    failure = MemoryError("Unable to allocate 512. GiB for an array")
    failure.shape = (2**37,)  # type: ignore[attr-defined]
    failure.dtype = np.dtype("float32")  # type: ignore[attr-defined]
    with pytest.raises(lt.AllocationError) as info, allocating(4, np.float64):
        raise failure
    assert (info.value.count, info.value.nbytes) == (2**37, 2**39)
    assert "cannot allocate 137438953472 values of float32 (549755813888 bytes, 512.00 GiB)" in str(
        info.value
    )
    assert isinstance(info.value, MemoryError)  # `except MemoryError` still catches it


def test_one_shot_iterables_are_still_shapes() -> None:
    assert Tensor.zeros(size for size in [2, 3]).shape == (2, 3)
    assert Tensor.zeros(iter([4])).shape == (4,)
    assert lt.row_major_strides(range(2, 4)) == (3, 1)


def test_read_only_exports_still_behave_as_ndarrays() -> None:
    tensor = Tensor.arange(4)
    exported = tensor.as_slice()
    assert repr(exported) == "array([0, 1, 2, 3])"
    assert type(exported * 2) is np.ndarray and type(np.exp(exported)) is np.ndarray
    copied = exported.copy()
    copied[0] = 9.0  # a copy is the learner's own array, writable
    assert copied.tolist() == [9.0, 1.0, 2.0, 3.0] and tensor.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert np.asarray(exported).sum() == 6.0


# -- run_kernel's arguments -------------------------------------------------------------------

KERNEL = (
    "#include <metal_stdlib>\nusing namespace metal;\n"
    "kernel void k(device float* a [[buffer(0)]], uint i [[thread_position_in_grid]])"
    " { if (i < 8) a[i] = 1.0f; }\n"
)

# (id, call, error class, pattern, whether the kernel is compiled before the check)
KERNEL_ROWS: list[tuple[str, Callable[[], Any], type[TensorError], str, bool]] = [
    (
        "run-kernel-source-none",
        lambda: run_kernel(None, "k", [np.zeros(8, np.float32)], 8),  # type: ignore[arg-type]
        KernelArgumentError,
        r"source must be the kernel's MSL text \(a str\), got NoneType",
        False,
    ),
    (
        "run-kernel-buffers-none",
        lambda: run_kernel(KERNEL, "k", None, 8),  # type: ignore[arg-type]
        KernelArgumentError,
        r"buffers is None: pass a list of numpy arrays",
        False,
    ),
    (
        "run-kernel-buffer-named-by-a-string",
        lambda: run_kernel(KERNEL, "k", {"a": np.zeros(8, np.float32)}, 8),  # type: ignore[dict-item]
        KernelArgumentError,
        r"buffer keys are \[\[buffer\(n\)\]\] indices \(ints\), got 'a'",
        True,
    ),
]


@pytest.mark.parametrize(
    ("call", "error", "pattern", "compiles"),
    [row[1:] for row in KERNEL_ROWS],
    ids=[row[0] for row in KERNEL_ROWS],
)
def test_bad_run_kernel_arguments_are_clear_tensor_errors(
    call: Callable[[], Any], error: type[TensorError], pattern: str, compiles: bool
) -> None:
    if compiles and not is_available() and not emulator_available():
        require_tool("the Metal emulator needs a C++ compiler (clang++); none runs here")
    assert issubclass(error, TensorError)
    with pytest.raises(error) as info:
        call()
    assert re.search(pattern, str(info.value)), f"{str(info.value)!r} does not match {pattern!r}"
