"""Hostile submissions that try to get a shortcut accepted by changing the checks themselves
(the module a check looks its helpers up in, the guards' own state, the spec, the reference), and
the two places that must refuse them: the notebook's check (run here in a fresh interpreter, as a
kernel would) and the grader's worker (``python -m llmfs.course.grading.worker``, unsandboxed).

Each trick is module source, as a notebook cell or the grader's extraction holds it: it imports
nothing with an ``import`` statement (the static ban reads those), and reaches the checks through
``__import__``, ``sys.modules``, ``importlib``, ``getattr`` and default arguments evaluated when
the function is defined."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from llmfs.course.exercise_checks.spec import draw_cases, expected_outcome, outcomes_match

_SPEC = "llmfs.course.exercise_checks.spec"
_SHORTCUTS = "llmfs.course.exercise_checks.shortcuts"

#: A stand-in for ``call_guarded`` that calls the learner's function with no guard at all.
_PASSTHROUGH = f"""
def _passthrough(shortcuts, call, *args, _m=__import__("sys").modules):
    return _m["{_SHORTCUTS}"].Guarded(result=call(*args))
"""

_MATERIALIZE_BY_THE_LIBRARY = """
    lt = __import__("llmfs.tensor", fromlist=["Tensor"])
    view = lt.as_strided(lt.Tensor.from_vec([len(storage)], storage), shape, strides, base_offset)
    return view.materialize().as_slice().tolist()
"""

_VIEW_BY_THE_REFERENCE = """
    gradients = __import__("sys").modules["llmfs.course.exercise_checks.gradients"]
    case = {
        "storage": view.owner.shape[0],
        "shape": list(view.shape),
        "strides": list(view.strides),
        "base_offset": view.base_offset,
        "grad": [float(v) for v in grad.reshape(-1)],
    }
    return gradients._view_reference(case)
"""

_GRADCHECK_BY_THE_LIBRARY = """
    lt = __import__("llmfs.tensor", fromlist=["gradcheck"])
    try:
        return lt.gradcheck(fn, [x], eps, atol)
    except lt.GradcheckError:
        return False
"""

#: (name, exercise, function, source): each gets the library's answer if the trick works.
TRICKS: list[tuple[str, str, str, str]] = [
    (
        "call_guarded replaced through sys.modules by a default argument",
        "ch02.materialize",
        "materialize",
        _PASSTHROUGH
        + f"""
def _disarm(sys=__import__("sys")):
    setattr(sys.modules["{_SPEC}"], "call_guarded", _passthrough)

def materialize(storage, shape, strides, base_offset, _armed=_disarm()):"""
        + _MATERIALIZE_BY_THE_LIBRARY,
    ),
    (
        "call_guarded replaced in the module's dict through importlib",
        "ch02.materialize",
        "materialize",
        _PASSTHROUGH
        + f"""
def materialize(storage, shape, strides, base_offset,
                _armed=vars(__import__("importlib").import_module("{_SPEC}")).update(
                    call_guarded=_passthrough)):"""
        + _MATERIALIZE_BY_THE_LIBRARY,
    ),
    (
        "the guards' own state emptied through getattr",
        "ch02.materialize",
        "materialize",
        f"""
def _empty(_m=__import__("sys").modules):
    for guard in list(getattr(_m["{_SHORTCUTS}"], "_GUARDS", {{}}).values()):
        for window in guard.windows:
            window.targets.clear()

def materialize(storage, shape, strides, base_offset):
    _empty()"""
        + _MATERIALIZE_BY_THE_LIBRARY,
    ),
    (
        "the checks' own reference answer, with call_guarded replaced",
        "ch09.view_backward",
        "view_backward",
        _PASSTHROUGH
        + f"""
def view_backward(grad, view, _armed=setattr(__import__("sys").modules["{_SPEC}"],
                                              "call_guarded", _passthrough)):"""
        + _VIEW_BY_THE_REFERENCE,
    ),
    (
        "the checks' own reference answer, called plainly",
        "ch09.view_backward",
        "view_backward",
        "def view_backward(grad, view):" + _VIEW_BY_THE_REFERENCE,
    ),
    (
        "a wrong answer with the spec's reference monkeypatched to agree",
        "ch09.view_backward",
        "view_backward",
        """
def _agree(case):
    return [0.0] * case["storage"]

def view_backward(grad, view, _m=__import__("sys").modules):
    spec = _m["llmfs.course.exercise_checks.spec"].SPECS["ch09.view_backward"]
    object.__setattr__(spec, "reference", _agree)
    return [0.0] * view.owner.shape[0]
""",
    ),
    (
        "the library's gradcheck with the spec's shortcut list emptied",
        "ch09.gradcheck",
        "gradcheck",
        """
def gradcheck(fn, x, eps, atol, _armed=object.__setattr__(
        __import__("sys").modules["llmfs.course.exercise_checks.spec"].SPECS["ch09.gradcheck"],
        "shortcuts", None)):"""
        + _GRADCHECK_BY_THE_LIBRARY,
    ),
    (
        "the library's gradcheck with call_guarded replaced through getattr and importlib",
        "ch09.gradcheck",
        "gradcheck",
        _PASSTHROUGH
        + f"""
