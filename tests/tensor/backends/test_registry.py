"""The backend registry: listing, choosing, switching, refusing, and falling back."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import ClassVar

import numpy as np
import pytest

import llmfs.tensor.backends as registry
from llmfs.tensor import (
    SUPPORTED_DTYPES,
    BackendUnavailableError,
    Tensor,
    TensorError,
    UnsupportedOperationError,
    add,
    available_backends,
    get_backend,
    register_backend,
    set_default_backend,
    use_backend,
)
from llmfs.tensor.backends import Backend, active_backend_name, unavailable_backends
from llmfs.tensor.backends.numpy_backend import NumpyBackend


@pytest.fixture
def scratch_names() -> Iterator[list[str]]:
    """Names registered by a test are removed afterwards, so tests stay independent."""
    names: list[str] = []
    yield names
    for name in names:
        registry._loaders.pop(name, None)
        registry._loaded.pop(name, None)
        registry._refused.pop(name, None)


def test_reference_and_numpy_are_always_available_and_numpy_is_the_default() -> None:
    names = available_backends()
    assert names[:2] == ("reference", "numpy")
    assert registry.default_backend() == "numpy"
    assert get_backend().name == "numpy"
    assert isinstance(get_backend("reference"), Backend)


def test_the_same_name_gives_the_same_instance() -> None:
    assert get_backend("numpy") is get_backend("numpy")


def test_an_unknown_name_lists_the_available_ones() -> None:
    with pytest.raises(BackendUnavailableError) as info:
        get_backend("cuda")
    message = str(info.value)
    assert "'cuda'" in message and "no backend has that name" in message
    for name in available_backends():
        assert name in message
    assert info.value.available == available_backends()
    assert isinstance(info.value, TensorError)


def test_an_unavailable_backend_says_why(scratch_names: list[str]) -> None:
    def refuse() -> Backend:
        raise BackendUnavailableError("gpu-x", (), "no gpu-x device on this machine")

    register_backend("gpu-x", refuse)
    scratch_names.append("gpu-x")
    assert "gpu-x" not in available_backends()
    assert unavailable_backends()["gpu-x"] == "no gpu-x device on this machine"
    with pytest.raises(BackendUnavailableError, match="no gpu-x device on this machine"):
        get_backend("gpu-x")
    with pytest.raises(BackendUnavailableError, match="available: reference, numpy"):
        use_backend("gpu-x").__enter__()


def test_a_loader_that_cannot_import_is_unavailable(scratch_names: list[str]) -> None:
    def missing() -> Backend:
        raise ImportError("No module named 'metal_driver'")

    register_backend("needs-driver", missing)
    scratch_names.append("needs-driver")
    assert "needs-driver" not in available_backends()
    assert "metal_driver" in unavailable_backends()["needs-driver"]


def test_a_loader_that_fails_in_its_own_way_is_unavailable_naming_the_cause(
    scratch_names: list[str],
) -> None:
    calls: list[int] = []

    def crash() -> Backend:
        calls.append(1)
        raise OSError("MTLCreateSystemDefaultDevice returned nil")

    register_backend("crashes", crash)
    scratch_names.append("crashes")
    assert "crashes" not in available_backends()
    reason = "its loader raised OSError: MTLCreateSystemDefaultDevice returned nil"
    assert unavailable_backends()["crashes"] == reason
    with pytest.raises(BackendUnavailableError, match="backend 'crashes' is not available: its"):
        use_backend("crashes").__enter__()
    assert calls == [1]  # the refusal is kept, like any other: the loader ran once
    assert get_backend().name == "numpy"  # nothing else changed


def test_registering_twice_needs_replace(scratch_names: list[str]) -> None:
    register_backend("twin", NumpyBackend)
    scratch_names.append("twin")
    with pytest.raises(TensorError, match="already registered"):
        register_backend("twin", NumpyBackend)
    register_backend("twin", NumpyBackend, replace=True)
    assert "twin" in available_backends()


@pytest.mark.parametrize("returned", [object(), None, 3, NumpyBackend, "numpy"])
def test_a_loader_must_return_a_backend_and_one_that_does_not_poisons_nothing(
    scratch_names: list[str], returned: object
) -> None:
    # The rule: any failure of one loader makes that backend alone unavailable, so listing the
    # backends (which loads them all, and is shown in every "not available" message) still works.
    calls: list[int] = []

    def loader() -> Backend:
        calls.append(1)
        return returned  # type: ignore[return-value]

    register_backend("not-a-backend", loader)
    scratch_names.append("not-a-backend")
    for _ in range(2):
        with pytest.raises(BackendUnavailableError, match=r"its loader returned .*, not a Backend"):
            get_backend("not-a-backend")
        assert "not-a-backend" not in available_backends()
        assert "not a Backend" in unavailable_backends()["not-a-backend"]
        with pytest.raises(BackendUnavailableError, match=r"no backend has that name \(avail"):
            get_backend("no-such-backend")  # its message lists the available backends
    assert calls == [1]
    assert get_backend().name == "numpy" and add(Tensor.arange(2), 1).tolist() == [1, 2]


def test_use_backend_switches_for_the_block_and_restores() -> None:
    assert active_backend_name() == "numpy"
    with use_backend("reference") as backend:
        assert backend.name == "reference"
        assert get_backend().name == "reference"
        with use_backend("numpy"):
            assert get_backend().name == "numpy"
        assert get_backend().name == "reference"
    assert get_backend().name == "numpy"


def test_use_backend_restores_after_an_error() -> None:
    with pytest.raises(ZeroDivisionError), use_backend("reference"):
        1 / 0  # noqa: B018
    assert get_backend().name == "numpy"


def test_use_backend_is_per_thread() -> None:
    seen: list[str] = []
    with use_backend("reference"):
        thread = threading.Thread(target=lambda: seen.append(get_backend().name))
        thread.start()
        thread.join()
    assert seen == ["numpy"]


def test_set_default_backend_changes_the_default_and_refuses_unknown_names() -> None:
    try:
        set_default_backend("reference")
        assert get_backend().name == "reference"
        with pytest.raises(BackendUnavailableError):
            set_default_backend("nope")
        assert registry.default_backend() == "reference"
    finally:
        set_default_backend("numpy")


class _OnlyAdd(NumpyBackend):
    """A backend that computes ``add`` on float32 only; everything else goes to its fallback."""

    name = "only-add"
    dtypes = ("float32",)
    fallback = "numpy"
    calls: ClassVar[list[str]] = []

    def supports(self, primitive: str, op: str | None, dtype: np.dtype) -> bool:
        return primitive == "binary" and op == "add" and np.dtype(dtype) == np.float32

    def binary(self, op, a, b, *, dtype, compute):  # type: ignore[no-untyped-def]
        self.calls.append(op)
        return super().binary(op, a, b, dtype=dtype, compute=compute)


def test_unsupported_ops_fall_back_explicitly(scratch_names: list[str]) -> None:
    register_backend("only-add", _OnlyAdd)
    scratch_names.append("only-add")
    _OnlyAdd.calls.clear()
    x32 = Tensor.from_vec([2], [1.0, 2.0], dtype="float32")
    x64 = Tensor.from_vec([2], [1.0, 2.0], dtype="float64")
    with use_backend("only-add"):
        assert add(x32, x32).tolist() == [2.0, 4.0]
        assert _OnlyAdd.calls == ["add"]
        assert (x32 * x32).tolist() == [1.0, 4.0]  # mul: on numpy
        assert add(x64, x64).tolist() == [2.0, 4.0]  # float64: on numpy
    assert _OnlyAdd.calls == ["add"]


class _NoFallback(_OnlyAdd):
    name = "no-fallback"
    fallback = None


def test_without_a_fallback_an_unsupported_op_is_an_error(scratch_names: list[str]) -> None:
    register_backend("no-fallback", _NoFallback)
    scratch_names.append("no-fallback")
    x = Tensor.from_vec([2], [1.0, 2.0], dtype="float32")
    with use_backend("no-fallback"), pytest.raises(UnsupportedOperationError) as info:
        x * x
    assert "'no-fallback' does not support binary mul on float32" in str(info.value)


def test_every_available_backend_declares_supported_dtypes() -> None:
    for name in available_backends():
        backend = get_backend(name)
        assert backend.name == name
        assert backend.dtypes
        assert set(backend.dtypes) <= set(SUPPORTED_DTYPES)


@pytest.mark.parametrize("name", [None, ["numpy"], 3, b"numpy"])
def test_a_default_that_is_not_a_string_is_refused_and_the_old_default_stays(name) -> None:
    with pytest.raises(BackendUnavailableError) as info:
        set_default_backend(name)
    message = str(info.value)
    assert "a backend name must be a string" in message and type(name).__name__ in message
    assert "available: reference, numpy" in message
    assert registry.default_backend() == "numpy"
    # Every later op still runs on the old default.
    assert add(Tensor.from_vec([2], [1.0, 2.0]), 1.0).tolist() == [2.0, 3.0]
    assert active_backend_name() == "numpy"


@pytest.mark.parametrize("name", [["numpy"], ("numpy",), {"numpy": 1}, 1.5])
def test_get_backend_refuses_a_name_that_is_not_a_string(name) -> None:
    with pytest.raises(BackendUnavailableError, match="must be a string such as 'numpy'") as info:
        get_backend(name)
    assert info.value.available == available_backends()


def test_use_backend_refuses_a_name_that_is_not_a_string() -> None:
    with pytest.raises(BackendUnavailableError, match="got list"):
        with use_backend(["reference"]):
            pass
    assert active_backend_name() == "numpy"
