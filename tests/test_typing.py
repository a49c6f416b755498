"""The package type-checks: ``mypy`` (configured in pyproject.toml) reports no error on ``llmfs/``.

Part of the README's test command, so a change that breaks a signature's promise fails the suite.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# mypy on the whole package takes a minute from a cold cache (scheduled early).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_reports_no_errors_on_the_package() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, f"mypy found problems:\n{result.stdout}{result.stderr}"
