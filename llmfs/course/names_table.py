"""The table of llmfs names beside their NumPy and PyTorch spellings: written once, shown twice.

The table lives in ``README.md`` between the lines :data:`BEGIN` and :data:`END`; the learner
guide (``course/learner_guide.md``) shows the same block between the same lines. ``llmfs build``
copies the README's block into the guide, and ``llmfs build --check`` reports a guide whose block
differs, so the two can never drift apart. A tree without a README (an installed package) has
nothing to copy and nothing to check.
"""

from __future__ import annotations

from pathlib import Path

from llmfs.course import CourseError

BEGIN = "<!-- names-table: begin (llmfs build copies this block into course/learner_guide.md) -->"
END = "<!-- names-table: end -->"
README = "README.md"
GUIDE = "course/learner_guide.md"


def table_block(text: str, where: str) -> str:
    """The block from :data:`BEGIN` to :data:`END` (both included) of ``text``.

    Raises :class:`CourseError` naming ``where`` when either marker is missing, repeated or out
    of order.
    """
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise CourseError(
            f"{where}: the names table must be marked by exactly one {BEGIN!r} line and one "
            f"{END!r} line (found {text.count(BEGIN)} and {text.count(END)})"
        )
    start, stop = text.index(BEGIN), text.index(END)
    if stop < start:
        raise CourseError(f"{where}: the names table's end marker comes before its begin marker")
    return text[start : stop + len(END)]


def synced_guide(root: Path) -> tuple[Path, str] | None:
    """``(guide path, its text with the README's block)``, or None when ``root`` has no README
    or no learner guide (an installed package)."""
    readme, guide = root / README, root / GUIDE
    if not readme.is_file() or not guide.is_file():
        return None
    block = table_block(readme.read_text(encoding="utf-8"), README)
    text = guide.read_text(encoding="utf-8")
    current = table_block(text, GUIDE)
    return guide, text.replace(current, block)


def stale_guide(root: Path) -> list[str]:
    """One message when the learner guide's names table differs from the README's, else none."""
    synced = synced_guide(root)
    if synced is None:
        return []
    guide, text = synced
    if guide.read_text(encoding="utf-8") != text:
        return [f"{GUIDE}: its names table differs from the one in {README} (run `llmfs build`)"]
    return []


def write_guide(root: Path) -> str | None:
    """Copies the README's names table into the learner guide; returns what was done (for the
    build's listing), or None when there is no guide to write."""
    synced = synced_guide(root)
    if synced is None:
        return None
    guide, text = synced
    if guide.read_text(encoding="utf-8") == text:
        return f"{GUIDE}: up to date"
    guide.write_text(text, encoding="utf-8", newline="\n")
    return f"{GUIDE}: written"
