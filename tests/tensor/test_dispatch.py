"""The ops' cached dispatch (:mod:`llmfs.tensor.dispatch`) never changes a result or an error.

A plan is remembered after the first call of a kind; these tests call each op again and again
across those cache hits, with other values, other versions of the owner, stale views, other
backends and bad operands, and compare with the full path (the cache switched off) bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs.tensor as lt
from llmfs.tensor import Tensor, TensorView, dispatch, use_backend
from llmfs.tensor import backends as registry
from llmfs.tensor.backends.numpy_backend import NumpyBackend
from llmfs.tensor.errors import (
    BroadcastError,
    ConcurrentWriteError,
    DTypeError,
    MatmulShapeError,
    StaleViewError,
    TensorError,
)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    dispatch.clear()
    yield
    dispatch.clear()


def full_path(fn: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """``fn()`` with the cache switched off: every call takes the ops' full path."""
    with monkeypatch.context() as patch:
        patch.setattr(dispatch, "ENABLED", False)
        return fn()


def same(result: Any, expected: Any) -> None:
    """Same dtype, shape and bits (NaN equal to NaN)."""
    assert isinstance(result, Tensor)
    assert result.dtype == expected.dtype
    assert result.shape == expected.shape
    assert result.layout == expected.layout
    assert result.to_numpy().tobytes() == expected.to_numpy().tobytes()


def matrix(rng: np.random.Generator, shape: tuple[int, ...], dtype: str = "float32") -> Tensor:
    return Tensor.from_numpy(rng.standard_normal(shape).astype(dtype))


OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lt.add,
    "sub": lt.sub,
    "mul": lt.mul,
    "div": lt.div,
    "less": lt.less,
    "maximum": lt.maximum,
    "matmul": lt.matmul,
    "exp": lambda a, _: lt.exp(a),
    "tanh": lambda a, _: lt.tanh(a),
    "sum": lambda a, _: lt.sum(a, -1),
    "mean": lambda a, _: lt.mean(a, 0, keepdims=True),
    "max": lambda a, _: lt.max(a, None),
    "materialize": lambda a, _: a.view().T.materialize(),
    "scalar": lambda a, _: 0.5 * a - 1,
}


@pytest.mark.parametrize("name", OPS)
def test_every_cache_hit_computes_the_new_values(name: str) -> None:
    rng = np.random.default_rng(0)
    op = OPS[name]
    for _ in range(4):  # the first call makes the plan, the others use it
        a, b = matrix(rng, (5, 5)), matrix(rng, (5, 5))
        with use_backend("reference"):
            expected = op(a, b)
        got = op(a, b)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=1e-5, atol=1e-6)
    assert dispatch.PLANS or name == "materialize"


@pytest.mark.parametrize("name", OPS)
def test_a_write_between_cache_hits_is_seen(name: str) -> None:
    rng = np.random.default_rng(1)
    a, b = matrix(rng, (4, 4)), matrix(rng, (4, 4))
    op = OPS[name]
    first = op(a, b).to_numpy()
    op(a, b)
    with a.mutate() as buf:
        buf[:] = 2.0
    after = op(a, b)
    with use_backend("reference"):
        expected = op(a, b)
    np.testing.assert_allclose(after.to_numpy(), expected.to_numpy(), rtol=1e-5, atol=1e-6)
    assert not np.array_equal(first, after.to_numpy())


@pytest.mark.parametrize("name", OPS)
def test_a_stale_view_is_refused_on_a_cache_hit(name: str) -> None:
    rng = np.random.default_rng(2)
    a, b = matrix(rng, (4, 4)), matrix(rng, (4, 4))
    view = a.view()
    op = OPS[name]
    op(view, b)
    op(view, b)  # a cache hit
    a.as_mut_slice()[0] = 1.0
    with pytest.raises(StaleViewError):
        op(view, b)
    with pytest.raises(StaleViewError):
        op(view, b)


