"""Implement exercises as specifications: random cases, the library's answer, plain-JSON outcomes.

An :class:`ImplementSpec` says how to draw cases for one exercise (``make_cases(rng, n)``, every
argument JSON data), what the library answers for one case (``reference``), and how many cases a
run draws. The notebook's check runs the learner's function on the cases of ``visible_seed``; the
grader draws its own with other seeds, so a table of the visible cases cannot pass.

Outcomes are plain JSON (``{"value": ...}`` or ``{"error": "ValueError"}``), so a grader can run a
learner's function in another process on its own arguments (:func:`outcome_of`), send the outcomes
back as JSON and compare them there (:func:`outcomes_match` with :func:`expected_outcome`).

A case whose run called a function the exercise forbids (the spec's ``shortcuts``, see
:mod:`~llmfs.course.exercise_checks.shortcuts`) has the outcome ``{"error": "Shortcut",
"shortcut": <the listed function>, "via": <what the learner's code called>}``; it never matches,
and :func:`shortcut_text` turns it into the report's message.

An error outcome names the learner-facing class: the first of :data:`ERROR_NAMES` that the raised
class derives from (so a library ``IndexOutOfBoundsError``, an ``IndexError``, reads
``IndexError``), else the class's own name.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from llmfs.course import CourseError
from llmfs.course.attempts import record_attempt as write
from llmfs.course.exercise_checks.einsum import naive_einsum_cases, naive_einsum_reference
from llmfs.course.exercise_checks.report import CaseResult, CheckReport
from llmfs.course.exercise_checks.shortcuts import Shortcuts, call_guarded, shortcut_message
from llmfs.course.exercises.compare import same_answer
from llmfs.tensor import (
    NonContiguousReshapeError,
    Tensor,
    TensorError,
    TensorView,
    as_strided,
    copying_transpose,
    layout,
)
from llmfs.tensor.layout import Layout
from llmfs.tensor.traversal import StridedOffsets
from llmfs.widgets.text import format_ints, table

#: The built-in error classes an exercise may ask for, most specific first.
ERROR_NAMES: tuple[str, ...] = ("IndexError", "KeyError", "ZeroDivisionError", "ValueError")

Outcome = dict[str, Any]

#: The error name of a case whose run called a library function the exercise forbids; the
#: outcome also names the function (``"shortcut"``) and what the learner's code called (``"via"``).
SHORTCUT = "Shortcut"

#: Failing cases a report shows (the smallest first).
SHOWN_FAILURES = 3


@dataclass(frozen=True)
class ImplementSpec:
    """One implement exercise: how to draw cases, the library's answer, how many cases a run draws.

    ``prepare`` (optional) turns a case's JSON arguments into the arguments the learner's function
    takes (a tensor view, say) and ``summarize`` turns what it returned into JSON data; by default
    both are the identity (with tuples read as lists).
    """

    exercise_id: str
    function: str
    make_cases: Callable[[random.Random, int], list[tuple[Any, ...]]]
    reference: Callable[..., Any]
    cases: int = 200
    visible_seed: int = 0
    prepare: Callable[..., tuple[Any, ...]] | None = None
    summarize: Callable[[Any, tuple[Any, ...]], Any] | None = None
    #: The names of the function's arguments, in order (for a grader's report of a case).
    parameters: tuple[str, ...] = ()
    #: How to call the learner's function on the prepared arguments, e.g. while counting the
    #: copies it makes (``call(fn, args)``; its result goes to ``summarize``); default
    #: ``fn(*args)``.
    call: Callable[[Callable[..., Any], tuple[Any, ...]], Any] | None = None
    #: Kernel exercises: the learner's function takes no arguments and returns MSL source (or
    #: the learner hands over the source string itself); ``kernel(source, *args)`` compiles and
    #: runs it on one case and returns plain data.
    kernel: Callable[..., Any] | None = None
    #: The library callables the learner's function must not reach while it runs (the function
    #: the exercise re-implements, by its dotted name), and what to use instead; a case that
    #: calls one is a ``{"error": "Shortcut", ...}`` outcome (:mod:`.shortcuts`).
    shortcuts: Shortcuts | None = None


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


def expected_outcome(spec: ImplementSpec, args: Sequence[Any]) -> Outcome:
    """The library's outcome for one case: ``{"value": ...}`` or ``{"error": name}``."""
    try:
        return {"value": to_json(spec.reference(*args))}
    except (TensorError, ValueError, IndexError) as error:
        return {"error": error_name(error)}


