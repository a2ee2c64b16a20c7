"""OpDefs of image resampling beyond bilinear/nearest (TensorFlow's image_ops.cc): bicubic and
area resizes, crops resized from boxes (CropAndResize and its two gradients) and box drawing.
All resamplers output float32, as TF's do.
"""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape
from flowgraph.opdefs.image import _REAL, _RESIZE_ATTRS, _resized

_CROP_TYPES = "T: {uint8, uint16, int8, int16, int32, int64, half, float, double}"
_METHOD = "method: {'bilinear', 'nearest'} = 'bilinear'"

register_op(
    OpDef(
        "ResizeBicubic",
        inputs=["images: T", "size: int32"],
        outputs=["resized_images: float"],
        attrs=[_REAL] + _RESIZE_ATTRS,
        shape_fn=_resized,
    )
)
register_op(
    OpDef(
        "ResizeBicubicGrad",
        inputs=["grads: float", "original_image: T"],
        outputs=["output: T"],
        attrs=["T: {float, double}"] + _RESIZE_ATTRS,
        shape_fn=lambda ctx: ctx.input_shapes[1],
    )
)
register_op(
    OpDef(
        "ResizeArea",
        inputs=["images: T", "size: int32"],
        outputs=["resized_images: float"],
        attrs=[_REAL, "align_corners: bool = false"],
        shape_fn=_resized,
    )
)


def _num_boxes(boxes: TensorShape, box_ind: TensorShape):
    """boxes [N, 4] and box_ind [N]: N (or None), checked as TF does."""
    boxes, box_ind = boxes.with_rank(2), box_ind.with_rank(1)
    if not boxes[1].is_compatible_with(4):
        raise ValueError(f"Dimension must be 4 but is {boxes[1].value}")
    return boxes[0].merge_with(box_ind[0]).value


def _sized(ctx, i: int):
    """(height, width) from the constant 2-vector input i, else (None, None)."""
    ctx.input_shapes[i].with_rank(1)
    size = ctx.input_constant(i)
    if size is None:
        return None, None
    if size.shape != (2,):
        raise ValueError(f"Dimension must be 2 but is {size.size}")
    return int(size[0]), int(size[1])


def _crop_and_resize_shape(ctx) -> TensorShape:
    """[num_boxes, crop_height, crop_width, depth]."""
    image = ctx.input_shapes[0].with_rank(4)
    n = _num_boxes(ctx.input_shapes[1], ctx.input_shapes[2])
    h, w = _sized(ctx, 3)
    return TensorShape([n, h, w, image[3].value])


def _crop_grad_image_shape(ctx) -> TensorShape:
    ctx.input_shapes[0].with_rank(4)
    _num_boxes(ctx.input_shapes[1], ctx.input_shapes[2])
    size = ctx.input_constant(3)
    if size is None:
        return TensorShape([None] * 4)
    return TensorShape([int(d) for d in size])


def _crop_grad_boxes_shape(ctx) -> TensorShape:
    ctx.input_shapes[0].with_rank(4)
    ctx.input_shapes[1].with_rank(4)
    return TensorShape([_num_boxes(ctx.input_shapes[2], ctx.input_shapes[3]), 4])


register_op(
    OpDef(
        "CropAndResize",
        inputs=["image: T", "boxes: float", "box_ind: int32", "crop_size: int32"],
        outputs=["crops: float"],
        attrs=[_CROP_TYPES, _METHOD, "extrapolation_value: float = 0"],
        shape_fn=_crop_and_resize_shape,
    )
)
register_op(
    OpDef(
        "CropAndResizeGradImage",
        inputs=["grads: float", "boxes: float", "box_ind: int32", "image_size: int32"],
        outputs=["output: T"],
        attrs=["T: {float, half, double}", _METHOD],
        shape_fn=_crop_grad_image_shape,
    )
)
register_op(
    OpDef(
        "CropAndResizeGradBoxes",
        inputs=["grads: float", "image: T", "boxes: float", "box_ind: int32"],
        outputs=["output: float"],
        attrs=[_CROP_TYPES, "method: {'bilinear'} = 'bilinear'"],
        shape_fn=_crop_grad_boxes_shape,
    )
)


def _draw_shape(ctx) -> TensorShape:
    return ctx.input_shapes[0].with_rank_at_least(3)


register_op(
    OpDef(
        "DrawBoundingBoxes",
        inputs=["images: T", "boxes: float"],
        outputs=["output: T"],
        attrs=["T: {float, half} = DT_FLOAT"],
        shape_fn=_draw_shape,
    )
)
register_op(
    OpDef(
        "DrawBoundingBoxesV2",
        inputs=["images: T", "boxes: float", "colors: float"],
        outputs=["output: T"],
        attrs=["T: {float, half} = DT_FLOAT"],
        shape_fn=_draw_shape,
    )
)


def _distorted_box_shape(ctx):
    """begin and size: [3] vectors for tf.slice; bboxes [1, 1, 4]."""
    ctx.input_shapes[0].with_rank(1)
    ctx.input_shapes[1].with_rank(3)
    for extra in ctx.input_shapes[2:]:  # V2's min_object_covered
        extra.with_rank(0)
    return [TensorShape([3]), TensorShape([3]), TensorShape([1, 1, 4])]


_DISTORT_ATTRS = [
    "T: {uint8, int8, int16, int32, int64}",
    "seed: int = 0",
    "seed2: int = 0",
    "aspect_ratio_range: list(float) = [0.75, 1.33]",
    "area_range: list(float) = [0.05, 1.0]",
    "max_attempts: int = 100",
    "use_image_if_no_bounding_boxes: bool = false",
]
register_op(
    OpDef(
        "SampleDistortedBoundingBoxV2",
        inputs=["image_size: T", "bounding_boxes: float", "min_object_covered: float"],
        outputs=["begin: T", "size: T", "bboxes: float"],
        attrs=_DISTORT_ATTRS,
        shape_fn=_distorted_box_shape,
        is_stateful=True,
    )
)
register_op(
    OpDef(
        "SampleDistortedBoundingBox",
        inputs=["image_size: T", "bounding_boxes: float"],
        outputs=["begin: T", "size: T", "bboxes: float"],
        attrs=_DISTORT_ATTRS + ["min_object_covered: float = 0.1"],
        shape_fn=_distorted_box_shape,
        is_stateful=True,
    )
)
