"""The sparse ops TF1 programs use (tf.sparse_*, tf.sparse.*), over SparseTensors
(flowgraph/framework/sparse_tensor.py). Each op takes a SparseTensor's three components and,
where it returns a sparse result, is wrapped back into a SparseTensor.
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
)  # fmt: skip

__all__ = [
    "SparseTensor",
    "SparseTensorValue",
    "convert_to_tensor_or_sparse_tensor",
    "sparse_add",
    "sparse_concat",
    "sparse_fill_empty_rows",
    "sparse_placeholder",
    "sparse_reduce_max",
    "sparse_reduce_sum",
    "sparse_reorder",
    "sparse_reshape",
    "sparse_retain",
    "sparse_softmax",
    "sparse_split",
    "sparse_tensor_dense_matmul",
    "sparse_tensor_to_dense",
    "sparse_to_dense",
    "sparse_to_indicator",
    "sparse_transpose",
]  # fmt: skip


def _sparse(value, name="sp_input") -> SparseTensor:
    value = convert_to_tensor_or_sparse_tensor(value)
    if not isinstance(value, SparseTensor):
        raise TypeError(f"Input {name} must be a SparseTensor, got {type(value).__name__}.")
    return value


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
            convert_to_tensor(default, dtypes.int64, name=None if name is None else
                              name + "/shape_default"),
            shape=[rank], name=shape_name,
        )  # fmt: skip
    result = SparseTensor(
        values=placeholder(dtype, shape=[None], name=None if name is None else name + "/values"),
        indices=placeholder(
            dtypes.int64, shape=[None, rank], name=None if name is None else name + "/indices"
        ),
        dense_shape=dense_shape,
    )
    result._dense_shape_default = static
    return result


def sparse_to_dense(sparse_indices, output_shape, sparse_values, default_value=0,
                    validate_indices=True, name=None) -> Tensor:  # fmt: skip
    """A dense tensor of `output_shape` holding `sparse_values` at `sparse_indices` and
    `default_value` elsewhere; indices must be in row-major order without repeats."""
    values = convert_to_tensor(sparse_values, name="sparse_values")
    return apply_op("SparseToDense", [sparse_indices, output_shape, values,
                                      convert_to_tensor(default_value, values.dtype.base_dtype)],
                    name=name, validate_indices=validate_indices).outputs[0]  # fmt: skip


def sparse_tensor_to_dense(sp_input, default_value=0, validate_indices=True, name=None):
    """`sp_input` as a dense tensor, `default_value` where it has no entry (tf.sparse.to_dense)."""
    sp = _sparse(sp_input)
    return sparse_to_dense(sp.indices, sp.dense_shape, sp.values, default_value,
                           validate_indices, name)  # fmt: skip


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """The dense product of the rank-2 SparseTensor `sp_a` and the dense matrix `b`."""
    sp = _sparse(sp_a, "sp_a")
    with name_scope(name, "SparseTensorDenseMatMul", [sp.indices, sp.values, b]) as scope:
        b = convert_to_tensor(b, name="b")
        return apply_op("SparseTensorDenseMatMul", [sp.indices, sp.values, sp.dense_shape, b],
                        name=scope, adjoint_a=adjoint_a, adjoint_b=adjoint_b).outputs[0]  # fmt: skip


def _axes(sp: SparseTensor, axis):
    """The reduction axes: `axis`, or all of them (computed at run time if the rank is not known)."""
    if axis is not None:
        return axis
    rank = sp.dense_shape.shape[0].value
    if rank is not None:
        return list(range(rank))
    from flowgraph.ops.array import range_, size

    return range_(0, size(sp.dense_shape))


def _keep(keepdims, keep_dims):
    if keepdims is not None and keep_dims is not None:
        raise ValueError("Cannot specify both 'keepdims' and 'keep_dims'")
    return bool(keepdims if keepdims is not None else keep_dims)


def _axis_arg(axis, reduction_axes):
    if axis is not None and reduction_axes is not None:
        raise ValueError("Cannot specify both 'axis' and 'reduction_axes'")
    return axis if axis is not None else reduction_axes


def sparse_reduce_sum(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None):
    """The dense sum of `sp_input`'s entries over `axis` (all axes if None)."""
    sp = _sparse(sp_input)
    axes = _axes(sp, _axis_arg(axis, reduction_axes))
    return apply_op("SparseReduceSum", [sp.indices, sp.values, sp.dense_shape, axes],
                    keep_dims=_keep(keepdims, keep_dims)).outputs[0]  # fmt: skip


