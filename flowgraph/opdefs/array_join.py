"""OpDefs of the array row that join, split, tile, pad and reverse tensors: ConcatV2/Concat,
Pack/Unpack, Split/SplitV, Tile, Pad/PadV2/MirrorPad, ReverseV2, ReverseSequence (TensorFlow's
array_ops.cc). The size-resolving helpers are shared with the CPU kernels."""

from __future__ import annotations

import numpy as np

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.array import canonical_axis, const_int, dims_of

_INDEX = "{int32, int64}"


# -- joining and splitting --------------------------------------------------------------------
def _concat_shape(ctx, values, axis):
    ranks = {s.ndims for s in values if s.ndims is not None}
    if len(ranks) > 1:
        raise ValueError(f"Shape must be rank {min(ranks)} but is rank {max(ranks)}")
    if not ranks:
        return unknown_shape()
    rank = ranks.pop()
    if rank == 0:
        raise ValueError("Can't concatenate scalars (use tf.stack instead)")
    if axis is None:
        return unknown_shape(rank)
    axis = canonical_axis(axis, rank)
    out, total = [None] * rank, 0
    for s in values:
        dims = dims_of(s.with_rank(rank))
        for i, d in enumerate(dims):
            if i != axis and d is not None:
                if out[i] is not None and out[i] != d:
                    raise ValueError(
                        f"Dimension {i} in both shapes must be equal, but are {out[i]} and {d}. "
                        f"Shapes are {values[0]} and {s}"
                    )
                out[i] = d
        total = None if total is None or dims[axis] is None else total + dims[axis]
    out[axis] = total
    return TensorShape(out)


register_op(
    OpDef(
        "ConcatV2",
        inputs=["values: N * T", "axis: Tidx"],
        outputs=["output: T"],
        attrs=["N: int >= 2", "T: type", f"Tidx: {_INDEX} = DT_INT32"],
        shape_fn=lambda ctx: _concat_shape(
            ctx, ctx.input_shapes[:-1], const_int(ctx, len(ctx.inputs) - 1)
        ),
    )
)
register_op(
    OpDef(
        "Concat",
        inputs=["concat_dim: int32", "values: N * T"],
        outputs=["output: T"],
        attrs=["N: int >= 2", "T: type"],
        shape_fn=lambda ctx: _concat_shape(ctx, ctx.input_shapes[1:], const_int(ctx, 0)),
    )
)

register_op(
    OpDef(
        "ConcatOffset",  # where each input of a concat starts in the output (concat's gradient)
        inputs=["concat_dim: int32", "shape: N * shape_type"],
        outputs=["offset: N * shape_type"],
        attrs=["N: int >= 2", f"shape_type: {_INDEX} = DT_INT32"],
        shape_fn=lambda ctx: list(ctx.input_shapes[1:]),
    )
)


def _pack_shape(ctx):
    merged = unknown_shape()
    for s in ctx.input_shapes:
        if not merged.is_compatible_with(s):
            raise ValueError(
                f"Shapes of all inputs must match: values[0].shape = {ctx.input_shapes[0]} != {s}"
            )
        merged = merged.merge_with(s)
    dims = dims_of(merged)
    if dims is None:
        return unknown_shape()
    axis = ctx.attrs["axis"]
    axis = canonical_axis(axis, len(dims) + 1)
    return TensorShape(dims[:axis] + [len(ctx.input_shapes)] + dims[axis:])


register_op(
    OpDef(
        "Pack",
        inputs=["values: N * T"],
        outputs=["output: T"],
        attrs=["N: int >= 1", "T: type", "axis: int = 0"],
        shape_fn=_pack_shape,
    )
)


def _unpack_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    num = ctx.attrs["num"]
    if dims is None:
        return [unknown_shape()] * num
    axis = canonical_axis(ctx.attrs["axis"], len(dims))
    if dims[axis] is not None and dims[axis] != num:
        raise ValueError(f"Dimension must be {num} but is {dims[axis]}")
    return [TensorShape(dims[:axis] + dims[axis + 1 :])] * num


register_op(
    OpDef(
        "Unpack",
        inputs=["value: T"],
        outputs=["output: num * T"],
        attrs=["num: int >= 0", "T: type", "axis: int = 0"],
        shape_fn=_unpack_shape,
    )
)


