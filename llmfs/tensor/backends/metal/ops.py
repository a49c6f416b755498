"""The GPU ops as plain functions on raw numpy storage and layout metadata.

Each op takes :class:`Strided` operands -- a 1-D contiguous storage array plus (shape, strides,
base offset) in elements, exactly what a ``TensorView`` carries -- and an :class:`Executor` (the
emulator, or a Metal device), checks everything on the host, builds the view descriptors the
kernels read, runs one kernel and returns a fresh contiguous 1-D result with its shape. Nothing
here depends on ``Tensor``; the backend classes are thin adapters over these functions.

Host-side checks, all raising :class:`~llmfs.tensor.errors.TensorError` subclasses: the dtype
has a kernel for the op (:func:`kernel_dtypes`: float32 and float16 everywhere; int32 for the
copy, ``neg``/``abs`` and ``add``/``sub``/``mul``/``minimum``/``maximum``; bool for the copy),
else :class:`~llmfs.tensor.backends.metal.errors.MetalDTypeError` naming the dtype (float64 and
int64 included: nothing is narrowed silently); the layout reads only inside its storage
(``layout.validate``); counts and offsets fit the kernels' 32-bit ints.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from llmfs.tensor import layout
from llmfs.tensor.backends.base import BINARY_OPS, UNARY_OPS
from llmfs.tensor.backends.metal import emulator
from llmfs.tensor.backends.metal.errors import KernelArgumentError, MetalDTypeError, MetalError
from llmfs.tensor.errors import RankMismatchError
from llmfs.tensor.layout import Layout

KERNEL_DIR = Path(__file__).resolve().parent / "kernels"

#: Op families: one ``.metal`` file each, compiled after ``common.metal``.
FAMILIES = ("copy", "elementwise", "reduce", "matmul")

# The kernels cover every unary and binary op of the backend interface; of the reductions, two.
REDUCE_OPS = ("sum", "max")
COPY_OPS = ("materialize", "copying_transpose", "strided_copy")
MATMUL_OPS = ("matmul", "contract")

#: Which family file runs each op name.
OP_FAMILY: dict[str, str] = {
    **dict.fromkeys(COPY_OPS, "copy"),
    **dict.fromkeys(UNARY_OPS, "elementwise"),
    **dict.fromkeys(BINARY_OPS, "elementwise"),
    "scale": "elementwise",
    **dict.fromkeys(REDUCE_OPS, "reduce"),
    **dict.fromkeys(MATMUL_OPS, "matmul"),
}

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
_SUFFIX = {"float32": "f32", "float16": "f16", "int32": "i32", "bool": "b8"}

#: The dtypes every kernel family takes.
FLOAT_DTYPES = ("float32", "float16")
#: What else has kernels: int32 where NumPy's int32 result is int32 (no float64 detour), and bool
#: for the copy.
COPY_DTYPES = (*FLOAT_DTYPES, "int32", "bool")
INT32_UNARY_OPS = ("neg", "abs")
INT32_BINARY_OPS = ("add", "sub", "mul", "minimum", "maximum")


def kernel_dtypes(op: str) -> tuple[str, ...]:
    """The dtypes op ``op`` (a name of :data:`OP_FAMILY`) has kernels for."""
    if op in COPY_OPS:
        return COPY_DTYPES
    if op in INT32_UNARY_OPS or op in INT32_BINARY_OPS:
        return (*FLOAT_DTYPES, "int32")
    return FLOAT_DTYPES


@functools.lru_cache(maxsize=len(FAMILIES))
def family_source(family: str) -> str:
    """The MSL text compiled for one family: ``common.metal`` then ``<family>.metal``.

    Read once per process and family: every op of a family then passes the same ``str`` object,
    so the executors' caches keyed by source text find it by identity, without re-reading the
    files or re-hashing the text per op.
    """
    if family not in FAMILIES:
        raise MetalError(f"unknown kernel family {family!r}; families: {', '.join(FAMILIES)}")
    common = (KERNEL_DIR / "common.metal").read_text()
    return common.rstrip("\n") + "\n\n" + (KERNEL_DIR / f"{family}.metal").read_text()


def kernel_source(op: str) -> str:
    """The complete MSL source an op runs (what the emulator and Metal both compile).

    Raises :class:`~llmfs.tensor.backends.metal.errors.MetalError` for an op that does not run
    on the GPU, listing those that do.
    """
    family = OP_FAMILY.get(op)
    if family is None:
        raise MetalError(
            f"op {op!r} has no Metal kernel (it runs on the numpy backend); ops with kernels: "
            f"{', '.join(sorted(OP_FAMILY))}"
        )
    return family_source(family)


class Executor(Protocol):
    """Something that runs a kernel of an MSL source on numpy buffers (emulator or device)."""

    name: str

    def run(self, source: str, kernel: str, buffers: Sequence[np.ndarray], grid: int) -> None:
        """Runs ``kernel`` over a 1-D grid of ``grid`` threads; writes land in ``buffers``."""
        ...

    def empty(self, count: int, dtype: np.dtype) -> np.ndarray:
        """A fresh, writeable, contiguous 1-D array the executor can write into."""
        ...


@dataclass(frozen=True)
class Strided:
    """A strided operand: ``storage`` (1-D, contiguous) read through a :class:`Layout`.

    Strides and the offset are in elements; strides may be 0 (broadcast) or negative (flip).
    """

    storage: np.ndarray
    layout: Layout

    @property
    def shape(self) -> tuple[int, ...]:
        """The layout's shape."""
        return self.layout.shape

    @property
    def strides(self) -> tuple[int, ...]:
        """The layout's strides."""
        return self.layout.strides

    @property
    def base_offset(self) -> int:
        """The layout's offset (of the first value)."""
        return self.layout.offset

    @classmethod
    def contiguous(cls, array: np.ndarray) -> Strided:
        """A row-major operand over a copy-free flattening of a C-contiguous ``array``."""
        # np.ascontiguousarray would turn a 0-d array into shape (1,); asarray keeps the rank.
        data = np.asarray(array, order="C")
        shape = tuple(int(s) for s in data.shape)
        return cls(data.reshape(-1), Layout.row_major(shape))

    @property
    def count(self) -> int:
        """Number of elements the operand holds."""
        return layout.element_count(self.shape)