def test_stale_views_are_refused_by_the_remembered_view_layouts() -> None:
    t = Tensor.from_numpy(np.arange(12.0).reshape(3, 4))
    view = t.view()
    assert view.T.shape == (4, 3) and view.reshape([12]).shape == (12,)
    assert view.T.shape == (4, 3) and view.reshape([12]).shape == (12,)  # cache hits
    t.as_mut_slice()[0] = 5.0
    for derive in (lambda: view.T, lambda: view.reshape([12]), lambda: view.reshape([5])):
        with pytest.raises(StaleViewError):
            derive()
    with pytest.raises(lt.ReshapeElementCountMismatchError):
        t.reshape([5])
    with pytest.raises(TensorError):
        t.reshape([12.0])  # equal to 12 and hashed alike, but a float is no size
    assert t.reshape((12,)).tolist()[0] == 5.0


def test_an_op_inside_a_write_window_is_refused_before_and_after_the_plan_exists() -> None:
    t = Tensor.from_numpy(np.ones((3, 3), dtype=np.float32))
    lt.add(t, t)
    lt.add(t, t)
    with t.mutate():
        for op in (lambda: lt.add(t, t), lambda: lt.exp(t), lambda: lt.sum(t, 0)):
            with pytest.raises(StaleViewError, match="mutate\\(\\) window is open"):
                op()
    assert lt.add(t, t).tolist() == [[2.0] * 3] * 3


def test_the_after_read_check_raises_what_the_full_path_raises() -> None:
    t = Tensor.from_numpy(np.ones(3))
    version = t.version
    dispatch.check_unchanged(t, version)
    t.as_mut_slice()[0] = 2.0
    with pytest.raises(ConcurrentWriteError):
        dispatch.check_unchanged(t, version)


def test_errors_stay_errors_next_to_a_plan_of_the_same_op() -> None:
    f32 = Tensor.from_numpy(np.ones((3, 3), dtype=np.float32))
    i32 = Tensor.from_numpy(np.ones((3, 3), dtype=np.int32))
    flags = Tensor.from_numpy(np.ones((3, 3), dtype=bool))
    for _ in range(3):
        lt.add(f32, f32), lt.add(i32, 1), lt.matmul(f32, f32)
        with pytest.raises(BroadcastError):
            lt.add(f32, Tensor.from_numpy(np.ones((2, 3), dtype=np.float32)))
        with pytest.raises(DTypeError):
            lt.sub(flags, flags)
        with pytest.raises(DTypeError):
            lt.exp(i32)
        with pytest.raises(TensorError, match="does not fit int32"):
            lt.add(i32, 2**40)  # the value decides: a weak int next to int32 is never planned
        with pytest.raises(MatmulShapeError):
            lt.matmul(f32, Tensor.from_numpy(np.ones((2, 3), dtype=np.float32)))
        with pytest.raises(TensorError, match="at least one"):
            lt.add(1.0, 2.0)
        with pytest.raises(TensorError):
            lt.add(f32, np.ones((3, 3)))
        with pytest.raises(TensorError, match="keepdims"):
            lt.sum(f32, 0, keepdims="no")  # type: ignore[arg-type]


def test_a_weak_number_keeps_numpy_2_promotion_on_every_hit() -> None:
    f16 = Tensor.from_numpy(np.array([1.0, 2.0], dtype=np.float16))
    i32 = Tensor.from_numpy(np.array([1, 2], dtype=np.int32))
    for _ in range(3):
        assert (f16 + 1).dtype == np.float16 and (f16 * 0.5).dtype == np.float16
        assert (i32 + 0.5).dtype == np.float64 and (i32 + 0.5).tolist() == [1.5, 2.5]
        assert (f16 + 70000.0).tolist() == [np.inf, np.inf]  # rounded to float16, as NumPy
        assert (f16 + 2**60).tolist() == [np.inf, np.inf]  # outside the planned ints
        assert (i32 + 3).tolist() == [4, 5] and (i32 + 3).dtype == np.int32


