"""``llmfs build``: generate the student notebooks (``notebooks/``) from ``solutions/``.

The solutions are the single source of truth. For every published chapter of the manifest, the
build reads the solution notebook and writes the student notebook, applying these rules (the
instructor guide, ``course/instructor_guide.md``, explains them with examples):

* **Solution regions** in code cells: the lines from ``# BEGIN SOLUTION`` to ``# END SOLUTION``
  (each alone on its line, same indentation) are replaced, at that indentation, by the region's
  ``# HINT: ...`` lines, a ``# YOUR CODE HERE`` line, and the region's ``# STUB: <code>`` lines
  with the prefix removed. Without a ``# STUB:`` line the stub is
  ``raise NotImplementedError("<exercise>: replace this line with your code")``; a region at top
  level (no indentation) must give a ``# STUB:`` so the student notebook still runs top to bottom.
* **Solution regions** in markdown cells: ``<!-- BEGIN SOLUTION -->`` to ``<!-- END SOLUTION -->``
  becomes the region's ``<!-- HINT: ... -->`` lines as ``> **Hint:** ...`` and the line
  ``_Your answer here._``.
* **Prediction lines**: a code line ``NAME = EXPR  # PREDICTION`` (or the keyword-argument form
  ``NAME=EXPR,  # PREDICTION``), optionally ``# PREDICTION: note``, becomes
  ``NAME = None  # PREDICTION: note (replace None with your answer)``. EXPR must fit on the line.
* Cells tagged ``solution-only`` are left out; every other cell keeps its id, tags and source.
* **Explanations**: a markdown cell tagged ``explains:<exercise id>`` (below that predict
  exercise; one tag per exercise whose answer it gives) is left out of the student notebook and
  its text goes into the course's explanations file (``course/explanations.json``), which the
  exercise's ``check(...)`` shows under its verdict once the exercise is finished
  (:mod:`llmfs.course.exercises.explanations`). The text under a check is on screen while the
  learner predicts, so an explanation that states the answer lives there, never in the notebook.
* Outputs and execution counts are cleared; cell metadata keeps only ``tags``, ``editable``,
  ``deletable``, ``jupyter`` and ``slideshow``; notebook metadata keeps ``kernelspec`` and records
  the chapter and the solution it came from.
* **Graded work**: for a chapter the manifest marks ``reveal = false``, and for every chapter of
  ``llmfs build --assignment DIR`` (which writes into ``DIR``, never ``notebooks/``), a code cell
  tagged ``reveals-off`` (not editable, not deletable) that runs
  :func:`~llmfs.course.exercises.reveals.reveals_off` goes before the first code cell, and the
  notebook metadata records ``llmfs.reveal: false``: its checks never show an answer.
* Output is deterministic: nbformat 4.5, keys sorted, one-space indent, trailing newline.

In code cells, markers, hints, stubs and ``# PREDICTION`` are *comments*, found by Python's
tokenizer: the same text inside a string literal is ordinary code. Any malformed, nested, unclosed
or misplaced marker is a :class:`CourseError` naming the notebook, the cell (position and id), the
line and the condition; so is a marker that follows code on its line.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.exercises.explanations import (
    EXPLANATIONS_FILE,
    explained_exercises,
    notebook_explanations,
    render_explanations,
)
from llmfs.course.exercises.fixtures import FIXTURE_TAG
from llmfs.course.exercises.reveals import REVEALS_OFF_SOURCE, REVEALS_OFF_TAG
from llmfs.course.manifest import Chapter, Manifest, load_manifest
from llmfs.course.names_table import stale_guide, write_guide
from llmfs.course.notebooks import (
    Cell,
    Notebook,
    cell_exercise,
    cell_label,
    cell_source,
    cell_tags,
    chapter_disagreements,
    read_notebook,
)

BEGIN_CODE = "# BEGIN SOLUTION"
END_CODE = "# END SOLUTION"
HINT_CODE = "# HINT:"
STUB_CODE = "# STUB:"
YOUR_CODE_HERE = "# YOUR CODE HERE"
BEGIN_MARKDOWN = "<!-- BEGIN SOLUTION -->"
END_MARKDOWN = "<!-- END SOLUTION -->"
HINT_MARKDOWN = re.compile(r"^<!--\s*HINT:\s*(?P<text>.*?)\s*-->$")
YOUR_ANSWER_HERE = "_Your answer here._"
SOLUTION_ONLY_TAG = "solution-only"
PREDICTION_NOTE = "replace None with your answer"

KEPT_CELL_METADATA = ("tags", "editable", "deletable", "jupyter", "slideshow")
NBFORMAT_MINOR = 5
DEFAULT_KERNELSPEC = {
    "display_name": "Python 3 (ipykernel)",
    "language": "python",
    "name": "python3",
}

_ANY_REGION_MARKER = re.compile(r"(BEGIN|END)\s*_?\s*SOLUTION", re.IGNORECASE)
_HINT_OR_STUB_LIKE = re.compile(r"^#\s*(HINT|STUB)\b", re.IGNORECASE)
_PREDICTION_MARK = re.compile(r"#\s*PREDICTION\b")
_PREDICTION_LINE = re.compile(
    r"^(?P<indent>[ \t]*)(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?P<eq>[ \t]*=[ \t]*)"
    r"(?P<expr>\S.*?)(?P<comma>,?)[ \t]*#[ \t]*PREDICTION(?::[ \t]*(?P<note>.*?))?[ \t]*$"
)


# ----------------------------------------------------------------------------------------------
# Cell transforms (pure functions of text)


@dataclass
class _Region:
    start_line: int
    indent: str
    hints: list[str] = field(default_factory=list)
    stubs: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Comment:
    """The comment on one line: its text (from ``#``) and whether code precedes it."""

    text: str
    after_code: bool


def _line_comments(source: str) -> dict[int, _Comment] | None:
    """The comment of each line that has one, by line number (from 1), found by Python's
    tokenizer, so a ``#`` inside a string is not a comment. ``None`` when the source does not
    tokenize (an unclosed bracket, say); the caller then falls back to whole-line matching."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    return {
        token.start[0]: _Comment(token.string, bool(token.line[: token.start[1]].strip()))
        for token in tokens
        if token.type == tokenize.COMMENT
    }


def _comment_on(number: int, line: str, comments: dict[int, _Comment] | None) -> _Comment | None:
    if comments is not None:
        return comments.get(number)
    # Without tokens only a line that starts with '#' is surely a comment; a trailing
    # '# PREDICTION' is still recognised as before, since it cannot be told from a string here.
    stripped = line.strip()
    if stripped.startswith("#"):
        return _Comment(stripped, False)
    found = _PREDICTION_MARK.search(line)
    return _Comment(line[found.start() :].rstrip(), True) if found else None


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def blank_prediction(line: str, where: str) -> str:
    """The student form of one ``# PREDICTION`` line: its expression replaced by ``None``.

    Raises :class:`CourseError` (naming ``where``) when the line is not of the form
    ``NAME = EXPR  # PREDICTION[: note]`` or ``NAME=EXPR,  # PREDICTION[: note]``.
    """
    match = _PREDICTION_LINE.match(line)
    if match is None:
        raise CourseError(
            f"{where}: malformed prediction line {line.strip()!r}; write "
            "'NAME = EXPR  # PREDICTION' (or 'NAME=EXPR,  # PREDICTION' inside a call), "
            "with the whole expression on that line"
        )
    note = match.group("note")
    comment = (
        f"# PREDICTION: {note} ({PREDICTION_NOTE})" if note else f"# PREDICTION ({PREDICTION_NOTE})"
    )
    return (
        f"{match.group('indent')}{match.group('name')}{match.group('eq')}None"
        f"{match.group('comma')}  {comment}"
    )


def student_code(source: str, where: str, exercise_id: str | None = None) -> str:
    """The student version of a solution code cell's source (see the module docstring).

    Raises :class:`CourseError` naming ``where`` and the line number for a malformed, nested,
    unclosed or unmatched marker, a ``# STUB:``/``# HINT:`` lookalike inside a region, a prediction
    line inside a region, a top-level region without ``# STUB:``, or a result that is no longer
    valid Python although the solution was.
    """
    out: list[str] = []
    region: _Region | None = None
    # Markers, hints and stubs are comments, found by the tokenizer: '# BEGIN SOLUTION' inside a
    # string literal is text, not a marker.
    comments = _line_comments(source)
    for number, line in enumerate(source.split("\n"), start=1):
        here = f"{where} line {number}"
        comment = _comment_on(number, line, comments)
        # The text of a comment that is the whole line ("" otherwise).
        alone = comment.text.strip() if comment is not None and not comment.after_code else ""
        if alone in (BEGIN_CODE, END_CODE):
            marker: str | None = alone
        elif comment is not None and _ANY_REGION_MARKER.search(comment.text):
            # A marker after code is refused rather than ignored: ignoring "code  # BEGIN
            # SOLUTION" would publish the solution that follows.
            after = " (here it follows code)" if comment.after_code else ""
            raise CourseError(
                f"{here}: malformed solution marker {comment.text.strip()!r}{after}; the markers "
                f"are {BEGIN_CODE!r} and {END_CODE!r}, each alone on its line"
            )
        else:
            marker = None
        predicts = comment is not None and _PREDICTION_MARK.search(comment.text) is not None
        if region is None:
            if marker == BEGIN_CODE:
                region = _Region(start_line=number, indent=_indent_of(line))
            elif marker == END_CODE:
                raise CourseError(f"{here}: {END_CODE!r} without a {BEGIN_CODE!r} before it")
            elif alone.startswith(STUB_CODE):
                raise CourseError(f"{here}: {STUB_CODE!r} outside a solution region")
            elif predicts:
                out.append(blank_prediction(line, here))
            else:
                out.append(line)
            continue
        if marker == BEGIN_CODE:
            raise CourseError(
                f"{here}: nested {BEGIN_CODE!r}; the region opened at line "
                f"{region.start_line} is not closed yet"
            )
        if marker == END_CODE:
            if _indent_of(line) != region.indent:
                raise CourseError(
                    f"{here}: {END_CODE!r} is indented {len(_indent_of(line))} columns but its "
                    f"{BEGIN_CODE!r} (line {region.start_line}) is indented {len(region.indent)}"
                )
            out.extend(_render_region(region, here, exercise_id))
            region = None
        elif alone.startswith(HINT_CODE):
            region.hints.append(alone)
        elif alone.startswith(STUB_CODE):
            region.stubs.append(alone[len(STUB_CODE) :].removeprefix(" "))
        elif _HINT_OR_STUB_LIKE.match(alone):
            raise CourseError(
                f"{here}: malformed {alone.split()[0:2]} line {alone!r} in a solution "
                f"region; write {HINT_CODE!r} or {STUB_CODE!r} exactly"
            )
        elif predicts:
            raise CourseError(f"{here}: a '# PREDICTION' line cannot sit inside a solution region")
    if region is not None:
        raise CourseError(
            f"{where} line {region.start_line}: {BEGIN_CODE!r} is never closed by {END_CODE!r}"
        )
    result = "\n".join(out)
    if _parses(source) and not _parses(result):
        raise CourseError(
            f"{where}: the student version is not valid Python although the solution is; "
            "a prediction expression must fit on its line and a stub must be complete code"
        )
    return result


def _render_region(region: _Region, where: str, exercise_id: str | None) -> list[str]:
    if not region.stubs and region.indent == "":
        raise CourseError(
            f"{where}: the solution region opened at line {region.start_line} is at top level, "
            f"so it needs a {STUB_CODE!r} line (the code the student notebook runs instead, e.g. "
            "'# STUB: result = None')"
        )
    prefix = f"{exercise_id}: " if exercise_id else ""
    stubs = region.stubs or [
        f'raise NotImplementedError("{prefix}replace this line with your code")'
    ]
    lines = [*region.hints, YOUR_CODE_HERE, *stubs]
    return [region.indent + line if line else line for line in lines]


def _parses(source: str) -> bool:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:  # pragma: no cover - IPython comes with the course extra
        python = source
    else:
        python = TransformerManager().transform_cell(source)
    try:
        ast.parse(python)
    except SyntaxError:
        return False
    return True


def student_markdown(source: str, where: str) -> str:
    """The student version of a solution markdown cell's source (see the module docstring).

    Raises :class:`CourseError` naming ``where`` and the line for malformed, nested, unclosed or
    unmatched markers.
    """
    out: list[str] = []
    region_start: int | None = None
    hints: list[str] = []
    for number, line in enumerate(source.split("\n"), start=1):
        stripped = line.strip()
        here = f"{where} line {number}"
        if stripped not in (BEGIN_MARKDOWN, END_MARKDOWN) and _ANY_REGION_MARKER.search(stripped):
            raise CourseError(
                f"{here}: malformed solution marker {stripped!r}; in markdown the markers are "
                f"{BEGIN_MARKDOWN!r} and {END_MARKDOWN!r}, each alone on its line"
            )
        if region_start is None:
            if stripped == BEGIN_MARKDOWN:
                region_start, hints = number, []
            elif stripped == END_MARKDOWN:
                raise CourseError(
                    f"{here}: {END_MARKDOWN!r} without a {BEGIN_MARKDOWN!r} before it"
                )
            else:
                out.append(line)
            continue
        if stripped == BEGIN_MARKDOWN:
            raise CourseError(
                f"{here}: nested {BEGIN_MARKDOWN!r}; the region opened at line {region_start} "
                "is not closed yet"
            )
        if stripped == END_MARKDOWN:
            out.extend([*hints, YOUR_ANSWER_HERE])
            region_start = None
            continue
        hint = HINT_MARKDOWN.match(stripped)
        if hint:
            hints.append(f"> **Hint:** {hint.group('text')}")
            hints.append("")
    if region_start is not None:
        raise CourseError(
            f"{where} line {region_start}: {BEGIN_MARKDOWN!r} is never closed by {END_MARKDOWN!r}"
        )
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------
# Notebook transform


def student_notebook(
    solution: Notebook, label: str, chapter: Chapter | None = None, *, reveal: bool | None = None
) -> Notebook:
    """The student notebook generated from a solution notebook (already read and id-checked).

    ``label`` names the solution in messages and in the student's metadata. When ``chapter`` is
    given, the exercise cells must match its manifest entry exactly (either way round), and the
    chapter id is recorded in the metadata. ``reveal`` False makes graded work (see the module
    docstring); None takes the chapter's setting (True without a chapter). Raises
    :class:`CourseError` as the cell transforms do, for an exercise cell tagged
    ``solution-only``, and for any disagreement with the chapter.
    """
    if reveal is None:
        reveal = chapter.reveal if chapter is not None else True
    if chapter is not None:
        problems = chapter_disagreements(chapter, solution, label)
        if problems:
            raise CourseError("; ".join(problems))
        notebook_explanations(solution, label, chapter)  # raises for a misplaced explanation
    cells: list[Cell] = []
    for position, cell in enumerate(solution["cells"], start=1):
        where = cell_label(label, position, cell)
        exercise_id = cell_exercise(cell, where)
        tags = cell_tags(cell)
        if FIXTURE_TAG in tags and (SOLUTION_ONLY_TAG in tags or exercise_id is not None):
            # A fixture is read from the student notebook and must be the solution's cell.
            raise CourseError(
                f"{where}: a cell tagged {FIXTURE_TAG!r} defines names for the exercises below "
                f"it and is copied as it is; it cannot be an exercise or {SOLUTION_ONLY_TAG!r}"
            )
        if explained_exercises(tags):
            continue  # shown by the exercise's check once it is finished (the module docstring)
        if SOLUTION_ONLY_TAG in tags:
            if exercise_id is not None:
                raise CourseError(
                    f"{where}: exercise {exercise_id!r} cannot be tagged {SOLUTION_ONLY_TAG!r} "
                    "(every exercise appears in the student notebook)"
                )
            continue
        cells.append(_student_cell(cell, where, exercise_id))
    metadata: dict[str, object] = {
        "kernelspec": solution.get("metadata", {}).get("kernelspec", DEFAULT_KERNELSPEC),
        "language_info": {"name": "python"},
        "llmfs": {"generated_from": label},
    }
    if chapter is not None:
        metadata["llmfs"] = {"chapter": chapter.id, "generated_from": label}
    if not reveal:
        metadata["llmfs"] = {**metadata["llmfs"], "reveal": False}  # type: ignore[dict-item]
        first_code = next(
            (i for i, cell in enumerate(cells) if cell.get("cell_type") == "code"), len(cells)
        )
        cells.insert(first_code, _reveals_off_cell(cells))
    return {"cells": cells, "metadata": metadata, "nbformat": 4, "nbformat_minor": NBFORMAT_MINOR}


def _reveals_off_cell(cells: list[Cell]) -> Cell:
    taken = {cell.get("id") for cell in cells}
    cell_id = REVEALS_OFF_TAG
    while cell_id in taken:  # cell ids are unique in a notebook
        cell_id += "-x"
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": {"deletable": False, "editable": False, "tags": [REVEALS_OFF_TAG]},
        "outputs": [],
        "source": REVEALS_OFF_SOURCE,
    }


def _student_cell(cell: Cell, where: str, exercise_id: str | None) -> Cell:
    cell_type = cell.get("cell_type")
    source = cell_source(cell)
    metadata = {
        key: value for key, value in cell.get("metadata", {}).items() if key in KEPT_CELL_METADATA
    }
    new: Cell = {"cell_type": cell_type, "id": cell["id"], "metadata": metadata}
    if cell_type == "code":
        new["source"] = student_code(source, where, exercise_id)
        new["execution_count"] = None
        new["outputs"] = []
        return new
    if cell_type == "markdown":
        new["source"] = student_markdown(source, where)
    elif cell_type == "raw":
        if _ANY_REGION_MARKER.search(source):
            raise CourseError(
                f"{where}: solution markers are only allowed in code and markdown cells"
            )
        new["source"] = source
    else:
        raise CourseError(f"{where}: unknown cell type {cell_type!r}")
    if "attachments" in cell:
        new["attachments"] = cell["attachments"]
    return new


def render_notebook(notebook: Notebook) -> str:
    """The notebook as deterministic nbformat JSON text (sorted keys, sources split into lines).

    Raises :class:`CourseError` if nbformat (when installed) finds the result invalid.
    """
    cells = []
    for cell in notebook["cells"]:
        cell = dict(cell)
        cell["source"] = cell_source(cell).splitlines(keepends=True)
        cells.append(cell)
    data = {**notebook, "cells": cells}
    try:
        import nbformat
    except ImportError:  # pragma: no cover - nbformat comes with the course extra
        pass
    else:
        try:
            nbformat.validate(nbformat.from_dict(data))
        except nbformat.ValidationError as error:
            raise CourseError(f"the generated notebook is not valid nbformat: {error}") from None
    return json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------------------------
# The build over a course


@dataclass(frozen=True)
class BuildOutput:
    """One student notebook the build produces: its chapter, where it goes and its exact text."""

    chapter: Chapter
    path: Path
    text: str


def plan_build(
    manifest: Manifest, root: Path | None = None, *, assignment: Path | None = None
) -> list[BuildOutput]:
    """Generate (in memory) the student notebook of every published chapter, in course order.

    With ``assignment`` (a folder) every notebook is graded work (reveals off) and goes into
    that folder under its own file name; otherwise each chapter's manifest setting applies and
    the notebook goes to its ``notebooks/`` path. Raises :class:`CourseError` for the first
    solution that is missing, unreadable, disagrees with the manifest or has a malformed marker.
    """
    base = root if root is not None else manifest.root
    outputs = []
    for chapter in manifest.published_chapters:
        solution = read_notebook(base / chapter.solution, chapter.solution)
        reveal = False if assignment is not None else chapter.reveal
        student = student_notebook(solution, chapter.solution, chapter, reveal=reveal)
        target = (
            assignment / Path(chapter.notebook).name
            if assignment is not None
            else base / chapter.notebook
        )
        outputs.append(BuildOutput(chapter, target, render_notebook(student)))
    return outputs


def plan_explanations(manifest: Manifest, root: Path | None = None) -> tuple[Path, str]:
    """The explanations file (where it goes and its exact text) from every published chapter's
    solution notebook, in course order. Raises :class:`CourseError` as
    :func:`~llmfs.course.exercises.explanations.notebook_explanations` does."""
    base = root if root is not None else manifest.root
    found = []
    for chapter in manifest.published_chapters:
        solution = read_notebook(base / chapter.solution, chapter.solution)
        found.extend(notebook_explanations(solution, chapter.solution, chapter))
    return base / EXPLANATIONS_FILE, render_explanations(found)


def stray_notebooks(manifest: Manifest, root: Path | None = None) -> list[Path]:
    """Notebooks under ``notebooks/`` that no published chapter generates (sorted)."""
    base = root if root is not None else manifest.root
    expected = {chapter.notebook for chapter in manifest.published_chapters}
    folder = base / "notebooks"
    if not folder.is_dir():
        return []
    return sorted(
        path for path in folder.glob("*.ipynb") if path.relative_to(base).as_posix() not in expected
    )


def stale_notebooks(manifest: Manifest, root: Path | None = None) -> list[str]:
    """One message per student notebook that is missing, differs from the build, or is stray."""
    base = root if root is not None else manifest.root
    problems = []
    for output in plan_build(manifest, base):
        relative = output.path.relative_to(base).as_posix()
        if not output.path.exists():
            problems.append(f"{relative}: missing (run `llmfs build`)")
        elif output.path.read_text(encoding="utf-8") != output.text:
            problems.append(
                f"{relative}: differs from what `llmfs build` generates from "
                f"{output.chapter.solution} (run `llmfs build`)"
            )
    path, text = plan_explanations(manifest, base)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        problems.append(
            f"{EXPLANATIONS_FILE}: missing or differs from the explanations of the solutions "
            "(run `llmfs build`)"
        )
    for path in stray_notebooks(manifest, base):
        problems.append(
            f"{path.relative_to(base).as_posix()}: no published chapter of the manifest "
            "generates it (delete it, or add its chapter to the manifest)"
        )
    return problems


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``llmfs build``."""
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 listing student notebooks that are missing, stale or stray",
    )
    parser.add_argument(
        "--assignment",
        type=Path,
        default=None,
        metavar="DIR",
        help="write graded-work notebooks into DIR (not notebooks/): every check says right or "
        "wrong and never shows an answer",
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        default=None,
        help="the course manifest (default: ./course/manifest.toml if it exists, else the "
        "manifest of this installation)",
    )