def outcome_of(
    fn: Callable[..., Any], args: Sequence[Any], spec: ImplementSpec | None = None
) -> Outcome:
    """Runs a learner's function on one case (with ``spec``'s ``prepare``/``summarize``) and
    returns its outcome. ``NotImplementedError`` and a ``None`` result read
    ``{"error": "NotImplementedError"}`` / ``{"value": None}``; any exception is an outcome, never
    a traceback; a result that is not plain data is ``{"error": "NotPlainData"}``."""
    if spec is not None and spec.kernel is not None:
        return _kernel_outcome(fn, args, spec.kernel)
    call_args = tuple(_fresh(a) for a in args)
    if spec is not None and spec.prepare is not None:
        call_args = spec.prepare(*call_args)
    # Only the learner's call is guarded: preparing arguments and summarizing the result use the
    # library freely (the summaries of chapter 8 run the very reference the learner may not).
    if spec is not None and spec.call is not None:
        guarded = call_guarded(spec.shortcuts, spec.call, fn, call_args)
    else:
        guarded = call_guarded(spec.shortcuts if spec else None, fn, *call_args)
    if guarded.shortcut is not None:
        return {
            "error": SHORTCUT,
            "shortcut": guarded.shortcut.target,
            "via": guarded.shortcut.entry,
        }
    if guarded.error is not None:
        return {"error": error_name(guarded.error)}
    result = guarded.result
    try:
        if spec is not None and spec.summarize is not None:
            return {"value": to_json(spec.summarize(result, call_args))}
        return {"value": to_json(result)}
    except CourseError:
        return {"error": "NotPlainData", "type": type(result).__name__}


def _kernel_outcome(fn: Any, args: Sequence[Any], run: Callable[..., Any]) -> Outcome:
    # A kernel error keeps its own class name (KernelMemoryError, KernelCompileError, ...):
    # "ValueError" would hide what went wrong.
    from llmfs.tensor import MetalError

    try:
        source = fn if isinstance(fn, str) else fn()
    except Exception as error:  # the learner's code may raise anything; it is an outcome
        return {"error": error_name(error)}
    if source is None:
        return {"value": None}
    if not isinstance(source, str):
        return {"error": "NotPlainData", "type": type(source).__name__}
    try:
        return {"value": to_json(run(source, *(_fresh(a) for a in args)))}
    except MetalError as error:
        return {"error": type(error).__name__}
    except Exception as error:
        return {"error": error_name(error)}


def warm_up(spec: ImplementSpec | None, fn: Any) -> None:
    """Does once, before a timed run of cases, the slow first step of a kernel exercise: compiling
    the learner's kernel (a few seconds with a cold build cache). It runs the first visible case
    and ignores its outcome, which the cases report again. Nothing for other exercises."""
    if spec is None or spec.kernel is None:
        return
    first = draw_cases(spec, cases=1)[0]
    outcome_of(fn, first, spec)


def _fresh(value: Any) -> Any:
    # Each call gets its own lists, so a function that changes an argument cannot change a case.
    return json.loads(json.dumps(value))


def outcomes_match(got: Outcome, expected: Outcome) -> bool:
    """True when both raised the same error name, or returned the same value (numbers by value,
    booleans only equal to booleans, lists entry by entry)."""
    if "error" in expected or "error" in got:
        return got.get("error") == expected.get("error")
    return same_answer(got.get("value"), expected.get("value"))


def draw_cases(
    spec: ImplementSpec, seed: int | None = None, cases: int | None = None
) -> list[tuple[Any, ...]]:
    """The cases of one run: ``cases`` (default ``spec.cases``) drawn with ``seed`` (default the
    visible seed). Deterministic for a given seed."""
    count = spec.cases if cases is None else cases
    if count < 1:
        raise CourseError(f"{spec.exercise_id}: a check draws at least 1 case, got {count}")
    rng = random.Random(spec.visible_seed if seed is None else seed)
    return [tuple(case) for case in spec.make_cases(rng, count)]


def _show(outcome: Outcome) -> str:
    if "error" in outcome:
        return f"raises {outcome['error']}"
    return json.dumps(outcome.get("value"))


def case_label(spec: ImplementSpec, args: Sequence[Any]) -> str:
    """``name(arg, ...)`` for one case."""
    return f"{spec.function}({', '.join(json.dumps(a) for a in args)})"


def _size(args: Sequence[Any]) -> tuple[int, int]:
    text = json.dumps(list(args))
    return (sum(ch.isdigit() for ch in text) + text.count(","), len(text))


def _is_strided(value: Any) -> bool:
    """True for one ``[storage, shape, strides, base_offset]`` argument (an einsum operand)."""
    return (
        isinstance(value, list)
        and len(value) == 4
        and all(isinstance(part, list) for part in value[:3])
        and isinstance(value[3], int)
    )


