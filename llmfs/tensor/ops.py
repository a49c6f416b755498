"""Compute on views: elementwise functions, reductions over explicit axes, matmul and einsum.

Every function here accepts :class:`~llmfs.tensor.tensor.Tensor` and
:class:`~llmfs.tensor.view.TensorView` operands alike (and, where it says so, real Python scalars),
and returns a NEW owning ``Tensor`` with row-major strides. The work that is the same for every
backend happens here, once (what a backend does is in :mod:`llmfs.tensor.backends.base`):

* **Scalars** are what NumPy takes as numbers (:func:`~llmfs.tensor.dtypes.is_number`); a Python
  bool, int or float is *weak* (NumPy 2's rule: ``float32_tensor + 1.0`` stays float32), a NumPy
  scalar strong. A number becomes a 0-d operand of the result dtype; one that has no value of
  that dtype is a :class:`TensorError`.
* **Broadcasting** is NumPy's, done with zero-stride views (:meth:`TensorView.expand`), never a
  copy; a mismatch is a :class:`BroadcastError` naming both shapes and the axis.
* **Dtypes**: the result dtype is :func:`~llmfs.tensor.dtypes.promote` of the inputs (NumPy 2's
  promotion) unless ``dtype=`` asks for another; float arithmetic runs in float64 when the
  promoted dtype is float64, else in float32; integers wrap on overflow. As in NumPy, ``div`` of
  integers is float64, comparisons are bool, integer ``sum``/``prod`` are int64 and their
  ``mean`` float64, and ``-`` of bools is refused. Unlike NumPy, the transcendental functions
  refuse integer and bool operands with a :class:`DTypeError` saying how to cast.
* **Empty outputs do no work**: ``sum``/``prod`` over an empty axis are 0 and 1; ``max``,
  ``min`` and ``mean`` over one are an :class:`EmptyReductionError`.
* **Dispatch**: the active backend (:func:`~llmfs.tensor.backends.use_backend`) runs the
  primitive, or its declared fallback. Every op without ``dtype=`` first asks :data:`planner`,
  the one hook for speed code (:mod:`llmfs.tensor.dispatch`), which answers with the same
  result and error as the rule, or leaves the call to it.
* **Memory and work**: a result that cannot be allocated, or a read of more values than memory
  holds (a huge broadcast), is refused before any backend runs (:class:`AllocationError`,
  :class:`ViewTooLargeError`).
* **Autograd**: a differentiable op is decorated with :func:`~llmfs.tensor.tape.differentiable`;
  its backward rule lives in :mod:`llmfs.tensor.autograd`.
* **Threads**: every op checks its operands' versions after reading them
  (:class:`ConcurrentWriteError`), so no result mixes two versions.
"""

from __future__ import annotations

import builtins
import numbers as _numbers
import sys
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from llmfs.tensor import above
from llmfs.tensor.backends import get_backend
from llmfs.tensor.backends.base import COMPARISON_OPS, LOGICAL_OPS, Backend, read_array
from llmfs.tensor.dtypes import (
    FLOAT_DTYPES,
    INTEGER_DTYPES,
    check_integer_cast,
    is_bool,
    is_float,
    is_integer,
    is_number,
    promote,
    resolve_dtype,
    storage_values,
    without_repeats,
)
from llmfs.tensor.errors import (
    DTypeError,
    EmptyReductionError,
    IndexOutOfBoundsError,
    MatmulShapeError,
    ReduceError,
    TensorError,
    UnsupportedOperationError,
)
from llmfs.tensor.layout import (
    broadcast_shapes,
    element_count,
    normalize_axes,
    normalize_axis,
    reduced_shape,
)
from llmfs.tensor.strided import allocate, allocating, check_reads
from llmfs.tensor.tape import differentiable
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView, ViewMethods

Operand = Tensor | TensorView
Scalar = int | float


class Planner(Protocol):
    """The fast path for small calls (speed code, above the ops): each method answers one call
    with the same result the rule as written would give, or returns ``None`` to let the rule
    (the op's ``_checked`` function) answer it. :mod:`llmfs.tensor.dispatch` is one."""

    def unary(self, op: str, x: object) -> Tensor | None: ...
    def binary(self, op: str, a: object, b: object) -> Tensor | None: ...
    def reduction(self, op: str, x: object, axis: object, keepdims: object) -> Tensor | None: ...
    def matmul(self, a: object, b: object) -> Tensor | None: ...
    def copy(self, x: object) -> Tensor | None: ...


