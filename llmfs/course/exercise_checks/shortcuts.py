"""Shortcut detection: an "implement it" answer may not call the library function it re-implements.

Each :class:`~llmfs.course.exercise_checks.spec.ImplementSpec` names, in its ``shortcuts``, the
library callables its answer must not use (dotted names such as
``"llmfs.tensor.layout.row_major_strides"``) and, briefly, what to use instead. While a learner's
function runs on one case (:func:`call_guarded`, used by ``outcome_of`` in the notebook check and
in the grader's worker process alike), a call of any of them on the checking thread is refused:
the call raises :class:`ShortcutUsed` and the case's outcome names the function (see
:func:`shortcut_message`).

How calls are caught, and why this way:

* Every target resolves to plain Python functions (a class to its ``__init__``, a property to its
  getter, a NumPy dispatcher to its Python implementation). For the duration of the call, each of
  those FUNCTION OBJECTS has its ``__code__`` swapped for a small guard's code (same name, same
  number of free variables), so every reference to the function is caught, however it was bound:
  a module attribute, a name taken with ``from ... import`` before the check started, a method
  looked up on an instance, a value stored in a list. Patching module attributes would miss all
  but the first.
* Nothing else is slowed down: ``sys.settrace`` or ``sys.setprofile`` would also catch every
  call, but they call back into Python on every function call and turn off the interpreter's
  specialisation, which made the chapter 8 checks two to three times slower. A guard costs one
  extra call, and only when a listed function is called.
* A listed call counts at ANY depth while the learner's function runs, through the learner's
  own helpers and through the library alike: ``Tensor.zeros(shape).strides`` reaches
  ``row_major_strides`` inside the library and is refused for ``compute_strides``, so a list
  names the one function that computes the answer, not every public door to it. Each list is
  therefore chosen so that no library helper a chapter's own solution uses reaches it (the tests
  run every solution under its list). While a window is open a listed call is refused on EVERY
  thread, so a helper thread the learner's function starts is no way around it; every call
  outside a window runs the original code unchanged.
* The grader's worker widens the net where only the learner's code runs: :func:`also_refusing`
  adds function objects (the checks' own reference answers) to every window opened meanwhile,
  and :func:`watching` opens a window for chosen threads (all but the worker's own, for as long
  as a learner's module is loaded), so a module-level table or a thread left running between
  cases is refused as well.
* The report names what the learner's code called (its outermost library call, e.g.
  ``llmfs.tensor.view.ViewMethods.tolist``) and the listed function reached through it, never an
  answer value.

The guard raises a ``BaseException`` so that ``except Exception`` in the learner's code does not
swallow it, and the first refusal is remembered even if the learner's code catches everything.
Functions written in C (NumPy's ufuncs, ``ndarray`` methods) have no code to swap and cannot be
listed (:func:`resolve` refuses them); nor can a call be seen behind a cache written in C (an
``lru_cache`` in front of a listed function answers without calling it), so a list names the
function in front of any cache, and the tests try every public door to each listed function. The
rule is about calling the library, not about deliberate evasion: code that copies a function's
code object into a new function before the check starts is not seen.
"""

from __future__ import annotations

import importlib
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from llmfs.course import CourseError
from llmfs.tensor import dispatch

#: Module name prefixes of the library a learner might call (the course's checking tools are not
#: among them: a learner's function never calls them, the check calls the learner's function).
LIBRARY_PREFIXES: tuple[str, ...] = ("llmfs.", "numpy.")
_TOOLING_PREFIX = "llmfs.course."


@dataclass(frozen=True)
class Shortcuts:
    """The library callables an implement exercise's answer must not use.

    ``names``: dotted names (module path, then attributes), each resolving to Python functions
    (:func:`resolve`). ``instead``: what the learner uses instead, in a few words (it is shown in
    the report, so it never states an answer value).
    """

    names: tuple[str, ...]
    instead: str


@dataclass(frozen=True)
class ShortcutCall:
    """One refused call: the listed function (``target``) and what the learner's code called to
    reach it (``entry``; equal to ``target`` when called directly)."""

    target: str
    entry: str


class ShortcutUsed(BaseException):
    """Raised inside a guarded function called during a check. A ``BaseException``, so that a
    learner's ``except Exception`` does not hide it."""

    def __init__(self, call: ShortcutCall) -> None:
        super().__init__(f"{call.entry} reaches {call.target}")
        self.call = call


