"""CPU kernels for Roll, SpaceToDepth/DepthToSpace and SpaceToBatch(ND)/BatchToSpace(ND).

Each is one NumPy reshape-transpose-reshape (plus np.pad or a slice), so the element moves run
in C; the size checks are the shape functions' own (`flowgraph.opdefs.array_space`).
"""

from __future__ import annotations

import numpy as np

from flowgraph.core.shapes import TensorShape
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu.array import as_ints, checked, empty_value, invalid
from flowgraph.opdefs import array_space as defs


@register_kernel("Roll")
def roll(ctx, x, shift, axis):
    checked(defs.check_roll_args, TensorShape(np.shape(shift)), TensorShape(np.shape(axis)))
    x = np.asarray(x)
    if x.ndim == 0:
        raise invalid("input must be 1-D or higher")
    axes = as_ints(axis)
    for a in axes:
        if not -x.ndim <= a < x.ndim:
            raise invalid(f"axis {a} is out of range")
    # np.roll adds the shifts of an axis named more than once, as TensorFlow does.
    return np.roll(x, as_ints(shift), axes) if axes else x


def _image(ctx, x):
    """(x, block size, whether NHWC) after TF's checks of rank and data format."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise invalid(f"input rank should be: 4 instead of: {x.ndim}")
    checked(defs.image_axes, ctx.attrs["data_format"])
    return x, ctx.attrs["block_size"], ctx.attrs["data_format"] == "NHWC"


@register_kernel("SpaceToDepth")
def space_to_depth(ctx, x):
    x, b, nhwc = _image(ctx, x)
    out = checked(defs.space_to_depth_dims, list(x.shape), b, ctx.attrs["data_format"])
    # Split H and W into (H/b, b) and (W/b, b); the two block axes go in front of the depth.
    if nhwc:
        n, hh, ww, cc = x.shape
        y = x.reshape(n, hh // b, b, ww // b, b, cc).transpose(0, 1, 3, 2, 4, 5)
    else:  # NCHW
        n, cc, hh, ww = x.shape
        y = x.reshape(n, cc, hh // b, b, ww // b, b).transpose(0, 3, 5, 1, 2, 4)
    return y.reshape(out)


@register_kernel("DepthToSpace")
def depth_to_space(ctx, x):
    x, b, nhwc = _image(ctx, x)
    out = checked(defs.depth_to_space_dims, list(x.shape), b, ctx.attrs["data_format"])
    if nhwc:  # depth = (row in block, column in block, channel)
        n, hh, ww, cc = x.shape
        y = x.reshape(n, hh, ww, b, b, cc // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    else:  # NCHW
        n, cc, hh, ww = x.shape
        y = x.reshape(n, b, b, cc // (b * b), hh, ww).transpose(0, 3, 4, 1, 5, 2)
    return y.reshape(out)


def space_to_batch(x, block, paddings):
    """Pads the M spatial dims, then moves each block offset into the batch dimension."""
    x = np.asarray(x)
    block, paddings = checked(defs.check_block_args, block, paddings, "paddings")
    out = checked(defs.space_to_batch_dims, list(x.shape), block, paddings)
    m = len(block)
    pad = [(0, 0)] + [tuple(p) for p in paddings.tolist()] + [(0, 0)] * (x.ndim - m - 1)
    y = np.pad(x, pad, constant_values=empty_value(x.dtype))  # b'' pads strings
    # [batch, s1/b1, b1, ..., sM/bM, bM, rest] -> [b1, ..., bM, batch, s1/b1, ..., rest]
    split = [y.shape[0]]
    for i in range(m):
        split += [y.shape[i + 1] // int(block[i]), int(block[i])]
    y = y.reshape(split + list(y.shape[m + 1 :]))
    order = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    order += list(range(1 + 2 * m, y.ndim))
    return y.transpose(order).reshape(out)


def batch_to_space(x, block, crops):
    """Moves the block offsets out of the batch dimension, then crops the M spatial dims."""
    x = np.asarray(x)
    block, crops = checked(defs.check_block_args, block, crops, "crops")
    out = checked(defs.batch_to_space_dims, list(x.shape), block, crops)
    m = len(block)
    # [b1, ..., bM, batch', s1, ..., sM, rest] -> [batch', s1, b1, ..., sM, bM, rest]
    y = x.reshape([int(b) for b in block] + [out[0]] + list(x.shape[1:]))
    order = [m]
    for i in range(m):
        order += [m + 1 + i, i]
    order += list(range(2 * m + 1, y.ndim))
    y = y.transpose(order)
    full = [out[0]] + [x.shape[i + 1] * int(block[i]) for i in range(m)] + list(x.shape[m + 1 :])
    y = y.reshape(full)
    index = (slice(None),) + tuple(
        slice(int(crops[i, 0]), full[i + 1] - int(crops[i, 1])) for i in range(m)
    )
    return y[index]


@register_kernel("SpaceToBatchND")
def space_to_batch_nd(ctx, x, block_shape, paddings):
    return space_to_batch(x, block_shape, paddings)


@register_kernel("BatchToSpaceND")
def batch_to_space_nd(ctx, x, block_shape, crops):
    return batch_to_space(x, block_shape, crops)


def _square(ctx, x):
    if np.ndim(x) != 4:
        raise invalid(f"input rank should be: 4 instead of: {np.ndim(x)}")
    return [ctx.attrs["block_size"]] * 2


@register_kernel("SpaceToBatch")
def space_to_batch_v1(ctx, x, paddings):
    return space_to_batch(x, _square(ctx, x), paddings)


@register_kernel("BatchToSpace")
def batch_to_space_v1(ctx, x, crops):
    return batch_to_space(x, _square(ctx, x), crops)