#: The one hook through which speed code reaches the ops: ``None`` (every call runs the rule as
#: written, on the active backend) until :mod:`llmfs.tensor` installs the numpy backend's cached
#: dispatch (:func:`llmfs.tensor.dispatch.install`). Every op without a ``dtype=`` asks it first.
planner: Planner | None = None

# --------------------------------------------------------------------------------------------
# Operands, dtypes and dispatch (shared with llmfs.tensor.einsum)
# --------------------------------------------------------------------------------------------


def is_scalar(value: object) -> bool:
    """True for a number operand: :func:`~llmfs.tensor.dtypes.is_number` (a Python bool, int or
    float, or a NumPy scalar of those kinds)."""
    return is_number(value)


def check_unchanged(*views: TensorView) -> None:
    """Raises :class:`ConcurrentWriteError` when an owner of ``views`` was written while an op
    read them (by another thread): called after every read, so that no result mixes versions."""
    for view in views:
        view._check_unchanged()


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
    if isinstance(value, _numbers.Number) and not is_number(value):
        hint = f" (numbers are bool, int and float, or NumPy scalars of those kinds){hint}"
    if numbers:
        raise TensorError(
            f"{what} must be a Tensor, a TensorView or a real number, got "
            f"{type(value).__name__} {value!r}{hint}"
        )
    if is_scalar(value):
        raise TensorError(
            f"{what} must be a Tensor or a TensorView, not a number: got the number {value!r}{hint}"
        )
    raise TensorError(f"{what} must be a Tensor or a TensorView, got {type(value).__name__}{hint}")


def scalar_view(value: Scalar, dtype: np.dtype) -> TensorView:
    """A number as a 0-d operand of ``dtype``, the result dtype :func:`promote` chose for it
    (rounded to a float dtype, as NumPy 2 does; +-inf past the dtype's largest value).

    Raises :class:`TensorError` when the number has no value of ``dtype``: an int outside an
    integer dtype's range (NumPy 2 refuses it too; the one check of
    :func:`~llmfs.tensor.dtypes.storage_values`), an int too large for any float, or a fractional
    number for an integer or bool dtype (never chosen by promotion).
    """
    dtype = np.dtype(dtype)
    fractional = isinstance(value, (float, np.floating)) and not float(value).is_integer()
    if dtype.kind != "f" and fractional:
        raise TensorError(f"the number {value!r} is not an integer, so it has no {dtype.name}")
    hint = "; cast the tensor first, e.g. t.astype('int64')"
    number, _ = storage_values(value, dtype, where="a number operand", hint=hint)
    with np.errstate(over="ignore"):
        storage = number.astype(dtype).reshape(1)
    return Tensor._adopt(storage, ()).view()


def widest_dtype(dtypes: Sequence[np.dtype]) -> np.dtype:
    """The promoted dtype of tensors of ``dtypes`` (NumPy 2's :func:`numpy.result_type`)."""
    return promote(*dtypes)


def compute_dtype(dtypes: Sequence[np.dtype]) -> np.dtype:
    """The type the arithmetic runs in: for float results float64 when the promoted dtype is
    float64, else float32; for integer and bool results the promoted dtype itself."""
    promoted = promote(*dtypes)
    if is_float(promoted):
        return np.dtype(np.float64 if promoted == np.float64 else np.float32)
    return promoted


def output_dtype(dtypes: Sequence[np.dtype], requested: object | None) -> np.dtype:
    """``requested`` (checked) when given, else the promoted input dtype."""
    if requested is not None:
        return resolve_dtype(requested, where="an op's dtype= argument")
    return widest_dtype(dtypes)


def refuse_dtype(op: str, dtype: np.dtype, allowed: Sequence[str], advice: str) -> DTypeError:
    """The :class:`DTypeError` for ``op`` on an operand of ``dtype``, with ``advice`` (how to
    cast) in the message."""
    return DTypeError(np.dtype(dtype).name, allowed, where=f"{op} ({advice})")


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


