"""The NumPy backend (the default): each primitive is one NumPy call on views of the storage.

Inputs are read in place: :func:`~llmfs.tensor.backends.base.read_array` is an ndarray over the
owner's own memory with the view's shape and strides, so a transposed, flipped or broadcast input
costs nothing to pass.
Ufuncs convert to the compute precision on the fly (``dtype=compute``) and write straight into a
freshly allocated row-major output (``out=``), so no temporary copy of an input is made. The one
exception is ``matmul``: a matrix whose last two axes BLAS cannot read directly (a flip, a
broadcast row) is gathered into a dense block first, because NumPy's non-BLAS loop is far slower
than that copy.

The ``*_into`` methods write straight into the output's memory (any strides) with the same
calls; a matrix product whose output matrices are column-major is computed as
``out.T = b.T @ a.T``, which BLAS writes directly. A temporary is made only when ``out``'s dtype
differs from the compute precision (the result is rounded once, from the temporary) or when
BLAS cannot write ``out`` in either orientation.

Copies (``copy``: ``materialize``, ``to_numpy``, ``tolist``; and ``copy_into``) are the
cache-blocked, threaded copies of :mod:`llmfs.tensor.backends.numpy_copies`, so a transpose is
copied faster than NumPy's own ``ascontiguousarray``; they give the values of the offset cursor,
as the reference backend's copy does one step at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from llmfs.tensor.backends.base import Backend, read_array
from llmfs.tensor.backends.numpy_copies import copy_strided, gather
from llmfs.tensor.layout import Layout, element_count, reduced_shape
from llmfs.tensor.strided import writable_view
from llmfs.tensor.tensor import Tensor
from llmfs.tensor.view import TensorView


def _sigmoid(x: np.ndarray, out: np.ndarray, compute: np.dtype) -> None:
    # 1 / (1 + e^-x) = exp(-log(1 + e^-x)); logaddexp never overflows, so neither does this.
    t = np.empty(x.shape, dtype=compute)
    np.negative(x, out=t, dtype=compute)
    np.logaddexp(0.0, t, out=t)
    np.negative(t, out=t)
    np.exp(t, out=out)


def _ufunc(function: np.ufunc) -> Callable[[np.ndarray, np.ndarray, np.dtype], None]:
    def apply(x: np.ndarray, out: np.ndarray, compute: np.dtype) -> None:
        function(x, out=out, dtype=compute)

    return apply


#: The unary ops that are one NumPy ufunc of their operand.
UNARY_UFUNCS: dict[str, np.ufunc] = {
    "neg": np.negative,
    "abs": np.absolute,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
}

UNARY: dict[str, Callable[[np.ndarray, np.ndarray, np.dtype], None]] = {
    **{op: _ufunc(function) for op, function in UNARY_UFUNCS.items()},
    "sigmoid": _sigmoid,
    "relu": lambda x, out, compute: np.maximum(x, 0, out=out, dtype=compute),
    "reciprocal": lambda x, out, compute: np.divide(1.0, x, out=out, dtype=compute),
    "logical_not": lambda x, out, compute: np.logical_not(x, out=out),
}

BINARY: dict[str, np.ufunc] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "minimum": np.minimum,  # propagates NaN (np.fmin would not)
    "maximum": np.maximum,
    "power": np.power,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
}

#: Ops that compare (or test truth) in ``compute`` and write bools.
BOOL_BINARY: dict[str, np.ufunc] = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}

REDUCE: dict[str, np.ufunc] = {
    "sum": np.add,
    "mean": np.add,
    "prod": np.multiply,
    "max": np.maximum,  # propagates NaN
    "min": np.minimum,
    "any": np.logical_or,
    "all": np.logical_and,
}


def _adopt(out: np.ndarray) -> Tensor:
    return Tensor._adopt(out.reshape(-1), out.shape)


def _target(shape: tuple[int, ...], dtype: np.dtype, compute: np.dtype) -> np.ndarray:
    """Where a ufunc computing in ``compute`` writes: the result itself when NumPy may round
    ``compute`` into ``dtype`` on the fly (same kind, or wider), else a ``compute`` buffer that
    :func:`_finish` converts (a ``dtype=`` that asks for another kind, e.g. int from float)."""
    if np.can_cast(compute, dtype, "same_kind"):
        return np.empty(shape, dtype=dtype)
    return np.empty(shape, dtype=compute)


def _finish(out: np.ndarray, dtype: np.dtype) -> Tensor:
    return _adopt(out if out.dtype == dtype else out.astype(dtype))


def matrix_orientation(shape: Sequence[int], strides: Sequence[int]) -> str | None:
    """How BLAS-style kernels can address the last two axes as matrices: ``"rows"`` when each
    matrix is row-major (unit column stride, row stride at least the row length; an empty matrix
    too), ``"columns"`` when it is column-major (its transpose is row-major), ``None`` otherwise
    (negative, zero or interleaved strides, or fewer than two axes). Anything but ``None`` is read
    in place by ``np.matmul``; ``None`` is copied into a dense block first. Size-1 axes take any
    stride. Never raises.
    """
    if len(shape) < 2:
        return None
    rows, cols = shape[-2], shape[-1]
    row_stride, col_stride = strides[-2], strides[-1]
    if (
        rows == 0
        or cols == 0
        or ((cols == 1 or col_stride == 1) and (rows == 1 or row_stride >= cols))
    ):
        return "rows"
    if (rows == 1 or row_stride == 1) and (cols == 1 or col_stride >= rows):
        return "columns"
    return None


def _dense_matrix(view: TensorView, compute: np.dtype) -> np.ndarray:
    """The view as an ndarray BLAS can read: in place when possible, else one dense copy."""
    if matrix_orientation(view.shape, view.strides) is not None:
        array = read_array(view)
    else:
        array = gather(view.owner._storage, view.layout)
    return array if array.dtype == compute else array.astype(compute)


def shared_matrix_rows(
    left_shape: Sequence[int],
    left_strides: Sequence[int],
    right_shape: Sequence[int],
    right_strides: Sequence[int],
) -> tuple[int, int] | None:
    """``(rows, row_stride)`` when a batched product ``left @ right`` (batch axes already
    broadcast) multiplies ONE matrix ``right`` (every batch axis of size 1 or stride 0, as
    ``x @ weight`` over a batch of rows) by a ``left`` whose batch and row axes merge into one
    axis of ``rows`` rows ``row_stride`` apart (strides in the unit given): the product is then
    one 2-D matrix product ``[rows, K] @ [K, N]``, one BLAS call instead of one per batch index
    (``np.matmul`` loops over the batch even when ``right`` is broadcast). ``None`` otherwise
    (no batch axes, another matrix per batch index, or rows that do not merge). Never raises."""
    if len(right_shape) <= 2 or len(left_shape) != len(right_shape):
        return None
    if any(n != 1 and s != 0 for n, s in zip(right_shape[:-2], right_strides[:-2])):
        return None
    # The batch and row axes merge into one exactly when the layout rule that fuses neighbouring
    # axes (Layout.coalesce, strides in any unit) leaves exactly one of them.
    rows = Layout(tuple(left_shape[:-1]), tuple(left_strides[:-1])).coalesce()
    if rows.rank != 1:  # none left (one row in all: nothing to merge) or more than one
        return None
    return rows.shape[0], rows.strides[0]


def _product(left: np.ndarray, right: np.ndarray, out: np.ndarray) -> None:
    """``np.matmul(left, right, out=out)``, as one 2-D product when ``right`` is one matrix
    shared by the whole batch (:func:`shared_matrix_rows`)."""
    shared = shared_matrix_rows(left.shape, left.strides, right.shape, right.strides)
    if shared is None or not out.flags.c_contiguous:
        np.matmul(left, right, out=out)
        return
    rows, row_stride = shared
    k, n = left.shape[-1], right.shape[-1]
    matrix = right[(0,) * (right.ndim - 2)]
    merged = np.lib.stride_tricks.as_strided(left, (rows, k), (row_stride, left.strides[-1]))
    np.matmul(merged, matrix, out=out.reshape(rows, n))


class NumpyBackend(Backend):
    """Every primitive as one NumPy call on in-place views of the inputs."""

    name = "numpy"
    dtypes = ("bool", "int32", "int64", "float16", "float32", "float64")
    fallback = None
    description = "NumPy ufuncs and BLAS on views of the storage (the default)"

    def unary(self, op: str, x: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """One ufunc call from the input view into a new row-major output."""
        out = _target(x.shape, dtype, compute)
        with np.errstate(all="ignore"):
            UNARY[op](read_array(x), out, compute)
        return _finish(out, dtype)

    def binary(
        self, op: str, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype
    ) -> Tensor:
        """One ufunc call over two views (zero strides where broadcast)."""
        left, right = read_array(a), read_array(b)
        if op in BOOL_BINARY:
            out = np.empty(a.shape, dtype=np.bool_)
            with np.errstate(all="ignore"):
                if op.startswith("logical_"):  # truth values: no compute type to choose
                    BOOL_BINARY[op](left, right, out=out)
                else:
                    BOOL_BINARY[op](left, right, out=out, signature=(compute, compute, np.bool_))
            return _finish(out, dtype)
        out = _target(a.shape, dtype, compute)
        with np.errstate(all="ignore"):
            BINARY[op](left, right, out=out, dtype=compute)
        return _finish(out, dtype)

    def reduce(
        self,
        op: str,
        x: TensorView,
        axes: tuple[int, ...],
        *,
        dtype: np.dtype,
        compute: np.dtype,
    ) -> Tensor:
        """``ufunc.reduce`` over the axes, accumulating in ``compute``."""
        shape = reduced_shape(x.shape, axes)
        acc = np.empty(shape, dtype=compute)
        with np.errstate(all="ignore"):
            if op in ("any", "all"):  # truth values of any dtype, folded as bools
                REDUCE[op].reduce(read_array(x), axis=axes, out=acc)
            else:
                REDUCE[op].reduce(read_array(x), axis=axes, dtype=compute, out=acc)
            if op == "mean":
                np.divide(acc, element_count([x.shape[axis] for axis in axes]), out=acc)
            out = acc if acc.dtype == dtype else acc.astype(dtype)
        return _adopt(out)

    def matmul(self, a: TensorView, b: TensorView, *, dtype: np.dtype, compute: np.dtype) -> Tensor:
        """``np.matmul`` (BLAS) on the views, gathering only matrices BLAS cannot read."""
        left, right = _dense_matrix(a, compute), _dense_matrix(b, compute)
        acc = np.empty((*a.shape[:-1], b.shape[-1]), dtype=compute)
        with np.errstate(all="ignore"):
            _product(left, right, acc)
            out = acc if acc.dtype == dtype else acc.astype(dtype)
        return _adopt(out)

    def copy(self, x: TensorView, *, dtype: np.dtype) -> Tensor:
        """The cache-blocked, threaded gather of the view's values, then one cast if ``dtype``
        differs from the storage's."""
        values = gather(x.owner._storage, x.layout).reshape(-1)
        if values.dtype != dtype:
            with np.errstate(over="ignore"):
                values = values.astype(dtype)
        return Tensor._adopt(values, x.shape)

    # -- writing into an existing output ---------------------------------------------------

    def copy_into(self, x: TensorView, out: np.ndarray) -> None:
        """One cache-blocked copy through both layouts."""
        copy_strided(out, read_array(x))

    def binary_into(
        self, op: str, a: TensorView, b: TensorView, out: np.ndarray, *, compute: np.dtype
    ) -> None:
        """One ufunc call writing through ``out``'s strides (rounded to its dtype on write)."""
        with np.errstate(all="ignore"):
            BINARY[op](read_array(a), read_array(b), out=out, dtype=compute)

    def reduce_into(
        self, op: str, x: TensorView, axes: tuple[int, ...], out: np.ndarray, *, compute: np.dtype
    ) -> None:
        """``ufunc.reduce`` accumulating in ``out`` itself when its dtype is ``compute``."""
        acc = out if out.dtype == compute else np.empty(out.shape, dtype=compute)
        with np.errstate(all="ignore"):
            REDUCE[op].reduce(read_array(x), axis=axes, dtype=compute, out=acc)
            if op == "mean":
                np.divide(acc, element_count([x.shape[axis] for axis in axes]), out=acc)
            if acc is not out:
                np.copyto(out, acc, casting="unsafe")

    def matmul_into(
        self, a: TensorView, b: TensorView, out: np.ndarray, *, compute: np.dtype
    ) -> None:
        """``np.matmul`` writing into ``out`` (transposed when its matrices are column-major)."""
        left, right = _dense_matrix(a, compute), _dense_matrix(b, compute)
        with np.errstate(all="ignore"):
            if out.dtype == compute:
                steps = [stride // out.itemsize for stride in out.strides]
                orientation = matrix_orientation(out.shape, steps)
                if orientation == "rows":
                    np.matmul(left, right, out=out)
                    return
                if orientation == "columns":
                    np.matmul(
                        np.swapaxes(right, -1, -2),
                        np.swapaxes(left, -1, -2),
                        out=np.swapaxes(out, -1, -2),
                    )
                    return
            copy_strided(out, np.matmul(left, right))

    # -- autograd's view rule ------------------------------------------------------------------

    def scatter_add(self, buffer: np.ndarray, layout: Layout, grad: np.ndarray) -> None:
        """The view rule with the fast paths that pay, and the same sums: zero-stride axes are
        summed first (a broadcast's gradient is a sum), which leaves them of size 1; a layout
        that then reaches each cell at most once (every view op's layouts of an owner) is one
        strided ``+=``; anything else (an explicit overlapping layout) is NumPy's unbuffered
        scatter-add."""
        grad, layout = _broadcast_summed(grad, layout, buffer.dtype)
        if layout.overlapping_coordinates() is not None:
            super().scatter_add(buffer, layout, grad)
        elif layout.size:
            cells = writable_view(buffer, layout)
            cells += grad

    def index_add(self, buffer: np.ndarray, axis: int, ids: np.ndarray, rows: np.ndarray) -> None:
        """``take``'s gradient without NumPy's row-at-a-time ``np.add.at`` (its slowest loop):
        along axis 0 of a contiguous buffer the rows are ordered by id (a stable sort, so each
        id's rows keep their order), each id's rows are summed with one ``np.add.reduceat``,
        and every id present receives its sum with one indexed ``+=`` (the ids are then
        distinct). Other axes take the default."""
        if axis != 0 or not buffer.flags.c_contiguous or not ids.size:
            super().index_add(buffer, axis, ids, rows)
            return
        size = buffer.shape[0]
        table = buffer.reshape(size, -1)  # a view: the buffer is contiguous
        values = np.asarray(rows).reshape(ids.size, -1)
        ids = np.where(ids < 0, ids + size, ids)
        order = np.argsort(ids, kind="stable")
        ordered = ids[order]
        starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        table[ordered[starts]] += np.add.reduceat(values[order], starts, axis=0)


def _broadcast_summed(grad: np.ndarray, layout: Layout, dtype: np.dtype) -> tuple[Any, Layout]:
    """A broadcast's gradient is a sum: ``grad`` summed over the zero-stride axes of ``layout``
    (kept as size 1), and the layout with those axes of size 1."""
    shape, strides = layout.shape, layout.strides
    broadcast = tuple(a for a, (n, s) in enumerate(zip(shape, strides)) if s == 0 and n > 1)
    if not broadcast:
        return grad, layout
    grad = np.sum(grad, axis=broadcast, keepdims=True, dtype=dtype)
    shape = tuple(1 if a in broadcast else n for a, n in enumerate(shape))
    return grad, Layout(shape, strides, layout.offset)
