"""NumPy arrays of storage: allocating it, exporting it read-only, viewing it, gathering from it.

* :func:`allocate` and :func:`allocating` make (or guard the making of) new storage, so that an
  array NumPy or the machine cannot hold is an :class:`~llmfs.tensor.errors.AllocationError`
  naming the element count and the bytes, never NumPy's own ``ValueError``/``MemoryError``.
* :class:`ReadOnlyArray` is the type of the zero-copy exports (``as_slice()``, ``numpy_view()``):
  writing into one is a :class:`~llmfs.tensor.errors.TensorError` that says how to write.

:func:`numpy_view` and :func:`gather` take a layout that the caller has already validated (views
are checked when they are made), so they do no bounds checks of their own; :func:`numpy_view`
turns (shape, strides, base offset) into an ndarray over the *same* memory, and :func:`gather`
copies a layout's values into a new contiguous array in logical row-major order.

``gather`` returns exactly the values the offset cursor (:mod:`llmfs.tensor.traversal`) visits,
but moves whole runs at once instead of one value per Python step:

* axes that are contiguous with each other are coalesced first (``layout.coalesce``), so most
  views become one or two axes;
* when the innermost coalesced axis is already unit-stride, one NumPy copy does it;
* when it is not (a transpose: consecutive outputs sit far apart in storage) and the stride is
  a multiple of 4 KiB, the copy is cache blocked: tiles of the two axes involved are copied one
  slice assignment at a time, so each tile's reads and writes stay in cache. NumPy's own copy
  walks the output in order, and with such strides every read evicts the previous ones.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

from llmfs.tensor.errors import AllocationError, TensorError
from llmfs.tensor.layout import coalesce, element_count, zero_unused_strides

#: Tile of the cache-blocked copy, in elements: tall and narrow. Each tile reads TILE_COLUMNS
#: source rows as parallel streams and writes short runs of TILE_ROWS output rows that stay in
#: L1 until the next tile completes their cache lines. A non-power-of-two width avoids cache-set
#: conflicts. Measured with ``benchmarks/bench_materialize.py``.
TILE_ROWS = 512
TILE_COLUMNS = 12

#: Strides that are multiples of this many bytes map consecutive reads onto the same cache sets.
ALIASING_BYTES = 4096

#: Below this many values a blocked copy's per-tile overhead outweighs its cache benefit.
BLOCKED_MIN_VALUES = 64 * 64


#: The most bytes one NumPy array can span: its byte size is a C ``intp``.
MAX_ARRAY_BYTES = int(np.iinfo(np.intp).max)


@functools.cache
def _physical_memory() -> int | None:
    """The machine's memory in bytes, or ``None`` where the platform does not say."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


def check_allocation(count: int, dtype: DTypeLike) -> None:
    """Refuses, before anything is allocated, ``count`` values of ``dtype`` that cannot exist.

    Raises :class:`AllocationError` naming the count and the bytes when they exceed NumPy's
    largest array (NumPy would raise its own ``ValueError``) or the machine's physical memory (an
    allocation that size fails, or, where the system over-commits, thrashes the machine).
    """
    nbytes = count * np.dtype(dtype).itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise AllocationError(
            count, np.dtype(dtype), nbytes, f"NumPy arrays hold at most {MAX_ARRAY_BYTES} bytes"
        )
    memory = _physical_memory() if nbytes > 2**30 else None  # small arrays always fit
    if memory is not None and nbytes > memory:
        raise AllocationError(
            count, np.dtype(dtype), nbytes, f"this machine has {memory} bytes of memory"
        )


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

    def __array_wrap__(  # type: ignore[override]  # a scalar result is returned as a scalar
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


def numpy_view(
    storage: np.ndarray, shape: Sequence[int], strides: Sequence[int], base_offset: int
) -> np.ndarray:
    """A read-only ndarray over ``storage`` with the given layout (strides in elements).

    The layout must already be validated against ``storage`` (every reachable offset inside it);
    empty layouts return an empty array that touches nothing.
    """
    shape = tuple(shape)
    if element_count(shape) == 0:
        return np.empty(shape, dtype=storage.dtype)
    itemsize = storage.itemsize
    # A size-1 axis never advances, so its stride may be anything (even past 64 bits in bytes);
    # NumPy only needs a harmless 0 there.
    byte_strides = tuple(stride * itemsize for stride in zero_unused_strides(shape, strides))
    return np.lib.stride_tricks.as_strided(
        storage[base_offset:], shape=shape, strides=byte_strides, writeable=False
    )


def gather(
    storage: np.ndarray, shape: Sequence[int], strides: Sequence[int], base_offset: int
) -> np.ndarray:
    """Copies a validated layout's values into a new C-contiguous array of ``shape``.

    Raises :class:`AllocationError` when the copy cannot be allocated (see :func:`allocating`).
    """
    shape = tuple(shape)
    with allocating(element_count(shape), storage.dtype):
        out = np.empty(shape, dtype=storage.dtype)
    count = out.size
    if count == 0:
        return out
    flat_shape, flat_strides = coalesce(shape, strides)
    source = numpy_view(storage, flat_shape, flat_strides, base_offset)
    target = out.reshape(flat_shape)
    if len(flat_shape) >= 2 and count >= BLOCKED_MIN_VALUES:
        _blocked_copy(target, source, flat_strides)
    else:
        target[...] = source
    return out


def _blocked_copy(target: np.ndarray, source: np.ndarray, strides: Sequence[int]) -> None:
    """Copies in tiles of the innermost axis against the outer axis that reads storage densest.

    Only layouts whose inner stride is a multiple of 4 KiB take the tiled path: consecutive reads
    then fall into the same cache sets and NumPy's element-order copy thrashes (a transposed
    2048x2048 matrix is the classic case). Other strides copy well enough in one NumPy call.
    """
    last = len(strides) - 1
    inner = abs(strides[last])
    dense = min(range(last), key=lambda axis: abs(strides[axis]))
    aliasing = (inner * source.itemsize) % ALIASING_BYTES == 0
    if inner <= 1 or abs(strides[dense]) >= inner or not aliasing:
        target[...] = source
        return
    rows, cols = source.shape[dense], source.shape[last]
    index: list[slice] = [slice(None)] * source.ndim
    for row in range(0, rows, TILE_ROWS):
        index[dense] = slice(row, row + TILE_ROWS)
        for col in range(0, cols, TILE_COLUMNS):
            index[last] = slice(col, col + TILE_COLUMNS)
            key = tuple(index)
            target[key] = source[key]