class EmulatorExecutor:
    """Runs kernels with the CPU emulator; allocations are ordinary numpy arrays.

    ``shuffle``: ``None`` runs every launch's threads in grid order; an int seeds a shuffled
    order (the tests run every shipped kernel both ways).
    """

    name = "metal-emulator"

    def __init__(self, shuffle: int | None = None) -> None:
        self.shuffle = shuffle

    def run(self, source: str, kernel: str, buffers: Sequence[np.ndarray], grid: int) -> None:
        """Compiles (cached) and runs ``kernel`` over ``grid`` threads."""
        emulator.load_library(source).run(kernel, buffers, grid, shuffle=self.shuffle)

    def empty(self, count: int, dtype: np.dtype) -> np.ndarray:
        """A fresh contiguous array of ``count`` elements."""
        return np.empty(count, dtype=dtype)


def check_dtype(dtype: np.dtype, *, where: str, allowed: Sequence[str] = FLOAT_DTYPES) -> str:
    """The kernel-name suffix for ``dtype``; raises :class:`MetalDTypeError` (naming the dtype
    and what ``where`` takes) unless it is one of ``allowed``."""
    name = np.dtype(dtype).name
    if name not in allowed:
        raise MetalDTypeError(name, where=where, supported=tuple(allowed))
    return _SUFFIX[name]


def check_operand(operand: Strided, *, where: str, allowed: Sequence[str] = FLOAT_DTYPES) -> str:
    """Checks one operand (dtype, storage, bounds, 32-bit limits); returns the dtype suffix."""
    storage = operand.storage
    if not isinstance(storage, np.ndarray) or storage.ndim != 1 or not storage.flags.c_contiguous:
        raise KernelArgumentError(f"{where}: storage must be a 1-D contiguous numpy array")
    suffix = check_dtype(storage.dtype, where=where, allowed=allowed)
    operand.layout.validate(storage.size)
    if storage.size > INT32_MAX or operand.count > INT32_MAX:
        raise KernelArgumentError(
            f"{where}: {max(storage.size, operand.count)} elements exceed the kernels' 32-bit "
            f"index limit {INT32_MAX}"
        )
    return suffix


