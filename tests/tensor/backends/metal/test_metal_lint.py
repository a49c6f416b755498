"""The MSL lint: named rules in two sets, Metal's own and the emulator's, each error naming its
rule and line; valid MSL passes."""

from __future__ import annotations

import re

import numpy as np
import pytest

from llmfs.tensor.backends.metal import check_msl, lint_msl
from llmfs.tensor.backends.metal import lint as lint_module
from llmfs.tensor.backends.metal.errors import KernelLintError, MetalError
from llmfs.tensor.backends.metal.lint import EMULATOR_RULES, METAL_RULES
from llmfs.tensor.backends.metal.msl import find_kernels
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
    assert lint_msl(source) == [
        (4, "no-double", "Metal has no double (64-bit floating point); use float")
    ]


def test_long_double_literals_are_refused_but_long_integers_are_not() -> None:
    source = HEADER + (
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    long n = 1L;\n"
        "    out[i] = float(1.0L) + float(.5l) + float(2e3L) + float(n);\n"
        "}\n"
    )
    problems = lint_msl(source)
    assert [line for line, _, _ in problems] == [5, 5, 5]
    assert {rule for _, rule, _ in problems} == {"no-long-double"}
    assert all("Metal has no long double" in message for _, _, message in problems)
    assert any(message.startswith("1.0L is a long double literal") for _, _, message in problems)


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
    assert [line for line, _, _ in problems] == [3, 4]
    assert "function first, parameter 'values'" in problems[0].message
    assert "kernel k, parameter 'in'" in problems[1].message
    assert {rule for _, rule, _ in problems} == {"address-space-required"}


def test_buffer_indices_must_be_unique_and_in_range_and_may_be_left_to_metal() -> None:
    source = HEADER + (
        "kernel void k(device float* a [[buffer(0)]], device float* b [[buffer(0)]],\n"
        "              device float* c, device float* d [[buffer(31)]],\n"
        "              uint i [[thread_position_in_grid]]) {}\n"
    )
    problems = lint_msl(source)
    assert [(line, rule) for line, rule, _ in problems] == [
        (3, "buffer-index-unique"),
        (4, "buffer-index-range"),
    ]
    assert "buffer index 0 is already used by 'a'" in problems[0].message
    assert "buffer index 31 is outside Metal's 0...30" in problems[1].message


def test_buffers_without_an_index_get_the_first_free_one_as_in_apples_add_arrays() -> None:
    source = HEADER + (
        "kernel void add_arrays(device const float* inA, device const float* inB,\n"
        "                       device float* result, uint index [[thread_position_in_grid]]) {\n"
        "    result[index] = inA[index] + inB[index];\n"
        "}\n"
        "kernel void mixed(device float* a, device float* b [[buffer(0)]], constant uint& n,\n"
        "                  uint i [[thread_position_in_grid]]) {}\n"
    )
    assert lint_msl(source) == []
    add, mixed = find_kernels(source)
    assert {i: p.name for i, p in add.buffers.items()} == {0: "inA", 1: "inB", 2: "result"}
    assert {i: p.name for i, p in mixed.buffers.items()} == {0: "b", 1: "a", 2: "n"}


def test_cplusplus_only_features_are_refused() -> None:
    source = HEADER.replace("<metal_stdlib>", "<metal_stdlib>\n#include <cmath>") + (
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    float* p = new float[4];\n"
        "    long long n = 0;\n"
        "    out[i] = p[0] + n;\n"
        "}\n"
    )
    rules = {rule for _, rule, _ in lint_msl(source)}
    assert rules == {
        "include-metal-stdlib",
        "no-dynamic-allocation",
        "no-long-long",
        "address-space-required",  # float* p: a local pointer without an address space
    }


def test_by_value_arguments_need_an_attribute_and_threadgroup_arguments_an_index() -> None:
    source = HEADER + (
        "kernel void k(device float* out [[buffer(0)]], float scale,\n"
        "              threadgroup float* tile [[threadgroup(0)]],\n"
        "              threadgroup float* other,\n"
        "              float3 where [[thread_position_in_grid]]) {}\n"
    )
    problems = lint_msl(source)
    assert [(line, rule) for line, rule, _ in problems] == [
        (3, "kernel-argument-attribute"),
        (5, "threadgroup-argument-index"),
        (6, "position-attribute-type"),
    ]
    assert "'scale': a by-value kernel argument needs a thread-position attribute" in (
        problems[0].message
    )


