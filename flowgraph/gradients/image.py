"""Gradients of the resize ops (whitepaper §4.1): the adjoint of each resize scatters the
output gradient back with the forward pass's weights (ResizeBilinearGrad,
ResizeNearestNeighborGrad, ResizeBicubicGrad); CropAndResize's go to the image and to the boxes;
the size inputs have none."""

from __future__ import annotations

from flowgraph.core import dtypes
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


@register_gradient("ResizeBicubic")
def _resize_bicubic_grad(op, grad):
    image = op.inputs[0]
    attrs = {k: op.get_attr(k) for k in _ATTRS}
    if image.dtype.base_dtype not in (dtypes.float32, dtypes.float64):
        return None, None  # TF: no gradient into integer images
    return build("ResizeBicubicGrad", grad, image, **attrs), None


@register_gradient("CropAndResize")
def _crop_and_resize_grad(op, grad):
    """Into the image (float images only) and into the boxes' corners (through bilinear
    sampling, also for method='nearest', where TF approximates it so)."""
    image, boxes, box_ind, _ = op.inputs
    grad_image = None
    if image.dtype.base_dtype in (dtypes.float16, dtypes.float32, dtypes.float64):
        grad_image = build(
            "CropAndResizeGradImage",
            grad,
            boxes,
            box_ind,
            shape(image),
            T=image.dtype.base_dtype,
            method=op.get_attr("method"),
        )
    grad_boxes = build("CropAndResizeGradBoxes", grad, image, boxes, box_ind)
    return grad_image, grad_boxes, None, None