def sparse_reduce_max(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None):
    """The dense maximum of the entries present over `axis`; a group without entries gives the
    dtype's lowest value (-inf for floats)."""
    sp = _sparse(sp_input)
    axes = _axes(sp, _axis_arg(axis, reduction_axes))
    return apply_op("SparseReduceMax", [sp.indices, sp.values, sp.dense_shape, axes],
                    keep_dims=_keep(keepdims, keep_dims)).outputs[0]  # fmt: skip


def sparse_concat(axis, sp_inputs, name=None, expand_nonconcat_dim=False, concat_dim=None,
                  expand_nonconcat_dims=None) -> SparseTensor:  # fmt: skip
    """Concatenates SparseTensors along `axis`; the result's entries are in row-major order."""
    if concat_dim is not None:
        axis = concat_dim
    if expand_nonconcat_dim or expand_nonconcat_dims:
        raise NotImplementedError("sparse_concat(expand_nonconcat_dim=True) is not supported")
    sps = [_sparse(s, "sp_inputs") for s in sp_inputs]
    op = apply_op("SparseConcat", [[s.indices for s in sps], [s.values for s in sps],
                                   [s.dense_shape for s in sps]],
                  name=name, concat_dim=int(axis))  # fmt: skip
    return SparseTensor(*op.outputs)


def sparse_softmax(sp_input, name=None) -> SparseTensor:
    """Softmax over the last dimension, among the entries present in each row."""
    sp = _sparse(sp_input)
    with name_scope(name, "SparseSoftmax", [sp.indices, sp.values]) as scope:
        out = apply_op("SparseSoftmax", [sp.indices, sp.values, sp.dense_shape], name=scope)
        return SparseTensor(sp.indices, out.outputs[0], sp.dense_shape)


def sparse_add(a, b, thresh=0, threshold=None):
    """a + b. Two SparseTensors give a SparseTensor (entries whose sum has magnitude below
    `thresh` dropped); a SparseTensor and a dense Tensor give a dense Tensor."""
    if threshold is not None:
        thresh = threshold
    a, b = convert_to_tensor_or_sparse_tensor(a), convert_to_tensor_or_sparse_tensor(b)
    if not isinstance(a, SparseTensor) and not isinstance(b, SparseTensor):
        raise TypeError("At least one input should be SparseTensor; do you mean to use tf.add()?")
    if isinstance(a, SparseTensor) and isinstance(b, SparseTensor):
        thresh = convert_to_tensor(thresh, a.values.dtype.real_dtype, name="threshold")
        out = apply_op("SparseAdd", [a.indices, a.values, a.dense_shape, b.indices, b.values,
                                     b.dense_shape, thresh])  # fmt: skip
        return SparseTensor(*out.outputs)
    if isinstance(b, SparseTensor):
        a, b = b, a
    return apply_op("SparseTensorDenseAdd", [a.indices, a.values, a.dense_shape, b]).outputs[0]


def sparse_reshape(sp_input, shape, name=None) -> SparseTensor:
    """The same entries in a dense tensor of `shape` (row-major order, one -1 allowed)."""
    sp = _sparse(sp_input)
    with name_scope(name, "SparseReshape", [sp.values]) as scope:
        out = apply_op("SparseReshape", [sp.indices, sp.dense_shape,
                                         convert_to_tensor(shape, dtypes.int64)], name=scope)  # fmt: skip
        return SparseTensor(out.outputs[0], sp.values, out.outputs[1])


def sparse_retain(sp_input, to_retain) -> SparseTensor:
    """The entries of `sp_input` where the bool vector `to_retain` is True."""
    from flowgraph.ops.array import identity, reshape
    from flowgraph.ops.array_index import gather
    from flowgraph.ops.math import where

    sp = _sparse(sp_input)
    to_retain = convert_to_tensor(to_retain, dtypes.bool_)
    to_retain.shape.with_rank(1).assert_is_compatible_with(sp.values.shape)
    where_true = reshape(where(to_retain), [-1])
    return SparseTensor(
        gather(sp.indices, where_true), gather(sp.values, where_true), identity(sp.dense_shape)
    )


def sparse_fill_empty_rows(sp_input, default_value, name=None):
    """(`sp_input` with an entry [row, 0, ...] = default_value added to each empty row, a bool
    vector marking those rows)."""
    sp = _sparse(sp_input)
    with name_scope(name, "SparseFillEmptyRows", [sp]) as scope:
        default_value = convert_to_tensor(default_value, sp.values.dtype.base_dtype)
        out = apply_op("SparseFillEmptyRows", [sp.indices, sp.values, sp.dense_shape,
                                               default_value], name=scope).outputs  # fmt: skip
        return SparseTensor(out[0], out[1], sp.dense_shape), out[2]


