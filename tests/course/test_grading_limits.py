"""The sandbox: its environment and command, the worker's channel, the run folder.

Every numeric library, llmfs's copies included, runs one thread; the sandbox mounts the package
alone, lets no secret of the grader's environment in, and ``llmfs grade`` refuses to run
students' code without it unless told; a frame is one JSON object or a clear error; a run folder
whose process is gone is removed by the next one.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import platform
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import gradingkit as kit
import pytest
from blaskit import kernel_in_child
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.cli import main as llmfs_main
from llmfs.course.grading import channel, isolation
from llmfs.course.grading.isolation import Isolation, RunFolder, package_dir
from llmfs.course.grading.limits import sandbox_env
from llmfs.course.grading.sandbox import outcome_problem

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")


def test_sandboxed_processes_run_one_thread_per_numeric_library() -> None:
    env = sandbox_env()
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "LLMFS_NUM_THREADS"):
        assert env[name] == "1", name
    code = "from llmfs.tensor import get_num_threads; print(get_num_threads())"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "1"


def test_sandboxed_processes_run_on_the_blas_kernel_the_grader_was_told_to_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # OpenBLAS picks its kernel by CPU unless OPENBLAS_CORETYPE names one; a notebook graded in
    # the sandbox computes with the grader's kernel, not with one chosen behind its back.
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Sandybridge")  # one any x86-64 CPU runs (AVX)
    env = sandbox_env()
    assert env["OPENBLAS_CORETYPE"] == "Sandybridge"
    sandboxed = kernel_in_child(env)
    if sandboxed is None:
        pytest.skip("NumPy's BLAS here is not an OpenBLAS whose kernel can be read")
    assert sandboxed == kernel_in_child(dict(os.environ))
    if platform.machine() == "x86_64":
        assert sandboxed == "Sandybridge"


# --------------------------------------------------------------------------------------------
# The sandbox's command, the worker's channel, the run folder
# --------------------------------------------------------------------------------------------


def test_the_sandbox_mounts_the_package_alone_never_the_folder_above_it() -> None:
    mounted = [path for kind, path in Isolation("bwrap").mounts() if kind == "ro"]
    package = package_dir()
    assert any(path == package or path in package.parents for path in mounted)
    for secret in (kit.REPO / "solutions", kit.REPO / "tests", kit.REPO / "course"):
        assert not any(path == secret or path in secret.parents for path in mounted), secret


def test_the_sandbox_command_isolates_everything_and_hides_what_it_is_told(
    tmp_path: Path,
) -> None:
    inside_mount = package_dir() / "course"
    command = Isolation("bwrap", hidden=(inside_mount, tmp_path / "elsewhere")).command(
        ["python"], scratch=tmp_path, workdir=tmp_path, env={"A": "1"}
    )
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in command
    assert command[command.index("--cap-drop") + 1] == "ALL"
    assert ["--tmpfs", "/tmp"] == command[command.index("/tmp") - 1 : command.index("/tmp") + 1]
    assert ["--tmpfs", str(inside_mount)] == command[
        command.index(str(inside_mount)) - 1 : command.index(str(inside_mount)) + 1
    ]
    assert str(tmp_path / "elsewhere") not in command  # never mounted, nothing to cover
    assert command[-2:] == ["--", "python"]


def test_the_private_tmp_is_laid_before_every_mount_so_nothing_under_tmp_is_hidden(
    tmp_path: Path,
) -> None:
    # bubblewrap applies mounts in order: a checkout or a virtual environment under /tmp (CI
    # clones often live there) must be bound on top of the private /tmp, not covered by it.
    command = Isolation("bwrap", readable=(tmp_path,)).command(
        ["python"], scratch=tmp_path / "scratch", workdir=tmp_path / "scratch", env={}
    )
    private_tmp = command.index("--tmpfs")
    assert command[private_tmp + 1] == "/tmp"
    binds = [k for k, word in enumerate(command) if word in ("--ro-bind", "--bind")]
    assert binds and all(private_tmp < k for k in binds)
    assert command[command.index(str(tmp_path)) - 1] == "--ro-bind"


@needs_bwrap
def test_no_secret_of_the_grader_s_environment_enters_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRADING_SEED", "12345")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    command = isolation.find_bwrap().command(
        [sys.executable, "-c", code], scratch=tmp_path, workdir=tmp_path, env=sandbox_env()
    )
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=60)
    seen = json.loads(done.stdout)
    assert "GRADING_SEED" not in seen and "GITHUB_TOKEN" not in seen
    assert "ghp_secret" not in done.stdout


def test_grade_refuses_to_run_students_code_without_a_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isolation.shutil, "which", lambda name: None)
    monkeypatch.setattr(isolation.os, "access", lambda *args: False)
    chapter = kit.grading_chapter()
    (tmp_path / "ada.ipynb").write_text(json.dumps(kit.student_notebook(chapter)))
    argv = ["grade", str(tmp_path / "ada.ipynb"), "--chapter", chapter.id, "--no-execute"]
    argv += ["--out", str(tmp_path / "out")]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert llmfs_main(argv) == 2
    assert "no sandbox" in err.getvalue() and "--no-sandbox" in err.getvalue()
    assert not (tmp_path / "out" / "gradebook.sqlite").exists()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert llmfs_main([*argv, "--no-sandbox"]) == 0
    assert "WARNING: --no-sandbox" in err.getvalue()


def test_a_run_folder_removes_the_folders_of_runs_that_are_gone(tmp_path: Path) -> None:
    live = RunFolder(tmp_path)
    dead = tmp_path / "llmfs-run-killed"
    (dead / "notebook-x").mkdir(parents=True)
    (dead / "run.lock").write_text("99999")  # nobody holds its lock any more
    other = tmp_path / "not-ours"
    other.mkdir()
    fresh = RunFolder(tmp_path)
    assert not dead.exists()
    assert live.path.is_dir() and other.is_dir() and fresh.path.is_dir()
    fresh.close()
    live.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["not-ours"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_read_as_a_frame_either_decode_or_say_what_is_wrong(data: bytes) -> None:
    try:
        found = channel.split(data)
    except channel.FrameError as error:
        assert str(error)
        return
    assert found is None or isinstance(found[0], dict)


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=4))
def test_a_frame_round_trips_and_a_second_one_stays_in_the_buffer(message: dict[str, Any]) -> None:
    data = channel.encode(message) + channel.encode({"next": 1})
    found = channel.split(data)
    assert found is not None and found[0] == message
    assert channel.split(found[1]) == ({"next": 1}, b"")


def test_a_frame_announcing_more_than_the_limit_is_refused_before_reading_it() -> None:
    with pytest.raises(channel.FrameError, match="announcing"):
        channel.split(struct.pack(">I", channel.MAX_FRAME + 1) + b"{}")


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ({"value": [1, 2]}, ""),
        ({"error": "ValueError"}, ""),
        ({"error": "Shortcut", "shortcut": "f", "via": "g"}, ""),
        ({"value": 1, "error": "ValueError"}, "neither one value nor one error"),
        ({}, "neither one value nor one error"),
        ({"value": 1, "passed": True}, "unknown keys"),
        ({"error": 3}, "'error' is not str"),
        ([1], "not a JSON object"),
    ],
)
def test_only_one_value_or_one_error_is_an_outcome(reply: Any, problem: str) -> None:
    assert outcome_problem(reply).startswith(problem) if problem else outcome_problem(reply) == ""


def _as_nobody() -> list[str] | None:
    """The command prefix that runs this Python as user 65534, when this test runs as root and
    that user may execute it (else None)."""
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        return None
    prefix = [setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    # The user must reach the Python installation and the package (root's home is often closed).
    for folder in (Path(sys.base_prefix).resolve() / "bin", Path(sys.prefix), package_dir()):
        if subprocess.run([*prefix, "/usr/bin/test", "-x", str(folder)]).returncode != 0:
            return None
    return prefix


@needs_bwrap
@pytest.mark.skipif(
    _as_nobody() is None,
    reason="needs root, setpriv and a Python installation user 65534 can reach",
)
def test_the_sandbox_works_for_a_normal_user_too() -> None:
    prefix = _as_nobody()
    assert prefix is not None
    folder = Path(tempfile.mkdtemp(prefix="llmfs-normal-user-", dir="/tmp"))
    try:
        folder.chmod(0o777)
        code = (
            "from llmfs.course.grading.sandbox import run_function\n"
            "from llmfs.course.grading.isolation import find_bwrap\n"
            "from llmfs.course.grading.limits import Limits\n"
            "run = run_function('def f(x):\\n    return x + 1\\n', 'f', [(1,), (2,)],\n"
            "                   Limits(implement_timeout=30), isolation=find_bwrap())\n"
            "print(run.outcomes)\n"
        )
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(kit.REPO), "TMPDIR": str(folder)}
        done = subprocess.run(
            [*prefix, sys.executable, "-c", code], env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "({'value': 2}, {'value': 3})"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_after_an_interrupt_no_process_starts_until_the_next_run() -> None:
    # An interrupted run ends what is running and starts nothing more: a submission whose worker
    # was killed would otherwise start a fresh worker for its remaining exercises.
    from llmfs.course.grading import sandbox
    from llmfs.course.grading.limits import Limits

    task = sandbox.FunctionTask("ex", "def f(x):\n    return x + 1\n", "f", ((1,),))
    sandbox.stop_all()
    try:
        with pytest.raises(sandbox.GradingStopped, match="interrupted"):
            sandbox.run_functions([task], Limits())
    finally:
        sandbox.allow_starts()
    run = sandbox.run_functions([task], Limits())["ex"]
    assert run.problem == "" or run.problem is None, run
    assert list(run.outcomes or ()) == [{"value": 2}]
