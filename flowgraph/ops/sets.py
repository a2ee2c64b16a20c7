"""tf.sets: size, intersection, union and difference of the sets in the last dimension of
dense or sparse tensors (TensorFlow 1.15's sets_impl). Results are SparseTensors whose rows
hold each group's elements in ascending order.

Example:
    a = tf.constant([[1, 2, 2], [3, 4, 5]])
    tf.sets.set_intersection(a, [[2, 9, 1], [5, 5, 0]])  # rows [1, 2] and [5]
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.sparse_tensor import SparseTensor, convert_to_tensor_or_sparse_tensor

__all__ = ["set_difference", "set_intersection", "set_size", "set_union"]

_VALID_DTYPES = frozenset(
    [dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.uint16]
    + [dtypes.string]
)


def set_size(a, validate_indices=True):
    """The number of distinct values in each row of SparseTensor `a` (int32, shape of a's
    dense_shape without its last dimension)."""
    a = convert_to_tensor_or_sparse_tensor(a)
    if not isinstance(a, SparseTensor):
        raise TypeError(f"Expected `SparseTensor`, got {a}.")
    if a.values.dtype.base_dtype not in _VALID_DTYPES:
        raise TypeError(f"Invalid dtype {a.values.dtype}.")
    op = apply_op(
        "SetSize", [a.indices, a.values, a.dense_shape], validate_indices=validate_indices
    )
    return op.outputs[0]


def _convert(a, b):
    """(a, b, flipped): tensors or SparseTensors of one valid dtype, a sparse `a` with a dense
    `b` swapped (the ops take dense, sparse)."""
    a = convert_to_tensor_or_sparse_tensor(a, name="a")
    if a.dtype.base_dtype not in _VALID_DTYPES:
        raise TypeError(
            f"'a' has invalid dtype `{a.dtype}` not in supported dtypes: "
            f"`{sorted(d.name for d in _VALID_DTYPES)}`."
        )
    b = convert_to_tensor_or_sparse_tensor(b, name="b")
    if b.dtype.base_dtype != a.dtype.base_dtype:
        raise TypeError(f"Types don't match, {a.dtype} vs {b.dtype}.")
    if isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        return b, a, True
    return a, b, False


def _set_operation(a, b, set_operation, validate_indices):
    attrs = {"set_operation": set_operation, "validate_indices": validate_indices}
    if isinstance(a, SparseTensor):
        if not isinstance(b, SparseTensor):
            raise ValueError(
                "Sparse,Dense is not supported, but Dense,Sparse is. Please flip the order of "
                "your inputs."
            )
        parts = [a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape]
        op = apply_op("SparseToSparseSetOperation", parts, **attrs)
    elif isinstance(b, SparseTensor):
        op = apply_op("DenseToSparseSetOperation", [a, b.indices, b.values, b.dense_shape], **attrs)
    else:
        op = apply_op("DenseToDenseSetOperation", [a, b], **attrs)
    return SparseTensor(*op.outputs)


def set_intersection(a, b, validate_indices=True):
    """The elements of each row that are in both `a` and `b`, as a SparseTensor."""
    a, b, _ = _convert(a, b)
    return _set_operation(a, b, "intersection", validate_indices)


def set_difference(a, b, aminusb=True, validate_indices=True):
    """The elements of each row of `a` not in `b` (of `b` not in `a` with aminusb=False)."""
    a, b, flipped = _convert(a, b)
    if flipped:
        aminusb = not aminusb
    return _set_operation(a, b, "a-b" if aminusb else "b-a", validate_indices)


def set_union(a, b, validate_indices=True):
    """The elements of each row that are in `a` or `b`, as a SparseTensor."""
    a, b, _ = _convert(a, b)
    return _set_operation(a, b, "union", validate_indices)


SETS_NAMESPACE = {
    **{name: globals()[name] for name in __all__},
    "size": set_size,
    "intersection": set_intersection,
    "union": set_union,
    "difference": set_difference,
}
