"""The emulator as a learner meets it: run_kernel on their own MSL, threadgroups and barriers,
clear errors, AddressSanitizer, the build cache, and float16 without a native half type."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from llmfs.tensor.backends.metal import emulator as emu
from llmfs.tensor.backends.metal import (
    emulator_available,
    gpu_ops,
    kernel_source,
    run_kernel,
    toolchain,
)
from llmfs.tensor.backends.metal.errors import (
    KernelArgumentError,
    KernelCompileError,
    KernelLaunchError,
    KernelLintError,
    KernelMemoryError,
    KernelNotFoundError,
    MetalError,
    MetalUnavailableError,
)
from llmfs.tensor.errors import TensorError
from tests.requirements import require_tool

pytestmark = pytest.mark.skipif(not emulator_available(), reason="the Metal emulator needs clang++")

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"

RELU = (
    HEADER
    + """
kernel void relu(device const float* in [[buffer(0)]],
                 device float* out [[buffer(1)]],
                 uint id [[thread_position_in_grid]]) {
    float val = in[id];
    out[id] = fmax(val, 0.0f);
}
"""
)


def test_the_seed_relu_kernel_runs_unchanged() -> None:
    values = np.array([-2.0, -0.5, 0.0, 1.5, 3.0], dtype=np.float32)
    out = np.zeros_like(values)
    run_kernel(RELU, "relu", [values, out], values.size, backend="metal-emulator")
    np.testing.assert_array_equal(out, np.maximum(values, 0))


def test_fast_and_precise_math_namespaces_run_in_the_emulator() -> None:
    source = HEADER + (
        "kernel void k(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],\n"
        "              uint i [[thread_position_in_grid]]) {\n"
        "    out[i] = fast::exp(in[i]) + precise::sqrt(in[i]) + metal::fast::tanh(in[i])\n"
        "             + metal::precise::pow(in[i], 2.0f) + fast::max(in[i], 0.5f);\n"
        "}\n"
    )
    values = np.array([0.25, 1.0, 4.0], dtype=np.float32)
    out = np.zeros_like(values)
    run_kernel(source, "k", [values, out], 3, backend="metal-emulator")
    reference = np.exp(values) + np.sqrt(values) + np.tanh(values) + values**2
    np.testing.assert_allclose(out, reference + np.maximum(values, 0.5), rtol=1e-6)


GRID_IDS = (
    HEADER
    + """
kernel void ids(device uint* out [[buffer(0)]],
                constant uint& width [[buffer(1)]],
                uint2 pos [[thread_position_in_grid]],
                uint2 local [[thread_position_in_threadgroup]],
                uint2 group [[threadgroup_position_in_grid]],
                uint2 size [[threads_per_threadgroup]]) {
    uint at = (pos.y * width + pos.x) * 4;
    out[at + 0] = local.x + 100 * local.y;
    out[at + 1] = group.x + 100 * group.y;
    out[at + 2] = size.x + 100 * size.y;
    out[at + 3] = 1;
}
"""
)


def test_grid_is_walked_like_dispatch_threads_with_partial_edge_groups() -> None:
    width, height = 7, 5
    out = np.zeros((height, width, 4), dtype=np.uint32)
    run_kernel(GRID_IDS, "ids", [out, np.uint32(width)], (width, height), (4, 2))
    assert (out[..., 3] == 1).all()  # every grid position ran exactly where it belongs
    ys, xs = np.mgrid[0:height, 0:width]
    np.testing.assert_array_equal(out[..., 0], xs % 4 + 100 * (ys % 2))
    np.testing.assert_array_equal(out[..., 1], xs // 4 + 100 * (ys // 2))
    # edge groups are partial: 3 threads wide at x >= 4, 1 thread tall at y == 4
    np.testing.assert_array_equal(
        out[..., 2], np.where(xs >= 4, 3, 4) + 100 * np.where(ys == 4, 1, 2)
    )


BLOCK_SUM = (
    HEADER
    + """
