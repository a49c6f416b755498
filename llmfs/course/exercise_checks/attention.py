"""Checks of chapter 7's "implement it" exercises: attention heads over shared storage.

* ``split_heads(qkv, heads) -> (q, k, v)``: the packed projection ``[B, T, 3C]`` cut into three
  ``[B, H, T, D]`` views of the SAME storage (no new owner); ``ValueError`` (a library
  ``TensorError`` is one) when the last axis is not ``3 * heads * D``;
* ``merge_heads(y) -> [B, T, H*D]``: heads back side by side, with exactly one new owner;
* ``causal_self_attention(qkv, heads) -> [B, T, C]``: one causal multi-head self-attention pass on
  :mod:`llmfs.tensor`, compared with a plain NumPy version (within 1e-9 in float64), with exactly
  one copy (one ``materialize``: the merge).

Cases are JSON data (the packed values as nested lists, and the number of heads); ``prepare``
turns them into tensors. Copies are counted by :func:`counting_copies` while the learner's function
runs (the spec's ``call``), so "exactly one copy" is checked, not assumed. Expected outcomes come
from the library's own views and from :mod:`llmfs.gpt.reference` (NumPy), never from arithmetic
written here.
"""

from __future__ import annotations

import functools
import math
import random
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmfs.course.exercise_checks.shortcuts import Shortcuts
from llmfs.course.exercise_checks.spec import ImplementSpec, register, to_json
from llmfs.tensor import Tensor, TensorView
from llmfs.tensor.view import ViewMethods

#: The largest difference from the NumPy reference that still counts as equal (float64).
TOLERANCE = 1e-9


#: The doors out of the library to NumPy or Python numbers: a learner's answer that calls one
#: computes (part of) its result outside the tensors it was asked to use. ``tolist`` and
#: ``np.asarray(view)`` (``__array__``) go through ``to_numpy``; ``float(t)`` and ``int(t)``
#: through ``item``; each is counted where the learner's code calls it.
READ_OUT_METHODS: tuple[tuple[type, str], ...] = (
    (ViewMethods, "to_numpy"),
    (ViewMethods, "numpy_view"),
    (ViewMethods, "tolist"),
    (ViewMethods, "__array__"),
    (ViewMethods, "get"),
    (ViewMethods, "item"),
    (ViewMethods, "__float__"),
    (ViewMethods, "__int__"),
    (Tensor, "as_slice"),
    (Tensor, "as_mut_slice"),
)

#: Module-name prefixes of the library's own code: its calls of a read-out door (printing a
#: tensor, an op that reads a scalar) are the library's business, not the learner's round trip.
_LIBRARY_MODULES = ("llmfs.",)
_TOOLING_MODULES = ("llmfs.course.",)


@dataclass
class CopyCount:
    """What a block of code allocated: ``new_owners`` (every new :class:`Tensor`, compute results
    included) and ``copies`` (calls of ``materialize``, which ``copying_transpose`` and the
    module-level ``materialize`` go through: the library's only way to copy a layout); and how
    often code outside the library read tensors out to NumPy or Python numbers (``read_outs``,
    by method name in ``read_out_names``: see :data:`READ_OUT_METHODS`)."""

    new_owners: int = 0
    copies: int = 0
    read_outs: int = 0
    read_out_names: list[str] = field(default_factory=list)


def _called_from_outside_the_library(depth: int) -> bool:
    """True when the frame ``depth`` levels above the caller is not the library's own code (a
    NumPy function written in C leaves no frame: ``np.asarray(view)`` is the learner's call)."""
    module = str(sys._getframe(depth + 1).f_globals.get("__name__", ""))
    return not module.startswith(_LIBRARY_MODULES) or module.startswith(_TOOLING_MODULES)


