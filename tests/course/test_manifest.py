"""The manifest loader: the repository's manifest, its validation rules, and notebook agreement."""

from __future__ import annotations

from pathlib import Path

import pytest
from coursekit import chapter_toml, code, notebook, write_manifest, write_notebook

from llmfs.course import CourseError
from llmfs.course.manifest import load_manifest
from llmfs.course.notebooks import manifest_disagreements

REPO = Path(__file__).resolve().parents[2]


def test_repository_manifest_lists_the_chapters_in_order() -> None:
    manifest = load_manifest(REPO / "course" / "manifest.toml")
    chapters = [(c.id, c.title) for c in manifest.chapters]
    assert chapters[:4] == [
        ("ch01", "Storage, shape and strides"),
        ("ch02", "Shared-storage views and explicit copying"),
        ("ch03", "Merge, split, steps and no-copy reshape"),
        ("ch04", "Broadcasting and reductions over named axes"),
    ]
    assert ("ch07", "Attention heads over shared storage") in chapters
    assert chapters == sorted(chapters)
    assert ("ch08", "A tiny GPT that works") in chapters
    assert ("ch10", "Train the adder") in chapters
    assert ("ch05", "Elementwise ops and Metal kernels") in chapters
    assert manifest.root == REPO
    assert all(chapter.objectives for chapter in manifest.chapters)


def test_default_manifest_of_a_checkout_is_the_repository_manifest() -> None:
    assert load_manifest().path.resolve() == (REPO / "course" / "manifest.toml").resolve()


def test_repository_notebooks_agree_with_the_manifest() -> None:
    manifest = load_manifest(REPO / "course" / "manifest.toml")
    assert manifest_disagreements(manifest) == []


def test_exercises_are_found_by_id_and_carry_their_cell_tag(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path, chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict"), ("ch01.q2", "implement")])
    )
    manifest = load_manifest(path)
    exercise = manifest.exercise("ch01.q2")
    assert (exercise.chapter, exercise.kind, exercise.points) == ("ch01", "implement", 1)
    assert exercise.tag == "exercise:ch01.q2"
    assert [e.id for e in manifest.exercises()] == ["ch01.q1", "ch01.q2"]
    assert manifest.root == tmp_path.resolve()
    with pytest.raises(CourseError, match=r"no exercise with id 'ch01\.q9'"):
        manifest.exercise("ch01.q9")
    with pytest.raises(CourseError, match="no chapter with id 'ch07'"):
        manifest.chapter("ch07")


def test_an_unchanged_manifest_is_parsed_once_and_any_edit_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_manifest(tmp_path, chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict")]))
    first = load_manifest(path)
    assert load_manifest(path) is first  # same text, same path: no second parse
    assert load_manifest(str(path)) is first
    # An edit of the same length (a same-sized file, perhaps the same mtime) is still seen.
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("ch01.q1", "ch01.q7"), encoding="utf-8")
    assert [e.id for e in load_manifest(path).exercises()] == ["ch01.q7"]
    # An edit that breaks the file is an error, never the last good parse.
    path.write_text(text.replace('kind = "predict"', 'kind = "guess"'), encoding="utf-8")
    with pytest.raises(CourseError):
        load_manifest(path)
    path.write_text("[[chapters\n", encoding="utf-8")
    with pytest.raises(CourseError, match="not valid TOML"):
        load_manifest(path)
    path.write_text(text, encoding="utf-8")
    assert [e.id for e in load_manifest(path).exercises()] == ["ch01.q1"]
    # One relative path read from two working folders gives each its own root.
    for name in ("a", "b"):
        write_manifest(tmp_path / name, chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict")]))
    roots = []
    for name in ("a", "b"):
        monkeypatch.chdir(tmp_path / name)
        roots.append(load_manifest(Path("course") / "manifest.toml").root)
    assert roots == [(tmp_path / "a").resolve(), (tmp_path / "b").resolve()]
    # Many courses in turn: each still reads as its own file.
    for number in range(20):
        other = write_manifest(
            tmp_path / f"course{number}",
            chapter_toml("ch01", "ch01_a", [(f"ch01.q{number}", "predict")]),
        )
        assert [e.id for e in load_manifest(other).exercises()] == [f"ch01.q{number}"]
    assert [e.id for e in load_manifest(path).exercises()] == ["ch01.q1"]


BAD_MANIFESTS = {
    "unknown top key": ("format = 1\ncolour = 1\n", r"unknown key\(s\) \['colour'\]"),
    "missing format": ("[[chapters]]\n", "format must be 1"),
    "bad chapter id": (chapter_toml("c1", "c1_a", []), "id must look like 'ch01'"),
    "exercise of another chapter": (
        chapter_toml("ch01", "ch01_a", [("ch02.q1", "predict")]),
        r"exercise 'ch02\.q1': id must be 'ch01\.'",
    ),
    "unknown kind": (
        chapter_toml("ch01", "ch01_a", [("ch01.q1", "guess")]),
        "kind must be one of",
    ),
    "duplicate exercise": (
        chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict"), ("ch01.q1", "explain")]),
        r"duplicate exercise id 'ch01\.q1'",
    ),
    "duplicate chapter": (
        chapter_toml("ch01", "ch01_a", []) + chapter_toml("ch01", "ch01_b", []),
        "duplicate chapter id 'ch01'",
    ),
    "planned with exercises": (
        chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict")], status="planned"),
        "a planned chapter lists no exercises",
    ),
    "bad status": (chapter_toml("ch01", "ch01_a", [], status="draft"), "status must be one of"),
}


@pytest.mark.parametrize("case", sorted(BAD_MANIFESTS))
def test_invalid_manifests_are_course_errors_naming_the_file(tmp_path: Path, case: str) -> None:
    text, message = BAD_MANIFESTS[case]
    path = tmp_path / "course" / "manifest.toml"
    path.parent.mkdir()
    if not text.startswith("format"):
        text = "format = 1\n" + text if case != "missing format" else text
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CourseError, match=message) as error:
        load_manifest(path)
    assert str(path) in str(error.value)


