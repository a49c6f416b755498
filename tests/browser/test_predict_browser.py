"""A predict exercise in a real browser, as a learner meets it: the answer is the cell's text.

JupyterLab (the harness's isolated server, saving widget state in notebooks as ``llmfs start``
configures it) opens chapter 2's student notebook. The learner answers two exercises in their
``predict(...)`` cells (ch02.q1 right, ch02.q2 with the reshape's strides and offsets), runs the
notebook, reads both verdicts at 900 px in the light and the dark theme, and saves. Then the
kernel goes (the page closes and its session is shut down) and the notebook is opened again in
a new kernel: both verdicts are still there, read from the saved file, and no widget says
"Error displaying widget". ``llmfs check`` and ``llmfs grade`` on that saved file count both
answers. Screenshots land in ``screenshots-not-committed/`` (never committed) and
``test-output/browser/``.
"""

from __future__ import annotations

import csv
import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from harness import OUTPUT_DIR, REPO, open_notebook

from llmfs.cli import main as llmfs_main
from llmfs.course.grading.limits import Limits
from llmfs.course.grading.selfcheck import check_notebook
from llmfs.course.manifest import load_manifest

pytestmark = pytest.mark.browser

NAME = "ch02_shared_storage_views.ipynb"
SHOTS = REPO / "screenshots-not-committed"
Q1 = """q1 = predict(
    "view.reshape([3, 2])",
    exercise_id="ch02.q1",
    shape=[3, 2],  # PREDICTION
    strides=[2, 1],  # PREDICTION
    offsets=[0, 1, 2, 3, 4, 5],  # PREDICTION
    values=[[10, 11], [12, 20], [21, 22]],  # PREDICTION
)"""
# The reshape's strides and offsets given for the transpose: two fields wrong, two right.
Q2 = """q2 = predict(
    "view.transpose(0, 1)",
    exercise_id="ch02.q2",
    shape=[3, 2],  # PREDICTION
    strides=[2, 1],  # PREDICTION
    offsets=[0, 1, 2, 3, 4, 5],  # PREDICTION
    values=[[10, 20], [11, 21], [12, 22]],  # PREDICTION
)"""
HEADLINES = {
    "q1": "ch02.q1: ✓ all 4 fields right",
    "q2": "ch02.q2: 2 of 4 fields right: try the ✗ fields again",
}


_SCROLL_TO = """async (index) => {
  const panel = window.jupyterapp.shell.currentWidget;
  await panel.content.scrollToItem(index, 'start');
}"""
_OUTPUT_TEXT = """(index) => {
  const outputs = window.jupyterapp.shell.currentWidget.content.widgets[index].model.outputs;
  const texts = [];
  for (let i = 0; i < outputs.length; i += 1) {
    const data = outputs.get(i).toJSON().data || {};
    texts.push([].concat(data['text/plain'] || []).join(''));
  }
  return texts.join('\\n');
}"""


def _check_output(notebook, tag: str):
    # The check(...) cell right under the exercise's cell, scrolled into the window (JupyterLab
    # attaches only the cells near the view).
    index = notebook.cell_index(tag) + 1
    notebook.page.evaluate(_SCROLL_TO, index)
    return notebook.page.locator(f'.jp-Notebook .jp-Cell[data-windowed-list-index="{index}"]')


def _saved_text(notebook, tag: str) -> str:
    # The text/plain of the check cell's outputs, as the notebook model holds them.
    return str(notebook.page.evaluate(_OUTPUT_TEXT, notebook.cell_index(tag) + 1))


def _command(notebook, command: str, args: dict | None = None) -> None:
    notebook.page.evaluate(
        "([c, a]) => window.jupyterapp.commands.execute(c, a)", [command, args or {}]
    )


def _shot(locator, name: str) -> Path:
    SHOTS.mkdir(exist_ok=True)
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    locator.screenshot(path=str(path))
    (OUTPUT_DIR / path.name).write_bytes(path.read_bytes())
    return path


