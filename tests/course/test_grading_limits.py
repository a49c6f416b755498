"""The sandbox environment: every numeric library, llmfs's copies included, runs one thread."""

from __future__ import annotations

import subprocess
import sys

from llmfs.course.grading.limits import sandbox_env


def test_sandboxed_processes_run_one_thread_per_numeric_library() -> None:
    env = sandbox_env()
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "LLMFS_NUM_THREADS"):
        assert env[name] == "1", name
    code = "from llmfs.tensor import get_num_threads; print(get_num_threads())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "1"
