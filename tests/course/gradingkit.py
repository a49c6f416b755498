"""Submissions built from the course's own notebooks, for the grader's tests and benchmark.

Everything is derived from the manifest and the notebooks in the repository (iterating the
exercises), so the tests follow the chapters as they change:

* :func:`correct_notebook`: the student notebook with every exercise cell replaced by the
  solution's cell (fully correct);
* :func:`answered_notebook`: the student notebook with chosen predict fields filled in;
* :func:`wrong_value`: a literal that surely differs from a solution's literal;
* :func:`learner_copies` and :func:`run_check`: a learner's folder of chapter notebooks and
  ``llmfs check`` run on it (the self-check's tests share them);
* :func:`grade_class`, :func:`scores_every_checked_point` and :func:`scores_nothing`: one
  ``llmfs grade`` run over a chapter's class of submissions and what the chapters' grading
  tests hold of its gradebook.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import random
import re
import shutil
import signal
from pathlib import Path
from typing import Any

from llmfs.cli import main as llmfs_main
from llmfs.course.exercise_checks.spec import SPECS, expected_outcome
from llmfs.course.grading import extract
from llmfs.course.grading.gradebook import Gradebook
from llmfs.course.grading.key import ChapterKey, load_chapter_key
from llmfs.course.manifest import Chapter, load_manifest

REPO = Path(__file__).resolve().parents[2]
MANIFEST = load_manifest(REPO / "course" / "manifest.toml")
_FIELD_LINE = re.compile(r"^(?P<head>\s*(?P<name>\w+)\s*=\s*)None(?P<tail>,?)(\s*#.*)?$")


def default_sigint() -> None:
    """For ``preexec_fn`` of a grader a test interrupts: SIGINT as a terminal gives it to a
    command (default disposition, not blocked), whatever the test process inherited. A shell
    starts a background job with SIGINT ignored, and a program started ignoring it (the grader
    too, rightly) never sees a Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def key_of(chapter: Chapter) -> ChapterKey:
    """The chapter's answer key, read from the repository's solutions."""
    return load_chapter_key(MANIFEST, chapter)


def checked_implements(key: ChapterKey) -> list[Any]:
    """The chapter's implement exercises that have a hidden check and a function to write."""
    return [
        item
        for item in key.exercises
        if item.exercise.kind == "implement"
        and item.spec is not None
        and item.function
        and extract.function_definition(item.blank_source, item.function) is not None
    ]


def grading_chapter() -> Chapter:
    """The published chapter that exercises the grader at the least cost: it has predict and
    implement exercises with hidden checks (one taking plain JSON arguments, for the table
    test), and, among those, the fewest code cells to run in each submission's kernel."""

    def weight(chapter: Chapter) -> tuple[bool, bool, int]:
        key = key_of(chapter)
        implements = checked_implements(key)
        plain = any(getattr(item.spec, "prepare", None) is None for item in implements)
        predicts = any(item.exercise.kind == "predict" for item in key.exercises)
        cells = sum(1 for c in student_notebook(chapter)["cells"] if c["cell_type"] == "code")
        return (plain, predicts, -cells)

    return max(MANIFEST.published_chapters, key=weight)


def student_notebook(chapter: Chapter) -> dict[str, Any]:
    """The blank student notebook as JSON data (a fresh copy)."""
    return json.loads((REPO / chapter.notebook).read_text(encoding="utf-8"))


def solution_notebook(chapter: Chapter) -> dict[str, Any]:
    """The solution notebook as JSON data (a fresh copy)."""
    return json.loads((REPO / chapter.solution).read_text(encoding="utf-8"))


def _positions(notebook: dict[str, Any]) -> dict[str, int]:
    return {k: v[0] for k, v in extract.tagged_cells(notebook).items()}


def correct_notebook(chapter: Chapter) -> dict[str, Any]:
    """The student notebook with every exercise cell's source taken from the solution."""
    student = student_notebook(chapter)
    solution = solution_notebook(chapter)
    mine, theirs = _positions(student), _positions(solution)
    for exercise in chapter.exercises:
        cell = student["cells"][mine[exercise.id] - 1]
        cell["source"] = extract.source_of(solution["cells"][theirs[exercise.id] - 1])
    return student


def set_source(notebook: dict[str, Any], exercise_id: str, source: str) -> dict[str, Any]:
    """A copy of the notebook with the exercise cell's source replaced."""
    result = copy.deepcopy(notebook)
    position = _positions(result)[exercise_id]
    result["cells"][position - 1]["source"] = source
    return result


def fill_fields(blank_source: str, values: dict[str, Any]) -> str:
    """The blank predict cell with ``values`` written in place of their ``None``."""
    lines = []
    for line in blank_source.splitlines():
        match = _FIELD_LINE.match(line)
        if match and match.group("name") in values:
            literal = repr(values[match.group("name")])
            line = f"{match.group('head')}{literal}{match.group('tail')}"
        lines.append(line)
    return "\n".join(lines)


