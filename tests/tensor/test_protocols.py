"""NumPy's Python protocols on ``Tensor`` and ``TensorView`` alike.

``len`` is the size of axis 0, iteration walks axis 0, ``bool``/``float``/``int``/``item`` need
exactly one value, ``reshape``/``permute``/``expand``/``view`` take sizes as separate arguments
or as one sequence, ``transpose()`` reverses the axes, and ``repr``/``str`` show the values as
NumPy prints them, then the layout and the owner. Each behaviour is checked against NumPy on the
same data.
"""

from __future__ import annotations

import numpy as np
import pytest

from llmfs.tensor import Tensor, TensorError, TensorView
from llmfs.tensor.layout import Layout


def owner() -> Tensor:
    return Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22])


def both() -> list[Tensor | TensorView]:
    return [owner(), owner().view()]


@pytest.fixture(params=["tensor", "view"])
def t(request: pytest.FixtureRequest) -> Tensor | TensorView:
    tensor = owner()
    return tensor if request.param == "tensor" else tensor.view()


# -- len, iteration, ndim, size ---------------------------------------------------------------


def test_len_is_the_size_of_axis_0_and_size_counts_every_value(t) -> None:
    array = np.arange(6.0).reshape(2, 3)
    assert len(t) == len(array) == 2
    assert t.size == array.size == 6
    assert t.ndim == t.rank == array.ndim == 2
    assert len(t.transpose(0, 1)) == 3


def test_len_of_a_rank_0_tensor_is_a_tensor_error() -> None:
    scalar = Tensor.from_vec([], [5.0])
    for item in (scalar, scalar.view()):
        with pytest.raises(TensorError, match="rank-0"):
            len(item)
    with pytest.raises(TypeError):
        len(np.array(5.0))  # NumPy refuses too


def test_iteration_yields_views_along_axis_0(t) -> None:
    rows = list(t)
    assert [type(row) for row in rows] == [TensorView, TensorView]
    assert [row.tolist() for row in rows] == [[10, 11, 12], [20, 21, 22]]
    assert all(row.shares_storage(t) for row in rows)
    assert [row.base_offset for row in rows] == [0, 3]
    with pytest.raises(TensorError, match="rank-0"):
        iter(Tensor.from_vec([], [1.0]).view())


def test_a_tensor_and_its_view_share_one_implementation() -> None:
    from llmfs.tensor.view import ViewMethods

    shared = {name for name in vars(ViewMethods) if not name.startswith("__")}
    # Each class supplies only what ViewMethods reads: its layout, its owner, its freshness.
    required = {"layout", "owner", "_check_fresh", "_owns_storage"}
    for cls in (Tensor, TensorView):
        overridden = shared & set(vars(cls))
        assert overridden <= required, f"{cls.__name__} repeats {sorted(overridden - required)}"
    tensor = owner()
    for name in ("reshape", "permute", "transpose", "slice", "flip", "expand", "__len__"):
        assert getattr(Tensor, name) is getattr(TensorView, name)
    assert tensor.layout == Layout((2, 3), (3, 1), 0)
    assert tensor.view().layout == tensor.layout
    assert tensor.owner is tensor and tensor.view().owner is tensor


def test_an_owner_and_a_view_are_one_class_each_over_the_shared_reader() -> None:
    from llmfs.tensor.view import ViewMethods

    # No mixins: the operators and autograd methods are the shared reader's own; what differs
    # (an owner keeps its gradient, a view passes it on) is each class's.
    assert Tensor.__mro__ == (Tensor, ViewMethods, object)
    assert TensorView.__mro__ == (TensorView, ViewMethods, object)
    for name in ("__add__", "__matmul__", "__eq__", "astype", "backward", "detach"):
        assert name in vars(ViewMethods), name
    for cls in (Tensor, TensorView):
        assert {"grad", "grad_fn", "is_leaf"} <= set(vars(cls)), cls.__name__


def test_the_writer_state_is_one_object_present_only_while_a_write_goes_on() -> None:
    tensor = owner()
    assert tensor._writer is None
    with tensor.mutate() as storage:
        write = tensor._writer
        assert write is not None and write.window_open and write.depth == 1
        storage[0] = 5  # a write inside the window: the same state, no second writer
        assert tensor._writer is write and write.depth == 1
    assert tensor._writer is None and not write.window_open
    tensor.as_mut_slice()[0] = 6
    assert tensor._writer is None and tensor.version == 3


# -- one value: item, float, int, bool ---------------------------------------------------------


def test_item_float_and_int_of_one_value(t) -> None:
    one = t[1, 2]
    assert one.item() == 22 and isinstance(one.item(), int)  # an int64 tensor gives Python ints
    assert float(one) == 22.0 and isinstance(float(one), float)
    assert int(t[0, 1]) == 11
    assert t[1:, 2:].item() == 22  # any shape holding exactly one value


