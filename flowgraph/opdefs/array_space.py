"""OpDefs of the array ops that move elements between dimensions: Roll (TensorFlow's
manip_ops.cc), SpaceToDepth/DepthToSpace and SpaceToBatch(ND)/BatchToSpace(ND) (array_ops.cc).

The size rules are plain functions of shapes and constant arguments, shared by the shape
functions (ValueError at graph construction) and the CPU kernels (InvalidArgumentError at run
time), so that both report the same problem in the same words.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.array import dims_of

_INDEX = "{int32, int64}"
_FORMATS = "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'"


# -- Roll ---------------------------------------------------------------------------------------
def check_roll_args(shift_shape, axis_shape) -> None:
    """TF's rule: shift and axis are scalars or vectors of one length."""
    if shift_shape.ndims is not None and shift_shape.ndims > 1:
        raise ValueError("shift must be a scalar or a 1-D vector. Found: " + str(shift_shape))
    if axis_shape.ndims is not None and axis_shape.ndims > 1:
        raise ValueError("axis must be a scalar or a 1-D vector. Found: " + str(axis_shape))
    shift_n, axis_n = shift_shape.num_elements(), axis_shape.num_elements()
    if shift_n is not None and axis_n is not None and shift_n != axis_n:
        raise ValueError(
            f"shift and axis must have the same size: shift {shift_shape} vs. axis {axis_shape}"
        )


def _roll_shape(ctx):
    shape = ctx.input_shapes[0]
    check_roll_args(ctx.input_shapes[1], ctx.input_shapes[2])
    if shape.ndims == 0:
        raise ValueError("input must be 1-D or higher")
    return shape


register_op(
    OpDef(
        "Roll",
        inputs=["input: T", "shift: Tshift", "axis: Taxis"],
        outputs=["output: T"],
        attrs=["T: type", f"Tshift: {_INDEX}", f"Taxis: {_INDEX}"],
        shape_fn=_roll_shape,
    )
)


# -- SpaceToDepth / DepthToSpace ------------------------------------------------------------------
def image_axes(data_format: str) -> tuple[int, int, int]:
    """(height, width, depth) axes of a 4-D image batch in `data_format`."""
    if data_format == "NHWC":
        return 1, 2, 3
    if data_format == "NCHW":
        return 2, 3, 1
    raise ValueError(f"data_format {data_format} is not supported on CPU (use NHWC or NCHW)")


def space_to_depth_dims(dims, block: int, data_format: str) -> list:
    """Output dims of SpaceToDepth for input dims (None where unknown)."""
    h, w, c = image_axes(data_format)
    for axis, what in ((h, "height"), (w, "width")):
        if dims[axis] is not None and dims[axis] % block:
            raise ValueError(
                f"Image {what} {dims[axis]} should be divisible by block_size: {block}"
            )
    out = list(dims)
    out[h] = None if dims[h] is None else dims[h] // block
    out[w] = None if dims[w] is None else dims[w] // block
    out[c] = None if dims[c] is None else dims[c] * block * block
    return out


def depth_to_space_dims(dims, block: int, data_format: str) -> list:
    """Output dims of DepthToSpace for input dims (None where unknown)."""
    h, w, c = image_axes(data_format)
    if dims[c] is not None and dims[c] % (block * block):
        raise ValueError(f"Input depth dimension {dims[c]} should be divisible by: {block * block}")
    out = list(dims)
    out[h] = None if dims[h] is None else dims[h] * block
    out[w] = None if dims[w] is None else dims[w] * block
    out[c] = None if dims[c] is None else dims[c] // (block * block)
    return out


def _depth_shape(rule):
    def shape_fn(ctx):
        shape = ctx.input_shapes[0]
        block, data_format = ctx.attrs["block_size"], ctx.attrs["data_format"]
        if shape.ndims is None:
            return unknown_shape(4)
        if shape.ndims != 4:
            raise ValueError(f"input rank should be: 4 instead of: {shape.ndims}")
        return TensorShape(rule(dims_of(shape), block, data_format))

    return shape_fn


for _name, _rule in (("SpaceToDepth", space_to_depth_dims), ("DepthToSpace", depth_to_space_dims)):
    register_op(
        OpDef(
            _name,
            inputs=["input: T"],
            outputs=["output: T"],
            attrs=["T: type", "block_size: int >= 2", _FORMATS],
            shape_fn=_depth_shape(_rule),
        )
    )


