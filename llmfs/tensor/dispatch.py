"""The ops' cached dispatch: the decisions of a small op, worked out once per kind of call.

This is speed code, above the ops: the ops (:mod:`llmfs.tensor.ops`) state each rule once and
ask one hook, :data:`llmfs.tensor.ops.planner`, before running it; :func:`install` (called
when :mod:`llmfs.tensor` is imported) puts this module there, and the derived-layout memo of
the views (:mod:`llmfs.tensor.derived`) in front of the view methods. Without it every call
runs the rule as written, which is what a reader of the core reads.

Every op of :mod:`llmfs.tensor.ops` checks its operands, decides the result dtype, the broadcast
shape, the backend and the NumPy call, then runs it. For a small operand (an 8x8 matrix, one
token's activations) that Python work costs far more than the arithmetic, and it is the same
every time the same op meets operands of the same shapes and dtypes. So the ops remember the
decision (a *plan*) under a key of exactly what it depends on, and a later call with the same key
skips straight to the NumPy call. The rules themselves are not changed or bypassed:

* **A plan is made from a call that went through every check and succeeded**: the op first runs
  on its full path (so any error is the full path's error, with its message), and only then is
  the plan stored, worked out by the same rule functions (:func:`~llmfs.tensor.dtypes.promote`,
  the broadcast rule, the backend's ``supports``). A call that fails is never remembered.
* **The key holds everything the decision depends on**: the op, each operand's shape and dtype
  (for a weak Python number: its type, ``float`` or ``int``, whose promotion never depends on the
  value for the plans made), and whatever else the op's decision reads (axes, ``keepdims``,
  strides where the NumPy call depends on them). Values, versions and offsets are not in it,
  because no decision depends on them; they are read on every call.
* **What is checked on every call stays checked on every call**: an operand must be a Tensor
  or a TensorView whose owner is not being written and (for a view) has not moved on since the
  view was made; otherwise the call takes the full path, which raises
  :class:`~llmfs.tensor.errors.StaleViewError` or :class:`~llmfs.tensor.errors.ConcurrentWriteError`
  as before. After reading, the owners' versions are checked again, exactly as the full path does.
* **Only the NumPy backend** (exactly :class:`NumpyBackend`, the default, as loaded now) is
  planned for: its primitives are plain NumPy calls whose tables (``BINARY``, ``UNARY``,
  ``REDUCE``) the plans use, so the cached call is the call the backend makes. Any other active
  backend (``reference``, Metal, one a test registers) takes the full path on every call.
* **Only small results** (at most :data:`MAX_VALUES` values, none empty) are planned: their
  allocation is always possible (the full path's size checks passed once and depend only on
  the count and dtype), and a ``MemoryError`` still goes back through the full path, which
  turns it into an :class:`~llmfs.tensor.errors.AllocationError`.

A planned op reads a whole owner through the ndarray the owner keeps of its storage with its
shape (:func:`shaped`, made once per owner; a planned result keeps the array it was computed in),
so a chain of small ops does not reshape its operands on every call. It is a view of the
storage, so every write is seen; storage and shape of an owner never change.

NumPy's floating-point error state is "ignore" during the cached call (what the backend's
``np.errstate(all="ignore")`` does): the call runs in a context of this thread's own in which
NumPy's own context variable holds that state (:func:`quiet_context`), the same state without
building an ``errstate`` object, or setting and resetting the variable, per call. When this NumPy
does not expose that variable, :data:`ENABLED` is False and every op takes the full path.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from llmfs.tensor import backends as registry
from llmfs.tensor import derived as derived_module
from llmfs.tensor import ops
from llmfs.tensor import view as view_module
from llmfs.tensor.backends import get_backend, numpy_backend
from llmfs.tensor.backends.numpy_backend import (
    NumpyBackend,
    matrix_orientation,
    shared_matrix_rows,
)
from llmfs.tensor.errors import ConcurrentWriteError
from llmfs.tensor.layout import (
    Layout,
    broadcast_shapes,
    element_count,
    normalize_axes,
    reduced_shape,
    row_major_strides,
    zero_unused_strides,
)
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView

#: The largest result (in values) an op plans for: 2**18, where one elementwise op's arithmetic
#: on float32 (about 40 us) still only matches the full path's Python work (a training step's
#: activations, ``[64, 8, 256]``, are below it); above it the Python work is small next to the
#: arithmetic, and the full path (with the backend's threads and size checks) runs.
MAX_VALUES = 1 << 18

#: At most this many plans are kept; past it the cache starts again (shapes seen in a long
#: generation loop must not grow it without bound).
MAX_PLANS = 4096

#: A Python int operand is planned for only within +-2**53, where every float dtype's rounding
#: of it is the rounding of the int64 the full path makes of it.
EXACT_INT = 1 << 53

#: Plans by key; ``False`` marks a key that is never planned (the full path runs every time).
PLANS: dict[tuple[object, ...], Any] = {}

#: The plan each binary op and the matrix product used last, with the very objects its key was
#: made of (shapes, dtypes; for matmul the two layouts): a call whose operands bring the same
#: objects (the same tensors again, or results of one plan, which share their layout) takes
#: that plan without building and hashing its key. Identical objects have equal keys, and the
#: entry holds them, so none of them can be freed and its id reused while it is here.
LAST: dict[str, tuple[Any, ...]] = {}

#: The same for calls whose operands are all whole owners (Tensors), by the objects the planned
#: ops read without building a key: each operand's Layout and dtype (and for a reduction its
#: ``axis`` and ``keepdims``), with the plan; one table per kind of op (binary, unary, reduction).
LAST_OWNERS: dict[str, tuple[Any, ...]] = {}
LAST_UNARY: dict[str, tuple[Any, ...]] = {}
LAST_REDUCE: dict[str, tuple[Any, ...]] = {}

#: What :func:`numpy_is_active` reads, bound once: the registry's loaded backends (a dict that is
#: updated, never replaced) and the context variable naming the backend a block chose.
_LOADED = registry._loaded
_ACTIVE = registry._active
_new = object.__new__

#: Byte strides of the NumPy arrays the backend reads a layout through, by (shape, strides,
#: itemsize): the same numbers :func:`~llmfs.tensor.strided.numpy_view` computes.
_BYTE_STRIDES: dict[tuple[object, ...], tuple[int, ...]] = {}

try:  # NumPy's floating-point error state (NumPy 2: one context variable per thread/task).
    from numpy._core._ufunc_config import (  # type: ignore[attr-defined]
        _extobj_contextvar as ERROR_STATE,
    )

    with np.errstate(all="ignore"):
        QUIET: Any = ERROR_STATE.get()
    ENABLED = True
except (ImportError, AttributeError):  # pragma: no cover - depends on the NumPy version
    ERROR_STATE = None
    QUIET = None
    ENABLED = False


#: Per thread (by ``threading.get_ident()``), a context of its own in which NumPy's error state is
#: QUIET: ``context.run(ufunc, ...)`` makes a call with every floating-point error ignored, as
#: setting and resetting the state around it does, for the cost of one call instead of two. (A
#: context is entered by one thread at a time, hence one per thread; nothing else is set in it,
#: and a ufunc on numbers reads nothing else.)
_QUIET_CONTEXTS: dict[int, contextvars.Context] = {}
_thread_id = threading.get_ident


def quiet_context() -> contextvars.Context:
    """This thread's context of :data:`_QUIET_CONTEXTS` (made on its first call)."""
    ident = _thread_id()
    context = _QUIET_CONTEXTS.get(ident)
    if context is None:
        if len(_QUIET_CONTEXTS) >= MAX_PLANS:  # ids of finished threads: start again
            _QUIET_CONTEXTS.clear()
        context = contextvars.Context()
        context.run(ERROR_STATE.set, QUIET)
        _QUIET_CONTEXTS[ident] = context
    return context


