"""Fixtures for real-browser tests: one JupyterLab and one Chromium per test module.

Every test module here sets ``pytestmark = pytest.mark.browser``; the fixtures skip, with the
reason, when Chromium or the playwright package is missing. ``open_lab_notebook(name, notebook)``
writes a notebook (nbformat JSON as a dict) into the server's root folder, opens it in a new page
and, after the test, closes the page and shuts its kernel down.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from harness import LabServer, NotebookPage, chromium, jupyterlab, open_notebook, unavailable_reason

from tests.requirements import require_tool


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """A JupyterLab serving a fresh temp folder, with a fresh profile; stopped after the module."""
    reason = unavailable_reason()
    if reason:
        require_tool(reason)
    base = tmp_path_factory.mktemp("lab")
    (base / "root").mkdir()
    with jupyterlab(root=base / "root", home=base / "home") as server:
        yield server


@pytest.fixture(scope="module")
def browser_context(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A headless Chromium persistent context with a fresh profile; closed after the module."""
    reason = unavailable_reason()
    if reason:
        require_tool(reason)
    with chromium(tmp_path_factory.mktemp("chromium") / "profile") as context:
        yield context


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
