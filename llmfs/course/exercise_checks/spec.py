"""Implement exercises as data: which function a learner writes, how to draw cases, the answer.

An :class:`ImplementSpec` says everything a checker needs, in plain data and library functions:
the name of the learner's function, a generator of random cases (JSON-serializable argument
tuples), and the library's reference. An *outcome* is plain JSON data, ``{"value": ...}`` or
``{"error": "ErrorClassName"}``, so the learner's function can run in another process (the
grader's sandbox) on arguments chosen there, and the comparison happens in the grader's own
process with :func:`outcomes_match`.

Invariant: ``make_cases(rng, n)`` returns exactly ``n`` argument tuples and depends only on the
state of ``rng``; ``reference`` never raises anything but a :class:`TensorError` (or Python's
``ValueError``/``IndexError``) for a case.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmfs.course.exercise_checks.report import CaseResult, CheckReport, Status, record, show
from llmfs.tensor import TensorError, layout

#: ``{"value": <JSON data>}`` or ``{"error": "<exception class name>"}``.
Outcome = dict[str, Any]


@dataclass(frozen=True)
class ImplementSpec:
    """One implement exercise: the learner's function name, random cases and the reference.

    ``cases`` random cases are drawn per run; the notebook's visible check draws them from
    ``random.Random(visible_seed)``, a grader from seeds of its own.
    """

    exercise_id: str
    function: str
    make_cases: Callable[[random.Random, int], list[tuple[Any, ...]]]
    reference: Callable[..., Any]
    cases: int = 200
    visible_seed: int = 0


def _plain(value: Any) -> Any:
    # Tuples become lists and everything goes through JSON, so that an outcome computed here and
    # one sent back by another process compare equal exactly when they carry the same data.
    return json.loads(json.dumps(value))


def _error_name(error: BaseException) -> str:
    # The exercises ask for Python's built-in errors; the library raises subclasses of them.
    if isinstance(error, TensorError):
        return "IndexError" if isinstance(error, IndexError) else "ValueError"
    return type(error).__name__


def outcome_of(fn: Callable[..., Any], args: tuple[Any, ...]) -> Outcome:
    """Calls ``fn(*args)`` on fresh copies of the arguments and returns its outcome.

    A returned value that is not JSON data becomes ``{"error": "UnserializableResult"}``.
    """
    copies = json.loads(json.dumps(list(args)))
    try:
        value = fn(*copies)
    except Exception as error:  # the learner's code may raise anything: it is the outcome
        return {"error": _error_name(error)}
    try:
        return {"value": _plain(value)}
    except (TypeError, ValueError):
        return {"error": "UnserializableResult"}


def expected_outcome(spec: ImplementSpec, args: tuple[Any, ...]) -> Outcome:
    """The library's outcome for one case's arguments."""
    return outcome_of(spec.reference, args)


def outcomes_match(got: Any, expected: Outcome) -> bool:
    """True when ``got`` (possibly from another process) is the same outcome as ``expected``.

    Booleans never equal numbers; lists and tuples compare element by element.
    """
    if not isinstance(got, dict) or set(got) != set(expected):
        return False
    if "error" in expected:
        return got.get("error") == expected["error"]
    return _same(got.get("value"), expected["value"])


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(want, bool) and got == want
    if isinstance(want, (list, tuple)):
        return (
            isinstance(got, (list, tuple))
            and len(got) == len(want)
            and all(_same(g, w) for g, w in zip(got, want))
        )
    return type(got) is type(want) and got == want


def run_spec(
    spec: ImplementSpec,
    fn: Callable[..., Any],
    *,
    seed: int | None = None,
    cases: int | None = None,
) -> CheckReport:
    """Runs ``fn`` on the spec's random cases (``seed`` defaults to the visible seed) in this
    process and reports every case; failing cases come first, smallest first."""
    rng = random.Random(spec.visible_seed if seed is None else seed)
    drawn = spec.make_cases(rng, spec.cases if cases is None else cases)
    results = []
    for args in drawn:
        want = expected_outcome(spec, args)
        got = outcome_of(fn, args)
        label = f"{spec.function}({', '.join(show(a) for a in args)})"
        results.append(
            CaseResult(label, _describe(want), _describe(got), outcomes_match(got, want))
        )
    results.sort(key=lambda case: (bool(case.ok), len(case.label)))
    if all(case.got == "raises NotImplementedError" for case in results):
        return CheckReport(spec.exercise_id, "not implemented", (), f"{spec.function} is a stub")
    status: Status = "passed" if all(case.ok for case in results) else "failed"
    return record(CheckReport(spec.exercise_id, status, tuple(results)))


def _describe(outcome: Outcome) -> str:
    return f"raises {outcome['error']}" if "error" in outcome else show(outcome["value"])


def _random_shape(rng: random.Random) -> list[int]:
    rank = rng.randint(0, 5)
    return [rng.choice((0, 1, 1, 2, 3, 4, 5, 6, 7)) for _ in range(rank)]


def _stride_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return [(_random_shape(rng),) for _ in range(n)]


def _row_major(shape: list[int]) -> list[int]:
    return list(layout.row_major_strides(shape))


#: Exercise id -> spec.
SPECS: dict[str, ImplementSpec] = {
    "ch01.compute_strides": ImplementSpec(
        exercise_id="ch01.compute_strides",
        function="compute_strides",
        make_cases=_stride_cases,
        reference=_row_major,
    ),
}

__all__ = [
    "SPECS",
    "ImplementSpec",
    "Outcome",
    "expected_outcome",
    "outcome_of",
    "outcomes_match",
    "run_spec",
]
