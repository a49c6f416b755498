"""The ops' cached dispatch: the decisions of a small op, worked out once per kind of call.

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

NumPy's floating-point error state is set to "ignore" around the cached call (what the backend's
``np.errstate(all="ignore")`` does), by setting NumPy's own context variable directly: it is the
same state, without building an ``errstate`` object per call. When this NumPy does not expose
that variable, :data:`ENABLED` is False and every op takes the full path.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from llmfs.tensor import backends as registry
from llmfs.tensor import derived as derived_module
from llmfs.tensor.backends.numpy_backend import NumpyBackend
from llmfs.tensor.errors import ConcurrentWriteError
from llmfs.tensor.layout import Layout, row_major_strides, zero_unused_strides
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


#: The row-major layout at offset 0 of each small non-empty shape copied so far (a Layout is
#: immutable, so every result of one shape may share it).
ROW_MAJOR: dict[tuple[int, ...], Layout] = {}


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
    _BYTE_STRIDES.clear()
    ROW_MAJOR.clear()


def remember(key: tuple[object, ...], plan: object) -> None:
    """Stores ``plan`` (or ``False``: never plan this key) under ``key``, starting the cache
    again when it is full."""
    if len(PLANS) >= MAX_PLANS:
        PLANS.clear()
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
    name = registry._active.get() or registry._default
    return ENABLED and not _suspended and type(registry._loaded.get(name)) is NumpyBackend


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


def elementwise_operand(x: object) -> tuple[object, object, Any, Tensor | None, int] | None:
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
