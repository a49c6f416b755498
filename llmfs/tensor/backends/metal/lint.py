"""The MSL lint: named rules a kernel source must keep, checked before anything compiles it.

Two rule sets, each rule named (an error says the rule and the line):

* ``"metal"``: rules Metal itself enforces, checked everywhere (on a Mac before Metal compiles,
  so its errors come with a line and a rule name; in the emulator because C++ would accept what
  Metal refuses): no ``double``, ``long double`` or ``long long``; no ``new``/``delete``,
  exceptions, ``virtual``, RTTI, ``goto``, ``thread_local``, ``register``; only ``#include
  <metal_stdlib>``; pointer and reference parameters and locals carry an address space; nothing
  writes through ``constant``; program-scope variables are ``constant``; ``threadgroup``
  variables live in a kernel body and have no initializer; no function-local ``static``; no
  lambdas, recursion or function pointers; buffer indices 0..30 and unique; position attributes
  of unsigned types, all scalar or all vectors of one size; by-value kernel arguments carry an
  attribute.
* ``"emulator"``: rules the CPU build needs to compute what Metal computes, checked before the
  emulator compiles only: no ``__builtin_*`` calls, and no call or declaration of a function
  that neither the source defines nor Metal's standard library provides (an allow-list,
  :data:`METAL_FUNCTIONS`: the emulator would run the host's C library), nothing outside the
  emulator's MSL (``bfloat``, textures, samplers, ``simdgroup_matrix``, unknown argument
  attributes), each refused by name.

The emulator's compiler (see :mod:`~llmfs.tensor.backends.metal.emulator`) enforces more of
Metal's rules itself (address spaces that do not mix, variable-length arrays, 32 KiB of
threadgroup memory) and its errors are mapped to rule names too.

What is valid MSL passes: unsuffixed floating literals (``x * 0.5``: a float in MSL, and the
emulator compiles it as one), ``half`` literals (``2.0h``), simdgroup attributes,
``[[threadgroup(n)]]`` arguments, buffer arguments without an explicit index (Metal assigns the
first free one).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from llmfs.tensor.backends.metal.errors import KernelLintError, MetalError
from llmfs.tensor.backends.metal.msl import (
    ADDRESS_SPACES,
    POSITION_ATTRIBUTES,
    POSITION_TYPES,
    SCALAR_POSITION_ATTRIBUTES,
    Kernel,
    Parameter,
    blank_comments,
    find_kernels,
    line_of,
    matching,
    parse_parameter,
    split_top_level,
)


class Problem(NamedTuple):
    """One broken rule: the 1-based source line, the rule's name and what is wrong there."""

    line: int
    rule: str
    message: str


