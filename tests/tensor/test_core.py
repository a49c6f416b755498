"""The teaching core is plain: the modules a learner reads, and everything they import, reach no
speed code and never branch on a backend's name; the speed code (the numpy backend's cached
dispatch and the views' layout memo) sits above the rules, behind one hook, and changes no
result when it is taken away."""

from __future__ import annotations

import runpy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.tensor import Tensor, dispatch, ops
from llmfs.tensor import view as view_module

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "core_closure.py"
CLOSURE = runpy.run_path(str(SCRIPT))


def test_the_cores_import_closure_reaches_no_speed_code() -> None:
    lines = CLOSURE["closure"](CLOSURE["CORE"])
    assert set(CLOSURE["CORE"]) <= set(lines)
    assert sorted(set(lines) & set(CLOSURE["SPEED"])) == []
    assert "llmfs.tensor.ops" in lines  # the ops' rules are part of what the core imports


def test_no_module_of_the_closure_branches_on_a_backends_name() -> None:
    branch = CLOSURE["NAME_BRANCH"]
    for name in CLOSURE["closure"](CLOSURE["CORE"]):
        text = CLOSURE["module_path"](name).read_text()
        assert not branch.search(text), name


def test_the_closure_reader_sees_function_local_and_importlib_imports(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "import importlib\n"
        "def f():\n    from llmfs.tensor import dispatch\n"
        "def g():\n    return importlib.import_module('llmfs.tensor.derived')\n"
    )
    assert CLOSURE["imported_names"]("llmfs.probe", source) == {
        "llmfs.tensor.dispatch",
        "llmfs.tensor.derived",
    }


@pytest.fixture
def without_speed_code() -> Iterator[None]:
    dispatch.uninstall()
    try:
        yield
    finally:
        dispatch.install()


CALLS: list[tuple[str, Callable[[Tensor, Tensor], Any]]] = [
    ("add", lambda a, b: a + b),
    ("mul by a number", lambda a, b: a * 2.5),
    ("exp", lambda a, b: lt.exp(a)),
    ("sum", lambda a, b: lt.sum(a, axis=0)),
    ("mean keepdims", lambda a, b: lt.mean(a, axis=1, keepdims=True)),
    ("matmul", lambda a, b: a @ b.T),
    ("transpose copy", lambda a, b: a.T.materialize()),
    ("reshape view", lambda a, b: a.reshape(-1)[::3].tolist()),
    ("comparison", lambda a, b: a < b),
]


@pytest.mark.parametrize(("name", "call"), CALLS, ids=[name for name, _ in CALLS])
def test_taking_the_speed_code_away_changes_no_result(
    name: str, call: Callable[[Tensor, Tensor], Any], without_speed_code: None
) -> None:
    rng = np.random.default_rng(0)
    a = Tensor.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    b = Tensor.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    assert ops.planner is None and view_module.derive_layout is None
    plain = call(a, b)
    dispatch.install()
    try:
        for _ in range(3):  # the first call makes the plan, the later ones use it
            fast = call(a, b)
    finally:
        dispatch.uninstall()
    if isinstance(plain, list):
        assert plain == fast
    else:
        assert plain.dtype == fast.dtype and plain.shape == fast.shape
        assert np.array_equal(plain.to_numpy(), fast.to_numpy())


def test_gradients_need_no_speed_code(without_speed_code: None) -> None:
    x = Tensor.from_numpy(np.arange(6.0).reshape(2, 3), requires_grad=True)
    lt.sum(lt.exp(x.T * 0.1) * x.T).backward()
    values = np.arange(6.0).reshape(2, 3)
    expected = np.exp(values * 0.1) * (1 + 0.1 * values)
    assert x.grad is not None and np.allclose(x.grad.to_numpy(), expected)
