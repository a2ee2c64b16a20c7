"""CPU kernels for 2-D convolution and its backprops: im2col + GEMM (whitepaper §5.4).

5x5 and 3x3 filters with unit strides and 8+ channels take Winograd's minimal filtering for all
three (winograd.py: 2.8x and 4x fewer multiply-adds; LeNet's conv2 forward 16.3 -> 9.2 ms).
With a height stride of 1 and 4+ input channels, Conv2D and (with unit strides) its input
backprop run as KH accumulating GEMMs over width-only patches (conv_rows.py: a KH-fold smaller
copy; LeNet's conv2 forward 20.5 -> 16.9 ms, input backprop 20.9 -> 17.8 ms of one core in an
interleaved A/B on a loaded machine). Otherwise Conv2D gathers the (N*OH*OW, KH*KW*C) patch
matrix and multiplies it by the filter viewed as (KH*KW*C, OC), block by cache-sized block of
rows (`windows.im2col_blocks`), each product written straight into the output. The filter
backprop sums the blocks' transposes times the output gradient (faster this way than as KH
GEMMs of width patches: 16.8 against 19.6 ms). Otherwise the input backprop is one GEMM per
kernel tap (the gradient times that tap's filter slice), each added into its window of the
input. These three are BLAS-bound `intra_op` kernels: each splits its batch into blocks of
images on the device's pool (windows.for_images; BLAS is single-threaded) unless it is small,
the filter backprop summing the blocks' partial gradients. Depthwise
convolution has no GEMM shape, loops over taps with broadcasting instead and stays `expensive`.
"""

from __future__ import annotations

import numpy as np

from flowgraph.core import errors
from flowgraph.kernels.base import register_kernel
from flowgraph.kernels.cpu import conv_rows as R
from flowgraph.kernels.cpu import windows as W
from flowgraph.kernels.cpu import winograd as WG
from flowgraph.kernels.cpu.loops import COMPILED_TYPES, compiled

_FLOATS = [np.float16, np.float32, np.float64]


def _check_depth(x_c: int, f_c: int):
    if x_c != f_c:
        raise errors.InvalidArgumentError(
            None, None, f"input depth ({x_c}) must equal the filter's input depth ({f_c})"
        )


@register_kernel("Conv2D", dtypes_=_FLOATS, intra_op=True)
def conv2d(ctx, x, f):
    return _conv2d(ctx, x, f)


@register_kernel("_FusedConv2D", dtypes_=_FLOATS, intra_op=True)
def fused_conv2d(ctx, x, f, *args):
    """Conv2D, then BiasAdd and optionally Relu (runtime/passes/remapper.py), applied to each
    block of output rows as soon as its product is written: in float32 and float64 one compiled
    pass (loops.py `bias_relu`) over the block while it is in cache; in half after the cast,
    as the unfused BiasAdd and Relu compute it."""
    ops = list(ctx.attrs["fused_ops"])
    if ops not in (["BiasAdd"], ["BiasAdd", "Relu"]) or len(args) != 1:
        raise errors.UnimplementedError(
            None, None, f"_FusedConv2D supports fused_ops [BiasAdd] or [BiasAdd, Relu], got {ops}"
        )
    bias = args[0]
    if bias.ndim != 1 or f.ndim != 4 or bias.shape[0] != f.shape[3]:
        raise errors.InvalidArgumentError(
            None, None, f"bias has shape {bias.shape}, expected [{f.shape[-1]}] (the output depth)"
        )
    return _conv2d(ctx, x, f, (bias, len(ops) == 2))


