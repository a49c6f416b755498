"""One verdict for one answer: the notebook's ``check``, ``llmfs check`` and ``llmfs grade`` agree
on every predict exercise of every chapter.

For each exercise the candidates are the right answer (the solution's literals), each named
mistake of the manifest (the right answer with that field replaced by the mistake's value) and a
generic wrong answer (the first field changed). Each candidate is judged through the real entry
points:

* the notebook: a cell ``check(predict(...))`` (the text API every chapter uses, the answers
  written as literals, no names given to ``check``) run in the chapter's names right after the
  exercise's cell, its :attr:`Comparison.verdict`;
* ``llmfs check``: the judge cell ``llmfs check`` inserts after the exercise's cell
  (:func:`~llmfs.course.exercises.record.judge_cell_source`), its source run in those names as
  the kernel runs it, read back as the self-check reads it
  (:func:`~llmfs.course.exercises.verdict.read_verdicts`, :meth:`Verdict.from_json`);
* ``llmfs grade``: :func:`~llmfs.course.grading.score.grade_notebook` of a submission whose
  exercise cell holds the candidate.

All three must give the same status, points and named mistakes.

The chapter's names come from the solution's one in-process run of the test process
(:data:`runkit.RUNS`, shared with ``test_chapters.py``: conftest.py gives both files' tests of a
chapter to one worker). That run also holds the grader's truths (:meth:`ChapterKey.truths`, each
exercise's outcome in its fixture, as the check evaluates it) equal to the outcomes the running
solution gives: each exercise's expression evaluated in the notebook's names right after its
cell. A fixture that no longer builds the state the chapter's cells have reached at the exercise
fails here.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest
from runkit import RUNS

from llmfs.course.exercises.api import Comparison
from llmfs.course.exercises.record import judge_cell_source
from llmfs.course.exercises.verdict import VERDICTS_ENV, Verdict
from llmfs.course.grading import extract
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.score import grade_notebook

pytestmark = pytest.mark.notebooks

CHAPTERS = kit.MANIFEST.published_chapters


def candidates(item: Any) -> list[tuple[str, dict[str, Any]]]:
    """(name, answers) for one predict exercise: right, each named mistake, a generic wrong."""
    right = dict(item.answers)
    found = [("right", right)]
    for k, mistake in enumerate(item.exercise.mistakes):
        found.append((f"mistake {k}", {**right, mistake.field: mistake.answer}))
    first = next(iter(right))
    found.append(("wrong", {**right, first: kit.wrong_value(right[first])}))
    return found


def _notebook_cell(exercise: Any, answers: dict[str, Any]) -> str:
    # The notebook's own judging path, as a chapter's cell runs it: the answers written as
    # literals, predict(...) then check(...) with no names given (so the check evaluates in the
    # exercise's fixture, or the cell's globals where the course has none).
    fields = ", ".join(f"{name}={value!r}" for name, value in answers.items())
    return (
        "from llmfs.course.exercises.api import check as _check, predict as _predict\n"
        f"_comparison = _check(_predict({exercise.expression!r}, exercise_id={exercise.id!r}, "
        f"{fields}))\n"
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _summary(verdict: Verdict) -> tuple[str, float | None, tuple[str, ...]]:
    return verdict.status, verdict.score, verdict.mistakes


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.id)
def test_the_notebook_llmfs_check_and_llmfs_grade_give_one_verdict(
    chapter: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = kit.key_of(chapter)
    predicts = [item for item in key.exercises if item.exercise.kind == "predict"]
    asked = {item.exercise.id: candidates(item) for item in predicts}
    # The grader's truths are the running solution's outcomes, each taken right after its
    # exercise's cell.
    run = RUNS[chapter.solution]
    truths = key.truths()
    assert sorted(run.outcomes) == sorted(truths) == sorted(asked)
    for exercise_id, truth in truths.items():
        assert repr(truth) == repr(run.outcomes[exercise_id]), exercise_id
    # The first two paths, in the solution's names right after each exercise's cell: the
    # notebook's check(predict(...)) and the judge cell llmfs check inserts there, run as the
    # kernel runs it (its source executed in the notebook's names), one candidate after another.
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    monkeypatch.setenv(VERDICTS_ENV, str(tmp_path / "check.jsonl"))
    tagged = extract.tagged_cells(kit.solution_notebook(chapter))
    by_notebook: list[Verdict] = []
    for item in predicts:
        position = tagged[item.exercise.id][0]
        names = next(s.names for s in run.shown if s.position >= position)
        for _, answers in asked[item.exercise.id]:
            scope = dict(names)
            exec(_notebook_cell(item.exercise, answers), scope)
            assert isinstance(scope["_comparison"], Comparison), item.exercise.id
            by_notebook.append(scope["_comparison"].verdict)
            exec(judge_cell_source(item.exercise.id, answers), dict(names))
    # The implement checks of the solution write their verdicts to the same file: left out.
    by_check = [
        Verdict.from_json(line["verdict"])
        for line in _lines(tmp_path / "check.jsonl")
        if line["exercise"] in asked
    ]
    expected = [
        (item.exercise.id, name) for item in predicts for name, _ in asked[item.exercise.id]
    ]
    assert len(by_notebook) == len(by_check) == len(expected)
    # The grader: one submission per round, round k holding each exercise's k-th candidate.
    only_predict = replace(key, exercises=tuple(predicts))
    rounds = max(len(c) for c in asked.values())
    by_grade: dict[tuple[str, str], Verdict] = {}
    for k in range(rounds):
        notebook = kit.student_notebook(chapter)
        chosen: dict[str, str] = {}
        for item in predicts:
            name, answers = asked[item.exercise.id][min(k, len(asked[item.exercise.id]) - 1)]
            chosen[item.exercise.id] = name
            source = kit.fill_fields(item.blank_source, answers)
            notebook = kit.set_source(notebook, item.exercise.id, source)
        for verdict in grade_notebook(notebook, only_predict, 0, Limits()):
            by_grade[(verdict.exercise, chosen[verdict.exercise])] = verdict
    disagree = []
    for (exercise_id, name), notebook_verdict, check_verdict in zip(
        expected, by_notebook, by_check
    ):
        assert notebook_verdict.exercise == check_verdict.exercise == exercise_id
        graded = by_grade[(exercise_id, name)]
        three = {_summary(notebook_verdict), _summary(check_verdict), _summary(graded)}
        if len(three) != 1:
            disagree.append((exercise_id, name, three))
        if name == "right":
            assert graded.status == "right", (exercise_id, graded.message)
        else:
            assert graded.status != "right", (exercise_id, name, graded.message)
    assert not disagree, "\n".join(map(str, disagree))
    # Each named mistake is named by the three for its own value.
    for item in predicts:
        for k, mistake in enumerate(item.exercise.mistakes):
            graded = by_grade[(item.exercise.id, f"mistake {k}")]
            assert mistake.message in graded.mistakes, (item.exercise.id, graded.message)


#: Cases per implement run: enough to tell a right function from a wrong one, few enough for
#: every chapter's kernels and training loops.
IMPLEMENT_CASES = 12


def _wrong_source(function: str) -> str:
    return f"def {function}(*args, **kwargs):\n    raise ValueError('not the answer')\n"


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.id)
def test_implement_exercises_get_one_verdict_from_the_three(
    chapter: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The right function (the solution's, as the grader reads it from the submission) and a
    # generic wrong one, for every implement exercise with a hidden check: the notebook's check
    # (its report's verdict), llmfs check's reading of the verdict line that check writes, and
    # llmfs grade's row agree on the status and the points. The grader grades one submission
    # holding every right function and one holding every wrong one (one worker each, as a
    # class's submission is graded).
    from llmfs.course.exercise_checks import check_for
    from llmfs.course.exercises.verdict import read_verdicts

    key = kit.key_of(chapter)
    items = kit.checked_implements(key)
    if not items:
        pytest.skip(f"{chapter.id} has no implement exercise with a hidden check")
    correct = kit.correct_notebook(chapter)
    monkeypatch.setenv(VERDICTS_ENV, str(tmp_path / "check.jsonl"))
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    sources: dict[str, dict[str, str]] = {"right": {}, "wrong": {}}
    for item in items:
        right = extract.find_exercise(
            correct, item.exercise, blank_source=item.blank_source, function=item.function
        ).answer
        assert isinstance(right, str), item.exercise.id
        sources["right"][item.exercise.id] = right
        sources["wrong"][item.exercise.id] = _wrong_source(str(item.function))
    disagree = []
    for name, chosen in sources.items():
        # The right answer is the solution's cell as handed in; the wrong one replaces it.
        submission = correct
        if name == "wrong":
            for exercise_id, source in chosen.items():
                submission = kit.set_source(submission, exercise_id, source)
        graded = {
            verdict.exercise: verdict
            for verdict in grade_notebook(
                submission,
                replace(key, exercises=tuple(items)),
                3,
                Limits(cell_timeout=120.0),
                cases=IMPLEMENT_CASES,
            )
        }
        for item in items:
            exercise_id = item.exercise.id
            namespace: dict[str, Any] = {"__name__": f"learner_{exercise_id.replace('.', '_')}"}
            exec(compile(chosen[exercise_id], exercise_id, "exec"), namespace)
            report = check_for(exercise_id)(namespace[item.function], cases=IMPLEMENT_CASES)
            by_notebook = report.verdict
            assert by_notebook is not None, exercise_id
            by_check = Verdict.from_json(
                read_verdicts(tmp_path / "check.jsonl")[exercise_id]["verdict"]
            )
            by_grade = graded[exercise_id]
            three = {(v.status, v.score) for v in (by_notebook, by_check, by_grade)}
            if len(three) != 1:
                disagree.append((exercise_id, name, three, by_grade.message))
            assert by_grade.status == name, (exercise_id, by_grade.message)
    assert not disagree, "\n".join(map(str, disagree))
