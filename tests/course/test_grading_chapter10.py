"""``llmfs grade`` on chapter 10: its solution scores full marks, its unanswered student notebook
scores nothing, and a submission whose cross-entropy is the naive softmax loses exactly that
exercise (and the loop that calls it) on the grader's hidden cases. (``llmfs check`` on its
solution, answered and right everywhere, runs with every chapter's, in
``test_grading_selfcheck_solutions.py``.)"""

from __future__ import annotations

from typing import Any

import gradingkit as kit
import pytest

pytestmark = pytest.mark.notebooks

CHAPTER = kit.MANIFEST.chapter("ch10")
NAIVE = """def cross_entropy(logits, targets, weights):
    e = lt.exp(logits)
    probs = e / lt.sum(e, axis=-1, keepdims=True)
    onehot = lt.Tensor.from_numpy(np.eye(logits.shape[-1])[targets])
    w = lt.Tensor.from_numpy(np.asarray(weights, dtype=np.float64))
    return -lt.sum(lt.log(lt.sum(probs * onehot, axis=-1)) * w) / float(np.sum(weights))
"""
STALE = """def accumulate_grads(leaves, parts, loss_of):
    total = sum(float(np.sum(weights)) for _, _, weights in parts)
    for x, targets, weights in parts:
        (loss_of(leaves, x, targets, weights) * (float(np.sum(weights)) / total)).backward()
"""
# --no-execute: the scores never depend on the notebook's run, and nothing here asserts how
# it went. The grader's notebook runs are the acceptance and hostile tests', and every
# chapter's solution runs to its end under llmfs check (test_grading_selfcheck_solutions.py).
LIMITS = kit.sandbox_limits("--no-execute", "--memory-mb", "2048", "--cases", "20")


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    solved = kit.solution_notebook(CHAPTER)
    submissions = {
        "solved": solved,
        "blank": kit.student_notebook(CHAPTER),
        "naive": kit.set_source(solved, "ch10.cross_entropy", NAIVE),
        "stale": kit.set_source(solved, "ch10.accumulate_grads", STALE),
    }
    root = tmp_path_factory.mktemp("ch10-class")
    return kit.grade_class(root, CHAPTER, submissions, "--seed", "7", *LIMITS)


def test_the_solution_scores_every_checked_point(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_every_checked_point(graded, CHAPTER, "solved")


def test_the_blank_notebook_scores_nothing(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_nothing(graded, CHAPTER, "blank")


def test_a_naive_softmax_loses_the_loss_on_hidden_cases_and_keeps_the_rest(
    graded: dict[tuple[str, str], Any],
) -> None:
    assert graded[("naive", "ch10.cross_entropy")].score == 0
    for exercise_id in ("ch10.learning_rate", "ch10.adamw_step", "ch10.q1", "ch10.q4"):
        exercise = kit.MANIFEST.exercise(exercise_id)
        assert graded[("naive", exercise_id)].score == exercise.points, exercise_id


def test_accumulation_without_zero_grad_loses_exactly_it(
    graded: dict[tuple[str, str], Any],
) -> None:
    assert graded[("stale", "ch10.accumulate_grads")].score == 0
    kit.scores_every_checked_point(graded, CHAPTER, "stale", but=("ch10.accumulate_grads",))
