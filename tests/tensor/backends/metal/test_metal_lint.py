"""The MSL lint refuses what Metal refuses but C++ (the emulator) would accept."""

from __future__ import annotations

import re

import pytest

from llmfs.tensor.backends.metal import check_msl, lint_msl
from llmfs.tensor.backends.metal.errors import KernelLintError
from llmfs.tensor.backends.metal.ops import FAMILIES, family_source
from llmfs.tensor.errors import TensorError

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_shipped_kernel_source_is_clean(family: str) -> None:
    assert lint_msl(family_source(family)) == []


def test_double_is_refused_with_its_line() -> None:
    source = HEADER + (
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    double x = 1.0f;\n"
        "    out[i] = float(x);\n"
        "}\n"
    )
    assert lint_msl(source) == [(4, "Metal has no double (64-bit floating point); use float")]


def test_long_double_literals_are_refused_but_long_integers_are_not() -> None:
    source = HEADER + (
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    long n = 1L;\n"
        "    out[i] = float(1.0L) + float(.5l) + float(2e3L) + float(n);\n"
        "}\n"
    )
    problems = lint_msl(source)
    assert [line for line, _ in problems] == [5, 5, 5]
    assert all("Metal has no long double" in message for _, message in problems)
    assert any(message.startswith("1.0L is a long double literal") for _, message in problems)


def test_double_in_a_comment_is_fine() -> None:
    source = HEADER + (
        "// no double here, only float\n"
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    out[i] = 1.0f; /* double */\n"
        "}\n"
    )
    assert lint_msl(source) == []


def test_pointer_parameters_need_an_address_space() -> None:
    source = HEADER + (
        "inline float first(const float* values) { return values[0]; }\n"
        "kernel void k(const float* in [[buffer(0)]], device float* out [[buffer(1)]],\n"
        "              uint i [[thread_position_in_grid]]) {\n"
        "    out[i] = in[i];\n"
        "}\n"
    )
    problems = lint_msl(source)
    assert [line for line, _ in problems] == [3, 4]
    assert "function first, parameter 'values'" in problems[0][1]
    assert "kernel k, parameter 'in'" in problems[1][1]
    assert all("address space" in message for _, message in problems)


def test_buffer_indices_must_be_explicit_unique_and_in_range() -> None:
    source = HEADER + (
        "kernel void k(device float* a [[buffer(0)]], device float* b [[buffer(0)]],\n"
        "              device float* c, device float* d [[buffer(31)]],\n"
        "              uint i [[thread_position_in_grid]]) {}\n"
    )
    messages = " | ".join(message for _, message in lint_msl(source))
    assert "buffer index 0 is already used by 'a'" in messages
    assert "'c': give every buffer argument an explicit [[buffer(n)]]" in messages
    assert "buffer index 31 is outside Metal's 0...30" in messages


def test_cplusplus_only_features_are_refused() -> None:
    source = HEADER.replace("<metal_stdlib>", "<metal_stdlib>\n#include <cmath>") + (
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    float* p = new float[4];\n"
        "    long long n = 0;\n"
        "    out[i] = p[0] + n;\n"
        "}\n"
    )
    messages = " | ".join(message for _, message in lint_msl(source))
    assert "not <cmath>" in messages
    assert "(new)" in messages
    assert "long long" in messages


def test_by_value_arguments_and_threadgroup_parameters() -> None:
    source = HEADER + (
        "kernel void k(device float* out [[buffer(0)]], float scale,\n"
        "              threadgroup float* tile [[threadgroup(0)]],\n"
        "              float3 where [[thread_position_in_grid]]) {}\n"
    )
    messages = " | ".join(message for _, message in lint_msl(source))
    assert "'scale': a by-value kernel argument needs a thread-position attribute" in messages
    assert "threadgroup parameters are outside the emulator's subset" in messages
    assert "[[thread_position_in_grid]] must be one of" in messages


def test_check_msl_raises_a_tensor_error_listing_every_problem() -> None:
    source = HEADER + (
        "kernel void k(device double* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    out[i] = 0;\n"
        "}\n"
    )
    with pytest.raises(KernelLintError) as caught:
        check_msl(source)
    assert isinstance(caught.value, TensorError)
    assert caught.value.problems == [(3, "Metal has no double (64-bit floating point); use float")]
    assert "line 3: Metal has no double" in str(caught.value)


def _kernel(body: str, params: str = "uint i [[thread_position_in_grid]]") -> str:
    return HEADER + (f"kernel void k(device float* out [[buffer(0)]], {params}) {{\n{body}\n}}\n")


