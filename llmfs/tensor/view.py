"""``TensorView``, and the view methods it shares with ``Tensor``.

A view is three values: the owning :class:`~llmfs.tensor.tensor.Tensor`, a
:class:`~llmfs.tensor.layout.Layout` (shape, signed strides in elements, offset) and the owner's
version when the view was made. Every operation here makes a new view by changing only the
layout; values are copied only by :meth:`ViewMethods.materialize` (and the readers built on it),
which asks the active backend to copy (``Backend.copy``) inside the allocation guard and the
version checks.

:class:`ViewMethods` is the one implementation of everything that reads through a layout; two
classes inherit it, one per concept: ``Tensor``, the owner (row-major at offset 0, its own
owner; it keeps its ``grad``), and ``TensorView``, the view (its gradient lands in its owner's),
so ``t.reshape(...)`` and ``t.view().reshape(...)`` are the same code. The axis algebra runs
each method's layout rule (speed code may install a memo of them, :data:`derive_layout`).

Invariant (checked once, when a view is made): every offset the view can reach lies inside its
owner's storage, and sizes and offsets fit in 64 bits. Deriving a view from a valid one keeps
it by construction (a permutation, a shrinking slice, a merge or split of axes visit a subset of
the same offsets); explicit layouts (:meth:`TensorView.from_parts`, :func:`as_strided`) go
through :func:`~llmfs.tensor.layout.validate`. So readers trust a view's layout without
re-checking it. Once the owner is mutated, using the view raises
:class:`~llmfs.tensor.errors.StaleViewError` (the borrowing and thread rules are stated in
:mod:`llmfs.tensor.tensor`).
"""

from __future__ import annotations

import numbers
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np

from llmfs.tensor import above
from llmfs.tensor.dtypes import FLOAT_DTYPES
from llmfs.tensor.errors import (
    ConcurrentWriteError,
    DTypeError,
    IndexOutOfBoundsError,
    RankMismatchError,
    StaleViewError,
    TensorError,
    ViewTooLargeError,
)
from llmfs.tensor.layout import Layout, Shape, Strides, as_int
from llmfs.tensor.strided import allocating, numpy_view, read_only_view
from llmfs.tensor.tape import differentiable, is_grad_enabled
from llmfs.tensor.traversal import StridedOffsets

if TYPE_CHECKING:
    from llmfs.tensor.tensor import Tensor


#: The memo of derived layouts, when speed code installs one (:func:`llmfs.tensor.dispatch.install`
#: puts :func:`llmfs.tensor.derived.derive` here): called as ``derive_layout(method, layout,
#: args, rule, before_rule)``, it returns ``rule(layout)``, remembered. ``None``: every view
#: method runs its layout rule.
derive_layout: Callable[..., Layout] | None = None


_V = TypeVar("_V", bound="ViewMethods")


def _varargs(args: tuple[object, ...]) -> object:
    """``f(3, 2)`` and ``f([3, 2])`` alike: one argument is the sequence, several are its items."""
    return args[0] if len(args) == 1 else args


