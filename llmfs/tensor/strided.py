"""NumPy arrays of storage: allocating it, exporting it read-only, viewing it, gathering from it.

* :func:`allocate` and :func:`allocating` make (or guard the making of) new storage, so that an
  array NumPy or the machine cannot hold is an :class:`~llmfs.tensor.errors.AllocationError`
  naming the element count and the bytes, never NumPy's own ``ValueError``/``MemoryError``.
* :class:`ReadOnlyArray` is the type of the zero-copy exports (``as_slice()``, ``numpy_view()``):
  writing into one is a :class:`~llmfs.tensor.errors.TensorError` that says how to write.

:func:`numpy_view` and :func:`gather` take a layout that the caller has already validated (views
are checked when they are made), so they do no bounds checks of their own; :func:`numpy_view`
turns a :class:`~llmfs.tensor.layout.Layout` into an ndarray over the *same* memory, and
:func:`gather` copies a layout's values into a new contiguous array in logical row-major order.

``gather`` returns exactly the values the offset cursor (:mod:`llmfs.tensor.traversal`) visits,
but moves whole runs at once instead of one value per Python step:

* axes that are contiguous with each other are coalesced first (``layout.coalesce``), so most
  views become one or two axes;
* when the innermost coalesced axis is already unit-stride, one NumPy copy does it;
* when it is not (a transpose: consecutive outputs sit far apart in storage), the copy is cache
  blocked, whatever the stride: the output's columns are copied in strips, one slice assignment
  each, so the source lines a strip reads stay in cache until all of their values are used.
  NumPy's own copy walks whole output rows and reads each source line once per output row; with
  a stride that is a multiple of 4 KiB every read even evicts the previous ones (a transposed
  2048x2048 matrix is the classic case).

A strip is as wide (source rows read in parallel) as the cache can hold lines of: a stride that
is a multiple of 4 KiB maps every source row onto the same cache set, so only a few rows fit and
the strip is narrow; other strides spread the rows over many sets and allow wide strips.

A large copy (:data:`PARALLEL_MIN_VALUES` values or more) is also split into ranges of its
outermost axis, one per thread (:mod:`llmfs.tensor.threads`): each range is copied as above into
its own rows of the result, while NumPy has released the interpreter lock. One core walking
memory in two orders is what limits a transpose, so a second core nearly halves its time; the
values are the same for any thread count.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from llmfs.tensor.errors import AllocationError, TensorError, ViewTooLargeError
from llmfs.tensor.layout import INDEX_MAX, Layout, element_count, zero_unused_strides
from llmfs.tensor.threads import get_num_threads, run_all

#: L1 data cache geometry assumed by the strips (typical of x86-64 and Apple cores alike): 64-byte
#: lines, 64 sets (8 ways each). Set conflicts repeat every SETS * LINE_BYTES = 4 KiB of stride.
LINE_BYTES = 64
CACHE_SETS = 64

#: Source rows a strip reads in parallel: 12 per group of cache sets that distinct rows can use
#: (12 rather than the 8 ways fit, measured: L2 absorbs the rest), capped at the widest strip
#: that paid off. Measured with ``benchmarks/bench_materialize.py`` and strips of 12 to 1024 on
#: 1500, 2000, 2048 and 3000-square transposes.
ROWS_PER_SET_GROUP = 12
MAX_STRIP_COLUMNS = 512

#: Below this many values a blocked copy's per-strip overhead outweighs its cache benefit.
BLOCKED_MIN_VALUES = 64 * 64

#: From this many values on, a copy is split over threads: below it, handing a piece to another
#: thread (tens of microseconds) costs more than the second core saves.
PARALLEL_MIN_VALUES = 1 << 18


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
    ``TensorView.numpy_view()``): a plain ndarray whose writes, while it is read-only, raise a
    :class:`TensorError` that says how to write instead of NumPy's bare
    ``assignment destination is read-only``.

    Item assignment, the in-place operators (``+=`` ...), ``fill``, ``put`` and ``sort`` are
    covered; NumPy functions given it as ``out=`` (``np.copyto``, ``np.add(..., out=a)``) still
    raise NumPy's ``ValueError``. Copies (``a.copy()``) are writable and behave as ndarrays;
    ufunc results (``a * 2``, ``np.exp(a)``) are plain ndarrays, and the repr is an ndarray's.
    """

    def _check_writeable(self) -> None:
        if not self.flags.writeable:
            raise TensorError(_READ_ONLY_MESSAGE)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_writeable()
        super().__setitem__(key, value)

    def fill(self, value: Any) -> None:
        self._check_writeable()
        super().fill(value)

    def put(self, *args: object, **kwargs: object) -> None:
        self._check_writeable()
        super().put(*args, **kwargs)  # type: ignore[arg-type]

    def sort(self, *args: object, **kwargs: object) -> None:
        self._check_writeable()
        super().sort(*args, **kwargs)  # type: ignore[arg-type]

    def __array_wrap__(  # a scalar result is returned as a scalar
        self, array: np.ndarray, context: object = None, return_scalar: bool = False
    ) -> Any:
        # Computed results are new arrays, not exports: hand them back as plain ndarrays.
        if return_scalar:
            return array[()]
        return array.view(np.ndarray)

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))


