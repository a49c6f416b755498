"""Fixtures for real-browser tests: one JupyterLab and one Chromium per test process, made as
good as new for each test module.

Every test module here sets ``pytestmark = pytest.mark.browser``; the fixtures skip, with the
reason, when Chromium or the playwright package is missing. ``open_lab_notebook(name, notebook)``
writes a notebook (nbformat JSON as a dict) into the server's root folder, opens it in a new page
and, after the test, closes the page and shuts its kernel down.

Starting JupyterLab and Chromium takes seconds, so each test process (each xdist worker) starts
them once. Each module then gets them in the state a fresh start gives: :func:`lab_server` stops
every session and kernel, empties the root folder and removes the attempts log, the saved
settings and the workspaces, before the module and after it; :func:`browser_context` closes every
page left open.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import LabServer, NotebookPage, chromium, jupyterlab, open_notebook, unavailable_reason

from tests.requirements import require_tool


def _require_browser() -> None:
    reason = unavailable_reason()
    if reason:
        require_tool(reason)


@pytest.fixture(scope="session")
def _shared_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A JupyterLab serving a fresh temp folder, with a fresh profile; stopped after the run."""
    _require_browser()
    base = tmp_path_factory.mktemp("lab")
    (base / "root").mkdir()
    with jupyterlab(root=base / "root", home=base / "home") as server:
        yield server


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def reset_lab(server: LabServer) -> None:
    """Gives ``server`` the state a fresh start gives it: no session or kernel, an empty root
    folder, no attempts logged, no saved settings or workspaces (the profile's page config, which
    disables the announcements, stays)."""
    with contextlib.suppress(OSError, urllib.error.URLError, TimeoutError):
        for session in server.api("GET", "api/sessions") or []:
            server.api("DELETE", f"api/sessions/{session['id']}")
        for kernel in server.api("GET", "api/kernels") or []:
            server.api("DELETE", f"api/kernels/{kernel['id']}")
    home = server.root.parent / "home"
    _empty(server.root)
    (home / "attempts.jsonl").unlink(missing_ok=True)
    for folder in ("settings", "workspaces"):
        _empty(home / folder)


@pytest.fixture(scope="module")
def lab_server(_shared_lab: LabServer) -> Iterator[LabServer]:
    """The process's JupyterLab, reset before and after the module (see :func:`reset_lab`)."""
    reset_lab(_shared_lab)
    yield _shared_lab
    reset_lab(_shared_lab)


@pytest.fixture(scope="session")
def _shared_browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium persistent context with a fresh profile; closed after the run."""
    _require_browser()
    with chromium(tmp_path_factory.mktemp("chromium") / "profile") as context:
        yield context


@pytest.fixture(scope="module")
def browser_context(_shared_browser: Any) -> Iterator[Any]:
    """The process's Chromium context, with no page left open before or after the module."""
    for page in list(_shared_browser.pages):
        page.close()
    yield _shared_browser
    for page in list(_shared_browser.pages):
        page.close()


@pytest.fixture
def open_lab_notebook(
    lab_server: LabServer, browser_context: Any
) -> Iterator[Callable[[str, dict[str, Any]], NotebookPage]]:
    """Write a notebook into the server root and open it; pages and kernels close afterwards."""
    pages: list[NotebookPage] = []

    def _open(name: str, notebook: dict[str, Any]) -> NotebookPage:
        (lab_server.root / name).write_text(json.dumps(notebook, indent=1), encoding="utf-8")
        page = open_notebook(browser_context, lab_server, name)
        pages.append(page)
        return page

    yield _open
    for page in pages:
        page.close()
