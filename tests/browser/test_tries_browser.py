"""Run All twice in real JupyterLab: the same wrong answer is one try, a hint cell one hint.

Chapter 2's student notebook at 900 px: ch02.q2 answered with the reshape's strides and offsets
(wrong), a hint cell under its check. "Run All" twice: the second run shows the same verdict with
"already tried: not counted again" in its headline, the same tries left, no answer, and the same
hint. Screenshots of the repeated check, light and dark, land in ``screenshots-not-committed/``
and ``test-output/browser/``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from harness import OUTPUT_DIR, REPO

pytestmark = pytest.mark.browser

NAME = "ch02_shared_storage_views.ipynb"
SHOTS = REPO / "screenshots-not-committed"
Q2 = """q2 = predict(
    "view.transpose(0, 1)",
    exercise_id="ch02.q2",
    shape=[3, 2],  # PREDICTION
    strides=[2, 1],  # PREDICTION
    offsets=[0, 1, 2, 3, 4, 5],  # PREDICTION
    values=[[10, 20], [11, 21], [12, 22]],  # PREDICTION
)"""
_OUTPUT_TEXT = """(index) => {
  const outputs = window.jupyterapp.shell.currentWidget.content.widgets[index].model.outputs;
  const texts = [];
  for (let i = 0; i < outputs.length; i += 1) {
    const data = outputs.get(i).toJSON().data || {};
    texts.push([].concat(data['text/plain'] || []).join(''));
  }
  return texts.join('\\n');
}"""
_SCROLL_TO = """async (index) => {
  await window.jupyterapp.shell.currentWidget.content.scrollToItem(index, 'start');
}"""


def _text(notebook, index: int) -> str:
    return " ".join(str(notebook.page.evaluate(_OUTPUT_TEXT, index)).split())


def _shot(locator, name: str) -> Path:
    SHOTS.mkdir(exist_ok=True)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    locator.screenshot(path=str(path))
    (OUTPUT_DIR / path.name).write_bytes(path.read_bytes())
    return path


def test_run_all_twice_spends_one_try_and_shows_one_hint(open_lab_notebook) -> None:
    student = json.loads((REPO / "notebooks" / NAME).read_text(encoding="utf-8"))
    cells = student["cells"]
    position = next(
        k for k, c in enumerate(cells) if "exercise:ch02.q2" in c["metadata"].get("tags", [])
    )
    hint_cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": "hint-q2",
        "metadata": {},
        "outputs": [],
        "source": 'hint("ch02.q2")',
    }
    cells.insert(position + 2, hint_cell)  # under the check(q2) cell
    notebook = open_lab_notebook(NAME, student)
    page = notebook.page
    page.set_viewport_size({"width": 900, "height": 1000})
    notebook.set_cell_source("exercise:ch02.q2", Q2)
    check_index = notebook.cell_index("exercise:ch02.q2") + 1
    first_state = notebook.run_all(timeout_s=300)
    assert first_state["errors"] == [], first_state
    first, first_hint = _text(notebook, check_index), _text(notebook, check_index + 1)
    assert "2 more wrong tries" in first and "already tried" not in first
    assert first_hint.startswith("hint 1 of")
    second_state = notebook.run_all(timeout_s=300)  # Run All again, the same kernel
    assert second_state["errors"] == [], second_state
    second, second_hint = _text(notebook, check_index), _text(notebook, check_index + 1)
    assert "(already tried: not counted again)" in second
    assert "2 more wrong tries" in second and "answer: " not in second
    assert second_hint == first_hint  # the same hint, not the next one

    page.evaluate(_SCROLL_TO, check_index)
    output = page.locator(f'.jp-Notebook .jp-Cell[data-windowed-list-index="{check_index}"]')
    output.get_by_text("already tried").wait_for(timeout=30_000)
    assert page.evaluate(
        "() => [...document.querySelectorAll('.llmfs-comparison')]"
        ".every((e) => e.scrollWidth <= e.clientWidth + 1)"
    )
    assert _shot(output, "repeated_check_900_light").stat().st_size > 10_000
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Dark'})"
    )
    page.wait_for_selector('body[data-jp-theme-light="false"]', state="attached", timeout=30_000)
    time.sleep(1)  # the theme's stylesheet applies after the attribute changes
    assert _shot(output, "repeated_check_900_dark").stat().st_size > 10_000