class _Recording(NumpyBackend):
    """The NumPy backend's arithmetic, recording each call: it is not planned for."""

    name = "recording"
    calls: ClassVar[list[str]] = []

    def binary(self, op, a, b, *, dtype, compute):  # type: ignore[no-untyped-def]
        self.calls.append(op)
        return super().binary(op, a, b, dtype=dtype, compute=compute)


def test_a_plan_of_the_numpy_backend_is_never_used_by_another_backend() -> None:
    registry.register_backend("recording", _Recording, replace=True)
    try:
        _Recording.calls.clear()
        a = Tensor.from_numpy(np.ones((2, 2), dtype=np.float32))
        lt.add(a, a), lt.add(a, a)
        assert _Recording.calls == []
        with use_backend("recording"):
            assert lt.add(a, a).tolist() == [[2.0, 2.0]] * 2
            assert lt.add(a, a).tolist() == [[2.0, 2.0]] * 2
        assert _Recording.calls == ["add", "add"]
        with use_backend("reference"):
            assert lt.add(a, a).tolist() == [[2.0, 2.0]] * 2
    finally:
        registry._loaders.pop("recording", None)
        registry._loaded.pop("recording", None)


def test_a_replaced_numpy_backend_is_still_the_numpy_backend() -> None:
    a = Tensor.from_numpy(np.ones(2))
    lt.add(a, a)
    old = registry._loaded["numpy"]
    try:
        registry._loaded["numpy"] = _Recording()
        _Recording.calls.clear()
        assert lt.add(a, a).tolist() == [2.0, 2.0]
        assert _Recording.calls == ["add"]
    finally:
        registry._loaded["numpy"] = old


def test_large_and_empty_results_take_the_full_path() -> None:
    big = Tensor.zeros([dispatch.MAX_VALUES + 1], "float32")
    empty = Tensor.zeros([0, 3], "float32")
    assert lt.add(big, big).shape == (dispatch.MAX_VALUES + 1,)
    assert lt.add(empty, empty).shape == (0, 3)
    assert lt.sum(empty, 0).tolist() == [0.0, 0.0, 0.0]
    assert all(plan is False for plan in dispatch.PLANS.values())


# -- the planned call is the full path's call, bit for bit -------------------------------------

DTYPES = st.sampled_from(["float16", "float32", "float64", "int32", "int64", "bool"])


