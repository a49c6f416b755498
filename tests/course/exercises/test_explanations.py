"""Explanations that state an answer: written in the solution as ``explains:<id>`` cells, left
out of the student notebook by the build, shown by the exercise's check once it is finished."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from exercisekit import RIGHT, WRONG, seed_fixture

from llmfs.course import CourseError
from llmfs.course.build import plan_explanations, stale_notebooks, student_notebook
from llmfs.course.exercises.api import check, predict
from llmfs.course.exercises.explanations import (
    EXPLANATIONS_FILE,
    Explanation,
    explained_exercises,
    load_explanations,
    notebook_explanations,
    render_explanations,
)
from llmfs.course.manifest import load_manifest

REPO = Path(__file__).resolve().parents[3]
WHY = "A transpose swaps **sizes and strides**: row 0 of the result is column 0."
BOTH = "Both answers: the transpose and the slice read `base` in place."


def _cell(kind: str, cell_id: str, source: str, tags: list[str] | None = None) -> dict[str, Any]:
    cell: dict[str, Any] = {
        "cell_type": kind,
        "id": cell_id,
        "metadata": {"tags": tags} if tags else {},
        "source": source,
    }
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _solution(*extra: dict[str, Any]) -> dict[str, Any]:
    """A solution of the throwaway course's chapter: both predict exercises, the explain
    exercise, then ``extra`` cells."""
    q1 = 'q1 = predict("base.transpose(0, 1)", exercise_id="ch02.q1", shape=[3, 2])'
    q2 = 'q2 = predict("base.slice(1, 1, 3)", exercise_id="ch02.q2", base_offset=1)'
    cells = [
        _cell("markdown", "intro", "# Views"),
        _cell("code", "q1", q1, ["exercise:ch02.q1"]),
        _cell("code", "q1-check", "check(q1)"),
        _cell("markdown", "q1-why", WHY, ["explains:ch02.q1"]),
        _cell("code", "q2", q2, ["exercise:ch02.q2"]),
        _cell("markdown", "why", "Why?", ["exercise:ch02.why"]),
        *extra,
    ]
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture
def chapter(attempts_log: Path) -> Any:
    return load_manifest().chapter("ch02")


def test_the_tags_name_the_exercises_in_order() -> None:
    assert explained_exercises(["x", "explains:ch02.q1", "explains: ch02.q2"]) == (
        "ch02.q1",
        "ch02.q2",
    )
    assert explained_exercises(["exercise:ch02.q1", "solution-only"]) == ()


def test_the_build_leaves_an_explanation_out_and_collects_its_text(chapter: Any) -> None:
    both = _cell("markdown", "both", BOTH, ["explains:ch02.q1", "explains:ch02.q2"])
    solution = _solution(both)
    student = student_notebook(solution, "solutions/ch02.ipynb", chapter)
    assert [cell["id"] for cell in student["cells"]] == ["intro", "q1", "q1-check", "q2", "why"]
    found = notebook_explanations(solution, "solutions/ch02.ipynb", chapter)
    assert found == [
        Explanation(("ch02.q1",), "ch02", "q1-why", WHY),
        Explanation(("ch02.q1", "ch02.q2"), "ch02", "both", BOTH),
    ]
    text = render_explanations(found)
    assert json.loads(text)["explanations"][1]["exercises"] == ["ch02.q1", "ch02.q2"]
    assert text.endswith("\n") and render_explanations(found) == text  # deterministic


@pytest.mark.parametrize(
    ("cell", "says"),
    [
        (_cell("code", "bad", "print(1)", ["explains:ch02.q1"]), "only a markdown cell"),
        (_cell("markdown", "bad", "x", ["explains:"]), "needs an exercise id"),
        (_cell("markdown", "bad", "x", ["explains:ch02.why"]), "names no predict exercise"),
        (_cell("markdown", "bad", "x", ["explains:ch09.q1"]), "names no predict exercise"),
        (
            _cell("markdown", "bad", "x", ["exercise:ch02.why", "explains:ch02.q1"]),
            "cannot also explain",
        ),
        (_cell("markdown", "bad", "The trace shows it:", ["explains:ch02.q1"]), "colon"),
    ],
)
def test_a_misplaced_explanation_is_a_course_error(
    chapter: Any, cell: dict[str, Any], says: str
) -> None:
    solution = _solution(cell)
    if "exercise:ch02.why" in cell["metadata"]["tags"]:
        solution["cells"] = [c for c in solution["cells"] if c["id"] != "why"]
    with pytest.raises(CourseError, match=says) as raised:
        student_notebook(solution, "solutions/ch02.ipynb", chapter)
    assert "solutions/ch02.ipynb" in str(raised.value)


def test_an_explanation_above_its_exercise_is_refused(chapter: Any) -> None:
    solution = _solution()
    early = _cell("markdown", "early", "Spoiler.", ["explains:ch02.q2"])
    solution["cells"].insert(1, early)
    with pytest.raises(CourseError, match=r"explains ch02\.q2, whose cell .* comes after it"):
        student_notebook(solution, "solutions/ch02.ipynb", chapter)


def _write_explanations(root: Path, *items: Explanation) -> None:
    (root / EXPLANATIONS_FILE).write_text(render_explanations(items), encoding="utf-8")


def test_the_check_shows_the_explanation_only_once_the_exercise_is_finished(
    attempts_log: Path,
) -> None:
    root = load_manifest().root
    _write_explanations(root, Explanation(("ch02.q1",), "ch02", "q1-why", WHY))
    scope = {"base": seed_fixture()}
    unanswered = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1"), scope)
    wrong = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG), scope)
    for comparison in (unanswered, wrong):
        assert "sizes and strides" not in repr(comparison)
    right = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **RIGHT), scope)
    assert "A transpose swaps **sizes and strides**" in repr(right)


def test_the_explanation_shows_after_a_reveal_too(attempts_log: Path) -> None:
    root = load_manifest().root
    _write_explanations(root, Explanation(("ch02.q1",), "ch02", "q1-why", WHY))
    scope = {"base": seed_fixture()}
    shown = check(
        predict("base.transpose(0, 1)", exercise_id="ch02.q1", **WRONG), scope, reveal=True
    )
    assert shown.finished and "sizes and strides" in repr(shown)


def test_an_explanation_of_two_exercises_waits_for_both(attempts_log: Path) -> None:
    root = load_manifest().root
    _write_explanations(root, Explanation(("ch02.q1", "ch02.q2"), "ch02", "both", BOTH))
    scope = {"base": seed_fixture()}
    first = check(predict("base.transpose(0, 1)", exercise_id="ch02.q1", **RIGHT), scope)
    assert "read `base` in place" not in repr(first)
    second = check(
        predict("base.slice(1, 1, 3)", exercise_id="ch02.q2", base_offset=1, contiguous=False),
        scope,
    )
    assert "read `base` in place" in repr(second)


def test_a_course_without_an_explanations_file_has_none(attempts_log: Path) -> None:
    assert load_explanations() == ()


def test_a_malformed_explanations_file_is_a_course_error(attempts_log: Path) -> None:
    (load_manifest().root / EXPLANATIONS_FILE).write_text('{"explanations": [{}]}', "utf-8")
    with pytest.raises(CourseError, match="run `llmfs build`"):
        load_explanations()


def test_the_course_explanations_file_is_what_the_build_makes() -> None:
    manifest = load_manifest(REPO / "course" / "manifest.toml")
    path, text = plan_explanations(manifest)
    assert path.read_text(encoding="utf-8") == text
    assert not [p for p in stale_notebooks(manifest) if EXPLANATIONS_FILE in p]
    chapters = {item["chapter"] for item in json.loads(text)["explanations"]}
    assert len(chapters) >= 10  # every chapter with a result to explain has its cells
