"""Implement exercises as specifications: random cases, the library's answer, plain-JSON outcomes.

An :class:`ImplementSpec` says how to draw cases for one exercise (``make_cases(rng, n)``, every
argument JSON data), what the library answers for one case (``reference``), and how many cases a
run draws. The notebook's check runs the learner's function on the cases of ``visible_seed``; the
grader draws its own with other seeds, so a table of the visible cases cannot pass.

Every chapter registers its exercises the same way: its module (beside this one, one per chapter)
builds each spec next to its case generator and answer, and :func:`register` adds it to
:data:`SPECS` and returns the notebook's check function, also listed in :data:`CHECKS`. The
package's ``__init__`` imports every chapter module, so both registries are complete once
:mod:`llmfs.course.exercise_checks` is imported (importing this module imports the package first).

Outcomes are plain JSON (``{"value": ...}`` or ``{"error": "ValueError"}``), so a grader can run a
learner's function in another process on its own arguments (:func:`outcome_of`), send the outcomes
back as JSON and compare them there (:func:`outcomes_match` with :func:`expected_outcome`).

A case whose run called a function the exercise forbids (the spec's ``shortcuts``, see
:mod:`~llmfs.course.exercise_checks.shortcuts`) has the outcome ``{"error": "Shortcut",
"shortcut": <the listed function>, "via": <what the learner's code called>}``; it never matches,
and :func:`shortcut_text` turns it into the report's message.

An error outcome names the learner-facing class: the first of :data:`ERROR_NAMES` that the raised
class derives from (so a library ``IndexOutOfBoundsError``, an ``IndexError``, reads
``IndexError``), else the class's own name. The notebook's report shows more than the outcome: the
class actually raised and its message (:func:`~llmfs.course.exercise_checks.report.error_text`).
"""

from __future__ import annotations

import json
import random
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from llmfs.course import CourseError
from llmfs.course.attempts import record_attempt as write
from llmfs.course.exercise_checks.cases import json_size
from llmfs.course.exercise_checks.outcomes import (
    ERROR_NAMES,
    SHORTCUT,
    Outcome,
    Run,
    error_name,
    to_json,
)
from llmfs.course.exercise_checks.report import (
    CELL_MESSAGE_LIMIT,
    MESSAGE_LIMIT,
    CaseResult,
    CheckReport,
    Status,
    as_typed,
    offset_tables,
    show_outcome,
)
from llmfs.course.exercise_checks.shortcuts import Shortcuts, call_guarded, shortcut_message
from llmfs.course.exercises.compare import same_answer
from llmfs.course.exercises.verdict import Verdict, judge_implement, write_verdict
from llmfs.course.manifest import load_manifest
from llmfs.tensor import TensorError, TensorView

#: Distinct cases a report shows (the smallest first): failing ones, or passing ones when all pass.
SHOWN_CASES = 3


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
    #: How big a case is, for showing the smallest first: ``size(*args)`` gives a tuple compared
    #: in order (the number of values the case is about, then its rank); default
    #: :func:`json_size`, the count of numbers in the arguments.
    size: Callable[..., tuple[int, ...]] | None = None
    #: Layout exercises: the views a case's arguments describe, ``views(*args) -> [(name,
    #: view), ...]``, drawn as offset tables under the smallest failing case. A case whose
    #: layout is not a valid view (one the exercise must refuse) raises ``TensorError``: no table.
    views: Callable[..., Sequence[tuple[str, TensorView]]] | None = None
    #: The rule a wrong answer breaks, for the cases where the exercise knows one:
    #: ``explain(got, want, *args)`` (the two outcomes' values) returns a sentence naming the rule
    #: (never the expected values), or ``None``. The report adds it under the smallest failing
    #: case it explains.
    explain: Callable[..., str | None] | None = None
    #: Kernel exercises: ``kernel_shortcut(source)`` names the library kernel a learner's MSL
    #: copies (its text), or ``None``; such a source is a shortcut, refused like a call of one
    #: of ``shortcuts`` (which, for a kernel exercise, are guarded while the learner's
    #: function builds the source).
    kernel_shortcut: Callable[[str], str | None] | None = None

    # What the one implement verdict (:func:`~llmfs.course.exercises.verdict.judge_implement`)
    # asks of a spec, so the verdict module needs no import of the checks.
    def order(self, args: Sequence[Any]) -> tuple[Any, ...]:
        """The sort key of a case, smallest first (:func:`case_order`)."""
        return case_order(self, args)

    def expected(self, args: Sequence[Any]) -> Outcome:
        """The library's outcome for one case (:func:`expected_outcome`)."""
        return expected_outcome(self, args)

    def matches(self, got: Outcome, want: Outcome) -> bool:
        """True when ``got`` is the library's ``want`` (:func:`outcomes_match`)."""
        return outcomes_match(got, want)

    def refusal(self, outcome: Outcome) -> str | None:
        """The teaching message of a case that called a forbidden function
        (:func:`shortcut_text`), or None for any other outcome."""
        return shortcut_text(self, outcome) if outcome.get("error") == SHORTCUT else None


