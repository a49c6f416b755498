"""``llmfs grade`` on chapter 10: its solution scores full marks, its unanswered student notebook
scores nothing, and a submission whose cross-entropy is the naive softmax loses exactly that
exercise (and the loop that calls it) on the grader's hidden cases. (``llmfs check`` on its
solution, answered and right everywhere, runs with every chapter's, in
``test_grading_selfcheck_solutions.py``.)"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from typing import Any

import gradingkit as kit
import pytest

from llmfs.cli import main as llmfs_main
from llmfs.course.grading.gradebook import Gradebook

pytestmark = pytest.mark.notebooks

CHAPTER = kit.MANIFEST.chapter("ch10")
NAIVE = """def cross_entropy(logits, targets, weights):
    e = lt.exp(logits)
    probs = e / lt.sum(e, axis=-1, keepdims=True)
    onehot = lt.Tensor.from_numpy(np.eye(logits.shape[-1])[targets])
    w = lt.Tensor.from_numpy(np.asarray(weights, dtype=np.float64))
    return -lt.sum(lt.log(lt.sum(probs * onehot, axis=-1)) * w) / float(np.sum(weights))
"""
LIMITS = ["--cell-timeout", "120", "--timeout", "600", "--memory-mb", "2048", "--cases", "20"]
if shutil.which("bwrap") is None:
    LIMITS.append("--no-sandbox")


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    root = tmp_path_factory.mktemp("ch10-class")
    subs = root / "submissions"
    subs.mkdir()
    shutil.copy(kit.REPO / CHAPTER.solution, subs / "solved.ipynb")
    shutil.copy(kit.REPO / CHAPTER.notebook, subs / "blank.ipynb")
    naive = kit.set_source(kit.solution_notebook(CHAPTER), "ch10.cross_entropy", NAIVE)
    (subs / "naive.ipynb").write_text(json.dumps(naive), encoding="utf-8")
    code, output = _run(
        "grade", str(subs), "--chapter", "10", "--seed", "7", "--out", str(root / "out"), *LIMITS
    )
    assert code == 0, output
    with Gradebook(root / "out" / "gradebook.sqlite") as book:
        return {(row.student, row.exercise): row for row in book.rows()}


def test_the_solution_scores_every_checked_point(graded: dict[tuple[str, str], Any]) -> None:
    for exercise in CHAPTER.exercises:
        row = graded[("solved", exercise.id)]
        if exercise.kind == "explain":
            assert row.status == "pending"
        else:
            assert row.score == exercise.points, (exercise.id, row.status, row.message)


def test_the_blank_notebook_scores_nothing(graded: dict[tuple[str, str], Any]) -> None:
    for exercise in CHAPTER.exercises:
        assert not graded[("blank", exercise.id)].score, exercise.id


def test_a_naive_softmax_loses_the_loss_on_hidden_cases_and_keeps_the_rest(
    graded: dict[tuple[str, str], Any],
) -> None:
    assert graded[("naive", "ch10.cross_entropy")].score == 0
    for exercise_id in ("ch10.learning_rate", "ch10.adamw_step", "ch10.q1", "ch10.q4"):
        exercise = kit.MANIFEST.exercise(exercise_id)
        assert graded[("naive", exercise_id)].score == exercise.points, exercise_id