#: The row-major layout at offset 0 of each small non-empty shape copied so far (a Layout is
#: immutable, so every result of one shape may share it).
ROW_MAJOR: dict[tuple[int, ...], Layout] = {}

#: What a planned elementwise op reads of one operand (:func:`elementwise_operand`).
Read = tuple[object, object, Any, Tensor | None, int]


def row_major_layout(shape: tuple[int, ...]) -> Layout:
    """The row-major ``Layout`` of a checked ``shape`` (remembered in :data:`ROW_MAJOR`)."""
    layout = ROW_MAJOR.get(shape)
    if layout is None:
        if len(ROW_MAJOR) >= MAX_PLANS:
            ROW_MAJOR.clear()
        layout = ROW_MAJOR[shape] = Layout(shape, row_major_strides(shape), 0)
    return layout


def clear() -> None:
    """Forgets every plan (they are made again on the next calls)."""
    PLANS.clear()
    LAST.clear()
    LAST_OWNERS.clear()
    LAST_UNARY.clear()
    LAST_REDUCE.clear()
    _BYTE_STRIDES.clear()
    ROW_MAJOR.clear()


def remember(key: tuple[object, ...], plan: object) -> None:
    """Stores ``plan`` (or ``False``: never plan this key) under ``key``, starting the cache
    again when it is full."""
    if len(PLANS) >= MAX_PLANS:
        PLANS.clear()
        for last in (LAST, LAST_OWNERS, LAST_UNARY, LAST_REDUCE):
            last.clear()
    PLANS[key] = plan


#: Above 0 while some block has the caches suspended (:func:`suspended`).
_suspended = 0
_SUSPEND_LOCK = threading.Lock()


@contextmanager
def suspended() -> Iterator[None]:
    """Inside the block (on every thread) no cache answers for a rule: each op takes its full
    path and each view method runs its layout rule, as on a first call. Blocks may nest.

    A cache is in front of the rule functions it remembers, so while it answers they are not
    called; code that must see every call of a rule (the implement checks' shortcut guard,
    :mod:`llmfs.course.exercise_checks.shortcuts`) runs inside this block."""
    global _suspended
    with _SUSPEND_LOCK:
        _suspended += 1
        derived_module.suspended += 1
    try:
        yield
    finally:
        with _SUSPEND_LOCK:
            _suspended -= 1
            derived_module.suspended -= 1


