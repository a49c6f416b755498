"""The solution notebooks' predicted answers, and one way of writing nested numbers.

Both the output search of ``test_chapters.py`` (nothing printed at or after an exercise shows its
answer) and the source search of ``test_source_leaks.py`` (nothing written above an exercise
states its answer) read the answers here, from the literals of each solution's
``predict(...)`` cell, and compare numbers through :func:`canonical`.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from llmfs.course.manifest import Chapter, Exercise
from llmfs.course.notebooks import cell_source, exercise_cells, read_notebook

REPO = Path(__file__).resolve().parents[2]


def solution_answers(chapter: Chapter, exercise: Exercise) -> dict[str, Any]:
    """The predicted fields written in the solution's exercise cell (read statically): the
    keyword literals of its one ``name = predict(expression, exercise_id=..., field=value, ...)``
    statement, ``exercise_id`` left out."""
    solution = read_notebook(REPO / chapter.solution)
    cell = solution["cells"][exercise_cells(solution, chapter.solution)[exercise.id] - 1]
    (statement,) = ast.parse(cell_source(cell)).body
    assert isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call)
    return {
        keyword.arg: ast.literal_eval(keyword.value)
        for keyword in statement.value.keywords
        if keyword.arg != "exercise_id"
    }


NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?(?!\w)")


def canonical_number(text: str) -> str:
    """A printed number written one way: ``10``, ``10.``, ``10.0`` and ``1e1`` all read ``10``."""
    number = float(text)
    return str(int(number)) if number.is_integer() else repr(number)


def canonical(text: str) -> str:
    """``text`` with every way of printing nested numbers made one: round brackets square,
    commas gone, numbers canonical, whitespace single and none inside brackets. So a Python
    list or tuple repr, NumPy's ``[ 1  2 10]``, ``[10. 11.]`` and a tensor repr's values
    (wrapped over lines) of the same numbers all read ``[1 2 10]``."""
    text = text.translate({ord("("): "[", ord(")"): "]", ord(","): " "})
    text = NUMBER.sub(lambda match: canonical_number(match.group()), text)
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\[ ", "[", re.sub(r" \]", "]", text))


def leaves(value: Any) -> list[Any]:
    """The entries of a nested list, flattened in row-major order."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in leaves(item)]
    return [value]


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
