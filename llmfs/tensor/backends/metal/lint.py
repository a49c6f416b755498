"""The MSL lint: what the Metal compiler rejects but a C++ compiler (the emulator) would accept.

The emulator compiles kernels as C++, which is more permissive than Metal in ways that matter to
a learner writing a kernel on Linux. A kernel that passes under the emulator must also compile on
a Mac, and compute the same numbers there, so :func:`check_msl` runs before every emulator compile
and refuses, with line numbers and a message naming the rule:

* types and words Metal lacks: ``double`` and unsuffixed floating literals (``0.1`` is a double
  in C++, so the emulator would compute in double what the GPU computes in float: write
  ``0.1f``), ``long double``, ``long long``, ``new``/``delete``, exceptions, ``virtual``, RTTI,
  ``goto``, ``thread_local``, ``register``, any ``#include`` but ``<metal_stdlib>``;
* address spaces: pointer or reference parameters and local pointers without one, writes through
  ``constant`` pointers and references, mutable program-scope variables (only ``constant`` ones
  exist), ``threadgroup`` variables outside a kernel function's body or with an initializer;
* function rules: lambdas, recursion (direct or through other functions), function pointers;
* kernel arguments: buffer indices, position attributes of the wrong type (``uint``/``ushort``
  and their vectors only) or mixing scalar and vector forms.

It also refuses the few constructs that are valid MSL but outside the emulator's subset
(threadgroup *parameters*, unknown position attributes), saying so.
"""

from __future__ import annotations

import re

