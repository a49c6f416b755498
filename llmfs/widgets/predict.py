"""Predict-then-run without widgets: hold a prediction as plain data, run, compare field by field.

A chapter notebook uses two cells::

    prediction = predict("base.reshape([3, 2])", shape=[3, 2], strides=None, offsets=None)

    check(prediction)          # runs the expression, prints prediction / truth / verdict

``None`` means "not answered yet": the comparison says so for that field instead of failing, so a
student notebook executes top to bottom. Predictions may be Python data (``[3, 2]``, ``True``,
``"shared"``) or the strings a learner would type (``"(3,2)"``, ``"3, 2"``, ``"yes"``); both go
through :func:`normalize`. An entry that cannot be read gets a message in its row, never a
traceback.

:func:`compare` is the single place that decides verdicts; the text output here, the HTML output
and the :class:`~llmfs.widgets.live.PredictThenRun` widget all call it.

Fields (aliases in brackets): ``shape``, ``strides`` [stride], ``base_offset`` [base offset,
offset], ``offsets`` [logical offsets, logical_offsets], ``values``, ``contiguous`` [contiguity],
``owner`` (``shared`` or ``copy``), ``error`` (the ``TensorError`` class name, or ``none`` when the
request succeeds; chapter 2 asks learners to predict that a reshape fails).
"""

from __future__ import annotations

import ast
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llmfs.errors import CourseError
from llmfs.recording import record_attempt
from llmfs.tensor import Tensor, TensorError, TensorView
from llmfs.widgets.html import render_comparison_html
from llmfs.widgets.model import (
    FULL_LIMIT,
    ExpressionError,
    OwnerNames,
    TraceRow,
    _default_namespace,
    describe,
    evaluate,
    format_number,
    owners_in,
)
from llmfs.widgets.text import render_comparison

FIELDS: tuple[str, ...] = (
    "shape",
    "strides",
    "base_offset",
    "offsets",
    "values",
    "contiguous",
    "owner",
    "error",
)

LABELS: dict[str, str] = {
    "shape": "shape",
    "strides": "strides",
    "base_offset": "base offset",
    "offsets": "logical offsets",
    "values": "values",
    "contiguous": "contiguous",
    "owner": "owner",
    "error": "error",
}

#: What a learner may type, per field (shown as input hints by the widget).
HINTS: dict[str, str] = {
    "shape": "e.g. [3, 2]",
    "strides": "e.g. [2, 1]",
    "base_offset": "e.g. 0",
    "offsets": "e.g. [0, 1, 2, 3]",
    "values": "e.g. [[10, 11], [12, 20]]",
    "contiguous": "yes or no",
    "owner": "shared or copy",
    "error": "none, or e.g. NonContiguousReshapeError",
}

_ALIASES: dict[str, str] = {
    "stride": "strides",
    "base offset": "base_offset",
    "baseoffset": "base_offset",
    "offset": "base_offset",
    "logical offsets": "offsets",
    "logical_offsets": "offsets",
    "contiguity": "contiguous",
    "is_contiguous": "contiguous",
}

NOT_ANSWERED = "not answered yet"
RIGHT_MARK = "✓"
WRONG_MARK = "✗"

VerdictStatus = Literal["right", "wrong", "unanswered", "unreadable"]


class PredictionError(CourseError):
    """An exercise names a field that does not exist (an author's mistake, raised at once)."""


class UnreadableEntry(CourseError):
    """A learner's entry could not be read; the message says what was expected (the widgets
    show it as a verdict, so a learner never sees a traceback for a typo)."""