@st.composite
def operand(draw: st.DrawFn, shape: tuple[int, ...], dtype: str) -> Tensor | TensorView:
    """A tensor of ``shape``, or the same values through a transposed or sliced view."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    values = (rng.standard_normal(shape) * 4).astype(dtype)
    kind = draw(st.sampled_from(["tensor", "transposed", "sliced"]))
    if kind == "transposed" and len(shape) >= 2:
        return Tensor.from_numpy(np.ascontiguousarray(np.swapaxes(values, -1, -2))).view().T
    if kind == "sliced" and len(shape) >= 1:
        padded = np.concatenate([values, values], axis=-1)
        return Tensor.from_numpy(padded).slice(len(shape) - 1, 0, shape[-1])
    return Tensor.from_numpy(values)


SHAPES = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_planned_results_are_the_full_paths_bit_for_bit(data: st.DataObject) -> None:
    monkeypatch = pytest.MonkeyPatch()
    try:
        shape = data.draw(SHAPES)
        a = data.draw(operand(shape, data.draw(DTYPES)))
        b = data.draw(operand(shape[data.draw(st.integers(0, len(shape))) :], data.draw(DTYPES)))
        calls: list[Callable[[], Any]] = [
            lambda: lt.add(a, b),
            lambda: lt.mul(a, b),
            lambda: lt.div(a, b),
            lambda: lt.equal(a, b),
            lambda: lt.logical_xor(a, b),
            lambda: lt.add(a, 1.5),
            lambda: lt.sub(2, a),
            lambda: lt.neg(a),
            lambda: lt.sum(a, None),
            lambda: lt.mean(a, -1 if shape else None, keepdims=True),
            lambda: lt.sum(a, tuple(range(0, len(shape), 2)), keepdims=True),  # a tuple of axes
            lambda: lt.any(a, None),
            lambda: a.materialize(),
        ]
        if a.dtype.kind == "f":
            calls += [lambda: lt.exp(a), lambda: lt.sigmoid(a)]
        if shape and a.dtype.kind == "f":
            column = Tensor.from_numpy(np.linspace(-1, 1, shape[-1]).astype(a.dtype)[:, None])
            calls += [lambda: lt.matmul(a, column), lambda: lt.matmul(column.view().T, a.view().T)]
        for call in calls:
            try:
                expected = full_path(call, monkeypatch)
            except TensorError as error:
                for _ in range(2):
                    with pytest.raises(type(error)):
                        call()
                continue
            for _ in range(2):  # the first makes the plan, the second uses it
                same(call(), expected)
    finally:
        monkeypatch.undo()


def test_while_suspended_every_repeated_call_reaches_its_rules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A cache answers in front of the rule functions; code that must see every call of a rule
    # (the implement checks' shortcut guard) suspends the caches.
    from llmfs.tensor import layout as layout_module
    from llmfs.tensor import ops

    a = Tensor.from_numpy(np.arange(12.0).reshape(3, 4))
    calls: list[str] = []
    broadcast, reversed_axes = ops.broadcast_shapes, layout_module.Layout.reversed_axes

    def counted_broadcast(*shapes: Any) -> Any:
        calls.append("broadcast_shapes")
        return broadcast(*shapes)

    def counted_reversed(self: Any) -> Any:
        calls.append("reversed_axes")
        return reversed_axes(self)

    monkeypatch.setattr(ops, "broadcast_shapes", counted_broadcast)
    monkeypatch.setattr(layout_module.Layout, "reversed_axes", counted_reversed)
    for _ in range(3):  # warm: the plans and the derived layouts are remembered
        lt.add(a, a), a.view().T
    calls.clear()
    lt.add(a, a), a.view().T
    assert "reversed_axes" not in calls  # answered by the cache
    with dispatch.suspended(), dispatch.suspended():  # blocks nest
        for _ in range(2):
            assert lt.add(a, a).tolist() == (a.to_numpy() * 2).tolist()
            assert a.view().T.shape == (4, 3)
    assert calls.count("reversed_axes") == 2 and calls.count("broadcast_shapes") >= 2
    calls.clear()
    assert a.view().T.shape == (4, 3)
    assert calls == []  # the caches answer again after the block


# -- the array an owner keeps for its planned ops ----------------------------------------------


def kept_arrays_agree(tensors: list[Tensor]) -> None:
    """Each owner's kept array (when it has one) is its storage with its shape: the same memory
    from the same first byte, and NumPy's row-major strides, as ``storage.reshape(shape)``."""
    for t in tensors:
        array = t._shaped
        if array is None:
            continue
        assert array.shape == t.shape and array.dtype == t.dtype
        assert array.strides == t._storage.reshape(t.shape).strides
        if t.size:
            assert np.shares_memory(array, t._storage)
            assert array.__array_interface__["data"][0] == t._storage.__array_interface__["data"][0]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_chains_of_planned_ops_on_planned_results_are_the_full_paths(data: st.DataObject) -> None:
    # Results keep the array they were computed in and the next op reads it: a chain of ops on
    # results (size-1 axes included, where NumPy's strides and the backend's differ) must give
    # the full path's bits, and every kept array must still be its owner's storage.
    monkeypatch = pytest.MonkeyPatch()
    try:
        shape = data.draw(SHAPES)
        dtype = data.draw(st.sampled_from(["float16", "float32", "float64"]))
        rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
        base = Tensor.from_numpy(rng.standard_normal(shape).astype(dtype))
        square = Tensor.from_numpy(rng.standard_normal((*shape[-1:],) * 2).astype(dtype))

        def chain() -> list[Tensor]:
            out = [base]
            x = base
            for _ in range(3):
                x = lt.add(lt.mul(x, 0.5), base)
                out += [x, lt.exp(x), lt.sum(x, -1 if shape else None, keepdims=True)]
                if shape:
                    x = lt.matmul(x, square)
                    out.append(x)
                out.append(x.materialize())
            return out

        expected = full_path(chain, monkeypatch)
        for _ in range(2):  # the first call makes the plans, the second uses them
            got = chain()
            for result, want in zip(got, expected):
                same(result, want)
            kept_arrays_agree(got)
    finally:
        monkeypatch.undo()


