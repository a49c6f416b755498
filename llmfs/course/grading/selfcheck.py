"""``llmfs check``: a learner's own progress, from their notebooks, without any solution.

``llmfs check [NOTEBOOK ...]`` (default: the course notebooks in ``--dir``, the course folder
``llmfs start`` uses, ``~/llmfs-course`` unless given; when that folder does not exist it says so
and exits 2) runs each notebook headless in a fresh limited kernel, exactly as "Run All" would,
and prints one table per chapter with a line per exercise: the answer given (shortened), the
result, the wrong tries, whether an answer was revealed, the hints used and the points; then,
for each answer not right, the wrong fields, the mistakes it shows and the next hint. ``--json``
prints the same as JSON.

Every result is a :class:`~llmfs.course.exercises.verdict.Verdict` from the one verdict module
the notebook's ``check`` and ``llmfs grade`` use. A predict exercise is judged on its record,
the literals of its ``predict(...)`` cell (:mod:`llmfs.course.exercises.record`): they are read
statically, and the run executes, right after that cell, one more cell that judges them
(:func:`~llmfs.course.exercises.verdict.judge_predict`) against the exercise's expression in the
notebook's names at that point. An implement exercise is judged by the check the notebook runs
(:func:`~llmfs.course.exercises.verdict.judge_implement`). Both write their verdicts to a
temporary file this command reads. The learner's history (wrong tries, reveals, hints) comes
from their attempts log, read as the notebook reads it
(:func:`~llmfs.course.exercises.state.exercise_state`), and from the reveal notes the saved
notebook carries; it never changes a verdict. The run's home is a scratch folder; a Metal build
cache named by ``$LLMFS_CACHE_DIR`` is passed on, so kernels built once are reused.

It never prints a solution: it has none. The learner's installation ships only the student
notebooks; right and wrong come from the checks the notebook itself runs, which show no truth
before an attempt. Explain answers are counted as written and left to the instructor.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercises.record import judge_cell_source
from llmfs.course.exercises.reveals import revealed_in
from llmfs.course.exercises.verdict import VERDICTS_ENV, Verdict, entry, read_verdicts
from llmfs.course.grading import extract
from llmfs.course.grading.key import hints_of
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import RunOutcome, run_notebook
from llmfs.course.manifest import Chapter, Exercise, Manifest, load_manifest
from llmfs.course.paths import DEFAULT_FOLDER

#: The variable naming the Metal emulator's build cache (see
#: :func:`llmfs.tensor.backends.metal.toolchain.cache_dir`); ``llmfs check`` passes it on.
BUILD_CACHE_ENV = "LLMFS_CACHE_DIR"


@dataclass
class ChapterProgress:
    """One notebook's chapter: its run and one :class:`Verdict` per exercise (in manifest
    order), with the learner's history in each; ``next_hints`` holds, for each exercise not yet
    right, the next hint the learner has not seen."""

    chapter: str
    title: str
    notebook: str
    run: str
    exercises: list[Verdict]
    next_hints: dict[str, str] = field(default_factory=dict)

    @property
    def totals(self) -> dict[str, float]:
        """answered, right, points earned, points possible, hints used, in review, revealed."""
        return {
            "exercises": len(self.exercises),
            "answered": sum(1 for e in self.exercises if e.answered),
            "right": sum(1 for e in self.exercises if e.right),
            "points": round(sum(e.score or 0.0 for e in self.exercises), 4),
            "possible": sum(e.points for e in self.exercises),
            "hints_used": sum(e.hints_used for e in self.exercises),
            "in_review": sum(1 for e in self.exercises if e.status == "pending"),
            "revealed": sum(1 for e in self.exercises if e.revealed),
        }


def _chapter_of(manifest: Manifest, path: Path, notebook: dict[str, Any]) -> Chapter:
    name = path.name.replace(".updated.ipynb", ".ipynb")
    for chapter in manifest.published_chapters:
        if Path(chapter.notebook).name == name:
            return chapter
    tagged = set(extract.tagged_cells(notebook))
    best = max(
        manifest.published_chapters,
        key=lambda c: len(tagged & {e.id for e in c.exercises}),
        default=None,
    )
    if best is None or not tagged & {e.id for e in best.exercises}:
        raise CourseError(f"{path}: not a notebook of this course (no exercise cells found)")
    return best


def _blank_cells(manifest: Manifest, chapter: Chapter) -> dict[str, str]:
    path = manifest.root / chapter.notebook
    try:
        blank = extract.parse_notebook(path.read_bytes(), chapter.notebook)
    except (OSError, CourseError):
        return {}
    return {
        exercise_id: extract.source_of(extract.cell_at(blank, positions[0]))
        for exercise_id, positions in extract.tagged_cells(blank).items()
    }


def _function_of(exercise: Exercise, blank_source: str) -> str | None:
    # Loaded on use: the specs import the tensor library; only implement exercises need it.
    from llmfs.course.exercise_checks.spec import SPECS

    named = getattr(exercise, "function", None)
    if named:
        return str(named)
    if exercise.id in SPECS:
        return SPECS[exercise.id].function
    try:
        tree = extract.parse_source(blank_source)
    except extract.NotPython:
        return None
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    return names[0] if len(names) == 1 else None


def history(log: Path, exercise_id: str) -> tuple[int, bool, int]:
    """The learner's history of one exercise in their attempts log, as the notebook keeps it
    (:func:`~llmfs.course.exercises.state.exercise_state`): the wrong tries (the most at one
    field: the count the reveal rule uses), whether an answer was revealed, and the hints seen
    (each hint once). A log that cannot be read gives no history (the log is the learner's)."""
    from llmfs.course.exercises.state import exercise_state

    try:
        state = exercise_state(exercise_id, log)
    except (CourseError, OSError, ValueError):
        return 0, False, 0
    return max(state.wrong_tries.values(), default=0), bool(state.revealed), state.hints_seen


def hints_used(log: Path, exercise_id: str) -> int:
    """How many of the exercise's hints the learner's attempts log says were shown (0 if none):
    the third item of :func:`history`."""
    return history(log, exercise_id)[2]


def _with_judges(
    notebook: dict[str, Any], chapter: Chapter, blank: dict[str, str]
) -> tuple[dict[str, Any], list[int]]:
    """The notebook to run: a judge cell right after each fully answered predict exercise's
    cell, and for every cell of it the 1-based position of the learner's cell it stands for
    (a judge cell stands for its exercise's cell)."""
    after: dict[int, str] = {}
    tagged = extract.tagged_cells(notebook)
    for exercise in chapter.exercises:
        if exercise.kind != "predict":
            continue
        found = extract.find_exercise(
            notebook, exercise, blank_source=blank.get(exercise.id, ""), tagged=tagged
        )
        answers = found.answer if isinstance(found.answer, dict) else {}
        asked = list(getattr(exercise, "fields", None) or answers)
        if found.position is None or all(answers.get(f) is None for f in asked):
            continue  # nothing answered: nothing to judge
        record = {name: extract.plain(entry(value)) for name, value in answers.items()}
        after[found.position] = judge_cell_source(exercise.id, record)
    cells: list[Any] = []
    origin: list[int] = []
    for position, cell in enumerate(notebook["cells"], start=1):
        cells.append(cell)
        origin.append(position)
        if position in after:
            cells.append(
                {
                    "cell_type": "code",
                    "metadata": {},
                    "source": after[position],
                    "outputs": [],
                    "execution_count": None,
                }
            )
            origin.append(position)
    return {**notebook, "cells": cells}, origin


def check_notebook(
    manifest: Manifest, path: Path, limits: Limits, log: Path | None = None
) -> ChapterProgress:
    """Runs one learner notebook headless and gives its chapter's verdicts.

    Every verdict is the one the notebook's own check gives
    (:func:`~llmfs.course.exercises.verdict.judge_predict` of the cell's literals in the
    notebook's names at its place; :func:`~llmfs.course.exercises.verdict.judge_implement` of
    the implement check's cases), with the learner's history from ``log`` (their attempts log;
    default: ``.llmfs/attempts.jsonl`` beside the notebook) and the answers the saved notebook
    shows as revealed. Raises :class:`CourseError` for a file that is not a course notebook.
    """
    notebook = extract.parse_notebook(extract.read_notebook_bytes(path), str(path))
    chapter = _chapter_of(manifest, path, notebook)
    blank = _blank_cells(manifest, chapter)
    judged, origin = _with_judges(notebook, chapter, blank)
    with tempfile.TemporaryDirectory(prefix="llmfs-check-") as scratch:
        attempts_file = Path(scratch) / "attempts.jsonl"
        verdicts_file = Path(scratch) / "verdicts.jsonl"
        env = {"LLMFS_ATTEMPTS": str(attempts_file), VERDICTS_ENV: str(verdicts_file)}
        # The run's home is a scratch folder, so without this every check would compile the
        # notebook's Metal kernels again; a build cache the learner named is theirs to share
        # (builds are keyed by their source, compiler and flags, so none is ever stale).
        if os.environ.get(BUILD_CACHE_ENV):
            env[BUILD_CACHE_ENV] = os.environ[BUILD_CACHE_ENV]
        run = run_notebook(judged, limits, env=env)
        records = read_verdicts(verdicts_file)
    if run.cell is not None and 1 <= run.cell <= len(origin):
        run = RunOutcome(run.status, origin[run.cell - 1], run.message)
    own_log = log if log is not None else path.parent / ".llmfs" / "attempts.jsonl"
    tagged = extract.tagged_cells(notebook)
    shown = revealed_in(notebook)
    rows = []
    next_hints: dict[str, str] = {}
    for exercise in chapter.exercises:
        verdict = _verdict(
            notebook, exercise, blank.get(exercise.id, ""), tagged, records.get(exercise.id), run
        )
        wrong_tries, revealed, hints = history(own_log, exercise.id)
        verdict = replace(
            verdict,
            wrong_tries=wrong_tries,
            revealed=revealed or bool(shown.get(exercise.id)),
            hints_used=hints,
        )
        rows.append(verdict)
        if verdict.right is False:
            listed = hints_of(exercise)
            if listed:
                next_hints[exercise.id] = listed[min(hints, len(listed) - 1)]
    return ChapterProgress(chapter.id, chapter.title, str(path), run.describe(), rows, next_hints)


def _verdict(
    notebook: dict[str, Any],
    exercise: Exercise,
    blank_source: str,
    tagged: dict[str, list[int]],
    line: dict[str, Any] | None,
    run: RunOutcome,
) -> Verdict:
    function = _function_of(exercise, blank_source) if exercise.kind == "implement" else None
    found = extract.find_exercise(
        notebook, exercise, blank_source=blank_source, function=function, tagged=tagged
    )
    points = float(exercise.points)
    base = Verdict(exercise.id, points, 0.0, "unanswered", "", kind=exercise.kind)
    if found.missing:
        return replace(base, status="missing", message=f"no cell is tagged {exercise.tag}")
    if exercise.kind == "explain":
        text = found.answer if isinstance(found.answer, str) else ""
        if not text:
            return base
        return replace(
            base,
            score=None,
            status="pending",
            message="your instructor reviews written answers",
            answer=text,
        )
    if isinstance(line, dict) and isinstance(line.get("verdict"), dict):
        try:
            return Verdict.from_json(line["verdict"])
        except (TypeError, ValueError):
            pass  # not a verdict this run wrote: judged as not checked below
    if exercise.kind == "predict":
        answers = found.answer if isinstance(found.answer, dict) else {}
        if all(v is None for v in answers.values()):
            return base
        answer = json.dumps(extract.plain(answers), sort_keys=True)
        if isinstance(line, dict) and isinstance(line.get("error"), str):
            why = f"not checked: its expression failed here ({line['error']})"
        elif run.status != "ok":
            why = "not checked: the notebook run stopped before it"
        else:
            why = "not checked"
        return replace(base, score=None, status="unchecked", message=why, answer=answer)
    if found.answer is None:
        return base
    if run.status != "ok":
        why = "not checked: the notebook run stopped before it"
    else:
        # The check ran and judged nothing: the function is still its stub.
        return replace(base, message="not implemented yet")
    return replace(base, score=None, status="unchecked", message=why)


#: The widest an answer is shown in the table (the whole answer is in ``--json``).
ANSWER_WIDTH = 24


def shortened(text: str, width: int = ANSWER_WIDTH) -> str:
    """``text`` on one line, cut to ``width`` characters with "…" when longer."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def answer_text(verdict: Verdict) -> str:
    """The answer given, as the report shows it: a prediction's fields (``shape=[3, 2]
    strides=[2, 1]``), an implement function's cases passed, the start of a written answer;
    ``-`` when none."""
    if verdict.status in ("unanswered", "missing"):
        return "-"
    if verdict.kind == "implement":
        if verdict.cases is not None and verdict.passed is not None:
            return f"{verdict.passed}/{verdict.cases} cases"
        return "written"
    if verdict.kind == "explain":
        return f'"{verdict.answer}"'
    try:
        fields = json.loads(verdict.answer) if verdict.answer else {}
    except json.JSONDecodeError:
        return verdict.answer
    if not isinstance(fields, dict):
        return verdict.answer
    return " ".join(
        f"{name}={json.dumps(value, ensure_ascii=False)}"
        for name, value in fields.items()
        if value is not None
    )


def result_text(verdict: Verdict) -> str:
    """``right``, ``partial``, ``wrong``, ``review`` (a written answer), ``-`` (not answered)
    or ``unchecked``."""
    if verdict.status == "pending":
        return "review"
    if verdict.status in ("unanswered", "missing"):
        return "-"
    if verdict.status == "unreadable":
        return "wrong"
    return verdict.status


def _points(verdict: Verdict) -> str:
    return f"{verdict.score or 0:g}/{verdict.points:g}"


def render(chapters: list[ChapterProgress]) -> str:
    """The plain-text report: one table per chapter (per exercise: the answer given, shortened;
    right or wrong; wrong tries; whether an answer was revealed; hints used; points), the
    totals, then for each exercise not right what is wrong, the mistakes it shows and the next
    hint."""
    lines = []
    # One id column for the whole report, wide enough for its longest id and two spaces.
    width = max([16, *(len(e.exercise) + 2 for chapter in chapters for e in chapter.exercises)])
    header = (
        f"  {'exercise':<{width}}{'answer':<{ANSWER_WIDTH + 2}}{'result':<10}{'wrong':<7}"
        f"{'revealed':<10}{'hints':<7}points"
    )
    for chapter in chapters:
        totals = chapter.totals
        lines.append(f"{chapter.chapter}: {chapter.title}")
        lines.append(f"  notebook {chapter.notebook}; run: {chapter.run}")
        lines.append(header)
        for e in chapter.exercises:
            revealed = "yes" if e.revealed else "no"
            lines.append(
                f"  {e.exercise:<{width}}{shortened(answer_text(e)):<{ANSWER_WIDTH + 2}}"
                f"{result_text(e):<10}{e.wrong_tries:<7}{revealed:<10}{e.hints_used:<7}"
                f"{_points(e)}"
            )
        lines.append(
            f"  answered {totals['answered']:g}/{totals['exercises']:g}, right "
            f"{totals['right']:g}, points {totals['points']:g}/{totals['possible']:g}, written "
            f"answers for review {totals['in_review']:g}"
        )
        # A second line: the report fits a 900 px notebook output or an 88-column terminal.
        lines.append(
            f"  wrong tries {sum(e.wrong_tries for e in chapter.exercises)}, answers revealed "
            f"{totals['revealed']:g}, hints used {totals['hints_used']:g}"
        )
        for e in chapter.exercises:
            if e.right is False:
                which = f" (wrong: {', '.join(e.wrong_fields)})" if e.wrong_fields else ""
                said = f" smallest failing case: {e.smallest}" if e.smallest else ""
                lines.append(f"  {e.exercise}{which}.{said}")
                # One line per mistake the answer shows, then the next hint.
                lines += [f"    - {m}" for m in e.mistakes]
                hint = chapter.next_hints.get(e.exercise, "")
                if hint:
                    lines.append(f"    hint: {hint}")
            elif e.message and e.status in ("unchecked", "missing", "unanswered"):
                # Why it was not judged (not checked, no cell, a stub): never a verdict.
                lines.append(f"  {e.exercise}: {e.message}")
        lines.append("")
    return "\n".join(lines)


def as_json(chapters: list[ChapterProgress]) -> dict[str, Any]:
    """The report as JSON data (what ``--json`` prints): every chapter with its totals and, per
    exercise, its verdict (:meth:`Verdict.to_json`) with ``id``, ``title``, ``answered``,
    ``right``, the ``answer_shown`` as the table shows it and the next ``hint``."""
    out = []
    for chapter in chapters:
        titles = _titles(chapter.chapter)
        exercises = [
            {
                **e.to_json(),
                "id": e.exercise,
                "title": titles.get(e.exercise, ""),
                "answered": e.answered,
                "right": e.right,
                "answer_shown": shortened(answer_text(e)),
                "hint": chapter.next_hints.get(e.exercise, ""),
            }
            for e in chapter.exercises
        ]
        out.append(
            {
                "chapter": chapter.chapter,
                "title": chapter.title,
                "notebook": chapter.notebook,
                "run": chapter.run,
                "exercises": exercises,
                "totals": chapter.totals,
            }
        )
    return {"chapters": out}


def _titles(chapter_id: str) -> dict[str, str]:
    try:
        return {e.id: e.title for e in load_manifest().chapter(chapter_id).exercises}
    except CourseError:
        return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``llmfs check``."""
    parser.add_argument("notebooks", nargs="*", type=Path, metavar="NOTEBOOK")
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_FOLDER,
        help=f"your course folder, as for `llmfs start` (default: {DEFAULT_FOLDER})",
    )
    parser.add_argument("--json", action="store_true", help="print JSON for tools")
    parser.add_argument("--cell-timeout", type=float, default=60.0, help="seconds per cell")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per notebook")


