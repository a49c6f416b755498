"""The ``llmfs`` command line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from llmfs import __version__
from llmfs.cli import AUDIENCES, COMMANDS, main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    listing = capsys.readouterr().out
    for name in COMMANDS:
        assert name in listing


def test_help_groups_the_learners_commands_before_the_instructors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert sorted(name for names in AUDIENCES.values() for name in names) == sorted(COMMANDS)
    assert main([]) == 0
    listing = capsys.readouterr().out
    learners = listing.index("for learners:")
    instructors = listing.index("for instructors and course authors:")
    assert learners < instructors
    for name in AUDIENCES["for learners"]:
        assert learners < listing.index(f"  {name} ") < instructors
    for name in AUDIENCES["for instructors and course authors"]:
        assert listing.index(f"  {name} ") > instructors


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


def _pyproject_version() -> str:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    with (Path(__file__).resolve().parents[1] / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


@pytest.mark.parametrize("argv", [["--version"], ["start", "--version"], ["demo", "--version"]])
def test_version_prints_the_package_version(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    assert capsys.readouterr().out == f"llmfs {_pyproject_version()}\n"
    assert __version__ == _pyproject_version()


def test_a_bad_flag_shows_the_usage_of_its_own_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["start", "--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: llmfs start ") and "--no-browser" in err
    assert err.rstrip().endswith("llmfs start: error: unrecognized arguments: --bogus")


def test_a_bad_flag_before_any_command_shows_the_command_list(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: llmfs [-h] [--version] COMMAND")
    assert "llmfs: error: unrecognized arguments: --bogus" in err
