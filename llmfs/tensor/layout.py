"""Layout arithmetic: pure functions over (shape, strides, base offset), and the ``Layout`` value.

This module is the single home of the library's index maths. Views, every backend, the widgets
and the tests call these functions; nothing else computes strides, offsets, contiguity, bounds or
reshape plans. Every function is pure: it takes tuples of Python ints and returns new tuples (or
raises a :class:`~llmfs.tensor.errors.TensorError`), so each one can be read, tested and taught on
its own. :class:`Layout` bundles the triple into one frozen value whose methods are these
functions (``layout.reshape(shape)`` is :func:`plan_reshape` plus the unchanged offset), so views,
backends and widgets pass one value instead of three loose ones.

Conventions
-----------
* A *shape* is a tuple of non-negative sizes; ``()`` is a scalar with one value.
* *Strides* are signed and counted in elements (not bytes). A zero stride repeats values
  (broadcasting); a negative stride walks backwards (a flip).
* The *storage offset* of coordinate ``c`` is ``base_offset + sum(c[k] * strides[k])``.
* Row-major ("C order") strides count a size-0 axis as size 1, as NumPy and PyTorch do, so the
  strides of ``(2, 0, 3)`` are ``(3, 3, 1)``.
* Every size product (a 0 counted as 1), every stride and every reachable offset must fit in a
  signed 64-bit integer: Python ints never overflow, but storage indices and the Metal kernels
  are 64-bit. This is checked where a layout is made and by every public predicate.
* A layout has at most :data:`MAX_RANK` (64) axes, NumPy's limit, checked where it is made.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import NoReturn

from llmfs.tensor.errors import (
    AxisOutOfRangeError,
    BroadcastError,
    DuplicateAxisError,
    IndexOutOfBoundsError,
    InvalidArgumentError,
    InvalidAxisRangeError,
    InvalidIndexError,
    InvalidLayoutError,
    InvalidShapeError,
    InvalidStepError,
    NegativeSliceBoundError,
    NonContiguousReshapeError,
    PermutationLengthMismatchError,
    RankMismatchError,
    ReshapeElementCountMismatchError,
    ShapeOverflowError,
    SliceEndOutOfBoundsError,
    SliceStartAfterEndError,
    SqueezeError,
    TensorError,
)

Shape = tuple[int, ...]
Strides = tuple[int, ...]

#: The largest index a 64-bit signed integer can hold; sizes and offsets must stay at or below it.
INDEX_MAX = 2**63 - 1

#: The most axes a layout may have: NumPy 2's limit (``NPY_MAXDIMS``), so that every layout can
#: be read by NumPy (``repr``, ``tolist``, ``materialize`` and the ops all go through it).
MAX_RANK = 64


# --------------------------------------------------------------------------------------------
# Normalising user input
# --------------------------------------------------------------------------------------------


def as_int(value: object, what: str) -> int:
    """One exact integer (a Python or NumPy integer, or a 0-d integer array); ``what`` names it
    in the error. Floats, bools and sequences are refused with :class:`InvalidArgumentError`
    (:class:`InvalidShapeError` for sizes)."""
    if isinstance(value, bool) or (hasattr(value, "dtype") and value.dtype.kind == "b"):
        _refuse(what, value, "not a bool")
    try:
        # Accepts int, numpy integers and 0-d integer arrays; anything else raises TypeError.
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        _refuse(what, value, "")


def _refuse(what: str, value: object, note: str) -> NoReturn:
    if what == "size":
        detail = f"size must be an integer{', ' + note if note else ''}, got {value!r}"
        raise InvalidShapeError(value, detail) from None
    raise InvalidArgumentError(what, value) from None


def as_int_tuple(values: object, what: str = "size") -> tuple[int, ...]:
    """Converts a list/tuple/array of integers (or one integer) into a tuple of Python ints.

    Raises :class:`InvalidShapeError` (sizes) or :class:`InvalidArgumentError` (anything else)
    when ``values`` is not integers.
    """
    if type(values) is tuple and all(type(v) is int for v in values):
        return values  # already exact Python ints (the common case, checked in one pass)
    if type(values) is tuple or type(values) is list:  # the usual containers, no ABC checks
        return tuple(as_int(v, what) for v in values)
    if isinstance(values, (str, bytes, Mapping, Set)) or values is None:
        # A dict or a set iterates in an order the caller did not write down (a dict gives only
        # its keys), so it is refused rather than read as a shape; iterators are fine.
        if what == "size":
            raise InvalidShapeError(
                values,
                f"expected a sequence of integers (a list or tuple), got "
                f"{type(values).__name__} {values!r}",
            )
        raise InvalidArgumentError(what, values, many=True)
    if getattr(values, "ndim", None) == 0 or not isinstance(values, Iterable):
        return (as_int(values, what),)
    return tuple(as_int(v, what) for v in values)


def checked_layout(shape: object, strides: object) -> tuple[Shape, Strides]:
    """``(shape, strides)`` as int tuples after checking sizes are ``>= 0``, the ranks match and
    the size product, every stride and every offset reachable from base 0 fit in 64 bits.

    Raises :class:`InvalidShapeError`, :class:`InvalidArgumentError`, :class:`RankMismatchError`
    or :class:`ShapeOverflowError`.
    """
    dims = check_sizes(shape)
    steps = as_int_tuple(strides, "stride")
    if len(dims) != len(steps):
        raise RankMismatchError(len(dims), len(steps), what="the number of strides (the rank)")
    product = element_count([size or 1 for size in dims])
    if product > INDEX_MAX:
        raise ShapeOverflowError(dims, f"the product of the sizes (a 0 counted as 1), {product},")
    check_strides_fit(dims, steps)
    check_offsets_fit(dims, steps, 0)
    return dims, steps


def check_sizes(shape: object) -> Shape:
    """``shape`` as a tuple of ints, each ``>= 0``, at most :data:`MAX_RANK` of them; raises
    :class:`InvalidShapeError`."""
    dims = as_int_tuple(shape, "size")
    check_rank(dims)
    for axis, size in enumerate(dims):
        if size < 0:
            raise InvalidShapeError(list(dims), f"size {size} of axis {axis} is negative")
    return dims


def check_rank(shape: Sequence[int]) -> None:
    """Raises :class:`InvalidShapeError` when ``shape`` has more than :data:`MAX_RANK` axes.

    Checked wherever a layout is made (constructors, reshape, unsqueeze, ``None`` indices,
    split, explicit layouts), so no later read is the first place the rank fails.
    """
    if len(shape) > MAX_RANK:
        raise InvalidShapeError(
            list(shape),
            f"rank {len(shape)} is above the limit of {MAX_RANK} axes (NumPy's maximum)",
        )


def check_strides_fit(shape: Sequence[int], strides: Sequence[int]) -> None:
    """Raises :class:`ShapeOverflowError` naming the axis when a stride does not fit in a signed
    64-bit integer (the same limit :func:`validate` applies to explicit layouts)."""
    for axis, stride in enumerate(strides):
        if not -INDEX_MAX - 1 <= stride <= INDEX_MAX:
            raise ShapeOverflowError(shape, f"the magnitude of stride {stride} of axis {axis}")


def check_shape(shape: object) -> Shape:
    """Returns ``shape`` as a tuple of ints after checking every size is ``>= 0`` and that the
    size product (a 0 counted as 1) fits in 64 bits.

    Raises :class:`InvalidShapeError` or :class:`ShapeOverflowError`.
    """
    if type(shape) is tuple and all(type(size) is int for size in shape):
        return _checked_shape(shape)  # recent shapes are remembered (see row_major_strides)
    dims = check_sizes(shape)
    row_major_strides(dims)  # raises ShapeOverflowError
    return dims


@functools.lru_cache(maxsize=1024)
def _checked_shape(shape: Shape) -> Shape:
    row_major_strides(check_sizes(shape))  # raises InvalidShapeError or ShapeOverflowError
    return shape


# --------------------------------------------------------------------------------------------
# Row-major layout, element counts, offsets
# --------------------------------------------------------------------------------------------


def row_major_strides(shape: Sequence[int]) -> Strides:
    """Row-major strides of ``shape``: the last axis has stride 1, each earlier axis the product
    of the sizes after it, a size-0 axis counted as 1.

    ``row_major_strides((10, 9, 5, 13)) == (585, 65, 13, 1)``.
    Raises :class:`InvalidShapeError` for a size that is not an integer ``>= 0`` and
    :class:`ShapeOverflowError` when the size product (0 as 1) exceeds :data:`INDEX_MAX`.
    """
    if type(shape) is tuple and all(type(size) is int for size in shape):
        # Every op asks this of a few shapes: recent answers are remembered. Only exact ints
        # are looked up, since (1.0, 2) would otherwise find the answer for (1, 2).
        return _row_major_strides(shape)
    return _uncached_row_major_strides(shape)


@functools.lru_cache(maxsize=1024)
def _row_major_strides(shape: tuple[int, ...]) -> Strides:
    return _uncached_row_major_strides(shape)


def _uncached_row_major_strides(shape: Sequence[int]) -> Strides:
    shape = check_sizes(shape)
    strides = [0] * len(shape)
    running = 1
    for axis in range(len(shape) - 1, -1, -1):
        strides[axis] = running
        running *= max(shape[axis], 1)
        if running > INDEX_MAX:
            raise ShapeOverflowError(
                shape, f"the product of the sizes (a 0 counted as 1), {running},"
            )
    return tuple(strides)


def element_count(shape: Sequence[int]) -> int:
    """Number of values a shape holds: the product of its sizes (1 for a scalar, 0 with a 0)."""
    count = 1
    for size in shape:
        count *= size
    return count


def checked_row_major_layout(shape: object) -> tuple[Shape, Strides, int]:
    """Checks ``shape`` and returns ``(shape, row-major strides, element count)``.

    The whole stride chain is checked even when an early size is 0, so a huge later axis cannot
    hide an overflow behind a zero.
    Raises :class:`InvalidShapeError` or :class:`ShapeOverflowError`.
    """
    dims = check_shape(shape)
    return dims, row_major_strides(dims), element_count(dims)


def normalize_axis(axis: object, rank: int) -> int:
    """Maps an axis in ``[-rank, rank)`` to ``[0, rank)``; raises :class:`AxisOutOfRangeError`."""
    index = as_int(axis, "axis")
    if not -rank <= index < rank:
        raise AxisOutOfRangeError(index, rank, allow_negative=True)
    return index + rank if index < 0 else index


def normalize_axes(axes: object, rank: int) -> tuple[int, ...]:
    """Normalises a list of distinct axes; raises :class:`AxisOutOfRangeError` or
    :class:`DuplicateAxisError`."""
    raw = as_int_tuple(axes, "axis")
    seen: set[int] = set()
    result = []
    for axis in raw:
        index = normalize_axis(axis, rank)
        if index in seen:
            raise DuplicateAxisError(index, raw)
        seen.add(index)
        result.append(index)
    return tuple(result)


def storage_offset(
    shape: Sequence[int], strides: Sequence[int], base_offset: int, coordinate: object
) -> int:
    """Storage offset of one caller-supplied coordinate, checking every component.

    Raises :class:`RankMismatchError` if the coordinate has the wrong length and
    :class:`IndexOutOfBoundsError` if a component is outside ``[0, size)`` (negative components
    are refused: a coordinate counts positions from 0, like an unsigned index).
    """
    coord = as_int_tuple(coordinate, "index")
    if len(coord) != len(shape):
        raise RankMismatchError(len(shape), len(coord), what="coordinate length (the view's rank)")
    offset = base_offset
    for axis, (index, size, stride) in enumerate(zip(coord, shape, strides)):
        if not 0 <= index < size:
            raise IndexOutOfBoundsError(axis, index, size)
        offset += index * stride
    return offset


def offset_bounds(
    shape: Sequence[int], strides: Sequence[int], base_offset: int
) -> tuple[int, int] | None:
    """Smallest and largest reachable storage offsets, or ``None`` for an empty layout.

    Negative-stride terms lower the minimum, positive ones raise the maximum; size-1 axes add
    nothing whatever their stride.
    """
    if any(size == 0 for size in shape):
        return None
    low = high = base_offset
    for size, stride in zip(shape, strides):
        span = (size - 1) * stride
        if span < 0:
            low += span
        else:
            high += span
    return low, high


def check_offsets_fit(shape: Sequence[int], strides: Sequence[int], base_offset: int) -> None:
    """Raises :class:`ShapeOverflowError` when a reachable offset leaves the signed 64-bit range."""
    bounds = offset_bounds(shape, strides, base_offset)
    if bounds is not None and (bounds[1] > INDEX_MAX or bounds[0] < -INDEX_MAX - 1):
        raise ShapeOverflowError(shape, f"the reachable offset range {bounds}")


# --------------------------------------------------------------------------------------------
# Contiguity
# --------------------------------------------------------------------------------------------


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when the layout walks its storage in row-major order with no gaps.

    Size-1 axes may carry any stride (they never advance); scalars and empty layouts are
    contiguous. The base offset does not matter. Raises :class:`RankMismatchError` when shape
    and strides differ in length, :class:`InvalidShapeError` for a negative size.
    """
    shape, strides = checked_layout(shape, strides)
    return _walks_row_major(shape, strides)


