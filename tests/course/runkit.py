"""Each course notebook run once per test process, in-process, as a learner's first "Run All".

:func:`run_code_cells` executes a notebook's code cells in one namespace, in order, and keeps what
each cell showed. :data:`RUNS` runs each published solution and student notebook once, when a test
first asks for it, against its own fresh attempts log, and keeps it for the tests of its chapter:
the chapter acceptance tests (``test_chapters.py``) read what the cells showed, and the parity
test (``test_verdict_parity.py``) reads what each predict exercise's expression gives in the
running solution right after the exercise's cell. conftest.py hands one chapter's tests of both
files to one worker, as one unit, so each notebook runs once per test run.
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import pickle
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import IPython.core.display_functions
import IPython.display
import pytest
from IPython.core.formatters import PlainTextFormatter

from llmfs.course.exercises.entries import is_plain
from llmfs.course.exercises.run import run
from llmfs.course.grading.truths import _picklable
from llmfs.course.manifest import Chapter, load_manifest
from llmfs.course.notebooks import cell_source, exercise_cells, read_notebook

REPO = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest(REPO / "course" / "manifest.toml")


@dataclass
class Shown:
    """What one executed code cell displayed: ``value`` is its last expression's value (if
    any), ``printed`` the text a notebook would show for the cell, in order: what ``print`` and
    ``display(...)`` wrote, then the text/plain form of ``value``; ``names`` is the notebook's
    namespace right after the cell ran."""

    position: int
    value: Any
    names: dict[str, Any]
    printed: str


def plain_text(value: Any) -> str:
    """``value`` as a notebook shows it as text/plain: IPython's plain-text formatter, which
    uses a widget's own text/plain repr (every llmfs widget's is its ``repr``)."""
    return str(PlainTextFormatter()(value))


def run_code_cells(
    path: Path, label: str, after: Callable[[int, dict[str, Any]], None] | None = None
) -> list[Shown]:
    """Executes a notebook's code cells in one namespace, in order, like a kernel would; returns
    what each cell displayed and printed. ``display(...)`` (IPython's, as the notebooks import
    it) writes the text/plain form of each object into the cell's printed text, as a notebook
    would show it. ``after(position, namespace)``, when given, runs right after each code cell,
    before the next one changes anything. An exception fails the test with the cell named."""
    notebook = read_notebook(path, label)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    shown: list[Shown] = []

    def show(*objects: Any, **_: Any) -> None:
        for item in objects:
            print(plain_text(item))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(IPython.display, "display", show)
        patch.setattr(IPython.core.display_functions, "display", show)
        for position, cell in enumerate(notebook["cells"], start=1):
            if cell["cell_type"] != "code":
                continue
            tree = ast.parse(cell_source(cell))
            last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            body = ast.Module(body=tree.body[:-1] if last else tree.body, type_ignores=[])
            value = None
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
                    exec(compile(body, f"{label} cell #{position}", "exec"), namespace)
                    if last is not None:
                        expression = ast.Expression(body=last.value)
                        code = compile(expression, f"{label} cell #{position}", "eval")
                        value = eval(code, namespace)
                    if value is not None:
                        print(plain_text(value))
            except Exception as error:
                pytest.fail(f"{label} cell #{position} raised {type(error).__name__}: {error}")
            shown.append(Shown(position, value, dict(namespace), printed.getvalue()))
            if after is not None:
                after(position, namespace)
    return shown


@dataclass
class NotebookRun:
    """One notebook run: what each code cell showed, the attempts log its checks wrote, and, for
    a solution, each predict exercise's outcome in the running notebook (exercise id -> the
    outcome pickled as the grader's truths are, or the error's text when the expression
    raised), taken right after the exercise's cell."""

    shown: list[Shown]
    attempts_log: Path
    outcomes: dict[str, Any] = field(default_factory=dict)


def _outcome_probe(chapter: Chapter, outcomes: dict[str, Any]) -> Callable[[int, dict], None]:
    notebook = read_notebook(REPO / chapter.solution, chapter.solution)
    cells = exercise_cells(notebook, chapter.solution)
    at: dict[int, list[Any]] = {}
    for exercise in chapter.exercises:
        if exercise.kind == "predict":
            at.setdefault(cells[exercise.id], []).append(exercise)

    def probe(position: int, namespace: dict[str, Any]) -> None:
        names = {k: v for k, v in namespace.items() if not k.startswith("__")}
        for exercise in at.get(position, []):
            plain = is_plain(list(exercise.fields))
            try:
                truth: Any = pickle.loads(_picklable(run(exercise.expression, names, plain=plain)))
            except Exception as error:
                truth = f"{type(error).__name__}: {error}"
            outcomes[exercise.id] = truth

    return probe


class _Runs:
    """The process's notebook runs, by the notebook's path relative to the repository: those of
    the chapter last asked for (asking for another chapter's notebook lets them go; asked for
    again, a notebook runs again)."""

    def __init__(self) -> None:
        self._runs: dict[str, NotebookRun] = {}
        # Next to the run's own attempts log (conftest.py makes its folder and removes it at the
        # end of the run), so the logs never land in the checkout or outlive the run.
        shared = os.environ.get("LLMFS_ATTEMPTS")
        parent = Path(shared).parent if shared else Path(tempfile.gettempdir())
        self._logs = Path(tempfile.mkdtemp(prefix="llmfs-runs-", dir=parent))

    def __getitem__(self, relative: str) -> NotebookRun:
        if relative not in self._runs:
            chapter = next(
                c for c in MANIFEST.published_chapters if relative in (c.solution, c.notebook)
            )
            # One chapter's runs at a time (a chapter's tests are one unit of work): the runs of
            # the chapter before are let go, so a worker never holds every chapter's models.
            for other in [r for r in self._runs if r not in (chapter.solution, chapter.notebook)]:
                del self._runs[other]
            log = self._logs / f"{len(self._runs)}-{Path(relative).stem}.jsonl"
            outcomes: dict[str, Any] = {}
            after = _outcome_probe(chapter, outcomes) if relative == chapter.solution else None
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("LLMFS_ATTEMPTS", str(log))
                shown = run_code_cells(REPO / relative, relative, after)
            self._runs[relative] = NotebookRun(shown, log, outcomes)
        return self._runs[relative]


#: Every published notebook, run once per process when first asked for.
RUNS = _Runs()

__all__ = ["RUNS", "NotebookRun", "Shown", "plain_text", "run_code_cells"]
