"""Every available backend, for every dtype it declares, computes what NumPy computes.

The inputs are random views (permuted storage, steps, flips, broadcast axes, 0-d and empty
shapes) and the expected values come from NumPy in float64 on the NumPy twin of each view, then
rounded to the result dtype. Special values follow IEEE as NumPy does: overflow is inf, ``log(0)``
is -inf, ``x/0`` is +-inf, ``sqrt(-1)`` is NaN, NaN propagates through min/max. The elementwise
and reduction properties also sprinkle inf, -inf, NaN and values near the dtype's largest finite
value into their inputs, and wherever NumPy's result is not finite the backend's must be the same
inf or NaN exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmfs.tensor import (
    EmptyReductionError,
    Tensor,
    TensorView,
    as_strided,
    available_backends,
    einsum,
    get_backend,
    matmul,
    ops,
    use_backend,
)
from llmfs.tensor.backends import BINARY_OPS, REDUCE_OPS, UNARY_OPS

from ..strategies import apply_llmfs, apply_numpy, view_chains
from .support import (
    BACKEND_DTYPES,
    assert_close,
    broadcastable_to,
    small_shapes,
    views_of_shape,
)

# Seconds in all (generated cases on every backend): the file is scheduled early (conftest.py).
pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=20, deadline=None)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


NUMPY_UNARY = {
    "neg": np.negative,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0.0),
    "reciprocal": lambda x: 1.0 / x,
}
NUMPY_BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.divide,
    "minimum": np.minimum,
    "maximum": np.maximum,
}
NUMPY_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min, "mean": np.mean}


def expected(function, *arrays: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(function(*(np.asarray(a, dtype=np.float64) for a in arrays)))


def special_pool(dtype: str, *, large: bool = True, one_sign: bool = False) -> list[float]:
    """inf, -inf and NaN, plus values near the dtype's largest finite value when ``large``
    (with ``one_sign`` only positive ones, and no -inf: a sum whose partial totals overflow and
    then come back, or overflow to +inf before meeting -inf (NaN, where the exact sum is -inf),
    would be a question of summation order, not of IEEE rules)."""
    pool = [np.inf, -np.inf, np.nan]
    if large:
        biggest = float(np.finfo(dtype).max)
        pool += [biggest, 0.9 * biggest, 0.6 * biggest]
        if one_sign:
            pool.remove(-np.inf)
        else:
            pool += [-biggest, -0.6 * biggest]
    return pool


@st.composite
def sprinkled(draw: st.DrawFn, values: np.ndarray, pool: list[float]) -> np.ndarray:
    """A copy of ``values`` with some entries (none, a few or many) replaced from ``pool``."""
    rate = draw(st.sampled_from([0.0, 0.15, 0.5]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    out = np.array(values, dtype=np.float64)
    chosen = rng.random(out.size) < rate
    out[chosen] = rng.choice(np.array(pool), size=int(chosen.sum()))
    return out


@st.composite
def with_special_values(
    draw: st.DrawFn, view: TensorView, dtype: str, pool: list[float]
) -> tuple[TensorView, np.ndarray]:
    """The same layout as ``view`` over a new owner whose storage has special values sprinkled
    in, and its NumPy twin (NumPy's own strided view of that storage)."""
    owner = view.owner
    values = draw(sprinkled(owner.as_slice(), pool))
    special = Tensor.from_vec(list(owner.shape), values, dtype=dtype)
    new_view = as_strided(special, view.shape, view.strides, view.base_offset)
    storage = special.as_slice()
    if 0 in view.shape:
        return new_view, np.empty(view.shape, dtype=dtype)
    twin = np.lib.stride_tricks.as_strided(
        storage[view.base_offset :],
        shape=view.shape,
        strides=[stride * storage.itemsize for stride in view.strides],
        writeable=False,
    )
    return new_view, twin


def assert_specials_match(got: Tensor, want: np.ndarray, dtype: str) -> None:
    """Where NumPy's result (rounded to ``dtype``) is inf, -inf or NaN, ``got`` is exactly that.

    :func:`assert_close` alone would accept any value next to an infinite tolerance."""
    with np.errstate(all="ignore"):
        rounded = np.asarray(want, dtype=np.float64).astype(dtype)
    special = ~np.isfinite(rounded)
    np.testing.assert_array_equal(got.to_numpy()[special], rounded[special])


def test_the_suite_covers_every_op() -> None:
    assert set(NUMPY_UNARY) == set(UNARY_OPS)
    assert set(NUMPY_BINARY) == set(BINARY_OPS)
    assert set(NUMPY_REDUCE) == set(REDUCE_OPS)


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@SETTINGS
@given(data=st.data())
def test_unary_ops_on_random_view_chains(backend: str, dtype: str, data: st.DataObject) -> None:
    op = data.draw(st.sampled_from(UNARY_OPS))
    template, chain = data.draw(view_chains(dtype=dtype, max_rank=3, max_ops=4))
    seed = data.draw(st.integers(0, 2**32 - 1))
    values = np.random.default_rng(seed).uniform(-3, 3, size=template.size)
    values = data.draw(sprinkled(values, special_pool(dtype)))
    owner = Tensor.from_vec(template.shape, values, dtype=dtype)
    view = apply_llmfs(owner, chain)
    twin = apply_numpy(owner.as_slice(), owner.shape, chain)
    with use_backend(backend):
        got = getattr(ops, op)(view)
    want = expected(NUMPY_UNARY[op], twin)
    assert_close(got, want, dtype)
    assert_specials_match(got, want, dtype)


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@SETTINGS
@given(data=st.data())
def test_binary_ops_broadcast_strided_views(backend: str, dtype: str, data: st.DataObject) -> None:
    op = data.draw(st.sampled_from(BINARY_OPS))
    shape = data.draw(small_shapes())
    a, a_twin = data.draw(views_of_shape(data.draw(broadcastable_to(shape)), dtype))
    b, b_twin = data.draw(views_of_shape(data.draw(broadcastable_to(shape)), dtype))
    a, a_twin = data.draw(with_special_values(a, dtype, special_pool(dtype)))
    b, b_twin = data.draw(with_special_values(b, dtype, special_pool(dtype)))
    if data.draw(st.booleans()):
        a, a_twin, b, b_twin = b, b_twin, a, a_twin
    with use_backend(backend):
        got = getattr(ops, op)(a, b)
    want = expected(NUMPY_BINARY[op], a_twin, b_twin)
    assert_close(got, want, dtype)
    assert_specials_match(got, want, dtype)


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@SETTINGS
@given(data=st.data())
def test_binary_ops_with_a_python_scalar_keep_the_tensor_dtype(
    backend: str, dtype: str, data: st.DataObject
) -> None:
    op = data.draw(st.sampled_from(BINARY_OPS))
    x, twin = data.draw(views_of_shape(data.draw(small_shapes()), dtype))
    number = data.draw(st.sampled_from([2.5, -1.0, 0.5, 3]))
    scalar_first = data.draw(st.booleans())
    rounded = float(np.asarray(number, dtype=dtype))
    with use_backend(backend):
        got = getattr(ops, op)(number, x) if scalar_first else getattr(ops, op)(x, number)
    function = NUMPY_BINARY[op]
    want = expected(lambda t: function(rounded, t) if scalar_first else function(t, rounded), twin)
    assert_close(got, want, dtype)


@st.composite
def reduction_axes(draw: st.DrawFn, rank: int) -> object:
    kind = draw(st.sampled_from(["none", "int", "tuple", "list", "empty"]))
    if kind == "none" or rank == 0:
        return None if kind != "empty" else ()
    if kind == "empty":
        return ()
    if kind == "int":
        return draw(st.integers(-rank, rank - 1))
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    signed = [axis - rank if draw(st.booleans()) else axis for axis in axes]
    return tuple(signed) if kind == "tuple" else signed


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@SETTINGS
@given(data=st.data())
def test_reductions_over_explicit_axes(backend: str, dtype: str, data: st.DataObject) -> None:
    op = data.draw(st.sampled_from(REDUCE_OPS))
    low = 0.5 if op == "prod" else -3.0  # keep products of up to 27 values finite in float16
    x, twin = data.draw(views_of_shape(data.draw(small_shapes()), dtype, low=low, high=1.5))
    # Huge finite values only where the float64 reference cannot disagree with float32
    # accumulation: a product or mean of them may overflow midway yet end finite in float64.
    pool = special_pool(dtype, large=op in ("sum", "max", "min"), one_sign=True)
    x, twin = data.draw(with_special_values(x, dtype, pool))
    axis = data.draw(reduction_axes(x.rank))
    keepdims = data.draw(st.booleans())
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    normalised = range(x.rank) if axis is None else np.atleast_1d(np.asarray(axis, dtype=int))
    reduced = [x.shape[a] for a in normalised]
    empty_axis = 0 in reduced  # an error for max/min/mean even if the output is empty too
    with use_backend(backend):
        if empty_axis and op in ("max", "min", "mean"):
            with pytest.raises(EmptyReductionError, match=f"{op} over an empty axis"):
                getattr(ops, op)(x, axis, keepdims=keepdims)
            return
        got = getattr(ops, op)(x, axis, keepdims=keepdims)
    want = expected(lambda t: NUMPY_REDUCE[op](t, axis=np_axis, keepdims=keepdims), twin)
    scale = None
    if op in ("sum", "mean"):
        scale = expected(lambda t: np.sum(np.abs(t), axis=np_axis, keepdims=keepdims), twin)
        with np.errstate(over="ignore"):
            scale = scale * 4  # float32/float16 accumulate in float32, in any order
    assert_close(got, want, dtype, scale=scale)
    assert_specials_match(got, want, dtype)


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@SETTINGS
@given(data=st.data())
def test_matmul_with_batch_broadcasting(backend: str, dtype: str, data: st.DataObject) -> None:
    m, k, n = (data.draw(st.integers(0, 3)) for _ in range(3))
    batch = data.draw(small_shapes(max_rank=2))
    a_shape = (*data.draw(broadcastable_to(batch)), m, k)
    b_shape = (*data.draw(broadcastable_to(batch)), k, n)
    if data.draw(st.booleans()):
        a_shape = (k,)  # a vector on the left: a row
    elif data.draw(st.booleans()):
        b_shape = (k,)  # a vector on the right: a column
    a, a_twin = data.draw(views_of_shape(a_shape, dtype))
    b, b_twin = data.draw(views_of_shape(b_shape, dtype))
    with use_backend(backend):
        got = matmul(a, b)
    scale = expected(lambda p, q: np.matmul(np.abs(p), np.abs(q)), a_twin, b_twin) * 2
    assert_close(got, expected(np.matmul, a_twin, b_twin), dtype, scale=scale)


@st.composite
def einsum_cases(draw: st.DrawFn) -> tuple[str, list[tuple[int, ...]], bool]:
    """A random valid expression (diagonals, size-1 broadcasting, ellipsis, implicit output,
    scalars, empty axes, a repeated operand), one shape per operand, and whether the last
    operand repeats the first."""
    pool = "abcdA"
    extents = {label: draw(st.sampled_from([0, 1, 2, 3, 3, 2])) for label in pool}
    use_ellipsis = draw(st.booleans()) and draw(st.booleans())
    ellipsis_shape = tuple(draw(st.lists(st.integers(1, 3), max_size=2))) if use_ellipsis else ()
    terms, shapes = [], []
    for _ in range(draw(st.integers(1, 3))):
        labels = draw(st.lists(st.sampled_from(pool), max_size=3))
        shape = [
            1 if draw(st.integers(0, 5)) == 0 and labels.count(label) == 1 else extents[label]
            for label in labels
        ]
        term = "".join(labels)
        if use_ellipsis and draw(st.booleans()):
            at = draw(st.integers(0, len(labels)))
            own = ellipsis_shape[draw(st.integers(0, len(ellipsis_shape))) :]
            own = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else s for s in own)
            term = term[:at] + "..." + term[at:]
            shape = shape[:at] + list(own) + shape[at:]
        terms.append(term)
        shapes.append(tuple(shape))
    repeated = draw(st.booleans()) and draw(st.booleans())
    if repeated:  # the same operand twice (the test passes the same view object)
        terms.append(terms[0])
        shapes.append(shapes[0])
    expression = ",".join(terms)
    if draw(st.booleans()):
        present = sorted({label for term in terms for label in term if label != "."})
        out = draw(st.permutations(present))
        out = out[: draw(st.integers(0, len(out)))]
        ellipsis_out = "..." if "..." in expression else ""
        expression += "->" + ellipsis_out + "".join(out)
    return expression, shapes, repeated


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@SETTINGS
@given(data=st.data())
def test_einsum_matches_numpy(backend: str, dtype: str, data: st.DataObject) -> None:
    expression, shapes, repeated = data.draw(einsum_cases())
    pairs = [data.draw(views_of_shape(shape, dtype, low=-2, high=2)) for shape in shapes]
    if repeated:
        pairs[-1] = pairs[0]
    views, twins = [p[0] for p in pairs], [np.asarray(p[1], dtype=np.float64) for p in pairs]
    want = np.einsum(expression, *twins)
    scale = np.einsum(expression, *(np.abs(t) for t in twins)) * 4
    with use_backend(backend):
        got = einsum(expression, *views)
    assert_close(got, np.asarray(want), dtype, scale=np.asarray(scale))


