"""NumPy arrays of storage: the rules for making them, exporting them read-only, viewing them.

* :func:`allocate` and :func:`allocating` make (or guard the making of) new storage, so that an
  array NumPy or the machine cannot hold is an :class:`~llmfs.tensor.errors.AllocationError`
  naming the element count and the bytes, never NumPy's own ``ValueError``/``MemoryError``;
  :func:`check_reads` applies the same byte limit (:func:`byte_limit`) to what one op reads.
  Every allocation and every read of the library goes through these, whatever the backend.
* :class:`ReadOnlyArray` is the type of the zero-copy exports (``as_slice()``, ``numpy_view()``):
  writing into one is a :class:`~llmfs.tensor.errors.TensorError` that says how to write.
* :func:`numpy_view` turns a :class:`~llmfs.tensor.layout.Layout` into an ndarray over the *same*
  memory (no copy): the one constructor of every NumPy array over a view's storage. It takes a
  layout the caller has already validated (views are checked when they are made), so it does no
  bounds checks of its own.

Copies are not made here: a copy is the active backend's work (``Backend.copy``), a loop over the
offset cursor on the reference backend and a cache-blocked, threaded copy on the numpy backend
(:mod:`llmfs.tensor.backends.numpy_copies`).
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from llmfs.tensor.errors import AllocationError, TensorError, ViewTooLargeError
from llmfs.tensor.layout import INDEX_MAX, Layout, element_count, zero_unused_strides

#: The most bytes one NumPy array can span: its byte size is a C ``intp``, 64 bits on every
#: platform llmfs runs on, so this is the library's one 64-bit maximum (layout's ``INDEX_MAX``).
MAX_ARRAY_BYTES = INDEX_MAX


@functools.cache
def _physical_memory() -> int | None:
    """The machine's memory in bytes, or ``None`` where the platform does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def byte_limit(nbytes: int) -> str | None:
    """Why ``nbytes`` bytes of values cannot be held at once, or ``None`` when they can: more
    than NumPy's largest array (:data:`MAX_ARRAY_BYTES`), or more than the machine's physical
    memory. The one byte-size limit of the library: allocations and reads both use it."""
    if nbytes > MAX_ARRAY_BYTES:
        return f"NumPy arrays hold at most {MAX_ARRAY_BYTES} bytes"
    memory = _physical_memory() if nbytes > 2**30 else None  # small arrays always fit
    if memory is not None and nbytes > memory:
        return f"this machine has {memory} bytes of memory"
    return None


def check_allocation(count: int, dtype: DTypeLike) -> None:
    """Refuses, before anything is allocated, ``count`` values of ``dtype`` that cannot exist.

    Raises :class:`AllocationError` naming the count and the bytes when they exceed NumPy's
    largest array (NumPy would raise its own ``ValueError``) or the machine's physical memory (an
    allocation that size fails, or, where the system over-commits, thrashes the machine).
    """
    nbytes = count * np.dtype(dtype).itemsize
    reason = byte_limit(nbytes)
    if reason is not None:
        raise AllocationError(count, np.dtype(dtype), nbytes, reason)


#: Below this many values no dtype reaches the 1 GiB from which :func:`byte_limit` asks about
#: the machine's memory, so :func:`check_reads` answers at once (it runs on every reduction).
READ_CHECK_MIN_VALUES = 1 << 26


def check_reads(count: int, dtype: DTypeLike, what: str) -> None:
    """Refuses an op that would read ``count`` values of ``dtype`` from one view when they
    could not all be held at once (:func:`byte_limit`): no array is that large, so the view is
    a broadcast or a self-overlapping layout, and reading it value by value would take hours.
    This is the library's work limit, applied where an op reads more values than it writes
    (reductions, matrix products, einsum, the checks of ``take`` and ``astype``).

    Raises :class:`ViewTooLargeError` naming ``what`` (the op), the count and the bytes.
    """
    if count < READ_CHECK_MIN_VALUES:
        return
    nbytes = count * np.dtype(dtype).itemsize
    reason = byte_limit(nbytes)
    if reason is not None:
        raise ViewTooLargeError(what, count, np.dtype(dtype).name, nbytes, reason)


