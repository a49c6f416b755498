"""Every error class is raised by a real request, with its numbers and a plain-words message."""

from __future__ import annotations

import re

import pytest

import llmfs.tensor as lt
from llmfs.tensor import Tensor, TensorError


@pytest.fixture
def view() -> lt.TensorView:
    return Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22]).view()


def test_hierarchy() -> None:
    assert issubclass(TensorError, ValueError)
    assert issubclass(lt.TensorViewError, TensorError)
    assert issubclass(lt.AxisOutOfRangeError, IndexError)
    assert issubclass(lt.IndexOutOfBoundsError, IndexError)
    assert issubclass(lt.ReshapeElementCountMismatchError, lt.ElementCountMismatchError)
    for name in lt.__all__:
        item = getattr(lt, name)
        if isinstance(item, type) and issubclass(item, Exception):
            assert issubclass(item, TensorError), name
            assert isinstance(item.condition, str) and item.condition, name


def raised(fn) -> TensorError:
    with pytest.raises(TensorError) as info:
        fn()
    return info.value


def test_shape_overflow() -> None:
    # A zero early in the shape must not hide the overflow of the later sizes.
    error = raised(lambda: Tensor.zeros([0, 2**40, 2**40]))
    assert isinstance(error, lt.ShapeOverflowError)
    assert error.shape == (0, 2**40, 2**40)
    assert "exceeds the largest signed 64-bit index" in str(error)


def test_element_count_mismatch() -> None:
    error = raised(lambda: Tensor.from_vec([2, 3], [1, 2, 3]))
    assert type(error) is lt.ElementCountMismatchError
    assert (error.expected, error.actual) == (6, 3)
    assert "the shape holds 6 values but 3 values were given" in str(error)


def test_reshape_element_count_mismatch(view: lt.TensorView) -> None:
    error = raised(lambda: view.reshape([4, 2]))
    assert isinstance(error, lt.ReshapeElementCountMismatchError)
    assert (error.current, error.requested) == (6, 8)


def test_non_contiguous_reshape(view: lt.TensorView) -> None:
    error = raised(lambda: view.transpose(0, 1).reshape([6]))
    assert isinstance(error, lt.NonContiguousReshapeError)
    assert str(error) == (
        "cannot reshape shape [3, 2] with strides [1, 3] to [6] without copying: axes 0 and 1 "
        "(sizes 3, 2; strides 1, 3) are not adjacent in storage: 1 != 2*3. Call materialize() "
        "first to get a contiguous copy, then reshape that"
    )


def test_rank_mismatch(view: lt.TensorView) -> None:
    error = raised(lambda: view.get([1]))
    assert isinstance(error, lt.RankMismatchError)
    assert (error.expected, error.actual) == (2, 1)
    assert "must be 2, got 1" in str(error)


def test_axis_out_of_range(view: lt.TensorView) -> None:
    error = raised(lambda: view.transpose(0, 2))
    assert isinstance(error, lt.AxisOutOfRangeError)
    assert (error.axis, error.rank) == (2, 2)
    assert str(error) == "axis 2 is out of range for rank 2 (valid axes: [-2, 2))"


def test_duplicate_axis(view: lt.TensorView) -> None:
    error = raised(lambda: view.permute([1, 1]))
    assert isinstance(error, lt.DuplicateAxisError)
    assert str(error) == "axis 1 appears more than once in [1, 1]"


def test_permutation_length_mismatch(view: lt.TensorView) -> None:
    error = raised(lambda: view.permute([0]))
    assert isinstance(error, lt.PermutationLengthMismatchError)
    assert "rank 2 but the permutation lists 1 axes" in str(error)


