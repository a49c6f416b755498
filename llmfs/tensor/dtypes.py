"""The storage dtypes llmfs supports, and how user spellings map onto them.

Storage is always one of ``float16``, ``float32`` or ``float64`` (seed 003's storage types, less
bfloat16, which NumPy has no native type for). Spellings accepted: those names, NumPy dtypes and
scalar types, and Python ``float`` (float64).
"""

from __future__ import annotations

import numpy as np

from llmfs.tensor.errors import DTypeError

#: Supported storage dtypes, narrowest first.
SUPPORTED_DTYPES: tuple[str, ...] = ("float16", "float32", "float64")

DEFAULT_DTYPE = "float64"


def resolve_dtype(dtype: object, *, where: str = "llmfs.tensor") -> np.dtype:
    """Returns the NumPy dtype for a supported spelling; raises :class:`DTypeError` otherwise."""
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        raise DTypeError(dtype, SUPPORTED_DTYPES, where=where) from None
    if resolved.name not in SUPPORTED_DTYPES:
        raise DTypeError(resolved.name, SUPPORTED_DTYPES, where=where)
    # Storage is always in the machine's byte order (">f8" becomes float64).
    return np.dtype(resolved.name)


def storage_dtype_for(array: np.ndarray, dtype: object | None) -> np.dtype:
    """The storage dtype for imported values: ``dtype`` when given, else the array's own float
    dtype, else float64 for integer and boolean arrays. Complex or other kinds are refused."""
    if dtype is not None:
        return resolve_dtype(dtype)
    if array.dtype.kind == "f":
        return resolve_dtype(array.dtype)
    if array.dtype.kind in "biu":
        return np.dtype(DEFAULT_DTYPE)
    raise DTypeError(array.dtype, SUPPORTED_DTYPES, where="importing values")
