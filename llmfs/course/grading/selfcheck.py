"""``llmfs check``: a learner's own progress, from their notebooks, without any solution.

``llmfs check [NOTEBOOK ...]`` (default: the course notebooks in ``--dir``, the course folder
``llmfs start`` uses, ``~/llmfs-course`` unless given; when that folder does not exist it says so
and exits 2) runs each notebook headless in a fresh limited kernel, exactly as "Run All" would,
and prints one table per chapter: answered, right, points and hints used (from the learner's own
``.llmfs/attempts.jsonl`` when present), then the next hint for each wrong answer. ``--json``
prints the same as JSON.

A predict exercise is judged on its record, the literals of its ``predict(...)`` cell
(:mod:`llmfs.course.exercises.record`): they are read statically, and the run executes, right
after that cell, one more cell that judges them against the exercise's expression in the
notebook's names at that point. Neither the attempts log nor what a check printed counts, so
``llmfs check``, ``llmfs grade`` (which reads the same literals) and the notebook's own
``check`` read one answer. Implement exercises are judged by the checks the notebook runs, which
record to an attempts log pointed at a temporary file. The run's home is a scratch folder; a
Metal build cache named by ``$LLMFS_CACHE_DIR`` is passed on, so kernels built once are reused.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercises.record import VERDICTS_ENV, judge_cell_source, read_verdicts
from llmfs.course.grading import extract
from llmfs.course.grading.key import hints_of, scoring_of
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.sandbox import RunOutcome, run_notebook
from llmfs.course.manifest import Chapter, Exercise, Manifest, load_manifest
from llmfs.course.paths import DEFAULT_FOLDER

#: The variable naming the Metal emulator's build cache (see
#: :func:`llmfs.tensor.backends.metal.toolchain.cache_dir`); ``llmfs check`` passes it on.
BUILD_CACHE_ENV = "LLMFS_CACHE_DIR"


@dataclass
class ExerciseProgress:
    """One exercise's line: answered, right (None: not checked or review), points earned."""

    id: str
    kind: str
    title: str
    points: float
    answered: bool
    right: bool | None
    score: float
    hints_used: int
    wrong_fields: list[str] = field(default_factory=list)
    hint: str = ""
    note: str = ""


