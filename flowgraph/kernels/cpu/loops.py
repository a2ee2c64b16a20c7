"""Compiled loops (numba) for the kernels NumPy cannot bring near the memory-bandwidth floor.

Each is a plain Python function over arrays, compiled on first use per dtype (about a second,
then cached on disk, as kernels/cpu/libm.py) with the GIL released, so the kernels run them on
blocks of their work in parallel (kernels/sharding.py).

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
* `bias_add` over rows of few channels, where NumPy's broadcasting loop restarts every C
  elements (even against a bias tiled to 1024 columns it runs at 40% of a copy's speed; LeNet's
  conv1 output: 0.61 -> 0.26 ms, a copy takes 0.24).
* `bias_relu`: BiasAdd and Relu in place on the rows a convolution's GEMM has just written
  (_FusedConv2D), one pass while they are in cache instead of two kernels' passes over the
  whole output.
* `gamma`: RandomGamma's rejection sampling, whose every draw depends on the previous ones.
* `fisher_yates`: RandomShuffle's sequential swaps (each depends on the ones before).
* `shuffle_draw`: a RandomShuffleQueue's dequeue_many, whose every draw moves the last element
  into the slot it empties (64 draws in Python: 56 us; compiled, a few).
* `shuffle_replay`: a tf.data shuffle buffer's moves for a run of draws (dataset_shuffle.py),
  each of which depends on the ones before (64 draws in Python: ~20 us; compiled, ~1).
* `window_add` adds one kernel tap's GEMM product into its window of the input gradient
  (Conv2DBackpropInput): NumPy's strided add restarts its inner loop every C channels (LeNet's
  conv2, 25 taps into a 64x14x14x32 gradient: the kernel 18.1 -> 16.0 ms on one core).
* `relu` and `relu_grad`: one pass each where NumPy's maximum (NaN-propagating) and its
  multiply by a boolean mask (a casting loop) run at a quarter and a half of a copy's speed
  (LeNet's 6.4 MB conv1 activation: 0.61 -> 0.16 ms and 0.76 -> 0.34 ms).
* `im2col_taps`: the tap-major patch matrix of a convolution with few input channels, row by
  row, where NumPy's copy of each tap's strided window restarts every few elements (the
  digits CNN's conv1, 64x8x8x1 by 3x3: 34 -> 12 us).
* `sparse_xent`: SparseSoftmaxCrossEntropyWithLogits row by row, where NumPy takes about
  twelve small whole-array calls (the digits CNN's 64x10 logits: 23 -> 3 us).
* `adam`: the Adam update in one pass instead of ten NumPy passes with a temporary (the digits
  CNN's 256x128 layer: 55-75 -> 11 us).

The tile transforms of kernels/cpu/winograd.py are in winograd_loops.py, TensorFlow's Philox
generator in philox_loops.py; both are compiled here too.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from flowgraph.kernels.cpu import philox_loops, winograd_loops

# The float types the loops are compiled for (numba has no half arithmetic).
COMPILED_TYPES = (np.dtype(np.float32), np.dtype(np.float64))

_lock = threading.Lock()
_compiled: dict = {}


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


def _relu(x, out):
    """out = max(x, 0) as np.maximum: NaN and -0.0 are kept."""
    for i in range(x.size):
        v = x[i]
        out[i] = 0 if v < 0 else v  # noqa: FURB136 - max() is not NaN-propagating


def _relu_grad(dy, x, out):
    """out = dy * (x > 0), TF's formula: a NaN gradient stays NaN where the unit is off."""
    for i in range(x.size):
        out[i] = dy[i] * (x[i] > 0)


def _adam(var, m, v, g, coefficients, nesterov):
    """TF's Adam update in one pass over flat arrays, in the arrays' dtype and in the order of
    training.adam's NumPy form: m += (g - m) * (1 - beta1), v += (g * g - v) * (1 - beta2),
    var -= alpha * m / (sqrt(v) + epsilon) (Nesterov: g * (1 - beta1) + beta1 * m for m), with
    alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power). coefficients = (lr, beta1_power,
    beta2_power, beta1, beta2, epsilon), in var's dtype; `one` keeps the arithmetic in it (a
    Python 1 would make it float64)."""
    one = coefficients.dtype.type(1)
    lr, beta1_power, beta2_power = coefficients[0], coefficients[1], coefficients[2]
    beta1, beta2, eps = coefficients[3], coefficients[4], coefficients[5]
    alpha = lr * np.sqrt(one - beta2_power) / (one - beta1_power)
    keep1, keep2 = one - beta1, one - beta2
    for i in range(var.size):
        gi = g[i]
        mi = m[i] + (gi - m[i]) * keep1
        vi = v[i] + (gi * gi - v[i]) * keep2
        m[i] = mi
        v[i] = vi
        num = gi * keep1 + beta1 * mi if nesterov else mi
        var[i] = var[i] - alpha * (num / (np.sqrt(vi) + eps))


