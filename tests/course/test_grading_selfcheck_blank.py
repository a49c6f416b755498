"""``llmfs check`` on the unanswered notebooks of every chapter: nothing is answered or right,
each chapter gets its table, and not one solution is in what it prints.

Each notebook runs once, in its own limited kernel, and that one result is rendered both ways
the command prints it (the text tables and ``--json``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.grading.limits import Limits
from llmfs.course.grading.selfcheck import as_json, check_notebook, render

pytestmark = pytest.mark.notebooks

CHAPTERS = kit.MANIFEST.published_chapters


@pytest.fixture(scope="module")
def on_blank(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    # One run of each notebook, rendered both ways (the command prints one or the other).
    folder = kit.learner_copies(tmp_path_factory.mktemp("blank"), "notebook")
    limits = Limits(cell_timeout=60)
    chapters = [
        check_notebook(kit.MANIFEST, folder / Path(c.notebook).name, limits) for c in CHAPTERS
    ]
    return render(chapters), json.loads(json.dumps(as_json(chapters)))


def test_the_unanswered_notebooks_have_nothing_answered_or_right(
    on_blank: tuple[str, dict[str, Any]],
) -> None:
    _, data = on_blank
    for chapter in data["chapters"]:
        assert chapter["run"] == "ok"
        assert chapter["totals"]["answered"] == 0
        assert chapter["totals"]["right"] == 0
        assert chapter["totals"]["points"] == 0


def test_no_solution_appears_in_the_output_on_unanswered_notebooks(
    on_blank: tuple[str, dict[str, Any]],
) -> None:
    text, data = on_blank
    output = text + json.dumps(data)
    # Every chapter's titles and hints are in the report, so an answer of one chapter that is
    # also part of another chapter's question (a shape such as [3, 2]) is not a leak.
    keys = [kit.key_of(chapter) for chapter in CHAPTERS]
    shown = " ".join(
        [e.title for chapter in CHAPTERS for e in chapter.exercises]
        + [h for key in keys for i in key.exercises for h in i.hints]
    )
    for chapter, key in zip(CHAPTERS, keys):
        secrets: list[str] = []
        for item in key.exercises:
            for value in item.answers.values():
                secrets += [json.dumps(value), repr(value)]
            secrets += [line.strip() for line in item.model_answer.splitlines()]
            secrets += [line.strip() for line in item.solution_source.splitlines()[2:]]
        secrets = [s for s in secrets if len(s) >= 6 and s not in shown]
        leaked = sorted({s for s in secrets if s in output})
        assert not leaked, chapter.id


def test_the_text_report_is_a_table_per_chapter(on_blank: tuple[str, dict[str, Any]]) -> None:
    text, _ = on_blank
    for chapter in CHAPTERS:
        assert f"{chapter.id}: {chapter.title}" in text
        for exercise in chapter.exercises:
            assert f"  {exercise.id} " in text
    headers = re.findall(
        r"^  exercise( +)answer {20}result {4}wrong  revealed  hints  points$", text, re.M
    )
    longest = max(len(e.id) for chapter in CHAPTERS for e in chapter.exercises)
    # One id column for the whole report: every id and two spaces fit in it.
    assert len(headers) == len(CHAPTERS) and len(set(headers)) == 1
    assert len("exercise" + headers[0]) >= longest + 2
