"""The ``llmfs`` command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmfs.cli import COMMANDS, main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    listing = capsys.readouterr().out
    for name in COMMANDS:
        assert name in listing


def test_demo_prints_the_seed_trace_table() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "llmfs", "demo"], capture_output=True, text=True, check=True
    )
    assert "[0, 3, 1, 4, 2, 5]" in result.stdout
    assert "new offsets [0, 1, 2, 3] -> source offsets [1, 2, 4, 5]" in result.stdout


def test_unknown_command_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["grade-everything"])
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
