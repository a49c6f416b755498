"""The README's Python examples run, and print exactly what the README shows.

Every ```python block of README.md is a doctest (``>>>`` lines and their expected output). A block
that uses the Metal emulator runs where a C++ compiler is available and skips elsewhere, saying
why.
"""

from __future__ import annotations

import doctest
import re
import shlex
from pathlib import Path

import pytest

from llmfs.tensor.backends.metal import emulator_available

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def python_blocks() -> list[tuple[int, str]]:
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in BLOCK.finditer(text)]


def test_the_readme_has_python_examples_and_all_are_doctests() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 2
    for line, block in blocks:
        assert block.lstrip().startswith(">>>"), f"README.md line {line}: not a doctest"


@pytest.mark.parametrize(("line", "block"), python_blocks(), ids=lambda x: str(x)[:12])
def test_readme_example_prints_what_it_shows(line: int, block: str) -> None:
    if "metal-emulator" in block and not emulator_available():
        pytest.skip("the Metal example needs the emulator's C++ compiler (clang++)")
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block, {}, f"README.md:{line}", str(README), line)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failures: list[str] = []
    assert test.examples, f"README.md line {line}: no examples found"
    runner.run(test, out=failures.append)
    assert runner.failures == 0, "".join(failures)


def _pytest_runs(script: str) -> list[list[str]]:
    """The arguments of every ``<python> -m pytest`` command of a shell script."""
    runs = []
    for line in script.replace("\\\n", " ").splitlines():
        words = shlex.split(line.split("#", 1)[0])
        if len(words) >= 3 and words[0].endswith("python") and words[1:3] == ["-m", "pytest"]:
            runs.append(words[3:])
    return runs


def test_the_mac_instructions_run_the_metal_tests_once_as_the_workflow_does() -> None:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Running the Metal tests on your Mac") :]
    script = re.search(r"^```bash\n(.*?)^```", section, re.DOTALL | re.MULTILINE)
    assert script is not None, "the Mac section has no bash block"
    workflow = (README.parent / ".github" / "workflows" / "macos.yml").read_text(encoding="utf-8")
    ours, theirs = _pytest_runs(script.group(1)), _pytest_runs(workflow)
    assert len(ours) == 1, f"the Mac section runs pytest {len(ours)} times: {ours}"
    assert ours == theirs and "-m" not in ours[0]  # every Metal test, once
