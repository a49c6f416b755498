"""Grading one submission: a pure function of (submission bytes, the chapter's key, a seed).

:func:`grade_submission` reads the answers statically (:mod:`~llmfs.course.grading.extract`),
compares them in this process with the key read from the solutions
(:mod:`~llmfs.course.grading.key`), runs implement functions on hidden random cases in the
sandbox and compares their JSON outcomes here, and runs the notebook in a fresh kernel only to
report how the run went. No score depends on anything the learner's process says.

Every row is a :class:`~llmfs.course.exercises.verdict.Verdict` (statuses:
:data:`~llmfs.course.exercises.verdict.STATUSES`), given by the same
:func:`~llmfs.course.exercises.verdict.judge_predict` and
:func:`~llmfs.course.exercises.verdict.judge_implement` as the notebook's check and
``llmfs check``: a predict answer is judged against the outcome of the exercise's expression in
the solution (:meth:`ChapterKey.truths`), not against the solution's literals.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, replace
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercises.reveals import revealed_in
from llmfs.course.exercises.verdict import Verdict, judge_implement, judge_predict
from llmfs.course.grading import extract
from llmfs.course.grading.isolation import Isolation
from llmfs.course.grading.key import ChapterKey, ExerciseKey
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import (
    FunctionRun,
    FunctionTask,
    RunOutcome,
    run_functions,
    run_notebook,
)


@dataclass(frozen=True)
class SubmissionResult:
    """Everything grading one submission produced: one result per exercise, in manifest order."""

    student: str
    chapter: str
    path: str
    sha256: str
    seed: int
    checks: str
    run: RunOutcome
    results: tuple[Verdict, ...]


def case_rng(seed: int, exercise_id: str) -> random.Random:
    """The random source of one exercise's hidden cases for a grading seed.

    Seeded with a string, so it never coincides with a notebook's visible integer seed.
    """
    return random.Random(f"llmfs-grade:{seed}:{exercise_id}")


def score_predict(item: ExerciseKey, found: extract.Found, truth: Any) -> Verdict:
    """Scores a predict exercise by the one verdict the notebook's check gives:
    :func:`~llmfs.course.exercises.verdict.judge_predict` of the learner's literals against
    ``truth``, the outcome of the exercise's expression in the solution
    (:meth:`ChapterKey.truths`). A ``str`` truth (the expression failed in the solution) leaves
    the exercise unchecked."""
    exercise = item.exercise
    answers = found.answer if isinstance(found.answer, dict) else {}
    if isinstance(truth, str) or truth is None:
        why = truth or "no outcome"
        return Verdict(
            exercise.id,
            float(exercise.points),
            None,
            "unchecked",
            f"the expression could not be run in the solution ({why}); review it by hand",
            json.dumps(extract.plain(answers), sort_keys=True),
            kind="predict",
        )
    return judge_predict(exercise, answers, truth)


def score_explain(item: ExerciseKey, found: extract.Found) -> Verdict:
    """An explain answer: pending review when written (score None), else unanswered (0)."""
    exercise = item.exercise
    text = found.answer if isinstance(found.answer, str) else ""
    if not text:
        return Verdict(exercise.id, float(exercise.points), 0.0, "unanswered", "not answered yet")
    return Verdict(
        exercise.id,
        float(exercise.points),
        None,
        "pending",
        "awaiting the instructor's review",
        text,
        extract.sha256_text(text),
    )


def implement_task(
    item: ExerciseKey, found: extract.Found, seed: int, cases: int | None
) -> FunctionTask | None:
    """The sandbox task for an answered implement exercise with a hidden check (else None):
    the learner's module and the hidden cases drawn for ``seed``."""
    source = found.answer if isinstance(found.answer, str) else ""
    if item.spec is None or not item.function or not source or found.problem:
        return None
    count = cases if cases is not None else item.spec.cases
    drawn = item.spec.make_cases(case_rng(seed, item.exercise.id), count)
    return FunctionTask(item.exercise.id, source, item.function, tuple(tuple(a) for a in drawn))


def score_implement(
    item: ExerciseKey, found: extract.Found, task: FunctionTask | None, run: FunctionRun | None
) -> Verdict:
    """Judges the outcomes the sandbox sent back for ``task`` here, by the one implement verdict
    (:func:`~llmfs.course.exercises.verdict.judge_implement`): full points when every hidden
    case matches the library's outcome, else 0; the message names how many passed and the
    smallest failing case by size (its arguments and what the function gave, never the expected
    answer), or the forbidden library function a case called."""
    exercise = item.exercise
    points = float(exercise.points)
    source = found.answer if isinstance(found.answer, str) else ""
    answer_sha = extract.sha256_text(source) if source else ""
    if item.spec is None or not item.function:
        return Verdict(
            exercise.id,
            points,
            None,
            "unchecked",
            "no hidden check exists for this exercise; review it by hand",
            "",
            answer_sha,
            kind="implement",
        )
    if not source or task is None or run is None:
        return Verdict(
            exercise.id, points, 0.0, "unanswered", "not implemented yet", kind="implement"
        )
    verdict = judge_implement(
        item.spec, points, task.cases, run.outcomes, problem=run.problem or "", which="hidden"
    )
    return replace(verdict, answer_sha=answer_sha)


def _missing(item: ExerciseKey) -> Verdict:
    return Verdict(
        item.exercise.id,
        float(item.exercise.points),
        0.0,
        "missing",
        f"no cell is tagged {item.exercise.tag} (deleted or re-tagged?)",
    )


