"""The layout module's pure functions and the ``Layout`` value, on the course's worked numbers."""

from __future__ import annotations

import pytest

from llmfs.tensor import (
    InvalidAxisRangeError,
    InvalidLayoutError,
    NonContiguousReshapeError,
    ReshapeElementCountMismatchError,
    Tensor,
    can_view_as_contiguous,
    can_view_as_contiguous_all,
    layout,
    validate,
)


def test_row_major_strides_of_the_course_example() -> None:
    assert layout.row_major_strides((10, 9, 5, 13)) == (585, 65, 13, 1)
    assert layout.row_major_strides(()) == ()
    assert layout.row_major_strides((2, 0, 3)) == (3, 3, 1)


def test_row_major_strides_refuses_the_look_alikes_of_a_shape() -> None:
    assert layout.row_major_strides((4, 3)) == (3, 1)
    for bad in ((4.0, 3), (True, 3), [4, -3]):
        with pytest.raises(layout.InvalidShapeError):
            layout.row_major_strides(bad)  # type: ignore[arg-type]
    assert layout.row_major_strides([4, 3]) == (3, 1)


def test_flat_index_of_a_coordinate() -> None:
    # [1][2][3] of a [2, 3, 4] tensor is flat index 23.
    assert layout.storage_offset((2, 3, 4), layout.row_major_strides((2, 3, 4)), 0, (1, 2, 3)) == 23


@pytest.mark.parametrize(
    ("shape", "strides", "expected"),
    [
        ((5, 4, 6, 7), (42, 210, 7, 1), True),
        ((4, 5, 6, 7), (42, 0, 0, 1), False),
        ((4, 6, 5, 7), (42, 7, 0, 1), False),
        ((4, 5, 6, 7), (210, 42, 7, 1), True),
        ((4, 5, 6, 7), (42, 0, 7, 1), False),
    ],
)
def test_transpose_contiguity_cases(shape, strides, expected) -> None:
    assert can_view_as_contiguous(shape, strides) is expected


def test_transpose_contiguity_details() -> None:
    assert can_view_as_contiguous((3, 1), (1, 0))  # size-1 axis with stride 0 is fine
    assert not can_view_as_contiguous((3, 2), (-2, 1))  # a flip is never transpose-contiguous
    assert can_view_as_contiguous((1, 3), (-5, 1))  # ...unless the flipped axis has size 1
    assert can_view_as_contiguous((0, 3), (-1, 0))  # empty: contiguous first
    assert not can_view_as_contiguous((2, 2), (3, 1))  # a gap


def test_list_form_of_the_contiguity_test() -> None:
    assert can_view_as_contiguous_all([]) is True
    same = ((5, 4, 6, 7), (42, 210, 7, 1))
    assert can_view_as_contiguous_all([same, same]) is True
    assert can_view_as_contiguous_all([same, ((4, 5, 6, 7), (210, 42, 7, 1))]) is False
    # Views are accepted directly.
    transposed = Tensor.zeros([4, 5, 6, 7]).view().transpose(0, 1)
    assert transposed.strides == (42, 210, 7, 1)
    assert can_view_as_contiguous_all([transposed, transposed.owner.view().transpose(0, 1)])
    assert not can_view_as_contiguous_all([transposed, transposed.owner.view()])


def test_validate_cases() -> None:
    assert validate((4, 5, 6, 7), (210, 42, 7, 1), 0, 840) is None
    with pytest.raises(InvalidLayoutError, match="largest reachable offset is 842") as info:
        validate((4, 5, 6, 7), (211, 42, 7, 1), 0, 840)
    assert info.value.rule == "maximum offset < storage length"
    assert "3 past the end" in str(info.value)


def test_validate_rules() -> None:
    with pytest.raises(InvalidLayoutError, match="shape has rank 2 but strides has rank 1"):
        validate((2, 3), (1,), 0, 6)
    with pytest.raises(InvalidLayoutError, match="size -1 of axis 0 is negative"):
        validate((-1,), (1,), 0, 6)
    with pytest.raises(InvalidLayoutError, match="smallest reachable offset is -2"):
        validate((3,), (-1,), 0, 6)
    with pytest.raises(InvalidLayoutError, match="64-bit overflow"):
        validate((2, 2), (2**62, 2**62), 0, 6)
    # An empty layout reaches nothing: any strides and base offset are fine.
    assert validate((0, 3), (1000, -1000), 10**6, 6) is None
    assert validate((3,), (-1,), 2, 3) is None