@contextmanager
def counting_copies() -> Iterator[CopyCount]:
    """Counts the new owners and the copies made inside the ``with`` block, and the read-outs
    of tensors to NumPy or Python numbers made by code outside the library::

        with counting_copies() as count:
            merged = merge_heads(y)
        count.copies  # 1

    Every owner is initialised by ``Tensor._init_layout`` (the constructors, the ops' results and
    the copies all end there) and every copy goes through
    ``materialize`` (one method shared by tensors and views); both, and every method of
    :data:`READ_OUT_METHODS`, are wrapped for the block and restored after it, even when the
    block raises. Blocks may nest (each counts its own).
    """
    count = CopyCount()
    original_init = Tensor._init_layout
    original_materialize = ViewMethods.materialize
    originals = {(cls, name): cls.__dict__[name] for cls, name in READ_OUT_METHODS}

    def init(self: Tensor, *args: Any) -> None:
        count.new_owners += 1
        original_init(self, *args)

    def materialize(self: ViewMethods) -> Tensor:
        count.copies += 1
        return original_materialize(self)

    def door(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def read_out(self: Any, *args: Any, **kwargs: Any) -> Any:
            if _called_from_outside_the_library(1):
                count.read_outs += 1
                if name not in count.read_out_names:
                    count.read_out_names.append(name)
            # A read out to NumPy (to_numpy, tolist, np.asarray) copies through a temporary owner
            # that no code sees: the learner made no tensor, so none is counted.
            before = count.new_owners
            try:
                return original(self, *args, **kwargs)
            finally:
                count.new_owners = before

        return read_out

    Tensor._init_layout = init  # type: ignore[method-assign,assignment]
    ViewMethods.materialize = materialize  # type: ignore[method-assign]
    for (cls, name), original in originals.items():
        setattr(cls, name, door(name, original))
    try:
        yield count
    finally:
        Tensor._init_layout = original_init  # type: ignore[method-assign]
        ViewMethods.materialize = original_materialize  # type: ignore[method-assign]
        for (cls, name), original in originals.items():
            setattr(cls, name, original)


@dataclass(frozen=True)
class Counted:
    """A learner function's result and what it allocated."""

    result: Any
    count: CopyCount


def counted_call(fn: Callable[..., Any], args: tuple[Any, ...]) -> Counted:
    """``fn(*args)`` under :func:`counting_copies` (an :class:`ImplementSpec`'s ``call``)."""
    with counting_copies() as count:
        result = fn(*args)
    return Counted(result, count)


# --------------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------------


def _values(rng: random.Random, shape: list[int], scale: float) -> Any:
    if not shape:
        drawn = rng.randint(-20, 20)
        return drawn if scale == 1 else round(drawn * scale, 2)
    return [_values(rng, shape[1:], scale) for _ in range(shape[0])]


def _packed_cases(rng: random.Random, n: int, *, errors: bool, scale: float) -> list[tuple]:
    cases: list[tuple[Any, ...]] = [(_values(rng, [1, 3, 12], scale), 2)]
    while len(cases) < n:
        batch, seq = rng.randint(1, 2), rng.randint(1, 4)
        heads, size = rng.randint(1, 3), rng.randint(1, 3)
        width = 3 * heads * size
        roll = rng.random()
        if errors and roll < 0.08:
            width += rng.choice((-1, 1)) if width > 3 else 1  # not a multiple of 3
        elif errors and roll < 0.14 and (heads * size) % (heads + 1):
            heads += 1  # 3 parts, but each part does not split into this many heads
        cases.append((_values(rng, [batch, seq, width], scale), heads))
    return cases


def _split_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return _packed_cases(rng, n, errors=True, scale=1.0)


def _attention_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    return _packed_cases(rng, n, errors=False, scale=0.1)


def _merge_cases(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    cases: list[tuple[Any, ...]] = [(_values(rng, [1, 2, 3, 2], 1.0),)]
    while len(cases) < n:
        shape = [rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 4), rng.randint(1, 3)]
        cases.append((_values(rng, shape, 1.0),))
    return cases


def _packed(values: Any, heads: int) -> tuple[Any, ...]:
    return (Tensor.from_numpy(values), heads)


def _owner(values: Any) -> tuple[Any, ...]:
    return (Tensor.from_numpy(values),)


# --------------------------------------------------------------------------------------------
# The library's answers
# --------------------------------------------------------------------------------------------


def _check_packed(width: int, heads: int) -> int:
    if width % 3 or (width // 3) % heads:
        raise ValueError(
            f"the packed axis has {width} features, not 3 x heads x head size with {heads} heads"
        )
    return width // 3


def _library_split(qkv: Tensor, heads: int) -> list[TensorView]:
    width = _check_packed(qkv.shape[-1], heads)
    return [
        qkv.slice(2, i * width, (i + 1) * width).split(2, [heads, -1]).permute([0, 2, 1, 3])
        for i in range(3)
    ]


def _split_reference(values: Any, heads: int) -> Any:
    parts = _library_split(Tensor.from_numpy(values), heads)
    return {
        "shapes": [list(p.shape) for p in parts],
        "values": [to_json(p.tolist()) for p in parts],
        "views of qkv": [True, True, True],
        "new owners": 0,
    }


def _split_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    counted: Counted = result
    parts = counted.result
    if parts is None:  # the stub's None: "not implemented yet"
        return None
    qkv: Tensor = call_args[0]
    if not (isinstance(parts, (tuple, list)) and len(parts) == 3):
        return {"not three tensors": type(parts).__name__}
    if not all(isinstance(p, (Tensor, TensorView)) for p in parts):
        return {"not three tensors": [type(p).__name__ for p in parts]}
    views = [p.view() if isinstance(p, Tensor) else p for p in parts]
    return {
        "shapes": [list(v.shape) for v in views],
        "values": [to_json(v.tolist()) for v in views],
        "views of qkv": [v.owner is qkv for v in views],
        "new owners": counted.count.new_owners,
    }


def _merge_reference(values: Any) -> Any:
    y = Tensor.from_numpy(values)
    b, h, t, d = y.shape
    merged = y.permute([0, 2, 1, 3]).materialize().reshape([b, t, h * d])
    return {"shape": list(merged.shape), "values": to_json(merged.tolist()), "new owners": 1}


def _merge_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    counted: Counted = result
    merged = counted.result
    if merged is None:
        return None
    if not isinstance(merged, (Tensor, TensorView)):
        return {"not a tensor": type(merged).__name__}
    view = merged.view() if isinstance(merged, Tensor) else merged
    return {
        "shape": list(view.shape),
        "values": to_json(view.tolist()),
        "new owners": counted.count.new_owners,
    }


def attention_numpy(qkv: np.ndarray, heads: int) -> np.ndarray:
    """Causal multi-head self-attention of a packed ``[B, T, 3C]`` array in plain NumPy (the
    heads merged back, before the output projection), with the capstone reference's
    ``softmax`` and ``causal_mask``."""
    # The capstone's NumPy reference is loaded only when an attention case is checked.
    from llmfs.gpt.reference import causal_mask, softmax

    b, t, width = qkv.shape
    c = _check_packed(width, heads)
    d = c // heads
    q, k, v = (
        qkv[..., i * c : (i + 1) * c].reshape(b, t, heads, d).transpose(0, 2, 1, 3)
        for i in range(3)
    )
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    scores = np.where(causal_mask(t), scores, -np.inf)
    return (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)


_WITHIN = f"within {TOLERANCE:g} of NumPy"


def _attention_reference(values: Any, heads: int) -> Any:
    expected = attention_numpy(np.asarray(values, dtype=np.float64), heads)
    return {"shape": list(expected.shape), _WITHIN: True, "copies": 1}


def _attention_summary(result: Any, call_args: tuple[Any, ...]) -> Any:
    counted: Counted = result
    out = counted.result
    if out is None:
        return None
    qkv: Tensor = call_args[0]
    if not isinstance(out, (Tensor, TensorView)):
        return {"not a tensor": type(out).__name__}
    got = out.to_numpy()
    expected = attention_numpy(np.asarray(qkv.as_slice()).reshape(qkv.shape), call_args[1])
    close = got.shape == expected.shape and bool(np.all(np.abs(got - expected) <= TOLERANCE))
    return {"shape": list(got.shape), _WITHIN: close, "copies": counted.count.copies}


def _spec(exercise_id: str, function: str, make: Any, reference: Any, **kw: Any) -> ImplementSpec:
    return ImplementSpec(exercise_id, function, make, reference, call=counted_call, **kw)


check_split_heads = register(
    _spec(
        "ch07.split_heads",
        "split_heads",
        _split_cases,
        _split_reference,
        prepare=_packed,
        summarize=_split_summary,
        parameters=("qkv", "heads"),
        shortcuts=Shortcuts(
            ("llmfs.gpt.tensor_model.split_heads",), "slice, split and permute views of qkv"
        ),
    ),
    "Checks ``split_heads(qkv, heads) -> (q, k, v)``: three ``[B, H, T, D]`` views of the packed "
    "tensor's own storage (no new owner); ``ValueError`` when the last axis is not "
    "``3 * heads * D``.",
)
check_merge_heads = register(
    _spec(
        "ch07.merge_heads",
        "merge_heads",
        _merge_cases,
        _merge_reference,
        prepare=_owner,
        summarize=_merge_summary,
        parameters=("y",),
        shortcuts=Shortcuts(
            ("llmfs.gpt.tensor_model.merge_heads",), "a permute, one materialize and a reshape"
        ),
    ),
    "Checks ``merge_heads(y) -> [B, T, H*D]``: the heads side by side again, with exactly one new "
    "owner.",
)
check_causal_self_attention = register(
    _spec(
        "ch07.attention",
        "causal_self_attention",
        _attention_cases,
        _attention_reference,
        cases=60,
        prepare=_packed,
        summarize=_attention_summary,
        parameters=("qkv", "heads"),
        # The check's own NumPy answer (attention_numpy) is as much a shortcut as the model's.
        shortcuts=Shortcuts(
            (
                "llmfs.gpt.tensor_model.attention",
                "llmfs.gpt.reference.attention",
                "llmfs.course.exercise_checks.attention.attention_numpy",
            ),
            "your split_heads, softmax and merge_heads",
        ),
    ),
    "Checks ``causal_self_attention(qkv, heads) -> [B, T, C]`` against plain NumPy (within 1e-9 "
    "in float64), with exactly one copy (one ``materialize``).",
)

__all__ = [
    "READ_OUT_METHODS",
    "TOLERANCE",
    "CopyCount",
    "Counted",
    "attention_numpy",
    "check_causal_self_attention",
    "check_merge_heads",
    "check_split_heads",
    "counted_call",
    "counting_copies",
]