def test_check_msl_raises_a_tensor_error_listing_every_problem() -> None:
    source = HEADER + (
        "kernel void k(device double* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    out[i] = 0;\n"
        "}\n"
    )
    with pytest.raises(KernelLintError) as caught:
        check_msl(source)
    assert isinstance(caught.value, TensorError)
    assert caught.value.problems == [
        (3, "no-double", "Metal has no double (64-bit floating point); use float")
    ]
    assert caught.value.rules == ["no-double"]
    assert "line 3 [no-double]: Metal has no double" in str(caught.value)


def _kernel(body: str, params: str = "uint i [[thread_position_in_grid]]") -> str:
    return HEADER + (f"kernel void k(device float* out [[buffer(0)]], {params}) {{\n{body}\n}}\n")


#: (case, source, a phrase the message must contain, the line it must point at); the rule is
#: looked up in RULE_OF.
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
        "function-local static",
        _kernel("    static float count = 0.0f;\n    out[i] = count;"),
        "a function-local static variable",
        4,
    ),
    (
        "compiler builtin",
        _kernel("    out[i] = __builtin_expf(out[i]);"),
        "__builtin_expf is a host compiler builtin",
        4,
    ),
    (
        "pthread call",
        _kernel("    out[i] = float(pthread_self());"),
        "pthread_self() is neither defined in this source nor a function of Metal's",
        4,
    ),
    (
        "printf",
        _kernel('    printf("%f", out[i]);'),
        "printf() is neither defined in this source nor a function of Metal's",
        4,
    ),
    (
        "bfloat",
        _kernel("    bfloat x = bfloat(out[i]);\n    out[i] = float(x);"),
        "bfloat (and bfloat2/3/4) is not provided by the emulator",
        4,
    ),
    (
        "texture argument",
        _kernel(
            "    out[i] = 0.0f;",
            "texture2d<float> t [[texture(0)]], uint i [[thread_position_in_grid]]",
        ),
        "textures are not provided by the emulator",
        3,
    ),
]

RULE_OF = {
    "position attributes mix scalar and vector": "position-attribute-mix",
    "int thread position": "position-attribute-type",
    "threadgroup variable in a helper": "threadgroup-in-kernel-body",
    "threadgroup variable with an initializer": "threadgroup-no-initializer",
    "local pointer without an address space": "address-space-required",
    "write through a constant pointer": "constant-is-read-only",
    "write through a constant reference": "constant-is-read-only",
    "mutable program-scope variable": "program-scope-constant",
    "lambda": "no-lambda",
    "recursion": "no-recursion",
    "recursion through another function": "no-recursion",
    "function pointer": "no-function-pointer",
    "function-local static": "no-static-local",
    "compiler builtin": "no-compiler-builtin",
    "pthread call": "no-host-library-call",
    "printf": "no-host-library-call",
    "bfloat": "outside-emulator",
    "texture argument": "outside-emulator",
}


@pytest.mark.parametrize(
    ("case", "source", "phrase", "line"), GPU_RULES, ids=[r[0] for r in GPU_RULES]
)
def test_constructs_metal_refuses_or_computes_differently_are_refused(case, source, phrase, line):
    rule = RULE_OF[case]
    problems = lint_msl(source)
    matching = [(at, name) for at, name, message in problems if phrase in message]
    assert matching, problems
    assert matching[0] == (line, rule), problems
    with pytest.raises(KernelLintError, match=re.escape(f"[{rule}]: ")) as caught:
        check_msl(source)
    assert rule in caught.value.rules
    # Only the set the rule belongs to reports it: Metal's own rules run before Metal compiles.
    own = "metal" if rule in METAL_RULES else "emulator"
    other = "emulator" if own == "metal" else "metal"
    assert rule in {name for _, name, _ in lint_msl(source, own)}
    assert rule not in {name for _, name, _ in lint_msl(source, other)}


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
        "    row[lid.x] = get(in, gid.x) * SCALE + 1.5f + 2.0h + float(1e3f) + 3 + 0.5 * 1e-3;\n"
        "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
        "    if (in[0] == 1.0f && index <= 4) { *target = tile[0][0]; }\n"
        "}\n"
        "inline float twice(float x) { return 2.0f * x; }\n"
        "inline half twice(half x) { return half(twice(float(x))); }  // overloads, no recursion\n"
    )
    assert lint_msl(source) == []


