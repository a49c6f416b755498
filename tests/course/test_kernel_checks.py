"""The checks of chapter 5's kernel exercises: a learner's MSL runs on random cases through
``run_kernel`` and is compared with NumPy; a missing guard, a wrong op, a kernel that ignores the
descriptor and a kernel that hard-codes the visible answers all fail, without a traceback."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from llmfs.course.exercise_checks import (
    CHECKS,
    SPECS,
    check_add_kernel,
    check_relu_kernel,
    check_scale_kernel,
    check_view_offset,
    run_spec,
)
from llmfs.course.exercise_checks.kernels import broadcast_descriptors, descriptor_of
from llmfs.course.exercise_checks.spec import (
    draw_cases,
    expected_outcome,
    outcome_of,
    outcomes_match,
)
from llmfs.tensor import BroadcastError, Tensor
from llmfs.tensor.backends.metal import emulator_available, is_available

# Each case runs a compiled kernel in its own process: seconds per check (scheduled early).
pytestmark = pytest.mark.slow

needs_kernels = pytest.mark.skipif(
    not (emulator_available() or is_available()),
    reason="kernel checks need the Metal emulator's C++ compiler or a Metal device",
)

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"

VIEW_OFFSET = """
inline int view_offset(constant int* view, uint linear) {
    int rank = view[0];
    int offset = view[1];
    int rest = int(linear);
    for (int axis = rank - 1; axis >= 0; --axis) {
        offset += (rest % view[2 + axis]) * view[2 + rank + axis];
        rest /= view[2 + axis];
    }
    return offset;
}
"""

SIGNATURES = {
    "ch05.relu": (
        "relu",
        "device const float* x [[buffer(0)]], device float* out [[buffer(1)]], "
        "constant uint& count [[buffer(2)]]",
    ),
    "ch05.scale": (
        "scale",
        "device const float* x [[buffer(0)]], device float* out [[buffer(1)]], "
        "constant int* view [[buffer(2)]], constant uint& count [[buffer(3)]], "
        "constant float& alpha [[buffer(4)]]",
    ),
    "ch05.broadcast_add": (
        "add",
        "device const float* x [[buffer(0)]], device const float* b [[buffer(1)]], "
        "device float* out [[buffer(2)]], constant int* view_a [[buffer(3)]], "
        "constant int* view_b [[buffer(4)]], constant uint& count [[buffer(5)]]",
    ),
}


def kernel(exercise_id: str, body: str, helpers: str = "") -> str:
    name, parameters = SIGNATURES[exercise_id]
    return (
        f"{HEADER}{helpers}\nkernel void {name}({parameters}, "
        f"uint gid [[thread_position_in_grid]]) {{\n{body}\n}}\n"
    )


GUARD = "    if (gid >= count) { return; }\n"
# NaN fails `x < 0.0f`, so it takes the branch that keeps it, as np.maximum(x, 0) keeps it.
RELU = kernel("ch05.relu", GUARD + "    out[gid] = x[gid] < 0.0f ? 0.0f : x[gid];")
SCALE = kernel(
    "ch05.scale", GUARD + "    out[gid] = alpha * x[view_offset(view, gid)];", VIEW_OFFSET
)
ADD = kernel(
    "ch05.broadcast_add",
    GUARD + "    out[gid] = x[view_offset(view_a, gid)] + b[view_offset(view_b, gid)];",
    VIEW_OFFSET,
)


def view_offset(linear_index: int, descriptor: list[int]) -> int:
    rank, offset = descriptor[0], descriptor[1]
    rest = linear_index
    for axis in reversed(range(rank)):
        offset += (rest % descriptor[2 + axis]) * descriptor[2 + rank + axis]
        rest //= descriptor[2 + axis]
    return offset


@pytest.fixture(autouse=True)
def attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "attempts.jsonl"
    monkeypatch.setenv("LLMFS_ATTEMPTS", str(log))
    return log


def test_the_four_exercises_have_specs_and_checks() -> None:
    for exercise_id in ("ch05.relu", "ch05.view_offset", "ch05.scale", "ch05.broadcast_add"):
        assert exercise_id in SPECS and exercise_id in CHECKS
    assert CHECKS["ch05.relu"] is check_relu_kernel
    assert SPECS["ch05.view_offset"].kernel is None
    assert all(SPECS[i].kernel is not None for i in SIGNATURES)


def test_every_case_is_plain_json_and_launches_extra_threads_now_and_then() -> None:
    for exercise_id in SIGNATURES:
        spec = SPECS[exercise_id]
        for seed in (0, 1):
            cases = draw_cases(spec, seed)
            # NaN and the infinities travel as JSON's NaN/Infinity (what the grader's channel
            # allows); NaN != NaN, so the round trip is compared as text.
            text = json.dumps(cases)
            assert json.dumps(json.loads(text)) == text == json.dumps([list(c) for c in cases])
            counts = [len(expected_outcome(spec, case)["value"]) for case in cases]
            extra = [case for case, count in zip(cases, counts) if case[-1] > count]
            assert extra, f"{exercise_id} seed {seed} never launches more threads than values"


def test_the_descriptor_is_the_librarys() -> None:
    base = Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22], dtype="float32")
    sliced = base.view().slice(1, 1, 3)
    assert descriptor_of(sliced.shape, sliced.strides, sliced.base_offset) == [2, 1, 2, 2, 3, 1]
    assert broadcast_descriptors([2, 3], [3]) == ([2, 3], [2, 0, 2, 3, 3, 1], [2, 0, 2, 3, 0, 1])
    with pytest.raises(BroadcastError):
        broadcast_descriptors([2, 3], [2])


def test_view_offset_right_passes_and_ignoring_a_stride_fails() -> None:
    assert check_view_offset(view_offset, record_attempt=False).passed
    assert check_view_offset(view_offset, seed=3, record_attempt=False).passed

    def row_major(linear_index: int, descriptor: list[int]) -> int:
        return descriptor[1] + linear_index  # reads every view as if it were contiguous

    report = check_view_offset(row_major, record_attempt=False)
    assert report.status == "failed"
    assert "view_offset(" in repr(report)


@needs_kernels
def test_right_kernels_pass_as_a_function_or_as_the_source_text(attempts: Path) -> None:
    assert check_relu_kernel(lambda: RELU).passed
    assert check_relu_kernel(RELU, seed=4, record_attempt=False).passed
    assert check_scale_kernel(lambda: SCALE, record_attempt=False).passed
    assert check_add_kernel(lambda: ADD, record_attempt=False).passed
    assert attempts.read_text(encoding="utf-8").count("ch05.relu") == 1


@needs_kernels
def test_a_stub_is_not_implemented() -> None:
    def stub() -> str:
        raise NotImplementedError

    for check in (check_relu_kernel, check_scale_kernel, check_add_kernel):
        report = check(stub, record_attempt=False)
        assert report.status == "not implemented"
    assert check_relu_kernel(None, record_attempt=False).status == "not implemented"


@needs_kernels
def test_a_missing_guard_is_a_memory_error_not_a_crash() -> None:
    unguarded = RELU.replace(GUARD, "")
    report = check_relu_kernel(unguarded, record_attempt=False)
    assert report.status == "failed"
    assert "raised KernelMemoryError: " in repr(report)
    # Cases launched with exactly one thread per value still pass: only the strays fail.
    spec = SPECS["ch05.relu"]
    exact = next(c for c in draw_cases(spec) if c[-1] == len(c[0]))
    assert outcome_of(unguarded, exact, spec) == expected_outcome(spec, exact)


@needs_kernels
def test_wrong_kernels_fail_with_the_reason() -> None:
    ignores_view = kernel("ch05.scale", GUARD + "    out[gid] = alpha * x[gid];")
    assert check_scale_kernel(ignores_view, record_attempt=False).status == "failed"
    no_broadcast = kernel("ch05.broadcast_add", GUARD + "    out[gid] = x[gid] + b[gid];")
    report = check_add_kernel(no_broadcast, record_attempt=False)
    assert report.status == "failed"
    clamps = kernel("ch05.relu", GUARD + "    out[gid] = x[gid] > 1.0f ? x[gid] : 0.0f;")
    assert check_relu_kernel(clamps, record_attempt=False).status == "failed"
    broken = "#include <metal_stdlib>\nkernel void relu(device float* x [[buffer(0)]]) { oops }\n"
    report = check_relu_kernel(broken, record_attempt=False)
    assert report.status == "failed"
    text = repr(report)
    assert "raised KernelCompileError: " in text or "raised KernelLintError: " in text
    misnamed = RELU.replace("kernel void relu(", "kernel void my_relu(")
    assert "raised KernelNotFoundError: " in repr(check_relu_kernel(misnamed, record_attempt=False))


@needs_kernels
@pytest.mark.parametrize(
    "body",
    [
        "    out[gid] = x[gid] > 0.0f ? x[gid] : 0.0f;",
        "    out[gid] = max(x[gid], 0.0f);",
        "    out[gid] = fmax(x[gid], 0.0f);",
    ],
    ids=["comparison keeps only positives", "max", "fmax"],
)
def test_a_relu_that_turns_nan_into_0_fails_and_the_report_says_why(body: str) -> None:
    report = check_relu_kernel(kernel("ch05.relu", GUARD + body), record_attempt=False)
    assert report.status == "failed"
    text = " ".join(repr(report).split())  # the explanation is wrapped to the output's width
    assert "relu keeps NaN" in text and "np.maximum(x, 0)" in text and "torch.relu" in text
    # The rule, not the answer: the explanation holds no expected value.
    why = text[text.index("relu keeps NaN") :]
    assert "[0" not in why


def test_every_relu_draw_holds_nan_and_the_reference_keeps_it() -> None:
    spec = SPECS["ch05.relu"]
    for seed in (0, 1, 2, 3):
        cases = draw_cases(spec, seed=seed)
        with_nan = [c for c in cases if any(math.isnan(v) for v in c[0])]
        assert with_nan, seed
        for case in with_nan:
            got = expected_outcome(spec, case)["value"]
            assert [math.isnan(v) for v in got] == [math.isnan(v) for v in case[0]]


def _msl_float(value: float) -> str:
    # NaN and the infinities have no literal: MSL's macros spell them.
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    return f"{float(value)!r}f"


def _table_kernel(exercise_id: str) -> str:
    """A kernel that hard-codes the visible answers: it recognises a visible case by its count
    and first stored value and writes that case's expected values."""
    spec = SPECS[exercise_id]
    branches = []
    for case in draw_cases(spec):
        values = expected_outcome(spec, case)["value"]
        if not case[0]:
            continue  # no values: nothing to write, the guard alone answers it
        first = case[0][0]
        writes = " ".join(
            f"if (gid == {k}u) out[{k}] = {_msl_float(v)};" for k, v in enumerate(values)
        )
        test = f"count == {len(values)}u && x[0] == {_msl_float(first)}"
        branches.append(f"    if ({test}) {{ {writes} }}")
    return kernel(exercise_id, GUARD + "\n".join(branches))


