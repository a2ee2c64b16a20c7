"""The structure of a dataset's elements: a nested structure (tuples, dicts, namedtuples) of
components, each with a dtype and a static shape, flattened for the ops (whose attrs list one
type and shape per component) and packed back for the user (`output_types`, `output_shapes`,
`output_classes`, the arguments of map functions and the results of `get_next`).
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape
from flowgraph.framework import convert, nest
from flowgraph.framework.function import trace
from flowgraph.framework.operation import Tensor
from flowgraph.framework.sparse_tensor import SparseTensor


class Spec:
    """One component: its dtype and static shape (a leaf for `nest`, unlike a tuple)."""

    __slots__ = ("dtype", "shape")

    def __init__(self, dtype, shape):
        self.dtype = dtype
        self.shape = shape

    def __repr__(self):
        return f"Spec({self.dtype.name}, {self.shape})"


class Structure:
    """A nested structure of Specs: `nested` keeps the user's nesting, `specs` its leaves."""

    def __init__(self, nested):
        self.nested = nested
        self.specs = nest.flatten(nested)

    @classmethod
    def of_tensors(cls, tensors) -> Structure:
        return cls(nest.map_structure(lambda t: Spec(t.dtype.base_dtype, t.shape), tensors))

    @classmethod
    def of_types(cls, types, shapes=None) -> Structure:
        """From nested dtypes and (optionally) matching nested shapes."""
        if shapes is None:
            shapes = nest.map_structure(lambda _: TensorShape(None), types)
        else:
            shapes = _normalize_shapes(types, shapes)
        nest.assert_same_structure(types, shapes, "output_types and output_shapes")
        return cls(
            nest.map_structure(lambda t, s: Spec(dtypes.as_dtype(t), as_shape(s)), types, shapes)
        )

    @property
    def types(self) -> list:
        return [s.dtype for s in self.specs]

    @property
    def shapes(self) -> list:
        return [s.shape for s in self.specs]

    def output_types(self):
        return nest.map_structure(lambda s: s.dtype, self.nested)

    def output_shapes(self):
        return nest.map_structure(lambda s: s.shape, self.nested)

    def output_classes(self):
        return nest.map_structure(lambda s: Tensor, self.nested)

    def pack(self, flat):
        """The user's structure of `flat` values (one per component)."""
        if not nest.is_sequence(self.nested):
            return flat[0]
        return nest.pack_sequence_as(self.nested, flat)

    def map_shapes(self, fn) -> Structure:
        return Structure(nest.map_structure(lambda s: Spec(s.dtype, fn(s.shape)), self.nested))

    def is_compatible_with(self, other: Structure) -> bool:
        try:
            nest.assert_same_structure(self.nested, other.nested)
        except (ValueError, TypeError):
            return False
        return self.types == other.types and all(
            a.is_compatible_with(b) for a, b in zip(self.shapes, other.shapes)
        )


def _normalize_shapes(types, shapes):
    """Shapes given as lists ([None, 3]) are leaves, not nested structures."""
    if not nest.is_sequence(types):
        return as_shape(shapes)
    if isinstance(types, dict):
        return {k: _normalize_shapes(types[k], shapes[k]) for k in types}
    return (
        type(types)(*[_normalize_shapes(t, s) for t, s in zip(types, shapes)])
        if hasattr(types, "_fields")
        else type(types)(_normalize_shapes(t, s) for t, s in zip(types, shapes))
    )


def to_tensors(value, what: str, top_list_is_tuple: bool = False):
    """A nested structure (tuples, namedtuples, dicts) of values as Tensors. A list is one
    tensor, as in tf.data's structures; only a function's top-level result list becomes a
    tuple (TF1 does the same)."""
    if top_list_is_tuple and isinstance(value, list):
        value = tuple(value)
    if isinstance(value, dict):
        return type(value)((k, to_tensors(v, what)) for k, v in value.items())
    if isinstance(value, tuple):
        items = [to_tensors(v, what) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, SparseTensor):
        raise NotImplementedError(f"{what}: SparseTensor components are not supported")
    if value is None:
        raise TypeError(f"{what}: None is not a valid component")
    return value if isinstance(value, Tensor) else convert.convert_to_tensor(value)


def trace_element_function(fn, structure: Structure, name: str, returns_dataset: bool = False):
    """Traces `fn` over an element of `structure` (a plain tuple is unpacked into arguments,
    as in TF). Returns (DefinedFunction, output Structure or the returned Dataset)."""
    result = {}

    def body(*flat):
        for t, spec in zip(flat, structure.specs):
            t.set_shape(spec.shape)
        args = structure.pack(list(flat))
        out = fn(*args) if type(args) is tuple else fn(args)
        if returns_dataset:
            from flowgraph.data.dataset_ops import Dataset

            if not isinstance(out, Dataset):
                raise TypeError(f"`{name}` must return a Dataset, got {type(out).__name__}")
            result["dataset"] = out
            return out._variant_tensor
        out = to_tensors(out, name, top_list_is_tuple=True)
        result["structure"] = Structure.of_tensors(out)
        return out

    defined = trace(
        body, structure.types, structure.shapes, f"Dataset_{name}_{getattr(fn, '__name__', 'fn')}"
    )
    return defined, result.get("dataset", result.get("structure"))
