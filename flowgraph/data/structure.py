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
from flowgraph.framework.sparse_tensor import SparseTensor, SparseTensorValue


class Spec:
    """One component: its dtype, static shape and class (Tensor or SparseTensor); a leaf for
    `nest`, unlike a tuple. A SparseTensor component travels through the dataset ops as one
    DT_VARIANT tensor, its serialized (indices, values, dense_shape) triple (TF's encoding;
    a batch of them is a [batch, 3] variant that DeserializeSparse turns into one SparseTensor)."""

    __slots__ = ("cls", "dtype", "shape")

    def __init__(self, dtype, shape, cls=Tensor):
        self.dtype = dtype
        self.shape = shape
        self.cls = cls

    @property
    def is_sparse(self) -> bool:
        return self.cls is SparseTensor

    @property
    def flat_dtype(self):
        return dtypes.variant if self.is_sparse else self.dtype

    @property
    def flat_shape(self):
        return TensorShape(None) if self.is_sparse else self.shape

    def with_shape(self, shape) -> Spec:
        return Spec(self.dtype, shape, self.cls)

    def __repr__(self):
        return f"Spec({self.dtype.name}, {self.shape}, {self.cls.__name__})"


def _spec_of(t) -> Spec:
    if isinstance(t, SparseTensor):
        return Spec(t.dtype.base_dtype, t.get_shape(), SparseTensor)
    return Spec(t.dtype.base_dtype, t.shape)


class Structure:
    """A nested structure of Specs: `nested` keeps the user's nesting, `specs` its leaves."""

    def __init__(self, nested):
        self.nested = nested
        self.specs = nest.flatten(nested)

    @classmethod
    def of_tensors(cls, tensors) -> Structure:
        return cls(nest.map_structure(_spec_of, tensors))

    @classmethod
    def of_types(cls, types, shapes=None, classes=None) -> Structure:
        """From nested dtypes and (optionally) matching nested shapes and classes."""
        if shapes is None:
            shapes = nest.map_structure(lambda _: TensorShape(None), types)
        else:
            shapes = _normalize_shapes(types, shapes)
        if classes is None:
            classes = nest.map_structure(lambda _: Tensor, types)
        nest.assert_same_structure(types, shapes, "output_types and output_shapes")
        nest.assert_same_structure(types, classes, "output_types and output_classes")
        for c in nest.flatten(classes):
            if c not in (Tensor, SparseTensor):
                raise TypeError(f"output_classes may hold tf.Tensor or tf.SparseTensor, got {c}")
        return cls(
            nest.map_structure(
                lambda t, s, c: Spec(dtypes.as_dtype(t), as_shape(s), c), types, shapes, classes
            )
        )

    @property
    def types(self) -> list:
        """The dtypes of the flat tensors the ops carry (a variant per SparseTensor)."""
        return [s.flat_dtype for s in self.specs]

    @property
    def shapes(self) -> list:
        return [s.flat_shape for s in self.specs]

    def output_types(self):
        return nest.map_structure(lambda s: s.dtype, self.nested)

    def output_shapes(self):
        return nest.map_structure(lambda s: s.shape, self.nested)

    def output_classes(self):
        return nest.map_structure(lambda s: s.cls, self.nested)

    @property
    def has_sparse(self) -> bool:
        return any(s.is_sparse for s in self.specs)

    def pack(self, flat):
        """The user's structure of `flat` tensors (one per component); variant tensors of
        SparseTensor components are deserialized into SparseTensors."""
        flat = [_deserialize(t, spec) if spec.is_sparse else t for t, spec in zip(flat, self.specs)]
        if not nest.is_sequence(self.nested):
            return flat[0]
        return nest.pack_sequence_as(self.nested, flat)

    def flatten(self, value) -> list:
        """The flat tensors of a value of this structure (SparseTensors serialized)."""
        return [_serialize(t) if isinstance(t, SparseTensor) else t for t in nest.flatten(value)]

    def map_shapes(self, fn) -> Structure:
        return Structure(nest.map_structure(lambda s: s.with_shape(fn(s.shape)), self.nested))

    def is_compatible_with(self, other: Structure) -> bool:
        try:
            nest.assert_same_structure(self.nested, other.nested)
        except (ValueError, TypeError):
            return False
        return [s.dtype for s in self.specs] == [s.dtype for s in other.specs] and all(
            a.cls is b.cls and a.shape.is_compatible_with(b.shape)
            for a, b in zip(self.specs, other.specs)
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
    if isinstance(value, SparseTensorValue):
        value = SparseTensor.from_value(value)
    if isinstance(value, SparseTensor):
        return value
    if value is None:
        raise TypeError(f"{what}: None is not a valid component")
    return value if isinstance(value, Tensor) else convert.convert_to_tensor(value)


def trace_element_function(fn, structure: Structure, name: str, returns_dataset: bool = False):
    """Traces `fn` over an element of `structure` (a plain tuple is unpacked into arguments,
    as in TF). Returns (DefinedFunction, output Structure or the returned Dataset)."""
    result = {}

    def body(*flat):
        for t, spec in zip(flat, structure.specs):
            t.set_shape(spec.flat_shape)
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
        return result["structure"].flatten(out)

    defined = trace(
        body, structure.types, structure.shapes, f"Dataset_{name}_{getattr(fn, '__name__', 'fn')}"
    )
    return defined, result.get("dataset", result.get("structure"))


def _serialize(st: SparseTensor):
    """A SparseTensor as one variant tensor of shape [3]."""
    from flowgraph.framework.apply_op import apply_op

    return apply_op(
        "SerializeSparse", [st.indices, st.values, st.dense_shape], out_type=dtypes.variant
    ).outputs[0]


def serialize_many(st: SparseTensor):
    """A SparseTensor of rank >= 1 as a [N, 3] variant: one serialized row per index of dim 0."""
    from flowgraph.framework.apply_op import apply_op

    return apply_op(
        "SerializeManySparse", [st.indices, st.values, st.dense_shape], out_type=dtypes.variant
    ).outputs[0]


def _deserialize(t, spec: Spec) -> SparseTensor:
    from flowgraph.framework.apply_op import apply_op

    op = apply_op("DeserializeSparse", [t], dtype=spec.dtype)
    indices, values, shape = op.outputs
    rank = spec.shape.ndims
    if rank is not None:
        indices.set_shape([None, rank])
        shape.set_shape([rank])
    return SparseTensor(indices, values, shape)
