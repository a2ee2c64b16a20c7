"""Sliding-window geometry and im2col shared by the convolution and pooling kernels.

Every kernel works in NHWC: NCHW inputs are transposed in and out at the edges (one copy each).
`Window` holds one node's geometry, computed once from its attrs and the input shape with the
same `window_geometry` the shape functions use. `patches` is im2col as a strided view (no copy),
which `im2col_blocks` gathers in cache-sized pieces for the GEMMs; `tap` is the slab of the
padded input seen by one kernel tap, which the backprop kernels scatter-add into (a loop over the
kh*kw taps, vectorised over batch, pixels and channels).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from flowgraph.core import errors
from flowgraph.kernels.cpu.loops import COMPILED_TYPES, compiled
from flowgraph.kernels.sharding import parallel_for
from flowgraph.opdefs.nn_conv import spatial_axes, window_geometry

# Cost units (kernels/sharding.py: about one single-threaded SGEMM multiply-add each) below
# which a convolution or pooling kernel runs on the calling thread. Their blocks do Python work
# between the GIL-free calls (buffers, compiled loops, BLAS calls): the digits CNN's conv2
# (19M multiply-adds, 0.3 ms as Winograd) cut into 4 blocks made its training step 1 ms slower
# at intra_op 2 (3.3 -> 4.4 ms, one process, interleaved), its pooling gradients into 2 too.
INLINE_COST = 30_000_000


@dataclasses.dataclass(frozen=True)
class Window:
    """The geometry of a 2-D window over an NHWC tensor: kernel, strides, dilations, pads,
    output."""

    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    pads: tuple  # ((top, bottom), (left, right))

    def tap(self, i: int, j: int) -> tuple:
        """The index into the padded input of the values that kernel tap (i, j) reads."""
        h0, w0 = i * self.dh, j * self.dw
        return (
            slice(None),
            slice(h0, h0 + self.sh * (self.oh - 1) + 1, self.sh),
            slice(w0, w0 + self.sw * (self.ow - 1) + 1, self.sw),
            slice(None),
        )

    def taps(self):
        return [(i, j) for i in range(self.kh) for j in range(self.kw)]

    def valid_tap(self, i: int, j: int, h: int, w: int) -> tuple | None:
        """(output index, input index) of the output cells whose tap (i, j) reads a real cell of
        the unpadded h x w input, and those cells; None when the tap only reads padding. The
        index computation that lets a kernel skip the padded copy of its input."""
        rows = valid_range(self.oh, self.sh, self.pads[0][0] - i * self.dh, h)
        cols = valid_range(self.ow, self.sw, self.pads[1][0] - j * self.dw, w)
        if rows is None or cols is None:
            return None
        return (slice(None), rows[0], cols[0], slice(None)), (slice(None), rows[1], cols[1])


def valid_range(out: int, stride: int, offset: int, size: int):
    """Outputs o in [lo, hi) with 0 <= o * stride - offset < size, and the input rows they read."""
    lo = max(0, -(-offset // stride))
    hi = min(out, (size - 1 + offset) // stride + 1)
    if hi <= lo:
        return None
    first = lo * stride - offset
    return slice(lo, hi), slice(first, first + (hi - lo - 1) * stride + 1, stride)


def for_images(ctx, n: int, cost_per_image: float, fn) -> None:
    """fn(lo, hi) over blocks of the batch's n images on the device's pool (`parallel_for`), or
    fn(0, n) inline when the whole batch costs less than INLINE_COST."""
    if n * cost_per_image < INLINE_COST:
        fn(0, n)
    else:
        parallel_for(ctx, n, cost_per_image, fn)


def to_nhwc(x: np.ndarray, data_format: str) -> np.ndarray:
    return x if data_format == "NHWC" else x.transpose(0, 2, 3, 1)


def from_nhwc(x: np.ndarray, data_format: str) -> np.ndarray:
    return x if data_format == "NHWC" else np.ascontiguousarray(x.transpose(0, 3, 1, 2))


def nhwc_shape(shape, data_format: str) -> tuple:
    h, w, c = spatial_axes(data_format)
    return (shape[0], shape[h], shape[w], shape[c])


def window(
    attrs: dict, nhwc_in: tuple, kh: int, kw: int, strides_attr="strides", dilated=True
) -> Window:
    """The geometry of one node; an invalid attr or a too-small input is InvalidArgumentError.
    Cached by its arguments: a training loop asks for the same few geometries every step."""
    dilations = attrs.get("dilations", [1, 1, 1, 1]) if dilated else [1, 1, 1, 1]
    return _window(
        attrs["data_format"],
        tuple(attrs[strides_attr]),
        tuple(dilations),
        attrs["padding"],
        tuple(attrs.get("explicit_paddings", []) or [0] * 8),
        tuple(int(d) for d in nhwc_in),
        kh,
        kw,
    )


@functools.lru_cache(maxsize=1024)
def _window(fmt, strides, dilations, padding, explicit, nhwc_in, kh, kw) -> Window:
    h, w, c = spatial_axes(fmt)
    if len(strides) != 4 or len(dilations) != 4:
        raise errors.InvalidArgumentError(None, None, "strides and dilations must have 4 elements")
    if strides[0] != 1 or strides[c] != 1 or dilations[0] != 1 or dilations[c] != 1:
        raise errors.InvalidArgumentError(
            None,
            None,
            "Current implementation does not yet support strides or dilations in the "
            "batch and depth dimensions.",
        )
    try:
        oh, *ph = window_geometry(
            nhwc_in[1], kh, strides[h], dilations[h], padding, explicit[2 * h : 2 * h + 2]
        )
        ow, *pw = window_geometry(
            nhwc_in[2], kw, strides[w], dilations[w], padding, explicit[2 * w : 2 * w + 2]
        )
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, str(e)) from None
    return Window(
        kh, kw, strides[h], strides[w], dilations[h], dilations[w], oh, ow, (tuple(ph), tuple(pw))
    )


@functools.lru_cache(maxsize=1024)
def valid_taps(win: Window, h: int, w: int) -> tuple:
    """(i, j, output index, input index) of every tap (i, j) that reads a real cell of the h x w
    input (`Window.valid_tap`), in row-major tap order; cached like `window`."""
    taps = ((i, j, win.valid_tap(i, j, h, w)) for i, j in win.taps())
    return tuple((i, j, *valid) for i, j, valid in taps if valid is not None)


def pad(x: np.ndarray, win: Window, value=0) -> np.ndarray:
    """The NHWC input with the window's spatial padding (no copy when there is none)."""
    (t, b), (left, r) = win.pads
    if t == b == left == r == 0:
        return x
    n, h, w, c = x.shape
    out = np.full((n, h + t + b, w + left + r, c), value, x.dtype)  # np.pad costs ~50 us more
    out[:, t : t + h, left : left + w] = x
    return out