def test_two_text_answers_survive_a_save_and_a_new_kernel_and_count_everywhere(
    open_lab_notebook, lab_server, browser_context, tmp_path: Path
) -> None:
    # What llmfs start sets (lab_settings): widget state is saved with the notebook.
    plugin = lab_server.root.parent / "home" / "settings" / "@jupyter-widgets"
    (plugin / "jupyterlab-manager").mkdir(parents=True, exist_ok=True)
    (plugin / "jupyterlab-manager" / "plugin.jupyterlab-settings").write_text(
        json.dumps({"saveState": True})
    )
    student = json.loads((REPO / "notebooks" / NAME).read_text(encoding="utf-8"))
    notebook = open_lab_notebook(NAME, student)
    page = notebook.page
    page.set_viewport_size({"width": 900, "height": 1000})
    notebook.set_cell_source("exercise:ch02.q1", Q1)
    notebook.set_cell_source("exercise:ch02.q2", Q2)
    state = notebook.run_all(timeout_s=300)
    assert state["errors"] == [] and state["kernel"] == "idle", state

    for key, tag in (("q1", "exercise:ch02.q1"), ("q2", "exercise:ch02.q2")):
        assert _saved_text(notebook, tag).startswith(HEADLINES[key])
    q2 = _check_output(notebook, "exercise:ch02.q2")
    q2.get_by_text(HEADLINES["q2"]).wait_for(timeout=30_000)
    text = q2.inner_text()
    assert "✗ strides: [2, 1]" in text and "row-major strides" in text and "[1, 3]" not in text
    # Readable at 900 px: the verdict comes first and nothing runs off to the right.
    area = q2.locator(".llmfs-comparison")
    box, headline = area.bounding_box(), area.locator(".llmfs-headline").bounding_box()
    assert box is not None and headline is not None
    assert headline["y"] <= box["y"] + 40
    assert page.evaluate(
        "() => [...document.querySelectorAll('.llmfs-comparison')]"
        ".every((e) => e.scrollWidth <= e.clientWidth + 1)"
    )
    assert _shot(q2, "check_verdict_900_light").stat().st_size > 10_000
    _command(notebook, "apputils:change-theme", {"theme": "JupyterLab Dark"})
    page.wait_for_selector('body[data-jp-theme-light="false"]', state="attached", timeout=30_000)
    time.sleep(1)  # the theme's stylesheet applies after the attribute changes
    assert _shot(q2, "check_verdict_900_dark").stat().st_size > 10_000
    _command(notebook, "apputils:change-theme", {"theme": "JupyterLab Light"})

    saved = lab_server.root / NAME
    _command(notebook, "docmanager:save")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and HEADLINES["q2"] not in saved.read_text("utf-8"):
        time.sleep(0.2)
    assert HEADLINES["q2"] in saved.read_text("utf-8")
    notebook.close()  # the page closes and the kernel is shut down

    again = open_notebook(browser_context, lab_server, NAME)  # a new kernel
    try:
        for key, tag in (("q1", "exercise:ch02.q1"), ("q2", "exercise:ch02.q2")):
            assert _saved_text(again, tag).startswith(HEADLINES[key])
            output = _check_output(again, tag)
            output.get_by_text(HEADLINES[key]).wait_for(timeout=30_000)
        assert again.cell_source("exercise:ch02.q2") == Q2
        # Saved widget views draw from the notebook's widget state: the first storage diagram
        # after q1 shows what it showed when saved (here the sentence that holds back q2's
        # answer), although the new kernel never made its model.
        saved_notebook = json.loads(saved.read_text("utf-8"))
        state = saved_notebook["metadata"]["widgets"]["application/vnd.jupyter.widget-state+json"]
        assert state["state"], "the saved notebook holds no widget state"
        diagram = next(
            k
            for k, cell in enumerate(saved_notebook["cells"])
            if k > again.cell_index("exercise:ch02.q1")
            and any(
                "application/vnd.jupyter.widget-view+json" in output.get("data", {})
                for output in cell.get("outputs", [])
            )
        )
        again.page.evaluate(_SCROLL_TO, diagram)
        shown = again.page.locator(f'.jp-Cell[data-windowed-list-index="{diagram}"]')
        shown.wait_for(timeout=30_000)
        # The widget manager restores the saved models, then the view draws: up to 30 s on a
        # busy machine (a fixed 3 s was not always enough).
        restored = shown.locator(".llmfs-storage-diagram")
        deadline = time.monotonic() + 30
        while restored.count() == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        _shot(shown, "diagram_after_reopen")
        assert restored.count() == 1, shown.inner_text()
        assert restored.inner_text().strip() != ""
        assert shown.get_by_text("Error displaying widget").count() == 0
        assert again.page.get_by_text("model not found").count() == 0
    finally:
        again.close()

    # llmfs check and llmfs grade read the same record from the saved file.
    manifest = load_manifest()
    progress = check_notebook(manifest, saved, Limits(cell_timeout=60))
    rows = {row.exercise: row for row in progress.exercises}
    assert (rows["ch02.q1"].answered, rows["ch02.q1"].right) == (True, True)
    assert (rows["ch02.q2"].answered, rows["ch02.q2"].right) == (True, False)
    assert sorted(rows["ch02.q2"].wrong_fields) == ["offsets", "strides"]
    submissions = tmp_path / "submissions"
    submissions.mkdir()
    (submissions / "learner.ipynb").write_bytes(saved.read_bytes())
    out = tmp_path / "grading"
    argv = ["grade", str(submissions), "--chapter", "ch02", "--seed", "1", "--no-execute"]
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        code = llmfs_main([*argv, "--out", str(out)])
    assert code == 0
    (row,) = csv.DictReader((out / "gradebook.csv").read_text(encoding="utf-8").splitlines())
    q1_points = float(manifest.exercise("ch02.q1").points)
    assert float(row["ch02.q1"]) == q1_points
    assert 0 < float(row["ch02.q2"]) < float(manifest.exercise("ch02.q2").points)