kernel void block_sum(device const float* x [[buffer(0)]],
                      device float* out [[buffer(1)]],
                      uint gid [[thread_position_in_grid]],
                      uint lid [[thread_position_in_threadgroup]],
                      uint group [[threadgroup_position_in_grid]],
                      uint size [[threads_per_threadgroup]]) {
    threadgroup float tile[64];
    tile[lid] = x[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    // the first thread adds what every thread of its group stored: only right after a barrier
    if (lid == 0) {
        float total = 0.0f;
        for (uint i = 0; i < size; ++i) {
            total += tile[i];
        }
        out[group] = total;
    }
}
"""
)


def test_threadgroup_memory_and_barriers_run_the_threads_of_a_group_as_fibers() -> None:
    values = np.arange(200, dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)
    run_kernel(BLOCK_SUM, "block_sum", [values, out], 200, 64)
    expected = [values[i * 64 : (i + 1) * 64].sum() for i in range(4)]  # last group: 8 threads
    np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))


def test_barrier_kernels_are_detected_and_others_run_serially() -> None:
    block = emu.find_kernels(BLOCK_SUM)[0]
    relu = emu.find_kernels(RELU)[0]
    assert emu.uses_barrier(BLOCK_SUM, block)
    assert not emu.uses_barrier(RELU, relu)


def test_argument_errors_name_the_parameter() -> None:
    values = np.ones(4, dtype=np.float32)
    with pytest.raises(KernelArgumentError, match=r"buffer 1 \(device float\* out\) is not bound"):
        run_kernel(RELU, "relu", [values], 4)
    with pytest.raises(KernelArgumentError, match=r"holds float .* float64"):
        run_kernel(RELU, "relu", [values, np.zeros(4)], 4)
    read_only = np.zeros(4, dtype=np.float32)
    read_only.flags.writeable = False
    with pytest.raises(KernelArgumentError, match="may be written by the kernel but is read-only"):
        run_kernel(RELU, "relu", [values, read_only], 4)
    with pytest.raises(KernelArgumentError, match="C-contiguous"):
        run_kernel(RELU, "relu", [values, np.zeros(8, np.float32)[::2]], 4)
    with pytest.raises(KernelArgumentError, match="at most 1024"):
        run_kernel(RELU, "relu", [values, np.zeros(4, np.float32)], 4, (2048,))
    with pytest.raises(KernelArgumentError, match="numpy array or numpy scalar"):
        run_kernel(RELU, "relu", [values, [0.0] * 4], 4)
    with pytest.raises(KernelNotFoundError, match="kernels defined: relu"):
        run_kernel(RELU, "gelu", [values, values.copy()], 4)


def test_compile_errors_carry_the_compiler_text_and_lint_runs_first() -> None:
    broken = HEADER + (
        "kernel void k(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n"
        "    out[i] = undefined_name;\n"
        "}\n"
    )
    with pytest.raises(KernelCompileError, match="undefined_name"):
        run_kernel(broken, "k", [np.zeros(1, np.float32)], 1)
    with pytest.raises(KernelLintError, match="double"):
        run_kernel(broken.replace("float*", "double*"), "k", [np.zeros(1)], 1)


UNGUARDED = (
    HEADER
    + """
kernel void twice(device const float* x [[buffer(0)]],
                  device float* y [[buffer(1)]],
                  uint gid [[thread_position_in_grid]]) {
    y[gid] = 2.0f * x[gid];  // BUG: no bounds guard
}
"""
)
GUARDED = (
    HEADER
    + """
kernel void twice(device const float* x [[buffer(0)]],
                  device float* y [[buffer(1)]],
                  constant uint& count [[buffer(2)]],
                  uint gid [[thread_position_in_grid]]) {
    if (gid >= count) {
        return;
    }
    y[gid] = 2.0f * x[gid];
}
"""
)


@pytest.mark.skipif(
    not toolchain.sanitizer_available(), reason="AddressSanitizer is not available here"
)
def test_address_sanitizer_reports_a_missing_bounds_guard() -> None:
    values = np.arange(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    # 16 threads over 10 elements, as when a grid is rounded up to whole threadgroups
    with pytest.raises(KernelMemoryError, match="heap-buffer-overflow") as caught:
        run_kernel(UNGUARDED, "twice", [values, out], 16, sanitize=True)
    assert "AddressSanitizer" in caught.value.report
    assert caught.value.kernel == "twice"

    run_kernel(GUARDED, "twice", [values, out, np.uint32(10)], 16, sanitize=True)
    np.testing.assert_array_equal(out, 2 * values)  # results come back from the subprocess


SHIFTED = (
    HEADER
    + """
kernel void shifted(device float* y [[buffer(0)]],
                    constant int& shift [[buffer(1)]],
                    uint gid [[thread_position_in_grid]]) {
    y[int(gid) + shift] = 1.0f;  // BUG: writes wherever shift points
}
"""
)


def test_a_learners_kernel_cannot_corrupt_the_process_by_default() -> None:
    values = np.arange(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    with pytest.raises(KernelMemoryError, match="'twice'") as caught:
        run_kernel(UNGUARDED, "twice", [values, out], 16, backend="metal-emulator")
    assert caught.value.kernel == "twice"
    np.testing.assert_array_equal(out, np.zeros(10))  # nothing comes back from a failed launch
    for shift in (100, -100, 10, -1, 100_000):
        target = np.zeros(4, dtype=np.float32)
        with pytest.raises(KernelMemoryError, match="'shifted'"):
            run_kernel(SHIFTED, "shifted", [target, np.int32(shift)], 4, backend="metal-emulator")
    run_kernel(GUARDED, "twice", [values, out, np.uint32(10)], 16, backend="metal-emulator")
    np.testing.assert_array_equal(out, 2 * values)


@pytest.mark.parametrize("sanitized", [True, False], ids=["asan", "guarded"])
def test_a_memory_error_names_the_first_thread_that_stepped_outside(
    sanitized: bool, monkeypatch
) -> None:
    if sanitized and not toolchain.sanitizer_available():
        pytest.skip("AddressSanitizer is not available here")
    monkeypatch.setattr(emu, "isolation_mode", lambda: "asan" if sanitized else "guarded")
    values = np.arange(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    # Threads 10 to 15 have no value; in grid order thread 10 is the first to step outside.
    with pytest.raises(KernelMemoryError, match=r"in thread_position_in_grid \[10, 0, 0\]") as c:
        run_kernel(UNGUARDED, "twice", [values, out], 16, backend="metal-emulator")
    assert c.value.thread == (10, 0, 0)
    # Shuffled, the first stray thread to run is one of 10 to 15, whichever the order says.
    with pytest.raises(KernelMemoryError) as c:
        run_kernel(UNGUARDED, "twice", [values, out], 16, backend="metal-emulator", shuffle=3)
    assert c.value.thread is not None and 10 <= c.value.thread[0] <= 15
    assert c.value.thread[1:] == (0, 0)


STRAY = HEADER + "".join(
    f"""
kernel void stray_{name}(device {name}* data [[buffer(0)]],
                         device {name}* out [[buffer(1)]],
                         constant int& shift [[buffer(2)]],
                         constant int& write [[buffer(3)]],
                         uint gid [[thread_position_in_grid]]) {{
    int at = int(gid) + shift;  // BUG: no bounds guard
    if (write != 0) {{
        data[at] = out[gid];
    }} else {{
        out[gid] = data[at];
    }}
}}
"""
    for name in ("float", "uchar")
)


@pytest.mark.parametrize("mode", emu.ISOLATION_MODES)
def test_every_isolation_mode_that_runs_here_reports_each_stray_access(mode, monkeypatch) -> None:
    # A mode the platform can run must catch reads and writes through device pointers past
    # either end of buffers of any size; if it cannot, its probe fails and so does this test
    # (AddressSanitizer skipping address-space accesses passed a build that checked nothing).
    if mode == "asan" and not toolchain.sanitizer_available():
        # CI installs clang with its sanitizer runtime, as a learner does: there this fails.
        require_tool("AddressSanitizer cannot build and run executables here")
    assert emu.isolation_check(mode) == ""
    monkeypatch.setattr(emu, "isolation_mode", lambda: mode)
    rng = np.random.default_rng(36)
    for case in range(8):
        dtype = (np.float32, np.uint8)[case % 2]
        n = int(rng.integers(1, 3000))
        step = int(rng.integers(1, 24))
        shift = step if case % 4 < 2 else -step  # past the end, or before the start
        write = int(rng.integers(0, 2))
        data = rng.integers(0, 100, n).astype(dtype)
        out = np.full(n, 9, dtype=dtype)
        name = f"stray_{'float' if dtype == np.float32 else 'uchar'}"
        args = [data, out, np.int32(shift), np.int32(write)]
        what = f"{n} elements of {np.dtype(dtype)}, shift {shift}, write {write}"
        with pytest.raises(KernelMemoryError, match=f"'{name}'") as caught:
            run_kernel(STRAY, name, args, n, backend="metal-emulator")
        # In grid order the first thread outside is n - shift past the end, 0 before the start.
        first = max(n - shift, 0) if shift > 0 else 0
        assert caught.value.thread == (first, 0, 0), what
        np.testing.assert_array_equal(out, 9)  # nothing comes back from a failed launch
        run_kernel(STRAY, name, [data, out, np.int32(0), np.int32(write)], n,
                   backend="metal-emulator")  # fmt: skip
        np.testing.assert_array_equal(out if write == 0 else data, data if write == 0 else out)


def without_a_sanitizer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes this process behave as where AddressSanitizer cannot be trusted."""
    real = emu.isolation_check
    monkeypatch.setattr(
        emu, "isolation_check", lambda mode: "no runtime" if mode == "asan" else real(mode)
    )


def test_without_a_sanitizer_the_default_uses_guarded_buffers(monkeypatch) -> None:
    without_a_sanitizer(monkeypatch)
    assert emu.isolation_mode() == "guarded"
    values = np.arange(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    with pytest.raises(KernelMemoryError, match="'twice'") as caught:
        run_kernel(UNGUARDED, "twice", [values, out], 16, backend="metal-emulator")
    assert "LLMFS-GUARD" in caught.value.report and "buffer" in caught.value.summary
    # One element past the end, far past it, and just before the start.
    for shift in (1, 100, 100_000, -1, -100):
        target = np.zeros(4, dtype=np.float32)
        with pytest.raises(KernelMemoryError, match="'shifted'") as caught:
            run_kernel(SHIFTED, "shifted", [target, np.int32(shift)], 4, backend="metal-emulator")
        assert "LLMFS-GUARD" in caught.value.report
    run_kernel(GUARDED, "twice", [values, out, np.uint32(10)], 16, backend="metal-emulator")
    np.testing.assert_array_equal(out, 2 * values)
    with pytest.raises(MetalUnavailableError, match="AddressSanitizer"):
        run_kernel(GUARDED, "twice", [values, out, np.uint32(10)], 16, sanitize=True)


def test_sanitize_false_is_the_fast_unchecked_in_process_path(monkeypatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("sanitize=False must not start a subprocess")

    monkeypatch.setattr(emu.EmulatorLibrary, "run_isolated", refuse)
    values = np.arange(10, dtype=np.float32)
    out = np.zeros(10, dtype=np.float32)
    run_kernel(
        GUARDED, "twice", [values, out, np.uint32(10)], 16, backend="metal-emulator", sanitize=False
    )
    np.testing.assert_array_equal(out, 2 * values)


def test_builds_go_to_the_cache_folder_never_the_source_tree(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LLMFS_CACHE_DIR", str(tmp_path))
    source = RELU + "// cache location probe\n"
    library = emu.EmulatorLibrary(source)
    assert library.kernels.keys() == {"relu"}
    builds = list((tmp_path / "msl").glob("*.so"))
    assert len(builds) == 1
    package = Path(emu.__file__).parent
    assert not list(package.rglob("*.so")) and not list(package.rglob("*.cpp"))
    # the same source again is found by its hash: no second build
    emu.EmulatorLibrary(source)
    assert list((tmp_path / "msl").glob("*.so")) == builds


def test_no_compiler_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setenv("LLMFS_CXX", "llmfs-no-such-compiler")
    toolchain.find_compiler.cache_clear()
    try:
        with pytest.raises(MetalUnavailableError, match="apt-get install clang"):
            toolchain.find_compiler()
    finally:
        monkeypatch.delenv("LLMFS_CXX")
        toolchain.find_compiler.cache_clear()


def test_float16_runs_even_without_a_native_half_type(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LLMFS_CACHE_DIR", str(tmp_path))
    software = dataclasses.replace(toolchain.find_compiler(), native_half=False)
    monkeypatch.setattr(toolchain, "find_compiler", lambda: software)
    source = kernel_source("exp") + "// software half\n"
    library = emu.EmulatorLibrary(source)
    values = np.array([-1.0, 0.0, 0.5, 3.0, 11.5, -20.0, 6e-5], dtype=np.float16)
    out = np.zeros_like(values)
    view = np.array([1, 0, values.size, 1], dtype=np.int32)
    library.run("unary_f16", [values, out, view, np.uint32(values.size), np.int32(3)], values.size)
    with np.errstate(over="ignore"):  # exp(11.5) is beyond float16: inf on both sides
        expected = np.exp(values.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(out, expected)


def test_kernel_source_and_gpu_ops() -> None:
    text = kernel_source("materialize")
    assert text.startswith("// common.metal") and "#include <metal_stdlib>" in text
    assert "kernel void strided_copy_f32" in text and "kernel void strided_copy_f16" in text
    assert "kernel void matmul_f32" in kernel_source("matmul")
    assert {"materialize", "add", "scale", "sum", "max", "matmul", "relu"} <= set(gpu_ops())
    with pytest.raises(MetalError, match="runs on the numpy backend"):
        kernel_source("einsum")


# ------------------------------------------------------------------------------------------------
# What a GPU does not promise, the emulator does not give
# ------------------------------------------------------------------------------------------------

PEEK = (
    HEADER
    + """
kernel void peek(device float* out [[buffer(0)]],
                 constant uint& write [[buffer(1)]],
                 uint gid [[thread_position_in_grid]],
                 uint lid [[thread_position_in_threadgroup]]) {
    threadgroup float tile[32];
    if (write != 0) {
        tile[lid] = 7.0f;
    }
    out[gid] = tile[lid];
}
"""
)


@pytest.mark.parametrize("sanitize", [False, None], ids=["in-process", "isolated"])
def test_threadgroup_memory_is_junk_on_every_launch(sanitize) -> None:
    """A GPU leaves threadgroup memory uninitialised: reading it before writing gives junk
    (NaN here) on the first launch and on every later one, never zeros or stale values."""
    out = np.zeros(64, dtype=np.float32)
    run_kernel(PEEK, "peek", [out, np.uint32(0)], 64, (32,), sanitize=sanitize)
    assert np.isnan(out).all()
    run_kernel(PEEK, "peek", [out, np.uint32(1)], 64, (32,), sanitize=sanitize)
    np.testing.assert_array_equal(out, np.full(64, 7.0, np.float32))
    run_kernel(PEEK, "peek", [out, np.uint32(0)], 64, (32,), sanitize=sanitize)
    assert np.isnan(out).all()  # not the previous launch's 7s


def test_threadgroup_variables_become_per_group_blocks_keeping_lines() -> None:
    kernel = emu.find_kernels(BLOCK_SUM)[0]
    rewritten = emu.with_threadgroup_memory(BLOCK_SUM, [kernel])
    assert "auto& tile = *llmfs_threadgroup<float[64]>(0);" in rewritten
    assert rewritten.count("\n") == BLOCK_SUM.count("\n")


CHAIN = (
    HEADER
    + """
kernel void chain(device int* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    if (i > 0) {
        o[i] = o[i - 1] + 1;  // a race: reads what another thread may not have written yet
    }
}
"""
)


def test_a_shuffled_order_exposes_a_race_that_grid_order_hides() -> None:
    def run(shuffle: int | None) -> np.ndarray:
        out = np.zeros(1000, dtype=np.int32)
        run_kernel(CHAIN, "chain", [out], 1000, shuffle=shuffle, sanitize=False)
        return out

    np.testing.assert_array_equal(run(None), np.arange(1000))  # serial, in order: looks right
    shuffled = run(7)
    assert not np.array_equal(shuffled, np.arange(1000))
    np.testing.assert_array_equal(run(7), shuffled)  # the same seed, the same order
    assert not np.array_equal(run(8), shuffled)


EARLY_RETURN = (
    HEADER
    + """
kernel void early(device float* out [[buffer(0)]],
                  uint gid [[thread_position_in_grid]],
                  uint lid [[thread_position_in_threadgroup]]) {
    threadgroup float tile[64];
    if (lid == 0) {
        return;  // thread 0 never reaches the barrier the others wait at
    }
    tile[lid] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = tile[lid];
}
"""
)


@pytest.mark.parametrize("sanitize", [False, None], ids=["in-process", "isolated"])
def test_an_early_return_before_a_barrier_fails_the_launch_instead_of_hanging(sanitize) -> None:
    import time

    out = np.zeros(128, dtype=np.float32)
    started = time.monotonic()
    with pytest.raises(KernelLaunchError, match="did not all reach threadgroup_barrier"):
        run_kernel(EARLY_RETURN, "early", [out], 128, (64,), sanitize=sanitize)
    assert time.monotonic() - started < 20  # compile included; the detection itself is immediate


SPIN = (
    HEADER
    + """
kernel void spin(device volatile uint* flag [[buffer(0)]], uint i [[thread_position_in_grid]]) {
    while (flag[0] == 0u) {
    }
}
"""
)


def test_the_isolated_launch_stops_at_its_timeout() -> None:
    import time

    started = time.monotonic()
    with pytest.raises(KernelLaunchError, match="ran past its 1 s timeout"):
        run_kernel(SPIN, "spin", [np.zeros(1, np.uint32)], 1, timeout=1)
    assert time.monotonic() - started < 20
    assert emu.DEFAULT_TIMEOUT_S == 30.0
    with pytest.raises(KernelArgumentError, match="timeout must be a positive number"):
        run_kernel(SPIN, "spin", [np.ones(1, np.uint32)], 1, timeout=0)


def test_a_buffers_dtype_must_be_the_parameters_element_type() -> None:
    ints = np.arange(4, dtype=np.int32)  # same size as float, not the same type
    with pytest.raises(
        KernelArgumentError, match=r"holds float \(float32\) but the array is int32"
    ):
        run_kernel(RELU, "relu", [ints, np.zeros(4, np.float32)], 4)
    with pytest.raises(KernelArgumentError, match=r"holds uint \(uint32\) but the array is int32"):
        run_kernel(PEEK, "peek", [np.zeros(32, np.float32), np.int32(1)], 32)


BAD_CALLS = [
    ("source None", lambda: run_kernel(None, "relu", [], 4), "source must be the kernel's MSL"),
    ("name None", lambda: run_kernel(RELU, None, [], 4), "name must be the kernel function's"),
    ("buffers None", lambda: run_kernel(RELU, "relu", None, 4), "buffers is None"),
    (
        "buffers keyed by name",
        lambda: run_kernel(RELU, "relu", {"a": np.zeros(4, np.float32)}, 4),
        "buffer keys are \\[\\[buffer\\(n\\)\\]\\] indices",
    ),
    (
        "a buffer the kernel does not declare",
        lambda: run_kernel(RELU, "relu", {0: np.zeros(4, np.float32), 5: np.zeros(4)}, 4),
        "buffer 5 is bound but the kernel declares no",
    ),
    (
        "missing buffer",
        lambda: run_kernel(RELU, "relu", {0: np.zeros(4, np.float32)}, 4),
        "buffer 1 .* is not bound",
    ),
    (
        "buffers a string",
        lambda: run_kernel(RELU, "relu", "ab", 4),
        "buffers must be a list of numpy arrays",
    ),
    ("grid None", lambda: run_kernel(RELU, "relu", [np.zeros(4, np.float32)] * 2, None), "grid"),
    (
        "shuffle not an int",
        lambda: run_kernel(RELU, "relu", [np.zeros(4, np.float32)] * 2, 4, shuffle="yes"),
        "shuffle must be None or an int seed",
    ),
]


@pytest.mark.parametrize(
    ("call", "message"), [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS]
)
def test_bad_run_kernel_calls_are_clear_tensor_errors(call, message) -> None:
    with pytest.raises(KernelArgumentError, match=message) as caught:
        call()
    assert isinstance(caught.value, TensorError)


def test_shuffled_order_is_the_same_in_process_and_isolated() -> None:
    outs = []
    for sanitize in (False, None):
        out = np.zeros(1000, dtype=np.int32)
        run_kernel(CHAIN, "chain", [out], 1000, shuffle=11, sanitize=sanitize)
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    assert not np.array_equal(outs[0], np.arange(1000))


@pytest.mark.parametrize("sanitize", [False, None], ids=["in-process", "isolated"])
def test_a_correct_barrier_kernel_gives_the_same_result_in_any_order(sanitize) -> None:
    values = np.arange(200, dtype=np.float32)
    expected = [values[i * 64 : (i + 1) * 64].sum() for i in range(4)]
    for shuffle in (None, 1, 2):
        out = np.zeros(4, dtype=np.float32)
        run_kernel(BLOCK_SUM, "block_sum", [values, out], 200, 64, shuffle=shuffle,
                   sanitize=sanitize)  # fmt: skip
        np.testing.assert_array_equal(out, np.array(expected, dtype=np.float32))


# -- counted launches: what a kernel reads, by its load instructions ----------------------------

_COUNTED = """
#include <metal_stdlib>
using namespace metal;

kernel void gather(device const float* x [[buffer(0)]],
                   device float* out [[buffer(1)]],
                   constant uint& reads [[buffer(2)]],
                   uint gid [[thread_position_in_grid]]) {
    float total = 0.0f;
    for (uint k = 0; k < reads; ++k) {
        total += x[(gid + k) % 16];
    }
    out[gid] = total;
}

kernel void tree(device const float* x [[buffer(0)]],
                 device float* out [[buffer(1)]],
                 threadgroup float* shared [[threadgroup(0)]],
                 uint lid [[thread_position_in_threadgroup]],
                 uint size [[threads_per_threadgroup]]) {
    shared[lid] = x[lid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint stride = size / 2; stride > 0; stride /= 2) {
        if (lid < stride) {
            shared[lid] += shared[lid + stride];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (lid == 0) {
        out[0] = shared[0];
    }
}

kernel void serial(device const float* x [[buffer(0)]],
                   device float* out [[buffer(1)]],
                   threadgroup float* shared [[threadgroup(0)]],
                   uint lid [[thread_position_in_threadgroup]],
                   uint size [[threads_per_threadgroup]]) {
    shared[lid] = x[lid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid == 0) {
        float total = 0.0f;
        for (uint i = 0; i < size; ++i) {
            total += shared[i];
        }
        out[0] = total;
    }
}
"""


@pytest.mark.parametrize("reads", [0, 1, 5, 16])
def test_a_counted_launch_counts_the_bytes_each_buffer_gave(reads: int) -> None:
    library = emu.load_library(_COUNTED)
    x = np.arange(16, dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    counts = library.count_accesses("gather", [x, out, np.uint32(reads)], 8, (8, 1, 1))
    # Eight threads, `reads` floats each; the result is written back as with run().
    assert counts.bytes_read[0] == 8 * reads * 4 and counts.values_read(0) == 8 * reads
    assert counts.bytes_read[1] == 0 and counts.barrier_rounds == 0
    assert out[1] == sum(x[(1 + k) % 16] for k in range(reads))


@pytest.mark.parametrize("group", [4, 16, 64])
def test_a_counted_launch_counts_barrier_rounds_and_each_threads_reads(group: int) -> None:
    library = emu.load_library(_COUNTED)
    x = np.arange(group, dtype=np.float32)
    halvings = group.bit_length() - 1
    for name, rounds, words in (("tree", halvings + 1, halvings + 1), ("serial", 1, group)):
        out = np.zeros(1, dtype=np.float32)
        counts = library.count_accesses(
            name, [x, out], group, (group, 1, 1), threadgroup_memory={0: 4 * group}
        )
        assert (counts.barrier_rounds, counts.threadgroup_words) == (rounds, words), name
        assert out[0] == x.sum()


def test_a_counted_launch_still_fences_every_buffer() -> None:
    library = emu.load_library(_COUNTED)
    x = np.arange(4, dtype=np.float32)  # gather reads up to x[15]
    with pytest.raises(KernelMemoryError):
        library.count_accesses("gather", [x, np.zeros(8, np.float32), np.uint32(16)], 8, (8, 1, 1))