def expected_outcome(spec: ImplementSpec, args: Sequence[Any]) -> Outcome:
    """The library's outcome for one case: ``{"value": ...}`` or ``{"error": name}``."""
    return expected_run(spec, args).outcome


def expected_run(spec: ImplementSpec, args: Sequence[Any]) -> Run:
    """The library's answer for one case, with the exception it raised (see :class:`Run`)."""
    try:
        return Run({"value": to_json(spec.reference(*args))})
    except (TensorError, ValueError, IndexError) as error:
        return Run({"error": error_name(error)}, error)


def outcome_of(
    fn: Callable[..., Any], args: Sequence[Any], spec: ImplementSpec | None = None
) -> Outcome:
    """Runs a learner's function on one case (with ``spec``'s ``prepare``/``summarize``) and
    returns its outcome. ``NotImplementedError`` and a ``None`` result read
    ``{"error": "NotImplementedError"}`` / ``{"value": None}``; any exception is an outcome, never
    a traceback; a result that is not plain data is ``{"error": "NotPlainData"}``."""
    return run_case(fn, args, spec).outcome


def run_case(fn: Callable[..., Any], args: Sequence[Any], spec: ImplementSpec | None = None) -> Run:
    """:func:`outcome_of` with the exception the learner's function raised (see :class:`Run`)."""
    if spec is not None and spec.kernel is not None:
        return _kernel_run(fn, args, spec)
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
        return Run(
            {"error": SHORTCUT, "shortcut": guarded.shortcut.target, "via": guarded.shortcut.entry}
        )
    if guarded.error is not None:
        return Run({"error": error_name(guarded.error)}, guarded.error)
    result = guarded.result
    try:
        if spec is not None and spec.summarize is not None:
            return Run({"value": to_json(spec.summarize(result, call_args))})
        return Run({"value": to_json(result)})
    except CourseError:
        return Run({"error": "NotPlainData", "type": type(result).__name__})


def _kernel_run(fn: Any, args: Sequence[Any], spec: ImplementSpec) -> Run:
    # A kernel error keeps its own class name (KernelMemoryError, KernelCompileError, ...):
    # "ValueError" would hide what went wrong.
    from llmfs.tensor.backends.metal.errors import MetalError

    run = spec.kernel
    assert run is not None
    if isinstance(fn, str):
        source: Any = fn
    else:
        guarded = call_guarded(spec.shortcuts, fn)
        if guarded.shortcut is not None:
            return Run(
                {
                    "error": SHORTCUT,
                    "shortcut": guarded.shortcut.target,
                    "via": guarded.shortcut.entry,
                }
            )
        if guarded.error is not None:
            return Run({"error": error_name(guarded.error)}, guarded.error)
        source = guarded.result
    if source is None:
        return Run({"value": None})
    if not isinstance(source, str):
        return Run({"error": "NotPlainData", "type": type(source).__name__})
    copied = spec.kernel_shortcut(source) if spec.kernel_shortcut is not None else None
    if copied is not None:
        return Run({"error": SHORTCUT, "shortcut": copied, "via": "its MSL text"})
    try:
        return Run({"value": to_json(run(source, *(_fresh(a) for a in args)))})
    except MetalError as error:
        return Run({"error": type(error).__name__}, error)
    except Exception as error:
        return Run({"error": error_name(error)}, error)


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


def case_order(spec: ImplementSpec, args: Sequence[Any]) -> tuple[Any, ...]:
    """The sort key of a case, smallest first: the spec's :attr:`~ImplementSpec.size`, then the
    length of its JSON text and the text itself (so the order is total and deterministic)."""
    size = spec.size(*args) if spec.size is not None else json_size(*args)
    text = json.dumps(list(args))
    return (*size, len(text), text)


