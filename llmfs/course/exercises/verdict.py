"""The one verdict of an exercise: :class:`Verdict`, given by :func:`judge_predict` and
:func:`judge_implement` for the notebook's check, ``llmfs check`` and ``llmfs grade`` alike.

Every place that says how a learner did on an exercise calls one of these two functions, so
they cannot disagree:

* a predict exercise's answers are judged field by field by
  :func:`~llmfs.course.exercises.judge.compare` against the outcome of the exercise's expression
  (the one answer normaliser: an error named by a unique beginning or by a base class of the
  raised error, values flattened, a scalar as a one-value list, "yes"/"no" for a boolean, words
  in the case the course writes them) with the one mistake catalogue (the manifest's mistakes,
  then the general detectors); :func:`summarize` turns the field verdicts into points;
* an implement exercise's cases are ordered by size (the spec's
  :func:`~llmfs.course.exercise_checks.spec.case_order`) and the smallest failing case is the one
  reported, whoever ran the cases.

A :class:`Verdict` is plain data: the widgets draw one, ``llmfs check`` prints one (with the
learner's history: wrong tries, reveals, hints), the gradebook stores one per row. It travels as
JSON (:meth:`Verdict.to_json`, :meth:`Verdict.from_json`) from a notebook's run to
``llmfs check``.

Statuses (:data:`STATUSES`): ``right``, ``partial`` (some fields right), ``wrong``,
``unanswered``, ``missing`` (no cell holds the exercise), ``unreadable`` (the cell or the file
cannot be read), ``pending`` (an explain answer awaiting review; its score is None, never 0),
``reviewed`` (scored by an instructor), ``unchecked`` (not judged: no hidden check exists, or
the run stopped before it; score None).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from llmfs.course.exercises.judge import FieldVerdict, compare

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

#: The environment variable naming the file a notebook's run appends its verdicts to
#: (:func:`write_verdict`), which ``llmfs check`` reads (:func:`read_verdicts`).
VERDICTS_ENV = "LLMFS_RECORD_VERDICTS"

#: The longest message a verdict keeps (a gradebook row, a line of ``llmfs check``).
MESSAGE_LIMIT = 500


@dataclass(frozen=True)
class Verdict:
    """How a learner did on one exercise.

    ``score`` is the points earned (None while pending review or unchecked), ``status`` one of
    :data:`STATUSES`, ``message`` what the instructor and the learner read (never the
    solution), ``answer`` the answer as text (a predict exercise's fields as JSON, an explain
    answer's text) with its hash ``answer_sha``.

    A predict verdict lists ``wrong_fields`` and the ``mistakes`` its wrong answers show (the
    manifest's and the general detectors', in that order, each once); an implement verdict the
    cases ``passed`` of ``cases`` and ``smallest``, the smallest failing case (its arguments and
    what the function gave, never the expected answer). ``wrong_tries``, ``revealed`` and
    ``hints_used`` are the learner's history (what ``llmfs check`` reads from the attempts log;
    zero and False where no history is known).

    Invariant: ``score`` is None exactly for ``pending`` and ``unchecked``, and else lies in
    ``[0, points]``; ``right`` is True exactly for status ``right``.
    """

    exercise: str
    points: float
    score: float | None
    status: str
    message: str = ""
    answer: str = ""
    answer_sha: str = ""
    kind: str = ""
    wrong_fields: tuple[str, ...] = ()
    mistakes: tuple[str, ...] = ()
    passed: int | None = None
    cases: int | None = None
    smallest: str = ""
    wrong_tries: int = 0
    revealed: bool = False
    hints_used: int = 0

    @property
    def right(self) -> bool | None:
        """True when right, False when judged and not right, None when not judged (unanswered,
        missing, pending or unchecked)."""
        if self.status == "right":
            return True
        if self.status in ("partial", "wrong", "unreadable"):
            return False
        return None

    @property
    def answered(self) -> bool:
        """True when the learner gave an answer (judged or not): not unanswered or missing."""
        return self.status not in ("unanswered", "missing")

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON data (lists for tuples)."""
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        """The verdict :meth:`to_json` wrote; unknown keys are ignored and a value of the wrong
        kind raises :class:`ValueError` (the data crossed a process boundary)."""
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name not in known:
                continue
            if name in ("wrong_fields", "mistakes"):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise ValueError(f"{name} must be a list of strings")
                value = tuple(value)
            values[name] = value
        verdict = cls(**values)
        numbers = (int, float)
        sound = (
            isinstance(verdict.exercise, str)
            and verdict.status in STATUSES
            and isinstance(verdict.points, numbers)
            and (verdict.score is None or isinstance(verdict.score, numbers))
            and all(isinstance(getattr(verdict, n), str) for n in _TEXTS)
            and all(isinstance(getattr(verdict, n), int) for n in ("wrong_tries", "hints_used"))
            and all(
                getattr(verdict, n) is None or isinstance(getattr(verdict, n), int)
                for n in ("passed", "cases")
            )
        )
        if not sound:
            raise ValueError(f"not a verdict: {dict(data)!r}"[:200])
        return verdict