def _sparse_xent(logits, labels, loss, backprop):
    """Per row r: loss[r] = log(sum(exp(z))) - z[labels[r]] and backprop[r] = softmax(z) minus
    the label's one-hot, with z = logits[r] - max(logits[r]) (TF's formulas); the sum in
    float64. Returns the first row whose label is out of range (nothing written), or -1."""
    classes = logits.shape[1]
    for r in range(labels.size):
        if labels[r] < 0 or labels[r] >= classes:
            return r
    for r in range(logits.shape[0]):
        row, grad = logits[r], backprop[r]
        top = row[0]
        for j in range(1, classes):
            top = max(top, row[j])
        total = 0.0
        for j in range(classes):
            e = np.exp(row[j] - top)
            grad[j] = e
            total += e
        label = labels[r]
        loss[r] = np.log(total) - (row[label] - top)
        for j in range(classes):
            grad[j] = grad[j] / total
        grad[label] -= 1
    return -1


def _im2col_taps(x, kh, kw, top, left, cols):
    """cols[i, j, ch, b, r, q] = x[b, r + i - top, q + j - left, ch], zero where that cell is
    padding: windows.im2col_taps for unit strides and dilations, one output row at a time.
    (Strides and dilations as arguments made it 2-3x slower, with the same loops: they stay
    NumPy's.)"""
    n, h, w, c = x.shape
    oh, ow = cols.shape[4], cols.shape[5]
    for i in range(kh):
        for j in range(kw):
            for ch in range(c):
                tap = cols[i, j, ch]
                for b in range(n):
                    for r in range(oh):
                        rr = r + i - top
                        row = tap[b, r]
                        if rr < 0 or rr >= h:
                            for q in range(ow):
                                row[q] = 0
                            continue
                        src = x[b, rr]
                        for q in range(ow):
                            qq = q + j - left
                            row[q] = src[qq, ch] if 0 <= qq < w else 0


def _window_add(dst, src, o_rows, o_cols, i_row, i_col, row_step, col_step):
    """dst[b, i_row + a * row_step, i_col + q * col_step] += src[b, o_rows[0] + a,
    o_cols[0] + q] over the output window rows o_rows and columns o_cols (NHWC, channels
    innermost): one kernel tap's share of Conv2DBackpropInput."""
    n, c = src.shape[0], src.shape[3]
    for b in range(n):
        for a in range(o_rows[1] - o_rows[0]):
            r = i_row + a * row_step
            for q in range(o_cols[1] - o_cols[0]):
                d = dst[b, r, i_col + q * col_step]
                s = src[b, o_rows[0] + a, o_cols[0] + q]
                for ch in range(c):
                    d[ch] += s[ch]


def _bias_add(value, bias, out):
    """out[r, c] = value[r, c] + bias[c] over rows of channels."""
    rows, channels = value.shape
    for r in range(rows):
        for c in range(channels):
            out[r, c] = value[r, c] + bias[c]


def _bias_relu(rows, bias, relu):
    """rows[r, c] += bias[c], then, when `relu`, `_relu` of it, in place: BiasAdd and Relu on
    a block of a convolution's output rows in one pass (_FusedConv2D)."""
    zero = rows.dtype.type(0)
    n, c = rows.shape
    for r in range(n):
        row = rows[r]
        if relu:
            for ch in range(c):
                v = row[ch] + bias[ch]
                row[ch] = zero if v < 0 else v
        else:
            for ch in range(c):
                row[ch] = row[ch] + bias[ch]


def _fisher_yates(words, perm):
    """TF's RandomShuffle: for i = 0 .. n-2, swap perm[i] with perm[i + words[i] % (n - i)]
    (one uint32 per swap, in stream order). Each swap depends on the previous ones, so the loop
    cannot be vectorized."""
    n = perm.shape[0]
    for i in range(n - 1):
        j = i + np.int64(words[i] % np.uint32(n - i))
        perm[i], perm[j] = perm[j], perm[i]


def _shuffle_draw(uniforms, n, perm, ids, dst, src):
    """Draws len(uniforms) elements of slots 0..n-1 one after another: draw t takes slot
    j = floor(u * live) of the `live` = n - t left and moves the last live slot's element into
    j. ids[t] gets the original slot of draw t's element; (dst[i], src[i]) for i < the returned
    count are the moves that fill the holes below n - len(uniforms). `perm` (at least n long)
    maps a slot to the original slot of its element: the identity on entry and on return."""
    k = uniforms.shape[0]
    for t in range(k):
        live = n - t
        j = min(np.int64(uniforms[t] * live), live - 1)
        ids[t] = perm[j]
        perm[j] = perm[live - 1]
        dst[t] = j
    final = n - k
    m = 0
    for t in range(k):  # writes dst[m] only after reading dst[t], t >= m
        j = dst[t]
        p = perm[j]
        if p != j:
            perm[j] = j
            if j < final:
                dst[m] = j
                src[m] = p
                m += 1
    return m


