"""tf.linalg.expm against scipy.linalg.expm on every dtype, across the norms that select each
Pade order and the squaring loop, batches of known and unknown shape, and its gradient (through
MatMul, MatrixSolve, SelectV2 and the while_loop) against a numeric Jacobian."""

import numpy as np
import pytest
import scipy.linalg

import flowgraph as tf
from flowgraph.testing.gradient_checker import check_gradients

TOL = {np.float16: 2e-3, np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-12}
TOL[np.complex128] = 1e-12


def _reference(a):
    wide = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    return np.stack([scipy.linalg.expm(m) for m in wide.reshape(-1, *a.shape[-2:])]).reshape(
        a.shape
    )


@pytest.mark.parametrize("dtype", list(TOL))
@pytest.mark.parametrize("scale", [0.01, 0.3, 1.2, 4.0, 12.0])  # each Pade order, and squaring
def test_expm_matches_scipy(dtype, scale):
    rng = np.random.RandomState(int(scale * 100))
    a = rng.randn(2, 3, 3) * scale
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.randn(2, 3, 3) * scale
    a = a.astype(dtype)
    with tf.Session() as sess:
        got = sess.run(tf.linalg.expm(a))
    want = _reference(a)
    if np.abs(want).max() > np.finfo(dtype).max:  # exp overflows half: inf, as the type says
        with np.errstate(over="ignore"):
            want = want.astype(dtype)
    assert got.dtype == dtype and got.shape == a.shape
    np.testing.assert_allclose(
        got,
        want,
        rtol=TOL[dtype],
        atol=TOL[dtype] * np.abs(want[np.isfinite(want)]).max(initial=1.0),
    )


def test_expm_shapes_and_special_values():
    x = tf.placeholder(tf.float64, [None, 2, 2])
    y = tf.linalg.expm(x)
    rotation = np.array([[[0.0, 1.0], [-1.0, 0.0]]])
    with tf.Session() as sess:
        got = sess.run(y, {x: np.concatenate([rotation, np.zeros((1, 2, 2))])})
        np.testing.assert_allclose(got[0], [[np.cos(1), np.sin(1)], [-np.sin(1), np.cos(1)]])
        np.testing.assert_allclose(got[1], np.eye(2))
        u = tf.placeholder(tf.float32)
        np.testing.assert_allclose(
            sess.run(tf.linalg.expm(u), {u: np.diag([1.0, 2.0]).astype(np.float32)}),
            np.diag(np.exp([1.0, 2.0])),
            rtol=1e-6,
        )
        assert np.isnan(sess.run(tf.linalg.expm([[np.inf, 0.0], [0.0, 1.0]]))).all()
    assert tf.linalg.expm(tf.zeros([4, 0, 0])).shape.as_list() == [4, 0, 0]
    with pytest.raises(ValueError, match="int32"):
        tf.linalg.expm(tf.constant([[1, 2], [3, 4]]))


@pytest.mark.parametrize("scale", [0.1, 3.0])  # without and with squarings
def test_expm_gradient(scale):
    a = np.random.RandomState(1).randn(3, 3) * scale
    check_gradients(tf.linalg.expm, [a])