def numpy_is_active() -> bool:
    """True when the backend ops would use now is exactly :class:`NumpyBackend` (the lookup
    :func:`~llmfs.tensor.backends.get_backend` makes, without its checks: a name that is not
    loaded yet is simply not planned for)."""
    if not ENABLED or _suspended:
        return False
    return type(_LOADED.get(_ACTIVE.get() or registry._default)) is NumpyBackend


def result_owner(storage: np.ndarray, layout: Layout, array: np.ndarray | None) -> Tensor:
    """A planned op's result: :meth:`Tensor._adopt_layout` of ``storage`` (the only reference
    to a fresh contiguous 1-D array), the row-major ``layout`` and ``array`` (``storage`` with
    ``layout.shape``, or ``None``). Every field is set by ``Tensor._init_layout``, the one
    rule for a new owner, which the course's copy counter watches (the binary ops make the
    same call; ``tests/tensor/test_dispatch.py`` checks that both give what ``_adopt_layout``
    gives, field by field)."""
    result = _new(Tensor)
    result._init_layout(storage, layout, array)  # the one owner rule
    return result


def strided_array(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """The ndarray over ``storage`` through a validated, non-empty ``layout``: the same shape,
    byte strides (0 for size-1 axes) and offset as :func:`~llmfs.tensor.strided.numpy_view`,
    so NumPy sees the very array the backend would pass it."""
    shape = layout.shape
    itemsize = storage.itemsize
    key = (shape, layout.strides, itemsize)
    steps = _BYTE_STRIDES.get(key)
    if steps is None:
        steps = tuple(stride * itemsize for stride in zero_unused_strides(shape, layout.strides))
        if len(_BYTE_STRIDES) >= MAX_PLANS:
            _BYTE_STRIDES.clear()
        _BYTE_STRIDES[key] = steps
    return np.ndarray(shape, storage.dtype, storage, layout.offset * itemsize, steps)


def shaped(tensor: Tensor) -> np.ndarray:
    """The storage of ``tensor`` as an ndarray of its shape (NumPy's ``storage.reshape(shape)``,
    row-major), made once and kept on the owner (:attr:`~llmfs.tensor.tensor.Tensor._shaped`).

    It differs from :func:`strided_array` of the owner's layout only in the strides of size-1
    axes (NumPy's row-major value there, 0 here), which an elementwise op or a reduction never
    applies; a matrix product reads it only for operands without size-1 axes (its matrices'
    strides decide whether BLAS reads them)."""
    array = tensor._shaped
    if array is None:
        array = tensor._shaped = tensor._storage.reshape(tensor._layout.shape)
    return array


def keeps_array(computed: tuple[int, ...], final: tuple[int, ...]) -> bool:
    """Whether a planned op may keep the fresh row-major array of shape ``computed`` that it
    computed a result of shape ``final`` in, as the result's
    :attr:`~llmfs.tensor.tensor.Tensor._shaped` (what :func:`shaped` would make of it): when the
    shapes are equal (no vector axis of a matrix product or kept reduced axis between them)."""
    return computed == final


def fresh_owner(x: object) -> Tensor | None:
    """The owner of ``x`` when ``x`` is a Tensor, or a TensorView still at its owner's version,
    and no write of that owner is going on; else ``None`` (the full path then raises the right
    error, or accepts what this does not know)."""
    kind = type(x)
    if kind is Tensor:
        return None if x._writer else x  # type: ignore[attr-defined, return-value]
    if kind is TensorView:
        owner: Tensor = x._owner  # type: ignore[attr-defined]
        if owner._writer or owner._version != x._version:  # type: ignore[attr-defined]
            return None
        return owner
    return None


def elementwise_operand(x: object) -> Read | None:
    """What a planned elementwise op needs of one operand: ``(shape, dtype, array, owner,
    version)`` for a fresh Tensor or TensorView (the array reads its values in place; an
    elementwise result does not depend on the strides NumPy reads them with), ``(float, None,
    x, None, 0)`` / ``(int, None, x, None, 0)`` for a weak Python float or int (ints within
    :data:`EXACT_INT` only), else ``None``."""
    kind = type(x)
    if kind is Tensor:
        if x._writer:  # type: ignore[attr-defined]
            return None
        array = x._shaped  # type: ignore[attr-defined]
        if array is None:
            array = shaped(x)  # type: ignore[arg-type]
        return x._layout.shape, array.dtype, array, x, x._version  # type: ignore
    if kind is TensorView:
        owner = x._owner  # type: ignore[attr-defined]
        version = x._version  # type: ignore[attr-defined]
        if owner._writer or owner._version != version:
            return None
        layout = x._layout  # type: ignore[attr-defined]
        if 0 in layout.shape:
            return None
        storage = owner._storage
        try:
            array = strided_array(storage, layout)
        except ValueError:  # more bytes than an ndarray describes: the full path says so
            return None
        return layout.shape, storage.dtype, array, owner, version
    if kind is float:
        return float, None, x, None, 0
    if kind is int and -EXACT_INT <= x <= EXACT_INT:  # type: ignore[operator]
        return int, None, x, None, 0
    return None


def check_unchanged(owner: Tensor | None, version: int) -> None:
    """After a planned op read ``owner`` at ``version``: the full path's check
    (:meth:`TensorView._check_unchanged`), raising :class:`ConcurrentWriteError` when another
    thread wrote it meanwhile or is writing it."""
    if owner is not None and (owner._writer or owner._version != version):
        raise ConcurrentWriteError(version, owner._version, window_open=bool(owner._writer))


# --------------------------------------------------------------------------------------------
# The planned ops (each answers a call the same way the op's full path does, or returns None)
# --------------------------------------------------------------------------------------------


def copy(x: object) -> Tensor | None:
    """``x.materialize()`` of a fresh, small, non-empty Tensor or TensorView on the NumPy
    backend: one NumPy copy of the very array the backend's copy reads (the values in logical
    row-major order; no order of copying changes a value), as a new owner. ``None`` for any
    other call, which takes :meth:`~llmfs.tensor.view.ViewMethods.materialize`'s full path."""
    owner = fresh_owner(x)
    if owner is None or not numpy_is_active():
        return None
    layout = x._layout  # type: ignore[attr-defined]
    result_layout = ROW_MAJOR.get(layout.shape)
    if result_layout is None:
        if not 0 < layout.size <= MAX_VALUES:
            return None
        result_layout = row_major_layout(layout.shape)
    version = owner._version
    try:
        values = strided_array(owner._storage, layout).copy()  # C order: row-major
    except MemoryError:
        return None  # the full path turns it into an AllocationError with the numbers
    check_unchanged(owner, version)
    return result_owner(values.ravel(), result_layout, values)


def unary(op: str, x: object) -> Tensor | None:
    """A unary op through its plan (``None``: the call is not planned). A whole owner (the
    common call) is read inline, with the last plan of ``op`` taken again when its Layout and
    dtype are the very objects that plan was found for, and computed on its 1-D storage (an
    elementwise result does not depend on the shape the values are read with) into the 1-D
    storage of the result."""
    if (
        _suspended
        or not ENABLED
        or type(_LOADED.get(_ACTIVE.get() or registry._default)) is not NumpyBackend
    ):
        return None
    if type(x) is Tensor:
        if x._writer:
            return None
        storage = x._storage
        layout, dtype = x._layout, storage.dtype
        last = LAST_UNARY.get(op)
        if last is not None and last[0] is layout and last[1] is dtype:
            plan = last[2]
        else:
            key: tuple[object, ...] = (op, layout.shape, dtype)
            plan = PLANS.get(key)
            if plan is None:
                result = ops._unary_checked(op, x, None)  # every check; its errors are the op's
                remember(key, _unary_plan(op, dtype, result))
                return result
            LAST_UNARY[op] = (layout, dtype, plan)
        if plan is False:
            return None
        function, ufunc, out_dtype, compute, layout = plan
        version = x._version
        quiet = _QUIET_CONTEXTS.get(_thread_id()) or quiet_context()
        try:
            if ufunc is None:
                out = np.empty(storage.size, dtype=out_dtype)
                quiet.run(function, storage, out, compute)
            else:  # the operand is in the compute dtype: the ufunc's own loop and result
                out = quiet.run(ufunc, storage)
        except MemoryError:
            return ops._unary_checked(op, x, None)  # an AllocationError with the numbers
        if x._writer or x._version != version:
            check_unchanged(x, version)  # raises ConcurrentWriteError
        result = _new(Tensor)
        result._init_layout(out, layout, None)  # the one owner rule
        return result
    operand = elementwise_operand(x)
    if operand is None or operand[3] is None:
        return None
    key = (op, operand[0], operand[1])
    plan = PLANS.get(key)
    if plan is None:
        result = ops._unary_checked(op, x, None)  # every check; its errors are the op's
        remember(key, _unary_plan(op, operand[1], result))
        return result
    if plan is False:
        return None
    function, ufunc, out_dtype, compute, layout = plan
    quiet = _QUIET_CONTEXTS.get(_thread_id()) or quiet_context()
    try:
        if ufunc is None:
            out = np.empty(layout.shape, dtype=out_dtype)
            quiet.run(function, operand[2], out, compute)
        elif layout.shape:  # the operand is in the compute dtype: the ufunc's own loop,
            # which allocates the row-major result itself
            out = quiet.run(ufunc, operand[2], order="C")
        else:  # a 0-d result would be a NumPy scalar
            out = np.empty(layout.shape, dtype=out_dtype)
            quiet.run(ufunc, operand[2], out=out)
    except MemoryError:
        return ops._unary_checked(op, x, None)  # an AllocationError with the numbers
    check_unchanged(operand[3], operand[4])
    return result_owner(out.ravel(), layout, out)


def _unary_plan(op: str, kind: object, result: Tensor) -> object:
    """The plan of a unary call that just succeeded on the full path (``False``: never plan
    its key): the NumPy backend's function for ``op``, the result dtype, the compute dtype and
    the result's layout."""
    source: np.dtype = np.dtype(kind)  # type: ignore[call-overload]
    compute = np.dtype(np.bool_) if op == "logical_not" else ops.compute_dtype([source])
    natural = np.dtype(np.bool_) if op == "logical_not" else source
    backend = get_backend()
    if type(backend) is not NumpyBackend or not backend.supports("unary", op, source):
        return False
    if op not in numpy_backend.UNARY or not np.can_cast(compute, natural, "same_kind"):
        return False
    if result.dtype != natural or not 0 < result.size <= MAX_VALUES:
        return False
    plain = source == compute == natural
    ufunc = numpy_backend.UNARY_UFUNCS.get(op) if plain else None
    return (numpy_backend.UNARY[op], ufunc, natural, compute, result.layout)


def binary(op: str, a: object, b: object) -> Tensor | None:
    """Binary ``op`` through its plan (``None``: the call is not planned). The first call of a
    key runs the full path and stores the plan; later ones make the NumPy backend's ufunc call
    directly.

    Two whole owners (the common call) are read inline, with the last plan of ``op`` taken
    again when their layouts and dtypes are the very objects it was found for (a Layout is
    immutable: the same object is the same shape): this function runs on every small op."""
    if (
        _suspended
        or not ENABLED
        or type(_LOADED.get(_ACTIVE.get() or registry._default)) is not NumpyBackend
    ):
        return None
    if type(a) is Tensor and type(b) is Tensor:
        if a._writer or b._writer:
            return None  # the full path raises ConcurrentWriteError or runs the owner's write
        layout_a, layout_b = a._layout, b._layout
        array_a, array_b = a._shaped, b._shaped
        if array_a is None:
            array_a = shaped(a)
        if array_b is None:
            array_b = shaped(b)
        dtype_a, dtype_b = array_a.dtype, array_b.dtype
        last = LAST_OWNERS.get(op)
        if (
            last is not None
            and last[0] is layout_a
            and last[1] is layout_b
            and last[2] is dtype_a
            and last[3] is dtype_b
        ):
            plan = last[4]
        else:
            key: tuple[object, ...] = (op, layout_a.shape, dtype_a, layout_b.shape, dtype_b)
            plan = PLANS.get(key)
            if plan is None:
                result = ops._binary_checked(op, a, b, None)  # every check; its errors are the op's
                remember(key, _binary_plan(op, a, b, result))
                return result
            LAST_OWNERS[op] = (layout_a, layout_b, dtype_a, dtype_b, plan)
        if plan is False:
            return None
        ufunc, out_dtype, options, shape, layout = plan[:5]
        version_a, version_b = a._version, b._version
        quiet = _QUIET_CONTEXTS.get(_thread_id()) or quiet_context()
        try:
            if plan[7]:  # flat: the storages, one value each per result value
                out = quiet.run(ufunc, a._storage, b._storage)
            elif options is None:  # NumPy's own loop, which allocates the row-major result
                out = quiet.run(ufunc, array_a, array_b, order="C")
            else:
                out = np.empty(shape, dtype=out_dtype)
                quiet.run(ufunc, array_a, array_b, out=out, **options)
        except MemoryError:  # the full path turns it into an AllocationError with the numbers
            return ops._binary_checked(op, a, b, None)
        if a._writer or a._version != version_a:
            check_unchanged(a, version_a)  # raises ConcurrentWriteError
        if b._writer or b._version != version_b:
            check_unchanged(b, version_b)
        result = _new(Tensor)
        if plan[7]:
            result._init_layout(out, layout, None)  # the one owner rule
        else:
            result._init_layout(out.ravel(), layout, out)
        return result
    first = elementwise_operand(a)
    second = elementwise_operand(b)
    if first is None or second is None or (first[3] is None and second[3] is None):
        return None
    last = LAST.get(op)
    if (
        last is not None
        and last[0] is first[0]
        and last[1] is first[1]
        and last[2] is second[0]
        and last[3] is second[1]
    ):
        plan = last[4]
    else:
        key = (op, first[0], first[1], second[0], second[1])
        plan = PLANS.get(key)
        if plan is None:
            result = ops._binary_checked(op, a, b, None)  # every check; its errors are the op's
            remember(key, _binary_plan(op, a, b, result))
            return result
        LAST[op] = (first[0], first[1], second[0], second[1], plan)
    if plan is False:
        return None
    ufunc, out_dtype, options, shape, layout, left_dtype, right_dtype = plan[:7]
    quiet = _QUIET_CONTEXTS.get(_thread_id()) or quiet_context()
    try:
        # A number becomes a NumPy scalar of the promoted dtype (the value scalar_view stores;
        # one past the dtype's range rounds to +-inf, quietly).
        left = first[2] if left_dtype is None else quiet.run(left_dtype.type, a)
        right = second[2] if right_dtype is None else quiet.run(right_dtype.type, b)
        if options is None:  # every input is already in the compute dtype: NumPy's own loop,
            # which allocates the row-major result itself
            out = quiet.run(ufunc, left, right, order="C")
        else:
            out = np.empty(shape, dtype=out_dtype)
            quiet.run(ufunc, left, right, out=out, **options)
    except MemoryError:  # the full path turns it into an AllocationError with the numbers
        return ops._binary_checked(op, a, b, None)
    owner = first[3]
    if owner is not None and (owner._writer or owner._version != first[4]):
        check_unchanged(owner, first[4])  # raises ConcurrentWriteError
    owner = second[3]
    if owner is not None and (owner._writer or owner._version != second[4]):
        check_unchanged(owner, second[4])
    return result_owner(out.ravel(), layout, out)  # out: the result's kept array


def _binary_plan(op: str, a: object, b: object, result: Tensor) -> object:
    """The plan of a binary call that just succeeded on the full path with ``result``, or
    ``False`` when calls of its key must always take the full path: an empty or large result,
    an integer ``power`` (its exponents are checked value by value), a weak int next to an
    integer or bool tensor (its value decides whether it fits), an op the NumPy backend has
    no ufunc table entry for, or one the backend does not run itself."""
    numbers = [v for v in (a, b) if not isinstance(v, (Tensor, TensorView))]
    kinds = [v.dtype for v in (a, b) if isinstance(v, (Tensor, TensorView))]
    promoted = ops.promote(*kinds, *numbers)
    natural, compute = ops._binary_dtypes(op, promoted)
    if any(type(v) is int for v in numbers) and not ops.is_float(promoted):
        return False
    if result.dtype != natural or not 0 < result.size <= MAX_VALUES:
        return False
    if op == "power" and ops.is_integer(compute):
        return False
    backend = get_backend()
    if type(backend) is not NumpyBackend or not backend.supports("binary", op, promoted):
        return False
    if op in numpy_backend.BOOL_BINARY:
        ufunc = numpy_backend.BOOL_BINARY[op]
        options: dict[str, object] | None = (
            {} if op in ops.LOGICAL_OPS else {"signature": (compute, compute, np.dtype(np.bool_))}
        )
    elif op in numpy_backend.BINARY and np.can_cast(compute, natural, "same_kind"):
        ufunc, options = numpy_backend.BINARY[op], {"dtype": compute}
    else:
        return False
    scalar = [None if isinstance(v, (Tensor, TensorView)) else promoted for v in (a, b)]
    inputs = [*kinds, *(promoted for _ in numbers)]  # the numbers become the promoted dtype
    if (
        options == {"dtype": compute}
        and natural == compute
        and inputs == [compute, compute]
        and result.shape  # a 0-d NumPy result is a scalar, not an array
    ):
        options = None  # NumPy's own loop for these inputs is the compute loop
    # Two operands of the result's shape, read in NumPy's own loop: their 1-D storages give
    # the same values in the same order (no axis is broadcast), as a 1-D result, the new
    # owner's storage itself (no array of its shape is needed).
    shapes = [v.shape for v in (a, b) if isinstance(v, (Tensor, TensorView))]
    flat = options is None and shapes == [result.shape, result.shape]
    return (ufunc, natural, options, result.shape, result.layout, *scalar, flat)


def reduction(op: str, x: object, axis: object, keepdims: object) -> Tensor | None:
    """A reduction through its plan (``None``: the call is not planned). A whole owner with the
    very Layout, dtype, ``axis`` and ``keepdims`` objects of the last planned call of ``op``
    takes that plan again without building its key."""
    if (
        _suspended
        or not ENABLED
        or type(_LOADED.get(_ACTIVE.get() or registry._default)) is not NumpyBackend
    ):
        return None
    if type(x) is Tensor:
        if x._writer:
            return None
        owner = x
        layout = x._layout
        dtype = x._storage.dtype
        last = LAST_REDUCE.get(op)
        if (
            last is not None
            and last[0] is layout
            and last[1] is dtype
            and last[2] is axis
            and last[3] is keepdims
        ):
            plan = last[4]
            hit = True
        else:
            hit = False
    else:
        owner = fresh_owner(x)  # type: ignore[assignment]
        if owner is None:
            return None
        layout = x._layout  # type: ignore[attr-defined]
        dtype = owner._storage.dtype
        hit = False
    if not hit:
        if type(keepdims) is not bool or not (
            axis is None
            or type(axis) is int
            or (type(axis) is tuple and all(type(a) is int for a in axis))
        ):
            return None
        key = ("reduce", op, layout.shape, layout.strides, dtype, axis, keepdims)
        plan = PLANS.get(key)
        if plan is None:
            result = ops._reduction_checked(op, x, axis, keepdims, None)  # every check
            remember(key, _reduction_plan(op, x, axis, keepdims, result))
            return result
        if type(x) is Tensor:
            LAST_REDUCE[op] = (layout, dtype, axis, keepdims, plan)
    if plan is False:
        return None
    ufunc, axes, shape, compute, out_dtype, divisor, loop, final, keep, plain = plan
    version = owner._version
    quiet = _QUIET_CONTEXTS.get(_thread_id()) or quiet_context()
    try:
        if layout is owner._layout:  # the whole owner: its array, made once
            values = owner._shaped
            if values is None:
                values = shaped(owner)
        else:
            values = strided_array(owner._storage, layout)
        # (values, axis, dtype, out): dtype None for truth values of any dtype, folded as
        # bools, and for values already in the compute dtype. ``plain``: NumPy's own result is
        # row-major (see _reduction_plan), so it allocates it.
        if plain:
            acc = quiet.run(ufunc.reduce, values, axes, loop)
        else:
            acc = np.empty(shape, dtype=compute)
            quiet.run(ufunc.reduce, values, axes, loop, acc)
        if divisor:
            quiet.run(np.divide, acc, divisor, out=acc)
        out = acc if acc.dtype == out_dtype else quiet.run(acc.astype, out_dtype)
    except MemoryError:
        return ops._reduction_checked(op, x, axis, keepdims, None)
    if owner._writer or owner._version != version:
        check_unchanged(owner, version)  # raises ConcurrentWriteError
    result = _new(Tensor)
    result._init_layout(out.ravel(), final, out if keep else None)  # the one owner rule
    return result


def _reduction_plan(op: str, x: object, axis: object, keepdims: bool, result: Tensor) -> object:
    """The plan of a reduction that just succeeded on the full path (``False``: never plan its
    key): the NumPy backend's ufunc and the numbers its ``reduce`` works out from the shape."""
    view = ops.as_view(x)
    axes = (
        tuple(range(view.rank)) if axis is None else tuple(sorted(normalize_axes(axis, view.rank)))
    )
    natural, compute = ops._reduction_dtypes(op, view.dtype)
    backend = get_backend()
    if type(backend) is not NumpyBackend or not backend.supports("reduce", op, view.dtype):
        return False
    if not axes or view.is_empty or op not in numpy_backend.REDUCE:
        return False
    if result.dtype != natural or not 0 < result.size <= MAX_VALUES:
        return False
    if view.size > MAX_VALUES * 16:
        return False
    divisor = element_count([view.shape[a] for a in axes]) if op == "mean" else 0
    shape = reduced_shape(view.shape, axes)
    loop = None if op in ("any", "all") or compute == view.dtype else compute
    keep = keeps_array(shape, result.shape)
    ufunc = numpy_backend.REDUCE[op]
    # NumPy allocates a reduction's result in the order of the input's strides: row-major for
    # a row-major input, and an array (not a scalar) when some axis is left.
    # (any/all fold into the bool accumulator they are given.)
    plain = (
        bool(shape)
        and op not in ("any", "all")
        and view.layout.strides == row_major_strides(view.shape)
    )
    return (ufunc, axes, shape, compute, natural, divisor, loop, result.layout, keep, plain)


def matmul(a: Any, b: Any) -> Tensor | None:
    """A matrix product through its plan (``None``: the call is not planned)."""
    if (
        _suspended
        or not ENABLED
        or type(_LOADED.get(_ACTIVE.get() or registry._default)) is not NumpyBackend
    ):
        return None
    # fresh_owner of each operand, inline
    if type(a) is Tensor:
        first = a
    elif type(a) is TensorView:
        first = a._owner
        if first._version != a._version:
            return None
    else:
        return None
    if type(b) is Tensor:
        second = b
    elif type(b) is TensorView:
        second = b._owner
        if second._version != b._version:
            return None
    else:
        return None
    if first._writer or second._writer:
        return None
    la, lb = a._layout, b._layout
    storage_a, storage_b = first._storage, second._storage
    dtype_a, dtype_b = storage_a.dtype, storage_b.dtype
    last = LAST.get("matmul")
    if (
        last is not None
        and last[0] is la
        and last[1] is lb
        and last[2] is dtype_a
        and last[3] is dtype_b
    ):
        plan = last[4]
    else:
        key = ("matmul", la.shape, la.strides, lb.shape, lb.strides, dtype_a, dtype_b)
        plan = PLANS.get(key)
        if plan is None:
            result = ops._matmul_checked(a, b, None)  # every check; matmul's errors
            remember(key, _matmul_plan(a, b, result))
            return result
        LAST["matmul"] = (la, lb, dtype_a, dtype_b, plan)
    if plan is False:
        return None
    shape_a, steps_a, shape_b, steps_b, acc_shape, final, whole, keep = plan
    version_a, version_b = first._version, second._version
    quiet = _QUIET_CONTEXTS.get(_thread_id()) or quiet_context()
    try:
        # A whole owner read as it is (no axis added or broadcast): its array, made once; else
        # the array of the plan's shape and byte strides.
        if whole[0] and la is first._layout:
            left = first._shaped
            if left is None:
                left = shaped(first)
        else:
            left = np.ndarray(shape_a, dtype_a, storage_a, la.offset * storage_a.itemsize, steps_a)
        if whole[1] and lb is second._layout:
            right = second._shaped
            if right is None:
                right = shaped(second)
        else:
            right = np.ndarray(shape_b, dtype_b, storage_b, lb.offset * storage_b.itemsize, steps_b)
        if len(acc_shape) == 2 and _dense(left) and _dense(right):
            # NumPy's own 2-D result is row-major. ``ndarray.dot`` of two dense (C- or
            # F-ordered) matrices makes the BLAS call np.matmul makes (gemm, gemv or syrk, the
            # same values bit for bit) without the ufunc machinery, which costs more than an
            # 8x8 product. A matrix with a gap between its rows (a slice) can be summed in
            # another order by ``dot`` than by np.matmul, so it takes np.matmul below.
            acc = quiet.run(left.dot, right)
        else:  # a batch (NumPy may order its batch axes as it reads them), or a gap
            acc = np.empty(acc_shape, dtype=dtype_a)
            quiet.run(np.matmul, left, right, out=acc)
    except MemoryError:
        return ops._matmul_checked(a, b, None)  # an AllocationError with the numbers
    if first._writer or first._version != version_a:
        check_unchanged(first, version_a)  # raises ConcurrentWriteError
    if second._writer or second._version != version_b:
        check_unchanged(second, version_b)
    result = _new(Tensor)
    result._init_layout(acc.ravel(), final, acc if keep else None)  # the one owner rule
    return result


def _dense(array: np.ndarray) -> bool:
    """True when ``array`` is C- or F-contiguous (no gaps between its rows or columns)."""
    flags = array.flags
    return bool(flags.c_contiguous or flags.f_contiguous)


def _matmul_plan(a: Any, b: Any, result: Tensor) -> object:
    """The plan of a matrix product that just succeeded on the full path (``False``: never
    plan its key): the shapes and byte strides of the two arrays the NumPy backend passes to
    ``np.matmul`` (the operands with the vector axis added and the batch axes broadcast, by the
    same layout rules as :func:`matmul`), the accumulator's shape and the result's layout. Only
    operands of one dtype that is its own compute dtype, both read in place by BLAS."""
    left, right = a._layout, b._layout
    dtypes = [a.dtype, b.dtype]
    compute = ops.compute_dtype(dtypes)
    if a.dtype != b.dtype or a.dtype != compute or result.dtype != compute:
        return False
    backend = get_backend()
    if type(backend) is not NumpyBackend or not backend.supports("matmul", None, compute):
        return False
    if not 0 < result.size <= MAX_VALUES or left.is_empty or right.is_empty:
        return False
    if left.size > MAX_VALUES * 16 or right.size > MAX_VALUES * 16:
        return False
    if left.rank == 1:
        left = left.unsqueeze(0)
    if right.rank == 1:
        right = right.unsqueeze(1)
    batch = broadcast_shapes(left.shape[:-2], right.shape[:-2])
    left = left.expand((*batch, *left.shape[-2:]))
    right = right.expand((*batch, *right.shape[-2:]))
    if matrix_orientation(left.shape, left.strides) is None or (
        matrix_orientation(right.shape, right.strides) is None
    ):
        return False  # the backend gathers such a matrix first: the full path does that
    itemsize = compute.itemsize
    steps_a = tuple(s * itemsize for s in zero_unused_strides(left.shape, left.strides))
    steps_b = tuple(s * itemsize for s in zero_unused_strides(right.shape, right.strides))
    acc_shape = (*batch, left.shape[-2], right.shape[-1])
    shape_a, shape_b = left.shape, right.shape
    shared = shared_matrix_rows(shape_a, steps_a, shape_b, steps_b)
    if shared is not None:  # one matrix for the whole batch: one 2-D product, as the backend
        rows, row_step = shared
        shape_a, steps_a = (rows, shape_a[-1]), (row_step, steps_a[-1])
        shape_b, steps_b = shape_b[-2:], steps_b[-2:]
        acc_shape = (rows, shape_b[-1])
    # An operand read with its own shape and no size-1 axis: its kept array (:func:`shaped`)
    # has exactly the byte strides above.
    whole = (
        shape_a == a.shape and 1 not in a.shape,
        shape_b == b.shape and 1 not in b.shape,
    )
    final, keep = result.layout, keeps_array(acc_shape, result.shape)
    return (shape_a, steps_a, shape_b, steps_b, acc_shape, final, whole, keep)


# --------------------------------------------------------------------------------------------
# Installing the fast path
# --------------------------------------------------------------------------------------------


class _Planner:
    """The planned ops as the object :data:`llmfs.tensor.ops.planner` holds."""

    unary = staticmethod(unary)
    binary = staticmethod(binary)
    reduction = staticmethod(reduction)
    matmul = staticmethod(matmul)
    copy = staticmethod(copy)


def install() -> None:
    """Puts the cached dispatch in front of the rules: the ops' one hook
    (:data:`llmfs.tensor.ops.planner`) and the view methods' layout memo
    (:data:`llmfs.tensor.view.derive_layout`, :func:`llmfs.tensor.derived.derive`).
    :mod:`llmfs.tensor` calls it when it is imported; :func:`uninstall` takes both away."""
    ops.planner = _Planner()
    view_module.derive_layout = derived_module.derive


def uninstall() -> None:
    """Takes the cached dispatch away: every op and view method runs its rule as written."""
    ops.planner = None
    view_module.derive_layout = None