def case_label(spec: ImplementSpec, args: Sequence[Any]) -> str:
    """``name(arg, ...)`` for one case, each argument as the learner would type it
    (:func:`~.report.as_typed`: ``train_bpe("🙂", 0)``)."""
    return f"{spec.function}({', '.join(as_typed(a) for a in args)})"


def show_run(run: Run, *, expected: bool, limit: int = CELL_MESSAGE_LIMIT) -> str:
    """A run as the report shows it (:func:`~.report.show_outcome`)."""
    return show_outcome(run.outcome, run.error, expected=expected, limit=limit)


@dataclass(frozen=True)
class _Case:
    args: tuple[Any, ...]
    got: Run
    want: Run

    @property
    def ok(self) -> bool:
        return outcomes_match(self.got.outcome, self.want.outcome)


def _smallest_distinct(
    spec: ImplementSpec,
    cases: Sequence[_Case],
    key: Callable[[_Case], str],
    count: int = SHOWN_CASES,
) -> list[_Case]:
    # The smallest case of each distinct ``key``, smallest first: a random draw may repeat a
    # case (the scalar shape [] comes up often), and it is shown once.
    distinct: dict[str, _Case] = {}
    for case in sorted(cases, key=lambda c: case_order(spec, c.args)):
        distinct.setdefault(key(case), case)
    return list(distinct.values())[:count]


def _arguments(case: _Case) -> str:
    return json.dumps(list(case.args))


def _answer_form(case: _Case) -> str:
    # The kind of answer: numbers read as 0, so [22] and [-12] are one kind and [], [6, 7],
    # true, false and an error are four others.
    def form(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float, list, dict)):
            return value
        if isinstance(value, list):
            return [form(v) for v in value]
        if isinstance(value, dict):
            return {k: form(v) for k, v in value.items()}
        return 0

    return json.dumps(form(case.want.outcome))


def _smallest_failure(spec: ImplementSpec, case: _Case) -> str:
    # The smallest failing case in full: an error's whole message (a table cell shows its
    # start), then the offset tables of the layout it reads.
    lines = [f"smallest failing case: {case_label(spec, case.args)}"]
    if "error" in case.want.outcome or "error" in case.got.outcome:
        lines.append(f"  expected: {show_run(case.want, expected=True, limit=MESSAGE_LIMIT)}")
        lines.append(f"  got:      {show_run(case.got, expected=False, limit=MESSAGE_LIMIT)}")
    tables = case_views(spec, case.args)
    if tables:
        lines.append(f"its input, as an offset table:\n{tables}")
    # Without an error or a layout to show, the first row of the table already says it all.
    return "\n".join(lines) if len(lines) > 1 else ""


def _explanation(spec: ImplementSpec, failures: Sequence[_Case]) -> str:
    # The rule the smallest explained failure breaks (a case whose got or wanted outcome is an
    # error has a value to explain on neither side).
    if spec.explain is None:
        return ""
    for case in sorted(failures, key=lambda c: case_order(spec, c.args)):
        got, want = case.got.outcome, case.want.outcome
        if "value" in got and "value" in want:
            why = spec.explain(got["value"], want["value"], *case.args)
            if why:
                # Wrapped: a notebook's output area is narrower than the sentence.
                return textwrap.fill(f"why {case_label(spec, case.args)} is wrong: {why}", 88)
    return ""


def case_views(spec: ImplementSpec, args: Sequence[Any]) -> str:
    """The offset tables of the layouts one case describes (its spec's ``views``), or ``""``
    when the spec draws none or the case's layout is not a valid view."""
    if spec.views is None:
        return ""
    try:
        views = spec.views(*args)
    except (ValueError, TypeError, IndexError):  # a layout the exercise must refuse: no offsets
        return ""
    return offset_tables(views)


#: Who is told how far a check has got: each listener is called with (cases run, cases in all),
#: once before the first case and after every case. Only :func:`case_progress` adds one; the
#: verdict never depends on them.
_CASE_LISTENERS: list[Callable[[int, int], None]] = []