def _conv2d(ctx, x, f, epilogue=None):
    """Conv2D's output; `epilogue` (bias, relu) adds bias along the channels, then clamps."""
    fmt = ctx.attrs["data_format"]
    if x.ndim != 4 or f.ndim != 4:
        raise errors.InvalidArgumentError(
            None, None, f"input and filter must be 4-D, got {x.shape} and {f.shape}"
        )
    kh, kw, fc, oc = f.shape
    dt = W.compute_dtype(x.dtype)
    xn = W.to_nhwc(x, fmt)
    _check_depth(xn.shape[3], fc)
    win = W.window(ctx.attrs, xn.shape, kh, kw)
    f2 = f.astype(dt, copy=False).reshape(-1, oc)
    n, pixels = xn.shape[0], win.oh * win.ow
    out = np.empty((n * pixels, oc), dt)
    finish = _finisher(epilogue, out, pixels, dt == x.dtype)
    rows = R.forward_rows(win) if R.applies(win, dt, fc) else None
    if WG.applies(win, dt, fc, oc):
        u = WG.filter_transform(f, dt)
        xd = xn.astype(dt, copy=False)
        pads = (win.pads[0][0], win.pads[1][0])
        out4 = out.reshape(n, win.oh, win.ow, oc)

        def tiles(lo: int, hi: int) -> None:
            WG.conv(xd[lo:hi], u, kh, pads, out4[lo:hi])
            finish(lo, hi)

        W.for_images(ctx, n, pixels * f2.size * WG.work(kh), tiles)
        return _finished(out4, x.dtype, fmt, epilogue)

    def images(lo: int, hi: int) -> None:
        base = lo * pixels
        if rows is not None:
            block = out[base : hi * pixels].reshape(hi - lo, win.oh, win.ow, oc)
            R.conv(xn[lo:hi], f2.reshape(f.shape), rows, block, dt)
        elif fc < W.TAP_MAJOR_CHANNELS:
            cols = W.im2col_taps(xn[lo:hi], win, dt)
            np.matmul(cols.T, f2, out=out[base : hi * pixels])
        else:
            for first, last, cols in W.im2col_blocks(W.pad(xn[lo:hi], win), win, dt):
                np.matmul(cols, f2, out=out[base + first : base + last])
        finish(lo, hi)

    W.for_images(ctx, n, pixels * f2.size, images)
    return _finished(out.reshape(n, win.oh, win.ow, oc), x.dtype, fmt, epilogue)


def _finisher(epilogue, out, pixels: int, in_place: bool):
    """fn(lo, hi) applying `epilogue` to the output rows of images lo..hi where it runs on the
    compute type (float32, float64: the output's own type), else nothing."""
    if epilogue is None or not in_place or out.dtype not in COMPILED_TYPES:
        return lambda lo, hi: None
    loop, (bias, relu) = compiled("bias_relu"), epilogue
    bias = bias.astype(out.dtype, copy=False)
    return lambda lo, hi: loop(out[lo * pixels : hi * pixels], bias, relu)


def _finished(out4, dtype, fmt: str, epilogue):
    """The NHWC output in `dtype` and `fmt`; an epilogue the blocks could not apply (half: the
    unfused ops' arithmetic, after the cast) applied here."""
    out4 = out4.astype(dtype, copy=False)
    if epilogue is not None and (out4.dtype not in COMPILED_TYPES):
        bias, relu = epilogue
        np.add(out4, bias, out=out4)
        if relu:
            np.copyto(out4, out4.dtype.type(0), where=out4 < 0)  # keeps NaN and -0.0, as Relu
    return W.from_nhwc(out4, fmt)


