"""OpDefs of the array row that select or place elements by index: Slice, StridedSlice,
Gather/GatherV2/GatherNd, ScatterNd, OneHot, Unique, ListDiff (TensorFlow's array_ops.cc)."""

from __future__ import annotations

import numpy as np

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs import strided_slice as ss
from flowgraph.opdefs.array import canonical_axis, const_int, dims_of

_INDEX = "{int32, int64}"


def _vector(ctx, i: int):
    """Input i as a list of ints, or a list of UNKNOWN of its static length, or None."""
    value = ctx.input_constant(i)
    if value is not None:
        return [int(v) for v in np.asarray(value).reshape(-1)]
    n = ctx.input_shapes[i].with_rank(1)[0].value
    return None if n is None else [ss.UNKNOWN] * n


def slice_sizes(begin: list, size: list, dims) -> list:
    """Slice's output dims: size -1 means 'to the end'; ValueError for out-of-range windows."""
    out = []
    for i, (b, s, d) in enumerate(zip(begin, size, dims)):
        if b is not ss.UNKNOWN and d is not None and not 0 <= b <= d:
            raise ValueError(f"Expected begin[{i}] in [0, {d}], but got {b}")
        if s == -1:
            out.append(None if d is None or b is ss.UNKNOWN else d - b)
        elif s is not ss.UNKNOWN and s < -1:
            raise ValueError(f"Expected size[{i}] >= -1, but got {s}")
        else:
            if s is not ss.UNKNOWN and b is not ss.UNKNOWN and d is not None and b + s > d:
                raise ValueError(f"Expected size[{i}] in [0, {d - b}], but got {s}")
            out.append(s)
    return out


def _slice_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    begin, size = _vector(ctx, 1), _vector(ctx, 2)
    rank = len(dims) if dims is not None else (len(begin) if begin is not None else None)
    if rank is None:
        return unknown_shape()
    for name, v in (("begin", begin), ("size", size)):
        if v is not None and len(v) != rank:
            raise ValueError(f"Expected {name} and input to have the same rank: {len(v)} vs {rank}")
    if size is None:
        return unknown_shape(rank)
    return TensorShape(slice_sizes(begin or [ss.UNKNOWN] * rank, size, dims or [None] * rank))


register_op(
    OpDef(
        "Slice",
        inputs=["input: T", "begin: Index", "size: Index"],
        outputs=["output: T"],
        attrs=["T: type", f"Index: {_INDEX}"],
        shape_fn=_slice_shape,
    )
)

_MASKS = [
    "begin_mask: int = 0",
    "end_mask: int = 0",
    "ellipsis_mask: int = 0",
    "new_axis_mask: int = 0",
    "shrink_axis_mask: int = 0",
]


def _strided_slice_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    begin, end, strides = _vector(ctx, 1), _vector(ctx, 2), _vector(ctx, 3)
    n = next((len(v) for v in (begin, end, strides) if v is not None), None)
    if n is None or dims is None:
        return unknown_shape()
    begin, end, strides = (v if v is not None else [ss.UNKNOWN] * n for v in (begin, end, strides))
    entries = ss.dense_entries(ss.build_index(begin, end, strides, ctx.attrs), len(dims))
    ss.check_shrink(entries, dims)
    return TensorShape(ss.output_dims(entries, dims))


register_op(
    OpDef(
        "StridedSlice",
        inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
        outputs=["output: T"],
        attrs=["T: type", f"Index: {_INDEX}"] + _MASKS,
        shape_fn=_strided_slice_shape,
    )
)


# -- gathering and scattering -----------------------------------------------------------------
def gather_dims(params: list, indices: list, axis: int, batch_dims: int) -> list:
    """params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]."""
    return params[:axis] + indices[batch_dims:] + params[axis + 1 :]


def check_batch_dims(batch_dims: int, axis: int, params_rank: int, indices_rank: int) -> int:
    """Canonical batch_dims; ValueError unless batch_dims <= axis and batch_dims <=
    rank(indices)."""
    if batch_dims < 0:
        batch_dims += indices_rank
    if not 0 <= batch_dims <= indices_rank:
        raise ValueError(
            f"batch_dims ({batch_dims}) out of range [{-indices_rank}, {indices_rank}]"
        )
    if batch_dims > axis:
        raise ValueError(f"batch_dims ({batch_dims}) must be less than or equal to axis ({axis}).")
    if batch_dims >= params_rank:
        raise ValueError(
            f"batch_dims ({batch_dims}) must be less than rank(params) ({params_rank})."
        )
    return batch_dims


def _gather_v2_shape(ctx):
    params, indices = dims_of(ctx.input_shapes[0]), dims_of(ctx.input_shapes[1])
    axis = const_int(ctx, 2)
    if params is None or indices is None:
        return unknown_shape()
    if axis is None:  # the rank is known even when the axis is not
        batch_dims = ctx.attrs["batch_dims"]
        batch_dims = batch_dims + len(indices) if batch_dims < 0 else batch_dims
        return unknown_shape(len(params) + len(indices) - 1 - batch_dims)
    if not params:
        raise ValueError("Shape must be at least rank 1 but is rank 0")
    axis = canonical_axis(axis, len(params))
    batch_dims = check_batch_dims(ctx.attrs["batch_dims"], axis, len(params), len(indices))
    for i in range(batch_dims):
        if params[i] is not None and indices[i] is not None and params[i] != indices[i]:
            raise ValueError(
                f"params.shape[{i}]: {params[i]} should be equal to indices.shape[{i}]: "
                f"{indices[i]}"
            )
    return TensorShape(gather_dims(params, indices, axis, batch_dims))