def _shuffle_replay(length, size, fed, draws, picked, kept):
    """A tf.data shuffle buffer's get_next, draw after draw, on element numbers: 0..length-1
    are the buffer's elements, length..length+fed-1 the input's next ones. Before each draw
    the buffer is refilled up to `size` from the input; draw t takes slot draws[t] into
    picked[t] and moves the last slot's element into it. Input elements left over are
    appended. kept[:m] is then the buffer in order; returns m."""
    m = length
    for i in range(length):
        kept[i] = i
    nxt = length
    end = length + fed
    for t in range(draws.shape[0]):
        while m < size and nxt < end:
            kept[m] = nxt
            m += 1
            nxt += 1
        j = draws[t]
        picked[t] = kept[j]
        kept[j] = kept[m - 1]
        m -= 1
    while nxt < end:
        kept[m] = nxt
        m += 1
        nxt += 1
    return m


def _gamma(alphas, normals, uniforms, out):
    """TF's RandomGamma per output o (Marsaglia-Tsang; an exponential for alpha 1): draws come
    from o's own blocks in order, each block read as two normals or as two uniforms (taken
    second first, as TF pops its result buffers) by whichever draw needs a new block. Returns
    the first output that ran out of precomputed blocks, or -1."""
    blocks = normals.shape[1]
    for o in range(alphas.shape[0]):
        alpha = alphas[o]
        b = 0
        n_left = 0
        u_left = 0
        n_block = 0
        u_block = 0
        if alpha == 1.0:
            if b >= blocks:
                return o
            out[o] = -np.log1p(-uniforms[o, b, 1])
            continue
        small = alpha < 1.0
        d = alpha + (2.0 / 3.0 if small else -1.0 / 3.0)
        c = 1.0 / 3.0 / np.sqrt(d)
        while True:
            if n_left == 0:
                if b >= blocks:
                    return o
                n_block = b
                b += 1
                n_left = 2
            n_left -= 1
            x = normals[o, n_block, n_left]
            v = 1.0 + c * x
            if v <= 0.0:
                continue
            v = v * v * v
            if u_left == 0:
                if b >= blocks:
                    return o
                u_block = b
                b += 1
                u_left = 2
            u_left -= 1
            u = uniforms[o, u_block, u_left]
            if (u < 1.0 - 0.0331 * (x * x) * (x * x)) or (
                np.log(u) < 0.5 * x * x + d * (1.0 - v + np.log(v))
            ):
                res = d * v
                if small:
                    if u_left == 0:
                        if b >= blocks:
                            return o
                        u_block = b
                        b += 1
                        u_left = 2
                    u_left -= 1
                    res *= uniforms[o, u_block, u_left] ** (1.0 / alpha)
                out[o] = res
                break
    return -1


_FUNCTIONS = {
    "gamma": _gamma,
    "fisher_yates": _fisher_yates,
    "shuffle_draw": _shuffle_draw,
    "shuffle_replay": _shuffle_replay,
    "bias_add": _bias_add,
    "bias_relu": _bias_relu,
    "max_pool": _max_pool,
    "max_pool_backward": _max_pool_backward,
    "max_pool_2x2": _max_pool_2x2,
    "max_pool_backward_2x2": _max_pool_backward_2x2,
    "relu": _relu,
    "relu_grad": _relu_grad,
    "window_add": _window_add,
    "im2col_taps": _im2col_taps,
    "sparse_xent": _sparse_xent,
    "adam": _adam,
    **winograd_loops.FUNCTIONS,
    **philox_loops.FUNCTIONS,
}

# Helpers the loops call, by module: compiled (and inlined into their callers) before any loop.
_HELPERS = [
    (sys.modules[__name__], ["_max4", "_first_max4", "_relu_keep"]),
    (philox_loops, philox_loops.HELPERS),
    (winograd_loops, winograd_loops.HELPERS),
]

# NumPy's error model: a division by zero gives inf or NaN as in NumPy instead of a Python
# exception, whose per-element check keeps LLVM from vectorizing (Adam: 77 -> 11 us).
_OPTIONS = {"adam": {"error_model": "numpy"}}


def compiled(name: str):
    """The compiled loop `name` (numba is a dependency of flowgraph)."""
    fn = _compiled.get(name)
    if fn is None:
        with _lock:
            fn = _compiled.get(name)
            if fn is None:
                import numba

                for module, names in _HELPERS:
                    for helper in names:
                        py_fn = getattr(module, helper)
                        if not hasattr(py_fn, "py_func"):  # not compiled yet
                            jit = numba.njit(inline="always", cache=True)
                            setattr(module, helper, jit(py_fn))
                options = _OPTIONS.get(name, {})
                fn = numba.njit(nogil=True, cache=True, **options)(_FUNCTIONS[name])
                _compiled[name] = fn
    return fn
