"""Answers read statically from a notebook's exercise cells, as plain JSON-serializable data.

Nothing here runs the learner's code. An exercise is found by its cell tag (``exercise:<id>``);
a predict exercise whose tag was removed is still found by the ``exercise_id="<id>"`` keyword of
its ``predict(...)`` call. What a cell holds becomes:

* **predict**: ``{field: value}`` from the keyword literals of the cell's ``predict(...)`` call
  (or the ``dict(...)`` call of a several-values exercise), read with ``ast.literal_eval``: the
  exercise's record (:mod:`llmfs.course.exercises.record`, which reads it here, in
  ``llmfs check`` and in the notebook's ``check``). A field left as ``None`` is unanswered; a
  field that is not a literal (``shape=view.shape``) is :class:`Unreadable`: the grader scores
  written answers, never computed ones.
* **explain**: the cell's markdown minus every line of the blank student cell (the question, the
  hint, the ``_Your answer here._`` placeholder); empty means unanswered.
* **implement**: a small module with the function the manifest names, as defined in the exercise
  cell, preceded by the top-level imports, definitions and assignments of earlier cells that it
  needs (transitively, by name). Each needed statement is wrapped in ``try``/``except Exception``
  so that a broken helper leaves the function itself defined. A function that imports from the
  course's own tooling (``llmfs.course``: the checks and their reference answers) is not read.

Duplicated cells (two cells tagged with one exercise) are reported; the first is graded.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercises.record import (
    NotPython,
    Unreadable,
    call_fields,
    calls_named,
    keyword_text,
    parse_source,
    predict_call,
)
from llmfs.course.manifest import EXERCISE_TAG_PREFIX, Exercise

Notebook = dict[str, Any]

ANSWER_PLACEHOLDER = "_Your answer here._"
#: An implement function may use the tensor library, not the course's checks and their answers.
COURSE_PACKAGE = "llmfs.course"


@dataclass(frozen=True)
class Found:
    """One exercise as found in a notebook.

    ``positions`` are the 1-based positions of every cell tagged with the exercise (empty when
    none is; then ``position`` may still name an untagged cell found by its ``exercise_id``).
    ``answer`` is None when the exercise is missing or unanswered; ``problem`` explains a cell
    that exists but cannot be read (a syntax error, no ``predict(...)`` call, no function).
    """

    exercise: Exercise
    position: int | None
    positions: tuple[int, ...] = ()
    answer: Any = None
    problem: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def missing(self) -> bool:
        """True when no cell holds this exercise."""
        return self.position is None


#: Largest notebook file read, in bytes. A chapter notebook with its outputs is a few MiB.
MAX_NOTEBOOK_BYTES = 64 * 1024 * 1024
#: Deepest JSON nesting a notebook may have. nbformat's own structure is about five levels deep
#: (cells, a cell, its outputs, an output's data, a value); deeper is a hostile file, refused
#: before anything walks it recursively (``repr``, ``json.dumps``, the kernel's reply).
MAX_NOTEBOOK_DEPTH = 100


def _depth_beyond(value: Any, limit: int) -> bool:
    # Iterative, so a deep value cannot exhaust the stack of the check meant to refuse it.
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((inner, depth + 1) for inner in item.values())
        elif isinstance(item, list):
            stack.extend((inner, depth + 1) for inner in item)
    return False


def _cell_problem(cell: Any) -> str:
    # The fields the grader and the runner read, with nbformat's types; "" when all are right.
    if not isinstance(cell, dict):
        return f"is a JSON {type(cell).__name__}, not an object"
    if cell.get("cell_type") not in ("code", "markdown", "raw"):
        return "has no cell_type of code, markdown or raw"
    source = cell.get("source", "")
    if not isinstance(source, str) and not (
        isinstance(source, list) and all(isinstance(line, str) for line in source)
    ):
        return "has a source that is neither a string nor a list of strings"
    metadata = cell.get("metadata", {})
    if not isinstance(metadata, dict):
        return "has metadata that is not an object"
    tags = metadata.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        return "has tags that are not a list of strings"
    if cell["cell_type"] == "code" and not isinstance(cell.get("outputs", []), list):
        return "has outputs that are not a list"
    return ""


def read_notebook_bytes(path: Path) -> bytes:
    """The bytes of the notebook file at ``path``; :class:`CourseError` when it cannot be read
    (the OS error) or is larger than :data:`MAX_NOTEBOOK_BYTES` (it is not read into memory)."""
    try:
        with path.open("rb") as handle:
            # One byte over the limit tells a file that is too large, even one that grows.
            data = handle.read(MAX_NOTEBOOK_BYTES + 1)
            size = max(len(data), os.fstat(handle.fileno()).st_size)
    except OSError as error:
        raise CourseError(f"{path}: cannot be read ({error})") from None
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise CourseError(
            f"{path}: {size} bytes, more than the {MAX_NOTEBOOK_BYTES} a notebook may be"
        )
    return data


def parse_notebook(data: bytes, label: str) -> Notebook:
    """The notebook JSON in ``data``; :class:`CourseError` naming ``label`` and what is wrong when
    it is not a readable notebook: not UTF-8 (the byte), invalid JSON (line and column), nested
    deeper than :data:`MAX_NOTEBOOK_DEPTH` (or than the JSON parser's stack), too large for
    memory, not an object with a ``cells`` list, or a cell whose ``cell_type``, ``source``,
    ``metadata``, tags or outputs do not have nbformat's types (the cell's position).

    Never raises anything else, whatever ``data`` holds: one learner's file must not stop a
    class's grading. Lenient on purpose otherwise: a learner's notebook may lack cell ids or
    have an old minor format.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise CourseError(f"{label}: not UTF-8 text (byte {error.start})") from None
    except MemoryError:
        raise CourseError(f"{label}: too large to read ({len(data)} bytes)") from None
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as error:
        raise CourseError(
            f"{label}: invalid notebook JSON at line {error.lineno} column {error.colno} "
            f"({error.msg})"
        ) from None
    except RecursionError:
        raise CourseError(
            f"{label}: JSON nested deeper than a notebook can be (more than "
            f"{MAX_NOTEBOOK_DEPTH} levels)"
        ) from None
    except MemoryError:
        raise CourseError(f"{label}: too large to read ({len(data)} bytes)") from None
    except ValueError as error:  # e.g. an integer with more digits than Python converts
        raise CourseError(f"{label}: invalid notebook JSON ({error})") from None
    if not isinstance(notebook, dict):
        kind = type(notebook).__name__
        raise CourseError(f"{label}: not a notebook (the JSON is a {kind}, not an object)")
    if not isinstance(notebook.get("cells"), list):
        raise CourseError(f"{label}: not a notebook (no 'cells' list)")
    if _depth_beyond(notebook, MAX_NOTEBOOK_DEPTH):
        raise CourseError(
            f"{label}: JSON nested deeper than a notebook can be (more than "
            f"{MAX_NOTEBOOK_DEPTH} levels)"
        )
    for position, cell in enumerate(notebook["cells"], start=1):
        problem = _cell_problem(cell)
        if problem:
            raise CourseError(f"{label}: cell #{position} is not a notebook cell (it {problem})")
    return notebook