def _walks_row_major(shape: Shape, strides: Strides) -> bool:
    """:func:`is_contiguous` of a layout already checked (a :class:`Layout`'s fields)."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def can_view_as_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """The "transpose-contiguous" test: the values fill one gap-free block of storage.

    True when the layout is contiguous; otherwise false if any axis of size != 1 has stride 0
    (broadcast) or a negative stride (a flip); otherwise size-1 axes are dropped, the remaining
    (stride, size) pairs are sorted by stride, descending, and the result must be contiguous.
    So ``(5, 4, 6, 7)`` with strides ``(42, 210, 7, 1)`` (a transposed ``(4, 5, 6, 7)``) is true.
    Input errors as :func:`is_contiguous`.
    """
    shape, strides = checked_layout(shape, strides)
    if is_contiguous(shape, strides):
        return True
    pairs = []
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if stride <= 0:
            return False
        pairs.append((stride, size))
    pairs.sort(key=lambda pair: pair[0], reverse=True)
    return is_contiguous([size for _, size in pairs], [stride for stride, _ in pairs])


def can_view_as_contiguous_all(layouts: Iterable[object]) -> bool:
    """List form of :func:`can_view_as_contiguous` (one answer for several layouts).

    Each item is a view (anything with ``shape`` and ``strides``) or a ``(shape, strides)`` pair.
    True for an empty list; otherwise every item must share the first one's shape and strides,
    and that shared layout must pass the single test. Raises :class:`TensorError` when
    ``layouts`` is not a list (or other iterable) or an item is neither (a NumPy array is refused:
    its strides count bytes), and the single test's errors for an item.
    """
    if isinstance(layouts, (str, bytes, Mapping)) or not isinstance(layouts, Iterable):
        raise TensorError(
            f"can_view_as_contiguous_all takes a list of views or (shape, strides) pairs, got "
            f"{type(layouts).__name__} {layouts!r}"
        )
    items = [_shape_and_strides(index, item) for index, item in enumerate(layouts)]
    if not items:
        return True
    first = items[0]
    if any(item != first for item in items[1:]):
        return False
    return can_view_as_contiguous(*first)


def _shape_and_strides(index: int, item: object) -> tuple[Shape, Strides]:
    if hasattr(item, "__array_interface__"):
        # A NumPy array: its strides count bytes, and read as elements they would give a wrong
        # answer rather than an error.
        raise TensorError(
            f"can_view_as_contiguous_all: item {index} is a NumPy array, whose strides count "
            f"bytes, not elements; pass (a.shape, [s // a.itemsize for s in a.strides])"
        )
    if hasattr(item, "shape") and hasattr(item, "strides"):
        return checked_layout(item.shape, item.strides)
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return checked_layout(item[0], item[1])
    raise TensorError(
        f"can_view_as_contiguous_all takes views or (shape, strides) pairs; item {index} is "
        f"{type(item).__name__} {item!r}"
    )


def coalesce(shape: Sequence[int], strides: Sequence[int]) -> tuple[Shape, Strides]:
    """Fewest axes that visit the same offsets in the same order.

    Size-1 axes are dropped and neighbours with ``stride[k] == size[k+1] * stride[k+1]`` are merged
    (candle's contiguous-block idea), so a contiguous layout becomes one axis and a transposed
    matrix stays two. Empty layouts are returned unchanged. Used by fast copies and kernels to walk
    whole runs instead of single values.
    """
    if any(size == 0 for size in shape):
        return tuple(shape), tuple(strides)
    out_shape: list[int] = []
    out_strides: list[int] = []
    for size, stride in zip(shape, strides):
        if size == 1:
            continue
        if out_shape and out_strides[-1] == size * stride:
            out_shape[-1] *= size
            out_strides[-1] = stride
        else:
            out_shape.append(size)
            out_strides.append(stride)
    return tuple(out_shape), tuple(out_strides)


# --------------------------------------------------------------------------------------------
# Permutations, slices, flips
# --------------------------------------------------------------------------------------------


def check_permutation(axes: object, rank: int) -> tuple[int, ...]:
    """Checks that ``axes`` names every axis of a rank-``rank`` layout exactly once.

    Raises :class:`PermutationLengthMismatchError`, :class:`AxisOutOfRangeError` or
    :class:`DuplicateAxisError`.
    """
    raw = as_int_tuple(axes, "axis")
    if len(raw) != rank:
        raise PermutationLengthMismatchError(rank, len(raw))
    return normalize_axes(raw, rank)


def permute_layout(
    shape: Sequence[int], strides: Sequence[int], axes: Sequence[int]
) -> tuple[Shape, Strides]:
    """Output axis ``k`` takes the size and stride of source axis ``axes[k]`` (axes pre-checked)."""
    return tuple(shape[a] for a in axes), tuple(strides[a] for a in axes)


def stepped_size(start: int, stop: int, step: int) -> int:
    """Number of indices in ``range(start, stop, step)`` for ``start <= stop`` and ``step >= 1``:
    ``ceil((stop - start) / step)``."""
    return -(-(stop - start) // step)


def flip_layout(
    shape: Sequence[int], strides: Sequence[int], base_offset: int, axis: int
) -> tuple[Strides, int]:
    """Reverses one axis: its stride is negated and the base offset moves to the axis's last
    element. An empty axis leaves the base offset alone. Returns ``(strides, base_offset)``."""
    new_strides = list(strides)
    new_strides[axis] = -strides[axis]
    size = shape[axis]
    offset = base_offset + (size - 1) * strides[axis] if size > 0 else base_offset
    return tuple(new_strides), offset


def slice_layout(
    shape: Sequence[int],
    strides: Sequence[int],
    base_offset: int,
    axis: int,
    start: object,
    stop: object,
    step: object = 1,
) -> tuple[Shape, Strides, int]:
    """The strict slice ``start..stop`` (half-open, every ``step``-th index) of one axis.

    No clamping and no negative bounds. The size becomes ``ceil((stop - start) / step)``, the
    stride is multiplied by ``step`` and the base offset moves by ``start * stride[axis]``.
    Returns ``(shape, strides, base_offset)``. Raises :class:`InvalidArgumentError` (not an
    integer), :class:`NegativeSliceBoundError` (a negative bound), :class:`SliceStartAfterEndError`,
    :class:`SliceEndOutOfBoundsError`, :class:`InvalidStepError`, and :class:`ShapeOverflowError`
    when the stepped stride leaves 64 bits.
    """
    first = as_int(start, "slice start")
    last = as_int(stop, "slice stop")
    every = as_int(step, "slice step")
    size = shape[axis]
    if first < 0:
        raise NegativeSliceBoundError(axis, first, size, what="slice start")
    if last < 0:
        raise NegativeSliceBoundError(axis, last, size, what="slice stop")
    if first > last:
        raise SliceStartAfterEndError(axis, first, last)
    if last > size:
        raise SliceEndOutOfBoundsError(axis, last, size)
    if every < 1:
        raise InvalidStepError(every)
    new_shape = list(shape)
    new_strides = list(strides)
    new_shape[axis] = stepped_size(first, last, every)
    new_strides[axis] = strides[axis] * every
    _check_stepped_stride(shape, axis, strides[axis], every)
    new_base = base_offset + first * strides[axis]
    check_offsets_fit(new_shape, new_strides, new_base)
    return tuple(new_shape), tuple(new_strides), new_base


def _check_stepped_stride(shape: Sequence[int], axis: int, stride: int, step: int) -> None:
    """A step multiplies the stride; the product must fit in 64 bits, as an explicit stride must
    in :func:`validate`, even where the new size is 1 and the stride is never applied."""
    stepped = stride * step
    if not -INDEX_MAX - 1 <= stepped <= INDEX_MAX:
        raise ShapeOverflowError(
            shape,
            f"the stride of axis {axis} after a step of {step} ({stride} * {step} = {stepped})",
        )


def unsqueeze_layout(
    shape: Sequence[int], strides: Sequence[int], position: object
) -> tuple[Shape, Strides]:
    """Inserts a size-1 axis at ``position`` (in ``[-rank-1, rank]``, negatives from the end).

    Its stride never matters (it never advances); the row-major-consistent value is used so
    that a contiguous layout stays visibly contiguous. Raises :class:`AxisOutOfRangeError`, and
    :class:`InvalidShapeError` above :data:`MAX_RANK` axes.
    """
    rank = len(shape)
    index = as_int(position, "axis")
    if not -rank - 1 <= index <= rank:
        raise AxisOutOfRangeError(index, rank, insertion=True)
    if index < 0:
        index += rank + 1
    check_rank((*shape, 1))
    stride = strides[index] * shape[index] if index < rank else 1
    return (
        (*shape[:index], 1, *shape[index:]),
        (*strides[:index], stride, *strides[index:]),
    )


def squeeze_layout(
    shape: Sequence[int], strides: Sequence[int], axes: object = None
) -> tuple[Shape, Strides]:
    """Drops size-1 axes: all of them (``axes=None``) or the ones named. Raises
    :class:`SqueezeError` for a named axis whose size is not 1."""
    if axes is None:
        drop = {k for k, size in enumerate(shape) if size == 1}
    else:
        drop = set(normalize_axes(axes, len(shape)))
        for k in sorted(drop):
            if shape[k] != 1:
                raise SqueezeError(k, shape[k])
    keep = [k for k in range(len(shape)) if k not in drop]
    return tuple(shape[k] for k in keep), tuple(strides[k] for k in keep)


def index_layout(
    shape: Sequence[int], strides: Sequence[int], base_offset: int, key: object
) -> tuple[Shape, Strides, int]:
    """NumPy basic indexing as a layout: ``view[key]`` without copying.

    Ints select one position and drop the axis (negative ints count from the end); Python slices
    clamp and accept negative bounds and steps (a negative step is a negative stride); ``...``
    stands for the axes not named; ``None`` inserts a size-1 axis. Raises
    :class:`IndexOutOfBoundsError` for an int outside its axis, :class:`InvalidStepError` for a
    zero step, :class:`InvalidIndexError` for too many indices or an unsupported item,
    :class:`ShapeOverflowError` for a step whose stride leaves 64 bits and
    :class:`InvalidShapeError` for a result above :data:`MAX_RANK` axes.
    """
    items = list(key) if isinstance(key, tuple) else [key]
    if sum(1 for item in items if item is Ellipsis) > 1:
        raise InvalidIndexError("an index may contain at most one '...'")
    consumed = sum(1 for item in items if item is not None and item is not Ellipsis)
    if consumed > len(shape):
        raise InvalidIndexError(
            f"too many indices: {consumed} given for a view of rank {len(shape)}"
        )
    out_shape: list[int] = []
    out_strides: list[int] = []
    base = base_offset
    axis = 0
    for item in items:
        if item is None:
            out_shape.append(1)
            out_strides.append(strides[axis] * shape[axis] if axis < len(shape) else 1)
        elif item is Ellipsis:
            skipped = len(shape) - consumed
            out_shape.extend(shape[axis : axis + skipped])
            out_strides.extend(strides[axis : axis + skipped])
            axis += skipped
        elif isinstance(item, slice):
            start, stop, step = _slice_bounds(item, shape[axis])
            _check_stepped_stride(shape, axis, strides[axis], step)
            size = len(range(start, stop, step))
            out_shape.append(size)
            out_strides.append(strides[axis] * step)
            if size:
                base += start * strides[axis]
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
            size = shape[axis]
            if not -size <= index < size:
                raise IndexOutOfBoundsError(axis, index, size, from_end=True)
            base += (index + size if index < 0 else index) * strides[axis]
            axis += 1
    out_shape.extend(shape[axis:])
    out_strides.extend(strides[axis:])
    check_rank(out_shape)
    return tuple(out_shape), tuple(out_strides), base


def _slice_bounds(item: slice, size: int) -> tuple[int, int, int]:
    """Python's clamping of a slice to an axis of ``size``, with our errors."""
    for part, what in (
        (item.start, "slice start"),
        (item.stop, "slice stop"),
        (item.step, "slice step"),
    ):
        if part is not None and (isinstance(part, bool) or not _is_integer(part)):
            raise InvalidIndexError(f"{what} must be an integer or None, got {part!r}")
    if item.step is not None and operator.index(item.step) == 0:
        raise InvalidStepError(0)
    return item.indices(size)


def _is_integer(value: object) -> bool:
    try:
        operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Reshape as merges and splits
# --------------------------------------------------------------------------------------------


def infer_shape(requested: object, count: int) -> Shape:
    """Resolves at most one ``-1`` in a requested shape for ``count`` values.

    A ``-1`` is inferred as ``count // product(others)``; it is ambiguous (an error) when the
    other sizes multiply to 0. Other negative sizes are :class:`InvalidShapeError`. The element
    count itself is not compared here (see :func:`plan_reshape`), except that a ``-1`` that cannot
    divide evenly is a :class:`ReshapeElementCountMismatchError`.
    """
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
            list(dims),
            "the -1 size is ambiguous because the other sizes multiply to 0",
        )
    if count % others != 0:
        raise ReshapeElementCountMismatchError(count, others, dims)
    resolved = list(dims)
    resolved[unknown[0]] = count // others
    return check_shape(resolved)