#: The rules Metal itself enforces (checked on every path).
METAL_RULES = frozenset(
    {
        "no-double",
        "no-long-double",
        "no-long-long",
        "no-dynamic-allocation",
        "no-goto",
        "no-virtual",
        "no-exceptions",
        "no-rtti",
        "no-thread-local",
        "no-register",
        "include-metal-stdlib",
        "address-space-required",
        "address-space-mismatch",
        "constant-is-read-only",
        "program-scope-constant",
        "threadgroup-in-kernel-body",
        "threadgroup-no-initializer",
        "threadgroup-memory-limit",
        "no-static-local",
        "no-variable-length-array",
        "no-lambda",
        "no-recursion",
        "no-function-pointer",
        "buffer-index-range",
        "buffer-index-unique",
        "threadgroup-argument-index",
        "kernel-argument-space",
        "kernel-argument-attribute",
        "position-attribute-type",
        "position-attribute-scalar",
        "position-attribute-mix",
    }
)
#: The rules the emulator needs to compute what Metal computes (checked before it compiles).
EMULATOR_RULES = frozenset(
    {"no-compiler-builtin", "no-host-library-call", "outside-emulator", "compiles"}
)
#: The names :func:`check_msl` and :func:`lint_msl` accept for ``rules``.
RULE_SETS = {"all": METAL_RULES | EMULATOR_RULES, "metal": METAL_RULES, "emulator": EMULATOR_RULES}

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
_WORD_RULES = {
    "double": "no-double",
    "new": "no-dynamic-allocation",
    "delete": "no-dynamic-allocation",
    "goto": "no-goto",
    "virtual": "no-virtual",
    "throw": "no-exceptions",
    "try": "no-exceptions",
    "catch": "no-exceptions",
    "dynamic_cast": "no-rtti",
    "typeid": "no-rtti",
    "thread_local": "no-thread-local",
    "register": "no-register",
}
#: The functions of Metal's standard library a kernel may call without defining them (Apple's
#: Metal Shading Language Specification, chapter 6: math, common, integer, relational,
#: geometric, synchronization, atomic, simdgroup and quad-group, packing and conversion
#: functions). An allow-list: a call or declaration of any other name the source does not
#: define is refused, so no host function (the C library, pthreads, the system) can run in the
#: emulator, whatever the header the emulator is built with declares.
METAL_FUNCTIONS = frozenset(
    """
    abs acos acosh acospi asin asinh asinpi atan atan2 atan2pi atanh atanpi cbrt ceil copysign
    cos cosh cospi divide erf erfc exp exp10 exp2 expm1 fabs fdim floor fma fmax fmax3 fmedian3
    fmin fmin3 fmod fract frexp hypot ilogb isfinite isinf isnan isnormal ldexp lgamma log
    log10 log1p log2 logb max max3 median3 min min3 modf nan nextafter pow pown powr remainder
    rint round round_even rootn rsqrt sign signbit sin sincos sinh sinpi sqrt tan tanh tanpi
    tgamma trunc
    clamp mix saturate smoothstep step
    absdiff addsat clz ctz extract_bits hadd insert_bits mad24 madhi madsat mul24 mulhi
    popcount reverse_bits rhadd rotate subsat
    all any isordered isunordered select
    cross distance distance_squared dot faceforward length length_squared normalize reflect
    refract determinant transpose
    threadgroup_barrier simdgroup_barrier atomic_thread_fence
    atomic_store_explicit atomic_load_explicit atomic_exchange_explicit
    atomic_compare_exchange_weak_explicit atomic_fetch_add_explicit atomic_fetch_sub_explicit
    atomic_fetch_and_explicit atomic_fetch_or_explicit atomic_fetch_xor_explicit
    atomic_fetch_min_explicit atomic_fetch_max_explicit
    simd_sum simd_product simd_max simd_min simd_and simd_or simd_xor simd_all simd_any
    simd_ballot simd_active_threads_mask simd_is_first simd_is_helper_thread simd_broadcast
    simd_broadcast_first simd_shuffle simd_shuffle_up simd_shuffle_down simd_shuffle_xor
    simd_shuffle_rotate_up simd_shuffle_rotate_down simd_shuffle_and_fill_up
    simd_shuffle_and_fill_down simd_prefix_exclusive_sum simd_prefix_inclusive_sum
    simd_prefix_exclusive_product simd_prefix_inclusive_product
    quad_sum quad_product quad_max quad_min quad_and quad_or quad_xor quad_all quad_any
    quad_ballot quad_active_threads_mask quad_is_first quad_is_helper_thread quad_broadcast
    quad_broadcast_first quad_shuffle quad_shuffle_up quad_shuffle_down quad_shuffle_xor
    quad_shuffle_rotate_up quad_shuffle_rotate_down quad_prefix_exclusive_sum
    quad_prefix_inclusive_sum quad_prefix_exclusive_product quad_prefix_inclusive_product
    as_type pack_float_to_snorm4x8 pack_float_to_unorm4x8 pack_float_to_snorm2x16
    pack_float_to_unorm2x16 pack_float_to_unorm1x8 pack_float_to_snorm1x8
    pack_float_to_unorm1x16 pack_float_to_snorm1x16 unpack_snorm4x8_to_float
    unpack_unorm4x8_to_float unpack_snorm2x16_to_float unpack_unorm2x16_to_float
    unpack_unorm4x8_to_half unpack_snorm4x8_to_half unpack_unorm2x16_to_half
    unpack_snorm2x16_to_half unpack_unorm1x8_to_float unpack_snorm1x8_to_float
    """.split()
)
#: Words followed by "(" that are not calls of a function: C++ keywords and casts.
_CALL_KEYWORDS = frozenset(
    """if for while switch return sizeof alignof alignas decltype static_assert noexcept
    static_cast const_cast reinterpret_cast operator defined else do case""".split()
)
#: MSL's scalar, vector, packed and matrix type names: ``float4(x)`` is a conversion.
_TYPE_CALL = re.compile(
    r"(?:packed_)?(?:float|half|int|uint|short|ushort|char|uchar|bool|long|ulong|bfloat)"
    r"(?:[234](?:x[234])?)?|size_t|ptrdiff_t|vec|matrix|atomic_uint|atomic_int|atomic_bool"
    r"|void"
)
#: A name the source introduces as a type: ``struct S``, ``using T =``, ``typedef ... T;``,
#: ``template <typename T>``.
_TYPE_NAME = re.compile(
    r"\b(?:struct|class|union|enum(?:\s+class)?|typename|namespace)\s+([A-Za-z_]\w*)"
    r"|\busing\s+([A-Za-z_]\w*)\s*="
    r"|\btypedef\b[^;]*?\b([A-Za-z_]\w*)\s*;"
)
_QUALIFIED_CALL = re.compile(r"((?:[A-Za-z_]\w*\s*::\s*)+|::\s*)([A-Za-z_]\w*)\s*\(")
_ATTRIBUTE = re.compile(r"\[\[.*?\]\]", re.DOTALL)
_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.MULTILINE)
_PREPROCESSOR_PREFIX = re.compile(r"^[ \t]*#[ \t]*define[ \t]+[A-Za-z_]\w*")
#: The namespaces of Metal's library (``metal::exp``, ``metal::precise::exp``, ``fast::``).
_METAL_NAMESPACES = frozenset({"metal", "precise", "fast"})
#: Types and words of MSL the emulator does not provide, refused by name.
_OUTSIDE_EMULATOR = {
    "bfloat": "bfloat (and bfloat2/3/4) is not provided by the emulator; use half or float",
    "simdgroup_matrix": "simdgroup_matrix is not provided by the emulator",
    "sampler": "samplers are not provided by the emulator (it runs compute kernels on buffers)",
    "imageblock": "imageblocks are not provided by the emulator",
}
_TEXTURE = re.compile(r"\b(texture[123]d(?:_array|_ms)?|texturecube|depth2d)\b")
_BFLOAT = re.compile(r"\bbfloat[234]?\b")
_BUILTIN_CALL = re.compile(r"\b(__builtin_\w+|__asm__|asm)\s*\(")
_CALL = re.compile(r"(?<![\w.:>])([A-Za-z_]\w*)\s*\(")
_STATIC = re.compile(r"\bstatic\b")
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
_FUNCTION = re.compile(r"\b([A-Za-z_][\w:<>]*)\s*[*&]?\s+([A-Za-z_]\w*)\s*\(")
_NOT_FUNCTION_WORDS = {"if", "for", "while", "switch", "return", "else", "do", "sizeof", "case"}


