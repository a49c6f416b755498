"""The registry backends: ``metal-emulator`` runs llmfs ops on the kernels and agrees with the
numpy backend; ``metal`` is refused off macOS with the reason and the available names."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib

from llmfs.tensor import ops as T
from llmfs.tensor.backends import (
    available_backends,
    get_backend,
    unavailable_backends,
    use_backend,
)
from llmfs.tensor.backends.metal import (
    MetalDTypeError,
    emulator_available,
    gpu_ops,
    is_available,
    numpy_fallbacks,
)
from llmfs.tensor.backends.metal.backend import KERNEL_OPS
from llmfs.tensor.dtypes import SUPPORTED_DTYPES
from llmfs.tensor.errors import BackendUnavailableError
from llmfs.tensor.tensor import Tensor

needs_emulator = pytest.mark.skipif(
    not emulator_available(), reason="the Metal emulator needs clang++"
)
DTYPES = ("float32", "float16")


def tensor(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> Tensor:
    return Tensor.from_numpy(rng.uniform(-2, 2, shape).astype(dtype))


def both(function, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(metal-emulator result, numpy result) of ``function()`` as float64 arrays."""
    with use_backend("metal-emulator"):
        got = function()
    with use_backend("numpy"):
        want = function()
    assert got.dtype == want.dtype == np.dtype(dtype)
    assert got.shape == want.shape
    return got.to_numpy().astype(np.float64), want.to_numpy().astype(np.float64)


def close(dtype: str) -> dict[str, float]:
    return {"rtol": 2e-3, "atol": 2e-3} if dtype == "float16" else {"rtol": 1e-5, "atol": 1e-6}


@needs_emulator
def test_the_emulator_backend_is_registered_and_declares_its_dtypes() -> None:
    assert "metal-emulator" in available_backends()
    backend = get_backend("metal-emulator")
    kernel_dtypes = ("float16", "float32", "int32", "bool")
    assert backend.dtypes == tuple(d for d in kernel_dtypes if d in SUPPORTED_DTYPES)
    assert {"float16", "float32"} <= set(backend.dtypes)
    assert backend.fallback == "numpy"


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the refusal off macOS")
def test_metal_off_macos_is_a_clear_backend_unavailable_error() -> None:
    assert not is_available()
    assert "metal" not in available_backends()
    assert "macOS" in unavailable_backends()["metal"]
    with pytest.raises(BackendUnavailableError, match=r"Metal needs macOS.*available: .*numpy"):
        get_backend("metal")
    with pytest.raises(BackendUnavailableError):
        with use_backend("metal"):
            pass


def test_the_metal_extra_is_darwin_only() -> None:
    pyproject = Path(__file__).resolve().parents[4] / "pyproject.toml"
    extra = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["metal"]
    assert extra and all("sys_platform == 'darwin'" in requirement for requirement in extra)


def test_kernel_ops_and_fallbacks_are_listed() -> None:
    assert set(KERNEL_OPS["unary"]) == {
        "neg", "abs", "sqrt", "exp", "log", "sin", "cos", "tanh", "sigmoid", "relu", "reciprocal"
    }  # fmt: skip
    assert set(KERNEL_OPS["reduce"]) == {"sum", "max"}
    assert {"add", "matmul", "sum", "materialize"} <= set(gpu_ops())
    fallbacks = numpy_fallbacks()
    assert {"reduce prod", "reduce min", "reduce mean"} <= set(fallbacks)


@needs_emulator
@pytest.mark.parametrize("dtype", DTYPES)
def test_elementwise_ops_agree_with_numpy_on_views(dtype: str) -> None:
    rng = np.random.default_rng(5)
    x = tensor(rng, (3, 4, 5), dtype)
    view = x.view().permute([2, 0, 1]).flip(1).slice(2, 0, 4, 2)
    row = tensor(rng, (3, 1), dtype).view().flip(0)
    for name in ("neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu"):
        got, want = both(lambda n=name: getattr(T, n)(view), dtype)
        np.testing.assert_allclose(got, want, **close(dtype))
    for name in ("add", "sub", "mul", "div", "minimum", "maximum"):
        got, want = both(lambda n=name: getattr(T, n)(view, row), dtype)
        np.testing.assert_allclose(got, want, **close(dtype))
    got, want = both(lambda: T.scale(view, 0.25), dtype)
    np.testing.assert_allclose(got, want, **close(dtype))
    got, want = both(lambda: T.add(2.0, view), dtype)
    np.testing.assert_allclose(got, want, **close(dtype))


