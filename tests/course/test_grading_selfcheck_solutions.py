"""``llmfs check`` on the solutions of every chapter: each is answered and right everywhere.

One run of the command (``--json``) on a learner's folder holding every chapter's solution under
the student notebook's name: each notebook runs to its end in its own limited kernel, and every
checked exercise counts as answered, right and worth its points. This is the one ``llmfs check``
run on each solution (the chapters' own grading tests, such as ``test_grading_ch09.py``, grade
their solutions and leave the self-check to this run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.grading import extract
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.score import grade_notebook

pytestmark = pytest.mark.notebooks

CHAPTERS = kit.MANIFEST.published_chapters


@pytest.fixture(scope="module")
def folder_and_check(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = kit.learner_copies(tmp_path_factory.mktemp("solved"), "solution")
    code, text = kit.run_check(folder, "--json")
    assert code == 0, text
    return folder, json.loads(text)


@pytest.fixture(scope="module")
def on_solutions(folder_and_check: tuple[Path, dict[str, Any]]) -> dict[str, Any]:
    return folder_and_check[1]


def test_the_solutions_are_answered_and_right_everywhere(on_solutions: dict[str, Any]) -> None:
    assert [c["chapter"] for c in on_solutions["chapters"]] == [c.id for c in CHAPTERS]
    for chapter, listed in zip(on_solutions["chapters"], CHAPTERS):
        assert chapter["run"] == "ok"
        # One line per exercise of the manifest, in its order: none left out, none invented.
        assert [e["id"] for e in chapter["exercises"]] == [e.id for e in listed.exercises]
        for exercise in chapter["exercises"]:
            assert exercise["answered"], exercise["id"]
            if exercise["kind"] == "explain":
                assert exercise["right"] is None
            else:
                assert exercise["right"] is True, exercise
                assert exercise["score"] == exercise["points"]
        totals = chapter["totals"]
        assert totals["answered"] == totals["exercises"]


def test_what_llmfs_check_reads_all_right_llmfs_grade_scores_full(
    folder_and_check: tuple[Path, dict[str, Any]],
) -> None:
    # The same files the learner checked, graded as submitted (the learner's code in a plain
    # limited process, a few hidden cases per implement exercise): every exercise llmfs check
    # reads right scores its full points, with the same verdict.
    folder, checked = folder_and_check
    for chapter, listed in zip(checked["chapters"], CHAPTERS):
        notebook = extract.parse_notebook((folder / Path(listed.notebook).name).read_bytes(), "x")
        graded = {
            v.exercise: v
            for v in grade_notebook(notebook, kit.key_of(listed), 7, Limits(), cases=5)
        }
        for exercise in chapter["exercises"]:
            if exercise["right"]:
                verdict = graded[exercise["id"]]
                assert (verdict.status, verdict.score) == ("right", verdict.points), verdict
