"""Chapter 13's training run in a real browser, as a learner watches it.

JupyterLab (the harness's isolated server) opens the solution notebook with its outputs cleared
and runs it all. While the first half of the run trains, the live figure has redrawn with part
of the curve, the progress bar counts steps with the time left, and a sample has printed; the
screenshot is taken then. After the run the resumed half's figure holds the whole run, and the
memorisation section's figure shows the two curves. Everything stays within 900 px, in the light
and the dark theme. Screenshots land in ``test-output/browser/``.
"""

from __future__ import annotations

import json
import time

import pytest
from harness import REPO, HarnessError
from harness import change_theme as _theme
from harness import element_shot as _shot

pytestmark = pytest.mark.browser

NAME = "ch13_pretrain_on_text.ipynb"
RUN_S = 900


def test_the_run_draws_live_shows_progress_and_prints_samples(open_lab_notebook) -> None:
    solution = json.loads((REPO / "solutions" / NAME).read_text(encoding="utf-8"))
    for cell in solution["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    notebook = open_lab_notebook(NAME, solution)
    page = notebook.page
    page.set_viewport_size({"width": 900, "height": 1400})
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

    # Mid-run: the first sample has printed while the first half still trains.
    first = page.locator(".jp-Notebook .jp-Cell", has_text="step 0: validation loss")
    first.get_by_text("step 50: validation loss").wait_for(timeout=RUN_S * 1000)
    live = first.locator(".jp-OutputArea")
    assert live.locator("img").count() >= 1  # the figure, redrawn in place
    assert live.locator("progress").count() == 1
    assert _shot(live, "ch13_run_live_900_light").stat().st_size > 10_000
    # The next sample, in the dark theme: the figure has redrawn with more of the curve.
    _theme(notebook, "JupyterLab Dark", light=False)
    first.get_by_text("step 100: validation loss").wait_for(timeout=RUN_S * 1000)
    assert _shot(live, "ch13_run_live_900_dark").stat().st_size > 10_000
    _theme(notebook, "JupyterLab Light", light=True)

    deadline = time.monotonic() + RUN_S
    state = notebook.state()
    while time.monotonic() < deadline:
        state = notebook.state()
        if state["kernel"] == "idle" and (
            state["executed"] == state["code_cells"] or state["errors"]
        ):
            break
        time.sleep(0.5)
    else:
        raise HarnessError(f"{NAME}: run-all did not finish within {RUN_S} s: {state}")
    assert state["errors"] == [], state

    resumed = page.locator(".jp-Notebook .jp-Cell", has_text="loaded the checkpoint").locator(
        ".jp-OutputArea"
    )
    text = resumed.inner_text()
    assert "validation loss after 300 steps" in text and "step 300:" in text
    assert "done" in text  # the progress bar finished
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 900
    overfit = page.locator(".jp-Notebook .jp-Cell", has_text="lowest validation loss").locator(
        ".jp-OutputArea"
    )
    shots = ((resumed, "ch13_run_resumed"), (overfit, "ch13_memorising"))
    for locator, name in shots:
        assert _shot(locator, f"{name}_900_light").stat().st_size > 10_000
    _theme(notebook, "JupyterLab Dark", light=False)
    for locator, name in shots:
        assert _shot(locator, f"{name}_900_dark").stat().st_size > 10_000
    _theme(notebook, "JupyterLab Light", light=True)
