"""Chapter 11's student notebook in a real browser, as a learner meets it.

JupyterLab opens the committed student notebook; Run All finishes with no error; the unanswered
check of the cache-layout exercise (ch11.q3) shows none of its answers and the storage diagrams of
the cache stay a sentence. Then the learner answers it in its prediction cell, runs its check and
sees every field right, and the diagrams draw the cache filling up: after step 0 the views read
the 8 written cells (one position of keys and of values per head) and skip the unwritten ones;
after step 2 they read 24. The screenshots, at 900 px in the light and the dark theme, land in
``test-output/browser/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import OUTPUT_DIR
from harness import change_theme as _theme

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
NAME = "ch11_tokens_to_text.ipynb"
EXERCISE_TAG = "exercise:ch11.q3"
CHECK_TAG = "check:ch11.q3"  # added to this test's copy only, so the harness finds the cell
DIAGRAM_TAG = "diagram:ch11.q3"  # likewise

ANSWERED_CELL = """q3 = predict(
    "cache.slice(3, 0, t + 1)[1]",
    exercise_id="ch11.q3",
    shape=[2, 4, 6, 8],  # PREDICTION
    strides=[512, 128, 8, 1],  # PREDICTION
    base_offset=1024,  # PREDICTION
    contiguous="no",  # PREDICTION
)"""


def student_notebook() -> dict[str, Any]:
    """The committed student notebook, with ch11.q3's check and the cache diagrams tagged."""
    notebook = json.loads((REPO / "notebooks" / NAME).read_text(encoding="utf-8"))
    by_id = {cell.get("id"): cell for cell in notebook["cells"]}
    assert "".join(by_id["ch11-q3-check"]["source"]).strip() == "check(q3)"
    by_id["ch11-q3-check"]["metadata"].setdefault("tags", []).append(CHECK_TAG)
    assert "StorageDiagram(" in "".join(by_id["ch11-diagram"]["source"])
    by_id["ch11-diagram"]["metadata"].setdefault("tags", []).append(DIAGRAM_TAG)
    return notebook


def test_chapter_11_runs_and_the_cache_diagrams_draw_once_the_layout_is_predicted(
    open_lab_notebook,
) -> None:
    notebook = open_lab_notebook(NAME, student_notebook())
    page = notebook.page
    page.set_viewport_size({"width": 900, "height": 2400})
    state = notebook.run_all(timeout_s=240)
    assert state["errors"] == [], state
    assert state["executed"] == state["code_cells"] and state["kernel"] == "idle"
    assert page.get_by_text("Error displaying widget").count() == 0

    unanswered = notebook.cell_output(CHECK_TAG)
    unanswered.get_by_text("still to answer").first.wait_for(timeout=20_000)
    assert "512" not in unanswered.inner_text() and "1024" not in unanswered.inner_text()
    locked = notebook.cell_output(DIAGRAM_TAG)
    locked.get_by_text("This diagram shows the answer to ch11.q3").first.wait_for(timeout=20_000)
    assert locked.locator("line.llmfs-read").count() == 0

    notebook.set_cell_source(EXERCISE_TAG, ANSWERED_CELL)
    for tag in (EXERCISE_TAG, CHECK_TAG):
        state = notebook.run_cell(tag)
        assert state["errors"] == [] and state["kernel"] == "idle"
    result = notebook.cell_output(CHECK_TAG)
    result.get_by_text("ch11.q3: ✓ all 4 fields right").wait_for(timeout=20_000)

    diagrams = notebook.cell_output(DIAGRAM_TAG).locator(".llmfs-storage-diagram")
    diagrams.nth(1).locator("line.llmfs-read").first.wait_for(timeout=20_000)
    assert diagrams.count() == 2
    for k, written in enumerate((8, 24)):
        drawn = diagrams.nth(k)
        assert drawn.locator("g.llmfs-cell").count() == written
        assert drawn.locator("line.llmfs-read").count() == written
        slots = drawn.locator("g.llmfs-slot")
        assert slots.count() == 32
        read = drawn.locator('g.llmfs-slot[data-status="read"]')
        assert read.count() == written  # the written cells, and nothing else, are read
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 900
    output = notebook.cell_output(DIAGRAM_TAG)
    output.scroll_into_view_if_needed()
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    for name, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
        _theme(notebook, name, light)
        shot = OUTPUT_DIR / f"chapter11_cache_diagram_{'light' if light else 'dark'}.png"
        output.screenshot(path=str(shot))
        assert shot.stat().st_size > 10_000
    _theme(notebook, "JupyterLab Light", light=True)
