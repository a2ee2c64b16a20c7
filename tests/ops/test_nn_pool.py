"""MaxPool/AvgPool and their gradient kernels against loop-based references; TF's fixture values."""

import json
import math
import os

import numpy as np
import pytest

import flowgraph as tf
from flowgraph.framework.apply_op import apply_op
from flowgraph.testing.op_test import check_op, run

FIXTURES = "/work/shared/fixtures/tensorflow/graphs"


def _windows(h, w, k, s, padding):
    """Yields (out_y, out_x, [(row, col) of the real cells of the window])."""
    if padding == "SAME":
        oh, ow = math.ceil(h / s[0]), math.ceil(w / s[1])
        top = max((oh - 1) * s[0] + k[0] - h, 0) // 2
        left = max((ow - 1) * s[1] + k[1] - w, 0) // 2
    else:
        oh, ow, top, left = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1, 0, 0
    for y in range(oh):
        for z in range(ow):
            cells = [
                (y * s[0] + i - top, z * s[1] + j - left) for i in range(k[0]) for j in range(k[1])
            ]
            yield y, z, [(r, c) for r, c in cells if 0 <= r < h and 0 <= c < w]


def ref_pool(x, k, s, padding, kind):
    n, h, w, c = x.shape
    outs = {}
    for y, z, cells in _windows(h, w, k, s, padding):
        vals = np.stack([x[:, r, col, :] for r, col in cells])
        outs[y, z] = (
            vals.max(0) if kind == "max" else vals.astype(np.float64).mean(0).astype(x.dtype)
        )
    oh, ow = max(k_[0] for k_ in outs) + 1, max(k_[1] for k_ in outs) + 1
    out = np.zeros((n, oh, ow, c), x.dtype)
    for (y, z), v in outs.items():
        out[:, y, z, :] = v
    return out


def ref_max_pool_grad(x, dy, k, s, padding):
    """Each output's gradient goes to the first maximum of its window (row-major)."""
    dx = np.zeros_like(x)
    n, h, w, c = x.shape
    for y, z, cells in _windows(h, w, k, s, padding):
        for b in range(n):
            for ch in range(c):
                vals = [x[b, r, col, ch] for r, col in cells]
                r, col = cells[int(np.argmax(vals))]
                dx[b, r, col, ch] += dy[b, y, z, ch]
    return dx


POOLS = [
    ((2, 2), (2, 2), "VALID"),
    ((2, 2), (2, 2), "SAME"),
    ((3, 3), (2, 2), "SAME"),
    ((3, 2), (1, 2), "VALID"),
    ((3, 3), (1, 1), "SAME"),
    ((2, 3), (3, 1), "SAME"),
    ((2, 2), (3, 3), "VALID"),  # windows apart: cells between them get no gradient
    ((2, 1), (2, 3), "SAME"),
]


