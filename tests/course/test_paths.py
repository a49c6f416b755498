"""Where the course files are found: package data of a wheel, the checkout, or an override."""

from __future__ import annotations

from pathlib import Path

import pytest
from coursekit import chapter_toml, write_manifest

from llmfs.course import CourseError, paths
from llmfs.course.manifest import load_manifest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(paths.ENV_COURSE_ROOT, raising=False)


def test_a_checkout_finds_its_own_course_folder() -> None:
    assert paths.course_root() == REPO.resolve()


def test_package_data_of_an_installed_wheel_comes_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shipped = tmp_path / "_shipped"
    write_manifest(shipped, chapter_toml("ch01", "ch01_a", []))
    monkeypatch.setattr(paths, "shipped_root", lambda: shipped)
    assert paths.course_root() == shipped
    manifest = load_manifest()
    assert manifest.root == shipped.resolve()
    assert (
        manifest.root / manifest.chapters[0].notebook
        == shipped.resolve() / "notebooks/ch01_a.ipynb"
    )


def test_the_environment_overrides_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_manifest(tmp_path / "mine", chapter_toml("ch07", "ch07_a", []))
    monkeypatch.setenv(paths.ENV_COURSE_ROOT, str(tmp_path / "mine"))
    assert [chapter.id for chapter in load_manifest().chapters] == ["ch07"]
    monkeypatch.setenv(paths.ENV_COURSE_ROOT, str(tmp_path / "empty"))
    with pytest.raises(CourseError, match=r"LLMFS_COURSE_ROOT=.*empty: no course/manifest\.toml"):
        paths.course_root()


def test_no_course_anywhere_is_a_course_error_naming_the_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paths, "shipped_root", lambda: tmp_path / "a")
    monkeypatch.setattr(paths, "checkout_root", lambda: tmp_path / "b")
    with pytest.raises(CourseError, match="the course files were not found") as error:
        paths.course_root()
    assert str(tmp_path / "a") in str(error.value) and str(tmp_path / "b") in str(error.value)
