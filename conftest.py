"""Repository-wide pytest wiring: the solution notebooks are tests, validated by nbval.

``solutions/*.ipynb`` run in strict nbval mode (``--nbval``): every code cell must execute and
reproduce its stored text outputs (``text/plain`` and streams; HTML and SVG drawings are not
compared), after the substitutions in ``course/nbval_sanitize.cfg``. The generated student
versions (``notebooks/*.ipynb``) are not collected: each already runs to its end, unanswered, in
``llmfs check``'s kernel (``tests/course/test_grading_selfcheck_blank.py``) and in-process
(``tests/course/test_chapters.py``), and a third run would check nothing more.

Every notebook's kernel runs on OpenBLAS's ``Haswell`` kernel where the CPU can run it (the
stored outputs' kernel; :data:`REFERENCE_BLAS_KERNEL`); elsewhere the outputs of the cells tagged
``output-depends-on-blas-kernel`` are run but not compared.

Notebooks elsewhere are not collected. Passing ``--nbval`` or ``--nbval-lax`` explicitly restores
nbval's own behaviour (one mode for every notebook named on the command line). Kernels run in the
interpreter running pytest, so the notebooks import the ``llmfs`` under test. Exercise attempts
that notebooks record go to a temporary log, never into the repository, and the Metal emulator's
compiled kernels go to a build cache made for this run (shared by its workers, kernels and
subprocesses, removed at its end; one already named by ``$LLMFS_CACHE_DIR`` is used as it is),
never into the home folder. With pytest-xdist, run ``--dist loadfile`` so that a notebook's cells
stay in one worker, and in one kernel.

Long units of work run first. xdist hands whole units to its workers (:func:`unit_of`): a
file, or one chapter's tests of the files that run each chapter's notebooks (:data:`BY_CHAPTER`),
so chapters run on both workers and each chapter's notebooks once. Units are ordered by the
seconds their tests took in the last runs that ran them (kept in pytest's cache folder); a unit
with an untimed test that holds a test marked ``slow``, ``notebooks`` or ``browser`` (kernels,
servers, compilers, subprocesses, thousands of generated cases) counts as longest. With
``--no-loadscope-reorder`` (set in pyproject.toml) xdist hands out units in that order, so the
many short files fill the end of the run on both workers instead of one long unit running alone
while the other waits.

Two things spare every process of the run work it would do again and again: where
``PYTHONDONTWRITEBYTECODE`` stops Python writing bytecode, the run writes the package's once before
anything starts (:func:`write_bytecode`), so its several hundred kernels and subprocesses do not
each compile the package; and each test process moves what collecting the tests made out of the
garbage collector's reach (:func:`pytest_collection_finish`).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib.util
import os
import platform
import py_compile
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# One BLAS thread per test process. xdist runs one worker per core, and each worker starts kernels
# and compilers; OpenBLAS's own threads (one per core by default) on top of that oversubscribe the
# cores several times over, and a BLAS-bound test slows by an order of magnitude. The workers and
# the kernels they start inherit these variables (xdist starts its workers after this file is
# read); a value already set by whoever runs the suite is kept.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

#: The OpenBLAS kernel the solutions' stored outputs were made with. A few cells print numbers
#: that depend on the order in which the BLAS kernel sums a matrix product (a float32 training
#: run's loss after its unstable middle, a gradient difference of 1e-17): OpenBLAS picks its kernel
#: by CPU (``Haswell`` on AVX2 machines, ``SkylakeX`` with AVX-512, ...), so those numbers differ
#: from one machine to the next. The suite runs every notebook on this kernel where the CPU can
#: run it (x86-64 with AVX2 and FMA), so that the stored outputs compare on any such machine; a
#: kernel chosen by whoever runs the suite (``OPENBLAS_CORETYPE`` already set) is kept.
REFERENCE_BLAS_KERNEL = "Haswell"
#: The tag of the cells whose printed numbers depend on the BLAS kernel (see above). Where the
#: reference kernel is not the one running, they still run, but their outputs are not compared.
BLAS_KERNEL_TAG = "output-depends-on-blas-kernel"


def _runs_reference_kernel() -> bool:
    """Whether this CPU can run OpenBLAS's ``Haswell`` kernels: x86-64 with AVX2 and FMA (read
    from ``/proc/cpuinfo``; ``False`` where there is none)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    flags = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return {"avx2", "fma"} <= set(flags.partition(":")[2].split())


