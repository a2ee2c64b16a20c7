"""The NumPy floor of each workload: the same math written directly in NumPy.

A NumPy-backed runtime can approach this time but not beat it (the same BLAS calls, no graph,
no executor). Construction workloads (W8*) have no math, hence no floor. Sizes, seeds and batches
come from `workloads` so that the floor computes what the graphs compute.

Floors run with BLAS at its default thread count (run.py), except those of small products (W3,
W6b, P2), which run BLAS on one thread as the best NumPy program would: a 256x256 product runs
at ~100 GFLOP/s on one OpenBLAS thread and collapses on OpenBLAS's own threads as soon as
another process holds a core (issue 9). W3's floor runs its chains on one Python thread per
core, the inter-op parallelism a NumPy program gets (the products release the GIL).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import program_workloads as pw
import workloads as wl
from numpy.lib.stride_tricks import sliding_window_view
from threadpoolctl import ThreadpoolController
from workloads import Case

_BLAS = ThreadpoolController()


def _timed(fn, inner: int = 1) -> Case:
    def step() -> float:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return time.perf_counter() - t0

    return Case(step)


def _one_blas_thread(fn, close=lambda: None) -> Case:
    """A Case timing fn() with BLAS on one thread (set and restored outside the timed part)."""

    def step() -> float:
        with _BLAS.limit(limits=1, user_api="blas"):
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0

    return Case(step, close)


def _normal(shape, seed, stddev=1.0):
    return (np.random.RandomState(seed).standard_normal(shape) * stddev).astype(np.float32)


def floor_w1() -> Case:
    a, b = np.float32(1.0), np.float32(2.0)
    return _timed(lambda: np.add(a, b), inner=wl.W1_INNER)


def floor_w2() -> Case:
    a, b = np.float32(1.0), np.float32(0.5)

    def chain():
        x = a
        for _ in range(wl.W2_CHAIN):
            x = np.add(x, b)
        return x

    return _timed(chain)


def floor_w3() -> Case:
    n = wl.W3_N
    w = _normal((n, n), 1, n**-0.5)
    xs = [_normal((n, n), 10 + c) for c in range(wl.W3_CHAINS)]
    threads = os.cpu_count() or 1
    pool = ThreadPoolExecutor(threads)

    def some_chains(first: int) -> np.ndarray:
        total = np.zeros((n, n), np.float32)
        for x in xs[first::threads]:
            for _ in range(wl.W3_LENGTH):
                x = x @ w
            total += x
        return total

    def chains():
        return sum(f.result() for f in [pool.submit(some_chains, i) for i in range(threads)])

    return _one_blas_thread(chains, pool.shutdown)


def floor_w7() -> Case:
    a, b = _normal((wl.W7_N, wl.W7_N), 1), _normal((wl.W7_N, wl.W7_N), 2)
    return _timed(lambda: a @ b)


def _softmax_xent_grad(logits, labels):
    """Mean sparse softmax cross-entropy and its gradient with respect to the logits."""
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(axis=1, keepdims=True)
    rows = np.arange(len(labels))
    loss = -np.log(p[rows, labels]).mean()
    p[rows, labels] -= 1.0
    p /= len(labels)
    return loss, p


def _dense_params(sizes, seed0):
    return [
        [_normal((n_in, n_out), seed0 + i, n_in**-0.5), np.zeros(n_out, np.float32)]
        for i, (n_in, n_out) in enumerate(itertools.pairwise(sizes))
    ]


def _mlp_forward(params, h):
    """Dense layers with ReLU between them; returns the logits and every layer's input."""
    inputs = []
    for i, (w, b) in enumerate(params):
        inputs.append(h)
        h = h @ w + b
        if i < len(params) - 1:
            h = np.maximum(h, 0)
    return h, inputs


def _mlp_backward_sgd(params, inputs, d, lr):
    """Backpropagates `d` (gradient of the logits) and applies SGD in place; returns the
    gradient of the network's input. The graphs compute that one too, although nothing uses it:
    minimize's default gate_gradients=GATE_OP groups both gradients of each MatMul/Conv2D."""
    for i in reversed(range(len(params))):
        w, b = params[i]
        if i < len(params) - 1:
            d = d * (inputs[i + 1] > 0)  # ReLU's gradient (its output is the next layer's input)
        gw, gb = inputs[i].T @ d, d.sum(axis=0)
        d = d @ w.T
        w -= lr * gw
        b -= lr * gb
    return d


def mlp_params():
    """[[weights, biases], ...] of the MLP, in the graph's variable order."""
    return _dense_params(wl.MLP_SIZES, 1)


def mlp_sgd_step(params, x, labels, lr):
    """One SGD step of the MLP on (x, labels), updating `params` in place; returns the loss."""
    logits, inputs = _mlp_forward(params, x)
    loss, d = _softmax_xent_grad(logits, labels)
    _mlp_backward_sgd(params, inputs, d, lr)
    return loss


def floor_w4() -> Case:
    params = mlp_params()
    x, labels = wl.batch((wl.MLP_BATCH, wl.MLP_SIZES[0]), seed=0)
    return _timed(lambda: mlp_sgd_step(params, x, labels, wl.LEARNING_RATE))


def _conv_same(x, w):
    """Stride-1 SAME convolution, NHWC x HWIO, by im2col + one matmul; returns (y, columns)."""
    k, _, c_in, c_out = w.shape
    p = k // 2
    n, h, wd, _ = x.shape
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    cols = sliding_window_view(xp, (k, k), axis=(1, 2))  # n, h, w, c_in, k, k
    cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * wd, k * k * c_in)
    return (cols @ w.reshape(k * k * c_in, c_out)).reshape(n, h, wd, c_out), cols


