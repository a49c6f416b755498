"""How long a learner waits on each chapter cell, read from the executed solution notebooks.

Run: ``python benchmarks/cell_times.py [--top N] [--over SECONDS] [notebook ...]``. For each
solution notebook (all of ``solutions/`` when none is named) it reads every code cell's execution
timestamps, which Jupyter stores when a notebook is executed (``metadata.execution``:
``iopub.execute_input`` when the kernel starts the cell, ``shell.execute_reply`` when it answers),
and prints the slowest cells: their index, id, seconds, and whether the cell shows progress (it
makes a ``Progress`` bar or runs a live experiment widget). A cell over 20 s, or over 3 s without
progress, is flagged.

The stored times are those of the machine and load that last executed the notebook. On a shared,
loaded machine run ``--run`` instead: it executes a copy of each notebook (the repository's
notebook stays as it is) and measures every cell's CPU time, the kernel's own and that of the
processes it waited for (compilers, isolated launches), which is close to the wall time of that
cell on a quiet machine whatever else is running (work on two threads at once counts twice).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Limits on a learner's wait: any cell longer than PROGRESS_AFTER shows progress, and no cell
#: runs longer than WAIT_LIMIT.
PROGRESS_AFTER = 3.0
WAIT_LIMIT = 20.0

#: Source fragments that mean the cell draws progress while it runs.
PROGRESS_MARKS = ("Progress(", "checked(", "progress=", "live_", "Live", "show_progress")


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def cell_times(path: Path) -> list[tuple[int, str, float, bool]]:
    """(index among code cells, cell id, seconds, shows progress) for every timed code cell."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    code_cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    for index, cell in enumerate(code_cells):
        stamps = cell.get("metadata", {}).get("execution", {})
        if "iopub.execute_input" not in stamps or "shell.execute_reply" not in stamps:
            continue
        seconds = (
            _stamp(stamps["shell.execute_reply"]) - _stamp(stamps["iopub.execute_input"])
        ).total_seconds()
        source = "".join(cell["source"])
        # A cell shows progress when its code draws it, or when its stored output holds a bar
        # (drawn by a helper function the chapter defined in an earlier cell).
        outputs = json.dumps(cell.get("outputs", []))
        shows = any(mark in source for mark in PROGRESS_MARKS) or "<progress" in outputs
        rows.append((index, str(cell.get("id", "")), seconds, shows))
    return rows


_MEASURE = """
import os as _os
_cell_cpu, _cell_start = [], []
def _cpu():
    t = _os.times()
    return t.user + t.system + t.children_user + t.children_system
def _before(*_):
    _cell_start.append(_cpu())
def _after(*_):
    if _cell_start:  # not for the cell that registers these
        _cell_cpu.append(_cpu() - _cell_start.pop())
get_ipython().events.register("pre_run_cell", _before)
get_ipython().events.register("post_run_cell", _after)
"""


def cpu_times(path: Path) -> list[tuple[int, str, float, bool]]:
    """Executes a copy of ``path`` and measures each code cell's CPU seconds (see the module's
    docstring); the same rows as :func:`cell_times`."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(path, as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    measured = nbformat.v4.new_notebook(metadata=notebook.metadata)
    measured.cells = [nbformat.v4.new_code_cell(_MEASURE), *code_cells]
    measured.cells.append(nbformat.v4.new_code_cell("print(repr(_cell_cpu))"))
    with tempfile.TemporaryDirectory() as scratch:
        # A learner's first run: attempts to a scratch log, and an empty build cache, so each
        # Metal kernel is compiled where the chapter first launches it.
        os.environ["LLMFS_ATTEMPTS"] = str(Path(scratch) / "attempts.jsonl")
        os.environ["LLMFS_CACHE_DIR"] = str(Path(scratch) / "cache")
        (Path(scratch) / "cache").mkdir()
        NotebookClient(
            measured, timeout=1200, resources={"metadata": {"path": str(path.parent)}}
        ).execute()
    printed = "".join(output.get("text", "") for output in measured.cells[-1].outputs)
    seconds = [float(v) for v in printed.strip().strip("[]").split(",")]
    rows = []
    # The executed copy's code cells, after the one that registers the timers: their outputs
    # show a bar that a helper of an earlier cell drew, as the stored outputs do.
    for index, (cell, run, cpu) in enumerate(
        zip(code_cells, measured.cells[1:], seconds, strict=False)
    ):
        outputs = json.dumps(run.get("outputs", []))
        shows = any(mark in cell.source for mark in PROGRESS_MARKS) or "<progress" in outputs
        rows.append((index, str(cell.get("id", "")), cpu, shows))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--top", type=int, default=3, help="slowest cells shown per chapter")
    parser.add_argument(
        "--run", action="store_true", help="execute a copy and measure CPU time per cell"
    )
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "solutions").glob("ch*.ipynb"))
    flagged = 0
    for path in paths:
        rows = cpu_times(path) if args.run else cell_times(path)
        total = sum(seconds for _, _, seconds, _ in rows)
        what = "CPU" if args.run else "wall"
        print(f"{path.stem}: {len(rows)} timed cells, {total:.1f} s of {what} time in all")
        for index, cell_id, seconds, shows in sorted(rows, key=lambda r: -r[2])[: args.top]:
            mark = ""
            if seconds > WAIT_LIMIT:
                mark = f"  OVER {WAIT_LIMIT:.0f} s"
            elif seconds > PROGRESS_AFTER and not shows:
                mark = f"  over {PROGRESS_AFTER:.0f} s without progress"
            flagged += bool(mark)
            progress = "progress" if shows else ""
            print(f"  Cell {index:>3} {cell_id:<28} {seconds:7.2f} s {progress:<8}{mark}")
    print(f"{flagged} cell(s) flagged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
