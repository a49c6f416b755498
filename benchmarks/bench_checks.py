"""The cost of the shortcut rule: implement checks with their forbidden calls guarded, against the
same checks without the rule.

Run: ``python benchmarks/bench_checks.py``. For the slowest checks a notebook runs (chapter 6's
``naive_einsum`` and chapter 8's ``gpt_forward`` and ``generate``) and the cheapest one, it
prints the median time of one full check of the solution's function (every case of the
notebook's seed) with the spec as published ("ours") and with its ``shortcuts`` removed ("peer").
The guards swap a few functions' code around each case and cost nothing while the learner's code
runs, so each ratio should stay within a few percent of 1.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from _timing import header, paired_medians, row

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "course"))

from solutionkit import SOLUTIONS  # noqa: E402

from llmfs.course.exercise_checks import SPECS, ImplementSpec, run_spec  # noqa: E402

#: Exercise -> the goal of its ratio. The cheapest check has none: its cases take microseconds,
#: so the guards' fixed cost per case (about 20 us) doubles a check that stays a few ms long.
EXERCISES = (
    ("ch01.compute_strides", None),
    ("ch06.naive_einsum", 1.1),
    ("ch08.forward", 1.1),
    ("ch08.generate", 1.1),
)


def _check(spec: ImplementSpec, function: Callable[..., Any]) -> Callable[[], object]:
    return lambda: run_spec(spec, function, record_attempt=False)


def main() -> None:
    header("implement checks of the solutions: shortcut rule on vs off")
    for exercise_id, goal in EXERCISES:
        spec, function = SPECS[exercise_id], SOLUTIONS[exercise_id]
        bare = replace(spec, shortcuts=None)
        ours, peer = paired_medians(_check(spec, function), _check(bare, function), repeat=7)
        row(f"{exercise_id} ({spec.cases} cases)", ours, peer, goal=goal)


if __name__ == "__main__":
    main()
