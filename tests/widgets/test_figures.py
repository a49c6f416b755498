"""``llmfs figures``: every committed figure is what the library draws now, byte for byte."""

from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib", reason="figures need matplotlib")

from llmfs.widgets import figures  # noqa: E402

COMMITTED = figures.default_folder()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One generation of every figure, shared by the tests of this module."""
    folder = tmp_path_factory.mktemp("fresh")
    figures.generate(folder)
    return folder


def test_two_generations_give_identical_bytes(fresh: Path, tmp_path: Path) -> None:
    figures.generate(tmp_path)
    assert figures.differences(tmp_path, fresh) == []


def test_every_figure_is_written_as_svg_and_text_and_matplotlib_ones_also_as_png(
    fresh: Path,
) -> None:
    names = sorted(p.name for p in fresh.iterdir())
    expected = sorted(
        [f"{n}{s}" for n in figures.FIGURES for s in figures.suffixes(n)] + [figures.INDEX]
    )
    assert names == expected
    assert set(figures.FIGURES) >= {
        "trace_table",
        "reshape_vs_transpose",
        "slice_materialize",
        "broadcast_zero_strides",
        "split_heads",
    }
    assert figures.suffixes("slice_materialize") == (".svg", ".txt")


def test_storage_figures_are_the_notebooks_storage_diagram_at_a_readable_size(fresh: Path) -> None:
    svg = (fresh / "slice_materialize.svg").read_text()
    assert svg.startswith('<svg class="llmfs-diagram"')
    sizes = [int(size) for size in re.findall(r'font-size="(\d+)"', svg)]
    assert min(sizes) >= 10
    # One drawing unit is one pixel (width equals the viewBox's), so 13 px text is 13 px.
    width, height = re.search(r'width="([\d.]+)" height="([\d.]+)"', svg).groups()
    assert f'viewBox="0 0 {width} {height}"' in svg
    # A [3, 2] view is drawn as 3 rows of 2 cells, each cell with its coordinate.
    transpose = (fresh / "reshape_vs_transpose.svg").read_text()
    assert transpose.count('data-panel="1" data-index=') == 6
    assert 'data-coordinate="[2,1]"' in transpose
    for name in ("slice_materialize", "reshape_vs_transpose", "split_heads"):
        assert "offset" in (fresh / f"{name}.txt").read_text()


def test_files_carry_no_dates_or_version_strings(fresh: Path) -> None:
    for path in fresh.iterdir():
        data = path.read_bytes()
        assert b"<dc:date>" not in data and b"Matplotlib v" not in data, path.name
        if path.suffix == ".png":
            assert b"Software" not in data, path.name


def test_the_text_versions_of_the_committed_figures_are_not_stale(fresh: Path) -> None:
    for name in figures.FIGURES:
        text = (fresh / f"{name}.txt").read_text()
        assert (COMMITTED / f"{name}.txt").read_text() == text, f"{name}.txt is stale"


def test_the_committed_figures_are_not_stale(fresh: Path) -> None:
    drawn_with = json.loads((COMMITTED / figures.INDEX).read_text())["matplotlib"]
    if drawn_with != matplotlib.__version__:
        pytest.skip(
            f"figures/ was drawn with matplotlib {drawn_with}, this is {matplotlib.__version__}: "
            f"PNG/SVG bytes are only comparable with the same renderer"
        )
    assert figures.differences(COMMITTED, fresh) == [], "run `llmfs figures`, commit figures/"


def test_differences_name_a_changed_a_missing_and_an_extra_file(
    fresh: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "figures"
    shutil.copytree(fresh, copy)
    (copy / "trace_table.txt").write_text("old\n")
    (copy / "slice_materialize.svg").unlink()
    (copy / "leftover.svg").write_text("<svg/>")
    expected = ["leftover.svg", "slice_materialize.svg", "trace_table.txt"]
    assert figures.differences(copy, fresh) == expected


def test_the_check_option_reports_stale_figures(fresh: Path, tmp_path: Path, capsys) -> None:
    copy = tmp_path / "figures"
    shutil.copytree(fresh, copy)
    (copy / "trace_table.svg").write_text("<svg/>")
    assert figures.main(argparse.Namespace(out=copy, check=True)) == 1
    assert "trace_table.svg" in capsys.readouterr().err


def test_the_slice_figure_text_holds_the_seed_mapping() -> None:
    text = (COMMITTED / "slice_materialize.txt").read_text()
    assert "new offsets [0, 1, 2, 3] -> source offsets [1, 2, 4, 5]" in text
    assert "offset 3 is skipped: not contiguous" in text
    assert "no single stride jumps both" in text
