"""Compute on views: elementwise functions, reductions over explicit axes, matmul and einsum.

Every function here accepts :class:`~llmfs.tensor.tensor.Tensor` and
:class:`~llmfs.tensor.view.TensorView` operands alike (and, where it says so, real Python scalars),
and returns a NEW owning ``Tensor`` with row-major strides. The work that is the same for every
backend happens here, once:

* **Scalars.** A real Python number next to a tensor becomes a 0-d operand *of that tensor's
  dtype*, so ``float32_tensor + 1.0`` stays float32 (NumPy 2's rule).
* **Broadcasting** is NumPy's (right-aligned; sizes equal or 1) and is done with zero-stride
  *views* (:meth:`TensorView.expand`): nothing is copied to make shapes agree. A mismatch is a
  :class:`BroadcastError` naming both shapes and the axis.
* **Dtypes** (seed 003): the result dtype is the widest input dtype (float16 < float32 <
  float64) unless ``dtype=`` asks for another; the arithmetic runs in float64 when any input is
  float64 and in float32 otherwise (so float16 data is computed in float32 and stored as float16).
* **Empty outputs do no work**: they are allocated here and no backend is called. ``sum`` and
  ``prod`` over an empty axis are 0 and 1; ``max``, ``min`` and ``mean`` over one are an
  :class:`EmptyReductionError`.
* **Dispatch**: the active backend (:func:`~llmfs.tensor.backends.use_backend`) runs the
  primitive, or its declared fallback when it does not support the op or dtype.
"""

from __future__ import annotations

import builtins
import numbers
from collections.abc import Sequence

import numpy as np

from llmfs.tensor.backends import get_backend
from llmfs.tensor.backends.base import Backend
from llmfs.tensor.dtypes import SUPPORTED_DTYPES, resolve_dtype
from llmfs.tensor.errors import (
    EmptyReductionError,
    MatmulShapeError,
    ReduceError,
    TensorError,
    UnsupportedOperationError,
)
from llmfs.tensor.layout import (
    broadcast_shapes,
    element_count,
    normalize_axes,
    reduced_shape,
)
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView

Operand = Tensor | TensorView
Scalar = int | float

# --------------------------------------------------------------------------------------------
# Operands, dtypes and dispatch (shared with llmfs.tensor.einsum)
# --------------------------------------------------------------------------------------------


def is_scalar(value: object) -> bool:
    """True for a real Python (or NumPy) number; bools and complex numbers are not scalars here."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def as_view(
    value: object, *, what: str = "operand", numbers: bool = False, hint: str = ""
) -> TensorView:
    """The operand as a fresh view: a Tensor's whole view, or the view itself after checking it is
    not stale.

    Raises :class:`TensorError` for anything else (NumPy arrays included: convert them with
    ``Tensor.from_numpy``) and :class:`StaleViewError` for a stale view. ``numbers`` says whether
    the caller also accepts a real number in this place (it converts numbers itself), so that the
    message lists exactly what is accepted; ``hint`` is appended to the message.
    """
    if isinstance(value, Tensor):
        return value.view()
    if isinstance(value, TensorView):
        value._check_fresh()
        return value
    if isinstance(value, np.ndarray):
        hint = f"{hint} (convert arrays with Tensor.from_numpy)"
    if isinstance(value, (bool, np.bool_)):
        hint = f" (True/False are not numbers here){hint}"
    if numbers:
        raise TensorError(
            f"{what} must be a Tensor, a TensorView or a real number, got "
            f"{type(value).__name__}{hint}"
        )
    if is_scalar(value):
        raise TensorError(
            f"{what} must be a Tensor or a TensorView, not a number: got the number {value!r}{hint}"
        )
    raise TensorError(f"{what} must be a Tensor or a TensorView, got {type(value).__name__}{hint}")


def scalar_view(value: Scalar, dtype: np.dtype) -> TensorView:
    """A real number as a 0-d operand of ``dtype`` (rounded to it, as NumPy 2 does)."""
    try:
        number = float(value)
    except OverflowError:
        raise TensorError(f"the number {value} is too large for a float operand") from None
    with np.errstate(over="ignore"):
        return Tensor.full((), number, dtype).view()


def widest_dtype(dtypes: Sequence[np.dtype]) -> np.dtype:
    """The widest of the storage dtypes (float16 < float32 < float64)."""
    return np.dtype(builtins.max((np.dtype(d).name for d in dtypes), key=SUPPORTED_DTYPES.index))


def compute_dtype(dtypes: Sequence[np.dtype]) -> np.dtype:
    """Seed 003's compute precision: float64 when any input is float64, else float32."""
    wide = any(np.dtype(d) == np.float64 for d in dtypes)
    return np.dtype(np.float64 if wide else np.float32)