def plan_reshape(
    shape: Sequence[int], strides: Sequence[int], requested: object
) -> tuple[Shape, Strides]:
    """Plans a reshape without copying: returns ``(new_shape, new_strides)`` over the same
    offsets in the same logical order, or raises.

    Reshape is a sequence of merges and splits of axes. Splitting an axis never needs a copy.
    A group of old axes can be merged into one only when, ignoring size-1 axes, each stride equals
    the next axis's size times its stride: ``stride[k] == size[k+1] * stride[k+1]``. This is the
    rule of NumPy's no-copy reshape and PyTorch's ``view``, and the resulting strides agree with
    theirs (strides of size-1 axes are arbitrary; an empty layout gets row-major strides).

    Raises :class:`InvalidShapeError` for negative or ambiguous sizes,
    :class:`ReshapeElementCountMismatchError` when the counts differ, and
    :class:`NonContiguousReshapeError` naming the old axes that cannot be merged.
    """
    count = element_count(shape)
    new_shape = infer_shape(requested, count)
    new_count = element_count(new_shape)
    if new_count != count:
        raise ReshapeElementCountMismatchError(count, new_count, new_shape)
    if count == 0:
        return new_shape, row_major_strides(new_shape)
    if is_contiguous(shape, strides):
        # Any base stride works for a contiguous layout; keep row-major strides.
        return new_shape, row_major_strides(new_shape)

    # The old layout without its size-1 axes, remembering their original numbers for messages.
    old = [
        (axis, size, stride) for axis, (size, stride) in enumerate(zip(shape, strides)) if size != 1
    ]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while ni < len(new_shape) and oi < len(old):
        new_product = new_shape[ni]
        old_product = old[oi][1]
        nj, oj = ni + 1, oi + 1
        while new_product != old_product:
            if new_product < old_product:
                new_product *= new_shape[nj]
                nj += 1
            else:
                old_product *= old[oj][1]
                oj += 1
        # Old axes oi..oj-1 must form one run to be merged (split afterwards into ni..nj-1).
        for k in range(oi, oj - 1):
            axis_a, size_a, stride_a = old[k]
            axis_b, size_b, stride_b = old[k + 1]
            if stride_a != size_b * stride_b:
                raise NonContiguousReshapeError(
                    shape,
                    strides,
                    new_shape,
                    f"axes {axis_a} and {axis_b} (sizes {size_a}, {size_b}; strides {stride_a}, "
                    f"{stride_b}) are not adjacent in storage: {stride_a} != {size_b}*{stride_b}",
                )
        new_strides[nj - 1] = old[oj - 1][2]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        ni, oi = nj, oj
    # Trailing size-1 axes of the new shape: any stride is valid; use the last group's.
    last = new_strides[ni - 1] if ni > 0 else 1
    for k in range(ni, len(new_shape)):
        new_strides[k] = last
    return new_shape, tuple(new_strides)