class _AllocationGuard:
    """The context manager :func:`allocating` returns (a class: this runs on every op)."""

    __slots__ = ("count", "dtype")

    def __init__(self, count: int, dtype: DTypeLike) -> None:
        self.count = count
        self.dtype = dtype

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, traceback: object) -> None:
        if not isinstance(error, MemoryError) or isinstance(error, AllocationError):
            return
        # NumPy's MemoryError carries the failed array's shape and dtype.
        shape = getattr(error, "shape", None)
        dtype = np.dtype(getattr(error, "dtype", self.dtype))
        count = self.count if shape is None else int(np.prod(shape, dtype=object))
        raise AllocationError(
            count,
            dtype,
            count * dtype.itemsize,
            f"the system could not provide the memory ({error})",
        ) from None


def allocating(count: int, dtype: DTypeLike) -> _AllocationGuard:
    """A ``with`` block that allocates ``count`` values of ``dtype`` (a result about to be
    computed): :func:`check_allocation` runs now, and a ``MemoryError`` NumPy raises inside the
    block becomes an :class:`AllocationError` with the numbers of the array that failed."""
    check_allocation(count, dtype)
    return _AllocationGuard(count, dtype)


def allocate(count: int, dtype: DTypeLike, fill: ArrayLike | None = None) -> np.ndarray:
    """A new 1-D array of ``count`` values of ``dtype``, filled with ``fill`` (left uninitialised
    when ``None``). Raises :class:`AllocationError` where NumPy or the machine cannot hold it."""
    with allocating(count, dtype):
        if fill is None:
            return np.empty(count, dtype=dtype)
        return np.full(count, fill, dtype=dtype)


_READ_ONLY_MESSAGE = (
    "this array is a read-only export of a tensor's storage (as_slice() or numpy_view()), so "
    "it cannot be written: write through tensor.as_mut_slice()[i] = value, or inside "
    "`with tensor.mutate() as buf:`, which make the tensor's existing views stale"
)


class ReadOnlyArray(np.ndarray):
    """The ndarray type of the library's zero-copy exports (``Tensor.as_slice()``,
    ``TensorView.numpy_view()``): an ndarray made read-only by NumPy's own flag
    (``flags.writeable = False``), whose writes raise a :class:`TensorError` that says how to
    write instead of NumPy's bare ``assignment destination is read-only``.

    The flag is the guarantee (NumPy refuses writes through a read-only array); the subclass
    words the refusal. It sees the writes that reach the array through Python: item assignment,
    every ufunc given it as an output, which covers the in-place operators (``a += 1`` is
    ``np.add(a, 1, out=a)``) and ``np.add(x, y, out=a)``, ``ufunc.at(a, ...)`` (which NumPy lets
    through a read-only array: refused here), and the writing methods in
    :data:`_WRITING_METHODS`. A write from NumPy's C code (``np.copyto(a, x)``) still raises
    NumPy's ``ValueError``: the flag refuses it all the same. Copies (``a.copy()``) are writable;
    ufunc results (``a * 2``, ``np.exp(a)``, ``a.sum()``) are plain ndarrays, and the repr is an
    ndarray's.

    The library's own reads go through plain read-only ndarrays (:func:`numpy_view`), so these
    checks cost nothing to an op.
    """

    def __setitem__(self, key: Any, value: Any) -> None:
        _refuse_write(self)
        super().__setitem__(key, value)

    def __array_ufunc__(
        self, ufunc: np.ufunc, method: str, *inputs: Any, out: Any = None, **kwargs: Any
    ) -> Any:
        # Run as on plain ndarrays (so results are plain ndarrays), refusing read-only outputs.
        if method == "at":
            # ``ufunc.at(a, ...)`` writes into its first input, and NumPy (2.4) does not check
            # the flag there: this check is the only thing that stops it.
            _refuse_write(inputs[0])
        if out is not None:
            for array in out:
                _refuse_write(array)
            kwargs["out"] = tuple(_plain(array) for array in out)
        result = getattr(ufunc, method)(*(_plain(value) for value in inputs), **kwargs)
        if out is None or method == "at":
            return result
        return out[0] if len(out) == 1 else out  # the caller's own output objects

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))