def layout_table(args: Sequence[Any]) -> str:
    """The offset table of a case's input layout (coordinate -> storage offset), when its
    arguments start with ``shape, strides`` (or ``storage, shape, strides``), or one table per
    ``[storage, shape, strides, base_offset]`` argument; else ``""``."""

    operands = [(k, a) for k, a in enumerate(args) if _is_strided(a)]
    if operands:
        tables = [(k, layout_table(a[1:])) for k, a in operands]
        return "\n".join(f"argument {k + 1} {text}" for k, text in tables if text)
    ints = [a for a in args if isinstance(a, list) and all(isinstance(v, int) for v in a)]
    if len(args) >= 2 and isinstance(args[0], list) and isinstance(args[1], list):
        start = 0
    elif len(args) >= 3 and isinstance(args[1], list) and isinstance(args[2], list):
        start = 1
    else:
        return ""
    shape, strides = args[start], args[start + 1]
    if (
        not ints
        or len(shape) != len(strides)
        or not all(isinstance(v, int) for v in shape + strides)
    ):
        return ""
    base = args[start + 2] if len(args) > start + 2 and isinstance(args[start + 2], int) else 0
    bounds = layout.offset_bounds(shape, strides, base)
    low, high = bounds if bounds is not None else (0, 0)
    if low < 0 or layout.element_count(shape) > 24:
        return ""
    walk = (
        list(StridedOffsets(Layout(tuple(shape), tuple(strides), base), high + 1))
        if layout.element_count(shape)
        else []
    )
    coordinates = _coordinates(shape)
    rows = [[format_ints(c), str(o)] for c, o in zip(coordinates, walk)]
    head = f"layout: shape {format_ints(shape)}, strides {format_ints(strides)}, base offset {base}"
    return head + "\n" + (table(("coordinate", "offset"), rows) if rows else "(no values)")


def _coordinates(shape: Sequence[int]) -> list[tuple[int, ...]]:
    result: list[tuple[int, ...]] = [()]
    for size in shape:
        result = [(*c, k) for c in result for k in range(size)]
    return result


def run_spec(
    spec: ImplementSpec,
    fn: Any,
    *,
    seed: int | None = None,
    cases: int | None = None,
    record_attempt: bool = True,
) -> CheckReport:
    """The notebook-side check: runs ``fn`` on every case of the run and compares each outcome
    with the library's. The report lists the smallest failing cases first (with the offset table
    of the input layout), or a few passing examples; "not implemented" when ``fn`` is not a
    function or every case is the stub (``NotImplementedError`` or ``None``). A case that calls
    a function the exercise forbids (``spec.shortcuts``) fails the whole check: the report shows
    the smallest such case and names the call (:func:`shortcut_text`)."""
    if not callable(fn) and not (spec.kernel is not None and isinstance(fn, str)):
        return CheckReport(
            spec.exercise_id, "not implemented", (), f"{spec.function} is not a function yet"
        )
    drawn = draw_cases(spec, seed, cases)
    results = []
    stubbed = 0
    refused: list[tuple[tuple[Any, ...], Outcome]] = []
    for args in drawn:
        got = outcome_of(fn, args, spec)
        if got.get("error") == SHORTCUT:
            refused.append((args, got))
        if refused:  # the verdict is decided: only the smallest refused case is still wanted
            continue
        want = expected_outcome(spec, args)
        if got.get("error") == "NotImplementedError" or got == {"value": None}:
            stubbed += 1
        results.append((args, got, want, outcomes_match(got, want)))
    if refused:
        args, got = min(refused, key=lambda pair: _size(pair[0]))
        return _shortcut_report(spec, args, got, seed, record_attempt)
    if stubbed == len(drawn):
        return CheckReport(
            spec.exercise_id, "not implemented", (), f"{spec.function} still has its stub"
        )
    failures = sorted((r for r in results if not r[3]), key=lambda r: _size(r[0]))
    label = f"seed {spec.visible_seed if seed is None else seed}"
    if failures:
        shown = failures[:SHOWN_FAILURES]
        table_text = layout_table(shown[0][0])
        note = (
            f"{len(failures)} of {len(drawn)} random cases ({label}) wrong; the smallest first"
            + (f"\n{table_text}" if table_text else "")
        )
        status = "failed"
    else:
        shown = sorted(results, key=lambda r: _size(r[0]))[:3]
        note = f"all {len(drawn)} random cases ({label}) right; the smallest shown"
        status = "passed"
    rows = tuple(CaseResult(case_label(spec, a), _show(w), _show(g), ok) for a, g, w, ok in shown)
    report = CheckReport(spec.exercise_id, status, rows, note)  # type: ignore[arg-type]
    if not record_attempt:
        return report
    from dataclasses import replace

    write(
        spec.exercise_id,
        {"random cases": not failures},
        answers={"random cases": f"{len(drawn) - len(failures)} of {len(drawn)} right ({label})"},
    )
    return replace(report, recorded=True)


