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
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from llmfs.gpt.experiment import time_left_text

Item = TypeVar("Item")
Result = TypeVar("Result")


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
        self._clocked_from = 0  # the steps done when the clock (re)started
        self._handle: Any = None

    def show(self) -> Progress:
        """Displays the bar (0 of ``total``) and starts its clock; returns it."""
        from IPython.display import display

        self._started = time.monotonic()
        self._handle = display(self, display_id=True)
        return self

    def restart_clock(self) -> None:
        """Estimates the time left from the steps finished after this call only: for work whose
        first step pays a one-time cost (a compiler run) that later steps do not."""
        self._started = time.monotonic()
        self._clocked_from = self.done

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
        timed = self.done - self._clocked_from
        if timed == 0:
            return f"{counted}: started"
        elapsed = time.monotonic() - self._started
        left = elapsed / timed * (self.total - self.done)
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


def checked(check: Callable[[Any], Result], answer: Any, what: str) -> Result:
    """``check(answer)`` (an implement exercise's check) with a :class:`Progress` bar named
    ``what`` counting its cases, for a check that runs for seconds (its first case compiles a
    kernel, say). The bar appears when the check draws its cases and advances after each; the
    time left is estimated from the cases after the first (the one that pays for the builds).
    The report is the check's own, unchanged."""
    from llmfs.course.exercise_checks.spec import case_progress

    bars: list[Progress] = []

    def follow(done: int, total: int) -> None:
        if not bars:  # the check's own run: a check runs its cases once
            bars.append(Progress(total, what, "cases").show())
        bar = bars[0]
        if bar.total == total and done > bar.done:
            bar.advance(done - bar.done)
            if done == 1:  # the first case builds the kernel; the others reuse the build
                bar.restart_clock()

    with case_progress(follow):
        return check(answer)


__all__ = ["Progress", "checked", "time_left_text"]