def main(args: argparse.Namespace) -> int:
    """Checks the notebooks; 0 when every one was checked, 1 when some could not be (each is
    named on stderr), 2 when there is nothing to check."""
    try:
        manifest = load_manifest()
        paths = list(args.notebooks)
        if not paths:
            folder = Path(args.dir).expanduser()
            if not folder.is_dir():
                raise CourseError(
                    f"{folder}: no such course folder; `llmfs start` makes it (or give the "
                    "folder with --dir, or NOTEBOOK paths)"
                )
            names = [Path(c.notebook).name for c in manifest.published_chapters]
            paths = [folder / n for n in names if (folder / n).is_file()]
            if not paths:
                raise CourseError(
                    f"{folder}: no course notebooks here (give NOTEBOOK paths or --dir)"
                )
        limits = Limits(cell_timeout=args.cell_timeout, total_timeout=args.timeout)
    except (CourseError, ValueError) as error:
        print(f"llmfs check: {error}", file=sys.stderr)
        return 2
    own_log = os.environ.get("LLMFS_ATTEMPTS")
    chapters = []
    failed = 0
    for path in paths:
        try:
            chapters.append(
                check_notebook(manifest, path, limits, Path(own_log) if own_log else None)
            )
        except (CourseError, OSError) as error:
            print(f"llmfs check: {error}", file=sys.stderr)
            failed += 1
        except (RecursionError, MemoryError) as error:
            # A notebook that exhausts the stack or memory is named; the others are checked.
            print(
                f"llmfs check: {path}: cannot be checked ({type(error).__name__})", file=sys.stderr
            )
            failed += 1
    if args.json:
        print(json.dumps(as_json(chapters), indent=1))
    else:
        print(render(chapters), end="")
    return 1 if failed else 0
