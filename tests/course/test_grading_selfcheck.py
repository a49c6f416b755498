"""``llmfs check``: the learner's self-check on single notebooks: a wrong answer, a forged log, a
headless run, broken and hostile files, and where it looks.

Its runs on every chapter are in ``test_grading_selfcheck_solutions.py`` (the solutions: all
right) and ``test_grading_selfcheck_blank.py`` (the unanswered notebooks: nothing right, and not
one solution in what it prints), one file each so that two test workers run them side by side."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.cli import build_parser
from llmfs.cli import main as llmfs_main
from llmfs.course.attempts import record_attempt, record_event
from llmfs.course.grading import selfcheck
from llmfs.course.grading.key import hints_of
from llmfs.course.grading.selfcheck import hints_used, history
from llmfs.course.paths import DEFAULT_FOLDER

pytestmark = pytest.mark.notebooks

CHAPTERS = kit.MANIFEST.published_chapters


def test_the_history_comes_from_the_learners_log_as_the_notebook_reads_it(tmp_path: Path) -> None:
    log = tmp_path / "attempts.jsonl"
    record_event("hint", "ch01.q1", number=1, path=log)
    record_event("hint", "ch01.q1", number=2, path=log)
    record_event("hint", "ch01.q1", number=2, path=log)  # the same hint shown again
    record_attempt("ch01.q1", {"strides": True}, path=log)
    record_attempt("ch01.q2", {"base_offset": False, "values": True}, path=log)
    record_attempt("ch01.q2", {"base_offset": True, "values": True}, path=log)
    record_event("reveal", "ch01.q3", fields=["shape"], path=log)
    # (wrong tries, revealed, hints): each hint counts once, a wrong first try stays counted
    # after a right one, a reveal is flagged.
    assert history(log, "ch01.q1") == (0, False, 2)
    assert hints_used(log, "ch01.q1") == 2
    assert history(log, "ch01.q2") == (1, False, 0)
    assert history(log, "ch01.q3") == (0, True, 0)
    assert history(tmp_path / "missing.jsonl", "ch01.q1") == (0, False, 0)
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n", encoding="utf-8")
    assert history(broken, "ch01.q1") == (0, False, 0)  # the learner's file: never a crash


def test_check_without_notebooks_says_so(tmp_path: Path) -> None:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert llmfs_main(["check", "--dir", str(tmp_path)]) == 2
    assert "no course notebooks here" in err.getvalue()


def test_check_looks_in_the_folder_llmfs_start_uses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `llmfs check` and `llmfs start` share one default: the learner's ~/llmfs-course.
    monkeypatch.setenv("HOME", str(tmp_path))
    parser = build_parser()
    assert parser.parse_args(["check"]).dir == DEFAULT_FOLDER
    assert parser.parse_args(["start"]).dir == DEFAULT_FOLDER
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert llmfs_main(["check"]) == 2
    message = err.getvalue()
    assert str(tmp_path / "llmfs-course") in message and "no such course folder" in message
    assert "llmfs start" in message


def test_a_broken_notebook_is_named_and_the_others_still_checked(tmp_path: Path) -> None:
    (tmp_path / "broken.ipynb").write_text("{not json", encoding="utf-8")
    (tmp_path / "other.ipynb").write_text(json.dumps({"cells": []}), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = llmfs_main(["check", str(tmp_path / "broken.ipynb"), str(tmp_path / "other.ipynb")])
    assert code == 1
    assert "broken.ipynb: invalid notebook JSON at line 1 column 2" in err.getvalue()
    assert "other.ipynb: not a notebook of this course" in err.getvalue()


def test_a_hostile_notebook_is_named_and_never_stops_the_check(tmp_path: Path) -> None:
    files = {
        "deep.ipynb": (b'{"cells": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "JSON nested"),
        "latin1.ipynb": (b'{"cells": [], "x": "\xe9"}', "not UTF-8 text (byte 20)"),
        "array.ipynb": (b"[]", "not a notebook (the JSON is a list, not an object)"),
        "cells.ipynb": (b'{"cells": [{"cell_type": "code", "source": 1}]}', "cell #1 is not"),
    }
    for name, (data, _) in files.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "other.ipynb").write_text(json.dumps({"cells": []}), encoding="utf-8")
    err = io.StringIO()
    paths = [str(tmp_path / name) for name in [*files, "other.ipynb"]]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert llmfs_main(["check", *paths]) == 1
    for name, (_, why) in files.items():
        assert f"{name}: {why}" in err.getvalue()
    assert "other.ipynb: not a notebook of this course" in err.getvalue()


def test_a_wrong_answer_is_named_with_its_hint_and_never_its_solution(tmp_path: Path) -> None:
    chapter = CHAPTERS[0]
    key = kit.key_of(chapter)
    item = next(i for i in key.exercises if i.exercise.kind == "predict")
    wrong = {name: kit.wrong_value(value) for name, value in item.answers.items()}
    notebook = kit.set_source(
        kit.student_notebook(chapter), item.exercise.id, kit.fill_fields(item.blank_source, wrong)
    )
    path = tmp_path / Path(chapter.notebook).name
    path.write_text(json.dumps(notebook), encoding="utf-8")
    code, text = kit.run_check(tmp_path)
    assert code == 0
    line = next(x for x in text.splitlines() if x.startswith(f"  {item.exercise.id} "))
    # The answer given (shortened), then wrong, no revealed answer, and no points.
    first = next(iter(wrong))
    shown = f"{first}={json.dumps(wrong[first])}"
    assert line[2:].split(None, 1)[1].startswith(shown[: selfcheck.ANSWER_WIDTH - 1]), line
    assert re.search(r" wrong +\d+ +no +\d+ +0/\d+$", line), line
    assert f"  {item.exercise.id} (wrong: " in text
    hints = hints_of(item.exercise)
    if hints:
        assert f"hint: {hints[0]}" in text
    for value in item.answers.values():
        if len(json.dumps(value)) >= 6 and json.dumps(value) not in item.exercise.title:
            assert json.dumps(value) not in text


def _json_check(folder: Path) -> dict[str, Any]:
    code, text = kit.run_check(folder, "--json")
    assert code == 0, text
    (chapter,) = json.loads(text)["chapters"]
    return {e["id"]: e for e in chapter["exercises"]}


def test_a_predict_exercise_counts_by_its_record_never_by_the_attempts_log(tmp_path: Path) -> None:
    """The cell's literals are the answer: a right record counts although its check cell was
    deleted and a wrong check was logged; an unanswered record stays unanswered although a
    cell logged a right attempt for it; a wrong record stays wrong although a cell replaced
    ``check`` by one that prints "right"."""
    chapter = CHAPTERS[0]
    key = kit.key_of(chapter)
    first, second, third = [i for i in key.exercises if i.exercise.kind == "predict"][:3]
    notebook = kit.student_notebook(chapter)
    notebook = kit.set_source(
        notebook, first.exercise.id, kit.fill_fields(first.blank_source, first.answers)
    )
    wrong = {name: kit.wrong_value(value) for name, value in third.answers.items()}
    notebook = kit.set_source(
        notebook, third.exercise.id, kit.fill_fields(third.blank_source, wrong)
    )
    position = kit.extract.tagged_cells(notebook)[first.exercise.id][0]
    del notebook["cells"][position]  # the check cell of the first exercise
    forged = {name: True for name in second.answers}
    notebook = kit.with_cell_first(
        notebook,
        "from llmfs.course.attempts import record_attempt\n"
        f"record_attempt({second.exercise.id!r}, {forged!r})\n"
        f"record_attempt({first.exercise.id!r}, {dict.fromkeys(first.answers, False)!r})\n"
        "import llmfs.course.exercises.api as _api, llmfs.widgets as _w\n"
        "_api.check = _w.check = lambda *a, **k: print('right')",
    )
    path = tmp_path / Path(chapter.notebook).name
    path.write_text(json.dumps(notebook), encoding="utf-8")
    found = _json_check(tmp_path)
    assert (found[first.exercise.id]["answered"], found[first.exercise.id]["right"]) == (True, True)
    assert (found[second.exercise.id]["answered"], found[second.exercise.id]["right"]) == (
        False,
        None,
    )
    assert found[third.exercise.id]["right"] is False


HEADLESS_Q1 = """q1 = predict(
    "view.reshape([3, 2])",
    exercise_id="ch02.q1",
    shape=[3, 2],  # PREDICTION
    strides=[2, 1],  # PREDICTION
    offsets=[0, 1, 2, 3, 4, 5],  # PREDICTION
    values=[[10, 11], [12, 20], [21, 22]],  # PREDICTION
)"""
HEADLESS_Q2 = HEADLESS_Q1.replace("q1", "q2").replace("reshape([3, 2])", "transpose(0, 1)")
HEADLESS_Q2 = HEADLESS_Q2.replace(
    "[[10, 11], [12, 20], [21, 22]]", "[[10, 20], [11, 21], [12, 22]]"
)


def test_a_notebook_run_headless_and_never_rendered_counts_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Answered in the text, executed by nbclient (no front end ever drew it): the saved
    checks are text and HTML verdicts, and llmfs check and llmfs grade count both answers."""
    nbclient = pytest.importorskip("nbclient", reason="needs nbclient")
    nbformat = pytest.importorskip("nbformat", reason="needs nbformat")
    chapter = next(c for c in CHAPTERS if c.id == "ch02")
    notebook = kit.set_source(kit.student_notebook(chapter), "ch02.q1", HEADLESS_Q1)
    notebook = kit.set_source(notebook, "ch02.q2", HEADLESS_Q2)
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(tmp_path / "attempts.jsonl"))
    executed = nbformat.reads(json.dumps(notebook), as_version=4)
    nbclient.NotebookClient(
        executed, timeout=120, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    path = tmp_path / Path(chapter.notebook).name
    nbformat.write(executed, str(path))
    saved = json.loads(path.read_text(encoding="utf-8"))
    positions = kit.extract.tagged_cells(saved)
    for exercise_id, headline in (
        ("ch02.q1", "ch02.q1: ✓ all 4 fields right"),
        ("ch02.q2", "ch02.q2: 2 of 4 fields right: try the ✗ fields again"),
    ):
        (output,) = saved["cells"][positions[exercise_id][0]]["outputs"]
        assert set(output["data"]) == {"text/plain", "text/html"}
        assert "".join(output["data"]["text/plain"]).startswith(headline)
    found = _json_check(tmp_path)
    assert (found["ch02.q1"]["answered"], found["ch02.q1"]["right"]) == (True, True)
    assert (found["ch02.q2"]["answered"], found["ch02.q2"]["right"]) == (True, False)
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    (submissions / "learner.ipynb").write_bytes(path.read_bytes())
    out = tmp_path / "grading"
    argv = ["grade", str(submissions), "--chapter", "ch02", "--seed", "1", "--no-execute"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert llmfs_main([*argv, "--out", str(out)]) == 0
    (row,) = csv.DictReader((out / "gradebook.csv").read_text(encoding="utf-8").splitlines())
    assert float(row["ch02.q1"]) == float(kit.MANIFEST.exercise("ch02.q1").points)
    assert 0 < float(row["ch02.q2"]) < float(kit.MANIFEST.exercise("ch02.q2").points)


def test_the_check_kernel_shares_the_build_cache_the_learner_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The run's home is a scratch folder; a named build cache is passed on (so the notebook's
    # Metal kernels are not compiled again on every check), and nothing else of this process's.
    cache = tmp_path / "build-cache"
    monkeypatch.setenv("LLMFS_CACHE_DIR", str(cache))
    monkeypatch.setenv("LLMFS_NOT_PASSED_ON", "1")
    chapter = CHAPTERS[0]
    probe = (
        "import os\n"
        f"assert os.environ.get('LLMFS_CACHE_DIR') == {str(cache)!r}\n"
        "assert 'LLMFS_NOT_PASSED_ON' not in os.environ\n"
        f"assert os.environ['HOME'] != {str(Path.home())!r}"
    )
    learner = tmp_path / "learner"
    learner.mkdir()
    path = learner / Path(chapter.notebook).name
    path.write_text(json.dumps(kit.with_cell_first(kit.student_notebook(chapter), probe)))
    _, text = kit.run_check(learner, "--json")
    [progress] = json.loads(text)["chapters"]
    assert progress["run"] == "ok", text


def test_the_report_shows_the_answer_the_wrong_tries_the_reveal_and_the_hints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A learner who answered ch01.q1 right after one wrong try, and ch01.q2 right after its
    # answer was revealed, having seen one hint: the report says so per exercise, in text and
    # in JSON, and the points are the verdict's (what llmfs grade gives the same answers).
    chapter = CHAPTERS[0]
    key = kit.key_of(chapter)
    first, second = [i for i in key.exercises if i.exercise.kind == "predict"][:2]
    notebook = kit.student_notebook(chapter)
    for item in (first, second):
        source = kit.fill_fields(item.blank_source, item.answers)
        notebook = kit.set_source(notebook, item.exercise.id, source)
    path = tmp_path / Path(chapter.notebook).name
    path.write_text(json.dumps(notebook), encoding="utf-8")
    log = tmp_path / ".llmfs" / "attempts.jsonl"
    log.parent.mkdir()
    monkeypatch.delenv("LLMFS_ATTEMPTS", raising=False)  # the log beside the notebook
    wrong = dict.fromkeys(first.answers, False)
    record_attempt(first.exercise.id, wrong, path=log)
    record_attempt(first.exercise.id, dict.fromkeys(first.answers, True), path=log)
    record_event("hint", second.exercise.id, number=1, path=log)
    record_event("reveal", second.exercise.id, fields=list(second.answers), path=log)
    found = _json_check(tmp_path)
    one, two = found[first.exercise.id], found[second.exercise.id]
    assert (one["status"], one["wrong_tries"], one["revealed"], one["hints_used"]) == (
        "right",
        1,
        False,
        0,
    )
    assert one["score"] == one["points"]
    assert (two["status"], two["revealed"], two["hints_used"]) == ("right", True, 1)
    name = next(iter(first.answers))
    assert one["answer_shown"].startswith(f"{name}=")
    assert json.loads(one["answer"]) == json.loads(json.dumps(first.answers))
    code, text = kit.run_check(tmp_path)
    assert code == 0
    line = next(x for x in text.splitlines() if x.startswith(f"  {first.exercise.id} "))
    assert re.search(r" right +1 +no +0 +1/1$", line), line
    line = next(x for x in text.splitlines() if x.startswith(f"  {second.exercise.id} "))
    assert re.search(r" right +0 +yes +1 +\d+/\d+$", line), line
