"""The solution notebooks' implement functions, read as the grader reads them."""

from __future__ import annotations

import json
from pathlib import Path

from llmfs.course.grading.extract import implement_module
from llmfs.course.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]


def solution_functions() -> dict[str, object]:
    """Every function the solution notebooks define in an implement exercise's cell, with the
    helpers of earlier cells it uses, as the grader reads it (:func:`implement_module`)."""
    functions: dict[str, object] = {}
    manifest = load_manifest(REPO / "course" / "manifest.toml")
    for chapter in manifest.chapters:
        notebook = json.loads((REPO / chapter.solution).read_text(encoding="utf-8"))
        for position, cell in enumerate(notebook["cells"], start=1):
            tags = cell["metadata"].get("tags", [])
            ids = [t.removeprefix("exercise:") for t in tags if t.startswith("exercise:")]
            if ids and manifest.exercise(ids[0]).kind == "implement":
                name = manifest.exercise(ids[0]).function
                source, problem = implement_module(notebook, position, name)
                assert source is not None, problem
                namespace: dict[str, object] = {}
                exec(compile(source, chapter.solution, "exec"), namespace)
                functions[ids[0]] = namespace[name]
    return functions


#: Exercise id -> the solution's function (computed once, at import).
SOLUTIONS = solution_functions()
