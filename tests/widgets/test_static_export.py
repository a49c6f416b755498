"""A static HTML export (nbconvert, no kernel, no network) shows the storage diagram as SVG.

Without the widget's script (an exported page, nbval, a terminal) a StorageDiagram output still
carries its static SVG (``text/html``) and its text (``text/plain``), and nbconvert picks the SVG
because no widget state is stored.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat", reason="the export needs nbformat (.[course])")
nbconvert = pytest.importorskip("nbconvert", reason="the export needs nbconvert (jupyterlab)")
pytest.importorskip("anywidget", reason="the storage diagram widget needs anywidget (.[course])")

from llmfs.widgets import StorageDiagram  # noqa: E402
from llmfs.widgets.examples import seed_fixture  # noqa: E402
from llmfs.widgets.svg import svg_of_html  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CHAPTER_2 = REPO / "solutions" / "ch02_shared_storage_views.ipynb"


def export(notebook: dict) -> str:
    node = nbformat.reads(json.dumps(notebook), as_version=4)
    html, _ = nbconvert.HTMLExporter().from_notebook_node(node)
    return html


def svg_outside_scripts(html: str) -> list[str]:
    """The storage-diagram SVGs of the page: the images outside any script, decoded."""
    without_scripts = re.sub(r"<script\b.*?</script>", "", html, flags=re.S)
    images = re.findall(r"<img[^>]*llmfs-diagram-image[^>]*>", without_scripts)
    return [svg_of_html(image) for image in images]


def test_a_diagram_output_exports_as_its_static_svg() -> None:
    widget = StorageDiagram(
        seed_fixture(), ["sliced = base.view().slice(1, 1, 3)", "sliced.materialize()"]
    )
    bundle = widget._repr_mimebundle_()
    data = bundle[0] if isinstance(bundle, tuple) else bundle
    cell = nbformat.v4.new_code_cell("StorageDiagram(...)")
    cell.outputs = [nbformat.v4.new_output("display_data", data=data)]
    notebook = nbformat.v4.new_notebook(cells=[cell])
    html = export(json.loads(nbformat.writes(notebook)))
    [svg] = svg_outside_scripts(html)
    assert svg.count('class="llmfs-line llmfs-read"') == 8
    assert "offset 3 is skipped: not contiguous" in html


def test_the_static_html_export_of_chapter_2_shows_the_static_svg() -> None:
    notebook = json.loads(CHAPTER_2.read_text(encoding="utf-8"))
    sources = ["".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code"]
    if not any("StorageDiagram(" in source for source in sources):
        pytest.skip("chapter 2 has no StorageDiagram cell yet")
    assert "widgets" not in notebook["metadata"], "stored widget state would hide the SVG"
    html = export(notebook)
    drawn = svg_outside_scripts(html)
    diagram_cells = sum("StorageDiagram(" in source for source in sources)
    assert len(drawn) >= diagram_cells
    for svg in drawn:
        assert svg.count('class="llmfs-line llmfs-read"') == svg.count('class="llmfs-cell"')