def gradcheck(fn, x, eps, atol,
              _armed=getattr(__import__("importlib").import_module("{_SPEC}"), "__setattr__")(
                  "call_guarded", _passthrough)):"""
        + _GRADCHECK_BY_THE_LIBRARY,
    ),
]

#: Deeper tricks: the module's dict reached through a function's ``__globals__`` or the module
#: type's own ``__setattr__``, a function's code replaced, a copy of a library function's code.
DEEP_TRICKS: list[tuple[str, str, str, str]] = [
    (
        "call_guarded replaced through a function's __globals__",
        "ch02.materialize",
        "materialize",
        _PASSTHROUGH
        + f"""
def materialize(storage, shape, strides, base_offset,
                _armed=getattr(__import__("sys").modules["{_SPEC}"].run_case,
                               "__globals__").__setitem__("call_guarded", _passthrough)):"""
        + _MATERIALIZE_BY_THE_LIBRARY,
    ),
    (
        "call_guarded replaced through the module type's own __setattr__",
        "ch09.gradcheck",
        "gradcheck",
        _PASSTHROUGH
        + f"""
def gradcheck(fn, x, eps, atol, _t=__import__("types"), _m=__import__("sys").modules,
              _armed=None):
    _t.ModuleType.__setattr__(_m["{_SPEC}"], "call_guarded", _passthrough)"""
        + _GRADCHECK_BY_THE_LIBRARY,
    ),
    (
        "call_guarded's code replaced",
        "ch02.materialize",
        "materialize",
        _PASSTHROUGH
        + f"""
def materialize(storage, shape, strides, base_offset,
                _armed=setattr(__import__("sys").modules["{_SPEC}"].call_guarded, "__code__",
                               _passthrough.__code__)):"""
        + _MATERIALIZE_BY_THE_LIBRARY,
    ),
    (
        "a copy of the library function made from its code before the check",
        "ch02.materialize",
        "materialize",
        """
def _copy(_t=__import__("types"), _m=__import__("sys").modules):
    original = _m["llmfs.tensor.view"].ViewMethods.materialize
    return _t.FunctionType(
        original.__code__, original.__globals__, None, None, original.__closure__
    )

def materialize(storage, shape, strides, base_offset, _own=_copy()):
    lt = __import__("llmfs.tensor", fromlist=["Tensor"])
    offsets = lt.as_strided(lt.Tensor.from_vec([len(storage)], storage), shape, strides,
                            base_offset)
    return _own(offsets).as_slice().tolist()
""",
    ),
]

_NOTEBOOK = """
import json, sys
from llmfs.course.exercise_checks import CHECKS
source, exercise, function, cases = json.loads(sys.stdin.read())
namespace = {"__name__": "__main__"}
try:
    exec(compile(source, "<cell>", "exec"), namespace)
    fn = namespace[function]
    report = CHECKS[exercise](fn, cases=cases, record_attempt=False)
    # Run twice: a trick may change the checks for the check after its first.
    report = CHECKS[exercise](fn, cases=cases, record_attempt=False)
except BaseException as error:
    print(json.dumps({"passed": False, "raised": type(error).__name__, "text": str(error)}))
else:
    print(json.dumps({"passed": report.passed, "raised": None, "text": repr(report)}))
"""


def notebook_check(source: str, exercise: str, function: str, cases: int = 20) -> dict[str, Any]:
    """What the notebook's check says of ``source`` (run as a cell in a fresh interpreter):
    ``{"passed", "raised" (an exception class name, when defining or checking raised), "text"}``."""
    result = subprocess.run(
        [sys.executable, "-c", _NOTEBOOK],
        input=json.dumps([source, exercise, function, cases]),
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "LLMFS_ATTEMPTS": os.devnull},
    )
    lines = result.stdout.strip().splitlines()
    assert lines, result.stderr[-3000:]
    reply: dict[str, Any] = json.loads(lines[-1])
    return reply


def worker_replies(
    tmp_path: Path, source: str, exercise: str, function: str, seed: int = 5, cases: int = 8
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The grader's worker's replies to defining ``source`` and running ``cases`` hidden cases
    of ``exercise`` (seed ``seed``), and the expected outcomes of those cases."""
    from llmfs.course.exercise_checks import SPECS
    from llmfs.course.grading.channel import encode, read_frame

    spec = SPECS[exercise]
    drawn = draw_cases(spec, seed, cases)
    setup = {"memory_mb": 2048, "cpu_seconds": 300, "file_mb": 64, "case_timeout": 20.0}
    requests = [
        {"setup": setup, "id": 0},
        {"define": {"exercise": exercise, "source": source, "function": function}, "id": 1},
        *({"case": list(case), "id": 2 + n} for n, case in enumerate(drawn)),
    ]
    result = subprocess.run(
        [sys.executable, "-m", "llmfs.course.grading.worker"],
        input=b"".join(encode(r) for r in requests),
        capture_output=True,
        cwd=tmp_path,
        timeout=600,
    )
    stream = io.BytesIO(result.stdout)
    replies: list[dict[str, Any]] = []
    while (reply := read_frame(stream)) is not None:
        reply.pop("id", None)
        replies.append(reply)
    return replies, [expected_outcome(spec, tuple(case)) for case in drawn]


def worker_accepts(replies: list[dict[str, Any]], expected: list[dict[str, Any]]) -> bool:
    """True when the worker defined the function and every case's outcome matches."""
    if len(replies) != 2 + len(expected) or replies[1] != {"defined": True}:
        return False
    return all(outcomes_match(got, want) for got, want in zip(replies[2:], expected, strict=True))