def test_points_must_be_a_non_negative_integer(tmp_path: Path) -> None:
    text = chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict")]).replace(
        "points = 1", "points = true"
    )
    path = write_manifest(tmp_path, text)
    with pytest.raises(CourseError, match="points must be an integer >= 0, got True"):
        load_manifest(path)


def test_notebook_paths_must_sit_in_their_folders_with_one_file_name(tmp_path: Path) -> None:
    text = chapter_toml("ch01", "ch01_a", []).replace(
        'notebook = "notebooks/ch01_a.ipynb"', 'notebook = "notebooks/other.ipynb"'
    )
    with pytest.raises(CourseError, match="must share a file name"):
        load_manifest(write_manifest(tmp_path, text))
    text = chapter_toml("ch01", "ch01_a", []).replace("solutions/", "notebooks/")
    with pytest.raises(CourseError, match=r"solution must be 'solutions/<name>\.ipynb'"):
        load_manifest(write_manifest(tmp_path, text))


def test_missing_and_malformed_files_are_course_errors(tmp_path: Path) -> None:
    with pytest.raises(CourseError, match="the course manifest does not exist"):
        load_manifest(tmp_path / "course" / "manifest.toml")
    path = write_manifest(tmp_path, "[[chapters\n")
    with pytest.raises(CourseError, match="not valid TOML"):
        load_manifest(path)