def _unsqueezed(
    shape: tuple[int, ...], strides: tuple[int, ...], axis: int
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape, strides) with a size-1 axis inserted at ``axis`` (:meth:`Layout.unsqueeze`)."""
    grown = Layout(shape, strides).unsqueeze(axis)
    return grown.shape, grown.strides


def view_descriptor(view: Layout) -> np.ndarray:
    """The int32 array a kernel reads a layout through: rank, offset, shape, strides.

    Strides that are never applied (size-1 axes, empty views) are written as 0, so a layout such
    as ``as_strided(t, [1, 3], [2**31, 1])`` still fits. Raises
    :class:`~llmfs.tensor.backends.metal.errors.KernelArgumentError` when a value the kernel
    does use lies outside the kernels' 32-bit index range.
    """
    shape, strides, base_offset = (
        view.shape,
        layout.zero_unused_strides(view.shape, view.strides),
        view.offset,
    )
    if view.is_empty:
        base_offset = 0  # nothing is read, so the base offset is never applied either
    bounds = layout.offset_bounds(shape, strides, base_offset)
    values = (base_offset, *shape, *strides, *(bounds or ()))
    if any(not INT32_MIN <= value <= INT32_MAX for value in values):
        raise KernelArgumentError(
            f"the view with shape {list(shape)}, strides {list(strides)} and base offset "
            f"{base_offset} (reachable offsets {bounds}) does not fit the kernels' 32-bit "
            f"index range {INT32_MIN} .. {INT32_MAX}"
        )
    return np.array([len(shape), base_offset, *shape, *strides], dtype=np.int32)


def _count(value: int) -> np.ndarray:
    return np.array([value], dtype=np.uint32)


def _same_dtype(first: Strided, second: Strided, where: str) -> None:
    if first.storage.dtype != second.storage.dtype:
        raise MetalDTypeError(
            f"{first.storage.dtype} with {second.storage.dtype}",
            where=f"{where} (both operands must have the same dtype)",
        )


# ------------------------------------------------------------------------------------------------
# Ops
# ------------------------------------------------------------------------------------------------


def strided_copy(executor: Executor, src: Strided) -> np.ndarray:
    """A contiguous copy of ``src`` in row-major order (``materialize``), as a 1-D array."""
    suffix = check_operand(src, where="strided copy", allowed=COPY_DTYPES)
    out = executor.empty(src.count, src.storage.dtype)
    if src.count:
        executor.run(
            family_source("copy"),
            f"strided_copy_{suffix}",
            [src.storage, out, view_descriptor(src.layout.coalesce()), _count(src.count)],
            src.count,
        )
    return out


def unary(executor: Executor, op: str, src: Strided) -> np.ndarray:
    """``op`` (one of :data:`UNARY_OPS`) applied to every element; a 1-D row-major result."""
    if op not in UNARY_OPS:
        raise MetalError(f"unknown unary op {op!r}; known: {', '.join(UNARY_OPS)}")
    suffix = check_operand(src, where=f"unary {op}", allowed=kernel_dtypes(op))
    return _one_input(
        executor, f"unary_{suffix}", src, np.array([UNARY_OPS.index(op)], dtype=np.int32)
    )


def scale(executor: Executor, src: Strided, alpha: float) -> np.ndarray:
    """``alpha * src`` (alpha applied in float32); a 1-D row-major result."""
    suffix = check_operand(src, where="scale")
    return _one_input(executor, f"scale_{suffix}", src, np.array([alpha], dtype=np.float32))


def _one_input(executor: Executor, kernel: str, src: Strided, parameter: np.ndarray) -> np.ndarray:
    """Launches an elementwise kernel of one input: buffers src, out, view, count, parameter."""
    out = executor.empty(src.count, src.storage.dtype)
    if src.count:
        executor.run(
            family_source("elementwise"),
            kernel,
            [
                src.storage,
                out,
                view_descriptor(src.layout.coalesce()),
                _count(src.count),
                parameter,
            ],
            src.count,
        )
    return out


def binary(
    executor: Executor, op: str, a: Strided, b: Strided
) -> tuple[np.ndarray, tuple[int, ...]]:
    """``a op b`` with numpy broadcasting (zero strides); returns (1-D result, result shape).

    Raises :class:`~llmfs.tensor.errors.BroadcastError` when the shapes do not broadcast.
    """
    if op not in BINARY_OPS:
        raise MetalError(f"unknown binary op {op!r}; known: {', '.join(BINARY_OPS)}")
    suffix = check_operand(a, where=f"binary {op}", allowed=kernel_dtypes(op))
    check_operand(b, where=f"binary {op}", allowed=kernel_dtypes(op))
    _same_dtype(a, b, f"binary {op}")
    shape = layout.broadcast_shapes(a.shape, b.shape)
    a_view, b_view = a.layout.expand(shape), b.layout.expand(shape)
    count = layout.element_count(shape)
    if count > INT32_MAX:
        raise KernelArgumentError(f"binary {op}: {count} elements exceed {INT32_MAX}")
    out = executor.empty(count, a.storage.dtype)
    if count:
        executor.run(
            family_source("elementwise"),
            f"binary_{suffix}",
            [
                a.storage,
                b.storage,
                out,
                view_descriptor(a_view),
                view_descriptor(b_view),
                _count(count),
                np.array([BINARY_OPS.index(op)], dtype=np.int32),
            ],
            count,
        )
    return out, shape


def reduce(
    executor: Executor, op: str, src: Strided, axes: Sequence[int] | None
) -> tuple[np.ndarray, tuple[int, ...]]:
    """``sum`` or ``max`` over ``axes`` (all axes when ``None``); the reduced axes are dropped.

    Returns (1-D result, result shape). ``max`` over zero elements has no value and raises
    :class:`~llmfs.tensor.backends.metal.errors.KernelArgumentError`; ``sum`` of nothing is 0.
    Axis errors are the layout module's (:class:`~llmfs.tensor.errors.AxisOutOfRangeError`,
    :class:`~llmfs.tensor.errors.DuplicateAxisError`).
    """
    if op not in REDUCE_OPS:
        raise MetalError(f"unknown reduction {op!r}; known: {', '.join(REDUCE_OPS)}")
    suffix = check_operand(src, where=f"reduce {op}")
    rank = len(src.shape)
    reduced_axes = (
        tuple(range(rank)) if axes is None else tuple(sorted(layout.normalize_axes(axes, rank)))
    )
    kept_axes = tuple(axis for axis in range(rank) if axis not in reduced_axes)
    kept_shape = tuple(src.shape[axis] for axis in kept_axes)
    kept_strides = tuple(src.strides[axis] for axis in kept_axes)
    reduced_shape = tuple(src.shape[axis] for axis in reduced_axes)
    reduced_strides = tuple(src.strides[axis] for axis in reduced_axes)
    count = layout.element_count(kept_shape)
    reduced_count = layout.element_count(reduced_shape)
    if op == "max" and reduced_count == 0 and count > 0:
        raise KernelArgumentError(
            f"max over axes {list(reduced_axes)} of shape {list(src.shape)} reduces zero "
            f"elements, which have no maximum"
        )
    out = executor.empty(count, src.storage.dtype)
    if count:
        executor.run(
            family_source("reduce"),
            f"reduce_{op}_{suffix}",
            [
                src.storage,
                out,
                view_descriptor(Layout(kept_shape, kept_strides, src.base_offset)),
                view_descriptor(Layout(reduced_shape, reduced_strides, 0)),
                _count(count),
                _count(reduced_count),
            ],
            count,
        )
    return out, kept_shape


@dataclass(frozen=True)
class _MatmulPlan:
    """The shapes of one ``a @ b`` under numpy's rules (rank-1 operands promoted)."""

    batch: tuple[int, ...]
    m: int
    n: int
    k: int
    a_full: tuple[int, ...]  # a's strides broadcast to (*batch, m, k)
    b_full: tuple[int, ...]  # b's strides broadcast to (*batch, k, n)
    drop_row: bool
    drop_col: bool
    result_shape: tuple[int, ...]

    @property
    def full_shape(self) -> tuple[int, ...]:
        return (*self.batch, self.m, self.n)


