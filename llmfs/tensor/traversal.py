"""The offset cursor: a readable walk over a checked layout in logical row-major order.

:class:`StridedOffsets` is the teaching path of the library (a cursor that holds the next offset
and each axis's position). It is checked once, when it is made: the layout must be well formed
and every reachable offset must lie inside the storage. After that, ``next`` trusts the plan: it
does no per-value rank or bounds checks and builds no coordinate lists, it only adds a stride or
carries.

Order of the walk: the base offset first; then advance the last axis; when an axis reaches its
size, rewind it to 0 and carry into the axis before it. So a scalar yields its base offset once, an
empty layout yields nothing, a zero stride repeats offsets (broadcasting) and a size-1 axis never
advances whatever its stride.

It is also how the reference backend copies (``materialize``, ``tolist``): one cursor step per
value. The numpy backend's fast copies (:mod:`llmfs.tensor.backends.numpy_copies`) produce
exactly the values this cursor visits; the tests hold them to it.
"""

from __future__ import annotations

from collections.abc import Iterator

from llmfs.tensor.errors import InvalidLayoutError
from llmfs.tensor.layout import Layout, element_count


class StridedOffsets(Iterator[int]):
    """Iterator over the storage offsets of a layout, in logical row-major order.

    Invariant: after construction, every offset it yields is in ``[0, storage_len)``.
    Raises :class:`InvalidLayoutError` at construction when the layout could read outside the
    storage (``validate`` is the single check).
    """

    __slots__ = ("_next", "_positions", "_remaining", "_rewinds", "_sizes", "_strides")

    def __init__(self, layout: Layout, storage_len: int) -> None:
        layout.validate(storage_len)
        shape, strides = layout.shape, layout.strides
        self._sizes = tuple(shape)
        self._strides = tuple(strides)
        # Going from position size-1 back to 0 subtracts (size-1)*stride: the "rewind" of an axis.
        self._rewinds = tuple((size - 1) * stride for size, stride in zip(shape, strides))
        self._positions = [0] * len(self._sizes)
        self._next = layout.offset
        self._remaining = element_count(self._sizes)

    def __iter__(self) -> StridedOffsets:
        return self

    def __len__(self) -> int:
        return self._remaining

    def __next__(self) -> int:
        if self._remaining == 0:
            raise StopIteration
        offset = self._next
        self._remaining -= 1
        if self._remaining:
            self._advance()
        return offset

    def _advance(self) -> None:
        positions = self._positions
        for axis in range(len(positions) - 1, -1, -1):
            position = positions[axis] + 1
            if position < self._sizes[axis]:
                positions[axis] = position
                self._next += self._strides[axis]
                return
            positions[axis] = 0
            self._next -= self._rewinds[axis]
        # A non-empty walk with values remaining always finds an axis to advance.
        raise InvalidLayoutError("cursor", "advanced past the end of its walk")


def contiguous_runs(layout: Layout, storage_len: int) -> Iterator[tuple[int, int, int]]:
    """Walks a layout by runs instead of single values: yields ``(start, count, step)`` so that
    the run's offsets are ``start, start+step, ..., start+(count-1)*step``.

    The innermost axis becomes the run (candle's block iteration); the outer axes are walked by
    :class:`StridedOffsets`. Concatenating the runs gives exactly the cursor's offsets.
    """
    layout.validate(storage_len)
    shape, strides = layout.shape, layout.strides
    if element_count(shape) == 0:
        return
    if not shape:
        yield layout.offset, 1, 1
        return
    count, step = shape[-1], strides[-1]
    # The outer walk stays within bounds because the full layout does.
    for start in StridedOffsets(Layout(shape[:-1], strides[:-1], layout.offset), storage_len):
        yield start, count, step
