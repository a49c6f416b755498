"""What the grader writes for people: the LMS table, learners' feedback, explain review sheets.

* :func:`write_gradebook_csv`: ``gradebook.csv``, one row per student, one column per exercise
  (the score, ``pending`` while an explain answer awaits review, ``unchecked`` when no hidden
  check exists, empty when the student has no submission for that chapter), then ``total`` (the
  scored points), ``pending`` (how many answers await review), ``run`` (how each notebook run
  went), ``notes`` (what collecting the submission reported) and ``student_id``.
* :func:`write_feedback`: one file per student (Markdown or HTML): each exercise's result,
  message and first hint. Never an expected answer or a model answer. File names are unique per
  exact student id (:func:`feedback_file`), listed in ``feedback/index.csv``.
* :func:`write_review_sheets`: one HTML page per explain exercise with every student's answer
  beside the rubric and the model answer, and ``explain-scores.csv`` to fill in;
  :func:`read_review_scores` reads it back into the gradebook.

Every CSV written here is safe to open in a spreadsheet: a text cell that starts with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (:func:`csv_text`, as OWASP
recommends against formula injection), so ``=HYPERLINK(...)`` shows as text. The exact id is in
the ``student_id`` column, percent-encoded (:func:`student_key`: plain ids read the same, and no
encoded id can start a formula); reading a scores file back uses it, never the display column.
"""

from __future__ import annotations

import csv
import hashlib
import html
import math
import re
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.grading.gradebook import Gradebook, Review, Row
from llmfs.course.grading.key import ChapterKey, hints_of
from llmfs.course.grading.shown import markdown, neutral, terminal
from llmfs.course.manifest import Manifest

SCORES_FILE = "explain-scores.csv"
#: The reviewer fills in ``score`` and ``comment``; the last two columns identify the answer.
SCORE_COLUMNS = ("student", "exercise", "points", "score", "comment", "student_id", "answer_sha")
FEEDBACK_INDEX = "index.csv"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: What a spreadsheet may read as the start of a formula (OWASP, "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NAME_LIMIT = 60


def csv_text(value: str) -> str:
    """A text cell safe from formula injection and reordering: every bidirectional control,
    other control character (tab and line breaks kept) or undecodable byte written as its
    escape (:func:`~llmfs.course.grading.shown.neutral`), then a leading ``'`` when it starts
    with one of :data:`FORMULA_STARTS` (a spreadsheet then shows it as text)."""
    value = neutral(value)
    return "'" + value if value.startswith(FORMULA_STARTS) else value


def csv_untext(value: str) -> str:
    """The text :func:`csv_text` escaped (a leading ``'`` before a formula start is dropped)."""
    if value.startswith("'") and value[1:].startswith(FORMULA_STARTS):
        return value[1:]
    return value


def student_key(student: str) -> str:
    """The exact id in a form no spreadsheet reads as a formula: percent-encoded UTF-8 (RFC 3986)
    for every character outside letters, digits and ``._~-``, and for a leading ``-``. A plain
    id (``ada``, ``ada.l-2``) is itself; :func:`student_from_key` undoes it exactly."""
    text = urllib.parse.quote(student, safe="")
    return "%2D" + text[1:] if text.startswith("-") else text


def student_from_key(key: str) -> str:
    """The exact id of a :func:`student_key` (``errors="strict"``: bad UTF-8 is an error)."""
    return urllib.parse.unquote(key, errors="strict")


def safe_name(student: str) -> str:
    """A readable file-name part for a student id: characters outside letters, digits and
    ``._-`` become ``_``, at most 60 characters. Not unique: see :func:`feedback_file`."""
    return _SAFE.sub("_", student).strip("._-")[:_NAME_LIMIT] or "student"


def feedback_file(student: str, fmt: str = "md", digits: int = 10) -> str:
    """The feedback file name of a student: :func:`safe_name` plus the first ``digits`` hex
    digits of the SHA-256 of the exact id, so ``zoe smith`` and ``zoe_smith`` (or ``+SUM`` and
    ``@SUM``) get different files, on case-insensitive file systems too."""
    digest = hashlib.sha256(student.encode("utf-8")).hexdigest()[:digits]
    return f"{safe_name(student)}-{digest}.{fmt}"


def feedback_files(students: Iterable[str], fmt: str = "md") -> dict[str, str]:
    """Student id -> feedback file name, unique even after case folding (the hash is lengthened
    for any students whose names would still clash)."""
    names: dict[str, str] = {}
    pending = sorted(set(students))
    for digits in (10, 16, 24, 64):
        chosen = {student: feedback_file(student, fmt, digits) for student in pending}
        counts: dict[str, int] = defaultdict(int)
        for name in [*names.values(), *chosen.values()]:
            counts[name.casefold()] += 1
        pending = [s for s, name in chosen.items() if counts[name.casefold()] > 1]
        names.update({s: n for s, n in chosen.items() if s not in pending})
        if not pending:
            return names
    raise CourseError(f"two student ids share a SHA-256: {pending}")  # pragma: no cover


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
    notes = _notes_by_student(book)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [csv_text(c) for c in ["student", *exercises, "total", "pending", "run", "notes"]]
            + ["student_id"]
        )
        for student in sorted(by_student):
            mine = by_student[student]
            cells = [_cell(mine[e]) if e in mine else "" for e in exercises]
            total = sum(r.score for r in mine.values() if r.score is not None)
            pending = sum(1 for r in mine.values() if r.status == "pending")
            writer.writerow(
                [
                    csv_text(student),
                    *cells,
                    _number(round(total, 4)),
                    pending,
                    csv_text("; ".join(runs[student])),
                    csv_text("; ".join(notes[student])),
                    student_key(student),
                ]
            )
    return path


