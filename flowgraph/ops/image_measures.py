"""tf.image's measures and filters of images: total variation, PSNR, SSIM, finite-difference
and Sobel gradients, and the YIQ and YUV color spaces (TensorFlow 1.15's formulas).

Example:
    quality = tf.image.psnr(reconstruction, original, max_val=1.0)   # per image, in dB
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import dtypes
from flowgraph.framework import convert
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import array as array_ops
from flowgraph.ops import linalg, nn_conv, reduction
from flowgraph.ops import math as math_ops
from flowgraph.ops.image_ops import convert_image_dtype

__all__ = [
    "image_gradients",
    "psnr",
    "rgb_to_yiq",
    "rgb_to_yuv",
    "sobel_edges",
    "ssim",
    "total_variation",
    "yiq_to_rgb",
    "yuv_to_rgb",
]

# 3x3 color transforms: rows are the input channels, columns the output ones.
_RGB_TO_YIQ = [
    [0.299, 0.59590059, 0.2115],
    [0.587, -0.27455667, -0.52273617],
    [0.114, -0.32134392, 0.31119955],
]
_YIQ_TO_RGB = [
    [1, 1, 1],
    [0.95598634, -0.27201283, -1.10674021],
    [0.6208248, -0.64720424, 1.70423049],
]
_RGB_TO_YUV = [
    [0.299, -0.14714119, 0.61497538],
    [0.587, -0.28886916, -0.51496512],
    [0.114, 0.43601035, -0.10001026],
]
_YUV_TO_RGB = [[1, 1, 1], [0, -0.394642334, 2.03206185], [1.13988303, -0.58062185, 0]]


def _color_transform(images, kernel, name):
    with name_scope(None, name, [images]):
        images = convert.convert_to_tensor(images, name="images")
        matrix = convert.constant(kernel, images.dtype.base_dtype, name="kernel")
        rank = images.shape.ndims
        axis = rank - 1 if rank is not None else array_ops.rank(images) - 1
        return linalg.tensordot(images, matrix, axes=[[axis], [0]])


def rgb_to_yiq(images):
    """RGB in [0, 1] to YIQ (Y in [0, 1], I in [-0.5957, 0.5957], Q in [-0.5226, 0.5226])."""
    return _color_transform(images, _RGB_TO_YIQ, "rgb_to_yiq")


def yiq_to_rgb(images):
    return _color_transform(images, _YIQ_TO_RGB, "yiq_to_rgb")


def rgb_to_yuv(images):
    """RGB in [0, 1] to YUV (Y in [0, 1], U in [-0.436, 0.436], V in [-0.615, 0.615])."""
    return _color_transform(images, _RGB_TO_YUV, "rgb_to_yuv")


def yuv_to_rgb(images):
    return _color_transform(images, _YUV_TO_RGB, "yuv_to_rgb")


def total_variation(images, name=None):
    """The sum of absolute differences of neighboring pixels, per image of a batch (a scalar
    for one image): a smoothness penalty."""
    with name_scope(name, "total_variation", [images]):
        images = convert.convert_to_tensor(images, name="images")
        rank = images.shape.ndims
        if rank == 3:
            down = images[1:, :, :] - images[:-1, :, :]
            right = images[:, 1:, :] - images[:, :-1, :]
            axis = None
        elif rank == 4:
            down = images[:, 1:, :, :] - images[:, :-1, :, :]
            right = images[:, :, 1:, :] - images[:, :, :-1, :]
            axis = [1, 2, 3]
        else:
            raise ValueError("'images' must be either 3 or 4-dimensional.")
        return reduction.reduce_sum(math_ops.abs(down), axis=axis) + reduction.reduce_sum(
            math_ops.abs(right), axis=axis
        )


def psnr(a, b, max_val, name=None):
    """Peak signal-to-noise ratio in dB per image: 20 log10(max_val) - 10 log10(MSE)."""
    with name_scope(name, "PSNR", [a, b]):
        a, b = convert.convert_to_tensor(a), convert.convert_to_tensor(b)
        max_val = convert_image_dtype(math_ops.cast(max_val, a.dtype), dtypes.float32)
        a, b = convert_image_dtype(a, dtypes.float32), convert_image_dtype(b, dtypes.float32)
        _check_compatible(a, b)
        mse = reduction.reduce_mean(math_ops.squared_difference(a, b), [-3, -2, -1])
        return math_ops.subtract(
            20 * math_ops.log(max_val) / math_ops.log(10.0),
            np.float32(10 / np.log(10)) * math_ops.log(mse),
            name="psnr",
        )


def _check_compatible(a, b):
    if a.shape.ndims is not None and a.shape.ndims < 3:
        raise ValueError(f"Shape must be at least rank 3 but is rank {a.shape.ndims}")
    if not a.shape.is_compatible_with(b.shape):
        raise ValueError(f"Shapes {a.shape} and {b.shape} are incompatible")


def _gaussian_kernel(size, sigma):
    coords = np.arange(size, dtype=np.float32) - (size - 1) / 2.0
    g = np.exp(-0.5 * np.square(coords) / np.float32(sigma) ** 2)
    g = np.outer(g, g)
    return (g / g.sum()).reshape(size, size, 1, 1).astype(np.float32)


def ssim(img1, img2, max_val, filter_size=11, filter_sigma=1.5, k1=0.01, k2=0.03):
    """Structural similarity per image (mean over pixels and channels of the SSIM map with a
    Gaussian window), as TensorFlow computes it; images of at least filter_size pixels."""
    with name_scope(None, "SSIM", [img1, img2]):
        img1, img2 = convert.convert_to_tensor(img1), convert.convert_to_tensor(img2)
        _check_compatible(img1, img2)
        max_val = convert_image_dtype(math_ops.cast(max_val, img1.dtype), dtypes.float32)
        img1 = convert_image_dtype(img1, dtypes.float32)
        img2 = convert_image_dtype(img2, dtypes.float32)
        c1, c2 = (k1 * max_val) ** 2, (k2 * max_val) ** 2
        kernel = _gaussian_kernel(filter_size, filter_sigma)
        channels = array_ops.shape(img1)[-1:]
        window = array_ops.tile(
            convert.constant(kernel), array_ops.concat([[1, 1], channels, [1]], 0)
        )

        def blur(x):
            batch = array_ops.reshape(x, array_ops.concat([[-1], array_ops.shape(x)[-3:]], 0))
            out = nn_conv.depthwise_conv2d(batch, window, [1, 1, 1, 1], "VALID")
            return array_ops.reshape(
                out, array_ops.concat([array_ops.shape(x)[:-3], array_ops.shape(out)[1:]], 0)
            )

        mean1, mean2 = blur(img1), blur(img2)
        luminance = (2 * mean1 * mean2 + c1) / (
            math_ops.square(mean1) + math_ops.square(mean2) + c1
        )
        cross = blur(img1 * img2) * 2.0
        squares = blur(math_ops.square(img1) + math_ops.square(img2))
        contrast = (cross - 2 * mean1 * mean2 + c2) / (
            squares - math_ops.square(mean1) - math_ops.square(mean2) + c2
        )
        return reduction.reduce_mean(luminance * contrast, [-3, -2, -1])


def image_gradients(image):
    """(dy, dx): forward differences along height and width of a batch [N, H, W, C], each of
    the image's shape (zero in the last row / column)."""
    image = convert.convert_to_tensor(image, name="image")
    if image.shape.ndims != 4:
        raise ValueError(
            f"image_gradients expects a 4D tensor [batch_size, h, w, d], not {image.shape}."
        )
    shape = array_ops.shape(image)
    batch, height, width, depth = (shape[i] for i in range(4))
    dy = image[:, 1:, :, :] - image[:, :-1, :, :]
    dx = image[:, :, 1:, :] - image[:, :, :-1, :]
    dy = array_ops.concat(
        [dy, array_ops.zeros(array_ops.stack([batch, 1, width, depth]), image.dtype)], 1
    )
    dx = array_ops.concat(
        [dx, array_ops.zeros(array_ops.stack([batch, height, 1, depth]), image.dtype)], 2
    )
    return array_ops.reshape(dy, shape), array_ops.reshape(dx, shape)


def sobel_edges(image):
    """[N, H, W, C, 2]: the vertical and horizontal Sobel responses of each channel (edges
    reflected at the border)."""
    image = convert.convert_to_tensor(image, name="image")
    static = image.shape
    shape = array_ops.shape(image)
    kernels = np.asarray(
        [[[-1, -2, -1], [0, 0, 0], [1, 2, 1]], [[-1, 0, 1], [-2, 0, 2], [-1, 0, 1]]]
    )
    kernels = np.expand_dims(np.transpose(kernels, (1, 2, 0)), -2)
    filters = array_ops.tile(
        convert.constant(kernels, image.dtype.base_dtype),
        array_ops.stack([1, 1, shape[-1], 1]),
        name="sobel_filters",
    )
    padded = array_ops.pad(image, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT")
    output = nn_conv.depthwise_conv2d(padded, filters, [1, 1, 1, 1], "VALID")
    output = array_ops.reshape(output, array_ops.concat([shape, [2]], 0))
    output.set_shape(static.concatenate([2]))
    return output
