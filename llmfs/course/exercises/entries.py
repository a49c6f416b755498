"""What a predict exercise asks and how a learner's entry reads.

Fields (aliases in brackets): ``shape``, ``strides`` [stride], ``base_offset`` [base offset,
offset], ``offsets`` [logical offsets, logical_offsets], ``values``, ``contiguous`` [contiguity],
``owner`` (``shared`` or ``new``: a new owner), ``error`` (the ``TensorError`` class name, or
``none`` when the request succeeds; chapter 2 asks learners to predict that a reshape fails).
An exercise whose expression gives a dict of plain values asks for its keys instead ("plain"
fields, :func:`is_plain`).

Predictions may be Python data (``[3, 2]``, ``True``, ``"shared"``) or the strings a learner
would type (``"(3,2)"``, ``"3, 2"``, ``"yes"``); both go through :func:`normalize` (or
:func:`plain_value` for plain fields). An entry that cannot be read raises
:class:`UnreadableEntry` with a message saying what was expected, which the judge shows as a
verdict, never as a traceback.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import Any

from llmfs.course import CourseError
from llmfs.course.exercises.rows import FULL_LIMIT, format_number
from llmfs.course.manifest import load_manifest
from llmfs.tensor import TensorError

FIELDS: tuple[str, ...] = (
    "shape",
    "strides",
    "base_offset",
    "offsets",
    "values",
    "contiguous",
    "owner",
    "error",
)

LABELS: dict[str, str] = {
    "shape": "shape",
    "strides": "strides",
    "base_offset": "base offset",
    "offsets": "logical offsets",
    "values": "values",
    "contiguous": "contiguous",
    "owner": "owner",
    "error": "error",
}

#: What a learner may type, per field (shown as input hints by the widget).
HINTS: dict[str, str] = {
    "shape": "e.g. [3, 2]",
    "strides": "e.g. [2, 1]",
    "base_offset": "e.g. 0",
    "offsets": "e.g. [0, 1, 2, 3]",
    "values": "e.g. [[10, 11], [12, 20]]",
    "contiguous": "yes or no",
    "owner": "shared or new",
    "error": "none, or e.g. NonContiguousReshapeError",
}

_ALIASES: dict[str, str] = {
    "stride": "strides",
    "base offset": "base_offset",
    "baseoffset": "base_offset",
    "offset": "base_offset",
    "logical offsets": "offsets",
    "logical_offsets": "offsets",
    "contiguity": "contiguous",
    "is_contiguous": "contiguous",
}

NOT_ANSWERED = "not answered yet"
RIGHT_MARK = "✓"
WRONG_MARK = "✗"


class PredictionError(CourseError):
    """An exercise names a field that does not exist (an author's mistake, raised at once)."""


class UnreadableEntry(CourseError):
    """A learner's entry could not be read; the message says what was expected (the widgets
    show it as a verdict, so a learner never sees a traceback for a typo)."""


def field_name(name: str) -> str:
    """The canonical field for ``name`` or an alias. Raises :class:`PredictionError`."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in FIELDS:
        raise PredictionError(f"unknown prediction field {name!r}: choose from {', '.join(FIELDS)}")
    return key


# --------------------------------------------------------------------------------------------
# Reading entries
# --------------------------------------------------------------------------------------------

_YES = {"yes", "y", "true", "t", "1", "contiguous"}
_NO = {"no", "n", "false", "f", "0", "not contiguous", "non-contiguous", "noncontiguous"}
_SHARED = {"shared", "share", "view", "same", "borrowed", "base"}
_NEW = {"new", "new owner", "copy", "copied", "a copy", "materialized", "allocated", "fresh"}
_NO_ERROR = {"none", "no error", "ok", "no", "succeeds", "success", "-"}


def _literal(text: str) -> Any:
    cleaned = text.strip()
    try:
        return ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    # "3 2" or "3; 2": separators learners use instead of commas.
    spaced = re.sub(r"[\s;]+", ",", cleaned.strip("[]() "))
    try:
        return ast.literal_eval("[" + spaced + "]") if spaced else []
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise UnreadableEntry(f"could not read {text.strip()!r} as numbers") from None


def _int_list(value: Any, what: str, *, flatten: bool = False) -> tuple[int, ...]:
    if isinstance(value, str):
        value = _literal(value)
    if isinstance(value, bool):
        raise UnreadableEntry(f"{what} are whole numbers, not {value}")
    if isinstance(value, (int, float)):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise UnreadableEntry(f"{what} should be a list of whole numbers like [3, 2]")
    items: list[Any] = []
    for item in value:
        if isinstance(item, (list, tuple)):
            if not flatten:
                raise UnreadableEntry(f"{what} should be one flat list like [3, 2]")
            items.extend(_int_list(item, what, flatten=True))
            continue
        if isinstance(item, bool) or not isinstance(item, (int, float)) or item != int(item):
            raise UnreadableEntry(f"{what} should be whole numbers; {item!r} is not one")
        items.append(int(item))
    return tuple(items)


def _int(value: Any, what: str) -> int:
    if isinstance(value, str):
        value = _literal(value)
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise UnreadableEntry(f"{what} should be one whole number like 0")
    return int(value)


def _numbers(value: Any) -> Any:
    if isinstance(value, str):
        value = _literal(value)
    if isinstance(value, (list, tuple)):
        return [_numbers(v) for v in value]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UnreadableEntry(f"values should be numbers; {value!r} is not one")
    return float(value)


def _word(value: Any, yes: set[str], no: set[str], expected: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in yes:
        return True
    if text in no:
        return False
    raise UnreadableEntry(f"expected {expected}, got {str(value).strip()!r}")


def _error_name(value: Any) -> str:
    if isinstance(value, type) and issubclass(value, BaseException):
        return value.__name__
    if isinstance(value, BaseException):
        return type(value).__name__
    text = str(value).strip()
    if text.lower() in _NO_ERROR:
        return "none"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", text):
        raise UnreadableEntry(f"expected an error class name or 'none', got {text!r}")
    return text.rsplit(".", 1)[-1]


def normalize(field: str, value: Any) -> Any:
    """A prediction for ``field`` in canonical form, or ``None`` when not answered.

    ``None`` and blank strings are "not answered". Sequences become tuples of ints (shape,
    strides, offsets; offsets may be nested), values become nested lists of floats, contiguous a
    bool, owner ``"shared"``/``"new"``, error a class name or ``"none"``. Raises
    :class:`UnreadableEntry` with a message for an entry that cannot be read, and
    :class:`PredictionError` for an unknown field.
    """
    field = field_name(field)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if field in ("shape", "strides"):
        return _int_list(value, field)
    if field == "offsets":
        return _int_list(value, "offsets", flatten=True)
    if field == "base_offset":
        return _int(value, "the base offset")
    if field == "values":
        return _numbers(value)
    if field == "contiguous":
        return _word(value, _YES, _NO, "yes or no")
    if field == "owner":
        return "shared" if _word(value, _SHARED, _NEW, "shared or new") else "new"
    return _error_name(value)


# --------------------------------------------------------------------------------------------
# Plain answers (an exercise whose expression gives a dict of numbers and booleans)
# and what an exercise asks
# --------------------------------------------------------------------------------------------


def plain_value(value: Any) -> Any:
    """A plain answer in canonical form: bools stay bools, whole floats become ints, strings
    are read as Python literals or yes/no words (a bare name such as an error class stays a
    string), sequences become lists."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in _YES - {"1"}:
            return True
        if text.lower() in _NO - {"0"}:
            return False
        try:
            return plain_value(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            # A bare name (an error class such as KernelMemoryError) is an answer as it is.
            if text.isidentifier():
                return text
            raise UnreadableEntry(f"could not read {text!r} as a number or yes/no") from None
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value == int(value):
        return int(value)
    if isinstance(value, (list, tuple)):
        return [plain_value(v) for v in value]
    if isinstance(value, (int, float)):
        return value
    return value.item() if hasattr(value, "item") else value


def predict_exercise(exercise_id: str, manifest: Any = None) -> Any:
    """The manifest's predict exercise ``exercise_id``. Raises :class:`CourseError` when it is
    not a predict exercise or has no expression."""
    course = manifest if manifest is not None else load_manifest()
    exercise = course.exercise(exercise_id)
    if exercise.kind != "predict" or not exercise.expression:
        raise CourseError(
            f"{exercise_id} is a {exercise.kind} exercise without an expression to predict"
        )
    return exercise


def is_plain(fields: Sequence[str]) -> bool:
    """True when ``fields`` are keys of a dict result rather than tensor fields."""
    return any(
        f.strip().lower() not in FIELDS and f.strip().lower() not in _ALIASES for f in fields
    )


def display(field: str, value: Any) -> str:
    """A canonical value as text (``—`` for none)."""
    if value is None:
        return "—"
    if field in ("shape", "strides", "offsets"):
        return display_list([str(v) for v in value])
    if field == "values":
        if isinstance(value, list) and len(flat(value)) > FULL_LIMIT:
            return display_list([format_number(v) for v in flat(value)]) + " (flattened)"
        return _display_numbers(value)
    if field == "contiguous":
        return "Yes" if value else "No"
    if field in FIELDS:
        return str(value)
    if isinstance(value, bool):
        return "True" if value else "False"
    return repr(value)


def display_list(items: list[str]) -> str:
    """``[a, b, ...]``; a long list keeps its first and last entries."""
    # Long lists keep their first and last entries so a table row stays readable.
    if len(items) > FULL_LIMIT:
        items = [*items[:8], f"… {len(items) - 12} more …", *items[-4:]]
    return "[" + ", ".join(items) + "]"


def _display_numbers(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_display_numbers(v) for v in value) + "]"
    return format_number(value)


def flat(value: Any) -> list[Any]:
    """The entries of a nested list or tuple, in order."""
    if isinstance(value, (list, tuple)):
        return [x for item in value for x in flat(item)]
    return [value]


def error_classes() -> dict[str, type[TensorError]]:
    """Every ``TensorError`` class by name: the names a learner may predict as an error."""
    found: dict[str, type[TensorError]] = {}
    pending: list[type[TensorError]] = [TensorError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def resolve_error_name(text: str) -> str | None:
    """The full ``TensorError`` class name that ``text`` names, in any case and possibly by a
    unique prefix (``noncontiguous`` -> ``NonContiguousReshapeError``); ``None`` when it names
    none or several."""
    names = error_classes()
    wanted = text.lower()
    exact = [name for name in names if name.lower() in (wanted, wanted + "error")]
    if exact:
        return exact[0]
    prefixed = [name for name in names if name.lower().startswith(wanted)]
    return prefixed[0] if len(prefixed) == 1 else None


__all__ = [
    "FIELDS",
    "HINTS",
    "LABELS",
    "NOT_ANSWERED",
    "RIGHT_MARK",
    "WRONG_MARK",
    "PredictionError",
    "UnreadableEntry",
    "display",
    "display_list",
    "field_name",
    "flat",
    "is_plain",
    "normalize",
    "plain_value",
    "predict_exercise",
]
