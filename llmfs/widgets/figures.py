"""``llmfs figures``: regenerate every figure under ``figures/`` from the library itself.

Each figure is written three ways: ``.png`` and ``.svg`` (matplotlib, fixed fonts, no dates or
version strings, so a rerun gives identical bytes) and ``.txt`` (the text renderer's output for
the same model, which does not depend on the matplotlib version). ``figures/figures.json`` lists
the files and the matplotlib version that drew them.

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

from llmfs.widgets.examples import seed_fixture, seed_trace
from llmfs.widgets.text import render_mapping, render_offsets, render_trace

INDEX = "figures.json"


def default_folder() -> Path:
    """``figures/`` at the root of the checkout (the folder above the ``llmfs`` package)."""
    return Path(__file__).resolve().parent.parent.parent / "figures"


def _trace_table() -> tuple[object, str]:
    from llmfs.widgets.plot import trace_figure

    trace = seed_trace()
    return trace_figure(trace), render_trace(trace)


def _reshape_vs_transpose() -> tuple[object, str]:
    from llmfs.widgets.plot import storage_figure

    base = seed_fixture()
    view = base.view()
    items = [
        ("view.reshape([3, 2])", view.reshape([3, 2])),
        ("view.transpose(0, 1)", view.transpose(0, 1)),
    ]
    figure = storage_figure(
        items,
        owners={"base": base},
        title="reshape vs transpose: same shape [3, 2], different offsets",
    )
    text = "\n\n".join(f"{label}\n{render_offsets(item, 'base')}" for label, item in items)
    return figure, text


def _slice_materialize() -> tuple[object, str]:
    from llmfs.widgets.model import trace
    from llmfs.widgets.plot import storage_figure

    base = seed_fixture()
    view = base.view()
    sliced = view.slice(1, 1, 3)
    copy = sliced.materialize()
    slice_label = "sliced = view.slice(1, 1, 3)"
    copy_label = "sliced.materialize()"
    figure = storage_figure(
        [(slice_label, sliced), (copy_label, copy)],
        owners={"base": base},
        copied_from={copy_label: slice_label},
        title="slice, then materialize: a new owner and its mapping",
    )
    rows = trace(base, ["view = base.view()", slice_label, copy_label]).copies
    text = "\n\n".join(
        [f"{slice_label}\n{render_offsets(sliced, 'base')}", *(render_mapping(r) for r in rows)]
    )
    return figure, text


def _capstone_loss() -> tuple[object, str]:
    # Drawn from the training record shipped with the weights, not by retraining.
    from llmfs.gpt.plot import loss_figure, shipped_record

    return loss_figure(shipped_record())


#: name -> builder of (matplotlib figure, text version). The order is the order of the index.
FIGURES: dict[str, Callable[[], tuple[object, str]]] = {
    "trace_table": _trace_table,
    "reshape_vs_transpose": _reshape_vs_transpose,
    "slice_materialize": _slice_materialize,
    "capstone_loss": _capstone_loss,
}


def generate(folder: Path) -> list[Path]:
    """Writes every figure (``.png``, ``.svg``, ``.txt``) and the index into ``folder``.

    Returns the written paths, sorted. Raises ``ModuleNotFoundError`` when matplotlib is absent.
    """
    import matplotlib

    from llmfs.widgets.plot import save

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, build in FIGURES.items():
        figure, text = build()
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