@dataclass
class ChapterProgress:
    """One notebook's chapter: its run, its exercises and the totals."""

    chapter: str
    title: str
    notebook: str
    run: str
    exercises: list[ExerciseProgress]

    @property
    def totals(self) -> dict[str, float]:
        """answered, right, points earned, points possible, hints used, in review."""
        return {
            "exercises": len(self.exercises),
            "answered": sum(1 for e in self.exercises if e.answered),
            "right": sum(1 for e in self.exercises if e.right),
            "points": round(sum(e.score for e in self.exercises), 4),
            "possible": sum(e.points for e in self.exercises),
            "hints_used": sum(e.hints_used for e in self.exercises),
            "in_review": sum(1 for e in self.exercises if e.kind == "explain" and e.answered),
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


def hints_used(log: Path, exercise_id: str) -> int:
    """How many hints the learner's attempts log says were shown for the exercise (0 if none).

    The log's ``{"event": "hint", "number": N}`` lines say hint N was shown, and each attempt
    carries ``hints``, how many had been seen before it; the largest of these is the answer.
    Unreadable lines are skipped (the log is the learner's file).
    """
    try:
        lines = log.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    used = 0
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or record.get("exercise") != exercise_id:
            continue
        for key in ("hints", "number") if record.get("event") == "hint" else ("hints",):
            value = record.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                used = max(used, value)
        if record.get("event") == "hint" and not isinstance(record.get("number"), int):
            used += 1
    return used


def _attempts(path: Path) -> dict[str, dict[str, bool]]:
    latest: dict[str, dict[str, bool]] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return latest
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("exercise"), str):
            continue
        fields = record.get("fields")
        if (
            isinstance(fields, dict)
            and fields
            and all(isinstance(v, bool) for v in fields.values())
        ):
            latest[record["exercise"]] = {str(k): v for k, v in fields.items()}
    return latest


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
        if found.position is None or not asked or any(answers.get(f) is None for f in asked):
            continue  # nothing to judge: the notebook's check would not judge it either
        record = {name: extract.plain(answers[name]) for name in asked}
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
    """Runs one learner notebook headless and measures its chapter's progress.

    ``log`` is the learner's own attempts log (for hints used; default: ``.llmfs/attempts.jsonl``
    beside the notebook). Raises :class:`CourseError` for a file that is not a course notebook.
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
        checked = _attempts(attempts_file)
        records = read_verdicts(verdicts_file)
    if run.cell is not None and 1 <= run.cell <= len(origin):
        run = RunOutcome(run.status, origin[run.cell - 1], run.message)
    for exercise in chapter.exercises:
        if exercise.kind == "predict":
            checked.pop(exercise.id, None)  # a predict exercise counts by its record only
            line = records.get(exercise.id)
            if line is not None and isinstance(line.get("fields"), dict):
                checked[exercise.id] = {str(k): bool(v) for k, v in line["fields"].items()}
    own_log = log if log is not None else path.parent / ".llmfs" / "attempts.jsonl"
    tagged = extract.tagged_cells(notebook)
    rows = []
    for exercise in chapter.exercises:
        rows.append(_progress(notebook, exercise, blank.get(exercise.id, ""), tagged, checked, run))
        line = records.get(exercise.id) or {}
        if exercise.kind == "predict" and isinstance(line.get("error"), str):
            rows[-1].note = f"not checked: its expression failed here ({line['error']})"
        rows[-1].hints_used = hints_used(own_log, exercise.id)
        if rows[-1].right is False:
            hints = hints_of(exercise)
            if hints:
                rows[-1].hint = hints[min(rows[-1].hints_used, len(hints) - 1)]
    return ChapterProgress(chapter.id, chapter.title, str(path), run.describe(), rows)


def _progress(
    notebook: dict[str, Any],
    exercise: Exercise,
    blank_source: str,
    tagged: dict[str, list[int]],
    checked: dict[str, dict[str, bool]],
    run: RunOutcome,
) -> ExerciseProgress:
    function = _function_of(exercise, blank_source) if exercise.kind == "implement" else None
    found = extract.find_exercise(
        notebook, exercise, blank_source=blank_source, function=function, tagged=tagged
    )
    progress = ExerciseProgress(
        exercise.id, exercise.kind, exercise.title, float(exercise.points), False, None, 0.0, 0
    )
    attempt = checked.get(exercise.id)
    if found.missing:
        progress.note = f"no cell is tagged {exercise.tag}"
        return progress
    if exercise.kind == "explain":
        progress.answered = bool(found.answer)
        progress.note = "your instructor reviews written answers" if progress.answered else ""
        return progress
    if exercise.kind == "predict":
        answers = found.answer if isinstance(found.answer, dict) else {}
        progress.answered = any(v is not None for v in answers.values())
    else:
        progress.answered = found.answer is not None or attempt is not None
    if not progress.answered:
        return progress
    if attempt is None:
        if run.status != "ok":
            progress.note = "not checked: the notebook run stopped before it"
        elif exercise.kind == "predict":
            progress.note = "not checked: answer every field of its predict(...) cell"
        else:
            progress.note = "not checked: answer every field, then run its check"
        return progress
    right = [name for name, ok in attempt.items() if ok]
    progress.wrong_fields = [name for name, ok in attempt.items() if not ok]
    progress.right = not progress.wrong_fields
    if exercise.kind == "predict" and scoring_of(exercise) == "per_field":
        expected = len(getattr(exercise, "fields", None) or attempt)
        progress.score = round(progress.points * len(right) / max(expected, 1), 4)
    else:
        progress.score = progress.points if progress.right else 0.0
    if exercise.kind == "implement" and progress.wrong_fields:
        count = len(progress.wrong_fields)
        progress.wrong_fields = [f"{count} of {len(attempt)} cases"]
    return progress


def render(chapters: list[ChapterProgress]) -> str:
    """The plain-text report: one table per chapter, then a hint per wrong answer."""
    lines = []
    # One id column for the whole report, wide enough for its longest id and two spaces.
    width = max([24, *(len(e.id) + 2 for chapter in chapters for e in chapter.exercises)])
    for chapter in chapters:
        totals = chapter.totals
        lines.append(f"{chapter.chapter}: {chapter.title}")
        lines.append(f"  notebook {chapter.notebook}; run: {chapter.run}")
        lines.append(
            f"  {'exercise':<{width}}{'kind':<11}{'answered':<10}{'right':<8}{'points':<10}hints"
        )
        for e in chapter.exercises:
            right = (
                "review"
                if e.kind == "explain" and e.answered
                else ("yes" if e.right else "no" if e.right is False else "-")
            )
            points = f"{e.score:g}/{e.points:g}"
            answered = "yes" if e.answered else "no"
            lines.append(
                f"  {e.id:<{width}}{e.kind:<11}{answered:<10}{right:<8}{points:<10}{e.hints_used}"
            )
        lines.append(
            f"  answered {totals['answered']}/{totals['exercises']}, right {totals['right']}, "
            f"points {totals['points']:g}/{totals['possible']:g}, hints used "
            f"{totals['hints_used']}, written answers for review {totals['in_review']}"
        )
        for e in chapter.exercises:
            if e.right is False:
                which = f" (wrong: {', '.join(e.wrong_fields)})" if e.wrong_fields else ""
                hint = f" hint: {e.hint}" if e.hint else ""
                lines.append(f"  {e.id}{which}.{hint}")
            elif e.note and e.kind != "explain":
                lines.append(f"  {e.id}: {e.note}")
        lines.append("")
    return "\n".join(lines)


def as_json(chapters: list[ChapterProgress]) -> dict[str, Any]:
    """The report as JSON data (what ``--json`` prints): every chapter with its totals."""
    return {"chapters": [{**asdict(chapter), "totals": chapter.totals} for chapter in chapters]}


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