def split_layout(
    shape: Sequence[int], strides: Sequence[int], axis: int, sizes: object
) -> tuple[Shape, Strides]:
    """Splits one axis into several (one size may be ``-1``); never needs a copy.

    The product of ``sizes`` must equal the axis size,
    else :class:`ReshapeElementCountMismatchError`; more than :data:`MAX_RANK` axes in all is an
    :class:`InvalidShapeError`.
    """
    parts = infer_shape(sizes, shape[axis])
    if element_count(parts) != shape[axis]:
        raise ReshapeElementCountMismatchError(shape[axis], element_count(parts), parts)
    inner = list(row_major_strides(parts))
    part_strides = tuple(s * strides[axis] for s in inner)
    out_shape = tuple(shape[:axis]) + parts + tuple(shape[axis + 1 :])
    check_rank(out_shape)
    return out_shape, tuple(strides[:axis]) + part_strides + tuple(strides[axis + 1 :])


# --------------------------------------------------------------------------------------------
# Broadcasting
# --------------------------------------------------------------------------------------------


def broadcast_layout(
    shape: Sequence[int], strides: Sequence[int], target: object
) -> tuple[Shape, Strides]:
    """Expands a layout to ``target`` with zero strides (``expand``/``broadcast_to``).

    New leading axes get stride 0; an existing axis keeps its stride when the sizes are equal or
    the target size is ``-1``; a size-1 axis may expand to any size (0 included) with stride 0.
    Anything else is a :class:`BroadcastError` naming the axis and both sizes.
    """
    dims = as_int_tuple(target, "size")
    if len(dims) < len(shape):
        raise BroadcastError(
            shape, dims, 0, f"the target has rank {len(dims)}, below the source rank {len(shape)}"
        )
    lead = len(dims) - len(shape)
    out_shape: list[int] = []
    out_strides: list[int] = []
    for axis, want in enumerate(dims):
        if axis < lead:
            if want < 0:
                raise BroadcastError(
                    shape, dims, axis, f"a new leading axis needs a size >= 0, not {want}"
                )
            out_shape.append(want)
            out_strides.append(0)
            continue
        have, stride = shape[axis - lead], strides[axis - lead]
        if want == -1 or want == have:
            out_shape.append(have)
            out_strides.append(stride)
        elif have == 1 and want >= 0:
            out_shape.append(want)
            out_strides.append(0)
        else:
            raise BroadcastError(
                shape,
                dims,
                axis,
                f"source size {have} cannot expand to {want} (only a size-1 axis can)",
            )
    return check_shape(tuple(out_shape)), tuple(out_strides)


