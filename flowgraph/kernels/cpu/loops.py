"""Compiled loops (numba) for the kernels NumPy cannot bring near the memory-bandwidth floor.

Each is a plain Python function over arrays, compiled on first use per dtype (about a second,
then cached on disk, as kernels/cpu/libm.py) with the GIL released, so the kernels run them on
blocks of their work in parallel (kernels/sharding.py).

* `max_pool_backward` (MaxPoolGrad, MaxPoolGradGrad) needs, per output cell and channel, the
  input cell holding the first maximum of its window: TensorFlow's CPU rule scans the window's
  real (unpadded) cells in row-major order, the first one claims the output and a later one
  takes it over only when strictly greater (so a NaN in the first cell keeps it, a later NaN is
  ignored, and padding never receives a gradient). NumPy can only express that scan as several
  whole-array passes per window tap (maxima, equality masks, a "still free" mask, masked
  scatters: 3.6 ms for LeNet's first pooling layer); one compiled pass that keeps the running
  maximum of a window's channels in registers and writes the gradient straight into its input
  cells takes 1.3 ms.
* `bias_add` over rows of few channels, where NumPy's broadcasting loop restarts every C
  elements (even against a bias tiled to 1024 columns it runs at 40% of a copy's speed; LeNet's
  conv1 output: 0.61 -> 0.26 ms, a copy takes 0.24).
* `philox4x32`: TensorFlow's counter-based generator, ten rounds per 128-bit block in
  registers; NumPy needs about 80 whole-array passes (the 8192 dropout draws of the digits
  CNN's step: 0.3 ms -> 10 us).
* `gamma`: RandomGamma's rejection sampling, whose every draw depends on the previous ones.
* `fisher_yates`: RandomShuffle's sequential swaps (each depends on the ones before).
* `window_add` adds one kernel tap's GEMM product into its window of the input gradient
  (Conv2DBackpropInput): NumPy's strided add restarts its inner loop every C channels (LeNet's
  conv2, 25 taps into a 64x14x14x32 gradient: the kernel 18.1 -> 16.0 ms on one core).
* `relu` and `relu_grad`: one pass each where NumPy's maximum (NaN-propagating) and its
  multiply by a boolean mask (a casting loop) run at a quarter and a half of a copy's speed
  (LeNet's 6.4 MB conv1 activation: 0.61 -> 0.16 ms and 0.76 -> 0.34 ms).
* `adam`: the Adam update in one pass instead of ten NumPy passes with a temporary (the digits
  CNN's 256x128 layer: 55-75 -> 11 us).
* `winograd_input`, `winograd_output` and `winograd_grad_tiles`: the tile transforms of kernels/cpu/winograd.py, a few
  adds per value over 36 strided streams that NumPy would run as ~70 small whole-array passes.
  Their constants come in the data's dtype (`k`): a Python int would promote float32 to float64
  and keep LLVM from vectorizing the channel loops (LeNet's conv2: 4.2 -> 2.3 ms).
"""

from __future__ import annotations

import threading

import numpy as np

_lock = threading.Lock()
_compiled: dict = {}