def unpad(xp: np.ndarray, win: Window, h: int, w: int) -> np.ndarray:
    """The inverse of `pad` for a gradient: the cells that correspond to the real input."""
    (t, _), (left, _) = win.pads
    return xp[:, t : t + h, left : left + w, :]


def padded_zeros(nhwc_in: tuple, win: Window, dtype) -> np.ndarray:
    (t, b), (left, r) = win.pads
    n, h, w, c = nhwc_in
    return np.zeros((n, h + t + b, w + left + r, c), dtype)


def patches(xp: np.ndarray, win: Window) -> np.ndarray:
    """im2col as a read-only strided view of shape (N, OH, OW, KH, KW, C) over the padded input."""
    n, _, _, c = xp.shape
    s0, s1, s2, s3 = xp.strides
    shape = (n, win.oh, win.ow, win.kh, win.kw, c)
    strides = (s0, s1 * win.sh, s2 * win.sw, s1 * win.dh, s2 * win.dw, s3)
    return as_strided(xp, shape, strides, writeable=False)


def im2col_blocks(xp: np.ndarray, win: Window, dtype, budget: int = 2 << 20):
    """Yields (first row, last row + 1, block) over the (N*OH*OW, KH*KW*C) patch matrix of the
    padded NHWC input: consecutive rows gathered (and cast to `dtype`) into one reused buffer of
    about `budget` bytes, whole images when one fits, else output rows of one image.

    Consumers multiply each block before asking for the next. Blocks that stay in cache make
    LeNet's conv2 forward 11.5 -> 7.2 ms and its filter backprop 11.8 -> 7.7 ms against one
    40 MB patch matrix (the GEMMs run faster on cached operands, and the copy is cheaper too).
    """
    n, c = xp.shape[0], xp.shape[3]
    cols = patches(xp, win)
    width = win.kh * win.kw * c
    per_out_row = max(1, win.ow * width * np.dtype(dtype).itemsize)
    oh_rows = max(1, budget // per_out_row)
    if oh_rows >= win.oh:
        step = oh_rows // max(win.oh, 1)
        spans = [(b, min(b + step, n), 0, win.oh) for b in range(0, n, step)]
    else:
        spans = [
            (b, b + 1, r, min(r + oh_rows, win.oh))
            for b in range(n)
            for r in range(0, win.oh, oh_rows)
        ]
    buf = np.empty(
        max(((b1 - b0) * (r1 - r0) * win.ow for b0, b1, r0, r1 in spans), default=0) * width, dtype
    )
    for b0, b1, r0, r1 in spans:
        rows = (b1 - b0) * (r1 - r0) * win.ow
        block = buf[: rows * width].reshape(rows, width)
        np.copyto(
            block.reshape(b1 - b0, r1 - r0, win.ow, win.kh, win.kw, c),
            cols[b0:b1, r0:r1],
            casting="unsafe",
        )
        first = (b0 * win.oh + r0) * win.ow
        yield first, first + rows, block


# Inputs with fewer channels than this are gathered tap-major (`im2col_taps`).
TAP_MAJOR_CHANNELS = 4


def im2col_taps(x: np.ndarray, win: Window, dtype) -> np.ndarray:
    """The transposed patch matrix, (KH*KW*C, N*OH*OW), of the unpadded NHWC input: one row per
    kernel tap and channel, the cells that tap reads for every output, zero where it reads
    padding (an index computation, no padded copy).

    For inputs with few channels (a grayscale or RGB first layer) the row-major patch matrix
    has rows of KH*KW*C values gathered C at a time, which NumPy copies an element at a time;
    here each copy is a whole image plane. LeNet's conv1 (C=1, 5x5): forward 3.7 -> 1.4 ms,
    filter backprop 4.3 -> 1.5 ms (with the GEMM on the transposed operand)."""
    n, h, w, c = x.shape
    cols = np.empty((win.kh, win.kw, c, n, win.oh, win.ow), dtype)
    unit = (win.sh, win.sw, win.dh, win.dw) == (1, 1, 1, 1)
    if unit and x.dtype == dtype and dtype in COMPILED_TYPES:  # row by row (loops.py)
        (top, _), (left, _) = win.pads
        compiled("im2col_taps")(x, win.kh, win.kw, top, left, cols)
        return cols.reshape(win.kh * win.kw * c, n * win.oh * win.ow)
    taps = valid_taps(win, h, w)
    if len(taps) < win.kh * win.kw:
        cols.fill(0)  # some taps read only padding
    for i, j, out_index, in_index in taps:
        dst = cols[i, j].transpose(1, 2, 3, 0)  # (n, oh, ow, c) view of the tap's rows
        region = dst[out_index]
        if region.shape != dst.shape and len(taps) == win.kh * win.kw:
            dst.fill(0)
        np.copyto(region, x[in_index], casting="unsafe")
    return cols.reshape(win.kh * win.kw * c, n * win.oh * win.ow)


def compute_dtype(dtype) -> np.dtype:
    """half has no BLAS: it is computed in float32 and rounded once at the end."""
    return np.dtype(np.float32) if dtype == np.float16 else np.dtype(dtype)


def shape_arg(value, what: str) -> tuple:
    """A 1-D int32 shape input (input_sizes, filter_sizes, orig_input_shape) as a 4-tuple."""
    value = np.asarray(value)
    if value.shape != (4,):
        raise errors.InvalidArgumentError(
            None, None, f"{what} must be a 4-element vector, got shape {value.shape}"
        )
    return tuple(int(v) for v in value)
