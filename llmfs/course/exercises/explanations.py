"""Explanations that give an answer away, shown by the check once the exercise is finished.

A chapter explains a result after the learner predicted it: why the slice is not contiguous, why
the loss starts at ``ln 12``. Such a text states the answer, so it must not be on screen while the
learner predicts, and the text right under a check is. The chapter's source keeps it as a
markdown cell of the solution notebook tagged ``explains:<exercise id>`` (one tag per exercise it
gives away; several tags when it gives away several), below the exercise's cell. ``llmfs build``
leaves that cell out of the student notebook and writes its text into the course's explanations
file (:data:`EXPLANATIONS_FILE`, next to the manifest, shipped with it); the exercise's
``check(...)`` shows it under its verdict once every named exercise is finished (every field
right, or its answer shown; with reveals off, every field right), and never before.

The file is generated data, like the student notebooks: ``llmfs build`` writes it and
``llmfs build --check`` reports it when it differs from the solutions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmfs.course import CourseError
from llmfs.course.notebooks import Notebook, cell_label, cell_source, cell_tags, exercise_cells

#: The tag of a solution's markdown cell that explains (and so answers) an exercise.
EXPLAINS_TAG = "explains:"

#: Where the explanations live, relative to the course root (next to the manifest).
EXPLANATIONS_FILE = "course/explanations.json"


@dataclass(frozen=True)
class Explanation:
    """One explaining cell: the exercises whose answers it gives (all must be finished before
    it shows), its chapter and cell id (where it came from) and its markdown text."""

    exercises: tuple[str, ...]
    chapter: str
    cell: str
    markdown: str


def explained_exercises(tags: Sequence[str]) -> tuple[str, ...]:
    """The exercise ids of a cell's ``explains:<id>`` tags, in tag order (empty for none)."""
    return tuple(tag[len(EXPLAINS_TAG) :].strip() for tag in tags if tag.startswith(EXPLAINS_TAG))


def notebook_explanations(notebook: Notebook, label: str, chapter: Any) -> list[Explanation]:
    """The explaining cells of a chapter's solution notebook, in notebook order.

    Raises :class:`CourseError` naming the cell for an ``explains:`` tag on a cell that is not
    markdown, an empty id, an exercise that is not a predict exercise of ``chapter``, a cell
    above the exercise it explains, an explaining cell that is itself an exercise, and one that
    ends with a colon (it introduced the cell after it, which the check does not show).
    """
    positions = exercise_cells(notebook, label)
    kinds = {exercise.id: exercise.kind for exercise in chapter.exercises}
    found = []
    for position, cell in enumerate(notebook.get("cells", []), start=1):
        tags = cell_tags(cell)
        exercises = explained_exercises(tags)
        if not exercises:
            continue
        where = cell_label(label, position, cell)
        if cell.get("cell_type") != "markdown":
            raise CourseError(f"{where}: only a markdown cell can be tagged {EXPLAINS_TAG!r}")
        if any(tag.startswith("exercise:") for tag in tags):
            raise CourseError(f"{where}: an exercise cell cannot also explain an exercise")
        for exercise_id in exercises:
            if not exercise_id:
                raise CourseError(f"{where}: {EXPLAINS_TAG!r} needs an exercise id after it")
            if kinds.get(exercise_id) != "predict":
                raise CourseError(
                    f"{where}: {EXPLAINS_TAG}{exercise_id} names no predict exercise of "
                    f"{chapter.id} (its check shows the explanation)"
                )
            if positions[exercise_id] > position:
                raise CourseError(
                    f"{where}: it explains {exercise_id}, whose cell (#{positions[exercise_id]}) "
                    "comes after it; an explanation goes below the exercise it answers"
                )
        text = cell_source(cell)
        if text.rstrip().endswith(":"):
            raise CourseError(
                f"{where}: an explanation ends with a colon, but the check shows it away from "
                "the cell it introduces; end it with a sentence (say 'the cell below shows it')"
            )
        found.append(Explanation(exercises, chapter.id, str(cell.get("id")), text))
    return found


def render_explanations(explanations: Sequence[Explanation]) -> str:
    """The explanations file's text: deterministic JSON (one entry per explaining cell, in
    course order), ending with a newline."""
    entries = [
        {
            "cell": item.cell,
            "chapter": item.chapter,
            "exercises": list(item.exercises),
            "markdown": item.markdown,
        }
        for item in explanations
    ]
    return json.dumps({"explanations": entries}, indent=1, ensure_ascii=False) + "\n"


_LOADED: dict[str, tuple[str, tuple[Explanation, ...]]] = {}


def load_explanations(root: Path | None = None) -> tuple[Explanation, ...]:
    """The course's explanations (from :data:`EXPLANATIONS_FILE` under ``root``, default this
    installation's course root); none when the file does not exist (a course without any).
    Raises :class:`CourseError` naming the file when it is not the shape the build writes."""
    if root is None:
        from llmfs.course.manifest import load_manifest

        root = load_manifest().root
    path = Path(root) / EXPLANATIONS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    cached = _LOADED.get(str(path))
    if cached is not None and cached[0] == text:
        return cached[1]
    try:
        entries = json.loads(text)["explanations"]
        loaded = tuple(
            Explanation(
                tuple(str(e) for e in entry["exercises"]),
                str(entry["chapter"]),
                str(entry["cell"]),
                str(entry["markdown"]),
            )
            for entry in entries
        )
    except (ValueError, KeyError, TypeError) as error:
        raise CourseError(
            f"{path}: not an explanations file as `llmfs build` writes it ({error}); "
            "run `llmfs build`"
        ) from None
    _LOADED[str(path)] = (text, loaded)
    return loaded


def explanations_for(exercise_id: str | None, finished: bool) -> tuple[str, ...]:
    """The markdown of every explanation of ``exercise_id`` that may be shown now: none unless
    ``finished`` (the exercise's own check finished it), and an explanation that also gives
    away other exercises only once each of them is finished too."""
    if exercise_id is None or not finished:
        return ()
    from llmfs.course.exercises.state import exercise_finished

    shown = []
    for item in load_explanations():
        if exercise_id not in item.exercises:
            continue
        others = [other for other in item.exercises if other != exercise_id]
        if all(exercise_finished(other) for other in others):
            shown.append(item.markdown)
    return tuple(shown)


__all__ = [
    "EXPLAINS_TAG",
    "EXPLANATIONS_FILE",
    "Explanation",
    "explained_exercises",
    "explanations_for",
    "load_explanations",
    "notebook_explanations",
    "render_explanations",
]
