"""A real-browser harness: JupyterLab on 127.0.0.1 driven by headless Debian Chromium.

Usage (see ``conftest.py`` beside this file for the fixtures built on it)::

    with jupyterlab(root=notebook_folder, home=scratch) as server, chromium(profile) as context:
        page = open_notebook(context, server, "demo.ipynb")
        page.run_all()
        page.page.get_by_role("button", name="Run").click()
        page.screenshot("demo")

Everything is isolated and local: the server gets a fresh Jupyter config/data/runtime/settings/
workspace folder, a random token, a free port and the announcements extension disabled (no
pop-up, no news fetched); Chromium is Debian's ``/usr/bin/chromium`` driven by the ``playwright``
package (never ``playwright install``) with a fresh profile. Leaving a ``with`` block always stops
what it started: the server is asked to shut down (which stops its kernels), then terminated, and
any kernel process it had started and that is still alive is killed by its pid.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
REPO = Path(__file__).resolve().parents[2]
OUTPUT_DIR = REPO / "test-output" / "browser"
# A limit for a server that hangs, not a speed requirement: on a busy machine (both test workers
# starting kernels) JupyterLab has taken more than a minute to start, or to report bad config.
SERVER_START_TIMEOUT_S = 180.0
RUN_ALL_TIMEOUT_S = 60.0
PORT_ATTEMPTS = 3


class HarnessError(RuntimeError):
    """The server or the browser did not reach the state a test waits for (the reason says why)."""


def unavailable_reason() -> str | None:
    """Why browser tests cannot run on this machine, or None when they can."""
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is absent (apt-get install chromium)"
    for module in ("playwright", "jupyterlab", "ipywidgets", "anywidget"):
        if importlib.util.find_spec(module) is None:
            return f"the Python package {module!r} is not installed (pip install -e '.[test]')"
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _descendants(pid: int) -> list[int]:
    """Pids of every living descendant of ``pid`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.parent.name))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        return stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone
    return True


@dataclass
class LabServer:
    """A running JupyterLab: where it serves, with which token, and the process to stop."""

    root: Path
    port: int
    token: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def url(self) -> str:
        """The server's base URL, ending in a slash."""
        return f"http://127.0.0.1:{self.port}/"

    def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """Call the REST API (``path`` like ``api/kernels``); return the decoded JSON or None."""
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            payload = response.read()
        return json.loads(payload) if payload else None

    def kernel_pids(self) -> list[int]:
        """Pids of the processes this server started (its kernels) that are alive now."""
        return _descendants(self.process.pid)

    def log_tail(self, characters: int = 3000) -> str:
        """The end of the server's log, for failure messages."""
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-characters:]
        return ""

    def stop(self) -> None:
        """Stop the server and every kernel it started; safe to call more than once."""
        started = self.kernel_pids()
        if self.process.poll() is None:
            with contextlib.suppress(OSError, urllib.error.URLError, TimeoutError):
                self.api("POST", "api/shutdown")
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.terminate()
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(timeout=5)
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
            time.sleep(0.1)
        for pid in started:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def _write_profile(home: Path) -> dict[str, str]:
    """Create a fresh Jupyter profile under ``home``; return the environment that selects it."""
    folders = {
        "JUPYTER_CONFIG_DIR": home / "config",
        "JUPYTER_DATA_DIR": home / "data",
        "JUPYTER_RUNTIME_DIR": home / "runtime",
        "JUPYTERLAB_SETTINGS_DIR": home / "settings",
        "JUPYTERLAB_WORKSPACES_DIR": home / "workspaces",
        "IPYTHONDIR": home / "ipython",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    labconfig = folders["JUPYTER_CONFIG_DIR"] / "labconfig"
    labconfig.mkdir(exist_ok=True)
    (labconfig / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {ANNOUNCEMENTS_PLUGIN: True}}, indent=1)
    )
    env = {name: str(path) for name, path in folders.items()}
    env["LLMFS_ATTEMPTS"] = str(home / "attempts.jsonl")
    return env


@contextlib.contextmanager
def jupyterlab(root: Path, home: Path) -> Iterator[LabServer]:
    """Start JupyterLab serving ``root`` with a fresh profile under ``home``; stop it on exit.

    Raises :class:`HarnessError` (with the server log's tail) when the server exits or does not
    answer ``/api/status`` within ``SERVER_START_TIMEOUT_S``.
    """
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **_write_profile(home)}
    token = secrets.token_hex(16)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        server = _start_server(root, home, env, token, free_port())
        try:
            _wait_until_ready(server)
        except HarnessError:
            server.stop()
            # Another process may take the free port between probing and binding: try another.
            if attempt < PORT_ATTEMPTS and "already in use" in server.log_tail():
                continue
            raise
        break
    try:
        yield server
    finally:
        server.stop()


#: ``python -m jupyterlab``, less one import: jsonschema loads ``rfc3987_syntax`` when it is
#: installed, which builds its IRI grammar for seconds of CPU at every start, and it only checks
#: the ``iri`` formats, which no schema of the server's events uses.
LAB_MAIN = (
    "import sys; sys.modules['rfc3987_syntax'] = None; "
    "from jupyterlab.labapp import main; sys.exit(main())"
)


def _start_server(root: Path, home: Path, env: dict[str, str], token: str, port: int) -> LabServer:
    log_path = home / "jupyterlab.log"
    command = [
        sys.executable,
        "-c",
        LAB_MAIN,
        "--allow-root",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.root_dir={root}",
        f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.news_url=None",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=home,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return LabServer(root=root, port=port, token=token, process=process, log_path=log_path)


def _wait_until_ready(server: LabServer) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise HarnessError(
                f"JupyterLab exited with status {server.process.returncode} before it was ready:\n"
                + server.log_tail()
            )
        with contextlib.suppress(OSError, urllib.error.URLError, TimeoutError, ValueError):
            server.api("GET", "api/status")
            return
        time.sleep(0.25)
    raise HarnessError(
        f"JupyterLab did not answer within {SERVER_START_TIMEOUT_S:.0f} s:\n" + server.log_tail()
    )


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A Playwright persistent context in headless Debian Chromium with a fresh ``profile``."""
    from playwright.sync_api import sync_playwright

    if profile.exists():
        shutil.rmtree(profile)
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(CHROMIUM),
            headless=True,
            args=list(CHROMIUM_FLAGS),
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


_NOTEBOOK_READY = """() => {
  const app = window.jupyterapp;
  const panel = app && app.shell.currentWidget;
  if (!panel || !panel.content || !panel.sessionContext) return false;
  const session = panel.sessionContext.session;
  return !!(session && session.kernel && session.kernel.status === 'idle'
            && panel.context && panel.context.isReady);
}"""

_RUN_STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const session = panel.sessionContext.session;
  const cells = panel.content.widgets.filter(
    (cell) => cell.model.type === 'code' && cell.model.sharedModel.getSource().trim() !== '');
  const errors = [];
  let executed = 0;
  for (const cell of cells) {
    if (cell.model.executionCount !== null) executed += 1;
    const outputs = cell.model.outputs;
    for (let i = 0; i < outputs.length; i += 1) {
      const output = outputs.get(i).toJSON();
      if (output.output_type === 'error') errors.push(output.ename + ': ' + output.evalue);
    }
  }
  return {kernel: session && session.kernel ? session.kernel.status : 'none',
          executed: executed, code_cells: cells.length, errors: errors};
}"""


_CELL_BY_TAG = """(tag) => {
  const panel = window.jupyterapp.shell.currentWidget;
  const index = panel.content.widgets.findIndex(
    (cell) => (cell.model.getMetadata('tags') || []).includes(tag));
  return index;
}"""

_SET_SOURCE = """([index, source]) => {
  const panel = window.jupyterapp.shell.currentWidget;
  panel.content.widgets[index].model.sharedModel.setSource(source);
}"""

_CELL_SOURCE = """(index) => {
  const panel = window.jupyterapp.shell.currentWidget;
  return panel.content.widgets[index].model.sharedModel.getSource();
}"""

_RUN_CELL = """async (index) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  panel.content.activeCellIndex = index;
  panel.content.deselectAll();
  await app.commands.execute('notebook:run-cell');
  return panel.content.widgets[index].model.executionCount;
}"""


@dataclass
class NotebookPage:
    """An open notebook in the browser; ``page`` is the Playwright page for DOM checks."""

    page: Any
    server: LabServer
    path: str

    def state(self) -> dict[str, Any]:
        """Kernel status, executed/total non-empty code cells, error outputs (``ename: evalue``)."""
        return dict(self.page.evaluate(_RUN_STATE))

    def run_all(self, timeout_s: float = RUN_ALL_TIMEOUT_S) -> dict[str, Any]:
        """Run every cell and wait until the kernel is idle and each code cell ran (or one failed).

        Returns :meth:`state`. Raises :class:`HarnessError` if that does not happen in time.
        """
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        deadline = time.monotonic() + timeout_s
        state = self.state()
        while time.monotonic() < deadline:
            state = self.state()
            finished = state["executed"] == state["code_cells"] or state["errors"]
            if state["kernel"] == "idle" and finished:
                return state
            time.sleep(0.2)
        raise HarnessError(f"{self.path}: run-all did not finish within {timeout_s:.0f} s: {state}")

    def screenshot(self, name: str) -> Path:
        """Save a full-page PNG as ``test-output/browser/<name>.png`` and return its path."""
        OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
        path = OUTPUT_DIR / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)
        return path

    def cell_index(self, tag: str) -> int:
        """The 0-based position of the cell tagged ``tag``; :class:`HarnessError` if none is."""
        index = int(self.page.evaluate(_CELL_BY_TAG, tag))
        if index < 0:
            raise HarnessError(f"{self.path}: no cell is tagged {tag!r}")
        return index

    def cell_source(self, tag: str) -> str:
        """The current source of the cell tagged ``tag``."""
        return str(self.page.evaluate(_CELL_SOURCE, self.cell_index(tag)))

    def set_cell_source(self, tag: str, source: str) -> None:
        """Replace the source of the cell tagged ``tag`` (as a learner typing an answer would)."""
        self.page.evaluate(_SET_SOURCE, [self.cell_index(tag), source])

    def cell_output(self, tag: str) -> Any:
        """The Playwright locator of the output area of the cell tagged ``tag``."""
        position = self.cell_index(tag) + 1
        cell = self.page.locator(".jp-Notebook .jp-Cell").nth(position - 1)
        return cell.locator(".jp-OutputArea")

    def run_cell(self, tag: str, timeout_s: float = RUN_ALL_TIMEOUT_S) -> dict[str, Any]:
        """Run the cell tagged ``tag``, then wait until the kernel is idle; return :meth:`state`."""
        self.page.evaluate(_RUN_CELL, self.cell_index(tag))
        deadline = time.monotonic() + timeout_s
        state = self.state()
        while time.monotonic() < deadline:
            state = self.state()
            if state["kernel"] == "idle":
                return state
            time.sleep(0.1)
        raise HarnessError(f"{self.path}: cell {tag!r} did not finish within {timeout_s:.0f} s")

    def close(self) -> None:
        """Close the page and shut down the notebook's kernel."""
        with contextlib.suppress(Exception):
            self.page.close()
        with contextlib.suppress(OSError, urllib.error.URLError, TimeoutError):
            for session in self.server.api("GET", "api/sessions"):
                if session.get("path") == self.path:
                    self.server.api("DELETE", f"api/sessions/{session['id']}")


def open_notebook(
    context: Any, server: LabServer, path: str, timeout_s: float = 60
) -> NotebookPage:
    """Open ``path`` (relative to the server root) in a new page; wait for its idle kernel.

    Raises :class:`HarnessError` (with the server log's tail) if the notebook or its kernel is
    not ready within ``timeout_s``.
    """
    page = context.new_page()
    page.goto(f"{server.url}lab/tree/{path}?reset&token={server.token}")
    try:
        page.wait_for_function(_NOTEBOOK_READY, timeout=timeout_s * 1000)
    except Exception as error:
        page.close()
        raise HarnessError(
            f"{path}: the notebook or its kernel was not ready: {error}\n" + server.log_tail()
        ) from None
    return NotebookPage(page=page, server=server, path=path)


#: Whether the page's background is as light (or dark) as the argument asks (by luminance).
_DRAWN_IN_THEME = """(light) => {
  const channels = getComputedStyle(document.body).backgroundColor.match(/[0-9.]+/g);
  if (!channels || channels.length < 3) return false;
  const [r, g, b] = channels.map(Number);
  const luminance = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  return light ? luminance > 0.5 : luminance < 0.5;
}"""
#: Resolves once the fonts are ready and two more frames have been painted.
_PAINTED = """() => document.fonts.ready.then(
  () => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))
)"""


def change_theme(notebook: Any, name: str, light: bool) -> None:
    """Switches JupyterLab to the theme ``name`` (``light`` says which kind it is) and waits
    until its stylesheet applies."""
    notebook.page.evaluate(
        "(t) => window.jupyterapp.commands.execute('apputils:change-theme', {theme: t})", name
    )
    flag = "true" if light else "false"
    notebook.page.wait_for_selector(
        f'body[data-jp-theme-light="{flag}"]', state="attached", timeout=30_000
    )
    # The attribute is set once the theme's stylesheet has loaded; wait until the page is drawn
    # in it (its background light or dark as asked), its fonts are ready and two frames have
    # been painted, so that a screenshot shows the new theme throughout.
    notebook.page.wait_for_function(_DRAWN_IN_THEME, arg=light, timeout=30_000)
    notebook.page.evaluate(_PAINTED)


def element_shot(locator: Any, name: str) -> Path:
    """Saves a PNG of one element (scrolled into view) as ``test-output/browser/<name>.png``."""
    OUTPUT_DIR.mkdir(parents=True, exist_ok=True)
    path = OUTPUT_DIR / f"{name}.png"
    locator.scroll_into_view_if_needed()
    locator.screenshot(path=str(path))
    return path
