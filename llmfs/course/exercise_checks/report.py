"""The result of a check: one line per case, a verdict, and a deterministic text ``repr``.

A report of random cases counts every case it ran in its headline ("193 of 200 right") and
shows only a few distinct ones (``right`` and ``total`` say how many there were); a report of
named cases (:func:`check_values`, :func:`run_cases`) counts the cases it shows. Errors are shown
with their class and message (:func:`error_text`), layouts with the widgets' offset tables
(:func:`offset_tables`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import llmfs.course.attempts as attempts_log
from llmfs.course import CourseError
from llmfs.course.exercises.compare import same_answer
from llmfs.course.exercises.entries import NOT_ANSWERED, RIGHT_MARK, WRONG_MARK
from llmfs.course.exercises.tables import render_offsets, table
from llmfs.course.exercises.verdict import Verdict
from llmfs.tensor import TensorView

#: What a report says when the learner's code is still the stub.
NOT_IMPLEMENTED = "not implemented yet"

Status = Literal["passed", "failed", "not implemented", "not answered"]


@dataclass(frozen=True)
class CaseResult:
    """One case: what was tried (``label``), the expected and the actual result as text.

    ``ok`` is None when the case was not answered (a prediction left as ``None``).
    """

    label: str
    expected: str
    got: str
    ok: bool | None

    @property
    def verdict(self) -> str:
        """``✓ right``, ``✗ wrong`` or ``not answered yet``."""
        if self.ok is None:
            return NOT_ANSWERED
        return f"{RIGHT_MARK} right" if self.ok else f"{WRONG_MARK} wrong"


@dataclass(frozen=True)
class CheckReport:
    """The outcome of one check of one exercise.

    Invariant: ``status`` is ``passed`` exactly when there is at least one case and every case is
    right; ``not implemented`` (the code is still the stub) and ``not answered`` (every
    prediction is ``None``) carry a ``note`` instead of a failure.
    """

    exercise_id: str
    status: Status
    cases: tuple[CaseResult, ...]
    note: str = ""
    recorded: bool = False
    #: How many cases were right and how many ran, when ``cases`` shows only some of them (a run
    #: of random cases); None: ``cases`` are all the cases.
    right: int | None = None
    total: int | None = None
    #: The exercise's one verdict (:func:`~llmfs.course.exercises.verdict.judge_implement` of
    #: the cases run), as ``llmfs check`` and ``llmfs grade`` give it; None for a check that is
    #: not an implement specification's.
    verdict: Verdict | None = None

    @property
    def passed(self) -> bool:
        """True when every case is right."""
        return self.status == "passed"

    def __repr__(self) -> str:
        head = f"check {self.exercise_id}: "
        if self.status == "not implemented":
            return head + (f"{NOT_IMPLEMENTED} ({self.note})" if self.note else NOT_IMPLEMENTED)
        if self.status == "not answered":
            return head + NOT_ANSWERED
        right = sum(1 for case in self.cases if case.ok) if self.right is None else self.right
        answered = sum(1 for case in self.cases if case.ok is not None)
        if self.total is not None:
            answered = self.total
        verdict = f"{RIGHT_MARK} passed" if self.passed else f"{WRONG_MARK} not yet"
        summary = f"{right} of {answered} right"
        if self.total is None and answered < len(self.cases):
            summary += f", {len(self.cases) - answered} {NOT_ANSWERED}"
        lines = [head + f"{summary}: {verdict}", _case_lines(self.cases)]
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


#: The widest a case table may be: a notebook output 900 px wide shows about 100 monospace
#: characters, a terminal 80 to 100.
TABLE_WIDTH = 88


def _case_lines(cases: Sequence[CaseResult]) -> str:
    """The cases as a table (case, expected, got, verdict), or, when that table would be wider
    than :data:`TABLE_WIDTH` (a case named by its whole input), one block per case, so that no
    column wraps into the next line."""
    rows = [[c.label, c.expected, c.got, c.verdict] for c in cases]
    text = table(("case", "expected", "got", "verdict"), rows)
    if max((len(line) for line in text.splitlines()), default=0) <= TABLE_WIDTH:
        return text
    blocks = []
    for c in cases:
        blocks += [f"case {c.label}", f"  expected  {c.expected}", f"  got       {c.got}"]
        blocks.append(f"  verdict   {c.verdict}")
    return "\n".join(blocks)


def record(report: CheckReport, answers: Mapping[str, str] | None = None) -> CheckReport:
    """Appends the report to the attempts log (one field per answered case, named by its label)
    and returns it marked ``recorded``; a report with nothing answered or implemented is returned
    unchanged. Raises :class:`~llmfs.course.CourseError` for an exercise id not in the manifest.
    """
    from dataclasses import replace

    fields = {case.label: bool(case.ok) for case in report.cases if case.ok is not None}
    if report.status in ("not implemented", "not answered") or not fields:
        return report
    attempts_log.record_attempt(report.exercise_id, fields, answers=answers)
    return replace(report, recorded=True)


#: The longest error text a report shows in full (a longer message ends in "…"), and the longest
#: a table cell shows (the smallest failing case repeats its messages under the table, in full).
MESSAGE_LIMIT = 200
CELL_MESSAGE_LIMIT = 56

#: A message cut to fewer characters than this is left out (the class alone says more).
_SHORTEST_CUT = 12


def error_text(
    error: BaseException,
    name: str | None = None,
    *,
    expected: bool = False,
    limit: int = MESSAGE_LIMIT,
) -> str:
    """An exception as a report shows it: its class and its message, ``raised ValueError: the
    axes repeat`` (what the learner's function did) or ``raises ...`` (``expected``: the
    library's answer). The class is the one raised: a learner's own ``ValueError``, or the
    library's ``IndexOutOfBoundsError``; where the class compared (``name``, see
    :func:`~llmfs.course.exercise_checks.spec.error_name`) differs, it follows in parentheses,
    ``raises IndexOutOfBoundsError (an IndexError)``. The message follows on the same line; the
    whole text is at most ``limit`` characters (the message cut with "…", or left out when
    little of it would fit)."""
    cls = type(error).__name__
    text = f"{'raises' if expected else 'raised'} {cls}"
    if name is not None and name != cls:
        text += f" ({'an' if name[0] in 'AEIOU' else 'a'} {name})"
    message = " ".join(str(error).split())
    room = limit - len(text) - 2
    if len(message) > room:
        message = message[: room - 1].rstrip() + "…" if room >= _SHORTEST_CUT else ""
    return f"{text}: {message}" if message else text


def show_outcome(
    outcome: Mapping[str, Any],
    error: BaseException | None = None,
    *,
    expected: bool,
    limit: int = MESSAGE_LIMIT,
) -> str:
    """A case's outcome (``{"value": ...}`` or ``{"error": name, ...}``) as a report shows it:
    the value as JSON, or the error that ``error`` is with its class and message cut at
    ``limit`` (:func:`error_text`; ``raises`` for the library's answer, ``raised`` for what the
    learner's function did)."""
    if "error" not in outcome:
        return as_typed(outcome.get("value"))
    if error is not None:
        return error_text(error, outcome["error"], expected=expected, limit=limit)
    if outcome["error"] == "NotPlainData":
        return f"returned a {outcome.get('type', '?')}, not plain data"
    return f"{'raises' if expected else 'raised'} {outcome['error']}"


def as_typed(value: Any) -> str:
    """A plain value (JSON data: a case's arguments or result) as a learner writes it: JSON
    text whose strings keep every printable character as itself (``"🙂"``, ``"é"``, not
    ``"\\ud83d\\ude42"``), and escape only what would not show: control characters, and other
    characters Python does not print (``str.isprintable``: a zero-width space reads
    ``\\u200b``), so no character of a string is hidden."""
    text = json.dumps(value, ensure_ascii=False)
    return "".join(ch if ch.isprintable() else _escaped(ch) for ch in text)


def _escaped(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON spells a character past the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def offset_tables(views: Sequence[tuple[str, TensorView]]) -> str:
    """One offset table per named view (coordinate -> storage offset -> value, then the storage
    strip: :func:`llmfs.widgets.text.render_offsets`, the tables the chapters draw), the name as
    the owner's."""
    return "\n".join(render_offsets(view, owner=name) for name, view in views)


def show(value: Any) -> str:
    """A result as learners write it: lists for tuples, ``raises IndexError`` for an error."""
    if isinstance(value, BaseException):
        return f"raises {type(value).__name__}"
    if isinstance(value, tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, list):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return repr(value)


def check_values(
    exercise_id: str,
    predicted: Mapping[str, Any],
    truth: Mapping[str, Any],
    *,
    record_attempt: bool = True,
) -> CheckReport:
    """Compares predictions written as plain Python values with the truth, key by key.

    ``truth`` holds the library's answers (computed by the notebook right before the call);
    ``predicted`` the learner's, ``None`` meaning not answered yet. The expected column shows a
    truth only where the prediction is right (``hidden`` elsewhere). Numbers compare by value,
    booleans as booleans, sequences element by element. Raises :class:`CourseError` naming the keys
    when the two mappings do not have the same keys (an author's mistake).
    """
    if set(predicted) != set(truth):
        raise CourseError(
            f"{exercise_id}: predicted keys {sorted(predicted)} differ from the truth's "
            f"{sorted(truth)}"
        )
    verdicts = {
        key: None if predicted[key] is None else same_answer(predicted[key], truth[key])
        for key in truth
    }
    # A truth is shown only where the learner predicted it right: nothing before an attempt.
    cases = tuple(
        CaseResult(
            key,
            show(truth[key]) if verdicts[key] else "hidden",
            "—" if predicted[key] is None else show(predicted[key]),
            verdicts[key],
        )
        for key in truth
    )
    if all(case.ok is None for case in cases):
        return CheckReport(exercise_id, "not answered", cases)
    status: Status = "passed" if all(case.ok for case in cases) else "failed"
    report = CheckReport(exercise_id, status, cases)
    answers = {case.label: case.got for case in cases if case.ok is not None}
    return record(report, answers) if record_attempt else report


def run_cases(
    exercise_id: str,
    function: Callable[..., Any],
    cases: Sequence[tuple[str, tuple[Any, ...], Any]],
    *,
    name: str,
    same: Callable[[Any, Any], bool],
    record_attempt: bool = True,
) -> CheckReport:
    """Calls ``function(*args)`` for each ``(label, args, expected)`` case and compares.

    ``expected`` is a value, or an exception *class* the function must raise. A call raising
    :class:`NotImplementedError`, or returning ``None`` where a value is expected, counts as the
    stub; when every case is the stub the report is "not implemented yet". Any other exception
    from the learner's code becomes a wrong case that names it, never a traceback.
    """
    if not callable(function):
        return CheckReport(exercise_id, "not implemented", (), f"{name} is not a function yet")
    results: list[CaseResult] = []
    stubbed = 0
    for label, args, expected in cases:
        want_error = isinstance(expected, type) and issubclass(expected, BaseException)
        shown = f"raises {expected.__name__}" if want_error else show(expected)
        try:
            got = function(*_copies(args))
        except NotImplementedError:
            stubbed += 1
            results.append(CaseResult(label, shown, "raises NotImplementedError", False))
            continue
        except Exception as error:  # the learner's code may raise anything; it is reported
            ok = want_error and isinstance(error, expected)
            results.append(CaseResult(label, shown, error_text(error), ok))
            continue
        if got is None:
            stubbed += 1
        if want_error:
            results.append(CaseResult(label, shown, f"returns {show(got)}", False))
            continue
        results.append(CaseResult(label, shown, show(got), got is not None and same(got, expected)))
    if stubbed == len(cases):
        return CheckReport(
            exercise_id, "not implemented", tuple(results), f"{name} still has its stub"
        )
    status: Status = "passed" if all(r.ok for r in results) else "failed"
    report = CheckReport(exercise_id, status, tuple(results))
    return record(report) if record_attempt else report


def _copies(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # The learner's function gets fresh lists, so changing an argument cannot change a later case.
    return tuple(list(a) if isinstance(a, (list, tuple)) else a for a in args)


__all__ = [
    "CELL_MESSAGE_LIMIT",
    "MESSAGE_LIMIT",
    "NOT_IMPLEMENTED",
    "CaseResult",
    "CheckReport",
    "as_typed",
    "check_values",
    "error_text",
    "offset_tables",
    "record",
    "run_cases",
    "show",
    "show_outcome",
]
