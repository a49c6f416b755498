"""Static answer extraction and field comparison: what the grader reads, without running code."""

from __future__ import annotations

import json

import gradingkit as kit
import pytest

from llmfs.course import CourseError
from llmfs.course.grading import extract
from llmfs.course.grading.score import field_matches
from llmfs.course.manifest import Exercise


def _nb(*cells: dict) -> dict:
    return {"cells": list(cells), "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _code(source: str, tag: str | None = None) -> dict:
    metadata = {"tags": [f"exercise:{tag}"]} if tag else {}
    return {"cell_type": "code", "metadata": metadata, "source": source, "outputs": []}


def _md(source: str, tag: str | None = None) -> dict:
    metadata = {"tags": [f"exercise:{tag}"]} if tag else {}
    return {"cell_type": "markdown", "metadata": metadata, "source": source}


PREDICT = Exercise("ch09.q1", "ch09", "predict", 2, "Predict")
EXPLAIN = Exercise("ch09.why", "ch09", "explain", 2, "Explain")
IMPLEMENT = Exercise("ch09.f", "ch09", "implement", 3, "Implement")


def test_predict_fields_are_literals_none_is_unanswered_and_code_is_unreadable() -> None:
    source = (
        'q = predict("v.T", exercise_id="ch09.q1",\n'
        "    shape=[3, 2],  # PREDICTION\n    strides=None,\n    offsets=list(range(6)),\n)"
    )
    found = extract.find_exercise(_nb(_code(source, "ch09.q1")), PREDICT)
    assert found.answer["shape"] == [3, 2]
    assert found.answer["strides"] is None
    assert found.answer["offsets"] == extract.Unreadable("list(range(6))")
    assert "exercise_id" not in found.answer


def test_the_predict_call_with_this_exercise_id_wins_over_others_in_the_cell() -> None:
    source = (
        'a = predict("x", exercise_id="other", shape=[1])\n'
        'b = predict("y", exercise_id="ch09.q1", shape=[2])'
    )
    found = extract.find_exercise(_nb(_code(source, "ch09.q1")), PREDICT)
    assert found.answer == {"shape": [2]}


def test_an_untagged_predict_cell_is_found_by_its_exercise_id_and_noted() -> None:
    notebook = _nb(_code("x = 1"), _code('predict("v", exercise_id="ch09.q1", shape=[4])'))
    found = extract.find_exercise(notebook, PREDICT)
    assert found.position == 2 and found.answer == {"shape": [4]}
    assert "untagged" in found.notes[0]


def test_duplicate_cells_are_reported_and_only_the_first_is_read() -> None:
    notebook = _nb(
        _code('predict("v", exercise_id="ch09.q1", shape=[1])', "ch09.q1"),
        _code('predict("v", exercise_id="ch09.q1", shape=[2])', "ch09.q1"),
    )
    found = extract.find_exercise(notebook, PREDICT)
    assert found.answer == {"shape": [1]} and found.positions == (1, 2)
    assert "2 cells are tagged exercise:ch09.q1 (cells #1, #2)" in found.notes[0]


def test_a_cell_that_is_not_python_or_has_no_call_is_a_problem_not_a_crash() -> None:
    broken = extract.find_exercise(_nb(_code("predict(", "ch09.q1")), PREDICT)
    assert broken.answer is None and "not valid Python (line 1" in broken.problem
    empty = extract.find_exercise(_nb(_code("pass", "ch09.q1")), PREDICT)
    assert "no predict(...) call" in empty.problem


def test_a_missing_exercise_is_missing() -> None:
    assert extract.find_exercise(_nb(_code("x = 1")), PREDICT).missing


def test_explain_answers_are_the_cell_minus_the_blank_cells_lines() -> None:
    blank = "### Why?\n\nExplain it.\n\n> **Hint:** think\n\n_Your answer here._"
    written = blank.replace("_Your answer here._", "Because strides differ.\nAnd more.")
    found = extract.find_exercise(_nb(_md(written, "ch09.why")), EXPLAIN, blank_source=blank)
    assert found.answer == "Because strides differ.\nAnd more."
    untouched = extract.find_exercise(_nb(_md(blank, "ch09.why")), EXPLAIN, blank_source=blank)
    assert untouched.answer is None


def test_an_implement_module_keeps_the_function_and_only_what_it_needs() -> None:
    notebook = _nb(
        _code("import math\nimport os\nfrom llmfs.tensor import layout\nBIG = 10"),
        _code("def helper(n):\n    return math.prod(n)\n\ndef unused():\n    os.remove('x')"),
        _code("print('side effect')\nlimit = BIG * 2"),
        _code("def f(shape):\n    return [helper(shape), limit]", "ch09.f"),
    )
    found = extract.find_exercise(notebook, IMPLEMENT, function="f")
    module = found.answer
    assert "def f(shape)" in module and "def helper" in module and "import math" in module
    assert "limit = BIG * 2" in module and "BIG = 10" in module
    assert "unused" not in module and "import os" not in module and "print" not in module
    namespace: dict = {}
    exec(module, namespace)
    assert namespace["f"]([2, 3]) == [6, 20]


def test_an_implement_cell_left_as_the_stub_is_unanswered_even_with_new_comments() -> None:
    stub = 'def f(shape):\n    """Doc."""\n    raise NotImplementedError("f")'
    commented = stub.replace('"""Doc."""', '"""Doc."""\n    # thinking...')
    found = extract.find_exercise(
        _nb(_code(commented, "ch09.f")), IMPLEMENT, blank_source=stub, function="f"
    )
    assert found.answer is None and not found.problem
    renamed = extract.find_exercise(
        _nb(_code("def g(shape):\n    return []", "ch09.f")), IMPLEMENT, function="f"
    )
    assert "defines no function f(...)" in renamed.problem


def test_invalid_notebook_json_says_where() -> None:
    with pytest.raises(CourseError, match=r"invalid notebook JSON at line 1 column 2"):
        extract.parse_notebook(b"{bad", "alice.ipynb")
    with pytest.raises(CourseError, match="no 'cells' list"):
        extract.parse_notebook(json.dumps({"cells": 3}).encode(), "alice.ipynb")


@pytest.mark.parametrize(
    ("field", "got", "expected", "same"),
    [
        ("shape", (3, 2), [3, 2], True),
        ("shape", [2, 3], [3, 2], False),
        ("contiguous", "yes", True, True),
        ("contiguous", 1, False, False),
        ("values", [[1, 2]], [[1.0, 2.0]], True),
        ("error", "noncontiguousreshapeerror", "NonContiguousReshapeError", True),
        ("a", True, True, True),
        ("a", 1, True, False),
        ("max_offset_210", 839.0, 839, True),
        ("shape", extract.Unreadable("view.shape"), [3, 2], False),
        ("shape", None, [3, 2], False),
    ],
)
def test_fields_compare_like_the_notebooks_check(
    field: str, got: object, expected: object, same: bool
) -> None:
    assert field_matches(field, got, expected) is same


@pytest.mark.parametrize("chapter", kit.MANIFEST.published_chapters, ids=lambda c: c.id)
def test_the_key_reads_a_literal_answer_for_every_predict_field_of_the_solutions(chapter) -> None:
    key = kit.key_of(chapter)
    for item in key.exercises:
        if item.exercise.kind == "predict":
            assert item.answers, item.exercise.id
            assert all(v is not None for v in item.answers.values())
        if item.exercise.kind == "explain":
            assert item.model_answer and "BEGIN SOLUTION" not in item.model_answer


@pytest.mark.parametrize(
    "source",
    ["q = predict(\x00)", "x = " + "[" * 5000 + "]" * 5000, "predict(shape=" + "-" * 100000 + "1)"],
    ids=["null-byte", "deep-nesting", "long-unary-chain"],
)
def test_sources_python_cannot_parse_are_reported_not_raised(source: str) -> None:
    found = extract.find_exercise(_nb(_code(source, "ch09.q1")), PREDICT)
    assert found.answer is None
    assert found.problem.startswith("the exercise cell is not valid Python (")
    assert "None" not in found.problem


def test_an_implement_function_that_imports_the_course_checks_is_not_read() -> None:
    notebook = _nb(
        _code("from llmfs.course.exercise_checks.spec import SPECS"),
        _code("def f(shape):\n    return SPECS['ch01.compute_strides'].reference(shape)", "ch09.f"),
    )
    found = extract.find_exercise(notebook, IMPLEMENT, function="f")
    assert found.answer is None and "imports the course's own tooling" in found.problem
    inside = _nb(
        _code("def f(shape):\n    import llmfs.course.exercise_checks\n    return 1", "ch09.f")
    )
    assert "llmfs.course" in extract.find_exercise(inside, IMPLEMENT, function="f").problem
    library = _nb(
        _code("from llmfs.tensor import layout"),
        _code("def f(shape):\n    return list(layout.row_major_strides(shape))", "ch09.f"),
    )
    assert extract.find_exercise(library, IMPLEMENT, function="f").answer is not None