def test_a_kept_array_sees_every_write_to_its_owner() -> None:
    a = Tensor.from_numpy(np.ones((3, 4), dtype=np.float32))
    total = lt.add(a, a)
    lt.add(total, a), lt.add(total, a)  # total's kept array is read by a plan
    assert total._shaped is not None
    total.as_mut_slice()[0] = 10.0
    with total.mutate() as buf:
        buf[1] = 20.0
    assert lt.add(total, a).tolist()[0][:3] == [11.0, 21.0, 3.0]
    assert lt.sum(total, 1).tolist()[0] == 10.0 + 20.0 + 2.0 + 2.0
    kept_arrays_agree([a, total])


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_batch_times_one_shared_matrix_is_one_product_on_both_paths(data: st.DataObject) -> None:
    # x @ W over a batch: the batch and row axes of x merge into one matrix of rows when they
    # can (contiguous, sliced rows, size-1 axes), and stay a batched product when they cannot
    # (permuted batch axes); a broadcast 3-D W is the same shared matrix. Planned (small) and
    # full-path (large) results are the same bits, and NumPy's product to rounding.
    monkeypatch = pytest.MonkeyPatch()
    try:
        rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
        batch = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
        rows, inner, cols = (data.draw(st.integers(1, 5)) for _ in range(3))
        dtype = data.draw(st.sampled_from(["float32", "float64"]))
        layout = data.draw(st.sampled_from(["contiguous", "sliced", "permuted", "unit"]))
        if layout == "unit":
            batch = (*batch, 1)
        big = data.draw(st.booleans())  # past dispatch.MAX_VALUES: the full path every time
        if big:
            rows = dispatch.MAX_VALUES // (cols * int(np.prod(batch))) + 1
        x = matrix(rng, (*batch, rows + 2, inner), dtype).view()
        if layout == "sliced":
            x = x.slice(len(batch), 1, rows + 1)  # rows apart by a row of the owner
        else:
            x = x.slice(len(batch), 0, rows)
        if layout == "permuted" and len(batch) > 1:
            x = x.permute([1, 0, *range(2, x.rank)])
        w = matrix(rng, (inner, cols), dtype)
        shared = [w, w.view().unsqueeze(0).expand((*x.shape[:-2], inner, cols))]
        for right in shared:
            expected = full_path(lambda r=right: lt.matmul(x, r), monkeypatch)
            for _ in range(2):  # the first makes the plan, the second uses it
                same(lt.matmul(x, right), expected)
            np.testing.assert_allclose(
                expected.to_numpy(),
                np.matmul(x.to_numpy().astype(np.float64), w.to_numpy().astype(np.float64)),
                rtol=1e-5 if dtype == "float32" else 1e-12,
                atol=1e-5 if dtype == "float32" else 1e-12,
            )
    finally:
        monkeypatch.undo()


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_planned_results_are_row_major_whatever_order_their_operands_are_read_in(
    data: st.DataObject,
) -> None:
    # NumPy orders a result it allocates itself by its operands' strides (a reduction of a
    # permuted view, a batch of products); every planned result is nonetheless a row-major owner
    # whose kept array is its storage, on the call that makes the plan and on the ones using it.
    shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int32]))
    values = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) % 7
    order = tuple(data.draw(st.permutations(range(len(shape)))))
    x = Tensor.from_numpy(np.ascontiguousarray(values.transpose(order))).view()
    x = x.permute([order.index(axis) for axis in range(len(shape))])  # reads as ``values``
    assert x.shape == shape
    axis = data.draw(st.integers(0, len(shape) - 1))
    calls: list[Callable[[], Tensor]] = [
        lambda: lt.add(x, x),
        lambda: lt.mul(x, 2),
        lambda: lt.sum(x, axis),
        lambda: lt.max(x, axis),
        lambda: lt.neg(x),
    ]
    expected = [values + values, values * 2, values.sum(axis), values.max(axis), -values]
    if np.dtype(dtype).kind == "f":
        calls.append(lambda: lt.matmul(x, x.swapaxes(-1, -2)) if len(shape) > 1 else lt.exp(x))
        expected.append(
            np.matmul(values, np.swapaxes(values, -1, -2)) if len(shape) > 1 else np.exp(values)
        )
    for call, want in zip(calls, expected):
        for _ in range(3):  # the plan is made on the first call and used on the later ones
            result = call()
            kept_arrays_agree([result])
            storage = result._storage
            assert storage.ndim == 1 and storage.flags.c_contiguous and storage.size == result.size
            np.testing.assert_allclose(result.to_numpy(), want, rtol=1e-6)
            assert result.to_numpy().shape == np.shape(want)


