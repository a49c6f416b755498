"""``execute_into`` writes the result into the output it is given, through that output's layout.

"Into" is checked two ways: the values land in the given owner's storage at the offsets its
layout names (a transposed, stepped or flipped view included), and no array of the output's size
is allocated on the way (NumPy reports its allocations to :mod:`tracemalloc`), where the dtype
allows it.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable

import numpy as np
import pytest

from llmfs.tensor import (
    ContractionPlan,
    EinsumPlan,
    OutputBufferError,
    OverlappingWriteError,
    StaleViewError,
    Tensor,
    TensorView,
    as_strided,
    copyto,
    use_backend,
)

from ..backends.support import BACKEND_DTYPES, assert_close
from .support import rand


def peak_bytes(fn: Callable[[], object]) -> int:
    """The most memory traced while ``fn`` runs, above what was in use when it started."""
    tracemalloc.start()
    try:
        fn()  # warm caches (BLAS buffers, ufunc loops) outside the measurement
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        fn()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_execute_into_writes_an_owned_output() -> None:
    a, b = rand(2, 3), rand(3, 4)
    plan = EinsumPlan("ij,jk->ik", a, b)
    out = Tensor.zeros((2, 4))
    old_view = out.view()
    assert plan.execute_into(out, a, b) is out
    np.testing.assert_allclose(out.to_numpy(), a.to_numpy() @ b.to_numpy())
    with pytest.raises(StaleViewError):
        old_view.tolist()


@pytest.mark.parametrize(
    ("expression", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),  # a matrix product
        ("ij,jk->ki", [(3, 4), (4, 5)]),  # ... written transposed
        ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),  # batched
        ("i,j->ij", [(3,), (5,)]),  # a broadcast product, nothing contracted
        ("ij->ji", [(5, 3)]),  # a copy
        ("ijk->ki", [(5, 2, 3)]),  # a sum
        ("ij,jk,kl->il", [(3, 2), (2, 4), (4, 5)]),  # three operands
    ],
)
@pytest.mark.parametrize("layout", ["owned", "transposed", "stepped", "flipped"])
def test_execute_into_writes_through_the_outputs_layout(
    expression: str, shapes: list[tuple[int, ...]], layout: str
) -> None:
    operands = [rand(*shape, seed=k) for k, shape in enumerate(shapes)]
    plan = EinsumPlan(expression, *operands)
    want = np.einsum(expression, *(o.to_numpy() for o in operands))
    shape = plan.output_shape
    last = len(shape) - 1
    if layout == "owned":
        owner = Tensor.full(shape, -1.0)
        out: Tensor | TensorView = owner
        read = owner.to_numpy
    elif layout == "transposed":  # the owner holds the output with its axes reversed
        owner = Tensor.full(shape[::-1], -1.0)
        out = owner.view().permute(tuple(range(last, -1, -1)))
        read = lambda: owner.to_numpy().transpose()  # noqa: E731
    elif layout == "stepped":  # every other row of a taller owner; the others stay untouched
        owner = Tensor.full((2 * shape[0], *shape[1:]), -1.0)
        out = owner.view()[::2]
        read = lambda: owner.to_numpy()[::2]  # noqa: E731
    else:
        owner = Tensor.full(shape, -1.0)
        out = owner.view().flip(last)
        read = lambda: np.flip(owner.to_numpy(), last)  # noqa: E731
    result = plan.execute_into(out, *operands)
    np.testing.assert_allclose(read(), want, rtol=1e-12, atol=1e-12)
    assert result.owner is owner if isinstance(result, TensorView) else result is owner
    np.testing.assert_allclose(result.to_numpy(), want, rtol=1e-12, atol=1e-12)
    if layout == "stepped":
        assert (owner.to_numpy()[1::2] == -1.0).all()  # only the view's offsets were written


@pytest.mark.parametrize(
    ("expression", "shapes"),
    [
        ("ik,kj->ij", [(512, 32), (32, 512)]),
        ("ik,kj->ji", [(512, 32), (32, 512)]),
        ("i,j->ij", [(512,), (512,)]),
        ("ikj->ij", [(512, 2, 512)]),
    ],
)
@pytest.mark.parametrize("transposed", [False, True])
def test_execute_into_allocates_no_output_sized_array(
    expression: str, shapes: list[tuple[int, ...]], transposed: bool
) -> None:
    operands = [rand(*shape, seed=k) for k, shape in enumerate(shapes)]
    plan = EinsumPlan(expression, *operands)
    owner = Tensor.zeros(plan.output_shape[::-1] if transposed else plan.output_shape)

    def out() -> Tensor | TensorView:
        return owner.view().T if transposed else owner

    # The output is 2 MiB; what may be allocated is smaller and does not grow with it: NumPy's
    # ufunc buffers (8192 values per operand) and BLAS's copy of an operand (128 KiB here).
    size = owner.to_numpy().nbytes
    assert peak_bytes(lambda: plan.execute(*operands)) >= size  # the measure sees a result
    assert peak_bytes(lambda: plan.execute_into(out(), *operands)) < size // 4
    np.testing.assert_allclose(
        plan.execute_into(out(), *operands).to_numpy(),
        np.einsum(expression, *(o.to_numpy() for o in operands)),
        rtol=1e-10,  # BLAS sums in its own order
        atol=1e-12,
    )


def test_execute_into_rounds_once_to_a_narrower_output() -> None:
    a, b = rand(6, 5, dtype="float16"), rand(5, 7, dtype="float16", seed=1)
    plan = EinsumPlan("ik,kj->ji", a, b)
    out = Tensor.zeros((7, 6), dtype="float16")
    plan.execute_into(out, a, b)
    assert out.tolist() == plan.execute(a, b).tolist()  # computed in float32, rounded once


def test_execute_into_on_a_backend_without_strided_writes() -> None:
    a, b = rand(3, 4), rand(4, 5, seed=1)
    plan = EinsumPlan("ij,jk->ik", a, b)
    owner = Tensor.zeros((5, 3))
    with use_backend("reference"):
        plan.execute_into(owner.view().T, a, b)
    np.testing.assert_allclose(owner.to_numpy().T, a.to_numpy() @ b.to_numpy())


@pytest.mark.parametrize("backend", ["numpy", "reference"])
def test_execute_into_writes_an_interleaved_view_that_reaches_each_offset_once(
    backend: str,
) -> None:
    # Shape (3, 3) with strides (3, 2) reaches 0, 2, 4, 3, 5, 7, 6, 8, 10: no offset twice,
    # though the strides interleave. copyto writes it, so execute_into must too.
    a, b = rand(3, 4), rand(4, 3, seed=1)
    owner = Tensor.zeros((11,))
    out = as_strided(owner, [3, 3], [3, 2], 0)
    with use_backend(backend):
        written = EinsumPlan("ij,jk->ik", a, b).execute_into(out, a, b)
    want = a.to_numpy() @ b.to_numpy()
    np.testing.assert_allclose(written.to_numpy(), want, rtol=1e-12, atol=1e-12)
    storage = owner.to_numpy()
    offsets = np.arange(3)[:, None] * 3 + np.arange(3)[None, :] * 2
    np.testing.assert_allclose(storage[offsets], want, rtol=1e-12, atol=1e-12)
    untouched = np.setdiff1d(np.arange(11), offsets)
    assert (storage[untouched] == 0).all()  # offsets 1 and 9 are no coordinate's


def test_execute_into_accepts_exactly_the_outputs_copyto_accepts() -> None:
    # One rule decides whether a layout may be written through: a random explicit layout is
    # refused by execute_into exactly when copyto finds two coordinates sharing a cell.
    rng = np.random.default_rng(21)
    for _ in range(200):
        rows, cols = (int(v) for v in rng.integers(1, 4, size=2))
        strides = [int(v) for v in rng.integers(-3, 4, size=2)]
        base = sum((n - 1) * -s for n, s in zip((rows, cols), strides) if s < 0)
        length = base + sum((n - 1) * s for n, s in zip((rows, cols), strides) if s > 0) + 1
        a, b = rand(rows, 2), rand(2, cols, seed=1)
        plan = EinsumPlan("ij,jk->ik", a, b)
        try:
            copyto(as_strided(Tensor.zeros((length,)), [rows, cols], strides, base), 1.0)
            copy_refused = False
        except OverlappingWriteError:
            copy_refused = True
        out = as_strided(Tensor.zeros((length,)), [rows, cols], strides, base)
        try:
            written = plan.execute_into(out, a, b)
        except OutputBufferError:
            assert copy_refused, (rows, cols, strides)
            continue
        assert not copy_refused, (rows, cols, strides)
        np.testing.assert_allclose(written.to_numpy(), a.to_numpy() @ b.to_numpy(), rtol=1e-12)


def test_execute_into_refuses_outputs_it_cannot_write() -> None:
    a, b = rand(3, 4), rand(4, 5, seed=1)
    plan = EinsumPlan("ij,jk->ik", a, b)
    with pytest.raises(OutputBufferError, match="reaches some offsets from several coordinates"):
        plan.execute_into(Tensor.zeros((1, 5)).view().expand((3, 5)), a, b)
    with pytest.raises(OutputBufferError, match=r"shape is \[5, 3\]"):
        plan.execute_into(Tensor.zeros((5, 3)), a, b)
    with pytest.raises(OutputBufferError, match="dtype is float32"):
        plan.execute_into(Tensor.zeros((3, 5), dtype="float32"), a, b)
    with pytest.raises(OutputBufferError, match="must be a Tensor or a TensorView, got ndarray"):
        plan.execute_into(np.zeros((3, 5)), a, b)  # type: ignore[arg-type]
    owner = Tensor.zeros((3, 5))
    stale = owner.view()
    owner.as_mut_slice()[0] = 1.0
    with pytest.raises(StaleViewError):
        plan.execute_into(stale, a, b)
    shared = Tensor.zeros((4, 5))
    square = EinsumPlan("ij,jk->ik", rand(4, 4), shared)
    with pytest.raises(OutputBufferError, match="shared with operand 1"):
        square.execute_into(shared.view(), rand(4, 4), shared)


def test_contraction_execute_into_writes_and_refuses_shared_buffers() -> None:
    a, b, c = rand(3, 4, seed=1), rand(4, 5, seed=2), rand(3, 5, seed=3)
    plan = ContractionPlan(a, b, c)
    out = Tensor.zeros((3, 5))
    assert plan.execute_into(out, a, b, c, alpha=1.0, beta=1.0) is out
    np.testing.assert_allclose(out.to_numpy(), a.to_numpy() @ b.to_numpy() + c.to_numpy())
    with pytest.raises(OutputBufferError, match="shared with operand 2"):
        plan.execute_into(c, a, b, c)
    with pytest.raises(OutputBufferError, match=r"shape is \[5, 3\]"):
        plan.execute_into(Tensor.zeros((5, 3)), a, b, c)
    with pytest.raises(OutputBufferError, match="dtype is float32"):
        plan.execute_into(Tensor.zeros((3, 5), dtype="float32"), a, b, c)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 1.0), (0.5, -2.0)])
def test_contraction_execute_into_equals_execute(dtype: str, alpha: float, beta: float) -> None:
    a, b = rand(4, 3, 6, dtype=dtype, seed=1), rand(6, 5, dtype=dtype, seed=2)
    bias = rand(5, dtype=dtype, seed=3)
    plan = ContractionPlan(a, b, bias)
    owner = Tensor.zeros((4, 5, 3), dtype=dtype)
    got = plan.execute_into(owner.view().permute((0, 2, 1)), a, b, bias, alpha=alpha, beta=beta)
    want = plan.execute(a, b, bias, alpha=alpha, beta=beta)
    assert got.tolist() == want.tolist()  # the same arithmetic, rounded once
    assert owner.to_numpy().transpose(0, 2, 1).tolist() == want.tolist()


def test_contraction_execute_into_allocates_no_output_sized_array() -> None:
    a, b, c = rand(512, 32, seed=1), rand(32, 512, seed=2), rand(512, 512, seed=3)
    plan = ContractionPlan(a, b, c)
    owner = Tensor.zeros((512, 512))
    size = owner.to_numpy().nbytes
    assert peak_bytes(lambda: plan.execute(a, b, c, alpha=2.0)) >= size
    assert peak_bytes(lambda: plan.execute_into(owner.view().T, a, b, c, alpha=2.0)) < size // 4
    want = 2.0 * (a.to_numpy() @ b.to_numpy()) + c.to_numpy()
    np.testing.assert_allclose(owner.to_numpy().T, want, rtol=1e-12)


@pytest.mark.parametrize(
    ("expression", "operands"),
    [
        ("i,i->", lambda: [rand(5), rand(5, seed=1)]),  # a rank-0 output
        ("i->", lambda: [rand(5)]),
        ("ii->i", lambda: [rand(4, 4)]),  # a diagonal
        (",->", lambda: [2.0, 3.0]),  # numbers only
        (",ij->ji", lambda: [2.0, rand(2, 3)]),
        ("ij,jk->ik", lambda: [rand(2, 0), rand(0, 3)]),  # every value a sum of nothing
        ("ij->", lambda: [rand(0, 3)]),
        ("...ij,...jk->...ik", lambda: [rand(2, 1, 3, 4), rand(5, 4, 2, seed=1)]),
        ("bij,bjk->bki", lambda: [rand(2, 3, 4), rand(2, 4, 5, seed=1)]),
    ],
)
def test_execute_into_equals_execute(expression: str, operands: Callable[[], list]) -> None:
    values = operands()
    plan = EinsumPlan(expression, *values)
    out = Tensor.full(plan.output_shape, -1.0)
    plan.execute_into(out, *values)
    np.testing.assert_allclose(out.to_numpy(), plan.execute(*values).to_numpy(), rtol=1e-12)


@pytest.mark.parametrize(("backend", "dtype"), BACKEND_DTYPES)
def test_execute_into_on_every_backend(backend: str, dtype: str) -> None:
    a, b = rand(3, 4, dtype=dtype), rand(4, 5, dtype=dtype, seed=1)
    bias = rand(3, 1, dtype=dtype, seed=2)
    with use_backend(backend):
        product = EinsumPlan("ij,jk->ki", a, b)  # written transposed
        owner = Tensor.full((3, 5), -1.0, dtype=dtype)
        product.execute_into(owner.view().T, a, b)
        contraction = ContractionPlan(a, b, bias)
        stepped = Tensor.full((6, 5), -1.0, dtype=dtype)
        contraction.execute_into(stepped.view()[::2], a, b, bias, alpha=2.0, beta=0.5)
        outer = EinsumPlan("i,j->ji", a.view()[0], b.view()[0])
        flipped = Tensor.full((4, 5), -1.0, dtype=dtype)
        outer.execute_into(flipped.view().flip(0).T, a.view()[0], b.view()[0])
    x, y, c = (t.to_numpy().astype(np.float64) for t in (a, b, bias))
    assert_close(owner, x @ y, dtype, scale=np.abs(x) @ np.abs(y))
    assert_close(
        Tensor.from_numpy(stepped.to_numpy()[::2]),
        2.0 * (x @ y) + 0.5 * c,
        dtype,
        scale=2.0 * (np.abs(x) @ np.abs(y)) + np.abs(c),
    )
    assert (stepped.to_numpy()[1::2] == -1.0).all()
    assert_close(Tensor.from_numpy(flipped.to_numpy()[::-1]), np.outer(x[0], y[0]), dtype)
