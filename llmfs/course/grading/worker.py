"""Runs a learner's implement functions, one case at a time; a sandboxed child of the grader.

``python -m llmfs.course.grading.worker`` speaks :mod:`~llmfs.course.grading.channel` frames:
it reads requests on stdin and writes exactly one reply per request on a private copy of stdout
(file descriptors 0, 1 and 2 then point at /dev/null, so the learner's prints go nowhere). Every
request carries an ``"id"`` that its reply repeats (left out below)::

    {"setup": {"memory_mb": M, "cpu_seconds": S, "file_mb": F, "case_timeout": T,
               "compile_timeout": C}}
        -> {"ready": true}
    {"define": {"exercise": "ch01.x", "source": "<module>", "function": "name"}}
        -> {"defined": true} | {"load_error": "why"}
    {"case": [arg, ...]}
        -> {"value": ...} | {"error": "Name", ...}

The worker caps its own memory, CPU time and file sizes before any learner code runs. It only
ever holds the ARGUMENTS of the case it is running: the grader draws the hidden cases, keeps the
seed, computes the expected outcomes and compares, and sends the next case only after reading the
reply to this one. A case running longer than ``case_timeout`` is ``{"error": "Timeout"}``.
Defining the module has ``5 * case_timeout``; a kernel exercise's kernel is then compiled once
under its own ``compile_timeout`` (default: the definition's), before any case is timed.

The learner's code shares this process, so nothing here is secret from it; what this process
does is refuse shortcuts (:mod:`llmfs.course.exercise_checks.shortcuts`): the exercise's listed
library functions, and every checks module's reference answer (reachable through
``sys.modules`` or a walk up the stack), are refused while the learner's module is defined, while
a case runs (on every thread), and on every thread but this one's own in between, so a helper
thread or a module-level table gets the exercise a ``Shortcut`` outcome, never the answer. The
refusals themselves are kept by the checks' sentinel (:mod:`llmfs.course.exercise_checks.sentinel`,
installed when this process imports the checks, before any learner code), the specs are copies
taken before the learner's module is defined, and a case after which the sentinel finds the
checks' own code changed is a ``Shortcut`` outcome naming the change.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import types
from dataclasses import replace
from typing import Any

from llmfs.course.grading.channel import FrameError, encode, read_frame
from llmfs.course.grading.limits import apply_limits

_TOOLING = "llmfs.course."


class CaseTimeout(BaseException):
    """Raised by the timer in the learner's function; a BaseException so ``except Exception``
    in the learner's code does not swallow it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def reference_targets(specs: dict[str, Any]) -> dict[types.FunctionType, str]:
    """Every spec's reference answer written in the course's checks (a Python function of an
    ``llmfs.course`` module), mapped to the name a refusal shows. Library references (a function
    of ``llmfs.tensor``) are left to the specs' own shortcut lists."""
    found: dict[types.FunctionType, str] = {}
    for spec in specs.values():
        reference = getattr(spec, "reference", None)
        if isinstance(reference, types.FunctionType) and str(reference.__module__).startswith(
            _TOOLING
        ):
            found.setdefault(
                reference, f"{reference.__module__}.{reference.__qualname__} (the checks' answer)"
            )
    return found


