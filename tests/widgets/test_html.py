"""The HTML renderer: accessible tables whose meaning never depends on colour."""

from __future__ import annotations

import re
from html.parser import HTMLParser

from llmfs.widgets import check, predict
from llmfs.widgets.examples import seed_fixture, seed_trace
from llmfs.widgets.html import render_offsets_html


class Cells(HTMLParser):
    """Collects the visible text of every element carrying a given attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[dict[str, str]] = []
        self.found: list[tuple[dict[str, str], str]] = []

    def handle_starttag(self, tag, attrs):
        self.stack.append({"tag": tag, **{k: v or "" for k, v in attrs}})
        self.found.append((self.stack[-1], ""))

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop()["tag"] != tag:
            pass

    def handle_data(self, data):
        for attrs in self.stack:
            index = next(i for i, (a, _) in enumerate(self.found) if a is attrs)
            self.found[index] = (attrs, self.found[index][1] + data)


def parse(html: str) -> list[tuple[dict[str, str], str]]:
    parser = Cells()
    parser.feed(html)
    return parser.found


def test_the_trace_table_has_a_caption_column_headers_and_row_headers() -> None:
    html = seed_trace()._repr_html_()
    assert "<caption" in html
    assert html.count('<th scope="col"') >= 8
    assert html.count('<th scope="row"') == 8
    assert "<script" not in html


def test_marks_carry_words_not_only_glyphs_or_colour() -> None:
    elements = parse(seed_trace()._repr_html_())
    marks = [(a["data-mark"], a["aria-label"], text) for a, text in elements if "data-mark" in a]
    rows = [m for m in marks][:8]
    assert ("shared", "shared storage of an existing owner", "◇") in rows
    assert ("copy", "new owner (a copy)", "◆") in rows
    assert ("rejected", "rejected request", "×") in rows


def test_rows_show_yes_no_offsets_and_the_violated_conditions() -> None:
    elements = parse(seed_trace()._repr_html_())
    contiguous = [text for a, text in elements if a.get("data-field") == "contiguous"]
    assert contiguous == ["Yes", "Yes", "No", "No", "Yes"]
    offsets = [text for a, text in elements if a.get("data-field") == "offsets"]
    assert offsets[2] == "[0, 3, 1, 4, 2, 5]" and offsets[3] == "[1, 2, 4, 5]"
    conditions = [text for a, text in elements if a.get("data-field") == "condition"]
    assert [c.split(" (")[0] for c in conditions] == [
        "violated: element counts match",
        "violated: reshape without copying",
        "violated: end <= size",
    ]


def test_the_mapping_table_pairs_new_and_source_offsets() -> None:
    elements = parse(seed_trace()._repr_html_())
    new = [a["data-new"] for a, _ in elements if "data-new" in a]
    source = [a["data-source"] for a, _ in elements if "data-source" in a]
    assert list(zip(new, source)) == [("0", "1"), ("1", "2"), ("2", "4"), ("3", "5")]


def test_a_selected_cell_is_marked_with_a_pointer_and_an_outline_without_shifting() -> None:
    html = render_offsets_html(seed_fixture().transpose(0, 1), "base", selected=1)
    selected_rows = re.findall(
        r'<tr data-index="1" data-offset="3" class="llmfs-on">.*?</tr>', html
    )
    assert (
        selected_rows
        and '<span class="llmfs-pointer" aria-hidden="true">▶</span>' in (selected_rows[0])
    )
    # Every row reserves the pointer's room; unselected rows hide it, so nothing moves.
    assert (
        html.count('<span class="llmfs-pointer" aria-hidden="true" style="visibility:hidden">')
        == 5 + 5
    )
    strip_cell = re.findall(r'<td data-offset="3" class="llmfs-on">.*?</td>', html)[0]
    assert strip_cell.endswith("▶</span> 20</td>")
    assert "· not read" not in html  # the transpose reads every offset
    assert render_offsets_html(seed_fixture().view(), strip=False).count("<table") == 1


def test_fragments_carry_the_shared_stylesheet_and_no_inline_colours() -> None:
    html = seed_trace()._repr_html_()
    assert html.startswith('<div class="llmfs llmfs-trace-figure"><style>')
    assert "#dde8ff" not in html and "background:" not in html.split("</style>", 1)[1]


def test_rejected_rows_open_to_the_full_message() -> None:
    html = seed_trace()._repr_html_()
    details = re.findall(r"<details><summary>(.*?)</summary>(.*?)</details>", html)
    assert len(details) == 3
    assert "reshape without copying" in details[1][0]
    assert "not adjacent in storage" in details[1][1]


def test_verdicts_say_right_and_wrong_in_words() -> None:
    base = seed_fixture()
    comparison = check(
        predict("base.transpose(0, 1)", shape=[3, 2], strides=[2, 1]), {"base": base}
    )
    elements = parse(comparison._repr_html_())
    verdicts = {
        a["data-field"]: (a["data-status"], text)
        for a, text in elements
        if a.get("data-status") and a["tag"] == "li"
    }
    assert verdicts["shape"][0] == "right" and "✓ shape: [3, 2]" in verdicts["shape"][1]
    assert verdicts["strides"][0] == "wrong" and "✗ strides: [2, 1]" in verdicts["strides"][1]


def test_html_is_deterministic() -> None:
    assert seed_trace()._repr_html_() == seed_trace()._repr_html_()
