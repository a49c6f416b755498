"""Checking an "implement it" exercise in a notebook: run the learner's function on cases.

:func:`check_function` is what a chapter's check cell calls after the cell where the learner
writes a function. It never stops the notebook: a function that still raises the build's
``NotImplementedError`` stub prints "not implemented yet" (so an unanswered student notebook runs
top to bottom), and any other exception is reported as a wrong case. Its printed text is
deterministic (no addresses, no times), so solutions can be validated by nbval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmfs.course.manifest import Manifest

RIGHT = "✓ right"
WRONG = "✗ wrong"


@dataclass(frozen=True)
class FunctionCheck:
    """The outcome of :func:`check_function`.

    ``implemented`` is False when the function raised ``NotImplementedError`` (then ``cases`` is
    empty); otherwise ``cases`` holds one (description, right) pair per case, in order.
    """

    exercise_id: str
    implemented: bool
    cases: tuple[tuple[str, bool], ...]

    @property
    def all_right(self) -> bool:
        """True when the function is implemented and every case was right."""
        return self.implemented and all(right for _, right in self.cases)


def _same(result: Any, expected: Any) -> bool:
    if isinstance(result, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(result) == len(expected) and all(map(_same, result, expected))
    if type(result).__module__ == "numpy" or type(expected).__module__ == "numpy":
        import numpy as np

        return bool(np.array_equal(np.asarray(result), np.asarray(expected)))
    if isinstance(result, bool) != isinstance(expected, bool):
        return False  # True == 1 in Python, but a flag is not a count
    return bool(result == expected)


def _call_text(name: str, args: tuple[Any, ...]) -> str:
    return f"{name}({', '.join(repr(arg) for arg in args)})"


def check_function(
    exercise_id: str,
    function: Callable[..., Any],
    cases: Sequence[tuple[tuple[Any, ...], Any]],
    *,
    record: bool = True,
    manifest: Manifest | None = None,
) -> FunctionCheck:
    """Call ``function(*args)`` for each ``(args, expected)`` case, print a line per case, and
    record the attempt (``case 1``, ``case 2``, ... right or wrong) unless ``record`` is False.

    Lists and tuples compare element-wise (a list answer to a tuple question is right), numpy
    values with ``array_equal``. Prints ``<id>: not implemented yet`` and records nothing when
    the function raises ``NotImplementedError``. Raises :class:`~llmfs.course.CourseError` (from
    the attempts log) when the exercise id is not in the manifest.
    """
    name = getattr(function, "__name__", "function")
    lines: list[tuple[str, bool]] = []
    for args, expected in cases:
        call = _call_text(name, tuple(args))
        try:
            result = function(*args)
        except NotImplementedError:
            print(f"{exercise_id}: not implemented yet")
            return FunctionCheck(exercise_id, implemented=False, cases=())
        except Exception as error:  # the learner's bug is a wrong answer, not a crash
            right = False
            text = f"{call} raised {type(error).__name__}: {error}; expected {expected!r}"
        else:
            right = _same(result, expected)
            text = (
                f"{call} -> {result!r}" if right else f"{call} -> {result!r}; expected {expected!r}"
            )
        lines.append((text, right))
    passed = sum(right for _, right in lines)
    print(f"{exercise_id}: {passed} of {len(lines)} cases right")
    for text, right in lines:
        print(f"  {RIGHT if right else WRONG}  {text}")
    if record and lines:
        from llmfs.course.attempts import record_attempt

        fields = {f"case {number}": right for number, (_, right) in enumerate(lines, start=1)}
        record_attempt(exercise_id, fields, manifest=manifest)
    return FunctionCheck(exercise_id, implemented=True, cases=tuple(lines))