@needs_kernels
@pytest.mark.parametrize("exercise_id", sorted(SIGNATURES))
def test_a_kernel_hard_coding_the_visible_answers_fails_the_graders_seeds(
    exercise_id: str,
) -> None:
    spec = SPECS[exercise_id]
    table = _table_kernel(exercise_id)
    assert run_spec(spec, table, record_attempt=False).status in ("passed", "failed")
    for seed in (1, 2):
        assert not run_spec(spec, table, seed=seed, record_attempt=False).passed


def _worker_replies(
    tmp_path: Path, source: str, cases: list[list[object]], compile_timeout: float
) -> list[dict[str, object]]:
    """The replies of the grader's worker (unsandboxed, a cold kernel cache) to one definition
    of ``relu_kernel`` in ``source`` and its ``cases``."""
    import io
    import subprocess
    import sys

    from llmfs.course.grading.channel import encode, read_frame

    setup = {"memory_mb": 2048, "cpu_seconds": 300, "file_mb": 64, "case_timeout": 10.0}
    define = {"exercise": "ch05.relu", "source": source, "function": "relu_kernel"}
    requests = [
        {"setup": {**setup, "compile_timeout": compile_timeout}, "id": 0},
        {"define": define, "id": 1},
        *({"case": case, "id": 2 + n} for n, case in enumerate(cases)),
    ]
    env = {**os.environ, "LLMFS_CACHE_DIR": str(tmp_path / f"cold-cache-{compile_timeout}")}
    result = subprocess.run(
        [sys.executable, "-m", "llmfs.course.grading.worker"],
        input=b"".join(encode(r) for r in requests),
        capture_output=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    stream = io.BytesIO(result.stdout)
    replies = []
    while (reply := read_frame(stream)) is not None:
        assert reply.pop("id") == len(replies)
        replies.append(reply)
    return replies


@needs_kernels
def test_the_graders_worker_compiles_a_kernel_under_its_own_limit_before_timing_its_cases(
    tmp_path: Path,
) -> None:
    # The compile has a limit of its own, whatever the case limit: the cases are timed from a
    # warm cache (so a loaded machine's slow compile never times a case out), and a compile
    # that overruns the compile limit is a load error, never a case's timeout.
    source = f"def relu_kernel():\n    return {RELU!r}\n"
    cases = [list(case) for case in draw_cases(SPECS["ch05.relu"], 7, 3)]
    spec = SPECS["ch05.relu"]
    replies = _worker_replies(tmp_path, source, cases, compile_timeout=600.0)
    assert replies[:2] == [{"ready": True}, {"defined": True}]
    expected = [expected_outcome(spec, tuple(case)) for case in cases]
    assert len(replies) == 2 + len(cases)
    assert all(map(outcomes_match, replies[2:], expected))  # NaN != NaN: compared as outcomes
    # No compile of a cold cache fits in a millisecond: the compile's own limit is what stops it.
    stopped = _worker_replies(tmp_path, source, cases, compile_timeout=0.001)
    assert stopped[1] == {"load_error": "defining the function raised CaseTimeout"}
