"""Max pooling's compiled loops (numba; kernels/cpu/loops.py compiles them), for float32 and
float64 (kernels/cpu/pooling.py runs half in float32).

* `max_pool`: each window's maximum, one window at a time, where NumPy makes one strided pass
  per kernel tap whose inner loops run C elements (the digits CNN's 64x8x8x32: 39 -> 33 us,
  LeNet's 64x28x28x32: 568 -> 459 us).
* `max_pool_backward` (MaxPoolGrad, MaxPoolGradGrad) needs, per output cell and channel, the
  input cell holding the first maximum of its window: TensorFlow's CPU rule scans the window's
  real (unpadded) cells in row-major order, the first one claims the output and a later one
  takes it over only when strictly greater (so a NaN in the first cell keeps it, a later NaN is
  ignored, and padding never receives a gradient). NumPy can only express that scan as several
  whole-array passes per window tap (maxima, equality masks, a "still free" mask, masked
  scatters: 3.6 ms for LeNet's first pooling layer); one compiled pass that keeps the running
  maximum of a window's channels in registers and writes the gradient straight into its input
  cells takes 1.3 ms. Windows that do not overlap (the usual 2x2/2) write every cell of the
  window instead of adding into a zeroed gradient (the digits CNN's 64x8x8x32: 73 -> 58 us).
* `max_pool_2x2` and `max_pool_backward_2x2`: the same for the usual 2x2 windows of stride 2
  when they tile the input, the four cells of a window held in registers so that the channel
  loop vectorizes (the general loops keep per-channel maxima in memory and do not).
* `max_pool_2x2_mask` and `max_pool_backward_2x2_mask`: the forward pass keeps, per output
  value, which cell of its window takes the gradient and whether that cell is > 0 (ReluGrad's
  mask of it), one byte beside the maximum it computes anyway, so that the gradient writes its
  cells from that byte and the incoming gradient alone, without reading x again (TF's oneDNN
  keeps such a workspace too). The forward pass costs a little more, the gradient much less, as
  x is long out of cache by then (LeNet's 64x28x28x32 with caches flushed between the passes:
  forward + gradient 1.32 -> 1.05 ms; the digits CNN's 64x8x8x32: 101 -> 67 us).
"""

from __future__ import annotations

import numpy as np


def _max_pool(x, out, kh, kw, sh, sw, pt, pl, lowest):
    """out[b, i, j] = the maximum of each window's real cells (NHWC, pads pt, pl before), as
    np.maximum over them in row-major order (a NaN wins); `lowest` for a window of padding."""
    n, h, w, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for b in range(n):
        for i in range(oh):
            r_lo, r_hi = max(i * sh - pt, 0), min(i * sh - pt + kh, h)
            for j in range(ow):
                q_lo, q_hi = max(j * sw - pl, 0), min(j * sw - pl + kw, w)
                o = out[b, i, j]
                if r_lo >= r_hi or q_lo >= q_hi:
                    o[:] = lowest
                    continue
                first = x[b, r_lo, q_lo]
                for ch in range(c):
                    o[ch] = first[ch]
                for r in range(r_lo, r_hi):
                    for q in range(q_lo, q_hi):
                        cell = x[b, r, q]
                        for ch in range(c):
                            v, m = cell[ch], o[ch]
                            o[ch] = v if v > m or np.isnan(v) else m


