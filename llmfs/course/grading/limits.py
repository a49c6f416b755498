"""Resource limits applied by a sandboxed process to itself, before any learner code runs.

Both sandboxed processes (the notebook's kernel and the implement worker) call
:func:`apply_limits` first thing, so every byte the learner's code allocates and every CPU second
it burns counts against them. A process sets its own limits instead of the parent passing a
``preexec_fn``: the grader runs submissions from several threads, where ``preexec_fn`` is unsafe.

Every limit is set as both the soft and the hard limit: a process may lower a hard limit but
only one with ``CAP_SYS_RESOURCE`` may raise it, and the sandbox's processes have no capability
(an unprivileged uid in their own user namespace, every capability dropped), so the learner's
``resource.setrlimit(RLIMIT_AS, (hard, hard))`` changes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Environment for sandboxed processes: one thread per numeric library (each thread would reserve
#: address space counted by the memory limit), few malloc arenas, no GUI backend.
QUIET_ENV: dict[str, str] = {
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "LLMFS_NUM_THREADS": "1",  # llmfs.tensor's copy threads (llmfs.tensor.backends.threads)
    "MALLOC_ARENA_MAX": "2",
    "MPLBACKEND": "Agg",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
}


@dataclass(frozen=True)
class Limits:
    """Timeouts (seconds) and memory (MiB) for one submission.

    ``cell_timeout`` bounds each notebook cell, ``total_timeout`` the whole notebook run,
    ``memory_mb`` the address space of the kernel and of the implement worker,
    ``implement_timeout`` one implement exercise's hidden cases, ``case_timeout`` one case,
    ``compile_timeout`` compiling a kernel exercise's kernel once, before its cases are timed
    (a cold build cache on a loaded machine takes seconds: never the cases' time),
    ``file_mb`` any file a sandboxed process writes, ``output_mb`` everything a notebook prints
    or displays in all (a run that prints more is stopped and reported), ``processes`` the
    processes and threads alive at once in one sandbox, ``disk_mb`` the sandbox's ``/tmp`` and
    its scratch folder (each a tmpfs of that size).
    Invariant: every value is positive.
    """

    cell_timeout: float = 30.0
    total_timeout: float = 300.0
    memory_mb: int = 2048
    implement_timeout: float = 60.0
    case_timeout: float = 2.0
    compile_timeout: float = 120.0
    file_mb: int = 64
    output_mb: int = 16
    processes: int = 64
    disk_mb: int = 256

    def __post_init__(self) -> None:
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"Limits.{name} must be positive, got {value!r}")


def apply_limits(
    memory_mb: int, cpu_seconds: float, file_mb: int, processes: int | None = None
) -> dict[str, int]:
    """Caps this process's address space, CPU time and file size, and with ``processes`` the
    processes its user may have (``RLIMIT_NPROC``); no core dumps. Returns the limits now in
    force (name -> value), soft and hard alike.

    Each limit becomes both the soft and the hard limit (never above the hard limit already in
    force), so the process cannot raise it again without ``CAP_SYS_RESOURCE``. ``processes`` is
    only for a process in its own user namespace (the sandbox): there ``RLIMIT_NPROC`` counts the
    sandbox's processes alone; outside one it counts every process of the user's.
    A limit the system refuses to lower (an exotic platform) is left out of the answer: the
    parent's wall-clock timeout still ends the process.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return {}
    cpu = max(1, int(cpu_seconds + 0.999))
    wanted = [
        ("RLIMIT_AS", memory_mb * 1024 * 1024),
        ("RLIMIT_CPU", cpu),
        ("RLIMIT_FSIZE", file_mb * 1024 * 1024),
        ("RLIMIT_CORE", 0),
    ]
    if processes is not None:
        wanted.append(("RLIMIT_NPROC", processes))
    held: dict[str, int] = {}
    for name, value in wanted:
        which = getattr(resource, name, None)
        if which is None:
            continue
        try:
            _, hard = resource.getrlimit(which)
            cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (cap, cap))
        except (ValueError, OSError):
            continue
        held[name] = cap
    return held


#: Variables a sandboxed process inherits; everything else (tokens, a CI's grading seed, cloud
#: credentials) stays out of the learner's reach.
INHERITED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "SYSTEMROOT",
    "LLMFS_COURSE_ROOT",
    # The BLAS kernel the grader was told to use (OpenBLAS otherwise picks one by CPU): a float32
    # training run's last bits depend on it, and a notebook runs on the grader's numerics.
    "OPENBLAS_CORETYPE",
)


def sandbox_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a sandboxed process: only :data:`INHERITED_ENV` (and ``LC_*``) of this
    one's, plus :data:`QUIET_ENV` and ``extra``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in INHERITED_ENV or name.startswith("LC_")
    }
    env.update(QUIET_ENV)
    env.update(extra or {})
    return env