def _with_notes(result: Verdict, found: extract.Found) -> Verdict:
    if not found.notes:
        return result
    from dataclasses import replace

    return replace(result, message=f"{result.message}; " + "; ".join(found.notes))


def grade_notebook(
    notebook: dict[str, Any],
    key: ChapterKey,
    seed: int,
    limits: Limits,
    *,
    cases: int | None = None,
    isolation: Isolation | None = None,
) -> tuple[Verdict, ...]:
    """Scores every exercise of the key's chapter from the notebook's cells (no kernel); the
    implement functions run in ``isolation`` (None: a plain limited process)."""
    tagged = extract.tagged_cells(notebook)
    found = {
        item.exercise.id: extract.find_exercise(
            notebook,
            item.exercise,
            blank_source=item.blank_source,
            function=item.function,
            tagged=tagged,
        )
        for item in key.exercises
    }
    tasks = {}
    for item in key.exercises:
        if item.exercise.kind == "implement":
            task = implement_task(item, found[item.exercise.id], seed, cases)
            if task is not None:
                tasks[item.exercise.id] = task
    runs = run_functions(list(tasks.values()), limits, isolation=isolation) if tasks else {}
    revealed = revealed_in(notebook)
    results = []
    for item in key.exercises:
        here = found[item.exercise.id]
        exercise_id = item.exercise.id
        if item.exercise.kind == "implement" and (item.spec is None or not item.function):
            results.append(score_implement(item, here, None, None))
            continue
        if here.missing:
            results.append(_missing(item))
            continue
        if here.problem:
            result = Verdict(
                exercise_id, float(item.exercise.points), 0.0, "unreadable", here.problem
            )
        elif item.exercise.kind == "predict":
            result = score_predict(item, here, key.truths().get(exercise_id))
        elif item.exercise.kind == "explain":
            result = score_explain(item, here)
        else:
            result = score_implement(item, here, tasks.get(exercise_id), runs.get(exercise_id))
        results.append(_with_revealed(_with_notes(result, here), revealed.get(exercise_id)))
    return tuple(results)


def _with_revealed(result: Verdict, fields: tuple[str, ...] | None) -> Verdict:
    # The saved outputs show these answers (field names only: never a value in a message).
    if not fields:
        return result
    from dataclasses import replace

    note = f"revealed in the notebook before it was handed in: {', '.join(fields)}"
    return replace(result, message=f"{result.message}; {note}" if result.message else note)


def checks_fingerprint(
    key: ChapterKey,
    limits: Limits,
    *,
    execute: bool = True,
    cases: int | None = None,
    sandboxed: bool = True,
) -> str:
    """What, besides the submission and the seed, a grade depends on: the chapter's checks
    (:attr:`ChapterKey.checks_id`), the limits, the number of hidden cases, whether the
    notebook runs and whether the learner's code ran in the sandbox. A gradebook regrades a
    submission graded under another fingerprint (a ``--no-sandbox`` grade is redone in the
    sandbox)."""
    settings = json.dumps([sorted(vars(limits).items()), cases, execute, sandboxed])
    return f"{key.checks_id}-{hashlib.sha256(settings.encode()).hexdigest()[:8]}"


def unreadable_results(key: ChapterKey, why: str) -> tuple[Verdict, ...]:
    """Every exercise scored 0 with the same reason (a file that is not a notebook)."""
    return tuple(
        Verdict(item.exercise.id, float(item.exercise.points), 0.0, "unreadable", why)
        for item in key.exercises
    )


#: Appended to every row's message when the learner's code ran outside the sandbox.
UNSANDBOXED = "graded with --no-sandbox: the student's code ran with the grader's rights"


def grade_submission(
    student: str,
    path: str,
    data: bytes,
    key: ChapterKey,
    seed: int,
    limits: Limits,
    *,
    execute: bool = True,
    cases: int | None = None,
    isolation: Isolation | None = None,
) -> SubmissionResult:
    """Grades one submission's bytes; the same arguments always give the same result.

    ``execute=False`` skips the kernel run (its outcome is then ``not run``). The learner's code
    runs in ``isolation`` (the sandbox); None runs it as a plain limited process and says so in
    every row's message (:data:`UNSANDBOXED`). The result's ``checks`` is
    :func:`checks_fingerprint` of the key and these settings.
    """
    digest = hashlib.sha256(data).hexdigest()
    sandboxed = isolation is not None
    checks = checks_fingerprint(key, limits, execute=execute, cases=cases, sandboxed=sandboxed)
    try:
        notebook = extract.parse_notebook(data, path)
    except CourseError as error:
        run = RunOutcome("not run", None, "the file is not a readable notebook")
        results = unreadable_results(key, str(error))
        return SubmissionResult(student, key.chapter.id, path, digest, seed, checks, run, results)
    results = grade_notebook(notebook, key, seed, limits, cases=cases, isolation=isolation)
    if execute:
        run = run_notebook(notebook, limits, isolation=isolation)
    else:
        run = RunOutcome("not run", None, "not executed (--no-execute)")
    if not sandboxed:
        from dataclasses import replace

        results = tuple(replace(r, message=f"{r.message}; {UNSANDBOXED}") for r in results)
        run = replace(run, message=f"{run.message}; {UNSANDBOXED}")
    return SubmissionResult(student, key.chapter.id, path, digest, seed, checks, run, results)