def _in_place(name: str) -> object:
    method = getattr(np.ndarray, name)

    def operator(self: ReadOnlyArray, other: object) -> object:
        self._check_writeable()
        return method(self, other)

    operator.__name__ = name
    return operator


for _name in (
    "__iadd__",
    "__isub__",
    "__imul__",
    "__imatmul__",
    "__itruediv__",
    "__ifloordiv__",
    "__imod__",
    "__ipow__",
    "__ilshift__",
    "__irshift__",
    "__iand__",
    "__ixor__",
    "__ior__",
):
    setattr(ReadOnlyArray, _name, _in_place(_name))


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
    offset from two coordinates (see :func:`llmfs.tensor.layout.is_one_to_one`).
    """
    return _as_strided(storage, layout, writeable=True)


def read_only_view(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """:func:`numpy_view` as a :class:`ReadOnlyArray` (what ``view.numpy_view()`` exports), made
    in one step: every op reads its operands this way."""
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
    # thing behind several Python calls; this runs on every op). NumPy checks again that every
    # reachable byte lies inside the buffer.
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


def gather(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """Copies a validated layout's values into a new C-contiguous array of its shape.

    Raises :class:`AllocationError` when the copy cannot be allocated (see :func:`allocating`).
    """
    with allocating(element_count(layout.shape), storage.dtype):
        out = np.empty(layout.shape, dtype=storage.dtype)
    count = out.size
    if count == 0:
        return out
    flat = layout.coalesce()
    source = numpy_view(storage, flat)
    target = out.reshape(flat.shape)
    if flat.rank >= 2 and count >= BLOCKED_MIN_VALUES:
        strides = flat.strides
        _by_rows(target, source, lambda t, s: _blocked_copy(t, s, strides))
    else:
        _by_rows(target, source, _assign)
    return out


def copy_strided(target: np.ndarray, source: np.ndarray) -> None:
    """``target[...] = source`` (same shape; values cast to ``target``'s dtype), cache blocked
    when the two arrays walk memory in different orders (a transpose on either side)."""
    if target.ndim >= 2 and target.size >= BLOCKED_MIN_VALUES:
        if target.flags.c_contiguous:
            strides = _element_strides(source)
            _by_rows(target, source, lambda t, s: _blocked_copy(t, s, strides))
            return
        if source.flags.c_contiguous:
            strides = _element_strides(target)
            _by_rows(target, source, lambda t, s: _blocked_copy(t, s, strides))
            return
    _by_rows(target, source, _assign)


def _by_rows(
    target: np.ndarray, source: np.ndarray, copy: Callable[[np.ndarray, np.ndarray], None]
) -> None:
    """``copy(target, source)``, split into ranges of axis 0 run on separate threads when the
    copy is large (:mod:`llmfs.tensor.threads`). The ranges write disjoint rows of ``target``, so
    the result is the same for any thread count."""
    rows = target.shape[0] if target.ndim else 1
    pieces = min(get_num_threads(), rows)
    if pieces <= 1 or target.size < PARALLEL_MIN_VALUES or np.may_share_memory(target, source):
        # One NumPy call: it buffers a source that overlaps the target, which pieces running
        # at once could not (one piece would read rows another has already overwritten).
        copy(target, source)
        return
    bounds = [rows * piece // pieces for piece in range(pieces + 1)]
    run_all(
        [
            functools.partial(copy, target[start:stop], source[start:stop])
            for start, stop in itertools.pairwise(bounds)
        ]
    )


def _element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(stride // array.itemsize for stride in array.strides)


def _assign(target: np.ndarray, source: np.ndarray) -> None:
    if target.dtype == source.dtype:
        target[...] = source
    else:
        with np.errstate(over="ignore"):
            np.copyto(target, source, casting="unsafe")


def _strip_columns(stride_bytes: int) -> int:
    """How many output columns a strip of a transpose copies when source rows are
    ``stride_bytes`` apart."""
    # Rows k apart share a cache set when k * stride is a multiple of 4 KiB: the gcd says how
    # many groups of sets the rows cycle through.
    groups = CACHE_SETS * LINE_BYTES // math.gcd(stride_bytes, CACHE_SETS * LINE_BYTES)
    return min(MAX_STRIP_COLUMNS, ROWS_PER_SET_GROUP * groups)


def _blocked_copy(target: np.ndarray, source: np.ndarray, strides: Sequence[int]) -> None:
    """Copies in strips of the innermost axis when it reads far apart and an outer axis reads
    densely (a transpose): each strip is one NumPy assignment, which walks the strip's output
    rows in order, so the few source lines the strip reads stay in cache while they are used.

    ``strides`` (in elements) are those of the array that is not walked in order: the source
    when the target is C-contiguous (``materialize``), the target when the source is (writing a
    result through a permuted output). Anything else is one NumPy call.
    """
    last = len(strides) - 1
    inner = abs(strides[last])
    dense = min(range(last), key=lambda axis: abs(strides[axis]))
    if inner <= 1 or abs(strides[dense]) >= inner:
        _assign(target, source)
        return
    width = _strip_columns(inner * source.itemsize)
    for col in range(0, source.shape[last], width):
        strip = (..., slice(col, col + width))
        _assign(target[strip], source[strip])