register_op(
    OpDef(
        "GatherV2",
        inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
        outputs=["output: Tparams"],
        attrs=["batch_dims: int = 0", "Tparams: type", f"Tindices: {_INDEX}", f"Taxis: {_INDEX}"],
        shape_fn=_gather_v2_shape,
    )
)


def _gather_shape(ctx):
    params, indices = dims_of(ctx.input_shapes[0]), dims_of(ctx.input_shapes[1])
    if params is None or indices is None:
        return unknown_shape()
    return TensorShape(indices + params[1:])


register_op(
    OpDef(
        "Gather",
        inputs=["params: Tparams", "indices: Tindices"],
        outputs=["output: Tparams"],
        attrs=["validate_indices: bool = true", "Tparams: type", f"Tindices: {_INDEX}"],
        shape_fn=_gather_shape,
    )
)


def _gather_nd_shape(ctx):
    params, indices = dims_of(ctx.input_shapes[0]), dims_of(ctx.input_shapes[1])
    if params is None or indices is None or not indices or indices[-1] is None:
        return unknown_shape()
    k = indices[-1]
    if k > len(params):
        raise ValueError(
            f"indices.shape[-1] must be <= params.rank, but saw indices shape: "
            f"{TensorShape(indices)} and params shape: {TensorShape(params)}"
        )
    return TensorShape(indices[:-1] + params[k:])


register_op(
    OpDef(
        "GatherNd",
        inputs=["params: Tparams", "indices: Tindices"],
        outputs=["output: Tparams"],
        attrs=["Tparams: type", f"Tindices: {_INDEX}"],
        shape_fn=_gather_nd_shape,
    )
)


def _scatter_nd_shape(ctx):
    shape = ctx.input_as_shape(2)
    return check_scatter_nd(ctx.input_shapes[0], ctx.input_shapes[1], shape)


def check_scatter_nd(indices_shape, updates_shape, shape):
    """`shape` once updates.shape = indices.shape[:-1] + shape[indices.shape[-1]:] is
    possible (ScatterNd and TensorScatter* share TF's ScatterNdShapeHelper)."""
    indices, updates = dims_of(indices_shape), dims_of(updates_shape)
    out = dims_of(shape)
    if out is not None and indices and indices[-1] is not None and updates is not None:
        k = indices[-1]
        if k > len(out):
            raise ValueError(f"Output must have rank at least {k}, got shape {shape}")
        want = TensorShape(indices[:-1] + out[k:])
        if not want.is_compatible_with(TensorShape(updates)):
            raise ValueError(
                f"The outer {len(indices) - 1} dimensions of updates.shape="
                f"{TensorShape(updates)} must match the outer dimensions of indices.shape="
                f"{TensorShape(indices)}; updates must have shape {want}"
            )
    return shape


register_op(
    OpDef(
        "ScatterNd",
        inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
        outputs=["output: T"],
        attrs=["T: type", f"Tindices: {_INDEX}"],
        shape_fn=_scatter_nd_shape,
    )
)


# -- encoding and sets ------------------------------------------------------------------------
def _one_hot_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    axis = ctx.attrs["axis"]
    depth = const_int(ctx, 1)
    if depth is not None and depth < 0:
        raise ValueError(f"depth must be non-negative, got: {depth}")
    if dims is None:
        return unknown_shape()
    if not -1 <= axis <= len(dims):
        raise ValueError(
            f"Expected axis to be -1 or between [0, {len(dims) + 1}).  But received: {axis}"
        )
    axis = len(dims) if axis == -1 else axis
    return TensorShape(dims[:axis] + [depth] + dims[axis:])


register_op(
    OpDef(
        "OneHot",
        inputs=["indices: TI", "depth: int32", "on_value: T", "off_value: T"],
        outputs=["output: T"],
        attrs=["axis: int = -1", "T: type", "TI: {uint8, int32, int64} = DT_INT64"],
        shape_fn=_one_hot_shape,
    )
)


def _unique_shape(ctx):
    x = ctx.input_shapes[0].with_rank(1)
    return [unknown_shape(1), x] + [unknown_shape(1)] * (ctx.num_outputs - 2)


register_op(
    OpDef(
        "Unique",
        inputs=["x: T"],
        outputs=["y: T", "idx: out_idx"],
        attrs=["T: type", f"out_idx: {_INDEX} = DT_INT32"],
        shape_fn=_unique_shape,
    )
)
register_op(
    OpDef(
        "UniqueWithCounts",
        inputs=["x: T"],
        outputs=["y: T", "idx: out_idx", "count: out_idx"],
        attrs=["T: type", f"out_idx: {_INDEX} = DT_INT32"],
        shape_fn=_unique_shape,
    )
)


def _list_diff_shape(ctx):
    ctx.input_shapes[0].with_rank(1)
    ctx.input_shapes[1].with_rank(1)
    return [unknown_shape(1), unknown_shape(1)]


register_op(
    OpDef(
        "ListDiff",
        inputs=["x: T", "y: T"],
        outputs=["out: T", "idx: out_idx"],
        attrs=["T: type", f"out_idx: {_INDEX} = DT_INT32"],
        shape_fn=_list_diff_shape,
    )
)
