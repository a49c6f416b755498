"""The predict-then-run widget in a real browser, as a learner meets an exercise.

JupyterLab (the harness's isolated server) runs a notebook holding chapter 2's transpose exercise
(``ch02.q2``) as a widget. The learner presses Run with empty boxes (the missing fields are
listed, nothing of the answer shows), answers with the reshape's strides and offsets (each wrong
field is marked, its answer stays hidden and the mistake is named), asks for a hint, fixes the
answer and runs again (every field right, the offset table appears). The attempts log in the
notebook's folder holds both attempts and the hint. The screenshot lands in
``test-output/browser/predict_then_run_flow.png``.
"""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.browser


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
            "from llmfs.tensor import Tensor\n"
            "from llmfs.widgets import PredictThenRun\n"
            "base = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])\n"
            "view = base.view()",
        ),
        _code("exercise", 'PredictThenRun(exercise_id="ch02.q2")'),
    ],
    "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}

WRONG = {
    "shape": "[3, 2]",
    "strides": "[2, 1]",
    "offsets": "0 1 2 3 4 5",
    "values": "[[10, 20], [11, 21], [12, 22]]",
}
RIGHT = {**WRONG, "strides": "1, 3", "offsets": "[0, 3, 1, 4, 2, 5]"}


def test_empty_run_wrong_hint_retry_right(open_lab_notebook, lab_server) -> None:
    notebook = open_lab_notebook("predict_flow.ipynb", NOTEBOOK)
    page = notebook.page
    page.set_viewport_size({"width": 1400, "height": 2000})
    state = notebook.run_all()
    assert state == {"kernel": "idle", "executed": 2, "code_cells": 2, "errors": []}
    widget = page.locator(".llmfs-predict-then-run")
    widget.wait_for(timeout=30_000)
    result = widget.locator(".llmfs-result")

    # 1. Run with every box empty: the question and the missing fields, nothing of the truth.
    widget.locator(".llmfs-run").click()
    result.get_by_text("still to answer").wait_for(timeout=20_000)
    shown = result.inner_text()
    assert "strides: not answered yet" in shown
    for leak in ("[1, 3]", "[0, 3, 1, 4, 2, 5]", "✓", "✗"):
        assert leak not in shown
    assert result.locator("table.llmfs-offsets").count() == 0

    # 2. A wrong answer (the reshape's layout): marked per field, answers hidden, mistake named.
    for field, answer in WRONG.items():
        widget.locator(f".llmfs-input-{field} input").fill(answer)
    widget.locator(".llmfs-run").click()
    strides_row = result.locator('tr[data-field="strides"]')
    strides_row.wait_for(timeout=20_000)
    assert strides_row.get_attribute("data-status") == "wrong"
    assert result.locator('tr[data-field="shape"]').get_attribute("data-status") == "right"
    cells = [text.strip() for text in strides_row.locator("td").all_inner_texts()]
    assert cells[:3] == ["strides", "[2, 1]", "hidden"]
    assert "row-major strides of the result's shape, what a reshape would give" in cells[3]
    assert "2 more wrong tries" in cells[3]
    assert "[1, 3]" not in result.inner_text()
    assert result.locator("table.llmfs-offsets").count() == 0

    # 3. A hint, one at a time.
    widget.locator(".llmfs-hint").click()
    hints = widget.locator(".llmfs-hints")
    hints.get_by_text("hint 1 of 2").wait_for(timeout=20_000)
    assert "hint 2 of 2" not in hints.inner_text()

    # 4. Retry the wrong fields: every field right, and now the offset table of the result.
    for field, answer in RIGHT.items():
        widget.locator(f".llmfs-input-{field} input").fill(answer)
    widget.locator(".llmfs-run").click()
    result.get_by_text("4 of 4 answered fields right").wait_for(timeout=20_000)
    assert result.inner_text().count("✓ right") == 4 and "✗" not in result.inner_text()
    rows = result.locator("table.llmfs-offsets tbody tr")
    assert [rows.nth(k).get_attribute("data-offset") for k in range(6)] == [
        "0", "3", "1", "4", "2", "5",
    ]  # fmt: skip

    assert page.get_by_text("Error displaying widget").count() == 0
    assert notebook.state()["errors"] == []
    log = lab_server.root.parent / "home" / "attempts.jsonl"  # the harness sets LLMFS_ATTEMPTS
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert [(r.get("event"), r.get("attempt"), r.get("correct")) for r in records] == [
        (None, 1, False),
        ("hint", None, None),
        (None, 2, True),
    ]
    assert (records[0]["first"], records[2]["first"], records[2]["hints"]) == (True, False, 1)
    result.scroll_into_view_if_needed()
    shot = notebook.screenshot("predict_then_run_flow")
    assert shot.stat().st_size > 20_000
