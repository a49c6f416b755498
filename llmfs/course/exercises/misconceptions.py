"""Misconceptions: named mistakes, recognised from a wrong answer.

Each :class:`Misconception` of the catalogue :data:`MISCONCEPTIONS` applies to one kind of field
and returns a one-sentence explanation when a wrong answer shows it; :func:`diagnose` asks every
detector of a field. A detector sees the wrong value, the truth and a :class:`Context` (the
outcome, with the request that was made, and the learner's other fields), so it applies to every
exercise of its kind; the general ones live in :mod:`llmfs.course.exercises.detectors`. The
exercise's own mistakes (the manifest's ``mistakes``) are matched by
:func:`llmfs.course.exercises.judge.judge`.

An explanation names the rule the answer broke, never a value of the answer: it is shown on the
first wrong try, long before the answer is revealed.

A tensor field may also be predicted as an error (``raises BroadcastError``, or left blank while
the ``error`` field names an error): :func:`predicted_raise` reads that, and the judge decides it
as a prediction of the error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmfs.course.exercises import detectors as d
from llmfs.course.exercises import op_detectors as od
from llmfs.course.exercises.entries import (
    PredictionError,
    UnreadableEntry,
    flat,
    normalize,
)
from llmfs.course.exercises.run import Outcome
from llmfs.tensor import layout


@dataclass(frozen=True)
class Context:
    """What a detector may look at besides the answer: the outcome (with the request made) and
    the other fields the learner predicted (for the checks across fields)."""

    outcome: Outcome
    others: Mapping[str, Any]


@dataclass(frozen=True)
class Misconception:
    """A named mistake: ``field`` is the kind of field it applies to, ``detect`` returns the
    one-sentence explanation when a wrong answer shows it (else ``None``).

    ``field`` :data:`NUMBER` applies to every field whose answer and truth are both numbers
    (a loss, a count, a base offset). ``plain`` says the detector also reads the fields of a
    plain outcome (an expression that gives a dict of plain values), where a field's name says
    what it holds (``grad``, ``cells``, ``loss``) but no request was traced."""

    name: str
    field: str
    detect: Callable[[Any, Any, Context], str | None]
    plain: bool = False


#: The field kind of the detectors that read any number against the truth.
NUMBER = "number"


def _row_major(shape: Sequence[int]) -> tuple[int, ...]:

    return tuple(layout.row_major_strides(tuple(shape)))


def _method(context: Context) -> str:
    call = context.outcome.call
    return call.method if call is not None else ""


def _permute_row_major(value: Any, truth: Any, context: Context) -> str | None:
    view = context.outcome.view
    if _method(context) not in ("transpose", "permute") or view is None:
        return None
    if value == _row_major(view.shape) != truth:
        return (
            "Those are the row-major strides of the result's shape, what a reshape would give: "
            "a transpose or permute keeps each axis's own stride and only moves it with its axis."
        )
    return None


def _transpose_reshape_offsets(value: Any, truth: Any, context: Context) -> str | None:
    call = context.outcome.call
    if _method(context) not in ("transpose", "permute") or call is None or call.source is None:
        return None
    walked = tuple(call.source.logical_offsets())
    if value == walked != truth:
        return (
            "Those are the offsets in the source's own order, what a reshape would walk: a "
            "transpose walks its new rows, so row 0 of the result is column 0 of the source."
        )
    return None


def _slice_start_only(value: Any, truth: Any, context: Context) -> str | None:
    call = context.outcome.call
    if call is None or call.source is None or truth is None:
        return None
    if call.method == "slice" and len(call.args) >= 2:
        axis, start = call.args[0], call.args[1]
    elif call.method == "getitem" and call.args and isinstance(call.args[0], int):
        axis, start = 0, call.args[0]
    else:
        return None
    if not isinstance(axis, int) or not isinstance(start, int):
        return None
    source = call.source
    axis = axis % max(len(source.shape), 1)
    stride = source.strides[axis] if axis < len(source.strides) else 1
    if value in (start, source.base_offset + start) and value != truth and stride != 1:
        return (
            "The base offset moves by start × stride along the sliced axis, not by the start "
            "index alone: each step along that axis skips a whole stride of storage."
        )
    return None


def _slice_contiguous_strides(value: Any, truth: Any, context: Context) -> str | None:
    view = context.outcome.view
    if _method(context) not in ("slice", "getitem") or view is None:
        return None
    if value == _row_major(view.shape) != truth:
        return (
            "Those are the row-major strides of the slice's shape, as if the slice were a "
            "contiguous block of its own: a slice keeps its source's strides."
        )
    return None


def _slice_contiguous_offsets(value: Any, truth: Any, context: Context) -> str | None:
    view = context.outcome.view
    if _method(context) not in ("slice", "getitem") or view is None or not value:
        return None
    run_from = (view.base_offset, value[0])
    if any(tuple(range(s, s + len(value))) == value for s in run_from) and value != truth:
        return (
            "Those offsets form one gap-free run, as if the slice were contiguous: a slice "
            "skips the storage values it leaves out, so its walk jumps between rows."
        )
    return None


def _slice_contiguous_flag(value: Any, truth: Any, context: Context) -> str | None:
    if _method(context) in ("slice", "getitem") and value is True and truth is False:
        return (
            "A slice that keeps only part of an inner axis leaves gaps between its rows: the "
            "walk is not one gap-free run, so it is not contiguous."
        )
    return None


def _step_floor(value: Any, truth: Any, context: Context) -> str | None:
    call = context.outcome.call
    if call is None or call.method != "slice" or len(call.args) < 4 or truth is None:
        return None
    axis, start, stop, step = call.args[:4]
    if not all(isinstance(v, int) for v in (axis, start, stop, step)) or step <= 1:
        return None
    axis = axis % len(truth) if truth else 0
    floor = (stop - start) // step
    if (
        len(value) == len(truth)
        and value[axis] == floor
        and truth[axis] != floor
        and all(v == t for k, (v, t) in enumerate(zip(value, truth)) if k != axis)
    ):
        return (
            "(stop - start) / step rounded down counts only the whole steps: the size is "
            "ceil((stop - start) / step), because index start itself is kept too."
        )
    return None


def _shape_for_strides(value: Any, truth: Any, context: Context) -> str | None:
    view = context.outcome.view
    if view is not None and value == tuple(view.shape) != truth:
        return (
            "That is the shape: the strides say how many storage values one step along each "
            "axis skips."
        )
    return None


def _count_mismatch(value: Any, truth: Any, context: Context) -> str | None:

    count = len(flat(value))
    shape = context.others.get("shape")
    try:
        shape = normalize("shape", shape)
    except UnreadableEntry:
        shape = None
    source = "the shape you predicted"
    if shape is None:
        view = context.outcome.view
        if view is None:
            return None
        shape, source = tuple(view.shape), "the result's shape"
    expected = layout.element_count(shape)
    if count != expected:
        # The shape itself is not repeated: it may be an answer still to find.
        return (
            f"{count} entr{'y' if count == 1 else 'ies'} for {source}, which holds {expected} "
            f"value{'' if expected == 1 else 's'}: one offset and one value per coordinate."
        )
    return None


def _offsets_for_values(value: Any, truth: Any, context: Context) -> str | None:
    view = context.outcome.view
    if view is None:
        return None
    offsets = [float(v) for v in view.logical_offsets()]
    if [float(v) for v in flat(value)] == offsets and flat(truth) != offsets:
        return (
            "Those are the storage offsets, not the values stored there: look each offset up "
            "in the storage."
        )
    return None


def _named(
    name: str,
    fields: str,
    detect: Callable[[Any, Any, Context], str | None],
    *,
    plain: bool = False,
) -> list[Misconception]:
    return [Misconception(name, field, detect, plain) for field in fields.split()]


#: The catalogue: every named misconception, per kind of field (each has a test).
MISCONCEPTIONS: tuple[Misconception, ...] = (
    Misconception("row-major strides for a transpose or permute", "strides", _permute_row_major),
    Misconception("reshape offsets for a transpose", "offsets", _transpose_reshape_offsets),
    Misconception("base offset without start*stride", "base_offset", _slice_start_only),
    Misconception("slice treated as contiguous (strides)", "strides", _slice_contiguous_strides),
    Misconception("slice treated as contiguous (offsets)", "offsets", _slice_contiguous_offsets),
    Misconception("slice treated as contiguous", "contiguous", _slice_contiguous_flag),
    Misconception("floor instead of ceil for a step", "shape", _step_floor),
    Misconception("shape given for strides", "strides", _shape_for_strides),
    Misconception("count mismatch across fields", "offsets", _count_mismatch),
    Misconception("count mismatch across fields", "values", _count_mismatch),
    Misconception("offsets given for values", "values", _offsets_for_values),
    # The general detectors (llmfs.course.exercises.detectors).
    *_named("reversed order", "shape strides", d.reversed_order),
    *_named("column-major strides", "strides", d.column_major),
    *_named("inverse permutation", "shape strides", d.inverse_permutation),
    *_named("source layout kept by a transpose or permute", "shape strides", d.kept_source_layout),
    *_named("axis numbers given for the layout", "shape strides", d.dims_for_strides),
    *_named(
        "the transpose's answer for a reshape", "strides offsets values", d.transpose_for_reshape
    ),
    *_named("row-major strides for a view", "strides", d.view_as_new_owner),
    *_named("a copy keeps its source's layout", "strides offsets", d.copy_keeps_source),
    *_named("a new owner walked out of order", "offsets", d.new_owner_walk),
    *_named("view or new owner confused", "owner", d.owner_kind),
    *_named("a view is always contiguous, a copy never", "contiguous", d.contiguity),
    *_named("axes given to a scalar", "shape strides", d.scalar_axes),
    *_named("a size-0 axis multiplied in", "strides", d.zero_size_products),
    *_named("expand without stride 0", "strides", d.expand_zero_stride),
    *_named("head-axis order", "shape strides", d.head_axis_order),
    *_named("merged axis with its outer stride", "strides", d.merge_outer_stride),
    *_named("split axes column-major", "strides", d.split_column_major),
    *_named("flip keeps its direction", "strides base_offset", d.flip_keeps_direction),
    *_named("index sum without strides", "base_offset", d.index_without_strides),
    *_named("a slice's base offset is 0", "base_offset", d.slice_base_offset_zero),
    *_named("off-by-one slice end", "shape offsets", d.slice_end_off_by_one),
    *_named("reduced over the wrong axis", "shape values", od.wrong_axis),
    *_named("keepdims forgotten or added", "shape values", od.keepdims_flipped),
    *_named("reduce over the kept labels", "shape values", od.reduce_kept_labels),
    *_named("broadcast aligned from the left", "shape error", od.broadcast_from_left),
    *_named("uniform attention weights", "values", od.uniform_attention),
    *_named("base class named for the error", "error", od.base_class),
    *_named("a Python error for an llmfs refusal", "error", od.foreign_error),
    *_named("success predicted for a refused request", "error", od.refused_request),
    *_named("an error whose rule the request keeps", "error", od.wrong_refusal),
    *_named("a product keeps an operand's shape", "shape", d.product_keeps_operand_shape),
    *_named("a logarithm in another base", NUMBER, d.other_log_base, plain=True),
    *_named("the sign flipped", NUMBER, d.flipped_sign, plain=True),
    *_named("counted several times, or once too few", NUMBER, d.counted_several_times, plain=True),
    *_named("a number float32 cannot hold", NUMBER, d.float32_spacing, plain=True),
    *_named("every value scaled by one factor", "values", d.scaled_values),
    *_named("a loss given as a probability", "loss", d.probability_for_loss, plain=True),
    *_named("a gradient in another shape", "grad", d.gradient_shape, plain=True),
    *_named("a gradient's shape named", "grad_shape", d.gradient_shape_named, plain=True),
    *_named(
        "neighbouring cells for a strided view",
        "cells q_cells read_from read_offsets",
        d.neighbouring_cells,
        plain=True,
    ),
)


def diagnose(field: str, value: Any, truth: Any, context: Context) -> list[str]:
    """The messages of every catalogued misconception that a wrong ``value`` shows.

    A plain outcome's key named ``error`` (an error class name, or ``none``) is diagnosed as an
    ``error`` field; its other keys only by the detectors marked ``plain`` (and a number, by
    those of kind :data:`NUMBER`). A detector that cannot read this kind of request stays
    silent (one that raises counts as silent: a learner's check never fails on an explanation;
    the probe tests call every detector directly, so a raising detector fails there).
    """
    plain = context.outcome.plain is not None
    numeric = d.number(value) and d.number(truth)
    messages: list[str] = []
    counts: list[str] = []
    for misconception in MISCONCEPTIONS:
        if misconception.field == NUMBER:
            if not numeric:
                continue
        elif misconception.field != field:
            continue
        if plain and not misconception.plain and not (field == "error" and isinstance(value, str)):
            continue
        try:
            message = misconception.detect(value, truth, context)
        except Exception:  # a detector that cannot read this kind of request has nothing to say
            message = None
        if message:
            (counts if misconception.field == NUMBER else messages).append(message)
    # A number's relation to the truth (a factor, a sign) is the least specific reading: it
    # speaks only where no rule of the request does, so no answer gets two sentences for one slip.
    return list(dict.fromkeys(messages or counts))


#: "raises X", "error: X", "refused" ...: a tensor field predicted as an error.
_RAISES = re.compile(
    r"\s*(?:it\s+)?(?:raises|raise|error|refused|rejected|fails)\b[\s:]*([A-Za-z_][\w.]*)?\s*",
    re.IGNORECASE,
)


def predicted_raise(predicted: Any, error: Any = None) -> str | None:
    """The error class a tensor field's entry predicts (``""`` when it says only that the
    request raises), or ``None`` when it predicts a value.

    ``raises BroadcastError``, ``error: BroadcastError``, ``refused`` and a bare error class name
    (``BroadcastError``) predict an error; so does a blank entry when the exercise's ``error``
    field (``error``, as the learner typed it) names an error: a request that raises has no
    shape or strides to predict."""
    if predicted is None or (isinstance(predicted, str) and not predicted.strip()):
        try:
            named = normalize("error", error)
        except (UnreadableEntry, PredictionError):
            return None
        return named if named not in (None, "none") else None
    if not isinstance(predicted, str):
        return None
    text = predicted.strip()
    match = _RAISES.fullmatch(text)
    if match:
        return (match.group(1) or "").rsplit(".", 1)[-1]
    if re.fullmatch(r"[A-Za-z_][\w.]*Error", text):
        return text.rsplit(".", 1)[-1]
    return None


__all__ = ["MISCONCEPTIONS", "NUMBER", "Context", "Misconception", "diagnose", "predicted_raise"]
