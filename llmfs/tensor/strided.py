"""NumPy views of a storage buffer, and the fast gather behind ``materialize``.

Both functions take a layout that the caller has already validated against the storage (views
are checked when they are made), so they do no bounds checks of their own; :func:`numpy_view`
turns (shape, strides, base offset) into an ndarray over the *same* memory, and :func:`gather`
copies a layout's values into a new contiguous array in logical row-major order.

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
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from llmfs.tensor.layout import coalesce, element_count, zero_unused_strides

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


def writable_view(
    storage: np.ndarray, shape: Sequence[int], strides: Sequence[int], base_offset: int
) -> np.ndarray:
    """A WRITABLE ndarray over ``storage`` (a writable 1-D array) with the given layout.

    For library code that writes a result straight into an output's memory (inside the owner's
    ``mutate()`` window). The layout must be validated against ``storage`` and must not reach one
    offset from two coordinates (see :func:`llmfs.tensor.layout.is_one_to_one`).
    """
    shape = tuple(shape)
    if element_count(shape) == 0:
        return np.empty(shape, dtype=storage.dtype)
    itemsize = storage.itemsize
    byte_strides = tuple(stride * itemsize for stride in zero_unused_strides(shape, strides))
    return np.lib.stride_tricks.as_strided(
        storage[base_offset:], shape=shape, strides=byte_strides, writeable=True
    )


def gather(
    storage: np.ndarray, shape: Sequence[int], strides: Sequence[int], base_offset: int
) -> np.ndarray:
    """Copies a validated layout's values into a new C-contiguous array of ``shape``."""
    shape = tuple(shape)
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


def copy_strided(target: np.ndarray, source: np.ndarray) -> None:
    """``target[...] = source`` (same shape; values cast to ``target``'s dtype), cache blocked
    when the two arrays walk memory in different orders (a transpose on either side)."""
    if target.ndim >= 2 and target.size >= BLOCKED_MIN_VALUES:
        if target.flags.c_contiguous:
            _blocked_copy(target, source, _element_strides(source))
            return
        if source.flags.c_contiguous:
            _blocked_copy(target, source, _element_strides(target))
            return
    _assign(target, source)


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
