"""``llmfs grade`` on chapter 12: its solution scores full marks, its unanswered student notebook
scores nothing, a tree sum whose loop lost its barrier and a tiled matmul whose edge threads are
unguarded each lose exactly that exercise with the misconception named, and a tiled matmul that
hands back the library's own kernel is refused as a shortcut. ``llmfs check`` on the solution is
``test_grading_selfcheck_solutions.py``'s, run once for every chapter. The kernels run on the
emulator: without a C++ compiler the module skips."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.cli import main as llmfs_main
from llmfs.course.grading import extract
from llmfs.course.grading.gradebook import Gradebook
from llmfs.tensor.backends.metal import emulator_available

pytestmark = [
    pytest.mark.notebooks,
    pytest.mark.skipif(not emulator_available(), reason="the Metal emulator needs a C++ compiler"),
]

CHAPTER = kit.MANIFEST.chapter("ch12")
NAME = Path(CHAPTER.notebook).name
LIMITS = ["--cell-timeout", "300", "--timeout", "900", "--memory-mb", "2048", "--cases", "6"]
if shutil.which("bwrap") is None:
    LIMITS.append("--no-sandbox")

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


def _changed(exercise_id: str, old: str, new: str) -> dict[str, Any]:
    source = _solution_source(exercise_id)
    assert old in source, (exercise_id, old)
    return kit.set_source(kit.solution_notebook(CHAPTER), exercise_id, source.replace(old, new))


def _run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(list(argv))
    return code, out.getvalue()


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Any]:
    root = tmp_path_factory.mktemp("ch12-class")
    subs = root / "submissions"
    subs.mkdir()
    shutil.copy(kit.REPO / CHAPTER.solution, subs / "solved.ipynb")
    shutil.copy(kit.REPO / CHAPTER.notebook, subs / "blank.ipynb")
    wrong = {
        "racy": _changed("ch12.tree_sum", TREE_BARRIER, "    }\n    if (lid == 0) {"),
        "unguarded": _changed("ch12.tiled_matmul", MATMUL_GUARD, "a[row * K + ak]"),
        "copied": kit.set_source(kit.solution_notebook(CHAPTER), "ch12.tiled_matmul", SHORTCUT),
    }
    for name, notebook in wrong.items():
        (subs / f"{name}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    code, output = _run(
        "grade", str(subs), "--chapter", "12", "--seed", "7", "--out", str(root / "out"), *LIMITS
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


@pytest.mark.parametrize(
    ("student", "exercise_id", "named"),
    [
        ("racy", "ch12.tree_sum", "RaceBetweenThreads"),
        ("unguarded", "ch12.tiled_matmul", "UnguardedThreads"),
    ],
)
def test_a_wrong_kernel_loses_its_exercise_with_the_misconception_named(
    graded: dict[tuple[str, str], Any], student: str, exercise_id: str, named: str
) -> None:
    row = graded[(student, exercise_id)]
    assert row.score == 0 and named in row.message, (row.status, row.message)
    for exercise in CHAPTER.exercises:
        if exercise.id != exercise_id and exercise.kind != "explain":
            assert graded[(student, exercise.id)].score == exercise.points, exercise.id


def test_the_librarys_own_matmul_kernel_is_refused_as_a_shortcut(
    graded: dict[tuple[str, str], Any],
) -> None:
    row = graded[("copied", "ch12.tiled_matmul")]
    assert row.score == 0, row.message
    assert "kernel_source" in row.message, row.message
    assert "the work this exercise asks you to write yourself" in row.message, row.message
