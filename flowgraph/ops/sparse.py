"""The sparse ops TF1 programs use (tf.sparse_*, tf.sparse.*), over SparseTensors
(flowgraph/framework/sparse_tensor.py). Each op takes a SparseTensor's three components and,
where it returns a sparse result, is wrapped back into a SparseTensor.

This module holds the ops that build, reshape, select and convert SparseTensors, and the
tf.sparse namespace; the arithmetic on their values (reductions, softmax, add, products,
SparseTensor * dense) is in sparse_math.py.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.shapes import TensorShape, as_shape
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.operation import Tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.framework.sparse_tensor import (
    SparseTensor,
    SparseTensorValue,
    convert_to_tensor_or_sparse_tensor,
    sparse_input,
)
from flowgraph.ops import segment
from flowgraph.ops.sparse_math import (
    sparse_add,
    sparse_maximum,
    sparse_minimum,
    sparse_reduce_max,
    sparse_reduce_max_sparse,
    sparse_reduce_sum,
    sparse_reduce_sum_sparse,
    sparse_softmax,
    sparse_tensor_dense_matmul,
)

__all__ = [
    "SparseTensor",
    "SparseTensorValue",
    "convert_to_tensor_or_sparse_tensor",
    "sparse_concat",
    "sparse_fill_empty_rows",
    "sparse_placeholder",
    "sparse_reorder",
    "sparse_reshape",
    "sparse_retain",
    "sparse_split",
    "sparse_tensor_to_dense",
    "sparse_to_dense",
    "sparse_to_indicator",
    "sparse_transpose",
]
__all__ += [
    "deserialize_many_sparse",
    "serialize_many_sparse",
    "serialize_sparse",
    "sparse_mask",
    "sparse_merge",
    "sparse_reset_shape",
    "sparse_slice",
]


def sparse_placeholder(dtype, shape=None, name=None) -> SparseTensor:
    """A SparseTensor whose indices, values (and dense_shape, if `shape` is not fully given)
    must be fed. A given `shape` with None entries is the default of a fed dense_shape.

    Example: sp = tf.sparse_placeholder(tf.float32)
             sess.run(tf.sparse_tensor_to_dense(sp), {sp: (indices, values, dense_shape)})
    """
    from flowgraph.ops.array import placeholder, placeholder_with_default

    shape_name = None if name is None else name + "/shape"
    if shape is None:
        rank = None
        dense_shape = placeholder(dtypes.int64, shape=[rank], name=shape_name)
        static = TensorShape(None)
    elif isinstance(shape, Tensor):
        rank = shape.shape[0].value
        dense_shape = placeholder_with_default(shape, shape=[rank], name=shape_name)
        static = TensorShape(None) if rank is None else TensorShape([None] * rank)
    else:
        static = as_shape(shape)
        rank = static.ndims
        default = [-1 if d is None else d for d in static.as_list()]
        dense_shape = placeholder_with_default(
            convert_to_tensor(
                default, dtypes.int64, name=None if name is None else name + "/shape_default"
            ),
            shape=[rank],
            name=shape_name,
        )
    result = SparseTensor(
        values=placeholder(dtype, shape=[None], name=None if name is None else name + "/values"),
        indices=placeholder(
            dtypes.int64, shape=[None, rank], name=None if name is None else name + "/indices"
        ),
        dense_shape=dense_shape,
    )
    result._dense_shape_default = static
    return result


def sparse_to_dense(
    sparse_indices, output_shape, sparse_values, default_value=0, validate_indices=True, name=None
) -> Tensor:
    """A dense tensor of `output_shape` holding `sparse_values` at `sparse_indices` and
    `default_value` elsewhere; indices must be in row-major order without repeats."""
    values = convert_to_tensor(sparse_values, name="sparse_values")
    return apply_op(
        "SparseToDense",
        [
            sparse_indices,
            output_shape,
            values,
            convert_to_tensor(default_value, values.dtype.base_dtype),
        ],
        name=name,
        validate_indices=validate_indices,
    ).outputs[0]


def sparse_tensor_to_dense(sp_input, default_value=0, validate_indices=True, name=None):
    """`sp_input` as a dense tensor, `default_value` where it has no entry (tf.sparse.to_dense)."""
    sp = sparse_input(sp_input)
    return sparse_to_dense(
        sp.indices, sp.dense_shape, sp.values, default_value, validate_indices, name
    )


def sparse_concat(
    axis,
    sp_inputs,
    name=None,
    expand_nonconcat_dim=False,
    concat_dim=None,
    expand_nonconcat_dims=None,
) -> SparseTensor:
    """Concatenates SparseTensors along `axis`; the result's entries are in row-major order."""
    if concat_dim is not None:
        axis = concat_dim
    if expand_nonconcat_dim or expand_nonconcat_dims:
        raise NotImplementedError("sparse_concat(expand_nonconcat_dim=True) is not supported")
    sps = [sparse_input(s, "sp_inputs") for s in sp_inputs]
    op = apply_op(
        "SparseConcat",
        [[s.indices for s in sps], [s.values for s in sps], [s.dense_shape for s in sps]],
        name=name,
        concat_dim=int(axis),
    )
    return SparseTensor(*op.outputs)


