"""The backend registry: which backend computes ``llmfs.tensor.ops``, and how to switch.

Backends are registered by name with a *loader*, a function that builds the backend or raises
:class:`BackendUnavailableError` (or ``ImportError``) saying why it cannot run here (no Metal
device, no C++ compiler...). Loaders run lazily, once; their result or their refusal is kept.
Built in: ``reference`` (pure Python, for reading), ``numpy`` (the default), and the Metal
backends ``metal`` and ``metal-emulator`` (their loaders import
:mod:`llmfs.tensor.backends.metal.backend` by name, on first use: it builds on this registry).

A loader that fails in any way (a missing module or class, an exception, a result that is not a
:class:`Backend`) makes only its backend unavailable, refused with a
:class:`BackendUnavailableError` whose reason names what went wrong; every other backend stays
usable, and :func:`available_backends` lists only the backends that load here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from llmfs.tensor.backends.base import (
    ALL_BINARY_OPS,
    ALL_REDUCE_OPS,
    ALL_UNARY_OPS,
    BINARY_OPS,
    COMPARISON_OPS,
    LOGICAL_OPS,
    LOGICAL_REDUCE_OPS,
    PRIMITIVES,
    REDUCE_OPS,
    UNARY_OPS,
    Backend,
)
from llmfs.tensor.errors import BackendUnavailableError, TensorError

Loader = Callable[[], Backend]

_loaders: dict[str, Loader] = {}
_loaded: dict[str, Backend] = {}
_refused: dict[str, str] = {}
_default = "numpy"
_active: ContextVar[str | None] = ContextVar("llmfs_tensor_backend", default=None)


def _from_module(module: str, attribute: str) -> Loader:
    def load() -> Backend:
        cls = getattr(importlib.import_module(module), attribute, None)
        if cls is None:
            raise ImportError(f"{module} defines no {attribute}")
        return cls()

    return load


def register_backend(name: str, loader: Loader, *, replace: bool = False) -> None:
    """Registers ``loader`` (a zero-argument callable returning a :class:`Backend`, or raising
    :class:`BackendUnavailableError`/``ImportError``; any other exception it raises is kept as
    the reason the backend is unavailable) under ``name``.

    Raises :class:`TensorError` when the name is taken, unless ``replace`` (which also forgets a
    previously loaded instance).
    """
    if not isinstance(name, str) or not name:
        raise TensorError(f"a backend name must be a non-empty string, got {name!r}")
    if name in _loaders and not replace:
        raise TensorError(f"a backend named {name!r} is already registered (pass replace=True)")
    _loaders[name] = loader
    _loaded.pop(name, None)
    _refused.pop(name, None)


def _load(name: str) -> Backend | None:
    if name in _loaded:
        return _loaded[name]
    if name in _refused:
        return None
    try:
        backend = _loaders[name]()
    except BackendUnavailableError as error:
        _refused[name] = error.reason
        return None
    except ImportError as error:
        _refused[name] = f"it could not be imported ({error})"
        return None
    except Exception as error:
        # A loader that fails in its own way (a driver error, a bug) still only makes this one
        # backend unavailable; the reason keeps the exception's type and message.
        _refused[name] = f"its loader raised {type(error).__name__}: {error}"
        return None
    if not isinstance(backend, Backend):
        # Refused like any other failed load: raising here would break every later listing
        # of the available backends, which loads them all.
        _refused[name] = f"its loader returned {type(backend).__name__}, not a Backend"
        return None
    _loaded[name] = backend
    return backend


def available_backends() -> tuple[str, ...]:
    """Names of the registered backends that can run here, in registration order."""
    return tuple(name for name in _loaders if _load(name) is not None)


def unavailable_backends() -> dict[str, str]:
    """Registered backends that cannot run here, each with the reason it gave."""
    available_backends()
    return {name: _refused[name] for name in _loaders if name in _refused}


def _check_name(name: object) -> str:
    """``name`` itself when it is a string; otherwise :class:`BackendUnavailableError` (a list, a
    backend object or ``None`` is not a name, and storing one would break every later op)."""
    if not isinstance(name, str):
        raise BackendUnavailableError(
            name,  # shown by repr, so the caller sees what was passed
            available_backends(),
            f"a backend name must be a string such as 'numpy', got {type(name).__name__}",
        )
    return name


def get_backend(name: str | None = None) -> Backend:
    """The backend called ``name`` (``None``: the active one, see :func:`use_backend`; a
    :class:`Backend` instance is returned as it is).

    Raises :class:`BackendUnavailableError` for a name that is not a string, an unknown name or
    one that cannot run here; the message lists the available names and says why this one is
    missing.
    """
    if name is None:
        name = _active.get() or _default
    if isinstance(name, Backend):
        return name
    name = _check_name(name)
    if name not in _loaders:
        raise BackendUnavailableError(str(name), available_backends(), "no backend has that name")
    backend = _load(name)
    if backend is None:
        raise BackendUnavailableError(name, available_backends(), _refused[name])
    return backend


def default_backend() -> str:
    """The process-wide default backend name (``"numpy"`` unless changed)."""
    return _default


def set_default_backend(name: str) -> None:
    """Makes ``name`` (a string) the process-wide default; raises :class:`BackendUnavailableError`
    first if it is not a string or names no backend that can run here (the old default stays)."""
    global _default
    name = _check_name(name)
    get_backend(name)
    _default = name


@contextmanager
def use_backend(name: str) -> Iterator[Backend]:
    """``with use_backend("reference"):`` runs the ops of the block on that backend (in this
    thread or task only), then restores the previous choice. Yields the backend.

    Raises :class:`BackendUnavailableError` on entry when ``name`` is not a string or cannot be
    used.
    """
    name = _check_name(name)
    backend = get_backend(name)
    token = _active.set(name)
    try:
        yield backend
    finally:
        _active.reset(token)


def active_backend_name() -> str:
    """The name ops will use now: the innermost :func:`use_backend`, else the default."""
    return _active.get() or _default


register_backend("reference", _from_module("llmfs.tensor.backends.reference", "ReferenceBackend"))
register_backend("numpy", _from_module("llmfs.tensor.backends.numpy_backend", "NumpyBackend"))
register_backend("metal", _from_module("llmfs.tensor.backends.metal.backend", "MetalBackend"))
register_backend(
    "metal-emulator", _from_module("llmfs.tensor.backends.metal.backend", "MetalEmulatorBackend")
)

__all__ = [
    "ALL_BINARY_OPS",
    "ALL_REDUCE_OPS",
    "ALL_UNARY_OPS",
    "BINARY_OPS",
    "COMPARISON_OPS",
    "LOGICAL_OPS",
    "LOGICAL_REDUCE_OPS",
    "PRIMITIVES",
    "REDUCE_OPS",
    "UNARY_OPS",
    "Backend",
    "BackendUnavailableError",
    "active_backend_name",
    "available_backends",
    "default_backend",
    "get_backend",
    "register_backend",
    "set_default_backend",
    "unavailable_backends",
    "use_backend",
]
