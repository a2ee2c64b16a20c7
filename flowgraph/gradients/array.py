"""Gradient functions of the array ops (whitepaper §4.1), keyed by op type.

Most array ops only move elements, so their gradient moves the incoming gradient back: a reshape
is undone by a reshape, a transpose by the inverse permutation, a concatenation by a split, a
slice by a pad. A gather's gradient is sparse: an IndexedSlices of the gathered rows.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.gradients.math import reduce_to_inputs
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.gradients.util import (
    build,
    cast,
    constant,
    reduce_sum,
    reshape,
    shape,
    size,
    static_value,
)


@register_gradient("Identity")
@register_gradient("PlaceholderWithDefault")
@register_gradient("Snapshot")
@register_gradient("EnsureShape")
def _identity_grad(op, grad):
    return grad


@register_gradient("IdentityN")
def _identity_n_grad(op, *grads):
    return grads


@register_gradient("CheckNumerics")
def _check_numerics_grad(op, grad):
    return build(
        "CheckNumerics",
        grad,
        message="Not a number (NaN) or infinity (Inf) values "
        "detected in gradient. " + op.get_attr("message"),
    )


@register_gradient("Print")
def _print_grad(op, *grads):
    return [grads[0]] + [None] * (len(op.inputs) - 1)


@register_gradient("Reshape")
@register_gradient("ExpandDims")
def _reshape_grad(op, grad):
    return reshape(grad, shape(op.inputs[0])), None


@register_gradient("Squeeze")
def _squeeze_grad(op, grad):
    return reshape(grad, shape(op.inputs[0]))


def _inverse_perm(perm):
    known = static_value(perm)
    if known is not None:
        return np.argsort(np.asarray(known).reshape(-1)).astype(np.int32).tolist()
    return build("InvertPermutation", perm)


@register_gradient("Transpose")
def _transpose_grad(op, grad):
    return build("Transpose", grad, _inverse_perm(op.inputs[1])), None


@register_gradient("ConjugateTranspose")
def _conjugate_transpose_grad(op, grad):
    return build("ConjugateTranspose", grad, _inverse_perm(op.inputs[1])), None


def _split_back(grad, values, axis_t):
    """The pieces of `grad` matching `values` along `axis_t` (a concat's gradient)."""
    axis = static_value(axis_t)
    rank = values[0].shape.ndims
    if axis is not None and rank is not None:
        axis = int(axis) % max(rank, 1)
        sizes = [v.shape[axis].value if v.shape.ndims is not None else None for v in values]
        if all(s is not None for s in sizes):
            return list(build("SplitV", grad, sizes, axis, num_split=len(values)))
    rank_t = build("Rank", values[0])
    axis_t = build("FloorMod", cast(axis_t, dtypes.int32), rank_t)
    sizes = [build("GatherV2", build("Shape", v), axis_t, 0) for v in values]
    return list(build("SplitV", grad, build("Pack", sizes, axis=0), axis_t, num_split=len(values)))


@register_gradient("ConcatV2")
def _concat_v2_grad(op, grad):
    values = op.inputs[:-1]
    if len(values) == 1:
        return [grad, None]
    return _split_back(grad, values, op.inputs[-1]) + [None]


@register_gradient("Concat")
def _concat_grad(op, grad):
    values = op.inputs[1:]
    if len(values) == 1:
        return [None, grad]
    return [None] + _split_back(grad, values, op.inputs[0])


@register_gradient("Pack")
def _pack_grad(op, grad):
    return list(build("Unpack", grad, num=op.get_attr("N"), axis=op.get_attr("axis")))


@register_gradient("Unpack")
def _unpack_grad(op, *grads):
    return build("Pack", list(grads), axis=op.get_attr("axis"))


@register_gradient("Split")
def _split_grad(op, *grads):
    return None, build("ConcatV2", list(grads), op.inputs[0])


@register_gradient("SplitV")
def _split_v_grad(op, *grads):
    return build("ConcatV2", list(grads), op.inputs[2]), None, None


@register_gradient("Slice")
def _slice_grad(op, grad):
    """Pad the gradient with zeros back to the input: before = begin, after = rest."""
    x, begin, _ = op.inputs
    y = op.outputs[0]
    rank = x.shape.ndims
    if rank is None:
        raise ValueError(f"the gradient of Slice {op.name} needs the input's rank")
    index_type = begin.dtype.base_dtype
    before = reshape(begin, [rank, 1])
    after = build("Sub", build("Sub", shape(x, index_type), shape(y, index_type)), begin)
    paddings = build("ConcatV2", [before, reshape(after, [rank, 1])], 1)
    return build("Pad", grad, paddings), None, None


@register_gradient("StridedSlice")
def _strided_slice_grad(op, grad):
    x, begin, end, strides = op.inputs
    masks = {
        k: op.get_attr(k)
        for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    }
    dx = build(
        "StridedSliceGrad", shape(x, begin.dtype.base_dtype), begin, end, strides, grad, **masks
    )
    return dx, None, None, None


@register_gradient("StridedSliceGrad")
def _strided_slice_grad_grad(op, grad):
    _, begin, end, strides, _ = op.inputs
    masks = {
        k: op.get_attr(k)
        for k in ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    }
    return None, None, None, None, build("StridedSlice", grad, begin, end, strides, **masks)


def gathered_rows(dense_shape, indices, grad, inner) -> IndexedSlices:
    """The gradient of a gather along axis 0, kept sparse: `grad` reshaped to one row per index,
    on `dense_shape` (the params' shape, in the indices' integer type).

    Gather, GatherV2 (axis 0) and ResourceGather share it, and so share TF's node names: Size,
    ExpandDims, strided_slice and concat (only when `inner`, the rows' static shape, is not
    fully known), Reshape (the values), Reshape_1 (the indices).
    """
    n = build("ExpandDims", size(indices, out_type=dense_shape.dtype), 0)
    if inner is not None and inner.is_fully_defined():
        values_shape = [-1] + inner.as_list()
    else:
        tail = build(
            "StridedSlice",
            dense_shape,
            [1],
            [0],
            [1],
            name="strided_slice",
            begin_mask=0,
            end_mask=1,
            ellipsis_mask=0,
            new_axis_mask=0,
            shrink_axis_mask=0,
        )
        values_shape = build("ConcatV2", [n, tail], 0, name="concat")
    values = reshape(grad, values_shape)
    return IndexedSlices(values, reshape(indices, n), dense_shape)


def index_type(indices):
    """The integer type of a gather gradient's shapes: int64 for int64 indices, else int32."""
    return dtypes.int64 if indices.dtype.base_dtype == dtypes.int64 else dtypes.int32


def _gather_axis0(params, indices, grad):
    inner = params.shape[1:] if params.shape.ndims is not None else None
    return gathered_rows(shape(params, index_type(indices)), indices, grad, inner)


@register_gradient("Gather")
def _gather_grad(op, grad):
    params, indices = op.inputs
    return _gather_axis0(params, indices, grad), None


@register_gradient("GatherV2")
def _gather_v2_grad(op, grad):
    params, indices, axis_t = op.inputs
    axis = static_value(axis_t)
    if op.get_attr("batch_dims") != 0:
        raise NotImplementedError(f"the gradient of GatherV2 {op.name} with batch_dims != 0")
    if axis is not None and int(axis) == 0:
        return _gather_axis0(params, indices, grad), None, None
    rank = params.shape.ndims
    if axis is None or rank is None:
        raise NotImplementedError(
            f"the gradient of GatherV2 {op.name} needs a constant axis and the params' rank"
        )
    axis = int(axis) % rank
    # Move the gathered axis to the front, sum rows by index, move it back.
    out_rank = (
        rank - 1 + max(indices.shape.ndims or 0, 0) if indices.shape.ndims is not None else None
    )
    if out_rank is None:
        raise NotImplementedError(f"the gradient of GatherV2 {op.name} needs the indices' rank")
    n_idx = indices.shape.ndims
    flat_perm = [axis + i for i in range(n_idx)] + [
        i for i in range(out_rank) if not axis <= i < axis + n_idx
    ]
    moved = build("Transpose", grad, flat_perm)
    moved_shape = build("Shape", moved)
    rest = build(
        "StridedSlice",
        moved_shape,
        [n_idx],
        [0],
        [1],
        begin_mask=0,
        end_mask=1,
        ellipsis_mask=0,
        new_axis_mask=0,
        shrink_axis_mask=0,
    )
    values = reshape(
        moved, build("ConcatV2", [constant([-1], dtypes.int32, graph=grad.graph), rest], 0)
    )
    rows = build("GatherV2", shape(params), axis, 0)
    summed = build("UnsortedSegmentSum", values, reshape(indices, [-1]), rows)
    back = [i for i in range(1, axis + 1)] + [0] + list(range(axis + 1, rank))
    return build("Transpose", summed, back), None, None


@register_gradient("GatherNd")
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    return build("ScatterNd", indices, grad, shape(params, indices.dtype.base_dtype)), None


@register_gradient("ScatterNd")
def _scatter_nd_grad(op, grad):
    indices = op.inputs[0]
    return None, build("GatherNd", grad, indices), None


@register_gradient("Tile")
def _tile_grad(op, grad):
    """Tile repeats x m_i times along axis i: view grad as [m_0, d_0, m_1, d_1, ...] and sum
    over the m axes."""
    x, multiples = op.inputs
    known_m = static_value(multiples)
    if known_m is not None and x.shape.is_fully_defined():
        split = [v for pair in zip(np.asarray(known_m).tolist(), x.shape.as_list()) for v in pair]
        axes = list(range(0, len(split), 2))
        return reshape(reduce_sum(reshape(grad, split), axes), x.shape.as_list()), None
    index_type = multiples.dtype.base_dtype
    pairs = build("Pack", [multiples, build("Shape", x, out_type=index_type)], axis=0)
    split = reshape(build("Transpose", pairs, [1, 0]), [-1])
    axes = build(
        "Range",
        constant(0, dtypes.int32, graph=x.graph),
        build("Size", split),
        constant(2, dtypes.int32, graph=x.graph),
    )
    summed = reduce_sum(reshape(grad, split), axes)
    summed.set_shape(x.shape)
    return summed, None


@register_gradient("Pad")
@register_gradient("PadV2")
def _pad_grad(op, grad):
    """Slice the un-padded region back out: begin = paddings[:, 0], size = shape(x)."""
    x, paddings = op.inputs[0], op.inputs[1]
    begin = reshape(build("Slice", paddings, [0, 0], [-1, 1]), [-1])
    dx = build("Slice", grad, begin, shape(x, paddings.dtype.base_dtype))
    return (dx, None) if op.type == "Pad" else (dx, None, None)


@register_gradient("ReverseV2")
def _reverse_grad(op, grad):
    return build("ReverseV2", grad, op.inputs[1]), None


@register_gradient("ReverseSequence")
def _reverse_sequence_grad(op, grad):
    seq_lengths = op.inputs[1]
    return build(
        "ReverseSequence",
        grad,
        seq_lengths,
        seq_dim=op.get_attr("seq_dim"),
        batch_dim=op.get_attr("batch_dim"),
    ), None


@register_gradient("BroadcastTo")
def _broadcast_to_grad(op, grad):
    return reduce_to_inputs(op.inputs[0], op.outputs[0], grad, None)[0], None


@register_gradient("Fill")
def _fill_grad(op, grad):
    return None, build("Sum", grad, build("Range", 0, build("Rank", grad), 1), keep_dims=False)


@register_gradient("OneHot")
def _one_hot_grad(op, grad):
    return None, None, None, None


for _op_type in (
    "StopGradient",
    "Shape",
    "ShapeN",
    "Size",
    "Rank",
    "ZerosLike",
    "OnesLike",
    "Range",
    "LinSpace",
    "BroadcastArgs",
    "BroadcastGradientArgs",
    "ConcatOffset",
    "Unique",
    "UniqueWithCounts",
    "ListDiff",
    "InvertPermutation",
    "Assert",
    "Bitcast",
    "GuaranteeConst",
    "Timestamp",
):
    not_differentiable(_op_type)


@register_gradient("DynamicStitch")
def _dynamic_stitch_grad(op, grad):
    """Each data input gets the rows of the gradient its indices were stitched to (TF's rule;
    with duplicate indices the last writer won the forward pass, every writer gets the row)."""
    n = len(op.inputs) // 2
    if isinstance(grad, IndexedSlices):
        rows = build("StridedSlice", shape(op.outputs[0]), [0], [1], [1], shrink_axis_mask=1)
        grad = build("UnsortedSegmentSum", grad.values, grad.indices, rows)
    return [None] * n + [build("GatherV2", grad, op.inputs[i], 0) for i in range(n)]


@register_gradient("MirrorPad")
def _mirror_pad_grad(op, grad):
    return build("MirrorPadGrad", grad, op.inputs[1], mode=op.get_attr("mode")), None


@register_gradient("MirrorPadGrad")
def _mirror_pad_grad_grad(op, grad):
    return build("MirrorPad", grad, op.inputs[1], mode=op.get_attr("mode")), None