@contextmanager
def case_progress(listener: Callable[[int, int], None]) -> Iterator[None]:
    """Inside the block every :func:`run_spec` calls ``listener(done, total)`` before its first
    case (``done`` 0) and after each case, so a notebook can draw a progress bar for a check that
    runs for seconds (one whose first case compiles a kernel, say)."""
    _CASE_LISTENERS.append(listener)
    try:
        yield
    finally:
        _CASE_LISTENERS.remove(listener)


def _tell(done: int, total: int) -> None:
    for listener in tuple(_CASE_LISTENERS):
        listener(done, total)


def run_spec(
    spec: ImplementSpec,
    fn: Any,
    *,
    seed: int | None = None,
    cases: int | None = None,
    record_attempt: bool = True,
) -> CheckReport:
    """The notebook-side check: runs ``fn`` on every case of the run and compares each outcome
    with the library's.

    The report's headline counts every case run ("193 of 200 right"); its table lists up to
    :data:`SHOWN_CASES` distinct cases, the smallest first (:func:`case_order`): the failing
    ones, with the offset tables of the smallest one's input layout (its spec's ``views``), or,
    when all pass, the smallest case of each kind of answer (numbers aside). A learner's
    exception shows its class and message. The report is "not implemented" when ``fn`` is not
    a function or every case is the stub (``NotImplementedError`` or ``None``). A case that
    calls a function the exercise forbids (``spec.shortcuts``) fails the whole check: the report
    shows the smallest such case and names the call (:func:`shortcut_text`)."""
    if not callable(fn) and not (spec.kernel is not None and isinstance(fn, str)):
        return CheckReport(
            spec.exercise_id, "not implemented", (), f"{spec.function} is not a function yet"
        )
    drawn = draw_cases(spec, seed, cases)
    results: list[_Case] = []
    stubbed = 0
    refused: list[tuple[tuple[Any, ...], Outcome]] = []
    outcomes: list[Outcome] = []
    _tell(0, len(drawn))
    for done, args in enumerate(drawn, 1):
        got = run_case(fn, args, spec)
        _tell(done, len(drawn))
        outcomes.append(got.outcome)
        if got.outcome.get("error") == SHORTCUT:
            refused.append((args, got.outcome))
        if refused:  # the verdict is decided: only the smallest refused case is still wanted
            continue
        if got.outcome.get("error") == "NotImplementedError" or got.outcome == {"value": None}:
            stubbed += 1
        results.append(_Case(args, got, expected_run(spec, args)))
    label = f"seed {spec.visible_seed if seed is None else seed}"
    if refused:
        args, outcome = min(refused, key=lambda pair: case_order(spec, pair[0]))
        verdict = judge_implement(spec, _points(spec), drawn, outcomes, which="random")
        report = _shortcut_report(spec, args, outcome, label, len(drawn), record_attempt)
        return _with_verdict(report, verdict, record_attempt)
    if stubbed == len(drawn):
        return CheckReport(
            spec.exercise_id, "not implemented", (), f"{spec.function} still has its stub"
        )
    failures = [case for case in results if not case.ok]
    if failures:
        shown = _smallest_distinct(spec, failures, _arguments)
        smallest = "the smallest" if len(shown) == 1 else f"the {len(shown)} smallest"
        note = f"{len(failures)} of {len(drawn)} random cases ({label}) wrong; {smallest} shown"
        detail = _smallest_failure(spec, shown[0])
        note += f"\n{detail}" if detail else ""
        why = _explanation(spec, failures)
        note += f"\n{why}" if why else ""
    else:
        # The smallest case of each kind of answer (a scalar's, an empty one's, an error): three
        # scalars in a row would show one kind of answer three times.
        shown = _smallest_distinct(spec, results, _answer_form)
        if len(shown) < SHOWN_CASES:  # fewer kinds than rows: the next smallest cases fill up
            more = [c for c in _smallest_distinct(spec, results, _arguments) if c not in shown]
            shown += more[: SHOWN_CASES - len(shown)]
            shown.sort(key=lambda c: case_order(spec, c.args))
        note = f"all {len(drawn)} random cases ({label}) right; the smallest of each kind shown"
    rows = tuple(
        CaseResult(
            case_label(spec, case.args),
            show_run(case.want, expected=True),
            show_run(case.got, expected=False),
            case.ok,
        )
        for case in shown
    )
    right = len(drawn) - len(failures)
    status: Status = "failed" if failures else "passed"
    wants = [case.want.outcome for case in results]
    verdict = judge_implement(spec, _points(spec), drawn, outcomes, which="random", expected=wants)
    report = CheckReport(
        spec.exercise_id, status, rows, note, right=right, total=len(drawn), verdict=verdict
    )
    if not record_attempt:
        return report
    write_verdict(verdict, spec.exercise_id)
    write(
        spec.exercise_id,
        {"random cases": not failures},
        answers={"random cases": f"{right} of {len(drawn)} right ({label})"},
    )
    return replace(report, recorded=True)


