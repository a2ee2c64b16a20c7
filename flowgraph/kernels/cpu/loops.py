"""Compiled loops (numba) for the kernels NumPy cannot bring near the memory-bandwidth floor.

Each is a plain Python function over arrays, compiled on first use per dtype (about a second,
then cached on disk, as kernels/cpu/libm.py) with the GIL released, so the kernels run them on
blocks of their work in parallel (kernels/sharding.py).

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
* `shuffle_take`: shuffle_draw, then the drawn elements gathered into the output batch and the
  holes filled, for every component in the same call, on the components' bytes (the two
  NumPy fancy-index operations per component it replaces: ~8 us of a dequeue_many's ~23).
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
* `xent`: SoftmaxCrossEntropyWithLogits likewise (the softmax-regression tutorial's 100x10:
  about ten NumPy calls, 46 us in its step).
* `adam`: the Adam update in one pass instead of ten NumPy passes with a temporary (the digits
  CNN's 256x128 layer: 55-75 -> 11 us).

The tile transforms of kernels/cpu/winograd.py are in winograd_loops.py, TensorFlow's Philox
generator in philox_loops.py and max pooling's loops in pooling_loops.py; all are compiled
here too.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

from flowgraph.kernels.cpu import philox_loops, pooling_loops, winograd_loops

# The float types the loops are compiled for (numba has no half arithmetic).
COMPILED_TYPES = (np.dtype(np.float32), np.dtype(np.float64))

_lock = threading.Lock()
_compiled: dict = {}


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


def _exp_row(row, out):
    """out = exp(row - max(row)); returns (max(row), the sum of out in float64): the softmax
    of one row of logits before its division, as TF's cross-entropy kernels compute it."""
    top = row[0]
    for j in range(1, row.size):
        top = max(top, row[j])
    total = 0.0
    for j in range(row.size):
        e = np.exp(row[j] - top)
        out[j] = e
        total += e
    return top, total


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
        top, total = _exp_row(row, grad)
        label = labels[r]
        loss[r] = np.log(total) - (row[label] - top)
        for j in range(classes):
            grad[j] = grad[j] / total
        grad[label] -= 1
    return -1


def _xent(logits, labels, loss, backprop):
    """SoftmaxCrossEntropyWithLogits per row r, TF's formulas: with z = logits[r] -
    max(logits[r]) and s = sum(exp(z)) (in float64), loss[r] = sum(labels[r] * (log(s) - z))
    and backprop[r] = exp(z) / s - labels[r]."""
    classes = logits.shape[1]
    for r in range(logits.shape[0]):
        row, lab, grad = logits[r], labels[r], backprop[r]
        top, total = _exp_row(row, grad)
        log_total = np.log(total)
        acc = 0.0
        for j in range(classes):
            acc += lab[j] * (log_total - (row[j] - top))
            grad[j] = grad[j] / total - lab[j]
        loss[r] = acc


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


def _move_rows(rows, got, ids, k, dst, src, m):
    """_shuffle_take's copies for one component, its slots and its output as rows of words."""
    w = rows.shape[1]
    for t in range(k):
        i = ids[t]
        for j in range(w):
            got[t, j] = rows[i, j]
    for t in range(m):
        d = dst[t]
        s = src[t]
        for j in range(w):
            rows[d, j] = rows[s, j]


def _shuffle_take(uniforms, n, scratch, data, out, layout):
    """_shuffle_draw's draws (scratch's rows: perm, ids, dst, src), then for each component c,
    layout[c] = (w, at, to): its slots are the w-byte rows of data from `at` on, its part of
    the output batch the w-byte rows of out from `to` on (both 8-byte aligned). The drawn
    elements are copied there in draw order, and the draw's moves fill the holes below
    n - len(uniforms): they read slots at or above it and write slots below it, so their
    order does not matter. Rows move as 8-byte words where w allows (a scalar int64's 64
    rows: 1.0 -> 0.2 us). Returns the number of moves."""
    k = uniforms.shape[0]
    m = _shuffle_draw(uniforms, n, scratch[0], scratch[1], scratch[2], scratch[3])
    ids, dst, src = scratch[1], scratch[2], scratch[3]
    for c in range(layout.shape[0]):
        w, at, to = layout[c, 0], layout[c, 1], layout[c, 2]
        rows = data[at : at + n * w]
        got = out[to : to + k * w]
        if w % 8 == 0:
            rows8 = rows.view(np.uint64).reshape(n, w // 8)
            got8 = got.view(np.uint64).reshape(k, w // 8)
            _move_rows(rows8, got8, ids, k, dst, src, m)
        else:
            _move_rows(rows.reshape(n, w), got.reshape(k, w), ids, k, dst, src, m)
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
    "shuffle_take": _shuffle_take,
    "shuffle_replay": _shuffle_replay,
    "bias_add": _bias_add,
    "bias_relu": _bias_relu,
    "relu": _relu,
    "relu_grad": _relu_grad,
    "window_add": _window_add,
    "im2col_taps": _im2col_taps,
    "sparse_xent": _sparse_xent,
    "xent": _xent,
    "adam": _adam,
    **winograd_loops.FUNCTIONS,
    **philox_loops.FUNCTIONS,
    **pooling_loops.FUNCTIONS,
}

# Helpers the loops call, by module: compiled (and inlined into their callers) before any loop.
_HELPERS = [
    (sys.modules[__name__], ["_exp_row", "_shuffle_draw", "_move_rows"]),
    (philox_loops, philox_loops.HELPERS),
    (pooling_loops, pooling_loops.HELPERS),
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
