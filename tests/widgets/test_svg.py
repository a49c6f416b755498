"""The static SVG of the storage diagram: deterministic, complete, readable without scripts."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from llmfs.tensor import Tensor
from llmfs.widgets.diagram import build, diagram
from llmfs.widgets.examples import seed_fixture
from llmfs.widgets.style import DARK, LIGHT, STYLESHEET, contrast, fallback
from llmfs.widgets.svg import render_diagram_html, render_diagram_svg, svg_of_html

SVG = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(SVG + tag) if cls in e.get("class", "").split()]


def slice_diagram():
    return diagram(
        seed_fixture(),
        ["sliced = base.view().slice(1, 1, 3)", "sliced.materialize()", "sliced.reshape([4])"],
    )


def test_the_svg_is_well_formed_and_byte_identical_across_runs() -> None:
    first = render_diagram_svg(slice_diagram())
    assert first == render_diagram_svg(slice_diagram())
    root = parse(first)
    assert root.get("class") == "llmfs-diagram"
    assert "script" not in first


def test_one_solid_line_per_logical_cell_and_one_dashed_line_per_copied_offset() -> None:
    root = parse(render_diagram_svg(slice_diagram()))
    cells = by_class(root, "g", "llmfs-cell")
    reads = by_class(root, "line", "llmfs-read")
    copies = by_class(root, "line", "llmfs-copy-line")
    assert len(cells) == len(reads) == 8  # the slice's 4 cells and the copy's 4
    assert {line.get("data-cell") for line in reads} == {c.get("data-cell") for c in cells}
    assert [(c.get("data-offset"), c.get("data-source-offset")) for c in copies] == [
        ("0", "1"), ("1", "2"), ("2", "4"), ("3", "5"),
    ]  # fmt: skip
    assert all(c.get("stroke-dasharray") for c in copies)


def test_cells_carry_value_coordinate_offset_and_formula() -> None:
    root = parse(render_diagram_svg(slice_diagram()))
    cell = next(c for c in by_class(root, "g", "llmfs-cell") if c.get("data-cell") == "p0c2")
    assert cell.get("data-coordinate") == "[1,0]"
    assert cell.get("data-offset") == "4"
    assert cell.get("data-formula") == "1 + 1·3 + 0·1 = 4"
    texts = [t.text for t in cell.iter(SVG + "text")]
    assert "21" in texts and "[1,0]" in texts
    assert cell.find(SVG + "title").text == "[1,0] reads offset 4: 1 + 1·3 + 0·1 = 4 (value 21)"


def test_copy_strip_unread_offsets_and_the_gap_are_drawn_with_words() -> None:
    svg = render_diagram_svg(slice_diagram())
    root = parse(svg)
    strips = by_class(root, "g", "llmfs-strip")
    assert [s.get("data-strip") for s in strips] == ["base", "copy 1"]
    assert "llmfs-strip-copy" in strips[1].get("class")
    skipped = [s for s in by_class(root, "g", "llmfs-slot") if s.get("data-status") == "skipped"]
    assert [s.get("data-offset") for s in skipped] == ["3"]
    assert "offset 3 is skipped: not contiguous" in svg
    assert "◆ copy 1: new owner made by sliced.materialize(), 4 values" in svg
    [gap] = by_class(root, "g", "llmfs-gap-mark")
    assert gap.get("data-gap") == "2 4"
    assert "× gap 2→4: no single stride" in svg


def test_a_long_strip_is_one_row_that_scrolls_not_wraps() -> None:
    view = Tensor.arange(40).reshape([8, 5]).slice(1, 0, 5, 2)
    svg = render_diagram_svg(build([view]))
    root = parse(svg)
    ys = {s.find(SVG + "rect").get("y") for s in by_class(root, "g", "llmfs-slot")}
    assert len(ys) == 1 and len(by_class(root, "g", "llmfs-slot")) == 40
    assert float(root.get("width")) > 40 * 50
    html = render_diagram_html(build([view]))
    assert '<div class="llmfs-diagram-scroll">' in html
    assert ".llmfs-diagram-scroll{overflow-x:auto" in STYLESHEET


def test_large_views_draw_a_bounded_number_of_elements() -> None:
    view = Tensor.arange(10**6).reshape([1000, 1000]).transpose(0, 1)
    svg = render_diagram_svg(build([view]))
    assert len(svg) < 60_000
    assert "… 999988 more" in svg


def test_the_html_form_carries_the_stylesheet_and_the_notes_in_words() -> None:
    html = render_diagram_html(slice_diagram())
    assert html.startswith('<div class="llmfs llmfs-diagram-static"><style>')
    # The SVG is an image (a sanitizer keeps it), described by its alt text.
    assert "<svg" not in html and svg_of_html(html) == render_diagram_svg(slice_diagram())
    assert 'alt="◇ base: storage, 6 values; ◆ copy 1: new owner' in html
    assert "<li>offset 3 is skipped: not contiguous</li>" in html
    assert re.search(r"<li>× sliced\.reshape\(\[4\]\): reshape to \[4\]", html)


def test_theme_colours_have_enough_contrast_in_light_and_dark() -> None:
    for theme in (LIGHT, DARK):
        fg = fallback(theme["--llmfs-fg"])
        for background in (
            "--llmfs-bg",
            "--llmfs-cell",
            "--llmfs-shared",
            "--llmfs-copy",
            "--llmfs-head",
            "--llmfs-accent-bg",
        ):
            assert contrast(fg, fallback(theme[background])) >= 4.5, (background, theme)
        muted = fallback(theme["--llmfs-muted"])
        for background in ("--llmfs-bg", "--llmfs-shared", "--llmfs-copy", "--llmfs-cell"):
            assert contrast(muted, fallback(theme[background])) >= 4.5, (background, theme)
        accent = fallback(theme["--llmfs-accent"])
        assert contrast(accent, fallback(theme["--llmfs-bg"])) >= 4.5
    assert 'body[data-jp-theme-light="false"] .llmfs{' in STYLESHEET
    assert ":focus-visible" in STYLESHEET and "line-height:1.4" in STYLESHEET


def test_lines_lie_under_the_cells_and_take_no_clicks() -> None:
    # A click on a cell must reach the cell: every line sits in one layer drawn before any
    # strip or cell, and that layer (and each line, by the stylesheet) takes no pointer events.
    transposed = diagram(seed_fixture(), ["view = base.view().transpose(0, 1)"])
    for drawn in (slice_diagram(), transposed):
        root = parse(render_diagram_svg(drawn))
        layers = by_class(root, "g", "llmfs-lines")
        assert len(layers) == 1 and layers[0].get("pointer-events") == "none"
        lines = by_class(root, "line", "llmfs-line")
        assert lines and all(line in list(layers[0]) for line in lines)
        order = list(root)
        first_cell_or_slot = min(
            order.index(child)
            for child in order
            if {"llmfs-panel", "llmfs-strip"} & set(child.get("class", "").split())
        )
        assert order.index(layers[0]) < first_cell_or_slot
    rules = re.findall(r"([^{}]*)\{([^}]*)\}", STYLESHEET)
    assert any(
        ".llmfs-line" in selector and "pointer-events:none" in body.replace(" ", "")
        for selector, body in rules
    )