def sparse_reshape(sp_input, shape, name=None) -> SparseTensor:
    """The same entries in a dense tensor of `shape` (row-major order, one -1 allowed)."""
    sp = sparse_input(sp_input)
    with name_scope(name, "SparseReshape", [sp.values]) as scope:
        out = apply_op(
            "SparseReshape",
            [sp.indices, sp.dense_shape, convert_to_tensor(shape, dtypes.int64)],
            name=scope,
        )
        return SparseTensor(out.outputs[0], sp.values, out.outputs[1])


def sparse_retain(sp_input, to_retain) -> SparseTensor:
    """The entries of `sp_input` where the bool vector `to_retain` is True."""
    from flowgraph.ops.array import identity, reshape
    from flowgraph.ops.array_index import gather
    from flowgraph.ops.math import where

    sp = sparse_input(sp_input)
    to_retain = convert_to_tensor(to_retain, dtypes.bool_)
    to_retain.shape.with_rank(1).assert_is_compatible_with(sp.values.shape)
    where_true = reshape(where(to_retain), [-1])
    return SparseTensor(
        gather(sp.indices, where_true), gather(sp.values, where_true), identity(sp.dense_shape)
    )


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """(`sp_input` with an entry [row, 0, ...] = default_value added to each empty row, a bool
    vector marking those rows)."""
    sp = sparse_input(sp_input)
    with name_scope(name, "SparseFillEmptyRows", [sp]) as scope:
        default_value = convert_to_tensor(default_value, sp.values.dtype.base_dtype)
        out = apply_op(
            "SparseFillEmptyRows",
            [sp.indices, sp.values, sp.dense_shape, default_value],
            name=scope,
        ).outputs
        return SparseTensor(out[0], out[1], sp.dense_shape), out[2]


def sparse_split(
    keyword_required=None, sp_input=None, num_split=None, axis=None, name=None, split_dim=None
) -> list:
    """`num_split` SparseTensors cut from `sp_input` along `axis` (the first size % num_split
    pieces one larger). Arguments must be given by keyword, as in TF."""
    if keyword_required is not None:
        raise ValueError("Keyword arguments are required for this function.")
    if sp_input is None or num_split is None:
        raise ValueError("sp_input and num_split are required")
    axis = split_dim if split_dim is not None else axis
    if axis is None:
        raise ValueError("axis is required")
    sp = sparse_input(sp_input)
    out = apply_op(
        "SparseSplit",
        [convert_to_tensor(axis, dtypes.int64), sp.indices, sp.values, sp.dense_shape],
        name=name,
        num_split=num_split,
    ).outputs
    n = num_split
    return [SparseTensor(out[i], out[n + i], out[2 * n + i]) for i in range(n)]


def sparse_reorder(sp_input, name=None) -> SparseTensor:
    """The same SparseTensor with its entries in row-major order."""
    sp = sparse_input(sp_input)
    out = apply_op("SparseReorder", [sp.indices, sp.values, sp.dense_shape], name=name).outputs
    return SparseTensor(out[0], out[1], sp.dense_shape)


def sparse_transpose(sp_input, perm=None, name=None) -> SparseTensor:
    """Transposes a SparseTensor (reverses its dimensions when `perm` is None)."""
    from flowgraph.ops.array import range_, reverse, size
    from flowgraph.ops.array_index import gather

    sp = sparse_input(sp_input)
    with name_scope(name, "SparseTranspose", [sp]) as scope:
        if perm is None:
            n = sp.dense_shape.shape[0].value
            perm = (
                list(range(n))[::-1]
                if n is not None
                else reverse(range_(size(sp.dense_shape)), [0])
            )
        indices = gather(sp.indices, perm, axis=1)
        dense_shape = gather(sp.dense_shape, perm)
        return sparse_reorder(SparseTensor(indices, sp.values, dense_shape), name=scope)


