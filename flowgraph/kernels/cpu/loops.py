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


_FUNCTIONS = {
    "gamma": _gamma,
    "fisher_yates": _fisher_yates,
    "philox4x32": _philox4x32,
    "bias_add": _bias_add,
    "max_pool_backward": _max_pool_backward,
    "relu": _relu,
    "relu_grad": _relu_grad,
    "window_add": _window_add,
}


def compiled(name: str):
    """The compiled loop `name` (numba is a dependency of flowgraph)."""
    fn = _compiled.get(name)
    if fn is None:
        with _lock:
            fn = _compiled.get(name)
            if fn is None:
                import numba

                fn = _compiled[name] = numba.njit(nogil=True, cache=True)(_FUNCTIONS[name])
    return fn
