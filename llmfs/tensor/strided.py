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
  blocked, whatever the stride: tiles of the two axes involved are copied one slice assignment
  at a time, so each tile's source lines stay in L1 until all of their values are used. NumPy's
  own copy walks the output in order and reads each source line once per output row; with a
  stride that is a multiple of 4 KiB every read even evicts the previous ones (a transposed
  2048x2048 matrix is the classic case).

The tile is as wide (source rows read in parallel) as L1 can hold lines of: a stride that is a
multiple of 4 KiB maps every source row onto the same cache set, so only a few rows fit and the
tile is tall and narrow; other strides spread the rows over many sets and allow wide tiles,
which have fewer tiles and longer inner loops.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from llmfs.tensor.layout import coalesce, element_count, zero_unused_strides

#: L1 data cache geometry assumed by the tiles (typical of x86-64 and Apple cores alike): 64-byte
#: lines, 64 sets (8 ways each). Set conflicts repeat every SETS * LINE_BYTES = 4 KiB of stride.
LINE_BYTES = 64
CACHE_SETS = 64

#: Source rows a tile reads in parallel when each lands in its own set group: 12 per group of
#: sets that distinct rows can use (12 rather than the 8 ways fit, measured: L2 absorbs the rest),
#: capped at the widest tile that paid off. Tile height (values along each source row) shrinks as
#: the tile widens, so a tile's output stays a few thousand values. Measured with
#: ``benchmarks/bench_materialize.py`` on 2048x2048 (aliasing) and 2000x2000 transposes.
ROWS_PER_SET_GROUP = 12
MAX_TILE_COLUMNS = 512
TILE_VALUES = 6144
MIN_TILE_ROWS, MAX_TILE_ROWS = 128, 512

#: Below this many values a blocked copy's per-tile overhead outweighs its cache benefit.
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
    # The ndarray constructor, not as_strided: the same view for a fraction of the call cost,
    # which small copies notice.
    array = np.ndarray(
        shape,
        dtype=storage.dtype,
        buffer=storage,
        offset=base_offset * itemsize,
        strides=byte_strides,
    )
    array.flags.writeable = False
    return array


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
    if out.size == 0:
        return out
    flat_shape, flat_strides = coalesce(shape, strides)
    source = numpy_view(storage, flat_shape, flat_strides, base_offset)
    copy_strided(out.reshape(flat_shape), source)
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


def _tile(stride_bytes: int) -> tuple[int, int]:
    """(tile rows, tile columns) for a transpose whose source rows are ``stride_bytes`` apart."""
    # Rows k apart share a set when k * stride is a multiple of 4 KiB: gcd says how many sets
    # the rows cycle through.
    groups = CACHE_SETS * LINE_BYTES // math.gcd(stride_bytes, CACHE_SETS * LINE_BYTES)
    columns = min(MAX_TILE_COLUMNS, ROWS_PER_SET_GROUP * groups)
    rows = max(MIN_TILE_ROWS, min(MAX_TILE_ROWS, TILE_VALUES // columns))
    return rows, columns


def _blocked_copy(target: np.ndarray, source: np.ndarray, strides: Sequence[int]) -> None:
    """Copies in tiles of the innermost axis against the outer axis that reads storage densest,
    when the innermost axis reads far apart and an outer one reads densely (a transpose).

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
    tile_rows, tile_columns = _tile(inner * source.itemsize)
    rows, cols = source.shape[dense], source.shape[last]
    index: list[slice] = [slice(None)] * source.ndim
    for col in range(0, cols, tile_columns):
        index[last] = slice(col, col + tile_columns)
        for row in range(0, rows, tile_rows):
            index[dense] = slice(row, row + tile_rows)
            key = tuple(index)
            _assign(target[key], source[key])
