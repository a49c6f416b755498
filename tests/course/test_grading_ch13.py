"""``llmfs grade`` on chapter 13: its solution scores full marks, its unanswered student notebook
scores nothing, and one notebook with two mistakes (gradients clipped per parameter, a
checkpoint that forgets the random stream) loses exactly those two exercises while the notebook's
checks of the same code name the rule each broke. ``llmfs check`` on the solution is
``test_grading_selfcheck_solutions.py``'s, run once for every chapter. The class is graded once
for the module: the chapter's runs are the slow part."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.grading import extract

pytestmark = pytest.mark.notebooks

CHAPTER = kit.MANIFEST.chapter("ch13")
NAME = Path(CHAPTER.notebook).name
# --no-execute: the scores never depend on the notebook's run, and nothing here asserts how
# it went. The grader's notebook runs are the acceptance and hostile tests', and every
# chapter's solution runs to its end under llmfs check (test_grading_selfcheck_solutions.py).
LIMITS = kit.sandbox_limits("--no-execute", "--memory-mb", "2048", "--cases", "6")

ONE_FACTOR = (
    "    factor = min(1.0, max_norm / (norm + 1e-6))\n"
    "    if factor < 1.0:\n"
    "        for name, g in grads.items():\n"
    "            params[name].grad = lt.Tensor.from_numpy(g * factor)\n"
)
PER_PARAMETER = (
    "    for name, g in grads.items():\n"
    "        own = math.sqrt(float((g**2).sum()))\n"
    "        params[name].grad = lt.Tensor.from_numpy(g * min(1.0, max_norm / (own + 1e-6)))\n"
)
RESTORED_STREAM = '    rng.bit_generator.state = meta["rng"]\n'
FRESH_STREAM = "    rng = np.random.default_rng(cfg.seed)\n"


def _solution_source(exercise_id: str) -> str:
    notebook = kit.solution_notebook(CHAPTER)
    position = extract.tagged_cells(notebook)[exercise_id][0]
    return extract.source_of(notebook["cells"][position - 1])


def _changed(*changes: tuple[str, str, str]) -> dict[str, Any]:
    notebook = kit.solution_notebook(CHAPTER)
    for exercise_id, old, new in changes:
        source = _solution_source(exercise_id)
        assert old in source, (exercise_id, old)
        notebook = kit.set_source(notebook, exercise_id, source.replace(old, new))
    return notebook


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    submissions = {
        "solved": kit.solution_notebook(CHAPTER),
        "blank": kit.student_notebook(CHAPTER),
        "wrong": _changed(
            ("ch13.clip_grad_norm", ONE_FACTOR, PER_PARAMETER),
            ("ch13.save_and_load", RESTORED_STREAM, FRESH_STREAM),
        ),
    }
    root = tmp_path_factory.mktemp("ch13-class")
    return kit.grade_class(root, CHAPTER, submissions, "--seed", "7", *LIMITS)


def test_the_solution_scores_every_checked_point(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_every_checked_point(graded, CHAPTER, "solved")


def test_the_blank_notebook_scores_nothing(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_nothing(graded, CHAPTER, "blank")


def test_two_mistakes_lose_exactly_their_exercises(graded: dict[tuple[str, str], Any]) -> None:
    for exercise_id in ("ch13.clip_grad_norm", "ch13.save_and_load"):
        row = graded[("wrong", exercise_id)]
        assert row.score == 0 and row.status == "wrong", row
    # The loop calls the learner's clip_grad_norm, so it may lose its cases that clip too.
    kit.scores_every_checked_point(
        graded,
        CHAPTER,
        "wrong",
        but=("ch13.clip_grad_norm", "ch13.save_and_load", "ch13.train"),
    )
