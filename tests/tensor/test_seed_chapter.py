"""The course's worked example of views over one owner, with its own numbers.

Fixture: shape [2, 3], strides [3, 1], storage [10, 11, 12, 20, 21, 22].
"""

from __future__ import annotations

import pytest

from llmfs.tensor import (
    NonContiguousReshapeError,
    RankMismatchError,
    ReshapeElementCountMismatchError,
    SliceEndOutOfBoundsError,
    Tensor,
    copying_transpose,
)


@pytest.fixture
def tensor() -> Tensor:
    return Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])


def test_fixture_layout(tensor: Tensor) -> None:
    assert tensor.shape == (2, 3)
    assert tensor.strides == (3, 1)
    assert tensor.as_slice().tolist() == [10, 11, 12, 20, 21, 22]
    assert list(tensor.view().logical_offsets()) == [0, 1, 2, 3, 4, 5]


def test_reshape_keeps_logical_order(tensor: Tensor) -> None:
    reshaped = tensor.view().reshape([3, 2])
    assert reshaped.shape == (3, 2)
    assert reshaped.strides == (2, 1)
    assert list(reshaped.logical_offsets()) == [0, 1, 2, 3, 4, 5]
    assert reshaped.tolist() == [[10, 11], [12, 20], [21, 22]]
    assert reshaped.owner is tensor


def test_transpose_reorders_axes_not_values(tensor: Tensor) -> None:
    transposed = tensor.view().transpose(0, 1)
    assert transposed.shape == (3, 2)
    assert transposed.strides == (1, 3)
    assert list(transposed.logical_offsets()) == [0, 3, 1, 4, 2, 5]
    assert transposed.tolist() == [[10, 20], [11, 21], [12, 22]]
    # Transposed [2, 1] and source [1, 2] both select offset 5, the stored 22.
    assert transposed.storage_offset([2, 1]) == tensor.view().storage_offset([1, 2]) == 5
    assert transposed.get([2, 1]) == 22.0
    assert tensor.as_slice().tolist() == [10, 11, 12, 20, 21, 22]


def test_permute_of_rank_three() -> None:
    view = Tensor.zeros([2, 3, 4]).view()
    assert view.strides == (12, 4, 1)
    permuted = view.permute([2, 0, 1])
    assert permuted.shape == (4, 2, 3)
    assert permuted.strides == (1, 12, 4)


def test_slice_then_materialize(tensor: Tensor) -> None:
    sliced = tensor.view().slice(1, 1, 3)
    assert sliced.base_offset == 1
    assert sliced.shape == (2, 2)
    assert sliced.strides == (3, 1)
    assert list(sliced.logical_offsets()) == [1, 2, 4, 5]
    assert sliced.tolist() == [[11, 12], [21, 22]]
    assert not sliced.is_contiguous()

    copy = sliced.materialize()
    assert copy is not tensor
    assert copy.as_slice().tolist() == [11, 12, 21, 22]
    assert copy.strides == (2, 1)
    assert list(copy.view().logical_offsets()) == [0, 1, 2, 3]


def test_slice_reshaped_in_two_safe_steps(tensor: Tensor) -> None:
    sliced = tensor.view().slice(1, 1, 3)
    with pytest.raises(NonContiguousReshapeError):
        sliced.reshape([4])
    assert sliced.materialize().view().reshape([4]).tolist() == [11, 12, 21, 22]


def test_three_rejected_requests(tensor: Tensor) -> None:
    view = tensor.view()
    with pytest.raises(ReshapeElementCountMismatchError, match="6 values into shape \\[4, 2\\]"):
        view.reshape([4, 2])
    with pytest.raises(NonContiguousReshapeError, match="not adjacent in storage"):
        view.transpose(0, 1).reshape([2, 3])
    with pytest.raises(SliceEndOutOfBoundsError, match="stop 4 > size 3"):
        view.slice(1, 1, 4)


def test_scalar_and_empty_tensors() -> None:
    scalar = Tensor.from_vec([], [7.0])
    assert scalar.shape == () and scalar.size == 1 and scalar.rank == 0
    assert list(scalar.view().logical_offsets()) == [0]
    assert scalar.view().tolist() == 7.0
    assert scalar.get([]) == 7.0
    assert scalar.view().is_contiguous()

    empty = Tensor.from_vec([2, 0, 3], [])
    assert empty.size == 0 and empty.is_empty
    assert empty.strides == (3, 3, 1)
    assert list(empty.view().logical_offsets()) == []
    assert empty.view().is_contiguous()
    assert empty.view().materialize().shape == (2, 0, 3)
    assert empty.tolist() == [[], []]


def test_copying_transpose_allocates_the_transpose(tensor: Tensor) -> None:
    copied = copying_transpose(tensor)
    assert copied.as_slice().tolist() == [10, 20, 11, 21, 12, 22]
    assert copied.shape == (3, 2)
    assert copied.strides == (2, 1)
    assert copied.tolist() == tensor.view().transpose(0, 1).tolist()
    assert not copied.view().shares_storage(tensor)


def test_copying_transpose_needs_rank_two() -> None:
    message = r"rank mismatch: the rank of copying_transpose's source must be 2, got {}$"
    for shape in ([], [6], [1, 2, 3]):
        with pytest.raises(RankMismatchError, match=message.format(len(shape))):
            copying_transpose(Tensor.zeros(shape))
    assert copying_transpose(Tensor.zeros([0, 3])).shape == (3, 0)