def reader_for(dtype: np.dtype) -> Backend:
    """The backend that copies values out to NumPy (``to_numpy``, ``tolist``, ``np.asarray``):
    the active one when it stores ``dtype`` natively (:attr:`~Backend.dtypes`), else the numpy
    backend. Reading values back never depends on whether a backend computes in that dtype
    (the Metal backends refuse float64 arithmetic, not returning float64 values)."""
    backend = get_backend()
    return backend if np.dtype(dtype).name in backend.dtypes else get_backend("numpy")


def empty_result(shape: Sequence[int], dtype: np.dtype, fill: float | bool = 0.0) -> Tensor:
    """A new owner of ``shape`` filled with ``fill``, made without any backend."""
    return Tensor._adopt(allocate(element_count(shape), dtype, fill), tuple(shape))


def with_shape(result: Tensor, shape: Sequence[int]) -> Tensor:
    """The same fresh result under another shape of equal element count (no copy: the result was
    never shared, so its storage can change owner)."""
    if tuple(shape) == result.shape:
        return result
    return Tensor._adopt(result._storage, tuple(shape))


# --------------------------------------------------------------------------------------------
# Elementwise
# --------------------------------------------------------------------------------------------


#: Unary ops with no integer or bool meaning in llmfs: their operands must be floats.
FLOAT_ONLY_UNARY = ("sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "reciprocal")


def _unary(op: str, x: object, dtype: object | None) -> Tensor:
    """Unary ``op``: answered by the fast path (:data:`planner`) when it covers the call, else
    by :func:`_unary_checked`, the rule as written."""
    if dtype is None and planner is not None:
        result = planner.unary(op, x)
        if result is not None:
            return result
    return _unary_checked(op, x, dtype)


def _unary_checked(op: str, x: object, dtype: object | None) -> Tensor:
    view = as_view(x, what=f"{op}'s operand")
    kind = view.dtype
    if op in FLOAT_ONLY_UNARY and not is_float(kind):
        raise refuse_dtype(op, kind, FLOAT_DTYPES, f"cast first, e.g. {op}(x.astype('float64'))")
    if op in ("neg", "relu") and is_bool(kind):
        advice = "use logical_not or ~ to flip bools" if op == "neg" else "cast first"
        raise refuse_dtype(op, kind, (*INTEGER_DTYPES, *FLOAT_DTYPES), advice)
    compute = compute_dtype([kind])
    if op == "logical_not":
        out, compute = output_dtype([np.dtype(np.bool_)], dtype), np.dtype(np.bool_)
    else:
        out = output_dtype([kind], dtype)
    if view.is_empty:
        return empty_result(view.shape, out)
    backend = backend_for("unary", op, kind)
    with allocating(element_count(view.shape), out):
        result = backend.unary(op, view, dtype=out, compute=compute)
    check_unchanged(view)
    return result


@differentiable("neg")
def neg(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``-x`` value by value."""
    return _unary("neg", x, dtype)


@differentiable("abs")
def abs(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``|x|`` value by value."""
    return _unary("abs", x, dtype)


@differentiable("sqrt")
def sqrt(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Square root; NaN for negative values (IEEE)."""
    return _unary("sqrt", x, dtype)


@differentiable("exp")
def exp(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``e**x``; inf where it overflows."""
    return _unary("exp", x, dtype)


@differentiable("log")
def log(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Natural logarithm; ``log(0)`` is -inf and a negative value gives NaN."""
    return _unary("log", x, dtype)


@differentiable("sin")
def sin(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Sine (radians); NaN for infinities."""
    return _unary("sin", x, dtype)


@differentiable("cos")
def cos(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Cosine (radians); NaN for infinities."""
    return _unary("cos", x, dtype)


@differentiable("tanh")
def tanh(x: Operand, *, dtype: object | None = None) -> Tensor:
    """Hyperbolic tangent."""
    return _unary("tanh", x, dtype)


@differentiable("sigmoid")
def sigmoid(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``1 / (1 + e**-x)``, computed without overflow for any ``x``."""
    return _unary("sigmoid", x, dtype)


@differentiable("relu")
def relu(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``max(x, 0)``; NaN stays NaN."""
    return _unary("relu", x, dtype)


@differentiable("reciprocal")
def reciprocal(x: Operand, *, dtype: object | None = None) -> Tensor:
    """``1 / x``; +-inf at zero."""
    return _unary("reciprocal", x, dtype)


def logical_not(x: Operand) -> Tensor:
    """``True`` where ``x`` is zero (``~`` on bool tensors); a bool tensor for any dtype."""
    return _unary("logical_not", x, None)


def broadcast_operands(
    *values: object, what: str = "operand", dtype: np.dtype | None = None
) -> list[TensorView]:
    """Views of the operands expanded (zero strides) to their common broadcast shape.

    Python scalars become 0-d operands of ``dtype`` when given, else of the promoted dtype of all
    operands with the numbers weak (NumPy 2: ``int32`` tensor and ``1`` give int32, and ``0.5``
    float64). Raises :class:`BroadcastError` naming both shapes and the axis, or
    :class:`TensorError` when no operand is a tensor.
    """
    scalars = [is_scalar(v) for v in values]
    converted = [
        None if number else as_view(v, what=what, numbers=True)
        for v, number in zip(values, scalars)
    ]
    tensors = [view for view in converted if view is not None]
    if not tensors:
        shown = ", ".join(repr(v) for v in values)
        raise TensorError(
            f"at least one {what} must be a Tensor or TensorView, but all were numbers ({shown}): "
            f"compute with Python numbers directly"
        )
    if dtype is None:
        dtype = promote(*(t.dtype for t in tensors), *(v for v, n in zip(values, scalars) if n))
    views = [
        scalar_view(v, dtype) if view is None else view  # type: ignore[arg-type]
        for v, view in zip(values, converted)
    ]
    shape = broadcast_shapes(*(v.shape for v in views))
    return [v if v.shape == shape else v.expand(shape) for v in views]


def _binary_dtypes(op: str, promoted: np.dtype) -> tuple[np.dtype, np.dtype]:
    """The (natural result, compute) dtypes of binary ``op`` on operands promoting to
    ``promoted``; raises :class:`DTypeError` for the ops NumPy refuses on bools."""
    compute: np.dtype = compute_dtype([promoted])
    if op in LOGICAL_OPS:
        return np.dtype(np.bool_), np.dtype(np.bool_)
    if op in COMPARISON_OPS:
        return np.dtype(np.bool_), compute
    if op == "div" and not is_float(promoted):
        return np.dtype(np.float64), np.dtype(np.float64)  # true division, as NumPy
    if is_bool(promoted) and op == "sub":
        raise refuse_dtype(
            "sub", promoted, (*INTEGER_DTYPES, *FLOAT_DTYPES), "use logical_xor or ^ on bools"
        )
    if is_bool(promoted) and op in ("power", "floor_divide", "remainder"):
        raise refuse_dtype(
            op,
            promoted,
            (*INTEGER_DTYPES, *FLOAT_DTYPES),
            "cast first, e.g. x.astype('int64')",
        )
    return promoted, compute


def _binary_checked(op: str, a: object, b: object, dtype: object | None) -> Tensor:
    left, right = broadcast_operands(a, b, what=f"{op}'s operand")
    promoted = widest_dtype([left.dtype, right.dtype])
    natural, compute = _binary_dtypes(op, promoted)
    out = resolve_dtype(dtype, where="an op's dtype= argument") if dtype is not None else natural
    if left.is_empty:
        return empty_result(left.shape, out)
    backend = backend_for("binary", op, promoted)
    with allocating(element_count(left.shape), out):
        if op == "power" and is_integer(compute):
            _check_integer_exponents(right)
        result = backend.binary(op, left, right, dtype=out, compute=compute)
    check_unchanged(left, right)
    return result


def _binary(op: str, a: object, b: object, dtype: object | None) -> Tensor:
    """Binary ``op``: answered by the fast path (:data:`planner`) when it covers the call, else
    by :func:`_binary_checked`, the rule as written."""
    if dtype is None and planner is not None:
        result = planner.binary(op, a, b)
        if result is not None:
            return result
    return _binary_checked(op, a, b, dtype)


def _check_integer_exponents(exponents: TensorView) -> None:
    """NumPy's rule: integers to negative integer powers are not allowed (no integer result)."""
    smallest = without_repeats(read_array(exponents)).min()
    if smallest < 0:
        raise TensorError(
            f"integers to negative integer powers are not allowed (an exponent is {smallest}); "
            f"cast to float first, e.g. x.astype('float64') ** y"
        )


@differentiable("add")
def add(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a + b`` with broadcasting; either side may be a real Python number."""
    return _binary("add", a, b, dtype)


@differentiable("sub")
def sub(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a - b`` with broadcasting; either side may be a real Python number."""
    return _binary("sub", a, b, dtype)


@differentiable("mul")
def mul(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a * b`` with broadcasting; either side may be a real Python number."""
    return _binary("mul", a, b, dtype)


@differentiable("div")
def div(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a / b`` with broadcasting (IEEE: ``x/0`` is +-inf, ``0/0`` NaN); true division, so
    integer and bool operands give float64 (NumPy's ``true_divide``)."""
    return _binary("div", a, b, dtype)


@differentiable("power")
def power(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a ** b`` with broadcasting. Integers stay integers (wrapping on overflow) and a negative
    integer exponent is a :class:`TensorError`, as in NumPy; two bool operands are a
    :class:`DTypeError` (NumPy would make int8, which llmfs does not store)."""
    return _binary("power", a, b, dtype)


@differentiable("floor_divide")
def floor_divide(
    a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None
) -> Tensor:
    """``a // b`` with broadcasting: the quotient rounded towards -inf (NumPy's
    ``floor_divide``). Integers stay integers and ``x // 0`` is 0 for them; for floats it is
    ``x / 0`` (+-inf, or NaN for ``0 // 0``). Two bool operands are a :class:`DTypeError`."""
    return _binary("floor_divide", a, b, dtype)


@differentiable("remainder")
def remainder(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """``a % b`` with broadcasting: the remainder with the sign of ``b`` (NumPy's
    ``remainder``, Python's ``%``). ``x % 0`` is 0 for integers and NaN for floats. Two bool
    operands are a :class:`DTypeError`."""
    return _binary("remainder", a, b, dtype)


def equal(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """``a == b`` value by value, with broadcasting: a bool tensor (NaN equals nothing)."""
    return _binary("equal", a, b, None)


def not_equal(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """``a != b`` value by value, with broadcasting: a bool tensor (NaN differs from all)."""
    return _binary("not_equal", a, b, None)


def less(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """``a < b`` value by value, with broadcasting: a bool tensor."""
    return _binary("less", a, b, None)


def less_equal(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """``a <= b`` value by value, with broadcasting: a bool tensor."""
    return _binary("less_equal", a, b, None)


def greater(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """``a > b`` value by value, with broadcasting: a bool tensor."""
    return _binary("greater", a, b, None)


def greater_equal(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """``a >= b`` value by value, with broadcasting: a bool tensor."""
    return _binary("greater_equal", a, b, None)


def logical_and(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """Both values non-zero, value by value with broadcasting: a bool tensor."""
    return _binary("logical_and", a, b, None)


def logical_or(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """Either value non-zero, value by value with broadcasting: a bool tensor."""
    return _binary("logical_or", a, b, None)


def logical_xor(a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """Exactly one value non-zero, value by value with broadcasting: a bool tensor."""
    return _binary("logical_xor", a, b, None)


@differentiable("minimum")
def minimum(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """The smaller of each pair, with broadcasting; NaN if either is NaN."""
    return _binary("minimum", a, b, dtype)


@differentiable("maximum")
def maximum(a: Operand | Scalar, b: Operand | Scalar, *, dtype: object | None = None) -> Tensor:
    """The larger of each pair, with broadcasting; NaN if either is NaN."""
    return _binary("maximum", a, b, dtype)


@differentiable("scale")
def scale(x: Operand, alpha: Scalar, *, dtype: object | None = None) -> Tensor:
    """``alpha * x`` for a real number ``alpha`` , in ``x``'s dtype.

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


def _reduction_dtypes(op: str, dtype: np.dtype) -> tuple[np.dtype, np.dtype]:
    """NumPy's (result, compute) dtypes of reduction ``op`` over values of ``dtype``: integers and
    bools sum and multiply in int64 and average in float64; ``any``/``all`` give bools; the rest
    keep the dtype (floats computed as in :func:`compute_dtype`)."""
    if op in ("any", "all"):
        return np.dtype(np.bool_), np.dtype(np.bool_)
    if not is_float(dtype):
        if op in ("sum", "prod"):
            return np.dtype(np.int64), np.dtype(np.int64)
        if op == "mean":
            return np.dtype(np.float64), np.dtype(np.float64)
    return dtype, compute_dtype([dtype])


#: What a reduction over an empty axis gives, for the reductions that have an identity.
_IDENTITY = {"sum": 0, "prod": 1, "any": False, "all": True}


def _reduction(op: str, x: object, axis: object, keepdims: object, dtype: object | None) -> Tensor:
    """Reduction ``op``: answered by the fast path (:data:`planner`) when it covers the call,
    else by :func:`_reduction_checked`, the rule as written."""
    if dtype is None and planner is not None:
        result = planner.reduction(op, x, axis, keepdims)
        if result is not None:
            return result
    return _reduction_checked(op, x, axis, keepdims, dtype)


def _reduction_checked(
    op: str, x: object, axis: object, keepdims: object, dtype: object | None
) -> Tensor:
    view = as_view(x, what=f"{op}'s operand")
    keep = _check_keepdims(op, keepdims)
    if axis is None:
        axes: tuple[int, ...] = tuple(range(view.rank))
    else:
        axes = tuple(sorted(normalize_axes(axis, view.rank)))
    natural, compute = _reduction_dtypes(op, view.dtype)
    out = natural if dtype is None else resolve_dtype(dtype, where="an op's dtype= argument")
    shape = reduced_shape(view.shape, axes)
    final = reduced_shape(view.shape, axes, keep)
    empty_axis = builtins.any(view.shape[a] == 0 for a in axes)
    if empty_axis and op not in _IDENTITY:
        raise EmptyReductionError(op, view.shape, axes)  # even when no output value is asked
    if element_count(shape) == 0:
        return empty_result(final, out)
    if empty_axis:
        return empty_result(final, out, _IDENTITY[op])
    with allocating(element_count(shape), out):
        if not axes:  # reducing nothing leaves every value as it is (converted to the result dtype)
            result = backend_for("copy", None, view.dtype).copy(view, dtype=out)
        else:
            check_reads(view.size, view.dtype, f"{op} over axes {list(axes)}")
            backend = backend_for("reduce", op, view.dtype)
            result = backend.reduce(op, view, axes, dtype=out, compute=compute)
    check_unchanged(view)
    return with_shape(result, final)


@differentiable("sum")
def sum(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Sum over ``axis`` (an int, a negative int, a tuple or list of distinct axes, ``()`` for
    none, ``None`` for all); ``keepdims`` keeps reduced axes as size 1. An empty axis sums to 0.

    Raises :class:`AxisOutOfRangeError` or :class:`DuplicateAxisError` for bad axes, and
    :class:`TensorError` when ``keepdims`` is not a bool.
    """
    return _reduction("sum", x, axis, keepdims, dtype)


@differentiable("prod")
def prod(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Product over ``axis`` (as :func:`sum`); an empty axis gives 1."""
    return _reduction("prod", x, axis, keepdims, dtype)


@differentiable("max")
def max(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Largest value over ``axis`` (as :func:`sum`); NaN if any value is NaN.

    Raises :class:`EmptyReductionError` when a reduced axis is empty.
    """
    return _reduction("max", x, axis, keepdims, dtype)


@differentiable("min")
def min(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Smallest value over ``axis`` (as :func:`sum`); NaN if any value is NaN.

    Raises :class:`EmptyReductionError` when a reduced axis is empty.
    """
    return _reduction("min", x, axis, keepdims, dtype)


@differentiable("mean")
def mean(
    x: Operand, axis: object = None, *, keepdims: bool = False, dtype: object | None = None
) -> Tensor:
    """Arithmetic mean over ``axis`` (as :func:`sum`).

    Raises :class:`EmptyReductionError` when a reduced axis is empty (instead of NaN).
    """
    return _reduction("mean", x, axis, keepdims, dtype)


def any(x: Operand, axis: object = None, *, keepdims: bool = False) -> Tensor:
    """Whether any value over ``axis`` (as :func:`sum`) is non-zero (NaN counts): a bool tensor.
    An empty axis gives False."""
    return _reduction("any", x, axis, keepdims, None)


def all(x: Operand, axis: object = None, *, keepdims: bool = False) -> Tensor:
    """Whether every value over ``axis`` (as :func:`sum`) is non-zero (NaN counts): a bool
    tensor. An empty axis gives True."""
    return _reduction("all", x, axis, keepdims, None)


_REDUCTIONS = ("sum", "prod", "max", "min", "mean")


def _modes(modes: object, what: str, modes_in: object, modes_out: object) -> tuple[object, ...]:
    if isinstance(modes, (str, list, tuple)):
        return tuple(modes)
    raise ReduceError(
        modes_in,
        modes_out,
        f"{what} must be a string of letters or a list of labels, got {type(modes).__name__}",
    )


@differentiable("reduce")
def reduce(
    x: Operand,
    modes_in: object,
    modes_out: object,
    op: str = "sum",
    *,
    dtype: object | None = None,
) -> Tensor:
    """Reduction by mode labels: ``modes_in`` names each axis of ``x`` (a string such as
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
# Selection and conversion: where, take, astype
# --------------------------------------------------------------------------------------------


@differentiable("where")
def where(cond: Operand, a: Operand | Scalar, b: Operand | Scalar) -> Tensor:
    """``a`` where ``cond`` is non-zero, else ``b``, with the three broadcast together (NumPy's
    ``where``). ``cond`` is a tensor of any dtype; ``a`` and ``b`` are tensors or real numbers,
    and the result has their promoted dtype (numbers weak, as for :func:`add`).

    Raises :class:`TensorError` when ``cond`` is not a tensor and :class:`BroadcastError` when
    the shapes do not broadcast.
    """
    condition = as_view(cond, what="where's condition")
    choices = [v for v in (a, b) if not is_scalar(v)]
    kinds = [as_view(v, what="where's operand", numbers=True).dtype for v in choices]
    out = promote(*kinds, *(v for v in (a, b) if is_scalar(v)))
    picked = [scalar_view(v, out) if is_scalar(v) else as_view(v) for v in (a, b)]  # type: ignore[arg-type]
    shape = broadcast_shapes(condition.shape, picked[0].shape, picked[1].shape)
    views = [v if v.shape == shape else v.expand(shape) for v in (condition, *picked)]
    if element_count(shape) == 0:
        return empty_result(shape, out)
    with allocating(element_count(shape), out):
        result = backend_for("where", None, out).where(views[0], views[1], views[2], dtype=out)
    check_unchanged(*views)
    return result


@differentiable("take")
def take(x: ViewMethods, ids: ViewMethods, axis: int = 0) -> Tensor:
    """NumPy's ``take``: the entries of ``x`` along ``axis`` chosen by the integer tensor ``ids``
    (negative ids count from the end). The result's shape is ``x.shape[:axis] + ids.shape +
    x.shape[axis + 1:]``, its dtype ``x``'s. With ``axis=0`` this is an embedding lookup:
    ``take(table, ids)`` for a ``[vocab, d]`` table has shape ``ids.shape + [d]``.
    ``x[ids]`` is the same for ``axis=0``.

    Raises :class:`DTypeError` when ``ids`` is not int32/int64, :class:`AxisOutOfRangeError` for
    a bad axis, and :class:`IndexOutOfBoundsError` naming the first id outside ``[-size, size)``,
    the axis and its size.
    """
    table = as_view(x, what="take's operand")
    index = as_view(ids, what="take's ids", hint=" (make ids with Tensor.from_vec)")
    if not is_integer(index.dtype):
        advice = "ids must be integers, e.g. ids.astype('int64')"
        if is_bool(index.dtype):  # NumPy's x[mask]: a shape that depends on the values
            advice += "; boolean-mask selection is not supported, where(mask, x, 0) keeps shapes"
        raise refuse_dtype(
            "take's ids",
            index.dtype,
            INTEGER_DTYPES,
            advice,
        )
    ax = normalize_axis(axis, table.rank)
    size = table.shape[ax]
    shape = (*table.shape[:ax], *index.shape, *table.shape[ax + 1 :])
    with allocating(element_count(shape), table.dtype):
        if not index.is_empty:
            _check_ids(index, ax, size)
        if element_count(shape) == 0:
            return empty_result(shape, table.dtype)
        result = backend_for("take", None, table.dtype).take(table, index, ax, dtype=table.dtype)
    check_unchanged(table, index)
    return result


def _check_ids(index: TensorView, axis: int, size: int) -> None:
    """Raises :class:`IndexOutOfBoundsError` naming the first id outside ``[-size, size)``.

    The smallest and largest ids decide (each stored id read once, :func:`without_repeats`);
    only when one is outside is the first such id looked for.
    """
    check_reads(index.size, index.dtype, "take's check of its ids")
    values = without_repeats(read_array(index))
    low, high = int(values.min()), int(values.max())
    if -size <= low and high < size:
        return
    outside = (values < -size) | (values >= size)
    raise IndexOutOfBoundsError(axis, int(values[outside].flat[0]), size, what="id", from_end=True)


@differentiable("astype")
def astype(x: Operand, dtype: object) -> Tensor:
    """A NEW tensor holding ``x``'s values converted to ``dtype`` (NumPy's ``astype``; always a
    copy). Floats to integers truncate towards zero; anything non-zero becomes True; integers
    that do not fit a narrower integer dtype wrap around, as in NumPy.

    Raises :class:`DTypeError` for an unsupported dtype and :class:`TensorError` when a float
    value has no integer counterpart (NaN, an infinity, or outside the integer range), where
    NumPy would silently write an arbitrary number.
    """
    view = as_view(x, what="astype's operand")
    target = resolve_dtype(dtype, where="astype")
    if view.is_empty:
        return empty_result(view.shape, target)
    with allocating(view.size, target):
        if is_integer(target) and is_float(view.dtype):
            check_integer_cast(read_array(view), target, where=f"astype({target.name})")
        result = backend_for("copy", None, view.dtype).copy(view, dtype=target)
    check_unchanged(view)
    return result


# --------------------------------------------------------------------------------------------
# Matmul
# --------------------------------------------------------------------------------------------


@differentiable("matmul")
def matmul(a: Operand, b: Operand, *, dtype: object | None = None) -> Tensor:
    """Matrix product with NumPy's ``@`` rules: the last two axes are matrices, leading axes are
    batch axes that broadcast; a 1-D ``a`` is a row vector and a 1-D ``b`` a column vector (the
    added axis is dropped from the result).

    Raises :class:`MatmulShapeError` for a 0-d operand or when ``a``'s last size differs from
    ``b``'s second-to-last (naming both sizes), and :class:`BroadcastError` when the batch
    axes do not broadcast.
    """
    if dtype is None and planner is not None:
        result = planner.matmul(a, b)
        if result is not None:
            return result
    return _matmul_checked(a, b, dtype)


def _matmul_checked(a: Operand, b: Operand, dtype: object | None) -> Tensor:
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
    given = (left, right)  # the work limit applies to these, not to the batch broadcast
    left = left.expand((*batch, rows, inner_a))
    right = right.expand((*batch, inner_b, cols))
    final = (*batch, *(() if drop_rows else (rows,)), *(() if drop_cols else (cols,)))
    dtypes = [left.dtype, right.dtype]
    out = output_dtype(dtypes, dtype)
    if element_count((*batch, rows, cols)) == 0 or inner_a == 0:
        return empty_result(final, out)  # no values, or each one a sum of nothing (0)
    backend = backend_for("matmul", None, widest_dtype(dtypes))
    with allocating(element_count(final), out):
        for operand in given:
            check_reads(operand.size, operand.dtype, "matmul")
        result = backend.matmul(left, right, dtype=out, compute=compute_dtype(dtypes))
    check_unchanged(left, right)
    return with_shape(result, final)


__all__ = [
    "ReduceError",
    "abs",
    "add",
    "all",
    "any",
    "as_view",
    "astype",
    "cos",
    "div",
    "equal",
    "exp",
    "floor_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "log",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mul",
    "neg",
    "not_equal",
    "power",
    "prod",
    "reciprocal",
    "reduce",
    "relu",
    "remainder",
    "scale",
    "sigmoid",
    "sin",
    "sqrt",
    "sub",
    "sum",
    "take",
    "tanh",
    "where",
]

above.provide("ops", sys.modules[__name__])