def broadcast_shapes(*shapes: Sequence[int]) -> Shape:
    """NumPy's broadcasting rule: right-align the shapes; on each axis the sizes must be equal or 1.

    Raises :class:`BroadcastError` naming both shapes and the (right-aligned output) axis, and
    :class:`ShapeOverflowError` when a size product does not fit in 64 bits.
    """
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


def overlapping_coordinates(
    shape: Sequence[int], strides: Sequence[int]
) -> tuple[Shape, Shape] | None:
    """Two different coordinates that reach the same storage offset, or ``None`` when every
    coordinate has a storage cell of its own (a layout that can be written through).

    A zero stride on an axis of size >= 2 (broadcasting) is found at once: the coordinates differ
    only on that axis, 0 and 1. Otherwise, with the axes of size >= 2 sorted by ``|stride|``, no
    two coordinates meet when each stride exceeds the reach of the smaller ones (the sum of
    ``(size - 1) * |stride|`` over them), which holds for every layout the view methods make from
    an owner; an explicit layout that breaks it is walked in full, row-major, and the first
    repeated offset answers. The offsets are relative to the base offset.
    """
    dims = tuple(shape)
    steps = tuple(strides)
    if element_count(dims) == 0:
        return None
    for axis, (size, stride) in enumerate(zip(dims, steps)):
        if size >= 2 and stride == 0:
            first = [0] * len(dims)
            second = [0] * len(dims)
            second[axis] = 1
            return tuple(first), tuple(second)
    moving = sorted((abs(stride), size) for size, stride in zip(dims, steps) if size >= 2)
    reach = 0
    for stride, size in moving:
        if stride <= reach:
            break
        reach += (size - 1) * stride
    else:
        return None
    seen: dict[int, Shape] = {}
    coordinate = [0] * len(dims)
    while True:
        offset = sum(c * s for c, s in zip(coordinate, steps))
        if offset in seen:
            return seen[offset], tuple(coordinate)
        seen[offset] = tuple(coordinate)
        axis = len(dims) - 1
        while axis >= 0:
            coordinate[axis] += 1
            if coordinate[axis] < dims[axis]:
                break
            coordinate[axis] = 0
            axis -= 1
        if axis < 0:  # every coordinate visited, no offset twice (e.g. [3, 2] with [2, 3])
            return None


