"""Builders for small throwaway courses (manifest + solution notebooks) in temp folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def code(
    cell_id: str, source: str, *, tags: list[str] | None = None, outputs: bool = False
) -> dict:
    """A solution code cell with an id, optional tags and (optionally) a stored output."""
    cell: dict[str, Any] = {
        "cell_type": "code",
        "execution_count": 1 if outputs else None,
        "id": cell_id,
        "metadata": {"tags": tags} if tags else {},
        "outputs": (
            [{"name": "stdout", "output_type": "stream", "text": ["stored output\n"]}]
            if outputs
            else []
        ),
        "source": source,
    }
    if outputs:
        cell["metadata"]["execution"] = {"iopub.execute_input": "2026-01-01T00:00:00Z"}
    return cell


def markdown(cell_id: str, source: str, *, tags: list[str] | None = None) -> dict:
    """A markdown cell with an id and optional tags."""
    return {
        "cell_type": "markdown",
        "id": cell_id,
        "metadata": {"tags": tags} if tags else {},
        "source": source,
    }


def notebook(*cells: dict) -> dict:
    """An nbformat 4.5 notebook holding these cells, with a python3 kernelspec."""
    return {
        "cells": list(cells),
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.7"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write_notebook(path: Path, nb: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return path


MANIFEST_HEAD = "format = 1\n"


def chapter_toml(
    chapter_id: str, name: str, exercises: list[tuple[str, str]], status: str = "published"
) -> str:
    """A [[chapters]] block; ``exercises`` are (id, kind) pairs worth one point each."""
    text = (
        f'\n[[chapters]]\nid = "{chapter_id}"\ntitle = "Chapter {chapter_id}"\n'
        f'status = "{status}"\nsolution = "solutions/{name}.ipynb"\n'
        f'notebook = "notebooks/{name}.ipynb"\nobjectives = ["Learn {chapter_id}"]\n'
    )
    for exercise_id, kind in exercises:
        text += (
            f'\n[[chapters.exercises]]\nid = "{exercise_id}"\nkind = "{kind}"\npoints = 1\n'
            f'title = "Exercise {exercise_id}"\n'
        )
    return text


def write_manifest(root: Path, *chapters: str) -> Path:
    path = root / "course" / "manifest.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(MANIFEST_HEAD + "".join(chapters), encoding="utf-8")
    return path
