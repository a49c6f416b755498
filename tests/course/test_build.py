"""`llmfs build`: how a solution notebook becomes the student notebook, and how it fails."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from coursekit import chapter_toml, code, markdown, notebook, write_manifest, write_notebook

from llmfs.course import CourseError
from llmfs.course import build as course_build
from llmfs.course.build import (
    render_notebook,
    stale_notebooks,
    student_code,
    student_markdown,
    student_notebook,
)
from llmfs.course.exercises.reveals import REVEALS_OFF_SOURCE, REVEALS_OFF_TAG
from llmfs.course.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]

FUNCTION_SOLUTION = """\
def compute_strides(shape):
    # BEGIN SOLUTION
    # HINT: walk the axes from the last one; each stride is the product of the sizes after it.
    strides = [1] * len(shape)
    for axis in range(len(shape) - 2, -1, -1):
        strides[axis] = strides[axis + 1] * shape[axis + 1]
    return tuple(strides)
    # END SOLUTION"""


def test_a_region_in_a_function_becomes_hints_and_a_raising_stub() -> None:
    assert student_code(FUNCTION_SOLUTION, "nb cell #1", "ch01.q5") == (
        "def compute_strides(shape):\n"
        "    # HINT: walk the axes from the last one; each stride is the product of the sizes"
        " after it.\n"
        "    # YOUR CODE HERE\n"
        '    raise NotImplementedError("ch01.q5: replace this line with your code")'
    )


def test_a_top_level_region_becomes_its_stub_lines() -> None:
    source = (
        "shape = (2, 3, 4)\n"
        "# BEGIN SOLUTION\n"
        "# STUB: offset = None\n"
        "offset = 1 * 12 + 2 * 4 + 3\n"
        "# END SOLUTION\n"
        "print(offset)"
    )
    assert student_code(source, "nb") == (
        "shape = (2, 3, 4)\n# YOUR CODE HERE\noffset = None\nprint(offset)"
    )


def test_prediction_lines_become_blanks_keeping_name_note_and_comma() -> None:
    source = (
        "answer = (585, 65, 13, 1)  # PREDICTION\n"
        "predict(\n"
        '    "ch02.q1",\n'
        "    shape=(3, 2),  # PREDICTION: a tuple of sizes\n"
        ")"
    )
    assert student_code(source, "nb") == (
        "answer = None  # PREDICTION (replace None with your answer)\n"
        "predict(\n"
        '    "ch02.q1",\n'
        "    shape=None,  # PREDICTION: a tuple of sizes (replace None with your answer)\n"
        ")"
    )


def test_a_markdown_region_becomes_hints_and_an_answer_line() -> None:
    source = (
        "Why must this reshape copy?\n\n"
        "<!-- BEGIN SOLUTION -->\n"
        "<!-- HINT: look at the strides after the transpose -->\n"
        "The transposed view is not row-major contiguous.\n"
        "<!-- END SOLUTION -->"
    )
    assert student_markdown(source, "nb") == (
        "Why must this reshape copy?\n\n"
        "> **Hint:** look at the strides after the transpose\n\n"
        "_Your answer here._"
    )