# An empty OPENBLAS_CORETYPE chooses nothing (OpenBLAS then picks by CPU), so it is replaced too.
if _runs_reference_kernel() and not os.environ.get("OPENBLAS_CORETYPE"):
    os.environ["OPENBLAS_CORETYPE"] = REFERENCE_BLAS_KERNEL


@functools.cache
def blas_kernel() -> str | None:
    """The OpenBLAS kernel NumPy runs on in this process, as OpenBLAS names it, and so in the
    notebooks' kernels, which inherit this environment; ``None`` where NumPy's BLAS is not an
    OpenBLAS whose kernel can be read (then nothing says the outputs' kernel is running)."""
    import numpy  # noqa: F401  (loads NumPy's BLAS)

    from llmfs.gpt.experiment import openblas_core

    return openblas_core()


def on_reference_kernel() -> bool:
    """Whether the notebooks run on :data:`REFERENCE_BLAS_KERNEL` (what runs, not what was
    asked for: a CPU without AVX-512 given ``SkylakeX`` runs another)."""
    return (blas_kernel() or "").lower() == REFERENCE_BLAS_KERNEL.lower()


#: The top-level folder whose notebooks are collected (strict --nbval).
NOTEBOOK_FOLDER = "solutions"
SANITIZE_FILE = Path("course") / "nbval_sanitize.cfg"
_ATTEMPTS_DIR = pytest.StashKey[str]()
_PREVIOUS_ATTEMPTS = pytest.StashKey["str | None"]()
_BUILD_CACHE = pytest.StashKey["str | None"]()


_CONFIG: dict[str, pytest.Config] = {}


#: The package whose bytecode the run writes before it starts anything (:func:`write_bytecode`).
PACKAGE = Path(__file__).resolve().parent / "llmfs"


#: Bytecode checked against its source's time and size, as Python writes it on import (not the
#: hash-checked kind py_compile writes where SOURCE_DATE_EPOCH is set).
_TIMESTAMP = py_compile.PycInvalidationMode.TIMESTAMP


