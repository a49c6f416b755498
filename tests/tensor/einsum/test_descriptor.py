"""TensorDescriptor: an operand's layout without its data, with exact fields."""

from __future__ import annotations

import re

import numpy as np
import pytest

from llmfs.tensor import (
    TensorDescriptor,
    TensorError,
)
from llmfs.tensor.einsum import DescriptorError


def test_descriptor_checks() -> None:
    with pytest.raises(TensorError, match="one entry per axis"):
        TensorDescriptor((2, 3), (1,))
    assert TensorDescriptor((2, 3)).strides == (3, 1)


@pytest.mark.parametrize(
    ("strides", "expected"),
    [
        ([1.7], "entry 0 must be an integer (a number of elements), not float 1.7"),
        (["a"], "entry 0 must be an integer (a number of elements), not str 'a'"),
        ([True], "entry 0 must be an integer, not a bool"),
        (3, "must be a sequence of integers, got 3"),
        ("1", "must be a sequence of integers, got '1'"),
        ([1, 1], "must have one entry per axis (1), but has 2"),
    ],
)
def test_descriptor_strides_must_be_exact_integers(strides, expected: str) -> None:
    # 1.7 must not become a stride of 1: a wrong layout would compute silently wrong values.
    with pytest.raises(DescriptorError, match=re.escape(expected)) as info:
        TensorDescriptor([2], strides)
    assert info.value.field == "strides" and info.value.value == strides
    assert "TensorDescriptor's strides" in str(info.value)
    assert isinstance(info.value, TensorError)


def test_descriptor_strides_accept_numpy_integers() -> None:
    assert TensorDescriptor([2, 3], [np.int64(1), np.int32(2)]).strides == (1, 2)


@pytest.mark.parametrize("dtype", ["int8", "nope", {"a": 1}, "f4,f4", 3])
def test_descriptor_dtype_must_be_a_supported_name(dtype) -> None:
    with pytest.raises(TensorError, match="TensorDescriptor's dtype"):
        TensorDescriptor([2], dtype=dtype)


@pytest.mark.parametrize("shape", [[2.5], ["a"], [True], [-1]])
def test_descriptor_shape_sizes_must_be_integers_at_least_0(shape) -> None:
    with pytest.raises(TensorError, match="invalid shape"):
        TensorDescriptor(shape)
