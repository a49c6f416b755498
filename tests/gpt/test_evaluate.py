"""``python -m llmfs.gpt.evaluate`` prints the held-out accuracy it has just computed."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from llmfs.gpt import evaluate, task
from llmfs.gpt.checkpoint import TINY_GPT_PATH


def test_the_command_prints_the_held_out_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    assert evaluate.main(["--show", "2"]) == 0
    out = capsys.readouterr().out
    found = re.search(r"held-out accuracy: (\d\.\d{4}) \((\d+)/(\d+) problems", out)
    assert found, out
    assert float(found.group(1)) >= 0.98
    assert int(found.group(3)) == len(task.split().held_out)
    assert "checksum verified" in out
    assert len(re.findall(r"^  \d\d\+\d\d=\d\d\d ", out, flags=re.M)) == 2


def test_a_damaged_weights_file_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "tiny_gpt.npz"
    shutil.copy(TINY_GPT_PATH, copy)
    (tmp_path / "tiny_gpt.sha256").write_text("0" * 64 + "  tiny_gpt.npz\n")
    assert evaluate.main(["--weights", str(copy)]) == 1
    assert "has SHA-256" in capsys.readouterr().err


def test_the_tensor_option_prints_the_accuracy_through_llmfs_tensor_and_backend_times(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert evaluate.main(["--tensor", "--backends", "numpy"]) == 0
    out = capsys.readouterr().out
    found = re.search(r"accuracy through llmfs.tensor: (\d\.\d{4}) \((\d+)/(\d+) problems", out)
    assert found, out
    assert float(found.group(1)) >= 0.98
    assert int(found.group(3)) == len(task.split().held_out)
    diffs = re.search(r"max \|difference\| (\S+) in float64, (\S+) in float32", out)
    assert diffs and float(diffs.group(1)) <= 1e-9 and float(diffs.group(2)) <= 1e-4, out
    assert "2 copies (one per block)" in out
    assert re.search(r"^  numpy +float32 +batch \[64, 6\]: +[\d.]+ ms per forward pass$", out, re.M)
