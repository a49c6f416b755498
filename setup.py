"""Build hook: ship the course files (manifest, explanations, learner guide, notebooks) in a wheel.

An editable install reads them from the checkout; a wheel carries copies under
``llmfs/course/_shipped/`` so that ``pip install llmfs && llmfs start`` works anywhere.
``llmfs.course.paths`` looks in both places. Everything else is in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

COURSE_FILES = (
    "course/manifest.toml",
    "course/explanations.json",
    "course/learner_guide.md",
    "notebooks/*.ipynb",
)


class BuildPyWithCourse(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        root = Path(__file__).resolve().parent
        shipped = Path(self.build_lib) / "llmfs" / "course" / "_shipped"
        for pattern in COURSE_FILES:
            for source in sorted(root.glob(pattern)):
                target = shipped / source.relative_to(root)
                target.parent.mkdir(parents=True, exist_ok=True)
                self.copy_file(str(source), str(target))


setup(cmdclass={"build_py": BuildPyWithCourse})
