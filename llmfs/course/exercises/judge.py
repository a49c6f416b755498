"""Verdicts: the one comparison of a learner's entry with the truth.

:func:`judge` reads one field's entry, compares it with :meth:`Outcome.truth
<llmfs.course.exercises.run.Outcome.truth>` by :func:`~llmfs.course.exercises.compare.same_answer`
and, for a wrong entry, says which positions differ (never the true values) and which
misconceptions it shows. :func:`compare` judges every field of a prediction; it is the single
place that decides verdicts, for the notebook's ``check``, the widgets and the self-check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from llmfs.course.exercises.compare import same_answer
from llmfs.course.exercises.entries import (
    FIELDS,
    LABELS,
    NOT_ANSWERED,
    RIGHT_MARK,
    WRONG_MARK,
    UnreadableEntry,
    display,
    field_name,
    flat,
    normalize,
    plain_value,
    resolve_error_name,
)
from llmfs.course.exercises.misconceptions import Context, diagnose, predicted_raise
from llmfs.course.exercises.run import Outcome
from llmfs.tensor import TensorError

VerdictStatus = Literal["right", "wrong", "unanswered", "unreadable"]


@dataclass(frozen=True)
class FieldVerdict:
    """One field's comparison. ``status`` is ``right``, ``wrong``, ``unanswered`` or
    ``unreadable`` (with ``note`` saying why); ``predicted`` and ``truth`` are display strings.

    ``differs`` says which entries differ (positions only, never the true values) and
    ``mistakes`` holds the messages of the misconceptions the wrong answer matches. ``revealed``
    is True when the learner may see ``truth`` (the field was revealed); renderers show the
    truth of a wrong field only then.
    """

    field: str
    predicted: str
    truth: str
    status: VerdictStatus
    note: str = ""
    differs: str = ""
    mistakes: tuple[str, ...] = ()
    revealed: bool = False
    value: Any = None

    @property
    def label(self) -> str:
        """The field's name for people (``base offset``, ``logical offsets``...)."""
        return LABELS.get(self.field, self.field)

    @property
    def answered(self) -> bool:
        """True when the entry was read and judged (right or wrong)."""
        return self.status in ("right", "wrong")

    @property
    def verdict_text(self) -> str:
        """``✓ right``, ``✗ wrong``, ``not answered yet`` or ``? could not read: ...``."""
        if self.status == "right":
            return f"{RIGHT_MARK} right" + (f" ({self.note})" if self.note else "")
        if self.status == "wrong":
            return f"{WRONG_MARK} wrong" + (f" ({self.note})" if self.note else "")
        if self.status == "unanswered":
            return NOT_ANSWERED
        return f"? could not read: {self.note}"

    @property
    def shown_truth(self) -> str:
        """The truth as the learner may see it: for a right or revealed field the value, else
        ``hidden``."""
        return self.truth if self.status == "right" or self.revealed else "hidden"


def _error_matches(predicted: str, exception: TensorError | None) -> bool:
    if exception is None:
        return predicted == "none"
    names = [
        cls.__name__
        for cls in type(exception).__mro__
        if issubclass(cls, TensorError) and cls.__name__ not in ("TensorError", "TensorViewError")
    ]
    return predicted in names


