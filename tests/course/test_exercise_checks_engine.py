"""Chapter 9's engine checks: a right walk over the tape passes on every seed; a walk that skips
a shared node's second use, one that assigns where it must add, one that runs a rule once per
path and one that forgets a leaf's earlier .grad all fail, each with the rule it breaks named;
the two doors to the tape agree with the library's backward; matmul's backward is held to the
library's autograd, and one without the broadcast sum fails."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.course.exercise_checks import CHECKS, SPECS
from llmfs.course.exercise_checks.engine import (
    VIEWS,
    check_backward_pass,
    check_matmul_backward,
    library_grads,
    tape_inputs,
    tape_rule,
)
from llmfs.course.exercise_checks.spec import draw_cases
from llmfs.tensor import SavedTensorModifiedError, Tensor


def _leaf_add(t: Any, g: np.ndarray) -> None:
    part = lt.Tensor.from_numpy(g)
    t.grad = part if t.grad is None else t.grad + part


def _order(loss: Any, inputs: Callable[[Any], list[Any]]) -> list[Any]:
    order: list[Any] = []
    seen: set[int] = set()

    def visit(t: Any) -> None:
        seen.add(id(t))
        for source in inputs(t):
            if id(source) not in seen:
                visit(source)
        order.append(t)

    visit(loss)
    return order[::-1]


def walk(loss: Any, inputs: Any, rule: Any) -> None:
    """The right walk: a topological order, one gradient per tensor, added into."""
    grads = {id(loss): np.ones(loss.shape)}
    for t in _order(loss, inputs):
        g = grads.pop(id(t))
        if t.grad_fn is None:
            _leaf_add(t, g)
            continue
        for owner, part in rule(t, g):
            grads[id(owner)] = grads[id(owner)] + part if id(owner) in grads else part


def skips_shared(loss: Any, inputs: Any, rule: Any) -> None:
    """Pushes each gradient down at once and skips a tensor reached a second time."""
    seen: set[int] = set()

    def visit(t: Any, g: np.ndarray) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        if t.grad_fn is None:
            _leaf_add(t, g)
            return
        for owner, part in rule(t, g):
            visit(owner, part)

    visit(loss, np.ones(loss.shape))


def overwrites(loss: Any, inputs: Any, rule: Any) -> None:
    """The right order, but a second part replaces the first."""
    grads = {id(loss): np.ones(loss.shape)}
    for t in _order(loss, inputs):
        g = grads.pop(id(t))
        if t.grad_fn is None:
            _leaf_add(t, g)
            continue
        for owner, part in rule(t, g):
            grads[id(owner)] = part


def per_path(loss: Any, inputs: Any, rule: Any) -> None:
    """Right gradients (rules are linear), but a shared node's rule runs once per path."""

    def visit(t: Any, g: np.ndarray) -> None:
        if t.grad_fn is None:
            _leaf_add(t, g)
            return
        for owner, part in rule(t, g):
            visit(owner, part)

    visit(loss, np.ones(loss.shape))


def forgets_grad(loss: Any, inputs: Any, rule: Any) -> None:
    """The right walk, but a leaf's .grad is replaced instead of added to."""
    grads = {id(loss): np.ones(loss.shape)}
    for t in _order(loss, inputs):
        g = grads.pop(id(t))
        if t.grad_fn is None:
            t.grad = lt.Tensor.from_numpy(g)
            continue
        for owner, part in rule(t, g):
            grads[id(owner)] = grads[id(owner)] + part if id(owner) in grads else part


def by_library(loss: Any, inputs: Any, rule: Any) -> None:
    loss.backward()


def test_both_engine_checks_are_registered() -> None:
    for exercise in ("ch09.backward_pass", "ch09.matmul_backward"):
        assert exercise in CHECKS and exercise in SPECS


@pytest.mark.parametrize("seed", [None, 7, 4242])
def test_a_right_walk_passes_on_the_visible_and_a_graders_seed(seed: int | None) -> None:
    report = check_backward_pass(walk, seed=seed, record_attempt=False)
    assert report.status == "passed", report


@pytest.mark.parametrize(
    ("wrong", "named"),
    [
        (skips_shared, "SUM"),
        (overwrites, "SUM"),
        (per_path, "once"),
        (forgets_grad, "accumulates"),
    ],
)
def test_each_wrong_walk_fails_with_its_rule_named(wrong: Any, named: str) -> None:
    for seed in (None, 11):
        report = check_backward_pass(wrong, seed=seed, record_attempt=False)
        assert report.status == "failed", (wrong.__name__, report)
        assert named in repr(report), repr(report)


def test_a_walk_by_the_library_is_refused_as_a_shortcut() -> None:
    report = check_backward_pass(by_library, record_attempt=False)
    assert report.status == "failed"
    assert "llmfs.tensor.autograd.backward" in repr(report)


