"""Gradients of the sparse ops (TF's sparse_grad.py): each flows to a SparseTensor's values
(and to a dense operand); indices and shapes get None."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.gradients.reduction import _reduced_shape as reduced_shape
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.gradients.util import build, cast, constant, reduce_sum, reshape, shape

not_differentiable("SparseAddGrad")
not_differentiable("SparseConcat")
not_differentiable("SparseReshape")
not_differentiable("SparseFillEmptyRowsGrad")


@register_gradient("SparseToDense")
def _sparse_to_dense_grad(op, grad):
    indices = op.inputs[0]
    values_grad = build("GatherNd", grad, indices)
    if op.inputs[2].shape.ndims == 0:  # one value broadcast to every index
        values_grad = reduce_sum(values_grad, [0])
    default_grad = build("Sub", _sum_all(grad), _sum_all(values_grad))
    return None, None, values_grad, default_grad


def _sum_all(x):
    if x.shape.ndims is not None:
        return reduce_sum(x, list(range(x.shape.ndims)))
    return reduce_sum(x, build("Range", 0, build("Rank", x), 1))


@register_gradient("SparseTensorDenseMatMul")
def _sparse_tensor_dense_matmul_grad(op, grad):
    """dA at each entry (i, k) is grad[i] . b[k] (adjoints swap roles); dB = A^H grad."""
    a_indices, a_values, a_shape, b = op.inputs
    adj_a, adj_b = op.get_attr("adjoint_a"), op.get_attr("adjoint_b")
    b_grad = build(
        "SparseTensorDenseMatMul", a_indices, a_values, a_shape, grad, adjoint_a=not adj_a
    )
    if adj_b:
        b_grad = (
            build("Conj", build("Transpose", b_grad, [1, 0]))
            if b.dtype.is_complex
            else (build("Transpose", b_grad, [1, 0]))
        )
    rows = build(
        "StridedSlice",
        a_indices,
        [0, 0],
        [0, 1],
        [1, 1],
        begin_mask=1,
        end_mask=1,
        shrink_axis_mask=2,
    )
    cols = build(
        "StridedSlice",
        a_indices,
        [0, 1],
        [0, 2],
        [1, 1],
        begin_mask=1,
        end_mask=1,
        shrink_axis_mask=2,
    )
    parts_a = build("GatherV2", grad, cols if adj_a else rows, 0)
    b_rows = build("Transpose", b, [1, 0]) if adj_b else b
    parts_b = build("GatherV2", b_rows, rows if adj_a else cols, 0)
    if (
        b.dtype.is_complex
    ):  # TF's conjugations: a's part when A is adjoint, b's when both or neither
        if adj_a:
            parts_a = build("Conj", parts_a)
        if adj_a == adj_b:
            parts_b = build("Conj", parts_b)
    return None, reduce_sum(build("Mul", parts_a, parts_b), [1]), None, b_grad


@register_gradient("SparseTensorDenseAdd")
def _sparse_tensor_dense_add_grad(op, grad):
    return None, build("GatherNd", grad, op.inputs[0]), None, grad


@register_gradient("SparseReduceSum")
def _sparse_reduce_sum_grad(op, grad):
    """Like Sum's: the output gradient, with reduced axes kept as 1, read at each entry."""
    indices, sp_shape, axes = op.inputs[0], op.inputs[2], op.inputs[3]
    kept = cast(reduced_shape(sp_shape, axes), dtypes.int64)
    scale = build("FloorDiv", sp_shape, kept)
    return (
        None,
        build("GatherNd", reshape(grad, kept), build("FloorDiv", indices, scale)),
        None,
        None,
    )


@register_gradient("SparseAdd")
def _sparse_add_grad(op, *grads):
    a_grad, b_grad = build("SparseAddGrad", grads[1], op.inputs[0], op.inputs[3], op.outputs[0])
    a_grad.set_shape(op.inputs[1].shape)
    b_grad.set_shape(op.inputs[4].shape)
    return None, a_grad, None, None, b_grad, None, None