def judge(
    field: str,
    predicted: Any,
    outcome: Outcome,
    *,
    given: Mapping[str, Any] | None = None,
    mistakes: Sequence[Any] = (),
) -> FieldVerdict:
    """The verdict for one field: reads the entry with :func:`normalize`, compares it with
    :meth:`Outcome.truth`; a wrong entry gets the positions that differ and the messages of the
    misconceptions it matches (``given`` holds the other predicted fields, for the checks across
    fields; ``mistakes`` are the exercise's own :class:`~llmfs.course.manifest.Mistake`\\ s).
    Never raises for a learner's entry (only for an unknown field)."""
    plain = outcome.plain is not None
    if not plain:
        field = field_name(field)
        raised = (
            None if field == "error" else predicted_raise(predicted, (given or {}).get("error"))
        )
        if raised is not None:
            return _judge_raise(field, predicted, raised, outcome, given, mistakes)
    truth = outcome.truth(field)
    if plain:
        truth_text = display(field, truth)
    else:
        truth_text = display(field, truth) if truth is not None else "— (rejected)"
    try:
        value = plain_value(predicted) if plain else normalize(field, predicted)
    except UnreadableEntry as error:
        return FieldVerdict(field, str(predicted).strip(), truth_text, "unreadable", str(error))
    if value is None:
        return FieldVerdict(field, "—", truth_text, "unanswered")
    shown = display(field, value)
    note = ""
    if plain:
        right = same_answer(value, truth)
    elif field == "error":
        full = value if value == "none" else (resolve_error_name(value) or value)
        right = _error_matches(full, outcome.exception)
        if right and full != value:
            note = f"full name: {full}"
    elif truth is None:
        right = False
        # The rule to check, not the outcome: saying "rejected" here would answer the field.
        note = (
            "check first whether the request keeps its rule; a field of a request that is "
            "refused is predicted as 'raises ErrorName'"
        )
    elif field == "values":
        right = same_answer(value, truth)
        if not right and not isinstance(truth, list) and isinstance(value, list):
            right = len(value) == 1 and same_answer(value[0], truth)
        if not right and isinstance(value, list) and isinstance(truth, list):
            flat_truth = flat(truth)
            if value == flat(value) and same_answer(value, flat_truth) and len(flat_truth) > 1:
                right = True
                note = "flattened"
    else:
        right = same_answer(value, truth)
    if right:
        return FieldVerdict(field, shown, truth_text, "right", note, value=value)
    context = Context(outcome, {k: v for k, v in (given or {}).items() if k != field})
    found = [m.message for m in mistakes if m.field == field and _is_answer(field, m, value, plain)]
    # The exercise's own mistake names this very answer: the general rules would say it again.
    found = found or diagnose(field, value, truth, context)
    return FieldVerdict(
        field,
        shown,
        truth_text,
        "wrong",
        note,
        differs=_differs(field, value, truth),
        mistakes=tuple(dict.fromkeys(found)),
        value=value,
    )


def _judge_raise(
    field: str,
    predicted: Any,
    raised: str,
    outcome: Outcome,
    given: Mapping[str, Any] | None,
    mistakes: Any,
) -> FieldVerdict:
    """A tensor field predicted as an error ("raises X", see :func:`predicted_raise`): right when
    the request raises (the error X, when one is named), judged and explained as a prediction of
    the ``error`` field."""
    truth = outcome.truth(field)
    truth_text = display(field, truth) if truth is not None else "— (rejected)"
    shown = f"raises {raised}" if raised else "raises"
    if not raised and outcome.exception is not None:
        return FieldVerdict(field, shown, truth_text, "right", value=shown)
    as_error = judge("error", raised or "raises", outcome, given=given, mistakes=mistakes)
    # A blank field stands for the error field's prediction, whose verdict explains it once.
    explained = as_error.mistakes if isinstance(predicted, str) and predicted.strip() else ()
    return replace(
        as_error, field=field, predicted=shown, truth=truth_text, mistakes=explained, value=shown
    )


def _is_answer(field: str, mistake: Any, value: Any, plain: bool) -> bool:
    try:
        expected = plain_value(mistake.answer) if plain else normalize(field, mistake.answer)
    except UnreadableEntry:
        return False
    return same_answer(expected, value)


def _differs(field: str, value: Any, truth: Any) -> str:
    """Which entries of a wrong list answer differ: positions only, never the true values."""
    if field not in ("shape", "strides", "offsets", "values") or truth is None:
        return ""
    got = flat(value) if isinstance(value, (list, tuple)) else [value]
    want = flat(truth) if isinstance(truth, (list, tuple)) else [truth]
    if len(got) != len(want):
        return f"you gave {len(got)} entries; the answer has {len(want)}"
    wrong = [k for k, (g, w) in enumerate(zip(got, want)) if not same_answer(g, w)]
    if not wrong:
        return "the entries are right but grouped differently"
    where = ", ".join(str(k) for k in wrong)
    if len(wrong) == 1:
        return f"the entry at position {where} differs"
    return f"the entries at positions {where} differ"


def compare(
    prediction: Mapping[str, Any],
    outcome: Outcome,
    fields: Sequence[str] | None = None,
    *,
    mistakes: Sequence[Any] = (),
) -> tuple[FieldVerdict, ...]:
    """Verdicts for ``fields`` (default: the prediction's fields). Tensor fields come in
    :data:`FIELDS` order; the keys of a plain outcome in the order given.

    A field listed in ``fields`` but missing from ``prediction`` is "not answered yet".
    Raises :class:`PredictionError` for an unknown field name.
    """
    if outcome.plain is not None:
        given = dict(prediction)
        ordered = list(fields) if fields is not None else list(given)
    else:
        given = {field_name(k): v for k, v in prediction.items()}
        chosen = [field_name(f) for f in fields] if fields is not None else list(given)
        ordered = [f for f in FIELDS if f in chosen]
    return tuple(judge(f, given.get(f), outcome, given=given, mistakes=mistakes) for f in ordered)


__all__ = ["FieldVerdict", "VerdictStatus", "compare", "judge", "resolve_error_name"]
