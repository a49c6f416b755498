"""``python -m llmfs.gpt.evaluate``: the shipped capstone model's accuracy on the held-out problems,
computed now from the shipped weights (checksum verified) with the NumPy reference forward pass.

Options: ``--weights PATH`` evaluates another ``.npz`` (its ``.sha256`` beside it is checked),
``--show N`` prints N held-out problems (spread over the set) with the model's answers.

``--tensor`` computes the same accuracy through :mod:`llmfs.tensor` instead (the course's model,
:mod:`llmfs.gpt.tensor_model`, float32 on the numpy backend), prints the largest difference of its
logits from the reference in float64 and float32, the copy budget of one forward pass, and the
time of one forward pass on each available backend (``--backends numpy,reference`` chooses).
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


def tensor_report(weights: Path = TINY_GPT_PATH, backends: Sequence[str] | None = None) -> str:
    """The text of ``--tensor``: held-out accuracy through :mod:`llmfs.tensor`, logits against
    the reference, the copy budget and per-backend forward times."""
    # Imported here: the plain command stays pure NumPy and never loads llmfs.tensor.
    from llmfs.gpt import tensor_model

    params, config = load_tiny_gpt(weights)
    held_out = task.split().held_out
    start = time.perf_counter()
    acc = tensor_model.accuracy(tensor_model.tensor_params(params, np.float32), config, held_out)
    seconds = time.perf_counter() - start
    sample = task.sequences(held_out[::16])[:, : config.n_ctx]
    diff64 = tensor_model.check_against_reference(params, config, sample, np.float64)
    diff32 = tensor_model.check_against_reference(params, config, sample, np.float32)
    trace = tensor_model.copy_budget(
        tensor_model.tensor_params(params), config, task.prompts(held_out[:1])
    )
    lines = [
        f"weights: {weights} (checksum verified)",
        f"held-out accuracy through llmfs.tensor: {acc:.4f} ({round(acc * len(held_out))}/"
        f"{len(held_out)} problems, float32 on the numpy backend, {seconds:.2f} s)",
        f"logits vs the NumPy reference ({len(sample)} sequences): max |difference| "
        f"{diff64:.2e} in float64, {diff32:.2e} in float32",
        f"copy budget of one forward pass: {trace.count('copy')} copies (one per block), "
        f"{trace.count('view')} views, {trace.count('compute')} computed results",
        "forward time per backend:",
    ]
    rows = tensor_model.backend_times(params, config, backends)
    lines += ["  " + line for line in tensor_model.format_times(rows).splitlines()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Prints :func:`report`; exit status 1 (with the reason) when the weights cannot be used."""
    parser = argparse.ArgumentParser(
        prog="python -m llmfs.gpt.evaluate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--weights", type=Path, default=TINY_GPT_PATH)
    parser.add_argument("--show", type=int, default=5)
    parser.add_argument(
        "--tensor", action="store_true", help="evaluate through llmfs.tensor and time backends"
    )
    parser.add_argument(
        "--backends", default=None, help="with --tensor: comma-separated backends to time"
    )
    args = parser.parse_args(argv)
    try:
        if args.tensor:
            names = args.backends.split(",") if args.backends else None
            print(tensor_report(args.weights, names))
        else:
            print(report(args.weights, args.show))
    except GPTError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
