"""CPU kernels of 3-D convolution and pooling and their gradients, in NDHWC (NCDHW transposed at
the edges), on the same sliding-window geometry as the 2-D kernels.

`Window3D` gives the padded input's strided view of all windows, (N, OD, OH, OW, KD, KH, KW, C),
without a copy. Conv3D multiplies it by the filter (one tensordot per block of images, whose
patch matrix stays under ~32 MB); the input backprop adds one GEMM per kernel tap into that tap's
slab of the padded input; the filter backprop contracts each tap's slab with the output
gradient. Max pooling reduces the view; its gradient goes to every input equal to its window's
maximum (TF's CPU MaxPool3DGrad does so too, unlike 2-D MaxPoolGrad's first maximum). Average
pooling divides by the number of real (unpadded) cells in each window, as TF.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.opdefs.nn_conv import spatial_attr, spatial_axes, window_geometry

_FLOATS = [np.float16, np.float32, np.float64]
_PATCH_BUDGET = 32 << 20  # bytes of patch matrix per tensordot


def _invalid(message: str) -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(None, None, message)


@dataclasses.dataclass(frozen=True)
class Window3D:
    """Kernel, strides, dilations, output size and (before, after) pads of the 3 spatial dims."""

    kernel: tuple
    strides: tuple
    dilations: tuple
    out: tuple
    pads: tuple

    def taps(self):
        return itertools.product(*(range(k) for k in self.kernel))

    def tap(self, tap) -> tuple:
        """The index into the padded input of the cells kernel tap `tap` reads for all outputs."""
        return (slice(None),) + tuple(
            slice(t * r, t * r + s * (o - 1) + 1, s)
            for t, r, s, o in zip(tap, self.dilations, self.strides, self.out)
        )


def _window(attrs, ndhwc_shape, kernel, dilated=True) -> Window3D:
    fmt = attrs["data_format"]
    try:
        strides = spatial_attr(attrs["strides"], "strides", fmt)
        dilations = spatial_attr(attrs["dilations"], "dilations", fmt) if dilated else (1, 1, 1)
        geometry = [
            window_geometry(size, k, s, r, attrs["padding"])
            for size, k, s, r in zip(ndhwc_shape[1:4], kernel, strides, dilations)
        ]
    except ValueError as e:
        raise _invalid(str(e)) from None
    out = tuple(g[0] for g in geometry)
    return Window3D(tuple(kernel), strides, dilations, out, tuple((g[1], g[2]) for g in geometry))


def _to_ndhwc(x, fmt):
    return x if fmt == "NDHWC" else x.transpose(0, 2, 3, 4, 1)


def _from_ndhwc(x, fmt):
    return x if fmt == "NDHWC" else np.ascontiguousarray(x.transpose(0, 4, 1, 2, 3))


def _shape_arg(value, fmt) -> tuple:
    dims = [int(v) for v in np.asarray(value).reshape(-1)]
    if len(dims) != 5:
        raise _invalid(f"shape input must have 5 elements, got {dims}")
    d, h, w, c = spatial_axes(fmt)
    return (dims[0], dims[d], dims[h], dims[w], dims[c])


def _pad(x, win: Window3D, value=0):
    if not any(any(p) for p in win.pads):
        return x
    return np.pad(x, ((0, 0), *win.pads, (0, 0)), constant_values=value)


def _unpad(xp, win: Window3D, spatial):
    return xp[(slice(None),) + tuple(slice(b, b + n) for (b, _), n in zip(win.pads, spatial))]


def _padded_zeros(ndhwc, win: Window3D, dtype):
    n, *spatial, c = ndhwc
    return np.zeros((n, *(s + b + a for s, (b, a) in zip(spatial, win.pads)), c), dtype)


def _patches(xp, win: Window3D):
    """(N, OD, OH, OW, KD, KH, KW, C) read-only view of the padded input's windows."""
    n, c = xp.shape[0], xp.shape[4]
    s = xp.strides
    shape = (n, *win.out, *win.kernel, c)
    strides = (
        s[0],
        *(s[i + 1] * st for i, st in enumerate(win.strides)),
        *(s[i + 1] * r for i, r in enumerate(win.dilations)),
        s[4],
    )
    return as_strided(xp, shape, strides, writeable=False)


