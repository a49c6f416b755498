"""Fixtures for the Metal tests: the emulator executor (skipped without a C++ compiler) and
random strided layouts built from numpy views, so every expected value comes from numpy itself.

Every test that takes ``executor`` runs twice: with the threads of each launch in grid order and
in a seeded shuffled order (threadgroup memory starts out as junk in both), so a shipped kernel
that depends on thread order, or reads threadgroup memory it did not write, fails."""

from __future__ import annotations

import numpy as np
import pytest

from llmfs.tensor.backends.metal import EmulatorExecutor, emulator_available
from llmfs.tensor.backends.metal.ops import Strided
from llmfs.tensor.layout import Layout
from tests.requirements import require_tool

#: The layout kinds every kernel is checked on.
KINDS = ("contiguous", "transpose", "step", "flip", "broadcast", "mixed", "scalar", "empty")
DTYPES = ("float32", "float16")


#: The thread orders every kernel test runs in: ``None`` is grid order, an int a shuffle seed.
ORDERS = {"grid-order": None, "shuffled": 20260101}


@pytest.fixture(scope="session", params=list(ORDERS))
def executor(request: pytest.FixtureRequest) -> EmulatorExecutor:
    """The emulator executor, in grid order and shuffled; skips when no C++ compiler runs."""
    if not emulator_available():
        require_tool("the Metal emulator needs clang++; none suitable runs here")
    return EmulatorExecutor(shuffle=ORDERS[request.param])


def to_strided(parent: np.ndarray, view: np.ndarray) -> Strided:
    """The Strided operand that reads ``view`` (a numpy view of the C-contiguous ``parent``)."""
    item = parent.itemsize
    strides = tuple(int(s) // item for s in view.strides)
    base = 0 if view.size == 0 else (view.ctypes.data - parent.ctypes.data) // item
    return Strided(parent.reshape(-1), Layout(tuple(view.shape), strides, int(base)))


def random_view(
    rng: np.random.Generator, kind: str, dtype: str, *, rank: int | None = None
) -> tuple[np.ndarray, Strided]:
    """A random numpy view of one ``kind`` and the Strided operand over the same storage."""
    rank = int(rng.integers(1, 4)) if rank is None else rank
    if kind == "scalar":
        parent = np.array(rng.uniform(-2, 2), dtype=dtype)
        return parent, to_strided(parent, parent)
    shape = [int(s) for s in rng.integers(1, 5, rank)]
    if kind == "empty":
        shape[int(rng.integers(rank))] = 0
    if kind in ("step", "mixed"):
        shape = [s * 2 + 1 for s in shape]
    if kind == "broadcast":
        shape[int(rng.integers(rank))] = 1
    parent = rng.uniform(-2, 2, size=shape).astype(dtype)
    view = parent
    if kind in ("transpose", "mixed"):
        view = view.transpose(rng.permutation(rank))
    if kind in ("step", "mixed"):
        axis = int(rng.integers(rank))
        index = [slice(None)] * rank
        index[axis] = slice(1, None, 2)
        view = view[tuple(index)]
    if kind in ("flip", "mixed"):
        view = np.flip(view, axis=int(rng.integers(rank)))
    if kind == "broadcast":
        target = [3 if s == 1 else s for s in view.shape]
        view = np.broadcast_to(view, (2, *target))
    return view, to_strided(parent, view)


def tolerance(dtype: str) -> dict[str, float]:
    """Comparison tolerances: float16 results may differ from numpy by one rounding."""
    return {"rtol": 2e-3, "atol": 2e-3} if dtype == "float16" else {"rtol": 2e-5, "atol": 1e-6}
