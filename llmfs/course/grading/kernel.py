"""The grader's kernel: an IPython kernel that caps its own memory, CPU time, file sizes and
output.

Started by :mod:`llmfs.course.grading.runner` through a temporary kernelspec whose ``argv`` is
``python -m llmfs.course.grading.kernel --memory-mb M --cpu-seconds S --file-mb F
--output-mb O --processes P -f FILE`` (``P`` 0: no process cap, outside a sandbox). The limits
are set, hard, before ipykernel is imported, so the learner's code can never run without them;
everything after the limit options is passed to ipykernel unchanged.

Output: every text the cells print (stdout, stderr) and every display counts against ``O`` MiB
in all; a write beyond it raises :class:`OutputLimitError` in the cell that wrote it and is never
sent, so a cell printing 1 GiB ends with that error however fast it prints (the runner also
counts what arrives, and stops a kernel that got around this).
"""

from __future__ import annotations

import sys
from typing import Any

from llmfs.course.grading.limits import apply_limits


def _take(argv: list[str], option: str, default: float) -> float:
    if option in argv:
        at = argv.index(option)
        value = float(argv[at + 1])
        del argv[at : at + 2]
        return value
    return default


class OutputLimitError(RuntimeError):
    """A cell wrote more output than the grader's cap (the message says how much)."""


def cap_output(megabytes: float) -> None:
    """Makes every print and display of this kernel count against ``megabytes`` in all."""
    import json

    from ipykernel.iostream import OutStream
    from ipykernel.zmqshell import ZMQDisplayPublisher

    left = [int(megabytes * 1024 * 1024)]
    message = f"printed more than {megabytes:g} MiB in all"

    def spend(size: int) -> None:
        if size > left[0]:
            left[0] = 0
            raise OutputLimitError(message)
        left[0] -= size

    write, publish = OutStream.write, ZMQDisplayPublisher.publish

    def counted_write(self: Any, string: Any) -> Any:
        spend(len(string) if isinstance(string, (str, bytes)) else 0)
        return write(self, string)

    def counted_publish(self: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        spend(len(json.dumps(data, default=str)))
        return publish(self, data, *args, **kwargs)

    OutStream.write = counted_write  # type: ignore[method-assign]
    ZMQDisplayPublisher.publish = counted_publish  # type: ignore[method-assign]


def main() -> None:
    """Apply the limits named on the command line, then become an IPython kernel."""
    argv = sys.argv[1:]
    memory = int(_take(argv, "--memory-mb", 2048))
    cpu = _take(argv, "--cpu-seconds", 600)
    files = int(_take(argv, "--file-mb", 64))
    output = _take(argv, "--output-mb", 16)
    processes = int(_take(argv, "--processes", 0))
    apply_limits(memory, cpu, files, processes or None)
    # jsonschema (imported with the widgets) loads rfc3987_syntax when installed, which spends
    # seconds building a parser at every start; no notebook of the course needs it.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
    sys.argv = [sys.argv[0], *argv]
    cap_output(output)
    from ipykernel.kernelapp import launch_new_instance

    launch_new_instance()


if __name__ == "__main__":
    main()
