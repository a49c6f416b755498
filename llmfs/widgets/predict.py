"""Predict-then-run without widgets: hold a prediction as plain data, run, compare field by field.

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
request (``check(q1, reveal=True)``, the widget's "Show answer" button). ``hint("ch02.q1")`` shows
the exercise's hints one at a time. Attempts, hints and reveals go to the attempts log
(:mod:`llmfs.course.attempts`), and the text form and the
:class:`~llmfs.widgets.live.PredictThenRun` widget share one :class:`ExerciseState` per exercise.

Predictions may be Python data (``[3, 2]``, ``True``,
``"shared"``) or the strings a learner would type (``"(3,2)"``, ``"3, 2"``, ``"yes"``); both go
through :func:`normalize`. An entry that cannot be read gets a message in its row, never a
traceback.

:func:`compare` is the single place that decides verdicts; the text output here, the HTML output
and the :class:`~llmfs.widgets.live.PredictThenRun` widget all call it.

Fields (aliases in brackets): ``shape``, ``strides`` [stride], ``base_offset`` [base offset,
offset], ``offsets`` [logical offsets, logical_offsets], ``values``, ``contiguous`` [contiguity],
``owner`` (``shared`` or ``new``: a new owner), ``error`` (the ``TensorError`` class name, or
``none`` when the request succeeds; chapter 2 asks learners to predict that a reshape fails).
"""

from __future__ import annotations

import ast
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llmfs.course import CourseError
from llmfs.course.attempts import (
    attempts_path,
    load_attempts,
    load_events,
    record_attempt,
    record_event,
)
from llmfs.course.manifest import load_manifest
from llmfs.tensor import Tensor, TensorError, TensorView, layout
from llmfs.widgets.html import mark, render_mapping_html, render_offsets_html, wrap
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
from llmfs.widgets.text import REJECTED_MARK, render_mapping, render_offsets, table, tally

#: Wrong tries at a field after which its answer is shown (``check(..., max_tries=N)`` changes it).
MAX_WRONG_TRIES = 3

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
    "owner": "shared or new",
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
_NEW = {"new", "new owner", "copy", "copied", "a copy", "materialized", "allocated", "fresh"}
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
    bool, owner ``"shared"``/``"new"``, error a class name or ``"none"``. Raises
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
        return "shared" if _word(value, _SHARED, _NEW, "shared or new") else "new"
    return _error_name(value)


# --------------------------------------------------------------------------------------------
# The outcome of running an expression
# --------------------------------------------------------------------------------------------


# eq=False (here and on Outcome): they hold tensors, whose == is elementwise (and which are
# unhashable), so two of them are the same only when they are one object.
@dataclass(frozen=True, eq=False)
class Call:
    """What a string expression asked for, read from its syntax: the method (``slice``,
    ``transpose``, ``getitem`` for ``x[i]``...), its literal arguments (``None`` where an argument
    is not a literal) and the receiver's view (``None`` when it is not a tensor)."""

    method: str
    args: tuple[Any, ...]
    source: TensorView | None


@dataclass(frozen=True, eq=False)
class Outcome:
    """What an expression gave: its trace ``row`` and the view (``None`` when rejected), or, for
    an expression that gives a dict of plain values, ``plain`` (and ``row`` is ``None``)."""

    label: str
    row: TraceRow | None
    view: TensorView | None
    exception: TensorError | None
    plain: Mapping[str, Any] | None = None
    call: Call | None = None

    def truth(self, field: str) -> Any:
        """The true value of ``field``, in :func:`normalize`'s canonical form (``None`` when the
        field does not apply, e.g. the shape of a rejected request)."""
        if self.plain is not None:
            if field not in self.plain:
                raise PredictionError(
                    f"{self.label} gives the keys {sorted(self.plain)}, not {field!r}"
                )
            return _plain(self.plain[field])
        field = field_name(field)
        row = self.row
        assert row is not None
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
        return "new" if row.new_owner else "shared"