def _points(spec: ImplementSpec) -> float:
    # The manifest's points of the exercise (an exercise the manifest lacks, as in a test of a
    # spec alone, counts 1).
    try:
        return float(load_manifest().exercise(spec.exercise_id).points)
    except CourseError:
        return 1.0


def _with_verdict(report: CheckReport, verdict: Verdict, recorded: bool) -> CheckReport:
    if recorded:
        write_verdict(verdict, report.exercise_id)
    return replace(report, verdict=verdict)


def shortcut_text(spec: ImplementSpec, outcome: Outcome) -> str:
    """The teaching message of a ``Shortcut`` outcome (shared by the notebook's report and the
    grader's): the library function called, that the exercise asks for it to be written, and
    what to use instead."""
    instead = spec.shortcuts.instead if spec.shortcuts is not None else ""
    target = str(outcome.get("shortcut", "?"))
    return shortcut_message(spec.function, target, str(outcome.get("via", target)), instead)


def _shortcut_report(
    spec: ImplementSpec,
    args: Sequence[Any],
    got: Outcome,
    label: str,
    total: int,
    record_attempt: bool,
) -> CheckReport:
    # One refused call decides (no case counts, as the grader says); the smallest case that
    # made one is shown. The expected column stays hidden, as the answer is not what this
    # report is about.
    row = CaseResult(case_label(spec, args), "(your own code)", f"calls {got.get('via')}", False)
    note = f"{shortcut_text(spec, got)} (checked on random cases, {label})"
    report = CheckReport(spec.exercise_id, "failed", (row,), note, right=0, total=total)
    if not record_attempt:
        return report
    write(
        spec.exercise_id,
        {"random cases": False},
        answers={"random cases": f"calls {got.get('shortcut')}"},
    )
    return replace(report, recorded=True)


def _changed_report(
    spec: ImplementSpec,
    report: CheckReport,
    why: str,
    record_attempt: bool,
    _report: type[CheckReport] = CheckReport,
    _write: Callable[..., Any] = write,
) -> CheckReport:
    """The failing report of a check that saw its own code changed while it ran (``why``: the
    name that changed), whatever the run itself reported."""
    note = (
        f"{spec.function}: {why} was changed while the check ran; a check that runs on changed "
        f"code proves nothing, so the answer does not count. Restart the kernel and run the "
        f"notebook from the top without code that changes the checks"
    )
    if record_attempt:
        _write(spec.exercise_id, {"random cases": False}, answers={"random cases": "changed"})
    return _report(
        spec.exercise_id, "failed", (), note, right=0, total=report.total, recorded=record_attempt
    )


def seal_checks() -> None:
    """Hands the checks to the sentinel (:mod:`.sentinel`), once every chapter registered its
    specs: the functions every spec refuses are taken in their original form now (those of
    modules not imported yet, the Metal backend's, when first guarded), every spec's reference
    is refused in every window, and the checks' modules are sealed."""
    from llmfs.course.exercise_checks import sentinel, shortcuts

    package = __name__.rsplit(".", 1)[0]
    functions: dict[Any, str] = {}
    for each in SPECS.values():
        if each.shortcuts is None:
            continue
        names = tuple(n for n in each.shortcuts.names if not n.startswith(_LAZY_MODULES))
        if names:
            functions.update(shortcuts.targets_of(Shortcuts(names, each.shortcuts.instead)))
    references = shortcuts.reference_targets(SPECS.values())
    shortcuts._REFERENCES.update(references)
    sentinel.arm(functions)
    sentinel.arm(references, permanent=True)
    chosen = sorted(
        name
        for name in sys.modules
        if name == package or name.startswith(package + ".") or name in _ALSO_SEALED
    )
    modules = [sys.modules[name] for name in chosen]
    classes = [
        value
        for module in modules
        for value in vars(module).values()
        if isinstance(value, type) and value.__module__ == module.__name__
    ]
    sentinel.seal(modules, classes, [shortcuts.call_guarded])


