"""The unit-height-stride convolution path (kernels/cpu/conv_rows.py): Conv2D and the input
gradient with 4+ channels, against loop references on every dtype, over block boundaries,
explicit paddings larger than the kernel (a cropped transposed convolution), dilations, width
strides and NCHW, and numeric Jacobians."""

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.kernels.cpu import conv_rows
from flowgraph.testing.gradient_checker import check_gradients
from flowgraph.testing.op_test import run
from tests.ops.test_nn_conv import TOL, _nchw, _pads, _rand, ref_conv2d

CASES = [  # (strides, padding, dilations): height stride 1, the path's condition
    ((1, 1), "SAME", (1, 1)),
    ((1, 1), "VALID", (1, 1)),
    ((1, 2), "SAME", (1, 1)),
    ((1, 1), "SAME", (2, 3)),
    ((1, 1), ((4, 0), (1, 3)), (1, 1)),  # pads beyond the kernel: the gradient crops
]


def ref_backprop_input(dy, f, x_shape, strides, padding, dilations):
    """The input gradient by explicit loops: each output cell's gradient times its tap's filter
    slice, added into the input cell that tap reads."""
    h, w = x_shape[1:3]
    kh, kw = f.shape[:2]
    ph = padding if isinstance(padding, str) else padding[0]
    pw = padding if isinstance(padding, str) else padding[1]
    oh, top = _pads(h, kh, strides[0], dilations[0], ph)
    ow, left = _pads(w, kw, strides[1], dilations[1], pw)
    dx = np.zeros(x_shape, np.float64)
    for y in range(oh):
        for z in range(ow):
            for i in range(kh):
                for j in range(kw):
                    hi = y * strides[0] + i * dilations[0] - top
                    wj = z * strides[1] + j * dilations[1] - left
                    if 0 <= hi < h and 0 <= wj < w:
                        dx[:, hi, wj] += dy[:, y, z].astype(np.float64) @ f[i, j].T
    return dx


def _tf_padding(padding, data_format):
    if isinstance(padding, str):
        return padding
    spatial = [list(padding[0]), list(padding[1])]
    return [[0, 0], [0, 0], *spatial] if data_format == "NCHW" else [[0, 0], *spatial, [0, 0]]


def _attrs(strides, padding, dilations, data_format):
    four = (lambda a, b: [1, 1, a, b]) if data_format == "NCHW" else (lambda a, b: [1, a, b, 1])
    return {
        "strides": four(*strides),
        "padding": _tf_padding(padding, data_format),
        "dilations": four(*dilations),
        "data_format": data_format,
    }


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of one or two images, so that every batch spans several (the last one short)."""
    monkeypatch.setattr(conv_rows, "BLOCK_BYTES", 3000)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("strides,padding,dilations", CASES)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv2d_and_input_gradient(dtype, strides, padding, dilations, data_format, small_blocks):
    x, f = _rand((3, 7, 8, 5), dtype), _rand((3, 2, 5, 4), dtype, 1)
    want = ref_conv2d(x.astype(np.float64), f.astype(np.float64), strides, padding, dilations)
    dy = _rand(want.shape, dtype, 2)
    want_dx = ref_backprop_input(dy, f.astype(np.float64), x.shape, strides, padding, dilations)
    if data_format == "NCHW":
        x, dy, want, want_dx = _nchw(x), _nchw(dy), _nchw(want), _nchw(want_dx)
    attrs = _attrs(strides, padding, dilations, data_format)
    y = run(lambda a, b: tf.nn.conv2d(a, b, **attrs), [x, f])
    dx = run(lambda a, b: tf.nn.conv2d_backprop_input(list(x.shape), a, b, **attrs), [f, dy])
    assert y.dtype == dx.dtype == dtype
    tol = TOL[dtype] * 10  # sums of up to 30 products
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(dx.astype(np.float64), want_dx, rtol=tol, atol=tol)


def test_whole_batch_in_one_block_matches_small_blocks(monkeypatch):
    x, f = _rand((5, 6, 6, 8), np.float64), _rand((3, 3, 8, 6), np.float64, 1)
    big = run(lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"), [x, f])
    monkeypatch.setattr(conv_rows, "BLOCK_BYTES", 1)
    small = run(lambda a, b: tf.nn.conv2d(a, b, [1, 1, 1, 1], "SAME"), [x, f])
    np.testing.assert_allclose(big, small, rtol=1e-13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("strides,padding,dilations", CASES[:4])
def test_gradients_match_numeric_jacobian(dtype, strides, padding, dilations):
    x, f = _rand((2, 5, 4, 4), dtype), _rand((3, 2, 4, 4), dtype, 1)
    attrs = _attrs(strides, padding, dilations, "NHWC")
    check_gradients(lambda a, b: tf.nn.conv2d(a, b, **attrs), [x, f])
