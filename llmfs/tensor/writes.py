"""Writing values through a view: :func:`copyto`, NumPy's ``np.copyto`` (PyTorch's ``copy_``).

A view may be written through only when each of its coordinates has a storage cell of its own.
A broadcast view reads one cell from many coordinates (a zero stride), so a write through it
would have to store several values in one cell: it is refused with
:class:`~llmfs.tensor.errors.OverlappingWriteError`, as NumPy marks ``broadcast_to`` results
read-only and PyTorch refuses in-place writes to ``expand``\\ ed tensors. Like every write, a
write through a view moves the owner's version, so every view made before it (the written view
included) is stale afterwards.
"""

from __future__ import annotations

import numpy as np

from llmfs.tensor.dtypes import SUPPORTED_DTYPES, kind_operand, number_kind
from llmfs.tensor.errors import DTypeError, OverlappingWriteError, TensorError
from llmfs.tensor.ops import Operand, Scalar, as_view, is_scalar, scalar_view
from llmfs.tensor.strided import writable_view
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView


def copyto(dst: Tensor | TensorView, src: Operand | Scalar) -> None:
    """Writes ``src``'s values, broadcast to ``dst``'s shape, into the storage cells ``dst``
    reads (in ``dst``'s owner), in logical row-major order. Returns ``None``, as ``np.copyto``.

    ``src`` is a Tensor, a view or a number (:func:`~llmfs.tensor.dtypes.is_number`); it is read
    completely before anything is written, so it may share storage with ``dst``. Its values must
    convert to ``dst``'s dtype without changing kind (NumPy's ``same_kind`` casting: float32 into
    float64 and back, int64 into int32, bool into anything; not float into int, nor int into
    bool). A number's kind is its Python type (True, 2 and 3.0 are a bool, an int and a float:
    ``copyto(int_view, 3.0)`` is refused, as ``np.copyto`` refuses it) or a NumPy scalar's dtype,
    and a Python int must fit ``dst``'s integer dtype.

    Raises :class:`OverlappingWriteError` when two coordinates of ``dst`` share one storage cell
    (a broadcast view), :class:`BroadcastError` when ``src`` cannot broadcast to ``dst``'s shape,
    :class:`DTypeError` for a conversion that changes kind, :class:`StaleViewError` for a stale
    view, and :class:`TensorError` for a ``dst`` that is not a tensor or a view or a Python int
    outside ``dst``'s integer range.
    """
    if isinstance(dst, Tensor):
        target = dst.view()
    elif isinstance(dst, TensorView):
        target = as_view(dst, what="copyto's destination")
    else:
        raise TensorError(
            f"copyto's destination must be a Tensor or a TensorView, got {type(dst).__name__}"
        )
    overlap = target.layout.overlapping_coordinates()
    if overlap is not None:
        first, second = overlap
        offset = target.layout.storage_offset(first)
        raise OverlappingWriteError(target.shape, target.strides, first, second, offset)
    owner = target.owner
    dtype = owner.dtype
    if is_scalar(src):
        kind = number_kind(src)
        # A weak number's kind is that of its type's default dtype (bool, int64, float64).
        kind_dtype = np.asarray(kind_operand(kind)).dtype if isinstance(kind, type) else kind
        python = f"a Python {kind.__name__}" if isinstance(kind, type) else ""
        _check_same_kind(kind_dtype, dtype, python)
        source = scalar_view(src, dtype)  # type: ignore[arg-type]
    else:
        source = as_view(src, what="copyto's source", numbers=True)
        _check_same_kind(source.dtype, dtype, "")
    with np.errstate(over="ignore"):  # floats past a float dtype's range round to +-inf
        values = source.expand(target.shape).to_numpy().astype(dtype, copy=False).reshape(-1)
    if target.is_empty:
        return
    target._check_fresh()  # a stale destination is refused (StaleViewError), as any use
    # The cells dst reads, as one writable ndarray over the storage through dst's layout (its
    # coordinates are one-to-one, checked above): one NumPy assignment, not a walk per value.
    with owner.mutate():
        writable_view(owner._storage, target.layout)[...] = values.reshape(target.shape)


def _check_same_kind(source: np.dtype, target: np.dtype, what: str) -> None:
    """Raises :class:`DTypeError` unless ``source`` casts to ``target`` by NumPy's
    ``same_kind`` rule; ``what`` names a Python number's type in the message. The message lists
    the source dtypes that ``target`` takes."""
    if np.can_cast(source, target, casting="same_kind"):
        return
    takes = [name for name in SUPPORTED_DTYPES if np.can_cast(name, target, casting="same_kind")]
    raise DTypeError(
        what or np.dtype(source).name,
        takes,
        where=f"copyto into {np.dtype(target).name} storage (same-kind casting)",
    )


__all__ = ["copyto"]