def run(
    expression: str | Callable[[], Any],
    namespace: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    plain: bool = False,
) -> Outcome:
    """Evaluates ``expression`` (a string, optionally ``name = ...``, or a no-argument callable)
    and describes the result; a ``TensorError`` is an outcome, not a failure. With ``plain``, the
    string expression must give a dict of plain values (an exercise whose fields are its keys).

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
        text = str(label or getattr(expression, "__name__", "expression"))
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
        text = label or expression.strip()
        if plain:
            return Outcome(text, None, None, None, plain=_evaluate_plain(expression, scope))
        owners = OwnerNames(owners_in(namespace or {}))
        call = _read_call(expression, scope)
        _, result, copied_from = evaluate(expression, scope)
        row = describe(text, result, owners, copied_from)
        if isinstance(result, TensorError):
            return Outcome(text, row, None, result, call=call)
        view = result.view() if isinstance(result, Tensor) else result
        return Outcome(text, row, view, None, call=call)
    row = describe(text, result, owners, copied_from)
    if isinstance(result, TensorError):
        return Outcome(text, row, None, result)
    view = result.view() if isinstance(result, Tensor) else result
    return Outcome(text, row, view, None)


def _evaluate_plain(expression: str, scope: dict[str, Any]) -> dict[str, Any]:
    try:
        result = eval(compile(expression.strip(), "<expression>", "eval"), scope)
    except Exception as error:
        raise ExpressionError(
            f"{expression!r} failed with {type(error).__name__}: {error}"
        ) from None
    if not isinstance(result, Mapping):
        raise ExpressionError(f"{expression!r} gave a {type(result).__name__}, not a dict")
    return {str(k): v for k, v in result.items()}


def _read_call(expression: str, scope: Mapping[str, Any]) -> Call | None:
    """The method and literal arguments of ``receiver.method(...)`` or ``receiver[i, ...]``;
    the receiver is evaluated (a name or an attribute chain without calls only, so nothing
    runs twice)."""
    try:
        node = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError:
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, receiver, raw = node.func.attr, node.func.value, list(node.args)
    elif isinstance(node, ast.Subscript):
        method, receiver = "getitem", node.value
        index = node.slice
        raw = list(index.elts) if isinstance(index, ast.Tuple) else [index]
    else:
        return None
    args = []
    for arg in raw:
        try:
            args.append(ast.literal_eval(arg))
        except (ValueError, SyntaxError, TypeError):
            args.append(None)
    source = None
    if _is_plain_reference(receiver):
        try:
            found = eval(compile(ast.Expression(receiver), "<receiver>", "eval"), dict(scope))
        except Exception:
            found = None
        if isinstance(found, Tensor):
            source = found.view()
        elif isinstance(found, TensorView):
            source = found
    return Call(method, tuple(args), source)


def _is_plain_reference(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _is_plain_reference(node.value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        # ``t.view()`` makes a view without side effects.
        return node.func.attr == "view" and not node.args and _is_plain_reference(node.func.value)
    return False


# --------------------------------------------------------------------------------------------
# Plain answers (an exercise whose expression gives a dict of numbers and booleans)
# --------------------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A plain answer in canonical form: bools stay bools, whole floats become ints, strings
    are read as Python literals or yes/no words (a bare name such as an error class stays a
    string), sequences become lists."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _YES - {"1"}:
            return True
        if text.lower() in _NO - {"0"}:
            return False
        try:
            return _plain(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            # A bare name (an error class such as KernelMemoryError) is an answer as it is.
            if text.isidentifier():
                return text
            raise UnreadableEntry(f"could not read {text!r} as a number or yes/no") from None
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value == int(value):
        return int(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float)):
        return value
    return value.item() if hasattr(value, "item") else value


def _same_plain(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) or isinstance(b, list):
        return (
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == len(b)
            and all(_same_plain(x, y) for x, y in zip(a, b))
        )
    return bool(a == b)


# --------------------------------------------------------------------------------------------
# Verdicts: the one comparison
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
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
    if field in FIELDS:
        return str(value)
    if isinstance(value, bool):
        return "True" if value else "False"
    return repr(value)


def _display_list(items: list[str]) -> str:
    # Long lists keep their first and last entries so a table row stays readable.
    if len(items) > FULL_LIMIT:
        items = [*items[:8], f"… {len(items) - 12} more …", *items[-4:]]
    return "[" + ", ".join(items) + "]"


def _display_numbers(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_display_numbers(v) for v in value) + "]"
    return format_number(value)


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
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


def _error_classes() -> dict[str, type[TensorError]]:
    found: dict[str, type[TensorError]] = {}
    pending: list[type[TensorError]] = [TensorError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def resolve_error_name(text: str) -> str | None:
    """The full ``TensorError`` class name that ``text`` names, in any case and possibly by a
    unique prefix (``noncontiguous`` -> ``NonContiguousReshapeError``); ``None`` when it names
    none or several."""
    names = _error_classes()
    wanted = text.lower()
    exact = [name for name in names if name.lower() in (wanted, wanted + "error")]
    if exact:
        return exact[0]
    prefixed = [name for name in names if name.lower().startswith(wanted)]
    return prefixed[0] if len(prefixed) == 1 else None


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
) -> Verdict:
    """The verdict for one field: reads the entry with :func:`normalize`, compares it with
    :meth:`Outcome.truth`; a wrong entry gets the positions that differ and the messages of the
    misconceptions it matches (``given`` holds the other predicted fields, for the checks across
    fields; ``mistakes`` are the exercise's own :class:`~llmfs.course.manifest.Mistake`\\ s).
    Never raises for a learner's entry (only for an unknown field)."""
    plain = outcome.plain is not None
    if not plain:
        field = field_name(field)
    truth = outcome.truth(field)
    if plain:
        truth_text = display(field, truth)
    else:
        truth_text = display(field, truth) if truth is not None else "— (rejected)"
    try:
        value = _plain(predicted) if plain else normalize(field, predicted)
    except UnreadableEntry as error:
        return Verdict(field, str(predicted).strip(), truth_text, "unreadable", str(error))
    if value is None:
        return Verdict(field, "—", truth_text, "unanswered")
    shown = display(field, value)
    note = ""
    if plain:
        right = _same_plain(value, truth)
    elif field == "error":
        full = value if value == "none" else (resolve_error_name(value) or value)
        right = _error_matches(full, outcome.exception)
        if right and full != value:
            note = f"full name: {full}"
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
        return Verdict(field, shown, truth_text, "right", note, value=value)
    context = _Context(outcome, {k: v for k, v in (given or {}).items() if k != field})
    found = [m.message for m in mistakes if m.field == field and _is_answer(field, m, value, plain)]
    found += diagnose(field, value, truth, context)
    return Verdict(
        field,
        shown,
        truth_text,
        "wrong",
        note,
        differs=_differs(field, value, truth),
        mistakes=tuple(dict.fromkeys(found)),
        value=value,
    )


def _is_answer(field: str, mistake: Any, value: Any, plain: bool) -> bool:
    try:
        expected = _plain(mistake.answer) if plain else normalize(field, mistake.answer)
    except UnreadableEntry:
        return False
    return bool(expected == value)


def _differs(field: str, value: Any, truth: Any) -> str:
    """Which entries of a wrong list answer differ: positions only, never the true values."""
    if field not in ("shape", "strides", "offsets", "values") or truth is None:
        return ""
    got = _flat(value) if isinstance(value, (list, tuple)) else [value]
    want = _flat(truth) if isinstance(truth, (list, tuple)) else [truth]
    if len(got) != len(want):
        return f"you gave {len(got)} entries; the answer has {len(want)}"
    wrong = [k for k, (g, w) in enumerate(zip(got, want)) if not _close_entry(g, w)]
    if not wrong:
        return "the entries are right but grouped differently"
    where = ", ".join(str(k) for k in wrong)
    if len(wrong) == 1:
        return f"the entry at position {where} differs"
    return f"the entries at positions {where} differ"


def _close_entry(a: Any, b: Any) -> bool:
    try:
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-12)
    except (TypeError, ValueError):
        return bool(a == b)