def _manifest_from_args(args: argparse.Namespace) -> Manifest:
    if args.manifest is not None:
        return load_manifest(args.manifest)
    local = Path.cwd() / "course" / "manifest.toml"
    return load_manifest(local if local.is_file() else None)


def _build_assignment(manifest: Manifest, folder: Path, *, check: bool) -> int:
    """``--assignment DIR``: every published chapter as graded work in ``DIR`` (made when its
    parent exists); with ``--check``, exit 1 listing the notebooks there that are missing or
    stale. Raises :class:`CourseError` for a ``DIR`` that is a file or whose parent is missing."""
    target = folder.expanduser()
    if target.exists() and not target.is_dir():
        raise CourseError(f"{target}: exists and is not a folder; choose another --assignment")
    if not target.exists() and not target.parent.is_dir():
        raise CourseError(f"{target.parent}: no such folder (make it first)")
    outputs = plan_build(manifest, assignment=target)
    if check:
        stale = [
            output.path
            for output in outputs
            if not output.path.is_file() or output.path.read_text(encoding="utf-8") != output.text
        ]
        for path in stale:
            print(f"{path}: missing or stale (run `llmfs build --assignment`)", file=sys.stderr)
        if stale:
            print(f"llmfs build --check: {len(stale)} problem(s)", file=sys.stderr)
            return 1
        print(f"llmfs build --check: {len(outputs)} assignment notebook(s) up to date")
        return 0
    target.mkdir(exist_ok=True)
    for output in outputs:
        if output.path.is_file() and output.path.read_text(encoding="utf-8") == output.text:
            print(f"{output.path}: up to date")
            continue
        output.path.write_text(output.text, encoding="utf-8", newline="\n")
        print(f"{output.path}: written (reveals off)")
    return 0


