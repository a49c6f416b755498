"""Text a submission supplied, made safe to show: on a terminal, in Markdown, as a file name.

Anything a submission controls (its file name and so its student id, an exception's class name
and message, a returned value) may hold bytes that are not UTF-8, control characters (a
terminal's escape sequences: OSC titles and links, erase-line, cursor moves), bidirectional
controls (U+202E makes ``exe.txt`` read ``txt.exe``) or Markdown and HTML (a ``## Score``
heading, an ``<img onerror>``, an open ``<!--``). Each function here is the one rule for its
destination:

* :func:`render_name`: a file name (any bytes) as printable text, reversibly
  (:func:`name_bytes` undoes it): the id under which a student is graded;
* :func:`terminal`: one line for the grader's terminal, with no control, bidi or undecodable
  character;
* :func:`markdown`: learner text as literal text in Markdown: one line, every Markdown and
  HTML character escaped;
* :func:`neutral`: a CSV cell's text with every bidi and control character escaped (its lines
  kept); :func:`storable`: only lone surrogates escaped, so any text can be stored as UTF-8.
"""

from __future__ import annotations

import html
import os
import re
import unicodedata

#: Bidirectional controls: embeddings, overrides, isolates and the marks.
BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c")


def _hidden(char: str) -> bool:
    """A character that changes how text around it shows instead of showing itself: C0 and C1
    controls, bidi controls, lone surrogates, line and paragraph separators."""
    return char in BIDI or unicodedata.category(char) in ("Cc", "Cs", "Zl", "Zp")


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (os.fsdecode's surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def render_name(name: str) -> str:
    """``name`` (as :func:`os.fsdecode` gives any bytes) as printable text: a byte that is not
    UTF-8 becomes ``\\xNN`` (NN above 7f), an ASCII control ``\\xNN`` (below 80), any other
    control, bidi or separator character ``\\uNNNN``,
    and a backslash ``\\\\``, so the rendering is one-to-one and :func:`name_bytes` gives the
    original bytes back. A name of plain printable characters without backslashes is itself."""
    return "".join(
        "\\\\" if char == "\\" else _escape(char) if _hidden(char) else char for char in name
    )


_ESCAPED = re.compile(r"\\(\\|x[0-9a-f]{2}|u[0-9a-f]{4})")


def name_bytes(rendered: str) -> bytes:
    """The file name bytes :func:`render_name` rendered."""

    def back(match: re.Match[str]) -> str:
        token = match.group(1)
        if token == "\\":
            return "\\"
        code = int(token[1:], 16)
        # \xNN above 0x7f is always a byte that was not UTF-8: a character there is \uNNNN.
        return chr(0xDC00 + code if token[0] == "x" and code >= 0x80 else code)

    return os.fsencode(_ESCAPED.sub(back, rendered))


def terminal(text: str, limit: int = 300) -> str:
    """``text`` as one line for a terminal: controls, bidi controls, undecodable bytes and line
    breaks become visible escapes (a newline, a tab: a space), at most ``limit`` characters."""
    shown = []
    for char in str(text):
        if char in "\n\r\t":
            shown.append(" ")
        elif _hidden(char):
            shown.append(_escape(char))
        else:
            shown.append(char)
    line = "".join(shown)
    return line if len(line) <= limit else line[: limit - 1] + "…"


#: What gives inline Markdown a meaning once the text is one line and ``<``/``&`` are entities:
#: code spans, links and images (brackets), table cells, and the escape itself.
_MARKDOWN = re.compile(r"([\\`\[\]|])")


def markdown(text: str, limit: int = 600) -> str:
    """``text`` as literal inline Markdown: one line (see :func:`terminal`: no heading or list
    can start in it), ``&``, ``<`` and ``>`` as HTML entities (no tag or comment), and each of
    ``\\ ` [ ] |`` backslash-escaped (no code span, link, image or table cell)."""
    line = html.escape(terminal(text, limit), quote=False)
    return _MARKDOWN.sub(r"\\\1", line)


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with every lone surrogate (an undecodable byte of a file name, a ``\\ud800``
    escape in a notebook's JSON) written as its escape, so it can be encoded as UTF-8 (SQLite,
    a CSV, a terminal); text without one is itself."""
    return _SURROGATE.sub(lambda match: _escape(match.group(0)), text)


def neutral(text: str) -> str:
    """``text`` with every bidi control, control character other than tab and line breaks,
    separator and lone surrogate written as its escape (a CSV cell keeps its lines)."""
    return "".join(
        _escape(char) if _hidden(char) and char not in "\n\r\t" else char for char in text
    )
