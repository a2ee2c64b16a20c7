"""Gradient functions of the TensorScatter* ops and ExtractImagePatches (whitepaper §4.1), as
TensorFlow's array_grad.py defines them; the sorted search and UnravelIndex return indices and
have none.
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.gradients.registry import not_differentiable, register_gradient
from flowgraph.gradients.util import build, cast, constant, reshape, shape

for _op in ("LowerBound", "UpperBound", "UnravelIndex"):
    not_differentiable(_op)


@register_gradient("TensorScatterUpdate")
def _tensor_scatter_update_grad(op, grad):
    """Overwritten cells of `tensor` get no gradient; each update gets the gradient of its cell."""
    indices, updates = op.inputs[1], op.inputs[2]
    zeros = build("ZerosLike", updates)
    tensor_grad = build("TensorScatterUpdate", build("Identity", grad), indices, zeros)
    return tensor_grad, None, build("GatherNd", grad, indices)


@register_gradient("TensorScatterAdd")
def _tensor_scatter_add_grad(op, grad):
    return build("Identity", grad), None, build("GatherNd", grad, op.inputs[1])


@register_gradient("TensorScatterSub")
def _tensor_scatter_sub_grad(op, grad):
    return build("Identity", grad), None, build("Neg", build("GatherNd", grad, op.inputs[1]))


def _tensor_scatter_min_or_max_grad(op, grad):
    """The gradient goes to the inputs equal to the result, split evenly between ties."""
    x, indices, y = op.inputs
    output = op.outputs[0]
    x_indicators = cast(build("Equal", x, output), grad.dtype)
    y_indicators = cast(build("Equal", y, build("GatherNd", output, indices)), grad.dtype)
    ys_indicators = build(
        "ScatterNd", indices, y_indicators, shape(x, out_type=indices.dtype.base_dtype)
    )
    indicators = build("AddV2", x_indicators, ys_indicators)  # >= 1 everywhere
    x_grad = build("RealDiv", build("Mul", grad, x_indicators), indicators)
    y_grad = build(
        "Mul", build("GatherNd", build("RealDiv", grad, indicators), indices), y_indicators
    )
    return x_grad, None, y_grad


register_gradient("TensorScatterMax")(_tensor_scatter_min_or_max_grad)
register_gradient("TensorScatterMin")(_tensor_scatter_min_or_max_grad)


def _dims(t, *axes):
    """The given dims of t's shape as scalar int64 tensors."""
    full = shape(t, out_type=dtypes.int64)
    return [build("StridedSlice", full, [a], [a + 1], [1], shrink_axis_mask=1) for a in axes]


@register_gradient("ExtractImagePatches")
def _extract_image_patches_grad(op, grad):
    """Each patch element came from one input cell (or the padding): extract patches of an
    image of cell numbers 1..H*W (0 is the padding), then sum the gradient per cell number
    (TF builds the same map and applies it as a sparse matmul)."""
    images = op.inputs[0]
    batch, rows_in, cols_in, channels = _dims(images, 0, 1, 2, 3)
    rows_out, cols_out = _dims(op.outputs[0], 1, 2)
    _, ksize_r, ksize_c, _ = op.get_attr("ksizes")
    one = _i64(1, images)
    cells = build("Mul", rows_in, cols_in)
    segments = build("AddV2", cells, one)
    cell_image = reshape(build("Range", one, segments, one), _pack(one, rows_in, cols_in, one))
    patched = build(
        "ExtractImagePatches",
        cell_image,
        **{k: op.get_attr(k) for k in ("ksizes", "strides", "rates", "padding")},
    )
    # grad [B, OH, OW, KH * KW * C] -> [OH * OW * KH * KW, B * C], rows in `patched` order.
    taps = _i64(ksize_r * ksize_c, images)
    per_tap = reshape(grad, _pack(batch, rows_out, cols_out, taps, channels))
    per_tap = build("Transpose", per_tap, [1, 2, 3, 0, 4])
    flat = reshape(per_tap, _pack(_i64(-1, images), build("Mul", batch, channels)))
    summed = build("UnsortedSegmentSum", flat, reshape(patched, [-1]), segments)
    cells_only = build("StridedSlice", summed, [1], [0], [1], end_mask=1)  # drop the padding
    per_cell = reshape(cells_only, _pack(rows_in, cols_in, batch, channels))
    return build("Transpose", per_cell, [2, 0, 1, 3])


def _pack(*scalars):
    return build("Pack", list(scalars))


def _i64(value: int, like):
    return constant(value, dtypes.int64, graph=like.graph)
