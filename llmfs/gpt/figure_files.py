"""Figures drawn the same way every time: fixed fonts, no pyplot, files without dates.

The capstone's loss figure (:mod:`llmfs.gpt.plot`) and the widgets' figures
(:mod:`llmfs.widgets.plot`) are drawn and saved with these helpers, so they live here, below
both: the object-oriented matplotlib API only (no pyplot, no global backend), fonts fixed to
DejaVu Sans / DejaVu Sans Mono (shipped with matplotlib), and :func:`save` strips dates and
version strings, so a figure's file is byte-for-byte the same on every run. matplotlib is
imported only when a figure is drawn.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmfs.gpt.errors import ConfigError

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.typing import RcKeyType

#: rcParams that make files byte-for-byte reproducible.
RC: dict[RcKeyType, Any] = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "svg.hashsalt": "llmfs-figures",
    "svg.fonttype": "path",
    "path.simplify": False,
}


@contextmanager
def figure_style() -> Iterator[None]:
    """The fixed fonts and file settings every figure is drawn and saved under."""
    import matplotlib

    with matplotlib.rc_context(RC):
        yield


def new_figure(width: float, height: float) -> Figure:
    """A figure not attached to pyplot (so nothing global changes), with an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def save(figure: Figure, path: Path | str) -> None:
    """Saves ``figure`` as PNG or SVG (by suffix) without dates or version strings.

    Raises :class:`~llmfs.gpt.errors.ConfigError` for any other suffix."""
    path = Path(path)
    with figure_style():
        if path.suffix == ".svg":
            metadata: dict[str, Any] = {"Date": None, "Creator": None}
        elif path.suffix == ".png":
            metadata = {"Software": None}
        else:
            raise ConfigError(
                f"{path}: figures are saved as .png or .svg, not {path.suffix or 'no suffix'}"
            )
        figure.savefig(path, metadata=metadata, facecolor="white")
