"""The answer key: every exercise's expected answer, read from the SOLUTION notebooks.

The solution notebooks are the source of truth: a predict exercise's expected answer is the
literal written in its solution cell, an explain exercise's model answer is the text between the
solution cell's ``<!-- BEGIN SOLUTION -->`` and ``<!-- END SOLUTION -->`` markers, and an
implement exercise is checked by its :class:`~llmfs.course.exercise_checks.spec.ImplementSpec`.
The manifest adds points, fields, scoring, hints and rubrics.

``llmfs key`` writes one page per chapter (Markdown, or HTML with ``--html``) for instructors.
Learners never see it: ``llmfs check`` and the feedback files show hints, never this key.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import html
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llmfs
from llmfs.course import CourseError
from llmfs.course.grading import extract
from llmfs.course.manifest import Chapter, Exercise, Manifest, load_manifest

SCORINGS = ("per_field", "all_or_nothing")
_BEGIN_MD = "<!-- BEGIN SOLUTION -->"
_END_MD = "<!-- END SOLUTION -->"
_MD_HINT = re.compile(r"^\s*<!--\s*HINT:\s*(?P<text>.*?)\s*-->\s*$")
_CODE_MARKER = re.compile(r"^\s*#\s*(BEGIN SOLUTION|END SOLUTION|HINT:|STUB:)")


# The manifest's per-kind keys (fields, hints, rubric, function, scoring, expression) are read
# through these helpers, so that a manifest without them still grades with sensible defaults.
def hints_of(exercise: Exercise) -> tuple[str, ...]:
    """The exercise's hints in the order a learner gets them (may be empty)."""
    return tuple(getattr(exercise, "hints", None) or ())


def rubric_of(exercise: Exercise) -> tuple[str, ...]:
    """The points an explain answer must make (may be empty)."""
    return tuple(getattr(exercise, "rubric", None) or ())


def scoring_of(exercise: Exercise) -> str:
    """``per_field`` (points split evenly over the fields) or ``all_or_nothing``."""
    scoring = getattr(exercise, "scoring", None) or "per_field"
    if scoring not in SCORINGS:
        raise CourseError(f"exercise {exercise.id}: scoring must be one of {SCORINGS}")
    return str(scoring)


def _specs() -> dict[str, Any]:
    # Loaded on use: the specs import the tensor library, which grading text answers never needs.
    from llmfs.course.exercise_checks.spec import SPECS

    return dict(SPECS)


@dataclass(frozen=True)
class ExerciseKey:
    """Everything the grader knows about one exercise.

    ``answers`` (predict): field -> expected literal, in the order graded. ``function``
    (implement): the learner's function name, ``spec`` its random-case spec (None: no hidden
    check). ``prompt``/``model_answer`` (explain). ``blank_source``: the student cell.
    """

    exercise: Exercise
    answers: dict[str, Any]
    expression: str
    hints: tuple[str, ...]
    rubric: tuple[str, ...]
    scoring: str
    function: str | None
    spec: Any
    solution_source: str
    blank_source: str
    prompt: str
    model_answer: str


@dataclass(frozen=True)
class ChapterKey:
    """A chapter's key: its exercises in manifest order and a fingerprint of what they read.

    ``checks_id`` changes whenever the manifest, a notebook of the chapter, the hidden checks or
    the llmfs version change; a gradebook regrades submissions graded under another one.
    """

    chapter: Chapter
    exercises: tuple[ExerciseKey, ...]
    blank: dict[str, Any]
    checks_id: str
    #: The solution notebook's path, where the predict exercises' truths are computed.
    solution: Path | None = None

    def truths(self) -> dict[str, Any]:
        """Predict exercise id -> the outcome of its expression right after its cell of the
        solution (:func:`~llmfs.course.grading.truths.solution_truths`; a ``str`` says why the
        expression failed there): what the notebook's check judges against. Computed once per
        solution and process. Raises :class:`CourseError` when the solution cannot be run."""
        # Loaded on use: the outcomes hold tensors; grading text answers never needs them.
        from llmfs.course.exercises.entries import is_plain
        from llmfs.course.grading.truths import solution_truths

        wanted = [
            (item.exercise.id, item.expression, is_plain(list(item.exercise.fields)))
            for item in self.exercises
            if item.exercise.kind == "predict"
        ]
        if not wanted:
            return {}
        if self.solution is None:
            raise CourseError(f"chapter {self.chapter.id}: the key has no solution notebook")
        return solution_truths(self.solution, wanted)

    def get(self, exercise_id: str) -> ExerciseKey:
        """The key of one exercise; :class:`CourseError` if the chapter has none with that id."""
        for item in self.exercises:
            if item.exercise.id == exercise_id:
                return item
        raise CourseError(f"chapter {self.chapter.id} has no exercise {exercise_id!r}")


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise CourseError(
            f"{path}: the {what} does not exist (grading needs the instructor's course folder "
            "with solutions/; pass it with --checks DIR)"
        ) from None


