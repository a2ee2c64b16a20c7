"""tf.image's color adjustments and their random versions (image augmentation, as in TF1's
CIFAR-10 tutorial): brightness, contrast, hue, saturation, gamma, and the RGB, HSV and
grayscale conversions.

Integer images are adjusted in float32 and converted back with saturation, as TensorFlow 1.15
does; float16 and float32 images are adjusted in their own type.

Example:
    image = tf.image.random_brightness(image, max_delta=63)
    image = tf.image.random_contrast(image, lower=0.2, upper=1.8)
"""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.framework import convert
from flowgraph.framework.apply_op import apply_op
from flowgraph.framework.scopes import name_scope
from flowgraph.ops import array as array_ops
from flowgraph.ops import linalg
from flowgraph.ops import math as math_ops
from flowgraph.ops.image_ops import convert_image_dtype
from flowgraph.ops.random import random_uniform

__all__ = [
    "adjust_brightness",
    "adjust_contrast",
    "adjust_gamma",
    "adjust_hue",
    "adjust_saturation",
    "grayscale_to_rgb",
    "hsv_to_rgb",
    "random_brightness",
    "random_contrast",
    "random_hue",
    "random_saturation",
    "rgb_to_grayscale",
    "rgb_to_hsv",
]


def _adjusted(image, name, default, adjust):
    """adjust(float image) on `image` in float (its own if float16/32, else float32), converted
    back to its dtype with saturation."""
    with name_scope(name, default, [image]) as scope:
        image = convert.convert_to_tensor(image, name="image")
        original = image.dtype.base_dtype
        if original in (dtypes.float16, dtypes.float32):
            flt = image
        else:
            flt = convert_image_dtype(image, dtypes.float32)
        return convert_image_dtype(adjust(flt, scope), original, saturate=True)


def adjust_brightness(image, delta):
    """image + delta (delta in [0, 1] units for integer images)."""

    def add(flt, scope):
        return math_ops.add(flt, math_ops.cast(delta, flt.dtype), name=scope)

    return _adjusted(image, None, "adjust_brightness", add)


def adjust_contrast(images, contrast_factor):
    """(x - mean) * contrast_factor + mean, the mean per image and channel."""

    def contrast(flt, scope):
        factor = convert.convert_to_tensor(contrast_factor, dtypes.float32)
        return apply_op("AdjustContrastv2", [flt, factor], name=scope).outputs[0]

    return _adjusted(images, None, "adjust_contrast", contrast)


def adjust_hue(image, delta, name=None):
    """Rotates the hue by `delta`, a fraction of the color wheel in [-1, 1]."""

    def hue(flt, scope):
        delta_t = convert.convert_to_tensor(delta, dtypes.float32, name="delta")
        return apply_op("AdjustHue", [flt, delta_t], name=scope).outputs[0]

    return _adjusted(image, name, "adjust_hue", hue)


def adjust_saturation(image, saturation_factor, name=None):
    """Multiplies the saturation by `saturation_factor` (clipped to [0, 1] in HSV)."""

    def saturation(flt, scope):
        factor = convert.convert_to_tensor(saturation_factor, dtypes.float32, name="scale")
        return apply_op("AdjustSaturation", [flt, factor], name=scope).outputs[0]

    return _adjusted(image, name, "adjust_saturation", saturation)


def adjust_gamma(image, gamma=1, gain=1):
    """gain * image ** gamma; gamma must be non-negative."""
    if not isinstance(gamma, convert.Tensor) and gamma < 0:
        raise ValueError("Gamma should be a non-negative real number.")

    def correct(flt, scope):
        return math_ops.multiply(gain, math_ops.pow(flt, gamma), name=scope)

    return _adjusted(image, None, "adjust_gamma", correct)


def _uniform_factor(lower, upper, seed):
    return random_uniform([], lower, upper, seed=seed)


def random_brightness(image, max_delta, seed=None):
    """adjust_brightness by a delta drawn uniformly from [-max_delta, max_delta)."""
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_brightness(image, _uniform_factor(-max_delta, max_delta, seed))


def random_contrast(image, lower, upper, seed=None):
    """adjust_contrast by a factor drawn uniformly from [lower, upper)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_contrast(image, _uniform_factor(lower, upper, seed))


def random_hue(image, max_delta, seed=None):
    """adjust_hue by a delta drawn uniformly from [-max_delta, max_delta), max_delta <= 0.5."""
    if max_delta > 0.5:
        raise ValueError("max_delta must be <= 0.5.")
    if max_delta < 0:
        raise ValueError("max_delta must be non-negative.")
    return adjust_hue(image, _uniform_factor(-max_delta, max_delta, seed))


def random_saturation(image, lower, upper, seed=None):
    """adjust_saturation by a factor drawn uniformly from [lower, upper)."""
    if upper <= lower:
        raise ValueError("upper must be > lower.")
    if lower < 0:
        raise ValueError("lower must be non-negative.")
    return adjust_saturation(image, _uniform_factor(lower, upper, seed))


def rgb_to_hsv(images, name=None):
    """RGB in [0, 1] to HSV in [0, 1] (float images)."""
    return apply_op("RGBToHSV", [images], name=name).outputs[0]


def hsv_to_rgb(images, name=None):
    """HSV in [0, 1] to RGB in [0, 1] (float images)."""
    return apply_op("HSVToRGB", [images], name=name).outputs[0]


def rgb_to_grayscale(images, name=None):
    """The luma 0.2989 R + 0.5870 G + 0.1140 B, keeping a last dimension of 1."""
    with name_scope(name, "rgb_to_grayscale", [images]) as scope:
        images = convert.convert_to_tensor(images, name="images")
        original = images.dtype.base_dtype
        flt = convert_image_dtype(images, dtypes.float32)
        weights = convert.constant([0.2989, 0.5870, 0.1140], dtypes.float32)
        gray = linalg.tensordot(flt, weights, [[-1], [-1]])
        gray = array_ops.expand_dims(gray, -1)
        return convert_image_dtype(gray, original, name=scope)


def grayscale_to_rgb(images, name=None):
    """The one channel of `images` repeated into three."""
    with name_scope(name, "grayscale_to_rgb", [images]) as scope:
        images = convert.convert_to_tensor(images, name="images")
        shape = images.shape
        if shape.ndims is not None and (shape.ndims < 2 or shape[-1].value not in (None, 1)):
            raise ValueError(
                f"Last dimension of a grayscale image should be size 1, got shape {shape}"
            )
        rank_less_one = array_ops.reshape(array_ops.rank(images) - 1, [1])
        multiples = array_ops.concat([array_ops.ones(rank_less_one, dtypes.int32), [3]], 0)
        rgb = array_ops.tile(images, multiples, name=scope)
        if shape.ndims is not None:
            rgb.set_shape(shape[:-1].concatenate([3]))
        return rgb