def _max_pool_backward(x, g, out, kh, kw, sh, sw, pt, pl, gather):
    """For each output cell (b, i, j) and channel, finds the window's first maximum in x (NHWC,
    unpadded; pads pt, pl before the first row and column) and either adds g[b, i, j] into
    out at that input cell (MaxPoolGrad: out is x-shaped and zeroed) or, with `gather`, sets
    out[b, i, j] to g at that input cell (MaxPoolGradGrad: g is x-shaped)."""
    n, h, w, c = x.shape
    oh, ow = (out.shape[1], out.shape[2]) if gather else (g.shape[1], g.shape[2])
    best = np.empty(c, x.dtype)
    arg = np.empty(c, np.int64)  # r * w + q of the cell holding the maximum so far
    for b in range(n):
        for i in range(oh):
            r_lo, r_hi = max(i * sh - pt, 0), min(i * sh - pt + kh, h)
            for j in range(ow):
                q_lo, q_hi = max(j * sw - pl, 0), min(j * sw - pl + kw, w)
                if r_lo >= r_hi or q_lo >= q_hi:
                    continue  # no real cell: nothing to claim
                first = x[b, r_lo, q_lo]
                for ch in range(c):
                    best[ch] = first[ch]
                    arg[ch] = r_lo * w + q_lo
                for r in range(r_lo, r_hi):
                    for q in range(q_lo, q_hi):
                        cell = x[b, r, q]
                        t = r * w + q
                        for ch in range(c):
                            v = cell[ch]
                            take = best[ch] < v
                            best[ch] = v if take else best[ch]
                            arg[ch] = t if take else arg[ch]
                if gather:
                    for ch in range(c):
                        out[b, i, j, ch] = g[b, arg[ch] // w, arg[ch] % w, ch]
                else:
                    grad = g[b, i, j]
                    for r in range(r_lo, r_hi):
                        for q in range(q_lo, q_hi):
                            cell = out[b, r, q]
                            t = r * w + q
                            for ch in range(c):
                                if arg[ch] == t:
                                    cell[ch] += grad[ch]


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


def _philox4x32(counters, k0, k1, out):
    """Philox4x32-10 of each row of `counters` (uint32 [n, 4]) under the key (k0, k1), as
    kernels/cpu/philox.py writes it in whole-array NumPy operations."""
    m0, m1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    w0, w1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
    low, shift = np.uint64(0xFFFFFFFF), np.uint64(32)
    for i in range(counters.shape[0]):
        c0, c1 = np.uint64(counters[i, 0]), np.uint64(counters[i, 1])
        c2, c3 = np.uint64(counters[i, 2]), np.uint64(counters[i, 3])
        key0, key1 = np.uint64(k0), np.uint64(k1)
        for _ in range(10):
            p0 = c0 * m0
            p1 = c2 * m1
            c0, c1, c2, c3 = (
                (p1 >> shift) ^ c1 ^ key0,
                p1 & low,
                (p0 >> shift) ^ c3 ^ key1,
                p0 & low,
            )
            key0 = (key0 + w0) & low
            key1 = (key1 + w1) & low
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = c0, c1, c2, c3


def _fisher_yates(words, perm):
    """TF's RandomShuffle: for i = 0 .. n-2, swap perm[i] with perm[i + words[i] % (n - i)]
    (one uint32 per swap, in stream order). Each swap depends on the previous ones, so the loop
    cannot be vectorized."""
    n = perm.shape[0]
    for i in range(n - 1):
        j = i + np.int64(words[i] % np.uint32(n - i))
        perm[i], perm[j] = perm[j], perm[i]


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


def _winograd_bt(d0, d1, d2, d3, d4, d5, o0, o1, o2, o3, o4, o5, k):
    """o = B^T d along one axis of a tile: o_i = sum_j B^T[i, j] d_j over six 1-D arrays of
    the same length (B^T is winograd.py's; k = (2, 4, 5) in their dtype). One loop per output:
    a loop that wrote all six would read and write 12 arrays that LLVM cannot prove apart, and
    it vectorizes none of it (tile transforms of the digits CNN's conv2: 62 -> 44 us)."""
    k2, k4, k5 = k[0], k[1], k[2]
    for e in range(o0.size):
        o0[e] = k4 * d0[e] - k5 * d2[e] + d4[e]
    for e in range(o0.size):
        o1[e] = d3[e] + d4[e] - k4 * (d1[e] + d2[e])
    for e in range(o0.size):
        o2[e] = k4 * (d1[e] - d2[e]) - d3[e] + d4[e]
    for e in range(o0.size):
        o3[e] = k2 * (d3[e] - d1[e]) - d2[e] + d4[e]
    for e in range(o0.size):
        o4[e] = k2 * (d1[e] - d3[e]) - d2[e] + d4[e]
    for e in range(o0.size):
        o5[e] = k4 * d1[e] - k5 * d3[e] + d5[e]


def _winograd_input(x, v, step, top, left, tiles_w, k):
    """v[6 * a + b, tile] = (B^T d B)[a, b] for each 6x6 tile d (`step` apart, row-major over
    the images of the NHWC block x) of x padded by `top` rows and `left` columns of zeros
    (negative: cropped), channels innermost; k = (2, 4, 5) in v's dtype (`_winograd_bt`)."""
    n, h, w, c = x.shape
    tiles_h = v.shape[1] // (n * tiles_w)
    wide = step * (tiles_w - 1) + 6
    rows = np.zeros((6, wide * c), v.dtype)  # one tile row's 6 input rows, zero-padded
    t = np.empty((6, wide * c), v.dtype)
    first = max(-left, 0)  # the first input column read
    lo = (first + left) * c
    width = max(min(w - first, wide - first - left), 0)
    tile = 0
    for b in range(n):
        for ty in range(tiles_h):
            for a in range(6):
                r = step * ty + a - top
                if 0 <= r < h:
                    for q in range(width):
                        for ch in range(c):
                            rows[a, lo + q * c + ch] = x[b, r, first + q, ch]
                else:
                    rows[a, lo : lo + width * c] = 0
            # B^T along the rows: t = B^T rows, a whole tile row's width at a time
            _winograd_bt(rows[0], rows[1], rows[2], rows[3], rows[4], rows[5],
                         t[0], t[1], t[2], t[3], t[4], t[5], k)  # fmt: skip
            for tx in range(tiles_w):  # and along the columns of each tile
                for a in range(6):
                    d = t[a, step * tx * c : (step * tx + 6) * c]
                    _winograd_bt(d[:c], d[c : 2 * c], d[2 * c : 3 * c], d[3 * c : 4 * c],
                                 d[4 * c : 5 * c], d[5 * c :], v[6 * a, tile], v[6 * a + 1, tile],
                                 v[6 * a + 2, tile], v[6 * a + 3, tile], v[6 * a + 4, tile],
                                 v[6 * a + 5, tile], k)  # fmt: skip
                tile += 1


def _winograd_output(m, y, tiles_w, at):
    """y[b, s * ty + i, s * tx + j] = (A^T M A)[i, j] for the tiles of m (as `winograd_input`
    orders them, s = A^T's rows), the outputs past y's edge dropped; A^T (s x 6) in m's dtype.
    Each channel loop is six multiply-adds with coefficients hoisted out of it, which LLVM
    vectorizes (skipping A^T's zeros would need branches or memory passes instead)."""
    n, oh, ow, c = y.shape
    step = at.shape[0]
    tiles_h = m.shape[1] // (n * tiles_w)
    s = np.empty((step, 6, c), m.dtype)
    tile = 0
    for b in range(n):
        for ty in range(tiles_h):
            for tx in range(tiles_w):
                for i in range(step):  # A^T along the rows
                    a0, a1, a2, a3, a4, a5 = (
                        at[i, 0],
                        at[i, 1],
                        at[i, 2],
                        at[i, 3],
                        at[i, 4],
                        at[i, 5],
                    )
                    for j in range(6):
                        r0, r1, r2 = m[j, tile], m[6 + j, tile], m[12 + j, tile]
                        r3, r4, r5 = m[18 + j, tile], m[24 + j, tile], m[30 + j, tile]
                        sij = s[i, j]
                        for ch in range(c):
                            sij[ch] = (
                                a0 * r0[ch]
                                + a1 * r1[ch]
                                + a2 * r2[ch]
                                + a3 * r3[ch]
                                + a4 * r4[ch]
                                + a5 * r5[ch]
                            )
                for i in range(min(step, oh - step * ty)):  # and along the columns
                    si = s[i]
                    for q in range(min(step, ow - step * tx)):
                        a0, a1, a2, a3, a4, a5 = (
                            at[q, 0],
                            at[q, 1],
                            at[q, 2],
                            at[q, 3],
                            at[q, 4],
                            at[q, 5],
                        )
                        out = y[b, step * ty + i, step * tx + q]
                        for ch in range(c):
                            out[ch] = (
                                a0 * si[0, ch]
                                + a1 * si[1, ch]
                                + a2 * si[2, ch]
                                + a3 * si[3, ch]
                                + a4 * si[4, ch]
                                + a5 * si[5, ch]
                            )
                tile += 1


def _winograd_grad_tiles(dy, u, tiles_w, g):
    """u[6 * a + b, tile] = (G e G^T)[a, b] for each s x s tile e of the NHWC block dy (tiles as
    `winograd_input` orders them, zeros past dy's edge) with the 6 x s matrix g (winograd.py's
    filter-gradient G, in u's dtype; s is 2 or 4). Tiles are read as 4 x 4 (zeros beyond s), so
    that every channel loop is four multiply-adds with hoisted coefficients, as in
    `winograd_output`."""
    n, oh, ow, c = dy.shape
    step = g.shape[1]
    tiles_h = u.shape[1] // (n * tiles_w)
    g4 = np.zeros((6, 4), u.dtype)
    g4[:, :step] = g
    e = np.zeros((4, 4, c), u.dtype)
    s = np.empty((6, 4, c), u.dtype)
    tile = 0
    for b in range(n):
        for ty in range(tiles_h):
            for tx in range(tiles_w):
                for i in range(step):
                    for j in range(step):
                        r, q = step * ty + i, step * tx + j
                        inside = r < oh and q < ow
                        for ch in range(c):
                            e[i, j, ch] = dy[b, r, q, ch] if inside else 0
                for a in range(6):  # G along the rows
                    g0, g1, g2, g3 = g4[a, 0], g4[a, 1], g4[a, 2], g4[a, 3]
                    for j in range(step):
                        saj, e0, e1, e2, e3 = s[a, j], e[0, j], e[1, j], e[2, j], e[3, j]
                        if step == 2:  # half the loads and multiply-adds (5x5 filters)
                            for ch in range(c):
                                saj[ch] = g0 * e0[ch] + g1 * e1[ch]
                        else:
                            for ch in range(c):
                                saj[ch] = g0 * e0[ch] + g1 * e1[ch] + g2 * e2[ch] + g3 * e3[ch]
                for col in range(6):  # and along the columns
                    g0, g1, g2, g3 = g4[col, 0], g4[col, 1], g4[col, 2], g4[col, 3]
                    for a in range(6):
                        out, sa = u[6 * a + col, tile], s[a]
                        if step == 2:
                            for ch in range(c):
                                out[ch] = g0 * sa[0, ch] + g1 * sa[1, ch]
                        else:
                            for ch in range(c):
                                out[ch] = (
                                    g0 * sa[0, ch]
                                    + g1 * sa[1, ch]
                                    + g2 * sa[2, ch]
                                    + g3 * sa[3, ch]
                                )
                tile += 1


_FUNCTIONS = {
    "gamma": _gamma,
    "fisher_yates": _fisher_yates,
    "philox4x32": _philox4x32,
    "bias_add": _bias_add,
    "max_pool_backward": _max_pool_backward,
    "relu": _relu,
    "relu_grad": _relu_grad,
    "window_add": _window_add,
    "adam": _adam,
    "winograd_input": _winograd_input,
    "winograd_grad_tiles": _winograd_grad_tiles,
    "winograd_output": _winograd_output,
}

# Helpers the loops above call: compiled (and inlined into their callers) before any of them.
_HELPERS = {"_winograd_bt": _winograd_bt}

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

                for helper, py_fn in _HELPERS.items():
                    if globals()[helper] is py_fn:
                        globals()[helper] = numba.njit(inline="always", cache=True)(py_fn)
                options = _OPTIONS.get(name, {})
                fn = numba.njit(nogil=True, cache=True, **options)(_FUNCTIONS[name])
                _compiled[name] = fn
    return fn
