"""What the grader writes for people: the LMS table, learners' feedback, explain review sheets.

* :func:`write_gradebook_csv`: ``gradebook.csv``, one row per student, one column per exercise
  (the score, ``pending`` while an explain answer awaits review, ``unchecked`` when no hidden
  check exists, empty when the student has no submission for that chapter), then ``total`` (the
  scored points), ``pending`` (how many answers await review) and ``run`` (how each notebook run
  went).
* :func:`write_feedback`: one file per student (Markdown or HTML): each exercise's result,
  message and first hint. Never an expected answer or a model answer.
* :func:`write_review_sheets`: one HTML page per explain exercise with every student's answer
  beside the rubric and the model answer, and ``explain-scores.csv`` to fill in;
  :func:`read_review_scores` reads it back into the gradebook.
"""

from __future__ import annotations

import csv
import html
import re
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.grading.gradebook import Gradebook, Row
from llmfs.course.grading.key import ChapterKey, hints_of
from llmfs.course.manifest import Manifest

SCORES_FILE = "explain-scores.csv"
SCORE_COLUMNS = ("student", "exercise", "points", "score", "comment")
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(student: str) -> str:
    """A file name for a student id (characters outside letters, digits, ``._-`` become ``_``)."""
    return _SAFE.sub("_", student).strip("._") or "student"


def _number(value: float) -> str:
    return f"{value:g}"


def _cell(row: Row) -> str:
    if row.status in ("pending", "unchecked") or row.score is None:
        return row.status
    return _number(row.score)


def _exercise_order(manifest: Manifest, rows: list[Row]) -> list[str]:
    present = {row.exercise for row in rows}
    ordered = [e.id for e in manifest.exercises() if e.id in present]
    return ordered + sorted(present - set(ordered))


def write_gradebook_csv(book: Gradebook, manifest: Manifest, path: Path) -> Path:
    """Writes the LMS table (see the module docstring); returns its path."""
    rows = book.rows()
    exercises = _exercise_order(manifest, rows)
    by_student: dict[str, dict[str, Row]] = defaultdict(dict)
    for row in rows:
        by_student[row.student][row.exercise] = row
    runs: dict[str, list[str]] = defaultdict(list)
    for submission in book.submissions():
        runs[submission.student].append(f"{submission.chapter}: {submission.run_status}")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", *exercises, "total", "pending", "run"])
        for student in sorted(by_student):
            mine = by_student[student]
            cells = [_cell(mine[e]) if e in mine else "" for e in exercises]
            total = sum(r.score for r in mine.values() if r.score is not None)
            pending = sum(1 for r in mine.values() if r.status == "pending")
            writer.writerow(
                [student, *cells, _number(round(total, 4)), pending, "; ".join(runs[student])]
            )
    return path


def _hints(manifest: Manifest) -> dict[str, tuple[str, ...]]:
    return {exercise.id: hints_of(exercise) for exercise in manifest.exercises()}


def feedback_markdown(student: str, rows: list[Row], manifest: Manifest, runs: list[str]) -> str:
    """One student's feedback as Markdown (results, messages, hints; never a solution)."""
    hints = _hints(manifest)
    titles = {exercise.id: exercise.title for exercise in manifest.exercises()}
    scored = sum(r.score for r in rows if r.score is not None)
    possible = sum(r.points for r in rows)
    pending = sum(1 for r in rows if r.status == "pending")
    lines = [f"# Feedback for {student}", ""]
    lines.append(f"Score so far: {_number(round(scored, 4))} of {_number(possible)} points.")
    if pending:
        lines.append(f"{pending} written answer(s) await your instructor's review.")
    for run in runs:
        lines.append(f"Notebook run: {run}.")
    lines += ["", "| exercise | result | points | notes |", "| --- | --- | --- | --- |"]
    for row in rows:
        points = "—" if row.score is None else f"{_number(row.score)} / {_number(row.points)}"
        note = row.message.replace("|", "\\|")
        lines.append(f"| {row.exercise} | {row.status} | {points} | {note} |")
    advice = [
        row
        for row in rows
        if row.status in ("wrong", "partial", "unanswered", "missing", "unreadable")
    ]
    if advice:
        lines += ["", "## What to look at again", ""]
        for row in advice:
            hint = hints.get(row.exercise) or ()
            text = f"hint: {hint[0]}" if hint else "reread the section before the exercise"
            lines.append(f"- **{row.exercise}** ({titles.get(row.exercise, '')}): {text}")
    return "\n".join(lines) + "\n"


def _markdown_page(title: str, markdown: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'</head>\n<body><pre style="white-space: pre-wrap">{html.escape(markdown)}</pre>'
        "</body></html>\n"
    )


def write_feedback(book: Gradebook, manifest: Manifest, folder: Path, fmt: str = "md") -> int:
    """Writes one feedback file per student (``fmt`` ``md`` or ``html``); returns how many."""
    if fmt not in ("md", "html"):
        raise CourseError(f"feedback format must be 'md' or 'html', got {fmt!r}")
    folder.mkdir(parents=True, exist_ok=True)
    by_student: dict[str, list[Row]] = defaultdict(list)
    for row in book.rows():
        by_student[row.student].append(row)
    runs: dict[str, list[str]] = defaultdict(list)
    for s in book.submissions():
        where = f" (cell #{s.run_cell})" if s.run_cell else ""
        runs[s.student].append(f"{s.chapter}: {s.run_status}{where}: {s.run_message}")
    for student, rows in sorted(by_student.items()):
        text = feedback_markdown(student, rows, manifest, runs[student])
        if fmt == "html":
            text = _markdown_page(f"Feedback for {student}", text)
        (folder / f"{safe_name(student)}.{fmt}").write_text(text, encoding="utf-8")
    return len(by_student)