def output_dtype(dtypes: Sequence[np.dtype], requested: object | None) -> np.dtype:
    """``requested`` (checked) when given, else the widest input dtype."""
    if requested is not None:
        return resolve_dtype(requested, where="an op's dtype= argument")
    return widest_dtype(dtypes)


def backend_for(primitive: str, op: str | None, dtype: np.dtype) -> Backend:
    """The backend that runs ``primitive``/``op`` on inputs of ``dtype``: the active one, or the
    fallback chain it declares. Raises :class:`UnsupportedOperationError` at the chain's end."""
    backend = get_backend()
    visited: list[str] = []
    while not backend.supports(primitive, op, dtype):
        visited.append(backend.name)
        if backend.fallback is None or backend.fallback in visited:
            what = f"{primitive} {op or ''} on {np.dtype(dtype).name}".replace("  ", " ")
            raise UnsupportedOperationError(backend.name, what)
        backend = get_backend(backend.fallback)
    return backend


def empty_result(shape: Sequence[int], dtype: np.dtype, fill: float = 0.0) -> Tensor:
    """A new owner of ``shape`` filled with ``fill``, made without any backend."""
    return Tensor._adopt(np.full(element_count(shape), fill, dtype=dtype), tuple(shape))


def with_shape(result: Tensor, shape: Sequence[int]) -> Tensor:
    """The same fresh result under another shape of equal element count (no copy: the result was
    never shared, so its storage can change owner)."""
    if tuple(shape) == result.shape:
        return result
    return Tensor._adopt(result._storage, tuple(shape))


# --------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------


def _unary(op: str, x: object, dtype: object | None) -> Tensor:
    view = as_view(x, what=f"{op}'s operand")
    out = output_dtype([view.dtype], dtype)
    if view.is_empty:
        return empty_result(view.shape, out)
    backend = backend_for("unary", op, view.dtype)
    return backend.unary(op, view, dtype=out, compute=compute_dtype([view.dtype]))


