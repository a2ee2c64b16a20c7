"""CPU kernels for max and average pooling and their gradients.

Max pooling of float32 and float64 is one compiled pass, window by window (pooling_loops.py;
2x2 windows of stride 2 that tile the input, the usual case, a vectorized pair-of-rows loop);
other types loop over the kh*kw window taps, each step one NumPy operation over a block of
images, all output pixels and all channels, on the cells each tap reads inside the input
(`Window.valid_tap`: padding is an index computation, never a padded copy). The gradients need
each window's first maximum in row-major order (TensorFlow's CPU choice); they find and use it in
one compiled pass, which writes the cells of windows that do not overlap instead of adding. All
three split the batch into blocks of images on the device's pool (kernels/sharding.py). Average
pooling with SAME padding divides by the number of real (unpadded) cells in each window.

The graph passes add three kernels of ours: _FusedMaxPoolGrad (remapper.py) applies a following
ReluGrad's mask in the gradient's pass; _MaxPoolWithMask keeps a byte per output for its
gradient, _MaxPoolGradWithMask, which then writes the cells without reading x (pool_masks.py).
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import windows as W
from flowgraph.kernels.cpu.loops import COMPILED_TYPES, compiled

_FLOATS = [np.float16, np.float32, np.float64]
_REAL = _FLOATS + [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _geometry(ctx, nhwc_in) -> W.Window:
    fmt = ctx.attrs["data_format"]
    ksize = list(ctx.attrs["ksize"])
    h, w, c = W.spatial_axes(fmt)
    if len(ksize) != 4 or ksize[0] != 1 or ksize[c] != 1:
        raise errors.InvalidArgumentError(
            None, None, f"Pooling is only supported over the spatial dimensions; got ksize {ksize}"
        )
    return W.window(ctx.attrs, nhwc_in, ksize[h], ksize[w], dilated=False)


def _lowest(dtype):
    return -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min


def _check_4d(*arrays):
    for a in arrays:
        if a.ndim != 4:
            raise errors.InvalidArgumentError(
                None, None, f"pooling input must be 4-D, got shape {a.shape}"
            )


# Cost units (single-threaded SGEMM multiply-adds, kernels/sharding.py) of one tap of one
# output value: measured on LeNet's first pooling layer, MaxPool 16, the gradient's loop 38.
_TAP_COST, _TAP_COST_BACKWARD = 16, 38


def _pool_cost(win: W.Window, channels: int, per_tap: int) -> int:
    """Cost units of one image."""
    return win.oh * win.ow * channels * win.kh * win.kw * per_tap


@register_kernel("MaxPool", dtypes_=_REAL[:-2], intra_op=True)  # TF's MaxPool: no uint32/64
def max_pool(ctx, x):
    _check_4d(x)
    fmt = ctx.attrs["data_format"]
    xn = W.to_nhwc(x, fmt)
    n, h, w, c = xn.shape
    win = _geometry(ctx, xn.shape)
    out = np.empty((n, win.oh, win.ow, c), x.dtype)
    if x.dtype in COMPILED_TYPES and _halves(win, xn):
        pairs = compiled("max_pool_2x2")
        W.for_images(
            ctx, n, _pool_cost(win, c, _TAP_COST), lambda lo, hi: pairs(xn[lo:hi], out[lo:hi])
        )
        return W.from_nhwc(out, fmt)
    if x.dtype in COMPILED_TYPES:
        loop = compiled("max_pool")
        (pt, _), (pl, _) = win.pads
        args = (win.kh, win.kw, win.sh, win.sw, pt, pl, _lowest(x.dtype))

        def windows(lo: int, hi: int) -> None:
            loop(xn[lo:hi], out[lo:hi], *args)

        W.for_images(ctx, n, _pool_cost(win, c, _TAP_COST), windows)
        return W.from_nhwc(out, fmt)
    taps = [(o, i) for _, _, o, i in W.valid_taps(win, h, w)]
    # Without padding tap (0, 0) reads a cell of every window: it starts the maxima.
    covers = win.pads == ((0, 0), (0, 0))

    def images(lo: int, hi: int) -> None:
        xs, os = xn[lo:hi], out[lo:hi]
        if covers:
            np.copyto(os, xs[taps[0][1]])
        else:
            os.fill(_lowest(x.dtype))
        for o, i in taps[1:] if covers else taps:
            np.maximum(os[o], xs[i], out=os[o])

    W.for_images(ctx, n, _pool_cost(win, c, _TAP_COST), images)
    return W.from_nhwc(out, fmt)


# loops.max_pool_backward's modes
_ADD, _WRITE, _GATHER = 0, 1, 2


def _halves(win: W.Window, x) -> bool:
    """Whether 2x2 windows of stride 2 tile the C-contiguous NHWC `x` exactly (pooling_loops.py's
    vectorized pair-of-rows loops)."""
    (pt, pb), (pl, pr) = win.pads
    return (
        (win.kh, win.kw, win.sh, win.sw) == (2, 2, 2, 2)
        and pt == pb == pl == pr == 0
        and x.shape[1:3] == (2 * win.oh, 2 * win.ow)
        and x.flags.c_contiguous
    )


def _backward(ctx, x, g, out, win: W.Window, mode: int, relu: bool = False) -> None:
    """Runs pooling_loops.py's first-maximum pass over blocks of images (half in float32: numba has
    no half arithmetic; exact, as the values are only compared and moved); `relu` (mode
    _WRITE) also applies ReluGrad's mask of x to each cell written."""
    if mode == _WRITE and _halves(win, x):
        pairs = compiled("max_pool_backward_2x2")

        def images(lo: int, hi: int) -> None:
            pairs(x[lo:hi], g[lo:hi], out[lo:hi], relu)
    else:
        loop = compiled("max_pool_backward")
        (pt, _), (pl, _) = win.pads
        args = (win.kh, win.kw, win.sh, win.sw, pt, pl, mode, relu)

        def images(lo: int, hi: int) -> None:
            loop(x[lo:hi], g[lo:hi], out[lo:hi], *args)

    W.for_images(ctx, x.shape[0], _pool_cost(win, x.shape[3], _TAP_COST_BACKWARD), images)


