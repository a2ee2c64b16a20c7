"""Gradients of the segment reductions, DynamicPartition and Einsum (TF's math_grad.py and
data_flow_grad.py): a segment's output gradient goes back to the rows that made it, shared
evenly among the rows that attain a max/min, divided by the count for a mean."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.gradients.util import build, cast, constant, reshape, shape, zeros_like
from flowgraph.opdefs.segment import parse_equation

not_differentiable("Bincount")
not_differentiable("HistogramFixedWidth")


def _gather(params, ids):
    return build("GatherV2", params, ids, 0)


def _rows(op):
    """num_segments of a sorted segment op: its output's first dimension."""
    return build("StridedSlice", shape(op.outputs[0]), [0], [1], [1], shrink_axis_mask=1)


def _gather_drop_negatives(params, ids, clipped=None, is_positive=None):
    """params[ids] with the rows of negative ids zeroed (TF's _GatherDropNegatives)."""
    if clipped is None:
        clipped = build("Maximum", ids, zeros_like(ids))
    gathered = _gather(params, clipped)
    if is_positive is None:
        is_positive = build("GreaterEqual", ids, zeros_like(ids))
        extra = build("Sub", build("Rank", gathered), build("Rank", is_positive))
        ones = build(
            "Fill", build("ExpandDims", extra, 0), constant(1, dtypes.int32, graph=ids.graph)
        )
        target = build("ConcatV2", [shape(is_positive), ones], 0)
        is_positive = build(
            "LogicalAnd",
            reshape(is_positive, target),
            build("Fill", shape(gathered), constant(True, dtypes.bool_, graph=ids.graph)),
        )
    return build("Select", is_positive, gathered, zeros_like(gathered)), clipped, is_positive


@register_gradient("SegmentSum")
def _segment_sum_grad(op, grad):
    return _gather(grad, op.inputs[1]), None


@register_gradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op, grad):
    return _gather_drop_negatives(grad, op.inputs[1])[0], None, None


def _counts(op, rows):
    """Rows per segment (at least 1), shaped to broadcast against the output."""
    data, ids = op.inputs[0], op.inputs[1]
    ones_shape = build(
        "ConcatV2",
        [
            shape(ids),
            build(
                "Fill",
                build("ExpandDims", build("Sub", build("Rank", data), build("Rank", ids)), 0),
                constant(1, dtypes.int32, graph=ids.graph),
            ),
        ],
        0,
    )
    ones = build("Fill", ones_shape, constant(1, data.dtype.base_dtype, graph=ids.graph))
    counts = build("UnsortedSegmentSum", ones, ids, rows)
    return build("Maximum", counts, constant(1, data.dtype.base_dtype, graph=ids.graph))


@register_gradient("SegmentMean")
def _segment_mean_grad(op, grad):
    scaled = build("RealDiv" if grad.dtype.is_floating else "Div", grad, _counts(op, _rows(op)))
    return _gather(scaled, op.inputs[1]), None


def _min_or_max_grad(op, grad, rows=None):
    data, ids = op.inputs[0], op.inputs[1]
    gathered, clipped, positive = _gather_drop_negatives(op.outputs[0], ids)
    selected = build("LogicalAnd", build("Equal", data, gathered), positive)
    rows = rows if rows is not None else op.inputs[2]
    num = build("UnsortedSegmentSum", cast(selected, grad.dtype.base_dtype), ids, rows)
    weighted = build("RealDiv" if grad.dtype.is_floating else "Div", grad, num)
    spread = _gather_drop_negatives(weighted, None, clipped, positive)[0]
    return build("Select", selected, spread, zeros_like(spread))


@register_gradient("SegmentMax")
@register_gradient("SegmentMin")
def _segment_min_or_max_grad(op, grad):
    return _min_or_max_grad(op, grad, _rows(op)), None


@register_gradient("UnsortedSegmentMax")
@register_gradient("UnsortedSegmentMin")
def _unsorted_segment_min_or_max_grad(op, grad):
    return _min_or_max_grad(op, grad), None, None


def _prod_grad(op, grad, rows):
    """d prod / d x_i = prod of the others: prod / x_i, or the product of the non-zero entries
    where x_i is the segment's only zero (0 where a segment has two zeros)."""
    data, ids = op.inputs[0], op.inputs[1]
    is_zero = build("Equal", data, zeros_like(data))
    num_zeros = build("UnsortedSegmentSum", cast(is_zero, dtypes.int32), ids, rows)
    grad = build(
        "Select", build("Greater", num_zeros, build("OnesLike", num_zeros)), zeros_like(grad), grad
    )
    non_zero = build("Select", is_zero, build("OnesLike", data), data)
    non_zero_prod = build("UnsortedSegmentProd", non_zero, ids, rows)
    clipped = build("Maximum", ids, zeros_like(ids))
    prod_by_el = build("Div", _gather(op.outputs[0], clipped), data)
    partial = build("Select", is_zero, _gather(non_zero_prod, clipped), prod_by_el)
    return build("Mul", _gather_drop_negatives(grad, ids, clipped)[0], partial)


