"""The layout algebra: the :class:`Layout` value (shape, strides, offset) and the rules that make
one layout from another without moving a value.

Each rule is one method of ``Layout``, which every view, backend, widget and test uses; the
functions after the class are its plain-tuple forms (``plan_reshape``, ``is_contiguous``) and the
shape rules that have no layout (``broadcast_shapes``, ``reduced_shape``). Input coercion, the
64-bit limits and the checks of explicit layouts live in :mod:`llmfs.tensor.checks`.

* A *shape* is a tuple of sizes >= 0; ``()`` is a scalar with one value.
* *Strides* are signed and counted in elements: 0 repeats a value (broadcasting), a negative
  stride walks backwards (a flip). Coordinate ``c`` is at ``offset + sum(c[k] * strides[k])``.
* Row-major strides count a size-0 axis as 1, as NumPy and PyTorch do: ``(2, 0, 3)`` has
  ``(3, 3, 1)``.
* Every size product (0 as 1), stride and reachable offset fits in a signed 64-bit integer, and
  a layout has at most :data:`MAX_RANK` (64) axes: checked where a layout is made and by every
  public predicate. A derived layout reaches a subset of its source's offsets, so it stays valid
  for the same storage.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from llmfs.tensor.checks import (
    INDEX_MAX,
    MAX_RANK,
    Shape,
    Strides,
    as_int,
    as_int_tuple,
    check_offsets_fit,
    check_permutation,
    check_rank,
    check_shape,
    checked_layout,
    fits_int64,
    layout_of_item,
    normalize_axes,
    normalize_axis,
    offset_bounds,
    slice_indices,
    validate,
    validated,
)
from llmfs.tensor.errors import (
    AxisOutOfRangeError,
    BroadcastError,
    IndexOutOfBoundsError,
    InvalidAxisRangeError,
    InvalidIndexError,
    InvalidShapeError,
    InvalidStepError,
    NegativeSliceBoundError,
    NonContiguousReshapeError,
    RankMismatchError,
    ReshapeElementCountMismatchError,
    ShapeOverflowError,
    SliceEndOutOfBoundsError,
    SliceStartAfterEndError,
    SqueezeError,
    TensorError,
)


@dataclass(frozen=True)
class Layout:
    """(shape, strides, offset) as one immutable value; ``offset`` is where coordinate 0 lives.

    The constructor trusts its fields (lists become tuples); :meth:`row_major` and :meth:`checked`
    check theirs, and every method checks its own arguments, naming its errors.
    """

    shape: Shape
    strides: Strides
    offset: int = 0

    def __post_init__(self) -> None:
        # Lists become tuples, so layouts compare equal and hash whatever sequence made them.
        if type(self.shape) is not tuple:
            object.__setattr__(self, "shape", tuple(self.shape))
        if type(self.strides) is not tuple:
            object.__setattr__(self, "strides", tuple(self.strides))

    # -- making one ---------------------------------------------------------------------------

    @classmethod
    def row_major(cls, shape: object) -> Layout:
        """The contiguous layout of ``shape`` at offset 0. Raises :class:`InvalidShapeError` (a size
        not an integer >= 0) or :class:`ShapeOverflowError` (past 64 bits)."""
        dims = check_shape(shape)
        return cls(dims, row_major_strides(dims), 0)

    @classmethod
    def checked(cls, shape: object, strides: object, offset: object, storage_len: int) -> Layout:
        """Explicit metadata checked against ``storage_len`` values (:func:`validate`); raises
        :class:`InvalidLayoutError` naming the broken rule (integer metadata included)."""
        return cls(*validated(shape, strides, offset, storage_len))

    def validate(self, storage_len: int) -> None:
        """:func:`validate` for this layout against ``storage_len`` values."""
        validate(self.shape, self.strides, self.offset, storage_len)

    # -- facts --------------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self.shape)

    ndim = rank  # NumPy's name

    @property
    def size(self) -> int:
        """Number of logical values."""
        return element_count(self.shape)

    @property
    def is_empty(self) -> bool:
        """True when a size is 0: the layout reaches no storage."""
        return 0 in self.shape

    def is_contiguous(self) -> bool:
        """Row-major with no gaps. Size-1 axes may carry any stride (they never advance); scalars
        and empty layouts are contiguous; the offset does not matter."""
        if self.is_empty:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(self.strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def can_view_as_contiguous(self) -> bool:
        """Contiguous in some axis order ("transpose-contiguous"): contiguous, or the axes of size
        != 1, none with a stride <= 0, sorted by stride (descending) are. So ``(5, 4, 6, 7)`` with
        strides ``(42, 210, 7, 1)`` (a transposed ``(4, 5, 6, 7)``) is true."""
        if self.is_contiguous():
            return True
        pairs = sorted(
            ((stride, size) for size, stride in zip(self.shape, self.strides) if size != 1),
            reverse=True,
        )
        if any(stride <= 0 for stride, _ in pairs):
            return False
        return Layout(tuple(p[1] for p in pairs), tuple(p[0] for p in pairs)).is_contiguous()

    def offset_bounds(self) -> tuple[int, int] | None:
        """The smallest and largest reachable offsets, ``None`` if empty."""
        return offset_bounds(self.shape, self.strides, self.offset)

    def storage_offset(self, coordinate: object) -> int:
        """Storage offset of ``coordinate``. Raises :class:`RankMismatchError` for a wrong length
        and :class:`IndexOutOfBoundsError` for a component outside ``[0, size)``, a negative one
        too (a coordinate counts from 0; only ``view[...]`` counts from the end)."""
        coord = as_int_tuple(coordinate, "index")
        if len(coord) != self.rank:
            what = "coordinate length (the view's rank)"
            raise RankMismatchError(self.rank, len(coord), what=what)
        offset = self.offset
        for axis, (index, size, stride) in enumerate(zip(coord, self.shape, self.strides)):
            if not 0 <= index < size:
                raise IndexOutOfBoundsError(axis, index, size)
            offset += index * stride
        return offset

    def overlapping_coordinates(self) -> tuple[Shape, Shape] | None:
        """Two coordinates that reach one storage offset, or ``None`` when each has a cell of its
        own: the one test of whether a layout may be written through (``copyto``, ``execute_into``).
        Never raises.

        A zero stride on an axis of size >= 2 answers at once. Otherwise, with the axes of size >= 2
        sorted by ``|stride|``, no two coordinates meet when each stride exceeds the reach
        ``sum((size - 1) * |stride|)`` of the smaller ones (true of every view of an owner). A
        layout that breaks this may still be one-to-one (``(3, 3)`` with strides ``(3, 2)``), so it
        is walked row-major and the first repeated offset answers."""
        dims, steps = self.shape, self.strides
        if self.is_empty:
            return None
        for axis, (size, stride) in enumerate(zip(dims, steps)):
            if size >= 2 and stride == 0:
                return (0,) * len(dims), tuple(int(k == axis) for k in range(len(dims)))
        reach = 0
        for stride, size in sorted((abs(s), n) for n, s in zip(dims, steps) if n >= 2):
            if stride <= reach:
                break
            reach += (size - 1) * stride
        else:
            return None
        seen: dict[int, Shape] = {}
        for coordinate in itertools.product(*map(range, dims)):  # row-major: last axis fastest
            offset = sum(c * s for c, s in zip(coordinate, steps))
            if offset in seen:
                return seen[offset], coordinate
            seen[offset] = coordinate
        return None

    def coalesce(self) -> Layout:
        """Fewest axes that visit the same offsets in the same order.

        Size-1 axes are dropped and neighbours with ``stride[k] == size[k+1] * stride[k+1]`` merged,
        so a contiguous layout becomes one axis and a transposed matrix stays two; empty layouts are
        returned unchanged. Copies and kernels walk whole runs with it."""
        if self.is_empty:
            return self
        shape: list[int] = []
        strides: list[int] = []
        for size, stride in zip(self.shape, self.strides):
            if size == 1:
                continue
            if shape and strides[-1] == size * stride:
                shape[-1] *= size
                strides[-1] = stride
            else:
                shape.append(size)
                strides.append(stride)
        return Layout(tuple(shape), tuple(strides), self.offset)

    # -- axes in another order ----------------------------------------------------------------

    def permute(self, axes: object) -> Layout:
        """Output axis ``k`` takes the size and stride of source axis ``axes[k]``. Raises
        :class:`PermutationLengthMismatchError`, :class:`AxisOutOfRangeError` or
        :class:`DuplicateAxisError` unless ``axes`` names each axis once."""
        order = check_permutation(axes, self.rank)
        shape = tuple(self.shape[a] for a in order)
        return Layout(shape, tuple(self.strides[a] for a in order), self.offset)

    def swap_axes(self, first: object, second: object) -> Layout:
        """Exchanges two axes (negatives from the end); raises :class:`AxisOutOfRangeError`."""
        order = list(range(self.rank))
        a, b = normalize_axis(first, self.rank), normalize_axis(second, self.rank)
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def reversed_axes(self) -> Layout:
        """All axes in reverse order (NumPy's ``transpose()`` without arguments)."""
        return self.permute(range(self.rank - 1, -1, -1))

    # -- slices, flips, indices ---------------------------------------------------------------

    def slice(self, axis: object, start: object, stop: object, step: object = 1) -> Layout:
        """The strict slice ``start:stop:step`` of one axis: no clamping, no negative bounds.

        The size becomes ``ceil((stop - start) / step)``, the stride ``stride * step``, and the
        offset moves by ``start * stride``. Raises :class:`AxisOutOfRangeError`,
        :class:`InvalidArgumentError` (not an integer), :class:`NegativeSliceBoundError`,
        :class:`SliceStartAfterEndError` (start > stop), :class:`SliceEndOutOfBoundsError` (stop >
        size), :class:`InvalidStepError` (step < 1) and :class:`ShapeOverflowError` (the stepped
        stride past 64 bits)."""
        ax = normalize_axis(axis, self.rank)
        first = as_int(start, "slice start")
        last = as_int(stop, "slice stop")
        every = as_int(step, "slice step")
        size = self.shape[ax]
        if first < 0:
            raise NegativeSliceBoundError(ax, first, size, what="slice start")
        if last < 0:
            raise NegativeSliceBoundError(ax, last, size, what="slice stop")
        if first > last:
            raise SliceStartAfterEndError(ax, first, last)
        if last > size:
            raise SliceEndOutOfBoundsError(ax, last, size)
        if every < 1:
            raise InvalidStepError(every)
        strides = _replaced(self.strides, ax, self._stepped_stride(ax, every))
        shape = _replaced(self.shape, ax, -(-(last - first) // every))  # ceil division
        offset = self.offset + first * self.strides[ax]
        check_offsets_fit(shape, strides, offset)
        return Layout(shape, strides, offset)

    def _stepped_stride(self, axis: int, step: int) -> int:
        """``strides[axis] * step``, or a :class:`ShapeOverflowError` past 64 bits (even where the
        new size is 1, as :func:`validate` refuses such a stride)."""
        stride = self.strides[axis]
        if not fits_int64(stride * step):
            raise ShapeOverflowError(
                self.shape,
                f"the stride of axis {axis} after a step of {step} ({stride} * {step} = "
                f"{stride * step})",
            )
        return stride * step

    def flip(self, axis: object) -> Layout:
        """Reverses one axis: its stride is negated and the offset moves to the axis's last value
        (an empty axis leaves it). Raises :class:`AxisOutOfRangeError`."""
        ax = normalize_axis(axis, self.rank)
        size, stride = self.shape[ax], self.strides[ax]
        offset = self.offset + (size - 1) * stride if size > 0 else self.offset
        return Layout(self.shape, _replaced(self.strides, ax, -stride), offset)

    def index(self, key: object) -> Layout:
        """NumPy basic indexing (``view[key]``) as a layout.

        Ints select one position and drop the axis (negatives count from the end); slices clamp and
        take negative bounds and steps (a negative stride); ``...`` stands for the axes not named;
        ``None`` inserts a size-1 axis. Raises :class:`IndexOutOfBoundsError` (an int outside its
        axis), :class:`InvalidStepError` (step 0), :class:`InvalidIndexError` (too many indices, two
        ``...``, a bool or another item), :class:`ShapeOverflowError` (a stepped stride past 64
        bits) and :class:`InvalidShapeError` (above :data:`MAX_RANK` axes)."""
        shape, strides = self.shape, self.strides
        items = list(key) if isinstance(key, tuple) else [key]
        if sum(1 for item in items if item is Ellipsis) > 1:
            raise InvalidIndexError("an index may contain at most one '...'")
        consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
        if consumed > self.rank:
            raise InvalidIndexError(
                f"too many indices: {consumed} given for a view of rank {self.rank}"
            )
        out_shape: list[int] = []
        out_strides: list[int] = []
        offset = self.offset
        axis = 0
        for item in items:
            if item is None:
                out_shape.append(1)
                out_strides.append(strides[axis] * shape[axis] if axis < self.rank else 1)
            elif item is Ellipsis:
                skipped = self.rank - consumed
                out_shape.extend(shape[axis : axis + skipped])
                out_strides.extend(strides[axis : axis + skipped])
                axis += skipped
            elif isinstance(item, slice):
                start, stop, step = slice_indices(item, shape[axis])
                out_strides.append(self._stepped_stride(axis, step))
                out_shape.append(len(range(start, stop, step)))
                if out_shape[-1]:
                    offset += start * strides[axis]
                axis += 1
            else:
                if isinstance(item, bool):
                    raise InvalidIndexError("boolean indices are not supported")
                try:
                    index = operator.index(item)  # type: ignore[arg-type]
                except TypeError:
                    raise InvalidIndexError(
                        f"unsupported index {item!r}: use ints, slices, '...' or None"
                    ) from None
                if not -shape[axis] <= index < shape[axis]:
                    raise IndexOutOfBoundsError(axis, index, shape[axis], from_end=True)
                offset += (index % shape[axis]) * strides[axis]
                axis += 1
        out_shape.extend(shape[axis:])
        out_strides.extend(strides[axis:])
        check_rank(out_shape)
        return Layout(tuple(out_shape), tuple(out_strides), offset)

    def diagonal(self, groups: Sequence[Sequence[int]]) -> Layout:
        """Each group of axes (equal sizes, checked by the caller) becomes one axis, where its first
        axis was, whose stride sums the group's: a step of it steps the whole group, the diagonal.
        ``(3, 3)`` with strides ``(3, 1)`` and group ``(0, 1)`` gives ``(3,)``, stride ``(4,)``."""
        first_of = {group[0]: group for group in groups}
        absorbed = {axis for group in groups for axis in group[1:]}
        kept = [axis for axis in range(self.rank) if axis not in absorbed]
        strides = tuple(
            sum(self.strides[k] for k in first_of[axis]) if axis in first_of else self.strides[axis]
            for axis in kept
        )
        return Layout(tuple(self.shape[axis] for axis in kept), strides, self.offset)

    # -- reshapes: merges and splits ----------------------------------------------------------

    def reshape(self, shape: object) -> Layout:
        """The same offsets in the same logical order under a new shape, never copying.

        A reshape splits and merges axes. A split never needs a copy; old axes merge only when,
        size-1 axes ignored, ``stride[k] == size[k+1] * stride[k+1]``: NumPy's no-copy reshape and
        PyTorch's ``view``, with their strides (a contiguous or empty layout gets row-major ones).
        One size may be ``-1``. Raises :class:`InvalidShapeError` (negative or ambiguous sizes),
        :class:`ReshapeElementCountMismatchError` (the counts differ) and
        :class:`NonContiguousReshapeError` naming the axes that cannot merge."""
        new_shape = infer_shape(shape, self.size)
        if element_count(new_shape) != self.size:
            raise ReshapeElementCountMismatchError(self.size, element_count(new_shape), new_shape)
        if self.is_contiguous():  # empty layouts included: any base stride works
            return Layout(new_shape, row_major_strides(new_shape), self.offset)
        # The old layout without its size-1 axes, remembering their numbers for messages.
        old = [(k, n, s) for k, (n, s) in enumerate(zip(self.shape, self.strides)) if n != 1]
        new_strides = [0] * len(new_shape)
        oi = ni = 0
        while ni < len(new_shape) and oi < len(old):
            new_product, old_product = new_shape[ni], old[oi][1]
            nj, oj = ni + 1, oi + 1
            while new_product != old_product:
                if new_product < old_product:
                    new_product *= new_shape[nj]
                    nj += 1
                else:
                    old_product *= old[oj][1]
                    oj += 1
            # Old axes oi..oj-1 must form one run to be merged (split afterwards into ni..nj-1).
            for (axis_a, size_a, stride_a), (axis_b, size_b, stride_b) in zip(
                old[oi : oj - 1], old[oi + 1 : oj]
            ):
                if stride_a != size_b * stride_b:
                    raise NonContiguousReshapeError(
                        self.shape,
                        self.strides,
                        new_shape,
                        f"axes {axis_a} and {axis_b} (sizes {size_a}, {size_b}; strides "
                        f"{stride_a}, {stride_b}) are not adjacent in storage: "
                        f"{stride_a} != {size_b}*{stride_b}",
                    )
            new_strides[nj - 1] = old[oj - 1][2]
            for k in range(nj - 1, ni, -1):
                new_strides[k - 1] = new_strides[k] * new_shape[k]
            ni, oi = nj, oj
        # Trailing size-1 axes of the new shape: any stride is valid; use the last group's.
        for k in range(ni, len(new_shape)):
            new_strides[k] = new_strides[ni - 1] if ni > 0 else 1
        return Layout(new_shape, tuple(new_strides), self.offset)

    def merge(self, start: object, end: object) -> Layout:
        """Fuses axes ``start..=end`` into one (a reshape, never a copy); raises
        :class:`InvalidAxisRangeError` when ``start > end`` after normalising, and the reshape's
        errors."""
        a, b = normalize_axis(start, self.rank), normalize_axis(end, self.rank)
        if a > b:
            raise InvalidAxisRangeError(a, b)
        return self.reshape(
            (*self.shape[:a], element_count(self.shape[a : b + 1]), *self.shape[b + 1 :])
        )

    def split(self, axis: object, sizes: object) -> Layout:
        """Splits one axis into ``sizes`` (one may be ``-1``), never copying. Raises
        :class:`ReshapeElementCountMismatchError` unless their product is the axis size, and
        :class:`InvalidShapeError` above :data:`MAX_RANK` axes."""
        ax = normalize_axis(axis, self.rank)
        parts = infer_shape(sizes, self.shape[ax])
        if element_count(parts) != self.shape[ax]:
            raise ReshapeElementCountMismatchError(self.shape[ax], element_count(parts), parts)
        shape = (*self.shape[:ax], *parts, *self.shape[ax + 1 :])
        check_rank(shape)
        inner = tuple(s * self.strides[ax] for s in row_major_strides(parts))
        return Layout(shape, (*self.strides[:ax], *inner, *self.strides[ax + 1 :]), self.offset)

    # -- broadcasting and size-1 axes ---------------------------------------------------------

    def expand(self, shape: object) -> Layout:
        """Expands to ``shape`` with zero strides (``expand``/``broadcast_to``).

        New leading axes get stride 0; an axis keeps its stride when the sizes are equal or the
        target is ``-1``; a size-1 axis expands to any size (0 included) with stride 0. Anything
        else is a :class:`BroadcastError` naming the axis and both sizes."""
        dims = as_int_tuple(shape, "size")
        if len(dims) < self.rank:
            detail = f"the target has rank {len(dims)}, below the source rank {self.rank}"
            raise BroadcastError(self.shape, dims, 0, detail)
        lead = len(dims) - self.rank
        out_shape: list[int] = []
        out_strides: list[int] = []
        for axis, want in enumerate(dims):
            if axis < lead:
                if want < 0:
                    detail = f"a new leading axis needs a size >= 0, not {want}"
                    raise BroadcastError(self.shape, dims, axis, detail)
                have, stride = want, 0
            else:
                have, stride = self.shape[axis - lead], self.strides[axis - lead]
            if want == -1 or want == have:
                out_shape.append(have)
                out_strides.append(stride)
            elif have == 1 and want >= 0:
                out_shape.append(want)
                out_strides.append(0)
            else:
                detail = f"source size {have} cannot expand to {want} (only a size-1 axis can)"
                raise BroadcastError(self.shape, dims, axis, detail)
        return Layout(check_shape(tuple(out_shape)), tuple(out_strides), self.offset)

    def unsqueeze(self, axis: object) -> Layout:
        """Inserts a size-1 axis at ``axis`` (in ``[-rank-1, rank]``) with the row-major-consistent
        stride, so a contiguous layout stays visibly so. Raises :class:`AxisOutOfRangeError`, and
        :class:`InvalidShapeError` above :data:`MAX_RANK` axes."""
        index = as_int(axis, "axis")
        if not -self.rank - 1 <= index <= self.rank:
            raise AxisOutOfRangeError(index, self.rank, insertion=True)
        if index < 0:
            index += self.rank + 1
        check_rank((*self.shape, 1))
        stride = self.strides[index] * self.shape[index] if index < self.rank else 1
        return Layout(
            (*self.shape[:index], 1, *self.shape[index:]),
            (*self.strides[:index], stride, *self.strides[index:]),
            self.offset,
        )

    def squeeze(self, axes: object = None) -> Layout:
        """Drops size-1 axes: all of them (``axes=None``) or the ones named. Raises
        :class:`SqueezeError` for a named axis whose size is not 1."""
        if axes is None:
            drop = {k for k, size in enumerate(self.shape) if size == 1}
        else:
            drop = set(normalize_axes(axes, self.rank))
            for k in sorted(drop):
                if self.shape[k] != 1:
                    raise SqueezeError(k, self.shape[k])
        keep = [k for k in range(self.rank) if k not in drop]
        shape = tuple(self.shape[k] for k in keep)
        return Layout(shape, tuple(self.strides[k] for k in keep), self.offset)

    def __str__(self) -> str:
        return f"shape {self.shape}, strides {self.strides}, offset {self.offset}"


def _replaced(values: tuple[int, ...], axis: int, value: int) -> tuple[int, ...]:
    return (*values[:axis], value, *values[axis + 1 :])


# -- the rules over plain tuples (the forms the chapters and backends call) --------------------


def row_major_strides(shape: Sequence[int]) -> Strides:
    """Row-major strides: 1 for the last axis, each earlier one the product of the sizes after it (a
    size-0 axis counted as 1): ``row_major_strides((2, 3, 4)) == (12, 4, 1)``. Raises
    :class:`InvalidShapeError` (a size not an integer >= 0) and :class:`ShapeOverflowError` (the
    product past :data:`INDEX_MAX`)."""
    strides = []
    running = 1
    for size in reversed(check_shape(shape)):
        strides.append(running)
        running *= max(size, 1)
    return tuple(reversed(strides))


def element_count(shape: Sequence[int]) -> int:
    """Number of values a shape holds: the product of its sizes (1 for a scalar, 0 with a 0)."""
    count = 1
    for size in shape:
        count *= size
    return count


def storage_offset(
    shape: Sequence[int], strides: Sequence[int], base_offset: int, coordinate: object
) -> int:
    """:meth:`Layout.storage_offset`: the offset of one checked coordinate."""
    return Layout(tuple(shape), tuple(strides), base_offset).storage_offset(coordinate)


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """:meth:`Layout.is_contiguous` of checked input. Raises :class:`RankMismatchError` when
    shape and strides differ in length, :class:`InvalidShapeError` for a negative size and
    :class:`ShapeOverflowError` past 64 bits (:func:`~llmfs.tensor.checks.checked_layout`)."""
    return Layout(*checked_layout(shape, strides)).is_contiguous()


def can_view_as_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """:meth:`Layout.can_view_as_contiguous` of checked input (errors as :func:`is_contiguous`)."""
    return Layout(*checked_layout(shape, strides)).can_view_as_contiguous()


def can_view_as_contiguous_all(layouts: Iterable[object]) -> bool:
    """One :func:`can_view_as_contiguous` answer for a list of views or ``(shape, strides)`` pairs:
    true for an empty list, else every item must share the first one's layout, which must pass.
    Raises :class:`TensorError` when ``layouts`` is not an iterable or an item is neither (a NumPy
    array is refused: its strides count bytes), and the single test's errors for an item."""
    if isinstance(layouts, (str, bytes, Mapping)) or not isinstance(layouts, Iterable):
        raise TensorError(
            f"can_view_as_contiguous_all takes a list of views or (shape, strides) pairs, got "
            f"{type(layouts).__name__} {layouts!r}"
        )
    items = [layout_of_item(index, item) for index, item in enumerate(layouts)]
    if any(item != items[0] for item in items[1:]):
        return False
    return not items or Layout(*items[0]).can_view_as_contiguous()


def plan_reshape(
    shape: Sequence[int], strides: Sequence[int], requested: object
) -> tuple[Shape, Strides]:
    """:meth:`Layout.reshape` over tuples: ``(new_shape, new_strides)`` or the reshape's error."""
    reshaped = Layout(tuple(shape), tuple(strides)).reshape(requested)
    return reshaped.shape, reshaped.strides


def broadcast_layout(
    shape: Sequence[int], strides: Sequence[int], target: object
) -> tuple[Shape, Strides]:
    """:meth:`Layout.expand` over tuples: zero strides for new and size-1 axes."""
    expanded = Layout(tuple(shape), tuple(strides)).expand(target)
    return expanded.shape, expanded.strides


def zero_unused_strides(shape: Sequence[int], strides: Sequence[int]) -> Strides:
    """``strides`` with 0 for every stride never applied (a size-1 axis; every axis of an empty
    layout): same offsets, same order. Code that stores strides in narrower integers (the Metal
    kernels' 32-bit ints) uses it, so a stride that never moves cannot overflow. Never raises."""
    if any(size == 0 for size in shape):
        return (0,) * len(shape)
    return tuple(0 if size == 1 else stride for size, stride in zip(shape, strides))


# -- shape rules -------------------------------------------------------------------------------


def infer_shape(requested: object, count: int) -> Shape:
    """Resolves at most one ``-1`` in a requested shape for ``count`` values (``count //`` the
    others' product). Raises :class:`InvalidShapeError` for another negative size, two ``-1``, or a
    ``-1`` among sizes that multiply to 0, and :class:`ReshapeElementCountMismatchError` when the
    ``-1`` cannot divide evenly; other counts are compared by the caller."""
    dims = as_int_tuple(requested, "size")
    unknown = [axis for axis, size in enumerate(dims) if size == -1]
    for axis, size in enumerate(dims):
        if size < -1:
            raise InvalidShapeError(list(dims), f"size {size} of axis {axis} is negative")
    if len(unknown) > 1:
        raise InvalidShapeError(
            list(dims), f"only one size may be -1 (inferred), but axes {unknown} are -1"
        )
    if not unknown:
        return check_shape(dims)
    others = element_count([size for size in dims if size != -1])
    if others == 0:
        raise InvalidShapeError(
            list(dims), "the -1 size is ambiguous because the other sizes multiply to 0"
        )
    if count % others != 0:
        raise ReshapeElementCountMismatchError(count, others, dims)
    return check_shape(_replaced(dims, unknown[0], count // others))


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """NumPy's broadcasting rule: right-align the shapes; on each axis the sizes are equal or 1.
    Raises :class:`BroadcastError` naming both shapes and the output axis, and
    :class:`ShapeOverflowError` when a size product leaves 64 bits."""
    if len(shapes) > 1 and all(shape == shapes[0] for shape in shapes[1:]):
        return check_shape(shapes[0])  # the common case of an op on equal shapes: nothing to do
    shapes = tuple(check_shape(shape) for shape in shapes)
    rank = max((len(s) for s in shapes), default=0)
    result = [1] * rank
    setter = [0] * rank  # which shape fixed each output size, for the error message
    for index, shape in enumerate(shapes):
        lead = rank - len(shape)
        for axis, size in enumerate(shape):
            out_axis = axis + lead
            current = result[out_axis]
            if size == current or size == 1:
                continue
            if current == 1:
                result[out_axis] = size
                setter[out_axis] = index
                continue
            raise BroadcastError(
                shapes[setter[out_axis]],
                shape,
                out_axis,
                f"sizes {current} and {size} are neither equal nor 1",
            )
    return check_shape(tuple(result))


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool = False) -> Shape:
    """The shape left after reducing ``axes`` (normalised, distinct): those axes are dropped, or
    kept with size 1 when ``keepdims``."""
    drop = set(axes)
    if keepdims:
        return tuple(1 if axis in drop else size for axis, size in enumerate(shape))
    return tuple(size for axis, size in enumerate(shape) if axis not in drop)


__all__ = [
    "INDEX_MAX",
    "MAX_RANK",
    "Layout",
    "Shape",
    "Strides",
    "as_int",
    "broadcast_layout",
    "broadcast_shapes",
    "can_view_as_contiguous",
    "can_view_as_contiguous_all",
    "check_permutation",
    "check_shape",
    "element_count",
    "infer_shape",
    "is_contiguous",
    "normalize_axes",
    "normalize_axis",
    "offset_bounds",
    "plan_reshape",
    "reduced_shape",
    "row_major_strides",
    "storage_offset",
    "validate",
    "zero_unused_strides",
]
