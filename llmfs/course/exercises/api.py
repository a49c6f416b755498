"""The text API of predict exercises: ``predict(...)`` holds a prediction, ``check(...)`` runs
and judges it, ``after(...)`` guards a cell that shows answers.

A chapter notebook's exercise uses two cells::

    q1 = predict(
        "view.reshape([3, 2])",
        exercise_id="ch02.q1",
        shape=None,  # PREDICTION (replace None with your answer)
        strides=None,  # PREDICTION (replace None with your answer)
    )

    check(q1)          # runs the expression and judges each field

With an exercise id, the expression and the fields come from the course manifest: ``predict``
refuses a field the exercise does not ask and an expression that differs from the exercise's.
``None`` means "not answered yet". Nothing of the truth is shown before a complete attempt: a check
with a field still missing lists the missing fields only (so "Run All" on an unanswered notebook
reveals nothing). After a complete attempt each field is right or wrong; a wrong field says which
entries differ and, when the answer matches a known misconception, what it shows; it can be
predicted again. A field's answer is revealed after :data:`MAX_WRONG_TRIES` wrong tries, or on
request (``check(q1, reveal=True)``). Attempts and reveals go to the attempts log
(:mod:`llmfs.course.attempts`) through the exercise's :class:`ExerciseState`. In graded work
(:func:`~llmfs.course.exercises.reveals.reveals_off`) nothing is revealed: each field is right or
wrong, and ``reveal=True`` is refused with a :class:`CourseError`. A comparison that shows an
answer carries a note of it in its saved output
(:data:`~llmfs.course.exercises.reveals.REVEAL_MIME`), which ``llmfs grade`` reports.

A :class:`Comparison` draws itself with the drawing :mod:`llmfs.widgets` installs (tables and the
result's offset table, :func:`draw_with`); without it, as the plain lines of
:func:`~llmfs.course.exercises.feedback.plain_text`. The engine never imports the widgets.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from html import escape
from typing import Any

from llmfs.course import CourseError
from llmfs.course.attempts import record_event
from llmfs.course.exercises.describe import ExpressionError
from llmfs.course.exercises.entries import (
    LABELS,
    PredictionError,
    field_name,
    is_plain,
    predict_exercise,
)
from llmfs.course.exercises.feedback import plain_text
from llmfs.course.exercises.fixtures import FixtureError, fixture_namespace
from llmfs.course.exercises.judge import FieldVerdict, compare
from llmfs.course.exercises.reveals import REVEALS_OFF, reveal_bundle, reveals_allowed
from llmfs.course.exercises.run import Outcome, run
from llmfs.course.exercises.state import (
    exercise_finished,
    exercise_state,
    key_text,
    prediction_key,
    record,
)
from llmfs.course.exercises.verdict import Verdict, summarize

#: Wrong tries at a field after which its answer is shown (``check(..., max_tries=N)`` changes it).
MAX_WRONG_TRIES = 3

#: The drawing of a comparison as (text, HTML), installed by :func:`draw_with`; empty until then.
_DRAWING: list[Callable[[Comparison], str]] = []


def draw_with(text: Callable[[Comparison], str], html: Callable[[Comparison], str]) -> None:
    """Makes every :class:`Comparison` draw itself with ``text`` (its ``repr``) and ``html``
    (its ``_repr_html_``). :mod:`llmfs.widgets` calls it on import, so the engine stays free of
    drawing code while a notebook shows tables."""
    _DRAWING[:] = [text, html]


@dataclass(frozen=True)
class Prediction:
    """A learner's prediction for one expression: plain data, ``None`` = not answered yet.

    ``fields`` holds every asked field (an exercise's fields in the manifest's order).
    """

    expression: str | Callable[[], Any]
    fields: Mapping[str, Any]
    exercise_id: str | None = None
    label: str | None = None

    def __repr__(self) -> str:
        answered = ", ".join(
            f"{LABELS.get(k, k)} {v!r}"
            if v is not None
            else f"{LABELS.get(k, k)} (not answered yet)"
            for k, v in self.fields.items()
        )
        return f"prediction for {self.label or _label(self.expression)}: {answered}"


def _label(expression: str | Callable[[], Any]) -> str:
    return (
        expression.strip()
        if isinstance(expression, str)
        else getattr(expression, "__name__", "expression")
    )


def _same_source(a: str, b: str) -> bool:
    try:
        return ast.dump(ast.parse(a.strip(), mode="eval")) == ast.dump(
            ast.parse(b.strip(), mode="eval")
        )
    except SyntaxError:
        return a.strip() == b.strip()


def predict(
    expression: str | Callable[[], Any],
    *,
    exercise_id: str | None = None,
    label: str | None = None,
    **fields: Any,
) -> Prediction:
    """Holds a prediction for ``expression`` until :func:`check` runs it.

    ``expression`` is Python source such as ``"base.reshape([3, 2])"`` (evaluated later in the
    notebook's names) or a no-argument callable. ``fields`` are the predicted fields (see the
    module docstring); ``None`` means not answered yet. With ``exercise_id`` the manifest's
    exercise decides the expression and the fields: :class:`CourseError` names the allowed
    fields for a field the exercise does not ask, and the manifest's expression when
    ``expression`` differs from it. ``label`` names a callable in the output. Raises
    :class:`PredictionError` for an unknown field.
    """
    if exercise_id is None:
        canonical = {field_name(k): v for k, v in fields.items()}
        return Prediction(expression, canonical, None, label)
    exercise = predict_exercise(exercise_id)
    if not isinstance(expression, str) or not _same_source(expression, exercise.expression):
        raise CourseError(
            f"{exercise_id} asks about {exercise.expression!r}, not {_label(expression)!r}; "
            "keep the exercise's expression"
        )
    plain = is_plain(exercise.fields)
    asked = {}
    for name, value in fields.items():
        key = name if plain else field_name(name)
        if key not in exercise.fields:
            raise CourseError(
                f"{exercise_id} does not ask for {name!r}: predict its fields "
                f"{', '.join(exercise.fields)}"
            )
        asked[key] = value
    ordered = {name: asked.get(name) for name in exercise.fields}
    return Prediction(exercise.expression, ordered, exercise_id, label)


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`check`: the outcome and one verdict per field.

    ``complete`` is False when a field is still missing or unreadable: then only the question
    and the missing fields are shown, nothing of the truth. ``repeated`` is True when the
    prediction is one already tried at this exercise: it was judged again and shown, but not
    counted as a try. ``repr`` is the fixed-width text; in
    a notebook it renders as HTML with the same content.
    """

    outcome: Outcome
    verdicts: tuple[FieldVerdict, ...]
    recorded: bool = False
    complete: bool = True
    exercise_id: str | None = None
    tries_left: Mapping[str, int] | None = None
    reveals: bool = True
    repeated: bool = False

    @property
    def score(self) -> dict[str, bool]:
        """Field -> right, for the answered fields (what an attempt records)."""
        return {v.field: v.status == "right" for v in self.verdicts if v.answered}

    @property
    def all_right(self) -> bool:
        """True when every field was answered and right."""
        return bool(self.verdicts) and all(v.status == "right" for v in self.verdicts)

    @property
    def finished(self) -> bool:
        """True when every field is right or revealed: the result may be shown in full."""
        return self.complete and all(v.status == "right" or v.revealed for v in self.verdicts)

    @property
    def verdict(self) -> Verdict:
        """The exercise's one :class:`~llmfs.course.exercises.verdict.Verdict` (status, points,
        named mistakes), summarized from these field verdicts exactly as ``llmfs check`` and
        ``llmfs grade`` summarize theirs (:func:`~llmfs.course.exercises.verdict.summarize`).
        A prediction without an exercise id counts one point per field."""
        if self.exercise_id is not None:
            exercise: Any = predict_exercise(self.exercise_id)
        else:
            names = tuple(v.field for v in self.verdicts)
            exercise = _Unlisted(self.outcome.label, len(names), names)
        answers = {v.field: v.value for v in self.verdicts if v.status != "unanswered"}
        return summarize(exercise, self.verdicts, answers)

    def __repr__(self) -> str:
        return _DRAWING[0](self) if _DRAWING else plain_text(self)

    def _repr_html_(self) -> str | None:
        return _DRAWING[1](self) if _DRAWING else None

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        # Only a comparison that shows an answer adds to its output: a note naming the fields
        # shown (never their values), which the grader reads from the saved notebook.
        return reveal_bundle(self.exercise_id, (v.field for v in self.verdicts if v.revealed))


