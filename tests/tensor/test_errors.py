"""Every error class is raised by a real request, with its numbers and a plain-words message."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import llmfs
import llmfs.tensor as lt
from llmfs.tensor import Tensor, TensorError


@pytest.fixture
def view() -> lt.TensorView:
    return Tensor.from_vec([2, 3], [10, 11, 12, 20, 21, 22]).view()


def _every_module() -> list[str]:
    names = [
        info.name
        for info in pkgutil.walk_packages(llmfs.__path__, "llmfs.")
        if not info.name.endswith("__main__")  # the command line: importing it runs it
    ]
    for name in names:
        importlib.import_module(name)
    return names


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def library_errors() -> list[type[TensorError]]:
    """Every TensorError subclass the package defines, found by importing every module (so a
    class defined anywhere, even outside errors.py, is checked here)."""
    _every_module()
    return sorted(
        {c for c in _subclasses(TensorError) if c.__module__.startswith("llmfs.")},
        key=lambda c: c.__name__,
    )


def test_hierarchy() -> None:
    assert issubclass(TensorError, ValueError)
    assert issubclass(lt.TensorViewError, TensorError)
    assert issubclass(lt.AxisOutOfRangeError, IndexError)
    assert issubclass(lt.IndexOutOfBoundsError, IndexError)
    assert issubclass(lt.InvalidArgumentError, TypeError)
    assert issubclass(lt.ReshapeElementCountMismatchError, lt.ElementCountMismatchError)
    assert issubclass(lt.ReduceError, lt.EinsumError)
    assert issubclass(lt.KernelLintError, lt.KernelCompileError)
    assert issubclass(lt.MetalDTypeError, lt.DTypeError)
    for name in lt.__all__:
        item = getattr(lt, name)
        if isinstance(item, type) and issubclass(item, Exception):
            assert issubclass(item, TensorError), name


#: Where errors are declared: the library's in errors.py, einsum's and the Metal backend's with
#: them.
ERROR_MODULES = (
    "llmfs.tensor.errors",
    "llmfs.tensor.einsum.errors",
    "llmfs.tensor.backends.metal.errors",
)


def test_every_error_is_declared_once_in_an_errors_module_and_exported() -> None:
    errors = library_errors()
    assert len(errors) >= 40
    for cls in errors:
        name = cls.__name__
        assert cls.__module__ in ERROR_MODULES, f"{name} is defined in {cls.__module__}"
        assert getattr(lt, name, None) is cls, f"{name} is not reachable from llmfs.tensor"
        assert name in importlib.import_module(cls.__module__).__all__, name
        assert "__init__" not in cls.__dict__, f"{name} writes its own __init__"
        parents = [base for base in cls.__bases__ if issubclass(base, TensorError)]
        assert len(parents) == 1, f"{name} inherits from {parents}"
        assert isinstance(cls.condition, str) and cls.condition, name
        assert cls.template, name


def test_the_package_exports_the_error_bases_and_the_errors_module_not_every_error() -> None:
    exported = {name for name in lt.__all__ if name.endswith("Error")}
    assert exported == {"TensorError", "TensorViewError", "AutogradError", "StaleViewError"}
    assert "errors" in lt.__all__ and lt.errors is importlib.import_module("llmfs.tensor.errors")
    assert lt.errors.OverlappingWriteError is lt.OverlappingWriteError  # old names still work
    with pytest.raises(AttributeError, match="no attribute 'NoSuchError'"):
        _ = lt.NoSuchError
    with pytest.raises(AttributeError):
        _ = lt.ERROR_MODULES  # only error classes are looked up in the errors modules


def test_the_metal_errors_live_with_the_metal_backend() -> None:
    import llmfs.tensor.backends.metal as metal

    assert metal.errors.__all__ and all(
        name.startswith(("Metal", "Kernel")) for name in metal.errors.__all__
    )
    for name in metal.errors.__all__:
        assert getattr(metal, name) is getattr(lt, name) is getattr(metal.errors, name), name
        assert not hasattr(lt.errors, name), f"{name} is also defined in llmfs.tensor.errors"


# A sample value for each kind of field, by its annotation.
_SAMPLES = {"int": 3, "str": "words", "bool": False, "object": "thing", "int | None": 1}


def _sample(cls: type[TensorError], field: str) -> object:
    annotation = str(inspect.get_annotations(cls).get(field) or _annotation(cls, field))
    if annotation.startswith("list[tuple"):
        members = annotation.removeprefix("list[tuple[").removesuffix("]]").split(", ")
        return [tuple(4 if m == "int" else "no-double" for m in members)]
    if annotation.startswith("tuple[str"):
        return ("float32", "float64")
    if annotation.startswith("tuple["):
        return (2, 0, 5)
    return _SAMPLES.get(annotation, 1)


def _annotation(cls: type, field: str) -> object:
    return next(
        inspect.get_annotations(k)[field]
        for k in cls.__mro__
        if field in inspect.get_annotations(k)
    )


@pytest.mark.parametrize("cls", library_errors(), ids=lambda c: c.__name__)
def test_every_error_builds_its_message_from_its_fields(cls: type[TensorError]) -> None:
    values = {field: _sample(cls, field) for field in cls.fields}
    error = cls(**values)
    positional = cls(*values.values())
    assert str(error) == str(positional) == error.message
    assert "{" not in error.message.replace("{}", "") and error.message.strip()
    for field, value in values.items():
        assert getattr(error, field) == value
    assert list(error.details())[: len(cls.fields)] == list(cls.fields)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error) and copy.details() == error.details()


def _values(annotation: str) -> st.SearchStrategy[object]:
    """Any value of a field's annotation (sequences as lists, so storing them as tuples counts)."""
    if annotation.startswith("list[tuple"):
        # One value per member of the tuple: (int, str) pairs, (int, str, str) triples, ...
        members = annotation.removeprefix("list[tuple[").removesuffix("]]").split(", ")
        parts = [st.integers() if m == "int" else st.text(max_size=8) for m in members]
        return st.lists(st.tuples(*parts), max_size=4)
    if annotation.startswith("tuple[str"):
        return st.lists(st.text(max_size=8), max_size=20)
    if annotation.startswith("tuple["):
        return st.lists(st.integers(), max_size=70)
    simple: dict[str, st.SearchStrategy[object]] = {
        "int": st.integers(),
        "str": st.text(max_size=30),
        "bool": st.booleans(),
        "int | None": st.none() | st.integers(),
        "str | None": st.none() | st.text(max_size=3),
        "int | str": st.integers() | st.text(max_size=5),
    }
    anything = (
        st.none() | st.integers() | st.text(max_size=8) | st.lists(st.integers(), max_size=70)
    )
    return simple.get(annotation, anything)