def main(args: argparse.Namespace) -> int:
    """Run ``llmfs build``: 0 on success, 1 when --check finds problems, 2 on a CourseError."""
    try:
        manifest = _manifest_from_args(args)
        assignment = getattr(args, "assignment", None)
        if assignment is not None:
            return _build_assignment(manifest, assignment, check=args.check)
        if args.check:
            problems = stale_notebooks(manifest) + stale_guide(manifest.root)
            for problem in problems:
                print(problem, file=sys.stderr)
            if problems:
                print(f"llmfs build --check: {len(problems)} problem(s)", file=sys.stderr)
                return 1
            print(f"llmfs build --check: {len(manifest.published_chapters)} notebook(s) up to date")
            return 0
        for output in plan_build(manifest):
            relative = output.path.relative_to(manifest.root).as_posix()
            current = output.path.read_text(encoding="utf-8") if output.path.exists() else None
            if current == output.text:
                print(f"{relative}: up to date")
                continue
            output.path.parent.mkdir(parents=True, exist_ok=True)
            output.path.write_text(output.text, encoding="utf-8", newline="\n")
            print(f"{relative}: written")
        path, text = plan_explanations(manifest)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            print(f"{EXPLANATIONS_FILE}: up to date")
        else:
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"{EXPLANATIONS_FILE}: written")
        guide = write_guide(manifest.root)
        if guide is not None:
            print(guide)
        strays = stray_notebooks(manifest)
        for path in strays:
            print(
                f"{path.relative_to(manifest.root).as_posix()}: no published chapter generates it "
                "(delete it, or add its chapter to the manifest)",
                file=sys.stderr,
            )
        return 1 if strays else 0
    except CourseError as error:
        print(f"llmfs build: {error}", file=sys.stderr)
        return 2
