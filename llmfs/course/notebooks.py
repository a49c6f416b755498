"""Reading course notebooks as plain JSON, and checking them against the manifest.

Notebooks are handled as the JSON dictionaries of nbformat 4.5 (no round trip through a richer
model), so that what the build writes is exactly what it decides to write.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmfs.course import CourseError
from llmfs.course.manifest import EXERCISE_TAG_PREFIX, Chapter, Manifest

Notebook = dict[str, Any]
Cell = dict[str, Any]


def read_notebook(path: Path, label: str | None = None) -> Notebook:
    """Read a notebook file as nbformat 4.5+ JSON in which every cell has an id.

    Raises :class:`CourseError` naming the file when it is missing, not JSON, not nbformat 4 with
    minor version >= 5, or has a cell without an ``id`` (ids are what keep student cells stable).
    """
    name = label or str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CourseError(f"{name}: the notebook does not exist") from None
    except json.JSONDecodeError as error:
        raise CourseError(f"{name}: not valid notebook JSON ({error})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise CourseError(f"{name}: not a notebook (no 'cells' list)")
    if data.get("nbformat") != 4 or int(data.get("nbformat_minor", 0)) < 5:
        raise CourseError(
            f"{name}: nbformat must be 4.5 or later (cells need ids), got "
            f"{data.get('nbformat')}.{data.get('nbformat_minor')}; save it with JupyterLab 4"
        )
    for position, cell in enumerate(data["cells"], start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("id"), str) or not cell["id"]:
            raise CourseError(f"{name}: cell #{position} has no id")
    return data


def cell_source(cell: Cell) -> str:
    """The cell's source as one string (nbformat allows a string or a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def cell_tags(cell: Cell) -> list[str]:
    """The cell's metadata tags, in file order (empty when it has none)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return [str(tag) for tag in tags] if isinstance(tags, list) else []


def cell_label(notebook_label: str, position: int, cell: Cell) -> str:
    """How messages name a cell: notebook, 1-based position among all cells, and cell id."""
    return f"{notebook_label} cell #{position} (id {cell.get('id')!r})"


def cell_exercise(cell: Cell, label: str) -> str | None:
    """The exercise id the cell is tagged with (``exercise:<id>``), or None.

    Raises :class:`CourseError` naming the cell when it carries more than one exercise tag.
    """
    prefix = EXERCISE_TAG_PREFIX
    ids = [tag[len(prefix) :] for tag in cell_tags(cell) if tag.startswith(prefix)]
    if len(ids) > 1:
        raise CourseError(f"{label}: one cell carries several exercise tags {ids}")
    return ids[0] if ids else None


def exercise_cells(notebook: Notebook, label: str) -> dict[str, int]:
    """Map each exercise id tagged in the notebook to the 1-based position of its cell.

    Raises :class:`CourseError` when two cells carry the same exercise tag.
    """
    found: dict[str, int] = {}
    for position, cell in enumerate(notebook["cells"], start=1):
        exercise_id = cell_exercise(cell, cell_label(label, position, cell))
        if exercise_id is None:
            continue
        if exercise_id in found:
            raise CourseError(
                f"{label}: exercise {exercise_id!r} is tagged on cell #{found[exercise_id]} "
                f"and again on cell #{position}"
            )
        found[exercise_id] = position
    return found


def chapter_disagreements(chapter: Chapter, notebook: Notebook, label: str) -> list[str]:
    """Every way the notebook's exercise cells and the chapter's manifest entry disagree.

    Each message names the notebook and the exercise: an exercise listed in the manifest with no
    tagged cell, or a tagged cell whose exercise the chapter does not list. Empty when they agree.
    """
    in_notebook = exercise_cells(notebook, label)
    listed = [exercise.id for exercise in chapter.exercises]
    problems = [
        f"{label}: exercise {exercise_id!r} is in the manifest but no cell is tagged "
        f"'{EXERCISE_TAG_PREFIX}{exercise_id}'"
        for exercise_id in listed
        if exercise_id not in in_notebook
    ]
    problems += [
        f"{label}: cell #{position} is tagged as exercise {exercise_id!r}, which chapter "
        f"{chapter.id} of the manifest does not list"
        for exercise_id, position in in_notebook.items()
        if exercise_id not in listed
    ]
    return problems


def manifest_disagreements(manifest: Manifest, root: Path | None = None) -> list[str]:
    """Every disagreement between the manifest and the notebooks on disk under ``root``.

    Published chapters: both notebooks exist and their exercise cells match the manifest.
    Planned chapters: neither notebook exists yet (an existing one must be published).
    Unreadable or ambiguously tagged notebooks are reported as disagreements, not raised.
    """
    base = root if root is not None else manifest.root
    problems: list[str] = []
    for chapter in manifest.chapters:
        for relative in (chapter.solution, chapter.notebook):
            path = base / relative
            if not chapter.published:
                if path.exists():
                    problems.append(
                        f"{relative}: exists, but chapter {chapter.id} is 'planned' in the "
                        "manifest (set status = 'published' and list its exercises)"
                    )
                continue
            try:
                notebook = read_notebook(path, relative)
                problems += chapter_disagreements(chapter, notebook, relative)
            except CourseError as error:
                problems.append(str(error))
    return problems