def _split_shape(ctx):
    dims = dims_of(ctx.input_shapes[1])
    n = ctx.attrs["num_split"]
    axis = const_int(ctx, 0)
    if dims is None or axis is None:
        return [unknown_shape(None if dims is None else len(dims))] * n
    axis = canonical_axis(axis, len(dims))
    if dims[axis] is not None:
        if dims[axis] % n:
            raise ValueError(f"Dimension size must be evenly divisible by {n} but is {dims[axis]}")
        dims[axis] //= n
    return [TensorShape(dims)] * n


register_op(
    OpDef(
        "Split",
        inputs=["split_dim: int32", "value: T"],
        outputs=["output: num_split * T"],
        attrs=["num_split: int >= 1", "T: type"],
        shape_fn=_split_shape,
    )
)


def split_sizes(sizes: list, dim) -> list:
    """Resolves one -1 in SplitV's sizes given the split dimension (int or None)."""
    if sizes.count(-1) > 1:
        raise ValueError(
            "Only one dimensions can have a value of -1. Second one found at index "
            f"{[i for i, s in enumerate(sizes) if s == -1][1]}"
        )
    if any(s < -1 for s in sizes):
        raise ValueError(f"All split sizes must be >= -1, got {sizes}")
    known = sum(s for s in sizes if s != -1)
    if dim is None:
        return [None if s == -1 else s for s in sizes]
    if -1 in sizes:
        if known > dim:
            raise ValueError(
                f"The specified sizes ({sizes}) add up to more than the dimension ({dim})"
            )
        return [dim - known if s == -1 else s for s in sizes]
    if known != dim:
        raise ValueError(
            f"Determined shape must either match input shape along split_dim exactly if fully "
            f"specified, or be less than the size of the input along split_dim if not fully "
            f"specified.  Got: {known} vs {dim}"
        )
    return sizes


def _splitv_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    n = ctx.attrs["num_split"]
    sizes = ctx.input_constant(1)
    axis = const_int(ctx, 2)
    if dims is None or axis is None:
        return [unknown_shape(None if dims is None else len(dims))] * n
    axis = canonical_axis(axis, len(dims))
    if sizes is None:
        return [TensorShape(dims[:axis] + [None] + dims[axis + 1 :])] * n
    sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
    if len(sizes) != n:
        raise ValueError(f"size_splits has {len(sizes)} entries but num_split is {n}")
    return [
        TensorShape(dims[:axis] + [s] + dims[axis + 1 :]) for s in split_sizes(sizes, dims[axis])
    ]


register_op(
    OpDef(
        "SplitV",
        inputs=["value: T", "size_splits: Tlen", "split_dim: int32"],
        outputs=["output: num_split * T"],
        attrs=["num_split: int >= 1", "T: type", f"Tlen: {_INDEX} = DT_INT64"],
        shape_fn=_splitv_shape,
    )
)


# -- tiling, padding, reversing ---------------------------------------------------------------
def _tile_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    n = ctx.input_shapes[1].with_rank(1)[0].value
    multiples = ctx.input_as_shape(1)
    rank = len(dims) if dims is not None else n
    if dims is not None and n is not None and n != len(dims):
        raise ValueError(
            f"Expected multiples argument to be a vector of length {len(dims)} but got length {n}"
        )
    if rank is None:
        return unknown_shape()
    mult = dims_of(multiples.with_rank(rank)) if multiples.ndims is not None else [None] * rank
    dims = dims if dims is not None else [None] * rank
    return TensorShape([None if d is None or m is None else d * m for d, m in zip(dims, mult)])


register_op(
    OpDef(
        "Tile",
        inputs=["input: T", "multiples: Tmultiples"],
        outputs=["output: T"],
        attrs=["T: type", f"Tmultiples: {_INDEX} = DT_INT32"],
        shape_fn=_tile_shape,
    )
)


