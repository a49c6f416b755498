"""The offset cursor, the run walker and the fast gather agree, and never leave the storage.

Random explicit layouts (overlapping, negative, zero strides) are drawn, kept only when
``validate`` accepts them, and then walked three ways.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.tensor import InvalidLayoutError, Tensor, as_strided, validate
from llmfs.tensor.backends.numpy_copies import gather
from llmfs.tensor.layout import Layout
from llmfs.tensor.traversal import StridedOffsets, contiguous_runs

from .strategies import apply_llmfs, view_chains


@st.composite
def explicit_layouts(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    rank = draw(st.integers(0, 4))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=rank, max_size=rank)))
    strides = tuple(draw(st.lists(st.integers(-7, 7), min_size=rank, max_size=rank)))
    base = draw(st.integers(-3, 40))
    storage_len = draw(st.integers(0, 48))
    return shape, strides, base, storage_len


def reference_offsets(shape, strides, base) -> list[int]:
    return [base + sum(i * s for i, s in zip(index, strides)) for index in np.ndindex(*shape)]


@settings(max_examples=400, deadline=None)
@given(explicit_layouts())
def test_valid_layouts_are_walked_inside_the_storage(layout) -> None:
    shape, strides, base, storage_len = layout
    try:
        validate(shape, strides, base, storage_len)
    except InvalidLayoutError:
        # Then the cursor refuses too, before reading anything.
        with pytest.raises(InvalidLayoutError):
            StridedOffsets(Layout(shape, strides, base), storage_len)
        return
    offsets = list(StridedOffsets(Layout(shape, strides, base), storage_len))
    assert offsets == reference_offsets(shape, strides, base)
    assert all(0 <= offset < storage_len for offset in offsets)
    runs = [
        start + k * step
        for start, count, step in contiguous_runs(Layout(shape, strides, base), storage_len)
        for k in range(count)
    ]
    assert runs == offsets
    storage = np.arange(storage_len, dtype=np.float64)
    assert gather(storage, Layout(shape, strides, base)).reshape(-1).tolist() == [
        float(o) for o in offsets
    ]
    owner = Tensor.from_vec([storage_len], storage)
    view = as_strided(owner, shape, strides, base)
    assert view.materialize().as_slice().tolist() == [float(o) for o in offsets]


@settings(max_examples=200, deadline=None)
@given(view_chains())
def test_derived_views_always_validate(case) -> None:
    tensor, ops = case
    view = apply_llmfs(tensor, ops)
    validate(view.shape, view.strides, view.base_offset, tensor.size)


def test_cursor_order_and_edge_cases() -> None:
    assert list(StridedOffsets(Layout((2, 2), (3, 1), 1), 6)) == [1, 2, 4, 5]
    assert list(StridedOffsets(Layout((), (), 4), 6)) == [4]
    assert list(StridedOffsets(Layout((2, 0), (1, 1), 99), 6)) == []
    assert list(StridedOffsets(Layout((3,), (0,), 2), 6)) == [2, 2, 2]
    assert list(StridedOffsets(Layout((1, 3), (1000, 1), 0), 6)) == [0, 1, 2]
    cursor = StridedOffsets(Layout((2, 3), (3, 1), 0), 6)
    assert len(cursor) == 6
    next(cursor)
    assert len(cursor) == 5


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_blocked_gather_matches_cursor_on_large_transposes(dtype) -> None:
    # 1024 float32 values per row: a 4 KiB stride takes the cache-blocked path.
    for rows, cols in [(1024, 1030), (700, 2048), (3, 1024)]:
        tensor = Tensor.from_numpy(np.arange(rows * cols).reshape(rows, cols) % 251, dtype=dtype)
        view = tensor.view().transpose(0, 1)
        expected = tensor.to_numpy().T
        assert np.array_equal(view.materialize().to_numpy(), expected)
    stacked = Tensor.from_numpy(np.arange(2 * 64 * 1024).reshape(2, 64, 1024) % 97, dtype=dtype)
    permuted = stacked.view().permute([0, 2, 1])
    assert np.array_equal(permuted.materialize().to_numpy(), stacked.to_numpy().transpose(0, 2, 1))
    flipped = stacked.view().permute([2, 0, 1]).flip(0)
    assert np.array_equal(
        flipped.materialize().to_numpy(), np.flip(stacked.to_numpy().transpose(2, 0, 1), 0)
    )