def shortcut_text(spec: ImplementSpec, outcome: Outcome) -> str:
    """The teaching message of a ``Shortcut`` outcome (shared by the notebook's report and the
    grader's): the library function called, that the exercise asks for it to be written, and
    what to use instead."""
    instead = spec.shortcuts.instead if spec.shortcuts is not None else ""
    target = str(outcome.get("shortcut", "?"))
    return shortcut_message(spec.function, target, str(outcome.get("via", target)), instead)


def _shortcut_report(
    spec: ImplementSpec, args: Sequence[Any], got: Outcome, seed: int | None, record_attempt: bool
) -> CheckReport:
    # One refused call decides; the smallest case that made one is shown. The expected column
    # stays hidden, as the answer is not what this report is about.
    label = f"seed {spec.visible_seed if seed is None else seed}"
    row = CaseResult(case_label(spec, args), "(your own code)", f"calls {got.get('via')}", False)
    note = f"{shortcut_text(spec, got)} (checked on random cases, {label})"
    report = CheckReport(spec.exercise_id, "failed", (row,), note)
    if not record_attempt:
        return report
    from dataclasses import replace

    write(
        spec.exercise_id,
        {"random cases": False},
        answers={"random cases": f"calls {got.get('shortcut')}"},
    )
    return replace(report, recorded=True)


# --------------------------------------------------------------------------------------------
# Case generators: random layouts, the library as reference
# --------------------------------------------------------------------------------------------


def _shape(
    rng: random.Random, *, low: int = 1, high: int = 4, rank: tuple[int, int] = (0, 4)
) -> list[int]:
    return [rng.randint(low, high) for _ in range(rng.randint(*rank))]


def _row_major(shape: Sequence[int]) -> list[int]:
    return list(layout.row_major_strides(tuple(shape)))


def _view_layout(
    rng: random.Random, *, negative: bool = False
) -> tuple[list[int], list[int], int, int]:
    """A random valid view layout made by the library's own operations (permute, slice, step,
    flip) from a row-major owner: ``(shape, strides, base_offset, storage_len)``."""
    shape = _shape(rng, rank=(1, 4))
    owner_len = layout.element_count(shape)
    strides = _row_major(shape)
    base = 0
    for _ in range(rng.randint(0, 3)):
        choice = rng.random()
        axis = rng.randrange(len(shape))
        if choice < 0.35:
            axes = list(range(len(shape)))
            rng.shuffle(axes)
            shape_t, strides_t = layout.permute_layout(shape, strides, axes)
            shape, strides = list(shape_t), list(strides_t)
        elif choice < 0.8 and shape[axis] > 1:
            start = rng.randrange(shape[axis])
            stop = rng.randint(start + 1, shape[axis])
            step = rng.choice((1, 1, 2))
            shape_t, strides_t, base = layout.slice_layout(
                shape, strides, base, axis, start, stop, step
            )
            shape, strides = list(shape_t), list(strides_t)
        elif negative:
            strides_t, base = layout.flip_layout(shape, strides, base, axis)
            strides = list(strides_t)
    return shape, strides, base, owner_len


def _storage(rng: random.Random, count: int) -> list[int]:
    return [rng.randint(1, 9) * 10 + k % 10 for k in range(count)]


def _strides_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([],), ([2, 0, 3],)]
    while len(cases) < n:
        cases.append((_shape(rng, low=0 if rng.random() < 0.15 else 1, high=9, rank=(0, 5)),))
    return cases[:n]


def _flat_index_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    while len(cases) < n:
        shape = _shape(rng, high=6, rank=(0, 4))
        coordinate = [rng.randrange(size) for size in shape]
        roll = rng.random()
        if roll < 0.15 and shape:
            axis = rng.randrange(len(shape))
            coordinate[axis] = shape[axis] + rng.randint(0, 2)
        elif roll < 0.22 and shape:
            coordinate[rng.randrange(len(shape))] = -rng.randint(1, 3)
        elif roll < 0.3:
            coordinate = coordinate[:-1] if coordinate else [0]
        cases.append((shape, coordinate))
    return cases


def _flat_index(shape: list[int], coordinate: list[int]) -> int:
    return layout.storage_offset(shape, _row_major(shape), 0, coordinate)