@dataclass(frozen=True)
class NotChecked:
    """A check that could not judge: the exercise's expression could not be evaluated for a
    reason that is not the learner's answer (``reason``). Nothing was recorded, no try spent,
    nothing revealed."""

    exercise_id: str
    reason: str
    recorded: bool = False
    complete: bool = False

    def __repr__(self) -> str:
        return (
            f"{self.exercise_id}: not checked: the exercise's expression could not be "
            f"evaluated ({self.reason}). This is not about your answer: nothing was recorded "
            "and no try was spent."
        )

    def _repr_html_(self) -> str:
        return f'<p class="llmfs-verdict" data-status="not-checked">{escape(repr(self))}</p>'


@dataclass(frozen=True)
class _Unlisted:
    # What summarize reads of an exercise, for a prediction the manifest does not list.
    id: str
    points: int
    fields: tuple[str, ...]
    scoring: str = "per_field"
    mistakes: tuple[Any, ...] = ()


def attempt(
    exercise_id: str | None,
    answers: Mapping[str, Any],
    outcome: Outcome,
    fields: Sequence[str],
    *,
    reveal: bool = False,
    max_tries: int | None = None,
    mistakes: Sequence[Any] = (),
) -> Comparison:
    """The one exercise step behind :func:`check` and the widget's Run: judge ``answers``
    against ``outcome``; when every field is answered and the prediction is a new one (a
    prediction already tried is judged and shown again, never counted: see
    :mod:`~llmfs.course.exercises.state`), record the attempt and update the exercise's
    :class:`ExerciseState`; reveal the fields with ``max_tries`` wrong tries (default
    :data:`MAX_WRONG_TRIES`), counted over distinct predictions, or every field when ``reveal``
    (a logged event). With
    reveals off nothing is revealed, and ``reveal=True`` raises :class:`CourseError` before
    anything is judged or recorded."""
    limit = MAX_WRONG_TRIES if max_tries is None else max_tries
    if limit < 1:
        raise CourseError(f"max_tries must be at least 1, got {limit}")
    reveals = reveals_allowed()
    if reveal and not reveals:
        raise CourseError(
            f"{REVEALS_OFF}: reveal=True shows no answer here; each check says right or wrong "
            "per field, and hint(id, n) gives the exercise's hint n"
        )
    verdicts = compare(answers, outcome, fields, mistakes=mistakes)
    complete = all(v.answered for v in verdicts)
    state = exercise_state(exercise_id) if exercise_id else None
    recorded = repeated = False
    if state is not None:
        state.answers = dict(answers)
        if complete:
            key = prediction_key(verdicts)
            repeated = key_text(key) in state.tried
            if not repeated:  # a try is a distinct prediction (see state's module docstring)
                recorded = record(
                    exercise_id,
                    verdicts,
                    hints=state.hints_seen,
                    revealed=sorted(state.revealed),
                )
                state.count_try(key, {v.field: v.status == "right" for v in verdicts})
        if reveal:
            newly = sorted({v.field for v in verdicts if v.status != "right"} - state.revealed)
            if newly:
                record_event("reveal", exercise_id, fields=newly)  # type: ignore[arg-type]
                state.revealed.update(newly)
        tried_out = sorted(
            f for f, n in state.wrong_tries.items() if n >= limit and f not in state.revealed
        )
        # Shown now because of the wrong tries (never on a repeated prediction): the log says so.
        if tried_out and reveals and not repeated:
            record_event("reveal", exercise_id, fields=tried_out)  # type: ignore[arg-type]
            state.revealed.update(tried_out)
        # With reveals off even an answer shown earlier (practice work in the same folder)
        # stays hidden: graded work shows none.
        shown = state.revealed if reveals else set()
        left = {v.field: state.tries_left(v.field, limit) for v in verdicts} if reveals else None
    else:
        shown = {v.field for v in verdicts} if reveal else set()
        left = None
    verdicts = tuple(_with_reveal(v, v.field in shown) for v in verdicts)
    comparison = Comparison(
        outcome, verdicts, recorded, complete, exercise_id, left, reveals, repeated
    )
    if state is not None:
        state.last = comparison
        state.notify()
    return comparison


