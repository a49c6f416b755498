"""Indexing sugar, flips, broadcasting views and the shared-storage questions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.tensor import (
    BroadcastError,
    IndexOutOfBoundsError,
    InvalidLayoutError,
    Tensor,
    TensorError,
    TensorView,
    as_strided,
    materialize,
)


@pytest.fixture
def cube() -> Tensor:
    return Tensor.from_numpy(np.arange(24.0).reshape(2, 3, 4))


@st.composite
def index_items(draw: st.DrawFn, rank: int, sizes: tuple[int, ...]) -> tuple:
    items: list = []
    axis = 0
    used_ellipsis = False
    while axis < rank and draw(st.booleans()):
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis"]))
        if kind == "int" and sizes[axis] > 0:
            items.append(draw(st.integers(-sizes[axis], sizes[axis] - 1)))
            axis += 1
        elif kind == "slice":
            bound = st.one_of(st.none(), st.integers(-6, 6))
            step = draw(st.sampled_from([None, 1, 2, -1, -3]))
            items.append(slice(draw(bound), draw(bound), step))
            axis += 1
        elif kind == "none":
            items.append(None)
        elif kind == "ellipsis" and not used_ellipsis:
            items.append(Ellipsis)
            used_ellipsis = True
            axis = rank  # the ellipsis takes what is left; later items would need more care
    return tuple(items)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_getitem_matches_numpy(data: st.DataObject) -> None:
    shape = tuple(data.draw(st.lists(st.integers(0, 4), max_size=4)))
    array = np.arange(int(np.prod(shape)) if shape else 1, dtype=np.float64).reshape(shape)
    key = data.draw(index_items(len(shape), shape))
    view = Tensor.from_numpy(array).view()[key]
    expected = array[key]
    assert view.shape == expected.shape
    assert view.tolist() == expected.tolist()


def test_int_index_out_of_range(cube: Tensor) -> None:
    with pytest.raises(
        IndexOutOfBoundsError, match="index -4 is out of bounds for axis 1 of size 3"
    ):
        cube[0, -4]
    assert cube[-1, -1, -1].tolist() == 23.0


def test_flip_moves_the_base_offset(cube: Tensor) -> None:
    flipped = cube.view().flip(2)
    assert flipped.strides == (12, 4, -1)
    assert flipped.base_offset == 3
    assert flipped.tolist() == np.flip(np.arange(24.0).reshape(2, 3, 4), 2).tolist()
    empty = Tensor.zeros([0, 3]).view().flip(0)
    assert empty.base_offset == 0 and empty.strides == (-3, 1)


def test_expand_and_broadcast_views(cube: Tensor) -> None:
    row = Tensor.from_vec([1, 3], [1, 2, 3]).view()
    grown = row.expand([2, 4, 3])
    assert grown.strides == (0, 0, 1)
    assert list(grown.logical_offsets()) == [0, 1, 2] * 8
    assert grown.materialize().as_slice().tolist() == [1.0, 2.0, 3.0] * 8
    assert row.expand([-1, 3]).shape == (1, 3)
    assert row.expand([0, 3]).shape == (0, 3)
    assert row.broadcast_to([5, 3]).strides == (0, 1)
    with pytest.raises(BroadcastError, match="axis 1: source size 3 cannot expand to 2"):
        row.expand([1, 2])
    with pytest.raises(BroadcastError, match="new leading axis"):
        row.expand([-1, 1, 3])


def test_unsqueeze_and_squeeze(cube: Tensor) -> None:
    view = cube.view()
    assert view.unsqueeze(0).shape == (1, 2, 3, 4)
    assert view.unsqueeze(-1).shape == (2, 3, 4, 1)
    assert view.unsqueeze(1).is_contiguous()
    assert view.unsqueeze(1).squeeze().shape == (2, 3, 4)
    assert view.unsqueeze(1).squeeze(1).shape == (2, 3, 4)


def test_shares_storage_and_may_overlap(cube: Tensor) -> None:
    view = cube.view()
    first, second = view[0], view[1]
    assert first.shares_storage(second)
    assert not first.may_overlap(second)
    assert view.may_overlap(first)
    evens, odds = view[..., ::2], view[..., 1::2]
    assert evens.may_overlap(odds)  # a range test: interleaved views report True
    copy = materialize(first)
    assert not copy.view().shares_storage(first)
    assert not first.may_overlap(copy)
    assert not first.may_overlap(view[:, 3:])  # empty: reaches nothing


def test_as_strided_builds_overlapping_windows() -> None:
    signal = Tensor.arange(6)
    windows = as_strided(signal, [4, 3], [1, 1], 0)
    assert windows.tolist() == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]
    assert TensorView.from_parts(signal, [3], [-2], 4).tolist() == [4, 2, 0]
    with pytest.raises(InvalidLayoutError, match="largest reachable offset is 6"):
        as_strided(signal, [4, 3], [1, 1], 1)


def test_views_are_immutable_values(cube: Tensor) -> None:
    view = cube.view()
    with pytest.raises(AttributeError):
        view.shape = (24,)  # type: ignore[misc]
    with pytest.raises(TensorError, match=r"tensor\.view\(\)"):
        TensorView()


def test_tensor_shortcuts_are_the_views_operations(cube: Tensor) -> None:
    view = cube.view()
    pairs = [
        (cube.flip(1), view.flip(1)),
        (cube.merge(0, 1), view.merge(0, 1)),
        (cube.split(2, [2, 2]), view.split(2, [2, 2])),
        (cube.unsqueeze(0).expand([3, 2, 3, 4]), view.expand([3, 2, 3, 4])),
        (cube.broadcast_to([2, 2, 3, 4]), view.broadcast_to([2, 2, 3, 4])),
        (cube.unsqueeze(1).squeeze(), view),
        (cube.T, view.permute([2, 1, 0])),
    ]
    for ours, theirs in pairs:
        assert (ours.shape, ours.strides, ours.base_offset) == (
            theirs.shape,
            theirs.strides,
            theirs.base_offset,
        )
