"""`llmfs start`: copying the course into a learner folder without overwriting, and launching."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from coursekit import chapter_toml, code, notebook, write_manifest, write_notebook

from llmfs import cli
from llmfs.course import CourseError
from llmfs.course.manifest import load_manifest
from llmfs.course.start import copy_course, lab_command


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
