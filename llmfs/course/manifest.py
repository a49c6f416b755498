"""The course manifest: chapters in order and every exercise, read from ``course/manifest.toml``.

The manifest is the single list of exercises: ``llmfs build``, the self-check, the grader and the
attempts log all read it through :func:`load_manifest`; nothing else lists exercises.

An exercise lives in exactly one code or markdown cell of its chapter's notebook, the cell whose
metadata tags include ``exercise:<id>`` (for example ``exercise:ch02.q4``). The tag, not the cell
position or the cell id, is the link: it survives reordering and copy-paste in JupyterLab, and the
build carries it into the student notebook unchanged. :attr:`Exercise.tag` spells it.

File format (TOML)::

    format = 1

    [[chapters]]
    id = "ch01"                                         # "ch" + two digits, unique, in course order
    title = "Storage, shape and strides"
    status = "published"                      # or "planned": no notebooks yet, no exercises
    solution = "solutions/ch01_storage_shape_strides.ipynb"
    notebook = "notebooks/ch01_storage_shape_strides.ipynb"
    objectives = ["Explain ...", "Compute ..."]
    reveal = false                # optional: graded work, no answer is ever shown (default true)

    [[chapters.exercises]]
    id = "ch01.q1"                                      # "<chapter id>.<name>", unique
    kind = "predict"                                    # predict | implement | explain
    points = 1                                          # a non-negative integer
    title = "Predict the strides of a [10, 9, 5, 13] tensor"
    expression = "Tensor.zeros([10, 9, 5, 13])"          # predict: what the learner predicts
    fields = ["strides"]                                # predict: the fields asked, in order
    hints = ["first hint", "second hint"]               # shown one at a time, on request
    scoring = "per_field"                               # or "all_or_nothing" (predict only)
    function = "compute_strides"                        # implement: the function to define
    rubric = ["a point the answer must make", ...]      # explain: 3-4 points to self-assess

    [[chapters.exercises.mistakes]]                     # predict: an expected wrong answer
    field = "strides"
    answer = [2, 1]
    message = "what that answer shows about the learner's model, in one sentence"

Paths are relative to the course root (the folder holding ``course/``), POSIX style.

``reveal = false`` at the top level turns reveals off for every chapter, on a chapter for that
chapter (a chapter's own ``reveal`` wins): its student notebook's checks say right or wrong and
never show an answer (:mod:`llmfs.course.exercises.reveals`; ``llmfs build --assignment`` does
the same for every chapter without editing the manifest).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from llmfs.course import CourseError
from llmfs.course.paths import default_manifest_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

FORMAT_VERSION = 1
EXERCISE_KINDS: tuple[str, ...] = ("predict", "implement", "explain")
CHAPTER_STATUSES: tuple[str, ...] = ("published", "planned")
EXERCISE_TAG_PREFIX = "exercise:"

_CHAPTER_ID = re.compile(r"^ch[0-9]{2}$")
_EXERCISE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

_TOP_KEYS = {"format", "chapters", "reveal"}
_CHAPTER_KEYS = {
    "id",
    "title",
    "status",
    "solution",
    "notebook",
    "objectives",
    "exercises",
    "reveal",
}
_EXERCISE_KEYS = {
    "id",
    "kind",
    "points",
    "title",
    "expression",
    "fields",
    "hints",
    "scoring",
    "function",
    "rubric",
    "mistakes",
}
_KIND_KEYS: dict[str, set[str]] = {
    "predict": {"expression", "fields", "hints", "scoring", "mistakes"},
    "implement": {"function", "hints"},
    "explain": {"hints", "rubric"},
}
SCORINGS: tuple[str, ...] = ("per_field", "all_or_nothing")
_FIELD_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Mistake:
    """An expected wrong answer of a predict exercise: when the learner's ``field`` equals
    ``answer`` (a Python value, compared after the prediction is read), ``message`` says what
    that answer shows."""

    field: str
    answer: Any
    message: str


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id (``ch02.q4``), kind, points, a one-line title, and what its kind
    needs: a predict exercise's ``expression`` and ``fields`` (plus ``scoring``, ``mistakes``),
    an implement exercise's ``function``, an explain exercise's ``rubric``; ``hints`` for all.

    Invariant: ``id`` starts with its chapter's id and a dot; ``kind`` is one of
    :data:`EXERCISE_KINDS`; ``points >= 0``; only the keys of its kind are set; ``fields`` has no
    duplicate; ``scoring`` is one of :data:`SCORINGS`; every mistake names one of ``fields``.
    """

    id: str
    chapter: str
    kind: str
    points: int
    title: str
    expression: str | None = None
    fields: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    scoring: str = "per_field"
    function: str | None = None
    rubric: tuple[str, ...] = ()
    mistakes: tuple[Mistake, ...] = ()

    @property
    def tag(self) -> str:
        """The cell tag that marks this exercise's cell in both notebook versions."""
        return EXERCISE_TAG_PREFIX + self.id


