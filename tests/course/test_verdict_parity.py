"""One verdict for one answer: the notebook's ``check``, ``llmfs check`` and ``llmfs grade`` agree
on every predict exercise of every chapter.

For each exercise the candidates are the right answer (the solution's literals), each named
mistake of the manifest (the right answer with that field replaced by the mistake's value) and a
generic wrong answer (the first field changed). Each candidate is judged through the real entry
points:

* the notebook: ``check(predict(...))`` (the text API every chapter uses) run in the chapter's
  own kernel right after the exercise's cell, its :attr:`Comparison.verdict`;
* ``llmfs check``: the judge cell ``llmfs check`` inserts after the exercise's cell
  (:func:`~llmfs.course.exercises.record.judge_cell_source`), read back as the self-check reads
  it (:func:`~llmfs.course.exercises.verdict.read_verdicts`, :meth:`Verdict.from_json`);
* ``llmfs grade``: :func:`~llmfs.course.grading.score.grade_notebook` of a submission whose
  exercise cell holds the candidate.

All three must give the same status, points and named mistakes. One kernel run per chapter
judges every candidate of the first two paths (the cells go in one after another), so the test
costs one run of each solution.

The same run holds the grader's truths (:meth:`ChapterKey.truths`, each exercise's outcome in
its fixture, as the check evaluates it) equal to the outcomes the running solution gives: each
exercise's expression evaluated in the kernel's names right after its cell. A fixture that no
longer builds the state the chapter's cells have reached at the exercise fails here.
"""

from __future__ import annotations

import json
import os
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.exercises.entries import is_plain
from llmfs.course.exercises.record import judge_cell_source
from llmfs.course.exercises.verdict import VERDICTS_ENV, Verdict
from llmfs.course.grading import extract
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import run_notebook
from llmfs.course.grading.score import grade_notebook

pytestmark = pytest.mark.notebooks

CHAPTERS = kit.MANIFEST.published_chapters
NOTEBOOK_ENV = "LLMFS_PARITY_NOTEBOOK"
TRUTHS_ENV = "LLMFS_PARITY_TRUTHS"


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
    # The notebook's own judging path: predict(...) then check(...), as a chapter's cells do.
    fields = ", ".join(f"{name}={value!r}" for name, value in answers.items())
    return (
        "import json as _json, os as _os\n"
        "from llmfs.course.exercises.api import check as _check, predict as _predict\n"
        f"_q = _predict({exercise.expression!r}, exercise_id={exercise.id!r}, {fields})\n"
        f"with open(_os.environ[{NOTEBOOK_ENV!r}], 'a') as _out:\n"
        "    _out.write(_json.dumps(_check(_q).verdict.to_json()) + '\\n')\n"
        "del _q, _out, _check, _predict"
    )


def _truth_cell(exercise_id: str, expression: str, plain: bool) -> str:
    # The outcome the running solution gives: the expression evaluated in the names the
    # chapter's cells defined (IPython's own history names left out), pickled as the grader's
    # cache stores an outcome; a failed expression is its error's text, as in the grader.
    return (
        "import pickle as _pickle, os as _os, re as _re\n"
        "from llmfs.course.exercises.run import run as _run\n"
        "from llmfs.course.grading.truths import _picklable\n"
        "_hidden = get_ipython().user_ns_hidden\n"
        "_own = r'_+|_i+|_i?\\d+|_(pickle|os|re|run|picklable|hidden|own)'\n"
        "_names = {_k: _v for _k, _v in globals().items()\n"
        "          if _k not in _hidden and not _re.fullmatch(_own, _k)}\n"
        "try:\n"
        f"    _t = _picklable(_run({expression!r}, _names, plain={plain!r}))\n"
        "except Exception as _e:\n"
        "    _t = f'{type(_e).__name__}: {_e}'\n"
        f"with open(_os.environ[{TRUTHS_ENV!r}], 'ab') as _out:\n"
        f"    _pickle.dump(({exercise_id!r}, _t), _out)\n"
        "del _pickle, _os, _re, _run, _picklable, _hidden, _own, _names, _t, _out"
    )


def _pickled(path: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    with path.open("rb") as stream:
        while True:
            try:
                exercise_id, truth = pickle.load(stream)
            except EOFError:
                return found
            found[exercise_id] = truth if isinstance(truth, str) else pickle.loads(truth)


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _summary(verdict: Verdict) -> tuple[str, float | None, tuple[str, ...]]:
    return verdict.status, verdict.score, verdict.mistakes


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.id)
def test_the_notebook_llmfs_check_and_llmfs_grade_give_one_verdict(
    chapter: Any, tmp_path: Path
) -> None:
    key = kit.key_of(chapter)
    predicts = [item for item in key.exercises if item.exercise.kind == "predict"]
    asked = {item.exercise.id: candidates(item) for item in predicts}
    # The first two paths: the solution run in a kernel with, after each exercise's cell, one
    # notebook check and one llmfs-check judge cell per candidate.
    solution = kit.solution_notebook(chapter)
    tagged = extract.tagged_cells(solution)
    last = max(tagged[item.exercise.id][0] for item in predicts)
    cells: list[Any] = []
    for position, cell in enumerate(solution["cells"][:last], start=1):
        cells.append(cell)
        for item in predicts:
            if tagged[item.exercise.id][0] == position:
                plain = is_plain(list(item.exercise.fields))
                cells.append(kit.code_cell(_truth_cell(item.exercise.id, item.expression, plain)))
                for _, answers in asked[item.exercise.id]:
                    cells.append(kit.code_cell(_notebook_cell(item.exercise, answers)))
                    cells.append(kit.code_cell(judge_cell_source(item.exercise.id, answers)))
    env = {
        NOTEBOOK_ENV: str(tmp_path / "notebook.jsonl"),
        VERDICTS_ENV: str(tmp_path / "check.jsonl"),
        TRUTHS_ENV: str(tmp_path / "truths.pickle"),
    }
    if os.environ.get("LLMFS_CACHE_DIR"):
        env["LLMFS_CACHE_DIR"] = os.environ["LLMFS_CACHE_DIR"]
    run = run_notebook(
        {**solution, "cells": cells}, Limits(cell_timeout=600.0, total_timeout=1800.0), env=env
    )
    assert run.status == "ok", run.describe()
    # The grader's truths are the running solution's outcomes.
    running = _pickled(tmp_path / "truths.pickle")
    truths = key.truths()
    assert sorted(running) == sorted(truths) == sorted(asked)
    for exercise_id, truth in truths.items():
        assert repr(truth) == repr(running[exercise_id]), exercise_id
    by_notebook = [Verdict.from_json(line) for line in _lines(tmp_path / "notebook.jsonl")]
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