def _contiguous_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], []), ([2, 0, 3], [7, 1, 5]), ([1, 4], [99, 1])]
    while len(cases) < n:
        shape = _shape(rng, low=0 if rng.random() < 0.1 else 1, high=4, rank=(1, 4))
        strides = _row_major(shape)
        roll = rng.random()
        axis = rng.randrange(len(shape))
        if roll < 0.25:
            strides[axis] = rng.randint(1, 30)  # a size-1 axis may carry any stride
        elif roll < 0.45 and len(shape) > 1:
            other = rng.randrange(len(shape))
            shape[axis], shape[other] = shape[other], shape[axis]
        elif roll < 0.6:
            strides[axis] *= 2
        elif roll < 0.7:
            strides[axis] = -strides[axis]
        cases.append((shape, strides))
    return cases


def _permute_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    while len(cases) < n:
        shape, strides, _, _ = _view_layout(rng)
        axes = list(range(len(shape)))
        rng.shuffle(axes)
        roll = rng.random()
        if roll < 0.08 and len(axes) > 1:
            axes[0] = axes[1]  # a duplicate axis
        elif roll < 0.14:
            axes = axes[:-1]  # too few axes
        elif roll < 0.2:
            axes[rng.randrange(len(axes))] = len(axes) + rng.randint(0, 2)  # out of range
        cases.append((shape, strides, axes))
    return cases


def _permute(shape: list[int], strides: list[int], axes: list[int]) -> Any:
    try:
        checked = layout.check_permutation(axes, len(shape))
    except TensorError as error:
        raise ValueError(str(error)) from None  # the exercise asks for ValueError
    return [list(part) for part in layout.permute_layout(shape, strides, checked)]


def _offsets_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [], 3), ([2, 0, 3], [3, 3, 1], 0)]
    while len(cases) < n:
        shape, strides, base, _ = _view_layout(rng, negative=True)
        cases.append((shape, strides, base))
    return cases


def _offsets(shape: list[int], strides: list[int], base: int) -> list[int]:
    bounds = layout.offset_bounds(shape, strides, base)
    if bounds is None:  # no values
        return []
    return list(StridedOffsets(Layout(tuple(shape), tuple(strides), base), bounds[1] + 1))


def _slice_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    while len(cases) < n:
        shape, strides, base, _ = _view_layout(rng)
        axis = rng.randrange(len(shape))
        start = rng.randint(0, shape[axis])
        stop = rng.randint(start, shape[axis])
        roll = rng.random()
        if roll < 0.1:
            stop = shape[axis] + rng.randint(1, 3)  # past the end
        elif roll < 0.18 and start > 0:
            start, stop = stop + 1, start  # start after stop
        cases.append((shape, strides, base, axis, start, stop))
    return cases


def _slice(
    shape: list[int], strides: list[int], base: int, axis: int, start: int, stop: int
) -> Any:
    try:
        new_shape, new_strides, new_base = layout.slice_layout(
            shape, strides, base, axis, start, stop
        )
    except TensorError as error:
        raise ValueError(str(error)) from None  # the exercise asks for ValueError
    return [list(new_shape), list(new_strides), new_base]


def _transpose_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [0, 3])]
    while len(cases) < n:
        shape = [rng.randint(1, 5), rng.randint(1, 5)]
        cases.append((_storage(rng, shape[0] * shape[1]), shape))
    return cases


def _transpose(values: list[int], shape: list[int]) -> list[Any]:
    owner = Tensor.from_vec(shape, values)
    return [to_json(v) for v in copying_transpose(owner).as_slice().tolist()]


def _strided_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    while len(cases) < n:
        shape, strides, base, owner_len = _view_layout(rng, negative=True)
        cases.append((_storage(rng, owner_len), shape, strides, base))
    return cases


def _view_of(storage: list[int], shape: list[int], strides: list[int], base: int) -> TensorView:
    owner = Tensor.from_vec([len(storage)], storage)
    return as_strided(owner, shape, strides, base)


def _materialize(storage: list[int], shape: list[int], strides: list[int], base: int) -> list[Any]:
    return [
        to_json(v)
        for v in _view_of(storage, shape, strides, base).materialize().as_slice().tolist()
    ]


def _flatten_reference(storage: list[int], shape: list[int], strides: list[int], base: int) -> Any:
    values = _materialize(storage, shape, strides, base)
    return {"shape": [len(values)], "values": values, "new_owner": True}


def _flatten_prepare(
    storage: list[int], shape: list[int], strides: list[int], base: int
) -> tuple[Any, ...]:
    return (_view_of(storage, shape, strides, base),)


