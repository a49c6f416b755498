"""Odd input to the public API is refused with a clear TensorError, never a bare Python or NumPy
error and never a silently wrong value."""

from __future__ import annotations

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.tensor import Tensor, TensorError


@pytest.fixture
def view() -> lt.TensorView:
    return Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22]).view()


def refused(fn, error: type[TensorError] = TensorError, match: str | None = None) -> TensorError:
    with pytest.raises(error, match=match) as info:
        fn()
    return info.value


def test_python_slices_with_bad_parts(view: lt.TensorView) -> None:
    refused(lambda: view[::0], lt.InvalidStepError, "step 0")
    refused(lambda: view[1:2.5], lt.InvalidIndexError, "slice stop must be an integer or None")
    refused(lambda: view[True], lt.InvalidIndexError, "boolean")
    assert view[np.int64(1), :: np.int64(-1)].tolist() == [22, 21, 20]


def test_strict_slice_bounds_must_be_single_integers(view: lt.TensorView) -> None:
    refused(lambda: view.slice(1, [], 2), lt.InvalidArgumentError, "slice start must be an integer")
    refused(lambda: view.slice(1, [1, 2], 3), lt.InvalidArgumentError, r"got \[1, 2\]")
    refused(lambda: view.slice(1, True, 3), lt.InvalidArgumentError, "slice start")
    assert view.slice(1, np.int64(1), np.array(3)).shape == (2, 2)


def test_axes_given_as_numpy_scalars(view: lt.TensorView) -> None:
    assert view.transpose(np.int64(0), np.array(1)).shape == (3, 2)
    assert view.squeeze(None).shape == (2, 3)


def test_unsqueeze_positions(view: lt.TensorView) -> None:
    assert view.unsqueeze(-3).shape == (1, 2, 3)
    assert view.unsqueeze(2).shape == (2, 3, 1)
    error = refused(lambda: view.unsqueeze(-4), lt.AxisOutOfRangeError)
    assert str(error) == (
        "position -4 is out of range for inserting an axis into rank 2 (valid positions: [-3, 2])"
    )


def test_public_layout_functions_check_their_input() -> None:
    refused(lambda: lt.is_contiguous([2, 3], [1]), lt.RankMismatchError, "must be 2, got 1")
    refused(lambda: lt.can_view_as_contiguous([2, 3], [1]), lt.RankMismatchError)
    refused(lambda: lt.is_contiguous([-2], [1]), lt.InvalidShapeError, "negative")
    refused(lambda: lt.is_contiguous(None, None), lt.InvalidShapeError)
    refused(lambda: lt.row_major_strides([-2, 3]), lt.InvalidShapeError, "negative")
    refused(lambda: lt.row_major_strides([1.5]), lt.InvalidShapeError, "must be an integer")
    refused(lambda: lt.row_major_strides(None), lt.InvalidShapeError)
    refused(lambda: lt.broadcast_shapes(None), lt.InvalidShapeError)
    refused(lambda: lt.can_view_as_contiguous_all([None]), TensorError, "item 0 is NoneType None")
    refused(lambda: lt.can_view_as_contiguous_all([([1], [1]), "x"]), TensorError, "item 1 is str")
    # NumPy strides count bytes: read as elements they would silently give a wrong answer.
    refused(lambda: lt.can_view_as_contiguous_all([np.zeros((2, 3))]), TensorError, "count bytes")
    assert lt.row_major_strides(np.array([2, 3])) == (3, 1)


def test_as_strided_reads_one_shot_iterables_once() -> None:
    owner = Tensor.arange(3)
    view = lt.as_strided(owner, (size for size in [3]), iter([1]), 0)
    assert (view.shape, view.strides) == ((3,), (1,))
    refused(lambda: lt.as_strided(owner, [3], [1.5], 0), lt.InvalidLayoutError, "stride")


def test_huge_strides_on_size_one_axes_are_harmless() -> None:
    owner = Tensor.from_vec([3], [1, 2, 3], dtype="float32")
    view = lt.as_strided(owner, [1, 3], [2**61, 1], 0)
    assert view.is_contiguous()
    assert view.tolist() == [[1.0, 2.0, 3.0]]
    assert view.numpy_view().tolist() == [[1.0, 2.0, 3.0]]
    assert lt.exp(view).shape == (1, 3)
    refused(lambda: lt.as_strided(owner, [1, 3], [2**63, 1], 0), lt.InvalidLayoutError, "64 bits")


def test_storage_handles_refuse_bad_keys_and_nested_values() -> None:
    handle = Tensor.arange(3).as_mut_slice()
    refused(lambda: handle.__setitem__(slice(None, None, 0), 1.0), lt.InvalidStepError)
    refused(lambda: handle.__setitem__(slice(0, 1.5), 1.0), lt.InvalidArgumentError)
    refused(lambda: handle.__setitem__(slice(None), [[1, 2, 3]]), TensorError, "flat sequence")


def test_read_only_slice_cannot_be_made_writable() -> None:
    tensor = Tensor.arange(3)
    array = tensor.as_slice()
    with pytest.raises(ValueError):
        array.setflags(write=True)
    assert array.tolist() == [0.0, 1.0, 2.0]


def test_numpy_export_is_a_copy_never_a_writable_alias(view: lt.TensorView) -> None:
    tensor = view.owner
    assert np.asarray(tensor).tolist() == tensor.tolist()
    assert np.asarray(view.transpose(0, 1)).shape == (3, 2)
    refused(lambda: np.asarray(tensor, copy=False), TensorError, "only as a copy")
    refused(lambda: np.asarray(view, copy=False), TensorError, "only as a copy")


def test_storage_dtypes_are_native_byte_order() -> None:
    assert Tensor.from_vec([2], [1, 2], dtype=">f8").dtype == np.dtype("float64")
    assert Tensor.from_numpy(np.array([1.0, 2.0], dtype=">f4")).dtype == np.dtype("float32")


def test_tensor_shared_storage_shortcuts(view: lt.TensorView) -> None:
    tensor = view.owner
    assert tensor.shares_storage(view[0])
    assert not tensor.may_overlap(tensor.view()[:, 3:])
    assert not tensor.shares_storage(view.materialize())
