"""Conv2D, its backprops, depthwise and transposed convolution against loop-based references."""

import math

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.testing.op_test import assert_close, check_op, run

TOL = {np.float16: 2e-2, np.float32: 1e-5, np.float64: 1e-12}


def _pads(size, k, stride, dilation, padding):
    """(output size, pad before) of one dim, written from TF's documented SAME/VALID rules."""
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return (size - eff) // stride + 1, 0
    if padding == "SAME":
        out = math.ceil(size / stride)
        return out, max((out - 1) * stride + eff - size, 0) // 2
    before, after = padding
    return (size + before + after - eff) // stride + 1, before


def ref_conv2d(x, f, strides, padding, dilations=(1, 1), depthwise=False):
    """NHWC convolution by explicit loops over output pixels and kernel taps."""
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    ph = padding if isinstance(padding, str) else padding[0]
    pw = padding if isinstance(padding, str) else padding[1]
    oh, top = _pads(h, kh, strides[0], dilations[0], ph)
    ow, left = _pads(w, kw, strides[1], dilations[1], pw)
    out = np.zeros((n, oh, ow, c * m if depthwise else m), np.float64)
    for y in range(oh):
        for z in range(ow):
            for i in range(kh):
                for j in range(kw):
                    hi = y * strides[0] + i * dilations[0] - top
                    wj = z * strides[1] + j * dilations[1] - left
                    if 0 <= hi < h and 0 <= wj < w:
                        pix = x[:, hi, wj, :].astype(np.float64)
                        if depthwise:
                            out[:, y, z, :] += (pix[:, :, None] * f[i, j]).reshape(n, -1)
                        else:
                            out[:, y, z, :] += pix @ f[i, j].astype(np.float64)
    return out.astype(x.dtype)


def _rand(shape, dtype, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, shape).astype(dtype)


def _nchw(x):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


CASES = [  # (strides, padding, dilations)
    ((1, 1), "SAME", (1, 1)),
    ((2, 2), "SAME", (1, 1)),
    ((2, 3), "SAME", (1, 1)),
    ((1, 1), "VALID", (1, 1)),
    ((3, 2), "VALID", (1, 1)),
    ((1, 1), "SAME", (2, 1)),
    ((1, 1), "VALID", (2, 2)),
    ((2, 1), ((1, 2), (0, 1)), (1, 1)),
]


# Fewer than 4 input channels take the tap-major im2col (windows.im2col_taps), more the
# cache-blocked row-major one; one channel has its own input backprop.
CHANNELS = [1, 3, 5]


@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("strides,padding,dilations", CASES)
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv2d_matches_loops(strides, padding, dilations, data_format, channels):
    x, f = _rand((2, 7, 6, channels), np.float32), _rand((3, 2, channels, 4), np.float32, 1)
    want = ref_conv2d(x, f, strides, padding, dilations)
    tf_pad = (
        padding
        if isinstance(padding, str)
        else [[0, 0], list(padding[0]), list(padding[1]), [0, 0]]
    )
    if data_format == "NCHW":
        x, want = _nchw(x), _nchw(want)
        if not isinstance(padding, str):
            tf_pad = [[0, 0], [0, 0]] + tf_pad[1:3]
    check_op(
        lambda a, b: tf.nn.conv2d(
            a,
            b,
            strides=list(strides),
            padding=tf_pad,
            dilations=list(dilations),
            data_format=data_format,
        ),
        [x, f],
        lambda a, b: want,
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_conv2d_dtypes(dtype):
    x, f = _rand((1, 5, 5, 2), dtype), _rand((3, 3, 2, 2), dtype, 1)
    want = ref_conv2d(x.astype(np.float64), f.astype(np.float64), (2, 2), "SAME").astype(dtype)
    check_op(
        lambda a, b: tf.nn.conv2d(a, b, [1, 2, 2, 1], "SAME"),
        [x, f],
        lambda a, b: want,
        rtol=TOL[dtype],
        atol=TOL[dtype],
    )


def test_conv2d_static_shape_and_errors():
    x = tf.placeholder(tf.float32, [None, 8, 8, 3])
    f = tf.zeros([5, 5, 3, 7])
    assert tf.nn.conv2d(x, f, [1, 2, 2, 1], "SAME").shape.as_list() == [None, 4, 4, 7]
    assert tf.nn.conv2d(x, f, [1, 1, 1, 1], "VALID").shape.as_list() == [None, 4, 4, 7]
    with pytest.raises(ValueError, match="padding"):
        tf.nn.conv2d(x, f, [1, 1, 1, 1], "FULL")
    with pytest.raises(ValueError, match="data_format"):
        tf.nn.conv2d(x, f, [1, 1, 1, 1], "SAME", data_format="NWHC")
    with pytest.raises(errors.InvalidArgumentError, match="batch and depth"):
        tf.nn.conv2d(x, f, [2, 1, 1, 1], "SAME")
    with pytest.raises(errors.InvalidArgumentError, match="Depth"):
        tf.nn.conv2d(x, tf.zeros([5, 5, 2, 7]), [1, 1, 1, 1], "SAME")
    with pytest.raises(errors.InvalidArgumentError):
        tf.nn.conv2d(tf.zeros([1, 3, 3, 3]), f, [1, 1, 1, 1], "VALID")


def test_conv2d_runtime_depth_mismatch():
    x = tf.placeholder(tf.float32, [None, None, None, None])
    y = tf.nn.conv2d(x, tf.zeros([1, 1, 3, 2]), [1, 1, 1, 1], "SAME")
    with tf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="depth"):
        sess.run(y, {x: np.zeros((1, 2, 2, 4), np.float32)})