@dataclass(frozen=True)
class Chapter:
    """One chapter: id, title, status, the two notebook paths, objectives and exercises in order.

    Invariant: a ``planned`` chapter has no exercises; paths are relative POSIX paths, the
    solution under ``solutions/`` and the student notebook under ``notebooks/``, same file name.
    ``reveal`` is False when the chapter is graded work (no answer is shown; the course's
    setting unless the chapter gives its own).
    """

    id: str
    title: str
    status: str
    solution: str
    notebook: str
    objectives: tuple[str, ...]
    exercises: tuple[Exercise, ...]
    reveal: bool = True

    @property
    def published(self) -> bool:
        """True when the chapter's notebooks exist and are part of the course."""
        return self.status == "published"


@dataclass(frozen=True)
class Manifest:
    """The whole course: chapters in order; the file it was read from; the course root.

    Invariant: chapter ids and exercise ids are unique across the course, and so are notebook paths.
    """

    path: Path
    root: Path
    chapters: tuple[Chapter, ...]

    @property
    def published_chapters(self) -> tuple[Chapter, ...]:
        """The chapters whose notebooks exist (status ``published``), in course order."""
        return tuple(chapter for chapter in self.chapters if chapter.published)

    def exercises(self) -> Iterator[Exercise]:
        """Every exercise of every chapter, in course order."""
        for chapter in self.chapters:
            yield from chapter.exercises

    def exercise(self, exercise_id: str) -> Exercise:
        """The exercise with this id; :class:`CourseError` if the manifest has none."""
        for exercise in self.exercises():
            if exercise.id == exercise_id:
                return exercise
        raise CourseError(
            f"{self.path}: no exercise with id {exercise_id!r} "
            f"(the manifest lists {sum(1 for _ in self.exercises())} exercises)"
        )

    def chapter(self, chapter_id: str) -> Chapter:
        """The chapter with this id; :class:`CourseError` if the manifest has none."""
        for chapter in self.chapters:
            if chapter.id == chapter_id:
                return chapter
        known = ", ".join(chapter.id for chapter in self.chapters)
        raise CourseError(f"{self.path}: no chapter with id {chapter_id!r} (chapters: {known})")


def load_manifest(path: Path | str | None = None) -> Manifest:
    """Read and validate the manifest at ``path`` (default: this installation's manifest).

    The course root is the parent of the manifest's ``course/`` folder. Raises
    :class:`CourseError` naming the file and the offending entry when the file is missing, is
    not valid TOML, has an unknown key, or breaks an invariant of :class:`Manifest`. A file whose
    text is unchanged since the last call for the same path gives the same (frozen) manifest.
    """
    manifest_path = Path(path) if path is not None else default_manifest_path()
    try:
        text = manifest_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CourseError(f"{manifest_path}: the course manifest does not exist") from None
    # Every check, hint and recorded attempt in a notebook looks its exercise up here, and
    # parsing the whole course's TOML costs a tenth of a second each time: the file is read
    # every call (cheap), and only parsed again when its text differs from the last parse of
    # this path, so an edited manifest is never served stale.
    # The manifest keeps the path as given and the root it resolves to (the working folder
    # matters for a relative path): both name the entry.
    key = (str(manifest_path), str(manifest_path.resolve()))
    cached = _PARSED.get(key)
    if cached is not None and cached[0] == text:
        return cached[1]
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise CourseError(f"{manifest_path}: not valid TOML ({error})") from None
    manifest = parse_manifest(data, manifest_path)
    if len(_PARSED) >= _PARSED_PATHS:
        _PARSED.pop(next(iter(_PARSED)), None)  # the oldest path goes first
    _PARSED[key] = (text, manifest)
    return manifest


#: The last parse of each manifest path (as given, resolved): its text and the (immutable)
#: manifest it gave.
_PARSED: dict[tuple[str, str], tuple[str, Manifest]] = {}
_PARSED_PATHS = 8