@needs_emulator
@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_and_matmul_agree_with_numpy(dtype: str) -> None:
    rng = np.random.default_rng(7)
    x = tensor(rng, (4, 3, 6), dtype).view().transpose(0, 2)
    for op in ("sum", "max", "mean", "prod", "min"):
        for axis in (0, (0, 2), None):
            got, want = both(lambda o=op, a=axis: getattr(T, o)(x, axis=a, keepdims=True), dtype)
            np.testing.assert_allclose(got, want, **close(dtype))
    a = tensor(rng, (2, 5, 3), dtype).view().transpose(1, 2)
    b = tensor(rng, (5, 4), dtype).view().flip(0)
    got, want = both(lambda: T.matmul(a, b), dtype)
    np.testing.assert_allclose(got, want, rtol=5e-3 if dtype == "float16" else 1e-5, atol=5e-3)


@needs_emulator
def test_mixed_or_changed_dtypes_run_on_numpy_with_numpys_result() -> None:
    rng = np.random.default_rng(9)
    half = tensor(rng, (3, 4), "float16")
    single = tensor(rng, (3, 4), "float32")
    got, want = both(lambda: T.add(half, single), "float32")
    np.testing.assert_array_equal(got, want)
    got, want = both(lambda: T.exp(half, dtype="float32"), "float32")
    np.testing.assert_array_equal(got, want)


@needs_emulator
def test_float64_is_refused_not_downcast() -> None:
    x = Tensor.from_numpy(np.ones((2, 2)))
    with use_backend("metal-emulator"):
        for call in (lambda: T.exp(x), lambda: T.sum(x), lambda: T.matmul(x, x)):
            with pytest.raises(MetalDTypeError, match="Convert first"):
                call()


@needs_emulator
def test_int32_and_bool_run_where_kernels_exist_and_64_bit_dtypes_are_refused() -> None:
    backend = get_backend("metal-emulator")
    int32, boolean = np.dtype(np.int32), np.dtype(np.bool_)
    assert backend.supports("copy", None, int32) and backend.supports("copy", None, boolean)
    assert backend.supports("binary", "add", int32) and backend.supports("unary", "neg", int32)
    assert not backend.supports("unary", "exp", int32)  # numpy computes it in float64
    assert not backend.supports("binary", "div", int32)
    assert not backend.supports("binary", "add", boolean)
    assert not backend.supports("reduce", "sum", int32)
    assert not backend.supports("matmul", None, int32)
    for name in ("int64", "float64"):
        assert backend.supports("copy", None, np.dtype(name))  # refused here, by name
        with pytest.raises(MetalDTypeError, match=f"does not take {name}"):
            backend._refuse(np.dtype(name))


@needs_emulator
def test_int32_tensors_on_the_emulator_agree_with_numpy() -> None:
    assert Tensor.from_numpy(np.arange(3, dtype=np.int32)).dtype == np.int32
    values = np.arange(-6, 6, dtype=np.int32).reshape(3, 4)
    a = Tensor.from_numpy(values)
    b = Tensor.from_numpy(np.array([2**31 - 1, 1, -1, 3], dtype=np.int32))
    for function in (lambda: T.add(a, b), lambda: T.mul(a, b), lambda: T.neg(a)):
        with use_backend("metal-emulator"):
            got = function().to_numpy()
        with use_backend("numpy"):
            want = function().to_numpy()
        assert got.dtype == want.dtype == np.int32
        np.testing.assert_array_equal(got, want)
