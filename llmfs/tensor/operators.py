"""Python operators (``+ - * / @`` and unary ``-``) for tensors and views.

The arithmetic lives in :mod:`llmfs.tensor.ops` (which dispatches to the active backend); this
mixin only routes the operator syntax there, imported on first use so that the core types do
not depend on the compute layer.
"""

from __future__ import annotations

from typing import Any


def _ops() -> Any:
    # ops builds on the tensor types that use this mixin, so it is imported on first use.
    from llmfs.tensor import ops

    return ops


class OperatorMixin:
    """Adds elementwise ``+ - * /``, unary ``-`` and ``@`` (matmul) backed by ``llmfs.tensor.ops``.

    A real Python scalar is accepted on either side. NumPy arrays are not silently converted:
    ``__array_ufunc__ = None`` makes NumPy hand the operation back to these methods.
    """

    __slots__ = ()
    __array_ufunc__ = None

    def __add__(self, other: Any) -> Any:
        return _ops().add(self, other)

    def __radd__(self, other: Any) -> Any:
        return _ops().add(other, self)

    def __sub__(self, other: Any) -> Any:
        return _ops().sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return _ops().sub(other, self)

    def __mul__(self, other: Any) -> Any:
        return _ops().mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return _ops().mul(other, self)

    def __truediv__(self, other: Any) -> Any:
        return _ops().div(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _ops().div(other, self)

    def __neg__(self) -> Any:
        return _ops().neg(self)

    def __matmul__(self, other: Any) -> Any:
        return _ops().matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return _ops().matmul(other, self)