def _course_with_one_exercise(root: Path) -> Path:
    return write_manifest(root, chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict")]))


def test_agreement_reports_an_exercise_missing_from_a_notebook(tmp_path: Path) -> None:
    manifest = load_manifest(_course_with_one_exercise(tmp_path))
    tagged = notebook(code("c1", "x = 1", tags=["exercise:ch01.q1"]))
    write_notebook(tmp_path / "solutions" / "ch01_a.ipynb", tagged)
    write_notebook(tmp_path / "notebooks" / "ch01_a.ipynb", notebook(code("c1", "x = 1")))
    assert manifest_disagreements(manifest) == [
        "notebooks/ch01_a.ipynb: exercise 'ch01.q1' is in the manifest but no cell is tagged "
        "'exercise:ch01.q1'"
    ]


def test_agreement_reports_a_notebook_exercise_missing_from_the_manifest(tmp_path: Path) -> None:
    manifest = load_manifest(_course_with_one_exercise(tmp_path))
    cells = notebook(
        code("c1", "x = 1", tags=["exercise:ch01.q1"]),
        code("c2", "y = 2", tags=["exercise:ch01.q2"]),
    )
    write_notebook(tmp_path / "solutions" / "ch01_a.ipynb", cells)
    write_notebook(tmp_path / "notebooks" / "ch01_a.ipynb", cells)
    problems = manifest_disagreements(manifest)
    assert len(problems) == 2
    assert all("cell #2 is tagged as exercise 'ch01.q2'" in p for p in problems)
    assert problems[0].startswith("solutions/") and problems[1].startswith("notebooks/")


def test_agreement_reports_missing_notebooks_and_premature_planned_ones(tmp_path: Path) -> None:
    path = write_manifest(
        tmp_path,
        chapter_toml("ch01", "ch01_a", [("ch01.q1", "predict")]),
        chapter_toml("ch02", "ch02_b", [], status="planned"),
    )
    write_notebook(tmp_path / "solutions" / "ch02_b.ipynb", notebook(code("c1", "x = 1")))
    problems = manifest_disagreements(load_manifest(path))
    assert problems == [
        "solutions/ch01_a.ipynb: the notebook does not exist",
        "notebooks/ch01_a.ipynb: the notebook does not exist",
        "solutions/ch02_b.ipynb: exists, but chapter ch02 is 'planned' in the manifest "
        "(set status = 'published' and list its exercises)",
    ]


def test_a_tag_used_twice_in_one_notebook_is_reported(tmp_path: Path) -> None:
    manifest = load_manifest(_course_with_one_exercise(tmp_path))
    twice = notebook(
        code("c1", "x = 1", tags=["exercise:ch01.q1"]),
        code("c2", "x = 2", tags=["exercise:ch01.q1"]),
    )
    write_notebook(tmp_path / "solutions" / "ch01_a.ipynb", twice)
    write_notebook(tmp_path / "notebooks" / "ch01_a.ipynb", twice)
    problems = manifest_disagreements(manifest)
    assert len(problems) == 2
    assert all(
        "exercise 'ch01.q1' is tagged on cell #1 and again on cell #2" in p for p in problems
    )


def _one_exercise(tmp_path: Path, kind: str, extra: str) -> Path:
    text = chapter_toml("ch01", "ch01_a", [("ch01.q1", kind)]) + extra
    return write_manifest(tmp_path, text)


def test_exercises_carry_what_their_kind_needs(tmp_path: Path) -> None:
    extra = (
        'expression = "x.view()"\nfields = ["shape", "strides"]\nhints = ["one", "two"]\n'
        'scoring = "all_or_nothing"\n\n[[chapters.exercises.mistakes]]\nfield = "strides"\n'
        'answer = [2, 1]\nmessage = "the reshape\'s strides"\n'
    )
    exercise = load_manifest(_one_exercise(tmp_path, "predict", extra)).exercise("ch01.q1")
    assert exercise.expression == "x.view()" and exercise.fields == ("shape", "strides")
    assert exercise.hints == ("one", "two") and exercise.scoring == "all_or_nothing"
    assert exercise.mistakes[0].answer == [2, 1] and exercise.function is None
    implement = 'function = "flat_index"\nhints = ["h"]\n'
    exercise = load_manifest(_one_exercise(tmp_path, "implement", implement)).exercise("ch01.q1")
    assert exercise.function == "flat_index" and exercise.fields == ()
    explain = 'rubric = ["a", "b", "c"]\n'
    exercise = load_manifest(_one_exercise(tmp_path, "explain", explain)).exercise("ch01.q1")
    assert exercise.rubric == ("a", "b", "c")


@pytest.mark.parametrize(
    ("kind", "extra", "message"),
    [
        ("implement", 'fields = ["shape"]\n', r"do not apply to a implement exercise"),
        ("predict", 'fields = ["shape"]\n', "gives both 'expression' and 'fields'"),
        ("predict", 'expression = "x"\nfields = ["shape", "shape"]\n', "list a field twice"),
        ("predict", 'expression = "x"\nfields = ["Shape"]\n', "lower-case name"),
        ("predict", 'expression = "x"\nfields = ["shape"]\nscoring = "best"\n', "scoring"),
        ("implement", 'function = "not a name"\n', "function must be a Python name"),
        ("explain", 'rubric = ["a", "b"]\n', "a rubric has 3 or 4 points, got 2"),
        ("explain", "hints = [1]\n", "hints must be a list of non-empty strings"),
        (
            "predict",
            'expression = "x"\nfields = ["shape"]\n\n[[chapters.exercises.mistakes]]\n'
            'field = "strides"\nanswer = 1\nmessage = "m"\n',
            r"mistakes\[0\]: field 'strides' is not one of \['shape'\]",
        ),
    ],
)
def test_invalid_exercise_keys_are_course_errors(
    tmp_path: Path, kind: str, extra: str, message: str
) -> None:
    with pytest.raises(CourseError, match=message):
        load_manifest(_one_exercise(tmp_path, kind, extra))
