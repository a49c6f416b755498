"""Grading time of a class with files made to stop it, against the same class without them;
and of one honest notebook.

Run: ``python benchmarks/bench_grading_hostile.py [--students 20] [--jobs 2] [--repeat 1]``.
Builds (with :func:`gradingkit.hostile_class`) a class of correct submissions of the grading
chapter, one named with bytes that are not UTF-8, and the same class plus a notebook whose
kernel leaves a FIFO where the verdict was read and kills its runner, a 63 MiB notebook and a
24 MiB JSON bomb; runs ``llmfs grade`` on each in the bubblewrap sandbox (``--no-sandbox``
where there is none), alternately, ``--repeat`` times. Printed: the median seconds of each and
their ratio (the goal: at most 2x), then the median seconds of grading one honest notebook.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "course"))

import gradingkit as kit  # noqa: E402

from llmfs.cli import main as llmfs_main  # noqa: E402

FIFO_THEN_KILL = (
    "import os, signal, time\nos.mkfifo('../result.json')\ntime.sleep(4)\n"
    "os.kill(os.getppid(), signal.SIGKILL)\n"
)


def _grade(folder: Path, out: Path, jobs: int) -> float:
    argv = ["grade", str(folder), "--chapter", kit.grading_chapter().id, "--jobs", str(jobs)]
    argv += ["--seed", "1", "--out", str(out), "--cell-timeout", "30", "--timeout", "60"]
    if shutil.which("bwrap") is None:
        argv.append("--no-sandbox")
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(argv)
    if code != 0:
        raise SystemExit(f"llmfs grade failed with exit status {code}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    options = parser.parse_args()
    times: dict[str, list[float]] = {"honest": [], "hostile": [], "one": []}
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as scratch:
        root = Path(scratch)
        kit.hostile_class(root / "honest", options.students, hostile=False)
        kit.hostile_class(root / "hostile", options.students, hostile=True, fifo=FIFO_THEN_KILL)
        kit.hostile_class(root / "one", 1, hostile=False)
        runs = 0
        for _ in range(options.repeat):
            for kind in ("honest", "hostile", "one"):
                runs += 1
                jobs = 1 if kind == "one" else options.jobs
                times[kind].append(_grade(root / kind, root / f"out{runs}", jobs))
    honest, hostile = statistics.median(times["honest"]), statistics.median(times["hostile"])
    print(f"== llmfs grade, {options.students} honest students, --jobs {options.jobs}")
    print(f"   honest only            {honest:7.1f} s")
    print(f"   with the 3 hostile     {hostile:7.1f} s   ratio {hostile / honest:4.2f}x")
    print("   goal: ratio <= 2.00x")
    print(f"   one honest notebook    {statistics.median(times['one']):7.1f} s")


if __name__ == "__main__":
    main()
