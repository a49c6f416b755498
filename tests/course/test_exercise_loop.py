"""The exercise loop judges the learner's prediction and nothing else.

* Every predict exercise of every chapter is evaluated in its fixture (the chapter's cells tagged
  ``fixture`` above it, run in a fresh namespace): from the fixture alone its expression gives the
  truth the executed solution gives, whatever the learner's kernel holds.
* A student notebook run again and again with the same answer (Run All twice, a kernel restart,
  Run All) spends one try; a new wrong answer spends the second; nothing is revealed; a hint
  cell run again shows the same hint and counts once.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from answerkit import solution_answers
from coursekit import chapter_toml, code, notebook, write_manifest, write_notebook

from llmfs.course.attempts import load_attempts, load_events
from llmfs.course.exercises import state
from llmfs.course.exercises.api import Comparison, NotChecked, check, predict
from llmfs.course.exercises.entries import is_plain
from llmfs.course.exercises.fixtures import FIXTURE_TAG, fixture_namespace, fixture_sources
from llmfs.course.exercises.judge import compare
from llmfs.course.exercises.record import judge_record
from llmfs.course.exercises.run import run
from llmfs.course.grading.selfcheck import hints_used
from llmfs.course.manifest import Chapter, Exercise, load_manifest
from llmfs.course.notebooks import cell_source, read_notebook

REPO = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest(REPO / "course" / "manifest.toml")
PREDICTS = [
    (chapter, exercise)
    for chapter in MANIFEST.published_chapters
    for exercise in chapter.exercises
    if exercise.kind == "predict"
]


def _fixture_cells(path: Path) -> list[tuple[str, list[str]]]:
    cells = read_notebook(path)["cells"]
    return [
        (cell_source(cell), cell.get("metadata", {}).get("tags", []))
        for cell in cells
        if FIXTURE_TAG in cell.get("metadata", {}).get("tags", [])
    ]


@pytest.mark.parametrize("chapter", MANIFEST.published_chapters, ids=lambda c: c.id)
def test_the_fixture_cells_are_the_solutions_and_no_exercise_of_the_learner(
    chapter: Chapter,
) -> None:
    solution, student = (
        _fixture_cells(REPO / chapter.solution),
        _fixture_cells(REPO / chapter.notebook),
    )
    assert solution and student == solution
    for source, tags in solution:
        assert not any(tag.startswith("exercise:") for tag in tags), source[:80]
        assert "BEGIN SOLUTION" not in source


@pytest.mark.slow
@pytest.mark.parametrize(("chapter", "exercise"), PREDICTS, ids=[e.id for _, e in PREDICTS])
def test_every_predict_exercise_evaluates_from_its_fixture_alone_to_the_solutions_truth(
    chapter: Chapter, exercise: Exercise
) -> None:
    assert fixture_sources(exercise.id, MANIFEST) is not None, f"{exercise.id} has no fixture"
    namespace = fixture_namespace(exercise.id, MANIFEST)
    assert namespace is not None
    fields = list(exercise.fields)
    assert exercise.expression
    outcome = run(exercise.expression, namespace, plain=is_plain(fields))
    answers = solution_answers(chapter, exercise)
    verdicts = compare(answers, outcome, fields, mistakes=exercise.mistakes)
    assert [v.status for v in verdicts] == ["right"] * len(fields), [
        (v.field, v.predicted, v.truth) for v in verdicts
    ]
    # llmfs check judges the notebook's literals the same way, whatever namespace it is in.
    hostile = {name: None for name in namespace if not name.startswith("__")}
    judged = judge_record(exercise.id, answers, hostile, manifest=MANIFEST)
    assert all(v.status == "right" for v in judged)


def test_running_ahead_and_rebinding_a_name_changes_no_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ch11.q3 reads `cache` and `t`; a later cell runs `for t in (3, 15, 31)`. The learner who
    # ran ahead and came back is judged on the fixture's t, and spends nothing extra.
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    chapter = MANIFEST.chapter("ch11")
    exercise = MANIFEST.exercise("ch11.q3")
    right = solution_answers(chapter, exercise)
    assert exercise.expression
    kernel: dict[str, Any] = {"predict": predict, "check": check, "answers": right, "t": 31}
    exec(
        "import llmfs.tensor as lt\n"
        "cache = lt.Tensor.zeros([2, 1, 1, 4, 4])\n"  # another tensor by the same name
        f"result = check(predict({exercise.expression!r}, exercise_id='ch11.q3', **answers))",
        kernel,
    )
    result = kernel["result"]
    assert isinstance(result, Comparison) and result.all_right, repr(result)
    # What the kernel's own names would have said: wrong, though the answer is right.
    prediction = predict(exercise.expression, exercise_id="ch11.q3", **right)
    in_kernel = check(prediction, kernel)
    assert isinstance(in_kernel, Comparison) and not in_kernel.all_right


def test_a_fixture_that_fails_is_not_the_learners_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "course_root"
    block = chapter_toml("ch01", "ch01", [("ch01.q1", "predict")])
    block += 'expression = "base.view()"\nfields = ["shape"]\n'
    write_manifest(root, block)
    cells = [
        code(
            "a",
            "from llmfs.tensor import Tensor\n"
            "base = Tensor.zeros([2, 3])\n"
            "raise RuntimeError('a broken course cell')",
        ),
        code("b", 'q1 = predict("base.view()", exercise_id="ch01.q1", shape=[2, 3])'),
    ]
    cells[0]["metadata"]["tags"] = [FIXTURE_TAG]
    cells[1]["metadata"]["tags"] = ["exercise:ch01.q1"]
    for folder in ("notebooks", "solutions"):
        write_notebook(root / folder / "ch01.ipynb", notebook(*cells))
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_COURSE_ROOT", str(root))
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    result = check(predict("base.view()", exercise_id="ch01.q1", shape=[2, 3]))
    assert isinstance(result, NotChecked)
    text = repr(result)
    assert "not checked" in text and "RuntimeError: a broken course cell" in text
    assert "no try was spent" in text and not log.exists()


# ---------------------------------------------------------------------------------------------
# The acceptance run: a student notebook executed in real kernels.
# ---------------------------------------------------------------------------------------------


def _answered(cells: list[dict[str, Any]], position: int, answers: dict[str, Any]) -> None:
    fields = ", ".join(f"{name}={value!r}" for name, value in answers.items())
    cells[position]["source"] = (
        f'q1 = predict("view.reshape([3, 2])", exercise_id="ch02.q1", {fields})'
    )


@pytest.mark.slow
def test_a_notebook_run_again_with_the_same_answer_spends_one_try_and_a_hint_counts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    chapter = MANIFEST.chapter("ch02")
    right = solution_answers(chapter, MANIFEST.exercise("ch02.q1"))
    first_wrong = {**right, "strides": [1, 3]}
    second_wrong = {**right, "strides": [1, 2], "offsets": [0, 2, 4, 1, 3, 5]}
    student = json.loads((REPO / chapter.notebook).read_text(encoding="utf-8"))
    cells = student["cells"]
    position = next(
        k for k, c in enumerate(cells) if "exercise:ch02.q1" in c["metadata"].get("tags", [])
    )
    # "Run up to the selected cell": the notebook's cells down to q1's check, then a hint cell.
    assert cell_source(cells[position + 1]).strip() == "check(q1)"
    cells[:] = [*cells[: position + 2], code("hint", 'hint("ch02.q1")')]
    _answered(cells, position, first_wrong)
    log = tmp_path / ".llmfs" / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))  # the kernels' log (they inherit it)

    def run_all(client: Any, nb: Any) -> str:
        shown = []
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        for output in nb.cells[position + 1].outputs:
            shown.append(output.get("data", {}).get("text/plain", output.get("text", "")))
        return " ".join(" ".join(shown).split())  # wrapped lines read as one text

    def attempts() -> list[dict[str, Any]]:
        return [
            {"attempt": a.attempt, "fields": dict(a.fields)}
            for a in load_attempts(log)
            if a.exercise == "ch02.q1"
        ]

    nb = nbformat.reads(json.dumps(student), as_version=4)
    resources = {"metadata": {"path": str(tmp_path)}}
    first = nbclient.NotebookClient(nb, timeout=300, resources=resources)
    with first.setup_kernel():
        once = run_all(first, nb)
        twice = run_all(first, nb)  # Run All again in the same kernel
    assert "2 more wrong tries" in once and "2 more wrong tries" in twice
    assert "not counted again" in twice and "not counted again" not in once
    assert len(attempts()) == 1
    restarted = nbclient.NotebookClient(nb, timeout=300, resources=resources)
    with restarted.setup_kernel():  # a kernel restart, then Run All
        third = run_all(restarted, nb)
        assert "2 more wrong tries" in third and "not counted again" in third
        assert len(attempts()) == 1  # one try after three runs
        changed = copy.deepcopy(student)
        _answered(changed["cells"], position, second_wrong)
        nb_changed = nbformat.reads(json.dumps(changed), as_version=4)
        fourth = run_all(restarted, nb_changed)
    assert "1 more wrong try" in fourth and "not counted again" not in fourth
    assert [a["attempt"] for a in attempts()] == [1, 2]  # two tries
    assert "answer: " not in fourth
    events = [e for e in load_events(log) if e.exercise == "ch02.q1"]
    assert [(e.kind, e.number) for e in events] == [("hint", 1)]  # shown four times, counted once
    assert hints_used(log, "ch02.q1") == 1
    state._STATES.clear()
    rebuilt = state.exercise_state("ch02.q1", log)
    assert rebuilt.attempts == 2 and rebuilt.hints_seen == 1 and not rebuilt.revealed


@pytest.mark.slow
def test_llmfs_check_judges_in_the_fixture_not_in_the_learners_names(tmp_path: Path) -> None:
    # A learner's cell rebinds the names ch01.q2 reads (x) right before the exercise: the
    # headless run of llmfs check, in its sandboxed kernel, still judges the right answer right
    # and the wrong one wrong, because both are judged in the exercise's fixture.
    gradingkit = pytest.importorskip("gradingkit")
    chapter = MANIFEST.chapter("ch01")
    key = gradingkit.key_of(chapter)
    items = {item.exercise.id: item for item in key.exercises}
    right, wrong = items["ch01.q2"], items["ch01.q3"]
    student = gradingkit.student_notebook(chapter)
    student = gradingkit.set_source(
        student, "ch01.q2", gradingkit.fill_fields(right.blank_source, right.answers)
    )
    answers = {name: gradingkit.wrong_value(value) for name, value in wrong.answers.items()}
    student = gradingkit.set_source(
        student, "ch01.q3", gradingkit.fill_fields(wrong.blank_source, answers)
    )
    position = gradingkit.extract.tagged_cells(student)["ch01.q2"][0]
    student["cells"].insert(
        position - 1, gradingkit.code_cell("x = Tensor.from_vec([2, 3, 4], [0.0] * 24)")
    )
    (tmp_path / Path(chapter.notebook).name).write_text(json.dumps(student), encoding="utf-8")
    status, text = gradingkit.run_check(tmp_path, "--json")
    assert status == 0, text
    (report,) = json.loads(text)["chapters"]
    found = {e["id"]: e for e in report["exercises"]}
    assert found["ch01.q2"]["status"] == "right", found["ch01.q2"]
    assert found["ch01.q3"]["status"] == "wrong", found["ch01.q3"]


@pytest.mark.parametrize("other", ["solution-only", "exercise:ch01.q1"])
def test_the_build_refuses_a_fixture_cell_that_would_not_reach_the_student(other: str) -> None:
    from llmfs.course import CourseError
    from llmfs.course.build import student_notebook

    cell = code("a", "from llmfs.tensor import Tensor\nx = Tensor.zeros([2])")
    cell["metadata"]["tags"] = [FIXTURE_TAG, other]
    with pytest.raises(CourseError, match=r"tagged 'fixture'.*cannot be an exercise"):
        student_notebook(notebook(cell), "s.ipynb")
