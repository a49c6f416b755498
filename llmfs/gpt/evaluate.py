"""``python -m llmfs.gpt.evaluate``: the shipped capstone model's accuracy on the held-out problems,
computed now from the shipped weights (checksum verified) with the NumPy reference forward pass.

Options: ``--weights PATH`` evaluates another ``.npz`` (its ``.sha256`` beside it is checked),
``--show N`` prints N held-out problems (spread over the set) with the model's answers.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from llmfs.gpt import reference, task
from llmfs.gpt.checkpoint import TINY_GPT_PATH, load_tiny_gpt
from llmfs.gpt.errors import GPTError
from llmfs.gpt.model import count_parameters


def report(weights: Path = TINY_GPT_PATH, show: int = 5) -> str:
    """The text the command prints: weights file and size, model size, held-out accuracy and
    ``show`` worked examples."""
    params, config = load_tiny_gpt(weights)
    held_out = task.split().held_out
    start = time.perf_counter()
    acc = reference.accuracy(params, config, held_out)
    seconds = time.perf_counter() - start
    lines = [
        f"weights: {weights} ({weights.stat().st_size} bytes, checksum verified)",
        f"model: {config.n_layer} blocks, {config.n_head} heads, {config.n_embd} features, "
        f"{count_parameters(config)} parameters",
        f"held-out accuracy: {acc:.4f} ({round(acc * len(held_out))}/{len(held_out)} problems "
        f"never seen in training, exact answers; {seconds:.2f} s with the NumPy reference)",
    ]
    # Examples spread over the held-out set (it is sorted, so its head is all 0 + b).
    picks = np.linspace(0, len(held_out) - 1, num=max(0, show)).round().astype(int)
    for a, b in held_out[picks]:
        written = reference.solve(params, config, int(a), int(b))
        mark = "ok" if task.is_correct(int(a), int(b), written) else "WRONG"
        value = task.read_answer(written)
        lines.append(
            f"  {task.prompt(int(a), int(b))}{written}   (reads {value}, expected {a + b}) {mark}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Prints :func:`report`; exit status 1 (with the reason) when the weights cannot be used."""
    parser = argparse.ArgumentParser(
        prog="python -m llmfs.gpt.evaluate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--weights", type=Path, default=TINY_GPT_PATH)
    parser.add_argument("--show", type=int, default=5)
    args = parser.parse_args(argv)
    try:
        print(report(args.weights, args.show))
    except GPTError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
