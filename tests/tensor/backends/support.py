"""Shared pieces of the backend test suite: the (backend, dtype) grid, strided views of a given
shape with their NumPy twins, and tolerances.

:data:`BACKEND_DTYPES` holds one entry per available backend and per dtype that backend declares,
so a backend added to the registry (Metal, on a machine that has it) is tested with no change
here. :func:`views_of_shape` draws a view of an exact shape built from any mix of the layouts the
ops must handle: permuted storage (transposes), steps, flips (negative strides), broadcast axes
(zero strides), 0-d and empty shapes; its twin is the same view made by NumPy over the same
buffer, so expected values never come from llmfs itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st

from llmfs.tensor import FLOAT_DTYPES, Tensor, TensorView, available_backends, get_backend

#: The float grid: integer and bool dtypes have exact answers and their own tests
#: (``tests/tensor/test_dtypes.py``), so tolerances and value ranges here are for floats.
BACKEND_DTYPES = [
    pytest.param(name, dtype, id=f"{name}-{dtype}")
    for name in available_backends()
    for dtype in get_backend(name).dtypes
    if dtype in FLOAT_DTYPES
]

#: Relative tolerance of one result per storage dtype (a few units in the last place).
RTOL = {"float16": 4e-3, "float32": 3e-5, "float64": 1e-11}


def assert_close(got: Tensor, want: np.ndarray, dtype: str, *, scale: Any = None) -> None:
    """``got`` (a Tensor) equals ``want`` (exact float64 values) within the dtype's tolerance.

    ``scale`` is the size of the terms summed into each value (for reductions and products),
    so cancellation is judged against the terms, not against a result near 0.
    """
    assert isinstance(got, Tensor)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    rtol = RTOL[dtype]
    with np.errstate(all="ignore"):
        expected = np.asarray(want, dtype=np.float64).astype(dtype).astype(np.float64)
        atol = 0.0 if scale is None else rtol * np.asarray(scale, dtype=np.float64)
        actual = got.to_numpy().astype(np.float64)
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
        near = np.abs(actual - expected) <= atol + rtol * np.abs(expected)
    bad = ~(same | near)
    assert not bad.any(), (
        f"{int(bad.sum())} of {bad.size} values differ beyond rtol={rtol}:\n"
        f"got      {actual[bad][:8]}\nexpected {expected[bad][:8]}"
    )


def _inverse(permutation: tuple[int, ...]) -> list[int]:
    inverse = [0] * len(permutation)
    for position, axis in enumerate(permutation):
        inverse[axis] = position
    return inverse


@st.composite
def views_of_shape(
    draw: st.DrawFn,
    shape: tuple[int, ...],
    dtype: str,
    *,
    low: float = -3.0,
    high: float = 3.0,
    allow_broadcast: bool = True,
) -> tuple[TensorView, np.ndarray]:
    """A llmfs view of exactly ``shape`` and the NumPy view of the same buffer (read-only).

    Per axis: maybe broadcast (stored once, stride 0), maybe stepped by 2, maybe flipped; and the
    owner's axes are stored in a random permutation of the view's order.
    """
    rank = len(shape)
    broadcast = [
        allow_broadcast and size != 1 and draw(st.booleans()) and draw(st.booleans())
        for size in shape
    ]
    stored = [1 if b else size for size, b in zip(shape, broadcast)]
    steps = [draw(st.sampled_from([1, 1, 2])) for _ in shape]
    full = [(size - 1) * step + 1 if size > 0 else 0 for size, step in zip(stored, steps)]
    flips = [draw(st.booleans()) for _ in shape]
    order = tuple(draw(st.permutations(range(rank))))
    owner_shape = [full[axis] for axis in order]
    count = int(np.prod(owner_shape, dtype=np.int64))
    seed = draw(st.integers(0, 2**32 - 1))
    values = np.random.default_rng(seed).uniform(low, high, size=count)
    owner = Tensor.from_vec(owner_shape, values, dtype=dtype)
    storage = owner.as_slice()

    back = _inverse(order)
    view = owner.view().permute(back)
    array = storage.reshape(owner_shape).transpose(back)
    for axis in range(rank):
        view = view.slice(axis, 0, full[axis], steps[axis])
        array = array[(slice(None),) * axis + (slice(0, full[axis], steps[axis]),)]
        if flips[axis]:
            view = view.flip(axis)
            array = np.flip(array, axis)
    view = view.expand(shape)
    array = np.broadcast_to(array, shape)
    return view, array


@st.composite
def small_shapes(
    draw: st.DrawFn, *, min_rank: int = 0, max_rank: int = 3, max_size: int = 3
) -> tuple[int, ...]:
    """A shape of rank ``min_rank..max_rank``, sizes 0..``max_size`` (0 one time in six)."""
    size = st.one_of(st.just(0), st.integers(1, max_size), st.integers(1, max_size))
    return tuple(draw(st.lists(size, min_size=min_rank, max_size=max_rank)))


@st.composite
def broadcastable_to(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``shape``: a suffix of it with some sizes replaced by 1."""
    keep = draw(st.integers(0, len(shape)))
    suffix = shape[len(shape) - keep :]
    return tuple(1 if draw(st.booleans()) and draw(st.booleans()) else s for s in suffix)
