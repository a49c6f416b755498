"""Where the course files live: an installed package's data, or the repository checkout.

The course files are the manifest (``course/manifest.toml``), the guides (``course/*.md``) and the
generated student notebooks (``notebooks/*.ipynb``). Two layouts are supported, tried in order:

1. **Package data** (a wheel install): the files are shipped inside the package under
   ``llmfs/course/_shipped/`` with the same relative paths (``course/manifest.toml``,
   ``notebooks/...``), so every path written in the manifest resolves the same way.
2. **The repository checkout** (an editable install or ``python -m llmfs`` from a clone): the
   directory above the ``llmfs`` package, when it holds ``course/manifest.toml``.

The environment variable ``LLMFS_COURSE_ROOT`` overrides both (used by tests and by instructors
who keep a course in another folder).
"""

from __future__ import annotations

import os
from pathlib import Path

from llmfs.course import CourseError

MANIFEST_RELATIVE = Path("course") / "manifest.toml"
ENV_COURSE_ROOT = "LLMFS_COURSE_ROOT"
#: The learner's course folder: where ``llmfs start`` copies the notebooks and ``llmfs check``
#: looks for them, unless ``--dir`` says otherwise (``~`` is the learner's home).
DEFAULT_FOLDER = Path("~/llmfs-course")


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def shipped_root() -> Path:
    """The package-data folder a wheel install carries (it may not exist in a checkout)."""
    return _package_dir() / "_shipped"


def checkout_root() -> Path:
    """The folder above the ``llmfs`` package: the repository root when running from a clone."""
    return _package_dir().parent.parent


def course_root() -> Path:
    """The folder that holds ``course/manifest.toml`` and ``notebooks/`` for this installation.

    Invariant: the returned folder contains ``course/manifest.toml``.
    Raises :class:`CourseError` naming every place searched when none holds the manifest.
    """
    override = os.environ.get(ENV_COURSE_ROOT)
    if override:
        root = Path(override).expanduser().resolve()
        if not (root / MANIFEST_RELATIVE).is_file():
            raise CourseError(
                f"{ENV_COURSE_ROOT}={override}: no {MANIFEST_RELATIVE.as_posix()} in that folder"
            )
        return root
    candidates = [shipped_root(), checkout_root()]
    for root in candidates:
        if (root / MANIFEST_RELATIVE).is_file():
            return root
    searched = ", ".join(str(root / MANIFEST_RELATIVE) for root in candidates)
    raise CourseError(
        f"the course files were not found: no manifest at {searched} "
        f"(install the package with its course data, or set {ENV_COURSE_ROOT})"
    )


def default_manifest_path() -> Path:
    """The manifest of this installation (see :func:`course_root`)."""
    return course_root() / MANIFEST_RELATIVE