def _plan_matmul(a: Strided, b: Strided) -> _MatmulPlan:
    """Checks both operands and plans ``a @ b`` (see :func:`matmul` for the errors)."""
    check_operand(a, where="matmul")
    check_operand(b, where="matmul")
    _same_dtype(a, b, "matmul")
    if not a.shape or not b.shape:
        raise RankMismatchError(1, 0, what="matmul operand rank (at least)")
    a_shape, a_strides = a.shape, a.strides
    b_shape, b_strides = b.shape, b.strides
    drop_row = len(a_shape) == 1
    drop_col = len(b_shape) == 1
    if drop_row:
        a_shape, a_strides = _unsqueezed(a_shape, a_strides, 0)
    if drop_col:
        b_shape, b_strides = _unsqueezed(b_shape, b_strides, 1)
    m, k = a_shape[-2:]
    k_b, n = b_shape[-2:]
    if k != k_b:
        raise RankMismatchError(
            k, k_b, what=f"matmul inner size (a is {list(a.shape)}, b is {list(b.shape)}): b's"
        )
    batch = layout.broadcast_shapes(a_shape[:-2], b_shape[:-2])
    full_shape = (*batch, m, n)
    _, a_full = layout.broadcast_layout(a_shape, a_strides, (*batch, m, k))
    _, b_full = layout.broadcast_layout(b_shape, b_strides, (*batch, k, n))
    result_shape = tuple(
        size
        for axis, size in enumerate(full_shape)
        if not (drop_row and axis == len(full_shape) - 2)
        and not (drop_col and axis == len(full_shape) - 1)
    )
    count = layout.element_count(full_shape)
    # The kernel indexes the broadcast views of a and b with 32-bit ints too.
    largest = max(count, layout.element_count((*batch, m, k)), layout.element_count((*batch, k, n)))
    if largest > INT32_MAX:
        raise KernelArgumentError(
            f"matmul: a broadcast operand or the result has {largest} elements, above the "
            f"kernels' 32-bit index limit {INT32_MAX}"
        )
    return _MatmulPlan(batch, m, n, k, a_full, b_full, drop_row, drop_col, result_shape)