def compare(
    prediction: Mapping[str, Any],
    outcome: Outcome,
    fields: Sequence[str] | None = None,
    *,
    mistakes: Sequence[Any] = (),
) -> tuple[Verdict, ...]:
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


# --------------------------------------------------------------------------------------------
# Misconceptions: named mistakes, recognised from the wrong answer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Context:
    outcome: Outcome
    others: Mapping[str, Any]


@dataclass(frozen=True)
class Misconception:
    """A named mistake: ``field`` is the kind of field it applies to, ``detect`` returns the
    one-sentence explanation when a wrong answer shows it (else ``None``)."""

    name: str
    field: str
    detect: Callable[[Any, Any, _Context], str | None]


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:

    return tuple(layout.row_major_strides(tuple(shape)))


def _method(context: _Context) -> str:
    call = context.outcome.call
    return call.method if call is not None else ""


def _permute_row_major(value: Any, truth: Any, context: _Context) -> str | None:
    view = context.outcome.view
    if _method(context) not in ("transpose", "permute") or view is None:
        return None
    if value == _row_major(view.shape) != truth:
        return (
            f"{_display_list([str(v) for v in value])} are the row-major strides of shape "
            f"{_display_list([str(v) for v in view.shape])}, what a reshape would give: a "
            "transpose or permute keeps each axis's own stride and only moves it with its axis."
        )
    return None


def _transpose_reshape_offsets(value: Any, truth: Any, context: _Context) -> str | None:
    call = context.outcome.call
    if _method(context) not in ("transpose", "permute") or call is None or call.source is None:
        return None
    walked = tuple(call.source.logical_offsets())
    if value == walked != truth:
        return (
            "Those are the offsets in the source's own order, what a reshape would walk: a "
            "transpose walks its new rows, so row 0 of the result is column 0 of the source."
        )
    return None


def _slice_start_only(value: Any, truth: Any, context: _Context) -> str | None:
    call = context.outcome.call
    if call is None or call.source is None or truth is None:
        return None
    if call.method == "slice" and len(call.args) >= 2:
        axis, start = call.args[0], call.args[1]
    elif call.method == "getitem" and call.args and isinstance(call.args[0], int):
        axis, start = 0, call.args[0]
    else:
        return None
    if not isinstance(axis, int) or not isinstance(start, int):
        return None
    source = call.source
    axis = axis % max(len(source.shape), 1)
    stride = source.strides[axis] if axis < len(source.strides) else 1
    if value in (start, source.base_offset + start) and value != truth and stride != 1:
        return (
            f"The base offset moves by start × stride = {start} × {stride}, not by the start "
            "index alone: each step along that axis skips a whole stride of storage."
        )
    return None


def _slice_contiguous_strides(value: Any, truth: Any, context: _Context) -> str | None:
    view = context.outcome.view
    if _method(context) not in ("slice", "getitem") or view is None:
        return None
    if value == _row_major(view.shape) != truth:
        return (
            "Those are the row-major strides of the slice's shape, as if the slice were a "
            "contiguous block of its own: a slice keeps its source's strides."
        )
    return None


