"""The capstone's loss curve as a figure, drawn from the training record.

``llmfs figures`` and ``python -m llmfs.gpt.train`` both draw ``figures/capstone_loss.*`` with
:func:`loss_figure`, from the record shipped beside the weights
(:data:`llmfs.gpt.checkpoint.TINY_GPT_RECORD_PATH`), so the committed figure regenerates byte for
byte without retraining. The figure uses the course's fixed fonts and is saved without dates or
version strings (:mod:`llmfs.gpt.figure_files`); matplotlib is imported only when drawing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.gpt.checkpoint import TINY_GPT_RECORD_PATH
from llmfs.gpt.errors import ConfigError
from llmfs.gpt.experiment import time_left_text
from llmfs.gpt.figure_files import figure_style, new_figure, save

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

    folder.mkdir(parents=True, exist_ok=True)
    figure, text = loss_figure(record)
    paths = [folder / f"{FIGURE_NAME}{suffix}" for suffix in (".png", ".svg", ".txt")]
    save(figure, paths[0])
    save(figure, paths[1])
    paths[2].write_text(text + "\n", encoding="utf-8")
    return paths


class LiveTrainingPlot:
    """The training loss and the held-out accuracy, redrawn in ONE notebook output while a model
    trains (chapter 10).

    Pass it as a training loop's ``on_step(step, loss, params)`` (``step`` counts from 0): it
    keeps every step's loss; at every ``eval_every``-th step and at the last one (``steps - 1``)
    it measures ``evaluate(params)``, the fraction of held-out problems answered right; at those
    steps, and every ``draw_every`` steps, it redraws the figure: a PNG shown with a display id
    (:meth:`show` first), updated in place, its title the step reached and, while it runs, the
    time left (:meth:`time_left`). Without a notebook (``display`` returns no handle)
    it keeps the numbers and draws nothing.

    The figure is 900 pixels wide on white (so it reads the same in a light and a dark theme):
    the loss per step, and the held-out accuracy in percent. :meth:`summary` is
    the run as text, numbers only (no times), so that a notebook's stored output of a seeded run
    is the same on every run. Raises :class:`~llmfs.gpt.errors.ConfigError` for fewer than 1
    step or a period below 1.
    """

    def __init__(
        self,
        steps: int,
        evaluate: Any,
        *,
        eval_every: int = 10,
        draw_every: int = 10,
        title: str = "training",
    ) -> None:
        if steps < 1 or eval_every < 1 or draw_every < 1:
            raise ConfigError(
                f"steps, eval_every and draw_every must be at least 1, got {steps}, "
                f"{eval_every} and {draw_every}"
            )
        self.steps, self.evaluate = steps, evaluate
        self.eval_every, self.draw_every, self.title = eval_every, draw_every, title
        self.losses: list[float] = []
        self.accuracy: list[tuple[int, float]] = []
        self._handle: Any = None
        self._started: float | None = None

    def time_left(self) -> str:
        """While training runs, the estimated time left (the mean time per step so far, times
        the steps to go), as ``", about 40 s left"``; ``""`` before the first step and after the
        last, so that the finished figure holds no time and is the same on every run."""
        done = len(self.losses)
        if self._started is None or done == 0 or done >= self.steps:
            return ""
        per_step = (time.monotonic() - self._started) / done
        return f", {time_left_text(per_step * (self.steps - done))}"

    def show(self) -> None:
        """Displays the (empty) figure; later draws replace it in place."""
        from IPython.display import display

        self._handle = display(self._image(), display_id=True)
        self._started = time.monotonic()

    def __call__(self, step: int, loss: float, params: Any) -> None:
        if self._started is None:
            self._started = time.monotonic()
        self.losses.append(float(loss))
        last = step + 1 == self.steps
        evaluated = (step + 1) % self.eval_every == 0 or last
        if evaluated:
            self.accuracy.append((step + 1, float(self.evaluate(params))))
        if self._handle is not None and (evaluated or (step + 1) % self.draw_every == 0):
            self._handle.update(self._image())

    def figure(self) -> Figure:
        """The figure of the steps so far."""
        with figure_style():
            figure = new_figure(9.0, 3.2)
            figure.patch.set_facecolor("white")
            left, right = figure.subplots(1, 2)
            steps = list(range(1, len(self.losses) + 1))
            if steps:
                left.plot(steps, self.losses, color="#1f4e79", lw=1.2)
            left.set_xlim(0, self.steps)
            left.set_ylim(bottom=0)
            left.set_xlabel("training step")
            left.set_ylabel("cross-entropy of the answer digits")
            done = f"step {len(self.losses)} of {self.steps}{self.time_left()}"
            left.set_title(f"{self.title}: loss ({done})")
            left.grid(True, color="#dddddd", lw=0.5)
            right.plot(
                [s for s, _ in self.accuracy],
                [100.0 * a for _, a in self.accuracy],
                color="#7a3b00",
                marker="o",
                lw=1.5,
            )
            # A margin past the last step, so its marker is not cut in half by the frame.
            right.set_xlim(0, self.steps * 1.04)
            right.set_ylim(-2, 101)
            right.set_xlabel("training step")
            right.set_ylabel("held-out answers right (%)")
            right.set_title("held-out problems, never trained on")
            right.grid(True, color="#dddddd", lw=0.5)
            figure.tight_layout()
        return figure

    def _image(self) -> Any:
        import io

        from IPython.display import Image

        buffer = io.BytesIO()
        with figure_style():
            self.figure().savefig(buffer, format="png", metadata={"Software": None})
        return Image(data=buffer.getvalue(), format="png")

    def summary(self, every: int | None = None) -> str:
        """The run as text: the mean loss of each window of ``every`` steps (default
        ``eval_every``) and each held-out accuracy measured."""
        every = every or self.eval_every
        lines = ["steps      mean loss   held-out right"]
        measured = dict(self.accuracy)
        for start in range(0, len(self.losses), every):
            window = self.losses[start : start + every]
            end = start + len(window)
            right = f"{100.0 * measured[end]:6.1f}%" if end in measured else ""
            lines.append(f"{start + 1:4d}-{end:<4d}  {sum(window) / len(window):9.4f}   {right}")
        return "\n".join(lines)
