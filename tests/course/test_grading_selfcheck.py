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
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest

from llmfs.cli import build_parser
from llmfs.cli import main as llmfs_main
from llmfs.course.grading.key import hints_of
from llmfs.course.grading.selfcheck import hints_used
from llmfs.course.paths import DEFAULT_FOLDER

pytestmark = pytest.mark.notebooks

CHAPTERS = kit.MANIFEST.published_chapters


def test_hints_used_come_from_the_learners_log(tmp_path: Path) -> None:
    log = tmp_path / "attempts.jsonl"
    lines = [
        {"event": "hint", "exercise": "ch01.q1", "number": 1},
        {"event": "hint", "exercise": "ch01.q1", "number": 2},
        {"event": "hint", "exercise": "ch01.q1", "number": 2},
        {"exercise": "ch01.q2", "attempt": 1, "hints": 1, "fields": {"shape": False}},
        {"event": "reveal", "exercise": "ch01.q2", "fields": ["shape"]},
    ]
    log.write_text("\n".join([*map(json.dumps, lines), "not json"]), encoding="utf-8")
    assert hints_used(log, "ch01.q1") == 2
    assert hints_used(log, "ch01.q2") == 1
    assert hints_used(log, "ch01.q3") == 0
    assert hints_used(tmp_path / "missing.jsonl", "ch01.q1") == 0


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
    assert line.split()[2:4] == ["yes", "no"]  # answered, not right
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