@pytest.mark.parametrize("cls", library_errors(), ids=lambda c: c.__name__)
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_any_field_values_make_a_message_that_survives_pickling(
    cls: type[TensorError], data: st.DataObject
) -> None:
    values = {f: data.draw(_values(str(_annotation(cls, f))), label=f) for f in cls.fields}
    error = cls(**values)
    assert str(error) == error.message
    for field, value in values.items():
        kept = getattr(error, field)
        assert kept == (
            tuple(value) if str(_annotation(cls, field)).startswith("tuple[") else value
        )
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls and str(copy) == str(error) and copy.details() == error.details()
    # A long sequence is never spelled out in full: the message stays readable.
    for value in values.values():
        if isinstance(value, list) and len(value) > 12 and all(isinstance(v, int) for v in value):
            assert str(value)[1:-1] not in error.message


def test_a_field_error_refuses_wrong_arguments() -> None:
    with pytest.raises(TypeError, match="needs the field 'rank'"):
        lt.AxisOutOfRangeError(3)
    with pytest.raises(TypeError, match="unexpected or repeated field 'nope'"):
        lt.AxisOutOfRangeError(3, 2, nope=1)
    with pytest.raises(TypeError, match="takes 4 field"):
        lt.AxisOutOfRangeError(1, 2, 3, 4, 5)


def test_a_class_that_writes_init_is_refused_when_defined() -> None:
    with pytest.raises(TypeError, match="declare its fields"):

        class HandWritten(TensorError):
            def __init__(self) -> None:
                super().__init__("no")


def test_free_text_errors_take_one_message() -> None:
    error = lt.InvalidIndexError("an index may contain at most one '...'")
    assert error.message == str(error) == "an index may contain at most one '...'"
    assert error.details() == {"message": "an index may contain at most one '...'"}
    assert str(TensorError("plain words")) == "plain words"


def test_sequences_show_as_lists_and_keep_their_repr() -> None:
    error = lt.InvalidArgumentError("axis", [1, "x"])
    assert str(error) == "axis must be an integer, got [1, 'x']"
    assert str(lt.DuplicateAxisError(1, (1, 1))) == "axis 1 appears more than once in [1, 1]"