def field_name(name: str) -> str:
    """The canonical field for ``name`` or an alias. Raises :class:`PredictionError`."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in FIELDS:
        raise PredictionError(f"unknown prediction field {name!r}: choose from {', '.join(FIELDS)}")
    return key


# --------------------------------------------------------------------------------------------
# Reading entries
# --------------------------------------------------------------------------------------------

_YES = {"yes", "y", "true", "t", "1", "contiguous"}
_NO = {"no", "n", "false", "f", "0", "not contiguous", "non-contiguous", "noncontiguous"}
_SHARED = {"shared", "share", "view", "same", "borrowed", "base"}
_COPY = {"copy", "copied", "new", "new owner", "owner", "materialized", "own"}
_NO_ERROR = {"none", "no error", "ok", "no", "succeeds", "success", "-"}


def _literal(text: str) -> Any:
    cleaned = text.strip()
    try:
        return ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    # "3 2" or "3; 2": separators learners use instead of commas.
    spaced = re.sub(r"[\s;]+", ",", cleaned.strip("[]() "))
    try:
        return ast.literal_eval("[" + spaced + "]") if spaced else []
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UnreadableEntry(f"could not read {text.strip()!r} as numbers") from None


def _int_list(value: Any, what: str, *, flatten: bool = False) -> tuple[int, ...]:
    if isinstance(value, str):
        value = _literal(value)
    if isinstance(value, bool):
        raise UnreadableEntry(f"{what} are whole numbers, not {value}")
    if isinstance(value, (int, float)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise UnreadableEntry(f"{what} should be a list of whole numbers like [3, 2]")
    items: list[Any] = []
    for item in value:
        if isinstance(item, (list, tuple)):
            if not flatten:
                raise UnreadableEntry(f"{what} should be one flat list like [3, 2]")
            items.extend(_int_list(item, what, flatten=True))
            continue
        if isinstance(item, bool) or not isinstance(item, (int, float)) or item != int(item):
            raise UnreadableEntry(f"{what} should be whole numbers; {item!r} is not one")
        items.append(int(item))
    return tuple(items)


def _int(value: Any, what: str) -> int:
    if isinstance(value, str):
        value = _literal(value)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise UnreadableEntry(f"{what} should be one whole number like 0")
    return int(value)


def _numbers(value: Any) -> Any:
    if isinstance(value, str):
        value = _literal(value)
    if isinstance(value, (list, tuple)):
        return [_numbers(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnreadableEntry(f"values should be numbers; {value!r} is not one")
    return float(value)


def _word(value: Any, yes: set[str], no: set[str], expected: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in yes:
        return True
    if text in no:
        return False
    raise UnreadableEntry(f"expected {expected}, got {str(value).strip()!r}")


def _error_name(value: Any) -> str:
    if isinstance(value, type) and issubclass(value, BaseException):
        return value.__name__
    if isinstance(value, BaseException):
        return type(value).__name__
    text = str(value).strip()
    if text.lower() in _NO_ERROR:
        return "none"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", text):
        raise UnreadableEntry(f"expected an error class name or 'none', got {text!r}")
    return text.rsplit(".", 1)[-1]


def normalize(field: str, value: Any) -> Any:
    """A prediction for ``field`` in canonical form, or ``None`` when not answered.

    ``None`` and blank strings are "not answered". Sequences become tuples of ints (shape,
    strides, offsets; offsets may be nested), values become nested lists of floats, contiguous a
    bool, owner ``"shared"``/``"copy"``, error a class name or ``"none"``. Raises
    :class:`UnreadableEntry` with a message for an entry that cannot be read, and
    :class:`PredictionError` for an unknown field.
    """
    field = field_name(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if field in ("shape", "strides"):
        return _int_list(value, field)
    if field == "offsets":
        return _int_list(value, "offsets", flatten=True)
    if field == "base_offset":
        return _int(value, "the base offset")
    if field == "values":
        return _numbers(value)
    if field == "contiguous":
        return _word(value, _YES, _NO, "yes or no")
    if field == "owner":
        return "shared" if _word(value, _SHARED, _COPY, "shared or copy") else "copy"
    return _error_name(value)


# --------------------------------------------------------------------------------------------
# The outcome of running an expression
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What an expression gave: its trace ``row``, and the view (``None`` when rejected)."""

    label: str
    row: TraceRow
    view: TensorView | None
    exception: TensorError | None

    def truth(self, field: str) -> Any:
        """The true value of ``field``, in :func:`normalize`'s canonical form (``None`` when the
        field does not apply, e.g. the shape of a rejected request)."""
        field = field_name(field)
        row = self.row
        if field == "error":
            return row.error if row.rejected else "none"
        if row.rejected or self.view is None:
            return None
        if field == "shape":
            return row.shape
        if field == "strides":
            return row.strides
        if field == "base_offset":
            return row.base_offset
        if field == "offsets":
            return tuple(self.view.logical_offsets())
        if field == "values":
            return self.view.tolist()
        if field == "contiguous":
            return row.contiguous
        return "copy" if row.new_owner else "shared"


def run(
    expression: str | Callable[[], Any],
    namespace: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
) -> Outcome:
    """Evaluates ``expression`` (a string, optionally ``name = ...``, or a no-argument callable)
    and describes the result; a ``TensorError`` is an outcome, not a failure.

    Owners reachable from ``namespace`` (for a callable: its globals and closure) exist before the
    run and read as ``shared``; an owner the expression creates reads as ``copy``. Raises
    :class:`~llmfs.widgets.model.ExpressionError` for a Python error in the expression.
    """
    if callable(expression):
        scope = dict(getattr(expression, "__globals__", {}))
        for name, cell in zip(
            getattr(getattr(expression, "__code__", None), "co_freevars", ()),
            getattr(expression, "__closure__", None) or (),
        ):
            scope[name] = cell.cell_contents
        scope.update(namespace or {})
        owners = OwnerNames(owners_in(scope))
        text = label or getattr(expression, "__name__", "expression")
        copied_from = None
        try:
            result: Any = expression()
        except TensorError as error:
            result = error
        except Exception as error:
            raise ExpressionError(f"{text} failed with {type(error).__name__}: {error}") from None
        if not isinstance(result, (Tensor, TensorView, TensorError)):
            raise ExpressionError(f"{text} gave a {type(result).__name__}, not a tensor")
    else:
        scope = _default_namespace()
        scope.update(namespace or {})
        owners = OwnerNames(owners_in(namespace or {}))
        text = label or expression.strip()
        _, result, copied_from = evaluate(expression, scope)
    row = describe(text, result, owners, copied_from)
    if isinstance(result, TensorError):
        return Outcome(text, row, None, result)
    view = result.view() if isinstance(result, Tensor) else result
    return Outcome(text, row, view, None)