@pytest.mark.parametrize("convert", [float, int, lambda x: x.item()])
def test_several_or_no_values_cannot_become_one_number(t, convert) -> None:
    with pytest.raises(TensorError, match=r"exactly one value, but shape \[2, 3\] holds 6"):
        convert(t)
    with pytest.raises(TensorError, match="holds 0"):
        convert(t[:, 0:0])


def test_bool_follows_numpy(t) -> None:
    assert bool(t[0, 0]) is True
    assert bool(Tensor.from_vec([1, 1], [0.0])) is bool(np.array([[0.0]])) is False
    with pytest.raises(TensorError, match=r"6 values .* is ambiguous.*\.all\(\).*\.any\(\)"):
        bool(t)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(np.arange(6.0))
    with pytest.raises(TensorError, match=r"empty tensor .* ambiguous.*\.size > 0"):
        bool(t[:, 0:0])
    with pytest.raises(ValueError, match="empty array is ambiguous"):
        bool(np.array([]))


# -- varargs spellings -------------------------------------------------------------------------


def test_reshape_permute_expand_and_view_take_sizes_either_way(t) -> None:
    assert t.reshape(3, 2).layout == t.reshape([3, 2]).layout == Layout((3, 2), (2, 1), 0)
    assert t.reshape(-1).shape == (6,) == t.reshape(6).shape
    assert t.permute(1, 0).layout == t.permute([1, 0]).layout == Layout((3, 2), (1, 3), 0)
    assert t[0:1].expand(4, 3).shape == t[0:1].expand([4, 3]).shape == (4, 3)
    assert t.view(3, 2).layout == t.reshape(3, 2).layout  # PyTorch's view(shape)
    assert t.view().layout == t.layout


def test_transpose_swaps_two_axes_or_reverses_all() -> None:
    cube = Tensor.from_numpy(np.arange(24.0).reshape(2, 3, 4))
    array = np.arange(24.0).reshape(2, 3, 4)
    assert cube.transpose(0, 2).shape == np.swapaxes(array, 0, 2).shape == (4, 3, 2)
    assert cube.transpose().tolist() == array.transpose().tolist()
    assert cube.transpose().layout == cube.T.layout == Layout((4, 3, 2), (1, 4, 12), 0)
    with pytest.raises(TensorError, match=r"no axis .* or two axes"):
        cube.transpose(2, 0, 1)


def test_storage_offset_without_a_coordinate_is_pytorchs() -> None:
    view = owner().view().slice(1, 1, 3)
    assert view.storage_offset() == view.base_offset == 1
    assert view.storage_offset([1, 1]) == 5


# -- printing ----------------------------------------------------------------------------------


def test_repr_shows_values_as_numpy_then_layout_and_owner() -> None:
    tensor = owner()
    assert repr(tensor) == (
        "Tensor([[10, 11, 12],\n"
        "        [20, 21, 22]])\n"
        "layout: shape (2, 3), strides (3, 1), offset 0; dtype int64\n"
        "owner: itself (6 values of storage)"
    )
    view = tensor.view().slice(1, 1, 3)
    assert repr(view) == (
        "TensorView([[11, 12],\n"
        "            [21, 22]])\n"
        "layout: shape (2, 2), strides (3, 1), offset 1; dtype int64\n"
        "owner: a Tensor of shape (2, 3) (6 values of storage), shared, not copied"
    )
    assert str(view).splitlines()[:2] == str(np.array([[11, 12], [21, 22]])).splitlines()


def test_large_views_are_summarised_as_numpy_does() -> None:
    big = Tensor.zeros([2000])
    broadcast = big.view()[None, :].expand(10**6, 2000)  # 2e9 values, never copied
    text = repr(broadcast)
    assert "..." in text and len(text) < 2000
    assert text.splitlines()[0] == "TensorView([[0., 0., 0., ..., 0., 0., 0.],"


def test_a_stale_view_prints_without_reading() -> None:
    tensor = owner()
    view = tensor.view()
    tensor.as_mut_slice()[0] = 1.0
    assert "stale" in repr(view)


# -- NumPy and PyTorch spellings of the course's names -----------------------------------------


def test_item_takes_a_coordinate_or_a_flat_index_as_numpy() -> None:
    tensor = owner()
    array = np.array([[10.0, 11.0, 12.0], [20.0, 21.0, 22.0]])
    assert tensor.item(1, 2) == array.item(1, 2) == 22.0
    assert tensor.view().T.item(4) == array.T.item(4) == 12.0
    with pytest.raises(TensorError, match="flat index"):
        tensor.item(6)


def test_numpy_and_pytorch_names_do_what_the_course_names_do(t) -> None:
    assert t.copy().tolist() == t.clone().tolist() == t.materialize().tolist()
    assert not t.copy().shares_storage(t)
    assert t.swapaxes(0, 1).layout == t.transpose(0, 1).layout
    assert t.unflatten(1, [3, 1]).layout == t.split(1, [3, 1]).layout
    assert t.broadcast_to([4, 2, 3]).layout == t.expand(4, 2, 3).layout