def _tiled(win: W.Window, h: int, w: int) -> bool:
    """Whether the windows tile the input: each cell lies in exactly one window."""
    (pt, _), (pl, _) = win.pads
    return (
        (win.sh, win.sw) == (win.kh, win.kw)
        and (win.oh - 1) * win.sh - pt + win.kh >= h
        and (win.ow - 1) * win.sw - pl + win.kw >= w
    )


def _loop_dtype(dtype):
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


@register_kernel("MaxPoolGrad", dtypes_=_REAL, intra_op=True)
def max_pool_grad(ctx, x, y, dy):
    """Adds each output gradient into the first maximum of its window (recomputed from x, as TF
    does; `y` is not read)."""
    return _max_pool_grad(ctx, x, dy, relu=False)


@register_kernel("_FusedMaxPoolGrad", dtypes_=_FLOATS, intra_op=True)
def fused_max_pool_grad(ctx, x, y, dy):
    """ReluGrad(MaxPoolGrad(x, y, dy), x) in MaxPoolGrad's one pass, which already reads each
    cell of x (runtime/passes/remapper.py makes the node): the same bits as the two kernels,
    without ReluGrad's second pass over the input-sized gradient."""
    return _max_pool_grad(ctx, x, dy, relu=_relu_fused(ctx))


def _relu_fused(ctx) -> bool:
    """Whether the node's `fused_ops` ([] or [ReluGrad]) fuse a ReluGrad."""
    ops = list(ctx.attrs["fused_ops"])
    if ops not in ([], ["ReluGrad"]):
        raise errors.InvalidArgumentError(
            None, None, f"{ctx.op_type} supports fused_ops [] or [ReluGrad], got {ops}"
        )
    return bool(ops)