def sparse_to_indicator(sp_input, vocab_size, name=None) -> Tensor:
    """A dense bool tensor, [..., vocab_size], True at the ids of each row of `sp_input`."""
    from flowgraph.ops.array import concat, expand_dims, ones_like
    from flowgraph.ops.array_index import strided_slice
    from flowgraph.ops.math import cast

    sp = sparse_input(sp_input)
    with name_scope(name, "SparseToIndicator", [sp]) as scope:
        ids = cast(sp.values, dtypes.int64)
        outer = strided_slice(sp.indices, [0, 0], [0, -1], end_mask=1)
        indices = concat([outer, expand_dims(ids, 1)], 1)
        shape = concat(
            [
                strided_slice(sp.dense_shape, [0], [-1]),
                convert_to_tensor([vocab_size], dtypes.int64),
            ],
            0,
        )
        reordered = sparse_reorder(SparseTensor(indices, ones_like(ids, dtypes.bool_), shape))
        return sparse_tensor_to_dense(reordered, default_value=False, name=scope)


def sparse_slice(sp_input, start, size, name=None) -> SparseTensor:
    """The entries of `sp_input` inside the box [start, start + size), shifted to start at 0."""
    sp = sparse_input(sp_input)
    with name_scope(name, "SparseSlice", [sp]) as scope:
        out = apply_op(
            "SparseSlice",
            [
                sp.indices,
                sp.values,
                sp.dense_shape,
                convert_to_tensor(start, dtypes.int64),
                convert_to_tensor(size, dtypes.int64),
            ],
            name=scope,
        )
        return SparseTensor(*out.outputs)


def sparse_reset_shape(sp_input, new_shape=None) -> SparseTensor:
    """`sp_input` with dense_shape `new_shape`, or the tightest shape holding its entries."""
    from flowgraph.ops.array import identity, ones_like
    from flowgraph.ops.math import add, maximum
    from flowgraph.ops.reduction import reduce_max

    sp = sparse_input(sp_input)
    indices, values, shape = (identity(t) for t in (sp.indices, sp.values, sp.dense_shape))
    if new_shape is None:
        new_shape = maximum(
            convert_to_tensor(0, dtypes.int64), add(reduce_max(indices, axis=0), ones_like(shape))
        )
    else:
        new_shape = convert_to_tensor(new_shape, dtypes.int64)
        new_shape.shape.assert_is_compatible_with(shape.shape)
    return SparseTensor(indices, values, new_shape)


def sparse_merge(sp_ids, sp_values, vocab_size, name=None, already_sorted=False):
    """A SparseTensor whose last coordinate is the id in `sp_ids` and whose value is the one in
    `sp_values` at the same entry (e.g. feature ids and weights into a [batch, vocab] matrix)."""
    from flowgraph.ops.array import concat, reshape, stack
    from flowgraph.ops.array_index import strided_slice
    from flowgraph.ops.math import cast

    ids_list = [sp_ids] if isinstance(sp_ids, SparseTensor) else list(sp_ids)
    sizes = [vocab_size] if isinstance(sp_ids, SparseTensor) else list(vocab_size)
    values = sparse_input(sp_values, "sp_values")
    with name_scope(name, "SparseMerge", [values]):
        first = sparse_input(ids_list[0], "sp_ids")
        keep = strided_slice(first.indices, [0, 0], [0, -1], end_mask=1)
        columns = [reshape(cast(sparse_input(i).values, dtypes.int64), [-1, 1]) for i in ids_list]
        new_indices = concat([keep] + columns, 1)
        head = strided_slice(first.dense_shape, [0], [-1])
        sizes = cast(stack([convert_to_tensor(v) for v in sizes]), dtypes.int64)
        new_shape = concat([head, sizes], 0)
        result = SparseTensor(new_indices, values.values, new_shape)
        if already_sorted:
            return result
        ordered = sparse_reorder(result)
        return SparseTensor(ordered.indices, ordered.values, new_shape)


def sparse_mask(a, mask_indices, name=None):
    """The IndexedSlices `a` without the rows whose index is in `mask_indices`."""
    from flowgraph.framework.indexed_slices import IndexedSlices
    from flowgraph.ops.array_index import gather, setdiff1d

    with name_scope(name, "sparse_mask", [a.values, mask_indices]):
        out_indices, to_gather = setdiff1d(a.indices, convert_to_tensor(mask_indices))
        return IndexedSlices(gather(a.values, to_gather), out_indices, a.dense_shape)


