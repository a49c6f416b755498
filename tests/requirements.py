"""Skips for missing tools that CI must have.

A developer's machine may lack Chromium or a C++ compiler; those tests then skip and say why.
CI (``CI=true``, as ``.ci/run`` runs) installs both, so there a missing tool is a failure: a skip
must never hide a broken CI setup.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    """True under continuous integration, where every tool of ``.ci/run`` must be present."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require_tool(reason: str) -> NoReturn:
    """Skips the test with ``reason`` on a developer machine; fails it under CI."""
    if in_ci():
        pytest.fail(f"CI must provide this, but: {reason}", pytrace=False)
    pytest.skip(reason)
