"""Conv3D (+ V2 backprops), conv3d_transpose, MaxPool3D, AvgPool3D and their gradients: values
and gradients of sum(y * w) recorded from TensorFlow 2.21 (tests/ops/data/tf_conv3d_ref.npz, on
the seeded inputs rebuilt below), a loop-per-output NumPy reference on every dtype, NCDHW,
shapes and errors, numeric Jacobians, and the tf.layers 3-D layers."""

import os

import ml_dtypes
import numpy as np
import pytest

import flowgraph as tf
from flowgraph.core import errors
from flowgraph.opdefs.nn_conv import spatial_attr, spatial_axes
from flowgraph.testing.gradient_checker import check_gradients
from flowgraph.testing.op_test import check_op, run

REF = np.load(os.path.join(os.path.dirname(__file__), "data", "tf_conv3d_ref.npz"))
_rng = np.random.RandomState(0)
X = _rng.randn(2, 5, 6, 4, 3).astype(np.float32)
F = _rng.randn(2, 3, 2, 3, 4).astype(np.float32)
V = _rng.randn(2, 3, 3, 2, 4).astype(np.float32)
CONV_CASES = [
    ([1, 1, 1, 1, 1], "VALID", [1, 1, 1, 1, 1]),
    ([1, 2, 1, 2, 1], "SAME", [1, 1, 1, 1, 1]),
    ([1, 1, 1, 1, 1], "SAME", [1, 2, 1, 2, 1]),
    ([1, 2, 2, 1, 1], "VALID", [1, 1, 1, 1, 1]),
]
POOL_CASES = [
    ([1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "VALID"),
    ([1, 3, 2, 2, 1], [1, 2, 1, 2, 1], "SAME"),
    ([1, 2, 3, 1, 1], [1, 1, 2, 1, 1], "SAME"),
]


def _weights(shape, seed):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def _value_and_grads(fn, inputs, seed):
    """fn(*inputs) and the gradients of sum(fn * w) for TF's seeded w."""
    g = tf.Graph()
    with g.as_default():
        ts = [tf.constant(v) for v in inputs]
        y = fn(*ts)
        w = tf.constant(_weights(y.shape.as_list(), seed))
        grads = tf.gradients(tf.reduce_sum(y * w), ts)
        with tf.Session() as sess:
            return sess.run([y, *grads])


def _close(got, key, tol=1e-4):
    want = REF[key]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
def test_conv3d_and_gradients_match_tensorflow(case):
    strides, padding, dilations = CONV_CASES[case]
    y, gx, gf = _value_and_grads(
        lambda x, f: tf.nn.conv3d(x, f, strides, padding, dilations=dilations), [X, F], case + 10
    )
    _close(y, f"conv{case}")
    _close(gx, f"conv{case}_gx")
    _close(gf, f"conv{case}_gf")


def test_conv3d_transpose_matches_tensorflow():
    out = tf.nn.conv3d_transpose(V, F, [2, 5, 6, 4, 3], [1, 2, 2, 2, 1], "SAME")
    assert out.shape.as_list() == [2, 5, 6, 4, 3]
    with tf.Session() as sess:
        _close(sess.run(out), "transpose")


@pytest.mark.parametrize("case", range(len(POOL_CASES)))
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pool3d_and_gradients_match_tensorflow(kind, case):
    ksize, strides, padding = POOL_CASES[case]
    fn = tf.nn.max_pool3d if kind == "max" else tf.nn.avg_pool3d
    y, gx = _value_and_grads(lambda x: fn(x, ksize, strides, padding), [X], case + 20)
    _close(y, f"{kind}{case}")
    _close(gx, f"{kind}{case}_gx")


def ref_conv3d(x, f, strides, padding, dilations):
    """Direct 3-D convolution, one output position at a time."""
    n, *size, _c = x.shape
    k = f.shape[:3]
    st, dl = strides[1:4], dilations[1:4]
    eff = [(kk - 1) * d + 1 for kk, d in zip(k, dl)]
    if padding == "SAME":
        out = [-(-s // t) for s, t in zip(size, st)]
        before = [max((o - 1) * t + e - s, 0) // 2 for o, t, e, s in zip(out, st, eff, size)]
    else:
        out = [(s - e) // t + 1 for s, e, t in zip(size, eff, st)]
        before = [0, 0, 0]
    xw = x.astype(np.float64)
    y = np.zeros((n, *out, f.shape[4]))
    for o in np.ndindex(*out):
        for tap in np.ndindex(*k):
            pos = [oi * t + ti * d - b for oi, t, ti, d, b in zip(o, st, tap, dl, before)]
            if all(0 <= p < s for p, s in zip(pos, size)):
                y[(slice(None), *o)] += xw[(slice(None), *pos)] @ f[tap].astype(np.float64)
    return y


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16])
def test_conv3d_every_dtype(dtype):
    x = np.random.RandomState(1).randint(-3, 4, (1, 4, 3, 5, 2)).astype(dtype)
    f = np.random.RandomState(2).randint(-2, 3, (2, 2, 3, 2, 3)).astype(dtype)
    for strides, padding, dilations in CONV_CASES[:3]:
        check_op(
            lambda a, b: tf.nn.conv3d(a, b, strides, padding, dilations=dilations),
            [x, f],
            lambda a, b: ref_conv3d(a, b, strides, padding, dilations).astype(dtype),
            rtol=1e-2,
            atol=1e-2,
        )


@pytest.mark.parametrize("dtype", [np.float16, np.float32, ml_dtypes.bfloat16])
def test_max_pool3d_every_dtype(dtype):
    x = np.random.RandomState(3).permutation(60).reshape(1, 3, 4, 5, 1).astype(dtype)

    def ref(v):
        out = np.zeros((1, 2, 2, 3, 1), dtype)
        for o in np.ndindex(2, 2, 3):
            lo = [o[0] * 2 - 0, o[1] * 2, o[2] * 2 - 0]
            win = v[0, lo[0] : lo[0] + 2, lo[1] : lo[1] + 2, lo[2] : lo[2] + 2, 0]
            out[(0, *o, 0)] = win.max()
        return out

    check_op(lambda a: tf.nn.max_pool3d(a, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "SAME"), [x], ref)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, ml_dtypes.bfloat16])
def test_avg_pool3d_every_dtype(dtype):
    x = np.random.RandomState(4).randint(0, 8, (1, 3, 4, 5, 2)).astype(dtype)

    def ref(v):
        out = np.zeros((1, 2, 2, 3, 2))
        for o in np.ndindex(2, 2, 3):
            win = v[0, o[0] * 2 : o[0] * 2 + 2, o[1] * 2 : o[1] * 2 + 2, o[2] * 2 : o[2] * 2 + 2]
            out[(0, *o)] = win.astype(np.float64).mean(axis=(0, 1, 2))  # only real cells
        return out.astype(dtype)

    check_op(
        lambda a: tf.nn.avg_pool3d(a, [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], "SAME"),
        [x],
        ref,
        rtol=1e-2,
        atol=1e-2,
    )


def test_ncdhw_equals_ndhwc():
    xc = np.ascontiguousarray(X.transpose(0, 4, 1, 2, 3))

    def to_c(a):
        return np.transpose(a, (0, 4, 1, 2, 3))

    strides, padding, _dilations = CONV_CASES[1]
    cs = [1, 1, strides[1], strides[2], strides[3]]
    got = run(lambda a, b: tf.nn.conv3d(a, b, cs, padding, data_format="NCDHW"), [xc, F])
    np.testing.assert_allclose(got, to_c(REF["conv1"]), rtol=1e-4, atol=1e-4)
    ks, ss, pad = POOL_CASES[1]
    kc, sc = [1, 1, *ks[1:4]], [1, 1, *ss[1:4]]
    for kind, fn in (("max", tf.nn.max_pool3d), ("avg", tf.nn.avg_pool3d)):
        got = run(lambda a, fn=fn: fn(a, kc, sc, pad, data_format="NCDHW"), [xc])
        np.testing.assert_allclose(got, to_c(REF[f"{kind}1"]), rtol=1e-5, atol=1e-5)


def test_shapes_and_errors():
    x = tf.placeholder(tf.float32, [None, 8, None, 6, 3])
    y = tf.nn.conv3d(x, tf.zeros([3, 3, 3, 3, 5]), [1, 2, 2, 2, 1], "SAME")
    assert y.shape.as_list() == [None, 4, None, 3, 5]
    p = tf.nn.max_pool3d(x, 2, 2, "VALID")
    assert p.shape.as_list() == [None, 4, None, 3, 3]
    with pytest.raises(ValueError, match="Depth of input"):
        tf.nn.conv3d(x, tf.zeros([3, 3, 3, 4, 5]), [1, 1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="batch and depth"):
        tf.nn.conv3d(x, tf.zeros([3, 3, 3, 3, 5]), [2, 1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="padding"):
        tf.nn.avg_pool3d(x, 2, 2, "FULL")
    with pytest.raises(ValueError, match="5 elements|length"):
        tf.nn.max_pool3d(x, [1, 2, 2, 1], 2, "SAME")
    with pytest.raises(errors.InvalidArgumentError, match="depth"):
        u = tf.placeholder(tf.float32)
        with tf.Session() as sess:
            sess.run(tf.nn.conv3d(u, tf.zeros([1, 1, 1, 2, 1]), [1] * 5, "SAME"), {u: X})


def test_one_shape_function_for_2d_and_3d_layouts():
    """nn_conv's shape helpers serve both ranks: the layout comes from `data_format`."""
    assert spatial_axes("NHWC") == (1, 2, 3) and spatial_axes("NCHW") == (2, 3, 1)
    assert spatial_axes("NDHWC") == (1, 2, 3, 4) and spatial_axes("NCDHW") == (2, 3, 4, 1)
    with pytest.raises(ValueError, match="Unknown data_format 'NWC'"):
        spatial_axes("NWC")
    assert spatial_attr([1, 1, 2, 3, 4], "strides", "NCDHW") == (2, 3, 4)
    x = tf.placeholder(tf.float32, [2, 3, 8, None, 6])  # NCDHW
    y = tf.nn.conv3d(x, tf.zeros([3, 3, 3, 3, 5]), [1, 1, 2, 2, 2], "SAME", data_format="NCDHW")
    assert y.shape.as_list() == [2, 5, 4, None, 3]
    p = tf.nn.avg_pool3d(x, [1, 1, 2, 2, 2], [1, 1, 2, 2, 2], "VALID", data_format="NCDHW")
    assert p.shape.as_list() == [2, 3, 4, None, 3]


@pytest.mark.parametrize("case", [0, 1, 2])
def test_conv3d_gradients_numeric(case):
    strides, padding, dilations = CONV_CASES[case]
    x = np.random.RandomState(5).randn(1, 4, 3, 3, 2)
    f = np.random.RandomState(6).randn(2, 2, 2, 2, 2)
    check_gradients(lambda a, b: tf.nn.conv3d(a, b, strides, padding, dilations=dilations), [x, f])


def test_conv3d_backprop_second_order_and_pool_gradients():
    x = np.random.RandomState(7).randn(1, 3, 4, 3, 2)
    f = np.random.RandomState(8).randn(2, 2, 2, 2, 3)
    dy = np.random.RandomState(9).randn(1, 2, 2, 2, 3)
    check_gradients(
        lambda b, g: tf.nn.conv3d_transpose(g, b, [1, 3, 4, 3, 2], [1, 2, 2, 2, 1], "SAME"),
        [f, dy],
    )
    check_gradients(
        lambda a, g: tf.nn.conv3d_backprop_filter_v2(
            a, [2, 2, 2, 2, 3], g, [1, 2, 2, 2, 1], "SAME"
        ),
        [x, dy],
    )
    check_gradients(lambda a: tf.nn.avg_pool3d(a, 2, 2, "SAME"), [x])
    distinct = np.random.RandomState(10).permutation(72).reshape(1, 3, 4, 3, 2).astype(np.float32)
    check_gradients(lambda a: tf.nn.max_pool3d(a, 2, [1, 1, 2, 1, 1], "SAME"), [distinct])


def test_layers_3d():
    x = tf.placeholder(tf.float32, [None, 6, 8, 8, 3])
    h = tf.layers.conv3d(x, 4, 3, padding="same", activation=tf.nn.relu, name="c3")
    assert h.shape.as_list() == [None, 6, 8, 8, 4]
    p = tf.layers.max_pooling3d(h, 2, 2)
    a = tf.layers.average_pooling3d(h, [2, 2, 2], 2, padding="same")
    t = tf.layers.conv3d_transpose(p, 2, 2, strides=2, name="t3")
    assert p.shape.as_list() == a.shape.as_list() == [None, 3, 4, 4, 4]
    assert t.shape.as_list() == [None, 6, 8, 8, 2]
    kernel = next(v for v in tf.trainable_variables() if v.name == "c3/kernel:0")
    assert kernel.shape.as_list() == [3, 3, 3, 3, 4]
    layer = tf.layers.Conv3D(2, (1, 2, 3), data_format="channels_first")
    assert layer.apply(tf.zeros([1, 3, 4, 5, 6])).shape.as_list() == [1, 2, 4, 4, 4]
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        out = sess.run([h, p, a, t], {x: np.ones((2, 6, 8, 8, 3))})
    assert [o.shape for o in out] == [
        (2, 6, 8, 8, 4),
        (2, 3, 4, 4, 4),
        (2, 3, 4, 4, 4),
        (2, 6, 8, 8, 2),
    ]
    assert isinstance(tf.layers.MaxPooling3D(2, 2), tf.layers.Layer)
    assert isinstance(tf.layers.AveragePooling3D(2, 2), tf.layers.Layer)
    assert isinstance(tf.layers.Conv3DTranspose(2, 2), tf.layers.Layer)