@register_gradient("UnsortedSegmentProd")
def _unsorted_segment_prod_grad(op, grad):
    return _prod_grad(op, grad, op.inputs[2]), None, None


@register_gradient("SegmentProd")
def _segment_prod_grad(op, grad):
    return _prod_grad(op, grad, _rows(op)), None


def _sparse_segment_grad(op, grad, kind):
    """grad[segment_ids[i]] (scaled for mean / sqrt_n) summed into row indices[i] of data."""
    data, indices, ids = op.inputs[:3]
    rows = build("StridedSlice", shape(data), [0], [1], [1], shrink_axis_mask=1)
    g = _gather(grad, ids)
    if kind != "Sum":
        seg_rows = build("StridedSlice", shape(grad), [0], [1], [1], shrink_axis_mask=1)
        ones = build("OnesLike", cast(ids, data.dtype.base_dtype))
        counts = build("UnsortedSegmentSum", ones, ids, seg_rows)
        counts = build("Maximum", counts, build("OnesLike", counts))
        if kind == "SqrtN":
            counts = build("Sqrt", counts)
        scale = _gather(build("Reciprocal", counts), ids)
        extra = build("Sub", build("Rank", g), constant(1, dtypes.int32, graph=ids.graph))
        target = build(
            "ConcatV2",
            [
                shape(scale),
                build(
                    "Fill",
                    build("ExpandDims", extra, 0),
                    constant(1, dtypes.int32, graph=ids.graph),
                ),
            ],
            0,
        )
        g = build("Mul", g, reshape(scale, target))
    return build("UnsortedSegmentSum", g, indices, rows)


for _kind in ("Sum", "Mean", "SqrtN"):

    def _grad(op, grad, kind=_kind):
        return (_sparse_segment_grad(op, grad, kind),) + (None,) * (len(op.inputs) - 1)

    register_gradient(f"SparseSegment{_kind}")(_grad)
    register_gradient(f"SparseSegment{_kind}WithNumSegments")(_grad)


@register_gradient("DynamicPartition")
def _dynamic_partition_grad(op, *grads):
    """Stitches the partitions' gradients back to their rows (zeros for unused outputs)."""
    data, partitions = op.inputs
    n = op.get_attr("num_partitions")
    original = reshape(build("Range", 0, build("Size", partitions), 1), shape(partitions))
    parts = build("DynamicPartition", original, partitions, num_partitions=n)
    parts = parts if isinstance(parts, tuple) else (parts,)
    grads = [g if g is not None else zeros_like(out) for g, out in zip(grads, op.outputs)]
    stitched = build("DynamicStitch", list(parts), grads)
    return reshape(stitched, shape(data)), None


def _einsum_operand_grad(grad, out, others, other_subs, subs, x):
    """d out / d x for x with subscripts `subs`: einsum of grad and the other operands into
    the letters of x that reach the output or another operand, then broadcast over the letters
    only x has (they were summed away)."""
    if len(set(subs)) != len(subs):
        raise NotImplementedError(
            f"Gradient of einsum with a repeated subscript in one input ({subs!r}) is not supported"
        )
    reach = set(out).union(*map(set, other_subs)) if other_subs else set(out)
    kept = "".join(c for c in subs if c in reach)
    eq = ",".join([out] + list(other_subs)) + "->" + kept
    g = build("Einsum", [grad] + list(others), equation=eq)
    if kept == subs:
        return g
    keep_shape = [-1 if c in reach else 1 for c in subs]
    x_shape = shape(x)
    ones = constant(keep_shape, dtypes.int32, graph=x.graph)
    kept_sizes = build(
        "Select", build("Equal", ones, constant(-1, dtypes.int32, graph=x.graph)), x_shape, ones
    )
    return build("BroadcastTo", reshape(g, kept_sizes), x_shape)


@register_gradient("Einsum")
def _einsum_grad(op, grad):
    inputs = list(op.inputs)
    subs, out = parse_equation(op.get_attr("equation"), [x.shape.ndims for x in inputs])
    result = []
    for i, x in enumerate(inputs):
        others = inputs[:i] + inputs[i + 1 :]
        if x.dtype.is_complex:
            others = [build("Conj", y) for y in others]
        other_subs = subs[:i] + subs[i + 1 :]
        result.append(_einsum_operand_grad(grad, out, others, other_subs, subs[i], x))
    return result