def parse_manifest(data: Mapping[str, Any], path: Path) -> Manifest:
    """Validate already-parsed manifest data; see :func:`load_manifest` for the rules and errors."""
    where = str(path)
    _check_keys(data, _TOP_KEYS, where)
    if data.get("format") != FORMAT_VERSION:
        raise CourseError(f"{where}: format must be {FORMAT_VERSION}, got {data.get('format')!r}")
    raw_chapters = data.get("chapters", [])
    if not isinstance(raw_chapters, list):
        raise CourseError(f"{where}: 'chapters' must be an array of tables ([[chapters]])")
    reveal = _reveal(data, True, where)
    chapters = tuple(
        _parse_chapter(raw, index, where, reveal) for index, raw in enumerate(raw_chapters)
    )
    _check_unique([c.id for c in chapters], "chapter id", where)
    _check_unique([c.solution for c in chapters], "solution path", where)
    _check_unique([c.notebook for c in chapters], "notebook path", where)
    _check_unique([e.id for c in chapters for e in c.exercises], "exercise id", where)
    root = path.resolve().parent.parent
    return Manifest(path=path, root=root, chapters=chapters)


def _reveal(raw: Mapping[str, Any], default: bool, label: str) -> bool:
    value = raw.get("reveal", default)
    if not isinstance(value, bool):
        raise CourseError(f"{label}: reveal must be true or false, got {value!r}")
    return value


def _parse_chapter(raw: Any, index: int, where: str, course_reveal: bool = True) -> Chapter:
    if not isinstance(raw, dict):
        raise CourseError(f"{where}: chapters[{index}] must be a table")
    chapter_id = raw.get("id")
    label = f"{where}: chapter {chapter_id!r} (chapters[{index}])"
    _check_keys(raw, _CHAPTER_KEYS, label)
    if not isinstance(chapter_id, str) or not _CHAPTER_ID.match(chapter_id):
        raise CourseError(f"{label}: id must look like 'ch01' (ch + two digits)")
    title = _required_str(raw, "title", label)
    status = raw.get("status", "published")
    if status not in CHAPTER_STATUSES:
        raise CourseError(f"{label}: status must be one of {CHAPTER_STATUSES}, got {status!r}")
    solution = _notebook_path(raw, "solution", "solutions", label)
    notebook = _notebook_path(raw, "notebook", "notebooks", label)
    if PurePosixPath(solution).name != PurePosixPath(notebook).name:
        raise CourseError(
            f"{label}: the solution and the student notebook must share a file name, "
            f"got {solution!r} and {notebook!r}"
        )
    objectives = raw.get("objectives", [])
    if not isinstance(objectives, list) or not all(
        isinstance(item, str) and item.strip() for item in objectives
    ):
        raise CourseError(f"{label}: objectives must be a list of non-empty strings")
    raw_exercises = raw.get("exercises", [])
    if not isinstance(raw_exercises, list):
        raise CourseError(f"{label}: 'exercises' must be an array of tables")
    exercises = tuple(
        _parse_exercise(item, chapter_id, position, label)
        for position, item in enumerate(raw_exercises)
    )
    if status == "planned" and exercises:
        raise CourseError(
            f"{label}: a planned chapter lists no exercises (it has {len(exercises)}); "
            "set status = 'published' once its notebooks exist"
        )
    if status == "published" and not objectives:
        raise CourseError(f"{label}: a published chapter needs at least one learning objective")
    return Chapter(
        id=chapter_id,
        title=title,
        status=status,
        solution=solution,
        notebook=notebook,
        objectives=tuple(objectives),
        exercises=exercises,
        reveal=_reveal(raw, course_reveal, label),
    )