# -- SpaceToBatchND / BatchToSpaceND ---------------------------------------------------------------
def check_block_args(block_shape, pads, what: str) -> tuple[np.ndarray, np.ndarray]:
    """block_shape as a 1-D array of M sizes >= 1 and pads (paddings or crops) as [M, 2] >= 0."""
    block = np.asarray(block_shape)
    if block.ndim != 1:
        raise ValueError(f"block_shape must be 1-D, not {block.ndim}-D")
    pads = np.asarray(pads)
    if pads.shape != (block.size, 2):
        raise ValueError(
            f"{what} should have shape [{block.size}, 2] instead of "
            f"[{','.join(map(str, pads.shape))}]"
        )
    if (block < 1).any():
        raise ValueError(f"block_shape must be positive, got {block.tolist()}")
    if (pads < 0).any():
        raise ValueError(f"{what} must be non-negative, got {pads.tolist()}")
    return block.astype(np.int64), pads.astype(np.int64)


def space_to_batch_dims(dims, block, paddings) -> list:
    """Output dims of SpaceToBatchND: batch * prod(block), padded spatial dims / block."""
    m = len(block)
    if len(dims) < m + 1:
        raise ValueError(f"input rank should be >= {m + 1} instead of {len(dims)}")
    out = list(dims)
    out[0] = None if dims[0] is None else dims[0] * int(np.prod(block))
    for i in range(m):
        d = dims[i + 1]
        if d is None:
            continue
        padded = d + int(paddings[i, 0]) + int(paddings[i, 1])
        if padded % block[i]:
            raise ValueError(
                f"padded_shape[{i}]={padded} is not divisible by block_shape[{i}]={block[i]}"
            )
        out[i + 1] = padded // int(block[i])
    return out


def batch_to_space_dims(dims, block, crops) -> list:
    """Output dims of BatchToSpaceND: batch / prod(block), spatial dims * block - crops."""
    m = len(block)
    if len(dims) < m + 1:
        raise ValueError(f"input rank should be >= {m + 1} instead of {len(dims)}")
    out = list(dims)
    total = int(np.prod(block))
    if dims[0] is not None:
        if dims[0] % total:
            raise ValueError(
                f"Input batch dimension ({dims[0]}) is not divisible by product of block "
                f"sizes ({total})"
            )
        out[0] = dims[0] // total
    for i in range(m):
        d = dims[i + 1]
        if d is None:
            continue
        size = d * int(block[i]) - int(crops[i, 0]) - int(crops[i, 1])
        if size < 0:
            raise ValueError(
                f"Negative output dimension size caused by cropping: crops[{i}] = "
                f"{crops[i].tolist()} is larger than {d * int(block[i])}"
            )
        out[i + 1] = size
    return out


def _batch_shape(rule, what: str, block_of):
    """Shape fn from `rule` once the block sizes and pads are constants; unknown dims otherwise."""

    def shape_fn(ctx):
        shape = ctx.input_shapes[0]
        block = block_of(ctx)
        pads = ctx.input_constant(len(ctx.input_shapes) - 1)
        if block is None or pads is None or shape.ndims is None:
            return unknown_shape(shape.ndims)
        block, pads = check_block_args(block, pads, what)
        return TensorShape(rule(dims_of(shape), block, pads))

    return shape_fn


def _nd_block(ctx):
    return ctx.input_constant(1)


def _square_block(ctx):
    if ctx.input_shapes[0].ndims not in (None, 4):
        raise ValueError(f"input rank should be: 4 instead of: {ctx.input_shapes[0].ndims}")
    return np.array([ctx.attrs["block_size"]] * 2)


register_op(
    OpDef(
        "SpaceToBatchND",
        inputs=["input: T", "block_shape: Tblock_shape", "paddings: Tpaddings"],
        outputs=["output: T"],
        attrs=["T: type", f"Tblock_shape: {_INDEX} = DT_INT32", f"Tpaddings: {_INDEX} = DT_INT32"],
        shape_fn=_batch_shape(space_to_batch_dims, "paddings", _nd_block),
    )
)
register_op(
    OpDef(
        "BatchToSpaceND",
        inputs=["input: T", "block_shape: Tblock_shape", "crops: Tcrops"],
        outputs=["output: T"],
        attrs=["T: type", f"Tblock_shape: {_INDEX} = DT_INT32", f"Tcrops: {_INDEX} = DT_INT32"],
        shape_fn=_batch_shape(batch_to_space_dims, "crops", _nd_block),
    )
)
register_op(
    OpDef(
        "SpaceToBatch",
        inputs=["input: T", "paddings: Tpaddings"],
        outputs=["output: T"],
        attrs=["T: type", f"Tpaddings: {_INDEX} = DT_INT32", "block_size: int >= 2"],
        shape_fn=_batch_shape(space_to_batch_dims, "paddings", _square_block),
    )
)
register_op(
    OpDef(
        "BatchToSpace",
        inputs=["input: T", "crops: Tidx"],
        outputs=["output: T"],
        attrs=["T: type", "block_size: int >= 2", f"Tidx: {_INDEX} = DT_INT32"],
        shape_fn=_batch_shape(batch_to_space_dims, "crops", _square_block),
    )
)
