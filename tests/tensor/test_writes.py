"""copyto: writing through a view, refused where two coordinates share a storage cell."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from llmfs.tensor import (
    BroadcastError,
    DTypeError,
    OverlappingWriteError,
    StaleViewError,
    Tensor,
    TensorError,
    as_strided,
    copyto,
    layout,
)


def _base() -> Tensor:
    return Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])


def test_a_write_through_a_slice_reaches_the_owner_cells_it_reads() -> None:
    base = _base()
    copyto(base.view().slice(1, 1, 3), Tensor.from_vec([2, 2], [1, 2, 3, 4]))
    assert base.tolist() == [[10, 1, 2], [20, 3, 4]]


def test_the_source_broadcasts_to_the_destination_and_a_number_fills_it() -> None:
    base = Tensor.from_vec([2, 3], [10.0, 11.0, 12.0, 20.0, 21.0, 22.0])
    copyto(base.view().transpose(0, 1), Tensor.from_vec([2], [7, 8]))
    assert base.tolist() == [[7, 7, 7], [8, 8, 8]]
    copyto(base, 0.5)
    assert base.tolist() == [[0.5] * 3] * 2


def test_a_source_sharing_the_destination_storage_is_read_before_any_write() -> None:
    base = _base()
    view = base.view()
    copyto(base.view().flip(1), view)
    assert base.tolist() == [[12, 11, 10], [22, 21, 20]]


def test_a_broadcast_view_is_refused_naming_two_coordinates_and_their_cell() -> None:
    b = Tensor.from_vec([3], [1, 2, 3])
    wide = b.view().expand([2, 3])
    with pytest.raises(OverlappingWriteError) as raised:
        copyto(wide, Tensor.from_vec([2, 3], [1, 2, 3, 4, 5, 6]))
    message = str(raised.value)
    assert "strides [0, 1]" in message
    assert "coordinates [0, 0] and [1, 0] both read storage offset 0" in message
    assert raised.value.condition == "each written coordinate has its own storage cell"
    assert b.tolist() == [1, 2, 3]  # nothing was written
    assert b.version == 0


def test_a_write_makes_every_earlier_view_stale_the_written_one_included() -> None:
    base = _base()
    row = base.view()[0]
    copyto(row, 1)
    with pytest.raises(StaleViewError):
        row.tolist()


def test_refusals_name_their_condition() -> None:
    base = _base()
    with pytest.raises(BroadcastError):
        copyto(base, Tensor.from_vec([2], [1, 2]))
    with pytest.raises(TensorError, match="destination must be a Tensor"):
        copyto([1, 2], 3)  # type: ignore[arg-type]


def _brute_force(shape: list[int], strides: list[int]) -> bool:
    seen = set()
    for coordinate in itertools.product(*(range(n) for n in shape)):
        offset = sum(c * s for c, s in zip(coordinate, strides))
        if offset in seen:
            return True
        seen.add(offset)
    return False


@pytest.mark.parametrize(
    ("shape", "strides", "overlaps"),
    [
        ([2, 3], [0, 1], True),
        ([2, 3], [3, 1], False),
        ([3, 2], [2, 3], False),  # fails the reach test, yet every offset differs
        ([3, 2], [1, 1], True),
        ([1, 3], [0, 1], False),  # a zero stride on a size-1 axis moves nowhere
        ([0, 3], [0, 0], False),
        ([], [], False),
        ([2, 2], [-3, 1], False),
    ],
)
def test_overlapping_coordinates_agrees_with_a_brute_force_walk(
    shape: list[int], strides: list[int], overlaps: bool
) -> None:
    found = layout.Layout(tuple(shape), tuple(strides)).overlapping_coordinates()
    assert (found is not None) == overlaps == _brute_force(shape, strides)
    if found is not None:
        first, second = found
        assert first != second
        offset = layout.storage_offset(shape, strides, 0, first)
        assert layout.storage_offset(shape, strides, 0, second) == offset


def test_overlapping_coordinates_on_random_layouts() -> None:
    rng = np.random.default_rng(4)
    for _ in range(300):
        rank = int(rng.integers(1, 4))
        shape = [int(v) for v in rng.integers(1, 4, size=rank)]
        strides = [int(v) for v in rng.integers(-4, 5, size=rank)]
        assert (
            layout.Layout(tuple(shape), tuple(strides)).overlapping_coordinates() is not None
        ) == _brute_force(shape, strides)


def test_an_explicit_overlapping_layout_is_refused_too() -> None:
    owner = Tensor.from_vec([4], [1, 2, 3, 4])
    diagonal_runs = as_strided(owner, [3, 2], [1, 1], 0)
    with pytest.raises(OverlappingWriteError, match=r"\[0, 1\] and \[1, 0\]"):
        copyto(diagonal_runs, 0)


def test_a_stale_view_is_never_written_through() -> None:
    base = _base()
    early = base.view()
    copyto(base, 1)
    with pytest.raises(StaleViewError):
        copyto(early, 2)
    assert base.tolist() == [[1] * 3] * 2


def test_a_value_that_would_change_kind_is_refused() -> None:
    ints = Tensor.from_vec([2], [1, 2])
    assert ints.dtype == np.int64  # Python ints keep their kind, as in NumPy
    with pytest.raises(DTypeError, match="int64"):
        copyto(ints, Tensor.from_vec([2], [0.5, 1.5]))
    copyto(ints, Tensor.from_vec([2], [7, 8]))
    floats = Tensor.from_vec([2], [0.5, 1.5])
    copyto(floats, ints)  # int into float keeps every value: allowed, as in NumPy
    assert ints.tolist() == [7, 8] and floats.tolist() == [7.0, 8.0]


def test_a_write_through_any_permuted_stepped_or_flipped_view_equals_numpys() -> None:
    # The same views in NumPy and here, the same values written: the owners' storage agrees cell
    # by cell (and nothing outside the view's cells moves).
    rng = np.random.default_rng(0)
    for _ in range(200):
        shape = tuple(int(n) for n in rng.integers(1, 5, size=rng.integers(1, 5)))
        expected = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
        owner = Tensor.from_numpy(expected.copy())
        view, peer = owner.view(), expected
        order = [int(a) for a in rng.permutation(len(shape))]
        view, peer = view.permute(order), peer.transpose(order)
        for axis in range(len(shape)):
            size = peer.shape[axis]
            start = int(rng.integers(0, size))
            stop = int(rng.integers(start + 1, size + 1))
            step = int(rng.integers(1, 3))
            view = view.slice(axis, start, stop, step)
            peer = peer[(slice(None),) * axis + (slice(start, stop, step),)]
            if rng.random() < 0.5:
                view, peer = view.flip(axis), np.flip(peer, axis)
        values = rng.normal(size=peer.shape)
        copyto(view, Tensor.from_numpy(values))
        peer[...] = values
        np.testing.assert_array_equal(owner.to_numpy(), expected)