def _plain(value: Any) -> Any:
    return value.view(np.ndarray) if isinstance(value, ReadOnlyArray) else value


def _refuse_write(array: object) -> None:
    if isinstance(array, ReadOnlyArray) and not array.flags.writeable:
        raise TensorError(_READ_ONLY_MESSAGE)


#: ndarray methods that write into the array itself (NumPy would raise its bare ``ValueError``).
_WRITING_METHODS = ("fill", "put", "sort", "partition", "setfield")


def _checked(name: str) -> object:
    method = getattr(np.ndarray, name)

    def write(self: ReadOnlyArray, *args: Any, **kwargs: Any) -> Any:
        _refuse_write(self)
        return method(self, *args, **kwargs)

    write.__name__ = write.__qualname__ = name
    write.__doc__ = method.__doc__
    return write


for _name in _WRITING_METHODS:
    setattr(ReadOnlyArray, _name, _checked(_name))


def read_only(array: np.ndarray) -> ReadOnlyArray:
    """``array`` (no copy) as a :class:`ReadOnlyArray`, made read-only."""
    exported = array.view(ReadOnlyArray)
    exported.flags.writeable = False
    return exported


def numpy_view(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """A read-only ndarray over ``storage`` with the given layout (strides in elements).

    The layout must already be validated against ``storage`` (every reachable offset inside it);
    empty layouts return an empty array that touches nothing.
    """
    return _as_strided(storage, layout, writeable=False)


def writable_view(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """A WRITABLE ndarray over ``storage`` (a writable 1-D array) with the given layout.

    For library code that writes a result straight into an output's memory (inside the owner's
    ``mutate()`` window). The layout must be validated against ``storage`` and must not reach one
    offset from two coordinates (:meth:`~llmfs.tensor.layout.Layout.overlapping_coordinates`).
    """
    return _as_strided(storage, layout, writeable=True)


def read_only_view(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """:func:`numpy_view` as a :class:`ReadOnlyArray` (what ``view.numpy_view()`` exports to a
    learner), made in one step."""
    return _as_strided(storage, layout, writeable=False, kind=ReadOnlyArray)


def _as_strided(
    storage: np.ndarray, layout: Layout, *, writeable: bool, kind: type = np.ndarray
) -> np.ndarray:
    shape = layout.shape
    if 0 in shape:  # reads nothing: an empty array of its own, read-only like any export
        empty: np.ndarray = np.empty(shape, dtype=storage.dtype).view(kind)
        empty.flags.writeable = writeable
        return empty
    itemsize = storage.itemsize
    # A size-1 axis never advances, so its stride may be anything (even past 64 bits in bytes);
    # NumPy only needs a harmless 0 there.
    byte_strides = tuple(stride * itemsize for stride in zero_unused_strides(shape, layout.strides))
    # The ndarray constructor over the storage's buffer (NumPy's ``as_strided`` is the same
    # thing behind several Python calls; this runs on every operand of every op). NumPy checks
    # again that every reachable byte lies inside the buffer.
    try:
        array: np.ndarray = np.ndarray.__new__(
            kind,
            shape,
            dtype=storage.dtype,
            buffer=storage,
            offset=layout.offset * itemsize,
            strides=byte_strides,
        )
    except ValueError:
        # A valid layout may span more bytes than an ndarray can describe (2**62 float64 values
        # of one stored value): NumPy's "array is too big". Checked only when NumPy fails.
        count = element_count(shape)
        reason = byte_limit(count * itemsize)
        if reason is None:
            raise
        raise ViewTooLargeError(
            "numpy_view (and every op or print reading through it)",
            count,
            storage.dtype.name,
            count * itemsize,
            reason,
        ) from None
    if not writeable:
        array.flags.writeable = False
    return array
