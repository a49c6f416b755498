"""The reference backend: every primitive as plain Python loops over the offset cursor.

This backend exists to be read. It is slow on purpose (one Python step per value) and uses
nothing but the view's own metadata:

* ``view.logical_offsets()`` walks a view's storage offsets in logical row-major order (the
  offset cursor): a transposed view simply yields its offsets in a different order,
  a broadcast view (stride 0) yields the same offset again, a flipped view walks backwards;
* ``view.permute(...)`` and ``view[...]`` re-read the same storage in another order; no value is
  ever copied to make an input "nice".

Numbers are Python numbers of the compute type: floats (IEEE double) for float compute, ints for
int32/int64, bools for bool. When the compute precision is float32, every result is rounded to
float32 right after it is produced, so the backend computes what a float32 machine would; when it
is an integer type, every result wraps around to that many bits, as a machine integer (and NumPy)
does. Plain Python maths raises where IEEE arithmetic does not (``math.exp(1000)``,
``math.log(0)``, ``1 / 0``, ``math.sqrt(-1)``, ``0.0 ** -1``), so the functions below spell out
IEEE's answers.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from llmfs.tensor.backends.base import Backend
from llmfs.tensor.layout import Layout, element_count, reduced_shape
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.traversal import StridedOffsets
from llmfs.tensor.view import TensorView

# -- IEEE versions of the maths functions (NumPy's answers instead of Python's exceptions) ---------


def _exp(x: float) -> float:
    try:
        return math.exp(x)
    except OverflowError:  # the true value is too large to represent: IEEE says +inf
        return math.inf


def _log(x: float) -> float:
    if x == 0.0:
        return -math.inf
    if x < 0.0:
        return math.nan
    return math.log(x)  # NaN stays NaN, inf stays inf


def _sqrt(x: float) -> float:
    return math.nan if x < 0.0 else math.sqrt(x)  # sqrt(-0.0) is -0.0, as in IEEE


def _sin(x: float) -> float:
    return math.nan if math.isinf(x) else math.sin(x)


def _cos(x: float) -> float:
    return math.nan if math.isinf(x) else math.cos(x)


def _sigmoid(x: float) -> float:
    # Two forms, so that exp never overflows into inf/inf: 1/(1+e^-x) for x >= 0, e^x/(1+e^x) below.
    if x >= 0.0:
        return 1.0 / (1.0 + _exp(-x))
    e = _exp(x)  # also the NaN path: NaN >= 0 is False
    return e / (1.0 + e)


def _relu(x: float) -> float:
    return x if math.isnan(x) else max(x, 0.0)


def _div(a: float, b: float) -> float:
    if b == 0.0:  # also -0.0
        if a == 0.0 or math.isnan(a):
            return math.nan  # 0/0
        # +-inf, with the sign rule of multiplication (the zero's sign counts)
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _odd_integer(y: float) -> bool:
    return float(y).is_integer() and int(y) % 2 == 1


def _power(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        # Integer compute (the exponent is never negative here): exact modulo 2**64, which the
        # rounding step then wraps to the compute type's bits. pow with a modulus stays fast.
        return pow(a, b, 1 << 64)
    try:
        return math.pow(a, b)
    except OverflowError:  # too large: an infinity, negative for a negative base and odd power
        return -math.inf if a < 0.0 and _odd_integer(b) else math.inf
    except ValueError:
        if a == 0.0:  # zero to a negative power: an infinity, keeping -0.0's sign for odd powers
            return math.copysign(math.inf, a) if _odd_integer(b) else math.inf
        return math.nan  # a negative base to a non-integer power has no real value


def _floor_divide(a: Any, b: Any) -> Any:
    if b == 0:  # Python raises; NumPy gives 0 for integers and x / 0 (+-inf or NaN) for floats
        return 0 if isinstance(a, int) and isinstance(b, int) else _div(a, b)
    return a // b  # rounds towards -inf, as NumPy's floor_divide


def _remainder(a: Any, b: Any) -> Any:
    if b == 0:  # Python raises; NumPy gives 0 for integers and NaN for floats
        return 0 if isinstance(a, int) and isinstance(b, int) else math.nan
    return a % b  # the sign of the divisor, as NumPy's remainder


def _minimum(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return min(a, b)


def _maximum(a: float, b: float) -> float:
    if math.isnan(a) or math.isnan(b):
        return math.nan
    return max(a, b)


UNARY: dict[str, Callable[[float], float]] = {
    "neg": lambda x: -x,
    "abs": abs,
    "sqrt": _sqrt,
    "exp": _exp,
    "log": _log,
    "sin": _sin,
    "cos": _cos,
    "tanh": math.tanh,
    "sigmoid": _sigmoid,
    "relu": _relu,
    "reciprocal": lambda x: _div(1.0, x),
    "logical_not": operator.not_,
}

BINARY: dict[str, Callable[[float, float], float]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": _div,
    "minimum": _minimum,
    "maximum": _maximum,
    "power": _power,
    "floor_divide": _floor_divide,
    "remainder": _remainder,
}

#: Ops whose result is a bool, written as it is (never rounded to the compute type).
BOOL_BINARY: dict[str, Callable[[Any, Any], bool]] = {
    "equal": operator.eq,  # NaN compares unequal to everything, itself included
    "not_equal": operator.ne,
    "less": operator.lt,
    "less_equal": operator.le,
    "greater": operator.gt,
    "greater_equal": operator.ge,
    "logical_and": lambda a, b: a and b,  # operands are read as bools for these three
    "logical_or": lambda a, b: a or b,
    "logical_xor": operator.ne,
}


#: How each reduction combines its running value with the next one (``mean`` sums, then divides).
FOLD: dict[str, Callable[[Any, Any], Any]] = {
    "sum": BINARY["add"],
    "mean": BINARY["add"],
    "prod": BINARY["mul"],
    "max": _maximum,
    "min": _minimum,
    "any": lambda a, b: a or b,
    "all": lambda a, b: a and b,
}


def _rounding(compute: np.dtype) -> Callable[[Any], Any]:
    """The function that brings a Python result back into the compute type: rounds to float32,
    wraps an integer around to 32 or 64 bits (two's complement), or makes a bool."""
    compute = np.dtype(compute)
    if compute == np.float64:
        return float  # Python floats are already IEEE doubles
    if compute == np.float32:
        return lambda value: float(np.float32(value))
    if compute == np.bool_:
        return bool
    bits = 8 * compute.itemsize
    half = 1 << (bits - 1)
    return lambda value: (int(value) + half) % (1 << bits) - half


def _reader(compute: np.dtype) -> Callable[[Any], Any]:
    """How a stored value is read for compute: as a Python float, int or bool."""
    kind = np.dtype(compute).kind
    return {"f": float, "b": bool}.get(kind, int)


def _values(view: TensorView, compute: np.dtype | None = None) -> Iterator[Any]:
    """The view's values in logical row-major order, read through the offset cursor, as Python
    numbers of ``compute``'s kind (``None``: as stored)."""
    storage = view.owner.as_slice()
    read = _reader(compute) if compute is not None else lambda value: value.item()
    for offset in view.logical_offsets():
        yield read(storage[offset])


def _new_tensor(shape: tuple[int, ...], values: Iterator[Any], dtype: np.dtype) -> Tensor:
    """Writes the values, in order, into a new row-major owner (rounding to ``dtype`` there)."""
    out = np.empty(element_count(shape), dtype=dtype)
    for index, value in enumerate(values):
        out[index] = value
    return Tensor._adopt(out, shape)


class ReferenceBackend(Backend):
    """Pure-Python loops over the offset cursor; the definition the fast backends must match."""

    name = "reference"
    dtypes = ("bool", "int32", "int64", "float16", "float32", "float64")
    fallback = None
    description = "pure Python over the offset cursor (slow, for reading)"

    def unary(self, op: str, x: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """``op`` applied to each value of ``x``."""
        function, rounded = UNARY[op], _rounding(compute)
        with np.errstate(all="ignore"):  # float16 stores may overflow to inf, as IEEE says
            return _new_tensor(x.shape, (rounded(function(v)) for v in _values(x, compute)), dtype)

    def binary(
        self, op: str, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype
    ) -> Tensor:
        """``op`` applied to each pair: both cursors walk the same logical order side by side."""
        pairs = zip(_values(a, compute), _values(b, compute))
        if op in BOOL_BINARY:  # compared in compute, written as bools
            test = BOOL_BINARY[op]
            return _new_tensor(a.shape, (test(p, q) for p, q in pairs), dtype)
        function, rounded = BINARY[op], _rounding(compute)
        with np.errstate(all="ignore"):
            return _new_tensor(a.shape, (rounded(function(p, q)) for p, q in pairs), dtype)

    def reduce(
        self,
        op: str,
        x: TensorView,
        axes: tuple[int, ...],
        *,
        dtype: np.dtype,
        compute: np.dtype,
    ) -> Tensor:
        """Moves the reduced axes to the end (a permuted VIEW, nothing copied); then the cursor
        yields each output's inputs as one consecutive group of ``group`` values."""
        kept = [axis for axis in range(x.rank) if axis not in axes]
        moved = x.permute(kept + list(axes))
        out_shape = reduced_shape(x.shape, axes)
        group = element_count([x.shape[axis] for axis in axes])
        rounded = _rounding(compute)
        combine = FOLD[op]
        values = _values(moved, compute)

        def fold() -> Any:
            acc = next(values)
            for value in itertools.islice(values, group - 1):
                acc = rounded(combine(acc, value))
            return rounded(acc / group) if op == "mean" else acc

        with np.errstate(all="ignore"):
            return _new_tensor(out_shape, (fold() for _ in range(element_count(out_shape))), dtype)

    def matmul(self, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """``out[..., i, j] = sum_k a[..., i, k] * b[..., k, j]``: for each output value, a row
        view of ``a`` and a column view of ``b`` walked side by side."""
        *batch_shape, rows, _ = a.shape
        columns = b.shape[-1]
        rounded = _rounding(compute)

        def dot(batch: tuple[int, ...], i: int, j: int) -> Any:
            row = a[(*batch, i)]  # shape (inner,): a view, nothing copied
            column = b[(*batch, slice(None), j)]
            acc = rounded(0)
            for p, q in zip(_values(row, compute), _values(column, compute)):
                acc = rounded(acc + rounded(p * q))
            return acc

        every_batch = itertools.product(*(range(size) for size in batch_shape))
        values = (
            dot(batch, i, j) for batch in every_batch for i in range(rows) for j in range(columns)
        )
        with np.errstate(all="ignore"):
            return _new_tensor((*batch_shape, rows, columns), values, dtype)

    def copy(self, x: TensorView, *, dtype: np.dtype) -> Tensor:
        """The values in logical order, one cursor step at a time, converted to ``dtype`` as
        NumPy's ``astype`` does: floats to integers truncate towards zero, integers wrap around to
        a narrower integer dtype, anything non-zero is True, floats round to the nearest."""
        kind = np.dtype(dtype).kind
        convert = _rounding(dtype) if kind in "biu" else (lambda value: value)
        with np.errstate(all="ignore"):
            return _new_tensor(x.shape, (convert(v) for v in _values(x)), dtype)

    def where(self, cond: TensorView, a: TensorView, b: TensorView, *, dtype: np.dtype) -> Tensor:
        """Three cursors walk side by side; each step keeps ``a``'s value when ``cond``'s is
        non-zero, else ``b``'s."""
        triples = zip(_values(cond, np.dtype(np.bool_)), _values(a), _values(b))
        return _new_tensor(a.shape, (p if c else q for c, p, q in triples), dtype)

    def take(self, x: TensorView, ids: TensorView, axis: int, *, dtype: np.dtype) -> Tensor:
        """For each index of the axes before ``axis`` and each id (in the ids' logical order),
        the values of the sub-view ``x[..., id, ...]``: a view, read through its cursor."""
        size = x.shape[axis]
        id_values = list(_values(ids))
        outer = itertools.product(*(range(n) for n in x.shape[:axis]))

        def values() -> Iterator[Any]:
            for prefix in outer:
                for index in id_values:
                    yield from _values(x[(*prefix, index + size if index < 0 else index)])

        shape = (*x.shape[:axis], *ids.shape, *x.shape[axis + 1 :])
        return _new_tensor(shape, values(), dtype)

    def scatter_add(self, buffer: np.ndarray, layout: Layout, grad: np.ndarray) -> None:
        """The view rule as written: the offset cursor walks the layout in logical order, and
        each coordinate's gradient is added into the cell it reads (a cell read twice gets
        both)."""
        for offset, value in zip(StridedOffsets(layout, buffer.size), grad.reshape(-1)):
            buffer[offset] += value
