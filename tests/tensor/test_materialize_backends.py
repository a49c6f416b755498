"""Every copying read (``materialize``, ``to_numpy``, ``tolist``, ``np.asarray``) runs on the
active backend's copy, with NumPy's values on every backend for every dtype it stores."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from llmfs.tensor import Tensor, copying_transpose, row_major_strides
from llmfs.tensor.backends import available_backends, get_backend, use_backend

from .strategies import apply_llmfs, apply_numpy, view_chains


@pytest.mark.parametrize("backend", available_backends())
@settings(max_examples=40, deadline=None)
@given(case=view_chains(dtype="float32"))
def test_materialize_on_every_backend(backend: str, case) -> None:
    if "float32" not in get_backend(backend).dtypes:
        pytest.skip(f"{backend} does not store float32")
    tensor, ops = case
    expected = apply_numpy(tensor.as_slice(), tensor.shape, ops)
    with use_backend(backend):
        copy = apply_llmfs(tensor, ops).materialize()
    assert copy.shape == expected.shape
    assert copy.strides == row_major_strides(expected.shape)
    assert np.array_equal(copy.to_numpy(), expected)


@pytest.mark.parametrize("dtype", ["bool", "int32", "int64", "float16", "float64"])
@pytest.mark.parametrize("backend", available_backends())
@settings(max_examples=20, deadline=None)
@given(case=view_chains())
def test_every_copying_read_gives_numpys_values_on_every_backend(
    backend: str, dtype: str, case
) -> None:
    # Every backend reads out every dtype: one that does not store it hands the copy to numpy.
    tensor, ops = case
    tensor = Tensor.from_numpy(tensor.to_numpy(), dtype=dtype)
    expected = apply_numpy(tensor.as_slice(), tensor.shape, ops)
    view = apply_llmfs(tensor, ops)
    with use_backend(backend):
        array = view.to_numpy()
        listed = view.tolist()
        converted = np.asarray(view)
    for got in (array, converted):
        assert type(got) is np.ndarray and got.flags.c_contiguous and got.flags.writeable
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, expected)
        assert not np.shares_memory(got, tensor.as_slice())
    assert listed == expected.tolist()


@pytest.mark.parametrize("backend", available_backends())
def test_copying_transpose_on_every_backend(backend: str) -> None:
    dtype = "float32" if "float32" in get_backend(backend).dtypes else "float64"
    tensor = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22], dtype=dtype)
    with use_backend(backend):
        copied = copying_transpose(tensor)
    assert copied.as_slice().tolist() == [10, 20, 11, 21, 12, 22]
    assert not copied.view().shares_storage(tensor)