# --------------------------------------------------------------------------------------------
# IEEE special values
# --------------------------------------------------------------------------------------------

SPECIALS = [0.0, -0.0, 1.0, -1.0, 1e4, -1e4, 60.0, np.inf, -np.inf, np.nan]


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@pytest.mark.parametrize("op", UNARY_OPS)
def test_unary_ops_follow_ieee_on_special_values(backend: str, dtype: str, op: str) -> None:
    x = Tensor.from_vec([len(SPECIALS)], SPECIALS, dtype=dtype)
    stored = x.to_numpy()
    with use_backend(backend), np.errstate(all="raise"):
        got = getattr(ops, op)(x)
    assert_close(got, expected(NUMPY_UNARY[op], stored), dtype)


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
def test_named_ieee_cases(backend: str, dtype: str) -> None:
    def t(*values: float) -> Tensor:
        return Tensor.from_vec([len(values)], values, dtype=dtype)

    with use_backend(backend):
        assert ops.exp(t(1000.0)).tolist() == [np.inf]
        assert ops.log(t(0.0)).tolist() == [-np.inf]
        assert ops.div(t(1.0, -1.0), 0.0).tolist() == [np.inf, -np.inf]
        assert np.isnan(ops.div(t(0.0), 0.0).tolist()[0])
        assert np.isnan(ops.sqrt(t(-1.0)).tolist()[0])
        assert ops.sigmoid(t(-1000.0, 1000.0)).tolist() == [0.0, 1.0]
        assert np.isnan(ops.minimum(t(np.nan, 1.0), t(1.0, np.nan)).to_numpy()).all()
        assert np.isnan(ops.maximum(t(np.nan, 1.0), t(1.0, np.nan)).to_numpy()).all()
        assert np.isnan(ops.max(t(1.0, np.nan, 3.0)).tolist())
        assert np.isnan(ops.min(t(np.nan, 1.0)).tolist())
        assert np.isnan(ops.add(t(np.inf), t(-np.inf)).tolist()[0])
        assert ops.add(t(np.inf), t(1.0)).tolist() == [np.inf]
        assert ops.relu(t(-2.0, 3.0)).tolist() == [0.0, 3.0]
        assert np.isnan(ops.relu(t(np.nan)).tolist()[0])