class ViewMethods:
    """Everything that reads storage through a layout, shared by ``Tensor`` and ``TensorView``:
    the metadata, NumPy's Python protocols, the readers, the axis algebra, the operators (the
    ops compute them) and the autograd methods (``requires_grad``, ``backward``, ``detach``).

    A subclass provides :attr:`layout`, :attr:`owner` (the ``Tensor`` holding the storage),
    ``_check_fresh()`` (raise :class:`StaleViewError` when the owner changed under it) and the
    ``_requires_grad`` slot, and says what its gradient is (``grad``, ``grad_fn``, ``is_leaf``):
    an owner keeps one, a view passes it on to its owner.
    """

    __slots__ = ()
    #: NumPy hands a mixed operation (``array + t``) back to the operators below rather than
    #: converting the tensor.
    __array_ufunc__ = None
    __hash__ = None  # type: ignore[assignment]  # == is elementwise, as for NumPy arrays

    #: True for the class that owns storage (``Tensor``), False for views of it.
    _owns_storage: ClassVar[bool] = False
    #: The version reads are checked against (a slot of each subclass): a view's is its owner's
    #: version when the view was made, a tensor's is its own, now.
    _version: int
    #: What :attr:`layout` returns (a slot of each subclass), read directly on the hot paths.
    _layout: Layout
    #: Whether ops on this are recorded (a slot of each subclass): see :attr:`requires_grad`.
    _requires_grad: bool

    @property
    def layout(self) -> Layout:
        """The (shape, strides, offset) through which this object reads its owner's storage."""
        raise NotImplementedError

    @property
    def owner(self) -> Tensor:
        """The tensor whose storage this reads (a ``Tensor`` is its own owner)."""
        raise NotImplementedError

    def _check_fresh(self) -> None:
        raise NotImplementedError

    def _end_read(self, version: int) -> None:
        """After reading values that :meth:`_check_fresh` allowed at owner version ``version``:
        raises :class:`ConcurrentWriteError` when another thread wrote the owner meanwhile (its
        version moved, or a write by another thread is still going on)."""
        owner = self.owner
        writer = owner._writer
        writing = writer is not None and writer.thread != threading.get_ident()
        if owner._version != version or writing:
            raise ConcurrentWriteError(version, owner._version, window_open=writing)

    def _derive(self, layout: Layout) -> TensorView:
        """A view of the same owner through ``layout`` (derived from this one, so still valid).

        Raises what :meth:`_check_fresh` raises; it is called only when the owner is being
        written or has moved past this object's version (the one case it can raise in), so a
        fresh view derives another without the call."""
        owner = self.owner
        if owner._writer or owner._version != self._version:
            self._check_fresh()
        # A view made under no_grad() is a constant, as in PyTorch: it requires grad only when
        # what it is derived from does and grad mode is on.
        return TensorView._trusted(owner, layout, self._requires_grad and is_grad_enabled())

    # -- metadata ----------------------------------------------------------------------------

    @property
    def shape(self) -> Shape:
        """Sizes of the axes, a tuple of ints (``()`` for a scalar)."""
        return self.layout.shape

    @property
    def strides(self) -> Strides:
        """Signed strides in elements: 0 repeats (broadcast), negative walks backwards (flip)."""
        return self.layout.strides

    @property
    def base_offset(self) -> int:
        """Storage offset of the first logical value (coordinate all zeros); 0 for a Tensor."""
        return self.layout.offset

    @property
    def rank(self) -> int:
        """Number of axes (NumPy's ``ndim``)."""
        return self.layout.rank

    @property
    def ndim(self) -> int:
        """Number of axes (same as :attr:`rank`)."""
        return self.layout.rank

    @property
    def size(self) -> int:
        """Number of logical values: the product of the sizes (1 for a scalar)."""
        return self.layout.size

    @property
    def dtype(self) -> np.dtype:
        """The owner's storage dtype."""
        return self.owner._storage.dtype

    @property
    def is_empty(self) -> bool:
        """True when some size is 0: nothing is reached."""
        return self.layout.is_empty

    def is_contiguous(self) -> bool:
        """True when the values are read in row-major order without gaps (size-1 axes may carry
        any stride; scalars and empty layouts are contiguous)."""
        return self.layout.is_contiguous()

    def can_view_as_contiguous(self) -> bool:
        """True when the values fill one gap-free block of storage in some axis order (the
        transpose-contiguous test; see :func:`llmfs.tensor.layout.can_view_as_contiguous`)."""
        return self.layout.can_view_as_contiguous()

    def offset_bounds(self) -> tuple[int, int] | None:
        """Smallest and largest storage offsets reached, ``None`` when empty."""
        return self.layout.offset_bounds()

    # -- NumPy's Python protocols ------------------------------------------------------------

    def __len__(self) -> int:
        """The size of axis 0, as for NumPy arrays; :attr:`size` counts every value.

        Raises :class:`TensorError` for a rank-0 tensor (it has no axis 0).
        """
        if self.rank == 0:
            raise TensorError(
                "len() of a rank-0 tensor: it has no axis 0 (use .size for the number of values)"
            )
        return self.shape[0]

    def __iter__(self) -> Iterator[TensorView]:
        """Views of ``self[0]``, ``self[1]``, ... along axis 0 (nothing is copied)."""
        if self.rank == 0:
            raise TensorError("a rank-0 tensor cannot be iterated; use .item() for its value")
        return (self[index] for index in range(self.shape[0]))

    def item(self, *index: int) -> Any:
        """One value as a Python number, as NumPy's ``item``.

        ``item()`` needs exactly one value (any shape holding one); ``item(i, j, ...)`` reads the
        value at that coordinate (same as :meth:`get`); ``item(k)`` on a rank other than 1 reads
        the ``k``-th value in row-major order. Raises :class:`TensorError` naming the shape when
        ``item()`` finds 0 or several values, and the errors of :meth:`get` for a bad index.
        """
        if not index:
            if self.size != 1:
                raise TensorError(
                    f"item() needs exactly one value, but shape {list(self.shape)} holds "
                    f"{self.size}"
                )
            return self.get((0,) * self.rank)
        if len(index) == 1 and self.rank != 1:
            flat = as_int(index[0], "index")
            if not 0 <= flat < self.size:
                raise IndexOutOfBoundsError(0, flat, self.size, what="flat index")
            return self.get(tuple(int(c) for c in np.unravel_index(flat, self.shape)))
        return self.get(index)

    def __float__(self) -> float:
        """``float(t)`` of a tensor holding exactly one value (else :class:`TensorError`)."""
        return float(self._one_value("float()"))

    def __int__(self) -> int:
        """``int(t)`` of a tensor holding exactly one value, truncated towards 0 like ``int(x)``."""
        return int(self._one_value("int()"))

    def __bool__(self) -> bool:
        """The truth of the one value, as NumPy: several values are ambiguous, and so is none.

        Raises :class:`TensorError` for a tensor with no value or more than one.
        """
        if self.size == 1:
            return bool(self.item())
        if self.size == 0:
            raise TensorError(
                f"the truth value of an empty tensor (shape {list(self.shape)}) is ambiguous: "
                "use .size > 0 to ask whether it has values"
            )
        raise TensorError(
            f"the truth value of a tensor with {self.size} values (shape {list(self.shape)}) is "
            "ambiguous: ask about every value or any value (.all() / .any() of a comparison), "
            "or compare whole tensors with equal(a, b) or allclose(a, b)"
        )

    def _one_value(self, what: str) -> Any:
        if self.size != 1:
            raise TensorError(
                f"{what} needs exactly one value, but shape {list(self.shape)} holds {self.size} "
                "(index one value first, e.g. t[0, 1])"
            )
        return self.item()

    def __repr__(self) -> str:
        """NumPy's repr of the values, then the layout and who owns the storage."""
        name = type(self).__name__
        values = self._printed(
            lambda array: np.array2string(array, separator=", ", prefix=name + "(")
        )
        return f"{name}({values})\n{self._layout_lines()}"

    def __str__(self) -> str:
        """NumPy's str of the values, then the layout and who owns the storage."""
        return f"{self._printed(str)}\n{self._layout_lines()}"

    def _printed(self, show: Any) -> str:
        # Printing reads the values in place (numpy_view), so a huge or broadcast view is
        # summarised by NumPy's printing rules without copying it.
        stale = "<stale: the owner was written to after this view was made, or is being written>"
        if self._is_stale():
            return stale
        version = self._version  # a view's: its owner's when made; a tensor's: its own now
        try:
            shown = str(show(numpy_view(self.owner._storage, self.layout)))
        except ViewTooLargeError as error:
            return f"<{error.count} values of {error.dtype}, more bytes than one NumPy array holds>"
        try:
            self._end_read(version)
        except ConcurrentWriteError:
            return stale
        return shown

    def _layout_lines(self) -> str:
        layout = f"layout: {self.layout}; dtype {self.dtype.name}"
        owner = self.owner
        count = owner._storage.size
        values = f"{count} value{'' if count == 1 else 's'} of storage"
        if owner is self:
            return f"{layout}\nowner: itself ({values})"
        return f"{layout}\nowner: a Tensor of shape {owner.shape} ({values}), shared, not copied"

    def _is_stale(self) -> bool:
        try:
            self._check_fresh()
        except StaleViewError:
            return True
        return False

    # -- reading -----------------------------------------------------------------------------

    def storage_offset(self, coordinate: Sequence[int] | None = None) -> int:
        """Where a value lives in the owner's storage.

        Without an argument, the offset of the first value (PyTorch's ``storage_offset()``,
        same as :attr:`base_offset`); with a coordinate, that value's offset, each component
        checked against its axis. Raises :class:`RankMismatchError`,
        :class:`IndexOutOfBoundsError`, :class:`StaleViewError`.
        """
        self._check_fresh()
        if coordinate is None:
            return self.layout.offset
        return self.layout.storage_offset(coordinate)

    def get(self, coordinate: Sequence[int]) -> Any:
        """The value at one checked coordinate, as a Python number (float, int or bool by dtype).

        ``coordinate`` is required (``get(())`` for rank 0): raises :class:`InvalidArgumentError`
        for ``None`` or anything else that is not integers, and the errors of
        :meth:`storage_offset`.
        """
        self._check_fresh()
        offset = self.layout.storage_offset(coordinate)
        return self.owner._storage[offset].item()

    def logical_offsets(self) -> StridedOffsets:
        """The offset cursor: storage offsets in logical row-major order (checked once)."""
        self._check_fresh()
        return StridedOffsets(self.layout, self.owner._storage.size)

    @differentiable("materialize")
    def materialize(self) -> Tensor:
        """Copies the values, in logical row-major order, into a NEW owning tensor with row-major
        strides. The copy is independent: mutating it never affects this owner, and mutating the
        owner later never changes the copy. The active backend performs the strided copy (see
        :mod:`llmfs.tensor.backends`). Raises :class:`AllocationError` when the copy does not fit
        in NumPy's largest array or the machine's memory."""
        return self._copy(host=False)

    def _copy(self, *, host: bool) -> Tensor:
        """The copy behind :meth:`materialize` (``host=False``: by the backend that
        :func:`~llmfs.tensor.ops.backend_for` picks, which may refuse a dtype) and behind the
        reads out to NumPy (``host=True``: by :func:`~llmfs.tensor.ops.reader_for`, which never
        refuses a dtype the storage holds)."""
        ops = above.ops
        planner = ops.planner
        if planner is not None:
            planned = planner.copy(self)
            if planned is not None:
                return planned
        self._check_fresh()
        owner, layout = self.owner, self.layout
        dtype = owner._storage.dtype
        if layout.is_empty:
            # type(owner) is Tensor: tensor.py builds on this module, so it is not imported here.
            return type(owner)._adopt(np.empty(0, dtype=dtype), layout.shape)
        # A fresh view is at its owner's version, so a view made now reads at the same one.
        view = self if isinstance(self, TensorView) else TensorView._trusted(owner, layout)
        backend = ops.reader_for(dtype) if host else ops.backend_for("copy", None, dtype)
        with allocating(layout.size, dtype):
            copy = backend.copy(view, dtype=dtype)
        view._end_read(view._version)
        return copy

    def copy(self) -> Tensor:
        """NumPy's name for :meth:`materialize` (always a new owner)."""
        return self.materialize()

    def clone(self) -> Tensor:
        """PyTorch's name for :meth:`materialize` (always a new owner)."""
        return self.materialize()

    def tolist(self) -> Any:
        """Nested lists of Python numbers (a bare number for rank 0), like ``ndarray.tolist``;
        the values are copied as :meth:`to_numpy` copies them."""
        return self.to_numpy().tolist()

    def to_numpy(self) -> np.ndarray:
        """A new NumPy array (a copy) with this shape and these values, copied by the active
        backend when it stores this dtype, else by the numpy backend (a kernel backend that
        refuses to compute in float64 still lets its values be read out). Raises what
        :meth:`materialize` raises for a stale view or a copy too large to allocate."""
        # The copy is a new owner that nothing else holds: its storage becomes the array.
        return self._copy(host=True)._storage.reshape(self.shape)

    def numpy_view(self) -> np.ndarray:
        """A read-only NumPy array over the SAME memory (no copy), for interoperating with NumPy.

        Unlike a view it cannot go stale: it shows whatever the storage holds later. Writing into
        it raises a :class:`TensorError` (see :class:`~llmfs.tensor.strided.ReadOnlyArray`).
        """
        self._check_fresh()
        return read_only_view(self.owner._storage, self.layout)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if copy is False:
            raise TensorError(
                f"a {type(self).__name__} is exported to NumPy only as a copy (writes go through "
                "as_mut_slice() or mutate()); numpy_view() gives a read-only array over the same "
                "memory"
            )
        array = self.to_numpy()
        return array if dtype is None else array.astype(dtype)

    # -- shared storage ----------------------------------------------------------------------

    def shares_storage(self, other: ViewMethods) -> bool:
        """True when both read the same owner's storage (whatever offsets they reach)."""
        return self.owner is _owner_of(other)

    def may_overlap(self, other: ViewMethods) -> bool:
        """True when both share an owner and their reachable offset ranges intersect (a range
        test: interleaved views such as even and odd columns report True)."""
        if not self.shares_storage(other):
            return False
        mine = self.offset_bounds()
        theirs = other.offset_bounds()
        if mine is None or theirs is None:
            return False
        return mine[0] <= theirs[1] and theirs[0] <= mine[1]

    # -- axis algebra: each makes a view over the same storage -------------------------------

    def view(self, *shape: Any) -> TensorView:
        """``view()``: a view with the same layout (of a ``Tensor``: the whole tensor, row-major).

        ``view(3, 2)`` / ``view([3, 2])``: PyTorch's ``view``, the same as :meth:`reshape` (a new
        shape over the same storage, never a copy).
        """
        if shape:
            return self.reshape(*shape)
        return self._derive(self.layout)

    def _derive_cached(
        self,
        method: str,
        args: tuple[object, ...],
        rule: Callable[[Layout], Layout],
        fresh_first: bool = False,
    ) -> TensorView:
        """``self._derive(rule(self.layout))``: the view method ``method`` with ``args`` is the
        layout rule ``rule``. ``fresh_first``: check freshness before ``rule`` (so a stale view
        with a bad argument says it is stale). When a layout memo is installed
        (:data:`derive_layout`), it may answer for the rule."""
        memo = derive_layout
        if memo is None:
            if fresh_first:
                self._check_fresh()
            return self._derive(rule(self._layout))
        before = self._check_fresh if fresh_first else None
        return self._derive(memo(method, self._layout, args, rule, before))

    def reshape(self, *shape: Any) -> TensorView:
        """The same values in the same logical order under a new shape, without copying.

        ``reshape(3, 2)`` and ``reshape([3, 2])`` are the same; one size may be ``-1``. Works
        whenever the new shape is a merge/split of the old axes over the same offsets (see
        :func:`llmfs.tensor.layout.plan_reshape`). Raises
        :class:`ReshapeElementCountMismatchError`, :class:`InvalidShapeError`, or
        :class:`NonContiguousReshapeError` (which says to ``materialize()`` first).
        """
        return self._derive_cached(
            "reshape", shape, lambda layout: layout.reshape(_varargs(shape)), True
        )

    def permute(self, *axes: Any) -> TensorView:
        """Output axis ``k`` takes the size and stride of source axis ``axes[k]``;
        ``permute(1, 0)`` and ``permute([1, 0])`` are the same.

        Raises :class:`PermutationLengthMismatchError`, :class:`AxisOutOfRangeError`,
        :class:`DuplicateAxisError`.
        """
        return self._derive_cached("permute", axes, lambda layout: layout.permute(_varargs(axes)))

    def transpose(self, *axes: int) -> TensorView:
        """``transpose(a, b)`` swaps two axes (PyTorch's meaning, the course's); ``transpose()``
        reverses all axes (NumPy's meaning without arguments, same as :attr:`T`).

        For any other order of axes use :meth:`permute`. Raises :class:`AxisOutOfRangeError`, and
        :class:`TensorError` for another number of arguments.
        """
        if not axes:
            return self.T
        if len(axes) != 2:
            raise TensorError(
                f"transpose takes no axis (reverse all) or two axes to swap, got {len(axes)}: "
                f"{list(axes)}; use permute(...) for another order"
            )
        return self.swapaxes(axes[0], axes[1])

    def swapaxes(self, first: int, second: int) -> TensorView:
        """NumPy's name for ``transpose(first, second)``: the two axes exchanged."""
        return self._derive_cached(
            "swapaxes", (first, second), lambda layout: layout.swap_axes(first, second)
        )

    @property
    def T(self) -> TensorView:
        """All axes reversed (the matrix transpose for rank 2)."""
        return self._derive_cached("T", (), Layout.reversed_axes)

    def slice(self, axis: int, start: int, stop: int, step: int = 1) -> TensorView:
        """The strict slice ``start..stop`` (half-open) of one axis, taking every ``step``-th index.

        No clamping and no negative bounds (unlike ``view[a:b]``). The base offset moves by
        ``start * stride[axis]``; the stride is multiplied by ``step``; the size becomes
        ``ceil((stop - start) / step)``. Raises :class:`AxisOutOfRangeError`,
        :class:`IndexOutOfBoundsError` (negative bound), :class:`SliceStartAfterEndError`,
        :class:`SliceEndOutOfBoundsError`, :class:`InvalidStepError`.
        """
        return self._derive_cached(
            "slice",
            (axis, start, stop, step),
            lambda layout: layout.slice(axis, start, stop, step),
        )

    def flip(self, axis: int) -> TensorView:
        """Reverses one axis: negated stride, base offset moved to the axis's last element."""
        return self._derive_cached("flip", (axis,), lambda layout: layout.flip(axis))

    def merge(self, start: int, end: int) -> TensorView:
        """Fuses axes ``start..=end`` (inclusive, like ``torch.flatten``) into one axis.

        The merged size is the product; the stride is the last merged axis's. Raises
        :class:`InvalidAxisRangeError` when ``start > end`` and :class:`NonContiguousReshapeError`
        when the axes are not adjacent in storage (a merge would need a copy).
        """
        return self._derive_cached(
            "merge", (start, end), lambda layout: layout.merge(start, end), True
        )

    def split(self, axis: int, sizes: Sequence[int]) -> TensorView:
        """Splits one axis into ``sizes`` (one may be ``-1``); never needs a copy.

        Raises :class:`ReshapeElementCountMismatchError` when the sizes do not multiply to the
        axis size.
        """
        return self._derive_cached("split", (axis, sizes), lambda layout: layout.split(axis, sizes))

    def unflatten(self, axis: int, sizes: Sequence[int]) -> TensorView:
        """PyTorch's name for :meth:`split` (one axis into several; never a copy)."""
        return self.split(axis, sizes)

    def expand(self, *shape: Any) -> TensorView:
        """Broadcasts to ``shape`` with zero strides (new leading axes allowed, ``-1`` keeps a
        size, a size-1 axis may grow to any size); ``expand(2, 3)`` and ``expand([2, 3])`` are
        the same. Raises :class:`BroadcastError`."""
        return self._derive_cached("expand", shape, lambda layout: layout.expand(_varargs(shape)))

    def broadcast_to(self, shape: Sequence[int]) -> TensorView:
        """Same as :meth:`expand` (NumPy's name)."""
        return self.expand(shape)

    def unsqueeze(self, axis: int) -> TensorView:
        """Inserts a size-1 axis at position ``axis`` (in ``[-rank-1, rank]``)."""
        return self._derive_cached("unsqueeze", (axis,), lambda layout: layout.unsqueeze(axis))

    def squeeze(self, axis: int | Sequence[int] | None = None) -> TensorView:
        """Drops size-1 axes: all of them, or the ones named. Raises :class:`SqueezeError` for a
        named axis whose size is not 1."""
        return self._derive_cached("squeeze", (axis,), lambda layout: layout.squeeze(axis))

    def __getitem__(self, key: object) -> TensorView:
        """NumPy-style indexing that returns a view: ints drop an axis (negative ints count from
        the end), Python slices clamp and accept negative bounds and steps, ``...`` fills the
        remaining axes and ``None`` inserts a size-1 axis. An int out of range is an
        :class:`IndexOutOfBoundsError`; too many indices an :class:`InvalidIndexError`.

        An integer Tensor or TensorView as the key is NumPy's integer-array indexing along axis 0:
        ``table[ids]`` is ``take(table, ids, axis=0).view()``: the values are copied into a NEW
        owner (as NumPy copies for integer-array indexing) and this is the whole view of it."""
        if isinstance(key, ViewMethods):
            # The compute layer (ops) is built on top of the views: reached through above.ops.
            return above.ops.take(self, key, axis=0).view()
        self._check_fresh()
        return self._derive(self.layout.index(key))

    # -- operators: NumPy's meaning, computed by the ops ------------------------------------
    #
    # ``+ - * / // % ** @`` (and their reversed forms, so a number may stand on either side),
    # unary ``-`` and ``abs()``; ``== != < <= > >=`` return bool tensors, as in NumPy (so a
    # tensor is not hashable, and ``in`` or dict lookups do not mean identity: compare with
    # ``is``; whether two tensors hold the same values is ``array_equal``); ``& | ^ ~`` on bool
    # tensors are logical and, or, xor, not. The arithmetic lives in ``llmfs.tensor.ops``, built
    # on these types, so the operators reach it through ``above.ops``.

    def __add__(self, other: Any) -> Any:
        return above.ops.add(self, other)

    def __radd__(self, other: Any) -> Any:
        return above.ops.add(other, self)

    def __sub__(self, other: Any) -> Any:
        return above.ops.sub(self, other)

    def __rsub__(self, other: Any) -> Any:
        return above.ops.sub(other, self)

    def __mul__(self, other: Any) -> Any:
        return above.ops.mul(self, other)

    def __rmul__(self, other: Any) -> Any:
        return above.ops.mul(other, self)

    def __truediv__(self, other: Any) -> Any:
        return above.ops.div(self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return above.ops.div(other, self)

    def __floordiv__(self, other: Any) -> Any:
        return above.ops.floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Any:
        return above.ops.floor_divide(other, self)

    def __mod__(self, other: Any) -> Any:
        return above.ops.remainder(self, other)

    def __rmod__(self, other: Any) -> Any:
        return above.ops.remainder(other, self)

    def __pow__(self, other: Any) -> Any:
        return above.ops.power(self, other)

    def __rpow__(self, other: Any) -> Any:
        return above.ops.power(other, self)

    def __neg__(self) -> Any:
        return above.ops.neg(self)

    def __abs__(self) -> Any:
        return above.ops.abs(self)

    def __matmul__(self, other: Any) -> Any:
        return above.ops.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        return above.ops.matmul(other, self)

    # -- comparisons (Python swaps the operands of a reflected one: 1 < t is t > 1) ----------

    def __eq__(self, other: object) -> Any:
        return above.ops.equal(self, other) if _comparable(other) else NotImplemented

    def __ne__(self, other: object) -> Any:
        return above.ops.not_equal(self, other) if _comparable(other) else NotImplemented

    def __lt__(self, other: Any) -> Any:
        return above.ops.less(self, other)

    def __le__(self, other: Any) -> Any:
        return above.ops.less_equal(self, other)

    def __gt__(self, other: Any) -> Any:
        return above.ops.greater(self, other)

    def __ge__(self, other: Any) -> Any:
        return above.ops.greater_equal(self, other)

    # -- logic on bool tensors ---------------------------------------------------------------

    def __and__(self, other: Any) -> Any:
        return _logical("and", self, other)

    def __rand__(self, other: Any) -> Any:
        return _logical("and", other, self)

    def __or__(self, other: Any) -> Any:
        return _logical("or", self, other)

    def __ror__(self, other: Any) -> Any:
        return _logical("or", other, self)

    def __xor__(self, other: Any) -> Any:
        return _logical("xor", self, other)

    def __rxor__(self, other: Any) -> Any:
        return _logical("xor", other, self)

    def __invert__(self) -> Any:
        dtype = getattr(self, "dtype", None)
        if dtype != np.bool_:
            raise DTypeError(
                getattr(dtype, "name", dtype),
                ("bool",),
                where="the ~ operator (use logical_not for other dtypes)",
            )
        return above.ops.logical_not(self)

    def astype(self, dtype: object) -> Any:
        """A NEW tensor with these values converted to ``dtype`` (NumPy's ``astype``; always a
        copy). See :func:`llmfs.tensor.ops.astype` for the conversion rules and errors."""
        return above.ops.astype(self, dtype)

    # -- autograd: what every tensor has -----------------------------------------------------

    @property
    def requires_grad(self) -> bool:
        """Whether ops on this are recorded for :meth:`backward` (PyTorch's name). A view has
        the flag of what it was derived from, at the time it was made (``False`` when it was
        made inside ``no_grad()``: a constant, as in PyTorch). Setting it is
        ``requires_grad_(value)``."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self: _V, requires_grad: bool = True) -> _V:
        """A ``Tensor``: makes it a leaf whose ops are recorded (``True``) or not (``False``), in
        place, and returns it, as PyTorch's ``requires_grad_``; views made before keep what they
        had (a view copies the flag when it is made). A view: its flag is its owner's, copied
        when it was made, so this returns the view when the flag already is ``requires_grad``.

        Raises :class:`DTypeError` naming the dtype for an integer or bool tensor (only floats
        have gradients), and :class:`TensorError` for a flag that is not a bool, for turning it
        off on an op's result (use :meth:`detach`), or for changing a view's flag.
        """
        if not isinstance(requires_grad, (bool, np.bool_)):
            raise TensorError(
                f"requires_grad must be True or False, got {type(requires_grad).__name__} "
                f"{requires_grad!r}"
            )
        wanted = bool(requires_grad)
        if not self._owns_storage:
            if wanted != self._requires_grad:
                raise TensorError(
                    f"requires_grad_({wanted}) on a view: a view takes its flag from what it was "
                    "derived from; set it on the owner (v.owner.requires_grad_()) and make the "
                    "view again, or use v.detach() for a view that does not require grad"
                )
            return self
        if wanted and self.dtype.kind != "f":
            raise DTypeError(
                self.dtype.name,
                FLOAT_DTYPES,
                "requires_grad (only float tensors have gradients: cast first, e.g. "
                "t.astype('float64').requires_grad_())",
            )
        if not wanted and self.owner._grad_fn is not None:
            raise TensorError(
                "requires_grad_(False) on the result of a recorded op: only a leaf can stop "
                "requiring grad; use t.detach() for a view of it that does not"
            )
        self._requires_grad = wanted
        return self

    def backward(self, gradient: object = None) -> None:
        """Computes the gradient of this result with respect to every leaf it was computed from
        and adds it to each leaf's ``.grad`` (PyTorch's ``backward``); gradients through views
        land in the owner's ``.grad``. ``gradient`` is d(loss)/d(this), of this shape; without
        it this must hold one value (the gradient is 1).

        Raises :class:`~llmfs.tensor.errors.NoGradientError` when this does not require grad,
        :class:`~llmfs.tensor.errors.GradientShapeError` for a missing gradient of a result of
        several values or a gradient of another shape, and
        :class:`~llmfs.tensor.errors.SavedTensorModifiedError` when a tensor an op saved was
        written after the op ran. See :mod:`llmfs.tensor.autograd`.
        """
        # The engine runs the ops' backward rules, built on top of the views: above.autograd.
        above.autograd.backward(self, gradient)

    def detach(self) -> TensorView:
        """A view of the same storage and layout that does not require grad (PyTorch's
        ``detach``): ops on it are not recorded and no gradient flows back through it. It is a
        view (an owner's storage has one owner), so a write to the owner makes it stale."""
        self._check_fresh()
        view = self._derive(self.layout)
        view._requires_grad = False
        return view


def _comparable(other: object) -> bool:
    """Whether ``==``/``!=`` should compare with ``other`` value by value (tensors, views,
    numbers, and NumPy arrays, which ops refuses with advice; a number llmfs does not take, such
    as a complex or a ``Fraction``, is refused by ops too rather than found silently unequal).
    For anything else (``None``, a string) Python's default applies: not equal."""
    return isinstance(other, (ViewMethods, np.ndarray, numbers.Number, np.bool_))


def _logical(op: str, a: object, b: object) -> Any:
    for value in (a, b):
        dtype = getattr(value, "dtype", None)
        if not (isinstance(value, ViewMethods) and dtype == np.bool_):
            shown = dtype.name if dtype is not None else type(value).__name__
            raise DTypeError(
                shown, ("bool",), where=f"the {op} operator (use logical_{op} for other dtypes)"
            )
    return getattr(above.ops, f"logical_{op}")(a, b)


class TensorView(ViewMethods):
    """A read-only (shape, strides, base offset) interpretation of a :class:`Tensor`'s storage.

    Make one with ``tensor.view()`` (or ``tensor[...]``), derive others with the methods of
    :class:`ViewMethods`, and copy with :meth:`materialize`. Views are immutable values: methods
    return new views.
    """

    __slots__ = ("_layout", "_owner", "_requires_grad", "_version")

    _layout: Layout
    _owner: Tensor
    _version: int
    _requires_grad: bool

    def __init__(self, *_: object, **__: object) -> None:
        raise TensorError(
            "make views with tensor.view(), tensor[...] or TensorView.from_parts(owner, shape, "
            "strides, base_offset)"
        )

    @classmethod
    def _trusted(cls, owner: Tensor, layout: Layout, requires_grad: bool = False) -> TensorView:
        """Builds a view from a layout already known to be valid for ``owner``'s storage
        (``requires_grad``: whether ops on it are recorded, from what it is derived from)."""
        view = object.__new__(cls)
        view._owner = owner
        view._layout = layout
        view._version = owner._version
        view._requires_grad = requires_grad
        return view

    @classmethod
    def from_parts(
        cls, owner: Tensor, shape: Sequence[int], strides: Sequence[int], base_offset: int = 0
    ) -> TensorView:
        """A view with explicit metadata, checked by :func:`~llmfs.tensor.layout.validate`.

        This is how a learner builds overlapping or unusual layouts on purpose; it can never read
        outside the owner's storage. Raises :class:`InvalidLayoutError`.
        """
        return cls.from_layout(owner, Layout.checked(shape, strides, base_offset, _size(owner)))

    @classmethod
    def from_layout(cls, owner: Tensor, layout: Layout) -> TensorView:
        """A view of ``owner`` through ``layout``, checked by :meth:`Layout.validate` first.

        Raises :class:`InvalidLayoutError`.
        """
        layout.validate(_size(owner))
        return cls._trusted(owner, layout, owner._requires_grad and is_grad_enabled())

    def _check_fresh(self) -> None:
        owner = self._owner
        writer = owner._writer
        if writer is not None or owner._version != self._version:
            if writer is not None and writer.thread != threading.get_ident():
                raise ConcurrentWriteError(self._version, owner._version, window_open=True)
            window_open = writer is not None and writer.window_open
            raise StaleViewError(self._version, owner._version, window_open=window_open)

    def _check_unchanged(self) -> None:
        """After an op read this view: :meth:`ViewMethods._end_read` at the view's version."""
        owner = self._owner
        if owner._writer or owner._version != self._version:
            writing = bool(owner._writer)
            raise ConcurrentWriteError(self._version, owner._version, window_open=writing)

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickles (and ``copy.copy``/``deepcopy`` copy) the owner and the layout: the view is
        made again over the unpickled (or copied) owner at its version. A stale view is refused
        (:class:`StaleViewError`): its values are gone."""
        self._check_fresh()
        return (_rebuild_view, (self._owner, self._layout))

    @property
    def layout(self) -> Layout:
        """The (shape, strides, offset) through which this view reads its owner's storage."""
        return self._layout

    @property
    def owner(self) -> Tensor:
        """The tensor whose storage this view reads."""
        return self._owner

    @property
    def version(self) -> int:
        """The owner's version when this view was made."""
        return self._version

    # -- autograd: a view passes its gradient on to its owner ----------------------------

    @property
    def grad(self) -> None:
        """Always ``None``: a view is not a leaf; the gradient of what it reads lands in its
        owner's ``.grad`` (``v.owner.grad``)."""
        return None

    @property
    def grad_fn(self) -> None:
        """Always ``None``: a view records no op; its layout is the record, and its backward is
        the one view rule (:func:`llmfs.tensor.autograd.view_backward`)."""
        return None

    @property
    def is_leaf(self) -> bool:
        """True only when the view does not require grad (PyTorch's convention); a view that
        requires grad passes its gradient on to its owner."""
        return not self._requires_grad

    @property
    def is_stale(self) -> bool:
        """True once the owner has been mutated since this view was made (or is being written)."""
        return self._owner._writer is not None or self._owner._version != self._version


def _rebuild_view(owner: Tensor, layout: Layout) -> TensorView:
    """A pickled or copied view, over its (unpickled or copied) owner at that owner's version."""
    return TensorView.from_layout(owner, layout)


def _size(owner: object) -> int:
    """The storage length of an owner, refusing anything that is not a ``Tensor``."""
    if not (isinstance(owner, ViewMethods) and owner._owns_storage):
        raise TensorError(f"the owner must be a Tensor, got {type(owner).__name__}")
    return int(owner.owner._storage.size)


def _owner_of(item: object) -> Tensor:
    if isinstance(item, ViewMethods):
        return item.owner
    raise TensorError(f"expected a Tensor or TensorView, got {type(item).__name__}")


def as_strided(
    owner: Tensor, shape: Sequence[int], strides: Sequence[int], base_offset: int = 0
) -> TensorView:
    """A view with explicit (shape, strides, base offset) over ``owner``, validated first.

    Same as :meth:`TensorView.from_parts`. Raises :class:`InvalidLayoutError`.
    """
    return TensorView.from_parts(owner, shape, strides, base_offset)


def materialize(view: ViewMethods) -> Tensor:
    """A new owning tensor with the values of ``view`` (or a tensor) in logical row-major order."""
    if not isinstance(view, ViewMethods):
        raise TensorError(f"materialize takes a TensorView or Tensor, got {type(view).__name__}")
    return view.materialize()


def copying_transpose(source: ViewMethods) -> Tensor:
    """A NEW rank-2 tensor holding the transpose of ``source``, allocated and copied explicitly.

    The counterpart of ``view.transpose(0, 1)``: the same logical values, but in new storage,
    written row by row of the result, that is column by column of the source. The copy loop is
    the active backend's strided copy (a loop over the offset cursor on the ``reference``
    backend, the cache-blocked gather on ``numpy``, a kernel on ``metal``), so there is one copy
    mechanism, not two. Raises :class:`RankMismatchError` unless the rank is 2.
    """
    if not isinstance(source, ViewMethods):
        raise TensorError(f"copying_transpose takes a Tensor, got {type(source).__name__}")
    if source.rank != 2:
        raise RankMismatchError(2, source.rank, what="the rank of copying_transpose's source")
    return source.transpose(0, 1).materialize()