def matmul(
    executor: Executor,
    a: Strided,
    b: Strided,
    c: Strided | None = None,
    *,
    alpha: float = 1.0,
    beta: float = 0.0,
) -> tuple[np.ndarray, tuple[int, ...]]:
    """``alpha * (a @ b) + beta * c`` with numpy ``matmul`` shape rules.

    Rank-1 operands are promoted (``a`` to a row, ``b`` to a column) and the promoted axis is
    removed from the result; batch axes broadcast; ``c``, when given, must broadcast to the
    result shape. Returns (1-D result, result shape). Raises
    :class:`~llmfs.tensor.errors.RankMismatchError` for rank-0 operands or unequal inner sizes,
    and :class:`~llmfs.tensor.errors.BroadcastError` for batch or ``c`` shapes that do not
    broadcast.
    """
    plan = _plan_matmul(a, b)
    suffix = check_dtype(a.storage.dtype, where="matmul")
    batch, m, n, k = plan.batch, plan.m, plan.n, plan.k
    a_full, b_full, full_shape = plan.a_full, plan.b_full, plan.full_shape
    drop_row, drop_col, result_shape = plan.drop_row, plan.drop_col, plan.result_shape
    count = layout.element_count(full_shape)
    if c is not None:
        check_operand(c, where="matmul (c)")
        _same_dtype(a, c, "matmul (c)")
        # c must expand to the result shape (BroadcastError otherwise), never the reverse.
        c_shape, c_strides = layout.broadcast_layout(c.shape, c.strides, result_shape)
        # Re-insert the dropped vector axes (size 1) so c lines up with full_shape: n's axis
        # last, then m's axis just before it.
        if drop_col:
            c_shape, c_strides = _unsqueezed(c_shape, c_strides, len(c_shape))
        if drop_row:
            c_shape, c_strides = _unsqueezed(c_shape, c_strides, len(c_shape) - 1)
        c_view = view_descriptor(Layout(full_shape, c_strides, c.base_offset))
        c_storage = c.storage
    else:
        c_view = view_descriptor(Layout(full_shape, (0,) * len(full_shape), 0))
        c_storage = np.zeros(1, dtype=a.storage.dtype)
    out = executor.empty(count, a.storage.dtype)
    if count:
        executor.run(
            family_source("matmul"),
            f"matmul_{suffix}",
            [
                a.storage,
                b.storage,
                c_storage,
                out,
                view_descriptor(Layout((*full_shape[:-1], k), a_full, a.base_offset)),
                view_descriptor(Layout((*batch, k, n), b_full, b.base_offset)),
                c_view,
                np.array([m, n, k, count, 0 if c is None else 1], dtype=np.int32),
                np.array([alpha, beta], dtype=np.float32),
            ],
            count,
        )
    return out, result_shape


