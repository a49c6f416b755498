"""The one verdict module: spellings the notebook accepts score the same in the grader, the
grader refuses what the notebook refuses, and implement cases are judged smallest first.

The spellings are derived from every predict exercise's solution literal (an error named by a
unique beginning in lower case, values flattened, a scalar as a one-value list, "yes"/"no" for
a boolean, a word in another case), judged once by the notebook's own comparison
(:func:`~llmfs.course.exercises.judge.compare` against the same outcome) and once through
``llmfs grade``'s :func:`~llmfs.course.grading.score.grade_notebook`; the two must agree on every
one. The outcomes are the solutions' (:meth:`ChapterKey.truths`), computed once and cached.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from typing import Any

import gradingkit as kit
import pytest

from llmfs.course.exercise_checks.spec import SHORTCUT, SPECS, case_order, expected_outcome
from llmfs.course.exercises.entries import error_classes, flat, resolve_error_name
from llmfs.course.exercises.judge import compare
from llmfs.course.exercises.verdict import Verdict, judge_implement, summarize
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.score import grade_notebook

CHAPTERS = kit.MANIFEST.published_chapters


def spellings(field: str, value: Any) -> list[Any]:
    """Other ways to write ``value`` that a learner might use (some right, some not)."""
    found: list[Any] = []
    if isinstance(value, bool):
        found += ["yes" if value else "no", "Yes" if value else "No", int(value)]
    if isinstance(value, str):
        found += [value.upper(), value.lower(), value.capitalize()]
        full = resolve_error_name(value) if field == "error" or value.endswith("Error") else None
        if full:
            for size in range(3, len(full)):
                if resolve_error_name(full[:size].lower()) == full:
                    found.append(full[:size].lower())  # its shortest unique beginning
                    break
            base = [c for c in error_classes() if c != full]
            found += base[:2]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        found += [[value], float(value), [[value]]]
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (list, tuple)) for v in value):
            found.append(flat(value))
        found.append(tuple(value))
        if len(value) == 1:
            found.append(value[0])
    return found


def _variants(item: Any) -> list[dict[str, Any]]:
    right = dict(item.answers)
    return [
        {**right, name: other}
        for name, value in right.items()
        for other in spellings(name, value)
        if other != value or type(other) is not type(value)
    ]


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda c: c.id)
def test_the_grader_scores_every_spelling_as_the_notebook_does(chapter: Any) -> None:
    key = kit.key_of(chapter)
    truths = key.truths()
    predicts = [i for i in key.exercises if i.exercise.kind == "predict"]
    only_predict = replace(key, exercises=tuple(predicts))
    asked = {item.exercise.id: _variants(item) for item in predicts}
    rounds = max(len(v) for v in asked.values())
    checked = 0
    for k in range(rounds):
        notebook = kit.student_notebook(chapter)
        chosen: dict[str, dict[str, Any]] = {}
        for item in predicts:
            if k < len(asked[item.exercise.id]):
                chosen[item.exercise.id] = asked[item.exercise.id][k]
                source = kit.fill_fields(item.blank_source, chosen[item.exercise.id])
                notebook = kit.set_source(notebook, item.exercise.id, source)
        for graded in grade_notebook(notebook, only_predict, 0, Limits()):
            if graded.exercise not in chosen:
                continue
            item = key.get(graded.exercise)
            answers = chosen[graded.exercise]
            by_notebook = compare(
                answers,
                truths[graded.exercise],
                item.exercise.fields,
                mistakes=item.exercise.mistakes,
            )
            notebook_verdict = summarize(item.exercise, by_notebook)
            assert (graded.status, graded.score, graded.mistakes) == (
                notebook_verdict.status,
                notebook_verdict.score,
                notebook_verdict.mistakes,
            ), (graded.exercise, answers)
            checked += 1
    assert checked == sum(len(v) for v in asked.values())


def test_the_notebook_refuses_a_word_in_another_case_and_so_does_the_grader() -> None:
    # ch03.q8's keys are words the course writes in lower case: 'NONE' is not 'none'.
    chapter = kit.MANIFEST.chapter("ch03")
    key = kit.key_of(chapter)
    item = key.get("ch03.q8")
    word = next(n for n, v in item.answers.items() if isinstance(v, str))
    answers = {**item.answers, word: item.answers[word].upper()}
    notebook = kit.set_source(
        kit.student_notebook(chapter), item.exercise.id, kit.fill_fields(item.blank_source, answers)
    )
    (graded,) = grade_notebook(notebook, replace(key, exercises=(item,)), 0, Limits())
    assert graded.status == "partial" and graded.wrong_fields == (word,)


# ------------------------------------------------------------------------------------------
# implement: the smallest failing case, whatever order the cases ran in
# ------------------------------------------------------------------------------------------


def _cases(exercise_id: str, count: int = 30) -> tuple[Any, list[tuple[Any, ...]]]:
    spec = SPECS[exercise_id]
    return spec, [tuple(c) for c in spec.make_cases(random.Random(5), count)]


@pytest.mark.parametrize("exercise_id", ["ch01.compute_strides", "ch01.flat_index"])
def test_the_smallest_failing_case_is_reported_whatever_the_order(exercise_id: str) -> None:
    spec, cases = _cases(exercise_id)
    wants = [json.loads(json.dumps(expected_outcome(spec, args))) for args in cases]
    rng = random.Random(11)
    wrong = set(rng.sample(range(len(cases)), 4))
    got = [{"value": "nope"} if k in wrong else want for k, want in enumerate(wants)]
    smallest = min(wrong, key=lambda k: case_order(spec, cases[k]))
    verdict = judge_implement(spec, 3, cases, got)
    assert (verdict.status, verdict.score, verdict.passed, verdict.cases) == (
        "wrong",
        0.0,
        len(cases) - 4,
        len(cases),
    )
    assert verdict.smallest.startswith(f"{spec.function}(")
    assert json.dumps(cases[smallest][0], ensure_ascii=False)[:20] in verdict.smallest
    order = list(range(len(cases)))
    rng.shuffle(order)
    shuffled = judge_implement(spec, 3, [cases[k] for k in order], [got[k] for k in order])
    assert shuffled == verdict
    right = judge_implement(spec, 3, cases, wants)
    assert (right.status, right.score, right.message) == (
        "right",
        3.0,
        f"all {len(cases)} hidden cases passed",
    )


def test_a_forbidden_call_scores_nothing_and_names_the_smallest_such_case() -> None:
    spec, cases = _cases("ch01.compute_strides")
    wants = [json.loads(json.dumps(expected_outcome(spec, args))) for args in cases]
    refused = {"error": SHORTCUT, "shortcut": "llmfs.tensor.x", "via": "x"}
    got = [refused if k % 3 == 0 else want for k, want in enumerate(wants)]
    verdict = judge_implement(spec, 3, cases, got)
    smallest = min(range(0, len(cases), 3), key=lambda k: case_order(spec, cases[k]))
    assert (verdict.status, verdict.score) == ("wrong", 0.0)
    assert verdict.smallest == judge_implement(spec, 3, [cases[smallest]], [refused]).smallest


def test_a_verdict_travels_as_json_and_refuses_a_forged_shape() -> None:
    verdict = Verdict("ch01.q1", 1.0, 0.5, "partial", "m", kind="predict", mistakes=("a",))
    assert Verdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict
    with pytest.raises(ValueError):
        Verdict.from_json({"exercise": "ch01.q1", "points": 1, "score": 1, "status": "great"})
    with pytest.raises(ValueError):
        Verdict.from_json({**verdict.to_json(), "mistakes": "a"})