def sparse_split(keyword_required=None, sp_input=None, num_split=None, axis=None, name=None,
                 split_dim=None) -> list:  # fmt: skip
    """`num_split` SparseTensors cut from `sp_input` along `axis` (the first size % num_split
    pieces one larger). Arguments must be given by keyword, as in TF."""
    if keyword_required is not None:
        raise ValueError("Keyword arguments are required for this function.")
    if sp_input is None or num_split is None:
        raise ValueError("sp_input and num_split are required")
    axis = split_dim if split_dim is not None else axis
    if axis is None:
        raise ValueError("axis is required")
    sp = _sparse(sp_input)
    out = apply_op("SparseSplit", [convert_to_tensor(axis, dtypes.int64), sp.indices, sp.values,
                                   sp.dense_shape], name=name, num_split=num_split).outputs  # fmt: skip
    n = num_split
    return [SparseTensor(out[i], out[n + i], out[2 * n + i]) for i in range(n)]


def sparse_reorder(sp_input, name=None) -> SparseTensor:
    """The same SparseTensor with its entries in row-major order."""
    sp = _sparse(sp_input)
    out = apply_op("SparseReorder", [sp.indices, sp.values, sp.dense_shape], name=name).outputs
    return SparseTensor(out[0], out[1], sp.dense_shape)


def sparse_transpose(sp_input, perm=None, name=None) -> SparseTensor:
    """Transposes a SparseTensor (reverses its dimensions when `perm` is None)."""
    from flowgraph.ops.array import range_, reverse, size
    from flowgraph.ops.array_index import gather

    sp = _sparse(sp_input)
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

    sp = _sparse(sp_input)
    with name_scope(name, "SparseToIndicator", [sp]) as scope:
        ids = cast(sp.values, dtypes.int64)
        outer = strided_slice(sp.indices, [0, 0], [0, -1], end_mask=1)
        indices = concat([outer, expand_dims(ids, 1)], 1)
        shape = concat([strided_slice(sp.dense_shape, [0], [-1]),
                        convert_to_tensor([vocab_size], dtypes.int64)], 0)  # fmt: skip
        reordered = sparse_reorder(SparseTensor(indices, ones_like(ids, dtypes.bool_), shape))
        return sparse_tensor_to_dense(reordered, default_value=False, name=scope)


# -- SparseTensor (op) dense: element-wise, the dense side broadcast to the sparse shape -------
def _cwise(op_type: str, stem: str, true_div: bool = False):
    def method(self, other):
        from flowgraph.ops.math import cast

        with name_scope(None, stem, [self.values, other]) as scope:
            other = convert_to_tensor(other, self.dtype.base_dtype, name="y")
            values = self.values
            if true_div and (values.dtype.is_integer or values.dtype == dtypes.bool_):
                # Python 3 `/` of integers is a float division, as for dense tensors in TF.
                wide = self.dtype.size >= 4
                values = cast(values, dtypes.float64 if wide else dtypes.float32)
                other = cast(other, values.dtype)
            out = apply_op(op_type, [self.indices, values, self.dense_shape, other], name=scope)
            return SparseTensor(self.indices, out.outputs[0], self.dense_shape)

    return method


SparseTensor.__mul__ = _cwise("SparseDenseCwiseMul", "mul")
SparseTensor.__truediv__ = _cwise("SparseDenseCwiseDiv", "truediv", true_div=True)
SparseTensor.__div__ = _cwise("SparseDenseCwiseDiv", "div")

SPARSE_NAMESPACE = {  # tf.sparse.<name> (TF 1.15)
    "SparseTensor": SparseTensor, "placeholder": sparse_placeholder, "to_dense": sparse_tensor_to_dense,
    "matmul": sparse_tensor_dense_matmul, "sparse_dense_matmul": sparse_tensor_dense_matmul,
    "reduce_sum": sparse_reduce_sum, "reduce_max": sparse_reduce_max, "concat": sparse_concat,
    "softmax": sparse_softmax, "add": sparse_add, "reshape": sparse_reshape, "retain": sparse_retain,
    "fill_empty_rows": sparse_fill_empty_rows, "split": sparse_split, "reorder": sparse_reorder,
    "transpose": sparse_transpose, "to_indicator": sparse_to_indicator,
}  # fmt: skip
