"""``TensorView``: a checked, immutable reading of an owner's storage.

A view is four values: the owning :class:`~llmfs.tensor.tensor.Tensor`, a shape, signed strides
(in elements) and a base offset. Every operation here makes a new view by changing only that
metadata; values are never moved or copied, except by :meth:`TensorView.materialize`, which
allocates a new owner on purpose.

Invariant (checked once, when a view is made): every offset the view can reach lies inside its
owner's storage, and sizes and offsets fit in 64 bits. Operations that derive a view from a valid
one keep the invariant by construction (a permutation, a shrinking slice, a merge or split of
axes visit a subset of the same offsets); explicit layouts from :meth:`TensorView.from_parts` /
:func:`as_strided` go through :func:`~llmfs.tensor.layout.validate`. So readers (the offset
cursor, the fast gather, the backends) trust a view's metadata without re-checking it.

A view also remembers its owner's *version*; once the owner is mutated, using the view raises
:class:`~llmfs.tensor.errors.StaleViewError` (the run-time form of Rust's borrow rule).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from llmfs.tensor import layout
from llmfs.tensor.errors import (
    InvalidAxisRangeError,
    InvalidLayoutError,
    StaleViewError,
    TensorError,
)
from llmfs.tensor.layout import Shape, Strides
from llmfs.tensor.operators import OperatorMixin
from llmfs.tensor.strided import allocating, gather, numpy_view, read_only
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.traversal import StridedOffsets


class TensorView(OperatorMixin):
    """A read-only (shape, strides, base offset) interpretation of a :class:`Tensor`'s storage.

    Make one with ``tensor.view()`` (or ``tensor[...]``), derive others with the methods below,
    and copy with :meth:`materialize`. Views are immutable values: methods return new views.
    """

    __slots__ = ("_base_offset", "_owner", "_shape", "_strides", "_version")

    def __init__(self, *_: object, **__: object) -> None:
        raise TensorError(
            "make views with tensor.view(), tensor[...] or TensorView.from_parts(owner, shape, "
            "strides, base_offset)"
        )

    @classmethod
    def _trusted(
        cls, owner: Tensor, shape: Sequence[int], strides: Sequence[int], base_offset: int
    ) -> TensorView:
        """Builds a view from metadata already known to satisfy the class invariant."""
        view = object.__new__(cls)
        view._owner = owner
        view._shape = tuple(shape)
        view._strides = tuple(strides)
        view._base_offset = base_offset
        view._version = owner._version
        return view

    @classmethod
    def from_parts(
        cls, owner: Tensor, shape: Sequence[int], strides: Sequence[int], base_offset: int = 0
    ) -> TensorView:
        """A view with explicit metadata, checked by :func:`~llmfs.tensor.layout.validate`.

        This is how a learner builds overlapping or unusual layouts on purpose; it can never read
        outside the owner's storage. Raises :class:`InvalidLayoutError`.
        """
        if not isinstance(owner, Tensor):
            raise TensorError(f"the owner must be a Tensor, got {type(owner).__name__}")
        try:
            # Convert once: a one-shot iterable must not be read twice.
            dims = layout.as_int_tuple(shape, "size")
            steps = layout.as_int_tuple(strides, "stride")
            base = layout.as_int(base_offset, "base offset")
        except TensorError as error:
            raise InvalidLayoutError("integer metadata", str(error)) from None
        layout.validate(dims, steps, base, len(owner))
        return cls._trusted(owner, dims, steps, base)

    def _derive(self, shape: Sequence[int], strides: Sequence[int], base_offset: int) -> TensorView:
        self._check_fresh()
        return TensorView._trusted(self._owner, shape, strides, base_offset)

    def _check_fresh(self) -> None:
        owner = self._owner
        if owner._window_open:
            raise StaleViewError(self._version, owner._version, window_open=True)
        if owner._version != self._version:
            raise StaleViewError(self._version, owner._version)

    # -- metadata ----------------------------------------------------------------------------

    @property
    def owner(self) -> Tensor:
        """The tensor whose storage this view reads."""
        return self._owner

    @property
    def shape(self) -> Shape:
        """Sizes of the view's axes."""
        return self._shape

    @property
    def strides(self) -> Strides:
        """Signed strides in elements: 0 repeats (broadcast), negative walks backwards (flip)."""
        return self._strides

    @property
    def base_offset(self) -> int:
        """Storage offset of the view's first logical value (coordinate all zeros)."""
        return self._base_offset

    @property
    def rank(self) -> int:
        """Number of axes."""
        return len(self._shape)

    @property
    def dtype(self) -> np.dtype:
        """The owner's storage dtype."""
        return self._owner.dtype

    @property
    def is_empty(self) -> bool:
        """True when some size is 0: the view reaches no storage at all."""
        return 0 in self._shape

    @property
    def is_stale(self) -> bool:
        """True once the owner has been mutated since this view was made."""
        return self._owner._window_open or self._owner._version != self._version

    def __len__(self) -> int:
        """Number of logical values (the product of the sizes)."""
        return layout.element_count(self._shape)

    def is_contiguous(self) -> bool:
        """True when the view walks storage in row-major order without gaps (size-1 axes may carry
        any stride; scalars and empty views are contiguous)."""
        return layout.is_contiguous(self._shape, self._strides)

    def can_view_as_contiguous(self) -> bool:
        """Seed 004's transpose-contiguous test (see :func:`layout.can_view_as_contiguous`)."""
        return layout.can_view_as_contiguous(self._shape, self._strides)

    def offset_bounds(self) -> tuple[int, int] | None:
        """Smallest and largest storage offsets the view reaches, ``None`` when empty."""
        return layout.offset_bounds(self._shape, self._strides, self._base_offset)

    # -- reading -----------------------------------------------------------------------------

    def storage_offset(self, coordinate: Sequence[int]) -> int:
        """Storage offset of one coordinate, each component checked against its axis.

        Raises :class:`RankMismatchError`, :class:`IndexOutOfBoundsError`, :class:`StaleViewError`.
        """
        self._check_fresh()
        return layout.storage_offset(self._shape, self._strides, self._base_offset, coordinate)

    def get(self, coordinate: Sequence[int]) -> float | int | bool:
        """The value at one checked coordinate, as a Python number (float, int or bool by dtype)."""
        offset = self.storage_offset(coordinate)
        return self._owner._storage[offset].item()  # type: ignore[no-any-return]

    def logical_offsets(self) -> StridedOffsets:
        """The offset cursor: storage offsets in logical row-major order (checked once)."""
        self._check_fresh()
        return StridedOffsets(self._shape, self._strides, self._base_offset, len(self._owner))

    def materialize(self) -> Tensor:
        """Copies the view's values, in logical row-major order, into a NEW owning tensor with
        row-major strides. The copy is independent: mutating it never affects this view's owner,
        and mutating the owner later never changes the copy. The active backend performs the
        strided copy (see :mod:`llmfs.tensor.backends`). Raises :class:`AllocationError` when
        the copy does not fit in NumPy's largest array or the machine's memory."""
        self._check_fresh()
        if self.is_empty:
            return Tensor._adopt(np.empty(0, dtype=self.dtype), self._shape)
        # The active backend does the copy (NumPy's is the cache-blocked gather; Metal's a kernel).
        from llmfs.tensor.ops import backend_for

        with allocating(len(self), self.dtype):
            return backend_for("copy", None, self.dtype).copy(self, dtype=self.dtype)

    def tolist(self) -> Any:
        """Nested lists of Python numbers (a bare number for rank 0), like ``ndarray.tolist``."""
        self._check_fresh()
        return gather(self._owner._storage, self._shape, self._strides, self._base_offset).tolist()

    def to_numpy(self) -> np.ndarray:
        """A new NumPy array (a copy) with the view's shape and values."""
        self._check_fresh()
        return gather(self._owner._storage, self._shape, self._strides, self._base_offset)

    def numpy_view(self) -> np.ndarray:
        """A read-only NumPy array over the SAME memory (no copy), for interoperating with NumPy.

        Unlike the view itself it cannot go stale: it shows whatever the storage holds later.
        Writing into it raises a :class:`TensorError` (see
        :class:`~llmfs.tensor.strided.ReadOnlyArray`).
        """
        self._check_fresh()
        array = numpy_view(self._owner._storage, self._shape, self._strides, self._base_offset)
        return read_only(array)

    def __array__(self, dtype: object = None, copy: object = None) -> np.ndarray:
        if copy is False:
            raise TensorError(
                "a TensorView is exported to NumPy only as a copy; numpy_view() gives a "
                "read-only array over the same memory"
            )
        array = self.to_numpy()
        return array if dtype is None else array.astype(dtype)

    # -- shared storage ----------------------------------------------------------------------

    def shares_storage(self, other: TensorView | Tensor) -> bool:
        """True when both read the same owner's storage (whatever offsets they reach)."""
        return self._owner is _owner_of(other)

    def may_overlap(self, other: TensorView | Tensor) -> bool:
        """True when both share an owner and their reachable offset ranges intersect (a range
        test: interleaved views such as even and odd columns report True)."""
        if not self.shares_storage(other):
            return False
        mine = self.offset_bounds()
        theirs = (
            other.view().offset_bounds() if isinstance(other, Tensor) else other.offset_bounds()
        )
        if mine is None or theirs is None:
            return False
        return mine[0] <= theirs[1] and theirs[0] <= mine[1]

    # -- axis algebra ------------------------------------------------------------------------

    def reshape(self, shape: Sequence[int]) -> TensorView:
        """The same values in the same logical order under a new shape, without copying.

        Works whenever the new shape is a merge/split of the old axes over the same offsets
        (see :func:`layout.plan_reshape`); one size may be ``-1``. Raises
        :class:`ReshapeElementCountMismatchError`, :class:`InvalidShapeError`, or
        :class:`NonContiguousReshapeError` (which says to ``materialize()`` first).
        """
        self._check_fresh()
        new_shape, new_strides = layout.plan_reshape(self._shape, self._strides, shape)
        return self._derive(new_shape, new_strides, self._base_offset)

    def permute(self, axes: Sequence[int]) -> TensorView:
        """Output axis ``k`` takes the size and stride of source axis ``axes[k]``.

        Raises :class:`PermutationLengthMismatchError`, :class:`AxisOutOfRangeError`,
        :class:`DuplicateAxisError`.
        """
        order = layout.check_permutation(axes, self.rank)
        shape, strides = layout.permute_layout(self._shape, self._strides, order)
        return self._derive(shape, strides, self._base_offset)

    def transpose(self, first: int, second: int) -> TensorView:
        """Swaps two axes (negative axes count from the end).

        Raises :class:`AxisOutOfRangeError`.
        """
        a = layout.normalize_axis(first, self.rank)
        b = layout.normalize_axis(second, self.rank)
        order = list(range(self.rank))
        order[a], order[b] = order[b], order[a]
        return self.permute(order)

    @property
    def T(self) -> TensorView:
        """All axes reversed (the matrix transpose for rank 2)."""
        return self.permute(list(range(self.rank - 1, -1, -1)))

    def slice(self, axis: int, start: int, stop: int, step: int = 1) -> TensorView:
        """The strict slice ``start..stop`` (half-open) of one axis, taking every ``step``-th index.

        No clamping and no negative bounds (unlike ``view[a:b]``). The base offset moves by
        ``start * stride[axis]``; the stride is multiplied by ``step``; the size becomes
        ``ceil((stop - start) / step)``. Raises :class:`AxisOutOfRangeError`,
        :class:`IndexOutOfBoundsError` (negative bound), :class:`SliceStartAfterEndError`,
        :class:`SliceEndOutOfBoundsError`, :class:`InvalidStepError`.
        """
        ax = layout.normalize_axis(axis, self.rank)
        shape, strides, base = layout.slice_layout(
            self._shape, self._strides, self._base_offset, ax, start, stop, step
        )
        return self._derive(shape, strides, base)

    def flip(self, axis: int) -> TensorView:
        """Reverses one axis: negated stride, base offset moved to the axis's last element."""
        ax = layout.normalize_axis(axis, self.rank)
        strides, base = layout.flip_layout(self._shape, self._strides, self._base_offset, ax)
        return self._derive(self._shape, strides, base)

    def merge(self, start: int, end: int) -> TensorView:
        """Fuses axes ``start..=end`` (inclusive, like ``torch.flatten``) into one axis.

        The merged size is the product; the stride is the last merged axis's. Raises
        :class:`InvalidAxisRangeError` when ``start > end`` and :class:`NonContiguousReshapeError`
        when the axes are not adjacent in storage (a merge would need a copy).
        """
        a = layout.normalize_axis(start, self.rank)
        b = layout.normalize_axis(end, self.rank)
        if a > b:
            raise InvalidAxisRangeError(a, b)
        merged = layout.element_count(self._shape[a : b + 1])
        return self.reshape((*self._shape[:a], merged, *self._shape[b + 1 :]))

    def split(self, axis: int, sizes: Sequence[int]) -> TensorView:
        """Splits one axis into ``sizes`` (one may be ``-1``); never needs a copy.

        Raises :class:`ReshapeElementCountMismatchError` when the sizes do not multiply to the
        axis size.
        """
        ax = layout.normalize_axis(axis, self.rank)
        shape, strides = layout.split_layout(self._shape, self._strides, ax, sizes)
        return self._derive(shape, strides, self._base_offset)

    def expand(self, shape: Sequence[int]) -> TensorView:
        """Broadcasts to ``shape`` with zero strides (new leading axes allowed, ``-1`` keeps a
        size, a size-1 axis may grow to any size). Raises :class:`BroadcastError`."""
        new_shape, new_strides = layout.broadcast_layout(self._shape, self._strides, shape)
        return self._derive(new_shape, new_strides, self._base_offset)

    def broadcast_to(self, shape: Sequence[int]) -> TensorView:
        """Same as :meth:`expand`."""
        return self.expand(shape)

    def unsqueeze(self, axis: int) -> TensorView:
        """Inserts a size-1 axis at position ``axis`` (in ``[-rank-1, rank]``)."""
        shape, strides = layout.unsqueeze_layout(self._shape, self._strides, axis)
        return self._derive(shape, strides, self._base_offset)

    def squeeze(self, axis: int | Sequence[int] | None = None) -> TensorView:
        """Drops size-1 axes: all of them, or the ones named. Raises :class:`SqueezeError` for a
        named axis whose size is not 1."""
        shape, strides = layout.squeeze_layout(self._shape, self._strides, axis)
        return self._derive(shape, strides, self._base_offset)

    def __getitem__(self, key: object) -> TensorView:
        """NumPy-style indexing that returns a view: ints drop an axis (negative ints count from
        the end), Python slices clamp and accept negative bounds and steps, ``...`` fills the
        remaining axes and ``None`` inserts a size-1 axis. An int out of range is an
        :class:`IndexOutOfBoundsError`; too many indices an :class:`InvalidIndexError`.

        An integer Tensor or TensorView as the key is NumPy's integer-array indexing along axis 0:
        ``table[ids]`` is ``take(table, ids, axis=0).view()``: the values are copied into a NEW
        owner (as NumPy copies for integer-array indexing) and this is the whole view of it."""
        if isinstance(key, (Tensor, TensorView)):
            from llmfs.tensor.ops import take  # ops builds on views: imported at use

            return take(self, key, axis=0).view()
        self._check_fresh()
        shape, strides, base = layout.index_layout(
            self._shape, self._strides, self._base_offset, key
        )
        return self._derive(shape, strides, base)

    def __iter__(self) -> Iterator[TensorView]:
        if self.rank == 0:
            raise TensorError("a rank-0 view cannot be iterated; use get(()) for its value")
        for index in range(self._shape[0]):
            yield self[index]

    def __repr__(self) -> str:
        return (
            f"TensorView(shape={list(self._shape)}, strides={list(self._strides)}, "
            f"base_offset={self._base_offset}, owner=Tensor(shape={list(self._owner.shape)}))"
        )


