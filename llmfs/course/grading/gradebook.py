"""The gradebook: one SQLite file (standard library ``sqlite3``) holding every graded submission.

Tables:

* ``meta(key, value)``: ``format`` and the grading ``seed`` chosen when the file was created
  (every later run reuses it, so resuming gives identical results);
* ``submissions(student, chapter, ...)``: one row per student and chapter: the file graded, its
  SHA-256, the seed and checks fingerprint used, how the notebook run went, when it was graded;
* ``results(student, exercise, ...)``: one row per student and exercise: points, score (NULL
  while pending or unchecked), status, message, the answer and its hash;
* ``reviews(student, exercise, ...)``: an instructor's score for an explain answer, valid for the
  answer hash it was given for (a changed answer is pending again).

Each submission is written in one transaction, so a crash or Ctrl-C loses nothing already graded
and never leaves half a submission. :meth:`Gradebook.is_graded` says whether a file (by hash) was
already graded with the same seed and checks, which is how a re-run skips finished work.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.grading.score import ExerciseResult, SubmissionResult

FORMAT_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submissions (
    student TEXT NOT NULL, chapter TEXT NOT NULL, path TEXT NOT NULL, sha256 TEXT NOT NULL,
    seed INTEGER NOT NULL, checks TEXT NOT NULL, run_status TEXT NOT NULL,
    run_cell INTEGER, run_message TEXT NOT NULL, graded_at TEXT NOT NULL,
    PRIMARY KEY (student, chapter));
CREATE TABLE IF NOT EXISTS results (
    student TEXT NOT NULL, exercise TEXT NOT NULL, chapter TEXT NOT NULL, position INTEGER,
    points REAL NOT NULL, score REAL, status TEXT NOT NULL, message TEXT NOT NULL,
    answer TEXT NOT NULL, answer_sha TEXT NOT NULL, PRIMARY KEY (student, exercise));
CREATE TABLE IF NOT EXISTS reviews (
    student TEXT NOT NULL, exercise TEXT NOT NULL, answer_sha TEXT NOT NULL,
    score REAL NOT NULL, comment TEXT NOT NULL, PRIMARY KEY (student, exercise));
"""


@dataclass(frozen=True)
class Row:
    """One effective gradebook row: a result with any valid instructor review applied."""

    student: str
    exercise: str
    chapter: str
    position: int
    points: float
    score: float | None
    status: str
    message: str
    answer: str
    answer_sha: str


@dataclass(frozen=True)
class Submission:
    """One graded submission's record (see the module docstring)."""

    student: str
    chapter: str
    path: str
    sha256: str
    seed: int
    checks: str
    run_status: str
    run_cell: int | None
    run_message: str
    graded_at: str


