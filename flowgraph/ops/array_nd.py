"""tf.searchsorted, tf.unravel_index, the functional scatters tf.tensor_scatter_* and
tf.extract_image_patches / tf.image.extract_patches, with TF1's signatures.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.convert import convert_to_tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops.math import name_scope

__all__ = [
    "extract_image_patches",
    "searchsorted",
    "tensor_scatter_add",
    "tensor_scatter_nd_add",
    "tensor_scatter_nd_max",
    "tensor_scatter_nd_min",
    "tensor_scatter_nd_sub",
    "tensor_scatter_nd_update",
    "tensor_scatter_sub",
    "tensor_scatter_update",
    "unravel_index",
]


def _last_dim(x):
    """x.shape[-1] as an int when known, else a scalar tensor."""
    if x.shape.ndims is not None and x.shape[-1].value is not None:
        return x.shape[-1].value
    return array_ops.shape(x)[-1]


def searchsorted(sorted_sequence, values, side="left", out_type=dtypes.int32, name=None):
    """For each value, the index in its row of `sorted_sequence` (sorted along the last axis)
    where it would be inserted: before equal elements (side='left', LowerBound) or after them
    ('right', UpperBound). The leading dims of both must agree.

    Example: tf.searchsorted([1., 2., 2., 3.], [2., 2.5], side='right')  # [3, 3]
    """
    if side not in ("left", "right"):
        raise ValueError(f"side must be either 'right' or 'left'.  Saw: {side}.")
    with name_scope(name, "searchsorted", [sorted_sequence, values]):
        sorted_sequence = convert_to_tensor(sorted_sequence, name="sorted_sequence")
        values = convert_to_tensor(
            values, name="values", preferred_dtype=sorted_sequence.dtype.base_dtype
        )
        sequence_2d = array_ops.reshape(sorted_sequence, [-1, _last_dim(sorted_sequence)])
        values_2d = array_ops.reshape(values, [-1, _last_dim(values)])
        op_type = "UpperBound" if side == "right" else "LowerBound"
        out = apply_op(op_type, [sequence_2d, values_2d], out_type=out_type).outputs[0]
        return array_ops.reshape(out, array_ops.shape(values))


def unravel_index(indices, dims, name=None):
    """The coordinates in an array of shape `dims` of flat (row-major) indices: a scalar index
    gives [len(dims)], a vector of n gives [len(dims), n].

    Example: tf.unravel_index([7, 1], [3, 4])  # [[1, 0], [3, 1]]
    """
    return apply_op("UnravelIndex", [indices, dims], name=name).outputs[0]


def _tensor_scatter(op_type: str):
    def scatter(tensor, indices, updates, name=None):
        return apply_op(op_type, [tensor, indices, updates], name=name).outputs[0]

    return scatter


tensor_scatter_update = _tensor_scatter("TensorScatterUpdate")
tensor_scatter_update.__doc__ = """A copy of `tensor` with the slices at `indices` (index vectors
along its last axis) replaced by `updates`; `tensor` itself is not changed.

Example: tf.tensor_scatter_update(tf.zeros([4]), [[1], [3]], [5., 7.])  # [0, 5, 0, 7]
"""
tensor_scatter_add = _tensor_scatter("TensorScatterAdd")
tensor_scatter_add.__doc__ = "A copy of `tensor` with `updates` added at `indices`."
tensor_scatter_sub = _tensor_scatter("TensorScatterSub")
tensor_scatter_sub.__doc__ = "A copy of `tensor` with `updates` subtracted at `indices`."
tensor_scatter_nd_max = _tensor_scatter("TensorScatterMax")
tensor_scatter_nd_max.__doc__ = "A copy of `tensor` with the maximum of it and `updates`."
tensor_scatter_nd_min = _tensor_scatter("TensorScatterMin")
tensor_scatter_nd_min.__doc__ = "A copy of `tensor` with the minimum of it and `updates`."
tensor_scatter_nd_update = tensor_scatter_update
tensor_scatter_nd_add = tensor_scatter_add
tensor_scatter_nd_sub = tensor_scatter_sub


def extract_image_patches(
    images, ksizes=None, strides=None, rates=None, padding=None, name=None, sizes=None
):
    """Patches of `images` [B, H, W, D] as depth vectors: [B, OH, OW, KH * KW * D], patch
    (i, j) sampled every `rates` pixels and patches taken every `strides`; `sizes` is the
    newer name of `ksizes`.

    Example: tf.extract_image_patches(x, [1, 3, 3, 1], [1, 1, 1, 1], [1, 1, 1, 1], 'SAME')
    """
    if ksizes is not None and sizes is not None:
        raise ValueError("Cannot specify both 'ksizes' and 'sizes'.")
    ksizes = sizes if ksizes is None else ksizes
    for arg, value in (("ksizes", ksizes), ("strides", strides), ("rates", rates)):
        if value is None:
            raise TypeError(f"extract_image_patches() missing required argument '{arg}'")
    if padding is None:
        raise TypeError("extract_image_patches() missing required argument 'padding'")
    return apply_op(
        "ExtractImagePatches",
        [images],
        name=name,
        ksizes=list(ksizes),
        strides=list(strides),
        rates=list(rates),
        padding=padding,
    ).outputs[0]


def extract_patches(images, sizes, strides, rates, padding, name=None):
    """tf.image.extract_patches: extract_image_patches with `sizes` for `ksizes`."""
    return extract_image_patches(images, sizes, strides, rates, padding, name=name)


IMAGE = {  # tf.image.<key> -> function
    "extract_image_patches": extract_image_patches,
    "extract_patches": extract_patches,
}
