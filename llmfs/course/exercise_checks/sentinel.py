"""The checks' sentinel: refusals that live where a learner's code cannot reach them.

A learner's function runs in the interpreter that checks it (the notebook's kernel, the grader's
worker), so any object the checks keep in a module, a dict or a guard can be replaced by it: a
default argument that sets ``spec.call_guarded`` through ``sys.modules`` would turn every
refusal off. The sentinel is one audit hook (:func:`sys.addaudithook`), installed when the checks
are imported, before any learner code runs. Audit hooks cannot be removed, and what this one
holds lives only in its own closure, which no module, frame or object a learner can name refers
to. It holds:

* the guards: for every function a check refuses (an exercise's listed library functions, the
  checks' own reference answers), its original code and a copy that runs it. While a window is
  open the function's ``__code__`` is a guard whose code calls the audit hook directly (the
  builtin :func:`sys.audit` is a constant of that code, not a name looked up anywhere), and the
  hook, not any Python object, decides whether the call is refused and records the first
  refusal of each window;
* the windows (which thread each watches, its targets, its first refused call), opened and closed
  through audit events; a window is closed only by the code that opened it;
* a snapshot of the checks' own modules (:func:`seal`): every name they bound when sealed. At
  the start and end of every check and of every window the modules are compared with it, and a
  change (however it was made: an attribute, the module's dict, a function's ``__globals__``) is
  a refusal for the check that saw it.

And it refuses, at any time, what only tampering does: changing the code or defaults of a
guarded function or of any function of the checks, making a new function (or ``exec``) from a
guarded function's code. The classes of the checks and those whose methods are guarded are
compared with a snapshot as the modules are (setting a class's attribute raises no audit event
before Python 3.12). The sealed modules refuse replacing or deleting a name they bound, and their
``__dict__`` reads as a read-only mapping.

What stays out of reach of any check run inside the learner's own interpreter: code that copies
a library function's source text is the learner's own code, and memory written through
``ctypes`` is not Python's to watch. The grader's worker is a separate, sandboxed process.
"""

from __future__ import annotations

import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from operator import is_
from typing import Any

_EVENT = "llmfs.sentinel"
_AUDIT = sys.audit
_GETFRAME = sys._getframe
_GUARD_KEYWORD = "_llmfs_shortcut_guard"


class ShortcutUsed(BaseException):
    """Raised inside a guarded function called while a window watches its thread. A
    ``BaseException``, so that a learner's ``except Exception`` does not hide it."""

    def __init__(self, target: str, entry: str) -> None:
        super().__init__(f"{entry} reaches {target}")
        self.target = target
        self.entry = entry


class ChecksChanged(AttributeError):
    """Raised when code tries to change the checks themselves (a sealed module's name, the code
    of a guarded function, a class of the checks): the checks refuse to run on changed code."""


@dataclass(frozen=True)
class Hit:
    """One refused call a window saw: the refused function (``target``, its dotted name) and
    what the learner's code called to reach it (``entry``)."""

    target: str
    entry: str


def _guard_code(function: types.FunctionType, key: int) -> types.CodeType:
    """Code with ``function``'s free variables that asks the sentinel about call ``key`` and runs
    what the sentinel hands back (the original), with :func:`sys.audit` as a constant."""
    names = function.__code__.co_freevars
    lines = ["def _outer():"]
    lines += [f"    {n} = None" for n in names]
    lines.append("    def _guarded(*args, **kwargs):")
    if names:  # each free variable named once where it never runs: same closure layout
        lines.append("        if False:")
        lines += [f"            {n}" for n in names]
    lines.append("        box = []")
    lines.append(f"        '__AUDIT__'({_EVENT!r}, 'call', '__KEY__', box)")
    lines.append("        return box[0](*args, **kwargs)")
    lines.append("    return _guarded")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # "str is not callable": replaced below
        outer = compile("\n".join(lines) + "\n", f"<guard of {function.__qualname__}>", "exec")
    namespace: dict[str, Any] = {}
    exec(outer, namespace)
    code: types.CodeType = namespace["_outer"]().__code__
    consts = tuple(
        _AUDIT if c == "__AUDIT__" else key if c == "__KEY__" else c for c in code.co_consts
    )
    code = code.replace(co_consts=consts, co_name=function.__code__.co_name)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=function.__code__.co_qualname)
    if code.co_freevars != names:
        raise RuntimeError(f"cannot guard {function.__qualname__}: free variables {names}")
    return code