class Worker:
    """The state between requests: the loaded function, its spec and the open windows."""

    def __init__(self, case_timeout: float, compile_timeout: float | None = None) -> None:
        # Loaded here, after the limits and before any learner code: importing this module
        # costs nothing, and what the learner's module redefines changes nothing here.
        from llmfs.course.exercise_checks.shortcuts import also_refusing, targets_of, watching
        from llmfs.course.exercise_checks.spec import SHORTCUT, SPECS, outcome_of, warm_up  # idem

        self.watching = watching
        self.also_refusing = also_refusing
        self.outcome_of = outcome_of
        self.warm_up = warm_up
        self.shortcut = SHORTCUT

        self.case_timeout = case_timeout
        self.compile_timeout = case_timeout * 5 if compile_timeout is None else compile_timeout
        # Copies taken before any learner code: SPECS' entries are reachable from it, and a
        # spec changed there (its shortcut list emptied) must change nothing here.
        self.specs = {exercise: replace(spec) for exercise, spec in SPECS.items()}
        # The builtin itself: after every case the sentinel says whether the checks' own code
        # changed (see llmfs.course.exercise_checks.sentinel), however the change was made.
        self.audit = sys.audit
        self.targets_of = targets_of
        self.references = reference_targets(SPECS)
        self.thread = threading.get_ident()
        self.function: Any = None
        self.spec: Any = None
        self.hit: Any = None
        self.stack = contextlib.ExitStack()
        self.task_window: Any = None

    def _targets(self, spec: Any) -> dict[types.FunctionType, str]:
        found = dict(self.references)
        shortcuts = getattr(spec, "shortcuts", None)
        if shortcuts is not None and shortcuts.names:
            found.update(self.targets_of(shortcuts))
        return found

    def define(self, request: dict[str, Any]) -> dict[str, Any]:
        """Defines the learner's module (see the module docstring)."""
        watching, warm_up = self.watching, self.warm_up
        self.stack.close()
        self.stack = contextlib.ExitStack()
        self.function = None
        self.hit = None
        exercise = str(request.get("exercise", ""))
        self.spec = self.specs.get(exercise)
        targets = self._targets(self.spec)
        # Every thread but this one runs only the learner's code from now on.
        self.task_window = self.stack.enter_context(watching(targets, exclude=self.thread))
        namespace: dict[str, Any] = {"__name__": "__submission__", "__builtins__": __builtins__}
        definition = contextlib.ExitStack()
        window = definition.enter_context(watching(targets, thread=self.thread))
        try:
            signal.setitimer(signal.ITIMER_REAL, self.case_timeout * 5)
            exec(compile(str(request.get("source", "")), "<submission>", "exec"), namespace)
            function = namespace.get(str(request.get("function", "")))
            if not callable(function):
                raise NameError(f"{request.get('function')} is not defined")
            # A kernel exercise compiles the learner's kernel here, under a limit of its own, so
            # that a cold build cache on a loaded machine times out neither the definition nor
            # the first case.
            signal.setitimer(signal.ITIMER_REAL, self.compile_timeout)
            warm_up(self.spec, function)
            signal.setitimer(signal.ITIMER_REAL, 0)
        except BaseException as error:  # anything the definition does is the learner's problem
            signal.setitimer(signal.ITIMER_REAL, 0)
            if window.hit is None:
                return {"load_error": f"defining the function raised {type(error).__name__}"}
            function = None
        finally:
            window_hit = window.hit
            definition.close()  # this thread's window ends here; each case opens its own
        self.hit = window_hit
        self.function = function if window_hit is None else (lambda *args: None)
        return {"defined": True}

    def case(self, args: Any) -> dict[str, Any]:
        """One case's outcome (see the module docstring)."""
        if self.function is None or not isinstance(args, list):
            return {"error": "NotDefined"}
        try:
            signal.setitimer(signal.ITIMER_REAL, self.case_timeout)
            with self.also_refusing(self.references):
                outcome = self.outcome_of(self.function, tuple(args), self.spec)
        except CaseTimeout:
            outcome = {"error": "Timeout"}
        except BaseException as error:  # SystemExit, KeyboardInterrupt, ...
            outcome = {"error": type(error).__name__}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        hit = self.hit or (self.task_window.hit if self.task_window is not None else None)
        if hit is not None:
            return {"error": self.shortcut, "shortcut": hit.target, "via": hit.entry}
        box: list[Any] = []
        self.audit("llmfs.sentinel", "end", box)
        if box[1] is not None:
            target = f"the checks' own code ({box[1]} was changed)"
            return {"error": self.shortcut, "shortcut": target, "via": "a change to it"}
        return outcome


def _reply(out: Any, message: dict[str, Any]) -> None:
    try:
        frame = encode(message)
    except FrameError:
        frame = encode({"error": "NotPlainData", "id": message.get("id")})
    out.write(frame)
    out.flush()


def main() -> None:
    """Entry point (see the module docstring)."""
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    first = read_frame(requests)
    if not isinstance(first, dict) or not isinstance(first.get("setup"), dict):
        os._exit(2)
    setup = first["setup"]
    processes = setup.get("processes")
    apply_limits(
        int(setup["memory_mb"]),
        float(setup["cpu_seconds"]),
        int(setup["file_mb"]),
        int(processes) if isinstance(processes, int) else None,
    )
    signal.signal(signal.SIGALRM, _on_alarm)
    # Imported before any learner code is defined, so redefining it there changes nothing here.
    compile_timeout = setup.get("compile_timeout")
    worker = Worker(
        float(setup["case_timeout"]),
        float(compile_timeout) if isinstance(compile_timeout, (int, float)) else None,
    )
    _reply(out, {"ready": True, "id": first.get("id")})
    while True:
        try:
            request = read_frame(requests)
        except FrameError:
            break
        if not isinstance(request, dict):
            break
        number = request.get("id")
        if "define" in request and isinstance(request["define"], dict):
            _reply(out, {**worker.define(request["define"]), "id": number})
        elif "case" in request:
            _reply(out, {**worker.case(request["case"]), "id": number})
        else:
            break
    # Skip interpreter shutdown: atexit handlers and finalizers the learner registered never run.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