def wrong_value(value: Any) -> Any:
    """A literal of the same kind that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1000
    if isinstance(value, str):
        return "NotTheAnswerError"
    if isinstance(value, (list, tuple)):
        return [*list(value), 999]
    return None


def code_cell(source: str) -> dict[str, Any]:
    """A new untagged code cell."""
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": f"extra{abs(hash(source)) % 10**8}",
        "metadata": {},
        "outputs": [],
        "source": source,
    }


def with_cell_first(notebook: dict[str, Any], source: str) -> dict[str, Any]:
    """A copy with a code cell inserted before every other cell."""
    result = copy.deepcopy(notebook)
    result["cells"].insert(0, code_cell(source))
    return result


def hard_coded_source(item: Any) -> str:
    """An implement function that looks its answers up in a table of the VISIBLE cases (the
    notebook's seed): it passes the notebook's check and nothing else."""
    spec = item.spec
    cases = spec.make_cases(random.Random(spec.visible_seed), spec.cases)
    table = {json.dumps(list(args)): expected_outcome(spec, args) for args in cases}
    return (
        f"import builtins\nimport json\n_TABLE = {table!r}\n\n"
        f"def {item.function}(*args):\n"
        "    outcome = _TABLE[json.dumps(list(args))]\n"
        "    if 'error' in outcome:\n"
        "        raise getattr(builtins, outcome['error'], ValueError)()\n"
        "    return outcome['value']\n"
    )


def specs_present() -> bool:
    """True when at least one implement exercise has a hidden check."""
    return bool(SPECS)


def learner_copies(folder: Path, which: str) -> Path:
    """``folder`` holding every published chapter's ``which`` notebook (``"solution"`` or
    ``"notebook"``) under the student notebook's name, as a learner's copies are named."""
    for chapter in MANIFEST.published_chapters:
        shutil.copy(REPO / getattr(chapter, which), folder / Path(chapter.notebook).name)
    return folder


def run_check(folder: Path, *extra: str) -> tuple[int, str]:
    """``llmfs check --dir folder --cell-timeout 60 *extra``: its exit status and what it
    printed on stdout (stderr is dropped)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(["check", "--dir", str(folder), "--cell-timeout", "60", *extra])
    return code, out.getvalue()


def sandbox_limits(*limits: str) -> list[str]:
    """``llmfs grade``'s ``limits``, with ``--no-sandbox`` added where bubblewrap is absent (the
    grader refuses to run students' code unsandboxed unless told)."""
    return [*limits, *([] if shutil.which("bwrap") else ["--no-sandbox"])]


def grade_class(
    root: Path,
    chapter: Chapter,
    submissions: dict[str, dict[str, Any]],
    *options: str,
) -> dict[tuple[str, str], Any]:
    """Writes each of ``submissions`` (student name -> notebook) to ``root/submissions``, runs
    ``llmfs grade`` over them for ``chapter`` with ``options`` (seed, limits), and returns the
    gradebook's rows by ``(student, exercise id)``. Fails the calling test, with what the grader
    printed, when it exits with an error."""
    folder = root / "submissions"
    folder.mkdir()
    for name, notebook in submissions.items():
        (folder / f"{name}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")
    out = io.StringIO()
    argv = ["grade", str(folder), "--chapter", chapter.id, "--out", str(root / "out"), *options]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(argv)
    assert code == 0, out.getvalue()
    with Gradebook(root / "out" / "gradebook.sqlite") as book:
        return {(row.student, row.exercise): row for row in book.rows()}


def scores_every_checked_point(
    rows: dict[tuple[str, str], Any], chapter: Chapter, student: str, *, but: tuple[str, ...] = ()
) -> None:
    """Every checked exercise of ``chapter`` but those in ``but`` earned ``student`` its points,
    and each explain exercise waits for a person (``pending``)."""
    for exercise in chapter.exercises:
        row = rows[(student, exercise.id)]
        if exercise.kind == "explain":
            assert row.status == "pending", (exercise.id, row.status)
        elif exercise.id not in but:
            assert row.score == exercise.points, (exercise.id, row.status, row.message)


def scores_nothing(rows: dict[tuple[str, str], Any], chapter: Chapter, student: str) -> None:
    """No exercise of ``chapter`` earned ``student`` a point."""
    for exercise in chapter.exercises:
        assert not rows[(student, exercise.id)].score, (exercise.id, rows[(student, exercise.id)])


def hostile_class(folder: Path, honest: int, hostile: bool, fifo: str = "") -> set[str]:
    """A class folder of ``honest`` correct submissions of the grading chapter, one of them
    named with bytes that are not UTF-8 (``Zo\\xeb.ipynb``, student ``Zo\\xeb``), and with
    ``hostile``: ``fifo.ipynb`` (a correct notebook whose first cell is ``fifo``), ``big.ipynb``
    (a correct notebook of 63 MiB, a stream output) and ``bomb.ipynb`` (24 MiB of nested JSON
    lists). Returns the honest students' ids."""
    chapter = grading_chapter()
    correct = json.dumps(correct_notebook(chapter)).encode()
    folder.mkdir(parents=True)
    ids = set()
    for number in range(honest - 1):
        (folder / f"s{number:02d}.ipynb").write_bytes(correct)
        ids.add(f"s{number:02d}")
    (Path(os.fsdecode(os.fsencode(folder) + b"/Zo\xeb.ipynb"))).write_bytes(correct)
    ids.add("Zo\\xeb")
    if hostile:
        (folder / "fifo.ipynb").write_text(
            json.dumps(with_cell_first(correct_notebook(chapter), fifo)), encoding="utf-8"
        )
        big = correct_notebook(chapter)
        cell = next(c for c in big["cells"] if c["cell_type"] == "code")
        text = "A" * (63 * 1024 * 1024 - len(correct))
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": text}]
        (folder / "big.ipynb").write_text(json.dumps(big), encoding="utf-8")
        bomb = b'{"cells": [], "metadata": {}, "x": [' + b"[]," * (8 << 20) + b"[]]}"
        (folder / "bomb.ipynb").write_bytes(bomb)
    return ids
