"""Plain-JSON outcomes of one case: what is compared, sent between processes and stored.

An outcome is ``{"value": <JSON data>}`` or ``{"error": <name>, ...}``. The error name is the
learner-facing class: the first of :data:`ERROR_NAMES` that the raised class derives from (a
library ``IndexOutOfBoundsError``, an ``IndexError``, reads ``IndexError``), else the class's own
name; :data:`SHORTCUT` marks a refused library call. A :class:`Run` keeps, beside the outcome,
the exception itself, for the report to show its class and message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmfs.course import CourseError

#: The built-in error classes an exercise may ask for, most specific first.
ERROR_NAMES: tuple[str, ...] = ("IndexError", "KeyError", "ZeroDivisionError", "ValueError")

Outcome = dict[str, Any]

#: The error name of a case whose run called a library function the exercise forbids; the
#: outcome also names the function (``"shortcut"``) and what the learner's code called (``"via"``).
SHORTCUT = "Shortcut"


def error_name(error: BaseException) -> str:
    """The learner-facing name of ``error`` (see the module docstring)."""
    import builtins

    for name in ERROR_NAMES:
        if isinstance(error, getattr(builtins, name)):
            return name
    return type(error).__name__


def to_json(value: Any) -> Any:
    """``value`` as JSON data: tuples become lists, whole floats ints, numpy scalars Python
    numbers. Raises :class:`CourseError` for anything else (a tensor, an object)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: to_json(v) for k, v in value.items()}
    if hasattr(value, "item") and hasattr(value, "dtype"):
        return to_json(value.item())
    raise CourseError(f"a {type(value).__name__} is not a plain value (lists, numbers, booleans)")


@dataclass(frozen=True)
class Run:
    """One run of a function on one case: its plain-JSON ``outcome`` and, when it raised, the
    exception itself (the report shows its class and message; the outcome keeps only the name,
    which is what is compared and what a grader's worker sends back)."""

    outcome: Outcome
    error: BaseException | None = None


__all__ = ["ERROR_NAMES", "SHORTCUT", "Outcome", "Run", "error_name", "to_json"]
