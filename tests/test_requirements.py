"""A missing tool skips a test on a developer machine but fails it under CI."""

from __future__ import annotations

import pytest

from tests.requirements import require_tool


def test_missing_tool_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no chromium"):
        require_tool("no chromium")


def test_missing_tool_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI must provide this, but: no chromium"):
        require_tool("no chromium")