@register_kernel("Conv2DBackpropInput", dtypes_=_FLOATS, intra_op=True)
def conv2d_backprop_input(ctx, input_sizes, f, dy):
    fmt = ctx.attrs["data_format"]
    nhwc_in = W.nhwc_shape(W.shape_arg(input_sizes, "input_sizes"), fmt)
    kh, kw, fc, oc = f.shape
    _check_depth(nhwc_in[3], fc)
    dt = W.compute_dtype(dy.dtype)
    win = W.window(ctx.attrs, nhwc_in, kh, kw)
    dyn = W.to_nhwc(dy, fmt)
    _check_out(dyn.shape, nhwc_in[0], win, oc)
    if win.sw == 1 and R.applies(win, dt, oc) and fc > 1:
        # With unit strides the input gradient is a convolution of dy (conv_rows.transposed).
        rows = R.transposed(win, nhwc_in[1], nhwc_in[2])
        flipped = R.transposed_filter(f.astype(dt, copy=False))
        dx = np.empty(nhwc_in, dt)
        winograd = WG.applies(win, dt, oc, fc)
        if winograd:
            u, dyd = WG.filter_transform(flipped, dt), dyn.astype(dt, copy=False)

            def transposed(lo: int, hi: int) -> None:
                WG.conv(dyd[lo:hi], u, kh, (rows.top, rows.left), dx[lo:hi])
        else:

            def transposed(lo: int, hi: int) -> None:
                R.conv(dyn[lo:hi], flipped, rows, dx[lo:hi], dt)

        cost = nhwc_in[1] * nhwc_in[2] * f.size * (WG.work(kh) if winograd else 1)
        W.for_images(ctx, nhwc_in[0], cost, transposed)
        return W.from_nhwc(dx, fmt).astype(dy.dtype, copy=False)
    # One GEMM per kernel tap, each adding a contiguous (N, OH, OW, C) block into its window:
    # 5x faster than one big GEMM whose per-tap slices are strided (measured on LeNet's conv2).
    dyd = dyn.astype(dt, copy=False)
    fd = f.astype(dt, copy=False)
    dx = np.zeros(nhwc_in, dt)
    # Each tap adds into the input cells it reads (`valid_tap`), not into a padded copy.
    taps = W.valid_taps(win, nhwc_in[1], nhwc_in[2])

    add = compiled("window_add") if dt in COMPILED_TYPES else None

    def images(lo: int, hi: int) -> None:
        dy2 = dyd[lo:hi].reshape(-1, oc)
        block = (hi - lo, win.oh, win.ow, fc)
        dxs = dx[lo:hi]
        if fc == 1:
            # One input channel would make each tap's GEMM a GEMV over all of dy; one GEMM
            # gives every tap's contribution as a contiguous row (1.9 -> 1.2 ms, LeNet conv1).
            rows = (fd.reshape(kh * kw, oc) @ dy2.T).reshape(kh, kw, *block)
            for i, j, out_index, in_index in taps:
                dxs[in_index] += rows[i, j][out_index]
            return
        product = np.empty(block, dt)
        for i, j, out_index, in_index in taps:
            np.matmul(dy2, fd[i, j].T, out=product.reshape(-1, fc))
            if add is None:
                dxs[in_index] += product[out_index]
                continue
            (_, rows, cols, _), (_, in_rows, in_cols) = out_index, in_index
            o_rows, o_cols = (rows.start, rows.stop), (cols.start, cols.stop)
            steps = (in_rows.step or 1, in_cols.step or 1)
            add(dxs, product, o_rows, o_cols, in_rows.start, in_cols.start, *steps)

    W.for_images(ctx, nhwc_in[0], win.oh * win.ow * fd.size, images)
    return W.from_nhwc(dx, fmt).astype(dy.dtype, copy=False)


@register_kernel("Conv2DBackpropFilter", dtypes_=_FLOATS, intra_op=True)
def conv2d_backprop_filter(ctx, x, filter_sizes, dy):
    fmt = ctx.attrs["data_format"]
    kh, kw, fc, oc = W.shape_arg(filter_sizes, "filter_sizes")
    dt = W.compute_dtype(x.dtype)
    xn = W.to_nhwc(x, fmt)
    _check_depth(xn.shape[3], fc)
    win = W.window(ctx.attrs, xn.shape, kh, kw)
    dyn = W.to_nhwc(dy, fmt)
    _check_out(dyn.shape, xn.shape[0], win, oc)
    dyd = dyn.astype(dt, copy=False)
    pixels = win.oh * win.ow
    partials = {}  # first image -> the partial filter gradient of its block
    if WG.applies(win, dt, fc, oc):
        xd = xn.astype(dt, copy=False)
        pads = (win.pads[0][0], win.pads[1][0])

        def tiles(lo: int, hi: int) -> None:
            partials[lo] = WG.filter_grad(xd[lo:hi], dyd[lo:hi], kh, pads)

        W.for_images(ctx, xn.shape[0], pixels * kh * kw * fc * oc * WG.work(kh), tiles)
        sums = sum(partials[lo] for lo in sorted(partials))  # in a fixed order
        return WG.filter_from_sums(sums, kh).astype(x.dtype, copy=False)

    def images(lo: int, hi: int) -> None:
        dy2 = dyd[lo:hi].reshape(-1, oc)
        if fc < W.TAP_MAJOR_CHANNELS:
            partials[lo] = W.im2col_taps(xn[lo:hi], win, dt) @ dy2
            return
        df = np.zeros((kh * kw * fc, oc), dt)
        for first, last, cols in W.im2col_blocks(W.pad(xn[lo:hi], win), win, dt):
            df += cols.T @ dy2[first:last]
        partials[lo] = df

    W.for_images(ctx, xn.shape[0], pixels * kh * kw * fc * oc, images)
    blocks = [partials[lo] for lo in sorted(partials)]  # summed in a fixed order
    df = blocks[0]
    for part in blocks[1:]:
        df += part
    return df.reshape(kh, kw, fc, oc).astype(x.dtype, copy=False)


