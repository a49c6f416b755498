"""``llmfs figures``: regenerate every figure under ``figures/`` from the library itself.

Storage diagrams (views, strips, lines, copies, refusals) are drawn by the same code as the
notebooks' storage diagram (:mod:`llmfs.widgets.svg`), written as ``.svg`` (pure text, no
renderer involved, identical bytes on every machine) and ``.txt`` (the diagram's text form).
The trace table is drawn by matplotlib as ``.png`` and ``.svg`` (fixed fonts, no dates or
version strings, so a rerun gives identical bytes) with its ``.txt``. ``figures/figures.json``
lists the files and the matplotlib version that drew the matplotlib ones.

``llmfs figures --check`` regenerates into a temporary folder and reports every committed file that
differs (exit status 1), without touching ``figures/``.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from llmfs.tensor import Tensor
from llmfs.widgets.diagram import diagram, render_diagram_text
from llmfs.widgets.examples import seed_fixture, seed_trace
from llmfs.widgets.model import trace
from llmfs.widgets.plot import save, trace_figure
from llmfs.widgets.svg import render_diagram_svg
from llmfs.widgets.text import render_mapping, render_trace

INDEX = "figures.json"


def default_folder() -> Path:
    """``figures/`` at the root of the checkout (the folder above the ``llmfs`` package)."""
    return Path(__file__).resolve().parent.parent.parent / "figures"


def _trace_table() -> tuple[object, str]:
    trace = seed_trace()
    return trace_figure(trace), render_trace(trace)


def _reshape_vs_transpose() -> tuple[str, str]:
    base = seed_fixture()
    drawn = diagram(
        base.view(),
        ["view.reshape([3, 2])", "view.transpose(0, 1)"],
        name="view",
        owner="base",
        title="reshape vs transpose: same shape [3, 2], one storage, different offsets",
    )
    return render_diagram_svg(drawn), render_diagram_text(drawn)


def _slice_materialize() -> tuple[str, str]:
    base = seed_fixture()
    slice_label = "sliced = view.slice(1, 1, 3)"
    copy_label = "sliced.materialize()"
    drawn = diagram(
        base.view(),
        [slice_label, copy_label, "sliced.reshape([4])"],
        name="view",
        owner="base",
        title="slice, then materialize: a new owner and its mapping; no stride jumps the gap",
    )
    rows = trace(base, ["view = base.view()", slice_label, copy_label]).copies
    text = "\n\n".join([render_diagram_text(drawn), *(render_mapping(r) for r in rows)])
    return render_diagram_svg(drawn), text


def _broadcast_zero_strides() -> tuple[str, str]:
    row = Tensor.from_vec([3], [1.0, 2.0, 3.0])
    drawn = diagram(
        row,
        ["row.view().unsqueeze(0).expand([4, 3])"],
        name="row",
        title="broadcast: stride 0 reads the same three offsets four times",
    )
    return render_diagram_svg(drawn), render_diagram_text(drawn)


def _split_heads() -> tuple[str, str]:
    # A packed QKV projection for 2 tokens, 2 heads of size 2: shape [2, 3 * 2 * 2] = [2, 12].
    qkv = Tensor.arange(24).reshape([2, 12]).materialize()
    drawn = diagram(
        qkv,
        ["q = qkv.view().slice(1, 0, 4).split(1, [2, 2]).transpose(0, 1)"],
        name="qkv",
        title="split heads over packed QKV: q's two heads read their offsets in place, no copy",
    )
    return render_diagram_svg(drawn), render_diagram_text(drawn)


def _capstone_loss() -> tuple[object, str]:
    # Drawn from the training record shipped with the weights, not by retraining.
    from llmfs.gpt.plot import loss_figure, shipped_record

    return loss_figure(shipped_record())


#: name -> builder of (figure, text version): a matplotlib figure (written as .png and .svg) or
#: the SVG markup of a storage diagram (written as .svg). The order is the order of the index.
FIGURES: dict[str, Callable[[], tuple[object, str]]] = {
    "trace_table": _trace_table,
    "reshape_vs_transpose": _reshape_vs_transpose,
    "slice_materialize": _slice_materialize,
    "broadcast_zero_strides": _broadcast_zero_strides,
    "split_heads": _split_heads,
    "capstone_loss": _capstone_loss,
}


def suffixes(name: str) -> tuple[str, ...]:
    """The files a figure is written as: storage diagrams ``.svg`` and ``.txt``; matplotlib
    figures ``.png``, ``.svg`` and ``.txt``."""
    return (".png", ".svg", ".txt") if name in MATPLOTLIB else (".svg", ".txt")


#: The figures drawn by matplotlib (the others are storage diagrams drawn as SVG text).
MATPLOTLIB = ("trace_table", "capstone_loss")


def generate(folder: Path) -> list[Path]:
    """Writes every figure (see :func:`suffixes`) and the index into ``folder``.

    Returns the written paths, sorted. Raises ``ModuleNotFoundError`` when matplotlib is absent.
    """
    import matplotlib

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in FIGURES.items():
        figure, text = build()
        if isinstance(figure, str):
            (folder / f"{name}.svg").write_text(figure + "\n", encoding="utf-8")
            written.append(folder / f"{name}.svg")
        else:
            for suffix in (".png", ".svg"):
                save(figure, folder / f"{name}{suffix}")  # type: ignore[arg-type]
                written.append(folder / f"{name}{suffix}")
        (folder / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
        written.append(folder / f"{name}.txt")
    index = {
        "command": "llmfs figures",
        "matplotlib": matplotlib.__version__,
        "files": sorted(p.name for p in written),
    }
    (folder / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", "utf-8")
    written.append(folder / INDEX)
    return sorted(written)


def differences(folder: Path, fresh: Path) -> list[str]:
    """Names of files that differ between ``folder`` and a freshly generated ``fresh`` folder:
    changed or missing in ``folder``, or present in ``folder`` but no longer generated."""
    generated = sorted(p for p in fresh.iterdir() if p.is_file())
    names = {p.name for p in generated}
    differing = [
        p.name
        for p in generated
        if not (folder / p.name).is_file() or not filecmp.cmp(p, folder / p.name, shallow=False)
    ]
    extra = (
        [p.name for p in folder.iterdir() if p.is_file() and p.name not in names]
        if folder.is_dir()
        else []
    )
    return sorted(differing + extra)


def stale(folder: Path) -> list[str]:
    """:func:`differences` between ``folder`` and a generation into a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="llmfs-figures-") as scratch:
        generate(Path(scratch))
        return differences(folder, Path(scratch))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out DIR`` (default: the checkout's ``figures/``) and ``--check``."""
    parser.add_argument("--out", type=Path, default=None, help="folder to write (default figures/)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="do not write; exit 1 if any committed figure differs from a fresh generation",
    )


def main(args: argparse.Namespace) -> int:
    """Regenerates (or checks) the figures; returns the exit status."""
    folder = args.out if getattr(args, "out", None) else default_folder()
    if getattr(args, "check", False):
        differing = stale(folder)
        if differing:
            print(
                f"stale figures in {folder}: {', '.join(differing)} (run `llmfs figures`)",
                file=sys.stderr,
            )
            return 1
        print(f"figures in {folder} are up to date")
        return 0
    for path in generate(folder):
        print(path)
    return 0
