"""The MSL lint refuses what Metal refuses but C++ (the emulator) would accept."""

from __future__ import annotations

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
        "    double x = 1.0;\n"
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