def shortcut_message(function: str, target: str, entry: str, instead: str) -> str:
    """The teaching message of a refused call (the notebook's report and the grader's say the
    same): which library function was called, that the exercise asks the learner to write it,
    and what to use instead."""
    called = target if entry == target else f"{entry}, which runs {target}"
    text = (
        f"{function} calls the library's {called}: that is the work this exercise asks you to "
        f"write yourself, so the answer does not count"
    )
    return text + (f"; instead, use {instead}" if instead else "")


# --------------------------------------------------------------------------------------------
# Resolving dotted names to functions
# --------------------------------------------------------------------------------------------


def _functions_of(obj: Any, name: str) -> list[types.FunctionType]:
    if isinstance(obj, types.FunctionType):
        return [obj]
    if isinstance(obj, property) and obj.fget is not None:
        return _functions_of(obj.fget, name)
    if isinstance(obj, (staticmethod, classmethod)):
        return _functions_of(obj.__func__, name)
    if isinstance(obj, type):
        init = obj.__dict__.get("__init__")
        if init is not None:
            return _functions_of(init, name)
    implementation = getattr(obj, "_implementation", None)  # a NumPy array-function dispatcher
    if isinstance(implementation, types.FunctionType):
        return [implementation]
    raise CourseError(
        f"shortcut {name!r} is a {type(obj).__name__}, not a Python function, class with an "
        "__init__, property or NumPy dispatcher: its calls cannot be watched"
    )


def resolve(name: str) -> list[types.FunctionType]:
    """The Python functions behind the dotted ``name`` (the longest importable module prefix,
    then attributes; a class attribute is read from the class's ``__dict__`` so a method is the
    plain function). Raises :class:`CourseError` naming the part that does not resolve."""
    parts = name.split(".")
    module = None
    index = len(parts)
    while index > 0:
        try:
            module = importlib.import_module(".".join(parts[:index]))
            break
        except ImportError:
            index -= 1
    if module is None:
        raise CourseError(f"shortcut {name!r}: no module of that name can be imported")
    obj: Any = module
    for attribute in parts[index:]:
        owner = obj
        try:
            obj = (
                owner.__dict__[attribute] if isinstance(owner, type) else getattr(owner, attribute)
            )
        except (KeyError, AttributeError):
            raise CourseError(
                f"shortcut {name!r}: {'.'.join(parts[:index])} has no attribute path "
                f"{'.'.join(parts[index:])!r}"
            ) from None
    return _functions_of(obj, name)


# --------------------------------------------------------------------------------------------
# Guards: a function's code swapped for a guard's while a window is open
# --------------------------------------------------------------------------------------------


@dataclass
class _Window:
    """One open check window: the thread it watches (None: every thread but ``exclude``), its
    frame and its targets by function."""

    thread: int | None
    frame: types.FrameType | None
    targets: dict[types.FunctionType, str]
    hit: ShortcutCall | None = None
    exclude: int | None = None

    def watches(self, thread: int) -> bool:
        """True when a call on ``thread`` is refused by this window."""
        if self.thread is not None:
            return thread == self.thread
        return thread != self.exclude


@dataclass
class _Guard:
    """One guarded function: its own attributes (to restore), a copy running the original code,
    and how many open windows installed it."""

    function: types.FunctionType
    code: types.CodeType
    defaults: tuple[Any, ...] | None
    kwdefaults: dict[str, Any] | None
    original: types.FunctionType
    guard_code: types.CodeType
    users: int = 0
    windows: list[_Window] = field(default_factory=list)


_GUARDS: dict[types.FunctionType, _Guard] = {}
_GUARD_CODES: dict[types.CodeType, _Guard] = {}
_LOCK = threading.Lock()
_GUARD_KEYWORD = "_llmfs_shortcut_guard"


def _guard_code(function: types.FunctionType) -> types.CodeType:
    """A code object ``(*args, <keyword>, **kwargs)`` that hands its arguments to the guard
    stored in the function's keyword default, with the function's free variables (a function's
    code can only be swapped for code with as many)."""
    names = function.__code__.co_freevars
    # Each free variable is named once in a branch that never runs: that makes it a free
    # variable of the guard's code without reading it.
    lines = ["def _outer():"]
    lines += [f"    {n} = None" for n in names]
    lines.append(f"    def _guarded(*args, {_GUARD_KEYWORD}, **kwargs):")
    if names:
        lines.append("        if False:")
        lines += [f"            {n}" for n in names]
    lines.append(f"        return {_GUARD_KEYWORD}(args, kwargs)")
    lines.append("    return _guarded")
    source = "\n".join(lines) + "\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<shortcut guard of {function.__qualname__}>", "exec"), namespace)
    code: types.CodeType = namespace["_outer"]().__code__
    code = code.replace(co_name=function.__code__.co_name)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=function.__code__.co_qualname)
    if code.co_freevars != names:  # the order must match the closure's cells
        raise CourseError(f"cannot guard {function.__qualname__}: free variables {names}")
    return code


