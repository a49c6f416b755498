"""The repository's notebook validation: one pytest run, strict on solutions/, nothing else.

Each test builds a throwaway project (the repository's conftest.py and sanitize file, and the
pytest options the project's pyproject.toml uses) with tiny notebooks, runs pytest on it in a
subprocess, and reads the per-cell outcomes.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from blaskit import kernel_in_child
from coursekit import code, notebook, write_notebook

pytest.importorskip("nbval")
pytest.importorskip("xdist")

# A pytest run in a subprocess, with two workers and four kernels (scheduled early).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

# The pytest options the repository's pyproject.toml carries for notebook validation, with every
# folder that holds notebooks among the test paths: the root conftest alone decides which run.
PYTEST_OPTIONS = """\
[tool.pytest.ini_options]
testpaths = ["tests", "solutions", "notebooks", "docs"]
addopts = "-ra --strict-markers -n 2 --dist loadfile"
markers = ["notebooks: executes the course notebooks"]
"""


SPEED_FLAGS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark")


def _stream(text: str) -> dict:
    return {"name": "stdout", "output_type": "stream", "text": [text]}


def _with_output(cell_id: str, source: str, printed: str, tags: list[str] | None = None) -> dict:
    cell = code(cell_id, source, tags=tags)
    cell["execution_count"] = 1
    cell["outputs"] = [_stream(printed)]
    return cell


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "course").mkdir(parents=True)
    (root / "tests").mkdir()
    shutil.copy(REPO / "conftest.py", root / "conftest.py")
    shutil.copy(REPO / "course" / "nbval_sanitize.cfg", root / "course" / "nbval_sanitize.cfg")
    (root / "pyproject.toml").write_text(PYTEST_OPTIONS, encoding="utf-8")
    return root


def _run(root: Path, workers: int = 2, **variables: str | None) -> dict[str, str]:
    """Run pytest in ``root`` with ``workers`` xdist workers (0: one process, as ``-n 0``) and
    the environment ``variables`` set, or removed where ``None``; map 'path::Cell n' to
    PASSED/FAILED/SKIPPED, and '(summary)' to the lines of pytest's terminal summary that the
    root conftest writes."""
    # The run must make its own build cache (a developer's or an enclosing run's is not used).
    env = {name: value for name, value in os.environ.items() if name != "LLMFS_CACHE_DIR"}
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    result = subprocess.run(
        # Plugins the throwaway project does not use are left out: they only cost start-up time.
        [sys.executable, "-m", "pytest", "-rA", "-n", str(workers), *SPEED_FLAGS],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    outcomes = {}
    for line in result.stdout.splitlines():
        match = re.match(r"^(PASSED|FAILED|SKIPPED|ERROR) (\S+::Cell \d+)", line)
        if match:
            outcome, test = match.groups()
            if outcome == "ERROR":  # the cell's setup or teardown: the kernel's start or stop
                test += " (setup or teardown)"
            outcomes[test] = outcome
    assert outcomes, result.stdout + result.stderr
    outcomes["(summary)"] = "\n".join(
        line for line in result.stdout.splitlines() if line.startswith("notebooks: ")
    )
    return outcomes


def test_solutions_are_strict_and_other_notebooks_are_ignored(tmp_path: Path) -> None:
    root = _project(tmp_path)
    # One notebook is run (each notebook costs a kernel); the student versions in notebooks/
    # run elsewhere (llmfs check's kernel and the chapters' in-process run), so pytest collects
    # neither them nor notebooks in any other folder.
    write_notebook(
        root / "solutions" / "mixed.ipynb",
        notebook(
            _with_output("c1", "print(6 * 7)", "42\n"),
            # A default repr carries a memory address that differs from the stored one on every
            # run: this cell passes only because the sanitize file is applied.
            _with_output("c2", "print(object())", "<object object at 0x7f0000000000>\n"),
            _with_output("c3", "print(6 * 7)", "41\n"),
            # Attempts recorded while validating go to a temporary log, not into the checkout,
            # and compiled kernels to the run's own build cache, not into the home folder; the
            # kernel's own temporary folder is one of its own, inside the system's.
            code(
                "c4",
                "import os, tempfile\n"
                "system = os.path.dirname(tempfile.gettempdir())\n"
                "assert os.path.basename(tempfile.gettempdir()).startswith('llmfs-nbval-tmp-')\n"
                "path = os.environ['LLMFS_ATTEMPTS']\n"
                "assert path.startswith(system), path\n"
                "cache = os.environ['LLMFS_CACHE_DIR']\n"
                "assert cache.startswith(system) and os.path.isdir(cache), cache",
            ),
        ),
    )
    # A notebook whose scratch folder outlives its kernel fails its last cell's teardown; one
    # whose TemporaryDirectory is removed when the kernel stops (as JupyterLab stops it) passes.
    write_notebook(
        root / "solutions" / "left.ipynb",
        notebook(code("c1", "import tempfile\nkept = tempfile.mkdtemp(prefix='kept-')")),
    )
    write_notebook(
        root / "solutions" / "removed.ipynb",
        notebook(
            code("c1", "import tempfile\nscratch = tempfile.TemporaryDirectory()"),
            code("c2", "open(scratch.name + '/weights.npz', 'w').close()"),
        ),
    )
    write_notebook(
        root / "notebooks" / "mixed.ipynb", notebook(code("c1", "raise ValueError('crash')"))
    )
    write_notebook(root / "docs" / "elsewhere.ipynb", notebook(code("c1", "raise SystemExit(3)")))

    outcomes = _run(root)

    assert outcomes == {
        "(summary)": "",
        "solutions/mixed.ipynb::Cell 0": "PASSED",
        "solutions/mixed.ipynb::Cell 1": "PASSED",
        "solutions/mixed.ipynb::Cell 2": "FAILED",  # stored output compared
        "solutions/mixed.ipynb::Cell 3": "PASSED",
        "solutions/left.ipynb::Cell 0": "PASSED",
        "solutions/left.ipynb::Cell 0 (setup or teardown)": "ERROR",
        "solutions/removed.ipynb::Cell 0": "PASSED",
        "solutions/removed.ipynb::Cell 1": "PASSED",
    }


BLAS_TAG = "output-depends-on-blas-kernel"


def _kernel_given(name: str) -> str:
    """The OpenBLAS kernel a process given ``OPENBLAS_CORETYPE=name`` runs on, as the run's
    summary names it."""
    return kernel_in_child({**os.environ, "OPENBLAS_CORETYPE": name}) or "not one OpenBLAS names"


def test_outputs_that_depend_on_the_blas_kernel_compare_on_the_kernel_they_were_stored_on(
    tmp_path: Path,
) -> None:
    # A float32 training run's loss after a few hundred steps depends on the order in which the
    # BLAS kernel sums (OpenBLAS picks its kernel by CPU). The solutions' outputs were stored on
    # OpenBLAS's Haswell kernel: the suite runs every notebook's kernel on it where the CPU can
    # (AVX2 and FMA), so that even such outputs compare; on any other kernel the cells tagged as
    # depending on it still run (an error fails), but their outputs are not compared. Every
    # other cell is compared everywhere.
    root = _project(tmp_path)
    kernel = "import os\nprint(os.environ.get('OPENBLAS_CORETYPE'))"
    write_notebook(
        root / "solutions" / "kernel.ipynb",
        notebook(
            _with_output("c1", kernel, "a value that no kernel prints\n", tags=[BLAS_TAG]),
            code("c2", "raise ValueError('a tagged cell that fails')", tags=[BLAS_TAG]),
            _with_output("c3", kernel, "Haswell\n"),
        ),
    )

    # A kernel chosen by whoever runs the suite, one that any x86-64 CPU runs (AVX); in one
    # process, where the run with workers below decides in its workers.
    elsewhere = _run(root, workers=0, OPENBLAS_CORETYPE="Sandybridge")
    assert elsewhere == {
        "solutions/kernel.ipynb::Cell 0": "PASSED",  # run, not compared
        "solutions/kernel.ipynb::Cell 1": "FAILED",
        "solutions/kernel.ipynb::Cell 2": "FAILED",  # untagged: compared, and it differs
        "(summary)": (
            f"notebooks: the outputs of cells tagged '{BLAS_TAG}' are run, not compared, on "
            "this machine: they were stored on OpenBLAS's Haswell kernel, and this run's BLAS "
            f"kernel is {_kernel_given('Sandybridge')} (OPENBLAS_CORETYPE=Sandybridge, "
            f"machine {platform.machine()})"
        ),
    }

    if platform.machine() != "x86_64" or _kernel_given("Haswell") != "Haswell":
        pytest.skip("NumPy here does not run OpenBLAS's Haswell kernel (x86-64, AVX2 and FMA)")
    pinned = _run(root, OPENBLAS_CORETYPE=None)
    assert pinned == {
        "solutions/kernel.ipynb::Cell 0": "FAILED",  # compared on the reference kernel
        "solutions/kernel.ipynb::Cell 1": "FAILED",
        "solutions/kernel.ipynb::Cell 2": "PASSED",  # the kernel runs on the pinned kernel
        "(summary)": "",
    }
