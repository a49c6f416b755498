"""The storage dtypes llmfs supports, how user spellings map onto them, and NumPy's promotion.

Storage is one of ``bool``, ``int32``, ``int64``, ``float16``, ``float32`` or ``float64`` (no
bfloat16, which NumPy has no native type for). Spellings accepted: those names, NumPy dtypes and
scalar types, and Python ``bool``, ``int`` (int64) and ``float`` (float64).

Promotion is NumPy 2's: two tensors combine to :func:`numpy.result_type` of their dtypes
(``int32 + int64 -> int64``, ``int32 + float32 -> float64``, ``bool + float16 -> float16``), and a
Python number next to a tensor is *weak*: it takes the tensor's kind when it can (``int32 + 1`` is
int32, ``float32 + 1.0`` is float32) and only a Python float next to an integer or bool tensor
makes the result float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llmfs.tensor.errors import DTypeError, TensorError

#: Floating-point storage dtypes, narrowest first.
FLOAT_DTYPES: tuple[str, ...] = ("float16", "float32", "float64")

#: Signed integer storage dtypes, narrowest first.
INTEGER_DTYPES: tuple[str, ...] = ("int32", "int64")

#: Supported storage dtypes: bool, then the integers, then the floats, each narrowest first.
SUPPORTED_DTYPES: tuple[str, ...] = ("bool", *INTEGER_DTYPES, *FLOAT_DTYPES)

DEFAULT_DTYPE = "float64"


#: Spellings already resolved (``np.float32``, ``"float32"``, a dtype object...): every op
#: resolves its dtypes, and NumPy's ``dtype.name`` is slow Python, so each is worked out once.
_RESOLVED: dict[object, np.dtype] = {}


def resolve_dtype(dtype: object, *, where: str = "llmfs.tensor") -> np.dtype:
    """Returns the NumPy dtype for a supported spelling; raises :class:`DTypeError` otherwise."""
    try:
        return _RESOLVED[dtype]
    except (KeyError, TypeError):  # not seen yet, or unhashable (never cached)
        pass
    resolved = _resolve(dtype, where)
    try:
        _RESOLVED[dtype] = resolved
    except TypeError:
        pass
    return resolved


def _resolve(dtype: object, where: str) -> np.dtype:
    try:
        resolved = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError:
        raise DTypeError(dtype, SUPPORTED_DTYPES, where=where) from None
    if resolved.name not in SUPPORTED_DTYPES:
        raise DTypeError(resolved.name, SUPPORTED_DTYPES, where=where)
    # Storage is always in the machine's byte order (">f8" becomes float64).
    return np.dtype(resolved.name)


def is_float(dtype: np.dtype) -> bool:
    """True for float16, float32 and float64."""
    return np.dtype(dtype).kind == "f"


def is_integer(dtype: np.dtype) -> bool:
    """True for int32 and int64 (not bool)."""
    return np.dtype(dtype).kind in "iu"


def is_bool(dtype: np.dtype) -> bool:
    """True for bool."""
    return np.dtype(dtype).kind == "b"


def promote(*dtypes: object) -> np.dtype:
    """NumPy 2's result dtype of tensors of ``dtypes`` (Python numbers among them count as weak
    scalars, as in :func:`numpy.result_type`); always a supported storage dtype."""
    cached = all(isinstance(dtype, np.dtype) for dtype in dtypes)
    if cached and dtypes in _PROMOTED:
        return _PROMOTED[dtypes]
    promoted = resolve_dtype(np.result_type(*dtypes))  # type: ignore[arg-type]
    if cached:
        _PROMOTED[dtypes] = promoted
    return promoted


#: Promotions of dtype objects already worked out (Python numbers are never cached: their
#: values decide the result for integers).
_PROMOTED: dict[tuple[object, ...], np.dtype] = {}


def inferred_dtype(array: np.ndarray) -> np.dtype:
    """The storage dtype for imported values when none is asked for: floats keep their dtype,
    bools stay bool, signed integers become int32 when they fit in it (int8, int16, int32) and
    int64 otherwise, unsigned integers the narrowest signed dtype that holds them all (uint64 is
    refused: it has values no signed 64-bit integer holds). Complex or other kinds are refused."""
    kind, size = array.dtype.kind, array.dtype.itemsize
    if kind in "fb":
        return resolve_dtype(array.dtype, where="importing values")
    if kind == "i":
        return np.dtype(np.int32 if size <= 4 else np.int64)
    if kind == "u" and size < 8:
        return np.dtype(np.int32 if size < 4 else np.int64)
    raise DTypeError(
        array.dtype, SUPPORTED_DTYPES, where="importing values (pass dtype= to convert them)"
    )


def storage_dtype_for(array: np.ndarray, dtype: object | None) -> np.dtype:
    """The storage dtype for imported values: ``dtype`` when given, else
    :func:`inferred_dtype` (integers stay integers, bools stay bools, as in NumPy)."""
    if dtype is not None:
        return resolve_dtype(dtype)
    return inferred_dtype(array)


def without_repeats(array: np.ndarray) -> np.ndarray:
    """``array`` with index 0 taken on every zero-stride axis (no copy).

    A broadcast repeats one stored value along such an axis, so a question about the set of
    values (their minimum, maximum, whether one is NaN) is answered by reading each stored value
    once: a check over a broadcast of 2**40 values reads the few values actually stored.
    """
    if 0 not in array.strides or array.size == 0:
        return array
    return array[tuple(0 if stride == 0 else slice(None) for stride in array.strides)]


#: The range of each integer storage dtype (``np.iinfo`` is slow Python, asked on every write).
INTEGER_RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(name): (int(np.iinfo(name).min), int(np.iinfo(name).max)) for name in INTEGER_DTYPES
}


def _extremes(values: np.ndarray) -> tuple[Any, Any]:
    """The smallest and largest of non-empty ``values`` as Python numbers (NaN if one is NaN)."""
    if values.ndim == 0:
        value = values.item()
        return value, value
    stored = without_repeats(values)
    return stored.min().item(), stored.max().item()


def check_integer_cast(values: np.ndarray, target: np.dtype, *, where: str) -> None:
    """Raises :class:`TensorError` when float ``values`` going to the integer dtype ``target``
    include one with no integer counterpart (NaN, an infinity, or outside the target's range):
    NumPy would write an arbitrary number there. Any other conversion passes (floats truncate
    towards zero; integers wrap around; anything non-zero is True).

    The bounds are compared as Python numbers, which compare a float with an int exactly: a
    bound converted to the values' own dtype could round (``float(-2**31)`` is ``-inf`` in
    float16), and then ``-inf`` would pass. Only the smallest and largest values are compared
    (NaN propagates through both), each stored value read once (:func:`without_repeats`).
    """
    target = np.dtype(target)
    if values.dtype.kind != "f" or target.kind not in "iu" or values.size == 0:
        return
    low_bound, high_bound = INTEGER_RANGES.get(target) or (
        int(np.iinfo(target).min),
        int(np.iinfo(target).max),
    )
    low, high = _extremes(values)
    # Truncation towards zero keeps x when low_bound - 1 < x < high_bound + 1.
    for value in (float(low), float(high)):
        if not low_bound - 1 < value < high_bound + 1:
            raise TensorError(
                f"{where}: the value {value} has no {target.name} counterpart (NaN, an "
                f"infinity or outside {low_bound} to {high_bound})"
            )


def check_integer_range(
    values: np.ndarray, target: np.dtype, *, where: str, hint: str = ""
) -> None:
    """Raises :class:`TensorError` when integer ``values`` (written as Python ints) do not all
    fit the integer dtype ``target``: NumPy 2 refuses ``np.array([2**40], dtype=np.int32)``
    with an ``OverflowError`` rather than wrap around, and so does llmfs wherever Python ints
    enter storage (constructors, storage writes, number operands). ``hint`` ends the message."""
    if values.dtype.kind not in "iu" or values.size == 0 or target.kind not in "iu":
        return
    low_bound, high_bound = INTEGER_RANGES[np.dtype(target)]
    low, high = _extremes(values)
    for value in (low, high):
        if not low_bound <= value <= high_bound:
            raise TensorError(
                f"{where}: the integer {value} does not fit {target.name} (its range is "
                f"{low_bound} to {high_bound}){hint}"
            )


# -- Numbers: what a Python or NumPy number is, and how values enter storage -----------------------

#: The Python types NumPy 2 treats as *weak* next to a tensor (NEP 50): exactly these types. A
#: subclass (an ``IntEnum``, a ``float`` subclass) is converted by ``np.asarray``, to a strong
#: int64 or float64, and a NumPy scalar (``np.float32(2)``) is strong: its dtype promotes.
WEAK_SCALAR_TYPES: tuple[type, ...] = (bool, int, float)


def is_number(value: object) -> bool:
    """True for what NumPy takes as a real number operand: a Python bool, int or float (or a
    subclass), or a NumPy scalar of a bool, integer or float dtype. Complex numbers (llmfs stores
    no complex dtype), ``Fraction``, ``Decimal`` (NumPy would make object arrays of them),
    strings and arrays, 0-d ones included, are not numbers here."""
    if type(value) in WEAK_SCALAR_TYPES:
        return True
    if isinstance(value, np.generic):
        return value.dtype.kind in "biuf"
    return isinstance(value, (int, float))


def number_kind(value: object) -> type | np.dtype:
    """What a number (:func:`is_number`) brings to promotion, without its value: its Python type
    for a weak number (NumPy 2's weak promotion never looks at the value), else the dtype NumPy
    gives it. :func:`promote` takes the result of :func:`kind_operand`."""
    if type(value) in WEAK_SCALAR_TYPES:
        return type(value)
    return np.asarray(value).dtype


def kind_operand(kind: type | np.dtype) -> object:
    """A stand-in operand of :func:`number_kind` ``kind`` for :func:`promote`: ``False``, ``0``
    or ``0.0`` for a weak type (promotes as any number of that type would), else the dtype."""
    if isinstance(kind, type) and kind in WEAK_SCALAR_TYPES:
        return kind()
    return kind


def storage_values(
    values: object, dtype: object | None, *, where: str, hint: str = ""
) -> tuple[np.ndarray, np.dtype]:
    """``values`` (a number, nested sequences of numbers, or an array) read as an array, and
    the storage dtype they go to: ``dtype`` when given, else :func:`inferred_dtype`. The caller
    converts (``array.astype(target)``); every value is known to convert.

    This is the one rule for values entering storage (constructors, storage writes, the number
    operands of ops, ``copyto``): a value converts only when the storage dtype holds it:

    * a float going to an integer dtype must be finite and in range (:func:`check_integer_cast`);
    * an integer given as Python data (a Python int, or any sequence of numbers) must lie in an
      integer dtype's range (:func:`check_integer_range`, NumPy 2's rule for Python ints); a
      NumPy array or a NumPy scalar converts as NumPy converts it (a narrower integer dtype
      wraps around, as ``astype`` does);
    * a Python int beyond 64 bits converts to a float or bool dtype only, and only when asked.

    Floats round to a float dtype (to +-inf past its largest value, as NumPy does); anything
    non-zero becomes True. Raises :class:`TensorError` for what is not a real number (complex,
    ``Fraction``, strings...) and :class:`DTypeError` for an unsupported dtype.
    """
    typed = isinstance(values, (np.ndarray, np.generic))
    try:
        array = np.asarray(values)
    except (TypeError, ValueError, OverflowError) as error:
        raise TensorError(f"{where}: the values could not be read as numbers ({error})") from None
    if array.dtype.kind == "O" and not typed:
        array = _wide_integers(values, array, dtype, where)
    if array.dtype.kind not in "biuf":
        raise TensorError(
            f"{where}: values must be real numbers (bool, int or float), got an array of kind "
            f"{array.dtype.name!r}"
        )
    target = storage_dtype_for(array, dtype)
    if not typed:
        check_integer_range(array, target, where=where, hint=hint)
    check_integer_cast(array, target, where=where)
    return array, target


def _wide_integers(
    values: object, array: np.ndarray, dtype: object | None, where: str
) -> np.ndarray:
    """An object array NumPy made of Python ints beyond 64 bits: floats (or bools) when a float
    (or bool) dtype is asked for; otherwise refused, naming the first such int. An object array
    of anything else is returned as it is (the caller refuses it as not numbers)."""
    if not all(type(value) in (int, bool) for value in array.flat):
        return array
    target = None if dtype is None else resolve_dtype(dtype)
    if target is not None and target.kind == "b":
        return array.astype(np.bool_)  # anything non-zero is True
    if target is not None and target.kind == "f":
        try:
            return np.asarray(values, dtype=np.float64)
        except OverflowError:
            raise TensorError(f"{where}: an integer is too large for any float dtype") from None
    low, high = INTEGER_RANGES[np.dtype(np.int64)]
    wide = next(value for value in array.flat if not low <= value <= high)
    raise TensorError(
        f"{where}: the integer {wide} does not fit in 64 bits (int64's range is {low} to "
        f"{high}); only a float dtype holds it, e.g. dtype='float64'"
    )
