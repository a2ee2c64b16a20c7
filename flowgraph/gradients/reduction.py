"""Gradient functions of reductions and scans (whitepaper §4.1).

A reduction's gradient spreads the output gradient back over the reduced axes: reshape it to
the "kept-dims" shape (reduced axes of size 1), then tile it to the input's shape. With static
shapes and constant axes both shapes are Consts; otherwise they are computed at run time
(`_reduced_shape`, TF's math_ops.reduced_shape, built with DynamicStitch).
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.gradients.registry import register_gradient
from flowgraph.gradients.util import (
    build,
    cast,
    conj,
    constant,
    reshape,
    shape,
    static_value,
)


def _reduced_shape(input_shape, axes):
    """input_shape with the entries at `axes` set to 1, computed in the graph."""
    input_shape = cast(input_shape, dtypes.int32)
    axes = cast(axes, dtypes.int32)
    rank = build("Size", input_shape)
    axes = build("FloorMod", build("AddV2", axes, rank), rank)
    ones = build("Fill", build("Shape", axes), constant(1, dtypes.int32, graph=axes.graph))
    positions = build(
        "Range",
        constant(0, dtypes.int32, graph=axes.graph),
        rank,
        constant(1, dtypes.int32, graph=axes.graph),
    )
    return build("DynamicStitch", [positions, axes], [input_shape, ones])


def _static_axes(op):
    """The reduction axes as non-negative Python ints, or None when not known statically."""
    x_shape = op.inputs[0].shape
    axes = static_value(op.inputs[1])
    if x_shape.ndims is None or axes is None:
        return None
    rank = x_shape.ndims
    return sorted({int(a) % rank for a in np.asarray(axes).reshape(-1)}) if rank else []


def _spread(op, grad):
    """grad (shaped like the reduction's output) tiled back to the input's shape; also returns
    the kept-dims shape used."""
    x = op.inputs[0]
    keep = op.get_attr("keep_dims")
    axes = _static_axes(op)
    if axes is not None:
        rank = x.shape.ndims
        dims = x.shape.as_list()
        kept = [1 if i in axes else d for i, d in enumerate(dims)]
        if axes == list(range(rank)):  # reduce-all: TF reshapes to [1]*rank and tiles by shape(x)
            grad = reshape(grad, [1] * rank)
            return build("Tile", grad, shape(x)), [1] * rank
        if x.shape.is_fully_defined():
            grad = reshape(grad, kept)
            scaling = [d if i in axes else 1 for i, d in enumerate(dims)]  # d may be 0
            return build("Tile", grad, scaling), kept
    input_shape = build("Shape", x)
    kept = _reduced_shape(input_shape, op.inputs[1])
    if not keep:
        grad = reshape(grad, kept)
    return build("BroadcastTo", grad, input_shape), kept


@register_gradient("Sum")
def _sum_grad(op, grad):
    return _spread(op, grad)[0], None


@register_gradient("Mean")
def _mean_grad(op, grad):
    """Sum's gradient divided by the number of elements averaged into each output."""
    sum_grad = _spread(op, grad)[0]
    x, y = op.inputs[0], op.outputs[0]
    if x.shape.is_fully_defined() and y.shape.is_fully_defined():
        n_in, n_out = x.shape.num_elements(), y.shape.num_elements()
        factor = constant(n_in // max(n_out, 1), sum_grad.dtype.base_dtype, graph=x.graph)
    else:
        # TF's _safe_shape_div: size(x) // max(size(y), 1), which holds for every rank and axes
        # (a scalar axis, rank 0, zero-size dimensions).
        n_in = build("Prod", build("Shape", x), [0], keep_dims=False)
        n_out = build("Prod", build("Shape", y), [0], keep_dims=False)
        factor = build("FloorDiv", n_in, build("Maximum", n_out, 1))
    return build(
        "RealDiv" if not x.dtype.is_complex else "Div",
        sum_grad,
        cast(factor, sum_grad.dtype),
        name="truediv",
    ), None


@register_gradient("Max")
@register_gradient("Min")
def _min_or_max_grad(op, grad):
    """The gradient goes to the selected elements, split evenly among ties (as in TF)."""
    x, y = op.inputs[0], op.outputs[0]
    keep = op.get_attr("keep_dims")
    axes = _static_axes(op)
    if axes is not None and x.shape.is_fully_defined():
        kept = [1 if i in axes else d for i, d in enumerate(x.shape.as_list())]
    else:
        kept = _reduced_shape(build("Shape", x), op.inputs[1])
    if not keep:
        y = reshape(y, kept)
        grad = reshape(grad, kept)
    indicators = cast(build("Equal", y, x), grad.dtype)
    num_selected = reshape(build("Sum", indicators, op.inputs[1], keep_dims=False), kept)
    return build("Mul", build("RealDiv", indicators, num_selected), grad), None


@register_gradient("Prod")
def _prod_grad(op, grad):
    """d prod / d x_i = product of the other elements: the exclusive cumulative products from
    the left and from the right, over the reduced axes moved to the front and flattened.
    Exact with zeros in x (no division)."""
    x = op.inputs[0]
    input_shape = build("Shape", x)
    axes = reshape(op.inputs[1], [-1])
    if not op.get_attr("keep_dims"):
        grad = reshape(grad, _reduced_shape(input_shape, op.inputs[1]))
    grad = build("BroadcastTo", grad, input_shape)
    rank = build("Rank", x)
    reduced = cast(
        build("FloorMod", build("AddV2", cast(axes, dtypes.int32), rank), rank), dtypes.int32
    )
    idx = build(
        "Range",
        constant(0, dtypes.int32, graph=x.graph),
        rank,
        constant(1, dtypes.int32, graph=x.graph),
    )
    other = build("ListDiff", idx, reduced, out_idx=dtypes.int32)[0]
    perm = build("ConcatV2", [reduced, other], 0)
    reduced_num = build("Prod", build("GatherV2", input_shape, reduced, 0), 0)
    other_num = build("Prod", build("GatherV2", input_shape, other, 0), 0)
    permuted = build("Transpose", x, perm)
    permuted_shape = build("Shape", permuted)
    reshaped = reshape(permuted, build("Pack", [reduced_num, other_num], axis=0))
    left = build("Cumprod", reshaped, 0, exclusive=True)
    right = build("Cumprod", reshaped, 0, exclusive=True, reverse=True)
    y = reshape(build("Mul", conj(left), conj(right)), permuted_shape)
    out = build("Mul", grad, build("Transpose", y, build("InvertPermutation", perm)))
    return reshape(out, input_shape), None


@register_gradient("Cumsum")
def _cumsum_grad(op, grad):
    """A cumulative sum's adjoint is the cumulative sum in the other direction."""
    return build(
        "Cumsum",
        grad,
        op.inputs[1],
        exclusive=op.get_attr("exclusive"),
        reverse=not op.get_attr("reverse"),
    ), None


@register_gradient("Cumprod")
def _cumprod_grad(op, grad):
    """d cumprod: reverse cumsum of (prod * grad), divided by x (TF's formula; x non-zero)."""
    x, axis = op.inputs
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    prod = build("Cumprod", x, axis, exclusive=exclusive, reverse=reverse)
    out = build("Cumsum", build("Mul", prod, grad), axis, exclusive=exclusive, reverse=not reverse)
    return build("RealDiv" if not x.dtype.is_complex else "Div", out, x), None
