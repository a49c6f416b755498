"""How every llmfs error class is declared, built, stored, pickled and printed.

:class:`TensorError` is the root of every refusal of :mod:`llmfs.tensor`; its subclasses (the
catalogue in :mod:`llmfs.tensor.errors`, the Metal backend's in
:mod:`llmfs.tensor.backends.metal.errors`) write no ``__init__``. Each is a declaration that
reads top to bottom:

* ``condition``: the violated rule in a few words (the trace-table widgets show it);
* its **fields**, as annotated attributes; a value makes the field optional (it is the default).
  The constructor takes them in order, positionally or by name, and stores each one as an
  attribute; a field annotated ``tuple[...]`` is stored as a tuple;
* its **message**: ``template``, a :meth:`str.format` template over the fields, or, where the
  sentence depends on the fields, a method ``explain()`` that returns it. A sequence shows as
  ``[2, 3]`` (:func:`shown`).

Attributes that follow from the fields are computed in ``__post_init__`` (as in a dataclass).
``str(error)`` and ``error.message`` are the plain-words message, and
:meth:`TensorError.details` returns the fields as a dict. An error pickles as its fields.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import ClassVar

#: A sequence longer than this is shown by its first and last entries and its length (a rank-65
#: shape would otherwise fill the message with 65 sizes).
SHOWN_ENTRIES = 12


class _Shown:
    """A sequence in a message: ``{shape}`` shows ``[2, 3]``, ``{shape!r}`` its own repr; past
    :data:`SHOWN_ENTRIES` entries, ``[1, 1, 1, 1, 1, 1, 1, 1, ..., 1, 1] (65 entries)``."""

    def __init__(self, values: Sequence[object]) -> None:
        self.values = values

    def _text(self, show: Callable[[object], str]) -> str:
        values = list(self.values)
        if len(values) <= SHOWN_ENTRIES:
            return "[" + ", ".join(show(v) for v in values) + "]"
        shown = [show(v) for v in values[: SHOWN_ENTRIES - 4]] + ["..."]
        shown += [show(v) for v in values[-2:]]
        return "[" + ", ".join(shown) + f"] ({len(values)} entries)"

    def __format__(self, spec: str) -> str:
        return format(self._text(str), spec)

    def __repr__(self) -> str:
        return self._text(repr) if len(self.values) > SHOWN_ENTRIES else repr(self.values)


def shown(value: object) -> object:
    """A field's value as a message shows it: a sequence as ``[2, 3]`` (``!r``: its repr), long
    ones shortened (see :class:`_Shown`); anything else as it is."""
    return _Shown(value) if isinstance(value, (list, tuple)) else value


class TensorError(ValueError):
    """Root of every error raised by :mod:`llmfs.tensor`; as a class it takes a free-text message.

    Subclasses declare ``condition``, their fields and their message (see the module docstring);
    none writes an ``__init__``, so every error is built, stored, pickled and printed the same way.
    """

    condition: ClassVar[str] = "tensor rule"
    template: ClassVar[str] = "{message}"
    #: The constructor's fields in order: the annotated attributes of the class that declares them.
    fields: ClassVar[tuple[str, ...]] = ("message",)
    _tuples: ClassVar[frozenset[str]] = frozenset()

    message: str

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:
            raise TypeError(
                f"{cls.__name__} defines __init__; declare its fields, condition and template "
                f"instead"
            )
        declared = {
            name: str(annotation)
            for name, annotation in inspect.get_annotations(cls).items()
            if "ClassVar" not in str(annotation)
        }
        if declared:  # else the parent's fields
            cls.fields = tuple(declared)
            cls._tuples = frozenset(n for n, a in declared.items() if a.startswith("tuple["))

    def __init__(self, *args: object, **kwargs: object) -> None:
        cls = type(self)
        if len(args) > len(cls.fields):
            raise TypeError(
                f"{cls.__name__} takes {len(cls.fields)} field(s) {list(cls.fields)}, "
                f"got {len(args)} positional arguments"
            )
        values = dict(zip(cls.fields, args))
        for name, value in kwargs.items():
            if name not in cls.fields or name in values:
                raise TypeError(f"{cls.__name__} got an unexpected or repeated field {name!r}")
            values[name] = value
        for name in cls.fields:
            if name not in values and not hasattr(cls, name):  # a class value is the default
                raise TypeError(f"{cls.__name__} needs the field {name!r}")
            value = values.get(name, getattr(cls, name, None))
            if name in cls._tuples and not isinstance(value, tuple):
                value = tuple(value)  # type: ignore[arg-type]  # declared a sequence
            setattr(self, name, value)
        self.__post_init__()
        self.message = self.explain()
        super().__init__(self.message)

    def __post_init__(self) -> None:
        """Computes the attributes that follow from the fields (none here)."""

    def explain(self) -> str:
        """The message: ``template`` filled in with the attributes (sequences as ``[2, 3]``)."""
        return self.template.format(**{name: shown(value) for name, value in vars(self).items()})

    def details(self) -> dict[str, object]:
        """The error's fields, then the attributes computed from them, by name."""
        return {
            name: value
            for name, value in vars(self).items()
            if not name.startswith("_") and (name != "message" or "message" in self.fields)
        }

    def __reduce__(self) -> tuple[object, ...]:
        # Exceptions pickle as cls(*self.args); ours are rebuilt from their fields instead.
        return (type(self), tuple(getattr(self, name) for name in self.fields))


__all__ = ["SHOWN_ENTRIES", "TensorError", "shown"]
