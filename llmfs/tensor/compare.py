"""Whole-tensor questions: ``array_equal``, ``isclose``, ``allclose`` (NumPy's).

Each is written with the elementwise ops and reductions of :mod:`llmfs.tensor.ops`, so it runs on
every backend and needs no rule of its own; ``array_equal`` and ``allclose`` answer with a Python
bool, ``isclose`` with a bool tensor.
"""

from __future__ import annotations

from llmfs.tensor.dtypes import is_float
from llmfs.tensor.errors import TensorError
from llmfs.tensor.ops import (
    Operand,
    Scalar,
    abs,
    add,
    all,
    as_view,
    astype,
    broadcast_operands,
    equal,
    is_scalar,
    less_equal,
    logical_and,
    logical_or,
    mul,
    not_equal,
    sub,
)
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView


def array_equal(a: Operand, b: Operand, *, equal_nan: bool = False) -> bool:
    """True when ``a`` and ``b`` have the same shape and equal values (NumPy's
    ``array_equal``; no broadcasting). NaN equals NaN only with ``equal_nan=True``. The
    elementwise question is :func:`equal` (``a == b``), which returns a bool tensor."""
    left, right = as_view(a, what="array_equal's operand"), as_view(b, what="array_equal's operand")
    if left.shape != right.shape:
        return False
    same = equal(left, right)
    if equal_nan:
        same = logical_or(same, logical_and(not_equal(left, left), not_equal(right, right)))
    return bool(all(same).get(()))


def _as_float(view: TensorView) -> TensorView:
    return view if is_float(view.dtype) else astype(view, "float64").view()


def isclose(
    a: Operand | Scalar,
    b: Operand | Scalar,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    *,
    equal_nan: bool = False,
) -> Tensor:
    """NumPy's ``isclose``, value by value with broadcasting: ``|a - b| <= atol + rtol * |b|``
    (not symmetric: ``b`` is the reference), infinities close only to themselves, NaN close to
    NaN only with ``equal_nan=True``. Integer and bool operands are compared as float64.

    Raises :class:`TensorError` when ``rtol`` or ``atol`` is not a real number.
    """
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not is_scalar(tol):
            raise TensorError(f"isclose's {name} must be a real number, got {type(tol).__name__}")
    floats = [
        v if is_scalar(v) else _as_float(as_view(v, what="isclose's operand")) for v in (a, b)
    ]
    x, y = broadcast_operands(*floats, what="isclose's operand")
    within = less_equal(abs(sub(x, y)), add(mul(abs(y), rtol), atol))
    # v - v is 0 exactly for finite v (NaN for infinities and NaN): an infinite reference would
    # otherwise make every tolerance infinite. Infinities are close only to themselves.
    finite = logical_and(equal(sub(x, x), 0), equal(sub(y, y), 0))
    close = logical_or(logical_and(within, finite), equal(x, y))
    if equal_nan:
        close = logical_or(close, logical_and(not_equal(x, x), not_equal(y, y)))
    return close


def allclose(
    a: Operand | Scalar,
    b: Operand | Scalar,
    rtol: float = 1e-05,
    atol: float = 1e-08,
    *,
    equal_nan: bool = False,
) -> bool:
    """True when every pair is close by :func:`isclose` (NumPy's ``allclose``), after
    broadcasting. Raises :class:`BroadcastError` when the shapes do not broadcast."""
    return bool(all(isclose(a, b, rtol, atol, equal_nan=equal_nan)).get(()))


__all__ = ["allclose", "array_equal", "isclose"]