def test_a_long_sequence_shows_its_ends_and_its_length() -> None:
    error = raised(lambda: Tensor.zeros((1,) * 65))
    assert str(error) == (
        "invalid shape [1, 1, 1, 1, 1, 1, 1, 1, ..., 1, 1] (65 entries): rank 65 is above the "
        "limit of 64 axes (NumPy's maximum)"
    )
    assert error.shape == [1] * 65  # the field keeps every size


@pytest.mark.parametrize(
    ("call", "plural"),
    [
        (lambda v: v.permute("ab"), "axes"),
        (lambda v: v.get("ab"), "indices"),
        (lambda v: lt.as_strided(v.owner, [2, 3], "ab", 0), "strides"),
    ],
)
def test_messages_use_real_plurals(view: lt.TensorView, call, plural: str) -> None:
    error = raised(lambda: call(view))  # strides are reported inside an InvalidLayoutError
    assert f"{plural} must be integers (one or a sequence of them), got 'ab'" in str(error)
    assert "axiss" not in str(error) and "indexs" not in str(error)


def raised(fn) -> TensorError:
    with pytest.raises(TensorError) as info:
        fn()
    return info.value


def test_shape_overflow() -> None:
    # A zero early in the shape must not hide the overflow of the later sizes.
    error = raised(lambda: Tensor.zeros([0, 2**40, 2**40]))
    assert isinstance(error, lt.ShapeOverflowError)
    assert error.shape == (0, 2**40, 2**40)
    assert "exceeds the largest signed 64-bit index" in str(error)


def test_element_count_mismatch() -> None:
    error = raised(lambda: Tensor.from_vec([2, 3], [1, 2, 3]))
    assert type(error) is lt.ElementCountMismatchError
    assert (error.expected, error.actual) == (6, 3)
    assert "the shape holds 6 values but 3 values were given" in str(error)


def test_reshape_element_count_mismatch(view: lt.TensorView) -> None:
    error = raised(lambda: view.reshape([4, 2]))
    assert isinstance(error, lt.ReshapeElementCountMismatchError)
    assert (error.current, error.requested) == (6, 8)


def test_non_contiguous_reshape(view: lt.TensorView) -> None:
    error = raised(lambda: view.transpose(0, 1).reshape([6]))
    assert isinstance(error, lt.NonContiguousReshapeError)
    assert str(error) == (
        "cannot reshape shape [3, 2] with strides [1, 3] to [6] without copying: axes 0 and 1 "
        "(sizes 3, 2; strides 1, 3) are not adjacent in storage: 1 != 2*3. Call materialize() "
        "first to get a contiguous copy, then reshape that"
    )


def test_rank_mismatch(view: lt.TensorView) -> None:
    error = raised(lambda: view.get([1]))
    assert isinstance(error, lt.RankMismatchError)
    assert (error.expected, error.actual) == (2, 1)
    assert "must be 2, got 1" in str(error)


def test_axis_out_of_range(view: lt.TensorView) -> None:
    error = raised(lambda: view.transpose(0, 2))
    assert isinstance(error, lt.AxisOutOfRangeError)
    assert (error.axis, error.rank) == (2, 2)
    assert str(error) == "axis 2 is out of range for rank 2 (valid axes: [-2, 2))"


def test_duplicate_axis(view: lt.TensorView) -> None:
    error = raised(lambda: view.permute([1, 1]))
    assert isinstance(error, lt.DuplicateAxisError)
    assert str(error) == "axis 1 appears more than once in [1, 1]"


def test_permutation_length_mismatch(view: lt.TensorView) -> None:
    error = raised(lambda: view.permute([0]))
    assert isinstance(error, lt.PermutationLengthMismatchError)
    assert "rank 2 but the permutation lists 1 axes" in str(error)


def test_slice_errors(view: lt.TensorView) -> None:
    error = raised(lambda: view.slice(1, 2, 1))
    assert isinstance(error, lt.SliceStartAfterEndError)
    assert "start 2 > stop 1" in str(error)
    error = raised(lambda: view.slice(1, 1, 4))
    assert isinstance(error, lt.SliceEndOutOfBoundsError)
    assert (error.axis, error.stop, error.size) == (1, 4, 3)
    error = raised(lambda: view.slice(1, -1, 2))
    assert isinstance(error, lt.IndexOutOfBoundsError)
    assert "slice start -1 is out of bounds for axis 1" in str(error)
    error = raised(lambda: view.slice(1, 0, 2, 0))
    assert isinstance(error, lt.InvalidStepError)
    assert "step must be >= 1" in str(error)


