"""tf.image: the decoding, resizing, cropping and normalization an image-input pipeline uses
(whitepaper §4.5). Codecs and resizing are ops (kernels/cpu/image.py); the rest is composed of
array and math ops, as in TF1.

Example:
    image = tf.image.decode_png(tf.read_file(path), channels=3)
    image = tf.image.convert_image_dtype(image, tf.float32)          # [0, 1]
    image = tf.image.resize_images(image, [32, 32])
    image = tf.image.random_flip_left_right(tf.random_crop(image, [28, 28, 3]))
    image = tf.image.per_image_standardization(image)
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import convert, default_graph
from flowgraph.framework.apply_op import apply_op
from flowgraph.ops import array as array_ops
from flowgraph.ops import math as math_ops
from flowgraph.ops import reduction
from flowgraph.ops.random import random_crop, random_uniform

__all__ = [
    "ResizeMethod",
    "convert_image_dtype",
    "decode_image",
    "decode_jpeg",
    "decode_png",
    "encode_jpeg",
    "encode_png",
    "flip_left_right",
    "flip_up_down",
    "per_image_standardization",
    "random_crop",
    "random_flip_left_right",
    "random_flip_up_down",
    "resize",
    "resize_area",
    "resize_bicubic",
    "resize_bilinear",
    "resize_images",
    "resize_nearest_neighbor",
]


class ResizeMethod:
    BILINEAR = 0
    NEAREST_NEIGHBOR = 1
    BICUBIC = 2
    AREA = 3


def _string(contents):
    return convert.convert_to_tensor(contents, dtype=dtypes.string, name="contents")


def decode_png(contents, channels=0, dtype=dtypes.uint8, name=None):
    """A [height, width, channels] uint8 (or uint16) image from PNG bytes."""
    return apply_op(
        "DecodePng", [_string(contents)], name=name, channels=channels, dtype=dtypes.as_dtype(dtype)
    ).outputs[0]


def decode_jpeg(
    contents,
    channels=0,
    ratio=1,
    fancy_upscaling=True,
    try_recover_truncated=False,
    acceptable_fraction=1,
    dct_method="",
    name=None,
):
    """A [height, width, channels] uint8 image from JPEG bytes (`ratio` downscales by 2/4/8)."""
    return apply_op(
        "DecodeJpeg",
        [_string(contents)],
        name=name,
        channels=channels,
        ratio=ratio,
        fancy_upscaling=fancy_upscaling,
        try_recover_truncated=try_recover_truncated,
        acceptable_fraction=float(acceptable_fraction),
        dct_method=dct_method,
    ).outputs[0]


def decode_image(contents, channels=None, dtype=dtypes.uint8, name=None, expand_animations=True):
    """Decodes PNG, JPEG, GIF (frames as a 4-D tensor) or BMP by the data's own format."""
    dtype = dtypes.as_dtype(dtype)
    return apply_op(
        "DecodeImage",
        [_string(contents)],
        name=name,
        channels=channels or 0,
        dtype=dtype,
        expand_animations=expand_animations,
    ).outputs[0]


def encode_png(image, compression=-1, name=None):
    """PNG bytes of a [height, width, channels] uint8/uint16 image."""
    image = convert.convert_to_tensor(image, name="image")
    return apply_op("EncodePng", [image], name=name, compression=compression).outputs[0]


def encode_jpeg(
    image,
    format="",
    quality=95,
    progressive=False,
    optimize_size=False,
    chroma_downsampling=True,
    density_unit="in",
    x_density=300,
    y_density=300,
    xmp_metadata="",
    name=None,
):
    """JPEG bytes of a [height, width, 1 or 3] uint8 image."""
    image = convert.convert_to_tensor(image, dtype=dtypes.uint8, name="image")
    return apply_op(
        "EncodeJpeg",
        [image],
        name=name,
        format=format,
        quality=quality,
        progressive=progressive,
        optimize_size=optimize_size,
        chroma_downsampling=chroma_downsampling,
        density_unit=density_unit,
        x_density=x_density,
        y_density=y_density,
        xmp_metadata=xmp_metadata,
    ).outputs[0]


# -- resizing -------------------------------------------------------------------------------------
def _as_batch(images):
    """(4-D images, whether a batch dimension was added)."""
    images = convert.convert_to_tensor(images, name="images")
    ndims = images.shape.ndims
    if ndims is None or ndims not in (3, 4):
        raise ValueError("'images' must have either 3 or 4 dimensions.")
    if ndims == 3:
        return array_ops.expand_dims(images, 0), True
    return images, False


def _size(size):
    return convert.convert_to_tensor(size, dtype=dtypes.int32, name="size")


def resize_bilinear(images, size, align_corners=False, half_pixel_centers=False, name=None):
    """Bilinear resize of [batch, height, width, channels] images to `size`; float32 out."""
    return apply_op(
        "ResizeBilinear",
        [images, _size(size)],
        name=name,
        align_corners=align_corners,
        half_pixel_centers=half_pixel_centers,
    ).outputs[0]


def resize_nearest_neighbor(images, size, align_corners=False, half_pixel_centers=False, name=None):
    """Nearest-neighbour resize of [batch, height, width, channels] images; dtype kept."""
    return apply_op(
        "ResizeNearestNeighbor",
        [images, _size(size)],
        name=name,
        align_corners=align_corners,
        half_pixel_centers=half_pixel_centers,
    ).outputs[0]


