"""OpDefs of the helper ops that gradient graphs use (whitepaper §4.1), with TensorFlow's names
so GraphDefs containing them import and run: BroadcastGradientArgs (the reduction axes of a
broadcasting binary op), UnsortedSegmentSum (densifying IndexedSlices, gather gradients),
DynamicStitch (reduced shapes of dynamic reductions) and InvertPermutation (transpose)."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape


def _broadcast_gradient_args_shape(ctx):
    for s in ctx.input_shapes:
        s.with_rank(1)
    return [TensorShape([None]), TensorShape([None])]


def _unsorted_segment_sum_shape(ctx):
    data, ids, num = ctx.input_shapes
    if num.ndims not in (None, 0):
        raise ValueError(f"Shape must be rank 0 but is rank {num.ndims}")
    if data.ndims is None or ids.ndims is None:
        return unknown_shape()
    if not data[: ids.ndims].is_compatible_with(ids):
        raise ValueError(f"segment_ids.shape = {ids} must be a prefix of data.shape = {data}")
    n = ctx.input_constant(2)
    rows = None if n is None else int(n)
    return TensorShape([rows]).concatenate(data[ids.ndims :])


def _dynamic_stitch_shape(ctx):
    n = ctx.attrs["N"]
    indices, data = ctx.input_shapes[:n], ctx.input_shapes[n:]
    inner = unknown_shape()
    for ind, dat in zip(indices, data):
        if ind.ndims is not None and dat.ndims is not None:
            inner = inner.merge_with(dat[ind.ndims :])
    consts = [ctx.input_constant(i) for i in range(n)]
    rows = (
        None
        if any(c is None for c in consts)
        else max((int(c.max()) + 1 if c.size else 0) for c in consts)
    )
    return TensorShape([rows]).concatenate(inner)


register_op(
    OpDef(
        "BroadcastGradientArgs",
        inputs=["s0: T", "s1: T"],
        outputs=["r0: T", "r1: T"],
        attrs=["T: {int32, int64} = DT_INT32"],
        shape_fn=_broadcast_gradient_args_shape,
    )
)
register_op(
    OpDef(
        "UnsortedSegmentSum",
        inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
        outputs=["output: T"],
        attrs=[
            "T: numbertypes",
            "Tindices: {int32, int64}",
            "Tnumsegments: {int32, int64} = DT_INT32",
        ],
        shape_fn=_unsorted_segment_sum_shape,
    )
)
register_op(
    OpDef(
        "DynamicStitch",
        inputs=["indices: N * int32", "data: N * T"],
        outputs=["merged: T"],
        attrs=["N: int >= 1", "T: type"],
        shape_fn=_dynamic_stitch_shape,
    )
)
register_op(
    OpDef(
        "InvertPermutation",
        inputs=["x: T"],
        outputs=["y: T"],
        attrs=["T: {int32, int64} = DT_INT32"],
        shape_fn=lambda ctx: ctx.input_shapes[0].with_rank(1),
    )
)

_MASKS = [
    "begin_mask: int = 0",
    "end_mask: int = 0",
    "ellipsis_mask: int = 0",
    "new_axis_mask: int = 0",
    "shrink_axis_mask: int = 0",
]


def _strided_slice_grad_shape(ctx):
    return ctx.input_as_shape(0)


# The gradient of StridedSlice: dy scattered into zeros of the input's shape (TF's op).
register_op(
    OpDef(
        "StridedSliceGrad",
        inputs=["shape: Index", "begin: Index", "end: Index", "strides: Index", "dy: T"],
        outputs=["output: T"],
        attrs=["T: type", "Index: {int32, int64}"] + _MASKS,
        shape_fn=_strided_slice_grad_shape,
    )
)


def _mirror_pad_grad_shape(ctx):
    pads = ctx.input_constant(1)
    dims = ctx.input_shapes[0].as_tuple()
    if pads is None or dims is None:
        return unknown_shape(ctx.input_shapes[0].ndims)
    return TensorShape(
        [None if d is None else d - int(p[0]) - int(p[1]) for d, p in zip(dims, pads)]
    )


register_op(
    OpDef(
        "MirrorPadGrad",
        inputs=["input: T", "paddings: Tpaddings"],
        outputs=["output: T"],
        attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32", "mode: {'REFLECT', 'SYMMETRIC'}"],
        shape_fn=_mirror_pad_grad_shape,
    )
)
