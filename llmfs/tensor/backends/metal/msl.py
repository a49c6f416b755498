"""A small reader for the Metal Shading Language subset llmfs kernels use.

It finds the kernel functions of a source (``kernel void name(...)`` or ``[[kernel]] void
name(...)``, named by ``[[host_name("...")]]`` when present, as Metal names them) and describes
their parameters (address space, pointer or reference, ``[[buffer(n)]]`` index or
thread-position attribute), which
is what the emulator's launcher generator and the lint need. It is a reader for kernels written in
the documented subset, not a C++ parser: comments and string literals are blanked first (keeping
line numbers), then parameter lists and bodies are found by matching brackets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ADDRESS_SPACES = ("device", "constant", "threadgroup", "thread")

#: Thread-position attributes the emulator can supply, with the MSL types allowed for each.
POSITION_ATTRIBUTES = (
    "thread_position_in_grid",
    "thread_position_in_threadgroup",
    "threadgroup_position_in_grid",
    "threads_per_threadgroup",
    "threadgroups_per_grid",
    "threads_per_grid",
    "thread_index_in_threadgroup",
    "thread_index_in_simdgroup",
    "simdgroup_index_in_threadgroup",
    "threads_per_simdgroup",
    "simdgroups_per_threadgroup",
    "thread_execution_width",
)
#: The position attributes that are scalars (``uint`` or ``ushort``, never a vector).
SCALAR_POSITION_ATTRIBUTES = POSITION_ATTRIBUTES[6:]
POSITION_TYPES = ("uint", "ushort", "uint2", "uint3", "ushort2", "ushort3")

# `kernel void f(`, `[[kernel]] void f(`, with attributes between (`[[max_total_threads_per_
# threadgroup(256)]]`, `[[host_name("g")]]`) in either place.
_ATTRIBUTES = r"(?:\[\[[^\]]*\]\]\s*)*"
_KERNEL = re.compile(
    rf"({_ATTRIBUTES})(?:\bkernel\b|\[\[\s*kernel\s*\]\])\s*({_ATTRIBUTES})void\s+"
    rf"({_ATTRIBUTES})([A-Za-z_]\w*)\s*\("
)
_HOST_NAME = re.compile(r"\[\[\s*host_name\s*\(\s*\"([^\"]*)\"\s*\)\s*\]\]")
_MAX_THREADS = re.compile(r"\[\[\s*max_total_threads_per_threadgroup\s*\(\s*(\d+)\s*\)\s*\]\]")
_ATTRIBUTE = re.compile(r"\[\[\s*([A-Za-z_]\w*)\s*(?:\(\s*([^)]*?)\s*\))?\s*\]\]")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class Parameter:
    """One kernel parameter.

    ``type_text`` is the declared type with the name and attribute removed (for example
    ``device const float*``); ``attribute`` is ``"buffer"``, a position attribute name, another
    attribute name, or ``None``; ``index`` is the buffer index for ``[[buffer(n)]]``.
    """

    type_text: str
    name: str
    attribute: str | None
    index: int | None
    line: int
    implicit: bool = False

    @property
    def address_space(self) -> str | None:
        """The address-space word of the type, or ``None`` when it has none."""
        words = _IDENTIFIER.findall(self.type_text)
        return next((w for w in words if w in ADDRESS_SPACES), None)

    @property
    def is_pointer(self) -> bool:
        """True for ``T*`` parameters."""
        return self.type_text.rstrip().endswith("*")

    @property
    def is_reference(self) -> bool:
        """True for ``T&`` parameters."""
        return self.type_text.rstrip().endswith("&")

    @property
    def base_type(self) -> str:
        """The type without address space, ``const``, ``*`` or ``&`` (for example ``float``)."""
        words = [w for w in _IDENTIFIER.findall(self.type_text) if w not in ADDRESS_SPACES]
        return " ".join(w for w in words if w not in ("const", "volatile"))


@dataclass(frozen=True)
class Kernel:
    """A kernel function: ``name`` (the name Metal finds it by: its ``[[host_name("...")]]``
    when it has one, else the function's name), parameters, body text (without braces), first
    line, where the body text starts in the source (``body_start``, a character offset), the C++
    function name (``function``) and its ``[[max_total_threads_per_threadgroup(n)]]`` (or
    ``None``)."""

    name: str
    parameters: tuple[Parameter, ...]
    body: str
    line: int
    body_start: int = -1
    function: str = ""
    max_total_threads: int | None = None

    @property
    def buffers(self) -> dict[int, Parameter]:
        """The buffer parameters by index (see :func:`find_kernels` for indices Metal assigns)."""
        return {
            p.index: p for p in self.parameters if p.attribute == "buffer" and p.index is not None
        }

    @property
    def threadgroup_arguments(self) -> dict[int, Parameter]:
        """The ``[[threadgroup(n)]]`` parameters by index (sized at launch)."""
        return {
            p.index: p
            for p in self.parameters
            if p.attribute == "threadgroup" and p.index is not None
        }


def blank_comments(source: str) -> str:
    """Replaces comments and string/char literals with spaces, keeping every newline in place."""
    out: list[str] = []
    i, n = 0, len(source)
    while i < n:
        two = source[i : i + 2]
        if two == "//":
            end = source.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif two == "/*":
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(c if c == "\n" else " " for c in source[i:end]))
            i = end
        elif source[i] in "\"'":
            quote = source[i]
            j = i + 1
            while j < n and source[j] != quote and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(quote + " " * max(j - i - 2, 0) + (quote if j - i >= 2 else ""))
            i = j
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def line_of(text: str, position: int) -> int:
    """1-based line number of ``position`` in ``text``."""
    return text.count("\n", 0, position) + 1


def matching(text: str, start: int, open_char: str, close_char: str) -> int:
    """Index of the bracket closing the one at ``start``, or -1 when it is never closed."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_char:
            depth += 1
        elif text[i] == close_char:
            depth -= 1
            if depth == 0:
                return i
    return -1


def split_top_level(text: str) -> list[tuple[int, str]]:
    """Splits a parameter list at commas outside brackets; returns ``(offset, piece)`` pairs."""
    pieces: list[tuple[int, str]] = []
    depth = 0
    begin = 0
    for i, char in enumerate(text):
        if char in "([<{":
            depth += 1
        elif char in ")]>}":
            depth -= 1
        elif char == "," and depth == 0:
            pieces.append((begin, text[begin:i]))
            begin = i + 1
    if text[begin:].strip():
        pieces.append((begin, text[begin:]))
    return pieces


def parse_parameter(piece: str, line: int) -> Parameter:
    """Describes one parameter declaration such as ``device float* out [[buffer(1)]]``."""
    attribute: str | None = None
    index: int | None = None
    match = _ATTRIBUTE.search(piece)
    if match:
        attribute = match.group(1)
        argument = match.group(2)
        if (
            attribute in ("buffer", "threadgroup")
            and argument is not None
            and argument.strip().isdigit()
        ):
            index = int(argument)
        piece = piece[: match.start()] + piece[match.end() :]
    declaration = piece.strip()
    names = list(_IDENTIFIER.finditer(declaration))
    if not names:
        return Parameter(declaration, "", attribute, index, line)
    last = names[-1]
    return Parameter(declaration[: last.start()].strip(), last.group(0), attribute, index, line)


def find_kernels(source: str) -> list[Kernel]:
    """Every kernel function of ``source``, in order of appearance.

    A pointer or reference parameter in the device or constant space without an attribute is a
    buffer argument whose index Metal assigns: the first index no earlier buffer argument of
    the kernel uses (with no explicit indices: 0, 1, 2, ... in parameter order).
    """
    text = blank_comments(source)
    kernels: list[Kernel] = []
    for match in _KERNEL.finditer(text):
        open_paren = match.end() - 1
        close_paren = matching(text, open_paren, "(", ")")
        if close_paren < 0:
            continue
        body_open = text.find("{", close_paren)
        between = text[close_paren + 1 : body_open] if body_open >= 0 else ""
        if body_open < 0 or ";" in between:
            continue  # a declaration without a body
        body_close = matching(text, body_open, "{", "}") if body_open >= 0 else -1
        body = text[body_open + 1 : body_close] if body_close > 0 else ""
        params_text = text[open_paren + 1 : close_paren]
        parameters = [
            parse_parameter(piece, line_of(text, open_paren + 1 + offset + _lead(piece)))
            for offset, piece in split_top_level(params_text)
        ]
        explicit = {p.index for p in parameters if p.attribute == "buffer" and p.index is not None}
        following = 0
        for k, param in enumerate(parameters):
            implicit = (
                param.attribute is None
                and (param.is_pointer or param.is_reference)
                and param.address_space in ("device", "constant")
            )
            if implicit:
                while following in explicit:
                    following += 1
                parameters[k] = Parameter(
                    param.type_text, param.name, "buffer", following, param.line, implicit=True
                )
                explicit.add(following)
        # String literals are blanked in `text`; the host name is read from the source.
        attributes = source[match.start(1) : match.end(3)]
        host = _HOST_NAME.search(attributes)
        limit = _MAX_THREADS.search(attributes)
        function = match.group(4)
        kernels.append(
            Kernel(
                host.group(1) if host else function,
                tuple(parameters),
                body,
                line_of(text, match.start(4)),
                body_open + 1 if body_close > 0 else -1,
                function,
                int(limit.group(1)) if limit else None,
            )
        )
    return kernels


def _lead(piece: str) -> int:
    return len(piece) - len(piece.lstrip())


__all__ = [
    "ADDRESS_SPACES",
    "POSITION_ATTRIBUTES",
    "POSITION_TYPES",
    "SCALAR_POSITION_ATTRIBUTES",
    "Kernel",
    "Parameter",
    "blank_comments",
    "find_kernels",
    "line_of",
    "matching",
    "split_top_level",
]