def lint_msl(source: str, rules: str = "all") -> list[Problem]:
    """Returns the :class:`Problem` triples ``(line, rule, message)`` of ``source``, sorted by
    line; empty when clean. ``rules`` is ``"all"`` (the default), ``"metal"`` (only the rules
    Metal itself enforces) or ``"emulator"`` (only the emulator-fidelity rules).

    Never raises for malformed text: what it cannot read it leaves to the compiler. Raises
    a :class:`MetalError` for an unknown ``rules``.
    """
    if rules not in RULE_SETS:
        raise MetalError(f"the rule set must be one of {', '.join(RULE_SETS)}, got {rules!r}")
    chosen = RULE_SETS[rules]
    text = blank_comments(source)
    problems: list[Problem] = []

    for match in _WORD.finditer(text):
        word = match.group(0)
        message = _FORBIDDEN_WORDS.get(word)
        if message:
            problems.append(Problem(line_of(text, match.start()), _WORD_RULES[word], message))
        elif word in _OUTSIDE_EMULATOR:
            problems.append(
                Problem(line_of(text, match.start()), "outside-emulator", _OUTSIDE_EMULATOR[word])
            )
    for match in _BFLOAT.finditer(text):
        if match.group(0) != "bfloat":
            problems.append(
                Problem(
                    line_of(text, match.start()), "outside-emulator", _OUTSIDE_EMULATOR["bfloat"]
                )
            )
    for match in _TEXTURE.finditer(text):
        problems.append(
            Problem(
                line_of(text, match.start()),
                "outside-emulator",
                f"{match.group(1)}: textures are not provided by the emulator (it runs compute "
                f"kernels on buffers)",
            )
        )
    for match in _LONG_LONG.finditer(text):
        problems.append(
            Problem(
                line_of(text, match.start()), "no-long-long", "Metal has no long long; use long"
            )
        )
    for match in _LONG_DOUBLE_LITERAL.finditer(text):
        problems.append(
            Problem(
                line_of(text, match.start()),
                "no-long-double",
                f"{match.group(0)} is a long double literal; Metal has no long double, write "
                f"{match.group(0)[:-1]}f",
            )
        )
    for match in _INCLUDE.finditer(source):
        if match.group(1).replace(" ", "") != "<metal_stdlib>":
            problems.append(
                Problem(
                    line_of(source, match.start()),
                    "include-metal-stdlib",
                    f"only #include <metal_stdlib> is available to a runtime-compiled Metal "
                    f"source, not {match.group(1)}",
                )
            )

    code = _PREPROCESSOR.sub(lambda m: " " * len(m.group(0)), text)
    kernels = find_kernels(source)
    kernel_names = set()
    for kernel in kernels:
        kernel_names.add(kernel.function or kernel.name)
        problems.extend(_kernel_problems(kernel))
    problems.extend(_helper_problems(text, kernel_names))
    functions = _functions(code)
    problems.extend(_address_space_problems(code, functions))
    problems.extend(_threadgroup_problems(code, kernels))
    problems.extend(_program_scope_problems(code))
    problems.extend(_function_rule_problems(code, functions))
    problems.extend(_host_problems(code, functions))
    problems.extend(_undefined_call_problems(source, code, functions))
    return sorted({p for p in problems if p.rule in chosen})


