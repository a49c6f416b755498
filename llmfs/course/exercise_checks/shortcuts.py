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
  but the first. The guards, the original code and the windows are kept by the sentinel
  (:mod:`.sentinel`), an audit hook installed when the checks are imported: the guard's code
  calls it with :func:`sys.audit` as a constant, so no object a learner's code can reach or
  replace (this module's names, a guard's state, ``call_guarded`` itself) decides a refusal.
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
* Every check's own reference answer is refused in every window (:func:`reference_targets`),
  in the notebook as in the grader. The grader's worker widens the net where only the learner's
  code runs: :func:`also_refusing` adds function objects to every window opened meanwhile, and
  :func:`watching` opens a window for chosen threads (all but the worker's own, for as long
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
sentinel refuses making a function of a guarded function's code at any time, and changing the
checks (see :mod:`.sentinel`).
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercise_checks import sentinel
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


#: Raised inside a guarded function called while a window watches its thread (see
#: :mod:`.sentinel`): a ``BaseException``, so a learner's ``except Exception`` does not hide it.
ShortcutUsed = sentinel.ShortcutUsed


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
# Windows: kept by the sentinel, out of the learner's reach
# --------------------------------------------------------------------------------------------


class _WindowHandle:
    """A window :func:`watching` opened: ``hit`` is its first refused call (asked of the
    sentinel while the window is open, kept once it closed)."""

    def __init__(self, token: object) -> None:
        self._token = token
        self._closed = False
        self._hit: ShortcutCall | None = None

    @property
    def hit(self) -> ShortcutCall | None:
        if self._closed:
            return self._hit
        return _call_of(sentinel.window_hit(self._token))

    def close(self) -> None:
        self._hit = _call_of(sentinel.close_window(self._token))
        self._closed = True


def _call_of(hit: sentinel.Hit | None) -> ShortcutCall | None:
    return None if hit is None else ShortcutCall(hit.target, hit.entry)


@contextmanager
def _guarding(
    targets: dict[types.FunctionType, str], *, thread: int | None, exclude: int | None
) -> Iterator[_WindowHandle]:
    window = _WindowHandle(sentinel.open_window(targets, thread=thread, exclude=exclude))
    try:
        # The library's caches would answer a repeated call without reaching a listed rule.
        with dispatch.suspended():
            yield window
    finally:
        window.close()


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
) -> Iterator[_WindowHandle]:
    """A window refusing ``targets`` on ``thread`` (None: every thread but ``exclude``) until the
    block ends; the window's ``hit`` is the first refused call. For the grader's worker, where
    every thread but its own runs the learner's code."""
    with _guarding(dict(targets), thread=thread, exclude=exclude) as window:
        yield window


#: Every check's reference answer written in the checks (see :func:`reference_targets`), filled
#: in when the checks are sealed: a learner's function never calls one.
_REFERENCES: dict[types.FunctionType, str] = {}


def reference_targets(specs: Iterable[Any]) -> dict[types.FunctionType, str]:
    """Every spec's reference answer written in the course's checks (a Python function of an
    ``llmfs.course`` module), mapped to the name a refusal shows. Library references (a function
    of ``llmfs.tensor``) are left to the specs' own shortcut lists."""
    found: dict[types.FunctionType, str] = {}
    for spec in specs:
        reference = getattr(spec, "reference", None)
        if isinstance(reference, types.FunctionType) and str(reference.__module__).startswith(
            _TOOLING_PREFIX
        ):
            found.setdefault(
                reference, f"{reference.__module__}.{reference.__qualname__} (the checks' answer)"
            )
    return found


def _window_targets(shortcuts: Shortcuts | None) -> dict[types.FunctionType, str]:
    found: dict[types.FunctionType, str] = dict(_REFERENCES)
    if shortcuts is not None and shortcuts.names:
        found.update(targets_of(shortcuts))
    for extra in _ALSO:
        for function, name in extra.items():
            found.setdefault(function, name)
    return found


def call_guarded(shortcuts: Shortcuts | None, call: Callable[..., Any], *args: Any) -> Guarded:
    """Runs ``call(*args)`` with the functions of ``shortcuts``, those of :func:`also_refusing`
    and every check's reference answer (:func:`reference_targets`) guarded on every thread (see
    the module docstring). An ``Exception`` the call raises is returned in ``error``; a
    ``BaseException`` other than a refusal (a timeout, ``SystemExit``) propagates, the guards
    removed first. A change to the checks' own code seen while the call ran is a refusal too
    (:mod:`.sentinel`)."""
    targets = _window_targets(shortcuts)
    window = _WindowHandle(sentinel.open_window(targets))
    try:
        with dispatch.suspended():
            result = call(*args)
    except ShortcutUsed as refused:
        window.close()
        return Guarded(shortcut=window.hit or ShortcutCall(refused.target, refused.entry))
    except Exception as error:
        window.close()
        return Guarded(error=error, shortcut=window.hit)
    except BaseException:
        window.close()
        raise
    window.close()
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


sentinel.install(LIBRARY_PREFIXES, _TOOLING_PREFIX)


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
    "reference_targets",
    "resolve",
    "shortcut_message",
    "targets_of",
    "watching",
]
