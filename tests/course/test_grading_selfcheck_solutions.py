"""``llmfs check`` on the solutions of every chapter: each is answered and right everywhere.

One run of the command (``--json``) on a learner's folder holding every chapter's solution under
the student notebook's name: each notebook runs to its end in its own limited kernel, and every
checked exercise counts as answered, right and worth its points. This is the one ``llmfs check``
run on each solution (the chapters' own grading tests, such as ``test_grading_ch09.py``, grade
their solutions and leave the self-check to this run). That ``llmfs grade`` scores full what
``llmfs check`` reads right, with the same verdict, is ``test_verdict_parity.py``'s: every predict
exercise's right answer and every implement exercise's right function, graded as submitted.
"""

from __future__ import annotations

import json
from typing import Any

import gradingkit as kit
import pytest

pytestmark = pytest.mark.notebooks

CHAPTERS = kit.MANIFEST.published_chapters


@pytest.fixture(scope="module")
def on_solutions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = kit.learner_copies(tmp_path_factory.mktemp("solved"), "solution")
    code, text = kit.run_check(folder, "--json")
    assert code == 0, text
    return dict(json.loads(text))


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
