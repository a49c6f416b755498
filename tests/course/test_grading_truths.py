"""The grader's truths (:func:`~llmfs.course.grading.truths.solution_truths`): each predict
exercise's outcome where the notebook's check evaluates it, computed once for every process that
shares the cache, and computed again when the solution changes.

* A solution with fixture cells: each expression is evaluated in a fresh namespace built by the
  fixture cells above its exercise's cell, as the check does; what later cells (or cells that are
  not fixtures) do to the same names does not reach it.
* A solution without fixture cells (a course that defines none): its cells run in one namespace,
  each expression evaluated right after its exercise's cell.
* Workers sharing the cache folder compute an entry once; an edited solution is a new entry.

Every solution here counts its runs: a cell appends a line to ``runs.txt`` beside the notebook
(the truths are computed with the solution's folder as the working folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from coursekit import code, notebook, write_notebook

from llmfs.course import CourseError
from llmfs.course.exercises.fixtures import FIXTURE_TAG
from llmfs.course.grading import truths

pytestmark = pytest.mark.slow  # each computation starts a child interpreter

COUNT_RUN = "with open('runs.txt', 'a') as _runs:\n    _runs.write('run\\n')\n"
IMPORTS = "from llmfs.tensor import Tensor\n"


def _solution(folder: Path, *, fixtures: bool, count: str = COUNT_RUN) -> Path:
    """A solution of two predict exercises: ``x`` is 3 rows at q1 and 5 rows at q2, and a cell
    that is not a fixture rebinds ``x`` to 7 rows after q1 (learner-side state: a loop variable
    reused, a tensor edited in a demonstration)."""
    cells = [
        code("setup", count + IMPORTS + "x = Tensor.zeros([3, 2])"),
        code("demo", "x = Tensor.zeros([7, 2])"),
        code("q1", "q1 = None  # the learner's prediction of x.view()"),
        code("more", "x = Tensor.zeros([5, 2])"),
        code("q2", "q2 = None  # the learner's prediction of x[9]"),
    ]
    if fixtures:
        cells[0]["metadata"]["tags"] = [FIXTURE_TAG]
        cells[3]["metadata"]["tags"] = [FIXTURE_TAG]
    cells[2]["metadata"]["tags"] = ["exercise:c.q1"]
    cells[4]["metadata"]["tags"] = ["exercise:c.q2"]
    path = folder / "solutions" / "c.ipynb"
    write_notebook(path, notebook(*cells))
    return path


EXERCISES = [("c.q1", "x.view()", False), ("c.q2", "x[9]", False)]


def _fresh(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    # A cache of this test's own, and no outcome remembered by this process.
    monkeypatch.setenv("LLMFS_CACHE_DIR", str(cache))
    monkeypatch.setattr(truths, "_MEMORY", {})


def _shape(outcome: Any) -> tuple[int, ...]:
    return tuple(outcome.row.layout.shape)


def _runs(solution: Path) -> int:
    counter = solution.parent / "runs.txt"
    return len(counter.read_text().splitlines()) if counter.is_file() else 0


def test_a_solution_with_fixtures_is_judged_in_each_exercises_fixture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fresh(monkeypatch, tmp_path / "cache")
    solution = _solution(tmp_path, fixtures=True)
    found = truths.solution_truths(solution, EXERCISES)
    # q1's fixture is the first cell alone: the 7-row demo cell is not a fixture.
    assert _shape(found["c.q1"]) == (3, 2)
    assert found["c.q2"].row.error == "IndexOutOfBoundsError"
    # One namespace per exercise: the first fixture cell ran for each of the two.
    assert _runs(solution) == 2


def test_a_solution_without_fixtures_runs_its_cells_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fresh(monkeypatch, tmp_path / "cache")
    solution = _solution(tmp_path, fixtures=False)
    found = truths.solution_truths(solution, EXERCISES)
    assert _shape(found["c.q1"]) == (7, 2)  # the notebook's names at q1's cell
    assert found["c.q2"].row.error == "IndexOutOfBoundsError"
    assert _runs(solution) == 1


def test_a_fixture_that_fails_is_the_courses_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fresh(monkeypatch, tmp_path / "cache")
    solution = _solution(tmp_path, fixtures=True, count="raise RuntimeError('broken fixture')\n")
    with pytest.raises(CourseError, match=r"could not be run for the key.*broken fixture"):
        truths.solution_truths(solution, EXERCISES)


def test_outcomes_are_kept_and_an_edited_solution_is_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fresh(monkeypatch, tmp_path / "cache")
    solution = _solution(tmp_path, fixtures=True)
    first = truths.solution_truths(solution, EXERCISES)
    assert _runs(solution) == 2
    monkeypatch.setattr(truths, "_MEMORY", {})  # another process: only the folder is shared
    again = truths.solution_truths(solution, EXERCISES)
    assert _runs(solution) == 2 and repr(again) == repr(first)
    # The instructor edits the solution: a new entry, computed from the new cells.
    data = json.loads(solution.read_text())
    data["cells"][0]["source"] = COUNT_RUN + IMPORTS + "x = Tensor.zeros([4])"
    solution.write_text(json.dumps(data))
    edited = truths.solution_truths(solution, EXERCISES)
    assert _runs(solution) == 4 and _shape(edited["c.q1"]) == (4,)


_WORKER = """
import sys
from pathlib import Path
from llmfs.course.grading.truths import solution_truths
found = solution_truths(Path(sys.argv[1]), [("c.q1", "x.view()", False), ("c.q2", "x[9]", False)])
print(tuple(found["c.q1"].row.layout.shape))
"""


def test_processes_sharing_the_cache_compute_an_entry_once(tmp_path: Path) -> None:
    # Three processes (a suite's workers, say) ask for the same truths at once: one computes,
    # the others wait on the entry's lock and read its result.
    solution = _solution(tmp_path, fixtures=True)
    env = {**os.environ, "LLMFS_CACHE_DIR": str(tmp_path / "cache")}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(solution)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    outputs = [worker.communicate(timeout=300) for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0, 0], outputs
    assert [out.strip() for out, _ in outputs] == ["(3, 2)"] * 3
    assert _runs(solution) == 2  # one computation: the fixture's first cell, once per exercise
    assert not list((tmp_path / "cache" / "truths").glob("*.part"))


def test_the_cache_key_follows_the_code_that_computes_outcomes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The library's digest (part of every entry's key) changes with this module, which decides
    # how outcomes are computed, though the rest of the grading code is left out of it.
    before = truths._library_digest()
    read = Path.read_bytes

    def edited(path: Path) -> bytes:
        data = read(path)
        return data + b"\n# edited\n" if path.as_posix().endswith(truths._THIS) else data

    monkeypatch.setattr(Path, "read_bytes", edited)
    assert truths._library_digest() != before
