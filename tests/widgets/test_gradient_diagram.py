"""The gradient storage diagram: every storage cell carries the sum its readers send it (equal to
the owner's ``.grad`` from the library's backward), every drawn position its own gradient, and the
three renderings (text, SVG, HTML) show the same numbers; a plain diagram is drawn as before."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import llmfs.tensor as lt
from llmfs.course import CourseError
from llmfs.course.exercise_checks.cases import view_layout
from llmfs.tensor import Tensor, as_strided
from llmfs.widgets import build, gradient_diagram
from llmfs.widgets.svg import render_diagram_html, render_diagram_svg, svg_of_html


def owner_grad(
    owner_values: np.ndarray, pieces: list[tuple[list[int], list[int], int, np.ndarray]]
):
    """The library's own backward: every view of a fresh leaf, weighted by its gradient."""
    leaf = Tensor.from_numpy(owner_values, requires_grad=True)
    loss = None
    for shape, strides, base, grad in pieces:
        term = lt.sum(as_strided(leaf, shape, strides, base) * Tensor.from_numpy(grad))
        loss = term if loss is None else loss + term
    assert loss is not None
    loss.backward()
    return leaf.grad.to_numpy().tolist()


@pytest.mark.parametrize("seed", range(25))
def test_the_storage_sums_equal_the_owners_grad_from_backward(seed: int) -> None:
    rng = random.Random(seed)
    shape, strides, base, size = view_layout(rng, negative=True, scalar=0.1, empty=0.1)
    if rng.random() < 0.5:  # a broadcast axis, so several positions meet in one cell
        shape.insert(0, 3)
        strides.insert(0, 0)
    other = view_layout(random.Random(seed + 1000), negative=True)
    values = np.arange(float(size))
    owner = Tensor.from_numpy(values)
    grads = np.random.default_rng(seed).integers(-4, 5, shape).astype(float)
    items = [("view", as_strided(owner, shape, strides, base), grads)]
    pieces = [(shape, strides, base, grads)]
    if other[3] == size:  # a second view of the same owner adds into the same cells
        g2 = np.random.default_rng(seed + 1).integers(-4, 5, other[0]).astype(float)
        items.append(("other", as_strided(owner, other[0], other[1], other[2]), g2))
        pieces.append((other[0], other[1], other[2], g2))
    diagram = gradient_diagram(items, owners={"x": owner})
    strip = diagram.strip("x")
    expected = owner_grad(values, pieces)
    for slot in strip.slots:
        if slot.offset is not None:
            assert slot.grad == expected[slot.offset]
    for panel, (_, view, grad) in zip(diagram.panels, items):
        for cell in panel.cells:
            assert cell.grad == grad.reshape(-1)[cell.index]
            assert cell.offset == list(view.logical_offsets())[cell.index]


def overlapping() -> tuple[Tensor, list]:
    x = Tensor.from_numpy(np.array([1.0, 2.0, 3.0, 4.0]))
    return x, [("x[:3]", x[:3], [2.0, 3.0, 4.0]), ("x[1:]", x[1:], [1.0, 2.0, 3.0])]


def test_the_text_form_has_a_grad_row_and_spells_out_each_sum() -> None:
    x, items = overlapping()
    text = repr(gradient_diagram(items, owners={"x": x}))
    assert re.search(r"grad\s+2\s+4\s+6\s+3", text), text
    assert "offset 1 adds 2 gradients: 3 + 1 = 4" in text
    assert "[0] 1 → 0 ∇2" in text


def test_the_svg_draws_an_arrow_per_position_and_shades_the_cells_that_received() -> None:
    x, items = overlapping()
    diagram = gradient_diagram(items, owners={"x": x})
    svg = render_diagram_svg(diagram)
    assert svg.count('class="llmfs-grad-arrow"') == 6  # one per drawn position
    assert svg.count("llmfs-slot llmfs-grad-on") == 4
    assert re.findall(
        r'data-offset="(\d)" data-status="read" data-readers="[^"]*" data-grad="(\d)"', svg
    ) == [
        ("0", "2"),
        ("1", "4"),
        ("2", "6"),
        ("3", "3"),
    ]
    assert "∇6" in svg and "the sum of 2 positions" in svg
    assert svg_of_html(render_diagram_html(diagram)) == svg


def test_a_cell_no_view_reads_gets_zero_and_is_not_shaded() -> None:
    x = Tensor.from_numpy(np.arange(10.0))
    svg = render_diagram_svg(gradient_diagram([("x[1::3]", x[1::3], [10.0, 20.0, 30.0])]))
    assert svg.count("llmfs-slot llmfs-grad-on") == 3
    assert 'data-offset="0" data-status="unread" data-readers="" data-grad="0"' in svg


def test_a_plain_diagram_is_drawn_without_any_gradient() -> None:
    x, items = overlapping()
    plain = build([(label, view) for label, view, _ in items], owners={"x": x})
    assert not plain.is_gradient
    svg = render_diagram_svg(plain)
    assert "llmfs-grad" not in svg and "data-grad" not in svg and "∇" not in svg
    assert "grad " not in repr(plain)


def test_a_gradient_of_the_wrong_shape_is_refused_naming_both_shapes() -> None:
    x = Tensor.from_numpy(np.arange(4.0))
    with pytest.raises(CourseError, match=r"shape \[2\], the view \[3\]"):
        gradient_diagram([("x[:3]", x[:3], [1.0, 2.0])])


def test_a_gradient_may_be_a_tensor() -> None:
    x = Tensor.from_numpy(np.arange(3.0))
    diagram = gradient_diagram([("x.expand", x.expand([2, 3]), Tensor.from_numpy(np.ones((2, 3))))])
    assert [slot.grad for slot in diagram.strip("base").slots] == [2.0, 2.0, 2.0]