def resize_bicubic(images, size, align_corners=False, half_pixel_centers=False, name=None):
    """Bicubic resize (TF's cubic convolution, a = -0.75; Keys' a = -0.5 with half-pixel
    centers) of [batch, height, width, channels] images; float32 out."""
    return apply_op(
        "ResizeBicubic",
        [images, _size(size)],
        name=name,
        align_corners=align_corners,
        half_pixel_centers=half_pixel_centers,
    ).outputs[0]


def resize_area(images, size, align_corners=False, name=None):
    """Area resize: each output pixel is the mean of the input area it covers; float32 out."""
    return apply_op(
        "ResizeArea", [images, _size(size)], name=name, align_corners=align_corners
    ).outputs[0]


_RESIZERS = {
    ResizeMethod.BILINEAR: resize_bilinear,
    ResizeMethod.NEAREST_NEIGHBOR: resize_nearest_neighbor,
    ResizeMethod.BICUBIC: resize_bicubic,
    ResizeMethod.AREA: resize_area,
}


def resize_images(
    images,
    size,
    method=ResizeMethod.BILINEAR,
    align_corners=False,
    preserve_aspect_ratio=False,
    name=None,
):
    """Resizes 3-D or 4-D images to `size` ([new_height, new_width])."""
    if preserve_aspect_ratio:
        raise NotImplementedError("resize_images(preserve_aspect_ratio=True)")
    graph = default_graph.get()
    with graph.name_scope(name or "resize_images"):
        batch, added = _as_batch(images)
        if method not in _RESIZERS:
            raise ValueError(f"Resize method is not implemented: {method!r}")
        out = _RESIZERS[method](batch, size, align_corners=align_corners)
        return array_ops.squeeze(out, [0]) if added else out


resize = resize_images  # TF 1.x's tf.image.resize is resize_images


# -- flips and crops ------------------------------------------------------------------------------
def _width_axis(image):
    return image.shape.ndims - 2 if image.shape.ndims is not None else -2


def flip_left_right(image):
    """Mirrors the width axis (of an image or a batch of images)."""
    image = convert.convert_to_tensor(image, name="image")
    return array_ops.reverse(image, [_width_axis(image)])


def flip_up_down(image):
    image = convert.convert_to_tensor(image, name="image")
    return array_ops.reverse(image, [_width_axis(image) - 1])


def _random_flip(image, seed, flip):
    image = convert.convert_to_tensor(image, name="image")
    flipped = flip(image)
    if image.shape.ndims == 4:  # each image of the batch flips independently
        batch = array_ops.shape(image)[0]
        mask = math_ops.less(random_uniform([batch], 0, 1.0, seed=seed), 0.5)
        mask = array_ops.reshape(mask, [-1, 1, 1, 1])
        return math_ops.where_v2(mask, flipped, image)
    mask = math_ops.less(random_uniform([], 0, 1.0, seed=seed), 0.5)
    return math_ops.where_v2(mask, flipped, image)


def random_flip_left_right(image, seed=None):
    """Mirrors the width axis with probability 1/2."""
    return _random_flip(image, seed, flip_left_right)


def random_flip_up_down(image, seed=None):
    return _random_flip(image, seed, flip_up_down)


# -- dtypes and normalization -------------------------------------------------------------------
def convert_image_dtype(image, dtype, saturate=False, name=None):
    """Converts between image dtypes, rescaling: floats are in [0, 1], integers span their
    range (uint8 255 -> 1.0 -> 255)."""
    image = convert.convert_to_tensor(image, name="image")
    dtype = dtypes.as_dtype(dtype)
    src = image.dtype.base_dtype
    if not (src.is_floating or src.is_integer) or not (dtype.is_floating or dtype.is_integer):
        raise AttributeError("Image and dtype must be numeric (integer or floating)")
    if src == dtype:
        return array_ops.identity(image, name=name)
    graph = default_graph.get()
    with graph.name_scope(name or "convert_image"):
        if src.is_integer and dtype.is_integer:
            in_max, out_max = src.max, dtype.max
            if in_max > out_max:
                scale = (in_max + 1) // (out_max + 1)
                return math_ops.cast(math_ops.floordiv(image, scale), dtype)
            scale = (out_max + 1) // (in_max + 1)
            return math_ops.multiply(math_ops.cast(image, dtype), convert.constant(scale, dtype))
        if src.is_floating and dtype.is_floating:
            return math_ops.cast(image, dtype)
        if src.is_integer:
            cast = math_ops.cast(image, dtype)
            return math_ops.multiply(cast, convert.constant(1.0 / src.max, dtype))
        scaled = math_ops.multiply(image, convert.constant(dtype.max + 0.5, src))
        if saturate:
            scaled = math_ops.minimum(math_ops.maximum(scaled, float(dtype.min)), float(dtype.max))
        return math_ops.cast(scaled, dtype)


def per_image_standardization(image):
    """(image - mean) / max(stddev, 1/sqrt(num_pixels)) per image, in float32."""
    image = convert.convert_to_tensor(image, name="image")
    graph = default_graph.get()
    with graph.name_scope("per_image_standardization"):
        image = math_ops.cast(image, dtypes.float32)
        axes = [-1, -2, -3]
        num = math_ops.cast(reduction.reduce_prod(array_ops.shape(image)[-3:]), dtypes.float32)
        mean = reduction.reduce_mean(image, axes, keepdims=True)
        variance = reduction.reduce_mean(math_ops.square(image - mean), axes, keepdims=True)
        stddev = math_ops.sqrt(variance)
        adjusted = math_ops.maximum(stddev, math_ops.rsqrt(num))
        return math_ops.divide(image - mean, adjusted)
