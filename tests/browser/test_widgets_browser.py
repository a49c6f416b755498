"""The llmfs widgets in a real browser: JupyterLab in headless Chromium renders ``OffsetTable``,
``TraceTable`` and a ``check(predict(...))``; a learner writes one right and one wrong prediction
in the cell, runs it, and the DOM shows a check and a cross in the right places (the wrong field's
answer hidden), then fixes the wrong one and sees the result's offsets.

Uses the harness beside this file (JupyterLab on 127.0.0.1, Debian Chromium via playwright); the
screenshot is saved as ``test-output/browser/llmfs_widgets.png``.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

SEED_TRANSPOSE_OFFSETS = ["0", "3", "1", "4", "2", "5"]


WRONG = 'check(predict("base.transpose(0, 1)", shape="(3,2)", strides="2, 1"))'
RIGHT = 'check(predict("base.transpose(0, 1)", shape="(3,2)", strides="1, 3"))'


def _code(cell_id: str, source: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": {},
        "outputs": [],
        "source": source,
    }


NOTEBOOK = {
    "cells": [
        _code(
            "setup",
            "from llmfs.widgets import OffsetTable, TraceTable, check, predict, trace\n"
            "from llmfs.widgets.examples import SEED_OPERATIONS, seed_fixture\n"
            "base = seed_fixture()",
        ),
        _code("offsets", "OffsetTable(base.transpose(0, 1))"),
        _code("trace", "TraceTable(trace(base, SEED_OPERATIONS))"),
        {**_code("exercise", WRONG), "metadata": {"tags": ["exercise"]}},
    ],
    "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def texts(locator) -> list[str]:
    return [text.strip() for text in locator.all_inner_texts()]


def test_widgets_render_and_a_check_marks_right_and_wrong(open_lab_notebook) -> None:
    notebook = open_lab_notebook("llmfs_widgets.ipynb", NOTEBOOK)
    page = notebook.page
    page.set_viewport_size({"width": 1400, "height": 2600})
    state = notebook.run_all()
    assert state == {"kernel": "idle", "executed": 4, "code_cells": 4, "errors": []}

    # OffsetTable: the transpose's logical cells read offsets 0, 3, 1, 4, 2, 5.
    offsets_widget = page.locator(".llmfs-offset-table").first
    offsets_widget.wait_for(timeout=30_000)
    rows = offsets_widget.locator("table.llmfs-offsets tbody tr")
    assert [rows.nth(k).get_attribute("data-offset") for k in range(6)] == SEED_TRANSPOSE_OFFSETS
    cells = offsets_widget.locator("g.llmfs-cell")
    assert [cells.nth(k).get_attribute("data-value") for k in range(6)] == [
        "10", "20", "11", "21", "12", "22",
    ]  # fmt: skip
    assert offsets_widget.locator("g.llmfs-slot").count() == 6  # storage shown once
    # Selecting logical cell [0, 1] (value 20) marks storage offset 3; the table follows after a
    # kernel round trip, and its rows keep their width.
    width_before = rows.nth(1).bounding_box()["width"]
    cells.nth(1).click()
    offsets_widget.locator('g.llmfs-slot.llmfs-on[data-offset="3"]').wait_for(timeout=10_000)
    status = "coordinate [0, 1] reads storage offset 3 (value 20)"
    offsets_widget.get_by_text(status).wait_for(timeout=10_000)
    offsets_widget.locator("table.llmfs-offsets tr.llmfs-on").wait_for(timeout=10_000)
    assert rows.nth(1).bounding_box()["width"] == width_before

    # TraceTable: the example's rows, rejections with their conditions, and the copy's mapping.
    trace_table = page.locator(".llmfs-trace-table table.llmfs-trace")
    trace_table.wait_for(timeout=10_000)
    offsets = texts(trace_table.locator('td[data-field="offsets"]'))
    assert offsets == [
        "[0, 1, 2, 3, 4, 5]",
        "[0, 1, 2, 3, 4, 5]",
        "[0, 3, 1, 4, 2, 5]",
        "[1, 2, 4, 5]",
        "[0, 1, 2, 3]",
    ]
    assert texts(trace_table.locator('td[data-field="contiguous"]')) == [
        "Yes", "Yes", "No", "No", "Yes",
    ]  # fmt: skip
    owners = texts(trace_table.locator('td[data-field="owner"]'))
    assert owners[:5] == ["◇ base"] * 4 + ["◆ copy 1"]
    assert owners[5:] == ["× rejected"] * 3
    conditions = texts(trace_table.locator('td[data-field="condition"]'))
    assert [c.split(" (")[0] for c in conditions] == [
        "violated: element counts match",
        "violated: reshape without copying",
        "violated: end <= size",
    ]
    # A click on a row marks it and opens its storage diagram under the table.
    trace_table.locator('tr[data-row="2"]').click()
    page.locator('.llmfs-trace-table tr[data-row="2"][aria-selected="true"]').wait_for(
        timeout=10_000
    )
    opened = page.locator(".llmfs-trace-table .llmfs-storage-diagram")
    opened.wait_for(timeout=10_000)
    assert opened.locator("line.llmfs-read").count() == 6
    mapping = page.locator(".llmfs-trace-table table.llmfs-mapping")
    new_cells = mapping.locator("td[data-new]")
    assert [new_cells.nth(k).get_attribute("data-new") for k in range(4)] == ["0", "1", "2", "3"]
    assert texts(mapping.locator("td[data-source]")) == ["1", "2", "4", "5"]

    # The text form: one right field (shape), one wrong field (strides): the wrong field's
    # answer stays hidden and the result's offset table waits until both are right.
    result = notebook.cell_output("exercise")
    shape_line = result.locator('li[data-field="shape"]')
    shape_line.wait_for(timeout=20_000)
    assert shape_line.get_attribute("data-status") == "right"
    assert shape_line.inner_text().strip() == "✓ shape: [3, 2]"
    strides_line = result.locator('li[data-field="strides"]')
    assert strides_line.get_attribute("data-status") == "wrong"
    assert strides_line.inner_text().strip().startswith("✗ strides: [2, 1]")
    assert "[1, 3]" not in result.inner_text()
    assert result.locator("table.llmfs-offsets").count() == 0
    notebook.set_cell_source("exercise", RIGHT)
    notebook.run_cell("exercise")
    result.get_by_text("✓ all 2 fields right").wait_for(timeout=20_000)
    result_rows = result.locator("table.llmfs-offsets tbody tr")
    assert [
        result_rows.nth(k).get_attribute("data-offset") for k in range(6)
    ] == SEED_TRANSPOSE_OFFSETS

    assert page.get_by_text("Error displaying widget").count() == 0
    assert notebook.state()["errors"] == []
    result.scroll_into_view_if_needed()
    shot = notebook.screenshot("llmfs_widgets")
    assert shot.stat().st_size > 20_000
