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
* when it is not (a transpose: consecutive outputs sit far apart in storage) and the stride is
  a multiple of 4 KiB, the copy is cache blocked: tiles of the two axes involved are copied one
  slice assignment at a time, so each tile's reads and writes stay in cache. NumPy's own copy
  walks the output in order, and with such strides every read evicts the previous ones.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

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
        _blocked_copy(target, source, _element_strides(source))
    else:
        _assign(target, source)


def _element_strides(array: np.ndarray) -> tuple[int, ...]:
    return tuple(stride // array.itemsize for stride in array.strides)


def _assign(target: np.ndarray, source: np.ndarray) -> None:
    if target.dtype == source.dtype:
        target[...] = source
    else:
        with np.errstate(over="ignore"):
            np.copyto(target, source, casting="unsafe")


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
        _assign(target, source)
        return
    rows, cols = source.shape[dense], source.shape[last]
    index: list[slice] = [slice(None)] * source.ndim
    for row in range(0, rows, TILE_ROWS):
        index[dense] = slice(row, row + TILE_ROWS)
        for col in range(0, cols, TILE_COLUMNS):
            index[last] = slice(col, col + TILE_COLUMNS)
            key = tuple(index)
            _assign(target[key], source[key])
