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


def check_integer_cast(values: np.ndarray, target: np.dtype, *, where: str) -> None:
    """Raises :class:`TensorError` when float ``values`` going to the integer dtype ``target``
    include one with no integer counterpart (NaN, an infinity, or outside the target's range):
    NumPy would write an arbitrary number there. Any other conversion passes (floats truncate
    towards zero; integers wrap around; anything non-zero is True)."""
    target = np.dtype(target)
    if values.dtype.kind != "f" or target.kind not in "iu" or values.size == 0:
        return
    info = np.iinfo(target)
    with np.errstate(invalid="ignore", over="ignore"):
        # float(info.max) + 1 is a power of two: exact, or +inf in float16 (whose every finite
        # value fits), so the comparison is exact in the values' own dtype.
        bad = ~((values >= float(info.min)) & (values < float(info.max) + 1.0))
    if bad.any():
        raise TensorError(
            f"{where}: the value {values[bad].flat[0]} has no {target.name} counterpart (NaN, an "
            f"infinity or outside {info.min} to {info.max})"
        )
