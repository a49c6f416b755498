"""The backend interface: the few primitives every compute backend implements.

:mod:`llmfs.tensor.ops` does everything that is the same for all backends (scalars, shapes and
broadcasting, axes, dtypes, empty outputs, einsum plans); a backend implements four primitives,
``unary``, ``binary``, ``reduce`` and ``matmul`` (abstract below), and may override the defaults
here: ``copy``, ``where``, ``take``, ``supports``, the ``*_into`` forms, and autograd's
``scatter_add`` and ``index_add``. Each method's docstring states its arguments and result.

Contract of every primitive
---------------------------
* Inputs are :class:`~llmfs.tensor.view.TensorView` objects, possibly non-contiguous, flipped
  (negative strides) or broadcast (zero strides); a backend reads them in place
  (:func:`read_array`, ``view.logical_offsets()``, or ``(view.owner.as_slice(), view.layout)``
  for kernels) and never copies an input it can read as it is. Inputs are never empty, and
  ``reduce`` always has at least one axis: the caller answers those cases itself.
* The result is a NEW owning :class:`~llmfs.tensor.tensor.Tensor` with row-major strides and dtype
  ``dtype``, computed in the type ``compute``: inputs are converted to ``compute`` when read,
  every operation and accumulation happens in ``compute``, and the result is converted to
  ``dtype`` once, when written. Floats compute in float32 or float64 (float16 storage in
  float32); integers in their own dtype, wrapping on overflow as NumPy's do; bools as bools
  (``add`` is "or", ``mul`` is "and"). Comparisons write bools; the logical ops read every value
  as "is it non-zero".
* IEEE behaviour as NumPy: ``exp`` overflow gives inf, ``log(0)`` -inf, ``x/0`` +-inf, ``sqrt`` of a
  negative number NaN, and NaN propagates (``minimum``/``maximum``/``max``/``min`` included). No
  warning or exception escapes for these.

The ``*_into`` methods (an einsum plan's ``execute_into``) write the same values into ``out``, a
writable NumPy array with the result's shape, any strides, no two elements at one address, and
the storage dtype, opened inside its owner's ``mutate()`` window; the defaults run the primitive
and copy through ``out``'s layout, and a backend that writes strided memory itself overrides them.

``copy`` is every copy the library makes of a view (``materialize``, ``to_numpy``, ``tolist``,
``np.asarray``), so each backend copies its own way; the caller keeps the rules around it (the
allocation guard, the owner's version before and after).

A backend that lacks an op or a dtype says so in :meth:`Backend.supports`; the dispatcher then
runs that call on :attr:`Backend.fallback` (``"numpy"``; ``None`` makes it an
:class:`~llmfs.tensor.errors.UnsupportedOperationError`), so a GPU backend can implement ``add``
and ``matmul`` in float32 only and still run every program.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from llmfs.tensor.layout import Layout
from llmfs.tensor.strided import numpy_view
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView

#: Elementwise functions of one argument (each reads one value and writes one).
UNARY_OPS: tuple[str, ...] = (
    "neg",
    "abs",
    "sqrt",
    "exp",
    "log",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "relu",
    "reciprocal",
)

#: Elementwise functions of two arguments; ``minimum``/``maximum`` propagate NaN.
BINARY_OPS: tuple[str, ...] = ("add", "sub", "mul", "div", "minimum", "maximum")

#: Elementwise comparisons (``binary`` ops whose result is bool), named as NumPy's ufuncs.
COMPARISON_OPS: tuple[str, ...] = (
    "equal",
    "not_equal",
    "less",
    "less_equal",
    "greater",
    "greater_equal",
)

#: Elementwise logic on truth values (``binary`` ops whose result is bool), as NumPy's ufuncs.
LOGICAL_OPS: tuple[str, ...] = ("logical_and", "logical_or", "logical_xor")

#: Every ``op`` a ``binary`` call may carry: :data:`BINARY_OPS`, ``power`` (``x ** y``; for
#: integers the exponents are never negative), ``floor_divide`` and ``remainder`` (NumPy's ``//``
#: and ``%``: the quotient rounded down and the remainder with the divisor's sign; an integer
#: division by zero gives 0 for both, a float one ``x / 0`` and NaN), the comparisons and the
#: logical ops.
ALL_BINARY_OPS: tuple[str, ...] = (
    *BINARY_OPS,
    "power",
    "floor_divide",
    "remainder",
    *COMPARISON_OPS,
    *LOGICAL_OPS,
)

#: Every ``op`` a ``unary`` call may carry: :data:`UNARY_OPS` and ``logical_not`` (bool result).
ALL_UNARY_OPS: tuple[str, ...] = (*UNARY_OPS, "logical_not")

#: Reductions over axes; ``max``/``min`` propagate NaN.
REDUCE_OPS: tuple[str, ...] = ("sum", "prod", "max", "min", "mean")

#: Reductions of truth values to bool: is any value / is every value non-zero (NaN counts).
LOGICAL_REDUCE_OPS: tuple[str, ...] = ("any", "all")

#: Every ``op`` a ``reduce`` call may carry.
ALL_REDUCE_OPS: tuple[str, ...] = (*REDUCE_OPS, *LOGICAL_REDUCE_OPS)


@functools.lru_cache(maxsize=64)
def _dtype_name(dtype: object) -> str:
    # NumPy computes ``dtype.name`` in Python on every access; dispatch asks for it on every call.
    return np.dtype(dtype).name  # type: ignore[call-overload]


def read_array(view: TensorView) -> np.ndarray:
    """The view's values in place: a plain read-only ndarray over its owner's storage with the
    view's shape and strides (no copy). What a backend reads its inputs through.

    The same array as ``view.numpy_view()`` without the export type of a learner's array
    (NumPy's read-only flag alone: a backend never writes its inputs, and NumPy refuses if one
    tried). Raises :class:`~llmfs.tensor.errors.StaleViewError` for a stale view.
    """
    view._check_fresh()
    return numpy_view(view.owner._storage, view.layout)


def _array_of(result: Tensor) -> np.ndarray:
    """A fresh result's storage under its shape (the backend made it, nobody else holds it)."""
    return result._storage.reshape(result.shape)


