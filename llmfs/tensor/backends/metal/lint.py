"""The MSL lint: what the Metal compiler rejects but a C++ compiler (the emulator) would accept.

The emulator compiles kernels as C++, which is more permissive than Metal in a few ways that
matter to a learner writing a kernel on Linux: C++ has ``double``, lets a pointer parameter omit
its address space, and allows ``new``, exceptions, virtual functions and any ``#include``. A kernel
that passes under the emulator must also compile on a Mac, so :func:`check_msl` runs before every
emulator compile and refuses these with line numbers. It also refuses the few constructs that are
valid MSL but outside the emulator's subset (threadgroup *parameters*, unknown position
attributes), saying so.
"""

from __future__ import annotations

import re

from llmfs.tensor.backends.metal.errors import KernelLintError
from llmfs.tensor.backends.metal.msl import (
    ADDRESS_SPACES,
    POSITION_ATTRIBUTES,
    POSITION_TYPES,
    Kernel,
    blank_comments,
    find_kernels,
    line_of,
    parse_parameter,
    split_top_level,
)

#: Metal's limit on buffer argument indices (``[[buffer(0)]]`` .. ``[[buffer(30)]]``).
MAX_BUFFER_INDEX = 30

_FORBIDDEN_WORDS = {
    "double": "Metal has no double (64-bit floating point); use float",
    "new": "Metal has no dynamic allocation (new); use buffers sized by the host",
    "delete": "Metal has no dynamic allocation (delete)",
    "goto": "Metal does not allow goto",
    "virtual": "Metal does not allow virtual functions",
    "throw": "Metal has no exceptions (throw)",
    "try": "Metal has no exceptions (try)",
    "catch": "Metal has no exceptions (catch)",
    "dynamic_cast": "Metal has no run-time type information (dynamic_cast)",
    "typeid": "Metal has no run-time type information (typeid)",
    "thread_local": "Metal has no thread_local storage",
    "register": "Metal does not allow the register storage class",
}
_WORD = re.compile(r"[A-Za-z_]\w*")
_LONG_LONG = re.compile(r"\blong\s+long\b")
# A floating literal with an L suffix (1.0L, .5l, 1e3L) is a C++ long double; `1L` (an integer
# long) is fine in Metal, so a fraction or an exponent is required.
_LONG_DOUBLE_LITERAL = re.compile(
    r"(?<![\w.])(?:(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)[lL](?!\w)"
)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*([<\"][^>\"]*[>\"])", re.MULTILINE)
_FUNCTION = re.compile(r"\b([A-Za-z_][\w:<>]*)\s*[*&]?\s+([A-Za-z_]\w*)\s*\(")
_NOT_FUNCTION_WORDS = {"if", "for", "while", "switch", "return", "else", "do", "sizeof", "case"}


def lint_msl(source: str) -> list[tuple[int, str]]:
    """Returns the ``(line, message)`` problems of ``source``, sorted by line; empty when clean.

    Never raises for malformed text: what it cannot read it leaves to the compiler.
    """
    text = blank_comments(source)
    problems: list[tuple[int, str]] = []

    for match in _WORD.finditer(text):
        message = _FORBIDDEN_WORDS.get(match.group(0))
        if message:
            problems.append((line_of(text, match.start()), message))
    for match in _LONG_LONG.finditer(text):
        problems.append((line_of(text, match.start()), "Metal has no long long; use long"))
    for match in _LONG_DOUBLE_LITERAL.finditer(text):
        problems.append(
            (
                line_of(text, match.start()),
                f"{match.group(0)} is a long double literal; Metal has no long double, write "
                f"{match.group(0)[:-1]}f",
            )
        )
    for match in _INCLUDE.finditer(source):
        if match.group(1).replace(" ", "") != "<metal_stdlib>":
            problems.append(
                (
                    line_of(source, match.start()),
                    f"only #include <metal_stdlib> is available to a runtime-compiled Metal "
                    f"source, not {match.group(1)}",
                )
            )

    kernel_names = set()
    for kernel in find_kernels(source):
        kernel_names.add(kernel.name)
        problems.extend(_kernel_problems(kernel))
    problems.extend(_helper_problems(text, kernel_names))
    return sorted(set(problems))


def _kernel_problems(kernel: Kernel) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    seen: dict[int, str] = {}
    for param in kernel.parameters:
        where = f"kernel {kernel.name}, parameter {param.name!r}"
        if param.is_pointer or param.is_reference:
            space = param.address_space
            if space is None:
                problems.append(
                    (
                        param.line,
                        f"{where}: a pointer or reference parameter needs an address space "
                        f"(device, constant or threadgroup)",
                    )
                )
            elif space == "threadgroup":
                problems.append(
                    (
                        param.line,
                        f"{where}: threadgroup parameters are outside the emulator's subset; "
                        f"declare the threadgroup array inside the kernel body instead",
                    )
                )
            elif space == "thread":
                problems.append(
                    (param.line, f"{where}: a kernel argument cannot be in the thread space")
                )
            if param.attribute != "buffer" or param.index is None:
                problems.append(
                    (
                        param.line,
                        f"{where}: give every buffer argument an explicit [[buffer(n)]] index "
                        f"(the host binds buffers by index)",
                    )
                )
            elif not 0 <= param.index <= MAX_BUFFER_INDEX:
                problems.append(
                    (
                        param.line,
                        f"{where}: buffer index {param.index} is outside Metal's 0..."
                        f"{MAX_BUFFER_INDEX}",
                    )
                )
            elif param.index in seen:
                problems.append(
                    (
                        param.line,
                        f"{where}: buffer index {param.index} is already used by "
                        f"{seen[param.index]!r}",
                    )
                )
            else:
                seen[param.index] = param.name
        elif param.attribute in POSITION_ATTRIBUTES:
            if param.base_type not in POSITION_TYPES:
                problems.append(
                    (
                        param.line,
                        f"{where}: [[{param.attribute}]] must be one of "
                        f"{', '.join(POSITION_TYPES)}, not {param.base_type!r}",
                    )
                )
        else:
            label = f"[[{param.attribute}]]" if param.attribute else "no attribute"
            problems.append(
                (
                    param.line,
                    f"{where}: a by-value kernel argument needs a thread-position attribute "
                    f"({', '.join(POSITION_ATTRIBUTES)}); it has {label}. Pass data in a "
                    f"buffer (constant T& name [[buffer(n)]])",
                )
            )
    return problems


def _helper_problems(text: str, kernel_names: set[str]) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    for match in _FUNCTION.finditer(text):
        type_word, name = match.group(1), match.group(2)
        if type_word in _NOT_FUNCTION_WORDS or name in _NOT_FUNCTION_WORDS:
            continue
        if name in kernel_names:
            continue
        open_paren = match.end() - 1
        depth = 0
        close = -1
        for i in range(open_paren, len(text)):
            if text[i] == "(":
                depth += 1
            elif text[i] == ")":
                depth -= 1
                if depth == 0:
                    close = i
                    break
        if close < 0:
            continue
        after = text[close + 1 :].lstrip()
        if not after.startswith("{") and not after.startswith("const"):
            continue  # a call or a declaration without a body, not a definition
        for offset, piece in split_top_level(text[open_paren + 1 : close]):
            param = parse_parameter(piece, line_of(text, open_paren + 1 + offset))
            if (param.is_pointer or param.is_reference) and param.address_space is None:
                problems.append(
                    (
                        param.line,
                        f"function {name}, parameter {param.name!r}: a pointer or reference "
                        f"parameter needs an address space ({', '.join(ADDRESS_SPACES)})",
                    )
                )
    return problems


def check_msl(source: str) -> None:
    """Raises :class:`KernelLintError` listing every problem :func:`lint_msl` finds."""
    problems = lint_msl(source)
    if problems:
        raise KernelLintError(problems)


__all__ = ["MAX_BUFFER_INDEX", "check_msl", "lint_msl"]