#: Modules whose shortcut targets are taken when first guarded (importing them costs a compiler
#: probe that only kernel checks pay for).
_LAZY_MODULES = ("llmfs.tensor.backends.metal",)
#: Modules outside the package a check's verdict rests on: comparing answers.
_ALSO_SEALED = frozenset({"llmfs.course.exercises.compare"})


# --------------------------------------------------------------------------------------------
# The registry: every chapter module registers its exercises here
# --------------------------------------------------------------------------------------------

#: Exercise id -> its specification (the grader draws its own seeds).
SPECS: dict[str, ImplementSpec] = {}

#: Exercise id -> the notebook's check of it (the grader passes the learner's function).
CHECKS: dict[str, Callable[..., CheckReport]] = {}


def register(
    spec: ImplementSpec, doc: str, *, name: str | None = None
) -> Callable[..., CheckReport]:
    """Adds ``spec`` to :data:`SPECS` and returns its check, ``check_<function>`` (or ``name``),
    also added to :data:`CHECKS`: ``check(fn, *, seed=None, cases=None, record_attempt=True)``
    runs :func:`run_spec`. ``doc`` says what the learner's function must do. Raises
    :class:`CourseError` for an exercise id registered twice (two chapters claiming one id)."""
    if spec.exercise_id in SPECS:
        raise CourseError(f"exercise {spec.exercise_id!r} is registered twice")
    # The check runs on a copy of the spec of its own: SPECS' entry is the one a learner's code
    # can reach, and changing it (its reference, its shortcut list) changes no check.
    private = replace(spec)

    # Its collaborators are default values (a tuple no code can change: the sentinel refuses
    # setting __defaults__ of the checks' functions), and sys.audit among them is the builtin
    # itself: before and after the run the sentinel says whether the checks' code changed and
    # how many windows the checks opened, which no replaced module attribute can hide.
    def check(
        fn: Any,
        seed: int | None = None,
        cases: int | None = None,
        record_attempt: bool = True,
        _audit: Callable[..., None] = sys.audit,
        _run: Callable[..., CheckReport] = run_spec,
        _spec: ImplementSpec = private,
        _refuse: Callable[..., CheckReport] = _changed_report,
    ) -> CheckReport:
        box: list[Any] = []
        _audit("llmfs.sentinel", "begin", box)
        report = _run(_spec, fn, seed=seed, cases=cases, record_attempt=record_attempt)
        _audit("llmfs.sentinel", "end", box)
        opened_before, changed_before, opened_after, changed_after = box
        why = changed_before or changed_after
        if why is None and report.passed and _spec.kernel is None:
            # Every case runs the learner's function in a window the checks open; fewer
            # windows than cases means the checks' own run was bypassed.
            if opened_after - opened_before < report.total:
                why = "the checks' own run (fewer guarded calls than cases)"
        if why is not None:
            return _refuse(_spec, report, why, record_attempt)
        return report

    check.__name__ = check.__qualname__ = name or f"check_{spec.function}"
    check.__doc__ = doc + (
        f"\n\n``seed`` (default {spec.visible_seed}, the notebook's) and ``cases`` (default "
        f"{spec.cases}) choose the random cases; the report counts every case and shows the "
        f"smallest failing ones first."
    )
    SPECS[spec.exercise_id] = spec
    CHECKS[spec.exercise_id] = check
    return check


def spec_for(exercise_id: str) -> ImplementSpec:
    """The spec of ``exercise_id``; :class:`CourseError` naming the known ids otherwise."""
    try:
        return SPECS[exercise_id]
    except KeyError:
        raise CourseError(
            f"no implement spec for {exercise_id!r} (specs exist for {', '.join(sorted(SPECS))})"
        ) from None


__all__ = [
    "CHECKS",
    "ERROR_NAMES",
    "SHORTCUT",
    "SHOWN_CASES",
    "SPECS",
    "ImplementSpec",
    "Outcome",
    "Run",
    "case_label",
    "case_order",
    "case_progress",
    "case_views",
    "draw_cases",
    "error_name",
    "expected_outcome",
    "expected_run",
    "outcome_of",
    "outcomes_match",
    "register",
    "run_case",
    "run_spec",
    "seal_checks",
    "shortcut_text",
    "spec_for",
    "to_json",
    "warm_up",
]