def test_index_out_of_bounds(view: lt.TensorView) -> None:
    error = raised(lambda: view.get([0, 3]))
    assert isinstance(error, lt.IndexOutOfBoundsError)
    assert str(error) == "index 3 is out of bounds for axis 1 of size 3 (valid: 0 <= index < 3)"
    assert isinstance(raised(lambda: view.get([-1, 0])), lt.IndexOutOfBoundsError)
    # Indexing and take count negative indices from the end, and their message says so.
    assert str(raised(lambda: view[-3])) == (
        "index -3 is out of bounds for axis 0 of size 2 (valid: -2 <= index < 2; a negative "
        "index counts from the end)"
    )
    ids = Tensor.from_vec([1], [2], dtype="int64")
    assert str(raised(lambda: lt.take(view, ids, axis=0))) == (
        "id 2 is out of bounds for axis 0 of size 2 (valid: -2 <= id < 2; a negative id counts "
        "from the end)"
    )


def test_stale_view() -> None:
    tensor = Tensor.arange(4)
    view = tensor.view()
    tensor.as_mut_slice()[0] = 5.0
    error = raised(view.tolist)
    assert isinstance(error, lt.StaleViewError)
    assert "the owner was mutated after this view was made" in str(error)
    assert "tensor.view()" in str(error) and "materialize()" in str(error)


def test_broadcast_error(view: lt.TensorView) -> None:
    error = raised(lambda: view.expand([2, 4]))
    assert isinstance(error, lt.BroadcastError)
    assert "axis 1: source size 3 cannot expand to 4" in str(error)
    error = raised(lambda: lt.broadcast_shapes((2, 3), (4, 3)))
    assert "cannot broadcast shape [2, 3] with [4, 3]: axis 0: sizes 2 and 4" in str(error)


def test_invalid_layout() -> None:
    error = raised(lambda: lt.as_strided(Tensor.zeros([6]), [2, 3], [3, 2], 0))
    assert isinstance(error, lt.InvalidLayoutError)
    assert "largest reachable offset is 7" in str(error)


def test_invalid_shape_and_squeeze_and_ranges(view: lt.TensorView) -> None:
    assert isinstance(raised(lambda: Tensor.zeros([2, -1])), lt.InvalidShapeError)
    assert isinstance(raised(lambda: Tensor.zeros([2.5])), lt.InvalidShapeError)
    error = raised(lambda: view.squeeze(0))
    assert isinstance(error, lt.SqueezeError)
    assert "its size is 2" in str(error)
    assert isinstance(raised(lambda: view.merge(1, 0)), lt.InvalidAxisRangeError)
    assert isinstance(raised(lambda: view[0, 0, 0]), lt.InvalidIndexError)
    assert isinstance(raised(lambda: view["a"]), lt.InvalidIndexError)


def test_dtype_error() -> None:
    error = raised(lambda: Tensor.zeros([2], dtype="int8"))
    assert isinstance(error, lt.DTypeError)
    assert re.search(
        r"unsupported dtype int8 .* supported: bool, int32, int64, float16, float32, float64",
        str(error),
    )
    assert isinstance(raised(lambda: Tensor.from_vec([1], ["x"])), TensorError)


def test_closed_mutation() -> None:
    tensor = Tensor.zeros([2])
    with tensor.mutate() as buffer:
        buffer[0] = 1.0
    error = raised(lambda: buffer.__setitem__(1, 2.0))
    assert isinstance(error, lt.ClosedMutationError)
    assert "window has closed" in str(error)


def test_constructors_refuse_non_numbers() -> None:
    assert "real numbers" in str(raised(lambda: Tensor.full([2], "x")))
    assert "one real number" in str(raised(lambda: Tensor.full([2], [1.0, 2.0])))
    assert "could not be read as numbers" in str(raised(lambda: Tensor.from_numpy([[1, 2], [3]])))
    assert "flat sequence" in str(raised(lambda: Tensor.from_vec([2], 5.0)))


def test_a_metal_dtype_error_keeps_its_reason_as_a_field_the_message_is_built_from() -> None:
    from llmfs.tensor.backends.metal.errors import MetalDTypeError

    for dtype, words in (("float64", "64-bit floating point"), ("int64", "32-bit integers")):
        error = MetalDTypeError(dtype, where="the metal backend")
        assert words in error.reason and str(error).endswith(error.reason)
