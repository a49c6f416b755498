"""The grader's kernel: an IPython kernel that caps its own memory, CPU time and file sizes.

Started by :mod:`llmfs.course.grading.runner` through a temporary kernelspec whose ``argv`` is
``python -m llmfs.course.grading.kernel --memory-mb M --cpu-seconds S --file-mb F -f FILE``.
The limits are set before ipykernel is imported, so the learner's code can never run without
them; everything after the limit options is passed to ipykernel unchanged.
"""

from __future__ import annotations

import sys

from llmfs.course.grading.limits import apply_limits


def _take(argv: list[str], option: str, default: float) -> float:
    if option in argv:
        at = argv.index(option)
        value = float(argv[at + 1])
        del argv[at : at + 2]
        return value
    return default


def main() -> None:
    """Apply the limits named on the command line, then become an IPython kernel."""
    argv = sys.argv[1:]
    memory = int(_take(argv, "--memory-mb", 2048))
    cpu = _take(argv, "--cpu-seconds", 600)
    files = int(_take(argv, "--file-mb", 64))
    apply_limits(memory, cpu, files)
    # jsonschema (imported with the widgets) loads rfc3987_syntax when installed, which spends
    # seconds building a parser at every start; no notebook of the course needs it.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    sys.argv = [sys.argv[0], *argv]
    from ipykernel.kernelapp import launch_new_instance

    launch_new_instance()


if __name__ == "__main__":
    main()
