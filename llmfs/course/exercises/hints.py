"""Hints and explain exercises: ``hint(id, n)`` shows an exercise's hint ``n`` (each counted once);
``model_answer(...)`` shows an explain exercise's model answer and rubric once the learner has
written an answer of their own. Both are logged (hints seen, the answer revealed).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from llmfs.course import CourseError
from llmfs.course.attempts import record_event
from llmfs.course.exercises.reveals import REVEALS_OFF, model_answer_heading, reveals_allowed
from llmfs.course.exercises.state import exercise_state
from llmfs.course.manifest import load_manifest


@dataclass(frozen=True)
class Hint:
    """One hint of an exercise: ``number`` of ``total`` (``text`` empty when there is none)."""

    exercise_id: str
    number: int
    total: int
    text: str

    def __repr__(self) -> str:
        if not self.total:
            return f"{self.exercise_id} has no hints"
        more = (
            f' (for the next, run hint("{self.exercise_id}", {self.number + 1}))'
            if self.number < self.total
            else " (that was the last hint)"
        )
        return f"hint {self.number} of {self.total} for {self.exercise_id}{more}: {self.text}"

    def _repr_html_(self) -> str:
        return f'<p class="llmfs-hint">{escape(repr(self))}</p>'


def hint(exercise_id: str, number: int = 1) -> Hint:
    """Hint ``number`` (1 for the first) of the exercise, logged the first time it is shown.

    A hint is asked for by its number, written in the cell (``hint("ch02.q1")`` is hint 1,
    ``hint("ch02.q1", 2)`` the next), so running the same cell again (a re-run, Run All, a
    restarted kernel) shows the same hint and counts nothing: the hints used are the highest
    number shown, each hint counted once. A number past the last shows the last. Raises
    :class:`CourseError` for an unknown exercise or a number below 1."""
    exercise = load_manifest().exercise(exercise_id)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise CourseError(
            f"hint({exercise_id!r}, number): number is 1 for the first hint, 2 for the next, "
            f"...; got {number!r}"
        )
    hints = exercise.hints
    if not hints:
        return Hint(exercise_id, 0, 0, "")
    state = exercise_state(exercise_id)
    shown = min(number, len(hints))
    if shown > state.hints_seen:
        record_event("hint", exercise_id, number=shown)
        state.hints_seen = shown
        state.notify()
    return Hint(exercise_id, shown, len(hints), hints[shown - 1])


#: Fewest words an explain answer needs before its model answer may be revealed.
MIN_EXPLAIN_WORDS = 15


@dataclass(frozen=True)
class ModelAnswer:
    """The model answer and rubric of an explain exercise, or why they are not shown yet."""

    exercise_id: str
    shown: bool
    answer: str
    rubric: tuple[str, ...]
    note: str = ""

    def __repr__(self) -> str:
        if not self.shown:
            return f"{self.exercise_id}: {self.note}"
        lines = [model_answer_heading(self.exercise_id)]
        if self.answer:
            lines += ["", "model answer:", self.answer]
        if self.note:
            lines += ["", self.note]
        lines += ["", "rubric (a full answer makes each point):"]
        lines += [f"  [ ] {point}" for point in self.rubric]
        return "\n".join(lines)


def model_answer(
    exercise_id: str, answer: str | None = None, *, notebook: str | Path | None = None
) -> ModelAnswer:
    """The model answer and rubric of an explain exercise, once the learner has written one.

    The learner's answer is ``answer``, or else the text of the exercise's markdown cell in
    ``notebook`` (default: the chapter's notebook file in the current folder, as last saved),
    less the question. With fewer than :data:`MIN_EXPLAIN_WORDS` words of their own, nothing is
    revealed. The model answer comes from the solution notebook (when this installation has
    it), the rubric from the manifest. A reveal is logged. With reveals off (graded work)
    neither is shown, only a note saying so (the cell still runs, so "Run All" goes on).
    Raises :class:`CourseError` for an exercise that is not an explain exercise.
    """
    manifest = load_manifest()
    exercise = manifest.exercise(exercise_id)
    if exercise.kind != "explain":
        raise CourseError(f"{exercise_id} is a {exercise.kind} exercise, not an explain exercise")
    if not reveals_allowed():
        return ModelAnswer(
            exercise_id,
            False,
            "",
            (),
            f"{REVEALS_OFF}: no model answer is shown; your written answer is read by the "
            "instructor against the exercise's rubric",
        )
    chapter = manifest.chapter(exercise.chapter)
    if answer is None:
        path = Path(notebook) if notebook is not None else Path.cwd() / Path(chapter.notebook).name
        answer = _written_answer(path, exercise.tag)
    words = len(_own_words(answer or "", manifest, chapter, exercise.tag).split())
    if words < MIN_EXPLAIN_WORDS:
        return ModelAnswer(
            exercise_id,
            False,
            "",
            exercise.rubric,
            f"write your answer in the exercise's cell first and save the notebook "
            f"({words} of at least {MIN_EXPLAIN_WORDS} words of your own so far); then run "
            "this cell again to compare it with the model answer",
        )
    solution = _solution_block(manifest.root / chapter.solution, exercise.tag)
    state = exercise_state(exercise_id)
    if "answer" not in state.revealed:
        record_event("reveal", exercise_id, fields=["answer"])
        state.revealed.add("answer")
    note = "" if solution else "(this installation has no solution notebooks: the rubric only)"
    return ModelAnswer(exercise_id, True, solution, exercise.rubric, note)


def _cell_text(path: Path, tag: str) -> str | None:
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for cell in notebook.get("cells", []):
        if tag in cell.get("metadata", {}).get("tags", []):
            source = cell.get("source", "")
            return "".join(source) if isinstance(source, list) else str(source)
    return None


def _written_answer(path: Path, tag: str) -> str:
    return _cell_text(path, tag) or ""


_SOLUTION = re.compile(r"<!-- BEGIN SOLUTION -->(.*?)<!-- END SOLUTION -->", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _solution_block(path: Path, tag: str) -> str:
    text = _cell_text(path, tag) or ""
    found = _SOLUTION.search(text)
    return _COMMENT.sub("", found.group(1)).strip() if found else ""


def _own_words(answer: str, manifest: Any, chapter: Any, tag: str) -> str:
    # Words of the unanswered cell (the question, its hints, "_Your answer here._", as the
    # course's student notebook has it) do not count as writing.
    blank = _cell_text(manifest.root / chapter.notebook, tag) or ""
    question = _SOLUTION.sub("", _cell_text(manifest.root / chapter.solution, tag) or "")
    asked = set(blank.split()) | set(question.split())
    text = _COMMENT.sub("", answer)  # the markers and hint comments, not what they enclose
    return " ".join(word for word in text.split() if word not in asked)


__all__ = ["MIN_EXPLAIN_WORDS", "Hint", "ModelAnswer", "hint", "model_answer"]
