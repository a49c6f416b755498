"""The training and validation loss of a language model, redrawn live in one notebook output
while it trains (chapter 13), with the baselines it must beat drawn across.

:class:`LiveLossPlot` keeps every step's training loss (:meth:`LiveLossPlot.step`) and each
validation measurement (:meth:`LiveLossPlot.validation`); it redraws every ``draw_every`` steps
and at each measurement, in place (a PNG shown with a display id), its title the step reached
and, while the run goes on, the time left (a run stopped half-way to resume later says
``paused`` instead: :meth:`LiveLossPlot.pause`). The legend sits under the axes, where no curve
runs. Without a notebook it keeps the numbers and draws nothing. :meth:`LiveLossPlot.summary` is
the run as text without times, so a notebook's stored output of a seeded run is the same on
every run (and so is its stored figure, whose last drawing holds no time).
"""

from __future__ import annotations

import io
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llmfs.gpt.errors import ConfigError
from llmfs.gpt.experiment import time_left_text
from llmfs.gpt.figure_files import figure_style, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_COLOURS = ("#7a7a7a", "#b8860b", "#2e7d32")


class LiveLossPlot:
    """``LiveLossPlot(steps, baselines, title=..., draw_every=...)``: a run of ``steps`` steps
    starting after ``first`` finished ones (a resumed run), with ``baselines`` (name -> loss)
    drawn as horizontal lines. The figure is 900 pixels wide on white, so it reads the same in
    a light and a dark theme. Raises :class:`ConfigError` for fewer than 1 step or a period
    below 1."""

    def __init__(
        self,
        steps: int,
        baselines: Mapping[str, float] | None = None,
        *,
        title: str = "training",
        draw_every: int = 10,
        first: int = 0,
    ) -> None:
        if steps < 1 or draw_every < 1 or first < 0:
            raise ConfigError(
                f"steps and draw_every must be at least 1 and first at least 0, got {steps}, "
                f"{draw_every} and {first}"
            )
        self.steps, self.draw_every, self.title, self.first = steps, draw_every, title, first
        self.baselines = dict(baselines or {})
        self.losses: list[tuple[int, float]] = []
        self.validation_losses: list[tuple[int, float]] = []
        self._handle: Any = None
        self._started: float | None = None
        #: Steps carried over from an earlier plot of the same run (:meth:`carry`).
        self._carried = 0
        #: Stopped before its last step, to resume elsewhere (:meth:`pause`).
        self._paused = False

    @property
    def done(self) -> int:
        """Steps finished by this plot's run (after ``first``), carried ones included."""
        return len(self.losses)

    def carry(self, earlier: LiveLossPlot) -> LiveLossPlot:
        """Takes over the curves of ``earlier``, a plot of the same run that stopped (a run
        resumed from a checkpoint goes on drawing the whole run); returns this plot. The time
        left counts only the steps this plot sees."""
        self.losses = list(earlier.losses)
        self.validation_losses = list(earlier.validation_losses)
        self._carried = len(self.losses)
        return self

    def pause(self) -> LiveLossPlot:
        """Marks the run as stopped before its last step (it resumes from a checkpoint, in a
        plot that :meth:`carry`-s this one) and redraws: the title says ``paused`` instead of a
        time left, so the figure left on screen holds no estimate that no longer runs down, and
        a notebook's stored figure is the same on every run. A later :meth:`step` goes on as
        before. Returns the plot."""
        self._paused = True
        self.draw()
        return self

    def time_left(self) -> str:
        """``", about 40 s left"`` while running; ``""`` before the first step, after the last
        and while paused, so a finished or paused figure holds no time."""
        seen = self.done - self._carried
        if self._started is None or self._paused or seen <= 0 or self.done >= self.steps:
            return ""
        per_step = (time.monotonic() - self._started) / seen
        return f", {time_left_text(per_step * (self.steps - self.done))}"

    def show(self) -> LiveLossPlot:
        """Displays the (empty) figure and starts the clock; returns the plot."""
        from IPython.display import display

        self._handle = display(self._image(), display_id=True)
        self._started = time.monotonic()
        return self

    def step(self, step: int, loss: float) -> None:
        """Records the training loss of step ``step`` (counted from 0 over the whole run) and
        redraws every ``draw_every`` steps and at the last."""
        if self._started is None:
            self._started = time.monotonic()
        self._paused = False
        self.losses.append((step + 1, float(loss)))
        if self.done % self.draw_every == 0 or self.done == self.steps:
            self.draw()

    def validation(self, step: int, loss: float) -> None:
        """Records a validation loss measured after ``step`` finished steps, and redraws."""
        self.validation_losses.append((step, float(loss)))
        self.draw()

    def draw(self) -> None:
        """Redraws the figure in place (nothing without a notebook)."""
        if self._handle is not None:
            self._handle.update(self._image())

    def figure(self) -> Figure:
        """The figure of the steps so far."""
        with figure_style():
            figure = new_figure(9.0, 3.8)
            figure.patch.set_facecolor("white")
            axes = figure.subplots(1, 1)
            if self.losses:
                axes.plot(
                    *zip(*self.losses, strict=True),
                    color="#1f4e79",
                    lw=0.9,
                    label="training loss (each batch)",
                )
            if self.validation_losses:
                axes.plot(
                    *zip(*self.validation_losses, strict=True),
                    color="#c0392b",
                    marker="o",
                    lw=1.6,
                    label="validation loss (held-out blocks)",
                )
            for (name, value), colour in zip(self.baselines.items(), _COLOURS, strict=False):
                axes.axhline(value, color=colour, ls="--", lw=1.0, label=f"{name} {value:.2f}")
            axes.set_xlim(self.first, self.first + self.steps * 1.02)
            axes.set_xlabel("training step")
            axes.set_ylabel("cross-entropy (nats per token)")
            paused = ", paused" if self._paused and self.done < self.steps else ""
            reached = f"step {self.first + self.done} of {self.first + self.steps}"
            axes.set_title(f"{self.title} ({reached}{paused or self.time_left()})")
            axes.grid(True, color="#dddddd", lw=0.5)
            # Under the axes: inside them it would hide the curve's end, where a run's story is
            # (a validation loss turning up).
            axes.legend(
                loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4, fontsize=8, frameon=False
            )
            figure.tight_layout()
        return figure

    def _image(self) -> Any:
        from IPython.display import Image

        buffer = io.BytesIO()
        with figure_style():
            self.figure().savefig(buffer, format="png", metadata={"Software": None})
        return Image(data=buffer.getvalue(), format="png")

    def summary(self, every: int = 50) -> str:
        """The run as text: the mean training loss of each window of ``every`` steps, and the
        validation loss measured at its end, if any."""
        lines = ["steps        train loss   validation loss"]
        measured = dict(self.validation_losses)
        for begin in range(0, len(self.losses), every):
            window = self.losses[begin : begin + every]
            first, last = window[0][0], window[-1][0]
            mean = sum(loss for _, loss in window) / len(window)
            held = f"{measured[last]:10.4f}" if last in measured else ""
            lines.append(f"{first:5d}-{last:<5d}  {mean:10.4f}   {held}")
        return "\n".join(lines)


__all__ = ["LiveLossPlot"]