@dataclass(frozen=True)
class MatmulKernel:
    """A float32 matmul kernel of your own that a Metal backend runs its matmuls on
    (:meth:`~llmfs.tensor.backends.metal.backend.MetalEmulatorBackend.matmul_kernel`).

    The kernel ``name`` of MSL ``source`` takes buffers ``0`` a (``[batch, M, K]``), ``1`` b
    (``[batch, K, N]``), ``2`` c (``[batch, M, N]``), all contiguous ``float``, then ``3`` M,
    ``4`` N, ``5`` K (``uint``); thread ``(col, row, batch)`` of the grid computes
    ``c[batch, row, col]``. The grid is rounded up to whole ``tile`` x ``tile`` threadgroups, so
    every slot of a threadgroup tile has a thread to fill it: threads whose row or column lies
    past the matrix must load 0 and must not store. ``sanitize`` is the emulator's choice of
    :func:`~llmfs.tensor.backends.metal.run_kernel` (``None``: isolated, safe for any kernel;
    ``False``: in process, only for a kernel known to guard every access); ignored on a Mac.
    """

    source: str
    name: str
    tile: int
    sanitize: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not isinstance(self.name, str):
            raise KernelArgumentError("a matmul kernel needs its MSL source and name as str")
        if isinstance(self.tile, bool) or not isinstance(self.tile, int) or self.tile < 1:
            raise KernelArgumentError(f"tile must be a positive int, got {self.tile!r}")
        if self.tile * self.tile > emulator.MAX_THREADS_PER_THREADGROUP:
            raise KernelArgumentError(
                f"a {self.tile} x {self.tile} threadgroup has {self.tile * self.tile} threads, "
                f"above {emulator.MAX_THREADS_PER_THREADGROUP}"
            )


def kernel_matmul(
    executor: Executor, kernel: MatmulKernel, a: Strided, b: Strided
) -> tuple[np.ndarray, tuple[int, ...]]:
    """``a @ b`` (float32, numpy's shape rules and errors, as :func:`matmul`) on ``kernel``.

    Both operands are first copied row-major in their broadcast shapes by the strided-copy
    kernel (the user's kernel reads plain ``[batch, M, K]`` and ``[batch, K, N]`` arrays). When
    ``b`` is one matrix for every batch (a weight), ``a``'s batch rows are folded into ``M``: one
    launch of full threadgroups instead of one thin matrix per batch entry.
    """
    plan = _plan_matmul(a, b)
    check_dtype(a.storage.dtype, where="a custom matmul kernel", allowed=("float32",))
    batch, m, n, k = plan.batch, plan.m, plan.n, plan.k
    count = layout.element_count(plan.full_shape)
    out = executor.empty(count, a.storage.dtype)
    if count == 0:
        return out, plan.result_shape
    a_rows = strided_copy(
        executor, Strided(a.storage, Layout((*batch, m, k), plan.a_full, a.base_offset))
    )
    shared_b = all(stride == 0 for stride in plan.b_full[: len(batch)])
    b_shape = (k, n) if shared_b else (*batch, k, n)
    b_strides = plan.b_full[len(batch) :] if shared_b else plan.b_full
    b_cols = strided_copy(executor, Strided(b.storage, Layout(b_shape, b_strides, b.base_offset)))
    groups = 1 if shared_b else layout.element_count(batch)
    rows = m * layout.element_count(batch) if shared_b else m
    tile = kernel.tile
    grid = (-(-n // tile) * tile, -(-rows // tile) * tile, groups)
    dims = [_count(rows), _count(n), _count(k)]
    buffers = [a_rows, b_cols, out, *dims]
    if isinstance(executor, EmulatorExecutor):
        emulator.load_library(kernel.source).run(
            kernel.name,
            buffers,
            grid,
            (tile, tile, 1),
            sanitize=kernel.sanitize,
            shuffle=executor.shuffle,
        )
    else:
        launch = getattr(executor, "run_kernel", None)
        if launch is None:
            raise MetalError(f"executor {executor.name!r} cannot launch a 3-D grid")
        launch(kernel.source, kernel.name, buffers, grid, (tile, tile, 1))
    return out, plan.result_shape


__all__ = [
    "BINARY_OPS",
    "COPY_OPS",
    "FAMILIES",
    "MATMUL_OPS",
    "OP_FAMILY",
    "REDUCE_OPS",
    "UNARY_OPS",
    "EmulatorExecutor",
    "Executor",
    "MatmulKernel",
    "Strided",
    "binary",
    "check_dtype",
    "check_operand",
    "family_source",
    "kernel_matmul",
    "kernel_source",
    "matmul",
    "reduce",
    "scale",
    "strided_copy",
    "unary",
]