def _nchw(x):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("k,s,padding", POOLS)
@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_pool_matches_loops(k, s, padding, kind, data_format):
    x = np.random.RandomState(0).uniform(-1, 1, (2, 7, 5, 3)).astype(np.float32)
    want = ref_pool(x, k, s, padding, kind)
    if data_format == "NCHW":
        x, want = _nchw(x), _nchw(want)
        ks, ss = [1, 1, *k], [1, 1, *s]
    else:
        ks, ss = [1, *k, 1], [1, *s, 1]
    fn = tf.nn.max_pool if kind == "max" else tf.nn.avg_pool
    check_op(
        lambda a: fn(a, ks, ss, padding, data_format=data_format),
        [x],
        lambda a: want,
        rtol=1e-6,
        atol=1e-6,
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.uint8, np.int64])
def test_max_pool_dtypes(dtype):
    x = np.random.RandomState(1).randint(0, 100, (1, 5, 5, 2)).astype(dtype)
    check_op(
        lambda a: tf.nn.max_pool(a, 3, 2, "SAME"),
        [x],
        lambda a: ref_pool(a, (3, 3), (2, 2), "SAME", "max"),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_max_pool_nan_wins(dtype):
    """As np.maximum over the window (TF's Eigen max): a NaN anywhere in a window is its max."""
    x = np.arange(2 * 4 * 4 * 3, dtype=dtype).reshape(2, 4, 4, 3)
    x[0, 1, 1, 0] = x[1, 0, 0, 2] = np.nan
    want = ref_pool(x, (2, 2), (2, 2), "VALID", "max")
    assert np.isnan(want[0, 0, 0, 0]) and np.isnan(want[1, 0, 0, 2])
    check_op(lambda a: tf.nn.max_pool(a, 2, 2, "VALID"), [x], lambda a: want)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_avg_pool_dtypes(dtype):
    x = np.random.RandomState(1).uniform(-1, 1, (1, 5, 5, 2)).astype(dtype)
    check_op(
        lambda a: tf.nn.avg_pool(a, 3, 2, "SAME"),
        [x],
        lambda a: ref_pool(a, (3, 3), (2, 2), "SAME", "avg"),
        rtol=1e-3,
        atol=1e-3,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,s,padding", POOLS)
def test_max_pool_grad_goes_to_first_maximum(k, s, padding, dtype):
    # Integers-valued floats make ties, so the "first maximum" rule is exercised.
    x = np.random.RandomState(2).randint(0, 4, (2, 6, 5, 2)).astype(dtype)
    y = ref_pool(x, k, s, padding, "max")
    dy = np.random.RandomState(3).uniform(-1, 1, y.shape).astype(dtype)
    got = run(
        lambda a, b, c: apply_op(
            "MaxPoolGrad", [a, b, c], ksize=[1, *k, 1], strides=[1, *s, 1], padding=padding
        ).outputs[0],
        [x, y, dy],
    )
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, ref_max_pool_grad(x, dy, k, s, padding), rtol=rtol)
    # MaxPoolGradGrad is its adjoint: <MaxPoolGrad(dy), g> = <dy, MaxPoolGradGrad(g)>.
    g = np.random.RandomState(4).uniform(-1, 1, x.shape).astype(dtype)
    gg = run(
        lambda a, b, c: apply_op(
            "MaxPoolGradGrad", [a, b, c], ksize=[1, *k, 1], strides=[1, *s, 1], padding=padding
        ).outputs[0],
        [x, y, g],
    )
    np.testing.assert_allclose(np.sum(got * g), np.sum(dy * gg), rtol=rtol * 100)


def _first_max_grad(x, dy):
    """MaxPoolGrad of 2x2/2 windows that tile x by TF's CPU rule: the first cell claims the
    window and a later one takes it only when strictly greater (a later NaN never does)."""
    dx = np.zeros_like(x)
    for b, y, z, ch in np.ndindex(*dy.shape):
        cells = [(2 * y + i, 2 * z + j) for i in range(2) for j in range(2)]
        best = cells[0]
        for r, col in cells[1:]:
            if x[b, r, col, ch] > x[b, best[0], best[1], ch]:
                best = (r, col)
        dx[b, best[0], best[1], ch] += dy[b, y, z, ch]
    return dx


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("padding", ["VALID", "SAME"])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_max_pool_2x2_windows_that_tile(dtype, padding, data_format):
    """The usual 2x2/2 pooling of an even-sized input (loops.py's pair-of-rows loops): ties and
    NaNs, in the first cell of a window and later, as the general loops treat them."""
    rng = np.random.RandomState(5)
    x = rng.randint(0, 3, (3, 6, 4, 19)).astype(dtype)
    for b, r, col, ch in [(0, 0, 0, 0), (0, 1, 1, 1), (1, 2, 3, 5), (2, 5, 2, 18), (2, 4, 0, 18)]:
        x[b, r, col, ch] = np.nan
    dy = rng.uniform(-1, 1, (3, 3, 2, 19)).astype(dtype)
    want_y, want_dx = ref_pool(x, (2, 2), (2, 2), "VALID", "max"), _first_max_grad(x, dy)
    assert np.isnan(want_y[0, 0, 0, 0]) and not np.isnan(want_dx[0, 0, 1, 0])
    if data_format == "NCHW":
        x, dy, want_y, want_dx = _nchw(x), _nchw(dy), _nchw(want_y), _nchw(want_dx)
        window = [1, 1, 2, 2]
    else:
        window = [1, 2, 2, 1]
    attrs = {"ksize": window, "strides": window, "padding": padding, "data_format": data_format}
    y = run(lambda a: apply_op("MaxPool", [a], **attrs).outputs[0], [x])
    np.testing.assert_array_equal(y, want_y)
    dx = run(lambda a, b, c: apply_op("MaxPoolGrad", [a, b, c], **attrs).outputs[0], [x, y, dy])
    np.testing.assert_array_equal(dx, want_dx)


@pytest.mark.parametrize("k,s,padding", POOLS)
def test_avg_pool_grad_is_adjoint(k, s, padding):
    x = np.random.RandomState(2).uniform(-1, 1, (2, 6, 5, 2))
    y = ref_pool(x, k, s, padding, "avg")
    dy = np.random.RandomState(3).uniform(-1, 1, y.shape)
    dx = run(
        lambda d: apply_op(
            "AvgPoolGrad",
            [np.array(x.shape, np.int32), d],
            ksize=[1, *k, 1],
            strides=[1, *s, 1],
            padding=padding,
        ).outputs[0],
        [dy],
    )
    np.testing.assert_allclose(np.sum(y * dy), np.sum(x * dx), rtol=1e-10)


def test_pool_errors():
    x = tf.placeholder(tf.float32, [1, 4, 4, 1])
    with pytest.raises(ValueError, match="padding"):
        tf.nn.max_pool(x, 2, 2, "same-ish")
    with pytest.raises(ValueError, match="data_format"):
        tf.nn.avg_pool(x, 2, 2, "SAME", data_format="HWCN")
    with pytest.raises(tf.errors.InvalidArgumentError, match="batch and depth"):
        tf.nn.max_pool(x, [2, 2, 2, 1], [1, 1, 1, 1], "SAME")
    assert tf.nn.max_pool(
        tf.placeholder(tf.float32, [None, 7, 7, 3]), 2, 2, "SAME"
    ).shape.as_list() == [None, 4, 4, 3]


def test_cnn_inference_fixture_from_real_tensorflow():
    """Conv2D SAME/VALID/strides and Max/AvgPool SAME/VALID as TF computed them."""
    with open(os.path.join(FIXTURES, "cases.json")) as fh:
        case = json.load(fh)["cnn_inference"]
    data = np.load(os.path.join(FIXTURES, case["npz"]))
    gd = tf.GraphDef()
    with open(os.path.join(FIXTURES, case["pb"]), "rb") as fh:
        gd.ParseFromString(fh.read())
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    with tf.Session(graph=g) as sess:
        names = list(case["fetches"])
        out = sess.run(names, {k: data[v] for k, v in case["feeds"].items()})
    for name, got in zip(names, out):
        want = data[case["fetches"][name]]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=case["rtol"], atol=case["atol"], err_msg=name)