# --------------------------------------------------------------------------------------------
# Verdicts: the one comparison
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """One field's comparison. ``status`` is ``right``, ``wrong``, ``unanswered`` or
    ``unreadable`` (with ``note`` saying why); ``predicted`` and ``truth`` are display strings."""

    field: str
    predicted: str
    truth: str
    status: VerdictStatus
    note: str = ""

    @property
    def label(self) -> str:
        """The field's name for people (``base offset``, ``logical offsets``...)."""
        return LABELS[self.field]

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


def display(field: str, value: Any) -> str:
    """A canonical value as text (``—`` for none)."""
    if value is None:
        return "—"
    if field in ("shape", "strides", "offsets"):
        return _display_list([str(v) for v in value])
    if field == "values":
        if isinstance(value, list) and len(_flat(value)) > FULL_LIMIT:
            return _display_list([format_number(v) for v in _flat(value)]) + " (flattened)"
        return _display_numbers(value)
    if field == "contiguous":
        return "Yes" if value else "No"
    return str(value)


def _display_list(items: list[str]) -> str:
    # Long lists keep their first and last entries so a table row stays readable.
    if len(items) > FULL_LIMIT:
        items = [*items[:8], f"… {len(items) - 12} more …", *items[-4:]]
    return "[" + ", ".join(items) + "]"


def _display_numbers(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_display_numbers(v) for v in value) + "]"
    return format_number(value)


def _flat(value: Any) -> list[float]:
    if isinstance(value, list):
        return [x for item in value for x in _flat(item)]
    return [value]


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, list) != isinstance(b, list):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if math.isnan(a) and math.isnan(b):
        return True
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _error_matches(predicted: str, exception: TensorError | None) -> bool:
    if exception is None:
        return predicted == "none"
    wanted = predicted.lower().removesuffix("error")
    names = [
        cls.__name__.lower().removesuffix("error")
        for cls in type(exception).__mro__
        if issubclass(cls, TensorError) and cls.__name__ not in ("TensorError", "TensorViewError")
    ]
    return wanted in names


def judge(field: str, predicted: Any, outcome: Outcome) -> Verdict:
    """The verdict for one field: reads the entry with :func:`normalize`, compares it with
    :meth:`Outcome.truth`. Never raises for a learner's entry (only for an unknown field)."""
    field = field_name(field)
    truth = outcome.truth(field)
    truth_text = display(field, truth) if truth is not None else "— (rejected)"
    try:
        value = normalize(field, predicted)
    except UnreadableEntry as error:
        return Verdict(field, str(predicted).strip(), truth_text, "unreadable", str(error))
    if value is None:
        return Verdict(field, "—", truth_text, "unanswered")
    shown = display(field, value)
    note = ""
    if field == "error":
        right = _error_matches(value, outcome.exception)
    elif truth is None:
        right = False
        note = "the request was rejected"
    elif field == "values":
        right = _close(value, truth)
        if not right and not isinstance(truth, list) and isinstance(value, list):
            right = len(value) == 1 and _close(value[0], truth)
        if not right and isinstance(value, list) and isinstance(truth, list):
            flat_truth = _flat(truth)
            if value == _flat(value) and _close(value, flat_truth) and len(flat_truth) > 1:
                right = True
                note = "flattened"
    else:
        right = value == truth
    if right:
        return Verdict(field, shown, truth_text, "right", note)
    return Verdict(field, shown, truth_text, "wrong", note)


def compare(
    prediction: Mapping[str, Any], outcome: Outcome, fields: Sequence[str] | None = None
) -> tuple[Verdict, ...]:
    """Verdicts for ``fields`` (default: the prediction's fields, in :data:`FIELDS` order).

    A field listed in ``fields`` but missing from ``prediction`` is "not answered yet".
    Raises :class:`PredictionError` for an unknown field name.
    """
    given = {field_name(k): v for k, v in prediction.items()}
    chosen = [field_name(f) for f in fields] if fields is not None else list(given)
    ordered = [f for f in FIELDS if f in chosen]
    return tuple(judge(f, given.get(f), outcome) for f in ordered)


