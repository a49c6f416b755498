"""The gradebook: one SQLite file (standard library ``sqlite3``) holding every graded submission.

Tables:

* ``meta(key, value)``: ``format`` and the grading ``seed`` chosen when the file was created
  (every later run reuses it, so resuming gives identical results);
* ``submissions(student, chapter, ...)``: one row per student and chapter: the file graded, its
  SHA-256, the seed and checks fingerprint used, how the notebook run went, when it was graded;
* ``results(student, exercise, ...)``: one row per student and exercise: points, score (NULL
  while pending or unchecked), status, message, the answer and its hash;
* ``reviews(student, exercise, answer_sha, ...)``: an instructor's score for an explain answer,
  valid only for the answer hash it was given for (a changed answer is pending again; an answer
  changed back finds its old score), with when it was given (``reviewed_at``, UTC, microseconds);
* ``notes(student, chapter, position, note)``: what collecting the submission reported without
  stopping the grading (extra notebooks, links not followed; see
  :mod:`~llmfs.course.grading.collect`).

Each submission is written in one transaction, so a crash or Ctrl-C loses nothing already graded
and never leaves half a submission. :meth:`Gradebook.is_graded` says whether a file (by hash) was
already graded with the same seed and checks, which is how a re-run skips finished work.

Merging (:func:`merge_gradebooks`) gives the same gradebook whatever the order of its sources:
per student and chapter the most recently graded submission wins, per (student, exercise,
answer hash) the most recent review; ties are broken by the values themselves. Gradebooks
graded with different seeds are refused unless asked for, and a merge, like an import of
scores (:meth:`Gradebook.store_reviews`), is one transaction: all of it or nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.exercises.verdict import Verdict
from llmfs.course.grading.score import SubmissionResult
from llmfs.course.grading.shown import storable

FORMAT_VERSION = 2

_META = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
_SCHEMA = """
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
    score REAL NOT NULL, comment TEXT NOT NULL, reviewed_at TEXT NOT NULL,
    PRIMARY KEY (student, exercise, answer_sha));
CREATE TABLE IF NOT EXISTS notes (
    student TEXT NOT NULL, chapter TEXT NOT NULL, position INTEGER NOT NULL,
    note TEXT NOT NULL, PRIMARY KEY (student, chapter, position));
"""

# Format 1 kept one review per (student, exercise) and no time: its reviews become the oldest.
_FROM_FORMAT_1 = """
ALTER TABLE reviews RENAME TO reviews_format_1;
CREATE TABLE reviews (
    student TEXT NOT NULL, exercise TEXT NOT NULL, answer_sha TEXT NOT NULL,
    score REAL NOT NULL, comment TEXT NOT NULL, reviewed_at TEXT NOT NULL,
    PRIMARY KEY (student, exercise, answer_sha));