def sparse_eye(num_rows, num_columns=None, dtype=dtypes.float32, name=None) -> SparseTensor:
    """A sparse identity matrix [num_rows, num_columns] (tf.sparse.eye)."""
    from flowgraph.ops.array import ones, range_, stack
    from flowgraph.ops.math import minimum

    with name_scope(name, "eye", [num_rows, num_columns]):
        rows = convert_to_tensor(num_rows, dtypes.int64)
        cols = rows if num_columns is None else convert_to_tensor(num_columns, dtypes.int64)
        diag = range_(minimum(rows, cols), dtype=dtypes.int64)
        return SparseTensor(
            stack([diag, diag], axis=1),
            ones(stack([minimum(rows, cols)]), dtype),
            stack([rows, cols]),
        )


def sparse_expand_dims(sp_input, axis=None, name=None) -> SparseTensor:
    """`sp_input` with a dimension of size 1 inserted at `axis` (default -1: last)."""
    from flowgraph.ops.array import concat, shape, stack, zeros
    from flowgraph.ops.array_index import strided_slice

    sp = sparse_input(sp_input)
    rank = sp.dense_shape.shape[0].value
    if rank is None:
        raise ValueError("sparse.expand_dims needs a SparseTensor of known rank")
    axis = -1 if axis is None else int(axis)
    if not -rank - 1 <= axis <= rank:
        raise ValueError(f"axis {axis} out of range for rank {rank}")
    axis = axis + rank + 1 if axis < 0 else axis
    with name_scope(name, "expand_dims", [sp]):
        n = strided_slice(shape(sp.indices, out_type=dtypes.int64), [0], [1], shrink_axis_mask=1)
        column = zeros(stack([n, 1]), dtypes.int64)
        before = strided_slice(sp.indices, [0, 0], [0, axis], end_mask=1)
        after = strided_slice(sp.indices, [0, axis], [0, rank], end_mask=1)
        indices = concat([before, column, after], 1)
        dense_shape = concat(
            [sp.dense_shape[:axis], convert_to_tensor([1], dtypes.int64), sp.dense_shape[axis:]], 0
        )
        return SparseTensor(indices, sp.values, dense_shape)


def _not_provided(name: str):
    def raise_(*args, **kwargs):
        raise NotImplementedError(f"tf.{name} is not provided by flowgraph")

    raise_.__name__ = name
    return raise_


serialize_sparse = _not_provided("serialize_sparse")
serialize_many_sparse = _not_provided("serialize_many_sparse")
deserialize_many_sparse = _not_provided("deserialize_many_sparse")


SPARSE_NAMESPACE = {  # tf.sparse.<name> (TF 1.15)
    "SparseTensor": SparseTensor,
    "placeholder": sparse_placeholder,
    "to_dense": sparse_tensor_to_dense,
    "matmul": sparse_tensor_dense_matmul,
    "sparse_dense_matmul": sparse_tensor_dense_matmul,
    "reduce_sum": sparse_reduce_sum,
    "reduce_max": sparse_reduce_max,
    "concat": sparse_concat,
    "softmax": sparse_softmax,
    "add": sparse_add,
    "reshape": sparse_reshape,
    "retain": sparse_retain,
    "fill_empty_rows": sparse_fill_empty_rows,
    "split": sparse_split,
    "reorder": sparse_reorder,
    "transpose": sparse_transpose,
    "to_indicator": sparse_to_indicator,
    "slice": sparse_slice,
    "maximum": sparse_maximum,
    "minimum": sparse_minimum,
    "reduce_sum_sparse": sparse_reduce_sum_sparse,
    "reduce_max_sparse": sparse_reduce_max_sparse,
    "reset_shape": sparse_reset_shape,
    "merge": sparse_merge,
    "mask": sparse_mask,
    "eye": sparse_eye,
    "expand_dims": sparse_expand_dims,
    "segment_sum": segment.sparse_segment_sum,
    "segment_mean": segment.sparse_segment_mean,
    "segment_sqrt_n": segment.sparse_segment_sqrt_n,
    "cross": _not_provided("sparse.cross"),
    "cross_hashed": _not_provided("sparse.cross_hashed"),
    "serialize_sparse": serialize_sparse,
    "serialize_many_sparse": serialize_many_sparse,
    "deserialize_many_sparse": deserialize_many_sparse,
}