def _parse_exercise(raw: Any, chapter_id: str, position: int, chapter_label: str) -> Exercise:
    if not isinstance(raw, dict):
        raise CourseError(f"{chapter_label}: exercises[{position}] must be a table")
    exercise_id = raw.get("id")
    label = f"{chapter_label}: exercise {exercise_id!r}"
    _check_keys(raw, _EXERCISE_KEYS, label)
    if not isinstance(exercise_id, str):
        raise CourseError(f"{label}: id must be a string like '{chapter_id}.q1'")
    prefix, dot, name = exercise_id.partition(".")
    if prefix != chapter_id or not dot or not _EXERCISE_NAME.match(name):
        raise CourseError(
            f"{label}: id must be '{chapter_id}.' followed by a lower-case name, "
            f"like '{chapter_id}.q1'"
        )
    kind = raw.get("kind")
    if kind not in EXERCISE_KINDS:
        raise CourseError(f"{label}: kind must be one of {EXERCISE_KINDS}, got {kind!r}")
    points = raw.get("points")
    if isinstance(points, bool) or not isinstance(points, int) or points < 0:
        raise CourseError(f"{label}: points must be an integer >= 0, got {points!r}")
    title = _required_str(raw, "title", label)
    foreign = sorted(set(raw) - {"id", "kind", "points", "title"} - _KIND_KEYS[kind])
    if foreign:
        raise CourseError(
            f"{label}: key(s) {foreign} do not apply to a {kind} exercise; "
            f"a {kind} exercise may have {sorted(_KIND_KEYS[kind])}"
        )
    expression = raw.get("expression")
    if expression is not None and (not isinstance(expression, str) or not expression.strip()):
        raise CourseError(f"{label}: expression must be a non-empty string of Python")
    fields = _str_list(raw, "fields", label)
    for name in fields:
        if not _FIELD_NAME.match(name):
            raise CourseError(f"{label}: field {name!r} must be a lower-case name like 'strides'")
    if len(set(fields)) != len(fields):
        raise CourseError(f"{label}: fields {list(fields)} list a field twice")
    if (expression is None) != (not fields):
        raise CourseError(f"{label}: a predict exercise gives both 'expression' and 'fields'")
    scoring = raw.get("scoring", "per_field")
    if scoring not in SCORINGS:
        raise CourseError(f"{label}: scoring must be one of {SCORINGS}, got {scoring!r}")
    function = raw.get("function")
    if function is not None and (not isinstance(function, str) or not _IDENTIFIER.match(function)):
        raise CourseError(f"{label}: function must be a Python name, got {function!r}")
    rubric = _str_list(raw, "rubric", label)
    if rubric and not 3 <= len(rubric) <= 4:
        raise CourseError(f"{label}: a rubric has 3 or 4 points, got {len(rubric)}")
    mistakes = _parse_mistakes(raw.get("mistakes", []), fields, label)
    return Exercise(
        id=exercise_id,
        chapter=chapter_id,
        kind=kind,
        points=points,
        title=title,
        expression=expression.strip() if expression is not None else None,
        fields=fields,
        hints=_str_list(raw, "hints", label),
        scoring=scoring,
        function=function,
        rubric=rubric,
        mistakes=mistakes,
    )


def _str_list(raw: Mapping[str, Any], key: str, label: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(
        isinstance(item, str) and item.strip() for item in value
    ):
        raise CourseError(f"{label}: {key} must be a list of non-empty strings")
    return tuple(value)


def _parse_mistakes(raw: Any, fields: tuple[str, ...], label: str) -> tuple[Mistake, ...]:
    if not isinstance(raw, list):
        raise CourseError(f"{label}: 'mistakes' must be an array of tables")
    mistakes = []
    for index, item in enumerate(raw):
        where = f"{label}: mistakes[{index}]"
        if not isinstance(item, dict) or set(item) != {"field", "answer", "message"}:
            raise CourseError(f"{where} must be a table with exactly field, answer and message")
        if item["field"] not in fields:
            raise CourseError(f"{where}: field {item['field']!r} is not one of {list(fields)}")
        message = item["message"]
        if not isinstance(message, str) or not message.strip():
            raise CourseError(f"{where}: message must be a non-empty string")
        mistakes.append(Mistake(item["field"], item["answer"], message))
    return tuple(mistakes)


def _check_keys(raw: Mapping[str, Any], allowed: set[str], label: str) -> None:
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise CourseError(f"{label}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _required_str(raw: Mapping[str, Any], key: str, label: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CourseError(f"{label}: {key} must be a non-empty string")
    return value


def _notebook_path(raw: Mapping[str, Any], key: str, folder: str, label: str) -> str:
    value = _required_str(raw, key, label)
    pure = PurePosixPath(value)
    if (
        pure.is_absolute()
        or len(pure.parts) != 2
        or pure.parts[0] != folder
        or pure.suffix != ".ipynb"
        or "\\" in value
    ):
        raise CourseError(
            f"{label}: {key} must be '{folder}/<name>.ipynb' (relative, POSIX), got {value!r}"
        )
    return value


def _check_unique(values: list[str], what: str, where: str) -> None:
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise CourseError(f"{where}: duplicate {what} {value!r}")
        seen.add(value)