# --------------------------------------------------------------------------------------------
# The text API: predict(...) then check(...)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prediction:
    """A learner's prediction for one expression: plain data, ``None`` = not answered yet."""

    expression: str | Callable[[], Any]
    fields: Mapping[str, Any]
    exercise_id: str | None = None
    label: str | None = None

    def __repr__(self) -> str:
        answered = ", ".join(
            f"{LABELS[k]} {v!r}" if v is not None else f"{LABELS[k]} (not answered yet)"
            for k, v in self.fields.items()
        )
        return f"prediction for {self.label or _label(self.expression)}: {answered}"


def _label(expression: str | Callable[[], Any]) -> str:
    return (
        expression.strip()
        if isinstance(expression, str)
        else getattr(expression, "__name__", "expression")
    )


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
    module docstring); ``None`` means not answered yet. ``exercise_id`` makes :func:`check`
    record the attempt; ``label`` names a callable in the output. Raises
    :class:`PredictionError` for an unknown field.
    """
    canonical = {field_name(k): v for k, v in fields.items()}
    return Prediction(expression, canonical, exercise_id, label)


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`check`: the outcome and one verdict per field.

    ``repr`` is the fixed-width text (prediction, truth, verdict per field, then the offset
    table); in a notebook it renders as HTML with the same content.
    """

    outcome: Outcome
    verdicts: tuple[Verdict, ...]
    recorded: bool = False

    @property
    def score(self) -> dict[str, bool]:
        """Field -> right, for the answered fields (what an attempt records)."""
        return {v.field: v.status == "right" for v in self.verdicts if v.answered}

    @property
    def all_right(self) -> bool:
        """True when every field was answered and right."""
        return bool(self.verdicts) and all(v.status == "right" for v in self.verdicts)

    def __repr__(self) -> str:
        return render_comparison(self)

    def _repr_html_(self) -> str:
        return render_comparison_html(self)


def record(
    exercise_id: str | None,
    verdicts: Sequence[Verdict],
    *,
    answers: Mapping[str, str] | None = None,
    path: Any = None,
    manifest: Any = None,
) -> bool:
    """Records an attempt (exercise id, each answered field right or wrong, the entries as text)
    in the course's attempts log (through :func:`llmfs.recording.record_attempt`, which the
    course installs; ``path`` and ``manifest`` are passed on). ``answers`` are the entries as
    typed (default: the predictions as displayed); unanswered and unreadable fields are not
    recorded. Returns False when there is
    no exercise id or no answered field. Raises :class:`~llmfs.course.CourseError` for an
    exercise id not in the manifest."""
    fields = {v.field: v.status == "right" for v in verdicts if v.answered}
    if not exercise_id or not fields:
        return False
    typed = {field_name(k): str(v) for k, v in (answers or {}).items()}
    entered = {f: typed.get(f, v.predicted) for f, v in ((v.field, v) for v in verdicts)}
    entered = {f: entered[f] for f in fields}
    record_attempt(exercise_id, fields, answers=entered, path=path, manifest=manifest)
    return True


def check(
    prediction: Prediction,
    namespace: Mapping[str, Any] | None = None,
    *,
    fields: Sequence[str] | None = None,
) -> Comparison:
    """Runs the prediction's expression and compares it with the prediction, field by field.

    Names in a string expression come from ``namespace``, or, when it is omitted, from the
    calling module's globals (a notebook's variables). ``fields`` adds fields that count as
    "not answered yet" when the prediction lacks them. Returns a :class:`Comparison` (its
    ``repr`` prints the table) and records the attempt when the prediction has an exercise id.
    Raises :class:`~llmfs.widgets.model.ExpressionError` for a Python error in the expression.
    """
    if not isinstance(prediction, Prediction):
        raise PredictionError(
            f"check() takes what predict(...) returned, got {type(prediction).__name__}"
        )
    if namespace is None and isinstance(prediction.expression, str):
        namespace = sys._getframe(1).f_globals
    outcome = run(prediction.expression, namespace, label=prediction.label)
    extra = [f for f in fields or () if field_name(f) not in prediction.fields]
    chosen = list(prediction.fields) + extra
    verdicts = compare(prediction.fields, outcome, chosen)
    recorded = record(prediction.exercise_id, verdicts)
    return Comparison(outcome, verdicts, recorded)


__all__ = [
    "FIELDS",
    "HINTS",
    "LABELS",
    "NOT_ANSWERED",
    "Comparison",
    "Outcome",
    "Prediction",
    "PredictionError",
    "UnreadableEntry",
    "Verdict",
    "check",
    "compare",
    "display",
    "field_name",
    "judge",
    "normalize",
    "predict",
    "record",
    "run",
]