def _flatten_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    source: TensorView = call_args[0]
    if not isinstance(result, (Tensor, TensorView)):
        return {"not a tensor": type(result).__name__}
    owner = result if isinstance(result, Tensor) else result.owner
    view = result.view() if isinstance(result, Tensor) else result
    return {
        "shape": list(view.shape),
        "values": [to_json(v) for v in view.materialize().as_slice().tolist()],
        "new_owner": owner is not source.owner,
    }


def _reshape_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    while len(cases) < n:
        shape, strides, _, _ = _view_layout(rng)
        count = layout.element_count(shape)
        new_shape = _factorize(rng, count)
        if rng.random() < 0.08:
            new_shape = [*new_shape, 2]  # a count mismatch
        cases.append((shape, strides, new_shape))
    return cases


def _factorize(rng: random.Random, count: int) -> list[int]:
    factors = []
    rest = count
    while rest > 1:
        divisors = [d for d in range(2, rest + 1) if rest % d == 0]
        d = rng.choice(divisors)
        factors.append(d)
        rest //= d
    rng.shuffle(factors)
    grouped: list[int] = []
    for f in factors:
        if grouped and rng.random() < 0.4:
            grouped[-1] *= f
        else:
            grouped.append(f)
    if rng.random() < 0.2:
        grouped.insert(rng.randint(0, len(grouped)), 1)
    return grouped


def _can_reshape(shape: list[int], strides: list[int], new_shape: list[int]) -> bool:

    try:
        layout.plan_reshape(shape, strides, new_shape)
    except NonContiguousReshapeError:
        return False
    return True


def _merge_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = []
    while len(cases) < n:
        shape, strides, _, _ = _view_layout(rng)
        # Size-1 axes may carry any stride, so their strides are not a fair thing to compare.
        if len(shape) < 2 or 1 in shape:
            continue
        start = rng.randrange(len(shape) - 1)
        end = rng.randint(start + 1, len(shape) - 1)
        cases.append((shape, strides, start, end))
    return cases


def _merge(shape: list[int], strides: list[int], start: int, end: int) -> Any:
    merged = (*shape[:start], layout.element_count(shape[start : end + 1]), *shape[end + 1 :])
    new_shape, new_strides = layout.plan_reshape(shape, strides, merged)
    return [list(new_shape), list(new_strides)]


# Chapter 4: broadcasting and a stable softmax ------------------------------------------------


def _broadcast_shape_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [2, 3]), ([0], [1]), ([0], [2])]
    while len(cases) < n:
        out = _shape(rng, low=0 if rng.random() < 0.1 else 1, high=4, rank=(0, 4))
        a, b = (
            [size if rng.random() < 0.6 else 1 for size in out[rng.randint(0, len(out)) :]]
            for _ in range(2)
        )
        common = min(len(a), len(b))
        if common and rng.random() < 0.25:  # sizes that are neither equal nor 1
            k = rng.randint(1, common)
            a[-k] = rng.randint(2, 5)
            b[-k] = rng.choice([v for v in range(0, 6) if v not in (1, a[-k])])
        case = (a, b) if rng.random() < 0.5 else (b, a)
        if case not in cases:
            cases.append(case)
    return cases


def _broadcast_shape(a: list[int], b: list[int]) -> list[int]:
    return list(layout.broadcast_shapes(a, b))  # BroadcastError is a ValueError


def _broadcast_strides_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([], [], []), ([3], [1], [2, 3]), ([2, 1], [1, 1], [2, 3])]
    while len(cases) < n:
        shape = [rng.choice((1, 1, 2, 3, 4)) for _ in range(rng.randint(0, 3))]
        if shape and rng.random() < 0.05:
            shape[rng.randrange(len(shape))] = 0
        strides = [rng.randint(-6, 6) for _ in shape]
        target = [rng.randint(0, 4) for _ in range(rng.choice((0, 0, 1, 2)))]
        target += [rng.randint(0, 4) if size == 1 else size for size in shape]
        roll = rng.random()
        grown = [k for k, size in enumerate(shape) if size != 1]
        if roll < 0.15 and grown:  # an axis of size other than 1 asked to change size
            k = rng.choice(grown)
            target[len(target) - len(shape) + k] = shape[k] + rng.randint(1, 3)
        elif roll < 0.22 and shape:  # fewer target axes than source axes
            target = target[len(target) - len(shape) + 1 :]
        if (shape, strides, target) not in cases:
            cases.append((shape, strides, target))
    return cases


def _broadcast_strides(shape: list[int], strides: list[int], target: list[int]) -> list[int]:
    return list(layout.broadcast_layout(shape, strides, target)[1])