def test_valid_msl_the_lint_used_to_refuse_passes() -> None:
    """Unsuffixed literals, simdgroup attributes, [[threadgroup(n)]] arguments, [[kernel]],
    and a tiled matmul's store `C[row * N + col] = acc` with `constant uint& N`."""
    source = HEADER + (
        "[[kernel]] void tiled(device const float* A [[buffer(0)]],\n"
        "                      device const float* B [[buffer(1)]],\n"
        "                      device float* C [[buffer(2)]],\n"
        "                      constant uint& N [[buffer(3)]],\n"
        "                      threadgroup float* scratch [[threadgroup(0)]],\n"
        "                      uint2 gid [[thread_position_in_grid]],\n"
        "                      uint lane [[thread_index_in_simdgroup]],\n"
        "                      uint sg [[simdgroup_index_in_threadgroup]],\n"
        "                      ushort width [[threads_per_simdgroup]]) {\n"
        "    uint row = gid.y, col = gid.x;\n"
        "    float acc = 0.0;\n"
        "    for (uint k = 0; k < N; ++k) acc += A[row * N + k] * B[k * N + col] * 0.5;\n"
        "    scratch[lane] = acc;\n"
        "    C[row * N + col] = acc;\n"
        "    *(C + row * N) = *(A + N) + N;\n"
        "}\n"
    )
    assert lint_msl(source) == []


def test_rule_sets_partition_the_rules_and_unknown_sets_are_refused() -> None:
    assert not METAL_RULES & EMULATOR_RULES
    with pytest.raises(MetalError, match="rule set must be one of all, metal, emulator"):
        lint_msl(HEADER, "mac")


_INDEX = ("i", "row * N + col", "N - 1", "k * N", "(i + N) % 4", "N")
_READS = (
    "C[{e}] = acc;",
    "C[{e}] += N * 2;",
    "acc += A[{e}] * P[{e}];",
    "acc = N == 3 ? P[0] : float(N);",
    "if (N <= 4 && N != 2 && N >= 1) {{ C[{e}] = *P; }}",
    "acc = *(P + N) + P[{e}];",
    "C[{e}] = -P[N];",
)
_WRITES = (
    "N = {e};",
    "N += 1;",
    "N++;",
    "--N;",
    "P[{e}] = acc;",
    "*P = acc;",
    "*(P + {e}) = acc;",
    "P[{e}] *= 2.0f;",
    "++P[{e}];",
)


@pytest.mark.parametrize("seed", range(20))
def test_reads_of_constant_arguments_pass_and_every_write_is_refused(seed: int) -> None:
    """Random bodies that read `constant uint& N` and `constant float* P` in every position a
    tiled kernel uses them (subscripts, compares, dereferences) are clean; a random write
    through either, at a random statement, is refused on its own line."""
    rng = np.random.default_rng(seed)
    body = [
        "    " + _READS[rng.integers(len(_READS))].format(e=_INDEX[rng.integers(len(_INDEX))])
        for _ in range(8)
    ]
    params = (
        "device float* C [[buffer(1)]], device const float* A [[buffer(2)]], "
        "constant uint& N [[buffer(3)]], constant float* P [[buffer(4)]], "
        "uint i [[thread_position_in_grid]]"
    )
    lead = "    uint row = i, col = i, k = i;\n    float acc = 0.0f;\n"
    clean = _kernel(lead + "\n".join(body), params)
    assert lint_msl(clean) == [], clean
    at = int(rng.integers(len(body) + 1))
    write = _WRITES[rng.integers(len(_WRITES))].format(e=_INDEX[rng.integers(len(_INDEX))])
    body.insert(at, "    " + write)
    dirty = _kernel(lead + "\n".join(body), params)
    problems = [(line, rule) for line, rule, _ in lint_msl(dirty)]
    assert problems == [(6 + at, "constant-is-read-only")], (dirty, problems)