def _slice_contiguous_offsets(value: Any, truth: Any, context: _Context) -> str | None:
    view = context.outcome.view
    if _method(context) not in ("slice", "getitem") or view is None or not value:
        return None
    run_from = (view.base_offset, value[0])
    if any(tuple(range(s, s + len(value))) == value for s in run_from) and value != truth:
        return (
            "Those offsets form one gap-free run, as if the slice were contiguous: a slice "
            "skips the storage values it leaves out, so its walk jumps between rows."
        )
    return None


def _slice_contiguous_flag(value: Any, truth: Any, context: _Context) -> str | None:
    if _method(context) in ("slice", "getitem") and value is True and truth is False:
        return (
            "A slice that keeps only part of an inner axis leaves gaps between its rows: the "
            "walk is not one gap-free run, so it is not contiguous."
        )
    return None


def _step_floor(value: Any, truth: Any, context: _Context) -> str | None:
    call = context.outcome.call
    if call is None or call.method != "slice" or len(call.args) < 4 or truth is None:
        return None
    axis, start, stop, step = call.args[:4]
    if not all(isinstance(v, int) for v in (axis, start, stop, step)) or step <= 1:
        return None
    axis = axis % len(truth) if truth else 0
    floor = (stop - start) // step
    if (
        len(value) == len(truth)
        and value[axis] == floor
        and truth[axis] != floor
        and all(v == t for k, (v, t) in enumerate(zip(value, truth)) if k != axis)
    ):
        return (
            f"({stop} - {start}) / {step} rounded down counts only the whole steps: the size is "
            f"ceil(({stop} - {start}) / {step}), because index {start} itself is kept too."
        )
    return None


def _shape_for_strides(value: Any, truth: Any, context: _Context) -> str | None:
    view = context.outcome.view
    if view is not None and value == tuple(view.shape) != truth:
        return (
            "That is the shape: the strides say how many storage values one step along each "
            "axis skips."
        )
    return None


def _count_mismatch(value: Any, truth: Any, context: _Context) -> str | None:

    count = len(_flat(value))
    shape = context.others.get("shape")
    try:
        shape = normalize("shape", shape)
    except UnreadableEntry:
        shape = None
    source = "you predicted"
    if shape is None:
        view = context.outcome.view
        if view is None:
            return None
        shape, source = tuple(view.shape), "the result has"
    expected = layout.element_count(shape)
    if count != expected:
        return (
            f"{count} entr{'y' if count == 1 else 'ies'} for {source} shape "
            f"{_display_list([str(v) for v in shape])}, which holds {expected} value"
            f"{'' if expected == 1 else 's'}: one offset and one value per coordinate."
        )
    return None


def _offsets_for_values(value: Any, truth: Any, context: _Context) -> str | None:
    view = context.outcome.view
    if view is None:
        return None
    offsets = [float(v) for v in view.logical_offsets()]
    if [float(v) for v in _flat(value)] == offsets and _flat(truth) != offsets:
        return (
            "Those are the storage offsets, not the values stored there: look each offset up "
            "in the storage."
        )
    return None


#: The catalogue: every named misconception, per kind of field (each has a test).
MISCONCEPTIONS: tuple[Misconception, ...] = (
    Misconception("row-major strides for a transpose or permute", "strides", _permute_row_major),
    Misconception("reshape offsets for a transpose", "offsets", _transpose_reshape_offsets),
    Misconception("base offset without start*stride", "base_offset", _slice_start_only),
    Misconception("slice treated as contiguous (strides)", "strides", _slice_contiguous_strides),
    Misconception("slice treated as contiguous (offsets)", "offsets", _slice_contiguous_offsets),
    Misconception("slice treated as contiguous", "contiguous", _slice_contiguous_flag),
    Misconception("floor instead of ceil for a step", "shape", _step_floor),
    Misconception("shape given for strides", "strides", _shape_for_strides),
    Misconception("count mismatch across fields", "offsets", _count_mismatch),
    Misconception("count mismatch across fields", "values", _count_mismatch),
    Misconception("offsets given for values", "values", _offsets_for_values),
)


def diagnose(field: str, value: Any, truth: Any, context: _Context) -> list[str]:
    """The messages of every catalogued misconception that a wrong ``value`` shows."""
    messages = []
    for misconception in MISCONCEPTIONS:
        if misconception.field != field:
            continue
        message = misconception.detect(value, truth, context)
        if message:
            messages.append(message)
    return messages


# --------------------------------------------------------------------------------------------
# Exercise state: shared by check(...) and the widget, rebuilt from the attempts log
# --------------------------------------------------------------------------------------------


@dataclass
class ExerciseState:
    """What the learner has done on one exercise: wrong tries per field, the fields revealed,
    the hints seen, the attempts made and the latest answers. Built from the attempts log when
    first asked for (so a restarted kernel keeps it), then kept up to date by :func:`check`, the
    widget and :func:`hint`, which notify each other through ``listeners``."""

    exercise_id: str
    wrong_tries: dict[str, int]
    revealed: set[str]
    hints_seen: int
    attempts: int
    answers: dict[str, Any]
    last: Comparison | None = None
    listeners: list[Callable[[ExerciseState], None]] | None = None

    def tries_left(self, field: str, max_tries: int) -> int:
        """Wrong tries left at ``field`` before its answer is shown."""
        return max(max_tries - self.wrong_tries.get(field, 0), 0)

    def notify(self) -> None:
        for listener in list(self.listeners or ()):
            listener(self)


