"""Arithmetic on SparseTensors' values (TF1's sparse_ops.py, math half): reductions (dense or
sparse results), softmax over the entries of a row, sums and element-wise max/min of two
SparseTensors, the sparse-dense matrix product and `SparseTensor * dense` / `/` (the dense side
broadcast to the sparse shape). The ops that build and reshape SparseTensors are in sparse.py.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.framework.sparse_tensor import (
    SparseTensor,
    convert_to_tensor_or_sparse_tensor,
    sparse_input,
)

__all__ = [
    "sparse_add",
    "sparse_maximum",
    "sparse_minimum",
    "sparse_reduce_max",
    "sparse_reduce_max_sparse",
    "sparse_reduce_sum",
    "sparse_reduce_sum_sparse",
    "sparse_softmax",
    "sparse_tensor_dense_matmul",
]


def sparse_tensor_dense_matmul(sp_a, b, adjoint_a=False, adjoint_b=False, name=None):
    """The dense product of the rank-2 SparseTensor `sp_a` and the dense matrix `b`."""
    sp = sparse_input(sp_a, "sp_a")
    with name_scope(name, "SparseTensorDenseMatMul", [sp.indices, sp.values, b]) as scope:
        b = convert_to_tensor(b, name="b")
        return apply_op(
            "SparseTensorDenseMatMul",
            [sp.indices, sp.values, sp.dense_shape, b],
            name=scope,
            adjoint_a=adjoint_a,
            adjoint_b=adjoint_b,
        ).outputs[0]


def _axes(sp: SparseTensor, axis):
    """The reduction axes: `axis`, or all of them (at run time if the rank is not known)."""
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


def _reduction(op_type: str, py_name: str, doc: str):
    """tf.<py_name>: `op_type` over `axis` (all axes if None); the *Sparse ops return the
    output positions that have entries as a SparseTensor, the others a dense Tensor."""

    def wrapper(sp_input, axis=None, keepdims=None, reduction_axes=None, keep_dims=None):
        sp = sparse_input(sp_input)
        axes = _axes(sp, _axis_arg(axis, reduction_axes))
        out = apply_op(
            op_type,
            [sp.indices, sp.values, sp.dense_shape, axes],
            keep_dims=_keep(keepdims, keep_dims),
        ).outputs
        return SparseTensor(*out) if op_type.endswith("Sparse") else out[0]

    wrapper.__name__ = wrapper.__qualname__ = py_name
    wrapper.__doc__ = doc
    return wrapper


sparse_reduce_sum = _reduction(
    "SparseReduceSum", "sparse_reduce_sum", "The dense sum of `sp_input`'s entries over `axis`."
)
sparse_reduce_max = _reduction(
    "SparseReduceMax",
    "sparse_reduce_max",
    "The dense maximum of the entries present over `axis`; a group without entries gives the "
    "dtype's lowest value (-inf for floats).",
)
sparse_reduce_sum_sparse = _reduction(
    "SparseReduceSumSparse", "sparse_reduce_sum_sparse", "sparse_reduce_sum as a SparseTensor."
)
sparse_reduce_max_sparse = _reduction(
    "SparseReduceMaxSparse", "sparse_reduce_max_sparse", "sparse_reduce_max as a SparseTensor."
)


def sparse_softmax(sp_input, name=None) -> SparseTensor:
    """Softmax over the last dimension, among the entries present in each row."""
    sp = sparse_input(sp_input)
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
        out = apply_op(
            "SparseAdd",
            [a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape, thresh],
        )
        return SparseTensor(*out.outputs)
    if isinstance(b, SparseTensor):
        a, b = b, a
    return apply_op("SparseTensorDenseAdd", [a.indices, a.values, a.dense_shape, b]).outputs[0]


def _sparse_sparse(op_type: str):
    def wrapper(sp_a, sp_b, name=None) -> SparseTensor:
        a, b = sparse_input(sp_a, "sp_a"), sparse_input(sp_b, "sp_b")
        with name_scope(name, op_type, [a, b]) as scope:
            out = apply_op(
                op_type,
                [a.indices, a.values, a.dense_shape, b.indices, b.values, b.dense_shape],
                name=scope,
            ).outputs
            return SparseTensor(out[0], out[1], a.dense_shape)

    wrapper.__doc__ = (
        f"Element-wise {op_type[12:].lower()} of two SparseTensors of one shape (in canonical "
        "order); an entry missing on one side counts as 0."
    )
    return wrapper


sparse_maximum = _sparse_sparse("SparseSparseMaximum")
sparse_minimum = _sparse_sparse("SparseSparseMinimum")


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
