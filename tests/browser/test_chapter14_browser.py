"""Chapter 14 in a real browser, as a learner runs it.

JupyterLab (the harness's isolated server) opens the solution notebook with its outputs cleared
and runs it all. While the LoRA run trains, its progress bar counts steps; after the run the
checks, the comparison table, the masking run and the GPT-2 cell (on the small random folder the
chapter writes) have printed. Everything stays within 900 px, in the light and the dark theme.
Screenshots land in ``test-output/browser/``.
"""

from __future__ import annotations

import json
import time

import pytest
from harness import REPO, HarnessError
from harness import change_theme as _theme
from harness import element_shot as _shot

pytestmark = pytest.mark.browser

NAME = "ch14_fine_tune.ipynb"
RUN_S = 900


def _cell(page, text: str):
    return page.locator(".jp-Notebook .jp-Cell", has_text=text).last


def test_the_runs_show_progress_and_the_chapter_runs_to_the_end(open_lab_notebook) -> None:
    solution = json.loads((REPO / "solutions" / NAME).read_text(encoding="utf-8"))
    for cell in solution["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    notebook = open_lab_notebook(NAME, solution)
    page = notebook.page
    page.set_viewport_size({"width": 900, "height": 1400})
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")

    # Mid-run: the first LoRA cell shows its progress bar while it trains.
    first = page.locator(".jp-Notebook .jp-Cell", has_text="LoRA trains 8,192 numbers")
    first.locator("progress").wait_for(timeout=RUN_S * 1000)
    assert _shot(first.locator(".jp-OutputArea"), "ch14_lora_progress_900_light").stat().st_size

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
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 900

    table = _cell(page, "gain per 1,000").locator(".jp-OutputArea")
    assert "LoRA" in table.inner_text() and "full" in table.inner_text()
    shots = (
        (_cell(page, 'first_output="equal"'), "ch14_q1"),
        (_cell(page, "check_lora_merge(lora_merge)").locator(".jp-OutputArea"), "ch14_merge"),
        (_cell(page, 'wins="LoRA"'), "ch14_q3_predict"),
        (table, "ch14_table"),
        (
            _cell(page, "adapters, loss on every token: step 300").locator(".jp-OutputArea"),
            "ch14_unmasked",
        ),
        (_cell(page, "loss on every token 0."), "ch14_masking"),
        (_cell(page, "small-gpt2").locator(".jp-OutputArea"), "ch14_small_gpt2"),
    )
    for locator, name in shots:
        assert _shot(locator, f"{name}_900_light").stat().st_size > 5_000
    _theme(notebook, "JupyterLab Dark", light=False)
    for locator, name in shots:
        assert _shot(locator, f"{name}_900_dark").stat().st_size > 5_000
    _theme(notebook, "JupyterLab Light", light=True)
