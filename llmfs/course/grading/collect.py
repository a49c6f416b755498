"""Collecting a class's submissions: which file is each student's notebook, and what was refused.

A SUBMISSIONS argument is a notebook file or a folder. Inside a folder every entry is one
student's submission:

* a regular file named ``*.ipynb`` (case-insensitively: ``BOB.IPYNB`` is student ``BOB``);
* a folder (the id is the folder's name): its notebook is chosen by :func:`choose_notebook`.

Nothing is followed or dropped in silence. The folder is read with ``lstat`` (never following a
link), so:

* a **symbolic link** (to a file or a folder, inside the class folder or outside, dangling or
  not) is refused: the student gets one row per exercise whose message says so. A link would let
  a submission point at another student's work, the instructor's solutions or a device;
* a **special file** (FIFO, socket, character or block device) is refused the same way: reading
  a FIFO would block the grader for ever;
* a **near-miss name** (``x.ipynb.txt``, ``x.ipynb~``, ``x.ipnyb``: the suffix ``.ipynb`` inside
  the name, or a last suffix one or two edits away from it) is reported: as the student's row
  when it is all they handed in, as a note beside the notebook that was graded otherwise;
* an **id collision** is reported, never fatal: a file and a folder with one id (``ada.ipynb``
  and ``ada/``) give that id one refused row naming both; ids equal after case folding and
  Unicode normalisation (``Ada``, ``ada``) are both graded, each with a note naming the other;
* a notebook of **another chapter** (none of its exercise tags is one of this chapter's, some
  belong to another) is refused with a row naming that chapter, instead of one ``missing`` row
  per exercise.

A name may be any bytes (a Windows zip unpacked on Linux gives ``Zo\xeb.ipynb``): the student id
is the name rendered by :func:`~llmfs.course.grading.shown.render_name` (``Zo\\xeb``: printable,
one-to-one, reversible), and every message about it is made storable where it is written.

Entries whose name starts with a dot (``.git``, ``.ipynb_checkpoints``, ``.DS_Store``) are not
submissions and are skipped.

Invariants: the result is sorted by student id, holds at most one :class:`Submission` per exact
id, and a submission with an empty ``problem`` names a regular file (not a link) that was a
notebook of this chapter when collected. Collection reads at most :data:`MAX_ENTRIES` entries
per student folder and :data:`MAX_DEPTH` folders deep (a note says when it stopped), so a
hostile folder cannot make it hang.
"""

from __future__ import annotations

import json
import os
import stat
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.grading.shown import render_name
from llmfs.course.manifest import EXERCISE_TAG_PREFIX, Chapter

NOTEBOOK_SUFFIX = ".ipynb"
#: How deep a student folder is searched for notebooks (the folder itself is depth 0).
MAX_DEPTH = 8
#: How many entries of one student folder are looked at, at most.
MAX_ENTRIES = 10_000
#: Notebooks of one folder read to tell their chapter, at most (shallowest first).
MAX_READ = 20
#: Larger notebooks are not read to tell their chapter (the grader still reads them).
MAX_CHAPTER_READ = 64 * 1024 * 1024


@dataclass(frozen=True)
class Submission:
    """One student's submission: the notebook to grade, or why there is none.

    ``problem`` is set when nothing can be graded (the student then gets one refused row per
    exercise saying so); ``notes`` are what the instructor and the student should know about
    the collection that did not stop the grading (extra notebooks, links not followed, a near
    miss, an id that differs from another only in case).
    """

    student: str
    path: Path
    problem: str = ""
    notes: tuple[str, ...] = ()