def _notes_by_student(book: Gradebook) -> dict[str, list[str]]:
    found: dict[str, list[str]] = defaultdict(list)
    for (student, chapter), items in book.notes().items():
        found[student] += [f"{chapter}: {note}" for note in items]
    return found


def _hints(manifest: Manifest) -> dict[str, tuple[str, ...]]:
    return {exercise.id: hints_of(exercise) for exercise in manifest.exercises()}


def feedback_markdown(
    student: str,
    rows: list[Row],
    manifest: Manifest,
    runs: list[str],
    notes: Iterable[str] = (),
    escape: Callable[[str], str] = markdown,
) -> str:
    """One student's feedback as Markdown (results, messages, hints, what collecting the
    submission noticed; never a solution).

    Every text a submission supplied (the id, the run's message, the collection notes, each
    row's message, which may quote a returned value or an exception) goes through ``escape``:
    by default :func:`~llmfs.course.grading.shown.markdown`, so a heading, a tag or a comment
    in it is literal text on one line."""
    hints = _hints(manifest)
    titles = {exercise.id: exercise.title for exercise in manifest.exercises()}
    scored = sum(r.score for r in rows if r.score is not None)
    possible = sum(r.points for r in rows)
    pending = sum(1 for r in rows if r.status == "pending")
    lines = [f"# Feedback for {escape(student)}", ""]
    lines.append(f"Score so far: {_number(round(scored, 4))} of {_number(possible)} points.")
    if pending:
        lines.append(f"{pending} written answer(s) await your instructor's review.")
    for run in runs:
        lines.append(f"Notebook run: {escape(run)}.")
    for note in notes:
        lines.append(f"Collected: {escape(note)}.")
    lines += ["", "| exercise | result | points | notes |", "| --- | --- | --- | --- |"]
    for row in rows:
        points = "—" if row.score is None else f"{_number(row.score)} / {_number(row.points)}"
        note = escape(row.message)
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


def _one_line(text: str) -> str:
    return terminal(text, 600)


def _markdown_page(title: str, text: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'</head>\n<body><pre style="white-space: pre-wrap">{html.escape(text)}</pre>'
        "</body></html>\n"
    )


def write_feedback(book: Gradebook, manifest: Manifest, folder: Path, fmt: str = "md") -> int:
    """Writes one feedback file per student (``fmt`` ``md`` or ``html``) and ``index.csv``
    (``student``, ``student_id``, ``file``); returns how many students.

    Feedback files of an earlier export that no student owns now (another format, an older
    naming, a student since removed) are deleted, so the folder never holds a file that could
    be sent to the wrong student.
    """
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
    notes = _notes_by_student(book)
    names = feedback_files(by_student, fmt)
    for student, rows in sorted(by_student.items()):
        if fmt == "html":  # the page shows the text as text: html.escape is its one escape
            text = feedback_markdown(
                student, rows, manifest, runs[student], notes[student], escape=_one_line
            )
            text = _markdown_page(f"Feedback for {_one_line(student)}", text)
        else:
            text = feedback_markdown(student, rows, manifest, runs[student], notes[student])
        (folder / names[student]).write_text(text, encoding="utf-8")
    keep = set(names.values())
    for stale in sorted(folder.iterdir()):
        if stale.suffix in (".md", ".html") and stale.name not in keep and stale.is_file():
            stale.unlink()
    with (folder / FEEDBACK_INDEX).open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "student_id", "file"])
        for student in sorted(names):
            writer.writerow([csv_text(student), student_key(student), names[student]])
    return len(by_student)