def _write(out: np.ndarray, values: np.ndarray) -> None:
    """``out[...] = values``, rounded to ``out.dtype`` as ``astype`` rounds (NumPy buffers a
    ``values`` that overlaps ``out``)."""
    with np.errstate(over="ignore"):
        np.copyto(out, values, casting="unsafe")


#: The primitive names :meth:`Backend.supports` is asked about.
PRIMITIVES: tuple[str, ...] = ("unary", "binary", "reduce", "matmul", "copy", "where", "take")


class Backend(ABC):
    """One way of computing the primitives (see the module docstring for the full contract).

    Subclasses set :attr:`name` and :attr:`dtypes` and implement the four abstract methods. The
    shared test suite runs every op on every available backend for each dtype in :attr:`dtypes`.
    """

    #: The registry name (``"numpy"``, ``"reference"``, ``"metal"``...).
    name: str = "abstract"

    #: Storage dtypes this backend computes natively (float ones narrowest first).
    dtypes: tuple[str, ...] = ("float16", "float32", "float64")

    #: The backend that runs calls :meth:`supports` refuses; ``None`` makes them errors.
    fallback: str | None = "numpy"

    #: One line for listings (``llmfs`` tooling, error messages).
    description: str = ""

    def supports(self, primitive: str, op: str | None, dtype: np.dtype) -> bool:
        """True when this backend computes ``primitive`` (one of :data:`PRIMITIVES`) with ``op``
        (the op name; ``None`` for ``matmul`` and ``copy``) for inputs whose widest storage dtype
        is ``dtype``. Asked before every call; ``False`` sends that call to :attr:`fallback`.
        Default: every op, for the dtypes in :attr:`dtypes`."""
        return _dtype_name(dtype) in self.dtypes

    @abstractmethod
    def unary(self, op: str, x: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """``op(x)`` value by value; the result has ``x.shape``."""

    @abstractmethod
    def binary(
        self, op: str, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype
    ) -> Tensor:
        """``op(a, b)`` value by value for two views of the same shape (broadcast already)."""

    @abstractmethod
    def reduce(
        self,
        op: str,
        x: TensorView,
        axes: tuple[int, ...],
        *,
        dtype: np.dtype,
        compute: np.dtype,
    ) -> Tensor:
        """Folds the (sorted, distinct, non-empty) ``axes`` of the non-empty ``x`` with ``op``;
        the result's shape is ``x.shape`` without those axes (``mean`` divides the sum by the
        number of values folded, in ``compute``)."""

    @abstractmethod
    def matmul(self, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """Matrix products over leading batch axes: ``a`` is ``(*batch, m, k)``, ``b`` is
        ``(*batch, k, n)`` with the same batch shape (broadcast already), every size >= 1; the
        result is ``(*batch, m, n)``."""

    def copy(self, x: TensorView, *, dtype: np.dtype) -> Tensor:
        """The values of ``x`` in logical row-major order as a new owner of dtype ``dtype``.

        Default: one NumPy copy of the view read in place, cast on the way (as ``astype``).
        """
        with np.errstate(over="ignore"):
            values = np.array(read_array(x), dtype=dtype, order="C")
        return Tensor._adopt(values.reshape(-1), x.shape)

    def where(self, cond: TensorView, a: TensorView, b: TensorView, *, dtype: np.dtype) -> Tensor:
        """``a`` where ``cond`` is non-zero, else ``b``, for three views of one shape (broadcast
        already); the result has dtype ``dtype`` (the promoted dtype of ``a`` and ``b``).

        Default: one ``np.where`` over the views, read in place.
        """
        out = np.where(read_array(cond), read_array(a), read_array(b))
        return Tensor._adopt(np.ascontiguousarray(out, dtype=dtype).reshape(-1), a.shape)

    def take(self, x: TensorView, ids: TensorView, axis: int, *, dtype: np.dtype) -> Tensor:
        """NumPy's ``take``: ``x`` with axis ``axis`` replaced by ``ids``' axes, each id selecting
        one index of that axis (negative ids count from the end). The ids are integers already
        checked to lie in ``[-size, size)``; the result's shape is ``x.shape[:axis] + ids.shape
        + x.shape[axis + 1:]`` and its dtype ``dtype``.

        Default: one ``np.take`` over the views, read in place.
        """
        out = np.take(read_array(x), read_array(ids), axis=axis)
        shape = (*x.shape[:axis], *ids.shape, *x.shape[axis + 1 :])
        return Tensor._adopt(np.ascontiguousarray(out, dtype=dtype).reshape(-1), shape)

    # -- writing into an existing output (see the module docstring) --------------------------

    def copy_into(self, x: TensorView, out: np.ndarray) -> None:
        """Writes the values of ``x`` into ``out`` (same shape), cast to ``out.dtype``."""
        _write(out, read_array(x))

    def binary_into(
        self, op: str, a: TensorView, b: TensorView, out: np.ndarray, *, compute: np.dtype
    ) -> None:
        """``op(a, b)`` written into ``out``. Default: :meth:`binary`, then one copy."""
        _write(out, _array_of(self.binary(op, a, b, dtype=out.dtype, compute=compute)))

    def reduce_into(
        self, op: str, x: TensorView, axes: tuple[int, ...], out: np.ndarray, *, compute: np.dtype
    ) -> None:
        """The reduction written into ``out``. Default: :meth:`reduce`, then one copy."""
        _write(out, _array_of(self.reduce(op, x, axes, dtype=out.dtype, compute=compute)))

    def matmul_into(
        self, a: TensorView, b: TensorView, out: np.ndarray, *, compute: np.dtype
    ) -> None:
        """The matrix products written into ``out``. Default: :meth:`matmul`, then one copy."""
        _write(out, _array_of(self.matmul(a, b, dtype=out.dtype, compute=compute)))

    # -- autograd: the view rule and the gradient of take ------------------------------------

    def scatter_add(self, buffer: np.ndarray, layout: Layout, grad: np.ndarray) -> None:
        """``buffer[offset(c)] += grad[c]`` for every coordinate ``c`` of ``layout``: the one
        primitive of autograd's view rule (:func:`llmfs.tensor.autograd.view_backward`).
        ``buffer`` is a writable 1-D array of an owner's storage size; ``grad`` has ``layout``'s
        shape and ``buffer``'s dtype (possibly a broadcast, read-only array). A cell several
        coordinates reach receives their sum. Default: NumPy's unbuffered scatter-add
        (``np.add.at``) over those offsets, in logical row-major order."""
        np.add.at(buffer, layout_offsets(layout, buffer.size), grad.reshape(-1))

    def index_add(self, buffer: np.ndarray, axis: int, ids: np.ndarray, rows: np.ndarray) -> None:
        """Adds ``rows[..., k, ...]`` into ``buffer[..., ids[k], ...]`` along ``axis`` for every
        ``k``, summing the rows of a repeated id: the gradient of ``take`` (PyTorch's
        ``index_add_``). ``ids`` is a 1-D int64 array of checked ids (negative ones count from
        the end); ``rows`` has ``buffer``'s shape with ``len(ids)`` at ``axis``. Default:
        NumPy's unbuffered scatter-add (``np.add.at``), one row at a time in the order of
        ``ids``."""
        index: Any = (slice(None),) * axis + (ids,)
        np.add.at(buffer, index, rows)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} dtypes={list(self.dtypes)}>"


def layout_offsets(layout: Layout, storage_size: int) -> np.ndarray:
    """Every storage offset ``layout`` reads, in logical row-major order (int64): the values of
    the storage ``0, 1, ..., storage_size - 1`` read through the layout, so the offsets come from
    the same strided read as every view's values (no second copy of the offset rule)."""
    return numpy_view(np.arange(storage_size, dtype=np.int64), layout).reshape(-1)
