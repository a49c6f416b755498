"""A predict exercise's fixture: the context its expression is evaluated in.

A check must depend on the learner's answer alone, not on what their kernel happens to hold (a
learner who ran ahead and came back may have rebound ``t`` in a later ``for t in ...`` loop, or
changed a tensor the exercise reads). So an exercise's expression is never evaluated in the
notebook's names: it is evaluated in a fresh namespace built by its **fixture**.

The rule: the code cells of the chapter's notebook tagged ``fixture`` define the names the
chapter's predict exercises ask about; the fixture of an exercise is every ``fixture`` cell
above the exercise's cell (the one tagged ``exercise:<id>``), run in notebook order in a fresh
namespace. The cells are read from the course's own copy of the notebook (the student notebook
``llmfs build`` writes, whose fixture cells are the solution's, unchanged; the solution when the
notebook is absent), never from the learner's copy, so editing or re-running a cell in the
learner's notebook changes no verdict. A fixture cell defines names and may print (its output is
discarded); it must not depend on an exercise the learner writes.

The notebook's ``check``, ``llmfs check`` (:func:`~llmfs.course.exercises.record.judge_record`)
and the tests all evaluate through :func:`exercise_outcome` (or :func:`fixture_namespace`).
``llmfs grade`` judges against the same outcomes, evaluated from the solution's fixture cells
(:mod:`llmfs.course.grading.truths`), and the course's tests hold the solution's literals right
against them.

A course whose chapter notebook has no ``fixture`` cell (a throwaway course in a test) has no
fixtures: :func:`fixture_sources` returns ``None`` and the caller's namespace is used.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.course import CourseError
from llmfs.course.manifest import load_manifest

if TYPE_CHECKING:
    from llmfs.course.exercises.run import Outcome

#: The tag of a cell that defines names for the chapter's predict exercises.
FIXTURE_TAG = "fixture"


class FixtureError(CourseError):
    """An exercise's fixture could not be built: the course's notebook is unreadable, or a
    fixture cell failed. The learner's answer is not the cause, so a check spends nothing."""


@dataclass(frozen=True)
class _Cells:
    """The fixture cells of one notebook and where each exercise's cell is."""

    fixtures: tuple[tuple[int, str], ...]  # (cell index, source)
    exercises: dict[str, int]


_READ: dict[tuple[str, int, int], _Cells] = {}


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _cells(path: Path) -> _Cells:
    try:
        stat = path.stat()
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        if key in _READ:
            return _READ[key]
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise FixtureError(f"{path}: cannot read the chapter's notebook ({error})") from None
    fixtures: list[tuple[int, str]] = []
    exercises: dict[str, int] = {}
    for index, cell in enumerate(notebook.get("cells", [])):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.get("cell_type") == "code" and FIXTURE_TAG in tags:
            fixtures.append((index, _source(cell)))
        for tag in tags:
            if isinstance(tag, str) and tag.startswith("exercise:"):
                exercises[tag.removeprefix("exercise:")] = index
    found = _Cells(tuple(fixtures), exercises)
    _READ[key] = found
    return found


def _notebook_of(exercise_id: str, manifest: Any) -> tuple[Path, str]:
    course = manifest if manifest is not None else load_manifest()
    exercise = course.exercise(exercise_id)
    chapter = course.chapter(exercise.chapter)
    for relative in (chapter.notebook, chapter.solution):
        path = Path(course.root) / relative
        if path.is_file():
            return path, relative
    raise FixtureError(f"{exercise_id}: the course has no notebook {chapter.notebook}")


def fixture_sources(exercise_id: str, manifest: Any = None) -> tuple[str, ...] | None:
    """The sources of the fixture cells above ``exercise_id``'s cell, in order; ``None`` when
    the chapter's notebook (or the exercise's cell) is missing or the notebook has no fixture
    cell: that course defines no fixtures. Raises :class:`FixtureError` for an unreadable
    notebook and :class:`CourseError` for an unknown exercise."""
    try:
        path, _ = _notebook_of(exercise_id, manifest)
    except FixtureError:
        return None
    return notebook_fixture_sources(path, exercise_id)


