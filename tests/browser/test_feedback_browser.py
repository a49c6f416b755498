"""Feedback that teaches, at a 900 px wide output, in the light and the dark theme.

One notebook holds what the chapters show while a learner works: chapter 2's trace table (the
chapter's nine requests), chapter 9's QKV gradient diagram (three slices of one storage, each
with its header), chapter 10's check of ch10.q1 (a wrong answer in another log base, then the
right one with the chapter's explanation) and chapter 12's check of ch12.q3 (wrong, then right).
The code is the chapters' own (their solution cells, read by id). In a 900 px viewport nothing
may run off to the right: the page does not scroll sideways, and no output is wider than its
area (a table or a diagram wraps, or shrinks to fit, instead of hiding behind a scroll bar).
Screenshots of each output, light and dark, land in ``test-output/browser/feedback_*.png``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from harness import OUTPUT_DIR
from harness import change_theme as _theme

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
WIDTH = 900


def _cells(chapter: str, *ids: str) -> list[str]:
    """The sources of the solution cells ``ids`` of ``chapter``'s notebook, in that order."""
    [path] = sorted((REPO / "solutions").glob(f"{chapter}_*.ipynb"))
    cells = {cell["id"]: cell for cell in json.loads(path.read_text("utf-8"))["cells"]}
    return ["".join(cells[cell_id]["source"]) for cell_id in ids]


def _code(source: str, tag: str | None = None) -> dict[str, Any]:
    return {
        "cell_type": "code",
        "execution_count": None,
        "id": (tag or f"setup-{len(source)}").replace(":", "-"),
        "metadata": {"tags": [tag]} if tag else {},
        "outputs": [],
        "source": source,
    }


CH10_Q1 = """q1 = predict(
    '{{"loss": round(equal_logits_loss(), 2)}}',
    exercise_id="ch10.q1",
    loss={loss},  # PREDICTION
)
check(q1)"""
CH12_Q3 = """q3 = predict(
    "thread_census(13, 10)",
    exercise_id="ch12.q3",
    launched={launched},  # PREDICTION
    guarded=126,  # PREDICTION
)
check(q3)"""


def feedback_notebook() -> dict[str, Any]:
    """The notebook: each chapter's names, then one tagged cell per output under test."""
    (ch10_data, ch10_uniform) = _cells("ch10", "ch10-data", "ch10-uniform")
    (helpers, qkv_setup) = _cells("ch09", "ch09-helpers", "ch09-q5-setup")
    (q5_diagram,) = _cells("ch09", "ch09-q5-diagram")
    (trace_cell,) = _cells("ch02", "ch02-trace")
    setup = "\n".join(
        [
            "from IPython.display import display",
            "import math",
            "import numpy as np",
            "import llmfs.tensor as lt",
            "from llmfs.tensor import Tensor",
            "from llmfs.widgets import StorageDiagram, check, gradient_diagram, predict, trace",
            "from llmfs.course.exercise_checks.training import cross_entropy_reference",
            "from llmfs.course.exercise_checks.cooperate import thread_census",
            "from llmfs.gpt import task",
            "from llmfs.gpt.model import TINY_CONFIG, count_parameters",
            "from llmfs.gpt.train import answer_weights",
            "base = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])",
        ]
    )
    trace_source = trace_cell.split("if after(")[0] + "display(chapter_trace)"
    diagram = q5_diagram.replace('    after="ch09.q5",\n', "")
    cells = [
        _code(setup),
        _code(ch10_data),
        _code(ch10_uniform),
        _code(helpers),
        _code(qkv_setup),
        _code(trace_source, "out:trace"),
        _code(diagram, "out:diagram"),
        _code(CH10_Q1.format(loss=1.08), "out:ch10-wrong"),
        _code(CH10_Q1.format(loss=2.48), "out:ch10-right"),
        _code(CH12_Q3.format(launched=160), "out:ch12-wrong"),
        _code(CH12_Q3.format(launched=256), "out:ch12-right"),
    ]
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


_TOO_WIDE = """(selector) => {
  const found = [];
  for (const area of document.querySelectorAll(selector)) {
    for (const el of area.querySelectorAll('*')) {
      if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0
          && getComputedStyle(el).overflowX !== 'visible') {
        found.push(el.tagName + '.' + el.className + ' ' + el.scrollWidth + '>' + el.clientWidth);
      }
    }
  }
  return found;
}"""


OUTPUTS = (
    "out:trace",
    "out:diagram",
    "out:ch10-wrong",
    "out:ch10-right",
    "out:ch12-wrong",
    "out:ch12-right",
)


def test_feedback_tables_and_diagrams_fit_a_900_px_output_in_both_themes(
    open_lab_notebook,
) -> None:
    notebook = open_lab_notebook("feedback.ipynb", feedback_notebook())
    page = notebook.page
    page.set_viewport_size({"width": WIDTH, "height": 1600})
    state = notebook.run_all(timeout_s=300)
    assert state["errors"] == [], state
    assert state["executed"] == state["code_cells"] and state["kernel"] == "idle"

    wrong = notebook.cell_output("out:ch10-wrong")
    wrong.get_by_text("another base").first.wait_for(timeout=20_000)
    assert "ln 12" not in wrong.inner_text()  # the explanation waits for a finished exercise
    right = notebook.cell_output("out:ch10-right")
    right.locator(".llmfs-explanation").first.wait_for(timeout=20_000)
    assert "ln 12" in right.locator(".llmfs-explanation").inner_text()
    assert notebook.cell_output("out:ch12-wrong").locator(".llmfs-explanation").count() == 0
    notebook.cell_output("out:ch12-right").locator(".llmfs-explanation").wait_for(timeout=20_000)

    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")  # the output at its widest
    time.sleep(1)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    too_wide = {}
    for name, light in (("JupyterLab Light", True), ("JupyterLab Dark", False)):
        _theme(notebook, name, light)
        for tag in OUTPUTS:  # the screenshots first: they show what a failure below means
            output = notebook.cell_output(tag)
            output.scroll_into_view_if_needed()
            shot = OUTPUT_DIR / f"feedback_{tag[4:]}_{'light' if light else 'dark'}.png"
            output.screenshot(path=str(shot))
            assert shot.stat().st_size > 5_000
        too_wide[name] = (
            page.evaluate("() => document.documentElement.scrollWidth"),
            page.evaluate(_TOO_WIDE, ".jp-OutputArea-output"),
        )
    _theme(notebook, "JupyterLab Light", light=True)
    for name, (page_width, hidden) in too_wide.items():
        assert page_width <= WIDTH and hidden == [], (name, page_width, hidden)