from llmfs.tensor.backends.metal.errors import KernelLintError, MetalError
from llmfs.tensor.backends.metal.msl import (
    ADDRESS_SPACES,
    POSITION_ATTRIBUTES,
    POSITION_TYPES,
    Kernel,
    Parameter,
    blank_comments,
    find_kernels,
    line_of,
    matching,
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
# A floating literal without a suffix (0.1, .5, 2., 1e-3): a double in C++.
_DOUBLE_LITERAL = re.compile(
    r"(?<![\w.])(?:(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)(?![\w.])"
)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*include[ \t]*([<\"][^>\"]*[>\"])", re.MULTILINE)
_PREPROCESSOR = re.compile(r"^[ \t]*#.*$", re.MULTILINE)
_SCALAR = r"(?:float|half|int|uint|short|ushort|char|uchar|bool|long|ulong)[234]?"
# A local pointer declaration whose type has no address space: `float* p =`, `const int *q;`.
_LOCAL_POINTER = re.compile(
    rf"(?:^|(?<=[;{{}}(]))\s*(?:const\s+)?({_SCALAR})\s*(?:const\s*)?\*+\s*(?:const\s+)?"
    r"([A-Za-z_]\w*)\s*(?=[=;,)\[])"
)
_FUNCTION_POINTER = re.compile(r"\(\s*\*\s*(?:[A-Za-z_]\w*)?\s*\)\s*\(")
_THREADGROUP = re.compile(r"\bthreadgroup\b")
_DECLARED_NAME = re.compile(r"([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*$")
#: Width of each position type: all position attributes of a kernel must share it.
_POSITION_WIDTH = {"uint": 1, "ushort": 1, "uint2": 2, "ushort2": 2, "uint3": 3, "ushort3": 3}
_SCALAR_ONLY_POSITIONS = ("thread_index_in_threadgroup",)
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

    code = _PREPROCESSOR.sub(lambda m: " " * len(m.group(0)), text)
    for match in _DOUBLE_LITERAL.finditer(code):
        problems.append(
            (
                line_of(text, match.start()),
                f"{match.group(0)} is a double literal (unsuffixed floating literal); Metal "
                f"computes in float, the emulator would compute in double: write "
                f"{match.group(0)}f",
            )
        )

    kernels = find_kernels(source)
    kernel_names = set()
    for kernel in kernels:
        kernel_names.add(kernel.name)
        problems.extend(_kernel_problems(kernel))
    problems.extend(_helper_problems(text, kernel_names))
    functions = _functions(code)
    problems.extend(_address_space_problems(code, functions))
    problems.extend(_threadgroup_problems(code, kernels))
    problems.extend(_program_scope_problems(code))
    problems.extend(_function_rule_problems(code, functions))
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
                        f"{', '.join(POSITION_TYPES)} (unsigned), not {param.base_type!r}",
                    )
                )
            elif param.attribute in _SCALAR_ONLY_POSITIONS and param.base_type not in (
                "uint",
                "ushort",
            ):
                problems.append(
                    (
                        param.line,
                        f"{where}: [[{param.attribute}]] is a scalar: declare it uint or ushort",
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
    widths = {
        param.name: _POSITION_WIDTH[param.base_type]
        for param in kernel.parameters
        if param.attribute in POSITION_ATTRIBUTES
        and param.attribute not in _SCALAR_ONLY_POSITIONS
        and param.base_type in _POSITION_WIDTH
    }
    if len(set(widths.values())) > 1:
        listed = ", ".join(f"{name} ({width})" for name, width in widths.items())
        problems.append(
            (
                kernel.line,
                f"kernel {kernel.name}: position attributes mix scalar and vector types "
                f"(components: {listed}); Metal needs them all scalar or all vectors of one size",
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


class _Function:
    """A function definition found in the source: name, parameters and body span."""

    def __init__(self, name: str, params: list[Parameter], start: int, end: int) -> None:
        self.name = name
        self.params = params
        self.start = start  # first character of the body (after the brace)
        self.end = end  # the closing brace

    def body(self, text: str) -> str:
        return text[self.start : self.end]


def _functions(text: str) -> list[_Function]:
    """Every function definition (kernels included) at any depth outside other bodies."""
    found: list[_Function] = []
    position = 0
    while True:
        match = _FUNCTION.search(text, position)
        if match is None:
            return found
        type_word, name = match.group(1), match.group(2)
        open_paren = match.end() - 1
        close = matching(text, open_paren, "(", ")")
        if type_word in _NOT_FUNCTION_WORDS or name in _NOT_FUNCTION_WORDS or close < 0:
            position = match.end()
            continue
        after = text[close + 1 :]
        stripped = after.lstrip()
        if stripped.startswith("const"):
            stripped = stripped[5:].lstrip()
        if not stripped.startswith("{"):
            position = match.end()
            continue
        brace = close + 1 + after.index("{")
        end = matching(text, brace, "{", "}")
        if end < 0:
            return found
        params = [
            parse_parameter(piece, line_of(text, open_paren + 1 + offset))
            for offset, piece in split_top_level(text[open_paren + 1 : close])
        ]
        found.append(_Function(name, params, brace + 1, end))
        position = end + 1


def _address_space_problems(text: str, functions: list[_Function]) -> list[tuple[int, str]]:
    problems: list[tuple[int, str]] = []
    for function in functions:
        body = function.body(text)
        for match in _LOCAL_POINTER.finditer(body):
            problems.append(
                (
                    line_of(text, function.start + match.start(1)),
                    f"function {function.name}: local pointer {match.group(2)!r} needs an "
                    f"address space (device, constant, threadgroup or thread), e.g. "
                    f"device {match.group(1)}* {match.group(2)}",
                )
            )
        for param in function.params:
            if param.address_space != "constant" or not param.name:
                continue
            if not (param.is_pointer or param.is_reference):
                continue
            name = re.escape(param.name)
            write = re.compile(
                rf"(?<![\w.])(?:{name}\s*(?:\[[^\]]*\]\s*)*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)"
                rf"|\+\+|--)|(?:\+\+|--)\s*{name}\b|\*\s*\(?\s*{name}\b[^;=]*?=(?!=))"
            )
            for match in write.finditer(body):
                problems.append(
                    (
                        line_of(text, function.start + match.start()),
                        f"function {function.name}: writes through constant {param.name!r}; "
                        f"the constant address space is read-only (declare it device)",
                    )
                )
    return problems


def _threadgroup_problems(text: str, kernels: list[Kernel]) -> list[tuple[int, str]]:
    """``threadgroup`` storage: only in a kernel function's body, never initialised."""
    problems: list[tuple[int, str]] = []
    bodies = [(k.body_start, k.body_start + len(k.body)) for k in kernels if k.body_start >= 0]
    depth = [0] * (len(text) + 1)
    level = 0
    for i, char in enumerate(text):
        depth[i] = level
        if char == "(":
            level += 1
        elif char == ")":
            level = max(level - 1, 0)
    for match in _THREADGROUP.finditer(text):
        if depth[match.start()] > 0:
            continue  # a parameter (checked with the kernel's parameters) or a cast
        end = text.find(";", match.end())
        statement = text[match.end() : end if end >= 0 else len(text)]
        declarator = statement.split("=", 1)[0].split("{", 1)[0]
        if "*" in declarator or "&" in declarator:
            continue  # a pointer or reference to threadgroup memory: an ordinary local
        line = line_of(text, match.start())
        name_match = _DECLARED_NAME.search(declarator.strip())
        name = name_match.group(1) if name_match else "?"
        if not any(start <= match.start() < stop for start, stop in bodies):
            problems.append(
                (
                    line,
                    f"threadgroup variable {name!r} outside a kernel function: Metal allows "
                    f"threadgroup variables only in a kernel function's body (pass a "
                    f"threadgroup pointer to helpers)",
                )
            )
        elif "=" in statement or "{" in statement:
            problems.append(
                (
                    line,
                    f"threadgroup variable {name!r} has an initializer: threadgroup memory "
                    f"cannot be initialised where it is declared; let threads write it, then "
                    f"call threadgroup_barrier",
                )
            )
    return problems


def _program_scope_problems(text: str) -> list[tuple[int, str]]:
    """Variables declared outside every function and type must be in ``constant``."""
    problems: list[tuple[int, str]] = []
    depth = 0
    start = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char == "{":
            if depth == 0:
                header = text[start:i]
                if re.search(r"\bnamespace\b", header):
                    start = i + 1  # a namespace's contents are program scope too
                    i += 1
                    continue
            depth += 1
        elif char == "}":
            if depth == 0:  # the end of a namespace
                start = i + 1
            else:
                depth -= 1
                if depth == 0:
                    start = i + 1
        elif char == ";" and depth == 0:
            problem = _global_problem(text, start, i)
            if problem:
                problems.append(problem)
            start = i + 1
        i += 1
    return problems


_DECLARATION_KEYWORDS = re.compile(
    r"^\s*(?:using|typedef|template|static_assert|struct|class|enum|union|namespace)\b"
)


def _global_problem(text: str, start: int, end: int) -> tuple[int, str] | None:
    statement = text[start:end]
    if not statement.strip() or _DECLARATION_KEYWORDS.match(statement):
        return None
    words = set(_WORD.findall(statement))
    if "constant" in words or "constexpr" in words:
        return None
    head = statement.split("=", 1)[0]
    if "(" in head:
        return None  # a function declaration
    name_match = _DECLARED_NAME.search(head.strip())
    if name_match is None:
        return None
    offset = start + len(statement) - len(statement.lstrip())
    return (
        line_of(text, offset),
        f"program-scope variable {name_match.group(1)!r} is mutable: Metal has no mutable "
        f"globals; declare it constant (constant T name = value;) or pass it in a buffer",
    )


def _function_rule_problems(text: str, functions: list[_Function]) -> list[tuple[int, str]]:
    """Lambdas, recursion and function pointers, none of which Metal allows."""
    problems: list[tuple[int, str]] = []
    for match in _FUNCTION_POINTER.finditer(text):
        problems.append(
            (
                line_of(text, match.start()),
                "function pointer: Metal does not allow function pointers here (call the "
                "function directly, or switch on an op code)",
            )
        )
    for i, char in enumerate(text):
        if char != "[" or text[i + 1 : i + 2] == "[" or text[i - 1 : i] == "[":
            continue
        before = text[:i].rstrip()
        if before and (before[-1].isalnum() or before[-1] in "_])"):
            continue  # a subscript
        close = text.find("]", i)
        if close < 0:
            continue
        after = text[close + 1 :].lstrip()
        if after.startswith(("(", "{", "mutable", "->")):
            problems.append(
                (
                    line_of(text, i),
                    "lambda expression: Metal does not allow lambdas; write a helper function",
                )
            )
    defined = [function.name for function in functions]
    # An overloaded name (f(float) calling f(half)) is not followed: telling overloads apart
    # needs types, and a call between overloads is not recursion.
    names = {name for name in defined if defined.count(name) == 1}
    calls: dict[str, set[str]] = {}
    for function in functions:
        body = function.body(text)
        called = {n for n in names if re.search(rf"(?<![\w.]){re.escape(n)}\s*\(", body)}
        calls.setdefault(function.name, set()).update(called)
    for function in functions:
        if function.name in names and _reaches(function.name, function.name, calls):
            problems.append(
                (
                    line_of(text, function.start),
                    f"function {function.name} is recursive (it calls itself, directly or "
                    f"through other functions): Metal does not allow recursion; use a loop",
                )
            )
    return problems


def _reaches(start: str, target: str, calls: dict[str, set[str]]) -> bool:
    seen: set[str] = set()
    stack = list(calls.get(start, ()))
    while stack:
        name = stack.pop()
        if name == target:
            return True
        if name not in seen:
            seen.add(name)
            stack.extend(calls.get(name, ()))
    return False


#: The rule sets :func:`check_msl` takes: ``"metal"``, what Metal itself enforces (run before
#: Metal compiles on a Mac), and ``"all"``, those plus what the emulator needs (run before every
#: emulator compile). Both run the same checks for now.
RULE_SETS = ("metal", "all")


def check_msl(source: str, rules: str = "all") -> None:
    """Raises :class:`KernelLintError` listing every problem :func:`lint_msl` finds.

    ``rules`` names the rule set (:data:`RULE_SETS`); another value raises
    :class:`~llmfs.tensor.backends.metal.errors.MetalError` naming the choices.
    """
    if rules not in RULE_SETS:
        raise MetalError(f"unknown MSL rule set {rules!r}; choose one of {', '.join(RULE_SETS)}")
    problems = lint_msl(source)
    if problems:
        raise KernelLintError(problems)


__all__ = ["MAX_BUFFER_INDEX", "RULE_SETS", "check_msl", "lint_msl"]
