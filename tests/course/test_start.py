"""`llmfs start`: copying the course into a learner folder without overwriting, and launching."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from coursekit import chapter_toml, code, notebook, write_manifest, write_notebook

from llmfs import cli
from llmfs.course import CourseError, start
from llmfs.course.manifest import load_manifest
from llmfs.course.start import (
    check_folder,
    check_ip,
    choose_port,
    copy_course,
    lab_command,
    lab_settings,
    port_is_free,
)

# JupyterLab is started for real, and stopped by signals (scheduled early).
pytestmark = pytest.mark.slow


def _course(root: Path) -> Path:
    """A course with one published chapter (its student notebook) and the learner guide."""
    manifest = write_manifest(root, chapter_toml("ch01", "ch01_a", []))
    write_notebook(root / "notebooks" / "ch01_a.ipynb", notebook(code("c1", "x = 1")))
    (root / "course" / "learner_guide.md").write_text("# Guide\n")
    return manifest


def _actions(results) -> dict[str, str]:
    return {result.name: result.action for result in results}


def test_a_first_start_adds_every_chapter_and_the_guide(tmp_path: Path) -> None:
    manifest = load_manifest(_course(tmp_path / "src"))
    learner = tmp_path / "learner"
    assert _actions(copy_course(manifest, learner)) == {
        "ch01_a.ipynb": "added",
        "learner_guide.md": "added",
    }
    assert (learner / "ch01_a.ipynb").read_bytes() == (
        tmp_path / "src" / "notebooks" / "ch01_a.ipynb"
    ).read_bytes()
    assert _actions(copy_course(manifest, learner))["ch01_a.ipynb"] == "unchanged"


def test_answers_are_never_overwritten_and_updates_go_beside_them(tmp_path: Path) -> None:
    source = tmp_path / "src"
    manifest = load_manifest(_course(source))
    learner = tmp_path / "learner"
    copy_course(manifest, learner)
    answered = b'{"my": "answers"}'
    (learner / "ch01_a.ipynb").write_bytes(answered)

    # Answering alone is not an update.
    assert _actions(copy_course(manifest, learner))["ch01_a.ipynb"] == "unchanged"
    assert not (learner / "ch01_a.updated.ipynb").exists()

    # A new course version arrives: it goes beside the learner's copy.
    write_notebook(source / "notebooks" / "ch01_a.ipynb", notebook(code("c1", "x = 2")))
    results = copy_course(manifest, learner)
    assert _actions(results)["ch01_a.ipynb"] == "update-beside"
    assert "ch01_a.updated.ipynb beside your copy" in results[0].message
    assert (learner / "ch01_a.ipynb").read_bytes() == answered
    updated = (learner / "ch01_a.updated.ipynb").read_bytes()
    assert updated == (source / "notebooks" / "ch01_a.ipynb").read_bytes()
    assert _actions(copy_course(manifest, learner))["ch01_a.ipynb"] == "unchanged"

    # A later version refreshes an untouched .updated file...
    write_notebook(source / "notebooks" / "ch01_a.ipynb", notebook(code("c1", "x = 3")))
    assert _actions(copy_course(manifest, learner))["ch01_a.ipynb"] == "update-beside"
    assert b"x = 3" in (learner / "ch01_a.updated.ipynb").read_bytes()

    # ...but never one the learner has edited.
    (learner / "ch01_a.updated.ipynb").write_bytes(b"edited update")
    write_notebook(source / "notebooks" / "ch01_a.ipynb", notebook(code("c1", "x = 4")))
    assert _actions(copy_course(manifest, learner))["ch01_a.ipynb"] == "kept"
    assert (learner / "ch01_a.updated.ipynb").read_bytes() == b"edited update"
    assert (learner / "ch01_a.ipynb").read_bytes() == answered


def test_new_chapters_are_added_to_an_existing_folder(tmp_path: Path) -> None:
    source = tmp_path / "src"
    _course(source)
    learner = tmp_path / "learner"
    copy_course(load_manifest(source / "course" / "manifest.toml"), learner)
    write_manifest(source, chapter_toml("ch01", "ch01_a", []), chapter_toml("ch02", "ch02_b", []))
    write_notebook(source / "notebooks" / "ch02_b.ipynb", notebook(code("c1", "y = 1")))
    results = copy_course(load_manifest(source / "course" / "manifest.toml"), learner)
    assert _actions(results) == {
        "ch01_a.ipynb": "unchanged",
        "ch02_b.ipynb": "added",
        "learner_guide.md": "unchanged",
    }


def test_a_missing_course_file_is_a_course_error(tmp_path: Path) -> None:
    manifest = load_manifest(_course(tmp_path / "src"))
    (tmp_path / "src" / "notebooks" / "ch01_a.ipynb").unlink()
    with pytest.raises(CourseError, match=r"ch01_a\.ipynb: a course file is missing"):
        copy_course(manifest, tmp_path / "learner")


def test_copy_only_through_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _course(tmp_path / "src")
    monkeypatch.setenv("LLMFS_COURSE_ROOT", str(tmp_path / "src"))
    assert cli.main(["start", "--dir", str(tmp_path / "learner"), "--copy-only"]) == 0
    out = capsys.readouterr().out
    assert "added ch01_a.ipynb" in out and f"Your course folder: {tmp_path / 'learner'}" in out


def test_the_repository_course_copies_from_a_checkout(tmp_path: Path) -> None:
    results = copy_course(load_manifest(), tmp_path / "learner")
    assert (tmp_path / "learner" / "learner_guide.md").is_file()
    assert all(result.action == "added" for result in results)


def test_the_lab_command_is_local_and_quiet(tmp_path: Path) -> None:
    command = lab_command(tmp_path, ip="127.0.0.1", port=8899, open_browser=False)
    assert command[:3] == [sys.executable, "-m", "jupyterlab"]
    assert "--ServerApp.ip=127.0.0.1" in command and "--ServerApp.port=8899" in command
    assert "--no-browser" in command
    assert "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate" in command


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def test_start_serves_the_course_folder_with_announcements_disabled(tmp_path: Path) -> None:
    pytest.importorskip("jupyterlab")
    _course(tmp_path / "src")
    port, token = free_port(), "llmfs-start-test-token"
    env = {
        **os.environ,
        "LLMFS_COURSE_ROOT": str(tmp_path / "src"),
        "JUPYTER_TOKEN": token,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    learner = tmp_path / "learner"
    command = [sys.executable, "-m", "llmfs", "start", "--dir", str(learner), "--no-browser"]
    process = subprocess.Popen(
        [*command, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}api/status?token={token}")
                break
            except (OSError, urllib.error.URLError):
                assert process.poll() is None, process.stdout.read().decode()
                assert time.monotonic() < deadline, "JupyterLab did not start within 60 s"
                time.sleep(0.25)
        contents = json.loads(_get(f"{base}api/contents?token={token}"))
        assert sorted(item["name"] for item in contents["content"]) == [
            "ch01_a.ipynb",
            "learner_guide.md",
        ]
        page = _get(f"{base}lab?token={token}").decode()
        config = json.loads(
            re.search(
                r'id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S
            ).group(1)
        )
        assert "@jupyterlab/apputils-extension:announcements" in config["disabledExtensions"]
        request = urllib.request.Request(f"{base}api/shutdown?token={token}", method="POST")
        urllib.request.urlopen(request, timeout=5).close()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("-5", "from 1 to 65535 (a TCP port), got -5"),
        ("99999", "from 1 to 65535 (a TCP port), got 99999"),
        ("0", "from 1 to 65535 (a TCP port), got 0"),
        ("abc", "a whole number from 1 to 65535, got 'abc'"),
    ],
)
def test_a_port_outside_1_to_65535_is_a_usage_error(
    text: str, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Checked before anything is copied or started: JupyterLab would crash on -5 with a socket
    # traceback, and print an unreachable URL for 99999.
    with pytest.raises(SystemExit) as info:
        cli.main(["start", "--dir", str(tmp_path / "learner"), "--port", text, "--no-browser"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --port" in err and expected in err
    assert not (tmp_path / "learner").exists()


@pytest.mark.parametrize("port", [1, 8888, 65535])
def test_ports_from_1_to_65535_are_accepted(port: int, tmp_path: Path) -> None:
    assert f"--ServerApp.port={port}" in lab_command(
        tmp_path, ip="127.0.0.1", port=port, open_browser=False
    )


@pytest.mark.parametrize("port", [-5, 0, 65536, 99999, True, 8888.0, "8888"])
def test_the_lab_command_refuses_a_port_that_is_not_1_to_65535(port, tmp_path: Path) -> None:
    with pytest.raises(CourseError, match="the port must be") as info:
        lab_command(tmp_path, ip="127.0.0.1", port=port, open_browser=False)
    message = str(info.value)
    assert "from 1 to 65535" in message and repr(port) in message


# -- refusing bad options before anything is copied or started ---------------------------------


def test_a_missing_parent_folder_is_refused_with_the_command_that_creates_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _course(tmp_path / "src")
    monkeypatch.setenv("LLMFS_COURSE_ROOT", str(tmp_path / "src"))
    folder = tmp_path / "no" / "such" / "course"
    assert cli.main(["start", "--dir", str(folder), "--copy-only"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"llmfs start: {folder}: its parent folder {folder.parent} does not exist; create it "
        f"first with: mkdir -p {folder.parent}\n"
    )
    assert not (tmp_path / "no").exists()  # nothing was created


def test_the_course_folder_itself_is_created_when_its_parent_exists(tmp_path: Path) -> None:
    manifest = load_manifest(_course(tmp_path / "src"))
    copy_course(manifest, tmp_path / "new")
    assert (tmp_path / "new" / "ch01_a.ipynb").is_file()
    with pytest.raises(CourseError, match=r"mkdir -p .*deeper"):
        copy_course(manifest, tmp_path / "deeper" / "new")


def test_a_file_is_not_a_course_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(CourseError, match=r"notes\.txt: exists and is not a folder"):
        check_folder(tmp_path / "notes.txt")


def test_an_explicit_port_in_use_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _course(tmp_path / "src")
    monkeypatch.setenv("LLMFS_COURSE_ROOT", str(tmp_path / "src"))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        argv = ["start", "--dir", str(tmp_path / "learner"), "--port", str(port), "--no-browser"]
        assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert f"llmfs start: port {port} is already in use on 127.0.0.1" in err
    assert "choose another port with --port" in err
    assert not (tmp_path / "learner").exists()


def test_an_explicit_port_is_never_moved_by_jupyterlab(tmp_path: Path) -> None:
    exact = lab_command(tmp_path, ip="127.0.0.1", port=8899, open_browser=False)
    assert "--ServerApp.port_retries=0" in exact
    chosen = lab_command(tmp_path, ip="127.0.0.1", port=8899, open_browser=False, exact_port=False)
    assert "--ServerApp.port_retries=0" not in chosen


def test_without_port_the_default_is_used_when_free_and_a_move_is_announced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    free = free_port()
    monkeypatch.setattr(start, "DEFAULT_PORT", free)
    assert choose_port("127.0.0.1", None) == (free, None)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        monkeypatch.setattr(start, "DEFAULT_PORT", taken)
        port, note = choose_port("127.0.0.1", None)
        assert port != taken and port_is_free("127.0.0.1", port)
        assert note == f"port {taken} is in use, so JupyterLab uses port {port}"
        assert not port_is_free("127.0.0.1", taken)


@pytest.mark.parametrize("ip", ["999.1.1.1", "1.2.3", "example.org", "", "127.0.0.1 "])
def test_an_ip_that_is_not_an_address_is_a_one_line_usage_error(
    ip: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        cli.main(["start", "--dir", str(tmp_path / "learner"), "--ip", ip, "--no-browser"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: llmfs start ") and "Traceback" not in err
    assert err.splitlines()[-1] == (
        f"llmfs start: error: argument --ip: the address must be an IPv4 or IPv6 address or "
        f"'localhost' (for example 127.0.0.1 or ::1), got {ip!r}"
    )
    assert not (tmp_path / "learner").exists()


def test_an_address_of_another_machine_is_refused_before_anything_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = "192.0.2.1"  # TEST-NET-1: reserved for documentation, never a local address
    with socket.socket() as probe:
        try:
            probe.bind((foreign, 0))
        except OSError:
            pass
        else:
            pytest.skip("this machine lets programs listen on non-local addresses")
    assert cli.main(["start", "--dir", str(tmp_path / "learner"), "--ip", foreign]) == 2
    assert capsys.readouterr().err == (
        f"llmfs start: {foreign} is not an address of this machine, so JupyterLab cannot listen "
        f"there; leave out --ip for 127.0.0.1 (this computer only)\n"
    )
    assert not (tmp_path / "learner").exists()


@pytest.mark.parametrize("ip", ["localhost", "127.0.0.1", "0.0.0.0", "::1", "::"])
def test_ipv4_ipv6_and_localhost_are_accepted(ip: str) -> None:
    assert check_ip(ip) == ip


# -- stopping: llmfs start never leaves JupyterLab running ---------------------------------------

FAKE_LAB = """
import os, signal, sys, time
if os.environ.get("FAKE_LAB_IGNORES_SIGTERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
pidfile = os.environ["FAKE_LAB_PIDFILE"]
with open(pidfile + ".tmp", "w") as handle:
    handle.write(str(os.getpid()))
os.replace(pidfile + ".tmp", pidfile)  # the test reads the pid only when it is complete
print("fake JupyterLab", sys.argv[1:], flush=True)
time.sleep(60)
"""


def _wait_for_pid(pidfile: Path, process: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 10
    while not pidfile.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the fake JupyterLab did not start within 10 s"
        time.sleep(0.05)
    return int(pidfile.read_text())


def _gone(pid: int) -> bool:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def fake_lab(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``python -m jupyterlab`` is a fake that records its pid and
    sleeps, and ``llmfs start`` copies a small course."""
    package = tmp_path / "fake" / "jupyterlab"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(FAKE_LAB)
    _course(tmp_path / "src")
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join([str(tmp_path / "fake"), str(root), os.environ.get("PYTHONPATH", "")])
    return {
        **os.environ,
        "PYTHONPATH": path,
        "LLMFS_COURSE_ROOT": str(tmp_path / "src"),
        "FAKE_LAB_PIDFILE": str(tmp_path / "lab.pid"),
    }


def _start(tmp_path: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "llmfs", "start", "--dir", str(tmp_path / "learner")]
    return subprocess.Popen(
        [*command, "--no-browser", "--port", str(free_port())],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


@pytest.mark.skipif(os.name != "posix", reason="sends POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_stop_signal_to_llmfs_start_stops_jupyterlab_too(
    signum: int, tmp_path: Path, fake_lab: dict[str, str]
) -> None:
    process = _start(tmp_path, fake_lab)
    try:
        lab = _wait_for_pid(tmp_path / "lab.pid", process)
        process.send_signal(signum)
        out, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signum
    assert f"{signal.Signals(signum).name} received, stopping JupyterLab" in err
    assert "fake JupyterLab" in out and "--ServerApp.port_retries=0" in out
    assert _gone(lab), f"JupyterLab (pid {lab}) is still running"


@pytest.mark.skipif(os.name != "posix", reason="sends POSIX signals")
def test_a_second_signal_kills_a_jupyterlab_that_ignores_sigterm(
    tmp_path: Path, fake_lab: dict[str, str]
) -> None:
    process = _start(tmp_path, {**fake_lab, "FAKE_LAB_IGNORES_SIGTERM": "1"})
    try:
        lab = _wait_for_pid(tmp_path / "lab.pid", process)
        process.send_signal(signal.SIGTERM)
        time.sleep(0.5)  # the fake ignores it and keeps running
        assert process.poll() is None
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM
    assert "killing JupyterLab (a second signal arrived)" in err
    assert _gone(lab)


@pytest.mark.skipif(os.name != "posix", reason="sends POSIX signals")
def test_a_jupyterlab_that_does_not_stop_in_time_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pidfile = tmp_path / "lab.pid"
    script = tmp_path / "lab.py"
    script.write_text(FAKE_LAB)
    monkeypatch.setattr(start, "STOP_TIMEOUT", 0.5)
    env = {**os.environ, "FAKE_LAB_PIDFILE": str(pidfile), "FAKE_LAB_IGNORES_SIGTERM": "1"}
    me = os.getpid()

    def signal_when_started() -> None:
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        # Only while the fake runs (it sleeps until killed) is run_lab's handler installed: a
        # SIGTERM at any other moment would stop the test process itself.
        if pidfile.exists():
            os.kill(me, signal.SIGTERM)  # handled by run_lab's handler, in the main thread

    sender = threading.Thread(target=signal_when_started, daemon=True)
    sender.start()
    before = signal.getsignal(signal.SIGTERM)
    status = start.run_lab([sys.executable, str(script)], cwd=tmp_path, env=env)
    sender.join()
    assert status == 128 + signal.SIGTERM
    assert "killing JupyterLab (did not stop in time)" in capsys.readouterr().err
    assert _gone(int(pidfile.read_text()))
    assert signal.getsignal(signal.SIGTERM) == before  # the handlers are put back


def _server_info(runtime: Path, name: str, pid: int, root: Path) -> None:
    runtime.mkdir(parents=True, exist_ok=True)
    info = {"pid": pid, "root_dir": str(root), "url": "http://127.0.0.1:8890/", "port": 8890}
    (runtime / f"jpserver-{name}.json").write_text(json.dumps(info), encoding="utf-8")


def test_a_folder_already_served_is_said_instead_of_starting_a_second_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _course(tmp_path / "src")
    monkeypatch.setenv("LLMFS_COURSE_ROOT", str(tmp_path / "src"))
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    learner = tmp_path / "learner"
    learner.mkdir()
    # A live process (this one) serving the folder, and a stale file of a process that is gone.
    _server_info(tmp_path / "runtime", "live", os.getpid(), learner)
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    _server_info(tmp_path / "runtime", "gone", int(gone.stdout), tmp_path / "elsewhere")
    started: list[list[str]] = []
    monkeypatch.setattr(start, "run_lab", lambda command, **_: started.append(command) or 0)

    assert cli.main(["start", "--dir", str(learner), "--no-browser"]) == 1
    err = capsys.readouterr().err
    assert f"JupyterLab already serves {learner} (process {os.getpid()})" in err
    assert "http://127.0.0.1:8890/" in err
    assert started == []

    other = tmp_path / "other"
    assert start.running_server(other.resolve()) is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert cli.main(["start", "--dir", str(other), "--no-browser", "--port", str(free)]) == 0
    assert len(started) == 1  # another folder starts its own server


def test_jupyterlab_saves_widget_state_and_keeps_the_environments_settings(
    tmp_path: Path,
) -> None:
    # Saved widget state lets a storage diagram draw after a restart or with the kernel closed.
    environment = tmp_path / "env-settings"
    (environment / "overrides.d").mkdir(parents=True)
    (environment / "overrides.json").write_text('{"@jupyterlab/x:plugin": {"a": 1}}')
    (environment / "overrides.d" / "other.json").write_text("{}")
    folder = tmp_path / "course"
    folder.mkdir()
    settings = lab_settings(folder, environment)
    assert settings == folder / ".llmfs" / "jupyterlab-settings"
    ours = json.loads((settings / "overrides.d" / "llmfs-course.json").read_text())
    assert ours == {"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": True}}
    assert (settings / "overrides.json").read_text() == '{"@jupyterlab/x:plugin": {"a": 1}}'
    assert (settings / "overrides.d" / "other.json").is_file()
    (environment / "overrides.d" / "other.json").unlink()
    assert not (lab_settings(folder, environment) / "overrides.d" / "other.json").exists()
    assert lab_settings(folder, tmp_path / "none").is_dir()  # an environment without settings
    command = lab_command(folder, ip="127.0.0.1", port=8899, open_browser=False, settings=settings)
    assert f"--LabApp.app_settings_dir={settings}" in command