# --------------------------------------------------------------------------------------------
# Validation of explicit layouts
# --------------------------------------------------------------------------------------------


def validate(shape: object, strides: object, base_offset: object, storage_len: object) -> None:
    """Checks explicit layout metadata against a storage of ``storage_len`` values.

    Rules, each failure an :class:`InvalidLayoutError` naming the rule and the numbers: shape and
    strides have the same rank, at most :data:`MAX_RANK`; the storage length is ``>= 0``; sizes
    are ``>= 0``; strides, the size product and offsets fit in 64 bits;
    and, for a non-empty layout, the minimum reachable offset (base plus the negative-stride
    terms) is ``>= 0`` and the maximum (base plus the positive terms) is ``< storage_len``. An
    empty layout reaches nothing and is always within bounds. Returns ``None``.
    """
    try:
        dims = as_int_tuple(shape, "size")
        steps = as_int_tuple(strides, "stride")
        base = as_int(base_offset, "base offset")
        length = as_int(storage_len, "storage length")
    except (InvalidShapeError, InvalidArgumentError) as error:
        raise InvalidLayoutError("integer metadata", str(error)) from None
    if len(dims) != len(steps):
        raise InvalidLayoutError(
            "rank", f"shape has rank {len(dims)} but strides has rank {len(steps)}"
        )
    if len(dims) > MAX_RANK:
        raise InvalidLayoutError(
            f"rank <= {MAX_RANK}",
            f"rank {len(dims)} is above the limit of {MAX_RANK} axes (NumPy's maximum)",
        )
    if length < 0:
        raise InvalidLayoutError("storage length >= 0", f"the storage length {length} is negative")
    for axis, size in enumerate(dims):
        if size < 0:
            raise InvalidLayoutError("sizes >= 0", f"size {size} of axis {axis} is negative")
    for axis, stride in enumerate(steps):
        if not -INDEX_MAX - 1 <= stride <= INDEX_MAX:
            raise InvalidLayoutError(
                "64-bit overflow", f"stride {stride} of axis {axis} does not fit in 64 bits"
            )
    try:
        row_major_strides(dims)
        check_offsets_fit(dims, steps, base)
    except ShapeOverflowError as error:
        raise InvalidLayoutError("64-bit overflow", str(error)) from None
    bounds = offset_bounds(dims, steps, base)
    if bounds is None:
        return
    low, high = bounds
    if low < 0:
        raise InvalidLayoutError(
            "minimum offset >= 0",
            f"the smallest reachable offset is {low}, {-low} below the start of the storage",
        )
    if high >= length:
        raise InvalidLayoutError(
            "maximum offset < storage length",
            f"the largest reachable offset is {high} but the storage holds {length} values "
            f"(valid offsets 0..{length - 1}); it is {high - length + 1} past the end",
        )