def _model_answer(source: str) -> tuple[str, str]:
    if _BEGIN_MD not in source:
        return source.strip(), ""
    before, _, rest = source.partition(_BEGIN_MD)
    inside = rest.partition(_END_MD)[0]
    kept = [line for line in inside.splitlines() if not _MD_HINT.match(line)]
    return before.strip(), "\n".join(kept).strip()


def _solution_code(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not _CODE_MARKER.match(line)).strip()


def _single_function(source: str) -> str | None:
    try:
        tree = extract.parse_source(source)
    except extract.NotPython:
        return None
    names = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
    return names[0] if len(names) == 1 else None


def load_chapter_key(manifest: Manifest, chapter: Chapter, root: Path | None = None) -> ChapterKey:
    """Read the chapter's solution and student notebooks under ``root`` (default: the
    manifest's course root) and build its key.

    Raises :class:`CourseError` when a notebook is missing or unreadable, or an exercise cell is
    missing from the solution, or a predict solution cell has no literal answers.
    """
    base = root if root is not None else manifest.root
    solution_bytes = _read(base / chapter.solution, "solution notebook")
    blank_bytes = _read(base / chapter.notebook, "student notebook")
    solution = extract.parse_notebook(solution_bytes, chapter.solution)
    blank = extract.parse_notebook(blank_bytes, chapter.notebook)
    solution_tags = extract.tagged_cells(solution)
    blank_tags = extract.tagged_cells(blank)
    specs = _specs()
    items = []
    for exercise in chapter.exercises:
        if exercise.id not in solution_tags:
            raise CourseError(f"{chapter.solution}: no cell is tagged {exercise.tag}")
        source = extract.source_of(extract.cell_at(solution, solution_tags[exercise.id][0]))
        blank_positions = blank_tags.get(exercise.id)
        blank_source = (
            extract.source_of(extract.cell_at(blank, blank_positions[0])) if blank_positions else ""
        )
        answers: dict[str, Any] = {}
        expression = str(getattr(exercise, "expression", None) or "")
        prompt = model = ""
        function: str | None = None
        spec = None
        if exercise.kind == "predict":
            call, problem = extract.predict_call(source, exercise.id)
            if call is None:
                raise CourseError(f"{chapter.solution}: exercise {exercise.id}: {problem}")
            literal = extract.call_fields(call, source)
            wanted = list(getattr(exercise, "fields", None) or literal)
            for name in wanted:
                value = literal.get(name)
                if value is None or isinstance(value, extract.Unreadable):
                    raise CourseError(
                        f"{chapter.solution}: exercise {exercise.id}: field {name!r} has no "
                        "literal answer in the solution cell"
                    )
                answers[name] = value
            if not expression and call.args and isinstance(call.args[0], ast.Constant):
                expression = str(call.args[0].value)
        elif exercise.kind == "explain":
            prompt, model = _model_answer(source)
        else:
            spec = specs.get(exercise.id)
            function = (
                getattr(exercise, "function", None)
                or (spec.function if spec is not None else None)
                or _single_function(source)
            )
        items.append(
            ExerciseKey(
                exercise=exercise,
                answers=answers,
                expression=expression,
                hints=hints_of(exercise),
                rubric=rubric_of(exercise),
                scoring=scoring_of(exercise),
                function=function,
                spec=spec,
                solution_source=_solution_code(source) if exercise.kind == "implement" else "",
                blank_source=blank_source,
                prompt=prompt,
                model_answer=model,
            )
        )
    digest = hashlib.sha256()
    for part in (
        llmfs.__version__.encode(),
        manifest.path.read_bytes() if manifest.path.is_file() else b"",
        solution_bytes,
        blank_bytes,
        _spec_source(),
    ):
        digest.update(hashlib.sha256(part).digest())
    return ChapterKey(
        chapter, tuple(items), blank, digest.hexdigest()[:16], (base / chapter.solution).resolve()
    )


def _spec_source() -> bytes:
    # Every module of the checks package counts: the specs of chapters 5, 7 and 8 and their
    # shortcut lists live beside spec.py, and the shortcut rule in shortcuts.py decides scores.
    # Loaded on use: the specs import the tensor library (see _specs).
    from llmfs.course.exercise_checks import spec

    if not spec.__file__:
        return b""
    modules = sorted(Path(spec.__file__).parent.glob("*.py"))
    return b"".join(path.name.encode() + b"\0" + path.read_bytes() for path in modules)


