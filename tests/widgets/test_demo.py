"""``llmfs demo``: the example trace table and mapping in the terminal."""

from __future__ import annotations

import subprocess
import sys

from llmfs.cli import main


def test_demo_prints_the_trace_table_then_the_mapping(capsys) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "transposed = view.transpose(0, 1)  ◇ base      [3, 2]  [1, 3]" in out
    assert "× rejected  violated: end <= size (SliceEndOutOfBoundsError)" in out
    assert out.index("step ") < out.index("mapping ◆ copy 1 <- ◇ base")
    assert out.rstrip().endswith("new offsets [0, 1, 2, 3] -> source offsets [1, 2, 4, 5]")


def test_demo_offsets_adds_the_transposes_offset_table(capsys) -> None:
    assert main(["demo", "--offsets"]) == 0
    assert "read by position  0   2   4   1   3   5" in capsys.readouterr().out


def test_demo_runs_as_a_command_without_matplotlib_or_ipywidgets() -> None:
    code = (
        "import sys; from llmfs.cli import main; main(['demo']); "
        "assert 'matplotlib' not in sys.modules and 'ipywidgets' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
