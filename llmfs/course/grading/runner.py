"""Runs one notebook top to bottom in a fresh, limited kernel; a child process of the grader.

``python -m llmfs.course.grading.runner JOB.json`` reads the job (notebook path, working folder,
limits, where to write), starts :mod:`llmfs.course.grading.kernel` through a temporary kernelspec,
executes the code cells in order with nbclient (per-cell timeout, no stdin, the kernel's own
output streams sent to /dev/null) and stops at the first cell that fails. It reports to the
grader through the pipe ``verdict_fd`` (:mod:`~llmfs.course.grading.channel` frames): first
``{"kernel": PID}`` as soon as the kernel runs (so the grader can end it if this process must be
killed), then, as its last act, the verdict

``{"status": "ok" | "timeout" | "died" | "error", "cell": N or null, "message": "..."}``

where ``cell`` is the 1-based position of the failing cell. The verdict only says how the run
went: no score is ever read from the kernel. The pipe is this process's alone: it is not
inherited by the kernel, and this process makes itself non-dumpable before the kernel starts, so
the kernel (same user) cannot open it through ``/proc/PID/fd`` or attach to this process; a
kernel that kills this process leaves an exit status the grader refuses.

The runner caps its own memory like the kernel's and keeps none of the cells' outputs: it only
counts their size, and a notebook that prints or displays more than ``output_mb`` MiB in all is
stopped there (its kernel killed) with an ``error`` verdict naming the cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from llmfs.course.grading.channel import encode
from llmfs.course.grading.limits import apply_limits

KERNEL_NAME = "llmfs-grader"


def _kernelspec(folder: Path, job: dict[str, Any]) -> Path:
    spec_dir = folder / "kernels" / KERNEL_NAME
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "llmfs.course.grading.kernel",
        "--memory-mb",
        str(job["memory_mb"]),
        "--cpu-seconds",
        str(job["cpu_seconds"]),
        "--file-mb",
        str(job["file_mb"]),
        "--output-mb",
        str(job.get("output_mb", 16)),
        "--processes",
        str(job.get("processes") or 0),
        "-f",
        "{connection_file}",
    ]
    spec = {"argv": argv, "display_name": "llmfs grader", "language": "python"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder / "kernels"


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:120]
    return ""


def _report(job: dict[str, Any], message: dict[str, Any]) -> None:
    fd = job.get("verdict_fd")
    if isinstance(fd, int):
        with contextlib.suppress(OSError):
            os.write(fd, encode(message))


def _not_dumpable() -> None:
    # PR_SET_DUMPABLE = 4: /proc/PID/fd and ptrace of this process need privileges from now on.
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Executes the job's notebook; returns the verdict (see the module docstring)."""
    # jsonschema (imported by nbformat) loads rfc3987_syntax when it is installed, which builds a
    # parser for seconds at every start; this process validates nothing, so it is left out.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import AsyncKernelManager
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    raw = json.loads(Path(job["notebook"]).read_text(encoding="utf-8"))
    cells = []
    for cell in raw.get("cells", []):
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        kind = cell.get("cell_type")
        clean: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": text}
        if kind == "code":
            clean.update(outputs=[], execution_count=None)
        cells.append(clean)
    # Only the cells' kinds and sources matter: stored outputs and metadata are dropped.
    notebook = nbformat.from_dict(
        {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    )
    kernels = _kernelspec(Path(job["scratch"]), job)
    specs = KernelSpecManager(kernel_dirs=[str(kernels)], ensure_native_kernel=False)
    manager = AsyncKernelManager(kernel_name=KERNEL_NAME, kernel_spec_manager=specs)
    cap = int(job.get("output_mb", 16)) * 1024 * 1024
    printed = {"bytes": 0, "over": False}

    class CountingClient(NotebookClient):
        """Counts each output's size and keeps none: the verdict needs no output."""

        def output(self, outs: Any, msg: Any, display_id: Any, cell_index: Any) -> None:
            content = msg.get("content", {}) if isinstance(msg, dict) else {}
            printed["bytes"] += len(json.dumps(content, default=str))
            if printed["bytes"] > cap and not printed["over"]:
                printed["over"] = True
                pid = getattr(manager.provisioner, "pid", None)
                if isinstance(pid, int):
                    os.kill(pid, signal.SIGKILL)
            return None

    client = CountingClient(
        notebook,
        km=manager,
        timeout=job["cell_timeout"],
        startup_timeout=60,
        allow_errors=False,
        allow_error_names=[],
        shutdown_kernel="immediate",
        record_timing=False,
        extra_arguments=["--HistoryManager.enabled=False"],
        resources={"metadata": {"path": job["workdir"]}},
    )
    verdict: dict[str, Any] = {"status": "ok", "cell": None, "message": "ran every cell"}
    try:
        with client.setup_kernel(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
            pid = getattr(manager.provisioner, "pid", None)
            if isinstance(pid, int):
                _report(job, {"kernel": pid})
            for index, cell in enumerate(notebook.cells):
                if cell.get("cell_type") != "code" or not str(cell.get("source", "")).strip():
                    continue
                position = index + 1
                try:
                    client.execute_cell(cell, index)
                except CellTimeoutError:
                    seconds = job["cell_timeout"]
                    return {
                        "status": "timeout",
                        "cell": position,
                        "message": f"cell #{position} ran longer than {seconds:g} s",
                    }
                except DeadKernelError:
                    if printed["over"]:
                        limit = job.get("output_mb", 16)
                        return {
                            "status": "error",
                            "cell": position,
                            "message": f"cell #{position} printed more than {limit} MiB in all",
                        }
                    return {
                        "status": "died",
                        "cell": position,
                        "message": f"the kernel died in cell #{position} (exit or out of limits)",
                    }
                except CellExecutionError as error:
                    name = getattr(error, "ename", "") or "error"
                    value = _first_line(str(getattr(error, "evalue", "") or ""))
                    text = f"{name}: {value}" if value else name
                    return {
                        "status": "error",
                        "cell": position,
                        "message": f"cell #{position} raised {text}",
                    }
    except DeadKernelError:
        return {"status": "died", "cell": None, "message": "the kernel died while starting"}
    except RuntimeError as error:  # startup failures (kernel did not start in time, ...)
        return {"status": "died", "cell": None, "message": f"the kernel did not start ({error})"}
    return verdict


def main() -> None:
    """Entry point: ``python -m llmfs.course.grading.runner JOB.json``."""
    job = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    fd = job.get("verdict_fd")
    if isinstance(fd, int):
        os.set_inheritable(fd, False)  # the kernel and anything it starts never get it
    _not_dumpable()
    processes = job.get("processes")
    apply_limits(
        int(job["memory_mb"]),
        float(job["cpu_seconds"]),
        int(job["file_mb"]),
        int(processes) if isinstance(processes, int) else None,
    )
    try:
        verdict = run(job)
    except Exception as error:  # report, never hang: the grader waits for the verdict
        verdict = {
            "status": "died",
            "cell": None,
            "message": f"{type(error).__name__}: {_first_line(str(error))}",
        }
    _report(job, verdict)


if __name__ == "__main__":
    main()