def check_paddings(paddings: np.ndarray, dims, mode: str | None = None) -> None:
    """ValueError for a paddings matrix that is not [rank, 2], negative, or too big for MirrorPad."""
    rank = len(dims)
    if paddings.shape != (rank, 2):
        raise ValueError(
            f"The first dimension of paddings must be the rank of inputs{[rank, 2]}, "
            f"but got {list(paddings.shape)}"
        )
    if (paddings < 0).any():
        raise ValueError(f"Paddings must be non-negative: {paddings.tolist()}")
    if mode is not None:
        offset = 0 if mode == "SYMMETRIC" else 1
        for i, d in enumerate(dims):
            if d is not None and (paddings[i] > d - offset).any():
                raise ValueError(
                    f"paddings must be less than{' or equal to' if offset == 0 else ''} the dimension "
                    f"size: {paddings[i, 0]}, {paddings[i, 1]} greater than {d} in dimension {i}"
                )


def _pad_shape(ctx):
    dims = dims_of(ctx.input_shapes[0])
    pshape = ctx.input_shapes[1].with_rank(2)
    paddings = ctx.input_constant(1)
    rank = len(dims) if dims is not None else pshape[0].value
    if rank is None:
        return unknown_shape()
    if paddings is None:
        return unknown_shape(rank)
    paddings = np.asarray(paddings).astype(np.int64)
    dims = dims if dims is not None else [None] * rank
    check_paddings(paddings, dims, ctx.attrs.get("mode"))
    return TensorShape([None if d is None else d + int(p.sum()) for d, p in zip(dims, paddings)])


register_op(
    OpDef(
        "Pad",
        inputs=["input: T", "paddings: Tpaddings"],
        outputs=["output: T"],
        attrs=["T: type", f"Tpaddings: {_INDEX} = DT_INT32"],
        shape_fn=_pad_shape,
    )
)
register_op(
    OpDef(
        "PadV2",
        inputs=["input: T", "paddings: Tpaddings", "constant_values: T"],
        outputs=["output: T"],
        attrs=["T: type", f"Tpaddings: {_INDEX} = DT_INT32"],
        shape_fn=_pad_shape,
    )
)
register_op(
    OpDef(
        "MirrorPad",
        inputs=["input: T", "paddings: Tpaddings"],
        outputs=["output: T"],
        attrs=["T: type", f"Tpaddings: {_INDEX} = DT_INT32", "mode: {'REFLECT', 'SYMMETRIC'}"],
        shape_fn=_pad_shape,
    )
)


def _reverse_shape(ctx):
    """The input's shape; constant axes must be in range and not repeated (TF's check)."""
    shape, axes = ctx.input_shapes[0], ctx.input_constant(1)
    if shape.ndims is not None and axes is not None:
        seen = set()
        for i, axis in enumerate(np.asarray(axes).reshape(-1).tolist()):
            if not -shape.ndims <= axis < shape.ndims:
                raise ValueError(
                    f"'axis'[{i}] = {axis} is out of valid range [0, {shape.ndims - 1}]"
                )
            if axis % shape.ndims in seen:
                raise ValueError(f"axis {axis % shape.ndims} specified more than once.")
            seen.add(axis % shape.ndims)
    return shape


register_op(
    OpDef(
        "ReverseV2",
        inputs=["tensor: T", "axis: Tidx"],
        outputs=["output: T"],
        attrs=[f"Tidx: {_INDEX} = DT_INT32", "T: type"],
        shape_fn=_reverse_shape,
    )
)


def _reverse_sequence_shape(ctx):
    shape = ctx.input_shapes[0]
    lengths = ctx.input_shapes[1].with_rank(1)
    if shape.ndims is None:
        return shape
    rank = shape.ndims
    seq, batch = ctx.attrs["seq_dim"], ctx.attrs["batch_dim"]
    if not (0 <= seq < rank and 0 <= batch < rank) or seq == batch:
        raise ValueError(
            f"Invalid seq_dim {seq} or batch_dim {batch} for input of rank {rank} "
            "(they must differ and be in [0, rank))"
        )
    if not shape[batch].is_compatible_with(lengths[0]):
        raise ValueError(
            f"Length of seq_lengths {lengths[0]} != input.dims({batch}) {shape[batch]}"
        )
    return shape


register_op(
    OpDef(
        "ReverseSequence",
        inputs=["input: T", "seq_lengths: Tlen"],
        outputs=["output: T"],
        attrs=["seq_dim: int", "batch_dim: int = 0", "T: type", f"Tlen: {_INDEX} = DT_INT64"],
        shape_fn=_reverse_sequence_shape,
    )
)
