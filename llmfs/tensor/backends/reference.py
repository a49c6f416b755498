"""The reference backend: every primitive as plain Python loops over the offset cursor.

This backend exists to be read. It is slow on purpose (one Python step per value) and uses
nothing but the view's own metadata:

* ``view.logical_offsets()`` walks a view's storage offsets in logical row-major order (the
  offset cursor): a transposed view simply yields its offsets in a different order,
  a broadcast view (stride 0) yields the same offset again, a flipped view walks backwards;
* ``view.permute(...)`` and ``view[...]`` re-read the same storage in another order; no value is
  ever copied to make an input "nice".

Numbers are Python floats (IEEE double). When the compute precision is float32, every result is
rounded to float32 right after it is produced, so the backend computes what a float32 machine
would. Plain Python maths raises where IEEE arithmetic does not (``math.exp(1000)``,
``math.log(0)``, ``1 / 0``, ``math.sqrt(-1)``), so the functions below spell out IEEE's answers.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator

import numpy as np

from llmfs.tensor.backends.base import Backend
from llmfs.tensor.layout import element_count, reduced_shape
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView

# --------------------------------------------------------------------------------------------
# IEEE versions of the maths functions (NumPy's answers instead of Python's exceptions)
# --------------------------------------------------------------------------------------------


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
}

BINARY: dict[str, Callable[[float, float], float]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": _div,
    "minimum": _minimum,
    "maximum": _maximum,
}


#: How each reduction combines its running value with the next one (``mean`` sums, then divides).
FOLD: dict[str, Callable[[float, float], float]] = {
    "sum": BINARY["add"],
    "mean": BINARY["add"],
    "prod": BINARY["mul"],
    "max": _maximum,
    "min": _minimum,
}


def _rounding(compute: np.dtype) -> Callable[[float], float]:
    """The function that rounds a Python float to the compute precision."""
    if np.dtype(compute) == np.float64:
        return float  # Python floats are already IEEE doubles
    return lambda value: float(np.float32(value))


def _values(view: TensorView) -> Iterator[float]:
    """The view's values in logical row-major order, read through the offset cursor."""
    storage = view.owner.as_slice()
    for offset in view.logical_offsets():
        yield float(storage[offset])


def _new_tensor(shape: tuple[int, ...], values: Iterator[float], dtype: np.dtype) -> Tensor:
    """Writes the values, in order, into a new row-major owner (rounding to ``dtype`` there)."""
    out = np.empty(element_count(shape), dtype=dtype)
    for index, value in enumerate(values):
        out[index] = value
    return Tensor._adopt(out, shape)


class ReferenceBackend(Backend):
    """Pure-Python loops over the offset cursor; the definition the fast backends must match."""

    name = "reference"
    dtypes = ("float16", "float32", "float64")
    fallback = None
    description = "pure Python over the offset cursor (slow, for reading)"

    def unary(self, op: str, x: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """``op`` applied to each value of ``x``."""
        function, rounded = UNARY[op], _rounding(compute)
        with np.errstate(all="ignore"):  # float16 stores may overflow to inf, as IEEE says
            return _new_tensor(x.shape, (rounded(function(v)) for v in _values(x)), dtype)

    def binary(
        self, op: str, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype
    ) -> Tensor:
        """``op`` applied to each pair: both cursors walk the same logical order side by side."""
        function, rounded = BINARY[op], _rounding(compute)
        pairs = zip(_values(a), _values(b))
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
        values = _values(moved)

        def fold() -> float:
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

        def dot(batch: tuple[int, ...], i: int, j: int) -> float:
            row = a[(*batch, i)]  # shape (inner,): a view, nothing copied
            column = b[(*batch, slice(None), j)]
            acc = 0.0
            for p, q in zip(_values(row), _values(column)):
                acc = rounded(acc + rounded(p * q))
            return acc

        every_batch = itertools.product(*(range(size) for size in batch_shape))
        values = (
            dot(batch, i, j) for batch in every_batch for i in range(rows) for j in range(columns)
        )
        with np.errstate(all="ignore"):
            return _new_tensor((*batch_shape, rows, columns), values, dtype)

    def copy(self, x: TensorView, *, dtype: np.dtype) -> Tensor:
        """The values in logical order, one cursor step at a time."""
        with np.errstate(all="ignore"):
            return _new_tensor(x.shape, _values(x), dtype)
