"""``llmfs grade`` on chapter 12: its solution scores full marks, its unanswered student notebook
scores nothing, a tree sum whose loop lost its barrier and a tiled matmul whose edge threads are
unguarded each lose exactly that exercise with the misconception named, and a tiled matmul that
hands back the library's own kernel is refused as a shortcut. ``llmfs check`` on the solution is
``test_grading_selfcheck_solutions.py``'s, run once for every chapter. The kernels run on the
emulator: without a C++ compiler the module skips."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.grading import extract
from llmfs.tensor.backends.metal import emulator_available

pytestmark = [
    pytest.mark.notebooks,
    pytest.mark.skipif(not emulator_available(), reason="the Metal emulator needs a C++ compiler"),
]

CHAPTER = kit.MANIFEST.chapter("ch12")
NAME = Path(CHAPTER.notebook).name
# --no-execute: the scores never depend on the notebook's run, and nothing here asserts how
# it went. The grader's notebook runs are the acceptance and hostile tests', and every
# chapter's solution runs to its end under llmfs check (test_grading_selfcheck_solutions.py).
LIMITS = kit.sandbox_limits("--no-execute", "--memory-mb", "2048", "--cases", "6")

TREE_BARRIER = """        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (lid == 0) {"""
MATMUL_GUARD = "(row < M && ak < K) ? a[row * K + ak] : 0.0f"
SHORTCUT = """def tiled_matmul_kernel():
    from llmfs.tensor.backends.metal.ops import kernel_source

    return kernel_source("matmul").replace("kernel void matmul_f32", "kernel void tiled_matmul")
"""


def _solution_source(exercise_id: str) -> str:
    notebook = kit.solution_notebook(CHAPTER)
    position = extract.tagged_cells(notebook)[exercise_id][0]
    return extract.source_of(notebook["cells"][position - 1])


def _changed_both(*changes: tuple[str, str, str]) -> dict[str, Any]:
    """The solution with ``old`` replaced by ``new`` in each ``(exercise id, old, new)``'s cell."""
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
        # Two wrong kernels in one notebook (each exercise is graded on its own): a tree sum
        # whose loop lost its barrier and a tiled matmul whose edge threads are unguarded.
        "wrong": _changed_both(
            ("ch12.tree_sum", TREE_BARRIER, "    }\n    if (lid == 0) {"),
            ("ch12.tiled_matmul", MATMUL_GUARD, "a[row * K + ak]"),
        ),
        "copied": kit.set_source(kit.solution_notebook(CHAPTER), "ch12.tiled_matmul", SHORTCUT),
    }
    root = tmp_path_factory.mktemp("ch12-class")
    return kit.grade_class(root, CHAPTER, submissions, "--seed", "7", *LIMITS)


def test_the_solution_scores_every_checked_point(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_every_checked_point(graded, CHAPTER, "solved")


def test_the_blank_notebook_scores_nothing(graded: dict[tuple[str, str], Any]) -> None:
    kit.scores_nothing(graded, CHAPTER, "blank")


@pytest.mark.parametrize(
    ("exercise_id", "named"),
    [("ch12.tree_sum", "RaceBetweenThreads"), ("ch12.tiled_matmul", "UnguardedThreads")],
)
def test_a_wrong_kernel_loses_its_exercise_with_the_misconception_named(
    graded: dict[tuple[str, str], Any], exercise_id: str, named: str
) -> None:
    row = graded[("wrong", exercise_id)]
    assert row.score == 0 and named in row.message, (row.status, row.message)


def test_the_wrong_kernels_cost_only_their_own_exercises(
    graded: dict[tuple[str, str], Any],
) -> None:
    kit.scores_every_checked_point(
        graded, CHAPTER, "wrong", but=("ch12.tree_sum", "ch12.tiled_matmul")
    )


def test_the_librarys_own_matmul_kernel_is_refused_as_a_shortcut(
    graded: dict[tuple[str, str], Any],
) -> None:
    row = graded[("copied", "ch12.tiled_matmul")]
    assert row.score == 0, row.message
    assert "kernel_source" in row.message, row.message
    assert "the work this exercise asks you to write yourself" in row.message, row.message