def _host_problems(text: str, functions: list[_Function]) -> list[Problem]:
    """Function-local ``static`` and compiler builtins."""
    problems: list[Problem] = []
    for function in functions:
        body = function.body(text)
        for match in _STATIC.finditer(body):
            problems.append(
                Problem(
                    line_of(text, function.start + match.start()),
                    "no-static-local",
                    f"function {function.name}: a function-local static variable; Metal has "
                    f"none (use a constant at program scope, or a buffer)",
                )
            )
        for match in _BUILTIN_CALL.finditer(body):
            problems.append(
                Problem(
                    line_of(text, function.start + match.start()),
                    "no-compiler-builtin",
                    f"function {function.name}: {match.group(1)} is a host compiler builtin, "
                    f"not MSL; the emulator would compute it on the CPU as Metal never does "
                    f"(use the metal:: function, e.g. exp instead of __builtin_expf)",
                )
            )
    return problems


def _undefined_call_problems(source: str, text: str, functions: list[_Function]) -> list[Problem]:
    """Every call or declaration of a function that neither the source defines nor Metal's
    standard library provides (:data:`METAL_FUNCTIONS`), anywhere in ``text`` (a prototype
    such as ``extern "C" int getppid();`` included); ``metal::``-qualified names are checked
    against the library too, and any other qualifier must name a type of the source."""
    problems: list[Problem] = []
    code = _ATTRIBUTE.sub(lambda m: " " * len(m.group(0)), text)
    defined = {function.name for function in functions}
    types: set[str] = set()
    for match in _TYPE_NAME.finditer(code):
        types.update(name for name in match.groups() if name)
    # A function-like macro is a name the source defines; its body is scanned like code below
    # (`#define F(x) getppid()` is refused there). An object-like macro is not a function, so
    # `#define G getppid` then `G()` is refused at the call; pasting tokens (##) could spell
    # any name, so a macro that does is refused outright.
    macros: set[str] = set()
    for match in _MACRO.finditer(source):
        line = source[match.start() : source.find("\n", match.end()) % (len(source) + 1)]
        if source.startswith("(", match.end()):
            macros.add(match.group(1))
            code += "\n" + _PREPROCESSOR_PREFIX.sub(" ", line)
        if "##" in line:
            problems.append(
                Problem(
                    line_of(source, match.start()),
                    "no-host-library-call",
                    f"macro {match.group(1)} pastes tokens (##): it could spell the name of "
                    f"any function, so the emulator cannot tell what the kernel calls",
                )
            )
    known = defined | types | macros

    def refuse(position: int, name: str) -> None:
        problems.append(
            Problem(
                line_of(code, position),
                "no-host-library-call",
                f"{name}() is neither defined in this source nor a function of Metal's standard "
                f"library: a kernel calls only what the Metal Shading Language provides and "
                f"what the source itself defines (the emulator would run the host's {name})",
            )
        )

    for match in _CALL.finditer(code):
        name = match.group(1)
        if name in known or name in METAL_FUNCTIONS or name in _CALL_KEYWORDS:
            continue
        if _TYPE_CALL.fullmatch(name) or name.startswith("__builtin_"):
            continue  # a conversion; builtins have their own rule
        refuse(match.start(), name)
    for match in _CALL.finditer(code):
        if match.group(1) in macros:  # F(x)(y): the macro expands to something called
            close = matching(code, match.end() - 1, "(", ")")
            if close >= 0 and code[close + 1 :].lstrip().startswith("("):
                refuse(match.start(), f"{match.group(1)}(...)")
    for match in _QUALIFIED_CALL.finditer(code):
        qualifiers = [q for q in re.split(r"\s*::\s*", match.group(1)) if q]
        name = match.group(2)
        if qualifiers and all(q in _METAL_NAMESPACES for q in qualifiers):
            if name not in METAL_FUNCTIONS and not _TYPE_CALL.fullmatch(name):
                refuse(match.start(2), name)
        elif not qualifiers or not any(q in known for q in qualifiers):
            refuse(match.start(2), "::".join([*qualifiers, name]) if qualifiers else f"::{name}")
    return problems


