"""The browser harness itself: JupyterLab in headless Chromium, ipywidgets rendered and clicked."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
from harness import (
    ANNOUNCEMENTS_PLUGIN,
    HarnessError,
    LabServer,
    _alive,
    jupyterlab,
    open_notebook,
    unavailable_reason,
)

from tests.requirements import require_tool

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


def _notebook(*cells: dict) -> dict:
    return {
        "cells": list(cells),
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


WIDGET_NOTEBOOK = _notebook(
    _code(
        "widgets",
        "import ipywidgets as widgets\n"
        "clicks = 0\n"
        "label = widgets.Label(value='clicked 0 times')\n"
        "button = widgets.Button(description='Count a click')\n"
        "def on_click(_):\n"
        "    global clicks\n"
        "    clicks += 1\n"
        "    label.value = f'clicked {clicks} times'\n"
        "button.on_click(on_click)\n"
        "widgets.VBox([button, label])",
    ),
    _code("text", "print('plain text output: 6 * 7 =', 6 * 7)"),
)
WIDGET_NOTEBOOK["cells"][1]["metadata"]["tags"] = ["answer"]


def test_a_widget_notebook_runs_and_a_click_changes_the_dom(open_lab_notebook) -> None:
    notebook = open_lab_notebook("widgets.ipynb", WIDGET_NOTEBOOK)
    state = notebook.run_all()
    assert state == {"kernel": "idle", "executed": 2, "code_cells": 2, "errors": []}
    page = notebook.page
    page.get_by_text("plain text output: 6 * 7 = 42").wait_for(timeout=10_000)
    label = page.locator(".widget-label", has_text="clicked 0 times")
    label.wait_for(timeout=20_000)
    page.get_by_role("button", name="Count a click").click()
    page.locator(".widget-label", has_text="clicked 1 times").wait_for(timeout=10_000)
    assert page.get_by_text("Error displaying widget").count() == 0
    shot = notebook.screenshot("harness_widgets")
    assert shot.stat().st_size > 10_000

    # A learner edits a tagged cell and runs it again.
    assert notebook.cell_source("answer").startswith("print('plain text output")
    notebook.set_cell_source("answer", "print('edited answer:', 7 * 6)")
    state = notebook.run_cell("answer")
    assert state["errors"] == [] and state["kernel"] == "idle"
    notebook.cell_output("answer").get_by_text("edited answer: 42").wait_for(timeout=10_000)
    with pytest.raises(HarnessError, match="no cell is tagged 'missing'"):
        notebook.cell_index("missing")


def test_the_server_disables_announcements_and_needs_its_token(lab_server: LabServer) -> None:
    html = urllib.request.urlopen(f"{lab_server.url}lab?token={lab_server.token}", timeout=10)
    text = html.read().decode()
    config = json.loads(
        re.search(
            r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', text, re.S
        ).group(1)
    )
    assert ANNOUNCEMENTS_PLUGIN in config["disabledExtensions"]
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{lab_server.url}api/kernels", timeout=10)
    assert refused.value.code == 403


def test_run_all_reports_errors_and_leaving_the_harness_stops_server_and_kernels(
    tmp_path: Path, browser_context
) -> None:
    (tmp_path / "root").mkdir()
    failing = _notebook(
        _code("ok", "x = 1"),
        _code("bad", "raise ValueError('broken cell')"),
        _code("after", "y = 2"),
    )
    (tmp_path / "root" / "failing.ipynb").write_text(json.dumps(failing))
    with jupyterlab(root=tmp_path / "root", home=tmp_path / "home") as server:
        notebook = open_notebook(browser_context, server, "failing.ipynb")
        state = notebook.run_all()
        kernels = server.kernel_pids()
        notebook.page.close()
    assert state["errors"] == ["ValueError: broken cell"]
    assert (state["executed"], state["code_cells"], state["kernel"]) == (2, 3, "idle")
    assert kernels, "the notebook's kernel must be a child process of the server"
    assert server.process.poll() is not None
    assert [pid for pid in kernels if _alive(pid)] == []


def test_a_server_that_cannot_start_is_a_harness_error_with_its_log(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason:
        require_tool(reason)
    with pytest.raises(HarnessError, match="exited with status"):
        with jupyterlab(root=tmp_path / "missing-root", home=tmp_path / "home"):
            pass