def _make_guard(function: types.FunctionType) -> _Guard:
    original = types.FunctionType(
        function.__code__,
        function.__globals__,
        function.__name__,
        function.__defaults__,
        function.__closure__,
    )
    original.__kwdefaults__ = function.__kwdefaults__
    original.__qualname__ = function.__qualname__
    return _Guard(
        function,
        function.__code__,
        function.__defaults__,
        function.__kwdefaults__,
        original,
        _guard_code(function),
    )


def _install(guard: _Guard) -> None:
    function = guard.function
    handler = _handler(guard)
    function.__code__ = guard.guard_code
    function.__defaults__ = None
    function.__kwdefaults__ = {_GUARD_KEYWORD: handler}
    _GUARD_CODES[guard.guard_code] = guard


def _uninstall(guard: _Guard) -> None:
    function = guard.function
    function.__code__ = guard.code
    function.__defaults__ = guard.defaults
    function.__kwdefaults__ = guard.kwdefaults


def _handler(guard: _Guard) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    original = guard.original

    def handle(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        windows = guard.windows
        if windows:
            thread = threading.get_ident()
            for window in sorted(reversed(windows), key=lambda w: w.thread != thread):
                if window.watches(thread) and guard.function in window.targets:
                    call = ShortcutCall(window.targets[guard.function], _entry(window, guard))
                    if window.hit is None:
                        window.hit = call
                    raise ShortcutUsed(call)
        return original(*args, **kwargs)

    return handle


def _frame_name(frame: types.FrameType) -> str:
    guard = _GUARD_CODES.get(frame.f_code)
    code = guard.code if guard is not None else frame.f_code
    qualname = getattr(code, "co_qualname", code.co_name)
    return f"{frame.f_globals.get('__name__', '?')}.{qualname}"


def _is_library(frame: types.FrameType) -> bool:
    module = str(frame.f_globals.get("__name__", ""))
    return module.startswith(LIBRARY_PREFIXES) and not module.startswith(_TOOLING_PREFIX)


def _entry(window: _Window, guard: _Guard) -> str:
    """The outermost library function the learner's code called on the way to ``guard``'s
    function: the first library (or guarded) frame below the window's own frame."""
    target_name = window.targets[guard.function]
    chain: list[types.FrameType] = []
    # The guarded function's own frame (the guard's code runs in it).
    frame: types.FrameType | None = sys._getframe(2)
    while frame is not None and frame is not window.frame:
        chain.append(frame)
        frame = frame.f_back
    for outer in reversed(chain):
        if outer.f_code is guard.guard_code:
            return target_name
        if _is_library(outer) or outer.f_code in _GUARD_CODES:
            return _frame_name(outer)
    return target_name


@contextmanager
def _guarding(targets: dict[types.FunctionType, str], window: _Window) -> Iterator[_Window]:
    with _LOCK:
        for function in targets:
            guard = _GUARDS.get(function)
            if guard is None:
                guard = _GUARDS[function] = _make_guard(function)
            if guard.users == 0:
                _install(guard)
            guard.users += 1
            guard.windows.append(window)
    try:
        # The library's caches would answer a repeated call without reaching a listed rule.
        with dispatch.suspended():
            yield window
    finally:
        with _LOCK:
            for function in targets:
                guard = _GUARDS[function]
                guard.windows.remove(window)
                guard.users -= 1
                if guard.users == 0:
                    _uninstall(guard)


_RESOLVED: dict[tuple[str, ...], dict[types.FunctionType, str]] = {}


def targets_of(shortcuts: Shortcuts) -> dict[types.FunctionType, str]:
    """Every function ``shortcuts`` names, mapped to the dotted name it was listed as (resolved
    once, then remembered)."""
    found = _RESOLVED.get(shortcuts.names)
    if found is None:
        found = {}
        for name in shortcuts.names:
            for function in resolve(name):
                found.setdefault(function, name)
        _RESOLVED[shortcuts.names] = found
    return found


@dataclass(frozen=True)
class Guarded:
    """What :func:`call_guarded` saw: the function's result (or the exception it raised) and the
    first refused call, if any."""

    result: Any = None
    error: BaseException | None = None
    shortcut: ShortcutCall | None = None


_ALSO: list[dict[types.FunctionType, str]] = []


@contextmanager
def also_refusing(targets: dict[types.FunctionType, str]) -> Iterator[None]:
    """Adds ``targets`` (function -> the name a refusal shows) to every window
    :func:`call_guarded` opens meanwhile, with or without the spec's own shortcuts."""
    entry = dict(targets)
    _ALSO.append(entry)
    try:
        yield
    finally:
        _ALSO.remove(entry)


@contextmanager
def watching(
    targets: dict[types.FunctionType, str],
    *,
    thread: int | None = None,
    exclude: int | None = None,
) -> Iterator[_Window]:
    """A window refusing ``targets`` on ``thread`` (None: every thread but ``exclude``) until the
    block ends; the window's ``hit`` is the first refused call. For the grader's worker, where
    every thread but its own runs the learner's code."""
    window = _Window(thread, sys._getframe(), dict(targets), exclude=exclude)
    if not window.targets:
        yield window
        return
    with _guarding(window.targets, window):
        yield window


def _window_targets(shortcuts: Shortcuts | None) -> dict[types.FunctionType, str]:
    found: dict[types.FunctionType, str] = {}
    if shortcuts is not None and shortcuts.names:
        found.update(targets_of(shortcuts))
    for extra in _ALSO:
        for function, name in extra.items():
            found.setdefault(function, name)
    return found


def call_guarded(shortcuts: Shortcuts | None, call: Callable[..., Any], *args: Any) -> Guarded:
    """Runs ``call(*args)`` with the functions of ``shortcuts`` (and those of
    :func:`also_refusing`) guarded on every thread (see the module docstring); without any,
    simply calls it. An ``Exception`` the call raises is returned in ``error``; a
    ``BaseException`` other than a refusal (a timeout, ``SystemExit``) propagates, the guards
    removed first."""
    targets = _window_targets(shortcuts)
    if not targets:
        try:
            return Guarded(result=call(*args))
        except Exception as error:  # the learner's code may raise anything; it is an outcome
            return Guarded(error=error)
    window = _Window(None, sys._getframe(), targets)
    with _guarding(window.targets, window):
        try:
            result = call(*args)
        except ShortcutUsed as refused:
            return Guarded(shortcut=window.hit or refused.call)
        except Exception as error:
            return Guarded(error=error, shortcut=window.hit)
    return Guarded(result=result, shortcut=window.hit)


# --------------------------------------------------------------------------------------------
# The lists the layout chapters share
# --------------------------------------------------------------------------------------------

#: Where the layout functions live: a name starting with ``.`` in :func:`forbid` is one of them.
LAYOUT_MODULE = "llmfs.tensor.layout"

#: The library's three ways of reading strided storage (the offset cursor, the copy and the one
#: constructor of every NumPy array over a view's storage, behind ``numpy_view``, ``to_numpy``,
#: ``tolist`` and ``np.asarray(view)``), and NumPy's own.
STRIDED_READERS: tuple[str, ...] = (
    "llmfs.tensor.traversal.StridedOffsets",
    "llmfs.tensor.view.ViewMethods.materialize",
    "llmfs.tensor.strided._as_strided",
    "numpy.lib.stride_tricks.as_strided",
)


def forbid(*names: str, instead: str) -> Shortcuts:
    """:class:`Shortcuts` of ``names`` (``.row_major_strides`` short for
    ``llmfs.tensor.layout.row_major_strides``). What each exercise's answer may not call is the
    library function that computes its answer; calls count at any depth, so one function stands
    for every public door to it (``Tensor.zeros(shape).strides`` reaches ``row_major_strides``).
    """
    return Shortcuts(tuple(LAYOUT_MODULE + n if n.startswith(".") else n for n in names), instead)


__all__ = [
    "LAYOUT_MODULE",
    "LIBRARY_PREFIXES",
    "STRIDED_READERS",
    "Guarded",
    "ShortcutCall",
    "ShortcutUsed",
    "Shortcuts",
    "also_refusing",
    "call_guarded",
    "forbid",
    "resolve",
    "shortcut_message",
    "targets_of",
    "watching",
]