def source_of(cell: Mapping[str, Any]) -> str:
    """A cell's source as one string (nbformat allows a string or a list of lines)."""
    source = cell.get("source", "")
    if isinstance(source, list):
        return "".join(str(part) for part in source)
    return str(source)


def tags_of(cell: Mapping[str, Any]) -> list[str]:
    """A cell's metadata tags (empty when absent or malformed)."""
    metadata = cell.get("metadata")
    tags = metadata.get("tags", []) if isinstance(metadata, dict) else []
    return [str(tag) for tag in tags] if isinstance(tags, list) else []


def tagged_cells(notebook: Notebook) -> dict[str, list[int]]:
    """Exercise id -> 1-based positions of every cell tagged with it (duplicates kept)."""
    found: dict[str, list[int]] = {}
    for position, cell in enumerate(notebook["cells"], start=1):
        for tag in tags_of(cell):
            if tag.startswith(EXERCISE_TAG_PREFIX):
                found.setdefault(tag[len(EXERCISE_TAG_PREFIX) :], []).append(position)
    return found


def cell_at(notebook: Notebook, position: int) -> dict[str, Any]:
    """The cell at a 1-based position."""
    cell: dict[str, Any] = notebook["cells"][position - 1]
    return cell


def sha256_text(text: str) -> str:
    """Hex SHA-256 of UTF-8 text (answers are compared and keyed by it)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# predict
# --------------------------------------------------------------------------------------------


def _untagged_predict_cell(notebook: Notebook, exercise_id: str) -> int | None:
    # A learner who deleted the tag (or pasted the cell into a new one) keeps the call's id.
    for position, cell in enumerate(notebook["cells"], start=1):
        if cell.get("cell_type") != "code":
            continue
        source = source_of(cell)
        if exercise_id not in source:
            continue
        try:
            tree = parse_source(source)
        except NotPython:
            continue
        if any(keyword_text(c, "exercise_id") == exercise_id for c in calls_named(tree, "predict")):
            return position
    return None


# --------------------------------------------------------------------------------------------
# explain
# --------------------------------------------------------------------------------------------


def explain_text(source: str, blank_source: str) -> str:
    """The learner's own text in an explain cell: every line of the blank cell removed.

    Lines are compared with surrounding spaces stripped; blank lines at either end are dropped.
    """
    blank = {line.strip() for line in blank_source.splitlines() if line.strip()}
    blank.add(ANSWER_PLACEHOLDER)
    kept = [line.rstrip() for line in source.splitlines() if line.strip() not in blank]
    return "\n".join(kept).strip()


# --------------------------------------------------------------------------------------------
# implement
# --------------------------------------------------------------------------------------------


def _bound_names(node: ast.stmt) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def _used_names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _guarded(statement: ast.stmt) -> ast.stmt:
    handler = ast.ExceptHandler(
        type=ast.Name("Exception", ast.Load()), name=None, body=[ast.Pass()]
    )
    return ast.Try(body=[statement], handlers=[handler], orelse=[], finalbody=[])


def function_definition(source: str, name: str) -> ast.FunctionDef | None:
    """The last top-level ``def name`` of a cell's source (None if absent or not Python)."""
    try:
        tree = parse_source(source)
    except NotPython:
        return None
    found = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            found = node
    return found


