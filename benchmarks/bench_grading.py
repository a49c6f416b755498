"""Grading time for a class of 20 chapter-2 submissions, one job against two.

Run: ``python benchmarks/bench_grading.py [--students 20] [--chapter 2]``. Builds the class from
the student notebook (a mix of fully correct, unanswered and half-answered submissions, answers
taken from the solutions), then runs ``llmfs grade`` twice into fresh gradebooks: ``--jobs 1``
and ``--jobs 2``. Each submission runs in its own kernel (the grader's real path); the printed
ratio is the speed-up of two jobs, bounded by the machine's free cores.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
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


def _grade(folder: Path, out: Path, chapter: str, jobs: int) -> float:
    argv = ["grade", str(folder), "--chapter", chapter, "--jobs", str(jobs)]
    argv += ["--seed", "1", "--out", str(out)]
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = llmfs_main(argv)
    if code != 0:
        raise SystemExit(f"llmfs grade failed with exit status {code}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--chapter", default="2")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as scratch:
        root = Path(scratch)
        _class(options.chapter, options.students, root / "class")
        one = _grade(root / "class", root / "jobs1", options.chapter, 1)
        two = _grade(root / "class", root / "jobs2", options.chapter, 2)
    n = options.students
    print(f"== llmfs grade: {n} submissions of chapter {options.chapter}, one kernel each")
    print(f"   {'jobs':<8} {'total s':>9} {'s/submission':>13}")
    print(f"   {'1':<8} {one:9.1f} {one / n:13.2f}")
    print(f"   {'2':<8} {two:9.1f} {two / n:13.2f}")
    print(f"   speed-up of --jobs 2: {one / two:.2f}x")


if __name__ == "__main__":
    main()
