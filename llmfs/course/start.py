"""``llmfs start``: copy the course into the learner's working folder and open JupyterLab there.

The working folder (default ``~/llmfs-course``, option ``--dir``) receives the student notebook
of every published chapter and the learner guide, side by side. A file the learner already has
is never overwritten:

* a new chapter is added;
* when the course ships a changed version of a file the learner has changed (or answered), the
  new version is written beside it as ``NAME.updated.ipynb`` (``learner_guide.updated.md``) and a
  message says so; the learner's copy is untouched. An ``.updated`` file is refreshed by later
  runs only while the learner has not edited it.

What was shipped is remembered in ``.llmfs/course-state.json`` in the folder, so that answering
exercises alone never produces an ``.updated`` file. The folder itself may be created, but not its
parent: a mistyped ``--dir`` must not build a whole tree of folders.

JupyterLab then starts in the folder, saving widget state in notebooks (:func:`lab_settings`), on
``--ip`` (an IPv4 or IPv6 address, or ``localhost``; default 127.0.0.1) and ``--port`` (1 to
65535), with the announcements extension disabled and no update check, so nothing is downloaded;
exercise attempts are logged in ``.llmfs/attempts.jsonl`` of the folder. A port given with
``--port`` must be free (it is an error otherwise); without ``--port``, 8888 is used when free and
another free port, announced, when not. ``llmfs start`` owns JupyterLab's lifetime: SIGINT
(Ctrl+C), SIGTERM or SIGHUP stop JupyterLab too (SIGTERM, then SIGKILL if it has not exited within
:data:`STOP_TIMEOUT` seconds or on a second signal)."""

from __future__ import annotations

import argparse
import errno
import hashlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from llmfs.course import CourseError
from llmfs.course.manifest import Manifest, load_manifest
from llmfs.course.paths import DEFAULT_FOLDER

STATE_FILE = Path(".llmfs") / "course-state.json"
ATTEMPTS_FILE = Path(".llmfs") / "attempts.jsonl"
LAB_CONFIG = Path(".llmfs") / "jupyter-config"
LAB_SETTINGS = Path(".llmfs") / "jupyterlab-settings"
#: JupyterLab settings the course overrides. Widget state is saved in the notebook file, so a
#: storage diagram reopened without its kernel (after a restart, or with the kernel closed)
#: draws from the saved state instead of "Error displaying widget: model not found".
SETTINGS_OVERRIDES: dict[str, dict[str, object]] = {
    "@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True},
}
GUIDE = Path("course") / "learner_guide.md"
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
# TCP ports are 16-bit. 0 ("any free port") is refused: jupyter_server releases older than its
# fix for issue 1650 then print the URL with port 0 instead of the port they bound.
PORT_RANGE = (1, 65535)
#: JupyterLab's own default port, used when ``--port`` is left out and it is free.
DEFAULT_PORT = 8888
#: Seconds JupyterLab gets to shut down after SIGTERM before it is killed.
STOP_TIMEOUT = 10.0
#: The signals that stop ``llmfs start`` and, through it, JupyterLab.
STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


@dataclass(frozen=True)
class CopyResult:
    """What happened to one course file: ``added``, ``unchanged`` or ``update-beside``/``kept``."""

    name: str
    action: str
    message: str


def course_files(manifest: Manifest) -> list[tuple[Path, str]]:
    """(source path, name in the learner folder) for every file a learner gets, in course order.

    Raises :class:`CourseError` naming the file when a published chapter's student notebook or
    the learner guide is missing from the installation.
    """
    files = [
        (manifest.root / chapter.notebook, Path(chapter.notebook).name)
        for chapter in manifest.published_chapters
    ]
    files.append((manifest.root / GUIDE, GUIDE.name))
    for source, _ in files:
        if not source.is_file():
            raise CourseError(f"{source}: a course file is missing from this installation")
    return files


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _updated_name(name: str) -> str:
    stem, dot, suffix = name.rpartition(".")
    return f"{stem}.updated.{suffix}" if dot else f"{name}.updated"