#: (rule, source, a phrase the message must contain, the line it must point at)
GPU_RULES = [
    (
        "position attributes mix scalar and vector",
        _kernel(
            "    out[gid] = float(lid.x);",
            "uint gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]]",
        ),
        "mix scalar and vector",
        3,
    ),
    (
        "int thread position",
        _kernel("    out[i] = 1.0f;", "int i [[thread_position_in_grid]]"),
        "(unsigned), not 'int'",
        3,
    ),
    (
        "threadgroup variable in a helper",
        HEADER
        + "inline float f(uint i) {\n    threadgroup float tile[4];\n    return tile[i];\n}\n"
        + _kernel("    out[i] = f(i);")[len(HEADER) :],
        "threadgroup variable 'tile' outside a kernel function",
        4,
    ),
    (
        "threadgroup variable with an initializer",
        _kernel("    threadgroup float total = 0.0f;\n    out[i] = total;"),
        "threadgroup variable 'total' has an initializer",
        4,
    ),
    (
        "local pointer without an address space",
        _kernel("    float* p = out;\n    p[i] = 1.0f;"),
        "local pointer 'p' needs an address space",
        4,
    ),
    (
        "write through a constant pointer",
        _kernel(
            "    scale[0] = 2.0f;\n    out[i] = scale[0];",
            "constant float* scale [[buffer(1)]], uint i [[thread_position_in_grid]]",
        ),
        "writes through constant 'scale'",
        4,
    ),
    (
        "write through a constant reference",
        _kernel(
            "    n += 1;\n    out[i] = float(n);",
            "constant uint& n [[buffer(1)]], uint i [[thread_position_in_grid]]",
        ),
        "writes through constant 'n'",
        4,
    ),
    (
        "mutable program-scope variable",
        HEADER + "float bias = 1.0f;\n" + _kernel("    out[i] = bias;")[len(HEADER) :],
        "program-scope variable 'bias' is mutable",
        3,
    ),
    (
        "lambda",
        _kernel("    auto twice = [](float x) { return 2.0f * x; };\n    out[i] = twice(out[i]);"),
        "Metal does not allow lambdas",
        4,
    ),
    (
        "recursion",
        HEADER
        + "inline uint fact(uint n) { return n <= 1 ? 1 : n * fact(n - 1); }\n"
        + _kernel("    out[i] = float(fact(i));")[len(HEADER) :],
        "function fact is recursive",
        3,
    ),
    (
        "recursion through another function",
        HEADER
        + "inline uint odd(uint n);\n"
        + "inline uint even(uint n) { return n == 0 ? 1 : odd(n - 1); }\n"
        + "inline uint odd(uint n) { return n == 0 ? 0 : even(n - 1); }\n"
        + _kernel("    out[i] = float(even(i));")[len(HEADER) :],
        "function even is recursive",
        4,
    ),
    (
        "function pointer",
        HEADER
        + "inline float twice(float x) { return 2.0f * x; }\n"
        + _kernel("    float (*f)(float) = twice;\n    out[i] = f(out[i]);")[len(HEADER) :],
        "function pointer",
        5,
    ),
    (
        "unsuffixed double literal",
        _kernel("    out[i] = out[i] * 0.1 + 0.2f;"),
        "0.1 is a double literal",
        4,
    ),
    (
        "unsuffixed literal with an exponent",
        _kernel("    out[i] = 1e-3 * out[i];"),
        "write 1e-3f",
        4,
    ),
]


@pytest.mark.parametrize(
    ("source", "phrase", "line"), [rule[1:] for rule in GPU_RULES], ids=[r[0] for r in GPU_RULES]
)
def test_constructs_metal_refuses_or_computes_differently_are_refused(source, phrase, line):
    problems = lint_msl(source)
    matching = [(at, message) for at, message in problems if phrase in message]
    assert matching, problems
    assert matching[0][0] == line, problems
    with pytest.raises(KernelLintError, match=re.escape(phrase)):
        check_msl(source)


def test_what_metal_allows_passes() -> None:
    source = HEADER + (
        "constant float SCALE = 2.0f;\n"
        "inline float get(constant float* values, uint i) { return values[i]; }\n"
        "kernel void k(device float* out [[buffer(0)]],\n"
        "              constant float* in [[buffer(1)]],\n"
        "              uint2 gid [[thread_position_in_grid]],\n"
        "              uint2 lid [[thread_position_in_threadgroup]],\n"
        "              uint index [[thread_index_in_threadgroup]]) {\n"
        "    threadgroup float tile[4][4];\n"
        "    threadgroup float* row = tile[lid.y];\n"
        "    device float* target = out + gid.x;\n"
        "    row[lid.x] = get(in, gid.x) * SCALE + 1.5f + 2.0h + float(1e3f) + 3;\n"
        "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "    if (in[0] == 1.0f && index <= 4) { *target = tile[0][0]; }\n"
        "}\n"
        "inline float twice(float x) { return 2.0f * x; }\n"
        "inline half twice(half x) { return half(twice(float(x))); }  // overloads, no recursion\n"
    )
    assert lint_msl(source) == []
