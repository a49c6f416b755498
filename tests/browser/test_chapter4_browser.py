"""Chapter 4's student notebook in a real browser, as a learner meets it.

JupyterLab (the harness's isolated server) opens the committed student notebook; Run All must
finish with no error; the unanswered check of the first exercise (ch04.q1, a broadcast view) shows
none of its answers and its storage diagram stays a sentence; then the learner answers it correctly
in its prediction cell, runs it and its check, sees every field marked right, and the diagram draws
itself: six coordinates, six lines, two of them into each storage cell of ``b`` (a click on offset
0 lights both). The screenshots land in ``test-output/browser/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
STUDENT = REPO / "notebooks" / "ch04_broadcasting_reductions.ipynb"
EXERCISE_TAG = "exercise:ch04.q1"
CHECK_TAG = "check:ch04.q1"  # added to this test's copy only, so the harness can find the cell
DIAGRAM_ID = "ch04-q1-diagram"
DIAGRAM_TAG = "diagram:ch04.q1"  # likewise

ANSWERED_CELL = """q1 = predict(
    "b.view().expand([2, 3])",
    exercise_id="ch04.q1",
    strides=[0, 1],  # PREDICTION
    offsets=[0, 1, 2, 0, 1, 2],  # PREDICTION
    values=[[1, 2, 3], [1, 2, 3]],  # PREDICTION
    contiguous="no",  # PREDICTION
    owner="shared",  # PREDICTION
)"""


def student_notebook() -> dict[str, Any]:
    """The committed student notebook, with the check and diagram cells of ch04.q1 tagged."""
    notebook = json.loads(STUDENT.read_text(encoding="utf-8"))
    cells = notebook["cells"]
    [position] = [
        k for k, cell in enumerate(cells) if EXERCISE_TAG in cell["metadata"].get("tags", [])
    ]
    check_cell = cells[position + 1]
    assert "".join(check_cell["source"]).strip() == "check(q1)"
    check_cell["metadata"].setdefault("tags", []).append(CHECK_TAG)
    [diagram_cell] = [cell for cell in cells if cell.get("id") == DIAGRAM_ID]
    assert "StorageDiagram(" in "".join(diagram_cell["source"])
    diagram_cell["metadata"].setdefault("tags", []).append(DIAGRAM_TAG)
    return notebook


def test_chapter_4_runs_top_to_bottom_and_the_broadcast_exercise_is_answered_in_its_cell(
    open_lab_notebook,
) -> None:
    notebook = open_lab_notebook("ch04_broadcasting_reductions.ipynb", student_notebook())
    state = notebook.run_all(timeout_s=120)
    assert state["errors"] == []
    assert state["executed"] == state["code_cells"] and state["kernel"] == "idle"
    page = notebook.page
    assert page.get_by_text("Error displaying widget").count() == 0

    # Unanswered, the text check lists the fields to answer and shows none of the answers.
    unanswered = notebook.cell_output(CHECK_TAG)
    unanswered.get_by_text("still to answer").first.wait_for(timeout=20_000)
    assert "[0, 1, 2, 0, 1, 2]" not in unanswered.inner_text()
    locked = notebook.cell_output(DIAGRAM_TAG)
    locked.get_by_text("This diagram shows the answer to ch04.q1").wait_for(timeout=20_000)
    assert locked.locator("line.llmfs-read").count() == 0

    # The prediction cell of ch04.q1: replace the Nones, run it and its check.
    notebook.set_cell_source(EXERCISE_TAG, ANSWERED_CELL)
    for tag in (EXERCISE_TAG, CHECK_TAG):
        state = notebook.run_cell(tag)
        assert state["errors"] == [] and state["kernel"] == "idle"
    result = notebook.cell_output(CHECK_TAG)
    result.get_by_text("ch04.q1: ✓ all 5 fields right").wait_for(timeout=20_000)
    text = result.inner_text()
    assert text.count("✓") == 6 and "✗" not in text  # the headline and five fields
    # Once right, the check shows where each value lives: two coordinates per storage cell.
    assert "0,3" in text.replace(" ", "")
    shot = notebook.screenshot("chapter4_q1_check")
    assert shot.stat().st_size > 10_000

    # The exercise is finished, so its storage diagram draws: one line per coordinate, and the
    # zero stride sends two of them into each of b's three cells.
    diagram = notebook.cell_output(DIAGRAM_TAG).locator(".llmfs-storage-diagram")
    diagram.locator("line.llmfs-read").first.wait_for(timeout=20_000)
    assert diagram.locator("g.llmfs-cell").count() == 6
    assert diagram.locator("line.llmfs-read").count() == 6
    assert diagram.locator("g.llmfs-slot").count() == 3
    diagram.locator('g.llmfs-slot[data-offset="0"]').click()
    lit = diagram.locator("g.llmfs-cell.llmfs-on")
    assert sorted(lit.nth(k).get_attribute("data-cell") for k in range(lit.count())) == [
        "p0c0",
        "p0c3",
    ]
    assert diagram.locator("line.llmfs-read.llmfs-on").count() == 2
    diagram.scroll_into_view_if_needed()
    notebook.screenshot("chapter4_q1_diagram")
