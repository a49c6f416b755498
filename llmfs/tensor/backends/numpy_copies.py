"""The numpy backend's copies: cache-blocked, split over threads, the values of the offset cursor.

:func:`gather` copies a layout's values into a new contiguous array in logical row-major order;
:func:`copy_strided` writes one array into another of the same shape (a result written through
a permuted output). Both return exactly the values the offset cursor
(:mod:`llmfs.tensor.traversal`) visits, which is what the reference backend copies one value at
a time; they only move whole runs at once instead of one value per Python step:

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
outermost axis, one per thread (:mod:`llmfs.tensor.backends.threads`): each range is copied as
above into its own rows of the result, while NumPy has released the interpreter lock. One core
walking memory in two orders is what limits a transpose, so a second core nearly halves its
time; the values are the same for any thread count.

Layouts given to :func:`gather` are already validated (views are checked when they are made), so
nothing here checks bounds; the one allocation rule (:func:`llmfs.tensor.strided.allocating`)
guards the result.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Sequence

import numpy as np

from llmfs.tensor.backends.threads import get_num_threads, run_all
from llmfs.tensor.layout import Layout, element_count
from llmfs.tensor.strided import allocating, numpy_view

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


def gather(storage: np.ndarray, layout: Layout) -> np.ndarray:
    """Copies a validated layout's values into a new C-contiguous array of its shape.

    Raises :class:`~llmfs.tensor.errors.AllocationError` when the copy cannot be allocated.
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
    copy is large (:mod:`llmfs.tensor.backends.threads`). The ranges write disjoint rows of
    ``target``, so the result is the same for any thread count."""
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


__all__ = ["PARALLEL_MIN_VALUES", "copy_strided", "gather"]