def cell_functions(source: str) -> dict[str, str]:
    """The :func:`function_fingerprint` of every top-level ``def`` of a cell's source, by name
    (the last of a name; empty when the source is not Python).

    An implement cell is its stub when ALL its functions are the blank cell's, not only the one
    the check calls: a cell may give the learner several functions to write behind one entry
    point (``save_and_load`` calling ``save_checkpoint`` and ``load_checkpoint``), and an
    unchanged entry point says nothing about the functions it calls."""
    try:
        tree = parse_source(source)
    except NotPython:
        return {}
    return {
        node.name: function_fingerprint(node)
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
    }


def function_fingerprint(node: ast.FunctionDef) -> str:
    """The function's code without comments, docstring or positions (to tell a stub apart)."""
    body = list(node.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    copy = ast.FunctionDef(
        name=node.name,
        args=node.args,
        body=body,
        decorator_list=node.decorator_list,
        returns=node.returns,
        type_comment=None,
    )
    return ast.dump(copy, annotate_fields=False, include_attributes=False)


def implement_module(notebook: Notebook, position: int, name: str) -> tuple[str | None, str]:
    """The source of a module defining ``name`` as the exercise cell at ``position`` does.

    Earlier code cells contribute the top-level statements (imports, definitions, assignments)
    the function needs, transitively. Returns (None, why) when the cell has no such function.
    """
    cells = notebook["cells"][:position]
    statements: list[ast.stmt] = []
    for index, cell in enumerate(cells, start=1):
        if cell.get("cell_type") != "code":
            continue
        try:
            tree = parse_source(source_of(cell))
        except NotPython as error:
            if index == position:
                return None, f"the exercise cell is not valid Python ({error})"
            continue
        for node in tree.body:
            if _bound_names(node):
                statements.append(node)
    target = function_definition(source_of(notebook["cells"][position - 1]), name)
    if target is None:
        return None, f"the exercise cell defines no function {name}(...)"
    needed: set[str] = _used_names(target)
    chosen: list[ast.stmt] = []
    # Walk backwards so the latest definition of a name (notebook order) is the one kept.
    for node in reversed(statements):
        if node is target:
            continue
        bound = _bound_names(node)
        if name in bound and isinstance(node, ast.FunctionDef):
            continue
        if bound & needed:
            chosen.append(node)
            needed -= bound
            needed |= _used_names(node)
    chosen.reverse()
    for node in [*chosen, target]:
        for inner in ast.walk(node):
            modules = (
                [inner.module or ""]
                if isinstance(inner, ast.ImportFrom)
                else [alias.name for alias in inner.names]
                if isinstance(inner, ast.Import)
                else []
            )
            if any(m == COURSE_PACKAGE or m.startswith(COURSE_PACKAGE + ".") for m in modules):
                return None, (
                    f"{name}(...) imports the course's own tooling ({COURSE_PACKAGE}), which "
                    "holds the checks' answers; write the function from the chapter's ideas"
                )
    module = ast.Module(body=[*(_guarded(node) for node in chosen), target], type_ignores=[])
    return ast.unparse(ast.fix_missing_locations(module)), ""


# --------------------------------------------------------------------------------------------
# one exercise, one notebook
# --------------------------------------------------------------------------------------------


def find_exercise(
    notebook: Notebook,
    exercise: Exercise,
    *,
    blank_source: str = "",
    function: str | None = None,
    tagged: Mapping[str, list[int]] | None = None,
) -> Found:
    """The exercise's answer in ``notebook`` (see the module docstring for each kind).

    ``blank_source`` is the exercise cell of the blank student notebook (explain: the text to
    remove; implement: the stub to tell apart); ``function`` the implement function's name.
    """
    where = tagged if tagged is not None else tagged_cells(notebook)
    positions = tuple(where.get(exercise.id, ()))
    notes: list[str] = []
    position: int | None = positions[0] if positions else None
    if len(positions) > 1:
        cells = ", ".join(f"#{p}" for p in positions)
        notes.append(
            f"{len(positions)} cells are tagged {exercise.tag} (cells {cells}); "
            f"only the first (#{positions[0]}) is graded"
        )
    if position is None and exercise.kind == "predict":
        position = _untagged_predict_cell(notebook, exercise.id)
        if position is not None:
            notes.append(f"found untagged in cell #{position} by its exercise_id")
    if position is None:
        return Found(exercise, None, positions, None, "", tuple(notes))
    cell = cell_at(notebook, position)
    source = source_of(cell)
    if exercise.kind == "predict":
        if cell.get("cell_type") != "code":
            return Found(exercise, position, positions, None, "the exercise cell is not code")
        call, problem = predict_call(source, exercise.id)
        if call is None:
            return Found(exercise, position, positions, None, problem, tuple(notes))
        return Found(exercise, position, positions, call_fields(call, source), "", tuple(notes))
    if exercise.kind == "explain":
        text = explain_text(source, blank_source)
        return Found(exercise, position, positions, text or None, "", tuple(notes))
    name = function or ""
    if cell.get("cell_type") != "code":
        return Found(exercise, position, positions, None, "the exercise cell is not code")
    try:
        module, problem = implement_module(notebook, position, name)
        if module is None:
            return Found(exercise, position, positions, None, problem, tuple(notes))
        stub = cell_functions(blank_source)
        if name in stub and cell_functions(source) == stub:
            return Found(exercise, position, positions, None, "", tuple(notes))
    except (RecursionError, MemoryError):
        problem = "the exercise cell is nested too deeply to read"
        return Found(exercise, position, positions, None, problem, tuple(notes))
    return Found(exercise, position, positions, module, "", tuple(notes))


def plain(value: Any) -> Any:
    """An extracted answer as JSON data (an :class:`Unreadable` entry becomes its text)."""
    if isinstance(value, Unreadable):
        return {"not a literal": value.text}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v) for v in value), key=repr)
    if isinstance(value, (bytes, complex)):
        return repr(value)
    return value
