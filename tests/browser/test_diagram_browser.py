"""The storage diagram in a real browser: JupyterLab in headless Chromium draws StorageDiagram
offline (its script is bundled in the package), one line per logical cell; a click highlights
one line and shows the offset formula; the step button walks the cursor in the order
``logical_offsets()`` gives; a copy has its own strip. Screenshots of the light and the dark
theme are written to ``test-output/browser/``.
"""

from __future__ import annotations

import pytest

from llmfs.widgets.examples import seed_fixture

pytestmark = pytest.mark.browser


def _code(cell_id: str, source: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": cell_id,
        "metadata": {"tags": [cell_id]},
        "outputs": [],
        "source": source,
    }


NOTEBOOK = {
    "cells": [
        _code(
            "setup",
            "from llmfs.widgets import StorageDiagram\n"
            "from llmfs.widgets.examples import seed_fixture\n"
            "base = seed_fixture()",
        ),
        _code(
            "transpose",
            "transposed = StorageDiagram(base.view().transpose(0, 1))\ntransposed",
        ),
        _code(
            "copy",
            "StorageDiagram(base, ['sliced = base.view().slice(1, 1, 3)', "
            "'sliced.materialize()', 'sliced.reshape([4])'])",
        ),
        _code("state", "print(transposed.selected, transposed.step)"),
        _code(
            "trace",
            "from llmfs.widgets import TraceTable, trace\n"
            "from llmfs.widgets.examples import SEED_OPERATIONS\n"
            "TraceTable(trace(seed_fixture(), SEED_OPERATIONS))",
        ),
    ],
    "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
    },
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_the_diagram_draws_selects_steps_and_copies(open_lab_notebook) -> None:
    notebook = open_lab_notebook("llmfs_diagram.ipynb", NOTEBOOK)
    page = notebook.page
    requested: list[str] = []
    page.on("request", lambda request: requested.append(request.url))
    page.set_viewport_size({"width": 1280, "height": 1800})
    state = notebook.run_all()
    assert state["errors"] == [] and state["executed"] == state["code_cells"]
    assert page.get_by_text("Error displaying widget").count() == 0

    first = notebook.cell_output("transpose").locator(".llmfs-storage-diagram")
    first.wait_for(timeout=30_000)
    cells = first.locator("g.llmfs-cell")
    lines = first.locator("line.llmfs-read")
    assert cells.count() == 6
    assert lines.count() == cells.count()

    # Click logical cell [0, 1]: one line lights up and the status shows the formula.
    first.locator('g.llmfs-cell[data-cell="p0c1"]').click()
    highlighted = first.locator("line.llmfs-read.llmfs-on")
    assert highlighted.count() == 1
    assert highlighted.get_attribute("data-cell") == "p0c1"
    assert first.locator('g.llmfs-slot.llmfs-on[data-offset="3"]').count() == 1
    status = first.locator(".llmfs-status")
    assert status.get_attribute("aria-live") == "polite"
    assert "[0,1] reads offset 3 of base: 0 + 0·1 + 1·3 = 3 (value 20)" in status.inner_text()
    assert first.locator('g.llmfs-cell[data-cell="p0c1"]').get_attribute("aria-pressed") == "true"
    notebook.screenshot("diagram_light")

    # Step walks the cursor in the order logical_offsets() gives, saying the carry.
    step = first.get_by_role("button", name="step: cursor of view", exact=True)
    walked, said = [], []
    for _ in range(6):
        step.click()
        walked.append(int(first.locator("g.llmfs-cell.llmfs-on").get_attribute("data-offset")))
        said.append(status.inner_text())
        assert first.locator("line.llmfs-read.llmfs-on").count() == 1
    assert walked == list(seed_fixture().view().transpose(0, 1).logical_offsets())
    assert said[0].startswith("step 1 of 6: start at the base offset 0")
    assert said[2].startswith(
        "step 3 of 6: column 1→0 wraps (−3), carry into row 0→1 (+1): offset 3 − 3 + 1 = 1"
    )
    assert step.get_attribute("aria-pressed") == "true"

    # Offline: the widget's script came with the package, nothing was fetched from elsewhere.
    local = (notebook.server.url, "data:", "blob:", "ws://127.0.0.1")
    assert [url for url in requested if not url.startswith(local)] == []

    # The kernel saw the widget's state (synced both ways).
    notebook.run_cell("state")
    output = notebook.cell_output("state")
    output.get_by_text("p0c5 5").wait_for(timeout=10_000)

    # A copy: its own hatched ◆ strip, dashed lines back to the source, the refused reshape's gap.
    second = notebook.cell_output("copy").locator(".llmfs-storage-diagram")
    strips = second.locator("g.llmfs-strip")
    assert strips.count() == 2
    assert "llmfs-strip-copy" in strips.nth(1).get_attribute("class")
    assert second.locator("line.llmfs-copy-line").count() == 4
    assert second.locator("line.llmfs-read").count() == second.locator("g.llmfs-cell").count()
    assert second.locator('g.llmfs-gap-mark[data-gap="2 4"]').count() == 1
    assert "offset 3 is skipped: not contiguous" in second.inner_text()

    # Keyboard: Tab to a cell and press Enter.
    target = first.locator('g.llmfs-cell[data-cell="p0c4"]')
    target.focus()
    page.keyboard.press("Enter")
    assert target.get_attribute("aria-pressed") == "true"
    assert "[2,0] reads offset 2 of base" in status.inner_text()

    # The dark theme: the same widgets with the theme's colours.
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Dark'})"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'", timeout=20_000)
    page.wait_for_timeout(500)
    fill = first.locator("svg.llmfs-diagram text").first.evaluate(
        "(node) => getComputedStyle(node).fill"
    )
    assert fill not in ("rgb(26, 26, 26)", "rgb(0, 0, 0)"), fill
    first.locator('g.llmfs-cell[data-cell="p0c2"]').click()
    notebook.screenshot("diagram_dark")
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Light'})"
    )