def _conv_same_grads(dy, w, cols):
    """Gradients of _conv_same: dW from the saved columns, dx as a SAME convolution of dy with
    the kernel flipped in space and transposed in channels."""
    c_out = w.shape[3]
    dw = (cols.T @ dy.reshape(-1, c_out)).reshape(w.shape)
    dx = _conv_same(dy, w[::-1, ::-1].transpose(0, 1, 3, 2))[0]
    return dw, dx


def _pool(x):
    """2x2 stride-2 max pool of even-sized NHWC maps; returns (y, argmax mask)."""
    n, h, w, c = x.shape
    blocks = x.reshape(n, h // 2, 2, w // 2, 2, c)
    y = blocks.max(axis=(2, 4))
    return y, blocks == y[:, :, None, :, None, :]


def _pool_grad(dy, mask):
    n, h2, _, w2, _, c = mask.shape
    return (mask * dy[:, :, None, :, None, :]).reshape(n, 2 * h2, 2 * w2, c)


def cnn_params():
    """[[weights, biases], ...] of the CNN (2 conv, 2 dense layers), in the graph's order."""
    convs = [
        [_normal((5, 5, 1, 32), 1, 25**-0.5), np.full(32, 0.1, np.float32)],
        [_normal((5, 5, 32, 64), 2, (25 * 32) ** -0.5), np.full(64, 0.1, np.float32)],
    ]
    return convs + _dense_params((7 * 7 * 64, 1024, 10), 3)


def cnn_sgd_step(params, x, labels, lr):
    """One SGD step of the CNN on (x, labels), updating `params` in place; returns the loss."""
    convs, fcs = params[:2], params[2:]
    h, saved = x, []
    for w, b in convs:
        z, cols = _conv_same(h, w)
        a = np.maximum(z + b, 0)
        h, mask = _pool(a)
        saved.append((cols, a, mask))
    logits, inputs = _mlp_forward(fcs, h.reshape(len(x), -1))
    loss, d = _softmax_xent_grad(logits, labels)
    d = _mlp_backward_sgd(fcs, inputs, d, lr).reshape(h.shape)
    for i in reversed(range(len(convs))):
        w, b = convs[i]
        cols, a, mask = saved[i]
        d = _pool_grad(d, mask) * (a > 0)
        dw, dx = _conv_same_grads(d, w, cols)
        b -= lr * d.sum(axis=(0, 1, 2))
        w -= lr * dw
        d = dx
    return loss


def floor_w5() -> Case:
    params = cnn_params()
    x, labels = wl.batch((wl.CNN_BATCH, 28, 28, 1), seed=0)
    return _timed(lambda: cnn_sgd_step(params, x, labels, wl.LEARNING_RATE))


def floor_w6a() -> Case:
    def loop():
        i = np.int32(0)
        while i < wl.W6A_ITERS:
            i = i + np.int32(1)
        return i

    return _timed(loop)


def floor_w6b() -> Case:
    w = _normal((wl.W6B_N, wl.W6B_N), 1, wl.W6B_N**-0.5)
    x0 = _normal((wl.W6B_N, wl.W6B_N), 2)

    def loop():
        x, y = x0.copy(), np.empty_like(x0)
        for _ in range(wl.W6B_ITERS):
            np.tanh(np.matmul(x, w, out=y), out=x)
        return x

    return _one_blas_thread(loop)


def floor_p2() -> Case:
    """The softmax-regression tutorial's loop: the same batches, forward, gradient and SGD
    update in place (only `train` is fetched, so no loss is computed)."""
    data = pw.p2_data()
    w, b = np.zeros((784, 10), np.float32), np.zeros(10, np.float32)
    rate = np.float32(0.5)

    def steps():
        for _ in range(pw.PROGRAM_STEPS):
            xs, ys = data.next_batch(pw.P2_BATCH)
            logits = xs @ w + b
            logits -= logits.max(axis=1, keepdims=True)
            p = np.exp(logits, out=logits)
            p /= p.sum(axis=1, keepdims=True)
            p -= ys
            p *= rate / len(xs)
            np.subtract(w, xs.T @ p, out=w)
            np.subtract(b, p.sum(axis=0), out=b)

    return _one_blas_thread(steps)


def _checkpoint_floor(restore: bool) -> Case:
    """np.save (C1) or np.load (C2) of the same 64 arrays, one .npy file each."""
    arrays = [np.full(wl.CKPT_SHAPE, float(i), np.float32) for i in range(wl.CKPT_TENSORS)]
    directory = tempfile.mkdtemp(prefix="flowgraph_bench_npy_", dir=wl.CKPT_DIR)
    paths = [os.path.join(directory, f"v{i}.npy") for i in range(len(arrays))]

    def save():
        for path, a in zip(paths, arrays):
            np.save(path, a)

    def load():
        return [np.load(path) for path in paths]

    if restore:
        save()
    case = _timed(load if restore else save)
    return Case(case.step, lambda: shutil.rmtree(directory, ignore_errors=True))


def floor_c1() -> Case:
    return _checkpoint_floor(restore=False)


def floor_c2() -> Case:
    return _checkpoint_floor(restore=True)


FLOORS = {
    "W1": floor_w1,
    "W2": floor_w2,
    "W3": floor_w3,
    "W7": floor_w7,
    "W4": floor_w4,
    "W5": floor_w5,
    "W6a": floor_w6a,
    "W6b": floor_w6b,
    "C1": floor_c1,
    "C2": floor_c2,
    "P2": floor_p2,
}