def test_offset_bounds_with_signed_strides() -> None:
    assert layout.offset_bounds((2, 3), (-3, 1), 3) == (0, 5)
    assert layout.offset_bounds((4,), (0,), 2) == (2, 2)
    assert layout.offset_bounds((0, 4), (1, 1), 2) is None


def test_coalesce_merges_runs() -> None:
    assert layout.Layout((2, 3, 4), (12, 4, 1), 5).coalesce() == layout.Layout((24,), (1,), 5)
    assert layout.Layout((3, 2), (1, 3)).coalesce() == layout.Layout((3, 2), (1, 3))
    assert layout.Layout((2, 1, 3), (-3, 7, -1)).coalesce() == layout.Layout((6,), (-1,))
    assert layout.Layout((2, 0), (5, 1)).coalesce() == layout.Layout((2, 0), (5, 1))


def test_merge_and_split_examples() -> None:
    view = Tensor.zeros([2, 3, 4, 5]).view()
    assert view.merge(1, 2).shape == (2, 12, 5)
    assert view.merge(1, 2).strides == (60, 5, 1)
    assert Tensor.zeros([3, 20]).view().split(1, [4, 5]).shape == (3, 4, 5)
    assert Tensor.zeros([3, 20]).view().split(1, [4, -1]).shape == (3, 4, 5)
    assert view.reshape([6, 20]).shape == (6, 20)
    assert Tensor.zeros([6, 20]).view().reshape([2, 3, 4, 5]).strides == (60, 20, 5, 1)


def test_split_then_merge_reshapes() -> None:
    # "[6,8] -> [2,3,4,4]" looks like a split-then-merge, but those shapes hold 48 and 96 values:
    # the honest answer is an element-count error.
    source = Tensor.zeros([6, 8]).view()
    with pytest.raises(
        ReshapeElementCountMismatchError, match="48 values into shape \\[2, 3, 4, 4\\]"
    ):
        source.reshape([2, 3, 4, 4])
    # Split-then-merge on shapes that agree: split 6 -> 3x2, merge 2 with 8 -> 16...
    assert source.reshape([3, 16]).strides == (16, 1)
    # ...split both axes, and split 6 -> 2x3 then merge 3 with 8 -> 24.
    assert source.reshape([2, 3, 4, 2]).strides == (24, 8, 2, 1)
    assert source.reshape([2, 24]).strides == (24, 1)
    # The same plans on a non-contiguous source: only the groups that stay adjacent survive.
    transposed = Tensor.zeros([8, 6]).view().transpose(0, 1)  # shape [6, 8], strides [1, 6]
    assert transposed.reshape([2, 3, 4, 2]).strides == (3, 1, 12, 6)
    with pytest.raises(
        NonContiguousReshapeError, match="axes 0 and 1 \\(sizes 6, 8; strides 1, 6\\)"
    ):
        transposed.reshape([2, 24])


def test_reshape_of_a_transposed_view_as_merge_and_split() -> None:
    # Non-contiguous, but [6, 8] -> [2, 3, 4, 2] splits each axis separately: still a view.
    view = Tensor.zeros([8, 6]).view().transpose(0, 1)
    reshaped = view.reshape([2, 3, 4, 2])
    assert reshaped.strides == (3, 1, 12, 6)


def test_infer_shape_rules() -> None:
    assert layout.infer_shape((-1, 3), 0) == (0, 3)
    with pytest.raises(layout.InvalidShapeError, match="ambiguous"):
        layout.infer_shape((0, -1), 0)
    with pytest.raises(layout.InvalidShapeError, match="only one size may be -1"):
        layout.infer_shape((-1, -1), 4)
    with pytest.raises(layout.InvalidShapeError, match="size -2 of axis 0 is negative"):
        layout.infer_shape((-2, 2), 4)


# -- the Layout value: each method is the pure function of the same name -----------------------