_TEXTS = ("message", "answer", "answer_sha", "kind", "smallest")


def _fields_text(names: Sequence[str]) -> str:
    return ", ".join(names)


def summarize(
    exercise: Any, verdicts: Sequence[FieldVerdict], answers: Mapping[str, Any] | None = None
) -> Verdict:
    """The exercise's verdict from its field verdicts (what
    :func:`~llmfs.course.exercises.judge.compare` gave for every asked field): points per
    right field (``per_field``) or all or nothing, the wrong fields, the named mistakes and the
    message. ``answers`` (the learner's entries) become the verdict's ``answer`` text."""
    asked = list(exercise.fields) or [v.field for v in verdicts]
    by_field = {v.field: v for v in verdicts}
    points = float(exercise.points)
    answer = json.dumps(_plain(answers or {}), sort_keys=True, default=repr)
    judged = [f for f in asked if f in by_field and by_field[f].status != "unanswered"]
    if not judged:
        return Verdict(
            exercise.id, points, 0.0, "unanswered", "not answered yet", answer, kind="predict"
        )
    right = [f for f in judged if by_field[f].status == "right"]
    wrong = [f for f in judged if f not in right]
    if getattr(exercise, "scoring", "per_field") == "all_or_nothing":
        score = points if len(right) == len(asked) else 0.0
    else:
        score = points * len(right) / len(asked)
    status = "right" if len(right) == len(asked) else "partial" if right else "wrong"
    mistakes = tuple(dict.fromkeys(m for f in wrong for m in by_field[f].mistakes))
    parts = [f"{len(right)} of {len(asked)} fields right"]
    if wrong:
        parts.append("wrong: " + _fields_text(wrong))
        parts += mistakes
    missing = [f for f in asked if f not in judged]
    if missing:
        parts.append("not answered: " + _fields_text(missing))
    unreadable = [f for f in judged if by_field[f].status == "unreadable"]
    if unreadable:
        parts.append("not read (write the value itself): " + _fields_text(unreadable))
    return Verdict(
        exercise.id,
        points,
        score,
        status,
        "; ".join(parts)[:MESSAGE_LIMIT],
        answer,
        kind="predict",
        wrong_fields=tuple(wrong),
        mistakes=mistakes,
    )


def _plain(value: Any) -> Any:
    text = getattr(value, "text", None)
    if isinstance(text, str) and type(value).__name__ == "Unreadable":
        return {"not a literal": text}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def entry(value: Any) -> Any:
    """A learner's entry as the judge reads it: a field that is not a literal (an
    :class:`~llmfs.course.exercises.record.Unreadable`) is judged as its text, never computed."""
    text = getattr(value, "text", None)
    return text if isinstance(text, str) and type(value).__name__ == "Unreadable" else value


def judge_predict(exercise: Any, answers: Mapping[str, Any], truth: Any) -> Verdict:
    """The verdict of a predict exercise's ``answers`` (field -> entry; None: not answered)
    against ``truth``, the :class:`~llmfs.course.exercises.run.Outcome` of its expression:
    every asked field judged by :func:`~llmfs.course.exercises.judge.compare` with the
    exercise's mistakes and the general detectors, then :func:`summarize`. A field the exercise
    does not ask is ignored (the message says so). Never raises for a learner's entry."""
    asked = list(exercise.fields)
    given = {name: entry(value) for name, value in answers.items() if name in asked}
    verdicts = compare(given, truth, asked, mistakes=exercise.mistakes)
    verdict = summarize(exercise, verdicts, {k: v for k, v in answers.items() if k in asked})
    extra = sorted(set(answers) - set(asked))
    if extra:
        note = "not asked (ignored): " + _fields_text(extra)
        message = f"{verdict.message}; {note}" if verdict.message else note
        return _replace(verdict, message=message[:MESSAGE_LIMIT])
    return verdict


def _replace(verdict: Verdict, **changes: Any) -> Verdict:
    from dataclasses import replace

    return replace(verdict, **changes)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


#: How much of each argument of a failing case a message shows: enough to find the case, short
#: enough that what the learner's function said still fits (a kernel's matrix is hundreds of
#: numbers).
ARGUMENT_LIMIT = 80