def _softmax_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [([[1.0, 2.0, 3.0]],), ([[1000.0, 1001.0, 1002.0]],), ([[]],)]
    while len(cases) < n:
        rows, cols = rng.randint(1, 4), rng.randint(1, 5)
        roll = rng.random()
        if roll < 0.2:
            low, high = 700.0, 1000.0  # exp overflows: the direct formula gives inf / inf
        elif roll < 0.33:
            low, high = -1000.0, -700.0  # exp underflows to 0: the direct formula gives 0 / 0
        else:
            low, high = -5.0, 5.0
        cases.append(
            ([[round(rng.uniform(low, high), 2) for _ in range(cols)] for _ in range(rows)],)
        )
    return cases


def _softmax_reference(rows: list[list[float]]) -> Any:
    """Row softmax in NumPy, the stable way (the maximum subtracted first)."""
    import numpy as np

    x = np.array(rows, dtype=np.float64).reshape(len(rows), -1 if rows and rows[0] else 0)
    if x.shape[1] == 0:
        raise ValueError("a row with no values has no maximum")
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).tolist()


def _softmax_prepare(rows: list[list[float]]) -> tuple[Any, ...]:
    cols = len(rows[0]) if rows else 0
    return (Tensor.from_vec([len(rows), cols], [v for row in rows for v in row]),)


#: Relative tolerance of a softmax value: float64 rounding differs with the order of operations.
SOFTMAX_RTOL = 1e-6


def _softmax_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    """The learner's result as nested lists, each value within :data:`SOFTMAX_RTOL` of the
    reference read as the reference's (so an exact comparison tolerates rounding, and a wrong
    value is shown as it is)."""
    import math

    if not isinstance(result, (Tensor, TensorView)):
        return {"not a tensor": type(result).__name__}
    source: Tensor = call_args[0]
    view = result.view() if isinstance(result, Tensor) else result
    if list(view.shape) != list(source.shape):
        return {"shape": list(view.shape)}
    try:
        want = _softmax_reference(source.tolist())
    except ValueError:  # the reference refuses (an empty row): the values stay as they are
        return view.tolist()

    def snap(got: Any, expected: Any) -> Any:
        if isinstance(got, list):
            return [snap(g, e) for g, e in zip(got, expected)]
        close = math.isclose(float(got), expected, rel_tol=SOFTMAX_RTOL, abs_tol=1e-12)
        return expected if close else float(got)

    return snap(view.tolist(), want)


def _spec(
    exercise_id: str, function: str, make: Any, reference: Any, parameters: str, **kw: Any
) -> ImplementSpec:
    return ImplementSpec(
        exercise_id, function, make, reference, parameters=tuple(parameters.split()), **kw
    )


# What each exercise's answer may not call (see :mod:`.shortcuts`): the library function that
# computes its answer. Calls count at any depth, so one function stands for every public door to
# it (``Tensor.zeros(shape).strides`` reaches ``row_major_strides``).
_LAYOUT = "llmfs.tensor.layout."
#: The library's three ways of reading strided storage (the offset cursor, the copy and the one
#: constructor of every NumPy array over a view's storage, behind ``numpy_view``, ``to_numpy``,
#: ``tolist`` and ``np.asarray(view)``), and NumPy's own.
_STRIDED_READERS = (
    "llmfs.tensor.traversal.StridedOffsets",
    "llmfs.tensor.view.ViewMethods.materialize",
    "llmfs.tensor.strided._as_strided",
    "numpy.lib.stride_tricks.as_strided",
)


def _forbid(*names: str, instead: str) -> Shortcuts:
    return Shortcuts(tuple(_LAYOUT + n[1:] if n.startswith(".") else n for n in names), instead)