def notebook_fixture_sources(path: Path, exercise_id: str) -> tuple[str, ...] | None:
    """The sources of the fixture cells above ``exercise_id``'s cell in the notebook at
    ``path``, in order; ``None`` when the notebook has no fixture cell or no cell tagged for
    the exercise. The student notebook and its solution give the same sources (the build
    copies fixture cells unchanged and in order). Raises :class:`FixtureError` for an
    unreadable notebook."""
    cells = _cells(Path(path))
    position = cells.exercises.get(exercise_id)
    if not cells.fixtures or position is None:
        return None
    return tuple(source for index, source in cells.fixtures if index < position)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Discards what fixture cells print or display: their output belongs to the notebook's
    own cells, not to a check."""
    shell = None
    try:
        from IPython import get_ipython  # an optional dependency: only a kernel has a shell

        shell = get_ipython()
    except ImportError:
        pass
    publisher = getattr(shell, "display_pub", None)
    saved = getattr(publisher, "publish", None)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if publisher is not None and saved is not None:
            publisher.publish = lambda *args, **kwargs: None
        try:
            yield
        finally:
            if publisher is not None and saved is not None:
                publisher.publish = saved


def fixture_namespace(exercise_id: str, manifest: Any = None) -> dict[str, Any] | None:
    """A fresh namespace holding what the exercise's fixture cells define (see the module
    docstring); ``None`` when the course defines no fixture for it. Raises
    :class:`FixtureError` naming the cell and the error when a fixture cell fails (an error of
    the course, not of the learner's answer)."""
    sources = fixture_sources(exercise_id, manifest)
    if sources is None:
        return None
    return namespace_of(exercise_id, sources)


def namespace_of(exercise_id: str, sources: tuple[str, ...]) -> dict[str, Any]:
    """A fresh namespace holding what ``sources`` (an exercise's fixture cells, in order)
    define, their output discarded. Raises :class:`FixtureError` naming the cell and the error
    when one fails."""
    # Only what the cells define, as in the notebook: the tensor library's names (``sum``,
    # ``max``...) are added for the expression by ``run``, never under the cells' functions.
    namespace: dict[str, Any] = {"__name__": "__llmfs_fixture__"}
    with _quiet():
        for number, source in enumerate(sources, start=1):
            try:
                code = compile(source, f"<fixture of {exercise_id}, cell {number}>", "exec")
                exec(code, namespace)
            except Exception as error:  # any failure is the fixture's, reported as one
                raise FixtureError(
                    f"{exercise_id}: fixture cell {number} of {len(sources)} failed with "
                    f"{type(error).__name__}: {error}"
                ) from None
    return namespace


def exercise_outcome(
    exercise_id: str, namespace: Mapping[str, Any] | None = None, *, manifest: Any = None
) -> Outcome:
    """What the predict exercise's expression gives, evaluated in its fixture (``namespace``
    only when the course defines none): the one evaluation behind the notebook's ``check``,
    ``llmfs check`` and the tests, whose :meth:`Outcome.truth` is each field's true value.
    Raises :class:`CourseError` for an exercise that is not a predict exercise,
    :class:`FixtureError` when its fixture fails and
    :class:`~llmfs.course.exercises.describe.ExpressionError` when the expression fails."""
    # Imported here: the build reads FIXTURE_TAG without loading the tensor library.
    from llmfs.course.exercises.entries import is_plain, predict_exercise
    from llmfs.course.exercises.run import run

    exercise = predict_exercise(exercise_id, manifest)
    fixture = fixture_namespace(exercise_id, manifest)
    scope = namespace if fixture is None else fixture
    return run(exercise.expression, scope, plain=is_plain(list(exercise.fields)))


__all__ = [
    "FIXTURE_TAG",
    "FixtureError",
    "exercise_outcome",
    "fixture_namespace",
    "fixture_sources",
    "namespace_of",
    "notebook_fixture_sources",
]