def test_layout_methods_are_the_pure_functions() -> None:
    grid = layout.Layout((2, 3, 4), (12, 4, 1), 5)
    assert grid.rank == grid.ndim == 3 and grid.size == 24 and not grid.is_empty
    assert grid.reshape([6, 4]) == layout.Layout(
        *layout.plan_reshape(grid.shape, grid.strides, [6, 4]), 5
    )
    assert grid.permute([2, 0, 1]) == layout.Layout((4, 2, 3), (1, 12, 4), 5)
    assert grid.swap_axes(0, -1) == layout.Layout((4, 3, 2), (1, 4, 12), 5)
    assert grid.reversed_axes() == grid.swap_axes(0, 2)
    assert grid.slice(1, 1, 3) == layout.Layout((2, 2, 4), (12, 4, 1), 9)
    assert grid.flip(2) == layout.Layout((2, 3, 4), (12, 4, -1), 8)
    assert grid.merge(0, 1) == layout.Layout((6, 4), (4, 1), 5)
    assert grid.split(2, [2, -1]) == layout.Layout((2, 3, 2, 2), (12, 4, 2, 1), 5)
    assert grid.expand([5, 2, 3, 4]) == layout.Layout((5, 2, 3, 4), (0, 12, 4, 1), 5)
    assert grid.unsqueeze(0).squeeze(0) == grid
    assert grid.index((1, slice(None), -1)) == layout.Layout((3,), (4,), 5 + 12 + 3)
    assert layout.Layout((3, 3), (3, 1), 0).diagonal([(0, 1)]) == layout.Layout((3,), (4,), 0)
    assert grid.coalesce() == layout.Layout((24,), (1,), 5)
    assert grid.is_contiguous() and grid.permute([1, 0, 2]).can_view_as_contiguous()
    assert grid.offset_bounds() == (5, 28)
    assert grid.storage_offset([1, 2, 3]) == 5 + 12 + 8 + 3
    assert layout.zero_unused_strides((1, 3), (99, 1)) == (0, 1)
    assert str(grid) == "shape (2, 3, 4), strides (12, 4, 1), offset 5"


def test_layout_checked_and_row_major_validate_their_input() -> None:
    assert layout.Layout.row_major([2, 3]) == layout.Layout((2, 3), (3, 1), 0)
    assert layout.Layout.checked([2, 2], [3, 1], 1, 6) == layout.Layout((2, 2), (3, 1), 1)
    with pytest.raises(InvalidLayoutError, match="maximum offset < storage length"):
        layout.Layout.checked([2, 3], [3, 1], 1, 6)
    with pytest.raises(InvalidLayoutError, match="integer metadata"):
        layout.Layout.checked([2.5], [1], 0, 6)
    with pytest.raises(InvalidLayoutError, match="minimum offset >= 0"):
        layout.Layout((3,), (-1,), 1).validate(6)
    with pytest.raises(NonContiguousReshapeError):
        layout.Layout((2, 3), (1, 2), 0).reshape([6])
    with pytest.raises(InvalidAxisRangeError):
        layout.Layout((2, 3), (3, 1), 0).merge(1, 0)


def test_a_layout_made_from_lists_equals_one_made_from_tuples() -> None:
    made = layout.Layout([2, 3], [3, 1], 0)  # type: ignore[arg-type]
    assert made == layout.Layout((2, 3), (3, 1), 0)
    assert hash(made) == hash(layout.Layout((2, 3), (3, 1), 0))


@pytest.mark.parametrize(
    ("shape", "strides", "expected"),
    [
        ((2, 3), (3, 1), True),  # row-major
        ((3, 2), (1, 3), True),  # its transpose
        ((3, 2), (-1, 6), True),  # flipped and stepped
        ((3, 3), (0, 1), False),  # a broadcast row: every row is the same offsets
        ((3, 3), (1, 1), False),  # overlapping windows
        ((1, 4), (0, 1), True),  # a size-1 axis never moves, whatever its stride
        ((0, 3), (0, 0), True),  # nothing to write
        ((3, 3), (3, 2), True),  # interleaved (0, 2, 4, 3, 5, 7, 6, 8, 10), yet one-to-one
        ((2, 3), (2, 1), False),  # interleaved and meeting: [0, 2] and [1, 0] reach 2
    ],
)
def test_a_layout_can_be_written_through_when_no_two_coordinates_meet(
    shape, strides, expected: bool
) -> None:
    overlap = layout.Layout(shape, strides).overlapping_coordinates()
    assert (overlap is None) is expected
    if overlap is not None:
        first, second = overlap
        assert first != second
        assert layout.storage_offset(shape, strides, 0, first) == layout.storage_offset(
            shape, strides, 0, second
        )
