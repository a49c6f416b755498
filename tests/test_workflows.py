"""The GitHub Actions workflows (``.github/workflows/``) and the course's workflow templates
(``course/templates/``) follow the rules that keep a class's grading honest and secret.

Rules for every workflow (:func:`lint`):

* every action is pinned by a full 40-digit commit SHA, with the tag it stands for in a comment;
* every ``actions/checkout`` step sets ``persist-credentials: false`` (no token left in
  ``.git/config`` for code that runs later);
* permissions are stated at the top (``permissions:``), never left to the repository default;
* scripts run in bash (``defaults.run.shell: bash``, which GitHub runs with ``-eo pipefail``) and
  each starts with ``set -euo pipefail``; no ``| tee`` (it hides a failure behind tee's status);
* no ``${{ ... }}`` inside a script (a value spliced into shell source is an injection): values
  reach scripts through ``env:``.

Rules for the templates: the student repository's workflow holds no secret, uploads nothing and
runs only ``llmfs check``; the instructor's workflow takes student ids from repository names,
grades in the sandbox with the secret seed and publishes no gradebook database.

zizmor (a static analyser for GitHub Actions, from PyPI) runs on the same files when installed,
with ``.github/zizmor.yml``.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML reads the workflows")

REPO = Path(__file__).resolve().parents[1]
TEMPLATES = REPO / "course" / "templates"
STUDENT = TEMPLATES / "student-check.yml"
INSTRUCTOR = TEMPLATES / "instructor-grade.yml"
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml")) + sorted(TEMPLATES.glob("*.yml"))
_PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
_TAG_COMMENT = re.compile(r"uses:\s*(\S+)\s+#\s*v\d")


def _load(text: str) -> dict[str, Any]:
    data = yaml.safe_load(text)
    # YAML 1.1 reads the key `on` as True.
    if True in data:
        data["on"] = data.pop(True)
    return data


def _steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (job_id, step)
        for job_id, job in (workflow.get("jobs") or {}).items()
        for step in job.get("steps") or []
    ]


def _first_command(script: str) -> str:
    for line in script.splitlines():
        if line.strip() and not line.strip().startswith("#"):
            return line.strip()
    return ""


def lint(text: str) -> list[str]:
    """Every rule of the module docstring that the workflow ``text`` breaks, in words."""
    problems = []
    workflow = _load(text)
    if "permissions" not in workflow:
        problems.append("no top-level permissions")
    shell = ((workflow.get("defaults") or {}).get("run") or {}).get("shell")
    for job_id, step in _steps(workflow):
        name = f"{job_id}: {step.get('name') or step.get('uses') or 'a step'}"
        uses = step.get("uses")
        if uses is not None:
            if not uses.startswith("./") and not _PINNED.match(uses):
                problems.append(f"{name}: {uses} is not pinned by a full commit SHA")
            elif not uses.startswith("./") and not any(
                m.group(1) == uses for m in _TAG_COMMENT.finditer(text)
            ):
                problems.append(f"{name}: {uses} has no '# vX' comment naming its tag")
            if uses.split("@")[0] == "actions/checkout":
                if (step.get("with") or {}).get("persist-credentials") is not False:
                    problems.append(f"{name}: checkout without persist-credentials: false")
        script = step.get("run")
        if script is not None:
            if (step.get("shell") or shell) != "bash":
                problems.append(f"{name}: the script does not run in bash")
            if _first_command(script) != "set -euo pipefail":
                problems.append(f"{name}: the script does not start with set -euo pipefail")
            if re.search(r"\|\s*tee\b", script):
                problems.append(f"{name}: '| tee' hides the status of the command before it")
            if "${{" in script:
                problems.append(f"{name}: ${{{{ }}}} inside a script (pass it through env:)")
    return problems


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_workflow_follows_the_rules(path: Path) -> None:
    assert lint(path.read_text(encoding="utf-8")) == []


GOOD = STUDENT.read_text(encoding="utf-8")
CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1"


@pytest.mark.parametrize(
    ("broken", "problem"),
    [
        (GOOD.replace(CHECKOUT, "actions/checkout@v4"), "not pinned by a full commit SHA"),
        (GOOD.replace(CHECKOUT, CHECKOUT.split(" #")[0]), "no '# vX' comment"),
        (GOOD.replace("persist-credentials: false", "fetch-depth: 1"), "persist-credentials"),
        (GOOD.replace("permissions:\n  contents: read\n", ""), "no top-level permissions"),
        (GOOD.replace("    shell: bash", "    shell: sh"), "does not run in bash"),
        (GOOD.replace("set -euo pipefail\n          status", "status"), "set -euo pipefail"),
        (GOOD.replace("cat check.txt\n          {", "cat check.txt | tee x\n          {"), "tee"),
        (
            GOOD.replace('"${LLMFS_PACKAGE:?', '"${{ vars.LLMFS_PACKAGE }}${LLMFS_PACKAGE:?'),
            "inside a script",
        ),
    ],
    ids=["tag", "comment", "credentials", "permissions", "shell", "pipefail", "tee", "inject"],
)
def test_the_lint_catches_each_broken_rule(broken: str, problem: str) -> None:
    assert broken != GOOD
    found = lint(broken)
    assert any(problem in line for line in found), found


def _scripts(workflow: dict[str, Any], job: str | None = None) -> str:
    return "\n".join(str(s.get("run", "")) for j, s in _steps(workflow) if job in (None, j))


def test_the_student_workflow_only_runs_llmfs_check_and_holds_no_secret() -> None:
    text = STUDENT.read_text(encoding="utf-8")
    workflow = _load(text)
    assert "secrets." not in text and "github.token" not in text
    assert workflow["permissions"] == {"contents": "read"}
    uses = [s.get("uses", "").split("@")[0] for _, s in _steps(workflow)]
    assert set(uses) - {""} == {"actions/checkout", "actions/setup-python"}  # uploads nothing
    scripts = _scripts(workflow)
    assert "llmfs check" in scripts and "llmfs grade" not in scripts


def _llmfs_grade_commands(script: str) -> list[list[str]]:
    joined = script.replace("\\\n", " ")
    return [
        shlex.split(line.strip())[2:]
        for line in joined.splitlines()
        if line.strip().startswith("llmfs grade ")
    ]


def test_the_instructor_workflow_grades_in_the_sandbox_and_publishes_no_secret() -> None:
    from llmfs.cli import build_parser

    text = INSTRUCTOR.read_text(encoding="utf-8")
    workflow = _load(text)
    assert workflow["permissions"] == {}
    assert "repository_owner" not in text
    grade_job = workflow["jobs"]["grade"]
    scripts = _scripts(workflow, "grade")
    # Student ids are the repository names without the assignment's prefix.
    assert 'student="${repo#"$ASSIGNMENT"-}"' in scripts
    # The one grading command: the sandbox (no --no-sandbox), the seed from the secret.
    (command,) = _llmfs_grade_commands(scripts)
    assert "--no-sandbox" not in command and "--no-execute" not in command
    values = {"$SEED": "123", "$CHAPTER": "2", "shard-$SHARD": "shard-0"}
    args = build_parser().parse_args(["grade", *[values.get(a, a) for a in command]])
    assert (args.submissions, args.chapter, args.seed, args.checks, args.out) == (
        [Path("submissions")],
        "2",
        123,
        Path("course"),
        Path("shard-0"),
    )
    seeded = [s for s in grade_job["steps"] if "--seed" in str(s.get("run", ""))]
    assert seeded[0]["env"]["SEED"] == "${{ secrets.LLMFS_GRADING_SEED }}"
    # The merge command parses, and only scores, feedback and the commit list are published.
    (merge,) = _llmfs_grade_commands(_scripts(workflow, "merge"))
    merged = build_parser().parse_args(["grade", *merge])
    assert merged.merge and not merged.allow_mixed_seeds
    for _, step in _steps(workflow):
        if step.get("uses", "").startswith("actions/upload-artifact@"):
            name, path = step["with"]["name"], step["with"]["path"]
            if name == "llmfs-gradebook-private":  # only when the instructor asks for it
                assert step["if"] == "inputs.keep_gradebook"
                assert step["with"]["retention-days"] == 7
            elif "sqlite" in path:
                assert name.startswith("shard-") and step["with"]["retention-days"] == 1
            else:
                assert name == "llmfs-scores" and path == "published/"
    merge_script = _scripts(workflow, "merge")
    assert "gradebook.sqlite" not in merge_script.split("mkdir -p published", 1)[1]
    assert "actions/artifacts/$id" in merge_script  # the shards' gradebooks are deleted


def _zizmor() -> str | None:
    beside = Path(sys.executable).parent / "zizmor"
    return str(beside) if beside.is_file() else shutil.which("zizmor")


def test_zizmor_finds_nothing_in_the_workflows() -> None:
    zizmor = _zizmor()
    if zizmor is None:
        pytest.skip("zizmor is not installed (pip install zizmor; the test extra has it)")
    result = subprocess.run(
        [
            zizmor,
            "--offline",
            "--no-progress",
            "--format",
            "json",
            "--config",
            str(REPO / ".github" / "zizmor.yml"),
            *map(str, WORKFLOWS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    findings = json.loads(result.stdout or "[]")
    shown = [(f["ident"], f["locations"][0]["symbolic"]["key"]) for f in findings]
    assert findings == [], shown
    assert result.returncode == 0, result.stderr


MACOS = REPO / ".github" / "workflows" / "macos.yml"


def _pytest_targets(script: str) -> list[list[str]]:
    """The arguments of every ``python -m pytest`` command of a script."""
    joined = script.replace("\\\n", " ")
    commands = []
    for line in joined.splitlines():
        words = shlex.split(line.strip()) if line.strip() else []
        if words[:3] == ["python", "-m", "pytest"]:
            commands.append(words[3:])
    return commands


def test_the_macos_workflow_runs_each_macos_and_pyobjc_once_and_reports_the_device() -> None:
    """macos-14 and macos-15, each with the pyobjc-core releases before and after the ``new``
    family fix (the pair the host tests' stand-in models), the Metal tests run once per job,
    the device's report printed, and the runners' GPU called weak evidence."""
    from tests.tensor.backends.metal.pyobjc_releases import (
        PYOBJC_AFTER_NEW_FAMILY_FIX,
        PYOBJC_BEFORE_NEW_FAMILY_FIX,
        PYOBJC_METAL,
    )

    text = MACOS.read_text(encoding="utf-8")
    workflow = _load(text)
    (job,) = workflow["jobs"].values()
    matrix = job["strategy"]["matrix"]
    assert job["runs-on"] == "${{ matrix.os }}" and job["strategy"]["fail-fast"] is False
    assert sorted(matrix["os"]) == ["macos-14", "macos-15"]
    cores = [PYOBJC_BEFORE_NEW_FAMILY_FIX, PYOBJC_AFTER_NEW_FAMILY_FIX]
    assert matrix["pyobjc-core"] == cores
    pins = {entry["pyobjc-core"]: entry for entry in matrix["include"]}
    assert sorted(pins) == sorted(cores)
    assert {entry["pyobjc-metal"] for entry in pins.values()} == {PYOBJC_METAL}
    assert all(entry["pyobjc-cocoa"] == core for core, entry in pins.items())
    # the pins reach pip through env:, and every metal test runs exactly once
    install = next(s for s in job["steps"] if "pip install" in str(s.get("run", "")))
    assert install["env"]["PYOBJC_CORE"] == "${{ matrix.pyobjc-core }}"
    assert '"pyobjc-core==${PYOBJC_CORE}"' in install["run"]
    assert '"pyobjc-framework-Metal==${PYOBJC_METAL}"' in install["run"]
    assert "[metal]" not in install["run"]  # the extra would leave the release unpinned
    scripts = _scripts(workflow)
    runs = _pytest_targets(scripts)
    assert len(runs) == 1, runs
    (arguments,) = runs
    assert "tests/tensor/backends/metal" in arguments and "-m" not in arguments
    # the probe prints the device's report and fails without a device
    assert "gpu.report()" in scripts and "sys.exit(1)" in scripts
    assert "maxTotalThreadsPerThreadgroup" in scripts
    lowered = " ".join(text.lower().split())
    assert "paravirtualized" in lowered and "weak evidence" in lowered


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (("os: [macos-14, macos-15]", "os: [macos-14]"), "macos"),
        (("-v tests/tensor/backends/metal", "-m metal tests/tensor/backends/metal\n"
          "          python -m pytest -n 0 -q tests/tensor/backends/metal"), "once"),
        (('pyobjc-core: ["12.2.2", "13.0"]', 'pyobjc-core: ["13.0"]'), "pyobjc"),
    ],
    ids=["one-macos", "metal-twice", "one-pyobjc"],
)  # fmt: skip
def test_the_macos_workflow_check_catches_a_narrowed_matrix(
    change: tuple[str, str], problem: str, tmp_path: Path, monkeypatch
) -> None:
    old, new = change
    text = MACOS.read_text(encoding="utf-8")
    assert old in text, old
    broken = tmp_path / "macos.yml"
    broken.write_text(text.replace(old, new), encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "MACOS", broken)
    with pytest.raises(AssertionError):
        test_the_macos_workflow_runs_each_macos_and_pyobjc_once_and_reports_the_device()
