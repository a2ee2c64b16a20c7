"""Winograd F(2x2, 5x5), F(4x4, 3x3) and their filter-gradient forms (kernels/cpu/winograd.py):
Conv2D and the unit-stride input and filter gradients of 5x5 and 3x3 filters with 8+ channels, against loop references on every dtype, with odd output sizes
(tiles cut at the edge), explicit paddings beyond the kernel (a cropped transposed
convolution), NCHW, a short last block, and numeric Jacobians."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.kernels.cpu import windows, winograd
from flowgraph.testing.gradient_checker import check_gradients
from flowgraph.testing.op_test import run
from tests.kernels.test_conv_rows import _attrs, ref_backprop_input
from tests.ops.test_nn_conv import _nchw, _pads, _rand, ref_conv2d

# Relative to the output's magnitude: Winograd's float32 error is a few 1e-6 of it.
TOL = {np.float16: 2e-2, np.float32: 5e-5, np.float64: 1e-12}
PADDINGS = ["SAME", "VALID", ((6, 1), (0, 5))]


def ref_backprop_filter(x, dy, kernel, padding):
    """The unit-stride filter gradient by explicit loops over output cells and taps."""
    h, w = x.shape[1:3]
    ph = padding if isinstance(padding, str) else padding[0]
    pw = padding if isinstance(padding, str) else padding[1]
    oh, top = _pads(h, kernel, 1, 1, ph)
    ow, left = _pads(w, kernel, 1, 1, pw)
    df = np.zeros((kernel, kernel, x.shape[3], dy.shape[3]))
    for y in range(oh):
        for z in range(ow):
            for i in range(kernel):
                for j in range(kernel):
                    if 0 <= y + i - top < h and 0 <= z + j - left < w:
                        df[i, j] += x[:, y + i - top, z + j - left].T @ dy[:, y, z]
    return df


@pytest.mark.parametrize("kernel", [3, 5])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv2d_and_its_gradients(kernel, dtype, padding, data_format):
    x, f = _rand((3, 7, 9, 8), dtype), _rand((kernel, kernel, 8, 9), dtype, 1)
    want = ref_conv2d(x.astype(np.float64), f.astype(np.float64), (1, 1), padding)
    dy = _rand(want.shape, dtype, 2)
    want_dx = ref_backprop_input(dy, f.astype(np.float64), x.shape, (1, 1), padding, (1, 1))
    want_df = ref_backprop_filter(x.astype(np.float64), dy.astype(np.float64), kernel, padding)
    if data_format == "NCHW":
        x, dy, want, want_dx = _nchw(x), _nchw(dy), _nchw(want), _nchw(want_dx)
    attrs = _attrs((1, 1), padding, (1, 1), data_format)
    y = run(lambda a, b: tf.nn.conv2d(a, b, **attrs), [x, f])
    dx = run(lambda a, b: tf.nn.conv2d_backprop_input(list(x.shape), a, b, **attrs), [f, dy])
    df = run(lambda a, b: tf.nn.conv2d_backprop_filter(a, list(f.shape), b, **attrs), [x, dy])
    assert y.dtype == dx.dtype == df.dtype == dtype
    for got, ref in ((y, want), (dx, want_dx), (df, want_df)):
        scale = np.abs(ref).max()
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=0, atol=TOL[dtype] * scale)


def test_the_path_is_taken(monkeypatch):
    """The tests above exercise winograd.conv and filter_grad: spies count their calls."""
    calls = []
    real, real_grad = winograd.conv, winograd.filter_grad
    monkeypatch.setattr(winograd, "conv", lambda *a: calls.append(1) or real(*a))
    x, f = _rand((2, 6, 6, 8), np.float32), _rand((5, 5, 8, 8), np.float32, 1)
    run(lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"), [x, f])
    run(lambda a, b: tf.nn.conv2d_backprop_input([2, 6, 6, 8], a, b, [1, 1, 1, 1], "SAME"), [f, x])
    assert len(calls) == 2
    monkeypatch.setattr(winograd, "filter_grad", lambda *a: calls.append(1) or real_grad(*a))
    run(lambda a, b: tf.nn.conv2d_backprop_filter(a, [5, 5, 8, 8], b, [1, 1, 1, 1], "SAME"), [x, x])
    assert len(calls) == 3


def test_filter_transform_of_a_delta_is_the_tap():
    """A filter with one nonzero tap convolves as a shift: the transforms invert exactly."""
    f = np.zeros((5, 5, 8, 8))
    f[1, 3] = np.eye(8)
    x = _rand((1, 9, 9, 8), np.float64)
    y = run(lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "VALID"), [x, f])
    np.testing.assert_allclose(y, x[:, 1:6, 3:8], rtol=0, atol=1e-14)


def test_gradients_match_numeric_jacobian():
    x, f = _rand((2, 6, 5, 8), np.float64), _rand((5, 5, 8, 8), np.float64, 1)
    check_gradients(lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"), [x, f])


def test_float32_gradients_match_float64():
    """A float32 numeric Jacobian divides Winograd's 1e-6 relative rounding by the step; the
    float32 gradients are compared with the float64 ones (checked above) instead."""
    x, f = _rand((2, 6, 5, 8), np.float64), _rand((5, 5, 8, 8), np.float64, 1)

    def grads(dtype):
        def fn(a, b):
            y = tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME")
            return tf.gradients(tf.reduce_sum(y * y), [a, b])

        return run(fn, [x.astype(dtype), f.astype(dtype)])

    for got, want in zip(grads(np.float32), grads(np.float64), strict=True):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=0, atol=5e-5 * np.abs(want).max())


@pytest.mark.parametrize("batch,shards", [(2, False), (64, True)])
def test_small_convolutions_run_inline(monkeypatch, batch, shards):
    """Below windows.INLINE_COST (counted as Winograd's share of the direct multiply-adds) a
    convolution stays on the calling thread: its blocks' Python work costs more than a second
    core saves."""
    calls = []
    real = windows.parallel_for
    monkeypatch.setattr(windows, "parallel_for", lambda *a: calls.append(1) or real(*a))
    x, f = _rand((batch, 28, 28, 32), np.float32), _rand((5, 5, 32, 64), np.float32, 1)
    run(lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"), [x, f])
    assert bool(calls) == shards
