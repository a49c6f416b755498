"""Hypothesis strategies for tensors and chains of view operations.

A *chain* is a list of operations, each a tuple naming a ``TensorView`` method and its arguments,
drawn so that every step is valid for the shape reached so far (reshape steps excepted: they may
legitimately fail, and the tests check that llmfs and NumPy agree on when). :func:`apply_llmfs`
and :func:`apply_numpy` replay one chain on a llmfs view and on a NumPy array over the same
buffer, so a test can compare the two step by step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from llmfs.tensor import Tensor, TensorView

Op = tuple[Any, ...]

small_sizes = st.integers(min_value=0, max_value=4)
positive_sizes = st.integers(min_value=1, max_value=4)


@st.composite
def shapes(
    draw: st.DrawFn, *, min_rank: int = 0, max_rank: int = 4, allow_empty: bool = True
) -> tuple[int, ...]:
    """A shape of rank ``min_rank..max_rank`` with sizes 0..4 (1..4 without ``allow_empty``)."""
    sizes = small_sizes if allow_empty else positive_sizes
    return tuple(draw(st.lists(sizes, min_size=min_rank, max_size=max_rank)))


@st.composite
def tensors(draw: st.DrawFn, *, dtype: str = "float64", **shape_kwargs: Any) -> Tensor:
    """A tensor whose values are distinct (value = storage offset + 1), so any misplaced read
    shows up as a wrong value."""
    shape = draw(shapes(**shape_kwargs))
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    return Tensor.from_vec(shape, np.arange(1, count + 1, dtype=np.float64), dtype=dtype)


def _factorizations(n: int) -> list[tuple[int, ...]]:
    """A few shapes with ``n`` values, used as reshape targets."""
    options: list[tuple[int, ...]] = [(n,)]
    for a in range(1, n + 1):
        if n % a == 0:
            options.append((a, n // a))
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    options.append((a, b, n // a // b))
    return options


@st.composite
def view_op(draw: st.DrawFn, shape: tuple[int, ...], only: tuple[str, ...] | None = None) -> Op:
    """One operation valid for ``shape`` (reshapes may need a copy, and then fail); ``only``
    keeps the kinds it names (the same draw as filtering the result by kind, without drawing
    and throwing away whole examples: "reshape" is valid for every shape)."""
    rank = len(shape)
    kinds = ["reshape", "expand", "unsqueeze"]
    if rank >= 1:
        kinds += ["slice", "flip", "pyslice", "squeeze"]
    if rank >= 2:
        kinds += ["transpose", "permute", "merge"]
    if only is not None:
        kinds = [kind for kind in kinds if kind in only]
    kind = draw(st.sampled_from(kinds))
    if kind == "transpose":
        a, b = draw(st.integers(0, rank - 1)), draw(st.integers(0, rank - 1))
        return ("transpose", a, b)
    if kind == "permute":
        return ("permute", tuple(draw(st.permutations(range(rank)))))
    if kind == "slice":
        axis = draw(st.integers(0, rank - 1))
        size = shape[axis]
        start = draw(st.integers(0, size))
        stop = draw(st.integers(start, size))
        step = draw(st.integers(1, 3))
        return ("slice", axis, start, stop, step)
    if kind == "pyslice":
        axis = draw(st.integers(0, rank - 1))
        bound = st.one_of(st.none(), st.integers(-6, 6))
        step = draw(st.sampled_from([None, 1, 2, -1, -2, 3]))
        return ("pyslice", axis, draw(bound), draw(bound), step)
    if kind == "flip":
        return ("flip", draw(st.integers(0, rank - 1)))
    if kind == "merge":
        start = draw(st.integers(0, rank - 1))
        end = draw(st.integers(start, rank - 1))
        return ("merge", start, end)
    if kind == "expand":
        target = [draw(st.integers(0, 3)) if size == 1 else size for size in shape]
        lead = draw(st.lists(st.integers(0, 3), max_size=1))
        return ("expand", tuple(lead + target))
    if kind == "unsqueeze":
        return ("unsqueeze", draw(st.integers(0, rank)))
    if kind == "squeeze":
        ones = [axis for axis, size in enumerate(shape) if size == 1]
        return ("squeeze", draw(st.sampled_from(ones)) if ones else None)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count == 0:
        return ("reshape", draw(st.sampled_from([(0,), (0, 3), (3, 0, 2), (-1, 3)])))
    target = list(draw(st.sampled_from(_factorizations(count))))
    if draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return ("reshape", tuple(target))


@st.composite
def view_chains(
    draw: st.DrawFn, *, max_ops: int = 5, **tensor_kwargs: Any
) -> tuple[Tensor, list[Op]]:
    """A tensor and a chain of operations, each valid for the shape the chain has reached."""
    tensor = draw(tensors(**tensor_kwargs))
    # Track the chain on a NumPy twin, so a reshape that needs a copy can be left out.
    twin = np.empty(tensor.shape, dtype=np.int8)
    ops: list[Op] = []
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(view_op(twin.shape))
        result = np_apply(twin, op)
        if result is None:
            continue  # a reshape that needs a copy: tested separately, not chained
        ops.append(op)
        twin = result
    return tensor, ops


def np_apply(array: np.ndarray, op: Op) -> np.ndarray | None:
    """Applies one operation to a NumPy array as a view; ``None`` when NumPy would need a copy."""
    name, *args = op
    if name == "transpose":
        return np.swapaxes(array, args[0], args[1])
    if name == "permute":
        return np.transpose(array, args[0])
    if name == "slice":
        axis, start, stop, step = args
        index = [slice(None)] * array.ndim
        index[axis] = slice(start, stop, step)
        return array[tuple(index)]
    if name == "pyslice":
        axis, start, stop, step = args
        index = [slice(None)] * array.ndim
        index[axis] = slice(start, stop, step)
        return array[tuple(index)]
    if name == "flip":
        return np.flip(array, args[0])
    if name == "merge":
        start, end = args
        merged = int(np.prod(array.shape[start : end + 1], dtype=np.int64))
        return _np_reshape(array, (*array.shape[:start], merged, *array.shape[end + 1 :]))
    if name == "expand":
        return np.broadcast_to(array, args[0])
    if name == "unsqueeze":
        return np.expand_dims(array, args[0])
    if name == "squeeze":
        return np.squeeze(array) if args[0] is None else np.squeeze(array, args[0])
    if name == "reshape":
        return _np_reshape(array, args[0])
    raise AssertionError(f"unknown op {name}")


def _np_reshape(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    try:
        return np.reshape(array, shape, copy=False)
    except ValueError:
        return None


def llmfs_apply(view: TensorView, op: Op) -> TensorView:
    """Applies one operation to a llmfs view (raising whatever llmfs raises)."""
    name, *args = op
    if name == "pyslice":
        axis, start, stop, step = args
        index = [slice(None)] * view.rank
        index[axis] = slice(start, stop, step)
        return view[tuple(index)]
    return getattr(view, name)(*args)


def apply_numpy(storage: np.ndarray, shape: tuple[int, ...], ops: list[Op]) -> np.ndarray:
    """Replays a chain on a NumPy array over ``storage`` (every step must be a view)."""
    array = storage.reshape(shape)
    for op in ops:
        result = np_apply(array, op)
        assert result is not None, f"chain step {op} needs a copy in NumPy"
        array = result
    return array


def apply_llmfs(tensor: Tensor, ops: list[Op]) -> TensorView:
    """Replays a chain on ``tensor.view()``."""
    view = tensor.view()
    for op in ops:
        view = llmfs_apply(view, op)
    return view
