"""Python operators for tensors and views, with NumPy's meaning, plus ``astype``.

* ``+ - * / // % ** @`` (and their reversed forms, so a number may stand on either side), unary
  ``-`` and ``abs()``: :func:`~llmfs.tensor.ops.add` and friends, with broadcasting.
* ``== != < <= > >=``: elementwise comparisons that return bool tensors, as in NumPy (so a
  tensor is not hashable: ``__hash__`` is ``None``, and ``in`` or dict lookups with tensors do
  not mean identity; compare with ``is``). The whole-tensor question "same shape and values?" is
  :func:`~llmfs.tensor.ops.array_equal`.
* ``& | ^ ~`` on bool tensors: logical and, or, xor, not (NumPy's bitwise ops restricted to
  bools; integer bit twiddling is not provided).

The arithmetic lives in :mod:`llmfs.tensor.ops` (which dispatches to the active backend); this
mixin only routes the operator syntax there, through ``above.ops`` (:mod:`llmfs.tensor.above`),
because ``ops`` is built on the core types that use this mixin.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from llmfs.tensor import above
from llmfs.tensor.errors import DTypeError


def _comparable(other: object) -> bool:
    """Whether ``==``/``!=`` should compare with ``other`` value by value (tensors, views,
    numbers, and NumPy arrays, which ops refuses with advice; a number llmfs does not take, such
    as a complex or a ``Fraction``, is refused by ops too rather than found silently unequal).
    For anything else (``None``, a string) Python's default applies: not equal."""
    return isinstance(other, (OperatorMixin, np.ndarray, numbers.Number, np.bool_))


def _logical(op: str, a: object, b: object) -> Any:
    for value in (a, b):
        dtype = getattr(value, "dtype", None)
        if not (isinstance(value, OperatorMixin) and dtype == np.bool_):
            shown = dtype.name if dtype is not None else type(value).__name__
            raise DTypeError(
                shown, ("bool",), where=f"the {op} operator (use logical_{op} for other dtypes)"
            )
    return getattr(above.ops, f"logical_{op}")(a, b)


class OperatorMixin:
    """Adds NumPy's operators (see the module docstring) backed by ``llmfs.tensor.ops``.

    A real Python scalar is accepted on either side. NumPy arrays are not silently converted:
    ``__array_ufunc__ = None`` makes NumPy hand the operation back to these methods.
    """

    __slots__ = ()
    __array_ufunc__ = None
    __hash__ = None  # type: ignore[assignment]  # == is elementwise, as for NumPy arrays

    def __add__(self, other: Any) -> Any:
        return above.ops.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return above.ops.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return above.ops.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return above.ops.sub(other, self)

    def __mul__(self, other: Any) -> Any:
        return above.ops.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return above.ops.mul(other, self)

    def __truediv__(self, other: Any) -> Any:
        return above.ops.div(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return above.ops.div(other, self)

    def __floordiv__(self, other: Any) -> Any:
        return above.ops.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return above.ops.floor_divide(other, self)

    def __mod__(self, other: Any) -> Any:
        return above.ops.remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return above.ops.remainder(other, self)

    def __pow__(self, other: Any) -> Any:
        return above.ops.power(self, other)

    def __rpow__(self, other: Any) -> Any:
        return above.ops.power(other, self)

    def __neg__(self) -> Any:
        return above.ops.neg(self)

    def __abs__(self) -> Any:
        return above.ops.abs(self)

    def __matmul__(self, other: Any) -> Any:
        return above.ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return above.ops.matmul(other, self)

    # -- comparisons (Python swaps the operands of a reflected one: 1 < t is t > 1) ----------

    def __eq__(self, other: object) -> Any:
        return above.ops.equal(self, other) if _comparable(other) else NotImplemented

    def __ne__(self, other: object) -> Any:
        return above.ops.not_equal(self, other) if _comparable(other) else NotImplemented

    def __lt__(self, other: Any) -> Any:
        return above.ops.less(self, other)

    def __le__(self, other: Any) -> Any:
        return above.ops.less_equal(self, other)

    def __gt__(self, other: Any) -> Any:
        return above.ops.greater(self, other)

    def __ge__(self, other: Any) -> Any:
        return above.ops.greater_equal(self, other)

    # -- logic on bool tensors ---------------------------------------------------------------

    def __and__(self, other: Any) -> Any:
        return _logical("and", self, other)

    def __rand__(self, other: Any) -> Any:
        return _logical("and", other, self)

    def __or__(self, other: Any) -> Any:
        return _logical("or", self, other)

    def __ror__(self, other: Any) -> Any:
        return _logical("or", other, self)

    def __xor__(self, other: Any) -> Any:
        return _logical("xor", self, other)

    def __rxor__(self, other: Any) -> Any:
        return _logical("xor", other, self)

    def __invert__(self) -> Any:
        dtype = getattr(self, "dtype", None)
        if dtype != np.bool_:
            raise DTypeError(
                getattr(dtype, "name", dtype),
                ("bool",),
                where="the ~ operator (use logical_not for other dtypes)",
            )
        return above.ops.logical_not(self)

    # -- conversion --------------------------------------------------------------------------

    def astype(self, dtype: object) -> Any:
        """A NEW tensor with these values converted to ``dtype`` (NumPy's ``astype``; always a
        copy). See :func:`llmfs.tensor.ops.astype` for the conversion rules and errors."""
        return above.ops.astype(self, dtype)
