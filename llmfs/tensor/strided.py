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
  blocked: square tiles of the two axes involved are copied one slice assignment at a time, so
  each tile's reads and writes stay in cache. NumPy's own copy walks the output in order and
  misses the cache on every read, which is several times slower on large matrices.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from llmfs.tensor.layout import coalesce, element_count

#: Side of the square tiles used by the cache-blocked copy (in elements). 64-128 is the sweet
#: spot on current CPUs: two tiles of float64 fit in a 256 KiB L2 with room to spare.
TILE = 96

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
    view = np.lib.stride_tricks.as_strided(
        storage[base_offset:],
        shape=shape,
        strides=tuple(stride * itemsize for stride in strides),
        writeable=False,
    )
    return view


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
        np.copyto(target, source)
    return out


def _blocked_copy(target: np.ndarray, source: np.ndarray, strides: Sequence[int]) -> None:
    """Tiles the innermost axis against the outer axis that reads storage most densely."""
    last = len(strides) - 1
    inner = abs(strides[last])
    # The outer axis with the smallest |stride| is the one the source is "really" laid out along.
    dense = min(range(last), key=lambda axis: abs(strides[axis]))
    if inner <= 1 or abs(strides[dense]) >= inner:
        # Reads along the output's inner axis are already the densest: one streaming copy wins.
        np.copyto(target, source)
        return
    rows, cols = source.shape[dense], source.shape[last]
    index: list[slice] = [slice(None)] * source.ndim
    for row in range(0, rows, TILE):
        index[dense] = slice(row, row + TILE)
        for col in range(0, cols, TILE):
            index[last] = slice(col, col + TILE)
            key = tuple(index)
            target[key] = source[key]