CODE_ERRORS = {
    "nested": (
        "def f():\n    # BEGIN SOLUTION\n    # BEGIN SOLUTION\n    # END SOLUTION",
        r"line 3: nested '# BEGIN SOLUTION'; the region opened at line 2",
    ),
    "unclosed": ("def f():\n    # BEGIN SOLUTION\n    return 1", r"line 2: .* is never closed"),
    "end without begin": ("x = 1\n# END SOLUTION", r"line 2: '# END SOLUTION' without"),
    "malformed begin": ("def f():\n    #BEGIN SOLUTION\n", r"line 2: malformed solution marker"),
    "lower-case end": (
        "def f():\n    # BEGIN SOLUTION\n    # end solution",
        r"line 3: malformed solution marker '# end solution'",
    ),
    "marker with text": (
        "def f():\n    # BEGIN SOLUTION here\n",
        r"line 2: malformed solution marker",
    ),
    "misindented end": (
        "def f():\n    # BEGIN SOLUTION\n    return 1\n# END SOLUTION",
        r"line 4: '# END SOLUTION' is indented 0 columns but its '# BEGIN SOLUTION' \(line 2\)",
    ),
    "top level without stub": (
        "# BEGIN SOLUTION\nx = 1\n# END SOLUTION",
        r"line 3: the solution region opened at line 1 is at top level, so it needs a '# STUB:'",
    ),
    "stub outside region": ("# STUB: x = None", r"line 1: '# STUB:' outside a solution region"),
    "hint lookalike in region": (
        "def f():\n    # BEGIN SOLUTION\n    # Hint - think\n    # END SOLUTION",
        r"line 3: malformed .* in a solution region",
    ),
    "malformed prediction": ("x, y = 1, 2  # PREDICTION", r"line 1: malformed prediction line"),
    "prediction in region": (
        "def f():\n    # BEGIN SOLUTION\n    x = 1  # PREDICTION\n    # END SOLUTION",
        r"line 3: a '# PREDICTION' line cannot sit inside a solution region",
    ),
    "multi-line prediction": (
        "answer = [  # PREDICTION\n    1,\n    2,\n]",
        r"the student version is not valid Python",
    ),
}


@pytest.mark.parametrize("case", sorted(CODE_ERRORS))
def test_malformed_code_markers_are_course_errors_naming_the_place(case: str) -> None:
    source, message = CODE_ERRORS[case]
    with pytest.raises(CourseError, match=message) as error:
        student_code(source, "solutions/ch09_x.ipynb cell #4 (id 'abc')")
    assert str(error.value).startswith("solutions/ch09_x.ipynb cell #4 (id 'abc')")


@pytest.mark.parametrize(
    "source",
    [
        'x = "# BEGIN SOLUTION"',
        "print('# END SOLUTION', end='')",
        'msg = "# PREDICTION"',
        'help_text = """\n# BEGIN SOLUTION\n# STUB: x = None\n# END SOLUTION\n"""',
        "x = f'{1}# BEGIN SOLUTION'",
    ],
)
def test_marker_text_inside_a_string_is_code_not_a_marker(source: str) -> None:
    assert student_code(source, "nb cell #1") == source


def test_a_region_may_contain_marker_text_in_strings() -> None:
    source = (
        "def f():\n"
        "    # BEGIN SOLUTION\n"
        '    """\n'
        "    # HINT: this docstring line is text, not a hint\n"
        '    """\n'
        '    return "# END SOLUTION"\n'
        "    # END SOLUTION\n"
        "f()"
    )
    assert student_code(source, "nb", "ch01.q1") == (
        "def f():\n"
        "    # YOUR CODE HERE\n"
        '    raise NotImplementedError("ch01.q1: replace this line with your code")\n'
        "f()"
    )


def test_a_marker_after_code_is_refused_rather_than_ignored() -> None:
    # Ignoring it would copy the solution below it into the student notebook.
    with pytest.raises(CourseError, match=r"line 2: malformed solution marker .*follows code"):
        student_code("def f():\n    x = 1  # BEGIN SOLUTION\n    return x", "nb")


def test_markers_are_found_in_code_that_does_not_tokenize() -> None:
    # An unclosed bracket stops the tokenizer; whole comment lines are still markers.
    source = "def f():\n    # BEGIN SOLUTION\n    return (1\n    # END SOLUTION"
    assert student_code(source, "nb", "q") == (
        'def f():\n    # YOUR CODE HERE\n    raise NotImplementedError("q: replace this line '
        'with your code")'
    )


