"""Static answer extraction and field comparison: what the grader reads, without running code."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.course import CourseError
from llmfs.course.grading import extract
from llmfs.course.grading.score import score_predict
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


def test_a_cell_whose_entry_point_is_unchanged_is_answered_when_a_function_it_calls_is() -> None:
    # The check calls `both`, which stays as given; the learner writes `save` and `load`.
    given_cell = (
        "def save(x):\n    raise NotImplementedError('s')\n\n"
        "def load():\n    raise NotImplementedError('l')\n\n"
        "def both(x):\n    save(x)\n    return load()\n"
    )
    exercise = Exercise("ch09.f", "ch09", "implement", 3, "Implement")
    stub = extract.find_exercise(
        _nb(_code(given_cell, "ch09.f")), exercise, blank_source=given_cell, function="both"
    )
    assert stub.answer is None and not stub.problem
    for changed in (
        given_cell.replace("raise NotImplementedError('s')", "STORE.append(x)"),
        given_cell.replace("raise NotImplementedError('l')", "return STORE[-1]"),
        given_cell + "\ndef helper():\n    return 1\n",
    ):
        found = extract.find_exercise(
            _nb(_code(changed, "ch09.f")), exercise, blank_source=given_cell, function="both"
        )
        assert isinstance(found.answer, str) and "def both(x)" in found.answer, changed


def test_invalid_notebook_json_says_where() -> None:
    with pytest.raises(CourseError, match=r"invalid notebook JSON at line 1 column 2"):
        extract.parse_notebook(b"{bad", "alice.ipynb")
    with pytest.raises(CourseError, match="no 'cells' list"):
        extract.parse_notebook(json.dumps({"cells": 3}).encode(), "alice.ipynb")


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


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nested deeper than a notebook can be"),
        (b'{"cells": [], "m": ' + b"[" * 101 + b"]" * 101 + b"}", "more than 100 levels"),
        (b'{"cells": [], "m": "\xff"}', r"not UTF-8 text \(byte 20\)"),
        (b"3", "the JSON is a int, not an object"),
        (b'{"n": ' + b"7" * 5000 + b"}", "invalid notebook JSON"),
        (b'{"cells": ["x"]}', r"cell #1 is not a notebook cell \(it is a JSON str"),
        (b'{"cells": [{"cell_type": "code", "source": ["a", 1]}]}', "neither a string nor"),
        (b'{"cells": [{"cell_type": "code", "source": "", "metadata": []}]}', "metadata that"),
        (b'{"cells": [{"cell_type": "code", "source": "", "outputs": 1}]}', "outputs that"),
    ],
    ids=["deep", "depth-101", "latin1", "int", "huge-int", "str-cell", "source", "meta", "outs"],
)
def test_an_unreadable_notebook_is_a_course_error_that_says_why(data: bytes, why: str) -> None:
    with pytest.raises(CourseError, match=why):
        extract.parse_notebook(data, "alice.ipynb")


def test_a_notebook_as_deep_as_the_limit_is_read() -> None:
    # cells (2), the cell (3), its metadata (4): one level per list below, 100 in all
    nested: object = []
    for _ in range(extract.MAX_NOTEBOOK_DEPTH - 5):
        nested = [nested]
    cell = {"cell_type": "raw", "source": "", "metadata": {"x": nested}}
    assert extract.parse_notebook(json.dumps({"cells": [cell]}).encode(), "a")["cells"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=30,
)
_CELLISH = st.fixed_dictionaries(
    {},
    optional={
        "cell_type": st.sampled_from(["code", "markdown", "raw", "other"]) | _JSON,
        "source": st.text(max_size=40) | st.lists(st.text(max_size=20), max_size=3) | _JSON,
        "metadata": st.fixed_dictionaries(
            {}, optional={"tags": st.lists(st.sampled_from(["exercise:ch09.q1", "x"])) | _JSON}
        )
        | _JSON,
        "outputs": st.lists(_JSON, max_size=2) | _JSON,
    },
)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(
        st.binary(max_size=64),
        _JSON.map(lambda v: json.dumps(v).encode()),
        st.lists(_CELLISH | _JSON, max_size=4).map(lambda c: json.dumps({"cells": c}).encode()),
    )
)
def test_any_bytes_read_as_a_notebook_or_a_course_error_and_never_crash_extraction(
    data: bytes,
) -> None:
    try:
        notebook = extract.parse_notebook(data, "x.ipynb")
    except CourseError as error:
        assert str(error).startswith("x.ipynb: ")
        return
    for exercise in (PREDICT, EXPLAIN, IMPLEMENT):
        extract.find_exercise(notebook, exercise, function="f")


def test_a_notebook_over_the_size_limit_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.ipynb"
    path.write_bytes(b" " * 101)
    monkeypatch.setattr(extract, "MAX_NOTEBOOK_BYTES", 100)
    with pytest.raises(CourseError, match="101 bytes, more than the 100 a notebook may be"):
        extract.read_notebook_bytes(path)
    path.write_bytes(b" " * 100)
    assert extract.read_notebook_bytes(path) == b" " * 100
    with pytest.raises(CourseError, match="cannot be read"):
        extract.read_notebook_bytes(tmp_path / "gone.ipynb")


def test_a_cell_longer_than_the_parse_limit_is_reported_not_parsed() -> None:
    from llmfs.course.exercises.record import MAX_SOURCE_CHARS

    long = "predict(shape=[" + "0, " * (MAX_SOURCE_CHARS // 3) + "])"
    found = extract.find_exercise(_nb(_code(long, "ch09.q1")), PREDICT)
    assert found.answer is None
    assert f"characters long, more than the {MAX_SOURCE_CHARS} read" in found.problem
    short = "predict(shape=[" + "0, " * 1000 + "])"
    assert extract.find_exercise(_nb(_code(short, "ch09.q1")), PREDICT).answer == {
        "shape": [0] * 1000
    }


def _named_mistakes() -> list[tuple[str, Any]]:
    return [
        (chapter.id, mistake)
        for chapter in kit.MANIFEST.published_chapters
        for exercise in chapter.exercises
        if exercise.kind == "predict"
        for mistake in exercise.mistakes
    ]


@pytest.mark.parametrize(
    ("chapter_id", "mistake"),
    _named_mistakes(),
    ids=[f"{m.field}-{k}" for k, (_, m) in enumerate(_named_mistakes())],
)
def test_the_grader_names_the_manifests_misconception_for_a_named_wrong_value(
    chapter_id: str, mistake: Any
) -> None:
    # Every named mistake of every chapter: the grader's row says what the notebook's check says
    # for that value (one record), and still lists the field as wrong.
    key = _keys(chapter_id)
    [item] = [i for i in key.exercises if any(m is mistake for m in i.exercise.mistakes)]
    answers = {name: value for name, value in item.answers.items()}
    answers[mistake.field] = mistake.answer
    truth = key.truths()[item.exercise.id]
    result = score_predict(item, extract.Found(item.exercise, 1, (1,), answers), truth)
    assert mistake.message in result.mistakes, result.message
    assert mistake.message in result.message, result.message
    assert f"wrong: {mistake.field}" in result.message, result.message
    # Right values never draw a misconception's message.
    found = extract.Found(item.exercise, 1, (1,), dict(item.answers))
    clean = score_predict(item, found, truth)
    assert all(m.message not in clean.message for m in item.exercise.mistakes), clean.message


@functools.cache
def _keys(chapter_id: str) -> Any:
    return kit.key_of(kit.MANIFEST.chapter(chapter_id))
