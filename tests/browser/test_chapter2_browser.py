"""Chapter 2's student notebook in a real browser, as a learner meets it.

JupyterLab (the harness's isolated server) opens the committed student notebook; Run All must
finish with no error; then the learner answers the first exercise (ch02.q1) correctly in its
prediction cell (the one place an answer is written), and the check shows every field right.
The screenshot lands in ``test-output/browser/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
STUDENT = REPO / "notebooks" / "ch02_shared_storage_views.ipynb"
EXERCISE_TAG = "exercise:ch02.q1"
CHECK_TAG = "check:ch02.q1"  # added to this test's copy only, so the harness can find the cell

ANSWERED_CELL = """q1 = predict(
    "view.reshape([3, 2])",
    exercise_id="ch02.q1",
    shape=[3, 2],  # PREDICTION
    strides=[2, 1],  # PREDICTION
    offsets=[0, 1, 2, 3, 4, 5],  # PREDICTION
    values=[[10, 11], [12, 20], [21, 22]],  # PREDICTION
)"""


def student_notebook() -> dict[str, Any]:
    """The committed student notebook, with the cell after the q1 exercise tagged for the test."""
    notebook = json.loads(STUDENT.read_text(encoding="utf-8"))
    cells = notebook["cells"]
    [position] = [
        k for k, cell in enumerate(cells) if EXERCISE_TAG in cell["metadata"].get("tags", [])
    ]
    check_cell = cells[position + 1]
    assert "".join(check_cell["source"]).strip() == "check(q1)"
    check_cell["metadata"].setdefault("tags", []).append(CHECK_TAG)
    return notebook


def test_chapter_2_runs_top_to_bottom_and_answering_q1_shows_checks(
    open_lab_notebook, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    notebook = open_lab_notebook("ch02_shared_storage_views.ipynb", student_notebook())
    state = notebook.run_all(timeout_s=120)
    assert state["errors"] == []
    assert state["executed"] == state["code_cells"] and state["kernel"] == "idle"
    page = notebook.page
    assert page.get_by_text("Error displaying widget").count() == 0

    # Unanswered, the text check lists the fields to answer and shows none of the answers.
    unanswered = notebook.cell_output(CHECK_TAG)
    unanswered.get_by_text("still to answer").first.wait_for(timeout=20_000)
    assert "[2, 1]" not in unanswered.inner_text()

    assert page.locator(".llmfs-predict-then-run").count() == 0  # no second answer form

    # The prediction cell: replace the Nones, run it and its check.
    notebook.set_cell_source(EXERCISE_TAG, ANSWERED_CELL)
    for tag in (EXERCISE_TAG, CHECK_TAG):
        state = notebook.run_cell(tag)
        assert state["errors"] == [] and state["kernel"] == "idle"
    output = notebook.cell_output(CHECK_TAG)
    output.get_by_text("ch02.q1: ✓ all 4 fields right").wait_for(timeout=20_000)
    text = output.inner_text()
    assert text.count("✓") == 5 and "not answered yet" not in text  # the headline and 4 fields
    output.scroll_into_view_if_needed()
    shot = notebook.screenshot("chapter2_q1_checks")
    assert shot.stat().st_size > 10_000