def test_every_graph_has_a_shared_result_an_owner_read_twice_and_a_view_of_a_view() -> None:
    cases = [case for (case,) in draw_cases(SPECS["ch09.backward_pass"], seed=3)]
    for case in cases:
        reads: dict[int, int] = {}
        twice = False
        for op in case["ops"]:
            operands = op[1:]
            for index, _ in operands:
                reads[index] = reads.get(index, 0) + 1
            twice |= len(operands) == 2 and operands[0][0] == operands[1][0]
        assert twice
        assert any(index >= 3 and count >= 2 for index, count in reads.items())
    chained = [v for case in cases for op in case["ops"] for _, v in op[1:] if len(v) >= 2]
    assert chained and all(name in VIEWS for views in chained for name in views)
    assert any(c["preset"] for c in cases) and any(c["constant"] for c in cases)


def test_the_doors_with_the_right_walk_give_the_librarys_gradients() -> None:
    rng = np.random.default_rng(5)
    values = [rng.normal(size=(3, 3)) for _ in range(2)]
    mine = [Tensor.from_numpy(v, requires_grad=True) for v in values]
    theirs = [Tensor.from_numpy(v, requires_grad=True) for v in values]
    for (a, b), run in ((mine, "walk"), (theirs, "library")):
        shared = lt.tanh(a @ b.T[::-1])
        loss = lt.sum(shared * a[:1].expand([3, 3])) + lt.sum(shared * shared.T)
        if run == "walk":
            walk(loss, tape_inputs, tape_rule)
        else:
            loss.backward()
    for got, want in zip(mine, theirs):
        assert got.grad is not None and want.grad is not None
        assert np.allclose(got.grad.to_numpy(), want.grad.to_numpy(), rtol=1e-12, atol=1e-12)


def test_the_doors_list_each_read_and_refuse_a_leaf_a_wrong_shape_and_a_written_result() -> None:
    p = Tensor.from_numpy(np.ones((2, 2)), requires_grad=True)
    s = p * p.T
    assert [t is p for t in tape_inputs(s)] == [True, True]
    assert tape_inputs(p) == []
    assert len(tape_rule(s, np.ones((2, 2)))) == 2
    with pytest.raises(ValueError, match="leaf"):
        tape_rule(p, np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"shape \[2, 2\]"):
        tape_rule(s, np.ones(3))
    w = Tensor.from_numpy(np.ones(2))
    y = p[0] * w
    lt.copyto(w, Tensor.zeros([2]))
    with pytest.raises(SavedTensorModifiedError):
        tape_rule(y, np.ones(2))


def test_library_grads_leave_an_unreached_leaf_without_a_grad() -> None:
    case = {
        "n": 2,
        "ops": [["mul", [0, []], [0, ["T"]]], ["add", [3, []], [3, ["flip"]]]],
        "constant": False,
        "preset": False,
        "seed": 1,
    }
    grads = library_grads(case)
    assert grads[0] is not None and grads[1] is None and grads[2] is None


# -- matmul_backward ---------------------------------------------------------------------------


def _summed(grad: Any, shape: list[int]) -> Any:
    lead = grad.rank - len(shape)
    axes = list(range(lead)) + [
        lead + k for k, n in enumerate(shape) if n == 1 and grad.shape[lead + k] != 1
    ]
    return (lt.sum(grad, axis=axes, keepdims=True) if axes else grad).reshape(list(shape))


def matmul_backward(a: Any, b: Any, g: Any) -> Any:
    da = lt.einsum("...mn,...kn->...mk", g, b)
    db = lt.einsum("...mn,...mk->...kn", g, a)
    return _summed(da, list(a.shape)), _summed(db, list(b.shape))


def unsummed(a: Any, b: Any, g: Any) -> Any:
    return lt.einsum("...mn,...kn->...mk", g, b), lt.einsum("...mn,...mk->...kn", g, a)


def doubled(a: Any, b: Any, g: Any) -> Any:
    # The right shapes and a wrong value: twice dA.
    da = lt.einsum("...mn,...kn->...mk", g, b)
    db = lt.einsum("...mn,...mk->...kn", g, a)
    return _summed(da, list(a.shape)) * 2.0, _summed(db, list(b.shape))


@pytest.mark.parametrize("seed", [None, 99])
def test_matmul_backward_from_einsum_passes(seed: int | None) -> None:
    report = check_matmul_backward(matmul_backward, seed=seed, record_attempt=False)
    assert report.status == "passed", report


def test_matmul_backward_without_the_broadcast_sum_fails_naming_it() -> None:
    report = check_matmul_backward(unsummed, record_attempt=False)
    assert report.status == "failed"
    assert "summed back to the operand's own shape" in repr(report)
    assert check_matmul_backward(doubled, record_attempt=False).status == "failed"


def test_matmul_cases_broadcast_batch_axes_both_ways() -> None:
    cases = [case for (case,) in draw_cases(SPECS["ch09.matmul_backward"], seed=2)]
    assert any(len(c["a"]) != len(c["b"]) for c in cases)
    assert any(
        len(c["a"]) == len(c["b"]) > 2 and any(x != y for x, y in zip(c["a"][:-2], c["b"][:-2]))
        for c in cases
    )