def neg(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``-x`` value by value."""
    return _unary("neg", x, dtype)


def abs(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``|x|`` value by value."""
    return _unary("abs", x, dtype)


def sqrt(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Square root; NaN for negative values (IEEE)."""
    return _unary("sqrt", x, dtype)


def exp(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``e**x``; inf where it overflows."""
    return _unary("exp", x, dtype)


def log(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Natural logarithm; ``log(0)`` is -inf and a negative value gives NaN."""
    return _unary("log", x, dtype)


def sin(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Sine (radians); NaN for infinities."""
    return _unary("sin", x, dtype)


def cos(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Cosine (radians); NaN for infinities."""
    return _unary("cos", x, dtype)


def tanh(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Hyperbolic tangent."""
    return _unary("tanh", x, dtype)


def sigmoid(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``1 / (1 + e**-x)``, computed without overflow for any ``x``."""
    return _unary("sigmoid", x, dtype)


def relu(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``max(x, 0)``; NaN stays NaN."""
    return _unary("relu", x, dtype)


def reciprocal(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``1 / x``; +-inf at zero."""
    return _unary("reciprocal", x, dtype)


def broadcast_operands(*values: object, what: str = "operand") -> list[TensorView]:
    """Views of the operands expanded (zero strides) to their common broadcast shape.

    Python scalars become 0-d operands of the widest dtype among the tensor operands. Raises
    :class:`BroadcastError` naming both shapes and the axis, or :class:`TensorError` when no
    operand is a tensor.
    """
    tensors = [as_view(v, what=what, numbers=True) for v in values if not is_scalar(v)]
    if not tensors:
        shown = ", ".join(repr(v) for v in values)
        raise TensorError(
            f"at least one {what} must be a Tensor or TensorView, but all were numbers ({shown}): "
            f"compute with Python numbers directly"
        )
    dtype = widest_dtype([t.dtype for t in tensors])
    views = [scalar_view(v, dtype) if is_scalar(v) else as_view(v) for v in values]
    shape = broadcast_shapes(*(v.shape for v in views))
    return [v if v.shape == shape else v.expand(shape) for v in views]


def _binary(op: str, a: object, b: object, dtype: object | None) -> Tensor:
    left, right = broadcast_operands(a, b, what=f"{op}'s operand")
    dtypes = [left.dtype, right.dtype]
    out = output_dtype(dtypes, dtype)
    if left.is_empty:
        return empty_result(left.shape, out)
    backend = backend_for("binary", op, widest_dtype(dtypes))
    return backend.binary(op, left, right, dtype=out, compute=compute_dtype(dtypes))


def add(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a + b`` with broadcasting; either side may be a real Python number."""
    return _binary("add", a, b, dtype)


def sub(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a - b`` with broadcasting; either side may be a real Python number."""
    return _binary("sub", a, b, dtype)


def mul(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a * b`` with broadcasting; either side may be a real Python number."""
    return _binary("mul", a, b, dtype)


def div(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a / b`` with broadcasting (IEEE: ``x/0`` is +-inf, ``0/0`` NaN)."""
    return _binary("div", a, b, dtype)


def minimum(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """The smaller of each pair, with broadcasting; NaN if either is NaN."""
    return _binary("minimum", a, b, dtype)


def maximum(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """The larger of each pair, with broadcasting; NaN if either is NaN."""
    return _binary("maximum", a, b, dtype)


def scale(x: Operand, alpha: Scalar, *, dtype: object | None = None) -> Tensor:
    """``alpha * x`` for a real number ``alpha`` (seed 001's ``ut_scale``), in ``x``'s dtype.

    Raises :class:`TensorError` when ``alpha`` is not a real number.
    """
    if not is_scalar(alpha):
        raise TensorError(f"scale takes a real number as alpha, got {type(alpha).__name__}")
    return _binary("mul", x, alpha, dtype)


# --------------------------------------------------------------------------------------------
# Reductions
# --------------------------------------------------------------------------------------------


def _check_keepdims(op: str, keepdims: object) -> bool:
    # A truthy string such as "no" must not quietly mean True.
    if not isinstance(keepdims, (bool, np.bool_)):
        raise TensorError(
            f"{op}'s keepdims must be True or False, got {type(keepdims).__name__} {keepdims!r}"
        )
    return bool(keepdims)


def _reduction(op: str, x: object, axis: object, keepdims: object, dtype: object | None) -> Tensor:
    view = as_view(x, what=f"{op}'s operand")
    keep = _check_keepdims(op, keepdims)
    if axis is None:
        axes: tuple[int, ...] = tuple(range(view.rank))
    else:
        axes = tuple(sorted(normalize_axes(axis, view.rank)))
    out = output_dtype([view.dtype], dtype)
    shape = reduced_shape(view.shape, axes)
    final = reduced_shape(view.shape, axes, keep)
    empty_axis = any(view.shape[a] == 0 for a in axes)
    if empty_axis and op not in ("sum", "prod"):
        raise EmptyReductionError(op, view.shape, axes)  # even when no output value is asked
    if element_count(shape) == 0:
        return empty_result(final, out)
    if empty_axis:
        return empty_result(final, out, 0.0 if op == "sum" else 1.0)
    if not axes:  # reducing nothing leaves every value as it is
        return with_shape(backend_for("copy", None, view.dtype).copy(view, dtype=out), final)
    backend = backend_for("reduce", op, view.dtype)
    result = backend.reduce(op, view, axes, dtype=out, compute=compute_dtype([view.dtype]))
    return with_shape(result, final)


def sum(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Sum over ``axis`` (an int, a negative int, a tuple or list of distinct axes, ``()`` for
    none, ``None`` for all); ``keepdims`` keeps reduced axes as size 1. An empty axis sums to 0.

    Raises :class:`AxisOutOfRangeError` or :class:`DuplicateAxisError` for bad axes, and
    :class:`TensorError` when ``keepdims`` is not a bool.
    """
    return _reduction("sum", x, axis, keepdims, dtype)


def prod(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Product over ``axis`` (as :func:`sum`); an empty axis gives 1."""
    return _reduction("prod", x, axis, keepdims, dtype)


def max(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Largest value over ``axis`` (as :func:`sum`); NaN if any value is NaN.

    Raises :class:`EmptyReductionError` when a reduced axis is empty.
    """
    return _reduction("max", x, axis, keepdims, dtype)


def min(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Smallest value over ``axis`` (as :func:`sum`); NaN if any value is NaN.

    Raises :class:`EmptyReductionError` when a reduced axis is empty.
    """
    return _reduction("min", x, axis, keepdims, dtype)


def mean(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Arithmetic mean over ``axis`` (as :func:`sum`).

    Raises :class:`EmptyReductionError` when a reduced axis is empty (instead of NaN).
    """
    return _reduction("mean", x, axis, keepdims, dtype)


_REDUCTIONS = ("sum", "prod", "max", "min", "mean")


def _modes(modes: object, what: str, modes_in: object, modes_out: object) -> tuple[object, ...]:
    if isinstance(modes, (str, list, tuple)):
        return tuple(modes)
    raise ReduceError(
        modes_in,
        modes_out,
        f"{what} must be a string of letters or a list of labels, got {type(modes).__name__}",
    )


def reduce(
    x: Operand,
    modes_in: object,
    modes_out: object,
    op: str = "sum",
    *,
    dtype: object | None = None,
) -> Tensor:
    """Seed 003's mode-label reduction: ``modes_in`` names each axis of ``x`` (a string such as
    ``"ijk"`` or a list of labels, e.g. ints); the labels absent from ``modes_out`` are reduced
    with ``op`` (``"sum"``, ``"prod"``, ``"max"``, ``"min"``, ``"mean"``, any case), and the output
    axes follow ``modes_out``'s order. ``reduce(a, [0, 1], [0], "sum")`` sums each row.

    Raises :class:`ReduceError` (an :class:`EinsumError`) when ``modes_in`` does not name every
    axis once, when an output label repeats or is not an input label, or for an unknown ``op``;
    the message shows both modes and, for an unknown op, the valid ones.
    """
    view = as_view(x, what="reduce's operand")
    inputs = _modes(modes_in, "modes_in", modes_in, modes_out)
    outputs = _modes(modes_out, "modes_out", modes_in, modes_out)
    name = op.lower() if isinstance(op, str) else None
    if name not in _REDUCTIONS:
        raise ReduceError(
            modes_in,
            modes_out,
            f"unknown reduction {op!r}; the valid ops are {', '.join(_REDUCTIONS)} (any case)",
        )
    if len(inputs) != view.rank:
        raise ReduceError(
            modes_in,
            modes_out,
            f"modes_in names {len(inputs)} axes but the operand has rank {view.rank} "
            f"(shape {list(view.shape)})",
            operand=0,
        )
    for k, label in enumerate(inputs):
        if label in inputs[:k]:
            raise ReduceError(
                modes_in,
                modes_out,
                f"input mode {label!r} appears twice (each axis needs its own label)",
                label=str(label),
            )
    for k, label in enumerate(outputs):
        if label in outputs[:k]:
            raise ReduceError(
                modes_in, modes_out, f"output mode {label!r} appears twice", label=str(label)
            )
        if label not in inputs:
            raise ReduceError(
                modes_in,
                modes_out,
                f"output mode {label!r} is not one of the input modes {list(inputs)}",
                label=str(label),
            )
    reduced = [k for k, label in enumerate(inputs) if label not in outputs]
    result = _reduction(name, view, tuple(reduced), False, dtype)
    kept = [label for label in inputs if label in outputs]
    if kept == list(outputs):
        return result
    order = [kept.index(label) for label in outputs]
    moved = result.view().permute(order)
    return backend_for("copy", None, result.dtype).copy(moved, dtype=result.dtype)


# --------------------------------------------------------------------------------------------
# Matmul and einsum
# --------------------------------------------------------------------------------------------


def matmul(a: Operand, b: Operand, *, dtype: object | None = None) -> Tensor:
    """Matrix product with NumPy's ``@`` rules: the last two axes are matrices, leading axes are
    batch axes that broadcast; a 1-D ``a`` is a row vector and a 1-D ``b`` a column vector (the
    added axis is dropped from the result).

    Raises :class:`MatmulShapeError` for a 0-d operand or when ``a``'s last size differs from
    ``b``'s second-to-last (naming both sizes), and :class:`BroadcastError` when the batch
    axes do not broadcast.
    """
    scalar_hint = " (to multiply by a number use mul or *)"
    left, right = (
        as_view(a, what="matmul's left operand", hint=scalar_hint if is_scalar(a) else ""),
        as_view(b, what="matmul's right operand", hint=scalar_hint if is_scalar(b) else ""),
    )
    if left.rank == 0 or right.rank == 0:
        raise MatmulShapeError(
            left.shape, right.shape, "matmul needs operands of rank >= 1 (use mul for scalars)"
        )
    drop_rows, drop_cols = left.rank == 1, right.rank == 1
    if drop_rows:
        left = left.unsqueeze(0)
    if drop_cols:
        right = right.unsqueeze(1)
    inner_a, inner_b = left.shape[-1], right.shape[-2]
    if inner_a != inner_b:
        raise MatmulShapeError(
            a.shape,
            b.shape,
            f"inner sizes differ: the left operand's last axis has size {inner_a} but the right "
            f"operand's second-to-last axis has size {inner_b}",
        )
    batch = broadcast_shapes(left.shape[:-2], right.shape[:-2])
    rows, cols = left.shape[-2], right.shape[-1]
    left = left.expand((*batch, rows, inner_a))
    right = right.expand((*batch, inner_b, cols))
    final = (*batch, *(() if drop_rows else (rows,)), *(() if drop_cols else (cols,)))
    dtypes = [left.dtype, right.dtype]
    out = output_dtype(dtypes, dtype)
    if element_count((*batch, rows, cols)) == 0 or inner_a == 0:
        return empty_result(final, out)  # no values, or each one a sum of nothing (0)
    backend = backend_for("matmul", None, widest_dtype(dtypes))
    result = backend.matmul(left, right, dtype=out, compute=compute_dtype(dtypes))
    return with_shape(result, final)


def einsum(expression: str, *operands: object, dtype: object | None = None) -> Tensor:
    """Einstein summation over labelled axes (the rules are stated in :mod:`llmfs.tensor.einsum`:
    shared labels need equal sizes or 1, ``...`` broadcasts right-aligned, a label repeated in
    one term takes a diagonal, labels missing from the output are summed).

    ``einsum("ik,kj->ij", a, b)`` is a matrix product; the operands may also be passed as one
    list (``einsum("ik,kj->ij", [a, b])``). Raises :class:`EinsumError` pointing at the offending
    label or operand.
    """
    from llmfs.tensor.einsum import EinsumPlan

    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    return EinsumPlan(expression, *operands, dtype=dtype).execute(*operands)


__all__ = [
    "ReduceError",
    "abs",
    "add",
    "as_view",
    "cos",
    "div",
    "einsum",
    "exp",
    "log",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "neg",
    "prod",
    "reciprocal",
    "reduce",
    "relu",
    "scale",
    "sigmoid",
    "sin",
    "sqrt",
    "sub",
    "sum",
    "tanh",
]