@dataclass
class _Guard:
    function: types.FunctionType
    name: str
    code: types.CodeType
    defaults: tuple[Any, ...] | None
    kwdefaults: dict[str, Any] | None
    original: types.FunctionType
    guard_code: types.CodeType
    users: int = 0


@dataclass
class _Window:
    thread: int | None
    exclude: int | None
    frame: types.FrameType | None
    targets: dict[int, str]
    hit: Hit | None = None

    def watches(self, thread: int) -> bool:
        if self.thread is not None:
            return thread == self.thread
        return thread != self.exclude


def _make_hook(library_prefixes: tuple[str, ...], tooling: str) -> Callable[[str, Any], None]:
    """The sentinel's hook; every piece of its state is a local of this call."""
    guards: dict[int, _Guard] = {}  # key -> guard
    by_function: dict[types.FunctionType, int] = {}
    guard_codes: dict[types.CodeType, int] = {}
    original_codes: set[types.CodeType] = set()
    original_bytes: set[bytes] = set()
    windows: dict[object, _Window] = {}
    protected_dicts: dict[int, types.ModuleType] = {}  # id(module dict) -> module
    snapshot: dict[str, tuple[types.ModuleType, tuple[str, ...], tuple[Any, ...]]] = {}
    protected_classes: set[type] = set()
    class_snapshot: dict[int, tuple[type, tuple[str, ...], tuple[Any, ...]]] = {}
    openers: set[types.CodeType] = set()
    counts = {"opened": 0}
    busy: set[int] = set()
    lock = threading.RLock()

    def changed() -> str | None:
        # Identity of every value the module bound when sealed, compared in C (names added
        # since come after them in the dict's order and are not compared).
        for module, keys, values in snapshot.values():
            current = object.__getattribute__(module, "__dict__")
            count = len(keys)
            if tuple(current)[:count] == keys and all(
                map(is_, tuple(current.values())[:count], values)
            ):
                continue
            for name, value in zip(keys, values, strict=True):
                if current.get(name, changed) is not value:
                    return f"{module.__name__}.{name}"
            return f"{module.__name__} (its names)"
        for cls, keys, values in class_snapshot.values():
            current = cls.__dict__
            count = len(keys)
            if tuple(current)[:count] == keys and all(
                map(is_, tuple(current.values())[:count], values)
            ):
                continue
            return f"{cls.__module__}.{cls.__qualname__}"
        return None

    def protect(cls: type) -> None:
        # Setting a class's attribute raises no audit event: a snapshot of its dict is compared
        # wherever the modules are.
        protected_classes.add(cls)
        class_snapshot.setdefault(id(cls), (cls, tuple(cls.__dict__), tuple(cls.__dict__.values())))

    def refuse(what: str) -> None:
        raise ChecksChanged(
            f"{what}: the checks refuse code that changes them (the checks' modules, the "
            f"functions they guard and their classes are sealed while a notebook or a grader "
            f"runs them)"
        )

    def is_library(frame: types.FrameType) -> bool:
        module = str(frame.f_globals.get("__name__", ""))
        return module.startswith(library_prefixes) and not module.startswith(tooling)

    def frame_name(frame: types.FrameType) -> str:
        key = guard_codes.get(frame.f_code)
        code = guards[key].code if key is not None else frame.f_code
        qualname = getattr(code, "co_qualname", code.co_name)
        return f"{frame.f_globals.get('__name__', '?')}.{qualname}"

    def entry(window: _Window, guard_frame: types.FrameType, name: str) -> str:
        chain: list[types.FrameType] = []
        frame: types.FrameType | None = guard_frame
        while frame is not None and frame is not window.frame:
            chain.append(frame)
            frame = frame.f_back
        for outer in reversed(chain):
            if outer is guard_frame:
                return name
            if is_library(outer) or outer.f_code in guard_codes:
                return frame_name(outer)
        return name

    def arm(functions: dict[Any, str]) -> None:
        for function, name in functions.items():
            if not isinstance(function, types.FunctionType) or function in by_function:
                continue
            key = len(guards) + 1
            original = types.FunctionType(
                function.__code__,
                function.__globals__,
                function.__name__,
                function.__defaults__,
                function.__closure__,
            )
            original.__kwdefaults__ = function.__kwdefaults__
            original.__qualname__ = function.__qualname__
            guard = _Guard(
                function,
                name,
                function.__code__,
                function.__defaults__,
                function.__kwdefaults__,
                original,
                _guard_code(function, key),
            )
            guards[key] = guard
            by_function[function] = key
            guard_codes[guard.guard_code] = key
            original_codes.add(guard.code)
            original_bytes.add(guard.code.co_code)
            owner = _owner_class(function)
            if owner is not None:
                protect(owner)

    def install(guard: _Guard) -> None:
        function = guard.function
        function.__code__ = guard.guard_code
        function.__defaults__ = None
        function.__kwdefaults__ = None

    def uninstall(guard: _Guard) -> None:
        function = guard.function
        function.__code__ = guard.code
        function.__defaults__ = guard.defaults
        function.__kwdefaults__ = guard.kwdefaults

    def verb(name: str, args: tuple[Any, ...]) -> None:
        if name == "call":
            key, box = args
            guard = guards.get(key) if isinstance(key, int) else None
            frame = _GETFRAME(2)  # the guard's own frame (1 is this hook's caller: none)
            if guard is None or frame.f_code is not guard.guard_code:
                refuse("a call of the sentinel from outside a guard")
            assert guard is not None
            thread = threading.get_ident()
            with lock:
                ordered = sorted(windows.values(), key=lambda w: w.thread != thread)
            for window in ordered:
                if window.watches(thread) and key in window.targets:
                    hit = Hit(window.targets[key], entry(window, frame, window.targets[key]))
                    if window.hit is None:
                        window.hit = hit
                    raise ShortcutUsed(hit.target, hit.entry)
            box.append(guard.original)
        elif name == "open":
            targets, thread, exclude, box = args
            caller = _GETFRAME(3)  # who called open_window
            arm(dict(targets))
            window = _Window(
                thread,
                exclude,
                caller,
                {by_function[f]: n for f, n in targets.items() if f in by_function},
            )
            token = object()
            with lock:
                for key in window.targets:
                    guard = guards[key]
                    if guard.users == 0:
                        install(guard)
                    guard.users += 1
                windows[token] = window
                if caller.f_code in openers:
                    counts["opened"] += 1
            box.append(token)
        elif name == "close":
            token, box = args
            with lock:
                if token not in windows:
                    return
                window = windows.pop(token)
                for key in window.targets:
                    guard = guards[key]
                    guard.users -= 1
                    if guard.users == 0:
                        uninstall(guard)
            why = changed()
            if why is not None and window.hit is None:
                window.hit = Hit(f"the checks' own code ({why} was changed)", "a change to it")
            box.append(window.hit)
        elif name == "hit":
            token, box = args
            box.append(windows[token].hit if token in windows else None)
        elif name == "arm":
            functions, permanent = args
            arm(dict(functions))
            if permanent:  # guarded from now on: no window pays for swapping them
                with lock:
                    for function in functions:
                        guard = guards[by_function[function]]
                        if guard.users == 0:
                            install(guard)
                        guard.users += 1
        elif name == "seal":
            modules, classes, opener_codes = args
            for module in modules:
                real = object.__getattribute__(module, "__dict__")
                protected_dicts[id(real)] = module
                snapshot[real["__name__"]] = (module, tuple(real), tuple(real.values()))
            for cls in classes:
                protect(cls)
            openers.update(opener_codes)
        elif name == "begin":
            (box,) = args
            box.append(counts["opened"])
            box.append(changed())
        elif name == "end":
            (box,) = args
            box.append(counts["opened"])
            box.append(changed())

    def hook(event: str, args: tuple[Any, ...]) -> None:
        thread = threading.get_ident()
        if thread in busy:
            return  # the sentinel's own work (installing a guard, reading a frame)
        if event == _EVENT:
            if not args or not isinstance(args[0], str):
                return
            busy.add(thread)
            try:
                verb(args[0], args[1:])
            finally:
                busy.discard(thread)
            return
        if event == "object.__setattr__":
            target, attribute = args[0], args[1]
            if isinstance(target, types.FunctionType):
                if attribute in ("__code__", "__defaults__", "__kwdefaults__") and (
                    target in by_function or id(target.__globals__) in protected_dicts
                ):
                    refuse(f"setting {attribute} of {target.__qualname__}")
                if attribute == "__code__" and (
                    args[2] in original_codes or args[2] in guard_codes
                ):
                    refuse("giving a function the code of a guarded one")
            elif isinstance(target, type) and target in protected_classes:
                refuse(f"setting {target.__qualname__}.{attribute}")
        elif event == "object.__delattr__":
            if isinstance(args[0], type) and args[0] in protected_classes:
                refuse(f"deleting {args[0].__qualname__}.{args[1]}")
        elif event == "function.__new__":
            if args and (args[0] in original_codes or args[0] in guard_codes):
                refuse("making a new function of a guarded function's code")
        elif event == "exec":
            if args and (args[0] in original_codes or args[0] in guard_codes):
                refuse("running a guarded function's code with exec")
        elif event == "code.__new__":
            if args and args[0] in original_bytes:
                refuse("copying a guarded function's code")

    return hook


