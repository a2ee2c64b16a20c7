"""CPU kernels of the color ops (see flowgraph/opdefs/image_color.py), vectorized over pixels
with TensorFlow's per-pixel formulas, in float32 for half images as TensorFlow computes them.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel


def _channels(images, what="images"):
    if images.ndim < 1 or images.shape[-1] != 3:
        raise errors.InvalidArgumentError(
            None,
            None,
            f"input must have 3 channels but input only has {images.shape[-1:]} "
            f"channels ({what} shape {list(images.shape)})",
        )
    return images[..., 0], images[..., 1], images[..., 2]


def _wide(x):
    return x.astype(np.float32) if x.dtype != np.float64 else x


def rgb_to_hsv(r, g, b):
    """(h, s, v), h in [0, 1): TF's RGBToHSV per pixel."""
    v = np.maximum(np.maximum(r, g), b)
    span = v - np.minimum(np.minimum(r, g), b)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, span / np.where(v > 0, v, 1), 0)
        norm = 1 / (6 * span)
        h = np.where(
            r == v, norm * (g - b), np.where(g == v, norm * (b - r) + 2 / 6, norm * (r - g) + 4 / 6)
        )
    h = np.where(span > 0, h, 0)
    h = np.where(h < 0, h + 1, h)
    return h.astype(v.dtype), s.astype(v.dtype), v


def hsv_to_rgb(h, s, v):
    """TF's HSVToRGB per pixel."""
    dh = h * 6
    r = np.clip(np.abs(dh - 3) - 1, 0, 1)
    g = np.clip(2 - np.abs(dh - 2), 0, 1)
    b = np.clip(2 - np.abs(dh - 4), 0, 1)
    one_minus_s = 1 - s
    return ((one_minus_s + s * c) * v for c in (r, g, b))


@register_kernel("RGBToHSV")
def rgb_to_hsv_kernel(ctx, images):
    h, s, v = rgb_to_hsv(*_channels(_wide(images)))
    return np.stack([h, s, v], axis=-1).astype(images.dtype)


@register_kernel("HSVToRGB")
def hsv_to_rgb_kernel(ctx, images):
    return np.stack(list(hsv_to_rgb(*_channels(_wide(images)))), axis=-1).astype(images.dtype)


def _factor(value, name):
    value = np.asarray(value)
    if value.ndim != 0:
        raise errors.InvalidArgumentError(None, None, f"{name} must be scalar: {list(value.shape)}")
    return np.float32(value)


@register_kernel("AdjustContrastv2")
def adjust_contrast(ctx, images, contrast_factor):
    """(x - mean) * factor + mean, the mean per image and channel over height and width."""
    factor = _factor(contrast_factor, "contrast_factor")
    if images.ndim < 3:
        raise errors.InvalidArgumentError(
            None, None, f"input must be at least 3-D, got shape {list(images.shape)}"
        )
    x = _wide(images)
    mean = x.mean(axis=(-3, -2), keepdims=True, dtype=np.float32).astype(x.dtype)
    return ((x - mean) * factor + mean).astype(images.dtype)


def _hue_category(r, g, b):
    """TF's AdjustHue split of a pixel: (h in [0, 6), v_min, v_max)."""
    v_max = np.maximum(np.maximum(r, g), b)
    v_min = np.minimum(np.minimum(r, g), b)
    # the category of each ordering of r, g, b (ties may fall either side)
    r_lt_g = r < g
    category = np.where(
        r_lt_g,
        np.where(b < r, 1, np.where(b > g, 3, 2)),
        np.where(b < g, 0, np.where(b > r, 4, 5)),
    )
    v_mid = r + g + b - v_max - v_min
    span = v_max - v_min
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = (v_mid - v_min) / span
    increase = (category & 1) == 0
    h = category + np.where(increase, ratio, 1 - ratio)
    return np.where(span == 0, 0, h).astype(r.dtype), v_min, v_max


def _from_hue_category(h, v_min, v_max):
    category = h.astype(np.int64)
    ratio = h - category
    ratio = np.where((category & 1) == 0, ratio, 1 - ratio)
    v_mid = v_min + ratio * (v_max - v_min)
    picks = {  # category -> (r, g, b) among (max, mid, min)
        0: (v_max, v_mid, v_min),
        1: (v_mid, v_max, v_min),
        2: (v_min, v_max, v_mid),
        3: (v_min, v_mid, v_max),
        4: (v_mid, v_min, v_max),
        5: (v_max, v_min, v_mid),
    }
    conditions = [category == c for c in range(5)]
    return [np.select(conditions, [picks[c][i] for c in range(5)], picks[5][i]) for i in range(3)]


@register_kernel("AdjustHue")
def adjust_hue(ctx, images, delta):
    """Rotates the hue by `delta` (a fraction of the color wheel), keeping value and chroma."""
    delta = _factor(delta, "delta")
    x = _wide(images)
    h, v_min, v_max = _hue_category(*_channels(x))
    h = np.mod(h + delta * np.float32(6), np.float32(6)).astype(x.dtype)
    return np.stack(_from_hue_category(h, v_min, v_max), axis=-1).astype(images.dtype)


def _saturation_hsv_to_rgb(h, s, v):
    """TF's AdjustSaturation conversion back (chroma and the hue's sector)."""
    c = s * v
    m = v - c
    dh = h * 6
    category = dh.astype(np.int64)
    fmodu = np.mod(dh, 2)
    fmodu = np.where(fmodu <= 0, fmodu + 2, fmodu)
    x = c * (1 - np.abs(fmodu - 1))
    zero = np.zeros_like(c)
    picks = [(c, x, zero), (x, c, zero), (zero, c, x), (zero, x, c), (x, zero, c), (c, zero, x)]
    conditions = [category == k for k in range(6)]
    return [np.select(conditions, [p[i] for p in picks], zero) + m for i in range(3)]


@register_kernel("AdjustSaturation")
def adjust_saturation(ctx, images, scale):
    """Scales the saturation by `scale`, clipped to [0, 1]."""
    scale = _factor(scale, "scale")
    x = _wide(images)
    h, s, v = rgb_to_hsv(*_channels(x))
    s = np.clip(s * scale, 0, 1).astype(x.dtype)
    return np.stack(_saturation_hsv_to_rgb(h, s, v), axis=-1).astype(images.dtype)