# --------------------------------------------------------------------------------------------
# Compute layouts: reductions, diagonals, matrix operands
# --------------------------------------------------------------------------------------------


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool = False) -> Shape:
    """The shape left after reducing ``axes`` (normalised, distinct): those axes are dropped, or
    kept with size 1 when ``keepdims``."""
    drop = set(axes)
    if keepdims:
        return tuple(1 if axis in drop else size for axis, size in enumerate(shape))
    return tuple(size for axis, size in enumerate(shape) if axis not in drop)


def diagonal_layout(
    shape: Sequence[int], strides: Sequence[int], groups: Sequence[Sequence[int]]
) -> tuple[Shape, Strides]:
    """Takes diagonals as a view: each group of axes (equal sizes, checked by the caller) becomes
    ONE axis whose stride is the sum of the group's strides, placed where the group's first axis
    was. Axes in no group keep their place.

    Stepping the merged axis by one steps every axis of the group by one at once, which is the
    diagonal: ``shape (3, 3)`` with strides ``(3, 1)`` and group ``(0, 1)`` gives ``(3,)`` with
    stride ``(4,)`` (offsets 0, 4, 8). No value moves; the offsets visited are a subset of the
    original ones, so a valid layout stays valid.
    """
    first_of: dict[int, Sequence[int]] = {}
    absorbed: set[int] = set()
    for group in groups:
        first_of[group[0]] = group
        absorbed.update(group[1:])
    out_shape: list[int] = []
    out_strides: list[int] = []
    for axis, (size, stride) in enumerate(zip(shape, strides)):
        if axis in absorbed:
            continue
        members = first_of.get(axis)
        out_shape.append(size)
        out_strides.append(stride if members is None else sum(strides[k] for k in members))
    return tuple(out_shape), tuple(out_strides)