def _with_reveal(verdict: FieldVerdict, revealed: bool) -> FieldVerdict:
    return replace(verdict, revealed=revealed)


def check(
    prediction: Prediction,
    namespace: Mapping[str, Any] | None = None,
    *,
    fields: Sequence[str] | None = None,
    reveal: bool = False,
    max_tries: int | None = None,
) -> Comparison | NotChecked:
    """Runs the prediction's expression and judges the prediction, field by field.

    An exercise's expression is evaluated in its fixture
    (:func:`~llmfs.course.exercises.fixtures.fixture_namespace`: the names the chapter defines
    for it, in a fresh namespace), never in the learner's kernel, so the verdict depends on the
    answer alone; ``namespace`` replaces the fixture (for authors and tests). Without an
    exercise or a fixture, names come from ``namespace`` or else the calling module's globals.
    When an exercise's expression cannot be evaluated (its fixture or the expression fails, a
    reason that is not the answer) the check returns a :class:`NotChecked` saying why: nothing
    is recorded and no try is spent. ``fields`` adds fields that count as
    "not answered yet" when the prediction lacks them. A complete prediction of an exercise is
    recorded; an incomplete one shows only what is missing. ``reveal=True`` shows the answers of
    the fields not yet right (logged); a field is also revealed after ``max_tries`` wrong tries.
    Raises :class:`~llmfs.course.exercises.describe.ExpressionError` for a Python error in the
    expression of a prediction that is not an exercise's, and :class:`CourseError` for
    ``reveal=True`` while reveals are off.
    """
    if not isinstance(prediction, Prediction):
        raise PredictionError(
            f"check() takes what predict(...) returned, got {type(prediction).__name__}"
        )
    exercise_id = prediction.exercise_id
    mistakes: Sequence[Any] = ()
    if exercise_id is not None:
        mistakes = predict_exercise(exercise_id).mistakes
        if namespace is None:
            try:
                namespace = fixture_namespace(exercise_id)
            except FixtureError as error:
                return NotChecked(exercise_id, str(error))
    if namespace is None and isinstance(prediction.expression, str):
        namespace = sys._getframe(1).f_globals
    plain = is_plain(list(prediction.fields))
    try:
        outcome = run(prediction.expression, namespace, label=prediction.label, plain=plain)
    except ExpressionError as error:
        if exercise_id is None:
            raise
        return NotChecked(exercise_id, str(error))
    extra = [f for f in fields or () if f not in prediction.fields]
    chosen = list(prediction.fields) + extra
    return attempt(
        prediction.exercise_id,
        prediction.fields,
        outcome,
        chosen,
        reveal=reveal,
        max_tries=max_tries,
        mistakes=mistakes,
    )


def after(*exercise_ids: str) -> bool:
    """Guards a cell that shows results: ``if after("ch02.q2"): print(...)``.

    True once every named predict exercise is finished (every field right, or its answer
    shown); otherwise prints one line saying which exercise to finish first and returns False,
    so running an unanswered notebook top to bottom shows no answer before its prediction.
    Raises :class:`CourseError` for an unknown exercise, or when no exercise is named."""
    if not exercise_ids:
        raise CourseError(
            'after() needs the exercise ids whose answers the cell shows, e.g. after("ch02.q2")'
        )
    waiting = [exercise_id for exercise_id in exercise_ids if not exercise_finished(exercise_id)]
    if waiting:
        print(
            f"This output shows the answer to {', '.join(waiting)}: it appears once "
            f"{'that exercise is' if len(waiting) == 1 else 'those exercises are'} finished "
            "(every field right, or its answer shown). Run the check, then this cell."
        )
    return not waiting


__all__ = [
    "MAX_WRONG_TRIES",
    "Comparison",
    "NotChecked",
    "Prediction",
    "after",
    "attempt",
    "check",
    "draw_with",
    "predict",
]
