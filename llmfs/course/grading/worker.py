"""Runs a learner's implement functions on given cases; a limited child process of the grader.

``python -m llmfs.course.grading.worker`` reads one JSON object on stdin::

    {"tasks": [{"exercise": "ch01.x", "source": "<module>", "function": "name",
                "cases": [[arg, ...], ...]}, ...],
     "memory_mb": M, "cpu_seconds": S, "file_mb": F, "case_timeout": T, "workdir": "/tmp/..."}

caps its own memory, CPU time and file sizes, moves into ``workdir``, keeps a private copy of its
stdout and points file descriptors 0, 1 and 2 at /dev/null (so the learner's prints go nowhere).
Then, task by task, it defines the learner's module in a fresh namespace and calls the function
once per case (through the exercise's spec, which turns a case's JSON arguments into the
function's arguments and its result into JSON), and writes one JSON line per task, as soon as the
task is done::

    {"exercise": "ch01.x", "outcomes": [{"value": ...} | {"error": "Name"}, ...]}
    {"exercise": "ch01.x", "load_error": "why"}

so that a task that ends the process or runs out of time costs only that task: the grader starts a
new worker for the tasks after it. The worker never sees an expected answer: the grader draws the
cases, computes the library's outcomes itself and compares. A case running longer than
``case_timeout`` is ``{"error": "Timeout"}``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from llmfs.course.grading.limits import apply_limits


class CaseTimeout(BaseException):
    """Raised by the timer in the learner's function; a BaseException so ``except Exception``
    in the learner's code does not swallow it."""


def _on_alarm(signum: int, frame: Any) -> None:
    raise CaseTimeout


def _run_task(
    task: dict[str, Any], case_timeout: float, specs: Any, outcome_of: Any, warm_up: Any
) -> Any:
    namespace: dict[str, Any] = {"__name__": "__submission__", "__builtins__": __builtins__}
    try:
        signal.setitimer(signal.ITIMER_REAL, case_timeout * 5)
        exec(compile(task["source"], "<submission>", "exec"), namespace)
        function = namespace.get(task["function"])
        if not callable(function):
            raise NameError(f"{task['function']} is not defined")
        # A kernel exercise compiles the learner's kernel here, under the definition's time
        # limit, so that a cold build cache does not time out the first case.
        warm_up(specs.get(task["exercise"]), function)
        signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as error:  # anything the definition does is the learner's problem
        signal.setitimer(signal.ITIMER_REAL, 0)
        return {"load_error": f"defining the function raised {type(error).__name__}"}
    spec = specs.get(task["exercise"])
    outcomes = []
    for args in task["cases"]:
        try:
            signal.setitimer(signal.ITIMER_REAL, case_timeout)
            outcome = outcome_of(function, tuple(args), spec)
        except CaseTimeout:
            outcome = {"error": "Timeout"}
        except BaseException as error:  # SystemExit, KeyboardInterrupt, ...
            outcome = {"error": type(error).__name__}
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        outcomes.append(outcome)
    return {"outcomes": outcomes}


def main() -> None:
    """Entry point (see the module docstring)."""
    job = json.loads(sys.stdin.read())
    apply_limits(job["memory_mb"], job["cpu_seconds"], job["file_mb"])
    # Imported before the learner's code is defined, so redefining it there changes nothing here.
    from llmfs.course.exercise_checks.spec import SPECS, outcome_of, warm_up

    os.chdir(job["workdir"])
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(null, 2)
    signal.signal(signal.SIGALRM, _on_alarm)
    for task in job["tasks"]:
        result = _run_task(task, float(job["case_timeout"]), SPECS, outcome_of, warm_up)
        try:
            text = json.dumps({"exercise": task["exercise"], **result})
        except (TypeError, ValueError):
            text = json.dumps(
                {"exercise": task["exercise"], "load_error": "the outcomes are not JSON data"}
            )
        out.write(text + "\n")
        out.flush()
    # Skip interpreter shutdown: atexit handlers and finalizers the learner registered never run.
    os._exit(0)


if __name__ == "__main__":
    main()