def _load_state(folder: Path) -> dict[str, dict[str, str]]:
    path = folder / STATE_FILE
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"shipped": {}, "updates": {}}
    except (OSError, json.JSONDecodeError) as error:
        raise CourseError(
            f"{path}: unreadable course state ({error}); delete it to reset"
        ) from None
    if not isinstance(state, dict):
        raise CourseError(f"{path}: the course state must be a JSON object; delete it to reset")
    return {"shipped": dict(state.get("shipped", {})), "updates": dict(state.get("updates", {}))}


def check_folder(folder: Path) -> None:
    """Checks that ``folder`` can be the course folder: an existing folder, or a new one whose
    parent exists.

    Raises :class:`CourseError` when the parent is missing (saying how to create it: only the
    last folder is ever created, so a typo cannot build a tree) or when ``folder`` is a file.
    """
    if folder.exists() and not folder.is_dir():
        raise CourseError(f"{folder}: exists and is not a folder; choose another --dir")
    parent = folder.parent
    if not folder.exists() and not parent.is_dir():
        raise CourseError(
            f"{folder}: its parent folder {parent} does not exist; create it first with: "
            f"mkdir -p {parent}"
        )


def copy_course(manifest: Manifest, folder: Path) -> list[CopyResult]:
    """Copy the course into ``folder`` without overwriting any learner file; see the module doc.

    Returns one :class:`CopyResult` per course file, in course order. Raises
    :class:`CourseError` when a course file is missing, the folder's parent does not exist (see
    :func:`check_folder`) or the folder cannot be written.
    """
    files = course_files(manifest)
    check_folder(folder)
    try:
        folder.mkdir(exist_ok=True)
        state = _load_state(folder)
        results = [_copy_one(source, folder, name, state) for source, name in files]
        state_path = folder / STATE_FILE
        state_path.parent.mkdir(parents=True, exist_ok=True)
        state_path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as error:
        raise CourseError(f"{folder}: cannot copy the course there ({error})") from None
    return results


def _copy_one(
    source: Path, folder: Path, name: str, state: dict[str, dict[str, str]]
) -> CopyResult:
    data = source.read_bytes()
    shipped = _digest(data)
    target = folder / name
    if not target.exists():
        target.write_bytes(data)
        state["shipped"][name] = shipped
        return CopyResult(name, "added", f"added {name}")
    current = target.read_bytes()
    if current == data or state["shipped"].get(name) == shipped:
        state["shipped"][name] = shipped
        return CopyResult(name, "unchanged", f"{name}: up to date")
    beside_name = _updated_name(name)
    beside = folder / beside_name
    if beside.exists():
        existing = beside.read_bytes()
        if existing != data and _digest(existing) != state["updates"].get(name):
            return CopyResult(
                name,
                "kept",
                f"{name}: a newer version exists, but you have edited {beside_name}, so it was "
                f"left as it is (rename it, then run llmfs start again to get the update)",
            )
    beside.write_bytes(data)
    state["shipped"][name] = state["updates"][name] = shipped
    return CopyResult(
        name,
        "update-beside",
        f"{name}: the course has an update; it is in {beside_name} beside your copy "
        "(your copy is unchanged)",
    )


def lab_environment(folder: Path) -> dict[str, str]:
    """The environment JupyterLab runs with: announcements off, attempts logged in ``folder``.

    Writes ``.llmfs/jupyter-config/labconfig/page_config.json`` in the folder and puts that
    config folder first on ``JUPYTER_CONFIG_PATH``; the learner's own Jupyter config still applies.
    """
    config = folder / LAB_CONFIG
    (config / "labconfig").mkdir(parents=True, exist_ok=True)
    page_config = {"disabledExtensions": {ANNOUNCEMENTS_PLUGIN: True}}
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps(page_config, indent=1) + "\n", encoding="utf-8"
    )
    env = dict(os.environ)
    existing = env.get("JUPYTER_CONFIG_PATH")
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(filter(None, [str(config), existing]))
    env["LLMFS_ATTEMPTS"] = str(folder / ATTEMPTS_FILE)
    return env


