"""OpDefs of the color ops of tf.image (TensorFlow's image_ops.cc): HSV conversions and the
hue, saturation and contrast adjustments that image augmentation applies."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape


def _rgb_shape(ctx):
    """Any shape whose last dimension is the 3 channels."""
    shape = ctx.input_shapes[0].with_rank_at_least(1)
    if shape.ndims is None:
        return shape
    last = shape[-1].merge_with(3)
    return TensorShape(shape.as_list()[:-1] + [last.value])


def _adjust_shape(ctx):
    """Images of rank >= 3 (..., height, width, channels) and a scalar factor."""
    ctx.input_shapes[1].with_rank(0)
    return ctx.input_shapes[0].with_rank_at_least(3)


for _op in ("RGBToHSV", "HSVToRGB"):
    register_op(
        OpDef(
            _op,
            inputs=["images: T"],
            outputs=["output: T"],
            attrs=["T: {half, bfloat16, float, double} = DT_FLOAT"],
            shape_fn=_rgb_shape,
        )
    )
for _op, _factor in (
    ("AdjustContrastv2", "contrast_factor"),
    ("AdjustHue", "delta"),
    ("AdjustSaturation", "scale"),
):
    register_op(
        OpDef(
            _op,
            inputs=["images: T", f"{_factor}: float"],
            outputs=["output: T"],
            attrs=["T: {half, float} = DT_FLOAT"],
            shape_fn=_adjust_shape,
        )
    )