_STATES: dict[tuple[str, str], ExerciseState] = {}


def exercise_state(exercise_id: str, path: Path | None = None) -> ExerciseState:
    """The state of ``exercise_id`` for the attempts log at ``path`` (default: the current log).
    Raises :class:`~llmfs.course.CourseError` for a malformed log."""
    log = Path(path) if path is not None else attempts_path()
    key = (str(log.resolve()), exercise_id)
    if key not in _STATES:
        state = ExerciseState(exercise_id, {}, set(), 0, 0, {}, None, [])
        for attempt in load_attempts(log):
            if attempt.exercise == exercise_id:
                state.attempts += 1
                for name, right in attempt.fields.items():
                    if not right:
                        state.wrong_tries[name] = state.wrong_tries.get(name, 0) + 1
                state.revealed.update(attempt.revealed)
        for event in load_events(log):
            if event.exercise == exercise_id:
                if event.kind == "hint":
                    state.hints_seen = max(state.hints_seen, event.number)
                else:
                    state.revealed.update(event.fields)
        _STATES[key] = state
    return _STATES[key]


# --------------------------------------------------------------------------------------------
# The text API: predict(...) then check(...)
# --------------------------------------------------------------------------------------------


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


def predict_exercise(exercise_id: str, manifest: Any = None) -> Any:
    """The manifest's predict exercise ``exercise_id``. Raises :class:`CourseError` when it is
    not a predict exercise or has no expression."""
    course = manifest if manifest is not None else load_manifest()
    exercise = course.exercise(exercise_id)
    if exercise.kind != "predict" or not exercise.expression:
        raise CourseError(
            f"{exercise_id} is a {exercise.kind} exercise without an expression to predict"
        )
    return exercise


