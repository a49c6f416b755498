"""Fixed-width text tables of the exercise engine: :func:`table` and a view's offset table
(:func:`render_offsets`).

They belong to the engine because a check's report (:mod:`llmfs.course.exercise_checks`) is
plain text that the grader and ``llmfs check`` read without loading any widget; the widgets
(:mod:`llmfs.widgets.text`) draw with the same functions, so a table reads the same everywhere.
Everything here is deterministic: the same input always gives the same characters.
"""

from __future__ import annotations

from collections.abc import Sequence

from llmfs.course.exercises.rows import FULL_LIMIT, Sampled, format_number, offset_entries
from llmfs.tensor import Tensor, TensorView


def format_ints(values: Sequence[int] | None) -> str:
    """``[3, 2]`` for a shape or strides (``[]`` for a scalar's), ``—`` for none."""
    if values is None:
        return "—"
    return "[" + ", ".join(str(v) for v in values) + "]"


def yes_no(flag: bool | None) -> str:
    """``Yes``/``No`` (``—`` when not applicable)."""
    if flag is None:
        return "—"
    return "Yes" if flag else "No"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A fixed-width table; a row shorter than ``headers`` lets its last cell run on."""
    widths = [len(h) for h in headers]
    for row in rows:
        if len(row) == len(headers):
            for k, cell in enumerate(row):
                widths[k] = max(widths[k], len(cell))
        else:
            for k, cell in enumerate(row[:-1]):
                widths[k] = max(widths[k], len(cell))

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(widths[k]) for k, cell in enumerate(cells[:-1])]
        return "  ".join([*padded, cells[-1]]).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in rows)
    return "\n".join(out)


def describe_view(view: TensorView, owner: str) -> str:
    """One line of metadata: shape, strides, base offset, contiguity and owner."""
    return (
        f"shape {format_ints(view.shape)}, strides {format_ints(view.strides)}, "
        f"base offset {view.base_offset}, contiguous {yes_no(view.is_contiguous())}, "
        f"owner {owner}"
    )


def render_offsets(item: TensorView | Tensor, owner: str = "base") -> str:
    """The offset table of a view: coordinate -> storage offset -> value, then the storage strip.

    Long views show their first and last entries and a count; the strip is drawn when the
    owner's storage has at most :data:`FULL_LIMIT` values.
    """
    view = item.view() if isinstance(item, Tensor) else item
    entries = offset_entries(view)
    rows = [
        [format_ints(e.coordinate), str(e.offset), format_number(e.value)] for e in entries.head
    ]
    if not entries.complete:
        rows.append([f"… {entries.omitted} more …", "", ""])
        rows.extend(
            [format_ints(e.coordinate), str(e.offset), format_number(e.value)] for e in entries.tail
        )
    parts = [describe_view(view, owner), table(("coordinate", "offset", "value"), rows)]
    parts.append(render_strip(view, owner, entries))
    return "\n".join(parts)


def storage_readers(entries: Sampled) -> dict[int, list[int]]:
    """Storage offset -> the logical positions (row-major indices) that read it."""
    readers: dict[int, list[int]] = {}
    for entry in (*entries.head, *entries.tail):
        readers.setdefault(entry.offset, []).append(entry.index)
    return readers


def render_strip(view: TensorView, owner: str, entries: Sampled | None = None) -> str:
    """The owner's storage as a strip: offset, value, and which logical positions read it."""
    storage = view.owner.as_slice()
    if storage.size > FULL_LIMIT:
        return f"storage of {owner}: {storage.size} values (strip shown up to {FULL_LIMIT})"
    entries = entries if entries is not None else offset_entries(view)
    readers = storage_readers(entries)
    headers = [f"storage of {owner}", *(str(k) for k in range(storage.size))]
    values = ["value", *(format_number(float(v)) for v in storage)]
    read = [
        "read by position",
        *(",".join(map(str, readers.get(k, []))) or "·" for k in range(storage.size)),
    ]
    return table(headers, [values, read])


__all__ = [
    "describe_view",
    "format_ints",
    "render_offsets",
    "render_strip",
    "storage_readers",
    "table",
    "yes_no",
]
