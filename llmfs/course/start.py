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
exercises alone never produces an ``.updated`` file. JupyterLab then starts in the folder on
``--ip`` (default 127.0.0.1) and ``--port`` (1 to 65535), with the announcements extension
disabled and no update check, so nothing is downloaded; exercise attempts are logged in
``.llmfs/attempts.jsonl`` of the folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from llmfs.course import CourseError
from llmfs.course.manifest import Manifest, load_manifest

DEFAULT_FOLDER = Path("~/llmfs-course")
STATE_FILE = Path(".llmfs") / "course-state.json"
ATTEMPTS_FILE = Path(".llmfs") / "attempts.jsonl"
LAB_CONFIG = Path(".llmfs") / "jupyter-config"
GUIDE = Path("course") / "learner_guide.md"
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
# TCP ports are 16-bit. 0 ("any free port") is refused: jupyter_server releases older than its
# fix for issue 1650 then print the URL with port 0 instead of the port they bound.
PORT_RANGE = (1, 65535)


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


def copy_course(manifest: Manifest, folder: Path) -> list[CopyResult]:
    """Copy the course into ``folder`` without overwriting any learner file; see the module doc.

    Returns one :class:`CopyResult` per course file, in course order. Raises
    :class:`CourseError` when a course file is missing or the folder cannot be written.
    """
    files = course_files(manifest)
    try:
        folder.mkdir(parents=True, exist_ok=True)
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


def lab_command(folder: Path, *, ip: str, port: int | None, open_browser: bool) -> list[str]:
    """The JupyterLab command line for ``folder`` (this interpreter, so kernels import llmfs).

    ``port=None`` leaves JupyterLab's default. Raises :class:`CourseError` for a port outside
    1..65535 (see :func:`check_port`).
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
    if port is not None:
        command.append(f"--ServerApp.port={port}")
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
        help="JupyterLab's port, from 1 to 65535 (default 8888)",
    )
    parser.add_argument(
        "--ip", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--no-browser", action="store_true", help="do not open a web browser; print the URL only"
    )
    parser.add_argument(
        "--copy-only", action="store_true", help="copy or update the course files, then exit"
    )


def main(args: argparse.Namespace) -> int:
    """Run ``llmfs start``: copy the course, then run JupyterLab until it exits (its status)."""
    folder = Path(args.dir).expanduser().resolve()
    try:
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
    try:
        command = lab_command(folder, ip=args.ip, port=args.port, open_browser=not args.no_browser)
    except CourseError as error:
        print(f"llmfs start: {error}", file=sys.stderr)
        return 2
    try:
        process = subprocess.Popen(command, cwd=folder, env=lab_environment(folder))
    except OSError as error:
        print(f"llmfs start: cannot run JupyterLab ({error})", file=sys.stderr)
        return 2
    while True:
        try:
            return process.wait()
        except KeyboardInterrupt:
            continue  # JupyterLab handles Ctrl+C itself (it asks before shutting down)
