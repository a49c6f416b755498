"""The record of a predict exercise: the answer is the text of its ``predict(...)`` cell.

A learner answers a predict exercise by writing literals into the ``predict(...)`` call of the
cell tagged ``exercise:<id>``. That text *is* the answer: Jupyter saves it in the notebook file,
so it survives a kernel restart, travels with the submission and reads the same with the kernel
closed. Everything that judges an answer reads this one record:

* the notebook's ``check(q)`` judges the prediction the cell made (its literals);
* ``llmfs grade`` reads the literals statically (:mod:`llmfs.course.grading.extract`, which uses
  :func:`predict_call` and :func:`call_fields` from here) and compares them with the solution's;
* ``llmfs check`` reads the literals statically too, then judges them, in a cell its headless
  run executes right after the exercise's cell (:func:`judge_cell_source` makes it,
  :func:`judge_in_kernel` runs in it), against the exercise's expression evaluated in its
  fixture (:mod:`llmfs.course.exercises.fixtures`), as the notebook's ``check`` does, so
  neither a line of the attempts log nor the kernel's names can change what counts.

The attempts log (:mod:`llmfs.course.attempts`) is history only: tries, hints and reveals.

Nothing here runs the learner's code: :func:`judge_in_kernel` runs the exercise's own expression
in its fixture (in the namespace it is given only for a course without fixtures).
"""

from __future__ import annotations

import ast
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmfs.course.exercises.entries import predict_exercise
from llmfs.course.exercises.fixtures import exercise_outcome
from llmfs.course.exercises.judge import FieldVerdict, compare
from llmfs.course.exercises.verdict import (
    VERDICTS_ENV,
    judge_predict,
    read_verdicts,
    write_verdict,
)

#: Keywords of ``predict(...)`` that are not fields.
_IGNORED_KEYWORDS = frozenset({"exercise_id", "label"})


@dataclass(frozen=True)
class Unreadable:
    """A field whose entry is not a Python literal; ``text`` is the entry as written."""

    text: str

    def __repr__(self) -> str:
        return f"<not a literal: {self.text}>"


#: ``--jobs`` grades submissions in threads, and CPython 3.11's parser is not safe to run in two
#: threads at once (it can fail with "AST constructor recursion depth mismatch"), so every parse
#: here takes this lock.
_PARSE_LOCK = threading.Lock()


class NotPython(Exception):
    """A cell's source that Python cannot parse; the message says where and why."""


#: Longest cell source parsed, in characters. An exercise cell is a few lines; a longer one is
#: not read, so that one notebook's cell (a literal of millions of items) cannot hold up a
#: class's grading (Python parses about 100 000 characters of literals a second).
MAX_SOURCE_CHARS = 100_000


def parse_source(source: str) -> ast.Module:
    """The cell's source parsed by Python; :class:`NotPython` (with the line) when it cannot be:
    a syntax error, a null byte, nesting too deep for the parser, or a source longer than
    :data:`MAX_SOURCE_CHARS`."""
    if len(source) > MAX_SOURCE_CHARS:
        raise NotPython(
            f"the cell is {len(source)} characters long, more than the {MAX_SOURCE_CHARS} read"
        )
    try:
        with _PARSE_LOCK:
            return ast.parse(source)
    except SyntaxError as error:
        where = f"line {error.lineno}: " if error.lineno else ""
        raise NotPython(f"{where}{error.msg}") from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise NotPython(f"{type(error).__name__}: {error}") from None


def calls_named(tree: ast.AST, name: str) -> list[ast.Call]:
    """Every call of ``name(...)`` or ``x.name(...)`` in ``tree``, in source order."""
    calls = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else None
            )
            if called == name:
                calls.append(node)
    calls.sort(key=lambda call: (call.lineno, call.col_offset))
    return calls


def keyword_text(call: ast.Call, keyword: str) -> str | None:
    """The string literal given to ``keyword`` in ``call`` (None when absent or not a string)."""
    for item in call.keywords:
        if item.arg == keyword and isinstance(item.value, ast.Constant):
            value = item.value.value
            return value if isinstance(value, str) else None
    return None


def predict_call(source: str, exercise_id: str) -> tuple[ast.Call | None, str]:
    """The ``predict(...)`` (else ``dict(...)``) call of an exercise cell, or None and why not.

    With several ``predict`` calls, the one whose ``exercise_id`` keyword is this exercise wins.
    """
    try:
        tree = parse_source(source)
    except NotPython as error:
        return None, f"the exercise cell is not valid Python ({error})"
    calls = calls_named(tree, "predict")
    for call in calls:
        if keyword_text(call, "exercise_id") == exercise_id:
            return call, ""
    if calls:
        return calls[0], ""
    dict_calls = calls_named(tree, "dict")
    if dict_calls:
        return dict_calls[0], ""
    return None, "the exercise cell has no predict(...) call"


