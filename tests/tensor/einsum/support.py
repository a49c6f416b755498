"""Helpers shared by the einsum tests."""

from __future__ import annotations

import numpy as np
import pytest

from llmfs.tensor import EinsumError, Tensor, TensorError, einsum


def rand(*shape: int, dtype: str = "float64", seed: int = 0) -> Tensor:
    values = np.random.default_rng(seed).standard_normal(shape)
    return Tensor.from_numpy(values, dtype=dtype)


def check(expression: str, *operands: Tensor) -> Tensor:
    """Our einsum equals NumPy's, shape and values."""
    got = einsum(expression, *operands)
    want = np.einsum(expression, *(o.to_numpy() for o in operands))
    assert got.shape == want.shape
    np.testing.assert_allclose(got.to_numpy(), want, rtol=1e-12, atol=1e-12)
    return got


def error_of(expression: str, *operands: object) -> EinsumError:
    with pytest.raises(EinsumError) as info:
        einsum(expression, *operands)
    assert isinstance(info.value, TensorError)
    return info.value