def _max_pool_backward(x, g, out, kh, kw, sh, sw, pt, pl, mode, relu):
    """For each output cell (b, i, j) and channel, finds the window's first maximum in x (NHWC,
    unpadded; pads pt, pl before the first row and column), then by `mode`:
    0 (MaxPoolGrad) adds g[b, i, j] into out at that input cell (out is x-shaped and zeroed);
    1 (MaxPoolGrad, windows that do not overlap) sets each cell of the window to g[b, i, j] or
    0, so out needs no zeroing where windows cover it and no read-modify-write; with `relu`,
    times ReluGrad's mask (x > 0) of the cell (`_relu_keep`);
    2 (MaxPoolGradGrad) sets out[b, i, j] to g at that input cell (g is x-shaped).
    Positions are int32, as wide as float32 values, so that the channel loops vectorize."""
    n, h, w, c = x.shape
    zero, one, through = out.dtype.type(0), out.dtype.type(1), not relu
    oh, ow = (out.shape[1], out.shape[2]) if mode == 2 else (g.shape[1], g.shape[2])
    best = np.empty(c, x.dtype)
    arg = np.empty(c, np.int32)  # the row-major position in the window of the maximum so far
    for b in range(n):
        for i in range(oh):
            r_lo, r_hi = max(i * sh - pt, 0), min(i * sh - pt + kh, h)
            for j in range(ow):
                q_lo, q_hi = max(j * sw - pl, 0), min(j * sw - pl + kw, w)
                if r_lo >= r_hi or q_lo >= q_hi:
                    continue  # no real cell: nothing to claim
                width = q_hi - q_lo
                first = x[b, r_lo, q_lo]
                for ch in range(c):
                    best[ch] = first[ch]
                    arg[ch] = 0
                for r in range(r_lo, r_hi):
                    for q in range(q_lo, q_hi):
                        cell = x[b, r, q]
                        t = np.int32((r - r_lo) * width + q - q_lo)
                        for ch in range(c):
                            v = cell[ch]
                            take = best[ch] < v
                            best[ch] = v if take else best[ch]
                            arg[ch] = t if take else arg[ch]
                if mode == 2:
                    for ch in range(c):
                        a = arg[ch]
                        out[b, i, j, ch] = g[b, r_lo + a // width, q_lo + a % width, ch]
                    continue
                grad = g[b, i, j]
                for r in range(r_lo, r_hi):
                    for q in range(q_lo, q_hi):
                        cell = out[b, r, q]
                        t = np.int32((r - r_lo) * width + q - q_lo)
                        if mode == 1:
                            src = x[b, r, q]
                            for ch in range(c):
                                v = grad[ch] if arg[ch] == t else zero
                                cell[ch] = v * _relu_keep(src[ch], zero, one, through)
                        else:
                            for ch in range(c):
                                if arg[ch] == t:
                                    cell[ch] += grad[ch]


def _relu_keep(x, zero, one, through):
    """ReluGrad's mask of the cell x, as a factor: 1 where x > 0 or (`through`) no ReLU follows,
    else 0. Multiplying by it gives ReluGrad's bits (dy * (x > 0): a NaN gradient stays NaN, a
    negative one becomes -0) and, by 1, leaves a value's bits as they were."""
    return one if (x > zero) | through else zero


def _max4(v0, v1, v2, v3):
    """np.maximum of four values in order (a NaN wins): `_max_pool`'s rule, in registers."""
    m = v1 if v1 > v0 or np.isnan(v1) else v0
    m = v2 if v2 > m or np.isnan(v2) else m
    return v3 if v3 > m or np.isnan(v3) else m


def _first_max4(v0, v1, v2, v3):
    """Which of four values in row-major order is the first maximum under
    `_max_pool_backward`'s rule, as four exclusive masks (booleans combined with & and ~, not
    `and`, whose branches keep LLVM from vectorizing the channel loop)."""
    t1 = v1 > v0
    m = v1 if t1 else v0
    t2 = v2 > m
    m = v2 if t2 else m
    t3 = v3 > m
    n3 = ~t3
    n2 = ~t2 & n3
    return ~t1 & n2, t1 & n2, t2 & n3, t3


def _max_pool_2x2(x, out):
    """`_max_pool` for 2x2 windows of stride 2 that tile x exactly (C-contiguous NHWC): each
    output row from two input rows, the channel loop vectorized (LeNet's 64x28x28x32:
    480 -> 175 us, as fast as a copy of the input)."""
    n, c = x.shape[0], x.shape[3]
    oh, ow = out.shape[1], out.shape[2]
    for b in range(n):
        for i in range(oh):
            x0, x1 = x[b, 2 * i].reshape(-1), x[b, 2 * i + 1].reshape(-1)
            o = out[b, i].reshape(-1)
            for j in range(ow):
                p = 2 * j * c
                for ch in range(c):
                    o[j * c + ch] = _max4(x0[p + ch], x0[p + c + ch], x1[p + ch], x1[p + c + ch])


def _max_pool_backward_2x2(x, g, out, relu):
    """`_max_pool_backward` in mode 1 for 2x2 windows of stride 2 that tile x exactly
    (C-contiguous NHWC): each window's four cells get g or 0 from `_first_max4`'s masks (with
    `relu`, times `_relu_keep`), the channel loop vectorized (LeNet's 64x28x28x32:
    1.05 -> 0.55-0.7 ms; a copy takes 0.2)."""
    n, c = x.shape[0], x.shape[3]
    oh, ow = g.shape[1], g.shape[2]
    zero, one, through = g.dtype.type(0), g.dtype.type(1), not relu
    for b in range(n):
        for i in range(oh):
            x0, x1 = x[b, 2 * i].reshape(-1), x[b, 2 * i + 1].reshape(-1)
            o0, o1 = out[b, 2 * i].reshape(-1), out[b, 2 * i + 1].reshape(-1)
            grad = g[b, i].reshape(-1)
            for j in range(ow):
                p = 2 * j * c
                for ch in range(c):
                    a0, a1, a2, a3 = x0[p + ch], x0[p + c + ch], x1[p + ch], x1[p + c + ch]
                    s0, s1, s2, s3 = _first_max4(a0, a1, a2, a3)
                    v = grad[j * c + ch]
                    o0[p + ch] = (v if s0 else zero) * _relu_keep(a0, zero, one, through)
                    o0[p + c + ch] = (v if s1 else zero) * _relu_keep(a1, zero, one, through)
                    o1[p + ch] = (v if s2 else zero) * _relu_keep(a2, zero, one, through)
                    o1[p + c + ch] = (v if s3 else zero) * _relu_keep(a3, zero, one, through)


def _first_cell4(v0, v1, v2, v3):
    """`_first_max4`'s winner as (its position 0..3, its value), in selects (no branches)."""
    t1 = v1 > v0
    m = v1 if t1 else v0
    k = np.uint8(1) if t1 else np.uint8(0)
    t2 = v2 > m
    m = v2 if t2 else m
    k = np.uint8(2) if t2 else k
    t3 = v3 > m
    return (np.uint8(3) if t3 else k), (v3 if t3 else m)


def _max_pool_2x2_mask(x, out, mask):
    """`_max_pool_2x2`, and mask[b, i, j, ch] = the position (bits 0-1, row-major) of the cell
    of the window that `_max_pool_backward_2x2` gives the gradient, plus 4 when that cell is
    > 0 (bit 2: ReluGrad's mask of it)."""
    n, c = x.shape[0], x.shape[3]
    oh, ow = out.shape[1], out.shape[2]
    zero = x.dtype.type(0)
    for b in range(n):
        for i in range(oh):
            x0, x1 = x[b, 2 * i].reshape(-1), x[b, 2 * i + 1].reshape(-1)
            o, m = out[b, i].reshape(-1), mask[b, i].reshape(-1)
            for j in range(ow):
                p = 2 * j * c
                for ch in range(c):
                    v0, v1, v2, v3 = x0[p + ch], x0[p + c + ch], x1[p + ch], x1[p + c + ch]
                    o[j * c + ch] = _max4(v0, v1, v2, v3)
                    k, top = _first_cell4(v0, v1, v2, v3)
                    m[j * c + ch] = k | (np.uint8(4) if top > zero else np.uint8(0))


def _max_pool_backward_2x2_mask(mask, g, out, relu):
    """`_max_pool_backward_2x2` from `_max_pool_2x2_mask`'s bytes instead of x: the cell the
    byte names gets g, the others 0, each times `_relu_keep`'s factor (with `relu`, the byte's
    bit 2): the same bits as the loop that reads x."""
    n, c = g.shape[0], g.shape[3]
    oh, ow = g.shape[1], g.shape[2]
    zero, one, through = g.dtype.type(0), g.dtype.type(1), not relu
    for b in range(n):
        for i in range(oh):
            o0, o1 = out[b, 2 * i].reshape(-1), out[b, 2 * i + 1].reshape(-1)
            grad, m = g[b, i].reshape(-1), mask[b, i].reshape(-1)
            for j in range(ow):
                p = 2 * j * c
                for ch in range(c):
                    byte = m[j * c + ch]
                    cell = byte & np.uint8(3)
                    v = grad[j * c + ch] * (one if (byte > np.uint8(3)) | through else zero)
                    o0[p + ch] = v if cell == 0 else zero
                    o0[p + c + ch] = v if cell == 1 else zero
                    o1[p + ch] = v if cell == 2 else zero
                    o1[p + c + ch] = v if cell == 3 else zero


FUNCTIONS = {
    "max_pool": _max_pool,
    "max_pool_backward": _max_pool_backward,
    "max_pool_2x2": _max_pool_2x2,
    "max_pool_backward_2x2": _max_pool_backward_2x2,
    "max_pool_2x2_mask": _max_pool_2x2_mask,
    "max_pool_backward_2x2_mask": _max_pool_backward_2x2_mask,
}
# Compiled (and inlined into their callers) before the loops.
HELPERS = ["_relu_keep", "_max4", "_first_max4", "_first_cell4"]