@pytest.mark.parametrize("channels", CHANNELS)
@pytest.mark.parametrize("strides,padding,dilations", CASES[:6])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_conv2d_backprops_are_adjoints(strides, padding, dilations, data_format, channels):
    """<conv(x, f), dy> = <x, backprop_input(dy)> = <f, backprop_filter(dy)>."""
    x, f = _rand((2, 7, 6, channels), np.float64), _rand((3, 2, channels, 4), np.float64, 1)
    y = ref_conv2d(x, f, strides, padding, dilations)
    dy = _rand(y.shape, np.float64, 2)
    xs, dys = (x, dy) if data_format == "NHWC" else (_nchw(x), _nchw(dy))
    kw = {
        "strides": list(strides),
        "padding": padding,
        "dilations": list(dilations),
        "data_format": data_format,
    }
    dx = run(lambda f_, dy_: tf.nn.conv2d_backprop_input(list(xs.shape), f_, dy_, **kw), [f, dys])
    df = run(lambda x_, dy_: tf.nn.conv2d_backprop_filter(x_, list(f.shape), dy_, **kw), [xs, dys])
    assert dx.shape == xs.shape and df.shape == f.shape
    np.testing.assert_allclose(np.sum(y * dy), np.sum(xs * dx), rtol=1e-10)
    np.testing.assert_allclose(np.sum(y * dy), np.sum(f * df), rtol=1e-10)


def test_conv2d_transpose_is_backprop_input():
    x, f = _rand((2, 8, 8, 3), np.float64), _rand((3, 3, 5, 3), np.float64, 1)
    out = run(
        lambda a, b: tf.nn.conv2d_transpose(a, b, [2, 16, 16, 5], [1, 2, 2, 1], "SAME"), [x, f]
    )
    dy = _rand((2, 16, 16, 5), np.float64, 2)
    # The transpose of a conv: <conv(dy, f), x> = <dy, conv_transpose(x, f)>.
    forward = ref_conv2d(dy, f, (2, 2), "SAME")
    np.testing.assert_allclose(np.sum(forward * x), np.sum(dy * out), rtol=1e-10)


@pytest.mark.parametrize("strides,padding,dilations", [CASES[0], CASES[2], CASES[4], CASES[5]])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_depthwise_conv2d(strides, padding, dilations, data_format):
    x, f = _rand((2, 6, 5, 3), np.float32), _rand((3, 2, 3, 2), np.float32, 1)
    want = ref_conv2d(x, f, strides, padding, dilations, depthwise=True)
    if data_format == "NCHW":
        x, want = _nchw(x), _nchw(want)
    s4 = [1, 1] + list(strides) if data_format == "NCHW" else [1] + list(strides) + [1]
    check_op(
        lambda a, b: tf.nn.depthwise_conv2d(
            a, b, s4, padding, rate=list(dilations), data_format=data_format
        ),
        [x, f],
        lambda a, b: want,
        rtol=1e-5,
        atol=1e-5,
    )


def test_depthwise_backprops_are_adjoints():
    x, f = _rand((2, 6, 5, 3), np.float64), _rand((3, 3, 3, 2), np.float64, 1)
    y = ref_conv2d(x, f, (2, 2), "SAME", depthwise=True)
    dy = _rand(y.shape, np.float64, 2)
    kw = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    dx = run(
        lambda f_, dy_: tf.nn.depthwise_conv2d_native_backprop_input([2, 6, 5, 3], f_, dy_, **kw),
        [f, dy],
    )
    df = run(
        lambda x_, dy_: tf.nn.depthwise_conv2d_native_backprop_filter(x_, [3, 3, 3, 2], dy_, **kw),
        [x, dy],
    )
    np.testing.assert_allclose(np.sum(y * dy), np.sum(x * dx), rtol=1e-10)
    np.testing.assert_allclose(np.sum(y * dy), np.sum(f * df), rtol=1e-10)


def test_conv1d_and_atrous_and_separable():
    x, f = _rand((2, 9, 3), np.float32), _rand((3, 3, 4), np.float32, 1)
    want = ref_conv2d(x[:, None], f[None], (1, 2), "SAME")[:, 0]
    assert_close(run(lambda a, b: tf.nn.conv1d(a, b, 2, "SAME"), [x, f]), want, 1e-5, 1e-5)
    x2, f2 = _rand((1, 7, 7, 2), np.float32), _rand((3, 3, 2, 2), np.float32, 1)
    want = ref_conv2d(x2, f2, (1, 1), "SAME", (2, 2))
    assert_close(run(lambda a, b: tf.nn.atrous_conv2d(a, b, 2, "SAME"), [x2, f2]), want, 1e-5, 1e-5)
    dw, pw = _rand((3, 3, 2, 2), np.float32, 3), _rand((1, 1, 4, 3), np.float32, 4)
    want = ref_conv2d(ref_conv2d(x2, dw, (1, 1), "SAME", depthwise=True), pw, (1, 1), "VALID")
    got = run(lambda a, b, c: tf.nn.separable_conv2d(a, b, c, [1, 1, 1, 1], "SAME"), [x2, dw, pw])
    assert_close(got, want, 1e-5, 1e-5)