def call_fields(call: ast.Call, source: str) -> dict[str, Any]:
    """Field -> literal value (None: unanswered; :class:`Unreadable`: not a literal)."""
    fields: dict[str, Any] = {}
    for item in call.keywords:
        if item.arg is None or item.arg in _IGNORED_KEYWORDS:
            continue
        try:
            fields[item.arg] = ast.literal_eval(item.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            text = ast.get_source_segment(source, item.value) or ast.dump(item.value)
            fields[item.arg] = Unreadable(text.strip())
    return fields


def record_of(source: str, exercise_id: str) -> tuple[dict[str, Any] | None, str]:
    """The record in an exercise cell's source: field -> literal (``None``: unanswered,
    :class:`Unreadable`: not a literal), or ``None`` and why it cannot be read."""
    call, problem = predict_call(source, exercise_id)
    if call is None:
        return None, problem
    return call_fields(call, source), ""


def _entry(value: Any) -> Any:
    # A field that is not a literal is judged as its text: unreadable, never computed.
    return value.text if isinstance(value, Unreadable) else value


def judge_record(
    exercise_id: str,
    record: Mapping[str, Any],
    namespace: Mapping[str, Any],
    *,
    manifest: Any = None,
) -> tuple[FieldVerdict, ...]:
    """The verdicts of ``record`` (what :func:`record_of` read) for the predict exercise
    ``exercise_id``, its expression run in the exercise's fixture
    (:func:`~llmfs.course.exercises.fixtures.exercise_outcome`; ``namespace`` only when the
    course defines none): the same judgement as the notebook's ``check`` of the same cell (one
    :func:`~llmfs.course.exercises.judge.compare`, with the exercise's own mistakes), without
    recording anything. A field the exercise does not ask is ignored. Raises
    :class:`~llmfs.course.CourseError` for an exercise that is not a predict exercise,
    :class:`~llmfs.course.exercises.fixtures.FixtureError` when its fixture fails and
    :class:`~llmfs.course.exercises.describe.ExpressionError` when the expression fails."""
    exercise = predict_exercise(exercise_id, manifest)
    fields = list(exercise.fields)
    outcome = exercise_outcome(exercise_id, namespace, manifest=manifest)
    answers = {name: _entry(value) for name, value in record.items() if name in fields}
    return compare(answers, outcome, fields, mistakes=exercise.mistakes)


def judge_cell_source(exercise_id: str, record: Mapping[str, Any]) -> str:
    """The source of the cell ``llmfs check`` runs right after an exercise's cell: it judges the
    statically read ``record`` there (in the notebook's names at that point) with
    :func:`judge_in_kernel`."""
    data = json.dumps({k: _entry(v) for k, v in record.items()})
    return (
        "from llmfs.course.exercises.record import judge_in_kernel as _llmfs_judge\n"
        f"_llmfs_judge({exercise_id!r}, {data!r}, globals())\n"
        "del _llmfs_judge"
    )


def judge_in_kernel(exercise_id: str, record_json: str, namespace: Mapping[str, Any]) -> None:
    """Judges a record in a running notebook with
    :func:`~llmfs.course.exercises.verdict.judge_predict`, the expression evaluated in the
    exercise's fixture (:func:`~llmfs.course.exercises.fixtures.exercise_outcome`), and appends
    the exercise's verdict to the file named by :data:`VERDICTS_ENV`
    (:func:`~llmfs.course.exercises.verdict.write_verdict`), or why the expression could not run.
    Prints nothing and never raises (the run must go on)."""
    try:
        exercise = predict_exercise(exercise_id)
        outcome = exercise_outcome(exercise_id, namespace)  # the fixture, not the kernel's names
        verdict = judge_predict(exercise, json.loads(record_json), outcome)
    except Exception as error:  # the run must go on: the error is reported, not raised
        write_verdict(None, exercise_id, f"{type(error).__name__}: {error}")
        return
    write_verdict(verdict, exercise_id)


__all__ = [
    "MAX_SOURCE_CHARS",
    "VERDICTS_ENV",
    "NotPython",
    "Unreadable",
    "call_fields",
    "calls_named",
    "judge_cell_source",
    "judge_in_kernel",
    "judge_record",
    "keyword_text",
    "parse_source",
    "predict_call",
    "read_verdicts",
    "record_of",
]
