"""Every shipped kernel, run by the emulator, matches numpy on random layouts.

Layouts cover contiguous, transposed, stepped, flipped (negative strides), broadcast (zero
strides), mixed, 0-d and empty views, in float32 and float16. The expected values come from numpy
applied to a numpy view of the same storage; float16 expectations are computed in float32 and
rounded once, which is how the kernels compute.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from llmfs.tensor.backends.metal import ops
from llmfs.tensor.backends.metal.errors import KernelArgumentError, MetalDTypeError
from llmfs.tensor.errors import BroadcastError, RankMismatchError
from llmfs.tensor.layout import Layout

from .conftest import DTYPES, KINDS, random_view, to_strided, tolerance

UNARY_NUMPY = {
    "neg": np.negative,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, np.zeros_like(x)),
    "reciprocal": np.reciprocal,
}
BINARY_NUMPY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "minimum": np.minimum,
    "maximum": np.maximum,
}


def rng_for(*parts: object) -> np.random.Generator:
    """A generator seeded from the test's parameters (stable across runs and processes)."""
    return np.random.default_rng(zlib.crc32(repr(parts).encode()))


def expected(function, *views: np.ndarray, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(function(*(v.astype(np.float32) for v in views))).astype(dtype)


def assert_matches(result: np.ndarray, reference: np.ndarray, dtype: str) -> None:
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_allclose(
        result.astype(np.float64),
        reference.astype(np.float64),
        equal_nan=True,
        **tolerance(dtype),
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_strided_copy_reads_any_view_in_place(executor, kind: str, dtype: str) -> None:
    for trial in range(3):
        view, operand = random_view(rng_for("copy", kind, dtype, trial), kind, dtype)
        result = ops.strided_copy(executor, operand)
        np.testing.assert_array_equal(result.reshape(view.shape), view)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", ops.UNARY_OPS)
def test_unary_matches_numpy(executor, op: str, kind: str, dtype: str) -> None:
    view, operand = random_view(rng_for("unary", op, kind, dtype), kind, dtype)
    result = ops.unary(executor, op, operand)
    reference = expected(UNARY_NUMPY[op], view, dtype=dtype)
    assert_matches(result.reshape(view.shape), reference, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_scale_matches_numpy(executor, kind: str, dtype: str) -> None:
    view, operand = random_view(rng_for("scale", kind, dtype), kind, dtype)
    result = ops.scale(executor, operand, -1.5)
    assert_matches(
        result.reshape(view.shape), expected(lambda x: -1.5 * x, view, dtype=dtype), dtype
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", ops.BINARY_OPS)
def test_binary_broadcasts_like_numpy(executor, op: str, kind: str, dtype: str) -> None:
    rng = rng_for("binary", op, kind, dtype)
    a_view, a = random_view(rng, kind, dtype)
    # b: a fresh array whose shape broadcasts against a's (some axes 1, a leading axis dropped)
    b_shape = [1 if rng.random() < 0.4 else s for s in a_view.shape]
    if b_shape and rng.random() < 0.5:
        b_shape = b_shape[1:]
    parent = rng.uniform(0.5, 2, size=b_shape).astype(dtype)
    b_view = np.flip(parent) if parent.ndim else parent
    b = to_strided(parent, b_view)
    result, shape = ops.binary(executor, op, a, b)
    reference = expected(BINARY_NUMPY[op], a_view, b_view, dtype=dtype)
    assert shape == reference.shape
    assert_matches(result.reshape(shape), reference, dtype)


def test_minimum_and_maximum_propagate_nan(executor) -> None:
    a = np.array([np.nan, 1.0, 2.0, np.nan], dtype=np.float32)
    b = np.array([1.0, np.nan, 3.0, np.nan], dtype=np.float32)
    for op, function in (("minimum", np.minimum), ("maximum", np.maximum)):
        result, _ = ops.binary(executor, op, ops.Strided.contiguous(a), ops.Strided.contiguous(b))
        np.testing.assert_array_equal(result, function(a, b))


def test_binary_refuses_shapes_that_do_not_broadcast(executor) -> None:
    a = ops.Strided.contiguous(np.zeros((2, 3), np.float32))
    b = ops.Strided.contiguous(np.zeros((4,), np.float32))
    with pytest.raises(BroadcastError):
        ops.binary(executor, "add", a, b)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", [k for k in KINDS if k not in ("scalar", "empty")])
@pytest.mark.parametrize("op", ops.REDUCE_OPS)
def test_reductions_over_one_or_more_axes(executor, op: str, kind: str, dtype: str) -> None:
    rng = rng_for("reduce", op, kind, dtype)
    view, operand = random_view(rng, kind, dtype, rank=3)
    for axes in ((0,), (2,), (0, 2), (1, 2), (0, 1, 2), None):
        result, shape = ops.reduce(executor, op, operand, axes)
        function = np.sum if op == "sum" else np.max
        reference = expected(lambda x, f=function, ax=axes: f(x, axis=ax), view, dtype=dtype)
        assert shape == reference.shape
        assert_matches(result.reshape(shape), reference, dtype)


def test_sum_is_compensated_over_long_axes(executor) -> None:
    values = np.full(100_000, 0.1, dtype=np.float32)
    result, _ = ops.reduce(executor, "sum", ops.Strided.contiguous(values), None)
    assert abs(float(result[0]) - float(values.astype(np.float64).sum())) < 1e-2


def test_reductions_of_empty_and_scalar_views(executor) -> None:
    empty = ops.Strided.contiguous(np.zeros((3, 0), np.float32))
    sums, shape = ops.reduce(executor, "sum", empty, (1,))
    assert shape == (3,)
    np.testing.assert_array_equal(sums, np.zeros(3, np.float32))
    with pytest.raises(KernelArgumentError, match="zero elements"):
        ops.reduce(executor, "max", empty, (1,))
    scalar = ops.Strided.contiguous(np.array(2.5, np.float32))
    total, shape = ops.reduce(executor, "sum", scalar, None)
    assert shape == () and float(total[0]) == 2.5


def test_max_propagates_nan(executor) -> None:
    values = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    result, _ = ops.reduce(executor, "max", ops.Strided.contiguous(values), (1,))
    np.testing.assert_array_equal(result, np.array([np.nan, 6.0], np.float32))


SPECIAL_SUMS = [
    [np.inf, 1.0, 2.0],
    [1.0, 2.0, -np.inf],
    [np.inf, -np.inf, 1.0],
    [np.nan, 1.0, 2.0],
    [1.0, np.inf, np.nan],
    [3e38, 3e38, 1.0],  # float32 overflow
    [-3e38, -3e38, 1.0],
    [3e38, -3e38, 1.0],  # large but finite all the way: compensation stays on
    [60000.0, 60000.0, -60000.0],  # float16 overflows only in the final rounding
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("values", SPECIAL_SUMS, ids=repr)
def test_sum_of_infinities_nans_and_overflow_matches_numpy(executor, values, dtype) -> None:
    # The Kahan compensation (next - total) - term would turn inf into inf - inf = NaN.
    with np.errstate(all="ignore"):
        data = np.array(values, dtype=np.float32).astype(dtype)
        reference = np.asarray(data.astype(np.float32).sum()).astype(dtype)
    result, _ = ops.reduce(executor, "sum", ops.Strided.contiguous(data), None)
    np.testing.assert_array_equal(result[0], reference)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout_kind", ["contiguous", "transposed", "flipped", "batched"])
def test_matmul_matches_numpy(executor, layout_kind: str, dtype: str) -> None:
    rng = rng_for("matmul", layout_kind, dtype)
    m, k, n = (int(v) for v in rng.integers(1, 9, 3))
    a_parent = rng.uniform(-1, 1, (k, m) if layout_kind == "transposed" else (m, k))
    b_parent = rng.uniform(-1, 1, (k, n))
    a_parent, b_parent = a_parent.astype(dtype), b_parent.astype(dtype)
    a_view = a_parent.T if layout_kind == "transposed" else a_parent
    b_view = np.flip(b_parent, 0) if layout_kind == "flipped" else b_parent
    if layout_kind == "batched":
        b_parent = rng.uniform(-1, 1, (3, k, n)).astype(dtype)
        b_view = b_parent[:, ::-1, :]  # batch of 3 against an a broadcast over the batch
    result, shape = ops.matmul(executor, to_strided(a_parent, a_view), to_strided(b_parent, b_view))
    reference = expected(np.matmul, a_view, b_view, dtype=dtype)
    assert shape == reference.shape
    assert_matches(result.reshape(shape), reference, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_contraction_alpha_ab_plus_beta_c(executor, dtype: str) -> None:
    rng = rng_for("gemm", dtype)
    a = rng.uniform(-1, 1, (4, 5)).astype(dtype)
    b = rng.uniform(-1, 1, (5, 3)).astype(dtype)
    c_parent = rng.uniform(-1, 1, (3,)).astype(dtype)  # broadcast over rows: stride 0
    result, shape = ops.matmul(
        executor,
        ops.Strided.contiguous(a),
        ops.Strided.contiguous(b),
        ops.Strided.contiguous(c_parent),
        alpha=0.5,
        beta=-2.0,
    )
    reference = expected(lambda x, y, z: 0.5 * (x @ y) - 2.0 * z, a, b, c_parent, dtype=dtype)
    assert shape == (4, 3)
    assert_matches(result.reshape(shape), reference, dtype)


def test_matmul_vectors_and_errors(executor) -> None:
    rng = rng_for("matvec")
    a = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    v = rng.uniform(-1, 1, (4,)).astype(np.float32)
    result, shape = ops.matmul(executor, ops.Strided.contiguous(a), ops.Strided.contiguous(v))
    assert shape == (3,)
    np.testing.assert_allclose(result, a @ v, rtol=1e-5)
    dot, shape = ops.matmul(executor, ops.Strided.contiguous(v), ops.Strided.contiguous(v))
    assert shape == () and np.isclose(dot[0], v @ v, rtol=1e-5)
    with pytest.raises(RankMismatchError):
        ops.matmul(executor, ops.Strided.contiguous(a), ops.Strided.contiguous(a))
    empty, shape = ops.matmul(
        executor,
        ops.Strided.contiguous(np.zeros((2, 0), np.float32)),
        ops.Strided.contiguous(np.zeros((0, 3), np.float32)),
    )
    assert shape == (2, 3)
    np.testing.assert_array_equal(empty, np.zeros(6, np.float32))


def test_float64_is_refused_with_advice_never_downcast(executor) -> None:
    operand = ops.Strided.contiguous(np.ones(3))
    with pytest.raises(MetalDTypeError, match=r"no 64-bit floating point.*Convert first"):
        ops.unary(executor, "exp", operand)
    with pytest.raises(MetalDTypeError):
        ops.strided_copy(executor, operand)


def test_layouts_reaching_outside_storage_are_refused(executor) -> None:
    from llmfs.tensor.errors import InvalidLayoutError

    storage = np.zeros(6, np.float32)
    with pytest.raises(InvalidLayoutError):
        ops.strided_copy(executor, ops.Strided(storage, Layout((2, 3), (3, 1), 1)))
    with pytest.raises(InvalidLayoutError):
        ops.strided_copy(executor, ops.Strided(storage, Layout((3,), (-1,), 1)))


@pytest.mark.parametrize("case", ["vector @ matrix", "matrix @ vector", "vector @ vector"])
def test_matmul_vector_promotion_with_a_c_term(executor, case: str) -> None:
    rng = rng_for("gemv", case)
    a = rng.uniform(-1, 1, (4,) if case.startswith("vector") else (3, 4)).astype(np.float32)
    b = rng.uniform(-1, 1, (4,) if case.endswith("vector") else (4, 5)).astype(np.float32)
    c = rng.uniform(-1, 1, np.shape(a @ b)).astype(np.float32)
    result, shape = ops.matmul(
        executor,
        ops.Strided.contiguous(a),
        ops.Strided.contiguous(b),
        ops.Strided.contiguous(c),
        alpha=2.0,
        beta=0.5,
    )
    reference = 2.0 * (a @ b) + 0.5 * c
    assert shape == np.shape(reference)
    np.testing.assert_allclose(result.reshape(shape), reference, rtol=1e-5, atol=1e-6)


def test_size_one_axes_may_have_any_stride(executor) -> None:
    # A size-1 axis never advances, so as_strided may give it a stride beyond 32 bits.
    storage = np.array([1.0, 2.0, 3.0], np.float32)
    row = ops.Strided(storage, Layout((1, 3), (2**31, 1), 0))
    sums, shape = ops.reduce(executor, "sum", row, (1,))
    assert shape == (1,) and float(sums[0]) == 6.0
    column = ops.Strided(storage, Layout((3, 1), (1, 2**40), 0))
    product, shape = ops.matmul(executor, row, column)
    assert shape == (1, 1) and float(product[0]) == 14.0
    copied = ops.strided_copy(
        executor, ops.Strided(storage, Layout((1, 1, 3), (-(2**35), 2**33, 1), 0))
    )
    np.testing.assert_array_equal(copied, storage)


def test_size_one_strides_through_the_tensor_api() -> None:
    import llmfs.tensor as lt
    from llmfs.tensor import Tensor
    from llmfs.tensor.backends import use_backend

    values = Tensor.from_vec([3], [1.0, 2.0, 3.0], "float32")
    row = lt.as_strided(values, [1, 3], [2**31, 1], 0)
    column = Tensor.from_vec([3, 1], [1.0, 1.0, 1.0], "float32")
    with use_backend("metal-emulator"):
        assert lt.sum(row, axis=1).to_numpy().tolist() == [6.0]
        assert lt.matmul(row, column).to_numpy().tolist() == [[6.0]]


def test_views_beyond_the_32_bit_index_range_are_refused_by_name() -> None:
    from llmfs.tensor.errors import TensorError

    with pytest.raises(KernelArgumentError, match="2147483647") as caught:
        ops.view_descriptor(Layout((2,), (2**31,), 0))
    assert isinstance(caught.value, TensorError)
    with pytest.raises(KernelArgumentError, match="32-bit index range"):
        ops.view_descriptor(Layout((3,), (-1,), 2**31 + 1))
    # Unused strides and the base offset of an empty view are written as 0, never refused.
    assert ops.view_descriptor(Layout((0, 2), (2**40, 2**40), 2**40)).tolist() == [2, 0, 0, 2, 0, 0]


def test_every_shipped_kernel_runs_in_both_thread_orders(executor) -> None:
    """Each kernel of every family is launched here (the fixture runs this in grid order and
    shuffled, with junk-filled threadgroup memory) and matches numpy."""
    from llmfs.tensor.backends.metal.msl import find_kernels

    launched: set[str] = set()

    class Recording:
        name = executor.name

        def run(self, source, kernel, buffers, grid) -> None:
            launched.add(kernel)
            executor.run(source, kernel, buffers, grid)

        def empty(self, count, dtype):
            return executor.empty(count, dtype)

    recording = Recording()
    rng = rng_for("every kernel")
    for dtype in DTYPES:
        values = rng.uniform(0.5, 2.0, (37, 37)).astype(dtype)
        view = values.T[::-1]
        x = to_strided(values, view)
        tol = tolerance(dtype)
        np.testing.assert_array_equal(ops.strided_copy(recording, x).reshape(view.shape), view)
        for op in ("exp", "relu"):
            got = ops.unary(recording, op, x).reshape(view.shape)
            assert_matches(got, expected(UNARY_NUMPY[op], view, dtype=dtype), dtype)
        got = ops.scale(recording, x, 0.5).reshape(view.shape)
        assert_matches(got, expected(lambda v: 0.5 * v, view, dtype=dtype), dtype)
        got, shape = ops.binary(recording, "sub", x, x)
        assert_matches(got.reshape(shape), np.zeros(view.shape, dtype), dtype)
        for op, function in (("sum", np.sum), ("max", np.max)):
            got, shape = ops.reduce(recording, op, x, (1,))
            want = expected(lambda v, f=function: f(v, axis=1), view, dtype=dtype)
            np.testing.assert_allclose(got.reshape(shape), want, rtol=5e-3 if dtype == "float16"
                                       else 1e-5)  # fmt: skip
        product, shape = ops.matmul(recording, x, x)
        want = view.astype(np.float64) @ view.astype(np.float64)
        np.testing.assert_allclose(product.reshape(shape), want, rtol=tol["rtol"] * 10)
    ints = rng.integers(-(2**31), 2**31, (29, 31), dtype=np.int64).astype(np.int32)
    view = ints.T[::2]
    x = to_strided(ints, view)
    np.testing.assert_array_equal(ops.strided_copy(recording, x).reshape(view.shape), view)
    got = ops.unary(recording, "neg", x).reshape(view.shape)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got, -view)
        got, shape = ops.binary(recording, "mul", x, x)
        np.testing.assert_array_equal(got.reshape(shape), view * view)
    flags = ints > 0
    view = flags[::-1, 1::3]
    got = ops.strided_copy(recording, to_strided(flags, view))
    np.testing.assert_array_equal(got.reshape(view.shape), view)
    shipped = {k.name for f in ops.FAMILIES for k in find_kernels(ops.family_source(f))}
    assert launched == shipped


INT32_EXTREMES = np.array([0, 1, -1, 7, -7, 2**31 - 1, -(2**31), 46341, -46341], dtype=np.int32)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", ["int32", "bool"])
def test_strided_copy_of_int32_and_bool_views(executor, kind: str, dtype: str) -> None:
    view, operand = random_view(rng_for("copy", kind, dtype), kind, dtype)
    result = ops.strided_copy(executor, operand)
    assert result.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(result.reshape(view.shape), view)


@pytest.mark.parametrize("op", ops.INT32_UNARY_OPS)
def test_int32_unary_wraps_like_numpy(executor, op: str) -> None:
    parent = np.tile(INT32_EXTREMES, 5)
    view = parent[::-2]
    result = ops.unary(executor, op, to_strided(parent, view))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(result, UNARY_NUMPY[op](view))
    assert result.dtype == np.int32


@pytest.mark.parametrize("op", ops.INT32_BINARY_OPS)
def test_int32_binary_broadcasts_and_wraps_like_numpy(executor, op: str) -> None:
    a = INT32_EXTREMES.reshape(-1, 1)  # a column against a row: every pair, overflow included
    b = INT32_EXTREMES[::-1].copy()
    result, shape = ops.binary(executor, op, ops.Strided.contiguous(a), ops.Strided.contiguous(b))
    with np.errstate(over="ignore"):
        reference = BINARY_NUMPY[op](a, b)
    assert reference.dtype == np.int32
    np.testing.assert_array_equal(result.reshape(shape), reference)


def test_run_kernel_binds_int32_arrays_to_int_parameters(executor) -> None:
    from llmfs.tensor.backends.metal import run_kernel

    source = (
        "#include <metal_stdlib>\nusing namespace metal;\n"
        "kernel void twice(device const int* x [[buffer(0)]], device int* out [[buffer(1)]],\n"
        "                  uint i [[thread_position_in_grid]]) { out[i] = x[i] * 2; }\n"
    )
    values = np.arange(-5, 5, dtype=np.int32)
    out = np.zeros_like(values)
    run_kernel(source, "twice", [values, out], values.size, shuffle=executor.shuffle)
    np.testing.assert_array_equal(out, values * 2)
    with pytest.raises(KernelArgumentError, match=r"holds int .* but the array is float32"):
        run_kernel(source, "twice", [values.astype(np.float32), out], values.size)


REFUSED_DTYPES = [
    ("int64 copy", lambda e: ops.strided_copy(e, _operand("int64")), "copy does not take int64"),
    ("float64 copy", lambda e: ops.strided_copy(e, _operand("float64")), "no 64-bit floating"),
    ("exp of int32", lambda e: ops.unary(e, "exp", _operand("int32")), "exp does not take int32"),
    (
        "div of int32",
        lambda e: ops.binary(e, "div", _operand("int32"), _operand("int32")),
        "binary div does not take int32",
    ),
    (
        "add of bool",
        lambda e: ops.binary(e, "add", _operand("bool"), _operand("bool")),
        "binary add does not take bool",
    ),
    (
        "sum of int32",
        lambda e: ops.reduce(e, "sum", _operand("int32"), None),
        "reduce sum does not take int32",
    ),
    (
        "int64 matmul",
        lambda e: ops.matmul(e, _operand("int64", 2), _operand("int64", 2)),
        "matmul does not take int64",
    ),
]


def _operand(dtype: str, rank: int = 1) -> ops.Strided:
    return ops.Strided.contiguous(np.ones((2,) * rank, dtype=dtype))


@pytest.mark.parametrize(("call", "message"), [r[1:] for r in REFUSED_DTYPES],
                         ids=[r[0] for r in REFUSED_DTYPES])  # fmt: skip
def test_dtypes_without_kernels_are_refused_by_name(executor, call, message) -> None:
    with pytest.raises(MetalDTypeError, match=message):
        call(executor)