def case_text(function: str, args: Sequence[Any], got: Mapping[str, Any]) -> str:
    """``name(args) returned X`` / ``raised Y`` for one case, each part shortened: what the
    learner's function said, never the expected answer."""
    shown = ", ".join(_short(json.dumps(a, ensure_ascii=False), ARGUMENT_LIMIT) for a in args)
    said = (
        f"raised {_short(str(got.get('error')))}"
        if "error" in got
        else f"returned {_short(json.dumps(got.get('value'), ensure_ascii=False))}"
    )
    return f"{function}({shown}) {said}"


def judge_implement(
    spec: Any,
    points: float,
    cases: Sequence[Sequence[Any]],
    outcomes: Sequence[Mapping[str, Any]] | None,
    *,
    problem: str = "",
    which: str = "hidden",
    expected: Sequence[Mapping[str, Any]] | None = None,
) -> Verdict:
    """The verdict of an implement exercise whose function gave ``outcomes`` (plain JSON,
    ``{"value": ...}`` or ``{"error": name}``) on ``cases`` (None: it could not run, ``problem``
    says why). ``which`` names the cases in the message (``hidden``, ``random``); ``expected``
    are the library's outcomes (default: computed here from ``spec``).

    Full points when every case matches, else 0. A case that called a function the exercise
    forbids scores 0 and the message names the call, for the smallest such case. Otherwise the
    smallest failing case by the spec's case order (its ``order``) is reported,
    its arguments and what the function gave. ``spec`` is an
    :class:`~llmfs.course.exercise_checks.spec.ImplementSpec`: its ``order``, ``expected``,
    ``matches`` and ``refusal`` are the rules read here."""
    exercise_id = spec.exercise_id
    count = len(cases)
    base = Verdict(exercise_id, float(points), 0.0, "wrong", kind="implement", cases=count)
    if outcomes is None:
        message = f"{problem}; 0 of {count} {which} cases passed"
        return _replace(base, message=message[:MESSAGE_LIMIT], passed=0)
    if len(outcomes) != count:
        raise ValueError(f"{count} cases but {len(outcomes)} outcomes")
    order = sorted(range(count), key=lambda k: spec.order(cases[k]))
    refused = [k for k in order if spec.refusal(dict(outcomes[k])) is not None]
    if refused:
        # Calling the library function the exercise re-implements scores nothing, whatever the
        # values: the message names the call (never an expected value).
        k = refused[0]
        message = f"{spec.refusal(dict(outcomes[k]))}; 0 of {count} {which} cases count"
        smallest = case_text(spec.function, cases[k], outcomes[k])
        return _replace(base, message=message[:MESSAGE_LIMIT], passed=0, smallest=smallest)
    wants = (
        list(expected)
        if expected is not None
        else [json.loads(json.dumps(spec.expected(args))) for args in cases]
    )
    failing = [k for k in order if not spec.matches(dict(outcomes[k]), dict(wants[k]))]
    passed = count - len(failing)
    if not failing:
        return _replace(
            base,
            score=float(points),
            status="right",
            message=f"all {count} {which} cases passed",
            passed=passed,
        )
    smallest = case_text(spec.function, cases[failing[0]], outcomes[failing[0]])
    message = f"{passed} of {count} {which} cases passed; smallest failing case: {smallest}"
    return _replace(base, message=message[:MESSAGE_LIMIT], passed=passed, smallest=smallest)


def write_verdict(verdict: Verdict | None, exercise_id: str, error: str = "") -> None:
    """Appends one JSON line to the file named by :data:`VERDICTS_ENV` (nothing when unset):
    ``{"exercise": id, "verdict": {...}}``, or ``{"exercise": id, "error": why}`` when the
    exercise could not be judged. Never raises: a notebook's run must go on."""
    target = os.environ.get(VERDICTS_ENV)
    if not target:
        return
    line: dict[str, Any] = {"exercise": exercise_id}
    if verdict is not None:
        line["verdict"] = verdict.to_json()
    if error:
        line["error"] = error
    try:
        with open(target, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
    except OSError:
        pass


def read_verdicts(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """Exercise id -> the last line :func:`write_verdict` wrote for it (empty when none);
    lines that are not JSON objects naming an exercise are skipped (the run was the learner's)."""
    found: dict[str, dict[str, Any]] = {}
    try:
        with open(path, encoding="utf-8") as lines:
            for text in lines:
                try:
                    line = json.loads(text)
                except json.JSONDecodeError:
                    continue
                if isinstance(line, dict) and isinstance(line.get("exercise"), str):
                    found[line["exercise"]] = line
    except OSError:
        pass
    return found


__all__ = [
    "STATUSES",
    "VERDICTS_ENV",
    "Verdict",
    "case_text",
    "entry",
    "judge_implement",
    "judge_predict",
    "read_verdicts",
    "summarize",
    "write_verdict",
]