def check_port(port: object) -> int:
    """``port`` itself when it is an integer TCP port from 1 to 65535.

    Raises :class:`CourseError` naming the range and the value otherwise (JupyterLab would fail
    with a socket traceback on a negative port, or print a URL that cannot work above 65535).
    """
    low, high = PORT_RANGE
    if isinstance(port, bool) or not isinstance(port, int):
        raise CourseError(
            f"the port must be a whole number from {low} to {high}, got {type(port).__name__} "
            f"{port!r}"
        )
    if not low <= port <= high:
        raise CourseError(
            f"the port must be from {low} to {high} (a TCP port), got {port}; leave out --port "
            f"for JupyterLab's default 8888"
        )
    return port


def _port_argument(text: str) -> int:
    # An argparse type: a bad --port becomes a usage error (exit status 2), not a traceback.
    try:
        port = int(text)
    except ValueError:
        low, high = PORT_RANGE
        raise argparse.ArgumentTypeError(
            f"the port must be a whole number from {low} to {high}, got {text!r}"
        ) from None
    try:
        return check_port(port)
    except CourseError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def check_ip(ip: object) -> str:
    """``ip`` itself when it is ``localhost`` or an IPv4 or IPv6 address (``127.0.0.1``, ``::1``,
    ``0.0.0.0`` for every interface).

    Raises :class:`CourseError` otherwise: JupyterLab would fail with pages of tracebacks.
    """
    if ip == "localhost":
        return ip
    try:
        ipaddress.ip_address(ip)  # type: ignore[arg-type]
    except ValueError:
        raise CourseError(
            f"the address must be an IPv4 or IPv6 address or 'localhost' (for example 127.0.0.1 "
            f"or ::1), got {ip!r}"
        ) from None
    return str(ip)