def test_calls_alternating_between_plans_each_take_their_own() -> None:
    # The last plan of an op is taken again only for the very same key objects: calls that
    # alternate between operands of one shape but other strides, dtypes or number kinds each
    # get the result of their own plan.
    rng = np.random.default_rng(3)
    values = rng.standard_normal((4, 4))
    square = Tensor.from_numpy(values)
    transposed = Tensor.from_numpy(np.ascontiguousarray(values.T)).view().T  # same values
    single = Tensor.from_numpy(values.astype(np.float32))
    other = Tensor.from_numpy(rng.standard_normal((4, 4)))
    cases: list[tuple[Callable[[], Tensor], np.ndarray]] = [
        (lambda: lt.matmul(square, other), values @ other.to_numpy()),
        (lambda: lt.matmul(transposed, other), values @ other.to_numpy()),
        (lambda: lt.matmul(other, transposed), other.to_numpy() @ values),
        (lambda: lt.add(square, other), values + other.to_numpy()),
        (lambda: lt.add(single, 1), values.astype(np.float32) + np.float32(1)),
        (lambda: lt.add(single, 0.5), values.astype(np.float32) + np.float32(0.5)),
        (lambda: lt.add(transposed, other), values + other.to_numpy()),
    ]
    for _ in range(3):
        for call, expected in cases:
            result = call()
            assert result.dtype == expected.dtype
            np.testing.assert_allclose(result.to_numpy(), expected, rtol=1e-6)
    dispatch.clear()
    assert dispatch.LAST == {} and dispatch.PLANS == {}
    assert dispatch.LAST_OWNERS == {} and dispatch.LAST_UNARY == {} and dispatch.LAST_REDUCE == {}


def owner_fields(tensor: Tensor) -> dict[str, Any]:
    """Every slot of an owner but its storage and arrays, by name (a slot left unset reads as
    the string ``"unset"``)."""
    names = [n for cls in type(tensor).__mro__ for n in getattr(cls, "__slots__", ())]
    arrays = ("_storage", "_shaped", "_layout")
    return {n: getattr(tensor, n, "unset") for n in names if n not in arrays}


