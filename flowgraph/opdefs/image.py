"""OpDefs of the image ops an input pipeline uses (whitepaper §4.5): PNG/JPEG codecs (Pillow does
the coding, DESIGN.md decision 9) and resizing."""

from __future__ import annotations

from flowgraph.core.op_def import OpDef, register_op
from flowgraph.core.shapes import TensorShape, unknown_shape
from flowgraph.opdefs.shape_fns import scalar


def _decoded(ctx):
    channels = ctx.attrs.get("channels", 0)
    return TensorShape([None, None, channels or None])


register_op(
    OpDef(
        "DecodePng",
        inputs=["contents: string"],
        outputs=["image: dtype"],
        attrs=["channels: int = 0", "dtype: {uint8, uint16} = DT_UINT8"],
        shape_fn=_decoded,
    )
)
register_op(
    OpDef(
        "DecodeJpeg",
        inputs=["contents: string"],
        outputs=["image: uint8"],
        attrs=[
            "channels: int = 0",
            "ratio: int = 1",
            "fancy_upscaling: bool = true",
            "try_recover_truncated: bool = false",
            "acceptable_fraction: float = 1.0",
            "dct_method: string = ''",
        ],
        shape_fn=_decoded,
    )
)
register_op(
    OpDef(
        "DecodeImage",
        inputs=["contents: string"],
        outputs=["image: dtype"],
        attrs=[
            "channels: int = 0",
            "dtype: {uint8, uint16, float} = DT_UINT8",
            "expand_animations: bool = true",
        ],
        shape_fn=lambda ctx: unknown_shape(),
    )
)
register_op(
    OpDef(
        "EncodePng",
        inputs=["image: T"],
        outputs=["contents: string"],
        attrs=["compression: int = -1", "T: {uint8, uint16} = DT_UINT8"],
        shape_fn=scalar,
    )
)
register_op(
    OpDef(
        "EncodeJpeg",
        inputs=["image: uint8"],
        outputs=["contents: string"],
        attrs=[
            "format: {'', 'grayscale', 'rgb'} = ''",
            "quality: int = 95",
            "progressive: bool = false",
            "optimize_size: bool = false",
            "chroma_downsampling: bool = true",
            "density_unit: {'in', 'cm'} = 'in'",
            "x_density: int = 300",
            "y_density: int = 300",
            "xmp_metadata: string = ''",
        ],
        shape_fn=scalar,
    )
)


def _resized(ctx):
    images = ctx.input_shapes[0].with_rank(4)
    size = ctx.input_constant(1)
    h, w = (int(size[0]), int(size[1])) if size is not None else (None, None)
    return TensorShape([images[0].value, h, w, images[3].value])


_RESIZE_ATTRS = ["align_corners: bool = false", "half_pixel_centers: bool = false"]
_REAL = "T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}"
register_op(
    OpDef(
        "ResizeBilinear",
        inputs=["images: T", "size: int32"],
        outputs=["resized_images: float"],
        attrs=[_REAL] + _RESIZE_ATTRS,
        shape_fn=_resized,
    )
)
register_op(
    OpDef(
        "ResizeNearestNeighbor",
        inputs=["images: T", "size: int32"],
        outputs=["resized_images: T"],
        attrs=[_REAL] + _RESIZE_ATTRS,
        shape_fn=_resized,
    )
)
register_op(
    OpDef(
        "ResizeBilinearGrad",
        inputs=["grads: float", "original_image: T"],
        outputs=["output: T"],
        attrs=["T: {float, bfloat16, half, double}"] + _RESIZE_ATTRS,
        shape_fn=lambda ctx: ctx.input_shapes[1],
    )
)
register_op(
    OpDef(
        "ResizeNearestNeighborGrad",
        inputs=["grads: T", "size: int32"],
        outputs=["output: T"],
        attrs=["T: {uint8, int8, int32, half, float, double, bfloat16}"] + _RESIZE_ATTRS,
        shape_fn=lambda ctx: unknown_shape(4),
    )
)