def _owner_class(function: types.FunctionType) -> type | None:
    # The class whose __dict__ holds the function (a method's own class), when it has one.
    parts = function.__qualname__.split(".")
    if len(parts) < 2 or "<locals>" in parts:
        return None
    owner: Any = sys.modules.get(function.__module__)
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
    return owner if isinstance(owner, type) else None


_INSTALLED: list[bool] = []


def install(library_prefixes: tuple[str, ...], tooling: str) -> None:
    """Installs the sentinel's audit hook (once per interpreter; later calls do nothing)."""
    if _INSTALLED:
        return
    _INSTALLED.append(True)
    sys.addaudithook(_make_hook(library_prefixes, tooling))


def arm(functions: dict[types.FunctionType, str], *, permanent: bool = False) -> None:
    """Makes each function guardable, taking its original code now (before learner code can
    change it); its name is what a refusal shows. ``permanent``: guarded from now on (a window
    that lists one refuses it; outside windows it runs as before), for functions windows list
    every time (the checks' references)."""
    _AUDIT(_EVENT, "arm", dict(functions), permanent)


def open_window(
    targets: dict[types.FunctionType, str], *, thread: int | None = None, exclude: int | None = None
) -> object:
    """Opens a window refusing ``targets`` on ``thread`` (None: every thread but ``exclude``);
    returns its token."""
    box: list[Any] = []
    _AUDIT(_EVENT, "open", dict(targets), thread, exclude, box)
    return box[0]


