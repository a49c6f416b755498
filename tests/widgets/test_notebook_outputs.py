"""Outputs in a notebook kernel are exactly the text renderer's: what notebook validation compares.

A kernel is a different process, so equal text there and here shows that nothing in the output
depends on memory addresses, ids or timing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="needs nbformat")
nbclient = pytest.importorskip("nbclient", reason="needs nbclient")
pytest.importorskip("ipywidgets", reason="needs ipywidgets")

from llmfs.widgets import (  # noqa: E402
    OffsetTable,
    StorageDiagram,
    TraceTable,
    check,
    predict,
    trace,
)
from llmfs.widgets.examples import SEED_OPERATIONS, seed_fixture  # noqa: E402

SETUP = (
    "from llmfs.widgets import OffsetTable, StorageDiagram, TraceTable, check\n"
    "from llmfs.widgets import predict, trace\n"
    "from llmfs.widgets.examples import SEED_OPERATIONS, seed_fixture\n"
    "base = seed_fixture()"
)
CELLS = [
    "trace(base, SEED_OPERATIONS)",
    "check(predict('base.transpose(0, 1)', shape=[3, 2], strides=None, offsets=[0, 1]))",
    "OffsetTable(base.transpose(0, 1))",
    "TraceTable(trace(base, SEED_OPERATIONS))",
    "StorageDiagram(base, ['s = base.view().slice(1, 1, 3)', 's.materialize()', 's.reshape([4])'])",
]
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def test_kernel_outputs_equal_the_text_and_html_made_here(tmp_path: Path) -> None:
    cells = [nbformat.v4.new_code_cell(source) for source in [SETUP, *CELLS]]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    nbclient.NotebookClient(
        notebook, timeout=60, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [cell.outputs for cell in notebook.cells[1:]]
    assert all(len(cell) == 1 and cell[0]["output_type"] == "execute_result" for cell in outputs)

    base = seed_fixture()
    scope = {"base": base}
    expected = [
        trace(base, SEED_OPERATIONS),
        check(predict("base.transpose(0, 1)", shape=[3, 2], strides=None, offsets=[0, 1]), scope),
        OffsetTable(base.transpose(0, 1)),
        TraceTable(trace(base, SEED_OPERATIONS)),
        StorageDiagram(
            base, ["s = base.view().slice(1, 1, 3)", "s.materialize()", "s.reshape([4])"]
        ),
    ]
    for (output,), made_here in zip(outputs, expected):
        assert output["data"]["text/plain"] == repr(made_here)
    assert outputs[0][0]["data"]["text/html"] == expected[0]._repr_html_()
    assert outputs[1][0]["data"]["text/html"] == expected[1]._repr_html_()
    assert all(WIDGET_VIEW in cell[0]["data"] for cell in outputs[2:])
    # A check is saved output only (text and HTML, no widget): it reads the same after a
    # restart, with the kernel closed and in a static export.
    assert set(outputs[1][0]["data"]) == {"text/plain", "text/html"}
    # Without the widget's script, the diagram is its static SVG, identical in any process.
    bundle = expected[4]._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    assert outputs[4][0]["data"]["text/html"] == data["text/html"]
