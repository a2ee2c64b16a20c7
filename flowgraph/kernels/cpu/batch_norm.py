"""CPU kernels for FusedBatchNorm (V1/V2/V3) and its gradients.

Conventions (TensorFlow's CPU kernels): in training the output `batch_variance` is the unbiased
(Bessel-corrected) variance, blended into the running value by `exponential_avg_factor`, while
normalization and `reserve_space_2` use the biased one; in inference the given mean and variance
are used and passed through. The gradient reads the statistics back from the reserve spaces.
half inputs are computed in float32.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import windows as W

_EMPTY = np.zeros((0,), np.float32)


def _channels_last(x, data_format):
    if x.ndim != 4:
        raise errors.InvalidArgumentError(
            None, None, f"input must be 4-dimensional, got shape {x.shape}"
        )
    return W.to_nhwc(x, data_format).astype(
        np.float32 if x.dtype == np.float16 else x.dtype, copy=False
    )


def _vector(v, c, what):
    if v.shape != (c,):
        raise errors.InvalidArgumentError(
            None, None, f"{what} must have shape [{c}], got {list(v.shape)}"
        )
    return v


def _fused_batch_norm(ctx, x, scale, offset, mean, variance):
    a = ctx.attrs
    xn = _channels_last(x, a["data_format"])
    c = xn.shape[3]
    _vector(scale, c, "scale")
    _vector(offset, c, "offset")
    eps, factor = a["epsilon"], a.get("exponential_avg_factor", 1.0)
    if a["is_training"]:
        count = xn.shape[0] * xn.shape[1] * xn.shape[2]
        batch_mean = xn.mean(axis=(0, 1, 2))
        batch_var = np.square(xn - batch_mean).mean(axis=(0, 1, 2))
        unbiased = batch_var * (count / max(count - 1, 1))
        running_mean, running_var = batch_mean, unbiased
        if factor != 1.0:
            running_mean = (1 - factor) * _vector(mean, c, "mean") + factor * batch_mean
            running_var = (1 - factor) * _vector(variance, c, "variance") + factor * unbiased
    else:
        batch_mean, batch_var = _vector(mean, c, "mean"), _vector(variance, c, "variance")
        running_mean, running_var = batch_mean, batch_var
    inv = 1.0 / np.sqrt(batch_var + eps)
    y = (xn - batch_mean) * (inv * scale) + offset
    y = W.from_nhwc(y.astype(x.dtype, copy=False), a["data_format"])
    u = scale.dtype
    stats = [running_mean, running_var, batch_mean, batch_var]
    return (y,) + tuple(np.asarray(s, u) for s in stats)


@register_kernel("FusedBatchNorm")
@register_kernel("FusedBatchNormV2", dtypes_=[np.float16, np.float32])
def fused_batch_norm(ctx, x, scale, offset, mean, variance):
    return _fused_batch_norm(ctx, x, scale, offset, mean, variance)


@register_kernel("FusedBatchNormV3", dtypes_=[np.float16, np.float32])
def fused_batch_norm_v3(ctx, x, scale, offset, mean, variance):
    return _fused_batch_norm(ctx, x, scale, offset, mean, variance) + (_EMPTY,)


def _fused_batch_norm_grad(ctx, dy, x, scale, mean, variance):
    a = ctx.attrs
    xn = _channels_last(x, a["data_format"])
    dyn = _channels_last(dy, a["data_format"])
    c = xn.shape[3]
    for v, what in ((scale, "scale"), (mean, "reserve_space_1"), (variance, "reserve_space_2")):
        _vector(v, c, what)
    inv = 1.0 / np.sqrt(variance + a["epsilon"])
    xhat = (xn - mean) * inv
    d_offset = dyn.sum(axis=(0, 1, 2))
    d_scale = (dyn * xhat).sum(axis=(0, 1, 2))
    if a["is_training"]:
        count = xn.shape[0] * xn.shape[1] * xn.shape[2]
        dx = (scale * inv / count) * (count * dyn - d_offset - xhat * d_scale)
    else:
        dx = dyn * (scale * inv)
    dx = W.from_nhwc(dx.astype(x.dtype, copy=False), a["data_format"])
    u = scale.dtype
    return dx, d_scale.astype(u), d_offset.astype(u), _EMPTY, _EMPTY


@register_kernel("FusedBatchNormGrad")
@register_kernel("FusedBatchNormGradV2", dtypes_=[np.float16, np.float32])
def fused_batch_norm_grad(ctx, dy, x, scale, reserve_1, reserve_2):
    return _fused_batch_norm_grad(ctx, dy, x, scale, reserve_1, reserve_2)


@register_kernel("FusedBatchNormGradV3", dtypes_=[np.float16, np.float32])
def fused_batch_norm_grad_v3(ctx, dy, x, scale, reserve_1, reserve_2, reserve_3):
    return _fused_batch_norm_grad(ctx, dy, x, scale, reserve_1, reserve_2)
