"""The attempts log: one JSON line per checked exercise attempt, read by the self-check and grader.

Exercise widgets and the text ``check(...)`` form call :func:`record_attempt` after comparing a
learner's answer with the truth; :func:`load_attempts` reads the log back (the planned
self-check and grader commands are built on it). The log lives in the learner's working folder:

* the path in the environment variable ``LLMFS_ATTEMPTS`` when it is set, else
* ``.llmfs/attempts.jsonl`` under the current directory (a notebook kernel's current directory is
  the notebook's folder, i.e. the learner's course folder).

Each line is a JSON object with sorted keys and no timestamp, so the log depends only on what the
learner did, in order::

    {"answers": {"shape": "(3, 2)"}, "attempt": 2, "correct": false, "exercise": "ch02.q1",
     "fields": {"shape": true, "strides": false}, "format": 1}

``attempt`` counts this exercise's attempts in the log (1 for the first); ``correct`` is true
exactly when every field is right; ``answers`` (optional) holds the learner's entries as text.
Three more keys are written by this version and optional when reading: ``first`` (true on the
exercise's first attempt), ``hints`` (how many hints the learner had seen before this attempt)
and ``revealed`` (the fields whose answer had been shown, sorted).

Asking for a hint and revealing an answer are events, logged as their own lines with an
``event`` key (``"hint"`` or ``"reveal"``)::

    {"event": "hint", "exercise": "ch02.q2", "format": 1, "number": 1}
    {"event": "reveal", "exercise": "ch02.q2", "fields": ["strides"], "format": 1}

:func:`load_attempts` skips event lines; :func:`load_events` reads them.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.manifest import Manifest, load_manifest

ENV_ATTEMPTS = "LLMFS_ATTEMPTS"
DEFAULT_ATTEMPTS = Path(".llmfs") / "attempts.jsonl"
FORMAT_VERSION = 1
_KEYS = {"answers", "attempt", "correct", "exercise", "fields", "format"}
_OPTIONAL_KEYS = {"first", "hints", "revealed"}
EVENT_KINDS: tuple[str, ...] = ("hint", "reveal")


@dataclass(frozen=True)
class Attempt:
    """One checked attempt at an exercise.

    Invariant: ``fields`` is non-empty; ``correct == all(fields.values())``; ``attempt >= 1``.
    """

    exercise: str
    attempt: int
    fields: Mapping[str, bool]
    answers: Mapping[str, str] = field(default_factory=dict)
    hints: int = 0
    revealed: tuple[str, ...] = ()

    @property
    def first(self) -> bool:
        """True for the learner's first attempt at this exercise."""
        return self.attempt == 1

    @property
    def correct(self) -> bool:
        """True when every checked field was right."""
        return all(self.fields.values())

    def to_json(self) -> str:
        """The attempt as one deterministic JSON line (sorted keys, no trailing newline)."""
        record = {
            "answers": dict(self.answers),
            "attempt": self.attempt,
            "correct": self.correct,
            "exercise": self.exercise,
            "fields": dict(self.fields),
            "first": self.first,
            "format": FORMAT_VERSION,
            "hints": self.hints,
            "revealed": sorted(self.revealed),
        }
        return json.dumps(record, sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Event:
    """A logged request that is not an attempt: a ``hint`` (``number`` counts the exercise's
    hints, 1 for the first) or a ``reveal`` (``fields`` whose answers were shown)."""

    kind: str
    exercise: str
    number: int = 0
    fields: tuple[str, ...] = ()

    def to_json(self) -> str:
        """The event as one deterministic JSON line."""
        record: dict[str, object] = {
            "event": self.kind,
            "exercise": self.exercise,
            "format": FORMAT_VERSION,
        }
        if self.kind == "hint":
            record["number"] = self.number
        else:
            record["fields"] = sorted(self.fields)
        return json.dumps(record, sort_keys=True, ensure_ascii=False)


def attempts_path() -> Path:
    """Where attempts are logged now: ``$LLMFS_ATTEMPTS``, else ``./.llmfs/attempts.jsonl``."""
    configured = os.environ.get(ENV_ATTEMPTS)
    return Path(configured).expanduser() if configured else Path.cwd() / DEFAULT_ATTEMPTS


def record_attempt(
    exercise_id: str,
    fields: Mapping[str, bool],
    *,
    answers: Mapping[str, str] | None = None,
    path: Path | str | None = None,
    manifest: Manifest | None = None,
    hints: int = 0,
    revealed: Iterable[str] = (),
) -> Attempt:
    """Append one attempt at ``exercise_id`` to the log and return it.

    ``fields`` maps each checked field name (``"shape"``, ``"strides"``, ...) to whether the
    learner had it right; ``answers`` optionally maps field names to what the learner entered, as
    text. ``path`` defaults to :func:`attempts_path`; ``manifest`` to this installation's.

    Raises :class:`CourseError` when the exercise is not in the manifest, ``fields`` is empty or
    holds a non-string name or a non-bool value, ``answers`` holds a non-string, or the existing
    log is malformed (its path and line are named).
    """
    course = manifest if manifest is not None else load_manifest()
    course.exercise(exercise_id)  # raises CourseError for an unknown id
    checked = _checked_fields(exercise_id, fields)
    entered = _checked_answers(exercise_id, answers or {})
    log = Path(path) if path is not None else attempts_path()
    previous = sum(1 for attempt in load_attempts(log) if attempt.exercise == exercise_id)
    attempt = Attempt(
        exercise=exercise_id,
        attempt=previous + 1,
        fields=checked,
        answers=entered,
        hints=hints,
        revealed=tuple(sorted(set(revealed))),
    )
    _append(log, attempt.to_json(), f"the attempt at {exercise_id}")
    return attempt


def record_event(
    kind: str,
    exercise_id: str,
    *,
    number: int = 0,
    fields: Iterable[str] = (),
    path: Path | str | None = None,
    manifest: Manifest | None = None,
) -> Event:
    """Append a ``hint`` or ``reveal`` event for ``exercise_id`` to the log and return it.

    Raises :class:`CourseError` for an unknown kind or exercise, or a log that cannot be written.
    """
    if kind not in EVENT_KINDS:
        raise CourseError(f"an event is one of {EVENT_KINDS}, got {kind!r}")
    course = manifest if manifest is not None else load_manifest()
    course.exercise(exercise_id)
    event = Event(kind, exercise_id, number, tuple(sorted(set(fields))))
    log = Path(path) if path is not None else attempts_path()
    _append(log, event.to_json(), f"the {kind} of {exercise_id}")
    return event


def _append(log: Path, line: str, what: str) -> None:
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8", newline="\n") as handle:
            handle.write(line + "\n")
    except OSError as error:
        raise CourseError(f"{log}: cannot record {what} ({error})") from None


def load_events(path: Path | str | None = None) -> list[Event]:
    """Every hint and reveal event in the log at ``path`` (default :func:`attempts_path`).

    Raises :class:`CourseError` naming the file and line of a malformed event.
    """
    log = Path(path) if path is not None else attempts_path()
    try:
        text = log.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    events = []
    for number, line in enumerate(text.splitlines(), start=1):
        record = _json_line(line, f"{log} line {number}") if line.strip() else None
        if record is None or "event" not in record:
            continue
        where = f"{log} line {number}"
        kind, exercise = record.get("event"), record.get("exercise")
        if kind not in EVENT_KINDS or not isinstance(exercise, str):
            raise CourseError(f"{where}: an event has a kind in {EVENT_KINDS} and an exercise id")
        count = record.get("number", 0)
        names = record.get("fields", [])
        if isinstance(count, bool) or not isinstance(count, int) or not isinstance(names, list):
            raise CourseError(f"{where}: 'number' must be an integer and 'fields' a list")
        events.append(Event(kind, exercise, count, tuple(str(n) for n in names)))
    return events


def _json_line(line: str, where: str) -> dict[str, object]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise CourseError(f"{where}: not a JSON object ({error})") from None
    if not isinstance(record, dict):
        raise CourseError(f"{where}: not a JSON object ({type(record).__name__})")
    return record


def load_attempts(
    path: Path | str | None = None, manifest: Manifest | None = None
) -> list[Attempt]:
    """Every attempt in the log at ``path`` (default :func:`attempts_path`), in file order.

    A missing log means no attempts yet (an empty list). With ``manifest``, every exercise id must
    be in it. Raises :class:`CourseError` naming the file and line of the first malformed record.
    """
    log = Path(path) if path is not None else attempts_path()
    try:
        text = log.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    attempts = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{log} line {number}"
        if "event" in _json_line(line, where):
            continue  # hints and reveals: see load_events
        attempt = _parse_record(line, where)
        if manifest is not None:
            try:
                manifest.exercise(attempt.exercise)
            except CourseError as error:
                raise CourseError(f"{where}: {error}") from None
        attempts.append(attempt)
    return attempts


def latest_attempts(attempts: Iterable[Attempt]) -> dict[str, Attempt]:
    """The last attempt at each exercise, keyed by exercise id (in first-attempt order)."""
    latest: dict[str, Attempt] = {}
    for attempt in attempts:
        latest[attempt.exercise] = attempt
    return latest


def _parse_record(line: str, where: str) -> Attempt:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise CourseError(f"{where}: not a JSON object ({error})") from None
    if not isinstance(record, dict) or not _KEYS <= set(record) <= _KEYS | _OPTIONAL_KEYS:
        keys = sorted(record) if isinstance(record, dict) else type(record).__name__
        raise CourseError(
            f"{where}: an attempt record has the keys {sorted(_KEYS)} (and optionally "
            f"{sorted(_OPTIONAL_KEYS)}), got {keys}"
        )
    if record["format"] != FORMAT_VERSION:
        raise CourseError(f"{where}: format must be {FORMAT_VERSION}, got {record['format']!r}")
    exercise = record["exercise"]
    number = record["attempt"]
    if not isinstance(exercise, str) or isinstance(number, bool) or not isinstance(number, int):
        raise CourseError(f"{where}: 'exercise' must be a string and 'attempt' an integer")
    if number < 1:
        raise CourseError(f"{where}: 'attempt' must be >= 1, got {number}")
    checked = _checked_fields(exercise, record["fields"], where)
    hints = record.get("hints", 0)
    revealed = record.get("revealed", [])
    if isinstance(hints, bool) or not isinstance(hints, int) or hints < 0:
        raise CourseError(f"{where}: 'hints' must be an integer >= 0, got {hints!r}")
    if not isinstance(revealed, list) or not all(isinstance(name, str) for name in revealed):
        raise CourseError(f"{where}: 'revealed' must be a list of field names")
    attempt = Attempt(
        exercise=exercise,
        attempt=number,
        fields=checked,
        answers=_checked_answers(exercise, record["answers"], where),
        hints=hints,
        revealed=tuple(revealed),
    )
    if "first" in record and record["first"] is not attempt.first:
        raise CourseError(f"{where}: 'first' is {record['first']!r} but 'attempt' is {number}")
    if record["correct"] is not attempt.correct:
        raise CourseError(
            f"{where}: 'correct' is {record['correct']!r} but the fields say {attempt.correct}"
        )
    return attempt


def _checked_fields(exercise_id: str, fields: object, where: str | None = None) -> dict[str, bool]:
    label = where or f"attempt at {exercise_id}"
    if not isinstance(fields, Mapping) or not fields:
        raise CourseError(f"{label}: fields must be a non-empty mapping of field name to bool")
    for name, value in fields.items():
        if not isinstance(name, str) or not name or not isinstance(value, bool):
            raise CourseError(
                f"{label}: field {name!r} -> {value!r}: names must be non-empty strings and "
                "values True or False"
            )
    return dict(fields)


def _checked_answers(exercise_id: str, answers: object, where: str | None = None) -> dict[str, str]:
    label = where or f"attempt at {exercise_id}"
    if not isinstance(answers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in answers.items()
    ):
        raise CourseError(f"{label}: answers must map field names to the learner's text (strings)")
    return dict(answers)
