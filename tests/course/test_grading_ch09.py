"""``llmfs grade`` on chapter 9: its predict, implement and explain exercises are read, run and
scored like every chapter's, and a backward that assigns instead of adding, or one that calls the
library's backward, loses exactly that exercise's points; so does a backward walk that skips a
shared node's second use or overwrites a gradient it must add to. (``llmfs check`` on its
solution runs with every chapter's, in ``test_grading_selfcheck_solutions.py``.)"""

from __future__ import annotations

from typing import Any

import gradingkit as kit
import pytest

pytestmark = pytest.mark.notebooks

CHAPTER = kit.MANIFEST.chapter("ch09")
KEY = kit.key_of(CHAPTER)
# --no-execute: the scores never depend on the notebook's run, and nothing here asserts how
# it went. The grader's notebook runs are the acceptance and hostile tests', and every
# chapter's solution runs to its end under llmfs check (test_grading_selfcheck_solutions.py).
LIMITS = kit.sandbox_limits("--no-execute", "--memory-mb", "2048", "--cases", "40")

ASSIGNED = """def view_backward(grad, view):
    buffer = np.zeros(view.owner.size)
    for offset, value in zip(view.logical_offsets(), np.asarray(grad).reshape(-1)):
        buffer[offset] = value
    return buffer
"""
BY_AUTOGRAD = """def view_backward(grad, view):
    owner = lt.Tensor.from_numpy(view.owner.to_numpy(), requires_grad=True)
    lt.as_strided(owner, list(view.shape), list(view.strides), view.base_offset).backward(
        lt.Tensor.from_numpy(grad)
    )
    return owner.grad.to_numpy()
"""

SKIPS_SHARED = """def backward_pass(loss, inputs, rule):
    seen = set()

    def visit(t, g):
        if id(t) in seen:
            return
        seen.add(id(t))
        if t.grad_fn is None:
            part = lt.Tensor.from_numpy(g)
            t.grad = part if t.grad is None else t.grad + part
            return
        for owner, part in rule(t, g):
            visit(owner, part)

    visit(loss, np.ones(loss.shape))
"""
OVERWRITES = """def backward_pass(loss, inputs, rule):
    order, seen = [], set()

    def visit(t):
        seen.add(id(t))
        for source in inputs(t):
            if id(source) not in seen:
                visit(source)
        order.append(t)

    visit(loss)
    grads = {id(loss): np.ones(loss.shape)}
    for t in reversed(order):
        g = grads.pop(id(t))
        if t.grad_fn is None:
            part = lt.Tensor.from_numpy(g)
            t.grad = part if t.grad is None else t.grad + part
            continue
        for owner, part in rule(t, g):
            grads[id(owner)] = part
"""


def _points(exercise_id: str) -> int:
    return next(e.points for e in CHAPTER.exercises if e.id == exercise_id)


CHECKED = [e for e in CHAPTER.exercises if e.kind != "explain"]
FULL = sum(e.points for e in CHECKED)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    correct = kit.correct_notebook(CHAPTER)
    submissions = {
        "correct": correct,
        "blank": kit.student_notebook(CHAPTER),
        "assigned": kit.set_source(correct, "ch09.view_backward", ASSIGNED),
        "shortcut": kit.set_source(correct, "ch09.view_backward", BY_AUTOGRAD),
        "skips_shared": kit.set_source(correct, "ch09.backward_pass", SKIPS_SHARED),
        "overwrites": kit.set_source(correct, "ch09.backward_pass", OVERWRITES),
    }
    root = tmp_path_factory.mktemp("ch09")
    return kit.grade_class(root, CHAPTER, submissions, "--seed", "4242", *LIMITS)


def _total(rows: dict[tuple[str, str], Any], student: str) -> float:
    return sum(r.score or 0 for (s, _), r in rows.items() if s == student)


def test_the_correct_submission_scores_every_checked_point(graded: dict) -> None:
    assert _total(graded, "correct") == FULL
    assert {e for (s, e) in graded if s == "correct"} == {e.id for e in CHAPTER.exercises}


def test_the_blank_submission_scores_nothing(graded: dict) -> None:
    assert _total(graded, "blank") == 0


@pytest.mark.parametrize("student", ["assigned", "shortcut"])
def test_a_wrong_or_borrowed_view_rule_loses_exactly_its_points(graded: dict, student: str) -> None:
    assert graded[(student, "ch09.view_backward")].score == 0
    assert _total(graded, student) == FULL - _points("ch09.view_backward")


@pytest.mark.parametrize("student", ["skips_shared", "overwrites"])
def test_a_walk_that_skips_or_overwrites_a_shared_gradient_loses_exactly_its_points(
    graded: dict, student: str
) -> None:
    assert graded[(student, "ch09.backward_pass")].score == 0
    assert _total(graded, student) == FULL - _points("ch09.backward_pass")
