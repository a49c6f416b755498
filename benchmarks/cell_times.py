"""How long a learner waits on each chapter cell, read from the executed solution notebooks.

Run: ``python benchmarks/cell_times.py [--top N] [--over SECONDS] [notebook ...]``. For each
solution notebook (all of ``solutions/`` when none is named) it reads every code cell's execution
timestamps, which Jupyter stores when a notebook is executed (``metadata.execution``:
``iopub.execute_input`` when the kernel starts the cell, ``shell.execute_reply`` when it answers),
and prints the slowest cells: their index, id, seconds, and whether the cell shows progress (it
makes a ``Progress`` bar or runs a live experiment widget). A cell over 20 s, or over 3 s without
progress, is flagged.

The times are those of the machine and load that last executed the notebook; re-execute a chapter
(``jupyter nbconvert --to notebook --execute --inplace``) on a quiet two-core machine before
reading its numbers as a learner's wait.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Limits on a learner's wait: any cell longer than PROGRESS_AFTER shows progress, and no cell
#: runs longer than WAIT_LIMIT.
PROGRESS_AFTER = 3.0
WAIT_LIMIT = 20.0

#: Source fragments that mean the cell draws progress while it runs.
PROGRESS_MARKS = ("Progress(", "progress=", "live_", "Live", "show_progress")


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
        shows = any(mark in source for mark in PROGRESS_MARKS)
        rows.append((index, str(cell.get("id", "")), seconds, shows))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--top", type=int, default=3, help="slowest cells shown per chapter")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted((ROOT / "solutions").glob("ch*.ipynb"))
    flagged = 0
    for path in paths:
        rows = cell_times(path)
        total = sum(seconds for _, _, seconds, _ in rows)
        print(f"{path.stem}: {len(rows)} timed cells, {total:.1f} s in all")
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