def find_chapter(manifest: Manifest, text: str) -> Chapter:
    """The published chapter named ``2``, ``02`` or ``ch02``; :class:`CourseError` otherwise."""
    wanted = text.strip().lower()
    if wanted.isdigit():
        wanted = f"ch{int(wanted):02d}"
    for chapter in manifest.published_chapters:
        if chapter.id == wanted:
            return chapter
    known = ", ".join(chapter.id for chapter in manifest.published_chapters)
    raise CourseError(f"no published chapter {text!r} (published: {known})")


# --------------------------------------------------------------------------------------------
# the answer-key pages
# --------------------------------------------------------------------------------------------


def _literal(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, tuple) else json.dumps(list(value))


def key_markdown(key: ChapterKey) -> str:
    """The chapter's answer key as one Markdown page (deterministic)."""
    chapter = key.chapter
    total = sum(item.exercise.points for item in key.exercises)
    lines = [f"# Answer key: {chapter.id}, {chapter.title}", "", f"Total: {total} points.", ""]
    for item in key.exercises:
        exercise = item.exercise
        lines += [f"## {exercise.id}: {exercise.title}", ""]
        lines.append(f"- kind: {exercise.kind}; points: {exercise.points}")
        if exercise.kind == "predict":
            lines.append(f"- scoring: {item.scoring}")
            if item.expression:
                lines.append(f"- expression: `{item.expression}`")
            lines += ["", "| field | answer |", "| --- | --- |"]
            lines += [f"| {name} | `{_literal(value)}` |" for name, value in item.answers.items()]
            if exercise.mistakes:
                # The wrong answers the feedback names, so an instructor knows what a learner
                # was told for each (the general detectors of the engine name others too).
                lines += ["", "Expected mistakes (named in the feedback):", ""]
                lines += [
                    f"- {mistake.field} = `{_literal(mistake.answer)}`: {mistake.message}"
                    for mistake in exercise.mistakes
                ]
        elif exercise.kind == "implement":
            lines.append(f"- function: `{item.function}`")
            if item.spec is not None:
                lines.append(
                    f"- hidden check: {item.spec.cases} random cases per grading run, "
                    "compared with the library's answer"
                )
                if item.spec.shortcuts is not None:
                    names = ", ".join(f"`{name}`" for name in item.spec.shortcuts.names)
                    lines.append(f"- may not call (scores 0): {names}")
            else:
                lines.append("- hidden check: none (graded as unchecked)")
            lines += ["", "```python", item.solution_source, "```"]
        else:
            if item.prompt:
                lines += ["", item.prompt]
            lines += ["", "Rubric:"]
            lines += [f"- {point}" for point in item.rubric] or ["- (no rubric in the manifest)"]
            lines += ["", "Model answer:", "", item.model_answer]
        if item.hints:
            lines += ["", "Hints:"]
            lines += [f"{n}. {hint}" for n, hint in enumerate(item.hints, start=1)]
        lines.append("")
    return "\n".join(lines)


def key_html(key: ChapterKey) -> str:
    """The same page as HTML (escaped; Markdown lines kept as preformatted text)."""
    body = html.escape(key_markdown(key))
    title = html.escape(f"Answer key: {key.chapter.id}")
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{title}</title></head>\n'
        f'<body><pre style="white-space: pre-wrap">{body}</pre></body></html>\n'
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``llmfs key``."""
    parser.add_argument("--out", type=Path, default=Path("answer-key"), help="folder to write")
    parser.add_argument("--chapter", action="append", help="only this chapter (repeatable)")
    parser.add_argument("--html", action="store_true", help="write HTML instead of Markdown")
    parser.add_argument(
        "--checks",
        type=Path,
        default=None,
        help="course folder with solutions/ (default: this one)",
    )


def main(args: argparse.Namespace) -> int:
    """Writes one page per published chapter; returns 0, or 2 with a message on a CourseError."""
    try:
        root = args.checks.resolve() if args.checks else None
        manifest = load_manifest(root / "course" / "manifest.toml" if root else None)
        chapters = (
            [find_chapter(manifest, c) for c in args.chapter]
            if args.chapter
            else list(manifest.published_chapters)
        )
        args.out.mkdir(parents=True, exist_ok=True)
        for chapter in chapters:
            key = load_chapter_key(manifest, chapter, root)
            suffix = "html" if args.html else "md"
            page = key_html(key) if args.html else key_markdown(key)
            target = args.out / f"{chapter.id}-key.{suffix}"
            target.write_text(page, encoding="utf-8")
            print(f"wrote {target}")
    except CourseError as error:
        print(f"llmfs key: {error}", file=sys.stderr)
        return 2
    return 0
