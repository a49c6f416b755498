"""Grading time of a class of chapter-2 submissions: in the sandbox against ``--no-sandbox``.

Run: ``python benchmarks/bench_grading.py [--students 20 50] [--jobs 1 2] [--repeat 3]``.
Builds each class from the student notebook (a mix of fully correct, unanswered and
half-answered submissions, answers taken from the solutions), then, for every class size and
``--jobs`` value, runs ``llmfs grade`` into fresh gradebooks in the bubblewrap sandbox and with
``--no-sandbox``, alternately (so that the load of a shared machine hits both alike), ``--repeat``
times. Each submission runs in its own kernel and implement worker (the grader's real path).
Printed: the median seconds of each, per submission, and the ratio sandbox / unsandboxed (the
sandbox's goal: at most 1.2x), all measured in this one run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "course"))

import gradingkit as kit  # noqa: E402

from llmfs.cli import main as llmfs_main  # noqa: E402
from llmfs.course.grading.key import find_chapter  # noqa: E402


def _class(chapter_text: str, students: int, folder: Path) -> None:
    chapter = find_chapter(kit.MANIFEST, chapter_text)
    key = kit.key_of(chapter)
    correct = kit.correct_notebook(chapter)
    blank = kit.student_notebook(chapter)
    half = kit.student_notebook(chapter)
    for item in key.exercises:
        if item.exercise.kind == "predict":
            names = list(item.answers)[: (len(item.answers) + 1) // 2]
            values = {name: item.answers[name] for name in names}
            half = kit.set_source(
                half, item.exercise.id, kit.fill_fields(item.blank_source, values)
            )
    kinds = [correct, blank, half]
    folder.mkdir(parents=True)
    for n in range(students):
        text = json.dumps(kinds[n % 3])
        (folder / f"student{n:03d}.ipynb").write_text(text, encoding="utf-8")


def _grade(folder: Path, out: Path, chapter: str, jobs: int, sandbox: bool) -> float:
    argv = ["grade", str(folder), "--chapter", chapter, "--jobs", str(jobs)]
    argv += ["--seed", "1", "--out", str(out)]
    if not sandbox:
        argv.append("--no-sandbox")
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(argv)
    if code != 0:
        raise SystemExit(f"llmfs grade failed with exit status {code}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chapter", default="2")
    options = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as scratch:
        root = Path(scratch)
        runs = 0
        for students in options.students:
            folder = root / f"class{students}"
            _class(options.chapter, students, folder)
            for jobs in options.jobs:
                times: dict[bool, list[float]] = {True: [], False: []}
                for _ in range(options.repeat):
                    for sandbox in (True, False):
                        runs += 1
                        out = root / f"out{runs}"
                        times[sandbox].append(_grade(folder, out, options.chapter, jobs, sandbox))
                inside = statistics.median(times[True])
                outside = statistics.median(times[False])
                rows.append((students, jobs, inside, outside))
    print(
        f"== llmfs grade, chapter {options.chapter}: median of {options.repeat} runs each, "
        "sandbox and --no-sandbox alternately"
    )
    print(
        f"   {'students':>8} {'jobs':>4} {'sandbox s':>10} {'s/sub':>6} "
        f"{'no-sandbox s':>13} {'s/sub':>6} {'ratio':>6}"
    )
    for students, jobs, inside, outside in rows:
        print(
            f"   {students:>8} {jobs:>4} {inside:10.1f} {inside / students:6.2f} "
            f"{outside:13.1f} {outside / students:6.2f} {inside / outside:5.2f}x"
        )
    print("   goal: ratio <= 1.20x")


if __name__ == "__main__":
    main()