def test_the_trace_table_scrolls_sideways_and_opens_rows(open_lab_notebook) -> None:
    notebook = open_lab_notebook("llmfs_trace_rows.ipynb", NOTEBOOK)
    page = notebook.page
    page.set_viewport_size({"width": 900, "height": 1600})
    state = notebook.run_all()
    assert state["errors"] == []
    table = notebook.cell_output("trace").locator(".llmfs-trace-table")
    table.locator("table.llmfs-trace").wait_for(timeout=30_000)
    # At 900 px the wide table scrolls inside its own box; the page itself does not overflow.
    box = table.locator(".llmfs-trace-figure")
    assert box.evaluate("(node) => node.scrollWidth > node.clientWidth")
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 900
    # A rejected row opens to its explanation; the chosen row is marked in words and glyph.
    row = table.locator('tr[data-row="6"]')
    row.click()
    chosen = table.locator('tr[data-row="6"][aria-selected="true"]')
    chosen.wait_for(timeout=10_000)
    assert "▶" in chosen.inner_text()
    assert chosen.locator("details").get_attribute("open") is not None
    table.get_by_text("not adjacent in storage").first.wait_for(timeout=10_000)
    # A copy row opens its diagram: its own strip with dashed lines back to the source.
    table.locator('tr[data-row="4"]').click()
    opened = table.locator(".llmfs-storage-diagram")
    opened.locator("line.llmfs-copy-line").first.wait_for(timeout=10_000)
    assert opened.locator("g.llmfs-strip").count() == 2
    notebook.screenshot("trace_rows_900px")


LOCKED = {
    "cells": [
        _code(
            "setup",
            "from llmfs.widgets import StorageDiagram, check, predict\n"
            "from llmfs.widgets.examples import seed_fixture\n"
            "base = seed_fixture()\n"
            "view = base.view()",
        ),
        _code(
            "diagram",
            'StorageDiagram(view, ["view.reshape([3, 2])"], name="view", owner="base", '
            'after="ch02.q1")',
        ),
        _code(
            "answer",
            'check(predict("view.reshape([3, 2])", exercise_id="ch02.q1", shape=[3, 2], '
            "strides=[2, 1], offsets=[0, 1, 2, 3, 4, 5], values=[[10, 11], [12, 20], [21, 22]]))",
        ),
    ],
    "metadata": NOTEBOOK["metadata"],
    "nbformat": 4,
    "nbformat_minor": 5,
}


def test_a_diagram_after_an_exercise_draws_itself_when_the_exercise_is_finished(
    open_lab_notebook,
) -> None:
    notebook = open_lab_notebook("llmfs_locked.ipynb", LOCKED)
    page = notebook.page
    for tag in ("setup", "diagram"):
        assert notebook.run_cell(tag)["errors"] == []
    widget = notebook.cell_output("diagram").locator(".llmfs-storage-diagram")
    widget.get_by_text("This diagram shows the answer to ch02.q1").wait_for(timeout=30_000)
    assert widget.locator("svg.llmfs-diagram").count() == 0
    # The learner answers in the check cell below: the diagram above draws itself.
    assert notebook.run_cell("answer")["errors"] == []
    widget.locator("svg.llmfs-diagram").wait_for(timeout=20_000)
    assert widget.locator("line.llmfs-read").count() == 6
    assert page.get_by_text("Error displaying widget").count() == 0
