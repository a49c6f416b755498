"""The names table: every public llmfs name beside its NumPy and PyTorch spelling, kept in one
place (the README) and copied into the learner guide by ``llmfs build``."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import llmfs.tensor as tensor_api
from llmfs.course import CourseError
from llmfs.course.names_table import BEGIN, END, GUIDE, README, stale_guide, table_block
from llmfs.tensor import Tensor, TensorError, TensorView

ROOT = Path(__file__).resolve().parents[2]
_CELL = re.compile(r"(?<!\\)\|")


def llmfs_column() -> str:
    """The text of the table's llmfs column, every row joined."""
    block = table_block((ROOT / README).read_text(encoding="utf-8"), README)
    rows = [line for line in block.splitlines() if line.startswith("| ")][2:]  # header, rule
    cells = [_CELL.split(row) for row in rows]
    assert all(len(row) == 6 for row in cells), "every row has 4 columns"
    return "\n".join(row[2] for row in cells)


def public_names() -> list[str]:
    """Every name a learner can use: the package's exports (less the error classes, which
    errors.py lists) and the public attributes of Tensor and TensorView."""
    names = [
        name
        for name in tensor_api.__all__
        if not (
            inspect.isclass(getattr(tensor_api, name))
            and issubclass(getattr(tensor_api, name), TensorError)
        )
    ]
    for cls in (TensorView, Tensor):
        names += [name for name in dir(cls) if not name.startswith("_")]
    return sorted(set(names))


def test_every_public_name_of_the_tensor_library_is_in_the_table() -> None:
    column = llmfs_column()
    missing = [name for name in public_names() if not re.search(rf"\b{re.escape(name)}\b", column)]
    assert missing == [], f"add these names to the README's names table: {missing}"


def test_the_learner_guide_shows_the_readmes_table_unchanged() -> None:
    assert stale_guide(ROOT) == []


def test_a_guide_that_drifted_is_reported_and_rewritten_by_the_build(tmp_path: Path) -> None:
    from llmfs.course.names_table import write_guide

    (tmp_path / "course").mkdir()
    (tmp_path / README).write_text(f"intro\n{BEGIN}\n| a | b |\n{END}\nrest\n", encoding="utf-8")
    (tmp_path / GUIDE).write_text(f"guide\n{BEGIN}\nold\n{END}\nmore\n", encoding="utf-8")
    assert stale_guide(tmp_path) == [
        f"{GUIDE}: its names table differs from the one in {README} (run `llmfs build`)"
    ]
    assert write_guide(tmp_path) == f"{GUIDE}: written"
    assert (tmp_path / GUIDE).read_text(encoding="utf-8") == (
        f"guide\n{BEGIN}\n| a | b |\n{END}\nmore\n"
    )
    assert stale_guide(tmp_path) == [] and write_guide(tmp_path) == f"{GUIDE}: up to date"


@pytest.mark.parametrize(
    "text",
    ["no markers", f"{BEGIN}\nonly the start", f"{END}\n{BEGIN}", f"{BEGIN}\n{BEGIN}\n{END}"],
)
def test_a_table_without_exactly_one_ordered_pair_of_markers_is_a_course_error(text: str) -> None:
    with pytest.raises(CourseError, match="names table"):
        table_block(text, "README.md")


def test_a_tree_without_a_readme_has_nothing_to_check(tmp_path: Path) -> None:
    assert stale_guide(tmp_path) == []
