"""A progress bar with the time left, for a notebook cell that runs for seconds.

:class:`Progress` draws ONE notebook output (a display id) and redraws it in place after every
step: an HTML ``<progress>`` bar, ``k of n <unit>`` and, while it runs, the time left estimated
from the steps so far. Its ``text/plain`` (what notebook validation compares) names the work and
its size only, the same on every run and at every moment, so a notebook that shows one stays
deterministic; the finished bar says ``done`` and shows no time. Without a notebook (``display``
returns no handle) it draws nothing.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from llmfs.gpt.experiment import time_left_text

Item = TypeVar("Item")


class Progress:
    """``Progress(total, what, unit)``: ``total`` steps of work named ``what``, counted in
    ``unit``; :meth:`show`, then :meth:`advance` after each step (or iterate
    :meth:`over` the work's items). The time left is the mean time per finished step times the
    steps still to go. Raises ``ValueError`` for a total below 1 or an advance past the total.
    """

    def __init__(self, total: int, what: str, unit: str = "steps") -> None:
        if isinstance(total, bool) or not isinstance(total, int) or total < 1:
            raise ValueError(f"a progress bar needs a total of at least 1 step, got {total!r}")
        self.total, self.what, self.unit = total, what, unit
        self.done = 0
        self._started = time.monotonic()
        self._handle: Any = None

    def show(self) -> Progress:
        """Displays the bar (0 of ``total``) and starts its clock; returns it."""
        from IPython.display import display

        self._started = time.monotonic()
        self._handle = display(self, display_id=True)
        return self

    def advance(self, steps: int = 1) -> None:
        """Counts ``steps`` more finished steps and redraws the bar."""
        if self.done + steps > self.total:
            raise ValueError(
                f"{self.what}: {self.done} + {steps} steps is past the total of {self.total}"
            )
        self.done += steps
        if self._handle is not None:
            self._handle.update(self)

    def over(self, items: Iterable[Item]) -> Iterator[Item]:
        """Yields ``items``, counting one step after each has been worked on."""
        for item in items:
            yield item
            self.advance()

    def status(self) -> str:
        """``k of n unit`` with the time left while running, or ``done``."""
        counted = f"{self.done} of {self.total} {self.unit}"
        if self.done >= self.total:
            return f"{counted}: done"
        if self.done == 0:
            return f"{counted}: started"
        elapsed = time.monotonic() - self._started
        left = elapsed / self.done * (self.total - self.done)
        return f"{counted}, {time_left_text(left)}"

    def __repr__(self) -> str:
        return f"{self.what}: {self.total} {self.unit}"

    def _repr_html_(self) -> str:
        return (
            f'<div style="font-family: monospace; margin: 4px 0">'
            f"{html.escape(self.what)} "
            f'<progress value="{self.done}" max="{self.total}" '
            f'style="width: 240px; vertical-align: middle"></progress> '
            f"{html.escape(self.status())}</div>"
        )


__all__ = ["Progress", "time_left_text"]
