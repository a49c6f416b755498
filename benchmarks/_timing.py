"""Shared timing helpers for the benchmark scripts: medians of repeated runs, printed as ratios.

Benchmarks are scripts, not tests: the machines are shared and noisy, so each row is the median of
several runs and every comparison is a ratio measured in the same process, one after the other.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence


def median_seconds(fn: Callable[[], object], *, repeat: int = 7, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def paired_medians(
    ours: Callable[[], object], peer: Callable[[], object], *, repeat: int = 9, warmup: int = 1
) -> tuple[float, float]:
    """Median times of two functions measured alternately, so that load changes on a shared
    machine hit both sides alike."""
    for _ in range(warmup):
        ours()
        peer()
    ours_samples, peer_samples = [], []
    for _ in range(repeat):
        for fn, samples in ((ours, ours_samples), (peer, peer_samples)):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return statistics.median(ours_samples), statistics.median(peer_samples)


def alternating_medians(
    fns: Sequence[Callable[[], object]], *, repeat: int = 9, warmup: int = 1
) -> list[float]:
    """Median times of several functions measured in turn (one run of each per round), so
    that load changes on a shared machine hit every side alike."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for fn, out in zip(fns, samples):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def header(title: str, *, columns: bool = True) -> None:
    """Prints a benchmark's title and the environment facts that change its numbers, then the
    column names of :func:`row` (``columns=False``: a script that prints its own)."""
    print(f"== {title}")
    blas = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    if blas:
        print(f"   note: {blas} is set; it can slow NumPy's BLAS kernels")
    if columns:
        print(f"   {'case':<44} {'ours ms':>9} {'peer ms':>9} {'ratio':>7}  goal")


def row(name: str, ours: float, peer: float, goal: float | None = None) -> float:
    """Prints one comparison (times in seconds) and returns ours/peer."""
    ratio = ours / peer
    verdict = (
        "" if goal is None else (f"<= {goal:g} ok" if ratio <= goal else f"<= {goal:g} MISSED")
    )
    print(f"   {name:<44} {ours * 1e3:9.2f} {peer * 1e3:9.2f} {ratio:7.2f}  {verdict}")
    return ratio