def is_plain(fields: Sequence[str]) -> bool:
    """True when ``fields`` are keys of a dict result rather than tensor fields."""
    return any(
        f.strip().lower() not in FIELDS and f.strip().lower() not in _ALIASES for f in fields
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
    and the missing fields are shown, nothing of the truth. ``repr`` is the fixed-width text; in
    a notebook it renders as HTML with the same content.
    """

    outcome: Outcome
    verdicts: tuple[Verdict, ...]
    recorded: bool = False
    complete: bool = True
    exercise_id: str | None = None
    tries_left: Mapping[str, int] | None = None

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

    def __repr__(self) -> str:
        return render_comparison_text(self)

    def _repr_html_(self) -> str:
        return render_comparison_html(self)


def record(
    exercise_id: str | None,
    verdicts: Sequence[Verdict],
    *,
    answers: Mapping[str, str] | None = None,
    path: Any = None,
    manifest: Any = None,
    hints: int = 0,
    revealed: Sequence[str] = (),
) -> bool:
    """Records an attempt (exercise id, each answered field right or wrong, the entries as text,
    the hints seen and the fields revealed before it) in the course's attempts log
    (:func:`llmfs.course.attempts.record_attempt`; ``path`` and ``manifest`` are passed on).
    Returns False when there is no exercise id or no answered field. Raises
    :class:`~llmfs.course.CourseError` for an exercise id not in the manifest."""
    fields = {v.field: v.status == "right" for v in verdicts if v.answered}
    if not exercise_id or not fields:
        return False
    typed = {k: str(v) for k, v in (answers or {}).items()}
    entered = {f: typed.get(f, v.predicted) for f, v in ((v.field, v) for v in verdicts)}
    entered = {f: entered[f] for f in fields}
    record_attempt(
        exercise_id,
        fields,
        answers=entered,
        path=path,
        manifest=manifest,
        hints=hints,
        revealed=revealed,
    )
    return True


def attempt(
    exercise_id: str | None,
    answers: Mapping[str, Any],
    outcome: Outcome,
    fields: Sequence[str],
    *,
    reveal: bool = False,
    max_tries: int | None = None,
    typed: Mapping[str, str] | None = None,
    mistakes: Sequence[Any] = (),
) -> Comparison:
    """The one exercise step behind :func:`check` and the widget's Run: judge ``answers``
    against ``outcome``; when every field is answered, record the attempt and update the
    exercise's :class:`ExerciseState`; reveal the fields with ``max_tries`` wrong tries
    (default :data:`MAX_WRONG_TRIES`) or every field when ``reveal`` (a logged event)."""
    limit = MAX_WRONG_TRIES if max_tries is None else max_tries
    if limit < 1:
        raise CourseError(f"max_tries must be at least 1, got {limit}")
    verdicts = compare(answers, outcome, fields, mistakes=mistakes)
    complete = all(v.answered for v in verdicts)
    state = exercise_state(exercise_id) if exercise_id else None
    recorded = False
    if state is not None:
        state.answers = dict(answers)
        if complete:
            recorded = record(
                exercise_id,
                verdicts,
                answers=typed,
                hints=state.hints_seen,
                revealed=sorted(state.revealed),
            )
            state.attempts += 1
            for v in verdicts:
                if v.status == "wrong":
                    state.wrong_tries[v.field] = state.wrong_tries.get(v.field, 0) + 1
        if reveal:
            newly = sorted({v.field for v in verdicts if v.status != "right"} - state.revealed)
            if newly:
                record_event("reveal", exercise_id, fields=newly)  # type: ignore[arg-type]
                state.revealed.update(newly)
        tried_out = sorted(
            f for f, n in state.wrong_tries.items() if n >= limit and f not in state.revealed
        )
        if tried_out:  # shown now because of the wrong tries: the log says so
            record_event("reveal", exercise_id, fields=tried_out)  # type: ignore[arg-type]
            state.revealed.update(tried_out)
        shown = state.revealed
        left = {v.field: state.tries_left(v.field, limit) for v in verdicts}
    else:
        shown = {v.field for v in verdicts} if reveal else set()
        left = None
    verdicts = tuple(_with_reveal(v, v.field in shown) for v in verdicts)
    comparison = Comparison(outcome, verdicts, recorded, complete, exercise_id, left)
    if state is not None:
        state.last = comparison
        state.notify()
    return comparison


def _with_reveal(verdict: Verdict, revealed: bool) -> Verdict:
    from dataclasses import replace

    return replace(verdict, revealed=revealed)


def check(
    prediction: Prediction,
    namespace: Mapping[str, Any] | None = None,
    *,
    fields: Sequence[str] | None = None,
    reveal: bool = False,
    max_tries: int | None = None,
) -> Comparison:
    """Runs the prediction's expression and judges the prediction, field by field.

    Names in a string expression come from ``namespace``, or, when it is omitted, from the
    calling module's globals (a notebook's variables). ``fields`` adds fields that count as
    "not answered yet" when the prediction lacks them. A complete prediction of an exercise is
    recorded; an incomplete one shows only what is missing. ``reveal=True`` shows the answers of
    the fields not yet right (logged); a field is also revealed after ``max_tries`` wrong tries.
    Raises :class:`~llmfs.widgets.model.ExpressionError` for a Python error in the expression.
    """
    if not isinstance(prediction, Prediction):
        raise PredictionError(
            f"check() takes what predict(...) returned, got {type(prediction).__name__}"
        )
    if namespace is None and isinstance(prediction.expression, str):
        namespace = sys._getframe(1).f_globals
    mistakes: Sequence[Any] = ()
    if prediction.exercise_id is not None:
        mistakes = predict_exercise(prediction.exercise_id).mistakes
    plain = is_plain(list(prediction.fields))
    outcome = run(prediction.expression, namespace, label=prediction.label, plain=plain)
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


# --------------------------------------------------------------------------------------------
# Hints and explain exercises
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hint:
    """One hint of an exercise: ``number`` of ``total`` (``text`` empty when there is none)."""

    exercise_id: str
    number: int
    total: int
    text: str

    def __repr__(self) -> str:
        if not self.total:
            return f"{self.exercise_id} has no hints"
        more = "" if self.number < self.total else " (that was the last hint)"
        return f"hint {self.number} of {self.total} for {self.exercise_id}{more}: {self.text}"

    def _repr_html_(self) -> str:
        return f'<p class="llmfs-hint">{escape_html(repr(self))}</p>'


def escape_html(text: str) -> str:
    from html import escape

    return escape(text)


def hint(exercise_id: str) -> Hint:
    """The exercise's next hint (one more each call; after the last, the last again), recorded
    in the attempts log. Raises :class:`CourseError` for an unknown exercise."""
    exercise = load_manifest().exercise(exercise_id)
    hints = exercise.hints
    if not hints:
        return Hint(exercise_id, 0, 0, "")
    state = exercise_state(exercise_id)
    number = min(state.hints_seen + 1, len(hints))
    if number > state.hints_seen:
        record_event("hint", exercise_id, number=number)
        state.hints_seen = number
        state.notify()
    return Hint(exercise_id, number, len(hints), hints[number - 1])


#: Fewest words an explain answer needs before its model answer may be revealed.
MIN_EXPLAIN_WORDS = 15


@dataclass(frozen=True)
class ModelAnswer:
    """The model answer and rubric of an explain exercise, or why they are not shown yet."""

    exercise_id: str
    shown: bool
    answer: str
    rubric: tuple[str, ...]
    note: str = ""

    def __repr__(self) -> str:
        if not self.shown:
            return f"{self.exercise_id}: {self.note}"
        lines = [f"{self.exercise_id}: compare your answer with the model answer and the rubric"]
        if self.answer:
            lines += ["", "model answer:", self.answer]
        if self.note:
            lines += ["", self.note]
        lines += ["", "rubric (a full answer makes each point):"]
        lines += [f"  [ ] {point}" for point in self.rubric]
        return "\n".join(lines)


def model_answer(
    exercise_id: str, answer: str | None = None, *, notebook: str | Path | None = None
) -> ModelAnswer:
    """The model answer and rubric of an explain exercise, once the learner has written one.

    The learner's answer is ``answer``, or else the text of the exercise's markdown cell in
    ``notebook`` (default: the chapter's notebook file in the current folder, as last saved),
    less the question. With fewer than :data:`MIN_EXPLAIN_WORDS` words of their own, nothing is
    revealed. The model answer comes from the solution notebook (when this installation has
    it), the rubric from the manifest. A reveal is logged. Raises :class:`CourseError` for an
    exercise that is not an explain exercise.
    """
    manifest = load_manifest()
    exercise = manifest.exercise(exercise_id)
    if exercise.kind != "explain":
        raise CourseError(f"{exercise_id} is a {exercise.kind} exercise, not an explain exercise")
    chapter = manifest.chapter(exercise.chapter)
    if answer is None:
        path = Path(notebook) if notebook is not None else Path.cwd() / Path(chapter.notebook).name
        answer = _written_answer(path, exercise.tag)
    words = len(_own_words(answer or "", manifest, chapter, exercise.tag).split())
    if words < MIN_EXPLAIN_WORDS:
        return ModelAnswer(
            exercise_id,
            False,
            "",
            exercise.rubric,
            f"write your answer in the exercise's cell first and save the notebook "
            f"({words} of at least {MIN_EXPLAIN_WORDS} words of your own so far); then run "
            "this cell again to compare it with the model answer",
        )
    solution = _solution_block(manifest.root / chapter.solution, exercise.tag)
    state = exercise_state(exercise_id)
    if "answer" not in state.revealed:
        record_event("reveal", exercise_id, fields=["answer"])
        state.revealed.add("answer")
    note = "" if solution else "(this installation has no solution notebooks: the rubric only)"
    return ModelAnswer(exercise_id, True, solution, exercise.rubric, note)


def _cell_text(path: Path, tag: str) -> str | None:
    import json

    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for cell in notebook.get("cells", []):
        if tag in cell.get("metadata", {}).get("tags", []):
            source = cell.get("source", "")
            return "".join(source) if isinstance(source, list) else str(source)
    return None


def _written_answer(path: Path, tag: str) -> str:
    return _cell_text(path, tag) or ""


_SOLUTION = re.compile(r"<!-- BEGIN SOLUTION -->(.*?)<!-- END SOLUTION -->", re.S)
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _solution_block(path: Path, tag: str) -> str:
    text = _cell_text(path, tag) or ""
    found = _SOLUTION.search(text)
    return _COMMENT.sub("", found.group(1)).strip() if found else ""


def _own_words(answer: str, manifest: Any, chapter: Any, tag: str) -> str:
    # Words of the unanswered cell (the question, its hints, "_Your answer here._", as the
    # course's student notebook has it) do not count as writing.
    blank = _cell_text(manifest.root / chapter.notebook, tag) or ""
    question = _SOLUTION.sub("", _cell_text(manifest.root / chapter.solution, tag) or "")
    asked = set(blank.split()) | set(question.split())
    text = _COMMENT.sub("", answer)  # the markers and hint comments, not what they enclose
    return " ".join(word for word in text.split() if word not in asked)


# --------------------------------------------------------------------------------------------
# Rendering a comparison (text and HTML share these rows)
# --------------------------------------------------------------------------------------------


def _question(comparison: Comparison) -> str:
    fields = ", ".join(v.label for v in comparison.verdicts)
    head = f"{comparison.exercise_id}: " if comparison.exercise_id else ""
    return f"{head}predict {fields} of {comparison.outcome.label}"


def _missing_lines(comparison: Comparison) -> list[str]:
    lines = []
    for v in comparison.verdicts:
        if v.status == "unanswered":
            lines.append(f"  {v.label}: {NOT_ANSWERED}")
        elif v.status == "unreadable":
            lines.append(f"  {v.label}: could not read {v.predicted!r} ({v.note})")
    return lines


def feedback_lines(verdict: Verdict, tries_left: int | None) -> list[str]:
    """The teaching lines under a wrong field: which entries differ, the misconceptions, and
    the tries left before the answer is shown (or the answer, once revealed)."""
    lines: list[str] = []
    if verdict.status != "wrong":
        return lines
    if verdict.differs:
        lines.append(verdict.differs)
    lines.extend(verdict.mistakes)
    if verdict.revealed:
        lines.append(f"answer: {verdict.truth}")
    elif tries_left is not None:
        lines.append(
            f"try again: {tries_left} more wrong tr{'y' if tries_left == 1 else 'ies'} "
            "before the answer is shown (or ask for a hint)"
        )
    return lines


def verdict_rows(comparison: Comparison) -> list[list[str]]:
    """``field, your prediction, answer, verdict`` rows; the answer is ``hidden`` until the
    field is right or revealed."""
    return [[v.label, v.predicted, v.shown_truth, v.verdict_text] for v in comparison.verdicts]


def render_comparison_text(comparison: Comparison) -> str:
    """A comparison as text. Incomplete: the question and the missing fields only. Complete:
    one row per field, the feedback of each wrong field, and, when every field is right or
    revealed, the offset table of the result (or the refusal)."""
    parts = [_question(comparison)]
    if not comparison.complete:
        parts.append("still to answer:")
        parts += _missing_lines(comparison)
        if any(v.revealed for v in comparison.verdicts):
            parts += [
                f"  {v.label} (revealed): {v.truth}" for v in comparison.verdicts if v.revealed
            ]
        parts.append("(nothing is checked until every field has an answer)")
        return "\n".join(parts)
    parts.append(table(("field", "your prediction", "answer", "verdict"), verdict_rows(comparison)))
    left = comparison.tries_left or {}
    for v in comparison.verdicts:
        for line in feedback_lines(v, left.get(v.field)):
            parts.append(f"  {v.label}: {line}")
    parts.append(tally(comparison.verdicts))
    outcome = comparison.outcome
    if not comparison.finished or outcome.row is None:
        return "\n".join(parts)
    row = outcome.row
    if row.rejected:
        parts.append(f"{REJECTED_MARK} rejected: violated {row.condition} ({row.error})")
        parts.append(f"  {row.message}")
    elif outcome.view is not None:
        parts.append("")
        parts.append(render_offsets(outcome.view, row.owner or "base"))
        if row.mapping is not None:
            parts.append("")
            parts.append(render_mapping(row))
    return "\n".join(parts)


def render_comparison_html(comparison: Comparison) -> str:
    """The same content as :func:`render_comparison_text`, as HTML."""
    from html import escape

    parts = [f"<p>{escape(_question(comparison))}</p>"]
    if not comparison.complete:
        items = "".join(f"<li>{escape(line.strip())}</li>" for line in _missing_lines(comparison))
        items += "".join(
            f"<li>{escape(v.label)} (revealed): {escape(v.truth)}</li>"
            for v in comparison.verdicts
            if v.revealed
        )
        parts.append(
            f'<div class="llmfs-missing"><p>still to answer:</p><ul>{items}</ul>'
            "<p>(nothing is checked until every field has an answer)</p></div>"
        )
        return wrap("llmfs-comparison", "".join(parts))
    left = comparison.tries_left or {}
    rows = []
    for v in comparison.verdicts:
        notes = "".join(
            f"<br><small>{escape(line)}</small>" for line in feedback_lines(v, left.get(v.field))
        )
        rows.append(
            f'<tr data-field="{escape(v.field)}" data-status="{v.status}">'
            f"<td>{escape(v.label)}</td><td><code>{escape(v.predicted)}</code></td>"
            f"<td><code>{escape(v.shown_truth)}</code></td>"
            f"<td>{escape(v.verdict_text)}{notes}</td></tr>"
        )
    parts.append(
        '<table class="llmfs-verdicts"><thead><tr><th>field</th><th>your prediction</th>'
        f"<th>answer</th><th>verdict</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        f"<p>{escape(tally(comparison.verdicts))}</p>"
    )
    outcome = comparison.outcome
    if comparison.finished and outcome.row is not None:
        row = outcome.row
        if row.rejected:
            parts.append(
                f'<p data-status="rejected">{mark("rejected")} rejected: violated '
                f"<strong>{escape(row.condition or '')}</strong> (<code>"
                f"{escape(row.error or '')}</code>)<br><small>{escape(row.message or '')}"
                "</small></p>"
            )
        elif outcome.view is not None:
            parts.append(render_offsets_html(outcome.view, row.owner or "base"))
            parts.append(render_mapping_html(row))
    return wrap("llmfs-comparison", "".join(parts))


def exercise_finished(exercise_id: str) -> bool:
    """True when the predict exercise ``exercise_id`` is finished in the current attempts log:
    every field was right in some attempt or its answer was shown. Raises :class:`CourseError`
    for an unknown exercise or a malformed log."""

    state = exercise_state(exercise_id)
    if state.last is not None and state.last.finished:
        return True
    fields = set(predict_exercise(exercise_id).fields)
    done = set(state.revealed)
    for attempt in load_attempts(attempts_path()):
        if attempt.exercise == exercise_id:
            done.update(name for name, right in attempt.fields.items() if right)
            done.update(attempt.revealed)
    return fields <= done


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
    "FIELDS",
    "HINTS",
    "LABELS",
    "MAX_WRONG_TRIES",
    "MISCONCEPTIONS",
    "NOT_ANSWERED",
    "Comparison",
    "ExerciseState",
    "Hint",
    "Misconception",
    "ModelAnswer",
    "Outcome",
    "Prediction",
    "PredictionError",
    "UnreadableEntry",
    "Verdict",
    "after",
    "attempt",
    "check",
    "compare",
    "diagnose",
    "display",
    "exercise_finished",
    "exercise_state",
    "field_name",
    "hint",
    "judge",
    "model_answer",
    "normalize",
    "predict",
    "record",
    "render_comparison_html",
    "render_comparison_text",
    "resolve_error_name",
    "run",
]