def close_window(token: object) -> Hit | None:
    """Closes the window and returns its first refused call (or the change to the checks it
    saw), if any."""
    box: list[Any] = []
    _AUDIT(_EVENT, "close", token, box)
    return box[0] if box else None


def window_hit(token: object) -> Hit | None:
    """The first refused call of a window still open."""
    box: list[Any] = []
    _AUDIT(_EVENT, "hit", token, box)
    return box[0] if box else None


class SealedModule(types.ModuleType):
    """A module of the checks once sealed: its names cannot be replaced or deleted (new names
    may be added), and its ``__dict__`` reads as a read-only mapping."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in object.__getattribute__(self, "__dict__"):
            raise ChecksChanged(
                f"{self.__name__}.{name} cannot be replaced: the checks' modules are sealed"
            )
        super().__setattr__(name, value)

    def __delattr__(self, name: str) -> None:
        raise ChecksChanged(f"{self.__name__}.{name} cannot be deleted: the checks are sealed")

    def __dir__(self) -> list[str]:
        return sorted(object.__getattribute__(self, "__dict__"))

    def __getattribute__(self, name: str) -> Any:
        if name == "__dict__":
            return types.MappingProxyType(object.__getattribute__(self, "__dict__"))
        return object.__getattribute__(self, name)


def seal(
    modules: Iterable[types.ModuleType], classes: Iterable[type], openers: Iterable[Any]
) -> None:
    """Seals ``modules`` (their class becomes :class:`SealedModule`; the sentinel keeps a
    snapshot of their names), protects ``classes`` from attribute changes, and counts the
    windows opened by the code of ``openers`` (functions)."""
    chosen = list(modules)
    for module in chosen:
        if type(module) is types.ModuleType:
            module.__class__ = SealedModule
    codes = [f.__code__ for f in openers if isinstance(f, types.FunctionType)]
    _AUDIT(_EVENT, "seal", chosen, list(classes), codes)


def begin() -> tuple[int, str | None]:
    """(windows opened so far by the checks' own code, the first change to the checks, if
    any): taken when a check starts."""
    box: list[Any] = []
    _AUDIT(_EVENT, "begin", box)
    return box[0], box[1]


def end() -> tuple[int, str | None]:
    """As :func:`begin`, when a check ends."""
    box: list[Any] = []
    _AUDIT(_EVENT, "end", box)
    return box[0], box[1]


__all__ = [
    "ChecksChanged",
    "Hit",
    "SealedModule",
    "ShortcutUsed",
    "arm",
    "begin",
    "close_window",
    "end",
    "install",
    "open_window",
    "seal",
    "window_hit",
]
