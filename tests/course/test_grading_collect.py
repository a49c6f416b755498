"""Collecting submissions: every hostile file or folder is a row or a note that says why, never
followed and never dropped in silence; and ``llmfs grade`` on such a class folder."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import socket
from pathlib import Path

import gradingkit as kit
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmfs.cli import main as llmfs_main
from llmfs.course.grading import collect, reports, shown
from llmfs.course.grading.collect import Submission, collect_submissions
from llmfs.course.grading.gradebook import Gradebook

CHAPTER = kit.MANIFEST.published_chapters[0]
OTHER = kit.MANIFEST.published_chapters[1]
NAME = Path(CHAPTER.notebook).name
BLANK = json.dumps(kit.student_notebook(CHAPTER))
WRONG_CHAPTER = json.dumps(kit.student_notebook(OTHER))


def _by_id(found: list[Submission]) -> dict[str, Submission]:
    assert [s.student for s in found] == sorted(s.student for s in found)
    assert len({s.student for s in found}) == len(found)
    return {s.student: s for s in found}


def test_links_of_every_kind_are_refused_with_a_row_and_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "solution.ipynb").write_text(BLANK)
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "real.ipynb").write_text(BLANK)
    (subs / "outside.ipynb").symlink_to(outside / "solution.ipynb")
    (subs / "inside.ipynb").symlink_to(subs / "real.ipynb")
    (subs / "dangling.ipynb").symlink_to(tmp_path / "nothing-here.ipynb")
    (subs / "folderlink").symlink_to(outside)
    (subs / "deep").mkdir()
    (subs / "deep" / NAME).symlink_to(outside / "solution.ipynb")
    found = _by_id(collect_submissions([subs], CHAPTER))
    assert set(found) == {"real", "outside", "inside", "dangling", "folderlink", "deep"}
    assert found["real"].problem == ""
    for student in ("outside", "inside", "dangling", "folderlink"):
        problem = found[student].problem
        assert "is a symbolic link (to " in problem and "never followed" in problem, student
    assert str(outside / "solution.ipynb") in found["outside"].problem
    assert "nothing-here.ipynb" in found["dangling"].problem
    assert "holds no notebook" in found["deep"].problem
    assert f"{NAME} is a symbolic link" in found["deep"].problem


def test_special_files_are_refused_without_being_opened(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    os.mkfifo(subs / "fifo.ipynb")  # opening it for reading would block for ever
    os.mkfifo(subs / "pipe")
    (subs / "cy").mkdir()
    os.mkfifo(subs / "cy" / NAME)
    (subs / "cy" / "notes.ipynb").write_text(BLANK)
    server = socket.socket(socket.AF_UNIX)
    where = subs / "sock.ipynb"
    if len(str(where)) > 100:
        pytest.skip(f"{where} is too long a path for a Unix socket")
    server.bind(str(where))
    try:
        found = _by_id(collect_submissions([subs], CHAPTER))
    finally:
        server.close()
    assert "is a FIFO (named pipe), not a notebook file: refused" in found["fifo"].problem
    assert "is a FIFO" in found["pipe"].problem
    assert "is a socket" in found["sock"].problem
    assert found["cy"].path.name == "notes.ipynb"
    assert any(f"{NAME} is a FIFO" in note for note in found["cy"].notes)
    explicit = collect_submissions([subs / "fifo.ipynb"], CHAPTER, student="ada")
    assert explicit[0].student == "ada" and "FIFO" in explicit[0].problem


def test_notebook_names_in_any_case_and_near_misses_are_reported(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "BOB.IPYNB").write_text(BLANK)
    (subs / "x.ipynb.txt").write_text(BLANK)
    (subs / "y.ipynb~").write_text(BLANK)
    (subs / "z.ipnyb").write_text(BLANK)
    (subs / "ada.ipynb").write_text(BLANK)
    (subs / "ada.ipynb~").write_text(BLANK)  # an editor's backup beside the real one
    (subs / "roster.csv").write_text("id\n")  # not a submission at all
    (subs / "README.md").write_text("# class\n")
    (subs / "dee").mkdir()
    (subs / "dee" / "ch.ipynb.bak").write_text(BLANK)
    found = _by_id(collect_submissions([subs], CHAPTER))
    assert set(found) == {"BOB", "x", "y", "z", "ada", "dee"}
    assert found["BOB"].problem == "" and found["BOB"].path.name == "BOB.IPYNB"
    for student, name in (("x", "x.ipynb.txt"), ("y", "y.ipynb~"), ("z", "z.ipnyb")):
        assert f"found {name}, which is not named .ipynb" in found[student].problem
    assert found["ada"].problem == ""
    assert found["ada"].notes == ("also found ada.ipynb~ beside it: not named .ipynb, not graded",)
    assert "ch.ipynb.bak is not named .ipynb" in found["dee"].problem


@given(st.text(alphabet="abcipnyb.~_IPYNB", min_size=1, max_size=14))
def test_a_name_is_a_notebook_a_near_miss_or_neither_never_two(name: str) -> None:
    notebook = collect.is_notebook_name(name)
    missed = collect.near_miss(name)
    assert not (notebook and missed is not None)
    if notebook:
        assert name.lower().endswith(".ipynb")
    if missed is not None:
        assert missed and name.startswith(missed) and len(missed) < len(name)


def test_the_top_most_notebook_wins_and_the_others_are_reported(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    (subs / "ada" / "Archive").mkdir(parents=True)
    (subs / "ada" / "my answers.ipynb").write_text(BLANK)  # answered, on top, any name
    (subs / "ada" / "Archive" / NAME).write_text(BLANK)  # the blank copy, named like the chapter
    (subs / "bob" / "old").mkdir(parents=True)
    (subs / "bob" / NAME.upper()).write_text(BLANK)
    (subs / "bob" / "scratch.ipynb").write_text(BLANK)
    (subs / "bob" / "old" / NAME).write_text(BLANK)
    (subs / "bob" / ".ipynb_checkpoints").mkdir()
    (subs / "bob" / ".ipynb_checkpoints" / NAME).write_text(BLANK)
    found = _by_id(collect_submissions([subs], CHAPTER))
    ada = found["ada"]
    assert ada.path == subs / "ada" / "my answers.ipynb"
    assert ada.notes == (f"graded my answers.ipynb; also found Archive/{NAME} (not graded)",)
    bob = found["bob"]
    assert bob.path.name == NAME.upper()
    assert bob.notes == (
        f"graded {NAME.upper()}; also found scratch.ipynb, old/{NAME} (not graded)",
    )


def test_names_of_any_bytes_become_reversible_ids_and_reach_every_output(
    tmp_path: Path,
) -> None:
    # A Windows zip unpacked on Linux: names in Latin-1, not UTF-8; and the bidi override.
    subs = tmp_path / "subs"
    raw = os.fsencode(subs)
    os.makedirs(raw + b"/dave/Archive")
    for name in (b"/Zo\xeb.ipynb", b"/dave/" + NAME.encode(), b"/dave/Archive/r\xe9sum\xe9.ipynb"):
        with open(raw + name, "w") as handle:
            handle.write(BLANK)
    with open(raw + "/ada\u202etxt.ipynb".encode(), "w") as handle:
        handle.write(BLANK)
    found = _by_id(collect_submissions([subs], CHAPTER))
    assert set(found) == {"Zo\\xeb", "dave", "ada\\u202etxt"}
    assert shown.name_bytes("Zo\\xeb") == b"Zo\xeb"
    out = tmp_path / "out"
    argv = ["grade", str(subs), "--chapter", CHAPTER.id, "--out", str(out), "--no-execute"]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()) as printed, contextlib.redirect_stderr(err):
        assert llmfs_main([*argv, *kit.sandbox_limits()]) == 0, err.getvalue()
    assert "r\\xe9sum\\xe9.ipynb" in err.getvalue()
    assert "\u202e" not in err.getvalue() + printed.getvalue()
    with Gradebook(out / "gradebook.sqlite") as book:
        assert {s.student for s in book.submissions()} == set(found)
        notes = book.notes()[("dave", CHAPTER.id)]
    assert notes == [f"graded {NAME}; also found Archive/r\\xe9sum\\xe9.ipynb (not graded)"]
    table = (out / "gradebook.csv").read_text(encoding="utf-8")
    assert "\u202e" not in table and "Zo\\xeb" in table


def test_a_notebook_of_another_chapter_is_named_as_such(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    (subs / "cy").mkdir(parents=True)
    (subs / "ada.ipynb").write_text(WRONG_CHAPTER)
    (subs / "bob.ipynb").write_text(json.dumps({"cells": []}))  # no tags: graded as missing
    (subs / "cy" / Path(OTHER.notebook).name).write_text(WRONG_CHAPTER)  # on top, wrong
    (subs / "cy" / "sub").mkdir()
    (subs / "cy" / "sub" / NAME).write_text(BLANK)  # deeper, right: graded
    (subs / "dee").mkdir()
    (subs / "dee" / Path(OTHER.notebook).name).write_text(WRONG_CHAPTER)
    found = _by_id(collect_submissions([subs], CHAPTER))
    assert f"the notebook of {OTHER.id}, not of {CHAPTER.id}" in found["ada"].problem
    assert NAME in found["ada"].problem
    assert found["bob"].problem == ""
    assert found["cy"].path == subs / "cy" / "sub" / NAME
    assert f"the notebook of {OTHER.id}" in found["dee"].problem


def test_telling_the_chapter_never_fails_on_a_hostile_file(tmp_path: Path) -> None:
    hostile = {
        "deep": "[" * 200_000 + "]" * 200_000,
        "binary": "\udcff",
        "list": "[1, 2]",
        "cells": '{"cells": [1, {"metadata": {"tags": [7, "exercise:"]}}]}',
    }
    for name, text in hostile.items():
        path = tmp_path / f"{name}.ipynb"
        path.write_bytes(text.encode("utf-8", "surrogateescape"))
        assert collect.wrong_chapter(path, CHAPTER) in ("",), name
        assert collect_submissions([path], CHAPTER)[0].problem == ""  # the grader says why


def test_id_collisions_are_reported_not_fatal(tmp_path: Path) -> None:
    subs = tmp_path / "subs"
    (subs / "ada").mkdir(parents=True)
    (subs / "ada.ipynb").write_text(BLANK)
    (subs / "ada" / NAME).write_text(BLANK)
    (subs / "Zoe.ipynb").write_text(BLANK)
    (subs / "zoe.ipynb").write_text(BLANK)
    composed, decomposed = "zo\u00eb", "zoe\u0308"  # one name, two Unicode forms
    (subs / f"{composed}.ipynb").write_text(BLANK)
    (subs / f"{decomposed}.ipynb").write_text(BLANK)
    found = _by_id(collect_submissions([subs], CHAPTER))
    assert "2 submissions have the id 'ada'" in found["ada"].problem
    assert str(subs / "ada.ipynb") in found["ada"].problem
    assert str(subs / "ada") in found["ada"].problem
    assert "from 'zoe'" in found["Zoe"].notes[0] and "from 'Zoe'" in found["zoe"].notes[0]
    assert found["Zoe"].problem == found["zoe"].problem == ""
    assert "differs only in case or form" in found[composed].notes[0]
    assert "differs only in case or form" in found[decomposed].notes[0]


def test_a_folder_deeper_or_wider_than_the_limits_is_cut_with_a_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(collect, "MAX_DEPTH", 2)
    monkeypatch.setattr(collect, "MAX_ENTRIES", 50)
    deep = tmp_path / "subs" / "ada"
    (deep / "a" / "b" / "c").mkdir(parents=True)
    (deep / "a" / "b" / "c" / NAME).write_text(BLANK)
    found = _by_id(collect_submissions([tmp_path / "subs"], CHAPTER))
    assert "folders deeper than 2 levels were not searched" in found["ada"].problem
    wide = tmp_path / "wide" / "bob"
    wide.mkdir(parents=True)
    for n in range(60):
        (wide / f"f{n:02}.txt").write_text("")
    found = _by_id(collect_submissions([tmp_path / "wide"], CHAPTER))
    assert "stopped after 50 entries" in found["bob"].problem


# -- llmfs grade on a hostile class folder -----------------------------------------------------

HOSTILE_IDS = ['=HYPERLINK("x","y")', "+SUM(1,1)", "-2+3", "@SUM(1,1)", "+SUM", "@SUM"]


def test_grading_a_hostile_class_gives_every_student_a_row_and_their_own_feedback(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "solution.ipynb").write_text(json.dumps(kit.correct_notebook(CHAPTER)))
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "link.ipynb").symlink_to(outside / "solution.ipynb")
    (subs / "dangling.ipynb").symlink_to(tmp_path / "gone.ipynb")
    os.mkfifo(subs / "fifo.ipynb")
    (subs / "BOB.IPYNB").write_text(BLANK)
    (subs / "x.ipynb.txt").write_text(BLANK)
    (subs / "wrong.ipynb").write_text(WRONG_CHAPTER)
    (subs / "twin.ipynb").write_text(BLANK)
    (subs / "twin").mkdir()
    (subs / "twin" / NAME).write_text(BLANK)
    (subs / "arch" / "Archive").mkdir(parents=True)
    (subs / "arch" / NAME).write_text(json.dumps(kit.correct_notebook(CHAPTER)))
    (subs / "arch" / "Archive" / NAME).write_text(BLANK)
    for student in [*HOSTILE_IDS, "zoe smith", "zoe_smith"]:
        (subs / f"{student}.ipynb").write_text(BLANK)
    out = tmp_path / "out"
    err = io.StringIO()
    argv = ["grade", str(subs), "--chapter", CHAPTER.id, "--no-execute", "--out", str(out)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert llmfs_main(argv) == 0, err.getvalue()
    assert f"arch: graded {NAME}; also found Archive/{NAME}" in err.getvalue()
    expected = {
        "link": "is a symbolic link",
        "dangling": "is a symbolic link",
        "fifo": "is a FIFO",
        "x": "not named .ipynb",
        "wrong": f"the notebook of {OTHER.id}",
        "twin": "2 submissions have the id 'twin'",
    }
    with Gradebook(out / "gradebook.sqlite") as book:
        rows = book.rows()
        students = {s.student for s in book.submissions()}
        notes = book.notes()
    ids = {"BOB", "arch", *HOSTILE_IDS, "zoe smith", "zoe_smith", *expected}
    assert students == ids
    for student, why in expected.items():
        mine = [r for r in rows if r.student == student]
        assert len(mine) == len(CHAPTER.exercises)
        assert all(r.status == "unreadable" and why in r.message for r in mine), student
        assert all(r.score == 0 for r in mine)
    full = sum(float(e.points) for e in CHAPTER.exercises)
    arch = sum(r.score or 0 for r in rows if r.student == "arch")
    assert arch == full  # the answered notebook on top, not the blank copy in Archive/
    assert notes[("arch", CHAPTER.id)] == [f"graded {NAME}; also found Archive/{NAME} (not graded)"]
    with (out / "gradebook.csv").open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    assert {reports.student_from_key(r["student_id"]) for r in table} == ids
    for row in table:
        assert not any(v.startswith(reports.FORMULA_STARTS) for v in row.values()), row
    files = list((out / "feedback").glob("*.md"))
    assert len(files) == len(ids)
    with (out / "feedback" / reports.FEEDBACK_INDEX).open(encoding="utf-8", newline="") as f:
        index = {reports.student_from_key(r["student_id"]): r["file"] for r in csv.DictReader(f)}
    for student in ids:
        text = (out / "feedback" / index[student]).read_bytes().decode("utf-8")
        assert text.startswith(f"# Feedback for {shown.markdown(student)}\n")
    arch_feedback = (out / "feedback" / index["arch"]).read_text(encoding="utf-8")
    assert f"Collected: {CHAPTER.id}: graded {NAME}; also found Archive/{NAME}" in arch_feedback
    arch_row = next(r for r in table if r["student_id"] == "arch")
    assert (
        arch_row["notes"] == f"{CHAPTER.id}: graded {NAME}; also found Archive/{NAME} (not graded)"
    )


#: Files no notebook reader can take, and what the row of each says.
UNREADABLE = {
    "deep": (b'{"cells": [], "x": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested deeper"),
    "deepcells": (b'{"cells": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested deeper"),
    "latin1": (b'{"cells": [], "x": "caf\xe9"}', "not UTF-8 text (byte 23)"),
    "array": (b"[1, 2, 3]", "the JSON is a list, not an object"),
    "hugeint": (b'{"cells": [], "n": ' + b"9" * 5000 + b"}", "invalid notebook JSON"),
    "intcell": (b'{"cells": [1]}', "cell #1 is not a notebook cell (it is a JSON int"),
    "sourceint": (
        b'{"cells": [{"cell_type": "code", "source": 5, "metadata": {}, "outputs": []}]}',
        "cell #1 is not a notebook cell (it has a source that is neither",
    ),
    "tagsdict": (
        b'{"cells": [{"cell_type": "markdown", "source": "", "metadata": {"tags": {}}}]}',
        "it has tags that are not a list of strings",
    ),
}


def test_unreadable_notebooks_become_their_students_rows_and_the_class_is_graded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from llmfs.course.grading import extract, grade

    subs = tmp_path / "subs"
    subs.mkdir()
    for student, (data, _) in UNREADABLE.items():
        (subs / f"{student}.ipynb").write_bytes(data)
    correct = json.dumps(kit.correct_notebook(CHAPTER)).encode()
    (subs / "good.ipynb").write_bytes(correct)
    (subs / "crash.ipynb").write_bytes(correct)
    limit = 1_000_000  # above every file here but one: valid JSON, one byte too large
    (subs / "big.ipynb").write_bytes(correct + b" " * (limit + 1 - len(correct)))
    monkeypatch.setattr(extract, "MAX_NOTEBOOK_BYTES", limit)
    graded = grade.grade_submission

    def grade_submission(student: str, *args: object, **kwargs: object) -> object:
        # A submission that makes the grader itself fail (a case it did not foresee).
        if student == "crash":
            raise RecursionError("maximum recursion depth exceeded")
        return graded(student, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(grade, "grade_submission", grade_submission)
    out = tmp_path / "out"
    err = io.StringIO()
    argv = ["grade", str(subs), "--chapter", CHAPTER.id, "--no-execute", "--out", str(out)]
    argv += ["--jobs", "2"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert llmfs_main(argv) == 0, err.getvalue()
    expected = {student: why for student, (_, why) in UNREADABLE.items()}
    expected["big"] = "1000001 bytes, more than the 1000000 a notebook may be"
    expected["crash"] = "the grader could not grade this submission (RecursionError"
    with Gradebook(out / "gradebook.sqlite") as book:
        rows = book.rows()
    assert {r.student for r in rows} == {*expected, "good"}
    for student, why in expected.items():
        mine = [r for r in rows if r.student == student]
        assert len(mine) == len(CHAPTER.exercises)
        assert all(r.status == "unreadable" and why in r.message for r in mine), (student, mine)
        assert all(r.score == 0 for r in mine)
    full = sum(float(e.points) for e in CHAPTER.exercises)
    assert sum(r.score or 0 for r in rows if r.student == "good") == full
