"""Grading one submission: a pure function of (submission bytes, the chapter's key, a seed).

:func:`grade_submission` reads the answers statically (:mod:`~llmfs.course.grading.extract`),
compares them in this process with the key read from the solutions
(:mod:`~llmfs.course.grading.key`), runs implement functions on hidden random cases in the
sandbox and compares their JSON outcomes here, and runs the notebook in a fresh kernel only to
report how the run went. No score depends on anything the learner's process says.

Row statuses (:data:`STATUSES`): ``right``, ``partial`` (some fields right), ``wrong``,
``unanswered``, ``missing`` (no cell holds the exercise), ``unreadable`` (the cell or the file
cannot be read), ``pending`` (an explain answer awaiting review; its score is None, never 0),
``reviewed`` (scored by an instructor), ``unchecked`` (an implement exercise with no hidden check;
score None).
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercises.compare import same_answer
from llmfs.course.exercises.reveals import revealed_in
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

STATUSES = (
    "right",
    "partial",
    "wrong",
    "unanswered",
    "missing",
    "unreadable",
    "pending",
    "reviewed",
    "unchecked",
)


@dataclass(frozen=True)
class ExerciseResult:
    """One gradebook row: the exercise's score (None while pending or unchecked), its points,
    status (one of :data:`STATUSES`), a message for the instructor and the learner (never the
    solution), and the answer as JSON text (explain: the learner's text) with its hash."""

    exercise: str
    points: float
    score: float | None
    status: str
    message: str
    answer: str = ""
    answer_sha: str = ""


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
    results: tuple[ExerciseResult, ...]


def case_rng(seed: int, exercise_id: str) -> random.Random:
    """The random source of one exercise's hidden cases for a grading seed.

    Seeded with a string, so it never coincides with a notebook's visible integer seed.
    """
    return random.Random(f"llmfs-grade:{seed}:{exercise_id}")


# --------------------------------------------------------------------------------------------
# comparing predict fields
# --------------------------------------------------------------------------------------------


def _generic(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return value.strip().lower()
    if isinstance(value, (list, tuple)):
        return [_generic(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _generic(v) for k, v in value.items()}
    return repr(value)


def field_matches(field: str, got: Any, expected: Any) -> bool:
    """True when the learner's literal for ``field`` says the same as the solution's.

    Known prediction fields are compared in the canonical form the notebook's check uses
    (:func:`llmfs.course.exercises.entries.normalize`: tuples and lists alike, "yes"/True alike,
    an error class by name); other fields compare as plain data (numbers by value, text without
    case). Equality is the course's one :func:`~llmfs.course.exercises.compare.same_answer`.
    """
    if got is None or isinstance(got, extract.Unreadable):
        return False
    try:
        # Loaded on use: the engine's entries import the tensor library; only predict answers
        # need it.
        from llmfs.course.exercises.entries import normalize

        mine, theirs = normalize(field, got), normalize(field, expected)
    except Exception:  # an unknown field or an entry the widget cannot read: compare as data
        return same_answer(_generic(got), _generic(expected))
    if isinstance(mine, str) and isinstance(theirs, str):
        return mine.strip().lower() == theirs.strip().lower()
    return same_answer(_generic(mine), _generic(theirs))


def _fmt(value: float) -> str:
    return f"{value:g}"


def score_predict(item: ExerciseKey, found: extract.Found) -> ExerciseResult:
    """Scores a predict exercise field by field (see the module docstring)."""
    exercise = item.exercise
    points = float(exercise.points)
    answers = found.answer if isinstance(found.answer, dict) else {}
    answer_text = json.dumps(extract.plain(answers), sort_keys=True)
    names = list(item.answers)
    given = {name: answers.get(name) for name in names}
    answered = [name for name in names if given[name] is not None]
    right = [name for name in answered if field_matches(name, given[name], item.answers[name])]
    wrong = [name for name in answered if name not in right]
    unreadable = [name for name in answered if isinstance(given[name], extract.Unreadable)]
    if not answered:
        return ExerciseResult(
            exercise.id, points, 0.0, "unanswered", "not answered yet", answer_text
        )
    if item.scoring == "all_or_nothing":
        score = points if len(right) == len(names) else 0.0
    else:
        score = points * len(right) / len(names)
    status = "right" if len(right) == len(names) else "partial" if right else "wrong"
    parts = [f"{len(right)} of {len(names)} fields right"]
    if wrong:
        parts.append("wrong: " + ", ".join(wrong))
        # The misconceptions the manifest names for these wrong values: what the notebook's own
        # check tells the learner for the same answer (one record for both).
        parts += [
            mistake.message
            for mistake in exercise.mistakes
            if mistake.field in wrong
            and field_matches(mistake.field, given[mistake.field], mistake.answer)
        ]
    missing = [name for name in names if given[name] is None]
    if missing:
        parts.append("not answered: " + ", ".join(missing))
    if unreadable:
        parts.append("not a literal (write the value itself): " + ", ".join(unreadable))
    extra = sorted(set(answers) - set(names))
    if extra:
        parts.append("not asked (ignored): " + ", ".join(extra))
    return ExerciseResult(exercise.id, points, score, status, "; ".join(parts), answer_text)


def score_explain(item: ExerciseKey, found: extract.Found) -> ExerciseResult:
    """An explain answer: pending review when written (score None), else unanswered (0)."""
    exercise = item.exercise
    text = found.answer if isinstance(found.answer, str) else ""
    if not text:
        return ExerciseResult(
            exercise.id, float(exercise.points), 0.0, "unanswered", "not answered yet"
        )
    return ExerciseResult(
        exercise.id,
        float(exercise.points),
        None,
        "pending",
        "awaiting the instructor's review",
        text,
        extract.sha256_text(text),
    )


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: How much of each argument of a failing case a row's message shows: enough to find the case,
#: short enough that what the learner's function said still fits the message (a matrix of a
#: kernel exercise is hundreds of numbers).
ARGUMENT_LIMIT = 80


def _show_args(args: Any) -> str:
    return ", ".join(_short(json.dumps(a), ARGUMENT_LIMIT) for a in args)


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
) -> ExerciseResult:
    """Compares the outcomes the sandbox sent back for ``task`` with the library's, here.

    Full points when every hidden case matches the library's outcome, else 0; the message names
    how many passed and the smallest failing case (its arguments and what the function gave,
    never the expected answer). A case that called a library function the exercise forbids
    (its spec's ``shortcuts``) makes the score 0 and the message names that function.
    """
    # Loaded on use: the specs import the tensor library; only implement answers need it.
    from llmfs.course.exercise_checks.spec import (
        SHORTCUT,
        expected_outcome,
        outcomes_match,
        shortcut_text,
    )

    exercise = item.exercise
    points = float(exercise.points)
    source = found.answer if isinstance(found.answer, str) else ""
    answer_sha = extract.sha256_text(source) if source else ""
    if item.spec is None or not item.function:
        return ExerciseResult(
            exercise.id,
            points,
            None,
            "unchecked",
            "no hidden check exists for this exercise; review it by hand",
            "",
            answer_sha,
        )
    if not source or task is None or run is None:
        return ExerciseResult(exercise.id, points, 0.0, "unanswered", "not implemented yet")
    spec = item.spec
    drawn = task.cases
    count = len(drawn)
    expected = [json.loads(json.dumps(expected_outcome(spec, args))) for args in drawn]
    if run.outcomes is None:
        return ExerciseResult(
            exercise.id,
            points,
            0.0,
            "wrong",
            f"{run.problem}; 0 of {count} hidden cases passed",
            "",
            answer_sha,
        )
    refused = [got for got in run.outcomes if got.get("error") == SHORTCUT]
    if refused:
        # Calling the library function the exercise re-implements scores nothing, whatever the
        # values: the message names the call (never an expected value).
        message = f"{shortcut_text(spec, refused[0])}; 0 of {count} hidden cases count"
        return ExerciseResult(exercise.id, points, 0.0, "wrong", message[:500], "", answer_sha)
    failing = [
        (args, got)
        for args, got, want in zip(drawn, run.outcomes, expected)
        if not outcomes_match(got, want)
    ]
    passed = count - len(failing)
    if not failing:
        return ExerciseResult(
            exercise.id, points, points, "right", f"all {count} hidden cases passed", "", answer_sha
        )
    args, got = min(failing, key=lambda pair: (len(json.dumps(pair[0])), json.dumps(pair[0])))
    # What the learner's process said is shown short: it is the learner's data, not ours.
    said = (
        f"raised {_short(str(got.get('error')))}"
        if "error" in got
        else f"returned {_short(json.dumps(got.get('value')))}"
    )
    message = (
        f"{passed} of {count} hidden cases passed; smallest failing case: "
        f"{item.function}({_show_args(args)}) {said}"
    )
    return ExerciseResult(exercise.id, points, 0.0, "wrong", message[:500], "", answer_sha)


def _missing(item: ExerciseKey) -> ExerciseResult:
    return ExerciseResult(
        item.exercise.id,
        float(item.exercise.points),
        0.0,
        "missing",
        f"no cell is tagged {item.exercise.tag} (deleted or re-tagged?)",
    )


def _with_notes(result: ExerciseResult, found: extract.Found) -> ExerciseResult:
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
) -> tuple[ExerciseResult, ...]:
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
            result = ExerciseResult(
                exercise_id, float(item.exercise.points), 0.0, "unreadable", here.problem
            )
        elif item.exercise.kind == "predict":
            result = score_predict(item, here)
        elif item.exercise.kind == "explain":
            result = score_explain(item, here)
        else:
            result = score_implement(item, here, tasks.get(exercise_id), runs.get(exercise_id))
        results.append(_with_revealed(_with_notes(result, here), revealed.get(exercise_id)))
    return tuple(results)


def _with_revealed(result: ExerciseResult, fields: tuple[str, ...] | None) -> ExerciseResult:
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


def unreadable_results(key: ChapterKey, why: str) -> tuple[ExerciseResult, ...]:
    """Every exercise scored 0 with the same reason (a file that is not a notebook)."""
    return tuple(
        ExerciseResult(item.exercise.id, float(item.exercise.points), 0.0, "unreadable", why)
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