def _ip_argument(text: str) -> str:
    # An argparse type: a bad --ip is a one-line usage error (exit status 2), not a traceback.
    try:
        return check_ip(text)
    except CourseError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def port_is_free(ip: str, port: int) -> bool:
    """True when a server could listen on ``port`` at ``ip`` now (every address ``ip`` names).

    Binds the way JupyterLab's server does (``SO_REUSEADDR`` on POSIX, so a port whose old
    connections are still closing counts as free), then releases the port at once. Raises
    :class:`CourseError` when ``ip`` is not an address of this machine (nothing could listen
    there, whatever the port).
    """
    try:
        addresses = socket.getaddrinfo(ip, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror:
        return True  # nothing to probe; JupyterLab reports its own failure
    bound = 0
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as probe:
            if os.name == "posix":
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRNOTAVAIL:
                    continue  # e.g. ::1 on a machine without IPv6: JupyterLab skips it too
                return False
            bound += 1
    if not bound:
        raise CourseError(
            f"{ip} is not an address of this machine, so JupyterLab cannot listen there; leave "
            f"out --ip for 127.0.0.1 (this computer only)"
        )
    return True


def _any_free_port(ip: str) -> int:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((ip, 0))
        return int(probe.getsockname()[1])


def choose_port(ip: str, requested: int | None) -> tuple[int, str | None]:
    """The port JupyterLab should use, and a message for the learner when it is not the one
    they would expect.

    A requested port (``--port``) must be free: otherwise :class:`CourseError` names it and says
    what to do. Without a request, :data:`DEFAULT_PORT` is used when free, else any free port,
    with a message saying so.
    """
    if requested is not None:
        port = check_port(requested)
        if not port_is_free(ip, port):
            raise CourseError(
                f"port {port} is already in use on {ip} (is another JupyterLab running?): stop "
                f"what uses it, choose another port with --port, or leave out --port to use a "
                f"free one"
            )
        return port, None
    if port_is_free(ip, DEFAULT_PORT):
        return DEFAULT_PORT, None
    port = _any_free_port(ip)
    return port, f"port {DEFAULT_PORT} is in use, so JupyterLab uses port {port}"


def _environment_lab_settings() -> Path:
    # JupyterLab's application settings folder of this environment (where it looks for
    # overrides.json when not told otherwise).
    lab = os.environ.get("JUPYTERLAB_DIR") or str(Path(sys.prefix) / "share" / "jupyter" / "lab")
    return Path(lab) / "settings"


def lab_settings(folder: Path, environment: Path | None = None) -> Path:
    """Writes the application settings folder JupyterLab runs with and returns it.

    It is ``.llmfs/jupyterlab-settings`` in the course folder: a copy of the environment's own
    application settings (``environment``, default this environment's; its ``overrides.json``,
    ``overrides.d`` and the rest) plus ``overrides.d/llmfs-course.json`` holding
    :data:`SETTINGS_OVERRIDES`, so the course's defaults apply while a learner's own user
    settings still win. Rewritten on every start."""
    target = folder / LAB_SETTINGS
    source = environment if environment is not None else _environment_lab_settings()
    if target.exists():
        shutil.rmtree(target)
    if source.is_dir():
        shutil.copytree(source, target)
    (target / "overrides.d").mkdir(parents=True, exist_ok=True)
    (target / "overrides.d" / "llmfs-course.json").write_text(
        json.dumps(SETTINGS_OVERRIDES, indent=1) + "\n", encoding="utf-8"
    )
    return target


def lab_command(
    folder: Path,
    *,
    ip: str,
    port: int | None,
    open_browser: bool,
    exact_port: bool = True,
    settings: Path | None = None,
) -> list[str]:
    """The JupyterLab command line for ``folder`` (this interpreter, so kernels import llmfs).

    ``settings`` is the application settings folder (:func:`lab_settings`); ``None`` leaves
    JupyterLab's own. ``port=None`` leaves JupyterLab's default. With ``exact_port`` JupyterLab
    is told not to move to another port when ``port`` is taken (it exits with an error
    instead). Raises
    :class:`CourseError` for a port outside 1..65535 (see :func:`check_port`).
    """
    if port is not None:
        port = check_port(port)
    command = [
        sys.executable,
        "-m",
        "jupyterlab",
        f"--ServerApp.root_dir={folder}",
        f"--ServerApp.ip={ip}",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
    ]
    if settings is not None:
        command.append(f"--LabApp.app_settings_dir={settings}")
    if port is not None:
        command.append(f"--ServerApp.port={port}")
        if exact_port:
            command.append("--ServerApp.port_retries=0")
    if not open_browser:
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")  # containers often run as root; Jupyter refuses otherwise
    return command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``llmfs start``."""
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_FOLDER,
        help=f"your course folder (default: {DEFAULT_FOLDER})",
    )
    parser.add_argument(
        "--port",
        type=_port_argument,
        default=None,
        help="JupyterLab's port, from 1 to 65535; it must be free (default: 8888, or another "
        "free port when 8888 is in use)",
    )
    parser.add_argument(
        "--ip",
        type=_ip_argument,
        default="127.0.0.1",
        help="IPv4 or IPv6 address or 'localhost' to listen on (default 127.0.0.1)",
    )
    parser.add_argument(
        "--no-browser", action="store_true", help="do not open a web browser; print the URL only"
    )
    parser.add_argument(
        "--copy-only", action="store_true", help="copy or update the course files, then exit"
    )


def main(args: argparse.Namespace) -> int:
    """Run ``llmfs start``: copy the course, then run JupyterLab until it exits (its status).

    Bad options (a missing parent folder, a port in use) are reported before anything is copied
    or started, with exit status 2.
    """
    folder = Path(args.dir).expanduser().resolve()
    try:
        check_folder(folder)
        port, note = (None, None) if args.copy_only else choose_port(args.ip, args.port)
        results = copy_course(load_manifest(), folder)
    except CourseError as error:
        print(f"llmfs start: {error}", file=sys.stderr)
        return 2
    for result in results:
        if result.action != "unchanged":
            print(result.message)
    print(f"Your course folder: {folder}")
    if args.copy_only:
        return 0
    served = running_server(folder)
    if served is not None:
        print(
            f"llmfs start: JupyterLab already serves {folder} (process {served.get('pid')}) at "
            f"{served.get('url', '?')}: open that address (its terminal printed the full link "
            "with its token), or stop that server (Ctrl+C in its terminal) before starting "
            "another one",
            file=sys.stderr,
        )
        return 1
    if note:
        print(f"llmfs start: {note}")
    try:
        command = lab_command(
            folder,
            ip=args.ip,
            port=port,
            open_browser=not args.no_browser,
            exact_port=args.port is not None,
            settings=lab_settings(folder),
        )
    except CourseError as error:
        print(f"llmfs start: {error}", file=sys.stderr)
        return 2
    return run_lab(command, cwd=folder, env=lab_environment(folder))


def running_server(folder: Path) -> dict[str, Any] | None:
    """The Jupyter server already serving ``folder`` (its info: ``url``, ``pid``, ``root_dir``...),
    or None.

    Read from the server info files Jupyter keeps in its runtime folder (``jupyter --runtime-dir``,
    or ``$JUPYTER_RUNTIME_DIR``); a file whose process is gone does not count. A second server on
    the same folder would run its own kernels beside the first one's, on the same notebooks, and
    the learner would not know which tab saves last.
    """
    # Imported here: jupyter_core comes with the course's dependencies, which only this command
    # needs (``llmfs demo`` or ``llmfs --help`` run without them). jupyter_server's own
    # list_running_servers reads the same files, but importing the server costs seconds.
    from jupyter_core.paths import jupyter_runtime_dir

    runtime = Path(jupyter_runtime_dir())
    for path in sorted(runtime.glob("jpserver-*.json")) if runtime.is_dir() else []:
        try:
            info = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # being written, or not a server's file
        if not isinstance(info, dict) or not _alive(info.get("pid")):
            continue
        root = info.get("root_dir")
        if isinstance(root, str) and Path(root).expanduser().resolve() == folder:
            return info
    return None


def _alive(pid: object) -> bool:
    """True when ``pid`` is a process id of a running process (signal 0 tests, sends nothing)."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, run by another user
    except OSError:
        return False
    return True


def run_lab(command: list[str], *, cwd: Path, env: dict[str, str]) -> int:
    """Runs JupyterLab's ``command`` until it exits and returns its exit status.

    While it runs, :data:`STOP_SIGNALS` sent to this process stop JupyterLab too, so it is never
    left running without ``llmfs start``: the first signal sends it SIGTERM (it shuts its kernels
    down and exits), and it is killed when it has not exited :data:`STOP_TIMEOUT` seconds later
    or when a second signal arrives. The status is then ``128 + the signal number``, as a shell
    reports a process stopped by that signal. JupyterLab runs in its own session, so Ctrl+C in
    the terminal reaches it only this way.
    """
    received: list[int] = []
    process: subprocess.Popen[bytes] | None = None
    killer = threading.Timer(STOP_TIMEOUT, lambda: _kill(process, "did not stop in time"))
    killer.daemon = True

    def stop(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if process is None or process.poll() is not None:
            return
        if len(received) == 1:
            name = signal.Signals(signum).name
            print(f"llmfs start: {name} received, stopping JupyterLab", file=sys.stderr)
            process.terminate()
            killer.start()
        else:
            _kill(process, "a second signal arrived")

    handlers = threading.current_thread() is threading.main_thread()
    previous = {number: signal.signal(number, stop) for number in STOP_SIGNALS} if handlers else {}
    try:
        try:
            process = subprocess.Popen(
                command, cwd=cwd, env=env, start_new_session=os.name == "posix"
            )
        except OSError as error:
            print(f"llmfs start: cannot run JupyterLab ({error})", file=sys.stderr)
            return 2
        if received:  # a signal arrived while JupyterLab was being started
            stop(received.pop(), None)
        status = process.wait()
        return 128 + received[0] if received else status
    finally:
        killer.cancel()
        if process is not None and process.poll() is None:  # an unexpected exception
            _kill(process, "llmfs start is exiting")
            process.wait()
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)


def _kill(process: subprocess.Popen[bytes] | None, why: str) -> None:
    """Kills JupyterLab and what it started in its session (kernels, terminals); the caller
    reaps it."""
    if process is None or process.poll() is not None:
        return
    print(f"llmfs start: killing JupyterLab ({why})", file=sys.stderr)
    try:
        if os.name == "posix":
            os.killpg(process.pid, signal.SIGKILL)
        else:
            process.kill()
    except (ProcessLookupError, PermissionError):
        pass
