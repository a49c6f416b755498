"""The one answer equality of the course: :func:`same_answer`.

The notebook's check (:mod:`llmfs.course.exercises.judge`), the self-check, the grader
(:mod:`llmfs.course.grading.score`) and the implement checks (:mod:`llmfs.course.exercise_checks`)
all decide "is this the answer" here, so no two of them can disagree about a float, a boolean or
a list.

Rules (each has a test in ``tests/course/exercises/test_compare.py``):

* a boolean equals only a boolean (``True`` is not ``1``: "contiguous: 1" is not an answer);
* two whole numbers (``int``) are equal only when equal exactly (no tolerance: offsets and
  shapes are counts);
* otherwise two numbers are equal within :data:`REL_TOL` relative or :data:`ABS_TOL` absolute
  difference; NaN equals NaN (a predicted NaN is right when the result is NaN) and an infinity
  equals only the same infinity;
* lists and tuples are sequences: equal when they have the same length and equal entries in
  order (``(3, 2)`` and ``[3, 2]`` are the same answer);
* mappings are equal when they have the same keys and equal values;
* anything else (strings, ``None``, names) is equal when ``==`` says so and the types match.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: Relative tolerance between two numbers, at least one of them a float.
REL_TOL = 1e-9
#: Absolute tolerance, for numbers near zero.
ABS_TOL = 1e-12


def _python(value: Any) -> Any:
    # A NumPy scalar (np.float32, np.int64, np.bool_) is read by its Python value, so NumPy's
    # bool is a boolean and its numbers are numbers.
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        try:
            return value.item()
        except (TypeError, ValueError):  # an array of several values is not a scalar
            return value
    return value


def is_number(value: Any) -> bool:
    """True for an int or a float (or a NumPy number), never for a boolean."""
    value = _python(value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_number(a: Any, b: Any) -> bool:
    """Two numbers by the rules above (``a`` and ``b`` satisfy :func:`is_number`)."""
    a, b = _python(a), _python(b)
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def same_answer(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same answer (the module docstring gives the rules).

    Symmetric, never raises: values of different kinds (a list and a number, a string and a
    boolean) are simply different answers.
    """
    a, b = _python(a), _python(b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) and is_number(b):
        return same_number(a, b)
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(same_answer(x, y) for x, y in zip(a, b))
        )
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (
            isinstance(a, Mapping)
            and isinstance(b, Mapping)
            and set(a) == set(b)
            and all(same_answer(a[k], b[k]) for k in a)
        )
    if is_number(a) or is_number(b):
        return False
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:  # an object whose == raises or is elementwise is not an answer value
        return False


__all__ = ["ABS_TOL", "REL_TOL", "is_number", "same_answer", "same_number"]