# What a kernel may call is an allow-list: the functions the source defines and Metal's standard
# library. A host function, however it is named, declared or spelled, never reaches the compiler.
HOST_FUNCTION_TRICKS = [
    ("a call the emulator's header declares", "", "    out[i] = float(getppid());", "getppid"),
    ("an extern C declaration", 'extern "C" int getppid();', "    out[i] = 1.0f;", "getppid"),
    ("a declaration in the body", "", "    int getppid();\n    out[i] = 1.0f;", "getppid"),
    ("secure_getenv", "", '    out[i] = secure_getenv("HOME") ? 1.0f : 0.0f;', "secure_getenv"),
    ("strstr", "", '    out[i] = strstr("ab", "b") ? 1.0f : 0.0f;', "strstr"),
    ("the global scope", "", "    out[i] = float(::getpid());", "::getpid"),
    ("a namespace", "", '    out[i] = std::getenv("HOME") ? 1.0f : 0.0f;', "std::getenv"),
    ("Metal's namespace", "", "    out[i] = float(metal::getppid());", "getppid"),
    ("an object-like macro", "#define G getppid", "    out[i] = float(G());", "G"),
    ("a function-like macro", "#define F(x) getppid()", "    out[i] = float(F(1));", "getppid"),
    ("a pasted name", "#define C(a, b) a##b", "    out[i] = float(C(getp, pid)());", "C"),
    (
        "a program-scope initializer",
        "constant int who = getppid();",
        "    out[i] = 1.0f;",
        "getppid",
    ),
]


@pytest.mark.parametrize(
    ("case", "declaration", "body", "name"),
    HOST_FUNCTION_TRICKS,
    ids=[t[0] for t in HOST_FUNCTION_TRICKS],
)
def test_every_function_the_source_does_not_define_and_metal_lacks_is_refused(
    case: str, declaration: str, body: str, name: str
) -> None:
    source = HEADER + declaration + "\n" + _kernel(body)[len(HEADER) :]
    problems = lint_msl(source)
    refused = [p for p in problems if p.rule == "no-host-library-call"]
    assert refused, (case, problems)
    assert any(name in p.message for p in refused), (case, refused)
    with pytest.raises(KernelLintError, match="no-host-library-call"):
        check_msl(source)


def test_names_drawn_at_random_are_refused_and_metals_own_pass() -> None:
    rng = np.random.default_rng(12)
    letters = list("abcdefghijklmnopqrstuvwxyz_")
    for _ in range(50):
        name = "".join(rng.choice(letters, size=int(rng.integers(3, 12))))
        if name in lint_module.METAL_FUNCTIONS or name in {"if", "for", "while", "do"}:
            continue
        source = _kernel(f"    out[i] = float({name}(1.0f));")
        assert any(p.rule == "no-host-library-call" for p in lint_msl(source)), name
    allowed = _kernel(
        "    out[i] = metal::exp(1.0f) + metal::precise::sqrt(2.0f) + fast::exp(1.0f)\n"
        "        + float4(1.0f).x + as_type<float>(1u) + clamp(out[i], 0.0f, 1.0f)\n"
        "        + (float)(i) + select(0.0f, 1.0f, i > 2) + sq(2.0f) + S{1.0f}.v;",
    ).replace(
        "kernel void",
        "inline float sq(float x) { return x * x; }\nstruct S { float v; };\nkernel void",
    )
    assert [p for p in lint_msl(allowed) if p.rule == "no-host-library-call"] == []


def test_the_emulators_metal_functions_are_all_on_metals_list() -> None:
    # Every public function the emulator's header defines in namespace metal is one of
    # Metal's (so the allow-list never refuses what the emulator provides, and the header
    # adds nothing Metal lacks).
    from llmfs.tensor.backends.metal.toolchain import SHIM_DIR

    header = (SHIM_DIR / "metal_stdlib").read_text()
    body = header[header.index("namespace metal {") :]
    defined = set(
        re.findall(
            r"^(?:template <[^>]*>\s*)?(?:inline|static inline)[^(\n]*?\b([a-z]\w*)\s*\(",
            body,
            re.MULTILINE,
        )
    )
    public = {n for n in defined if not n.startswith("llmfs") and not n.startswith("operator")}
    assert public, "no functions found in the header"
    assert public <= lint_module.METAL_FUNCTIONS, sorted(public - lint_module.METAL_FUNCTIONS)