def is_matrix_dense(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when the last two axes form a matrix that BLAS-style kernels read directly: one of
    them has stride 1 (or size 1) and the other a stride at least the first one's size, both
    non-negative. Anything else (flips, broadcast rows, overlapping or strided columns) is better
    copied into a dense block before a matrix product.
    """
    if len(shape) < 2:
        return False
    rows, cols = shape[-2], shape[-1]
    row_stride, col_stride = strides[-2], strides[-1]
    if rows == 0 or cols == 0:
        return True
    if (cols == 1 or col_stride == 1) and (rows == 1 or row_stride >= max(cols, 1)):
        return True
    return (rows == 1 or row_stride == 1) and (cols == 1 or col_stride >= max(rows, 1))


def zero_unused_strides(shape: Sequence[int], strides: Sequence[int]) -> Strides:
    """``strides`` with 0 for every axis whose stride is never applied; same offsets, same order.

    A size-1 axis only ever takes index 0, so its stride may be any value (``as_strided`` accepts
    ``2**31``); an empty layout reads nothing, so all of its strides are unused. Code that stores
    strides in narrower integers (the Metal kernels' 32-bit ints) uses this so that a stride that
    never moves cannot overflow. Never raises.
    """
    if any(size == 0 for size in shape):
        return (0,) * len(shape)
    return tuple(0 if size == 1 else stride for size, stride in zip(shape, strides))


def is_one_to_one(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """True when no two coordinates reach the same offset, so writing through the layout sets
    every value once (an output may be written through it). Never raises.

    Checked with a sufficient rule: ignoring size-1 axes and sorting the rest by ``|stride|``,
    each ``|stride|`` must exceed the largest distance the smaller axes can span,
    ``sum(|stride| * (size - 1))``. Broadcast (stride-0) axes fail it; layouts made from an owner
    by permuting, slicing, flipping and reshaping pass it. (A layout that interleaves axes, such
    as strides ``(3, 2)`` for shape ``(3, 3)``, is one-to-one but refused here too.)
    """
    if any(size == 0 for size in shape):
        return True
    span = 0
    for size, stride in sorted(
        ((size, abs(stride)) for size, stride in zip(shape, strides) if size > 1),
        key=lambda pair: pair[1],
    ):
        if stride <= span:
            return False
        span += stride * (size - 1)
    return True


def matrix_orientation(shape: Sequence[int], strides: Sequence[int]) -> str | None:
    """How BLAS-style kernels can address the last two axes as matrices: ``"rows"`` when each
    matrix is row-major (unit column stride, row stride at least the row length), ``"columns"``
    when it is column-major (the transpose is row-major), ``None`` otherwise (negative,
    zero or interleaved strides). Size-1 axes take any stride. Needs rank >= 2; never raises.
    """
    rows, cols = shape[-2], shape[-1]
    row_stride, col_stride = strides[-2], strides[-1]
    if (cols == 1 or col_stride == 1) and (rows == 1 or row_stride >= cols):
        return "rows"
    if (rows == 1 or row_stride == 1) and (cols == 1 or col_stride >= rows):
        return "columns"
    return None


# --------------------------------------------------------------------------------------------
# The layout as one value
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """A (shape, strides, offset) triple as one immutable value; its methods are the functions
    above.

    ``offset`` is the storage offset of the first logical value (coordinate all zeros). Building
    a ``Layout`` directly trusts its fields; :meth:`row_major` checks a shape and
    :meth:`checked` checks explicit metadata against a storage (:func:`validate`). Every method
    that derives a layout (``reshape``, ``permute``, ``slice``...) returns a new ``Layout`` over a
    subset of the offsets this one reaches, so a layout that was valid for a storage stays valid.
    Errors are those of the function each method delegates to.
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
        """The contiguous layout of ``shape`` at offset 0 (checked: :func:`check_shape`)."""
        dims, strides, _ = checked_row_major_layout(shape)
        return cls(dims, strides, 0)

    @classmethod
    def checked(cls, shape: object, strides: object, offset: object, storage_len: int) -> Layout:
        """Explicit metadata after :func:`validate` against a storage of ``storage_len`` values.

        Raises :class:`InvalidLayoutError` naming the broken rule (integer metadata included).
        """
        try:
            # Convert once: a one-shot iterable must not be read twice.
            dims = as_int_tuple(shape, "size")
            steps = as_int_tuple(strides, "stride")
            base = as_int(offset, "base offset")
        except (InvalidShapeError, InvalidArgumentError) as error:
            raise InvalidLayoutError("integer metadata", str(error)) from None
        validate(dims, steps, base, storage_len)
        return cls(dims, steps, base)

    def validate(self, storage_len: int) -> None:
        """:func:`validate` for this layout against ``storage_len`` values."""
        validate(self.shape, self.strides, self.offset, storage_len)

    # -- facts --------------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def ndim(self) -> int:
        """Number of axes (NumPy's name for :attr:`rank`)."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of logical values (:func:`element_count`)."""
        return element_count(self.shape)

    @property
    def is_empty(self) -> bool:
        """True when some size is 0: the layout reaches no storage at all."""
        return 0 in self.shape

    def is_contiguous(self) -> bool:
        """:func:`is_contiguous` (the offset does not matter)."""
        return _walks_row_major(self.shape, self.strides)  # a Layout's fields are trusted

    def can_view_as_contiguous(self) -> bool:
        """:func:`can_view_as_contiguous`: the values fill one gap-free block in some order."""
        return can_view_as_contiguous(self.shape, self.strides)

    def is_matrix_dense(self) -> bool:
        """:func:`is_matrix_dense` for the last two axes."""
        return is_matrix_dense(self.shape, self.strides)

    def matrix_orientation(self) -> str | None:
        """:func:`matrix_orientation` of the last two axes (``"rows"``, ``"columns"``, None)."""
        return matrix_orientation(self.shape, self.strides)

    def is_one_to_one(self) -> bool:
        """:func:`is_one_to_one`: no two coordinates reach the same offset."""
        return is_one_to_one(self.shape, self.strides)

    def offset_bounds(self) -> tuple[int, int] | None:
        """:func:`offset_bounds`: the smallest and largest reachable offsets, ``None`` if empty."""
        return offset_bounds(self.shape, self.strides, self.offset)

    def storage_offset(self, coordinate: object) -> int:
        """:func:`storage_offset` of one checked coordinate."""
        return storage_offset(self.shape, self.strides, self.offset, coordinate)

    def coalesce(self) -> Layout:
        """:func:`coalesce`: fewest axes visiting the same offsets in the same order."""
        return Layout(*coalesce(self.shape, self.strides), self.offset)

    def zero_unused_strides(self) -> Layout:
        """:func:`zero_unused_strides`: 0 for every stride that is never applied."""
        return Layout(self.shape, zero_unused_strides(self.shape, self.strides), self.offset)

    # -- deriving layouts ---------------------------------------------------------------------

    def reshape(self, shape: object) -> Layout:
        """:func:`plan_reshape`: the same offsets in the same order under a new shape, or an
        error naming the axes that cannot be merged without a copy."""
        return Layout(*plan_reshape(self.shape, self.strides, shape), self.offset)

    def permute(self, axes: object) -> Layout:
        """Output axis ``k`` is source axis ``axes[k]`` (:func:`check_permutation`, then
        :func:`permute_layout`)."""
        order = check_permutation(axes, self.rank)
        return Layout(*permute_layout(self.shape, self.strides, order), self.offset)

    def swap_axes(self, first: object, second: object) -> Layout:
        """Exchanges two axes (negative axes count from the end)."""
        a = normalize_axis(first, self.rank)
        b = normalize_axis(second, self.rank)
        order = list(range(self.rank))
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    def reversed_axes(self) -> Layout:
        """All axes in reverse order (NumPy's ``transpose()`` without arguments)."""
        return self.permute(range(self.rank - 1, -1, -1))

    def slice(self, axis: object, start: object, stop: object, step: object = 1) -> Layout:
        """:func:`slice_layout` of one axis (strict bounds, no clamping)."""
        ax = normalize_axis(axis, self.rank)
        return Layout(*slice_layout(self.shape, self.strides, self.offset, ax, start, stop, step))

    def flip(self, axis: object) -> Layout:
        """:func:`flip_layout`: negated stride, offset moved to the axis's last element."""
        ax = normalize_axis(axis, self.rank)
        strides, offset = flip_layout(self.shape, self.strides, self.offset, ax)
        return Layout(self.shape, strides, offset)

    def merge(self, start: object, end: object) -> Layout:
        """Fuses axes ``start..=end`` into one (a reshape that must not copy); raises
        :class:`InvalidAxisRangeError` when ``start > end`` after normalising."""
        a = normalize_axis(start, self.rank)
        b = normalize_axis(end, self.rank)
        if a > b:
            raise InvalidAxisRangeError(a, b)
        merged = element_count(self.shape[a : b + 1])
        return self.reshape((*self.shape[:a], merged, *self.shape[b + 1 :]))

    def split(self, axis: object, sizes: object) -> Layout:
        """:func:`split_layout`: one axis into ``sizes`` (one may be ``-1``)."""
        ax = normalize_axis(axis, self.rank)
        return Layout(*split_layout(self.shape, self.strides, ax, sizes), self.offset)

    def expand(self, shape: object) -> Layout:
        """:func:`broadcast_layout`: zero strides for new and size-1 axes."""
        return Layout(*broadcast_layout(self.shape, self.strides, shape), self.offset)

    def unsqueeze(self, axis: object) -> Layout:
        """:func:`unsqueeze_layout`: a size-1 axis inserted at ``axis``."""
        return Layout(*unsqueeze_layout(self.shape, self.strides, axis), self.offset)

    def squeeze(self, axes: object = None) -> Layout:
        """:func:`squeeze_layout`: size-1 axes dropped (all, or the ones named)."""
        return Layout(*squeeze_layout(self.shape, self.strides, axes), self.offset)

    def index(self, key: object) -> Layout:
        """:func:`index_layout`: NumPy basic indexing (ints, slices, ``...``, ``None``)."""
        return Layout(*index_layout(self.shape, self.strides, self.offset, key))

    def diagonal(self, groups: Sequence[Sequence[int]]) -> Layout:
        """:func:`diagonal_layout`: each group of equal-size axes becomes one diagonal axis."""
        return Layout(*diagonal_layout(self.shape, self.strides, groups), self.offset)

    def __str__(self) -> str:
        return f"shape {self.shape}, strides {self.strides}, offset {self.offset}"