INSERT INTO reviews SELECT student, exercise, answer_sha, score, comment, '' FROM reviews_format_1;
DROP TABLE reviews_format_1;
UPDATE meta SET value = '2' WHERE key = 'format';
"""


def now() -> str:
    """The current UTC time as the gradebook stores it (sortable text, microseconds)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Review:
    """An instructor's score for one explain answer (identified by its hash)."""

    student: str
    exercise: str
    answer_sha: str
    score: float
    comment: str
    reviewed_at: str = ""


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
            self._db.executescript(_META)
            found = self.meta("format")
            if found == "1":
                self._db.executescript(f"BEGIN; {_FROM_FORMAT_1} COMMIT;")
                found = str(FORMAT_VERSION)
            self._db.executescript(_SCHEMA)
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

    def set_meta(self, key: str, value: str) -> None:
        """Stores a meta value (the limits a run was graded under, say), replacing it."""
        with self._db:
            self._set_meta(key, storable(value))

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
        when = graded_at or now()
        run = result.run
        result = _storable_result(result)
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

    def record_notes(self, chapter: str, notes: Mapping[str, Sequence[str]]) -> None:
        """Replaces the collection notes of each student named in ``notes`` for the chapter
        (students not named keep theirs), in one transaction."""
        with self._db:
            for student, items in notes.items():
                self._db.execute(
                    "DELETE FROM notes WHERE student = ? AND chapter = ?", (student, chapter)
                )
                self._db.executemany(
                    "INSERT INTO notes VALUES (?, ?, ?, ?)",
                    [(student, chapter, i, storable(note)) for i, note in enumerate(items)],
                )

    def check_review(
        self, student: str, exercise: str, score: float, answer_sha: str | None = None
    ) -> str:
        """The hash of the answer a review of (student, exercise) scores; checks the review.

        Raises :class:`CourseError` when the gradebook has no written answer of that student to
        that exercise, ``answer_sha`` is given and is not the current answer's hash (the answer
        changed since it was scored), or the score is not a finite number in 0..points.
        """
        row = self._db.execute(
            "SELECT points, answer_sha FROM results WHERE student = ? AND exercise = ?",
            (student, exercise),
        ).fetchone()
        if row is None or not row[1]:
            raise CourseError(
                f"{self.path}: no written answer of {student!r} to {exercise!r} to score"
            )
        points, current = row
        if answer_sha is not None and answer_sha != current:
            raise CourseError(
                f"{student} {exercise}: the answer changed since it was scored (hash "
                f"{answer_sha[:12]}, now {current[:12]})"
            )
        if not (0 <= score <= points):  # also refuses NaN
            raise CourseError(
                f"{student} {exercise}: score {score:g} is outside 0..{points:g} (its points)"
            )
        return str(current)

    def review(self, student: str, exercise: str, score: float, comment: str) -> None:
        """Stores an instructor's score for the student's current explain answer.

        Raises :class:`CourseError` as :meth:`check_review` does.
        """
        sha = self.check_review(student, exercise, score)
        self.store_reviews([Review(student, exercise, sha, score, comment)])

    def store_reviews(self, reviews: Sequence[Review]) -> int:
        """Stores reviews (each for the answer hash it names), all in one transaction; returns
        how many changed the gradebook.

        A review equal in score and comment to the one stored for that answer changes nothing,
        not even its time, so reading the same scores file again never makes its reviews look
        newer than another gradebook's in a merge. An empty ``reviewed_at`` means now.
        """
        changed = 0
        when = now()
        with self._db:
            for item in reviews:
                stored = self._db.execute(
                    "SELECT score, comment FROM reviews WHERE student = ? AND exercise = ? "
                    "AND answer_sha = ?",
                    (item.student, item.exercise, item.answer_sha),
                ).fetchone()
                if stored is not None and tuple(stored) == (item.score, item.comment):
                    continue
                self._db.execute(
                    "INSERT OR REPLACE INTO reviews VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        item.student,
                        item.exercise,
                        item.answer_sha,
                        item.score,
                        item.comment,
                        item.reviewed_at or when,
                    ),
                )
                changed += 1
        return changed

    def _import(self, other: Gradebook) -> list[str]:
        """Merges ``other`` into this gradebook without committing (see :func:`merge_gradebooks`
        for the rules); returns a message per conflict resolved."""
        messages = []
        for theirs in other.submissions():
            mine = self.submission(theirs.student, theirs.chapter)
            if mine is not None and (_submission_order(mine), self._notes_of(mine)) >= (
                _submission_order(theirs),
                other._notes_of(theirs),
            ):
                if mine.sha256 != theirs.sha256:
                    messages.append(_conflict(theirs, self.path, other.path, self.path))
                continue
            if mine is not None and mine.sha256 != theirs.sha256:
                messages.append(_conflict(theirs, self.path, other.path, other.path))
            key = (theirs.student, theirs.chapter)
            self._db.execute("DELETE FROM results WHERE student = ? AND chapter = ?", key)
            self._db.execute("DELETE FROM notes WHERE student = ? AND chapter = ?", key)
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
                "INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                list(other._raw_results(*key)),
            )
            self._db.executemany(
                "INSERT INTO notes VALUES (?, ?, ?, ?)",
                other._db.execute(
                    "SELECT * FROM notes WHERE student = ? AND chapter = ?", key
                ).fetchall(),
            )
        for review in other.reviews():
            stored = self._db.execute(
                "SELECT * FROM reviews WHERE student = ? AND exercise = ? AND answer_sha = ?",
                (review.student, review.exercise, review.answer_sha),
            ).fetchone()
            if stored is None or _review_order(Review(*stored)) < _review_order(review):
                self._db.execute(
                    "INSERT OR REPLACE INTO reviews VALUES (?, ?, ?, ?, ?, ?)",
                    (
                        review.student,
                        review.exercise,
                        review.answer_sha,
                        review.score,
                        review.comment,
                        review.reviewed_at,
                    ),
                )
        return messages

    def _notes_of(self, submission: Submission) -> tuple[str, ...]:
        query = "SELECT note FROM notes WHERE student = ? AND chapter = ? ORDER BY position"
        rows = self._db.execute(query, (submission.student, submission.chapter))
        return tuple(str(row[0]) for row in rows)

    def import_from(self, other: Gradebook) -> list[str]:
        """Merges another gradebook into this one in one transaction; returns a message per
        conflict resolved (see :func:`merge_gradebooks`)."""
        with self._db:
            return self._import(other)

    def seeds(self) -> set[int]:
        """Every seed this gradebook holds: the stored one and those its submissions used."""
        found = {int(row[0]) for row in self._db.execute("SELECT DISTINCT seed FROM submissions")}
        stored = self.meta("seed")
        return found | ({int(stored)} if stored is not None else set())

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

    def reviews(self) -> list[Review]:
        """Every stored review, by student, exercise, then answer hash."""
        query = "SELECT * FROM reviews ORDER BY student, exercise, answer_sha"
        return [Review(*row) for row in self._db.execute(query)]

    def notes(self) -> dict[tuple[str, str], list[str]]:
        """(student, chapter) -> the collection notes, in order."""
        found: dict[tuple[str, str], list[str]] = {}
        query = "SELECT student, chapter, note FROM notes ORDER BY student, chapter, position"
        for student, chapter, note in self._db.execute(query):
            found.setdefault((student, chapter), []).append(note)
        return found

    def rows(self) -> list[Row]:
        """Every result with valid reviews applied, by student, chapter, then exercise order.

        A review applies to a pending answer only when it was given for that answer's hash."""
        reviews = {
            (r.student, r.exercise, r.answer_sha): (r.score, r.comment) for r in self.reviews()
        }
        rows = []
        query = "SELECT * FROM results ORDER BY student, chapter, position"
        for raw in self._db.execute(query):
            row = Row(*raw)
            review = reviews.get((row.student, row.exercise, row.answer_sha))
            if review is not None and row.status == "pending" and row.answer_sha:
                message = review[1] or "reviewed by the instructor"
                row = Row(
                    row.student,
                    row.exercise,
                    row.chapter,
                    row.position,
                    row.points,
                    float(review[0]),
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
        notes = [(*key, tuple(items)) for key, items in sorted(self.notes().items())]
        return [*subs, *rows, *notes]


def _storable_result(result: SubmissionResult) -> SubmissionResult:
    """``result`` with every text a submission could supply made encodable
    (:func:`~llmfs.course.grading.shown.storable`): a file name that is not UTF-8, a lone
    surrogate in an answer or a message never stops the gradebook."""
    from dataclasses import replace

    items = tuple(
        replace(
            item,
            message=storable(item.message),
            answer=storable(item.answer) if isinstance(item.answer, str) else item.answer,
        )
        for item in result.results
    )
    run = replace(result.run, message=storable(result.run.message))
    return replace(
        result,
        student=storable(result.student),
        path=storable(result.path),
        run=run,
        results=items,
    )


def _result_row(student: str, chapter: str, position: int, item: Verdict) -> tuple[object, ...]:
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


def _when(text: str) -> datetime:
    """A stored time as a datetime (both ``...:05Z`` and ``...:05.250000Z``; empty: oldest)."""
    for pattern in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(text, pattern).replace(tzinfo=timezone.utc)
        except ValueError:
            continue
    return datetime.min.replace(tzinfo=timezone.utc)


def _submission_order(s: Submission) -> tuple[object, ...]:
    """Which of two records of one student's chapter a merge keeps: the greater. Later
    grading first; the rest only makes the choice independent of the order of the sources."""
    return (_when(s.graded_at), s.graded_at, s.sha256, s.checks, s.seed, s.path)


def _review_order(r: Review) -> tuple[object, ...]:
    """Which of two reviews of one answer a merge keeps: the greater (later review first)."""
    return (_when(r.reviewed_at), r.reviewed_at, r.score, r.comment)


def _conflict(theirs: Submission, mine: Path, other: Path, kept: Path) -> str:
    return (
        f"{theirs.student} {theirs.chapter}: graded from different files in {mine} and "
        f"{other}; kept the later one ({kept})"
    )


def merge_gradebooks(
    target: Path, sources: Iterable[Path], *, allow_mixed_seeds: bool = False
) -> list[str]:
    """Merges every source gradebook into ``target`` (created when absent); returns the
    conflict messages.

    The result does not depend on the order of ``sources``: per student and chapter the most
    recently graded submission is kept (with its rows and notes), per (student, exercise,
    answer hash) the most recent review. The seed is kept: ``target`` takes the sources' seed
    when it has none. Everything is one transaction, so a failure stores nothing.

    Raises :class:`CourseError` for a source that does not exist or is not a gradebook, and,
    unless ``allow_mixed_seeds``, when the gradebooks (``target`` included) hold more than one
    seed (students graded on different hidden cases), naming each file's seeds.
    """
    sources = list(sources)
    for source in sources:
        if not Path(source).is_file():
            raise CourseError(f"{source}: no such gradebook")
    messages = []
    target_path = Path(target).resolve()
    with Gradebook(target) as book:
        others = [Path(s) for s in sources if Path(s).resolve() != target_path]
        opened = []
        try:
            for source in others:
                opened.append(Gradebook(source))
            seeds = {str(book.path): book.seeds()} | {str(o.path): o.seeds() for o in opened}
            every = set().union(*seeds.values())
            if len(every) > 1 and not allow_mixed_seeds:
                listed = "; ".join(
                    f"{path}: {', '.join(map(str, sorted(found)))}"
                    for path, found in seeds.items()
                    if found
                )
                raise CourseError(
                    f"the gradebooks were graded with different seeds ({listed}), so their "
                    "students met different hidden cases; merge gradebooks of one seed, or "
                    "pass --allow-mixed-seeds"
                )
            with book._db:
                for other in opened:
                    messages += book._import(other)
                if book.meta("seed") is None:
                    stored = sorted(
                        int(seed) for o in opened if (seed := o.meta("seed")) is not None
                    )
                    if stored:
                        book._set_meta("seed", str(stored[0]))
            if len(every) > 1:
                messages.append(
                    f"{book.path}: holds submissions graded with seeds "
                    f"{', '.join(map(str, sorted(every)))} (--allow-mixed-seeds); it keeps "
                    f"seed {book.meta('seed')} for new grading"
                )
        finally:
            for other in opened:
                other.close()
    return messages