# --------------------------------------------------------------------------------------------
# explain answers: review sheets and the scores CSV
# --------------------------------------------------------------------------------------------


def _existing_scores(path: Path) -> dict[tuple[str, str, str], tuple[str, str]]:
    """(student, exercise, answer hash) -> (score, comment) entered in an existing scores file
    (rows that cannot be read are left for :func:`read_review_scores` to report)."""
    if not path.is_file():
        return {}
    found = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for record in csv.DictReader(handle):
            try:
                student = student_from_key(record.get("student_id") or "")
            except UnicodeDecodeError:
                continue
            key = (student, record.get("exercise") or "", record.get("answer_sha") or "")
            comment = csv_untext(record.get("comment") or "")
            found[key] = ((record.get("score") or "").strip(), comment)
    return found


def write_review_sheets(
    book: Gradebook, keys: Mapping[str, ChapterKey], folder: Path
) -> list[Path]:
    """One HTML review sheet per explain exercise in the gradebook, plus the scores CSV.

    The CSV lists every written answer with its hash; scores already entered (in the file for
    that same answer, or as reviews in the gradebook) are kept, a score entered for an answer
    that has changed since is not carried to the new one. Returns the sheets written.
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
            score, comment = existing.get((row.student, row.exercise, row.answer_sha), ("", ""))
            if not score and row.score is not None:
                score = _number(row.score)
                comment = comment or (row.message if row.status == "reviewed" else "")
            writer.writerow(
                [
                    csv_text(row.student),
                    csv_text(row.exercise),
                    _number(row.points),
                    csv_text(score),
                    csv_text(comment),
                    student_key(row.student),
                    row.answer_sha,
                ]
            )
    return sheets


@dataclass(frozen=True)
class ScoresRead:
    """What reading a scores file did: ``stored`` scores that changed the gradebook, ``kept``
    scores already in it, and one message per score ``stale`` for an answer since changed
    (not attached: that answer is pending until it is scored again)."""

    stored: int
    kept: int
    stale: tuple[str, ...]


def read_review_scores(book: Gradebook, path: Path) -> ScoresRead:
    """Reads an explain-scores CSV into the gradebook, all or nothing.

    Each score is for the answer whose hash its row carries: when the student's answer has
    changed since, the score is not attached to the new answer, and a message in
    :attr:`ScoresRead.stale` says so. Rows with an empty score stay pending. Every row is
    checked before any is stored, then all are stored in one transaction.

    Raises :class:`CourseError` naming the file, the line and the row (student, exercise) for a
    missing column, an undecodable ``student_id``, a score that is not a finite number, one
    outside 0..points, or an answer the gradebook does not hold; nothing is stored then.
    """
    if not path.is_file():
        raise CourseError(f"{path}: no scores file (run llmfs grade --explain to create it)")
    reviews: list[Review] = []
    stale: list[str] = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        needed = ("student_id", "exercise", "score", "answer_sha")
        missing = [c for c in needed if c not in (reader.fieldnames or [])]
        if missing:
            raise CourseError(
                f"{path}: missing column(s) {missing}; expected {SCORE_COLUMNS} (a file "
                "written by llmfs grade --explain)"
            )
        for line, record in enumerate(reader, start=2):
            text = csv_untext((record.get("score") or "").strip())
            if not text:
                continue
            try:
                student = student_from_key(record.get("student_id") or "")
            except UnicodeDecodeError:
                raise CourseError(
                    f"{path} line {line}: student_id {record.get('student_id')!r} is not a "
                    "percent-encoded UTF-8 id; nothing was stored"
                ) from None
            exercise = csv_untext(record.get("exercise") or "")
            where = f"{path} line {line} ({student} {exercise})"
            try:
                score = float(text)
            except ValueError:
                score = math.nan
            if not math.isfinite(score):
                raise CourseError(
                    f"{where}: score {text!r} is not a number; nothing was stored"
                ) from None
            sha = record.get("answer_sha") or ""
            try:
                current = book.check_review(student, exercise, score)
            except CourseError as error:
                raise CourseError(f"{where}: {error}; nothing was stored") from None
            if sha != current:
                stale.append(
                    f"{where}: the answer changed since this score was entered (hash "
                    f"{sha[:12] or 'none'}, now {current[:12]}); not attached, the new answer "
                    "is pending until you score it"
                )
                continue
            reviews.append(
                Review(student, exercise, sha, score, csv_untext(record.get("comment") or ""))
            )
    stored = book.store_reviews(reviews)
    return ScoresRead(stored, len(reviews) - stored, tuple(stale))