def _kernel_problems(kernel: Kernel) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[int, str] = {}
    for param in kernel.parameters:
        where = f"kernel {kernel.name}, parameter {param.name!r}"
        if param.is_pointer or param.is_reference:
            space = param.address_space
            if space is None:
                problems.append(
                    Problem(
                        param.line,
                        "address-space-required",
                        f"{where}: a pointer or reference parameter needs an address space "
                        f"(device, constant or threadgroup)",
                    )
                )
            elif space == "thread":
                problems.append(
                    Problem(
                        param.line,
                        "kernel-argument-space",
                        f"{where}: a kernel argument cannot be in the thread space",
                    )
                )
            if space == "threadgroup":
                if param.attribute != "threadgroup" or param.index is None:
                    problems.append(
                        Problem(
                            param.line,
                            "threadgroup-argument-index",
                            f"{where}: a threadgroup argument needs [[threadgroup(n)]] (the "
                            f"host sets its length by that index)",
                        )
                    )
                continue
            if param.attribute not in ("buffer", None) or (
                param.attribute == "buffer" and param.index is None
            ):
                label = f"[[{param.attribute}]]" if param.attribute else "no attribute"
                problems.append(
                    Problem(
                        param.line,
                        "outside-emulator",
                        f"{where}: a pointer argument with {label}; the emulator binds buffers "
                        f"([[buffer(n)]] or no attribute) and [[threadgroup(n)]] memory",
                    )
                )
            elif param.index is not None and not 0 <= param.index <= MAX_BUFFER_INDEX:
                problems.append(
                    Problem(
                        param.line,
                        "buffer-index-range",
                        f"{where}: buffer index {param.index} is outside Metal's 0..."
                        f"{MAX_BUFFER_INDEX}",
                    )
                )
            elif param.index is not None and param.index in seen:
                problems.append(
                    Problem(
                        param.line,
                        "buffer-index-unique",
                        f"{where}: buffer index {param.index} is already used by "
                        f"{seen[param.index]!r}",
                    )
                )
            elif param.index is not None:
                seen[param.index] = param.name
        elif param.attribute in POSITION_ATTRIBUTES:
            if param.base_type not in POSITION_TYPES:
                problems.append(
                    Problem(
                        param.line,
                        "position-attribute-type",
                        f"{where}: [[{param.attribute}]] must be one of "
                        f"{', '.join(POSITION_TYPES)} (unsigned), not {param.base_type!r}",
                    )
                )
            elif param.attribute in SCALAR_POSITION_ATTRIBUTES and param.base_type not in (
                "uint",
                "ushort",
            ):
                problems.append(
                    Problem(
                        param.line,
                        "position-attribute-scalar",
                        f"{where}: [[{param.attribute}]] is a scalar: declare it uint or ushort",
                    )
                )
        else:
            label = f"[[{param.attribute}]]" if param.attribute else "no attribute"
            problems.append(
                Problem(
                    param.line,
                    "kernel-argument-attribute",
                    f"{where}: a by-value kernel argument needs a thread-position attribute "
                    f"({', '.join(POSITION_ATTRIBUTES)}); it has {label}. Pass data in a "
                    f"buffer (constant T& name [[buffer(n)]])",
                )
            )
    widths = {
        param.name: _POSITION_WIDTH[param.base_type]
        for param in kernel.parameters
        if param.attribute in POSITION_ATTRIBUTES
        and param.attribute not in SCALAR_POSITION_ATTRIBUTES
        and param.base_type in _POSITION_WIDTH
    }
    if len(set(widths.values())) > 1:
        listed = ", ".join(f"{name} ({width})" for name, width in widths.items())
        problems.append(
            Problem(
                kernel.line,
                "position-attribute-mix",
                f"kernel {kernel.name}: position attributes mix scalar and vector types "
                f"(components: {listed}); Metal needs them all scalar or all vectors of one size",
            )
        )
    return problems