IEEE_REDUCTION_INPUTS = [
    [np.inf, 1.0, 2.0],
    [1.0, 2.0, -np.inf],
    [np.inf, -np.inf, 1.0],
    [np.nan, 1.0, 2.0],
    [1.0, np.inf, np.nan],
    [-np.inf, -np.inf, 3.0],
]
#: Inputs whose float32 (and float16) totals overflow (``"max"`` is the dtype's largest value).
OVERFLOW_INPUTS = [["max", "max", 1.0], ["-max", "-max", 1.0], ["max", 0.5, 2.0]]


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
@pytest.mark.parametrize("op", REDUCE_OPS)
def test_reductions_follow_ieee_on_special_values(backend: str, dtype: str, op: str) -> None:
    biggest = float(np.finfo(dtype).max)
    cases = [list(case) for case in IEEE_REDUCTION_INPUTS]
    if op != "mean":  # a mean of huge values may overflow midway yet end finite in float64
        named = {"max": biggest, "-max": -biggest}
        cases += [[named.get(v, v) for v in case] for case in OVERFLOW_INPUTS]
    for case in cases:
        x = Tensor.from_vec([len(case)], case, dtype=dtype)
        flipped = x.view().flip(0)  # the same values read through a negative stride
        for operand in (x, flipped):
            with use_backend(backend):
                got = getattr(ops, op)(operand)
            want = expected(NUMPY_REDUCE[op], np.asarray(case)[:: 1 if operand is x else -1])
            assert_specials_match(got, want, dtype)
            assert_close(got, want, dtype)


@pytest.mark.parametrize(
    "backend", [name for name in available_backends() if "float16" in get_backend(name).dtypes]
)
def test_float16_results_are_computed_in_float32(backend: str) -> None:
    # 2048 + 1 + 1 in float16 arithmetic stays 2048 (spacing 2); in float32 it is 2050.
    x = Tensor.from_vec([3], [2048.0, 1.0, 1.0], dtype="float16")
    with use_backend(backend):
        assert ops.sum(x).tolist() == 2050.0
        assert ops.sum(x).dtype == np.float16