# The mask of a pool whose windows are not 2x2 of stride 2 tiling NHWC: its gradient reads x.
_NO_MASK = np.zeros(0, np.uint8)
_NO_MASK.flags.writeable = False


@register_kernel("_MaxPoolWithMask", dtypes_=_FLOATS[1:], intra_op=True)
def max_pool_with_mask(ctx, x):
    """MaxPool, and where 2x2 windows of stride 2 tile the NHWC input, one byte per output
    value naming the cell of its window that takes the gradient and whether it is > 0
    (pooling_loops.py), for _MaxPoolGradWithMask (runtime/passes/pool_masks.py pairs them):
    the gradient then need not read x again. Other geometries give an empty mask."""
    _check_4d(x)
    fmt = ctx.attrs["data_format"]
    xn = W.to_nhwc(x, fmt)
    win = _geometry(ctx, xn.shape)
    if fmt != "NHWC" or not _halves(win, xn):  # (NCHW of one channel is C-contiguous too)
        return max_pool(ctx, x), _NO_MASK
    n, c = xn.shape[0], xn.shape[3]
    out = np.empty((n, win.oh, win.ow, c), x.dtype)
    mask = np.empty(out.shape, np.uint8)
    loop = compiled("max_pool_2x2_mask")

    def images(lo: int, hi: int) -> None:
        loop(xn[lo:hi], out[lo:hi], mask[lo:hi])

    W.for_images(ctx, n, _pool_cost(win, c, _TAP_COST), images)
    return out, mask


@register_kernel("_MaxPoolGradWithMask", dtypes_=_FLOATS[1:], intra_op=True)
def max_pool_grad_with_mask(ctx, x, mask, dy):
    """MaxPoolGrad (with fused_ops [ReluGrad], times ReluGrad's mask of x) from the bytes
    _MaxPoolWithMask kept, writing each window's cells from its byte and dy alone; from x
    itself when the mask is empty. The same bits as MaxPoolGrad (and ReluGrad) either way."""
    relu = _relu_fused(ctx)
    if mask.size == 0:
        return _max_pool_grad(ctx, x, dy, relu)
    _check_4d(x, dy)
    n, oh, ow, c = mask.shape
    if dy.shape != mask.shape or x.shape != (n, 2 * oh, 2 * ow, c):
        raise errors.InvalidArgumentError(
            None,
            None,
            f"grad {dy.shape} and input {x.shape} do not fit the pool's mask {mask.shape}",
        )
    dx = np.empty(x.shape, dy.dtype)
    g = np.ascontiguousarray(dy)
    loop = compiled("max_pool_backward_2x2_mask")

    def images(lo: int, hi: int) -> None:
        loop(mask[lo:hi], g[lo:hi], dx[lo:hi], relu)

    win = _geometry(ctx, x.shape)
    W.for_images(ctx, n, _pool_cost(win, c, _TAP_COST_BACKWARD), images)
    return dx


def _max_pool_grad(ctx, x, dy, relu: bool):
    """MaxPoolGrad, times ReluGrad's mask (x > 0) when `relu`."""
    _check_4d(x, dy)
    fmt = ctx.attrs["data_format"]
    xn = W.to_nhwc(x, fmt)
    win = _geometry(ctx, xn.shape)
    dyn = W.to_nhwc(dy, fmt)
    if dyn.shape != (xn.shape[0], win.oh, win.ow, xn.shape[3]):
        raise errors.InvalidArgumentError(
            None, None, f"grad has shape {dy.shape}, expected the pool output's"
        )
    dt = _loop_dtype(dy.dtype)
    # Windows that do not overlap write their cells (the rest stay 0); others add into them.
    disjoint = win.sh >= win.kh and win.sw >= win.kw
    tiled = _tiled(win, xn.shape[1], xn.shape[2])
    dx = np.empty(xn.shape, dt) if tiled else np.zeros(xn.shape, dt)
    xl = np.ascontiguousarray(xn, _loop_dtype(x.dtype))
    _backward(ctx, xl, np.ascontiguousarray(dyn, dt), dx, win, _WRITE if disjoint else _ADD, relu)
    if relu and not disjoint:  # sums of overlapping windows: masked once they are complete
        np.multiply(dx, xl > 0, out=dx)
    return W.from_nhwc(dx, fmt).astype(dy.dtype, copy=False)


