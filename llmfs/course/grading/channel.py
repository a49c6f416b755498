"""The grader's channel to the implement worker: length-prefixed JSON frames over a pipe.

A frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON. The grader writes one
request frame and reads exactly one reply frame before it writes the next, so an honest worker
never has more than one reply in flight: bytes that arrive beyond it are forged, whatever they
say. Kept free of imports beyond the standard library: the worker loads it before any learner
code runs.
"""

from __future__ import annotations

import json
import struct
from typing import IO, Any

#: The largest frame either side accepts (a reply is one case's plain-data outcome).
MAX_FRAME = 8 * 1024 * 1024
_HEADER = struct.Struct(">I")


class FrameError(Exception):
    """A frame that is not a length-prefixed JSON object (message: what is wrong)."""


def encode(message: Any) -> bytes:
    """``message`` as one frame. Raises :class:`FrameError` when it is not JSON data or too big."""
    try:
        body = json.dumps(message, allow_nan=True).encode("utf-8")
    except (TypeError, ValueError) as error:
        raise FrameError(f"not JSON data ({error})") from None
    if len(body) > MAX_FRAME:
        raise FrameError(f"a frame of {len(body)} bytes (at most {MAX_FRAME})")
    return _HEADER.pack(len(body)) + body


def split(buffer: bytes) -> tuple[Any, bytes] | None:
    """The first whole frame of ``buffer`` decoded, and the bytes after it; None while the frame
    is incomplete. Raises :class:`FrameError` for a length over :data:`MAX_FRAME` or a body that
    is not a JSON object."""
    if len(buffer) < _HEADER.size:
        return None
    (length,) = _HEADER.unpack_from(buffer)
    if length > MAX_FRAME:
        raise FrameError(f"a frame announcing {length} bytes (at most {MAX_FRAME})")
    end = _HEADER.size + length
    if len(buffer) < end:
        return None
    try:
        message = json.loads(buffer[_HEADER.size : end].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise FrameError("a frame that is not JSON") from None
    if not isinstance(message, dict):
        raise FrameError("a frame that is not a JSON object")
    return message, buffer[end:]


def read_frame(stream: IO[bytes]) -> Any | None:
    """The next frame of a blocking byte stream; None at its end (or a truncated frame)."""
    head = _read_exactly(stream, _HEADER.size)
    if head is None:
        return None
    (length,) = _HEADER.unpack(head)
    if length > MAX_FRAME:
        raise FrameError(f"a frame announcing {length} bytes (at most {MAX_FRAME})")
    body = _read_exactly(stream, length)
    if body is None:
        return None
    found = split(head + body)
    return None if found is None else found[0]


def _read_exactly(stream: IO[bytes], count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        chunk = stream.read(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data