#: Exercise id -> its specification (the grader draws its own seeds). Chapters whose checks live
#: in their own module (:mod:`llmfs.course.exercise_checks.attention`) add their specs to it when
#: the package is imported.
SPECS: dict[str, ImplementSpec] = {
    spec.exercise_id: spec
    for spec in (
        _spec(
            "ch01.compute_strides",
            "compute_strides",
            _strides_cases,
            lambda s: _row_major(s),
            "shape",
            shortcuts=_forbid(".row_major_strides", instead="a loop over the axes, last to first"),
        ),
        _spec(
            "ch01.flat_index",
            "flat_index",
            _flat_index_cases,
            _flat_index,
            "shape coordinate",
            shortcuts=_forbid(
                ".storage_offset", instead="your compute_strides and a sum of index * stride"
            ),
        ),
        _spec(
            "ch01.is_contiguous",
            "is_contiguous",
            _contiguous_cases,
            layout.is_contiguous,
            "shape strides",
            # A Layout (behind view.is_contiguous()) answers without the module function.
            shortcuts=_forbid(
                ".is_contiguous",
                ".Layout.is_contiguous",
                instead="a loop comparing each stride with the row-major one",
            ),
        ),
        _spec(
            "ch02.copying_transpose",
            "copying_transpose",
            _transpose_cases,
            _transpose,
            "values shape",
            shortcuts=_forbid(
                "llmfs.tensor.view.copying_transpose",
                *_STRIDED_READERS,
                instead="two loops over the plain list of values",
            ),
        ),
        _spec(
            "ch02.permute_layout",
            "permute_layout",
            _permute_cases,
            _permute,
            "shape strides axes",
            shortcuts=_forbid(".permute_layout", instead="list indexing with axes"),
        ),
        _spec(
            "ch02.logical_offsets",
            "logical_offsets",
            _offsets_cases,
            _offsets,
            "shape strides base_offset",
            shortcuts=_forbid(
                *_STRIDED_READERS, instead="a coordinate you step and carry yourself"
            ),
        ),
        _spec(
            "ch02.slice_layout",
            "slice_layout",
            _slice_cases,
            _slice,
            "shape strides base_offset axis start stop",
            shortcuts=_forbid(".slice_layout", instead="plain list arithmetic on the layout"),
        ),
        _spec(
            "ch02.q5_fix",
            "flatten_copy",
            _strided_cases,
            _flatten_reference,
            "view",
            cases=40,
            prepare=_flatten_prepare,
            summarize=_flatten_summary,
        ),
        _spec(
            "ch02.materialize",
            "materialize",
            _strided_cases,
            _materialize,
            "storage shape strides base_offset",
            shortcuts=_forbid(*_STRIDED_READERS, instead="your logical_offsets and the list"),
        ),
        _spec(
            "ch03.can_reshape",
            "can_reshape_without_copy",
            _reshape_cases,
            _can_reshape,
            "shape strides new_shape",
            shortcuts=_forbid(
                ".plan_reshape", instead="runs of axes compared by their sizes and strides"
            ),
        ),
        _spec(
            "ch03.merge_layout",
            "merge_layout",
            _merge_cases,
            _merge,
            "shape strides start end",
            shortcuts=_forbid(".plan_reshape", instead="a stride check of neighbouring axes"),
        ),
        _spec(
            "ch04.broadcast_shape",
            "broadcast_shape",
            _broadcast_shape_cases,
            _broadcast_shape,
            "a b",
            shortcuts=_forbid(
                ".broadcast_shapes",
                "numpy.broadcast_shapes",
                instead="the two shapes padded on the left and compared axis by axis",
            ),
        ),
        _spec(
            "ch04.broadcast_strides",
            "broadcast_strides",
            _broadcast_strides_cases,
            _broadcast_strides,
            "shape strides target",
            shortcuts=_forbid(
                ".broadcast_layout", instead="the shape aligned with the end of the target"
            ),
        ),
        _spec(
            "ch04.softmax",
            "softmax_rows",
            _softmax_cases,
            _softmax_reference,
            "x",
            prepare=_softmax_prepare,
            summarize=_softmax_summary,
            shortcuts=_forbid(
                "llmfs.gpt.tensor_model.softmax",
                "llmfs.gpt.reference.softmax",
                instead="ops.max, ops.exp and ops.sum",
            ),
        ),
        _spec(
            "ch06.naive_einsum",
            "naive_einsum",
            naive_einsum_cases,
            naive_einsum_reference,
            "expression x y",
            shortcuts=_forbid(
                "llmfs.tensor.ops.einsum",
                "llmfs.tensor.einsum.plan.EinsumPlan",
                "llmfs.tensor.einsum.contraction.ContractionPlan",
                "numpy.einsum",
                instead="loops over the output's and the summed labels' coordinates",
            ),
        ),
    )
}


def spec_for(exercise_id: str) -> ImplementSpec:
    """The spec of ``exercise_id``; :class:`CourseError` naming the known ids otherwise."""
    try:
        return SPECS[exercise_id]
    except KeyError:
        raise CourseError(
            f"no implement spec for {exercise_id!r} (specs exist for {', '.join(sorted(SPECS))})"
        ) from None


__all__ = [
    "ERROR_NAMES",
    "SHORTCUT",
    "SPECS",
    "ImplementSpec",
    "Outcome",
    "draw_cases",
    "error_name",
    "expected_outcome",
    "layout_table",
    "outcome_of",
    "outcomes_match",
    "run_spec",
    "shortcut_text",
    "spec_for",
    "to_json",
    "warm_up",
]