# --------------------------------------------------------------------------------------------
# explain answers: review sheets and the scores CSV
# --------------------------------------------------------------------------------------------


def _existing_scores(path: Path) -> dict[tuple[str, str], tuple[str, str]]:
    if not path.is_file():
        return {}
    found = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for record in csv.DictReader(handle):
            key = (record.get("student") or "", record.get("exercise") or "")
            found[key] = ((record.get("score") or "").strip(), record.get("comment") or "")
    return found


def write_review_sheets(
    book: Gradebook, keys: Mapping[str, ChapterKey], folder: Path
) -> list[Path]:
    """One HTML review sheet per explain exercise in the gradebook, plus the scores CSV.

    The CSV lists every written answer; scores already entered (in the file, or as reviews in
    the gradebook) are kept. Returns the sheets written.
    """
    folder.mkdir(parents=True, exist_ok=True)
    rows = [r for r in book.rows() if r.status in ("pending", "reviewed")]
    by_exercise: dict[str, list[Row]] = defaultdict(list)
    for row in rows:
        by_exercise[row.exercise].append(row)
    items = {item.exercise.id: item for key in keys.values() for item in key.exercises}
    sheets = []
    for exercise_id, answers in sorted(by_exercise.items()):
        item = items.get(exercise_id)
        title = f"{exercise_id}: {item.exercise.title}" if item else exercise_id
        parts = [
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8">',
            f"<title>Review {html.escape(exercise_id)}</title>",
            "<style>body{font-family:sans-serif;max-width:70em;margin:auto}"
            "td,th{border:1px solid #999;padding:.4em;vertical-align:top}"
            "table{border-collapse:collapse;width:100%}.answer{white-space:pre-wrap}</style>",
            "</head><body>",
            f"<h1>{html.escape(title)}</h1>",
        ]
        if item is not None:
            parts.append(f"<p>Points: {_number(item.exercise.points)}</p>")
            if item.prompt:
                parts.append(
                    f'<h2>Question</h2><div class="answer">{html.escape(item.prompt)}</div>'
                )
            parts.append("<h2>Rubric</h2><ol>")
            parts += [f"<li>{html.escape(point)}</li>" for point in item.rubric] or [
                "<li>(no rubric in the manifest)</li>"
            ]
            parts.append("</ol>")
            parts.append(
                f'<h2>Model answer</h2><div class="answer">{html.escape(item.model_answer)}</div>'
            )
        parts.append(f"<h2>Answers ({len(answers)})</h2>")
        parts.append("<table><tr><th>student</th><th>answer</th><th>score</th></tr>")
        for row in sorted(answers, key=lambda r: r.student):
            score = "" if row.score is None else _number(row.score)
            parts.append(
                f"<tr><td>{html.escape(row.student)}</td>"
                f'<td class="answer">{html.escape(row.answer)}</td><td>{score}</td></tr>'
            )
        parts.append(
            f"</table><p>Enter scores in {SCORES_FILE} next to this page, then run "
            "<code>llmfs grade --explain</code> again.</p></body></html>\n"
        )
        sheet = folder / f"{exercise_id}.html"
        sheet.write_text("\n".join(parts), encoding="utf-8")
        sheets.append(sheet)
    scores_path = folder / SCORES_FILE
    existing = _existing_scores(scores_path)
    with scores_path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(SCORE_COLUMNS)
        for row in sorted(rows, key=lambda r: (r.exercise, r.student)):
            score, comment = existing.get((row.student, row.exercise), ("", ""))
            if not score and row.score is not None:
                score = _number(row.score)
                comment = comment or (row.message if row.status == "reviewed" else "")
            writer.writerow([row.student, row.exercise, _number(row.points), score, comment])
    return sheets


def read_review_scores(book: Gradebook, path: Path) -> int:
    """Reads an explain-scores CSV into the gradebook; returns how many scores were stored.

    Rows with an empty score stay pending. Raises :class:`CourseError` naming the file and line
    for a missing column, a score that is not a number, or one outside 0..points.
    """
    if not path.is_file():
        raise CourseError(f"{path}: no scores file (run llmfs grade --explain to create it)")
    stored = 0
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [
            c for c in ("student", "exercise", "score") if c not in (reader.fieldnames or [])
        ]
        if missing:
            raise CourseError(f"{path}: missing column(s) {missing}; expected {SCORE_COLUMNS}")
        for line, record in enumerate(reader, start=2):
            text = (record.get("score") or "").strip()
            if not text:
                continue
            try:
                score = float(text)
            except ValueError:
                raise CourseError(f"{path} line {line}: score {text!r} is not a number") from None
            try:
                book.review(
                    record["student"], record["exercise"], score, record.get("comment") or ""
                )
            except CourseError as error:
                raise CourseError(f"{path} line {line}: {error}") from None
            stored += 1
    return stored