def _owner_of(item: TensorView | Tensor) -> Tensor:
    if isinstance(item, Tensor):
        return item
    if isinstance(item, TensorView):
        return item.owner
    raise TensorError(f"expected a Tensor or TensorView, got {type(item).__name__}")


def as_strided(
    owner: Tensor, shape: Sequence[int], strides: Sequence[int], base_offset: int = 0
) -> TensorView:
    """A view with explicit (shape, strides, base offset) over ``owner``, validated first.

    Same as :meth:`TensorView.from_parts`. Raises :class:`InvalidLayoutError`.
    """
    return TensorView.from_parts(owner, shape, strides, base_offset)


def materialize(view: TensorView | Tensor) -> Tensor:
    """A new owning tensor with the values of ``view`` in logical row-major order."""
    if isinstance(view, Tensor):
        view = view.view()
    if not isinstance(view, TensorView):
        raise TensorError(f"materialize takes a TensorView or Tensor, got {type(view).__name__}")
    return view.materialize()


def copying_transpose(source: Tensor | TensorView) -> Tensor:
    """A NEW rank-2 tensor holding the transpose of ``source``, allocated and copied explicitly.

    The counterpart of ``view.transpose(0, 1)``: the same logical values, but in new storage,
    written row by row of the result, that is column by column of the source. The copy loop is
    the active backend's strided copy (a loop over the offset cursor on the ``reference``
    backend, the cache-blocked gather on ``numpy``, a kernel on ``metal``), so there is one copy
    mechanism, not two. Raises :class:`RankMismatchError` unless the rank is 2.
    """
    from llmfs.tensor.errors import RankMismatchError

    view = source.view() if isinstance(source, Tensor) else source
    if not isinstance(view, TensorView):
        raise TensorError(f"copying_transpose takes a Tensor, got {type(source).__name__}")
    if view.rank != 2:
        raise RankMismatchError(2, view.rank, what="copying_transpose needs rank")
    return view.transpose(0, 1).materialize()