def test_slice_errors(view: lt.TensorView) -> None:
    error = raised(lambda: view.slice(1, 2, 1))
    assert isinstance(error, lt.SliceStartAfterEndError)
    assert "start 2 > stop 1" in str(error)
    error = raised(lambda: view.slice(1, 1, 4))
    assert isinstance(error, lt.SliceEndOutOfBoundsError)
    assert (error.axis, error.stop, error.size) == (1, 4, 3)
    error = raised(lambda: view.slice(1, -1, 2))
    assert isinstance(error, lt.IndexOutOfBoundsError)
    assert "slice start -1 is out of bounds for axis 1" in str(error)
    error = raised(lambda: view.slice(1, 0, 2, 0))
    assert isinstance(error, lt.InvalidStepError)
    assert "step must be >= 1" in str(error)


def test_index_out_of_bounds(view: lt.TensorView) -> None:
    error = raised(lambda: view.get([0, 3]))
    assert isinstance(error, lt.IndexOutOfBoundsError)
    assert str(error) == "index 3 is out of bounds for axis 1 of size 3 (valid: 0 <= index < 3)"
    assert isinstance(raised(lambda: view[2]), lt.IndexOutOfBoundsError)
    assert isinstance(raised(lambda: view.get([-1, 0])), lt.IndexOutOfBoundsError)


def test_stale_view() -> None:
    tensor = Tensor.arange(4)
    view = tensor.view()
    tensor.as_mut_slice()[0] = 5.0
    error = raised(view.tolist)
    assert isinstance(error, lt.StaleViewError)
    assert "the owner was mutated after this view was made" in str(error)
    assert "tensor.view()" in str(error) and "materialize()" in str(error)


def test_broadcast_error(view: lt.TensorView) -> None:
    error = raised(lambda: view.expand([2, 4]))
    assert isinstance(error, lt.BroadcastError)
    assert "axis 1: source size 3 cannot expand to 4" in str(error)
    error = raised(lambda: lt.broadcast_shapes((2, 3), (4, 3)))
    assert "cannot broadcast shape [2, 3] with [4, 3]: axis 0: sizes 2 and 4" in str(error)


def test_invalid_layout() -> None:
    error = raised(lambda: lt.as_strided(Tensor.zeros([6]), [2, 3], [3, 2], 0))
    assert isinstance(error, lt.InvalidLayoutError)
    assert "largest reachable offset is 7" in str(error)


def test_invalid_shape_and_squeeze_and_ranges(view: lt.TensorView) -> None:
    assert isinstance(raised(lambda: Tensor.zeros([2, -1])), lt.InvalidShapeError)
    assert isinstance(raised(lambda: Tensor.zeros([2.5])), lt.InvalidShapeError)
    error = raised(lambda: view.squeeze(0))
    assert isinstance(error, lt.SqueezeError)
    assert "its size is 2" in str(error)
    assert isinstance(raised(lambda: view.merge(1, 0)), lt.InvalidAxisRangeError)
    assert isinstance(raised(lambda: view[0, 0, 0]), lt.InvalidIndexError)
    assert isinstance(raised(lambda: view["a"]), lt.InvalidIndexError)


def test_dtype_error() -> None:
    error = raised(lambda: Tensor.zeros([2], dtype="int8"))
    assert isinstance(error, lt.DTypeError)
    assert re.search(
        r"unsupported dtype int8 .* supported: bool, int32, int64, float16, float32, float64",
        str(error),
    )
    assert isinstance(raised(lambda: Tensor.from_vec([1], ["x"])), TensorError)


def test_closed_mutation() -> None:
    tensor = Tensor.zeros([2])
    with tensor.mutate() as buffer:
        buffer[0] = 1.0
    error = raised(lambda: buffer.__setitem__(1, 2.0))
    assert isinstance(error, lt.ClosedMutationError)
    assert "window has closed" in str(error)


def test_constructors_refuse_non_numbers() -> None:
    assert "real numbers" in str(raised(lambda: Tensor.full([2], "x")))
    assert "one real number" in str(raised(lambda: Tensor.full([2], [1.0, 2.0])))
    assert "could not be read as numbers" in str(raised(lambda: Tensor.from_numpy([[1, 2], [3]])))
    assert "flat sequence" in str(raised(lambda: Tensor.from_vec([2], 5.0)))
