"""CPU kernels of the set ops (see flowgraph/opdefs/sets.py).

Each set element becomes one int64 key, row * (number of distinct values) + the value's rank
among all distinct values of both inputs, so that deduplication, union, intersection and
difference of every row at once are NumPy's sorted 1-D set routines, and the result comes out
ordered by row and then by value, as TensorFlow returns it.
"""

from __future__ import annotations

import numpy as np

from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.sparse import _fmt, _invalid

_OPERATIONS = {
    "a-b": lambda a, b: np.setdiff1d(a, b, assume_unique=True),
    "b-a": lambda a, b: np.setdiff1d(b, a, assume_unique=True),
    "intersection": lambda a, b: np.intersect1d(a, b, assume_unique=True),
    "union": np.union1d,
}


def _dense_set(x):
    """(group shape, row of each element, elements) of a dense input of rank >= 2."""
    x = np.asarray(x)
    if x.ndim < 2:
        raise _invalid(f"Invalid rank {x.ndim}: a dense set needs rank at least 2")
    rows = np.repeat(np.arange(int(np.prod(x.shape[:-1]))), x.shape[-1])
    return tuple(x.shape[:-1]), rows, x.reshape(-1)


def _sparse_set(indices, values, shape, validate):
    """(group shape, row of each element, elements) of a sparse input."""
    shape = np.asarray(shape, np.int64).reshape(-1)
    indices = np.asarray(indices, np.int64).reshape(-1, shape.size)
    if shape.size < 2:
        raise _invalid(f"Invalid rank {shape.size}: a sparse set needs rank at least 2")
    if len(indices) != np.size(values):
        raise _invalid(f"Expected {len(indices)} values, got {np.size(values)}")
    if validate and len(indices):
        bad = np.any((indices < 0) | (indices >= shape), axis=1)
        if bad.any():
            i = int(np.argmax(bad))
            raise _invalid(f"indices[{i}] = {_fmt(indices[i])} is out of bounds: {_fmt(shape)}")
        linear = np.ravel_multi_index(indices.T, shape)
        unordered = np.diff(linear) <= 0
        if unordered.any():
            i = int(np.argmax(unordered)) + 1
            raise _invalid(
                f"indices[{i}] = {_fmt(indices[i])} is out of order. Many sparse ops require "
                "sorted indices.\n    Use `tf.sparse.reorder` to create a correctly ordered copy."
            )
    group = tuple(int(d) for d in shape[:-1])
    rows = np.ravel_multi_index(indices[:, :-1].T, group) if len(indices) else np.zeros(0, int)
    return group, rows, np.asarray(values).reshape(-1)


def _keys(sets):
    """Each set's unique int64 keys (sorted), the distinct values and their count."""
    values, codes = np.unique(np.concatenate([v for _, v in sets]), return_inverse=True)
    n = max(len(values), 1)
    keys, start = [], 0
    for rows, v in sets:
        code = codes[start : start + len(v)]
        start += len(v)
        keys.append(np.unique(rows.astype(np.int64) * n + code))
    return keys, values, n


def _result(keys, values, n, group):
    """(indices, values, dense_shape) of the sparse result holding sorted `keys`."""
    rows, code = np.divmod(keys, n)
    rows_total = int(np.prod(group))
    counts = np.bincount(rows, minlength=rows_total)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    position = np.arange(len(keys)) - starts[rows]
    group_index = np.unravel_index(rows, group) if len(keys) else [np.zeros(0, int)] * len(group)
    indices = np.column_stack([*group_index, position]).astype(np.int64)
    width = int(counts.max()) if len(keys) else 0
    return indices.reshape(-1, len(group) + 1), values[code], np.array([*group, width], np.int64)


def _operate(ctx, a, b):
    (group_a, rows_a, values_a), (group_b, rows_b, values_b) = a, b
    if group_a != group_b:
        raise _invalid(f"Shapes {_fmt(group_a)} and {_fmt(group_b)} of the set groups differ")
    operation = ctx.attrs["set_operation"]
    operation = operation.decode() if isinstance(operation, bytes) else operation
    if operation not in _OPERATIONS:
        raise _invalid(f"Invalid set_operation {operation}")
    (keys_a, keys_b), values, n = _keys([(rows_a, values_a), (rows_b, values_b)])
    return _result(_OPERATIONS[operation](keys_a, keys_b), values, n, group_a)


@register_kernel("SetSize")
def set_size(ctx, indices, values, shape):
    group, rows, elements = _sparse_set(indices, values, shape, ctx.attrs["validate_indices"])
    (keys,), _, n = _keys([(rows, elements)])
    counts = np.bincount(keys // n, minlength=int(np.prod(group)))
    return counts.astype(np.int32).reshape(group)


@register_kernel("DenseToDenseSetOperation")
def dense_to_dense(ctx, set1, set2):
    return _operate(ctx, _dense_set(set1), _dense_set(set2))


@register_kernel("DenseToSparseSetOperation")
def dense_to_sparse(ctx, set1, indices, values, shape):
    validate = ctx.attrs["validate_indices"]
    return _operate(ctx, _dense_set(set1), _sparse_set(indices, values, shape, validate))


@register_kernel("SparseToSparseSetOperation")
def sparse_to_sparse(ctx, indices1, values1, shape1, indices2, values2, shape2):
    validate = ctx.attrs["validate_indices"]
    a = _sparse_set(indices1, values1, shape1, validate)
    return _operate(ctx, a, _sparse_set(indices2, values2, shape2, validate))