def _compute_dtype(dtype):
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


def _check_rank(*arrays):
    for a in arrays:
        if a.ndim != 5:
            raise _invalid(f"input must be 5-dimensional, got shape {list(a.shape)}")


# -- convolution ------------------------------------------------------------------------------
@register_kernel("Conv3D", dtypes_=_FLOATS, expensive=True)
def conv3d(ctx, x, f):
    _check_rank(x, f)
    fmt = ctx.attrs["data_format"]
    xn = _to_ndhwc(x, fmt)
    if xn.shape[4] != f.shape[3]:
        raise _invalid(
            f"Input depth must be evenly divisible by filter depth: {xn.shape[4]} vs {f.shape[3]}"
        )
    dt = _compute_dtype(x.dtype)
    win = _window(ctx.attrs, xn.shape, f.shape[:3])
    cols = _patches(_pad(xn.astype(dt, copy=False), win), win)
    filt = f.astype(dt, copy=False)
    n = xn.shape[0]
    per_image = max(1, int(np.prod(cols.shape[1:])) * dt.itemsize)
    step = max(1, _PATCH_BUDGET // per_image)
    out = np.empty((n, *win.out, f.shape[4]), dt)
    for lo in range(0, n, step):  # blocks of images, bounding the patch matrix's memory
        out[lo : lo + step] = np.tensordot(cols[lo : lo + step], filt, axes=4)
    return _from_ndhwc(out, fmt).astype(x.dtype, copy=False)


@register_kernel("Conv3DBackpropInputV2", dtypes_=_FLOATS, expensive=True)
def conv3d_backprop_input(ctx, input_sizes, f, dy):
    fmt = ctx.attrs["data_format"]
    shape = _shape_arg(input_sizes, fmt)
    _check_rank(f, dy)
    dt = _compute_dtype(dy.dtype)
    dyn = _to_ndhwc(dy, fmt).astype(dt, copy=False)
    win = _window(ctx.attrs, shape, f.shape[:3])
    _check_out(dyn.shape, shape[0], win, f.shape[4])
    dxp = _padded_zeros(shape, win, dt)
    filt = f.astype(dt, copy=False)
    for tap in win.taps():  # dx[tap's cells] += dy . f[tap]^T
        dxp[win.tap(tap)] += np.matmul(dyn, filt[tap].T)
    dx = _unpad(dxp, win, shape[1:4])
    return _from_ndhwc(np.ascontiguousarray(dx), fmt).astype(dy.dtype, copy=False)


@register_kernel("Conv3DBackpropFilterV2", dtypes_=_FLOATS, expensive=True)
def conv3d_backprop_filter(ctx, x, filter_sizes, dy):
    fmt = ctx.attrs["data_format"]
    _check_rank(x, dy)
    sizes = [int(v) for v in np.asarray(filter_sizes).reshape(-1)]
    if len(sizes) != 5:
        raise _invalid(f"filter_sizes must have 5 elements, got {sizes}")
    dt = _compute_dtype(x.dtype)
    xn = _to_ndhwc(x, fmt).astype(dt, copy=False)
    dyn = _to_ndhwc(dy, fmt).astype(dt, copy=False)
    win = _window(ctx.attrs, xn.shape, sizes[:3])
    _check_out(dyn.shape, xn.shape[0], win, sizes[4])
    xp = _pad(xn, win)
    df = np.empty(sizes, dt)
    for tap in win.taps():  # df[tap] = x[tap's cells]^T . dy over batch and outputs
        df[tap] = np.tensordot(xp[win.tap(tap)], dyn, axes=([0, 1, 2, 3], [0, 1, 2, 3]))
    return df.astype(x.dtype, copy=False)


def _check_out(dy_shape, n, win: Window3D, channels):
    want = (n, *win.out, channels)
    if tuple(dy_shape) != want:
        raise _invalid(
            f"out_backprop has shape {list(dy_shape)}, but the convolution computes {list(want)}"
        )


# -- pooling ----------------------------------------------------------------------------------
def _pool_window(ctx, ndhwc_shape) -> Window3D:
    try:
        ksize = spatial_attr(ctx.attrs["ksize"], "ksize", ctx.attrs["data_format"])
    except ValueError as e:
        raise errors.UnimplementedError(None, None, str(e)) from None
    return _window(ctx.attrs, ndhwc_shape, ksize, dilated=False)


_SPATIAL_WINDOW = (4, 5, 6)  # the window axes of the patch view


@register_kernel("MaxPool3D", dtypes_=[np.float16, np.float32], expensive=True)
def max_pool3d(ctx, x):
    _check_rank(x)
    fmt = ctx.attrs["data_format"]
    xn = _to_ndhwc(x, fmt)
    win = _pool_window(ctx, xn.shape)
    cols = _patches(_pad(xn, win, -np.inf), win)
    return _from_ndhwc(cols.max(axis=_SPATIAL_WINDOW), fmt)


@register_kernel("MaxPool3DGrad", dtypes_=[np.float16, np.float32], expensive=True)
def max_pool3d_grad(ctx, x, y, dy):
    _check_rank(x, y, dy)
    fmt = ctx.attrs["data_format"]
    xn, yn, dyn = (_to_ndhwc(a, fmt) for a in (x, y, dy))
    win = _pool_window(ctx, xn.shape)
    xp = _pad(xn, win, -np.inf)
    dxp = np.zeros(xp.shape, dy.dtype)
    for tap in win.taps():  # every input equal to its window's maximum gets the gradient
        cells = win.tap(tap)
        dxp[cells] += np.where(xp[cells] == yn, dyn, np.zeros((), dy.dtype))
    return _from_ndhwc(np.ascontiguousarray(_unpad(dxp, win, xn.shape[1:4])), fmt)


def _window_counts(win: Window3D, spatial) -> np.ndarray:
    """(OD, OH, OW, 1) number of real cells in each window."""
    ones = _pad(np.ones((1, *spatial, 1), np.float64), win)
    return _patches(ones, win).sum(axis=(4, 5, 6, 7))[0, ..., None]


@register_kernel("AvgPool3D", dtypes_=_FLOATS, expensive=True)
def avg_pool3d(ctx, x):
    _check_rank(x)
    fmt = ctx.attrs["data_format"]
    xn = _to_ndhwc(x, fmt)
    win = _pool_window(ctx, xn.shape)
    dt = _compute_dtype(x.dtype)
    sums = _patches(_pad(xn.astype(dt, copy=False), win), win).sum(axis=_SPATIAL_WINDOW)
    out = sums / _window_counts(win, xn.shape[1:4]).astype(dt)
    return _from_ndhwc(out.astype(x.dtype, copy=False), fmt)


@register_kernel("AvgPool3DGrad", dtypes_=_FLOATS, expensive=True)
def avg_pool3d_grad(ctx, orig_input_shape, dy):
    fmt = ctx.attrs["data_format"]
    shape = _shape_arg(orig_input_shape, fmt)
    _check_rank(dy)
    win = _pool_window(ctx, shape)
    dt = _compute_dtype(dy.dtype)
    share = _to_ndhwc(dy, fmt).astype(dt) / _window_counts(win, shape[1:4]).astype(dt)
    dxp = _padded_zeros(shape, win, dt)
    for tap in win.taps():
        dxp[win.tap(tap)] += share
    dx = np.ascontiguousarray(_unpad(dxp, win, shape[1:4]))
    return _from_ndhwc(dx, fmt).astype(dy.dtype, copy=False)