MARKDOWN_ERRORS = {
    "nested": (
        "<!-- BEGIN SOLUTION -->\n<!-- BEGIN SOLUTION -->\n<!-- END SOLUTION -->",
        r"line 2: nested",
    ),
    "unclosed": ("<!-- BEGIN SOLUTION -->\ntext", r"line 1: .* is never closed"),
    "end without begin": ("<!-- END SOLUTION -->", r"line 1: .* without"),
    "code marker in markdown": ("# BEGIN SOLUTION", r"line 1: malformed solution marker"),
}


@pytest.mark.parametrize("case", sorted(MARKDOWN_ERRORS))
def test_malformed_markdown_markers_are_course_errors(case: str) -> None:
    source, message = MARKDOWN_ERRORS[case]
    with pytest.raises(CourseError, match=message):
        student_markdown(source, "nb cell #2")


def _solution() -> dict:
    return notebook(
        markdown("intro", "# Chapter 1\n\nA tensor is a flat buffer."),
        code("setup", "import math", outputs=True),
        code("q1", "answer = (12, 4, 1)  # PREDICTION", tags=["exercise:ch01.q1"], outputs=True),
        code("q2", FUNCTION_SOLUTION, tags=["exercise:ch01.q2"]),
        code("demo", "print(compute_strides((2, 3)))", tags=["solution-only"], outputs=True),
    )


def _manifest(root: Path):
    return load_manifest(
        write_manifest(
            root, chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict"), ("ch01.q2", "implement")])
        )
    )


