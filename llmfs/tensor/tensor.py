"""``Tensor``: the owner of contiguous row-major storage.

A :class:`Tensor` owns one 1-D NumPy array (its *storage*) and a row-major
:class:`~llmfs.tensor.layout.Layout` of it. Views (:class:`~llmfs.tensor.view.TensorView`) read the
storage through their own layout and never copy; both share one implementation of the view
methods (:class:`~llmfs.tensor.view.ViewMethods`).

Borrowing at run time
---------------------
Rust refuses to mutate an owner while a view of it is still used later. Python cannot see
"later", so the owner carries a *version* instead: every mutation moves it, and a view made at an
older version refuses to be used (:class:`~llmfs.tensor.errors.StaleViewError`). Two ways to write:

* ``t.as_mut_slice()`` returns a :class:`MutableStorage` handle; **every** write through it moves
  the version, so even a handle kept around while new views are made cannot change those views
  silently: they go stale at the write.
* ``with t.mutate() as buf:`` opens a write window for bulk writes: the version moves when the
  window opens and again when it closes, no view may be made or read while it is open, and the
  handle refuses writes after the ``with`` block.

Threads: one writer, no reader meanwhile
----------------------------------------
A tensor may be read by any number of threads at once. Writing follows a single-writer rule:
while one thread writes a tensor (one ``as_mut_slice()`` write, or a whole ``mutate()`` window),
no other thread writes it (that write is refused with a :class:`TensorError`) or reads it. A read
that overlaps a write is never answered with values from two versions: every write marks the
tensor as being written while it runs and moves its version when it ends (under one lock), and
every read (an op, ``tolist``, ``materialize``...) checks the version before and after
reading, raising :class:`~llmfs.tensor.errors.ConcurrentWriteError` (a
:class:`~llmfs.tensor.errors.StaleViewError`) when it changed or a write is going on.
``numpy_view()`` and ``as_slice()`` export live memory and are outside this promise.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from llmfs.tensor.dtypes import (
    DEFAULT_DTYPE,
    FLOAT_DTYPES,
    INTEGER_DTYPES,
    check_integer_range,
    resolve_dtype,
    storage_values,
)
from llmfs.tensor.errors import (
    ClosedMutationError,
    ConcurrentWriteError,
    DTypeError,
    ElementCountMismatchError,
    IndexOutOfBoundsError,
    InvalidIndexError,
    InvalidShapeError,
    InvalidStepError,
    TensorError,
)
from llmfs.tensor.layout import (
    Layout,
    Shape,
    Strides,
    row_major_strides,
)
from llmfs.tensor.layout import as_int as layout_as_int
from llmfs.tensor.strided import allocate, allocating, read_only
from llmfs.tensor.tape import Node
from llmfs.tensor.view import ViewMethods

#: Held while a write starts or ends (the writer and the version change together), for every
#: tensor: these are a few attribute updates, never the write itself.
_WRITE_LOCK = threading.Lock()


class Tensor(ViewMethods):
    """An owner of contiguous row-major storage: storage + a row-major :class:`Layout` + a version.

    Invariants: ``as_slice()`` has exactly ``self.size`` values (the product of ``shape``, 1 for
    a scalar); ``strides`` are the row-major strides of ``shape`` and the offset is 0; sizes and
    offsets fit in 64 bits. Build one with :meth:`from_vec`, :meth:`from_numpy`, :meth:`zeros`,
    :meth:`full` or :meth:`arange`; ``Tensor(shape, values)`` is :meth:`from_vec`. Every view
    method (``reshape``, ``transpose``, ``t[...]``, ``tolist``, ``materialize``...) is inherited
    from :class:`ViewMethods` and reads the whole tensor: ``t.reshape(s)`` is
    ``t.view().reshape(s)``, the same code.
    """

    __slots__ = (
        "_grad",
        "_grad_fn",
        "_layout",
        "_requires_grad",
        "_shaped",
        "_storage",
        "_version",
        "_writer",
    )

    _owns_storage = True
    _layout: Layout
    _storage: np.ndarray
    _version: int
    #: The write going on now (:class:`Write`: which thread, how many writes it has open,
    #: whether a ``mutate()`` window is open), ``None`` when none: so the readers' one question,
    #: "is anyone writing?", is one slot read.
    _writer: Write | None
    #: Autograd (:mod:`llmfs.tensor.autograd`): whether ops on this tensor are recorded, its
    #: accumulated gradient (a leaf's), and the recorded op that made it (a result's).
    _requires_grad: bool
    _grad: Tensor | None
    _grad_fn: Node | None
    #: The storage as an ndarray of ``shape`` (``storage.reshape(shape)``, never handed out),
    #: kept for the ops' cached dispatch (:func:`llmfs.tensor.dispatch.shaped`) so a small op
    #: does not reshape its operands on every call; ``None`` until first needed. The storage and
    #: the shape of an owner never change, so it never goes out of date.
    _shaped: np.ndarray | None

    def __init__(
        self,
        shape: Sequence[int],
        values: object,
        dtype: object | None = None,
        *,
        requires_grad: bool = False,
    ) -> None:
        grid = Layout.row_major(shape)
        dims, strides, count = grid.shape, grid.strides, grid.size
        array, resolved = storage_values(values, dtype, where="from_vec")
        if array.ndim != 1:
            raise InvalidShapeError(
                list(array.shape),
                "from_vec takes a flat sequence of values (use Tensor.from_numpy for nested data)",
            )
        if array.size != count:
            raise ElementCountMismatchError(count, array.size)
        with np.errstate(over="ignore"):  # floats past a float dtype's range round to +-inf
            self._init(np.array(array, dtype=resolved, copy=True), dims, strides)
        self._leaf(requires_grad)

    def _init(self, storage: np.ndarray, shape: Shape, strides: Strides) -> None:
        self._init_layout(storage, Layout(shape, strides, 0))

    def _init_layout(
        self, storage: np.ndarray, layout: Layout, shaped: np.ndarray | None = None
    ) -> None:
        """Every field of a new owner (version 0, no write open), through a row-major
        ``layout`` at offset 0 that matches ``storage.size``; ``shaped``, when given, is
        ``storage`` viewed with ``layout.shape`` (:attr:`_shaped`)."""
        self._storage = storage
        self._layout = layout
        self._shaped = shaped
        self._version = 0
        self._writer = None
        self._requires_grad = False
        self._grad = None
        self._grad_fn = None

    # -- constructors ------------------------------------------------------------------------

    @classmethod
    def from_vec(
        cls,
        shape: Sequence[int],
        values: object,
        dtype: object | None = None,
        *,
        requires_grad: bool = False,
    ) -> Tensor:
        """A new owner of ``shape`` holding a copy of the flat ``values`` in row-major order.

        Without ``dtype`` the values keep their kind, as ``np.array`` does: Python floats give
        float64, Python ints int64, Python bools bool (:func:`~llmfs.tensor.dtypes.inferred_dtype`).
        A value converts only when ``dtype`` holds it (:func:`~llmfs.tensor.dtypes.storage_values`):
        ``from_vec([1], [2**40], dtype="int32")`` is refused, as NumPy 2 refuses it.

        Raises :class:`InvalidShapeError` for a negative size, :class:`ShapeOverflowError` when the
        sizes overflow 64 bits, :class:`ElementCountMismatchError` when ``len(values)`` is not the
        product of the sizes, :class:`DTypeError` for an unsupported dtype and
        :class:`TensorError` for a value that is not a real number or does not fit ``dtype``.
        ``requires_grad=True`` makes it a leaf of autograd (a :class:`DTypeError` unless the dtype
        is a float dtype).
        """
        return cls(shape, values, dtype, requires_grad=requires_grad)

    @classmethod
    def from_numpy(
        cls, array: object, dtype: object | None = None, *, requires_grad: bool = False
    ) -> Tensor:
        """A new owner holding a row-major copy of any array-like (nested lists too).

        Without ``dtype`` the values keep their kind, as ``np.array`` does: float arrays keep
        their dtype, integers stay integers (int64 from Python ints) and bools stay bools.
        """
        source, resolved = storage_values(array, dtype, where="from_numpy")
        grid = Layout.row_major(source.shape)
        dims, strides, count = grid.shape, grid.strides, grid.size
        with allocating(count, resolved), np.errstate(over="ignore"):
            # A broadcast source may be far larger than its memory: the guard refuses it first.
            storage = np.array(source, dtype=resolved, order="C", copy=True).reshape(-1)
        return cls._adopt(storage, dims, strides)._leaf(requires_grad)

    @classmethod
    def zeros(
        cls, shape: Sequence[int], dtype: object = DEFAULT_DTYPE, *, requires_grad: bool = False
    ) -> Tensor:
        """A new owner of ``shape`` filled with 0 (errors as :meth:`full`)."""
        return cls.full(shape, 0.0, dtype, requires_grad=requires_grad)

    @classmethod
    def full(
        cls,
        shape: Sequence[int],
        value: float,
        dtype: object = DEFAULT_DTYPE,
        *,
        requires_grad: bool = False,
    ) -> Tensor:
        """A new owner of ``shape`` with every value equal to ``value``.

        Raises :class:`InvalidShapeError` or :class:`ShapeOverflowError` for a bad shape and
        :class:`AllocationError` for more values than NumPy or the machine can hold.
        """
        grid = Layout.row_major(shape)
        dims, strides, count = grid.shape, grid.strides, grid.size
        fill, resolved = storage_values(value, resolve_dtype(dtype), where="full")
        if fill.ndim != 0:
            raise TensorError(f"full() takes one real number as its value, got shape {fill.shape}")
        with np.errstate(over="ignore"):
            made = cls._adopt(allocate(count, resolved, fill), dims, strides)
        return made._leaf(requires_grad)

    @classmethod
    def arange(cls, n: int, dtype: object = "int64", *, requires_grad: bool = False) -> Tensor:
        """A rank-1 owner holding ``0, 1, ..., n-1``, int64 unless ``dtype`` says otherwise (as
        NumPy's ``arange`` of an int); errors as :meth:`full`.

        The values are Python ints, so they follow the rule of every Python int entering
        storage: ``n - 1`` must fit an integer dtype (``arange(2**31 + 1, "int32")`` is refused
        where NumPy would wrap around); and bool holds only 0 and 1, so a bool ``arange`` has at
        most 2 values (NumPy's rule). Raises :class:`DTypeError` for a bool ``arange`` of more.
        """
        grid = Layout.row_major((n,))
        dims, strides, count = grid.shape, grid.strides, grid.size
        resolved = resolve_dtype(dtype)
        if resolved.kind == "b" and count > 2:
            raise DTypeError(
                "bool",
                (*INTEGER_DTYPES, *FLOAT_DTYPES),
                f"arange({count}) (bool holds only 0 and 1, so a bool arange has at most 2 values)",
            )
        check_integer_range(np.asarray(max(count - 1, 0)), resolved, where=f"arange({count})")
        with allocating(count, resolved):
            storage = np.arange(count, dtype=resolved)
        return cls._adopt(storage, dims, strides)._leaf(requires_grad)

    @classmethod
    def _adopt(
        cls, storage: np.ndarray, shape: Sequence[int], strides: Sequence[int] | None = None
    ) -> Tensor:
        """Wraps a freshly allocated, contiguous 1-D array as a new owner WITHOUT copying.

        For the library's own allocations (materialize, backends): the caller hands over the only
        reference to ``storage``. ``shape`` must already be checked and match ``storage.size``.
        """
        tensor = object.__new__(cls)
        dims = tuple(shape)
        tensor._init(
            storage, dims, tuple(strides) if strides is not None else row_major_strides(dims)
        )
        return tensor

    @classmethod
    def _adopt_layout(
        cls, storage: np.ndarray, layout: Layout, shaped: np.ndarray | None = None
    ) -> Tensor:
        """:meth:`_adopt` with the row-major ``layout`` already built: the ops' cached dispatch
        (:mod:`llmfs.tensor.dispatch`) shares one immutable ``Layout`` among the results of
        one shape, so a result costs no layout arithmetic. Same contract as :meth:`_adopt`:
        ``storage`` is the only reference to a fresh contiguous 1-D array of ``layout.size``
        values and ``layout`` is row-major at offset 0; ``shaped`` (optional) is the same array
        with ``layout.shape``, as the op computed it."""
        tensor = object.__new__(cls)
        tensor._init_layout(storage, layout, shaped)
        return tensor

    # -- what ViewMethods reads --------------------------------------------------------------

    @property
    def layout(self) -> Layout:
        """Row-major strides of ``shape`` (a size-0 axis counted as 1) at offset 0."""
        return self._layout

    @property
    def owner(self) -> Tensor:
        """A tensor owns its storage: its owner is itself."""
        return self

    def _check_fresh(self) -> None:
        """An owner never goes stale: it always reads its storage as it is now, except while
        another thread writes it (the single-writer rule): :class:`ConcurrentWriteError`."""
        writer = self._writer
        if writer is not None and writer.thread != threading.get_ident():
            raise ConcurrentWriteError(self._version, self._version, window_open=True)

    @property
    def version(self) -> int:
        """How many times the storage has been mutated; views remember the version they saw."""
        return self._version

    # -- autograd: an owner keeps its gradient --------------------------------------------------

    def _leaf(self, requires_grad: bool) -> Tensor:
        """This new tensor, made a leaf that requires grad when asked (constructors end here)."""
        if requires_grad is not False:
            self.requires_grad_(requires_grad)
        return self

    @property
    def grad(self) -> Tensor | None:
        """A leaf's gradient, accumulated (added to) by every ``backward()`` that reaches it:
        a tensor of this shape and dtype, or ``None`` before the first (and after
        ``t.grad = None``). Gradients through views of this tensor land here too. A result of
        an op keeps no gradient (``None``), as in PyTorch."""
        return self._grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and not (
            isinstance(value, Tensor) and value.shape == self.shape and value.dtype == self.dtype
        ):
            shape = getattr(value, "shape", None)
            raise TensorError(
                f"t.grad must be None or a Tensor of shape {list(self.shape)} and dtype "
                f"{self.dtype.name}, got {type(value).__name__}"
                + (f" of shape {list(shape)}" if shape is not None else "")
            )
        self._grad = value

    @property
    def grad_fn(self) -> Node | None:
        """The recorded op that computed this tensor (``None`` for a leaf)."""
        return self._grad_fn

    @property
    def is_leaf(self) -> bool:
        """True unless this tensor is the result of a recorded op (PyTorch's rule: every
        tensor that does not require grad is a leaf too)."""
        return self._grad_fn is None

    # -- reading -----------------------------------------------------------------------------

    def as_slice(self) -> np.ndarray:
        """The storage as a read-only 1-D array (no copy; it reflects later mutations).

        It is made over a read-only buffer, so it cannot be switched back to writable: writes go
        through :meth:`as_mut_slice` or :meth:`mutate`, which keep views honest. Writing into the
        array (``a[0] = 1``, ``a += 1``) raises a :class:`TensorError` that says so (see
        :class:`~llmfs.tensor.strided.ReadOnlyArray`).
        """
        buffer = self._storage.data.toreadonly()
        return read_only(np.frombuffer(buffer, dtype=self._storage.dtype))

    # -- writing -----------------------------------------------------------------------------

    def as_mut_slice(self) -> MutableStorage:
        """A writable handle over the storage; every write through it moves the version, so views
        made before the write become stale."""
        return MutableStorage(self, bump_each_write=True)

    @contextmanager
    def mutate(self) -> Iterator[MutableStorage]:
        """A write window: ``with t.mutate() as buf: buf[...] = ...``.

        The version moves when the window opens and when it closes; while it is open no view of
        this tensor may be read or used to derive another (such a view is stale once the window
        closes anyway), and after it the handle refuses writes. The tensor's own reads (``get``,
        ``tolist``) see the handle's writes as they happen; an array from
        :meth:`MutableStorage.writable_array` is written into the storage when the window closes.
        Nothing handed out by the window writes the storage after it: a closed window leaves no
        writable handle, so every change to the storage moves the version.
        """
        writer = self._writer
        if writer is not None and writer.window_open:
            raise TensorError("a mutate() window is already open on this tensor")
        write = self._begin_write(bump=True)
        write.window_open = True
        handle = MutableStorage(self, bump_each_write=False)
        try:
            yield handle
        finally:
            try:
                handle._close()
            finally:
                write.window_open = False
                self._end_write()

    def _begin_write(self, *, bump: bool = False) -> Write:
        """Marks the storage as being written by this thread (and moves the version when
        ``bump``, as a ``mutate()`` window does when it opens): until :meth:`_end_write` no view
        of it is fresh and other threads' reads are refused.

        Returns the write going on (this thread's). Raises :class:`TensorError` when another
        thread is writing it (one writer at a time).
        """
        me = threading.get_ident()
        with _WRITE_LOCK:
            write = self._writer
            if write is None:
                write = self._writer = Write(me)
            elif write.thread != me:
                raise TensorError(
                    "another thread is writing this tensor: a tensor has one writer at a time "
                    "(wait for that write to end, or give each thread its own tensor)"
                )
            write.depth += 1
            if bump:
                self._version += 1
            return write

    def _end_write(self) -> None:
        """Ends a write begun by :meth:`_begin_write`, moving the version again: a read that
        began during the write sees the version change when it ends."""
        with _WRITE_LOCK:
            write = self._writer
            assert write is not None, "_end_write without _begin_write"
            write.depth -= 1
            if write.depth == 0:
                self._writer = None
            self._version += 1

    # -- copies and pickling -----------------------------------------------------------------

    def __copy__(self) -> Tensor:
        """A new owner with a copy of the storage (NumPy's ``copy.copy`` of an array copies)."""
        self._check_fresh()
        version = self._version
        storage = self._storage.copy()
        self._end_read(version)
        return Tensor._adopt(storage, self.shape)

    def __deepcopy__(self, memo: dict[int, object]) -> Tensor:
        """As :meth:`__copy__`: the storage holds numbers only, so a copy is a deep copy."""
        return self.__copy__()

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        """Pickles the values and the shape only: the unpickled tensor is a new owner at version
        0 with no write open, whatever state this one was in."""
        return (_unpickle_tensor, (self.__copy__()._storage, self.shape))


def _unpickle_tensor(storage: np.ndarray, shape: Sequence[int]) -> Tensor:
    """Rebuilds a pickled :class:`Tensor` (a copy of its values, so nothing else holds them)."""
    values = np.array(storage, copy=True).reshape(-1)
    grid = Layout.row_major(shape)
    dims, strides, count = grid.shape, grid.strides, grid.size
    if values.size != count:
        raise ElementCountMismatchError(count, values.size)
    return Tensor._adopt(values.astype(resolve_dtype(values.dtype), copy=False), dims, strides)


class Write:
    """The writer-protocol state of an owner while it is written: the thread writing
    (``threading.get_ident()``), how many writes it has open (a storage write inside a
    ``mutate()`` window is two) and whether a ``mutate()`` window is open. An owner holds one
    only while a write goes on (``Tensor._writer``; ``None`` otherwise), changed under the
    write lock."""

    __slots__ = ("depth", "thread", "window_open")

    def __init__(self, thread: int) -> None:
        self.thread = thread
        self.depth = 0
        self.window_open = False


class MutableStorage:
    """A thin writable handle over a tensor's 1-D storage.

    Indexing works like a 1-D NumPy array (ints, slices, arrays of values). Reads return copies;
    writes go to the owner's storage and move its version (each write for ``as_mut_slice()``
    handles; once at the end of the window for ``mutate()`` handles, which refuse writes after it).
    Errors: :class:`IndexOutOfBoundsError` for an index outside the storage,
    :class:`ElementCountMismatchError` when assigned values do not fit the selection,
    :class:`ClosedMutationError` after the window closed.

    Invariant: once a ``mutate()`` window has closed, nothing it handed out writes the owner's
    storage (the handle refuses writes; an array from :meth:`writable_array` is the window's own
    copy, written back when the window closes and read-only after), so no write escapes the
    version count.
    """

    __slots__ = ("_bump_each", "_closed", "_owner", "_scratch")

    def __init__(self, owner: Tensor, *, bump_each_write: bool) -> None:
        self._owner = owner
        self._bump_each = bump_each_write
        self._closed = False
        #: The array :meth:`writable_array` handed out (``None`` until asked for).
        self._scratch: np.ndarray | None = None

    def __len__(self) -> int:
        return self._owner._storage.size

    def __getitem__(self, key: object) -> Any:
        # After writable_array(), the window's array holds the latest values.
        source = self._owner._storage if self._scratch is None else self._scratch
        value = source[self._checked_key(key)]
        return value.item() if np.ndim(value) == 0 else np.array(value)

    def __setitem__(self, key: object, value: object) -> None:
        if self._closed:
            raise ClosedMutationError()
        storage = self._owner._storage
        index = self._checked_key(key)
        selected = storage[index]
        values, _ = storage_values(value, storage.dtype, where="writing to storage")
        if values.ndim > 1:
            raise TensorError(
                f"storage handles take a flat sequence of values, got an array of shape "
                f"{list(values.shape)}"
            )
        if values.size not in (1, np.size(selected)):
            raise ElementCountMismatchError(np.size(selected), values.size, what="values assigned")
        if not self._bump_each:  # inside a mutate() window, which moves the version itself
            with np.errstate(over="ignore"):
                storage[index] = values
                if self._scratch is not None:  # written back at the close: keep it in step
                    self._scratch[index] = values
            return
        owner = self._owner
        owner._begin_write()
        try:
            with np.errstate(over="ignore"):
                storage[index] = values
        finally:
            owner._end_write()

    def fill(self, value: float) -> None:
        """Sets every value of the storage to ``value``."""
        self[:] = value

    def writable_array(self) -> np.ndarray:
        """The window's values as one writable 1-D array (the same array on every call), for
        bulk writes with NumPy. It is the window's own copy of the storage: what is written into
        it reaches the storage when the window closes (the close moves the version), and it is
        read-only after, so a kept reference can never change the tensor behind its views'
        backs. Only a ``mutate()`` window's handle gives it, and only while the window is open.

        Raises :class:`ClosedMutationError` after the window closed and :class:`TensorError`
        for an ``as_mut_slice()`` handle (whose writes must each move the version).
        """
        self._check_window()
        if self._scratch is None:
            self._scratch = self._owner._storage.copy()
        return self._scratch

    def _array(self) -> np.ndarray:
        """The storage itself, writable, for the library's in-place writes (an einsum's
        ``execute_into``, gradient accumulation, an optimizer step), which use it inside the
        window and keep no reference past it. Raises as :meth:`writable_array`."""
        self._check_window()
        if self._scratch is not None:  # (a learner's writable_array() came first: keep one copy)
            return self._scratch
        return self._owner._storage

    def _check_window(self) -> None:
        if self._closed:
            raise ClosedMutationError()
        if self._bump_each:
            raise TensorError("only a mutate() window's handle gives its storage as an array")

    def _close(self) -> None:
        """Ends the window's writes: the array :meth:`writable_array` handed out is written
        into the storage and made read-only, and the handle refuses writes from now on."""
        self._closed = True
        scratch = self._scratch
        if scratch is not None:
            self._owner._storage[...] = scratch
            scratch.flags.writeable = False

    def _checked_key(self, key: object) -> Any:
        size = self._owner._storage.size
        if isinstance(key, slice):
            for part in (key.start, key.stop, key.step):
                if part is not None:
                    layout_as_int(part, "storage slice bound")
            if key.step is not None and operator.index(key.step) == 0:
                raise InvalidStepError(0)
            return key
        if isinstance(key, (bool, np.bool_)):
            # operator.index(True) is 1: a bool would silently write element 1.
            raise InvalidIndexError(
                f"storage handles take an int or a slice, not the bool {bool(key)!r} (a bool would "
                f"select element {int(key)})"
            )
        try:
            index = operator.index(key)  # type: ignore[arg-type]
        except TypeError:
            raise TensorError(
                f"storage handles take an int or a slice, got {type(key).__name__}"
            ) from None
        if not -size <= index < size:
            raise IndexOutOfBoundsError(0, index, size, what="storage index")
        return index

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MutableStorage(len={len(self)}, {state})"
