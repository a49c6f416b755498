"""The OpenBLAS kernel a fresh process runs on, for tests of what chooses it."""

from __future__ import annotations

import subprocess
import sys

_PRINT_KERNEL = (
    "import numpy; from llmfs.gpt.experiment import openblas_core; print(openblas_core())"
)


def kernel_in_child(env: dict[str, str]) -> str | None:
    """The OpenBLAS kernel (as OpenBLAS names it) that a new interpreter started with the
    environment ``env`` runs NumPy's products on; ``None`` where NumPy's BLAS there is not an
    OpenBLAS whose kernel can be read."""
    done = subprocess.run(
        [sys.executable, "-c", _PRINT_KERNEL], env=env, capture_output=True, text=True
    )
    core = done.stdout.strip()
    return None if core in ("", "None") else core