def _check_out(dy_shape, n, win: W.Window, channels):
    want = (n, win.oh, win.ow, channels)
    if tuple(dy_shape) != want:
        raise errors.InvalidArgumentError(
            None, None, f"out_backprop has shape {tuple(dy_shape)} (as NHWC), expected {want}"
        )


# -- depthwise: out[..., c*M + m] = sum_taps x[..., c] * f[i, j, c, m] ----------------------------
@register_kernel("DepthwiseConv2dNative", dtypes_=_FLOATS, expensive=True)
def depthwise_conv2d(ctx, x, f):
    fmt = ctx.attrs["data_format"]
    kh, kw, fc, m = f.shape
    dt = W.compute_dtype(x.dtype)
    xn = W.to_nhwc(x, fmt).astype(dt, copy=False)
    _check_depth(xn.shape[3], fc)
    win = W.window(ctx.attrs, xn.shape, kh, kw)
    xp = W.pad(xn, win)
    fd = f.astype(dt, copy=False)
    out = np.zeros((xn.shape[0], win.oh, win.ow, fc, m), dt)
    for i, j in win.taps():
        out += xp[win.tap(i, j)][..., None] * fd[i, j]
    out = out.reshape(xn.shape[0], win.oh, win.ow, fc * m)
    return W.from_nhwc(out, fmt).astype(x.dtype, copy=False)


@register_kernel("DepthwiseConv2dNativeBackpropInput", dtypes_=_FLOATS, expensive=True)
def depthwise_conv2d_backprop_input(ctx, input_sizes, f, dy):
    fmt = ctx.attrs["data_format"]
    nhwc_in = W.nhwc_shape(W.shape_arg(input_sizes, "input_sizes"), fmt)
    kh, kw, fc, m = f.shape
    _check_depth(nhwc_in[3], fc)
    dt = W.compute_dtype(dy.dtype)
    win = W.window(ctx.attrs, nhwc_in, kh, kw)
    dyn = W.to_nhwc(dy, fmt)
    _check_out(dyn.shape, nhwc_in[0], win, fc * m)
    dyn = dyn.astype(dt, copy=False).reshape(nhwc_in[0], win.oh, win.ow, fc, m)
    fd = f.astype(dt, copy=False)
    dxp = W.padded_zeros(nhwc_in, win, dt)
    for i, j in win.taps():
        dxp[win.tap(i, j)] += np.einsum("nhwcm,cm->nhwc", dyn, fd[i, j])
    dx = W.unpad(dxp, win, nhwc_in[1], nhwc_in[2])
    return W.from_nhwc(np.ascontiguousarray(dx), fmt).astype(dy.dtype, copy=False)


@register_kernel("DepthwiseConv2dNativeBackpropFilter", dtypes_=_FLOATS, expensive=True)
def depthwise_conv2d_backprop_filter(ctx, x, filter_sizes, dy):
    fmt = ctx.attrs["data_format"]
    kh, kw, fc, m = W.shape_arg(filter_sizes, "filter_sizes")
    dt = W.compute_dtype(x.dtype)
    xn = W.to_nhwc(x, fmt).astype(dt, copy=False)
    _check_depth(xn.shape[3], fc)
    win = W.window(ctx.attrs, xn.shape, kh, kw)
    dyn = W.to_nhwc(dy, fmt)
    _check_out(dyn.shape, xn.shape[0], win, fc * m)
    dyn = dyn.astype(dt, copy=False).reshape(xn.shape[0], win.oh, win.ow, fc, m)
    xp = W.pad(xn, win)
    df = np.empty((kh, kw, fc, m), dt)
    for i, j in win.taps():
        df[i, j] = np.einsum("nhwc,nhwcm->cm", xp[win.tap(i, j)], dyn)
    return df.astype(x.dtype, copy=False)
