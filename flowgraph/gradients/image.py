"""Gradients of the resize ops (whitepaper §4.1): the adjoint of each resize scatters the
output gradient back with the forward pass's weights (ResizeBilinearGrad,
ResizeNearestNeighborGrad); the size input has none."""

from __future__ import annotations

from flowgraph.gradients.registry import register_gradient
from flowgraph.gradients.util import build, shape

_ATTRS = ("align_corners", "half_pixel_centers")


@register_gradient("ResizeBilinear")
def _resize_bilinear_grad(op, grad):
    image = op.inputs[0]
    attrs = {k: op.get_attr(k) for k in _ATTRS}
    return build("ResizeBilinearGrad", grad, image, **attrs), None


@register_gradient("ResizeNearestNeighbor")
def _resize_nearest_neighbor_grad(op, grad):
    image = op.inputs[0]
    size = build("Slice", shape(image), [1], [2])
    attrs = {k: op.get_attr(k) for k in _ATTRS}
    return build("ResizeNearestNeighborGrad", grad, size, **attrs), None
