"""Wrappers of the ops that move elements between dimensions: tf.roll (tf.manip.roll),
tf.space_to_depth / tf.depth_to_space (also in tf.nn), and tf.space_to_batch(_nd) /
tf.batch_to_space(_nd) with tf.required_space_to_batch_paddings, TF 1.15's signatures.

The block-of-two forms `space_to_batch` and `batch_to_space` build the ND ops with a constant
block shape, as TF 1.15's wrappers do; the SpaceToBatch/BatchToSpace ops exist for imported
graphs.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import constant_value, convert_to_tensor
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import math
from flowgraph.ops.array import index_tensor, stack, zeros_like

__all__ = [
    "batch_to_space",
    "batch_to_space_nd",
    "depth_to_space",
    "required_space_to_batch_paddings",
    "roll",
    "space_to_batch",
    "space_to_batch_nd",
    "space_to_depth",
]


def roll(input, shift, axis, name=None):
    """Rolls the elements of `input` by `shift` along `axis` (both scalars or equal vectors)."""
    shift, axis = index_tensor(shift), index_tensor(axis)
    return apply_op("Roll", [input, shift, axis], name=name).outputs[0]


def space_to_depth(input, block_size, name=None, data_format="NHWC"):
    """Moves each block_size x block_size spatial block into the depth dimension."""
    return apply_op(
        "SpaceToDepth", [input], name=name, block_size=block_size, data_format=data_format
    ).outputs[0]


def depth_to_space(input, block_size, name=None, data_format="NHWC"):
    """Moves depth into block_size x block_size spatial blocks: the inverse of space_to_depth."""
    return apply_op(
        "DepthToSpace", [input], name=name, block_size=block_size, data_format=data_format
    ).outputs[0]


def space_to_batch_nd(input, block_shape, paddings, name=None):
    """Pads the spatial dims and moves each block offset into the batch dimension."""
    inputs = [input, index_tensor(block_shape), index_tensor(paddings)]
    return apply_op("SpaceToBatchND", inputs, name=name).outputs[0]


def batch_to_space_nd(input, block_shape, crops, name=None):
    """The inverse of space_to_batch_nd: block offsets back into space, then cropped."""
    inputs = [input, index_tensor(block_shape), index_tensor(crops)]
    return apply_op("BatchToSpaceND", inputs, name=name).outputs[0]


def _square_block(block_size, block_shape, fn: str):
    if block_size is not None and block_shape is not None:
        raise ValueError(f"{fn}: cannot specify both 'block_size' and 'block_shape'")
    size = block_shape if block_size is None else block_size
    if size is None:
        raise TypeError(f"{fn}() missing required argument 'block_size'")
    return np.array([size, size], dtype=np.int64)


def space_to_batch(input, paddings, block_size=None, name=None, block_shape=None):
    """space_to_batch_nd of a 4-D batch with a square block (`block_shape` is the old name)."""
    block = _square_block(block_size, block_shape, "space_to_batch")
    return space_to_batch_nd(input, block, paddings, name=name)


def batch_to_space(input, crops, block_size=None, name=None, block_shape=None):
    """batch_to_space_nd of a 4-D batch with a square block (`block_shape` is the old name)."""
    block = _square_block(block_size, block_shape, "batch_to_space")
    return batch_to_space_nd(input, block, crops, name=name)


def required_space_to_batch_paddings(input_shape, block_shape, base_paddings=None, name=None):
    """(paddings, crops) that make `input_shape` + `base_paddings` divisible by `block_shape`:
    the extra padding goes at the end of each dim, and `crops` removes exactly that extra."""
    with name_scope(name, "required_space_to_batch_paddings", [input_shape, block_shape]):
        input_shape = convert_to_tensor(input_shape, dtype=dtypes.int32, name="input_shape")
        block_shape = convert_to_tensor(block_shape, dtype=dtypes.int32, name="block_shape")
        block_shape.shape.assert_has_rank(1)
        m = block_shape.shape[0].value
        if base_paddings is None:
            base_paddings = np.zeros([m if m is not None else 0, 2], np.int32)
        base_paddings = convert_to_tensor(base_paddings, dtype=dtypes.int32, name="base_paddings")
        known = [constant_value(t) for t in (input_shape, block_shape, base_paddings)]
        if all(v is not None for v in known):
            paddings, crops = _required_paddings(*(np.asarray(v) for v in known))
            return (
                convert_to_tensor(paddings, name="paddings"),
                convert_to_tensor(crops, name="crops"),
            )
        pad_start = base_paddings[:, 0]
        orig_pad_end = base_paddings[:, 1]
        full = input_shape + pad_start + orig_pad_end
        extra = math.floormod(block_shape - math.floormod(full, block_shape), block_shape)
        pad_end = orig_pad_end + extra
        paddings = stack([pad_start, pad_end], axis=1, name="paddings")
        crops = stack([zeros_like(extra), extra], axis=1, name="crops")
        return paddings, crops


def _required_paddings(input_shape, block_shape, base_paddings):
    full = input_shape + base_paddings[:, 0] + base_paddings[:, 1]
    extra = (block_shape - full % block_shape) % block_shape
    paddings = np.stack([base_paddings[:, 0], base_paddings[:, 1] + extra], axis=1)
    crops = np.stack([np.zeros_like(extra), extra], axis=1)
    return paddings.astype(np.int32), crops.astype(np.int32)
