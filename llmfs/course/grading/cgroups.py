"""Control groups for the sandbox: one group per sandbox capping its memory and processes.

Resource limits (:func:`~llmfs.course.grading.limits.apply_limits`) bound each process; a
control group bounds a sandbox as a whole: every process in it, their threads, and the pages of
its tmpfs folders. The grader uses one where this machine lets it create groups (cgroup v2 with
the ``memory``/``pids`` controllers delegated to the grader's group, or a writable cgroup v1
``memory``/``pids`` hierarchy, as root in a container) and says so; elsewhere the rlimits alone
hold (:func:`~llmfs.course.grading.isolation.Isolation.enforcement` names what is in force).

A sandbox joins its group before bubblewrap starts: the command is wrapped in a shell that
writes its own pid to each group's ``cgroup.procs`` and then ``exec``\\ s the sandbox, so no
process of the sandbox ever runs outside the group.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

#: The controllers used, and the file that caps each (cgroup v2, cgroup v1).
_FILES = {
    "memory": ("memory.max", "memory.limit_in_bytes"),
    "pids": ("pids.max", "pids.max"),
}
_PREFIX = "llmfs-sandbox-"
_COUNTER = itertools.count()
_LOCK = threading.Lock()

#: Joins the groups named before ``--``, then becomes the command after it.
JOIN_SCRIPT = 'while [ "$1" != "--" ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class Controller:
    """Where this process may create groups under ``controller``: ``folder``, cgroup
    ``version`` 1 or 2."""

    controller: str
    version: int
    folder: Path

    @property
    def limit_file(self) -> str:
        """The file that caps this controller's use in a group."""
        return _FILES[self.controller][0 if self.version == 2 else 1]


def _mounts() -> list[tuple[str, Path, str, set[str]]]:
    """(root, mount point, file system type, options) of every cgroup mount."""
    found: list[tuple[str, Path, str, set[str]]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8").splitlines()
    except OSError:
        return found
    for line in lines:
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3 or tail[0] not in ("cgroup", "cgroup2"):
            continue
        options = set(tail[2].split(",")) | set(fields[5].split(",") if len(fields) > 5 else [])
        found.append((fields[3], Path(fields[4]), tail[0], options))
    return found


def _own_groups() -> dict[str, str]:
    """This process's group per v1 controller, and ``""`` -> its v2 group."""
    groups: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return groups
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for name in controllers.split(",") if controllers else [""]:
            groups[name] = path
    return groups


def _below(mount_root: str, path: str, point: Path) -> Path | None:
    root = mount_root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return point / path[len(root) :].lstrip("/")


def _candidates() -> list[Controller]:
    groups = _own_groups()
    found: list[Controller] = []
    mounts = _mounts()
    for name in _FILES:
        for root, point, kind, _ in mounts:
            if kind == "cgroup2" and "" in groups:
                folder = _below(root, groups[""], point)
                if folder is None:
                    continue
                try:
                    delegated = (folder / "cgroup.subtree_control").read_text().split()
                except OSError:
                    continue
                if name in delegated:
                    found.append(Controller(name, 2, folder))
        for root, point, kind, options in mounts:
            if kind == "cgroup" and name in options and name in groups:
                folder = _below(root, groups[name], point)
                if folder is not None:
                    found.append(Controller(name, 1, folder))
    return found


def _works(controller: Controller) -> bool:
    probe = controller.folder / f"{_PREFIX}probe-{os.getpid()}"
    try:
        probe.mkdir()
    except OSError:
        return False
    try:
        (probe / controller.limit_file).write_text(
            "67108864" if controller.controller == "memory" else "8"
        )
        return os.access(probe / "cgroup.procs", os.W_OK)
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            probe.rmdir()


def find_controllers() -> dict[str, Controller]:
    """The controllers (``memory``, ``pids``) this process can create capped groups under, v2
    preferred; empty where it can create none (an unprivileged user without delegation)."""
    usable: dict[str, Controller] = {}
    for controller in _candidates():
        if controller.controller not in usable and _works(controller):
            usable[controller.controller] = controller
    return usable


@dataclass
class Group:
    """One sandbox's groups (one per controller); :meth:`close` removes them."""

    folders: list[Path]

    @property
    def procs(self) -> list[str]:
        """The ``cgroup.procs`` files the sandbox joins."""
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def close(self) -> None:
        """Removes the groups; waits briefly for their processes to be gone (a killed sandbox's
        last processes take a moment to be reaped)."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    _kill_members(folder)
                    time.sleep(0.02)


def _kill_members(folder: Path) -> None:
    import signal

    with contextlib.suppress(OSError):
        for text in (folder / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(text), signal.SIGKILL)


def create(controllers: dict[str, Controller], memory_bytes: int, processes: int) -> Group:
    """A new group under each controller, capped at ``memory_bytes`` and ``processes``.
    Raises OSError when one cannot be made (the caller then runs without it)."""
    values = {"memory": memory_bytes, "pids": processes}
    with _LOCK:
        name = f"{_PREFIX}{os.getpid()}-{next(_COUNTER)}"
    group = Group([])
    try:
        for controller in controllers.values():
            folder = controller.folder / name
            folder.mkdir()
            group.folders.append(folder)
            (folder / controller.limit_file).write_text(str(values[controller.controller]))
            if controller.controller == "memory" and controller.version == 2:
                with contextlib.suppress(OSError):  # no swapping around the cap
                    (folder / "memory.swap.max").write_text("0")
    except OSError:
        group.close()
        raise
    return group


def wrap(argv: list[str], group: Group) -> list[str]:
    """``argv`` run by a shell that first joins ``group``."""
    return ["/bin/sh", "-c", JOIN_SCRIPT, "sh", *group.procs, "--", *argv]


def remove_stale(controllers: dict[str, Controller]) -> None:
    """Removes the empty groups of grader processes that are gone."""
    for controller in controllers.values():
        with contextlib.suppress(OSError):
            for entry in controller.folder.iterdir():
                if not entry.name.startswith(_PREFIX) or "probe" in entry.name:
                    continue
                pid = entry.name[len(_PREFIX) :].split("-")[0]
                if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                    with contextlib.suppress(OSError):
                        entry.rmdir()