def _kind(mode: int) -> str:
    """What a non-regular, non-folder file is, in words."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


def _link_target(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError as error:  # vanished since it was listed, or unreadable
        return f"unreadable ({error.strerror})"


def _refusal(path: Path, mode: int, shown: str | None = None) -> str:
    """Why an entry that is neither a regular file nor a folder is refused (``shown``: the
    name to print, default the file's name)."""
    label = shown or path.name
    if stat.S_ISLNK(mode):
        return (
            f"{label} is a symbolic link (to {_link_target(path)}): refused, links are "
            "never followed; hand in the notebook file itself"
        )
    return f"{label} is {_kind(mode)}, not a notebook file: refused"


def is_notebook_name(name: str) -> bool:
    """True for a name ending in ``.ipynb`` in any case (``BOB.IPYNB``), with a stem."""
    return len(name) > len(NOTEBOOK_SUFFIX) and name.lower().endswith(NOTEBOOK_SUFFIX)


def _edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance (insertions, deletions, substitutions, swaps)."""
    rows = [list(range(len(b) + 1))]
    for i in range(1, len(a) + 1):
        row = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            row[j] = min(rows[i - 1][j] + 1, row[j - 1] + 1, rows[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], rows[i - 2][j - 2] + 1)
        rows.append(row)
    return rows[-1][-1]


def near_miss(name: str) -> str | None:
    """The student id a near-miss notebook name stands for, or None when it is no near miss.

    A near miss is not a notebook name but looks like a mangled one: ``.ipynb`` inside the
    name (``x.ipynb.txt``, ``x.ipynb~``: id ``x``) or a last suffix one or two edits from
    ``ipynb`` (``x.ipnyb``, ``x.ipyb``, ``x.ipynbb``).
    """
    if is_notebook_name(name):
        return None
    lower = name.lower()
    inside = lower.find(NOTEBOOK_SUFFIX)
    if inside > 0:
        return name[:inside]
    stem, dot, suffix = name.rpartition(".")
    if dot and stem and len(suffix) >= 3 and _edits(suffix.lower(), "ipynb") <= 2:
        return stem
    return None


def _fold(student: str) -> str:
    """The form two ids are compared in for a collision: NFKC-normalised and case-folded."""
    return unicodedata.normalize("NFKC", student).casefold()


# -- chapters ----------------------------------------------------------------------------------


def notebook_chapters(path: Path) -> set[str] | None:
    """The chapter ids of a notebook's exercise tags (``exercise:ch03.q1`` -> ``ch03``).

    None when the file cannot be read as a notebook (the grader then reports it as unreadable
    with the reason) or is larger than :data:`MAX_CHAPTER_READ`: telling the chapter is a
    courtesy, never a second parser to trust.
    """
    try:
        if path.stat().st_size > MAX_CHAPTER_READ:
            return None
        notebook = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        # RecursionError: JSON nested deeper than the parser's stack, a hostile file
        return None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if not isinstance(cells, list):
        return None
    found = set()
    for cell in cells:
        metadata = cell.get("metadata") if isinstance(cell, dict) else None
        tags = metadata.get("tags") if isinstance(metadata, dict) else None
        for tag in tags if isinstance(tags, list) else ():
            if isinstance(tag, str) and tag.startswith(EXERCISE_TAG_PREFIX):
                # an exercise id is "<chapter>.<name>"; anything else names no chapter
                chapter_id, dot, name = tag[len(EXERCISE_TAG_PREFIX) :].partition(".")
                if chapter_id and dot and name:
                    found.add(chapter_id)
    return found


def wrong_chapter(path: Path, chapter: Chapter) -> str:
    """Why the notebook at ``path`` is another chapter's, or ``""`` when it is not known to be.

    A notebook is another chapter's when it carries exercise tags, none of them this chapter's
    (a notebook with no exercise tag at all is graded: its rows say ``missing``).
    """
    found = notebook_chapters(path)
    if not found or chapter.id in found:
        return ""
    others = ", ".join(sorted(found))
    return (
        f"{path.name} is the notebook of {others}, not of {chapter.id} (its exercise cells are "
        f"tagged for {others}); hand in {Path(chapter.notebook).name}"
    )


# -- one student's folder ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Walk:
    notebooks: list[tuple[int, Path]]
    refused: list[str]
    near: list[Path]
    truncated: str


def _walk(folder: Path) -> _Walk:
    """Every notebook under ``folder`` with its depth, never following a link."""
    notebooks: list[tuple[int, Path]] = []
    refused: list[str] = []
    near: list[Path] = []
    truncated = ""
    seen = 0
    level = [folder]
    for depth in range(MAX_DEPTH + 1):
        below: list[Path] = []
        for here in level:
            try:
                entries = sorted(os.scandir(here), key=lambda e: e.name)
            except OSError as error:
                refused.append(f"{here.relative_to(folder)}/ cannot be listed ({error.strerror})")
                continue
            for entry in entries:
                if entry.name.startswith("."):
                    continue
                seen += 1
                if seen > MAX_ENTRIES:
                    return _Walk(notebooks, refused, near, f"stopped after {MAX_ENTRIES} entries")
                path = Path(entry.path)
                shown = path.relative_to(folder).as_posix()
                try:
                    mode = entry.stat(follow_symlinks=False).st_mode
                except OSError as error:  # removed since it was listed
                    refused.append(f"{shown} cannot be read ({error.strerror})")
                    continue
                if stat.S_ISDIR(mode):
                    below.append(path)
                elif stat.S_ISREG(mode):
                    if is_notebook_name(entry.name):
                        notebooks.append((depth, path))
                    elif near_miss(entry.name) is not None:
                        near.append(path)
                elif stat.S_ISLNK(mode) or is_notebook_name(entry.name):
                    refused.append(_refusal(path, mode, shown))
                else:
                    refused.append(f"{shown} is {_kind(mode)}: ignored")
        level = below
        if not level:
            break
    else:
        if level:
            truncated = f"folders deeper than {MAX_DEPTH} levels were not searched"
    return _Walk(notebooks, refused, near, truncated)


def choose_notebook(folder: Path, chapter: Chapter) -> Submission:
    """The submission of the student folder ``folder`` (id: the folder's name).

    The notebook graded is the first by: not another chapter's notebook, top-most (fewest
    folders down: an answered notebook on top always beats a blank copy under ``Archive/``),
    named like the chapter's notebook (case-insensitively), then by path. Every other notebook,
    every link or special file refused and every near-miss name is a note; with no notebook to
    grade, they are the problem.
    """
    wanted = Path(chapter.notebook).name.lower()
    walk = _walk(folder)
    ranked = sorted(
        walk.notebooks,
        key=lambda item: (item[0], item[1].name.lower() != wanted, item[1].as_posix()),
    )
    wrong: dict[Path, str] = {}
    for _, path in ranked[:MAX_READ]:
        why = wrong_chapter(path, chapter)
        if why:
            wrong[path] = why
    usable = [path for _, path in ranked if path not in wrong]
    notes = list(walk.refused)
    notes += [
        f"{path.relative_to(folder).as_posix()} is not named .ipynb: not graded"
        for path in walk.near
    ]
    if walk.truncated:
        notes.append(walk.truncated)
    name = folder.name
    if usable:
        chosen = usable[0]
        others = [p.relative_to(folder).as_posix() for _, p in ranked if p != chosen]
        if others:
            notes.append(
                f"graded {chosen.relative_to(folder).as_posix()}; also found "
                + ", ".join(others)
                + " (not graded)"
            )
        return Submission(name, chosen, "", tuple(notes))
    if wrong:
        first = next(iter(wrong.values()))
        return Submission(name, folder, first, tuple(notes))
    problem = f"the folder {name}/ holds no notebook (*.ipynb)"
    if notes:
        problem += ": " + "; ".join(notes)
    return Submission(name, folder, problem)


# -- a class folder ----------------------------------------------------------------------------


def _id_of_file(name: str) -> str:
    if is_notebook_name(name):
        return name[: -len(NOTEBOOK_SUFFIX)]
    return near_miss(name) or name


def _file_submission(path: Path, student: str, chapter: Chapter) -> Submission:
    """A notebook file given by the instructor, or found in a class folder."""
    why = wrong_chapter(path, chapter)
    return Submission(student, path, why)


def _from_folder(folder: Path, chapter: Chapter) -> list[Submission]:
    found: list[Submission] = []
    near: dict[str, list[str]] = {}
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as error:
        raise CourseError(f"{folder}: cannot list the submissions folder ({error})") from None
    for entry in entries:
        if entry.name.startswith("."):
            continue
        path = Path(entry.path)
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError as error:  # removed since it was listed
            found.append(Submission(_id_of_file(entry.name), path, f"cannot be read ({error})"))
            continue
        if stat.S_ISDIR(mode):
            found.append(choose_notebook(path, chapter))
        elif stat.S_ISREG(mode):
            if is_notebook_name(entry.name):
                found.append(_file_submission(path, _id_of_file(entry.name), chapter))
            elif (student := near_miss(entry.name)) is not None:
                near.setdefault(student, []).append(entry.name)
            # any other file (a roster, a README) is not a submission
        else:
            found.append(Submission(_id_of_file(entry.name), path, _refusal(path, mode)))
    ids = {item.student for item in found}
    for student, names in sorted(near.items()):
        listed = ", ".join(names)
        if student in ids:
            note = f"also found {listed} beside it: not named .ipynb, not graded"
            found = [
                replace(s, notes=(*s.notes, note)) if s.student == student else s for s in found
            ]
        else:
            found.append(
                Submission(
                    student,
                    folder / names[0],
                    f"no notebook: found {listed}, which is not named .ipynb (rename it to "
                    f"{student}.ipynb)",
                )
            )
    return found


def _resolve_collisions(found: list[Submission]) -> list[Submission]:
    """One submission per exact id (a clash is refused, naming every path); ids equal after
    case folding are kept, each with a note."""
    # Any bytes are a file name: the id is its printable, reversible rendering.
    found = [replace(item, student=render_name(item.student)) for item in found]
    by_id: dict[str, list[Submission]] = {}
    for item in found:
        by_id.setdefault(item.student, []).append(item)
    merged: list[Submission] = []
    for student, items in by_id.items():
        if len(items) == 1:
            merged.append(items[0])
            continue
        paths = " and ".join(str(item.path) for item in items)
        merged.append(
            Submission(
                student,
                items[0].path,
                f"{len(items)} submissions have the id {student!r} ({paths}): refused; keep "
                "one of them and grade again",
            )
        )
    by_fold: dict[str, list[str]] = {}
    for item in merged:
        by_fold.setdefault(_fold(item.student), []).append(item.student)
    result = []
    for item in merged:
        twins = [s for s in by_fold[_fold(item.student)] if s != item.student]
        if twins:
            named = ", ".join(repr(s) for s in sorted(twins))
            note = f"the id differs only in case or form from {named}: graded as another student"
            item = replace(item, notes=(*item.notes, note))
        result.append(item)
    return sorted(result, key=lambda s: s.student)


def collect_submissions(
    paths: Sequence[Path], chapter: Chapter, student: str | None = None
) -> list[Submission]:
    """The submissions named by ``paths`` (see the module docstring), sorted by student.

    A path given here is the instructor's and is followed if it is a link (``/tmp`` is one on
    macOS); what lies inside a folder is the students' and never is. Raises
    :class:`CourseError` for a path that does not exist and for ``--student`` with other than
    one submission; everything about the students' files is a row or a note instead.
    """
    found: list[Submission] = []
    for path in paths:
        try:
            mode = path.stat().st_mode
        except OSError:
            raise CourseError(f"{path}: no such submission file or folder") from None
        if stat.S_ISDIR(mode):
            found += _from_folder(path, chapter)
        elif stat.S_ISREG(mode):
            found.append(_file_submission(path, _id_of_file(path.name), chapter))
        else:
            found.append(Submission(_id_of_file(path.name), path, _refusal(path, mode)))
    if student is not None:
        if len(found) != 1:
            raise CourseError(f"--student names one submission, but {len(found)} were given")
        found = [replace(found[0], student=student)]
    return _resolve_collisions(found)