def _bytecode_is_fresh(source: Path, cached: Path) -> bool:
    """Whether ``cached`` is bytecode Python would load for ``source``: this Python's magic
    number, and the source's modification time and size in its header (the import system's own
    test; ``compileall`` compares the time alone, so it keeps a file edited within the second)."""
    try:
        header = cached.read_bytes()[:16]
        status = source.stat()
    except OSError:
        return False
    expected = (
        importlib.util.MAGIC_NUMBER
        + (0).to_bytes(4, "little")
        + (int(status.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        + (status.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    )
    return header == expected


def write_bytecode(package: Path = PACKAGE) -> None:
    """Writes the bytecode of every module of ``package`` that has none, or a stale one (what
    Python itself writes on a module's first import), when ``PYTHONDONTWRITEBYTECODE`` stops
    Python writing it.

    Why: every kernel, sandboxed run and subprocess of the run imports the package, several
    hundred processes in all. Without bytecode each compiled the package's sources again (about
    0.4 s of CPU apiece on a fresh clone, a tenth of the whole run's CPU). Only the package is
    compiled, into its own ``__pycache__`` folders (ignored by git), as the first import would
    without the variable; a module that does not compile is left to fail where it is imported,
    with its own error, and a folder that cannot be written is left as it is."""
    if not sys.dont_write_bytecode or not package.is_dir():
        return
    for source in sorted(package.rglob("*.py")):
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not _bytecode_is_fresh(source, cached):
            with contextlib.suppress(OSError):  # a folder that cannot be written: as Python does
                py_compile.compile(
                    str(source), cfile=str(cached), quiet=2, invalidation_mode=_TIMESTAMP
                )


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG["config"] = config
    # Before any worker, kernel or subprocess starts (workers inherit it; see write_bytecode).
    if not hasattr(config, "workerinput"):
        write_bytecode()
    attempts_dir = tempfile.mkdtemp(prefix="llmfs-attempts-")
    config.stash[_ATTEMPTS_DIR] = attempts_dir
    config.stash[_PREVIOUS_ATTEMPTS] = os.environ.get("LLMFS_ATTEMPTS")
    # Kernels inherit the environment, so notebook runs never write into the checkout.
    os.environ["LLMFS_ATTEMPTS"] = str(Path(attempts_dir) / "attempts.jsonl")
    # One build cache for the whole run: the process that makes it (the xdist controller, or the
    # only process) sets it before any worker starts, so every worker, kernel and subprocess
    # inherits it and a kernel compiled once is not compiled again. Builds are keyed by source,
    # shim, compiler and flags (toolchain.build_key), so a cached build is never stale.
    config.stash[_BUILD_CACHE] = None
    if not os.environ.get("LLMFS_CACHE_DIR"):
        build_cache = tempfile.mkdtemp(prefix="llmfs-build-cache-")
        config.stash[_BUILD_CACHE] = build_cache
        os.environ["LLMFS_CACHE_DIR"] = build_cache
    option = config.option
    if hasattr(option, "nbval_sanitize_with") and option.nbval_sanitize_with is None:
        sanitize = config.rootpath / SANITIZE_FILE
        if sanitize.is_file():
            option.nbval_sanitize_with = str(sanitize)
    if hasattr(option, "nbval_current_env") and not option.nbval_kernel_name:
        option.nbval_current_env = True


def pytest_collection_finish(session: pytest.Session) -> None:
    """Moves every object alive once the tests are collected (the collected tests, their
    modules, parameters and the imported libraries: several hundred thousand objects) out of
    the garbage collector's reach (:func:`gc.freeze`), for the rest of this process.

    Why: they live as long as the run does, yet every full collection walked them all again,
    and full collections are frequent in a test process (several tests collect on purpose, to
    see what a dropped object frees). Measured on the 700 tests of ``tests/course`` and
    ``tests/tensor`` selected by ``-k "device_host or test_exercise_checks"``, in one process
    that had collected both folders: 24.7 s in the collector without this, 4.7 s with it (the
    process's CPU 105 s and 84 s). Objects made after this point are collected as before, so a
    test that drops what it made still sees it freed."""
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config: pytest.Config) -> None:
    attempts_dir = config.stash.get(_ATTEMPTS_DIR, None)
    if attempts_dir:
        shutil.rmtree(attempts_dir, ignore_errors=True)
        previous = config.stash.get(_PREVIOUS_ATTEMPTS, None)
        if previous is None:
            os.environ.pop("LLMFS_ATTEMPTS", None)
        else:
            os.environ["LLMFS_ATTEMPTS"] = previous
    build_cache = config.stash.get(_BUILD_CACHE, None)
    if build_cache:
        shutil.rmtree(build_cache, ignore_errors=True)
        os.environ.pop("LLMFS_CACHE_DIR", None)


#: Marks of tests that run for seconds or more: their files are scheduled first.
LONG_MARKS = ("slow", "notebooks", "browser")


def _is_long(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in LONG_MARKS)


#: Files whose tests of one chapter (a test id starting ``[chNN``) are a unit of work of their
#: own, so that chapters run on different workers. One chapter's tests of all these files are one
#: unit: they read the same in-process notebook runs (``tests/course/runkit.py``), made once per
#: process, so each notebook runs once; and what the library keeps per process for a chapter
#: (chapter 14's fine-tuning runs, ``finetune.shared_run``; chapter 13's memorising run) is
#: trained once for the notebook and the exercises' fixtures alike.
BY_CHAPTER = (
    "tests/course/test_chapters.py",
    "tests/course/test_verdict_parity.py",
    "tests/course/test_exercise_loop.py",
)
_CHAPTER_ID = re.compile(r"\[(ch\d+)\b")


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to, from its node id alone (xdist's controller sees only
    those): its file, or, for a test of one chapter in a :data:`BY_CHAPTER` file, that chapter
    (its tests of every such file; their other tests are one unit per file). A unit's tests
    always run in one worker, in order, so a notebook's cells share one kernel, a module fixture
    runs once per unit and a chapter's notebooks run once."""
    path = nodeid.split("::", 1)[0]
    if path in BY_CHAPTER:
        found = _CHAPTER_ID.search(nodeid)
        if found:
            return f"chapter {found.group(1)}"
    return path


#: Where the seconds each test took (setup, call and teardown) in the last run that ran it are
#: kept (pytest's cache folder).
TEST_SECONDS_KEY = "llmfs/test-seconds"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Orders the units of work (:func:`unit_of`) longest first, each unit's tests kept together
    and in order (this hook runs before xdist reads the order).

    A unit's length is the sum of its tests' seconds in the last run that ran each (kept in
    pytest's cache, so a run of a few tests updates only theirs); a unit with a test never timed
    counts as longest when it holds a long test (``slow``, ``notebooks``, ``browser``), and a
    short unit's untimed tests count nothing. Ties keep collection order. Handing out the longest
    units first leaves the many short ones to fill the end of the run on both workers instead of
    one long unit running alone while the other waits."""
    known: object = {}
    if getattr(config, "cache", None) is not None:
        known = config.cache.get(TEST_SECONDS_KEY, {})
    seconds = known if isinstance(known, dict) else {}
    units = {id(item): unit_of(item.nodeid) for item in items}
    long_units = {units[id(item)] for item in items if _is_long(item)}
    length: dict[str, float] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        unit = units[id(item)]
        first.setdefault(unit, index)
        value = seconds.get(item.nodeid)
        if not isinstance(value, (int, float)):
            value = float("inf") if unit in long_units else 0.0
        length[unit] = length.get(unit, 0.0) + value
    items[:] = sorted(items, key=lambda item: (-length[units[id(item)]], first[units[id(item)]]))


_TEST_TIMES = pytest.StashKey[dict]()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Summed in the process that reports (the xdist controller, or the only process).
    config = _CONFIG.get("config")
    if config is not None:
        times = config.stash.setdefault(_TEST_TIMES, {})
        times[report.nodeid] = times.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput") or getattr(config, "cache", None) is None:
        return  # a worker: the controller keeps the times
    times = config.stash.get(_TEST_TIMES, {})
    if not times:
        return
    known = config.cache.get(TEST_SECONDS_KEY, {})
    merged = dict(known) if isinstance(known, dict) else {}
    merged.update({nodeid: round(value, 3) for nodeid, value in times.items()})
    config.cache.set(TEST_SECONDS_KEY, merged)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix != ".ipynb":
        return None
    option = parent.config.option
    if getattr(option, "nbval", False) or getattr(option, "nbval_lax", False):
        return None  # nbval's own collector takes every notebook in that case
    try:
        relative = file_path.relative_to(parent.config.rootpath)
    except ValueError:
        return None
    if len(relative.parts) != 2 or relative.parts[0] != NOTEBOOK_FOLDER:
        return None
    if _CourseNotebook is None:
        return _MissingNbval.from_parent(parent, path=file_path)
    return _CourseNotebook.from_parent(parent, path=file_path)


try:
    from nbval.cover import teardown_coverage
    from nbval.plugin import IPyNbFile
except ImportError:
    _CourseNotebook = None
else:

    class _CourseNotebook(IPyNbFile):
        """nbval's notebook collector in strict mode: stored text outputs are compared.

        Each notebook's kernel gets a temporary folder of its own (``$TMPDIR``) and is stopped as
        JupyterLab stops one, by a shutdown request (nbval's own teardown kills it), so the
        notebook's cleanup at exit runs as on a learner's machine; the folder must then be
        empty: a chapter that leaves a file in the learner's temporary folder after its kernel
        stops fails its last cell's teardown, naming what it left."""

        scratch: Path | None = None

        def setup(self):
            self.scratch = Path(tempfile.mkdtemp(prefix="llmfs-nbval-tmp-"))
            previous = os.environ.get("TMPDIR")
            os.environ["TMPDIR"] = str(self.scratch)  # read once, when the kernel starts
            try:
                super().setup()
            finally:
                if previous is None:
                    os.environ.pop("TMPDIR", None)
                else:
                    os.environ["TMPDIR"] = previous

        def teardown(self):
            kernel, self.kernel = self.kernel, None
            try:
                if kernel is not None and kernel.is_alive():
                    if getattr(self.parent.config.option, "cov_source", None):
                        teardown_coverage(self.parent.config, kernel)  # as nbval's own teardown
                    kernel.kc.stop_channels()
                    kernel.km.shutdown_kernel(now=False)
            finally:
                scratch, self.scratch = self.scratch, None
                if scratch is not None:
                    left = sorted(p.name for p in scratch.iterdir())
                    shutil.rmtree(scratch, ignore_errors=True)
                    if left and kernel is not None:
                        raise AssertionError(
                            f"{self.path.name} left {', '.join(left)} in its temporary folder "
                            "after its kernel stopped (use tempfile.TemporaryDirectory, which "
                            "Python removes at exit)"
                        )

        def collect(self):
            self.compare_outputs = True
            # Text only: every llmfs output carries a deterministic text/plain form, and that is
            # what is compared. HTML and SVG are drawings of the same model; their bytes are held
            # by the widget tests and `llmfs figures --check`, not by every stored notebook.
            self.skip_compare = (*self.skip_compare, "text/html", "image/svg+xml")
            for item in super().collect():
                item.add_marker(pytest.mark.notebooks)
                tags = getattr(item, "cell", {}).get("metadata", {}).get("tags", ())
                if BLAS_KERNEL_TAG in tags and not on_reference_kernel():
                    item.options["check"] = False  # runs, errors still fail; output not compared
                yield item


class _MissingNbval(pytest.File):
    """Stands for a course notebook when nbval is not installed: one skipped item, with why."""

    def collect(self):
        yield _SkippedNotebook.from_parent(self, name="notebook")


class _SkippedNotebook(pytest.Item):
    def runtest(self) -> None:
        pytest.skip("nbval is not installed (pip install -e '.[test]'); course notebook not run")

    def reportinfo(self):
        return self.path, None, f"{self.path.name}: not run"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    if hasattr(config, "workerinput"):
        return  # the controller (or the only process) writes it, once
    ran = config.stash.get(_TEST_TIMES, {})  # every test reported here, notebooks' cells too
    if not any(nodeid.startswith(f"{NOTEBOOK_FOLDER}/") for nodeid in ran):
        return
    if on_reference_kernel():
        return
    terminalreporter.write_line(
        f"notebooks: the outputs of cells tagged {BLAS_KERNEL_TAG!r} are run, not compared, on "
        f"this machine: they were stored on OpenBLAS's {REFERENCE_BLAS_KERNEL} kernel, and this "
        f"run's BLAS kernel is {blas_kernel() or 'not one OpenBLAS names'} "
        f"(OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}, "
        f"machine {platform.machine()})"
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under ``--dist loadfile`` (pyproject.toml's) or ``loadscope``: xdist's scope scheduling
    with :func:`unit_of`'s units. Whole units go to a worker, handed out in collection order
    (``--no-loadscope-reorder``), which :func:`pytest_collection_modifyitems` makes longest
    first. Other modes are xdist's own."""
    if config.getvalue("dist") not in ("loadfile", "loadscope"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class _UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return _UnitScheduling(config, log)