def test_the_student_notebook_keeps_ids_and_tags_and_clears_outputs(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    student = student_notebook(_solution(), "solutions/ch01_a.ipynb", manifest.chapter("ch01"))
    assert [cell["id"] for cell in student["cells"]] == ["intro", "setup", "q1", "q2"]
    assert student["cells"][2]["metadata"] == {"tags": ["exercise:ch01.q1"]}
    assert student["cells"][1]["metadata"] == {}  # execution timestamps dropped
    for cell in student["cells"][1:]:
        assert cell["outputs"] == [] and cell["execution_count"] is None
    assert student["metadata"]["llmfs"] == {
        "chapter": "ch01",
        "generated_from": "solutions/ch01_a.ipynb",
    }
    assert student["metadata"]["language_info"] == {"name": "python"}
    assert (student["nbformat"], student["nbformat_minor"]) == (4, 5)


def test_rendering_is_deterministic_sorted_and_newline_terminated(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    first = render_notebook(student_notebook(_solution(), "s.ipynb", manifest.chapter("ch01")))
    reordered = _solution()
    reordered["metadata"] = dict(reversed(list(reordered["metadata"].items())))
    second = render_notebook(student_notebook(reordered, "s.ipynb", manifest.chapter("ch01")))
    assert first == second
    assert first.endswith("}\n") and not first.endswith("\n\n")
    data = json.loads(first)
    assert list(data) == sorted(data)
    assert data["cells"][0]["source"] == ["# Chapter 1\n", "\n", "A tensor is a flat buffer."]


def test_an_exercise_cell_cannot_be_solution_only(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    solution = _solution()
    solution["cells"][2]["metadata"]["tags"].append("solution-only")
    with pytest.raises(CourseError, match=r"cell #3 \(id 'q1'\): exercise 'ch01.q1' cannot be"):
        student_notebook(solution, "s.ipynb", manifest.chapter("ch01"))


def test_the_build_refuses_a_solution_that_disagrees_with_the_manifest(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    solution = _solution()
    solution["cells"][3]["metadata"]["tags"] = []
    with pytest.raises(CourseError, match=r"exercise 'ch01\.q2' is in the manifest but no cell"):
        student_notebook(solution, "s.ipynb", manifest.chapter("ch01"))


def test_errors_inside_a_notebook_name_the_notebook_and_the_cell(tmp_path: Path) -> None:
    solution = notebook(markdown("m", "x"), code("broken", "def f():\n    # BEGIN SOLUTION\n"))
    with pytest.raises(CourseError) as error:
        student_notebook(solution, "solutions/ch01_a.ipynb")
    assert str(error.value).startswith("solutions/ch01_a.ipynb cell #2 (id 'broken') line 2:")


def _args(manifest: Path, check: bool) -> argparse.Namespace:
    return argparse.Namespace(manifest=manifest, check=check)


def test_build_writes_then_check_passes_then_detects_stale_and_stray(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest_path = write_manifest(
        tmp_path, chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict"), ("ch01.q2", "implement")])
    )
    write_notebook(tmp_path / "solutions" / "ch01_a.ipynb", _solution())
    assert course_build.main(_args(manifest_path, check=True)) == 1
    assert "notebooks/ch01_a.ipynb: missing" in capsys.readouterr().err

    assert course_build.main(_args(manifest_path, check=False)) == 0
    assert "notebooks/ch01_a.ipynb: written" in capsys.readouterr().out
    assert course_build.main(_args(manifest_path, check=True)) == 0
    assert course_build.main(_args(manifest_path, check=False)) == 0
    assert "notebooks/ch01_a.ipynb: up to date" in capsys.readouterr().out

    student = tmp_path / "notebooks" / "ch01_a.ipynb"
    student.write_text(student.read_text().replace("YOUR CODE HERE", "edited"))
    (tmp_path / "notebooks" / "old_chapter.ipynb").write_text("{}")
    capsys.readouterr()
    assert course_build.main(_args(manifest_path, check=True)) == 1
    err = capsys.readouterr().err
    assert "notebooks/ch01_a.ipynb: differs from what `llmfs build` generates" in err
    assert "notebooks/old_chapter.ipynb: no published chapter of the manifest generates it" in err


def test_build_reports_a_course_error_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest_path = write_manifest(tmp_path, chapter_toml("ch01", "ch01_a", []))
    broken = notebook(code("c1", "# BEGIN SOLUTION\nx = 1"))
    write_notebook(tmp_path / "solutions" / "ch01_a.ipynb", broken)
    assert course_build.main(_args(manifest_path, check=False)) == 2
    assert (
        "llmfs build: solutions/ch01_a.ipynb cell #1 (id 'c1') line 1:" in capsys.readouterr().err
    )


def test_solutions_without_cell_ids_are_refused(tmp_path: Path) -> None:
    manifest_path = write_manifest(tmp_path, chapter_toml("ch01", "ch01_a", []))
    old = notebook(code("c1", "x = 1"))
    old["nbformat_minor"] = 4
    write_notebook(tmp_path / "solutions" / "ch01_a.ipynb", old)
    with pytest.raises(CourseError, match=r"nbformat must be 4\.5 or later"):
        stale_notebooks(load_manifest(manifest_path))


def test_a_student_notebook_runs_unanswered_from_top_to_bottom(tmp_path: Path) -> None:
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")
    manifest = _manifest(tmp_path)
    solution = _solution()
    solution["cells"].append(
        code(
            "check",
            "try:\n    compute_strides((2, 3))\nexcept NotImplementedError as error:\n"
            "    print('not implemented yet:', error)\n"
            "print('not answered yet' if answer is None else answer)",
        )
    )
    text = render_notebook(student_notebook(solution, "s.ipynb", manifest.chapter("ch01")))
    executed = nbclient.execute(nbformat.reads(text, as_version=4), cwd=str(tmp_path))
    printed = "".join(out.get("text", "") for out in executed.cells[-1].outputs)
    assert printed == (
        "not implemented yet: ch01.q2: replace this line with your code\nnot answered yet\n"
    )


def test_committed_student_notebooks_are_what_the_build_generates() -> None:
    manifest = load_manifest(REPO / "course" / "manifest.toml")
    assert stale_notebooks(manifest) == []


def _reveals_off_cells(student: dict) -> list[dict]:
    return [c for c in student["cells"] if REVEALS_OFF_TAG in c["metadata"].get("tags", [])]


def test_a_chapter_marked_reveal_false_is_built_as_graded_work(tmp_path: Path) -> None:
    # The course's setting applies to every chapter; a chapter's own setting wins.
    text = chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict"), ("ch01.q2", "implement")])
    path = write_manifest(
        tmp_path,
        text.replace(
            'objectives = ["Learn ch01"]\n', 'objectives = ["Learn ch01"]\nreveal = false\n'
        ),
    )
    graded = student_notebook(_solution(), "s.ipynb", load_manifest(path).chapter("ch01"))
    (cell,) = _reveals_off_cells(graded)
    assert graded["cells"].index(cell) == 1  # before the first code cell: before any check
    assert cell["source"] == REVEALS_OFF_SOURCE and cell["outputs"] == []
    assert cell["metadata"] == {"deletable": False, "editable": False, "tags": [REVEALS_OFF_TAG]}
    assert graded["metadata"]["llmfs"]["reveal"] is False
    assert [c["id"] for c in graded["cells"]] == ["intro", REVEALS_OFF_TAG, "setup", "q1", "q2"]
    practice = student_notebook(_solution(), "s.ipynb", _manifest(tmp_path / "p").chapter("ch01"))
    assert _reveals_off_cells(practice) == [] and "reveal" not in practice["metadata"]["llmfs"]
    course_wide = write_manifest(tmp_path / "c", text)
    course_wide.write_text(
        course_wide.read_text().replace("format = 1\n", "format = 1\nreveal = false\n", 1)
    )
    assert not load_manifest(course_wide).chapter("ch01").reveal
    overridden = text.replace(
        'objectives = ["Learn ch01"]\n', 'objectives = ["Learn ch01"]\nreveal = true\n'
    )
    both = write_manifest(tmp_path / "o", overridden)
    both.write_text(both.read_text().replace("format = 1\n", "format = 1\nreveal = false\n", 1))
    assert load_manifest(both).chapter("ch01").reveal


@pytest.mark.parametrize("value", ['"no"', "0", "[]"])
def test_reveal_must_be_true_or_false(tmp_path: Path, value: str) -> None:
    text = chapter_toml("ch01", "ch01_a", [])
    path = write_manifest(tmp_path, text.replace("status =", f"reveal = {value}\nstatus =", 1))
    with pytest.raises(CourseError, match=r"reveal must be true or false, got"):
        load_manifest(path)


def test_the_reveals_off_cell_keeps_cell_ids_unique() -> None:
    solution = notebook(code(REVEALS_OFF_TAG, "import math"), code("b", "x = 1"))
    student = student_notebook(solution, "s.ipynb", reveal=False)
    ids = [c["id"] for c in student["cells"]]
    assert len(set(ids)) == len(ids) == 3
    render_notebook(student)  # valid nbformat


def test_build_assignment_writes_graded_notebooks_elsewhere_and_checks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest_path = write_manifest(
        tmp_path, chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict"), ("ch01.q2", "implement")])
    )
    write_notebook(tmp_path / "solutions" / "ch01_a.ipynb", _solution())
    folder = tmp_path / "assignment"
    args = argparse.Namespace(manifest=manifest_path, check=True, assignment=folder)
    assert course_build.main(args) == 1
    assert "missing or stale" in capsys.readouterr().err
    args.check = False
    assert course_build.main(args) == 0
    assert "written (reveals off)" in capsys.readouterr().out
    assert not (tmp_path / "notebooks").exists()  # the practice notebooks are not touched
    built = json.loads((folder / "ch01_a.ipynb").read_text())
    assert built["metadata"]["llmfs"]["reveal"] is False and len(_reveals_off_cells(built)) == 1
    args.check = True
    assert course_build.main(args) == 0
    (folder / "ch01_a.ipynb").write_text("{}")
    assert course_build.main(args) == 1
    capsys.readouterr()
    args.assignment = tmp_path / "no" / "such"
    assert course_build.main(args) == 2
    assert "no such folder" in capsys.readouterr().err