def _helper_problems(text: str, kernel_names: set[str]) -> list[Problem]:
    problems: list[Problem] = []
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
                    Problem(
                        param.line,
                        "address-space-required",
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


def _address_space_problems(text: str, functions: list[_Function]) -> list[Problem]:
    problems: list[Problem] = []
    for function in functions:
        body = function.body(text)
        for match in _LOCAL_POINTER.finditer(body):
            problems.append(
                Problem(
                    line_of(text, function.start + match.start(1)),
                    "address-space-required",
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
            # An assignment whose target is the name (subscripted or not), an increment of
            # it, or a store through it (`*name = `, `*(name + k) = `) at a statement's start;
            # never a read such as `C[row * name + col] = acc` or `x = *name`.
            write = re.compile(
                rf"(?<![\w.>*])(?:{name}\s*(?:\[[^\]]*\]\s*)*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)"
                rf"|\+\+|--)|(?:\+\+|--)\s*{name}\b)"
                rf"|(?:^|(?<=[;{{}}]))\s*\*\s*(?:{name}|\(\s*{name}\b[^;()]*\))\s*"
                rf"(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)"
            )
            for match in write.finditer(body):
                problems.append(
                    Problem(
                        line_of(text, function.start + match.start() + _lead(match.group(0))),
                        "constant-is-read-only",
                        f"function {function.name}: writes through constant {param.name!r}; "
                        f"the constant address space is read-only (declare it device)",
                    )
                )
    return problems


def _threadgroup_problems(text: str, kernels: list[Kernel]) -> list[Problem]:
    """``threadgroup`` storage: only in a kernel function's body, never initialised."""
    problems: list[Problem] = []
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
                Problem(
                    line,
                    "threadgroup-in-kernel-body",
                    f"threadgroup variable {name!r} outside a kernel function: Metal allows "
                    f"threadgroup variables only in a kernel function's body (pass a "
                    f"threadgroup pointer to helpers)",
                )
            )
        elif "=" in statement or "{" in statement:
            problems.append(
                Problem(
                    line,
                    "threadgroup-no-initializer",
                    f"threadgroup variable {name!r} has an initializer: threadgroup memory "
                    f"cannot be initialised where it is declared; let threads write it, then "
                    f"call threadgroup_barrier",
                )
            )
    return problems


def _program_scope_problems(text: str) -> list[Problem]:
    """Variables declared outside every function and type must be in ``constant``."""
    problems: list[Problem] = []
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


def _global_problem(text: str, start: int, end: int) -> Problem | None:
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
    return Problem(
        line_of(text, offset),
        "program-scope-constant",
        f"program-scope variable {name_match.group(1)!r} is mutable: Metal has no mutable "
        f"globals; declare it constant (constant T name = value;) or pass it in a buffer",
    )


def _function_rule_problems(text: str, functions: list[_Function]) -> list[Problem]:
    """Lambdas, recursion and function pointers, none of which Metal allows."""
    problems: list[Problem] = []
    for match in _FUNCTION_POINTER.finditer(text):
        problems.append(
            Problem(
                line_of(text, match.start()),
                "no-function-pointer",
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
                Problem(
                    line_of(text, i),
                    "no-lambda",
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
                Problem(
                    line_of(text, function.start),
                    "no-recursion",
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


def check_msl(source: str, rules: str = "all") -> None:
    """Raises :class:`KernelLintError` listing every problem :func:`lint_msl` finds with the
    same ``rules`` (``"all"``, ``"metal"`` or ``"emulator"``); each names its rule and line."""
    problems = lint_msl(source, rules)
    if problems:
        raise KernelLintError(problems)


def _lead(text: str) -> int:
    return len(text) - len(text.lstrip())


__all__ = [
    "EMULATOR_RULES",
    "MAX_BUFFER_INDEX",
    "METAL_RULES",
    "RULE_SETS",
    "Problem",
    "check_msl",
    "lint_msl",
]