@register_gradient("SparseReorder")
def _sparse_reorder_grad(op, _, values_grad):
    """The values' gradient permuted back: reorder the entry numbers, invert the permutation."""
    indices, sp_shape = op.inputs[0], op.inputs[2]
    entries = build(
        "Range",
        0,
        build("StridedSlice", shape(indices, dtypes.int64), [0], [1], [1], shrink_axis_mask=1),
        1,
    )
    order = build("SparseReorder", indices, entries, sp_shape)[1]
    return None, build("GatherV2", values_grad, build("InvertPermutation", order), 0), None


@register_gradient("SparseSoftmax")
def _sparse_softmax_grad(op, grad):
    """(grad - sum over the row of grad * softmax) * softmax, on the entries present."""
    indices, sp_shape = op.inputs[0], op.inputs[2]
    out = op.outputs[0]
    row_sum = build(
        "SparseReduceSum", indices, build("Mul", out, grad), sp_shape, [-1], keep_dims=True
    )
    centered = build("SparseDenseCwiseAdd", indices, grad, sp_shape, build("Neg", row_sum))
    return None, build("Mul", centered, out), None


@register_gradient("SparseFillEmptyRows")
def _sparse_fill_empty_rows_grad(op, _indices_grad, values_grad, _indicator_grad, _map_grad):
    d_values, d_default = build("SparseFillEmptyRowsGrad", op.outputs[3], values_grad)
    return None, d_values, None, d_default


def _cwise_mul_or_div_grad(op, grad, is_mul: bool):
    """TF's: the dense operand's values at each entry; dy scattered back (summed over the
    broadcast) with a dense SparseTensorDenseAdd."""
    x_indices, x_values, x_shape, y = op.inputs
    y_shape = cast(shape(y), dtypes.int64)
    added = build("Sub", build("Size", x_shape), build("Size", y_shape))
    added_v = build("ExpandDims", added, 0)
    one = constant(1, dtypes.int64, graph=y.graph)
    augmented = build("ConcatV2", [build("Fill", cast(added_v, dtypes.int32), one), y_shape], 0)
    scaled = build("FloorDiv", x_indices, build("FloorDiv", x_shape, augmented))
    begin = build("ConcatV2", [constant([0], dtypes.int32, graph=y.graph), added_v], 0)
    scaled = build("Slice", scaled, begin, [-1, -1])
    dense_vals = build("GatherNd", y, scaled)
    if is_mul:
        dx, dy_val = build("Mul", grad, dense_vals), build("Mul", grad, x_values)
    else:
        dx = build("RealDiv" if grad.dtype.is_floating else "Div", grad, dense_vals)
        dy_val = build(
            "Mul", grad, build("Neg", build("Div", x_values, build("Square", dense_vals)))
        )
    zeros = build("ZerosLike", y)
    dy = build("SparseTensorDenseAdd", scaled, dy_val, y_shape, zeros)
    return None, dx, None, dy


@register_gradient("SparseDenseCwiseMul")
def _sparse_dense_cwise_mul_grad(op, grad):
    return _cwise_mul_or_div_grad(op, grad, True)


@register_gradient("SparseDenseCwiseDiv")
def _sparse_dense_cwise_div_grad(op, grad):
    return _cwise_mul_or_div_grad(op, grad, False)


@register_gradient("SparseDenseCwiseAdd")
def _sparse_dense_cwise_add_grad(op, grad):
    raise NotImplementedError("Gradient for SparseDenseCwiseAdd is not implemented (as in TF).")


@register_gradient("SparseSlice")
def _sparse_slice_grad(op, *grads):
    """The sliced entries' value gradients scattered back to their input entries."""
    grad = build("SparseSliceGrad", grads[1], op.inputs[0], op.inputs[3], op.outputs[0])
    grad.set_shape(op.inputs[1].shape)
    return None, grad, None, None, None


@register_gradient("SparseSparseMaximum")
@register_gradient("SparseSparseMinimum")
def _sparse_sparse_min_max_grad(op, *grads):
    raise NotImplementedError(f"Gradient for {op.type} is not implemented (as in TF).")
