"""Chapter 12's student notebook in a real browser, as a learner meets it.

JupyterLab (the harness's isolated server) opens the committed student notebook. The learner
writes a tree sum whose loop lost its barrier and answers the missing-barrier prediction
(ch12.q1) with the right sum for its total; Run All must finish with no error. The kernel's
check names the race the shuffled emulator shows, the prediction's check names the mistake
and states neither answer, and both reports stay readable at 900 px in the light and the dark
theme. Screenshots land in ``test-output/browser/``.
"""

from __future__ import annotations

import json
import time

import pytest
from harness import REPO
from harness import change_theme as _theme
from harness import element_shot as _shot

pytestmark = pytest.mark.browser

NAME = "ch12_kernels_that_cooperate.ipynb"
RACY = '''def group_sum_kernel():
    return """
#include <metal_stdlib>
using namespace metal;

kernel void group_sum(device const float* x [[buffer(0)]],
                      device float* partial [[buffer(1)]],
                      constant uint& count [[buffer(2)]],
                      threadgroup float* shared [[threadgroup(0)]],
                      uint gid [[thread_position_in_grid]],
                      uint lid [[thread_position_in_threadgroup]],
                      uint group [[threadgroup_position_in_grid]],
                      uint size [[threads_per_threadgroup]]) {
    shared[lid] = gid < count ? x[gid] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = size / 2; stride > 0; stride /= 2) {
        if (lid < stride) {
            shared[lid] += shared[lid + stride];
        }
    }
    if (lid == 0) {
        partial[group] = shared[0];
    }
}
"""'''
# The right sum given for what the kernel without its loop barrier writes.
Q1 = """q1 = predict(
    "missing_barrier(list(range(1, 129)))",
    exercise_id="ch12.q1",
    grid_order=8256,  # PREDICTION
    same_in_every_order=False,  # PREDICTION
)"""
_SCROLL_TO = """async (index) => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.content.scrollToItem(index, 'start');
}"""


def _output_below(notebook, tag: str):
    # The cell right under the exercise's cell (its check), scrolled into the window.
    index = notebook.cell_index(tag) + 1
    notebook.page.evaluate(_SCROLL_TO, index)
    return notebook.page.locator(f'.jp-Notebook .jp-Cell[data-windowed-list-index="{index}"]')


def _text_below(notebook, tag: str, needle: str, timeout_s: float = 30.0) -> str:
    """The text of the cell under the exercise's cell once it holds ``needle``. The notebook
    is a windowed list: a cell scrolled out of the window is emptied and drawn again when it
    comes back, so its text is read again, scrolled into view, until it is all there."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = _output_below(notebook, tag).inner_text()
        if needle in text or time.monotonic() > deadline:
            return text
        time.sleep(0.25)


def test_a_racy_tree_sum_and_a_wrong_prediction_are_named_in_the_browser(
    open_lab_notebook,
) -> None:
    student = json.loads((REPO / "notebooks" / NAME).read_text(encoding="utf-8"))
    notebook = open_lab_notebook(NAME, student)
    page = notebook.page
    page.set_viewport_size({"width": 900, "height": 1200})
    notebook.set_cell_source("exercise:ch12.tree_sum", RACY)
    notebook.set_cell_source("exercise:ch12.q1", Q1)
    state = notebook.run_all(timeout_s=400)
    assert state["errors"] == [] and state["kernel"] == "idle", state
    assert page.get_by_text("Error displaying widget").count() == 0

    tree = _output_below(notebook, "exercise:ch12.tree_sum")
    tree.get_by_text("RaceBetweenThreads").first.wait_for(timeout=30_000)
    assert "✗ not yet" in _text_below(notebook, "exercise:ch12.tree_sum", "✗ not yet")
    q1 = _output_below(notebook, "exercise:ch12.q1")
    q1.get_by_text("ch12.q1: 1 of 2 fields right").wait_for(timeout=30_000)
    named = "the first thread to run reads its partners' slots"
    text = _text_below(notebook, "exercise:ch12.q1", named)
    assert named in text
    assert "grid_order: 135" not in text  # the answer is not shown before it is given
    # Readable at 900 px: no report runs off to the right of its output area.
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 900
    for locator, name in ((tree, "ch12_tree_sum_race"), (q1, "ch12_q1_mistake")):
        assert _shot(locator, f"{name}_900_light").stat().st_size > 10_000
    _theme(notebook, "JupyterLab Dark", light=False)
    for locator, name in ((tree, "ch12_tree_sum_race"), (q1, "ch12_q1_mistake")):
        assert _shot(locator, f"{name}_900_dark").stat().st_size > 10_000
    _theme(notebook, "JupyterLab Light", light=True)
