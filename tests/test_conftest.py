"""The root conftest.py's rules for the run itself, tested on throwaway folders.

(Its notebook validation is ``tests/course/test_notebook_validation.py``'s, in throwaway projects.)
"""

from __future__ import annotations

import gc
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]


def _root_conftest() -> ModuleType:
    """The repository's conftest.py, loaded under a name of its own (pytest's copy is not
    importable by name from a test module)."""
    spec = importlib.util.spec_from_file_location("llmfs_root_conftest", REPO / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(tmp_path: Path) -> Path:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "sub/__init__.py", "sub/mod.py"):
        (package / name).write_text("X = 1\n", encoding="utf-8")
    return package


def _bytecode(package: Path) -> dict[Path, Path]:
    return {p: Path(importlib.util.cache_from_source(str(p))) for p in package.rglob("*.py")}


def test_with_bytecode_writing_off_the_run_writes_the_packages_bytecode_and_renews_stale_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # as PYTHONDONTWRITEBYTECODE=1 does
    package = _package(tmp_path)
    write_bytecode = _root_conftest().write_bytecode
    write_bytecode(package)
    compiled = _bytecode(package)
    assert all(path.is_file() for path in compiled.values())
    written = {path: path.stat().st_mtime_ns for path in compiled.values()}

    # An edited module gets new bytecode (Python would not load the stale file); the others
    # are left as they are.
    edited = package / "sub" / "mod.py"
    edited.write_text("X = 22\n", encoding="utf-8")
    write_bytecode(package)
    renewed = {p for p, path in compiled.items() if path.stat().st_mtime_ns != written[path]}
    assert renewed == {edited}
    # Its bytecode is for its new source: a timestamp pyc's header holds the source's size.
    header = compiled[edited].read_bytes()[:16]
    assert int.from_bytes(header[12:16], "little") == edited.stat().st_size


def test_where_python_writes_bytecode_itself_the_run_writes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    package = _package(tmp_path)
    _root_conftest().write_bytecode(package)
    assert not any(path.exists() for path in _bytecode(package).values())


def test_what_collection_made_is_out_of_the_collectors_reach() -> None:
    # The collected tests, their modules and the libraries they imported: frozen once, in
    # this process, before its first test ran (pytest_collection_finish).
    assert gc.get_freeze_count() > 10_000


def test_a_folder_that_cannot_take_bytecode_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    package = _package(tmp_path)
    (package / "sub" / "__pycache__").write_text("a file where the folder would be\n")
    _root_conftest().write_bytecode(package)  # no error: Python's own import would not raise
    compiled = _bytecode(package)
    assert compiled[package / "__init__.py"].is_file()
    assert not compiled[package / "sub" / "mod.py"].exists()