class Gradebook:
    """A gradebook file, opened (and created when absent) at ``path``.

    Use as a context manager or call :meth:`close`. Only the thread that opened it may use it.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(str(self.path))
            self._db.executescript(_SCHEMA)
            found = self.meta("format")
            if found is None:
                with self._db:
                    self._set_meta("format", str(FORMAT_VERSION))
            elif found != str(FORMAT_VERSION):
                raise CourseError(
                    f"{self.path}: gradebook format {found}, this llmfs reads {FORMAT_VERSION}"
                )
        except sqlite3.DatabaseError as error:
            raise CourseError(f"{self.path}: not a gradebook ({error})") from None

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the file (everything recorded is already committed)."""
        self._db.close()

    # -- meta ---------------------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        """A meta value, or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta(self, key: str, value: str) -> None:
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def seed(self, wanted: int | None, choose: int) -> int:
        """The gradebook's seed: the stored one; else ``wanted``, else ``choose``, stored now.

        Raises :class:`CourseError` when ``wanted`` differs from the stored seed (grading one
        class with two seeds would give different hidden cases to different students).
        """
        stored = self.meta("seed")
        if stored is not None:
            if wanted is not None and int(stored) != wanted:
                raise CourseError(
                    f"{self.path}: this gradebook was graded with seed {stored}, not {wanted}; "
                    "use another --out folder (or the same seed)"
                )
            return int(stored)
        seed = wanted if wanted is not None else choose
        with self._db:
            self._set_meta("seed", str(seed))
        return seed

    # -- writing ------------------------------------------------------------------------------

    def is_graded(self, student: str, chapter: str, sha256: str, seed: int, checks: str) -> bool:
        """True when this student's chapter was graded from these bytes, seed and checks."""
        row = self._db.execute(
            "SELECT sha256, seed, checks FROM submissions WHERE student = ? AND chapter = ?",
            (student, chapter),
        ).fetchone()
        return row is not None and tuple(row) == (sha256, seed, checks)

    def record(self, result: SubmissionResult, graded_at: str | None = None) -> None:
        """Replaces the student's rows for the chapter with ``result``, in one transaction."""
        when = graded_at or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        run = result.run
        with self._db:
            self._db.execute(
                "DELETE FROM results WHERE student = ? AND chapter = ?",
                (result.student, result.chapter),
            )
            self._db.execute(
                "INSERT OR REPLACE INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    result.student,
                    result.chapter,
                    result.path,
                    result.sha256,
                    result.seed,
                    result.checks,
                    run.status,
                    run.cell,
                    run.message,
                    when,
                ),
            )
            self._db.executemany(
                "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    _result_row(result.student, result.chapter, position, item)
                    for position, item in enumerate(result.results)
                ],
            )

    def review(self, student: str, exercise: str, score: float, comment: str) -> None:
        """Stores an instructor's score for the student's current explain answer.

        Raises :class:`CourseError` when the gradebook has no pending or reviewed explain answer
        of that student for that exercise, or the score is outside 0..points.
        """
        row = self._db.execute(
            "SELECT points, answer_sha, status FROM results WHERE student = ? AND exercise = ?",
            (student, exercise),
        ).fetchone()
        if row is None or not row[1]:
            raise CourseError(
                f"{self.path}: no written answer of {student!r} to {exercise!r} to score"
            )
        points, answer_sha, _ = row
        if not 0 <= score <= points:
            raise CourseError(
                f"{student} {exercise}: score {score:g} is outside 0..{points:g} (its points)"
            )
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO reviews VALUES (?, ?, ?, ?, ?)",
                (student, exercise, answer_sha, score, comment),
            )

    def import_from(self, other: Gradebook) -> list[str]:
        """Merges another gradebook into this one; returns a message per conflict resolved.

        A student's chapter present in both keeps the more recently graded submission (ties:
        this gradebook's); reviews travel with the answers they score.
        """
        messages = []
        for theirs in other.submissions():
            mine = self.submission(theirs.student, theirs.chapter)
            if mine is not None and mine.sha256 != theirs.sha256:
                keep_theirs = theirs.graded_at > mine.graded_at
                kept = other.path if keep_theirs else self.path
                messages.append(
                    f"{theirs.student} {theirs.chapter}: graded from different files in "
                    f"{self.path} and {other.path}; kept the later one ({kept})"
                )
                if not keep_theirs:
                    continue
            elif mine is not None:
                continue
            rows = list(other._raw_results(theirs.student, theirs.chapter))
            with self._db:
                self._db.execute(
                    "DELETE FROM results WHERE student = ? AND chapter = ?",
                    (theirs.student, theirs.chapter),
                )
                self._db.execute(
                    "INSERT OR REPLACE INTO submissions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        theirs.student,
                        theirs.chapter,
                        theirs.path,
                        theirs.sha256,
                        theirs.seed,
                        theirs.checks,
                        theirs.run_status,
                        theirs.run_cell,
                        theirs.run_message,
                        theirs.graded_at,
                    ),
                )
                self._db.executemany(
                    "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
                )
        with self._db:
            for review in other._db.execute("SELECT * FROM reviews ORDER BY student, exercise"):
                self._db.execute("INSERT OR REPLACE INTO reviews VALUES (?, ?, ?, ?, ?)", review)
        return messages

    # -- reading ------------------------------------------------------------------------------

    def submissions(self) -> list[Submission]:
        """Every submission record, by student then chapter."""
        rows = self._db.execute("SELECT * FROM submissions ORDER BY student, chapter").fetchall()
        return [Submission(*row) for row in rows]

    def submission(self, student: str, chapter: str) -> Submission | None:
        """One submission record, or None."""
        row = self._db.execute(
            "SELECT * FROM submissions WHERE student = ? AND chapter = ?", (student, chapter)
        ).fetchone()
        return None if row is None else Submission(*row)

    def _raw_results(self, student: str, chapter: str) -> Iterator[tuple[object, ...]]:
        yield from self._db.execute(
            "SELECT * FROM results WHERE student = ? AND chapter = ? ORDER BY position",
            (student, chapter),
        )

    def rows(self) -> list[Row]:
        """Every result with valid reviews applied, by student, chapter, then exercise order."""
        reviews = {
            (student, exercise): (sha, score, comment)
            for student, exercise, sha, score, comment in self._db.execute("SELECT * FROM reviews")
        }
        rows = []
        query = "SELECT * FROM results ORDER BY student, chapter, position"
        for raw in self._db.execute(query):
            row = Row(*raw)
            review = reviews.get((row.student, row.exercise))
            if review is not None and row.status == "pending" and review[0] == row.answer_sha:
                message = review[2] or "reviewed by the instructor"
                row = Row(
                    row.student,
                    row.exercise,
                    row.chapter,
                    row.position,
                    row.points,
                    float(review[1]),
                    "reviewed",
                    message,
                    row.answer,
                    row.answer_sha,
                )
            rows.append(row)
        return rows

    def snapshot(self) -> list[tuple[object, ...]]:
        """Submissions (without the grading time) and rows, as plain tuples: what two runs
        that graded the same inputs must agree on."""
        subs = [
            (s.student, s.chapter, s.sha256, s.seed, s.checks, s.run_status, s.run_cell)
            for s in self.submissions()
        ]
        rows = [
            (r.student, r.exercise, r.points, r.score, r.status, r.message, r.answer_sha)
            for r in self.rows()
        ]
        return [*subs, *rows]


def _result_row(
    student: str, chapter: str, position: int, item: ExerciseResult
) -> tuple[object, ...]:
    return (
        student,
        item.exercise,
        chapter,
        position,
        item.points,
        item.score,
        item.status,
        item.message,
        item.answer,
        item.answer_sha,
    )


def merge_gradebooks(target: Path, sources: Iterable[Path]) -> list[str]:
    """Merges every source gradebook into ``target`` (created when absent); returns the
    conflict messages. Raises :class:`CourseError` for a source that does not exist."""
    messages = []
    with Gradebook(target) as book:
        for source in sources:
            if not Path(source).is_file():
                raise CourseError(f"{source}: no such gradebook")
            with Gradebook(source) as other:
                messages += book.import_from(other)
    return messages
