"""The capstone's loss curve as a figure, drawn from the training record.

``llmfs figures`` and ``python -m llmfs.gpt.train`` both draw ``figures/capstone_loss.*`` with
:func:`loss_figure`, from the record shipped beside the weights
(:data:`llmfs.gpt.checkpoint.TINY_GPT_RECORD_PATH`), so the committed figure regenerates byte for
byte without retraining. The figure uses the course's fixed fonts and is saved without dates or
version strings (:mod:`llmfs.widgets.plot`); matplotlib is imported only here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.gpt.checkpoint import TINY_GPT_RECORD_PATH

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Base name of the figure files in ``figures/``.
FIGURE_NAME = "capstone_loss"


def shipped_record() -> dict[str, Any]:
    """The training record of the shipped weights."""
    record: dict[str, Any] = json.loads(TINY_GPT_RECORD_PATH.read_text(encoding="utf-8"))
    return record


def loss_text(record: dict[str, Any]) -> str:
    """The figure's values as CSV: ``step,mean_loss`` rows (each the mean of the steps since the
    previous row), a blank line, then ``step,held_out_accuracy`` rows."""
    lines = ["step,mean_loss"]
    lines += [f"{step},{loss:.6f}" for step, loss in record["loss_curve"]]
    lines += ["", "step,held_out_accuracy"]
    lines += [f"{step},{acc:.4f}" for step, acc in record["held_out_accuracy_curve"]]
    return "\n".join(lines)


def loss_figure(record: dict[str, Any]) -> tuple[Figure, str]:
    """``(figure, text)``: the training loss (log scale) and the held-out accuracy against the
    step, and :func:`loss_text`."""
    # Loaded on use: the figure helpers need matplotlib, which training without figures skips.
    from llmfs.widgets.plot import figure_style, new_figure

    steps = [s for s, _ in record["loss_curve"]]
    losses = [v for _, v in record["loss_curve"]]
    acc_steps = [s for s, _ in record["held_out_accuracy_curve"]]
    accs = [100.0 * v for _, v in record["held_out_accuracy_curve"]]
    with figure_style():
        figure = new_figure(9.0, 3.4)
        left, right = figure.subplots(1, 2)
        left.plot(steps, losses, color="#1f4e79", lw=1.5)
        left.set_yscale("log")
        left.set_xlabel("training step")
        left.set_ylabel("cross-entropy of the answer digits")
        left.set_title("training loss (mean of each logged window)")
        left.grid(True, which="both", color="#dddddd", lw=0.5)
        right.plot(acc_steps, accs, color="#7a3b00", marker="o", lw=1.5)
        right.set_ylim(0, 101)
        right.set_xlabel("training step")
        right.set_ylabel("exactly right answers (%)")
        final = 100.0 * record["saved_held_out_accuracy"]
        right.set_title(f"held-out problems (saved weights: {final:.1f}%)")
        right.grid(True, color="#dddddd", lw=0.5)
        figure.tight_layout()
    return figure, loss_text(record)


def write_loss_figure(record: dict[str, Any], folder: Path) -> list[Path]:
    """Writes ``capstone_loss.png``, ``.svg`` and ``.txt`` (the CSV of :func:`loss_text`) into
    ``folder``; returns the paths."""
    # Loaded on use, as in loss_figure.
    from llmfs.widgets.plot import save

    folder.mkdir(parents=True, exist_ok=True)
    figure, text = loss_figure(record)
    paths = [folder / f"{FIGURE_NAME}{suffix}" for suffix in (".png", ".svg", ".txt")]
    save(figure, paths[0])
    save(figure, paths[1])
    paths[2].write_text(text + "\n", encoding="utf-8")
    return paths
