"""The truth of every predict exercise, as the notebook's check sees it: the :class:`Outcome` of
the exercise's expression evaluated where the check evaluates it.

The notebook's ``check`` and ``llmfs check`` judge a prediction against the outcome of the
exercise's expression in its **fixture** (the chapter's cells tagged ``fixture`` above the
exercise's cell, run in a fresh namespace: :mod:`llmfs.course.exercises.fixtures`); the grader
must judge against the same outcome, not against the solution's literals, or it would read an
answer by other rules (an error named by its beginning, a base class of the raised error, values
flattened, a scalar as a one-value list, "yes" for True) and name fewer mistakes (the general
detectors read the outcome's view and request). So :func:`solution_truths` evaluates each
predict exercise's expression in the fixture built from the SOLUTION notebook's fixture cells
(the build copies them unchanged into the student notebook, so they are the check's). A course
whose solution has no fixture cell has no fixtures, and its check reads the notebook's own names:
there the solution's code cells run in one namespace up to its last predict exercise, each
exercise's expression evaluated right after its cell. Either way the work is done in a child
process (fixtures and solutions may draw widgets, which the grader never loads), and the
outcomes come back pickled: they hold only the tensor library's values and plain data.

The solutions are the instructor's own trusted code; the learner's code never runs here. The
outcomes are computed once per solution file and process, and kept in ``$LLMFS_CACHE_DIR/truths``
or ``~/.cache/llmfs/truths`` keyed by the solution's bytes, the expressions and the library's
source (so an edited solution or library computes them again). Processes sharing the cache
(a class graded in parallel, a test suite's workers) compute an entry once: the first takes the
entry's lock and the others wait for its result; an entry is written whole (to a temporary name,
then renamed) or not at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from llmfs.course import CourseError

#: Seconds a solution may take to reach its last predict exercise.
TRUTH_TIMEOUT = 1800.0

_LOCK = threading.Lock()
_MEMORY: dict[str, dict[str, Any]] = {}


#: What an outcome does not depend on: the code that judges, draws or grades it (a new
#: detector reads the same outcome). Everything else of the package computes outcomes.
_JUDGING = (
    "course/grading/",
    "course/exercise_checks/",
    "widgets/",
    "course/exercises/verdict.py",
    "course/exercises/judge.py",
    "course/exercises/compare.py",
    "course/exercises/feedback.py",
    "course/exercises/misconceptions.py",
    "course/exercises/detectors.py",
    "course/exercises/op_detectors.py",
    "course/exercises/api.py",
    "course/exercises/state.py",
    "course/exercises/record.py",
    "course/exercises/hints.py",
    "course/exercises/reveals.py",
    "course/exercises/tables.py",
)


#: This module: it decides how outcomes are computed, so it is part of the digest.
_THIS = "course/grading/truths.py"


def _library_digest() -> str:
    # The outcomes depend on the library that computed them: a change of its source makes a
    # new cache entry.
    root = Path(__file__).resolve().parents[2]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        if name.startswith(_JUDGING) and name != _THIS:
            continue
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


_LIBRARY: list[str] = []


def _cache_folder() -> Path:
    root = os.environ.get("LLMFS_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "llmfs") / "truths"


def solution_truths(solution: Path, exercises: Sequence[tuple[str, str, bool]]) -> dict[str, Any]:
    """Exercise id -> the :class:`~llmfs.course.exercises.run.Outcome` of its expression right
    after its cell of ``solution``, for each ``(id, expression, plain)`` of ``exercises``; an
    exercise whose expression failed there maps to the error's text (a ``str``).

    Raises :class:`CourseError` when the solution cannot be run to its last predict exercise
    (a cell raises, or it takes longer than :data:`TRUTH_TIMEOUT`)."""
    if not exercises:
        return {}
    data = Path(solution).read_bytes()
    if not _LIBRARY:
        _LIBRARY.append(_library_digest())
    request = json.dumps([str(Path(solution).resolve()), [list(e) for e in exercises]])
    key = hashlib.sha256(data + request.encode() + _LIBRARY[0].encode()).hexdigest()
    with _LOCK:
        if key in _MEMORY:
            return _MEMORY[key]
        cached = _cache_folder() / f"{key}.pickle"
        found = _read_cached(cached)
        if found is None:
            with _entry_lock(cached):
                # Another process may have computed the entry while this one waited.
                found = _read_cached(cached)
                if found is None:
                    found = _compute(Path(solution), request)
                    with contextlib.suppress(OSError):
                        cached.parent.mkdir(parents=True, exist_ok=True)
                        partial = cached.with_suffix(f".{os.getpid()}.part")
                        partial.write_bytes(pickle.dumps(_pickled(found)))
                        partial.replace(cached)
        _MEMORY[key] = found
        return found


def _read_cached(cached: Path) -> dict[str, Any] | None:
    """The outcomes stored at ``cached``; ``None`` when there are none or they are damaged
    (then they are computed again)."""
    if not cached.is_file():
        return None
    with contextlib.suppress(Exception):
        return _unpickle(cached.read_bytes())
    return None


@contextlib.contextmanager
def _entry_lock(cached: Path) -> Iterator[None]:
    """Holds an exclusive lock on the cache entry ``cached`` (a ``.lock`` file beside it, locked
    with ``flock``, which the system releases when the process ends however it ends), so that
    processes sharing the cache compute an entry once. Without ``fcntl`` or a writable cache
    folder there is no lock: each process computes for itself, which is slower but gives the
    same outcomes."""
    handle = None
    try:
        import fcntl

        cached.parent.mkdir(parents=True, exist_ok=True)
        handle = open(cached.with_suffix(".lock"), "a+b")  # held across the yield
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    except (ImportError, OSError):
        pass
    try:
        yield
    finally:
        if handle is not None:
            handle.close()  # closing the file releases its lock


def _pickled(found: dict[str, Any]) -> dict[str, Any]:
    return {k: v if isinstance(v, str) else pickle.dumps(v) for k, v in found.items()}


def _unpickle(data: bytes) -> dict[str, Any]:
    found = pickle.loads(data)
    if not isinstance(found, dict):
        raise CourseError("not a table of outcomes")
    return {k: pickle.loads(v) if isinstance(v, bytes) else v for k, v in found.items()}


def _compute(solution: Path, request: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="llmfs-truths-") as scratch:
        out = Path(scratch) / "truths.pickle"
        env = {
            **os.environ,
            "LLMFS_ATTEMPTS": str(Path(scratch) / "attempts.jsonl"),
            "MPLBACKEND": "Agg",
        }
        try:
            done = subprocess.run(
                [sys.executable, "-m", "llmfs.course.grading.truths", str(out)],
                input=request,
                capture_output=True,
                text=True,
                timeout=TRUTH_TIMEOUT,
                cwd=solution.parent,
                env=env,
            )
        except subprocess.TimeoutExpired:
            raise CourseError(
                f"{solution}: the solution did not reach its last predict exercise in "
                f"{TRUTH_TIMEOUT:g} s"
            ) from None
        if done.returncode != 0 or not out.is_file():
            why = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise CourseError(f"{solution}: the solution could not be run for the key: {why[0]}")
        return _unpickle(out.read_bytes())


def _run_solution(solution: str, exercises: list[list[Any]]) -> dict[str, Any]:
    """In the child: the outcome of each listed exercise's expression, evaluated in its
    fixture when the solution has fixture cells (:func:`_from_fixtures`), else right after its
    cell of the solution, whose code cells run in one namespace."""
    from llmfs.course.exercises.run import run
    from llmfs.course.grading import extract

    notebook = extract.parse_notebook(Path(solution).read_bytes(), solution)
    tagged = extract.tagged_cells(notebook)
    after: dict[int, list[list[Any]]] = {}
    for item in exercises:
        positions = tagged.get(item[0])
        if not positions:
            raise CourseError(f"{solution}: no cell is tagged exercise:{item[0]}")
        after.setdefault(positions[0], []).append(item)
    from_fixtures = _from_fixtures(Path(solution), exercises)
    if from_fixtures is not None:
        return from_fixtures
    last = max(after)
    namespace: dict[str, Any] = {"__name__": "__main__"}
    found: dict[str, Any] = {}
    for position, cell in enumerate(notebook["cells"], start=1):
        if position > last:
            break
        if cell.get("cell_type") == "code":
            source = extract.source_of(cell)
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<cell {position}>", "exec"), namespace)
        for exercise_id, expression, plain in after.get(position, ()):
            try:
                outcome = run(expression, namespace, plain=bool(plain))
                found[exercise_id] = _picklable(outcome)
            except Exception as error:  # reported for this exercise; the others go on
                found[exercise_id] = f"{type(error).__name__}: {error}"
    return found


def _from_fixtures(solution: Path, exercises: list[list[Any]]) -> dict[str, Any] | None:
    """In the child: each exercise's outcome evaluated as the notebook's check evaluates it,
    in a fresh namespace built by the solution's fixture cells above the exercise's cell;
    ``None`` when the solution has no fixture cell (the course defines no fixtures). A fixture
    cell that fails is the course's error (:class:`~llmfs.course.exercises.fixtures.FixtureError`,
    a :class:`CourseError`); an expression that fails is reported for its exercise."""
    from llmfs.course.exercises.fixtures import namespace_of, notebook_fixture_sources
    from llmfs.course.exercises.run import run

    found: dict[str, Any] = {}
    for exercise_id, expression, plain in exercises:
        sources = notebook_fixture_sources(solution, exercise_id)
        if sources is None:
            return None
        namespace = namespace_of(exercise_id, sources)
        try:
            outcome = run(expression, namespace, plain=bool(plain))
            found[exercise_id] = _picklable(outcome)
        except Exception as error:  # reported for this exercise; the others go on
            found[exercise_id] = f"{type(error).__name__}: {error}"
    return found


def _picklable(outcome: Any) -> bytes:
    """The outcome pickled now (later cells may write to the owners it reads, which makes its
    views stale), or, when its request reads a view that cannot be pickled (a stale view's
    values are gone, so it refuses), the outcome without the request's views."""
    try:
        return pickle.dumps(outcome)
    except Exception:
        if outcome.call is None:
            raise
    from dataclasses import replace

    call = replace(outcome.call, source=None, operands=())
    return pickle.dumps(replace(outcome, call=call))


def main(argv: list[str]) -> int:
    """``python -m llmfs.course.grading.truths OUT``: reads ``[solution, [[id, expression,
    plain], ...]]`` on stdin and writes the pickled outcomes to ``OUT``."""
    solution, exercises = json.loads(sys.stdin.read())
    found = _run_solution(solution, exercises)
    Path(argv[0]).write_bytes(pickle.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
