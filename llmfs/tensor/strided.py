"""NumPy views of a storage buffer, and the fast gather behind ``materialize``.

Both functions take a layout that the caller has already validated against the storage (views
are checked when they are made), so they do no bounds checks of their own; :func:`numpy_view`
turns a :class:`~llmfs.tensor.layout.Layout` into an ndarray over the *same* memory, and
:func:`gather` copies a layout's values into a new contiguous array in logical row-major order.

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

from llmfs.tensor.layout import Layout

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


def numpy_view(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """A read-only ndarray over ``storage`` with the given layout (strides in elements).

    The layout must already be validated against ``storage`` (every reachable offset inside it);
    empty layouts return an empty array that touches nothing.
    """
    shape = layout.shape
    if layout.is_empty:
        return np.empty(shape, dtype=storage.dtype)
    itemsize = storage.itemsize
    # A size-1 axis never advances, so its stride may be anything (even past 64 bits in bytes);
    # NumPy only needs a harmless 0 there.
    byte_strides = tuple(stride * itemsize for stride in layout.zero_unused_strides().strides)
    return np.lib.stride_tricks.as_strided(
        storage[layout.offset :], shape=shape, strides=byte_strides, writeable=False
    )


def gather(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """Copies a validated layout's values into a new C-contiguous array of its shape."""
    out = np.empty(layout.shape, dtype=storage.dtype)
    count = out.size
    if count == 0:
        return out
    flat = layout.coalesce()
    source = numpy_view(storage, flat)
    target = out.reshape(flat.shape)
    if flat.rank >= 2 and count >= BLOCKED_MIN_VALUES:
        _blocked_copy(target, source, flat.strides)
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