@register_kernel("MaxPoolGradGrad", dtypes_=_REAL, intra_op=True)
def max_pool_grad_grad(ctx, x, y, ddx):
    """The gradient of MaxPoolGrad w.r.t. its `grad`: gathers `ddx` at each window's maximum."""
    _check_4d(x, ddx)
    fmt = ctx.attrs["data_format"]
    xn = W.to_nhwc(x, fmt)
    win = _geometry(ctx, xn.shape)
    if ddx.shape != x.shape:
        raise errors.InvalidArgumentError(
            None, None, f"grad has shape {ddx.shape}, expected the input's {x.shape}"
        )
    dt = _loop_dtype(ddx.dtype)
    out = np.zeros((xn.shape[0], win.oh, win.ow, xn.shape[3]), dt)
    xl = np.ascontiguousarray(xn, _loop_dtype(x.dtype))
    ddxn = np.ascontiguousarray(W.to_nhwc(ddx, fmt), dt)
    _backward(ctx, xl, ddxn, out, win, _GATHER)
    return W.from_nhwc(out, fmt).astype(ddx.dtype, copy=False)


def _window_counts(win: W.Window, h: int, w: int) -> np.ndarray:
    """(OH, OW, 1) number of real input cells in each window (SAME pads are not counted)."""

    def per_dim(size, k, stride, before, out):
        start = np.arange(out) * stride - before
        return np.minimum(start + k, size) - np.maximum(start, 0)

    ch = per_dim(h, win.kh, win.sh, win.pads[0][0], win.oh)
    cw = per_dim(w, win.kw, win.sw, win.pads[1][0], win.ow)
    return (ch[:, None] * cw[None, :])[:, :, None]


@register_kernel("AvgPool", dtypes_=_FLOATS, expensive=True)
def avg_pool(ctx, x):
    _check_4d(x)
    fmt = ctx.attrs["data_format"]
    dt = W.compute_dtype(x.dtype)
    xn = W.to_nhwc(x, fmt).astype(dt, copy=False)
    win = _geometry(ctx, xn.shape)
    xp = W.pad(xn, win)
    total = xp[win.tap(0, 0)].copy()
    for i, j in win.taps()[1:]:
        total += xp[win.tap(i, j)]
    total /= _window_counts(win, xn.shape[1], xn.shape[2]).astype(dt)
    return W.from_nhwc(total, fmt).astype(x.dtype, copy=False)


@register_kernel("AvgPoolGrad", dtypes_=_FLOATS, expensive=True)
def avg_pool_grad(ctx, orig_input_shape, dy):
    fmt = ctx.attrs["data_format"]
    nhwc_in = W.nhwc_shape(W.shape_arg(orig_input_shape, "orig_input_shape"), fmt)
    win = _geometry(ctx, nhwc_in)
    dt = W.compute_dtype(dy.dtype)
    dyn = W.to_nhwc(dy, fmt).astype(dt, copy=False)
    if dyn.shape != (nhwc_in[0], win.oh, win.ow, nhwc_in[3]):
        raise errors.InvalidArgumentError(
            None, None, f"grad has shape {dy.shape}, expected the pool output's"
        )
    share = dyn / _window_counts(win, nhwc_in[1], nhwc_in[2]).astype(dt)
    dxp = W.padded_zeros(nhwc_in, win, dt)
    for i, j in win.taps():
        dxp[win.tap(i, j)] += share
    dx = W.unpad(dxp, win, nhwc_in[1], nhwc_in[2])
    return W.from_nhwc(np.ascontiguousarray(dx), fmt).astype(dy.dtype, copy=False)
