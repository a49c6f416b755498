"""The grader, its sandbox worker and every chapter's checks load no widget: checks return data
(a :class:`~llmfs.course.exercises.verdict.Verdict`, a report), and only the widgets draw.

Each import runs in a fresh interpreter, so a module that some earlier test loaded cannot hide a
widget import; the test fails naming the widget modules that were loaded and who asked."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llmfs.course.exercise_checks.spec import SPECS

#: Every checks module of every chapter (the package's modules, as registered by the specs).
CHECK_MODULES = sorted(
    {spec.reference.__module__ for spec in SPECS.values()}
    | {
        "llmfs.course.exercise_checks",
        "llmfs.course.exercise_checks.spec",
        "llmfs.course.exercise_checks.report",
    }
)

ENTRY_POINTS = [
    "llmfs.course.grading.grade",
    "llmfs.course.grading.score",
    "llmfs.course.grading.worker",
    "llmfs.course.grading.selfcheck",
    "llmfs.course.grading.truths",
    "llmfs.course.exercises.verdict",
    *[m for m in CHECK_MODULES if m.startswith("llmfs.course.")],
]

_PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
drawn = [m for m in sys.modules if m == "llmfs.widgets" or m.startswith("llmfs.widgets.")]
print(json.dumps(sorted(drawn)))
"""


@pytest.mark.parametrize("module", ENTRY_POINTS)
def test_importing_loads_no_widget(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, module], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [], module


def test_a_widget_import_is_seen() -> None:
    # The probe itself can fail: a module that draws is reported.
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "llmfs.widgets.text"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "llmfs.widgets.text" in json.loads(done.stdout.strip().splitlines()[-1])
