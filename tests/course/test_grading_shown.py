"""What a submission supplied, shown: file names of any bytes, the terminal, Markdown, the CSV;
and the reader that reads a notebook under a budget before the grader does.

Specification (:mod:`llmfs.course.grading.shown`, :mod:`llmfs.course.grading.reader`):

* any bytes are a file name: its rendering is printable (no control, bidi or undecodable
  character), one-to-one and reversible, and plain names are themselves;
* a line for the terminal holds no control or bidi character, whatever the text;
* learner text in Markdown is one line with no tag, comment, link, code span or table cell;
* a notebook the reader cannot read within its time or memory gets a reason naming the budget,
  in about that time, and the reader serves the next notebook afresh.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import gradingkit as kit
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.course.grading import reader, reports, shown

HOSTILE_TEXT = [
    "\x1b]0;owned\x07\x1b[2K\rgraded: 38 of 38",  # OSC title, erase line, carriage return
    "ada\u202etxt.exe",  # right-to-left override
    "E\n\n## Score so far: 38 of 38\n<!--",
    '<img src=x onerror="alert(1)">',
    "[click](javascript:alert(1)) `code` | cell |",
    "\udceb\udcff bytes that were not UTF-8",
    "\u2028line separator\u2029paragraph",
]


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40))
def test_any_bytes_render_as_a_printable_name_that_gives_the_bytes_back(raw: bytes) -> None:
    name = os.fsdecode(raw)
    rendered = shown.render_name(name)
    assert shown.name_bytes(rendered) == raw
    assert not any(shown._hidden(char) for char in rendered)
    rendered.encode("utf-8")  # storable as it is


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=12), st.binary(max_size=12))
def test_two_different_names_never_render_alike(a: bytes, b: bytes) -> None:
    if a != b:
        assert shown.render_name(os.fsdecode(a)) != shown.render_name(os.fsdecode(b))


def test_plain_names_are_themselves_and_windows_names_read_well() -> None:
    for name in ("ada", "zoe smith", "Zoë", "+SUM(1,1)", "李雷"):
        assert shown.render_name(name) == name
    assert shown.render_name(os.fsdecode(b"Zo\xeb")) == "Zo\\xeb"
    assert shown.render_name(os.fsdecode(b"r\xe9sum\xe9")) == "r\\xe9sum\\xe9"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60))
def test_a_terminal_line_holds_nothing_a_terminal_obeys(text: str) -> None:
    line = shown.terminal(text)
    assert "\n" not in line and "\r" not in line
    assert not any(shown._hidden(char) for char in line)
    line.encode("utf-8")


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_learner_text_in_markdown_is_one_line_of_text(text: str) -> None:
    shown_text = shown.markdown(text)
    assert "\n" not in shown_text and "<" not in shown_text and ">" not in shown_text
    assert "\x1b" not in shown_text and "\u202e" not in shown_text
    for special in "[]`|":
        assert shown_text.count(special) == shown_text.count("\\" + special)


def test_the_feedback_shows_a_forged_heading_and_tags_as_text() -> None:
    from llmfs.course.grading.gradebook import Row

    message = "wrong: returned <img src=x onerror=alert(1)>\n\n## Score so far: 38 of 38\n<!--"
    exercise = next(iter(kit.MANIFEST.exercises()))
    row = Row("\u202eada", exercise.id, "ch01", 0, 2.0, 0.0, "wrong", message, "", "")
    text = reports.feedback_markdown(
        "\u202eada\x1b[2K", [row], kit.MANIFEST, ["died: E\n## Score so far"], ["<!--"]
    )
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("#")] == [
        "# Feedback for \\\\u202eada\\\\x1b\\[2K",  # the escapes, shown as text
        "## What to look at again",
    ]
    assert "<" not in text and "\x1b" not in text and "\u202e" not in text


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_a_csv_cell_holds_no_bidi_or_control_character(text: str) -> None:
    cell = reports.csv_text(text)
    assert not any(char in shown.BIDI for char in cell)
    assert not any(ord(char) < 32 and char not in "\t\r\n" for char in cell)
    cell.encode("utf-8")


# --------------------------------------------------------------------------------------------
# reading under a budget
# --------------------------------------------------------------------------------------------

CHAPTER = kit.grading_chapter()
KEY = kit.key_of(CHAPTER)
SETUP: dict[str, Any] = {
    "key": "test",
    "manifest": str(kit.MANIFEST.path),
    "exercises": [
        {"id": i.exercise.id, "blank_source": i.blank_source, "function": i.function}
        for i in KEY.exercises
    ],
}


def fstring_notebook(cells: int, characters: int = 95_000) -> bytes:
    """The correct notebook with ``cells`` cells of one ``characters``-character f-string each
    (under the parser's cap per cell) before the first implement exercise, whose function needs
    them all: the grader rebuilds that function's module from them."""
    notebook = kit.correct_notebook(CHAPTER)
    item = kit.checked_implements(KEY)[0]
    position = kit._positions(notebook)[item.exercise.id]
    names = [f"_pad{i}" for i in range(cells)]
    pads = [kit.code_cell(f'{name} = f"' + "{1}x" * (characters // 4) + '"\n') for name in names]
    source = kit.extract.source_of(notebook["cells"][position - 1])
    uses = "".join(f"    {name}\n" for name in names)
    kit.set_source(notebook, item.exercise.id, source.replace("):\n", "):\n" + uses, 1))
    notebook["cells"][position - 1 : position - 1] = pads
    return json.dumps(notebook).encode()


@pytest.mark.slow
def test_a_notebook_over_the_budget_gets_a_reason_and_the_next_one_is_read() -> None:
    budget = reader.Reader(SETUP, seconds=3.0, memory_mb=reader.READ_MEMORY_MB)
    try:
        honest = json.dumps(kit.correct_notebook(CHAPTER)).encode()
        assert budget.vet(honest, "honest.ipynb") == ""
        # A JSON of 16 million empty lists: a few hundred MiB in a file, gigabytes loaded.
        bomb = b'{"cells": [], "x": [' + b"[]," * (16 * 1024 * 1024) + b"[]]}"
        start = time.monotonic()
        why = budget.vet(bomb, "bomb.ipynb")
        assert time.monotonic() - start < 6 * 3.0 + 5.0
        assert why.startswith("bomb.ipynb: ") and ("MiB" in why or " s " in why), why
        slow = fstring_notebook(2)
        start = time.monotonic()
        why = budget.vet(slow, "fstrings.ipynb")
        assert time.monotonic() - start < 6 * 3.0 + 5.0
        assert why.startswith("fstrings.ipynb: reading the notebook took longer than 3 s of CPU"), (
            why
        )
        assert budget.vet(honest, "honest.ipynb") == ""  # a fresh reader after the killed one
    finally:
        budget.close()


def test_an_unreadable_notebook_is_left_to_the_grader_s_own_reason() -> None:
    budget = reader.Reader(SETUP, seconds=reader.READ_SECONDS, memory_mb=reader.READ_MEMORY_MB)
    try:
        assert budget.vet(b"not json", "x.ipynb") == ""
        assert budget.vet(b"[" * 100_000 + b"]" * 100_000, "deep.ipynb") == ""
    finally:
        budget.close()


def test_the_grader_s_terminal_line_for_a_submission_obeys_nothing_it_supplied() -> None:
    from llmfs.course.exercises.verdict import Verdict
    from llmfs.course.grading.grade import _summary
    from llmfs.course.grading.sandbox import RunOutcome
    from llmfs.course.grading.score import SubmissionResult

    run = RunOutcome("error", 2, "cell #2 raised \x1b]0;owned\x07E\u202e: \x1b[2K\rfake")
    result = SubmissionResult(
        "\x1b[31mada\u202e",
        "ch01",
        "x.ipynb",
        "0" * 64,
        1,
        "checks",
        run,
        (Verdict("ch01.q1", 1.0, 1.0, "right", ""),),
    )
    line = _summary(result)
    assert "\x1b" not in line and "\u202e" not in line and "\r" not in line
    assert line.startswith("\\x1b[31mada\\u202e: 1 of 1 points")