@pytest.mark.parametrize("name", [*OPS, "flat mul", "neg"])
def test_a_planned_result_is_a_new_owner_in_every_field(name: str) -> None:
    # The planned ops build their results field by field (what Tensor._adopt_layout does, in
    # line): every field a new owner has is set as that method sets it, the storage is a fresh
    # contiguous 1-D array and the kept array (if any) is that storage with the result's shape.
    rng = np.random.default_rng(4)
    a, b = matrix(rng, (3, 4)), matrix(rng, (3, 4))
    calls: dict[str, Callable[[], Tensor]] = {
        **{
            k: (lambda op=op, t=k == "matmul": op(a, b.view().T if t else b))
            for k, op in OPS.items()
        },
        "flat mul": lambda: lt.mul(a, a),
        "neg": lambda: lt.neg(a),
    }
    reference = Tensor._adopt_layout(np.zeros(12, np.float32), a.layout)
    for _ in range(3):  # the first call makes the plan, the others use it
        result = calls[name]()
        assert owner_fields(result) == owner_fields(reference)
        storage = result._storage
        assert storage.ndim == 1 and storage.flags.c_contiguous and storage.flags.writeable
        assert storage.size == max(result.size, 1) and result.layout.offset == 0
        if result._shaped is not None:
            assert result._shaped.shape == result.shape
            assert np.shares_memory(result._shaped, storage)
        a._storage[0] += 1.0  # the next call reads new values through the plan


def test_planned_ops_ignore_floating_point_errors_and_leave_the_callers_state() -> None:
    # The backend computes with every floating-point error ignored; a planned call does the
    # same (in a context of its own), on every thread, whatever error state the caller has set,
    # and leaves that state as it was.
    import threading

    huge = Tensor.from_numpy(np.full((4, 4), 3e38, np.float32))
    zero = Tensor.from_numpy(np.zeros((4, 4), np.float32))
    calls: list[Callable[[], Tensor]] = [
        lambda: lt.mul(huge, huge),  # overflow
        lambda: lt.div(zero, zero),  # invalid
        lambda: lt.exp(huge),  # overflow
        lambda: lt.matmul(huge, huge),  # overflow
        lambda: lt.sub(huge.view(), huge.view().T * 2),  # overflow, through views
        lambda: lt.sum(huge, 0),  # overflow
        lambda: lt.add(huge, 1e300),  # a weak number past float32's range, then overflow
        lambda: lt.exp(huge.view().T),  # overflow, through a view
    ]
    failures: list[BaseException] = []

    def run() -> None:
        try:
            with np.errstate(all="raise"):
                for _ in range(3):  # the first call makes the plan, the others use it
                    for call in calls:
                        values = call().to_numpy()
                        assert not np.isfinite(values).all()
                assert np.geterr() == {k: "raise" for k in ("divide", "over", "under", "invalid")}
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    run()
    for thread in threads:
        thread.join()
    assert failures == []


def _matrix_operand(rng: np.random.Generator, shape: tuple[int, int], dtype: str) -> Any:
    """``shape``'s values as an owner, a transposed view, or a slice with a gap between rows
    (of the matrix or of its transpose)."""
    values = (rng.standard_normal(shape) * 4).astype(dtype)
    kind = int(rng.integers(4))
    if kind == 0:
        return Tensor.from_numpy(values)
    if kind == 1:
        return Tensor.from_numpy(np.ascontiguousarray(values.T)).view().T
    if kind == 2:
        return Tensor.from_numpy(np.concatenate([values, values], axis=-1)).slice(1, 0, shape[1])
    doubled = np.concatenate([values.T, values.T], axis=-1)
    return Tensor.from_numpy(doubled).slice(1, 0, shape[0]).view().T


def test_a_planned_matmul_of_sliced_matrices_is_the_full_path_bit_for_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A matrix with a gap between its rows is summed in another order by ``ndarray.dot`` than
    # by np.matmul (seen for a row times a sliced matrix's transpose): the plan must not
    # change a single bit of what the full path computes.
    rng = np.random.default_rng(11)
    for trial in range(1500):
        m, k, n = (int(v) for v in rng.integers(1, 9, size=3))
        dtype = ("float64", "float32")[trial % 2]
        a = _matrix_operand(rng, (m, k), dtype)
        b = _matrix_operand(rng, (k, n), dtype)
        expected = full_path(lambda a=a, b=b: lt.matmul(a, b), monkeypatch)
        for _ in range(2):  # the first makes the plan, the second uses it
            same(lt.matmul(a, b), expected)
