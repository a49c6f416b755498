"""Where the learner's code runs: a bubblewrap sandbox, and one scratch folder per grading run.

:class:`Isolation` turns the command of a sandboxed child (the notebook runner, the implement
worker) into a ``bwrap`` command (`bubblewrap <https://github.com/containers/bubblewrap>`_,
Debian's ``bubblewrap``) in which the child sees:

* a read-only system (``/usr`` and the few ``/etc`` files a Python process reads), the Python
  installation and its site-packages, and the ``llmfs`` package folder alone (never the folder
  above it: a checkout's ``solutions/``, ``course/`` and tests stay out of sight, so
  ``llmfs.__file__`` leads nowhere);
* a private ``/tmp`` (a tmpfs of ``disk_mb`` that vanishes with the sandbox), fresh ``/proc``
  and ``/dev``;
* one more writable folder, its scratch folder: another tmpfs of ``disk_mb`` laid over the
  host's scratch path, holding the job's input files read-only (nothing written there reaches
  the host, and the grader reads nothing back from it);
* no network (its own network namespace: not even the host's 127.0.0.1), its own PID namespace
  (the grader's processes, and their arguments in ``/proc``, are not visible; when the sandbox's
  first process ends, the kernel ends every process in it, whatever session it started),
  ``--die-with-parent`` (a killed grader takes its sandboxes along), no capabilities, and an
  environment holding only what :func:`~llmfs.course.grading.limits.sandbox_env` lists.

Paths named in ``hidden`` (the gradebook's ``--out`` folder, the submissions, the checks' course
folder) are never mounted; one that happens to lie inside a mounted folder is covered by an empty
tmpfs (a folder) or ``/dev/null`` (a file).

:class:`RunFolder` is the grader's scratch space: one folder per grading process under the
system's temporary folder, locked while the process lives. Every scratch folder of a run lives
inside it, and the next run removes the folders of runs that are gone (killed with SIGKILL, say),
so nothing a run created outlives the next one.

Limits that hold against the code they limit: the sandbox runs as an unprivileged uid
(:data:`SANDBOX_UID`) in its own user namespace with every capability dropped, so no process in
it can raise the hard limits :func:`~llmfs.course.grading.limits.apply_limits` set; its ``/tmp``
and its scratch folder are tmpfs of ``disk_mb`` each (``bwrap --size``), never the host's disk;
and where this machine lets the grader create control groups (:mod:`.cgroups`), the whole sandbox
is capped in memory and processes. :meth:`Isolation.enforcement` says which limits are in force.

Running as root: the sandbox is started as the unprivileged host user ``nobody``
(:data:`HOST_UID`, with ``setpriv``) when that user can read what is mounted, so that
``RLIMIT_NPROC``, which never binds root, counts the sandbox's processes; otherwise bubblewrap
acts with root's privileges, drops every capability (``--cap-drop ALL``) and mounts everything
read-only, and the process cap needs a control group. As a normal user it needs unprivileged user
namespaces (Debian's default); :func:`find_bwrap` tries one sandbox and names the failure when it
cannot start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.grading import cgroups
from llmfs.course.grading.limits import Limits

#: The files and folders of ``/etc`` a sandboxed Python process may read (when present).
ETC_ENTRIES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "passwd",
    "group",
    "nsswitch.conf",
    "hosts",
    "alternatives",
    "fonts",
    "mime.types",
    "ssl",
    "ca-certificates",
    "os-release",
)

#: The uid and gid the sandbox's processes have inside their user namespace (no capability).
SANDBOX_UID = 65534
#: The host user a grader running as root starts the sandbox as (``nobody``).
HOST_UID = 65534

RUN_PREFIX = "llmfs-run-"
_LOCK_NAME = "run.lock"
#: A run folder without its lock file is left alone this long (it may be being created).
_YOUNG_SECONDS = 60.0


def package_dir() -> Path:
    """The folder of the ``llmfs`` package (the one mounted in the sandbox)."""
    import llmfs  # the top package: only its location is wanted, at call time

    return Path(llmfs.__file__).resolve().parent


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class Isolation:
    """How sandboxed children start: with ``bwrap`` (the executable's path) never mounting
    ``hidden``. Build it with :func:`find_bwrap`."""

    bwrap: str
    hidden: tuple[Path, ...] = ()
    extra_env: tuple[tuple[str, str], ...] = field(default=())
    readable: tuple[Path, ...] = ()
    #: The host uid the sandbox starts as (a grader running as root); None: this process's.
    run_as: int | None = None
    #: Control groups each sandbox gets (controller -> where), empty where none can be made.
    controllers: tuple[tuple[str, cgroups.Controller], ...] = ()

    def with_hidden(self, paths: Iterable[Path]) -> Isolation:
        """A copy that also hides ``paths`` (resolved)."""
        more = tuple(Path(p).resolve() for p in paths)
        return replace(self, hidden=(*self.hidden, *more))

    def with_course(self, root: Path) -> Isolation:
        """A copy that mounts the course's public manifest (``course/manifest.toml`` under
        ``root``, read by the notebooks' widgets) and points ``LLMFS_COURSE_ROOT`` at it; the
        rest of the course folder (``solutions/`` above all) stays unmounted."""
        root = Path(root).resolve()
        manifest = root / "course" / "manifest.toml"
        env = (*self.extra_env, ("LLMFS_COURSE_ROOT", str(root)))
        return replace(self, readable=(*self.readable, manifest), extra_env=env)

    def mounts(self) -> list[tuple[str, Path]]:
        """The read-only folders and files mounted, as ("ro"|"symlink", path), system first."""
        found: list[tuple[str, Path]] = []
        for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
            path = Path("/") / name
            if path.is_symlink():
                found.append(("symlink", path))
            elif path.is_dir():
                found.append(("ro", path))
        found.append(("ro", Path("/usr")))
        for name in ETC_ENTRIES:
            path = Path("/etc") / name
            if path.exists():
                found.append(("ro", path))
        roots: list[Path] = []
        for prefix in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
            roots.append(Path(prefix).resolve())
        roots.append(Path(sys.executable).resolve().parent)
        package = package_dir()
        for entry in sys.path:
            if not entry or not os.path.isdir(entry):
                continue
            path = Path(entry).resolve()
            # A folder that holds the package (a checkout, or PYTHONPATH at its root) also holds
            # what the learner may not see: only the package folder itself is mounted.
            if _inside(package, path):
                continue
            # Nor the system's temporary folder (a script run from /tmp puts it on sys.path):
            # the sandbox's /tmp is its own, and other runs' files are there on the host.
            if _inside(Path(tempfile.gettempdir()).resolve(), path):
                continue
            roots.append(path)
        roots.append(package)
        roots.extend(p for p in self.readable if p.exists())
        kept: list[Path] = []
        for path in sorted(set(roots), key=lambda p: len(p.parts)):
            if path == Path("/") or any(_inside(path, k) for k in kept):
                continue
            if any(_inside(path, Path(m)) for kind, m in found if kind == "ro"):
                continue
            kept.append(path)
        found.extend(("ro", path) for path in kept)
        return found

    def python_path(self) -> list[str]:
        """``PYTHONPATH`` inside: the folder above the package (where only the package is
        mounted), then this process's own ``PYTHONPATH`` entries that are mounted."""
        package = package_dir()
        mounted = [path for kind, path in self.mounts() if kind == "ro"]
        entries = [str(package.parent)]
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
            if not entry:
                continue
            path = Path(entry).resolve()
            if _inside(package, path) or str(path) in entries:
                continue
            if any(_inside(path, folder) for folder in mounted):
                entries.append(str(path))
        return entries

    def command(
        self,
        argv: Sequence[str],
        *,
        scratch: Path,
        workdir: Path,
        env: dict[str, str],
        inputs: Sequence[Path] = (),
        disk_mb: int = Limits.disk_mb,
    ) -> list[str]:
        """The ``bwrap`` command that runs ``argv`` in ``workdir`` with ``env`` only.

        Inside, ``scratch`` (which holds ``workdir``) is a fresh tmpfs of ``disk_mb`` MiB, the
        one writable folder besides ``/tmp`` (another such tmpfs): nothing the sandbox writes
        reaches the host's disk, and the grader reads nothing back from it. ``inputs`` (files
        under ``scratch`` on the host) are mounted read-only at the same paths.
        """
        size = str(disk_mb * 1024 * 1024)
        # The private /tmp comes first: bubblewrap applies mounts in order, so a folder mounted
        # later under /tmp (a checkout or a virtual environment there, the scratch folder) is
        # laid on top of the tmpfs instead of being hidden by it.
        command = [self.bwrap, "--proc", "/proc", "--dev", "/dev", "--size", size]
        command += ["--tmpfs", "/tmp"]
        for kind, path in self.mounts():
            if kind == "symlink":
                command += ["--symlink", os.readlink(path), str(path)]
            else:
                command += ["--ro-bind", str(path), str(path)]
        command += ["--size", size, "--tmpfs", str(scratch), "--dir", str(workdir)]
        for path in inputs:
            command += ["--ro-bind", str(path), str(path)]
        mounted = [p for kind, p in self.mounts() if kind == "ro"]
        for path in self.hidden:
            if not any(_inside(path, m) for m in mounted):
                continue  # never mounted in the first place
            if path.is_dir():
                command += ["--tmpfs", str(path)]
            elif path.exists():
                command += ["--ro-bind", "/dev/null", str(path)]
        command += [
            "--unshare-all",
            "--unshare-user",
            "--uid",
            str(SANDBOX_UID),
            "--gid",
            str(SANDBOX_UID),
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
            "--chdir",
            str(workdir),
            "--clearenv",
        ]
        inside = dict(env)
        inside.update(dict(self.extra_env))
        inside["PYTHONPATH"] = os.pathsep.join(self.python_path())
        for name, value in sorted(inside.items()):
            command += ["--setenv", name, value]
        command = [*command, "--", *argv]
        if self.run_as is not None:
            command = [
                _setpriv(),
                f"--reuid={self.run_as}",
                f"--regid={self.run_as}",
                "--clear-groups",
                "--",
                *command,
            ]
        return command

    def share(self, *files: Path) -> None:
        """Lets the user the sandbox starts as read ``files`` (mounted as inputs): with
        :attr:`run_as`, each file becomes readable and the folders above it, up to the system's
        temporary folder, traversable (never listable)."""
        if self.run_as is None:
            return
        top = Path(tempfile.gettempdir()).resolve()
        for path in files:
            os.chmod(path, 0o644)
            folder = path.resolve().parent
            while _inside(folder, top) and folder != top:
                os.chmod(folder, os.stat(folder).st_mode & 0o777 | 0o111)
                folder = folder.parent

    def group(self, limits: Limits) -> cgroups.Group | None:
        """A new control group for one sandbox under these limits (None where there are no
        controllers, or one cannot be made now)."""
        if not self.controllers:
            return None
        # The whole sandbox: the kernel's address space, the runner beside it (about 256 MiB)
        # and the pages of its two tmpfs folders.
        memory = (limits.memory_mb + 2 * limits.disk_mb + 256) * 1024 * 1024
        try:
            return cgroups.create(dict(self.controllers), memory, limits.processes)
        except OSError:
            return None

    def enforcement(self, limits: Limits) -> tuple[tuple[str, str], ...]:
        """Each limit and how it is enforced in this sandbox, as (name, how); a limit this
        machine cannot enforce says ``NOT ENFORCED`` and why."""
        controllers = dict(self.controllers)
        rows = [
            (
                "memory",
                f"{limits.memory_mb} MiB of address space per process (hard RLIMIT_AS)"
                + (
                    f"; {limits.memory_mb + 2 * limits.disk_mb + 256} MiB for the whole "
                    f"sandbox (cgroup v{controllers['memory'].version} "
                    f"{controllers['memory'].limit_file})"
                    if "memory" in controllers
                    else "; no cgroup here: a sandbox's processes are each capped, not summed"
                ),
            ),
            ("cpu", f"{limits.total_timeout + 5:g} s of CPU per process (hard RLIMIT_CPU)"),
            ("file size", f"{limits.file_mb} MiB per file (hard RLIMIT_FSIZE)"),
            ("disk", f"/tmp and the scratch folder: tmpfs of {limits.disk_mb} MiB each"),
        ]
        ways = []
        if "pids" in controllers:
            ways.append(f"cgroup v{controllers['pids'].version} pids.max")
        if self.run_as is not None or os.geteuid() != 0:
            ways.append("hard RLIMIT_NPROC in the sandbox's user namespace")
        if ways:
            rows.append(("processes", f"{limits.processes} at once ({'; '.join(ways)})"))
        else:
            rows.append(
                (
                    "processes",
                    f"NOT ENFORCED: RLIMIT_NPROC never binds root, the user nobody cannot read "
                    f"the mounted files and no cgroup can be created (wanted {limits.processes})",
                )
            )
        rows.append(("capabilities", f"none: uid {SANDBOX_UID} in its own user namespace"))
        return tuple(rows)


def _setpriv() -> str:
    return shutil.which("setpriv") or "/usr/bin/setpriv"


def find_bwrap(scratch_parent: Path | None = None) -> Isolation:
    """The sandbox of this machine: ``bwrap`` on PATH (or ``/usr/bin/bwrap``), tried once (in a
    folder made under ``scratch_parent``, by default the system's temporary folder).

    Raises :class:`CourseError` when it is absent or cannot start a sandbox here (no user
    namespaces, say), naming what to install or the error it printed.
    """
    path = shutil.which("bwrap")
    if path is None and os.access("/usr/bin/bwrap", os.X_OK):
        path = "/usr/bin/bwrap"
    if path is None:
        raise CourseError(
            "no sandbox: bubblewrap (bwrap) is not installed; install it (Debian/Ubuntu: "
            "apt-get install bubblewrap), or grade in a Linux container or VM; --no-sandbox runs "
            "the students' code with your own rights"
        )
    found = cgroups.find_controllers()
    cgroups.remove_stale(found)  # the groups of graders killed before they removed them
    controllers = tuple(sorted(found.items()))
    tries: list[Isolation] = []
    if os.geteuid() == 0 and os.access(_setpriv(), os.X_OK):
        tries += [Isolation(path, run_as=HOST_UID, controllers=controllers)]
        if controllers:
            tries += [Isolation(path, run_as=HOST_UID)]
    tries += [Isolation(path, controllers=controllers)]
    if controllers:
        tries += [Isolation(path)]
    failure = ""
    for isolation in tries:
        failure = _probe(isolation, scratch_parent)
        if not failure:
            return isolation
    raise CourseError(
        f"no sandbox: {path} cannot start one here ({failure}); user namespaces may be disabled"
    )


def _probe(isolation: Isolation, scratch_parent: Path | None) -> str:
    """Why ``isolation`` cannot run a sandbox here (with its control group, as its user);
    ``""`` when it can."""
    with tempfile.TemporaryDirectory(prefix="llmfs-probe-", dir=scratch_parent) as name:
        scratch = Path(name)
        # One input file, mounted as the notebook runner's job is: the user the sandbox starts
        # as must be able to read it.
        given = scratch / "input.txt"
        given.write_text("llmfs", encoding="utf-8")
        isolation.share(given)
        code = f"import llmfs; assert open({str(given)!r}).read() == 'llmfs'"
        probe = isolation.command(
            [sys.executable, "-c", code], scratch=scratch, workdir=scratch, env={}, inputs=[given]
        )
        group = isolation.group(Limits())
        if isolation.controllers and group is None:
            return "no control group could be made"
        if group is not None:
            probe = cgroups.wrap(probe, group)
        try:
            done = subprocess.run(probe, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"it did not start: {error}"
        finally:
            if group is not None:
                group.close()
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return f"exit status {done.returncode}: {said[-1] if said else 'no message'}"
    return ""


# --------------------------------------------------------------------------------------------
# One scratch folder per grading run
# --------------------------------------------------------------------------------------------


class RunFolder:
    """A folder under the system's temporary folder for one process's scratch folders, locked
    (``flock``) while the process lives. Creating one removes the run folders whose lock is
    free: their process is gone, however it ended."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = Path(base or tempfile.gettempdir())
        remove_stale(self.base)
        self.path = Path(tempfile.mkdtemp(prefix=RUN_PREFIX, dir=self.base))
        self._lock = os.open(self.path / _LOCK_NAME, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        os.write(self._lock, str(os.getpid()).encode())

    def scratch(self, prefix: str) -> Path:
        """A new empty folder inside the run folder."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.path))

    def close(self) -> None:
        """Removes the run folder and everything in it."""
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._lock)


def remove_stale(base: Path) -> list[Path]:
    """Removes the run folders under ``base`` whose process is gone; returns them."""
    removed: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(RUN_PREFIX) or not entry.is_dir() or entry.is_symlink():
            continue
        lock = entry / _LOCK_NAME
        try:
            handle = os.open(lock, os.O_RDWR)
        except OSError:
            with contextlib.suppress(OSError):
                if time.time() - entry.stat().st_mtime > _YOUNG_SECONDS:
                    shutil.rmtree(entry, ignore_errors=True)
                    removed.append(entry)
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live run holds it
        finally:
            os.close(handle)
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed
